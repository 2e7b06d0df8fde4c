#!/usr/bin/env bash
# cli_limits.sh — what the CLI does at the edges of the machine (TAP): exit under a tight
# `ulimit -v`, SIGTERM in the middle of a point. meson's test_env sets DB_BIN, DB_SOURCE_ROOT
# and DB_SANITIZE (the build's b_sanitize).
#   (ulimit -v 850000; dflash-bench info) exits 0 within a few seconds (OpenBLAS's thread pool
#   once hung the exit);
#   --threads above 4 x the CPUs the process may use: exit 2 in every command that takes it;
#   threads the system cannot create: exit 1 with the tool's own line (not libgomp's);
#   a FIFO, device or directory as config.json, model.safetensors, tokenizer.json,
#   --prompt-ids-file, --config, --acceptance-profile or meta.json: exit 2 at once naming it;
#   a config.json over its cap (docs/limits.md): exit 2;
#   a config.json whose num_hidden_layers is below the checkpoint's layers: exit 2;
#   NaN weights in the target or the drafter, greedy and sampled (T 0.7): exit 1 naming the
#   call (target call N, drafter call N) and the model;
#   -t A,B: B's tokenizer must hash as A's (vocabulary + merges) and its shapes be A's: exit 2;
#   prompt + max_new_tokens + block beyond max_position_embeddings: exit 2 (generate, run),
#   unless --allow-long-context;
#   a NUL in a prompt (a byte, or \u0000 in JSON): exit 2 with file:line;
#   SIGTERM during a long point: exit 143 within 2 s (a cycle, not the rest of the pass), the
#   resume command on stderr, the point dropped.
set -u

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set (run through meson test)}

. "$(dirname "$0")/tap.sh"
make_tmp cli-limits
out="$tmp/stdout"
errf="$tmp/stderr"

now() { date +%s.%N; }
# seconds from $1 to $2, as an integer number of milliseconds
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

# ---- a tight address-space limit: the exit must not hang ----
# the sanitizers reserve terabytes of shadow memory: no ulimit -v under them
if [ "${DB_SANITIZE:-none}" = none ]; then
    t0=$(now)
    # (without meson's OPENBLAS_NUM_THREADS=1: the binary must set it and re-execute itself)
    (unset OPENBLAS_NUM_THREADS; ulimit -v 850000; exec timeout 20 "$BIN" info) >"$out" 2>"$errf"
    rc=$?
    t1=$(now)
    ok "$([ "$rc" = 0 ] && [ "$(ms "$t0" "$t1")" -lt 5000 ]; echo $?)" \
        "(ulimit -v 850000; info) exits 0 within 5 s (rc $rc, $(ms "$t0" "$t1") ms)"
    [ "$rc" = 0 ] || diag <"$errf"
else
    ok 0 "ulimit -v under $DB_SANITIZE # SKIP"
fi

# ---- --threads beyond what can run ----
cap=$((4 * $(nproc)))
TINY="$ROOT/models/tiny-qwen3"
for t in $((cap + 1)) 65536; do
    expect_refused "generate --threads $t (cap $cap): exit 2, one line" "--threads $t" "at most $cap" -- \
        generate --target "$TINY" --prompt-ids 1,2 -n 2 --threads "$t"
done
t=$((cap + 1))
expect_refused "run --threads $t: exit 2 naming the key" "threads $t" "at most $cap" -- \
    run --synthetic --target "$TINY" --variant ar --threads "$t" --out "$tmp/threads"
ok "$([ ! -e "$tmp/threads" ]; echo $?)" "run --threads $t: no results directory"
expect_refused "check-lossless --threads $t: exit 2" "--threads $t" -- \
    check-lossless --target "$TINY" --drafter "$ROOT/models/tiny-qwen3-dflash2-b16" --threads "$t"
expect_refused "plan --threads $t: exit 2" "--threads $t" -- \
    plan --target-config "$TINY" --threads "$t" --no-measure --bandwidth-gbs 40 --gflops 100
