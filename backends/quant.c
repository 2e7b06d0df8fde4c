/* quant.c — the block-quantized weight types (llama.cpp's GGUF types) and their reference
 * dequantizer: the definition every kernel (CPU SIMD, GPU) and the Python reference
 * (scripts/gguf/quants.py) must match bit for bit.
 *
 * Layouts (little-endian, packed; "f16" an IEEE half; x = the dequantized value):
 *   Q8_0, 32 values, 34 bytes:  f16 d, int8 q[32].                       x[i] = d * q[i]
 *   Q4_0, 32 values, 18 bytes:  f16 d, u8 qs[16].                         x[i] = d * (lo4(qs[i]) - 8),
 *                               x[i + 16] = d * (hi4(qs[i]) - 8), i < 16
 *   Q4_K, 256 values, 144 bytes: f16 d, f16 dmin, u8 sc[12], u8 qs[128]. Eight sub-blocks of 32
 *                               with a 6-bit scale s_j and 6-bit min m_j packed in sc (below);
 *                               values 64c..64c+31 are lo4(qs[32c + l]) (sub-block 2c), values
 *                               64c+32..64c+63 are hi4(qs[32c + l]) (sub-block 2c+1):
 *                               x = (d * s_j) * q - (dmin * m_j)
 *   Q5_K, 256 values, 176 bytes: f16 d, f16 dmin, u8 sc[12], u8 qh[32], u8 qs[128]. As Q4_K with
 *                               a fifth bit: bit 2c of qh[l] for sub-block 2c, bit 2c+1 for
 *                               sub-block 2c+1 (adds 16 to q).
 *   Q6_K, 256 values, 210 bytes: u8 ql[128], u8 qh[64], int8 sc[16], f16 d. Two halves of 128;
 *                               in half h (ql += 64h, qh += 32h, sc += 8h), l < 32:
 *                               q0 = lo4(ql[l])    | (qh[l] >> 0 & 3) << 4  -> value l
 *                               q1 = lo4(ql[l+32]) | (qh[l] >> 2 & 3) << 4  -> value l + 32
 *                               q2 = hi4(ql[l])    | (qh[l] >> 4 & 3) << 4  -> value l + 64
 *                               q3 = hi4(ql[l+32]) | (qh[l] >> 6 & 3) << 4  -> value l + 96
 *                               x = (d * sc[l/16 + 2k]) * (q_k - 32) for q_k, k = 0..3
 *   K-type 6-bit scales: for j < 4: s_j = sc[j] & 63, m_j = sc[j + 4] & 63; for j >= 4:
 *   s_j = lo4(sc[j + 4]) | (sc[j - 4] >> 6) << 4, m_j = hi4(sc[j + 4]) | (sc[j] >> 6) << 4.
 *
 * Every product is one f32 rounding in the order written (d * s first, then times q, then minus
 * dmin * m): the reference quantizer computes the same expressions in float32. */
#include "config.h"
#include "backend.h"
#include "quant.h"

#include <stdint.h>
#include <string.h>

static float ld_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return db_f16_to_f32(h);
}

static void dequant_q8_0(float *y, const uint8_t *b)
{
    float d = ld_f16(b);
    for (int i = 0; i < 32; i++) y[i] = d * (float)(int8_t)b[2 + i];
}

static void dequant_q4_0(float *y, const uint8_t *b)
{
    float d = ld_f16(b);
    const uint8_t *qs = b + 2;
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)((qs[i] & 0xF) - 8);
        y[i + 16] = d * (float)((qs[i] >> 4) - 8);
    }
}

/* Q4_K (qh == NULL) and Q5_K */
static void dequant_qk45(float *y, const uint8_t *sc, const uint8_t *qh, const uint8_t *qs, float d,
                         float dmin)
{
    for (int c = 0; c < 4; c++) {
        int s0, m0, s1, m1;
        db_scale_min_k4(2 * c, sc, &s0, &m0);
        db_scale_min_k4(2 * c + 1, sc, &s1, &m1);
        float d0 = d * (float)s0, mm0 = dmin * (float)m0;
        float d1 = d * (float)s1, mm1 = dmin * (float)m1;
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
            if (qh) {
                lo += (qh[l] >> (2 * c) & 1) << 4;
                hi += (qh[l] >> (2 * c + 1) & 1) << 4;
            }
            y[64 * c + l] = d0 * (float)lo - mm0;
            y[64 * c + 32 + l] = d1 * (float)hi - mm1;
        }
    }
}

static void dequant_q6_k(float *y, const uint8_t *b)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = ld_f16(b + 208);
    for (int h = 0; h < 2; h++, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; l++) {
            int q0 = ((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
            int q1 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
            int q2 = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
            int q3 = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
            int is = l / 16;
            y[l] = (d * (float)sc[is]) * (float)q0;
            y[l + 32] = (d * (float)sc[is + 2]) * (float)q1;
            y[l + 64] = (d * (float)sc[is + 4]) * (float)q2;
            y[l + 96] = (d * (float)sc[is + 6]) * (float)q3;
        }
    }
}

void db_dequant_block(float *y, const void *block, db_dtype t)
{
    const uint8_t *b = block;
    switch (t) {
    case DB_Q8_0: dequant_q8_0(y, b); break;
    case DB_Q4_0: dequant_q4_0(y, b); break;
    case DB_Q4_K: dequant_qk45(y, b + 4, NULL, b + 16, ld_f16(b), ld_f16(b + 2)); break;
    case DB_Q5_K: dequant_qk45(y, b + 4, b + 16, b + 48, ld_f16(b), ld_f16(b + 2)); break;
    case DB_Q6_K: dequant_q6_k(y, b); break;
    default: break; /* element types are not blocks */
    }
}
