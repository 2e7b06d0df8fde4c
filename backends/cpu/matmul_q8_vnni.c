/* matmul_q8_vnni.c — the integer matmul path (matmul_q8.h) with AVX-512 VNNI: compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c -ffp-contract=off, called
 * only where the CPU reports avx512vnni. Bitwise equal to db_matmul_q8_ref (test_quant_q8.c).
 *
 * Per 64-value chunk each (activation row, weight row) pair costs one vpdpbusd (64 products
 * summed in 16 int32 lanes), a conversion, one multiply of the lane scales and one fma into its
 * 16-lane f32 accumulator: the products never leave the integer unit, where the float path
 * dequantized every weight to f32 and made one fma per 16 values and row. vpdpbusd multiplies
 * unsigned by signed bytes, so the weights' codes are stored + an offset that makes them
 * unsigned (Q8_0 and the IQ4 levels + 128, Q6_K + 32, Q5_0 + 16, Q4_0 + 8, Q3_K + 4; the types
 * with mins need none) and each lane starts at minus the offset times the sum of its 4
 * activation codes (the quantizer's lane sums, shifted): the exact integer sum of code x
 * activation, as the reference. The 256-value types decode a block's 8 or 16 scales at once in
 * vector registers (unpack()).
 *
 * One row (a decode): each weight row is unpacked into registers and used at once (direct()).
 * More: a panel of RO = 4 weight rows x KC = 1024 values is unpacked once into
 * codes, lane scales and mins (panel_t, 9 KB: stays in L1) and read by every tile of 4 weight
 * rows x up to RN = 4 activation rows (16 accumulators); rows come in groups of up to 16 whose
 * accumulators wait in abuf between the K blocks, and a tile's 16 sums are reduced together
 * (store_tile()).
 *
 * The types with a scale per 32 values (db_q8_block_sums) are summed a block at a time:
 * the panel holds their codes 16 blocks side by side (transpose_blocks(), the layout of the
 * activations' qt), so a (row, weight row) pair's 8 vpdpbusd over a group leave lane i the
 * whole sum of block i, converted and scaled once (tile_blocks(): 8 integer and 3 float
 * operations a 512 values and pair, where the lane scales took 8 x 4); the one-row path reduces
 * 8 chunks' lane sums to the 16 block sums in registers (direct_blocks(), block_sums()). */
#include "config.h"
#include "matmul_q8.h"
#include "quant.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define RO 4
#define RN 4
#define KC 1024
#define GROUP 16
#define PF_ROWS 4 /* one-row path: how many weight rows ahead to prefetch */

typedef struct {
    uint8_t code[RO][KC];         /* unsigned codes: code + the type's offset */
    float scale[RO][KC / 4];      /* lane scales */
    float min[RO][KC / 32];       /* Q4_1 / Q5_1 / Q4_K / Q5_K: block mins */
} panel_t;

/* log2 of the offset the type's codes are stored with (unsigned for vpdpbusd), 0 for none:
 * Q8_0 and the IQ4 levels + 128, Q6_K + 32, Q5_0 + 16, Q4_0 + 8, Q3_K + 4 */
static inline int off_shift(db_dtype dt)
{
    switch (dt) {
    case DB_Q8_0: case DB_IQ4_NL: case DB_IQ4_XS: return 7;
    case DB_Q6_K: return 5;
    case DB_Q5_0: return 4;
    case DB_Q4_0: return 3;
    case DB_Q3_K: return 2;
    default: return 0;
    }
}

static inline int has_mins(db_dtype dt) { return dt == DB_Q4_K || dt == DB_Q5_K || dt == DB_Q4_1 || dt == DB_Q5_1; }

/* What one unpack gives: a chunk (types of 32-value blocks) or the 4 chunks of a 256-value
 * block (K types, IQ4_XS), so those decode their 8 or 16 scales once per block, in registers. */
#define UNIT(dt) (db_dtype_block(dt) == 32 ? 1 : 4)
typedef struct {
    __m512i code[4];
    __m512 scale[4];
    __m256 min;     /* the mins of the 8 blocks of 32 (K types) */
    float min2[2];  /* the mins of a chunk's 2 blocks (Q4_1, Q5_1) */
    float bd[2];    /* the scales of a chunk's 2 blocks (types of 32-value blocks) */
    __m256 bs;      /* the scales of the 8 blocks of 32 (Q4_K, Q5_K, IQ4_XS) */
} unit_t;

static inline float ld_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

static inline __m512i join(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* lane l of chunk cc takes value idx(cc, l) of the block's scale vector */
static inline __m512 spread(__m512 v, int per_chunk, int cc)
{
    const __m512i lane = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512i idx = per_chunk == 2 ? _mm512_add_epi32(lane, _mm512_set1_epi32(2 * cc))
                                 : _mm512_add_epi32(quarter, _mm512_set1_epi32(4 * cc));
    return _mm512_permutexvar_ps(idx, v);
}

/* the 32 bits of a little-endian u32 as 32 bytes 0 / 16, in bit order (Q5_0 / Q5_1's fifth bits) */
static inline __m256i fifth_bits(const uint8_t *p)
{
    uint32_t h;
    memcpy(&h, p, 4);
    const __m256i which = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                           3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)h), which), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));
}

