/* dspark.c — loading and the correction of the DSpark Markov head (see dspark.h). */
#include "model/dspark.h"
#include "model/qwen3_layer.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* no prefix, or "model." (as the other drafter tensors) */
static const db_tensor *find(const db_tensor_set *st, const char *base, char *buf, size_t n)
{
    snprintf(buf, n, "%s", base);
    const db_tensor *t = db_tensors_find(st, buf);
    if (t) return t;
    snprintf(buf, n, "model.%s", base);
    t = db_tensors_find(st, buf);
    if (!t) snprintf(buf, n, "%s", base);
    return t;
}

int db_d2t_load(int *map, int vd, const db_tensor_set *st, const db_tensor *t, const char *name, int V, char *err,
                size_t errlen)
{
    const char *file = db_tensors_file_of(st, t);
    if (t->int_bytes != 4 && t->int_bytes != 8)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' must be I64 or I32", file, name);
    if (t->ndim != 1 || t->shape[0] != vd)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' must have shape [%d] (draft_vocab_size)",
                       file, name, vd);
    unsigned char *seen = db_calloc((size_t)V, 1);
    if (!seen) return db_fail(err, errlen, DB_ERUNTIME, "out of memory checking tensor '%s' (%d target ids)", name, V);
    int rc = DB_OK;
    for (int i = 0; i < vd && !rc; i++) {
        int64_t off;
        if (t->int_bytes == 8) memcpy(&off, (const char *)t->data + 8 * (size_t)i, 8);
        else {
            int32_t o32;
            memcpy(&o32, (const char *)t->data + 4 * (size_t)i, 4);
            off = o32;
        }
        int64_t id = (int64_t)i + off;
        if (id < 0 || id >= V)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s': draft id %d maps to %lld, outside the target's %d ids",
                         file, name, i, (long long)id, V);
        else if (seen[id]++)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s': target id %lld mapped twice (draft id %d)",
                         file, name, (long long)id, i);
        else
            map[i] = (int)id;
    }
    free(seen);
    return rc;
}

int db_dspark_load(db_dspark_head *m, db_backend *be, const db_tensor_set *st, int H, int V, int Vd,
                   char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->vd = Vd;
    m->scale = 1.0f;
    m->d2t = db_malloc(sizeof(int) * (size_t)Vd);
    if (!m->d2t) return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the draft-to-target id map (%d ids)", Vd);
    for (int i = 0; i < Vd; i++) m->d2t[i] = i;
    char n1[128], n2[128], nb[128];
    const db_tensor *t1 = find(st, "markov_head.markov_w1.weight", n1, sizeof n1);
    const db_tensor *t2 = find(st, "markov_head.markov_w2.weight", n2, sizeof n2);
    int rc;
    if (st->synthetic) {
        m->rank = 64; /* capacity planning: a typical rank */
    } else {
        if (!t1 || !t2)
            return db_fail(err, errlen, DB_EINPUT, "%s: missing tensor '%s' (a DSpark drafter needs its Markov head)",
                           st->dir, t1 ? n2 : n1);
        if (t1->ndim != 2 || t1->shape[0] != V || t1->shape[1] < 1 || t1->shape[1] > (1 << 16))
            return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' must have shape [%d (vocab_size), R]",
                           db_tensors_file_of(st, t1), n1, V);
        m->rank = (int)t1->shape[1];
    }
    if ((rc = db_load_matrix(&m->w1, be, st, n1, V, m->rank, err, errlen)) ||
        (rc = db_load_matrix(&m->w2, be, st, n2, Vd, m->rank, err, errlen)))
        return rc;
    if (db_dtype_is_quant(m->w1.dtype) || db_dtype_is_quant(m->w2.dtype))
        return db_fail(err, errlen, DB_EINPUT, "%s: the Markov head must be F32, BF16 or F16", st->dir);
    if (st->synthetic) {
        if (Vd < V) return db_load_matrix(&m->lm_head, be, st, "lm_head.weight", Vd, H, err, errlen);
        return DB_OK;
    }
    const db_tensor *t = find(st, "markov_head.markov_w2.scale", nb, sizeof nb);
    if (t) {
        if (t->int_bytes || !(t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1)))
            return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' must be one float (shape [1])",
                           db_tensors_file_of(st, t), nb);
        db_convert_to_f32(&m->scale, t->data, t->dtype, 1);
    }
    t = find(st, "d2t", nb, sizeof nb);
    if (t && (rc = db_d2t_load(m->d2t, m->vd, st, t, nb, V, err, errlen))) return rc;
    if (!t && Vd < V)
        return db_fail(err, errlen, DB_EINPUT, "%s: draft_vocab_size %d below vocab_size %d needs tensor 'd2t'",
                       st->dir, Vd, V);
    t = find(st, "lm_head.weight", nb, sizeof nb);
    if (t && (rc = db_load_matrix(&m->lm_head, be, st, nb, Vd, H, err, errlen))) return rc;
    if (!t && Vd < V)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: draft_vocab_size %d below vocab_size %d needs the drafter's own 'lm_head.weight'",
                       st->dir, Vd, V);
    char nw[128];
    const db_tensor *cw = find(st, "confidence_head.proj.weight", nw, sizeof nw);
    const db_tensor *cb = find(st, "confidence_head.proj.bias", nb, sizeof nb);
    if (cw || cb) {
        if (!cw || !cb)
            return db_fail(err, errlen, DB_EINPUT, "%s: confidence head without tensor '%s'", st->dir,
                           cw ? nb : nw);
        int64_t dw[2] = {1, H + m->rank}, db[1] = {1};
        const db_tensor *tmp;
        if ((rc = db_tensors_expect(st, nw, 2, dw, &tmp, err, errlen)) || (rc = db_tensors_expect(st, nb, 1, db, &tmp, err, errlen)))
            return rc;
        if (cw->int_bytes || cb->int_bytes)
            return db_fail(err, errlen, DB_EINPUT, "%s: the confidence head must be F32, BF16 or F16", st->dir);
        m->has_confidence = 1;
    }
    return DB_OK;
}

void db_dspark_free(db_dspark_head *m, db_backend *be)
{
    db_weight_free(be, &m->w1);
    db_weight_free(be, &m->w2);
    db_weight_free(be, &m->lm_head);
    free(m->d2t);
    memset(m, 0, sizeof *m);
}

void db_dspark_correct(const db_dspark_head *m, db_backend *be, float *out, const float *logits,
                       const int *src_rows, const int *prev, int n)
{
    be->ops->copy_rows(be, out, m->vd, NULL, logits, m->vd, src_rows, n, m->vd);
    be->ops->markov_bias(be, out, prev, &m->w1, &m->w2, m->scale, n);
}
