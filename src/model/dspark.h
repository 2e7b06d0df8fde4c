/* dspark.h — the DSpark Markov head of a DSpark drafter (docs/checkpoints.md, "DSpark drafter").
 *
 * A DSpark drafter is a DFlash 1 drafter whose block logits get a bias from the token chosen at
 * the previous block position, so the walk over a block is sequential:
 *   z_k = l_k + s * (W2 . W1[prev_k]),  prev_1 = the anchor,  prev_{k+1} = d_k (the pick from z_k)
 * l_k: the drafter's logits of block row k (after output multiplier and softcap) over the draft
 * vocabulary; W1 [V, R] rows by TARGET id, W2 [Vd, R], s the optional scalar scale. With a
 * reduced draft vocabulary (Vd < V) everything runs over the Vd draft ids and d2t maps a draft
 * id to its target id (every other target id has probability 0: logit -inf).
 *
 * Notation: V target vocabulary, Vd draft vocabulary, R Markov rank, H hidden size, n rows. */
#ifndef DB_DSPARK_H
#define DB_DSPARK_H

#include "backend.h"
#include "model/safetensors.h"

#include <stddef.h>

typedef struct {
    int rank;            /* R */
    int vd;              /* Vd */
    db_weight w1;        /* [V, R] markov_head.markov_w1.weight */
    db_weight w2;        /* [Vd, R] markov_head.markov_w2.weight */
    float scale;         /* markov_head.markov_w2.scale, 1 when absent */
    db_weight lm_head;   /* [Vd, H] own head; data NULL: the target's */
    int *d2t;            /* host [Vd]: target id of draft id i (identity without d2t) */
    int has_confidence;  /* confidence_head.proj present: shape-checked, not used for drafting */
} db_dspark_head;

/* Load and check the DSpark tensors of set st (dir names the checkpoint in messages) for a
 * drafter of hidden size H, target vocabulary V, draft vocabulary Vd. */
int db_dspark_load(db_dspark_head *m, db_backend *be, const db_tensor_set *st, int H, int V, int Vd,
                   char *err, size_t errlen);
void db_dspark_free(db_dspark_head *m, db_backend *be);
/* an offset draft-to-target map (DSpark's and EAGLE-3's `d2t`): tensor t (I64 or I32, shape [vd])
 * of set st, draft id i -> target id i + t[i] into map[i]; DB_EINPUT naming the file and tensor
 * unless every id is in [0, V) and used once */
int db_d2t_load(int *map, int vd, const db_tensor_set *st, const db_tensor *t, const char *name, int V, char *err,
                size_t errlen);

/* out[r] = logits[src_rows[r]] + s * W2 . W1[prev[r]] for r < n (device rows of Vd floats;
 * src_rows and prev host arrays, prev target ids). out must not overlap logits. */
void db_dspark_correct(const db_dspark_head *m, db_backend *be, float *out, const float *logits,
                       const int *src_rows, const int *prev, int n);

#endif
