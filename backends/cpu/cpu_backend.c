/* cpu_backend.c — the CPU backend: every op of backend.h on host memory, OpenMP threads,
 * SIMD matmul kernels (cpu_kernels.h) for small batches, OpenBLAS sgemm for large ones.
 *
 * Notation as in backend.h. "Device" memory is 64-byte aligned host memory here; upload and
 * download are memcpy. Deterministic mode never calls sgemm (whose reduction order changes with
 * the batch shape), so a row's logits do not depend on how many rows share the call.
 *
 * Errors: a compute op that cannot get its scratch memory computes nothing, writes the message
 * into be->err and latches the failure (backend.h); sync, download, topk and pair_scores then
 * return -1, so the engine stops at its next checked call instead of using a wrong result. */
#include "config.h"
#include "alloc.h"
#include "backend.h"
#include "cpu_kernels.h"
#include "cpu_attention.h"
#include "matmul_quant.h"
#include "matmul_q8.h"
#include "cpu_topology.h"
#include "vec_math.h"

#include <errno.h>
#include <math.h>
#if HAVE_X86_SIMD
#include <immintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#if HAVE_OPENMP
#include <omp.h>
#include <pthread.h>
#endif
#if HAVE_OPENBLAS
#include <cblas.h>
#endif

/* Rows from which sgemm is used. Measured with bench-gemv (1 thread, AVX2): at 16 rows the SIMD
 * kernel already runs at 65-70 GFLOP/s, sgemm at 55 for f32 weights and 27 for bf16 ones (the
 * panel conversion costs more than it saves), so sgemm only takes large f32 batches. */
#define BLAS_MIN_ROWS 64
/* Weight rows converted to f32 per sgemm panel for bf16 / f16 weights. */
#define BLAS_PANEL 256

typedef struct {
    db_matmul_kernel matmul;
    db_scores_kernel scores; /* attention: q.k of every key */
    db_wsum_kernel wsum; /* attention: o += sum_j p_j v_j */
    db_scores16_kernel scores16; /* the same over an f16 cache */
    db_wsum16_kernel wsum16;
    db_scores_multi_kernel scores_multi; /* several queries per call (NULL: one call each) */
    db_wsum_multi_kernel wsum_multi;
    db_scores_heads_kernel scores_heads; /* one row's heads key by key (NULL: block walk) */
    db_wsum_heads_kernel wsum_heads;
    db_matmul_kernel matmul_quant; /* the quantized dtypes (matmul_quant.h) */
    db_matmul_q8_kernel matmul_q8; /* their integer path (matmul_q8.h; NULL: none here) */
    db_q8_quantize_fn quantize_q8;
    void *xq_buf; /* the activation rows quantized for matmul_q8 */
    size_t xq_bytes;
    float *panel; /* [BLAS_PANEL, panel_cols] f32 conversion buffer */
    size_t panel_cols;
    /* RoPE angles of the last call: cos / sin [n][hd/2] for positions rope_pos[n], so the q and
     * k calls of every layer of one forward compute them once */
    float *rope_cs;
    int *rope_pos, rope_n, rope_hd, rope_cap;
    float rope_theta;
    db_attn_scratch attn; /* attention's score rows and task list, reused across calls */
    int f16c;     /* the CPU converts f32 -> f16 in hardware (the f16 cache's stores) */
    int failed;   /* latched: the first message stays in be->err */
    int nonfinite; /* probs rows with NaN / Inf logits since the last nonfinite() */
} cpu_ctx;

static void latch(db_backend *be, const char *what, size_t bytes)
{
    cpu_ctx *c = be->ctx;
    if (c->failed) return; /* keep the first error */
    c->failed = 1;
    snprintf(be->err, sizeof be->err, "%s: cannot allocate %zu bytes of scratch memory", what, bytes);
}

/* One scratch row of `width` floats per OpenMP thread, allocated before a team starts so that a
 * failure is one clean error rather than one per thread; NULL when the memory is not there. */
static float *thread_scratch(size_t width, int *nthreads, size_t *bytes)
{
#if HAVE_OPENMP
    *nthreads = omp_get_max_threads();
#else
    *nthreads = 1;
#endif
    *bytes = sizeof(float) * width * (size_t)*nthreads;
    return db_malloc(*bytes);
}

/* the calling thread's row of a thread_scratch block (inside the team of that size) */
static float *thread_row(float *scratch, size_t width)
{
#if HAVE_OPENMP
    return scratch + (size_t)omp_get_thread_num() * width;
#else
    (void)width;
    return scratch;
#endif
}

/* Each allocation carries its size in a header so bytes_in_use stays exact. */
typedef struct {
    size_t bytes;
    size_t pad[7];
} alloc_hdr;

/* Buffers of 2 MiB and more (weights, K/V caches, logits) start on a 2 MiB boundary and ask
 * for transparent huge pages (the kernel's default is often "madvise": only when asked). A
 * forward streams every weight once; on 4 KiB pages that is one TLB miss per 4 KiB read. */
