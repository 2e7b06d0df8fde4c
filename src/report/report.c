/* report.c — summary statistics of a sweep point from its raw samples (definitions at the top
 * of report.h). */
#include "report/report.h"
#include "base/quantile.h"
#include "base/util.h"
#include "result/timing.h"
#include "engine/variant.h"

#include <limits.h>
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

/* the prompt clusters of the bootstrap: D distinct prompts, request entry e in cluster e mod D
 * (the runner's layout, result/point.h); entries alone when D is unknown */
static int clusters(const db_point_raw *p)
{
    return p->n_distinct > 0 ? p->n_distinct : p->n_prompts;
}

int db_clusters_init(db_clusters *c, const db_point_raw *p)
{
    int D = clusters(p);
    c->R = p->repetitions;
    c->D = D;
    size_t total = (size_t)p->repetitions * (size_t)D;
    c->tok = db_calloc(total ? total : 1, sizeof(double));
    c->tim = db_calloc(total ? total : 1, sizeof(double));
    if (!c->tok || !c->tim) {
        db_clusters_free(c);
        return -1;
    }
    int n = p->n_prompts;
    for (int r = 0; r < p->repetitions; r++) {
        const db_req_stats *q = p->reqs + (size_t)r * (size_t)n;
        double se = 0;
        for (int i = 0; i < n; i++) se += fmax(0, q[i].t_finished - q[i].t_admitted);
        for (int i = 0; i < n; i++) {
            double e = fmax(0, q[i].t_finished - q[i].t_admitted);
            size_t k = (size_t)r * (size_t)D + (size_t)(i % D);
            c->tok[k] += q[i].output_tokens;
            c->tim[k] += se > 0 ? p->wall_s[r] * e / se : p->wall_s[r] / n;
        }
    }
    return 0;
}

void db_clusters_free(db_clusters *c)
{
    free(c->tok);
    free(c->tim);
    c->tok = c->tim = NULL;
}

double db_clusters_rate(const db_clusters *c, const int *idx, const int *rep)
{
    double a = 0, b = 0;
    for (int q = 0; q < c->R; q++)
        for (int j = 0; j < c->D; j++) {
            a += c->tok[(size_t)rep[q] * (size_t)c->D + (size_t)idx[j]];
            b += c->tim[(size_t)rep[q] * (size_t)c->D + (size_t)idx[j]];
        }
    return b > 0 ? a / b : NAN;
}

