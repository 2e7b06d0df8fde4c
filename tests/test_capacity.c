/* test_capacity.c — capacity planning (issue 8):
 *   fill_random: the documented formula (golden values), the CPU op == the host reference for
 *     every dtype, independent of the thread count and of chunking (offset), sane moments;
 *   synthetic models: bit-identical for the same seed and shapes, different for another seed,
 *     a tensor unchanged when another layer is added; the memory model equals what the loaders
 *     and the engine allocate, byte for byte (also with f16 K/V caches: half the f32 KV bytes);
 *     a backend without the f16 cache ops refuses f16 caches naming itself;
 *   acceptance replay: an all-ones profile commits B tokens every cycle (tau == B), all-zeros
 *     tau == 1; measured conditional rates within a 3-sigma binomial bound of the profile; the
 *     replayed acceptance does not depend on the drafter's tokens (dflash == dflash2 counts);
 *   profiles: two-column files, acceptance.csv with one / several points, bad rates;
 *   roofline: memory-bound time = bytes / bandwidth; the K-flat verify forward is the cycle's
 *     verify at N = 1 and its parts add up where the roofline says they do;
 *   CLI: `run --synthetic -o csv` rows carry weights=synthetic and acceptance_source
 *     measured / replay:<file>, --predict fills predicted_tok_s; a too-large request is refused
 *     with exit 2 before anything is allocated; `plan -o json` measures and predicts.
 * Models are a tiny synthetic pair written here (hidden 64, 2 layers, vocab 512). */
#include "config.h"
#include "backend.h"
#include "bench/capacity.h"
#include "bench/device_probe.h"
#include "base/csv_io.h"
#include "engine/engine.h"
#include "bench/profile.h"
#include "engine/session.h"
#include "model/synthetic.h"
#include "tap.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#if HAVE_OPENMP
#include <omp.h>
#endif

static char dir[256], tcfg[300], dcfg[300], tcfg3[300];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        printf("Bail out! cannot write %s\n", path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static const char *target_json =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":64,"
    "\"intermediate_size\":128,\"num_hidden_layers\":%d,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":2,\"head_dim\":16,\"vocab_size\":512,\"rms_norm_eps\":1e-6,"
    "\"rope_theta\":1000000,\"tie_word_embeddings\":true,\"eos_token_id\":1}\n";
static const char *drafter_json =
    "{\"architectures\":[\"DFlash2DraftModel\"],\"model_type\":\"qwen3\",\"hidden_size\":64,"
    "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":2,\"head_dim\":16,\"vocab_size\":512,\"rms_norm_eps\":1e-6,"
    "\"rope_theta\":1000000,\"is_causal\":false,\"layer_types\":[\"sliding_attention\","
    "\"sliding_attention\"],\"sliding_window\":2048,\"num_target_layers\":2,"
    "\"dflash_config\":{\"block_size\":16,\"conv_kernel_size\":2,\"conv_group_size\":16,"
    "\"selector_rank\":16,\"selector_top_k\":4,\"target_layer_ids\":[0,1],\"mask_token_id\":511,"
    "\"final_logit_softcapping\":20.0}}\n";

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s/db-capacity-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        exit(1);
    }
    char buf[2048];
    snprintf(tcfg, sizeof tcfg, "%s/target.json", dir);
    snprintf(tcfg3, sizeof tcfg3, "%s/target3.json", dir);
    snprintf(dcfg, sizeof dcfg, "%s/drafter.json", dir);
    snprintf(buf, sizeof buf, target_json, 2);
    write_file(tcfg, buf);
    snprintf(buf, sizeof buf, target_json, 3);
    write_file(tcfg3, buf);
    write_file(dcfg, drafter_json);
}

static void cleanup(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
}

static db_backend *cpu(int threads)
{
    db_backend *be;
    char err[256];
    db_backend_opts o = {.threads = threads};
    if (db_backend_create("cpu", &o, &be, err, sizeof err) != 0) {
        printf("Bail out! %s\n", err);
        exit(1);
    }
    return be;
}

/* ---- fill_random ---- */

static void test_fill_random(void)
{
    /* the formula of backend.h, computed independently (Python) */
    static const struct {
        uint64_t seed, k;
        float scale, mean;
        uint32_t bits;
    } golden[] = {
        {0, 0, 1.0f, 0.0f, 1061437776u},
        {12345, 7, 0.5f, 1.0f, 1064203281u},
        {0xdeadbeefull, 1000000, 0.0625f, -0.25f, 3194685056u},
        {0xffffffffffffffffull, 1ull << 40, 3.0f, 0.1f, 3202574833u},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof golden / sizeof *golden; i++) {
        float v = db_fill_random_value(golden[i].seed, golden[i].k, golden[i].scale, golden[i].mean);
        uint32_t b;
        memcpy(&b, &v, 4);
        if (b != golden[i].bits) {
            ok = 0;
            tap_diag("value(%llu, %llu) bits %u, expected %u", (unsigned long long)golden[i].seed,
                     (unsigned long long)golden[i].k, b, golden[i].bits);
        }
    }
    tap_ok(ok, "fill_random formula: golden values (splitmix64 of seed + (k+1)*gamma)");

    db_backend *be = cpu(0);
    const size_t n = 300007;
    const db_dtype dts[3] = {DB_F32, DB_BF16, DB_F16};
    for (int t = 0; t < 3; t++) {
        size_t es = db_dtype_size(dts[t]);
        void *dev = be->ops->alloc(be, n * es), *host = malloc(n * es), *dev1 = be->ops->alloc(be, n * es);
        be->ops->fill_random(be, dev, n, dts[t], 42, 5, 0.25f, 0.5f);
        db_fill_random_host(host, n, dts[t], 42, 5, 0.25f, 0.5f);
        int same = memcmp(dev, host, n * es) == 0;
#if HAVE_OPENMP
        int nt = omp_get_max_threads();
        omp_set_num_threads(1);
        be->ops->fill_random(be, dev1, n, dts[t], 42, 5, 0.25f, 0.5f);
        omp_set_num_threads(nt > 1 ? nt : 2);
#else
        be->ops->fill_random(be, dev1, n, dts[t], 42, 5, 0.25f, 0.5f);
#endif
        int threads_same = memcmp(dev, dev1, n * es) == 0;
        /* chunking: the tail filled alone at its offset equals the tail of the whole */
        size_t h = 123457;
        be->ops->fill_random(be, dev1, n - h, dts[t], 42, 5 + h, 0.25f, 0.5f);
        int chunk_same = memcmp((char *)dev + h * es, dev1, (n - h) * es) == 0;
        tap_ok(same && threads_same && chunk_same,
               "fill_random %s: CPU op == host reference (%d), 1 thread == all (%d), offset chunk == slice (%d)",
               db_dtype_name(dts[t]), same, threads_same, chunk_same);
        be->ops->dfree(be, dev);
        be->ops->dfree(be, dev1);
        free(host);
    }
    /* moments: uniform on [mean - scale, mean + scale) */
    float *x = be->ops->alloc(be, sizeof(float) * n);
    db_fill_random(be, x, n, DB_F32, 9, 0, 2.0f, 1.0f);
    double s = 0, s2 = 0, lo = 1e9, hi = -1e9;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    double mean = s / n, sd = sqrt(s2 / n - mean * mean);
    tap_ok(fabs(mean - 1.0) < 0.01 && fabs(sd - 2.0 / sqrt(3.0)) < 0.01 && lo >= -1.0 && hi < 3.0,
           "fill_random moments: mean %.4f (1), std %.4f (%.4f), range [%.3f, %.3f)", mean, sd,
           2.0 / sqrt(3.0), lo, hi);
    /* a different seed gives a different stream */
    float *y = be->ops->alloc(be, sizeof(float) * n);
    db_fill_random(be, y, n, DB_F32, 10, 0, 2.0f, 1.0f);
    tap_ok(memcmp(x, y, sizeof(float) * n) != 0, "fill_random: another seed, other values");
    be->ops->dfree(be, x);
    be->ops->dfree(be, y);
    db_backend_destroy(be);
}

