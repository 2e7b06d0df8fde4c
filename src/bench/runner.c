/* runner.c — the measurement procedure and a sweep's runner (runner.h). */
#include "bench/runner.h"
#include "bench/device_preset.h"

#include "base/paths.h"
#include "base/util.h"
#include "bench/machine_load.h"
#include "model/safetensors.h"
#include "result/timing.h"
#include "text/prompt.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int db_runner_requests(int D, int c, int waves)
{
    if (D < 1) return 0;
    if (waves < 1) return D;
    long want = (long)waves * c > D ? (long)waves * c : D;
    long n = (want + D - 1) / D * D;
    return n > INT_MAX / 2 ? INT_MAX / 2 / D * D : (int)n;
}

int db_runner_closed(double rate) { return !(rate > 0 && isfinite(rate)); }

void db_runner_arrivals(double rate, int n, uint64_t seed, double *t)
{
    db_rng g;
    db_rng_seed(&g, seed);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        sum += -log1p(-db_rng_uniform(&g)); /* an exponential gap of mean 1 */
        t[i] = sum;
    }
    for (int i = 0; i < n && sum > 0; i++) t[i] *= (double)n / rate / sum;
}

int db_runner_rate_requests(int D, int c, double rate, double min_time)
{
    int n0 = db_runner_requests(D, c, DB_RUNNER_WAVES);
    if (D < 1 || db_runner_closed(rate)) return n0;
    double want = fmax(fmax(n0, DB_RUNNER_RATE_REQUESTS), ceil(rate * min_time));
    if (want > DB_RUNNER_MAX_REQUESTS) want = DB_RUNNER_MAX_REQUESTS > n0 ? DB_RUNNER_MAX_REQUESTS : n0;
    return (int)ceil(want / D) * D;
}

int db_runner_pass(db_target *t, db_drafter *d, const db_gen_params *p, int conc, db_request *reqs,
                   int n, double *t0, double *secs, char *err, size_t errlen)
{
    int maxp = 1;
    for (int i = 0; i < n; i++) maxp = reqs[i].n_prompt > maxp ? reqs[i].n_prompt : maxp;
    db_engine *e;
    /* caches for what can be in flight, not for a concurrency the requests never reach */
    int rc = db_engine_create(&e, t, d, p, conc < n ? conc : (n > 0 ? n : 1), maxp, err, errlen);
    if (rc) return rc;
    double ts = db_now();
    if (*t0 < 0) *t0 = ts; /* the first run starts the clock of the time stamps */
    for (int i = 0; i < n; i++) /* scheduled arrivals: from this run's start onto t0's clock */
        if (reqs[i].scheduled) reqs[i].arrival += ts - *t0;
    rc = db_engine_run(e, reqs, n, *t0, NULL, NULL, err, errlen);
    if (secs) *secs += db_now() - ts;
    db_engine_destroy(e);
    return rc;
}

/* A timed pass of nreq requests (request q: prompt q mod D): turn 1 of every request, then
 * later turns with each request's decoded answers so far. stats[] receives one entry per
 * (request, turn), request order within each turn; raw's inter-token latencies grow by the
 * pass's. At a finite request rate each turn's run gets its arrival schedule (runner.h). */
