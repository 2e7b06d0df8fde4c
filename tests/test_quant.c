/* test_quant.c — the quantized weight types (backends/quant.c, backends/cpu/matmul_quant_*.c).
 *
 * 1. The C dequantizer against the independent numpy reference (scripts/gguf/quants.py, golden
 *    file tests/data/gguf/quant-golden.bin from make_quant_golden.py): BITWISE equal on random
 *    blocks of every type, both blocks the reference quantized from random data and blocks of
 *    random bytes (every quant and 6-bit scale pattern). For the quantized ones the round trip
 *    error is bounded: rms(dequant - source) / rms(source) below 0.01 (Q8_0), 0.04 (Q6_K), 0.06
 *    (5-bit types), 0.15 (4-bit types), 0.2 (Q3_K) and 0.4 (Q2_K) — a broken quantizer or a
 *    layout mix-up lands far above. Types: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL,
 *    IQ4_XS (every type llama-quantize writes without an importance matrix).
 * 2. Every quantized matmul kernel this CPU runs (C reference, AVX2, AVX-512) against a double
 *    dot product over the dequantized weights, bound 1e-5 * sqrt(I) * (sum |w x| + |y0|) as in
 *    test_kernels.c (the dequantized values are exact; only the summation order differs), with
 *    and without accumulate, N = 1..9 and 33, I a few blocks long; a slice [o0, o1) writes
 *    exactly those columns.
 * 2b. Every kernel's dequantized values are exactly the C dequantizer's (one-hot activations).
 * 3. Batch invariance: each kernel's row result is BITWISE the same alone or among N rows at
 *    any position; the CPU backend's matmul op likewise (deterministic, several threads).
 *    A NaN activation makes every output of its row NaN (the float and the integer path).
 * 4. The CPU backend's embed op on a quantized table == the dequantized rows; db_weight_upload
 *    refuses quantized weights on a backend without quant_weights. */
#include "config.h"
#include "backend.h"
#include "cpu/matmul_quant.h"
#include "tap.h"
#include "base/util.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static db_rng rng;

static const db_dtype qtypes[] = {DB_Q8_0, DB_Q4_0, DB_Q4_K, DB_Q5_K, DB_Q6_K, DB_Q4_1,
                                  DB_Q5_0, DB_Q5_1, DB_Q2_K, DB_Q3_K, DB_IQ4_NL, DB_IQ4_XS};
#define NQ (int)(sizeof qtypes / sizeof *qtypes)

/* ggml type id (the golden file's) -> dtype */
static int from_ggml(uint32_t t, db_dtype *dt)
{
    static const uint32_t ids[] = {8, 2, 12, 13, 14, 3, 6, 7, 10, 11, 20, 23};
    for (int i = 0; i < NQ; i++)
        if (ids[i] == t) {
            *dt = qtypes[i];
            return 0;
        }
    return -1;
}

static double rms_bound(db_dtype dt)
{
    switch (dt) {
    case DB_Q8_0: return 0.01;
    case DB_Q6_K: return 0.04;
    case DB_Q5_K: case DB_Q5_0: case DB_Q5_1: return 0.06;
    case DB_Q3_K: return 0.2;
    case DB_Q2_K: return 0.4;
    default: return 0.15;
    }
}

