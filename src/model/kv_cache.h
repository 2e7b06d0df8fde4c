/* kv_cache.h — per-request-slot K/V caches of one model, in backend memory.
 *
 * One allocation [L][2][slots][S][W] f32, W = nkv*hd, S = capacity in positions. The host keeps
 * len[slot], the number of valid positions; truncation (rejected drafts) only lowers len, and
 * later writes overwrite the stale rows. */
#ifndef DB_KV_CACHE_H
#define DB_KV_CACHE_H

#include "backend.h"

typedef struct {
    db_backend *be;
    float *base;  /* [L][2][slots][S][W] device */
    int layers, slots, cap, width;
    int *len;     /* [slots] host */
} db_kv;

int db_kv_init(db_kv *kv, db_backend *be, int layers, int slots, int cap, int width, char *err,
               size_t errlen);
void db_kv_free(db_kv *kv);
size_t db_kv_bytes(int layers, int slots, int cap, int width);
float *db_kv_k(const db_kv *kv, int layer); /* [slots][S][W] */
float *db_kv_v(const db_kv *kv, int layer);
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
