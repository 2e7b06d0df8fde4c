/* cli_bench.c — `dflash-bench bench`: the forward pass timed against the device's limits.
 *
 * For every (rows N, context depth C) it times one forward of the target (and one block draft
 * of the drafter when given) and prints the median time next to what the roofline allows:
 *   batch   (default) N requests, one row each, every cache holding C positions: a batched
 *           decode step (N = 1 is the plain decode step); logits for every row;
 *   prefill one request, N consecutive rows after C cached positions (a prompt chunk);
 *           logits for the last row;
 *   verify  the same rows with logits for every row: a DFlash verify of a block of N;
 *   drafter N requests drafting one block of B rows each (N*B rows), C context positions.
 * Cached positions are not computed: the cache length is set to C over zeroed K/V rows (the
 * attention costs the same whatever the values), so deep contexts cost no prefill.
 *
 * Limits, measured here (or "-"): the copy bandwidth (memcpy over all threads, read + write
 * bytes counted) and the FMA peak (independent FMA chains of the widest vector unit the CPU
 * has, all threads); on a GPU backend the copy bandwidth of its copy op and, as the peak, the
 * roofline probe's measured matmul rate. Traffic and arithmetic per forward come from the roofline model
 * (capacity.h): GB/s = bytes / time, GFLOP/s = flops / time, with their fractions of the two
 * limits, and "x 1-row" = this time / the 1-row time at the same context, paired by round
 * (time_points). K-flat: when --rows holds 16, "vs 16-row" (vs_16_rows) = this median / the
 * median of the same model's 16-row point at the same depth (a ratio of the printed medians, so
 * that the curve reads off the table; x 1-row is the paired ratio), and the md output adds the
 * target's curve as a table of rows by depth. The depth option is -C / --depth (as plan's);
 * --context is its former name, still accepted. */
#include "config.h"
#include "bench/capacity.h"
#include "bench/device_preset.h"
#include "bench/device_probe.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "engine/session.h"
#include "model/synthetic.h"
#include "base/parse.h"
#include "base/paths.h"
#include "base/quantile.h"
#include "base/json_build.h"
#include "base/util.h"
#include "report/report_csv.h"
#include "result/run_meta.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if HAVE_OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

typedef struct {
    const char *model; /* "target" / "drafter" */
    int entry;         /* the --rows value it stands for (the drafter: requests) */
    int rows, reqs, ctx;
    double ms, ms_min;
    double x1;         /* x 1-row: the median over rounds of this time / the 1-row point's time
                        * in the same round (NAN: no 1-row point) */
    double vs16;       /* ms / the ms of the same model's 16-row point at this ctx (NAN: none) */
    double bytes, flops;
} bench_row;

typedef struct {
    double copy_gbs, peak_gflops; /* 0: not measured */
    const char *peak_unit;
    char unit_buf[240]; /* a device's peak_unit: what the rate measured */
} bench_limits;

/* ---------------------------------------------------------------- device limits */

#define CHAINS 12
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float fma_512(long n)
{
    __m512 a[CHAINS], b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-4f);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < n; it++)
        _Pragma("GCC unroll 12") for (int i = 0; i < CHAINS; i++) a[i] = _mm512_fmadd_ps(a[i], b, c);
    float s = 0;
    for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_ps(a[i]);
    return s;
}

__attribute__((target("avx2,fma"))) static float fma_256(long n)
{
    __m256 a[CHAINS], b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-4f);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < n; it++)
        _Pragma("GCC unroll 12") for (int i = 0; i < CHAINS; i++) a[i] = _mm256_fmadd_ps(a[i], b, c);
    float s = 0, t[8];
    for (int i = 0; i < CHAINS; i++) {
        _mm256_storeu_ps(t, a[i]);
        s += t[0];
    }
    return s;
}
#elif defined(__aarch64__)
static float fma_128(long n)
{
    float32x4_t a[CHAINS], b = vdupq_n_f32(0.999f), c = vdupq_n_f32(1e-4f);
    for (int i = 0; i < CHAINS; i++) a[i] = vdupq_n_f32((float)i);
    for (long it = 0; it < n; it++)
        _Pragma("GCC unroll 12") for (int i = 0; i < CHAINS; i++) a[i] = vfmaq_f32(c, a[i], b);
    float s = 0;
    for (int i = 0; i < CHAINS; i++) s += vaddvq_f32(a[i]);
    return s;
}
#endif

static volatile float peak_sink;

/* FLOP/s of CHAINS independent FMA chains per thread on all threads, best of 3; 0 when this
 * build has no vector FMA for the CPU. The vector width is the matmul kernel's (`kernel`, the
 * backend's simd name): a kernel forced to avx2 (DB_CPU_KERNEL=avx2) on an AVX-512 CPU is set
 * against what 256-bit FMAs can do, so its % FMA peak is its own efficiency, and the unit says
 * that the CPU has wider ones. */
