/* bench_tokenizer.c — tokenizer speed on one thread: encode ~5 MB of generated text (words,
 * numbers, punctuation, code-like lines, some CJK and emoji) and print MB/s, cold (empty pre-token
 * cache) and warm, and decode speed.
 *   bench-tokenizer [TOKENIZER_JSON [MEGABYTES]]
 * Default tokenizer: models/tiny-qwen3/tokenizer.json under $DB_SOURCE_ROOT when present, else
 * the test fixture tests/data/tokenizer/tokenizer.json. */
#include "test_util.h"
#include "text/tokenizer.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *WORDS[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you",
    "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will",
    "would", "who", "so", "no", "reason", "step", "answer", "final", "boxed", "function", "return", "value",
    "apples", "students", "kilometers", "because", "therefore", "equation", "solution", "probability",
    "def", "self", "print", "range", "len", "None", "True", "False", "import", "numpy", "café", "naïve",
    "数学", "问题", "答案", "こんにちは", "😀", "👍🏽", "Straße", "don't", "it's", "we'll", "they're"};

static char *make_text(size_t bytes, db_rng *r)
{
    char *t = malloc(bytes + 64);
    size_t n = 0;
    int line = 0;
    while (n < bytes) {
        uint64_t x = db_rng_next(r);
        const char *w = WORDS[x % (sizeof WORDS / sizeof *WORDS)];
        size_t k = strlen(w);
        if ((x >> 20) % 11 == 0) { /* a number */
            char num[24];
            k = (size_t)snprintf(num, sizeof num, "%llu", (unsigned long long)((x >> 32) % 100000));
            memcpy(t + n, num, k);
        } else
            memcpy(t + n, w, k);
        n += k;
        int p = (int)((x >> 40) % 23);
        if (p == 0) t[n++] = '.';
        else if (p == 1) t[n++] = ',';
        if (++line > 12 + (int)((x >> 50) % 8)) {
            memcpy(t + n, (x >> 58) % 4 ? "\n" : "\n\n    ", (x >> 58) % 4 ? 1 : 6);
            n += (x >> 58) % 4 ? 1 : 6;
            line = 0;
        } else
            t[n++] = ' ';
    }
    t[n] = 0;
    return t;
}

int main(int argc, char **argv)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    char def[1200], err[512];
    const char *root = getenv("DB_SOURCE_ROOT");
    snprintf(def, sizeof def, "%s/models/tiny-qwen3/tokenizer.json", root ? root : ".");
    FILE *f = fopen(def, "rb");
    if (f) fclose(f);
    else
        snprintf(def, sizeof def, "%s", tu_data("tokenizer/tokenizer.json"));
    const char *path = argc > 1 ? argv[1] : def;
    double mb = argc > 2 ? atof(argv[2]) : 5.0;
    db_tokenizer tok;
    double t0 = db_now();
    if (db_tokenizer_load(&tok, path, err, sizeof err)) {
        fprintf(stderr, "bench-tokenizer: %s\n", err);
        return 2;
    }
    double t_load = db_now() - t0;
    db_rng r;
    db_rng_seed(&r, 1);
    size_t bytes = (size_t)(mb * 1e6);
    char *text = make_text(bytes, &r);
    size_t len = strlen(text);
    int *ids = NULL, n = 0;
    double best = 0, cold = 0;
    for (int rep = 0; rep < 3; rep++) {
        free(ids);
        t0 = db_now();
        if (db_tokenizer_encode(&tok, text, len, 1, &ids, &n, err, sizeof err)) {
            fprintf(stderr, "bench-tokenizer: %s\n", err);
            return 1;
        }
        double s = db_now() - t0, rate = (double)len / 1e6 / s;
        if (rep == 0) cold = rate;
        if (rate > best) best = rate;
    }
    char *dec = NULL;
    size_t dlen = 0;
    t0 = db_now();
    int rc = db_tokenizer_decode(&tok, ids, n, 0, &dec, &dlen, err, sizeof err);
    double t_dec = db_now() - t0;
    int same = rc == 0 && dlen == len && memcmp(dec, text, len) == 0;
    printf("tokenizer %s (vocab %d, load %.3f s)\n", path, tok.n_vocab, t_load);
    printf("encode: %.2f MB, %d tokens (%.2f bytes/token): %.2f MB/s cold, %.2f MB/s warm, one thread\n",
           (double)len / 1e6, n, (double)len / n, cold, best);
    printf("decode: %.2f MB/s, round trip %s\n", (double)dlen / 1e6 / (t_dec > 0 ? t_dec : 1e-9), same ? "exact" : "DIFFERS");
    free(dec);
    free(ids);
    free(text);
    db_tokenizer_free(&tok);
    return same && cold >= 1.0 ? 0 : 1;
}
