/* chain.c — EAGLE-3 and MTP drafters: loading the public layouts, context materialization and
 * the draft step (see chain.h for the equations). Only backend ops, composed. */
#include "model/chain.h"
#include "model/drafter.h"
#include "base/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the name printf'd from fmt, or with a "model." prefix when only that one is in the set */
static const char *name_of(const db_tensor_set *st, char *buf, size_t n, const char *fmt, ...)
{
    char base[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(base, sizeof base, fmt, ap);
    va_end(ap);
    snprintf(buf, n, "%s", base);
    if (db_tensors_find(st, buf)) return buf;
    snprintf(buf, n, "model.%s", base);
    if (db_tensors_find(st, buf)) return buf;
    snprintf(buf, n, "%s", base);
    return buf;
}

static int present(const db_tensor_set *st, const char *fmt, const char *arg)
{
    char b[320];
    return db_tensors_find(st, name_of(st, b, sizeof b, fmt, arg)) != NULL;
}

/* one decoder layer whose q/k/v read width A (prefix: "midlayer.", "layers.0.", ...); the
 * input_layernorm only when attn_norm (MTP: the layer's own; EAGLE-3's is on the embedding) */
static int load_layer(db_layer *l, db_backend *be, const db_tensor_set *st, const db_model_config *c,
                      const char *p, int A, int attn_norm, char *err, size_t errlen)
{
    int H = c->hidden, I = c->intermediate, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim, rc;
    char b[320];
#define N(s) name_of(st, b, sizeof b, "%s%s", p, s)
    if ((attn_norm && (rc = db_load_vector(&l->attn_norm, be, st, N("input_layernorm.weight"), H, err, errlen))) ||
        (rc = db_load_matrix(&l->wq, be, st, N("self_attn.q_proj.weight"), qd, A, err, errlen)) ||
        (rc = db_load_matrix(&l->wk, be, st, N("self_attn.k_proj.weight"), kvd, A, err, errlen)) ||
        (rc = db_load_matrix(&l->wv, be, st, N("self_attn.v_proj.weight"), kvd, A, err, errlen)) ||
        (rc = db_load_matrix(&l->wo, be, st, N("self_attn.o_proj.weight"), H, qd, err, errlen)) ||
        (rc = db_load_vector(&l->mlp_norm, be, st, N("post_attention_layernorm.weight"), H, err, errlen)) ||
        (rc = db_load_matrix(&l->gate, be, st, N("mlp.gate_proj.weight"), I, H, err, errlen)) ||
        (rc = db_load_matrix(&l->up, be, st, N("mlp.up_proj.weight"), I, H, err, errlen)) ||
        (rc = db_load_matrix(&l->down, be, st, N("mlp.down_proj.weight"), H, I, err, errlen)))
        return rc;
    if (c->qk_norm &&
        ((rc = db_load_vector(&l->q_norm, be, st, N("self_attn.q_norm.weight"), c->head_dim, err, errlen)) ||
         (rc = db_load_vector(&l->k_norm, be, st, N("self_attn.k_norm.weight"), c->head_dim, err, errlen))))
        return rc;
#undef N
    return DB_OK;
}

static int load_eagle3(db_drafter *d, db_chain *c, char *err, size_t errlen)
{
    const db_drafter_config *cf = &d->cfg;
    const db_model_config *m = &cf->base;
    const db_tensor_set *st = &d->st;
    db_backend *be = d->be;
    int H = m->hidden, V = m->vocab, Vd = cf->draft_vocab, F = cf->n_taps * cf->target_hidden, rc;
    const char *p;
    if (present(st, "%smidlayer.hidden_norm.weight", "")) c->layout = DB_CHAIN_MIDLAYER, p = "midlayer.";
    else if (present(st, "%slayers.0.hidden_norm.weight", "")) c->layout = DB_CHAIN_LAYERS0, p = "layers.0.";
    else
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: missing tensor 'midlayer.hidden_norm.weight' (EAGLE / SpecForge) or "
                       "'layers.0.hidden_norm.weight' (speculators): not an EAGLE-3 checkpoint", st->dir);
    char b[320];
    if ((rc = db_load_matrix(&c->fc, be, st, name_of(st, b, sizeof b, "fc.weight"), H, F, err, errlen)) ||
        (rc = db_load_vector(&c->enorm, be, st, name_of(st, b, sizeof b, "%sinput_layernorm.weight", p), H, err, errlen)) ||
        (rc = db_load_vector(&c->hnorm, be, st, name_of(st, b, sizeof b, "%shidden_norm.weight", p), H, err, errlen)) ||
        (rc = load_layer(&c->layer, be, st, m, p, 2 * H, 0, err, errlen)) ||
        (rc = db_load_vector(&c->norm, be, st, name_of(st, b, sizeof b, "norm.weight"), H, err, errlen)))
        return rc;
    if (present(st, "%slm_head.weight", "") &&
        (rc = db_load_matrix(&c->head, be, st, name_of(st, b, sizeof b, "lm_head.weight"), Vd, H, err, errlen)))
        return rc;
    if (!c->head.data && (Vd < V || H != d->target->cfg.hidden))
        return db_fail(err, errlen, DB_EINPUT, "%s: missing tensor 'lm_head.weight' (the drafter's own head, needed "
                       "for a draft vocabulary of %d or a hidden size %d other than the target's)", st->dir, Vd, H);
    /* own embedding: loaded when it is there (a synthetic set only when the target's cannot serve) */
    if ((!st->synthetic || H != d->target->cfg.hidden) && present(st, "%sembed_tokens.weight", "") &&
        (rc = db_load_matrix(&c->embed, be, st, name_of(st, b, sizeof b, "embed_tokens.weight"), V, H, err, errlen)))
        return rc;
    if (!c->embed.data && H != d->target->cfg.hidden)
        return db_fail(err, errlen, DB_EINPUT, "%s: hidden_size %d differs from the target's %d (%s) and there is no "
                       "tensor 'embed_tokens.weight'", m->path, H, d->target->cfg.hidden, d->target->cfg.path);
    const db_tensor *t = st->synthetic ? NULL : db_tensors_find(st, name_of(st, b, sizeof b, "d2t"));
    if (t) return db_d2t_load(c->d2t, Vd, st, t, b, V, err, errlen);
    if (Vd < V && !st->synthetic)
        return db_fail(err, errlen, DB_EINPUT, "%s: draft_vocab_size %d below vocab_size %d needs tensor 'd2t'", st->dir,
                       Vd, V);
    return DB_OK;
}

