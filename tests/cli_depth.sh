#!/usr/bin/env bash
# cli_depth.sh — the context depth axis end to end on the embedded pair (TAP; skips without
# models/): `run -C 0,96` of ar and dflash2 on math, one round (a few seconds; a minute under
# ASan). Checks: every depth is a row of its own with its own ar; a request's prompt at depth 96
# is its depth-0 prompt + 96 tokens (requests.csv); the point id ends |D96 at the depth and has
# no D at 0; -o csv stdout is summary.csv; a depth the target cannot hold is refused before any
# weight loads, naming the depth and max_position_embeddings; check-lossless -C holds at depth.
set -u

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
. "$(dirname "$0")/tap.sh"
need_models
need_results_check
make_tmp cli-depth
out="$tmp/stdout"
errf="$tmp/stderr"

run run -v ar,dflash2 -B 8 -c 2 --dataset math --max-samples 3 -n 8 -C 0,96 --min-time 0 -r 1 --warmup 0 \
    -o csv --out "$tmp/r"
ok "$rc" "run -C 0,96 exits 0"
[ "$rc" = 0 ] || diag <"$errf"
ok "$("$PY" "$CHECK" "$tmp/r" 4 >"$tmp/check" 2>&1; echo $?)" "a consistent results directory of 4 points ($(cat "$tmp/check"))"
ok "$(cmp -s "$out" "$tmp/r/summary.csv"; echo $?)" "-o csv stdout == summary.csv"

"$PY" - "$tmp/r" >"$tmp/py" 2>&1 <<'EOF'
import csv, os, sys
d = sys.argv[1]
S = list(csv.DictReader(open(os.path.join(d, 'summary.csv'))))
Q = list(csv.DictReader(open(os.path.join(d, 'requests.csv'))))
def check(cond, what):
    print(('ok ' if cond else 'FAIL ') + what)
rows = sorted((r['depth'], r['variant']) for r in S)
check(rows == [('0', 'ar'), ('0', 'dflash2'), ('96', 'ar'), ('96', 'dflash2')], f'rows {rows}')
check(all(r['point_id'].endswith('|D96') == (r['depth'] == '96') and '|D0' not in r['point_id'] for r in S),
      'point_id ends |D96 at depth 96, no D at depth 0')
plen = {}
for q in Q:
    plen.setdefault((q['variant'], q['depth'], q['prompt_index']), set()).add(int(q['prompt_tokens']))
pairs = [(plen[(v, '0', i)], plen.get((v, '96', i))) for (v, dep, i) in plen if dep == '0']
check(len(pairs) >= 2 and all(b == {x + 96 for x in a} for a, b in pairs),
      f'every request at depth 96: its depth-0 prompt + 96 tokens ({len(pairs)} prompts x variants)')
check(all(r['speedup'] != '' and r['tau'] != '' for r in S if r['variant'] == 'dflash2'),
      'each depth: dflash2 has a speedup (its own ar) and a tau')
EOF
while read -r verdict what; do
    ok "$([ "$verdict" = ok ]; echo $?)" "$what"
done <"$tmp/py"
grep -q . "$tmp/py" || { ok 1 "the checks ran"; diag <"$tmp/py"; }

expect_refused "a depth past max_position_embeddings is refused, named" "depth 1000" "max_position_embeddings 1024" -- \
    run -v ar,dflash2 -B 8 -c 1 --dataset math --max-samples 2 -n 8 -C 0,1000 --out "$tmp/deep"
ok "$([ ! -e "$tmp/deep" ]; echo $?)" "no results directory for the refused sweep"
expect_refused "a negative depth is refused" "depth: -5" -- run -C -5 --dry-run

run check-lossless -t "$DB_SOURCE_ROOT/models/tiny-qwen3" -d "$DB_SOURCE_ROOT/models/tiny-qwen3-dflash2-b16" \
    -C 200 --random-prompts 4 -n 16 -B 8
ok "$rc" "check-lossless -C 200: every variant == ar at depth 200"
[ "$rc" = 0 ] || diag <"$out"
done_testing
