/* backend.c — creating a backend by name (the registry and module loading: backend_module.c),
 * dtype conversions and weight upload helpers shared by every backend. */
#include "config.h"
#include "alloc.h"
#include "backend.h"
#include "backend_profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
    const char *name;
    int block;
    size_t bytes;
} dtype_info[DB_NUM_DTYPES] = {
    [DB_F32] = {"f32", 1, 4},       [DB_BF16] = {"bf16", 1, 2},     [DB_F16] = {"f16", 1, 2},
    [DB_Q8_0] = {"q8_0", 32, 34},   [DB_Q4_0] = {"q4_0", 32, 18},   [DB_Q4_K] = {"q4_k", 256, 144},
    [DB_Q5_K] = {"q5_k", 256, 176}, [DB_Q6_K] = {"q6_k", 256, 210},
    [DB_Q4_1] = {"q4_1", 32, 20},   [DB_Q5_0] = {"q5_0", 32, 22},   [DB_Q5_1] = {"q5_1", 32, 24},
    [DB_Q2_K] = {"q2_k", 256, 84},  [DB_Q3_K] = {"q3_k", 256, 110}, [DB_IQ4_NL] = {"iq4_nl", 32, 18},
    [DB_IQ4_XS] = {"iq4_xs", 256, 136},
};

size_t db_dtype_size(db_dtype t) { return (unsigned)t < DB_NUM_DTYPES ? dtype_info[t].bytes : 0; }
int db_dtype_block(db_dtype t) { return (unsigned)t < DB_NUM_DTYPES ? dtype_info[t].block : 1; }
int db_dtype_is_quant(db_dtype t) { return db_dtype_block(t) > 1; }
size_t db_dtype_bytes(db_dtype t, size_t n)
{
    return n / (size_t)db_dtype_block(t) * db_dtype_size(t);
}

const char *db_dtype_name(db_dtype t)
{
    return (unsigned)t < DB_NUM_DTYPES ? dtype_info[t].name : "?";
}

int db_backend_create(const char *name, const db_backend_opts *opts, db_backend **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    const db_backend_ops *ops = db_backend_load(name, err, errlen);
    if (!ops) return -2; /* not built, or its module cannot be loaded here: exit 2 */
    db_backend *be = db_calloc(1, sizeof *be);
    if (!be) {
        snprintf(err, errlen, "out of memory creating backend %s", name);
        return -1;
    }
    be->ops = ops;
    int rc = be->ops->init(be, opts);
    if (rc != 0) {
        snprintf(err, errlen, "backend %s: %s", name, be->err);
        free(be);
        return rc == -2 ? -2 : -1; /* -2: the device asked for is not there, bad input (exit 2) */
    }
    db_profile_attach(be);
    *out = be;
    return 0;
}

void db_backend_destroy(db_backend *be)
{
    if (!be) return;
    db_profile_report(be);
    be->ops->free(be);
    free(be);
}

double db_backend_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double db_backend_copy_bandwidth(db_backend *be, size_t bytes, int reps)
{
    const int width = 1 << 18; /* floats per row: 1 MiB */
    size_t row_bytes = sizeof(float) * (size_t)width;
    int rows = (int)(bytes / row_bytes);
    if (rows < 1) rows = 1;
    bytes = row_bytes * (size_t)rows;
    float *a = be->ops->alloc(be, bytes), *b = be->ops->alloc(be, bytes);
    double best = 0.0;
    if (a && b && be->ops->sync(be) == 0) {
        be->ops->copy_rows(be, b, width, NULL, a, width, NULL, rows, width); /* untimed: first touch, module load */
        for (int rep = 0; rep < reps && be->ops->sync(be) == 0; rep++) {
            double t0 = db_backend_seconds();
            be->ops->copy_rows(be, b, width, NULL, a, width, NULL, rows, width);
            if (be->ops->sync(be) != 0) break;
            double bps = 2.0 * (double)bytes / (db_backend_seconds() - t0);
            if (bps > best) best = bps;
        }
    }
    if (a) be->ops->dfree(be, a);
    if (b) be->ops->dfree(be, b);
    return best;
}

int db_weight_upload(db_backend *be, db_weight *w, const void *host, db_dtype dtype, int rows,
                     int cols)
{
    if (db_dtype_is_quant(dtype) && !be->quant_weights) {
        snprintf(be->err, sizeof be->err, "backend %s does not run %s weights", be->ops->name,
                 db_dtype_name(dtype));
        return -1;
    }
    size_t bytes = (size_t)rows * db_dtype_bytes(dtype, (size_t)cols);
    w->data = be->ops->alloc(be, bytes);
    w->dtype = dtype;
    w->rows = rows;
    w->cols = cols;
    if (!w->data) return -1;
    return be->ops->upload(be, w->data, host, bytes);
}

float *db_upload_f32(db_backend *be, const void *host, db_dtype dtype, size_t n)
{
    float *tmp = db_malloc(n * sizeof(float));
    if (!tmp) return NULL;
    db_convert_to_f32(tmp, host, dtype, n);
    float *d = be->ops->alloc(be, n * sizeof(float));
    if (d && be->ops->upload(be, d, tmp, n * sizeof(float)) != 0) {
        be->ops->dfree(be, d);
        d = NULL;
    }
    free(tmp);
    return d;
}

