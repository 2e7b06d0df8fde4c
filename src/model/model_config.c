/* model_config.c — config.json parsing for targets and drafters (see model_config.h). */
#include "model/model_config.h"
#include "model/gguf_model.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
} ctx;

static int get_int(ctx *c, const cJSON *o, const char *key, int required, int dflt, int lo,
                   int hi, int *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) {
        if (required) return db_fail(c->err, c->errlen, DB_EINPUT, "%s: missing key '%s'", c->path, key);
        *out = dflt;
        return DB_OK;
    }
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < lo ||
        j->valuedouble > hi)
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: key '%s' must be an integer in [%d, %d]",
                       c->path, key, lo, hi);
    *out = (int)j->valuedouble;
    return DB_OK;
}

static int get_float(ctx *c, const cJSON *o, const char *key, int required, float dflt,
                     float *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) {
        if (required) return db_fail(c->err, c->errlen, DB_EINPUT, "%s: missing key '%s'", c->path, key);
        *out = dflt;
        return DB_OK;
    }
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: key '%s' must be a number", c->path, key);
    *out = (float)j->valuedouble;
    return DB_OK;
}

static int check_rope_type(ctx *c, const cJSON *o, const char *where)
{
    if (!cJSON_IsObject(o)) return DB_OK;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "rope_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (t && (!cJSON_IsString(t) || strcmp(t->valuestring, "default") != 0))
        return db_fail(c->err, c->errlen, DB_EINPUT,
                       "%s: %s.rope_type '%s' is not implemented (only 'default')", c->path, where,
                       cJSON_IsString(t) ? t->valuestring : "?");
    return DB_OK;
}

