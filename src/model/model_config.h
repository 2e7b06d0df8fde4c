/* model_config.h — config.json of a Qwen3 / LLaMA target and of a DFlash / DFlash 2 drafter
 * (docs/checkpoints.md), parsed with cJSON and checked: a missing or ill-typed key is an error
 * naming the file and the key. */
#ifndef DB_MODEL_CONFIG_H
#define DB_MODEL_CONFIG_H

#include <stddef.h>

#define DB_MAX_EOS 8
#define DB_MAX_TAPS 16
#define DB_MAX_LAYERS 256
/* the largest block size B (anchor + B-1 drafted tokens): a drafter's block_size, a sweep's
 * block_size and the per-position arrays of the statistics are bounded by it */
#define DB_MAX_BLOCK 64

typedef struct {
    char path[1024];       /* the config.json read */
    char model_type[32];
    int hidden;            /* H */
    int intermediate;      /* I */
    int n_layers;          /* L */
    int n_heads;           /* nh */
    int n_kv_heads;        /* nkv */
    int head_dim;          /* hd */
    int vocab;             /* V */
    int max_pos;
    float eps;
    float rope_theta;
    int tied;              /* lm_head = embed_tokens */
    int qk_norm;           /* Qwen3: q_norm / k_norm per head */
    int eos[DB_MAX_EOS];
    int n_eos;
    /* per-layer attention window (0 = full); drafters use it, targets have none */
    int window[DB_MAX_LAYERS];
    int is_causal;         /* sliding layers causal unless is_causal: false */
    int mtp_layers;        /* MTP layers the checkpoint may carry (num_nextn_predict_layers /
                            * mtp_num_hidden_layers; 0 when absent): a target loads around them */
} db_model_config;

/* DSPARK: a DFlash 1 drafter plus the DSpark Markov head; EAGLE3 and MTP: the autoregressive
 * (chain) drafters, one step per drafted token (docs/checkpoints.md) */
typedef enum {
    DB_DRAFTER_V1 = 1, DB_DRAFTER_V2 = 2, DB_DRAFTER_DSPARK = 3, DB_DRAFTER_EAGLE3 = 4, DB_DRAFTER_MTP = 5
} db_drafter_kind;
/* an EAGLE-3 or MTP checkpoint: drafts by sequential steps (model/chain.h) */
#define DB_KIND_IS_CHAIN(k) ((k) == DB_DRAFTER_EAGLE3 || (k) == DB_DRAFTER_MTP)
/* a chain drafter has no trained block (its block_size is DB_MAX_BLOCK): the block the commands
 * default to for it */
#define DB_CHAIN_DEFAULT_BLOCK 16
/* the block size a command drafts with when none is given: the drafter's block_size, 16 for a chain */
#define DB_DEFAULT_BLOCK(c) (DB_KIND_IS_CHAIN((c)->kind) ? DB_CHAIN_DEFAULT_BLOCK : (c)->block_size)

typedef struct {
    db_model_config base;  /* Qwen3 shapes of the drafter's own layers */
    db_drafter_kind kind;
    int block_size;
    int num_target_layers;
    int mask_token_id;
    int n_taps;
    int tap_layers[DB_MAX_TAPS]; /* target layer ids, config order */
    float output_multiplier;     /* 1 when absent */
    float softcap;               /* 0 when absent */
    /* DFlash 2 */
    int conv_kernel;             /* K */
    int conv_group;              /* gs */
    int selector_rank;           /* r */
    int selector_top_k;          /* k */
    /* DSpark, EAGLE-3 */
    int draft_vocab;             /* Vd: draft_vocab_size, default V (== base.vocab) */
    /* EAGLE-3 / MTP (block_size is DB_MAX_BLOCK: a chain has no trained block) */
    int target_hidden;           /* Ht: target_hidden_size, default base.hidden */
    int norm_before_residual;    /* EAGLE-3: the residual is hidden_norm(g), not g */
    int aux_ids[DB_MAX_TAPS];    /* EAGLE-3: eagle_aux_hidden_state_layer_ids as written */
    int n_aux;                   /* 0: absent (EAGLE's default taps) */
    int aux_input;               /* 1: the ids name the INPUT of a layer (tap = id - 1); 0: the
                                  * output (tap = id): the first id 1 means output (SGLang's rule) */
    int mtp_feedback;            /* MTP: -1 by the layout, 0 pre-norm, 1 post-norm (mtp_feedback) */
} db_drafter_config;

/* dir: a checkpoint directory (reads dir/config.json) or the path of a config file */
int db_model_config_load(db_model_config *c, const char *dir, char *err, size_t errlen);
/* target_layers: the target's layer count, for the default target_layer_ids formula */
int db_drafter_config_load(db_drafter_config *c, const char *dir, int target_layers, char *err,
                           size_t errlen);
/* The same from a config.json's text in memory (text[0..len), not necessarily NUL-terminated;
 * `label` names it in errors and in path): the step the loaders above run on the file they read. */
int db_model_config_parse(db_model_config *c, const char *label, const char *text, size_t len,
                          char *err, size_t errlen);
int db_drafter_config_parse(db_drafter_config *c, const char *label, const char *text, size_t len,
                            int target_layers, char *err, size_t errlen);

#endif
