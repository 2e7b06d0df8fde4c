/* backend.h — the compute interface between the pipeline and a device.
 *
 * A backend is a table of function pointers plus a context (ggml / calm style). The pipeline
 * (src/) only ever holds "device pointers": it may offset them (pointer arithmetic on float*)
 * but never dereferences them. Bytes cross between host and device only through upload /
 * download, and the results that come back per call are small: top-k ids and values, sampled
 * tokens. A GPU backend therefore keeps weights, KV caches and activations in device memory.
 *
 * Notation: N = activation rows in one call, D = row width, O x I = weight [out, in],
 * V = vocabulary, nh / nkv = query / key-value heads, hd = head dim, S = cache capacity
 * (positions per request slot).
 *
 * Index arrays (ids, positions, row maps, attention rows) are HOST arrays of N entries; the
 * backend copies them to the device if it needs to.
 *
 * Error convention: functions returning int give 0 on success, a negative value on failure with
 * a one-line message in the backend's error buffer (be->err). Compute ops are void:
 * a device fault is latched and reported by the next sync().
 */
#ifndef DB_BACKEND_H
#define DB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* Weight storage types. The first three are element types; the others are llama.cpp's
 * block-quantized types (quant.c has their layouts): a row of `cols` values is cols / block
 * blocks of block_bytes each, and cols must be a multiple of the block. */
typedef enum {
    DB_F32 = 0, DB_BF16 = 1, DB_F16 = 2,
    DB_Q8_0 = 3, DB_Q4_0 = 4, DB_Q4_K = 5, DB_Q5_K = 6, DB_Q6_K = 7,
    DB_Q4_1 = 8, DB_Q5_0 = 9, DB_Q5_1 = 10, DB_Q2_K = 11, DB_Q3_K = 12, DB_IQ4_NL = 13,
    DB_IQ4_XS = 14,
} db_dtype;
#define DB_NUM_DTYPES 15

/* bytes of one element (element types) or of one block (quantized types) */
size_t db_dtype_size(db_dtype t);
/* elements per block: 1, 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) or 256 (the K types, IQ4_XS) */
int db_dtype_block(db_dtype t);
int db_dtype_is_quant(db_dtype t);
/* bytes of n values (n a multiple of the block) */
size_t db_dtype_bytes(db_dtype t, size_t n);
const char *db_dtype_name(db_dtype t);

/* A matrix in device memory, row-major [rows, cols], any storage dtype. */
typedef struct {
    void *data;     /* device pointer */
    db_dtype dtype;
    int rows, cols;
} db_weight;

/* Which keys one query row sees: the keys [key_lo, key_hi) of KV cache slot `slot`.
 * Every mask of the pipeline is one range per row:
 *   causal at position p (window W):  [max(0, p-W+1), p+1)
 *   block row t of a block at P..P+B-1 (context + whole block, no causal mask inside the
 *   block; window W: |q-k| < W): [max(0, P+t-W+1), min(P+B, P+t+W)) */
typedef struct {
    int slot;
    int key_lo, key_hi;
} db_attn_row;

typedef struct {
    int threads;        /* CPU threads; 0 = all cores */
    int deterministic;  /* batch-invariant reductions: a row's result never depends on N */
    int device;         /* GPU ordinal */
    int pin_threads;    /* pin CPU threads to cores (hwloc) */
} db_backend_opts;

typedef struct db_backend db_backend;

