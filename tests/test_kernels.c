/* test_kernels.c — the CPU compute kernels against naive double-precision C written here.
 *
 * 1. Every SIMD matmul kernel this build has and this CPU runs (db_matmul_kernels: AVX-512,
 *    AVX2+FMA+F16C on x86, NEON on aarch64; skipped when none), each forced in turn, against
 *    db_matmul_ref and a double reference, for f32 / bf16 / f16 weights, N = 1..9, 16, 17, 33
 *    (partial register tiles and row groups), I in {1,7,8,15,16,17,64,100,257,600} (masked
 *    tails, several K blocks), O in {1,5,16,33} (partial weight-row tiles), with and without
 *    accumulate; a kernel called on a slice [o0, o1) of the weight rows writes exactly those
 *    columns; each kernel's attention loops over f32 and f16 caches. DB_CPU_KERNEL=name forces a kernel in the backend; an unknown name is refused.
 *
 *    Error bound: a dot product of length I in f32 has, whatever the summation order, an error
 *    below I * u * S (u = 2^-24, S = sum_k |w_k x_k|) and typically sqrt(I) * u * S. We allow
 *        |y - y_exact| <= 1e-5 * sqrt(I) * (S + |y0|)     (y0 = the accumulated-into value)
 *    for every kernel, and the same between two kernels. 1e-5 * sqrt(I) is > I * u for
 *    I < 2.9e4, so it also covers the worst case here. The bound is the SAME for f32, bf16 and
 *    f16 weights: both 16-bit formats widen to f32 exactly, so the weight dtype changes the
 *    weights, never the arithmetic.
 *
 * 2. Batch invariance: every kernel (SIMD and reference) gives BITWISE the same row result
 *    whether the row is computed alone or among N others at any position, with and without
 *    accumulate; the CPU backend's matmul in deterministic mode likewise through
 *    be->ops->matmul for N up to 40 (where a non-deterministic backend would use OpenBLAS),
 *    with several threads, once per kernel. The non-deterministic backend (OpenBLAS for N >= 16, bf16/f16 weights
 *    converted in 256-row panels) is checked for accuracy only.
 *
 * 3. The other CPU ops against double-precision references: rmsnorm (also in place), rope,
 *    attention (several key ranges incl. an empty one, GQA; f32 and f16 caches, each row alone
 *    bitwise its result among all), kv_store_f16, swiglu, embed (f32/bf16/f16
 *    tables), copy_rows (strides, index maps), scale_softcap, topk (ties -> smaller id), probs
 *    (top_k / top_p / both, temperature), dynconv (both phases), pair_scores (f32/bf16/f16
 *    codebooks, rank above the 1024 stack buffer).
 *
 * 4. bf16 / f16 conversions: exhaustive 16-bit -> f32 -> 16-bit round trips (subnormals, inf,
 *    NaN), f32 -> 16-bit round-to-nearest-even at every midpoint between neighbouring 16-bit
 *    values and one f32 ulp either side, overflow to inf, NaN stays NaN (also signalling NaNs
 *    whose payload is in the low bits), plus random f32 bit patterns, all against a table
 *    search written here.
 */
#include "config.h"
#include "backend.h"
#include "cpu/cpu_kernels.h"
#include "tap.h"
#include "base/util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static db_rng rng;