static int timed_pass(const db_runner *r, const db_run_point *pt, int nreq, db_point_raw *raw, db_req_stats *stats,
                      int *n_stats, double *wall, char *err, size_t errlen)
{
    const db_prompt_set *ps = pt->ps;
    db_gen_params pp = pt->p;
    pp.stop = r->stop; /* a signal ends the pass at its next cycle */
    const db_gen_params *p = &pp;
    int ns = ps->ds.n, max_turns = db_prompt_set_max_turns(ps), rc = DB_OK, sched = !db_runner_closed(pt->request_rate);
    size_t itl_cap = (size_t)(p->max_new_tokens > 1 ? p->max_new_tokens - 1 : 1); /* gaps per request, at most */
    char ***answers = db_calloc((size_t)nreq, sizeof(char **));
    db_request *reqs = db_calloc((size_t)nreq, sizeof *reqs);
    int *outbuf = db_malloc(sizeof(int) * (size_t)nreq * (size_t)p->max_new_tokens);
    int **prompts = db_calloc((size_t)nreq, sizeof(int *)), *idx = db_calloc((size_t)nreq, sizeof(int));
    float *itl = db_malloc(sizeof(float) * (size_t)nreq * itl_cap);
    double *arrive = sched ? db_malloc(sizeof(double) * (size_t)nreq) : NULL;
    if (!answers || !reqs || !outbuf || !prompts || !idx || !itl || (sched && !arrive))
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for a timed pass");
    if (!rc && max_turns > 1 && !r->tok) rc = db_fail(err, errlen, DB_EINPUT, "%s: later turns need a tokenizer", ps->name);
    *n_stats = 0;
    *wall = 0;
    double t0 = -1; /* time stamps count from the start of the first turn's run */
    for (int turn = 0; turn < max_turns && !rc; turn++) {
        int n = 0;
        for (int q = 0; q < nreq && !rc; q++) {
            const db_sample *sm = &ps->ds.samples[q % ns];
            if (turn >= sm->n_turns) continue;
            int *ids = ps->ids[q % ns], len = ps->len[q % ns];
            if (turn > 0) {
                rc = db_prompt_set_turn(ps, r->tok, r->tmpl, r->thinking, q % ns, turn, (const char *const *)answers[q],
                                        &prompts[n], &len, err, errlen);
                ids = prompts[n];
            }
            idx[n] = q;
            reqs[n] = (db_request){.prompt = ids, .n_prompt = len, .out = outbuf + (size_t)n * p->max_new_tokens,
                                   .itl = itl + (size_t)n * itl_cap, .itl_cap = (int)itl_cap};
            n++;
        }
        /* the turn's schedule: the same for every point of the group (rate, seed, turn and n are) */
        if (!rc && sched)
            db_runner_arrivals(pt->request_rate, n, p->seed * 0x9e3779b97f4a7c15ull + 0x61727269766531ull + (uint64_t)turn,
                               arrive);
        for (int k = 0; k < n && sched && !rc; k++) reqs[k].scheduled = 1, reqs[k].arrival = arrive[k];
        if (!rc) rc = db_runner_pass(r->target, pt->drafter, p, pt->concurrency, reqs, n, &t0, wall, err, errlen);
        size_t gaps = 0;
        for (int k = 0; k < n && !rc; k++) gaps += (size_t)(reqs[k].n_itl < (int)itl_cap ? reqs[k].n_itl : (int)itl_cap);
        if (!rc && raw->n_itl + gaps > raw->cap_itl) {
            size_t cap = raw->cap_itl * 2 > raw->n_itl + gaps ? raw->cap_itl * 2 : raw->n_itl + gaps;
            float *grown = db_realloc(raw->itl_s, sizeof(float) * (cap ? cap : 1));
            if (!grown) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for the inter-token latencies");
            else raw->itl_s = grown, raw->cap_itl = cap;
        }
        for (int k = 0; k < n && !rc; k++) {
            int q = idx[k], g = reqs[k].n_itl < (int)itl_cap ? reqs[k].n_itl : (int)itl_cap;
            if (g > 0) memcpy(raw->itl_s + raw->n_itl, reqs[k].itl, sizeof(float) * (size_t)g);
            raw->n_itl += (size_t)g;
            reqs[k].st.turn = turn;
            stats[(*n_stats)++] = reqs[k].st;
            if (turn + 1 < ps->ds.samples[q % ns].n_turns) {
                char *text;
                size_t tl;
                rc = db_tokenizer_decode(r->tok, reqs[k].out, reqs[k].n_out, 1, &text, &tl, err, errlen);
                if (!rc && !answers[q] && !(answers[q] = db_calloc((size_t)max_turns, sizeof(char *)))) {
                    free(text);
                    rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for the answers of %s", ps->name);
                }
                if (!rc) answers[q][turn] = text;
            }
        }
        for (int k = 0; k < n; k++)
            if (turn > 0) free(prompts[k]), prompts[k] = NULL;
    }
    for (int q = 0; q < nreq && answers; q++) {
        for (int t = 0; answers[q] && t < max_turns; t++) free(answers[q][t]);
        free(answers[q]);
    }
    free(answers), free(reqs), free(outbuf), free(prompts), free(idx), free(itl), free(arrive);
    return rc;
}

/* W untimed warm-up passes of n requests; *secs: the last one's engine time. A multi-turn set's
 * warm-up runs every turn, as a timed pass does: later turns have longer contexts, and the first
 * timed round would otherwise be the first to reach them (chat's round 1 ran 5-20% slower than its
 * others and forced extra rounds). A short warm-up (warmup_tokens) runs first turns only. */
static int warm_up(const db_runner *r, const db_run_point *pt, int n, double *secs, char *err, size_t errlen)
{
    db_gen_params p = pt->p;
    p.stop = r->stop;
    if (r->warmup_tokens > 0) p.max_new_tokens = r->warmup_tokens;
    int rc = DB_OK, D = pt->ps->ds.n;
    int turns = r->warmup_tokens <= 0 && r->tok && db_runner_closed(pt->request_rate) ? db_prompt_set_max_turns(pt->ps) : 1;
    for (int w = 0; w < r->warmup && !rc; w++) {
        *secs = 0;
        if (turns > 1) {
            db_point_raw scratch = {0};
            int got = 0;
            db_req_stats *st = db_calloc((size_t)n * (size_t)turns, sizeof *st);
            rc = st ? timed_pass(r, pt, n, &scratch, st, &got, secs, err, errlen)
                    : db_fail(err, errlen, DB_ERUNTIME, "out of memory for a warm-up pass");
            free(st);
            db_point_raw_free(&scratch);
            continue;
        }
        db_request *reqs = db_calloc((size_t)n, sizeof *reqs);
        int *out = db_malloc(sizeof(int) * (size_t)n * (size_t)p.max_new_tokens);
        if (!reqs || !out) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for a warm-up pass");
        for (int q = 0; q < n && !rc; q++)
            reqs[q] = (db_request){.prompt = pt->ps->ids[q % D], .n_prompt = pt->ps->len[q % D],
                                   .out = out + (size_t)q * p.max_new_tokens};
        double t0 = -1;
        if (!rc) rc = db_runner_pass(r->target, pt->drafter, &p, pt->concurrency, reqs, n, &t0, secs, err, errlen);
        free(reqs);
        free(out);
    }
    return rc;
}

