/* drafter.c — DFlash / DFlash 2 drafter: loading, context materialization, block forward
 * (see drafter.h for the equations and notation). */
#include "model/drafter.h"
#include "model/model_test.h"
#include "model/synthetic.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tensors have no prefix in the z-lab layout; some exports add "model.": accept both. */
static const char *resolve(const db_tensor_set *st, const char *base, char *buf, size_t n)
{
    if (db_tensors_find(st, base)) return base;
    snprintf(buf, n, "model.%s", base);
    if (db_tensors_find(st, buf)) return buf;
    return base;
}

static int load_conv(db_dynconv_w *cw, db_backend *be, const db_tensor_set *st, const char *prefix,
                     const db_drafter_config *c, char *missing, size_t mlen, char *err,
                     size_t errlen)
{
    char b1[256], b2[256], r1[300], r2[300];
    int H = c->base.hidden, K = c->conv_kernel, G = H / c->conv_group;
    snprintf(b1, sizeof b1, "%sbase_kernel", prefix);
    snprintf(b2, sizeof b2, "%skernel_projection.weight", prefix);
    const char *n1 = resolve(st, b1, r1, sizeof r1), *n2 = resolve(st, b2, r2, sizeof r2);
    if (!db_tensors_find(st, n1) || !db_tensors_find(st, n2)) {
        if (!missing[0]) snprintf(missing, mlen, "%s", db_tensors_find(st, n1) ? b2 : b1);
        return 1; /* absent: the checkpoint cannot run conv variants */
    }
    const db_tensor *t;
    int64_t dims[3] = {2, K, H};
    int rc = db_tensors_expect(st, n1, 3, dims, &t, err, errlen);
    if (rc) return rc;
    if (t->int_bytes)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' is an integer tensor", db_tensors_file_of(st, t), n1);
    if (st->synthetic) {
        if ((rc = db_synth_conv_base(&cw->base, be, st, n1, K, H, err, errlen))) return rc;
        return db_load_matrix(&cw->proj, be, st, n2, 2 * K * G, H, err, errlen);
    }
    cw->base = db_upload_f32(be, t->data, t->dtype, (size_t)2 * K * H);
    if (!cw->base) return db_fail(err, errlen, DB_ERUNTIME, "cannot upload '%s'", n1);
    return db_load_matrix(&cw->proj, be, st, n2, 2 * K * G, H, err, errlen);
}

static int load_selector(db_drafter *d, char *err, size_t errlen)
{
    const db_drafter_config *c = &d->cfg;
    static const char *names[3] = {"candidate_selector.hidden_projection.weight",
                                   "candidate_selector.predecessor_codebook",
                                   "candidate_selector.successor_codebook"};
    char r[3][300];
    const char *n[3];
    for (int i = 0; i < 3; i++) {
        n[i] = resolve(&d->st, names[i], r[i], sizeof r[i]);
        if (!db_tensors_find(&d->st, n[i])) {
            snprintf(d->missing_selector, sizeof d->missing_selector, "%s", names[i]);
            return DB_OK;
        }
    }
    int rank = c->selector_rank, V = c->base.vocab, H = c->base.hidden, rc;
    if ((rc = db_load_matrix(&d->sel_proj, d->be, &d->st, n[0], rank, H, err, errlen)) ||
        (rc = db_load_matrix(&d->sel_pred, d->be, &d->st, n[1], V, rank, err, errlen)) ||
        (rc = db_load_matrix(&d->sel_succ, d->be, &d->st, n[2], V, rank, err, errlen)))
        return rc;
    d->has_selector = 1;
    return DB_OK;
}

int db_drafter_load(db_drafter *d, db_backend *be, const char *dir, const db_target *target,
                    char *err, size_t errlen)
{
    return db_drafter_load_ex(d, be, dir, target, NULL, err, errlen);
}

