/* matmul_quant_neon.c — AArch64 NEON matmul on quantized weights (matmul_quant.h).
 *
 * Each block is dequantized by quant.c's reference into a block buffer that stays in L1, then
 * multiplied into up to 4 activation rows with two 4-lane accumulators per row (a0 takes
 * values 8m..8m+3, a1 values 8m+4..8m+7): the same order for every tile, so batch-invariant. */
#include "config.h"
#include "matmul_quant.h"

#include <arm_neon.h>
#include <stdint.h>

static inline __attribute__((always_inline)) void tile(int R, db_dtype dt, float *y,
                                                       const float *x, const uint8_t *row, int O,
                                                       int I, int o, int accumulate)
{
    float buf[256];
    float32x4_t a0[4], a1[4];
    int bs = db_dtype_block(dt);
    size_t bb = db_dtype_size(dt);
    for (int r = 0; r < R; r++) a0[r] = a1[r] = vdupq_n_f32(0.0f);
    for (int b = 0; b < I / bs; b++) {
        db_dequant_block(buf, row + (size_t)b * bb, dt);
        for (int k = 0; k < bs; k += 8) {
            float32x4_t w0 = vld1q_f32(buf + k), w1 = vld1q_f32(buf + k + 4);
            for (int r = 0; r < R; r++) {
                const float *xr = x + (size_t)r * I + (size_t)b * bs + k;
                a0[r] = vfmaq_f32(a0[r], w0, vld1q_f32(xr));
                a1[r] = vfmaq_f32(a1[r], w1, vld1q_f32(xr + 4));
            }
        }
    }
    for (int r = 0; r < R; r++) {
        float s = vaddvq_f32(vaddq_f32(a0[r], a1[r]));
        float *dst = y + (size_t)r * O + o;
        *dst = accumulate ? *dst + s : s;
    }
}

void db_matmul_quant_neon(float *y, const float *x, const void *w, db_dtype dt, int n, int O,
                          int I, int o0, int o1, int accumulate)
{
    DB_QUANT_ROWS(tile, dt, y, x, w, n, O, I, o0, o1, accumulate);
}
