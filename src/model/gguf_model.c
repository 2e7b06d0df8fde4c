/* gguf_model.c — GGUF metadata as model configs, GGUF tensors as a checkpoint set (see
 * gguf_model.h for the keys and names). */
#include "model/gguf_model.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* per-layer tensors: GGUF suffix after "blk.N." -> Hugging Face suffix after "layers.N." */
static const char *const layer_names[][2] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"attn_conv_base", "attention_conv.base_kernel"},
    {"attn_conv_proj.weight", "attention_conv.kernel_projection.weight"},
    {"ffn_conv_base", "mlp_conv.base_kernel"},
    {"ffn_conv_proj.weight", "mlp_conv.kernel_projection.weight"},
};

/* whole-model tensors: GGUF name -> target name, drafter name */
static const char *const model_names[][3] = {
    {"token_embd.weight", "model.embed_tokens.weight", "embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight", "norm.weight"},
    {"output.weight", "lm_head.weight", "lm_head.weight"},
    {"fc.weight", "fc.weight", "fc.weight"},
    {"enc.output_norm.weight", "hidden_norm.weight", "hidden_norm.weight"},
    {"selector_hidden.weight", "candidate_selector.hidden_projection.weight",
     "candidate_selector.hidden_projection.weight"},
    {"selector_predecessor.weight", "candidate_selector.predecessor_codebook",
     "candidate_selector.predecessor_codebook"},
    {"selector_successor.weight", "candidate_selector.successor_codebook",
     "candidate_selector.successor_codebook"},
    {"markov_w1.weight", "markov_head.markov_w1.weight", "markov_head.markov_w1.weight"},
    {"markov_w2.weight", "markov_head.markov_w2.weight", "markov_head.markov_w2.weight"},
    {"markov_w2.scale", "markov_head.markov_w2.scale", "markov_head.markov_w2.scale"},
    {"conf_proj.weight", "confidence_head.proj.weight", "confidence_head.proj.weight"},
    {"conf_proj.bias", "confidence_head.proj.bias", "confidence_head.proj.bias"},
};

/* the Hugging Face name of GGUF tensor `name` into out; unknown names pass unchanged */
static void hf_name(const char *name, int drafter, char *out, size_t n)
{
    for (size_t i = 0; i < sizeof model_names / sizeof *model_names; i++)
        if (strcmp(name, model_names[i][0]) == 0) {
            snprintf(out, n, "%s", model_names[i][drafter ? 2 : 1]);
            return;
        }
    int layer, used = 0;
    if (sscanf(name, "blk.%d.%n", &layer, &used) == 1 && used > 0 && layer >= 0)
        for (size_t i = 0; i < sizeof layer_names / sizeof *layer_names; i++)
            if (strcmp(name + used, layer_names[i][0]) == 0) {
                snprintf(out, n, "%slayers.%d.%s", drafter ? "" : "model.", layer, layer_names[i][1]);
                return;
            }
    snprintf(out, n, "%s", name);
}

static int read_arch(const db_gguf *g, char *arch, size_t n, char *err, size_t errlen)
{
    const char *s;
    size_t len;
    int rc = db_gguf_str(g, "general.architecture", 1, &s, &len, err, errlen);
    if (rc) return rc;
    if (len >= n) len = n - 1;
    memcpy(arch, s, len);
    arch[len] = 0;
    return DB_OK;
}

/* key "{arch}.suffix" */
static const char *ak(const char *arch, const char *suffix)
{
    static _Thread_local char buf[160];
    snprintf(buf, sizeof buf, "%s.%s", arch, suffix);
    return buf;
}

