/* cli_plan.c — `dflash-bench plan`: capacity planning for a target / drafter pair known only by
 * its config.json files (capacity.h).
 *
 *   1. the device: memory bandwidth and matmul rate, measured through the backend (a GEMV over
 *      a large weight, a 512-row matmul) or given (--bandwidth-gbs, --gflops);
 *   2. the roofline prediction of one `ar` step and one DFlash cycle (draft, select, context
 *      materialization, verify) at each concurrency, and the tok/s they give at the profile's
 *      expected acceptance length tau;
 *   3. the memory each concurrency needs (weights + KV + activations) against what the device
 *      has;
 *   4. unless --no-measure: a short run of a synthetic pair of exactly those shapes (weights
 *      generated on the backend, acceptance replayed from the profile), whose measured step /
 *      cycle times and decode tok/s are printed next to the prediction.
 * Acceptance: --acceptance-profile FILE (profile.h), or --tau X (one constant per-position rate
 * giving that tau at the block size), or by default the published figure built in
 * (configs/profiles/README.md): the per-position Recall@1 of a 5-layer Qwen3-4B-class DFlash
 * drafter on GSM8K at T = 0 (tau 4.27 at block 8).
 * Decode tok/s = concurrency x tau / cycle time; prefill is not part of it (`run --predict`
 * predicts whole runs).
 * Weight dtype: --dtype (an element type or a quantized one: q8_0, q4_0 ... iq4_xs, at
 * their bytes per weight with the block scales, capacity.h), by default the main dtype of the
 * target's weights when --target-config is a checkpoint (a .gguf file, a directory), else bf16.
 * Synthetic weights are not made quantized: at a quantized dtype nothing is measured.
 * --tp LIST adds the tensor-parallel prediction (cluster/tp.h): per GPU memory, compute and
 * all-reduce time and tok/s for each degree and concurrency, on the --link preset.
 * --verify-rows LIST [-C / --depth LIST] prints instead the K-flat table: the target's verify
 * forward of one request of R rows after D cached positions (capacity.h db_roofline_verify, the
 * cycle's verify cost), its time over the 16-row time at the same depth (vs_16_rows), the time
 * of each part alone and the bound; predicted only (bench --mode verify measures it).
 * Without --verify-rows, -C / --depth LIST is an axis of the plan as in run: a row per depth and
 * concurrency, each request's prompt preceded by D tokens (prefill, context and memory of
 * D + prompt; the synthetic run's prompts get D random ids more). */
#include "bench/capacity.h"
#include "bench/device_preset.h"
#include "bench/device_probe.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cluster/tp.h"
#include "engine/engine.h"
#include "bench/profile.h"
#include "bench/runner.h"
#include "engine/session.h"
#include "model/safetensors.h"
#include "model/synthetic.h"
#include "base/parse.h"
#include "base/paths.h"
#include "base/quantile.h"
#include "base/json_build.h"
#include "base/util.h"
#include "base/csv_io.h"
#include "report/report_csv.h"
#include "result/run_meta.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* DFlash (5-layer, Qwen3-4B class) on GSM8K, T = 0, per-position Recall@1, counted
 * where every earlier position was right, i.e. the conditional acceptance of greedy DFlash */
static const float dflash_gsm8k_recall1[7] = {0.854f, 0.803f, 0.794f, 0.783f, 0.775f, 0.759f, 0.729f};

#define MAX_REPS 15

typedef struct {
    int conc, depth;        /* concurrency; tokens of context before each prompt (-C) */
    db_step_cost ar, cyc;
    db_step_cost cyc_mt;    /* the cycle predicted at the measured tau (what meas/pred compares) */
    double ctx, tau;
    db_mem_need mem;        /* weights + this concurrency's engine (the larger of ar / cycle) */
    int measured;
    double ar_ms, ar_tok_s;               /* measured */
    double cyc_ms, cyc_tok_s, tau_meas;
    double draft_ms, select_ms, verify_ms, host_ms;
    db_request_cost ar_req, cyc_req; /* whole requests: prefill + decode over the growing context */
} plan_row;

/* one timed run (repetition k of raw): mean step (cycle) time and decode tokens per step over
 * its requests */
static int step_times(const db_point_raw *raw, int k, double *ms, double *tau, double split[4], char *err,
                      size_t errlen)
{
    double t = 0, tk = 0, sp[4] = {0, 0, 0, 0};
    int n = 0;
    for (int i = 0; i < raw->n_prompts; i++) {
        const db_req_stats *st = &raw->reqs[(size_t)k * raw->n_prompts + i];
        int steps = st->cycles; /* decode steps / drafting cycles: the prefill is none */
        if (steps < 1) continue;
        double x[4] = {st->t_draft, st->t_select, st->t_verify, st->t_host};
        for (int j = 0; j < 4; j++) sp[j] += x[j] / steps;
        t += (x[0] + x[1] + x[2] + x[3]) / steps;
        tk += db_req_stats_tau(st);
        n++;
    }
    if (n == 0) return db_fail(err, errlen, DB_EINPUT, "plan: no decode step to time (raise --max-new-tokens)");
    *ms = 1e3 * t / n;
    *tau = tk / n;
    for (int j = 0; j < 4; j++) split[j] = 1e3 * sp[j] / n;
    return DB_OK;
}

static const char *bound(const db_cost *c) { return c->compute_bound ? "compute" : "memory"; }

static double ratio(double a, double b) { return b > 0 && a > 0 ? a / b : NAN; }

static void fmt(char *b, size_t n, const char *f, double v)
{
    if (isfinite(v) && v > 0) snprintf(b, n, f, v);
    else snprintf(b, n, "-");
}

/* the JSON output, every cJSON result checked (base/util.h db_json_ok): json_oom is set when one
 * failed, and the document is then not printed */
static int json_oom;
static int *const oom = &json_oom;

/* a table of rates at 2^i rows, i < n: " 1: GFLOP/s, 2: ..." (md) or {"1": GFLOP/s, ...} (json) */
static void print_by_rows(const double *rate, int n)
{
    for (int i = 0; i < n; i++) printf("%s %d: %.0f", i ? "," : "", 1 << i, rate[i] / 1e9);
}

static void add_by_rows(cJSON *root, const char *name, const double *rate, int n)
{
    cJSON *by = J(cJSON_AddObjectToObject(root, name));
    for (int i = 0; i < n; i++) {
        char k[12];
        snprintf(k, sizeof k, "%d", 1 << i);
        J(cJSON_AddNumberToObject(by, k, rate[i] / 1e9));
    }
}

/* the md header's device and target lines, shared by the plan and the K-flat table */
static void print_md_device(const db_hw *hw, const db_model_config *t, const char *device, size_t avail, db_dtype dt,
                            const char *mix)
{
    printf("- device: %s; %.2f GiB free\n", device, (double)avail / DB_GIB);
    printf("- bandwidth %.1f GB/s (%s)\n- matmul %.1f GFLOP/s (%s)\n", hw->bw / 1e9, hw->bw_source,
           hw->flops / 1e9, hw->flops_source);
    if (hw->n_eff > 0) {
        printf("- preset %s (%s): matmul efficiency by rows:", hw->preset, hw->name);
        for (int i = 0; i < hw->n_eff; i++) printf("%s %.0f: %.3f", i ? "," : "", hw->eff_rows[i], hw->eff[i]);
        printf("; %.1f us a forward, %.1f us a sampled row\n", hw->fwd_s * 1e6, hw->sample_s * 1e6);
    }
    if (hw->rate[0] > 0) { /* the roofline's arithmetic runs at the rate of its row count */
        printf("- matmul GFLOP/s by rows (one target layer's matrices, weights from memory):");
        print_by_rows(hw->rate, DB_HW_RATE_ROWS);
        printf("\n");
    }
    if (hw->attn_rate[0] > 0) {
        printf("- attention GFLOP/s by query rows per request (256 cached keys, caches from memory):");
        print_by_rows(hw->attn_rate, DB_HW_ATTN_ROWS);
        printf(", small op %.1f us\n", hw->op_s * 1e6);
    }
    printf("- target %s: %.2f GiB of %s weights", t->path, db_weights_bytes(t, NULL, dt) / DB_GIB,
           db_dtype_name(dt));
    if (mix[0] && strcmp(mix, db_dtype_name(dt))) printf(" (the file's mix: %s)", mix);
    printf("\n");
}