static void test_golden(void)
{
    char err[512], *buf;
    size_t len;
    if (db_read_file(tu_data("gguf/quant-golden.bin"), &buf, &len, err, sizeof err) != 0) {
        tap_ok(0, "read golden: %s", err);
        return;
    }
    const unsigned char *p = (const unsigned char *)buf, *end = p + len;
    uint32_t hdr[3];
    if (len < 12 || memcmp(p, "DBQG", 4) != 0) {
        tap_ok(0, "golden file magic");
        free(buf);
        return;
    }
    memcpy(hdr, p + 4, 8);
    p += 12;
    int seen[NQ] = {0};
    for (uint32_t r = 0; r < hdr[1]; r++) {
        uint32_t h[3];
        db_dtype dt;
        if (end - p < 12) break;
        memcpy(h, p, 12);
        p += 12;
        if (from_ggml(h[0], &dt) != 0) {
            tap_ok(0, "golden record %u: unknown type %u", r, h[0]);
            break;
        }
        size_t bs = (size_t)db_dtype_block(dt), nv = h[1] * bs, nb = h[1] * db_dtype_size(dt);
        size_t need = nb + nv * 4 * (h[2] ? 2 : 1);
        if ((size_t)(end - p) < need) {
            tap_ok(0, "golden record %u truncated", r);
            break;
        }
        float *want = malloc(nv * 4), *src = h[2] ? malloc(nv * 4) : NULL, *got = malloc(nv * 4);
        memcpy(want, p + nb, nv * 4);
        if (src) memcpy(src, p + nb + nv * 4, nv * 4);
        db_convert_to_f32(got, p, dt, nv);
        size_t bad = 0;
        for (size_t i = 0; i < nv; i++) bad += memcmp(&got[i], &want[i], 4) != 0;
        tap_ok(bad == 0, "%s: C dequantizer == numpy reference bitwise on %u %s blocks (%zu differ)",
               db_dtype_name(dt), h[1], src ? "quantized" : "random-byte", bad);
        if (src) {
            double e = 0, s = 0;
            for (size_t i = 0; i < nv; i++) {
                e += ((double)got[i] - src[i]) * ((double)got[i] - src[i]);
                s += (double)src[i] * src[i];
            }
            double rel = sqrt(e / s);
            tap_ok(rel < rms_bound(dt), "%s: reference quantizer round trip rms error %.4f < %.2f",
                   db_dtype_name(dt), rel, rms_bound(dt));
        }
        for (int i = 0; i < NQ; i++) seen[i] += qtypes[i] == dt;
        p += need;
        free(want);
        free(src);
        free(got);
    }
    for (int i = 0; i < NQ; i++)
        tap_ok(seen[i] >= 2, "golden has random and quantized blocks of %s", db_dtype_name(qtypes[i]));
    free(buf);
}

typedef struct {
    const char *name;
    db_matmul_kernel k;
} kern;

static int kernels(kern *ks)
{
    int n = 0;
    ks[n++] = (kern){"c", db_matmul_quant_ref};
#if HAVE_X86_SIMD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        ks[n++] = (kern){"avx2", db_matmul_quant_avx2};
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        ks[n++] = (kern){"avx512", db_matmul_quant_avx512};
#endif
#if HAVE_NEON
    ks[n++] = (kern){"neon", db_matmul_quant_neon};
#endif
    return n;
}

static void test_accuracy(const kern *ks, int nk)
{
    static const int Ns[] = {1, 2, 3, 4, 5, 7, 9, 33};
    const int O = 19;
    for (int ti = 0; ti < NQ; ti++) {
        db_dtype dt = qtypes[ti];
        int bs = db_dtype_block(dt), I = bs == 32 ? 160 : 512;
        void *w = tu_rand_quant(&rng, dt, O, I);
        float *wf = malloc(sizeof(float) * (size_t)O * I);
        db_convert_to_f32(wf, w, dt, (size_t)O * I);
        for (int ki = 0; ki < nk; ki++) {
            double worst = 0;
            int ok = 1, slice_ok = 1;
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
                int N = Ns[ni];
                float *x = malloc(sizeof(float) * (size_t)N * I), *y = malloc(sizeof(float) * (size_t)N * O);
                float *y0 = malloc(sizeof(float) * (size_t)N * O);
                for (int i = 0; i < N * I; i++) x[i] = (float)(db_rng_uniform(&rng) * 2 - 1);
                for (int acc = 0; acc < 2; acc++) {
                    for (int i = 0; i < N * O; i++) y0[i] = y[i] = (float)(db_rng_uniform(&rng) * 2 - 1);
                    int o0 = acc ? 3 : 0, o1 = acc ? 11 : O;
                    ks[ki].k(y, x, w, dt, N, O, I, o0, o1, acc);
                    for (int r = 0; r < N; r++)
                        for (int o = 0; o < O; o++) {
                            float got = y[(size_t)r * O + o];
                            if (o < o0 || o >= o1) {
                                slice_ok &= memcmp(&got, &y0[(size_t)r * O + o], 4) == 0;
                                continue;
                            }
                            double s = 0, mag = 0;
                            for (int k = 0; k < I; k++) {
                                double p = (double)wf[(size_t)o * I + k] * x[(size_t)r * I + k];
                                s += p;
                                mag += fabs(p);
                            }
                            double base = acc ? y0[(size_t)r * O + o] : 0;
                            double e = fabs(got - (s + base)) / (mag + fabs(base) + 1e-30);
                            if (e > worst) worst = e;
                            ok &= fabs(got - (s + base)) <= 1e-5 * sqrt((double)I) * (mag + fabs(base));
                        }
                }
                free(x);
                free(y);
                free(y0);
            }
            tap_ok(ok, "%s kernel %s: within 1e-5*sqrt(I) of the double dot product (worst %.2g)",
                   db_dtype_name(dt), ks[ki].name, worst);
            tap_ok(slice_ok, "%s kernel %s: a slice [o0, o1) writes only its columns",
                   db_dtype_name(dt), ks[ki].name);
        }
        free(w);
        free(wf);
    }
}

