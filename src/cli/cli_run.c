/* cli_run.c — `dflash-bench run`: the benchmark sweep. Parses the sweep (sweep.h: flags and
 * --config ini), checks everything checkable before a model loads, then measures every group of
 * points (bench/runner.h: warm-up, rotated timed rounds, the models target by target) and
 * appends its rows to the results directory (results_dir.h) as it finishes. */
#include "base/util.h"
#include "bench/capacity.h"
#include "bench/machine_load.h"
#include "bench/progress.h"
#include "bench/runner.h"
#include "bench/sweep.h"
#include "bench/sweep_record.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_run_resume.h"
#include "cluster/shard.h"
#include "report/report.h"
#include "report/report_out.h"
#include "report/results_dir.h"
#include "result/timing.h"
#include "result/run_meta.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    db_sweep sw;
    const char *resume;
    const char *shard_arg; /* --shard K/N */
    db_shard shard;
    char *argv0;           /* how this binary was called, for the resume command */
    char out_dir[1024];
    db_sweep_runner sr;    /* points, prompts, models, the measurement */
    db_point_raw *done;    /* completed points of this invocation (baselines for speedup) */
    int n_done;
    db_run_meta meta;
    db_results res;
    int res_open;
    int lock_fd;           /* --resume: DIR's lock, taken before DIR is read (-1: none) */
    int allow_changed;     /* --allow-changed-inputs */
    int dry_run;           /* --dry-run */
    db_out out;
} run_ctx;

/* The options of run. Every one but --config and --resume is a sweep key (sweep.h), set with
 * db_sweep_set in the order given; --config files are applied first, so every flag overrides
 * them. */
static const char *config_file; /* --config: loaded in parse_args, never stored by the parser */