static float urand(float lo, float hi)
{
    return lo + (hi - lo) * (float)db_rng_uniform(&rng);
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ---------------------------------------------------------------- independent decoders */

static double dec_f16(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double dec_bf16(uint16_t h)
{
    int e = (h >> 7) & 255, m = h & 127;
    double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

static double dec(db_dtype dt, const void *p, size_t i)
{
    switch (dt) {
    case DB_F32: return ((const float *)p)[i];
    case DB_BF16: return dec_bf16(((const uint16_t *)p)[i]);
    case DB_F16: return dec_f16(((const uint16_t *)p)[i]);
    default: break; /* quantized weights: test_quant.c */
    }
    return NAN;
}

/* a random matrix of `count` values in [-1, 1] stored in dtype dt */
static void *rand_weights(db_dtype dt, size_t count)
{
    void *w = malloc(count * db_dtype_size(dt) + 1);
    for (size_t i = 0; i < count; i++) {
        float v = urand(-1.0f, 1.0f);
        if (dt == DB_F32) ((float *)w)[i] = v;
        else if (dt == DB_BF16) ((uint16_t *)w)[i] = db_f32_to_bf16(v);
        else ((uint16_t *)w)[i] = db_f32_to_f16(v);
    }
    return w;
}

static void rand_fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = urand(lo, hi);
}

static const db_dtype dtypes[3] = {DB_F32, DB_BF16, DB_F16};

/* ---------------------------------------------------------------- 1. matmul accuracy */

typedef struct {
    const char *name;
    db_matmul_kernel fn;
} kernel;

static double tol_dot(int I) { return 1e-5 * sqrt((double)I); }

static void matmul_accuracy(const kernel *k)
{
    static const int Ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33};
    static const int Is[] = {1, 7, 8, 15, 16, 17, 64, 100, 257, 600};
    static const int Os[] = {1, 5, 16, 33};
    for (int di = 0; di < 3; di++) {
        db_dtype dt = dtypes[di];
        for (int acc = 0; acc <= 1; acc++) {
            double worst_ref = 0, worst_exact = 0; /* in units of the bound */
            int combos = 0, bad = 0;
            char first_bad[200] = "";
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
                for (size_t ii = 0; ii < sizeof Is / sizeof *Is; ii++)
                    for (size_t oi = 0; oi < sizeof Os / sizeof *Os; oi++) {
                        int N = Ns[ni], I = Is[ii], O = Os[oi];
                        void *w = rand_weights(dt, (size_t)O * I);
                        float *x = malloc(sizeof(float) * (size_t)N * I);
                        float *y0 = malloc(sizeof(float) * (size_t)N * O);
                        float *yk = malloc(sizeof(float) * (size_t)N * O);
                        float *yr = malloc(sizeof(float) * (size_t)N * O);
                        rand_fill(x, (size_t)N * I, -2.0f, 2.0f);
                        rand_fill(y0, (size_t)N * O, -4.0f, 4.0f);
                        memcpy(yk, y0, sizeof(float) * (size_t)N * O);
                        memcpy(yr, y0, sizeof(float) * (size_t)N * O);
                        k->fn(yk, x, w, dt, N, O, I, 0, O, acc);
                        db_matmul_ref(yr, x, w, dt, N, O, I, 0, O, acc);
                        for (int r = 0; r < N; r++)
                            for (int o = 0; o < O; o++) {
                                double s = acc ? y0[(size_t)r * O + o] : 0.0, S = fabs(s);
                                for (int i = 0; i < I; i++) {
                                    double t = dec(dt, w, (size_t)o * I + i) * x[(size_t)r * I + i];
                                    s += t;
                                    S += fabs(t);
                                }
                                double b = tol_dot(I) * S + 1e-30;
                                double a = yk[(size_t)r * O + o], c = yr[(size_t)r * O + o];
                                double er = fabs(a - c) / b, ee = fmax(fabs(a - s), fabs(c - s)) / b;
                                if (!(er <= 1.0 && ee <= 1.0)) {
                                    if (!bad++)
                                        snprintf(first_bad, sizeof first_bad,
                                                 "N=%d I=%d O=%d row %d col %d: kernel %.9g ref %.9g exact %.9g bound %.3g",
                                                 N, I, O, r, o, a, c, s, b);
                                }
                                if (er > worst_ref || er != er) worst_ref = er;
                                if (ee > worst_exact || ee != ee) worst_exact = ee;
                            }
                        combos++;
                        free(w);
                        free(x);
                        free(y0);
                        free(yk);
                        free(yr);
                    }
            tap_ok(!bad, "%s %s%s: %d shapes within 1e-5*sqrt(I)*sum|w.x| of ref and exact "
                   "(worst %.3g / %.3g of the bound)",
                   k->name, db_dtype_name(dt), acc ? " accumulate" : "", combos, worst_ref,
                   worst_exact);
            if (bad) tap_diag("%d bad, first: %s", bad, first_bad);
        }
    }
}

/* a kernel on weight rows [o0, o1) writes exactly columns o0..o1-1 of every row, bitwise as
 * the full call does */
static void matmul_slices(const kernel *k)
{
    int bad = 0, cases = 0;
    for (int di = 0; di < 3; di++) {
        db_dtype dt = dtypes[di];
        const int N = 6, I = 37, O = 21;
        void *w = rand_weights(dt, (size_t)O * I);
        float x[6 * 37], full[6 * 21], part[6 * 21];
        rand_fill(x, sizeof x / sizeof *x, -1, 1);
        k->fn(full, x, w, dt, N, O, I, 0, O, 0);
        static const int cuts[][2] = {{0, 1}, {3, 19}, {20, 21}, {0, 16}, {16, 21}, {5, 5}};
        for (int c = 0; c < 6; c++) {
            for (int i = 0; i < N * O; i++) part[i] = -12345.0f;
            k->fn(part, x, w, dt, N, O, I, cuts[c][0], cuts[c][1], 0);
            for (int r = 0; r < N; r++)
                for (int o = 0; o < O; o++) {
                    float v = part[r * O + o];
                    int inside = o >= cuts[c][0] && o < cuts[c][1];
                    if (inside ? !same_bits(v, full[r * O + o]) : v != -12345.0f) bad++;
                }
            cases++;
        }
        free(w);
    }
    tap_ok(!bad, "%s: %d weight-row slices [o0, o1) write exactly their columns (bitwise)",
           k->name, cases);
}

/* attention's scores / wsum of the kernel called `name`, against double: lengths 1..40 and the
 * head sizes 64, 100, 128, 129, 200, 256 (wsum over 1..37 keys of a strided value cache); a
 * key's score bitwise the same whether 1..37 keys share the call; wsum over keys split in two
 * calls (the second accumulating) bitwise the same as one call */
static void attn_loops(const char *name)
{
    db_scores_kernel scores;
    db_wsum_kernel wsum;
    db_attn_kernels(name, &scores, &wsum);
    static const int extra[] = {64, 100, 128, 129, 200, 256};
    double worst_d = 0, worst_w = 0;
    int bad = 0;
    enum { MAXN = 256, KEYS = 37, STRIDE = 300 };
    float *v = malloc(sizeof(float) * KEYS * STRIDE);
    rand_fill(v, KEYS * STRIDE, -2, 2);
    for (int t = 0; t < 46; t++) {
        int n = t < 40 ? t + 1 : extra[t - 40], nk = 1 + t % KEYS;
        float a[MAXN], b[MAXN], o[MAXN], p[KEYS];
        rand_fill(a, (size_t)n, -2, 2);
        rand_fill(b, (size_t)n, -2, 2);
        rand_fill(p, KEYS, 0, 1);
        /* scores of a against nk keys: b, then value rows (stride STRIDE, from offset 5) */
        float sc[KEYS], kk[KEYS * STRIDE];
        memcpy(kk, v, sizeof kk);
        memcpy(kk + 5, b, sizeof(float) * (size_t)n);
        scores(sc, a, kk + 5, STRIDE, nk, n, 0.5f);
        float all[KEYS]; /* a key's score does not depend on how many keys share the call */
        scores(all, a, kk + 5, STRIDE, KEYS, n, 0.5f);
        if (memcmp(all, sc, sizeof(float) * (size_t)nk)) bad++;
        for (int j = 0; j < nk; j++) {
            double sj = 0, Sj = 0;
            for (int i = 0; i < n; i++) {
                double t = (double)a[i] * kk[(size_t)j * STRIDE + 5 + i];
                sj += t, Sj += fabs(t);
            }
            double e = fabs(sc[j] - 0.5 * sj) / (0.5 * tol_dot(n) * Sj + 1e-30);
            if (e > worst_d || e != e) worst_d = e;
            if (!(e <= 1.0)) bad++;
        }
        memset(o, 0, sizeof o); /* wsum accumulates into o */
        wsum(o, p, v + 3, STRIDE, nk, n); /* offset 3: unaligned rows */
        /* the same keys in two calls, the second adding into the first's o: bitwise equal */
        float o2[MAXN] = {0};
        int cut = nk / 3;
        wsum(o2, p, v + 3, STRIDE, cut, n);
        wsum(o2, p + cut, v + 3 + (size_t)cut * STRIDE, STRIDE, nk - cut, n);
        if (memcmp(o, o2, sizeof(float) * (size_t)n)) bad++;
        for (int i = 0; i < n; i++) {
            double x = 0, X = 0;
            for (int j = 0; j < nk; j++) {
                double pv = (double)p[j] * v[(size_t)j * STRIDE + 3 + i];
                x += pv;
                X += fabs(pv);
            }
            double ew = fabs(o[i] - x) / (tol_dot(nk) * X + 1e-30);
            if (ew > worst_w || ew != ew) worst_w = ew;
            if (!(ew <= 1.0)) bad++;
        }
    }
    free(v);
    tap_ok(!bad, "%s attention loops: scores and wsum within 1e-5*sqrt(n)*sum|terms| of double, "
           "n = 1..40, 64..256 (worst %.3g / %.3g of the bound)", name, worst_d, worst_w);
}

/* the one-query attention loops of the family called `name`, f32 and f16 caches */
typedef struct {
    db_scores_kernel scores;
    db_wsum_kernel wsum;
    db_scores16_kernel scores16;
    db_wsum16_kernel wsum16;
} attn_family;

static attn_family attn_family_of(const char *name)
{
    attn_family f;
    db_attn_kernels(name, &f.scores, &f.wsum);
    db_attn_kernels16(name, &f.scores16, &f.wsum16);
    return f;
}

/* the same loops over an f16 cache (--kv-dtype f16): keys and values are random f16 values,
 * the reference takes them as those values (decoded here); the same bound, the same bitwise
 * properties, and bitwise the kernel's f32 loops on the widened cache */
static void attn_loops16(const char *name)
{
    const attn_family f = attn_family_of(name);
    const db_scores_kernel scores = f.scores;
    const db_wsum_kernel wsum = f.wsum;
    const db_scores16_kernel scores16 = f.scores16;
    const db_wsum16_kernel wsum16 = f.wsum16;
    static const int extra[] = {64, 100, 128, 129, 200, 256};
    double worst_d = 0, worst_w = 0;
    int bad = 0, differ = 0;
    enum { MAXN = 256, KEYS = 37, STRIDE = 300 };
    uint16_t *c16 = malloc(sizeof(uint16_t) * KEYS * STRIDE);
    float *c32 = malloc(sizeof(float) * KEYS * STRIDE);
    for (int i = 0; i < KEYS * STRIDE; i++) {
        c16[i] = db_f32_to_f16(urand(-2, 2));
        c32[i] = (float)dec_f16(c16[i]);
    }
    for (int t = 0; t < 46; t++) {
        int n = t < 40 ? t + 1 : extra[t - 40], nk = 1 + t % KEYS;
        float a[MAXN], o[MAXN], o2[MAXN] = {0}, o32[MAXN] = {0}, p[KEYS];
        float sc[KEYS], all[KEYS], sc32[KEYS];
        rand_fill(a, (size_t)n, -2, 2);
        rand_fill(p, KEYS, 0, 1);
        size_t off = (size_t)(t % 7); /* unaligned rows */
        scores16(sc, a, c16 + off, STRIDE, nk, n, 0.5f);
        scores16(all, a, c16 + off, STRIDE, KEYS, n, 0.5f);
        scores(sc32, a, c32 + off, STRIDE, nk, n, 0.5f);
        if (memcmp(all, sc, sizeof(float) * (size_t)nk)) bad++;
        differ += memcmp(sc32, sc, sizeof(float) * (size_t)nk) != 0;
        for (int j = 0; j < nk; j++) {
            double sj = 0, Sj = 0;
            for (int i = 0; i < n; i++) {
                double x = (double)a[i] * dec_f16(c16[(size_t)j * STRIDE + off + i]);
                sj += x, Sj += fabs(x);
            }
            double e = fabs(sc[j] - 0.5 * sj) / (0.5 * tol_dot(n) * Sj + 1e-30);
            if (e > worst_d || e != e) worst_d = e;
            if (!(e <= 1.0)) bad++;
        }
        memset(o, 0, sizeof o);
        wsum16(o, p, c16 + off, STRIDE, nk, n);
        int cut = nk / 3;
        wsum16(o2, p, c16 + off, STRIDE, cut, n);
        wsum16(o2, p + cut, c16 + off + (size_t)cut * STRIDE, STRIDE, nk - cut, n);
        if (memcmp(o, o2, sizeof(float) * (size_t)n)) bad++;
        wsum(o32, p, c32 + off, STRIDE, nk, n);
        differ += memcmp(o, o32, sizeof(float) * (size_t)n) != 0;
        for (int i = 0; i < n; i++) {
            double x = 0, X = 0;
            for (int j = 0; j < nk; j++) {
                double pv = (double)p[j] * dec_f16(c16[(size_t)j * STRIDE + off + i]);
                x += pv;
                X += fabs(pv);
            }
            double ew = fabs(o[i] - x) / (tol_dot(nk) * X + 1e-30);
            if (ew > worst_w || ew != ew) worst_w = ew;
            if (!(ew <= 1.0)) bad++;
        }
    }
    free(c16);
    free(c32);
    tap_ok(!bad, "%s f16-cache attention loops: scores and wsum within 1e-5*sqrt(n)*sum|terms| of "
           "double over the f16 values, n = 1..40, 64..256 (worst %.3g / %.3g of the bound); a "
           "score independent of the keys sharing the call, split wsum bitwise one call",
           name, worst_d, worst_w);
    tap_ok(!differ, "%s f16-cache attention loops: bitwise the f32 loops on the widened cache "
           "(%d cases differ)", name, differ);
}

/* the several-query loops of a kernel family (when it has them): each query's scores and
 * wsum bitwise what one call of the family's one-query loops gives it, over f32 and f16
 * caches, 1..9 queries (so whole tiles and left-over queries), 1..70 keys (partial key
 * groups), head sizes with and without a tail; o starts non-zero (wsum accumulates) */
static void attn_multi(const char *name)
{
    db_scores_multi_kernel sm;
    db_wsum_multi_kernel wm;
    db_attn_multi_kernels(name, &sm, &wm);
    if (!sm || !wm) return;
    const attn_family f = attn_family_of(name);
    static const int hds[] = {8, 64, 100, 128, 129, 200, 256};
    enum { NQ = 9, KEYS = 70, MAXHD = 256 };
    float *k32 = malloc(sizeof(float) * KEYS * MAXHD), *q = malloc(sizeof(float) * NQ * MAXHD);
    uint16_t *k16 = malloc(sizeof(uint16_t) * KEYS * MAXHD);
    float *o1 = malloc(sizeof(float) * NQ * MAXHD), *o2 = malloc(sizeof(float) * NQ * MAXHD);
    float s1[NQ][KEYS], s2[NQ][KEYS], p[NQ][KEYS];
    int bad = 0, cases = 0;
    for (int i = 0; i < KEYS * MAXHD; i++) {
        k16[i] = db_f32_to_f16(urand(-2, 2));
        k32[i] = urand(-2, 2);
    }
    for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
        for (int nq = 1; nq <= NQ; nq++)
            for (int nk = 1 + nq % 4; nk <= KEYS; nk += 7 + nq)
                for (int f16 = 0; f16 < 2; f16++) {
                    int hd = hds[hi];
                    const void *kc = f16 ? (const void *)k16 : (const void *)k32;
                    float *out[NQ], *oo[NQ];
                    const float *qq[NQ], *pp[NQ];
                    rand_fill(q, (size_t)NQ * MAXHD, -2, 2);
                    rand_fill(o1, (size_t)NQ * MAXHD, -1, 1);
                    memcpy(o2, o1, sizeof(float) * NQ * MAXHD);
                    for (int a = 0; a < nq; a++) {
                        rand_fill(p[a], KEYS, 0, 1);
                        /* queries an odd number of floats apart: unaligned */
                        qq[a] = q + (size_t)a * (hd + 1), out[a] = s2[a];
                        oo[a] = o2 + (size_t)a * hd, pp[a] = p[a];
                        if (f16) {
                            f.scores16(s1[a], qq[a], k16, (size_t)hd, nk, hd, 0.25f);
                            f.wsum16(o1 + (size_t)a * hd, p[a], k16, (size_t)hd, nk, hd);
                        } else {
                            f.scores(s1[a], qq[a], k32, (size_t)hd, nk, hd, 0.25f);
                            f.wsum(o1 + (size_t)a * hd, p[a], k32, (size_t)hd, nk, hd);
                        }
                    }
                    db_dtype dt = f16 ? DB_F16 : DB_F32;
                    sm(out, qq, nq, kc, dt, (size_t)hd, nk, hd, 0.25f);
                    wm(oo, pp, nq, kc, dt, (size_t)hd, nk, hd);
                    for (int a = 0; a < nq; a++)
                        if (memcmp(s1[a], s2[a], sizeof(float) * (size_t)nk)) bad++;
                    if (memcmp(o1, o2, sizeof(float) * (size_t)nq * hd)) bad++;
                    cases++;
                }
    free(k32), free(k16), free(q), free(o1), free(o2);
    tap_ok(!bad, "%s several-query attention loops: bitwise the one-query loops per query, f32 "
           "and f16 caches, 1..9 queries, 1..70 keys, head sizes 8..256 (%d cases, %d differ)",
           name, cases, bad);
}

/* the one-row-many-heads loops of a kernel family (when it has them): every score and output
 * bitwise what one call of the family's one-query loops per head gives, over f32 and f16
 * caches; head sizes with a compiled loop (64, 128) and without (8, 72), groups 1, 2, 3, 4, 8,
 * 1..5 kv heads (so 1..40 query heads: partial and several chunks of 16), 1..37 keys (partial
 * blocks of 16 and of 4), cache rows wider than the heads read (an offset slice), o non-zero */
static void attn_heads(const char *name)
{
    db_scores_heads_kernel sh;
    db_wsum_heads_kernel wh;
    db_attn_heads_kernels(name, &sh, &wh);
    if (!sh || !wh) return;
    const attn_family f = attn_family_of(name);
    static const int hds[] = {8, 64, 72, 128}, groups[] = {1, 2, 3, 4, 8};
    enum { KEYS = 37, MAXKV = 5, MAXHD = 128, MAXQ = 8 * MAXKV, SSTR = KEYS + 3 };
    const size_t W = (size_t)(MAXKV + 1) * MAXHD, cells = (size_t)KEYS * W;
    float *k32 = malloc(sizeof(float) * cells), *q = malloc(sizeof(float) * MAXQ * MAXHD);
    uint16_t *k16 = malloc(sizeof(uint16_t) * cells);
    float *o1 = malloc(sizeof(float) * MAXQ * MAXHD), *o2 = malloc(sizeof(float) * MAXQ * MAXHD);
    float *s1 = malloc(sizeof(float) * MAXQ * SSTR), *s2 = malloc(sizeof(float) * MAXQ * SSTR);
    float *p = malloc(sizeof(float) * MAXQ * SSTR);
    int bad = 0, cases = 0;
    for (size_t i = 0; i < cells; i++) {
        k16[i] = db_f32_to_f16(urand(-2, 2));
        k32[i] = urand(-2, 2);
    }
    for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
        for (size_t gi = 0; gi < sizeof groups / sizeof *groups; gi++)
            for (int nkv = 1; nkv <= MAXKV; nkv++)
                for (int nk = 1 + nkv % 3; nk <= KEYS; nk += 5 + nkv)
                    for (int f16 = 0; f16 < 2; f16++) {
                        const int hd = hds[hi], group = groups[gi], nq = nkv * group;
                        const size_t off = (size_t)(nkv % 2) * hd; /* the slice's first head */
                        rand_fill(q, (size_t)nq * hd, -2, 2);
                        rand_fill(p, (size_t)nq * SSTR, 0, 1);
                        rand_fill(o1, (size_t)nq * hd, -1, 1);
                        memcpy(o2, o1, sizeof(float) * (size_t)nq * hd);
                        memset(s1, 0, sizeof(float) * MAXQ * SSTR);
                        memset(s2, 0, sizeof(float) * MAXQ * SSTR);
                        for (int h = 0; h < nq; h++) {
                            const size_t kh = off + (size_t)(h / group) * hd;
                            float *sh1 = s1 + (size_t)h * SSTR, *oh = o1 + (size_t)h * hd;
                            const float *qh = q + (size_t)h * hd, *ph = p + (size_t)h * SSTR;
                            if (f16) {
                                f.scores16(sh1, qh, k16 + kh, W, nk, hd, 0.25f);
                                f.wsum16(oh, ph, k16 + kh, W, nk, hd);
                            } else {
                                f.scores(sh1, qh, k32 + kh, W, nk, hd, 0.25f);
                                f.wsum(oh, ph, k32 + kh, W, nk, hd);
                            }
                        }
                        const db_dtype dt = f16 ? DB_F16 : DB_F32;
                        const void *kc = f16 ? (const void *)(k16 + off) : (const void *)(k32 + off);
                        sh(s2, SSTR, q, nq, group, kc, dt, W, nk, hd, 0.25f);
                        wh(o2, p, SSTR, nq, group, kc, dt, W, nk, hd);
                        if (memcmp(s1, s2, sizeof(float) * MAXQ * SSTR)) bad++;
                        if (memcmp(o1, o2, sizeof(float) * (size_t)nq * hd)) bad++;
                        cases++;
                    }
    free(k32), free(k16), free(q), free(o1), free(o2), free(s1), free(s2), free(p);
    tap_ok(!bad, "%s one-row-many-heads attention loops: bitwise the one-query loops per head, "
           "f32 and f16 caches, head sizes 8..128, groups 1..8, 1..40 heads, 1..37 keys "
           "(%d cases, %d differ)", name, cases, bad);
}

/* ---------------------------------------------------------------- 2. batch invariance */

static void kernel_batch_invariance(const kernel *k)
{
    static const int Ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 33};
    static const int Is[] = {7, 16, 17, 100, 257, 600};
    static const int Os[] = {5, 13, 33};
    for (int di = 0; di < 3; di++) {
        db_dtype dt = dtypes[di];
        int bad = 0, checks = 0;
        char first[160] = "";
        for (size_t ii = 0; ii < sizeof Is / sizeof *Is; ii++)
            for (size_t oi = 0; oi < sizeof Os / sizeof *Os; oi++) {
                int I = Is[ii], O = Os[oi];
                void *w = rand_weights(dt, (size_t)O * I);
                float *v = malloc(sizeof(float) * (size_t)I);
                float *yv0 = malloc(sizeof(float) * (size_t)O);
                float *alone[2];
                rand_fill(v, (size_t)I, -3, 3);
                rand_fill(yv0, (size_t)O, -1, 1);
                for (int acc = 0; acc <= 1; acc++) {
                    alone[acc] = malloc(sizeof(float) * (size_t)O);
                    memcpy(alone[acc], yv0, sizeof(float) * (size_t)O);
                    k->fn(alone[acc], v, w, dt, 1, O, I, 0, O, acc);
                }
                for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
                    int N = Ns[ni];
                    float *x = malloc(sizeof(float) * (size_t)N * I);
                    float *y = malloc(sizeof(float) * (size_t)N * O);
                    for (int p = 0; p < N; p++) {
                        rand_fill(x, (size_t)N * I, -3, 3);
                        memcpy(x + (size_t)p * I, v, sizeof(float) * (size_t)I);
                        for (int acc = 0; acc <= 1; acc++) {
                            rand_fill(y, (size_t)N * O, -1, 1);
                            memcpy(y + (size_t)p * O, yv0, sizeof(float) * (size_t)O);
                            k->fn(y, x, w, dt, N, O, I, 0, O, acc);
                            checks++;
                            if (memcmp(y + (size_t)p * O, alone[acc], sizeof(float) * (size_t)O)) {
                                if (!bad++)
                                    snprintf(first, sizeof first, "I=%d O=%d N=%d position %d acc %d",
                                             I, O, N, p, acc);
                            }
                        }
                    }
                    free(x);
                    free(y);
                }
                free(w);
                free(v);
                free(yv0);
                free(alone[0]);
                free(alone[1]);
            }
        tap_ok(!bad, "%s %s: a row's result is bitwise the same alone or at any position among "
               "N = 1..9, 17, 33 rows (%d batches)", k->name, db_dtype_name(dt), checks);
        if (bad) tap_diag("%d differ, first: %s", bad, first);
    }
}

