/* matmul_avx512.c — AVX-512F matmul kernel, register-blocked (compiled with -mavx512f
 * -mavx512bw -mavx512vl, called only when the CPU reports them). Notation in cpu_kernels.h.
 *
 * A tile is RO = 6 weight rows x up to RN = 4 activation rows: per 16 reduction steps it
 * loads (and widens from bf16 / f16) each of the 6 weight vectors once and each of the RN
 * activation vectors once, and issues 6 * RN FMAs into 6 * RN independent 16-lane accumulators, so the
 * loop is bound by the FMA units instead of the loads.
 *
 * Batch invariance: the (row, o) dot product owns one accumulator; lane j sums the products at
 * k = j, j + 16, j + 32, ... in k order, the last partial group of 16 is a masked load (absent
 * lanes add exact zeros), and the 16 lanes are summed by one fixed reduction. Nothing in that
 * depends on N, on which rows share a tile, or on where the K blocks below are cut.
 *
 * Cache blocking: weight rows are taken RO at a time, activation rows in groups of up to
 * SUPER = 16, the reduction in KC-long blocks; every RN-row tile of the group runs over a K
 * block while its 6 weight-row slices stay in L1 / L2, and accumulators wait in `abuf` between K
 * blocks. Splitting K only pauses an accumulator, so the per-lane order stays k order. KC is
 * 4096: K blocks of 256 and 512 measured 8-15% slower at 4 to 32 rows (single thread, f16
 * weights from memory, I = 1024 and 2816: the accumulator round trips and the restarts of the
 * weight streams cost more than L1 residency saves); 4096 keeps the group's activation slices
 * (16 x 16 KB) within L2 on wide models. (Widening
 * the block's weights to f32 once per group instead of once per tile measured slower: the
 * conversions are cheaper than the extra stores and loads.) A ragged edge in O reuses the last
 * valid weight row in the unused tile slots and drops their results (each accumulator is
 * independent, so this changes no value).
 *
 * What a row group costs outside its tiles (starting 96 accumulators, summing them, writing 96
 * values) is set against only 6 * I FMAs per activation row, so it stays vector: the first K
 * block starts its accumulators at zero, the sums are made 16 at a time (hsum16) and each row's
 * run of them written by one masked store (store_sums). Against a zeroing pass, one horizontal
 * sum per output and scalar stores: 144 -> 162 GFLOP/s at 16 rows, I = 1024, f16 weights in
 * cache, one core whose FMA peak is ~205; the tile loop itself runs at ~89% of that peak.
 *
 * No AVX512-BF16 (vdpbf16ps) path: it multiplies bf16 by bf16, so the activations would be
 * rounded to bf16 (relative error up to 2^-9 per product), far outside the error contract the
 * kernels are tested against (1e-5 * sqrt(I) * sum |w x|, tests/test_kernels.c); the weights are
 * widened to f32 in registers instead, which is exact. */
#include "config.h"
#include "cpu_kernels.h"

#include <immintrin.h>
#include <stdint.h>

#ifndef RO
#define RO 6
#define RN 4
#endif
#define SUPER 16
#define KC 4096