/* the first cell of a concurrency row: "c" or, with a depth axis, "D | c" */
static const char *row_key(const plan_row *r, int depths, char *b, size_t n)
{
    if (depths) snprintf(b, n, "%d | %d", r->depth, r->conc);
    else snprintf(b, n, "%d", r->conc);
    return b;
}

static void print_md(const plan_row *rows, int nrows, const db_hw *hw, const db_model_config *t,
                     const db_drafter_config *d, const char *variant, int B, const char *acc,
                     const char *device, size_t avail, db_dtype dt, const char *mix, int depths)
{
    const char *dh = depths ? " depth |" : "", *dr = depths ? "--:|" : "";
    char key[48];
    printf("# dflash-bench plan\n\n");
    print_md_device(hw, t, device, avail, dt, mix);
    if (d)
        printf("- drafter %s: %.2f GiB; variant %s, block %d\n", d->base.path,
               (db_weights_bytes(t, d, dt) - db_weights_bytes(t, NULL, dt)) / DB_GIB, variant, B);
    printf("- acceptance: %s\n\n", acc);
    printf("| variant |%s c | ctx | tau | GiB/step | GFLOP/step | bound | pred ms | pred tok/s | meas ms "
           "| meas tok/s | meas/pred | memory GiB |\n", dh);
    printf("|---|%s--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|\n", dr);
    for (int i = 0; i < nrows; i++) {
        const plan_row *r = &rows[i];
        char a[32], b[32], c[32], e[32];
        double mem = (r->mem.weights + r->mem.kv + r->mem.act) / DB_GIB;
        fmt(a, sizeof a, "%.3f", r->ar_ms);
        fmt(b, sizeof b, "%.1f", r->ar_tok_s);
        fmt(c, sizeof c, "%.2f", ratio(r->ar_tok_s, r->ar.tok_s));
        printf("| ar | %s | %.0f | 1.00 | %.3f | %.2f | %s | %.3f | %.1f | %s | %s | %s | %.2f |\n",
               row_key(r, depths, key, sizeof key), r->ctx, r->ar.verify.bytes / DB_GIB, r->ar.verify.flops / 1e9,
               bound(&r->ar.verify), 1e3 * r->ar.t, r->ar.tok_s, a, b, c, mem);
        if (!d) continue;
        db_cost tot = r->cyc.draft;
        tot.bytes += r->cyc.select.bytes + r->cyc.ctx.bytes + r->cyc.verify.bytes;
        tot.flops += r->cyc.select.flops + r->cyc.ctx.flops + r->cyc.verify.flops;
        fmt(a, sizeof a, "%.3f", r->cyc_ms);
        fmt(b, sizeof b, "%.1f", r->cyc_tok_s);
        fmt(c, sizeof c, "%.2f", ratio(r->cyc_tok_s, r->cyc_mt.tok_s));
        fmt(e, sizeof e, "%.2f", r->tau_meas);
        printf("| %s | %s | %.0f | %.2f (meas %s) | %.3f | %.2f | %s | %.3f | %.1f | %s | %s | %s | %.2f |\n",
               variant, row_key(r, depths, key, sizeof key), r->ctx, r->tau, e, tot.bytes / DB_GIB, tot.flops / 1e9,
               bound(&r->cyc.verify), 1e3 * r->cyc.t, r->cyc.tok_s, a, b, c, mem);
    }
    printf("\nWhole requests (%s): prefill, then the context growing from the prompt to prompt + n, "
           "predicted:\n\n|%s c | ar prefill ms | ar decode s | ar tok/s | %s prefill ms | %s decode s | %s tok/s | speedup |\n"
           "|%s--:|--:|--:|--:|--:|--:|--:|--:|\n", d ? "ar and the variant" : "ar", dh, variant, variant, variant, dr);
    for (int i = 0; i < nrows; i++) {
        const plan_row *r = &rows[i];
        char a[32], b[32], c[32], e[32];
        fmt(a, sizeof a, "%.2f", 1e3 * r->cyc_req.prefill_s);
        fmt(b, sizeof b, "%.3f", r->cyc_req.decode_s);
        fmt(c, sizeof c, "%.1f", r->cyc_req.tok_s);
        fmt(e, sizeof e, "%.2fx", ratio(r->cyc_req.tok_s, r->ar_req.tok_s));
        printf("| %s | %.2f | %.3f | %.1f | %s | %s | %s | %s |\n", row_key(r, depths, key, sizeof key),
               1e3 * r->ar_req.prefill_s, r->ar_req.decode_s,
               r->ar_req.tok_s, a, b, c, e);
    }
    if (!d) return;
    printf("\nCycle split, ms (predicted draft / select / context / verify; measured draft incl. "
           "context / select / verify / host):\n\n|%s c | pred draft | pred select | pred context | "
           "pred verify | meas draft+ctx | meas select | meas verify | meas host | pred speedup | "
           "pred speedup at meas tau | meas speedup |\n|%s--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n", dh, dr);
    for (int i = 0; i < nrows; i++) {
        const plan_row *r = &rows[i];
        char m[4][32], ps[32], pm[32], ms[32];
        double v[4] = {r->draft_ms, r->select_ms, r->verify_ms, r->host_ms};
        for (int j = 0; j < 4; j++) {
            if (r->measured) snprintf(m[j], sizeof m[j], "%.3f", v[j]);
            else snprintf(m[j], sizeof m[j], "-");
        }
        fmt(ps, sizeof ps, "%.2fx", ratio(r->cyc.tok_s, r->ar.tok_s));
        fmt(pm, sizeof pm, "%.2fx", ratio(r->cyc_mt.tok_s, r->ar.tok_s));
        fmt(ms, sizeof ms, "%.2fx", ratio(r->cyc_tok_s, r->ar_tok_s));
        printf("| %s | %.3f | %.3f | %.3f | %.3f | %s | %s | %s | %s | %s | %s | %s |\n", row_key(r, depths, key, sizeof key),
               1e3 * r->cyc.draft.t, 1e3 * r->cyc.select.t, 1e3 * r->cyc.ctx.t, 1e3 * r->cyc.verify.t,
               m[0], m[1], m[2], m[3], ps, pm, ms);
    }
}

static cJSON *cost_json(const db_cost *c)
{
    cJSON *o = J(cJSON_CreateObject());
    J(cJSON_AddNumberToObject(o, "bytes", c->bytes));
    J(cJSON_AddNumberToObject(o, "flops", c->flops));
    J(cJSON_AddNumberToObject(o, "ms", 1e3 * c->t));
    J(cJSON_AddStringToObject(o, "bound", bound(c)));
    return o;
}

static void num_or_null(cJSON *o, const char *k, double v)
{
    if (isfinite(v) && v > 0) J(cJSON_AddNumberToObject(o, k, v));
    else J(cJSON_AddNullToObject(o, k));
}

/* the JSON document's device and target keys, shared by the plan and the K-flat table */
static void json_device(cJSON *root, const db_hw *hw, const db_model_config *t, const char *device, size_t avail,
                        db_dtype dt, const char *mix)
{
    J(cJSON_AddStringToObject(root, "device", device));
    J(cJSON_AddNumberToObject(root, "mem_available_bytes", (double)avail));
    J(cJSON_AddNumberToObject(root, "bandwidth_gbs", hw->bw / 1e9));
    J(cJSON_AddStringToObject(root, "bandwidth_source", hw->bw_source));
    J(cJSON_AddNumberToObject(root, "gflops", hw->flops / 1e9));
    J(cJSON_AddStringToObject(root, "gflops_source", hw->flops_source));
    if (hw->n_eff > 0) {
        J(cJSON_AddStringToObject(root, "device_config", hw->preset));
        J(cJSON_AddStringToObject(root, "device_name", hw->name));
        J(cJSON_AddNumberToObject(root, "forward_fixed_us", hw->fwd_s * 1e6));
        J(cJSON_AddNumberToObject(root, "sampled_token_us", hw->sample_s * 1e6));
    }
    if (hw->rate[0] > 0) add_by_rows(root, "gflops_by_rows", hw->rate, DB_HW_RATE_ROWS);
    if (hw->attn_rate[0] > 0) {
        add_by_rows(root, "attention_gflops_by_rows", hw->attn_rate, DB_HW_ATTN_ROWS);
        J(cJSON_AddNumberToObject(root, "op_us", hw->op_s * 1e6));
    }
    J(cJSON_AddStringToObject(root, "target", t->path));
    J(cJSON_AddStringToObject(root, "dtype", db_dtype_name(dt)));
    J(cJSON_AddStringToObject(root, "mix", mix[0] ? mix : db_dtype_name(dt)));
}

