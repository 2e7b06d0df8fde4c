/* test_quant_q8.c — the integer matmul path on quantized weights (backends/cpu/matmul_q8*.c).
 *
 * 1. Unpacking: every chunk's scale * code - min is BITWISE quant.c's dequantized value
 *    (db_convert_to_f32), on random blocks of every type the path takes.
 * 2. The quantizer, blocks of 32 and of 256: codes and scales against llama.cpp's rules
 *    recomputed in double (matmul_q8.h), zero blocks give codes 0, a NaN or Inf in a block makes
 *    d NaN; every SIMD quantizer is BITWISE the C one.
 * 3. The C reference kernel against a double dot product of the dequantized weights with the
 *    dequantized activations (d * code): within 1e-5 * sqrt(I) * sum |w x| (only the order of
 *    the float sums differs), and against the f32 activations within the rounding bound
 *    sum |w| (d / 2 + 127 d 2^-11) (half a code step, and a 32-block's d rounded to f16).
 * 4. Every SIMD kernel this CPU runs (AVX-512 VNNI, AVX2) BITWISE equal to the C reference:
 *    N = 1..9, 16, 17, 33 rows, O not a multiple of the weight tile, a slice [o0, o1) with
 *    accumulate, I across several K blocks; its quantizer BITWISE the C one.
 * (The CPU backend's matmul op on these types, which takes this path, is tested in test_quant.c:
 * batch invariance over threads, a NaN activation reaching the output.) */
#include "config.h"
#include "backend.h"
#include "cpu/matmul_q8.h"
#include "tap.h"
#include "base/util.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static db_rng rng;

static const db_dtype types[] = {DB_Q8_0, DB_Q4_0, DB_Q4_K, DB_Q5_K, DB_Q6_K, DB_Q4_1, DB_Q5_0, DB_Q5_1,
                                 DB_IQ4_NL, DB_IQ4_XS, DB_Q3_K};
#define NT (int)(sizeof types / sizeof *types)

static float *rand_x(int n, int I)
{
    float *x = malloc(sizeof(float) * (size_t)n * I);
    for (int i = 0; i < n * I; i++) x[i] = (float)((db_rng_uniform(&rng) * 2 - 1) * (1 + i % 7));
    return x;
}

static db_q8_rows quantize(db_q8_quantize_fn f, const float *x, int n, int I, int qb, void **buf)
{
    db_q8_rows xq;
    *buf = malloc(db_q8_rows_bytes(n, I));
    db_q8_rows_init(&xq, *buf, n, I, qb);
    f(&xq, x, 0, n);
    return xq;
}

static void test_unpack(void)
{
    for (int ti = 0; ti < NT; ti++) {
        db_dtype dt = types[ti];
        const int I = 512, O = 3;
        uint8_t *w = tu_rand_quant(&rng, dt, O, I);
        float *wf = malloc(sizeof(float) * (size_t)O * I);
        db_convert_to_f32(wf, w, dt, (size_t)O * I);
        int same = 1;
        for (int o = 0; o < O; o++)
            for (int c = 0; c < I / 64; c++) {
                int8_t code[64];
                float scale[16], mn[2];
                db_q8_unpack_chunk(dt, w + (size_t)o * db_dtype_bytes(dt, I), c, code, scale, mn);
                for (int k = 0; k < 64; k++) {
                    float v = scale[k / 4] * (float)code[k] - mn[k / 32];
                    same &= v == wf[(size_t)o * I + 64 * c + k];
                }
            }
        tap_ok(same, "%s: scale * code - min of every chunk == quant.c's value, bitwise", db_dtype_name(dt));
        free(w);
        free(wf);
    }
}

/* blocks of qb: the C quantizer against llama.cpp's rules recomputed in double (matmul_q8.h), or
 * (simd given) the SIMD quantizer against the C one, bitwise */