static inline __m512 load16(const void *w, db_dtype dt, size_t i)
{
    if (dt == DB_F32) return _mm512_loadu_ps((const float *)w + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    if (dt == DB_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m512 load16_mask(const void *w, db_dtype dt, size_t i, __mmask16 m)
{
    if (dt == DB_F32) return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i);
    if (dt == DB_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* lane j = the sum of v[j]'s 16 lanes, for 16 vectors at once: a transpose-and-add tree that
 * adds, for every vector alike, 128-bit blocks (0+2, 1+3), the two halves, lanes (0+2, 1+3),
 * then the last pair. Those are the pairings of _mm512_reduce_add_ps (halves of 256, of 128,
 * lanes 2 apart, 1 apart: x_i + x_(i+8) first, and so on), and a float sum does not depend on
 * the order of its two operands, so each lane is bitwise what _mm512_reduce_add_ps gives for its
 * vector: the tiles and the one-row path may reduce either way. 45 shuffles and adds for 16
 * sums instead of about 8 instructions per sum. */
static inline __attribute__((always_inline)) __m512 hsum16(const __m512 *v)
{
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512 t[8], w[4], y[2];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
        t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
        w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
    _Pragma("GCC unroll 2") for (int i = 0; i < 2; i++)
        y[i] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0xEE));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
    return _mm512_permutexvar_ps(perm, r);
}

/* one tile over `len` reduction steps: wr[j] the 6 weight rows (dtype wdt) and xr[r] the RN
 * activation rows, both at the block's first k; acc[r * RO + j] in/out. len is a multiple of
 * 16 except in the last block of a row, whose tail is masked.
 *
 * Prefetch: NPF byte pointers pf[i], advanced with k, one cache line of each per 64 bytes of
 * weights consumed (prefetches never fault, so they may run past a row or the matrix). Two
 * uses (block()): the weights of this tile themselves PD elements ahead (the first tile of a
 * thread, and any row group served by a single tile), and the next row group's weights, split
 * over the tiles after the first. Why the second: the first tile of a group used to pull its
 * six rows from DRAM while the next three tiles re-read them from L1 and fetched nothing, so
 * the memory traffic came in bursts at twice what two cores can draw and the first tile waited
 * on it (a third of the kernel's samples sat on its weight loads, 16 rows, f16 from memory);
 * spread over the whole group the same bytes arrive while the FMAs run. */
#define PD 512
static inline __attribute__((always_inline)) void tile(int R, int NPF, __m512 *acc, int fresh,
                                                       const void *const *wr, db_dtype wdt,
                                                       const float *const *xr, int len,
                                                       const char *const *pf)
{
    __m512 a[RN * RO];
    _Pragma("GCC unroll 32") for (int i = 0; i < R * RO; i++) a[i] = fresh ? _mm512_setzero_ps() : acc[i];
    int k = 0, k1 = len;
    const size_t es = wdt == DB_F32 ? 4 : 2;
    for (; k + 16 <= k1; k += 16) {
        __m512 wv[RO];
        _Pragma("GCC unroll 32") for (int j = 0; j < RO; j++) wv[j] = load16(wr[j], wdt, (size_t)k);
        if (NPF && (wdt == DB_F32 || (k & 31) == 0)) {
            _Pragma("GCC unroll 32") for (int i = 0; i < NPF; i++)
                _mm_prefetch(pf[i] + (size_t)k * es, _MM_HINT_T0);
        }
        _Pragma("GCC unroll 32") for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_loadu_ps(xr[r] + k);
            _Pragma("GCC unroll 32") for (int j = 0; j < RO; j++) a[r * RO + j] = _mm512_fmadd_ps(wv[j], xv, a[r * RO + j]);
        }
    }
    if (k < k1) {
        __mmask16 m = (__mmask16)((1u << (k1 - k)) - 1u);
        __m512 wv[RO];
        _Pragma("GCC unroll 32") for (int j = 0; j < RO; j++) wv[j] = load16_mask(wr[j], wdt, (size_t)k, m);
        _Pragma("GCC unroll 32") for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_maskz_loadu_ps(m, xr[r] + k);
            _Pragma("GCC unroll 32") for (int j = 0; j < RO; j++) a[r * RO + j] = _mm512_fmadd_ps(wv[j], xv, a[r * RO + j]);
        }
    }
    _Pragma("GCC unroll 32") for (int i = 0; i < R * RO; i++) acc[i] = a[i];
}

static void tile_n(int rn, int npf, __m512 *acc, int fresh, const void *const *wr, db_dtype wdt,
                   const float *const *xr, int len, const char *const *pf)
{
    /* dtype, row count and prefetch count as compile-time constants: no branch in the loop */
#define TILE_PF(R, NPF)                                                                         \
    do {                                                                                         \
        if (wdt == DB_F32) tile(R, NPF, acc, fresh, wr, DB_F32, xr, len, pf);                    \
        else if (wdt == DB_F16) tile(R, NPF, acc, fresh, wr, DB_F16, xr, len, pf);               \
        else tile(R, NPF, acc, fresh, wr, DB_BF16, xr, len, pf);                                 \
    } while (0)
#define TILE_DT(R)                                                                              \
    do {                                                                                         \
        switch (npf) {                                                                           \
        case 6: TILE_PF(R, 6); break;                                                            \
        case 3: TILE_PF(R, 3); break;                                                            \
        case 2: TILE_PF(R, 2); break;                                                            \
        default: TILE_PF(R, 0); break;                                                           \
        }                                                                                        \
    } while (0)
    switch (rn) {
#if RN > 4
    case 6: TILE_DT(6); break;
    case 5: TILE_DT(5); break;
#endif
    case 4: TILE_DT(4); break;
    case 3: TILE_DT(3); break;
    case 2: TILE_DT(2); break;
    default: TILE_DT(1); break;
    }
#undef TILE_DT
#undef TILE_PF
}

/* the row group's results into y: the accumulators' sums 16 at a time (hsum16; [nr][6] order,
 * absent ones zero), then each row's run of lanes moved down to lane 0 and written with one
 * masked store (added to y when accumulating). Scalar stores of sums just stored as a vector
 * stalled on store forwarding: a sixth of the block's time at 16 rows, I = 1024. */
static inline void store_sums(float *y, const __m512 *abuf, int nr, int r0, int O, int o,
                              int o_last, int accumulate)
{
    const int n = nr * RO, ncol = o_last - o + 1 < RO ? o_last - o + 1 : RO;
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int i = 0; i < n; i += 16) {
        __m512 s;
        if (i + 16 <= n) {
            s = hsum16(abuf + i);
        } else {
            __m512 v[16];
            for (int t = 0; t < 16; t++) v[t] = i + t < n ? abuf[i + t] : _mm512_setzero_ps();
            s = hsum16(v);
        }
        for (int r = i / RO; r < nr && r * RO < i + 16; r++) {
            int t0 = r * RO - i;                /* the lane of the row's column 0 (may be < 0) */
            int c0 = t0 < 0 ? -t0 : 0;          /* its columns in this chunk: [c0, c1) */
            int c1 = i + 16 - r * RO < ncol ? i + 16 - r * RO : ncol;
            if (c0 >= c1) continue;
            __mmask16 m = (__mmask16)(((1u << c1) - 1u) & ~((1u << c0) - 1u));
            __m512 v = _mm512_permutexvar_ps(_mm512_add_epi32(iota, _mm512_set1_epi32(t0)), s);
            float *yr = y + (size_t)(r0 + r) * O + o;
            if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, yr), v);
            _mm512_mask_storeu_ps(yr, m, v);
        }
    }
}

