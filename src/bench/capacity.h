/* capacity.h — capacity planning: the memory a run needs before it allocates anything, and a
 * roofline model of one `ar` step and one DFlash cycle, from the config shapes alone.
 *
 * Memory (bytes, exactly what the loaders and the engine allocate on the backend):
 *   weights      every matrix in its storage dtype at db_dtype_weight_bytes per weight (a
 *                quantized type's block scales included), norm vectors and conv base kernels
 *                in f32; the drafter's convolutions and selector when its config is DFlash 2
 *                (at a quantized type its codebooks f16, as scripts/gguf/convert.py writes
 *                them). A GGUF whose matrices fall back to another type (rows not a multiple
 *                of 256 for the K types) differs by that.
 *   KV           target L x 2 x N x S x nkv*hd values of the KV dtype (f32: 4 bytes, f16: 2),
 *                drafter likewise (engine.c sizing: S = max_prompt + max_new_tokens + B + 1)
 *   activations  the target's and drafter's state for max(N*B, DB_PREFILL_CHUNK) rows (engine.h),
 *                the engine's context feature buffer, and (sampling) the engine's two host
 *                [N*B, V] distributions
 * A sweep runs one engine at a time, so it needs weights + the largest KV + activations of
 * its points.
 *
 * Roofline (per component: time = max(bytes / bandwidth, FLOPs / matmul rate at its rows)):
 *   ar step   target forward over N rows: every weight matrix and the head read once, the KV
 *             of the N requests read, N x V logits written and read back by top-k
 *   cycle     draft    drafter forward over N*B rows: its layers (+ conv projections), the
 *                      target head for N*(B-1) rows, the selector projection, its KV (window)
 *             select   selector pair scores: 2*k codebook rows of rank r per drafted row
 *             context  materialization of N*tau accepted rows: fc, every layer's k/v projection
 *             verify   target forward over N*B rows (KV of ctx + B positions, N*B logits)
 *   tok/s = N * tau / cycle time (ar: N / step time). Activation traffic is counted
 *   (2 x 4 bytes x (3H + 2*q + 2*kv + 3I) per row and layer); kernel launch, host work and
 *   imperfect overlap are not, which is what measured / predicted shows, unless a device preset
 *   (device_preset.h) gives them: a fixed cost a forward and one a sampled row at T > 0.
 * A whole request (db_roofline_request) is the prefill plus the steps summed over a context
 * growing from the prompt to prompt + n, each at its own context. */
#ifndef DB_CAPACITY_H
#define DB_CAPACITY_H

#include "backend.h"
#include "engine/variant.h"
#include "model/model_config.h"
#include "result/point.h"

#include <stddef.h>

/* one engine's shape: concurrency N, block B (1 = ar), prompt and generation lengths, the KV
 * caches' dtype (0 = DB_F32) */
typedef struct {
    int concurrency, block, max_prompt, max_new_tokens, sampling;
    db_dtype kv_dtype;
} db_engine_shape;

typedef struct {
    double weights, kv, act; /* bytes */
} db_mem_need;

/* bytes per weight of a matrix stored in dt, scales included (Q8_0: 34/32, Q4_K: 144/256) */
double db_dtype_weight_bytes(db_dtype dt);
/* weights the loaders keep on the device; d NULL: the target alone */
double db_weights_bytes(const db_model_config *t, const db_drafter_config *d, db_dtype dt);
/* KV caches and activations of one engine (d NULL or block 1: ar, no drafter state) */
void db_engine_bytes(const db_model_config *t, const db_drafter_config *d, const db_engine_shape *s,
                     double *kv, double *act);
/* DB_EINPUT "<what> needs X GiB (weights A, KV B, activations C), Y GiB available" when the
 * need exceeds avail; avail 0 (unknown) passes */
int db_mem_check(const db_mem_need *n, size_t avail, const char *what, char *err, size_t errlen);

/* the device: memory bandwidth and matmul rate, measured or given.
 *
 * Why a rate per row count: a matmul over R activation rows reuses each weight R times, and the
 * kernels reach their 512-row rate only from a few dozen rows on. A DFlash cycle is made of
 * 8- to 16-row forwards, so one 512-row figure predicted a verify at 0.6B, block 8, in half the
 * time it takes (measured 128 GFLOP/s at 8 rows against 281 at 512). The table is the backend's
 * own matmul at those row counts over one layer of the model's matrix shapes, weights streamed
 * from memory: a device figure like the bandwidth, measured once, never a forward; attention,
 * norms, the head, the KV and the cycle's host work stay the roofline's to predict. */
