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

/* index drawn from probs[0..n) (need not be normalised; all-zero -> argmax of nothing = 0) */
int db_sample_index(const float *probs, int n, db_rng *rng);

/* Greedy: a = leading run of draft[t] == target_argmax[t-1]; bonus = target_argmax[a]. */
int db_accept_greedy(const int *draft, const int *target_argmax, int block, int *bonus);

/* Rejection sampling. p: [B, V] rows; q: [B, V] rows (row 0 unused); draft[1..B-1];
 * residual [V] scratch for the residual distribution normalize(max(p - q, 0)).
 * Returns a (accepted drafts) and the bonus token. */
int db_accept_sample(const int *draft, const float *p, const float *q, int block, int v,
                     db_rng *rng, float *residual, int *bonus);

#endif