static int load_mtp(db_drafter *d, db_chain *c, char *err, size_t errlen)
{
    const db_drafter_config *cf = &d->cfg;
    const db_model_config *m = &cf->base;
    const db_tensor_set *st = &d->st;
    db_backend *be = d->be;
    int H = m->hidden, V = m->vocab, L = cf->num_target_layers, rc;
    char p[64], b[320];
    const char *fe, *fh, *fc, *nm;
    if (present(st, "%smtp.fc.weight", "")) {
        c->layout = DB_CHAIN_MTP;
        snprintf(p, sizeof p, "mtp.layers.0.");
        fc = "mtp.fc.weight", fe = "mtp.pre_fc_norm_embedding.weight", fh = "mtp.pre_fc_norm_hidden.weight", nm = "mtp.norm.weight";
    } else {
        snprintf(p, sizeof p, "layers.%d.", L);
        if (!present(st, "%seh_proj.weight", p))
            return db_fail(err, errlen, DB_EINPUT, "%s: missing tensor 'mtp.fc.weight' (Qwen3-Next / Qwen3.5) or "
                           "'model.layers.%d.eh_proj.weight' (DeepSeek names): no MTP head", st->dir, L);
        c->layout = DB_CHAIN_DEEPSEEK;
        fc = "eh_proj.weight", fe = "enorm.weight", fh = "hnorm.weight", nm = "shared_head.norm.weight";
    }
    const char *pre = c->layout == DB_CHAIN_MTP ? "" : p;
    if ((rc = db_load_matrix(&c->fc, be, st, name_of(st, b, sizeof b, "%s%s", pre, fc), H, 2 * H, err, errlen)) ||
        (rc = db_load_vector(&c->enorm, be, st, name_of(st, b, sizeof b, "%s%s", pre, fe), H, err, errlen)) ||
        (rc = db_load_vector(&c->hnorm, be, st, name_of(st, b, sizeof b, "%s%s", pre, fh), H, err, errlen)) ||
        (rc = load_layer(&c->layer, be, st, m, p, H, 1, err, errlen)) ||
        (rc = db_load_vector(&c->norm, be, st, name_of(st, b, sizeof b, "%s%s", pre, nm), H, err, errlen)))
        return rc;
    if (c->layout == DB_CHAIN_DEEPSEEK && !st->synthetic && present(st, "%sshared_head.head.weight", p) &&
        (rc = db_load_matrix(&c->head, be, st, name_of(st, b, sizeof b, "%sshared_head.head.weight", p), V, H, err,
                             errlen)))
        return rc;
    c->post_norm = cf->mtp_feedback >= 0 ? cf->mtp_feedback : c->layout == DB_CHAIN_MTP;
    return DB_OK;
}

