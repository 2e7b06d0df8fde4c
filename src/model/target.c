/* target.c — Qwen3 / LLaMA target model (see target.h). */
#include "model/target.h"
#include "model/model_test.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int db_target_load(db_target *t, db_backend *be, const char *dir, char *err, size_t errlen)
{
    return db_target_load_ex(t, be, dir, NULL, err, errlen);
}

int db_target_load_ex(db_target *t, db_backend *be, const char *dir, const db_synth_opts *syn,
                      char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->be = be;
    int rc = db_model_config_load(&t->cfg, dir, err, errlen);
    if (rc) return rc;
    if (syn)
        db_tensors_open_synthetic(&t->st, t->cfg.path, db_synth_model_seed(syn->seed, "target"), syn->dtype);
    else if ((rc = db_tensors_open_dir(&t->st, dir, err, errlen)))
        return rc;
    const db_model_config *c = &t->cfg;
    if ((rc = db_load_matrix(&t->embed, be, &t->st, "model.embed_tokens.weight", c->vocab,
                             c->hidden, err, errlen)) ||
        (rc = db_load_vector(&t->norm, be, &t->st, "model.norm.weight", c->hidden, err, errlen)))
        goto fail;
    if (c->tied) {
        t->head = t->embed;
    } else if ((rc = db_load_matrix(&t->head, be, &t->st, "lm_head.weight", c->vocab, c->hidden,
                                    err, errlen))) {
        goto fail;
    }
    t->layers = db_calloc((size_t)c->n_layers, sizeof *t->layers);
    if (!t->layers) {
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the target's %d layers", c->n_layers);
        goto fail;
    }
    for (int i = 0; i < c->n_layers; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "model.layers.%d.", i);
        if ((rc = db_layer_load(&t->layers[i], be, &t->st, c, prefix, err, errlen))) goto fail;
    }
    /* a DeepSeek-style MTP layer follows the last one (model.layers.{L}): the drafter reads it */
    if ((rc = db_tensors_check_layers(&t->st, "model.layers.", c->n_layers + c->mtp_layers, c->path, err, errlen))) goto fail;
    return DB_OK;
fail:
    db_target_free(t);
    return rc;
}

size_t db_target_weight_bytes(const db_target *t)
{
    const db_model_config *c = &t->cfg;
    /* head and embedding may differ in dtype (a GGUF file quantizes them separately) */
    size_t b = (size_t)c->vocab * db_dtype_bytes(t->embed.dtype, (size_t)c->hidden);
    if (!c->tied) b += (size_t)c->vocab * db_dtype_bytes(t->head.dtype, (size_t)c->hidden);
    for (int i = 0; i < c->n_layers; i++) {
        const db_layer *l = &t->layers[i];
        const db_weight *m[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->gate, &l->up, &l->down};
        for (int j = 0; j < 7; j++)
            b += (size_t)m[j]->rows * db_dtype_bytes(m[j]->dtype, (size_t)m[j]->cols);
    }
    return b;
}

/* widths (floats per row) of the state views, in db_target_state order */
#define STATE_VIEWS 11
static void state_widths(const db_model_config *c, int n_taps, size_t w[STATE_VIEWS])
{
    size_t H = (size_t)c->hidden, qd = (size_t)c->n_heads * c->head_dim,
           kvd = (size_t)c->n_kv_heads * c->head_dim, T = n_taps > 0 ? (size_t)n_taps : 1;
    size_t v[STATE_VIEWS] = {H, H, qd, kvd, kvd, qd, (size_t)c->intermediate,
                             (size_t)c->intermediate, T * H, H, (size_t)c->vocab};
    memcpy(w, v, sizeof v);
}

size_t db_target_state_bytes(const db_model_config *c, int max_rows, int n_taps)
{
    size_t w[STATE_VIEWS], total = 0;
    state_widths(c, n_taps, w);
    for (int i = 0; i < STATE_VIEWS; i++) total += w[i] * (size_t)max_rows;
    return total * sizeof(float);
}