/* ---- synthetic models ---- */

static int open_pair(db_session *s, const char *t, const char *d, uint64_t seed, db_dtype dt)
{
    char err[512];
    db_synth_opts syn = {.seed = seed, .dtype = dt};
    db_session_opts o = {"cpu", t, d, 0, 0, &syn};
    int rc = db_session_open(s, &o, err, sizeof err);
    if (rc) tap_diag("open %s: %s", t, err);
    return rc;
}

static int weq(const db_weight *a, const db_weight *b)
{
    return a->rows == b->rows && a->cols == b->cols && a->dtype == b->dtype &&
           memcmp(a->data, b->data, (size_t)a->rows * a->cols * db_dtype_size(a->dtype)) == 0;
}

static int veq(const float *a, const float *b, int n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

/* every tensor of the pair equal, byte for byte */
static int pair_equal(const db_session *a, const db_session *b)
{
    const db_target *x = &a->target, *y = &b->target;
    const db_model_config *c = &x->cfg;
    int eq = weq(&x->embed, &y->embed) && weq(&x->head, &y->head) && veq(x->norm, y->norm, c->hidden);
    for (int l = 0; l < c->n_layers; l++) {
        const db_layer *p = &x->layers[l], *q = &y->layers[l];
        eq = eq && weq(&p->wq, &q->wq) && weq(&p->wk, &q->wk) && weq(&p->wv, &q->wv) &&
             weq(&p->wo, &q->wo) && weq(&p->gate, &q->gate) && weq(&p->up, &q->up) &&
             weq(&p->down, &q->down) && veq(p->attn_norm, q->attn_norm, c->hidden) &&
             veq(p->mlp_norm, q->mlp_norm, c->hidden) && veq(p->q_norm, q->q_norm, c->head_dim) &&
             veq(p->k_norm, q->k_norm, c->head_dim);
    }
    const db_drafter *d = &a->drafter, *e = &b->drafter;
    const db_drafter_config *dc = &d->cfg;
    eq = eq && weq(&d->fc, &e->fc) && veq(d->hidden_norm, e->hidden_norm, dc->base.hidden) &&
         weq(&d->sel_proj, &e->sel_proj) && weq(&d->sel_pred, &e->sel_pred) && weq(&d->sel_succ, &e->sel_succ);
    for (int l = 0; l < dc->base.n_layers; l++) {
        const db_drafter_layer *p = &d->layers[l], *q = &e->layers[l];
        eq = eq && weq(&p->l.wq, &q->l.wq) && weq(&p->l.down, &q->l.down) &&
             weq(&p->attn_conv.proj, &q->attn_conv.proj) && weq(&p->mlp_conv.proj, &q->mlp_conv.proj) &&
             veq(p->attn_conv.base, q->attn_conv.base, 2 * dc->conv_kernel * dc->base.hidden) &&
             veq(p->mlp_conv.base, q->mlp_conv.base, 2 * dc->conv_kernel * dc->base.hidden);
    }
    return eq;
}

static void test_synthetic_models(void)
{
    db_session a, b, c, d3;
    if (open_pair(&a, tcfg, dcfg, 7, DB_BF16) || open_pair(&b, tcfg, dcfg, 7, DB_BF16) ||
        open_pair(&c, tcfg, dcfg, 8, DB_BF16) || open_pair(&d3, tcfg3, NULL, 7, DB_BF16)) {
        tap_ok(0, "synthetic pairs open");
        return;
    }
    tap_ok(a.has_drafter && a.drafter.has_conv && a.drafter.has_selector && a.target.embed.dtype == DB_BF16,
           "a synthetic DFlash 2 config gets every tensor (conv, selector), bf16 matrices");
    tap_ok(pair_equal(&a, &b), "synthetic pair: same seed and shapes -> every tensor bit-identical");
    tap_ok(!weq(&a.target.embed, &c.target.embed) && !weq(&a.target.layers[1].wq, &c.target.layers[1].wq) &&
               !weq(&a.drafter.fc, &c.drafter.fc),
           "synthetic pair: another seed -> other weights");
    tap_ok(weq(&a.target.layers[0].wq, &d3.target.layers[0].wq) &&
               weq(&a.target.layers[1].down, &d3.target.layers[1].down) &&
               weq(&a.target.embed, &d3.target.embed),
           "a third target layer leaves the other tensors unchanged (per-name seeds)");
    /* conv base: identity (tap 0 ~ 1) plus small noise; norms ~ 1 */
    const float *base = a.drafter.layers[0].attn_conv.base;
    int K = a.drafter.cfg.conv_kernel, H = a.drafter.cfg.base.hidden, ok = 1;
    for (int p = 0; p < 2; p++)
        for (int o = 0; o < K; o++)
            for (int ch = 0; ch < H; ch++) {
                float v = base[((size_t)p * K + o) * H + ch];
                ok &= o == 0 ? fabsf(v - 1.0f) < 0.05f : fabsf(v) < 0.05f;
            }
    for (int i = 0; i < H; i++) ok &= fabsf(a.target.norm[i] - 1.0f) <= 0.05f;
    tap_ok(ok, "synthetic conv base = identity + small noise, norm vectors ~ 1");
    /* weights: exactly what the memory model says */
    double w = db_weights_bytes(&a.target.cfg, &a.drafter.cfg, DB_BF16);
    tap_ok(w == (double)a.be->bytes_in_use, "memory model: weights %.0f bytes == allocated %zu", w,
           a.be->bytes_in_use);
    /* engine: KV + activations exactly as predicted, with and without sampling (the target's
     * and drafter's state outlive an engine, so count from the weights) */
    size_t before = a.be->bytes_in_use;
    double kv32 = 0;
    for (int i = 0; i < 3; i++) { /* f32 greedy, f32 sampling, f16 K/V greedy */
        char err[256];
        int sampling = i == 1;
        db_dtype kvt = i == 2 ? DB_F16 : DB_F32;
        db_gen_params p = {.variant = DB_VAR_DFLASH2, .block_size = 8, .top_p = 1, .max_new_tokens = 30,
                           .temperature = sampling ? 1.0f : 0.0f, .kv_dtype = kvt};
        db_engine *e;
        int rc = db_engine_create(&e, &a.target, &a.drafter, &p, 3, 20, err, sizeof err);
        db_engine_shape es = {3, 8, 20, 30, sampling, kvt};
        double kv, act, host = sampling ? 2.0 * 3 * 8 * 512 * 4 : 0;
        db_engine_bytes(&a.target.cfg, &a.drafter.cfg, &es, &kv, &act);
        tap_ok(!rc && kv + act - host == (double)(a.be->bytes_in_use - before),
               "memory model (sampling %d, KV %s): KV %.0f + activations %.0f (host %.0f) == allocated %zu",
               sampling, db_dtype_name(kvt), kv, act - host, host, a.be->bytes_in_use - before);
        if (i == 0) kv32 = kv;
        if (i == 2) tap_ok(kv * 2 == kv32, "memory model: f16 KV caches %.0f bytes, half the f32 ones", kv);
        if (!rc) db_engine_destroy(e);
    }
    { /* a backend without the f16 cache ops refuses f16 caches, naming itself */
        db_backend_ops no16 = *a.be->ops;
        const db_backend_ops *keep = a.be->ops;
        no16.name = "nof16";
        no16.kv_store_f16 = NULL;
        no16.attention_f16 = NULL;
        a.be->ops = &no16;
        char err[256] = "";
        db_kv kv;
        int rc16 = db_kv_init(&kv, a.be, 2, 1, 4, 8, DB_F16, err, sizeof err), rc32 = 1;
        if (rc16 == DB_OK) db_kv_free(&kv);
        if ((rc32 = db_kv_init(&kv, a.be, 2, 1, 4, 8, DB_F32, NULL, 0)) == DB_OK) db_kv_free(&kv);
        a.be->ops = keep;
        tap_ok(rc16 == DB_EINPUT && strstr(err, "nof16") && strstr(err, "f16") && rc32 == DB_OK,
               "f16 KV cache on a backend without kv_store_f16 / attention_f16: refused (%s); f32 taken", err);
    }
    { /* --kv-dtype auto: f16 on the backends with the f16 cache ops (every one built in), f32 on the
       * others and for a name no backend has; explicit values whatever the backend */
        int bad = db_kv_dtype_auto("cpu") != DB_F16 || db_kv_dtype_auto("nonesuch") != DB_F32;
        for (int i = 0; db_backend_names[i]; i++) { /* (a GPU module that does not load: f32) */
            const db_backend_ops *ops = db_backend_find(db_backend_names[i]);
            db_dtype want = ops && ops->kv_store_f16 && ops->attention_f16 ? DB_F16 : DB_F32, got;
            bad |= db_kv_dtype_parse("auto", db_backend_names[i], &got) != 0 || got != want;
            bad |= db_kv_dtype_parse("f32", db_backend_names[i], &got) != 0 || got != DB_F32;
        }
        db_dtype got;
        bad |= db_kv_dtype_parse("f16", "nonesuch", &got) != 0 || got != DB_F16 ||
               db_kv_dtype_parse("bf16", "cpu", &got) != -1 || db_kv_dtype_parse(NULL, "cpu", &got) != -1;
        tap_ok(!bad, "kv dtype auto: f16 on cpu, f32 where a backend lacks the f16 cache ops; f32 / f16 as named");
    }
    { /* the weight dtype lists: each name its backend.h dtype, the quantized ones for plan only */
        static const char *const synth[] = DB_NAMES_ARRAY(DB_SYNTH_DTYPES), *const all[] = DB_NAMES_ARRAY(DB_WEIGHT_DTYPES);
        int bad = sizeof all / sizeof *all != DB_NUM_DTYPES || strcmp(DB_SYNTH_DTYPE_NAMES, "bf16, f16, f32") != 0;
        db_dtype got;
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
            int in_synth = i < sizeof synth / sizeof *synth;
            bad |= db_weight_dtype_parse(all[i], &got) != 0 || strcmp(db_dtype_name(got), all[i]) != 0 ||
                   db_dtype_is_quant(got) == in_synth;
            bad |= (db_dtype_parse(all[i], &got) == 0) != in_synth;
        }
        bad |= db_weight_dtype_parse("bfloat16", &got) != -1 || db_dtype_parse("Q8_0", &got) != -1;
        tap_ok(!bad, "weight dtypes: " DB_WEIGHT_DTYPE_NAMES " parse to their dtypes, only the first three as synthetic");
    }
    db_session_close(&a);
    db_session_close(&b);
    db_session_close(&c);
    db_session_close(&d3);
}

