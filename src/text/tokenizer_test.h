/* tokenizer_test.h — what of the tokenizer only the tests use (tests/test_tokenizer.c): the
 * bytes and the special flag of one token, and the streaming decoder. Not part of the
 * tokenizer's interface (tokenizer.h); tokenizer.c implements them. */
#ifndef DB_TOKENIZER_TEST_H
#define DB_TOKENIZER_TEST_H

#include "text/tokenizer.h"

/* The raw bytes one token stands for (not NUL-terminated, possibly an incomplete UTF-8
 * sequence); NULL with *len = 0 for an id outside the vocabulary or a gap. */
const char *db_tokenizer_token_bytes(const db_tokenizer *tok, int id, size_t *len);

/* 1 when id is an added token marked special (<|im_end|>, <|eot_id|>, ...), else 0 */
int db_tokenizer_is_special(const db_tokenizer *tok, int id);

/* Streaming decoder: feed generated ids one at a time and print what comes back. Bytes of a
 * UTF-8 sequence split across tokens are held back until the sequence completes, so the text
 * of all pushes plus the flush equals db_tokenizer_decode of the whole id list. */
typedef struct {
    const db_tokenizer *tok;
    int skip_special;
    char pending[4];  /* start of a cut-off UTF-8 sequence, carried to the next push */
    size_t n_pending;
    char *buf;        /* text returned by the last push/flush (owned here) */
    size_t len, cap;
    char *in;         /* pending + the token's bytes, before repair */
    size_t in_cap;
} db_detok;

void db_detok_init(db_detok *d, const db_tokenizer *tok, int skip_special);
/* Text completed by id: *text (NUL-terminated, valid until the next call) of *len bytes. */
int db_detok_push(db_detok *d, int id, const char **text, size_t *len, char *err, size_t errlen);
/* End of stream: a sequence still cut off becomes U+FFFD. */
int db_detok_flush(db_detok *d, const char **text, size_t *len, char *err, size_t errlen);
void db_detok_free(db_detok *d);

#endif