int db_drafter_load_ex(db_drafter *d, db_backend *be, const char *dir, const db_target *target,
                       const db_synth_opts *syn, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->be = be;
    d->target = target;
    const db_model_config *tc = &target->cfg;
    int rc = db_drafter_config_load(&d->cfg, dir, tc->n_layers, err, errlen);
    if (rc) return rc;
    db_drafter_config *c = &d->cfg;
    int chain = DB_KIND_IS_CHAIN(c->kind); /* EAGLE-3: its own hidden size may differ (chain.c checks) */
    if (c->base.hidden != tc->hidden && c->kind != DB_DRAFTER_EAGLE3)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: hidden_size %d does not match the target's %d (%s)", c->base.path,
                       c->base.hidden, tc->hidden, tc->path);
    if (c->base.vocab != tc->vocab)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: vocab_size %d does not match the target's %d (%s)", c->base.path,
                       c->base.vocab, tc->vocab, tc->path);
    if (c->num_target_layers != tc->n_layers)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: num_target_layers %d but the target (%s) has %d layers",
                       c->base.path, c->num_target_layers, tc->path, tc->n_layers);
    if (c->block_size > DB_MAX_BLOCK)
        return db_fail(err, errlen, DB_EINPUT, "%s: block_size %d above the supported %d",
                       c->base.path, c->block_size, DB_MAX_BLOCK);
    if (syn)
        db_tensors_open_synthetic(&d->st, c->base.path, db_synth_model_seed(syn->seed, "drafter"), syn->dtype);
    else if ((rc = db_tensors_open_dir(&d->st, dir, err, errlen)))
        return rc;
    if (chain) {
        if ((rc = db_chain_load(d, err, errlen))) goto fail;
        return DB_OK;
    }
    int H = c->base.hidden;
    char r1[300], r2[300], r3[300];
    if ((rc = db_load_matrix(&d->fc, be, &d->st, resolve(&d->st, "fc.weight", r1, sizeof r1), H,
                             c->n_taps * tc->hidden, err, errlen)) ||
        (rc = db_load_vector(&d->hidden_norm, be, &d->st,
                             resolve(&d->st, "hidden_norm.weight", r2, sizeof r2), H, err, errlen)) ||
        (rc = db_load_vector(&d->norm, be, &d->st, resolve(&d->st, "norm.weight", r3, sizeof r3),
                             H, err, errlen)))
        goto fail;
    const char *lp = db_tensors_find(&d->st, "layers.0.input_layernorm.weight") ? "" : "model.";
    d->layers = db_calloc((size_t)c->base.n_layers, sizeof *d->layers);
    if (!d->layers) {
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the drafter's %d layers", c->base.n_layers);
        goto fail;
    }
    d->has_conv = c->kind == DB_DRAFTER_V2;
    if (!d->has_conv)
        snprintf(d->missing_conv, sizeof d->missing_conv, "layers.0.attention_conv.base_kernel");
    if (c->kind != DB_DRAFTER_V2)
        snprintf(d->missing_selector, sizeof d->missing_selector,
                 "candidate_selector.hidden_projection.weight");
    for (int i = 0; i < c->base.n_layers; i++) {
        char prefix[64], cp[96];
        snprintf(prefix, sizeof prefix, "%slayers.%d.", lp, i);
        if ((rc = db_layer_load(&d->layers[i].l, be, &d->st, &c->base, prefix, err, errlen)))
            goto fail;
        if (c->kind != DB_DRAFTER_V2) continue;
        snprintf(cp, sizeof cp, "layers.%d.attention_conv.", i);
        rc = load_conv(&d->layers[i].attn_conv, be, &d->st, cp, c, d->missing_conv,
                       sizeof d->missing_conv, err, errlen);
        if (rc < 0) goto fail;
        if (rc > 0) d->has_conv = 0;
        snprintf(cp, sizeof cp, "layers.%d.mlp_conv.", i);
        rc = load_conv(&d->layers[i].mlp_conv, be, &d->st, cp, c, d->missing_conv,
                       sizeof d->missing_conv, err, errlen);
        if (rc < 0) goto fail;
        if (rc > 0) d->has_conv = 0;
    }
    if (c->kind == DB_DRAFTER_V2 && (rc = load_selector(d, err, errlen))) goto fail;
    if (c->kind == DB_DRAFTER_DSPARK &&
        (rc = db_dspark_load(&d->markov, be, &d->st, H, c->base.vocab, c->draft_vocab, err, errlen)))
        goto fail;
    return DB_OK;
