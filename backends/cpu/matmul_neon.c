/* matmul_neon.c — AArch64 NEON matmul kernel. Same structure and batch-invariance guarantee
 * as matmul_avx2.c (two 4-lane accumulators per row pair of 8, fixed tail), so the two
 * agree with the plain C reference to rounding. Notation in cpu_kernels.h. */
#include "config.h"
#include "cpu_kernels.h"

#include <arm_neon.h>
#include <stdint.h>

static inline float32x4_t load4(const void *w, db_dtype dt, size_t i)
{
    if (dt == DB_F32) return vld1q_f32((const float *)w + i);
    uint16x4_t h = vld1_u16((const uint16_t *)w + i);
    if (dt == DB_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(h), 16));
}

static inline float scalar_w(const void *w, db_dtype dt, size_t i)
{
    if (dt == DB_F32) return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    return dt == DB_F16 ? db_f16_to_f32(h) : db_bf16_to_f32(h);
}

static inline __attribute__((always_inline)) void tile(int R, float *y, const float *x,
                                                       const void *w, db_dtype dt, int O, int I,
                                                       int o, int accumulate)
{
    float32x4_t a0[4], a1[4];
    for (int r = 0; r < R; r++) a0[r] = a1[r] = vdupq_n_f32(0.0f);
    size_t base = (size_t)o * (size_t)I;
    int k = 0;
    for (; k + 8 <= I; k += 8) {
        float32x4_t w0 = load4(w, dt, base + (size_t)k), w1 = load4(w, dt, base + (size_t)k + 4);
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * I + k;
            a0[r] = vfmaq_f32(a0[r], w0, vld1q_f32(xr));
            a1[r] = vfmaq_f32(a1[r], w1, vld1q_f32(xr + 4));
        }
    }
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * I;
        float t = 0.0f;
        for (int j = k; j < I; j++) t += scalar_w(w, dt, base + (size_t)j) * xr[j];
        float s = vaddvq_f32(vaddq_f32(a0[r], a1[r])) + t;
        float *dst = y + (size_t)r * O + o;
        *dst = accumulate ? *dst + s : s;
    }
}

void db_matmul_neon(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                    int o0, int o1, int accumulate)
{
    int r = 0;
    for (; r + 4 <= n; r += 4)
        for (int o = o0; o < o1; o++)
            tile(4, y + (size_t)r * O, x + (size_t)r * I, w, dt, O, I, o, accumulate);
    int rest = n - r;
    for (int o = o0; o < o1 && rest; o++) {
        float *yr = y + (size_t)r * O;
        const float *xr = x + (size_t)r * I;
        switch (rest) {
        case 3: tile(3, yr, xr, w, dt, O, I, o, accumulate); break;
        case 2: tile(2, yr, xr, w, dt, O, I, o, accumulate); break;
        default: tile(1, yr, xr, w, dt, O, I, o, accumulate); break;
        }
    }
}
