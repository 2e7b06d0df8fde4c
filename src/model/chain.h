/* chain.h — the autoregressive (chain) drafters: EAGLE-3 and MTP heads (docs/checkpoints.md,
 * "EAGLE-3 drafter", "MTP head"). Part of the drafter (drafter.h: db_drafter dispatches to
 * chain.c for cfg.kind EAGLE3 / MTP); the engine drafts with db_drafter_chain_step.
 *
 * One step of one row at position p (token x = the token at p + 1, hidden g [H]):
 *   EAGLE-3  a = [input_layernorm(emb x) ; hidden_norm g] (2H); one decoder layer whose q/k/v
 *            read a, residual r = g (hidden_norm g with norm_before_residual);
 *            logits = lm_head(norm h) over the Vd draft ids (d2t: target id = i + d2t[i]);
 *            fed back: h (the layer's output before `norm`). Step 1: g = fc(taps), the target's
 *            residual stream at three taps (low | mid | high).
 *   MTP      u = fc([En(emb x) ; Hn(g)]) (2H -> H); one decoder layer of the target's shape
 *            (residual from u); logits = head(norm h) (the target's head, or DeepSeek's
 *            shared_head.head); fed back: norm h (post-norm: Qwen3-Next / Qwen3.5 `mtp.*`) or h
 *            (pre-norm: DeepSeek names), config switch `mtp_feedback`. Step 1: g = the target's
 *            last hidden after its final norm (the tap of layer L-1 through the target's norm).
 * Context rows only need their K/V (the attention input a, or input_layernorm(u)), so a context
 * row is materialized once its next token is known: add_context takes each row's own token, and
 * the last row of a slot waits ("pending", its features kept) until the next draft's step 1
 * brings the anchor. Step 1 runs that pending row (K/V committed); steps 2..B-1 write K/V past the
 * slot's length (speculative: the next add_context overwrites them; rejected ones are dropped).
 *
 * Notation: F = T*Ht tap features per row, A = attention input width (2H EAGLE-3, H MTP),
 * R = rows of one call (max of the context rows and the requests of a draft). */
#ifndef DB_CHAIN_H
#define DB_CHAIN_H

#include "backend.h"
#include "model/model_config.h"
#include "model/qwen3_layer.h"

/* which names the checkpoint uses */
typedef enum { DB_CHAIN_MIDLAYER = 1, DB_CHAIN_LAYERS0, DB_CHAIN_MTP, DB_CHAIN_DEEPSEEK } db_chain_layout;

typedef struct {
    db_chain_layout layout;
    db_weight fc;        /* EAGLE-3 [H, F]; MTP [H, 2H] (mtp.fc / eh_proj) */
    float *enorm;        /* [H] on the embedding: input_layernorm (EAGLE-3), pre_fc_norm_embedding / enorm */
    float *hnorm;        /* [H] on the hidden: hidden_norm, pre_fc_norm_hidden / hnorm */
    db_layer layer;      /* the decoder layer; q/k/v [.., A]; attn_norm NULL for EAGLE-3 */
    float *norm;         /* [H] norm / mtp.norm / shared_head.norm */
    db_weight head;      /* own head [Vd, H]; data NULL: the target's */
    db_weight embed;     /* own embed_tokens [V, H]; data NULL: the target's */
    int *d2t;            /* host [Vd] target id of each draft id */
    int post_norm;       /* fed back after `norm` (MTP post-norm) */
    /* state, one allocation (db_chain_alloc) */
    float *scratch;
    float *pend;         /* [slots, F] features of each slot's pending row */
    int *pend_pos;       /* host [slots]: its position, -1 for none */
    float *feat;         /* [R, F] */
    float *g, *e, *n;    /* [R, H] hidden in (fed back between steps), normed embedding / hidden */
    float *a;            /* [R, 2H] concatenation */
    float *x, *xn;       /* [R, H] residual stream, normed sublayer input */
    float *q, *k, *v, *att; /* [R, nh*hd], [R, nkv*hd] x 2, [R, nh*hd] */
    float *gate, *up;    /* [R, I] */
    float *y;            /* [R, H] final-normed rows */
    float *logits;       /* [R, Vd] the last step's rows */
    float *all;          /* [max_requests * (max_block - 1), Vd]: rows the engine keeps per draft */
    int *src, *dst;      /* host [R] row maps */
} db_chain;

struct db_drafter;
struct db_drafter_opts;

/* the weights of d's chain checkpoint (d->cfg, d->st, d->target set), layout by the names */
int db_chain_load(struct db_drafter *d, char *err, size_t errlen);
void db_chain_free(struct db_drafter *d);
size_t db_chain_state_bytes(const db_drafter_config *c, const struct db_drafter_opts *o);
int db_chain_alloc(struct db_drafter *d, const struct db_drafter_opts *o, char *err, size_t errlen);
/* context rows: tap features feats [n, F], each row's own token tok[n] at (slot, pos) */
int db_chain_add_context(struct db_drafter *d, const float *feats, const int *tok, const int *slot,
                         const int *pos, int n, char *err, size_t errlen);
/* step `step` (1..) of a draft for nq requests: tok[j] the anchor (step 1) or the previous pick;
 * logits [nq, Vd] into c.logits */
int db_chain_step(struct db_drafter *d, const int *slot, const int *tok, int nq, int step, char *err,
                  size_t errlen);
void db_chain_reset(struct db_drafter *d, int slot);
void db_chain_assume_len(struct db_drafter *d, int slot, int len);

#endif