/* the warm-ups, then *nreq (the timed pass's requests, calibrated to min_time) and raw's arrays
 * for the most rounds */
static int point_begin(const db_runner *r, const db_run_point *pt, db_point_raw *raw, int *nreq, char *err,
                       size_t errlen)
{
    int D = pt->ps->ds.n, Rmax = r->max_rounds > r->repetitions && r->repetitions >= 2 ? r->max_rounds : r->repetitions;
    int n0 = db_runner_requests(D, pt->concurrency, r->waves);
    /* warm-ups of one wave of first turns: every slot's caches touched */
    int nw = D < pt->concurrency && r->waves <= 0 ? D : pt->concurrency;
    double tw = 0;
    int rc = warm_up(r, pt, nw, &tw, err, errlen);
    if (rc) return rc;
    long turns = db_prompt_set_turns(pt->ps), mult = 1;
    /* a pass of n0 requests lasts about n0 / nw such waves (a first-turn warm-up: later turns as
     * long as first ones) */
    int warm_turns = r->warmup_tokens <= 0 && r->tok && db_runner_closed(pt->request_rate) ? db_prompt_set_max_turns(pt->ps) : 1;
    double est = D > 0 && nw > 0 ? tw * (double)n0 / nw * (warm_turns > 1 ? 1.0 : (double)turns / D) : 0;
    if (r->min_time > 0 && r->warmup > 0 && r->warmup_tokens <= 0 && est > 0 && est < r->min_time) {
        mult = (long)ceil(r->min_time / est);
        long cap = DB_RUNNER_MAX_REQUESTS / n0;
        mult = mult > cap ? (cap > 1 ? cap : 1) : mult;
    }
    *nreq = (int)(n0 * mult);
    /* arrivals: the rate sets the pass's length (n / rate), not the warm-up; the same n for every
     * point of the group, so they share one schedule */
    if (!db_runner_closed(pt->request_rate)) *nreq = db_runner_rate_requests(D, pt->concurrency, pt->request_rate, r->min_time);
    db_point_key key = raw->key;
    memset(raw, 0, sizeof *raw);
    raw->key = key;
    raw->n_distinct = D;
    raw->n_prompts = (int)(turns * (*nreq / (D > 0 ? D : 1)));
    raw->threads = r->be ? r->be->threads : 0;
    raw->cpus = db_load_cpus();
    raw->wall_s = db_calloc((size_t)Rmax, sizeof(double));
    raw->rep_start_s = db_calloc((size_t)Rmax, sizeof(double));
    raw->reqs = db_calloc((size_t)Rmax * (size_t)raw->n_prompts, sizeof(db_req_stats));
    if (!raw->wall_s || !raw->rep_start_s || !raw->reqs) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for a point's samples");
    return DB_OK;
}

/* timed round k of a point: its start time, requests, wall time, page faults, the backend's
 * peak memory and the neighbours' CPU time */
static int point_rep(db_runner *r, const db_run_point *pt, int nreq, db_point_raw *raw, int k, char *err,
                     size_t errlen)
{
    int got = 0;
    if (r->be) r->be->bytes_peak = r->be->bytes_in_use;
    db_load_sample a, b;
    db_load_sample_now(&a);
    if (r->t_origin < 0) r->t_origin = a.t;
    raw->rep_start_s[k] = a.t - r->t_origin;
    int rc = timed_pass(r, pt, nreq, raw, raw->reqs + (size_t)k * raw->n_prompts, &got, &raw->wall_s[k], err, errlen);
    db_load_sample_now(&b);
    raw->major_faults += b.majflt - a.majflt;
    double other = db_load_other_cores(&a, &b);
    if (isfinite(other)) raw->other_cpu_s += other * (b.t - a.t), raw->load_s += b.t - a.t;
    double mib = r->be ? (double)r->be->bytes_peak / DB_MIB : 0;
    if (mib > raw->peak_mem_mib) raw->peak_mem_mib = mib;
    if (!rc && got != raw->n_prompts) rc = db_fail(err, errlen, DB_ERUNTIME, "internal: %d of %d requests ran", got, raw->n_prompts);
    if (!rc) raw->repetitions = k + 1;
    if (!rc && r->after_pass) rc = r->after_pass(r->user, err, errlen);
    return rc;
}