/* weight rows [o, o + 6) (the last ones clamped to o_last) x activation rows [r0, r0 + nr).
 * self_pf: the tiles fetch their own weights (nothing fetched them before); next: the first of
 * the next group's weight rows (row-major, I elements apart, nnext of them), or NULL */
static void block(float *y, const float *x, const void *w, db_dtype dt, int O, int I, int o,
                  int o_last, int r0, int nr, int accumulate, int self_pf, const char *next,
                  int nnext)
{
    __m512 abuf[(SUPER + RN) * RO]; /* accumulators of the row group, [nr][6]; the first K block
                                     * starts them at zero */
    size_t es = db_dtype_size(dt);
    const void *wrow[RO];
    for (int j = 0; j < RO; j++) {
        int oj = o + j <= o_last ? o + j : o_last;
        wrow[j] = (const char *)w + (size_t)oj * (size_t)I * es;
    }
    const int ntiles = (nr + RN - 1) / RN;
    /* the next group's rows are shared out among the tiles after the first */
    const int npf_next = ntiles > 1 ? (RO + ntiles - 2) / (ntiles - 1) : 0;
    for (int k0 = 0; k0 < I; k0 += KC) {
        int len = I - k0 < KC ? I - k0 : KC;
        const void *wr[RO];
        for (int j = 0; j < RO; j++) wr[j] = (const char *)wrow[j] + (size_t)k0 * es;
        for (int r = 0, t = 0; r < nr; r += RN, t++) {
            int rn = nr - r < RN ? nr - r : RN;
            const float *xr[RN];
            for (int i = 0; i < rn; i++) xr[i] = x + (size_t)(r0 + r + i) * I + k0;
            const char *pf[RO];
            int npf = 0;
            if (t == 0 && (self_pf || ntiles == 1)) { /* a lone tile fetches its own */
                for (int j = 0; j < RO; j++) pf[j] = (const char *)wr[j] + (size_t)PD * es;
                npf = RO;
            } else if (next && t > 0) {
                int j0 = (t - 1) * npf_next; /* a short last share repeats its last row */
                for (int i = 0; j0 < nnext && i < npf_next; i++, npf++)
                    pf[i] = next + ((size_t)(j0 + i < nnext ? j0 + i : nnext - 1) * I + (size_t)k0) * es;
            }
            tile_n(rn, npf, abuf + r * RO, k0 == 0, wr, dt, xr, len, pf);
        }
    }
    store_sums(y, abuf, nr, r0, O, o, o_last, accumulate);
}

/* One activation row (the decode step): memory bound, so the weights are streamed one row at a
 * time, front to back, with a software prefetch PD1 elements (2 KB of f16) ahead; one
 * accumulator per output, the same per-lane k order, masked tail and final reduction as the
 * tiles, so the values are bitwise those of the tiled path. Measured on 2 threads, f16
 * 2816 x 1024 from memory: 36 -> 42 GB/s against 6 interleaved rows with abuf round trips. */
#define PD1 1024
static inline __attribute__((always_inline)) void gemv_rows(float *y, const float *x,
                                                            const void *w, db_dtype dt, int I,
                                                            int o0, int o1, int accumulate)
{
    size_t es = db_dtype_size(dt);
    for (int o = o0; o < o1; o++) {
        const char *wr = (const char *)w + (size_t)o * (size_t)I * es;
        __m512 a = _mm512_setzero_ps();
        int k = 0;
        for (; k + 16 <= I; k += 16) {
            if (dt == DB_F32 || (k & 31) == 0) _mm_prefetch(wr + (size_t)(k + PD1) * es, _MM_HINT_T0);
            a = _mm512_fmadd_ps(load16(wr, dt, (size_t)k), _mm512_loadu_ps(x + k), a);
        }
        if (k < I) {
            __mmask16 m = (__mmask16)((1u << (I - k)) - 1u);
            a = _mm512_fmadd_ps(load16_mask(wr, dt, (size_t)k, m), _mm512_maskz_loadu_ps(m, x + k), a);
        }
        float s = _mm512_reduce_add_ps(a);
        y[o] = accumulate ? y[o] + s : s;
    }
}