static db_cmd_opts run_options(run_ctx *c)
{
    static char vhelp[300];
    static db_opt opts[] = {
        {NULL, 0, NULL, "axes (comma lists; concurrency and block size also ranges a-b, a-b+s, a-b*m)", NULL, DB_OPT_HEADING, NULL},
        {"backend", 'b', "LIST", "compute backends (default cpu)", "backend", DB_OPT_SWEEP, NULL},
        {"dataset", 0, "LIST", "math, math-hard, code, code-basic, chat, synthetic-N, or JSONL / text paths (default math,code,chat)", "dataset", DB_OPT_SWEEP, NULL},
        {"concurrency", 'c', "LIST", "requests in flight (default 1,8,32); with --request-rate: at most", "concurrency", DB_OPT_SWEEP, NULL},
        {"max-concurrency", 0, "LIST", "the same axis as -c, vLLM's name for the cap on requests in flight", "concurrency", DB_OPT_SWEEP, NULL},
        {"depth", 'C', "LIST", "tokens of context before every prompt: the dataset's other samples as text (synthetic-N: random ids), then the prompt (default 0)", "depth", DB_OPT_SWEEP, NULL},
        {"request-rate", 0, "LIST", "requests arriving per second (Poisson, seeded; the same schedule for ar and every variant), or inf = closed loop (default inf)", "request_rate", DB_OPT_SWEEP, NULL},
        {"block-size", 'B', "LIST", "draft block sizes (default 8,16)", "block_size", DB_OPT_SWEEP, NULL},
        {"variant", 'v', "LIST", vhelp, "variant", DB_OPT_SWEEP, NULL},
        {"temperature", 'T', "LIST", "sampling temperatures, 0 = greedy (default 0)", "temperature", DB_OPT_SWEEP, NULL},
        {NULL, 0, NULL, "settings", NULL, DB_OPT_HEADING, NULL},
        {"top-p", 0, "X", "nucleus sampling mass (default 1)", "top_p", DB_OPT_SWEEP, NULL},
        {"top-k", 0, "N", "sample among the k most likely (default 0 = all)", "top_k", DB_OPT_SWEEP, NULL},
        {"max-new-tokens", 'n', "N", "tokens generated per request (default 64)", "max_new_tokens", DB_OPT_SWEEP, NULL},
        {"max-samples", 0, "N", "prompts per dataset (default 8)", "max_samples", DB_OPT_SWEEP, NULL},
        {"seed", 's', "N", "seed of sampling, prompt order and bootstrap (default 0)", "seed", DB_OPT_SWEEP, NULL},
        {"repetitions", 'r', "N", "timed rounds at least: each runs ar and every variant of a dataset/concurrency group back to back, rotated (default 3)", "repetitions", DB_OPT_SWEEP, NULL},
        {"max-rounds", 0, "N", "rounds at most: more run while a point's round-to-round spread is above 10% (default 5)", "max_rounds", DB_OPT_SWEEP, NULL},
        {"min-time", 0, "SEC", "seconds a point's timed pass lasts at least, its requests calibrated by the warm-up; 0 = off (default 0.5)", "min_time", DB_OPT_SWEEP, NULL},
        {"warmup", 0, "N", "untimed passes before them (default 1)", "warmup", DB_OPT_SWEEP, NULL},
        {"slo-ttft-ms", 0, "MS", "goodput counts a request only when its time to first token (from its arrival) is at most MS", "slo_ttft_ms", DB_OPT_SWEEP, NULL},
        {"slo-tpot-ms", 0, "MS", "... and its time per output token at most MS (goodput column: requests/s meeting every SLO given)", "slo_tpot_ms", DB_OPT_SWEEP, NULL},
        {"target", 't', "LIST", "target checkpoints (directory, .gguf), an axis: the same model at several weight types side by side, each drafter row paired with the ar of its own target (default models/tiny-qwen3)", "target", DB_OPT_SWEEP, NULL},
        {"drafter", 'd', "LIST", "drafter checkpoints: DIR for every variant (several DIRs: an axis), or VARIANT=DIR per variant (dflash2=DIR covers its ablations); default dflash=models/tiny-qwen3-dflash-b16, the rest models/tiny-qwen3-dflash2-b16", "drafter", DB_OPT_SWEEP, NULL},
        {"chat-template", 0, "NAME", DB_CHAT_TEMPLATE_NAMES " (default auto)", "chat_template", DB_OPT_SWEEP, NULL},
        {"thinking", 0, NULL, "Qwen3 thinking on (chatml: no empty think block)", "thinking", DB_OPT_SWEEP, NULL},
        {"no-baseline", 0, NULL, "no ar baseline (rows get no speedup)", "no_baseline", DB_OPT_SWEEP, NULL},
        {"deterministic", 0, NULL, "batch-invariant reductions", "deterministic", DB_OPT_SWEEP, NULL},
        {"allow-long-context", 0, NULL, "run prompt + max-new-tokens + block past the target's max_position_embeddings (its RoPE must hold there)", "allow_long_context", DB_OPT_SWEEP, NULL},
        {"threads", 0, "N", "CPU threads (default: all cores; above the cores this process may use: a warning; at most 4x them)", "threads", DB_OPT_SWEEP, NULL},
        {"kv-dtype", 0, "TYPE", DB_KV_DTYPE_HELP, "kv_dtype", DB_OPT_SWEEP, NULL},
        {"out", 0, "DIR", "results directory (default results/<UTC time>[-label])", "out", DB_OPT_SWEEP, NULL},
        {"label", 0, "TEXT", "name of the run, in the directory name and every row", "label", DB_OPT_SWEEP, NULL},
        {"output", 'o', "FMT", "stdout format: md (default), csv, json", "output", DB_OPT_SWEEP, NULL},
        {"format-files", 0, "LIST", "the tables' files: csv (default) or csv,json (JSON Lines beside each CSV)", "format_files", DB_OPT_SWEEP, NULL},
        {"config", 0, "FILE", "sweep keys from an ini file (block_size = 8,16), applied before every flag", NULL, DB_OPT_STR, NULL},
        {"resume", 0, "DIR", "finish the sweep of an earlier run in DIR (completed points are kept)", NULL, DB_OPT_STR, NULL},
        {"allow-changed-inputs", 0, NULL, "--resume even when a dataset, target or drafter file changed since the run began", NULL, DB_OPT_FLAG, NULL},
        {"dry-run", 0, NULL, "list the points and the estimated time, measure nothing", NULL, DB_OPT_FLAG, NULL},
        {"shard", 0, "K/N", "run shard K of N (0-based): whole ar + variant groups, balanced by predicted cost; join the shards with `merge`", NULL, DB_OPT_STR, NULL},
        {NULL, 0, NULL, "capacity planning (rows say weights=synthetic / acceptance_source=replay:<file>)", NULL, DB_OPT_HEADING, NULL},
        {"synthetic", 0, NULL, "random weights of the configs' shapes, made on the backend", "synthetic", DB_OPT_SWEEP, NULL},
        {"target-config", 0, "FILE", "target config.json for --synthetic (default: the target's)", "target_config", DB_OPT_SWEEP, NULL},
        {"drafter-config", 0, "FILE", "drafter config.json for --synthetic (default: the drafter's)", "drafter_config", DB_OPT_SWEEP, NULL},
        {"dtype", 0, "TYPE", "synthetic weight dtype: " DB_SYNTH_DTYPE_NAMES " (default bf16)", "dtype", DB_OPT_SWEEP, NULL},
        {"prompt-tokens", 0, "N", "synthetic prompts: N random ids (dataset synthetic-N; default 128)", "prompt_tokens", DB_OPT_SWEEP, NULL},
        {"acceptance-profile", 0, "LIST", "replay these per-position acceptance rates (an axis; FILE.csv, FILE.csv#POINT or a preset of configs/profiles/)", "acceptance_profile", DB_OPT_SWEEP, NULL},
        {"predict", 0, NULL, "roofline prediction per row (predicted_tok_s)", "predict", DB_OPT_SWEEP, NULL},
        {"bandwidth-gbs", 0, "X", "device bandwidth for --predict, GB/s (default: measured)", "bandwidth_gbs", DB_OPT_SWEEP, NULL},
        {"gflops", 0, "X", "device matmul rate for --predict, GFLOP/s (default: measured)", "gflops", DB_OPT_SWEEP, NULL},
        {"device-config", 0, "FILE", "device preset (configs/devices/*.json) for --predict and --shard's cost model instead of measured figures", "device_config", DB_OPT_SWEEP, NULL},
    };
    char names[200];
    snprintf(vhelp, sizeof vhelp, "variants: %s (default: all; table below)", db_variant_names(names, sizeof names, 0));
    int n = (int)(sizeof opts / sizeof *opts);
    for (int i = 0; i < n; i++) {
        if (opts[i].kind == DB_OPT_SWEEP) opts[i].dst = &c->sw;
        else if (opts[i].name && !strcmp(opts[i].name, "config")) opts[i].dst = &config_file;
        else if (opts[i].name && !strcmp(opts[i].name, "resume")) opts[i].dst = &c->resume;
        else if (opts[i].name && !strcmp(opts[i].name, "shard")) opts[i].dst = &c->shard_arg;
        else if (opts[i].name && !strcmp(opts[i].name, "allow-changed-inputs")) opts[i].dst = &c->allow_changed;
        else if (opts[i].name && !strcmp(opts[i].name, "dry-run")) opts[i].dst = &c->dry_run;
    }
    return (db_cmd_opts){"run",
                         "Benchmark sweep: every combination of the list-valued axes is one point; results go\n"
                         "to --out DIR as CSV (summary, acceptance, histogram, requests) + meta.json, and a\n"
                         "table to stdout. Without options it runs the default sweep (configs/default.ini).",
                         opts, n, db_variants_help};
}