/* ---- acceptance replay ---- */

typedef struct {
    db_req_stats total;
    long out, cycles;
} run_result;

static int replay_run(db_session *s, db_variant v, int B, const float *rates, int n_rates, int conc,
                      int nreq, int max_new, float temperature, run_result *res)
{
    char err[256];
    db_gen_params p = {.variant = v, .block_size = B, .top_p = 1, .max_new_tokens = max_new,
                       .temperature = temperature, .seed = 3, .replay_rates = rates, .replay_n = n_rates,
                       .ignore_eos = 1};
    db_engine *e;
    int rc = db_engine_create(&e, &s->target, &s->drafter, &p, conc, 16, err, sizeof err);
    int *prompts = malloc(sizeof(int) * 16 * (size_t)nreq), *out = malloc(sizeof(int) * (size_t)max_new * nreq);
    db_request *r = calloc((size_t)nreq, sizeof *r);
    for (int i = 0; i < 16 * nreq; i++) prompts[i] = (i * 37 + 11) % 500 + 2;
    for (int i = 0; i < nreq; i++) r[i] = (db_request){.prompt = prompts + 16 * i, .n_prompt = 16, .out = out + (size_t)max_new * i};
    if (!rc) rc = db_engine_run(e, r, nreq, db_now(), NULL, NULL, err, sizeof err);
    if (rc) tap_diag("replay run: %s", err);
    memset(res, 0, sizeof *res);
    for (int i = 0; i < nreq && !rc; i++) {
        db_req_stats_add(&res->total, &r[i].st);
        res->out += r[i].st.output_tokens;
        res->cycles += r[i].st.cycles;
    }
    if (e && !rc) db_engine_destroy(e);
    free(prompts), free(out), free(r);
    return rc;
}