/* the JSON document on stdout, then freed; -1 when it (or a part of it) ran out of memory */
static int print_json_doc(cJSON *root)
{
    char *txt = json_oom ? NULL : cJSON_Print(root);
    if (txt) printf("%s\n", txt);
    free(txt);
    cJSON_Delete(root);
    return txt ? 0 : -1;
}

static int print_json(const plan_row *rows, int nrows, const db_hw *hw, const db_model_config *t,
                       const db_drafter_config *d, const char *variant, int B, const char *acc,
                       const char *device, size_t avail, db_dtype dt, const char *mix, cJSON *tp)
{
    cJSON *root = J(cJSON_CreateObject());
    if (tp) JADD(root, "tensor_parallel", tp);
    json_device(root, hw, t, device, avail, dt, mix);
    J(cJSON_AddStringToObject(root, "drafter", d ? d->base.path : ""));
    J(cJSON_AddStringToObject(root, "variant", variant));
    J(cJSON_AddNumberToObject(root, "block_size", B));
    J(cJSON_AddStringToObject(root, "acceptance", acc));
    cJSON *arr = J(cJSON_AddArrayToObject(root, "rows"));
    for (int i = 0; i < nrows; i++) {
        const plan_row *r = &rows[i];
        cJSON *o = J(cJSON_CreateObject());
        J(cJSON_AddNumberToObject(o, "concurrency", r->conc));
        J(cJSON_AddNumberToObject(o, "depth", r->depth));
        J(cJSON_AddNumberToObject(o, "context", r->ctx));
        J(cJSON_AddNumberToObject(o, "memory_bytes", r->mem.weights + r->mem.kv + r->mem.act));
        J(cJSON_AddNumberToObject(o, "weights_bytes", r->mem.weights));
        J(cJSON_AddNumberToObject(o, "kv_bytes", r->mem.kv));
        J(cJSON_AddNumberToObject(o, "activation_bytes", r->mem.act));
        cJSON *rq = J(cJSON_AddObjectToObject(o, "request"));
        J(cJSON_AddNumberToObject(rq, "ar_prefill_ms", 1e3 * r->ar_req.prefill_s));
        J(cJSON_AddNumberToObject(rq, "ar_decode_s", r->ar_req.decode_s));
        J(cJSON_AddNumberToObject(rq, "ar_tok_s", r->ar_req.tok_s));
        if (d) {
            J(cJSON_AddNumberToObject(rq, "prefill_ms", 1e3 * r->cyc_req.prefill_s));
            J(cJSON_AddNumberToObject(rq, "decode_s", r->cyc_req.decode_s));
            J(cJSON_AddNumberToObject(rq, "cycles", r->cyc_req.steps));
            J(cJSON_AddNumberToObject(rq, "tok_s", r->cyc_req.tok_s));
            num_or_null(rq, "speedup", ratio(r->cyc_req.tok_s, r->ar_req.tok_s));
        }
        cJSON *a = J(cJSON_AddObjectToObject(o, "ar"));
        JADD(a, "predicted", cost_json(&r->ar.verify));
        J(cJSON_AddNumberToObject(a, "predicted_tok_s", r->ar.tok_s));
        num_or_null(a, "measured_ms", r->ar_ms);
        num_or_null(a, "measured_tok_s", r->ar_tok_s);
        num_or_null(a, "measured_over_predicted", ratio(r->ar_tok_s, r->ar.tok_s));
        if (d) {
            cJSON *c = J(cJSON_AddObjectToObject(o, "cycle"));
            J(cJSON_AddNumberToObject(c, "tau", r->tau));
            JADD(c, "draft", cost_json(&r->cyc.draft));
            JADD(c, "select", cost_json(&r->cyc.select));
            JADD(c, "context", cost_json(&r->cyc.ctx));
            JADD(c, "verify", cost_json(&r->cyc.verify));
            J(cJSON_AddNumberToObject(c, "predicted_ms", 1e3 * r->cyc.t));
            J(cJSON_AddNumberToObject(c, "predicted_tok_s", r->cyc.tok_s));
            num_or_null(c, "measured_tau", r->tau_meas);
            num_or_null(c, "measured_ms", r->cyc_ms);
            num_or_null(c, "measured_tok_s", r->cyc_tok_s);
            if (r->measured) { /* the prediction at the tau the replay drew */
                J(cJSON_AddNumberToObject(c, "predicted_ms_at_measured_tau", 1e3 * r->cyc_mt.t));
                J(cJSON_AddNumberToObject(c, "predicted_tok_s_at_measured_tau", r->cyc_mt.tok_s));
            }
            num_or_null(c, "measured_over_predicted", ratio(r->cyc_tok_s, r->cyc_mt.tok_s));
            if (r->measured) {
                J(cJSON_AddNumberToObject(c, "measured_draft_ms", r->draft_ms));
                J(cJSON_AddNumberToObject(c, "measured_select_ms", r->select_ms));
                J(cJSON_AddNumberToObject(c, "measured_verify_ms", r->verify_ms));
                J(cJSON_AddNumberToObject(c, "measured_host_ms", r->host_ms));
            }
        }
        JADD(arr, NULL, o);
    }
    return print_json_doc(root);
}

/* -o csv: one tidy row per concurrency and model (ar, then the cycle), the provenance columns of
 * run's tables first (report_csv.h); an unknown value (not measured) is an empty field */
static void csv_num(double v, const char *f)
{
    if (isfinite(v) && v > 0) printf(f, v);
    printf(",");
}

static void print_csv(const plan_row *rows, int nrows, const db_hw *hw, const db_model_config *t,
                      const db_drafter_config *d, const char *variant, int B, const char *acc,
                      const char *device, db_dtype dt)
{
    db_run_meta m;
    db_run_meta_init(&m, 0, NULL, 0, NULL, time(NULL));
    db_provenance_csv(stdout, NULL);
    printf("device,target,drafter,dtype,variant,block_size,acceptance,concurrency,depth,context,tau,measured_tau,"
           "bytes_per_step,flops_per_step,bound,predicted_ms,predicted_tok_s,measured_ms,measured_tok_s,"
           "measured_over_predicted,memory_bytes,bandwidth_gbs,gflops\n");
    for (int i = 0; i < nrows; i++) {
        const plan_row *r = &rows[i];
        for (int cyc = 0; cyc <= (d != NULL); cyc++) {
            db_cost tot = cyc ? r->cyc.draft : r->ar.verify;
            if (cyc) {
                tot.bytes += r->cyc.select.bytes + r->cyc.ctx.bytes + r->cyc.verify.bytes;
                tot.flops += r->cyc.select.flops + r->cyc.ctx.flops + r->cyc.verify.flops;
            }
            const db_step_cost *pc = cyc ? &r->cyc : &r->ar;
            db_provenance_csv(stdout, &m);
            db_csv_field(stdout, device, 1);
            db_csv_field(stdout, t->path, 0);
            db_csv_field(stdout, cyc ? d->base.path : "", 0);
            printf(",%s,%s,%d,", db_dtype_name(dt), cyc ? variant : "ar", cyc ? B : 1);
            db_csv_field(stdout, cyc ? acc : "", 1);
            printf(",%d,%d,%.0f,%.10g,", r->conc, r->depth, r->ctx, cyc ? r->tau : 1.0);
            csv_num(cyc ? r->tau_meas : (r->measured ? 1.0 : NAN), "%.10g");
            printf("%.10g,%.10g,%s,", tot.bytes, tot.flops, bound(cyc ? &r->cyc.verify : &r->ar.verify));
            printf("%.10g,%.10g,", 1e3 * pc->t, pc->tok_s);
            csv_num(cyc ? r->cyc_ms : r->ar_ms, "%.10g");
            csv_num(cyc ? r->cyc_tok_s : r->ar_tok_s, "%.10g");
            csv_num(cyc ? ratio(r->cyc_tok_s, r->cyc_mt.tok_s) : ratio(r->ar_tok_s, r->ar.tok_s), "%.10g");
            printf("%.10g,%.10g,%.10g\n", r->mem.weights + r->mem.kv + r->mem.act, hw->bw / 1e9, hw->flops / 1e9);
        }
    }
    db_run_meta_free(&m);
}