expect_refused "bench --threads $t: exit 2" "--threads $t" -- bench --target "$TINY" --threads "$t"
# threads that cannot be made (1 GB stacks in 4 GB of address space): the tool's own line, exit 1
if [ "${DB_SANITIZE:-none}" = none ]; then
    (ulimit -s 1000000 && ulimit -v 4000000 && exec "$BIN" generate --target "$TINY" --prompt-ids 1,2 -n 2 \
        --threads "$cap") >"$out" 2>"$errf"
    rc=$?
    ok "$([ "$rc" = 1 ] && grep -q "^dflash-bench generate: .*cannot start $cap CPU threads" "$errf"; echo $?)" \
        "threads that cannot be created: exit 1 with the tool's one line (rc $rc)"
    [ "$rc" = 1 ] || diag <"$errf"
else
    ok 0 "thread creation under ulimit -v with $DB_SANITIZE # SKIP"
fi

# ---- inputs that are not regular files, or too large ----
# every case under a timeout (a FIFO once blocked forever) and, outside the sanitizers, a 4 GB
# address space (a /dev/zero once grew memory at 1 GB/s): a failure, not a hang or a full machine
guard="$tmp/guarded"
if [ "${DB_SANITIZE:-none}" = none ]; then lim='ulimit -v 4000000 &&'; else lim=; fi
printf '#!/bin/sh\n%s exec timeout 30 "%s" "$@"\n' "$lim" "$BIN" >"$guard"
chmod +x "$guard"
BIN_REAL=$BIN
BIN=$guard
mkmodel() { # a copy of the embedded target in $tmp/$1, its file $2 (if any) replaced by a FIFO
    mkdir -p "$tmp/$1"
    cp "$TINY"/config.json "$TINY"/model.safetensors "$TINY"/tokenizer.json "$tmp/$1/"
    if [ -n "${2:-}" ]; then rm -f "$tmp/$1/$2" && mkfifo "$tmp/$1/$2"; fi
    echo "$tmp/$1"
}
for f in config.json model.safetensors tokenizer.json; do
    d=$(mkmodel "fifo-${f%%.*}" "$f")
    expect_refused "$f a FIFO: exit 2 at once naming it" "$d/$f" "not a regular file" -- \
        generate --target "$d" --prompt hello -n 2
done
expect_refused "--prompt-ids-file /dev/zero: exit 2" "/dev/zero" "not a regular file" -- \
    generate --target "$TINY" --prompt-ids-file /dev/zero -n 2
expect_refused "--prompt-ids-file DIR: exit 2" "$tmp: is a directory" -- \
    generate --target "$TINY" --prompt-ids-file "$tmp" -n 2
mkfifo "$tmp/fifo.jsonl"
expect_refused "--dataset FIFO: exit 2 naming it as not a regular file" "$tmp/fifo.jsonl" "not a regular file" -- \
    generate --target "$TINY" --dataset "$tmp/fifo.jsonl" -n 2
expect_refused "--dataset DIR: exit 2" "$tmp: is a directory" -- generate --target "$TINY" --dataset "$tmp" -n 2
expect_refused "--config /dev/zero: exit 2" "/dev/zero" "not a regular file" -- run --config /dev/zero
expect_refused "--config DIR: exit 2 (was read as an empty config)" "$tmp: is a directory" -- run --config "$tmp"
expect_refused "--acceptance-profile /dev/urandom: exit 2" "/dev/urandom" "not a regular file" -- \
    plan --target-config "$TINY" --acceptance-profile /dev/urandom --no-measure --bandwidth-gbs 40 --gflops 100
mkdir -p "$tmp/res"
ln -s /dev/zero "$tmp/res/meta.json"
expect_refused "run --resume, meta.json -> /dev/zero: exit 2" "meta.json" "not a regular file" -- \
    run --resume "$tmp/res"
d=$(mkmodel big-config)
truncate -s 17M "$d/config.json"
expect_refused "config.json of 17 MiB: exit 2, over its cap" "$d/config.json" "more than 16 MiB" -- \
    generate --target "$d" --prompt-ids 1,2 -n 2
BIN=$BIN_REAL

# ---- model checks at load ----
d=$(mkmodel layers3)
sed 's/"num_hidden_layers": 4/"num_hidden_layers": 3/' "$TINY/config.json" >"$d/config.json"
expect_refused "config of 3 layers over a checkpoint of 4: exit 2 naming the config and layer 3" \
    "$d/config.json" "num_hidden_layers is 3" "layer 3" -- generate --target "$d" --prompt-ids 1,2 -n 2

