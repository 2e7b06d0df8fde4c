/* test_gpu.c — every op of the GPU backends (cuda, hip: whichever this binary has) against the
 * CPU backend, then the whole pipeline on the device (meson suite `gpu`).
 *
 * Skips the whole file (TAP "1..0 # SKIP no CUDA device") when no GPU backend is compiled in,
 * or when none finds a device: CI and machines without a GPU. A backend that is compiled in
 * and sees a device but fails to start is a failure, not a skip, as is a module built that
 * does not load (backends/backend_module.c; $DB_BACKEND_DIR, else this build tree's).
 *
 * Built a second time with -DDB_TEST_GPU_EMU=1 as test-gpu-emu (suite `unit`): then it checks
 * the `gpu-emu` backend instead, the same kernels run on the CPU by backends/cuda/gpu_emu.h,
 * with 32-lane warps, then 64-lane warps resumed in reverse thread order, so CI executes every
 * kernel without a GPU (smaller matmul shapes, and a shorter pipeline check, because the
 * emulation is slow).
 *
 * Per op, random inputs (fresh per case, never zeros), the same on both backends; the GPU
 * output buffer is poisoned with NaN first where the op overwrites it, so an unwritten element
 * fails. Errors are max |gpu - cpu| / max |cpu| over the output:
 *   f32 arithmetic (every op with f32 or bf16 / f16 weights widened to f32):      1e-5
 *   matmul through cuBLAS with bf16 / f16 weights (activations rounded to the
 *   weight dtype, non-deterministic mode, n >= 16):                              1e-2
 * Exact (bitwise): embed, add, copy_rows, topk (ids and values, ties -> smaller id, -0 == +0),
 * fill_random (== db_fill_random_host), sample and accept (== db_sample_index_u /
 * db_accept_sample_u of backends/sampling.c: the ids, a and the bonus), select_walk's picks
 * (== its pair scores walked by db_select_walk_u; q bitwise under the emulation, 1e-5 on a
 * device, whose expf differs from the host's in the last bits), the support of probs
 * (which entries survive top-k / top-p; their values to 1e-5), batch invariance of
 * deterministic matmul and of attention (a row alone == the row among others). Matmul runs
 * three ways: deterministic (the row-dot kernel at every n), fast (cuBLAS from 16 rows) and
 * fast with DB_GPU_NO_BLAS=1 (the backend's own tiled GEMM, HIP's large-n path). Quantized weights (every
 * type of backend.h, random blocks): matmul against the C dequantizer (backends/quant.c) in double and the
 * CPU backend, 1e-5, batch-invariant in both modes; embed bitwise.
 *
 * Then the pipeline: greedy generation with the tests/data/qwen3-f32-tied target and the
 * tests/data/dflash2-f32 drafter (dspark, eagle3, mtp: dspark-f32, eagle3-f32, mtp-f32), variants
 * ar, dflash, selector-off, conv-off, dflash2, dspark, eagle3, mtp at concurrency 2, deterministic
 * and fast mode, must give the CPU backend's tokens, and `dflash-bench check-lossless --backend
 * NAME` must pass. Sampled generation (ar, selector-off, dflash2, mtp) on the device path must give
 * the host path's tokens on the same backend.
 *
 * Non-finite logits: probs turns rows holding a NaN or no finite largest value into zeros and
 * counts them (== the CPU backend's rows and count), the count read back with the results of
 * sample, accept, topk, download or asked alone; a NaN planted past the prefill of a sampled
 * point (engine_test.h) stops it naming the target or drafter call and the model. */
#include "config.h"
#include "backend.h"
#include "model/model_test.h"
#include "engine/engine.h"
#include "engine/engine_test.h"
#include "tap.h"
#include "test_util.h"
#include "base/util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const db_backend_ops db_cpu_backend_ops;

static db_rng rng;
static db_backend *cpu;
static char err[512];

static float urand(float lo, float hi) { return lo + (hi - lo) * (float)db_rng_uniform(&rng); }

static float *rand_floats(size_t n, float lo, float hi)
{
    float *v = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) v[i] = urand(lo, hi);
    return v;
}

static int *rand_ints(size_t n, int lo, int hi) /* [lo, hi) */
{
    int *v = malloc(sizeof(int) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) v[i] = lo + (int)(db_rng_uniform(&rng) * (hi - lo));
    return v;
}

/* host data -> new device buffer of backend be */
static void *dev_put(db_backend *be, const void *host, size_t bytes)
{
    void *d = be->ops->alloc(be, bytes);
    if (d && host && be->ops->upload(be, d, host, bytes) != 0) {
        be->ops->dfree(be, d);
        return NULL;
    }
    return d;
}

/* a device buffer of n floats filled with NaN (to see unwritten outputs) */
static float *dev_poison(db_backend *be, size_t n)
{
    float *h = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    float *d = dev_put(be, h, sizeof(float) * n);
    free(h);
    return d;
}

static float *dev_get(db_backend *be, const void *d, size_t n)
{
    float *h = malloc(sizeof(float) * (n ? n : 1));
    if (be->ops->download(be, h, d, sizeof(float) * n) != 0) {
        tap_diag("download: %s", be->err);
        for (size_t i = 0; i < n; i++) h[i] = NAN;
    }
    return h;
}

/* max |a - b| / max |b|; NaN anywhere -> infinity */
static double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return INFINITY;
        if (isnan(a[i])) continue;
        double e = fabs((double)a[i] - (double)b[i]);
        if (e > d) d = e;
        if (fabs((double)b[i]) > m) m = fabs((double)b[i]);
    }
    return m > 0 ? d / m : d;
}

/* weights in dtype dt from f32 values (the CPU and the GPU get the same bits) */
static void *to_dtype(const float *v, size_t n, db_dtype dt)
{
    if (dt == DB_F32) {
        float *o = malloc(sizeof(float) * n);
        memcpy(o, v, sizeof(float) * n);
        return o;
    }
    uint16_t *o = malloc(sizeof(uint16_t) * n);
    for (size_t i = 0; i < n; i++) o[i] = dt == DB_BF16 ? db_f32_to_bf16(v[i]) : db_f32_to_f16(v[i]);
    return o;
}

/* ------------------------------------------------------------------------ memory */

static void test_memory(db_backend *g, const char *name)
{
    size_t before = g->bytes_in_use;
    const size_t n = 1000;
    float *a = g->ops->alloc(g, sizeof(float) * n), *b = g->ops->alloc(g, sizeof(float) * n);
    tap_ok(a && b && g->bytes_in_use == before + 2 * sizeof(float) * n && g->bytes_peak >= g->bytes_in_use,
           "%s: alloc counts bytes (%zu in use)", name, g->bytes_in_use);
    if (!a || !b) return;
    float *z = dev_get(g, a, n);
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= z[i] == 0.0f;
    tap_ok(zero, "%s: alloc is zero-filled", name);
    float *h = rand_floats(n, -1, 1);
    g->ops->upload(g, a, h, sizeof(float) * n);
    g->ops->copy_rows(g, b + 10, 0, NULL, a, 0, NULL, 1, (int)(n - 10));
    float *back = dev_get(g, b, n);
    tap_ok(memcmp(back + 10, h, sizeof(float) * (n - 10)) == 0 && back[0] == 0.0f && g->ops->sync(g) == 0,
           "%s: upload, copy_rows at an offset, download round trip", name);
    g->ops->dfree(g, a);
    g->ops->dfree(g, b);
    tap_ok(g->bytes_in_use == before, "%s: dfree returns the bytes", name);
    void *empty = g->ops->alloc(g, 0);
    tap_ok(empty != NULL, "%s: alloc(0) gives a pointer", name);
    g->ops->dfree(g, empty);
    free(z), free(h), free(back);
}

/* ------------------------------------------------------------------------ matmul */

typedef struct {
    int O, I;
} shape;

/* one (dtype, mode) sweep over shapes, n and accumulate; returns the worst relative error, and
 * in deterministic mode checks that each row equals the row computed alone */
static double matmul_sweep(db_backend *g, db_dtype dt, int *invariant)
{
#if DB_TEST_GPU_EMU /* the emulation runs a warp-level step per fiber switch: smaller cases */
    static const shape shapes[] = {{37, 40}, {24, 256}, {19, 129}};
    static const int ns[] = {1, 5, 17};
#else
    /* I = 4616: a row as long as a model's (lanes own 18 or 19 chunks of 8) */
    static const shape shapes[] = {{37, 40}, {64, 256}, {300, 129}, {160, 1024}, {96, 4616}};
    static const int ns[] = {1, 5, 16, 40};
#endif
    double worst = 0.0;
    *invariant = 1;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int O = shapes[si].O, I = shapes[si].I;
        float *wf = rand_floats((size_t)O * I, -1, 1);
        void *wh = to_dtype(wf, (size_t)O * I, dt);
        db_weight wc, wg;
        db_weight_upload(cpu, &wc, wh, dt, O, I);
        if (db_weight_upload(g, &wg, wh, dt, O, I) != 0) {
            tap_diag("weight upload: %s", g->err);
            worst = INFINITY;
        }
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns && wg.data; ni++) {
            int n = ns[ni];
            for (int acc = 0; acc <= 1; acc++) {
                float *x = rand_floats((size_t)n * I, -1, 1), *y0 = rand_floats((size_t)n * O, -2, 2);
                float *xc = dev_put(cpu, x, sizeof(float) * n * I), *yc = dev_put(cpu, y0, sizeof(float) * n * O);
                float *xg = dev_put(g, x, sizeof(float) * n * I);
                float *yg = acc ? dev_put(g, y0, sizeof(float) * n * O) : dev_poison(g, (size_t)n * O);
                cpu->ops->matmul(cpu, yc, xc, &wc, n, acc);
                g->ops->matmul(g, yg, xg, &wg, n, acc);
                float *yh = dev_get(g, yg, (size_t)n * O);
                double e = rel_err(yh, yc, (size_t)n * O);
                if (e > worst) worst = e;
                if (g->deterministic && n > 1) { /* each row alone, at the same row offset */
                    float *y1 = dev_poison(g, (size_t)n * O);
                    if (acc) g->ops->upload(g, y1, y0, sizeof(float) * n * O);
                    for (int r = 0; r < n; r++)
                        g->ops->matmul(g, y1 + (size_t)r * O, xg + (size_t)r * I, &wg, 1, acc);
                    float *y1h = dev_get(g, y1, (size_t)n * O);
                    if (memcmp(y1h, yh, sizeof(float) * n * O) != 0) {
                        *invariant = 0;
                        tap_diag("matmul %s O=%d I=%d n=%d acc=%d: rows alone differ from the batch", db_dtype_name(dt),
                                 O, I, n, acc);
                    }
                    free(y1h);
                    g->ops->dfree(g, y1);
                }
                free(x), free(y0), free(yh);
                cpu->ops->dfree(cpu, xc), cpu->ops->dfree(cpu, yc);
                g->ops->dfree(g, xg), g->ops->dfree(g, yg);
            }
        }
        db_weight_free(cpu, &wc);
        db_weight_free(g, &wg);
        free(wf), free(wh);
    }
    return worst;
}