fail:
    db_drafter_free(d);
    return rc;
}

static void release_state(db_drafter *d)
{
    if (d->scratch) d->be->ops->dfree(d->be, d->scratch);
    d->scratch = NULL;
    db_kv_free(&d->kv);
    free(d->ids);
    free(d->pos);
    free(d->kv_index);
    free(d->attn_rows);
    free(d->row_map);
    d->ids = d->pos = d->kv_index = d->row_map = NULL;
    d->attn_rows = NULL;
    memset(&d->s, 0, sizeof d->s);
}

/* floats of each state view, in db_drafter_state order */
#define STATE_VIEWS 18
static void state_sizes(const db_drafter_config *c, const db_drafter_opts *o, size_t s[STATE_VIEWS])
{
    const db_model_config *m = &c->base;
    size_t Rc = (size_t)o->max_ctx_rows, Rb = (size_t)o->max_requests * o->max_block,
           R1 = (size_t)o->max_requests * (o->max_block > 1 ? o->max_block - 1 : 1);
    size_t H = (size_t)m->hidden, qd = (size_t)m->n_heads * m->head_dim,
           kvd = (size_t)m->n_kv_heads * m->head_dim, I = (size_t)m->intermediate,
           D = (size_t)2 * (c->conv_kernel > 0 ? c->conv_kernel : 1) *
               (c->conv_group > 0 ? H / (size_t)c->conv_group : 1),
           V = (size_t)(c->draft_vocab > 0 ? c->draft_vocab : m->vocab),
           C = c->kind == DB_DRAFTER_DSPARK ? (size_t)o->max_requests * V : 0;
    size_t v[STATE_VIEWS] = {Rc * H,   Rc * kvd, Rc * kvd, Rb * H,   Rb * H, Rb * H,
                             Rb * D,   Rb * qd,  Rb * kvd, Rb * kvd, Rb * qd, Rb * H,
                             Rb * H,   Rb * I,   Rb * I,   R1 * H,   R1 * V,   C};
    memcpy(s, v, sizeof v);
}

size_t db_drafter_state_bytes(const db_drafter_config *c, const db_drafter_opts *o)
{
    if (DB_KIND_IS_CHAIN(c->kind)) return db_chain_state_bytes(c, o);
    size_t s[STATE_VIEWS], total = 0;
    state_sizes(c, o, s);
    for (int i = 0; i < STATE_VIEWS; i++) total += s[i];
    return total * sizeof(float);
}

int db_drafter_alloc(db_drafter *d, const db_drafter_opts *o, char *err, size_t errlen)
{
    const db_drafter_config *c = &d->cfg;
    release_state(d);
    const db_model_config *m = &c->base;
    if (o->max_block < 1 || o->max_block > c->block_size)
        return db_fail(err, errlen, DB_EINPUT, "block size %d above the drafter's block_size %d (%s)",
                       o->max_block, c->block_size, m->path);
    int rc = db_kv_init(&d->kv, d->be, m->n_layers, o->slots, o->capacity,
                        m->n_kv_heads * m->head_dim, o->kv_dtype, err, errlen);
    if (rc) return rc;
    size_t Rc = (size_t)o->max_ctx_rows, Rb = (size_t)o->max_requests * o->max_block;
    if (DB_KIND_IS_CHAIN(c->kind)) {
        size_t hr = Rc > (size_t)o->max_requests ? Rc : (size_t)o->max_requests;
        d->ids = db_calloc(hr, sizeof(int));
        d->pos = db_calloc(hr, sizeof(int));
        d->kv_index = db_calloc(hr, sizeof(int));
        d->attn_rows = db_calloc(hr, sizeof *d->attn_rows);
        if (!d->ids || !d->pos || !d->kv_index || !d->attn_rows)
            return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the drafter's row index arrays (%zu rows)", hr);
        d->max_ctx_rows = o->max_ctx_rows;
        d->max_requests = o->max_requests;
        d->max_block = o->max_block;
        return db_chain_alloc(d, o, err, errlen);
    }
    size_t sizes[STATE_VIEWS];
    state_sizes(c, o, sizes);
    float **views[STATE_VIEWS] = {&d->s.u, &d->s.k, &d->s.v, &d->s.x, &d->s.xn, &d->s.xc,
                                  &d->s.delta, &d->s.q, &d->s.bk, &d->s.bv, &d->s.att, &d->s.z,
                                  &d->s.zc, &d->s.gate, &d->s.up, &d->s.y, &d->s.logits,
                                  &d->s.corr};
    size_t total = db_drafter_state_bytes(c, o) / sizeof(float);
    d->scratch = d->be->ops->alloc(d->be, total * sizeof(float));
    if (!d->scratch)
        return db_fail(err, errlen, DB_ERUNTIME, "cannot allocate %.1f MiB of drafter activations",
                       (double)total * 4 / 1048576.0);
    size_t hr = Rc > Rb ? Rc : Rb;
    d->ids = db_calloc(hr, sizeof(int));
    d->pos = db_calloc(hr, sizeof(int));
    d->kv_index = db_calloc(hr, sizeof(int));
    d->attn_rows = db_calloc(Rb, sizeof *d->attn_rows);
    d->row_map = db_calloc(Rb, sizeof(int));
    if (!d->ids || !d->pos || !d->kv_index || !d->attn_rows || !d->row_map)
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the drafter's row index arrays (%zu rows)", hr);
    float *p = d->scratch;
    for (size_t i = 0; i < STATE_VIEWS; i++) {
        *views[i] = p;
        p += sizes[i];
    }
    d->max_ctx_rows = o->max_ctx_rows;
    d->max_requests = o->max_requests;
    d->max_block = o->max_block;
    return DB_OK;
}