#define HUGE_PAGE ((size_t)2 << 20)

static void *cpu_alloc(db_backend *be, size_t bytes)
{
    alloc_hdr *h = NULL;
    size_t total = sizeof(alloc_hdr) + bytes;
    int huge = total >= HUGE_PAGE;
    if (posix_memalign((void **)&h, huge ? HUGE_PAGE : 64, total) != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) (void)madvise(h, total & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* a hint: ignore failure */
#endif
    memset(h, 0, total); /* before any use, so the pages are the huge ones */
    h->bytes = bytes;
    be->bytes_in_use += bytes;
    if (be->bytes_in_use > be->bytes_peak) be->bytes_peak = be->bytes_in_use;
    return h + 1;
}

static void cpu_dfree(db_backend *be, void *p)
{
    if (!p) return;
    alloc_hdr *h = (alloc_hdr *)p - 1;
    be->bytes_in_use -= h->bytes;
    free(h);
}

#if HAVE_OPENMP
/* Can n threads exist at once? libgomp answers a failed pthread_create with its own message
 * and exit (or, far enough, a crash), so the team is tried here first, the threads waiting
 * until all were made; 0, or the errno of the first that could not be made. */
static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t probe_cv = PTHREAD_COND_INITIALIZER;
static int probe_go;

static void *probe_wait(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&probe_mu);
    while (!probe_go) pthread_cond_wait(&probe_cv, &probe_mu);
    pthread_mutex_unlock(&probe_mu);
    return NULL;
}

static int probe_threads(int n)
{
    pthread_t *t = n > 1 ? db_malloc(sizeof *t * (size_t)(n - 1)) : NULL;
    if (n > 1 && !t) return ENOMEM;
    int made = 0, rc = 0;
    probe_go = 0;
    while (made < n - 1 && !(rc = pthread_create(&t[made], NULL, probe_wait, NULL))) made++;
    pthread_mutex_lock(&probe_mu);
    probe_go = 1;
    pthread_cond_broadcast(&probe_cv);
    pthread_mutex_unlock(&probe_mu);
    for (int i = 0; i < made; i++) pthread_join(t[i], NULL);
    free(t);
    return rc;
}
#endif

static int cpu_init(db_backend *be, const db_backend_opts *opts)
{
    cpu_ctx *c = db_calloc(1, sizeof *c);
    if (!c) {
        snprintf(be->err, sizeof be->err, "out of memory allocating the CPU backend context");
        return -1;
    }
    const char *simd = "c";
    c->matmul = db_matmul_select(NULL, &simd);
    if (!c->matmul) {
        snprintf(be->err, sizeof be->err,
                 "DB_CPU_KERNEL=%s: no such matmul kernel in this build or on this CPU", simd);
        free(c);
        return -1;
    }
    db_attn_kernels(simd, &c->scores, &c->wsum);
#if HAVE_X86_SIMD
    c->f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#endif
    db_attn_kernels16(simd, &c->scores16, &c->wsum16);
    db_attn_multi_kernels(simd, &c->scores_multi, &c->wsum_multi);
    db_attn_heads_kernels(simd, &c->scores_heads, &c->wsum_heads);
    c->matmul_quant = db_matmul_quant_select(simd);
    /* DB_CPU_Q8=0 keeps quantized weights on the float path (to compare the two) */
    const char *q8 = getenv("DB_CPU_Q8");
    if (!(q8 && strcmp(q8, "0") == 0)) db_matmul_q8_select(simd, &c->matmul_q8, &c->quantize_q8);
    be->quant_weights = 1;
    snprintf(be->simd, sizeof be->simd, "%s", simd);
    be->ctx = c;
    be->deterministic = opts ? opts->deterministic : 0;
    int threads = opts && opts->threads > 0 ? opts->threads : 0;
#if HAVE_OPENMP
    if (threads > 0) omp_set_num_threads(threads);
    be->threads = omp_get_max_threads();
    int perr = probe_threads(be->threads);
    if (perr) {
        snprintf(be->err, sizeof be->err, "cannot start %d CPU threads: %s", be->threads, strerror(perr));
        free(c);
        return -1;
    }
#else
    be->threads = 1;
#endif
#if HAVE_OPENBLAS
    openblas_set_num_threads(1); /* parallelism comes from OpenMP over panels (matmul_blas) */
#endif
    db_cpu_describe(be->device_name, sizeof be->device_name);
    if (opts && opts->pin_threads) db_cpu_pin_threads(be->threads);
    return 0;
}

static void cpu_free(db_backend *be)
{
    cpu_ctx *c = be->ctx;
    if (c) free(c->panel), free(c->xq_buf), free(c->rope_cs), free(c->rope_pos), free(c->attn.buf);
    free(c);
    be->ctx = NULL;
}

static int cpu_upload(db_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    memcpy(dst, src, bytes);
    return 0;
}