int db_chain_load(db_drafter *d, char *err, size_t errlen)
{
    db_chain *c = &d->chain;
    int Vd = d->cfg.draft_vocab;
    c->d2t = db_malloc(sizeof(int) * (size_t)Vd);
    if (!c->d2t) return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the draft-to-target map (%d ids)", Vd);
    for (int i = 0; i < Vd; i++) c->d2t[i] = i;
    if (d->cfg.target_hidden != d->target->cfg.hidden)
        return db_fail(err, errlen, DB_EINPUT, "%s: target_hidden_size %d does not match the target's hidden_size %d (%s)",
                       d->cfg.base.path, d->cfg.target_hidden, d->target->cfg.hidden, d->target->cfg.path);
    return d->cfg.kind == DB_DRAFTER_EAGLE3 ? load_eagle3(d, c, err, errlen) : load_mtp(d, c, err, errlen);
}

static void release(db_drafter *d)
{
    db_chain *c = &d->chain;
    if (c->scratch) d->be->ops->dfree(d->be, c->scratch);
    c->scratch = NULL;
    free(c->pend_pos);
    free(c->src);
    free(c->dst);
    c->pend_pos = c->src = c->dst = NULL;
}

void db_chain_free(db_drafter *d)
{
    db_chain *c = &d->chain;
    db_backend *be = d->be;
    release(d);
    db_layer_free(&c->layer, be);
    db_weight_free(be, &c->fc);
    db_weight_free(be, &c->head);
    db_weight_free(be, &c->embed);
    float *v[] = {c->enorm, c->hnorm, c->norm};
    for (int i = 0; i < 3; i++)
        if (v[i]) be->ops->dfree(be, v[i]);
    free(c->d2t);
    memset(c, 0, sizeof *c);
}

/* floats of each state view, in db_chain order from pend to all */
#define CHAIN_VIEWS 17
static void sizes(const db_drafter_config *cf, const db_drafter_opts *o, size_t s[CHAIN_VIEWS])
{
    const db_model_config *m = &cf->base;
    size_t R = (size_t)(o->max_ctx_rows > o->max_requests ? o->max_ctx_rows : o->max_requests);
    size_t H = (size_t)m->hidden, qd = (size_t)m->n_heads * m->head_dim, kvd = (size_t)m->n_kv_heads * m->head_dim,
           I = (size_t)m->intermediate, F = (size_t)cf->n_taps * (cf->target_hidden > 0 ? cf->target_hidden : m->hidden),
           Vd = (size_t)(cf->draft_vocab > 0 ? cf->draft_vocab : m->vocab),
           R1 = (size_t)o->max_requests * (o->max_block > 1 ? o->max_block - 1 : 1);
    size_t v[CHAIN_VIEWS] = {(size_t)o->slots * F, R * F, R * H, R * H, R * H, R * 2 * H, R * H, R * H, R * qd,
                             R * kvd, R * kvd, R * qd, R * I, R * I, R * H, R * Vd, R1 * Vd};
    memcpy(s, v, sizeof v);
}

