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

/* Attention's inner loops: scores: out[j] = scale * sum_i q[i] * k[j * stride + i] for the
 * nk keys j, each sum in an order fixed by hd alone (a key's score does not depend on which
 * keys share the call);
 * wsum: o[i] += sum_j p[j] * v[j * stride + i] over j = 0..nk-1 in key order (the softmax-
 * weighted sum of value rows), one add per key into an accumulator that starts at o[i], so
 * calls over consecutive key ranges give bitwise the sum of one call over their union. Each matmul kernel has its pair (the C one where a SIMD file
 * has none). */
typedef void (*db_scores_kernel)(float *out, const float *q, const float *k, size_t stride,
                                 int nk, int hd, float scale);
typedef void (*db_wsum_kernel)(float *o, const float *p, const float *v, size_t stride, int nk,
                               int hd);

/* The same two loops over an f16 cache (the K/V cache option --kv-dtype f16): each key or value
 * element is widened to f32 exactly and then takes the f32 kernel's path, so a kernel's f16
 * result is bitwise its f32 result on the widened cache, with the same batch invariance. */
typedef void (*db_scores16_kernel)(float *out, const float *q, const uint16_t *k, size_t stride,
                                   int nk, int hd, float scale);
typedef void (*db_wsum16_kernel)(float *o, const float *p, const uint16_t *v, size_t stride,
                                 int nk, int hd);

/* Several queries over the same keys or values (one packed block of a verify: its rows x a kv
 * head's query heads), the cache an f32 or f16 array (dt): query a's scores into out[a] from
 * q[a]; o[a] += the sum over p[a]. Each query's result is bitwise what one scores / wsum call of
 * the same family gives it, so a kernel family may have them or not (NULL: the attention makes
 * one call per query). */
typedef void (*db_scores_multi_kernel)(float *const *out, const float *const *q, int nq,
                                       const void *k, db_dtype dt, size_t stride, int nk, int hd,
                                       float scale);
typedef void (*db_wsum_multi_kernel)(float *const *o, const float *const *p, int nq,
                                     const void *v, db_dtype dt, size_t stride, int nk, int hd);

/* One query row's heads over consecutive cache rows (a decode step): q [nq][hd] holds the row's
 * query heads, k / v point at kv head 0 of the first position, rows W elements apart, and
 * query head h reads kv head h / group. s[h * sstride + j] = scale * q[h] . k(j, h / group);
 * o[h] += sum over j, in key order, of p[h * pstride + j] * v(j, h / group). Every value is
 * bitwise what one scores / wsum call of the same family per head gives (NULL where the
 * family has none: the attention walks blocks of keys instead). */
typedef void (*db_scores_heads_kernel)(float *s, size_t sstride, const float *q, int nq,
                                       int group, const void *k, db_dtype dt, size_t W, int nk,
                                       int hd, float scale);
typedef void (*db_wsum_heads_kernel)(float *o, const float *p, size_t pstride, int nq, int group,
                                     const void *v, db_dtype dt, size_t W, int nk, int hd);

void db_scores_ref(float *out, const float *q, const float *k, size_t stride, int nk, int hd,
                    float scale);
void db_wsum_ref(float *o, const float *p, const float *v, size_t stride, int nk, int hd);
void db_scores16_ref(float *out, const float *q, const uint16_t *k, size_t stride, int nk, int hd,
                     float scale);
void db_wsum16_ref(float *o, const float *p, const uint16_t *v, size_t stride, int nk, int hd);
#if HAVE_X86_SIMD
void db_scores16_avx512(float *out, const float *q, const uint16_t *k, size_t stride, int nk,
                        int hd, float scale);
void db_wsum16_avx512(float *o, const float *p, const uint16_t *v, size_t stride, int nk, int hd);
void db_scores16_avx2(float *out, const float *q, const uint16_t *k, size_t stride, int nk,
                      int hd, float scale);
void db_wsum16_avx2(float *o, const float *p, const uint16_t *v, size_t stride, int nk, int hd);
void db_scores_avx512(float *out, const float *q, const float *k, size_t stride, int nk, int hd,
                    float scale);
void db_wsum_avx512(float *o, const float *p, const float *v, size_t stride, int nk, int hd);
void db_scores_multi_avx512(float *const *out, const float *const *q, int nq, const void *k,
                            db_dtype dt, size_t stride, int nk, int hd, float scale);
void db_wsum_multi_avx512(float *const *o, const float *const *p, int nq, const void *v,
                          db_dtype dt, size_t stride, int nk, int hd);
void db_scores_heads_avx512(float *s, size_t sstride, const float *q, int nq, int group,
                            const void *k, db_dtype dt, size_t W, int nk, int hd, float scale);
void db_wsum_heads_avx512(float *o, const float *p, size_t pstride, int nq, int group,
                          const void *v, db_dtype dt, size_t W, int nk, int hd);
void db_scores_avx2(float *out, const float *q, const float *k, size_t stride, int nk, int hd,
                    float scale);
void db_wsum_avx2(float *o, const float *p, const float *v, size_t stride, int nk, int hd);
#endif

void db_matmul_ref(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                   int o0, int o1, int accumulate);
#if HAVE_X86_SIMD
void db_matmul_avx512(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                      int o0, int o1, int accumulate);
void db_matmul_avx2(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                    int o0, int o1, int accumulate);
#endif
#if HAVE_NEON
void db_matmul_neon(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                    int o0, int o1, int accumulate);
#endif

/* The kernels this build has and this CPU runs, best first, the plain C one last: their names
 * ("avx512", "avx2", "neon", "c") and functions, at most `max`; returns how many. */
int db_matmul_kernels(const char **names, db_matmul_kernel *fns, int max);

/* The kernel named `want` (also "ref" for "c"); NULL or "" means DB_CPU_KERNEL from the
 * environment (DB_SIMD=c is the older spelling of "c"), else the best one. Sets *name to the
 * chosen name; returns NULL (and *name = want) when that kernel is not available here. */
db_matmul_kernel db_matmul_select(const char *want, const char **name);

/* The attention loops that go with the matmul kernel called `name` (db_matmul_kernels). */
void db_attn_kernels(const char *name, db_scores_kernel *scores, db_wsum_kernel *wsum);
/* their f16-cache twins */
void db_attn_kernels16(const char *name, db_scores16_kernel *scores, db_wsum16_kernel *wsum);
/* their several-query forms, both NULL where the family has none */
void db_attn_multi_kernels(const char *name, db_scores_multi_kernel *scores,
                           db_wsum_multi_kernel *wsum);
/* their one-row-many-heads forms, both NULL where the family has none */
void db_attn_heads_kernels(const char *name, db_scores_heads_kernel *scores,
                           db_wsum_heads_kernel *wsum);

#endif
