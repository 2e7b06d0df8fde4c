/* matmul_quant_avx512.c — AVX-512F/BW matmul on quantized weights (matmul_quant.h), compiled
 * with those target flags and -ffp-contract=off (the dequantization must round like quant.c).
 *
 * As matmul_quant_avx2.c with 16 lanes: each group of 32 values is dequantized into two
 * registers; accumulator a0 takes values 0-15 of every group, a1 values 16-31, and the row
 * result is reduce(a0 + a1) in a fixed order — the same for every tile, so batch-invariant. */
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

/* 16 bytes -> 16 int32 */
static inline __m512i u8x16(const uint8_t *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* group g (values 32g..32g+31) of a weight row -> w[2] */
static inline __attribute__((always_inline)) void dequant32(db_dtype dt, const uint8_t *row,
                                                            int g, __m512 w[2])
{
    const __m512i m15 = _mm512_set1_epi32(15);
    if (dt == DB_Q8_0 || dt == DB_Q4_0) {
        const uint8_t *b = row + (size_t)g * (dt == DB_Q8_0 ? 34 : 18);
        __m512 d = _mm512_set1_ps(ld_f16(b));
        for (int k = 0; k < 2; k++) {
            __m512i q;
            if (dt == DB_Q8_0) {
                q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2 + 16 * k)));
            } else {
                __m512i v = u8x16(b + 2);
                q = k == 0 ? _mm512_and_si512(v, m15) : _mm512_srli_epi32(v, 4);
                q = _mm512_sub_epi32(q, _mm512_set1_epi32(8));
            }
            w[k] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(q));
        }
        return;
    }
    if (dt == DB_Q4_K || dt == DB_Q5_K) {
        int five = dt == DB_Q5_K, j = g & 7, c = j >> 1, s, m;
        const uint8_t *b = row + (size_t)(g >> 3) * (five ? 176 : 144);
        const uint8_t *qs = b + (five ? 48 : 16) + 32 * c, *qh = b + 16;
        db_scale_min_k4(j, b + 4, &s, &m);
        __m512 d = _mm512_set1_ps(ld_f16(b) * (float)s), mn = _mm512_set1_ps(ld_f16(b + 2) * (float)m);
        for (int k = 0; k < 2; k++) {
            __m512i v = u8x16(qs + 16 * k);
            __m512i q = j & 1 ? _mm512_srli_epi32(v, 4) : _mm512_and_si512(v, m15);
            if (five) {
                __m512i h = _mm512_srli_epi32(u8x16(qh + 16 * k), (unsigned)j);
                q = _mm512_add_epi32(q, _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(1)), 4));
            }
            w[k] = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(q)), mn);
        }
        return;
    }
    /* Q6_K: group g is quarter k4 of half h; values 0-15 and 16-31 have one scale each */
    const uint8_t *b = row + (size_t)(g >> 3) * 210;
    int h = (g >> 2) & 1, k4 = g & 3;
    const uint8_t *ql = b + 64 * h + (k4 & 1) * 32, *qh = b + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(b + 192) + 8 * h + 2 * k4;
    float d = ld_f16(b + 208);
    for (int k = 0; k < 2; k++) {
        __m512i v = u8x16(ql + 16 * k);
        __m512i lo = k4 < 2 ? _mm512_and_si512(v, m15) : _mm512_srli_epi32(v, 4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi32(u8x16(qh + 16 * k), (unsigned)(2 * k4)),
                                      _mm512_set1_epi32(3));
        __m512i q = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
        w[k] = _mm512_mul_ps(_mm512_set1_ps(d * (float)sc[k]), _mm512_cvtepi32_ps(q));
    }
}

static inline float hsum(__m512 v)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

static inline __attribute__((always_inline)) void tile(int R, db_dtype dt, float *y,
                                                       const float *x, const uint8_t *row, int O,
                                                       int I, int o, int accumulate)
{
    __m512 a0[4], a1[4], w[2];
    for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm512_setzero_ps();
    for (int g = 0; g < I / 32; g++) {
        if (DB_QUANT_MIX_TYPE(dt)) { /* two 8-lane halves -> 16 lanes */
            __m256 h[4];
            dbx_dequant32(dt, row, g, h);
            for (int k = 0; k < 2; k++)
                w[k] = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(h[2 * k])),
                                                           _mm256_castps_pd(h[2 * k + 1]), 1));
        } else {
            dequant32(dt, row, g, w);
        }
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * I + 32 * g;
            a0[r] = _mm512_fmadd_ps(w[0], _mm512_loadu_ps(xr), a0[r]);
            a1[r] = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(xr + 16), a1[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float s = hsum(_mm512_add_ps(a0[r], a1[r]));
        float *dst = y + (size_t)r * O + o;
        *dst = accumulate ? *dst + s : s;
    }
}

static inline __attribute__((always_inline)) void run(db_dtype dt, float *y, const float *x,
                                                      const void *w, int n, int O, int I, int o0,
                                                      int o1, int accumulate)
{
    DB_QUANT_ROWS(tile, dt, y, x, w, n, O, I, o0, o1, accumulate);
}

void db_matmul_quant_avx512(float *y, const float *x, const void *w, db_dtype dt, int n, int O,
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