static int vocab_size(const db_gguf *g, const char *arch, int *out, char *err, size_t errlen)
{
    int64_t v = 0;
    int rc = db_gguf_int(g, ak(arch, "vocab_size"), 0, 0, 2, 1 << 24, &v, err, errlen);
    const db_gguf_kv *tok;
    if (!rc && !v && !(rc = db_gguf_array(g, "tokenizer.ggml.tokens", 0, DB_GGUF_STRING, &tok, err, errlen)) && tok)
        v = (int64_t)tok->n;
    static const char *rows_of[] = {"token_embd.weight", "output.weight", "selector_predecessor.weight"};
    for (size_t i = 0; !rc && !v && i < sizeof rows_of / sizeof *rows_of; i++) {
        const db_gguf_tensor *t = db_gguf_tensor_find(g, rows_of[i]);
        if (t && t->ndim == 2) v = t->ne[1];
    }
    if (rc) return rc;
    if (v < 2 || v > (1 << 24))
        return db_fail(err, errlen, DB_EINPUT, "%s: no vocabulary size (%s.vocab_size, tokenizer.ggml.tokens or token_embd)",
                       g->path, arch);
    *out = (int)v;
    return DB_OK;
}

static int eos_set(const db_gguf *g, db_model_config *m, char *err, size_t errlen)
{
    static const char *keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                 "tokenizer.ggml.eom_token_id"};
    m->n_eos = 0;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        int64_t v;
        int rc = db_gguf_int(g, keys[i], 0, -1, -1, m->vocab - 1, &v, err, errlen);
        if (rc) return rc;
        int seen = v < 0;
        for (int j = 0; j < m->n_eos && !seen; j++) seen = m->eos[j] == v;
        if (!seen) m->eos[m->n_eos++] = (int)v;
    }
    return DB_OK;
}

/* the shapes every architecture shares */
static int parse_base(const db_gguf *g, const char *arch, db_model_config *m, char *err, size_t errlen)
{
    int64_t H, I, L, nh, nkv, hd, ctx;
    double eps, theta;
    int rc;
    if ((rc = db_gguf_int(g, ak(arch, "embedding_length"), 1, 0, 1, 1 << 20, &H, err, errlen)) ||
        (rc = db_gguf_int(g, ak(arch, "feed_forward_length"), 1, 0, 1, 1 << 22, &I, err, errlen)) ||
        (rc = db_gguf_int(g, ak(arch, "block_count"), 1, 0, 1, DB_MAX_LAYERS, &L, err, errlen)) ||
        (rc = db_gguf_int(g, ak(arch, "attention.head_count"), 1, 0, 1, 4096, &nh, err, errlen)) ||
        (rc = db_gguf_int(g, ak(arch, "attention.head_count_kv"), 0, nh, 1, 4096, &nkv, err, errlen)) ||
        (rc = db_gguf_int(g, ak(arch, "attention.key_length"), 0, H / nh, 2, 4096, &hd, err, errlen)) ||
        (rc = db_gguf_int(g, ak(arch, "context_length"), 0, 32768, 1, 1 << 24, &ctx, err, errlen)) ||
        (rc = db_gguf_float(g, ak(arch, "attention.layer_norm_rms_epsilon"), 1, 0, &eps, err, errlen)) ||
        (rc = db_gguf_float(g, ak(arch, "rope.freq_base"), 0, 10000.0, &theta, err, errlen)))
        return rc;
    const char *st;
    size_t stl;
    if ((rc = db_gguf_str(g, ak(arch, "rope.scaling.type"), 0, &st, &stl, err, errlen))) return rc;
    if (st && !(stl == 4 && memcmp(st, "none", 4) == 0))
        return db_fail(err, errlen, DB_EINPUT, "%s: %s.rope.scaling.type '%.*s' is not implemented (only none)",
                       g->path, arch, (int)(stl > 32 ? 32 : stl), st);
    if (hd % 2 || nh % nkv || eps <= 0 || theta <= 0)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: inconsistent shapes: head_dim %lld must be even, heads %lld a multiple of kv heads %lld, eps and rope base > 0",
                       g->path, (long long)hd, (long long)nh, (long long)nkv);
    m->hidden = (int)H, m->intermediate = (int)I, m->n_layers = (int)L, m->n_heads = (int)nh;
    m->n_kv_heads = (int)nkv, m->head_dim = (int)hd, m->max_pos = (int)ctx;
    m->eps = (float)eps, m->rope_theta = (float)theta;
    m->tied = !db_gguf_tensor_find(g, "output.weight");
    if ((rc = vocab_size(g, arch, &m->vocab, err, errlen))) return rc;
    if ((rc = eos_set(g, m, err, errlen))) return rc;
    if ((rc = db_gguf_bool(g, ak(arch, "attention.causal"), 0, 1, &m->is_causal, err, errlen))) return rc;
    int64_t win;
    const db_gguf_kv *pat;
    if ((rc = db_gguf_int(g, ak(arch, "attention.sliding_window"), 0, 0, 0, 1 << 24, &win, err, errlen)) ||
        (rc = db_gguf_array(g, ak(arch, "attention.sliding_window_pattern"), win > 0, DB_GGUF_BOOL, &pat, err, errlen)))
        return rc;
    if (pat && pat->n != (uint64_t)L)
        return db_fail(err, errlen, DB_EINPUT, "%s: %s.attention.sliding_window_pattern has %llu entries for %lld layers",
                       g->path, arch, (unsigned long long)pat->n, (long long)L);
    for (int i = 0; pat && i < L; i++) m->window[i] = db_gguf_arr_int(pat, (uint64_t)i) ? (int)win : 0;
    return DB_OK;
}