static void backend_matmul(db_backend *det, db_backend *fast)
{
    static const int Ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40};
    /* O = 300 spans two of the 256-row bf16/f16 sgemm panels; O * I large enough to thread */
    const int O = 300, I = 129;
    for (int di = 0; di < 3; di++) {
        db_dtype dt = dtypes[di];
        void *w = rand_weights(dt, (size_t)O * I);
        db_weight W = {w, dt, O, I};
        float *v = malloc(sizeof(float) * I), *y0 = malloc(sizeof(float) * O);
        rand_fill(v, I, -2, 2);
        rand_fill(y0, O, -1, 1);
        float *alone[2];
        for (int acc = 0; acc <= 1; acc++) {
            alone[acc] = malloc(sizeof(float) * O);
            memcpy(alone[acc], y0, sizeof(float) * O);
            det->ops->matmul(det, alone[acc], v, &W, 1, acc);
        }
        int bad_inv = 0, bad_acc = 0, checks = 0;
        double worst = 0;
        char first[160] = "";
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
            int N = Ns[ni];
            float *x = malloc(sizeof(float) * (size_t)N * I);
            float *y = malloc(sizeof(float) * (size_t)N * O);
            float *yf = malloc(sizeof(float) * (size_t)N * O);
            float *ys = malloc(sizeof(float) * (size_t)N * O);
            static const int where[] = {0, 1, 3, 4, 15, 16, 39};
            for (size_t pi = 0; pi < sizeof where / sizeof *where; pi++) {
                int p = where[pi] < N ? where[pi] : N - 1;
                for (int acc = 0; acc <= 1; acc++) {
                    rand_fill(x, (size_t)N * I, -2, 2);
                    memcpy(x + (size_t)p * I, v, sizeof(float) * I);
                    rand_fill(ys, (size_t)N * O, -1, 1);
                    memcpy(ys + (size_t)p * O, y0, sizeof(float) * O);
                    memcpy(y, ys, sizeof(float) * (size_t)N * O);
                    memcpy(yf, ys, sizeof(float) * (size_t)N * O);
                    det->ops->matmul(det, y, x, &W, N, acc);
                    fast->ops->matmul(fast, yf, x, &W, N, acc);
                    checks++;
                    if (memcmp(y + (size_t)p * O, alone[acc], sizeof(float) * O) && !bad_inv++)
                        snprintf(first, sizeof first, "N=%d position %d acc %d", N, p, acc);
                    /* both backends: every row accurate (once per N and acc) */
                    for (int r = 0; r < N && pi == 0; r++)
                        for (int o = 0; o < O; o++) {
                            double y_in = acc ? ys[(size_t)r * O + o] : 0.0;
                            double s = y_in, S = fabs(y_in);
                            for (int i = 0; i < I; i++) {
                                double t = dec(dt, w, (size_t)o * I + i) * x[(size_t)r * I + i];
                                s += t;
                                S += fabs(t);
                            }
                            double b = tol_dot(I) * S + 1e-30;
                            double e = fmax(fabs(y[(size_t)r * O + o] - s),
                                            fabs(yf[(size_t)r * O + o] - s)) / b;
                            if (e > worst || e != e) worst = e;
                            if (!(e <= 1.0)) bad_acc++;
                        }
                }
            }
            free(ys);
            free(x);
            free(y);
            free(yf);
        }
        tap_ok(!bad_inv, "backend matmul (deterministic, %d threads) %s: row bitwise the same "
               "alone or among N = 1..40 rows (%d batches)", det->threads, db_dtype_name(dt), checks);
        if (bad_inv) tap_diag("%d differ, first: %s", bad_inv, first);
        tap_ok(!bad_acc, "backend matmul %s, deterministic and default (OpenBLAS from N = 16): "
               "within 1e-5*sqrt(I)*sum|w.x| of exact (worst %.3g of the bound)",
               db_dtype_name(dt), worst);
        free(w);
        free(v);
        free(y0);
        free(alone[0]);
        free(alone[1]);
    }
}

