/* cpu_attention.c — the CPU backend's attention op: out = softmax(q k^T * scale) v for N query
 * rows over the cached keys of their requests (backend.h).
 *
 * Notation: N query rows; nh query heads, nkv key/value heads, group = nh / nkv query heads per
 * kv head (GQA); hd head size; W = nkv * hd elements per cache row. Caches are [slots][cap][W],
 * f32 or f16 (kv_dtype: the same walk, the kernel pair of that dtype); row r reads positions
 * [key_lo, key_hi) of its slot. KB = positions per cache block.
 *
 * Why this order. One cache row holds every kv head side by side (W = 1024 floats = 4 KB for 8
 * heads of 128), so walking one head's keys jumps 4 KB per key: a new page each time, which the
 * hardware prefetchers do not follow (measured: 17 GB/s of K/V reads at 16 requests x 144
 * positions on a machine that copies at 41 GB/s). Here a task walks its requests' positions in
 * blocks of KB and, inside a block, every head it owns and every query row of its run: each
 * block is read from memory once, front to back, and reused from cache by the other heads and
 * rows. A run is up to `run_max` consecutive rows of one slot (a verify block, a prefill chunk),
 * so a long-context verify reads the cache once per run instead of once per query row.
 *
 * A task does three passes: the scores of every (row, head, key) of its run into scratch; the
 * softmax of each (row, head); the weighted sum of the value rows, block by block. Every
 * (row, head) result comes from exactly the operations a single-row call would do: the scores
 * kernel's value for a key does not depend on which keys share its call, the softmax is per
 * (row, head) in key order, and wsum adds the keys in increasing order into `out`, which holds
 * the accumulators between blocks (the kernels' contract, cpu_kernels.h). So the result is
 * bitwise the same whatever N, the runs, the head split or the thread count: the batch
 * invariance the lossless check needs.
 *
 * The kernels by run. A one-row run (a decode step): key by key, each cache row front to back
 * for all the task's heads, 16 query heads a sum tree, with the heads kernels on AVX-512, else
 * blocks of KB_UNPACKED positions, the next one prefetched. A verify or prefill run: blocks of KB
 * packed once and handed to the several-query kernels, which widen an f16 block to f32 once and
 * tile 4 queries x 4 keys (scores) or 4 queries x 64 elements (weighted sum) on AVX-512. The
 * softmax between the passes has an AVX-512 clone beside the baseline one, picked by CPU at
 * load. */
#include "config.h"
#include "alloc.h"
#include "cpu_attention.h"
#include "vec_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if HAVE_OPENMP
#include <omp.h>
#endif

#define KB 64                     /* positions per packed block: 32 KB of one f32 head of 128 */
#define KB_UNPACKED 4             /* ... when the block is not packed (see walk_blocks) */
#define RUN_ROWS 16               /* query rows of one slot that share a pass over its cache */
#define SCRATCH_BYTES (4u << 20)  /* score scratch per thread that bounds a run's rows */

typedef struct {
    int r0, r1;   /* query rows [r0, r1), one slot */
    int g0, g1;   /* kv heads [g0, g1) */
    int lo, hi;   /* union of the rows' key ranges */
} attn_task;

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* the kernel pair of the cache's dtype; k / v point at a cache element of that dtype */
static inline void scores_at(const db_attn_args *a, float *out, const float *q, const char *k,
                             size_t W, int nk)
{
    if (a->kv_dtype == DB_F16) a->scores16(out, q, (const uint16_t *)k, W, nk, a->hd, a->scale);
    else a->scores(out, q, (const float *)k, W, nk, a->hd, a->scale);
}

static inline void wsum_at(const db_attn_args *a, float *o, const float *p, const char *v,
                           size_t W, int nk)
{
    if (a->kv_dtype == DB_F16) a->wsum16(o, p, (const uint16_t *)v, W, nk, a->hd);
    else a->wsum(o, p, (const float *)v, W, nk, a->hd);
}

/* Passes 1 and 3 of a task: for each block of KB positions, each kv head, each row of the run
 * whose key range meets the block and each query head of the group, one scores call (pass 1,
 * K cache) or one wsum call (pass 3, V cache) over the positions the row sees in the block.
 *
 * Packing: when the block's slice of a head serves several calls (rows x group >= PACK_MIN), it
 * is first copied into `pk`, KB rows of hd elements back to back. In the cache those rows are
 * W elements apart (4 KB at 8 heads of 128 in f32), so a block's lines at one offset all fall in
 * one L1 set, more than its ways: every call re-read the block from L2 (measured at 8 rows of
 * one request, 192 keys: ~280 cycles per 16-key call, L2-bandwidth bound). The kernels take the
 * stride, and the values they read are the same, so results do not change. 64 keys a block, not
 * 16: a fourth of the kernel calls and of their fixed cost (q into registers, the sums of the
 * last 16 keys; measured, one request's verify, 2 threads: 8 rows x 192 keys 193 -> 157 us,
 * 16 rows x 1024 keys 1.58 -> 1.25 ms).
 *
 * Unpacked (a run of one row, or two at group 1), a block buys no reuse, and its size only sets
 * the order of the reads: inside a block a head's keys are W apart, so a block of KB keys keeps
 * that many pages in flight at once, more than the hardware prefetchers follow. With 4 keys the
 * walk is close to front to back (16 requests x 128 positions of f32 cache, one row each: K/V
 * read at ~30 GB/s with blocks of 16 keys, ~36 with blocks of 4, on a machine that reads at
 * ~48). */
