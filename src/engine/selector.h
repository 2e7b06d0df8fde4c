/* selector.h — the select step of a DFlash 2 cycle: candidate scoring and the path walk.
 *
 * Draft row t (1..B-1) of a block proposes the drafter's top-sk candidates c with logits U_t[c].
 * The selector rescores them along the path:
 *   S_t(c) = U_t[c] + pair_t[i][c],   i = the candidate picked at t-1 (the anchor at t = 1)
 *   pair_t[i][j] = sum_r pred[prev_i, r] * g_t[r] * succ[cand_j, r],   g_t = W_sel y_t
 * with y_t the drafter's final-normed hidden row, W_sel [r, H] the hidden projection and
 * pred / succ [V, r] the predecessor / successor codebooks of the drafter's checkpoint.
 * Scoring (the projection and the pair scores of every row of every request) is one backend
 * call each; the walk runs on the host, one request at a time, because each pick depends on the
 * one before it (db_select_walk_u, backends/sampling.c) — or, on a backend with the select_walk
 * op, scores and walk run on the device in one call (db_selector_score_walk) and only the
 * picks (and q at the candidates) come back.
 *   greedy:   pick argmax_c S_t(c), ties to the smaller token id;
 *   sampling: draw from the filtered softmax of S_t (temperature, top_p, top_k); that
 *             distribution (over the vocabulary, zero off the candidates) is q_t, what the
 *             lossless verification divides by.
 *
 * Notation: nq requests, B block, R1 = nq*(B-1) draft rows, k top-k width kept per row
 * (>= sk), sk = selector_top_k candidates, r selector rank, V vocabulary. */
#ifndef DB_SELECTOR_H
#define DB_SELECTOR_H

#include "base/util.h"
#include "model/drafter.h"

typedef struct {
    const db_drafter *d;
    db_backend *be;
    int sk, rank, max_rows;
    float *g;                 /* device [R1, r] projected hidden rows */
    int *prev_ids, *cand_ids; /* host [R1*sk] predecessor / candidate ids per row */
    float *pairs;             /* host [R1*sk*sk] pair scores */
    float *scores;            /* host [sk] S_t of the row being walked */
    float *uvals;             /* host [R1*sk] U_t at the candidates */
    float *qs;                /* host [(B-1)*sk] q_t at the candidates of one request */
} db_selector;

/* Device bytes db_selector_init allocates for max_rows draft rows. */
size_t db_selector_state_bytes(const db_drafter_config *c, int max_rows);
/* State for up to max_rows draft rows per call; DB_EINPUT naming the missing tensor when the
 * drafter has no selector. */
int db_selector_init(db_selector *s, const db_drafter *d, int max_rows, char *err, size_t errlen);
void db_selector_free(db_selector *s);

/* Score the candidates of the last db_drafter_block of nq requests: topk_ids [R1*k] host, the
 * drafter's top-k per row (its first sk are the candidates); anchors [nq]. */
int db_selector_score(db_selector *s, const int *anchors, const int *topk_ids, int k, int nq,
                      int B, char *err, size_t errlen);

/* Walk request j's path: draft[1..B-1] = the picks, from topk_vals [R1*k] host (U_t, the same
 * rows as topk_ids). temperature 0: greedy (rng, q, qs unused); else sampled from rng, and q_t
 * goes to q [B, V] (the request's rows; row 0 untouched) or, with q NULL, to qs [B-1, sk]: row
 * t-1 holds q_t at the candidates s->cand_ids of draft row j*(B-1)+t-1 (zero elsewhere). */
int db_selector_walk(db_selector *s, int j, int B, const float *topk_vals, int k,
                     float temperature, float top_p, int top_k, db_rng *rng, float *q, int V,
                     float *qs, int *draft, char *err, size_t errlen);

/* Score and walk every request in one backend call (the select_walk op; the backend must have
 * it): picks [R1] the drafted id of each draft row; u [R1] one uniform per row (sampling) and
 * q [R1*sk] q_t at the candidates s->cand_ids (sampling; NULL when greedy). The same picks and
 * q as db_selector_score + db_selector_walk given the same uniforms. */
int db_selector_score_walk(db_selector *s, const int *anchors, const int *topk_ids,
                           const float *topk_vals, int k, int nq, int B, float temperature,
                           float top_p, int top_k, const double *u, float *q, int *picks,
                           char *err, size_t errlen);

#endif
