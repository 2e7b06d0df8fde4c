/* stats.h — what one request and one sweep point measured (definitions: README, *Result files and
 * their columns*). The speculative cycle fills db_req_stats; the serving loop sums them into a
 * db_point; the reporters write points as CSV / markdown / JSON.
 *
 * Positions i = 1..B-1 index draft slots (slot i proposes the token i steps after the anchor);
 * arrays are indexed by i directly (entry 0 unused). Acceptance length L = a + 1 in 1..B.
 * Counting rules and the derived figures (tau, rates, recall): engine.h, README "Counting conventions". */
#ifndef DB_STATS_H
#define DB_STATS_H

#include "model/model_config.h" /* DB_MAX_BLOCK */

#include <stddef.h>

typedef struct {
    int prompt_tokens;
    int output_tokens;          /* committed tokens (bonus included; the prefill's one too) */
    int cycles;                 /* drafting cycles (`ar`: decode steps); the prefill is none */
    int cycle_tokens;           /* tokens the cycles committed = output_tokens - the prefill's */
    /* per position, censored at the request's end: counted only when the output reached it */
    long drafted[DB_MAX_BLOCK];  /* positions proposed */
    long reached[DB_MAX_BLOCK];  /* of those, cycles in which positions < i were all accepted */
    long accepted[DB_MAX_BLOCK];
    long hist[DB_MAX_BLOCK + 1]; /* cycles that committed L tokens (1..B): a + 1, or fewer in a
                                  * request's last cycle when it ended inside the block */
    /* selection headroom: counted where all earlier positions were right (reached) */
    long recall1[DB_MAX_BLOCK];  /* target token == drafter's top-1 */
    long recallk[DB_MAX_BLOCK];  /* target token among the drafter's top-k */
    long recall_n[DB_MAX_BLOCK]; /* denominators */
    long oracle_len_sum;         /* sum over cycles of the oracle acceptance length */
    /* wall-clock split of this request's share of cycles, seconds; t_correct: the DSpark
     * sequential correction walk (dspark only) */
    double t_draft, t_select, t_verify, t_host, t_correct;
    /* latency, seconds from the start of the timed phase. t_arrival: when the request arrived,
     * meaningful when `scheduled` (serving-style load: its arrival time on the schedule, so
     * t_admitted - t_arrival is its wait for a slot); a closed loop's request arrives when a
     * slot takes it (db_req_stats_arrival) */
    double t_arrival, t_admitted, t_first_token, t_finished;
    int scheduled;
    int turn;                   /* 0-based turn of a multi-turn sample (set by the runner) */
    int finished_by_eos;
} db_req_stats;

void db_req_stats_add(db_req_stats *sum, const db_req_stats *r);
/* when the request arrived: t_arrival when it came on a schedule, else t_admitted (closed loop:
 * it arrives when a slot frees). TTFT and E2E count from here. */
double db_req_stats_arrival(const db_req_stats *s);
/* tau = cycle_tokens / cycles: tokens per drafting cycle, sum of (accepted + 1) over cycles (a
 * request's last cycle counts what it committed); NAN without a cycle */
double db_req_stats_tau(const db_req_stats *s);
/* output_tokens / target calls (cycles + one prefill per request that produced a token); the
 * tau of schema_version < 3 */
double db_req_stats_tokens_per_call(const db_req_stats *s);

#endif