/* flags -> sweep keys, --config files first. With --resume DIR the sweep starts from the one
 * DIR/meta.json records; flags and --config may repeat it but not change it. */
static int parse_args(run_ctx *c, int argc, char **argv, int *help, char *err, size_t errlen)
{
    db_cmd_opts cmd = run_options(c);
    db_sweep_init(&c->sw);
    db_opt_use *uses = db_calloc((size_t)argc, sizeof *uses);
    if (!uses) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the options");
    int n, rc = db_opts_scan(&cmd, argc, argv, uses, &n, help, err, errlen);
    for (int i = 0; i < n && !rc && !*help; i++)
        if (uses[i].opt->dst == &c->resume) c->resume = uses[i].value;
    db_sweep rec;
    int have_rec = 0;
    if (!rc && !*help && c->resume) rc = db_run_resume_begin(c->resume, &c->lock_fd, &rec, &have_rec, err, errlen);
    if (have_rec) c->sw = rec;
    for (int i = 0; i < n && !rc && !*help; i++)
        if (uses[i].opt->dst == &config_file) rc = db_sweep_load_ini(&c->sw, uses[i].value, err, errlen);
    for (int i = 0; i < n && !rc && !*help; i++)
        if (uses[i].opt->dst != &config_file) rc = db_opt_apply(&uses[i], err, errlen);
    free(uses);
    if (!rc && !*help && have_rec) {
        char diff[2048];
        int nd = db_sweep_diff(&rec, &c->sw, diff, sizeof diff);
        if (nd)
            return db_fail(err, errlen, DB_EINPUT, "--resume %s: %d setting%s differ from the recorded sweep: %s "
                           "(give --resume DIR alone, or start a new run)", c->resume, nd, nd > 1 ? "s" : "", diff);
    }
    return rc || *help ? rc : db_sweep_validate(&c->sw, err, errlen);
}

