/* bench_gemv.c — how close the CPU backend's matmul gets to the memory bandwidth.
 *
 * Decoding is GEMV-bound: at N = 1 every weight byte is read once per token, so the best a
 * matmul can do is stream the weights at the machine's read bandwidth. One run:
 *   1. measures the read bandwidth (sum over >= 512 MiB, and >= 4x the last-level cache) and
 *      the copy bandwidth (memcpy of >= 256 MiB and >= 2x LLC, read + write bytes counted),
 *      1 thread and all threads, best of 5;
 *   2. times be->ops->matmul on the CPU backend for bf16 and f32 weights of a few shapes
 *      (4096x4096, 11008x4096 = an MLP projection of a 7B model, 151936x1024 = a Qwen vocab
 *      head) at N = 1, 4, 16 activation rows, 1 thread and all threads;
 *   3. prints a markdown table: weight GB/s (weight bytes / time), its ratio to the read
 *      bandwidth at the same thread count, and GFLOP/s (2 N O I / time). N = 16 goes to
 *      OpenBLAS (bf16 converted to f32 in panels) unless the backend is deterministic, so a
 *      deterministic row (the SIMD kernels) is printed for N = 16 as well.
 *
 *   meson test -C build --benchmark gemv     (or run build/tests/bench-gemv directly)
 *   bench-gemv --quick                       (smaller buffers and shapes, for a smoke run)
 *
 * Runs in well under a minute on 2 cores. CPU backend only: the weights live in host memory. */
#include "config.h"
#include "backend.h"
#include "base/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if HAVE_OPENMP
#include <omp.h>
#endif

static int quick;

static void *xalloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        fprintf(stderr, "bench-gemv: cannot allocate %.0f MiB\n", bytes / 1048576.0);
        exit(1);
    }
    return p;
}

static int ncpu(void)
{
#if HAVE_OPENMP
    return omp_get_num_procs();
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
#endif
}

/* last-level cache bytes (0 when unknown): buffers well past it measure DRAM, not cache */
static size_t llc_bytes(void)
{
    long v = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    v = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    if (v > 0) return (size_t)v;
    size_t best = 0;
    for (int idx = 0; idx < 8; idx++) {
        char path[96], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            unsigned long long n = strtoull(buf, &end, 10);
            if (*end == 'K') n <<= 10;
            else if (*end == 'M') n <<= 20;
            if (n > best) best = (size_t)n;
        }
        fclose(f);
    }
    return best;
}

/* ---------------------------------------------------------------- bandwidth */

static volatile uint64_t sink;

/* sum of n u64 words: 4 x 256-bit accumulators on AVX2 machines so that the loop is bound by
 * memory, not by the adds; portable C elsewhere */
typedef uint64_t v4u64 __attribute__((vector_size(32)));
#if HAVE_X86_SIMD
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n)
{
    v4u64 a = {0}, b = {0}, c = {0}, d = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v4u64 x0, x1, x2, x3;
        memcpy(&x0, p + i, 32);
        memcpy(&x1, p + i + 4, 32);
        memcpy(&x2, p + i + 8, 32);
        memcpy(&x3, p + i + 12, 32);
        a += x0;
        b += x1;
        c += x2;
        d += x3;
    }
    a += b + c + d;
    uint64_t s = a[0] + a[1] + a[2] + a[3];
    for (; i < n; i++) s += p[i];
    return s;
}
#endif

static uint64_t sum_words(const uint64_t *p, size_t n)
{
#if HAVE_X86_SIMD
    if (__builtin_cpu_supports("avx2")) return sum_avx2(p, n);
#endif
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    for (; i < n; i++) a += p[i];
    return a + b + c + d;
}

static double read_bw(const uint64_t *buf, size_t n, int threads)
{
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = db_now();
        uint64_t s = 0;
#if HAVE_OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : s)
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t chunk = (n / (size_t)nt + 7) & ~(size_t)7;
            size_t b = (size_t)id * chunk, e = b + chunk < n ? b + chunk : n;
            if (b < e) s += sum_words(buf + b, e - b);
        }
#else
        s = sum_words(buf, n);
#endif
        double t = db_now() - t0;
        sink += s;
        double gbs = (double)n * sizeof *buf / t / 1e9;
        if (gbs > best) best = gbs;
    }
    (void)threads;
    return best;
}

