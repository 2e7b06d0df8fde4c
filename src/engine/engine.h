/* engine.h — the serving loop: continuous batching of requests through the draft -> select ->
 * verify cycle (or plain autoregressive steps for `ar`), closed-loop or with requests arriving
 * on a schedule (db_request.scheduled).
 *
 * With concurrency N, N request slots are in flight; a finished request's slot takes the next
 * prompt (closed loop: at once; scheduled: once it has arrived) until the set is exhausted. Newly admitted requests are prefilled by their own target
 * calls (chunked), before they join the batch; TTFT includes that prefill and the first token
 * it yields. Each cycle then batches ALL active requests into ONE drafter call, the selector
 * walks each request's block on the host, and ONE target verify call covers all their rows.
 *
 * Counting (db_req_stats, stats.h; for users: README, "Counting conventions"):
 *   - a request's prefill commits its first token and is NOT a cycle;
 *   - a cycle is one drafting cycle (`ar`: one decode step, accepted 0). It commits a + 1 tokens
 *     (a accepted drafts + the bonus), or fewer when the request ends inside it (EOS or
 *     max_new_tokens): then it counts the tokens it did commit. hist[L] counts cycles by those
 *     committed tokens, so sum_L L*hist[L] + one token per prefill == output_tokens;
 *   - tau = cycle_tokens / cycles (exactly 1 for `ar`, computed like any variant);
 *     tokens per target call = output_tokens / (cycles + prefills);
 *   - per-position drafted / reached / accepted, recall@1 / recall@k and the oracle acceptance
 *     are censored at the request's end: position i of a cycle counts only if the request's
 *     output has a token there. They are resolved once the output has grown past the block (or
 *     the request ended), against the request's final committed tokens (the target's output).
 *
 * Notation: N concurrency, B block, V vocabulary, k = top-k width kept per draft row. */
#ifndef DB_ENGINE_H
#define DB_ENGINE_H

#include "model/drafter.h"
#include "engine/stats.h"
#include "model/target.h"
#include "engine/variant.h"

#include <signal.h>
#include <stdint.h>

/* Prompts are prefilled in target calls of up to DB_PREFILL_CHUNK rows; the target's and the
 * drafter's state hold max(N*B, DB_PREFILL_CHUNK) rows (capacity.h sizes and costs the same). */
#define DB_PREFILL_CHUNK 128

typedef struct {
    db_variant variant;
    int block_size;       /* B; ignored for ar */
    float temperature;    /* 0 = greedy */
    float top_p;
    int top_k;
    int max_new_tokens;
    uint64_t seed;
    int recall_k;         /* top-k width for recall@k / oracle (default 16) */
    /* Acceptance replay (capacity planning): when replay_rates is set, verification accepts
     * draft position i (1..B-1, reached) with probability replay_rates[i-1], drawn from a
     * stream of its own seeded per request (seed, request index), instead of the greedy /
     * sampling rule; the bonus token is the target's argmax at the stop row. Every kernel of
     * the cycle still runs at full size. B-1 must not exceed replay_n. */
    const float *replay_rates;
    int replay_n;
    int ignore_eos;       /* run every request to max_new_tokens (synthetic weights) */
    db_dtype kv_dtype;    /* the target's and drafter's KV caches: DB_F32 (0) or DB_F16 */
    /* optional: called after every drafting cycle with the block [anchor, d1..] of request
     * `req` at anchor position `pos`, the accepted count and the bonus token */
    void (*on_cycle)(void *user, int req, int pos, const int *block, int b, int accepted,
                     int bonus);
    void *on_cycle_user;
    /* optional, greedy only: called for every target row whose token is picked outside a verify
     * (the prefill's and `ar`'s steps; row r of the n picked together), with the top-1 minus
     * top-2 logit: the margin a rounding difference must cross to flip the pick (engines
     * compared token for token part where it is small). The logits are copied to the host for
     * it: a tracing aid, not for timed runs. */
    void (*on_pick)(void *user, int row, int token, float margin);
    /* optional: a signal handler's flag, read at every cycle (and prefill call) boundary; once
     * non-zero the run ends there with DB_ESIGNAL(*stop), its requests unfinished, so a SIGTERM
     * takes one cycle, not the rest of a pass (the caller drops what the pass measured) */
    const volatile sig_atomic_t *stop;
    /* run past the target's max_position_embeddings (prompt + max_new_tokens + B), for a model
     * whose RoPE holds there; otherwise db_engine_create refuses it (DB_EINPUT) */
    int allow_long_context;
} db_gen_params;

typedef struct {
    const int *prompt;
    int n_prompt;
    int *out;         /* [max_new_tokens], filled by the engine */
    int n_out;
    /* serving-style load: a `scheduled` request arrives at `arrival` (seconds since t0) and is
     * admitted once it has arrived and a slot is free, in index order (so arrivals must not
     * decrease along the array); when no request is active the engine sleeps until the next
     * arrival. Not scheduled (0, the default): it arrives when a slot takes it (closed loop). */
    int scheduled;
    double arrival;
    /* optional: itl[0 .. itl_cap) gets the seconds between the request's successive token
     * deliveries (each cycle or decode step that commits tokens, after the prefill's first
     * token), n_itl counts them (those past itl_cap are counted, not stored) */
    float *itl;
    int itl_cap, n_itl;
    db_req_stats st;
} db_request;

typedef struct db_engine db_engine;

/* Size caches for `concurrency` requests of prompts up to max_prompt tokens (allocates the
 * target's and drafter's state; d may be NULL for ar). */
int db_engine_create(db_engine **e, db_target *t, db_drafter *d, const db_gen_params *p,
                     int concurrency, int max_prompt, char *err, size_t errlen);
void db_engine_destroy(db_engine *e);

typedef void (*db_progress_fn)(void *user, int done, int total);

/* Run all requests through the loop: closed (every request there from the start), or
 * requests arriving on a schedule (db_request.scheduled). Latency times are seconds since t0. */
int db_engine_run(db_engine *e, db_request *reqs, int n, double t0, db_progress_fn progress,
                  void *user, char *err, size_t errlen);

#endif