void db_matmul_avx512(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                      int o0, int o1, int accumulate)
{
    if (n == 1) {
        if (dt == DB_F16) gemv_rows(y, x, w, DB_F16, I, o0, o1, accumulate);
        else if (dt == DB_BF16) gemv_rows(y, x, w, DB_BF16, I, o0, o1, accumulate);
        else gemv_rows(y, x, w, DB_F32, I, o0, o1, accumulate);
        return;
    }
    size_t row_bytes = (size_t)I * db_dtype_size(dt);
    for (int o = o0; o < o1; o += RO)
        for (int r0 = 0; r0 < n; r0 += SUPER) {
            /* the last row group of these weights fetches the next weights */
            int last = r0 + SUPER >= n, nnext = o1 - (o + RO) < RO ? o1 - (o + RO) : RO;
            const char *next = last && nnext > 0 ? (const char *)w + (size_t)(o + RO) * row_bytes : NULL;
            block(y, x, w, dt, O, I, o, o1 - 1, r0, n - r0 < SUPER ? n - r0 : SUPER, accumulate,
                  o == o0 && r0 == 0, next, next ? nnext : 0);
        }
}

/* attention's q.k (cpu_kernels.h): 16 keys at a time, one accumulator per key summing the
 * head's 16-lane vectors in order (masked last vector), then the 16 accumulators reduced
 * together by hsum16; absent keys of a last partial group are zero accumulators whose results
 * are dropped. The order depends on hd alone. The keys are an f32 or
 * an f16 cache (dt), widened exactly by load16_mask: the same arithmetic for both. */
static inline __attribute__((always_inline)) void scores_keys(float *out, const float *q,
                                                               const void *k, db_dtype dt,
                                                               size_t stride, int nj, int hd,
                                                               float scale)
{
    int nv = (hd + 15) / 16;
    __m512 acc[16];
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    for (int v = 0; v < nv; v++) {
        int left = hd - 16 * v;
        __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
        __m512 qv = _mm512_maskz_loadu_ps(m, q + 16 * v);
        /* all 16 keys every time, absent ones as all-masked (fault-free) loads of zeros: a
         * loop bound known at compile time keeps acc[] in registers (with j < nj as the bound
         * it lived on the stack, a store and a load per FMA) */
        _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) {
            __mmask16 mj = j < nj ? m : (__mmask16)0;
            acc[j] = _mm512_fmadd_ps(qv, load16_mask(k, dt, (size_t)j * stride + 16 * (size_t)v, mj), acc[j]);
        }
    }
    __m512 r = hsum16(acc);
    r = _mm512_mul_ps(r, _mm512_set1_ps(scale));
    _mm512_mask_storeu_ps(out, (__mmask16)((1u << nj) - 1u), r);
}

/* The same sums with q held in NV registers (hd = 16 NV): each key's row is read front to back
 * from one pointer, where the loop above keeps 16 key pointers live and spills them (a third of
 * its time went to reloading them, 16 rows x 1024 keys). Each acc[j] still adds v = 0..NV-1 in
 * order from zero and meets the same hsum16: bitwise the loop above. */
static inline __attribute__((always_inline)) void scores_qreg(float *out, const float *q,
                                                              const void *k, db_dtype dt,
                                                              size_t stride, int nk, int NV,
                                                              float scale)
{
    __m512 qv[8];
    _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) qv[v] = _mm512_loadu_ps(q + 16 * v);
    const size_t es = dt == DB_F32 ? 4 : 2;
    for (int j0 = 0; j0 < nk; j0 += 16) {
        int nj = nk - j0 < 16 ? nk - j0 : 16;
        __m512 acc[16];
        const char *kj = (const char *)k + (size_t)j0 * stride * es;
        _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) {
            acc[j] = _mm512_setzero_ps();
            if (j < nj) {
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++)
                    acc[j] = _mm512_fmadd_ps(qv[v], load16(kj, dt, 16 * (size_t)v), acc[j]);
                kj += stride * es;
            }
        }
        __m512 r = hsum16(acc);
        r = _mm512_mul_ps(r, _mm512_set1_ps(scale));
        _mm512_mask_storeu_ps(out + j0, (__mmask16)((1u << nj) - 1u), r);
    }
}

static inline __attribute__((always_inline)) void scores_dt(float *out, const float *q,
                                                            const void *k, db_dtype dt,
                                                            size_t stride, int nk, int hd,
                                                            float scale)
{
    if (hd == 128) { scores_qreg(out, q, k, dt, stride, nk, 8, scale); return; }
    if (hd == 64) { scores_qreg(out, q, k, dt, stride, nk, 4, scale); return; }
    for (int j0 = 0; j0 < nk; j0 += 16) {
        int nj = nk - j0 < 16 ? nk - j0 : 16;
        const char *kj = (const char *)k + (size_t)j0 * stride * (dt == DB_F32 ? 4 : 2);
        scores_keys(out + j0, q, kj, dt, stride, nj, hd, scale);
    }
}

