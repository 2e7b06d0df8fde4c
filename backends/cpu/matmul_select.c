/* matmul_select.c — run-time choice of the matmul kernel (dav1d style: compile every kernel
 * the compiler can target, pick by CPU flags at start-up, let tests force each one). */
#include "config.h"
#include "cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

int db_matmul_kernels(const char **names, db_matmul_kernel *fns, int max)
{
    int n = 0;
#define ADD(NAME, FN)                                                                            \
    do {                                                                                         \
        if (n < max) {                                                                           \
            names[n] = NAME;                                                                     \
            fns[n] = FN;                                                                         \
        }                                                                                        \
        n++;                                                                                     \
    } while (0)
#if HAVE_X86_SIMD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        ADD("avx512", db_matmul_avx512);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
        ADD("avx2", db_matmul_avx2);
#endif
#if HAVE_NEON
    ADD("neon", db_matmul_neon);
#endif
    ADD("c", db_matmul_ref);
#undef ADD
    return n < max ? n : max;
}

db_matmul_kernel db_matmul_select(const char *want, const char **name)
{
    if (!want || !*want) want = getenv("DB_CPU_KERNEL");
    if (!want || !*want) {
        const char *simd = getenv("DB_SIMD"); /* older spelling: DB_SIMD=c */
        if (simd && strcmp(simd, "c") == 0) want = "c";
    }
    if (want && strcmp(want, "ref") == 0) want = "c";
    const char *names[8];
    db_matmul_kernel fns[8];
    int n = db_matmul_kernels(names, fns, 8);
    for (int i = 0; i < n; i++)
        if (!want || !*want || strcmp(want, names[i]) == 0) {
            *name = names[i];
            return fns[i];
        }
    *name = want;
    return NULL;
}

void db_attn_kernels(const char *name, db_scores_kernel *scores, db_wsum_kernel *wsum)
{
    *scores = db_scores_ref;
    *wsum = db_wsum_ref;
#if HAVE_X86_SIMD
    if (name && strcmp(name, "avx512") == 0) *scores = db_scores_avx512, *wsum = db_wsum_avx512;
    if (name && strcmp(name, "avx2") == 0) *scores = db_scores_avx2, *wsum = db_wsum_avx2;
#endif
    (void)name;
}

void db_attn_kernels16(const char *name, db_scores16_kernel *scores, db_wsum16_kernel *wsum)
{
    *scores = db_scores16_ref;
    *wsum = db_wsum16_ref;
#if HAVE_X86_SIMD
    if (name && strcmp(name, "avx512") == 0) *scores = db_scores16_avx512, *wsum = db_wsum16_avx512;
    if (name && strcmp(name, "avx2") == 0) *scores = db_scores16_avx2, *wsum = db_wsum16_avx2;
#endif
    (void)name;
}

void db_attn_multi_kernels(const char *name, db_scores_multi_kernel *scores,
                           db_wsum_multi_kernel *wsum)
{
    *scores = NULL;
    *wsum = NULL;
#if HAVE_X86_SIMD
    if (name && strcmp(name, "avx512") == 0) *scores = db_scores_multi_avx512, *wsum = db_wsum_multi_avx512;
#endif
    (void)name;
}

void db_attn_heads_kernels(const char *name, db_scores_heads_kernel *scores,
                           db_wsum_heads_kernel *wsum)
{
    *scores = NULL;
    *wsum = NULL;
#if HAVE_X86_SIMD
    if (name && strcmp(name, "avx512") == 0) *scores = db_scores_heads_avx512, *wsum = db_wsum_heads_avx512;
#endif
    (void)name;
}