static void test_replay(void)
{
    db_session s;
    if (open_pair(&s, tcfg, dcfg, 11, DB_F32)) {
        tap_ok(0, "synthetic pair for replay");
        return;
    }
    const int B = 8, nreq = 3, max_new = 1 + 8 * 6;
    float ones[15], zeros[15];
    for (int i = 0; i < 15; i++) ones[i] = 1.0f, zeros[i] = 0.0f;
    run_result r;
    int rc = replay_run(&s, DB_VAR_DFLASH2, B, ones, 15, 2, nreq, max_new, 0, &r);
    /* the prefill commits each request's first token and is no cycle */
    tap_ok(!rc && r.out == (long)nreq * max_new && r.cycles * B == r.out - nreq && r.total.hist[B] == r.cycles &&
               db_req_stats_tau(&r.total) == B,
           "all-ones profile: every cycle commits B = %d tokens (tau %.3f; %ld of %ld cycles at length B; "
           "tokens per target call %.3f)", B, db_req_stats_tau(&r.total), r.total.hist[B], r.cycles,
           db_req_stats_tokens_per_call(&r.total));
    rc = replay_run(&s, DB_VAR_DFLASH2, B, ones, 15, 2, nreq, 33, 0, &r);
    tap_ok(!rc && db_req_stats_tau(&r.total) == 8.0 && r.cycles == 4L * nreq,
           "all-ones profile, B = 8, max_new_tokens 33: tau == 8 exactly (%.6f over %ld cycles)",
           db_req_stats_tau(&r.total), r.cycles);
    /* 30 tokens: prefill 1, cycles of 8, 8, 8, then 5 of the last block's 8 fit */
    rc = replay_run(&s, DB_VAR_DFLASH2, B, ones, 15, 2, nreq, 30, 0, &r);
    const db_req_stats *t = &r.total;
    tap_ok(!rc && db_req_stats_tau(t) == 29.0 / 4 && t->hist[8] == 3L * nreq && t->hist[5] == nreq &&
               t->drafted[5] == 4L * nreq && t->accepted[5] == 4L * nreq && t->drafted[6] == 3L * nreq &&
               t->drafted[7] == 3L * nreq && t->accepted[7] == 3L * nreq && t->cycle_tokens + nreq == r.out,
           "max_new_tokens mid-block: the last cycle counts its 5 tokens (tau %.4f == 29/4), positions 6-7 "
           "of it are censored (drafted[5] %ld, drafted[6] %ld)", db_req_stats_tau(t), t->drafted[5], t->drafted[6]);
    rc = replay_run(&s, DB_VAR_DFLASH2, B, zeros, 15, 2, nreq, 20, 0, &r);
    tap_ok(!rc && r.out - nreq == r.cycles && r.total.hist[1] == r.cycles && db_req_stats_tau(&r.total) == 1,
           "all-zeros profile: tau == 1 (%ld cycle tokens / %ld cycles)", r.out - nreq, r.cycles);
    rc = replay_run(&s, DB_VAR_DFLASH2, B, ones, 15, 2, nreq, max_new, 1.0f, &r);
    tap_ok(!rc && r.out - nreq == r.cycles * B, "all-ones profile at T = 1: tau == B too");

    /* measured conditional rates vs the profile: |acc/n - p| <= 3 sqrt(p(1-p)/n) + 1/n */
    const float prof[7] = {0.9f, 0.7f, 0.5f, 0.8f, 0.6f, 0.35f, 0.95f};
    rc = replay_run(&s, DB_VAR_DFLASH2, B, prof, 7, 4, 8, 500, 0, &r);
    int ok = !rc;
    for (int i = 1; i < B && ok; i++) {
        long n = r.total.reached[i], a = r.total.accepted[i];
        double p = prof[i - 1], rate = n ? (double)a / n : 0, bound = n ? 3 * sqrt(p * (1 - p) / n) + 1.0 / n : 1;
        tap_diag("position %d: reached %ld, accepted %ld, rate %.4f, profile %.2f, 3-sigma %.4f", i, n, a, rate, p, bound);
        ok = n > 0 && fabs(rate - p) <= bound;
    }
    tap_ok(ok, "replayed conditional rates within 3 sigma of the profile at every position");
    run_result r2;
    rc = replay_run(&s, DB_VAR_DFLASH2_BARE, B, prof, 7, 4, 8, 500, 0, &r2);
    int same = !rc;
    for (int i = 1; i < B && same; i++)
        same = r.total.accepted[i] == r2.total.accepted[i] && r.total.reached[i] == r2.total.reached[i];
    tap_ok(same && r.cycles == r2.cycles, "replayed acceptance is the same for dflash2-bare and dflash2 (drafter tokens do not matter)");
    char err[256];
    db_gen_params p = {.variant = DB_VAR_DFLASH2, .block_size = 8, .top_p = 1, .max_new_tokens = 8,
                       .replay_rates = prof, .replay_n = 5};
    db_engine *e = NULL;
    rc = db_engine_create(&e, &s.target, &s.drafter, &p, 1, 16, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "positions"), "a profile shorter than the block is refused: %s", err);
    if (!rc) db_engine_destroy(e);
    db_session_close(&s);
}

