#!/usr/bin/env bash
# cli_gguf.sh — the embedded pair as GGUF files written by scripts/gguf/convert.py at test time
# (TAP; skipped without /usr/bin/python3 + numpy or without models/):
#   F32: `generate` gives the same greedy ids and the same cycle statistics as the safetensors
#   pair for ar, dflash and dflash2 (the drafters' tensors and metadata, the target's tied
#   head, taps and EOS all come through the file);
#   Q8_0 and Q4_K: check-lossless passes (every variant == ar of the same quantized target);
#   tokenizer.ggml.* metadata: vocabulary-only GGUFs of the tokenizer fixtures (Qwen2 split,
#   LLaMA-3 with ignore_merges, GPT-2 ByteLevel) and the converted target encode README.md and
#   a multilingual / special-token text exactly like their tokenizer.json, and decode back alike;
#   `run --target Q8_0,Q4_K --drafter Q8_0,Q4_K` (tokenizer from the first target's GGUF): one
#   table, rows with both dtypes and the file's sha256, each speedup over the ar of the same
#   target file, dflash2 ids == ar ids per quantized target (generate); its --resume with one
#   target's points missing runs those only;
#   `plan` on the Q8_0 target: its dtype from the file, the weights' bytes as computed by hand;
#   a truncated GGUF as --target: exit 2, one stderr line naming the file.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
PY=/usr/bin/python3
need_models
"$PY" -c 'import numpy' 2>/dev/null || skip_all "/usr/bin/python3 with numpy is missing"
make_tmp cli-gguf
M="$ROOT/models"

for t in F32 Q8_0 Q4_K; do
    "$PY" "$ROOT/scripts/gguf/convert.py" --embedded "$tmp" --type "$t" 2>"$tmp/conv.err"
    rc=$?
    ok "$rc" "convert.py --embedded --type $t"
    [ "$rc" = 0 ] || diag <"$tmp/conv.err"
done

gen() { # target drafter variant -> ids on stdout, statistics without timings in $tmp/stats
    "$BIN" generate --target "$1" --drafter "$2" --prompt-ids 3,17,42,7,99,5 -n 40 --variant "$3" \
        -B 16 -T 0 --threads 1 2>"$tmp/stats.raw"
    grep -v "tok/s\|load " "$tmp/stats.raw" | sed 's/draft [0-9.]* ms.*host [0-9.]* ms; //' >"$tmp/stats"
}
for v in ar dflash dflash2 dspark; do
    d=tiny-qwen3-dflash2-b16
    [ "$v" = dflash ] && d=tiny-qwen3-dflash-b16
    [ "$v" = dspark ] && d=tiny-qwen3-dspark-b16
    a=$(gen "$M/tiny-qwen3" "$M/$d" "$v"); cp "$tmp/stats" "$tmp/stats.st"
    b=$(gen "$tmp/tiny-qwen3-f32.gguf" "$tmp/$d-f32.gguf" "$v")
    same=1
    [ -n "$a" ] && [ "$a" = "$b" ] && cmp -s "$tmp/stats" "$tmp/stats.st" && same=0
    ok "$same" "$v: F32 GGUF pair == safetensors pair (ids and cycle statistics)"
    [ "$same" = 0 ] || { echo "st:   $a"; echo "gguf: $b"; diff "$tmp/stats.st" "$tmp/stats"; } | diag
done

for t in q8_0 q4_k; do
    "$BIN" check-lossless --target "$tmp/tiny-qwen3-$t.gguf" --drafter "$tmp/tiny-qwen3-dflash2-b16-$t.gguf" \
        --threads 1 >"$tmp/cl.out" 2>&1
    rc=$?
    ok "$rc" "check-lossless on the $t pair: every variant == ar of the $t target"
    [ "$rc" = 0 ] || tail -5 "$tmp/cl.out" | diag
done
"$BIN" check-lossless --target "$tmp/tiny-qwen3-q8_0.gguf" --drafter "$tmp/tiny-qwen3-dspark-b16-q8_0.gguf" \
    -B 4,8,16 --threads 1 >"$tmp/cl.out" 2>&1
rc=$?
ok "$([ "$rc" = 0 ] && [ "$(grep -c '^ok  dspark' "$tmp/cl.out")" = 3 ]; echo $?)" \
    "check-lossless on the q8_0 DSpark GGUF: dspark == ar at B 4, 8, 16"
[ "$rc" = 0 ] || tail -5 "$tmp/cl.out" | diag

printf 'Hello world, 12345 tokens!\n  the  \303\234ber caf\303\251 \346\227\245\346\234\254 <|im_end|> it'"'"'s 3.14159\n\n\tx' \
    >"$tmp/text.txt"
