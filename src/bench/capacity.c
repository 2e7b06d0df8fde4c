/* capacity.c — memory need and roofline model (see capacity.h). */
#include "bench/capacity.h"
#include "engine/selector.h"
#include "model/drafter.h"
#include "model/kv_cache.h"
#include "model/target.h"
#include "base/util.h"
#include "report/report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- memory ---- */

/* bytes per weight of a matrix in dt, block scales included: f32 4, bf16 / f16 2, Q8_0 34/32,
 * Q4_0 18/32, Q4_K 144/256, Q5_K 176/256, Q6_K 210/256 (backend.h: block bytes / block) */
double db_dtype_weight_bytes(db_dtype dt) { return (double)db_dtype_size(dt) / db_dtype_block(dt); }

/* the selector codebooks: f16 in a quantized checkpoint (scripts/gguf/convert.py keeps them
 * so), else the matrices' dtype */
static double codebook_bytes(db_dtype dt) { return db_dtype_is_quant(dt) ? 2.0 : db_dtype_weight_bytes(dt); }

/* one decoder layer: matrices in dt, norm vectors in f32 */
static double layer_bytes(const db_model_config *c, double es)
{
    double H = c->hidden, I = c->intermediate, q = (double)c->n_heads * c->head_dim,
           kv = (double)c->n_kv_heads * c->head_dim;
    double mats = q * H + 2 * kv * H + H * q + 3 * I * H;
    double vecs = 2 * H + (c->qk_norm ? 2.0 * c->head_dim : 0.0);
    return mats * es + vecs * 4;
}

static double layer_params(const db_model_config *c)
{
    double H = c->hidden, I = c->intermediate, q = (double)c->n_heads * c->head_dim,
           kv = (double)c->n_kv_heads * c->head_dim;
    return q * H + 2 * kv * H + H * q + 3 * I * H;
}

static int conv_groups(const db_drafter_config *d)
{
    return d->conv_group > 0 ? d->base.hidden / d->conv_group : 0;
}

double db_weights_bytes(const db_model_config *t, const db_drafter_config *d, db_dtype dt)
{
    double es = db_dtype_weight_bytes(dt), H = t->hidden, V = t->vocab;
    double b = V * H * es * (t->tied ? 1 : 2) + H * 4;
    b += t->n_layers * layer_bytes(t, es);
    if (d) {
        const db_model_config *m = &d->base;
        double Hd = m->hidden;
        b += Hd * d->n_taps * H * es + 2 * Hd * 4; /* fc, hidden_norm, norm */
        b += m->n_layers * layer_bytes(m, es);
        if (d->kind == DB_DRAFTER_V2) {
            double K = d->conv_kernel, G = conv_groups(d), r = d->selector_rank;
            b += m->n_layers * 2 * (2 * K * Hd * 4 + 2 * K * G * Hd * es);
            b += r * Hd * es + 2 * (double)m->vocab * r * codebook_bytes(dt);
        }
    }
    return b;
}

void db_engine_bytes(const db_model_config *t, const db_drafter_config *d, const db_engine_shape *s,
                     double *kv, double *act)
{
    int draft = d && s->block > 1, B = draft ? s->block : 1, N = s->concurrency;
    int NB = N * B, R = NB > 128 ? NB : 128; /* engine.c: prefill_chunk 128 */
    int cap = s->max_prompt + s->max_new_tokens + B + 1;
    *kv = (double)db_kv_bytes(t->n_layers, N, cap, t->n_kv_heads * t->head_dim, s->kv_dtype);
    *act = (double)db_target_state_bytes(t, R, draft ? d->n_taps : 0);
    if (draft) {
        const db_model_config *m = &d->base;
        db_drafter_opts o = {.slots = N, .capacity = cap, .max_ctx_rows = R, .max_requests = N,
                             .max_block = B, .kv_dtype = s->kv_dtype};
        *kv += (double)db_kv_bytes(m->n_layers, N, cap, m->n_kv_heads * m->head_dim, s->kv_dtype);
        *act += (double)db_drafter_state_bytes(d, &o);
        if (d->kind == DB_DRAFTER_V2) /* engine.c: the selector state, whatever the variant */
            *act += (double)db_selector_state_bytes(d, N * (B - 1));
        *act += (double)NB * d->n_taps * t->hidden * sizeof(float); /* engine ctx_feats */
    }
    if (s->sampling) *act += 2.0 * NB * (double)t->vocab * sizeof(float); /* host p, q rows */
}