static int cpu_download(db_backend *be, void *dst, const void *src, size_t bytes)
{
    if (((cpu_ctx *)be->ctx)->failed) return -1;
    memcpy(dst, src, bytes);
    return 0;
}

static int cpu_sync(db_backend *be) { return ((cpu_ctx *)be->ctx)->failed ? -1 : 0; }

/* Threads split the weight rows into contiguous ranges of whole 24-row blocks (a multiple of
 * every kernel's weight-row tile, so only the last range has a partial tile); every thread runs
 * the kernel over all N rows. One parallel region per matmul, static partition. (Chunks taken
 * first come first served measured no faster on the 124M target and cost 5% of the embedded
 * pair's decode step, where a matmul lasts a few microseconds.) */
static void matmul_kernel_parallel(cpu_ctx *c, float *y, const float *x, const db_weight *w,
                                   int n, int accumulate)
{
    int nout = w->rows, nin = w->cols;
    const int blk = 24;
    int nblk = (nout + blk - 1) / blk;
    db_matmul_kernel kernel = db_dtype_is_quant(w->dtype) ? c->matmul_quant : c->matmul;
    /* the integer path: the activation rows quantized once (threads split the rows), then the
     * weight rows split as below. Where the buffer cannot grow, the float path runs instead. */
    db_q8_rows xq = {0};
    int q8 = 0;
    if (c->matmul_q8 && db_q8_supports(w->dtype, nin)) {
        size_t need = db_q8_rows_bytes(n, nin);
        if (need > c->xq_bytes) {
            void *b = db_realloc(c->xq_buf, need);
            if (b) c->xq_buf = b, c->xq_bytes = need;
        }
        if (need <= c->xq_bytes) {
            db_q8_rows_init(&xq, c->xq_buf, n, nin, db_q8_act_block(w->dtype));
            q8 = 1;
        }
    }
#if HAVE_OPENMP
#pragma omp parallel if (nblk > 1 && (size_t)nout * nin * n > 32768)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
#else
    {
        int nt = 1, id = 0;
#endif
        if (q8) {
            c->quantize_q8(&xq, x, (int)((long long)n * id / nt), (int)((long long)n * (id + 1) / nt));
#if HAVE_OPENMP
#pragma omp barrier
#endif
        }
        int o0 = (int)((long long)nblk * id / nt) * blk;
        int o1 = (int)((long long)nblk * (id + 1) / nt) * blk;
        if (o1 > nout) o1 = nout;
        if (o0 < o1) {
            if (q8) c->matmul_q8(y, &xq, w->data, w->dtype, n, nout, o0, o1, accumulate);
            else kernel(y, x, w->data, w->dtype, n, nout, nin, o0, o1, accumulate);
        }
    }
}

#if HAVE_OPENBLAS
/* Panels of BLAS_PANEL weight rows are spread over the OpenMP threads; each thread converts
 * its panel to f32 (bf16 / f16 weights) and calls a single-threaded sgemm on it. OpenBLAS's own
 * threads stay off: they and the OpenMP team would fight over the same cores. */
static int matmul_blas(db_backend *be, float *y, const float *x, const db_weight *w, int n,
                       int accumulate)
{
    cpu_ctx *c = be->ctx;
    int nout = w->rows, nin = w->cols;
    float beta = accumulate ? 1.0f : 0.0f;
    int nthreads = be->threads > 0 ? be->threads : 1;
    if (w->dtype != DB_F32 && c->panel_cols < (size_t)nin) {
        float *p = db_realloc(c->panel, sizeof(float) * BLAS_PANEL * (size_t)nin * (size_t)nthreads);
        if (!p) return -1;
        c->panel = p;
        c->panel_cols = (size_t)nin;
    }
    int npanels = (nout + BLAS_PANEL - 1) / BLAS_PANEL;
#if HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
#endif
    for (int pi = 0; pi < npanels; pi++) {
        int o0 = pi * BLAS_PANEL, rows = nout - o0 < BLAS_PANEL ? nout - o0 : BLAS_PANEL;
        const float *wp;
        if (w->dtype == DB_F32) {
            wp = (const float *)w->data + (size_t)o0 * nin;
        } else {
#if HAVE_OPENMP
            float *panel = c->panel + (size_t)omp_get_thread_num() * BLAS_PANEL * nin;
#else
            float *panel = c->panel;
#endif
            db_convert_to_f32(panel, (const uint16_t *)w->data + (size_t)o0 * nin, w->dtype,
                              (size_t)rows * nin);
            wp = panel;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, nin, 1.0f, x, nin, wp, nin,
                    beta, y + o0, nout);
    }
    return 0;
}
#endif

static void cpu_matmul(db_backend *be, float *y, const float *x, const db_weight *w, int n,
                       int accumulate)
{
    cpu_ctx *c = be->ctx;
#if HAVE_OPENBLAS
    if (!be->deterministic && n >= BLAS_MIN_ROWS && w->dtype == DB_F32 &&
        matmul_blas(be, y, x, w, n, accumulate) == 0)
        return;
#endif
    matmul_kernel_parallel(c, y, x, w, n, accumulate);
}