/* two 16-byte nibble arrays (a block's values 0-15 low nibbles, 16-31 high) -> their 64 values,
 * through the IQ4 level table + 128 where iq */
static inline __m512i nibbles2(const uint8_t *q0, const uint8_t *q1, int iq)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                        _mm_loadu_si128((const __m128i *)q1), 1);
    __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (iq) {
        const __m256i lv = _mm256_broadcastsi128_si256(_mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129,
                                                                     (char)141, (char)153, (char)166, (char)181,
                                                                     (char)197, (char)217, (char)241));
        lo = _mm256_shuffle_epi8(lv, lo);
        hi = _mm256_shuffle_epi8(lv, hi);
    }
    return join(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

/* unit u of a weight row (layouts in quant.c; values exactly db_q8_unpack_chunk's, the codes
 * + the type's offset). pre (the per-lane one-row path: Q6_K, Q3_K): the lane scales come
 * multiplied by dx, the activation block's d: the products the kernels make per chunk, made
 * once per 256 values */
static inline __attribute__((always_inline)) void unpack(db_dtype dt, const uint8_t *row, int u, unit_t *w, int pre,
                                                         float dx)
{
    w->min = _mm256_setzero_ps(); /* the types without mins leave them 0 */
    w->min2[0] = w->min2[1] = 0.0f;
    w->bd[0] = w->bd[1] = 0.0f;
    w->bs = _mm256_setzero_ps();
    if (UNIT(dt) == 1) { /* blocks 2u and 2u + 1 */
        w->code[1] = w->code[2] = w->code[3] = _mm512_setzero_si512(); /* (unused) */
        static const int bytes[] = {[DB_Q8_0] = 34, [DB_Q4_0] = 18, [DB_Q4_1] = 20, [DB_Q5_0] = 22,
                                    [DB_Q5_1] = 24, [DB_IQ4_NL] = 18};
        const uint8_t *b0 = row + (size_t)(2 * u) * (size_t)bytes[dt], *b1 = b0 + bytes[dt];
        int with_min = dt == DB_Q4_1 || dt == DB_Q5_1, five = dt == DB_Q5_0 || dt == DB_Q5_1;
        int qs = (with_min ? 4 : 2) + (five ? 4 : 0);
        w->bd[0] = ld_f16(b0), w->bd[1] = ld_f16(b1);
        w->scale[0] = _mm512_insertf32x8(_mm512_set1_ps(w->bd[0]), _mm256_set1_ps(w->bd[1]), 1);
        if (with_min) w->min2[0] = -ld_f16(b0 + 2), w->min2[1] = -ld_f16(b1 + 2);
        if (dt == DB_Q8_0) {
            w->code[0] = _mm512_xor_si512(join(_mm256_loadu_si256((const __m256i *)(b0 + 2)), _mm256_loadu_si256((const __m256i *)(b1 + 2))),
                                          _mm512_set1_epi8((char)0x80));
            return;
        }
        w->code[0] = nibbles2(b0 + qs, b1 + qs, dt == DB_IQ4_NL);
        if (five) w->code[0] = _mm512_or_si512(w->code[0], join(fifth_bits(b0 + qs - 4), fifth_bits(b1 + qs - 4)));
        return;
    }
    if (dt == DB_Q4_K || dt == DB_Q5_K) {
        int five = dt == DB_Q5_K;
        const uint8_t *b = row + (size_t)u * (five ? 176 : 144);
        /* the 12 scale bytes -> 8 scales s_j (bytes 0-7) and 8 mins m_j (bytes 8-15), each
         * word's bytes at once (db_scale_min_k4's rule) */
        uint32_t t[3];
        memcpy(t, b + 4, 12);
        uint64_t sv = (t[0] & 0x3f3f3f3fu) | (uint64_t)((t[2] & 0x0f0f0f0fu) | ((t[0] >> 6) & 0x03030303u) << 4) << 32;
        uint64_t mv = (t[1] & 0x3f3f3f3fu) | (uint64_t)(((t[2] >> 4) & 0x0f0f0f0fu) | ((t[1] >> 6) & 0x03030303u) << 4) << 32;
        /* (in registers: bytes stored as two words and loaded as one would stall the load) */
        __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sv));
        __m256i m = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mv));
        __m512 sc = _mm512_castps256_ps512(w->bs = _mm256_mul_ps(_mm256_set1_ps(ld_f16(b)), _mm256_cvtepi32_ps(v)));
        w->min = _mm256_mul_ps(_mm256_set1_ps(ld_f16(b + 2)), _mm256_cvtepi32_ps(m));
        /* a chunk's 32 bytes in both halves (a broadcast load): low nibbles in the lower half,
         * high in the upper, by a shift count per half */
        const __m512i by_half = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1), m4z = _mm512_set1_epi8(15);
        const uint8_t *qs = b + (five ? 48 : 16);
        __m512i qh = five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 16))) : _mm512_setzero_si512();
        for (int cc = 0; cc < 4; cc++) {
            w->scale[cc] = spread(sc, 2, cc);
            __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * cc)));
            q = _mm512_and_si512(_mm512_srlv_epi16(q, by_half), m4z);
            if (five) { /* bit 2cc of qh for the lower half, 2cc + 1 for the upper, as 16 */
                __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * cc)), _mm256_set1_epi16((short)(2 * cc + 1)), 1);
                __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(qh, sh), _mm512_set1_epi8(1));
                q = _mm512_or_si512(q, _mm512_slli_epi16(bit, 4));
            }
            w->code[cc] = q;
        }
        return;
    }
    if (dt == DB_IQ4_XS) { /* sub-blocks 2cc, 2cc + 1: 16 bytes each, IQ4_NL's nibble order */
        const uint8_t *b = row + (size_t)u * 136;
        unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
        __m256i s = _mm256_setr_epi32(db_scale_iq4_xs(0, sh, b + 4), db_scale_iq4_xs(1, sh, b + 4), db_scale_iq4_xs(2, sh, b + 4),
                                      db_scale_iq4_xs(3, sh, b + 4), db_scale_iq4_xs(4, sh, b + 4), db_scale_iq4_xs(5, sh, b + 4),
                                      db_scale_iq4_xs(6, sh, b + 4), db_scale_iq4_xs(7, sh, b + 4));
        w->bs = _mm256_mul_ps(_mm256_set1_ps(ld_f16(b)), _mm256_cvtepi32_ps(_mm256_sub_epi32(s, _mm256_set1_epi32(32))));
        __m512 sc = _mm512_castps256_ps512(w->bs);
        for (int cc = 0; cc < 4; cc++) {
            w->scale[cc] = spread(sc, 2, cc);
            w->code[cc] = nibbles2(b + 8 + 32 * cc, b + 24 + 32 * cc, 1);
        }
        return;
    }
    if (dt == DB_Q3_K) { /* chunk cc: groups g = 2cc + t of 32, h = cc / 2, k = g % 4; codes + 4 */
        const uint8_t *b = row + (size_t)u * 110;
        _Alignas(64) int32_t s[16];
        for (int j = 0; j < 16; j++) s[j] = db_scale_q3_k(j, b + 96) - 32;
        __m512 sc = _mm512_mul_ps(_mm512_set1_ps(ld_f16(b + 108)), _mm512_cvtepi32_ps(_mm512_load_si512(s)));
        if (pre) sc = _mm512_mul_ps(sc, _mm512_set1_ps(dx));
        const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
        __m256i hm = _mm256_loadu_si256((const __m256i *)b);
        for (int cc = 0; cc < 4; cc++) {
            int h = cc >> 1;
            __m256i qv = _mm256_loadu_si256((const __m256i *)(b + 32 + 32 * h)), q[2];
            w->scale[cc] = spread(sc, 4, cc);
            for (int t = 0; t < 2; t++) {
                int k = (2 * cc + t) & 3;
                __m256i low = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * k), m3);
                __m256i bit = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
                q[t] = _mm256_add_epi8(low, _mm256_slli_epi16(bit, 2));
            }
            w->code[cc] = join(q[0], q[1]);
        }
        return;
    }
    /* Q6_K: chunk cc is quarters k0 = 2 (cc & 1), k0 + 1 of half cc >> 1; its lanes take the
     * scales 4cc .. 4cc + 3, four lanes each; codes + 32 */
    const uint8_t *b = row + (size_t)u * 210;
    __m512 sc = _mm512_mul_ps(_mm512_set1_ps(ld_f16(b + 208)),
                              _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 192)))));
    if (pre) sc = _mm512_mul_ps(sc, _mm512_set1_ps(dx));
    const __m512i m3 = _mm512_set1_epi8(3), m4z = _mm512_set1_epi8(15);
    for (int cc = 0; cc < 4; cc++) {
        /* the lower half's values are ql[0..31] of the half, the upper half's ql[32..63]: one
         * load; qh's 32 bytes in both halves, shifted by 2k0 and 2k0 + 2 */
        int half = cc >> 1, k0 = 2 * (cc & 1);
        __m512i l = _mm512_loadu_si512(b + 64 * half);
        l = _mm512_and_si512(k0 ? _mm512_srli_epi16(l, 4) : l, m4z);
        __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 128 + 32 * half)));
        __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * k0)), _mm256_set1_epi16((short)(2 * k0 + 2)), 1);
        h = _mm512_and_si512(_mm512_srlv_epi16(h, sh), m3);
        w->scale[cc] = spread(sc, 4, cc);
        w->code[cc] = _mm512_or_si512(l, _mm512_slli_epi16(h, 4));
    }
}

