#!/usr/bin/env bash
# cli_compare.sh — `dflash-bench compare BASE NEW` as a CI job meets it (TAP): exit 0 whatever the
# verdicts, --fail-on-regression PCT exit 1 when a row is significantly slower by more than PCT
# (a 20% slowdown planted in the recorded rounds of tests/data/results/run-1: 15 fails, 25
# passes), -o csv / json parse with one row per point, and bad directories exit 2 naming the
# path with nothing on stdout. The statistics themselves: tests/test_compare.c.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
DATA=${DB_TEST_DATA:?DB_TEST_DATA not set}
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "/usr/bin/python3 (plants the slowdown, reads CSV and JSON) is missing"
make_tmp compare
A="$DATA/results/run-1"

# NEW = run-1 with every dflash2 round 1.25x as long (throughput x 0.8)
cp -r "$A" "$tmp/slow"
"$PY" - "$tmp/slow" <<'EOF' || { echo "Bail out! planting the slowdown"; exit 1; }
import csv, sys
d = sys.argv[1]
def edit(name, cols):
    rows = list(csv.reader(open(f'{d}/{name}', newline='')))
    h = rows[0]
    for r in rows[1:]:
        if '|dflash2|' in r[h.index('point_id')]:
            for c, f in cols.items():
                r[h.index(c)] = '%.10g' % (float(r[h.index(c)]) * f)
    csv.writer(open(f'{d}/{name}', 'w', newline=''), lineterminator='\n').writerows(rows)
edit('requests.csv', {'rep_wall_s': 1.25})
edit('summary.csv', {'throughput_tok_s': 0.8, 'speedup': 0.8})
EOF

run() { "$BIN" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }

run compare "$A" "$tmp/slow"
ok $((rc != 0)) "compare BASE NEW exits 0 with slower rows ($rc: $(head -c 200 "$tmp/err"))"
grep -q '| slower |' "$tmp/out"
ok $? "md: the planted rows read slower"

run compare "$A" "$tmp/slow" --fail-on-regression 15
ok $((rc != 1)) "--fail-on-regression 15: exit 1 ($rc)"
grep -q 'significantly slower by more than 15%' "$tmp/err"
ok $? "... saying how many rows ($(head -c 200 "$tmp/err"))"
run compare --fail-on-regression=25 "$A" "$tmp/slow" -o csv
ok $((rc != 0)) "--fail-on-regression 25: exit 0 ($rc)"
"$PY" - "$tmp/out" "$A/summary.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
n = sum(1 for _ in csv.DictReader(open(sys.argv[2])))
slow = [r for r in rows if r['variant'] == 'dflash2']
assert len(rows) == n, (len(rows), n)
assert all(abs(float(r['throughput_ratio']) - 0.8) < 1e-6 for r in slow), slow
assert all(r['verdict'] in ('slower', 'unstable') for r in slow)
EOF
ok $? "-o csv: one row per point, dflash2 at ratio 0.8"
run compare "$A" "$tmp/slow" --metric speedup -o json
"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r and all(abs(x["speedup_ratio"]-0.8)<1e-6 for x in r if x["variant"]=="dflash2"), r' "$tmp/out"
ok $? "-o json --metric speedup parses, dflash2 speedup ratio 0.8 ($rc)"

for bad in "$tmp/absent" "$tmp"; do
    run compare "$A" "$bad"
    [ $rc = 2 ] && [ ! -s "$tmp/out" ] && grep -qF "$bad" "$tmp/err" && [ "$(wc -l <"$tmp/err")" = 1 ]
    ok $? "compare with $(basename "$bad"): exit 2, one line naming it, no stdout ($rc: $(cat "$tmp/err"))"
done
run compare "$A"
ok $((rc != 2)) "one directory: exit 2 ($rc)"
run compare "$A" "$A" --metric latency
ok $((rc != 2)) "--metric latency: exit 2 ($rc: $(cat "$tmp/err"))"
done_testing