/* one row: y = x / sqrt(mean(x^2) + eps) * w. The sum of squares runs in vector lanes, in an
 * order set by d alone (the clone's lane count, then its fixed combination), so a row's result
 * does not depend on the rows sharing the call. A serial float sum waits one add latency per
 * element: 8 rows of 1024 (a verify's input norm) took ~10 us of a 1-thread call. */
DB_VEC_CLONES static void rmsnorm_row(float *y, const float *x, const float *w, int d, float eps)
{
    float ss = 0.0f;
#if HAVE_OPENMP
#pragma omp simd reduction(+ : ss)
#endif
    for (int i = 0; i < d; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (int i = 0; i < d; i++) y[i] = x[i] * inv * w[i];
}

static void cpu_rmsnorm(db_backend *be, float *y, const float *x, const float *w, int n, int d,
                        float eps)
{
    (void)be;
#if HAVE_OPENMP
#pragma omp parallel for schedule(static) if ((size_t)n * d > 32768)
#endif
    for (int r = 0; r < n; r++) rmsnorm_row(y + (size_t)r * d, x + (size_t)r * d, w, d, eps);
}

/* cos / sin of every (row, frequency) of a call, reused while the positions, head size and
 * theta stay those of the previous call (the q and k calls of all layers of a forward); the
 * values are computed exactly as before, so reuse changes no bit. NULL when out of memory. */
static const float *rope_table(cpu_ctx *c, const int *pos, int n, int hd, float theta)
{
    int half = hd / 2;
    if (c->rope_cs && c->rope_n == n && c->rope_hd == hd && c->rope_theta == theta &&
        memcmp(c->rope_pos, pos, sizeof(int) * (size_t)n) == 0)
        return c->rope_cs;
    if ((size_t)n * (size_t)half > (size_t)c->rope_cap || n > c->rope_cap) {
        size_t want = (size_t)n * (size_t)(half > 1 ? half : 1);
        float *cs = db_realloc(c->rope_cs, sizeof(float) * 2 * want);
        if (cs) c->rope_cs = cs;
        int *p = cs ? db_realloc(c->rope_pos, sizeof(int) * want) : NULL;
        if (p) c->rope_pos = p;
        if (!cs || !p) {
            c->rope_n = -1; /* the table no longer matches anything */
            return NULL;
        }
        c->rope_cap = (int)want;
    }
    for (int r = 0; r < n; r++)
        for (int i = 0; i < half; i++) {
            /* angle in double: positions up to 10^5-10^6 times small frequencies */
            double freq = pow((double)theta, -2.0 * i / (double)hd);
            double ang = (double)pos[r] * freq;
            c->rope_cs[2 * ((size_t)r * half + i)] = (float)cos(ang);
            c->rope_cs[2 * ((size_t)r * half + i) + 1] = (float)sin(ang);
        }
    memcpy(c->rope_pos, pos, sizeof(int) * (size_t)n);
    c->rope_n = n, c->rope_hd = hd, c->rope_theta = theta;
    return c->rope_cs;
}

static void cpu_rope(db_backend *be, float *x, const int *pos, int n, int nheads, int hd,
                     float theta)
{
    int half = hd / 2;
    const float *cs = rope_table(be->ctx, pos, n, hd, theta);
    if (!cs) {
        latch(be, "rope", sizeof(float) * 2 * (size_t)n * (size_t)half);
        return;
    }
#if HAVE_OPENMP
#pragma omp parallel for schedule(static) if ((size_t)n * nheads * hd > 65536)
#endif
    for (int r = 0; r < n; r++) {
        const float *csr = cs + 2 * (size_t)r * half;
        /* heads outside, frequencies inside: the inner loop walks a head's halves front to back
         * (it vectorizes; over the heads it strode hd floats per element) */
        for (int h = 0; h < nheads; h++) {
            float *v = x + ((size_t)r * nheads + h) * hd;
            for (int i = 0; i < half; i++) {
                float c0 = csr[2 * i], sn = csr[2 * i + 1];
                float a = v[i], b = v[i + half];
                v[i] = a * c0 - b * sn;
                v[i + half] = b * c0 + a * sn;
            }
        }
    }
}

static void attention_dt(db_backend *be, float *out, const float *q, const void *kcache,
                         const void *vcache, db_dtype dt, int cap, const db_attn_row *rows, int n,
                         int nh, int nkv, int hd, float scale)
{
    cpu_ctx *c = be->ctx;
    db_attn_args a = {out, q, kcache, vcache, rows, n, nh, nkv, hd, cap, scale, c->scores, c->wsum,
                      dt, c->scores16, c->wsum16, c->scores_multi, c->wsum_multi,
                      c->scores_heads, c->wsum_heads};
    int nthreads = 1;
#if HAVE_OPENMP
    nthreads = omp_get_max_threads();
#endif
    size_t bytes;
    if (db_cpu_attention(&a, nthreads, &c->attn, &bytes) != 0) latch(be, "attention", bytes);
}

static void cpu_attention(db_backend *be, float *out, const float *q, const float *kcache,
                          const float *vcache, int cap, const db_attn_row *rows, int n, int nh,
                          int nkv, int hd, float scale)
{
    attention_dt(be, out, q, kcache, vcache, DB_F32, cap, rows, n, nh, nkv, hd, scale);
}

static void cpu_attention_f16(db_backend *be, float *out, const float *q, const uint16_t *kcache,
                              const uint16_t *vcache, int cap, const db_attn_row *rows, int n,
                              int nh, int nkv, int hd, float scale)
{
    attention_dt(be, out, q, kcache, vcache, DB_F16, cap, rows, n, nh, nkv, hd, scale);
}

#if HAVE_X86_SIMD
/* 8 values at a time with F16C's vcvtps2ph, round to nearest even: the same f16 as
 * db_f32_to_f16 for every finite and infinite value (test_kernels), at a fraction of the cost
 * (the scalar loop took 240 us per call of a 32-row prefill of the 124M target, 7 ns a value) */
__attribute__((target("avx,f16c"))) static int f16_row_f16c(uint16_t *d, const float *s, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}
#endif

/* the f16 cache's store: rows converted to f16, round to nearest even */
static void cpu_kv_store_f16(db_backend *be, uint16_t *dst, const int *dst_idx, const float *src,
                             int n, int width)
{
    const int f16c = ((const cpu_ctx *)be->ctx)->f16c;
#if HAVE_OPENMP
#pragma omp parallel for schedule(static) if ((size_t)n * width > 65536)
#endif
    for (int r = 0; r < n; r++) {
        uint16_t *d = dst + (size_t)dst_idx[r] * (size_t)width;
        const float *s = src + (size_t)r * (size_t)width;
        int i = 0;
#if HAVE_X86_SIMD
        if (f16c) i = f16_row_f16c(d, s, width);
#endif
        for (; i < width; i++) d[i] = db_f32_to_f16(s[i]);
    }
    (void)f16c;
}

/* SiLU(gate) * up over [0, n): one span of a thread */
DB_VEC_CLONES static void swiglu_span(float *out, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + db_exp_vec(-g)) * up[i];
    }
}