/* the lane start of an activation chunk: minus the offset times the lane's code sum */
static inline __attribute__((always_inline)) __m512i xoff(db_dtype dt, const int32_t *nx, int c)
{
    return off_shift(dt) ? _mm512_slli_epi32(_mm512_loadu_si512(nx + 16 * c), (unsigned)off_shift(dt))
                         : _mm512_setzero_si512();
}

static inline float hsum16(__m512 v)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

static inline float hsum8(__m256 a)
{
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/* R activation rows (xr[r] their codes, dr[r] their lane scales, nx[r] their lane sums, from
 * value k0) against the 4 panel rows over nc chunks; acc[o * RN + r] */
static inline __attribute__((always_inline)) void tile(int R, db_dtype dt, __m512 *acc, const panel_t *p,
                                                       const int8_t *const *xr, const float *const *dr,
                                                       const int32_t *const *nx, int nc)
{
    __m512 a[RO * RN];
    for (int o = 0; o < RO; o++)
        for (int r = 0; r < R; r++) a[o * RN + r] = acc[o * RN + r];
    for (int c = 0; c < nc; c++) {
        __m512i xv[RN], off[RN];
        for (int r = 0; r < R; r++) xv[r] = _mm512_loadu_si512(xr[r] + 64 * c), off[r] = xoff(dt, nx[r], c);
        for (int o = 0; o < RO; o++) {
            __m512i wv = _mm512_load_si512(p->code[o] + 64 * c);
            __m512 sv = _mm512_load_ps(p->scale[o] + 16 * c);
            for (int r = 0; r < R; r++) {
                __m512 t = _mm512_mul_ps(sv, _mm512_loadu_ps(dr[r] + 16 * c));
                a[o * RN + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off[r], wv, xv[r])), t, a[o * RN + r]);
            }
        }
    }
    for (int o = 0; o < RO; o++)
        for (int r = 0; r < R; r++) acc[o * RN + r] = a[o * RN + r];
}