static void test_matmul(db_backend *g, db_backend *g_noblas, const char *name)
{
    static const db_dtype dts[] = {DB_F32, DB_BF16, DB_F16};
    for (size_t di = 0; di < 3; di++) {
        db_dtype dt = dts[di];
        int inv;
        g->deterministic = 1;
        double e = matmul_sweep(g, dt, &inv);
        tap_ok(e <= 1e-5, "%s: matmul %s deterministic (row-dot kernel), rel err %.2e", name, db_dtype_name(dt), e);
        tap_ok(inv, "%s: matmul %s deterministic: a row alone == the row in a batch (bitwise)", name,
               db_dtype_name(dt));
        g->deterministic = 0;
        e = matmul_sweep(g, dt, &inv);
        double bound = dt == DB_F32 ? 1e-5 : 1e-2;
        tap_ok(e <= bound, "%s: matmul %s fast (vendor BLAS from 16 rows), rel err %.2e (bound %.0e)", name,
               db_dtype_name(dt), e, bound);
        if (g_noblas) {
            g_noblas->deterministic = 0;
            e = matmul_sweep(g_noblas, dt, &inv);
            tap_ok(e <= 1e-5, "%s: matmul %s fast, own tiled GEMM (DB_GPU_NO_BLAS=1), rel err %.2e", name,
                   db_dtype_name(dt), e);
        }
    }
    g->deterministic = 0;
}

/* ------------------------------------------------------------------------ quantized weights */

/* rows x cols weights of quantized dt: random bytes, the f16 scales set to finite values */
static uint8_t *rand_quant(db_dtype dt, int rows, int cols)
{
    size_t bytes = (size_t)rows * db_dtype_bytes(dt, (size_t)cols), bb = db_dtype_size(dt);
    uint8_t *b = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) b[i] = (uint8_t)(db_rng_next(&rng) >> 56);
    for (size_t k = 0; k < bytes / bb; k++) {
        uint16_t d = db_f32_to_f16(urand(0.001f, 0.02f)), m = db_f32_to_f16(urand(0.0f, 0.01f));
        int off = dt == DB_Q6_K ? 208 : dt == DB_Q3_K ? 108 : dt == DB_Q2_K ? 80 : 0;
        memcpy(b + k * bb + off, &d, 2);
        if (dt == DB_Q4_K || dt == DB_Q5_K || dt == DB_Q4_1 || dt == DB_Q5_1) memcpy(b + k * bb + 2, &m, 2);
        if (dt == DB_Q2_K) memcpy(b + k * bb + 82, &m, 2);
    }
    return b;
}

/* matmul and embed on every quantized type against the C reference (backends/quant.c through
 * db_convert_to_f32, dot products in double) and the CPU backend's kernels: matmul to 1e-5
 * (summation order only), batch-invariant in the fast mode too (a row alone == the row in a
 * batch, bitwise); embed bitwise */
static void test_quant(db_backend *g, const char *name)
{
    static const db_dtype dts[] = {DB_Q8_0, DB_Q4_0, DB_Q4_K, DB_Q5_K, DB_Q6_K, DB_Q4_1,
                                   DB_Q5_0, DB_Q5_1, DB_Q2_K, DB_Q3_K, DB_IQ4_NL, DB_IQ4_XS};
#if DB_TEST_GPU_EMU
    static const int ns[] = {1, 5, 17};
    const int O = 13, Ik = 256, I0 = 96;
#else
    static const int ns[] = {1, 5, 16, 40};
    const int O = 300, Ik = 1024, I0 = 4096 + 96;
#endif
    g->deterministic = 0;
    for (int di = 0; di < (int)(sizeof dts / sizeof *dts); di++) {
        db_dtype dt = dts[di];
        int I = db_dtype_block(dt) == 32 ? I0 : Ik, inv = 1;
        uint8_t *wh = rand_quant(dt, O, I);
        float *wf = malloc(sizeof(float) * (size_t)O * I);
        db_convert_to_f32(wf, wh, dt, (size_t)O * I);
        db_weight wc, wg;
        db_weight_upload(cpu, &wc, wh, dt, O, I);
        int up = db_weight_upload(g, &wg, wh, dt, O, I);
        tap_ok(up == 0, "%s: %s weights upload (%s)", name, db_dtype_name(dt), up ? g->err : "ok");
        double e_ref = 0, e_cpu = 0;
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns && up == 0; ni++) {
            int n = ns[ni], acc = ni % 2;
            float *x = rand_floats((size_t)n * I, -1, 1), *y0 = rand_floats((size_t)n * O, -2, 2);
            float *xc = dev_put(cpu, x, sizeof(float) * n * I), *yc = dev_put(cpu, y0, sizeof(float) * n * O);
            float *xg = dev_put(g, x, sizeof(float) * n * I);
            float *yg = acc ? dev_put(g, y0, sizeof(float) * n * O) : dev_poison(g, (size_t)n * O);
            float *y1 = acc ? dev_put(g, y0, sizeof(float) * n * O) : dev_poison(g, (size_t)n * O);
            cpu->ops->matmul(cpu, yc, xc, &wc, n, acc);
            g->ops->matmul(g, yg, xg, &wg, n, acc);
            for (int r = 0; r < n; r++) g->ops->matmul(g, y1 + (size_t)r * O, xg + (size_t)r * I, &wg, 1, acc);
            float *yh = dev_get(g, yg, (size_t)n * O), *y1h = dev_get(g, y1, (size_t)n * O), *ych = dev_get(cpu, yc, (size_t)n * O);
            float *ref = malloc(sizeof(float) * (size_t)n * O);
            for (int r = 0; r < n; r++)
                for (int o = 0; o < O; o++) {
                    double d = acc ? y0[(size_t)r * O + o] : 0.0;
                    for (int i = 0; i < I; i++) d += (double)wf[(size_t)o * I + i] * x[(size_t)r * I + i];
                    ref[(size_t)r * O + o] = (float)d;
                }
            double a = rel_err(yh, ref, (size_t)n * O), b = rel_err(yh, ych, (size_t)n * O);
            e_ref = a > e_ref ? a : e_ref;
            e_cpu = b > e_cpu ? b : e_cpu;
            inv &= memcmp(yh, y1h, sizeof(float) * n * O) == 0;
            free(x), free(y0), free(yh), free(y1h), free(ych), free(ref);
            cpu->ops->dfree(cpu, xc), cpu->ops->dfree(cpu, yc);
            g->ops->dfree(g, xg), g->ops->dfree(g, yg), g->ops->dfree(g, y1);
        }
        tap_ok(e_ref <= 1e-5 && e_cpu <= 1e-5, "%s: matmul %s [%d, %d] vs the C reference (rel err %.2e) and the CPU kernels (%.2e)",
               name, db_dtype_name(dt), O, I, e_ref, e_cpu);
        tap_ok(inv, "%s: matmul %s fast mode: a row alone == the row in a batch (bitwise)", name, db_dtype_name(dt));
        int ids[7] = {O - 1, 0, 3, 3, 7, 1, 12}, n = 7;
        float *oc = dev_put(cpu, NULL, sizeof(float) * n * I), *og = dev_poison(g, (size_t)n * I);
        cpu->ops->embed(cpu, oc, &wc, ids, n);
        if (up == 0) g->ops->embed(g, og, &wg, ids, n);
        float *h = dev_get(g, og, (size_t)n * I);
        int same = 1;
        for (int r = 0; r < n; r++) same &= memcmp(h + (size_t)r * I, wf + (size_t)ids[r] * I, sizeof(float) * I) == 0;
        tap_ok(same && memcmp(h, oc, sizeof(float) * n * I) == 0, "%s: embed %s == the C reference and the CPU (bitwise)", name,
               db_dtype_name(dt));
        free(h), cpu->ops->dfree(cpu, oc), g->ops->dfree(g, og);
        db_weight_free(cpu, &wc);
        if (up == 0) db_weight_free(g, &wg);
        free(wh), free(wf);
    }
}

/* ------------------------------------------------------------------------ elementwise, norms */

static void test_rmsnorm(db_backend *g, const char *name)
{
    static const int cases[][2] = {{7, 16}, {3, 128}, {33, 1024}, {2, 4096}};
    for (size_t ci = 0; ci < 4; ci++) {
        int n = cases[ci][0], d = cases[ci][1];
        for (int inplace = 0; inplace <= 1; inplace++) {
            float *x = rand_floats((size_t)n * d, -3, 3), *w = rand_floats((size_t)d, 0.5f, 1.5f);
            float *xc = dev_put(cpu, x, sizeof(float) * n * d), *wc = dev_put(cpu, w, sizeof(float) * d);
            float *xg = dev_put(g, x, sizeof(float) * n * d), *wg = dev_put(g, w, sizeof(float) * d);
            float *yc = inplace ? xc : dev_put(cpu, NULL, sizeof(float) * n * d);
            float *yg = inplace ? xg : dev_poison(g, (size_t)n * d);
            cpu->ops->rmsnorm(cpu, yc, xc, wc, n, d, 1e-6f);
            g->ops->rmsnorm(g, yg, xg, wg, n, d, 1e-6f);
            float *yh = dev_get(g, yg, (size_t)n * d);
            double e = rel_err(yh, yc, (size_t)n * d);
            tap_ok(e <= 1e-5, "%s: rmsnorm n=%d d=%d%s, rel err %.2e", name, n, d, inplace ? " in place" : "", e);
            if (!inplace) cpu->ops->dfree(cpu, yc), g->ops->dfree(g, yg);
            cpu->ops->dfree(cpu, xc), cpu->ops->dfree(cpu, wc), g->ops->dfree(g, xg), g->ops->dfree(g, wg);
            free(x), free(w), free(yh);
        }
    }
}

static void test_rope(db_backend *g, const char *name)
{
    static const int hds[] = {16, 64, 128};
    for (size_t hi = 0; hi < 3; hi++) {
        int n = 6, nh = 4, hd = hds[hi];
        size_t len = (size_t)n * nh * hd;
        float *x = rand_floats(len, -2, 2);
        int *pos = rand_ints((size_t)n, 0, 200000);
        pos[0] = 0;
        pos[1] = 1;
        float *xc = dev_put(cpu, x, sizeof(float) * len), *xg = dev_put(g, x, sizeof(float) * len);
        cpu->ops->rope(cpu, xc, pos, n, nh, hd, 1000000.0f);
        g->ops->rope(g, xg, pos, n, nh, hd, 1000000.0f);
        float *yh = dev_get(g, xg, len);
        double e = rel_err(yh, xc, len);
        tap_ok(e <= 1e-5, "%s: rope hd=%d positions up to 2e5, rel err %.2e", name, hd, e);
        cpu->ops->dfree(cpu, xc), g->ops->dfree(g, xg);
        free(x), free(pos), free(yh);
    }
}

