/* test_timing.c — the throughput, spread, in-flight and contended definitions and the speedup
 * CI on recorded round times (result/timing.h, report/report.h), and every case of the stable
 * rule. No model runs: the rounds are written by hand. */
#include "report/report.h"
#include "result/timing.h"
#include "report_fixture.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* R rounds of N requests of D distinct prompts: request (r, i) commits tok[i] tokens (one by
 * the prefill, the rest in cycles of `tau` tokens), admitted at 0 and finished at wall[r] (all
 * in flight the whole round), verify time per cycle verify_s. */
static db_point_raw rounds(const char *variant, int R, int N, int D, const double *wall, const int *tok,
                           double tau, double verify_s)
{
    db_point_raw p = {.key = fx_key("math", variant, strcmp(variant, "ar") ? 8 : 1, N), .n_prompts = N,
                      .n_distinct = D, .repetitions = R};
    p.wall_s = calloc((size_t)R, sizeof *p.wall_s);
    p.reqs = calloc((size_t)(R * N), sizeof *p.reqs);
    for (int r = 0; r < R; r++) {
        p.wall_s[r] = wall[r];
        for (int i = 0; i < N; i++) {
            db_req_stats *q = &p.reqs[r * N + i];
            q->output_tokens = tok[i];
            q->cycle_tokens = tok[i] - 1;
            q->cycles = (int)lround((tok[i] - 1) / tau);
            q->t_verify = verify_s * q->cycles;
            q->t_first_token = 0.001;
            q->t_finished = wall[r];
        }
    }
    return p;
}

static int near(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(1, fabs(b)); }

/* rounds of 893, 81 and 58 tok/s (1000 tokens each): tokens over time, not the mean of rates */
static void throughput(void)
{
    int tok[2] = {500, 500};
    double wall[3] = {1000 / 893.0, 1000 / 81.0, 1000 / 58.0};
    db_point_raw p = rounds("ar", 3, 2, 2, wall, tok, 1, 0.001);
    double pooled = 3000 / (wall[0] + wall[1] + wall[2]);
    tap_ok(near(db_throughput(&p), pooled, 1e-12) && fabs(pooled - 97.7) < 0.1,
           "893, 81, 58 tok/s rounds: throughput %.2f tok/s (tokens over time; their mean would be 344)",
           db_throughput(&p));
    tap_ok(near(db_round_tok_s(&p, 1), 81, 1e-12), "round rate 81 tok/s");
    tap_ok(near(db_round_stddev(&p), 476.0, 2e-3), "stddev of the round rates %.1f (476)", db_round_stddev(&p));
    db_point_summary s;
    db_point_summarize(&p, NULL, 1, &s);
    tap_ok(near(s.throughput_tok_s, pooled, 1e-12) && s.stable == 0 && (s.unstable_why & DB_UNSTABLE_VARIES),
           "summary: throughput_tok_s is the pooled %.2f, stable 0 (spread %.2f)", s.throughput_tok_s, db_spread(&p));
    /* a variant 893/81/58 over an ar that ran 100 tok/s in every round: speedup and CI pooled */
    double aw[3] = {10, 10, 10};
    db_point_raw ar = rounds("ar", 3, 2, 2, aw, tok, 1, 0.001);
    db_point_raw v = rounds("dflash2", 3, 2, 2, wall, tok, 4, 0.002);
    db_point_summarize(&v, &ar, 1, &s);
    tap_ok(near(s.speedup, pooled / 100, 1e-12), "speedup = pooled / pooled = %.4f", s.speedup);
    /* resampled rounds: every resample is sum tok / sum time over 3 of the rounds, so the CI
     * lies between the slowest and the fastest round's ratio and brackets the estimate */
    tap_ok(s.speedup_ci_lo >= 0.58 - 1e-9 && s.speedup_ci_hi <= 8.93 + 1e-9 && s.speedup_ci_lo < s.speedup &&
               s.speedup < s.speedup_ci_hi,
           "CI [%.3f, %.3f] within the rounds' [0.58, 8.93] around %.3f", s.speedup_ci_lo, s.speedup_ci_hi, s.speedup);
    db_point_raw_free(&p);
    db_point_raw_free(&ar);
    db_point_raw_free(&v);

    /* a variant exactly twice as fast in every request and round: 2 [2, 2] */
    int t8[4] = {40, 50, 60, 70};
    double w1[3] = {2, 2.1, 1.9}, w2[3] = {1, 1.05, 0.95};
    ar = rounds("ar", 3, 4, 4, w1, t8, 1, 0.001);
    v = rounds("dflash2", 3, 4, 4, w2, t8, 3, 0.002);
    db_point_summarize(&v, &ar, 3, &s);
    tap_ok(near(s.speedup, 2, 1e-12) && near(s.speedup_ci_lo, 2, 1e-9) && near(s.speedup_ci_hi, 2, 1e-9),
           "twice as fast everywhere: %g [%g, %g]", s.speedup, s.speedup_ci_lo, s.speedup_ci_hi);
    tap_ok(s.stable == 1 && s.unstable_why == 0, "and stable");
    db_point_raw_free(&ar);
    db_point_raw_free(&v);
}

