/* fuzz_tokenize.c — encode arbitrary bytes with the embedded model's tokenizer and decode the
 * ids back. The identities checked (byte-level BPE, optional NFC normalizer N):
 *   decode(encode(x)) == N(x), so encode(decode(encode(x))) == encode(x);
 *   decode of any ids in range is well-formed UTF-8.
 * The first byte: bit 0 = allow_special, bit 1 = decode with skip_special; the rest is the
 * text. The input also decodes as little-endian int32 ids (ids out of range are DB_EINPUT). */
#include "fuzz.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_TOKENIZER
#define FUZZ_TOKENIZER "models/tiny-qwen3/tokenizer.json"
#endif

static db_tokenizer tok;

static void load_once(void)
{
    static int loaded;
    if (loaded) return;
    char err[512];
    const char *p = getenv("DB_FUZZ_TOKENIZER");
    if (db_tokenizer_load(&tok, p && *p ? p : FUZZ_TOKENIZER, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_tokenize: %s\n", err);
        abort();
    }
    loaded = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    load_once();
    int allow = data[0] & 1, skip = (data[0] >> 1) & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char err[512];
    int *ids = NULL, n = 0;
    if (db_tokenizer_encode(&tok, text, len, allow, &ids, &n, err, sizeof err) == 0) {
        char *back = NULL;
        size_t blen = 0;
        if (db_tokenizer_decode(&tok, ids, n, 0, &back, &blen, err, sizeof err) != 0) __builtin_trap();
        if (db_utf8_check(back, blen) != blen) __builtin_trap();
        int *ids2 = NULL, n2 = 0;
        if (db_tokenizer_encode(&tok, back, blen, allow, &ids2, &n2, err, sizeof err) != 0) __builtin_trap();
        if (n2 != n || memcmp(ids, ids2, sizeof(int) * (size_t)n) != 0) __builtin_trap();
        free(ids2);
        free(back);
    }
    free(ids);
    /* the same bytes as ids */
    int nid = (int)(len / 4);
    int *raw = malloc(sizeof(int) * (size_t)(nid ? nid : 1));
    for (int i = 0; i < nid; i++) {
        uint32_t v;
        memcpy(&v, text + 4 * i, 4);
        raw[i] = (int)(v % (uint32_t)(tok.n_vocab + 2)) - 1; /* mostly in range, -1 and n_vocab out */
    }
    char *out = NULL;
    size_t olen = 0;
    if (db_tokenizer_decode(&tok, raw, nid, skip, &out, &olen, err, sizeof err) == 0) {
        if (db_utf8_check(out, olen) != olen) __builtin_trap();
        free(out);
    }
    free(raw);
    return 0;
}
