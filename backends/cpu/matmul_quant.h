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

/* plain C: dequantizes row o into a buffer, then sequential dot products (k = 0..I-1) */
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

#endif