/* ---- profiles ---- */

static void test_profiles(void)
{
    char p[400], err[600];
    db_profile pr;
    snprintf(p, sizeof p, "%s/two.csv", dir);
    write_file(p, "# a comment\n1,0.5\n2,0.25\n\n3,1\n");
    int rc = db_profile_load(&pr, p, err, sizeof err);
    tap_ok(!rc && pr.n == 3 && pr.rate[0] == 0.5f && pr.rate[2] == 1.0f &&
               fabs(db_profile_tau(&pr, 4) - (1 + 0.5 + 0.125 + 0.125)) < 1e-9,
           "headerless two-column profile, tau = 1 + sum of survivals");
    snprintf(p, sizeof p, "%s/acc.csv", dir);
    write_file(p, "schema_version,point_id,position,drafted,conditional_rate\n"
                  "1,cpu|math|dflash2|B4,1,10,0.8\n1,cpu|math|dflash2|B4,2,10,0.5\n1,cpu|math|dflash2|B4,3,10,\n"
                  "1,cpu|math|dflash|B4,1,10,0.7\n1,cpu|math|dflash|B4,2,10,0.6\n1,cpu|math|dflash|B4,3,10,0.1\n");
    rc = db_profile_load(&pr, p, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "several points") && strstr(err, "#TEXT"),
           "acceptance.csv with two points: ambiguous, says how to pick (%s)", err);
    char sel[500];
    snprintf(sel, sizeof sel, "%s#dflash2", p);
    rc = db_profile_load(&pr, sel, err, sizeof err);
    tap_ok(!rc && pr.n == 3 && pr.rate[0] == 0.8f && pr.rate[2] == 0.0f && !strcmp(pr.point_id, "cpu|math|dflash2|B4"),
           "acceptance.csv#TEXT picks one point (an empty rate counts 0)");
    snprintf(p, sizeof p, "%s/bad.csv", dir);
    write_file(p, "position,conditional_rate\n1,0.5\n2,1.5\n");
    tap_ok(db_profile_load(&pr, p, err, sizeof err) == DB_EINPUT && strstr(err, "[0, 1]"), "a rate above 1 is refused");
    write_file(p, "position,conditional_rate\n1,0.5\n3,0.5\n");
    tap_ok(db_profile_load(&pr, p, err, sizeof err) == DB_EINPUT && strstr(err, "missing"), "a gap in the positions is refused");
    db_profile_constant(&pr, 4.0, 8, 7);
    tap_ok(fabs(db_profile_tau(&pr, 8) - 4.0) < 1e-4, "constant profile hits its tau (rate %.4f)", (double)pr.rate[0]);
    tap_ok(db_profile_load(&pr, "dflash2-gsm8k-t0", err, sizeof err) == DB_OK && fabs(db_profile_tau(&pr, 8) - 4.61) < 0.001,
           "preset name dflash2-gsm8k-t0 resolves (tau %.3f at block 8)", db_profile_tau(&pr, 8));
}

/* ---- quantized weights: bytes per weight with the block scales ---- */

static void test_quant_bytes(void)
{
    const db_dtype t[] = {DB_F32,  DB_BF16, DB_F16,  DB_Q8_0, DB_Q4_0,   DB_Q4_K,  DB_Q5_K,
                          DB_Q6_K, DB_Q4_1, DB_Q5_0, DB_Q5_1, DB_Q2_K, DB_Q3_K, DB_IQ4_NL, DB_IQ4_XS};
    /* ggml's block sizes: 8.5, 4.5, 4.5, 5.5, 6.5625, 5, 5.5, 6, 2.625, 3.4375, 4.5, 4.25 bits */
    const double want[] = {4, 2, 2, 34.0 / 32, 18.0 / 32, 144.0 / 256, 176.0 / 256, 210.0 / 256,
                           20.0 / 32, 22.0 / 32, 24.0 / 32, 84.0 / 256, 110.0 / 256, 18.0 / 32,
                           136.0 / 256};
    int same = 1;
    for (int i = 0; i < (int)(sizeof t / sizeof *t); i++) same &= db_dtype_weight_bytes(t[i]) == want[i];
    tap_ok(same, "bytes per weight: f32 4, bf16/f16 2, Q8_0 34/32, Q4_0 18/32, Q4_K 144/256, Q5_K 176/256, "
                 "Q6_K 210/256, Q4_1 20/32, Q5_0 22/32, Q5_1 24/32, Q2_K 84/256, Q3_K 110/256, "
                 "IQ4_NL 18/32, IQ4_XS 136/256");
    /* Qwen3-8B (configs/models/qwen3-8b.json) by hand: per layer q 4096x4096, k and v 1024x4096,
     * o 4096x4096, gate / up / down 12288x4096 = 192937984 weights; 36 layers; untied embedding
     * and head 2 x 151936 x 4096; f32 norms: the final one (4096) and per layer two of 4096 and
     * the q / k norms of 128 */
    const char *root = getenv("DB_SOURCE_ROOT");
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/configs/models/qwen3-8b.json", root ? root : ".");
    db_model_config c;
    if (db_model_config_load(&c, path, err, sizeof err)) {
        tap_ok(0, "%s", err);
        return;
    }
    double weights = 36.0 * 192937984 + 2.0 * 151936 * 4096, norms = 4.0 * (4096 + 36 * (2 * 4096 + 2 * 128));
    for (int i = 3; i < 8; i++) {
        double got = db_weights_bytes(&c, NULL, t[i]), hand = weights * want[i] + norms;
        tap_ok(got == hand, "Qwen3-8B at %s: %.0f bytes == %.0f by hand (%.3f GiB)", db_dtype_name(t[i]), got, hand,
               hand / DB_GIB);
    }
    tap_ok(db_weights_bytes(&c, NULL, DB_Q4_K) == 4608348160.0, "Qwen3-8B at Q4_K: 4608348160 bytes (4.29 GiB)");
    /* the roofline reads them: a memory-bound ar step at Q4_K moves the bf16 step's bytes less
     * the weights' difference */
    db_hw hw = {.bw = 1e9, .flops = 1e18};
    db_step_shape s = {.concurrency = 1, .block = 1, .ctx = 100, .tau = 1};
    db_step_cost a, b;
    db_roofline_step(&c, NULL, DB_BF16, &hw, &s, &a);
    db_roofline_step(&c, NULL, DB_Q4_K, &hw, &s, &b);
    double saved = (36.0 * 192937984 + 151936.0 * 4096 + 4096) * (2 - 144.0 / 256); /* layers, head, the row's embedding */
    tap_ok(fabs(a.verify.bytes - b.verify.bytes - saved) < 1, "roofline at Q4_K: %.0f bytes fewer per ar step (by hand %.0f)",
           a.verify.bytes - b.verify.bytes, saved);
}

