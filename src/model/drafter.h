/* drafter.h — the DFlash / DFlash 2 block-diffusion drafter (docs/checkpoints.md).
 *
 * Context: target tap features f_p [T*Ht] -> u_p = RMSNorm_hidden(fc f_p) -> per layer
 * K = RoPE(k_norm(Wk u_p), p), V = Wv u_p, stored in the drafter's own per-slot cache
 * ("immediate materialization": each target position projected once).
 * Block: rows [anchor, MASK x (B-1)] at P..P+B-1, embedded with the TARGET's table; each layer
 * attends over all cached context keys plus all B block keys (window |q-k| < W on sliding
 * layers); DFlash 2 wraps attention and MLP in the two-tap dynamic convolution; logits of
 * rows 1..B-1 through the TARGET's head, x output_multiplier, softcapped. A DSpark drafter
 * (dspark.h) is a DFlash 1 drafter whose logits are over its draft vocabulary Vd (its own head
 * when it has one) and that carries the Markov head the engine's sequential walk applies.
 * Block K/V are written past the slot's length and never committed.
 *
 * Notation: Nq = requests in a draft call, B = block, Rb = Nq*B block rows, H hidden (== the
 * target's), T taps, Ht target hidden, K conv taps, G = H/gs conv groups, r selector rank. */
#ifndef DB_DRAFTER_H
#define DB_DRAFTER_H

#include "backend.h"
#include "model/chain.h"
#include "model/dspark.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/qwen3_layer.h"
#include "model/safetensors.h"
#include "model/target.h"

typedef struct {
    float *base;       /* [2, K, H] f32 */
    db_weight proj;    /* [2*K*G, H] kernel_projection */
} db_dynconv_w;

typedef struct {
    db_layer l;
    db_dynconv_w attn_conv, mlp_conv; /* DFlash 2; base == NULL when absent */
} db_drafter_layer;

typedef struct {
    float *u;      /* [Rc, H] projected context features */
    float *k, *v;  /* [Rc, nkv*hd] */
    float *x;      /* [Rb, H] residual stream of the block */
    float *xn;     /* [Rb, H] normed sublayer input */
    float *xc;     /* [Rb, H] conv-prepared sublayer input */
    float *delta;  /* [Rb, 2*K*G] conv kernel deltas */
    float *q;      /* [Rb, nh*hd] */
    float *bk, *bv;/* [Rb, nkv*hd] */
    float *att;    /* [Rb, nh*hd] */
    float *z;      /* [Rb, H] sublayer output */
    float *zc;     /* [Rb, H] conv-finished sublayer output */
    float *gate, *up; /* [Rb, I] */
    float *y;      /* [Nq*(B-1), H] final-normed rows 1..B-1 */
    float *logits; /* [Nq*(B-1), Vo] (Vo = cfg.draft_vocab: V but for a reduced DSpark vocabulary) */
    float *corr;   /* [Nq, Vo] DSpark corrected rows of one block position (DSpark only) */
} db_drafter_state;

typedef struct db_drafter {
    db_drafter_config cfg;
    db_backend *be;
    db_tensor_set st;
    const db_target *target;  /* embedding and head are the target's (shared, never copied) */
    db_weight fc;             /* [H, T*Ht] */
    float *hidden_norm;       /* [H] */
    float *norm;              /* [H] */
    db_drafter_layer *layers; /* [L] */
    db_weight sel_proj;       /* [r, H] candidate_selector.hidden_projection */
    db_weight sel_pred;       /* [V, r] predecessor_codebook */
    db_weight sel_succ;       /* [V, r] successor_codebook */
    db_dspark_head markov;    /* DSpark drafters (cfg.kind == DB_DRAFTER_DSPARK) */
    db_chain chain;           /* EAGLE-3 / MTP drafters (DB_KIND_IS_CHAIN(cfg.kind)) */
    int has_conv, has_selector;
    char missing_conv[320], missing_selector[320]; /* first absent tensor, for errors */
    db_kv kv;
    db_drafter_state s;
    float *scratch;
    int max_ctx_rows, max_requests, max_block;
    int *ids, *pos, *kv_index;  /* host [max(Rc, Rb)] */
    db_attn_row *attn_rows;     /* host [Rb] */
    int *row_map;               /* host [Rb] */
} db_drafter;

typedef struct db_drafter_opts {
    int slots, capacity;
    int max_ctx_rows;   /* rows per add_context call */
    int max_requests;   /* requests per draft call */
    int max_block;      /* largest B drafted (<= cfg.block_size) */
    db_dtype kv_dtype;  /* context KV cache: DB_F32 (0, the default) or DB_F16 */
} db_drafter_opts;

/* Load a drafter for `target` (shapes checked against it: hidden size, vocab, tap layers): syn
 * NULL, the checkpoint in `dir`; else synthetic weights of the config `dir` names (a checkpoint
 * directory or a config.json path), generated on the backend (synthetic.h): every tensor of
 * the config's kind is present (a DFlash 2 config gets convolutions and the selector). */
int db_drafter_load_ex(db_drafter *d, db_backend *be, const char *dir, const db_target *target,
                       const db_synth_opts *syn, char *err, size_t errlen);
/* Device bytes of the activation state db_drafter_alloc carves for o (KV caches not included). */
size_t db_drafter_state_bytes(const db_drafter_config *c, const db_drafter_opts *o);
int db_drafter_alloc(db_drafter *d, const db_drafter_opts *o, char *err, size_t errlen);
void db_drafter_free(db_drafter *d);

/* Append context rows: target tap features feats [n, T*Ht] (device, row stride T*Ht) of
 * (slot[r], pos[r]), tok[r] the token at that position (host; only a chain drafter reads it,
 * NULL allowed otherwise); positions continue each slot's length. */
int db_drafter_add_context(db_drafter *d, const float *feats, const int *tok, const int *slot,
                           const int *pos, int n, char *err, size_t errlen);

/* Draft one block per request: anchors at the slots' current lengths. Block K/V rows are
 * written past each slot's length and not committed (add_context commits the accepted ones). */
int db_drafter_block(db_drafter *d, const int *slot, const int *anchor, int nq, int block,
                     int use_conv, char *err, size_t errlen);
/* A chain drafter (EAGLE-3, MTP): step `step` = 1..B-1 of one draft for nq requests, tok[j] the
 * anchor (step 1) or request j's pick of step-1; the step's logits [nq, Vd] at
 * db_drafter_step_logits. On a chain drafter db_drafter_block runs the B-1 steps with the anchors
 * as every step's token (the cost of a draft, for `bench`). */
int db_drafter_chain_step(db_drafter *d, const int *slot, const int *tok, int nq, int step,
                          char *err, size_t errlen);
float *db_drafter_step_logits(const db_drafter *d);
/* target id of each of the cfg.draft_vocab draft ids (DSpark, EAGLE-3), NULL for the identity */
const int *db_drafter_d2t(const db_drafter *d);
/* Results of the last db_drafter_block (device, request-major rows 1..B-1 of each block):
 * logits [nq*(B-1), Vo] (a chain drafter: the rows the engine copied there, its q); the
 * final-normed hidden rows [nq*(B-1), H] the selector projects. */
float *db_drafter_logits(const db_drafter *d);
const float *db_drafter_block_hidden(const db_drafter *d);

/* forget a slot's context (a new request takes it) */
void db_drafter_reset(db_drafter *d, int slot);
/* a context of `len` positions over the cache rows as they stand (bench only) */
void db_drafter_assume_len(db_drafter *d, int slot, int len);

#endif
