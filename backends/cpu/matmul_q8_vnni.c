/* matmul_q8_vnni.c — the integer matmul path (matmul_q8.h) with AVX-512 VNNI: compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c -ffp-contract=off, called
 * only where the CPU reports avx512vnni. Bitwise equal to db_matmul_q8_ref (test_quant_q8.c).
 *
 * Per 64-value chunk each (activation row, weight row) pair costs one vpdpbusd (64 products
 * summed in 16 int32 lanes), a conversion, one multiply of the lane scales and one fma into its
 * 16-lane f32 accumulator: the products never leave the integer unit, where the float path
 * dequantized every weight to f32 and made one fma per 16 values and row. vpdpbusd multiplies
 * unsigned by signed bytes, so:
 *   Q4_K / Q5_K: unsigned codes (the min is separate) x signed activations;
 *   Q4_0 / Q6_K: codes + 8 / + 32 (unsigned) x activations, the lane starting at -8 / -32 times
 *     the sum of its 4 activations (the quantizer's lane sums, shifted);
 *   Q8_0: activations + 128 (unsigned) x signed codes, the lane starting at -128 times the sum of
 *     its 4 codes (computed when the weights are unpacked).
 * Each is the exact integer sum of code x activation, as the reference. The K types decode a
 * 256-value block's 8 or 16 scales at once in vector registers (unpack()).
 *
 * Up to 4 rows (a decode, a short verify): each weight row is unpacked into registers and used at
 * once (direct()). More: a panel of RO = 4 weight rows x KC = 1024 values is unpacked once into
 * codes, lane scales and mins (panel_t, 12 KB: stays in L1) and read by every tile of 4 weight
 * rows x up to RN = 4 activation rows (16 accumulators); rows come in groups of up to 16 whose
 * accumulators wait in abuf between the K blocks, and a tile's 16 sums are reduced together
 * (store_tile()). */
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

typedef struct {
    int8_t code[RO][KC];          /* signed (Q8_0) or unsigned codes */
    float scale[RO][KC / 4];      /* lane scales */
    int32_t src[RO][KC / 4];      /* Q8_0: -128 x the lane's code sum */
    float min[RO][KC / 32];       /* Q4_K / Q5_K: block mins */
} panel_t;

/* What one unpack gives: a chunk (Q8_0, Q4_0) or the 4 chunks of a 256-value block (K types),
 * so the K types decode their 8 or 16 scales once per block, in vector registers. */
