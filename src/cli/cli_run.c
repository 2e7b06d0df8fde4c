/* cli_run.c — `dflash-bench run`: the benchmark sweep. Parses the sweep (sweep.h: flags and
 * --config ini), checks everything checkable before a model loads, then measures every point
 * (engine.h) and appends its rows to the results directory (results_dir.h) as it finishes.
 *
 * Per point: one engine sized for the point's concurrency; `warmup` untimed passes over the
 * first `concurrency` prompts; then `repetitions` timed passes over all prompts. A timed pass is
 * closed-loop: all samples' first turns, then (multi-turn sets) all second turns with the
 * model's decoded first answers in the conversation; wall time is the sum of the turns' runs
 * (sizing the engine and decoding answers between turns are outside it), so
 * throughput = committed tokens of every turn / wall seconds. Every variant sees the same
 * prompts and the same per-request seeds, so speedup pairs with `ar` prompt by prompt. */
#include "bench/capacity.h"
#include "bench/drafter_set.h"
#include "bench/machine_load.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cluster/shard.h"
#include "engine/engine.h"
#include "text/prompt.h"
#include "bench/progress.h"
#include "report/report.h"
#include "report/report_out.h"
#include "report/results_dir.h"
#include "result/run_meta.h"
#include "bench/profile.h"
#include "engine/session.h"
#include "bench/sweep.h"
#include "bench/sweep_record.h"
#include "model/synthetic.h"
#include "text/tokenizer.h"
#include "base/paths.h"
#include "base/util.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    char name[64];
    db_dataset ds;
    int **ids; /* [n_samples] first-turn prompt ids */
    int *len;
    int synthetic; /* synthetic-<N>: random ids, one turn, no text */
} prompt_set;

