/* bench_attention.c — one layer's attention op alone at long context: the before/after figure
 * of a change to the CPU attention kernels, and a check that it left the values alone.
 *
 * A verify block of R query rows (row r attends to keys [0, D + r + 1), as a DFlash verify at
 * depth D) of the 124M model's attention shape (16 query heads over 8 kv heads of 128, f16 and
 * f32 caches), on the CPU backend. Rounds interleave the depths, so a drift of a shared machine
 * moves them alike; a point prints the median and best of its rounds, GFLOP/s (4 R nh hd keys
 * a call: scores and the weighted sum), and a hash of its output bits: two builds that print
 * the same hash computed bitwise the same attention, so a kernel change is checked for
 * bitwise equality on the shapes it is timed on.
 *
 *   bench-attention [--rows 16] [--depth 256,1024,4096] [--rounds 15] [--threads N]
 *   meson test -C build --benchmark attention
 *
 * Runs in about ten seconds on 2 cores at the defaults. */
#include "config.h"
#include "backend.h"
#include "base/parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NH = 16, NKV = 8, HD = 128, ROUNDS_MAX = 101 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* FNV-1a over the output's bits */
static uint32_t hash_bits(const float *x, size_t n)
{
    uint32_t h = 2166136261u;
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof *x; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

/* xorshift64*: the same caches and queries in every build */
static float uniform(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (float)((*s * 2685821657736338717ull) >> 40) / 16777216.0f * 2.0f - 1.0f;
}

int main(int argc, char **argv)
{
    const char *depth_s = "256,1024,4096";
    int rows = 16, rounds = 15, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--rows")) rows = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--depth")) depth_s = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "bench-attention: unknown argument '%s' (--rows N, --depth LIST, --rounds N, --threads N)\n", argv[i]);
            return 2;
        }
    }
    char err[256];
    int depth[DB_LIST_MAX], nd;
    if (db_parse_int_list("--depth", depth_s, 0, 1 << 20, depth, &nd, err, sizeof err)) {
        fprintf(stderr, "bench-attention: %s\n", err);
        return 2;
    }
    if (rows < 1 || rows > 4096 || rounds < 1 || rounds > ROUNDS_MAX || threads < 0) {
        fprintf(stderr, "bench-attention: --rows 1..4096, --rounds 1..%d, --threads >= 0\n", ROUNDS_MAX);
        return 2;
    }
    int dmax = 0;
    for (int d = 0; d < nd; d++) dmax = depth[d] > dmax ? depth[d] : dmax;
    db_backend *be;
    db_backend_opts o = {.threads = threads};
    if (db_backend_create("cpu", &o, &be, err, sizeof err) != 0) {
        fprintf(stderr, "bench-attention: %s\n", err);
        return 1;
    }
    const int cap = dmax + rows;
    const size_t cn = (size_t)cap * NKV * HD, qn = (size_t)rows * NH * HD;
    float *k32 = malloc(sizeof(float) * cn), *v32 = malloc(sizeof(float) * cn);
    uint16_t *k16 = malloc(sizeof(uint16_t) * cn), *v16 = malloc(sizeof(uint16_t) * cn);
    float *q = malloc(sizeof(float) * qn), *out = malloc(sizeof(float) * qn);
    db_attn_row *ar = malloc(sizeof *ar * (size_t)rows);
    double *t = malloc(sizeof(double) * (size_t)nd * 2 * (size_t)rounds);
    if (!k32 || !v32 || !k16 || !v16 || !q || !out || !ar || !t) {
        fprintf(stderr, "bench-attention: out of memory for %d positions\n", cap);
        return 1;
    }
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < cn; i++) {
        k16[i] = db_f32_to_f16(uniform(&seed)), v16[i] = db_f32_to_f16(uniform(&seed));
        k32[i] = uniform(&seed), v32[i] = uniform(&seed);
    }
    for (size_t i = 0; i < qn; i++) q[i] = uniform(&seed);
    const float scale = 0.08838835f; /* 1 / sqrt(128) */
    uint32_t hash[DB_LIST_MAX][2];
    /* point p = (depth d, dtype f): one call, synced; the first call of each point untimed */
    for (int round = -1; round < rounds; round++)
        for (int d = 0; d < nd; d++)
            for (int f = 0; f < 2; f++) {
                for (int r = 0; r < rows; r++) ar[r] = (db_attn_row){0, 0, depth[d] + r + 1};
                double t0 = db_backend_seconds();
                if (f) be->ops->attention_f16(be, out, q, k16, v16, cap, ar, rows, NH, NKV, HD, scale);
                else be->ops->attention(be, out, q, k32, v32, cap, ar, rows, NH, NKV, HD, scale);
                if (be->ops->sync(be)) {
                    fprintf(stderr, "bench-attention: %s\n", be->err);
                    return 1;
                }
                double dt = db_backend_seconds() - t0;
                if (round < 0) hash[d][f] = hash_bits(out, qn);
                else t[((size_t)d * 2 + f) * rounds + round] = dt;
            }
    printf("| kv | rows | depth | ms (median) | ms (best) | GFLOP/s | output hash |\n|---|--:|--:|--:|--:|--:|---|\n");
    for (int f = 0; f < 2; f++)
        for (int d = 0; d < nd; d++) {
            double *x = t + ((size_t)d * 2 + f) * rounds;
            qsort(x, (size_t)rounds, sizeof *x, cmp_double);
            double keys = (double)rows * depth[d] + (double)rows * (rows + 1) / 2;
            double med = x[rounds / 2];
            printf("| %s | %d | %d | %.3f | %.3f | %.1f | %08x |\n", f ? "f16" : "f32", rows, depth[d],
                   1e3 * med, 1e3 * x[0], 4.0 * NH * HD * keys / med / 1e9, (unsigned)hash[d][f]);
        }
    free(k32), free(v32), free(k16), free(v16), free(q), free(out), free(ar), free(t);
    db_backend_destroy(be);
    return 0;
}
