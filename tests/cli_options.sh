#!/usr/bin/env bash
# cli_options.sh — the one option parser, for every command (TAP). meson's test_env sets DB_BIN
# and DB_SOURCE_ROOT. The commands come from `dflash-bench --help` and their options from
# `dflash-bench CMD --help`, so a new command or option is covered without editing this file.
#   CMD --help exits 0 and prints the usage generated from the option table;
#   a typo of every option (one letter dropped; names of 6+ characters) is refused with exit 2,
#   nothing on stdout and one line: unknown option '--typo' (did you mean --option?) — with and
#   without a value after it; an unknown short flag and a stray argument are refused the same way;
#   a mistyped key in a --config file is an unknown sweep key (file:line), a mistyped flag is not;
#   --kv-dtype is in every command that builds a target (run, bench, generate, check-lossless,
#   plan) and a value other than f32 / f16 is refused with exit 2 and one line naming it;
#   plan -c and check-lossless -B take the ranges of run -c (one list parser);
#   a short flag names the same option in every command (plan's -t/-d name the target's and the
#   drafter's configs: "-config" is the one suffix allowed);
#   README.md shows each command's --help exactly (scripts/readme-help rewrites those blocks).
set -u

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
ROOT=${DB_SOURCE_ROOT:?DB_SOURCE_ROOT not set}

. "$(dirname "$0")/tap.sh"
make_tmp cli-opt
out="$tmp/stdout"
errf="$tmp/stderr"

# the commands, from the main help
"$BIN" --help >"$tmp/main"
cmds=$(awk '/^commands:/ { on = 1; next } on && NF == 0 { exit } on { print $1 }' "$tmp/main")
ok "$([ "$(echo "$cmds" | wc -w)" -ge 6 ]; echo $?)" "--help lists the commands ($(echo $cmds))"

expect_refused "a typo of a command suggests it" "unknown command 'rnu' (did you mean run?)" -- rnu
expect_refused "the issue's example: run --thinkng" "unknown option '--thinkng' (did you mean --thinking?)" \
    -- run --thinkng