#define PACK_MIN 4
#define MULTI_MAX 64 /* queries per several-query call */

/* one several-query call over a packed block of nk keys (pass 1: out[i] = scores of in[i];
 * pass 3: out[i] += the sum over the probabilities in[i]); *nq = 0 afterwards */
static void multi_call(const db_attn_args *a, int pass, float *const *out, const float *const *in,
                       int *nq, const char *blk, int nk)
{
    if (pass == 1) a->scores_multi(out, in, *nq, blk, a->kv_dtype, (size_t)a->hd, nk, a->hd, a->scale);
    else a->wsum_multi(out, in, *nq, blk, a->kv_dtype, (size_t)a->hd, nk, a->hd);
    *nq = 0;
}

/* Passes 1 and 3 of a one-row task (a decode step) where the kernel family has the heads
 * kernels: the row's keys in order, each key's cache row front to back for all the task's
 * heads, so the cache streams; the kv vectors are loaded once for their group's heads and 16
 * scores meet one sum tree. Against the block walk, 2 threads, us a layer, medians of
 * interleaved runs: 16 requests x 128 positions, f32 cache 487 -> 430, f16 374 -> 292; one
 * request x 4096 positions, f32 1455 -> 1069; 32 query heads over 8 kv heads, 16 x 128, 844 ->
 * 607. The values are those of the block walk: the kernels' contract. */
static void walk_heads(const db_attn_args *a, const attn_task *t, float *sc, size_t maxk,
                       int pass)
{
    const int group = a->nh / a->nkv, hd = a->hd;
    const size_t W = (size_t)a->nkv * hd, es = a->kv_dtype == DB_F16 ? 2 : 4;
    const int nhc = (t->g1 - t->g0) * group;
    const db_attn_row *row = &a->rows[t->r0];
    int nk = row->key_hi - row->key_lo;
    if (nk <= 0) return;
    const char *cache = pass == 1 ? a->kcache : a->vcache;
    const char *k = cache + (((size_t)row->slot * a->cap + (size_t)row->key_lo) * W +
                             (size_t)t->g0 * hd) * es;
    size_t first = ((size_t)t->r0 * a->nh + (size_t)t->g0 * group) * hd; /* head g0 * group */
    if (pass == 1) a->scores_heads(sc, maxk, a->q + first, nhc, group, k, a->kv_dtype, W, nk, hd, a->scale);
    else a->wsum_heads(a->out + first, sc, maxk, nhc, group, k, a->kv_dtype, W, nk, hd);
}