static void test_quantizer(db_q8_quantize_fn simd, int qb)
{
    const int n = 5, I = 512;
    float *x = rand_x(n, I);
    for (int k = 32; k < 32 + qb; k++) x[(size_t)I + k] = 0.0f; /* row 1: a zero block (qb 32: block 1) */
    x[2 * I + 3] = -9.5f, x[2 * I + 9] = 9.5f; /* two of the largest magnitude: the first one's sign counts */
    x[3 * I + 70] = NAN;
    x[4 * I + 300] = INFINITY;
    void *b;
    db_q8_rows xq = quantize(db_q8_quantize_ref, x, n, I, qb, &b);
    int ok = 1, nan_ok = 1, zero_ok = 1;
    for (int r = 0; r < n && !simd; r++)
        for (int blk = 0; blk < I / qb; blk++) {
            const float *xb = x + (size_t)r * I + (size_t)qb * blk;
            float amax = 0, m = 0;
            int finite = 1;
            for (int k = 0; k < qb; k++) {
                finite &= isfinite(xb[k]) != 0;
                if (fabsf(xb[k]) > amax) amax = fabsf(xb[k]), m = xb[k];
            }
            float d = xq.dl[(size_t)r * (I / 4) + (size_t)(qb / 4) * blk];
            const int8_t *q = xq.q + (size_t)r * I + (size_t)qb * blk;
            if (!finite) {
                nan_ok &= isnan(d);
                continue;
            }
            if (amax == 0) {
                for (int k = 0; k < qb; k++) zero_ok &= q[k] == 0;
                zero_ok &= d == 0.0f;
                continue;
            }
            float scale = qb == 32 ? (float)(127.0 / amax) : (float)(-127.0 / m);
            float want = qb == 32 ? db_f16_to_f32(db_f32_to_f16((float)(amax / 127.0))) : (float)(1.0 / scale);
            ok &= d == want;
            for (int k = 0; k < qb; k++) {
                double t = (double)xb[k] * scale, e = fabs(t - q[k]);
                ok &= q[k] != -128 && (e <= 0.5 + 1e-5 || (q[k] == 127 && t > 127));
            }
        }
    if (!simd) {
        tap_ok(ok, "quantizer, blocks of %d: %s", qb,
               qb == 32 ? "codes nearest to x * 127 / max|x|, d = max|x| / 127 rounded to f16"
                        : "codes nearest to x * -127 / m (m the first of largest magnitude), d = its inverse");
        tap_ok(zero_ok, "quantizer, blocks of %d: an all-zero block gets d 0 and codes 0", qb);
        tap_ok(nan_ok, "quantizer, blocks of %d: a block holding NaN or Inf gets d NaN", qb);
    } else {
        void *b2;
        db_q8_rows s = quantize(simd, x, n, I, qb, &b2);
        int same = memcmp(s.q, xq.q, (size_t)n * I) == 0;
        for (int i = 0; i < n * I / 4; i++) same &= memcmp(&s.dl[i], &xq.dl[i], 4) == 0 && s.nx[i] == xq.nx[i];
        for (int i = 0; i < n * I / 32; i++) same &= memcmp(&s.s[i], &xq.s[i], 4) == 0;
        tap_ok(same, "SIMD quantizer, blocks of %d == the C one, bitwise (codes, scales, lane sums, block sums)", qb);
        free(b2);
    }
    free(b);
    free(x);
}

static void test_reference(void)
{
    for (int ti = 0; ti < NT; ti++) {
        db_dtype dt = types[ti];
        const int I = 1024, O = 7, n = 3;
        uint8_t *w = tu_rand_quant(&rng, dt, O, I);
        float *wf = malloc(sizeof(float) * (size_t)O * I), *x = rand_x(n, I), y[3 * 7];
        db_convert_to_f32(wf, w, dt, (size_t)O * I);
        void *b;
        db_q8_rows xq = quantize(db_q8_quantize_ref, x, n, I, db_q8_act_block(dt), &b);
        db_matmul_q8_ref(y, &xq, w, dt, n, O, 0, O, 0);
        int ok = 1, ok_x = 1;
        double worst = 0;
        for (int r = 0; r < n; r++)
            for (int o = 0; o < O; o++) {
                double s = 0, mag = 0, sx = 0, bound = 0;
                for (int k = 0; k < I; k++) {
                    double wk = wf[(size_t)o * I + k], d = xq.dl[(size_t)r * (I / 4) + k / 4];
                    double xd = d * xq.q[(size_t)r * I + k];
                    s += wk * xd;
                    mag += fabs(wk * xd);
                    sx += wk * x[(size_t)r * I + k];
                    bound += fabs(wk) * (fabs(d) / 2 + 127 * fabs(d) / 2048); /* half a step; a 32-block's d is f16 */
                }
                double got = y[r * O + o], e = fabs(got - s) / (mag + 1e-30);
                worst = e > worst ? e : worst;
                ok &= fabs(got - s) <= 1e-5 * sqrt((double)I) * mag;
                ok_x &= fabs(got - sx) <= bound + 1e-5 * sqrt((double)I) * mag;
            }
        tap_ok(ok, "%s: C reference == the double dot product of dequantized weights and activations (worst %.2g)",
               db_dtype_name(dt), worst);
        tap_ok(ok_x, "%s: C reference within the activation rounding bound of the f32 product", db_dtype_name(dt));
        free(b);
        free(w);
        free(wf);
        free(x);
    }
}

