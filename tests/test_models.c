/* test_models.c — the embedded trained pair (models/) against the golden figures the PyTorch
 * evaluation (scripts/train/evaluate.py, reference cycle of scripts/reference/) wrote into
 * models/eval-golden.json: for one prompt per family and every variant, the greedy block-16
 * cycle must reproduce the reference exactly — output ids, accepted count of every cycle, and so
 * tau. The DSpark drafter (key "dspark") and the chain drafters (keys "eagle3", "mtp") are
 * replayed when models/ has them. Skips when models/ has no trained pair. */
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

typedef struct {
    int n;
    int acc[4096];
} trace;

static void on_cycle(void *user, int req, int pos, const int *block, int b, int a, int bonus)
{
    (void)req, (void)pos, (void)block, (void)b, (void)bonus;
    trace *t = user;
    if (t->n < 4096) t->acc[t->n++] = a;
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    const char *root = getenv("DB_SOURCE_ROOT");
    char models[1024], tdir[1100], d2[1100], d1[1100], d3[1100], d4[1100], d5[1100];
    snprintf(models, sizeof models, "%s/models", root ? root : ".");
    snprintf(tdir, sizeof tdir, "%s/tiny-qwen3", models);
    snprintf(d2, sizeof d2, "%s/tiny-qwen3-dflash2-b16", models);
    snprintf(d1, sizeof d1, "%s/tiny-qwen3-dflash-b16", models);
    snprintf(d3, sizeof d3, "%s/tiny-qwen3-dspark-b16", models);
    snprintf(d4, sizeof d4, "%s/tiny-qwen3-eagle3", models);
    snprintf(d5, sizeof d5, "%s/tiny-qwen3-mtp", models);
    char gp[1200];
    snprintf(gp, sizeof gp, "%s/eval-golden.json", models);
    if (access(gp, R_OK) != 0 || access(tdir, R_OK) != 0) tap_skip_all("no trained pair in models/");
    cJSON *g = tu_json_file(gp);
    char err[512];
    db_backend *be;
    db_backend_opts bo = {.deterministic = 1};
    db_target t;
    db_drafter dr[5];
    int has_dspark = access(d3, R_OK) == 0, has_e3 = access(d4, R_OK) == 0, has_mtp = access(d5, R_OK) == 0;
    if (!g || db_backend_create("cpu", &bo, &be, err, sizeof err) ||
        db_target_load(&t, be, tdir, err, sizeof err) ||
        db_drafter_load(&dr[0], be, d2, &t, err, sizeof err) ||
        db_drafter_load(&dr[1], be, d1, &t, err, sizeof err) ||
        (has_dspark && db_drafter_load(&dr[2], be, d3, &t, err, sizeof err)) ||
        (has_e3 && db_drafter_load(&dr[3], be, d4, &t, err, sizeof err)) ||
        (has_mtp && db_drafter_load(&dr[4], be, d5, &t, err, sizeof err))) {
        tap_ok(0, "load the trained pair and eval-golden.json: %s", g ? err : "not JSON");
        return tap_done();
    }
    int B = cJSON_GetObjectItem(g, "block_size")->valueint;
    int max_new = cJSON_GetObjectItem(g, "max_new_tokens")->valueint;
    const cJSON *fam;
    cJSON_ArrayForEach(fam, cJSON_GetObjectItem(g, "families"))
    {
        int np, *prompt = tu_ints(cJSON_GetObjectItem(fam, "prompt_ids"), &np);
        const cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(fam, "variants"))
        {
            /* keys: dflash2 / selector-off / conv-off on the DFlash 2 checkpoint,
             * dflash2-ckpt-as-dflash = variant dflash on it, dflash-v1 = the DFlash 1 checkpoint,
             * dspark = the DSpark checkpoint */
            int is_dspark = strcmp(v->string, "dspark") == 0, is_e3 = strcmp(v->string, "eagle3") == 0,
                is_mtp = strcmp(v->string, "mtp") == 0;
            if ((is_dspark && !has_dspark) || (is_e3 && !has_e3) || (is_mtp && !has_mtp)) {
                tap_ok(0, "%s/%s: eval-golden.json has it, models/ has no checkpoint for it", fam->string, v->string);
                continue;
            }
            db_drafter *d = strcmp(v->string, "dflash-v1") == 0 ? &dr[1] : is_dspark ? &dr[2] : is_e3 ? &dr[3]
                            : is_mtp ? &dr[4] : &dr[0];
            db_variant var;
            /* conv and selector off on the DFlash 2 checkpoint: dflash2-bare (dflash is v1's) */
            if (d == &dr[1]) var = DB_VAR_DFLASH;
            else if (strcmp(v->string, "dflash2-ckpt-as-dflash") == 0) var = DB_VAR_DFLASH2_BARE;
            else if (db_variant_parse(v->string, &var) != 0) continue;
            trace *tr = calloc(1, sizeof *tr);
            db_gen_params p = {.variant = var, .block_size = B, .top_p = 1.0f, .max_new_tokens = max_new,
                               .on_cycle = on_cycle, .on_cycle_user = tr};
            int *out = malloc(sizeof(int) * (size_t)max_new);
            db_request r = {.prompt = prompt, .n_prompt = np, .out = out};
            db_engine *e = NULL;
            int ok = db_engine_create(&e, &t, d, &p, 1, np, err, sizeof err) == 0 &&
                     db_engine_run(e, &r, 1, db_now(), NULL, NULL, err, sizeof err) == 0;
            if (!ok) tap_diag("%s", err);
            db_engine_destroy(e);
            int ne, na, *expect = tu_ints(cJSON_GetObjectItem(v, "output_ids"), &ne);
            int *acc = tu_ints(cJSON_GetObjectItem(v, "accepted_per_cycle"), &na);
            /* the reference's "tau" is committed / (cycles + the prefill step): our tokens per target
             * call; our tau (tokens per drafting cycle) is (committed - 1) / cycles of the same run */
            double gcall = cJSON_GetObjectItem(v, "tau")->valuedouble;
            int gcommitted = cJSON_GetObjectItem(v, "committed")->valueint, gcycles = cJSON_GetObjectItem(v, "cycles")->valueint;
            double gtau = gcycles ? (double)(gcommitted - 1) / gcycles : NAN;
            double call = db_req_stats_tokens_per_call(&r.st), tau = db_req_stats_tau(&r.st);
            int same_out = ok && r.n_out == ne && memcmp(out, expect, sizeof(int) * (size_t)ne) == 0;
            int same_acc = ok && tr->n == na && memcmp(tr->acc, acc, sizeof(int) * (size_t)na) == 0;
            tap_ok(same_out && same_acc && r.st.cycles == gcycles && fabs(call - gcall) < 1e-6 && fabs(tau - gtau) < 1e-12,
                   "%s/%s: %d tokens, %d cycles, tokens per target call %.4f == reference %.4f, tau %.4f == "
                   "(committed - 1) / cycles %.4f (ids %s, accepted counts %s)",
                   fam->string, v->string, r.n_out, tr->n, call, gcall, tau, gtau, same_out ? "same" : "DIFFER",
                   same_acc ? "same" : "DIFFER");
            free(expect), free(acc), free(out), free(tr);
        }
        free(prompt);
    }
    db_drafter_free(&dr[0]);
    db_drafter_free(&dr[1]);
    if (has_dspark) db_drafter_free(&dr[2]);
    if (has_e3) db_drafter_free(&dr[3]);
    if (has_mtp) db_drafter_free(&dr[4]);
    db_target_free(&t);
    db_backend_destroy(be);
    cJSON_Delete(g);
    return tap_done();
}