/* ---- weights of 32-value blocks: one conversion and fma a block (matmul_q8.h) ---- */

/* lanes 0-7: the sums of a's adjacent lane pairs, 8-15: b's */
static inline __m512i pair_sums(__m512i a, __m512i b)
{
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, ev, b), _mm512_permutex2var_epi32(a, od, b));
}

/* 8 chunks' lane sums (chunk cc: block 2cc in lanes 0-7, 2cc + 1 in 8-15) -> the 16 block
 * sums, lane i block i (integer sums: exact in any order) */
static inline __m512i block_sums(const __m512i *v)
{
    __m512i w0 = pair_sums(v[0], v[1]), w1 = pair_sums(v[2], v[3]), w2 = pair_sums(v[4], v[5]), w3 = pair_sums(v[6], v[7]);
    return pair_sums(pair_sums(w0, w1), pair_sums(w2, w3));
}

/* The one-row path: each weight row's chunks as direct()'s, a group of 8 chunks' lane sums
 * reduced to 16 block sums (block_sums), scaled and added into the lanes of their blocks */
static inline __attribute__((always_inline)) void direct_blocks(db_dtype dt, float *y, const db_q8_rows *xq, const void *w,
                                                                int o0, int o1, int accumulate)
{
    const int I = xq->I, nbk = I / 32, mins = has_mins(dt), U = UNIT(dt);
    const size_t rb = db_dtype_bytes(dt, (size_t)I);
    for (int o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)o * rb;
        if (o + PF_ROWS < o1)
            for (size_t k = 0; k < rb; k += 64) _mm_prefetch((const char *)(row + PF_ROWS * rb + k), _MM_HINT_T0);
        __m512 a = _mm512_setzero_ps();
        __m256 m = _mm256_setzero_ps();
        _Alignas(32) float mn8[8];
        for (int g = 0; 16 * g < nbk; g++) {
            int nb = nbk - 16 * g < 16 ? nbk - 16 * g : 16;
            __mmask16 k = (__mmask16)((1u << nb) - 1);
            __m512i v[8];
            __m512 ws;
            if (U == 1) { /* chunks 8g .. 8g + 7 */
                for (int cc = 0; cc < 8; cc++) {
                    int u = 8 * g + cc;
                    v[cc] = _mm512_setzero_si512();
                    if (2 * cc >= nb) continue;
                    unit_t wu;
                    unpack(dt, row, u, &wu, 0, 0.0f);
                    v[cc] = _mm512_dpbusd_epi32(v[cc], wu.code[0], _mm512_loadu_si512(xq->q + 64 * u));
                    if (!mins) continue;
                    mn8[(2 * u) % 8] = wu.min2[0], mn8[(2 * u + 1) % 8] = wu.min2[1];
                    if (u % 4 == 3) m = _mm256_fmadd_ps(_mm256_load_ps(mn8), _mm256_loadu_ps(xq->s + 2 * (u - 3)), m);
                }
                /* the 16 blocks' f16 scales, each the first 2 bytes of its block */
                const int bb = (int)db_dtype_bytes(dt, 32);
                __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(bb));
                __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, row + (size_t)bb * 16 * g, 1);
                ws = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
            } else { /* units 2g, 2g + 1 */
                __m256 bs[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
                for (int hu = 0; hu < 2; hu++) {
                    int u = 2 * g + hu;
                    for (int e = 0; e < 4; e++) v[4 * hu + e] = _mm512_setzero_si512();
                    if (8 * hu >= nb) continue;
                    unit_t wu;
                    unpack(dt, row, u, &wu, 0, 0.0f);
                    for (int e = 0; e < 4; e++)
                        v[4 * hu + e] = _mm512_dpbusd_epi32(v[4 * hu + e], wu.code[e], _mm512_loadu_si512(xq->q + 64 * (4 * u + e)));
                    bs[hu] = wu.bs;
                    if (mins) m = _mm256_fmadd_ps(wu.min, _mm256_loadu_ps(xq->s + 8 * u), m);
                }
                ws = _mm512_insertf32x8(_mm512_castps256_ps512(bs[0]), bs[1], 1);
            }
            __m512 t = _mm512_mul_ps(ws, _mm512_maskz_loadu_ps(k, xq->db + 16 * g));
            __m512i is = block_sums(v); /* then the codes' offset, a block at a time */
            if (off_shift(dt)) is = _mm512_add_epi32(is, _mm512_slli_epi32(_mm512_maskz_loadu_epi32(k, xq->nb + 16 * g), (unsigned)off_shift(dt)));
            a = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(is), t, a, k);
        }
        float v = hsum16(a);
        if (mins) v = v - hsum8(m);
        y[o] = accumulate ? y[o] + v : v;
    }
}