static void test_elementwise(db_backend *g, const char *name)
{
    const size_t n = 100003;
    float *a = rand_floats(n, -8, 8), *b = rand_floats(n, -2, 2);
    float *ac = dev_put(cpu, a, sizeof(float) * n), *bc = dev_put(cpu, b, sizeof(float) * n);
    float *ag = dev_put(g, a, sizeof(float) * n), *bg = dev_put(g, b, sizeof(float) * n);
    float *oc = dev_put(cpu, NULL, sizeof(float) * n), *og = dev_poison(g, n);
    cpu->ops->swiglu(cpu, oc, ac, bc, n);
    g->ops->swiglu(g, og, ag, bg, n);
    float *h = dev_get(g, og, n);
    double e = rel_err(h, oc, n);
    tap_ok(e <= 1e-5, "%s: swiglu, rel err %.2e", name, e);
    free(h);
    cpu->ops->add(cpu, ac, bc, n);
    g->ops->add(g, ag, bg, n);
    h = dev_get(g, ag, n);
    tap_ok(memcmp(h, ac, sizeof(float) * n) == 0, "%s: add (bitwise)", name);
    free(h);
    static const float mc[][2] = {{1.5f, 20.0f}, {0.5f, 0.0f}, {1.0f, 3.0f}};
    for (int i = 0; i < 3; i++) {
        cpu->ops->scale_softcap(cpu, bc, n, mc[i][0], mc[i][1]);
        g->ops->scale_softcap(g, bg, n, mc[i][0], mc[i][1]);
        h = dev_get(g, bg, n);
        e = rel_err(h, bc, n);
        tap_ok(e <= 1e-5, "%s: scale_softcap mult %.1f cap %.0f, rel err %.2e", name, mc[i][0], mc[i][1], e);
        free(h);
    }
    cpu->ops->dfree(cpu, ac), cpu->ops->dfree(cpu, bc), cpu->ops->dfree(cpu, oc);
    g->ops->dfree(g, ag), g->ops->dfree(g, bg), g->ops->dfree(g, og);
    free(a), free(b);
}

static void test_embed_copy_rows(db_backend *g, const char *name)
{
    static const db_dtype dts[] = {DB_F32, DB_BF16, DB_F16};
    const int V = 50, d = 40, n = 9;
    for (int di = 0; di < 3; di++) {
        float *tf = rand_floats((size_t)V * d, -4, 4);
        void *th = to_dtype(tf, (size_t)V * d, dts[di]);
        db_weight tc, tg;
        db_weight_upload(cpu, &tc, th, dts[di], V, d);
        db_weight_upload(g, &tg, th, dts[di], V, d);
        int *ids = rand_ints((size_t)n, 0, V);
        ids[0] = V - 1;
        float *oc = dev_put(cpu, NULL, sizeof(float) * n * d), *og = dev_poison(g, (size_t)n * d);
        cpu->ops->embed(cpu, oc, &tc, ids, n);
        g->ops->embed(g, og, &tg, ids, n);
        float *h = dev_get(g, og, (size_t)n * d);
        tap_ok(memcmp(h, oc, sizeof(float) * n * d) == 0, "%s: embed %s (bitwise)", name, db_dtype_name(dts[di]));
        db_weight_free(cpu, &tc), db_weight_free(g, &tg);
        cpu->ops->dfree(cpu, oc), g->ops->dfree(g, og);
        free(tf), free(th), free(ids), free(h);
    }
    /* copy_rows: strides, index maps, NULL maps */
    const int rows = 12, ss = 40, ds = 50, width = 33, m = 6;
    float *src = rand_floats((size_t)rows * ss, -1, 1), *dst = rand_floats((size_t)rows * ds, -1, 1);
    float *sc = dev_put(cpu, src, sizeof(float) * rows * ss), *dc = dev_put(cpu, dst, sizeof(float) * rows * ds);
    float *sg = dev_put(g, src, sizeof(float) * rows * ss), *dg = dev_put(g, dst, sizeof(float) * rows * ds);
    int dmap[6] = {11, 0, 5, 3, 7, 2}, smap[6] = {4, 4, 0, 11, 9, 1};
    const int *dm[3] = {dmap, NULL, dmap}, *sm[3] = {smap, smap, NULL};
    int same = 1;
    for (int v = 0; v < 3; v++) {
        cpu->ops->copy_rows(cpu, dc, ds, dm[v], sc, ss, sm[v], m, width);
        g->ops->copy_rows(g, dg, ds, dm[v], sg, ss, sm[v], m, width);
        float *h = dev_get(g, dg, (size_t)rows * ds);
        same &= memcmp(h, dc, sizeof(float) * rows * ds) == 0;
        free(h);
    }
    tap_ok(same, "%s: copy_rows with strides, index maps and NULL maps (bitwise)", name);
    cpu->ops->dfree(cpu, sc), cpu->ops->dfree(cpu, dc), g->ops->dfree(g, sg), g->ops->dfree(g, dg);
    free(src), free(dst);
}

/* ------------------------------------------------------------------------ attention */

static void test_attention(db_backend *g, const char *name)
{
    static const int hds[] = {16, 64, 128};
    const int slots = 3, cap = 300, nh = 8, nkv = 2, n = 7;
    const db_attn_row rows[7] = {{0, 0, 1},   {1, 0, 300}, {2, 5, 137}, {0, 10, 10},
                                 {1, 250, 300}, {2, 0, 33}, {0, 31, 97}};
    for (int hi = 0; hi < 3; hi++) {
        int hd = hds[hi];
        size_t kvn = (size_t)slots * cap * nkv * hd, qn = (size_t)n * nh * hd;
        float *k = rand_floats(kvn, -1, 1), *v = rand_floats(kvn, -1, 1), *q = rand_floats(qn, -3, 3);
        float *kc = dev_put(cpu, k, sizeof(float) * kvn), *vc = dev_put(cpu, v, sizeof(float) * kvn);
        float *qc = dev_put(cpu, q, sizeof(float) * qn), *oc = dev_put(cpu, NULL, sizeof(float) * qn);
        float *kg = dev_put(g, k, sizeof(float) * kvn), *vg = dev_put(g, v, sizeof(float) * kvn);
        float *qg = dev_put(g, q, sizeof(float) * qn), *og = dev_poison(g, qn), *o1 = dev_poison(g, qn);
        float scale = 1.0f / sqrtf((float)hd);
        cpu->ops->attention(cpu, oc, qc, kc, vc, cap, rows, n, nh, nkv, hd, scale);
        g->ops->attention(g, og, qg, kg, vg, cap, rows, n, nh, nkv, hd, scale);
        for (int r = 0; r < n; r++)
            g->ops->attention(g, o1 + (size_t)r * nh * hd, qg + (size_t)r * nh * hd, kg, vg, cap, rows + r, 1, nh, nkv,
                              hd, scale);
        float *h = dev_get(g, og, qn), *h1 = dev_get(g, o1, qn);
        double e = rel_err(h, oc, qn);
        tap_ok(e <= 1e-5, "%s: attention hd=%d GQA 8:2, key ranges 0..300 incl. empty, rel err %.2e", name, hd, e);
        tap_ok(memcmp(h, h1, sizeof(float) * qn) == 0, "%s: attention hd=%d: a row alone == the row in a batch", name,
               hd);
        cpu->ops->dfree(cpu, kc), cpu->ops->dfree(cpu, vc), cpu->ops->dfree(cpu, qc), cpu->ops->dfree(cpu, oc);
        g->ops->dfree(g, kg), g->ops->dfree(g, vg), g->ops->dfree(g, qg), g->ops->dfree(g, og), g->ops->dfree(g, o1);
        free(k), free(v), free(q), free(h), free(h1);
    }
}

static db_backend *make_backend(const db_backend_ops *ops, int deterministic, char *msg, size_t msglen);

static void attn_call(db_backend *be, int f16, float *o, const float *q, const void *k, const void *v, int off,
                      int cap, const db_attn_row *rows, int n, int nh, int nkv, int hd, float scale)
{
    if (f16)
        be->ops->attention_f16(be, o, q, (const uint16_t *)k + off, (const uint16_t *)v + off, cap, rows, n, nh, nkv,
                               hd, scale);
    else
        be->ops->attention(be, o, q, (const float *)k + off, (const float *)v + off, cap, rows, n, nh, nkv, hd, scale);
}

/* Verify-shaped attention: consecutive rows of one slot with one key_lo (several requests x B
 * rows) go to the several-query kernel, k_attention_multi, on a device backend; its every
 * (row, head) must equal the row computed alone (k_attention) bitwise, and the CPU backend's to
 * 1e-5. Also with 3 (row, head) pairs a block (DB_GPU_ATT_PAIRS=3: tasks that split a row's
 * heads and end mid-row) instead of 8. GQA 4:4, 8:4, 8:2; head_dim 64 and 128; f32 and f16
 * caches, aligned (the vector loads) and, for one shape, unaligned (the scalar loads). */