typedef struct {
    /* options */
    const char *target, *drafter, *conc_s, *profile_s, *backend, *variant_s, *dtype_s, *output, *kv_s;
    const char *tp_s, *link_s, *device_s, *vrows_s, *depth_s;
    float temperature;
    float link_gbs, link_lat_us, gpu_mem_gib;
    int block, prompt_tokens, max_new, threads, no_measure, seed, warmup, context, reps;
    float tau_arg, bw_arg, gf_arg;
    /* what they give */
    db_dtype dt;
    char mix[16];                     /* the target file's weight mix (db_tensors_mix), "" if none */
    db_dtype kv_dtype;                /* the K/V caches': 2 bytes per element at f16 */
    db_variant variant;
    int conc[DB_LIST_MAX], nconc;
    int nrows;                        /* rows: nconc, times ndepths without --verify-rows */
    char tbuf[1024], dbuf[1024];      /* the configs' paths, found from any directory */
    db_model_config tc;
    db_drafter_config dc;
    const db_drafter_config *d;       /* &dc, or NULL: ar only */
    db_profile prof;
    char acc[700];                    /* where the acceptance comes from, in words */
    double tau;
    /* the device and the rows */
    db_session s;
    db_synth_opts syn;
    db_session_opts so;
    size_t avail;
    db_hw hw;
    db_hw_probe *probe;               /* the device measurement while its passes run, or NULL */
    plan_row rows[DB_LIST_MAX];
    double weights;
    int fits_all;
    db_mem_need worst;                /* the largest concurrency's memory */
    int tp[DB_LIST_MAX], ntp;         /* --tp degrees */
    int vrows[DB_LIST_MAX], nvrows;   /* --verify-rows: the K-flat table's rows, or none */
    int depths[DB_LIST_MAX], ndepths; /* -C / --depth: the K-flat table's depths, or the plan's axis */
    db_link link;
} plan_ctx;

static int parse_options(plan_ctx *p, int argc, char **argv, int *help, char *err, size_t errlen)
{
    *p = (plan_ctx){.conc_s = "1,8,32", .backend = "cpu", .variant_s = "dflash2", .kv_s = "auto",
                    .output = "md", .block = 8, .prompt_tokens = 128, .max_new = 32, .warmup = 1, .reps = 3,
                    .link_s = "nvlink"};
    char names[200], vhelp[300];
    snprintf(vhelp, sizeof vhelp, "drafter variant: %s (default dflash2)", db_variant_names(names, sizeof names, 1));
    const db_opt opts[] = {
        {"target-config", 't', "FILE", "target config.json (or a checkpoint directory)", NULL, DB_OPT_STR, &p->target},
        {"drafter-config", 'd', "FILE", "drafter config.json: DFlash / DFlash 2 / DSpark / EAGLE-3 / MTP (none: ar only)", NULL, DB_OPT_STR, &p->drafter},
        {"variant", 'v', "NAME", vhelp, NULL, DB_OPT_STR, &p->variant_s},
        {"block-size", 'B', "N", "draft block size (default 8)", NULL, DB_OPT_INT, &p->block},
        {"concurrency", 'c', "LIST", "concurrencies, a list or ranges as in run (default 1,8,32)", NULL, DB_OPT_STR, &p->conc_s},
        {"prompt-tokens", 0, "N", "prompt length (default 128)", NULL, DB_OPT_INT, &p->prompt_tokens},
        {"max-new-tokens", 'n', "N", "tokens generated per request when measuring (default 32)", NULL, DB_OPT_INT, &p->max_new},
        {"context", 0, "N", "context of the predicted step (default prompt + n/2)", NULL, DB_OPT_INT, &p->context},
        {"verify-rows", 0, "LIST", "K-flat table instead of the concurrency tables: the target's verify forward of one request of each row count at each --depth, predicted, with its time over the 16-row time (no synthetic run; bench --mode verify measures it)", NULL, DB_OPT_STR, &p->vrows_s},
        {"depth", 'C', "LIST", "tokens of context before every prompt, an axis as in run (default 0); with --verify-rows: cached positions before the verified rows (default 0,1024,4096)", NULL, DB_OPT_STR, &p->depth_s},
        {"acceptance-profile", 0, "FILE", "per-position acceptance (profile CSV, profile.h)", NULL, DB_OPT_STR, &p->profile_s},
        {"tau", 0, "X", "expected acceptance length instead of a profile", NULL, DB_OPT_FLOAT, &p->tau_arg},
        {"dtype", 0, "TYPE", "weight dtype: " DB_WEIGHT_DTYPE_NAMES " (default: the target checkpoint's main dtype, else bf16; quantized: predicted only)", NULL, DB_OPT_STR, &p->dtype_s},
        {"kv-dtype", 0, "TYPE", DB_KV_DTYPE_HELP, NULL, DB_OPT_STR, &p->kv_s},
        {"bandwidth-gbs", 0, "X", "device memory bandwidth, GB/s (default: measured)", NULL, DB_OPT_FLOAT, &p->bw_arg},
        {"gflops", 0, "X", "device matmul rate, GFLOP/s (default: measured)", NULL, DB_OPT_FLOAT, &p->gf_arg},
        {"device-config", 0, "FILE", "device preset (configs/devices/*.json): its bandwidth, matmul efficiency by rows and fixed costs instead of measured figures", NULL, DB_OPT_STR, &p->device_s},
        {"temperature", 0, "X", "sampling temperature of the predicted requests: > 0 adds the preset's cost per sampled row (default 0)", NULL, DB_OPT_FLOAT, &p->temperature},
        {"no-measure", 0, NULL, "predict only (no synthetic run)", NULL, DB_OPT_FLAG, &p->no_measure},
        {"warmup", 0, "N", "untimed runs before each measurement (default 1)", NULL, DB_OPT_INT, &p->warmup},
        {"repetitions", 'r', "N", "timed rounds, ar and the cycle run alternating; medians reported (default 3, <= 15)", NULL, DB_OPT_INT, &p->reps},
        {"seed", 's', "N", "seed of the synthetic weights, prompts and replay (default 0)", NULL, DB_OPT_INT, &p->seed},
        {"backend", 'b', "NAME", "compute backend (default cpu)", NULL, DB_OPT_STR, &p->backend},
        {"threads", 0, "N", "CPU threads (default: all cores; at most 4x them)", NULL, DB_OPT_INT, &p->threads},
        {"output", 'o', "FMT", "md (default), csv or json", NULL, DB_OPT_STR, &p->output},
        {"tp", 0, "LIST", "tensor-parallel degrees, e.g. 1,2,4,8: per-GPU memory and predicted tok/s (predictions)", NULL, DB_OPT_STR, &p->tp_s},
        {"link", 0, "NAME", "GPU link for --tp: nvlink (default, 450 GB/s, 10 us) or pcie (64 GB/s, 25 us)", NULL, DB_OPT_STR, &p->link_s},
        {"link-gbs", 0, "X", "link bandwidth per direction, GB/s (overrides the preset)", NULL, DB_OPT_FLOAT, &p->link_gbs},
        {"link-latency-us", 0, "X", "latency of one all-reduce, microseconds (overrides the preset)", NULL, DB_OPT_FLOAT, &p->link_lat_us},
        {"gpu-mem-gib", 0, "X", "memory of one GPU for --tp's fit, GiB (default: the device's free memory)", NULL, DB_OPT_FLOAT, &p->gpu_mem_gib},
    };
    const db_cmd_opts cmd = {"plan",
                             "Capacity planning from config.json shapes: device bandwidth and matmul rate,\n"
                             "roofline step / cycle times and tok/s, memory per concurrency, then a short\n"
                             "synthetic run (random weights on the device, replayed acceptance) to compare.",
                             opts, (int)(sizeof opts / sizeof *opts), db_variants_help};
    return db_opts_parse(&cmd, argc, argv, help, err, errlen);
}