void db_drafter_free(db_drafter *d)
{
    db_backend *be = d->be;
    if (!be) return;
    if (d->layers) {
        for (int i = 0; i < d->cfg.base.n_layers; i++) {
            db_drafter_layer *l = &d->layers[i];
            db_layer_free(&l->l, be);
            db_dynconv_w *cv[2] = {&l->attn_conv, &l->mlp_conv};
            for (int j = 0; j < 2; j++) {
                if (cv[j]->base) be->ops->dfree(be, cv[j]->base);
                db_weight_free(be, &cv[j]->proj);
            }
        }
    }
    free(d->layers);
    db_weight_free(be, &d->fc);
    db_weight_free(be, &d->sel_proj);
    db_weight_free(be, &d->sel_pred);
    db_weight_free(be, &d->sel_succ);
    db_dspark_free(&d->markov, be);
    if (DB_KIND_IS_CHAIN(d->cfg.kind)) db_chain_free(d);
    if (d->hidden_norm) be->ops->dfree(be, d->hidden_norm);
    if (d->norm) be->ops->dfree(be, d->norm);
    release_state(d);
    db_tensors_close(&d->st);
    memset(d, 0, sizeof *d);
}

int db_drafter_add_context(db_drafter *d, const float *feats, const int *tok, const int *slot,
                           const int *pos, int n, char *err, size_t errlen)
{
    if (n < 1) return DB_OK;
    if (DB_KIND_IS_CHAIN(d->cfg.kind)) return db_chain_add_context(d, feats, tok, slot, pos, n, err, errlen);
    if (n > d->max_ctx_rows)
        return db_fail(err, errlen, DB_EINPUT, "drafter context: %d rows (max %d)", n, d->max_ctx_rows);
    const db_model_config *m = &d->cfg.base;
    db_backend *be = d->be;
    const db_backend_ops *o = be->ops;
    for (int r = 0; r < n; r++) {
        if (slot[r] < 0 || slot[r] >= d->kv.slots)
            return db_fail(err, errlen, DB_EINPUT, "drafter context: slot %d out of range", slot[r]);
        int expect = d->kv.len[slot[r]];
        for (int q = 0; q < r; q++) expect += slot[q] == slot[r];
        if (pos[r] != expect || pos[r] >= d->kv.cap)
            return db_fail(err, errlen, DB_EINPUT,
                           "drafter context: slot %d row at position %d, cache expects %d (cap %d)",
                           slot[r], pos[r], expect, d->kv.cap);
        d->kv_index[r] = slot[r] * d->kv.cap + pos[r];
    }
    o->matmul(be, d->s.u, feats, &d->fc, n, 0);
    o->rmsnorm(be, d->s.u, d->s.u, d->hidden_norm, n, m->hidden, m->eps);
    for (int li = 0; li < m->n_layers; li++) {
        const db_layer *l = &d->layers[li].l;
        o->matmul(be, d->s.k, d->s.u, &l->wk, n, 0);
        o->matmul(be, d->s.v, d->s.u, &l->wv, n, 0);
        if (l->k_norm) o->rmsnorm(be, d->s.k, d->s.k, l->k_norm, n * m->n_kv_heads, m->head_dim, m->eps);
        o->rope(be, d->s.k, pos, n, m->n_kv_heads, m->head_dim, m->rope_theta);
        db_kv_store(&d->kv, li, d->s.k, d->s.v, d->kv_index, n);
    }
    for (int r = 0; r < n; r++)
        if (pos[r] + 1 > d->kv.len[slot[r]]) d->kv.len[slot[r]] = pos[r] + 1;
    return DB_OK;
}