/* ---- roofline ---- */

static void test_roofline(void)
{
    db_model_config t;
    char err[256];
    if (db_model_config_load(&t, tcfg, err, sizeof err)) {
        tap_ok(0, "%s", err);
        return;
    }
    db_hw hw = {.bw = 1e9, .flops = 1e18};
    db_step_shape s = {.concurrency = 1, .block = 1, .ctx = 100, .tau = 1};
    db_step_cost a, b;
    db_roofline_step(&t, NULL, DB_BF16, &hw, &s, &a);
    hw.bw = 2e9;
    db_roofline_step(&t, NULL, DB_BF16, &hw, &s, &b);
    double wbytes = db_weights_bytes(&t, NULL, DB_BF16);
    tap_ok(!a.verify.compute_bound && fabs(a.t - a.verify.bytes / 1e9) < 1e-15 && fabs(b.t * 2 - a.t) < 1e-15 &&
               a.verify.bytes > 0.9 * wbytes,
           "roofline: a memory-bound ar step takes bytes / bandwidth (%.0f bytes, weights %.0f)", a.verify.bytes, wbytes);
}

/* the rate per row count: measured points exact, log-linear between them, 512 rows and up and
 * an empty table at the flat rate; an ar step's arithmetic at the 1-row rate, a verify's at the
 * rate of its N x B rows */
static void test_rate_rows(void)
{
    db_hw hw = {.bw = 1e18, .flops = 512e9};
    tap_ok(db_hw_rate(&hw, 8) == 512e9, "rate by rows: no table, the flat rate (%g)", db_hw_rate(&hw, 8));
    for (int i = 0; i < DB_HW_RATE_ROWS; i++) hw.rate[i] = (double)(1 << i) * 1e9; /* 1 GFLOP/s per row */
    double r1 = db_hw_rate(&hw, 1), r8 = db_hw_rate(&hw, 8), r3 = db_hw_rate(&hw, 3),
           r384 = db_hw_rate(&hw, 384), r4k = db_hw_rate(&hw, 4096);
    /* rows = 2^l: rate = 2^l GFLOP/s, so log-linear is exact at 3 and 384 */
    tap_ok(r1 == 1e9 && r8 == 8e9 && fabs(r3 / 3e9 - 1) < 1e-12 && fabs(r384 / 384e9 - 1) < 1e-12 && r4k == 512e9,
           "rate by rows: 1 -> %g, 3 -> %g, 8 -> %g, 384 -> %g, 4096 -> %g FLOP/s", r1, r3, r8, r384, r4k);
    db_model_config t;
    char err[256];
    if (db_model_config_load(&t, tcfg, err, sizeof err)) {
        tap_ok(0, "%s", err);
        return;
    }
    db_step_shape s = {.concurrency = 2, .block = 1, .ctx = 0, .tau = 1};
    db_step_cost c;
    db_roofline_step(&t, NULL, DB_BF16, &hw, &s, &c);
    /* 2 rows: the layers at 2 GFLOP/s, the head's 2 logit rows likewise */
    tap_ok(c.verify.compute_bound && fabs(c.verify.t / (c.verify.flops / 2e9) - 1) < 1e-9,
           "roofline: a 2-row step's arithmetic at the 2-row rate (%.3g s for %.3g FLOP)", c.verify.t, c.verify.flops);
}

/* the device figures' calls dealt out over passes (device_probe.h), on a fake clock: every
 * call advances it by its figure's duration, 10x during a "slow phase" of the machine */
static double fake_t;
static int fake_log[64], fake_nlog, slow_lo, slow_hi; /* calls [slow_lo, slow_hi) are slow */
static double fake_clock(void) { return fake_t; }
static void fake_call(void *ctx, int it)
{
    (void)it;
    int id = *(const int *)ctx;
    fake_t += fake_nlog >= slow_lo && fake_nlog < slow_hi ? 1.0 : 0.125; /* binary fractions: exact sums */
    if (fake_nlog < 64) fake_log[fake_nlog] = id;
    fake_nlog++;
}

static void test_probe_passes(void)
{
    static int ids[2] = {0, 1};
    static db_probe_figure f[2];
    /* two figures of 6 calls each over 3 passes; the machine slow through the first pass */
    for (int i = 0; i < 2; i++) f[i] = (db_probe_figure){fake_call, &ids[i], 6, 50, 0.0, 0, 0, {0}};
    fake_t = 0, fake_nlog = 0, slow_lo = 0, slow_hi = 6;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++) db_probe_figure_pass(&f[i], k, 3, fake_clock);
    static const int want[14] = {0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1}; /* warm-ups first */
    int order = fake_nlog == 14;
    for (int i = 0; order && i < 14; i++) order = fake_log[i] == want[i];
    tap_ok(order && f[0].n == 6 && f[1].n == 6, "probe passes: calls interleaved by pass (%d calls, %d / %d timed)",
           fake_nlog, f[0].n, f[1].n);
    double m0 = db_probe_figure_median(&f[0]), m1 = db_probe_figure_median(&f[1]);
    tap_ok(m0 == 0.125 && m1 == 0.125,
           "probe passes: a slow phase over one pass moves no median (%.3f, %.3f s)", m0, m1);
    /* the same phase over one figure timed in one pass: its median is the phase's */
    f[0] = (db_probe_figure){fake_call, &ids[0], 6, 50, 0.0, 0, 0, {0}};
    fake_nlog = 0, slow_lo = 0, slow_hi = 7;
    db_probe_figure_pass(&f[0], 0, 1, fake_clock);
    tap_ok(db_probe_figure_median(&f[0]) == 1.0, "probe passes: in one pass the phase is the median (%.3f s)",
           db_probe_figure_median(&f[0]));
    /* seconds: 1 s of 0.125 s calls over 4 passes, at least one call per pass; max_calls caps */
    f[0] = (db_probe_figure){fake_call, &ids[0], 1, 50, 1.0, 0, 0, {0}};
    f[1] = (db_probe_figure){fake_call, &ids[1], 1, 4, 100.0, 0, 0, {0}};
    fake_nlog = 0, slow_lo = slow_hi = 0;
    int after0 = 0;
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 2; i++) db_probe_figure_pass(&f[i], k, 4, fake_clock);
        if (k == 0) after0 = f[0].n;
    }
    tap_ok(after0 == 2 && f[0].n == 8 && f[1].n == 4 && db_probe_figure_median(&f[1]) > 0,
           "probe passes: min_total spread (2 calls after pass 1, %d; 8 in all, %d), max_calls cap (4, %d)",
           after0, f[0].n, f[1].n);
}