/* o[i] += sum_j p[j] * v[j * stride + i], j in key order, 8 vectors of o held in registers */
static inline __attribute__((always_inline)) void wsum_dt(float *o, const float *p, const void *v,
                                                          db_dtype dt, size_t stride, int nk,
                                                          int hd)
{
    for (int i0 = 0; i0 < hd; i0 += 128) {
        __m512 acc[8];
        if (hd - i0 >= 128) { /* 8 whole vectors: no masks, so acc[] stays in registers */
            _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) acc[t] = _mm512_loadu_ps(o + i0 + 16 * t);
            for (int j = 0; j < nk; j++) {
                __m512 pj = _mm512_set1_ps(p[j]);
                size_t vj = (size_t)j * stride + (size_t)i0;
                _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++)
                    acc[t] = _mm512_fmadd_ps(pj, load16(v, dt, vj + 16 * (size_t)t), acc[t]);
            }
            _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) _mm512_storeu_ps(o + i0 + 16 * t, acc[t]);
            continue;
        }
        __mmask16 m[8];
        int nv = (hd - i0 + 15) / 16 < 8 ? (hd - i0 + 15) / 16 : 8;
        for (int t = 0; t < 8; t++) {
            int left = hd - i0 - 16 * t;
            m[t] = left >= 16 ? (__mmask16)0xffff : left > 0 ? (__mmask16)((1u << left) - 1u) : 0;
            acc[t] = _mm512_maskz_loadu_ps(m[t], o + i0 + 16 * t);
        }
        for (int j = 0; j < nk; j++) {
            __m512 pj = _mm512_set1_ps(p[j]);
            size_t vj = (size_t)j * stride + (size_t)i0;
            _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++)
                if (t < nv) acc[t] = _mm512_fmadd_ps(pj, load16_mask(v, dt, vj + 16 * (size_t)t, m[t]), acc[t]);
        }
        for (int t = 0; t < nv; t++) _mm512_mask_storeu_ps(o + i0 + 16 * t, m[t], acc[t]);
    }
}

void db_scores_avx512(float *out, const float *q, const float *k, size_t stride, int nk, int hd,
                      float scale)
{
    scores_dt(out, q, k, DB_F32, stride, nk, hd, scale);
}

void db_wsum_avx512(float *o, const float *p, const float *v, size_t stride, int nk, int hd)
{
    wsum_dt(o, p, v, DB_F32, stride, nk, hd);
}

void db_scores16_avx512(float *out, const float *q, const uint16_t *k, size_t stride, int nk,
                        int hd, float scale)
{
    scores_dt(out, q, k, DB_F16, stride, nk, hd, scale);
}

void db_wsum16_avx512(float *o, const float *p, const uint16_t *v, size_t stride, int nk, int hd)
{
    wsum_dt(o, p, v, DB_F16, stride, nk, hd);
}

/* Several queries against the same keys (db_scores_multi_kernel, cpu_kernels.h): a tile of four
 * queries x four keys, so one key vector serves four FMAs where the one-query loop loads one per
 * FMA (a verify's rows and a kv head's query heads over one packed block). Every (query, key)
 * accumulator takes exactly scores_keys' operations (zero start, the head's vectors in order,
 * the same masks) and meets the same hsum16 lane tree, then the same scale: bitwise what one
 * scores call per query gives. Queries left over (nq not a multiple of 4) take that call. */
static inline __attribute__((always_inline)) void scores_tile4(float *const *out,
                                                               const float *const *q,
                                                               const void *k, db_dtype dt,
                                                               size_t stride, int j0, int nj,
                                                               int hd, float scale)
{
    int nv = (hd + 15) / 16;
    __m512 acc[16];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    for (int v = 0; v < nv; v++) {
        int left = hd - 16 * v;
        __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
        __m512 qv[4];
        _Pragma("GCC unroll 4") for (int a = 0; a < 4; a++) qv[a] = _mm512_maskz_loadu_ps(m, q[a] + 16 * v);
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            __m512 kv = load16_mask(k, dt, (size_t)(j0 + j) * stride + 16 * (size_t)v,
                                    j < nj ? m : (__mmask16)0);
            _Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
                acc[4 * a + j] = _mm512_fmadd_ps(qv[a], kv, acc[4 * a + j]);
        }
    }
    __m512 r = _mm512_mul_ps(hsum16(acc), _mm512_set1_ps(scale)); /* lane 4a + j: query a, key j */
    __mmask8 mk = (__mmask8)((1u << nj) - 1u);
    _mm_mask_storeu_ps(out[0] + j0, mk, _mm512_extractf32x4_ps(r, 0));
    _mm_mask_storeu_ps(out[1] + j0, mk, _mm512_extractf32x4_ps(r, 1));
    _mm_mask_storeu_ps(out[2] + j0, mk, _mm512_extractf32x4_ps(r, 2));
    _mm_mask_storeu_ps(out[3] + j0, mk, _mm512_extractf32x4_ps(r, 3));
}

/* An f16 block that several queries read is widened to f32 once, into `buf` (WIDE_MAX floats),
 * and the several-query loops run on the f32 copy: widening is exact, so the values are bitwise
 * those of the loops on the f16 block, and no tile converts a vector another tile converted (a
 * verify's 32 queries of a kv head took each key and value vector through vcvtph2ps 8 times).
 * 16 rows x 4096 keys, f16 cache, one layer, 2 threads: 3.71 -> 3.17 ms a call (medians of 5
 * interleaved runs). Returns NULL, nothing done, for an f32 block, one query, or a block larger
 * than the buffer. */