#define UNIT(dt) ((dt) == DB_Q8_0 || (dt) == DB_Q4_0 ? 1 : 4)
typedef struct {
    __m512i code[4];
    __m512 scale[4];
    __m512i src[4]; /* Q8_0 */
    __m256 min;     /* Q4_K / Q5_K: the mins of the 8 blocks of 32 */
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

/* unit u of a weight row (layouts in quant.c; values exactly db_q8_unpack_chunk's) */
static inline __attribute__((always_inline)) void unpack(db_dtype dt, const uint8_t *row, int u, unit_t *w)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    if (dt == DB_Q8_0 || dt == DB_Q4_0) {
        const uint8_t *b0 = row + (size_t)(2 * u) * (dt == DB_Q8_0 ? 34 : 18);
        const uint8_t *b1 = b0 + (dt == DB_Q8_0 ? 34 : 18);
        w->scale[0] = _mm512_insertf32x8(_mm512_set1_ps(ld_f16(b0)), _mm256_set1_ps(ld_f16(b1)), 1);
        if (dt == DB_Q8_0) {
            w->code[0] = join(_mm256_loadu_si256((const __m256i *)(b0 + 2)), _mm256_loadu_si256((const __m256i *)(b1 + 2)));
            __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), w->code[0]);
            w->src[0] = _mm512_sub_epi32(_mm512_setzero_si512(), s);
        } else {
            __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 2))),
                                                _mm_loadu_si128((const __m128i *)(b1 + 2)), 1);
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            /* values: lo of block 0, hi of block 0, lo of block 1, hi of block 1 */
            w->code[0] = join(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
        }
        return;
    }
    if (dt == DB_Q4_K || dt == DB_Q5_K) {
        int five = dt == DB_Q5_K;
        const uint8_t *b = row + (size_t)u * (five ? 176 : 144);
        /* the 12 scale bytes -> 8 scales s_j (bytes 0-7) and 8 mins m_j (bytes 8-15), each
         * word's bytes at once (db_scale_min_k4's rule) */
        uint32_t t[3], sm[4];
        memcpy(t, b + 4, 12);
        sm[0] = t[0] & 0x3f3f3f3f;
        sm[1] = (t[2] & 0x0f0f0f0f) | ((t[0] >> 6) & 0x03030303) << 4;
        sm[2] = t[1] & 0x3f3f3f3f;
        sm[3] = ((t[2] >> 4) & 0x0f0f0f0f) | ((t[1] >> 6) & 0x03030303) << 4;
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sm));
        __m256i m = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sm + 2)));
        __m512 sc = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_set1_ps(ld_f16(b)), _mm256_cvtepi32_ps(v)));
        w->min = _mm256_mul_ps(_mm256_set1_ps(ld_f16(b + 2)), _mm256_cvtepi32_ps(m));
        const uint8_t *qs = b + (five ? 48 : 16);
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
        for (int cc = 0; cc < 4; cc++) {
            w->scale[cc] = spread(sc, 2, cc);
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * cc));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                __m256i sixteen = _mm256_set1_epi8(16);
                __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * cc))), b1 = _mm256_set1_epi8((char)(1 << (2 * cc + 1)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), sixteen));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), sixteen));
            }
            w->code[cc] = join(lo, hi);
        }
        return;
    }
    /* Q6_K: chunk cc is quarters k0 = 2 (cc & 1), k0 + 1 of half cc >> 1; its lanes take the
     * scales 4cc .. 4cc + 3, four lanes each; codes + 32 */
    const uint8_t *b = row + (size_t)u * 210;
    __m512 sc = _mm512_mul_ps(_mm512_set1_ps(ld_f16(b + 208)),
                              _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 192)))));
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int cc = 0; cc < 4; cc++) {
        int half = cc >> 1, k0 = 2 * (cc & 1);
        const uint8_t *ql = b + 64 * half;
        __m256i h = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * half)), q[2];
        w->scale[cc] = spread(sc, 4, cc);
        for (int t = 0; t < 2; t++) {
            int k = k0 + t;
            __m256i l = _mm256_loadu_si256((const __m256i *)(ql + 32 * (k & 1)));
            l = k >= 2 ? _mm256_and_si256(_mm256_srli_epi16(l, 4), m4) : _mm256_and_si256(l, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * k), m3);
            q[t] = _mm256_or_si256(l, _mm256_slli_epi16(hi, 4));
        }
        w->code[cc] = join(q[0], q[1]);
    }
}

/* activation row chunk prepared for the type: the bytes vpdpbusd takes (Q8_0: + 128) and the
 * lane start (Q4_0 / Q6_K: -8 / -32 x the lane's code sum) */
static inline __attribute__((always_inline)) void xprep(db_dtype dt, const int8_t *xr, const int32_t *nx, int c,
                                                        __m512i *xv, __m512i *off)
{
    *xv = _mm512_loadu_si512(xr + 64 * c);
    if (dt == DB_Q8_0) *xv = _mm512_xor_si512(*xv, _mm512_set1_epi8((char)0x80));
    if (dt == DB_Q4_0 || dt == DB_Q6_K) *off = _mm512_slli_epi32(_mm512_loadu_si512(nx + 16 * c), dt == DB_Q4_0 ? 3 : 5);
}