/* ---------------------------------------------------------------- 3. other ops */

/* |a - ref| <= rel * |ref| + abs_ over n values; reports the worst ratio */
static int close_all(const float *a, const double *ref, size_t n, double rel, double abs_,
                     double *worst)
{
    int bad = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double b = rel * fabs(ref[i]) + abs_;
        double e = fabs((double)a[i] - ref[i]) / b;
        if (e > *worst || e != e) *worst = e;
        if (!(e <= 1.0)) bad++;
    }
    return bad;
}

static void op_rmsnorm(db_backend *be)
{
    static const int ds[] = {1, 16, 64, 257};
    for (int di = 0; di < 4; di++) {
        int n = 70, d = ds[di]; /* n > 64: the threaded path */
        float *x = malloc(sizeof(float) * n * d), *y = malloc(sizeof(float) * n * d),
              *w = malloc(sizeof(float) * d);
        double *ref = malloc(sizeof(double) * n * d);
        rand_fill(x, (size_t)n * d, -3, 3);
        rand_fill(w, (size_t)d, 0.5f, 1.5f);
        x[0] = 1e-3f; /* row 0, element 0: tiny, eps matters when d == 1 */
        const float eps = 1e-6f;
        for (int r = 0; r < n; r++) {
            double ss = 0;
            for (int i = 0; i < d; i++) ss += (double)x[r * d + i] * x[r * d + i];
            double inv = 1.0 / sqrt(ss / d + (double)eps);
            for (int i = 0; i < d; i++) ref[r * d + i] = x[r * d + i] * inv * w[i];
        }
        double worst, worst2;
        be->ops->rmsnorm(be, y, x, w, n, d, eps);
        double rel = 1e-6 + 1e-7 * d;
        int bad = close_all(y, ref, (size_t)n * d, rel, 1e-30, &worst);
        be->ops->rmsnorm(be, x, x, w, n, d, eps); /* in place */
        int bad2 = close_all(x, ref, (size_t)n * d, rel, 1e-30, &worst2);
        tap_ok(!bad && !bad2, "rmsnorm d=%d: within %.2g relative of double, also in place "
               "(worst %.3g / %.3g)", d, rel, worst, worst2);
        free(x);
        free(y);
        free(w);
        free(ref);
    }
}

static void op_rope(db_backend *be)
{
    /* one call after another, changing theta, then the positions, then the head size: the
     * backend may reuse a call's angles only while all three stay the same */
    static const int pos_sets[2][7] = {{0, 1, 7, 1000, 32767, 100000, 1 << 20},
                                       {5, 1, 7, 1000, 32767, 100000, 3}};
    const int n = 7, nh = 3;
    static const float thetas[] = {10000.0f, 1000000.0f, 1000000.0f, 1000000.0f};
    for (int ti = 0; ti < 4; ti++) {
        float theta = thetas[ti];
        const int *pos = pos_sets[ti >= 2];
        int hd = ti == 3 ? 8 : 16;
        size_t m = (size_t)n * nh * hd;
        float *x = malloc(sizeof(float) * m);
        double *ref = malloc(sizeof(double) * m), *mag = malloc(sizeof(double) * m);
        rand_fill(x, m, -2, 2);
        for (int r = 0; r < n; r++)
            for (int h = 0; h < nh; h++) {
                const float *v = x + ((size_t)r * nh + h) * hd;
                double *o = ref + ((size_t)r * nh + h) * hd, *g = mag + ((size_t)r * nh + h) * hd;
                for (int i = 0; i < hd / 2; i++) {
                    double ang = pos[r] * pow((double)theta, -2.0 * i / hd);
                    double a = v[i], b = v[i + hd / 2];
                    o[i] = a * cos(ang) - b * sin(ang);
                    o[i + hd / 2] = b * cos(ang) + a * sin(ang);
                    g[i] = g[i + hd / 2] = fabs(a) + fabs(b);
                }
            }
        be->ops->rope(be, x, pos, n, nh, hd, theta);
        int bad = 0;
        double worst = 0;
        for (size_t i = 0; i < m; i++) {
            double e = fabs(x[i] - ref[i]) / (1e-6 * mag[i] + 1e-30);
            if (e > worst || e != e) worst = e;
            if (!(e <= 1.0)) bad++;
        }
        tap_ok(!bad, "rope theta=%g, positions set %d, head %d: within 1e-6*(|a|+|b|) of double "
               "(worst %.3g)", theta, ti >= 2, hd, worst);
        free(x);
        free(ref);
        free(mag);
    }
}

/* attention: f32 caches (f16 = 0) through the attention op, or f16 caches (f16 = 1) through
 * attention_f16 against the reference over the f16 values, and bitwise the f32 op on the
 * widened caches */