typedef struct {
    db_sweep sw;
    const char *resume;
    const char *shard_arg; /* --shard K/N */
    db_shard shard;
    char *argv0;          /* how this binary was called, for the resume command */
    char out_dir[1024];
    db_point_key *keys;   /* the sweep's points, in order */
    int nkeys;
    int maxb;             /* largest block size of a drafter point */
    db_session s;
    int session_open;
    db_session_opts so;
    db_synth_opts syn;
    const char *tpath;    /* the target being measured: its checkpoint, or (synthetic) its config */
    int cur_target;       /* its index in the sweep's target list, -1 before the first */
    db_drafter_set ds;    /* the drafters the variants run, one per checkpoint */
    int dslot;            /* the slot of the point being measured, -1 for none */
    double t_origin;      /* db_now() at the first timed pass: requests.csv's start_s origin */
    db_tokenizer tok;
    db_chat_template tmpl;
    prompt_set *sets;
    int n_sets;
    db_point_raw *done;   /* completed points of this invocation (baselines for speedup) */
    int n_done;
    /* capacity planning */
    db_model_config tcfg;     /* the configs, read before any weight loads */
    int need_drafter;
    db_dtype wdtype;          /* storage dtype of the weights (synthetic: the chosen one) */
    db_dtype kv_dtype;        /* the K/V caches' (sweep key kv_dtype) */
    db_profile profiles[DB_SWEEP_MAX]; /* acceptance profiles, in sweep order */
    db_hw hw;                 /* device figures for the roofline (predict) */
    /* output */
    db_run_meta meta;
    db_results res;
    int res_open;
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
        {"concurrency", 'c', "LIST", "requests in flight (default 1,8,32)", "concurrency", DB_OPT_SWEEP, NULL},
        {"block-size", 'B', "LIST", "draft block sizes (default 8,16)", "block_size", DB_OPT_SWEEP, NULL},
        {"variant", 'v', "LIST", vhelp, "variant", DB_OPT_SWEEP, NULL},
        {"temperature", 'T', "LIST", "sampling temperatures, 0 = greedy (default 0)", "temperature", DB_OPT_SWEEP, NULL},
        {NULL, 0, NULL, "settings", NULL, DB_OPT_HEADING, NULL},
        {"top-p", 0, "X", "nucleus sampling mass (default 1)", "top_p", DB_OPT_SWEEP, NULL},
        {"top-k", 0, "N", "sample among the k most likely (default 0 = all)", "top_k", DB_OPT_SWEEP, NULL},
        {"max-new-tokens", 'n', "N", "tokens generated per request (default 64)", "max_new_tokens", DB_OPT_SWEEP, NULL},
        {"max-samples", 0, "N", "prompts per dataset (default 8)", "max_samples", DB_OPT_SWEEP, NULL},
        {"seed", 's', "N", "seed of sampling, prompt order and bootstrap (default 0)", "seed", DB_OPT_SWEEP, NULL},
        {"repetitions", 'r', "N", "timed rounds: each runs ar and every variant of a dataset/concurrency group back to back, rotated (default 3)", "repetitions", DB_OPT_SWEEP, NULL},
        {"warmup", 0, "N", "untimed passes before them (default 1)", "warmup", DB_OPT_SWEEP, NULL},
        {"target", 't', "LIST", "target checkpoints (directory, .gguf), an axis: the same model at several weight types side by side, each drafter row paired with the ar of its own target (default models/tiny-qwen3)", "target", DB_OPT_SWEEP, NULL},
        {"drafter", 'd', "LIST", "drafter checkpoints: DIR for every variant (several DIRs: an axis), or VARIANT=DIR per variant (dflash2=DIR covers its ablations); default dflash=models/tiny-qwen3-dflash-b16, the rest models/tiny-qwen3-dflash2-b16", "drafter", DB_OPT_SWEEP, NULL},
        {"chat-template", 0, "NAME", "auto (default), none, chatml, llama3", "chat_template", DB_OPT_SWEEP, NULL},
        {"thinking", 0, NULL, "Qwen3 thinking on (chatml: no empty think block)", "thinking", DB_OPT_SWEEP, NULL},
        {"no-baseline", 0, NULL, "no ar baseline (rows get no speedup)", "no_baseline", DB_OPT_SWEEP, NULL},
        {"deterministic", 0, NULL, "batch-invariant reductions", "deterministic", DB_OPT_SWEEP, NULL},
        {"threads", 0, "N", "CPU threads (default: all cores; more than this process may use: a warning)", "threads", DB_OPT_SWEEP, NULL},
        {"kv-dtype", 0, "TYPE", DB_KV_DTYPE_HELP, "kv_dtype", DB_OPT_SWEEP, NULL},
        {"out", 0, "DIR", "results directory (default results/<UTC time>[-label])", "out", DB_OPT_SWEEP, NULL},
        {"label", 0, "TEXT", "name of the run, in the directory name and every row", "label", DB_OPT_SWEEP, NULL},
        {"output", 'o', "FMT", "stdout format: md (default), csv, json", "output", DB_OPT_SWEEP, NULL},
        {"config", 0, "FILE", "sweep keys from an ini file (block_size = 8,16), applied before every flag", NULL, DB_OPT_STR, NULL},
        {"resume", 0, "DIR", "finish the sweep of an earlier run in DIR (completed points are kept)", NULL, DB_OPT_STR, NULL},
        {"shard", 0, "K/N", "run shard K of N (0-based): whole ar + variant groups, balanced by predicted cost; join the shards with `merge`", NULL, DB_OPT_STR, NULL},
        {NULL, 0, NULL, "capacity planning (rows say weights=synthetic / acceptance_source=replay:<file>)", NULL, DB_OPT_HEADING, NULL},
        {"synthetic", 0, NULL, "random weights of the configs' shapes, made on the backend", "synthetic", DB_OPT_SWEEP, NULL},
        {"target-config", 0, "FILE", "target config.json for --synthetic (default: the target's)", "target_config", DB_OPT_SWEEP, NULL},
        {"drafter-config", 0, "FILE", "drafter config.json for --synthetic (default: the drafter's)", "drafter_config", DB_OPT_SWEEP, NULL},
        {"dtype", 0, "TYPE", "synthetic weight dtype: bf16 (default), f16, f32", "dtype", DB_OPT_SWEEP, NULL},
        {"prompt-tokens", 0, "N", "synthetic prompts: N random ids (dataset synthetic-N; default 128)", "prompt_tokens", DB_OPT_SWEEP, NULL},
        {"acceptance-profile", 0, "LIST", "replay these per-position acceptance rates (an axis; FILE.csv, FILE.csv#POINT or a preset of configs/profiles/)", "acceptance_profile", DB_OPT_SWEEP, NULL},
        {"predict", 0, NULL, "roofline prediction per row (predicted_tok_s)", "predict", DB_OPT_SWEEP, NULL},
        {"bandwidth-gbs", 0, "X", "device bandwidth for --predict, GB/s (default: measured)", "bandwidth_gbs", DB_OPT_SWEEP, NULL},
        {"gflops", 0, "X", "device matmul rate for --predict, GFLOP/s (default: measured)", "gflops", DB_OPT_SWEEP, NULL},
    };
    char names[200];
    snprintf(vhelp, sizeof vhelp, "variants: %s (default: all; table below)", db_variant_names(names, sizeof names, 0));
    int n = (int)(sizeof opts / sizeof *opts);
    for (int i = 0; i < n; i++) {
        if (opts[i].kind == DB_OPT_SWEEP) opts[i].dst = &c->sw;
        else if (opts[i].name && !strcmp(opts[i].name, "config")) opts[i].dst = &config_file;
        else if (opts[i].name && !strcmp(opts[i].name, "resume")) opts[i].dst = &c->resume;
        else if (opts[i].name && !strcmp(opts[i].name, "shard")) opts[i].dst = &c->shard_arg;
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
    db_opt_use *uses = calloc((size_t)argc, sizeof *uses);
    if (!uses) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    int n, rc = db_opts_scan(&cmd, argc, argv, uses, &n, help, err, errlen);
    for (int i = 0; i < n && !rc && !*help; i++)
        if (uses[i].opt->dst == &c->resume) c->resume = uses[i].value;
    db_sweep rec;
    int have_rec = 0;
    if (!rc && !*help && c->resume) {
        rc = db_sweep_recorded(c->resume, &rec, err, errlen);
        have_rec = rc == 0;
        if (rc == 1) {
            fprintf(stderr, "warning: %s/meta.json records no sweep (an older run): resuming with the flags given\n",
                    c->resume);
            rc = DB_OK;
        }
        if (have_rec) c->sw = rec;
    }
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

/* synthetic-<N>: max_samples prompts of N ids drawn uniformly from the vocabulary, seeded by
 * the run's seed and the prompt's index (the same prompts for every point and variant) */
static int synthetic_set(prompt_set *ps, int n_tokens, int n, int vocab, uint64_t seed, char *err,
                         size_t errlen)
{
    ps->synthetic = 1;
    ps->ds.samples = calloc((size_t)n, sizeof *ps->ds.samples);
    ps->ids = calloc((size_t)n, sizeof(int *));
    ps->len = calloc((size_t)n, sizeof(int));
    if (!ps->ds.samples || !ps->ids || !ps->len) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    snprintf(ps->ds.name, sizeof ps->ds.name, "%s", ps->name);
    for (int j = 0; j < n; j++) {
        db_sample *sm = &ps->ds.samples[j];
        sm->turns = calloc(1, sizeof(char *));
        if (sm->turns) sm->turns[0] = calloc(1, 1);
        ps->ids[j] = malloc(sizeof(int) * (size_t)n_tokens);
        if (!sm->turns || !sm->turns[0] || !ps->ids[j]) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
        sm->n_turns = 1;
        sm->line = j + 1;
        ps->ds.n = j + 1;
        db_rng r;
        db_rng_seed(&r, db_synth_mix(seed ^ db_synth_fnv1a("synthetic-prompts")) + (uint64_t)j);
        for (int t = 0; t < n_tokens; t++) ps->ids[j][t] = (int)(db_rng_next(&r) % (uint64_t)vocab);
        ps->len[j] = n_tokens;
    }
    return DB_OK;
}

/* model paths not found from the current directory come from the data root (base/paths.h), so
 * `run` and its default models work from any directory; a path found nowhere stays as given
 * and its loader names it */
static void find_models(db_sweep *sw)
{
    typedef struct {
        char *p;
        size_t n;
    } field;
    field f[2 + 2 * DB_SWEEP_MODELS] = {{sw->target_config, sizeof sw->target_config},
                                        {sw->drafter_config, sizeof sw->drafter_config}};
    for (int i = 0; i < sw->n_target; i++) f[2 + i] = (field){sw->target[i], sizeof sw->target[i]};
    for (int i = 0; i < sw->n_drafter; i++) f[2 + DB_SWEEP_MODELS + i] = (field){sw->drafter[i], sizeof sw->drafter[i]};
    char buf[1024];
    for (int v = 0; v < DB_SWEEP_VARIANTS; v++)
        if (sw->variant_drafter[v][0] && db_data_find(sw->variant_drafter[v], buf, sizeof buf) == buf &&
            strlen(buf) < sizeof sw->variant_drafter[v])
            memcpy(sw->variant_drafter[v], buf, strlen(buf) + 1);
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].p && f[i].p[0] && db_data_find(f[i].p, buf, sizeof buf) == buf && strlen(buf) < f[i].n)
            memcpy(f[i].p, buf, strlen(buf) + 1);
}