/* every point's round rates within DB_SPREAD_MAX of its throughput */
static int settled(const db_point_raw *raw, int P)
{
    for (int j = 0; j < P; j++)
        if (!(db_spread(&raw[j]) <= DB_SPREAD_MAX)) return 0;
    return 1;
}

int db_runner_group(db_runner *r, const db_run_point *pts, db_point_raw *raw, int P, char *err,
                    size_t errlen)
{
    /* one round asked for is one round: a spread needs two */
    int Rmin = r->repetitions, Rmax = r->max_rounds > Rmin && Rmin >= 2 ? r->max_rounds : Rmin, rc = DB_OK, began = 0;
    int *nreq = db_calloc((size_t)(P > 0 ? P : 1), sizeof *nreq);
    if (!nreq) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for a group");
    for (; began < P && !rc; began++) rc = point_begin(r, &pts[began], &raw[began], &nreq[began], err, errlen);
    for (int k = 0; k < Rmax && !rc && (k < Rmin || !settled(raw, P)); k++)
        for (int j = 0; j < P && !rc; j++) {
            int sig = r->stop ? *r->stop : 0, q = (j + k) % P;
            rc = sig ? db_fail(err, errlen, DB_ESIGNAL(sig), "stopped by signal %d", sig)
                     : point_rep(r, &pts[q], nreq[q], &raw[q], k, err, errlen);
        }
    free(nreq);
    if (rc)
        for (int j = 0; j < began; j++) db_point_raw_free(&raw[j]);
    return rc;
}

/* ---- a sweep on one backend ---- */

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

/* only synthetic prompts: --synthetic without --dataset */
static int synth_only(const db_sweep_runner *sr) { return sr->sw->synthetic && !sr->sw->dataset_set; }

/* the point runs the drafter (its variant, by the variant table) */
static int key_drafts(const db_point_key *k)
{
    return db_variant_uses_drafter(db_variant_lookup(k->variant));
}

int db_sweep_runner_init(db_sweep_runner *sr, db_sweep *sw, char *err, size_t errlen)
{
    memset(sr, 0, sizeof *sr);
    sr->sw = sw;
    sr->cur_target = -1;
    db_kv_dtype_parse(sw->kv_dtype, sw->backend[0], &sr->kv_dtype); /* one of the key's choices */
    find_models(sw);
    int rc = db_sweep_points(sw, &sr->keys, &sr->nkeys, err, errlen);
    if (rc) return rc;
    for (int b = 1; b < sw->n_backend; b++)
        if (strcmp(sw->backend[b], sw->backend[0]) != 0)
            return db_fail(err, errlen, DB_EINPUT, "one backend per invocation for now (got %s and %s)",
                           sw->backend[0], sw->backend[b]);
    char lerr[512];
    if (!db_backend_load(sw->backend[0], lerr, sizeof lerr)) /* not built, or its module does not load */
        return db_fail(err, errlen, DB_EINPUT, "%s", lerr);
    for (int d = 0; d < sw->n_dataset && !rc && !synth_only(sr); d++) {
        char path[1024];
        if (!db_dataset_is_synthetic(sw->dataset[d], NULL))
            rc = db_dataset_resolve(sw->dataset[d], path, sizeof path, err, errlen);
    }
    for (int i = 0; i < sw->n_profile && !rc; i++)
        if (strcmp(sw->profile[i], "none") != 0) rc = db_profile_load(&sr->profiles[i], sw->profile[i], err, errlen);
    return rc;
}

const char *db_sweep_runner_target_path(const db_sweep_runner *sr, int ti)
{
    return sr->sw->synthetic && sr->sw->target_config[0] ? sr->sw->target_config : sr->sw->target[ti];
}

/* the points of target entry ti: keys[*i0, *i0 + *n) (the target is the outermost axis) */
static void target_keys(const db_sweep_runner *sr, int ti, int *i0, int *n)
{
    *i0 = 0;
    while (*i0 < sr->nkeys && sr->keys[*i0].target_i != ti) ++*i0;
    *n = 0;
    while (*i0 + *n < sr->nkeys && sr->keys[*i0 + *n].target_i == ti) ++*n;
}

/* target entry ti's config, and the drafters of its points checked against it */
static int target_configs(db_sweep_runner *sr, int ti, char *err, size_t errlen)
{
    int i0, n;
    target_keys(sr, ti, &i0, &n);
    sr->tpath = db_sweep_runner_target_path(sr, ti);
    int rc = db_model_config_load(&sr->tcfg, sr->tpath, err, errlen);
    return rc ? rc : db_drafter_set_plan(&sr->ds, sr->sw, sr->keys + i0, n, sr->tcfg.n_layers, err, errlen);
}

