/* report.h — from the raw samples of a sweep point to its summary (definitions: README, *Result
 * files and their columns*), and the point's identity.
 *
 * Notation: R rounds, N requests per round, D distinct prompts among them (request entry i
 * is prompt cluster i mod D, result/point.h); request (r, i) is raw->reqs[r*N + i], tok_ri its
 * committed output tokens; wall_r the timed-phase seconds of round r.
 *   throughput = sum tok / sum wall over every round (tokens over time, result/timing.h);
 *     throughput_stddev the sample stddev of the round rates (NAN below 2 rounds).
 *   speedup = throughput / throughput of the `ar` point with the same key except variant and
 *     block size (1 for `ar` itself; NAN without a baseline).
 *   speedup CI: 95% percentile bootstrap, DB_BOOTSTRAP resamples of the D prompt clusters with
 *     replacement, the SAME clusters for the variant and for `ar` (paired), and of the R rounds
 *     with replacement, the SAME ones on both sides when both ran R (their rounds were
 *     interleaved: round r of `ar` and of the variant ran back to back). A request's time is
 *     its share of its round's timed phase, time_ri = wall_r * b_ri / sum_j b_rj with b =
 *     t_finished - t_admitted (under concurrency requests overlap, so wall time is split in
 *     proportion to how long each was in the batch). A resample gives each side's sum of tokens / sum of times over its resampled
 *     rounds and clusters (the throughput's own definition; with every cluster and round once
 *     it is exactly the point estimate) and their ratio. The resampling stream is db_rng
 *     seeded with `seed`, so the interval is reproducible. NAN (unknown) below 2 rounds or 2
 *     prompts on either side.
 *   verify_cost_steps = verify_ms_per_cycle / (1000 * sum t_verify / sum cycles of the paired
 *     `ar` point): one verify in decode steps of the baseline (1 for `ar`; NAN without one).
 *   stable = -1 (unknown, an empty field) below 2 rounds or 2 prompts on either side of the
 *     speedup; else 0 when any DB_UNSTABLE_* reason holds: its own spread (result/timing.h)
 *     above DB_SPREAD_MAX (pyperf's 10%), its `ar` baseline's too (a ratio is no steadier than
 *     its divisor), the speedup CI wider than DB_CI_WIDTH_MAX of the speedup, verify_cost_steps
 *     < 1 or speedup > tau (no cycle costs less than one decode step: timing noise); else 1.
 *   contended = 1 when other_cores (what other processes held during the timed passes,
 *     bench/machine_load.h) + this run's threads > the usable cores + DB_CONTENDED_CORES: a
 *     thread is descheduled at times and the others wait for it at every barrier; -1 unknown.
 *   mean_in_flight, max_in_flight: result/timing.h.
 *   tau = tokens committed by cycles / cycles over all requests (the prefill is no cycle; `ar`:
 *     1, each decode step commits one token); tokens_per_target_call = output tokens / (cycles +
 *     one prefill per request). Counting rules: engine.h.
 *   TTFT = t_first_token - arrival, E2E = t_finished - arrival over requests with at least one
 *     output token, arrival = t_arrival at a request rate, t_admitted in a closed loop
 *     (db_req_stats_arrival); queue = t_admitted - arrival; TPOT = (t_finished - t_first_token)
 *     / (output_tokens - 1) over requests with at least two; ITL over every recorded gap
 *     between a request's token deliveries (raw->itl_s). Mean and percentiles over all requests
 *     of all repetitions; percentiles interpolate linearly between order statistics (numpy's
 *     default, "type 7").
 *   Serving figures, over the rounds' summed wall seconds W: request_throughput = requests / W,
 *     input_tok_s = prompt tokens / W; goodput = requests meeting every SLO given (TTFT <=
 *     slo_ttft_s, TPOT <= slo_tpot_s; a one-token request has no TPOT to miss) / W, and
 *     slo_attainment their share (NAN without an SLO); arrival_rate = gaps / their seconds
 *     between consecutive requests of one engine run (a round's requests of one turn, index
 *     order), arrival_cv = their sample stddev / mean.
 *   Acceptance: tau pooled over cycles (above); tau_request_mean = mean over requests with a
 *     cycle of cycle_tokens / cycles; tau_token_weighted = the same weighted by cycle_tokens;
 *     draft_acceptance_rate = sum over positions of accepted / (cycles * (B - 1));
 *     cond_rate[i] = accepted[i] / reached[i], uncond_rate[i] = accepted[i] / cycles.
 *   x_ms_per_cycle = 1000 * sum of the requests' t_x / sum of their cycles (x = draft, select,
 *     verify, host).
 *   oracle_tau = oracle_len_sum / cycles (NAN for `ar`, which drafts nothing).
 *   output_tokens, cycles, wall_s: per round (mean over rounds). */
#ifndef DB_REPORT_H
#define DB_REPORT_H

#include "result/point.h"

#include <stddef.h>
#include <stdint.h>

#define DB_BOOTSTRAP 2000

/* 0, or DB_ERUNTIME when memory runs out. `ar` may be NULL (no baseline). */
int db_point_summarize(const db_point_raw *p, const db_point_raw *ar, uint64_t seed,
                       db_point_summary *out);

#define DB_CI_WIDTH_MAX 0.50    /* stable: speedup CI width / speedup at most this (README,
                                 * *Timing*: 8 prompts' own spread is 20-30% of it) */
#define DB_CONTENDED_CORES 0.5  /* contended: cores wanted beyond those there are */
#define DB_UNSTABLE_VARIES 1u
#define DB_UNSTABLE_BASE_VARIES 2u
#define DB_UNSTABLE_CI_WIDE 4u
#define DB_UNSTABLE_VERIFY_CHEAP 8u
#define DB_UNSTABLE_ABOVE_TAU 16u

/* A point's samples by prompt cluster and round, what the bootstraps resample (the speedup CI
 * above, `compare`'s ratios): tok[r*D + j], tim[r*D + j] are cluster j's tokens and share of
 * round r's time (time_ri above), D = the point's distinct prompts (its requests when unknown). */
typedef struct {
    int R, D;
    double *tok, *tim; /* [R*D] */
} db_clusters;
/* 0, or -1 when memory runs out (nothing held then) */
int db_clusters_init(db_clusters *c, const db_point_raw *p);
void db_clusters_free(db_clusters *c);
/* pooled throughput (sum tok / sum tim) over the clusters idx[D] of the rounds rep[R], each
 * index counted as often as it appears; NAN without time */
double db_clusters_rate(const db_clusters *c, const int *idx, const int *rep);

/* the contended rule above: 1, 0 or -1 (unknown); *other_cores: what the neighbours held (NAN
 * unknown) */
int db_contended(const db_point_raw *p, double *other_cores);

/* the reasons of DB_UNSTABLE_* bits `why` as "reason; reason" (no trailing separator) */
void db_unstable_text(unsigned why, char *buf, size_t n);

/* the key of the `ar` point that is the baseline of k */
void db_point_baseline_key(const db_point_key *k, db_point_key *ar);

#endif
