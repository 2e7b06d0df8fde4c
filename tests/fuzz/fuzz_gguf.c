/* fuzz_gguf.c — one GGUF file: header, metadata (every value type, arrays, strings), tensor
 * infos, alignment, data offsets, parsed from a heap copy of the input (db_gguf_open_mem: the
 * parser of db_gguf_open without the file; writable like its private mapping). Every metadata
 * entry goes through the typed getters and every string array is walked; every tensor is read in
 * full (ASan catches one reaching one byte past the input) and found by its name. */
#include "fuzz.h"
#include "model/gguf.h"

#include <stdlib.h>
#include <string.h>

/* every byte handed out is read into here (a volatile global: the reads stay, no warning) */
static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    unsigned char *buf = size ? malloc(size) : NULL;
    if (size && !buf) abort();
    if (size) memcpy(buf, data, size);
    db_gguf g;
    if (db_gguf_open_mem(&g, "model.gguf", buf, size, err, sizeof err) != 0) {
        free(buf);
        return 0;
    }
    for (int i = 0; i < g.nkv; i++) {
        const db_gguf_kv *kv = &g.kv[i];
        int64_t iv;
        double fv;
        int bv;
        const char *s;
        size_t len;
        const db_gguf_kv *arr;
        db_gguf_int(&g, kv->key, 1, 0, INT64_MIN, INT64_MAX, &iv, err, sizeof err);
        db_gguf_float(&g, kv->key, 1, 0, &fv, err, sizeof err);
        db_gguf_bool(&g, kv->key, 1, 0, &bv, err, sizeof err);
        if (db_gguf_str(&g, kv->key, 1, &s, &len, err, sizeof err) == 0)
            for (size_t k = 0; k < len; k++) sink += (unsigned char)s[k];
        if (db_gguf_array(&g, kv->key, 1, DB_GGUF_STRING, &arr, err, sizeof err) == 0 && arr) {
            const unsigned char *p = arr->val;
            for (uint64_t k = 0; k < arr->n; k++) {
                db_gguf_next_str(&p, &s, &len);
                for (size_t j = 0; j < len; j++) sink += (unsigned char)s[j];
            }
        }
        if (db_gguf_array(&g, kv->key, 1, -1, &arr, err, sizeof err) == 0 && arr)
            for (uint64_t k = 0; k < arr->n; k++) sink += (uint64_t)db_gguf_arr_int(arr, k);
        if (db_gguf_find(&g, kv->key) == NULL) __builtin_trap();
    }
    for (int i = 0; i < g.ntensors; i++) {
        const db_gguf_tensor *t = &g.tensors[i];
        for (size_t b = 0; b < t->nbytes; b++) sink += t->data[b];
        if (!db_gguf_tensor_find(&g, t->name)) __builtin_trap();
    }
    db_gguf_close(&g);
    free(buf);
    return 0;
}