static double fma_peak(const char *kernel, const char **unit)
{
    float (*fn)(long) = NULL;
    int lanes = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    int has512 = __builtin_cpu_supports("avx512f");
    if (has512 && strncmp(kernel, "avx2", 4) != 0) fn = fma_512, lanes = 16, *unit = "avx512 fma";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        fn = fma_256, lanes = 8,
        *unit = has512 ? "avx2 fma, the kernel's width; this CPU has avx512" : "avx2 fma";
#elif defined(__aarch64__)
    fn = fma_128, lanes = 4, *unit = "neon fma";
#endif
    if (!fn) return 0;
    const long n = 20000000;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        int threads = 1;
        double t0 = db_now();
#if HAVE_OPENMP
#pragma omp parallel
        {
#pragma omp single
            threads = omp_get_num_threads();
            peak_sink += fn(n);
        }
#else
        peak_sink += fn(n);
#endif
        double f = (double)threads * n * CHAINS * lanes * 2 / (db_now() - t0);
        if (f > best) best = f;
    }
    return best;
}

/* memcpy of 2 x 128 MiB split over the threads, read + write bytes / s, best of 3; -1 when the
 * buffers cannot be allocated */
static double copy_bandwidth(void)
{
    size_t bytes = (size_t)128 << 20;
    char *a = db_malloc(bytes), *b = db_malloc(bytes);
    double best = a && b ? 0 : -1;
    if (a && b) {
        memset(a, 1, bytes);
        memset(b, 2, bytes);
        for (int rep = 0; rep < 3; rep++) {
            double t0 = db_now();
#if HAVE_OPENMP
#pragma omp parallel
            {
                size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
                size_t chunk = (bytes / nt + 63) & ~(size_t)63, lo = id * chunk;
                size_t hi = lo + chunk < bytes ? lo + chunk : bytes;
                if (lo < hi) memcpy(b + lo, a + lo, hi - lo);
            }
#else
            memcpy(b, a, bytes);
#endif
            double g = 2.0 * (double)bytes / (db_now() - t0);
            if (g > best) best = g;
        }
    }
    free(a);
    free(b);
    return best;
}

/* A GPU's limits, measured through its backend: the copy bandwidth of copy_rows over 2 x 1 GiB
 * (db_backend_copy_bandwidth) and, for "% FMA peak", the matmul rate of the roofline probe
 * (device_probe.h: a 512-row matmul in the weights' 16-bit dtype, median of its calls). */
static int device_limits(db_session *s, bench_limits *lim, char *err, size_t errlen)
{
    fprintf(stderr, "bench: measuring copy bandwidth and matmul rate on %s\n", s->be->ops->name);
    double copy = db_backend_copy_bandwidth(s->be, (size_t)1 << 30, 5);
    if (copy <= 0) return db_fail(err, errlen, DB_ERUNTIME, "copy bandwidth on %s: %s", s->be->ops->name, s->be->err);
    db_hw hw;
    int rc = db_hw_measure(s->be, DB_BF16, 0, NULL, &hw, err, errlen);
    if (rc) return rc;
    lim->copy_gbs = copy / 1e9;
    lim->peak_gflops = hw.flops / 1e9;
    snprintf(lim->unit_buf, sizeof lim->unit_buf, "matmul rate, %s", hw.flops_source);
    lim->peak_unit = lim->unit_buf;
    return DB_OK;
}

/* --write-device-config: plan's device probe (capacity.h db_hw_measure: a GEMV's bandwidth, the
 * matmul rates at 1..256 rows of one target layer, attention, a small op) on the target's
 * shapes, written as a preset whose peak matmul rate is the FMA peak (CPU) or the 512-row rate
 * and whose efficiencies are the measured rates over it; the bandwidth is the GEMV's (efficiency
 * 1). No fixed cost a forward beyond the small ops, none a sampled row (not measured here). */
static int write_device_config(db_session *s, const char *path, db_dtype dt, double peak_gflops, char *err,
                               size_t errlen)
{
    fprintf(stderr, "bench: measuring the roofline's device figures for %s\n", path);
    db_hw hw;
    int rc = db_hw_measure(s->be, dt, 0, &s->target.cfg, &hw, err, errlen);
    if (rc) return rc;
    /* the peak: the FMA peak, or a measured rate above it (a busy machine's FMA measurement runs
     * low), so that every efficiency is <= 1 and the rates read back as measured */
    double peak = hw.flops;
    for (int i = 0; i < DB_HW_RATE_ROWS; i++) peak = fmax(peak, hw.rate[i]);
    for (int i = 0; i < DB_HW_ATTN_ROWS; i++) peak = fmax(peak, hw.attn_rate[i]);
    int fma = peak_gflops * 1e9 > peak;
    hw.peak_flops = fma ? peak_gflops * 1e9 : peak;
    hw.peak_bw = hw.bw;
    snprintf(hw.name, sizeof hw.name, "%.60s (%.12s, %d threads)", s->be->device_name, s->be->ops->name, s->be->threads);
    char src[1024], when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    snprintf(src, sizeof src, "bench --write-device-config on %s at %s (%s; %s; peak: %s)", hw.name, when, hw.bw_source,
             hw.flops_source, peak_gflops * 1e9 > hw.flops ? "the FMA peak" : "the 512-row matmul rate");
    return db_device_preset_write(path, &hw, src, err, errlen);
}