static int load_sets(run_ctx *c, char *err, size_t errlen)
{
    int synth_only = c->sw.synthetic && !c->sw.dataset_set;
    c->n_sets = synth_only ? 1 : c->sw.n_dataset;
    c->sets = calloc((size_t)c->n_sets, sizeof *c->sets);
    if (!c->sets) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    for (int i = 0; i < c->n_sets; i++) {
        prompt_set *ps = &c->sets[i];
        int nt = c->sw.prompt_tokens, rc;
        if (synth_only) snprintf(ps->name, sizeof ps->name, "synthetic-%d", nt);
        else snprintf(ps->name, sizeof ps->name, "%s", c->sw.dataset[i]);
        if (db_dataset_is_synthetic(ps->name, &nt)) {
            if ((rc = synthetic_set(ps, nt, c->sw.max_samples, c->tcfg.vocab, c->sw.seed, err, errlen)))
                return rc;
            continue;
        }
        rc = db_dataset_load(&ps->ds, c->sw.dataset[i], c->sw.max_samples, c->sw.seed, err, errlen);
        if (rc) return rc;
        ps->ids = calloc((size_t)ps->ds.n, sizeof(int *));
        ps->len = calloc((size_t)ps->ds.n, sizeof(int));
        for (int j = 0; j < ps->ds.n; j++) {
            rc = db_prompt_render(&c->tok, c->tmpl, c->sw.thinking, &ps->ds.samples[j], 0, NULL,
                                  &ps->ids[j], &ps->len[j], err, errlen);
            if (rc) return rc;
            for (int t = 0; t < ps->len[j]; t++)
                if (ps->ids[j][t] < 0 || ps->ids[j][t] >= c->tcfg.vocab)
                    return db_fail(err, errlen, DB_EINPUT, "%s: prompt %d: token id %d outside the vocabulary (%d) of %s",
                                   ps->name, j, ps->ids[j][t], c->tcfg.vocab, c->tcfg.path);
        }
    }
    return DB_OK;
}

static void free_sets(run_ctx *c)
{
    for (int i = 0; i < c->n_sets; i++) {
        prompt_set *ps = &c->sets[i];
        for (int j = 0; j < ps->ds.n && ps->ids; j++) free(ps->ids[j]);
        free(ps->ids);
        free(ps->len);
        db_dataset_free(&ps->ds);
    }
    free(c->sets);
}

static prompt_set *find_set(run_ctx *c, const char *name)
{
    for (int i = 0; i < c->n_sets; i++)
        if (strcmp(c->sets[i].name, name) == 0) return &c->sets[i];
    return NULL;
}

/* One closed-loop pass over reqs through an engine sized for them. Sizing (cache allocation)
 * is outside the timing: *secs gets the duration of the run alone. */
static int run_requests(run_ctx *c, const db_gen_params *p, int conc, db_request *reqs, int n,
                        double *t0, double *secs, char *err, size_t errlen)
{
    db_drafter *d = c->dslot >= 0 ? &c->ds.slot[c->dslot].d : NULL;
    int maxp = 1;
    for (int i = 0; i < n; i++) maxp = reqs[i].n_prompt > maxp ? reqs[i].n_prompt : maxp;
    db_engine *e;
    int rc = db_engine_create(&e, &c->s.target, d, p, conc,
                              maxp, err, errlen);
    if (rc) return rc;
    double ts = db_now();
    if (*t0 < 0) *t0 = ts; /* the first run starts the clock of the time stamps */
    rc = db_engine_run(e, reqs, n, *t0, NULL, NULL, err, errlen);
    if (secs) *secs += db_now() - ts;
    db_engine_destroy(e);
    return rc;
}

/* A timed pass: turn 1 of every sample, then later turns with the decoded answers so far.
 * stats[] receives one entry per (sample, turn), sample-major order within each turn. */
static int timed_pass(run_ctx *c, const prompt_set *ps, const db_gen_params *p, int conc,
                      db_req_stats *stats, int *n_stats, double *wall, char *err, size_t errlen)
{
    int ns = ps->ds.n, max_turns = 1, rc = DB_OK;
    for (int j = 0; j < ns; j++)
        if (ps->ds.samples[j].n_turns > max_turns) max_turns = ps->ds.samples[j].n_turns;
    char ***answers = calloc((size_t)ns, sizeof(char **));
    db_request *reqs = calloc((size_t)ns, sizeof *reqs);
    int *outbuf = malloc(sizeof(int) * (size_t)ns * (size_t)p->max_new_tokens);
    int **prompts = calloc((size_t)ns, sizeof(int *)), *idx = calloc((size_t)ns, sizeof(int));
    if (!answers || !reqs || !outbuf || !prompts || !idx) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    *n_stats = 0;
    *wall = 0;
    double t0 = -1; /* time stamps count from the start of the first turn's run */
    for (int turn = 0; turn < max_turns && !rc; turn++) {
        int n = 0;
        for (int j = 0; j < ns && !rc; j++) {
            const db_sample *sm = &ps->ds.samples[j];
            if (turn >= sm->n_turns) continue;
            int *ids = ps->ids[j], len = ps->len[j];
            if (turn > 0) {
                rc = db_prompt_render(&c->tok, c->tmpl, c->sw.thinking, sm, turn,
                                      (const char *const *)answers[j], &prompts[n], &len, err, errlen);
                ids = prompts[n];
            }
            idx[n] = j;
            reqs[n] = (db_request){.prompt = ids, .n_prompt = len, .out = outbuf + (size_t)n * p->max_new_tokens};
            n++;
        }
        if (!rc) rc = run_requests(c, p, conc, reqs, n, &t0, wall, err, errlen);
        for (int r = 0; r < n && !rc; r++) {
            stats[(*n_stats)++] = reqs[r].st;
            if (turn + 1 < ps->ds.samples[idx[r]].n_turns) {
                char *text;
                size_t tl;
                rc = db_tokenizer_decode(&c->tok, reqs[r].out, reqs[r].n_out, 1, &text, &tl, err, errlen);
                if (!rc) {
                    if (!answers[idx[r]]) answers[idx[r]] = calloc((size_t)max_turns, sizeof(char *));
                    answers[idx[r]][turn] = text;
                }
            }
        }
        for (int r = 0; r < n; r++)
            if (turn > 0) free(prompts[r]), prompts[r] = NULL;
    }
    for (int j = 0; j < ns && answers; j++) {
        for (int t = 0; answers[j] && t < max_turns; t++) free(answers[j][t]);
        free(answers[j]);
    }
    free(answers), free(reqs), free(outbuf), free(prompts), free(idx);
    return rc;
}