int db_gguf_model_config(db_model_config *m, const char *path, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    db_gguf g;
    int rc = db_gguf_open(&g, path, err, errlen);
    if (rc) return rc;
    char arch[32];
    if (!(rc = read_arch(&g, arch, sizeof arch, err, errlen))) {
        if (strcmp(arch, "qwen3") == 0 || strcmp(arch, "llama") == 0) {
            snprintf(m->model_type, sizeof m->model_type, "%s", arch);
            m->qk_norm = strcmp(arch, "qwen3") == 0;
            rc = parse_base(&g, arch, m, err, errlen);
        } else {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: architecture '%s' is not a supported target (qwen3, llama)",
                         path, arch);
        }
    }
    db_gguf_close(&g);
    return rc;
}

static int parse_dflash(const db_gguf *g, db_drafter_config *d, int target_layers, char *err, size_t errlen)
{
    const char *a = "dflash";
    int64_t bs, mask, v;
    double mult, cap;
    const db_gguf_kv *tl;
    int rc;
    if ((rc = parse_base(g, a, &d->base, err, errlen)) ||
        (rc = db_gguf_int(g, ak(a, "block_size"), 0, 16, 2, 1024, &bs, err, errlen)) ||
        (rc = db_gguf_int(g, "tokenizer.ggml.mask_token_id", 1, 0, 0, d->base.vocab - 1, &mask, err, errlen)) ||
        (rc = db_gguf_float(g, ak(a, "logit_scale"), 0, 1.0, &mult, err, errlen)) ||
        (rc = db_gguf_float(g, ak(a, "final_logit_softcapping"), 0, 0.0, &cap, err, errlen)) ||
        (rc = db_gguf_array(g, ak(a, "target_layers"), 1, -1, &tl, err, errlen)))
        return rc;
    if (cap < 0) return db_fail(err, errlen, DB_EINPUT, "%s: dflash.final_logit_softcapping must be >= 0", g->path);
    if (tl->n < 1 || tl->n > DB_MAX_TAPS)
        return db_fail(err, errlen, DB_EINPUT, "%s: dflash.target_layers must list 1..%d layers", g->path, DB_MAX_TAPS);
    for (uint64_t i = 0; i < tl->n; i++) {
        int64_t t = db_gguf_arr_int(tl, i) - 1; /* stored as layer outputs, 1-based */
        if (t < 0 || t >= target_layers)
            return db_fail(err, errlen, DB_EINPUT, "%s: dflash.target_layers entry %lld outside the target's %d layers",
                           g->path, (long long)(t + 1), target_layers);
        d->tap_layers[d->n_taps++] = (int)t;
    }
    d->block_size = (int)bs, d->mask_token_id = (int)mask;
    d->output_multiplier = (float)mult, d->softcap = (float)cap;
    d->num_target_layers = target_layers;
    d->draft_vocab = d->base.vocab;
    d->base.qk_norm = 1;
    snprintf(d->base.model_type, sizeof d->base.model_type, "qwen3");
    d->kind = db_gguf_find(g, ak(a, "conv_kernel_size")) ? DB_DRAFTER_V2 : DB_DRAFTER_V1;
    if (db_gguf_tensor_find(g, "markov_w1.weight")) { /* DSpark: a v1 drafter plus the Markov head */
        int from_anchor;
        if (d->kind == DB_DRAFTER_V2)
            return db_fail(err, errlen, DB_EINPUT, "%s: a DSpark drafter with DFlash 2 convolutions is not supported", g->path);
        if (db_gguf_tensor_find(g, "d2t"))
            return db_fail(err, errlen, DB_EINPUT, "%s: a DSpark drafter with a reduced draft vocabulary (d2t) is read from "
                           "safetensors only", g->path);
        /* our block layout: row 0 is the anchor, rows 1.. predict; a file whose slot 0 predicts is another layout */
        if ((rc = db_gguf_bool(g, ak(a, "sample_from_anchor"), 1, 0, &from_anchor, err, errlen))) return rc;
        if (from_anchor)
            return db_fail(err, errlen, DB_EINPUT, "%s: dflash.sample_from_anchor = true (slot 0 predicts) is not this "
                           "tool's block layout (row 0 = the anchor)", g->path);
        d->kind = DB_DRAFTER_DSPARK;
        return DB_OK;
    }
    if (d->kind == DB_DRAFTER_V1) return DB_OK;
    if ((rc = db_gguf_int(g, ak(a, "conv_kernel_size"), 1, 0, 1, 64, &v, err, errlen))) return rc;
    d->conv_kernel = (int)v;
    if ((rc = db_gguf_int(g, ak(a, "conv_group_size"), 1, 0, 1, 1 << 20, &v, err, errlen))) return rc;
    d->conv_group = (int)v;
    if ((rc = db_gguf_int(g, ak(a, "selector_rank"), 1, 0, 1, 1 << 16, &v, err, errlen))) return rc;
    d->selector_rank = (int)v;
    if ((rc = db_gguf_int(g, ak(a, "selector_top_k"), 1, 0, 1, 1024, &v, err, errlen))) return rc;
    d->selector_top_k = (int)v;
    if (d->base.hidden % d->conv_group)
        return db_fail(err, errlen, DB_EINPUT, "%s: embedding_length %d is not a multiple of dflash.conv_group_size %d",
                       g->path, d->base.hidden, d->conv_group);
    if (d->selector_top_k > d->base.vocab)
        return db_fail(err, errlen, DB_EINPUT, "%s: dflash.selector_top_k exceeds the vocabulary", g->path);
    return DB_OK;
}