cat "$ROOT/README.md" >>"$tmp/text.txt"
T="$ROOT/tests/data/tokenizer"
for f in "$T/tokenizer.json" "$T/tokenizer-llama3.json" "$T/tokenizer-gpt2.json" "$M/tiny-qwen3/tokenizer.json" \
    "$tmp/tiny-qwen3-f32.gguf"; do
    g=$f
    case $f in
    *.json) g="$tmp/tok.gguf"; "$PY" "$ROOT/scripts/gguf/convert.py" --tokenizer-only "$f" "$g" ;;
    *) f="$M/tiny-qwen3/tokenizer.json" ;;
    esac
    "$BIN" tokenize --tokenizer "$f" <"$tmp/text.txt" >"$tmp/ids.json" 2>&1
    "$BIN" tokenize --tokenizer "$g" <"$tmp/text.txt" >"$tmp/ids.gguf" 2>&1
    "$BIN" tokenize --tokenizer "$g" --decode <"$tmp/ids.gguf" >"$tmp/dec.gguf" 2>&1
    "$BIN" tokenize --tokenizer "$f" --decode <"$tmp/ids.json" >"$tmp/dec.json" 2>&1
    same=1
    [ "$(wc -c <"$tmp/ids.json")" -gt 1000 ] && cmp -s "$tmp/ids.json" "$tmp/ids.gguf" &&
        cmp -s "$tmp/dec.json" "$tmp/dec.gguf" && same=0
    ok "$same" "tokenizer from GGUF metadata == $(basename "$f") ($(basename "$g")): $(tr ',' '\n' <"$tmp/ids.json" | wc -l) ids"
    [ "$same" = 0 ] || { head -c 300 "$tmp/ids.json"; echo; head -c 300 "$tmp/ids.gguf"; } | diag
done

# quantization as a sweep axis: one run over both quantized targets and both quantized drafters
for t in q8_0 q4_k; do # greedy ids of dflash2 == ar on the same quantized target
    a=$(gen "$tmp/tiny-qwen3-$t.gguf" "$tmp/tiny-qwen3-dflash2-b16-$t.gguf" ar)
    b=$(gen "$tmp/tiny-qwen3-$t.gguf" "$tmp/tiny-qwen3-dflash2-b16-$t.gguf" dflash2)
    ok "$([ -n "$a" ] && [ "$a" = "$b" ] && echo 0 || echo 1)" "generate on the $t target: dflash2 ids == ar ids"
done
"$BIN" run --target "$tmp/tiny-qwen3-q8_0.gguf,$tmp/tiny-qwen3-q4_k.gguf" \
    --drafter "$tmp/tiny-qwen3-dflash2-b16-q8_0.gguf,$tmp/tiny-qwen3-dflash2-b16-q4_k.gguf" --dataset math \
    --max-samples 2 --max-new-tokens 12 --variant ar,dflash2 -c 1 -B 8 --warmup 0 -r 1 --threads 1 --out "$tmp/run" \
    >"$tmp/run.md" 2>"$tmp/run.err"
rc=$?
ok "$rc" "run over two quantized targets x two quantized drafters in one invocation"
[ "$rc" = 0 ] || tail -3 "$tmp/run.err" | diag
# one table: 2 targets x (ar + 2 drafters); the dtype column names each file's main type, after
# its mix when that differs (the embedded pair's 192-wide rows fall back from Q4_K to Q4_0,
# convert.py; its general.file_type names the all-Q4_K mix, llama.cpp's Q4_K_S)
tq=tiny-qwen3-q8_0.gguf tk=tiny-qwen3-q4_k.gguf
table=1
[ "$(grep -c '^| tiny-qwen3-' "$tmp/run.md")" = 6 ] && [ "$(grep -c '^| target | dtype |' "$tmp/run.md")" = 1 ] &&
    grep -q "^| $tq | q8_0 | math | ar |" "$tmp/run.md" && grep -q "^| $tq | q8_0 / q8_0 | math | dflash2 |" "$tmp/run.md" &&
    grep -q "^| $tq | q8_0 / q4_k_s (q4_0) | math | dflash2 |" "$tmp/run.md" &&
    grep -q "^| $tk | q4_k_s (q4_0) | math | ar |" "$tmp/run.md" &&
    grep -q "^| $tk | q4_k_s (q4_0) / q8_0 | math | dflash2 |" "$tmp/run.md" && table=0