typedef struct {
    const char *name;
    /* 0; -2 when the device asked for does not exist (no device, an ordinal past the count: the
     * caller's input, exit 2); -1 on any other failure. The message goes into be->err. */
    int (*init)(db_backend *be, const db_backend_opts *opts);
    void (*free)(db_backend *be);

    /* memory */
    void *(*alloc)(db_backend *be, size_t bytes);      /* zero-filled; NULL on failure */
    void (*dfree)(db_backend *be, void *p);
    int (*upload)(db_backend *be, void *dst, const void *src, size_t bytes);
    int (*download)(db_backend *be, void *dst, const void *src, size_t bytes);
    int (*sync)(db_backend *be);

    /* y[N,O] (+)= x[N,I] . W^T, W [O,I]; accumulate != 0 adds into y (fused residual). */
    void (*matmul)(db_backend *be, float *y, const float *x, const db_weight *w, int n,
                   int accumulate);
    /* y[N,D] = x * rsqrt(mean(x^2) + eps) * w[D]; y may alias x. */
    void (*rmsnorm)(db_backend *be, float *y, const float *x, const float *w, int n, int d,
                    float eps);
    /* neox RoPE in place on x[N, nheads, hd] at pos[N] (host). */
    void (*rope)(db_backend *be, float *x, const int *pos, int n, int nheads, int hd,
                 float theta);
    /* out[N, nh*hd] = softmax(q k^T * scale) v over the keys rows[r] names. Caches are
     * [slots][S][nkv*hd] f32. */
    void (*attention)(db_backend *be, float *out, const float *q, const float *kcache,
                      const float *vcache, int cap, const db_attn_row *rows, int n, int nh,
                      int nkv, int hd, float scale);
    /* out[i] = silu(gate[i]) * up[i], i < n */
    void (*swiglu)(db_backend *be, float *out, const float *gate, const float *up, size_t n);
    /* out[N, D] = table[ids[r]] converted to f32 */
    void (*embed)(db_backend *be, float *out, const db_weight *table, const int *ids, int n);
    /* y[i] += x[i] */
    void (*add)(db_backend *be, float *y, const float *x, size_t n);
    /* row dst_idx[r] of dst = row src_idx[r] of src, `width` floats each; rows are
     * dst_stride / src_stride floats apart; a NULL index map means r. */
    void (*copy_rows)(db_backend *be, float *dst, int dst_stride, const int *dst_idx,
                      const float *src, int src_stride, const int *src_idx, int n, int width);
    /* logits postprocess in place: x = mult*x, then softcap: tanh(x/cap)*cap when cap > 0 */
    void (*scale_softcap)(db_backend *be, float *x, size_t n, float mult, float cap);
    /* per row of logits[N, V]: the k largest (ties -> smaller id), sorted, into HOST arrays
     * ids[N*k], vals[N*k] (vals may be NULL). */
    int (*topk)(db_backend *be, int *ids, float *vals, const float *logits, int n, int v, int k);
    /* in place: logits[N, V] -> the sampling distribution: softmax(x / temperature) restricted
     * to the top_k largest (0 = all) and to the top_p nucleus (1 = all), renormalised. A row
     * holding a NaN, or whose largest logit is not finite (+Inf, or every entry -Inf), has no
     * distribution (NaN / Inf weights, an overflow): it becomes all zeros and is counted for
     * `nonfinite`. */
    void (*probs)(db_backend *be, float *x, int n, int v, float temperature, float top_p,
                  int top_k);
    /* The rows the probs calls since the last call found non-finite (above); the count restarts
     * at 0. A sampled point is garbage from such a row on: the engine asks after each probs call
     * and stops the point. A device backend counts on the device and copies the count to the
     * host with the results of every op that waits for its queue (topk, sample, accept,
     * download, sync): asked after one of those, it costs no synchronisation. 0 or more, or -1
     * with the message in be->err. */
    int (*nonfinite)(db_backend *be);

    /* DFlash 2 two-tap dynamic convolution (docs/checkpoints.md) over rows grouped in blocks
     * of B, one phase (0 = prepare, 1 = finish):
     * out_t[c] = sum_{o<K} (base[o][c] + delta_t[phase][o][c/gs]) * in_{t-o}[c], with
     * in_{t-o} = 0 before the block's first row. base [K, H] f32 (this phase's slice), delta
     * [rows, 2*K*G] (G = H/gs), out != in. */
    void (*dynconv)(db_backend *be, float *out, const float *in, const float *base,
                    const float *delta, int phase, int n_blocks, int block, int h, int k, int g);
    /* Selector pair scores into a HOST array out[N, k, k]:
     * out[t][i][j] = sum_r pred[prev[t*k+i], r] * g[t, r] * succ[cand[t*k+j], r].
     * g [N, r] device; prev / cand [N*k] host ids; pred / succ [V, r] codebooks. */
    int (*pair_scores)(db_backend *be, float *out, const float *g, const int *prev,
                       const int *cand, const db_weight *pred, const db_weight *succ, int n,
                       int k, int r);
    /* DSpark Markov correction (docs/checkpoints.md, "DSpark drafter"), in place on x [N, Vd]
     * (Vd = w2->rows): x[t][i] += scale * (sum_{j<R} w2[i, j] * w1[prev[t], j]), the sum taken
     * in order j = 0..R-1 in f32 from the stored values; prev [N] host ids (rows of w1),
     * w1 [V, R], w2 [Vd, R], element dtypes (f32, bf16, f16). */
    void (*markov_bias)(db_backend *be, float *x, const int *prev, const db_weight *w1,
                        const db_weight *w2, float scale, int n);

    /* Synthetic weights (capacity planning), generated in place on the device: dst[i], i < n,
     * stored in dtype dt, = db_fill_random_value(seed, offset + i, scale, mean) rounded to dt
     * (round to nearest even). Counter-based, so the result is the same on every backend, thread
     * count and chunking. Optional: NULL makes db_fill_random() generate host chunks and upload
     * them. */
    void (*fill_random)(db_backend *be, void *dst, size_t n, db_dtype dt, uint64_t seed,
                        uint64_t offset, float scale, float mean);
    /* Optional f16 K/V caches (--kv-dtype f16; NULL where a backend has none: the engine then
     * refuses that option naming the backend). kv_store_f16: row dst_idx[r] of dst (an f16
     * cache, rows `width` elements apart) = row r of src [N, width] f32, each value rounded to
     * f16 to nearest even (db_f32_to_f16). attention_f16: the attention contract above with
     * [slots][S][nkv*hd] f16 caches; the values are widened exactly, so the result is the f32
     * op's on the widened caches (the CPU backend: bitwise). */
    void (*kv_store_f16)(db_backend *be, uint16_t *dst, const int *dst_idx, const float *src,
                         int n, int width);
    void (*attention_f16)(db_backend *be, float *out, const float *q, const uint16_t *kcache,
                          const uint16_t *vcache, int cap, const db_attn_row *rows, int n, int nh,
                          int nkv, int hd, float scale);

    /* Optional sampling on the device (NULL: the engine downloads the [N, V] distributions and
     * draws on the host, with the same references). The uniforms u are drawn by the engine, per
     * request in the order the host path draws them, so both paths pick the same tokens.
     * sample: out[r] = db_sample_index_u(row r of probs [N, V] (device), V, u[r]); u, out HOST
     *   [N]. 0, or -1 with the message in be->err.
     * accept: nq requests of `block` rows each: accepted[j], bonus[j] = db_accept_sample_u(
     *   draft + j*block, p rows j*block.. (device [nq*block, V]: the target's distributions),
     *   q rows j*(block-1).., u + j*block). q: dense device rows [nq*(block-1), V] (q_ids NULL)
     *   or sparse: q_vals / q_ids HOST [nq*(block-1), q_k] (q NULL). draft, u,
     *   accepted, bonus HOST. The rows of p may be overwritten (the residual max(p - q, 0) is
     *   formed in place). 0, or -1 with the message in be->err. */
    int (*sample)(db_backend *be, int *out, const float *probs, int n, int v, const double *u);
    int (*accept)(db_backend *be, int *accepted, int *bonus, float *p, const float *q,
                  const float *q_vals, const int *q_ids, int q_k, const int *draft,
                  const double *u, int nq, int block, int v);
    /* Optional DFlash 2 selector: the pair scores (as pair_scores: g device [R1, r], prev /
     * cand HOST [R1*k]) and the walk over them in one call, so the scores stay on the device
     * (NULL: pair_scores to the host, the walk there). R1 = nq*steps rows, request-major;
     * request j's walk is db_select_walk_u over its rows of uvals (HOST [R1*k], U_t at the
     * candidates), of the scores, of cand and of u (HOST [R1]; unused at temperature 0). Out,
     * HOST: draft [R1] the picked ids; q [R1*k] the candidates' filtered distribution
     * (temperature > 0; NULL when greedy). k <= 64. 0, or -1 with the message in be->err. */
    int (*select_walk)(db_backend *be, int *draft, float *q, const float *g, const int *prev,
                       const int *cand, const db_weight *pred, const db_weight *succ,
                       const float *uvals, const double *u, int nq, int steps, int k, int r,
                       float temperature, float top_p, int top_k);

    /* Bytes the device can still allocate (CPU: MemAvailable of /proc/meminfo, capped by the
     * cgroup limit); 0 when unknown. Optional: NULL means unknown. */
    size_t (*mem_available)(db_backend *be);
} db_backend_ops;

