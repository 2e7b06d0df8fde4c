/* test_drafter.c — the DFlash / DFlash 2 drafter and the speculative cycle against the PyTorch
 * reference goldens (scripts/reference/make_fixtures.py) and against the lossless identity:
 *   drafter logits and top-k for a given context (1e-4 relative), per variant;
 *   greedy cycle traces (drafts = selector picks, accepted counts, bonus tokens) == golden;
 *   identity convolution weights == no convolution (bitwise);
 *   greedy output of every variant == `ar`, token for token, on 20 prompts at B = 4, 8, 16,
 *   4 requests batched per cycle;
 *   a variant the checkpoint cannot run is refused naming the missing tensor;
 *   DSpark: the corrected logits of block positions 1..B-1 (given the golden walk's previous
 *   picks) vs golden, on a full and on a reduced (d2t) draft vocabulary. */
#include "engine/engine.h"
#include "model/model_test.h"
#include "tap.h"
#include "test_util.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static db_backend *be;
static char err[1024];

static int load_pair_on(db_target *t, db_drafter *d, const char *drafter_dir, const char *target)
{
    if (db_target_load(t, be, tu_data(target), err, sizeof err) != 0 ||
        db_drafter_load(d, be, drafter_dir, t, err, sizeof err) != 0) {
        tap_diag("%s", err);
        return -1;
    }
    return 0;
}

static int load_pair(db_target *t, db_drafter *d, const char *drafter_dir)
{
    return load_pair_on(t, d, drafter_dir, "qwen3-f32-tied");
}

/* prefill ctx tokens into slot 0 of target and drafter */
static int prefill_context(db_target *t, db_drafter *d, const int *ctx, int n)
{
    db_target_opts to = {.slots = 1, .capacity = 64, .max_rows = 32, .n_taps = d->cfg.n_taps,
                         .tap_layers = d->cfg.tap_layers};
    db_drafter_opts dop = {.slots = 1, .capacity = 64, .max_ctx_rows = 32, .max_requests = 1,
                           .max_block = d->cfg.block_size};
    if (db_target_alloc(t, &to, err, sizeof err) || db_drafter_alloc(d, &dop, err, sizeof err)) return -1;
    db_row rows[32];
    int slot[32], pos[32];
    for (int i = 0; i < n; i++) {
        rows[i] = (db_row){0, i, ctx[i]};
        slot[i] = 0;
        pos[i] = i;
    }
    if (db_target_forward(t, rows, n, NULL, 0, err, sizeof err)) return -1;
    return db_drafter_add_context(d, db_target_taps(t), ctx, slot, pos, n, err, sizeof err);
}

/* golden.json of drafter fixture `name` plus the loaded pair; a failed test point otherwise */
static int open_fixture(const char *name, cJSON **g, db_target *t, db_drafter *d)
{
    const char *dir = tu_data(name);
    *g = tu_golden(dir);
    const cJSON *tg = *g ? cJSON_GetObjectItem(*g, "target") : NULL;
    if (!*g || load_pair_on(t, d, dir, cJSON_IsString(tg) ? tg->valuestring : "qwen3-f32-tied")) {
        tap_ok(0, "%s: load", name);
        cJSON_Delete(*g);
        return -1;
    }
    return 0;
}

