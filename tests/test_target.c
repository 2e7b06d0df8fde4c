/* test_target.c — the C target forward against the PyTorch reference goldens
 * (scripts/reference/make_fixtures.py) and against itself:
 *   logits and tap hidden states vs golden for every fixture (1e-4 relative F32, 1e-2 BF16);
 *   KV-cache incremental decode == full-sequence forward;
 *   rows of 3 requests batched in one call == each request alone (bitwise, deterministic mode);
 *   truncate-then-redo == never-extended (bitwise);
 *   greedy generation (the engine's `ar` path) == the reference's greedy ids. */
#include "engine/engine.h"
#include "model/model_test.h"
#include "tap.h"
#include "model/target.h"
#include "test_util.h"
#include "base/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int taps[3] = {1, 3, 5};

static int setup(db_target *t, db_backend *be, const char *dir)
{
    char err[512];
    if (db_target_load(t, be, dir, err, sizeof err) != 0) {
        tap_diag("%s", err);
        return -1;
    }
    db_target_opts o = {.slots = 4, .capacity = 80, .max_rows = 16, .n_taps = 3, .tap_layers = taps};
    if (db_target_alloc(t, &o, err, sizeof err) != 0) {
        tap_diag("%s", err);
        return -1;
    }
    return 0;
}

/* forward tokens[0..n) of `slot` in one call; logits of all rows copied to out [n, V] */
static int forward_all(db_target *t, int slot, const int *tokens, int n, float *out, float *taps_out)
{
    char err[512];
    db_row rows[64];
    int lr[64];
    int base = db_target_len(t, slot);
    for (int i = 0; i < n; i++) {
        rows[i] = (db_row){slot, base + i, tokens[i]};
        lr[i] = i;
    }
    if (db_target_forward(t, rows, n, lr, n, err, sizeof err) != 0) {
        tap_diag("%s", err);
        return -1;
    }
    memcpy(out, db_target_logits(t), sizeof(float) * (size_t)n * t->cfg.vocab);
    if (taps_out) memcpy(taps_out, db_target_taps(t), sizeof(float) * (size_t)n * 3 * t->cfg.hidden);
    return 0;
}