: >"$tmp/shorts"
for cmd in $cmds; do
    run "$cmd" --help
    cp "$out" "$tmp/help-$cmd"
    ok "$([ "$rc" = 0 ] && head -1 "$out" | grep -q "^usage: dflash-bench $cmd "; echo $?)" \
        "$cmd --help exits 0 with the usage"
    # option lines: "  -x, --name VALUE  help" or "      --name VALUE  help"
    opts=$(sed -n 's/^  \(-[A-Za-z], \|    \)--\([a-z][a-z0-9-]*\).*/\2/p' "$out" | grep -vx help)
    sed -n 's/^  -\([A-Za-z]\), --\([a-z][a-z0-9-]*\).*/\1 \2/p' "$out" | grep -v '^h help$' \
        >>"$tmp/shorts"
    ok "$([ -n "$opts" ]; echo $?)" "$cmd --help lists options"
    for o in $opts; do
        [ "${#o}" -ge 6 ] || continue
        k=$((${#o} / 2))
        typo="${o:0:k}${o:k+1}"
        expect_refused "$cmd --$typo: did you mean --$o" "unknown option '--$typo' (did you mean --$o?)" \
            -- "$cmd" "--$typo"
    done
    o=$(echo "$opts" | head -1)
    typo="${o:0:$((${#o} / 2))}${o:$((${#o} / 2 + 1))}"
    if [ "${#o}" -ge 6 ]; then
        expect_refused "$cmd --$typo 5 (a value after the typo): still the unknown option" \
            "unknown option '--$typo' (did you mean --$o?)" -- "$cmd" "--$typo" 5
    fi
    expect_refused "$cmd -Z: unknown short flag" "unknown option '-Z'" -- "$cmd" -Z
    if [ "$cmd" = merge ]; then # takes OUT DIR...
        expect_refused "merge stray: wants OUT and a directory" "want OUT DIR..." -- "$cmd" stray
    elif [ "$cmd" = compare ]; then # takes BASE NEW
        expect_refused "compare stray: wants BASE and NEW" "want BASE NEW" -- "$cmd" stray
    else
        expect_refused "$cmd stray: unexpected argument" "unexpected argument 'stray'" -- "$cmd" stray
    fi
done

# --kv-dtype: the commands that build a target have it, a bad value is one line and exit 2
kvc=""
for cmd in $cmds; do
    grep -q -- "--kv-dtype TYPE" "$tmp/help-$cmd" || continue
    kvc="$kvc $cmd"
    expect_refused "$cmd --kv-dtype f8: refused naming the value and the choices" "f8" "auto" "f32" "f16" \
        -- "$cmd" --kv-dtype f8
done
ok "$([ "$(echo $kvc | tr ' ' '\n' | sort | tr '\n' ' ')" = "bench check-lossless generate plan run " ]; echo $?)" \
    "--kv-dtype in run, bench, generate, check-lossless and plan (got:$kvc)"

# one list parser: ranges in plan -c and check-lossless -B as in run -c
if [ -f "$ROOT/models/tiny-qwen3/config.json" ]; then
    run plan -t "$ROOT/models/tiny-qwen3" -c 1-8*2 --no-measure --bandwidth-gbs 10 --gflops 10 -o json
    rows=$(grep -c '"concurrency"' "$out")
    ok "$([ "$rc" = 0 ] && [ "$rows" = 4 ]; echo $?)" "plan -c 1-8*2: rows for 1, 2, 4, 8 (rc $rc, $rows rows)"
else
    ok 0 "plan -c 1-8*2 # SKIP the embedded target is not in models/"
fi
expect_refused "check-lossless -B 8-4: the list parser's message" "--block-size: range '8-4' runs backwards" \
    -- check-lossless -t nowhere -d nowhere -B 8-4
expect_refused "plan -c 0: the list parser's range check" "--concurrency: 0 is out of range" -- plan -t nowhere -c 0

# "unknown sweep key" is the ini file's message; a flag gets "unknown option"
printf 'block_size = 4\nmax_sample = 3\n' >"$tmp/typo.ini"
expect_refused "run --config with a mistyped key: file, line, key and the key meant" \
    "$tmp/typo.ini:2: unknown sweep key 'max_sample' (did you mean max_samples?)" -- run --config "$tmp/typo.ini"
run run --max-sample 3
ok "$([ "$rc" = 2 ] && ! grep -q "sweep key" "$errf"; echo $?)" "run --max-sample: not a sweep-key message"
# a short command line asking for millions of points: refused before anything is written
expect_refused "run with 3 x 64 x 64 x (1 + 5 x 63) points: refused, the count named" \
    "the sweep has 3883008 points, more than 10000" -- \
    run -c 1-64 -B 2-64 -T "$(seq -s, 0 63)" --out "$tmp/huge"
ok "$([ ! -e "$tmp/huge" ]; echo $?)" "no results directory for a refused sweep"

# one meaning per short flag
clash=$(sed 's/-config$//' "$tmp/shorts" | sort -u | awk '{ n[$1]++; l[$1] = l[$1] " " $2 }
    END { for (f in n) if (n[f] > 1) print "-" f ":" l[f] }')
ok "$([ -z "$clash" ]; echo $?)" "each short flag names one option in every command"
[ -z "$clash" ] || echo "$clash" | diag

# README shows every command's help verbatim, between <!-- help:CMD --> and <!-- /help -->
for cmd in $cmds; do
    awk -v c="$cmd" '$0 == "<!-- help:" c " -->" { on = 1; next } on && /^<!-- \/help -->/ { exit }
        on && !/^```/ { print }' "$ROOT/README.md" >"$tmp/readme-$cmd"
    if cmp -s "$tmp/readme-$cmd" "$tmp/help-$cmd"; then
        ok 0 "README shows '$cmd --help' as the binary prints it"
    else
        ok 1 "README shows '$cmd --help' as the binary prints it (run scripts/readme-help)"
        diff "$tmp/readme-$cmd" "$tmp/help-$cmd" | head -20 | diag
    fi
done

done_testing
