/* runner.h — the measurement procedure: passes through the engine (closed-loop, or with
 * requests arriving at a rate: below), warm-up and timed passes (multi-turn sets: a later turn
 * carries the answers decoded so far), rotated rounds over a group of points, and for a sweep (db_sweep_runner) the prompt sets, the memory
 * check and the models on the device target by target. Every command that runs the engine
 * (run, plan, check-lossless, generate) runs it through here.
 *
 * A pass runs n requests closed-loop (at a finite request rate: as they arrive) through an
 * engine of min(c, n) slots: request q is the
 * set's prompt q mod D with a seed of its own (engine.h: seed, request index), first turns,
 * then (multi-turn sets) the second turns with each request's decoded answer in the
 * conversation, and so on. n = D * ceil(max(D, waves * c) / D): every prompt equally often, and
 * at least `waves` requests per slot so the pass's tail (slots emptying as the last requests
 * finish) is short and c are in flight for most of it (result/timing.h: mean_in_flight).
 * A pass's wall time is the sum of its turns' engine runs (sizing the engine and decoding
 * answers between turns are outside it).
 *
 * Per point: W untimed warm-up passes of one wave (c first turns); then rounds, one timed pass each. With
 * min_time > 0 (and W >= 1 at full length) the last warm-up calibrates the timed pass: its n
 * is multiplied so that the pass lasts about min_time (Google Benchmark's iteration sizing; a
 * short pass is all scheduler and timer noise). Rounds run until R = repetitions have run and
 * every point's spread (result/timing.h) is at most DB_SPREAD_MAX, or max_rounds have run.
 * Every point sees the same prompts and per-request seeds, so a variant pairs with `ar`
 * prompt by prompt.
 *
 * Notation: P = points of a group, R = rounds, W = warm-up passes, D = distinct prompts of the
 * set, c = concurrency. */
#ifndef DB_RUNNER_H
#define DB_RUNNER_H

#include "bench/drafter_set.h"
#include "result/point.h"
#include "bench/profile.h"
#include "bench/capacity.h"
#include "bench/prompt_set.h"
#include "bench/sweep.h"
#include "engine/engine.h"
#include "engine/session.h"

#include <signal.h>

/* ---- the procedure ---- */

/* what the engine runs for one point */
typedef struct {
    db_gen_params p;           /* variant, block size, sampling, tokens, seed, replay */
    db_drafter *drafter;       /* NULL for ar */
    const db_prompt_set *ps;   /* its prompts */
    int concurrency;           /* requests in flight (at a finite request rate: at most) */
    double request_rate;       /* arrivals per second; 0 or inf: closed loop (db_runner_closed) */
} db_run_point;

typedef struct {
    db_backend *be;            /* peak memory per timed pass */
    db_target *target;         /* on the device */
    const db_tokenizer *tok;   /* decodes answers for later turns (NULL: one-turn sets only) */
    db_chat_template tmpl;
    int thinking;
    int warmup;                /* W */
    int repetitions;           /* rounds, at least */
    int max_rounds;            /* at most (< repetitions, or repetitions 1: repetitions) */
    double min_time;           /* seconds a timed pass lasts at least (calibrated); 0: no calibration */
    int waves;                 /* requests per slot per pass, at least; 0: one pass of the set */
    int warmup_tokens;         /* tokens of a warm-up request; 0: the point's max_new_tokens */
    const volatile sig_atomic_t *stop; /* non-zero: the group ends at its pass's next cycle
                                        * (db_gen_params.stop) with DB_ESIGNAL(*stop), its
                                        * points dropped; NULL: never */
    int (*after_pass)(void *user, char *err, size_t errlen); /* after every timed pass, or NULL */
    void *user;
    double t_origin;           /* db_now() at the first timed pass (requests' start_s); set < 0 */
} db_runner;

#define DB_RUNNER_WAVES 4          /* `run`'s waves: README, *Timing* */
#define DB_RUNNER_MAX_REQUESTS 4096 /* a calibrated pass's first-turn requests, at most */
#define DB_RUNNER_RATE_REQUESTS 100 /* a rate point's arrivals per pass, at least (README, *Serving-style load*) */

/* first-turn requests of a pass over D distinct prompts at concurrency c (above) */
int db_runner_requests(int D, int c, int waves);

/* ---- serving-style load: requests arriving at a rate (README, *Serving-style load*) ----
 * At a finite rate R a pass's requests arrive on a schedule instead of all at once: the engine
 * admits request q at its arrival time, once one of its c slots is free (c caps what is in
 * flight, vLLM's --max-concurrency; an arrival finding every slot busy waits, FIFO, and its
 * TTFT counts the wait). The pass has max(4c, D, DB_RUNNER_RATE_REQUESTS, R * min_time)
 * first-turn requests, rounded up to a multiple of D and at most about DB_RUNNER_MAX_REQUESTS
 * (the rate, not the warm-up, sets how long it lasts), the same n for every point of a group.
 * Each turn's run draws its schedule from the sweep's seed and the turn, so `ar` and every
 * variant of a group, and every round, see the same arrival times; a round is one such pass per
 * point, rotated as in a closed loop. Warm-ups stay closed-loop. */

/* 1 when rate means a closed loop (0, negative, inf, NaN) */
int db_runner_closed(double rate);
/* t[n]: the arrival times, seconds from a run's start, of a Poisson process of rate `rate`
 * conditioned on its n-th arrival falling at n / rate: n exponential gaps drawn from the
 * generator seeded with `seed`, scaled so that they sum to n / rate (the first n - 1 times are
 * then n - 1 sorted uniforms on [0, n / rate]: the gaps keep the Poisson shape, and every pass
 * gets the asked rate rather than one off by ~1/sqrt(n)) */