static int parse_base(ctx *c, const cJSON *root, db_model_config *m)
{
    int rc;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!cJSON_IsString(mt)) return db_fail(c->err, c->errlen, DB_EINPUT, "%s: missing key 'model_type'", c->path);
    snprintf(m->model_type, sizeof m->model_type, "%s", mt->valuestring);
    static const char *const hybrid[] = {"qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text"};
    for (size_t i = 0; i < sizeof hybrid / sizeof *hybrid; i++)
        if (strcmp(m->model_type, hybrid[i]) == 0)
            return db_fail(c->err, c->errlen, DB_EINPUT,
                           "%s: model_type '%s' is a hybrid (linear-attention) model: not supported, nor its "
                           "MTP head (qwen3, llama, mistral targets only)", c->path, m->model_type);
    if (strcmp(m->model_type, "qwen3") == 0) m->qk_norm = 1;
    else if (strcmp(m->model_type, "llama") == 0 || strcmp(m->model_type, "mistral") == 0) m->qk_norm = 0;
    else
        return db_fail(c->err, c->errlen, DB_EINPUT,
                       "%s: model_type '%s' is not supported (qwen3, llama, mistral)", c->path,
                       m->model_type);
    if ((rc = get_int(c, root, "hidden_size", 1, 0, 1, 1 << 20, &m->hidden)) ||
        (rc = get_int(c, root, "intermediate_size", 1, 0, 1, 1 << 22, &m->intermediate)) ||
        (rc = get_int(c, root, "num_hidden_layers", 1, 0, 1, DB_MAX_LAYERS, &m->n_layers)) ||
        (rc = get_int(c, root, "num_attention_heads", 1, 0, 1, 4096, &m->n_heads)) ||
        (rc = get_int(c, root, "num_key_value_heads", 0, m->n_heads, 1, 4096, &m->n_kv_heads)) ||
        (rc = get_int(c, root, "vocab_size", 1, 0, 2, 1 << 24, &m->vocab)) ||
        (rc = get_int(c, root, "max_position_embeddings", 0, 32768, 1, 1 << 24, &m->max_pos)) ||
        (rc = get_float(c, root, "rms_norm_eps", 1, 0, &m->eps)))
        return rc;
    if (m->hidden % m->n_heads && !cJSON_GetObjectItemCaseSensitive(root, "head_dim"))
        return db_fail(c->err, c->errlen, DB_EINPUT,
                       "%s: hidden_size %d is not a multiple of num_attention_heads %d and no head_dim",
                       c->path, m->hidden, m->n_heads);
    if ((rc = get_int(c, root, "head_dim", 0, m->hidden / m->n_heads, 2, 4096, &m->head_dim))) return rc;
    if (m->head_dim % 2)
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: head_dim %d is odd (RoPE rotates halves)", c->path, m->head_dim);
    if (m->n_heads % m->n_kv_heads)
        return db_fail(c->err, c->errlen, DB_EINPUT,
                       "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                       c->path, m->n_heads, m->n_kv_heads);
    if (m->eps <= 0) return db_fail(c->err, c->errlen, DB_EINPUT, "%s: rms_norm_eps must be > 0", c->path);
    const char *mk = cJSON_GetObjectItemCaseSensitive(root, "mtp_num_hidden_layers") ? "mtp_num_hidden_layers"
                                                                                     : "num_nextn_predict_layers";
    if ((rc = get_int(c, root, mk, 0, 0, 0, 64, &m->mtp_layers))) return rc;
    /* rope_theta: top level (older configs) or rope_parameters.rope_theta (newer) */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if ((rc = check_rope_type(c, rp, "rope_parameters")) || (rc = check_rope_type(c, rs, "rope_scaling")))
        return rc;
    if (cJSON_GetObjectItemCaseSensitive(root, "rope_theta"))
        rc = get_float(c, root, "rope_theta", 1, 0, &m->rope_theta);
    else if (cJSON_IsObject(rp))
        rc = get_float(c, rp, "rope_theta", 1, 0, &m->rope_theta);
    else
        rc = db_fail(c->err, c->errlen, DB_EINPUT, "%s: missing key 'rope_theta' (or rope_parameters.rope_theta)", c->path);
    if (rc) return rc;
    if (m->rope_theta <= 0) return db_fail(c->err, c->errlen, DB_EINPUT, "%s: rope_theta must be > 0", c->path);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie)) return db_fail(c->err, c->errlen, DB_EINPUT, "%s: tie_word_embeddings must be a boolean", c->path);
    m->tied = tie ? cJSON_IsTrue(tie) : 0;
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    m->n_eos = 0;
    if (cJSON_IsNumber(eos)) {
        if (eos->valuedouble != floor(eos->valuedouble))
            return db_fail(c->err, c->errlen, DB_EINPUT, "%s: eos_token_id must be an integer", c->path);
        m->eos[m->n_eos++] = eos->valueint;
    } else if (cJSON_IsArray(eos)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, eos)
        {
            if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || m->n_eos == DB_MAX_EOS)
                return db_fail(c->err, c->errlen, DB_EINPUT, "%s: eos_token_id must be an int or a list of at most %d ints", c->path, DB_MAX_EOS);
            m->eos[m->n_eos++] = e->valueint;
        }
    } else if (eos && !cJSON_IsNull(eos)) {
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: eos_token_id must be an int or a list", c->path);
    }
    for (int i = 0; i < m->n_eos; i++)
        if (m->eos[i] < 0 || m->eos[i] >= m->vocab)
            return db_fail(c->err, c->errlen, DB_EINPUT, "%s: eos_token_id %d outside the vocabulary", c->path, m->eos[i]);
    /* sliding windows per layer (drafters); full attention elsewhere */
    const cJSON *causal = cJSON_GetObjectItemCaseSensitive(root, "is_causal");
    m->is_causal = causal ? !cJSON_IsFalse(causal) : 1;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    int win = 0;
    if (lt) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != m->n_layers)
            return db_fail(c->err, c->errlen, DB_EINPUT, "%s: layer_types must list %d layer types", c->path, m->n_layers);
        int need_window = 0;
        for (int i = 0; i < m->n_layers; i++) {
            const cJSON *t = cJSON_GetArrayItem(lt, i);
            if (!cJSON_IsString(t)) return db_fail(c->err, c->errlen, DB_EINPUT, "%s: layer_types[%d] is not a string", c->path, i);
            if (strcmp(t->valuestring, "sliding_attention") == 0) need_window = 1;
            else if (strcmp(t->valuestring, "full_attention") != 0)
                return db_fail(c->err, c->errlen, DB_EINPUT, "%s: layer_types[%d] '%s' is not supported", c->path, i, t->valuestring);
        }
        if (need_window && (rc = get_int(c, root, "sliding_window", 1, 0, 1, 1 << 24, &win))) return rc;
        for (int i = 0; i < m->n_layers; i++)
            m->window[i] = strcmp(cJSON_GetArrayItem(lt, i)->valuestring, "sliding_attention") == 0 ? win : 0;
    }
    return DB_OK;
}

