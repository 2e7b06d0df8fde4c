#!/usr/bin/env bash
# cli_crash.sh — crash consistency of the results directory (TAP). A small sweep is killed
# (SIGKILL, through the DB_FAULT_KILL hook of report/results_dir.c) just before each of its
# write / fsync / rename boundaries in turn, then resumed to the end; and a resume of a
# directory holding a partly written group and a point's rows cut short is killed at each of
# its own boundaries, then resumed again. After every kill the directory must be consistent
# (tests/results_check.py: points.done ids distinct, a summary row for each, rows of at most
# one unfinished point), a meta.json must be there once a point is listed, and the resume that
# follows must end with every point exactly once and no torn record.
set -u

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
. "$ROOT/tests/tap.sh"
need_models
need_results_check
make_tmp crash
cd "$ROOT" || exit 1
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1

# one group of 3 points (ar, dflash2 at B 4 and 8): a kill between their commits leaves a group
# written in part, which the resume forgets and runs again
sweep=(run --target "$ROOT/models/tiny-qwen3" --drafter "$ROOT/models/tiny-qwen3-dflash2-b16"
       --dataset math --max-samples 2 --max-new-tokens 8 --warmup 0 -r 1 --min-time 0 --threads 1
       --variant ar,dflash2 -c 1 -B 4,8 -o md)
points=3
# a run killed at boundary $1 (the shell's "Killed" note kept out of the test's output)
killed() {
    local k=$1
    shift
    { DB_FAULT_KILL=$k "$BIN" "$@" >/dev/null 2>"$tmp/err"; } 2>/dev/null
}

# the boundaries of an uninterrupted fresh run
DB_FAULT_KILL_LOG="$tmp/bounds" "$BIN" "${sweep[@]}" --out "$tmp/whole" >/dev/null 2>"$tmp/err"
rc=$?
nb=$({ wc -l <"$tmp/bounds"; } 2>/dev/null || echo 0)
res=$("$PY" "$CHECK" "$tmp/whole" "$points")
ok "$([ "$rc" = 0 ] && [ "$res" = OK ] && [ "$nb" -gt 20 ]; echo $?)" "an uninterrupted sweep: exit $rc, $nb boundaries ($res)"
[ "$rc" = 0 ] || diag <"$tmp/err"

# after a kill: consistent; a meta.json once a point is listed
after_kill() {
    local d=$1 res
    [ -d "$d" ] || { echo OK; return; }
    res=$("$PY" "$CHECK" "$d")
    if [ "$res" = OK ] && [ -s "$d/points.done" ] && [ ! -f "$d/meta.json" ]; then res="points listed, no meta.json"; fi
    echo "$res"
}

# every boundary of the fresh run
bad=0
for k in $(seq 1 "$nb"); do
    d="$tmp/f$k"
    killed "$k" "${sweep[@]}" --out "$d"
    rc=$?
    res=$(after_kill "$d")
    # a directory killed before its points.done holds no results: --resume refuses it, and a
    # fresh run takes it (it is empty)
    if [ -f "$d/points.done" ] || [ -f "$d/meta.json" ]; then mode=(--resume "$d"); else mode=(--out "$d"); fi
    "$BIN" "${sweep[@]}" "${mode[@]}" >/dev/null 2>"$tmp/err2"
    rc2=$?
    fin=$("$PY" "$CHECK" "$d" "$points")
    if [ "$rc" != 137 ] || [ "$res" != OK ] || [ "$rc2" != 0 ] || [ "$fin" != OK ]; then
        bad=$((bad + 1))
        echo "kill at boundary $k ($(sed -n "${k}p" "$tmp/bounds")): exit $rc, '$res'; resumed: exit $rc2, '$fin'" | diag
        diag <"$tmp/err2"
    fi
done
ok "$bad" "fresh run killed at each of its $nb boundaries: consistent, resumed to every point once ($bad bad)"

# a directory to resume: two of the group's points listed, the third's rows written in part
kill_at=0
n_fd=0
while read -r num what; do
    [ "$what" = fdatasync ] || continue
    n_fd=$((n_fd + 1))
    # the ar point: summary, histogram, requests (no acceptance rows) and points.done: 4
    # fdatasyncs; dflash2 B4: 5; the 11th is the dflash2 B8 point's second table
    if [ "$n_fd" = 11 ]; then kill_at=$num; break; fi
done <"$tmp/bounds"
killed "$kill_at" "${sweep[@]}" --out "$tmp/part"
listed=$({ wc -l <"$tmp/part/points.done"; } 2>/dev/null || echo 0)
ok "$([ "$listed" = 2 ] && [ "$("$PY" "$CHECK" "$tmp/part")" = OK ]; echo $?)" \
    "a partly written group to resume (killed at boundary $kill_at: $listed points listed)"
rm -f "$tmp/rbounds"
cp -r "$tmp/part" "$tmp/rlog"
DB_FAULT_KILL_LOG="$tmp/rbounds" "$BIN" "${sweep[@]}" --resume "$tmp/rlog" >/dev/null 2>"$tmp/err"
rc=$?
nr=$({ wc -l <"$tmp/rbounds"; } 2>/dev/null || echo 0)
ok "$([ "$rc" = 0 ] && [ "$("$PY" "$CHECK" "$tmp/rlog" "$points")" = OK ]; echo $?)" "its resume: exit $rc, $nr boundaries"
bad=0
for k in $(seq 1 "$nr"); do
    d="$tmp/r$k"
    cp -r "$tmp/part" "$d"
    killed "$k" "${sweep[@]}" --resume "$d"
    rc=$?
    res=$(after_kill "$d")
    "$BIN" "${sweep[@]}" --resume "$d" >/dev/null 2>"$tmp/err2"
    rc2=$?
    fin=$("$PY" "$CHECK" "$d" "$points")
    if [ "$rc" != 137 ] || [ "$res" != OK ] || [ "$rc2" != 0 ] || [ "$fin" != OK ]; then
        bad=$((bad + 1))
        echo "resume killed at boundary $k ($(sed -n "${k}p" "$tmp/rbounds")): exit $rc, '$res'; resumed: exit $rc2, '$fin'" | diag
        diag <"$tmp/err2"
    fi
done
ok "$bad" "resume killed at each of its $nr boundaries: consistent, resumed to every point once ($bad bad)"
done_testing