/* The panel's codes of 16 blocks side by side (db_q8_rows.qt's layout): c[cc] the group's chunk
 * cc; out vector j lane i = dword j of block i = dword 8 (i % 2) + j of chunk i / 2. Three
 * butterfly stages each swap one bit of the vector index with one of the lane index (vector cc,
 * lane 8h + j -> vector j, lane 8h + cc), then lane 8h + cc moves to 2cc + h. */
typedef struct {
    __m512i a[3], b[3], fix;
} transpose_idx;

static void transpose_idx_init(transpose_idx *t)
{
    _Alignas(64) int32_t ia[16], ib[16], fx[16];
    for (int k = 0; k < 3; k++) {
        for (int l = 0; l < 16; l++) {
            int bit = l >> k & 1;
            ia[l] = bit ? 16 + (l ^ (1 << k)) : l;
            ib[l] = bit ? 16 + l : l | (1 << k);
        }
        t->a[k] = _mm512_load_si512(ia);
        t->b[k] = _mm512_load_si512(ib);
    }
    for (int i = 0; i < 16; i++) fx[i] = 8 * (i & 1) + (i >> 1);
    t->fix = _mm512_load_si512(fx);
}

static inline void transpose_blocks(const transpose_idx *t, __m512i *v, uint8_t *out)
{
    for (int k = 0; k < 3; k++)
        for (int x = 0; x < 8; x++)
            if (!(x >> k & 1)) {
                __m512i a = v[x], b = v[x | 1 << k];
                v[x] = _mm512_permutex2var_epi32(a, t->a[k], b);
                v[x | 1 << k] = _mm512_permutex2var_epi32(a, t->b[k], b);
            }
    for (int j = 0; j < 8; j++) _mm512_store_si512(out + 64 * j, _mm512_permutexvar_epi32(t->fix, v[j]));
}

/* R activation rows from r0 (their qt) against the panel's 4 weight rows of transposed codes
 * (p->code[o] + 512 gl: group gl of the K block from k0, nc chunks) and block scales
 * (p->scale[o][16 gl + i]): per group, each (row, weight row) pair's 8 vpdpbusd sum 16 blocks
 * in the integer unit; acc[o * RN + r] in memory */
static inline __attribute__((always_inline)) void tile_blocks(int R, db_dtype dt, __m512 *acc, const panel_t *p,
                                                              const db_q8_rows *xq, int r0, int k0, int nc)
{
    const int I = xq->I, nbk = I / 32;
    const size_t S = ((size_t)I + 511) & ~(size_t)511;
    for (int gl = 0; 8 * gl < nc; gl++) {
        int g = k0 / 512 + gl, nb = nbk - 16 * g < 16 ? nbk - 16 * g : 16;
        __mmask16 k = (__mmask16)((1u << nb) - 1);
        __m512i ai[RO * RN], x0[RN];
        for (int r = 0; r < R; r++) {
            __m512i nb0 = _mm512_maskz_loadu_epi32(k, xq->nb + (size_t)(r0 + r) * nbk + 16 * g);
            x0[r] = off_shift(dt) ? _mm512_slli_epi32(nb0, (unsigned)off_shift(dt)) : _mm512_setzero_si512();
        }
        for (int o = 0; o < RO; o++)
            for (int r = 0; r < R; r++) ai[o * RN + r] = x0[r];
        for (int j = 0; j < 8; j++) {
            __m512i xv[RN];
            for (int r = 0; r < R; r++) xv[r] = _mm512_loadu_si512(xq->qt + (size_t)(r0 + r) * S + 512 * g + 64 * j);
            for (int o = 0; o < RO; o++) {
                __m512i wv = _mm512_load_si512(p->code[o] + 512 * gl + 64 * j);
                for (int r = 0; r < R; r++) ai[o * RN + r] = _mm512_dpbusd_epi32(ai[o * RN + r], wv, xv[r]);
            }
        }
        for (int r = 0; r < R; r++) {
            __m512 dv = _mm512_maskz_loadu_ps(k, xq->db + (size_t)(r0 + r) * nbk + 16 * g);
            for (int o = 0; o < RO; o++) {
                __m512 t = _mm512_mul_ps(_mm512_load_ps(p->scale[o] + 16 * gl), dv);
                acc[o * RN + r] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(ai[o * RN + r]), t, acc[o * RN + r], k);
            }
        }
    }
}

/* R rows against weight rows one at a time, each unit unpacked into registers and used at
 * once: the path of a decode (R = 1), where a panel would be written for one read. Only the
 * per-lane types come here (Q6_K, Q3_K: no mins); the others take direct_blocks() */
