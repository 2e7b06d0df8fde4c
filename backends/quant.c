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
 *   Q4_1, 32 values, 20 bytes:  f16 d, f16 m, u8 qs[16]. q = lo4(qs[i]) for value i, hi4 for
 *                               value i + 16 (as Q4_0):  x = d * q + m
 *   Q5_0, 32 values, 22 bytes:  f16 d, u8 qh[4], u8 qs[16]. q = lo4(qs[i]) | (bit i of the
 *                               little-endian u32 qh) << 4 for value i, hi4(qs[i]) | (bit i + 16)
 *                               << 4 for value i + 16:  x = d * (q - 16)
 *   Q5_1, 32 values, 24 bytes:  f16 d, f16 m, u8 qh[4], u8 qs[16]. q as Q5_0:  x = d * q + m
 *   IQ4_NL, 32 values, 18 bytes: f16 d, u8 qs[16]. Nibbles as Q4_0, each indexing the table
 *                               L = {-127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113}:
 *                               x = d * L[q]
 *   IQ4_XS, 256 values, 136 bytes: f16 d, u16 sh, u8 sl[4], u8 qs[128]. Eight sub-blocks of 32,
 *                               sub-block j a 6-bit scale s_j = (sl[j/2] >> 4(j%2) & 15) |
 *                               (sh >> 2j & 3) << 4 and the 16 bytes qs[16j..] with IQ4_NL's
 *                               nibble order:  x = (d * (s_j - 32)) * L[q]
 *   Q2_K, 256 values, 84 bytes: u8 sc[16], u8 qs[64], f16 d, f16 dmin. Sixteen sub-blocks of
 *                               16; sub-block j (0..15): scale lo4(sc[j]), min hi4(sc[j]); its
 *                               2-bit quants are bits 2k..2k+1 of qs[32h + 16(j%2) + l], l < 16,
 *                               with h = j / 8, k = (j % 8) / 2:  x = (d * s_j) * q - (dmin * m_j)
 *   Q3_K, 256 values, 110 bytes: u8 hm[32], u8 qs[64], u8 sc[12], f16 d. Sub-blocks as Q2_K
 *                               (2-bit low part at the same place); the third bit is bit
 *                               4h + k of hm[16(j%2) + l], and q = low - (third bit ? 0 : 4) in
 *                               -4..3. Sixteen 6-bit scales s_j: lo4 from sc[(j & 4) + j%4]
 *                               (low nibble for j < 8, high for j >= 8), the high 2 bits from
 *                               sc[8 + j%4] >> 2(j/4):  x = (d * (s_j - 32)) * q
 *   K-type 6-bit scales: for j < 4: s_j = sc[j] & 63, m_j = sc[j + 4] & 63; for j >= 4:
 *   s_j = lo4(sc[j + 4]) | (sc[j - 4] >> 6) << 4, m_j = hi4(sc[j + 4]) | (sc[j] >> 6) << 4.
 *
 * Every product is one f32 rounding in the order written (d * s first, then times q, then minus
 * dmin * m, or plus m): no fused multiply-add; the reference quantizer computes the same
 * expressions in float32. */
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

static void dequant_q4_1(float *y, const uint8_t *b)
{
    float d = ld_f16(b), m = ld_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)(qs[i] & 0xF) + m;
        y[i + 16] = d * (float)(qs[i] >> 4) + m;
    }
}

/* Q5_0 (has_min 0) and Q5_1 */
static void dequant_q5(float *y, const uint8_t *b, int has_min)
{
    float d = ld_f16(b), m = has_min ? ld_f16(b + 2) : 0.0f;
    const uint8_t *hb = b + (has_min ? 4 : 2), *qs = hb + 4;
    uint32_t qh = (uint32_t)hb[0] | (uint32_t)hb[1] << 8 | (uint32_t)hb[2] << 16 | (uint32_t)hb[3] << 24;
    for (int i = 0; i < 16; i++) {
        int lo = (qs[i] & 0xF) | (int)(qh >> i & 1) << 4, hi = (qs[i] >> 4) | (int)(qh >> (i + 16) & 1) << 4;
        if (has_min) {
            y[i] = d * (float)lo + m;
            y[i + 16] = d * (float)hi + m;
        } else {
            y[i] = d * (float)(lo - 16);
            y[i + 16] = d * (float)(hi - 16);
        }
    }
}

static void dequant_iq4_nl(float *y, const uint8_t *b)
{
    float d = ld_f16(b);
    const uint8_t *qs = b + 2;
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)db_iq4_levels[qs[i] & 0xF];
        y[i + 16] = d * (float)db_iq4_levels[qs[i] >> 4];
    }
}

static void dequant_iq4_xs(float *y, const uint8_t *b)
{
    float d = ld_f16(b);
    unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int j = 0; j < 8; j++, y += 32, qs += 16) {
        float dj = d * (float)(db_scale_iq4_xs(j, sh, sl) - 32);
        for (int i = 0; i < 16; i++) {
            y[i] = dj * (float)db_iq4_levels[qs[i] & 0xF];
            y[i + 16] = dj * (float)db_iq4_levels[qs[i] >> 4];
        }
    }
}

/* Q2_K (hm == NULL: sc the 16 scale/min bytes) and Q3_K (sc the 12 packed 6-bit scales) */
static void dequant_q23_k(float *y, const uint8_t *b, int three)
{
    const uint8_t *hm = three ? b : NULL, *qs = three ? b + 32 : b + 16, *sc = three ? b + 96 : b;
    float d = ld_f16(three ? b + 108 : b + 80), dmin = three ? 0.0f : ld_f16(b + 82);
    for (int j = 0; j < 16; j++) {
        int h = j / 8, k = (j % 8) / 2, off = 16 * (j % 2);
        const uint8_t *q = qs + 32 * h + off;
        float *yj = y + 16 * j;
        if (three) {
            float dj = d * (float)(db_scale_q3_k(j, sc) - 32);
            for (int l = 0; l < 16; l++) {
                int v = (q[l] >> (2 * k) & 3) - (hm[off + l] >> (4 * h + k) & 1 ? 0 : 4);
                yj[l] = dj * (float)v;
            }
        } else {
            float dj = d * (float)(sc[j] & 0xF), mj = dmin * (float)(sc[j] >> 4);
            for (int l = 0; l < 16; l++) yj[l] = dj * (float)(q[l] >> (2 * k) & 3) - mj;
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
    case DB_Q4_1: dequant_q4_1(y, b); break;
    case DB_Q5_0: dequant_q5(y, b, 0); break;
    case DB_Q5_1: dequant_q5(y, b, 1); break;
    case DB_Q2_K: dequant_q23_k(y, b, 0); break;
    case DB_Q3_K: dequant_q23_k(y, b, 1); break;
    case DB_IQ4_NL: dequant_iq4_nl(y, b); break;
    case DB_IQ4_XS: dequant_iq4_xs(y, b); break;
    default: break; /* element types are not blocks */
    }
}