/* ---------------------------------------------------------------- timing */

typedef struct {
    db_session *s;
    const char *mode;   /* batch, prefill, verify */
    int block;          /* drafter block size */
    int *ids, *slots;   /* [max rows] scratch */
    db_row *rows;
} bench_ctx;

/* one request's N rows (prefill, verify) rather than N requests' one row each (batch) */
static int one_request(const char *mode) { return strcmp(mode, "batch") != 0; }

/* rows with logits: the last one only in prefill mode */
static int logit_count(const char *mode, int rows) { return strcmp(mode, "prefill") ? rows : 1; }

/* The matmuls of one target forward alone, in its order (per layer q, k, v, o, gate, up, down;
 * then the head over the rows that want logits), on the forward's own activation buffers: what
 * the forward would cost if attention, norms and the rest were free. */
static void matmuls_once(db_target *t, int n, int n_logits)
{
    db_backend *be = t->be;
    db_target_state *st = &t->s;
    for (int li = 0; li < t->cfg.n_layers; li++) {
        const db_layer *l = &t->layers[li];
        be->ops->matmul(be, st->q, st->xn, &l->wq, n, 0);
        be->ops->matmul(be, st->k, st->xn, &l->wk, n, 0);
        be->ops->matmul(be, st->v, st->xn, &l->wv, n, 0);
        be->ops->matmul(be, st->x, st->att, &l->wo, n, 1);
        be->ops->matmul(be, st->gate, st->xn, &l->gate, n, 0);
        be->ops->matmul(be, st->up, st->xn, &l->up, n, 0);
        be->ops->matmul(be, st->x, st->gate, &l->down, n, 1);
    }
    be->ops->matmul(be, st->logits, st->hid, &t->head, n_logits, 0);
}

/* one forward of `model` at (n, ctx); caches set to ctx positions first */
static int forward_once(bench_ctx *b, const bench_row *r, char *err, size_t errlen)
{
    db_session *s = b->s;
    if (!strcmp(r->model, "matmuls")) {
        matmuls_once(&s->target, r->rows, logit_count(b->mode, r->rows));
        return 0;
    }
    if (!strcmp(r->model, "drafter")) {
        db_drafter *d = &s->drafter;
        for (int i = 0; i < r->reqs; i++) {
            db_drafter_assume_len(d, i, r->ctx); /* zeroed cache rows stand in for a real context */
            b->slots[i] = i;
            b->ids[i] = (int)((7u * (unsigned)i + 1u) % (unsigned)s->target.cfg.vocab);
        }
        return db_drafter_block(d, b->slots, b->ids, r->reqs, b->block, d->has_conv, err, errlen);
    }
    db_target *t = &s->target;
    int prefill = one_request(b->mode), nl = logit_count(b->mode, r->rows);
    for (int i = 0; i < r->reqs; i++) db_target_assume_len(t, i, r->ctx);
    for (int i = 0; i < r->rows; i++) {
        int tok = (int)((7u * (unsigned)i + 1u) % (unsigned)t->cfg.vocab);
        b->rows[i] = (db_row){prefill ? 0 : i, prefill ? r->ctx + i : r->ctx, tok};
        b->ids[i] = i;
    }
    return db_target_forward(t, b->rows, r->rows, b->ids + r->rows - nl, nl, err, errlen);
}

/* one timed forward of r (after a sync, so that nothing of the previous one is in flight) */
static int time_once(bench_ctx *b, const bench_row *r, double *t, char *err, size_t errlen)
{
    db_backend *be = b->s->be;
    double t0 = db_now();
    int rc = forward_once(b, r, err, errlen);
    if (!rc && be->ops->sync(be)) rc = db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
    *t = db_now() - t0;
    return rc;
}

/* the point that r's x 1-row divides by: same model and context, one request of one row (the
 * drafter: one request; matmuls: one row), or -1 */
static int one_row_index(const bench_row *rows, int n, const bench_row *r)
{
    int drafter = !strcmp(r->model, "drafter");
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].model, r->model) && rows[i].ctx == r->ctx &&
            (rows[i].reqs == 1 || !strcmp(r->model, "matmuls")) &&
            (drafter || rows[i].rows == 1))
            return i;
    return -1;
}

/* the point that r's vs 16-row divides by: same model and context, the --rows entry 16, or -1 */
static int entry16_index(const bench_row *rows, int n, const bench_row *r)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].model, r->model) && rows[i].ctx == r->ctx && rows[i].entry == 16) return i;
    return -1;
}

