/* selector.c — candidate scoring and the path walk (see selector.h for the equations). */
#include "engine/selector.h"
#include "engine/accept.h"

#include <stdlib.h>
#include <string.h>

size_t db_selector_state_bytes(const db_drafter_config *c, int max_rows)
{
    return sizeof(float) * (size_t)max_rows * (size_t)(c->selector_rank > 0 ? c->selector_rank : 1);
}

void db_selector_free(db_selector *s)
{
    if (s->g) s->be->ops->dfree(s->be, s->g);
    free(s->prev_ids);
    free(s->cand_ids);
    free(s->pairs);
    free(s->scores);
    free(s->uvals);
    free(s->qs);
    memset(s, 0, sizeof *s);
}

int db_selector_init(db_selector *s, const db_drafter *d, int max_rows, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (!d->has_selector)
        return db_fail(err, errlen, DB_EINPUT, "%s: no path selector (missing '%s')",
                       d->cfg.base.path, d->missing_selector);
    s->d = d;
    s->be = d->be;
    s->sk = d->cfg.selector_top_k;
    s->rank = d->cfg.selector_rank;
    s->max_rows = max_rows;
    size_t R1 = (size_t)max_rows, sk = (size_t)s->sk;
    s->g = s->be->ops->alloc(s->be, db_selector_state_bytes(&d->cfg, max_rows));
    s->prev_ids = db_calloc(R1 * sk, sizeof(int));
    s->cand_ids = db_calloc(R1 * sk, sizeof(int));
    s->pairs = db_calloc(R1 * sk * sk, sizeof(float));
    s->scores = db_calloc(sk, sizeof(float));
    s->uvals = db_calloc(R1 * sk, sizeof(float));
    s->qs = db_calloc((size_t)(d->cfg.block_size > 1 ? d->cfg.block_size - 1 : 1) * sk, sizeof(float));
    if (!s->g || !s->prev_ids || !s->cand_ids || !s->pairs || !s->scores || !s->uvals || !s->qs) {
        db_selector_free(s);
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory sizing the selector for %d rows",
                       max_rows);
    }
    return DB_OK;
}

/* the candidate / predecessor ids and U_t of every row, and the projection g */
static int prepare(db_selector *s, const int *anchors, const int *topk_ids,
                   const float *topk_vals, int k, int nq, int B, char *err, size_t errlen)
{
    db_backend *be = s->be;
    const db_drafter *d = s->d;
    int sk = s->sk, R1 = nq * (B - 1);
    if (R1 > s->max_rows || k < sk)
        return db_fail(err, errlen, DB_EINPUT, "selector: %d rows of top-%d (max %d rows, needs top-%d)",
                       R1, k, s->max_rows, sk);
    for (int row = 0; row < R1; row++) {
        int j = row / (B - 1), t = row % (B - 1) + 1;
        for (int c = 0; c < sk; c++) {
            s->cand_ids[(size_t)row * sk + c] = topk_ids[(size_t)row * k + c];
            s->prev_ids[(size_t)row * sk + c] = t == 1 ? anchors[j] : topk_ids[(size_t)(row - 1) * k + c];
            if (topk_vals) s->uvals[(size_t)row * sk + c] = topk_vals[(size_t)row * k + c];
        }
    }
    be->ops->matmul(be, s->g, db_drafter_block_hidden(d), &d->sel_proj, R1, 0);
    return DB_OK;
}

int db_selector_score(db_selector *s, const int *anchors, const int *topk_ids, int k, int nq,
                      int B, char *err, size_t errlen)
{
    db_backend *be = s->be;
    const db_drafter *d = s->d;
    int rc = prepare(s, anchors, topk_ids, NULL, k, nq, B, err, errlen);
    if (rc) return rc;
    if (be->ops->pair_scores(be, s->pairs, s->g, s->prev_ids, s->cand_ids, &d->sel_pred,
                             &d->sel_succ, nq * (B - 1), s->sk, s->rank) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
    return DB_OK;
}

int db_selector_score_walk(db_selector *s, const int *anchors, const int *topk_ids,
                           const float *topk_vals, int k, int nq, int B, float temperature,
                           float top_p, int top_k, const double *u, float *q, int *picks,
                           char *err, size_t errlen)
{
    db_backend *be = s->be;
    const db_drafter *d = s->d;
    int rc = prepare(s, anchors, topk_ids, topk_vals, k, nq, B, err, errlen);
    if (rc) return rc;
    if (be->ops->select_walk(be, picks, temperature > 0 ? q : NULL, s->g, s->prev_ids, s->cand_ids,
                             &d->sel_pred, &d->sel_succ, s->uvals, temperature > 0 ? u : NULL, nq,
                             B - 1, s->sk, s->rank, temperature, top_p, top_k) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
    return DB_OK;
}

int db_selector_walk(db_selector *s, int j, int B, const float *topk_vals, int k,
                     float temperature, float top_p, int top_k, db_rng *rng, float *q, int V,
                     float *qs, int *draft, char *err, size_t errlen)
{
    int sk = s->sk, steps = B - 1;
    size_t row0 = (size_t)j * steps;
    double u[DB_MAX_BLOCK];
    for (int t = 0; t < steps; t++) {
        for (int c = 0; c < sk; c++) s->uvals[(row0 + t) * sk + c] = topk_vals[(row0 + t) * k + c];
        u[t] = temperature > 0 ? db_rng_uniform(rng) : 0.0;
    }
    float *qrows = temperature > 0 ? (q ? s->qs : qs) : NULL;
    if (db_select_walk_u(s->uvals + row0 * sk, s->pairs + row0 * sk * sk, s->cand_ids + row0 * sk,
                         steps, sk, temperature, top_p, top_k, u, s->scores, qrows, draft + 1) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "selector: out of memory filtering scores");
    for (int t = 1; q && temperature > 0 && t < B; t++) { /* q_t over the vocabulary */
        float *qt = q + (size_t)t * V;
        memset(qt, 0, sizeof(float) * (size_t)V);
        for (int c = 0; c < sk; c++) qt[s->cand_ids[(row0 + t - 1) * sk + c]] = s->qs[(size_t)(t - 1) * sk + c];
    }
    return DB_OK;
}