static void walk_blocks(const db_attn_args *a, const attn_task *t, float *sc, size_t maxk,
                        char *pk, int pass)
{
    if (t->r1 - t->r0 == 1 && a->scores_heads && a->wsum_heads) {
        walk_heads(a, t, sc, maxk, pass);
        return;
    }
    const int group = a->nh / a->nkv, hd = a->hd, nh = a->nh;
    const size_t W = (size_t)a->nkv * hd;
    const int nhc = (t->g1 - t->g0) * group, h0 = t->g0 * group;
    const int pack = (t->r1 - t->r0) * group >= PACK_MIN;
    /* rows that see the whole packed block go to the several-query kernels, when there are */
    const int multi = pack && a->scores_multi && a->wsum_multi;
    float *mo[MULTI_MAX];
    const float *mi[MULTI_MAX];
    const db_attn_row *rows = a->rows;
    const size_t es = a->kv_dtype == DB_F16 ? 2 : 4; /* bytes per cache element */
    const char *base = (const char *)(pass == 1 ? a->kcache : a->vcache) +
                       (size_t)rows[t->r0].slot * a->cap * W * es;
    const int kb = pack ? KB : KB_UNPACKED;
    for (int j0 = t->lo; j0 < t->hi; j0 += kb) {
        int j1 = imin(j0 + kb, t->hi);
        for (int g = t->g0; g < t->g1; g++) {
            /* unpacked, the next block's keys of this head, while this block is computed
             * (packed, the copy's own reads go faster without: one request's verify, 16 rows x
             * 1024 keys, 1.25 -> 1.08 ms; the prefetches of a 64-key block stalled on a full
             * miss queue) */
            const char *nb = base + ((size_t)(j0 + kb) * W + (size_t)g * hd) * es;
            for (int j = 0; j < (pack ? 0 : imin(kb, t->hi - j1)); j++)
                for (size_t b = 0; b < (size_t)hd * es; b += 64)
                    __builtin_prefetch(nb + (size_t)j * W * es + b, 0, 3);
            const char *blk = base + ((size_t)j0 * W + (size_t)g * hd) * es; /* key j0, head g */
            size_t stride = W;
            if (pack) {
                for (int j = 0; j < j1 - j0; j++)
                    memcpy(pk + (size_t)j * hd * es, blk + (size_t)j * W * es, (size_t)hd * es);
                blk = pk, stride = (size_t)hd;
            }
            int nq = 0; /* queries gathered for one several-query call over the whole block */
            for (int r = t->r0; r < t->r1; r++) {
                int ja = imax(j0, rows[r].key_lo), jb = imin(j1, rows[r].key_hi);
                if (ja >= jb) continue;
                const char *kv = blk + (size_t)(ja - j0) * stride * es;
                int whole = multi && ja == j0 && jb == j1;
                for (int h = g * group; h < (g + 1) * group; h++) {
                    float *s = sc + ((size_t)(r - t->r0) * nhc + (size_t)(h - h0)) * maxk +
                               (ja - rows[r].key_lo);
                    float *o = a->out + ((size_t)r * nh + h) * hd;
                    const float *q = a->q + ((size_t)r * nh + h) * hd;
                    if (whole) {
                        mo[nq] = pass == 1 ? s : o, mi[nq] = pass == 1 ? q : s;
                        if (++nq == MULTI_MAX) multi_call(a, pass, mo, mi, &nq, blk, j1 - j0);
                    } else if (pass == 1) {
                        scores_at(a, s, q, kv, stride, jb - ja);
                    } else {
                        wsum_at(a, o, s, kv, stride, jb - ja);
                    }
                }
            }
            if (nq) multi_call(a, pass, mo, mi, &nq, blk, j1 - j0);
        }
    }
}

/* Pass 2: the softmax of one (row, head)'s nk scores, in place. Vectorized: the max is exact in
 * any order; the sum's order (lanes, then their combination) depends on nk and on the CPU's
 * clone alone, so a row's result does not depend on the rows sharing the call.
 *
 * Two clones on x86-64 Linux, picked once by CPU at load (target_clones): AVX-512 and the
 * baseline. The backend's other code is built for the baseline, where these loops ran 4 lanes
 * wide and the pass cost a fifth of a long verify's attention (16 rows x 4096 keys, one layer,
 * 2 threads: 5.07 -> 4.14 ms with the AVX-512 clone). The exponentials are the same IEEE
 * operations in both (no contraction under -std=c11), bitwise; the sum takes 16 lanes instead of
 * 4, so on AVX-512 CPUs probabilities differ from the baseline's in the last bits, as the matmul
 * kernel families differ from each other. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "default")))
#endif
static void softmax_row(float *s, int nk)
{
    float mx = -INFINITY, sum = 0.0f;
#if HAVE_OPENMP
#pragma omp simd reduction(max : mx)
#endif
    for (int j = 0; j < nk; j++) mx = s[j] > mx ? s[j] : mx;
#if HAVE_OPENMP
#pragma omp simd reduction(+ : sum)
#endif
    for (int j = 0; j < nk; j++) {
        s[j] = db_exp_vec(s[j] - mx);
        sum += s[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < nk; j++) s[j] *= inv;
}

/* one task: rows [t->r0, t->r1) of a slot, the query heads of kv heads [g0, g1); sc holds
 * (rows x heads) score rows of `maxk` floats */
static void run_task(const db_attn_args *a, const attn_task *t, float *sc, size_t maxk, char *pk)
{
    const int group = a->nh / a->nkv, hd = a->hd, nh = a->nh;
    const int nhc = (t->g1 - t->g0) * group, h0 = t->g0 * group;
    const db_attn_row *rows = a->rows;

    walk_blocks(a, t, sc, maxk, pk, 1); /* 1. scores, block by block */
    /* 2. softmax per (row, head); the output starts at zero (wsum accumulates into it) */
    for (int r = t->r0; r < t->r1; r++) {
        int nk = rows[r].key_hi - rows[r].key_lo;
        for (int h = h0; h < h0 + nhc; h++) {
            memset(a->out + ((size_t)r * nh + h) * hd, 0, sizeof(float) * (size_t)hd);
            if (nk > 0) softmax_row(sc + ((size_t)(r - t->r0) * nhc + (size_t)(h - h0)) * maxk, nk);
        }
    }
    walk_blocks(a, t, sc, maxk, pk, 3); /* 3. o += p v, block by block, keys in increasing order */
}