/* text[0..len) of the config file `path` as a JSON object */
static int parse_json(const char *path, const char *text, size_t len, cJSON **root, char *err,
                      size_t errlen)
{
    int oom;
    *root = db_json_parse(text, len, &oom);
    if (oom) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory parsing it", path);
    if (!*root || !cJSON_IsObject(*root)) {
        cJSON_Delete(*root);
        *root = NULL;
        return db_fail(err, errlen, DB_EINPUT, "%s: not a JSON object", path);
    }
    return DB_OK;
}

/* dir: a checkpoint directory (its config.json) or a config file itself (--target-config) */
static int load_json(const char *dir, char *path, size_t pathlen, cJSON **root, char *err, size_t errlen)
{
    struct stat sb;
    /* reported as given: "/x.json/config.json" would send the reader to the wrong path */
    if (stat(dir, &sb) != 0) return db_fail(err, errlen, DB_EINPUT, "%s: cannot open: %s", dir, strerror(errno));
    if (S_ISREG(sb.st_mode)) {
        if (strlen(dir) >= pathlen) return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
        snprintf(path, pathlen, "%s", dir);
    } else if (db_path_join(path, pathlen, dir, "config.json") != 0) {
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    }
    char *txt;
    size_t len;
    int rc = db_read_file_max(path, DB_MAX_CONFIG_BYTES, &txt, &len, err, errlen);
    if (rc) return rc;
    rc = parse_json(path, txt, len, root, err, errlen);
    free(txt);
    return rc;
}

/* a target's config from its JSON object (deleted here); m->path names it */
static int model_from_json(db_model_config *m, cJSON *root, char *err, size_t errlen)
{
    ctx c = {m->path, err, errlen};
    int rc = parse_base(&c, root, m);
    cJSON_Delete(root);
    return rc;
}

int db_model_config_load(db_model_config *m, const char *dir, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    char gp[1024];
    int g = db_gguf_resolve(dir, gp, sizeof gp, err, errlen);
    if (g) return g < 0 ? g : db_gguf_model_config(m, gp, err, errlen);
    cJSON *root;
    int rc = load_json(dir, m->path, sizeof m->path, &root, err, errlen);
    return rc ? rc : model_from_json(m, root, err, errlen);
}

int db_model_config_parse(db_model_config *m, const char *label, const char *text, size_t len,
                          char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", label);
    cJSON *root;
    int rc = parse_json(m->path, text, len, &root, err, errlen);
    return rc ? rc : model_from_json(m, root, err, errlen);
}

static int has_arch(const cJSON *root, const char *name)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "architectures"), *e;
    cJSON_ArrayForEach(e, a) if (cJSON_IsString(e) && strcmp(e->valuestring, name) == 0) return 1;
    return 0;
}

/* DSpark keys (docs/checkpoints.md): markov_head_type "vanilla" (or absent), draft_vocab_size
 * Vd <= V (default V); the DFlash 2 convolution keys are refused (not implemented for DSpark) */
static int parse_dspark(ctx *c, const cJSON *root, const cJSON *dc, db_drafter_config *d)
{
    static const char *const conv_keys[] = {"conv_kernel_size", "conv_group_size"};
    for (int i = 0; i < 2; i++)
        if (cJSON_GetObjectItemCaseSensitive(dc, conv_keys[i]) || cJSON_GetObjectItemCaseSensitive(root, conv_keys[i]))
            return db_fail(c->err, c->errlen, DB_EINPUT,
                           "%s: key '%s': a DSpark drafter with DFlash 2 convolutions is not supported",
                           c->path, conv_keys[i]);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "markov_head_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(dc, "markov_head_type");
    if (t && !cJSON_IsNull(t) && (!cJSON_IsString(t) || strcmp(t->valuestring, "vanilla") != 0))
        return db_fail(c->err, c->errlen, DB_EINPUT,
                       "%s: markov_head_type '%s' is not implemented (only 'vanilla')", c->path,
                       cJSON_IsString(t) ? t->valuestring : "?");
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "draft_vocab_size") ? root : dc;
    return get_int(c, o, "draft_vocab_size", 0, d->base.vocab, 1, d->base.vocab, &d->draft_vocab);
}

/* ---- EAGLE-3 and MTP (docs/checkpoints.md): chain drafters, DB_MAX_BLOCK as block size ---- */

static void chain_defaults(db_drafter_config *d, int target_layers)
{
    d->block_size = DB_MAX_BLOCK;
    d->num_target_layers = target_layers;
    d->mask_token_id = -1;
    d->output_multiplier = 1.0f;
    d->draft_vocab = d->base.vocab;
    d->target_hidden = d->base.hidden;
    d->mtp_feedback = -1;
}