static void test_attention_verify(db_backend *g, const char *name)
{
    static const db_attn_row rows[] = {
        /* request A, slot 2: a causal verify block of 5 at position 60 (61..65 keys: across 64, a
         * tile boundary at warp 32 and 64) */
        {2, 0, 61}, {2, 0, 62}, {2, 0, 63}, {2, 0, 64}, {2, 0, 65},
        {0, 5, 100}, /* a decode row: alone, k_attention */
        /* request B, slot 0: more keys than one round of tiles over the warps (256) */
        {0, 0, 291}, {0, 0, 292}, {0, 0, 293}, {0, 0, 294},
        /* request C, slot 1: short, a padding row (no keys) inside, 32 -> 33 keys */
        {1, 0, 3}, {1, 0, 0}, {1, 0, 32}, {1, 0, 33},
        {2, 10, 50}, {2, 11, 51}, /* windowed rows: key_lo moves, each alone */
        /* request D, slot 1: a block without the causal mask inside (one key range for all) */
        {1, 0, 129}, {1, 0, 129}, {1, 0, 129},
    };
    static const int gqa[3][2] = {{4, 4}, {8, 4}, {8, 2}}, hds[] = {64, 128};
    const int n = (int)(sizeof rows / sizeof rows[0]), slots = 3, cap = 300;
    setenv("DB_GPU_ATT_PAIRS", "3", 1);
    db_backend *g3 = make_backend(g->ops, 0, err, sizeof err);
    unsetenv("DB_GPU_ATT_PAIRS");
    if (!g3) {
        tap_ok(0, "%s: backend with DB_GPU_ATT_PAIRS=3: %s", name, err);
        return;
    }
    for (int f16 = 0; f16 <= 1; f16++)
        for (int gi = 0; gi < 3; gi++)
            for (int hi = 0; hi < 2; hi++)
                for (int off = 0; off <= (gi == 1 && hi == 0); off++) {
                    int nh = gqa[gi][0], nkv = gqa[gi][1], hd = hds[hi];
                    size_t kvn = (size_t)slots * cap * nkv * hd + 1, qn = (size_t)n * nh * hd, es = f16 ? 2 : 4;
                    void *k = malloc(es * kvn), *v = malloc(es * kvn);
                    for (size_t i = 0; i < kvn; i++) {
                        float a = urand(-1, 1), b = urand(-1, 1);
                        if (f16)
                            ((uint16_t *)k)[i] = db_f32_to_f16(a), ((uint16_t *)v)[i] = db_f32_to_f16(b);
                        else
                            ((float *)k)[i] = a, ((float *)v)[i] = b;
                    }
                    float *q = rand_floats(qn, -3, 3), scale = 1.0f / sqrtf((float)hd);
                    void *kc = dev_put(cpu, k, es * kvn), *vc = dev_put(cpu, v, es * kvn);
                    void *kg = dev_put(g, k, es * kvn), *vg = dev_put(g, v, es * kvn);
                    void *k3 = dev_put(g3, k, es * kvn), *v3 = dev_put(g3, v, es * kvn);
                    float *qc = dev_put(cpu, q, sizeof(float) * qn), *oc = dev_put(cpu, NULL, sizeof(float) * qn);
                    float *qg = dev_put(g, q, sizeof(float) * qn), *og = dev_poison(g, qn), *o1 = dev_poison(g, qn);
                    float *q3 = dev_put(g3, q, sizeof(float) * qn), *o3 = dev_poison(g3, qn);
                    attn_call(cpu, f16, oc, qc, kc, vc, off, cap, rows, n, nh, nkv, hd, scale);
                    attn_call(g, f16, og, qg, kg, vg, off, cap, rows, n, nh, nkv, hd, scale);
                    attn_call(g3, f16, o3, q3, k3, v3, off, cap, rows, n, nh, nkv, hd, scale);
                    for (int r = 0; r < n; r++)
                        attn_call(g, f16, o1 + (size_t)r * nh * hd, qg + (size_t)r * nh * hd, kg, vg, off, cap, rows + r,
                                  1, nh, nkv, hd, scale);
                    float *h = dev_get(g, og, qn), *h1 = dev_get(g, o1, qn), *h3 = dev_get(g3, o3, qn);
                    float *hc = dev_get(cpu, oc, qn);
                    double e = rel_err(h, hc, qn);
                    const char *what = f16 ? "f16" : "f32", *al = off ? " unaligned" : "";
                    tap_ok(e <= 1e-5, "%s: attention verify-shaped (4 requests x 3-5 rows, rows alone) %s%s hd=%d GQA %d:%d, rel err %.2e to cpu",
                           name, what, al, hd, nh, nkv, e);
                    tap_ok(memcmp(h, h1, sizeof(float) * qn) == 0 && memcmp(h, h3, sizeof(float) * qn) == 0,
                           "%s: attention verify-shaped %s%s hd=%d GQA %d:%d: == each row alone == 3 pairs a block (bitwise)",
                           name, what, al, hd, nh, nkv);
                    cpu->ops->dfree(cpu, kc), cpu->ops->dfree(cpu, vc), cpu->ops->dfree(cpu, qc), cpu->ops->dfree(cpu, oc);
                    g->ops->dfree(g, kg), g->ops->dfree(g, vg), g->ops->dfree(g, qg), g->ops->dfree(g, og);
                    g->ops->dfree(g, o1);
                    g3->ops->dfree(g3, k3), g3->ops->dfree(g3, v3), g3->ops->dfree(g3, q3), g3->ops->dfree(g3, o3);
                    free(k), free(v), free(q), free(h), free(h1), free(h3), free(hc);
                }
    int rc = g3->ops->sync(g3);
    tap_ok(rc == 0 && g3->bytes_in_use == 0, "%s: DB_GPU_ATT_PAIRS=3 backend: no error latched (%s), buffers freed",
           name, rc ? g3->err : "ok");
    db_backend_destroy(g3);
}

/* f16 K/V caches: kv_store_f16 rounds as db_f32_to_f16 (bitwise, ties, subnormals, overflow,
 * signed zeros); attention_f16 == attention on the widened caches (bitwise: the same kernel and
 * order) and within 1e-5 of the CPU backend's attention_f16, with aligned and unaligned caches */
static void test_kv_f16(db_backend *g, const char *name)
{
    const int n = 5, width = 2 * 64, slots = 2, cap = 40, nh = 4, nkv = 2, hd = 64;
    float *src = rand_floats((size_t)n * width, -70000, 70000);
    static const float special[] = {0.0f, -0.0f, 65504.0f, 65520.0f, -65520.0f, 1e-8f, -3e-8f, 5.960464e-8f,
                                    2.98023224e-8f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) src[i * 7] = special[i];
    for (int i = 0; i < width; i++) src[width + i] = ldexpf(urand(-1, 1), -14 - (i % 12)); /* f16 subnormals */
    const int dst_idx[5] = {3, 0, 7, 1, 5};
    size_t cn = (size_t)8 * width;
    uint16_t *want = calloc(cn, 2), *got = calloc(cn, 2);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < width; i++) want[(size_t)dst_idx[r] * width + i] = db_f32_to_f16(src[(size_t)r * width + i]);
    float *sg = dev_put(g, src, sizeof(float) * n * width);
    uint16_t *cg = dev_put(g, NULL, 2 * cn);
    g->ops->kv_store_f16(g, cg, dst_idx, sg, n, width);
    int dl = g->ops->download(g, got, cg, 2 * cn);
    tap_ok(dl == 0 && memcmp(want, got, 2 * cn) == 0,
           "%s: kv_store_f16 == db_f32_to_f16 bitwise (ties, subnormals, overflow, +-0, +-inf), scattered rows", name);
    g->ops->dfree(g, sg), g->ops->dfree(g, cg);
    free(src), free(want), free(got);

    const db_attn_row rows[4] = {{0, 0, 40}, {1, 3, 29}, {0, 17, 17}, {1, 0, 1}};
    const int nr = 4;
    size_t kvn = (size_t)slots * cap * nkv * hd, qn = (size_t)nr * nh * hd;
    uint16_t *kh = malloc(2 * (kvn + 1)), *vh = malloc(2 * (kvn + 1));
    float *kw = malloc(sizeof(float) * kvn), *vw = malloc(sizeof(float) * kvn), *q = rand_floats(qn, -3, 3);
    for (size_t i = 0; i < kvn + 1; i++) kh[i] = db_f32_to_f16(urand(-1, 1)), vh[i] = db_f32_to_f16(urand(-1, 1));
    float scale = 1.0f / sqrtf((float)hd);
    for (int off = 0; off <= 1; off++) { /* off 1: caches 2 bytes past an 8-byte boundary */
        for (size_t i = 0; i < kvn; i++) kw[i] = db_f16_to_f32(kh[off + i]), vw[i] = db_f16_to_f32(vh[off + i]);
        uint16_t *kg = dev_put(g, kh, 2 * (kvn + 1)), *vg = dev_put(g, vh, 2 * (kvn + 1));
        uint16_t *kc = dev_put(cpu, kh, 2 * (kvn + 1)), *vc = dev_put(cpu, vh, 2 * (kvn + 1));
        float *kwg = dev_put(g, kw, sizeof(float) * kvn), *vwg = dev_put(g, vw, sizeof(float) * kvn);
        float *qg = dev_put(g, q, sizeof(float) * qn), *qc = dev_put(cpu, q, sizeof(float) * qn);
        float *oh = dev_poison(g, qn), *ow = dev_poison(g, qn), *oc = dev_put(cpu, NULL, sizeof(float) * qn);
        g->ops->attention_f16(g, oh, qg, kg + off, vg + off, cap, rows, nr, nh, nkv, hd, scale);
        g->ops->attention(g, ow, qg, kwg, vwg, cap, rows, nr, nh, nkv, hd, scale);
        cpu->ops->attention_f16(cpu, oc, qc, kc + off, vc + off, cap, rows, nr, nh, nkv, hd, scale);
        float *h = dev_get(g, oh, qn), *hw = dev_get(g, ow, qn);
        double e = rel_err(h, oc, qn);
        tap_ok(memcmp(h, hw, sizeof(float) * qn) == 0 && e <= 1e-5,
               "%s: attention_f16 (%s caches) == attention on the widened caches bitwise, rel err %.2e to cpu", name,
               off ? "unaligned" : "aligned", e);
        g->ops->dfree(g, kg), g->ops->dfree(g, vg), g->ops->dfree(g, kwg), g->ops->dfree(g, vwg);
        g->ops->dfree(g, qg), g->ops->dfree(g, oh), g->ops->dfree(g, ow);
        cpu->ops->dfree(cpu, kc), cpu->ops->dfree(cpu, vc), cpu->ops->dfree(cpu, qc), cpu->ops->dfree(cpu, oc);
        free(h), free(hw);
    }
    free(kh), free(vh), free(kw), free(vw), free(q);
}

/* ------------------------------------------------------------------------ topk, probs */

/* logits: mode 0 continuous; 1 few distinct values (ties), with -0 / +0 and -inf mixed in */
static float *make_logits(size_t n, int mode)
{
    float *x = rand_floats(n, -6, 6);
    if (mode == 1)
        for (size_t i = 0; i < n; i++) {
            x[i] = floorf(x[i] * 2.0f) / 8.0f;
            if (x[i] == 0.0f && (i & 1)) x[i] = -0.0f;
            if (i % 97 == 5) x[i] = -INFINITY;
        }
    return x;
}

static void test_topk(db_backend *g, const char *name)
{
    static const int cases[][3] = {{3, 96, 1}, {4, 96, 4}, {5, 1000, 16}, {2, 50000, 64}, {3, 151936, 16},
                                   {2, 151936, 1}, {4, 7, 7}};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        int n = cases[ci][0], v = cases[ci][1], k = cases[ci][2];
        for (int mode = 0; mode <= 1; mode++) {
            size_t len = (size_t)n * v;
            float *x = make_logits(len, mode);
            float *xc = dev_put(cpu, x, sizeof(float) * len), *xg = dev_put(g, x, sizeof(float) * len);
            int *ic = malloc(sizeof(int) * n * k), *ig = malloc(sizeof(int) * n * k);
            float *vc = malloc(sizeof(float) * n * k), *vg = malloc(sizeof(float) * n * k);
            memset(ig, 0xff, sizeof(int) * n * k);
            int rc = cpu->ops->topk(cpu, ic, vc, xc, n, v, k);
            int rg = g->ops->topk(g, ig, vg, xg, n, v, k);
            if (rg) tap_diag("%s", g->err);
            int same = rc == 0 && rg == 0 && memcmp(ic, ig, sizeof(int) * n * k) == 0 &&
                       memcmp(vc, vg, sizeof(float) * n * k) == 0;
            tap_ok(same, "%s: topk n=%d V=%d k=%d %s (ids and values exact)", name, n, v, k,
                   mode ? "many ties, -0/+0, -inf" : "continuous");
            int *ig2 = malloc(sizeof(int) * n * k);
            rg = g->ops->topk(g, ig2, NULL, xg, n, v, k);
            tap_ok(rg == 0 && memcmp(ig2, ic, sizeof(int) * n * k) == 0, "%s: topk n=%d V=%d k=%d without values", name,
                   n, v, k);
            cpu->ops->dfree(cpu, xc), g->ops->dfree(g, xg);
            free(x), free(ic), free(ig), free(vc), free(vg), free(ig2);
        }
    }
    int dummy;
    float *xg = dev_put(g, NULL, sizeof(float) * 8);
    tap_ok(g->ops->topk(g, &dummy, NULL, xg, 1, 8, 9) != 0, "%s: topk k > V is an error", name);
    g->ops->dfree(g, xg);
}

