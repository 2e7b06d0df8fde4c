/* cpu_kernels.h — the CPU matmul kernels and their run-time dispatch.
 *
 * A kernel computes y[n, o] (+)= dot(x[n, :], W[o, :]) for the weight rows o in [o0, o1) and
 * all N activation rows, converting bf16 / f16 weights on the fly so they stay 2 bytes in
 * memory. Every kernel computes each (n, o) dot product in an order that depends only on I,
 * never on N or on which rows share a tile: the batch-invariance the lossless check needs.
 *
 * Notation: N activation rows x[N, I] (row stride I), W [O, I] of dtype dt, y[N, O]. */
#ifndef DB_CPU_KERNELS_H
#define DB_CPU_KERNELS_H

#include "backend.h"

typedef void (*db_matmul_kernel)(float *y, const float *x, const void *w, db_dtype dt, int n,
                                 int O, int I, int o0, int o1, int accumulate);

void db_matmul_ref(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                   int o0, int o1, int accumulate);
#if HAVE_X86_SIMD
void db_matmul_avx2(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                    int o0, int o1, int accumulate);
#endif
#if HAVE_NEON
void db_matmul_neon(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                    int o0, int o1, int accumulate);
#endif

/* Best kernel this CPU runs, and its name ("avx2+fma+f16c", "neon", "c"). `force_ref` picks
 * the plain C one (tests, DB_SIMD=c in the environment). */
db_matmul_kernel db_matmul_select(int force_ref, const char **name);

#endif