#define WIDE_MAX (64 * 256)
static const float *widen_block(float *buf, const void *blk, db_dtype dt, size_t stride, int nk,
                                int hd, int nq)
{
    if (dt != DB_F16 || nq < 2 || (size_t)nk * (size_t)hd > WIDE_MAX) return NULL;
    for (int j = 0; j < nk; j++) {
        const uint16_t *r = (const uint16_t *)blk + (size_t)j * stride;
        float *d = buf + (size_t)j * hd;
        for (int i = 0; i < hd; i += 16) {
            __mmask16 m = hd - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (hd - i)) - 1u);
            _mm512_mask_storeu_ps(d + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, r + i)));
        }
    }
    return buf;
}

void db_scores_multi_avx512(float *const *out, const float *const *q, int nq, const void *k,
                            db_dtype dt, size_t stride, int nk, int hd, float scale)
{
    float buf[WIDE_MAX];
    const float *wide = widen_block(buf, k, dt, stride, nk, hd, nq);
    if (wide) k = wide, dt = DB_F32, stride = (size_t)hd;
    int a = 0;
    for (; a + 4 <= nq; a += 4) {
        int j0 = 0;
        /* whole tiles of an f32 block at the common head sizes with the sizes as constants: no
         * masks, plain loads, the loop unrolled (16 rows x 4096 keys, f16 cache widened, one
         * layer, 2 threads: 3.16 -> 2.72 ms a call, medians of 5 interleaved runs) */
        if (dt == DB_F32 && hd == 128)
            for (; j0 + 4 <= nk; j0 += 4) scores_tile4(out + a, q + a, k, DB_F32, stride, j0, 4, 128, scale);
        else if (dt == DB_F32 && hd == 64)
            for (; j0 + 4 <= nk; j0 += 4) scores_tile4(out + a, q + a, k, DB_F32, stride, j0, 4, 64, scale);
        for (; j0 < nk; j0 += 4)
            scores_tile4(out + a, q + a, k, dt, stride, j0, nk - j0 < 4 ? nk - j0 : 4, hd, scale);
    }
    for (; a < nq; a++) scores_dt(out[a], q[a], k, dt, stride, nk, hd, scale);
}

/* o[a][i] += sum_j p[a][j] * v[j * stride + i] for nq queries (db_wsum_multi_kernel). Each
 * accumulator starts at o and takes one FMA per key in key order, as wsum_dt's: bitwise the same,
 * whatever the tile. Tiles:
 * - four queries x 64 elements (4 x 4 accumulators), when hd is a multiple of 64: each value
 *   vector loaded serves four FMAs. Against two queries x 128 elements (each vector serves two):
 *   16 rows x 4096 keys, one layer, 2 threads, 4.58 -> 3.87 ms a call (medians of 5 interleaved
 *   runs). The packed block (64 keys x 512 B) and the queries' probabilities and outputs overflow
 *   a 48 KB L1, so the two-query tile read its value vectors from L2 at about the rate its FMAs
 *   needed them;
 * - then two queries x 128 elements (2 x 8); a last partial chunk, and a query left over, take
 *   wsum_dt itself. */
static inline __attribute__((always_inline)) void wsum_tile4x64(float *const *o, const float *const *p,
                                                                 const void *v, db_dtype dt,
                                                                 size_t stride, int nk, int i0)
{
    __m512 A[4][4];
    _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)
        _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) A[q][t] = _mm512_loadu_ps(o[q] + i0 + 16 * t);
    const float *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
    for (int j = 0; j < nk; j++) {
        __m512 x0 = _mm512_set1_ps(p0[j]), x1 = _mm512_set1_ps(p1[j]);
        __m512 x2 = _mm512_set1_ps(p2[j]), x3 = _mm512_set1_ps(p3[j]);
        size_t vj = (size_t)j * stride + (size_t)i0;
        _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) {
            __m512 vt = load16(v, dt, vj + 16 * (size_t)t);
            A[0][t] = _mm512_fmadd_ps(x0, vt, A[0][t]);
            A[1][t] = _mm512_fmadd_ps(x1, vt, A[1][t]);
            A[2][t] = _mm512_fmadd_ps(x2, vt, A[2][t]);
            A[3][t] = _mm512_fmadd_ps(x3, vt, A[3][t]);
        }
    }
    _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)
        _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) _mm512_storeu_ps(o[q] + i0 + 16 * t, A[q][t]);
}

