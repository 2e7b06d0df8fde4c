#!/usr/bin/env bash
# cli_output.sh — what `run` prints and the files it touches, as a new user meets them (TAP).
# meson's test_env sets DB_BIN and DB_SOURCE_ROOT.
#   a refused run (-B 17 above the drafter's block; the memory refusal) prints nothing on stdout
#   in md, csv or json;
#   SIGTERM / SIGINT with -o json after a point: exit 143 / 130 and stdout parses as JSON;
#   --resume DIR -o csv of that directory prints the whole summary.csv (byte for byte);
#   --resume of a directory holding no results of this tool: exit 2, nothing written into it;
#   two runs started in the same second with the default --out both keep their results;
#   run / bench / generate -b cuda without a device: exit 2 (skipped with a device or no CUDA);
#   a GPU backend's module missing, or not loadable: exit 2, one line naming it;
#   plan --target-config /nonexist.json names the path as given;
#   configs/paper-h200.ini's recipe for real checkpoints, run as its comment writes it;
#   scripts/plot keys series by every axis that varies (here temperature and acceptance profile);
#   on a terminal (script(1)), the progress bar is erased before a warning is printed.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
need_models
need_results_check
make_tmp cli-output
cd "$ROOT" || exit 1
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
out=$tmp/out errf=$tmp/err
tiny=(--target "$ROOT/models/tiny-qwen3" --drafter "$ROOT/models/tiny-qwen3-dflash2-b16" -n 8 --max-samples 1
      --warmup 0 -r 1 --threads 1)

# refused runs: stdout stays empty
for fmt in md csv json; do
    run run "${tiny[@]}" -v ar,dflash2 -B 17 -o "$fmt" --out "$tmp/b17-$fmt"
    ok "$([ "$rc" = 2 ] && [ ! -s "$out" ] && [ ! -e "$tmp/b17-$fmt" ]; echo $?)" \
        "-B 17 -o $fmt: exit 2 ($rc), nothing on stdout ($(wc -c <"$out") bytes), no directory"
done
# the 27B-class shapes at 256 layers of 8x the MLP (about 1.7 TiB of weights): refused anywhere
sed 's/"num_hidden_layers": 52/"num_hidden_layers": 256/; s/"intermediate_size": 25600/"intermediate_size": 204800/' \
    configs/models/qwen3-27b-class.json >"$tmp/huge.json"
run run --synthetic --target-config "$tmp/huge.json" \
    --drafter-config configs/models/qwen3-27b-class-dflash2.json -v ar,dflash2 -n 8 -o json --out "$tmp/mem"
ok "$([ "$rc" = 2 ] && [ ! -s "$out" ] && grep -q "GiB available" "$errf"; echo $?)" \
    "the memory refusal (a 2 TiB synthetic target) -o json: exit 2 ($rc), nothing on stdout"

# a signal after the first group: the JSON array is closed
json_ok() { "$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); sys.exit(0 if isinstance(a, list) and a else 1)' "$1" 2>/dev/null; }
sweep=("${tiny[@]}" -v ar,dflash2 -B 4 --dataset math,code,chat -c 1,2)
for sig in TERM INT; do
    d=$tmp/sig-$sig
    "$BIN" run "${sweep[@]}" -o json --out "$d" >"$tmp/sig.json" 2>"$tmp/sig.err" &
    pid=$!
    wait_points "$d" 2 "$pid"
    kill -s "$sig" "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    want=$([ "$sig" = TERM ] && echo 143 || echo 130)
    ok "$([ "$rc" = "$want" ] && json_ok "$tmp/sig.json"; echo $?)" \
        "SIG$sig after a point with -o json: exit $rc (want $want), stdout parses as a JSON array"
    [ "$rc" = "$want" ] || diag <"$tmp/sig.err"
done

# the resume of that directory with -o csv prints the whole summary.csv
d=$tmp/sig-TERM
before=$(wc -l <"$d/points.done")
run run --resume "$d" -o csv
ok "$([ "$rc" = 0 ] && cmp -s "$out" "$d/summary.csv"; echo $?)" \
    "--resume DIR -o csv ($before points done before) prints the whole summary.csv (exit $rc)"
[ "$rc" = 0 ] || diag <"$errf"

# --resume of a directory that holds no results of this tool
mkdir "$tmp/scratch" && echo notes >"$tmp/scratch/notes.txt"
snap() { (cd "$1" && ls -A && cat -- *) | md5sum; }
s0=$(snap "$tmp/scratch")
run run --resume "$tmp/scratch" "${tiny[@]}" -v ar
ok "$([ "$rc" = 2 ] && [ "$(snap "$tmp/scratch")" = "$s0" ] && [ ! -s "$out" ] &&
      grep -q "holds no dflash-bench results" "$errf"; echo $?)" \
    "--resume of a directory without meta.json: exit 2 ($rc), nothing written into it"