static void check_block_logits(const char *name)
{
    cJSON *g;
    db_target t;
    db_drafter d;
    if (open_fixture(name, &g, &t, &d)) return;
    int n, V = d.cfg.draft_vocab; /* the drafter's rows: its draft vocabulary */
    int *ctx = tu_ints(cJSON_GetObjectItem(g, "context_tokens"), &n);
    int anchor = cJSON_GetObjectItem(g, "anchor")->valueint;
    int B = cJSON_GetObjectItem(g, "block_size")->valueint;
    const cJSON *var;
    cJSON_ArrayForEach(var, cJSON_GetObjectItem(g, "variants"))
    {
        db_variant v;
        if (db_variant_parse(var->string, &v) != 0) continue;
        int ok = prefill_context(&t, &d, ctx, n) == 0 &&
                 db_drafter_block(&d, (int[]){0}, &anchor, 1, B, db_variant_uses_conv(v), err,
                                  sizeof err) == 0;
        if (!ok) tap_diag("%s", err);
        double worst = 0;
        const cJSON *lg = cJSON_GetObjectItem(var, "logits");
        for (int r = 0; ok && r < B - 1; r++) {
            int m;
            float *ref = tu_floats(cJSON_GetArrayItem(lg, r), &m);
            double e = tu_max_rel_err(db_drafter_logits(&d) + (size_t)r * V, ref, (size_t)V, 1.0);
            if (e > worst) worst = e;
            free(ref);
        }
        tap_ok(ok && worst < 1e-4, "%s/%s: drafter logits vs golden, max rel err %.2e", name, var->string, worst);
        const cJSON *tk = cJSON_GetObjectItem(var, "topk_ids");
        int k = cJSON_GetArraySize(cJSON_GetArrayItem(tk, 0)), same = ok;
        int ids[64 * 16];
        if (ok) be->ops->topk(be, ids, NULL, db_drafter_logits(&d), B - 1, V, k);
        for (int r = 0; same && r < B - 1; r++) {
            int m;
            int *ref = tu_ints(cJSON_GetArrayItem(tk, r), &m);
            same = memcmp(ref, ids + r * k, sizeof(int) * (size_t)k) == 0;
            free(ref);
        }
        tap_ok(same, "%s/%s: top-%d ids per row == golden", name, var->string, k);
    }
    free(ctx);
    db_drafter_free(&d);
    db_target_free(&t);
    cJSON_Delete(g);
}

/* DSpark: row r corrected by the golden walk's prev[r] (db_dspark_correct, the engine's
 * backend ops) == the reference's corrected row; its argmax mapped through d2t == the pick */
static void check_dspark_corrected(const char *name)
{
    cJSON *g;
    db_target t;
    db_drafter d;
    if (open_fixture(name, &g, &t, &d)) return;
    int n, Vd = d.cfg.draft_vocab, nmap;
    int *ctx = tu_ints(cJSON_GetObjectItem(g, "context_tokens"), &n);
    int *map = tu_ints(cJSON_GetObjectItem(g, "draft_to_target"), &nmap);
    int anchor = cJSON_GetObjectItem(g, "anchor")->valueint;
    int B = cJSON_GetObjectItem(g, "block_size")->valueint;
    const cJSON *var = cJSON_GetObjectItem(cJSON_GetObjectItem(g, "variants"), "dspark");
    int np, npk, *prev = tu_ints(cJSON_GetObjectItem(var, "prev"), &np);
    int *picks = tu_ints(cJSON_GetObjectItem(var, "picks"), &npk);
    int ok = nmap == Vd && np == B - 1 && npk == B - 1 && memcmp(map, d.markov.d2t, sizeof(int) * (size_t)Vd) == 0;
    tap_ok(ok, "%s: draft vocabulary %d of %d, d2t map == golden", name, Vd, t.cfg.vocab);
    if (Vd < t.cfg.vocab) /* make_fixtures.py: scale 0.8, own lm_head, confidence head */
        tap_ok(fabsf(d.markov.scale - 0.8f) < 1e-7f && d.markov.lm_head.data && d.markov.has_confidence,
               "%s: scale %g, own lm_head, confidence head loaded", name, d.markov.scale);
    ok = ok && prefill_context(&t, &d, ctx, n) == 0 &&
         db_drafter_block(&d, (int[]){0}, &anchor, 1, B, 0, err, sizeof err) == 0;
    if (!ok) tap_diag("%s", err);
    double worst = 0;
    int same = ok;
    float *row = malloc(sizeof(float) * (size_t)Vd);
    const cJSON *cor = cJSON_GetObjectItem(var, "corrected");
    for (int r = 0; ok && r < B - 1; r++) {
        db_dspark_correct(&d.markov, be, d.s.corr, db_drafter_logits(&d), &r, &prev[r], 1);
        int m, top;
        ok = be->ops->download(be, row, d.s.corr, sizeof(float) * (size_t)Vd) == 0 &&
             be->ops->topk(be, &top, NULL, d.s.corr, 1, Vd, 1) == 0;
        float *ref = tu_floats(cJSON_GetArrayItem(cor, r), &m);
        double e = ok && m == Vd ? tu_max_rel_err(row, ref, (size_t)Vd, 1.0) : INFINITY;
        if (e > worst) worst = e;
        same = same && ok && d.markov.d2t[top] == picks[r];
        free(ref);
    }
    tap_ok(ok && worst < 1e-4, "%s: corrected logits of positions 1..%d vs golden, max rel err %.2e", name,
           B - 1, worst);
    tap_ok(same, "%s: greedy walk picks (argmax of each corrected row, through d2t) == golden", name);
    free(row);
    free(ctx);
    free(map);
    free(prev);
    free(picks);
    db_drafter_free(&d);
    db_target_free(&t);
    cJSON_Delete(g);
}