static void check_fixture(const char *name, double tol, int deterministic)
{
    const char *dir = tu_data(name);
    cJSON *g = tu_golden(dir);
    db_backend *be;
    char err[512];
    db_backend_opts bo = {.deterministic = deterministic};
    if (!g || db_backend_create("cpu", &bo, &be, err, sizeof err) != 0) {
        tap_ok(0, "%s: golden and backend", name);
        cJSON_Delete(g);
        return;
    }
    db_target t;
    if (setup(&t, be, dir) != 0) {
        tap_ok(0, "%s: load", name);
        cJSON_Delete(g);
        db_backend_destroy(be);
        return;
    }
    int V = t.cfg.vocab, H = t.cfg.hidden, n;
    int *tokens = tu_ints(cJSON_GetObjectItem(g, "tokens"), &n);
    float *full = malloc(sizeof(float) * (size_t)n * V), *tp = malloc(sizeof(float) * (size_t)n * 3 * H);
    float *ref = malloc(sizeof(float) * (size_t)n * V), *reft = malloc(sizeof(float) * (size_t)n * 3 * H);
    int ok = forward_all(&t, 0, tokens, n, full, tp) == 0;
    const cJSON *lg = cJSON_GetObjectItem(g, "logits"), *tg = cJSON_GetObjectItem(g, "taps");
    for (int i = 0; i < n; i++) {
        int m;
        float *row = tu_floats(cJSON_GetArrayItem(lg, i), &m);
        memcpy(ref + (size_t)i * V, row, sizeof(float) * (size_t)V);
        free(row);
        row = tu_floats(cJSON_GetArrayItem(tg, i), &m);
        memcpy(reft + (size_t)i * 3 * H, row, sizeof(float) * (size_t)3 * H);
        free(row);
    }
    double e1 = tu_max_rel_err(full, ref, (size_t)n * V, 1.0);
    double e2 = tu_max_rel_err(tp, reft, (size_t)n * 3 * H, 1.0);
    tap_ok(ok && e1 < tol, "%s: logits vs golden, max rel err %.2e (tol %.0e)", name, e1, tol);
    tap_ok(ok && e2 < tol, "%s: tap hidden states vs golden, max rel err %.2e", name, e2);

    /* incremental decode in slot 1, one token per call */
    float *inc = malloc(sizeof(float) * (size_t)n * V);
    for (int i = 0; i < n && ok; i++) ok = forward_all(&t, 1, tokens + i, 1, inc + (size_t)i * V, NULL) == 0;
    double e3 = tu_max_rel_err(inc, full, (size_t)n * V, 1.0);
    tap_ok(ok && e3 < 1e-5, "%s: incremental decode == full forward (max rel %.2e)", name, e3);

    /* truncate-then-redo in slot 2: 8 tokens, 3 wrong ones, truncate to 8, the 4 right ones */
    float *a = malloc(sizeof(float) * 16 * V), *b = malloc(sizeof(float) * 16 * V);
    int wrong[3] = {5, 6, 7};
    ok = forward_all(&t, 2, tokens, 8, a, NULL) == 0 && forward_all(&t, 2, wrong, 3, b, NULL) == 0;
    db_target_truncate(&t, 2, 8);
    ok = ok && forward_all(&t, 2, tokens + 8, 4, b, NULL) == 0;
    tap_ok(ok && memcmp(b, full + (size_t)8 * V, sizeof(float) * 4 * V) == 0,
           "%s: truncate-then-redo == never extended (bitwise)", name);

    /* three requests batched in one call == each alone (slot 3 alone vs slots 0-2 again) */
    for (int s = 0; s < 4; s++) db_target_reset(&t, s);
    int seq[3][4] = {{tokens[0], tokens[1], tokens[2], tokens[3]}, {9, 8, 7, 6}, {1, 2, 3, 4}};
    db_row rows[12];
    int lr[12];
    for (int k = 0; k < 12; k++) { /* interleaved: r0 t0, r1 t0, r2 t0, r0 t1, ... */
        int req = k % 3, i = k / 3;
        rows[k] = (db_row){req, i, seq[req][i]};
        lr[k] = k;
    }
    ok = db_target_forward(&t, rows, 12, lr, 12, err, sizeof err) == 0;
    float *batched = malloc(sizeof(float) * 12 * V);
    memcpy(batched, db_target_logits(&t), sizeof(float) * 12 * V);
    int same = ok;
    for (int req = 0; req < 3 && same; req++) {
        db_target_reset(&t, 3);
        float alone[4 * 96 + 4 * 4096];
        float *al = V <= 4096 ? alone : NULL;
        same = al && forward_all(&t, 3, seq[req], 4, al, NULL) == 0;
        for (int i = 0; i < 4 && same; i++)
            same = memcmp(al + (size_t)i * V, batched + (size_t)(i * 3 + req) * V, sizeof(float) * V) == 0;
    }
    tap_ok(same, "%s: 3 requests batched == each alone (bitwise, deterministic=%d)", name, deterministic);

    /* greedy generation vs reference */
    const cJSON *gr = cJSON_GetObjectItem(g, "greedy");
    int np, ne;
    int *prompt = tu_ints(cJSON_GetObjectItem(gr, "prompt"), &np);
    int *expect = tu_ints(cJSON_GetObjectItem(gr, "output"), &ne);
    int nmax = cJSON_GetObjectItem(gr, "n")->valueint;
    int *out = malloc(sizeof(int) * (size_t)nmax);
    db_gen_params gp = {.variant = DB_VAR_AR, .block_size = 1, .top_p = 1.0f, .max_new_tokens = nmax};
    db_request req = {.prompt = prompt, .n_prompt = np, .out = out};
    db_engine *e = NULL;
    ok = db_engine_create(&e, &t, NULL, &gp, 1, np, err, sizeof err) == 0 &&
         db_engine_run(e, &req, 1, db_now(), NULL, NULL, err, sizeof err) == 0;
    if (!ok) tap_diag("%s", err);
    db_engine_destroy(e);
    int nout = req.n_out;
    tap_ok(ok && nout == ne && memcmp(out, expect, sizeof(int) * (size_t)ne) == 0,
           "%s: greedy ids == reference (%d tokens)", name, ne);

    free(out), free(prompt), free(expect), free(batched), free(a), free(b), free(inc);
    free(tokens), free(full), free(tp), free(ref), free(reft);
    db_target_free(&t);
    db_backend_destroy(be);
    cJSON_Delete(g);
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    check_fixture("qwen3-f32-tied", 1e-4, 1);
    check_fixture("qwen3-f32-sharded", 1e-4, 1);
    check_fixture("llama-f32", 1e-4, 1);
    check_fixture("qwen3-bf16-untied", 1e-2, 1);
    check_fixture("qwen3-f32-tied", 1e-4, 0);
    return tap_done();
}
