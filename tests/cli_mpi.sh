#!/usr/bin/env bash
# cli_mpi.sh — `mpirun -np 2 dflash-bench run ... --out DIR` on the embedded pair (TAP): rank r
# runs shard r/2 into DIR-shards/r, rank 0 merges them into DIR. Checks: exit 0; the merged
# points == a single-process run's, every non-timing column equal (tests/results_same.py); each
# rank's directory records its shard r/2; the ranks split the node's cores (threads per rank <=
# max(1, cores / 2)); nothing on stdout; --shard under mpirun refused (exit 2). Skips when the
# binary was built without MPI (-Dmpi) or mpirun (Debian: openmpi-bin) is missing. As root (CI)
# Open MPI needs OMPI_ALLOW_RUN_AS_ROOT*; containers without cross-memory attach need
# btl_vader_single_copy_mechanism=none; 2 ranks on fewer cores need oversubscription.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
need_models
need_results_check
"$BIN" --version | grep -q ' mpi=1' || skip_all "built without MPI (meson setup -Dmpi=enabled; Debian: libopenmpi-dev)"
command -v mpirun >/dev/null || skip_all "no mpirun (Debian: openmpi-bin)"
make_tmp cli-mpi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # Open MPI's own allocations at exit
SAME="$ROOT/tests/results_same.py"

sweep=(--dataset math,code -c 1,2 -v ar,dflash2 -B 8 -n 8 --max-samples 2 -r 1 --warmup 0 -o csv)
"$BIN" run "${sweep[@]}" --threads 1 --out "$tmp/one" >/dev/null 2>"$tmp/one.err"
ok $? "single-process sweep exits 0"
mpirun -np 2 "$BIN" run "${sweep[@]}" --out "$tmp/mpi" >"$tmp/mpi.out" 2>"$tmp/mpi.err"
rc=$?
ok "$([ "$rc" = 0 ] && grep -q "results in $tmp/mpi" "$tmp/mpi.err"; echo $?)" "mpirun -np 2 run exits 0, rank 0 merged (rc $rc)"
[ "$rc" = 0 ] || tail -5 "$tmp/mpi.err" | diag
ok "$([ ! -s "$tmp/mpi.out" ]; echo $?)" "nothing on stdout (each rank's table is one shard's)"
ok "$([ "$(sort "$tmp/mpi/points.done" 2>/dev/null)" = "$(sort "$tmp/one/points.done")" ]; echo $?)" \
    "merged point set == single-process sweep's ($(wc -l <"$tmp/one/points.done") points)"
res=$("$PY" "$SAME" "$tmp/one" "$tmp/mpi" 2>&1)
ok "$([ "$res" = OK ]; echo $?)" "every non-timing column equal"
[ "$res" = OK ] || echo "$res" | diag
cores=$(nproc --all)
max=$((cores / 2 > 1 ? cores / 2 : 1))
shards=$("$PY" -c '
import csv, json, sys
d, mx = sys.argv[1], int(sys.argv[2])
for r in (0, 1):
    m = json.load(open(f"{d}-shards/{r}/meta.json"))
    rows = list(csv.DictReader(open(f"{d}-shards/{r}/summary.csv")))
    t = {int(x["threads"]) for x in rows}
    ok = m["shard"]["index"] == r and m["shard"]["count"] == 2 and rows and max(t) <= mx
    i, c = m["shard"]["index"], m["shard"]["count"]
    print(f"rank {r}: shard {i}/{c}, threads {sorted(t)}", "ok" if ok else "bad")
' "$tmp/mpi" "$max" 2>&1)
ok "$(! echo "$shards" | grep -qv ' ok$'; echo $?)" "rank r ran shard r/2 with at most $max of $cores cores"
echo "$shards" | diag
mpirun -np 2 "$BIN" run "${sweep[@]}" --shard 0/2 --out "$tmp/bad" >/dev/null 2>"$tmp/bad.err"
rc=$?
ok "$([ "$rc" = 2 ] && grep -q "under mpirun, --shard" "$tmp/bad.err" && [ ! -e "$tmp/bad" ]; echo $?)" \
    "--shard under mpirun: refused, exit 2 (rc $rc)"

done_testing
