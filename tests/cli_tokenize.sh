#!/bin/sh
# cli_tokenize.sh — `dflash-bench tokenize` end to end (TAP): encode stdin, decode ids, the chat
# template option, and exit status 2 for bad input. Needs DB_BIN (the binary) and DB_TEST_DATA.
bin=${DB_BIN:?DB_BIN not set}
data=${DB_TEST_DATA:?DB_TEST_DATA not set}/tokenizer
n=0; failed=0
ok() { # cond description
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

ids=$(printf 'Hello world' | "$bin" tokenize --tokenizer "$data/tokenizer.json")
ok $? "encode exits 0"
[ "$ids" = "72,101,296,111,302,108,100" ]; ok $? "Hello world -> $ids"

printf '%s' "$ids" | "$bin" tokenize --tokenizer "$data" --decode > "$tmp/text"
ok $? "decode exits 0 (tokenizer given as a directory)"
[ "$(cat "$tmp/text")" = "Hello world" ]; ok $? "ids decode back to the text"

printf 'Ünïcödé 你好 👍🏽\r\n  x' > "$tmp/in"
"$bin" tokenize --tokenizer "$data/tokenizer-gpt2.json" < "$tmp/in" > "$tmp/ids" &&
  "$bin" tokenize --tokenizer "$data/tokenizer-gpt2.json" --decode < "$tmp/ids" > "$tmp/out"
cmp -s "$tmp/in" "$tmp/out"; ok $? "non-ASCII text round-trips byte for byte"

out=$(printf 'Hi' | "$bin" tokenize --tokenizer "$data/tokenizer.json" --chat-template chatml)
case "$out" in 509,*,510,10,509,*) r=0 ;; *) r=1 ;; esac
ok $r "--chat-template chatml wraps the text in <|im_start|>/<|im_end|> ($out)"

out=$(printf '<|im_end|>' | "$bin" tokenize --tokenizer "$data/tokenizer.json")
[ "$out" = "510" ]; ok $? "a special token in the text is one id"
out=$(printf '<|im_end|>' | "$bin" tokenize --tokenizer "$data/tokenizer.json" --no-special)
[ "$out" != "510" ]; ok $? "--no-special keeps it as text ($out)"

printf 'x' | "$bin" tokenize --tokenizer "$data/bad-wordpiece.json" > /dev/null 2> "$tmp/err"
[ $? = 2 ]; ok $? "bad tokenizer file: exit status 2"
grep -q "unsupported tokenizer type" "$tmp/err"; ok $? "the message says why: $(cat "$tmp/err")"

printf 'x' | "$bin" tokenize > /dev/null 2>&1
[ $? = 2 ]; ok $? "missing --tokenizer: exit status 2"
printf 'bad \377 byte' | "$bin" tokenize --tokenizer "$data/tokenizer.json" > /dev/null 2> "$tmp/err"
[ $? = 2 ] && grep -q "invalid UTF-8" "$tmp/err"; ok $? "invalid UTF-8 on stdin: exit status 2"
printf '1,99999' | "$bin" tokenize --tokenizer "$data/tokenizer.json" --decode > /dev/null 2>&1
[ $? = 2 ]; ok $? "decoding an id outside the vocabulary: exit status 2"

echo "1..$n"
[ "$failed" = 0 ]
