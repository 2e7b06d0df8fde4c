/* matmul_quant.h — CPU matmul kernels for the block-quantized weight types (backend.h,
 * quant.c): y[n, o] (+)= dot(x[n, :], dequant(W[o, :])) for o in [o0, o1), the weights
 * dequantized block by block in registers, never expanded in memory.
 *
 * Same contract as cpu_kernels.h: each (n, o) dot product is summed in an order that depends
 * only on I (never on N or on which rows share a tile), so results are batch-invariant. The
 * dequantized weight values are exactly quant.c's (same f32 operations, no fused multiply-add
 * in the dequantization), so a kernel differs from the reference only in summation order.
 *
 * Notation: x[N, I] (row stride I), W [O, I] of quantized dtype dt (I a multiple of its block),
 * y[N, O]. */
#ifndef DB_MATMUL_QUANT_H
#define DB_MATMUL_QUANT_H

#include "cpu_kernels.h"

/* plain C: dequantizes row o into a stack buffer (4096 values at a time), then sequential dot
 * products (k = 0..I-1); allocates nothing */
void db_matmul_quant_ref(float *y, const float *x, const void *w, db_dtype dt, int n, int O,
                         int I, int o0, int o1, int accumulate);
#if HAVE_X86_SIMD
void db_matmul_quant_avx2(float *y, const float *x, const void *w, db_dtype dt, int n, int O,
                          int I, int o0, int o1, int accumulate);
void db_matmul_quant_avx512(float *y, const float *x, const void *w, db_dtype dt, int n, int O,
                            int I, int o0, int o1, int accumulate);
#endif
#if HAVE_NEON
void db_matmul_quant_neon(float *y, const float *x, const void *w, db_dtype dt, int n, int O,
                          int I, int o0, int o1, int accumulate);
#endif

/* The quantized kernel of the same instruction set as the f32 kernel named `name`
 * (db_matmul_select's: "avx512", "avx2", "neon", "c"), so DB_CPU_KERNEL picks both. */
db_matmul_kernel db_matmul_quant_select(const char *name);

/* The types of llama-quantize's mixes whose x86 register dequantizer is matmul_quant_x86.h's (the
 * others' is the kernel file's own); a constant inside run() */
#define DB_QUANT_MIX_TYPE(dt)                                                                   \
    ((dt) != DB_Q8_0 && (dt) != DB_Q4_0 && (dt) != DB_Q4_K && (dt) != DB_Q5_K && (dt) != DB_Q6_K)

/* The driver every SIMD kernel shares: for each weight row o in [o0, o1), activation rows in
 * tiles of 4 and one tile of the 1-3 left, TILE(R, dt, y, x, row, O, I, o, accumulate) doing
 * R rows against weight row `row`. A macro so each kernel file expands it with its own TILE. */
#define DB_QUANT_ROWS(TILE, dt, y, x, w, n, O, I, o0, o1, accumulate)                          \
    do {                                                                                        \
        size_t rb_ = db_dtype_bytes(dt, (size_t)(I));                                           \
        for (int o_ = (o0); o_ < (o1); o_++) {                                                  \
            const uint8_t *row_ = (const uint8_t *)(w) + (size_t)o_ * rb_;                      \
            int r_ = 0;                                                                         \
            for (; r_ + 4 <= (n); r_ += 4)                                                      \
                TILE(4, dt, (y) + (size_t)r_ * (O), (x) + (size_t)r_ * (I), row_, O, I, o_, accumulate); \
            float *yr_ = (y) + (size_t)r_ * (O);                                                \
            const float *xr_ = (x) + (size_t)r_ * (I);                                          \
            switch ((n) - r_) {                                                                 \
            case 3: TILE(3, dt, yr_, xr_, row_, O, I, o_, accumulate); break;                   \
            case 2: TILE(2, dt, yr_, xr_, row_, O, I, o_, accumulate); break;                   \
            case 1: TILE(1, dt, yr_, xr_, row_, O, I, o_, accumulate); break;                   \
            default: break;                                                                     \
            }                                                                                   \
        }                                                                                       \
    } while (0)

#endif
