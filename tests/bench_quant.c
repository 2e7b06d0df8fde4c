/* bench_quant.c — the CPU backend's matmuls on quantized weights against f16 weights, at the
 * row counts of a decode (1) and a verify (4 to 16), on the two paths quantized weights can take:
 * "float" (weights dequantized in registers, f32 FMAs: matmul_quant_*.c) and "int8" (activations
 * quantized to 8-bit blocks, integer dot products: matmul_q8_*.c, where the CPU has VNNI).
 *
 * Shapes are a 0.6B-class layer (hidden 1024, MLP 3072): q/o 1024x1024, gate/up 3072x1024,
 * down 1024x3072. Every (dtype, shape, N, path) is timed in each of ROUNDS rounds, the configs
 * interleaved within a round so a noisy neighbour hits them alike; a round's figure is the best
 * of a few calls, the table gives the median over rounds. GFLOP/s = 2 N O I / time; "x f16" is
 * the ratio to f16 weights at the same shape, N and threads.
 *
 *   meson test -C build --benchmark quant     (or build/tests/bench-quant [--quick] [--threads T])
 */
#include "config.h"
#include "backend.h"
#include "base/util.h"
#include "cpu/matmul_q8.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 5

static const struct {
    int O, I;
    const char *what;
} shapes[] = {{1024, 1024, "q/o"}, {3072, 1024, "gate/up"}, {1024, 3072, "down"}};
#define NSHAPE 3
static const db_dtype dts[] = {DB_F16, DB_Q8_0, DB_Q6_K, DB_Q5_K, DB_Q4_K, DB_Q4_0};
#define NDT 6
static const int Ns[] = {1, 4, 8, 16};
#define NN 4

static db_rng rng;

static double time_calls(db_backend *be, const db_weight *w, const float *x, float *y, int n, double budget)
{
    double best = 1e30, spent = 0;
    for (int reps = 0; reps < 3 || (spent < budget && reps < 200); reps++) {
        double t0 = db_now();
        be->ops->matmul(be, y, x, w, n, 0);
        double t = db_now() - t0;
        spent += t;
        if (t < best) best = t;
    }
    return best;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static db_backend *make(int threads, const char *q8)
{
    setenv("DB_CPU_Q8", q8, 1);
    db_backend_opts o = {.threads = threads};
    db_backend *be = NULL;
    char err[256];
    if (db_backend_create("cpu", &o, &be, err, sizeof err) != 0) {
        fprintf(stderr, "bench-quant: %s\n", err);
        exit(1);
    }
    return be;
}

int main(int argc, char **argv)
{
    int quick = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench-quant [--quick] [--threads T]\n");
            return 2;
        }
    }
    db_rng_seed(&rng, 7);
    /* paths[0]: float, paths[1]: int8, timed only where the CPU has an integer kernel */
    db_backend *paths[2] = {make(threads, "0"), make(threads, "1")};
    db_matmul_q8_kernel k;
    db_q8_quantize_fn qf;
    int has_int8 = db_matmul_q8_select(paths[1]->simd, &k, &qf) == 0;
    db_weight w[NDT][NSHAPE];
    void *host[NDT][NSHAPE];
    for (int d = 0; d < NDT; d++)
        for (int s = 0; s < NSHAPE; s++) {
            int O = shapes[s].O, I = shapes[s].I;
            if (dts[d] == DB_F16) {
                uint16_t *h = malloc(sizeof(uint16_t) * (size_t)O * I);
                for (size_t i = 0; i < (size_t)O * I; i++) h[i] = db_f32_to_f16((float)(db_rng_uniform(&rng) - 0.5) * 0.1f);
                host[d][s] = h;
            } else {
                host[d][s] = tu_rand_quant(&rng, dts[d], O, I);
            }
            w[d][s] = (db_weight){host[d][s], dts[d], O, I};
        }
    float *x = malloc(sizeof(float) * 16 * 3072), *y = malloc(sizeof(float) * 16 * 3072);
    for (int i = 0; i < 16 * 3072; i++) x[i] = (float)(db_rng_uniform(&rng) * 2 - 1);
    int rounds = quick ? 2 : ROUNDS;
    static double t[NDT][NSHAPE][NN][2][ROUNDS];
    double t_start = db_now();
    for (int r = 0; r < rounds; r++)
        for (int s = 0; s < NSHAPE; s++)
            for (int ni = 0; ni < NN; ni++)
                for (int d = 0; d < NDT; d++)
                    for (int p = 0; p < 2; p++) {
                        if (p == 1 && (dts[d] == DB_F16 || !has_int8)) continue;
                        t[d][s][ni][p][r] = time_calls(paths[p], &w[d][s], x, y, Ns[ni], quick ? 0.01 : 0.05);
                    }
    printf("## Quantized matmuls vs f16 (CPU backend, %d threads, SIMD %s, median of %d rounds)\n\n",
           paths[0]->threads, paths[0]->simd, rounds);
    printf("| dtype | O x I | N | path | us / call | GFLOP/s | weight GB/s | x f16 |\n|---|---|--:|---|--:|--:|--:|--:|\n");
    for (int s = 0; s < NSHAPE; s++)
        for (int ni = 0; ni < NN; ni++) {
            double f16 = 0;
            for (int d = 0; d < NDT; d++)
                for (int p = 0; p < 2; p++) {
                    if (p == 1 && (dts[d] == DB_F16 || !has_int8)) continue;
                    double v[ROUNDS];
                    memcpy(v, t[d][s][ni][p], sizeof(double) * (size_t)rounds);
                    qsort(v, (size_t)rounds, sizeof *v, cmp_double);
                    double med = v[rounds / 2], O = shapes[s].O, I = shapes[s].I, n = Ns[ni];
                    double gf = 2 * n * O * I / med / 1e9;
                    if (dts[d] == DB_F16) f16 = gf;
                    printf("| %s | %dx%d (%s) | %d | %s | %.1f | %.1f | %.1f | %.2f |\n", db_dtype_name(dts[d]),
                           shapes[s].O, shapes[s].I, shapes[s].what, Ns[ni],
                           dts[d] == DB_F16 ? "f16" : p ? "int8" : "float", med * 1e6, gf,
                           (double)db_dtype_bytes(dts[d], (size_t)O * I) / med / 1e9, gf / f16);
                }
        }
    printf("\nTotal %.1f s.\n", db_now() - t_start);
    for (int d = 0; d < NDT; d++)
        for (int s = 0; s < NSHAPE; s++) free(host[d][s]);
    free(x);
    free(y);
    db_backend_destroy(paths[0]);
    db_backend_destroy(paths[1]);
    return 0;
}