void db_weight_free(db_backend *be, db_weight *w)
{
    if (w->data) be->ops->dfree(be, w->data);
    w->data = NULL;
}

float db_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t db_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float db_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400u));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t db_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = u & 0x7fffffu;
    if (((u >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)h;
}

/* src may be unaligned (a mapped file whose header length is odd): load through memcpy */
void db_convert_to_f32(float *dst, const void *src, db_dtype dtype, size_t n)
{
    const unsigned char *b = src;
    uint16_t h;
    switch (dtype) {
    case DB_F32: memcpy(dst, src, n * sizeof(float)); break;
    case DB_BF16:
        for (size_t i = 0; i < n; i++) {
            memcpy(&h, b + 2 * i, 2);
            dst[i] = db_bf16_to_f32(h);
        }
        break;
    case DB_F16:
        for (size_t i = 0; i < n; i++) {
            memcpy(&h, b + 2 * i, 2);
            dst[i] = db_f16_to_f32(h);
        }
        break;
    default: {
        size_t bs = (size_t)db_dtype_block(dtype), bb = db_dtype_size(dtype);
        for (size_t i = 0; i < n / bs; i++) db_dequant_block(dst + i * bs, b + i * bb, dtype);
        break;
    }
    }
}

typedef struct {
    float v;
    int i;
} val_id;

static int val_id_desc(const void *a, const void *b)
{
    const val_id *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i - y->i;
}

int db_probs_host(float *x, int n, float temperature, float top_p, int top_k)
{
    float mx = -INFINITY;
    int nan = 0;
    for (int i = 0; i < n; i++) {
        if (x[i] > mx) mx = x[i];
        nan |= isnan(x[i]);
    }
    /* NaN / Inf logits: zeros, before the sort (a NaN breaks its order) */
    if (nan || !isfinite(mx)) {
        memset(x, 0, sizeof(float) * (size_t)n);
        return 1;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf((x[i] - mx) / temperature);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] = (float)(x[i] / sum);
    if (!((top_k > 0 && top_k < n) || top_p < 1.0f)) return 0;
    val_id *buf = db_malloc(sizeof(val_id) * (size_t)n);
    if (!buf) return -1;
    for (int i = 0; i < n; i++) buf[i] = (val_id){x[i], i};
    qsort(buf, (size_t)n, sizeof *buf, val_id_desc);
    int keep = top_k > 0 && top_k < n ? top_k : n, kp = 0;
    /* top-k first, then the nucleus of the top-k-renormalised distribution (as the Hugging Face
     * warpers chain them): the smallest prefix whose share of the kept mass reaches top_p */
    double kmass = 0.0, cum = 0.0;
    for (int j = 0; j < keep; j++) kmass += buf[j].v;
    while (kp < keep) {
        cum += buf[kp].v;
        kp++;
        if (cum >= top_p * kmass) break;
    }
    double kept = 0.0;
    for (int j = 0; j < kp; j++) kept += buf[j].v;
    for (int j = kp; j < n; j++) x[buf[j].i] = 0.0f;
    for (int j = 0; j < kp; j++) x[buf[j].i] = (float)(buf[j].v / kept);
    free(buf);
    return 0;
}

void db_fill_random_host(void *dst, size_t n, db_dtype dt, uint64_t seed, uint64_t offset,
                         float scale, float mean)
{
    switch (dt) {
    case DB_F32:
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = db_fill_random_value(seed, offset + i, scale, mean);
        break;
    case DB_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = db_f32_to_bf16(db_fill_random_value(seed, offset + i, scale, mean));
        break;
    case DB_F16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = db_f32_to_f16(db_fill_random_value(seed, offset + i, scale, mean));
        break;
    default: break; /* quantized types are never generated */
    }
}

int db_fill_random(db_backend *be, void *dst, size_t n, db_dtype dt, uint64_t seed,
                   uint64_t offset, float scale, float mean)
{
    if (be->ops->fill_random) {
        be->ops->fill_random(be, dst, n, dt, seed, offset, scale, mean);
        return 0;
    }
    /* fallback: 1 Mi elements at a time through a host buffer */
    const size_t chunk = (size_t)1 << 20;
    size_t es = db_dtype_size(dt);
    void *buf = db_malloc((n < chunk ? n : chunk) * es + 1);
    if (!buf) {
        snprintf(be->err, sizeof be->err, "fill_random: out of host memory");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i += chunk) {
        size_t m = n - i < chunk ? n - i : chunk;
        db_fill_random_host(buf, m, dt, seed, offset + i, scale, mean);
        rc = be->ops->upload(be, (char *)dst + i * es, buf, m * es);
    }
    free(buf);
    return rc;
}

size_t db_mem_available(db_backend *be)
{
    return be->ops->mem_available ? be->ops->mem_available(be) : 0;
}
