#!/usr/bin/env bash
# fault_inject.sh — allocation and write failures (TAP). meson's test_env sets DB_BIN and
# DB_SOURCE_ROOT. Needs the embedded pair (models/).
#   Allocation: a small `run` and a `generate` log every allocation site they reach
#   (DB_FAULT_ALLOC_LOG, base/util.h); each site's first allocation is then failed once
#   (DB_FAULT_ALLOC=N): the command must exit 1 with one error line, no sanitizer report
#   (a leak, a bad access), and a results directory that is consistent (tests/results_check.py).
#   `plan`: the synthetic models' allocation sites failed once while its device probe holds
#   buffers on the backend (a failed load must leave the backend to free them: exit 1, one error
#   line, no sanitizer report). Only those sites: a plan measures the device for seconds (minutes
#   under the sanitizers), and its other sites are the loaders' and the engine's, failed above.
#   `merge` of two shards: every allocation site it reaches failed once: exit 1 (out of memory,
#   not bad input), one line, no sanitizer report, nothing written (no OUT, no temporary beside it).
#   `check-lossless` (prompts from a file, then random prompts): its own allocation sites
#   (cli_check.c; the loaders' and the engine's are failed above) failed once: exit 1, one line.
#   Writes: stdout on /dev/full; a results file reaching RLIMIT_FSIZE mid-sweep (exit 1, one
#   line naming the file), then --resume without the limit completes every point exactly once.
set -u

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
. "$ROOT/tests/tap.sh"
TARGET="$ROOT/models/tiny-qwen3"
DRAFTER="$ROOT/models/tiny-qwen3-dflash2-b16"
need_models
need_results_check
make_tmp fault
cd "$ROOT" || exit 1
# sanitizer reports must not be mistaken for the exit status 1 under test
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:exitcode=87"
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1

run_args=(run --target "$TARGET" --drafter "$DRAFTER" --dataset math --max-samples 1
          --max-new-tokens 4 --warmup 0 --min-time 0 -r 1 --threads 1 --variant ar,dflash2 -c 1 -B 4 -o csv)
gen_args=(generate --target "$TARGET" --drafter "$DRAFTER" --prompt "Hello there" -n 4 --threads 1)

# the error lines of a stderr: progress lines, warnings, the estimate and the closing "results in"
# are not errors
errors() { grep -v -E '^\[[0-9]+/[0-9]+( points)?\] |^[0-9]+/[0-9]+ points in |^results in |^warning: |^estimate: ' "$1"; }

# one failing allocation: status, one line, no sanitizer report, consistent results
fault_case() { # name, N, site, args...
    local name=$1 idx=$2 site=$3
    shift 3
    local out="$tmp/$name-$idx"
    local extra=()
    [ "$name" = run ] && extra=(--out "$out.d")
    DB_FAULT_ALLOC=$idx "$BIN" "$@" "${extra[@]}" >"$out.stdout" 2>"$out.stderr"
    local rc=$? lines msg res=OK
    lines=$(errors "$out.stderr" | wc -l)
    msg=$(errors "$out.stderr" | head -1)
    if [ "$name" = run ] && [ -d "$out.d" ]; then res=$("$PY" "$CHECK" "$out.d"); fi
    local good=1
    [ "$rc" = 1 ] && [ "$lines" = 1 ] && [ "$res" = OK ] &&
        ! grep -q -E 'Sanitizer|runtime error' "$out.stderr" && [[ $msg == "dflash-bench $name: "* ]] && good=0
    ok "$good" "$name, allocation $idx ($site) fails: exit $rc, '${msg:0:100}'"
    if [ "$good" != 0 ]; then
        head -20 "$out.stderr" | diag
        [ "$res" = OK ] || echo "results: $res" | diag
    fi
    rm -rf "$out.d" "$out.stdout" "$out.stderr"
}

for name in run generate; do
    if [ "$name" = run ]; then args=("${run_args[@]}"); else args=("${gen_args[@]}"); fi
    log="$tmp/$name.sites"
    extra=()
    [ "$name" = run ] && extra=(--out "$tmp/$name-ref")
    DB_FAULT_ALLOC_LOG=$log "$BIN" "${args[@]}" "${extra[@]}" >/dev/null 2>"$tmp/$name.stderr"
    rc=$?
    sites=$(wc -l <"$log" 2>/dev/null || echo 0)
    ok "$([ "$rc" = 0 ] && [ "$sites" -gt 0 ]; echo $?)" "$name without faults: exit $rc, $sites allocation sites"
    [ "$rc" = 0 ] || diag <"$tmp/$name.stderr"
    while read -r idx site; do
        fault_case "$name" "$idx" "$site" "${args[@]}"
    done <"$log"