/* leaves target 0's config in sr->tcfg */
int db_sweep_runner_configs(db_sweep_runner *sr, char *err, size_t errlen)
{
    const db_sweep *sw = sr->sw;
    sr->maxb = 1;
    for (int i = 0; i < sr->nkeys; i++)
        if (key_drafts(&sr->keys[i])) {
            sr->need_drafter = 1;
            if (sr->keys[i].block_size > sr->maxb) sr->maxb = sr->keys[i].block_size;
        }
    sr->syn = (db_synth_opts){.seed = sw->seed, .dtype = DB_BF16};
    if (sw->synthetic) db_dtype_parse(sw->dtype, &sr->syn.dtype);
    int rc = DB_OK, vocab = 0;
    db_model_config next = {0}; /* target ti + 1's, for the shapes */
    for (int ti = sw->n_target - 1; ti >= 0 && !rc; ti--) {
        rc = target_configs(sr, ti, err, errlen);
        /* one model at several weight types: a drafter's taps and every ar baseline assume the
         * same layers and widths */
        if (!rc && ti < sw->n_target - 1 &&
            (sr->tcfg.hidden != next.hidden || sr->tcfg.intermediate != next.intermediate ||
             sr->tcfg.n_layers != next.n_layers || sr->tcfg.n_heads != next.n_heads ||
             sr->tcfg.n_kv_heads != next.n_kv_heads || sr->tcfg.head_dim != next.head_dim))
            rc = db_fail(err, errlen, DB_EINPUT, "%s: hidden %d, intermediate %d, %d layers, %d/%d heads of %d; %s: %d, "
                         "%d, %d, %d/%d of %d: the targets of one sweep are one model (at several weight types)",
                         sr->tpath, sr->tcfg.hidden, sr->tcfg.intermediate, sr->tcfg.n_layers, sr->tcfg.n_heads,
                         sr->tcfg.n_kv_heads, sr->tcfg.head_dim, db_sweep_runner_target_path(sr, ti + 1), next.hidden,
                         next.intermediate, next.n_layers, next.n_heads, next.n_kv_heads, next.head_dim);
        if (!rc) next = sr->tcfg;
        if (!rc && ti < sw->n_target - 1 && sr->tcfg.vocab != vocab)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: vocabulary of %d tokens, %s has %d: the targets of one sweep "
                         "are one model (at several weight types)", sr->tpath, sr->tcfg.vocab,
                         db_sweep_runner_target_path(sr, ti + 1), vocab);
        vocab = sr->tcfg.vocab;
        if (!rc) sr->max_pos[ti] = sr->tcfg.max_pos;
    }
    for (int i = 0; i < sr->nkeys && !rc && sw->synthetic; i++) { /* the configs stand for the models */
        db_point_key *k = &sr->keys[i];
        int ds = db_drafter_set_of(&sr->ds, sw, k);
        db_model_name(sr->tcfg.path, k->target, sizeof k->target);
        db_model_name(ds >= 0 ? sr->ds.slot[ds].cfg.base.path : "", k->drafter, sizeof k->drafter);
    }
    for (int i = 0; i < sw->n_profile && !rc; i++)
        if (strcmp(sw->profile[i], "none") != 0 && sr->profiles[i].n < sr->maxb - 1)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: %d positions, but block size %d drafts %d",
                         sw->profile[i], sr->profiles[i].n, sr->maxb, sr->maxb - 1);
    return rc;
}

/* the prompts of a point: its dataset at its depth */
static db_prompt_set *find_set(const db_sweep_runner *sr, const db_point_key *k)
{
    for (int i = 0; i < sr->n_sets; i++)
        if (strcmp(sr->sets[i].name, k->dataset) == 0 && sr->sets[i].depth == k->depth) return &sr->sets[i];
    return NULL;
}