static void test_probs(db_backend *g, const char *name)
{
    static const int vs[] = {96, 5000, 151936};
    static const struct {
        float t, p;
        int k;
    } fs[] = {{1.0f, 1.0f, 0}, {0.7f, 0.9f, 0}, {1.0f, 0.5f, 20}, {1.3f, 1.0f, 50}, {1.0f, 0.95f, 20},
              {0.6f, 0.3f, 0}, {1.0f, 1e-6f, 0}, {1.0f, 1.0f, 1}};
    for (int vi = 0; vi < 3; vi++) {
        int v = vs[vi], n = v > 10000 ? 2 : 4;
        size_t len = (size_t)n * v;
        for (size_t fi = 0; fi < sizeof fs / sizeof *fs; fi++) {
            for (int mode = 0; mode <= 1; mode++) {
                float *x = make_logits(len, mode);
                if (mode == 1) /* no -inf here: the reference's expf(-inf) path is not the point */
                    for (size_t i = 0; i < len; i++)
                        if (isinf(x[i])) x[i] = -6.0f;
                float *xc = dev_put(cpu, x, sizeof(float) * len), *xg = dev_put(g, x, sizeof(float) * len);
                cpu->ops->probs(cpu, xc, n, v, fs[fi].t, fs[fi].p, fs[fi].k);
                g->ops->probs(g, xg, n, v, fs[fi].t, fs[fi].p, fs[fi].k);
                float *h = dev_get(g, xg, len);
                size_t support_diff = 0, kept = 0;
                for (size_t i = 0; i < len; i++) {
                    support_diff += (h[i] != 0.0f) != (xc[i] != 0.0f);
                    kept += xc[i] != 0.0f;
                }
                double e = rel_err(h, xc, len);
                tap_ok(support_diff == 0 && e <= 1e-5,
                       "%s: probs V=%d T=%.1f top_p=%g top_k=%d %s: support equal (%zu kept, %zu differ), rel err %.2e",
                       name, v, fs[fi].t, fs[fi].p, fs[fi].k, mode ? "ties" : "continuous", kept, support_diff, e);
                cpu->ops->dfree(cpu, xc), g->ops->dfree(g, xg);
                free(x), free(h);
            }
        }
    }
}

/* ------------------------------------------------------------------------ sample, accept */

/* a probability row of v entries: random masses with ~1/3 zeros, normalised (mode 0), or
 * mode 1: one-hot, mode 2: all zero, mode 3: a few tiny masses at the far end */
static void prob_row(float *x, int v, int mode)
{
    double s = 0.0;
    for (int i = 0; i < v; i++) {
        x[i] = mode == 0 && urand(0, 1) > 0.33f ? urand(0, 1) : 0.0f;
        s += x[i];
    }
    if (mode == 1) x[(int)urand(0, (float)v) % v] = 1.0f;
    if (mode == 3)
        for (int i = v - 3; i < v; i++) x[i > 0 ? i : 0] = 1e-30f;
    if (mode == 0 && s > 0)
        for (int i = 0; i < v; i++) x[i] = (float)(x[i] / s);
}

/* sample == db_sample_index_u, bitwise, over vocabularies below, at and across the chunk size
 * (one to many chunks), all-zero / one-hot / tiny rows, u = 0, u -> 1 and random u */
static void test_sample(db_backend *g, const char *name)
{
    static const int vs[] = {7, DB_SAMPLE_CHUNK, DB_SAMPLE_CHUNK + 1, 5000, 151936};
    for (size_t vi = 0; vi < sizeof vs / sizeof *vs; vi++) {
        int v = vs[vi], n = v > 10000 ? 3 : 12;
        size_t len = (size_t)n * v;
        float *x = malloc(sizeof(float) * len);
        double *u = malloc(sizeof(double) * n);
        int *ref = malloc(sizeof(int) * n), *out = malloc(sizeof(int) * n);
        for (int r = 0; r < n; r++) {
            prob_row(x + (size_t)r * v, v, r < 4 ? r : 0);
            u[r] = r == 4 ? 0.0 : r == 5 ? 1.0 - 0x1p-53 : db_rng_uniform(&rng);
            ref[r] = db_sample_index_u(x + (size_t)r * v, v, u[r]);
        }
        float *xg = dev_put(g, x, sizeof(float) * len);
        memset(out, 0xff, sizeof(int) * n);
        int rg = g->ops->sample(g, out, xg, n, v, u);
        if (rg) tap_diag("%s", g->err);
        tap_ok(rg == 0 && memcmp(out, ref, sizeof(int) * n) == 0,
               "%s: sample V=%d, %d rows (all-zero, one-hot, tiny, u = 0 and 1-2^-53) == db_sample_index_u", name, v, n);
        g->ops->dfree(g, xg);
        free(x), free(u), free(ref), free(out);
    }
}

/* accept == db_accept_sample_u per request (a and the bonus), dense and sparse q, on requests
 * built to reach every branch: full accepts, rejections with a residual, and rejections whose
 * residual is all zero (p = q/2, so the bonus is drawn from p) */
static void test_accept(db_backend *g, const char *name)
{
    static const int cases[][3] = {{5, 2, 50}, {6, 5, 3000}, {4, 8, DB_SAMPLE_CHUNK + 7}};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        int nq = cases[ci][0], B = cases[ci][1], v = cases[ci][2];
        for (int sparse = 0; sparse <= 1; sparse++) {
            const int qk = 4;
            size_t R1 = (size_t)nq * (B - 1), plen = (size_t)nq * B * v;
            float *p = malloc(sizeof(float) * plen), *q = calloc(R1 * v, sizeof(float));
            float *qv = malloc(sizeof(float) * R1 * qk), *res = malloc(sizeof(float) * v);
            int *qi = malloc(sizeof(int) * R1 * qk), *draft = calloc((size_t)nq * B, sizeof(int));
            double *u = malloc(sizeof(double) * nq * B);
            int *ar = malloc(sizeof(int) * nq), *br = malloc(sizeof(int) * nq);
            int *ag = malloc(sizeof(int) * nq), *bg = malloc(sizeof(int) * nq);
            for (int j = 0; j < nq; j++) {
                int kind = j % 3; /* 0 random, 1 p close to q (accepts), 2 p = q/2 (zero residual) */
                for (int t = 0; t < B; t++) prob_row(p + ((size_t)j * B + t) * v, v, 0);
                for (int t = 1; t < B; t++) {
                    size_t row = (size_t)j * (B - 1) + t - 1;
                    float *qr = q + row * v, *pr = p + ((size_t)j * B + t - 1) * v;
                    if (!sparse) {
                        prob_row(qr, v, 0);
                    } else { /* qk distinct ids, masses summing to 1 */
                        double s = 0;
                        for (int c = 0; c < qk; c++) {
                            qi[row * qk + c] = (c * v) / qk + (int)urand(0, (float)(v / qk)) % (v / qk > 0 ? v / qk : 1);
                            qv[row * qk + c] = urand(0.05f, 1);
                            s += qv[row * qk + c];
                        }
                        for (int c = 0; c < qk; c++) {
                            qv[row * qk + c] = (float)(qv[row * qk + c] / s);
                            qr[qi[row * qk + c]] = qv[row * qk + c];
                        }
                    }
                    if (kind == 1)
                        for (int i = 0; i < v; i++) pr[i] = qr[i] > 0 ? qr[i] * 1.01f : pr[i] * 0.01f;
                    if (kind == 2)
                        for (int i = 0; i < v; i++) pr[i] = qr[i] * 0.5f;
                    /* the draft: the largest entry of q (always in its support) */
                    int d = 0;
                    for (int i = 1; i < v; i++)
                        if (qr[i] > qr[d]) d = i;
                    draft[j * B + t] = d;
                }
                for (int t = 0; t < B; t++) u[j * B + t] = db_rng_uniform(&rng);
            }
            int full = 0, rej = 0;
            for (int j = 0; j < nq; j++) {
                const float *qj = sparse ? qv + (size_t)j * (B - 1) * qk : q + (size_t)j * (B - 1) * v;
                ar[j] = db_accept_sample_u(draft + j * B, p + (size_t)j * B * v, qj,
                                           sparse ? qi + (size_t)j * (B - 1) * qk : NULL, qk, B, v, u + j * B,
                                           res, &br[j]);
                full += ar[j] == B - 1;
                rej += ar[j] < B - 1;
            }
            float *pg = dev_put(g, p, sizeof(float) * plen);
            float *qg = sparse ? NULL : dev_put(g, q, sizeof(float) * R1 * v);
            memset(ag, 0xff, sizeof(int) * nq), memset(bg, 0xff, sizeof(int) * nq);
            int rg = g->ops->accept(g, ag, bg, pg, qg, sparse ? qv : NULL, sparse ? qi : NULL, qk, draft, u, nq, B, v);
            if (rg) tap_diag("%s", g->err);
            tap_ok(rg == 0 && memcmp(ag, ar, sizeof(int) * nq) == 0 && memcmp(bg, br, sizeof(int) * nq) == 0,
                   "%s: accept %s q, %d requests, B=%d V=%d (%d full accepts, %d rejections) == db_accept_sample_u", name,
                   sparse ? "sparse" : "dense", nq, B, v, full, rej);
            g->ops->dfree(g, pg);
            if (qg) g->ops->dfree(g, qg);
            free(p), free(q), free(qv), free(res), free(qi), free(draft), free(u), free(ar), free(br), free(ag), free(bg);
        }
    }
}

/* ------------------------------------------------------------------------ non-finite logits */

enum { NF_ROWS = 6, NF_BAD = 4 };

/* NF_ROWS rows of v logits, NF_BAD of them without a distribution: row 1 one NaN in the middle,
 * row 3 one +Inf, row 4 all -Inf, row 5 all NaN; rows 0 and 2 finite */
static float *nonfinite_logits(int v)
{
    float *x = rand_floats((size_t)NF_ROWS * v, -8, 8);
    x[(size_t)v + v / 2] = NAN;
    x[(size_t)3 * v + v - 1] = INFINITY;
    for (int i = 0; i < v; i++) x[(size_t)4 * v + i] = -INFINITY, x[(size_t)5 * v + i] = NAN;
    return x;
}

/* the op that takes the GPU's probs results to the host (the count comes back with it), or none
 * (nonfinite asked alone: its own wait) */
