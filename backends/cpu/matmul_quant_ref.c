/* matmul_quant_ref.c — plain C matmul on quantized weights (matmul_quant.h): the reference
 * the SIMD kernels are tested against, the fallback elsewhere, and the run-time choice. */
#include "config.h"
#include "matmul_quant.h"

#include <string.h>

/* Row o is dequantized in pieces of QREF_PIECE values (a multiple of every block) into a stack
 * buffer, and the sums of up to QREF_ROWS activation rows carried across the pieces: no heap
 * memory, so nothing can fail inside a compute op. Each dot product is still one float sum
 * over k = 0..I-1 in order; a row of I <= QREF_PIECE is dequantized once for all n rows. */
#define QREF_PIECE 4096
#define QREF_ROWS 64

void db_matmul_quant_ref(float *y, const float *x, const void *w, db_dtype dt, int n, int O,
                         int I, int o0, int o1, int accumulate)
{
    float row[QREF_PIECE], sum[QREF_ROWS];
    size_t rb = db_dtype_bytes(dt, (size_t)I);
    for (int o = o0; o < o1; o++) {
        const char *wo = (const char *)w + (size_t)o * rb;
        for (int r0 = 0; r0 < n; r0 += QREF_ROWS) {
            int nr = n - r0 < QREF_ROWS ? n - r0 : QREF_ROWS;
            for (int r = 0; r < nr; r++) sum[r] = 0.0f;
            for (int k0 = 0; k0 < I; k0 += QREF_PIECE) {
                int nk = I - k0 < QREF_PIECE ? I - k0 : QREF_PIECE;
                if (r0 == 0 || I > QREF_PIECE) /* a single piece stays in row for every group */
                    db_convert_to_f32(row, wo + db_dtype_bytes(dt, (size_t)k0), dt, (size_t)nk);
                for (int r = 0; r < nr; r++) {
                    const float *xr = x + (size_t)(r0 + r) * I + k0;
                    float s = sum[r];
                    for (int k = 0; k < nk; k++) s += row[k] * xr[k];
                    sum[r] = s;
                }
            }
            for (int r = 0; r < nr; r++) {
                float *dst = y + (size_t)(r0 + r) * O + o;
                *dst = accumulate ? *dst + sum[r] : sum[r];
            }
        }
    }
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