#define DB_HW_RATE_ROWS 9 /* rows 1, 2, 4, ..., 256 */
#define DB_HW_ATTN_ROWS 5 /* query rows of one request 1, 2, 4, 8, 16 */
#define DB_HW_EFF_MAX 12  /* rows of a preset's matmul efficiency table */
/* Attention and the small ops (measured with the rate table; 0 when not): a forward's
 * attention of R query rows per request runs at attn_rate (FLOP / s of q.k and p.v, the KV
 * cache read from memory inside the figure), and each of its elementwise ops (norms, RoPE,
 * SiLU, KV store) costs op_s of dispatch plus its activation bytes at the bandwidth. With them
 * the roofline sums the phases of a forward (matmuls; attention; small ops) instead of
 * hiding attention and the small ops under the weights' time. */
typedef struct {
    double bw;      /* bytes / s */
    double flops;   /* FLOP / s at 512 rows (the flat rate when given) */
    double rate[DB_HW_RATE_ROWS]; /* FLOP / s at 2^i rows; 0: not measured (flops throughout) */
    double attn_rate[DB_HW_ATTN_ROWS]; /* FLOP / s at 2^i query rows per request; 0: not measured */
    double op_s;    /* seconds of one small elementwise op (dispatch) */
    char bw_source[200], flops_source[200];
    /* a device preset (device_preset.h); n_eff 0 = none. The matmul rate at R rows is then
     * peak_flops x eff at R (log-linear between eff_rows, flat beyond the ends), and every
     * forward costs fwd_s more, every sampled row (T > 0) sample_s. */
    int n_eff;
    double eff_rows[DB_HW_EFF_MAX], eff[DB_HW_EFF_MAX]; /* [n_eff], rows ascending */
    double peak_flops, peak_bw, bw_eff;                 /* FLOP / s, bytes / s, fraction */
    double fwd_s, sample_s;                             /* seconds */
    char name[96], preset[512];                         /* the device; the preset's path */
} db_hw;
/* the matmul rate at `rows` rows: log-linear between the measured row counts, flops from 512 */
double db_hw_rate(const db_hw *hw, double rows);
/* the attention rate at `rows` query rows per request (log-linear; 16 and more: the 16 figure) */
double db_hw_attn_rate(const db_hw *hw, double rows);

/* bandwidth: a GEMV (1 row) over a `bytes`-sized weight of dtype dt (every byte read once; a
 * quantized dt measures bf16: the device's bandwidth, which the roofline divides the
 * quantized bytes by);
 * matmul rate: 512 rows x [4096, 4096] weights; rate[] (shape given): 1, 2, 4, ..., 256 rows
 * through one layer's seven matrices of the model's shapes (q, k, v, o, gate, up, down), copies
 * of the layer carved out of the big weight and a new copy per timed call, so the weights come
 * from memory as in a forward and the per-call cost of the model's matrix sizes is in the
 * figure; all through the backend's matmul, weights made with
 * fill_random. attn_rate[] (shape given): the backend's attention with the model's heads, 1 to
 * 16 query rows of one request over 256 cached keys (f32 cache), the caches of 16 layers in
 * turn so that they come from memory; op_s: a 1-row rmsnorm of the model's hidden size.
 * bytes 0 = 512 MiB (less when the device has little memory free). Every figure is the median
 * of its timed calls, dealt out over DB_PROBE_PASSES passes (device_probe.h: why). */
int db_hw_measure(db_backend *be, db_dtype dt, size_t bytes, const db_model_config *shape,
                  db_hw *hw, char *err, size_t errlen);
/* the device figures a roofline uses: measured (db_hw_measure) unless both are given (> 0); a
 * given figure replaces the measured one and its source says "given: --bandwidth-gbs X" */
int db_hw_figures(db_backend *be, db_dtype dt, double bw_gbs, double gflops,
                  const db_model_config *shape, db_hw *hw, char *err, size_t errlen);
typedef struct {
    double bytes, flops, t; /* traffic, arithmetic, roofline seconds */
    int compute_bound;
} db_cost;

/* one decoding step of N requests whose caches hold ctx positions */
typedef struct {
    int concurrency, block; /* block 1: an ar step */
    double ctx;
    double tau;             /* accepted + bonus per cycle: context rows materialized per request */
    int use_conv, use_sel;
    db_dtype kv_dtype;      /* the caches' dtype (0 = DB_F32): bytes of the KV traffic */
    int sampling;           /* T > 0: every row whose token is drawn costs hw->sample_s (ar: N
                             * rows; a cycle: N*B verify rows and N*(B-1) drafted rows) */
} db_step_shape;

