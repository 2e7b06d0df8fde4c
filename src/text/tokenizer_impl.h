/* tokenizer_impl.h — the state behind db_tokenizer, shared by tokenizer_load.c (reads
 * tokenizer.json) and tokenizer.c (encode/decode). Not part of the public API.
 *
 * Notation: "spelling" = a token as written in tokenizer.json (byte-level unicode for the model
 * vocabulary, literal text for added tokens); "bytes" = the raw text it stands for. */
#ifndef DB_TOKENIZER_IMPL_H
#define DB_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>

#include "text/strmap.h"
#include "text/tokenizer.h"

enum { TOK_ADDED = 1, TOK_SPECIAL = 2 };
enum { TOK_MAX_STEPS = 8 };         /* pre-tokenizer regex steps */
enum { TOK_CACHE_MAX_PIECE = 128 }; /* longer pre-tokens are not cached */

typedef struct {
    char *text;
    size_t len;
    int id;
    int special, lstrip, rstrip;
} tok_added;

typedef struct { /* one merge candidate of the BPE heap */
    int rank, pos, id;
} tok_cand;

typedef struct { /* one symbol of the word being merged: a doubly linked list */
    int id, prev, next;
} tok_sym;

struct db_tok_state {
    char **spell;          /* id -> spelling (NUL-terminated) or NULL for a gap */
    char **bytes;          /* id -> raw bytes */
    uint32_t *nbytes;
    unsigned char *flags;  /* TOK_ADDED | TOK_SPECIAL */
    db_strmap by_spell;    /* spelling -> id: model vocabulary, then added tokens */
    db_strmap by_bytes;    /* raw bytes -> id, model vocabulary only (ignore_merges) */
    int byte_id[256];      /* the single-byte tokens every word starts from */

    /* merges: (left id, right id) -> (rank, merged id); open addressing, key ~0 = empty */
    uint64_t *mkey;
    int *mrank, *mnew;
    size_t mmask;

    /* added tokens sorted by first byte, then longest first */
    tok_added *added;
    int n_added;
    int first_beg[256], first_cnt[256];

    int nfc;              /* normalizer NFC */
    int add_prefix_space; /* ByteLevel add_prefix_space */
    int ignore_merges;    /* model.ignore_merges: a pre-token in the vocabulary is one token */
    pcre2_code *re[TOK_MAX_STEPS];
    pcre2_match_data *md[TOK_MAX_STEPS];
    int n_re;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;

    /* encode scratch and the pre-token cache (why encoding is single-threaded) */
    db_strmap cache;       /* pre-token bytes -> (offset, count) into cache_ids */
    int *cache_ids;
    size_t cache_n, cache_cap;
    tok_sym *sym;
    tok_cand *heap;
    size_t sym_cap, heap_cap;
};

/* merge lookup: 1 and (*rank, *id) when left+right merge */
int tok_merge_get(const struct db_tok_state *s, int left, int right, int *rank, int *id);

#endif