int db_mem_check(const db_mem_need *n, size_t avail, const char *what, char *err, size_t errlen)
{
    double need = n->weights + n->kv + n->act;
    if (avail == 0 || need <= (double)avail) return DB_OK;
    return db_fail(err, errlen, DB_EINPUT,
                   "%s needs %.2f GiB (weights %.2f, KV %.2f, activations %.2f), %.2f GiB available",
                   what, need / DB_GIB, n->weights / DB_GIB, n->kv / DB_GIB, n->act / DB_GIB,
                   (double)avail / DB_GIB);
}

/* ---- measuring the device ---- */

/* The median seconds of one call of `call` (which is given the call's index) after an untimed
 * warm-up call: at least `min_calls` timed calls and `min_total` seconds of them, at most
 * `max_calls` (<= MAX_TIMED). The median, not the best: what the prediction is set against,
 * `run`'s step and cycle times, are medians of whole runs, and the best of up to 200 short calls
 * is the one that met no interference (on a 2-core VM the best 8-row layer call was 6% under
 * the median and the best 1-row GEMV 4%: a forward of 28 layers meets the median). */
typedef void (*timed_call)(db_backend *be, void *ctx, int it);

#define MAX_TIMED 200

static double median_seconds(db_backend *be, timed_call call, void *ctx, int min_calls,
                             int max_calls, double min_total)
{
    double t[MAX_TIMED], total = 0;
    int n = 0;
    if (max_calls > MAX_TIMED) max_calls = MAX_TIMED;
    call(be, ctx, 0);
    be->ops->sync(be);
    for (int it = 1; it <= max_calls && (it <= min_calls || total < min_total); it++) {
        double t0 = db_now();
        call(be, ctx, it);
        be->ops->sync(be);
        t[n] = db_now() - t0;
        total += t[n++];
    }
    return db_quantile(t, n, 0.5);
}

/* One layer's seven matrices of a model's shapes ([O, K]: q, k, v, o, gate, up, down), carved
 * `ncopy` times out of one weight buffer; the rate table times the seven matmuls of copy
 * it % ncopy per call, so the weights come from memory as in a forward. */
typedef struct {
    int O[7], K[7], ncopy;
    double params; /* of one copy */
    size_t bytes;  /* of one copy */
} layer_mats;

static void layer_mats_init(layer_mats *m, const db_model_config *c, db_dtype dt, size_t buf_bytes)
{
    int H = c->hidden, I = c->intermediate, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    const int O[7] = {q, kv, kv, H, I, I, H}, K[7] = {H, H, H, q, H, H, I};
    m->params = 0, m->bytes = 0;
    for (int i = 0; i < 7; i++) {
        m->O[i] = O[i], m->K[i] = K[i];
        m->params += (double)O[i] * K[i];
        m->bytes += (size_t)O[i] * db_dtype_bytes(dt, (size_t)K[i]);
    }
    m->ncopy = m->bytes ? (int)(buf_bytes / m->bytes) : 0;
}

/* the arguments of call_matmul and call_layer */
typedef struct {
    float *y;
    const float *x;
    const db_weight *w;  /* the matrix, or the buffer call_layer's copies are carved from */
    const layer_mats *m; /* call_layer's matrices (NULL for call_matmul) */
    int n;
} matmul_call;

static void call_matmul(db_backend *be, void *ctx, int it)
{
    const matmul_call *m = ctx;
    (void)it;
    be->ops->matmul(be, m->y, m->x, m->w, m->n, 0);
}