int db_gguf_drafter_config(db_drafter_config *d, const char *path, int target_layers, char *err,
                           size_t errlen)
{
    memset(d, 0, sizeof *d);
    snprintf(d->base.path, sizeof d->base.path, "%s", path);
    db_gguf g;
    int rc = db_gguf_open(&g, path, err, errlen);
    if (rc) return rc;
    char arch[32];
    if (!(rc = read_arch(&g, arch, sizeof arch, err, errlen))) {
        if (strcmp(arch, "dflash") == 0)
            rc = parse_dflash(&g, d, target_layers, err, errlen);
        else if (strcmp(arch, "eagle3") == 0)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: a GGUF EAGLE-3 drafter (architecture 'eagle3') is not read yet: "
                         "give its safetensors checkpoint", path);
        else
            rc = db_fail(err, errlen, DB_EINPUT, "%s: architecture '%s' is not a drafter (dflash; an MTP head in a GGUF "
                         "is not read yet)", path, arch);
    }
    db_gguf_close(&g);
    return rc;
}

/* llama files keep q / k rows in interleaved-RoPE order: per head of hd rows, GGUF row 2i + j
 * is Hugging Face row j * hd/2 + i. Undo it in the private mapping. */
static int unpermute_rows(db_gguf_tensor *t, int heads, const char *path, char *err, size_t errlen)
{
    int64_t rows = t->ndim == 2 ? t->ne[1] : 0;
    if (heads < 1 || rows % heads || (rows / heads) % 2)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s': %lld rows do not split into %d heads of even size",
                       path, t->name, (long long)rows, heads);
    size_t rb = t->nbytes / (size_t)rows, hd = (size_t)(rows / heads);
    unsigned char *tmp = db_malloc(rb * hd);
    if (!tmp) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory unpermuting tensor '%s'", path, t->name);
    for (int h = 0; h < heads; h++) {
        unsigned char *head = t->data + (size_t)h * hd * rb;
        for (size_t i = 0; i < hd / 2; i++)
            for (size_t j = 0; j < 2; j++) memcpy(tmp + (j * hd / 2 + i) * rb, head + (2 * i + j) * rb, rb);
        memcpy(head, tmp, rb * hd);
    }
    free(tmp);
    return DB_OK;
}