static int nonfinite_readback(db_backend *g, int via, float *xg, int v)
{
    int ids[NF_ROWS], acc[2], bonus[2], draft[NF_ROWS] = {0, 1, 2, 0, 3, 4};
    double u[NF_ROWS] = {0.1, 0.5, 0.9, 0.3, 0.7, 0.2};
    if (via == 0) return g->ops->sample(g, ids, xg, NF_ROWS, v, u);
    if (via == 2) return g->ops->topk(g, ids, NULL, xg, NF_ROWS, v, 1);
    if (via == 3) return 0;
    float *q = malloc(sizeof(float) * 4 * v); /* accept: 2 requests of block 3, dense q */
    for (int r = 0; r < 4; r++) prob_row(q + (size_t)r * v, v, 0);
    float *qg = dev_put(g, q, sizeof(float) * 4 * v);
    int rc = g->ops->accept(g, acc, bonus, xg, qg, NULL, NULL, 0, draft, u, 2, 3, v);
    g->ops->dfree(g, qg);
    free(q);
    return rc;
}

/* probs on rows of no distribution: zeros and a count of NF_BAD (the CPU backend's rows and
 * count), read back with sample / accept / topk or asked alone, then 0 */
static void test_nonfinite(db_backend *g, const char *name)
{
    static const char *const via_name[] = {"sample", "accept", "topk", "nothing (nonfinite waits)"};
    const int v = 2 * DB_SAMPLE_CHUNK + 5;
    size_t len = (size_t)NF_ROWS * v;
    for (int via = 0; via < 4; via++) {
        float *x = nonfinite_logits(v);
        float *xc = dev_put(cpu, x, sizeof(float) * len), *xg = dev_put(g, x, sizeof(float) * len);
        float top_p = via == 3 ? 1.0f : 0.9f;
        int top_k = via == 3 ? 0 : 20;
        cpu->ops->probs(cpu, xc, NF_ROWS, v, 0.8f, top_p, top_k);
        g->ops->probs(g, xg, NF_ROWS, v, 0.8f, top_p, top_k);
        int nc = cpu->ops->nonfinite(cpu), rb = nonfinite_readback(g, via, xg, v);
        if (rb) tap_diag("%s", g->err);
        int ng = g->ops->nonfinite(g), again = g->ops->nonfinite(g);
        int zeros = 1; /* the CPU's bad rows are zeros; the GPU's too unless accept rewrote p */
        for (int r = 1; r < NF_ROWS; r += r == 1 ? 2 : 1)
            for (int i = 0; i < v; i++) zeros &= xc[(size_t)r * v + i] == 0.0f;
        double e = 0.0;
        if (via != 1) {
            float *h = dev_get(g, xg, len);
            e = rel_err(h, xc, len);
            free(h);
        }
        tap_ok(rb == 0 && nc == NF_BAD && ng == NF_BAD && again == 0 && zeros && e <= 1e-5,
               "%s: probs on %d rows, %d without a distribution (a NaN, an +Inf, all -Inf, "
               "all NaN): zeros, counted %d (cpu %d) read back with %s, then %d; rows vs cpu "
               "rel err %.2e",
               name, NF_ROWS, NF_BAD, ng, nc, via_name[via], again, e);
        cpu->ops->dfree(cpu, xc), g->ops->dfree(g, xg);
        free(x);
    }
    /* a download takes the count back too */
    float *x = nonfinite_logits(v), *h = malloc(sizeof(float) * len);
    float *xg = dev_put(g, x, sizeof(float) * len);
    g->ops->probs(g, xg, NF_ROWS, v, 1.0f, 1.0f, 0);
    int rd = g->ops->download(g, h, xg, sizeof(float) * len), ng = g->ops->nonfinite(g);
    tap_ok(rd == 0 && ng == NF_BAD, "%s: probs then download: the count read back with it (%d)",
           name, ng);
    g->ops->dfree(g, xg);
    free(x), free(h);
}

/* ------------------------------------------------------------------------ DFlash 2 ops */

static void test_dynconv(db_backend *g, const char *name)
{
    const int nb = 3, B = 5, H = 32, K = 2, G = 4, rows = nb * B;
    float *in = rand_floats((size_t)rows * H, -2, 2), *base = rand_floats((size_t)2 * K * H, -1, 1);
    float *delta = rand_floats((size_t)rows * 2 * K * G, -0.5f, 0.5f);
    float *ic = dev_put(cpu, in, sizeof(float) * rows * H), *bc = dev_put(cpu, base, sizeof(float) * 2 * K * H);
    float *dc = dev_put(cpu, delta, sizeof(float) * rows * 2 * K * G);
    float *ig = dev_put(g, in, sizeof(float) * rows * H), *bg = dev_put(g, base, sizeof(float) * 2 * K * H);
    float *dg = dev_put(g, delta, sizeof(float) * rows * 2 * K * G);
    for (int phase = 0; phase <= 1; phase++) {
        float *oc = dev_put(cpu, NULL, sizeof(float) * rows * H), *og = dev_poison(g, (size_t)rows * H);
        cpu->ops->dynconv(cpu, oc, ic, bc + (size_t)phase * K * H, dc, phase, nb, B, H, K, G);
        g->ops->dynconv(g, og, ig, bg + (size_t)phase * K * H, dg, phase, nb, B, H, K, G);
        float *h = dev_get(g, og, (size_t)rows * H);
        double e = rel_err(h, oc, (size_t)rows * H);
        tap_ok(e <= 1e-5, "%s: dynconv phase %d, 3 blocks of 5, rel err %.2e", name, phase, e);
        cpu->ops->dfree(cpu, oc), g->ops->dfree(g, og);
        free(h);
    }
    cpu->ops->dfree(cpu, ic), cpu->ops->dfree(cpu, bc), cpu->ops->dfree(cpu, dc);
    g->ops->dfree(g, ig), g->ops->dfree(g, bg), g->ops->dfree(g, dg);
    free(in), free(base), free(delta);
}

static void test_pair_scores(db_backend *g, const char *name)
{
    static const int cases[][3] = {{6, 4, 8}, {5, 16, 256}, {2, 33, 1100}}; /* n, k, r */
    static const db_dtype dts[][2] = {{DB_F32, DB_F32}, {DB_BF16, DB_BF16}, {DB_F16, DB_F16}, {DB_BF16, DB_F32}};
    const int V = 100;
    for (int ci = 0; ci < 3; ci++) {
        for (int di = 0; di < 4; di++) {
            int n = cases[ci][0], k = cases[ci][1], r = cases[ci][2];
            db_dtype dp = dts[di][0], ds = dts[di][1];
            float *pf = rand_floats((size_t)V * r, -1, 1), *sf = rand_floats((size_t)V * r, -1, 1);
            void *ph = to_dtype(pf, (size_t)V * r, dp), *sh = to_dtype(sf, (size_t)V * r, ds);
            float *gv = rand_floats((size_t)n * r, -1, 1);
            int *prev = rand_ints((size_t)n * k, 0, V), *cand = rand_ints((size_t)n * k, 0, V);
            db_weight pc, sc, pg, sg;
            db_weight_upload(cpu, &pc, ph, dp, V, r), db_weight_upload(cpu, &sc, sh, ds, V, r);
            db_weight_upload(g, &pg, ph, dp, V, r), db_weight_upload(g, &sg, sh, ds, V, r);
            float *gc = dev_put(cpu, gv, sizeof(float) * n * r), *gg = dev_put(g, gv, sizeof(float) * n * r);
            size_t on = (size_t)n * k * k;
            float *oc = malloc(sizeof(float) * on), *og = malloc(sizeof(float) * on);
            for (size_t i = 0; i < on; i++) og[i] = NAN;
            int rc = cpu->ops->pair_scores(cpu, oc, gc, prev, cand, &pc, &sc, n, k, r);
            int rg = g->ops->pair_scores(g, og, gg, prev, cand, &pg, &sg, n, k, r);
            if (rg) tap_diag("%s", g->err);
            double e = rc || rg ? INFINITY : rel_err(og, oc, on);
            tap_ok(e <= 1e-5, "%s: pair_scores n=%d k=%d r=%d %s / %s codebooks, rel err %.2e", name, n, k, r,
                   db_dtype_name(dp), db_dtype_name(ds), e);
            db_weight_free(cpu, &pc), db_weight_free(cpu, &sc), db_weight_free(g, &pg), db_weight_free(g, &sg);
            cpu->ops->dfree(cpu, gc), g->ops->dfree(g, gg);
            free(pf), free(sf), free(ph), free(sh), free(gv), free(prev), free(cand), free(oc), free(og);
        }
    }
}

/* the DSpark correction: bitwise the CPU backend's (same summation order, no contraction) */
static void test_markov_bias(db_backend *g, const char *name)
{
    static const int cases[][4] = {{3, 40, 33, 5}, {4, 300, 2100, 64}}; /* n, V, Vd, R */
    static const db_dtype dts[][2] = {{DB_F32, DB_F32}, {DB_BF16, DB_BF16}, {DB_F16, DB_BF16}};
    for (int ci = 0; ci < 2; ci++)
        for (int di = 0; di < 3; di++) {
            int n = cases[ci][0], V = cases[ci][1], Vd = cases[ci][2], R = cases[ci][3];
            db_dtype d1 = dts[di][0], d2 = dts[di][1];
            float *af = rand_floats((size_t)V * R, -1, 1), *bf = rand_floats((size_t)Vd * R, -1, 1);
            void *ah = to_dtype(af, (size_t)V * R, d1), *bh = to_dtype(bf, (size_t)Vd * R, d2);
            float *x = rand_floats((size_t)n * Vd, -2, 2);
            int *prev = rand_ints((size_t)n, 0, V);
            db_weight c1, c2, g1, g2;
            db_weight_upload(cpu, &c1, ah, d1, V, R), db_weight_upload(cpu, &c2, bh, d2, Vd, R);
            db_weight_upload(g, &g1, ah, d1, V, R), db_weight_upload(g, &g2, bh, d2, Vd, R);
            size_t xb = sizeof(float) * (size_t)n * Vd;
            float *xc = dev_put(cpu, x, xb), *xg = dev_put(g, x, xb);
            cpu->ops->markov_bias(cpu, xc, prev, &c1, &c2, 0.5f, n);
            g->ops->markov_bias(g, xg, prev, &g1, &g2, 0.5f, n);
            float *oc = malloc(xb), *og = malloc(xb);
            int rc = cpu->ops->download(cpu, oc, xc, xb) | g->ops->download(g, og, xg, xb);
            if (rc) tap_diag("%s", g->err);
            tap_ok(!rc && memcmp(oc, og, xb) == 0, "%s: markov_bias n=%d V=%d Vd=%d R=%d %s / %s: bitwise the CPU op",
                   name, n, V, Vd, R, db_dtype_name(d1), db_dtype_name(d2));
            db_weight_free(cpu, &c1), db_weight_free(cpu, &c2), db_weight_free(g, &g1), db_weight_free(g, &g2);
            cpu->ops->dfree(cpu, xc), g->ops->dfree(g, xg);
            free(af), free(bf), free(ah), free(bh), free(x), free(prev), free(oc), free(og);
        }
}

/* ------------------------------------------------------------------------ the pipeline */

enum { NPROMPT = 3, MAX_NEW = 24 };