static double time_matmul(db_backend *be, float *y, const float *x, const db_weight *w, int n)
{
    matmul_call m = {y, x, w, NULL, n};
    return median_seconds(be, call_matmul, &m, 3, 50, 0.3);
}

/* the seven matmuls of copy it % ncopy */
static void call_layer(db_backend *be, void *ctx, int it)
{
    const matmul_call *l = ctx;
    const char *p = (const char *)l->w->data + (size_t)(it % l->m->ncopy) * l->m->bytes;
    for (int i = 0; i < 7; i++) {
        db_weight w = *l->w;
        w.rows = l->m->O[i], w.cols = l->m->K[i], w.data = (void *)p;
        be->ops->matmul(be, l->y, l->x, &w, l->n, 0);
        p += (size_t)l->m->O[i] * db_dtype_bytes(l->w->dtype, (size_t)l->m->K[i]);
    }
}

/* seconds of one layer's matmuls over n rows */
static double time_layer(db_backend *be, float *y, const float *x, const db_weight *buf,
                         const layer_mats *m, int n)
{
    matmul_call l = {y, x, buf, m, n};
    return median_seconds(be, call_layer, &l, 3, 50, 0.3);
}

/* log-linear interpolation of a table of t[i] at 2^i rows, i < n; `beyond` is the value at 2^n
 * rows and above */
static double interp_pow2(const double *t, int n, double beyond, double rows)
{
    if (rows <= 1) return t[0];
    double l = log2(rows);
    int i = (int)l;
    if (i >= n) return beyond;
    double hi = i + 1 < n ? t[i + 1] : beyond;
    return t[i] * pow(hi / t[i], l - i);
}

double db_hw_rate(const db_hw *hw, double rows)
{
    if (hw->rate[0] <= 0) return hw->flops;
    return interp_pow2(hw->rate, DB_HW_RATE_ROWS, hw->flops, rows); /* 256 -> 512: to flops */
}

double db_hw_attn_rate(const db_hw *hw, double rows)
{
    if (hw->attn_rate[0] <= 0) return 0;
    return interp_pow2(hw->attn_rate, DB_HW_ATTN_ROWS, hw->attn_rate[DB_HW_ATTN_ROWS - 1], rows);
}

typedef struct {
    float *out, *q, *kc, *vc; /* kc, vc: NL layers' caches of `per` floats each */
    size_t per;
    const db_attn_row *rows;
    int n, nl, cap, nh, nkv, hd;
} attn_call;

/* attention of n query rows over the caches of layer it % nl (so they come from memory) */
static void call_attention(db_backend *be, void *ctx, int it)
{
    const attn_call *a = ctx;
    size_t off = a->per * (size_t)(it % a->nl);
    be->ops->attention(be, a->out, a->q, a->kc + off, a->vc + off, a->cap, a->rows, a->n, a->nh, a->nkv,
                       a->hd, 0.088f);
}

typedef struct {
    float *x;
    int hidden;
} rmsnorm_call;

static void call_rmsnorm(db_backend *be, void *ctx, int it)
{
    const rmsnorm_call *r = ctx;
    (void)it;
    be->ops->rmsnorm(be, r->x, r->x, r->x + r->hidden, 1, r->hidden, 1e-6f);
}

