# tap.sh — TAP for the shell tests, sourced after `set -u`:
#   ok STATUS DESCRIPTION   one test line (STATUS 0 passes)
#   diag < TEXT             TEXT as TAP comments
#   skip_all REASON         the plan "1..0 # SKIP REASON", then exit 0
#   need_models             skip_all unless the embedded pair is in $DB_SOURCE_ROOT/models/
#   need_results_check      skip_all without /usr/bin/python3; sets PY and CHECK
#                           (tests/results_check.py: is a results directory consistent)
#   make_tmp NAME           a fresh directory in $tmp, removed on exit
#   wait_points DIR N PID   wait until DIR/points.done lists N points or PID has exited (30 s at most)
#   done_testing            the plan line; the exit status says whether every test passed
#   run ARGS...             $BIN ARGS, stdout into $out, stderr into $errf, status in $rc
#   expect_refused DESC NEEDLE... -- ARGS...
#                           one test: $BIN ARGS exits 2 with nothing on stdout and one line on
#                           stderr holding every NEEDLE (bad input, the CLI's contract)
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
need_results_check() {
    PY=/usr/bin/python3
    CHECK="${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}/tests/results_check.py"
    [ -x "$PY" ] || skip_all "/usr/bin/python3 (checks the results directories) is missing"
}
make_tmp() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/db-$1-XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
    trap 'rm -rf "$tmp"' EXIT
}
# until dir $1 lists $2 done points or process $3 has ended; at most 180 s (under ASan on a
# busy 2-core machine a sweep took more than 30 s to finish its first points)
wait_points() {
    for _ in $(seq 1 3600); do
        [ -f "$1/points.done" ] && [ "$(wc -l <"$1/points.done")" -ge "$2" ] && return
        kill -0 "$3" 2>/dev/null || return
        sleep 0.05
    done
}
done_testing() {
    echo "1..$n"
    [ "$failed" = 0 ]
}
run() {
    "$BIN" "$@" >"$out" 2>"$errf"
    rc=$?
}
expect_refused() {
    local desc=$1
    shift
    local needles=()
    while [ "$1" != "--" ]; do needles+=("$1"); shift; done
    shift
    run "$@"
    local lines bad=0 why=""
    lines=$(wc -l <"$errf")
    [ "$rc" = 2 ] || { bad=1; why="exit status $rc, want 2"; }
    [ "$bad" = 0 ] && [ "$lines" != 1 ] && { bad=1; why="$lines lines on stderr, want 1"; }
    [ "$bad" = 0 ] && [ -s "$out" ] && { bad=1; why="output on stdout"; }
    for nd in "${needles[@]+"${needles[@]}"}"; do
        [ "$bad" = 0 ] && ! grep -qF -- "$nd" "$errf" && { bad=1; why="message lacks '$nd'"; }
    done
    ok "$bad" "$desc"
    if [ "$bad" != 0 ]; then
        echo "$why" | diag
        diag <"$errf"
    fi
}