ok "$table" "one md table with the target and both dtypes per row"
[ "$table" = 0 ] || diag <"$tmp/run.md"
"$PY" - "$tmp/run" "$tmp/tiny-qwen3-q8_0.gguf" "$tmp/tiny-qwen3-q4_k.gguf" >"$tmp/pair.out" 2>&1 <<'PYEOF'
# every drafter row's speedup is its throughput over the ar row of the SAME target file; rows
# carry target / drafter dtypes and the sha256 of the file they name; greedy: a dflash2 request
# commits as many tokens as the ar request of its target (the same ids, checked above)
import csv, hashlib, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/summary.csv")))
reqs = list(csv.DictReader(open(d + "/requests.csv")))
sha = {p.rsplit("/", 1)[1]: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in sys.argv[2:]}
bad = []
assert len(rows) == 6, len(rows)
for r in rows:
    if r["schema_version"] != "11": bad.append("schema " + r["schema_version"])
    if r["target_sha256"] != sha.get(r["target"]): bad.append("target hash " + r["target"])
    if r["variant"] == "ar":
        if r["drafter"] or r["drafter_dtype"]: bad.append("ar row names a drafter")
        continue
    ar = [a for a in rows if a["variant"] == "ar" and a["target"] == r["target"]]
    want = float(r["throughput_tok_s"]) / float(ar[0]["throughput_tok_s"])
    if len(ar) != 1 or abs(float(r["speedup"]) - want) > 1e-6 * want: bad.append(f"{r['point_id']}: speedup {r['speedup']} != {want}")
    if r["drafter_dtype"] not in ("q8_0", "q4_0") or r["target_dtype"] not in ("q8_0", "q4_0"): bad.append("dtype " + r["point_id"])
    mine = sorted((q["prompt_index"], q["output_tokens"]) for q in reqs if q["point_id"] == r["point_id"])
    base = sorted((q["prompt_index"], q["output_tokens"]) for q in reqs if q["point_id"] == ar[0]["point_id"])
    if not mine or mine != base: bad.append(f"{r['point_id']}: output lengths {mine} != ar {base}")
print("\n".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
PYEOF
rc=$?
ok "$rc" "speedup paired with the ar of the same target file; dtypes, hashes, output lengths per target"
[ "$rc" = 0 ] || diag <"$tmp/pair.out"
# --resume of the comma-list sweep: with the Q4_K target's points struck from points.done, only
# they run again (the Q8_0 target is not even loaded), its rows once each, the Q8_0 rows as they were;
# -o csv prints the whole summary.csv (the rows the directory held, then the new ones)
grep -v "|$tk|" "$tmp/run/points.done" >"$tmp/pd" && cp "$tmp/pd" "$tmp/run/points.done"
grep "|$tq|" "$tmp/run/summary.csv" >"$tmp/q8.before"
"$BIN" run --resume "$tmp/run" -o csv >"$tmp/resume.csv" 2>"$tmp/resume.err"
rc=$?
res=1
[ "$rc" = 0 ] && cmp -s "$tmp/resume.csv" "$tmp/run/summary.csv" && [ "$(grep -c "|$tk|" "$tmp/resume.csv")" = 3 ] &&
    [ "$(wc -l <"$tmp/run/points.done")" = 6 ] && [ "$(grep -c "|$tk|" "$tmp/run/summary.csv")" = 3 ] &&
    grep "|$tq|" "$tmp/run/summary.csv" | cmp -s - "$tmp/q8.before" && grep -q "4 of 7 points\|3 of 6 points" "$tmp/resume.err" &&
    ! grep -q "$tq math" "$tmp/resume.err" && res=0
ok "$res" "--resume of a two-target sweep runs the missing target's points only (rc $rc)"
[ "$res" = 0 ] || { cat "$tmp/resume.err"; cut -c1-120 "$tmp/resume.csv"; } | diag

# plan reads the dtype from a GGUF target: the embedded target at Q8_0 by hand, per layer q and o
# 192x192, k and v 64x192, gate / up / down 512x192 (393216 weights) x 4 layers + the tied
# embedding 2048x192 = 1966080 weights at 34/32 bytes, + f32 norms 4 x (192 + 4 x (2x192 + 2x32))
"$BIN" plan --target-config "$tmp/tiny-qwen3-q8_0.gguf" -c 1 --no-measure --bandwidth-gbs 10 --gflops 10 -o json \
    >"$tmp/plan.json" 2>"$tmp/plan.err"
rc=$?
want=$((1966080 * 34 / 32 + 4 * (192 + 4 * (2 * 192 + 2 * 32))))
got=$(sed -n 's/.*"weights_bytes":[^0-9]*\([0-9]*\).*/\1/p' "$tmp/plan.json" | head -1)
ok "$([ "$rc" = 0 ] && grep -q '"dtype":[^"]*"q8_0"' "$tmp/plan.json" && [ "$got" = "$want" ]; echo $?)" \
    "plan on the Q8_0 GGUF: dtype q8_0 from the file, weights $got bytes == $want by hand"

head -c 5000 "$tmp/tiny-qwen3-q8_0.gguf" >"$tmp/cut.gguf"
"$BIN" generate --target "$tmp/cut.gguf" --drafter "$tmp/tiny-qwen3-dflash2-b16-q8_0.gguf" \
    --prompt-ids 1,2 -n 4 >"$tmp/cut.out" 2>"$tmp/cut.err"
rc=$?
bad=1
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/cut.err")" = 1 ] && grep -qF "$tmp/cut.gguf" "$tmp/cut.err" &&
    [ ! -s "$tmp/cut.out" ] && bad=0
ok "$bad" "truncated GGUF target: exit 2, one line naming the file (rc $rc)"
[ "$bad" = 0 ] || diag <"$tmp/cut.err"
done_testing