/* attn_rate[] and op_s of a model's shape (capacity.h); scratch from the backend, freed */
static int measure_attention(db_backend *be, const db_model_config *c, db_hw *hw, char *err, size_t errlen)
{
    enum { CTX = 256, NL = 16, RMAX = 16 };
    int nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim, cap = CTX + RMAX;
    size_t kvw = (size_t)nkv * hd, qw = (size_t)nh * hd, per = (size_t)cap * kvw;
    float *kc = be->ops->alloc(be, sizeof(float) * per * NL), *vc = be->ops->alloc(be, sizeof(float) * per * NL);
    float *q = be->ops->alloc(be, sizeof(float) * qw * RMAX), *out = be->ops->alloc(be, sizeof(float) * qw * RMAX);
    float *x = be->ops->alloc(be, sizeof(float) * (size_t)c->hidden * 2);
    int rc = DB_OK;
    if (!kc || !vc || !q || !out || !x)
        rc = db_fail(err, errlen, DB_ERUNTIME, "cannot allocate %.0f MiB to measure attention",
                     2.0 * sizeof(float) * per * NL / DB_MIB);
    if (!rc && (db_fill_random(be, kc, per * NL, DB_F32, 4, 0, 1.0f, 0.0f) != 0 ||
                db_fill_random(be, vc, per * NL, DB_F32, 5, 0, 1.0f, 0.0f) != 0 ||
                db_fill_random(be, q, qw * RMAX, DB_F32, 6, 0, 1.0f, 0.0f) != 0 ||
                db_fill_random(be, x, (size_t)c->hidden * 2, DB_F32, 7, 0, 1.0f, 1.0f) != 0))
        rc = db_fail(err, errlen, DB_ERUNTIME, "measuring attention: %s", be->err);
    for (int i = 0; i < DB_HW_ATTN_ROWS && !rc; i++) {
        int n = 1 << i;
        db_attn_row rows[RMAX];
        for (int r = 0; r < n; r++) rows[r] = (db_attn_row){0, 0, CTX + r + 1}; /* causal block */
        double keys = CTX + (n + 1) / 2.0;
        attn_call a = {out, q, kc, vc, per, rows, n, NL, cap, nh, nkv, hd};
        hw->attn_rate[i] = 4.0 * n * nh * (double)hd * keys / median_seconds(be, call_attention, &a, 4, 200, 0.1);
    }
    if (!rc) {
        rmsnorm_call r = {x, c->hidden};
        hw->op_s = median_seconds(be, call_rmsnorm, &r, 4, 200, 0.1);
        if (be->ops->sync(be) != 0) rc = db_fail(err, errlen, DB_ERUNTIME, "measuring attention: %s", be->err);
    }
    if (!rc && !(hw->attn_rate[0] > 0 && hw->op_s > 0)) memset(hw->attn_rate, 0, sizeof hw->attn_rate), hw->op_s = 0;
    float *bufs[] = {kc, vc, q, out, x};
    for (int i = 0; i < 5; i++)
        if (bufs[i]) be->ops->dfree(be, bufs[i]);
    return rc;
}

