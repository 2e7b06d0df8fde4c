#!/usr/bin/env bash
# cli_no_results_dir.sh — a failed `run` leaves no results directory (TAP). meson's test_env sets
# DB_BIN and DB_SOURCE_ROOT.
# Each failing invocation runs twice, from an empty directory: once with --out DIR (DIR must not
# appear) and once with the default results directory (the empty directory must stay empty):
#   a bad target path; -B 17 (above the drafter's block size 16, found after the models load);
#   truncated target weights; a dataset that is not JSONL; --backend cuda without a device (or
#   not compiled); the binary copied away from its data and run from another directory.
# Then a run that succeeds has its directory, and a later invocation that fails on the same
# --out leaves it as it was (points intact, resumable).
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
need_models
make_tmp no-results
unset DFLASH_BENCH_DATA

# fixtures: truncated weights, a bad dataset, the binary alone in a directory
mkdir -p "$tmp/trunc"
cp "$ROOT/models/tiny-qwen3/"*.json "$tmp/trunc/"
head -c 100000 "$ROOT/models/tiny-qwen3/model.safetensors" >"$tmp/trunc/model.safetensors"
printf '{"question": "ok"}\nnot json\n' >"$tmp/bad.jsonl"
mkdir -p "$tmp/lonely"
cp "$BIN" "$tmp/lonely/dflash-bench"

small=(-n 8 --max-samples 1 --warmup 0 --threads 1 --variant ar,dflash2 -c 1 -B 8)
cases=("bad target path|$BIN|--target $tmp/no-such-model"
       "-B 17|$BIN|-B 17"
       "truncated weights|$BIN|--target $tmp/trunc"
       "bad dataset|$BIN|--dataset $tmp/bad.jsonl"
       "--backend cuda without a device|$BIN|--backend cuda"
       "the binary away from its data, run from another directory|$tmp/lonely/dflash-bench|")
k=0
for c in "${cases[@]}"; do
    IFS='|' read -r desc bin extra <<<"$c"
    k=$((k + 1))
    if [ "$desc" = "--backend cuda without a device" ] && command -v nvidia-smi >/dev/null 2>&1 &&
        nvidia-smi -L 2>/dev/null | grep -q GPU; then
        ok 0 "# SKIP $desc: this machine has a CUDA device"
        ok 0 "# SKIP $desc: this machine has a CUDA device"
        continue
    fi
    for mode in out default; do
        cwd="$tmp/cwd-$k-$mode"
        mkdir -p "$cwd"
        outargs=()
        [ "$mode" = out ] && outargs=(--out "$tmp/out-$k/run")
        # shellcheck disable=SC2086 # extra holds flags split on spaces
        (cd "$cwd" && "$bin" run "${small[@]}" $extra "${outargs[@]+"${outargs[@]}"}") \
            >"$tmp/stdout" 2>"$tmp/stderr"
        rc=$?
        left=$( (ls -A "$cwd"; [ -e "$tmp/out-$k" ] && echo "out-$k") | tr '\n' ' ')
        bad=0
        { [ "$rc" = 1 ] || [ "$rc" = 2 ]; } || bad=1
        [ -z "$left" ] || bad=1
        ok "$bad" "$desc ($mode results directory): exit $rc, left: ${left:-nothing}"
        diag <"$tmp/stderr"
    done
done

# a completed run, then a failing invocation on the same directory: the points stay, resumable
"$BIN" run "${small[@]}" --dataset math --variant ar --out "$tmp/done" >/dev/null 2>"$tmp/stderr"
rc=$?
ok "$rc" "a run that completes has its directory (rc $rc)"
before=$(cat "$tmp/done/points.done" 2>/dev/null)
"$BIN" run "${small[@]}" --dataset math --variant ar --target "$tmp/no-such-model" --resume "$tmp/done" >/dev/null 2>"$tmp/stderr"
rc=$?
after=$(cat "$tmp/done/points.done" 2>/dev/null)
[ "$rc" = 2 ] && [ -n "$before" ] && [ "$before" = "$after" ] && [ -s "$tmp/done/summary.csv" ]
ok $? "a failed resume leaves the completed points as they were (rc $rc)"

done_testing
