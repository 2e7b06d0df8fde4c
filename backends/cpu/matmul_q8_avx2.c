/* matmul_q8_avx2.c — the integer matmul path (matmul_q8.h) with AVX2, for x86 CPUs without
 * AVX-512 VNNI: compiled with -mavx2 -mfma -mf16c -ffp-contract=off. Bitwise equal to
 * db_matmul_q8_ref (tests/test_quant_q8.c).
 *
 * A 64-value chunk is two 256-bit halves (lanes 0-7, 8-15). The integer sums: vpmaddubsw
 * multiplies unsigned codes by signed activation bytes and adds pairs into 16 bits (at most
 * 2 x 63 x 127 for Q6_K's codes, 2 x 128 x 127 for Q8_0's magnitudes: no saturation), vpmaddwd
 * with ones adds those pairs into the lane's 32-bit sum of 4. Signed codes (Q8_0, the IQ4
 * levels) go in as their magnitudes with the activations' signs flipped where the code is
 * negative (vpsignb); Q3_K / Q4_0 / Q5_0 / Q6_K's unsigned codes (code + 4 / 8 / 16 / 32) have
 * the lane's offset x its activation sum subtracted, as in the VNNI kernel. Weights of 32-value
 * blocks sum each block's lanes in integers (tile_blocks). One weight row's K block is unpacked into a panel (codes, lane
 * scales, mins) and every group of RN = 4 activation rows runs over it: 8 accumulators, within
 * AVX2's 16 registers. */
#include "config.h"
#include "matmul_q8.h"
#include "quant.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define RN 4
#define KC 1024

typedef struct {
    int8_t code[KC];      /* Q8_0: signed; others: unsigned */
    float scale[KC / 4];  /* lane scales */
    float min[KC / 32];   /* Q4_K / Q5_K: block mins */
} panel_t;

static inline float ld_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* signed codes through vpsignb (Q8_0, the IQ4 levels), else unsigned codes + 2^shift */
static inline int signed_codes(db_dtype dt) { return dt == DB_Q8_0 || dt == DB_IQ4_NL || dt == DB_IQ4_XS; }
static inline int off_shift(db_dtype dt)
{
    return dt == DB_Q6_K ? 5 : dt == DB_Q5_0 ? 4 : dt == DB_Q4_0 ? 3 : dt == DB_Q3_K ? 2 : 0;
}
static inline int has_mins(db_dtype dt) { return dt == DB_Q4_K || dt == DB_Q5_K || dt == DB_Q4_1 || dt == DB_Q5_1; }

/* a 32-value block's 16 nibble bytes -> its 32 values (low nibbles first), through the IQ4
 * levels where iq */
