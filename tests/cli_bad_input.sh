#!/usr/bin/env bash
# cli_bad_input.sh — the CLI on bad input (TAP). meson's test_env sets DB_BIN (the built
# dflash-bench) and DB_TEST_DATA (tests/data).
#   bad checkpoints: exit status 2, nothing on stdout, exactly one line on stderr naming the file
#   (and the key / tensor where there is one);
#   bad flags (unknown option, non-integer -n, ...): exit status 2, one line on stderr;
#   --version lists the compiled backend "cpu";
#   greedy generate on qwen3-f32-tied prints exactly golden.json's greedy.output.
set -u

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
DATA=${DB_TEST_DATA:?DB_TEST_DATA not set (run through meson test)}
TIED="$DATA/qwen3-f32-tied"

. "$(dirname "$0")/tap.sh"
make_tmp cli-bad
out="$tmp/stdout"
errf="$tmp/stderr"

# ---- bad checkpoints, built from the fixture ----
mkcase() { # name -> a copy of the tied target in $tmp/name
    mkdir -p "$tmp/$1"
    cp "$TIED/config.json" "$TIED/model.safetensors" "$tmp/$1/"
    echo "$tmp/$1"
}

d=$(mkcase cfg_not_json)
printf '{"model_type": "qwen3", "hidden_size": 32,' >"$d/config.json"
expect_refused "config.json not JSON: exit 2 naming the file" "$d/config.json" -- \
    generate --target "$d" --prompt-ids 1,2

d=$(mkcase cfg_no_hidden)
grep -v '"hidden_size"' "$TIED/config.json" >"$d/config.json"
expect_refused "config.json without hidden_size: exit 2 naming file and key" \
    "$d/config.json" "hidden_size" -- generate --target "$d" --prompt-ids 1,2

d=$(mkcase cfg_yarn)
sed 's/"rope_theta": 10000.0/"rope_theta": 10000.0, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}/' \
    "$TIED/config.json" >"$d/config.json"
expect_refused "rope_scaling yarn: exit 2 naming file and 'yarn'" "$d/config.json" "yarn" -- \
    generate --target "$d" --prompt-ids 1,2

d=$(mkcase st_short)
head -c 5 "$TIED/model.safetensors" >"$d/model.safetensors"
expect_refused "safetensors of 5 bytes: exit 2 naming the file" "$d/model.safetensors" -- \
    generate --target "$d" --prompt-ids 1,2

d=$(mkcase st_truncated)
size=$(wc -c <"$TIED/model.safetensors")
head -c $((size - 100)) "$TIED/model.safetensors" >"$d/model.safetensors"
expect_refused "safetensors data cut short: exit 2 naming file and tensor" \
    "$d/model.safetensors" "model.norm.weight" -- generate --target "$d" --prompt-ids 1,2

# plan reads a checkpoint's dtype from its weights: weights that are there must open
expect_refused "plan on a truncated safetensors: exit 2 naming the file" "$d/model.safetensors" -- \
    plan --target-config "$d" -c 1 --no-measure --bandwidth-gbs 40 --gflops 100

d=$(mkcase st_garbage)
{ printf '\x20\x00\x00\x00\x00\x00\x00\x00'; head -c 4096 /dev/zero; } >"$d/model.safetensors"
expect_refused "safetensors header of zeros: exit 2 naming the file" "$d/model.safetensors" -- \
    generate --target "$d" --prompt-ids 1,2

d=$(mkcase st_absent)
rm "$d/model.safetensors"
expect_refused "no safetensors at all: exit 2 naming the directory" "$d" -- \
    generate --target "$d" --prompt-ids 1,2

expect_refused "target directory that does not exist: exit 2 naming it" "$tmp/nowhere" -- \
    generate --target "$tmp/nowhere" --prompt-ids 1,2

# ---- bad flags ----
expect_refused "unknown option: exit 2 naming it" "--bogus" -- \
    generate --target "$TIED" --prompt-ids 1,2 --bogus
expect_refused "unknown short option: exit 2" "-Z" -- generate --target "$TIED" --prompt-ids 1,2 -Z
for v in abc 3x 1.5 "" 99999999999; do
    expect_refused "-n '$v' (not an integer): exit 2" "'$v'" -- \
        generate --target "$TIED" --prompt-ids 1,2 -n "$v"
done
expect_refused "--max-new-tokens=x: exit 2" "'x'" -- \
    generate --target "$TIED" --prompt-ids 1,2 --max-new-tokens=x
expect_refused "-n 0: exit 2" "max-new-tokens" -- generate --target "$TIED" --prompt-ids 1,2 -n 0
expect_refused "-n without a value: exit 2" "max-new-tokens" -- \
    generate --target "$TIED" --prompt-ids 1,2 -n
expect_refused "--temperature abc: exit 2" "temperature" -- \
    generate --target "$TIED" --prompt-ids 1,2 --temperature abc
