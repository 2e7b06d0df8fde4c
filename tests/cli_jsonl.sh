#!/usr/bin/env bash
# cli_jsonl.sh — run --format-files csv,json (TAP): every table also as JSON Lines beside its CSV,
# one object per CSV row with the header's keys in order (numbers as numbers, empty as null);
# a run killed inside the JSON appends of its last point (DB_FAULT_KILL) and resumed ends with
# every twin equal to its CSV again and each point once; the default writes no .jsonl.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "/usr/bin/python3 (reads CSV and JSON) is missing"
need_models
make_tmp jsonl
sweep=(run --dataset math -v ar,dflash2 -B 4 -c 1 -n 8 --max-samples 2 -r 2 --min-time 0 --warmup 0
       -t "$ROOT/models/tiny-qwen3" -d "$ROOT/models/tiny-qwen3-dflash2-b16")

same() { # DIR [POINTS]: every .jsonl equals its CSV, row for row; each point once in summary
    "$PY" - "$1" "${2:-2}" <<'PYEOF'
import csv, json, sys
d, npts = sys.argv[1], int(sys.argv[2])
for t in ('summary', 'acceptance', 'histogram', 'requests'):
    rows = list(csv.reader(open(f'{d}/{t}.csv', newline='')))
    objs = [json.loads(l) for l in open(f'{d}/{t}.jsonl')]
    assert len(objs) == len(rows) - 1, (t, len(objs), len(rows) - 1)
    for r, o in zip(rows[1:], objs):
        assert list(o) == rows[0], (t, list(o)[:5])
        for k, v in zip(rows[0], r):
            x = o[k]
            ok = (x is None and v == '') or (isinstance(x, str) and x == v) or \
                 (isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x - float(v)) <= 1e-12 * max(1, abs(x)))
            assert ok, (t, k, v, x)
ids = [r['point_id'] for r in csv.DictReader(open(f'{d}/summary.csv'))]
assert len(ids) == len(set(ids)) == npts, ids
PYEOF
}

"$BIN" "${sweep[@]}" --out "$tmp/a" >/dev/null 2>"$tmp/err"
ok $? "run without --format-files ($(tail -1 "$tmp/err"))"
ls "$tmp/a"/*.jsonl >/dev/null 2>&1
ok $((! $?)) "the default writes no .jsonl"

DB_FAULT_KILL_LOG="$tmp/bounds" "$BIN" "${sweep[@]}" --format-files csv,json --out "$tmp/b" >/dev/null 2>"$tmp/err"
ok $? "run --format-files csv,json ($(tail -1 "$tmp/err"))"
same "$tmp/b" 2>"$tmp/py"
ok $? "every .jsonl row is its CSV row ($(tail -1 "$tmp/py"))"

# the last point's last JSON write (the one before points.done's) killed, then resumed
k=$(awk '$2 == "write" { w[++n] = $1 } END { print w[n - 1] }' "$tmp/bounds")
DB_FAULT_KILL=$k "$BIN" "${sweep[@]}" --format-files csv,json --out "$tmp/c" >/dev/null 2>&1
ok $(($? == 0)) "killed at boundary $k (the last point's requests.jsonl append)"
"$BIN" run --resume "$tmp/c" >/dev/null 2>"$tmp/err"
ok $? "resume ($(tail -1 "$tmp/err"))"
same "$tmp/c" 2>"$tmp/py"
ok $? "after the resume every .jsonl is its CSV again, each point once ($(tail -1 "$tmp/py"))"

# two shards of a 4-point sweep merged: the merged directory has its twins too (with host)
for k in 0 1; do
    "$BIN" "${sweep[@]}" -c 1,2 --format-files csv,json --shard $k/2 --out "$tmp/s$k" >/dev/null 2>&1 || echo "shard $k failed" >&2
done
"$BIN" merge "$tmp/m" "$tmp/s0" "$tmp/s1" 2>"$tmp/err"
ok $? "merge of two --format-files csv,json shards ($(tail -1 "$tmp/err"))"
same "$tmp/m" 4 2>"$tmp/py"
ok $? "the merged .jsonl files are the merged CSV rows ($(tail -1 "$tmp/py"))"
done_testing
