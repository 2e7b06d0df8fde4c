#!/usr/bin/env bash
# cli_resume.sh — `run --resume DIR` finishes the recorded sweep (TAP). meson's test_env sets
# DB_BIN and DB_SOURCE_ROOT.
#   a `-n 16` sweep killed with SIGKILL, then `--resume DIR` alone: exits 0 and DIR holds exactly
#   the points a complete run of the same flags holds (point ids compared with a reference run),
#   every row at max_new_tokens 16;
#   --resume DIR with a flag that changes the sweep: exit 2, the message names the key, nothing
#   in DIR changes; with a flag that repeats the recorded value: accepted;
#   --resume of a directory whose points.done lists points but has no meta.json: exit 2 (the
#   default sweep is never run into it);
#   a dataset file edited before the resume: exit 2 naming it, unless --allow-changed-inputs;
#   a summary row deleted with points.done intact: the resume reruns that point;
#   --out into a non-empty directory that holds no results, --out ., --out /: exit 2;
#   --resume of a finished run: exit 0, "nothing to do", DIR byte for byte as before (no
#   meta.N.json);
#   SIGINT / SIGTERM mid-sweep: exit 130 / 143, stderr gives the resume command, and that
#   command, run as printed, completes the sweep.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
PY=/usr/bin/python3
need_models
[ -x "$PY" ] || skip_all "/usr/bin/python3 (used to check the CSV files) is missing"
make_tmp cli-resume
cd "$ROOT" || exit 1

sweep=(--dataset math --max-samples 3 -n 16 --warmup 0 -r 1 --min-time 0 --threads 1 -v ar,dflash2 -c 1,2,3 -B 4,8)
ids() { cut -d, -f2 "$1/summary.csv" | tail -n +2 | sort; }
snapshot() { (cd "$1" && ls -A && cat -- *) | md5sum; }

# the reference: the same sweep run to the end (stdout CSV: no reading note in it)
"$BIN" run "${sweep[@]}" --out "$tmp/ref" -o csv >"$tmp/ref.csv" 2>"$tmp/ref.err"
ok $? "reference sweep exits 0"
ok "$(! grep -q "Reading note" "$tmp/ref.csv" && [ "$(wc -l <"$tmp/ref.csv")" = "$(wc -l <"$tmp/ref/summary.csv")" ]; echo $?)" \
    "-o csv stdout is the summary rows alone (no reading note)"

# killed mid-sweep, then resumed with --resume DIR alone
"$BIN" run "${sweep[@]}" --out "$tmp/k" >/dev/null 2>/dev/null &
pid=$!
wait_points "$tmp/k" 2 "$pid"
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
before=$(wc -l <"$tmp/k/points.done" 2>/dev/null || echo 0)
"$BIN" run --resume "$tmp/k" >/dev/null 2>"$tmp/k.err"
rc=$?
ok "$rc" "--resume DIR alone after SIGKILL ($before points done) exits 0"
[ "$rc" = 0 ] || diag <"$tmp/k.err"
ok "$([ "$(ids "$tmp/k")" = "$(ids "$tmp/ref")" ]; echo $?)" \
    "the resumed directory holds exactly the reference sweep's points ($(ids "$tmp/ref" | wc -l))"