/* with attention and op figures, a forward is the sum of its phases: matmuls (and the head) at
 * the rate of their rows, attention at the attention rate of its rows per request, 8 small
 * ops per layer (bytes free here, so every phase is its arithmetic) */
static void test_phases(void)
{
    db_model_config t;
    char err[256];
    if (db_model_config_load(&t, tcfg, err, sizeof err)) {
        tap_ok(0, "%s", err);
        return;
    }
    db_hw hw = {.bw = 1e18, .flops = 512e9, .op_s = 3e-6};
    for (int i = 0; i < DB_HW_RATE_ROWS; i++) hw.rate[i] = (double)(1 << i) * 1e9;
    for (int i = 0; i < DB_HW_ATTN_ROWS; i++) hw.attn_rate[i] = 0.25e9 * (i + 1);
    tap_ok(db_hw_attn_rate(&hw, 1) == 0.25e9 && db_hw_attn_rate(&hw, 2) == 0.5e9 && db_hw_attn_rate(&hw, 64) == 1.25e9,
           "attention rate by rows: 1, 2, 64 -> %g, %g, %g", db_hw_attn_rate(&hw, 1), db_hw_attn_rate(&hw, 2),
           db_hw_attn_rate(&hw, 64));
    double ctx = 40, L = t.n_layers;
    db_step_shape s = {.concurrency = 2, .block = 1, .ctx = ctx, .tau = 1};
    db_step_cost c;
    db_roofline_step(&t, NULL, DB_BF16, &hw, &s, &c);
    double aflops = 4.0 * L * 2 * t.n_heads * (double)t.head_dim * (ctx + 1);
    double want = (c.verify.flops - aflops) / 2e9 + aflops / 0.25e9 + L * 8 * 3e-6;
    tap_ok(fabs(c.verify.t / want - 1) < 1e-9, "phases: 2 requests x 1 row: matmuls at 2 rows' rate + attention at "
           "1 row's + 8 L ops (%.6g s, want %.6g)", c.verify.t, want);
    hw.op_s = 0;
    memset(hw.attn_rate, 0, sizeof hw.attn_rate);
    db_roofline_step(&t, NULL, DB_BF16, &hw, &s, &c);
    tap_ok(fabs(c.verify.t / (c.verify.flops / 2e9) - 1) < 1e-9,
           "no attention figure: one roofline, attention at the matmul rate (%.6g s)", c.verify.t);
}

/* K-flat (db_roofline_verify): the verify forward of R rows at depth D is the cycle's verify at
 * N = 1, B = R (the same cost, exactly); with attention figures its phases add: bandwidth
 * unlimited, every phase is its arithmetic and t = matmul + attention + fixed parts; with
 * arithmetic free, t = weights + attention + fixed (the bytes at the bandwidth) */
static void test_kflat(void)
{
    db_model_config t;
    db_drafter_config d;
    char err[256];
    if (db_model_config_load(&t, tcfg, err, sizeof err) || db_drafter_config_load(&d, dcfg, t.n_layers, err, sizeof err)) {
        tap_ok(0, "%s", err);
        return;
    }
    db_hw hw = {.bw = 1e10, .flops = 512e9, .op_s = 3e-6, .fwd_s = 1e-4};
    for (int i = 0; i < DB_HW_RATE_ROWS; i++) hw.rate[i] = (double)(1 << i) * 1e9;
    for (int i = 0; i < DB_HW_ATTN_ROWS; i++) hw.attn_rate[i] = 0.25e9 * (i + 1);
    int same = 1;
    for (int B = 2; B <= 16; B *= 2)
        for (double ctx = 0; ctx <= 4096; ctx += 1024) {
            db_step_shape cy = db_variant_step(DB_VAR_DFLASH2, 1, B, ctx, 3, DB_F16);
            db_step_cost c;
            db_verify_cost v;
            db_roofline_step(&t, &d, DB_BF16, &hw, &cy, &c);
            db_roofline_verify(&t, DB_BF16, &hw, B, ctx, DB_F16, &v);
            same = same && v.c.t == c.verify.t && v.c.flops == c.verify.flops;
        }
    tap_ok(same, "K-flat: the verify of R rows at depth D is the cycle's verify at N 1, B R (B 2..16, ctx 0..4096)");
    db_verify_cost v;
    hw.bw = 1e30;
    db_roofline_verify(&t, DB_BF16, &hw, 64, 1000, DB_F16, &v);
    const db_forward_parts *q = &v.parts;
    double L = t.n_layers, aflops = 4.0 * L * 64 * t.n_heads * (double)t.head_dim * (1000 + 32.5);
    tap_ok(fabs(v.c.t / (q->matmul_s + q->attn_s + q->fixed_s) - 1) < 1e-12 && fabs(q->attn_s / (aflops / 1.25e9) - 1) < 1e-12 &&
               fabs(q->fixed_s - (1e-4 + (8 * L + 1) * 3e-6)) < 1e-15 && !strcmp(v.bound, q->matmul_s > q->attn_s ? "matmul" : "attention"),
           "K-flat, bandwidth unlimited: t = matmul + attention (at the 16-row rate) + fixed (%.6g s; bound %s)", v.c.t, v.bound);
    hw.bw = 1e9, hw.flops = 1e30, hw.op_s = 0, hw.fwd_s = 0;
    memset(hw.rate, 0, sizeof hw.rate);
    for (int i = 0; i < DB_HW_ATTN_ROWS; i++) hw.attn_rate[i] = 1e30;
    db_roofline_verify(&t, DB_BF16, &hw, 64, 1000, DB_F16, &v);
    double kvb = L * (1000 + 64) * 2 * (double)t.n_kv_heads * t.head_dim * 2;
    tap_ok(fabs(v.c.t / (q->weights_s + q->attn_s) - 1) < 1e-12 && fabs(q->attn_s / (kvb / 1e9) - 1) < 1e-12 &&
               fabs(v.c.t - v.c.bytes / 1e9) < 1e-12 * v.c.t && q->matmul_s < 1e-15,
           "K-flat, arithmetic free: t = bytes / bandwidth = weights + attention (KV bytes) parts (%.6g s; bound %s)", v.c.t,
           v.bound);
}