static void op_attention_dt(db_backend *be, int f16)
{
    const int slots = 2, cap = 300, nkv = 2, nh = 4, hd = 8;
    const size_t kvw = (size_t)nkv * hd, cn = (size_t)slots * cap * kvw;
    const char *tag = f16 ? "attention_f16" : "attention";
    float *kc = malloc(sizeof(float) * cn), *vc = malloc(sizeof(float) * cn);
    uint16_t *k16 = malloc(sizeof(uint16_t) * cn), *v16 = malloc(sizeof(uint16_t) * cn);
    rand_fill(kc, cn, -2, 2);
    rand_fill(vc, cn, -1, 1);
    for (size_t i = 0; i < cn && f16; i++) { /* the reference sees the f16 values */
        k16[i] = db_f32_to_f16(kc[i]), kc[i] = (float)dec_f16(k16[i]);
        v16[i] = db_f32_to_f16(vc[i]), vc[i] = (float)dec_f16(v16[i]);
    }
#define ATTN(OUT, Q, ROWS, N)                                                                     \
    (f16 ? be->ops->attention_f16(be, OUT, Q, k16, v16, cap, ROWS, N, nh, nkv, hd, scale)       \
         : be->ops->attention(be, OUT, Q, kc, vc, cap, ROWS, N, nh, nkv, hd, scale))
    static const db_attn_row rows[] = {
        {0, 0, 12}, {1, 3, 7}, {0, 5, 5}, {0, 0, 1}, {1, 11, 12}, {1, 2, 9}, {0, 0, 300},
        {1, 150, 300}, {1, 0, 0}, {0, 299, 300},
        /* a verify-like run of one slot: ranges over several cache blocks, one empty */
        {1, 0, 70}, {1, 0, 71}, {1, 10, 72}, {1, 0, 0}, {1, 0, 73}, {0, 31, 97},
    };
    const int n = (int)(sizeof rows / sizeof *rows);
    float *q = malloc(sizeof(float) * n * nh * hd), *out = malloc(sizeof(float) * n * nh * hd);
    double *ref = calloc((size_t)n * nh * hd, sizeof(double));
    rand_fill(q, (size_t)n * nh * hd, -2, 2);
    for (int i = 0; i < n * nh * hd; i++) out[i] = NAN; /* every output must be written */
    float scale = 1.0f / sqrtf((float)hd);
    for (int r = 0; r < n; r++)
        for (int h = 0; h < nh; h++) {
            const db_attn_row *a = &rows[r];
            int kvh = h / (nh / nkv), nk = a->key_hi - a->key_lo;
            const float *qh = q + ((size_t)r * nh + h) * hd;
            double *o = ref + ((size_t)r * nh + h) * hd;
            if (nk <= 0) continue; /* no keys: zeros */
            double *s = malloc(sizeof(double) * nk), mx = -INFINITY, sum = 0;
            for (int j = 0; j < nk; j++) {
                const float *kj = kc + ((size_t)a->slot * cap + a->key_lo + j) * kvw + (size_t)kvh * hd;
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)qh[i] * kj[i];
                s[j] = d * scale;
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j < nk; j++) sum += (s[j] = exp(s[j] - mx));
            for (int j = 0; j < nk; j++) {
                const float *vj = vc + ((size_t)a->slot * cap + a->key_lo + j) * kvw + (size_t)kvh * hd;
                for (int i = 0; i < hd; i++) o[i] += s[j] / sum * vj[i];
            }
            free(s);
        }
    ATTN(out, q, rows, n);
    double worst;
    int bad = close_all(out, ref, (size_t)n * nh * hd, 1e-5, 1e-5, &worst);
    int zeros = 1;
    for (int i = 0; i < nh * hd; i++)
        zeros &= out[(size_t)2 * nh * hd + i] == 0.0f && out[(size_t)8 * nh * hd + i] == 0.0f &&
                 out[(size_t)13 * nh * hd + i] == 0.0f;
    tap_ok(!bad, "%s: %d rows (key ranges of 0..300 keys, GQA 4/2) within 1e-5 of double "
           "(worst %.3g)", tag, n, worst);
    tap_ok(zeros, "%s: an empty key range gives zeros", tag);
    if (f16) { /* the f32 op on the widened caches: bitwise */
        float *o32 = malloc(sizeof(float) * n * nh * hd);
        be->ops->attention(be, o32, q, kc, vc, cap, rows, n, nh, nkv, hd, scale);
        tap_ok(!memcmp(o32, out, sizeof(float) * n * nh * hd), "attention_f16: bitwise the f32 "
               "op on the widened caches");
        free(o32);
    }
    /* batch invariance: each row alone gives bitwise its result among all the rows (other
     * runs, head splits and thread shares) */
    int varies = 0;
    float *one = malloc(sizeof(float) * nh * hd);
    for (int r = 0; r < n; r++) {
        ATTN(one, q + (size_t)r * nh * hd, &rows[r], 1);
        varies += memcmp(one, out + (size_t)r * nh * hd, sizeof(float) * nh * hd) != 0;
    }
    free(one);
    tap_ok(!varies, "%s: each of %d rows alone bitwise equal to its result among all "
           "(%d differ)", tag, n, varies);
#undef ATTN
    free(kc);
    free(vc);
    free(k16);
    free(v16);
    free(q);
    free(out);
    free(ref);
}

static void op_attention(db_backend *be)
{
    op_attention_dt(be, 0);
    op_attention_dt(be, 1);
}

/* kv_store_f16: rows scattered by the index map, each value db_f32_to_f16 of its f32 (whose
 * rounding section 4 checks), the rows not named untouched */
static void op_kv_store_f16(db_backend *be)
{
    enum { ROWS = 10, W = 37, N = 4 };
    static const int idx[N] = {7, 0, 3, 9};
    float src[N * W];
    uint16_t dst[ROWS * W];
    rand_fill(src, N * W, -70000, 70000); /* past the f16 range too: inf */
    for (int i = 0; i < N * W; i += 5) src[i] *= 1e-6f; /* and subnormals */
    for (int i = 0; i < ROWS * W; i++) dst[i] = 0x1234;
    be->ops->kv_store_f16(be, dst, idx, src, N, W);
    int bad = 0;
    for (int r = 0, named; r < ROWS; r++) {
        named = -1;
        for (int j = 0; j < N; j++) named = idx[j] == r ? j : named;
        for (int i = 0; i < W; i++)
            bad += dst[r * W + i] != (named < 0 ? 0x1234 : db_f32_to_f16(src[named * W + i]));
    }
    tap_ok(!bad, "kv_store_f16: %d rows to their indices, rounded as db_f32_to_f16, others "
           "untouched (%d values wrong)", N, bad);
}

static void op_swiglu(db_backend *be)
{
    const size_t n = 70000; /* > 65536: the threaded path */
    float *g = malloc(sizeof(float) * n), *u = malloc(sizeof(float) * n), *o = malloc(sizeof(float) * n);
    double *ref = malloc(sizeof(double) * n);
    rand_fill(g, n, -20, 20);
    rand_fill(u, n, -3, 3);
    g[0] = 100.0f;
    g[1] = -100.0f;
    g[2] = 0.0f;
    g[3] = -87.0f;
    for (size_t i = 0; i < n; i++) ref[i] = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
    be->ops->swiglu(be, o, g, u, n);
    double worst;
    /* the floor: exp's input is clamped at 88 (vec_math.h), so at g = -100 silu is g e^-88, not
     * g e^-100: off by up to 100 x 6.1e-39 x |u| <= 1.8e-36 (the old floor, 1e-36, held only
     * while the random u[1] stayed under 1.65) */
    int bad = close_all(o, ref, n, 1e-6, 2e-36, &worst);
    tap_ok(!bad, "swiglu: %zu values (gate in [-100, 100]) within 1e-6 relative of double "
           "(worst %.3g)", n, worst);
    free(g);
    free(u);
    free(o);
    free(ref);
}

static void op_embed(db_backend *be)
{
    const int V = 11, D = 13, n = 6;
    static const int ids[] = {0, 10, 3, 3, 7, 10};
    for (int di = 0; di < 3; di++) {
        db_dtype dt = dtypes[di];
        void *t = rand_weights(dt, (size_t)V * D);
        /* a few special values in the table */
        if (dt != DB_F32) {
            ((uint16_t *)t)[3 * D + 0] = 0x0001;                    /* smallest subnormal */
            ((uint16_t *)t)[3 * D + 1] = 0x8000;                    /* -0 */
            ((uint16_t *)t)[3 * D + 2] = dt == DB_F16 ? 0x7c00 : 0x7f80; /* inf */
        }
        db_weight W = {t, dt, V, D};
        float out[6 * 13];
        be->ops->embed(be, out, &W, ids, n);
        int bad = 0;
        for (int r = 0; r < n; r++)
            for (int i = 0; i < D; i++) {
                float want = (float)dec(dt, t, (size_t)ids[r] * D + i);
                if (!same_bits(out[r * D + i], want)) bad++;
            }
        tap_ok(!bad, "embed %s table: rows exactly the table's values (incl. subnormal, -0, inf)",
               db_dtype_name(dt));
        free(t);
    }
}

static void op_copy_rows(db_backend *be)
{
    const int nsrc = 6, src_stride = 11, ndst = 8, dst_stride = 9, width = 7, n = 4;
    float src[6 * 11], dst[8 * 9];
    for (int i = 0; i < nsrc * src_stride; i++) src[i] = (float)i;
    static const int sidx[] = {5, 0, 2, 2}, didx[] = {7, 1, 0, 4};
    int bad = 0;
    for (int mode = 0; mode < 4; mode++) {
        const int *si = mode & 1 ? sidx : NULL, *dx = mode & 2 ? didx : NULL;
        for (int i = 0; i < ndst * dst_stride; i++) dst[i] = -1.0f;
        be->ops->copy_rows(be, dst, dst_stride, dx, src, src_stride, si, n, width);
        float want[8 * 9];
        for (int i = 0; i < ndst * dst_stride; i++) want[i] = -1.0f;
        for (int r = 0; r < n; r++)
            for (int c = 0; c < width; c++)
                want[(dx ? dx[r] : r) * dst_stride + c] = src[(si ? si[r] : r) * src_stride + c];
        if (memcmp(dst, want, sizeof dst)) bad++;
    }
    tap_ok(!bad, "copy_rows: strides 11 -> 9, width 7, with and without index maps; nothing "
           "else written");
}

