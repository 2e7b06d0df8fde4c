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

void db_scores_ref(float *out, const float *q, const float *k, size_t stride, int nk, int hd,
                   float scale)
{
    for (int j = 0; j < nk; j++) {
        const float *kj = k + (size_t)j * stride;
        float s = 0.0f;
        for (int i = 0; i < hd; i++) s += q[i] * kj[i];
        out[j] = s * scale;
    }
}

void db_wsum_ref(float *o, const float *p, const float *v, size_t stride, int nk, int hd)
{
    for (int j = 0; j < nk; j++)
        for (int i = 0; i < hd; i++) o[i] += p[j] * v[(size_t)j * stride + i];
}