size_t db_chain_state_bytes(const db_drafter_config *cf, const db_drafter_opts *o)
{
    size_t s[CHAIN_VIEWS], t = 0;
    sizes(cf, o, s);
    for (int i = 0; i < CHAIN_VIEWS; i++) t += s[i];
    return t * sizeof(float);
}

int db_chain_alloc(db_drafter *d, const db_drafter_opts *o, char *err, size_t errlen)
{
    db_chain *c = &d->chain;
    release(d);
    size_t s[CHAIN_VIEWS];
    sizes(&d->cfg, o, s);
    size_t total = db_chain_state_bytes(&d->cfg, o);
    c->scratch = d->be->ops->alloc(d->be, total);
    if (!c->scratch)
        return db_fail(err, errlen, DB_ERUNTIME, "cannot allocate %.1f MiB of drafter activations", (double)total / 1048576.0);
    float **views[CHAIN_VIEWS] = {&c->pend, &c->feat, &c->g, &c->e, &c->n, &c->a, &c->x, &c->xn, &c->q,
                                  &c->k, &c->v, &c->att, &c->gate, &c->up, &c->y, &c->logits, &c->all};
    float *p = c->scratch;
    for (int i = 0; i < CHAIN_VIEWS; i++) {
        *views[i] = p;
        p += s[i];
    }
    int R = o->max_ctx_rows > o->max_requests ? o->max_ctx_rows : o->max_requests;
    c->pend_pos = db_malloc(sizeof(int) * (size_t)o->slots);
    c->src = db_calloc((size_t)R, sizeof(int));
    c->dst = db_calloc((size_t)R, sizeof(int));
    if (!c->pend_pos || !c->src || !c->dst)
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the drafter's row maps (%d rows)", R);
    for (int i = 0; i < o->slots; i++) c->pend_pos[i] = -1;
    d->s.logits = c->all; /* db_drafter_logits: the rows of the last draft (the engine's q) */
    return DB_OK;
}

/* g [m, H] of step 1 from the gathered tap features feat [m, F] */
static void first_hidden(db_drafter *d, int m)
{
    db_chain *c = &d->chain;
    const db_backend_ops *o = d->be->ops;
    if (d->cfg.kind == DB_DRAFTER_EAGLE3) o->matmul(d->be, c->g, c->feat, &c->fc, m, 0);
    else o->rmsnorm(d->be, c->g, c->feat, d->target->norm, m, d->target->cfg.hidden, d->target->cfg.eps);
}

/* the attention input of m rows (tokens d->ids, hidden c->g); c->x = the layer's residual */
static const float *prepare(db_drafter *d, int m)
{
    db_chain *c = &d->chain;
    db_backend *be = d->be;
    const db_backend_ops *o = be->ops;
    const db_model_config *mc = &d->cfg.base;
    int H = mc->hidden;
    o->embed(be, c->e, c->embed.data ? &c->embed : &d->target->embed, d->ids, m);
    o->rmsnorm(be, c->e, c->e, c->enorm, m, H, mc->eps);
    o->rmsnorm(be, c->n, c->g, c->hnorm, m, H, mc->eps);
    o->copy_rows(be, c->a, 2 * H, NULL, c->e, H, NULL, m, H);
    o->copy_rows(be, c->a + H, 2 * H, NULL, c->n, H, NULL, m, H);
    if (d->cfg.kind == DB_DRAFTER_EAGLE3) {
        o->copy_rows(be, c->x, H, NULL, d->cfg.norm_before_residual ? c->n : c->g, H, NULL, m, H);
        return c->a;
    }
    o->matmul(be, c->x, c->a, &c->fc, m, 0);
    o->rmsnorm(be, c->xn, c->x, c->layer.attn_norm, m, H, mc->eps);
    return c->xn;
}