/* each kernel's dequantized values are quant.c's exactly: activation rows of one-hot vectors
 * (row k picks value k) give y[k, o] == dequant(W)[o, k] (== on the floats: a sum of exact
 * zeros and one product by 1) */
static void test_exact_values(const kern *ks, int nk)
{
    const int O = 3;
    for (int ti = 0; ti < NQ; ti++) {
        db_dtype dt = qtypes[ti];
        int I = db_dtype_block(dt) == 32 ? 64 : 256;
        void *w = tu_rand_quant(&rng, dt, O, I);
        float *wf = malloc(sizeof(float) * (size_t)O * I), *x = calloc((size_t)I * I, sizeof(float));
        float *y = malloc(sizeof(float) * (size_t)I * O);
        db_convert_to_f32(wf, w, dt, (size_t)O * I);
        for (int k = 0; k < I; k++) x[(size_t)k * I + k] = 1.0f;
        for (int ki = 0; ki < nk; ki++) {
            ks[ki].k(y, x, w, dt, I, O, I, 0, O, 0);
            int same = 1;
            for (int k = 0; k < I; k++)
                for (int o = 0; o < O; o++) same &= y[(size_t)k * O + o] == wf[(size_t)o * I + k];
            tap_ok(same, "%s kernel %s: dequantized values == quant.c's, exactly", db_dtype_name(dt), ks[ki].name);
        }
        free(w);
        free(wf);
        free(x);
        free(y);
    }
}

/* row r of an N-row call == the same row alone, bitwise */
static void test_invariance(const kern *ks, int nk)
{
    const int O = 9, N = 13;
    for (int ti = 0; ti < NQ; ti++) {
        db_dtype dt = qtypes[ti];
        int I = db_dtype_block(dt) == 32 ? 96 : 768;
        void *w = tu_rand_quant(&rng, dt, O, I);
        float *x = malloc(sizeof(float) * (size_t)N * I), *y = malloc(sizeof(float) * (size_t)N * O);
        for (int i = 0; i < N * I; i++) x[i] = (float)(db_rng_uniform(&rng) * 2 - 1);
        for (int ki = 0; ki < nk; ki++) {
            int same = 1;
            for (int n = 1; n <= N; n++) {
                ks[ki].k(y, x, w, dt, n, O, I, 0, O, 0);
                for (int r = 0; r < n; r++) {
                    float one[9];
                    ks[ki].k(one, x + (size_t)r * I, w, dt, 1, O, I, 0, O, 0);
                    same &= memcmp(one, y + (size_t)r * O, sizeof one) == 0;
                }
            }
            tap_ok(same, "%s kernel %s: batch-invariant (row alone == row among 1..%d)",
                   db_dtype_name(dt), ks[ki].name, N);
        }
        free(w);
        free(x);
        free(y);
    }
}