static int check_options(plan_ctx *p, char *err, size_t errlen)
{
    char names[200];
    int rc = db_opt_kv_dtype(p->kv_s, p->backend, &p->kv_dtype, err, errlen);
    if (rc) return rc;
    if (!p->target) return db_fail(err, errlen, DB_EINPUT, "--target-config FILE is required");
    if (strcmp(p->output, "md") && strcmp(p->output, "csv") && strcmp(p->output, "json"))
        return db_fail(err, errlen, DB_EINPUT, "-o must be md, csv or json, not '%s'", p->output);
    if (p->dtype_s && db_weight_dtype_parse(p->dtype_s, &p->dt) != 0)
        return db_fail(err, errlen, DB_EINPUT, "--dtype %s: one of " DB_WEIGHT_DTYPE_NAMES, p->dtype_s);
    if (db_variant_parse(p->variant_s, &p->variant) != 0 || !db_variant_uses_drafter(p->variant))
        return db_fail(err, errlen, DB_EINPUT, "--variant %s: one of %s", p->variant_s,
                       db_variant_names(names, sizeof names, 1));
    if (p->block < 2 || p->block > DB_MAX_BLOCK)
        return db_fail(err, errlen, DB_EINPUT, "--block-size %d outside 2..%d", p->block, DB_MAX_BLOCK);
    if (p->prompt_tokens < 1 || p->max_new < 2 || p->warmup < 0 || p->context < 0 || p->seed < 0)
        return db_fail(err, errlen, DB_EINPUT, "--prompt-tokens >= 1, --max-new-tokens >= 2, --warmup, --context, --seed >= 0");
    int trc = db_threads_check("--threads", p->threads, err, errlen);
    if (trc) return trc;
    if (p->reps < 1 || p->reps > MAX_REPS)
        return db_fail(err, errlen, DB_EINPUT, "--repetitions %d outside 1..%d", p->reps, MAX_REPS);
    if (p->device_s && (p->bw_arg > 0 || p->gf_arg > 0))
        return db_fail(err, errlen, DB_EINPUT, "give --device-config or --bandwidth-gbs / --gflops, not both");
    if (!(p->temperature >= 0)) return db_fail(err, errlen, DB_EINPUT, "--temperature %g: must be >= 0", (double)p->temperature);
    if (p->tau_arg != 0 && p->profile_s)
        return db_fail(err, errlen, DB_EINPUT, "give --tau or --acceptance-profile, not both");
    if (p->tau_arg != 0 && !(p->tau_arg >= 1 && p->tau_arg <= p->block))
        return db_fail(err, errlen, DB_EINPUT, "--tau %g outside [1, %d]", (double)p->tau_arg, p->block);
    if (p->tp_s && db_parse_int_list("--tp", p->tp_s, 1, 4096, p->tp, &p->ntp, err, errlen)) return DB_EINPUT;
    if (p->ntp && !strcmp(p->output, "csv"))
        return db_fail(err, errlen, DB_EINPUT, "plan -o csv has no tensor-parallel rows: --tp with -o md or json");
    if (db_link_preset(p->link_s, &p->link, err, errlen)) return DB_EINPUT;
    if (p->link_gbs < 0 || p->link_lat_us < 0 || p->gpu_mem_gib < 0)
        return db_fail(err, errlen, DB_EINPUT, "--link-gbs, --link-latency-us, --gpu-mem-gib >= 0");
    if (p->link_gbs > 0) p->link.gbs = p->link_gbs;
    if (p->link_lat_us > 0) p->link.latency_us = p->link_lat_us;
    if ((rc = db_parse_int_list("--depth", p->depth_s ? p->depth_s : p->vrows_s ? "0,1024,4096" : "0", 0, 1 << 24, p->depths,
                                &p->ndepths, err, errlen)))
        return rc;
    if (p->vrows_s) {
        if (p->ntp) return db_fail(err, errlen, DB_EINPUT, "--verify-rows prints the K-flat table alone: not with --tp");
        if ((rc = db_parse_int_list("--verify-rows", p->vrows_s, 1, 1 << 20, p->vrows, &p->nvrows, err, errlen))) return rc;
        p->no_measure = 1; /* a prediction: no synthetic run (the device is still probed unless given) */
    }
    if ((rc = db_parse_int_list("--concurrency", p->conc_s, 1, 1 << 16, p->conc, &p->nconc, err, errlen))) return rc;
    p->nrows = p->nvrows ? p->nconc : p->nconc * p->ndepths;
    if (p->nrows > DB_LIST_MAX)
        return db_fail(err, errlen, DB_EINPUT, "--depth x --concurrency: %d x %d rows, at most %d", p->ndepths, p->nconc,
                       DB_LIST_MAX);
    return DB_OK;
}

/* --tp: one prediction per (degree, concurrency), in md or into the JSON document */
static void tp_rows(const plan_ctx *p, FILE *f, cJSON *json)
{
    double mem = p->gpu_mem_gib > 0 ? p->gpu_mem_gib * DB_GIB : (double)p->avail;
    if (f) {
        fprintf(f, "\n## Tensor parallel: predictions, not measurements\n\n"
                   "- link %s: %.0f GB/s per direction, %.1f us per all-reduce (ring: 2(n-1)/n x bytes / bandwidth "
                   "+ latency; 2 per layer)\n- GPU memory %.2f GiB%s\n\n",
                p->link.name, p->link.gbs, p->link.latency_us, mem / DB_GIB, p->gpu_mem_gib > 0 ? "" : " (this device's free memory)");
        fprintf(f, "| kind | tp | c | weights GiB/GPU | KV GiB/GPU | act GiB/GPU | fits | ar ms | ar all-reduce ms "
                   "| ar tok/s | cycle ms | cycle all-reduce ms | cycle tok/s |\n"
                   "|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|\n");
    } else {
        J(cJSON_AddStringToObject(json, "link", p->link.name));
        J(cJSON_AddNumberToObject(json, "link_gbs", p->link.gbs));
        J(cJSON_AddNumberToObject(json, "link_latency_us", p->link.latency_us));
        J(cJSON_AddNumberToObject(json, "gpu_mem_bytes", mem));
    }
    cJSON *arr = json ? J(cJSON_AddArrayToObject(json, "rows")) : NULL;
    for (int i = 0; i < p->ntp; i++)
        for (int j = 0; j < p->nrows; j++) {
            const plan_row *r = &p->rows[j];
            db_step_shape ar = db_variant_step(DB_VAR_AR, r->conc, 1, r->ctx, 1, p->kv_dtype);
            db_step_shape cy = db_variant_step(p->variant, r->conc, p->block, r->ctx, p->tau, p->kv_dtype);
            db_tp_row t;
            db_tp_predict(&p->tc, p->d, p->dt, &p->hw, &p->link, p->tp[i], &ar, &cy, &r->mem, mem, &t);
            if (f) {
                char c1[32], c2[32], c3[32];
                fmt(c1, sizeof c1, "%.3f", 1e3 * (t.cyc_compute_s + t.cyc_comm_s));
                snprintf(c2, sizeof c2, p->d ? "%.3f" : "-", 1e3 * t.cyc_comm_s);
                fmt(c3, sizeof c3, "%.1f", t.cyc_tok_s);
                fprintf(f, "| prediction | %d | %d | %.2f | %.2f | %.2f | %s | %.3f | %.3f | %.1f | %s | %s | %s |\n", t.tp,
                        t.concurrency, t.weights / DB_GIB, t.kv / DB_GIB, t.act / DB_GIB, t.fits ? "yes" : "no",
                        1e3 * (t.ar_compute_s + t.ar_comm_s), 1e3 * t.ar_comm_s, t.ar_tok_s, c1, c2, c3);
                continue;
            }
            cJSON *o = J(cJSON_CreateObject());
            J(cJSON_AddStringToObject(o, "kind", "prediction"));
            J(cJSON_AddNumberToObject(o, "tp", t.tp));
            J(cJSON_AddNumberToObject(o, "concurrency", t.concurrency));
            J(cJSON_AddNumberToObject(o, "weights_bytes_per_gpu", t.weights));
            J(cJSON_AddNumberToObject(o, "kv_bytes_per_gpu", t.kv));
            J(cJSON_AddNumberToObject(o, "activation_bytes_per_gpu", t.act));
            J(cJSON_AddBoolToObject(o, "fits", t.fits));
            J(cJSON_AddNumberToObject(o, "ar_compute_ms", 1e3 * t.ar_compute_s));
            J(cJSON_AddNumberToObject(o, "ar_allreduce_ms", 1e3 * t.ar_comm_s));
            J(cJSON_AddNumberToObject(o, "ar_tok_s", t.ar_tok_s));
            if (p->d) {
                J(cJSON_AddNumberToObject(o, "cycle_compute_ms", 1e3 * t.cyc_compute_s));
                J(cJSON_AddNumberToObject(o, "cycle_allreduce_ms", 1e3 * t.cyc_comm_s));
                J(cJSON_AddNumberToObject(o, "cycle_tok_s", t.cyc_tok_s));
            }
            JADD(arr, NULL, o);
        }
}

