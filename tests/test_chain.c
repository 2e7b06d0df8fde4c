/* test_chain.c — the EAGLE-3 and MTP (chain) drafters against the PyTorch reference goldens
 * (scripts/reference/chain_fixtures.py) and against the lossless identity, on fixtures in every
 * layout (EAGLE-3 `midlayer.*` + offset d2t, speculators `layers.0.*`; MTP `mtp.*`, DeepSeek
 * names):
 *   the taps each tap convention names (output-of-layer ids, input-of-layer ids, the default);
 *   the logits of steps 1..B-1 after a context fed in two chunks (1e-4 relative, over the draft
 *   vocabulary), their top-k ids through d2t and the greedy picks;
 *   greedy cycle traces (drafts, accepted counts, bonus tokens) == golden;
 *   greedy output == `ar`, token for token, on 20 prompts at B = 4, 8, 16, 4 requests batched;
 *   the tap conventions agree (the same layers named both ways give the same logits), and the
 *   MTP feedback switch (`mtp_feedback`) changes the steps after the first only. */
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

static int load_pair(db_target *t, db_drafter *d, const char *dir, const char *target)
{
    if (db_target_load(t, be, tu_data(target), err, sizeof err) != 0) {
        tap_diag("%s", err);
        return -1;
    }
    if (db_drafter_load(d, be, dir, t, err, sizeof err) != 0) {
        tap_diag("%s", err);
        db_target_free(t);
        return -1;
    }
    return 0;
}

/* the golden context into slot 0 (two add_context calls: a pending row crosses them), then steps
 * 1..B-1 fed the anchor and the golden picks; the step logits [B-1, Vd] into rows */
static int run_steps(db_target *t, db_drafter *d, const int *ctx, int n, int anchor, const int *picks, int B,
                     float *rows)
{
    int Vd = d->cfg.draft_vocab;
    db_target_opts to = {.slots = 1, .capacity = 64, .max_rows = 32, .n_taps = d->cfg.n_taps,
                         .tap_layers = d->cfg.tap_layers};
    db_drafter_opts dop = {.slots = 1, .capacity = 64, .max_ctx_rows = 32, .max_requests = 1, .max_block = B};
    if (db_target_alloc(t, &to, err, sizeof err) || db_drafter_alloc(d, &dop, err, sizeof err)) return -1;
    db_row r[32];
    int slot[32] = {0}, pos[32];
    for (int i = 0; i < n; i++) r[i] = (db_row){0, i, ctx[i]}, pos[i] = i;
    if (db_target_forward(t, r, n, NULL, 0, err, sizeof err)) return -1;
    size_t w = (size_t)d->cfg.n_taps * t->cfg.hidden;
    if (db_drafter_add_context(d, db_target_taps(t), ctx, slot, pos, 6, err, sizeof err) ||
        db_drafter_add_context(d, db_target_taps(t) + 6 * w, ctx + 6, slot, pos + 6, n - 6, err, sizeof err))
        return -1;
    for (int s = 1; s < B; s++) {
        int tok = s == 1 ? anchor : picks[s - 2];
        if (db_drafter_chain_step(d, (int[]){0}, &tok, 1, s, err, sizeof err) ||
            be->ops->download(be, rows + (size_t)(s - 1) * Vd, db_drafter_step_logits(d), sizeof(float) * (size_t)Vd))
            return -1;
    }
    return 0;
}