/* the engine parameters of point k (and its drafter slot, in c->dslot) */
static int point_params(run_ctx *c, const db_point_key *k, db_gen_params *p, prompt_set **ps, char *err,
                        size_t errlen)
{
    *ps = find_set(c, k->dataset);
    db_variant v;
    c->dslot = db_drafter_set_of(&c->ds, &c->sw, k);
    if (!*ps || db_variant_parse(k->variant, &v) != 0)
        return db_fail(err, errlen, DB_EINPUT, "point %s/%s: unknown dataset or variant", k->dataset, k->variant);
    *p = (db_gen_params){.variant = v, .block_size = k->block_size, .temperature = k->temperature,
                         .top_p = k->top_p, .top_k = k->top_k, .max_new_tokens = k->max_new_tokens,
                         .seed = c->sw.seed, .ignore_eos = c->sw.synthetic, .kv_dtype = c->kv_dtype};
    for (int i = 0; i < c->sw.n_profile; i++) /* replayed acceptance: "replay:<profile>" */
        if (!strncmp(k->acceptance_source, "replay:", 7) && !strcmp(k->acceptance_source + 7, c->sw.profile[i])) {
            p->replay_rates = c->profiles[i].rate;
            p->replay_n = c->profiles[i].n;
        }
    return DB_OK;
}

/* raw's arrays for the sweep's repetitions, then the untimed warm-up passes over one batch of
 * first turns */
static int point_begin(run_ctx *c, const db_point_key *k, db_point_raw *raw, char *err, size_t errlen)
{
    db_gen_params p;
    prompt_set *ps;
    int rc = point_params(c, k, &p, &ps, err, errlen), R = c->sw.repetitions;
    if (rc) return rc;
    int per_pass = 0;
    for (int j = 0; j < ps->ds.n; j++) per_pass += ps->ds.samples[j].n_turns;
    memset(raw, 0, sizeof *raw);
    raw->key = *k;
    raw->n_prompts = per_pass;
    raw->repetitions = R;
    raw->wall_s = calloc((size_t)R, sizeof(double));
    raw->rep_start_s = calloc((size_t)R, sizeof(double));
    raw->reqs = calloc((size_t)R * per_pass, sizeof(db_req_stats));
    if (!raw->wall_s || !raw->rep_start_s || !raw->reqs) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    for (int w = 0; w < c->sw.warmup && !rc; w++) {
        int n = ps->ds.n < k->concurrency ? ps->ds.n : k->concurrency;
        db_request *reqs = calloc((size_t)n, sizeof *reqs);
        int *out = malloc(sizeof(int) * (size_t)n * k->max_new_tokens);
        if (!reqs || !out) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory");
        for (int j = 0; j < n && !rc; j++)
            reqs[j] = (db_request){.prompt = ps->ids[j], .n_prompt = ps->len[j], .out = out + (size_t)j * k->max_new_tokens};
        double t0 = -1;
        if (!rc) rc = run_requests(c, &p, k->concurrency, reqs, n, &t0, NULL, err, errlen);
        free(reqs);
        free(out);
    }
    return rc;
}

/* timed repetition r of the point: its start time, requests, wall time, page faults and the
 * backend's peak memory */
static int point_rep(run_ctx *c, db_point_raw *raw, int r, char *err, size_t errlen)
{
    db_gen_params p;
    prompt_set *ps;
    int rc = point_params(c, &raw->key, &p, &ps, err, errlen), got = 0;
    if (rc) return rc;
    c->s.be->bytes_peak = c->s.be->bytes_in_use;
    db_load_sample a, b;
    db_load_sample_now(&a);
    if (c->t_origin < 0) c->t_origin = a.t;
    raw->rep_start_s[r] = a.t - c->t_origin;
    rc = timed_pass(c, ps, &p, raw->key.concurrency, raw->reqs + (size_t)r * raw->n_prompts, &got, &raw->wall_s[r],
                    err, errlen);
    db_load_sample_now(&b);
    raw->major_faults += b.majflt - a.majflt;
    double mib = (double)c->s.be->bytes_peak / DB_MIB;
    if (mib > raw->peak_mem_mib) raw->peak_mem_mib = mib;
    if (!rc && got != raw->n_prompts) rc = db_fail(err, errlen, DB_ERUNTIME, "internal: %d of %d requests ran", got, raw->n_prompts);
    if (!rc && r + 1 == raw->repetitions && c->sw.predict)
        raw->predicted_tok_s = db_roofline_point(&c->tcfg, c->dslot >= 0 ? &c->ds.slot[c->dslot].cfg : NULL, c->wdtype,
                                                 &c->hw, raw, c->kv_dtype);
    return rc;
}

static const db_point_raw *find_baseline(run_ctx *c, db_results *res, const db_point_key *k,
                                         db_point_raw *loaded, char *err, size_t errlen)
{
    db_point_key ar;
    db_point_baseline_key(k, &ar);
    for (int i = 0; i < c->n_done; i++)
        if (db_point_key_equal(&c->done[i].key, &ar)) return &c->done[i];
    if (db_results_is_done(res, &ar) && db_results_load_raw(res, &ar, loaded, err, errlen) == 0) return loaded;
    return NULL;
}


static int synth_only(const run_ctx *c) { return c->sw.synthetic && !c->sw.dataset_set; }

/* the point runs the drafter (its variant, by the variant table) */
static int key_drafts(const db_point_key *k)
{
    db_variant v;
    return db_variant_parse(k->variant, &v) == 0 && db_variant_uses_drafter(v);
}