static void test_simd(const char *name, db_matmul_q8_kernel k, db_q8_quantize_fn qf)
{
    static const int Ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33};
    for (int ti = 0; ti < 2 * NT; ti++) {
        db_dtype dt = types[ti % NT];
        /* 1088 = 17 chunks (a K block and one chunk, not a multiple of 256) where the type allows
         * it, else 2304 = two K blocks and a quarter; then 192 (6 blocks of 32: one group of
         * db_q8_rows.qt, partly filled) for the types of 32-value blocks that take it */
        int I = db_q8_supports(dt, 1088) ? 1088 : 2304, O = 11, same = 1;
        if (ti >= NT && !db_q8_supports(dt, 192)) continue;
        if (ti >= NT) I = 192;
        uint8_t *w = tu_rand_quant(&rng, dt, O, I);
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
            int n = Ns[ni];
            float *x = rand_x(n, I), *y = malloc(sizeof(float) * (size_t)n * O), *ref = malloc(sizeof(float) * (size_t)n * O);
            void *b;
            db_q8_rows xq = quantize(qf, x, n, I, db_q8_act_block(dt), &b);
            for (int acc = 0; acc < 2; acc++) {
                int o0 = acc ? 2 : 0, o1 = acc ? 9 : O;
                for (int i = 0; i < n * O; i++) y[i] = ref[i] = (float)i;
                db_matmul_q8_ref(ref, &xq, w, dt, n, O, o0, o1, acc);
                k(y, &xq, w, dt, n, O, o0, o1, acc);
                for (int i = 0; i < n * O; i++)
                    if (memcmp(&y[i], &ref[i], 4) != 0) {
                        if (same) tap_diag("N %d, accumulate %d: row %d, column %d: %.9g, reference %.9g", n, acc, i / O, i % O, y[i], ref[i]);
                        same = 0;
                    }
            }
            free(b);
            free(x);
            free(y);
            free(ref);
        }
        tap_ok(same, "%s: %s kernel == the C reference, bitwise (I %d, N 1..33, slices, accumulate)", db_dtype_name(dt), name, I);
        free(w);
    }
}

int main(void)
{
    db_rng_seed(&rng, 4321);
    test_unpack();
    test_quantizer(NULL, 32);
    test_quantizer(NULL, 256);
    test_reference();
    /* every integer kernel this CPU runs: the families' choices (avx512: VNNI where the CPU has
     * it, else the AVX2 one) */
    static const char *const fams[] = {"avx512", "avx2", "neon"};
    db_matmul_q8_kernel seen[3] = {0};
    int ran = 0;
    for (int f = 0; f < 3; f++) {
        db_matmul_q8_kernel k = NULL;
        db_q8_quantize_fn qf = NULL;
        if (db_matmul_q8_select(fams[f], &k, &qf) != 0 || k == seen[0] || k == seen[1]) continue;
        seen[f] = k;
        ran++;
        tap_diag("integer kernel of family %s", fams[f]);
        test_quantizer(qf, 32);
        test_quantizer(qf, 256);
        test_simd(fams[f], k, qf);
    }
    if (!ran) tap_skip("no integer SIMD kernel on this CPU: the C reference alone is tested");
    return tap_done();
}
