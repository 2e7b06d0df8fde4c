/* test_sampling.c — rejection sampling preserves the target distribution (lossless verification).
 *
 * On the 16-token fixture pair, 100k requests per variant each generate two tokens at T > 0:
 * the first from the prefill (target alone), the second from one speculative cycle (an
 * accepted draft, or the residual / bonus draw). The joint counts of (x1, x2) are compared with
 * the target's exact joint p(x1) p(x2 | x1) (computed here with the target, whose logits the
 * golden tests pin to the PyTorch reference) by a chi-square test (cells with expected count
 * < 5 pooled); the test passes at p > 0.001. The same test must REJECT a deliberately broken
 * acceptance rule (every draft accepted), showing it has the power to catch a wrong sampler.
 * `dspark` runs on its own 16-token fixture (dspark-v16-f32: a reduced draft vocabulary of 12
 * ids with d2t, so q is 0 at four target ids), its q the Markov-corrected distribution. `eagle3`
 * and `mtp` run on theirs (eagle3-v16-f32: draft vocabulary 12 with d2t, q built on the host;
 * mtp-v16-f32: the full vocabulary, q kept on the device), q each chain step's distribution. */
#include "engine/engine_test.h"
#include "model/model_test.h"
#include "tap.h"
#include "test_util.h"
#include "base/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 16, N_REQ = 102000 }; /* >= 100k second tokens after EOS-first requests */

static db_backend *be;
static char err[512];

/* target's filtered distribution after `ids` */
static void target_dist(db_target *t, const int *ids, int n, float temp, float top_p, int top_k, double *out)
{
    db_target_opts o = {.slots = 1, .capacity = 32, .max_rows = 32};
    db_target_alloc(t, &o, err, sizeof err);
    db_row rows[32];
    for (int i = 0; i < n; i++) rows[i] = (db_row){0, i, ids[i]};
    int last = n - 1;
    db_target_forward(t, rows, n, &last, 1, err, sizeof err);
    float x[V];
    memcpy(x, db_target_logits(t), sizeof x);
    db_probs_host(x, V, temp, top_p, top_k);
    for (int i = 0; i < V; i++) out[i] = x[i];
}

/* upper tail of chi-square with k degrees of freedom (Wilson-Hilferty) */
static double chi2_pvalue(double x, int k)
{
    double z = (pow(x / k, 1.0 / 3.0) - (1.0 - 2.0 / (9.0 * k))) / sqrt(2.0 / (9.0 * k));
    return 0.5 * erfc(z / sqrt(2.0));
}

static double chi_square(const long *obs, const double *expect_p, int cells, long total, int *df)
{
    double chi = 0, pool_e = 0;
    long pool_o = 0;
    int used = 0;
    for (int c = 0; c < cells; c++) {
        double e = expect_p[c] * total;
        if (e < 5) {
            pool_e += e;
            pool_o += obs[c];
            continue;
        }
        chi += (obs[c] - e) * (obs[c] - e) / e;
        used++;
    }
    if (pool_e > 0) {
        chi += (pool_o - pool_e) * (pool_o - pool_e) / (pool_e > 1e-9 ? pool_e : 1e-9);
        used++;
    }
    *df = used - 1;
    return chi;
}

