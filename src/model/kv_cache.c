/* kv_cache.c — see kv_cache.h. */
#include "model/kv_cache.h"
#include "base/util.h"

#include <stdlib.h>
#include <string.h>

size_t db_kv_bytes(int layers, int slots, int cap, int width)
{
    return (size_t)layers * 2 * (size_t)slots * (size_t)cap * (size_t)width * sizeof(float);
}

int db_kv_init(db_kv *kv, db_backend *be, int layers, int slots, int cap, int width, char *err,
               size_t errlen)
{
    memset(kv, 0, sizeof *kv);
    kv->be = be;
    kv->layers = layers;
    kv->slots = slots;
    kv->cap = cap;
    kv->width = width;
    kv->len = db_calloc((size_t)slots, sizeof(int));
    size_t bytes = db_kv_bytes(layers, slots, cap, width);
    kv->base = be->ops->alloc(be, bytes);
    if (!kv->len || !kv->base) {
        db_kv_free(kv);
        return db_fail(err, errlen, DB_ERUNTIME, "cannot allocate %.1f MiB of KV cache",
                       (double)bytes / 1048576.0);
    }
    return DB_OK;
}

void db_kv_free(db_kv *kv)
{
    if (kv->base) kv->be->ops->dfree(kv->be, kv->base);
    free(kv->len);
    memset(kv, 0, sizeof *kv);
}

static size_t plane(const db_kv *kv) { return (size_t)kv->slots * kv->cap * kv->width; }

float *db_kv_k(const db_kv *kv, int layer) { return kv->base + (size_t)layer * 2 * plane(kv); }

float *db_kv_v(const db_kv *kv, int layer) { return db_kv_k(kv, layer) + plane(kv); }

void db_kv_store(db_kv *kv, int layer, const float *k, const float *v, const int *dst_index, int n)
{
    db_backend *be = kv->be;
    be->ops->copy_rows(be, db_kv_k(kv, layer), kv->width, dst_index, k, kv->width, NULL, n,
                       kv->width);
    be->ops->copy_rows(be, db_kv_v(kv, layer), kv->width, dst_index, v, kv->width, NULL, n,
                       kv->width);
}

int db_kv_len(const db_kv *kv, int slot) { return kv->len[slot]; }

void db_kv_reset(db_kv *kv, int slot) { kv->len[slot] = 0; }

void db_kv_truncate(db_kv *kv, int slot, int len)
{
    if (len < kv->len[slot]) kv->len[slot] = len < 0 ? 0 : len;
}

void db_kv_assume_len(db_kv *kv, int slot, int len)
{
    kv->len[slot] = len < 0 ? 0 : len > kv->cap ? kv->cap : len;
}