void db_wsum_multi_avx512(float *const *o, const float *const *p, int nq, const void *v,
                          db_dtype dt, size_t stride, int nk, int hd)
{
    float buf[WIDE_MAX];
    const float *wide = widen_block(buf, v, dt, stride, nk, hd, nq);
    if (wide) v = wide, dt = DB_F32, stride = (size_t)hd;
    const size_t es = dt == DB_F32 ? 4 : 2;
    int full = hd / 128 * 128, a = 0;
    for (; a + 4 <= nq && hd % 64 == 0; a += 4)
        for (int i0 = 0; i0 < hd; i0 += 64) wsum_tile4x64(o + a, p + a, v, dt, stride, nk, i0);
    for (; a + 2 <= nq; a += 2) {
        float *oa = o[a], *ob = o[a + 1];
        const float *pa = p[a], *pb = p[a + 1];
        for (int i0 = 0; i0 < full; i0 += 128) {
            __m512 A[8], B[8];
            _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) {
                A[t] = _mm512_loadu_ps(oa + i0 + 16 * t);
                B[t] = _mm512_loadu_ps(ob + i0 + 16 * t);
            }
            for (int j = 0; j < nk; j++) {
                __m512 x = _mm512_set1_ps(pa[j]), y = _mm512_set1_ps(pb[j]);
                size_t vj = (size_t)j * stride + (size_t)i0;
                _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) {
                    __m512 vt = load16(v, dt, vj + 16 * (size_t)t);
                    A[t] = _mm512_fmadd_ps(x, vt, A[t]);
                    B[t] = _mm512_fmadd_ps(y, vt, B[t]);
                }
            }
            _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) {
                _mm512_storeu_ps(oa + i0 + 16 * t, A[t]);
                _mm512_storeu_ps(ob + i0 + 16 * t, B[t]);
            }
        }
        if (full < hd) {
            const char *vt = (const char *)v + (size_t)full * es;
            wsum_dt(oa + full, pa, vt, dt, stride, nk, hd - full);
            wsum_dt(ob + full, pb, vt, dt, stride, nk, hd - full);
        }
    }
    for (; a < nq; a++) wsum_dt(o[a], p[a], v, dt, stride, nk, hd);
}

/* One query row's heads over consecutive cache rows (db_scores_heads_kernel, a decode step).
 * The walk goes key by key, each key's row front to back, so the cache is read as one stream
 * (the block walk reads a head's keys W apart). Per key, the row's query heads are taken 16 at
 * a time: NV vectors a head (hd = 16 NV), G query heads per kv head and NG = 16 / G kv heads a
 * chunk are compile-time (NG passed in: as 16 / G in the loop bound, UBSan's division check left
 * GCC unable to unroll the loop, a -Werror failure of the sanitizer build), so
 * every address is the row or q plus a constant, the 16 accumulators stay in registers, each
 * kv vector is loaded once for its G heads, and the 16 sums meet one hsum16. Each accumulator
 * takes scores_qreg's operations (zero start, v = 0..NV-1 in order, the same lane tree, then
 * the scale): bitwise one scores call per head. The 16 keys' results are then written out head
 * by head. The row ROWS_AHEAD keys on is prefetched: the hardware prefetchers alone left the
 * stream stalled while the FMAs ran (16 requests x 128 positions, f32 cache, 2 threads: 400 ->
 * 350 us a layer with 2 rows ahead; 4 and 8 rows ahead were slower again). The prefetch loops
 * are written in place: the same loops in a helper function measured 540 us against 430. */
#define ROWS_AHEAD 2

static inline __attribute__((always_inline)) void scores_heads_t(float *s, size_t sstride,
                                                                 const float *q, int nq,
                                                                 const void *k, db_dtype dt,
                                                                 size_t W, int nk, int NV, int G,
                                                                 int NG, float scale)
{
    const size_t es = dt == DB_F32 ? 4 : 2, hd = 16 * (size_t)NV;
    const __m512 vs = _mm512_set1_ps(scale);
    for (int h0 = 0; h0 < nq; h0 += 16) {
        const int nh = nq - h0 < 16 ? nq - h0 : 16; /* a multiple of G: whole kv heads */
        const float *qh = q + (size_t)h0 * hd;
        const char *kh = (const char *)k + (size_t)(h0 / G) * hd * es;
        for (int j0 = 0; j0 < nk; j0 += 16) {
            const int nj = nk - j0 < 16 ? nk - j0 : 16;
            float res[16][16]; /* [key][head] */
            for (int j = 0; j < nj; j++) {
                const char *row = kh + (size_t)(j0 + j) * W * es;
                const char *pr = row + ROWS_AHEAD * W * es;
                for (size_t b = 0; b < (size_t)(nh / G) * hd * es; b += 64) _mm_prefetch(pr + b, _MM_HINT_T0);
                __m512 acc[16];
                _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) {
                    _Pragma("GCC unroll 16") for (int g = 0; g < NG; g++) {
                        if (g * G < nh) {
                            __m512 kv = load16(row, dt, (size_t)g * hd + 16 * (size_t)v);
                            _Pragma("GCC unroll 16") for (int a = 0; a < G; a++)
                                acc[g * G + a] = _mm512_fmadd_ps(
                                    _mm512_loadu_ps(qh + (size_t)(g * G + a) * hd + 16 * v), kv,
                                    acc[g * G + a]);
                        }
                    }
                }
                _mm512_storeu_ps(res[j], _mm512_mul_ps(hsum16(acc), vs));
            }
            for (int i = 0; i < nh; i++) {
                float *si = s + (size_t)(h0 + i) * sstride + j0;
                for (int j = 0; j < nj; j++) si[j] = res[j][i];
            }
        }
    }
}

