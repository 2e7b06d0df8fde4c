/* qwen3_layer.c — loading and sublayers of one decoder layer (see qwen3_layer.h). */
#include "model/qwen3_layer.h"
#include "model/synthetic.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int db_load_matrix(db_weight *w, db_backend *be, const db_tensor_set *st, const char *name, int rows,
                   int cols, char *err, size_t errlen)
{
    if (st->synthetic) return db_synth_matrix(w, be, st, name, rows, cols, err, errlen);
    const db_tensor *t;
    int64_t dims[2] = {rows, cols};
    int rc = db_tensors_expect(st, name, 2, dims, &t, err, errlen);
    if (rc) return rc;
    if (t->int_bytes)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' is an integer tensor (F32, BF16 or F16 expected)",
                       db_tensors_file_of(st, t), name);
    if (db_dtype_is_quant(t->dtype) && !be->quant_weights)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' is %s: backend %s runs f32/f16/bf16 weights only",
                       db_tensors_file_of(st, t), name, db_dtype_name(t->dtype), be->ops->name);
    if (db_weight_upload(be, w, t->data, t->dtype, rows, cols) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "%s: cannot upload tensor '%s' (%zu bytes)",
                       db_tensors_file_of(st, t), name, t->nbytes);
    return DB_OK;
}

int db_load_vector(float **out, db_backend *be, const db_tensor_set *st, const char *name, int n,
                   char *err, size_t errlen)
{
    if (st->synthetic) return db_synth_vector(out, be, st, name, n, err, errlen);
    const db_tensor *t;
    int64_t dims[1] = {n};
    int rc = db_tensors_expect(st, name, 1, dims, &t, err, errlen);
    if (rc) return rc;
    if (t->int_bytes)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' is an integer tensor (F32, BF16 or F16 expected)",
                       db_tensors_file_of(st, t), name);
    *out = db_upload_f32(be, t->data, t->dtype, (size_t)n);
    if (!*out) return db_fail(err, errlen, DB_ERUNTIME, "cannot upload tensor '%s'", name);
    return DB_OK;
}

int db_layer_load(db_layer *l, db_backend *be, const db_tensor_set *st, const db_model_config *c,
                  const char *prefix, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    int H = c->hidden, I = c->intermediate, qd = c->n_heads * c->head_dim,
        kvd = c->n_kv_heads * c->head_dim;
    char nm[512];
    int rc = DB_OK;
#define NAME(s) (snprintf(nm, sizeof nm, "%s%s", prefix, s), nm)
    if ((rc = db_load_vector(&l->attn_norm, be, st, NAME("input_layernorm.weight"), H, err, errlen)) ||
        (rc = db_load_matrix(&l->wq, be, st, NAME("self_attn.q_proj.weight"), qd, H, err, errlen)) ||
        (rc = db_load_matrix(&l->wk, be, st, NAME("self_attn.k_proj.weight"), kvd, H, err, errlen)) ||
        (rc = db_load_matrix(&l->wv, be, st, NAME("self_attn.v_proj.weight"), kvd, H, err, errlen)) ||
        (rc = db_load_matrix(&l->wo, be, st, NAME("self_attn.o_proj.weight"), H, qd, err, errlen)) ||
        (rc = db_load_vector(&l->mlp_norm, be, st, NAME("post_attention_layernorm.weight"), H, err, errlen)) ||
        (rc = db_load_matrix(&l->gate, be, st, NAME("mlp.gate_proj.weight"), I, H, err, errlen)) ||
        (rc = db_load_matrix(&l->up, be, st, NAME("mlp.up_proj.weight"), I, H, err, errlen)) ||
        (rc = db_load_matrix(&l->down, be, st, NAME("mlp.down_proj.weight"), H, I, err, errlen)))
        goto fail;
    if (c->qk_norm) {
        if ((rc = db_load_vector(&l->q_norm, be, st, NAME("self_attn.q_norm.weight"), c->head_dim, err, errlen)) ||
            (rc = db_load_vector(&l->k_norm, be, st, NAME("self_attn.k_norm.weight"), c->head_dim, err, errlen)))
            goto fail;
    }
#undef NAME
    return DB_OK;
fail:
    db_layer_free(l, be);
    return rc;
}

void db_layer_free(db_layer *l, db_backend *be)
{
    float *vecs[] = {l->attn_norm, l->q_norm, l->k_norm, l->mlp_norm};
    for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++)
        if (vecs[i]) be->ops->dfree(be, vecs[i]);
    db_weight *mats[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->gate, &l->up, &l->down};
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) db_weight_free(be, mats[i]);
    memset(l, 0, sizeof *l);
}

void db_layer_qkv(db_backend *be, const db_model_config *c, const db_layer *l, const float *xn,
                  float *q, float *k, float *v, const int *pos, int n)
{
    const db_backend_ops *o = be->ops;
    o->matmul(be, q, xn, &l->wq, n, 0);
    o->matmul(be, k, xn, &l->wk, n, 0);
    o->matmul(be, v, xn, &l->wv, n, 0);
    if (l->q_norm) {
        o->rmsnorm(be, q, q, l->q_norm, n * c->n_heads, c->head_dim, c->eps);
        o->rmsnorm(be, k, k, l->k_norm, n * c->n_kv_heads, c->head_dim, c->eps);
    }
    o->rope(be, q, pos, n, c->n_heads, c->head_dim, c->rope_theta);
    o->rope(be, k, pos, n, c->n_kv_heads, c->head_dim, c->rope_theta);
}

void db_layer_mlp(db_backend *be, const db_layer *l, const float *xn, float *gate, float *up,
                  float *y, int n, int accumulate)
{
    const db_backend_ops *o = be->ops;
    o->matmul(be, gate, xn, &l->gate, n, 0);
    o->matmul(be, up, xn, &l->up, n, 0);
    o->swiglu(be, gate, gate, up, (size_t)n * (size_t)l->gate.rows);
    o->matmul(be, y, gate, &l->down, n, accumulate);
}
