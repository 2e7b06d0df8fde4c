#!/usr/bin/env bash
# cli_slurm.sh — the Slurm recipe (scripts/slurm/) on a real single-node Slurm started here (TAP):
# its own munged (a fresh key, a socket in the test directory) and slurmctld + slurmd on
# localhost ports, as root; scripts/slurm/submit 3 shards of a small sweep as a job array plus the
# merge job chained with --dependency=afterok (--gres=none: the node has no GPU). Checks: the
# merged directory == a single-process run (point set, every non-timing column); the three
# shard directories; a failing array (a bad flag) leaves the merge job waiting on its never
# satisfied dependency and writes no merged directory. Skips without root or without Debian's
# slurm-wlm / munge. The daemons it started are stopped by their pids at the end.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
need_models
need_results_check
[ "$(id -u)" = 0 ] || skip_all "starts munged, slurmctld and slurmd: needs root"
for p in munged mungekey slurmctld slurmd sbatch squeue sinfo scancel; do
    command -v "$p" >/dev/null || skip_all "no $p (Debian: slurm-wlm, munge)"
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/db-cli-slurm-XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
pids=()
cleanup() {
    for f in slurmd slurmctld munged; do [ -f "$tmp/$f.pid" ] && kill "$(cat "$tmp/$f.pid")" 2>/dev/null; done
    sleep 0.5
    rm -rf "$tmp"
}
trap cleanup EXIT
SAME="$ROOT/tests/results_same.py"
host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/log" "$tmp/work"

mungekey -c -f -k "$tmp/munge.key" && chmod 600 "$tmp/munge.key"
munged --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" --pid-file="$tmp/munged.pid" \
    --log-file="$tmp/log/munged.log" --seed-file="$tmp/munge.seed" -f
ok $? "munged started (socket in the test directory)"
cat >"$tmp/slurm.conf" <<CONF
ClusterName=dbtest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$tmp/slurm.conf"
slurmctld -i && slurmd
ok $? "slurmctld and slurmd started"
for _ in $(seq 1 100); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 0.2; done
ok "$(sinfo -h -o %T | grep -q idle; echo $?)" "the node is idle"

# a job is gone from squeue once it completed (no accounting here)
wait_gone() { for _ in $(seq 1 600); do [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0; sleep 0.2; done; return 1; }

sweep=(--dataset math,code -c 1,2 -v ar,dflash2 -B 8 -n 8 --max-samples 2 -r 1 --warmup 0 -o csv)
"$BIN" run "${sweep[@]}" --threads 1 --out "$tmp/one" >/dev/null 2>"$tmp/one.err"
ok $? "single-process sweep exits 0"

cd "$tmp/work" || exit 1
export DB_BIN="$BIN" DB_SBATCH_ARRAY_ARGS="--gres=none --cpus-per-task=1"
ids=$("$ROOT/scripts/slurm/submit" 3 "$tmp/out" "${sweep[@]}" 2>"$tmp/submit.err")
ok $? "submit: array of 3 shards + the merge job ($ids)"
read -r jid mid <<<"$ids"
wait_gone "$mid"
ok "$([ -f "$tmp/out/points.done" ]; echo $?)" "the merge job ran after the array and wrote $tmp/out"
[ -f "$tmp/out/points.done" ] || { cat "$tmp"/work/*.log "$tmp/submit.err" 2>/dev/null | tail -20 | diag; }
ok "$([ "$(ls -d "$tmp"/out-shards/*/ 2>/dev/null | wc -l)" = 3 ]; echo $?)" "three shard directories, one per array task"
ok "$([ "$(sort "$tmp/out/points.done" 2>/dev/null)" = "$(sort "$tmp/one/points.done")" ]; echo $?)" \
    "merged point set == single-process sweep's"
res=$("$PY" "$SAME" "$tmp/one" "$tmp/out" 2>&1)
ok "$([ "$res" = OK ]; echo $?)" "every non-timing column equal"
[ "$res" = OK ] || echo "$res" | diag

# afterok: a failing array never starts the merge
ids=$("$ROOT/scripts/slurm/submit" 2 "$tmp/bad" "${sweep[@]}" --max-samples 0 2>"$tmp/submit.err")
read -r jid mid <<<"$ids"
wait_gone "$jid"
for _ in $(seq 1 150); do # the controller re-evaluates dependencies every few seconds
    why=$(squeue -h -j "$mid" -o %r 2>/dev/null)
    [ "$why" = DependencyNeverSatisfied ] && break
    sleep 0.2
done
ok "$([ "$why" = DependencyNeverSatisfied ] && [ ! -e "$tmp/bad" ]; echo $?)" \
    "array tasks failed: the merge waits on a never satisfied dependency, no merged directory ($why)"
scancel "$mid" 2>/dev/null

done_testing
