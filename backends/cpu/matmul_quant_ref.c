/* matmul_quant_ref.c — plain C matmul on quantized weights (matmul_quant.h): the reference
 * the SIMD kernels are tested against, the fallback elsewhere, and the run-time choice. */
#include "config.h"
#include "matmul_quant.h"

#include <stdlib.h>
#include <string.h>

void db_matmul_quant_ref(float *y, const float *x, const void *w, db_dtype dt, int n, int O,
                         int I, int o0, int o1, int accumulate)
{
    float stack[4096];
    float *row = I <= 4096 ? stack : malloc(sizeof(float) * (size_t)I);
    if (!row) abort(); /* compute ops cannot report; a 16 KiB+ row buffer failing is fatal */
    size_t rb = db_dtype_bytes(dt, (size_t)I);
    for (int o = o0; o < o1; o++) {
        db_convert_to_f32(row, (const char *)w + (size_t)o * rb, dt, (size_t)I);
        for (int r = 0; r < n; r++) {
            const float *xr = x + (size_t)r * I;
            float s = 0.0f;
            for (int k = 0; k < I; k++) s += row[k] * xr[k];
            float *dst = y + (size_t)r * O + o;
            *dst = accumulate ? *dst + s : s;
        }
    }
    if (row != stack) free(row);
}

db_matmul_kernel db_matmul_quant_select(const char *name)
{
#if HAVE_X86_SIMD
    if (strcmp(name, "avx512") == 0) return db_matmul_quant_avx512;
    if (strcmp(name, "avx2") == 0) return db_matmul_quant_avx2;
#endif
#if HAVE_NEON
    if (strcmp(name, "neon") == 0) return db_matmul_quant_neon;
#endif
    return db_matmul_quant_ref;
}
