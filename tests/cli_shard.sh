#!/usr/bin/env bash
# cli_shard.sh — `run --shard K/N` and `merge` on the embedded pair (TAP). meson's test_env sets
# DB_BIN and DB_SOURCE_ROOT.
#   a small sweep (2 datasets x 2 concurrencies = 4 groups of ar + dflash2) run whole and in 3
#   shards: every shard's points are whole groups, the shards' points are the sweep's, once each;
#   meta.json records shard and sweep hash; merge of the 3 gives the same points and the same
#   non-timing value in every column of every table as the whole run (tests/results_same.py),
#   every row with its host, and a consistent results directory (tests/results_check.py);
#   refusals: another sweep, a point twice, a torn file, another schema, a used OUT (exit 2,
#   one line, nothing written); missing shard: exit 1 naming its points, nothing written;
#   --allow-partial: exit 0 with the points present; --resume of a finished shard: nothing to do.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
need_models
need_results_check
make_tmp cli-shard
out="$tmp/stdout"
errf="$tmp/stderr"
SAME="$ROOT/tests/results_same.py"

sweep=(--dataset math,code -c 1,2 -v ar,dflash2 -B 8 -n 8 --max-samples 2 -r 1 --min-time 0 --warmup 0 --threads 1 -o csv)
ids() { sort "$1/points.done"; }

"$BIN" run "${sweep[@]}" --out "$tmp/whole" >/dev/null 2>"$tmp/whole.err"
ok $? "the whole sweep exits 0"
for k in 0 1 2; do
    "$BIN" run "${sweep[@]}" --shard "$k/3" --out "$tmp/s$k" >/dev/null 2>"$tmp/s$k.err"
    ok $? "shard $k/3 exits 0"
done

ok "$([ "$(cat "$tmp"/s[012]/points.done | sort)" = "$(ids "$tmp/whole")" ]; echo $?)" \
    "the shards' points are the sweep's, each once ($(cat "$tmp"/s[012]/points.done | wc -l) of $(wc -l <"$tmp/whole/points.done"))"
# a group (dataset, concurrency) lives in one shard: ar next to its variants
split=$(for k in 0 1 2; do cut -d'|' -f2,5 "$tmp/s$k/points.done" | sort -u | sed "s/^/$k /"; done |
    awk '{ n[$2]++ } END { for (g in n) if (n[g] > 1) print g }')