int db_hw_measure(db_backend *be, db_dtype dt, size_t bytes, const db_model_config *shape,
                  db_hw *hw, char *err, size_t errlen)
{
    memset(hw, 0, sizeof *hw);
    if (db_dtype_is_quant(dt)) dt = DB_BF16; /* random weights are not made quantized */
    size_t avail = db_mem_available(be);
    if (bytes == 0) {
        bytes = (size_t)512 << 20;
        if (avail && bytes > avail / 8) bytes = avail / 8;
        if (bytes < ((size_t)16 << 20)) bytes = (size_t)16 << 20;
    }
    size_t es = db_dtype_size(dt);
    int I = 4096, O = (int)(bytes / es / (size_t)I), N = 512;
    if (O < 1) O = 1;
    layer_mats lm = {0};
    if (shape) layer_mats_init(&lm, shape, dt, (size_t)O * I * es);
    /* x and y hold [256, widest K] and [256, widest O] of the layer too */
    size_t nx = (size_t)N * I, ny_l = 0;
    for (int i = 0; lm.ncopy > 0 && i < 7; i++) {
        if ((size_t)256 * lm.K[i] > nx) nx = (size_t)256 * lm.K[i];
        if ((size_t)256 * lm.O[i] > ny_l) ny_l = (size_t)256 * lm.O[i];
    }
    db_weight w = {0}, m = {0};
    w.dtype = m.dtype = dt;
    w.rows = O;
    w.cols = m.rows = m.cols = I;
    w.data = be->ops->alloc(be, (size_t)O * I * es);
    m.data = be->ops->alloc(be, (size_t)I * I * es);
    float *x = be->ops->alloc(be, sizeof(float) * nx);
    size_t ny = (size_t)N * I > (size_t)O ? (size_t)N * I : (size_t)O; /* [N, I] or [1, O] */
    if (ny_l > ny) ny = ny_l;
    float *y = be->ops->alloc(be, sizeof(float) * ny);
    int rc = DB_OK;
    if (!w.data || !m.data || !x || !y)
        rc = db_fail(err, errlen, DB_ERUNTIME, "cannot allocate %.0f MiB to measure the device",
                     (double)((size_t)O * I * es) / DB_MIB);
    if (!rc && (db_fill_random(be, w.data, (size_t)O * I, dt, 1, 0, 0.03f, 0.0f) != 0 ||
                db_fill_random(be, m.data, (size_t)I * I, dt, 2, 0, 0.03f, 0.0f) != 0 ||
                db_fill_random(be, x, nx, DB_F32, 3, 0, 1.0f, 0.0f) != 0))
        rc = db_fail(err, errlen, DB_ERUNTIME, "measuring the device: %s", be->err);
    if (!rc) {
        double t = time_matmul(be, y, x, &w, 1);
        hw->bw = (double)O * I * es / t;
        snprintf(hw->bw_source, sizeof hw->bw_source,
                 "measured: GEMV, 1 row x [%d, %d] %s weights (%.0f MiB read once), median of several",
                 O, I, db_dtype_name(dt), (double)O * I * es / DB_MIB);
        t = time_matmul(be, y, x, &m, N);
        hw->flops = 2.0 * N * I * (double)I / t;
        if (lm.ncopy >= 2) /* else the layer does not fit twice: the flat rate */
            for (int i = 0; i < DB_HW_RATE_ROWS; i++)
                hw->rate[i] = 2.0 * (1 << i) * lm.params / time_layer(be, y, x, &w, &lm, 1 << i);
        snprintf(hw->flops_source, sizeof hw->flops_source,
                 "measured: matmul, %d rows x [%d, %d] %s weights, median of several", N, I, I,
                 db_dtype_name(dt));
        if (be->ops->sync(be) != 0) rc = db_fail(err, errlen, DB_ERUNTIME, "measuring the device: %s", be->err);
    }
    if (!rc && shape && lm.ncopy >= 2) rc = measure_attention(be, shape, hw, err, errlen);
    if (y) be->ops->dfree(be, y);
    if (x) be->ops->dfree(be, x);
    db_weight_free(be, &m);
    db_weight_free(be, &w);
    return rc;
}

int db_hw_figures(db_backend *be, db_dtype dt, double bw_gbs, double gflops,
                  const db_model_config *shape, db_hw *hw, char *err, size_t errlen)
{
    memset(hw, 0, sizeof *hw);
    int rc = bw_gbs > 0 && gflops > 0 ? DB_OK : db_hw_measure(be, dt, 0, shape, hw, err, errlen);
    if (rc) return rc;
    if (bw_gbs > 0 || gflops > 0) { /* this device's attention and op figures are not the given one's */
        memset(hw->attn_rate, 0, sizeof hw->attn_rate);
        hw->op_s = 0;
    }
    if (bw_gbs > 0) {
        hw->bw = bw_gbs * 1e9;
        snprintf(hw->bw_source, sizeof hw->bw_source, "given: --bandwidth-gbs %g", bw_gbs);
    }
    if (gflops > 0) {
        hw->flops = gflops * 1e9;
        memset(hw->rate, 0, sizeof hw->rate); /* a given rate holds at every row count */
        snprintf(hw->flops_source, sizeof hw->flops_source, "given: --gflops %g", gflops);
    }
    return DB_OK;
}

