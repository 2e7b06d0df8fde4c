#!/usr/bin/env bash
# cli_units.sh — one unit convention (src/base/util.h) and the --threads warning (TAP). meson's
# test_env sets DB_BIN, DB_SOURCE_ROOT and DB_TEST_DATA.
#   plan (md) prints amounts of memory in GiB only (no "GB" but in GB/s), and its numbers are the
#   JSON output's byte counts / 2^30: the weights line, the memory column and GiB/step of ar;
#   bench (md) gives the weights in GiB;
#   summary.csv names its memory column peak_mem_mib (and its value is MiB: above the size of the
#   target's weights file / 2^20);
#   --threads above the CPUs this process may use warns on stderr, --threads at that count not.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
DATA=${DB_TEST_DATA:?DB_TEST_DATA not set}
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "/usr/bin/python3 (used to read JSON and CSV) is missing"
make_tmp units

# ---- plan: GiB everywhere, equal to the JSON's bytes / 2^30 ----
plan=(plan -t "$ROOT/configs/models/qwen3-8b.json" -d "$ROOT/configs/models/qwen3-8b-dflash2.json"
      --no-measure --bandwidth-gbs 100 --gflops 1000 -c 1,8)
"$BIN" "${plan[@]}" >"$tmp/plan.md" 2>"$tmp/stderr"
rc1=$?
"$BIN" "${plan[@]}" -o json >"$tmp/plan.json" 2>>"$tmp/stderr"
rc2=$?
ok "$((rc1 | rc2))" "plan md and json exit 0 ($rc1, $rc2)"
! grep -E 'GB([^/]|$)' "$tmp/plan.md" >"$tmp/gb"
ok $? "plan md: no amount in GB ($(head -c 120 "$tmp/gb"))"
check=$("$PY" - "$tmp/plan.md" "$tmp/plan.json" <<'EOF'
import json, re, sys
md = open(sys.argv[1]).read(); j = json.load(open(sys.argv[2]))
G = 2.0 ** 30
bad = []
t = re.search(r'- target .*: ([0-9.]+) GiB of', md); d = re.search(r'- drafter .*: ([0-9.]+) GiB;', md)
w = j['rows'][0]['weights_bytes'] / G
if not t or not d or abs(float(t.group(1)) + float(d.group(1)) - w) > 0.011:
    bad.append(f'weights lines {t and t.group(1)} + {d and d.group(1)} GiB vs {w:.3f}')
cells = lambda l: [c.strip() for c in l.strip().strip('|').split('|')]
head = next((cells(l) for l in md.splitlines() if l.startswith('| variant |')), [])
rows = [cells(l) for l in md.splitlines() if l.startswith('| ar |')]
if 'GiB/step' not in head or 'memory GiB' not in head or len(rows) != len(j['rows']):
    bad.append(f'columns {head}, {len(rows)} ar rows')
else:
    for r, jr in zip(rows, j['rows']):
        step = float(r[head.index('GiB/step')]); mem = float(r[head.index('memory GiB')])
        if abs(step - jr['ar']['predicted']['bytes'] / G) > 0.0006:
            bad.append(f"c{jr['concurrency']}: GiB/step {step} vs {jr['ar']['predicted']['bytes'] / G:.4f}")
        if abs(mem - jr['memory_bytes'] / G) > 0.006:
            bad.append(f"c{jr['concurrency']}: memory {mem} vs {jr['memory_bytes'] / G:.3f}")
print('; '.join(bad) or 'ok')
EOF
)
[ "$check" = ok ]
ok $? "plan md numbers are the JSON bytes / 2^30: $check"

# ---- bench: the weights in GiB too ----
"$BIN" bench --rows 1 --context 8 -r 1 >"$tmp/bench.md" 2>"$tmp/stderr"
rc=$?
[ "$rc" = 0 ] && grep -q "weights, [0-9.]* GiB)" "$tmp/bench.md" && ! grep -E 'GB([^/]|$)' "$tmp/bench.md"
ok $? "bench md: weights in GiB, no amount in GB (rc $rc)"

# ---- summary.csv: peak_mem_mib ----
TARGET="$ROOT/models/tiny-qwen3"
if [ -f "$TARGET/model.safetensors" ]; then
    "$BIN" run --target "$TARGET" --variant ar -c 1 --dataset math --max-samples 1 -n 4 --warmup 0 \
        --threads 1 --out "$tmp/r" -o csv >/dev/null 2>"$tmp/stderr"
    rc=$?
    size=$(stat -c %s "$TARGET/model.safetensors")
    check=$("$PY" - "$tmp/r/summary.csv" "$size" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
if not rows or 'peak_mem_mib' not in rows[0] or 'peak_mem_mb' in rows[0]:
    print('columns: ' + ','.join(rows[0].keys() if rows else [])); sys.exit()
v, w = float(rows[0]['peak_mem_mib']), int(sys.argv[2]) / 2 ** 20
print('ok' if w * 0.9 < v < w * 64 else f'peak_mem_mib {v} vs weights file {w:.2f} MiB')
EOF
)
    [ "$rc" = 0 ] && [ "$check" = ok ]
    ok $? "summary.csv: peak_mem_mib in MiB (rc $rc: $check)"
else
    ok 0 "# SKIP the embedded target is not in models/"
fi

# ---- --threads above the CPU count ----
ncpu=$(nproc)
"$BIN" generate --target "$DATA/qwen3-f32-tied" --prompt-ids 1,2 -n 2 --threads $((ncpu + 1)) \
    >/dev/null 2>"$tmp/stderr"
rc=$?
[ "$rc" = 0 ] && grep -q "warning: --threads $((ncpu + 1)) is above the $ncpu cores" "$tmp/stderr"
ok $? "--threads $((ncpu + 1)) on $ncpu CPUs warns and runs (rc $rc)"
"$BIN" generate --target "$DATA/qwen3-f32-tied" --prompt-ids 1,2 -n 2 --threads "$ncpu" \
    >/dev/null 2>"$tmp/stderr"
rc=$?
[ "$rc" = 0 ] && ! grep -q "warning: --threads" "$tmp/stderr"
ok $? "--threads $ncpu: no warning (rc $rc)"

done_testing