static inline __attribute__((always_inline)) void direct(int R, db_dtype dt, float *y, const db_q8_rows *xq,
                                                         const void *w, int O, int o0, int o1, int accumulate)
{
    const int I = xq->I, U = UNIT(dt);
    const size_t rb = db_dtype_bytes(dt, (size_t)I);
    for (int o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)o * rb;
        if (o + PF_ROWS < o1) /* the row PF_ROWS ahead, from memory while this one computes */
            for (size_t k = 0; k < rb; k += 64) _mm_prefetch((const char *)(row + PF_ROWS * rb + k), _MM_HINT_T0);
        __m512 a[RN];
        for (int r = 0; r < R; r++) a[r] = _mm512_setzero_ps();
        for (int u = 0; u < I / 64 / U; u++) {
            unit_t wu;
            /* the K types' activation block is their 256 values: one d for the unit */
            const int pre = U == 4;
            unpack(dt, row, u, &wu, pre, xq->dl[(size_t)16 * U * u]);
            for (int cc = 0; cc < U; cc++) {
                int c = U * u + cc;
                for (int r = 0; r < R; r++) {
                    __m512i xv = _mm512_loadu_si512(xq->q + (size_t)r * I + 64 * c);
                    __m512i is = _mm512_dpbusd_epi32(xoff(dt, xq->nx + (size_t)r * (I / 4), c), wu.code[cc], xv);
                    __m512 t = pre ? wu.scale[cc] : _mm512_mul_ps(wu.scale[cc], _mm512_loadu_ps(xq->dl + (size_t)r * (I / 4) + 16 * c));
                    a[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), t, a[r]);
                }
            }
        }
        for (int r = 0; r < R; r++) {
            float v = hsum16(a[r]);
            float *dst = y + (size_t)r * O + o;
            *dst = accumulate ? *dst + v : v;
        }
    }
}

/* The 16 accumulators of a tile (acc[o * RN + r]) summed by hsum16's tree, all at once: each step
 * adds the same lane pairs as hsum16 (halves 8 apart, then 4, 2, 1), two accumulators per
 * vector, so the sums are bitwise hsum16's; m[o * mstride + r] (K types' mins) the same from the
 * second step, as hsum8. The result's lane 4r + o is (row r, weight row o): row r's no values
 * go to y[r * O .. + no) in one masked store. */
static inline __m512 tree_halves(__m512 a, __m512 b)
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
}
static inline __m512 tree_quarters(__m512 a, __m512 b)
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}
static inline __m512 tree_pairs(__m512 a, __m512 b, int imm_lo)
{
    return imm_lo ? _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE))
                  : _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}
static inline __m512 tree_rest(const __m512 *x8)
{
    __m512 y4[4], z2[2];
    for (int k = 0; k < 4; k++) y4[k] = tree_quarters(x8[2 * k], x8[2 * k + 1]);
    for (int k = 0; k < 2; k++) z2[k] = tree_pairs(y4[2 * k], y4[2 * k + 1], 1);
    return tree_pairs(z2[0], z2[1], 0);
}

static inline void store_tile(const __m512 *acc, const __m256 *m, int mstride, float *y, int O, int R, int no,
                              int accumulate)
{
    __m512 x8[8];
    for (int k = 0; k < 8; k++) x8[k] = tree_halves(acc[2 * k], acc[2 * k + 1]);
    __m512 v = tree_rest(x8);
    if (m) {
        /* accumulator i = o * RN + r; its mins vector m[o * mstride + r] */
        for (int k = 0; k < 8; k++) {
            int i = 2 * k;
            x8[k] = _mm512_insertf32x8(_mm512_castps256_ps512(m[(i / RN) * mstride + i % RN]),
                                       m[((i + 1) / RN) * mstride + (i + 1) % RN], 1);
        }
        v = _mm512_sub_ps(v, tree_rest(x8));
    }
    __mmask16 keep = (__mmask16)((1u << no) - 1);
    for (int r = 0; r < R; r++) {
        __m128 s = _mm512_extractf32x4_ps(v, 0);
        if (r == 1) s = _mm512_extractf32x4_ps(v, 1);
        if (r == 2) s = _mm512_extractf32x4_ps(v, 2);
        if (r == 3) s = _mm512_extractf32x4_ps(v, 3);
        float *dst = y + (size_t)r * O;
        if (accumulate) s = _mm_add_ps(_mm_maskz_loadu_ps(keep, dst), s);
        _mm_mask_storeu_ps(dst, keep, s);
    }
}