/* 1. the invocation's metadata and its points, and what is checkable from names alone: one compiled backend, datasets that
 *    resolve, profiles that load, an output directory that can be written */
static int check_sweep(run_ctx *c, int argc, char **argv, char *err, size_t errlen)
{
    const db_sweep *sw = &c->sw;
    db_run_meta_init(&c->meta, argc, argv, sw->seed, sw->label, time(NULL));
    /* one of the sweep key's choices; the rows and meta.json name the dtype auto resolved to */
    db_kv_dtype_parse(sw->kv_dtype, sw->backend[0], &c->kv_dtype);
    snprintf(c->meta.kv_dtype, sizeof c->meta.kv_dtype, "%s", db_dtype_name(c->kv_dtype));
    if (!(c->meta.sweep = db_sweep_json(sw))) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    find_models(&c->sw);
    int rc = db_sweep_points(sw, &c->keys, &c->nkeys, err, errlen);
    if (rc) return rc;
    for (int b = 1; b < sw->n_backend; b++)
        if (strcmp(sw->backend[b], sw->backend[0]) != 0)
            return db_fail(err, errlen, DB_EINPUT, "one backend per invocation for now (got %s and %s)",
                           sw->backend[0], sw->backend[b]);
    if (!db_backend_find(sw->backend[0]))
        return db_fail(err, errlen, DB_EINPUT, "backend '%s' is not compiled into this binary (see --version)",
                       sw->backend[0]);
    for (int d = 0; d < sw->n_dataset && !rc && !synth_only(c); d++) {
        char path[1024];
        if (!db_dataset_is_synthetic(sw->dataset[d], NULL))
            rc = db_dataset_resolve(sw->dataset[d], path, sizeof path, err, errlen);
    }
    for (int i = 0; i < sw->n_profile && !rc; i++)
        if (strcmp(sw->profile[i], "none") != 0) rc = db_profile_load(&c->profiles[i], sw->profile[i], err, errlen);
    if (rc) return rc;
    if (c->resume) snprintf(c->out_dir, sizeof c->out_dir, "%s", c->resume);
    else if (sw->out[0]) snprintf(c->out_dir, sizeof c->out_dir, "%s", sw->out);
    else db_results_default_dir(c->out_dir, sizeof c->out_dir, sw->label, time(NULL));
    return db_results_check_writable(c->out_dir, c->resume != NULL, err, errlen);
}

/* the checkpoint of target entry ti, or (synthetic) the config that stands for it */
static const char *target_path(const run_ctx *c, int ti)
{
    return c->sw.synthetic && c->sw.target_config[0] ? c->sw.target_config : c->sw.target[ti];
}

/* the points of target entry ti: keys[*i0, *i0 + *n) (the target is the outermost axis) */
static void target_keys(const run_ctx *c, int ti, int *i0, int *n)
{
    *i0 = 0;
    while (*i0 < c->nkeys && c->keys[*i0].target_i != ti) ++*i0;
    *n = 0;
    while (*i0 + *n < c->nkeys && c->keys[*i0 + *n].target_i == ti) ++*n;
}

/* target entry ti's config, and the drafters of its points checked against it */
static int target_configs(run_ctx *c, int ti, char *err, size_t errlen)
{
    int i0, n;
    target_keys(c, ti, &i0, &n);
    c->tpath = target_path(c, ti);
    int rc = db_model_config_load(&c->tcfg, c->tpath, err, errlen);
    return rc ? rc : db_drafter_set_plan(&c->ds, &c->sw, c->keys + i0, n, c->tcfg.n_layers, err, errlen);
}

/* 2. the model configs (the checkpoints', or the configs alone for synthetic weights) of every
 *    target, checked against the sweep before any weight loads; the targets of one sweep share
 *    a vocabulary (the prompts are tokenized once). Leaves target 0's config in c->tcfg. */
static int load_configs(run_ctx *c, char *err, size_t errlen)
{
    const db_sweep *sw = &c->sw;
    c->maxb = 1;
    c->cur_target = -1;
    for (int i = 0; i < c->nkeys; i++)
        if (key_drafts(&c->keys[i])) {
            c->need_drafter = 1;
            if (c->keys[i].block_size > c->maxb) c->maxb = c->keys[i].block_size;
        }
    c->syn = (db_synth_opts){.seed = sw->seed, .dtype = DB_BF16};
    if (sw->synthetic) db_dtype_parse(sw->dtype, &c->syn.dtype);
    int rc = DB_OK, vocab = 0;
    for (int ti = sw->n_target - 1; ti >= 0 && !rc; ti--) {
        rc = target_configs(c, ti, err, errlen);
        if (!rc && ti < sw->n_target - 1 && c->tcfg.vocab != vocab)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: vocabulary of %d tokens, %s has %d: the targets of one sweep "
                         "are one model (at several weight types)", c->tpath, c->tcfg.vocab, target_path(c, ti + 1), vocab);
        vocab = c->tcfg.vocab;
    }
    for (int i = 0; i < c->nkeys && !rc && sw->synthetic; i++) { /* the configs stand for the models */
        db_point_key *k = &c->keys[i];
        int ds = db_drafter_set_of(&c->ds, sw, k);
        db_model_name(c->tcfg.path, k->target, sizeof k->target);
        db_model_name(ds >= 0 ? c->ds.slot[ds].cfg.base.path : "", k->drafter, sizeof k->drafter);
    }
    for (int i = 0; i < sw->n_profile && !rc; i++)
        if (strcmp(sw->profile[i], "none") != 0 && c->profiles[i].n < c->maxb - 1)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: %d positions, but block size %d drafts %d",
                         sw->profile[i], c->profiles[i].n, c->maxb, c->maxb - 1);
    return rc;
}

