# tap.sh — TAP for the shell tests, sourced after `set -u`:
#   ok STATUS DESCRIPTION   one test line (STATUS 0 passes)
#   diag < TEXT             TEXT as TAP comments
#   skip_all REASON         the plan "1..0 # SKIP REASON", then exit 0
#   need_models             skip_all unless the embedded pair is in $DB_SOURCE_ROOT/models/
#   make_tmp NAME           a fresh directory in $tmp, removed on exit
#   done_testing            the plan line; the exit status says whether every test passed
n=0
failed=0
ok() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
diag() { sed 's/^/# /'; }
skip_all() {
    echo "1..0 # SKIP $1"
    exit 0
}
need_models() {
    local m="${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}/models"
    [ -f "$m/tiny-qwen3/config.json" ] && [ -f "$m/tiny-qwen3-dflash2-b16/config.json" ] ||
        skip_all "the embedded pair is not in models/"
}
make_tmp() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/db-$1-XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
    trap 'rm -rf "$tmp"' EXIT
}
done_testing() {
    echo "1..$n"
    [ "$failed" = 0 ]
}