/* 1. the invocation's metadata and its points, what is checkable from names alone
 *    (db_sweep_runner_init), and an output directory that can be written */
static int check_sweep(run_ctx *c, int argc, char **argv, char *err, size_t errlen)
{
    const db_sweep *sw = &c->sw;
    db_run_meta_init(&c->meta, argc, argv, sw->seed, sw->label, time(NULL));
    if (!(c->meta.sweep = db_sweep_json(sw))) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for meta.json");
    int rc = db_sweep_runner_init(&c->sr, &c->sw, err, errlen);
    /* the rows and meta.json name the dtype auto resolved to */
    snprintf(c->meta.kv_dtype, sizeof c->meta.kv_dtype, "%s", db_dtype_name(c->sr.kv_dtype));
    if (rc) return rc;
    if (c->resume) snprintf(c->out_dir, sizeof c->out_dir, "%s", c->resume);
    else if (sw->out[0]) snprintf(c->out_dir, sizeof c->out_dir, "%s", sw->out);
    else {
        db_results_default_dir(c->out_dir, sizeof c->out_dir, sw->label, time(NULL));
        /* a run started in the same second may take the name meanwhile: the exclusive mkdir at
         * the first point moves on to the next free suffix (results_dir.h), nothing to refuse */
        return db_results_check_default(c->out_dir, err, errlen);
    }
    return db_results_check_writable(c->out_dir, c->resume != NULL, err, errlen);
}

/* 3b. --shard K/N (or the shard a resumed directory records): keep this shard's groups
 *     (cluster/shard.h); meta.json records the whole partition */
static int shard_keys(run_ctx *c, int *none, char *err, size_t errlen)
{
    int rc = db_run_resume_shard(c->shard_arg, c->resume, &c->shard, err, errlen);
    if (rc || !c->shard.count) return rc;
    double *cost = db_malloc(sizeof *cost * (size_t)c->sr.nkeys);
    char hash[65];
    if (!cost) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the shard's costs");
    rc = db_sweep_runner_costs(&c->sr, db_shard_point_cost, NULL, cost, err, errlen);
    if (!rc) rc = db_sweep_hash_json(c->meta.sweep, hash, err, errlen);
    if (!rc) rc = db_shard_apply(&c->shard, hash, c->sr.keys, &c->sr.nkeys, cost, &c->meta.shard, err, errlen);
    free(cost);
    if (!rc && (*none = c->sr.nkeys == 0))
        fprintf(stderr, "shard %d/%d: no points (the sweep has fewer groups than shards); nothing to do\n",
                c->shard.index, c->shard.count);
    return rc;
}

/* 3c. the estimated time, before anything is measured (the cost model of cluster/shard.h);
 *     --dry-run: then the points with their estimates on stdout, and stop.
 * The model's device figures: the sweep's (--device-config, --bandwidth-gbs and --gflops), else
 * measured on this device when the flat figures (100 GB/s, 1000 GFLOP/s, no fixed costs: a
 * GPU's order, not a CPU's, and blind to the small-matrix and per-forward costs of a small model)
 * predict more than ESTIMATE_PROBE_S: the probe (runner.h db_sweep_runner_device_figures) takes a
 * few seconds, and the default sweep's estimate on a 2-core CPU went from 2.8 min to 6.5 min
 * against 6.7 and 7.5 min taken. The progress's ETA uses the same figures. */
#define ESTIMATE_PROBE_S 60.0

static int estimate_costs(run_ctx *c, double *cost, double *total, char *err, size_t errlen)
{
    int rc = db_sweep_runner_costs(&c->sr, db_shard_point_cost, c->sr.hw_known ? &c->sr.hw : NULL, cost, err, errlen);
    *total = 0;
    for (int i = 0; i < c->sr.nkeys && !rc; i++) *total += cost[i];
    return rc;
}

