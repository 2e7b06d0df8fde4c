#!/usr/bin/env bash
# cli_install.sh — the installed binary runs from anywhere (TAP). meson's test_env sets DB_BIN,
# DB_SOURCE_ROOT, DB_BUILD_ROOT and DB_MESON.
#   meson install --destdir D puts bin/dflash-bench and share/dflash-bench/{models,datasets,
#   configs}, every file equal to the source tree's, and README.md + docs/ in share/doc;
#   the GPU backends' modules (lib/.../dflash-bench/dflash-bench-cuda.so) installed, and loaded
#   by the installed binary from its own tree (its `info` on them as the build tree's);
#   a failing run from / (a bad dataset) creates nothing in /;
#   D/.../bin/dflash-bench run -n 8 --max-samples 1 --min-time 0 -r 1 -c 1 (--label: its own directory), run from / with no DFLASH_BENCH_DATA and no
#   source tree above it, exits 0 and writes the default sweep under ./results (here /results;
#   $XDG_DATA_HOME/dflash-bench/results when / is not writable), its meta.json naming the
#   installed models;
#   the build tree's binary, run from an empty directory, finds the source tree's models.
set -u
. "$(dirname "$0")/tap.sh"

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}
BUILD=${DB_BUILD_ROOT:?DB_BUILD_ROOT not set}
MESON=${DB_MESON:-}
{ [ -n "$MESON" ] && [ -x "$MESON" ]; } || skip_all "meson not found (needed for meson install)"
need_models
make_tmp install
had_results=0
[ -e /results ] && had_results=1
made_results="" # this run's directory only: other runs (tests in parallel) may share its parent
cleanup() {
    rm -rf "$tmp"
    [ -n "$made_results" ] && rm -rf "$made_results"
    [ "$had_results" = 0 ] && rmdir /results 2>/dev/null # only when empty: never another run's
    true
}
trap cleanup EXIT
unset DFLASH_BENCH_DATA XDG_DATA_HOME
export HOME="$tmp/home"
mkdir -p "$HOME"

D="$tmp/dest"
"$MESON" install -C "$BUILD" --destdir "$D" --no-rebuild --quiet >"$tmp/install.log" 2>&1
rc=$?
ok "$rc" "meson install --destdir (rc $rc)"
[ "$rc" = 0 ] || diag <"$tmp/install.log"
IBIN=$(find "$D" -type f -path '*/bin/dflash-bench' | head -n 1)
SHARE=$(dirname "$(find "$D" -type f -path '*/share/dflash-bench/configs/default.ini' | head -n 1)")
SHARE=${SHARE%/configs}
[ -x "$IBIN" ] && [ -d "$SHARE" ] && [ "$(cd "$(dirname "$IBIN")/../share/dflash-bench" 2>/dev/null && pwd)" = "$SHARE" ]
ok $? "bin/dflash-bench and share/dflash-bench installed (${IBIN#"$D"}, ${SHARE#"$D"})"

bad=0 count=0
while IFS= read -r f; do
    count=$((count + 1))
    cmp -s "$ROOT/$f" "$SHARE/$f" || { bad=1; echo "# differs or missing: $f"; }
done < <(cd "$ROOT" && find models datasets configs -type f)
[ "$count" -gt 0 ] || bad=1
ok "$bad" "every file of models/ datasets/ configs/ installed as it is ($count files)"
DOC="$(dirname "$SHARE")/doc/dflash-bench"
cmp -s "$ROOT/README.md" "$DOC/README.md" && cmp -s "$ROOT/docs/architecture.md" "$DOC/docs/architecture.md"
ok $? "README.md and docs/ installed under share/doc/dflash-bench"

# the GPU backends' modules (dflash-bench-cuda.so, -hip.so): installed, and found by the installed
# binary wherever the tree is (relative to it, no $DB_BACKEND_DIR): its info on every backend
# reads as the build tree's (usable, or no device; never a module that is not found)
gpus=$("$BIN" --version | sed -n 's/^backends: //p' | tr ' ' '\n' | grep -vx cpu)
if [ -n "$gpus" ]; then
    bad=0
    for g in $gpus; do
        m=$(find "$D" -type f -name "dflash-bench-$g.so" | head -n 1)
        [ -n "$m" ] || { bad=1; echo "# dflash-bench-$g.so not installed"; }
    done
    (unset DB_BACKEND_DIR; "$BIN" info) | grep '^| backend ' >"$tmp/info.build"
    (unset DB_BACKEND_DIR; cd / && "$IBIN" info) | grep '^| backend ' >"$tmp/info.inst"
    cmp -s "$tmp/info.build" "$tmp/info.inst" && ! grep -q 'module' "$tmp/info.inst" || bad=1
    ok "$bad" "GPU backend modules installed and loaded by the installed binary ($(echo $gpus))"
    [ "$bad" = 0 ] || diag <"$tmp/info.inst"
else
    ok 0 "GPU backend modules installed # SKIP no GPU backend built"
fi

# a failing run from /: nothing new in / (but results/, which tests running in parallel may
# make), and nothing of this run's under /results
before=$(ls -A / | grep -vx results)
(cd / && "$IBIN" run -n 8 --max-samples 1 --label "install-test-$$" --dataset "$tmp/missing.jsonl") \
    >/dev/null 2>"$tmp/stderr"
rc=$?
[ "$rc" = 2 ] && [ "$(ls -A / | grep -vx results)" = "$before" ] &&
    ! ls -d /results/*-install-test-$$ /.dflash-bench-probe.* >/dev/null 2>&1
ok $? "a failing run from / exits 2 and creates nothing in / (rc $rc)"

# the documented command from /
# (a label of its own: two of these tests started in the same second share no directory)
(cd / && "$IBIN" run -n 8 --max-samples 1 --min-time 0 -r 1 -c 1 --label "install-test-$$") >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
out=$(sed -n 's/^results in //p' "$tmp/stderr" | tail -n 1)
case "$out" in /*) abs=$out ;; *) abs="/$out" ;; esac
if [ -w / ]; then want=/results/; else want="$HOME/.local/share/dflash-bench/results/"; fi
inplace=1
case "$abs" in
"$want"*"-install-test-$$") # ours to remove (cleanup: and /results when it is left empty)
    inplace=0
    made_results=$abs ;;
esac
ok "$rc" "installed binary: run -n 8 --max-samples 1 --min-time 0 -r 1 -c 1 from / exits 0 (rc $rc)"
[ "$rc" = 0 ] || tail -n 5 "$tmp/stderr" | diag
ok "$inplace" "results where expected: $abs (under $want)"
rows=$( (tail -n +2 "$abs/summary.csv" 2>/dev/null || true) | wc -l)
[ "$rows" -gt 0 ] && grep -qF "$SHARE/models/tiny-qwen3" "$abs/meta.json" 2>/dev/null
ok $? "summary.csv has the default sweep's $rows rows, meta.json names the installed models"

# the build tree's binary from an empty directory: the source tree's data, by walking up
mkdir -p "$tmp/empty"
(cd "$tmp/empty" && "$BIN" run -n 4 --max-samples 1 --warmup 0 --dataset math --variant ar -c 1 \
    --out "$tmp/bt") >/dev/null 2>"$tmp/stderr"
rc=$?
[ "$rc" = 0 ] && grep -qF "$ROOT/models/tiny-qwen3" "$tmp/bt/meta.json" && [ -z "$(ls -A "$tmp/empty")" ]
ok $? "build tree binary from an empty directory uses the source tree's models (rc $rc)"

done_testing