done

# plan: the synthetic load's allocation sites of a small measured plan failed once
plan_args=(plan --target-config "$TARGET" --drafter-config "$DRAFTER" -c 1 -r 1 -n 4 --prompt-tokens 8
           --threads 1)
DB_FAULT_ALLOC_LOG="$tmp/plan.sites" "$BIN" "${plan_args[@]}" >/dev/null 2>"$tmp/plan.stderr"
rc=$?
grep 'synthetic\.c' "$tmp/plan.sites" >"$tmp/plan.synth" 2>/dev/null
sites=$(wc -l <"$tmp/plan.synth")
ok "$([ "$rc" = 0 ] && [ "$sites" -gt 0 ]; echo $?)" "plan without faults: exit $rc, $sites synthetic-load allocation sites"
while read -r idx site; do
    DB_FAULT_ALLOC=$idx "$BIN" "${plan_args[@]}" >/dev/null 2>"$tmp/plan-f.stderr"
    rc=$?
    lines=$(grep -v -E '^plan: ' "$tmp/plan-f.stderr" | wc -l)
    msg=$(grep -v -E '^plan: ' "$tmp/plan-f.stderr" | head -1)
    good=1
    [ "$rc" = 1 ] && [ "$lines" = 1 ] && [[ $msg == "dflash-bench plan: "* ]] && good=0
    grep -q -E 'Sanitizer|runtime error' "$tmp/plan-f.stderr" && good=1
    ok "$good" "plan, allocation $idx ($site) fails: exit $rc, '${msg:0:100}'"
    [ "$good" = 0 ] || head -20 "$tmp/plan-f.stderr" | diag
done <"$tmp/plan.synth"

# merge: two shards of a small sweep, then every allocation site of their merge failed once
shard_args=(run --target "$TARGET" --drafter "$DRAFTER" --dataset math --max-samples 1 --max-new-tokens 4
            --warmup 0 --threads 1 --variant ar,dflash2 -c 1,2 -B 4 -o csv)
"$BIN" "${shard_args[@]}" --shard 0/2 --out "$tmp/shard0" >/dev/null 2>"$tmp/shard0.err" &&
    "$BIN" "${shard_args[@]}" --shard 1/2 --out "$tmp/shard1" >/dev/null 2>"$tmp/shard1.err"
rc=$?
merge_args=(merge "$tmp/merged" "$tmp/shard0" "$tmp/shard1")
[ "$rc" = 0 ] && DB_FAULT_ALLOC_LOG="$tmp/merge.sites" "$BIN" "${merge_args[@]}" >/dev/null 2>"$tmp/merge.stderr"
rc=$?
sites=$(wc -l <"$tmp/merge.sites" 2>/dev/null || echo 0)
ok "$([ "$rc" = 0 ] && [ "$sites" -gt 0 ] && [ -d "$tmp/merged" ]; echo $?)" \
    "merge of two shards without faults: exit $rc, $sites allocation sites"
[ "$rc" = 0 ] || cat "$tmp"/shard[01].err "$tmp/merge.stderr" 2>/dev/null | diag
rm -rf "$tmp/merged"
while read -r idx site; do
    DB_FAULT_ALLOC=$idx "$BIN" "${merge_args[@]}" >/dev/null 2>"$tmp/merge-f.stderr"
    rc=$?
    lines=$(wc -l <"$tmp/merge-f.stderr")
    msg=$(head -1 "$tmp/merge-f.stderr")
    left=$(ls -d "$tmp"/merged* 2>/dev/null | wc -l)
    good=1
    [ "$rc" = 1 ] && [ "$lines" = 1 ] && [ "$left" = 0 ] && [[ $msg == "dflash-bench merge: "* ]] && good=0
    grep -q -E 'Sanitizer|runtime error' "$tmp/merge-f.stderr" && good=1
    ok "$good" "merge, allocation $idx ($site) fails: exit $rc, '${msg:0:100}'$([ "$left" = 0 ] || echo ", $left left behind")"
    [ "$good" = 0 ] || head -20 "$tmp/merge-f.stderr" | diag
    rm -rf "$tmp"/merged*
done <"$tmp/merge.sites"

