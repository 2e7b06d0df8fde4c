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
#include "cli/cli.h"
#include "engine/engine.h"
#include "text/prompt.h"
#include "bench/progress.h"
#include "report/report.h"
#include "report/report_out.h"
#include "report/results_dir.h"
#include "bench/run_meta.h"
#include "bench/profile.h"
#include "engine/session.h"
#include "bench/sweep.h"
#include "model/synthetic.h"
#include "text/tokenizer.h"
#include "base/paths.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    char out_dir[1024];
    db_session s;
    db_tokenizer tok;
    db_chat_template tmpl;
    prompt_set *sets;
    int n_sets;
    db_point_raw *done;   /* completed points of this invocation (baselines for speedup) */
    int n_done;
    /* capacity planning */
    db_model_config tcfg;     /* the configs, read before any weight loads */
    db_drafter_config dcfg;
    int need_drafter;
    db_dtype wdtype;          /* storage dtype of the weights (synthetic: the chosen one) */
    db_profile profiles[DB_SWEEP_MAX]; /* acceptance profiles, in sweep order */
    db_hw hw;                 /* device figures for the roofline (predict) */
} run_ctx;

static const char *const bool_keys[] = {"no-baseline", "no_baseline", "thinking", "deterministic",
                                        "synthetic", "predict"};

static void usage(void)
{
    printf("usage: dflash-bench run [options]\n\n"
           "Benchmark sweep: every combination of the list-valued axes is one point; results go\n"
           "to --out DIR as CSV (summary, acceptance, histogram, requests) + meta.json, and a\n"
           "table to stdout. Without options it runs the default sweep (configs/default.ini).\n\n"
           "axes (comma lists; concurrency and block size also ranges a-b, a-b+s, a-b*m):\n"
           "  --backend LIST       compute backends (default cpu)\n"
           "  --dataset LIST       math, math-hard, code, code-basic, chat, or JSONL/text paths\n"
           "  -c, --concurrency LIST  requests in flight (default 1,8,32)\n"
           "  -B, --block-size LIST   draft block sizes (default 8,16)\n"
           "  --variant LIST       ar, dflash, selector-off, conv-off, dflash2 (default: all)\n"
           "  -T, --temperature LIST  0 = greedy (default 0)\n"
           "settings:\n"
           "  --top-p X, --top-k N, -n/--max-new-tokens N (64), --max-samples N (8), --seed N,\n"
           "  -r/--repetitions N (1), --warmup N (1), --target DIR, --drafter DIR,\n"
           "  --chat-template auto|none|chatml|llama3, --thinking, --no-baseline, --deterministic,\n"
           "  --threads N, --config FILE.ini, --out DIR, --label S, --resume DIR,\n"
           "  -o/--output md|csv|json (stdout format)\n"
           "capacity planning (rows say weights=synthetic / acceptance_source=replay:<file>):\n"
           "  --synthetic          random weights of the configs' shapes, made on the backend\n"
           "  --target-config F, --drafter-config F   config.json files (with --synthetic)\n"
           "  --dtype bf16|f16|f32 synthetic weight dtype (bf16)\n"
           "  --prompt-tokens N    synthetic prompts: N random ids (dataset synthetic-N; 128)\n"
           "  --acceptance-profile LIST  replay these per-position acceptance rates (an axis;\n"
           "                       FILE.csv or FILE.csv#POINT; configs/profiles/)\n"
           "  --predict            roofline prediction per row (predicted_tok_s), measuring the\n"
           "                       device unless --bandwidth-gbs X and --gflops X are given\n");
}