/* 3. tokenizer, chat template and the prompt sets */
static int prepare_prompts(run_ctx *c, char *err, size_t errlen)
{
    const db_sweep *sw = &c->sw;
    int need_tok = 0, rc = DB_OK;
    for (int d = 0; d < sw->n_dataset && !synth_only(c); d++)
        need_tok |= !db_dataset_is_synthetic(sw->dataset[d], NULL);
    c->tmpl = DB_CHAT_NONE;
    if (need_tok) rc = db_cli_tokenizer_load(&c->tok, sw->target[0], err, errlen);
    if (!rc && need_tok) {
        if (strcmp(sw->chat_template, "auto") == 0)
            c->tmpl = db_chat_template_detect(&c->tok, c->tcfg.model_type);
        else
            rc = db_chat_template_parse(sw->chat_template, &c->tmpl, err, errlen);
    }
    for (int i = 0; i < c->nkeys && !rc; i++) { /* synthetic prompts have no template */
        db_point_key *k = &c->keys[i];
        snprintf(k->chat_template, sizeof k->chat_template, "%s",
                 db_chat_template_name(db_dataset_is_synthetic(k->dataset, NULL) ? DB_CHAT_NONE : c->tmpl));
    }
    return rc ? rc : load_sets(c, err, errlen);
}

/* 3b. --shard K/N (or the shard a resumed directory records): keep this shard's groups
 *     (cluster/shard.h); meta.json records the whole partition */
static int shard_keys(run_ctx *c, int *none, char *err, size_t errlen)
{
    db_shard rec = {0, 0};
    int rc = c->shard_arg ? db_shard_parse(c->shard_arg, &c->shard, err, errlen) : DB_OK;
    if (!rc && c->resume) rc = db_shard_recorded(c->resume, &rec, err, errlen);
    if (!rc && c->shard_arg && c->resume && (rec.index != c->shard.index || rec.count != c->shard.count))
        return db_fail(err, errlen, DB_EINPUT, "--resume %s: --shard %s differs from the recorded shard %d/%d",
                       c->resume, c->shard_arg, rec.index, rec.count);
    if (!c->shard_arg) c->shard = rec;
    if (rc || !c->shard.count) return rc;
    double *cost = malloc(sizeof *cost * (size_t)c->nkeys);
    char hash[65];
    if (!cost) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    for (int i = 0; i < c->nkeys && !rc; i++) {
        if (i == 0 || c->keys[i].target_i != c->keys[i - 1].target_i) /* its target's configs */
            rc = target_configs(c, c->keys[i].target_i, err, errlen);
        const prompt_set *ps = find_set(c, c->keys[i].dataset);
        int turns = 0, ds = db_drafter_set_of(&c->ds, &c->sw, &c->keys[i]);
        double len = 0;
        for (int j = 0; ps && j < ps->ds.n; j++) turns += ps->ds.samples[j].n_turns, len += ps->len[j];
        cost[i] = db_shard_point_cost(&c->tcfg, ds >= 0 ? &c->ds.slot[ds].cfg : NULL, c->syn.dtype, &c->sw,
                                      &c->keys[i], turns, ps && ps->ds.n ? len / ps->ds.n : 1);
    }
    if (!rc && c->sw.n_target > 1) rc = target_configs(c, 0, err, errlen); /* as load_configs left it */
    if (!rc) rc = db_sweep_hash_json(c->meta.sweep, hash, err, errlen);
    if (!rc) rc = db_shard_apply(&c->shard, hash, c->keys, &c->nkeys, cost, &c->meta.shard, err, errlen);
    free(cost);
    if (!rc && (*none = c->nkeys == 0))
        fprintf(stderr, "shard %d/%d: no points (the sweep has fewer groups than shards); nothing to do\n",
                c->shard.index, c->shard.count);
    return rc;
}

/* memory: refuse what the current target's points cannot fit before allocating anything */
static int check_memory(run_ctx *c, char *err, size_t errlen)
{
    int i0, nk;
    target_keys(c, c->cur_target, &i0, &nk);
    db_mem_need need = {db_weights_bytes(&c->tcfg, NULL, c->wdtype), 0, 0};
    for (int s = 0; s < c->ds.n; s++) /* each drafter's own weights */
        need.weights += db_weights_bytes(&c->tcfg, &c->ds.slot[s].cfg, c->wdtype) - db_weights_bytes(&c->tcfg, NULL, c->wdtype);
    for (int i = i0; i < i0 + nk; i++) {
        const db_point_key *k = &c->keys[i];
        prompt_set *ps = find_set(c, k->dataset);
        int maxp = 1, turns = 1;
        for (int j = 0; ps && j < ps->ds.n; j++) {
            maxp = ps->len[j] > maxp ? ps->len[j] : maxp;
            turns = ps->ds.samples[j].n_turns > turns ? ps->ds.samples[j].n_turns : turns;
        }
        /* a later turn carries the earlier turns and answers (an estimate: its text is not
         * known yet) */
        maxp = maxp * turns + k->max_new_tokens * (turns - 1);
        db_engine_shape es = {k->concurrency, key_drafts(k) ? k->block_size : 1, maxp, k->max_new_tokens,
                              k->temperature > 0, c->kv_dtype};
        double kv, act;
        int ds = db_drafter_set_of(&c->ds, &c->sw, k);
        db_engine_bytes(&c->tcfg, ds >= 0 ? &c->ds.slot[ds].cfg : NULL, &es, &kv, &act);
        if (kv + act > need.kv + need.act) need.kv = kv, need.act = act;
    }
    char what[96];
    snprintf(what, sizeof what, "this sweep (%s)", c->sw.synthetic ? "synthetic weights" : "its checkpoints");
    return db_mem_check(&need, db_mem_available(c->s.be), what, err, errlen);
}

/* the main weight dtype of a checkpoint (safetensors.h db_tensors_main_dtype); synthetic: the chosen */
static int main_dtype(const run_ctx *c, const char *path, db_dtype *dt, char *err, size_t errlen)
{
    *dt = c->syn.dtype;
    if (c->sw.synthetic) return DB_OK;
    db_tensor_set st;
    int rc = db_tensors_open_dir(&st, path, err, errlen);
    if (rc) return rc;
    *dt = db_tensors_main_dtype(&st);
    db_tensors_close(&st);
    return DB_OK;
}

/* 4. the backend, and the roofline's device figures, measured before any model takes memory
 *    (with the first target's weight dtype) */
