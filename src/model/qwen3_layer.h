/* qwen3_layer.h — weights and sublayers of one Qwen3 / LLaMA decoder layer (tensor names:
 * docs/checkpoints.md), shared by the target and the DFlash drafter.
 *
 * Notation: N rows, H hidden, nh / nkv heads, hd head dim, I intermediate. */
#ifndef DB_QWEN3_LAYER_H
#define DB_QWEN3_LAYER_H

#include "backend.h"
#include "model/model_config.h"
#include "model/safetensors.h"

typedef struct {
    float *attn_norm;           /* [H] f32 (input_layernorm) */
    db_weight wq;               /* [nh*hd, H] */
    db_weight wk;               /* [nkv*hd, H] */
    db_weight wv;               /* [nkv*hd, H] */
    db_weight wo;               /* [H, nh*hd] */
    float *q_norm, *k_norm;     /* [hd] f32; NULL without q/k norm (LLaMA) */
    float *mlp_norm;            /* [H] f32 (post_attention_layernorm) */
    db_weight gate, up;         /* [I, H] */
    db_weight down;             /* [H, I] */
} db_layer;

/* Load layer tensors named `prefix` + "self_attn.q_proj.weight" etc., shapes from c. */
int db_layer_load(db_layer *l, db_backend *be, const db_tensor_set *st, const db_model_config *c,
                  const char *prefix, char *err, size_t errlen);
void db_layer_free(db_layer *l, db_backend *be);

/* Upload tensor `name` as a matrix [rows, cols] in its file dtype / as an f32 vector [n]; on a
 * synthetic set (safetensors.h) generate it on the backend instead (synthetic.h). */
int db_load_matrix(db_weight *w, db_backend *be, const db_tensor_set *st, const char *name, int rows,
                   int cols, char *err, size_t errlen);
int db_load_vector(float **out, db_backend *be, const db_tensor_set *st, const char *name, int n,
                   char *err, size_t errlen);

/* q[N, nh*hd], k/v[N, nkv*hd] from the normed input xn[N, H]: projections, q/k norm, RoPE at
 * pos[N] (host). */
void db_layer_qkv(db_backend *be, const db_model_config *c, const db_layer *l, const float *xn,
                  float *q, float *k, float *v, const int *pos, int n);
/* y[N, H] (+)= down(silu(gate xn) * up xn); scratch gate/up [N, I] */
void db_layer_mlp(db_backend *be, const db_layer *l, const float *xn, float *gate, float *up,
                  float *y, int n, int accumulate);

#endif
