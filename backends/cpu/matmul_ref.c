/* matmul_ref.c — plain C matmul kernel: the reference every SIMD kernel is tested against,
 * and the fallback on CPUs without one. Notation in cpu_kernels.h. */
#include "config.h"
#include "cpu_kernels.h"

#include <stdint.h>
#include <stdlib.h>

static float weight_at(const void *w, db_dtype dt, size_t i)
{
    switch (dt) {
    case DB_F32: return ((const float *)w)[i];
    case DB_BF16: return db_bf16_to_f32(((const uint16_t *)w)[i]);
    case DB_F16: return db_f16_to_f32(((const uint16_t *)w)[i]);
    default: break; /* quantized dtypes run matmul_quant_*.c */
    }
    return 0.0f;
}

void db_matmul_ref(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                   int o0, int o1, int accumulate)
{
    for (int o = o0; o < o1; o++) {
        size_t wrow = (size_t)o * (size_t)I;
        for (int r = 0; r < n; r++) {
            const float *xr = x + (size_t)r * I;
            float s = 0.0f;
            for (int k = 0; k < I; k++) s += weight_at(w, dt, wrow + (size_t)k) * xr[k];
            float *dst = y + (size_t)r * O + o;
            *dst = accumulate ? *dst + s : s;
        }
    }
}

/* attention loops over an f32 (dt DB_F32) or f16 cache: one body, the element widened first */
static inline float kv_at(const void *c, db_dtype dt, size_t i)
{
    return dt == DB_F16 ? db_f16_to_f32(((const uint16_t *)c)[i]) : ((const float *)c)[i];
}

static inline void scores_dt(float *out, const float *q, const void *k, db_dtype dt,
                             size_t stride, int nk, int hd, float scale)
{
    for (int j = 0; j < nk; j++) {
        size_t kj = (size_t)j * stride;
        float s = 0.0f;
        for (int i = 0; i < hd; i++) s += q[i] * kv_at(k, dt, kj + (size_t)i);
        out[j] = s * scale;
    }
}

static inline void wsum_dt(float *o, const float *p, const void *v, db_dtype dt, size_t stride,
                           int nk, int hd)
{
    for (int j = 0; j < nk; j++)
        for (int i = 0; i < hd; i++) o[i] += p[j] * kv_at(v, dt, (size_t)j * stride + (size_t)i);
}

void db_scores_ref(float *out, const float *q, const float *k, size_t stride, int nk, int hd,
                   float scale)
{
    scores_dt(out, q, k, DB_F32, stride, nk, hd, scale);
}

void db_wsum_ref(float *o, const float *p, const float *v, size_t stride, int nk, int hd)
{
    wsum_dt(o, p, v, DB_F32, stride, nk, hd);
}

void db_scores16_ref(float *out, const float *q, const uint16_t *k, size_t stride, int nk, int hd,
                     float scale)
{
    scores_dt(out, q, k, DB_F16, stride, nk, hd, scale);
}

void db_wsum16_ref(float *o, const float *p, const uint16_t *v, size_t stride, int nk, int hd)
{
    wsum_dt(o, p, v, DB_F16, stride, nk, hd);
}