/* Every point warmed by one untimed forward, then `reps` rounds that time each point once, the
 * points interleaved: the machine's drift (a shared VM's memory bandwidth wanders by 20% over
 * minutes) then moves every point alike. A point's figure: the median (and best) of its rounds.
 * Its x 1-row is paired: the median over rounds of its time / the 1-row point's time in the
 * same round, forwards timed a few milliseconds apart, rather than a ratio of two medians taken
 * from different rounds. */
static int time_points(bench_ctx *b, bench_row *pts, int n, int reps, char *err, size_t errlen)
{
    double w;
    double *all = db_malloc(sizeof(double) * (size_t)n * (size_t)reps);
    if (!all) return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the times of %d points x %d rounds", n, reps);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        fprintf(stderr, "bench: %s rows %d ctx %d\n", pts[i].model, pts[i].rows, pts[i].ctx);
        rc = time_once(b, &pts[i], &w, err, errlen);
    }
    for (int k = 0; k < reps && !rc; k++) {
        fprintf(stderr, "bench: round %d/%d\n", k + 1, reps);
        for (int i = 0; i < n && !rc; i++) rc = time_once(b, &pts[i], &all[(size_t)i * reps + k], err, errlen);
    }
    double *ratio = rc ? NULL : db_malloc(sizeof(double) * (size_t)reps);
    if (!rc && !ratio) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the ratios of %d rounds", reps);
    for (int i = 0; i < n && !rc; i++) {
        int j = one_row_index(pts, n, &pts[i]);
        pts[i].x1 = NAN;
        if (j < 0) continue;
        for (int k = 0; k < reps; k++) ratio[k] = all[(size_t)i * reps + k] / all[(size_t)j * reps + k];
        pts[i].x1 = db_quantile(ratio, reps, 0.5);
    }
    free(ratio);
    for (int i = 0; i < n && !rc; i++) {
        double *t = all + (size_t)i * reps;
        pts[i].ms = 1e3 * db_quantile(t, reps, 0.5); /* sorts t */
        pts[i].ms_min = 1e3 * t[0];
    }
    free(all);
    for (int i = 0; i < n && !rc; i++) {
        int j = entry16_index(pts, n, &pts[i]);
        pts[i].vs16 = j < 0 ? NAN : pts[i].ms / pts[j].ms;
    }
    return rc;
}

/* roofline traffic and arithmetic of the forward r stands for */
static void row_cost(const db_session *s, db_dtype dt, db_dtype kvt, const char *mode, int block,
                     bench_row *r)
{
    db_hw hw = {.bw = 1e12, .flops = 1e12};
    const db_model_config *tc = &s->target.cfg;
    if (!strcmp(r->model, "matmuls")) { /* weights once, 2 flops per weight and row */
        const db_target *t = &s->target;
        double w = 0, wb = 0;
        for (int li = 0; li < tc->n_layers; li++) {
            const db_layer *l = &t->layers[li];
            const db_weight *m[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->gate, &l->up, &l->down};
            for (int j = 0; j < 7; j++) {
                w += (double)m[j]->rows * m[j]->cols;
                wb += (double)db_dtype_bytes(m[j]->dtype, (size_t)m[j]->cols) * m[j]->rows;
            }
        }
        int n_logits = logit_count(mode, r->rows);
        double hw_ = (double)t->head.rows * t->head.cols;
        r->flops = 2.0 * (w * r->rows + hw_ * n_logits);
        r->bytes = wb + (double)db_dtype_bytes(t->head.dtype, (size_t)t->head.cols) * t->head.rows;
        (void)dt, (void)block, (void)hw;
        return;
    }
    if (!strcmp(r->model, "drafter")) {
        db_step_shape sh = {.concurrency = r->reqs, .block = block, .ctx = r->ctx, .tau = 1,
                            .use_conv = s->drafter.has_conv, .use_sel = 0, .kv_dtype = kvt};
        db_step_cost c;
        db_roofline_step(tc, &s->drafter.cfg, dt, &hw, &sh, &c);
        r->bytes = c.draft.bytes;
        r->flops = c.draft.flops;
    } else if (one_request(mode)) {
        db_cost c = db_roofline_prefill(tc, NULL, dt, &hw, 1, r->rows, r->rows, kvt);
        /* prefill's model attends to half a prompt from position 0; add the cached context */
        c.flops += 4.0 * tc->n_layers * r->rows * tc->n_heads * (double)tc->head_dim * r->ctx;
        c.bytes += (double)tc->n_layers * r->ctx * 2 * tc->n_kv_heads * tc->head_dim *
                   (double)db_dtype_size(kvt);
        /* the head over the other rows too (the model counts the last one) */
        double heads = logit_count(mode, r->rows) - 1.0;
        c.flops += 2.0 * heads * tc->vocab * tc->hidden;
        c.bytes += heads * tc->vocab * 4 * 2;
        r->bytes = c.bytes;
        r->flops = c.flops;
    } else {
        db_step_shape sh = {.concurrency = r->rows, .block = 1, .ctx = r->ctx, .tau = 1,
                            .kv_dtype = kvt};
        db_step_cost c;
        db_roofline_step(tc, NULL, dt, &hw, &sh, &c);
        r->bytes = c.verify.bytes;
        r->flops = c.verify.flops;
    }
}

