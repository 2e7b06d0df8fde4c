/* target.h — the frozen target LLM (Qwen3 / LLaMA, layout in docs/checkpoints.md): loading, batched
 * forward over rows of several requests with per-slot KV caches, tap-layer capture for the drafter.
 *
 * Notation: R = max rows per forward call, H hidden, V vocab, T = number of tap layers,
 * slots = requests in flight, S = positions per slot. */
#ifndef DB_TARGET_H
#define DB_TARGET_H

#include "backend.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/qwen3_layer.h"
#include "model/safetensors.h"
#include "model/synthetic.h"

/* One input row: token `token` of request slot `slot` at absolute position `pos`. Rows of one
 * slot must appear in order, at consecutive positions starting at that slot's cache length. */
typedef struct {
    int slot, pos, token;
} db_row;

typedef struct {
    float *x;      /* [R, H] residual stream */
    float *xn;     /* [R, H] normed sublayer input */
    float *q;      /* [R, nh*hd] */
    float *k, *v;  /* [R, nkv*hd] */
    float *att;    /* [R, nh*hd] attention output */
    float *gate;   /* [R, I] */
    float *up;     /* [R, I] */
    float *taps;   /* [R, T*H] outputs of the tap layers, concatenated in tap order */
    float *hid;    /* [R, H] final-normed rows that want logits */
    float *logits; /* [R, V] */
} db_target_state;

typedef struct {
    db_model_config cfg;
    db_backend *be;
    db_tensor_set st;
    db_weight embed;    /* [V, H] */
    db_weight head;     /* [V, H]; same data as embed when tied */
    float *norm;        /* [H] f32 */
    db_layer *layers;   /* [L] */
    int n_taps;
    int tap_layers[DB_MAX_TAPS];
    int max_rows;       /* R */
    db_kv kv;
    db_target_state s;
    float *scratch;     /* the one allocation the state views point into */
    db_attn_row *attn_rows; /* [R] host */
    int *pos, *ids, *kv_index; /* [R] host */
} db_target;

typedef struct {
    int slots;          /* requests in flight */
    int capacity;       /* positions per slot */
    int max_rows;       /* rows per forward call (prefill chunk) */
    int n_taps;
    const int *tap_layers;
    db_dtype kv_dtype;  /* KV cache: DB_F32 (0, the default) or DB_F16 (kv_cache.h) */
} db_target_opts;

/* syn NULL: the checkpoint in `dir`; else synthetic weights of the config `dir` names (a
 * checkpoint directory or a config.json path), generated on the backend (synthetic.h) */
int db_target_load_ex(db_target *t, db_backend *be, const char *dir, const db_synth_opts *syn,
                      char *err, size_t errlen);
/* Allocate caches and scratch; taps must name layers < L. */
int db_target_alloc(db_target *t, const db_target_opts *o, char *err, size_t errlen);
void db_target_free(db_target *t);
/* Bytes of weights the target keeps on the device. */
size_t db_target_weight_bytes(const db_target *t);
/* Device bytes of the activation state db_target_alloc carves for max_rows rows and n_taps
 * tap layers (KV caches not included: db_kv_bytes). */
size_t db_target_state_bytes(const db_model_config *c, int max_rows, int n_taps);

/* Forward n <= max_rows rows, appending their K/V. Logits are produced for the rows listed in
 * logit_rows (indices into rows, n_logits of them) into s.logits[0..n_logits); s.taps holds
 * every row's tap features. */
int db_target_forward(db_target *t, const db_row *rows, int n, const int *logit_rows,
                      int n_logits, char *err, size_t errlen);

int db_target_is_eos(const db_target *t, int token);

/* Results of the last db_target_forward (device pointers, valid until the next forward):
 * logits [n_logits, V] of the rows it listed, tap features [n, T*H] of every row. */
float *db_target_logits(const db_target *t);
const float *db_target_taps(const db_target *t);

/* Per-slot cache: positions held, positions a slot can hold, forget a slot (a new request
 * takes it), keep the first len positions (drop rejected draft rows). */
int db_target_len(const db_target *t, int slot);
int db_target_capacity(const db_target *t);
void db_target_reset(db_target *t, int slot);
void db_target_truncate(db_target *t, int slot, int len);
/* a context of `len` positions over the cache rows as they stand (bench only) */
void db_target_assume_len(db_target *t, int slot, int len);

#endif