int db_sweep_runner_prompts(db_sweep_runner *sr, char *err, size_t errlen)
{
    const db_sweep *sw = sr->sw;
    int need_tok = 0, rc = DB_OK;
    for (int d = 0; d < sw->n_dataset && !synth_only(sr); d++) need_tok |= !db_dataset_is_synthetic(sw->dataset[d], NULL);
    sr->tmpl = DB_CHAT_NONE;
    if (need_tok) rc = db_prompt_tokenizer_load(&sr->tok, sw->target[0], err, errlen);
    if (!rc && need_tok) rc = db_chat_template_parse(sw->chat_template, &sr->tmpl, err, errlen);
    if (!rc && need_tok && sr->tmpl == DB_CHAT_AUTO) sr->tmpl = db_chat_template_detect(&sr->tok, sr->tcfg.model_type);
    /* every target gets the prompts target 0's tokenizer made: the same vocabulary size is not
     * enough (another model's ids of the same range run, and measure nonsense) */
    char h0[65], hi[65];
    if (!rc && need_tok && sw->n_target > 1) db_tokenizer_hash(&sr->tok, h0);
    for (int ti = 1; ti < sw->n_target && !rc && need_tok; ti++) {
        db_tokenizer other;
        if ((rc = db_prompt_tokenizer_load(&other, sw->target[ti], err, errlen))) break;
        db_tokenizer_hash(&other, hi);
        db_tokenizer_free(&other);
        if (strcmp(h0, hi) != 0)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: its tokenizer differs from %s's (vocabulary or merges): the "
                         "targets of one sweep are one model (at several weight types)", sw->target[ti], sw->target[0]);
    }
    for (int i = 0; i < sr->nkeys && !rc; i++) { /* synthetic prompts have no template */
        db_point_key *k = &sr->keys[i];
        snprintf(k->chat_template, sizeof k->chat_template, "%s",
                 db_chat_template_name(db_dataset_is_synthetic(k->dataset, NULL) ? DB_CHAT_NONE : sr->tmpl));
    }
    if (rc) return rc;
    /* one set per dataset and depth: set i is dataset i / n_depth at depth i % n_depth */
    int n = (synth_only(sr) ? 1 : sw->n_dataset) * sw->n_depth;
    if (!(sr->sets = db_calloc((size_t)n, sizeof *sr->sets))) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the prompt sets");
    for (int i = 0; i < n && !rc; i++, sr->n_sets = i) {
        char name[64];
        int nt = sw->prompt_tokens, d = i / sw->n_depth;
        if (synth_only(sr)) snprintf(name, sizeof name, "synthetic-%d", nt);
        else snprintf(name, sizeof name, "%s", sw->dataset[d]);
        if (db_dataset_is_synthetic(name, &nt))
            rc = db_prompt_set_random(&sr->sets[i], name, sw->max_samples, nt, nt, sr->tcfg.vocab, sw->seed, err, errlen);
        else
            rc = db_prompt_set_dataset(&sr->sets[i], sw->dataset[d], sw->max_samples, sw->seed, &sr->tok, sr->tmpl,
                                       sw->thinking, sr->tcfg.vocab, sr->tcfg.path, err, errlen);
        if (!rc)
            rc = db_prompt_set_depth(&sr->sets[i], sw->depth[i % sw->n_depth], &sr->tok, sr->tcfg.vocab, sw->seed, err, errlen);
    }
    /* the engine refuses a pass past the target's positions (db_engine_create); first turns are
     * known now, so such a sweep stops before any weight loads (later turns: when they come) */
    int *floor = db_calloc((size_t)(sr->n_sets > 0 ? sr->n_sets : 1), sizeof(int)); /* per set */
    if (!rc && !floor) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for the prompt sets");
    for (int i = 0; i < sr->n_sets && !rc; i++)
        rc = db_prompt_set_floor_len(&sr->sets[i], &sr->tok, sr->tmpl, sw->thinking, &floor[i], err, errlen);
    for (int i = 0; i < sr->nkeys && !rc && !sw->allow_long_context; i++) {
        const db_point_key *k = &sr->keys[i];
        const db_prompt_set *ps = find_set(sr, k);
        int mp = sr->max_pos[k->target_i], B = key_drafts(k) ? k->block_size : 1;
        int need = ps ? floor[ps - sr->sets] + k->max_new_tokens + B : 0;
        if (ps && mp > 0 && need > mp) {
            char what[160] = "";
            if (ps->depth) snprintf(what, sizeof what, " at depth %d", ps->depth);
            rc = db_fail(err, errlen, DB_EINPUT,
                         "%s%s: a prompt of %d tokens%s + max_new_tokens %d + block %d = %d positions, beyond "
                         "max_position_embeddings %d of %s (--allow-long-context runs it anyway)",
                         k->dataset, what, floor[ps - sr->sets], ps->depth ? " with its context" : "", k->max_new_tokens,
                         B, need, mp, db_sweep_runner_target_path(sr, k->target_i));
        }
    }
    free(floor);
    return rc;
}

/* requests of an uncalibrated timed pass at concurrency c (a rate point's: its arrivals), every
 * turn counted */
static int pass_requests(const db_prompt_set *ps, int c, double rate, double min_time)
{
    int D = ps->ds.n > 0 ? ps->ds.n : 1;
    return db_prompt_set_turns(ps) * (db_runner_rate_requests(D, c, rate, min_time) / D);
}

int db_sweep_runner_costs(db_sweep_runner *sr, db_point_cost_fn cost_of, const db_hw *hw, double *cost, char *err,
                          size_t errlen)
{
    int rc = DB_OK;
    for (int i = 0; i < sr->nkeys && !rc; i++) {
        if (i == 0 || sr->keys[i].target_i != sr->keys[i - 1].target_i) /* its target's configs */
            rc = target_configs(sr, sr->keys[i].target_i, err, errlen);
        const db_prompt_set *ps = find_set(sr, &sr->keys[i]);
        int ds = db_drafter_set_of(&sr->ds, sr->sw, &sr->keys[i]);
        cost[i] = cost_of(&sr->tcfg, ds >= 0 ? &sr->ds.slot[ds].cfg : NULL, sr->syn.dtype, sr->sw,
                                      &sr->keys[i], ps ? pass_requests(ps, sr->keys[i].concurrency, sr->keys[i].request_rate, sr->sw->min_time) : 0,
                                      ps && ps->ds.n ? db_prompt_set_mean_len(ps) : 1, hw);
    }
    if (!rc && sr->sw->n_target > 1) rc = target_configs(sr, 0, err, errlen); /* as configs left it */
    return rc;
}