/* ---------------------------------------------------------------- output */

static void fmt_frac(char *buf, size_t n, double v, double lim)
{
    if (lim > 0) snprintf(buf, n, "%.0f%%", 100.0 * v / lim);
    else snprintf(buf, n, "-");
}

/* the K-flat curve of the target: vs 16-row (median ms) with rows down and depths across, when
 * --rows holds 16 */
static void print_md_curve(const bench_row *rows, int n, const char *mode)
{
    int ctx[DB_LIST_MAX], nctx = 0, any = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(rows[i].model, "target")) continue;
        any |= isfinite(rows[i].vs16);
        int seen = 0;
        for (int c = 0; c < nctx; c++) seen |= ctx[c] == rows[i].ctx;
        if (!seen && nctx < DB_LIST_MAX) ctx[nctx++] = rows[i].ctx;
    }
    if (!any) return;
    printf("\nK-flat (%s): target forward ms / the 16-row forward ms at the same depth (median ms), rows by depth:\n\n| rows |",
           mode);
    for (int c = 0; c < nctx; c++) printf(" depth %d |", ctx[c]);
    printf("\n|--:|");
    for (int c = 0; c < nctx; c++) printf("--:|");
    printf("\n");
    for (int i = 0; i < n; i++) { /* the target's points run rows fastest within a depth */
        if (strcmp(rows[i].model, "target") || rows[i].ctx != ctx[0]) continue;
        printf("| %d |", rows[i].entry);
        for (int c = 0; c < nctx; c++)
            for (int j = 0; j < n; j++)
                if (!strcmp(rows[j].model, "target") && rows[j].ctx == ctx[c] && rows[j].entry == rows[i].entry) {
                    printf(" %.3f (%.3f) |", rows[j].vs16, rows[j].ms);
                    break; /* a row count given twice: its first point */
                }
        printf("\n");
    }
}

static void print_md(const bench_row *rows, int n, const bench_limits *lim, const db_session *s,
                     const char *mode, db_dtype dt)
{
    printf("# dflash-bench bench\n\n");
    printf("- device: %s, %s, %d threads, kernel %s\n", s->be->ops->name, s->be->device_name,
           s->be->threads, s->be->simd);
    printf("- copy bandwidth %.1f GB/s; FMA peak %.1f GFLOP/s (%s)\n", lim->copy_gbs,
           lim->peak_gflops, lim->peak_unit);
    printf("- target %s (%s weights, %.3f GiB)%s%s; mode %s; KV cache %s\n\n", s->target.cfg.path,
           db_dtype_name(dt), db_target_weight_bytes(&s->target) / DB_GIB,
           s->has_drafter ? "; drafter " : "", s->has_drafter ? s->drafter.cfg.base.path : "", mode,
           db_dtype_name(s->target.kv.dtype));
    printf("| model | rows | requests | ctx | ms (median) | ms (best) | rows/s | GB/s | %% copy bw "
           "| GFLOP/s | %% FMA peak | x 1-row | vs 16-row |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        double sec = r->ms / 1e3, gbs = r->bytes / sec / 1e9, gf = r->flops / sec / 1e9;
        char fb[16], ff[16], x1[16], v16[16];
        fmt_frac(fb, sizeof fb, gbs, lim->copy_gbs);
        fmt_frac(ff, sizeof ff, gf, lim->peak_gflops);
        if (isfinite(r->x1)) snprintf(x1, sizeof x1, "%.2f", r->x1);
        else snprintf(x1, sizeof x1, "-");
        if (isfinite(r->vs16)) snprintf(v16, sizeof v16, "%.3f", r->vs16);
        else snprintf(v16, sizeof v16, "-");
        printf("| %s | %d | %d | %d | %.3f | %.3f | %.1f | %.1f | %s | %.1f | %s | %s | %s |\n", r->model,
               r->rows, r->reqs, r->ctx, r->ms, r->ms_min, r->rows / sec, gbs, fb, gf, ff, x1, v16);
    }
    print_md_curve(rows, n, mode);
}

