/* matmul_quant_x86.h — AVX2 register dequantizers of the types llama-quantize's mixes add
 * (Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K; layouts in quant.c), shared by the AVX2 and
 * AVX-512 kernels (both compiled with AVX2 and -ffp-contract=off): group g of a weight row
 * (values 32g..32g+31) -> w[4], w[k] the values 8k..8k+7, each one exactly quant.c's value (the
 * same f32 products and sums in the same order, no fused multiply-add). */
#ifndef DB_MATMUL_QUANT_X86_H
#define DB_MATMUL_QUANT_X86_H

#include "quant.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline float dbx_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* the IQ4 levels as floats, for the gather */
static const float dbx_iq4f[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* 8 bytes -> 8 int32 */
static inline __m256i dbx_u8x8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

/* the 32 nibbles of a 32-value block's 16 bytes qs: values 8k..8k+7 (low nibbles for k < 2) */
static inline __m256i dbx_nib(const uint8_t *qs, int k)
{
    __m256i v = dbx_u8x8(qs + 8 * (k & 1));
    return k < 2 ? _mm256_and_si256(v, _mm256_set1_epi32(15)) : _mm256_srli_epi32(v, 4);
}

/* bits 8k..8k+7 of the little-endian u32 at p, each as 0 / 16 */
static inline __m256i dbx_fifth(const uint8_t *p, int k)
{
    uint32_t h;
    memcpy(&h, p, 4);
    __m256i sh = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i b = _mm256_srlv_epi32(_mm256_set1_epi32((int)(h >> (8 * k))), sh);
    return _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(1)), 4);
}

static inline __attribute__((always_inline)) void dbx_dequant32(db_dtype dt, const uint8_t *row, int g,
                                                                __m256 w[4])
{
    if (dt == DB_Q4_1 || dt == DB_Q5_0 || dt == DB_Q5_1 || dt == DB_IQ4_NL) {
        static const int bytes[] = {[DB_Q4_1] = 20, [DB_Q5_0] = 22, [DB_Q5_1] = 24, [DB_IQ4_NL] = 18};
        const uint8_t *b = row + (size_t)g * (size_t)bytes[dt];
        int has_min = dt == DB_Q4_1 || dt == DB_Q5_1, five = dt == DB_Q5_0 || dt == DB_Q5_1;
        const uint8_t *qh = b + (has_min ? 4 : 2), *qs = qh + (five ? 4 : 0);
        __m256 d = _mm256_set1_ps(dbx_f16(b)), m = _mm256_set1_ps(has_min ? dbx_f16(b + 2) : 0.0f);
        for (int k = 0; k < 4; k++) {
            __m256i q = dbx_nib(qs, k);
            if (five) q = _mm256_or_si256(q, dbx_fifth(qh, k));
            if (dt == DB_IQ4_NL) w[k] = _mm256_mul_ps(d, _mm256_i32gather_ps(dbx_iq4f, q, 4));
            else if (has_min) w[k] = _mm256_add_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q)), m);
            else w[k] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(16))));
        }
        return;
    }
    if (dt == DB_IQ4_XS) {
        const uint8_t *b = row + (size_t)(g >> 3) * 136;
        int j = g & 7;
        float dj = dbx_f16(b) * (float)(db_scale_iq4_xs(j, (unsigned)b[2] | (unsigned)b[3] << 8, b + 4) - 32);
        __m256 d = _mm256_set1_ps(dj);
        for (int k = 0; k < 4; k++) w[k] = _mm256_mul_ps(d, _mm256_i32gather_ps(dbx_iq4f, dbx_nib(b + 8 + 16 * j, k), 4));
        return;
    }
    /* Q2_K / Q3_K: group g' = g % 8 of a block is sub-blocks 2g' (k < 2) and 2g' + 1, whose
     * 2-bit quants are bits 2(g' % 4) of the 32 bytes qs[32 (g' / 4) ...] */
    int three = dt == DB_Q3_K, gp = g & 7, h = gp >> 2, kk = gp & 3;
    const uint8_t *b = row + (size_t)(g >> 3) * (three ? 110 : 84);
    const uint8_t *qs = b + (three ? 32 : 16) + 32 * h;
    for (int k = 0; k < 4; k++) {
        int j = 2 * gp + (k >> 1);
        __m256i q = _mm256_and_si256(_mm256_srli_epi32(dbx_u8x8(qs + 8 * k), 2 * kk), _mm256_set1_epi32(3));
        if (three) {
            __m256i hb = _mm256_and_si256(_mm256_srli_epi32(dbx_u8x8(b + 8 * k), 4 * h + kk), _mm256_set1_epi32(1));
            /* q - (bit ? 0 : 4) = q - 4 + 4 bit */
            q = _mm256_add_epi32(_mm256_sub_epi32(q, _mm256_set1_epi32(4)), _mm256_slli_epi32(hb, 2));
            float dj = dbx_f16(b + 108) * (float)(db_scale_q3_k(j, b + 96) - 32);
            w[k] = _mm256_mul_ps(_mm256_set1_ps(dj), _mm256_cvtepi32_ps(q));
        } else {
            float dj = dbx_f16(b + 80) * (float)(b[j] & 0xF), mj = dbx_f16(b + 82) * (float)(b[j] >> 4);
            w[k] = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(dj), _mm256_cvtepi32_ps(q)), _mm256_set1_ps(mj));
        }
    }
}

#endif
