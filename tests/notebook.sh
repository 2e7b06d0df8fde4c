#!/usr/bin/env bash
# notebook.sh — docs/notebooks/results.ipynb executed headless on the committed results directory
# tests/data/results/run-1 (TAP): `jupyter nbconvert --execute` fails on any error in a cell, and
# the five figures come out as PNG files in $DFLASH_FIGURES. Skips without Debian's
# jupyter-nbconvert, python3-ipykernel, python3-pandas and python3-matplotlib (SETUP_TESTS=1
# scripts/setup installs them).
set -u
. "$(dirname "$0")/tap.sh"

ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
DATA=${DB_TEST_DATA:?DB_TEST_DATA not set}
PY=/usr/bin/python3
command -v jupyter-nbconvert >/dev/null 2>&1 || skip_all "jupyter-nbconvert is not installed (SETUP_TESTS=1 scripts/setup)"
"$PY" -c 'import pandas, matplotlib, ipykernel' 2>/dev/null ||
    skip_all "python3-pandas, python3-matplotlib or python3-ipykernel is not installed (SETUP_TESTS=1 scripts/setup)"
make_tmp notebook

# the kernel writes its runtime files and matplotlib its cache under HOME: keep them in $tmp
HOME="$tmp" MPLBACKEND=Agg DFLASH_RESULTS="$DATA/results/run-1" DFLASH_FIGURES="$tmp/fig" \
    jupyter-nbconvert --execute --to notebook --ExecutePreprocessor.timeout=120 \
    --output-dir "$tmp" --output executed "$ROOT/docs/notebooks/results.ipynb" >"$tmp/log" 2>&1
rc=$?
ok $rc "nbconvert --execute ran every cell without an error ($rc: $(grep -m1 -E 'Error|error' "$tmp/log"))"
for f in speedup acceptance recall histogram tau_block; do
    [ "$(head -c 8 "$tmp/fig/$f.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
        [ "$(stat -c %s "$tmp/fig/$f.png")" -gt 5000 ]
    ok $? "$f.png written, a PNG of more than 5 kB"
done
# the figures drew what the tables hold: the executed notebook printed every series of run-1
"$PY" - "$tmp/executed.ipynb" "$DATA/results/run-1/summary.csv" <<'PYEOF'
import csv, json, sys
nb = json.load(open(sys.argv[1]))
text = ''.join(''.join(o.get('text', '')) + ''.join(o.get('data', {}).get('text/plain', ''))
               for c in nb['cells'] if c['cell_type'] == 'code' for o in c.get('outputs', []))
rows = list(csv.DictReader(open(sys.argv[2])))
assert f"{len(rows)} points" in text, text[:400]
for r in rows:
    if r['variant'] != 'ar':
        s = f"{r['variant']} B{r['block_size']}"
        assert s in text, s
PYEOF
ok $? "the notebook read every point and named every series"
done_testing