void db_runner_arrivals(double rate, int n, uint64_t seed, double *t);
/* first-turn requests of a pass over D prompts at concurrency c and rate (closed: the
 * uncalibrated closed-loop pass) */
int db_runner_rate_requests(int D, int c, double rate, double min_time);

/* One pass of reqs[n] through an engine of min(conc, n) slots on t (and d, NULL for ar) sized
 * for them. Sizing (cache allocation) is outside the timing: *secs (if not NULL) gains the
 * run's duration; *t0 < 0 becomes its start, the origin of the requests' time stamps. A
 * scheduled request's arrival is given in seconds from this run's start and moved onto t0's
 * clock here. */
int db_runner_pass(db_target *t, db_drafter *d, const db_gen_params *p, int conc, db_request *reqs,
                   int n, double *t0, double *secs, char *err, size_t errlen);

/* One group: every point's W warm-up passes, then R rounds; round r runs every point once,
 * starting at point r mod P (rotated), so a change of machine load falls on `ar` and the
 * variants alike. raw[j] (its key set by the caller) gets point j's requests, wall times,
 * start times, inter-token latencies, page faults, peak memory and the neighbours' load; on
 * failure raw holds nothing. */
int db_runner_group(db_runner *r, const db_run_point *pts, db_point_raw *raw, int P, char *err,
                    size_t errlen);

/* ---- a sweep on one backend ---- */

typedef struct {
    db_sweep *sw;
    db_point_key *keys;        /* [nkeys] the points, in sweep order (a shard: its own) */
    int nkeys;
    int maxb;                  /* largest block size of a drafter point */
    int need_drafter;
    db_model_config tcfg;      /* the current target's config (target 0's before any runs) */
    int max_pos[DB_SWEEP_MODELS]; /* each target's max_position_embeddings (configs) */
    const char *tpath;         /* its checkpoint, or (synthetic) the config that stands for it */
    int cur_target;            /* its index in the sweep's targets, -1 before the first */
    db_drafter_set ds;         /* the drafters of the current target's points */
    db_synth_opts syn;
    db_dtype wdtype;           /* the current target's weight dtype (synthetic: the chosen one) */
    db_dtype kv_dtype;         /* the K/V caches' (sweep key kv_dtype, auto resolved) */
    db_profile profiles[DB_SWEEP_MAX]; /* acceptance profiles, in sweep order */
    db_hw hw;                  /* device figures: --predict's, and the estimate's when measured */
    int hw_known;              /* hw holds them (db_sweep_runner_device_figures ran) */
    db_tokenizer tok;
    db_chat_template tmpl;
    db_prompt_set *sets;       /* [n_sets] one per dataset */
    int n_sets;
    db_session s;
    int session_open;
    db_session_opts so;
    db_runner run;
} db_sweep_runner;

/* the sweep's model paths found (base/paths.h), kv dtype, points, and what is checkable from
 * names alone: one compiled backend, datasets that resolve, profiles that load */
int db_sweep_runner_init(db_sweep_runner *sr, db_sweep *sw, char *err, size_t errlen);
/* every target's config, its drafters checked against it, before any weight loads; the
 * targets of one sweep share a vocabulary */
int db_sweep_runner_configs(db_sweep_runner *sr, char *err, size_t errlen);
/* tokenizer, chat template (completing the keys' chat_template) and the prompt sets */
int db_sweep_runner_prompts(db_sweep_runner *sr, char *err, size_t errlen);
/* cost[nkeys]: each point's predicted cost by cost_of (the shard balance: cluster/shard.h
 * db_shard_point_cost), from its target's and drafter's configs and its prompt set's requests
 * per pass and mean first-turn length, on device figures hw (NULL: the sweep's, shard.h) */
typedef double (*db_point_cost_fn)(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                                   const db_sweep *sw, const db_point_key *k, int turns, double prompt_len,
                                   const db_hw *hw);
int db_sweep_runner_costs(db_sweep_runner *sr, db_point_cost_fn cost_of, const db_hw *hw, double *cost,
                          char *err, size_t errlen);
/* the backend, and with --predict the roofline's figures, measured before any model loads */
int db_sweep_runner_open_backend(db_sweep_runner *sr, char *err, size_t errlen);
/* sr->hw from --device-config, or both of --bandwidth-gbs / --gflops, or else measured on the open
 * backend (capacity.h db_hw_figures, on the first target's shapes: a few seconds); once */
int db_sweep_runner_device_figures(db_sweep_runner *sr, char *err, size_t errlen);
/* the checkpoint of target entry ti, or (synthetic) the config that stands for it */
const char *db_sweep_runner_target_path(const db_sweep_runner *sr, int ti);
/* the main weight dtype of a checkpoint (synthetic: the chosen one) */
/* mix (NULL: not wanted; mixlen bytes): db_tensors_mix's name of the checkpoint's weights */
int db_sweep_runner_main_dtype(const db_sweep_runner *sr, const char *path, db_dtype *dt, char *mix, size_t mixlen, char *err,
                               size_t errlen);
/* the group keys[i0, i1): its target on the device (the previous one's models freed, the
 * memory checked first), then measured (db_runner_group) into raw[i1 - i0] */
int db_sweep_runner_group(db_sweep_runner *sr, int i0, int i1, db_point_raw *raw, char *err,
                          size_t errlen);
void db_sweep_runner_free(db_sweep_runner *sr);

#endif