/* ---- --verify-rows: the K-flat table ----
 * One request's verify forward of R rows after D cached positions (capacity.h
 * db_roofline_verify: the cost of the cycle's verify), for every D of --depth and R of
 * --verify-rows; vs_16_rows = its time / the 16-row forward's at the same depth (computed
 * whether or not 16 is among the rows); bound = the part that alone takes longest. */
typedef struct {
    int depth, rows;
    db_verify_cost v;
    double vs16;
} kflat_row;

static int kflat_rows(const plan_ctx *p, kflat_row **out, char *err, size_t errlen)
{
    kflat_row *k = db_calloc((size_t)p->ndepths * (size_t)p->nvrows, sizeof *k);
    if (!k) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the K-flat table");
    for (int i = 0; i < p->ndepths; i++) {
        db_verify_cost v16;
        db_roofline_verify(&p->tc, p->dt, &p->hw, 16, p->depths[i], p->kv_dtype, &v16);
        for (int j = 0; j < p->nvrows; j++) {
            kflat_row *r = &k[i * p->nvrows + j];
            r->depth = p->depths[i], r->rows = p->vrows[j];
            db_roofline_verify(&p->tc, p->dt, &p->hw, r->rows, r->depth, p->kv_dtype, &r->v);
            r->vs16 = r->v.c.t / v16.c.t;
        }
    }
    *out = k;
    return DB_OK;
}

static void kflat_md(const plan_ctx *p, const kflat_row *k, const char *device)
{
    printf("# dflash-bench plan: K-flat verification\n\n");
    print_md_device(&p->hw, &p->tc, device, p->avail, p->dt, p->mix);
    printf("- verify forward: one request of R rows after D cached positions (%s KV cache), logits and their argmax "
           "for every row, predicted; vs 16 rows = its ms / the 16-row ms at the same depth; parts: each piece's time "
           "alone (weights: bytes other than the KV cache / bandwidth; matmul: FLOPs / the rate at R rows; attention: "
           "KV bytes or attention FLOPs; fixed: the forward's fixed cost and small ops); bound: the largest part\n\n",
           db_dtype_name(p->kv_dtype));
    printf("| depth | rows | GiB | GFLOP | pred ms | vs 16 rows | bound | weights ms | matmul ms | attention ms | fixed ms |\n"
           "|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|\n");
    for (int i = 0; i < p->ndepths * p->nvrows; i++) {
        const kflat_row *r = &k[i];
        const db_forward_parts *q = &r->v.parts;
        printf("| %d | %d | %.3f | %.1f | %.3f | %.3f | %s | %.3f | %.3f | %.3f | %.3f |\n", r->depth, r->rows,
               r->v.c.bytes / DB_GIB, r->v.c.flops / 1e9, 1e3 * r->v.c.t, r->vs16, r->v.bound, 1e3 * q->weights_s,
               1e3 * q->matmul_s, 1e3 * q->attn_s, 1e3 * q->fixed_s);
    }
    /* the curve: rows down, depths across */
    printf("\nvs 16 rows (predicted ms), rows by depth:\n\n| rows |");
    for (int i = 0; i < p->ndepths; i++) printf(" depth %d |", p->depths[i]);
    printf("\n|--:|");
    for (int i = 0; i < p->ndepths; i++) printf("--:|");
    printf("\n");
    for (int j = 0; j < p->nvrows; j++) {
        printf("| %d |", p->vrows[j]);
        for (int i = 0; i < p->ndepths; i++) {
            const kflat_row *r = &k[i * p->nvrows + j];
            printf(" %.2f (%.2f) |", r->vs16, 1e3 * r->v.c.t);
        }
        printf("\n");
    }
}

static void kflat_csv(const plan_ctx *p, const kflat_row *k, const char *device)
{
    db_run_meta m;
    db_run_meta_init(&m, 0, NULL, 0, NULL, time(NULL));
    db_provenance_csv(stdout, NULL);
    printf("device,target,dtype,kv_dtype,depth,rows,bytes,flops,predicted_ms,vs_16_rows,bound,weights_ms,matmul_ms,"
           "attention_ms,fixed_ms,bandwidth_gbs,gflops\n");
    for (int i = 0; i < p->ndepths * p->nvrows; i++) {
        const kflat_row *r = &k[i];
        const db_forward_parts *q = &r->v.parts;
        db_provenance_csv(stdout, &m);
        db_csv_field(stdout, device, 1);
        db_csv_field(stdout, p->tc.path, 0);
        printf(",%s,%s,%d,%d,%.10g,%.10g,%.10g,%.10g,%s,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g\n", db_dtype_name(p->dt),
               db_dtype_name(p->kv_dtype), r->depth, r->rows, r->v.c.bytes, r->v.c.flops, 1e3 * r->v.c.t, r->vs16,
               r->v.bound, 1e3 * q->weights_s, 1e3 * q->matmul_s, 1e3 * q->attn_s, 1e3 * q->fixed_s, p->hw.bw / 1e9,
               p->hw.flops / 1e9);
    }
    db_run_meta_free(&m);
}

/* -1 when out of memory, nothing printed */
static int kflat_json(const plan_ctx *p, const kflat_row *k, const char *device)
{
    cJSON *root = J(cJSON_CreateObject());
    json_device(root, &p->hw, &p->tc, device, p->avail, p->dt, p->mix);
    J(cJSON_AddStringToObject(root, "kv_dtype", db_dtype_name(p->kv_dtype)));
    cJSON *arr = J(cJSON_AddArrayToObject(root, "verify_rows"));
    for (int i = 0; i < p->ndepths * p->nvrows; i++) {
        const kflat_row *r = &k[i];
        const db_forward_parts *q = &r->v.parts;
        cJSON *o = J(cJSON_CreateObject());
        J(cJSON_AddNumberToObject(o, "depth", r->depth));
        J(cJSON_AddNumberToObject(o, "rows", r->rows));
        J(cJSON_AddNumberToObject(o, "bytes", r->v.c.bytes));
        J(cJSON_AddNumberToObject(o, "flops", r->v.c.flops));
        J(cJSON_AddNumberToObject(o, "predicted_ms", 1e3 * r->v.c.t));
        J(cJSON_AddNumberToObject(o, "vs_16_rows", r->vs16));
        J(cJSON_AddStringToObject(o, "bound", r->v.bound));
        J(cJSON_AddNumberToObject(o, "weights_ms", 1e3 * q->weights_s));
        J(cJSON_AddNumberToObject(o, "matmul_ms", 1e3 * q->matmul_s));
        J(cJSON_AddNumberToObject(o, "attention_ms", 1e3 * q->attn_s));
        J(cJSON_AddNumberToObject(o, "fixed_ms", 1e3 * q->fixed_s));
        JADD(arr, NULL, o);
    }
    return print_json_doc(root);
}

