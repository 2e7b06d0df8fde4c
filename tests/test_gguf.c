/* test_gguf.c — the GGUF reader (src/model/gguf.c) and GGUF checkpoints (gguf_model.c).
 *
 * 1. A small qwen3 target written here byte by byte (a GGUF writer independent of the Python
 *    one) loads, its metadata becomes the config, its tensors the weights (shape reversed from
 *    ne order), and it computes the same logits as the same weights written as safetensors.
 * 2. Bad files: every truncation of the valid file, and one mutation per check (bad magic,
 *    version, counts, lying / misaligned / overlapping offsets, unknown and unsupported types,
 *    a row not a multiple of its block, 0 or 5 dimensions, duplicate keys and tensors, nested
 *    arrays, metadata of the wrong type, a missing key, a tensor of the wrong shape) fail with
 *    DB_EINPUT and a one-line message naming the file (and the key or tensor), never a crash.
 * 3. Checkpoints converted by scripts/gguf/convert.py at test time (skipped without python3 +
 *    numpy): the F32 fixtures qwen3-f32-tied and llama-f32 (q / k rows permuted for interleaved
 *    RoPE by the converter, back on load) and the BF16 fixture qwen3-bf16-untied at BF16 give
 *    logits BITWISE equal to the safetensors checkpoint, and identical greedy ids. */
#include "engine/engine.h"
#include "model/model_test.h"
#include "model/gguf.h"
#include "model/target.h"
#include "tap.h"
#include "base/util.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

/* ------------------------------------------------------------------ a tiny GGUF writer */

typedef struct {
    unsigned char *b;
    size_t n, cap;
} buf;