/* the CPU backend: matmul op (deterministic, threads) invariant in N; embed == dequantized rows */
static void test_backend(void)
{
    db_backend *be;
    char err[256];
    db_backend_opts o = {.threads = 2, .deterministic = 1};
    if (db_backend_create("cpu", &o, &be, err, sizeof err) != 0) {
        tap_ok(0, "cpu backend: %s", err);
        return;
    }
    for (int ti = 0; ti < NQ; ti++) {
        db_dtype dt = qtypes[ti];
        int O = 70, I = 512, N = 40;
        void *host = tu_rand_quant(&rng, dt, O, I);
        db_weight w;
        if (db_weight_upload(be, &w, host, dt, O, I) != 0) {
            tap_ok(0, "upload %s: %s", db_dtype_name(dt), be->err);
            free(host);
            continue;
        }
        float *x = be->ops->alloc(be, sizeof(float) * (size_t)N * I);
        float *y = be->ops->alloc(be, sizeof(float) * (size_t)N * O);
        float *y1 = be->ops->alloc(be, sizeof(float) * (size_t)O);
        for (int i = 0; i < N * I; i++) x[i] = (float)(db_rng_uniform(&rng) * 2 - 1);
        be->ops->matmul(be, y, x, &w, N, 0);
        int same = 1;
        for (int r = 0; r < N; r += 7) {
            be->ops->matmul(be, y1, x + (size_t)r * I, &w, 1, 0);
            same &= memcmp(y1, y + (size_t)r * O, sizeof(float) * (size_t)O) == 0;
        }
        tap_ok(same, "cpu backend matmul on %s weights: deterministic rows independent of N = %d",
               db_dtype_name(dt), N);
        /* a non-finite activation must not vanish (the integer path rounds activations to
         * 8-bit codes, where a NaN has no code) */
        x[3] = NAN;
        be->ops->matmul(be, y1, x, &w, 1, 0);
        int nan = 1;
        for (int o = 0; o < O; o++) nan &= isnan(y1[o]) != 0;
        tap_ok(nan, "cpu backend matmul on %s weights: a NaN activation makes its row's outputs NaN", db_dtype_name(dt));
        int ids[3] = {5, 0, 69};
        float *e = be->ops->alloc(be, sizeof(float) * 3 * (size_t)I), *ref = malloc(sizeof(float) * (size_t)I);
        be->ops->embed(be, e, &w, ids, 3);
        int eq = 1;
        for (int r = 0; r < 3; r++) {
            db_convert_to_f32(ref, (const char *)host + (size_t)ids[r] * db_dtype_bytes(dt, (size_t)I), dt, (size_t)I);
            eq &= memcmp(ref, e + (size_t)r * I, sizeof(float) * (size_t)I) == 0;
        }
        tap_ok(eq, "cpu backend embed of a %s table == the dequantized rows", db_dtype_name(dt));
        be->ops->dfree(be, e);
        be->ops->dfree(be, x);
        be->ops->dfree(be, y);
        be->ops->dfree(be, y1);
        db_weight_free(be, &w);
        free(ref);
        free(host);
    }
    /* a backend without quantized kernels refuses the upload instead of misreading the bytes */
    be->quant_weights = 0;
    db_weight w;
    unsigned char blk[34] = {0};
    tap_ok(db_weight_upload(be, &w, blk, DB_Q8_0, 1, 32) != 0 && strstr(be->err, "q8_0"),
           "upload of q8_0 weights refused without quant_weights: %s", be->err);
    db_backend_destroy(be);
}

int main(void)
{
    db_rng_seed(&rng, 1234);
    test_golden();
    kern ks[4];
    int nk = kernels(ks);
    test_accuracy(ks, nk);
    test_invariance(ks, nk);
    test_exact_values(ks, nk);
    test_backend();
    return tap_done();
}