typedef struct {
    int n;
    int pos[256], acc[256], bonus[256], draft[256][64];
} trace;

static void on_cycle(void *user, int req, int pos, const int *block, int b, int a, int bonus)
{
    trace *tr = user;
    if (req != 0 || tr->n >= 256) return;
    tr->pos[tr->n] = pos;
    tr->acc[tr->n] = a;
    tr->bonus[tr->n] = bonus;
    memcpy(tr->draft[tr->n], block + 1, sizeof(int) * (size_t)(b - 1));
    tr->n++;
}

/* run `reqs` prompts through the engine; outputs into out[i] (max_new each) */
static int run_engine(db_target *t, db_drafter *d, db_variant v, int B, int conc, int **prompts,
                      const int *lens, int n, int max_new, int **out, int *nout, trace *tr)
{
    db_gen_params p = {.variant = v, .block_size = B, .top_p = 1.0f, .max_new_tokens = max_new,
                       .seed = 1, .on_cycle = tr ? on_cycle : NULL, .on_cycle_user = tr};
    db_engine *e;
    int maxp = 0;
    for (int i = 0; i < n; i++) maxp = lens[i] > maxp ? lens[i] : maxp;
    if (db_engine_create(&e, t, d, &p, conc, maxp, err, sizeof err)) return -1;
    db_request *r = calloc((size_t)n, sizeof *r);
    for (int i = 0; i < n; i++) r[i] = (db_request){.prompt = prompts[i], .n_prompt = lens[i], .out = out[i]};
    int rc = db_engine_run(e, r, n, db_now(), NULL, NULL, err, sizeof err);
    for (int i = 0; i < n; i++) nout[i] = r[i].n_out;
    free(r);
    db_engine_destroy(e);
    return rc;
}