static int kflat_print(const plan_ctx *p, const char *device, char *err, size_t errlen)
{
    kflat_row *k = NULL;
    int rc = kflat_rows(p, &k, err, errlen);
    if (rc) return rc;
    if (!strcmp(p->output, "json")) {
        if (kflat_json(p, k, device)) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting the K-flat table as JSON");
    } else if (!strcmp(p->output, "csv")) {
        kflat_csv(p, k, device);
    } else {
        kflat_md(p, k, device);
    }
    free(k);
    return rc;
}

/* the acceptance: a profile, a constant rate giving --tau, or the built-in DFlash figure */
static int acceptance(plan_ctx *p, char *err, size_t errlen)
{
    int rc, B = p->block;
    if (p->profile_s) {
        if ((rc = db_profile_load(&p->prof, p->profile_s, err, errlen))) return rc;
        snprintf(p->acc, sizeof p->acc, "profile %s, tau %.3f at block %d", p->profile_s, db_profile_tau(&p->prof, B), B);
    } else if (p->tau_arg != 0) {
        db_profile_constant(&p->prof, p->tau_arg, B, B - 1);
        snprintf(p->acc, sizeof p->acc, "constant per-position rate %.4f (tau %.3f at block %d)",
                 (double)p->prof.rate[0], (double)p->tau_arg, B);
    } else {
        memset(&p->prof, 0, sizeof p->prof);
        p->prof.n = 7;
        memcpy(p->prof.rate, dflash_gsm8k_recall1, sizeof dflash_gsm8k_recall1);
        snprintf(p->acc, sizeof p->acc, "DFlash GSM8K T=0 per-position Recall@1 (built in), tau %.3f at block %d",
                 db_profile_tau(&p->prof, B), B);
    }
    if (p->d && p->prof.n < B - 1)
        return db_fail(err, errlen, DB_EINPUT, "the acceptance profile has %d positions; block size %d needs %d (give --tau or a longer profile)",
                       p->prof.n, B, B - 1);
    p->tau = p->d ? db_profile_tau(&p->prof, B) : 1.0;
    return DB_OK;
}

/* the configs (from any directory: base/paths.h) and the acceptance */
static int load_inputs(plan_ctx *p, char *err, size_t errlen)
{
    p->target = db_data_find(p->target, p->tbuf, sizeof p->tbuf);
    p->drafter = db_data_find(p->drafter, p->dbuf, sizeof p->dbuf);
    int rc = db_model_config_load(&p->tc, p->target, err, errlen);
    if (!rc && p->drafter) rc = db_drafter_config_load(&p->dc, p->drafter, p->tc.n_layers, err, errlen);
    if (rc) return rc;
    db_tensor_set st;
    char e2[256];
    if (!p->dtype_s) { /* the checkpoint's own weights, when there are any */
        p->dt = DB_BF16;
        if ((rc = db_tensors_open_dir(&st, p->target, e2, sizeof e2)) == DB_OK) {
            p->dt = db_tensors_main_dtype(&st);
            db_tensors_mix(&st, p->mix, sizeof p->mix);
            db_tensors_close(&st);
        } else if (db_tensors_dir_has_weights(p->target)) { /* there, but truncated, lying, unreadable:
                                                          * never a silent plan at bf16 */
            return db_fail(err, errlen, rc, "%s", e2);
        }
    }
    p->d = p->drafter ? &p->dc : NULL;
    if (p->d && p->block > p->dc.block_size)
        return db_fail(err, errlen, DB_EINPUT, "block size %d above the drafter's block_size %d (%s)", p->block,
                       p->dc.block_size, p->dc.base.path);
    if (p->d && (rc = db_variant_check_kind(p->variant, p->dc.kind, p->dc.base.path, err, errlen))) return rc;
    return acceptance(p, err, errlen);
}

/* the cycle predicted at the tau the replay drew (what measured/predicted compares) */
static void predict_at_measured_tau(const plan_ctx *p, plan_row *r)
{
    if (!p->d) return;
    db_step_shape cy = db_variant_step(p->variant, r->conc, p->block, r->ctx, r->tau_meas, p->kv_dtype);
    cy.sampling = p->temperature > 0;
    db_roofline_step(&p->tc, p->d, p->dt, &p->hw, &cy, &r->cyc_mt);
}

/* the roofline rows and each concurrency's memory; a row's measurement, if any, stays (only its
 * prediction at the measured tau is redone) */
static void predict(plan_ctx *p)
{
    p->weights = db_weights_bytes(&p->tc, p->d, p->dt);
    p->fits_all = 1;
    p->worst = (db_mem_need){p->weights, 0, 0};
    for (int i = 0; i < p->nrows; i++) {
        plan_row *r = &p->rows[i];
        r->depth = p->nvrows ? 0 : p->depths[i / p->nconc];
        int prompt = r->depth + p->prompt_tokens; /* the context before the prompt is prefilled with it */
        double ctx = p->context > 0 ? p->context : prompt + p->max_new / 2.0;
        r->conc = p->conc[i % p->nconc], r->ctx = ctx, r->tau = p->tau;
        if (r->measured) predict_at_measured_tau(p, r);
        db_step_shape ar = db_variant_step(DB_VAR_AR, r->conc, 1, ctx, 1, p->kv_dtype);
        ar.sampling = p->temperature > 0;
        db_roofline_step(&p->tc, NULL, p->dt, &p->hw, &ar, &r->ar);
        db_roofline_request(&p->tc, NULL, p->dt, &p->hw, &ar, prompt, p->max_new, &r->ar_req);
        db_step_shape cy = db_variant_step(p->variant, r->conc, p->block, ctx, p->tau, p->kv_dtype);
        cy.sampling = p->temperature > 0;
        if (p->d) db_roofline_step(&p->tc, p->d, p->dt, &p->hw, &cy, &r->cyc);
        if (p->d) db_roofline_request(&p->tc, p->d, p->dt, &p->hw, &cy, prompt, p->max_new, &r->cyc_req);
        db_engine_shape es = {r->conc, p->d ? p->block : 1, prompt, p->max_new, 0, p->kv_dtype};
        double kv, act;
        db_engine_bytes(&p->tc, p->d, &es, &kv, &act);
        r->mem = (db_mem_need){p->weights, kv, act};
        if (p->avail && p->weights + kv + act > (double)p->avail) p->fits_all = 0;
        if (kv + act > p->worst.kv + p->worst.act) p->worst.kv = kv, p->worst.act = act;
    }
}

/* the device's figures get their next pass after each run (probe_start) */
static int probe_pass(void *user, char *err, size_t errlen)
{
    plan_ctx *p = user;
    return p->probe ? db_hw_probe_pass(p->probe, err, errlen) : DB_OK;
}

/* one concurrency on the synthetic pair (bench/runner.h): warm-up runs of 4 tokens, then
 * p->reps rounds of an ar run and a replayed cycle run, the order alternating from round to
 * round (a drift of the machine's memory bandwidth during the measurement then falls on both
 * alike); medians of the rounds. Every round replays the same seeded acceptances, so tau is the
 * same in each. */
