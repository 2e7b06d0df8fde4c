/* tokenizer.h — byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (the
 * Qwen2/Qwen3, LLaMA-3 and GPT-2 family).
 *
 * Encoding, as Hugging Face `tokenizers` does it with add_special_tokens=False:
 *   1. added tokens (`added_tokens`) are cut out of the raw text first, leftmost-longest;
 *      special ones only when allow_special is set (else they are plain text);
 *   2. each remaining segment is normalized (NFC when the file says so), split into pre-tokens
 *      by the file's pre-tokenizer regexes (PCRE2, UTF + UCP), mapped byte by byte through the
 *      GPT-2 byte-to-unicode table,
 *   3. and merged by merge rank (lowest first; ties leftmost) into vocabulary ids.
 * No post-processor runs: a BOS is only there if the text (a chat template) contains it.
 * Decoding concatenates each token's bytes and repairs invalid UTF-8 with U+FFFD (utf8.h).
 *
 * Supported file contents: model.type "BPE" (vocab; merges as "a b" strings or ["a","b"]
 * pairs; ignore_merges), normalizer null / NFC / Sequence of those, pre_tokenizer null /
 * ByteLevel (use_regex, add_prefix_space) / Split (Regex or String pattern, behavior Isolated)
 * / Digits / Sequence of those. Anything else is DB_EINPUT naming what is unsupported; so are
 * tokenizers that are not byte-level (no ByteLevel pre-tokenizer or decoder). Added-token flags
 * lstrip/rstrip are honoured (ASCII whitespace); single_word is not (no byte-level model uses it).
 *
 * Threads: decoding is thread-safe; encoding is not (a shared cache of pre-token results and
 * scratch buffers live in the tokenizer), so encode from one thread at a time. */
#ifndef DB_TOKENIZER_H
#define DB_TOKENIZER_H

#include <stddef.h>

typedef struct {
    int n_vocab;            /* 1 + the largest id in the vocabulary or the added tokens */
    int n_added;            /* entries of added_tokens */
    char path[1024];        /* the tokenizer.json that was loaded */
    struct db_tok_state *s; /* everything else (tokenizer.c) */
} db_tokenizer;

/* Load `path`: a tokenizer.json file, or a directory holding one. On failure *tok is left
 * freed (db_tokenizer_free is still safe to call). */
int db_tokenizer_load(db_tokenizer *tok, const char *path, char *err, size_t errlen);
/* The same from a tokenizer.json's text already in memory (text[0..len), not necessarily
 * NUL-terminated); `label` names the source in errors and in tok->path. db_tokenizer_load reads
 * the file and parses it with this. */
int db_tokenizer_parse(db_tokenizer *tok, const char *label, const char *text, size_t len, char *err,
                       size_t errlen);
void db_tokenizer_free(db_tokenizer *tok);
/* SHA-256 (hex) of what decides the ids: every token's bytes and kind (id order) and the
 * merges (rank, pair, result; independent of the file's layout), so a GGUF's tokenizer and the
 * tokenizer.json it came from hash the same and two different vocabularies of one size do not */
void db_tokenizer_hash(const db_tokenizer *tok, char hex[65]);
/* Load from a parsed tokenizer.json (a cJSON object; for tokenizers that come from elsewhere,
 * such as a GGUF file's metadata); `label` names the source in errors and in tok->path. */
struct cJSON;
int db_tokenizer_from_json(db_tokenizer *tok, const struct cJSON *root, const char *label,
                           char *err, size_t errlen);

/* Encode text[0..len) (any bytes, NUL included; must be well-formed UTF-8, else DB_EINPUT
 * naming the byte offset). *ids is malloc'd (free it; non-NULL even when *n is 0). */
int db_tokenizer_encode(const db_tokenizer *tok, const char *text, size_t len, int allow_special,
                        int **ids, int *n, char *err, size_t errlen);

/* Decode ids into malloc'd, NUL-terminated, well-formed UTF-8 (*text, *len; free it).
 * skip_special drops special added tokens. Ids outside [0, n_vocab) are DB_EINPUT; ids inside
 * the range that name no token (gaps in a padded vocabulary) decode to nothing. */
int db_tokenizer_decode(const db_tokenizer *tok, const int *ids, int n, int skip_special,
                        char **text, size_t *len, char *err, size_t errlen);

/* The id of a token as spelled in the file ("<|im_end|>", or a byte-level vocabulary string
 * such as "Ġthe"); -1 if there is none. */
int db_tokenizer_token_id(const db_tokenizer *tok, const char *token);

#endif
