#!/usr/bin/env bash
# cli_limits.sh — what the CLI does at the edges of the machine (TAP): exit under a tight
# `ulimit -v`, SIGTERM in the middle of a point. meson's test_env sets DB_BIN, DB_SOURCE_ROOT
# and DB_SANITIZE (the build's b_sanitize).
#   (ulimit -v 850000; dflash-bench info) exits 0 within a few seconds (OpenBLAS's thread pool
#   once hung the exit);
#   SIGTERM during a long point: exit 143 within 2 s (a cycle, not the rest of the pass), the
#   resume command on stderr, the point dropped.
set -u

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set (run through meson test)}

. "$(dirname "$0")/tap.sh"
make_tmp cli-limits
out="$tmp/stdout"
errf="$tmp/stderr"

now() { date +%s.%N; }
# seconds from $1 to $2, as an integer number of milliseconds
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

# ---- a tight address-space limit: the exit must not hang ----
# the sanitizers reserve terabytes of shadow memory: no ulimit -v under them
if [ "${DB_SANITIZE:-none}" = none ]; then
    t0=$(now)
    (ulimit -v 850000; exec timeout 20 "$BIN" info) >"$out" 2>"$errf"
    rc=$?
    t1=$(now)
    ok "$([ "$rc" = 0 ] && [ "$(ms "$t0" "$t1")" -lt 5000 ]; echo $?)" \
        "(ulimit -v 850000; info) exits 0 within 5 s (rc $rc, $(ms "$t0" "$t1") ms)"
    [ "$rc" = 0 ] || diag <"$errf"
else
    ok 0 "ulimit -v under $DB_SANITIZE # SKIP"
fi

# ---- SIGTERM inside a point ----
# two groups (concurrency 4, then 1): the second runs 4 requests of 800 tokens one at a time,
# seconds even on a quiet machine; the signal lands in it
sweep=(run --synthetic --target "$ROOT/models/tiny-qwen3" --variant ar --concurrency 4,1
    --max-new-tokens 800 --max-samples 4 --repetitions 1 --warmup 0)
"$BIN" "${sweep[@]}" --out "$tmp/term" >/dev/null 2>"$tmp/term.err" &
pid=$!
wait_points "$tmp/term" 1 "$pid"
sleep 0.5
t0=$(now)
kill -TERM "$pid" 2>/dev/null
alive=$?
wait "$pid"
rc=$?
t1=$(now)
if [ "$alive" != 0 ]; then
    ok 0 "SIGTERM: the sweep had ended first # SKIP"
else
    ok "$([ "$rc" = 143 ] && [ "$(ms "$t0" "$t1")" -lt 2000 ]; echo $?)" \
        "SIGTERM in a point: exit 143 within 2 s (rc $rc, $(ms "$t0" "$t1") ms)"
    ok "$(grep -q 'finish the sweep with: .*run --resume' "$tmp/term.err"; echo $?)" \
        "SIGTERM in a point: stderr gives the resume command"
    ok "$([ "$(wc -l <"$tmp/term/points.done")" = 1 ]; echo $?)" \
        "SIGTERM in a point: the point in progress is dropped (points.done keeps 1)"
    diag <"$tmp/term.err"
fi

done_testing
