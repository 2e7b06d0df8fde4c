/* kv_cache.c — see kv_cache.h. */
#include "model/kv_cache.h"
#include "base/util.h"

#include <stdlib.h>
#include <string.h>

int db_kv_dtype_parse(const char *name, const char *backend, db_dtype *dt)
{
    static const char *const names[] = DB_NAMES_ARRAY(DB_KV_DTYPES);
    if (db_name_index(name, names, (int)(sizeof names / sizeof *names)) < 0) return -1;
    if (strcmp(name, "auto") == 0) {
        *dt = db_kv_dtype_auto(backend);
        return 0;
    }
    for (int t = 0; t < DB_NUM_DTYPES; t++) /* the others by their backend.h names */
        if (strcmp(name, db_dtype_name((db_dtype)t)) == 0) {
            *dt = (db_dtype)t;
            return 0;
        }
    return -1;
}

db_dtype db_kv_dtype_auto(const char *backend)
{
    const db_backend_ops *ops = db_backend_find(backend);
    return ops && ops->kv_store_f16 && ops->attention_f16 ? DB_F16 : DB_F32;
}

size_t db_kv_bytes(int layers, int slots, int cap, int width, db_dtype dtype)
{
    return (size_t)layers * 2 * (size_t)slots * (size_t)cap * (size_t)width *
           db_dtype_size(dtype);
}

int db_kv_init(db_kv *kv, db_backend *be, int layers, int slots, int cap, int width,
               db_dtype dtype, char *err, size_t errlen)
{
    memset(kv, 0, sizeof *kv);
    if (dtype != DB_F32 && dtype != DB_F16)
        return db_fail(err, errlen, DB_EINPUT, "KV cache dtype %s: only f32 and f16",
                       db_dtype_name(dtype));
    if (dtype == DB_F16 && (!be->ops->kv_store_f16 || !be->ops->attention_f16))
        return db_fail(err, errlen, DB_EINPUT,
                       "backend %s has no f16 KV cache (--kv-dtype f16); use --kv-dtype f32",
                       be->ops->name);
    kv->be = be;
    kv->layers = layers;
    kv->slots = slots;
    kv->cap = cap;
    kv->width = width;
    kv->dtype = dtype;
    kv->len = db_calloc((size_t)slots, sizeof(int));
    size_t bytes = db_kv_bytes(layers, slots, cap, width, dtype);
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

/* layer's K / V planes [slots][S][W] */
static void *db_kv_k(const db_kv *kv, int layer)
{
    return (char *)kv->base + (size_t)layer * 2 * plane(kv) * db_dtype_size(kv->dtype);
}

static void *db_kv_v(const db_kv *kv, int layer)
{
    return (char *)db_kv_k(kv, layer) + plane(kv) * db_dtype_size(kv->dtype);
}

void db_kv_store(db_kv *kv, int layer, const float *k, const float *v, const int *dst_index, int n)
{
    db_backend *be = kv->be;
    if (kv->dtype == DB_F16) {
        be->ops->kv_store_f16(be, db_kv_k(kv, layer), dst_index, k, n, kv->width);
        be->ops->kv_store_f16(be, db_kv_v(kv, layer), dst_index, v, n, kv->width);
        return;
    }
    be->ops->copy_rows(be, db_kv_k(kv, layer), kv->width, dst_index, k, kv->width, NULL, n,
                       kv->width);
    be->ops->copy_rows(be, db_kv_v(kv, layer), kv->width, dst_index, v, kv->width, NULL, n,
                       kv->width);
}

void db_kv_attention(const db_kv *kv, int layer, float *out, const float *q,
                     const db_attn_row *rows, int n, int nh, int nkv, int hd, float scale)
{
    db_backend *be = kv->be;
    if (kv->dtype == DB_F16)
        be->ops->attention_f16(be, out, q, db_kv_k(kv, layer), db_kv_v(kv, layer), kv->cap, rows, n,
                               nh, nkv, hd, scale);
    else
        be->ops->attention(be, out, q, db_kv_k(kv, layer), db_kv_v(kv, layer), kv->cap, rows, n, nh,
                           nkv, hd, scale);
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
