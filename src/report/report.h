/* report.h — from the raw samples of a sweep point to its summary (definitions: README, *Result
 * files and their columns*), and the point's identity.
 *
 * Notation: R repetitions, N prompts; request (r, i) is raw->reqs[r*N + i]; tok_ri its
 * committed output tokens; wall_r the timed-phase seconds of repetition r.
 *   throughput_r = sum_i tok_ri / wall_r; mean and sample stddev (n-1) over r.
 *   speedup = mean throughput / mean throughput of the `ar` point with the same key except
 *     variant and block size (1 for `ar` itself; NAN without a baseline).
 *   speedup CI: 95% percentile bootstrap, DB_BOOTSTRAP resamples of the N prompt indices with
 *     replacement, the SAME indices for the variant and for `ar` (paired), and of the R
 *     repetitions with replacement, the SAME ones on both sides when both ran R (their rounds
 *     were interleaved: repetition r of `ar` and of the variant ran back to back). A prompt's time is
 *     its share of the timed phase, time_ri = wall_r * e2e_ri / sum_j e2e_rj (its end-to-end
 *     latency share: under concurrency requests overlap, so wall time is split in proportion to
 *     how long each was in flight). A resample S gives mean_r(sum_S tok_ri / sum_S time_ri) per
 *     side (over the resampled repetitions) and their ratio; with S = all prompts and every
 *     repetition once this is exactly the point estimate. The
 *     resampling stream is db_rng seeded with `seed`, so the interval is reproducible. NAN when
 *     the two points do not have the same prompts (N differs).
 *   verify_cost_steps = verify_ms_per_cycle / (1000 * sum t_verify / sum cycles of the paired
 *     `ar` point): one verify in decode steps of the baseline (1 for `ar`; NAN without one).
 *   stable = 0 when throughput_stddev > 0.10 * throughput (pyperf's rule) or speedup > tau (no
 *     cycle that costs at least one decode step can give that: the timing is noise).
 *   tau = tokens committed by cycles / cycles over all requests (the prefill is no cycle; `ar`:
 *     1, each decode step commits one token); tokens_per_target_call = output tokens / (cycles +
 *     one prefill per request). Counting rules: engine.h.
 *   TTFT = t_first_token - t_admitted, E2E = t_finished - t_admitted over requests with at least
 *     one output token; TPOT = (t_finished - t_first_token) / (output_tokens - 1) over requests
 *     with at least two. Mean and percentiles over all requests of all repetitions; percentiles
 *     interpolate linearly between order statistics (numpy's default, "type 7").
 *   x_ms_per_cycle = 1000 * sum of the requests' t_x / sum of their cycles (x = draft, select,
 *     verify, host).
 *   oracle_tau = oracle_len_sum / cycles (NAN for `ar`, which drafts nothing).
 *   output_tokens, cycles, wall_s: per repetition (mean over repetitions). */
#ifndef DB_REPORT_H
#define DB_REPORT_H

#include "result/point.h"

#include <stddef.h>
#include <stdint.h>

#define DB_BOOTSTRAP 2000

/* 0, or DB_ERUNTIME when memory runs out. `ar` may be NULL (no baseline). */
int db_point_summarize(const db_point_raw *p, const db_point_raw *ar, uint64_t seed,
                       db_point_summary *out);

/* The two halves of the stable rule (stable = neither), for whoever says why a point is not:
 * the throughput's stddev across repetitions above 10% of its mean (pyperf's rule), and a
 * speedup above tau (timing noise). */
int db_throughput_varies(const db_point_summary *s);
int db_speedup_above_tau(const db_point_summary *s);

/* the key of the `ar` point that is the baseline of k */
void db_point_baseline_key(const db_point_key *k, db_point_key *ar);

#endif