static void put(buf *o, const void *p, size_t n)
{
    if (o->n + n > o->cap) {
        o->cap = (o->n + n) * 2;
        o->b = realloc(o->b, o->cap);
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void u32(buf *o, uint32_t v) { put(o, &v, 4); }
static void u64(buf *o, uint64_t v) { put(o, &v, 8); }
static void str(buf *o, const char *s)
{
    u64(o, strlen(s));
    put(o, s, strlen(s));
}
static void kv_u32(buf *o, const char *k, uint32_t v)
{
    str(o, k);
    u32(o, 4);
    u32(o, v);
}
static void kv_f32(buf *o, const char *k, float v)
{
    str(o, k);
    u32(o, 6);
    put(o, &v, 4);
}
static void kv_str(buf *o, const char *k, const char *v)
{
    str(o, k);
    u32(o, 8);
    str(o, v);
}

/* the model: H 32, I 64, 1 layer, 2 heads of 16, 1 kv head, vocab 40, tied */
enum { H = 32, FF = 64, HD = 16, NH = 2, NKV = 1, V = 40 };
typedef struct {
    const char *gguf, *hf;
    int rows, cols; /* cols = 0: a vector of rows */
} tdesc;
static const tdesc tens[] = {
    {"token_embd.weight", "model.embed_tokens.weight", V, H},
    {"output_norm.weight", "model.norm.weight", H, 0},
    {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight", H, 0},
    {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", NH * HD, H},
    {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", NKV * HD, H},
    {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight", NKV * HD, H},
    {"blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight", H, NH * HD},
    {"blk.0.attn_q_norm.weight", "model.layers.0.self_attn.q_norm.weight", HD, 0},
    {"blk.0.attn_k_norm.weight", "model.layers.0.self_attn.k_norm.weight", HD, 0},
    {"blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight", H, 0},
    {"blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight", FF, H},
    {"blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight", FF, H},
    {"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", H, FF},
};
#define NT (int)(sizeof tens / sizeof *tens)

static size_t tcount(const tdesc *t) { return (size_t)t->rows * (t->cols ? (size_t)t->cols : 1); }

static float wval(int ti, size_t i)
{
    if (tens[ti].cols == 0) return 1.0f + 0.01f * (float)((i * 7 + (size_t)ti) % 11);
    return db_fill_random_value(99 + (uint64_t)ti, i, 0.3f, 0.0f);
}

/* Offsets of the valid file's parts, for the mutations. */
typedef struct {
    size_t version, counts, block_count_type, tinfo[NT], data;
} layout;

static buf make_gguf(layout *L)
{
    buf o = {0};
    put(&o, "GGUF", 4);
    L->version = o.n;
    u32(&o, 3);
    L->counts = o.n;
    u64(&o, NT);
    u64(&o, 11);
    kv_str(&o, "general.architecture", "qwen3");
    kv_u32(&o, "qwen3.embedding_length", H);
    kv_u32(&o, "qwen3.feed_forward_length", FF);
    str(&o, "qwen3.block_count");
    L->block_count_type = o.n;
    u32(&o, 4);
    u32(&o, 1);
    kv_u32(&o, "qwen3.attention.head_count", NH);
    kv_u32(&o, "qwen3.attention.head_count_kv", NKV);
    kv_u32(&o, "qwen3.attention.key_length", HD);
    kv_f32(&o, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
    kv_f32(&o, "qwen3.rope.freq_base", 10000.0f);
    kv_u32(&o, "tokenizer.ggml.eos_token_id", 39);
    kv_u32(&o, "general.alignment", 32);
    uint64_t off = 0;
    for (int i = 0; i < NT; i++) {
        L->tinfo[i] = o.n;
        str(&o, tens[i].gguf);
        u32(&o, tens[i].cols ? 2 : 1);
        if (tens[i].cols) {
            u64(&o, (uint64_t)tens[i].cols);
            u64(&o, (uint64_t)tens[i].rows);
        } else {
            u64(&o, (uint64_t)tens[i].rows);
        }
        u32(&o, 0); /* F32 */
        u64(&o, off);
        off += (tcount(&tens[i]) * 4 + 31) / 32 * 32;
    }
    static const unsigned char zero[32];
    put(&o, zero, (32 - o.n % 32) % 32);
    L->data = o.n;
    for (int i = 0; i < NT; i++) {
        for (size_t k = 0; k < tcount(&tens[i]); k++) {
            float v = wval(i, k);
            put(&o, &v, 4);
        }
        put(&o, zero, (32 - o.n % 32) % 32);
    }
    return o;
}

/* the same weights as a safetensors checkpoint directory (config.json + model.safetensors) */
static int make_safetensors(const char *dir)
{
    char p[512], hdr[8192];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    fprintf(f, "{\"model_type\": \"qwen3\", \"hidden_size\": %d, \"intermediate_size\": %d, "
               "\"num_hidden_layers\": 1, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
               "\"head_dim\": %d, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, \"vocab_size\": %d, "
               "\"tie_word_embeddings\": true, \"eos_token_id\": 39}\n", H, FF, NH, NKV, HD, V);
    fclose(f);
    size_t w = (size_t)snprintf(hdr, sizeof hdr, "{"), off = 0;
    for (int i = 0; i < NT; i++) {
        size_t n = tcount(&tens[i]) * 4;
        if (tens[i].cols)
            w += (size_t)snprintf(hdr + w, sizeof hdr - w, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                                  i ? "," : "", tens[i].hf, tens[i].rows, tens[i].cols, off, off + n);
        else
            w += (size_t)snprintf(hdr + w, sizeof hdr - w, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                                  i ? "," : "", tens[i].hf, tens[i].rows, off, off + n);
        off += n;
    }
    w += (size_t)snprintf(hdr + w, sizeof hdr - w, "}");
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (!(f = fopen(p, "wb"))) return -1;
    uint64_t hl = w;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, w, f);
    for (int i = 0; i < NT; i++)
        for (size_t k = 0; k < tcount(&tens[i]); k++) {
            float v = wval(i, k);
            fwrite(&v, 4, 1, f);
        }
    fclose(f);
    return 0;
}

static int write_file(const char *path, const buf *b)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fwrite(b->b, 1, b->n, f);
    return fclose(f);
}

/* ------------------------------------------------------------------ logits comparison */

/* logits of tokens[0..n) in one forward call, into out [n, V]; greedy ids after it */
static int run_target(const char *dir, const int *tokens, int n, float **logits, int *vocab,
                      int *greedy, int n_greedy)
{
    db_backend *be;
    char err[512];
    db_backend_opts bo = {.deterministic = 1, .threads = 2};
    if (db_backend_create("cpu", &bo, &be, err, sizeof err) != 0) return -1;
    db_target t;
    db_target_opts o = {.slots = 2, .capacity = 64, .max_rows = 16};
    int rc = db_target_load(&t, be, dir, err, sizeof err);
    if (!rc) rc = db_target_alloc(&t, &o, err, sizeof err);
    if (rc) {
        tap_diag("%s: %s", dir, err);
        db_backend_destroy(be);
        return -1;
    }
    db_row rows[16];
    int lr[16];
    for (int i = 0; i < n; i++) rows[i] = (db_row){0, i, tokens[i]}, lr[i] = i;
    *vocab = t.cfg.vocab;
    *logits = malloc(sizeof(float) * (size_t)n * t.cfg.vocab);
    rc = db_target_forward(&t, rows, n, lr, n, err, sizeof err);
    if (!rc) memcpy(*logits, db_target_logits(&t), sizeof(float) * (size_t)n * t.cfg.vocab);
    /* greedy ids through the engine's ar path */
    db_gen_params gp = {.variant = DB_VAR_AR, .block_size = 1, .top_p = 1.0f, .max_new_tokens = n_greedy};
    db_request req = {.prompt = tokens, .n_prompt = n, .out = greedy};
    db_engine *e = NULL;
    if (!rc) rc = db_engine_create(&e, &t, NULL, &gp, 1, n, err, sizeof err);
    if (!rc) rc = db_engine_run(e, &req, 1, db_now(), NULL, NULL, err, sizeof err);
    db_engine_destroy(e);
    for (int i = rc ? 0 : req.n_out; i < n_greedy; i++) greedy[i] = -1;
    if (rc) tap_diag("%s: %s", dir, err);
    db_target_free(&t);
    db_backend_destroy(be);
    return rc;
}

static void compare_checkpoints(const char *what, const char *a, const char *b)
{
    int tokens[12] = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 11, 0}, va = 0, vb = 0, ga[24], gb[24];
    float *la = NULL, *lb = NULL;
    int ok = run_target(a, tokens, 12, &la, &va, ga, 24) == 0 && run_target(b, tokens, 12, &lb, &vb, gb, 24) == 0;
    tap_ok(ok && va == vb && memcmp(la, lb, sizeof(float) * 12 * (size_t)va) == 0,
           "%s: logits of 12 rows bitwise equal to the safetensors checkpoint", what);
    tap_ok(ok && memcmp(ga, gb, sizeof ga) == 0, "%s: 24 greedy ids identical", what);
    free(la);
    free(lb);
}

/* ------------------------------------------------------------------ bad files */

static int expect_bad(const char *what, const buf *b, const char *must, int load_target)
{
    char path[400], err[512] = "";
    snprintf(path, sizeof path, "%s/bad.gguf", tmpdir);
    write_file(path, b);
    int rc;
    if (load_target) {
        db_backend *be;
        db_backend_opts bo = {.threads = 1};
        db_backend_create("cpu", &bo, &be, err, sizeof err);
        db_target t;
        rc = db_target_load(&t, be, path, err, sizeof err);
        if (!rc) db_target_free(&t);
        db_backend_destroy(be);
    } else {
        db_gguf g;
        rc = db_gguf_open(&g, path, err, sizeof err);
        if (!rc) db_gguf_close(&g);
    }
    int ok = rc == DB_EINPUT && strstr(err, path) && !strchr(err, '\n') && (!must || strstr(err, must));
    if (what) tap_ok(ok, "%s: exit-2 error: %s", what, err);
    return ok;
}

static void patch(buf *b, size_t at, const void *v, size_t n) { memcpy(b->b + at, v, n); }

static void test_bad(const buf *good, const layout *L)
{
    /* every truncation */
    int all = 1;
    size_t worst = 0;
    for (size_t n = 0; n < good->n; n += n < L->data + 64 ? 1 : 97) {
        buf t = {good->b, n, n};
        if (!expect_bad(NULL, &t, NULL, 0) && !worst) worst = n, all = 0;
    }
    tap_ok(all, "every truncation of a valid file is a one-line input error (first miss at %zu)", worst);
    buf b = {malloc(good->n), good->n, good->n};
#define RESET() memcpy(b.b, good->b, good->n)
    RESET(); patch(&b, 0, "GGUG", 4);
    expect_bad("bad magic", &b, "magic", 0);
    uint32_t v = 1;
    RESET(); patch(&b, L->version, &v, 4);
    expect_bad("version 1", &b, "version", 0);
    uint64_t big = 1ull << 60;
    RESET(); patch(&b, L->counts, &big, 8);
    expect_bad("tensor count 2^60", &b, "cannot fit", 0);
    v = 8;
    RESET(); patch(&b, L->block_count_type, &v, 4);
    expect_bad("block_count typed as a string", &b, "qwen3.block_count", 1);
    v = 6;
    RESET(); patch(&b, L->block_count_type, &v, 4);
    expect_bad("block_count typed as f32", &b, "expected an integer", 1);
    v = 9;
    RESET(); patch(&b, L->block_count_type, &v, 4);
    expect_bad("block_count an array of 1-byte elements of an unknown count", &b, NULL, 0);
    v = 77;
    RESET(); patch(&b, L->block_count_type, &v, 4);
    expect_bad("unknown metadata value type 77", &b, "unknown value type", 0);
    /* tensor info of tensor 3 (attn_q): name, n_dims, ne0, ne1, type, offset */
    size_t ti = L->tinfo[3] + 8 + strlen(tens[3].gguf);
    v = 5;
    RESET(); patch(&b, ti, &v, 4);
    expect_bad("5 dimensions", &b, "dimensions", 0);
    uint64_t z = 0;
    RESET(); patch(&b, ti + 4, &z, 8);
    expect_bad("a zero dimension", &b, "blk.0.attn_q.weight", 0);
    v = 99;
    RESET(); patch(&b, ti + 20, &v, 4);
    expect_bad("unknown tensor type 99", &b, "unknown type", 0);
    v = 16;
    RESET(); patch(&b, ti + 20, &v, 4);
    expect_bad("unsupported type IQ2_XXS (an importance-matrix type, refused by name)", &b,
               "IQ2_XXS (16), an importance-matrix type", 0);
    v = 9;
    RESET(); patch(&b, ti + 20, &v, 4);
    expect_bad("unsupported type Q8_1", &b, "unsupported type Q8_1", 0);
    v = 12;
    RESET(); patch(&b, ti + 20, &v, 4);
    expect_bad("Q4_K rows of 32 values (block 256)", &b, "not a multiple of the Q4_K block", 0);
    uint64_t far = (uint64_t)good->n;
    RESET(); patch(&b, ti + 24, &far, 8);
    expect_bad("offset past the end", &b, "outside the data section", 0);
    uint64_t mis = 4;
    RESET(); patch(&b, ti + 24, &mis, 8);
    expect_bad("misaligned offset", &b, "alignment", 0);
    uint64_t zero_off = 0;
    RESET(); patch(&b, ti + 24, &zero_off, 8);
    expect_bad("overlapping tensors", &b, "overlap", 0);
    /* same name twice: rename tensor 4 (attn_k) to attn_q */
    RESET(); memcpy(b.b + L->tinfo[4] + 8 + strlen("blk.0.attn_"), "q", 1);
    expect_bad("duplicate tensor name", &b, "twice", 0);
    /* a duplicated key: rename feed_forward_length to embedding_length (same length) */
    RESET();
    unsigned char *k = memmem(b.b, L->data, "qwen3.feed_forward_length", 25);
    memcpy(k, "qwen3.embedding_lengthXXX", 25);
    expect_bad("unknown key, feed_forward_length missing", &b, "feed_forward_length", 1);
    /* ne1 of attn_q 31 instead of 32: shape differs from the config's */
    uint64_t rows = 31;
    RESET(); patch(&b, ti + 12, &rows, 8);
    expect_bad("wrong shape for the config", &b, "self_attn.q_proj.weight", 1);
    /* the architecture is not a target */
    RESET();
    k = memmem(b.b, L->data, "qwen3", 5); /* general.architecture's value comes first */
    memcpy(k, "gpt2x", 5);
    expect_bad("architecture gpt2x", &b, "not a supported target", 1);
    free(b.b);
}

/* ------------------------------------------------------------------ converter */

static int have_python(void)
{
    return system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

static void test_converted(void)
{
    const char *root = getenv("DB_SOURCE_ROOT");
    if (!root || !have_python()) {
        tap_ok(1, "# SKIP converter checks: no /usr/bin/python3 with numpy");
        return;
    }
    static const char *fx[][2] = {{"qwen3-f32-tied", "F32"}, {"llama-f32", "F32"}, {"qwen3-bf16-untied", "BF16"}};
    for (int i = 0; i < 3; i++) {
        char cmd[2048], out[512];
        snprintf(out, sizeof out, "%s/%s.gguf", tmpdir, fx[i][0]);
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/scripts/gguf/convert.py' '%s' '%s' --type %s",
                 root, tu_data(fx[i][0]), out, fx[i][1]);
        if (!tap_ok(system(cmd) == 0, "convert.py %s --type %s", fx[i][0], fx[i][1])) continue;
        char what[128];
        snprintf(what, sizeof what, "%s as %s GGUF", fx[i][0], fx[i][1]);
        compare_checkpoints(what, tu_data(fx[i][0]), out);
    }
}

/* Files written by llama.cpp's llama-quantize (tests/data/gguf/llama-quantize, made by
 * scripts/gguf/make-llama-fixtures with llama.cpp's logits and greedy ids on them): they load,
 * and the last prompt row's logits agree with llama.cpp's to 3% of their largest magnitude
 * (llama.cpp rounds activations to 8-bit blocks; a misread block layout is off by far more), and
 * the greedy ids agree up to a step where llama.cpp's top-2 gap is below 0.02 (an argmax tie). */
static void test_llama_quantized(void)
{
    static const char *const fx[] = {"q2_k", "q3_k_m"};
    int tokens[12] = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 11, 0};
    for (int i = 0; i < 2; i++) {
        char path[1024], txt[256], err[256], *buf = NULL;
        size_t len;
        snprintf(path, sizeof path, "gguf/llama-quantize/%s.gguf", fx[i]);
        snprintf(path, sizeof path, "%s", tu_data(path));
        snprintf(txt, sizeof txt, "gguf/llama-quantize/%s.llama.txt", fx[i]);
        if (!tap_ok(db_read_file(tu_data(txt), &buf, &len, err, sizeof err) == 0, "read %s: %s", txt, err)) continue;
        int want[8], nw = 0, v = 0, got[8];
        float gap[8], *ref = malloc(sizeof(float) * 4096), *lg = NULL;
        char *p = buf;
        for (; nw < 8 && *p != '\t'; nw++) want[nw] = (int)strtol(p, &p, 10), p += *p == ',';
        for (int k = 0; k < 8; k++) gap[k] = strtof(p + 1, &p);
        while (*p && *p != '\n') p++;
        int nref = 0;
        for (p += *p == '\n'; *p && *p != '\n' && nref < 4096; p += *p == ',') ref[nref++] = strtof(p, &p);
        int rc = run_target(path, tokens, 12, &lg, &v, got, 8);
        double dmax = 0, rmax = 0;
        for (int k = 0; !rc && k < v && k < nref; k++) {
            double d = fabs((double)lg[(size_t)11 * v + k] - ref[k]);
            dmax = d > dmax ? d : dmax;
            rmax = fabs(ref[k]) > rmax ? fabs(ref[k]) : rmax;
        }
        tap_ok(!rc && nw == 8 && nref == v && dmax <= 0.03 * rmax,
               "llama-quantize %s: loads; last-row logits within %.4f of llama.cpp's (3%% of %.3f)", fx[i], dmax, rmax);
        int k = 0;
        while (k < 8 && got[k] == want[k]) k++;
        tap_ok(!rc && (k == 8 || gap[k] < 0.02f),
               "llama-quantize %s: greedy ids == llama.cpp's%s (first %d equal%s)", fx[i],
               k == 8 ? "" : " up to an argmax tie", k, k == 8 ? "" : ", then llama.cpp's top-2 gap below 0.02");
        free(lg);
        free(ref);
        free(buf);
    }
}

/* db_tensors_mix: general.file_type names the mix when present (llama-quantize's Q4_K_M of
 * narrow rows is mostly Q5_0); without it, the tensor type counts (main type, _s/_m/_l from the
 * Q6_K / Q5_K / Q4_K matrices mixed in), vectors not counted */
static void test_mix(void)
{
    static const struct {
        int file_type;      /* general.file_type + 1, 0: absent */
        db_dtype t[4];      /* four matrices of 256 x 256 (t[3]: 256 x 1024, the largest) */
        const char *want;
    } cases[] = {
        {16, {DB_Q5_0, DB_Q5_0, DB_Q6_K, DB_Q5_0}, "q4_k_m"},
        {0, {DB_Q4_K, DB_Q4_K, DB_Q6_K, DB_Q4_K}, "q4_k_m"},
        {0, {DB_Q4_K, DB_Q5_K, DB_Q5_K, DB_Q4_K}, "q4_k_s"},
        {0, {DB_Q5_K, DB_Q6_K, DB_Q6_K, DB_Q5_K}, "q5_k_m"},
        {0, {DB_Q3_K, DB_Q5_K, DB_Q4_K, DB_Q3_K}, "q3_k_l"},
        {0, {DB_Q3_K, DB_Q4_K, DB_Q4_K, DB_Q3_K}, "q3_k_m"},
        {0, {DB_Q3_K, DB_Q3_K, DB_Q8_0, DB_Q3_K}, "q3_k_s"},
        {0, {DB_Q8_0, DB_Q8_0, DB_Q8_0, DB_Q6_K}, "q6_k"},
        {8, {DB_Q8_0, DB_Q8_0, DB_Q8_0, DB_Q8_0}, "q8_0"},
        {31, {DB_IQ4_NL, DB_IQ4_NL, DB_IQ4_XS, DB_IQ4_XS}, "iq4_xs"},
        {6, {DB_Q4_0, DB_Q4_0, DB_Q4_0, DB_Q4_0}, "q4_0"}, /* a retired file type: the counts */
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        db_tensor ts[5] = {{0}};
        for (int k = 0; k < 4; k++)
            ts[k] = (db_tensor){.dtype = cases[i].t[k], .ndim = 2, .shape = {k == 3 ? 1024 : 256, 256}};
        ts[4] = (db_tensor){.dtype = DB_F32, .ndim = 1, .shape = {1 << 20}};
        db_tensor_set s = {.tensors = ts, .ntensors = 5, .file_type = cases[i].file_type};
        char got[16];
        db_tensors_mix(&s, got, sizeof got);
        if (strcmp(got, cases[i].want)) {
            ok = 0;
            tap_diag("mix case %zu: %s, want %s", i, got, cases[i].want);
        }
    }
    tap_ok(ok, "file mix names: general.file_type when present, else from the tensor type counts");
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/db-test-gguf-XXXXXX");
    if (!mkdtemp(tmpdir)) tap_skip_all("no temporary directory");
    layout L;
    buf good = make_gguf(&L);
    char gp[400], sd[400];
    snprintf(gp, sizeof gp, "%s/tiny.gguf", tmpdir);
    snprintf(sd, sizeof sd, "%s/st", tmpdir);
    tap_ok(write_file(gp, &good) == 0 && mkdir(sd, 0755) == 0 && make_safetensors(sd) == 0, "fixture files written");
    db_gguf g;
    char err[512];
    int rc = db_gguf_open(&g, gp, err, sizeof err);
    tap_ok(rc == 0, "valid file opens: %s", rc ? err : "ok");
    if (!rc) {
        const db_gguf_tensor *t = db_gguf_tensor_find(&g, "blk.0.ffn_down.weight");
        tap_ok(g.version == 3 && g.ntensors == NT && g.nkv == 11 && t && t->ne[0] == FF && t->ne[1] == H &&
                   t->dtype == DB_F32 && t->nbytes == (size_t)FF * H * 4,
               "header, metadata and tensor infos as written");
        db_gguf_close(&g);
    }
    db_model_config c;
    rc = db_model_config_load(&c, gp, err, sizeof err);
    tap_ok(rc == 0 && c.hidden == H && c.intermediate == FF && c.n_layers == 1 && c.n_heads == NH &&
               c.n_kv_heads == NKV && c.head_dim == HD && c.vocab == V && c.tied && c.qk_norm &&
               c.n_eos == 1 && c.eos[0] == 39 && c.eps == 1e-6f && c.rope_theta == 10000.0f,
           "metadata -> config (vocab from token_embd, tied without output.weight)");
    compare_checkpoints("hand-written GGUF", sd, gp);
    compare_checkpoints("GGUF given as its directory", sd, tmpdir);
    test_bad(&good, &L);
    test_mix();
    test_llama_quantized();
    test_converted();
    free(good.b);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) tap_diag("could not remove %s", tmpdir);
    return tap_done();
}