static void print_csv(const bench_row *rows, int n, const bench_limits *lim, const db_session *s,
                      const char *mode)
{
    /* the provenance columns of run's tables lead every row (report_csv.h) */
    db_run_meta m;
    db_run_meta_init(&m, 0, NULL, 0, NULL, time(NULL));
    db_provenance_csv(stdout, NULL);
    printf("model,mode,rows,requests,ctx,ms_median,ms_best,rows_per_s,gb_s,gflop_s,copy_gb_s,"
           "fma_peak_gflop_s,x_one_row,vs_16_rows,kernel,threads,kv_dtype\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        double sec = r->ms / 1e3;
        db_provenance_csv(stdout, &m);
        char v16[32] = ""; /* empty: no 16-row point */
        if (isfinite(r->vs16)) snprintf(v16, sizeof v16, "%.10g", r->vs16);
        printf("%s,%s,%d,%d,%d,%.6f,%.6f,%.3f,%.3f,%.3f,%.3f,%.3f,%.4f,%s,%s,%d,%s\n", r->model,
               strcmp(r->model, "drafter") ? mode : "draft", r->rows, r->reqs, r->ctx, r->ms,
               r->ms_min, r->rows / sec, r->bytes / sec / 1e9, r->flops / sec / 1e9, lim->copy_gbs,
               lim->peak_gflops, isfinite(r->x1) ? r->x1 : 0.0, v16, s->be->simd, s->be->threads,
               db_dtype_name(s->target.kv.dtype));
    }
    db_run_meta_free(&m);
}

/* every cJSON result checked (base/util.h db_json_ok); -1 when out of memory, nothing printed */
static int print_json(const bench_row *rows, int n, const bench_limits *lim, const db_session *s,
                      const char *mode, db_dtype dt)
{
    int oom_flag = 0, *oom = &oom_flag;
    cJSON *root = J(cJSON_CreateObject());
    J(cJSON_AddStringToObject(root, "backend", s->be->ops->name));
    J(cJSON_AddStringToObject(root, "device", s->be->device_name));
    J(cJSON_AddStringToObject(root, "kernel", s->be->simd));
    J(cJSON_AddNumberToObject(root, "threads", s->be->threads));
    J(cJSON_AddNumberToObject(root, "copy_gb_s", lim->copy_gbs));
    J(cJSON_AddNumberToObject(root, "fma_peak_gflop_s", lim->peak_gflops));
    J(cJSON_AddStringToObject(root, "fma_peak_unit", lim->peak_unit));
    J(cJSON_AddStringToObject(root, "target", s->target.cfg.path));
    J(cJSON_AddStringToObject(root, "drafter", s->has_drafter ? s->drafter.cfg.base.path : ""));
    J(cJSON_AddStringToObject(root, "dtype", db_dtype_name(dt)));
    J(cJSON_AddStringToObject(root, "kv_dtype", db_dtype_name(s->target.kv.dtype)));
    J(cJSON_AddStringToObject(root, "mode", mode));
    cJSON *arr = J(cJSON_AddArrayToObject(root, "rows"));
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        double sec = r->ms / 1e3;
        cJSON *o = J(cJSON_CreateObject());
        J(cJSON_AddStringToObject(o, "model", r->model));
        J(cJSON_AddNumberToObject(o, "rows", r->rows));
        J(cJSON_AddNumberToObject(o, "requests", r->reqs));
        J(cJSON_AddNumberToObject(o, "ctx", r->ctx));
        J(cJSON_AddNumberToObject(o, "ms_median", r->ms));
        J(cJSON_AddNumberToObject(o, "ms_best", r->ms_min));
        J(cJSON_AddNumberToObject(o, "bytes", r->bytes));
        J(cJSON_AddNumberToObject(o, "flops", r->flops));
        J(cJSON_AddNumberToObject(o, "gb_s", r->bytes / sec / 1e9));
        J(cJSON_AddNumberToObject(o, "gflop_s", r->flops / sec / 1e9));
        if (isfinite(r->x1)) J(cJSON_AddNumberToObject(o, "x_one_row", r->x1));
        else J(cJSON_AddNullToObject(o, "x_one_row"));
        if (isfinite(r->vs16)) J(cJSON_AddNumberToObject(o, "vs_16_rows", r->vs16));
        else J(cJSON_AddNullToObject(o, "vs_16_rows"));
        JADD(arr, NULL, o);
    }
    char *txt = oom_flag ? NULL : cJSON_Print(root);
    if (txt) printf("%s\n", txt);
    free(txt);
    cJSON_Delete(root);
    return txt ? 0 : -1;
}

/* ---------------------------------------------------------------- command */