static void op_scale_softcap(db_backend *be)
{
    const size_t n = 2000;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    double *ref = malloc(sizeof(double) * n);
    /* the last case: small arguments, where tanh(v) ~ v must keep its relative precision */
    static const float caps[] = {0.0f, 20.0f, 1.0f, 1.0f}, range[] = {200, 200, 200, 1e-3f};
    for (int ci = 0; ci < 4; ci++) {
        float mult = 1.5f, cap = caps[ci];
        rand_fill(x, n, -range[ci], range[ci]);
        memcpy(y, x, sizeof(float) * n);
        for (size_t i = 0; i < n; i++) {
            double v = (double)x[i] * mult;
            ref[i] = cap > 0 ? tanh(v / cap) * cap : v;
        }
        be->ops->scale_softcap(be, y, n, mult, cap);
        double worst;
        int bad = close_all(y, ref, n, 1e-6, ci == 3 ? 1e-13 : 1e-6 * (cap > 0 ? cap : 1), &worst);
        tap_ok(!bad, "scale_softcap mult %.1f cap %g, |x| <= %g: within 1e-6 of double (worst %.3g)",
               mult, cap, range[ci], worst);
    }
    /* non-finite logits stay visible: NaN stays NaN (the clamp made it +-cap), +-Inf -> +-cap */
    float nf[4] = {NAN, -NAN, INFINITY, -INFINITY};
    be->ops->scale_softcap(be, nf, 4, 1.0f, 30.0f);
    tap_ok(isnan(nf[0]) && isnan(nf[1]) && nf[2] == 30.0f && nf[3] == -30.0f,
           "scale_softcap cap 30: NaN stays NaN, +-Inf -> +-30 (got %g %g %g %g)", (double)nf[0],
           (double)nf[1], (double)nf[2], (double)nf[3]);
    free(x);
    free(y);
    free(ref);
}

typedef struct {
    float v;
    int i;
} vi;

static int vi_cmp(const void *a, const void *b)
{
    const vi *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i - y->i;
}

/* rows of topk(lg[n, v], k) that differ from a sort (value, then smaller id), bitwise; with
 * no_vals, the call without a vals buffer is checked too (1 when a call fails) */
static int topk_mismatches(db_backend *be, const float *lg, int n, int v, int k, int no_vals)
{
    int *ids = malloc(sizeof(int) * n * k), *ids2 = malloc(sizeof(int) * n * k);
    float *vals = malloc(sizeof(float) * n * k);
    vi *s = malloc(sizeof(vi) * v);
    int bad = be->ops->topk(be, ids, vals, lg, n, v, k) != 0 ||
              (no_vals && be->ops->topk(be, ids2, NULL, lg, n, v, k) != 0);
    for (int r = 0; r < n && !bad; r++) {
        for (int i = 0; i < v; i++) s[i] = (vi){lg[r * v + i], i};
        qsort(s, (size_t)v, sizeof *s, vi_cmp);
        for (int j = 0; j < k; j++)
            if (ids[r * k + j] != s[j].i || (no_vals && ids2[r * k + j] != s[j].i) ||
                !same_bits(vals[r * k + j], s[j].v))
                bad++;
    }
    free(s);
    free(ids);
    free(ids2);
    free(vals);
    return bad;
}

static void op_topk(db_backend *be)
{
    const int n = 5, v = 37;
    float *lg = malloc(sizeof(float) * n * v);
    for (int i = 0; i < n * v; i++) lg[i] = (float)(db_rng_next(&rng) % 4); /* many ties */
    for (int i = 0; i < v; i++) lg[4 * v + i] = -INFINITY;                  /* all equal */
    lg[4 * v + 20] = 1.0f;
    lg[1 * v + 36] = 100.0f; /* the top at the last id */
    static const int ks[] = {1, 2, 5, 36, 37};
    for (int ki = 0; ki < 5; ki++)
        tap_ok(!topk_mismatches(be, lg, n, v, ks[ki], 1),
               "topk k=%d of %d over %d rows with ties (-> smaller id) and -inf: sorted, "
               "exact; also without vals", ks[ki], v, n);
    { /* a vocabulary of many spans (skipped by a vector max when they cannot enter): ties across
       * spans, a ragged last span, the top at the last id */
        const int n2 = 3, v2 = 1000;
        float *l2 = malloc(sizeof(float) * n2 * v2);
        for (int i = 0; i < n2 * v2; i++) l2[i] = (float)(db_rng_next(&rng) % 8);
        for (int i = 0; i < v2; i++) l2[2 * v2 + i] = (float)(i % 129) * 0.5f; /* rising in a span */
        l2[v2 + v2 - 1] = 50.0f;
        static const int k2s[] = {1, 8, 130};
        for (int ki = 0; ki < 3; ki++)
            tap_ok(!topk_mismatches(be, l2, n2, v2, k2s[ki], 0),
                   "topk k=%d of %d over %d rows (many spans, ties across them): sorted, exact",
                   k2s[ki], v2, n2);
        free(l2);
    }
    int dummy[40];
    tap_ok(be->ops->topk(be, dummy, NULL, lg, 1, v, v + 1) != 0 &&
               be->ops->topk(be, dummy, NULL, lg, 1, v, 0) != 0,
           "topk: k = 0 and k > V refused");
    free(lg);
}

/* the sampling filter of scripts/reference/dflash_ref.py:filtered_probs, in double: softmax
 * of x / T restricted to the top_k largest (ties -> smaller id), renormalised, then the
 * smallest prefix of those (descending) whose renormalised mass reaches top_p, renormalised */
static void ref_probs(const float *x, double *out, int n, double T, double top_p, int top_k)
{
    vi *s = malloc(sizeof(vi) * n);
    for (int i = 0; i < n; i++) s[i] = (vi){x[i], i};
    qsort(s, (size_t)n, sizeof *s, vi_cmp);
    int keep = top_k > 0 && top_k < n ? top_k : n;
    double mx = s[0].v / T, sum = 0;
    double *p = malloc(sizeof(double) * n);
    for (int j = 0; j < keep; j++) sum += (p[j] = exp(s[j].v / T - mx));
    for (int j = 0; j < keep; j++) p[j] /= sum;
    int m = keep;
    if (top_p < 1.0) { /* at least one token */
        double cum = 0;
        m = 0;
        do cum += p[m++];
        while (m < keep && cum < top_p);
    }
    double kept = 0;
    for (int j = 0; j < m; j++) kept += p[j];
    for (int i = 0; i < n; i++) out[i] = 0;
    for (int j = 0; j < m; j++) out[s[j].i] = p[j] / kept;
    free(s);
    free(p);
}

static void op_probs(db_backend *be)
{
    const int n = 3, v = 50;
    static const struct {
        float T, top_p;
        int top_k;
    } cases[] = {{1.0f, 1.0f, 0}, {0.7f, 1.0f, 0},  {2.0f, 1.0f, 5},  {1.0f, 1.0f, 1},
                 {1.0f, 1.0f, 50}, {1.0f, 0.9f, 0}, {0.5f, 0.5f, 0},  {1.0f, 0.0f, 0},
                 {1.0f, 0.95f, 40}};
    float *x = malloc(sizeof(float) * n * v), *y = malloc(sizeof(float) * n * v);
    double *ref = malloc(sizeof(double) * n * v);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        rand_fill(x, (size_t)n * v, -4, 4);
        /* ties at the top-k boundary: the smaller ids must win */
        x[10] = x[11] = x[12] = x[13] = x[14] = x[15] = 3.9f;
        memcpy(y, x, sizeof(float) * n * v);
        be->ops->probs(be, y, n, v, cases[c].T, cases[c].top_p, cases[c].top_k);
        for (int r = 0; r < n; r++)
            ref_probs(x + r * v, ref + r * v, v, cases[c].T, cases[c].top_p, cases[c].top_k);
        double worst;
        int bad = close_all(y, ref, (size_t)n * v, 1e-5, 1e-7, &worst);
        tap_ok(!bad, "probs T=%.1f top_p=%.2f top_k=%d: matches the reference filter "
               "(worst %.3g)", cases[c].T, cases[c].top_p, cases[c].top_k, worst);
    }
    /* top_k and top_p together: probabilities 0.5, 0.3, 0.2 with top_k 2, top_p 0.6. After
     * top_k the kept mass renormalises to 0.625, 0.375, so the nucleus is the first token
     * alone (scripts/reference/dflash_ref.py, HF and vLLM order: top-k, then top-p on the
     * renormalised distribution) */
    {
        float z[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
        double want[3];
        ref_probs(z, want, 3, 1.0, 0.6, 2);
        db_probs_host(z, 3, 1.0f, 0.6f, 2);
        double worst;
        int bad = close_all(z, want, 3, 1e-5, 1e-7, &worst);
        tap_ok(!bad, "probs top_k=2 top_p=0.6 on (0.5, 0.3, 0.2): nucleus over the top-k "
                      "renormalised mass -> (1, 0, 0), got (%.3f, %.3f, %.3f)",
                      z[0], z[1], z[2]);
    }
    free(x);
    free(y);
    free(ref);
}