static void check_cycle_trace(const char *name)
{
    cJSON *g;
    db_target t;
    db_drafter d;
    if (open_fixture(name, &g, &t, &d)) return;
    const cJSON *cy = cJSON_GetObjectItem(g, "cycle"), *var;
    int np, *prompt = tu_ints(cJSON_GetObjectItem(cy, "prompt"), &np);
    int max_new = cJSON_GetObjectItem(cy, "max_new_tokens")->valueint;
    int B = cJSON_GetObjectItem(cy, "block_size")->valueint;
    cJSON_ArrayForEach(var, cJSON_GetObjectItem(cy, "variants"))
    {
        db_variant v;
        if (db_variant_parse(var->string, &v) != 0) continue;
        /* the reference calls conv and selector off "dflash" on any checkpoint; on a DFlash 2
         * one the engine names that cycle dflash2-bare (dflash is the v1 checkpoint's) */
        if (v == DB_VAR_DFLASH && d.cfg.kind == DB_DRAFTER_V2) v = DB_VAR_DFLASH2_BARE;
        int ne, *expect = tu_ints(cJSON_GetObjectItem(var, "output"), &ne);
        int *out = malloc(sizeof(int) * (size_t)max_new), nout = 0;
        trace *tr = calloc(1, sizeof *tr);
        int ok = run_engine(&t, &d, v, B, 1, &prompt, &np, 1, max_new, &out, &nout, tr) == 0;
        if (!ok) tap_diag("%s", err);
        tap_ok(ok && nout == ne && memcmp(out, expect, sizeof(int) * (size_t)ne) == 0,
               "%s/%s: greedy cycle output == golden (%d tokens)", name, var->string, ne);
        const cJSON *gt = cJSON_GetObjectItem(var, "trace");
        int same = ok && tr->n == cJSON_GetArraySize(gt), c = 0;
        const cJSON *step;
        cJSON_ArrayForEach(step, gt)
        {
            if (!same) break;
            int m, *dr = tu_ints(cJSON_GetObjectItem(step, "draft"), &m);
            same = tr->pos[c] == cJSON_GetObjectItem(step, "pos")->valueint &&
                   tr->acc[c] == cJSON_GetObjectItem(step, "accepted")->valueint &&
                   tr->bonus[c] == cJSON_GetObjectItem(step, "bonus")->valueint &&
                   memcmp(dr, tr->draft[c], sizeof(int) * (size_t)m) == 0;
            if (!same) tap_diag("cycle %d differs (pos %d accepted %d bonus %d)", c, tr->pos[c], tr->acc[c], tr->bonus[c]);
            free(dr);
            c++;
        }
        tap_ok(same, "%s/%s: %d cycle traces (drafts/selector picks, accepted, bonus) == golden", name,
               var->string, tr->n);
        free(tr);
        free(out);
        free(expect);
    }
    free(prompt);
    db_drafter_free(&d);
    db_target_free(&t);
    cJSON_Delete(g);
}

/* identity conv weights (base[:,0,:] = 1, other taps 0, W_kp = 0) == conv off, bitwise */
static void check_identity_conv(void)
{
    db_target t;
    db_drafter d;
    if (load_pair(&t, &d, tu_data("dflash2-f32"))) {
        tap_ok(0, "identity conv: load");
        return;
    }
    int H = d.cfg.base.hidden, K = d.cfg.conv_kernel, V = t.cfg.vocab;
    float *base = calloc((size_t)2 * K * H, sizeof(float));
    for (int p = 0; p < 2; p++)
        for (int c = 0; c < H; c++) base[(size_t)p * K * H + c] = 1.0f;
    for (int i = 0; i < d.cfg.base.n_layers; i++) {
        db_dynconv_w *cv[2] = {&d.layers[i].attn_conv, &d.layers[i].mlp_conv};
        for (int j = 0; j < 2; j++) {
            be->ops->upload(be, cv[j]->base, base, sizeof(float) * (size_t)2 * K * H);
            size_t bytes = (size_t)cv[j]->proj.rows * cv[j]->proj.cols * db_dtype_size(cv[j]->proj.dtype);
            void *zero = calloc(1, bytes);
            be->ops->upload(be, cv[j]->proj.data, zero, bytes);
            free(zero);
        }
    }
    int ctx[6] = {3, 14, 15, 92, 65, 35}, anchor = 8, B = 8;
    float *a = malloc(sizeof(float) * (size_t)(B - 1) * V);
    int ok = prefill_context(&t, &d, ctx, 6) == 0 &&
             db_drafter_block(&d, (int[]){0}, &anchor, 1, B, 1, err, sizeof err) == 0;
    if (ok) memcpy(a, db_drafter_logits(&d), sizeof(float) * (size_t)(B - 1) * V);
    ok = ok && db_drafter_block(&d, (int[]){0}, &anchor, 1, B, 0, err, sizeof err) == 0;
    tap_ok(ok && memcmp(a, db_drafter_logits(&d), sizeof(float) * (size_t)(B - 1) * V) == 0,
           "identity convolution == no convolution (bitwise)");
    free(a);
    free(base);
    db_drafter_free(&d);
    db_target_free(&t);
}

