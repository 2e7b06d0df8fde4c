#!/usr/bin/env bash
# cli_tp.sh — `plan --tp 1,2,4,8` on the 27B-class preset (TAP): one row per degree and
# concurrency, each labelled a prediction; weights per GPU = one GPU's / n; the all-reduce time of
# every row recomputed here from config.json (2 per layer, ring 2(n-1)/n x rows x hidden x 2 bytes
# / 450 GB/s + 10 us for target and drafter); --link pcie changes it by its own figures; the md
# table says predictions; a bad --link or --tp is refused (exit 2).
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "/usr/bin/python3 (reads the JSON) is missing"
make_tmp cli-tp
out="$tmp/stdout"
errf="$tmp/stderr"
T="$ROOT/configs/models/qwen3-27b-class.json"
D="$ROOT/configs/models/qwen3-27b-class-dflash2.json"
args=(plan --target-config "$T" --drafter-config "$D" --no-measure --bandwidth-gbs 4800 --gflops 989000
    --gpu-mem-gib 141 -B 8 -c 1,8,32 --tp 1,2,4,8)

check() { # link GB/s latency-us
    "$PY" - "$T" "$D" "$out" "$1" "$2" <<'PYEOF'
import json, sys
t, d, doc = (json.load(open(p)) for p in sys.argv[1:4])
gbs, lat = float(sys.argv[4]) * 1e9, float(sys.argv[5]) * 1e-6
tp = doc["tensor_parallel"]
rows = tp["rows"]
problems = []
if len(rows) != 12 or any(r["kind"] != "prediction" for r in rows):
    problems.append(f"{len(rows)} rows, kinds {sorted({r['kind'] for r in rows})}")
one = {r["concurrency"]: r for r in rows if r["tp"] == 1}
def ar(n, b):  # one ring all-reduce of b bytes over n GPUs
    return 0 if n == 1 else 2 * (n - 1) / n * b / gbs + lat
for r in rows:
    n, c = r["tp"], r["concurrency"]
    want_ar = 2 * t["num_hidden_layers"] * ar(n, c * t["hidden_size"] * 2)
    rows_c = c * 8
    want_cy = (2 * d["num_hidden_layers"] * ar(n, rows_c * d["hidden_size"] * 2)
               + 2 * t["num_hidden_layers"] * ar(n, rows_c * t["hidden_size"] * 2))
    if abs(r["ar_allreduce_ms"] - 1e3 * want_ar) > 1e-9 or abs(r["cycle_allreduce_ms"] - 1e3 * want_cy) > 1e-9:
        problems.append(f"tp {n} c {c}: all-reduce {r['ar_allreduce_ms']} / {r['cycle_allreduce_ms']} ms, "
                        f"want {1e3 * want_ar} / {1e3 * want_cy}")
    if abs(r["weights_bytes_per_gpu"] * n - one[c]["weights_bytes_per_gpu"]) > 1:
        problems.append(f"tp {n}: weights per GPU x n != one GPU's")
print("OK" if not problems else "; ".join(problems[:3]))
PYEOF
}

run "${args[@]}" -o json
ok "$([ "$rc" = 0 ] && [ "$(check 450 10)" = OK ]; echo $?)" \
    "nvlink: 12 prediction rows; all-reduce = 2 per layer x (2(n-1)/n x bytes / 450 GB/s + 10 us), by hand; weights / n"
[ "$rc" = 0 ] && check 450 10 | grep -v '^OK$' | diag
run "${args[@]}" --link pcie -o json
ok "$([ "$rc" = 0 ] && [ "$(check 64 25)" = OK ]; echo $?)" "pcie: the same at 64 GB/s and 25 us"
run "${args[@]}" --link-gbs 100 --link-latency-us 2 -o json
ok "$([ "$rc" = 0 ] && [ "$(check 100 2)" = OK ]; echo $?)" "--link-gbs 100 --link-latency-us 2 replace the preset"
run "${args[@]}"
ok "$([ "$rc" = 0 ] && grep -q "^## Tensor parallel: predictions, not measurements" "$out" &&
    [ "$(grep -c '^| prediction |' "$out")" = 12 ]; echo $?)" "md: a predictions table of 12 rows"
expect_refused "--link infiniband refused" "--link 'infiniband'" -- "${args[@]}" --link infiniband
expect_refused "--tp 0 refused" "--tp: 0 is out of range" -- plan --target-config "$T" --no-measure --tp 0
done_testing