expect_refused "--temperature -1: exit 2" "temperature" -- \
    generate --target "$TIED" --prompt-ids 1,2 --temperature -1
expect_refused "--top-p 0: exit 2" "top_p" -- generate --target "$TIED" --prompt-ids 1,2 --top-p 0
expect_refused "--top-p 1.5: exit 2" "top_p" -- generate --target "$TIED" --prompt-ids 1,2 --top-p 1.5
run generate --target "$TIED" --prompt-ids 1,2 -n 2 -T 1 --top-k -3
ok "$([ "$rc" = 2 ]; echo $?)" "--top-k -3: exit 2 (got $rc)"
run generate --target "$TIED" --prompt-ids 1,2 -n 2 --threads -3
ok "$([ "$rc" = 2 ]; echo $?)" "--threads -3: exit 2 (got $rc)"
expect_refused "unknown command: exit 2 naming it" "frobnicate" -- frobnicate
expect_refused "stray argument: exit 2 naming it" "stray" -- \
    generate --target "$TIED" --prompt-ids 1,2 stray
expect_refused "prompt id outside the vocabulary: exit 2" "" -- \
    generate --target "$TIED" --prompt-ids 1,96
expect_refused "prompt ids not numbers: exit 2" "" -- generate --target "$TIED" --prompt-ids 1,x
expect_refused "no --target: exit 2" "target" -- generate --prompt-ids 1,2

# ---- bad chain drafters (EAGLE-3, MTP): exit 2 naming the file and the key / tensor ----
d="$tmp/eagle3_taps"
mkdir -p "$d"
cp "$DATA/eagle3-f32/model.safetensors" "$d/"
tr -d '\n' <"$DATA/eagle3-f32/config.json" |
    sed 's/"eagle_aux_hidden_state_layer_ids": *\[[^]]*\]/"eagle_aux_hidden_state_layer_ids": [1, 3, 9]/' >"$d/config.json"
expect_refused "eagle3 tap id 9 of a 6-layer target: exit 2 naming file and key" "$d/config.json" \
    "eagle_aux_hidden_state_layer_ids" -- generate --target "$TIED" --drafter "$d" --variant eagle3 --prompt-ids 1,2
d="$tmp/mtp_none"
mkdir -p "$d"
cp "$DATA/mtp-f32/config.json" "$d/"
cp "$TIED/model.safetensors" "$d/" # the target's tensors, no mtp.*
expect_refused "an MTP config over tensors without the head: exit 2 naming the tensor" "$d" "mtp.fc.weight" -- \
    generate --target "$TIED" --drafter "$d" --variant mtp --prompt-ids 1,2

# ---- --version ----
run --version
ok "$([ "$rc" = 0 ] && grep -Eq '^backends:( [a-z0-9]+)* cpu( |$)' "$out"; echo $?)" \
    "--version exits 0 and lists backend cpu"
[ "$rc" = 0 ] || diag <"$errf"
diag <"$out"

# ---- golden greedy output ----
golden="$TIED/golden.json"
if [ -x /usr/bin/python3 ]; then
    want=$(/usr/bin/python3 -c 'import json, sys; g = json.load(open(sys.argv[1]))["greedy"]
print(",".join(map(str, g["prompt"]))); print(g["n"]); print(",".join(map(str, g["output"])))' "$golden")
    prompt=$(echo "$want" | sed -n 1p)
    count=$(echo "$want" | sed -n 2p)
    expect=$(echo "$want" | sed -n 3p)
else # the greedy object is one line of golden.json's tail: {"prompt":[..],"n":N,"output":[..]}
    g=$(tr -d ' \n' <"$golden" | sed 's/.*"greedy":{\([^}]*\)}.*/\1/')
    prompt=$(echo "$g" | sed 's/.*"prompt":\[\([^]]*\)\].*/\1/')
    count=$(echo "$g" | sed 's/.*"n":\([0-9]*\).*/\1/')
    expect=$(echo "$g" | sed 's/.*"output":\[\([^]]*\)\].*/\1/')
fi
ok "$([ "$prompt" = 1,2,3 ] && [ "$count" = 32 ]; echo $?)" \
    "golden.json greedy case is prompt 1,2,3 with n = 32 (got '$prompt', n '$count')"
run generate --target "$TIED" --prompt-ids "$prompt" -n "$count"
got=$(cat "$out")
ok "$([ "$rc" = 0 ] && [ "$got" = "$expect" ]; echo $?)" \
    "generate --prompt-ids $prompt -n $count prints exactly golden greedy.output"
if [ "$rc" != 0 ] || [ "$got" != "$expect" ]; then
    { echo "exit $rc"; echo "got:  $got"; echo "want: $expect"; cat "$errf"; } | diag
fi
ok "$([ "$(wc -l <"$out")" = 1 ]; echo $?)" "generate prints the ids on one stdout line"

done_testing