static double run_variant(db_target *t, db_drafter *d, db_variant v, const int *prompt, int np,
                          float temp, float top_p, int top_k, int broken, const double *joint)
{
    db_gen_params p = {.variant = v, .block_size = 4, .temperature = temp, .top_p = top_p,
                       .top_k = top_k, .max_new_tokens = 2, .seed = 7};
    db_engine *e;
    db_engine_set_test_hooks(&(struct db_engine_test_hooks){.broken_accept = broken});
    int created = db_engine_create(&e, t, d, &p, 64, np, err, sizeof err);
    db_engine_set_test_hooks(NULL);
    if (created != 0) {
        tap_diag("%s", err);
        return -1;
    }
    db_request *r = calloc(N_REQ, sizeof *r);
    int *out = malloc(sizeof(int) * 2 * N_REQ);
    for (int i = 0; i < N_REQ; i++) r[i] = (db_request){.prompt = prompt, .n_prompt = np, .out = out + 2 * i};
    int rc = db_engine_run(e, r, N_REQ, db_now(), NULL, NULL, err, sizeof err);
    db_engine_destroy(e);
    long obs[V * V] = {0}, total = 0;
    for (int i = 0; rc == 0 && i < N_REQ; i++) {
        if (r[i].n_out < 2) continue; /* EOS first: no second token */
        obs[out[2 * i] * V + out[2 * i + 1]]++;
        total++;
    }
    /* condition the expectation on having a second token */
    double cond[V * V], mass = 0;
    for (int c = 0; c < V * V; c++) mass += joint[c];
    for (int c = 0; c < V * V; c++) cond[c] = joint[c] / mass;
    free(r);
    free(out);
    if (rc) {
        tap_diag("%s", err);
        return -1;
    }
    int df;
    double chi = chi_square(obs, cond, V * V, total, &df);
    double pv = chi2_pvalue(chi, df);
    tap_diag("%s%s T=%.1f top_p=%.2f top_k=%d: %ld samples, chi2 %.1f, df %d, p %.3g", db_variant_name(v),
             broken ? " (broken rule)" : "", temp, top_p, top_k, total, chi, df, pv);
    return pv;
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    db_backend_opts bo = {.threads = 1}; /* tiny matrices: threads would only add barriers */
    if (db_backend_create("cpu", &bo, &be, err, sizeof err) != 0) return tap_done();
    db_target t;
    db_drafter d, ds, de, dm;
    cJSON *g = tu_golden(tu_data("dflash2-v16-f32"));
    if (!g || db_target_load(&t, be, tu_data("qwen3-v16-f32"), err, sizeof err) ||
        db_drafter_load(&d, be, tu_data("dflash2-v16-f32"), &t, err, sizeof err) ||
        db_drafter_load(&ds, be, tu_data("dspark-v16-f32"), &t, err, sizeof err) ||
        db_drafter_load(&de, be, tu_data("eagle3-v16-f32"), &t, err, sizeof err) ||
        db_drafter_load(&dm, be, tu_data("mtp-v16-f32"), &t, err, sizeof err)) {
        tap_ok(0, "load v16 pair: %s", err);
        return tap_done();
    }
    int np, *prompt = tu_ints(cJSON_GetObjectItem(g, "prompt"), &np);
    struct {
        float temp, top_p;
        int top_k;
    } settings[2] = {{1.0f, 1.0f, 0}, {0.8f, 0.9f, 8}};
    for (int si = 0; si < 2; si++) {
        float T = settings[si].temp, tp = settings[si].top_p;
        int tk = settings[si].top_k;
        /* exact joint of the first two tokens, EOS as first token excluded */
        double p1[V], joint[V * V];
        target_dist(&t, prompt, np, T, tp, tk, p1);
        int ext[64];
        memcpy(ext, prompt, sizeof(int) * (size_t)np);
        for (int a = 0; a < V; a++) {
            double p2[V];
            ext[np] = a;
            if (db_target_is_eos(&t, a) || p1[a] == 0) {
                for (int b = 0; b < V; b++) joint[a * V + b] = 0;
                continue;
            }
            target_dist(&t, ext, np + 1, T, tp, tk, p2);
            for (int b = 0; b < V; b++) joint[a * V + b] = p1[a] * p2[b];
        }
        for (int v = DB_VAR_DFLASH; v < DB_VAR_COUNT; v++) {
            if (si == 1 && v != DB_VAR_DFLASH2 && v != DB_VAR_DFLASH2_BARE) continue;
            if (db_variant_check((db_variant)v, &d, err, sizeof err) != 0) continue; /* dflash: v1 only */
            double pv = run_variant(&t, &d, (db_variant)v, prompt, np, T, tp, tk, 0, joint);
            tap_ok(pv > 0.001, "%s T=%.1f top_p=%.2f top_k=%d: joint of the first two tokens ~ target (p = %.3g)",
                   db_variant_name((db_variant)v), T, tp, tk, pv);
        }
        {
            double pv = run_variant(&t, &ds, DB_VAR_DSPARK, prompt, np, T, tp, tk, 0, joint);
            tap_ok(pv > 0.001, "dspark (draft vocabulary 12 of 16) T=%.1f top_p=%.2f top_k=%d: joint of the first "
                   "two tokens ~ target (p = %.3g)", T, tp, tk, pv);
        }
        {
            double pv = run_variant(&t, &de, DB_VAR_EAGLE3, prompt, np, T, tp, tk, 0, joint);
            tap_ok(pv > 0.001, "eagle3 (draft vocabulary 12 of 16) T=%.1f top_p=%.2f top_k=%d: joint of the first "
                   "two tokens ~ target (p = %.3g)", T, tp, tk, pv);
            pv = run_variant(&t, &dm, DB_VAR_MTP, prompt, np, T, tp, tk, 0, joint);
            tap_ok(pv > 0.001, "mtp T=%.1f top_p=%.2f top_k=%d: joint of the first two tokens ~ target (p = %.3g)", T,
                   tp, tk, pv);
        }
        if (si == 0) {
            double pv = run_variant(&t, &dm, DB_VAR_MTP, prompt, np, T, tp, tk, 1, joint);
            tap_ok(pv >= 0 && pv < 0.001, "mtp: a broken acceptance rule is caught by the same test (p = %.3g)", pv);
            pv = run_variant(&t, &ds, DB_VAR_DSPARK, prompt, np, T, tp, tk, 1, joint);
            tap_ok(pv >= 0 && pv < 0.001, "dspark: a broken acceptance rule is caught by the same test (p = %.3g)", pv);
            pv = run_variant(&t, &d, DB_VAR_DFLASH2, prompt, np, T, tp, tk, 1, joint);
            tap_ok(pv >= 0 && pv < 0.001, "a broken acceptance rule is caught by the same test (p = %.3g)", pv);
        }
    }
    free(prompt);
    cJSON_Delete(g);
    db_drafter_free(&d);
    db_drafter_free(&ds);
    db_drafter_free(&de);
    db_drafter_free(&dm);
    db_target_free(&t);
    db_backend_destroy(be);
    return tap_done();
}