static int st_name_cmp(const void *a, const void *b)
{
    return strcmp(((const db_tensor *)a)->name, ((const db_tensor *)b)->name);
}

static int fill_set(db_tensor_set *s, db_gguf *g, const char *arch, char *err, size_t errlen)
{
    int drafter = strcmp(arch, "dflash") == 0, llama = strcmp(arch, "llama") == 0, rc;
    int64_t nh = 0, nkv = 0;
    if (llama && ((rc = db_gguf_int(g, ak(arch, "attention.head_count"), 1, 0, 1, 4096, &nh, err, errlen)) ||
                  (rc = db_gguf_int(g, ak(arch, "attention.head_count_kv"), 0, nh, 1, 4096, &nkv, err, errlen))))
        return rc;
    s->tensors = db_calloc((size_t)(g->ntensors ? g->ntensors : 1), sizeof *s->tensors);
    if (!s->tensors) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing %d tensors", g->path, g->ntensors);
    for (int i = 0; i < g->ntensors; i++) {
        db_gguf_tensor *t = &g->tensors[i];
        char nm[320];
        hf_name(t->name, drafter, nm, sizeof nm);
        size_t n = strlen(nm);
        int is_q = n > 23 && strcmp(nm + n - 23, "self_attn.q_proj.weight") == 0;
        int is_k = n > 23 && strcmp(nm + n - 23, "self_attn.k_proj.weight") == 0;
        if (llama && (is_q || is_k) && (rc = unpermute_rows(t, (int)(is_q ? nh : nkv), g->path, err, errlen)))
            return rc;
        db_tensor *o = &s->tensors[s->ntensors];
        o->name = db_strdup(nm);
        if (!o->name) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing tensor '%s'", g->path, nm);
        s->ntensors++;
        o->dtype = t->dtype;
        o->ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) o->shape[d] = t->ne[t->ndim - 1 - d];
        o->data = t->data;
        o->nbytes = t->nbytes;
        o->file = 0;
    }
    qsort(s->tensors, (size_t)s->ntensors, sizeof *s->tensors, st_name_cmp);
    for (int i = 1; i < s->ntensors; i++)
        if (strcmp(s->tensors[i].name, s->tensors[i - 1].name) == 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: two tensors map to '%s'", g->path, s->tensors[i].name);
    return DB_OK;
}

int db_gguf_open_tensors(db_tensor_set *s, const char *path, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", path);
    db_gguf g;
    int rc = db_gguf_open(&g, path, err, errlen);
    if (rc) return rc;
    char arch[32];
    s->files = db_calloc(1, sizeof *s->files);
    if (!s->files) rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory opening it", path);
    if (!rc && !(rc = read_arch(&g, arch, sizeof arch, err, errlen))) {
        /* the set takes the mapping: tensors point into it */
        s->nfiles = 1;
        s->files[0].path = db_strdup(path);
        s->files[0].map = g.map;
        s->files[0].size = g.size;
        s->files[0].borrowed = g.borrowed;
        g.map = NULL;
        rc = s->files[0].path ? fill_set(s, &g, arch, err, errlen) : db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory opening it", path);
        /* the mix llama-quantize was asked for (db_tensors_mix); a key of another type or out of
         * llama.cpp's range only loses the name, never the load */
        int64_t ft;
        char e2[64];
        if (!rc && db_gguf_int(&g, "general.file_type", 0, -1, -1, 1023, &ft, e2, sizeof e2) == DB_OK && ft >= 0)
            s->file_type = (int)ft + 1;
    }
    db_gguf_close(&g);
    if (rc) {
        db_tensors_close(s);
        snprintf(s->dir, sizeof s->dir, "%s", path);
    }
    return rc;
}