/* x[i] = tanh(x[i] * mult / cap) * cap over [0, n) */
DB_VEC_CLONES static void softcap_span(float *x, size_t n, float mult, float cap)
{
    for (size_t i = 0; i < n; i++) x[i] = db_tanh_vec(x[i] * mult / cap) * cap;
}

static int max_threads(void)
{
#if HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

#if HAVE_OPENMP
#define OMP_SPANS _Pragma("omp parallel for schedule(static) num_threads(nt_) if (nt_ > 1)")
#else
#define OMP_SPANS
#endif

/* the elementwise loops run as one contiguous span per thread (spans of a multiple of 16
 * elements, so every vector but the last is whole); min: below it, one thread does all */
#define SPAN_LOOP(n, min, CALL)                                                                  \
    do {                                                                                         \
        int nt_ = 1;                                                                             \
        if ((n) > (min)) nt_ = max_threads();                                                    \
        size_t per_ = (((n) + (size_t)nt_ - 1) / (size_t)nt_ + 15) & ~(size_t)15;              \
        OMP_SPANS                                                                                \
        for (int t_ = 0; t_ < nt_; t_++) {                                                       \
            size_t lo = (size_t)t_ * per_, hi = lo + per_ < (n) ? lo + per_ : (n);              \
            if (lo < hi) CALL;                                                                   \
        }                                                                                        \
    } while (0)

static void cpu_swiglu(db_backend *be, float *out, const float *gate, const float *up, size_t n)
{
    (void)be;
    SPAN_LOOP(n, 8192, swiglu_span(out + lo, gate + lo, up + lo, hi - lo));
}

static void cpu_embed(db_backend *be, float *out, const db_weight *table, const int *ids, int n)
{
    (void)be;
    size_t d = (size_t)table->cols, rb = db_dtype_bytes(table->dtype, d);
    for (int r = 0; r < n; r++)
        db_convert_to_f32(out + (size_t)r * d, (const char *)table->data + (size_t)ids[r] * rb,
                          table->dtype, d);
}

static void cpu_add(db_backend *be, float *y, const float *x, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static void cpu_copy_rows(db_backend *be, float *dst, int dst_stride, const int *dst_idx,
                          const float *src, int src_stride, const int *src_idx, int n, int width)
{
    (void)be;
    for (int r = 0; r < n; r++) {
        size_t d = (size_t)(dst_idx ? dst_idx[r] : r), s = (size_t)(src_idx ? src_idx[r] : r);
        memmove(dst + d * (size_t)dst_stride, src + s * (size_t)src_stride,
                sizeof(float) * (size_t)width);
    }
}

static void cpu_scale_softcap(db_backend *be, float *x, size_t n, float mult, float cap)
{
    (void)be;
    if (cap <= 0.0f) {
        for (size_t i = 0; i < n; i++) x[i] *= mult;
        return;
    }
    SPAN_LOOP(n, 16384, softcap_span(x + lo, hi - lo, mult, cap));
}

/* larger value first; equal values: smaller id first */
static int better(float va, int ia, float vb, int ib) { return va > vb || (va == vb && ia < ib); }

/* the largest of x[0, n) (a NaN may or may not count: the caller only skips on a clear "<=") */
DB_VEC_CLONES static float span_max(const float *x, int n)
{
    float m = x[0];
#if HAVE_OPENMP
#pragma omp simd reduction(max : m)
#endif
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

#define TOPK_SPAN 128

static int cpu_topk(db_backend *be, int *ids, float *vals, const float *logits, int n, int v,
                    int k)
{
    if (((cpu_ctx *)be->ctx)->failed) return -1;
    if (k < 1 || k > v) {
        snprintf(be->err, sizeof be->err, "topk: k=%d outside 1..%d", k, v);
        return -1;
    }
#if HAVE_OPENMP
#pragma omp parallel for schedule(static) if (n > 1 && (size_t)n * v > 65536)
#endif
    for (int r = 0; r < n; r++) {
        const float *lr = logits + (size_t)r * v;
        int *ir = ids + (size_t)r * k;
        float tv[k > 0 ? k : 1];
        int cnt = 0;
        /* spans of TOPK_SPAN ids whose largest value cannot enter the full list are skipped after
         * a vector max: their ids come after every id in the list, so a value equal to the last
         * one loses the tie as well. Most of a vocabulary is skipped; the list is the same as
         * the scan of every id gives (a span with a NaN, whose max may hide it, is scanned
         * unless the max is clearly not above). */
        for (int i0 = 0; i0 < v; i0 += TOPK_SPAN) {
            int i1 = v - i0 < TOPK_SPAN ? v : i0 + TOPK_SPAN;
            if (cnt == k && span_max(lr + i0, i1 - i0) <= tv[k - 1]) continue;
            for (int i = i0; i < i1; i++) {
                float x = lr[i];
                if (cnt == k && !better(x, i, tv[k - 1], ir[k - 1])) continue;
                int j = cnt < k ? cnt++ : k - 1;
                while (j > 0 && better(x, i, tv[j - 1], ir[j - 1])) {
                    tv[j] = tv[j - 1];
                    ir[j] = ir[j - 1];
                    j--;
                }
                tv[j] = x;
                ir[j] = i;
            }
        }
        if (vals) memcpy(vals + (size_t)r * k, tv, sizeof(float) * (size_t)k);
    }
    return 0;
}

static void cpu_probs(db_backend *be, float *x, int n, int v, float temperature, float top_p,
                      int top_k)
{
    int failed = 0, bad = 0;
#if HAVE_OPENMP
#pragma omp parallel for schedule(static) reduction(| : failed) reduction(+ : bad) if (n > 1 && (size_t)n * v > 65536)
#endif
    for (int r = 0; r < n; r++) {
        int rc = db_probs_host(x + (size_t)r * v, v, temperature, top_p, top_k);
        failed |= rc < 0;
        bad += rc == 1;
    }
    ((cpu_ctx *)be->ctx)->nonfinite += bad;
    if (failed) latch(be, "probs (top-k / top-p filter)", sizeof(int) * 2 * (size_t)v);
}

/* probs ran on the host: its count is already here */
static int cpu_nonfinite(db_backend *be)
{
    cpu_ctx *c = be->ctx;
    int n = c->nonfinite;
    c->nonfinite = 0;
    return n;
}

/* sample / accept: the host references themselves (backend.h), rows of host memory */
static int cpu_sample(db_backend *be, int *out, const float *probs, int n, int v, const double *u)
{
    if (((cpu_ctx *)be->ctx)->failed) return -1;
    for (int r = 0; r < n; r++) out[r] = db_sample_index_u(probs + (size_t)r * v, v, u[r]);
    return 0;
}

static int cpu_accept(db_backend *be, int *accepted, int *bonus, float *p, const float *q,
                      const float *q_vals, const int *q_ids, int q_k, const int *draft,
                      const double *u, int nq, int block, int v)
{
    if (((cpu_ctx *)be->ctx)->failed) return -1;
    float *res = db_malloc(sizeof(float) * (size_t)(v > 0 ? v : 1));
    if (!res) {
        snprintf(be->err, sizeof be->err, "accept: cannot allocate %zu bytes of scratch memory",
                 sizeof(float) * (size_t)v);
        return -1;
    }
    size_t qrows = (size_t)(block - 1);
    for (int j = 0; j < nq; j++)
        accepted[j] = q_ids ? db_accept_sample_u(draft + (size_t)j * block, p + (size_t)j * block * v,
                                                 q_vals + (size_t)j * qrows * q_k, q_ids + (size_t)j * qrows * q_k,
                                                 q_k, block, v, u + (size_t)j * block, res, &bonus[j])
                            : db_accept_sample_u(draft + (size_t)j * block, p + (size_t)j * block * v,
                                                 q + (size_t)j * qrows * v, NULL, 0, block, v,
                                                 u + (size_t)j * block, res, &bonus[j]);
    free(res);
    return 0;
}

static void cpu_dynconv(db_backend *be, float *out, const float *in, const float *base,
                        const float *delta, int phase, int n_blocks, int block, int h, int k, int g)
{
    (void)be;
    int gs = h / g;
    size_t dstride = (size_t)2 * k * g;
    for (int b = 0; b < n_blocks; b++) {
        for (int t = 0; t < block; t++) {
            size_t row = (size_t)b * block + t;
            const float *d = delta + row * dstride + (size_t)phase * k * g;
            float *o = out + row * h;
            for (int c = 0; c < h; c++) {
                float acc = 0.0f;
                for (int j = 0; j < k && j <= t; j++)
                    acc += (base[(size_t)j * h + c] + d[(size_t)j * g + c / gs]) *
                           in[(row - (size_t)j) * h + c];
                o[c] = acc;
            }
        }
    }
}

static float weight_elem(const db_weight *w, size_t i)
{
    const uint16_t *h = w->data;
    switch (w->dtype) {
    case DB_F32: return ((const float *)w->data)[i];
    case DB_BF16: return db_bf16_to_f32(h[i]);
    case DB_F16: return db_f16_to_f32(h[i]);
    default: { /* a quantized codebook: dequantize the block holding element i */
        float blk[256];
        size_t cols = (size_t)w->cols, bs = (size_t)db_dtype_block(w->dtype), c = i % cols;
        const char *row = (const char *)w->data + i / cols * db_dtype_bytes(w->dtype, cols);
        db_dequant_block(blk, row + c / bs * db_dtype_size(w->dtype), w->dtype);
        return blk[c % bs];
    }
    }
}

/* out[j] = sum_q a[q] * st[q][j] for j < k, each sum in q order from 0 (the k sums side by side,
 * one lane each: the order of every one is that of a plain dot product) */
DB_VEC_CLONES static void pair_dots(float *out, const float *a, const float *st, int r, int k)
{
    float acc[k];
    for (int j = 0; j < k; j++) acc[j] = 0.0f;
    for (int q = 0; q < r; q++)
        for (int j = 0; j < k; j++) acc[j] += a[q] * st[(size_t)q * k + j];
    for (int j = 0; j < k; j++) out[j] = acc[j];
}

static int cpu_pair_scores(db_backend *be, float *out, const float *g, const int *prev,
                           const int *cand, const db_weight *pred, const db_weight *succ, int n,
                           int k, int r)
{
    if (((cpu_ctx *)be->ctx)->failed) return -1;
    if (pred->cols != r || succ->cols != r) {
        snprintf(be->err, sizeof be->err, "pair_scores: codebook rank mismatch");
        return -1;
    }
    int nthreads;
    size_t bytes, width = (size_t)r * (size_t)(k + 1);
    /* per thread: a row of pred * g, then the k candidates' succ rows as f32, transposed [r][k] */
    float *scratch = thread_scratch(width, &nthreads, &bytes);
    if (!scratch) {
        snprintf(be->err, sizeof be->err, "pair_scores: cannot allocate %zu bytes of scratch memory", bytes);
        return -1;
    }
#if HAVE_OPENMP
#pragma omp parallel for schedule(static) num_threads(nthreads) if (n > 1 && (size_t)n * k * k * r > 65536)
#endif
    for (int t = 0; t < n; t++) {
        float *tmp = thread_row(scratch, width), *st = tmp + r;
        for (int j = 0; j < k; j++) {
            size_t sj = (size_t)cand[(size_t)t * k + j] * r;
            for (int q = 0; q < r; q++) st[(size_t)q * k + j] = weight_elem(succ, sj + q);
        }
        for (int i = 0; i < k; i++) {
            size_t pi = (size_t)prev[(size_t)t * k + i] * r;
            for (int q = 0; q < r; q++) tmp[q] = weight_elem(pred, pi + q) * g[(size_t)t * r + q];
            pair_dots(out + ((size_t)t * k + i) * k, tmp, st, r, k);
        }
    }
    free(scratch);
    return 0;
}

/* one thread per vocabulary slice: the bias of entry i is one sequential dot product */
static void cpu_markov_bias(db_backend *be, float *x, const int *prev, const db_weight *w1,
                            const db_weight *w2, float scale, int n)
{
    int R = w2->cols, Vd = w2->rows;
    if (n <= 0 || R != w1->cols) return;
    float *u = db_malloc(sizeof(float) * (size_t)R);
    if (!u) {
        latch(be, "markov_bias", sizeof(float) * (size_t)R);
        return;
    }
    for (int t = 0; t < n; t++) {
        for (int j = 0; j < R; j++) u[j] = weight_elem(w1, (size_t)prev[t] * R + j);
        float *xt = x + (size_t)t * Vd;
#if HAVE_OPENMP
#pragma omp parallel for schedule(static) if ((size_t)Vd * R > 65536)
#endif
        for (int i = 0; i < Vd; i++) {
            float s = 0.0f;
            for (int j = 0; j < R; j++) s += weight_elem(w2, (size_t)i * R + j) * u[j];
            xt[i] += scale * s;
        }
    }
    free(u);
}

/* select_walk: pair_scores into host scratch, then the reference walk per request */
static int cpu_select_walk(db_backend *be, int *draft, float *q, const float *g, const int *prev,
                           const int *cand, const db_weight *pred, const db_weight *succ,
                           const float *uvals, const double *u, int nq, int steps, int k, int r,
                           float temperature, float top_p, int top_k)
{
    size_t n = (size_t)nq * steps, bytes = sizeof(float) * (n * k * k + (size_t)k);
    float *pairs = db_malloc(bytes ? bytes : 1);
    if (!pairs) {
        snprintf(be->err, sizeof be->err, "select_walk: cannot allocate %zu bytes of scratch memory", bytes);
        return -1;
    }
    int rc = cpu_pair_scores(be, pairs, g, prev, cand, pred, succ, (int)n, k, r);
    for (int j = 0; j < nq && rc == 0; j++) {
        size_t row = (size_t)j * steps;
        if (db_select_walk_u(uvals + row * k, pairs + row * k * k, cand + row * k, steps, k,
                             temperature, top_p, top_k, u ? u + row : NULL, pairs + n * k * k,
                             q ? q + row * k : NULL, draft + row) != 0) {
            snprintf(be->err, sizeof be->err, "select_walk: out of memory filtering scores");
            rc = -1;
        }
    }
    free(pairs);
    return rc;
}

/* Chunks of 64 Ki elements, each generated by db_fill_random_host at its own offset: the
 * values depend on the element index only, never on the thread that computes them. */
static void cpu_fill_random(db_backend *be, void *dst, size_t n, db_dtype dt, uint64_t seed,
                            uint64_t offset, float scale, float mean)
{
    (void)be;
    const size_t chunk = (size_t)1 << 16;
    size_t nchunks = (n + chunk - 1) / chunk, es = db_dtype_size(dt);
#if HAVE_OPENMP
#pragma omp parallel for schedule(static) if (nchunks > 1)
#endif
    for (size_t c = 0; c < nchunks; c++) {
        size_t i = c * chunk, m = n - i < chunk ? n - i : chunk;
        db_fill_random_host((char *)dst + i * es, m, dt, seed, offset + i, scale, mean);
    }
}

/* first number after `key` in a text file (a /proc/meminfo line, a cgroup file); -1 if none */
static long long read_number(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) != 0) continue;
        char *end;
        long long x = strtoll(line + kl, &end, 10);
        if (end != line + kl) v = x;
        break;
    }
    fclose(f);
    return v;
}