/* the integer sum of one (weight row, activation row) chunk pair */
static inline __attribute__((always_inline)) __m512i dot(db_dtype dt, __m512i code, __m512i src, __m512i xv,
                                                         __m512i off)
{
    if (dt == DB_Q8_0) return _mm512_dpbusd_epi32(src, xv, code);
    if (dt == DB_Q4_0 || dt == DB_Q6_K) return _mm512_dpbusd_epi32(off, code, xv);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), code, xv);
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
        for (int r = 0; r < R; r++) xprep(dt, xr[r], nx[r], c, &xv[r], &off[r]);
        for (int o = 0; o < RO; o++) {
            __m512i wv = _mm512_load_si512(p->code[o] + 64 * c);
            __m512i src = dt == DB_Q8_0 ? _mm512_load_si512(p->src[o] + 16 * c) : _mm512_setzero_si512();
            __m512 sv = _mm512_load_ps(p->scale[o] + 16 * c);
            for (int r = 0; r < R; r++) {
                __m512 t = _mm512_mul_ps(sv, _mm512_loadu_ps(dr[r] + 16 * c));
                a[o * RN + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot(dt, wv, src, xv[r], off[r])), t, a[o * RN + r]);
            }
        }
    }
    for (int o = 0; o < RO; o++)
        for (int r = 0; r < R; r++) acc[o * RN + r] = a[o * RN + r];
}

/* up to RN rows against weight rows one at a time, each unit unpacked into registers and used
 * at once: the path of a decode, where a panel would be written for one read */