/* ---- CLI ---- */

static int run_cmd(const char *cmd, char *out, size_t n)
{
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t k = fread(out, 1, n - 1, f);
    out[k] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void)
{
    const char *bin = getenv("DB_BIN");
    if (!bin) {
        tap_ok(1, "# SKIP DB_BIN not set (run through meson test)");
        return;
    }
    static char out[1 << 16], cmd[2048], prof[400];
    snprintf(prof, sizeof prof, "%s/p.csv", dir);
    write_file(prof, "position,conditional_rate\n1,0.9\n2,0.8\n3,0.7\n");
    snprintf(cmd, sizeof cmd,
             "'%s' run --synthetic --target-config '%s' --drafter-config '%s' --variant ar,dflash2 -B 4 "
             "-c 1 -n 8 --max-samples 2 --prompt-tokens 12 --warmup 0 --threads 1 --acceptance-profile none,'%s' "
             "--predict --bandwidth-gbs 10 --gflops 50 --out '%s/r1' -o csv 2>'%s/r1.err'",
             bin, tcfg, dcfg, prof, dir, dir);
    int rc = run_cmd(cmd, out, sizeof out);
    db_csv_doc doc;
    char err[256];
    int prc = rc == 0 ? db_csv_parse(out, strlen(out), &doc, err, sizeof err) : -1;
    tap_ok(rc == 0 && prc == 0 && doc.n == 4, "run --synthetic -o csv: exit %d, %d rows (ar, measured, replayed)", rc,
           prc == 0 ? doc.n - 1 : -1);
    if (prc == 0) {
        int cw = db_csv_col(&doc, "weights"), ca = db_csv_col(&doc, "acceptance_source"),
            cv = db_csv_col(&doc, "variant"), cd = db_csv_col(&doc, "dataset"),
            cp = db_csv_col(&doc, "predicted_tok_s"), cm = db_csv_col(&doc, "measured_over_predicted");
        int labels = cw >= 0 && ca >= 0 && cv >= 0 && cd >= 0, replayed = 0, measured = 0, pred = cp >= 0 && cm >= 0;
        char want[500];
        snprintf(want, sizeof want, "replay:%s", prof);
        for (int i = 1; i < doc.n && labels; i++) {
            char **f = doc.rec[i].field;
            labels = !strcmp(f[cw], "synthetic") && !strcmp(f[cd], "synthetic-12");
            if (!strcmp(f[cv], "ar")) labels = labels && !strcmp(f[ca], "measured");
            else if (!strcmp(f[ca], want)) replayed++;
            else if (!strcmp(f[ca], "measured")) measured++;
            pred = pred && atof(f[cp]) > 0 && atof(f[cm]) > 0;
        }
        tap_ok(labels && replayed == 1 && measured == 1,
               "rows say weights=synthetic, dataset synthetic-12, acceptance_source measured (ar and one dflash2) "
               "or replay:<file> (the other)");
        tap_ok(pred, "--predict fills predicted_tok_s and measured_over_predicted");
        db_csv_doc_free(&doc);
    }
    /* a request that cannot fit: refused before anything is allocated, exit 2 (past the
     * config's positions too: --allow-long-context lets the memory check speak) */
    snprintf(cmd, sizeof cmd,
             "'%s' run --synthetic --target-config '%s' --drafter-config '%s' --variant dflash2 -B 8 -c 4096 "
             "-n 100000000 --max-samples 1 --allow-long-context --out '%s/r2' 2>&1",
             bin, tcfg, dcfg, dir);
    rc = run_cmd(cmd, out, sizeof out);
    for (char *c = out; *c; c++) /* one TAP line: the message's newlines become spaces */
        if (*c == '\n') *c = ' ';
    tap_ok(rc == 2 && strstr(out, "needs") && strstr(out, "GiB (weights") && strstr(out, "GiB available"),
           "a too-large request is refused with exit 2: %.200s", out);
    /* plan: prediction and a measured synthetic run */
    snprintf(cmd, sizeof cmd,
             "'%s' plan --target-config '%s' --drafter-config '%s' -B 4 -c 1,2 -n 6 --prompt-tokens 10 "
             "--acceptance-profile '%s' --bandwidth-gbs 10 --gflops 50 --threads 1 -o json 2>/dev/null",
             bin, tcfg, dcfg, prof);
    rc = run_cmd(cmd, out, sizeof out);
    cJSON *j = rc == 0 ? cJSON_Parse(out) : NULL;
    const cJSON *rows = cJSON_GetObjectItem(j, "rows");
    int ok = cJSON_GetArraySize(rows) == 2;
    const cJSON *row;
    cJSON_ArrayForEach(row, rows)
    {
        const cJSON *cy = cJSON_GetObjectItem(row, "cycle"), *ar = cJSON_GetObjectItem(row, "ar");
        ok = ok && cJSON_GetObjectItem(cy, "predicted_tok_s")->valuedouble > 0 &&
             cJSON_IsNumber(cJSON_GetObjectItem(cy, "measured_tok_s")) &&
             cJSON_IsNumber(cJSON_GetObjectItem(ar, "measured_over_predicted")) &&
             fabs(cJSON_GetObjectItem(cy, "tau")->valuedouble - (1 + 0.9 + 0.72 + 0.504)) < 1e-6;
    }
    tap_ok(rc == 0 && ok, "plan -o json: predicted and measured ar and cycle rows for c = 1, 2");
    cJSON_Delete(j);
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    setup();
    /* preset profiles: the source tree's configs/profiles (the data root, base/paths.h) */
    const char *root = getenv("DB_SOURCE_ROOT");
    if (root) setenv("DFLASH_BENCH_DATA", root, 1);
    test_fill_random();
    test_synthetic_models();
    test_replay();
    test_profiles();
    test_roofline();
    test_rate_rows();
    test_probe_passes();
    test_phases();
    test_kflat();
    test_quant_bytes();
    test_cli();
    cleanup();
    return tap_done();
}