static void op_dynconv(db_backend *be)
{
    const int nb = 3, B = 5, h = 16, K = 3, G = 4, gs = h / G, rows = nb * B;
    float *in = malloc(sizeof(float) * rows * h), *out = malloc(sizeof(float) * rows * h);
    float *base = malloc(sizeof(float) * K * h), *delta = malloc(sizeof(float) * rows * 2 * K * G);
    double *ref = malloc(sizeof(double) * rows * h);
    for (int phase = 0; phase < 2; phase++) {
        rand_fill(in, (size_t)rows * h, -2, 2);
        rand_fill(base, (size_t)K * h, -1, 1);
        rand_fill(delta, (size_t)rows * 2 * K * G, -0.5f, 0.5f);
        for (int b = 0; b < nb; b++)
            for (int t = 0; t < B; t++) {
                int row = b * B + t;
                for (int c = 0; c < h; c++) {
                    double acc = 0;
                    for (int o = 0; o < K && o <= t; o++)
                        acc += ((double)base[o * h + c] +
                                delta[(size_t)row * 2 * K * G + (size_t)phase * K * G + o * G + c / gs]) *
                               in[(row - o) * h + c];
                    ref[row * h + c] = acc;
                }
            }
        be->ops->dynconv(be, out, in, base, delta, phase, nb, B, h, K, G);
        double worst;
        int bad = close_all(out, ref, (size_t)rows * h, 1e-5, 1e-5, &worst);
        tap_ok(!bad, "dynconv phase %d: %d blocks of %d, K=%d, G=%d within 1e-5 of double "
               "(worst %.3g)", phase, nb, B, K, G, worst);
    }
    free(in);
    free(out);
    free(base);
    free(delta);
    free(ref);
}

static void op_pair_scores(db_backend *be)
{
    static const int ranks[] = {8, 1500};
    for (int ri = 0; ri < 2; ri++)
        for (int di = 0; di < 3; di++) {
            db_dtype dt = dtypes[di];
            const int V = 50, n = 3, k = 4, r = ranks[ri];
            void *pd = rand_weights(dt, (size_t)V * r), *sd = rand_weights(dt, (size_t)V * r);
            db_weight pred = {pd, dt, V, r}, succ = {sd, dt, V, r};
            float *g = malloc(sizeof(float) * n * r), out[3 * 4 * 4];
            int prev[12], cand[12];
            rand_fill(g, (size_t)n * r, -1, 1);
            for (int i = 0; i < n * k; i++) {
                prev[i] = (int)(db_rng_next(&rng) % V);
                cand[i] = (int)(db_rng_next(&rng) % V);
            }
            int rc = be->ops->pair_scores(be, out, g, prev, cand, &pred, &succ, n, k, r);
            int bad = rc != 0;
            double worst = 0;
            for (int t = 0; t < n && !bad; t++)
                for (int i = 0; i < k; i++)
                    for (int j = 0; j < k; j++) {
                        double s = 0, S = 0;
                        for (int q = 0; q < r; q++) {
                            double term = dec(dt, pd, (size_t)prev[t * k + i] * r + q) * g[t * r + q] *
                                          dec(dt, sd, (size_t)cand[t * k + j] * r + q);
                            s += term;
                            S += fabs(term);
                        }
                        double e = fabs(out[(t * k + i) * k + j] - s) / (tol_dot(r) * S + 1e-30);
                        if (e > worst || e != e) worst = e;
                        if (!(e <= 1.0)) bad++;
                    }
            tap_ok(!bad, "pair_scores %s codebooks, rank %d: within 1e-5*sqrt(r)*sum|terms| of "
                   "double (worst %.3g)", db_dtype_name(dt), r, worst);
            db_weight bad_rank = {sd, dt, V, r - 1 > 0 ? r - 1 : 2};
            if (ri == 0 && di == 0)
                tap_ok(be->ops->pair_scores(be, out, g, prev, cand, &pred, &bad_rank, n, k, r) != 0,
                       "pair_scores: codebook rank mismatch refused");
            free(pd);
            free(sd);
            free(g);
        }
}

/* DSpark correction: x[t][i] += s * W2[i] . W1[prev[t]], against double; mixed dtypes, a
 * vocabulary slice wide enough for the threaded loop */
static void op_markov_bias(db_backend *be)
{
    static const int shapes[][3] = {{10, 7, 4}, {300, 2048, 64}}; /* V, Vd, R */
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 3; di++) {
            db_dtype d1 = dtypes[di], d2 = dtypes[(di + 1) % 3];
            const int V = shapes[si][0], Vd = shapes[si][1], R = shapes[si][2], n = 3;
            const float scale = 0.75f;
            void *a = rand_weights(d1, (size_t)V * R), *b = rand_weights(d2, (size_t)Vd * R);
            db_weight w1 = {a, d1, V, R}, w2 = {b, d2, Vd, R};
            float *x = malloc(sizeof(float) * n * Vd), *x0 = malloc(sizeof(float) * n * Vd);
            rand_fill(x0, (size_t)n * Vd, -3, 3);
            memcpy(x, x0, sizeof(float) * n * Vd);
            int prev[3] = {V - 1, 0, (int)(db_rng_next(&rng) % V)};
            be->ops->markov_bias(be, x, prev, &w1, &w2, scale, n);
            int bad = be->ops->sync(be) != 0;
            double worst = 0;
            for (int t = 0; t < n && !bad; t++)
                for (int i = 0; i < Vd; i++) {
                    double s = 0, S = 0;
                    for (int j = 0; j < R; j++) {
                        double term = dec(d2, b, (size_t)i * R + j) * dec(d1, a, (size_t)prev[t] * R + j);
                        s += term;
                        S += fabs(term);
                    }
                    double want = x0[(size_t)t * Vd + i] + scale * s;
                    double e = fabs(x[(size_t)t * Vd + i] - want) /
                               (tol_dot(R) * (scale * S + fabs(want)) + 1e-30);
                    if (e > worst || e != e) worst = e;
                    if (!(e <= 1.0)) bad++;
                }
            tap_ok(!bad, "markov_bias W1 %s / W2 %s, V %d, Vd %d, R %d: within 1e-5*sqrt(R) of double "
                   "(worst %.3g)", db_dtype_name(d1), db_dtype_name(d2), V, Vd, R, worst);
            free(a);
            free(b);
            free(x);
            free(x0);
        }
}

/* ---------------------------------------------------------------- 4. conversions */

/* code of the value nearest to ax >= 0 among tab[0..ncodes) (increasing; the last entry is
 * the first power of two past the largest finite value, standing for inf), ties to even */
static unsigned nearest_code(double ax, const double *tab, unsigned ncodes)
{
    if (ax >= tab[ncodes - 1]) return ncodes - 1;
    unsigned lo = 0, hi = ncodes - 1; /* tab[lo] <= ax < tab[hi] */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (tab[mid] <= ax) lo = mid;
        else hi = mid;
    }
    double d0 = ax - tab[lo], d1 = tab[hi] - ax;
    if (d0 < d1) return lo;
    if (d1 < d0) return hi;
    return lo & 1 ? hi : lo;
}

typedef struct {
    const char *name;
    float (*to_f32)(uint16_t);
    uint16_t (*from_f32)(float);
    double (*decode)(uint16_t);
    unsigned inf_code; /* 0x7c00 / 0x7f80 */
    double past_max;   /* 65536 / 2^128 */
} fmt16;

static int is_nan16(const fmt16 *f, uint16_t h)
{
    return (h & 0x7fff) > f->inf_code;
}

static void conversions(const fmt16 *f)
{
    /* 16 -> 32 exact, 16 -> 32 -> 16 identity (NaN stays NaN with its sign) */
    int bad_dec = 0, bad_rt = 0;
    for (unsigned h = 0; h < 65536; h++) {
        float v = f->to_f32((uint16_t)h);
        double want = f->decode((uint16_t)h);
        if (isnan(want) ? !isnan(v) : (double)v != want || !signbit(v) != !signbit(want)) {
            if (!bad_dec) tap_diag("code 0x%04x: got %.9g want %.9g", h, (double)v, want);
            bad_dec++;
        }
        uint16_t back = f->from_f32(v);
        if (is_nan16(f, (uint16_t)h) ? !(is_nan16(f, back) && (back & 0x8000) == (h & 0x8000))
                                     : back != h)
            bad_rt++;
    }
    tap_ok(!bad_dec, "%s -> f32: all 65536 codes exact (subnormals, +-0, inf, NaN)", f->name);
    tap_ok(!bad_rt, "%s -> f32 -> %s: all 65536 codes round-trip (NaN stays NaN, sign kept)",
           f->name, f->name);

    /* f32 -> 16: nearest, ties to even, at and around every midpoint */
    unsigned nc = f->inf_code + 1;
    double *tab = malloc(sizeof(double) * nc);
    for (unsigned c = 0; c < f->inf_code; c++) tab[c] = f->decode((uint16_t)c);
    tab[f->inf_code] = f->past_max;
    int bad_round = 0, checks = 0;
    char first[160] = "";
    for (unsigned c = 0; c + 1 < nc; c++) {
        double mid = (tab[c] + tab[c + 1]) / 2; /* exact in f32: one more significand bit */
        float fm = (float)mid;
        float probe[5] = {fm, nextafterf(fm, 0.0f), nextafterf(fm, INFINITY), (float)tab[c],
                          nextafterf((float)tab[c], INFINITY)};
        if (c + 1 == f->inf_code) probe[4] = nextafterf(fm, INFINITY) * 1.5f; /* far past max */
        for (int i = 0; i < 5; i++)
            for (int sg = 0; sg < 2; sg++) {
                float x = sg ? -probe[i] : probe[i];
                if (isinf(x) && i == 4) continue;
                unsigned want = nearest_code(fabs((double)x), tab, nc) | (sg ? 0x8000u : 0);
                uint16_t got = f->from_f32(x);
                checks++;
                if (got != want && !bad_round++) {
                    uint32_t xb;
                    memcpy(&xb, &x, 4);
                    snprintf(first, sizeof first, "x = %.9g (0x%08x): got 0x%04x want 0x%04x",
                             (double)x, (unsigned)xb, got, want);
                }
            }
    }
    /* random f32 bit patterns (finite), and f32 subnormals */
    for (int i = 0; i < 400000; i++) {
        uint32_t u = (uint32_t)db_rng_next(&rng);
        if (i < 1000) u &= 0x807fffffu; /* f32 subnormals */
        float x;
        memcpy(&x, &u, 4);
        if (!isfinite(x)) continue;
        unsigned want = nearest_code(fabs((double)x), tab, nc) | (signbit(x) ? 0x8000u : 0);
        uint16_t got = f->from_f32(x);
        checks++;
        if (got != want && !bad_round++)
            snprintf(first, sizeof first, "x = %.9g (0x%08x): got 0x%04x want 0x%04x", (double)x,
                     u, got, want);
    }
    tap_ok(!bad_round, "f32 -> %s: round to nearest even at every midpoint +-1 ulp, overflow to "
           "inf, subnormals, random patterns (%d values)", f->name, checks);
    if (bad_round) tap_diag("%d wrong, first: %s", bad_round, first);
    free(tab);

    /* specials */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                    0x7fbfffffu, 0x7f802000u, 0xffffffffu};
    int bad_nan = 0;
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        float x;
        memcpy(&x, &nans[i], 4);
        uint16_t h = f->from_f32(x);
        if (!is_nan16(f, h) || (h >> 15) != (nans[i] >> 31)) bad_nan++;
    }
    float inf = INFINITY;
    tap_ok(!bad_nan && f->from_f32(inf) == f->inf_code && f->from_f32(-inf) == (0x8000 | f->inf_code) &&
               f->from_f32(-0.0f) == 0x8000 && f->from_f32(0.0f) == 0,
           "f32 -> %s: NaNs (quiet and signalling, low payload bits only) stay NaN with their "
           "sign; +-inf, +-0 exact", f->name);
}