static void mean_into(double *a, double b)
{
    if (*a > 0 && b > 0) *a = 0.5 * (*a + b);
}

void db_hw_mean(db_hw *a, const db_hw *b)
{
    mean_into(&a->bw, b->bw);
    mean_into(&a->flops, b->flops);
    mean_into(&a->op_s, b->op_s);
    for (int i = 0; i < DB_HW_RATE_ROWS; i++) mean_into(&a->rate[i], b->rate[i]);
    for (int i = 0; i < DB_HW_ATTN_ROWS; i++) mean_into(&a->attn_rate[i], b->attn_rate[i]);
    char *src[] = {a->bw_source, a->flops_source};
    size_t cap[] = {sizeof a->bw_source, sizeof a->flops_source};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(src[i]);
        if (!strncmp(src[i], "measured", 8) && n + 30 < cap[i])
            snprintf(src[i] + n, cap[i] - n, "; before and after, mean");
    }
}

/* ---- roofline ---- */

/* flops_t: the seconds of arithmetic (flops / the rate at their rows, rate_t) */
static db_cost cost_t(const db_hw *hw, double bytes, double flops, double flops_t)
{
    db_cost c = {bytes, flops, 0, 0};
    double tb = hw->bw > 0 ? bytes / hw->bw : 0;
    c.t = tb > flops_t ? tb : flops_t;
    c.compute_bound = flops_t > tb;
    return c;
}

static double rate_t(const db_hw *hw, double flops, double rows)
{
    double r = db_hw_rate(hw, rows);
    return r > 0 ? flops / r : 0;
}

/* `flops` of matmuls over `rows` rows */
static db_cost cost(const db_hw *hw, double bytes, double flops, double rows)
{
    return cost_t(hw, bytes, flops, rate_t(hw, flops, rows));
}

static void add(db_cost *a, db_cost b)
{
    a->bytes += b.bytes;
    a->flops += b.flops;
    a->t += b.t;
    a->compute_bound = a->compute_bound || b.compute_bound;
}

/* activation traffic of one row through one layer */
static double act_row_layer(const db_model_config *c)
{
    double H = c->hidden, I = c->intermediate, q = (double)c->n_heads * c->head_dim,
           kv = (double)c->n_kv_heads * c->head_dim;
    return 2.0 * 4.0 * (3 * H + 2 * q + 2 * kv + 3 * I);
}

/* the small ops of a layer besides its matmuls and attention: 4 rmsnorms (input, q, k,
 * post-attention), 2 RoPE, SiLU * up, the K/V store */
#define OPS_PER_LAYER 8

/* A forward of a Qwen3 stack: `rows` rows of `reqs` requests; each layer reads `kv_read`
 * cached positions (summed over the requests) and each row attends to `keys` keys on average;
 * `logit_rows` rows go through the head (of vocab V, hidden Hh). */
static db_cost stack_cost(const db_model_config *c, double es, double kvs, const db_hw *hw,
                          double rows, double reqs, double kv_read, double keys, double logit_rows,
                          double V, double Hh)
{
    double L = c->n_layers, kvd = (double)c->n_kv_heads * c->head_dim;
    double wbytes = L * layer_params(c) * es + rows * c->hidden * es; /* weights once, embedding rows */
    double kvbytes = L * (kv_read + rows) * 2 * kvd * kvs;   /* KV read + the rows' K/V written */
    double abytes = L * rows * act_row_layer(c);
    double mflops = 2.0 * rows * L * layer_params(c);
    double aflops = 4.0 * L * rows * c->n_heads * (double)c->head_dim * keys; /* q.k and p.v */
    double hbytes = 0, hflops = 0;
    if (logit_rows > 0) {
        hbytes = V * Hh * es + logit_rows * V * 4 * 2;        /* head, logits written + read */
        hflops = 2.0 * logit_rows * V * Hh;
    }
    double arate = db_hw_attn_rate(hw, reqs > 0 ? rows / reqs : rows);
    if (arate <= 0) /* one roofline over the whole forward, attention at the matmul rate */
        return cost_t(hw, wbytes + kvbytes + abytes + hbytes, mflops + aflops + hflops,
                      rate_t(hw, mflops + aflops, rows) + rate_t(hw, hflops, logit_rows));
    /* the phases in turn: matmuls (and the head); attention; the small ops */
    db_cost m = cost_t(hw, wbytes + hbytes, mflops + hflops, rate_t(hw, mflops, rows) + rate_t(hw, hflops, logit_rows));
    int bound = m.compute_bound; /* the label is the matmuls': attention's rate holds its KV reads */
    add(&m, cost_t(hw, kvbytes, aflops, aflops / arate));
    add(&m, cost_t(hw, abytes, 0, 0));
    m.t += L * OPS_PER_LAYER * hw->op_s;
    m.compute_bound = bound;
    return m;
}