/* the device figures for the estimate (see above); why[] says where they come from */
static void estimate_figures(run_ctx *c, double flat_total, char *why, size_t n)
{
    const db_sweep *sw = &c->sw;
    char e2[512] = "";
    if (sw->device_config[0]) snprintf(why, n, "device figures of %s", sw->device_config);
    else if (sw->bandwidth_gbs > 0 && sw->gflops > 0) snprintf(why, n, "device figures given");
    else if (c->sr.hw_known) snprintf(why, n, "device figures measured");
    else if (flat_total <= ESTIMATE_PROBE_S)
        snprintf(why, n, "flat device figures, %g GB/s and %g GFLOP/s: a rough guide for a short sweep",
                 DB_SHARD_FLAT_GBS, DB_SHARD_FLAT_GFLOPS);
    else {
        double t0 = db_now();
        int rc = c->sr.session_open ? DB_OK : db_sweep_runner_open_backend(&c->sr, e2, sizeof e2); /* --dry-run */
        if (!rc) rc = db_sweep_runner_device_figures(&c->sr, e2, sizeof e2);
        if (rc)
            snprintf(why, n, "flat device figures, %g GB/s and %g GFLOP/s, since measuring failed: %.300s",
                     DB_SHARD_FLAT_GBS, DB_SHARD_FLAT_GFLOPS, e2);
        else snprintf(why, n, "device figures measured in %.1fs", db_now() - t0);
    }
}

static int estimate(run_ctx *c, int *stop, char *err, size_t errlen)
{
    int n = c->sr.nkeys;
    double *cost = db_malloc(sizeof *cost * (size_t)(n > 0 ? n : 1)), total = 0;
    if (!cost) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the estimate");
    char why[700];
    int rc = estimate_costs(c, cost, &total, err, errlen), had = c->sr.hw_known;
    if (!rc) estimate_figures(c, total, why, sizeof why);
    if (!rc && !had && c->sr.hw_known) rc = estimate_costs(c, cost, &total, err, errlen); /* just measured */
    FILE *f = c->dry_run ? stdout : stderr;
    int rmax = c->sw.max_rounds > c->sw.repetitions ? c->sw.max_rounds : c->sw.repetitions;
    if (!rc)
        fprintf(f, "estimate: %d points, about %.1f min (%d to %d rounds of at least %gs each; up to %.1f min if every "
                "group needs %d rounds; %s)\n", n, total / 60, c->sw.repetitions, rmax, c->sw.min_time,
                total / 60 * rmax / c->sw.repetitions, rmax, why);
    for (int i = 0; i < n && !rc && c->dry_run; i++) {
        char id[DB_POINT_ID_MAX];
        db_point_id(&c->sr.keys[i], id, sizeof id);
        printf("%8.1fs  %s\n", cost[i], id);
    }
    free(cost);
    *stop = c->dry_run;
    return rc;
}

/* 6. meta.json (every checkpoint of the sweep, hashed, with its main dtype), the results
 *    directory and the stdout table */
static int open_results(run_ctx *c, char *err, size_t errlen)
{
    const db_sweep *sw = &c->sw;
    db_sweep_runner *sr = &c->sr;
    db_run_meta_set_backend(&c->meta, sw->backend[0], sr->s.be->device_name, sr->s.be->simd, sr->s.be->threads);
    int rc = DB_OK;
    for (int ti = 0; ti < sw->n_target && !rc; ti++) {
        db_dtype dt;
        char mix[16];
        const char *tp = sw->synthetic ? sr->tcfg.path : db_sweep_runner_target_path(sr, ti);
        rc = db_sweep_runner_main_dtype(sr, db_sweep_runner_target_path(sr, ti), &dt, mix, sizeof mix, err, errlen);
        if (!rc) rc = db_run_meta_add_model(&c->meta, tp, db_dtype_name(dt), mix, err, errlen);
    }
    for (int i = 0; i < sr->nkeys && !rc; i++) { /* the drafters, by the slots of the last plan */
        int s = db_drafter_set_of(&sr->ds, sw, &sr->keys[i]);
        if (s < 0) continue;
        db_dtype dt;
        char mix[16];
        const char *dp = sw->synthetic ? sr->ds.slot[s].cfg.base.path : sr->ds.slot[s].path;
        rc = db_sweep_runner_main_dtype(sr, sr->ds.slot[s].path, &dt, mix, sizeof mix, err, errlen);
        if (!rc) rc = db_run_meta_add_model(&c->meta, dp, db_dtype_name(dt), mix, err, errlen);
    }
    if (!rc) rc = db_run_inputs_record(&c->meta, &c->sw, err, errlen);
    if (!rc && c->resume) rc = db_run_inputs_check(&c->meta, c->out_dir, c->allow_changed, err, errlen);
    if (!rc) {
        /* no --out: a default name, made exclusively (with a suffix when another run took it) */
        rc = c->resume     ? db_results_open_locked(&c->res, c->out_dir, c->lock_fd, err, errlen)
             : sw->out[0] ? db_results_open(&c->res, c->out_dir, 0, err, errlen)
                          : db_results_open_default(&c->res, c->out_dir, err, errlen);
        c->lock_fd = -1; /* the results' now, even when the open failed */
        c->res_open = rc == DB_OK;
        c->res.jsonl = !strcmp(sw->format_files, "csv,json");
    }
    if (!rc) rc = db_results_write_meta(&c->res, &c->meta, err, errlen);
    if (!rc) rc = db_out_begin(&c->out, stdout, sw->output, sw->n_target > 1 || sw->n_drafter > 1, err, errlen);
    for (int i = 0; i < sw->n_request_rate; i++) c->out.load |= !db_runner_closed(sw->request_rate[i]);
    c->out.load |= sw->slo_ttft_ms > 0 || sw->slo_tpot_ms > 0;
    return rc;
}

