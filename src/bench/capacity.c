/* capacity.c — memory need and roofline model (see capacity.h). */
#include "bench/capacity.h"
#include "engine/engine.h"
#include "engine/selector.h"
#include "model/drafter.h"
#include "model/kv_cache.h"
#include "model/target.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- memory ---- */

/* bytes per weight of a matrix in dt, block scales included: f32 4, bf16 / f16 2, Q8_0 34/32,
 * Q4_0 / IQ4_NL 18/32, Q4_1 20/32, Q5_0 22/32, Q5_1 24/32, Q2_K 84/256, Q3_K 110/256, Q4_K
 * 144/256, Q5_K 176/256, Q6_K 210/256, IQ4_XS 136/256 (backend.h: block bytes / block) */
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

/* a chain drafter (chain.h): fc's input width (EAGLE-3: the T taps; MTP: [emb ; hidden]) and the
 * weights its layer has beyond a plain one (EAGLE-3: q/k/v read 2H; MTP: none) */
static double chain_fc_in(const db_drafter_config *d)
{
    return d->kind == DB_DRAFTER_EAGLE3 ? (double)d->n_taps * d->target_hidden : 2.0 * d->base.hidden;
}
static double chain_extra(const db_drafter_config *d)
{
    const db_model_config *m = &d->base;
    return d->kind == DB_DRAFTER_EAGLE3 ? ((double)m->n_heads + 2.0 * m->n_kv_heads) * m->head_dim * m->hidden : 0;
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
    if (d && DB_KIND_IS_CHAIN(d->kind)) { /* fc, the layer (q/k/v over A), 3 norms, own head */
        const db_model_config *m = &d->base;
        double Hd = m->hidden;
        b += Hd * chain_fc_in(d) * es + layer_bytes(m, es) + chain_extra(d) * es + 3 * Hd * 4;
        if (d->kind == DB_DRAFTER_EAGLE3) b += (double)d->draft_vocab * Hd * es;
    } else if (d) {
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
    int NB = N * B, R = NB > DB_PREFILL_CHUNK ? NB : DB_PREFILL_CHUNK; /* engine.h */
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

/* ---- the device figures (measured in device_probe.c) ---- */

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

/* a preset's table: log-linear between its rows, flat beyond the ends */
static double preset_rate(const db_hw *hw, double rows)
{
    const double *r = hw->eff_rows, *e = hw->eff;
    int n = hw->n_eff;
    if (rows <= r[0]) return hw->peak_flops * e[0];
    for (int i = 0; i + 1 < n; i++)
        if (rows <= r[i + 1])
            return hw->peak_flops * e[i] * pow(e[i + 1] / e[i], log(rows / r[i]) / log(r[i + 1] / r[i]));
    return hw->peak_flops * e[n - 1];
}

double db_hw_rate(const db_hw *hw, double rows)
{
    if (hw->n_eff > 0) return preset_rate(hw, rows);
    if (hw->rate[0] <= 0) return hw->flops;
    return interp_pow2(hw->rate, DB_HW_RATE_ROWS, hw->flops, rows); /* 256 -> 512: to flops */
}

double db_hw_attn_rate(const db_hw *hw, double rows)
{
    if (hw->attn_rate[0] <= 0) return 0;
    return interp_pow2(hw->attn_rate, DB_HW_ATTN_ROWS, hw->attn_rate[DB_HW_ATTN_ROWS - 1], rows);
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
 * `logit_rows` rows go through the head (of vocab V, hidden Hh). parts (NULL: not wanted)
 * receives the time of each piece alone (db_forward_parts), added to what it holds. */
static db_cost stack_cost_parts(const db_model_config *c, double es, double kvs, const db_hw *hw,
                                double rows, double reqs, double kv_read, double keys, double logit_rows,
                                double V, double Hh, db_forward_parts *parts)
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
    if (parts) {
        double bw_t = hw->bw > 0 ? 1 / hw->bw : 0;
        parts->weights_s += (wbytes + hbytes + abytes) * bw_t;
        parts->matmul_s += rate_t(hw, mflops, rows) + rate_t(hw, hflops, logit_rows);
        parts->attn_s += fmax(kvbytes * bw_t, arate > 0 ? aflops / arate : rate_t(hw, aflops, rows));
        if (arate > 0) parts->fixed_s += L * OPS_PER_LAYER * hw->op_s;
    }
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

static db_cost stack_cost(const db_model_config *c, double es, double kvs, const db_hw *hw, double rows,
                          double reqs, double kv_read, double keys, double logit_rows, double V, double Hh)
{
    return stack_cost_parts(c, es, kvs, hw, rows, reqs, kv_read, keys, logit_rows, V, Hh, NULL);
}

/* elementwise passes over logits rows (`bytes` moved, `ops` backend calls): at the bandwidth,
 * plus their dispatch when the op cost is measured */
static db_cost vocab_pass(const db_hw *hw, double bytes, int ops)
{
    db_cost c = cost_t(hw, bytes, 0, 0);
    c.t += ops * hw->op_s;
    return c;
}

/* The target's verify forward: B rows of each of N requests after ctx cached positions, causal
 * over the context and its block (a row attends to ctx + (B + 1) / 2 keys on average), logits
 * for every row and their argmax (top-1) read back. The cycle's verify (db_roofline_step) and
 * the K-flat curve (db_roofline_verify) are this one cost. */
static db_cost verify_cost(const db_model_config *t, double es, double kvs, const db_hw *hw, double N,
                           double B, double ctx, db_forward_parts *parts)
{
    double V = t->vocab, H = t->hidden;
    db_cost c = stack_cost_parts(t, es, kvs, hw, N * B, N, N * ctx, ctx + (B + 1) / 2, N * B, V, H, parts);
    db_cost am = vocab_pass(hw, N * B * V * 4, 1); /* the argmax (top-1) of every row */
    if (parts) parts->weights_s += am.t - hw->op_s, parts->fixed_s += hw->op_s;
    add(&c, am);
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

/* Context rows of a chain drafter: fc over each row's input (EAGLE-3: its taps; MTP: the
 * concatenation) and the layer's K/V (over A), n rows. */
static db_cost chain_ctx(const db_drafter_config *d, double es, double kvs, const db_hw *hw, double n)
{
    const db_model_config *m = &d->base;
    double H = m->hidden, kvd = (double)m->n_kv_heads * m->head_dim, fi = chain_fc_in(d),
           A = d->kind == DB_DRAFTER_EAGLE3 ? 2 * H : H;
    db_cost c = cost(hw, (H * fi + 2 * kvd * A) * es + n * d->n_taps * (double)d->target_hidden * 4 + n * 2 * kvd * kvs,
                     2.0 * n * (H * fi + 2 * kvd * A), n);
    c.t += 6 * hw->op_s; /* embed, 2 norms, 2 concatenations, RoPE */
    return c;
}

/* A chain drafter's draft (eagle3, mtp): B-1 sequential steps of one row per request, each the
 * layer over a context growing by one, the extra weights of chain_extra (MTP: its fc), the head
 * over the Vd draft ids and the top-k read back (a wait for the host per step); step 1 of
 * EAGLE-3 runs fc over the tap features too. */
static db_cost chain_draft(const db_drafter_config *d, double es, double kvs, const db_hw *hw, double N, double B,
                           double ctx)
{
    const db_model_config *m = &d->base;
    double H = m->hidden, Vd = d->draft_vocab, extra = chain_extra(d) + (d->kind == DB_DRAFTER_MTP ? 2 * H * H : 0);
    db_cost c = {0};
    for (int st = 1; st < B; st++) {
        add(&c, stack_cost(m, es, kvs, hw, N, N, N * (ctx + st - 1), ctx + st, N, Vd, H));
        add(&c, cost(hw, extra * es, 2.0 * N * extra, N));
        add(&c, vocab_pass(hw, N * Vd * 4, 1));
        c.t += 6 * hw->op_s; /* embed, 2 norms, 2 concatenations, the fed-back copy */
    }
    if (d->kind == DB_DRAFTER_EAGLE3) {
        double F = (double)d->n_taps * d->target_hidden;
        add(&c, cost(hw, H * F * es + N * F * 4, 2.0 * N * H * F, N));
    }
    return c;
}

void db_roofline_step(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                      const db_hw *hw, const db_step_shape *s, db_step_cost *out)
{
    memset(out, 0, sizeof *out);
    double es = db_dtype_weight_bytes(dt), N = s->concurrency, B = s->block, V = t->vocab,
           H = t->hidden, ctx = s->ctx, kvs = (double)db_dtype_size(s->kv_dtype);
    double smp = s->sampling ? hw->sample_s : 0; /* seconds a sampled row */
    if (s->block <= 1 || !d) {
        out->verify = stack_cost(t, es, kvs, hw, N, N, N * ctx, ctx + 1, N, V, H);
        out->verify.t += hw->fwd_s + N * smp;
        out->t = out->verify.t;
        out->tok_s = out->t > 0 ? N / out->t : 0;
        return;
    }
    const db_model_config *m = &d->base;
    double Hd = m->hidden, Ld = m->n_layers, kvd = (double)m->n_kv_heads * m->head_dim;
    if (DB_KIND_IS_CHAIN(d->kind)) {
        out->draft = chain_draft(d, es, kvs, hw, N, B, ctx);
        out->ctx = chain_ctx(d, es, kvs, hw, N * (s->tau > 1 ? s->tau : 1));
        out->verify = verify_cost(t, es, kvs, hw, N, B, ctx, NULL);
        out->verify.bytes += N * B * d->n_taps * H * 4;
        /* the preset's fixed costs: the chain's B-1 steps once, as a serving stack runs them (one
         * captured graph of all the steps, SGLang's multi-step draft: host work and the wait once;
         * the steps' own small ops are in chain_draft), each step sampling its N rows at T > 0; the
         * verify as every variant's */
        out->draft.t += hw->fwd_s + N * (B - 1) * smp;
        out->verify.t += hw->fwd_s + N * B * smp;
        out->t = out->draft.t + out->ctx.t + out->verify.t;
        out->tok_s = out->t > 0 ? N * s->tau / out->t : 0;
        return;
    }
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
    out->verify = verify_cost(t, es, kvs, hw, N, B, ctx, NULL);
    out->verify.bytes += N * B * T * H * 4; /* tap features */
    /* a preset's fixed costs: one draft and one verify forward; every verify row's target
     * distribution and every drafted row's are sampled at T > 0 */
    out->draft.t += hw->fwd_s + N * (B - 1) * smp;
    out->verify.t += hw->fwd_s + N * B * smp;
    out->t = out->draft.t + out->select.t + out->ctx.t + out->verify.t;
    out->tok_s = out->t > 0 ? N * s->tau / out->t : 0;
}

void db_roofline_verify(const db_model_config *t, db_dtype dt, const db_hw *hw, int rows, double depth,
                        db_dtype kv, db_verify_cost *out)
{
    memset(out, 0, sizeof *out);
    db_forward_parts *p = &out->parts;
    out->c = verify_cost(t, db_dtype_weight_bytes(dt), (double)db_dtype_size(kv), hw, 1, rows, depth, p);
    out->c.t += hw->fwd_s;
    p->fixed_s += hw->fwd_s;
    /* the largest part names the bound; a tie goes to the first (weights, matmul, attention) */
    const double part[4] = {p->weights_s, p->matmul_s, p->attn_s, p->fixed_s};
    static const char *const name[4] = {"weights", "matmul", "attention", "fixed"};
    int k = 0;
    for (int i = 1; i < 4; i++)
        if (part[i] > part[k]) k = i;
    out->bound = name[k];
}

db_cost db_roofline_prefill(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                            const db_hw *hw, int reqs, double prompt, int max_rows, db_dtype kv)
{
    double es = db_dtype_weight_bytes(dt), rows = reqs * prompt;
    int chunks = (int)ceil(rows / (max_rows > 0 ? max_rows : DB_PREFILL_CHUNK));
    if (chunks < 1) chunks = 1;
    double per = rows / chunks;
    db_cost c = {0};
    for (int i = 0; i < chunks; i++) {
        /* a chunk's rows attend to about half a prompt; the head runs for the last rows */
        add(&c, stack_cost(t, es, (double)db_dtype_size(kv), hw, per, fmax(1.0, (double)reqs / chunks), per * prompt / 2, prompt / 2, (double)reqs / chunks,
                           t->vocab, t->hidden));
        c.t += hw->fwd_s;
        if (d && DB_KIND_IS_CHAIN(d->kind)) {
            add(&c, chain_ctx(d, es, (double)db_dtype_size(kv), hw, per));
        } else if (d) {
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
    double decode_cycles = cycles; /* the prefill is no cycle */
    double tau = decode_cycles > 0 ? cycle_tokens / decode_cycles : 1;
    double wave = db_roofline_wave(t, d, dt, hw, k, N, prompt, out, tau, decode_cycles, kv);
    return wave > 0 ? N * out / wave : 0;
}

db_step_shape db_variant_step(db_variant v, int concurrency, int block, double ctx, double tau,
                              db_dtype kv)
{
    int draft = db_variant_uses_drafter(v);
    return (db_step_shape){.concurrency = concurrency, .block = draft ? block : 1, .ctx = ctx,
                           .tau = draft ? tau : 1, .use_conv = draft && db_variant_uses_conv(v),
                           .use_sel = draft && db_variant_uses_selector(v), .kv_dtype = kv};
}

double db_roofline_decode(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                          const db_hw *hw, const db_step_shape *s, double ctx0, double gen, double steps)
{
    if (!(steps > 0)) return 0;
    int K = steps < DB_REQUEST_SEGMENTS ? (int)ceil(steps) : DB_REQUEST_SEGMENTS;
    double m = steps / K, per = gen / steps, total = 0; /* steps a segment, context a step */
    for (int k = 0; k < K; k++) {
        db_step_shape sh = *s;
        sh.ctx = ctx0 + per * (k * m + (m - 1) / 2); /* the mean context of the segment's steps */
        db_step_cost c;
        db_roofline_step(t, d, dt, hw, &sh, &c);
        total += m * c.t;
    }
    return total;
}

void db_roofline_request(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                         const db_hw *hw, const db_step_shape *s, double prompt, double n,
                         db_request_cost *out)
{
    memset(out, 0, sizeof *out);
    const db_drafter_config *dd = s->block > 1 ? d : NULL;
    int N = s->concurrency, NB = N * (dd ? s->block : 1);
    out->prefill_s = db_roofline_prefill(t, dd, dt, hw, N, prompt, NB > DB_PREFILL_CHUNK ? NB : DB_PREFILL_CHUNK,
                                         s->kv_dtype).t;
    if (s->sampling) out->prefill_s += N * hw->sample_s; /* the first token, drawn */
    double gen = n > 1 ? n - 1 : 0, tau = dd && s->tau > 1 ? s->tau : 1;
    out->steps = gen / tau;
    out->decode_s = db_roofline_decode(t, dd, dt, hw, s, prompt + 1, gen, out->steps);
    double T = out->prefill_s + out->decode_s;
    out->tok_s = T > 0 ? N * n / T : 0;
}

double db_roofline_wave(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                        const db_hw *hw, const db_point_key *k, int N, double prompt, double gen,
                        double tau, double cycles, db_dtype kv)
{
    db_variant v = db_variant_lookup(k->variant);
    const db_drafter_config *dd = d && db_variant_uses_drafter(v) ? d : NULL; /* else the target alone */
    db_step_shape s = db_variant_step(dd ? v : DB_VAR_AR, N, k->block_size, prompt, tau, kv);
    s.sampling = k->temperature > 0;
    int NB = N * s.block;
    db_cost pf = db_roofline_prefill(t, dd, dt, hw, N, prompt, NB > DB_PREFILL_CHUNK ? NB : DB_PREFILL_CHUNK, kv);
    /* N requests from admission to their last token, the context growing over the output */
    return pf.t + db_roofline_decode(t, dd, dt, hw, &s, prompt, gen, cycles);
}