/* elementwise passes over logits rows (`bytes` moved, `ops` backend calls): at the bandwidth,
 * plus their dispatch when the op cost is measured */
static db_cost vocab_pass(const db_hw *hw, double bytes, int ops)
{
    db_cost c = cost_t(hw, bytes, 0, 0);
    c.t += ops * hw->op_s;
    return c;
}

static int max_window(const db_model_config *m)
{
    int w = 0;
    for (int i = 0; i < m->n_layers; i++) {
        if (m->window[i] == 0) return 0; /* a full-attention layer */
        if (m->window[i] > w) w = m->window[i];
    }
    return w;
}

void db_roofline_step(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                      const db_hw *hw, const db_step_shape *s, db_step_cost *out)
{
    memset(out, 0, sizeof *out);
    double es = db_dtype_weight_bytes(dt), N = s->concurrency, B = s->block, V = t->vocab,
           H = t->hidden, ctx = s->ctx, kvs = (double)db_dtype_size(s->kv_dtype);
    if (s->block <= 1 || !d) {
        out->verify = stack_cost(t, es, kvs, hw, N, N, N * ctx, ctx + 1, N, V, H);
        out->t = out->verify.t;
        out->tok_s = out->t > 0 ? N / out->t : 0;
        return;
    }
    const db_model_config *m = &d->base;
    double Hd = m->hidden, Ld = m->n_layers, kvd = (double)m->n_kv_heads * m->head_dim;
    /* draft: block rows see the context (window-limited) and the whole block */
    int W = max_window(m);
    double keys = ctx + B;
    if (W > 0 && keys > W) keys = W;
    out->draft = stack_cost(m, es, kvs, hw, N * B, N, N * keys, keys, N * (B - 1), V, Hd);
    /* the draft rows' logits: softcapped in place (read + write), then the top-k read */
    add(&out->draft, vocab_pass(hw, N * (B - 1) * V * 4 * (d->softcap > 0 ? 3 : 1), d->softcap > 0 ? 2 : 1));
    if (s->use_conv) {
        double G = conv_groups(d), K = d->conv_kernel;
        add(&out->draft, cost(hw, Ld * 2 * (2 * K * G * Hd * es + 2 * K * Hd * 4),
                              Ld * 2 * (2.0 * N * B * 2 * K * G * Hd + 2 * N * B * 2 * K * Hd), N * B));
    }
    if (s->use_sel) {
        double r = d->selector_rank, k = d->selector_top_k;
        add(&out->draft, cost(hw, r * Hd * es, 2.0 * N * (B - 1) * r * Hd, N * (B - 1)));
        out->select = cost(hw, N * (B - 1) * 2 * k * r * codebook_bytes(dt), N * (B - 1) * k * (2.0 * k * r + r),
                           N * (B - 1) * k);
    }
    /* context: N * tau accepted rows through fc and every layer's k / v projection */
    double n = N * (s->tau > 1 ? s->tau : 1), T = d->n_taps;
    out->ctx = cost(hw, Hd * T * H * es + Ld * 2 * kvd * Hd * es + n * T * H * 4 + n * Ld * 2 * kvd * kvs,
                    2.0 * n * (Hd * T * H + Ld * 2 * kvd * Hd), n);
    /* verify: B rows per request, causal over ctx + its block */
    out->verify = stack_cost(t, es, kvs, hw, N * B, N, N * ctx, ctx + (B + 1) / 2, N * B, V, H);
    add(&out->verify, vocab_pass(hw, N * B * V * 4, 1)); /* the argmax (top-1) of every row */
    out->verify.bytes += N * B * T * H * 4; /* tap features */
    out->t = out->draft.t + out->select.t + out->ctx.t + out->verify.t;
    out->tok_s = out->t > 0 ? N * s->tau / out->t : 0;
}