typedef struct {
    db_cost draft, select, ctx, verify; /* verify = the whole step for ar */
    double t;                            /* sum of the components */
    double tok_s;                        /* N * tau / t (ar: N / t) */
} db_step_cost;

void db_roofline_step(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                      const db_hw *hw, const db_step_shape *s, db_step_cost *out);
/* K-flat: the target's verify forward of one request, `rows` rows after `depth` cached
 * positions, logits and their argmax for every row (the cycle's verify at N = 1, B = rows,
 * without the drafter's tap features: the same cost, db_roofline_step's verify.t at those
 * shapes), plus the preset's fixed cost of a forward. Its parts are what each piece would
 * take alone; they overlap or add as the roofline above says, so they do not sum to t:
 *   weights    the bytes other than the KV cache (weights, head, activations, logits) /
 *              the bandwidth
 *   matmul     the matmul and head FLOPs / the rate at their rows (db_hw_rate)
 *   attention  max(KV bytes / bandwidth, attention FLOPs / the attention rate, or the matmul
 *              rate when the device has none)
 *   fixed      the forward's fixed cost (hw->fwd_s) and its small ops' dispatch (op_s)
 * bound names the largest part ("weights", "matmul", "attention", "fixed"). */
typedef struct {
    double weights_s, matmul_s, attn_s, fixed_s;
} db_forward_parts;
typedef struct {
    db_cost c; /* bytes, FLOPs, seconds of the forward */
    db_forward_parts parts;
    const char *bound;
} db_verify_cost;
void db_roofline_verify(const db_model_config *t, db_dtype dt, const db_hw *hw, int rows, double depth,
                        db_dtype kv, db_verify_cost *out);

/* prefill of `reqs` prompts of `prompt` tokens each in target calls of up to `max_rows` rows
 * (plus the drafter's context materialization when d is given); kv: the caches' dtype */
db_cost db_roofline_prefill(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                            const db_hw *hw, int reqs, double prompt, int max_rows, db_dtype kv);

/* The whole decode of N requests from a context of ctx0 positions while each generates `gen`
 * more tokens in `steps` steps (cycles: gen / tau): the sum of db_roofline_step over the
 * steps, each at its own context ctx0 + j * gen / steps (j = 0 .. steps - 1), not one step at
 * the midpoint: summed in at most DB_REQUEST_SEGMENTS runs of steps, each at the mean context
 * of its steps (exact while a step's cost is linear in its context). Seconds. */
#define DB_REQUEST_SEGMENTS 1024
double db_roofline_decode(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                          const db_hw *hw, const db_step_shape *s, double ctx0, double gen, double steps);

/* One wave of N requests of `prompt` tokens generating n tokens each, as a serving benchmark
 * times it: the batched prefill (it commits the first token), then n - 1 tokens decoded in
 * (n - 1) / tau cycles (ar: steps) over a context growing from prompt + 1 to prompt + n
 * (db_roofline_decode). */
typedef struct {
    double prefill_s, decode_s, steps; /* seconds, seconds, decode steps / cycles */
    double tok_s;                      /* N * n / (prefill_s + decode_s) */
} db_request_cost;
void db_roofline_request(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                         const db_hw *hw, const db_step_shape *s, double prompt, double n,
                         db_request_cost *out);

/* The step of variant v (variant.h: its convolutions and selector): block 1 and tau 1 for `ar` */
db_step_shape db_variant_step(db_variant v, int concurrency, int block, double ctx, double tau,
                              db_dtype kv);

/* The cost model of a sweep point, one for `run --predict` (db_roofline_point: the point's own
 * cycles and tau) and `run --shard` (db_shard_point_cost, shard.h: tau assumed): seconds of one
 * wave, N of the point's requests of `prompt` tokens prefilled together (target calls of
 * max(N*B, DB_PREFILL_CHUNK) rows, engine.h), then `cycles` steps of the N while each
 * generates `gen` tokens, the context growing from prompt (db_roofline_decode), at acceptance
 * tau; sampled rows cost hw->sample_s when the point's temperature is > 0. d NULL, or an `ar`
 * point: the target alone. */
double db_roofline_wave(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                        const db_hw *hw, const db_point_key *k, int N, double prompt, double gen,
                        double tau, double cycles, db_dtype kv);

/* Predicted throughput of a measured sweep point, in the same terms as throughput_tok_s
 * (tokens / wall seconds of a repetition, prefill included): its requests run in waves of N,
 * each wave a batched prefill then the point's own mean number of cycles per request at its
 * own mean acceptance length, the context growing from the prompt over the output. d may be NULL
 * for ar. 0 when the point has no requests. */
double db_roofline_point(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                         const db_hw *hw, const db_point_raw *raw, db_dtype kv);

#endif
