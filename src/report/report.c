/* report.c — summary statistics of a sweep point from its raw samples (definitions at the top
 * of report.h). */
#include "report/report.h"
#include "base/quantile.h"
#include "base/util.h"
#include "engine/variant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_ar(const db_point_key *k) { return db_variant_is_baseline(db_variant_lookup(k->variant)); }

void db_point_baseline_key(const db_point_key *k, db_point_key *ar)
{
    *ar = *k;
    snprintf(ar->variant, sizeof ar->variant, "%s", db_variant_name(DB_VAR_AR));
    ar->block_size = 1;
    /* the baseline measures its own acceptance (trivially): replayed acceptance is a property
     * of the drafter points only */
    snprintf(ar->acceptance_source, sizeof ar->acceptance_source, "measured");
    /* the same target file, no drafter */
    ar->drafter[0] = 0;
    ar->drafter_i = 0;
}

/* mean and sample stddev of v[n] */
static void mean_sd(const double *v, int n, double *mean, double *sd)
{
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = n ? s / n : NAN;
    for (int i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

static double rep_throughput(const db_point_raw *p, int r)
{
    long tok = 0;
    for (int i = 0; i < p->n_prompts; i++) tok += p->reqs[(size_t)r * (size_t)p->n_prompts + (size_t)i].output_tokens;
    return p->wall_s[r] > 0 ? (double)tok / p->wall_s[r] : NAN;
}

static double mean_throughput(const db_point_raw *p)
{
    double s = 0;
    for (int r = 0; r < p->repetitions; r++) s += rep_throughput(p, r);
    return p->repetitions ? s / p->repetitions : NAN;
}

/* per-request tokens and time shares [R*N] (see report.h) */
static int shares(const db_point_raw *p, double **tok, double **tim)
{
    size_t total = (size_t)p->repetitions * (size_t)p->n_prompts;
    *tok = db_malloc(sizeof(double) * (total ? total : 1));
    *tim = db_malloc(sizeof(double) * (total ? total : 1));
    if (!*tok || !*tim) return -1;
    int n = p->n_prompts;
    for (int r = 0; r < p->repetitions; r++) {
        const db_req_stats *q = p->reqs + (size_t)r * (size_t)n;
        double se = 0;
        for (int i = 0; i < n; i++) se += fmax(0, q[i].t_finished - q[i].t_admitted);
        for (int i = 0; i < n; i++) {
            double e = fmax(0, q[i].t_finished - q[i].t_admitted);
            (*tok)[(size_t)r * (size_t)n + (size_t)i] = q[i].output_tokens;
            (*tim)[(size_t)r * (size_t)n + (size_t)i] = se > 0 ? p->wall_s[r] * e / se : p->wall_s[r] / n;
        }
    }
    return 0;
}

/* throughput of one side on the resampled prompts idx[N] and repetitions rep[reps] */
static double resampled(const double *tok, const double *tim, int reps, int n, const int *idx, const int *rep)
{
    double s = 0;
    for (int q = 0; q < reps; q++) {
        int r = rep[q];
        double a = 0, b = 0;
        for (int j = 0; j < n; j++) {
            a += tok[(size_t)r * (size_t)n + (size_t)idx[j]];
            b += tim[(size_t)r * (size_t)n + (size_t)idx[j]];
        }
        s += b > 0 ? a / b : NAN;
    }
    return s / reps;
}

static int bootstrap_ci(const db_point_raw *p, const db_point_raw *ar, uint64_t seed, double *lo,
                        double *hi)
{
    int n = p->n_prompts, rc = -1;
    double *tv = NULL, *sv = NULL, *ta = NULL, *sa = NULL, *boot = db_malloc(sizeof(double) * DB_BOOTSTRAP);
    int *idx = db_malloc(sizeof(int) * (size_t)n);
    int R = p->repetitions, Ra = ar->repetitions, paired = R == Ra;
    int *rp = db_malloc(sizeof(int) * (size_t)R), *ra = db_malloc(sizeof(int) * (size_t)Ra);
    if (!boot || !idx || !rp || !ra || shares(p, &tv, &sv) || shares(ar, &ta, &sa)) goto out;
    db_rng rng;
    db_rng_seed(&rng, seed);
    int m = 0;
    for (int b = 0; b < DB_BOOTSTRAP; b++) {
        for (int j = 0; j < n; j++) idx[j] = (int)(db_rng_next(&rng) % (uint64_t)n);
        /* repetitions too, the same ones on both sides when they were run in the same rounds
         * (paired: a round's load hits both) */
        for (int q = 0; q < R; q++) rp[q] = R > 1 ? (int)(db_rng_next(&rng) % (uint64_t)R) : q;
        for (int q = 0; q < Ra; q++) ra[q] = paired ? rp[q] : Ra > 1 ? (int)(db_rng_next(&rng) % (uint64_t)Ra) : q;
        double x = resampled(tv, sv, R, n, idx, rp) / resampled(ta, sa, Ra, n, idx, ra);
        if (isfinite(x)) boot[m++] = x;
    }
    *lo = db_quantile(boot, m, 0.025);
    *hi = db_quantile(boot, m, 0.975);
    rc = 0;
out:
    free(tv);
    free(sv);
    free(ta);
    free(sa);
    free(boot);
    free(idx);
    free(rp);
    free(ra);
    return rc;
}

/* mean, p50, p90, p99 of v[n] (sorted in place) */
static void dist(double *v, int n, double *mean, double *p50, double *p90, double *p99)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = n ? s / n : NAN;
    *p50 = db_quantile(v, n, 0.50);
    *p90 = db_quantile(v, n, 0.90);
    *p99 = db_quantile(v, n, 0.99);
}

int db_point_summarize(const db_point_raw *p, const db_point_raw *ar, uint64_t seed,
                       db_point_summary *o)
{
    memset(o, 0, sizeof *o);
    int R = p->repetitions, N = p->n_prompts;
    size_t total = (size_t)(R > 0 ? R : 0) * (size_t)(N > 0 ? N : 0);
    for (size_t k = 0; k < total; k++) db_req_stats_add(&o->total, &p->reqs[k]);
    const db_req_stats *t = &o->total;
    int reps = R > 0 ? R : 1;
    o->output_tokens = lround((double)t->output_tokens / reps);
    o->cycles = lround((double)t->cycles / reps);

    double *v = db_malloc(sizeof(double) * (size_t)(R > 0 ? R : 1));
    double *lat = db_malloc(sizeof(double) * (total ? total : 1));
    if (!v || !lat) {
        free(v);
        free(lat);
        return DB_ERUNTIME;
    }
    double sd;
    mean_sd(p->wall_s, R, &o->wall_s, &sd);
    for (int r = 0; r < R; r++) v[r] = rep_throughput(p, r);
    mean_sd(v, R, &o->throughput_tok_s, &o->throughput_stddev);

    o->tau = db_req_stats_tau(t);
    o->tokens_per_target_call = db_req_stats_tokens_per_call(t);
    /* `ar` has no drafts, so no oracle: its sum stays 0 */
    o->oracle_tau = t->cycles && t->oracle_len_sum ? (double)t->oracle_len_sum / t->cycles : NAN;
    /* the time split is recorded per cycle (`ar`: decode step), never for the prefill */
    double cyc = t->cycles > 0 ? (double)t->cycles : NAN;
    o->draft_ms_per_cycle = 1e3 * t->t_draft / cyc;
    o->select_ms_per_cycle = 1e3 * t->t_select / cyc;
    o->correct_ms_per_cycle = 1e3 * t->t_correct / cyc;
    o->verify_ms_per_cycle = 1e3 * t->t_verify / cyc;
    o->host_ms_per_cycle = 1e3 * t->t_host / cyc;
    o->measured_over_predicted =
        p->predicted_tok_s > 0 ? o->throughput_tok_s / p->predicted_tok_s : NAN;

    /* latency distributions */
    int m = 0;
    for (size_t k = 0; k < total; k++)
        if (p->reqs[k].output_tokens >= 1)
            lat[m++] = 1e3 * (p->reqs[k].t_first_token - p->reqs[k].t_admitted);
    dist(lat, m, &o->ttft_ms_mean, &o->ttft_ms_p50, &o->ttft_ms_p90, &o->ttft_ms_p99);
    m = 0;
    for (size_t k = 0; k < total; k++)
        if (p->reqs[k].output_tokens >= 2)
            lat[m++] = 1e3 * (p->reqs[k].t_finished - p->reqs[k].t_first_token) /
                       (p->reqs[k].output_tokens - 1);
    dist(lat, m, &o->tpot_ms_mean, &o->tpot_ms_p50, &o->tpot_ms_p90, &o->tpot_ms_p99);
    m = 0;
    for (size_t k = 0; k < total; k++)
        if (p->reqs[k].output_tokens >= 1)
            lat[m++] = 1e3 * (p->reqs[k].t_finished - p->reqs[k].t_admitted);
    dist(lat, m, &o->e2e_ms_mean, &o->e2e_ms_p50, &o->e2e_ms_p90, &o->e2e_ms_p99);
    free(v);
    free(lat);

    /* speedup against the baseline */
    o->speedup = o->speedup_ci_lo = o->speedup_ci_hi = NAN;
    if (is_ar(&p->key)) {
        o->speedup = o->speedup_ci_lo = o->speedup_ci_hi = 1.0;
    } else if (ar && ar->repetitions > 0) {
        double base = mean_throughput(ar);
        if (base > 0) o->speedup = o->throughput_tok_s / base;
        if (base > 0 && ar->n_prompts == N && N > 0 && R > 0 &&
            bootstrap_ci(p, ar, seed, &o->speedup_ci_lo, &o->speedup_ci_hi) != 0)
            return DB_ERUNTIME;
    }
    /* what one verify costs in decode steps of the paired baseline: above tau, a cycle costs
     * more than the tokens it commits would by decoding */
    o->verify_cost_steps = NAN;
    if (is_ar(&p->key)) o->verify_cost_steps = 1;
    else if (ar && ar->repetitions > 0) {
        db_req_stats a = {0};
        for (size_t k = 0; k < (size_t)ar->repetitions * (size_t)ar->n_prompts; k++) db_req_stats_add(&a, &ar->reqs[k]);
        double step_ms = a.cycles > 0 ? 1e3 * a.t_verify / (double)a.cycles : NAN;
        if (step_ms > 0) o->verify_cost_steps = o->verify_ms_per_cycle / step_ms;
    }
    o->stable = !db_throughput_varies(o) && !db_speedup_above_tau(o);
    return DB_OK;
}

/* pyperf's rule: relative stddev above 10% */
int db_throughput_varies(const db_point_summary *s)
{
    return s->throughput_stddev > 0.10 * s->throughput_tok_s;
}

/* a speedup no cycle costing at least one decode step can give */
int db_speedup_above_tau(const db_point_summary *s) { return s->speedup > s->tau; }