int db_chain_add_context(db_drafter *d, const float *feats, const int *tok, const int *slot, const int *pos, int n,
                         char *err, size_t errlen)
{
    db_chain *c = &d->chain;
    db_backend *be = d->be;
    const db_backend_ops *o = be->ops;
    const db_model_config *mc = &d->cfg.base;
    int F = d->cfg.n_taps * d->cfg.target_hidden, np = 0, nf = 0;
    if (n > d->max_ctx_rows) return db_fail(err, errlen, DB_EINPUT, "drafter context: %d rows (max %d)", n, d->max_ctx_rows);
    if (!tok) return db_fail(err, errlen, DB_EINPUT, "drafter context: a chain drafter needs the rows' tokens");
    /* rows to materialize: each slot's pending row (token: the slot's first row here), then every
     * row but a slot's last one here (token: the slot's next row here) */
    for (int r = 0; r < n; r++) {
        int s = slot[r], first = 1;
        if (s < 0 || s >= d->kv.slots) return db_fail(err, errlen, DB_EINPUT, "drafter context: slot %d out of range", s);
        int expect = c->pend_pos[s] >= 0 ? c->pend_pos[s] + 1 : d->kv.len[s];
        for (int q = 0; q < r; q++)
            if (slot[q] == s) expect++, first = 0;
        if (pos[r] != expect || pos[r] >= d->kv.cap)
            return db_fail(err, errlen, DB_EINPUT, "drafter context: slot %d row at position %d, cache expects %d (cap %d)",
                           s, pos[r], expect, d->kv.cap);
        if (first && c->pend_pos[s] >= 0) {
            c->src[np] = s;
            d->ids[np] = tok[r];
            d->pos[np++] = c->pend_pos[s];
        }
    }
    for (int r = 0; r < n; r++) {
        int next = -1;
        for (int q = r + 1; q < n && next < 0; q++)
            if (slot[q] == slot[r]) next = q;
        if (next < 0) continue;
        c->dst[nf] = r;
        d->ids[np + nf] = tok[next];
        d->pos[np + nf++] = pos[r];
    }
    int m = np + nf;
    for (int i = 0; i < np; i++) d->kv_index[i] = c->src[i] * d->kv.cap + d->pos[i];
    for (int i = 0; i < nf; i++) d->kv_index[np + i] = slot[c->dst[i]] * d->kv.cap + d->pos[np + i];
    if (m > 0) {
        if (np) o->copy_rows(be, c->feat, F, NULL, c->pend, F, c->src, np, F);
        if (nf) o->copy_rows(be, c->feat + (size_t)np * F, F, NULL, feats, F, c->dst, nf, F);
        first_hidden(d, m);
        const float *in = prepare(d, m);
        const db_layer *l = &c->layer;
        o->matmul(be, c->k, in, &l->wk, m, 0);
        o->matmul(be, c->v, in, &l->wv, m, 0);
        if (l->k_norm) o->rmsnorm(be, c->k, c->k, l->k_norm, m * mc->n_kv_heads, mc->head_dim, mc->eps);
        o->rope(be, c->k, d->pos, m, mc->n_kv_heads, mc->head_dim, mc->rope_theta);
        db_kv_store(&d->kv, 0, c->k, c->v, d->kv_index, m);
    }
    for (int i = 0; i < np; i++) {
        d->kv.len[c->src[i]] = d->pos[i] + 1;
        c->pend_pos[c->src[i]] = -1;
    }
    for (int i = 0; i < nf; i++)
        if (d->pos[np + i] + 1 > d->kv.len[slot[c->dst[i]]]) d->kv.len[slot[c->dst[i]]] = d->pos[np + i] + 1;
    /* each slot's last row here waits for its next token */
    int nl = 0;
    for (int r = 0; r < n; r++) {
        int last = 1;
        for (int q = r + 1; q < n && last; q++) last = slot[q] != slot[r];
        if (!last) continue;
        c->src[nl] = r;
        c->dst[nl++] = slot[r];
        c->pend_pos[slot[r]] = pos[r];
    }
    if (nl) o->copy_rows(be, c->pend, F, c->dst, feats, F, c->src, nl, F);
    return DB_OK;
}