/* 4. the backend, and the roofline's device figures (--predict) before any model takes memory */
static int open_backend(run_ctx *c, char *err, size_t errlen)
{
    int rc = db_sweep_runner_open_backend(&c->sr, err, errlen);
    const db_hw *hw = &c->sr.hw;
    if (!rc && c->sw.predict)
        fprintf(stderr, "roofline: %.1f GB/s (%s), %.1f GFLOP/s (%s)\n", hw->bw / 1e9, hw->bw_source, hw->flops / 1e9,
                hw->flops_source);
    return rc;
}

/* SIGINT / SIGTERM: the point (group) in progress is dropped at its next run boundary, the
 * completed ones stay, and the run stops with the command that resumes it. A second signal
 * kills at once (SA_RESETHAND). */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* the message of a run stopped by a signal, with the command that finishes it */
static int stopped(run_ctx *c, char *err, size_t errlen)
{
    int sig = stop_signal;
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
    if (c->res.pending)
        return db_fail(err, errlen, DB_ESIGNAL(sig), "stopped by %s before any point completed; nothing was written", name);
    char *words[] = {c->argv0, "run", "--resume", c->out_dir}, *cmd = db_shell_join(4, words);
    int rc = db_fail(err, errlen, DB_ESIGNAL(sig), "stopped by %s; the completed points are in %s; finish the sweep with: %s",
                     name, c->out_dir, cmd ? cmd : "run --resume DIR");
    free(cmd);
    return rc;
}

/* the axes beyond the point key's own that vary in this sweep (warnings name them) */
static unsigned sweep_varies(const db_sweep *sw)
{
    return (sw->n_backend > 1 ? DB_VARY_BACKEND : 0) | (sw->n_target > 1 ? DB_VARY_TARGET : 0) |
           (sw->n_drafter > 1 ? DB_VARY_DRAFTER : 0) | (sw->n_profile > 1 ? DB_VARY_PROFILE : 0);
}

/* a measured point: summary against its baseline, rows appended, the table line, and a warning
 * when its numbers are not to be trusted */
static int commit_point(run_ctx *c, db_point_raw *raw, char *err, size_t errlen)
{
    const db_point_key *k = &raw->key;
    db_point_raw loaded = {0};
    const db_point_raw *base = db_results_baseline(&c->res, c->done, c->n_done, k, &loaded, err, errlen);
    db_point_summary sum;
    int rc = DB_OK;
    if (db_point_summarize(raw, base, c->sw.seed, &sum))
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory summarizing %s %s", k->dataset, k->variant);
    if (!rc) rc = db_results_append(&c->res, &c->meta, raw, &sum, err, errlen);
    /* a default directory may have taken a suffix at its first point (results_dir.h) */
    snprintf(c->out_dir, sizeof c->out_dir, "%s", c->res.dir);
    /* the weights the note compares with the cache: the current target's on the device (from
     * its config's shapes, so synthetic weights count too, not their config file) */
    if (!rc) rc = db_out_point(&c->out, &c->meta, raw, &sum, db_weights_bytes(&c->sr.tcfg, NULL, c->sr.wdtype), err, errlen);
    char why[1200];
    if (!rc && db_out_point_warning(raw, &sum, sweep_varies(&c->sw), why, sizeof why))
        fprintf(stderr, "warning: %s\n", why);
    db_point_raw_free(&loaded);
    return rc;
}

