/* matmul_select.c — run-time choice of the matmul kernel (dav1d style: compile every kernel
 * the compiler can target, pick by CPU flags at start-up). */
#include "config.h"
#include "cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

db_matmul_kernel db_matmul_select(int force_ref, const char **name)
{
    const char *env = getenv("DB_SIMD");
    if (env && strcmp(env, "c") == 0) force_ref = 1;
    if (!force_ref) {
#if HAVE_X86_SIMD
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("f16c")) {
            *name = "avx2+fma+f16c";
            return db_matmul_avx2;
        }
#endif
#if HAVE_NEON
        *name = "neon";
        return db_matmul_neon;
#endif
    }
    *name = "c";
    return db_matmul_ref;
}