static void release_state(db_target *t)
{
    if (t->scratch) t->be->ops->dfree(t->be, t->scratch);
    t->scratch = NULL;
    db_kv_free(&t->kv);
    free(t->attn_rows);
    free(t->pos);
    free(t->ids);
    free(t->kv_index);
    t->attn_rows = NULL;
    t->pos = t->ids = t->kv_index = NULL;
    memset(&t->s, 0, sizeof t->s);
    t->max_rows = 0;
}

int db_target_alloc(db_target *t, const db_target_opts *o, char *err, size_t errlen)
{
    const db_model_config *c = &t->cfg;
    release_state(t);
    if (o->slots < 1 || o->capacity < 1 || o->max_rows < 1)
        return db_fail(err, errlen, DB_EINPUT, "target: slots, capacity and rows must be >= 1");
    if (o->n_taps > DB_MAX_TAPS)
        return db_fail(err, errlen, DB_EINPUT, "target: at most %d tap layers", DB_MAX_TAPS);
    t->n_taps = o->n_taps;
    for (int i = 0; i < o->n_taps; i++) {
        if (o->tap_layers[i] < 0 || o->tap_layers[i] >= c->n_layers)
            return db_fail(err, errlen, DB_EINPUT, "target %s: tap layer %d outside its %d layers",
                           c->path, o->tap_layers[i], c->n_layers);
        t->tap_layers[i] = o->tap_layers[i];
    }
    int rc = db_kv_init(&t->kv, t->be, c->n_layers, o->slots, o->capacity,
                        c->n_kv_heads * c->head_dim, o->kv_dtype, err, errlen);
    if (rc) return rc;
    int R = o->max_rows;
    size_t widths[STATE_VIEWS];
    state_widths(c, t->n_taps, widths);
    /* one allocation carved into the state's views */
    float **views[STATE_VIEWS] = {&t->s.x, &t->s.xn, &t->s.q, &t->s.k, &t->s.v, &t->s.att,
                                  &t->s.gate, &t->s.up, &t->s.taps, &t->s.hid, &t->s.logits};
    size_t total = db_target_state_bytes(c, R, t->n_taps) / sizeof(float);
    t->scratch = t->be->ops->alloc(t->be, total * sizeof(float));
    if (!t->scratch)
        return db_fail(err, errlen, DB_ERUNTIME, "cannot allocate %.1f MiB of activations",
                       (double)total * 4 / 1048576.0);
    t->attn_rows = db_calloc((size_t)R, sizeof *t->attn_rows);
    t->pos = db_calloc((size_t)R, sizeof(int));
    t->ids = db_calloc((size_t)R, sizeof(int));
    t->kv_index = db_calloc((size_t)R, sizeof(int));
    if (!t->attn_rows || !t->pos || !t->ids || !t->kv_index)
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the target's row index arrays (%d rows)", R);
    float *p = t->scratch;
    for (size_t i = 0; i < STATE_VIEWS; i++) {
        *views[i] = p;
        p += widths[i] * (size_t)R;
    }
    t->max_rows = R;
    return DB_OK;
}

void db_target_free(db_target *t)
{
    db_backend *be = t->be;
    if (!be) return;
    if (t->layers)
        for (int i = 0; i < t->cfg.n_layers; i++) db_layer_free(&t->layers[i], be);
    free(t->layers);
    if (t->head.data != t->embed.data) db_weight_free(be, &t->head);
    db_weight_free(be, &t->embed);
    if (t->norm) be->ops->dfree(be, t->norm);
    release_state(t);
    db_tensors_close(&t->st);
    memset(t, 0, sizeof *t);
}

int db_target_is_eos(const db_target *t, int token)
{
    for (int i = 0; i < t->cfg.n_eos; i++)
        if (t->cfg.eos[i] == token) return 1;
    return 0;
}

float *db_target_logits(const db_target *t) { return t->s.logits; }
const float *db_target_taps(const db_target *t) { return t->s.taps; }
int db_target_len(const db_target *t, int slot) { return db_kv_len(&t->kv, slot); }
int db_target_capacity(const db_target *t) { return t->kv.cap; }
void db_target_reset(db_target *t, int slot) { db_kv_reset(&t->kv, slot); }
void db_target_truncate(db_target *t, int slot, int len) { db_kv_truncate(&t->kv, slot, len); }
void db_target_assume_len(db_target *t, int slot, int len) { db_kv_assume_len(&t->kv, slot, len); }