static inline __attribute__((always_inline)) void run(db_dtype dt, float *y, const db_q8_rows *xq,
                                                      const void *w, int n, int O, int o0, int o1,
                                                      int accumulate)
{
    /* one row: no panel (measured: 1.0-1.3x the panel path for the K types, within 5% for
     * the others); from 2 rows the panel's 4 weight rows per tile win (at 4 rows 1.1-1.4x) */
    if (n == 1) {
        if (db_q8_block_sums(dt)) direct_blocks(dt, y, xq, w, o0, o1, accumulate);
        else direct(1, dt, y, xq, w, O, o0, o1, accumulate);
        return;
    }
    const int blocks = db_q8_block_sums(dt);
    transpose_idx tix;
    if (blocks) transpose_idx_init(&tix);
    const int I = xq->I, U = UNIT(dt), mins = has_mins(dt);
    const size_t rb = db_dtype_bytes(dt, (size_t)I);
    _Alignas(64) panel_t p;
    _Alignas(64) __m512 abuf[GROUP / RN][RO * RN];
    _Alignas(32) __m256 mbuf[RO][GROUP];
    for (int ob = o0; ob < o1; ob += RO) {
        const uint8_t *rows[RO];
        for (int o = 0; o < RO; o++)
            rows[o] = (const uint8_t *)w + (size_t)(ob + o < o1 ? ob + o : o1 - 1) * rb;
        if (ob + 2 * RO <= o1) /* the next panel's rows, from memory while this one computes */
            for (size_t k = 0; k < RO * rb; k += 64) _mm_prefetch((const char *)(rows[0] + RO * rb + k), _MM_HINT_T0);
        for (int g0 = 0; g0 < n; g0 += GROUP) {
            int ng = n - g0 < GROUP ? n - g0 : GROUP, nt = (ng + RN - 1) / RN;
            for (int t = 0; t < nt; t++)
                for (int i = 0; i < RO * RN; i++) abuf[t][i] = _mm512_setzero_ps();
            for (int o = 0; o < RO; o++)
                for (int r = 0; r < ng; r++) mbuf[o][r] = _mm256_setzero_ps();
            for (int k0 = 0; k0 < I; k0 += KC) {
                int nc = (I - k0 < KC ? I - k0 : KC) / 64;
                for (int o = 0; o < RO && blocks; o++) /* codes side by side, a scale a block */
                    for (int gl = 0; 8 * gl < nc; gl++) {
                        __m512i v[8];
                        float *sc = p.scale[o] + 16 * gl;
                        for (int cc = 0; cc < 8 && U == 1; cc++) {
                            int u = 8 * gl + cc;
                            sc[2 * cc] = sc[2 * cc + 1] = 0.0f;
                            v[cc] = _mm512_setzero_si512();
                            if (u >= nc) continue;
                            unit_t wu;
                            unpack(dt, rows[o], k0 / 64 + u, &wu, 0, 0.0f);
                            v[cc] = wu.code[0];
                            sc[2 * cc] = wu.bd[0], sc[2 * cc + 1] = wu.bd[1];
                            if (mins) p.min[o][2 * u] = wu.min2[0], p.min[o][2 * u + 1] = wu.min2[1];
                        }
                        for (int cc = 0; cc < 8 && U == 4; cc += U) {
                            int c = 8 * gl + cc; /* the chunk in the K block */
                            for (int e = 0; e < U; e++) v[cc + e] = _mm512_setzero_si512();
                            for (int e = 0; e < 2 * U; e++) sc[2 * cc + e] = 0.0f;
                            if (c >= nc) continue;
                            unit_t wu;
                            unpack(dt, rows[o], (k0 / 64 + c) / U, &wu, 0, 0.0f);
                            for (int e = 0; e < U; e++) v[cc + e] = wu.code[e];
                            if (U == 4) _mm256_storeu_ps(sc + 2 * cc, wu.bs);
                            else sc[2 * cc] = wu.bd[0], sc[2 * cc + 1] = wu.bd[1];
                            if (mins && U == 4) _mm256_storeu_ps(p.min[o] + 2 * c, wu.min);
                            if (mins && U == 1) p.min[o][2 * c] = wu.min2[0], p.min[o][2 * c + 1] = wu.min2[1];
                        }
                        transpose_blocks(&tix, v, p.code[o] + 512 * gl);
                    }
                for (int o = 0; o < RO && !blocks; o++)
                    for (int u = 0; u < nc / U; u++) {
                        unit_t wu;
                        unpack(dt, rows[o], k0 / 64 / U + u, &wu, 0, 0.0f);
                        for (int cc = 0; cc < U; cc++) {
                            int c = U * u + cc;
                            _mm512_store_si512(p.code[o] + 64 * c, wu.code[cc]);
                            _mm512_store_ps(p.scale[o] + 16 * c, wu.scale[cc]);
                        }
                    }
                for (int t = 0; t < nt; t++) {
                    int r0 = g0 + RN * t, R = ng - RN * t < RN ? ng - RN * t : RN;
                    const int8_t *xr[RN];
                    const float *dr[RN];
                    const int32_t *nx[RN];
                    for (int r = 0; r < R; r++) {
                        xr[r] = xq->q + (size_t)(r0 + r) * I + k0;
                        dr[r] = xq->dl + (size_t)(r0 + r) * (I / 4) + k0 / 4;
                        nx[r] = xq->nx + (size_t)(r0 + r) * (I / 4) + k0 / 4;
                    }
                    if (blocks) {
                        switch (R) {
                        case 4: tile_blocks(4, dt, abuf[t], &p, xq, r0, k0, nc); break;
                        case 3: tile_blocks(3, dt, abuf[t], &p, xq, r0, k0, nc); break;
                        case 2: tile_blocks(2, dt, abuf[t], &p, xq, r0, k0, nc); break;
                        default: tile_blocks(1, dt, abuf[t], &p, xq, r0, k0, nc); break;
                        }
                        continue;
                    }
                    switch (R) {
                    case 4: tile(4, dt, abuf[t], &p, xr, dr, nx, nc); break;
                    case 3: tile(3, dt, abuf[t], &p, xr, dr, nx, nc); break;
                    case 2: tile(2, dt, abuf[t], &p, xr, dr, nx, nc); break;
                    default: tile(1, dt, abuf[t], &p, xr, dr, nx, nc); break;
                    }
                }
                if (mins) /* m_j over the K block's blocks, 8 at a time */
                    for (int r = 0; r < ng; r++) {
                        const float *s = xq->s + (size_t)(g0 + r) * (I / 32) + k0 / 32;
                        for (int o = 0; o < RO; o++)
                            for (int b = 0; b < nc * 2; b += 8)
                                mbuf[o][r] = _mm256_fmadd_ps(_mm256_load_ps(p.min[o] + b), _mm256_loadu_ps(s + b), mbuf[o][r]);
                    }
            }
            int no = o1 - ob < RO ? o1 - ob : RO;
            for (int t = 0; t < nt; t++) {
                int R = ng - RN * t < RN ? ng - RN * t : RN;
                store_tile(abuf[t], mins ? &mbuf[0][RN * t] : NULL, GROUP, y + (size_t)(g0 + RN * t) * O + ob, O, R, no,
                           accumulate);
            }
        }
    }
}

