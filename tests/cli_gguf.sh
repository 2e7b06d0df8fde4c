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
#   `run` on the GGUF pair (tokenizer from the target's GGUF) writes its rows;
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
for v in ar dflash dflash2; do
    d=tiny-qwen3-dflash2-b16
    [ "$v" = dflash ] && d=tiny-qwen3-dflash-b16
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

"$BIN" run --target "$tmp/tiny-qwen3-q8_0.gguf" --drafter "$tmp/tiny-qwen3-dflash2-b16-q8_0.gguf" --dataset math \
    --max-samples 2 --max-new-tokens 8 --variant ar,dflash2 -c 1 -B 8 --warmup 0 --threads 1 --out "$tmp/run" -o csv \
    >"$tmp/run.csv" 2>"$tmp/run.err"
rc=$?
rows=$(($(wc -l <"$tmp/run.csv") - 1))
ok "$([ "$rc" = 0 ] && [ "$rows" = 2 ] && echo 0 || echo 1)" "run on the Q8_0 GGUF pair: exit $rc, $rows rows"
[ "$rc" = 0 ] || tail -3 "$tmp/run.err" | diag

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