/* MemAvailable, capped by what the cgroup (v2, then v1) still allows */
static size_t cpu_mem_available(db_backend *be)
{
    (void)be;
    long long kb = read_number("/proc/meminfo", "MemAvailable:");
    size_t avail = kb > 0 ? (size_t)kb * 1024 : 0;
    long long lim = read_number("/sys/fs/cgroup/memory.max", "");
    long long cur = read_number("/sys/fs/cgroup/memory.current", "");
    if (lim < 0) {
        lim = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", "");
        cur = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", "");
    }
    if (lim > 0 && cur >= 0 && lim < (1ll << 60)) {
        size_t left = lim > cur ? (size_t)(lim - cur) : 0;
        if (avail == 0 || left < avail) avail = left;
    }
    return avail;
}

const db_backend_ops db_cpu_backend_ops = {
    .name = "cpu",
    .init = cpu_init,
    .free = cpu_free,
    .alloc = cpu_alloc,
    .dfree = cpu_dfree,
    .upload = cpu_upload,
    .download = cpu_download,
    .sync = cpu_sync,
    .matmul = cpu_matmul,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .kv_store_f16 = cpu_kv_store_f16,
    .attention_f16 = cpu_attention_f16,
    .swiglu = cpu_swiglu,
    .embed = cpu_embed,
    .add = cpu_add,
    .copy_rows = cpu_copy_rows,
    .scale_softcap = cpu_scale_softcap,
    .topk = cpu_topk,
    .probs = cpu_probs,
    .nonfinite = cpu_nonfinite,
    .dynconv = cpu_dynconv,
    .pair_scores = cpu_pair_scores,
    .markov_bias = cpu_markov_bias,
    .sample = cpu_sample,
    .accept = cpu_accept,
    .select_walk = cpu_select_walk,
    .fill_random = cpu_fill_random,
    .mem_available = cpu_mem_available,
};