/* eagle_aux_hidden_state_layer_ids -> the target taps (the residual stream after layer i): the
 * first id 1 -> output of layer id; else input of layer id (tap id - 1; id L: the last layer's
 * output); absent: EAGLE's input-of-layer {2, L/2, L-3} */
static int eagle3_taps(ctx *c, const cJSON *ids, db_drafter_config *d, int L)
{
    if (!ids || cJSON_IsNull(ids)) {
        int dflt[3] = {2, L / 2, L - 3};
        d->aux_input = 1;
        d->n_taps = 3;
        for (int i = 0; i < 3; i++) {
            d->tap_layers[i] = dflt[i] - 1;
            if (d->tap_layers[i] < 0)
                return db_fail(c->err, c->errlen, DB_EINPUT,
                               "%s: no eagle_aux_hidden_state_layer_ids, and EAGLE's default {2, L/2, L-3} does not "
                               "fit a %d-layer target", c->path, L);
        }
        return DB_OK;
    }
    if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) < 1 || cJSON_GetArraySize(ids) > DB_MAX_TAPS)
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: eagle_aux_hidden_state_layer_ids must list 1..%d layer ids",
                       c->path, DB_MAX_TAPS);
    const cJSON *e;
    cJSON_ArrayForEach(e, ids)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 || e->valuedouble > 1e6)
            return db_fail(c->err, c->errlen, DB_EINPUT, "%s: eagle_aux_hidden_state_layer_ids holds a non-integer entry",
                           c->path);
        d->aux_ids[d->n_aux++] = e->valueint;
    }
    d->aux_input = d->aux_ids[0] != 1;
    d->n_taps = d->n_aux;
    for (int i = 0; i < d->n_aux; i++) {
        int t = d->aux_ids[i] - d->aux_input;
        if (t < 0 || t >= L)
            return db_fail(c->err, c->errlen, DB_EINPUT,
                           "%s: eagle_aux_hidden_state_layer_ids entry %d (%s of layer %d) is outside the target's %d "
                           "layers", c->path, d->aux_ids[i], d->aux_input ? "input" : "output", d->aux_ids[i], L);
        d->tap_layers[i] = t;
    }
    return DB_OK;
}

static int get_bool(ctx *c, const cJSON *o, const char *key, int *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) return DB_OK;
    if (!cJSON_IsBool(j)) return db_fail(c->err, c->errlen, DB_EINPUT, "%s: key '%s' must be a boolean", c->path, key);
    *out = cJSON_IsTrue(j);
    return DB_OK;
}

/* LlamaForCausalLMEagle3 / Eagle3LlamaForCausalLM (EAGLE, SpecForge) or Eagle3Speculator
 * (speculators: the layer's keys in transformer_layer_config); rope_theta absent: 10000, the
 * LlamaConfig default those configs rely on */
static int eagle3_from_json(ctx *c, cJSON *root, db_drafter_config *d, int L)
{
    d->kind = DB_DRAFTER_EAGLE3;
    cJSON *base = root;
    if (has_arch(root, "Eagle3Speculator")) {
        base = cJSON_GetObjectItemCaseSensitive(root, "transformer_layer_config");
        if (!cJSON_IsObject(base))
            return db_fail(c->err, c->errlen, DB_EINPUT, "%s: Eagle3Speculator without object 'transformer_layer_config'", c->path);
    }
    if (!cJSON_GetObjectItemCaseSensitive(base, "rope_theta") && !cJSON_GetObjectItemCaseSensitive(base, "rope_parameters") &&
        !cJSON_AddNumberToObject(base, "rope_theta", 10000.0))
        return db_fail(c->err, c->errlen, DB_ERUNTIME, "%s: out of memory", c->path);
    int rc = parse_base(c, base, &d->base);
    if (rc) return rc;
    chain_defaults(d, L);
    if (d->base.n_layers != 1)
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: num_hidden_layers %d: an EAGLE-3 drafter has one layer", c->path,
                       d->base.n_layers);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "draft_vocab_size") ? root : base;
    if ((rc = get_int(c, o, "draft_vocab_size", 0, d->base.vocab, 1, d->base.vocab, &d->draft_vocab))) return rc;
    o = cJSON_GetObjectItemCaseSensitive(root, "target_hidden_size") ? root : base;
    if ((rc = get_int(c, o, "target_hidden_size", 0, d->base.hidden, 1, 1 << 20, &d->target_hidden))) return rc;
    o = cJSON_GetObjectItemCaseSensitive(root, "norm_before_residual") ? root : base;
    if ((rc = get_bool(c, o, "norm_before_residual", &d->norm_before_residual))) return rc;
    const cJSON *ec = cJSON_GetObjectItemCaseSensitive(root, "eagle_config");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(ec, "eagle_aux_hidden_state_layer_ids");
    if (!ids) ids = cJSON_GetObjectItemCaseSensitive(root, "eagle_aux_hidden_state_layer_ids");
    return eagle3_taps(c, ids, d, L);
}