/* caches and scratch for the largest point, the measurement of every point */
static int bench_all(bench_ctx *b, const int *rows, int nrows, const int *ctxs, int nctx,
                     int reps, db_dtype dt, db_dtype kvt, bench_row *out, int *nout, char *err,
                     size_t errlen)
{
    db_session *s = b->s;
    int maxr = 0, maxc = 0, prefill = one_request(b->mode);
    for (int i = 0; i < nrows; i++) maxr = rows[i] > maxr ? rows[i] : maxr;
    for (int i = 0; i < nctx; i++) maxc = ctxs[i] > maxc ? ctxs[i] : maxc;
    db_target_opts to = {.slots = prefill ? 1 : maxr, .capacity = maxc + maxr + 1, .max_rows = maxr,
                         .n_taps = s->has_drafter ? s->drafter.cfg.n_taps : 0,
                         .tap_layers = s->has_drafter ? s->drafter.cfg.tap_layers : NULL,
                         .kv_dtype = kvt};
    int rc = db_target_alloc(&s->target, &to, err, errlen);
    if (!rc && s->has_drafter) {
        db_drafter_opts dop = {.slots = maxr, .capacity = maxc + b->block + 1, .max_ctx_rows = 1,
                               .max_requests = maxr, .max_block = b->block, .kv_dtype = kvt};
        rc = db_drafter_alloc(&s->drafter, &dop, err, errlen);
    }
    int cap = maxr > b->block * maxr ? maxr : b->block * maxr;
    b->ids = db_malloc(sizeof(int) * (size_t)cap);
    b->slots = db_malloc(sizeof(int) * (size_t)cap);
    b->rows = db_malloc(sizeof(db_row) * (size_t)cap);
    if (!rc && (!b->ids || !b->slots || !b->rows))
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the row lists of %d rows", cap);
    *nout = 0;
    /* the target, its matmuls alone (context plays no part: once, at the first context), the
     * drafter */
    static const char *const models[] = {"target", "matmuls", "drafter"};
    for (int m = 0; m < 2 + s->has_drafter && !rc; m++)
        for (int c = 0; c < (m == 1 ? 1 : nctx) && !rc; c++)
            for (int i = 0; i < nrows && !rc; i++) {
                bench_row *r = &out[(*nout)++];
                *r = (bench_row){.model = models[m], .entry = rows[i], .ctx = ctxs[c]};
                r->reqs = m == 2 || !prefill ? rows[i] : 1;
                r->rows = m == 2 ? rows[i] * b->block : rows[i];
                row_cost(s, dt, kvt, b->mode, b->block, r);
            }
    if (!rc) rc = time_points(b, out, *nout, reps, err, errlen);
    free(b->ids), free(b->slots), free(b->rows);
    return rc;
}