int db_sweep_runner_main_dtype(const db_sweep_runner *sr, const char *path, db_dtype *dt, char *mix, size_t mixlen,
                               char *err, size_t errlen)
{
    *dt = sr->syn.dtype;
    if (mix) snprintf(mix, mixlen, "%s", db_dtype_name(*dt));
    if (sr->sw->synthetic) return DB_OK;
    db_tensor_set st;
    int rc = db_tensors_open_dir(&st, path, err, errlen);
    if (rc) return rc;
    *dt = db_tensors_main_dtype(&st);
    if (mix) db_tensors_mix(&st, mix, mixlen);
    db_tensors_close(&st);
    return DB_OK;
}

int db_sweep_runner_open_backend(db_sweep_runner *sr, char *err, size_t errlen)
{
    const db_sweep *sw = sr->sw;
    sr->so = (db_session_opts){sw->backend[0], db_sweep_runner_target_path(sr, 0), NULL, sw->threads,
                               sw->deterministic, sw->synthetic ? &sr->syn : NULL};
    int rc = db_session_open_backend(&sr->s, &sr->so, err, errlen);
    if (rc) return rc;
    sr->session_open = 1;
    if (sr->kv_dtype == DB_F16 && (!sr->s.be->ops->kv_store_f16 || !sr->s.be->ops->attention_f16))
        return db_fail(err, errlen, DB_EINPUT, "backend %s has no f16 KV cache (--kv-dtype f16); use --kv-dtype f32",
                       sr->s.be->ops->name);
    return sw->predict ? db_sweep_runner_device_figures(sr, err, errlen) : DB_OK;
}

int db_sweep_runner_device_figures(db_sweep_runner *sr, char *err, size_t errlen)
{
    const db_sweep *sw = sr->sw;
    int rc = DB_OK;
    if (sr->hw_known) return DB_OK;
    if (sw->device_config[0]) rc = db_device_preset_load(sw->device_config, &sr->hw, err, errlen);
    else {
        db_dtype dt;
        db_model_config t0; /* the matmul rates on the first target's matrix shapes */
        rc = db_sweep_runner_main_dtype(sr, db_sweep_runner_target_path(sr, 0), &dt, NULL, 0, err, errlen);
        if (!rc) rc = db_model_config_load(&t0, db_sweep_runner_target_path(sr, 0), err, errlen);
        if (!rc) rc = db_hw_figures(sr->s.be, dt, sw->bandwidth_gbs, sw->gflops, &t0, &sr->hw, err, errlen);
    }
    sr->hw_known = !rc;
    return rc;
}

/* memory: refuse what the current target's points cannot fit before allocating anything */
static int check_memory(db_sweep_runner *sr, char *err, size_t errlen)
{
    int i0, nk;
    target_keys(sr, sr->cur_target, &i0, &nk);
    db_mem_need need = {db_weights_bytes(&sr->tcfg, NULL, sr->wdtype), 0, 0};
    for (int s = 0; s < sr->ds.n; s++) /* each drafter's own weights */
        need.weights += db_weights_bytes(&sr->tcfg, &sr->ds.slot[s].cfg, sr->wdtype) - db_weights_bytes(&sr->tcfg, NULL, sr->wdtype);
    for (int i = i0; i < i0 + nk; i++) {
        const db_point_key *k = &sr->keys[i];
        const db_prompt_set *ps = find_set(sr, k);
        int maxp = ps ? db_prompt_set_max_len(ps) : 1, turns = ps ? db_prompt_set_max_turns(ps) : 1;
        /* a later turn carries the earlier turns and answers (an estimate: its text is not
         * known yet) */
        maxp = maxp * turns + k->max_new_tokens * (turns - 1);
        db_engine_shape es = {k->concurrency, key_drafts(k) ? k->block_size : 1, maxp, k->max_new_tokens,
                              k->temperature > 0, sr->kv_dtype};
        double kv, act;
        int ds = db_drafter_set_of(&sr->ds, sr->sw, k);
        db_engine_bytes(&sr->tcfg, ds >= 0 ? &sr->ds.slot[ds].cfg : NULL, &es, &kv, &act);
        if (kv + act > need.kv + need.act) need.kv = kv, need.act = act;
    }
    char what[96];
    snprintf(what, sizeof what, "this sweep (%s)", sr->sw->synthetic ? "synthetic weights" : "its checkpoints");
    return db_mem_check(&need, db_mem_available(sr->s.be), what, err, errlen);
}

/* target entry ti onto the device: its config and drafters, the memory check, the weights, and
 * whether the drafters run every variant and block size of its points */
