/* accept.h — host-side token choice and verification (the accept step of docs/architecture.md):
 * greedy acceptance, lossless rejection sampling, and sampling from a probability row. Pure
 * functions of their inputs, so the identities (greedy == ar, sampled tokens ~ target distribution)
 * are testable alone.
 *
 * Notation: B block, V vocabulary. p[t] = the target's filtered distribution after row t
 * (predicts block position t+1); q[t] = the distribution draft position t was ACTUALLY drawn
 * from (t = 1..B-1). */
#ifndef DB_ACCEPT_H
#define DB_ACCEPT_H

#include "base/util.h"
#include "model/model_config.h" /* DB_MAX_BLOCK */
#include "backend.h"           /* the sampling references */

/* index drawn from probs[0..n) (need not be normalised; all-zero -> 0): db_sample_index_u
 * (backend.h) with one uniform of rng */
int db_sample_index(const float *probs, int n, db_rng *rng);

/* Greedy: a = leading run of draft[t] == target_argmax[t-1]; bonus = target_argmax[a]. */
int db_accept_greedy(const int *draft, const int *target_argmax, int block, int *bonus);

/* Rejection sampling: db_accept_sample_u (backend.h) with rng's next uniforms. p: [B, V] rows;
 * q: [B, V] rows (row 0 unused); draft[1..B-1]; residual [V] scratch for the residual
 * distribution normalize(max(p - q, 0)). Returns a (accepted drafts) and the bonus token. */
int db_accept_sample(const int *draft, const float *p, const float *q, int block, int v,
                     db_rng *rng, float *residual, int *bonus);

/* The device path of the same rule (the backend's accept op) takes the uniforms up front:
 * db_accept_uniforms gives the next `block` uniforms of rng without moving it, and
 * db_accept_consume moves it past the min(a + 2, block) that an outcome of a accepted drafts
 * used, so rng ends where db_accept_sample leaves it. */
void db_accept_uniforms(const db_rng *rng, int block, double *u);
void db_accept_consume(db_rng *rng, int block, int accepted);

#endif