int db_chain_step(db_drafter *d, const int *slot, const int *tok, int nq, int step, char *err, size_t errlen)
{
    db_chain *c = &d->chain;
    db_backend *be = d->be;
    const db_backend_ops *o = be->ops;
    const db_model_config *mc = &d->cfg.base;
    int H = mc->hidden, F = d->cfg.n_taps * d->cfg.target_hidden;
    if (nq < 1 || nq > d->max_requests || step < 1 || step >= d->max_block)
        return db_fail(err, errlen, DB_EINPUT, "drafter step %d of %d requests (max block %d x %d)", step, nq,
                       d->max_block, d->max_requests);
    for (int j = 0; j < nq; j++) {
        int s = slot[j], p;
        if (s < 0 || s >= d->kv.slots) return db_fail(err, errlen, DB_EINPUT, "drafter step: slot %d out of range", s);
        if (step == 1 && c->pend_pos[s] < 0)
            return db_fail(err, errlen, DB_EINPUT, "drafter step 1: slot %d has no context row waiting", s);
        p = step == 1 ? c->pend_pos[s] : d->kv.len[s] + step - 2;
        if (p >= d->kv.cap)
            return db_fail(err, errlen, DB_EINPUT, "drafter step: slot %d needs position %d (cap %d)", s, p, d->kv.cap);
        d->ids[j] = tok[j];
        d->pos[j] = p;
        d->kv_index[j] = s * d->kv.cap + p;
        d->attn_rows[j] = (db_attn_row){s, 0, p + 1};
    }
    if (step == 1) { /* the pending rows: their tap features give g */
        o->copy_rows(be, c->feat, F, NULL, c->pend, F, slot, nq, F);
        first_hidden(d, nq);
    }
    const float *in = prepare(d, nq);
    const db_layer *l = &c->layer;
    db_layer_qkv(be, mc, l, in, c->q, c->k, c->v, d->pos, nq);
    db_kv_store(&d->kv, 0, c->k, c->v, d->kv_index, nq);
    db_kv_attention(&d->kv, 0, c->att, c->q, d->attn_rows, nq, mc->n_heads, mc->n_kv_heads, mc->head_dim,
                    1.0f / sqrtf((float)mc->head_dim));
    o->matmul(be, c->x, c->att, &l->wo, nq, 1);
    o->rmsnorm(be, c->xn, c->x, l->mlp_norm, nq, H, mc->eps);
    db_layer_mlp(be, l, c->xn, c->gate, c->up, c->x, nq, 1);
    o->rmsnorm(be, c->y, c->x, c->norm, nq, H, mc->eps);
    o->matmul(be, c->logits, c->y, c->head.data ? &c->head : &d->target->head, nq, 0);
    o->copy_rows(be, c->g, H, NULL, c->post_norm ? c->y : c->x, H, NULL, nq, H); /* fed back */
    if (step == 1)
        for (int j = 0; j < nq; j++) {
            d->kv.len[slot[j]] = d->pos[j] + 1;
            c->pend_pos[slot[j]] = -1;
        }
    return DB_OK;
}

void db_chain_reset(db_drafter *d, int slot)
{
    db_kv_reset(&d->kv, slot);
    if (d->chain.pend_pos) d->chain.pend_pos[slot] = -1;
}

void db_chain_assume_len(db_drafter *d, int slot, int len)
{
    if (len < 1) {
        db_chain_reset(d, slot);
        return;
    }
    db_kv_assume_len(&d->kv, slot, len - 1);
    d->chain.pend_pos[slot] = d->kv.len[slot]; /* the last position waits, its features as they stand */
}