static int open_backend(run_ctx *c, char *err, size_t errlen)
{
    const db_sweep *sw = &c->sw;
    c->so = (db_session_opts){sw->backend[0], target_path(c, 0), NULL, sw->threads,
                              sw->deterministic, sw->synthetic ? &c->syn : NULL};
    int rc = db_session_open_backend(&c->s, &c->so, err, errlen);
    if (rc) return rc;
    c->session_open = 1;
    if (c->kv_dtype == DB_F16 && (!c->s.be->ops->kv_store_f16 || !c->s.be->ops->attention_f16))
        return db_fail(err, errlen, DB_EINPUT, "backend %s has no f16 KV cache (--kv-dtype f16); use --kv-dtype f32",
                       c->s.be->ops->name);
    if (!sw->predict) return DB_OK;
    db_dtype dt;
    if ((rc = main_dtype(c, target_path(c, 0), &dt, err, errlen))) return rc;
    db_model_config t0; /* the matmul rates on the first target's matrix shapes */
    if ((rc = db_model_config_load(&t0, target_path(c, 0), err, errlen))) return rc;
    if ((rc = db_hw_figures(c->s.be, dt, sw->bandwidth_gbs, sw->gflops, &t0, &c->hw, err, errlen)))
        return rc;
    fprintf(stderr, "roofline: %.1f GB/s (%s), %.1f GFLOP/s (%s)\n", c->hw.bw / 1e9, c->hw.bw_source,
            c->hw.flops / 1e9, c->hw.flops_source);
    return DB_OK;
}

/* 5. before the points of target entry ti: its config and drafters, the memory check, the
 *    weights, and whether the drafters run every variant and block size of its points */
static int target_begin(run_ctx *c, int ti, char *err, size_t errlen)
{
    int i0, n, rc = target_configs(c, ti, err, errlen);
    c->cur_target = ti;
    target_keys(c, ti, &i0, &n);
    if (!rc) rc = main_dtype(c, c->tpath, &c->wdtype, err, errlen);
    if (!rc) rc = check_memory(c, err, errlen);
    if (rc) return rc;
    c->so.target = c->tpath;
    if ((rc = db_session_load_models(&c->s, &c->so, err, errlen))) return rc; /* closed at the end */
    return db_drafter_set_load(&c->ds, &c->sw, c->keys + i0, n, c->s.be, &c->s.target,
                               c->sw.synthetic ? &c->syn : NULL, err, errlen);
}

/* after them: the drafters and the target leave the device */
static void target_end(run_ctx *c)
{
    db_drafter_set_free(&c->ds);
    db_target_free(&c->s.target);
}

/* 6. meta.json (every checkpoint of the sweep, hashed, with its main dtype), the results
 *    directory and the stdout table */
static int open_results(run_ctx *c, char *err, size_t errlen)
{
    const db_sweep *sw = &c->sw;
    db_run_meta_set_backend(&c->meta, sw->backend[0], c->s.be->device_name, c->s.be->simd, c->s.be->threads);
    int rc = DB_OK;
    for (int ti = 0; ti < sw->n_target && !rc; ti++) {
        db_dtype dt;
        const char *tp = sw->synthetic ? c->tcfg.path : target_path(c, ti);
        rc = main_dtype(c, target_path(c, ti), &dt, err, errlen);
        if (!rc) rc = db_run_meta_add_model(&c->meta, tp, db_dtype_name(dt), err, errlen);
    }
    for (int i = 0; i < c->nkeys && !rc; i++) { /* the drafters, by the slots of the last plan */
        int s = db_drafter_set_of(&c->ds, sw, &c->keys[i]);
        if (s < 0) continue;
        db_dtype dt;
        const char *dp = sw->synthetic ? c->ds.slot[s].cfg.base.path : c->ds.slot[s].path;
        rc = main_dtype(c, c->ds.slot[s].path, &dt, err, errlen);
        if (!rc) rc = db_run_meta_add_model(&c->meta, dp, db_dtype_name(dt), err, errlen);
    }
    if (!rc) c->res_open = (rc = db_results_open(&c->res, c->out_dir, c->resume != NULL, err, errlen)) == DB_OK;
    if (!rc) rc = db_results_write_meta(&c->res, &c->meta, err, errlen);
    if (!rc) rc = db_out_begin(&c->out, stdout, sw->output, sw->n_target > 1 || sw->n_drafter > 1, err, errlen);
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

/* a measured point: summary against its baseline, rows appended, the table line, and a warning
 * when its numbers are not to be trusted */
static int commit_point(run_ctx *c, db_point_raw *raw, char *err, size_t errlen)
{
    const db_point_key *k = &raw->key;
    db_point_raw loaded = {0};
    const db_point_raw *base = find_baseline(c, &c->res, k, &loaded, err, errlen);
    db_point_summary sum;
    int rc = DB_OK;
    if (db_point_summarize(raw, base, c->sw.seed, &sum))
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory summarizing %s %s", k->dataset, k->variant);
    if (!rc) rc = db_results_append(&c->res, &c->meta, raw, &sum, err, errlen);
    if (!rc) rc = db_out_point(&c->out, &c->meta, raw, &sum, err, errlen);
    if (!rc && (!sum.stable || raw->major_faults > 0))
        fprintf(stderr, "warning: %s %s B%d c%d T%g:%s%s%s\n", k->dataset, k->variant, k->block_size, k->concurrency,
                k->temperature,
                sum.throughput_stddev > 0.10 * sum.throughput_tok_s ? " throughput varies by more than 10% across repetitions;" : "",
                sum.speedup > sum.tau ? " speedup above tau (no cycle costs less than a decode step): timing noise;" : "",
                raw->major_faults > 0 ? " major page faults in the timed passes (weights read from disk)" : "");
    db_point_raw_free(&loaded);
    return rc;
}

/* the load around a group, in meta.json for each of its points; a warning when other processes
 * held more than half a core */
static int record_load(run_ctx *c, const db_point_raw *raw, int P, const db_load_sample *a,
                       const db_load_sample *b, char *err, size_t errlen)
{
    double other = db_load_other_cores(a, b), steal = db_load_steal(a, b);
    if (other > 0.5)
        fprintf(stderr, "warning: other processes held %.1f cores while %s c%d ran; its timings include their load\n",
                other, raw[0].key.dataset, raw[0].key.concurrency);
    if (!c->meta.points && !(c->meta.points = cJSON_CreateArray())) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    for (int j = 0; j < P; j++) {
        char id[DB_POINT_ID_MAX];
        db_point_id(&raw[j].key, id, sizeof id);
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(c->meta.points, o)) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
        cJSON_AddStringToObject(o, "point_id", id);
        cJSON_AddItemToObject(o, "start", db_load_json(a));
        cJSON_AddItemToObject(o, "end", db_load_json(b));
        cJSON_AddNumberToObject(o, "other_cores", isfinite(other) ? other : -1);
        cJSON_AddNumberToObject(o, "steal_cores", isfinite(steal) ? steal : -1);
        cJSON_AddNumberToObject(o, "major_faults", (double)raw[j].major_faults);
    }
    return DB_OK;
}