ok "$([ -z "$split" ]; echo $?)" "no group is split across shards${split:+ ($split)}"
nonempty=$(for k in 0 1 2; do [ -s "$tmp/s$k/points.done" ] && echo "$k"; done | wc -l)
ok "$([ "$nonempty" = 3 ]; echo $?)" "4 groups over 3 shards: every shard has points ($nonempty)"
meta=$("$PY" -c '
import json, sys
m = [json.load(open(sys.argv[i] + "/meta.json"))["shard"] for i in (1, 2, 3)]
same = all(x["sweep_hash"] == m[0]["sweep_hash"] and x["points"] == m[0]["points"] for x in m)
idx = [x["index"] for x in m] == [0, 1, 2] and all(x["count"] == 3 for x in m)
print("ok" if same and idx and len(m[0]["sweep_hash"]) == 64 else "bad")' "$tmp/s0" "$tmp/s1" "$tmp/s2")
ok "$([ "$meta" = ok ]; echo $?)" "meta.json: shard index/count, one sweep hash and one partition in every shard"

run merge "$tmp/merged" "$tmp/s2" "$tmp/s0" "$tmp/s1"
ok "$([ "$rc" = 0 ] && [ ! -s "$out" ]; echo $?)" "merge of the 3 shards exits 0 (rc $rc)"
[ "$rc" = 0 ] || diag <"$errf"
res=$("$PY" "$SAME" "$tmp/whole" "$tmp/merged")
ok "$([ "$res" = OK ]; echo $?)" "merged == whole run: point set and every non-timing column"
[ "$res" = OK ] || echo "$res" | diag
res=$("$PY" "$CHECK" "$tmp/merged" "$(wc -l <"$tmp/whole/points.done")")
ok "$([ "$res" = OK ]; echo $?)" "the merged directory is consistent (results_check)"
[ "$res" = OK ] || echo "$res" | diag
host=$(hostname)
hosts=$("$PY" -c '
import csv, sys
for t in ("summary", "acceptance", "histogram", "requests"):
    rows = list(csv.DictReader(open(sys.argv[1] + "/" + t + ".csv")))
    print(t, sorted({r["host"] for r in rows}), list(rows[0])[-1])' "$tmp/merged" | sort -u)
ok "$(! echo "$hosts" | grep -v "\['$host'\] host$" >/dev/null; echo $?)" "every merged row's host is $host, the last column"
ok "$([ "$(cat "$tmp/merged/points.done")" = "$(cat "$tmp/whole/points.done")" ]; echo $?)" \
    "merged points.done in the sweep's order"

# refusals: exit 2, one line, nothing written
nothing_at() { [ ! -e "$1" ] && [ -z "$(ls -d "$1".tmp-* 2>/dev/null)" ]; }
"$BIN" run "${sweep[@]}" -n 6 --shard 0/3 --out "$tmp/other" >/dev/null 2>&1
expect_refused "merge of two sweeps: exit 2 naming the key" "another sweep" "max_new_tokens" -- \
    merge "$tmp/m1" "$tmp/s0" "$tmp/other"
ok "$(nothing_at "$tmp/m1"; echo $?)" "... and nothing written"
expect_refused "merge with a point twice: exit 2 naming it" "completed in both" -- \
    merge "$tmp/m2" "$tmp/s0" "$tmp/s1" "$tmp/s2" "$tmp/s1"
cp -r "$tmp/s1" "$tmp/torn"
truncate -s -3 "$tmp/torn/requests.csv"
expect_refused "merge of a torn table: exit 2" "torn/requests.csv: torn file" -- \
    merge "$tmp/m3" "$tmp/s0" "$tmp/torn" "$tmp/s2"
ok "$(nothing_at "$tmp/m3"; echo $?)" "... and nothing written"
cp -r "$tmp/s1" "$tmp/torn2"
printf 'cpu|half' >>"$tmp/torn2/points.done"
expect_refused "merge with points.done cut short: exit 2" "points.done: torn file" -- \
    merge "$tmp/m4" "$tmp/s0" "$tmp/torn2" "$tmp/s2"
cp -r "$tmp/s1" "$tmp/schema"
sed -i '1s/,tau,/,tau_renamed,/' "$tmp/schema/summary.csv"
expect_refused "merge across schemas: exit 2" "header differs" -- merge "$tmp/m5" "$tmp/s0" "$tmp/schema" "$tmp/s2"
cp -r "$tmp/s1" "$tmp/dup"
sed -n 2p "$tmp/s1/requests.csv" >>"$tmp/dup/requests.csv"
expect_refused "merge with a request row twice: exit 2 naming the table" "dup/requests.csv: torn file: a row of point" -- \
    merge "$tmp/m8" "$tmp/s0" "$tmp/dup" "$tmp/s2"
cp -r "$tmp/s1" "$tmp/dupa"
sed -n 2p "$tmp/s1/acceptance.csv" >>"$tmp/dupa/acceptance.csv"
expect_refused "merge with an acceptance row twice: exit 2" "dupa/acceptance.csv: torn file" -- \
    merge "$tmp/m9" "$tmp/s0" "$tmp/dupa" "$tmp/s2"
expect_refused "merge of a merged directory: exit 2" "a merged directory" -- merge "$tmp/m10" "$tmp/merged"
ok "$(nothing_at "$tmp/m10"; echo $?)" "... and nothing written"
expect_refused "merge into a used directory: exit 2" "not an empty directory" -- merge "$tmp/s0" "$tmp/s1" "$tmp/s2"

# a missing shard: exit 1 naming its points; --allow-partial merges the rest
miss=$(wc -l <"$tmp/s1/points.done")
run merge "$tmp/m6" "$tmp/s0" "$tmp/s2"
first=$(head -1 "$tmp/s1/points.done")
ok "$([ "$rc" = 1 ] && grep -qF "$miss point" "$errf" && grep -qF "$first (shard 1)" "$errf" && nothing_at "$tmp/m6"; echo $?)" \
    "a shard missing: exit 1 naming its $miss points, nothing written (rc $rc)"
run merge --allow-partial "$tmp/m7" "$tmp/s0" "$tmp/s2"
n7=$(wc -l <"$tmp/m7/points.done" 2>/dev/null)
ok "$([ "$rc" = 0 ] && [ "$n7" = $(($(wc -l <"$tmp/whole/points.done") - miss)) ]; echo $?)" \
    "--allow-partial: exit 0 with the $n7 points present (rc $rc)"

run run --resume "$tmp/s1"
ok "$([ "$rc" = 0 ] && grep -q "nothing to do" "$errf"; echo $?)" "--resume of a finished shard: nothing to do (its own points only)"
expect_refused "--shard 3/3: out of range" "--shard '3/3'" -- run --shard 3/3
expect_refused "--resume with another --shard: refused" "differs from the recorded shard 1/3" -- \
    run --resume "$tmp/s1" --shard 0/3
run run "${sweep[@]}" --shard 7/9 --out "$tmp/empty"
ok "$([ "$rc" = 0 ] && [ ! -e "$tmp/empty" ] && grep -q "no points" "$errf"; echo $?)" \
    "a shard without groups: exit 0, says so, no directory"

done_testing