/* flags -> sweep keys; --config is applied first so later flags override it */
static int parse_args(run_ctx *c, int argc, char **argv, int *help, char *err, size_t errlen)
{
    db_sweep_init(&c->sw);
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            int rc = db_sweep_load_ini(&c->sw, argv[i + 1], err, errlen);
            if (rc) return rc;
        }
    static const struct {
        char alias;
        const char *key;
    } aliases[] = {{'c', "concurrency"}, {'B', "block_size"}, {'T', "temperature"},
                   {'n', "max_new_tokens"}, {'r', "repetitions"}, {'o', "output"}};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *key = NULL, *val = NULL;
        char keybuf[64];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            *help = 1;
            return DB_OK;
        }
        if (a[0] == '-' && a[1] && !a[2]) {
            for (size_t j = 0; j < sizeof aliases / sizeof *aliases; j++)
                if (aliases[j].alias == a[1]) key = aliases[j].key;
            if (!key) return db_fail(err, errlen, DB_EINPUT, "unknown option '%s' (see run --help)", a);
        } else if (a[0] == '-' && a[1] == '-') {
            const char *eq = strchr(a, '=');
            size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            if (n >= sizeof keybuf) return db_fail(err, errlen, DB_EINPUT, "unknown option '%s'", a);
            memcpy(keybuf, a + 2, n);
            keybuf[n] = 0;
            key = keybuf;
            if (eq) val = eq + 1;
        } else {
            return db_fail(err, errlen, DB_EINPUT, "unexpected argument '%s'", a);
        }
        int is_bool = 0;
        for (size_t j = 0; j < sizeof bool_keys / sizeof *bool_keys; j++) is_bool |= strcmp(key, bool_keys[j]) == 0;
        if (!val && !is_bool) {
            if (i + 1 >= argc) return db_fail(err, errlen, DB_EINPUT, "%s needs a value", a);
            val = argv[++i];
        }
        if (strcmp(key, "config") == 0) continue; /* applied above */
        if (strcmp(key, "resume") == 0) {
            c->resume = val;
            continue;
        }
        int rc = db_sweep_set(&c->sw, key, val, err, errlen);
        if (rc) return rc;
    }
    return db_sweep_validate(&c->sw, err, errlen);
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
    struct {
        char *p;
        size_t n;
    } f[] = {{sw->target, sizeof sw->target}, {sw->drafter, sizeof sw->drafter},
             {sw->target_config, sizeof sw->target_config}, {sw->drafter_config, sizeof sw->drafter_config}};
    char buf[1024];
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].p[0] && db_data_find(f[i].p, buf, sizeof buf) == buf && strlen(buf) < f[i].n)
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
    int maxp = 1;
    for (int i = 0; i < n; i++) maxp = reqs[i].n_prompt > maxp ? reqs[i].n_prompt : maxp;
    db_engine *e;
    int rc = db_engine_create(&e, &c->s.target, c->s.has_drafter ? &c->s.drafter : NULL, p, conc,
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

static int measure_point(run_ctx *c, const db_point_key *k, db_point_raw *raw, char *err, size_t errlen)
{
    prompt_set *ps = find_set(c, k->dataset);
    db_variant v;
    if (!ps || db_variant_parse(k->variant, &v) != 0)
        return db_fail(err, errlen, DB_EINPUT, "point %s/%s: unknown dataset or variant", k->dataset, k->variant);
    db_gen_params p = {.variant = v, .block_size = k->block_size, .temperature = k->temperature,
                       .top_p = k->top_p, .top_k = k->top_k, .max_new_tokens = k->max_new_tokens,
                       .seed = c->sw.seed, .ignore_eos = c->sw.synthetic};
    for (int i = 0; i < c->sw.n_profile; i++) /* replayed acceptance: "replay:<profile>" */
        if (!strncmp(k->acceptance_source, "replay:", 7) && !strcmp(k->acceptance_source + 7, c->sw.profile[i])) {
            p.replay_rates = c->profiles[i].rate;
            p.replay_n = c->profiles[i].n;
        }
    int per_pass = 0;
    for (int j = 0; j < ps->ds.n; j++) per_pass += ps->ds.samples[j].n_turns;
    memset(raw, 0, sizeof *raw);
    raw->key = *k;
    raw->n_prompts = per_pass;
    raw->repetitions = c->sw.repetitions;
    raw->wall_s = calloc((size_t)c->sw.repetitions, sizeof(double));
    raw->reqs = calloc((size_t)c->sw.repetitions * per_pass, sizeof(db_req_stats));
    if (!raw->wall_s || !raw->reqs) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    c->s.be->bytes_peak = c->s.be->bytes_in_use;
    int rc = DB_OK;
    /* warm-up: untimed passes over one batch of first turns */
    for (int w = 0; w < c->sw.warmup && !rc; w++) {
        int n = ps->ds.n < k->concurrency ? ps->ds.n : k->concurrency;
        db_request *reqs = calloc((size_t)n, sizeof *reqs);
        int *out = malloc(sizeof(int) * (size_t)n * k->max_new_tokens);
        for (int j = 0; j < n; j++)
            reqs[j] = (db_request){.prompt = ps->ids[j], .n_prompt = ps->len[j], .out = out + (size_t)j * k->max_new_tokens};
        double t0 = -1;
        rc = run_requests(c, &p, k->concurrency, reqs, n, &t0, NULL, err, errlen);
        free(reqs);
        free(out);
    }
    for (int r = 0; r < c->sw.repetitions && !rc; r++) {
        int got;
        rc = timed_pass(c, ps, &p, k->concurrency, raw->reqs + (size_t)r * per_pass, &got, &raw->wall_s[r], err, errlen);
        if (!rc && got != per_pass) rc = db_fail(err, errlen, DB_ERUNTIME, "internal: %d of %d requests ran", got, per_pass);
    }
    raw->peak_mem_mib = (double)c->s.be->bytes_peak / DB_MIB;
    if (!rc && c->sw.predict)
        raw->predicted_tok_s = db_roofline_point(&c->tcfg, c->need_drafter ? &c->dcfg : NULL, c->wdtype,
                                                 &c->hw, raw);
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

int db_cmd_run(int argc, char **argv, char *err, size_t errlen)
{
    run_ctx c;
    memset(&c, 0, sizeof c);
    int help = 0, rc = parse_args(&c, argc, argv, &help, err, errlen);
    if (rc) return rc;
    if (help) {
        usage();
        return DB_OK;
    }
    find_models(&c.sw);
    db_point_key *keys = NULL;
    int nkeys = 0;
    if ((rc = db_sweep_points(&c.sw, &keys, &nkeys, err, errlen))) return rc;
    for (int b = 1; b < c.sw.n_backend; b++)
        if (strcmp(c.sw.backend[b], c.sw.backend[0]) != 0) {
            free(keys);
            return db_fail(err, errlen, DB_EINPUT, "one backend per invocation for now (got %s and %s)", c.sw.backend[0], c.sw.backend[b]);
        }
    int known = 0;
    for (int i = 0; db_backends[i]; i++) known |= strcmp(db_backends[i]->name, c.sw.backend[0]) == 0;
    if (!known) {
        free(keys);
        return db_fail(err, errlen, DB_EINPUT, "backend '%s' is not compiled into this binary (see --version)", c.sw.backend[0]);
    }
    for (int d = 0; d < c.sw.n_dataset && !rc && !(c.sw.synthetic && !c.sw.dataset_set); d++) {
        char path[1024];
        if (!db_dataset_is_synthetic(c.sw.dataset[d], NULL))
            rc = db_dataset_resolve(c.sw.dataset[d], path, sizeof path, err, errlen);
    }
    for (int i = 0; i < c.sw.n_profile && !rc; i++)
        if (strcmp(c.sw.profile[i], "none") != 0) rc = db_profile_load(&c.profiles[i], c.sw.profile[i], err, errlen);
    if (!rc) {
        if (c.resume) snprintf(c.out_dir, sizeof c.out_dir, "%s", c.resume);
        else if (c.sw.out[0]) snprintf(c.out_dir, sizeof c.out_dir, "%s", c.sw.out);
        else db_results_default_dir(c.out_dir, sizeof c.out_dir, c.sw.label, time(NULL));
        rc = db_results_check_writable(c.out_dir, c.resume != NULL, err, errlen);
    }
    int need_drafter = 0;
    for (int i = 0; i < nkeys; i++) need_drafter |= strcmp(keys[i].variant, "ar") != 0;
    c.need_drafter = need_drafter;
    /* what the models are: checkpoint directories, or (synthetic) their configs alone */
    const char *tpath = c.sw.synthetic && c.sw.target_config[0] ? c.sw.target_config : c.sw.target;
    const char *dpath = c.sw.synthetic && c.sw.drafter_config[0] ? c.sw.drafter_config : c.sw.drafter;
    db_synth_opts syn = {.seed = c.sw.seed, .dtype = DB_BF16};
    if (!rc && c.sw.synthetic) db_dtype_parse(c.sw.dtype, &syn.dtype);
    /* configs first: prompts, memory and profiles are checked against them before any weight
     * is loaded */
    if (!rc) rc = db_model_config_load(&c.tcfg, tpath, err, errlen);
    if (!rc && need_drafter) rc = db_drafter_config_load(&c.dcfg, dpath, c.tcfg.n_layers, err, errlen);
    int maxb = 1;
    for (int i = 0; i < nkeys; i++)
        if (strcmp(keys[i].variant, "ar") != 0 && keys[i].block_size > maxb) maxb = keys[i].block_size;
    for (int i = 0; i < c.sw.n_profile && !rc; i++)
        if (strcmp(c.sw.profile[i], "none") != 0 && c.profiles[i].n < maxb - 1)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: %d positions, but block size %d drafts %d",
                         c.sw.profile[i], c.profiles[i].n, maxb, maxb - 1);
    int need_tok = 0;
    for (int d = 0; d < c.sw.n_dataset && !(c.sw.synthetic && !c.sw.dataset_set); d++)
        need_tok |= !db_dataset_is_synthetic(c.sw.dataset[d], NULL);
    if (!rc && need_tok) rc = db_tokenizer_load(&c.tok, c.sw.target, err, errlen);
    c.tmpl = DB_CHAT_NONE;
    if (!rc && need_tok) {
        if (strcmp(c.sw.chat_template, "auto") == 0)
            c.tmpl = db_chat_template_detect(&c.tok, c.tcfg.model_type);
        else
            rc = db_chat_template_parse(c.sw.chat_template, &c.tmpl, err, errlen);
    }
    for (int i = 0; i < nkeys && !rc; i++) /* synthetic prompts have no template */
        snprintf(keys[i].chat_template, sizeof keys[i].chat_template, "%s",
                 db_chat_template_name(db_dataset_is_synthetic(keys[i].dataset, NULL) ? DB_CHAT_NONE : c.tmpl));
    if (!rc) rc = load_sets(&c, err, errlen);
    db_session_opts so = {c.sw.backend[0], tpath, need_drafter ? dpath : NULL, c.sw.threads,
                          c.sw.deterministic, c.sw.synthetic ? &syn : NULL};
    if (!rc) rc = db_session_open_backend(&c.s, &so, err, errlen);
    int session_open = rc == DB_OK;
    /* the storage dtype: chosen (synthetic) or the checkpoint's (its embedding's) */
    c.wdtype = syn.dtype;
    if (!rc && !c.sw.synthetic) {
        db_st_set st;
        if ((rc = db_st_open_dir(&st, tpath, err, errlen)) == DB_OK) {
            const db_st_tensor *e = db_st_find(&st, "model.embed_tokens.weight");
            if (e) c.wdtype = e->dtype;
            db_st_close(&st);
        }
    }
    /* memory: refuse what cannot fit before allocating anything */
    if (!rc) {
        db_mem_need need = {db_weights_bytes(&c.tcfg, need_drafter ? &c.dcfg : NULL, c.wdtype), 0, 0};
        for (int i = 0; i < nkeys; i++) {
            prompt_set *ps = find_set(&c, keys[i].dataset);
            int maxp = 1, turns = 1;
            for (int j = 0; ps && j < ps->ds.n; j++) {
                maxp = ps->len[j] > maxp ? ps->len[j] : maxp;
                turns = ps->ds.samples[j].n_turns > turns ? ps->ds.samples[j].n_turns : turns;
            }
            /* a later turn carries the earlier turns and answers (an estimate: its text is not
             * known yet) */
            maxp = maxp * turns + keys[i].max_new_tokens * (turns - 1);
            db_engine_shape es = {keys[i].concurrency, strcmp(keys[i].variant, "ar") ? keys[i].block_size : 1,
                                  maxp, keys[i].max_new_tokens, keys[i].temperature > 0};
            double kv, act;
            db_engine_bytes(&c.tcfg, need_drafter ? &c.dcfg : NULL, &es, &kv, &act);
            if (kv + act > need.kv + need.act) need.kv = kv, need.act = act;
        }
        char what[96];
        snprintf(what, sizeof what, "this sweep (%s)", c.sw.synthetic ? "synthetic weights" : "its checkpoints");
        rc = db_mem_check(&need, db_mem_available(c.s.be), what, err, errlen);
    }
    /* device figures for the roofline, measured before the models take the memory */
    if (!rc && c.sw.predict) {
        if (!(c.sw.bandwidth_gbs > 0 && c.sw.gflops > 0)) rc = db_hw_measure(c.s.be, c.wdtype, 0, &c.hw, err, errlen);
        if (!rc && c.sw.bandwidth_gbs > 0) {
            c.hw.bw = c.sw.bandwidth_gbs * 1e9;
            snprintf(c.hw.bw_source, sizeof c.hw.bw_source, "given: --bandwidth-gbs %g", c.sw.bandwidth_gbs);
        }
        if (!rc && c.sw.gflops > 0) {
            c.hw.flops = c.sw.gflops * 1e9;
            snprintf(c.hw.flops_source, sizeof c.hw.flops_source, "given: --gflops %g", c.sw.gflops);
        }
        if (!rc)
            fprintf(stderr, "roofline: %.1f GB/s (%s), %.1f GFLOP/s (%s)\n", c.hw.bw / 1e9, c.hw.bw_source,
                    c.hw.flops / 1e9, c.hw.flops_source);
    }
    if (!rc) {
        rc = db_session_load_models(&c.s, &so, err, errlen);
        if (rc) session_open = 0; /* closed by the failed load */
    }
    if (!rc) {
        db_variant v;
        for (int i = 0; i < nkeys && !rc; i++)
            if (db_variant_parse(keys[i].variant, &v) == 0 && v != DB_VAR_AR)
                rc = db_variant_check(v, &c.s.drafter, err, errlen);
        if (!rc && need_drafter && maxb > c.s.drafter.cfg.block_size)
            rc = db_fail(err, errlen, DB_EINPUT, "block size %d above the drafter's block_size %d (%s)", maxb,
                         c.s.drafter.cfg.block_size, c.s.drafter.cfg.base.path);
    }
    db_run_meta meta;
    db_run_meta_init(&meta, argc, argv, c.sw.seed, c.sw.label, time(NULL));
    db_results res = {0};
    int res_open = 0;
    if (!rc) {
        db_run_meta_set_backend(&meta, c.sw.backend[0], c.s.be->device_name, c.s.be->simd, c.s.be->threads);
        /* synthetic: the config files stand for the models (name and sha256 are theirs) */
        rc = db_run_meta_set_models(&meta, c.sw.synthetic ? c.tcfg.path : tpath,
                                    need_drafter ? (c.sw.synthetic ? c.dcfg.base.path : dpath) : NULL,
                                    db_dtype_name(c.s.target.embed.dtype), err, errlen);
    }
    if (!rc) res_open = (rc = db_results_open(&res, c.out_dir, c.resume != NULL, err, errlen)) == DB_OK;
    if (!rc) rc = db_results_write_meta(&res, &meta, err, errlen);
    db_out out = {0};
    if (!rc) rc = db_out_begin(&out, stdout, c.sw.output, err, errlen);
    c.done = calloc((size_t)nkeys, sizeof *c.done);
    int todo = 0;
    for (int i = 0; i < nkeys; i++) todo += !db_results_is_done(&res, &keys[i]);
    db_progress prog;
    db_progress_begin(&prog, stderr, todo);
    if (!rc && c.resume && todo < nkeys) {
        db_progress_clear(&prog);
        fprintf(stderr, "resume: %d of %d points already complete in %s\n", nkeys - todo, nkeys, c.out_dir);
    }
    for (int i = 0; i < nkeys && !rc; i++) {
        if (db_results_is_done(&res, &keys[i])) continue;
        char what[160];
        snprintf(what, sizeof what, "%s %s B%d c%d T%g", keys[i].dataset, keys[i].variant, keys[i].block_size,
                 keys[i].concurrency, keys[i].temperature);
        db_progress_start(&prog, what);
        double tp = db_now();
        db_point_raw *raw = &c.done[c.n_done];
        rc = measure_point(&c, &keys[i], raw, err, errlen);
        if (rc) break;
        c.n_done++;
        db_point_raw loaded = {0};
        const db_point_raw *base = find_baseline(&c, &res, &keys[i], &loaded, err, errlen);
        db_point_summary sum;
        rc = db_point_summarize(raw, base, c.sw.seed, &sum);
        if (rc) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory summarizing %s", what);
        if (!rc) rc = db_results_append(&res, &meta, raw, &sum, err, errlen);
        db_progress_clear(&prog);
        if (!rc) rc = db_out_point(&out, &meta, raw, &sum, err, errlen);
        db_point_raw_free(&loaded);
        db_progress_done(&prog, what, db_now() - tp);
    }
    db_progress_end(&prog);
    if (!rc) rc = db_out_end(&out, err, errlen);
    if (!rc) fprintf(stderr, "results in %s\n", c.out_dir);
    for (int i = 0; i < c.n_done; i++) db_point_raw_free(&c.done[i]);
    free(c.done);
    free(keys);
    if (res_open) db_results_close(&res);
    db_run_meta_free(&meta);
    free_sets(&c);
    db_tokenizer_free(&c.tok);
    if (session_open) db_session_close(&c.s);
    return rc;
}