static inline __attribute__((always_inline)) void direct(int R, db_dtype dt, float *y, const db_q8_rows *xq,
                                                         const void *w, int O, int o0, int o1, int accumulate)
{
    const int I = xq->I, U = UNIT(dt), mins = dt == DB_Q4_K || dt == DB_Q5_K;
    const size_t rb = db_dtype_bytes(dt, (size_t)I);
    for (int o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)o * rb;
        __m512 a[RN];
        __m256 m[RN];
        for (int r = 0; r < R; r++) a[r] = _mm512_setzero_ps(), m[r] = _mm256_setzero_ps();
        for (int u = 0; u < I / 64 / U; u++) {
            unit_t wu;
            unpack(dt, row, u, &wu);
            for (int cc = 0; cc < U; cc++) {
                int c = U * u + cc;
                for (int r = 0; r < R; r++) {
                    __m512i xv, off = _mm512_setzero_si512();
                    xprep(dt, xq->q + (size_t)r * I, xq->nx + (size_t)r * (I / 4), c, &xv, &off);
                    __m512 t = _mm512_mul_ps(wu.scale[cc], _mm512_loadu_ps(xq->dl + (size_t)r * (I / 4) + 16 * c));
                    a[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot(dt, wu.code[cc], wu.src[cc], xv, off)), t, a[r]);
                }
            }
            if (mins)
                for (int r = 0; r < R; r++)
                    m[r] = _mm256_fmadd_ps(wu.min, _mm256_loadu_ps(xq->s + (size_t)r * (I / 32) + 8 * u), m[r]);
        }
        for (int r = 0; r < R; r++) {
            float v = hsum16(a[r]);
            if (mins) v = v - hsum8(m[r]);
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
    switch (n) {
    case 1: direct(1, dt, y, xq, w, O, o0, o1, accumulate); return;
    case 2: direct(2, dt, y, xq, w, O, o0, o1, accumulate); return;
    case 3: direct(3, dt, y, xq, w, O, o0, o1, accumulate); return;
    case 4: direct(4, dt, y, xq, w, O, o0, o1, accumulate); return;
    default: break;
    }
    const int I = xq->I, U = UNIT(dt), mins = dt == DB_Q4_K || dt == DB_Q5_K;
    const size_t rb = db_dtype_bytes(dt, (size_t)I);
    _Alignas(64) panel_t p;
    _Alignas(64) __m512 abuf[GROUP / RN][RO * RN];
    _Alignas(32) __m256 mbuf[RO][GROUP];
    for (int ob = o0; ob < o1; ob += RO) {
        const uint8_t *rows[RO];
        for (int o = 0; o < RO; o++)
            rows[o] = (const uint8_t *)w + (size_t)(ob + o < o1 ? ob + o : o1 - 1) * rb;
        for (int g0 = 0; g0 < n; g0 += GROUP) {
            int ng = n - g0 < GROUP ? n - g0 : GROUP, nt = (ng + RN - 1) / RN;
            for (int t = 0; t < nt; t++)
                for (int i = 0; i < RO * RN; i++) abuf[t][i] = _mm512_setzero_ps();
            for (int o = 0; o < RO; o++)
                for (int r = 0; r < ng; r++) mbuf[o][r] = _mm256_setzero_ps();
            for (int k0 = 0; k0 < I; k0 += KC) {
                int nc = (I - k0 < KC ? I - k0 : KC) / 64;
                for (int o = 0; o < RO; o++)
                    for (int u = 0; u < nc / U; u++) {
                        unit_t wu;
                        unpack(dt, rows[o], k0 / 64 / U + u, &wu);
                        for (int cc = 0; cc < U; cc++) {
                            int c = U * u + cc;
                            _mm512_store_si512(p.code[o] + 64 * c, wu.code[cc]);
                            _mm512_store_ps(p.scale[o] + 16 * c, wu.scale[cc]);
                            if (dt == DB_Q8_0) _mm512_store_si512(p.src[o] + 16 * c, wu.src[cc]);
                        }
                        if (mins) _mm256_store_ps(p.min[o] + 8 * u, wu.min);
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
    case DB_Q8_0: run(DB_Q8_0, y, xq, w, n, O, o0, o1, accumulate); break;
    case DB_Q4_0: run(DB_Q4_0, y, xq, w, n, O, o0, o1, accumulate); break;
    case DB_Q4_K: run(DB_Q4_K, y, xq, w, n, O, o0, o1, accumulate); break;
    case DB_Q5_K: run(DB_Q5_K, y, xq, w, n, O, o0, o1, accumulate); break;
    case DB_Q6_K: run(DB_Q6_K, y, xq, w, n, O, o0, o1, accumulate); break;
    default: db_matmul_q8_ref(y, xq, w, dt, n, O, o0, o1, accumulate); break;
    }
}

/* db_q8_quantize_ref with 16 lanes: the same max, division, reciprocal, product and rounding
 * (to nearest even, nearbyintf's default), each an exactly rounded IEEE operation */
void db_q8_quantize_vnni(db_q8_rows *xq, const float *x, int r0, int r1)
{
    const int I = xq->I;
    const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int r = r0; r < r1; r++)
        for (int b = 0; b < I / 32; b++) {
            const float *xb = x + (size_t)r * I + 32 * b;
            __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v0, absm), _mm512_and_ps(v1, absm)));
            __m512 z = _mm512_add_ps(_mm512_mul_ps(v0, _mm512_setzero_ps()), _mm512_mul_ps(v1, _mm512_setzero_ps()));
            int bad = _mm512_cmp_ps_mask(z, z, _CMP_UNORD_Q) != 0;
            float d = bad ? NAN : amax / 127.0f;
            float id = d != 0.0f && d == d && d != INFINITY ? 1.0f / d : 0.0f;
            __m512 idv = _mm512_set1_ps(id);
            const int rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            __m512i q0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, idv), rnd));
            __m512i q1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, idv), rnd));
            if (id == 0.0f) q0 = q1 = _mm512_setzero_si512(); /* NaN x 0 would convert to INT_MIN */
            __m256i q8 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtsepi32_epi8(q0)),
                                                 _mm512_cvtsepi32_epi8(q1), 1);
            _mm256_storeu_si256((__m256i *)(xq->q + (size_t)r * I + 32 * b), q8);
            int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
            _mm256_storeu_ps(xq->dl + (size_t)r * (I / 4) + 8 * b, _mm256_set1_ps(d));
            /* each lane's 4-code sum (unsigned 1s x the codes), negated */
            __m256i s4 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), q8);
            _mm256_storeu_si256((__m256i *)(xq->nx + (size_t)r * (I / 4) + 8 * b), _mm256_sub_epi32(_mm256_setzero_si256(), s4));
            xq->s[(size_t)r * (I / 32) + b] = d * (float)sum;
        }
}
