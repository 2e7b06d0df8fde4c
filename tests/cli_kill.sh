#!/usr/bin/env bash
# cli_kill.sh — kill anywhere (TAP): a sweep is SIGKILLed at 20 moments drawn from a seeded
# generator (DB_KILL_SEED, default 1) and resumed after each. After every kill the results
# directory must be consistent (tests/results_check.py: points.done ids distinct, a summary row
# for each, rows of at most one unfinished point); a directory whose sweep completes, and the
# last one once resumed to the end, must hold every point exactly once with no torn record in
# any table. Extends the single kill + resume of cli_run.sh to arbitrary moments: model loading,
# mid-point, between a table's append and points.done, during the resume cleanup.
set -u

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
. "$ROOT/tests/tap.sh"
need_models
need_results_check
make_tmp kill
cd "$ROOT" || exit 1
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1

# 10 points: ar + dflash2-bare and dflash2 at B 4 and 8, concurrency 1 and 2
sweep=(run --target "$ROOT/models/tiny-qwen3" --drafter "$ROOT/models/tiny-qwen3-dflash2-b16"
       --dataset math --max-samples 2 --max-new-tokens 8 --warmup 0 --min-time 0 -r 2 --max-rounds 2 --threads 1
       --variant ar,dflash2-bare,dflash2 -c 1,2 -B 4,8 -o md)
points=10

# how long one whole sweep takes here (sanitizers, load): the kills fall inside it
t0=$(date +%s%N)
"$BIN" "${sweep[@]}" --out "$tmp/timing" >/dev/null 2>"$tmp/timing.err"
rc=$?
span_ms=$((($(date +%s%N) - t0) / 1000000))
res=$("$PY" "$CHECK" "$tmp/timing" "$points")
ok "$([ "$rc" = 0 ] && [ "$res" = OK ]; echo $?)" "an uninterrupted sweep: exit $rc in $span_ms ms ($res)"
[ "$rc" = 0 ] || diag <"$tmp/timing.err"

RANDOM=${DB_KILL_SEED:-1}
round=1
dir="$tmp/r$round"
for k in $(seq 1 20); do
    if [ -d "$dir" ]; then mode=(--resume "$dir"); else mode=(--out "$dir"); fi
    "$BIN" "${sweep[@]}" "${mode[@]}" >/dev/null 2>"$tmp/err" &
    pid=$!
    # a moment in [0, 1.2 * span): some kills land after the sweep finished (nothing to kill)
    ms=$(((RANDOM * 32768 + RANDOM) % (span_ms * 12 / 10 + 1)))
    sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rc=$?
    done_n=$({ wc -l <"$dir/points.done"; } 2>/dev/null || echo 0)
    if [ -d "$dir" ]; then res=$("$PY" "$CHECK" "$dir"); else res=OK; fi
    ok "$([ "$res" = OK ] && { [ "$rc" = 137 ] || [ "$rc" = 0 ]; }; echo $?)" \
        "kill $k at ${ms} ms (round $round, exit $rc, $done_n points done): consistent ($res)"
    [ "$rc" = 137 ] || [ "$rc" = 0 ] || diag <"$tmp/err"
    if [ "$rc" = 0 ]; then # the sweep completed before the kill: check it whole, start anew
        res=$("$PY" "$CHECK" "$dir" "$points")
        ok "$([ "$res" = OK ]; echo $?)" "round $round completed: every point exactly once ($res)"
        round=$((round + 1))
        dir="$tmp/r$round"
    fi
done
if [ -d "$dir" ]; then mode=(--resume "$dir"); else mode=(--out "$dir"); fi
"$BIN" "${sweep[@]}" "${mode[@]}" >/dev/null 2>"$tmp/err"
rc=$?
res=$("$PY" "$CHECK" "$dir" "$points")
ok "$([ "$rc" = 0 ] && [ "$res" = OK ]; echo $?)" "round $round run to the end: exit $rc, every point exactly once, no torn record ($res)"
[ "$rc" = 0 ] || diag <"$tmp/err"
done_testing
