/* fuzz_tokenizer_load.c — a tokenizer.json: model, vocab, merges, added tokens, normalizer,
 * pre-tokenizer (regexes compiled with PCRE2), decoder, parsed from the input's bytes
 * (db_tokenizer_parse: what db_tokenizer_load runs on the file's text). A file that loads also
 * encodes a short fixed text and decodes every id of its vocabulary (the first 4096). */
#include "fuzz.h"
#include "text/tokenizer.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    db_tokenizer tok;
    if (db_tokenizer_parse(&tok, "tokenizer.json", (const char *)data, size, err, sizeof err) == 0) {
        static const char text[] = "Hello, world! 123 <|im_end|>\n\xc3\xa9t\xc3\xa9";
        int *ids = NULL, n = 0;
        if (db_tokenizer_encode(&tok, text, sizeof text - 1, 1, &ids, &n, err, sizeof err) == 0) free(ids);
        else free(ids);
        int nv = tok.n_vocab < 4096 ? tok.n_vocab : 4096;
        int *all = malloc(sizeof(int) * (size_t)(nv > 0 ? nv : 1));
        for (int i = 0; i < nv; i++) all[i] = i;
        char *out = NULL;
        size_t len = 0;
        if (db_tokenizer_decode(&tok, all, nv, 0, &out, &len, err, sizeof err) == 0) free(out);
        free(all);
    }
    db_tokenizer_free(&tok);
    return 0;
}