static int bootstrap_ci(const db_point_raw *p, const db_point_raw *ar, uint64_t seed, double *lo,
                        double *hi)
{
    int D = clusters(p), rc = -1;
    /* the baseline's requests grouped into the variant's D clusters (the same prompts) */
    db_point_raw arD = *ar;
    arD.n_distinct = D;
    db_clusters cv = {0}, ca = {0};
    double *boot = db_malloc(sizeof(double) * DB_BOOTSTRAP);
    int *idx = db_malloc(sizeof(int) * (size_t)D);
    int R = p->repetitions, Ra = ar->repetitions, paired = R == Ra;
    int *rp = db_malloc(sizeof(int) * (size_t)R), *ra = db_malloc(sizeof(int) * (size_t)Ra);
    if (!boot || !idx || !rp || !ra || db_clusters_init(&cv, p) || db_clusters_init(&ca, &arD)) goto out;
    db_rng rng;
    db_rng_seed(&rng, seed);
    int m = 0;
    for (int b = 0; b < DB_BOOTSTRAP; b++) {
        for (int j = 0; j < D; j++) idx[j] = (int)(db_rng_next(&rng) % (uint64_t)D);
        /* rounds too, the same ones on both sides when they ran in the same rounds (paired: a
         * round's load hits both) */
        for (int q = 0; q < R; q++) rp[q] = (int)(db_rng_next(&rng) % (uint64_t)R);
        for (int q = 0; q < Ra; q++) ra[q] = paired ? rp[q] : (int)(db_rng_next(&rng) % (uint64_t)Ra);
        double x = db_clusters_rate(&cv, idx, rp) / db_clusters_rate(&ca, idx, ra);
        if (isfinite(x)) boot[m++] = x;
    }
    *lo = db_quantile(boot, m, 0.025);
    *hi = db_quantile(boot, m, 0.975);
    rc = 0;
out:
    db_clusters_free(&cv);
    db_clusters_free(&ca);
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

/* the measured arrival rate and the coefficient of variation of the arrival gaps: the gaps
 * between consecutive requests of one engine run (a round's requests of one turn, in index
 * order, which is arrival order) */
static void arrival_stats(const db_point_raw *p, double *rate, double *cv)
{
    int N = p->n_prompts;
    double sum = 0, sq = 0;
    long gaps = 0;
    for (int r = 0; r < p->repetitions; r++) {
        const db_req_stats *q = p->reqs + (size_t)r * (size_t)N;
        for (int i = 1; i < N; i++) {
            if (q[i].turn != q[i - 1].turn) continue; /* the next run's first request */
            double g = db_req_stats_arrival(&q[i]) - db_req_stats_arrival(&q[i - 1]);
            sum += g, sq += g * g, gaps++;
        }
    }
    *rate = sum > 0 ? gaps / sum : NAN;
    double mean = gaps ? sum / gaps : NAN, var = gaps > 1 ? (sq - gaps * mean * mean) / (gaps - 1) : NAN;
    *cv = mean > 0 && var >= 0 ? sqrt(var) / mean : NAN;
}

/* the three acceptance lengths (report.h) and the per-position rates, from the requests' counts */
static void acceptance(db_point_summary *o, const db_point_raw *p, size_t total)
{
    const db_req_stats *t = &o->total;
    double n = 0, sum = 0, wsum = 0, w = 0;
    for (size_t k = 0; k < total; k++) {
        const db_req_stats *q = &p->reqs[k];
        if (q->cycles <= 0) continue;
        double tau = db_req_stats_tau(q);
        n++, sum += tau;
        w += q->cycle_tokens, wsum += q->cycle_tokens * tau;
    }
    o->tau_request_mean = n > 0 ? sum / n : NAN;
    o->tau_token_weighted = w > 0 ? wsum / w : NAN;
    int B = p->key.block_size < DB_MAX_BLOCK ? p->key.block_size : DB_MAX_BLOCK;
    long acc = 0;
    for (int i = 0; i < DB_MAX_BLOCK; i++) o->cond_rate[i] = o->uncond_rate[i] = NAN;
    for (int i = 1; i < B; i++) {
        acc += t->accepted[i];
        o->cond_rate[i] = t->reached[i] > 0 ? (double)t->accepted[i] / (double)t->reached[i] : NAN;
        o->uncond_rate[i] = t->cycles > 0 ? (double)t->accepted[i] / t->cycles : NAN;
    }
    o->draft_acceptance_rate = B > 1 && t->cycles > 0 ? (double)acc / ((double)t->cycles * (B - 1)) : NAN;
}

/* enough samples for a spread and an interval: 2 rounds and 2 prompts on each side */
static int known(const db_point_raw *p, const db_point_raw *ar)
{
    int ok = p->repetitions >= 2 && clusters(p) >= 2;
    return ar ? ok && ar->repetitions >= 2 && ar->n_prompts >= clusters(p) : ok;
}

/* the stable rule (report.h); ar: the baseline of a drafter point, NULL for `ar` itself or
 * without one */
static void stability(db_point_summary *o, const db_point_raw *p, const db_point_raw *ar)
{
    unsigned why = 0;
    if (!(db_spread(p) <= DB_SPREAD_MAX)) why |= DB_UNSTABLE_VARIES;
    if (ar && !(db_spread(ar) <= DB_SPREAD_MAX)) why |= DB_UNSTABLE_BASE_VARIES;
    if (ar && !(o->speedup_ci_hi - o->speedup_ci_lo <= DB_CI_WIDTH_MAX * o->speedup)) why |= DB_UNSTABLE_CI_WIDE;
    if (ar && o->verify_cost_steps < 1) why |= DB_UNSTABLE_VERIFY_CHEAP;
    if (o->speedup > o->tau) why |= DB_UNSTABLE_ABOVE_TAU;
    o->unstable_why = why;
    o->stable = !known(p, ar) ? -1 : !why;
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

    double *lat = db_malloc(sizeof(double) * (total ? total : 1));
    if (!lat) return DB_ERUNTIME;
    o->wall_s = 0;
    for (int r = 0; r < R; r++) o->wall_s += p->wall_s[r] / R;
    if (R <= 0) o->wall_s = NAN;
    o->throughput_tok_s = db_throughput(p);
    o->throughput_stddev = db_round_stddev(p);
    db_in_flight(p, &o->mean_in_flight, &o->max_in_flight);
    o->contended = db_contended(p, &o->other_cores);

    o->tau = db_req_stats_tau(t);
    acceptance(o, p, total);
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

    /* serving figures: rates over the rounds' summed wall seconds */
    double wall = 0, prompt_tok = 0;
    for (int r = 0; r < R; r++) wall += p->wall_s[r];
    for (size_t k = 0; k < total; k++) prompt_tok += p->reqs[k].prompt_tokens;
    arrival_stats(p, &o->arrival_rate, &o->arrival_cv);
    o->request_throughput = wall > 0 ? (double)total / wall : NAN;
    o->input_tok_s = wall > 0 ? prompt_tok / wall : NAN;
    o->goodput = o->slo_attainment = NAN;
    if (p->slo_ttft_s > 0 || p->slo_tpot_s > 0) {
        long good = 0;
        for (size_t k = 0; k < total; k++) {
            const db_req_stats *q = &p->reqs[k];
            if (q->output_tokens < 1) continue;
            double ttft = q->t_first_token - db_req_stats_arrival(q);
            /* a one-token request has no time per output token to miss */
            double tpot = q->output_tokens >= 2 ? (q->t_finished - q->t_first_token) / (q->output_tokens - 1) : 0;
            good += (p->slo_ttft_s <= 0 || ttft <= p->slo_ttft_s) && (p->slo_tpot_s <= 0 || tpot <= p->slo_tpot_s);
        }
        o->goodput = wall > 0 ? good / wall : NAN;
        o->slo_attainment = total ? (double)good / (double)total : NAN;
    }

    /* latency distributions: TTFT and E2E from the arrival (a closed loop's: its admission) */
    int m = 0;
    for (size_t k = 0; k < total; k++)
        lat[m++] = 1e3 * (p->reqs[k].t_admitted - db_req_stats_arrival(&p->reqs[k]));
    dist(lat, m, &o->queue_ms_mean, &o->queue_ms_p50, &o->queue_ms_p90, &o->queue_ms_p99);
    m = 0;
    for (size_t k = 0; k < total; k++)
        if (p->reqs[k].output_tokens >= 1)
            lat[m++] = 1e3 * (p->reqs[k].t_first_token - db_req_stats_arrival(&p->reqs[k]));
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
            lat[m++] = 1e3 * (p->reqs[k].t_finished - db_req_stats_arrival(&p->reqs[k]));
    dist(lat, m, &o->e2e_ms_mean, &o->e2e_ms_p50, &o->e2e_ms_p90, &o->e2e_ms_p99);
    free(lat);
    double *itl = db_malloc(sizeof(double) * (p->n_itl ? p->n_itl : 1));
    if (!itl) return DB_ERUNTIME;
    for (size_t k = 0; k < p->n_itl; k++) itl[k] = 1e3 * (double)p->itl_s[k];
    dist(itl, p->n_itl < INT_MAX ? (int)p->n_itl : INT_MAX, &o->itl_ms_mean, &o->itl_ms_p50, &o->itl_ms_p90,
         &o->itl_ms_p99);
    free(itl);

    /* speedup against the baseline */
    o->speedup = o->speedup_ci_lo = o->speedup_ci_hi = NAN;
    if (is_ar(&p->key)) {
        o->speedup = o->speedup_ci_lo = o->speedup_ci_hi = 1.0;
    } else if (ar && ar->repetitions > 0) {
        double base = db_throughput(ar);
        if (base > 0) o->speedup = o->throughput_tok_s / base;
        if (base > 0 && known(p, ar) && bootstrap_ci(p, ar, seed, &o->speedup_ci_lo, &o->speedup_ci_hi) != 0)
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
    stability(o, p, is_ar(&p->key) ? NULL : ar);
    return DB_OK;
}

int db_contended(const db_point_raw *p, double *other_cores)
{
    *other_cores = p->load_s > 0 ? p->other_cpu_s / p->load_s : NAN;
    if (!(*other_cores >= 0) || p->cpus <= 0) return -1;
    /* the neighbours and this run's threads want more cores than there are: the threads wait
     * for a descheduled one at every OpenMP barrier */
    return *other_cores + (p->threads > 0 ? p->threads : 1) > p->cpus + DB_CONTENDED_CORES;
}

static const char *const why_text[] = {
    "throughput varies by more than 10% across rounds",
    "its ar baseline's throughput varies by more than 10% across rounds",
    "the speedup's 95% CI is wider than DB_CI_WIDTH_MAX of it",
    "a verify costs less than one decode step (verify_cost_steps < 1): timing noise",
    "speedup above tau (no cycle costs less than a decode step): timing noise",
};

void db_unstable_text(unsigned why, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof why_text / sizeof *why_text; i++)
        if (why & (1u << i) && o < n) {
            if ((1u << i) == DB_UNSTABLE_CI_WIDE) /* the fraction spelled from its one definition */
                o += (size_t)snprintf(buf + o, n - o, "%sthe speedup's 95%% CI is wider than %.0f%% of it",
                                      o ? "; " : "", 100 * DB_CI_WIDTH_MAX);
            else o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? "; " : "", why_text[i]);
        }
}