/* Rows of a slot must continue its cache: consecutive positions from len[slot]. */
static int check_rows(db_target *t, const db_row *rows, int n, char *err, size_t errlen)
{
    const db_kv *kv = &t->kv;
    if (n < 1 || n > t->max_rows)
        return db_fail(err, errlen, DB_EINPUT, "target forward: %d rows (1..%d)", n, t->max_rows);
    for (int r = 0; r < n; r++) {
        const db_row *w = &rows[r];
        if (w->slot < 0 || w->slot >= kv->slots)
            return db_fail(err, errlen, DB_EINPUT, "target forward: slot %d out of range", w->slot);
        if (w->token < 0 || w->token >= t->cfg.vocab)
            return db_fail(err, errlen, DB_EINPUT, "target forward: token %d outside vocabulary %d",
                           w->token, t->cfg.vocab);
        int expect = kv->len[w->slot];
        for (int q = 0; q < r; q++) expect += rows[q].slot == w->slot;
        if (w->pos != expect)
            return db_fail(err, errlen, DB_EINPUT,
                           "target forward: slot %d row at position %d, cache expects %d",
                           w->slot, w->pos, expect);
        if (w->pos >= kv->cap)
            return db_fail(err, errlen, DB_EINPUT,
                           "target forward: position %d exceeds the cache capacity %d", w->pos,
                           kv->cap);
    }
    return DB_OK;
}

int db_target_forward(db_target *t, const db_row *rows, int n, const int *logit_rows,
                      int n_logits, char *err, size_t errlen)
{
    int rc = check_rows(t, rows, n, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < n_logits; i++)
        if (logit_rows[i] < 0 || logit_rows[i] >= n)
            return db_fail(err, errlen, DB_EINPUT, "target forward: logit row %d of %d",
                           logit_rows[i], n);
    db_backend *be = t->be;
    const db_backend_ops *o = be->ops;
    const db_model_config *c = &t->cfg;
    db_target_state *s = &t->s;
    int H = c->hidden, T = t->n_taps;
    for (int r = 0; r < n; r++) {
        t->pos[r] = rows[r].pos;
        t->ids[r] = rows[r].token;
        t->kv_index[r] = rows[r].slot * t->kv.cap + rows[r].pos;
        t->attn_rows[r] = (db_attn_row){rows[r].slot, 0, rows[r].pos + 1};
    }
    float scale = 1.0f / sqrtf((float)c->head_dim);
    o->embed(be, s->x, &t->embed, t->ids, n);
    for (int li = 0; li < c->n_layers; li++) {
        const db_layer *l = &t->layers[li];
        o->rmsnorm(be, s->xn, s->x, l->attn_norm, n, H, c->eps);
        db_layer_qkv(be, c, l, s->xn, s->q, s->k, s->v, t->pos, n);
        db_kv_store(&t->kv, li, s->k, s->v, t->kv_index, n);
        db_kv_attention(&t->kv, li, s->att, s->q, t->attn_rows, n, c->n_heads, c->n_kv_heads,
                        c->head_dim, scale);
        o->matmul(be, s->x, s->att, &l->wo, n, 1);
        o->rmsnorm(be, s->xn, s->x, l->mlp_norm, n, H, c->eps);
        db_layer_mlp(be, l, s->xn, s->gate, s->up, s->x, n, 1);
        for (int j = 0; j < T; j++)
            if (t->tap_layers[j] == li)
                o->copy_rows(be, s->taps + (size_t)j * H, T * H, NULL, s->x, H, NULL, n, H);
    }
    for (int r = 0; r < n; r++)
        if (rows[r].pos + 1 > t->kv.len[rows[r].slot]) t->kv.len[rows[r].slot] = rows[r].pos + 1;
    if (n_logits > 0) {
        o->copy_rows(be, s->hid, H, NULL, s->x, H, logit_rows, n_logits, H);
        o->rmsnorm(be, s->hid, s->hid, t->norm, n_logits, H, c->eps);
        o->matmul(be, s->logits, s->hid, &t->head, n_logits, 0);
    }
    return DB_OK;
}