void db_matmul_q8_vnni(float *y, const db_q8_rows *xq, const void *w, db_dtype dt, int n, int O,
                       int o0, int o1, int accumulate)
{
    switch (dt) {
#define CASE(T) case T: run(T, y, xq, w, n, O, o0, o1, accumulate); break
    CASE(DB_Q8_0); CASE(DB_Q4_0); CASE(DB_Q4_1); CASE(DB_Q5_0); CASE(DB_Q5_1); CASE(DB_IQ4_NL);
    CASE(DB_Q4_K); CASE(DB_Q5_K); CASE(DB_Q6_K); CASE(DB_Q3_K); CASE(DB_IQ4_XS);
#undef CASE
    default: db_matmul_q8_ref(y, xq, w, dt, n, O, o0, o1, accumulate); break;
    }
}

/* db_q8_quantize_ref with 16 lanes: the same max, division, products and rounding (to
 * nearest even), each an exactly rounded IEEE operation */
void db_q8_quantize_vnni(db_q8_rows *xq, const float *x, int r0, int r1)
{
    const int I = xq->I, qb = xq->qb;
    const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int r = r0; r < r1; r++)
        for (int b = 0; b < I / qb; b++) {
            const float *xb = x + (size_t)r * I + (size_t)qb * b;
            __m512 mx = _mm512_setzero_ps(), z = _mm512_setzero_ps();
            for (int k = 0; k < qb; k += 16) {
                __m512 v = _mm512_loadu_ps(xb + k);
                mx = _mm512_max_ps(mx, _mm512_and_ps(v, absm));
                z = _mm512_add_ps(z, _mm512_mul_ps(v, _mm512_setzero_ps()));
            }
            float amax = _mm512_reduce_max_ps(mx), d = 0.0f, scale = 0.0f;
            if (_mm512_cmp_ps_mask(z, z, _CMP_UNORD_Q)) {
                d = NAN;
            } else if (amax != 0.0f && qb == 32) {
                d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, 0));
                scale = 127.0f / amax;
            } else if (amax != 0.0f) { /* the first value of that magnitude */
                float m = 0.0f;
                for (int k = 0; k < qb; k += 16) {
                    __mmask16 hit = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(xb + k), absm), _mm512_set1_ps(amax), _CMP_EQ_OQ);
                    if (hit) {
                        m = xb[k + __builtin_ctz(hit)];
                        break;
                    }
                }
                scale = -127.0f / m;
                d = 1.0f / scale;
            }
            int8_t *q = xq->q + (size_t)r * I + (size_t)qb * b;
            for (int k = 0; k < qb; k += 16) {
                __m512i v = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + k), _mm512_set1_ps(scale)),
                                                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
                if (scale == 0.0f) v = _mm512_setzero_si512(); /* NaN x 0 would convert to INT_MIN */
                _mm_storeu_si128((__m128i *)(q + k), _mm512_cvtsepi32_epi8(_mm512_min_epi32(v, _mm512_set1_epi32(127))));
            }
            for (int j = 0; j < qb / 32; j++) { /* each block of 32: its lane sums, scales, sum */
                __m256i q8 = _mm256_loadu_si256((const __m256i *)(q + 32 * j));
                size_t lane = (size_t)r * (I / 4) + (size_t)(qb / 4) * b + 8 * j;
                __m256i s4 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), q8);
                _mm256_storeu_si256((__m256i *)(xq->nx + lane), _mm256_sub_epi32(_mm256_setzero_si256(), s4));
                _mm256_storeu_ps(xq->dl + lane, _mm256_set1_ps(d));
                __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
                t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
                t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
                xq->s[(size_t)r * (I / 32) + (size_t)(qb / 32) * b + j] = d * (float)_mm_cvtsi128_si32(t);
            }
        }
    for (int r = r0; r < r1; r++) db_q8_blocks_fill(xq, r);
}