int db_cmd_bench(int argc, char **argv, char *err, size_t errlen)
{
    const char *target = "models/tiny-qwen3", *drafter = NULL, *rows_s = "1,2,4,8,16,32,64",
               *ctx_s = "128", *mode = "batch", *dtype_s = "bf16", *output = "md", *backend = "cpu",
               *kv_s = "auto", *write_dev = NULL;
    int reps = 9, threads = 0, synthetic = 0, deterministic = 0, block = 8, help = 0, seed = 0;
    const db_opt opts[] = {
        {"target", 't', "DIR", "target checkpoint (default models/tiny-qwen3); with --synthetic its config.json", NULL, DB_OPT_STR, &target},
        {"drafter", 'd', "DIR", "drafter checkpoint (or config.json with --synthetic); none by default", NULL, DB_OPT_STR, &drafter},
        {"synthetic", 0, NULL, "random weights of the configs' shapes, made on the backend", NULL, DB_OPT_FLAG, &synthetic},
        {"dtype", 0, "TYPE", "synthetic weight dtype (default bf16): " DB_SYNTH_DTYPE_NAMES, NULL, DB_OPT_STR, &dtype_s},
        {"kv-dtype", 0, "TYPE", DB_KV_DTYPE_HELP, NULL, DB_OPT_STR, &kv_s},
        {"rows", 0, "LIST", "rows per forward (drafter: requests), default 1,2,4,8,16,32,64", NULL, DB_OPT_STR, &rows_s},
        {"depth", 'C', "LIST", "context depth: cached positions per request (default 128)", NULL, DB_OPT_STR, &ctx_s},
        {"context", 0, "LIST", "the same as --depth (its former name, still accepted)", NULL, DB_OPT_STR, &ctx_s},
        {"mode", 'm', "NAME", "batch (N requests x 1 row, default), prefill (1 request x N rows, logits of the last) or verify (the same, logits of every row)", NULL, DB_OPT_STR, &mode},
        {"block-size", 'B', "N", "drafter block size (default 8)", NULL, DB_OPT_INT, &block},
        {"repetitions", 'r', "N", "timed forwards per point, median reported (default 9, <= 64)", NULL, DB_OPT_INT, &reps},
        {"deterministic", 0, NULL, "batch-invariant kernels (as check-lossless)", NULL, DB_OPT_FLAG, &deterministic},
        {"seed", 's', "N", "seed of synthetic weights (default 0)", NULL, DB_OPT_INT, &seed},
        {"backend", 'b', "NAME", "compute backend (default cpu)", NULL, DB_OPT_STR, &backend},
        {"threads", 0, "N", "CPU threads (default: all cores; at most 4x them)", NULL, DB_OPT_INT, &threads},
        {"output", 'o', "FMT", "md (default), csv or json", NULL, DB_OPT_STR, &output},
        {"write-device-config", 0, "FILE", "also measure the roofline's figures on the target's shapes (plan's probe) and write them as a device preset (plan --device-config)", NULL, DB_OPT_STR, &write_dev},
    };
    const db_cmd_opts cmd = {"bench",
                             "Forward time of the target (and drafter) vs rows and context depth, with\n"
                             "achieved GB/s and GFLOP/s next to the copy bandwidth and FMA peak; with 16\n"
                             "among the rows, each time over the 16-row time at its depth (K-flat).",
                             opts, (int)(sizeof opts / sizeof *opts), NULL};
    int rc = db_opts_parse(&cmd, argc, argv, &help, err, errlen);
    if (rc || help) return rc;
    if (strcmp(output, "md") && strcmp(output, "csv") && strcmp(output, "json"))
        return db_fail(err, errlen, DB_EINPUT, "-o must be md, csv or json, not '%s'", output);
    if (strcmp(mode, "batch") && strcmp(mode, "prefill") && strcmp(mode, "verify"))
        return db_fail(err, errlen, DB_EINPUT, "--mode must be batch, prefill or verify, not '%s'", mode);
    if (reps < 1 || reps > 64 || seed < 0 || block < 2 || block > DB_MAX_BLOCK)
        return db_fail(err, errlen, DB_EINPUT, "--repetitions 1..64, --seed >= 0, --block-size 2..%d", DB_MAX_BLOCK);
    int trc = db_threads_check("--threads", threads, err, errlen);
    if (trc) return trc;
    db_dtype dt;
    if (db_dtype_parse(dtype_s, &dt) != 0) return db_fail(err, errlen, DB_EINPUT, "--dtype %s: one of " DB_SYNTH_DTYPE_NAMES, dtype_s);
    db_dtype kvt;
    if ((rc = db_opt_kv_dtype(kv_s, backend, &kvt, err, errlen))) return rc;
    int rows[DB_LIST_MAX], ctxs[DB_LIST_MAX], nrows, nctx;
    if ((rc = db_parse_int_list("--rows", rows_s, 1, 4096, rows, &nrows, err, errlen))) return rc;
    if ((rc = db_parse_int_list("--depth", ctx_s, 0, 1 << 20, ctxs, &nctx, err, errlen))) return rc;
    char tpath[1024], dpath[1024];
    if ((rc = db_data_path(target, tpath, sizeof tpath, err, errlen))) return rc;
    if (drafter && (rc = db_data_path(drafter, dpath, sizeof dpath, err, errlen))) return rc;

    db_session s;
    db_synth_opts syn = {.seed = (uint64_t)seed, .dtype = dt};
    db_session_opts so = {backend, tpath, drafter ? dpath : NULL, threads, deterministic, synthetic ? &syn : NULL};
    if ((rc = db_session_open(&s, &so, err, errlen))) return rc;
    if (!synthetic) dt = s.target.embed.dtype;
    if (s.has_drafter && block > s.drafter.cfg.block_size) {
        db_session_close(&s);
        return db_fail(err, errlen, DB_EINPUT, "--block-size %d above the drafter's block_size %d (%s)", block,
                       s.drafter.cfg.block_size, s.drafter.cfg.base.path);
    }
    bench_limits lim = {.peak_unit = "none"};
    double copy = 0;
    if (!strcmp(backend, "cpu")) {
        fprintf(stderr, "bench: measuring copy bandwidth and FMA peak\n");
        copy = copy_bandwidth();
        lim.copy_gbs = copy / 1e9;
        lim.peak_gflops = fma_peak(s.be->simd, &lim.peak_unit) / 1e9;
    } else if ((rc = device_limits(&s, &lim, err, errlen))) {
        db_session_close(&s);
        return rc;
    }
    if (write_dev && (rc = write_device_config(&s, write_dev, dt, lim.peak_gflops, err, errlen))) {
        db_session_close(&s);
        return rc;
    }
    size_t nrow = (size_t)2 * nrows * nctx + (size_t)nrows;
    bench_row *out = copy < 0 ? NULL : db_calloc(nrow, sizeof *out);
    int nout = 0;
    bench_ctx b = {.s = &s, .mode = mode, .block = block};
    if (copy < 0) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the 2 x 128 MiB copy-bandwidth buffers");
    else if (!out) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating %zu bench rows", nrow);
    else rc = bench_all(&b, rows, nrows, ctxs, nctx, reps, dt, kvt, out, &nout, err, errlen);
    if (!rc && !strcmp(output, "json")) {
        if (print_json(out, nout, &lim, &s, mode, dt))
            rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting the bench table as JSON");
    } else if (!rc && !strcmp(output, "csv")) print_csv(out, nout, &lim, &s, mode);
    else if (!rc) print_md(out, nout, &lim, &s, mode, dt);
    free(out);
    db_session_close(&s);
    return rc;
}