# check-lossless: its own allocation sites, with a prompt file and with random prompts
printf '1 2 3 4\n5 6 7\n' >"$tmp/prompts.txt"
for src in file random; do
    if [ "$src" = file ]; then from=(--prompt-ids-file "$tmp/prompts.txt"); else from=(--random-prompts 2); fi
    check_args=(check-lossless --target "$TARGET" --drafter "$DRAFTER" "${from[@]}" -B 4 -n 4 -c 1 --threads 1)
    DB_FAULT_ALLOC_LOG="$tmp/check-$src.sites" "$BIN" "${check_args[@]}" >/dev/null 2>"$tmp/check.stderr"
    rc=$?
    grep 'cli_check\.c' "$tmp/check-$src.sites" >"$tmp/check-$src.own" 2>/dev/null
    sites=$(wc -l <"$tmp/check-$src.own")
    ok "$([ "$rc" = 0 ] && [ "$sites" -gt 0 ]; echo $?)" "check-lossless ($src prompts) without faults: exit $rc, $sites own allocation sites"
    [ "$rc" = 0 ] || diag <"$tmp/check.stderr"
    while read -r idx site; do
        DB_FAULT_ALLOC=$idx "$BIN" "${check_args[@]}" >/dev/null 2>"$tmp/check-f.stderr"
        rc=$?
        lines=$(wc -l <"$tmp/check-f.stderr")
        msg=$(head -1 "$tmp/check-f.stderr")
        good=1
        [ "$rc" = 1 ] && [ "$lines" = 1 ] && [[ $msg == "dflash-bench check-lossless: "* ]] && good=0
        grep -q -E 'Sanitizer|runtime error' "$tmp/check-f.stderr" && good=1
        ok "$good" "check-lossless ($src prompts), allocation $idx ($site) fails: exit $rc, '${msg:0:100}'"
        [ "$good" = 0 ] || head -20 "$tmp/check-f.stderr" | diag
    done <"$tmp/check-$src.own"
done

# ---- write failures ----
if [ -w /dev/full ]; then
    "$BIN" "${gen_args[@]}" >/dev/full 2>"$tmp/full.err"
    rc=$?
    ok "$([ "$rc" = 1 ] && [ "$(wc -l <"$tmp/full.err")" -ge 1 ] && grep -q 'standard output' "$tmp/full.err"; echo $?)" \
        "generate with stdout on /dev/full: exit $rc, '$(tail -1 "$tmp/full.err")'"
    "$BIN" "${run_args[@]}" --out "$tmp/full.d" >/dev/full 2>"$tmp/full2.err"
    rc=$?
    ok "$([ "$rc" = 1 ] && grep -q 'standard output' "$tmp/full2.err"; echo $?)" \
        "run -o csv with stdout on /dev/full: exit $rc, '$(errors "$tmp/full2.err" | tail -1)'"
fi

# a 6-point sweep whose tables outgrow 24 KiB after a few points (requests.csv grows several KiB
# a point: a first point that fails leaves no directory, which is not what this checks)
sweep=(run --target "$TARGET" --drafter "$DRAFTER" --dataset math --max-samples 2 --max-new-tokens 8
       --warmup 0 --min-time 0 --threads 1 --variant ar,dflash2 -c 1,2 -B 4,8 -o md)
(ulimit -f 24; exec "$BIN" "${sweep[@]}" --out "$tmp/fsize") >/dev/null 2>"$tmp/fsize.err"
rc=$?
done_before=$({ wc -l <"$tmp/fsize/points.done"; } 2>/dev/null || echo 0)
msg=$(errors "$tmp/fsize.err" | tail -1)
ok "$([ "$rc" = 1 ] && [ "$(errors "$tmp/fsize.err" | wc -l)" = 1 ] && [[ $msg == *".csv"* || $msg == *points.done* ]]; echo $?)" \
    "results file over RLIMIT_FSIZE: exit $rc after $done_before points, '$msg'"
res=$("$PY" "$CHECK" "$tmp/fsize")
ok "$([ "$res" = OK ]; echo $?)" "the results directory left is consistent ($res)"
"$BIN" "${sweep[@]}" --resume "$tmp/fsize" >/dev/null 2>"$tmp/fsize2.err"
rc=$?
res=$("$PY" "$CHECK" "$tmp/fsize" 6)
ok "$([ "$rc" = 0 ] && [ "$res" = OK ]; echo $?)" "--resume completes it: exit $rc, every point once ($res)"
[ "$rc" = 0 ] || diag <"$tmp/fsize2.err"
done_testing