n16=$("$PY" -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(sum(x['max_new_tokens']=='16' for x in r), len(r))" "$tmp/k/summary.csv")
ok "$([ "${n16% *}" = "${n16#* }" ]; echo $?)" "every resumed row ran max_new_tokens 16 ($n16)"

# a flag that changes the sweep is refused, naming it; DIR is left as it was
snap=$(snapshot "$tmp/k")
"$BIN" run --resume "$tmp/k" -n 32 >/dev/null 2>"$tmp/c.err"
rc=$?
ok "$([ "$rc" = 2 ] && grep -q "max_new_tokens (recorded '16', given '32')" "$tmp/c.err"; echo $?)" \
    "--resume DIR -n 32 exits 2 naming max_new_tokens (rc $rc)"
[ "$rc" = 2 ] || diag <"$tmp/c.err"
"$BIN" run --resume "$tmp/k" --variant ar,dflash2,conv-off -c 1 >/dev/null 2>"$tmp/c2.err"
rc=$?
ok "$([ "$rc" = 2 ] && grep -q "variant" "$tmp/c2.err" && grep -q "concurrency" "$tmp/c2.err"; echo $?)" \
    "two conflicting flags: exit 2 naming both (rc $rc)"
ok "$([ "$(snapshot "$tmp/k")" = "$snap" ]; echo $?)" "a refused resume changes nothing in DIR"

# points.done lists points but meta.json is gone (the sweep unknown): refused, never the
# default sweep run into DIR
cp -r "$tmp/k" "$tmp/nometa" && rm "$tmp/nometa/meta.json"
snapm=$(snapshot "$tmp/nometa")
"$BIN" run --resume "$tmp/nometa" >/dev/null 2>"$tmp/nm.err"
rc=$?
ok "$([ "$rc" = 2 ] && [ "$(wc -l <"$tmp/nm.err")" = 1 ] && grep -q "points.done lists" "$tmp/nm.err" &&
      [ "$(snapshot "$tmp/nometa")" = "$snapm" ]; echo $?)" \
    "--resume of a directory with points but no meta.json: exit 2, one line, DIR unchanged (rc $rc)"
[ "$rc" = 2 ] || diag <"$tmp/nm.err"

# --out into a directory of other files, the current or the root directory: exit 2, one line,
# before any model loads
out=$tmp/o.out errf=$tmp/o.err
mkdir "$tmp/other" && echo keep >"$tmp/other/notes.txt"
expect_refused "--out DIR holding other files: refused" "not empty" "notes.txt" -- run "${sweep[@]}" --out "$tmp/other"
ok "$([ "$(cat "$tmp/other/notes.txt")" = keep ] && [ "$(ls -A "$tmp/other")" = notes.txt ]; echo $?)" "... and left as it was"
expect_refused "--out . refused" "current directory" -- run "${sweep[@]}" --out .
expect_refused "--out / refused" "root directory" -- run "${sweep[@]}" --out /

# nothing left to do: exit 0, say so, write nothing (a repeated flag is no conflict)
metas=$(ls "$tmp/k" | grep -c 'meta')
"$BIN" run --resume "$tmp/k" -n 16 -o csv >"$tmp/n.out" 2>"$tmp/n.err"
rc=$?
ok "$([ "$rc" = 0 ] && grep -q "nothing to do" "$tmp/n.err" && [ ! -s "$tmp/n.out" ]; echo $?)" \
    "--resume of a finished run exits 0 saying nothing to do (rc $rc)"
ok "$([ "$(snapshot "$tmp/k")" = "$snap" ] && [ "$(ls "$tmp/k" | grep -c 'meta')" = "$metas" ]; echo $?)" \
    "... and writes nothing (no new meta.N.json)"

# a summary row deleted, points.done intact: the resume runs that point again (not "nothing to do")
cp -r "$tmp/k" "$tmp/lost"
lost=$(sed -n 3p "$tmp/lost/summary.csv" | cut -d, -f2)
sed -i 3d "$tmp/lost/summary.csv"
"$BIN" run --resume "$tmp/lost" >/dev/null 2>"$tmp/lost.err"
rc=$?
ok "$([ "$rc" = 0 ] && [ "$(ids "$tmp/lost")" = "$(ids "$tmp/ref")" ] && grep -qF "$lost" "$tmp/lost.err" &&
      [ "$("$PY" "$ROOT/tests/results_check.py" "$tmp/lost" "$(ids "$tmp/ref" | wc -l)")" = OK ]; echo $?)" \
    "--resume after a summary row was deleted reruns its point: exit $rc, the reference points, each once"
[ "$rc" = 0 ] || diag <"$tmp/lost.err"

# a dataset file edited between the run and its resume: refused naming it (DIR unchanged);
# --allow-changed-inputs resumes anyway
cp "$ROOT/datasets/math.jsonl" "$tmp/ds.jsonl"
dsweep=(--dataset "$tmp/ds.jsonl" --max-samples 1 -n 4 --warmup 0 -r 1 --min-time 0 --threads 1 -v ar,dflash2 -c 1 -B 4)
"$BIN" run "${dsweep[@]}" --out "$tmp/ds" >/dev/null 2>&1
sed -i '$d' "$tmp/ds/points.done"
rec=$("$PY" -c "import json,sys; print(sum(i['kind'] == 'dataset' and i['path'] == sys.argv[2] and len(i['sha256']) == 64
                for i in json.load(open(sys.argv[1]))['inputs']))" "$tmp/ds/meta.json" "$(realpath "$tmp/ds.jsonl")")
ok "$([ "$rec" = 1 ]; echo $?)" \
    "meta.json records the dataset's absolute path and sha256"
