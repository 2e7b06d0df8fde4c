/* kv_cache.h — per-request-slot K/V caches of one model, in backend memory.
 *
 * One allocation [L][2][slots][S][W] of f32 or f16 (dtype: --kv-dtype), W = nkv*hd, S =
 * capacity in positions. An f16 cache stores each K/V value rounded to nearest even (the
 * backend's kv_store_f16) and attends through attention_f16; a backend without those ops
 * refuses f16 at init. The host keeps len[slot], the number of valid positions; truncation
 * (rejected drafts) only lowers len, and later writes overwrite the stale rows. */
#ifndef DB_KV_CACHE_H
#define DB_KV_CACHE_H

#include "backend.h"
#include "base/parse.h"

typedef struct {
    db_backend *be;
    void *base;   /* [L][2][slots][S][W] device, of dtype */
    db_dtype dtype; /* DB_F32 or DB_F16 */
    int layers, slots, cap, width;
    int *len;     /* [slots] host */
} db_kv;

/* The --kv-dtype values, the one list of the parser, the sweep key and every command's help
 * (DB_KV_DTYPE_NAMES: "auto, f32, f16"; parse.h) */
#define DB_KV_DTYPES(X, SEP) X("auto") SEP() X("f32") SEP() X("f16")
#define DB_KV_DTYPE_NAMES DB_NAMES_TEXT(DB_KV_DTYPES)
/* "f32" -> DB_F32, "f16" -> DB_F16, "auto" -> db_kv_dtype_auto(backend); -1 for anything else */
int db_kv_dtype_parse(const char *name, const char *backend, db_dtype *dt);
/* The default cache of the backend named `backend`: 2 bytes a value (DB_F16) where it has the f16
 * cache ops, the bytes per cached value that serving engines use (llama.cpp's f16 cache, vLLM's
 * and SGLang's cache in the model's 16-bit dtype), so attention's memory traffic and the KV
 * memory of a point are theirs; DB_F32 on a backend without them. */
db_dtype db_kv_dtype_auto(const char *backend);
/* dtype DB_F32 or DB_F16; DB_EINPUT for another dtype or f16 on a backend without the f16 ops */
int db_kv_init(db_kv *kv, db_backend *be, int layers, int slots, int cap, int width,
               db_dtype dtype, char *err, size_t errlen);
void db_kv_free(db_kv *kv);
size_t db_kv_bytes(int layers, int slots, int cap, int width, db_dtype dtype);
/* out[N, nh*hd] = attention of q[N, nh*hd] over the keys rows[] name in `layer`'s caches
 * (backend.h attention, or attention_f16 for an f16 cache) */
void db_kv_attention(const db_kv *kv, int layer, float *out, const float *q,
                     const db_attn_row *rows, int n, int nh, int nkv, int hd, float scale);
/* scatter n rows k[n, W], v[n, W] of `layer` to (slot[r], pos[r]) */
void db_kv_store(db_kv *kv, int layer, const float *k, const float *v, const int *dst_index,
                 int n);
/* valid positions of `slot` */
int db_kv_len(const db_kv *kv, int slot);
/* forget a slot's positions (its request left); the rows stay until overwritten */
void db_kv_reset(db_kv *kv, int slot);
/* keep the first `len` positions of `slot` (rejected drafts); never raises the length */
void db_kv_truncate(db_kv *kv, int slot, int len);
/* declare the first `len` positions of `slot` valid as their rows stand (clamped to the
 * capacity): `bench` measures a forward at a context depth over the cache's zeroed rows */
void db_kv_assume_len(db_kv *kv, int slot, int len);

#endif