/* o[h] += sum over keys of p[h][j] v(j, h / G) (db_wsum_heads_kernel), HEADS_KEYS keys per pass
 * over the heads: a head's NV accumulators start at o, take one FMA per key in key order and go
 * back, wsum_dt's operations, bitwise; 4 keys a pass spend a fourth of the accumulators' loads
 * and stores of one, and their rows are 4 W back to back. */
#define HEADS_KEYS 4
static inline __attribute__((always_inline)) void wsum_heads_t(float *o, const float *p,
                                                               size_t pstride, int nq,
                                                               const void *v, db_dtype dt,
                                                               size_t W, int nk, int NV, int G)
{
    const size_t es = dt == DB_F32 ? 4 : 2, hd = 16 * (size_t)NV;
    for (int j0 = 0; j0 < nk; j0 += HEADS_KEYS) {
        const int nj = nk - j0 < HEADS_KEYS ? nk - j0 : HEADS_KEYS;
        const char *blk = (const char *)v + (size_t)j0 * W * es;
        for (int j = 0; j < nj; j++) {
            const char *pr = blk + (size_t)(ROWS_AHEAD + j) * W * es;
            for (size_t b = 0; b < (size_t)(nq / G) * hd * es; b += 64) _mm_prefetch(pr + b, _MM_HINT_T0);
        }
        for (int h = 0; h < nq; h++) {
            float *oh = o + (size_t)h * hd;
            const float *ph = p + (size_t)h * pstride + j0;
            const char *vh = blk + (size_t)(h / G) * hd * es;
            __m512 acc[8];
            _Pragma("GCC unroll 8") for (int t = 0; t < NV; t++) acc[t] = _mm512_loadu_ps(oh + 16 * t);
            _Pragma("GCC unroll 4") for (int j = 0; j < HEADS_KEYS; j++) {
                if (j >= nj) break;
                __m512 pj = _mm512_set1_ps(ph[j]);
                _Pragma("GCC unroll 8") for (int t = 0; t < NV; t++)
                    acc[t] = _mm512_fmadd_ps(pj, load16(vh, dt, (size_t)j * W + 16 * (size_t)t), acc[t]);
            }
            _Pragma("GCC unroll 8") for (int t = 0; t < NV; t++) _mm512_storeu_ps(oh + 16 * t, acc[t]);
        }
    }
}

/* the shapes with a compiled loop, head sizes 128 and 64 and 1, 2, 4 or 8 query heads a kv
 * head: HEADS_DISPATCH(CALL) runs CALL(NV, G, DT) for the call's (hd, group, dt) when it is
 * one and returns; any other shape falls through to the one-head loops, head by head (the
 * same values) */
#define HEADS_SHAPE(CALL, NV, G, DT)                                                             \
    if (hd == 16 * NV && group == G && dt == DT) {                                               \
        CALL(NV, G, DT);                                                                         \
        return;                                                                                  \
    }
#define HEADS_SHAPES(CALL, DT)                                                                   \
    HEADS_SHAPE(CALL, 8, 1, DT) HEADS_SHAPE(CALL, 8, 2, DT) HEADS_SHAPE(CALL, 8, 4, DT)         \
    HEADS_SHAPE(CALL, 8, 8, DT) HEADS_SHAPE(CALL, 4, 1, DT) HEADS_SHAPE(CALL, 4, 2, DT)         \
    HEADS_SHAPE(CALL, 4, 4, DT) HEADS_SHAPE(CALL, 4, 8, DT)
#define HEADS_DISPATCH(CALL) HEADS_SHAPES(CALL, DB_F32) HEADS_SHAPES(CALL, DB_F16)

void db_scores_heads_avx512(float *s, size_t sstride, const float *q, int nq, int group,
                            const void *k, db_dtype dt, size_t W, int nk, int hd, float scale)
{
#define CALL(NV, G, DT) scores_heads_t(s, sstride, q, nq, k, DT, W, nk, NV, G, 16 / G, scale)
    HEADS_DISPATCH(CALL)
#undef CALL
    const size_t es = dt == DB_F32 ? 4 : 2;
    for (int h = 0; h < nq; h++)
        scores_dt(s + (size_t)h * sstride, q + (size_t)h * hd,
                  (const char *)k + (size_t)(h / group) * hd * es, dt, W, nk, hd, scale);
}

void db_wsum_heads_avx512(float *o, const float *p, size_t pstride, int nq, int group,
                          const void *v, db_dtype dt, size_t W, int nk, int hd)
{
#define CALL(NV, G, DT) wsum_heads_t(o, p, pstride, nq, v, DT, W, nk, NV, G)
    HEADS_DISPATCH(CALL)
#undef CALL
    const size_t es = dt == DB_F32 ? 4 : 2;
    for (int h = 0; h < nq; h++)
        wsum_dt(o + (size_t)h * hd, p + (size_t)h * pstride,
                (const char *)v + (size_t)(h / group) * hd * es, dt, W, nk, hd);
}