static int measure_row(plan_ctx *p, plan_row *r, char *err, size_t errlen)
{
    double split[4], t_ar = 0, ar_ms[MAX_REPS], cyc_ms[MAX_REPS], sp[4][MAX_REPS];
    uint64_t seed = (uint64_t)p->seed;
    db_prompt_set ps;
    int rc = db_prompt_set_random(&ps, "synthetic", r->conc, p->prompt_tokens, p->prompt_tokens, p->tc.vocab, seed,
                                  err, errlen);
    if (!rc) rc = db_prompt_set_depth(&ps, r->depth, NULL, p->tc.vocab, seed, err, errlen);
    db_run_point pts[2];
    /* allow_long_context: a plan times random weights at the sizes asked for; no token of it is
     * read, so the config's trained positions do not bound it */
    pts[0] = (db_run_point){.p = {.variant = DB_VAR_AR, .block_size = 1, .top_p = 1, .max_new_tokens = p->max_new,
                                  .temperature = p->temperature,
                                  .seed = seed, .ignore_eos = 1, .kv_dtype = p->kv_dtype, .allow_long_context = 1},
                            .ps = &ps, .concurrency = r->conc};
    pts[1] = pts[0];
    pts[1].p.variant = p->variant;
    pts[1].p.block_size = p->block;
    pts[1].p.replay_rates = p->prof.rate;
    pts[1].p.replay_n = p->prof.n;
    pts[1].drafter = p->d ? &p->s.drafter : NULL;
    db_runner run = {.be = p->s.be, .target = &p->s.target, .warmup = p->warmup, .repetitions = p->reps,
                     .warmup_tokens = 4, .after_pass = probe_pass, .user = p, .t_origin = -1};
    db_point_raw raw[2] = {{.key = {.concurrency = r->conc}}, {.key = {.concurrency = r->conc}}};
    int P = p->d ? 2 : 1;
    if (r->depth) fprintf(stderr, "plan: measuring c=%d at depth %d (%d rounds)\n", r->conc, r->depth, p->reps);
    else fprintf(stderr, "plan: measuring c=%d (%d rounds)\n", r->conc, p->reps);
    if (!rc) rc = db_runner_group(&run, pts, raw, P, err, errlen);
    for (int k = 0; k < p->reps && !rc; k++) {
        rc = step_times(&raw[0], k, &ar_ms[k], &t_ar, split, err, errlen);
        if (!rc && p->d) rc = step_times(&raw[1], k, &cyc_ms[k], &r->tau_meas, split, err, errlen);
        for (int j = 0; j < 4 && p->d; j++) sp[j][k] = split[j];
    }
    for (int j = 0; j < 2; j++) db_point_raw_free(&raw[j]);
    db_prompt_set_free(&ps);
    if (rc) return rc;
    r->ar_ms = db_quantile(ar_ms, p->reps, 0.5);
    r->ar_tok_s = r->conc * t_ar / (r->ar_ms / 1e3);
    if (p->d) {
        r->cyc_ms = db_quantile(cyc_ms, p->reps, 0.5);
        r->cyc_tok_s = r->conc * r->tau_meas / (r->cyc_ms / 1e3);
        r->draft_ms = db_quantile(sp[0], p->reps, 0.5);
        r->select_ms = db_quantile(sp[1], p->reps, 0.5);
        r->verify_ms = db_quantile(sp[2], p->reps, 0.5);
        r->host_ms = db_quantile(sp[3], p->reps, 0.5);
        predict_at_measured_tau(p, r);
    }
    r->measured = 1;
    return DB_OK;
}

/* The device figures. Measured ones are sampled in passes (device_probe.h): one before the
 * run, one after each of its runs (ar, then the cycle run, every round), so the figures come
 * from the same minutes as the times they predict (a shared machine's bandwidth wanders: 33 to
 * 55 GB/s over minutes on this kind of VM; figures taken only before a run of minutes, or
 * before and after it, moved measured/predicted by 10-30% from sitting to sitting). A pass
 * after every run, not every round: with 4 passes a slow phase over two of them still moved
 * the medians (a sitting measured 187 GFLOP/s at 16 rows beside runs as fast as those of one
 * that measured 313; one pass's 16-row calls took 3.0 ms against 1.7 in the others). Without a
 * run (--no-measure, a quantized dtype, a run that does not fit) the passes follow each other
 * at once. */
static int probe_start(plan_ctx *p, char *err, size_t errlen)
{
    if (p->device_s) /* a preset: nothing to measure */
        return db_device_preset_load(p->device_s, &p->hw, err, errlen);
    if (p->bw_arg > 0 && p->gf_arg > 0) { /* both given: nothing to measure */
        db_hw_apply_given(&p->hw, p->bw_arg, p->gf_arg);
        return DB_OK;
    }
    int runs = !p->no_measure && !db_dtype_is_quant(p->dt);
    int rc = db_hw_probe_init(&p->probe, p->s.be, p->dt, 0, &p->tc, runs ? 1 + p->nrows * p->reps * (p->d ? 2 : 1) : DB_PROBE_PASSES,
                              runs ? 2 : 1, err, errlen);
    if (!rc) rc = db_hw_probe_pass(p->probe, err, errlen);
    if (!rc) db_hw_probe_result(p->probe, &p->hw), db_hw_apply_given(&p->hw, p->bw_arg, p->gf_arg);
    return rc;
}

/* the passes left, the figures from all of them, the predictions redone with them */
static int probe_end(plan_ctx *p, char *err, size_t errlen)
{
    if (!p->probe) return DB_OK;
    int rc = db_hw_probe_finish(p->probe, err, errlen);
    if (!rc) {
        db_hw_probe_result(p->probe, &p->hw);
        db_hw_apply_given(&p->hw, p->bw_arg, p->gf_arg);
        predict(p);
    }
    db_hw_probe_free(p->probe);
    p->probe = NULL;
    return rc;
}

/* the synthetic run, refused (with the message) rather than started when it cannot fit */
static int measure_all(plan_ctx *p, char *err, size_t errlen)
{
    char e2[512];
    /* beside the probe's buffers, which stay allocated through the run */
    size_t held = db_hw_probe_bytes(p->probe), avail = p->avail > held ? p->avail - held : 1;
    if (db_mem_check(&p->worst, p->avail ? avail : 0, "the synthetic run", e2, sizeof e2) != DB_OK) {
        fprintf(stderr, "plan: not measured: %s\n", e2);
        return DB_OK;
    }
    fprintf(stderr, "plan: generating synthetic weights (%.2f GiB)...\n", p->weights / DB_GIB);
    int rc = db_session_load_models(&p->s, &p->so, err, errlen); /* failed: the backend stays */
    for (int i = 0; i < p->nrows && !rc; i++) rc = measure_row(p, &p->rows[i], err, errlen);
    return rc;
}

int db_cmd_plan(int argc, char **argv, char *err, size_t errlen)
{
    plan_ctx *p = db_calloc(1, sizeof *p);
    if (!p) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the plan");
    int help = 0, rc = parse_options(p, argc, argv, &help, err, errlen);
    if (!rc && !help) rc = check_options(p, err, errlen);
    if (!rc && !help) rc = load_inputs(p, err, errlen);
    if (rc || help) {
        free(p);
        return rc;
    }
    p->syn = (db_synth_opts){.seed = (uint64_t)p->seed, .dtype = p->dt};
    p->so = (db_session_opts){p->backend, p->target, p->drafter, p->threads, 0, &p->syn};
    if ((rc = db_session_open_backend(&p->s, &p->so, err, errlen))) {
        free(p);
        return rc;
    }
    p->avail = db_mem_available(p->s.be);
    rc = probe_start(p, err, errlen);
    if (!rc) predict(p);
    if (!rc && !p->no_measure && db_dtype_is_quant(p->dt))
        fprintf(stderr, "plan: not measured: synthetic weights are not made at %s (predicted only)\n", db_dtype_name(p->dt));
    else if (!rc && !p->no_measure)
        rc = measure_all(p, err, errlen);
    if (!rc) rc = probe_end(p, err, errlen);
    db_hw_probe_free(p->probe); /* after a failure (probe_end frees it otherwise), before the backend */
    if (!rc) {
        char device[200];
        snprintf(device, sizeof device, "%s (%s)", p->backend, p->s.be ? p->s.be->device_name : "?");
        if (p->nvrows)
            rc = kflat_print(p, device, err, errlen);
        else if (!strcmp(p->output, "json"))
        {
            cJSON *tp = p->ntp ? J(cJSON_CreateObject()) : NULL;
            if (tp) tp_rows(p, NULL, tp);
            if (print_json(p->rows, p->nrows, &p->hw, &p->tc, p->d, p->variant_s, p->block, p->acc, device, p->avail,
                           p->dt, p->mix, tp))
                rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting the plan as JSON");
        } else if (!strcmp(p->output, "csv")) {
            print_csv(p->rows, p->nrows, &p->hw, &p->tc, p->d, p->variant_s, p->block, p->acc, device, p->dt);
        } else {
            print_md(p->rows, p->nrows, &p->hw, &p->tc, p->d, p->variant_s, p->block, p->acc, device, p->avail, p->dt, p->mix,
                     p->depth_s != NULL);
            if (p->ntp) tp_rows(p, stdout, NULL);
        }
        if (!p->fits_all && !p->nvrows)
            fprintf(stderr, "plan: some concurrencies need more memory than the %.2f GiB available (memory column)\n",
                    (double)p->avail / DB_GIB);
    }
    if (p->s.be) db_session_close(&p->s);
    free(p);
    return rc;
}