/* Key range of block row t (block at P..P+B-1) in a layer with window W (0 = full). */
static db_attn_row block_row(int slot, int P, int B, int t, int W, int causal)
{
    db_attn_row a = {slot, 0, P + B};
    if (W > 0) {
        int q = P + t;
        a.key_lo = q - W + 1 > 0 ? q - W + 1 : 0;
        a.key_hi = causal ? q + 1 : (q + W < P + B ? q + W : P + B);
    }
    return a;
}

int db_drafter_block(db_drafter *d, const int *slot, const int *anchor, int nq, int B,
                     int use_conv, char *err, size_t errlen)
{
    const db_drafter_config *c = &d->cfg;
    const db_model_config *m = &c->base;
    db_backend *be = d->be;
    const db_backend_ops *o = be->ops;
    db_drafter_state *s = &d->s;
    if (nq < 1 || nq > d->max_requests || B < 2 || B > d->max_block)
        return db_fail(err, errlen, DB_EINPUT, "drafter block: %d requests x block %d (max %d x %d)",
                       nq, B, d->max_requests, d->max_block);
    for (int t = 1; DB_KIND_IS_CHAIN(c->kind) && t < B; t++) {
        int rc = db_chain_step(d, slot, anchor, nq, t, err, errlen);
        if (rc) return rc;
        if (t == B - 1) return DB_OK;
    }
    if (use_conv && !d->has_conv)
        return db_fail(err, errlen, DB_EINPUT, "%s: no convolution tensors (missing '%s')", m->path,
                       d->missing_conv);
    int Rb = nq * B, H = m->hidden, K = c->conv_kernel, G = use_conv ? H / c->conv_group : 0;
    for (int j = 0; j < nq; j++) {
        int P = d->kv.len[slot[j]];
        if (P + B > d->kv.cap)
            return db_fail(err, errlen, DB_EINPUT, "drafter block: slot %d needs %d positions (cap %d)",
                           slot[j], P + B, d->kv.cap);
        for (int t = 0; t < B; t++) {
            int r = j * B + t;
            d->ids[r] = t == 0 ? anchor[j] : c->mask_token_id;
            d->pos[r] = P + t;
            d->kv_index[r] = slot[j] * d->kv.cap + P + t;
            if (t > 0) d->row_map[j * (B - 1) + t - 1] = r;
        }
    }
    float scale = 1.0f / sqrtf((float)m->head_dim);
    o->embed(be, s->x, &d->target->embed, d->ids, Rb);
    for (int li = 0; li < m->n_layers; li++) {
        const db_drafter_layer *dl = &d->layers[li];
        const db_layer *l = &dl->l;
        for (int j = 0; j < nq; j++)
            for (int t = 0; t < B; t++)
                d->attn_rows[j * B + t] = block_row(slot[j], d->kv.len[slot[j]], B, t,
                                                    m->window[li], m->is_causal);
        /* attention sublayer: x += finish(Attn(prepare(norm x))) */
        o->rmsnorm(be, s->xn, s->x, l->attn_norm, Rb, H, m->eps);
        const float *in = s->xn;
        if (use_conv) {
            o->matmul(be, s->delta, s->xn, &dl->attn_conv.proj, Rb, 0);
            o->dynconv(be, s->xc, s->xn, dl->attn_conv.base, s->delta, 0, nq, B, H, K, G);
            in = s->xc;
        }
        db_layer_qkv(be, m, l, in, s->q, s->bk, s->bv, d->pos, Rb);
        db_kv_store(&d->kv, li, s->bk, s->bv, d->kv_index, Rb);
        db_kv_attention(&d->kv, li, s->att, s->q, d->attn_rows, Rb, m->n_heads, m->n_kv_heads,
                        m->head_dim, scale);
        if (use_conv) {
            o->matmul(be, s->z, s->att, &l->wo, Rb, 0);
            o->dynconv(be, s->zc, s->z, dl->attn_conv.base + (size_t)K * H, s->delta, 1, nq, B, H, K, G);
            o->add(be, s->x, s->zc, (size_t)Rb * H);
        } else {
            o->matmul(be, s->x, s->att, &l->wo, Rb, 1);
        }
        /* MLP sublayer: x += finish(MLP(prepare(norm x))) */
        o->rmsnorm(be, s->xn, s->x, l->mlp_norm, Rb, H, m->eps);
        if (use_conv) {
            o->matmul(be, s->delta, s->xn, &dl->mlp_conv.proj, Rb, 0);
            o->dynconv(be, s->xc, s->xn, dl->mlp_conv.base, s->delta, 0, nq, B, H, K, G);
            db_layer_mlp(be, l, s->xc, s->gate, s->up, s->z, Rb, 0);
            o->dynconv(be, s->zc, s->z, dl->mlp_conv.base + (size_t)K * H, s->delta, 1, nq, B, H, K, G);
            o->add(be, s->x, s->zc, (size_t)Rb * H);
        } else {
            db_layer_mlp(be, l, s->xn, s->gate, s->up, s->x, Rb, 1);
        }
    }
    int R1 = nq * (B - 1);
    o->copy_rows(be, s->y, H, NULL, s->x, H, d->row_map, R1, H);
    o->rmsnorm(be, s->y, s->y, d->norm, R1, H, m->eps);
    const db_weight *head = d->markov.lm_head.data ? &d->markov.lm_head : &d->target->head;
    o->matmul(be, s->logits, s->y, head, R1, 0);
    if (c->output_multiplier != 1.0f || c->softcap > 0.0f)
        o->scale_softcap(be, s->logits, (size_t)R1 * (c->draft_vocab > 0 ? c->draft_vocab : m->vocab),
                         c->output_multiplier, c->softcap);
    return DB_OK;
}