/* a copy of a drafter directory whose config announces another block_size (weights do not
 * depend on it), so the B = 16 path runs on the B = 8 fixture */
static int drafter_with_block(const char *src, int block, char *out, size_t n)
{
    snprintf(out, n, "/tmp/db-test-drafter-XXXXXX");
    if (!mkdtemp(out)) return -1;
    char p[1200], q[1200];
    snprintf(p, sizeof p, "%s/config.json", src);
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    char buf[8192];
    size_t m = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[m] = 0;
    cJSON *j = cJSON_Parse(buf);
    cJSON *dc = cJSON_GetObjectItem(j, "dflash_config");
    if (cJSON_GetObjectItem(dc, "block_size"))
        cJSON_ReplaceItemInObject(dc, "block_size", cJSON_CreateNumber(block));
    if (cJSON_GetObjectItem(j, "block_size"))
        cJSON_ReplaceItemInObject(j, "block_size", cJSON_CreateNumber(block));
    char *s = cJSON_Print(j);
    snprintf(q, sizeof q, "%s/config.json", out);
    f = fopen(q, "wb");
    fputs(s, f);
    fclose(f);
    free(s);
    cJSON_Delete(j);
    snprintf(p, sizeof p, "%s/model.safetensors", src);
    char abs[1024];
    if (!realpath(p, abs)) return -1;
    snprintf(q, sizeof q, "%s/model.safetensors", out);
    return symlink(abs, q);
}