echo '{"question": "1 + 1?", "answer": "#### 2"}' >>"$tmp/ds.jsonl"
snapd=$(snapshot "$tmp/ds")
"$BIN" run --resume "$tmp/ds" >/dev/null 2>"$tmp/ds.err"
rc=$?
ok "$([ "$rc" = 2 ] && [ "$(wc -l <"$tmp/ds.err")" = 1 ] && grep -qF "the dataset $tmp/ds.jsonl" "$tmp/ds.err" &&
      [ "$(snapshot "$tmp/ds")" = "$snapd" ]; echo $?)" "--resume after the dataset changed: exit 2 naming it, DIR unchanged (rc $rc)"
[ "$rc" = 2 ] || diag <"$tmp/ds.err"
"$BIN" run --resume "$tmp/ds" --allow-changed-inputs >/dev/null 2>"$tmp/ds2.err"
rc=$?
ok "$([ "$rc" = 0 ] && grep -q "changed since the run began" "$tmp/ds2.err"; echo $?)" "... and with --allow-changed-inputs: exit $rc, a warning"
[ "$rc" = 0 ] || diag <"$tmp/ds2.err"

# md: a drafter row below speedup 1 gets the reading note under the table (verify cost, tau,
# cache, the plan command); its verify cost is summary.csv's verify_cost_steps
"$BIN" run "${sweep[@]}" -c 1 --out "$tmp/md" -o md >"$tmp/md.out" 2>/dev/null
slow=$("$PY" -c "import csv,sys; print(sum(r['variant']!='ar' and float(r['speedup'])<1 for r in csv.DictReader(open(sys.argv[1]))))" "$tmp/md/summary.csv")
if [ "$slow" -gt 0 ]; then
    ok "$(grep -q "^Reading note (cpu): $slow drafter row" "$tmp/md.out" && grep -q "dflash-bench plan --target-config" "$tmp/md.out"; echo $?)" \
        "md: reading note under the table for the $slow rows below speedup 1"
else
    ok "$(! grep -q "Reading note" "$tmp/md.out"; echo $?)" "md: no reading note when no row is below speedup 1"
fi

# verify_cost_steps from requests.csv: the row's verify ms per cycle over its ar's per step
check=$("$PY" - "$tmp/md" <<'EOF'
import csv, sys, os
d = sys.argv[1]
summ = list(csv.DictReader(open(os.path.join(d, 'summary.csv'))))
reqs = list(csv.DictReader(open(os.path.join(d, 'requests.csv'))))
def per(pid):
    rs = [r for r in reqs if r['point_id'] == pid]
    return sum(float(r['verify_ms']) for r in rs) / sum(int(r['cycles']) for r in rs)
bad = []
for r in summ:
    if r['variant'] == 'ar':
        continue
    ar = [x for x in summ if x['variant'] == 'ar' and x['concurrency'] == r['concurrency']][0]
    want = per(r['point_id']) / per(ar['point_id'])
    if abs(float(r['verify_cost_steps']) - want) > 1e-6 * want:
        bad.append(f"{r['point_id']}: {r['verify_cost_steps']} vs {want}")
print('\n'.join(bad) if bad else 'OK')
EOF
)
ok "$([ "$check" = OK ]; echo $?)" "verify_cost_steps == verify ms per cycle / the ar's verify ms per step (requests.csv)"
[ "$check" = OK ] || echo "$check" | diag

# SIGINT and SIGTERM: clean stop, exit 128 + signal, the printed command finishes the sweep
for sig in INT TERM; do
    want=$([ $sig = INT ] && echo 130 || echo 143)
    "$BIN" run "${sweep[@]}" --out "$tmp/s$sig" >/dev/null 2>"$tmp/s$sig.err" &
    pid=$!
    wait_points "$tmp/s$sig" 1 "$pid"
    kill -$sig "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    cmd=$(sed -n 's/.*finish the sweep with: //p' "$tmp/s$sig.err")
    if [ "$rc" = 0 ]; then # the sweep ended before the signal: nothing to stop
        ok 0 "SIG$sig: the sweep had finished first # SKIP"
        continue
    fi
    ok "$([ "$rc" = "$want" ] && [ -n "$cmd" ]; echo $?)" "SIG$sig: exit $want with the resume command (rc $rc)"
    [ -n "$cmd" ] || { diag <"$tmp/s$sig.err"; continue; }
    eval "$cmd" >/dev/null 2>"$tmp/s$sig.err2"
    rc=$?
    ok "$([ "$rc" = 0 ] && [ "$(ids "$tmp/s$sig")" = "$(ids "$tmp/ref")" ]; echo $?)" \
        "SIG$sig: the printed command completes the sweep (rc $rc)"
done

done_testing
