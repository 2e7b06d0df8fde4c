#!/usr/bin/env bash
# cli_lock.sh — one writer per results directory (TAP). meson's test_env sets DB_BIN and
# DB_SOURCE_ROOT.
#   two `run --resume DIR` of one directory started together (a requeued Slurm job): one
#   finishes the sweep (exit 0), the other exits 2 with one line naming the first one's pid and
#   host, and DIR ends with every point exactly once (tests/results_check.py); 20 tries;
#   a `--resume DIR` while the fresh run writing DIR is still going: exit 2, the run unharmed.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
need_models
need_results_check
make_tmp cli-lock
cd "$ROOT" || exit 1
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1

# 4 points in 2 groups (c1, c2); the template lacks the c2 group, which a resume runs again
sweep=(--dataset math --max-samples 3 -n 16 --warmup 0 -r 1 --min-time 0 --threads 1 -v ar,dflash2 -c 1,2 -B 4)
points=4
"$BIN" run "${sweep[@]}" --out "$tmp/full" >/dev/null 2>"$tmp/full.err"
rc=$?
ok "$rc" "the sweep runs (exit $rc)"
[ "$rc" = 0 ] || { diag <"$tmp/full.err"; done_testing; exit; }
cp -r "$tmp/full" "$tmp/template"
grep -v '|c2|' "$tmp/full/points.done" >"$tmp/template/points.done"
left=$(($(wc -l <"$tmp/full/points.done") - $(wc -l <"$tmp/template/points.done")))
ok "$([ "$left" -gt 0 ]; echo $?)" "the template leaves $left points to run"

host=$(uname -n)
good=0
for i in $(seq 1 20); do
    d="$tmp/t$i"
    cp -r "$tmp/template" "$d"
    "$BIN" run --resume "$d" >/dev/null 2>"$d.a.err" &
    pa=$!
    "$BIN" run --resume "$d" >/dev/null 2>"$d.b.err" &
    pb=$!
    wait "$pa"
    ra=$?
    wait "$pb"
    rb=$?
    if [ "$ra" = 0 ] && [ "$rb" = 2 ]; then win=$pa lose=$d.b.err
    elif [ "$ra" = 2 ] && [ "$rb" = 0 ]; then win=$pb lose=$d.a.err
    else win="" lose=""
    fi
    res=$("$PY" "$CHECK" "$d" "$points")
    why=""
    [ -n "$win" ] || why="exit statuses $ra and $rb, want 0 and 2"
    [ -z "$why" ] && [ "$(wc -l <"$lose")" != 1 ] && why="$(wc -l <"$lose") lines from the refused one"
    [ -z "$why" ] && ! grep -qF "in use by another dflash-bench run (pid $win on host $host)" "$lose" &&
        why="the refused one does not name pid $win on $host: $(cat "$lose")"
    [ -z "$why" ] && [ "$res" != OK ] && why="results: $res"
    if [ -z "$why" ]; then
        good=$((good + 1))
    else
        echo "try $i: $why" | diag
        cat "$d.a.err" "$d.b.err" | diag
    fi
done
ok "$([ "$good" = 20 ]; echo $?)" "two resumes at once: one finishes, the other exits 2 naming it, every point once ($good of 20)"

# a resume while the fresh run is still writing: refused, the run completes alone
"$BIN" run "${sweep[@]}" -n 48 --out "$tmp/live" >/dev/null 2>"$tmp/live.err" &
pid=$!
wait_points "$tmp/live" 1 "$pid"
if kill -0 "$pid" 2>/dev/null; then
    "$BIN" run --resume "$tmp/live" >/dev/null 2>"$tmp/live2.err"
    rc=$?
    alive=$(kill -0 "$pid" 2>/dev/null && echo 1 || echo 0)
    wait "$pid"
    rw=$?
    res=$("$PY" "$CHECK" "$tmp/live" "$points")
    if [ "$alive" = 1 ]; then
        ok "$([ "$rc" = 2 ] && grep -qF "pid $pid on host $host" "$tmp/live2.err" && [ "$rw" = 0 ] && [ "$res" = OK ]; echo $?)" \
            "--resume of a directory a run is writing: exit $rc naming it; the run exits $rw ($res)"
        [ "$rc" = 2 ] || diag <"$tmp/live2.err"
    else
        ok 0 "the run finished before the resume was refused # SKIP"
    fi
else
    wait "$pid"
    ok 0 "the run finished before its first point was seen # SKIP"
fi
done_testing