static void check_lossless_on(const char *name, const char *target, int B)
{
    char dir[256];
    if (drafter_with_block(tu_data(name), 16, dir, sizeof dir) != 0) {
        tap_ok(0, "%s: temp drafter", name);
        return;
    }
    db_target t;
    db_drafter d;
    if (load_pair_on(&t, &d, dir, target)) {
        tap_ok(0, "%s: load", name);
        return;
    }
    enum { NP = 20, MAXNEW = 24 };
    db_rng rng;
    db_rng_seed(&rng, 42);
    int *prompts[NP], lens[NP], *ref[NP], *out[NP], nref[NP], nout[NP];
    for (int i = 0; i < NP; i++) {
        lens[i] = 3 + (int)(db_rng_next(&rng) % 10);
        prompts[i] = malloc(sizeof(int) * (size_t)lens[i]);
        for (int j = 0; j < lens[i]; j++) prompts[i][j] = (int)(db_rng_next(&rng) % (t.cfg.vocab > 16 ? 90 : 14));
        ref[i] = malloc(sizeof(int) * MAXNEW);
        out[i] = malloc(sizeof(int) * MAXNEW);
    }
    int ok = run_engine(&t, NULL, DB_VAR_AR, 1, 1, prompts, lens, NP, MAXNEW, ref, nref, NULL) == 0;
    for (int v = DB_VAR_DFLASH; v < DB_VAR_COUNT && ok; v++) {
        if (db_variant_check((db_variant)v, &d, err, sizeof err) != 0) continue;
        int good = run_engine(&t, &d, (db_variant)v, B, 4, prompts, lens, NP, MAXNEW, out, nout, NULL) == 0;
        if (!good) tap_diag("%s", err);
        int first_bad = -1;
        for (int i = 0; good && i < NP && first_bad < 0; i++)
            if (nout[i] != nref[i] || memcmp(out[i], ref[i], sizeof(int) * (size_t)nref[i]) != 0) first_bad = i;
        tap_ok(good && first_bad < 0, "%s/%s B=%d: greedy == ar on %d prompts (4 batched)%s", name,
               db_variant_name((db_variant)v), B, NP, first_bad >= 0 ? " (first mismatch below)" : "");
        if (first_bad >= 0) tap_diag("prompt %d differs", first_bad);
    }
    for (int i = 0; i < NP; i++) free(prompts[i]), free(ref[i]), free(out[i]);
    db_drafter_free(&d);
    db_target_free(&t);
    char p[300];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

static void check_lossless(const char *name, int B) { check_lossless_on(name, "qwen3-f32-tied", B); }

static void check_variant_refused(void)
{
    db_target t;
    db_drafter d;
    if (load_pair(&t, &d, tu_data("dflash-v1-f32"))) {
        tap_ok(0, "v1 load");
        return;
    }
    int rc = db_variant_check(DB_VAR_DFLASH2, &d, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "attention_conv.base_kernel"),
           "dflash2 on a v1 drafter is refused naming the tensor: %s", err);
    rc = db_variant_check(DB_VAR_CONV_OFF, &d, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "candidate_selector"), "conv-off on v1 refused: %s", err);
    tap_ok(db_variant_check(DB_VAR_DFLASH, &d, err, sizeof err) == 0, "dflash runs on v1");
    tap_ok(d.cfg.n_taps == 2 && d.cfg.tap_layers[0] == 1 && d.cfg.tap_layers[1] == 3,
           "default target_layer_ids for N=6, n=2 are [1, 3]");
    rc = db_variant_check(DB_VAR_DSPARK, &d, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "DSpark"), "dspark on a v1 drafter refused: %s", err);
    db_drafter_free(&d);
    db_target_free(&t);
    if (load_pair(&t, &d, tu_data("dspark-f32")) == 0) {
        rc = db_variant_check(DB_VAR_DFLASH, &d, err, sizeof err);
        tap_ok(rc == DB_EINPUT && strstr(err, "DFlash 1") && strstr(err, "DSpark"),
               "dflash on a DSpark drafter refused: %s", err);
        tap_ok(d.markov.rank == 8 && d.markov.scale == 1.0f && !d.markov.has_confidence && !d.markov.lm_head.data,
               "dspark-f32: rank 8 from the tensor shape, scale 1 by default, no own head, no confidence head");
        db_drafter_free(&d);
        db_target_free(&t);
    } else {
        tap_ok(0, "dspark-f32 load: %s", err);
    }
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    db_backend_opts bo = {.deterministic = 1};
    if (db_backend_create("cpu", &bo, &be, err, sizeof err) != 0) {
        tap_ok(0, "backend: %s", err);
        return tap_done();
    }
    const char *drafters[] = {"dflash-v1-f32", "dflash2-f32", "dflash2-swa-f32"};
    for (int i = 0; i < 3; i++) check_block_logits(drafters[i]);
    for (int i = 0; i < 3; i++) check_cycle_trace(drafters[i]);
    check_identity_conv();
    check_variant_refused();
    int blocks[] = {4, 8, 16};
    for (int i = 0; i < 3; i++) {
        check_lossless("dflash2-f32", blocks[i]);
        check_lossless("dflash-v1-f32", blocks[i]);
    }
    check_lossless("dflash2-swa-f32", 8);
    const char *dsparks[] = {"dspark-f32", "dspark-v16-f32"};
    for (int i = 0; i < 2; i++) {
        check_block_logits(dsparks[i]);
        check_dspark_corrected(dsparks[i]);
        check_cycle_trace(dsparks[i]);
    }
    for (int i = 0; i < 3; i++) {
        check_lossless("dspark-f32", blocks[i]);
        check_lossless_on("dspark-v16-f32", "qwen3-v16-f32", blocks[i]);
    }
    db_backend_destroy(be);
    return tap_done();
}