static inline __m256i nibbles(const uint8_t *qs, int iq)
{
    const __m128i m4 = _mm_set1_epi8(15);
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m128i lo = _mm_and_si128(q, m4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
    if (iq) {
        const __m128i lv = _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
        lo = _mm_shuffle_epi8(lv, lo);
        hi = _mm_shuffle_epi8(lv, hi);
    }
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* bit i of the little-endian u32 at p as byte i, 0 / 16 */
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

/* chunks [c0, c0 + nc) of a weight row into the panel (values exactly db_q8_unpack_chunk's, the
 * unsigned types' codes + their offset) */
static inline __attribute__((always_inline)) void unpack(db_dtype dt, const uint8_t *row, int c0, int nc,
                                                         panel_t *p)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int c = 0; c < nc; c++) {
        int8_t *code = p->code + 64 * c;
        float *scale = p->scale + 16 * c;
        int cg = c0 + c;
        if (db_dtype_block(dt) == 32) {
            static const int bytes[] = {[DB_Q8_0] = 34, [DB_Q4_0] = 18, [DB_Q4_1] = 20, [DB_Q5_0] = 22,
                                        [DB_Q5_1] = 24, [DB_IQ4_NL] = 18};
            int with_min = dt == DB_Q4_1 || dt == DB_Q5_1, five = dt == DB_Q5_0 || dt == DB_Q5_1;
            int qs = (with_min ? 4 : 2) + (five ? 4 : 0);
            for (int h = 0; h < 2; h++) {
                const uint8_t *b = row + (size_t)(2 * cg + h) * (size_t)bytes[dt];
                _mm256_store_ps(scale + 8 * h, _mm256_set1_ps(ld_f16(b)));
                if (with_min) p->min[2 * c + h] = -ld_f16(b + 2);
                __m256i q = dt == DB_Q8_0 ? _mm256_loadu_si256((const __m256i *)(b + 2)) : nibbles(b + qs, dt == DB_IQ4_NL);
                if (five) q = _mm256_or_si256(q, fifth_bits(b + qs - 4));
                _mm256_store_si256((__m256i *)(code + 32 * h), q);
            }
            continue;
        }
        int cc = cg & 3;
        if (dt == DB_Q4_K || dt == DB_Q5_K) {
            int five = dt == DB_Q5_K, s[2], m[2];
            const uint8_t *b = row + (size_t)(cg >> 2) * (five ? 176 : 144);
            float d = ld_f16(b), dmin = ld_f16(b + 2);
            for (int h = 0; h < 2; h++) {
                db_scale_min_k4(2 * cc + h, b + 4, &s[h], &m[h]);
                _mm256_store_ps(scale + 8 * h, _mm256_set1_ps(d * (float)s[h]));
                p->min[2 * c + h] = dmin * (float)m[h];
            }
            __m256i q = _mm256_loadu_si256((const __m256i *)(b + (five ? 48 : 16) + 32 * cc));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16)), sixteen = _mm256_set1_epi8(16);
                __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * cc))), b1 = _mm256_set1_epi8((char)(1 << (2 * cc + 1)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), sixteen));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), sixteen));
            }
            _mm256_store_si256((__m256i *)code, lo);
            _mm256_store_si256((__m256i *)(code + 32), hi);
            continue;
        }
        if (dt == DB_IQ4_XS) { /* sub-blocks 2cc, 2cc + 1 */
            const uint8_t *b = row + (size_t)(cg >> 2) * 136;
            unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
            for (int h = 0; h < 2; h++) {
                int j = 2 * cc + h;
                _mm256_store_ps(scale + 8 * h, _mm256_set1_ps(ld_f16(b) * (float)(db_scale_iq4_xs(j, sh, b + 4) - 32)));
                _mm256_store_si256((__m256i *)(code + 32 * h), nibbles(b + 8 + 16 * j, 1));
            }
            continue;
        }
        if (dt == DB_Q3_K) { /* groups g = 2cc + t of 32, h = cc / 2, k = g % 4; codes + 4 */
            const uint8_t *b = row + (size_t)(cg >> 2) * 110;
            float d = ld_f16(b + 108);
            for (int l = 0; l < 16; l += 4) _mm_store_ps(scale + l, _mm_set1_ps(d * (float)(db_scale_q3_k(4 * cc + l / 4, b + 96) - 32)));
            int h = cc >> 1;
            __m256i qv = _mm256_loadu_si256((const __m256i *)(b + 32 + 32 * h)), hm = _mm256_loadu_si256((const __m256i *)b);
            for (int t = 0; t < 2; t++) {
                int k = (2 * cc + t) & 3;
                __m256i low = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * k), _mm256_set1_epi8(3));
                __m256i bit = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), _mm256_set1_epi8(1));
                _mm256_store_si256((__m256i *)(code + 32 * t), _mm256_add_epi8(low, _mm256_slli_epi16(bit, 2)));
            }
            continue;
        }
        /* Q6_K: quarters k0 = 2 (cc & 1), k0 + 1 of half cc >> 1; lane l's scale sc[4cc + l / 4] */
        const uint8_t *b = row + (size_t)(cg >> 2) * 210;
        int half = cc >> 1, k0 = 2 * (cc & 1);
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = ld_f16(b + 208);
        for (int l = 0; l < 16; l += 4) _mm_store_ps(scale + l, _mm_set1_ps(d * (float)sc[4 * cc + l / 4]));
        const uint8_t *ql = b + 64 * half;
        __m256i h = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * half));
        for (int t = 0; t < 2; t++) {
            int k = k0 + t;
            __m256i l = _mm256_loadu_si256((const __m256i *)(ql + 32 * (k & 1)));
            l = k >= 2 ? _mm256_and_si256(_mm256_srli_epi16(l, 4), m4) : _mm256_and_si256(l, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * k), _mm256_set1_epi8(3));
            _mm256_store_si256((__m256i *)(code + 32 * t), _mm256_or_si256(l, _mm256_slli_epi16(hi, 4)));
        }
    }
}

/* the lane sums of 4 code x activation products of one half chunk */
static inline __attribute__((always_inline)) __m256i dot(db_dtype dt, __m256i w, __m256i x, const int32_t *nx)
{
    const __m256i ones = _mm256_set1_epi16(1);
    if (signed_codes(dt)) return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)), ones);
    __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);
    if (off_shift(dt)) s = _mm256_add_epi32(s, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)nx), off_shift(dt)));
    return s;
}