/* the points keys[i0, i1) share target, backend, dataset, temperature and concurrency: a group */
static int group_end(const run_ctx *c, int i0) { return db_group_end(c->keys, c->nkeys, i0); }

/* One group, the unit of work: each point's warm-up, then R rounds; round r runs every point
 * once, starting at point r mod P (rotated), so a change of machine load falls on `ar` and
 * the variants alike. Nothing is written before every round ran: a stopped or killed group
 * leaves no point of it. */
static int measure_group(run_ctx *c, int i0, int i1, char *err, size_t errlen)
{
    int P = i1 - i0, R = c->sw.repetitions, rc = DB_OK, began = 0;
    db_point_raw *raw = &c->done[c->n_done];
    db_load_sample a, b;
    db_load_sample_now(&a);
    for (; began < P && !rc; began++) rc = point_begin(c, &c->keys[i0 + began], &raw[began], err, errlen);
    for (int r = 0; r < R && !rc; r++)
        for (int j = 0; j < P && !rc; j++)
            rc = stop_signal ? stopped(c, err, errlen) : point_rep(c, &raw[(j + r) % P], r, err, errlen);
    db_load_sample_now(&b);
    if (rc) {
        for (int j = 0; j < began; j++) db_point_raw_free(&raw[j]); /* not counted in n_done */
        return rc;
    }
    c->n_done += P;
    rc = record_load(c, raw, P, &a, &b, err, errlen);
    for (int j = 0; j < P && !rc; j++) rc = commit_point(c, &raw[j], err, errlen);
    return rc ? rc : db_results_write_meta(&c->res, &c->meta, err, errlen);
}

/* 7. every group with a point not done yet (--resume keeps complete groups and runs a partly
 *    written one again), with progress on stderr; each target's weights are on the device
 *    while its groups run (target_begin / target_end), one target at a time */
static int measure_all(run_ctx *c, char *err, size_t errlen)
{
    c->done = calloc((size_t)c->nkeys, sizeof *c->done);
    if (!c->done) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    int todo = 0, rc = DB_OK;
    for (int i0 = 0, i1; i0 < c->nkeys && !rc; i0 = i1) {
        i1 = group_end(c, i0);
        int done = 0;
        for (int i = i0; i < i1; i++) done += db_results_is_done(&c->res, &c->keys[i]);
        if (done > 0 && done < i1 - i0) /* its points must come from the same rounds */
            rc = db_results_forget(&c->res, c->keys + i0, i1 - i0, err, errlen);
        todo += done < i1 - i0 ? i1 - i0 : 0;
    }
    db_progress prog;
    db_progress_begin(&prog, stderr, todo);
    if (c->resume && todo < c->nkeys) {
        db_progress_clear(&prog);
        fprintf(stderr, "resume: %d of %d points already complete in %s\n", c->nkeys - todo, c->nkeys, c->out_dir);
    }
    catch_signals();
    c->t_origin = -1;
    for (int i0 = 0, i1; i0 < c->nkeys && !rc; i0 = i1) {
        i1 = group_end(c, i0);
        if (db_results_is_done(&c->res, &c->keys[i0])) continue;
        const db_point_key *k = &c->keys[i0];
        if (k->target_i != c->cur_target) {
            if (c->cur_target >= 0) target_end(c);
            if ((rc = target_begin(c, k->target_i, err, errlen))) break;
        }
        char what[300];
        snprintf(what, sizeof what, "%s%s%s c%d T%g: %d points x %d rounds", c->sw.n_target > 1 ? k->target : "",
                 c->sw.n_target > 1 ? " " : "", k->dataset, k->concurrency, k->temperature, i1 - i0, c->sw.repetitions);
        db_progress_start(&prog, what);
        double tp = db_now();
        rc = measure_group(c, i0, i1, err, errlen);
        db_progress_clear(&prog);
        for (int i = i0; i < i1 && !rc; i++) db_progress_done(&prog, what, (db_now() - tp) / (i1 - i0));
    }
    db_progress_end(&prog);
    return rc;
}

static void run_free(run_ctx *c)
{
    for (int i = 0; i < c->n_done; i++) db_point_raw_free(&c->done[i]);
    free(c->done);
    free(c->keys);
    if (c->res_open) db_results_close(&c->res);
    db_run_meta_free(&c->meta);
    free_sets(c);
    db_tokenizer_free(&c->tok);
    db_drafter_set_free(&c->ds);
    if (c->session_open) db_session_close(&c->s);
}

/* --resume with every point of the sweep already complete: say so and write nothing */
static int nothing_left(run_ctx *c, int *none, char *err, size_t errlen)
{
    int done = 0, rc = c->resume ? db_results_count_done(c->out_dir, c->keys, c->nkeys, &done, err, errlen) : DB_OK;
    *none = !rc && c->resume && done == c->nkeys;
    if (*none) fprintf(stderr, "resume: all %d points of %s are complete; nothing to do\n", c->nkeys, c->out_dir);
    return rc;
}

int db_cmd_run(int argc, char **argv, char *err, size_t errlen)
{
    run_ctx *c = calloc(1, sizeof *c);
    if (!c) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    c->argv0 = argv[0];
    int stop = 0, rc = parse_args(c, argc, argv, &stop, err, errlen);
    if (!rc && !stop) rc = check_sweep(c, argc, argv, err, errlen);
    if (!rc && !stop) rc = load_configs(c, err, errlen);
    if (!rc && !stop) rc = prepare_prompts(c, err, errlen); /* completes the keys */
    if (!rc && !stop) rc = shard_keys(c, &stop, err, errlen);
    if (!rc && !stop) rc = nothing_left(c, &stop, err, errlen);
    if (!rc && !stop) rc = open_backend(c, err, errlen);
    if (!rc && !stop) rc = open_results(c, err, errlen);
    if (!rc && !stop) rc = measure_all(c, err, errlen);
    if (!rc && !stop) rc = db_out_end(&c->out, err, errlen);
    if (!rc && !stop) fprintf(stderr, "results in %s\n", c->out_dir);
    run_free(c);
    free(c);
    return rc;
}