/* every case of the stable rule (report.h) */
static void stable_rule(void)
{
    int tok[4] = {40, 50, 60, 70};
    double steady[3] = {1, 1.02, 0.98}, fast[3] = {0.5, 0.51, 0.49}, noisy[3] = {0.5, 1.0, 0.25};
    db_point_summary s;
    db_point_raw ar = rounds("ar", 3, 4, 4, steady, tok, 1, 0.001);
    db_point_summarize(&ar, NULL, 1, &s);
    tap_ok(s.stable == 1, "ar, 3 steady rounds of 4 prompts: stable");

    db_point_raw v = rounds("dflash2", 3, 4, 4, fast, tok, 3, 0.002);
    db_point_summarize(&v, &ar, 1, &s);
    tap_ok(s.stable == 1 && near(s.verify_cost_steps, 2, 1e-9), "steady variant over a steady ar: stable");

    db_point_raw one = rounds("dflash2", 1, 4, 4, fast, tok, 3, 0.002), ar1 = rounds("ar", 1, 4, 4, steady, tok, 1, 0.001);
    db_point_summarize(&one, &ar1, 1, &s);
    tap_ok(s.stable == -1 && isnan(s.speedup_ci_lo) && isnan(s.speedup_ci_hi) && isnan(s.throughput_stddev),
           "1 round: stable unknown, no CI, no stddev (not 1 and zero width)");
    db_point_summarize(&ar1, NULL, 1, &s);
    tap_ok(s.stable == -1, "ar of 1 round: unknown");

    v.n_distinct = 1; /* 4 requests of one prompt */
    db_point_summarize(&v, &ar, 1, &s);
    tap_ok(s.stable == -1 && isnan(s.speedup_ci_lo), "1 distinct prompt: stable unknown, no CI");
    v.n_distinct = 4;

    db_point_raw arn = rounds("ar", 3, 4, 4, noisy, tok, 1, 0.001);
    db_point_summarize(&v, &arn, 1, &s);
    tap_ok(s.stable == 0 && (s.unstable_why & DB_UNSTABLE_BASE_VARIES) && !(s.unstable_why & DB_UNSTABLE_VARIES),
           "steady variant over an unsteady ar: not stable (its baseline varies)");

    db_point_raw vn = rounds("dflash2", 3, 4, 4, noisy, tok, 3, 0.002);
    db_point_summarize(&vn, &ar, 1, &s);
    tap_ok(s.stable == 0 && (s.unstable_why & DB_UNSTABLE_VARIES), "unsteady variant: not stable");

    /* prompt 0 twelve times faster than the rest: the resampled prompts swing the ratio */
    db_point_raw vw = rounds("dflash2", 3, 4, 4, fast, tok, 3, 0.002);
    for (int r = 0; r < 3; r++) vw.reqs[r * 4].output_tokens = 2000, vw.reqs[r * 4].cycle_tokens = 1999;
    db_point_summarize(&vw, &ar, 1, &s);
    tap_ok(s.stable == 0 && (s.unstable_why & DB_UNSTABLE_CI_WIDE), "CI [%.2f, %.2f] wider than %.0f%% of %.2f: not stable",
           s.speedup_ci_lo, s.speedup_ci_hi, 100 * DB_CI_WIDTH_MAX, s.speedup);

    db_point_raw vc = rounds("dflash2", 3, 4, 4, fast, tok, 3, 0.0005);
    db_point_summarize(&vc, &ar, 1, &s);
    tap_ok(s.stable == 0 && s.unstable_why == DB_UNSTABLE_VERIFY_CHEAP,
           "verify_cost_steps %.2f < 1: not stable", s.verify_cost_steps);

    db_point_raw vt = rounds("dflash2", 3, 4, 4, fast, tok, 1.5, 0.002);
    db_point_summarize(&vt, &ar, 1, &s);
    tap_ok(s.stable == 0 && s.unstable_why == DB_UNSTABLE_ABOVE_TAU, "speedup %.2f above tau %.2f: not stable",
           s.speedup, s.tau);

    char why[512];
    db_unstable_text(DB_UNSTABLE_VARIES | DB_UNSTABLE_ABOVE_TAU, why, sizeof why);
    tap_ok(strstr(why, "; ") && why[strlen(why) - 1] != ';', "reasons joined, none dangling: %s", why);
    db_point_raw *all[] = {&ar, &v, &one, &ar1, &arn, &vn, &vw, &vc, &vt};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) db_point_raw_free(all[i]);
}

static void in_flight_and_contended(void)
{
    int tok[4] = {10, 10, 10, 10};
    double wall[1] = {4};
    db_point_raw p = rounds("ar", 1, 4, 4, wall, tok, 1, 0.001);
    /* two slots: 0 and 1 from 0 to 2, 2 and 3 from 2 to 4 (a finish frees the slot it takes) */
    for (int i = 0; i < 4; i++) p.reqs[i].t_admitted = i < 2 ? 0 : 2, p.reqs[i].t_finished = i < 2 ? 2 : 4;
    double mean;
    int max;
    db_in_flight(&p, &mean, &max);
    tap_ok(near(mean, 2, 1e-12) && max == 2, "in flight: mean %g, max %d (2, 2)", mean, max);
    p.reqs[3].t_finished = 3; /* the tail: one slot empty from 3 to 4 */
    db_in_flight(&p, &mean, &max);
    tap_ok(near(mean, 7.0 / 4, 1e-12) && max == 2, "with a tail: mean 7/4 (%g)", mean);

    double other;
    p.threads = 2, p.cpus = 2;
    tap_ok(db_contended(&p, &other) == -1 && isnan(other), "no load samples: contended unknown");
    p.other_cpu_s = 3, p.load_s = 3;
    tap_ok(db_contended(&p, &other) == 1 && near(other, 1, 1e-12), "a neighbour on one of 2 cores, 2 threads: contended");
    p.threads = 1;
    tap_ok(db_contended(&p, &other) == 0, "the same at 1 thread: not contended");
    p.threads = 2, p.other_cpu_s = 0.3;
    tap_ok(db_contended(&p, &other) == 0, "0.1 cores of noise: not contended");
    db_point_raw_free(&p);
}

int main(void)
{
    (void)fx_raw, (void)fx_meta; /* the fixture's other points: test_report's */
    throughput();
    stable_rule();
    in_flight_and_contended();
    return tap_done();
}