# two runs started in the same second with the default --out: both keep their results
mkdir "$tmp/cwd"
same=0
for try in 1 2 3; do
    rm -rf "$tmp/cwd/results"
    t=$(date +%s)
    while [ "$(date +%s)" = "$t" ]; do sleep 0.01; done # at the start of a second
    (cd "$tmp/cwd" && "$BIN" run "${tiny[@]}" -v ar -c 1 --dataset math -o csv >"$tmp/d1.csv" 2>"$tmp/d1.err") &
    p1=$!
    (cd "$tmp/cwd" && "$BIN" run "${tiny[@]}" -v ar -c 1 --dataset math -o csv >"$tmp/d2.csv" 2>"$tmp/d2.err") &
    p2=$!
    wait "$p1"; r1=$?
    wait "$p2"; r2=$?
    dirs=$(ls "$tmp/cwd/results" 2>/dev/null | wc -l)
    # the same second: the names share their timestamp (one with a -N suffix), or only one dir
    stamps=$(ls "$tmp/cwd/results" 2>/dev/null | cut -c1-15 | sort -u | wc -l)
    [ "$stamps" = 1 ] && { same=1; break; }
done
good=1
for r in "$tmp"/cwd/results/*; do [ "$("$PY" "$CHECK" "$r" 1)" = OK ] || good=0; done
ok "$([ "$same" = 1 ] && [ "$r1" = 0 ] && [ "$r2" = 0 ] && [ "$dirs" = 2 ] && [ "$good" = 1 ]; echo $?)" \
    "two default --out runs in the same second: exit $r1 / $r2, $dirs directories, each with its point ($(ls "$tmp/cwd/results" | tr '\n' ' '))"
[ "$r1" = 0 ] || diag <"$tmp/d1.err"
[ "$r2" = 0 ] || diag <"$tmp/d2.err"

# -b cuda without a device: bad input, exit 2
"$BIN" generate -b cuda --target "$ROOT/models/tiny-qwen3" --prompt-ids 1,2 -n 2 >/dev/null 2>"$errf"
rc=$?
if grep -q "not compiled into" "$errf"; then
    ok 0 "# SKIP -b cuda: no CUDA backend in this build"
elif [ "$rc" = 0 ]; then
    ok 0 "# SKIP -b cuda: a CUDA device is present"
else
    bad=""
    for cmd in "generate --target $ROOT/models/tiny-qwen3 --prompt-ids 1,2 -n 2" "bench --target $ROOT/models/tiny-qwen3 --rows 1" \
               "run ${tiny[*]} -v ar --out $tmp/cuda"; do
        # shellcheck disable=SC2086
        "$BIN" $cmd -b cuda >/dev/null 2>"$errf"
        r=$?
        { [ "$r" = 2 ] && grep -q "no CUDA device" "$errf"; } || bad="$bad ${cmd%% *}:$r"
    done
    ok "$([ -z "$bad" ]; echo $?)" "run / bench / generate -b cuda without a device: exit 2${bad:+ (got$bad)}"
fi

# a GPU backend built whose module is not beside the binary, or does not load: exit 2, one line
# naming the module (a copy of the binary alone in a folder; then a module that is no ELF file)
gpu=$("$BIN" --version | sed -n 's/^backends: //p' | tr ' ' '\n' | grep -vx cpu | head -n 1)
if [ -n "$gpu" ]; then
    mkdir -p "$tmp/lone"
    cp "$BIN" "$tmp/lone/dflash-bench"
    BIN_KEEP=$BIN BIN=$tmp/lone/dflash-bench DIR_KEEP=${DB_BACKEND_DIR-}
    unset DB_BACKEND_DIR # (meson's: the build tree, where the module is)
    expect_refused "-b $gpu, its module missing: exit 2, one line naming it" \
        "dflash-bench-$gpu.so" "$tmp/lone" -- generate -b "$gpu" --target "$ROOT/models/tiny-qwen3" --prompt-ids 1,2 -n 2
    echo "not a module" >"$tmp/lone/dflash-bench-$gpu.so"
    expect_refused "run -b $gpu, its module does not load: exit 2, one line naming it" \
        "cannot load $tmp/lone/dflash-bench-$gpu.so" -- run "${tiny[@]}" -v ar -b "$gpu" --out "$tmp/lone/r"
    ok "$([ ! -e "$tmp/lone/r" ]; echo $?)" "run -b $gpu, its module does not load: no results directory"
    BIN=$BIN_KEEP
    [ -n "$DIR_KEEP" ] && export DB_BACKEND_DIR=$DIR_KEEP
else
    ok 0 "# SKIP GPU backend modules: none built"
fi

# config paths as given
run plan --target-config /nonexist.json
ok "$([ "$rc" = 2 ] && grep -q "^dflash-bench plan: /nonexist.json: " "$errf" && ! grep -q "config.json" "$errf"; echo $?)" \
    "plan --target-config /nonexist.json: exit 2 naming /nonexist.json as given ($(cat "$errf"))"

# configs/paper-h200.ini: its recipe for real checkpoints, as the comment writes it (on the CPU,
# tiny: the embedded pair, one prompt, concurrency 1, the roofline figures given)
ini=configs/paper-h200.ini
recipe=$(sed -n '/With real checkpoints instead: add/,/after --config/p' "$ini" | sed 's/^; *//' | tr '\n' ' ' |
         sed 's/.*instead: add //; s/ after --config.*//')