struct db_backend {
    const db_backend_ops *ops;
    void *ctx;
    char device_name[128];
    char simd[32];            /* SIMD level used by the kernels (CPU) */
    int threads;
    int deterministic;
    int quant_weights;        /* matmul / embed take the quantized dtypes (CPU); others refuse */
    size_t bytes_in_use, bytes_peak;
    char err[256];
};

/* The backends this binary was built with, NULL-terminated: "cpu", then each GPU backend whose
 * module was built (cuda, hip). Only the CPU backend is linked in: a GPU backend is a shared
 * module (dflash-bench-NAME.so) that db_backend_load() opens on first use, so its runtime
 * (libcudart, libcublas: hundreds of MB) loads only in a command that asks for that backend.
 * The module is looked for in $DB_BACKEND_DIR when set, then beside the executable (the build
 * tree), then in the executable's ../lib/dflash-bench (the installed tree, DB_MODULEDIR_REL). */
extern const char *const db_backend_names[];

/* A module exports `const int db_backend_module_abi = DB_BACKEND_ABI`, checked before its ops
 * are used: a module of another build whose op table differs is refused rather than called.
 * The sizes catch an added member; bump the version when a member changes its meaning. */
#define DB_BACKEND_ABI_VERSION 1
#define DB_BACKEND_ABI                                                                             \
    ((DB_BACKEND_ABI_VERSION << 20) | ((int)sizeof(db_backend_ops) << 10) |                        \
     (int)sizeof(struct db_backend))