/* the end of the run that starts at row r0: consecutive rows of its slot, at most run_max, the
 * slot's rows split evenly (16 rows at most 15 a run: 8 + 8, not 15 + 1, whose one-row run would
 * read the whole cache again for one row, unpacked) */
static int run_end(const db_attn_row *rows, int n, int r0, int run_max)
{
    int r1 = r0 + 1;
    while (r1 < n && rows[r1].slot == rows[r0].slot) r1++;
    int m = r1 - r0, k = (m + run_max - 1) / run_max;
    return r0 + (m + k - 1) / k;
}

static int count_runs(const db_attn_row *rows, int n, int run_max, int *longest)
{
    int nruns = 0;
    *longest = 0;
    for (int r0 = 0, r1; r0 < n; r0 = r1, nruns++) {
        r1 = run_end(rows, n, r0, run_max);
        *longest = imax(*longest, r1 - r0);
    }
    return nruns;
}

int db_cpu_attention(const db_attn_args *a, int nthreads, db_attn_scratch *s, size_t *need)
{
    const int n = a->n, nkv = a->nkv, nh = a->nh, group = nh / nkv;
    int maxk = 1;
    for (int r = 0; r < n; r++) maxk = imax(maxk, a->rows[r].key_hi - a->rows[r].key_lo);
    /* fewer runs than 2 per thread (one request's verify or prefill): split the kv heads too,
     * into 2 tasks per thread to balance them. Not when every run streams the cache (a decode
     * step: unpacked, or one row under the heads kernels): each task's slice of a cache row is
     * all it reads of it, and one task per thread reads the widest slices (one request, 1 row,
     * 4096 positions of f32 cache: 1.59 -> 1.30 ms, 2 threads). */
    int longest, nruns = count_runs(a->rows, n, RUN_ROWS, &longest), hc = 1;
    int streams = longest * group < PACK_MIN || (longest == 1 && a->scores_heads && a->wsum_heads);
    int per_thread = streams ? 1 : 2;
    if (nthreads > 1 && nruns < 2 * nthreads)
        hc = imin(nkv, (per_thread * nthreads + nruns - 1) / nruns);
    /* rows per run: as many as the scratch budget holds for a task's heads, at least one */
    int nhc_max = (nkv + hc - 1) / hc * group;
    size_t per_row = sizeof(float) * (size_t)nhc_max * (size_t)maxk;
    int run_max = per_row >= SCRATCH_BYTES ? 1 : imin(RUN_ROWS, (int)(SCRATCH_BYTES / per_row));
    if (run_max < RUN_ROWS) nruns = count_runs(a->rows, n, run_max, &longest);

    /* per thread: its score rows, then the packed block (KB x hd f32 at most) */
    size_t sc_floats = (size_t)run_max * (size_t)nhc_max * (size_t)maxk + (size_t)KB * (size_t)a->hd;
    size_t ntasks = (size_t)nruns * (size_t)hc;
    size_t score_bytes = sizeof(float) * sc_floats * (size_t)nthreads;
    *need = score_bytes + sizeof(attn_task) * ntasks;
    if (*need > s->cap) {
        void *p = db_realloc(s->buf, *need);
        if (!p) return -1;
        s->buf = p, s->cap = *need;
    }
    float *scratch = s->buf; /* floats first: the tasks that follow stay aligned */
    attn_task *tasks = (attn_task *)((char *)s->buf + score_bytes);
    int nt = 0;
    for (int r0 = 0, r1; r0 < n; r0 = r1) {
        r1 = run_end(a->rows, n, r0, run_max);
        int lo = 0, hi = 0; /* the union of the non-empty key ranges */
        for (int r = r0; r < r1; r++) {
            const db_attn_row *ar = &a->rows[r];
            if (ar->key_hi <= ar->key_lo) continue;
            if (hi <= lo) lo = ar->key_lo, hi = ar->key_hi;
            lo = imin(lo, ar->key_lo), hi = imax(hi, ar->key_hi);
        }
        for (int c = 0; c < hc; c++)
            tasks[nt++] = (attn_task){r0, r1, nkv * c / hc, nkv * (c + 1) / hc, lo, hi};
    }
#if HAVE_OPENMP
#pragma omp parallel num_threads(nthreads) if (nt > 1 && (size_t)n * nh * maxk * a->hd > 65536)
#endif
    {
#if HAVE_OPENMP
        float *sc = scratch + (size_t)omp_get_thread_num() * sc_floats;
#else
        float *sc = scratch;
#endif
        char *pk = (char *)(sc + (size_t)run_max * (size_t)nhc_max * (size_t)maxk);
#if HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int i = 0; i < nt; i++) run_task(a, &tasks[i], sc, (size_t)maxk, pk);
    }
    return 0;
}