static inline float hsum16(__m256 a0, __m256 a1)
{
    __m256 a = _mm256_add_ps(a0, a1);
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

/* R activation rows from r0 against the panel's nc chunks (K block from value k0); acc[2r + h]
 * lanes 8h..8h+7. Only the per-lane types come here (Q6_K, Q3_K: no mins); the others take
 * tile_blocks() */
static inline __attribute__((always_inline)) void tile(int R, db_dtype dt, const panel_t *p, const db_q8_rows *xq,
                                                       int r0, int k0, int nc, __m256 *acc)
{
    const int I = xq->I;
    __m256 a[2 * RN];
    for (int i = 0; i < 2 * R; i++) a[i] = acc[i];
    for (int c = 0; c < nc; c++)
        for (int h = 0; h < 2; h++) {
            __m256i w = _mm256_load_si256((const __m256i *)(p->code + 64 * c + 32 * h));
            __m256 sv = _mm256_load_ps(p->scale + 16 * c + 8 * h);
            for (int r = 0; r < R; r++) {
                size_t lane = (size_t)(r0 + r) * (I / 4) + k0 / 4 + 16 * c + 8 * h;
                __m256i x = _mm256_loadu_si256((const __m256i *)(xq->q + (size_t)(r0 + r) * I + k0 + 64 * c + 32 * h));
                __m256 t = _mm256_mul_ps(sv, _mm256_loadu_ps(xq->dl + lane));
                a[2 * r + h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot(dt, w, x, xq->nx + lane)), t, a[2 * r + h]);
            }
        }
    for (int i = 0; i < 2 * R; i++) acc[i] = a[i];
}

/* 8 vectors of one block's 8 lane sums each -> the 8 block sums, in order */
static inline __m256i sum8_blocks(const __m256i *D)
{
    __m256i a = _mm256_hadd_epi32(D[0], D[1]), b = _mm256_hadd_epi32(D[2], D[3]);
    __m256i c = _mm256_hadd_epi32(D[4], D[5]), d = _mm256_hadd_epi32(D[6], D[7]);
    /* e: [blocks 0-3: lanes 0-3 | blocks 0-3: lanes 4-7], f the same of blocks 4-7 */
    __m256i e = _mm256_hadd_epi32(a, b), f = _mm256_hadd_epi32(c, d);
    return _mm256_add_epi32(_mm256_permute2x128_si256(e, f, 0x20), _mm256_permute2x128_si256(e, f, 0x31));
}

/* Weights of 32-value blocks (matmul_q8.h): a half chunk is one block; 8 blocks' lane sums are
 * summed into 8 block sums (sum8_blocks), converted and scaled at once into the accumulator
 * holding lanes b % 16 (acc[2r + h], h = (b % 16) / 8: the 8 blocks from a multiple of 8 share
 * it). Blocks past the K block's add 0 (codes and scale 0). */
static inline __attribute__((always_inline)) void tile_blocks(int R, db_dtype dt, const panel_t *p,
                                                              const db_q8_rows *xq, int r0, int k0, int nc,
                                                              __m256 *acc, __m256 *m)
{
    const int I = xq->I, nbk = 2 * nc;
    for (int q = 0; q < nbk; q += 8) {
        int nq = nbk - q < 8 ? nbk - q : 8, h = ((k0 / 32 + q) % 16) / 8;
        _Alignas(32) float ws[8] = {0};
        for (int i = 0; i < nq; i++) ws[i] = p->scale[8 * (q + i)];
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(nq), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int r = 0; r < R; r++) {
            __m256i D[8];
            for (int i = 0; i < 8; i++) {
                int kk = 32 * (q + i);
                D[i] = i < nq ? dot(dt, _mm256_load_si256((const __m256i *)(p->code + kk)),
                                    _mm256_loadu_si256((const __m256i *)(xq->q + (size_t)(r0 + r) * I + k0 + kk)),
                                    xq->nx + (size_t)(r0 + r) * (I / 4) + (k0 + kk) / 4)
                              : _mm256_setzero_si256();
            }
            const float *db = xq->db + (size_t)(r0 + r) * (I / 32) + k0 / 32 + q;
            __m256 t = _mm256_mul_ps(_mm256_load_ps(ws), _mm256_maskload_ps(db, keep));
            acc[2 * r + h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum8_blocks(D)), t, acc[2 * r + h]);
        }
    }
    if (has_mins(dt)) /* m_j over the K block's blocks, 8 at a time */
        for (int r = 0; r < R; r++)
            for (int b = 0; b < nbk; b += 8)
                m[r] = _mm256_fmadd_ps(_mm256_load_ps(p->min + b),
                                       _mm256_loadu_ps(xq->s + (size_t)(r0 + r) * (I / 32) + k0 / 32 + b), m[r]);
}