#define DB_BACKEND_ABI_SYMBOL "db_backend_module_abi"

/* The ops of backend `name`, its module opened on the first call (once per process; later
 * calls return the same table). NULL with a one-line message in err (err may be NULL) when no
 * backend of that name is built, or its module or the libraries it needs cannot be loaded. */
const db_backend_ops *db_backend_load(const char *name, char *err, size_t errlen);
/* db_backend_load without the message */
const db_backend_ops *db_backend_find(const char *name);
/* Create by name ("cpu", "cuda", "hip"). 0, or with the message in err: -2 when no backend of
 * that name is built, or its module cannot be loaded (a bad argument for this machine), -1 when
 * it failed to start (out of memory, a device fault: a runtime failure; no device: -2, see
 * init). */
int db_backend_create(const char *name, const db_backend_opts *opts, db_backend **out, char *err,
                      size_t errlen);
void db_backend_destroy(db_backend *be);

/* Device memory bandwidth through be->ops->copy_rows: two buffers of `bytes` (rows of 1 MiB),
 * copied once untimed and then `reps` times, bytes read + written over the time of each copy
 * closed by a sync; the best copy in bytes per second. 0 with be->err set when the buffers
 * cannot be allocated or the device fails. One definition for `bench` and bench-gpu-gemv. */