/* the load around a group, in meta.json for each of its points; a warning when other processes
 * held more than half a core */
static int record_load(run_ctx *c, const db_point_raw *raw, int P, const db_load_sample *a,
                       const db_load_sample *b, char *err, size_t errlen)
{
    for (int j = 0; j < P; j++) { /* once per group: the advice is the same for its points */
        double other;
        if (db_contended(&raw[j], &other) != 1) continue;
        int t = raw[j].threads > 0 ? raw[j].threads : 1, spare = raw[j].cpus - (int)(other + 0.5);
        char name[600];
        db_out_point_name(&raw[j].key, sweep_varies(&c->sw), name, sizeof name);
        fprintf(stderr, "warning: other processes held %.1f of %d cores while %s ran on %d threads (rows "
                "contended: a descheduled thread stalls the others at every barrier); lower --threads to %d\n",
                other, raw[j].cpus, name, t, spare > 1 ? spare : 1);
        break;
    }
    if ((!c->meta.points && !(c->meta.points = cJSON_CreateArray())) || db_load_add_points(c->meta.points, raw, P, a, b))
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory for meta.json's points");
    return DB_OK;
}

/* One group, the unit of work (bench/runner.h: warm-ups, then R rotated rounds). Nothing is
 * written before every round ran: a stopped or killed group leaves no point of it. The bar is
 * cleared once the rounds are done, before any warning or row of the group is printed. */
static int measure_group(run_ctx *c, int i0, int i1, db_progress *prog, char *err, size_t errlen)
{
    int P = i1 - i0;
    db_point_raw *raw = &c->done[c->n_done];
    db_load_sample a, b;
    db_load_sample_now(&a);
    int rc = db_sweep_runner_group(&c->sr, i0, i1, raw, err, errlen);
    db_load_sample_now(&b);
    db_progress_clear(prog);
    if (rc) return stop_signal ? stopped(c, err, errlen) : rc;
    c->n_done += P;
    rc = record_load(c, raw, P, &a, &b, err, errlen);
    for (int j = 0; j < P && !rc; j++) rc = commit_point(c, &raw[j], err, errlen);
    return rc ? rc : db_results_write_meta(&c->res, &c->meta, err, errlen);
}

/* the predicted cost of every point (cluster/shard.h's model, the one --shard balances by): the
 * progress's ETA weighs what is left by it */
static double *point_costs(run_ctx *c, char *err, size_t errlen)
{
    double *cost = db_malloc(sizeof *cost * (size_t)(c->sr.nkeys > 0 ? c->sr.nkeys : 1));
    if (!cost) db_fail(err, errlen, DB_ERUNTIME, "out of memory for the points' costs");
    else if (db_sweep_runner_costs(&c->sr, db_shard_point_cost, c->sr.hw_known ? &c->sr.hw : NULL, cost, err, errlen)) {
        free(cost);
        cost = NULL;
    }
    return cost;
}

/* 7. every group with a point not done yet (--resume keeps complete groups and runs a partly
 *    written one again), with progress on stderr; the runner keeps one target's weights on the
 *    device at a time */