static int target_begin(db_sweep_runner *sr, int ti, char *err, size_t errlen)
{
    int i0, n, rc = target_configs(sr, ti, err, errlen);
    sr->cur_target = ti;
    target_keys(sr, ti, &i0, &n);
    if (!rc) rc = db_sweep_runner_main_dtype(sr, sr->tpath, &sr->wdtype, NULL, 0, err, errlen);
    if (!rc) rc = check_memory(sr, err, errlen);
    if (rc) return rc;
    sr->so.target = sr->tpath;
    if ((rc = db_session_load_models(&sr->s, &sr->so, err, errlen))) return rc; /* closed at the end */
    return db_drafter_set_load(&sr->ds, sr->sw, sr->keys + i0, n, sr->s.be, &sr->s.target,
                               sr->sw->synthetic ? &sr->syn : NULL, err, errlen);
}

/* the previous target's drafters and weights leave the device */
static void target_end(db_sweep_runner *sr)
{
    db_drafter_set_free(&sr->ds);
    db_target_free(&sr->s.target);
}

/* the engine's view of point k: parameters, drafter, prompts */
static int point_of(db_sweep_runner *sr, const db_point_key *k, db_run_point *pt, char *err, size_t errlen)
{
    db_variant v;
    int slot = db_drafter_set_of(&sr->ds, sr->sw, k);
    pt->ps = find_set(sr, k);
    if (!pt->ps || db_variant_parse(k->variant, &v) != 0)
        return db_fail(err, errlen, DB_EINPUT, "point %s/%s: unknown dataset or variant", k->dataset, k->variant);
    pt->drafter = slot >= 0 ? &sr->ds.slot[slot].d : NULL;
    pt->concurrency = k->concurrency;
    pt->request_rate = k->request_rate;
    pt->p = (db_gen_params){.variant = v, .block_size = k->block_size, .temperature = k->temperature,
                            .top_p = k->top_p, .top_k = k->top_k, .max_new_tokens = k->max_new_tokens,
                            .seed = sr->sw->seed, .ignore_eos = sr->sw->synthetic, .kv_dtype = sr->kv_dtype,
                            .allow_long_context = sr->sw->allow_long_context};
    for (int i = 0; i < sr->sw->n_profile; i++) /* replayed acceptance: "replay:<profile>" */
        if (!strncmp(k->acceptance_source, "replay:", 7) && !strcmp(k->acceptance_source + 7, sr->sw->profile[i])) {
            pt->p.replay_rates = sr->profiles[i].rate;
            pt->p.replay_n = sr->profiles[i].n;
        }
    return DB_OK;
}

int db_sweep_runner_group(db_sweep_runner *sr, int i0, int i1, db_point_raw *raw, char *err,
                          size_t errlen)
{
    int P = i1 - i0, rc = DB_OK;
    const db_point_key *k = &sr->keys[i0];
    if (k->target_i != sr->cur_target) {
        if (sr->cur_target >= 0) target_end(sr);
        if ((rc = target_begin(sr, k->target_i, err, errlen))) return rc;
    }
    db_run_point *pts = db_calloc((size_t)P, sizeof *pts);
    if (!pts) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for a group's points");
    for (int j = 0; j < P && !rc; j++) {
        raw[j] = (db_point_raw){.key = sr->keys[i0 + j]};
        rc = point_of(sr, &sr->keys[i0 + j], &pts[j], err, errlen);
    }
    db_runner *r = &sr->run;
    r->be = sr->s.be;
    r->target = &sr->s.target;
    r->tok = &sr->tok;
    r->tmpl = sr->tmpl;
    r->thinking = sr->sw->thinking;
    r->warmup = sr->sw->warmup;
    r->repetitions = sr->sw->repetitions;
    r->max_rounds = sr->sw->max_rounds;
    r->min_time = sr->sw->min_time;
    r->waves = DB_RUNNER_WAVES;
    if (!rc) rc = db_runner_group(r, pts, raw, P, err, errlen);
    if (rc == DB_EINPUT && k->depth > 0) { /* a later turn past the positions, say: at which depth */
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        rc = db_fail(err, errlen, rc, "%s at depth %d: %s", k->dataset, k->depth, why);
    }
    for (int j = 0; j < P && !rc; j++) { /* the SLOs goodput counts against (report.h) */
        raw[j].slo_ttft_s = sr->sw->slo_ttft_ms / 1e3;
        raw[j].slo_tpot_s = sr->sw->slo_tpot_ms / 1e3;
    }
    for (int j = 0; j < P && !rc && sr->sw->predict; j++) {
        int slot = db_drafter_set_of(&sr->ds, sr->sw, &raw[j].key);
        raw[j].predicted_tok_s = db_roofline_point(&sr->tcfg, slot >= 0 ? &sr->ds.slot[slot].cfg : NULL, sr->wdtype,
                                                   &sr->hw, &raw[j], sr->kv_dtype);
    }
    free(pts);
    return rc;
}

void db_sweep_runner_free(db_sweep_runner *sr)
{
    free(sr->keys);
    for (int i = 0; i < sr->n_sets; i++) db_prompt_set_free(&sr->sets[i]);
    free(sr->sets);
    db_tokenizer_free(&sr->tok);
    db_drafter_set_free(&sr->ds);
    if (sr->session_open) db_session_close(&sr->s);
    memset(sr, 0, sizeof *sr);
}