double db_backend_copy_bandwidth(db_backend *be, size_t bytes, int reps);
/* monotonic seconds, for the backends' own timing (they do not link src/base's db_now) */
double db_backend_seconds(void);

/* Upload a host matrix in its file dtype (no conversion: bf16 stays bf16 on the device). */
int db_weight_upload(db_backend *be, db_weight *w, const void *host, db_dtype dtype, int rows,
                     int cols);
/* Upload a host vector as f32 (norm weights and other small tensors), converting. */
float *db_upload_f32(db_backend *be, const void *host, db_dtype dtype, size_t n);
void db_weight_free(db_backend *be, db_weight *w);

/* Host reference of the probs op for one row of n scores, in place: softmax(x / temperature)
 * restricted to the top_k largest (0 = all; ties -> smaller index) and the top_p nucleus
 * (1 = all), renormalised. Backends and the engine share it so both sides filter alike.
 * 0; 1 when the row holds a NaN or its largest score is not finite (x is then all zeros: no
 * distribution, and no sort over NaNs); or -1 when the filter's sort buffer cannot be allocated
 * (x is then unfiltered). */
int db_probs_host(float *x, int n, float temperature, float top_p, int top_k);

/* Sampling references (sampling.c), shared by the engine's host path and the backends' ops.
 * db_sample_index_u: the index drawn from probs[0..n) (entries <= 0 never drawn; the row need
 * not be normalised) by the uniform u in [0, 1). The row is cut into chunks of DB_SAMPLE_CHUNK;
 * S_c = the sum of chunk c's positive entries in index order (double), P_c = S_0 + ... + S_{c-1}
 * in order, total = P_last + S_last; the pick is the first positive i with
 * u * total < P_c(i) + s_i, s_i = the running sum of i's chunk through i. None (rounding at the
 * top): the last positive entry; an all-zero row: 0. For n <= DB_SAMPLE_CHUNK it is the plain
 * running sum; the chunks let a device sum them in parallel and get the same bits. */
#define DB_SAMPLE_CHUNK 1024
int db_sample_index_u(const float *probs, int n, double u);
/* Lossless rejection sampling of one block (the Leviathan / Chen rule). draft[1..B-1] the
 * drafted tokens; p [B, V]: row t-1 the target's distribution for position t (row B-1 the one
 * after a full accept); q: row t-1 the distribution draft t was drawn from, dense [B-1, V]
 * (q_ids NULL) or sparse [B-1, q_k] values with distinct ids q_ids (zero elsewhere); u [B]
 * uniforms, used in order: u[t-1] tests draft t (accepted when u < p[d] / q[d]); at the first
 * rejection, position t, the bonus = db_sample_index_u(max(p - q, 0), or p when that is all
 * zero, u[t]); after a full accept bonus = db_sample_index_u(p row B-1, u[B-1]). res [V]
 * scratch. Returns a, the drafts accepted; min(a + 2, B) uniforms were used. */
int db_accept_sample_u(const int *draft, const float *p, const float *q, const int *q_ids,
                       int q_k, int block, int v, const double *u, float *res, int *bonus);
/* The DFlash 2 selector walk of one request over `steps` draft rows of k candidates:
 * S_s[c] = uvals[s*k + c] + pairs[s][i][c], i = the pick at s-1 (0, the anchor's row, at
 * s = 0); pairs [steps, k, k]. Temperature 0: the pick = argmax S_s, ties to the smaller
 * cand[s*k + c]; else db_probs_host(S_s, k, temperature, top_p, top_k), which goes to
 * q[s*k..] (q may be NULL), and the pick = db_sample_index_u(S_s, k, u[s]).
 * draft[s] = cand[s*k + pick]. scores [k] scratch. 0, or -1 when db_probs_host cannot
 * allocate (non-finite scores are no failure: their all-zero row picks candidate 0). */