static int measure_all(run_ctx *c, char *err, size_t errlen)
{
    const db_point_key *keys = c->sr.keys;
    int nkeys = c->sr.nkeys, todo = 0, rc = DB_OK;
    if (!(c->done = db_calloc((size_t)nkeys, sizeof *c->done))) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the points");
    double *cost = point_costs(c, err, errlen), todo_cost = 0;
    if (!cost) return DB_ERUNTIME;
    for (int i0 = 0, i1; i0 < nkeys && !rc; i0 = i1) {
        i1 = db_group_end(keys, nkeys, i0);
        int done = 0;
        for (int i = i0; i < i1; i++) done += db_results_is_done(&c->res, &keys[i]);
        if (done > 0 && done < i1 - i0) /* its points must come from the same rounds */
            rc = db_results_forget(&c->res, keys + i0, i1 - i0, err, errlen);
        todo += done < i1 - i0 ? i1 - i0 : 0;
        for (int i = i0; i < i1 && done < i1 - i0; i++) todo_cost += cost[i];
    }
    /* -o csv of a resume: the rows DIR holds now come first, so stdout is the whole summary.csv */
    if (!rc && c->resume) rc = db_out_prior(&c->out, c->out_dir, err, errlen);
    db_progress prog;
    db_progress_begin(&prog, stderr, todo, todo_cost);
    if (!rc && c->resume && todo < nkeys) {
        db_progress_clear(&prog);
        fprintf(stderr, "resume: %d of %d points already complete in %s\n", nkeys - todo, nkeys, c->out_dir);
    }
    catch_signals();
    c->sr.run.stop = &stop_signal;
    c->sr.run.t_origin = -1;
    for (int i0 = 0, i1; i0 < nkeys && !rc; i0 = i1) {
        i1 = db_group_end(keys, nkeys, i0);
        if (db_results_is_done(&c->res, &keys[i0])) continue;
        const db_point_key *k = &keys[i0];
        char what[300];
        double gcost = 0;
        for (int i = i0; i < i1; i++) gcost += cost[i];
        char rate[48] = "", depth[32] = "";
        if (!db_runner_closed(k->request_rate)) snprintf(rate, sizeof rate, " %g req/s", k->request_rate);
        if (k->depth > 0) snprintf(depth, sizeof depth, " depth %d", k->depth);
        snprintf(what, sizeof what, "%s%s%s%s c%d%s T%g (%d point%s x %d round%s)", c->sw.n_target > 1 ? k->target : "",
                 c->sw.n_target > 1 ? " " : "", k->dataset, depth, k->concurrency, rate, k->temperature, i1 - i0,
                 i1 - i0 > 1 ? "s" : "", c->sw.repetitions, c->sw.repetitions > 1 ? "s" : "");
        db_progress_start(&prog, what);
        double tp = db_now();
        rc = measure_group(c, i0, i1, &prog, err, errlen);
        db_progress_clear(&prog);
        if (!rc) db_progress_done(&prog, what, i1 - i0, gcost, db_now() - tp);
    }
    free(cost);
    db_progress_end(&prog);
    return rc;
}

static void run_free(run_ctx *c)
{
    for (int i = 0; i < c->n_done; i++) db_point_raw_free(&c->done[i]);
    free(c->done);
    if (c->res_open) db_results_close(&c->res);
    if (c->lock_fd >= 0) close(c->lock_fd);
    db_run_meta_free(&c->meta);
    db_sweep_runner_free(&c->sr);
}

/* --resume with every point of the sweep already complete: say so and write nothing */
static int nothing_left(run_ctx *c, int *none, char *err, size_t errlen)
{
    int n = c->sr.nkeys, done = 0;
    int rc = c->resume ? db_results_count_done(c->out_dir, c->sr.keys, n, &done, err, errlen) : DB_OK;
    *none = !rc && c->resume && done == n;
    if (*none) fprintf(stderr, "resume: all %d points of %s are complete; nothing to do\n", n, c->out_dir);
    return rc;
}

int db_cmd_run(int argc, char **argv, char *err, size_t errlen)
{
    run_ctx *c = db_calloc(1, sizeof *c);
    if (!c) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the run");
    c->argv0 = argv[0];
    c->lock_fd = -1;
    int stop = 0, rc = parse_args(c, argc, argv, &stop, err, errlen);
    if (!rc && !stop) rc = check_sweep(c, argc, argv, err, errlen);
    if (!rc && !stop) rc = db_sweep_runner_configs(&c->sr, err, errlen);
    if (!rc && !stop) rc = db_sweep_runner_prompts(&c->sr, err, errlen); /* completes the keys */
    if (!rc && !stop) rc = shard_keys(c, &stop, err, errlen);
    if (!rc && !stop) rc = nothing_left(c, &stop, err, errlen);
    if (!rc && !stop && c->dry_run) rc = estimate(c, &stop, err, errlen);
    if (!rc && !stop) rc = open_backend(c, err, errlen);
    if (!rc && !stop) rc = open_results(c, err, errlen);
    if (!rc && !stop) rc = estimate(c, &stop, err, errlen); /* every check passed: what measuring will take */
    if (!rc && !stop) rc = measure_all(c, err, errlen);
    if (!rc && !stop) rc = db_out_end(&c->out, err, errlen);
    if (rc) db_out_abort(&c->out); /* -o json: the array closed on every exit that opened it */
    if (!rc && !stop) fprintf(stderr, "results in %s\n", c->out_dir);
    run_free(c);
    free(c);
    return rc;
}