static double copy_bw(char *dst, const char *src, size_t bytes, int threads)
{
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = db_now();
#if HAVE_OPENMP
#pragma omp parallel num_threads(threads)
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t chunk = (bytes / (size_t)nt + 63) & ~(size_t)63;
            size_t b = (size_t)id * chunk, e = b + chunk < bytes ? b + chunk : bytes;
            if (b < e) memcpy(dst + b, src + b, e - b);
        }
#else
        memcpy(dst, src, bytes);
#endif
        double t = db_now() - t0;
        double gbs = 2.0 * (double)bytes / t / 1e9;
        if (gbs > best) best = gbs;
    }
    (void)threads;
    sink += (uint64_t)dst[bytes / 2];
    return best;
}

/* ---------------------------------------------------------------- GEMV */

static uint32_t lcg = 12345u;
static float frand(void)
{
    lcg = lcg * 1664525u + 1013904223u;
    return (float)(lcg >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

typedef struct {
    double ms;      /* best time per call */
    double gbs;     /* weight bytes / time */
    double gflops;  /* 2 N O I / time */
} result;

static result time_matmul(db_backend *be, const db_weight *w, int n)
{
    size_t I = (size_t)w->cols, O = (size_t)w->rows;
    float *x = xalloc(sizeof(float) * n * I), *y = xalloc(sizeof(float) * n * O);
    for (size_t i = 0; i < (size_t)n * I; i++) x[i] = frand();
    /* warm-up (pages, thread pools); a slow call counts as a measurement, so a pathological
     * path cannot stretch the run */
    double t0 = db_now();
    be->ops->matmul(be, y, x, w, n, 0);
    double tw = db_now() - t0, best = tw > 0.1 ? tw : 1e30, spent = 0;
    int reps = 0, min_reps = tw > 0.1 ? 1 : 3;
    while (reps < min_reps || (spent < (quick ? 0.05 : 0.25) && reps < 50)) {
        t0 = db_now();
        be->ops->matmul(be, y, x, w, n, 0);
        double t = db_now() - t0;
        spent += t;
        if (t < best) best = t;
        reps++;
    }
    sink += (uint64_t)(y[O / 2] != 0.0f);
    free(x);
    free(y);
    double wbytes = (double)O * I * db_dtype_size(w->dtype);
    return (result){best * 1e3, wbytes / best / 1e9, 2.0 * n * (double)O * I / best / 1e9};
}

static db_backend *make_backend(int threads, int deterministic)
{
    db_backend_opts o = {.threads = threads, .deterministic = deterministic};
    db_backend *be = NULL;
    char err[256];
    if (db_backend_create("cpu", &o, &be, err, sizeof err) != 0) {
        fprintf(stderr, "bench-gemv: %s\n", err);
        exit(1);
    }
    return be;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else {
            fprintf(stderr, "usage: bench-gemv [--quick]\n");
            return 2;
        }
    }
    double t_start = db_now();
    int all = ncpu();
    int tcounts[2] = {1, all};
    int ntc = all > 1 ? 2 : 1;

    /* 1. bandwidth */
    /* read >= 512 MiB and >= 4x the last-level cache; copy >= 256 MiB and >= 2x LLC; at most
     * an eighth of the RAM each */
    size_t llc = llc_bytes(), mib = (size_t)1 << 20;
    size_t rd_bytes = (quick ? 64 : 512) * mib, cp_bytes = (quick ? 32 : 256) * mib;
    if (!quick && 4 * llc > rd_bytes) rd_bytes = (4 * llc + mib - 1) / mib * mib;
    if (!quick && 2 * llc > cp_bytes) cp_bytes = (2 * llc + mib - 1) / mib * mib;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) {
        size_t cap = (size_t)pages * (size_t)psz / 8 / mib * mib;
        if (rd_bytes > cap && cap >= 64 * mib) rd_bytes = cap;
        if (cp_bytes > cap && cap >= 32 * mib) cp_bytes = cap;
    }
    double rbw[2], cbw[2];
    {
        uint64_t *buf = xalloc(rd_bytes);
        memset(buf, 1, rd_bytes); /* page in before timing */
        for (int t = 0; t < ntc; t++) rbw[t] = read_bw(buf, rd_bytes / sizeof *buf, tcounts[t]);
        free(buf);
        char *a = xalloc(cp_bytes), *b = xalloc(cp_bytes);
        memset(a, 2, cp_bytes);
        memset(b, 0, cp_bytes);
        for (int t = 0; t < ntc; t++) cbw[t] = copy_bw(b, a, cp_bytes, tcounts[t]);
        free(a);
        free(b);
    }

    db_backend *probe = make_backend(1, 0);
    printf("## GEMV vs memory bandwidth (CPU backend)\n\n");
    printf("CPU: %s; SIMD kernel %s; %d hardware threads; last-level cache %.0f MiB; OpenBLAS %s"
           "\n\n", probe->device_name, probe->simd, all, llc / 1048576.0, HAVE_OPENBLAS ? "yes" : "no");
    db_backend_destroy(probe);

    printf("| threads | read GB/s (sum, %zu MiB) | copy GB/s (memcpy %zu MiB, read+write) |\n",
           rd_bytes >> 20, cp_bytes >> 20);
    printf("|--:|--:|--:|\n");
    for (int t = 0; t < ntc; t++) printf("| %d | %.1f | %.1f |\n", tcounts[t], rbw[t], cbw[t]);
    printf("\n");

    /* 2. GEMV */
    static const struct {
        int O, I;
        const char *what;
    } shapes_full[] = {{4096, 4096, "square"}, {11008, 4096, "MLP up"}, {151936, 1024, "vocab head"}},
      shapes_quick[] = {{1024, 1024, "square"}, {2752, 1024, "MLP up"}, {37984, 256, "vocab head"}};
    const int nshapes = 3;
    static const db_dtype dts[2] = {DB_BF16, DB_F32};
    static const int Ns[3] = {1, 4, 16};

    printf("| dtype | O x I | weights MiB | threads | N | path | ms / call | weight GB/s | "
           "vs read BW | GFLOP/s |\n");
    printf("|---|---|--:|--:|--:|---|--:|--:|--:|--:|\n");
    for (int di = 0; di < 2; di++)
        for (int si = 0; si < nshapes; si++) {
            int O = quick ? shapes_quick[si].O : shapes_full[si].O;
            int I = quick ? shapes_quick[si].I : shapes_full[si].I;
            const char *what = quick ? shapes_quick[si].what : shapes_full[si].what;
            db_dtype dt = dts[di];
            size_t count = (size_t)O * I, bytes = count * db_dtype_size(dt);
            void *wd = xalloc(bytes);
            if (dt == DB_F32) {
                for (size_t i = 0; i < count; i++) ((float *)wd)[i] = frand() * 0.05f;
            } else {
                for (size_t i = 0; i < count; i++) ((uint16_t *)wd)[i] = db_f32_to_bf16(frand() * 0.05f);
            }
            db_weight w = {wd, dt, O, I};
            for (int t = 0; t < ntc; t++) {
                for (int det = 0; det <= 1; det++) {
                    db_backend *be = make_backend(tcounts[t], det);
                    for (int ni = 0; ni < 3; ni++) {
                        int n = Ns[ni];
                        int blas = HAVE_OPENBLAS && !det && n >= 16;
                        if (det && n < 16) continue; /* same SIMD path as the default backend */
                        result r = time_matmul(be, &w, n);
                        printf("| %s | %dx%d (%s) | %.0f%s | %d | %d | %s | %.3f | %.1f | %.0f%% | %.1f |\n",
                               db_dtype_name(dt), O, I, what, bytes / 1048576.0,
                               llc && bytes <= llc ? " *" : "", be->threads, n,
                               blas ? "OpenBLAS" : det ? "SIMD (deterministic)" : "SIMD",
                               r.ms, r.gbs, 100.0 * r.gbs / rbw[t], r.gflops);
                        fflush(stdout);
                    }
                    db_backend_destroy(be);
                }
            }
            free(wd);
        }
    printf("\nweight GB/s = O*I*sizeof(dtype) / time of one call (best of >= 2); \"vs read BW\" "
           "compares it with the read bandwidth at the same thread count; * = the weights fit in the "
           "last-level cache, so ratios above 100%% are cache, not DRAM. Total %.1f s.\n",
           db_now() - t_start);
    return (int)(sink & 0);
}