int db_select_walk_u(const float *uvals, const float *pairs, const int *cand, int steps, int k,
                     float temperature, float top_p, int top_k, const double *u, float *scores,
                     float *q, int *draft);

/* The fill_random value of element k of stream `seed` (before the dtype conversion):
 *   z = seed + (k + 1) * 0x9E3779B97F4A7C15                    (mod 2^64; splitmix64's k-th state)
 *   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
 *   z = (z ^ (z >> 27)) * 0x94D049BB133111EB
 *   z =  z ^ (z >> 31)
 *   r = (float)((int32_t)(z >> 40) - 8388608) * 2^-23           (uniform on [-1, 1), exact)
 *   v = (float)((double)mean + (double)scale * (double)r)       (the product is exact in double,
 *                                                                so a fused multiply-add gives
 *                                                                the same value)
 * Mean `mean`, standard deviation scale / sqrt(3). A GPU kernel reproduces it bit for bit. */
static inline float db_fill_random_value(uint64_t seed, uint64_t k, float scale, float mean)
{
    uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    float r = (float)((int32_t)(z >> 40) - 8388608) * 0x1p-23f;
    return (float)((double)mean + (double)scale * (double)r);
}
/* fill_random on host memory (the reference; the CPU backend runs it in parallel chunks) */
void db_fill_random_host(void *dst, size_t n, db_dtype dt, uint64_t seed, uint64_t offset,
                         float scale, float mean);
/* fill_random through the backend's op, or host chunks uploaded one at a time when it has none
 * (never a host copy of the whole tensor). 0, or negative with the message in be->err. */
int db_fill_random(db_backend *be, void *dst, size_t n, db_dtype dt, uint64_t seed,
                   uint64_t offset, float scale, float mean);
/* the backend's mem_available op, 0 when it has none or does not know */
size_t db_mem_available(db_backend *be);

/* The host CPU, read once per process by the backend library (hwloc when built with it, else
 * /proc/cpuinfo and sysconf) and kept: the CPU backend's device name and thread pinning, the run
 * metadata and `info` all describe the machine from this one reading. */
#define DB_CPU_MAX_NUMA 256 /* NUMA nodes listed (numa_nodes counts them all) */
#define DB_CPU_MAX_CACHES 5 /* cache levels listed: L1d, L1i, L2, L3, L4 */
typedef struct {
    unsigned os_index;
    uint64_t memory_bytes; /* the node's local memory */
    int pus;               /* processing units in the node */
} db_cpu_numa_node;
typedef struct {
    const char *level;     /* "L1d", "L1i", "L2", "L3", "L4" */
    int count;             /* caches of that level in the machine */
    uint64_t bytes_each;
    unsigned line_bytes;
    int associativity;
} db_cpu_cache;
typedef struct {
    char model[128];
    int packages, cores, pus, numa_nodes;
    size_t l1d, l2, l3;    /* bytes, 0 when unknown */
    const char *source;    /* "hwloc" or "sysconf" */
    /* read through hwloc (source "hwloc"): every NUMA node (the first DB_CPU_MAX_NUMA) and the
     * cache levels the machine has, in the order above; both empty without hwloc */
    int n_numa, n_caches;
    db_cpu_numa_node numa[DB_CPU_MAX_NUMA];
    db_cpu_cache caches[DB_CPU_MAX_CACHES];
} db_cpu_info;
const db_cpu_info *db_host_cpu(void);

/* host conversions */
float db_bf16_to_f32(uint16_t h);
uint16_t db_f32_to_bf16(float f);
float db_f16_to_f32(uint16_t h);
uint16_t db_f32_to_f16(float f);
/* n values (a multiple of dtype's block) of any dtype to f32; src may be unaligned */
void db_convert_to_f32(float *dst, const void *src, db_dtype dtype, size_t n);
/* one block of a quantized dtype (db_dtype_size(t) bytes) -> db_dtype_block(t) floats (quant.c) */
void db_dequant_block(float *dst, const void *block, db_dtype t);

#endif