recipe=${recipe//--target DIR/--target $ROOT/models/tiny-qwen3}
recipe=${recipe//--drafter DIR/--drafter $ROOT/models/tiny-qwen3-dflash2-b16}
eval "set -- $recipe"
run run --config "$ini" "$@" -b cpu -n 8 --max-samples 1 -c 1 --warmup 0 --threads 1 \
    --bandwidth-gbs 10 --gflops 100 -o csv --out "$tmp/paper"
ok "$([ "$rc" = 0 ] && [ "$(("$(wc -l <"$out")" - 1))" = 10 ]; echo $?)" \
    "paper-h200.ini's real-checkpoint recipe runs as written: exit $rc, $(($(wc -l <"$out") - 1)) rows (want 10)"
[ "$rc" = 0 ] || { echo "recipe: $recipe" | diag; diag <"$errf"; }

# scripts/plot: one series per value of every axis that varies
run run "${tiny[@]}" -v ar,dflash2 -B 4 -c 1 --dataset math -T 0,1 \
    --acceptance-profile dflash2-gsm8k-t1,dflash2-mbpp-t1 --out "$tmp/axes"
titles=$(scripts/plot --script "$tmp/axes" 2>&1 | grep -o "yerrorlines title '[^']*'" | sed "s/.*title //" | sort -u)
nt=$(echo "$titles" | grep -c .)
ok "$([ "$rc" = 0 ] && [ "$nt" = 6 ] && echo "$titles" | grep -q "dflash2-B4-replay:dflash2-mbpp-t1-T1"; echo $?)" \
    "scripts/plot: throughput series keyed by profile and temperature ($nt series, want 6: ar x 2 T, dflash2 x 2 profiles x 2 T)"
echo "$titles" | diag

# on a terminal the bar is erased before a warning: a busy neighbour makes the load warning
if command -v script >/dev/null 2>&1; then
    (while :; do :; done) &
    spin=$!
    script -qec "$BIN run ${tiny[*]} -v ar --dataset math,code,chat -c 1 --out $tmp/tty" /dev/null >"$tmp/tty.log" 2>&1
    kill "$spin"
    wait "$spin" 2>/dev/null
    # a warning printed over the bar sits after "ETA ..." on the same line (between \r's)
    over=$(tr '\r' '\n' <"$tmp/tty.log" | grep -c "ETA .*warning:")
    nw=$(grep -c "warning:" "$tmp/tty.log")
    if [ "$nw" = 0 ]; then
        ok 0 "# SKIP no warning came up on the terminal run"
    else
        ok "$([ "$over" = 0 ]; echo $?)" "terminal: the bar is erased before each of $nw warnings ($over printed over it)"
    fi
fi

done_testing