float *db_drafter_logits(const db_drafter *d) { return d->s.logits; }
const float *db_drafter_block_hidden(const db_drafter *d) { return d->s.y; }
void db_drafter_reset(db_drafter *d, int slot)
{
    if (DB_KIND_IS_CHAIN(d->cfg.kind)) db_chain_reset(d, slot);
    else db_kv_reset(&d->kv, slot);
}
void db_drafter_assume_len(db_drafter *d, int slot, int len)
{
    if (DB_KIND_IS_CHAIN(d->cfg.kind)) db_chain_assume_len(d, slot, len);
    else db_kv_assume_len(&d->kv, slot, len);
}

int db_drafter_chain_step(db_drafter *d, const int *slot, const int *tok, int nq, int step, char *err,
                          size_t errlen)
{
    if (!DB_KIND_IS_CHAIN(d->cfg.kind))
        return db_fail(err, errlen, DB_EINPUT, "%s: not an EAGLE-3 or MTP checkpoint", d->cfg.base.path);
    return db_chain_step(d, slot, tok, nq, step, err, errlen);
}
float *db_drafter_step_logits(const db_drafter *d) { return d->chain.logits; }
const int *db_drafter_d2t(const db_drafter *d)
{
    if (DB_KIND_IS_CHAIN(d->cfg.kind)) return d->chain.d2t;
    return d->cfg.kind == DB_DRAFTER_DSPARK ? d->markov.d2t : NULL;
}