db_cost db_roofline_prefill(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                            const db_hw *hw, int reqs, double prompt, int max_rows, db_dtype kv)
{
    double es = db_dtype_weight_bytes(dt), rows = reqs * prompt;
    int chunks = (int)ceil(rows / (max_rows > 0 ? max_rows : 128));
    if (chunks < 1) chunks = 1;
    double per = rows / chunks;
    db_cost c = {0};
    for (int i = 0; i < chunks; i++) {
        /* a chunk's rows attend to about half a prompt; the head runs for the last rows */
        add(&c, stack_cost(t, es, (double)db_dtype_size(kv), hw, per, fmax(1.0, (double)reqs / chunks), per * prompt / 2, prompt / 2, (double)reqs / chunks,
                           t->vocab, t->hidden));
        if (d) {
            const db_model_config *m = &d->base;
            double Hd = m->hidden, Ld = m->n_layers, kvd = (double)m->n_kv_heads * m->head_dim,
                   T = d->n_taps, H = t->hidden;
            add(&c, cost(hw, Hd * T * H * es + Ld * 2 * kvd * Hd * es + per * T * H * 4 * 2,
                         2.0 * per * (Hd * T * H + Ld * 2 * kvd * Hd), per));
        }
    }
    return c;
}

double db_roofline_point(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                         const db_hw *hw, const db_point_raw *raw, db_dtype kv)
{
    const db_point_key *k = &raw->key;
    int n = raw->n_prompts * raw->repetitions;
    if (n < 1) return 0;
    double prompt = 0, out = 0, cycles = 0, cycle_tokens = 0;
    for (int i = 0; i < n; i++) {
        prompt += raw->reqs[i].prompt_tokens;
        out += raw->reqs[i].output_tokens;
        cycles += raw->reqs[i].cycles;
        cycle_tokens += raw->reqs[i].cycle_tokens;
    }
    prompt /= n;
    out /= n;
    cycles /= n;
    cycle_tokens /= n;
    int N = k->concurrency < raw->n_prompts ? k->concurrency : raw->n_prompts;
    if (N < 1 || out <= 0) return 0;
    int draft = strcmp(k->variant, "ar") != 0 && d;
    int B = draft ? k->block_size : 1;
    double decode_cycles = cycles; /* the prefill is no cycle */
    db_step_shape s = {.concurrency = N, .block = B, .ctx = prompt + out / 2,
                       .tau = decode_cycles > 0 ? cycle_tokens / decode_cycles : 1,
                       .use_conv = strcmp(k->variant, "selector-off") == 0 || strcmp(k->variant, "dflash2") == 0,
                       .use_sel = strcmp(k->variant, "conv-off") == 0 || strcmp(k->variant, "dflash2") == 0,
                       .kv_dtype = kv};
    db_step_cost sc;
    db_roofline_step(t, draft ? d : NULL, dt, hw, &s, &sc);
    int rows = N * B > 128 ? N * B : 128;
    db_cost pf = db_roofline_prefill(t, draft ? d : NULL, dt, hw, N, prompt, rows, kv);
    double wave = pf.t + decode_cycles * sc.t; /* N requests from admission to their last token */
    return wave > 0 ? N * out / wave : 0;
}