static void convert_bulk(void)
{
    uint16_t h[300];
    float a[300], b[300];
    int bad = 0;
    for (int di = 1; di < 3; di++) {
        for (int i = 0; i < 300; i++) h[i] = (uint16_t)db_rng_next(&rng);
        db_convert_to_f32(a, h, dtypes[di], 300);
        for (int i = 0; i < 300; i++) {
            b[i] = dtypes[di] == DB_BF16 ? db_bf16_to_f32(h[i]) : db_f16_to_f32(h[i]);
            if (!same_bits(a[i], b[i])) bad++;
        }
    }
    float f[300];
    rand_fill(f, 300, -5, 5);
    db_convert_to_f32(a, f, DB_F32, 300);
    if (memcmp(a, f, sizeof f)) bad++;
    tap_ok(!bad, "db_convert_to_f32: f32 copy, bf16 / f16 the same as the scalar conversions");
}

/* A compute op that cannot get its scratch memory must not hand back a result: attention under
 * an address-space limit latches the failure, and every later checked call (sync, download,
 * topk) reports it. Left out of sanitizer builds: their shadow memory needs the address space. */
static void op_attention_out_of_memory(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("ok %d - attention out of memory fails loudly # SKIP sanitizer build\n", ++tap_n);
#else
    char err[256];
    db_backend *be = NULL;
    db_backend_opts o = {.threads = 1};
    if (db_backend_create("cpu", &o, &be, err, sizeof err)) {
        tap_ok(0, "attention out of memory: backend: %s", err);
        return;
    }
    int nh = 2, hd = 4;
    float *q = be->ops->alloc(be, sizeof(float) * (size_t)nh * hd), *out = be->ops->alloc(be, sizeof(float) * (size_t)nh * hd);
    float *cache = be->ops->alloc(be, sizeof(float) * 16), host[8] = {0};
    /* a key range whose score row needs 1 GiB: more than the limit below leaves */
    db_attn_row row = {0, 0, 1 << 28};
    struct rlimit old, lim;
    long pages = 0, page = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/statm", "r");
    int have = f && fscanf(f, "%ld", &pages) == 1 && getrlimit(RLIMIT_AS, &old) == 0;
    if (f) fclose(f);
    if (!have || !q || !out || !cache) {
        printf("ok %d - attention out of memory fails loudly # SKIP no /proc/self/statm or RLIMIT_AS\n", ++tap_n);
    } else {
        lim = old;
        lim.rlim_cur = (rlim_t)pages * (rlim_t)page + ((rlim_t)256 << 20);
        int set = setrlimit(RLIMIT_AS, &lim) == 0;
        if (set) be->ops->attention(be, out, q, cache, cache, 4, &row, 1, nh, nh, hd, 1.0f);
        setrlimit(RLIMIT_AS, &old);
        int ids[1];
        tap_ok(set && be->ops->sync(be) != 0 && be->ops->download(be, host, out, sizeof host) != 0 &&
                   be->ops->topk(be, ids, NULL, q, 1, nh * hd, 1) != 0 && strstr(be->err, "attention"),
               "attention out of memory: sync, download and topk fail afterwards (%s)", be->err);
    }
    if (q) be->ops->dfree(be, q);
    if (out) be->ops->dfree(be, out);
    if (cache) be->ops->dfree(be, cache);
    db_backend_destroy(be);
#endif
}

/* a deterministic and a default CPU backend, all threads; 1 (after "Bail out!") on failure */
static int open_pair(db_backend **det, db_backend **fast)
{
    char err[256];
    db_backend_opts od = {.threads = 0, .deterministic = 1}, of = {.threads = 0};
    if (db_backend_create("cpu", &od, det, err, sizeof err) ||
        db_backend_create("cpu", &of, fast, err, sizeof err)) {
        printf("Bail out! %s\n", err);
        return 1;
    }
    return 0;
}

int main(void)
{
    db_rng_seed(&rng, 20240611);
    unsetenv("DB_SIMD"); /* test the kernels this CPU would really use */
    unsetenv("DB_CPU_KERNEL");

    /* 4. conversions first: the matmul references decode weights with them */
    static const fmt16 bf16 = {"bf16", db_bf16_to_f32, db_f32_to_bf16, dec_bf16, 0x7f80, 0x1p128};
    static const fmt16 f16 = {"f16", db_f16_to_f32, db_f32_to_f16, dec_f16, 0x7c00, 65536.0};
    conversions(&bf16);
    conversions(&f16);
    convert_bulk();

    /* 1, 2: every kernel this build has and this CPU runs, each forced in turn */
    const char *names[8];
    db_matmul_kernel fns[8];
    int nk = db_matmul_kernels(names, fns, 8);
    if (nk == 1) {
        tap_diag("no SIMD kernel for this CPU / build: SIMD checks skipped");
        printf("ok %d - SIMD matmul kernel # SKIP none compiled or supported here\n", ++tap_n);
    }
    for (int i = 0; i < nk; i++) {
        kernel k = {names[i], fns[i]};
        if (fns[i] != db_matmul_ref) matmul_accuracy(&k);
        matmul_slices(&k);
        kernel_batch_invariance(&k);
        attn_loops(names[i]);
        attn_loops16(names[i]);
        attn_multi(names[i]);
        attn_heads(names[i]);
    }
    const char *picked = NULL;
    tap_ok(db_matmul_select(NULL, &picked) == fns[0] && db_matmul_select("ref", &picked) ==
           db_matmul_ref && !db_matmul_select("no-such-kernel", &picked),
           "select: best kernel by default (%s), \"ref\" is the C one, unknown names refused",
           names[0]);

    char err[256];
    for (int i = 0; i < nk; i++) {
        /* the backend with each kernel forced through the environment, as a user would */
        setenv("DB_CPU_KERNEL", names[i], 1);
        db_backend *det = NULL, *fast = NULL;
        if (open_pair(&det, &fast)) return 1;
        tap_ok(strcmp(det->simd, names[i]) == 0, "DB_CPU_KERNEL=%s forces that kernel (%s)",
               names[i], det->simd);
        tap_diag("cpu backend: %s, %d threads, simd %s", det->device_name, det->threads, det->simd);
        backend_matmul(det, fast);
        op_attention(fast); /* the attention loops of this kernel inside the op */
        db_backend_destroy(det);
        db_backend_destroy(fast);
    }
    setenv("DB_CPU_KERNEL", "no-such-kernel", 1);
    db_backend *bad = NULL;
    db_backend_opts ob = {.threads = 0};
    int rc = db_backend_create("cpu", &ob, &bad, err, sizeof err);
    tap_ok(rc != 0 && strstr(err, "no-such-kernel"), "DB_CPU_KERNEL naming no kernel: backend "
           "refused (%s)", err);
    if (!rc) db_backend_destroy(bad);
    unsetenv("DB_CPU_KERNEL");

    db_backend *det = NULL, *fast = NULL;
    if (open_pair(&det, &fast)) return 1;

    /* 3. the other ops */
    op_rmsnorm(fast);
    op_rope(fast);
    op_swiglu(fast);
    op_embed(fast);
    op_copy_rows(fast);
    op_kv_store_f16(fast);
    op_scale_softcap(fast);
    op_topk(fast);
    op_probs(fast);
    op_dynconv(fast);
    op_pair_scores(fast);
    op_markov_bias(fast);
    op_attention_out_of_memory();

    db_backend_destroy(det);
    db_backend_destroy(fast);
    return tap_done();
}