/* an MTP head: its config is the target's plus num_nextn_predict_layers / mtp_num_hidden_layers
 * (1); one tap, the target's last layer, through the target's final norm at run time */
static int mtp_from_json(ctx *c, cJSON *root, db_drafter_config *d, int L)
{
    d->kind = DB_DRAFTER_MTP;
    int rc = parse_base(c, root, &d->base);
    if (rc) return rc;
    chain_defaults(d, L);
    if (d->base.mtp_layers != 1)
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: %d MTP layers: only one is implemented (steps 2.. reuse it)",
                       c->path, d->base.mtp_layers);
    if (d->base.n_layers != L)
        return db_fail(c->err, c->errlen, DB_EINPUT,
                       "%s: num_hidden_layers %d: an MTP head's config is its target's, which has %d layers", c->path,
                       d->base.n_layers, L);
    d->num_target_layers = d->base.n_layers;
    d->base.n_layers = 1; /* the drafter's own layers: the MTP layer */
    d->n_taps = 1;
    d->tap_layers[0] = L - 1;
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(root, "mtp_feedback");
    if (fb && !cJSON_IsNull(fb)) {
        if (!cJSON_IsString(fb) || (strcmp(fb->valuestring, "pre_norm") && strcmp(fb->valuestring, "post_norm")))
            return db_fail(c->err, c->errlen, DB_EINPUT, "%s: mtp_feedback must be \"pre_norm\" or \"post_norm\"", c->path);
        d->mtp_feedback = strcmp(fb->valuestring, "post_norm") == 0;
    }
    return DB_OK;
}

