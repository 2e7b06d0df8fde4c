/* bench_gpu_gemv.c — bench-gpu-gemv: how close the GPU backend's matmul gets to the device's
 * memory bandwidth (the GPU counterpart of bench-gemv).
 *
 * Decoding is GEMV-bound: at small N every weight byte is read once per call, so the floor of a
 * matmul is weight bytes / bandwidth. One run:
 *   1. measures the device-to-device copy bandwidth (db_backend_copy_bandwidth: copy_rows over
 *      1 GiB in rows of 1 MiB, bytes read + written counted, best of 5);
 *   2. times be->ops->matmul for f32 and bf16 weights of a few shapes (4096x4096; 11008x4096, an
 *      MLP projection of a 7B model; 151936x1024, a Qwen vocabulary head) at N = 1, 2, 4, 8, 16,
 *      64 rows, deterministic (the row-dot kernel) and fast (cuBLAS from the backend's threshold,
 *      DB_GPU_BLAS_MIN_ROWS to move it; below it the row-dot kernel again). Each timed call
 *      uses the next of several weight copies that together exceed 4x a 60 MB L2, so the
 *      weights come from device memory, as they do in decoding;
 *   3. prints a markdown table: weight GB/s (weight bytes / time), its ratio to the copy
 *      bandwidth, GFLOP/s (2 N O I / time), and us per call.
 *
 *   meson test -C build --benchmark gpu-gemv     (or run build/tests/bench-gpu-gemv [--quick])
 *
 * Without a GPU backend or device it says so and exits 0. Timing: host clock around `reps`
 * launches closed by a sync, after warm-up calls (module load, cuBLAS handles). */
#include "config.h"
#include "backend.h"
#include "base/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int quick;

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else {
            fprintf(stderr, "usage: bench-gpu-gemv [--quick]\n");
            return 2;
        }
    }
    db_backend *be = NULL;
    char err[512] = "no GPU backend compiled into this binary (-Dcuda / -Dhip)";
    setenv("DB_BACKEND_DIR", DB_BUILD_DIR, 0); /* this build tree's modules, when run by hand */
    for (int i = 0; db_backend_names[i] && !be; i++) {
        if (strcmp(db_backend_names[i], "cpu") == 0) continue;
        db_backend_opts o = {.device = 0};
        if (db_backend_create(db_backend_names[i], &o, &be, err, sizeof err) != 0) be = NULL;
    }
    if (!be) {
        printf("bench-gpu-gemv: skipped: %s\n", err);
        return 0;
    }
    printf("# bench-gpu-gemv: %s backend, %s, %s\n\n", be->ops->name, be->device_name, be->simd);
    double bw = db_backend_copy_bandwidth(be, (size_t)(quick ? 256 : 1024) << 20, 5) / 1e9;
    if (bw <= 0) fprintf(stderr, "bench-gpu-gemv: copy bandwidth not measured: %s\n", be->err);
    printf("device copy bandwidth (read + write): %.0f GB/s\n\n", bw);

    static const struct {
        int O, I;
        const char *what;
    } shapes[] = {{4096, 4096, "4096x4096"}, {11008, 4096, "MLP 11008x4096"}, {151936, 1024, "vocab 151936x1024"}};
    static const int ns[] = {1, 2, 4, 8, 16, 64};
    static const db_dtype dts[] = {DB_BF16, DB_F32};
    db_rng rng;
    db_rng_seed(&rng, 7);
    printf("| weights | dtype | N | mode | us/call | weight GB/s | of copy bw | GFLOP/s |\n");
    printf("|---|---|---:|---|---:|---:|---:|---:|\n");
    int nshapes = quick ? 1 : 3;
    for (int si = 0; si < nshapes; si++) {
        for (int di = 0; di < 2; di++) {
            int O = shapes[si].O, I = shapes[si].I;
            db_dtype dt = dts[di];
            size_t wbytes = (size_t)O * I * db_dtype_size(dt);
            /* enough copies to stream >= 240 MB per round (4x the L2), at most 16 */
            int copies = (int)((240u << 20) / wbytes) + 1;
            if (copies > 16) copies = 16;
            if (quick) copies = copies > 2 ? 2 : copies;
            void *host = malloc(wbytes);
            if (!host) {
                fprintf(stderr, "bench-gpu-gemv: out of host memory\n");
                return 1;
            }
            for (size_t i = 0; i < (size_t)O * I; i++) {
                float v = (float)(db_rng_uniform(&rng) * 2.0 - 1.0) * 0.05f;
                if (dt == DB_F32) ((float *)host)[i] = v;
                else ((uint16_t *)host)[i] = db_f32_to_bf16(v);
            }
            db_weight *w = calloc((size_t)copies, sizeof *w);
            int ok = 1;
            for (int c = 0; c < copies && ok; c++) ok = db_weight_upload(be, &w[c], host, dt, O, I) == 0;
            free(host);
            int nmax = ns[sizeof ns / sizeof *ns - 1];
            float *x = be->ops->alloc(be, sizeof(float) * (size_t)nmax * I);
            float *y = be->ops->alloc(be, sizeof(float) * (size_t)nmax * O);
            if (!ok || !x || !y) {
                fprintf(stderr, "bench-gpu-gemv: %s %s: cannot allocate: %s\n", shapes[si].what, db_dtype_name(dt),
                        be->err);
                return 1;
            }
            float *xh = malloc(sizeof(float) * (size_t)nmax * I);
            for (size_t i = 0; i < (size_t)nmax * I; i++) xh[i] = (float)(db_rng_uniform(&rng) * 2.0 - 1.0);
            be->ops->upload(be, x, xh, sizeof(float) * (size_t)nmax * I);
            free(xh);
            for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
                int n = ns[ni];
                for (int det = 1; det >= 0; det--) {
                    be->deterministic = det;
                    for (int c = 0; c < copies; c++) be->ops->matmul(be, y, x, &w[c], n, 0); /* warm-up */
                    if (be->ops->sync(be) != 0) {
                        fprintf(stderr, "bench-gpu-gemv: %s\n", be->err);
                        return 1;
                    }
                    int reps = quick ? 2 * copies : (copies < 20 ? 20 : copies);
                    reps = (reps + copies - 1) / copies * copies;
                    double t0 = db_now();
                    for (int r = 0; r < reps; r++) be->ops->matmul(be, y, x, &w[r % copies], n, 0);
                    if (be->ops->sync(be) != 0) {
                        fprintf(stderr, "bench-gpu-gemv: %s\n", be->err);
                        return 1;
                    }
                    double t = (db_now() - t0) / reps;
                    double gbs = (double)wbytes / t / 1e9;
                    printf("| %s | %s | %d | %s | %.1f | %.0f | %.2f | %.0f |\n", shapes[si].what, db_dtype_name(dt), n,
                           det ? "deterministic" : "fast", t * 1e6, gbs, bw > 0 ? gbs / bw : 0.0,
                           2.0 * n * (double)O * I / t / 1e9);
                    fflush(stdout);
                }
            }
            for (int c = 0; c < copies; c++) db_weight_free(be, &w[c]);
            free(w);
            be->ops->dfree(be, x);
            be->ops->dfree(be, y);
        }
    }
    db_backend_destroy(be);
    return 0;
}