static inline __attribute__((always_inline)) void run(db_dtype dt, float *y, const db_q8_rows *xq,
                                                      const void *w, int n, int O, int o0, int o1,
                                                      int accumulate)
{
    const int I = xq->I, mins = has_mins(dt);
    const size_t rb = db_dtype_bytes(dt, (size_t)I);
    _Alignas(32) panel_t p;
    for (int o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)o * rb;
        for (int r0 = 0; r0 < n; r0 += RN) {
            int R = n - r0 < RN ? n - r0 : RN;
            __m256 acc[2 * RN], m[RN];
            for (int i = 0; i < 2 * RN; i++) acc[i] = _mm256_setzero_ps();
            for (int r = 0; r < RN; r++) m[r] = _mm256_setzero_ps();
            for (int k0 = 0; k0 < I; k0 += KC) {
                int nc = (I - k0 < KC ? I - k0 : KC) / 64;
                /* a row of at most KC values is unpacked once for all its row groups */
                if (r0 == 0 || I > KC) unpack(dt, row, k0 / 64, nc, &p);
                if (db_q8_block_sums(dt)) {
                    switch (R) {
                    case 4: tile_blocks(4, dt, &p, xq, r0, k0, nc, acc, m); break;
                    case 3: tile_blocks(3, dt, &p, xq, r0, k0, nc, acc, m); break;
                    case 2: tile_blocks(2, dt, &p, xq, r0, k0, nc, acc, m); break;
                    default: tile_blocks(1, dt, &p, xq, r0, k0, nc, acc, m); break;
                    }
                    continue;
                }
                switch (R) {
                case 4: tile(4, dt, &p, xq, r0, k0, nc, acc); break;
                case 3: tile(3, dt, &p, xq, r0, k0, nc, acc); break;
                case 2: tile(2, dt, &p, xq, r0, k0, nc, acc); break;
                default: tile(1, dt, &p, xq, r0, k0, nc, acc); break;
                }
            }
            for (int r = 0; r < R; r++) {
                float v = hsum16(acc[2 * r], acc[2 * r + 1]);
                if (mins) v = v - hsum8(m[r]);
                float *dst = y + (size_t)(r0 + r) * O + o;
                *dst = accumulate ? *dst + v : v;
            }
        }
    }
}

void db_matmul_q8_avx2(float *y, const db_q8_rows *xq, const void *w, db_dtype dt, int n, int O,
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

static inline float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

/* db_q8_quantize_ref with 8 lanes: the same max, division, products and rounding (to nearest
 * even), each an exactly rounded IEEE operation */
void db_q8_quantize_avx2(db_q8_rows *xq, const float *x, int r0, int r1)
{
    const int I = xq->I, qb = xq->qb;
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int r = r0; r < r1; r++)
        for (int b = 0; b < I / qb; b++) {
            const float *xb = x + (size_t)r * I + (size_t)qb * b;
            __m256 mx = _mm256_setzero_ps(), z = _mm256_setzero_ps();
            for (int k = 0; k < qb; k += 8) {
                __m256 v = _mm256_loadu_ps(xb + k);
                mx = _mm256_max_ps(mx, _mm256_and_ps(v, absm));
                z = _mm256_add_ps(z, _mm256_mul_ps(v, _mm256_setzero_ps()));
            }
            float amax = hmax8(mx), d = 0.0f, scale = 0.0f;
            if (_mm256_movemask_ps(_mm256_cmp_ps(z, z, _CMP_UNORD_Q))) {
                d = NAN;
            } else if (amax != 0.0f && qb == 32) {
                d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, 0));
                scale = 127.0f / amax;
            } else if (amax != 0.0f) { /* the first value of that magnitude */
                float m = 0.0f;
                for (int k = 0; k < qb; k += 8) {
                    int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(xb + k), absm), _mm256_set1_ps(amax), _CMP_EQ_OQ));
                    if (hit) {
                        m = xb[k + __builtin_ctz((unsigned)hit)];
                        break;
                    }
                }
                scale = -127.0f / m;
                d = 1.0f / scale;
            }
            int8_t *q = xq->q + (size_t)r * I + (size_t)qb * b;
            for (int k = 0; k < qb; k += 32) {
                __m256i v[4];
                for (int t = 0; t < 4; t++) {
                    v[t] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + k + 8 * t), _mm256_set1_ps(scale)),
                                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
                    v[t] = scale == 0.0f ? _mm256_setzero_si256() : _mm256_min_epi32(v[t], _mm256_set1_epi32(127));
                }
                /* 32 int32 -> 32 int8 in order: the packs work per 128-bit half, the permute undoes it */
                __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3])),
                                                         _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256((__m256i *)(q + k), p8);
                size_t lane = (size_t)r * (I / 4) + ((size_t)qb * b + (size_t)k) / 4;
                __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p8), _mm256_set1_epi16(1));
                _mm256_storeu_si256((__m256i *)(xq->nx + lane), _mm256_sub_epi32(_mm256_setzero_si256(), s4));
                _mm256_storeu_ps(xq->dl + lane, _mm256_set1_ps(d));
                __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
                t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
                t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
                xq->s[(size_t)r * (I / 32) + ((size_t)qb * b + (size_t)k) / 32] = d * (float)_mm_cvtsi128_si32(t);
            }
        }
    for (int r = r0; r < r1; r++) db_q8_blocks_fill(xq, r);
}