/* a drafter's config from its JSON object (deleted here); d->base.path names it */
static int drafter_from_json(db_drafter_config *d, cJSON *root, int target_layers, char *err,
                             size_t errlen)
{
    int rc;
    ctx c = {d->base.path, err, errlen};
    if (has_arch(root, "LlamaForCausalLMEagle3") || has_arch(root, "Eagle3LlamaForCausalLM") ||
        has_arch(root, "Eagle3Speculator")) {
        rc = eagle3_from_json(&c, root, d, target_layers);
        cJSON_Delete(root);
        return rc;
    }
    if (!has_arch(root, "DFlash2DraftModel") && !has_arch(root, "DFlashDraftModel") &&
        (cJSON_GetObjectItemCaseSensitive(root, "mtp_num_hidden_layers") ||
         cJSON_GetObjectItemCaseSensitive(root, "num_nextn_predict_layers"))) {
        rc = mtp_from_json(&c, root, d, target_layers);
        cJSON_Delete(root);
        return rc;
    }
    if (has_arch(root, "DFlash2DraftModel")) d->kind = DB_DRAFTER_V2;
    else if (has_arch(root, "DFlashDraftModel")) d->kind = DB_DRAFTER_V1;
    else if (has_arch(root, "DSparkDraftModel") || has_arch(root, "Qwen3DSparkModel") ||
             has_arch(root, "DSparkSpeculator"))
        d->kind = DB_DRAFTER_DSPARK;
    else {
        cJSON_Delete(root);
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: architectures names none of DFlashDraftModel, DFlash2DraftModel, DSparkDraftModel, "
                       "LlamaForCausalLMEagle3, Eagle3LlamaForCausalLM, Eagle3Speculator (and no MTP layers: "
                       "num_nextn_predict_layers / mtp_num_hidden_layers)",
                       c.path);
    }
    rc = parse_base(&c, root, &d->base);
    d->draft_vocab = d->base.vocab;
    const cJSON *dc = cJSON_GetObjectItemCaseSensitive(root, "dflash_config");
    if (!rc && !cJSON_IsObject(dc)) rc = db_fail(err, errlen, DB_EINPUT, "%s: missing object 'dflash_config'", c.path);
    if (!rc) {
        if (cJSON_GetObjectItemCaseSensitive(root, "block_size"))
            rc = get_int(&c, root, "block_size", 1, 16, 2, 1024, &d->block_size);
        else
            rc = get_int(&c, dc, "block_size", 0, 16, 2, 1024, &d->block_size);
    }
    if (!rc) rc = get_int(&c, root, "num_target_layers", 0, target_layers, 1, DB_MAX_LAYERS, &d->num_target_layers);
    if (!rc) rc = get_int(&c, dc, "mask_token_id", 1, 0, 0, d->base.vocab - 1, &d->mask_token_id);
    if (!rc) rc = get_float(&c, dc, "output_multiplier", 0, 1.0f, &d->output_multiplier);
    if (!rc) rc = get_float(&c, dc, "final_logit_softcapping", 0, 0.0f, &d->softcap);
    if (!rc && d->softcap < 0) rc = db_fail(err, errlen, DB_EINPUT, "%s: final_logit_softcapping must be >= 0", c.path);
    const cJSON *ids = rc ? NULL : cJSON_GetObjectItemCaseSensitive(dc, "target_layer_ids");
    if (!rc && ids) {
        if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) < 1 || cJSON_GetArraySize(ids) > DB_MAX_TAPS)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: dflash_config.target_layer_ids must list 1..%d layer ids", c.path, DB_MAX_TAPS);
        const cJSON *e;
        if (!rc) cJSON_ArrayForEach(e, ids)
            {
                if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valueint < 0 ||
                    e->valueint >= target_layers) {
                    rc = db_fail(err, errlen, DB_EINPUT, "%s: target_layer_ids entry outside the target's %d layers", c.path, target_layers);
                    break;
                }
                d->tap_layers[d->n_taps++] = e->valueint;
            }
    } else if (!rc) {
        /* default taps (docs/checkpoints.md): n = drafter layers; n = 1 -> [N/2];
         * else round(1 + i(N-4)/(n-1)) */
        int n = d->base.n_layers, N = target_layers;
        if (n > DB_MAX_TAPS) n = DB_MAX_TAPS;
        d->n_taps = n;
        for (int i = 0; i < n; i++) {
            int v = n == 1 ? N / 2 : (int)lround(1.0 + (double)i * (N - 4) / (double)(n - 1));
            if (v < 0 || v >= N) rc = db_fail(err, errlen, DB_EINPUT, "%s: default target_layer_ids fall outside a %d-layer target", c.path, N);
            d->tap_layers[i] = v;
        }
    }
    if (!rc && d->kind == DB_DRAFTER_V2) {
        if ((rc = get_int(&c, dc, "conv_kernel_size", 1, 0, 1, 64, &d->conv_kernel)) ||
            (rc = get_int(&c, dc, "conv_group_size", 1, 0, 1, 1 << 20, &d->conv_group)) ||
            (rc = get_int(&c, dc, "selector_rank", 1, 0, 1, 1 << 16, &d->selector_rank)) ||
            (rc = get_int(&c, dc, "selector_top_k", 1, 0, 1, 1024, &d->selector_top_k)))
            ;
        else if (d->base.hidden % d->conv_group)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: hidden_size %d is not a multiple of conv_group_size %d", c.path, d->base.hidden, d->conv_group);
        else if (d->selector_top_k > d->base.vocab)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: selector_top_k exceeds the vocabulary", c.path);
    }
    if (!rc && d->kind == DB_DRAFTER_DSPARK) rc = parse_dspark(&c, root, dc, d);
    cJSON_Delete(root);
    return rc;
}

int db_drafter_config_load(db_drafter_config *d, const char *dir, int target_layers, char *err,
                           size_t errlen)
{
    memset(d, 0, sizeof *d);
    char gp[1024];
    int g = db_gguf_resolve(dir, gp, sizeof gp, err, errlen);
    if (g) return g < 0 ? g : db_gguf_drafter_config(d, gp, target_layers, err, errlen);
    cJSON *root;
    int rc = load_json(dir, d->base.path, sizeof d->base.path, &root, err, errlen);
    return rc ? rc : drafter_from_json(d, root, target_layers, err, errlen);
}

int db_drafter_config_parse(db_drafter_config *d, const char *label, const char *text, size_t len,
                            int target_layers, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    snprintf(d->base.path, sizeof d->base.path, "%s", label);
    cJSON *root;
    int rc = parse_json(d->base.path, text, len, &root, err, errlen);
    return rc ? rc : drafter_from_json(d, root, target_layers, err, errlen);
}