# NaN weights: the point stops, exit 1 naming the call and the model. Greedy points used to
# decode token 0 at every step and, with a drafter agreeing, report tau 11 and a speedup; sampled
# points drew tokens from NaN distributions. Sampled (T 0.7) through every path that turns logits
# into distributions: ar (sample op), selector-off (drafter rows sampled, dense accept), dflash2
# (the selector's walk, sparse accept), dspark (the host path's downloaded rows).
if [ -x /usr/bin/python3 ]; then
    nan_tensor() { # $1 model.safetensors: tensor $2 all NaN
        /usr/bin/python3 - "$1" "$2" <<'PY'
import json, struct, sys
p, name = sys.argv[1], sys.argv[2]
b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
s, e = json.loads(b[8:8 + n])[name]['data_offsets']
b[8 + n + s:8 + n + e] = b'\xff' * (e - s)  # NaN in bf16 and f32 alike
open(p, 'wb').write(b)
PY
    }
    mkdrafter() { # a copy of drafter $1 in $tmp/$2 whose final norm is NaN
        mkdir -p "$tmp/$2"
        cp "$ROOT/models/$1"/config.json "$ROOT/models/$1"/model.safetensors "$tmp/$2/"
        nan_tensor "$tmp/$2/model.safetensors" norm.weight
        echo "$tmp/$2"
    }
    nan_stops() { # $1 description, $2 the message's call, $3 the model's config.json, then generate's flags
        local desc=$1 call=$2 cfg=$3
        shift 3
        run generate "$@" --prompt-ids 1,2 -n 8
        ok "$([ "$rc" = 1 ] && [ "$(wc -l <"$errf")" = 1 ] && grep -q "$call: non-finite logits .* $cfg" "$errf"; echo $?)" \
            "$desc: exit 1 naming the $call and the model (rc $rc)"
        [ "$rc" = 1 ] || diag <"$errf"
    }
    d=$(mkmodel nan-weights)
    nan_tensor "$d/model.safetensors" model.norm.weight
    D2="$ROOT/models/tiny-qwen3-dflash2-b16" DS="$ROOT/models/tiny-qwen3-dspark-b16"
    for v in ar dflash2; do
        nan_stops "NaN target, greedy $v" "target call 1" "$d/config.json" --target "$d" --drafter "$D2" --variant "$v"
    done
    for v in ar selector-off dflash2; do
        nan_stops "NaN target, T 0.7 $v" "target call 1" "$d/config.json" --target "$d" --drafter "$D2" --variant "$v" -T 0.7
    done
    nan_stops "NaN target, T 0.7 dspark" "target call 1" "$d/config.json" --target "$d" --drafter "$DS" --variant dspark -T 0.7
    # the drafter's first call (after the prefill's target call) stops the point
    nd=$(mkdrafter tiny-qwen3-dflash2-b16 nan-dflash2)
    for v in selector-off dflash2; do
        nan_stops "NaN drafter, T 0.7 $v" "drafter call 1" "$nd/config.json" --target "$TINY" --drafter "$nd" --variant "$v" -T 0.7
    done
    nan_stops "NaN drafter, greedy dflash2" "drafter call 1" "$nd/config.json" --target "$TINY" --drafter "$nd" --variant dflash2
    nd=$(mkdrafter tiny-qwen3-dspark-b16 nan-dspark)
    nan_stops "NaN drafter, T 0.7 dspark" "drafter call 1" "$nd/config.json" --target "$TINY" --drafter "$nd" --variant dspark -T 0.7
else
    ok 0 "NaN weights need python3 # SKIP"
fi

# several targets are one model: the same tokenizer (not only its size) and the same shapes
d=$(mkmodel same-model)
run run -t "$TINY,$d" --dataset math --variant ar -c 1 --max-new-tokens 4 --max-samples 1 --repetitions 1 \
    --warmup 0 --out "$tmp/same"
ok "$rc" "-t A,copy of A: the sweep runs (rc $rc)"
[ "$rc" = 0 ] || diag <"$errf"
if [ -x /usr/bin/python3 ]; then
    d=$(mkmodel other-tokenizer)
    /usr/bin/python3 - "$d/tokenizer.json" <<'PY'