/* a backend from its ops table (registry backends and the emulation alike) */
static db_backend *make_backend(const db_backend_ops *ops, int deterministic, char *msg, size_t msglen)
{
    db_backend *be = calloc(1, sizeof *be);
    db_backend_opts o = {.threads = 2, .deterministic = deterministic, .device = 0};
    be->ops = ops;
    if (ops->init(be, &o) != 0) {
        snprintf(msg, msglen, "%s", be->err);
        free(be);
        return NULL;
    }
    return be;
}

/* generation of three prompts at concurrency 2 on backend `ops`: greedy (temperature 0) or
 * sampled (top_p 0.95, top_k 20), on the device path or (host_path) the host one */
static db_dtype pipeline_kv = DB_F32; /* generate_t's K/V cache dtype */
static struct db_engine_test_hooks pipeline_hooks; /* generate_t's hooks (host_path its own) */

/* the fixture drafter variant v runs on */
static const char *fixture_of(db_variant v)
{
    return v == DB_VAR_DSPARK ? "dspark-f32" : v == DB_VAR_EAGLE3 ? "eagle3-f32" : v == DB_VAR_MTP ? "mtp-f32" : "dflash2-f32";
}

static int generate_t(const db_backend_ops *ops, int deterministic, db_variant v, int max_new, float temperature,
                      int host_path, int out[NPROMPT][MAX_NEW], int nout[NPROMPT])
{
    db_backend *be = make_backend(ops, deterministic, err, sizeof err);
    if (!be) return -1;
    db_target t;
    db_drafter d;
    int has_d = 0, rc = db_target_load(&t, be, tu_data("qwen3-f32-tied"), err, sizeof err);
    if (rc) {
        db_backend_destroy(be);
        return rc;
    }
    if (v != DB_VAR_AR) {
        rc = db_drafter_load(&d, be, tu_data(fixture_of(v)), &t, err, sizeof err);
        has_d = rc == 0;
    }
    static const int p0[] = {1, 17, 4, 60, 2}, p1[] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, p2[] = {42};
    const int *prompts[NPROMPT] = {p0, p1, p2};
    const int lens[NPROMPT] = {5, 12, 1};
    db_gen_params p = {.variant = v, .block_size = 8, .top_p = temperature > 0 ? 0.95f : 1.0f,
                       .top_k = temperature > 0 ? 20 : 0, .temperature = temperature,
                       .max_new_tokens = max_new, .seed = 1, .kv_dtype = pipeline_kv};
    db_engine *e = NULL;
    struct db_engine_test_hooks hooks = pipeline_hooks;
    hooks.host_path = host_path;
    db_engine_set_test_hooks(&hooks);
    if (!rc) rc = db_engine_create(&e, &t, has_d ? &d : NULL, &p, 2, 12, err, sizeof err);
    db_engine_set_test_hooks(NULL);
    if (!rc) {
        db_request r[NPROMPT];
        memset(r, 0, sizeof r);
        for (int i = 0; i < NPROMPT; i++) {
            r[i].prompt = prompts[i];
            r[i].n_prompt = lens[i];
            r[i].out = out[i];
        }
        rc = db_engine_run(e, r, NPROMPT, db_now(), NULL, NULL, err, sizeof err);
        for (int i = 0; i < NPROMPT; i++) nout[i] = r[i].n_out;
    }
    db_engine_destroy(e);
    if (!rc && be->ops->sync(be) != 0) {
        snprintf(err, sizeof err, "%s", be->err);
        rc = -1;
    }
    if (has_d) db_drafter_free(&d);
    db_target_free(&t);
    db_backend_destroy(be);
    return rc;
}

static int generate(const db_backend_ops *ops, int deterministic, db_variant v, int max_new,
                    int out[NPROMPT][MAX_NEW], int nout[NPROMPT])
{
    return generate_t(ops, deterministic, v, max_new, 0.0f, 0, out, nout);
}

/* sampling (T = 0.9): the device path (the backend's sample / accept ops) picks the tokens the
 * host path (the [N, V] rows downloaded, the same references on the host) picks, token for
 * token, on the same backend: ar (sample), selector-off (dense q on the device), dflash2
 * (the selector's sparse q) and mtp (each chain step's q copied into the drafter's rows). Equal tokens make the sampling statistics (test_sampling's
 * chi-square tests, run on the CPU backend's device path) hold here too. */
static void test_sampling_paths(const db_backend_ops *ops, int max_new)
{
    static const db_variant vs[] = {DB_VAR_AR, DB_VAR_SELECTOR_OFF, DB_VAR_DFLASH2, DB_VAR_MTP};
    for (size_t vi = 0; vi < sizeof vs / sizeof *vs; vi++) {
        int oh[NPROMPT][MAX_NEW], od[NPROMPT][MAX_NEW], nh[NPROMPT], nd[NPROMPT];
        memset(od, 0xff, sizeof od);
        int rh = generate_t(ops, 1, vs[vi], max_new, 0.9f, 1, oh, nh);
        if (rh) tap_diag("%s host path: %s", ops->name, err);
        int rd = rh ? -1 : generate_t(ops, 1, vs[vi], max_new, 0.9f, 0, od, nd);
        if (!rh && rd) tap_diag("%s device path: %s", ops->name, err);
        int same = !rh && !rd;
        for (int i = 0; same && i < NPROMPT; i++)
            same = nh[i] == nd[i] && memcmp(oh[i], od[i], sizeof(int) * (size_t)nh[i]) == 0;
        tap_ok(same, "%s: sampled %s (T=0.9, top_p 0.95, top_k 20): device path == host path, %d prompts x %d tokens",
               ops->name, db_variant_name(vs[vi]), NPROMPT, max_new);
    }
}

/* A NaN planted in one logit of a call past the prefill of a sampled point (T = 0.9): the point
 * stops with the engine's line naming that call and the model. Target call 2 (an ar step, or a
 * verify whose rows go to accept), drafter call 1 (its rows sampled, or dspark's corrected rows
 * downloaded); device and host paths (dspark: the host path only). Used to run on, drawing from
 * a NaN distribution. */
static void test_nonfinite_pipeline(const db_backend_ops *ops, int max_new)
{
    static const struct {
        db_variant v;
        int drafter;
    } cs[] = {{DB_VAR_AR, 0},           {DB_VAR_SELECTOR_OFF, 0}, {DB_VAR_DFLASH2, 0},
              {DB_VAR_SELECTOR_OFF, 1}, {DB_VAR_DSPARK, 0},       {DB_VAR_DSPARK, 1},
              {DB_VAR_MTP, 1},          {DB_VAR_EAGLE3, 1}};
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
        for (int host = cs[ci].v == DB_VAR_DSPARK || cs[ci].v == DB_VAR_EAGLE3; host <= 1; host++) {
            int out[NPROMPT][MAX_NEW], nout[NPROMPT], call = cs[ci].drafter ? 1 : 2;
            pipeline_hooks =
                (struct db_engine_test_hooks){.nan_target_call = cs[ci].drafter ? 0 : call,
                                              .nan_drafter_call = cs[ci].drafter ? call : 0};
            int rc = generate_t(ops, 1, cs[ci].v, max_new, 0.9f, host, out, nout);
            pipeline_hooks = (struct db_engine_test_hooks){0};
            char want[64];
            snprintf(want, sizeof want, "%s call %d: non-finite logits (1 of ",
                     cs[ci].drafter ? "drafter" : "target", call);
            const char *model = !cs[ci].drafter ? tu_data("qwen3-f32-tied") : tu_data(fixture_of(cs[ci].v));
            int ok =
                rc == DB_ERUNTIME && strncmp(err, want, strlen(want)) == 0 && strstr(err, model);
            if (!ok) tap_diag("rc %d: %s", rc, rc ? err : "(none)");
            tap_ok(ok,
                   "%s: sampled %s, %s path, a NaN in %s call %d's logits: stops naming the call "
                   "and the model",
                   ops->name, db_variant_name(cs[ci].v), host ? "host" : "device",
                   cs[ci].drafter ? "drafter" : "target", call);
        }
}

/* every variant, deterministic and fast mode: the GPU's tokens == the CPU backend's. The CPU's
 * speculative variants equal its ar (test_drafter), so equality here also makes every GPU
 * variant lossless. `quick` (the emulation): ar, dflash2-bare and dflash2 deterministic, dflash2
 * fast, 12 tokens. */
/* greedy generate of variant v on ops and on the CPU backend: 1 when every prompt's tokens agree */
static int greedy_same_as_cpu(const db_backend_ops *ops, int det, db_variant v, int max_new)
{
    int oc[NPROMPT][MAX_NEW], og[NPROMPT][MAX_NEW], nc[NPROMPT], ng[NPROMPT];
    memset(og, 0xff, sizeof og);
    int rc = generate(&db_cpu_backend_ops, det, v, max_new, oc, nc);
    if (rc) tap_diag("cpu: %s", err);
    int rg = rc ? -1 : generate(ops, det, v, max_new, og, ng);
    if (!rc && rg) tap_diag("%s: %s", ops->name, err);
    int same = !rc && !rg;
    for (int i = 0; same && i < NPROMPT; i++)
        same = nc[i] == ng[i] && memcmp(oc[i], og[i], sizeof(int) * (size_t)nc[i]) == 0;
    return same;
}

static void test_pipeline(const db_backend_ops *ops, int quick)
{
    const char *name = ops->name;
    int max_new = quick ? 12 : MAX_NEW;
    for (int det = 1; det >= 0; det--) {
        for (int v = DB_VAR_AR; v < DB_VAR_COUNT; v++) {
            if (v == DB_VAR_DFLASH) continue; /* a DFlash 1 checkpoint's; the fixture is DFlash 2 */
            /* dspark, eagle3 and mtp run on their own fixtures (fixture_of) */
            if (quick && (v == DB_VAR_SELECTOR_OFF || v == DB_VAR_CONV_OFF || (!det && v != DB_VAR_DFLASH2)))
                continue;
            tap_ok(greedy_same_as_cpu(ops, det, (db_variant)v, max_new),
                   "%s: greedy %s (%s mode), %d prompts x %d tokens at concurrency 2 == cpu backend", name,
                   db_variant_name((db_variant)v), det ? "deterministic" : "fast", NPROMPT, max_new);
        }
    }
    /* f16 K/V caches (the default `auto` resolves to them where a backend has the ops) */
    pipeline_kv = DB_F16;
    static const db_variant kv_variants[] = {DB_VAR_AR, DB_VAR_DFLASH2};
    for (int vi = 0; vi < 2; vi++)
        tap_ok(greedy_same_as_cpu(ops, 1, kv_variants[vi], max_new),
               "%s: greedy %s with f16 K/V caches, %d prompts x %d tokens == cpu backend's", name,
               db_variant_name(kv_variants[vi]), NPROMPT, max_new);
    pipeline_kv = DB_F32;
    test_sampling_paths(ops, max_new);
    if (quick) test_sampling_paths(&db_cpu_backend_ops, max_new);
    test_nonfinite_pipeline(ops, max_new);
    if (quick) test_nonfinite_pipeline(&db_cpu_backend_ops, max_new);
}