static void check_steps(const char *name)
{
    const char *dir = tu_data(name);
    cJSON *g = tu_golden(dir);
    db_target t;
    db_drafter d;
    if (!g || load_pair(&t, &d, dir, cJSON_GetObjectItem(g, "target")->valuestring)) {
        tap_ok(0, "%s: load", name);
        cJSON_Delete(g);
        return;
    }
    int n, nt, nm, np, *ctx = tu_ints(cJSON_GetObjectItem(g, "context_tokens"), &n);
    int *taps = tu_ints(cJSON_GetObjectItem(g, "tap_layers"), &nt);
    int *map = tu_ints(cJSON_GetObjectItem(g, "draft_to_target"), &nm);
    int anchor = cJSON_GetObjectItem(g, "anchor")->valueint, B = cJSON_GetObjectItem(g, "block_size")->valueint;
    int Vd = d.cfg.draft_vocab;
    const cJSON *var = cJSON_GetObjectItem(cJSON_GetObjectItem(g, "variants"), d.cfg.kind == DB_DRAFTER_MTP ? "mtp" : "eagle3");
    int *picks = tu_ints(cJSON_GetObjectItem(var, "picks"), &np);
    int same = nt == d.cfg.n_taps && nm == Vd && memcmp(taps, d.cfg.tap_layers, sizeof(int) * (size_t)nt) == 0 &&
               memcmp(map, db_drafter_d2t(&d), sizeof(int) * (size_t)Vd) == 0;
    tap_ok(same, "%s: %d taps (%s convention) and the %d-id draft-to-target map == golden", name, d.cfg.n_taps,
           d.cfg.aux_input ? "input-of-layer" : "output-of-layer", Vd);
    const cJSON *lay = cJSON_GetObjectItem(g, "layout");
    static const char *const layouts[] = {"?", "midlayer", "layers.0", "mtp", "deepseek"};
    tap_ok(cJSON_IsString(lay) && !strcmp(lay->valuestring, layouts[d.chain.layout]), "%s: layout %s detected", name,
           layouts[d.chain.layout]);
    float *rows = malloc(sizeof(float) * (size_t)(B - 1) * Vd);
    int ok = np == B - 1 && run_steps(&t, &d, ctx, n, anchor, picks, B, rows) == 0;
    if (!ok) tap_diag("%s", err);
    double worst = 0;
    int top_ok = ok;
    const cJSON *lg = cJSON_GetObjectItem(var, "logits"), *tk = cJSON_GetObjectItem(var, "topk_ids");
    for (int r = 0; ok && r < B - 1; r++) {
        int m, k, ids[16];
        float *ref = tu_floats(cJSON_GetArrayItem(lg, r), &m);
        double e = m == Vd ? tu_max_rel_err(rows + (size_t)r * Vd, ref, (size_t)Vd, 1.0) : INFINITY;
        worst = e > worst ? e : worst;
        free(ref);
        int *rk = tu_ints(cJSON_GetArrayItem(tk, r), &k);
        float *row = rows + (size_t)r * Vd; /* top-k on the host, ties to the smaller draft id */
        for (int i = 0; i < k; i++) {
            int best = -1;
            for (int v = 0; v < Vd; v++) {
                int used = 0;
                for (int q = 0; q < i; q++) used |= ids[q] == v;
                if (!used && (best < 0 || row[v] > row[best])) best = v;
            }
            ids[i] = best;
            top_ok &= db_drafter_d2t(&d)[best] == rk[i];
        }
        top_ok &= db_drafter_d2t(&d)[ids[0]] == picks[r];
        free(rk);
    }
    tap_ok(ok && worst < 1e-4, "%s: logits of steps 1..%d vs golden, max rel err %.2e", name, B - 1, worst);
    tap_ok(top_ok, "%s: top-k ids (through d2t) and the greedy picks == golden", name);
    free(rows);
    free(ctx);
    free(taps);
    free(map);
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

static int run_engine(db_target *t, db_drafter *d, db_variant v, int B, int conc, int **prompts, const int *lens,
                      int n, int max_new, int **out, int *nout, trace *tr)
{
    db_gen_params p = {.variant = v, .block_size = B, .top_p = 1.0f, .max_new_tokens = max_new, .seed = 1,
                       .on_cycle = tr ? on_cycle : NULL, .on_cycle_user = tr};
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

static db_variant variant_of(const db_drafter *d) { return d->cfg.kind == DB_DRAFTER_MTP ? DB_VAR_MTP : DB_VAR_EAGLE3; }

static void check_cycle(const char *name)
{
    const char *dir = tu_data(name);
    cJSON *g = tu_golden(dir);
    db_target t;
    db_drafter d;
    if (!g || load_pair(&t, &d, dir, cJSON_GetObjectItem(g, "target")->valuestring)) {
        tap_ok(0, "%s: load", name);
        cJSON_Delete(g);
        return;
    }
    db_variant v = variant_of(&d);
    const cJSON *cy = cJSON_GetObjectItem(g, "cycle");
    const cJSON *var = cJSON_GetObjectItem(cJSON_GetObjectItem(cy, "variants"), db_variant_name(v));
    int np, ne, *prompt = tu_ints(cJSON_GetObjectItem(cy, "prompt"), &np);
    int max_new = cJSON_GetObjectItem(cy, "max_new_tokens")->valueint, B = cJSON_GetObjectItem(cy, "block_size")->valueint;
    int *expect = tu_ints(cJSON_GetObjectItem(var, "output"), &ne), *out = malloc(sizeof(int) * (size_t)max_new), nout = 0;
    trace *tr = calloc(1, sizeof *tr);
    int ok = run_engine(&t, &d, v, B, 1, &prompt, &np, 1, max_new, &out, &nout, tr) == 0;
    if (!ok) tap_diag("%s", err);
    tap_ok(ok && nout == ne && memcmp(out, expect, sizeof(int) * (size_t)ne) == 0, "%s: greedy cycle output == golden (%d tokens)",
           name, ne);
    const cJSON *gt = cJSON_GetObjectItem(var, "trace"), *step;
    int same = ok && tr->n == cJSON_GetArraySize(gt), c = 0, accepted = 0;
    cJSON_ArrayForEach(step, gt)
    {
        if (!same) break;
        int m, *dr = tu_ints(cJSON_GetObjectItem(step, "draft"), &m);
        same = tr->pos[c] == cJSON_GetObjectItem(step, "pos")->valueint &&
               tr->acc[c] == cJSON_GetObjectItem(step, "accepted")->valueint &&
               tr->bonus[c] == cJSON_GetObjectItem(step, "bonus")->valueint &&
               memcmp(dr, tr->draft[c], sizeof(int) * (size_t)m) == 0;
        if (!same) tap_diag("cycle %d differs (pos %d accepted %d bonus %d)", c, tr->pos[c], tr->acc[c], tr->bonus[c]);
        accepted += tr->acc[c];
        free(dr);
        c++;
    }
    tap_ok(same, "%s: %d cycle traces (drafts, accepted, bonus) == golden, %d drafts accepted", name, tr->n, accepted);
    free(tr);
    free(out);
    free(expect);
    free(prompt);
    db_drafter_free(&d);
    db_target_free(&t);
    cJSON_Delete(g);
}

static void check_lossless(const char *name, const char *target, int B)
{
    db_target t;
    db_drafter d;
    if (load_pair(&t, &d, tu_data(name), target)) {
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
    db_variant v = variant_of(&d);
    int good = ok && run_engine(&t, &d, v, B, 4, prompts, lens, NP, MAXNEW, out, nout, NULL) == 0, bad = -1;
    if (!good) tap_diag("%s", err);
    for (int i = 0; good && i < NP && bad < 0; i++)
        if (nout[i] != nref[i] || memcmp(out[i], ref[i], sizeof(int) * (size_t)nref[i]) != 0) bad = i;
    tap_ok(good && bad < 0, "%s/%s B=%d: greedy == ar on %d prompts (4 batched)", name, db_variant_name(v), B, NP);
    if (bad >= 0) tap_diag("prompt %d differs", bad);
    for (int i = 0; i < NP; i++) free(prompts[i]), free(ref[i]), free(out[i]);
    db_drafter_free(&d);
    db_target_free(&t);
}

/* a temporary copy of fixture `name` whose config has key (top level, or in eagle_config with
 * "eagle_config.") set to json (NULL: deleted); the weights linked */
static int edited_copy(const char *name, const char *key, const char *json, char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/db-test-chain-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char p[1200], q[1200];
    snprintf(p, sizeof p, "%s/config.json", tu_data(name));
    cJSON *j = tu_json_file(p), *o = j;
    if (!j) return -1;
    if (!strncmp(key, "eagle_config.", 13)) o = cJSON_GetObjectItem(j, "eagle_config"), key += 13;
    cJSON_DeleteItemFromObject(o, key);
    if (json) cJSON_AddItemToObject(o, key, cJSON_Parse(json));
    char *s = cJSON_Print(j);
    snprintf(q, sizeof q, "%s/config.json", dir);
    FILE *f = fopen(q, "wb");
    if (f) fputs(s, f), fclose(f);
    free(s);
    cJSON_Delete(j);
    snprintf(p, sizeof p, "%s/model.safetensors", tu_data(name));
    char abs[1024];
    snprintf(q, sizeof q, "%s/model.safetensors", dir);
    return realpath(p, abs) && symlink(abs, q) == 0 ? 0 : -1;
}

static void remove_copy(const char *dir)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

/* logits of the golden steps of fixture `name` with its config edited (key NULL: as it is) */
static int steps_of(const char *name, const char *key, const char *json, float *rows, db_drafter_config *cfg)
{
    char dir[256];
    const char *src = tu_data(name);
    if (key && edited_copy(name, key, json, dir, sizeof dir)) return -1;
    cJSON *g = tu_golden(src);
    db_target t;
    db_drafter d;
    int rc = -1;
    if (g && load_pair(&t, &d, key ? dir : src, cJSON_GetObjectItem(g, "target")->valuestring) == 0) {
        const cJSON *var = cJSON_GetObjectItem(cJSON_GetObjectItem(g, "variants"), d.cfg.kind == DB_DRAFTER_MTP ? "mtp" : "eagle3");
        int n, np, *ctx = tu_ints(cJSON_GetObjectItem(g, "context_tokens"), &n), *picks = tu_ints(cJSON_GetObjectItem(var, "picks"), &np);
        rc = run_steps(&t, &d, ctx, n, cJSON_GetObjectItem(g, "anchor")->valueint, picks, 8, rows);
        *cfg = d.cfg;
        free(ctx);
        free(picks);
        db_drafter_free(&d);
        db_target_free(&t);
    }
    cJSON_Delete(g);
    if (key) remove_copy(dir);
    return rc;
}

static void check_conventions(void)
{
    enum { VD = 64 };
    static float a[7 * 96], b[7 * 96];
    db_drafter_config ca, cb;
    /* eagle3-f32 names its taps 1, 3, 4 as outputs (first id 1); as inputs they are 2, 4, 5 */
    int ok = steps_of("eagle3-f32", NULL, NULL, a, &ca) == 0 &&
             steps_of("eagle3-f32", "eagle_config.eagle_aux_hidden_state_layer_ids", "[2, 4, 5]", b, &cb) == 0;
    tap_ok(ok && !ca.aux_input && cb.aux_input && !memcmp(ca.tap_layers, cb.tap_layers, sizeof(int) * 3) &&
               !memcmp(a, b, sizeof(float) * 7 * VD),
           "eagle3: ids [1, 3, 4] (output of layer) and [2, 4, 5] (input of layer) tap layers 1, 3, 4: identical logits");
    ok = steps_of("eagle3-f32", "eagle_config.eagle_aux_hidden_state_layer_ids", NULL, b, &cb) == 0;
    tap_ok(ok && cb.aux_input && cb.n_taps == 3 && cb.tap_layers[0] == 1 && cb.tap_layers[1] == 2 && cb.tap_layers[2] == 2,
           "eagle3: no ids -> EAGLE's default inputs {2, L/2, L-3} of a 6-layer target = taps 1, 2, 2");
    /* mtp-deepseek-f32 feeds back the pre-norm output; post_norm changes step 2 on, not step 1 */
    ok = steps_of("mtp-deepseek-f32", NULL, NULL, a, &ca) == 0 &&
         steps_of("mtp-deepseek-f32", "mtp_feedback", "\"post_norm\"", b, &cb) == 0;
    int first_same = ok && !memcmp(a, b, sizeof(float) * 96), later_differ = ok && memcmp(a + 96, b + 96, sizeof(float) * 96);
    tap_ok(ok && ca.mtp_feedback == -1 && cb.mtp_feedback == 1 && first_same && later_differ,
           "mtp: mtp_feedback post_norm on the DeepSeek layout (pre-norm by default) changes steps 2.. only");
}

int main(void)
{
    db_json_init();
    db_backend_opts bo = {.deterministic = 1};
    if (db_backend_create("cpu", &bo, &be, err, sizeof err) != 0) {
        tap_ok(0, "backend: %s", err);
        return tap_done();
    }
    const char *fx[] = {"eagle3-f32", "eagle3-specul-f32", "mtp-f32", "mtp-deepseek-f32", "eagle3-v16-f32", "mtp-v16-f32"};
    const char *tg[] = {"qwen3-f32-tied", "qwen3-f32-tied", "qwen3-f32-tied", "qwen3-f32-tied", "qwen3-v16-f32", "qwen3-v16-f32"};
    for (int i = 0; i < 6; i++) check_steps(fx[i]);
    for (int i = 0; i < 6; i++) check_cycle(fx[i]);
    check_conventions();
    int blocks[] = {4, 8, 16};
    for (int i = 0; i < 6; i++)
        for (int b = 0; b < 3; b++) check_lossless(fx[i], tg[i], blocks[b]);
    db_backend_destroy(be);
    return tap_done();
}