import json, sys
p = sys.argv[1]
t = json.load(open(p, encoding='utf-8'))
v = t['model']['vocab']
a, b = sorted(v, key=v.get)[300:302]  # two ordinary tokens trade ids: same size, other ids
v[a], v[b] = v[b], v[a]
json.dump(t, open(p, 'w', encoding='utf-8'), ensure_ascii=False)
PY
    expect_refused "-t A,B with another tokenizer of the same size: exit 2 naming B" "$d" "tokenizer differs" -- \
        run -t "$TINY,$d" --dataset math --variant ar -c 1 --out "$tmp/tok"
else
    ok 0 "a changed tokenizer.json needs python3 # SKIP"
fi
d=$(mkmodel other-shape)
sed 's/"intermediate_size": 512/"intermediate_size": 384/' "$TINY/config.json" >"$d/config.json"
expect_refused "-t A,B of another intermediate size: exit 2 naming both" "$TINY" "$d" "one model" -- \
    run -t "$TINY,$d" --dataset math --variant ar -c 1 --out "$tmp/shape"

# prompt + max_new_tokens + block past max_position_embeddings (1024 here): exit 2 unless allowed
expect_refused "generate past max_position_embeddings: exit 2 naming it and the config" \
    "max_position_embeddings 1024" "$TINY/config.json" "--allow-long-context" -- \
    generate --target "$TINY" --prompt-ids 1,2 -n 1100
run generate --target "$TINY" --prompt-ids 1,2 -n 1100 --allow-long-context
ok "$rc" "generate --allow-long-context runs past it (rc $rc)"
expect_refused "run past max_position_embeddings: exit 2 before any weight loads" \
    "synthetic-128" "= 1129 positions" "max_position_embeddings 1024" -- \
    run --synthetic --target "$TINY" --variant ar -c 1 --max-new-tokens 1000 --out "$tmp/long"
ok "$([ ! -e "$tmp/long" ]; echo $?)" "run past max_position_embeddings: no results directory"

# a NUL inside a prompt: refused with file:line (it used to cut the prompt there, silently)
printf '{"question": "one"}\n{"question": "two\\u0000three"}\n' >"$tmp/nul-escape.jsonl"
printf '{"question": "one"}\n{"question": "two\0three"}\n' >"$tmp/nul-byte.jsonl"
printf 'one\ntwo\0three\n' >"$tmp/nul-byte.txt"
for f in nul-escape.jsonl nul-byte.jsonl nul-byte.txt; do
    expect_refused "a NUL in a prompt ($f): exit 2 naming file:line" "$tmp/$f:2:" "NUL" -- \
        generate --target "$TINY" --dataset "$tmp/$f" -n 2
done
printf '{"question": "two\\\\u0000three"}\n' >"$tmp/nul-not.jsonl" # an escaped backslash, then text
run generate --target "$TINY" --dataset "$tmp/nul-not.jsonl" -n 2
ok "$rc" "a backslash before u0000 is text, not a NUL: generate runs (rc $rc)"

# ---- SIGTERM inside a point ----
# two groups (concurrency 4, then 1): the second runs 4 requests of 800 tokens one at a time,
# seconds even on a quiet machine; the signal lands in it
sweep=(run --synthetic --target "$ROOT/models/tiny-qwen3" --variant ar --concurrency 4,1
    --max-new-tokens 800 --max-samples 4 --repetitions 1 --warmup 0)
"$BIN" "${sweep[@]}" --out "$tmp/term" >/dev/null 2>"$tmp/term.err" &
pid=$!
wait_points "$tmp/term" 1 "$pid"
sleep 0.5
t0=$(now)
kill -TERM "$pid" 2>/dev/null
alive=$?
wait "$pid"
rc=$?
t1=$(now)
if [ "$alive" != 0 ]; then
    ok 0 "SIGTERM: the sweep had ended first # SKIP"
else
    ok "$([ "$rc" = 143 ] && [ "$(ms "$t0" "$t1")" -lt 2000 ]; echo $?)" \
        "SIGTERM in a point: exit 143 within 2 s (rc $rc, $(ms "$t0" "$t1") ms)"
    ok "$(grep -q 'finish the sweep with: .*run --resume' "$tmp/term.err"; echo $?)" \
        "SIGTERM in a point: stderr gives the resume command"
    ok "$([ "$(wc -l <"$tmp/term/points.done")" = 1 ]; echo $?)" \
        "SIGTERM in a point: the point in progress is dropped (points.done keeps 1)"
    diag <"$tmp/term.err"
fi

done_testing