__attribute__((unused)) static void test_check_lossless(const char *name)
{
    const char *bin = getenv("DB_BIN");
    if (!bin) {
        tap_ok(1, "%s: check-lossless # SKIP DB_BIN not set", name);
        return;
    }
    char cmd[4096], log[] = "/tmp/db-test-gpu-XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0) {
        tap_ok(0, "%s: check-lossless: temporary file", name);
        return;
    }
    close(fd);
    snprintf(cmd, sizeof cmd,
             "'%s' check-lossless --backend %s --target '%s' --drafter '%s' --random-prompts 6 "
             "--max-new-tokens 32 --concurrency 3 > '%s' 2>&1",
             bin, name, tu_data("qwen3-f32-tied"), tu_data("dflash2-f32"), log);
    int rc = system(cmd);
    FILE *f = fopen(log, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        tap_diag("%s", line);
    }
    if (f) fclose(f);
    remove(log);
    tap_ok(rc == 0, "%s: dflash-bench check-lossless --backend %s (every variant == ar, deterministic)", name, name);
}

/* ------------------------------------------------------------------------ main */

/* select_walk == its own pair_scores followed by db_select_walk_u per request: the picks
 * exactly, q bitwise under the emulation (host expf) and to 1e-5 on a device (its expf);
 * greedy (with all-tied scores: ties to the smaller candidate id) and sampled with and without
 * top-p / top-k filters */
static void test_select_walk(db_backend *g, const char *name)
{
    static const struct {
        int nq, steps, k, ties;
        float t, p;
        int topk;
    } cs[] = {{3, 7, 4, 0, 0.0f, 1.0f, 0}, {2, 5, 16, 1, 0.0f, 1.0f, 0}, {4, 7, 16, 0, 1.0f, 1.0f, 0},
              {3, 3, 16, 0, 0.7f, 0.9f, 0}, {3, 15, 8, 0, 1.0f, 0.95f, 3}, {2, 4, 16, 1, 1.0f, 0.5f, 20}};
    const int V = 80, r = 8;
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        int nq = cs[ci].nq, steps = cs[ci].steps, k = cs[ci].k, R1 = nq * steps;
        size_t nk = (size_t)R1 * k;
        float *pf = rand_floats((size_t)V * r, -1, 1), *sf = rand_floats((size_t)V * r, -1, 1);
        if (cs[ci].ties) memset(pf, 0, sizeof(float) * V * r); /* every pair score 0 */
        float *gv = rand_floats((size_t)R1 * r, -1, 1), *uv = rand_floats(nk, -3, 3);
        if (cs[ci].ties)
            for (size_t i = 0; i < nk; i++) uv[i] = uv[i] > 0 ? 0.5f : 0.0f;
        int *prev = rand_ints(nk, 0, V), *cand = malloc(sizeof(int) * nk);
        for (size_t i = 0; i < nk; i++) /* distinct per row, not in index order */
            cand[i] = (int)((k - 1 - (int)(i % k)) * (V / k) + (int)urand(0, (float)(V / k)) % (V / k));
        double *u = malloc(sizeof(double) * R1);
        for (int i = 0; i < R1; i++) u[i] = db_rng_uniform(&rng);
        db_weight pw, sw;
        db_weight_upload(g, &pw, pf, DB_F32, V, r), db_weight_upload(g, &sw, sf, DB_F32, V, r);
        float *gg = dev_put(g, gv, sizeof(float) * R1 * r);
        float *pairs = malloc(sizeof(float) * nk * k), *qr = calloc(nk, sizeof(float)), *qg = calloc(nk, sizeof(float));
        float *scratch = malloc(sizeof(float) * k);
        int *dr = malloc(sizeof(int) * R1), *dg = malloc(sizeof(int) * R1);
        int rc = g->ops->pair_scores(g, pairs, gg, prev, cand, &pw, &sw, R1, k, r);
        for (int j = 0; j < nq && !rc; j++)
            rc = db_select_walk_u(uv + (size_t)j * steps * k, pairs + (size_t)j * steps * k * k, cand + (size_t)j * steps * k,
                                  steps, k, cs[ci].t, cs[ci].p, cs[ci].topk, u + j * steps, scratch,
                                  qr + (size_t)j * steps * k, dr + j * steps);
        memset(dg, 0xff, sizeof(int) * R1);
        int rg = g->ops->select_walk(g, dg, cs[ci].t > 0 ? qg : NULL, gg, prev, cand, &pw, &sw, uv, u, nq, steps, k, r,
                                     cs[ci].t, cs[ci].p, cs[ci].topk);
        if (rg) tap_diag("%s", g->err);
        double e = rc || rg ? INFINITY : rel_err(qg, qr, nk);
#if DB_TEST_GPU_EMU
        int q_ok = !rc && !rg && memcmp(qg, qr, sizeof(float) * nk) == 0;
#else
        int q_ok = e <= 1e-5;
#endif
        tap_ok(!rc && !rg && memcmp(dg, dr, sizeof(int) * R1) == 0 && q_ok,
               "%s: select_walk %d requests x %d steps, k=%d, %s T=%.1f top_p=%.2f top_k=%d: picks == db_select_walk_u, q rel err %.2e",
               name, nq, steps, k, cs[ci].ties ? "all ties," : "", cs[ci].t, cs[ci].p, cs[ci].topk, e);
        db_weight_free(g, &pw), db_weight_free(g, &sw);
        g->ops->dfree(g, gg);
        free(pf), free(sf), free(gv), free(uv), free(prev), free(cand), free(u), free(pairs), free(qr), free(qg);
        free(scratch), free(dr), free(dg);
    }
}

/* ------------------------------------------------------------------------ synthetic weights */

static void test_fill_random(db_backend *g, const char *name)
{
    static const db_dtype dts[] = {DB_F32, DB_BF16, DB_F16};
    const size_t n = 100003;
    for (int di = 0; di < 3; di++) {
        size_t bytes = n * db_dtype_size(dts[di]);
        void *d = g->ops->alloc(g, bytes), *ref = malloc(bytes), *h = malloc(bytes);
        db_fill_random_host(ref, n, dts[di], 99, 12345, 0.02f, 0.5f);
        int rc = db_fill_random(g, d, n, dts[di], 99, 12345, 0.02f, 0.5f);
        rc |= g->ops->download(g, h, d, bytes);
        tap_ok(rc == 0 && memcmp(h, ref, bytes) == 0, "%s: fill_random %s == the host reference (bitwise)", name,
               db_dtype_name(dts[di]));
        g->ops->dfree(g, d);
        free(ref), free(h);
    }
    tap_ok(db_mem_available(g) > 0, "%s: mem_available %.1f GiB", name, (double)db_mem_available(g) / 1073741824.0);
}

/* ------------------------------------------------------------------------ main */

static int no_device(const char *msg)
{
    return strstr(msg, "no CUDA device") || strstr(msg, "no HIP device");
}

/* every op of one GPU backend, then the pipeline (0: none, 1: quick, 2: full); 0 when it
 * has no device */
static int test_backend(const db_backend_ops *ops, int pipeline, int *failed_init)
{
    const char *name = ops->name;
    db_backend *g = make_backend(ops, 0, err, sizeof err), *g_noblas = NULL;
    if (!g) {
        if (no_device(err)) {
            printf("# %s: %s\n", name, err);
            return 0;
        }
        tap_ok(0, "%s: backend init: %s", name, err);
        (*failed_init)++;
        return 0;
    }
    tap_diag("%s: %s, %s", name, g->device_name, g->simd);
    if (strcmp(name, "cuda") == 0) { /* the own tiled GEMM, which HIP uses, on this device too */
        setenv("DB_GPU_NO_BLAS", "1", 1);
        g_noblas = make_backend(ops, 0, err, sizeof err);
        unsetenv("DB_GPU_NO_BLAS");
    }
    test_memory(g, name);
    test_matmul(g, g_noblas, name);
    test_quant(g, name);
    test_rmsnorm(g, name);
    test_rope(g, name);
    test_elementwise(g, name);
    test_embed_copy_rows(g, name);
    test_attention(g, name);
    test_attention_verify(g, name);
    test_kv_f16(g, name);
    test_topk(g, name);
    test_probs(g, name);
    test_dynconv(g, name);
    test_pair_scores(g, name);
    test_markov_bias(g, name);
    test_sample(g, name);
    test_accept(g, name);
    test_nonfinite(g, name);
    test_select_walk(g, name);
    test_fill_random(g, name);
    int rc = g->ops->sync(g);
    tap_ok(rc == 0, "%s: no device error latched (%s)", name, rc ? g->err : "ok");
    tap_ok(g->bytes_in_use == 0, "%s: every test buffer freed (%zu bytes left)", name, g->bytes_in_use);
    db_backend_destroy(g_noblas);
    db_backend_destroy(g);
    if (pipeline) test_pipeline(ops, pipeline == 1);
    return 1;
}

#if DB_TEST_GPU_EMU
extern const db_backend_ops db_gpu_emu_backend_ops;
#endif

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    db_rng_seed(&rng, 20251130);
    /* the GPU kernels dequantize weights to f32: their reference is the CPU's float path, not its
     * integer one (backends/cpu/matmul_q8.h, activations rounded to 8 bits) */
    setenv("DB_CPU_Q8", "0", 1);
    cpu = make_backend(&db_cpu_backend_ops, 1, err, sizeof err);
    if (!cpu) {
        printf("Bail out! cpu backend: %s\n", err);
        return 1;
    }
    int ran = 0, failed_init = 0;
#if DB_TEST_GPU_EMU
    /* the kernels on the CPU (backends/cuda/gpu_emu.h), with 32- and 64-lane warps */
    setenv("DB_GPU_EMU_WARP", "32", 1);
    ran += test_backend(&db_gpu_emu_backend_ops, 1, &failed_init);
    setenv("DB_GPU_EMU_WARP", "64", 1);
    setenv("DB_GPU_EMU_ORDER", "reverse", 1); /* threads resumed last to first: missing barriers show */
    ran += test_backend(&db_gpu_emu_backend_ops, 0, &failed_init);
#else
    int compiled = 0;
    /* the modules of this build tree (build/dflash-bench-*.so) when run by hand, outside meson */
    setenv("DB_BACKEND_DIR", DB_BUILD_DIR, 0);
    for (int i = 0; db_backend_names[i]; i++) {
        if (strcmp(db_backend_names[i], "cpu") == 0) continue;
        compiled++;
        char lerr[512];
        const db_backend_ops *ops = db_backend_load(db_backend_names[i], lerr, sizeof lerr);
        if (!ops) { /* built, yet its module does not load: a broken build, not a missing device */
            tap_ok(0, "%s: module loads (%s)", db_backend_names[i], lerr);
            failed_init = 1;
            continue;
        }
        if (test_backend(ops, 2, &failed_init)) {
            ran++;
            test_check_lossless(db_backend_names[i]);
        }
    }
    if (!compiled) tap_skip_all("no CUDA device: no GPU backend compiled into this binary (-Dcuda / -Dhip)");
#endif
    db_backend_destroy(cpu);
    if (!ran && !failed_init) tap_skip_all("no CUDA device");
    return tap_done();
}
