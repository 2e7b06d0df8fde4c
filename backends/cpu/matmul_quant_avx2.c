/* matmul_quant_avx2.c — AVX2/FMA matmul on quantized weights (matmul_quant.h), compiled with
 * those target flags and -ffp-contract=off (the dequantization must round like quant.c).
 *
 * The weight row is walked in groups of 32 values (a Q8_0 / Q4_0 block, an eighth of a K-type
 * block); each group is dequantized into four 8-lane registers and multiplied into up to 4
 * activation rows: accumulator a0 takes lanes 0-7 and 16-23 of every group, a1 lanes 8-15 and
 * 24-31, and the row result is hsum(a0 + a1) — the same for every tile size, so batch-invariant. */
#include "config.h"
#include "matmul_quant.h"
#include "quant.h"
#include "matmul_quant_x86.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline float ld_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* 8 bytes -> 8 int32 */
static inline __m256i u8x8(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* group g (values 32g..32g+31) of a weight row -> w[4] */
static inline __attribute__((always_inline)) void dequant32(db_dtype dt, const uint8_t *row,
                                                            int g, __m256 w[4])
{
    const __m256i m15 = _mm256_set1_epi32(15);
    if (dt == DB_Q8_0 || dt == DB_Q4_0) {
        const uint8_t *b = row + (size_t)g * (dt == DB_Q8_0 ? 34 : 18);
        __m256 d = _mm256_set1_ps(ld_f16(b));
        for (int k = 0; k < 4; k++) {
            __m256i q;
            if (dt == DB_Q8_0) {
                q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + 8 * k)));
            } else {
                __m256i v = u8x8(b + 2 + 8 * (k & 1));
                q = k < 2 ? _mm256_and_si256(v, m15) : _mm256_srli_epi32(v, 4);
                q = _mm256_sub_epi32(q, _mm256_set1_epi32(8));
            }
            w[k] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(q));
        }
        return;
    }
    if (dt == DB_Q4_K || dt == DB_Q5_K) {
        int five = dt == DB_Q5_K, j = g & 7, c = j >> 1, s, m;
        const uint8_t *b = row + (size_t)(g >> 3) * (five ? 176 : 144);
        const uint8_t *qs = b + (five ? 48 : 16) + 32 * c, *qh = b + 16;
        db_scale_min_k4(j, b + 4, &s, &m);
        __m256 d = _mm256_set1_ps(ld_f16(b) * (float)s), mn = _mm256_set1_ps(ld_f16(b + 2) * (float)m);
        for (int k = 0; k < 4; k++) {
            __m256i v = u8x8(qs + 8 * k);
            __m256i q = j & 1 ? _mm256_srli_epi32(v, 4) : _mm256_and_si256(v, m15);
            if (five) {
                __m256i h = _mm256_srli_epi32(u8x8(qh + 8 * k), j);
                q = _mm256_add_epi32(q, _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(1)), 4));
            }
            w[k] = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q)), mn);
        }
        return;
    }
    /* Q6_K: group g is quarter k4 of half h */
    const uint8_t *b = row + (size_t)(g >> 3) * 210;
    int h = (g >> 2) & 1, k4 = g & 3;
    const uint8_t *ql = b + 64 * h + (k4 & 1) * 32, *qh = b + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(b + 192) + 8 * h + 2 * k4;
    float d = ld_f16(b + 208);
    for (int k = 0; k < 4; k++) {
        __m256i v = u8x8(ql + 8 * k);
        __m256i lo = k4 < 2 ? _mm256_and_si256(v, m15) : _mm256_srli_epi32(v, 4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi32(u8x8(qh + 8 * k), 2 * k4), _mm256_set1_epi32(3));
        __m256i q = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        w[k] = _mm256_mul_ps(_mm256_set1_ps(d * (float)sc[k >> 1]), _mm256_cvtepi32_ps(q));
    }
}

static inline float hsum(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

static inline __attribute__((always_inline)) void tile(int R, db_dtype dt, float *y,
                                                       const float *x, const uint8_t *row, int O,
                                                       int I, int o, int accumulate)
{
    __m256 a0[4], a1[4], w[4];
    for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm256_setzero_ps();
    for (int g = 0; g < I / 32; g++) {
        if (DB_QUANT_MIX_TYPE(dt)) dbx_dequant32(dt, row, g, w);
        else dequant32(dt, row, g, w);
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * I + 32 * g;
            a0[r] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(xr), a0[r]);
            a1[r] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xr + 8), a1[r]);
            a0[r] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xr + 16), a0[r]);
            a1[r] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xr + 24), a1[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float s = hsum(_mm256_add_ps(a0[r], a1[r]));
        float *dst = y + (size_t)r * O + o;
        *dst = accumulate ? *dst + s : s;
    }
}

/* one dtype, all tiles: the dtype is a compile-time constant inside */
static inline __attribute__((always_inline)) void run(db_dtype dt, float *y, const float *x,
                                                      const void *w, int n, int O, int I, int o0,
                                                      int o1, int accumulate)
{
    DB_QUANT_ROWS(tile, dt, y, x, w, n, O, I, o0, o1, accumulate);
}

void db_matmul_quant_avx2(float *y, const float *x, const void *w, db_dtype dt, int n, int O,
                          int I, int o0, int o1, int accumulate)
{
    switch (dt) {
    case DB_Q8_0: run(DB_Q8_0, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_Q4_0: run(DB_Q4_0, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_Q4_K: run(DB_Q4_K, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_Q5_K: run(DB_Q5_K, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_Q6_K: run(DB_Q6_K, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_Q4_1: run(DB_Q4_1, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_Q5_0: run(DB_Q5_0, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_Q5_1: run(DB_Q5_1, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_Q2_K: run(DB_Q2_K, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_Q3_K: run(DB_Q3_K, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_IQ4_NL: run(DB_IQ4_NL, y, x, w, n, O, I, o0, o1, accumulate); break;
    case DB_IQ4_XS: run(DB_IQ4_XS, y, x, w, n, O, I, o0, o1, accumulate); break;
    default: db_matmul_quant_ref(y, x, w, dt, n, O, I, o0, o1, accumulate); break;
    }
}
