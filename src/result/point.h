/* point.h — one point of a benchmark sweep: its key (the axes' values), the raw samples the
 * serving loop measured, and the summary the reporters derive from them (the definitions are
 * README's *Result files and their columns*).
 *
 * Raw samples are kept (requests.csv); every figure of the summary is computed from them, never
 * measured separately. */
#ifndef DB_POINT_H
#define DB_POINT_H

#include "engine/stats.h"

#include <stddef.h>

#define DB_POINT_ID_MAX 1024 /* bytes of a point id (db_point_id), its terminator included */

typedef struct {
    char backend[16];
    char dataset[64];
    char variant[16];       /* ar, dflash, selector-off, conv-off, dflash2 */
    int block_size;         /* 1 for ar */
    int concurrency;        /* requests in flight (a finite request_rate: at most) */
    double request_rate;    /* requests arriving per second; inf (or 0) = closed loop */
    int depth;              /* tokens of context before each prompt (run's depth axis), 0 = none */
    float temperature, top_p;
    int top_k;
    int max_new_tokens;
    char chat_template[16]; /* none, chatml, llama3 */
    int thinking;
    char acceptance_source[128]; /* "measured" or "replay:<file>" */
    char weights[16];            /* "file" or "synthetic" */
    char target[128];            /* the target checkpoint's name (sweep.h db_model_name) */
    char drafter[128];           /* the drafter checkpoint's name, "" for ar */
    int target_i, drafter_i;     /* indices into the sweep's target / plain drafter lists (not
                                  * part of the point's id: the names are) */
} db_point_key;

typedef struct {
    db_point_key key;
    int n_prompts;         /* requests per round, every turn counted (N) */
    int n_distinct;        /* distinct prompts (D) among them: request i (first turns) is prompt
                            * i mod D, N a multiple of D; 0 when unknown (a loaded baseline) */
    int repetitions;       /* rounds run (R) */
    double *wall_s;        /* [repetitions] timed-phase seconds */
    double *rep_start_s;   /* [repetitions] start of each timed pass, seconds since the
                            * invocation's first; NULL when not recorded (loaded baselines) */
    long major_faults;     /* major page faults during the timed passes */
    db_req_stats *reqs;    /* [repetitions * n_prompts]; request i of rep r at r*n_prompts + i */
    double peak_mem_mib;   /* backend bytes_peak (weights + caches + activations), MiB */
    double predicted_tok_s; /* roofline prediction, 0 when none */
    /* the neighbours: CPU seconds other processes used during the timed passes, over
     * load_s seconds of them (machine_load.h; load_s 0: unknown), and the threads this run
     * computes with on cpus usable cores (0: unknown) */
    double other_cpu_s, load_s;
    int threads, cpus;
    /* inter-token latencies: the seconds between successive token deliveries of every request
     * of every round (engine.h db_request.itl), n_itl of them; NULL when not recorded (a loaded
     * baseline) */
    float *itl_s;
    size_t n_itl, cap_itl;
    double slo_ttft_s, slo_tpot_s; /* goodput's service-level objectives, seconds; 0 = none */
} db_point_raw;

typedef struct {
    long output_tokens;         /* per round (mean) */
    double wall_s;              /* mean */
    double throughput_tok_s;    /* tokens over time of all rounds (result/timing.h) */
    double throughput_stddev;   /* sample stddev of the round rates; NAN below 2 rounds */
    int stable;                 /* 1, 0, or -1 unknown (report.h: the rule) */
    unsigned unstable_why;      /* DB_UNSTABLE_* bits (report.h) */
    double mean_in_flight;      /* result/timing.h */
    int max_in_flight;
    double other_cores;         /* cores other processes held during the timed passes (NAN unknown) */
    int contended;              /* 1, 0, or -1 unknown (report.h: the rule) */
    double speedup;             /* throughput / throughput(ar, same key but variant); NAN if none */
    double speedup_ci_lo, speedup_ci_hi; /* 95% bootstrap over prompts and rounds, paired with ar */
    double tau;                 /* tokens committed per drafting cycle (prefill excluded): pooled
                                 * over the cycles of all requests */
    double tau_request_mean;    /* the mean over requests of each one's tau */
    double tau_token_weighted;  /* the requests' tau weighted by their cycle tokens */
    double draft_acceptance_rate; /* accepted drafts / drafted tokens, cycles x (B - 1) */
    /* per draft position i (1..B-1): accepted / reached (conditional) and accepted / drafting
     * cycles (unconditional, vLLM's per-position acceptance rate); NAN without a denominator */
    double cond_rate[DB_MAX_BLOCK], uncond_rate[DB_MAX_BLOCK];
    double tokens_per_target_call; /* output tokens / (cycles + prefills) */
    long cycles;                /* per repetition (mean) */
    /* serving-style load: measured arrival rate (requests / seconds between a run's first and
     * last arrival), the arrival gaps' coefficient of variation, requests and prompt tokens per
     * second, goodput (requests meeting every SLO per second, NAN without an SLO) and the share
     * of requests meeting them */
    double arrival_rate, arrival_cv, request_throughput, input_tok_s, goodput, slo_attainment;
    double queue_ms_mean, queue_ms_p50, queue_ms_p90, queue_ms_p99;
    double itl_ms_mean, itl_ms_p50, itl_ms_p90, itl_ms_p99;
    double ttft_ms_mean, ttft_ms_p50, ttft_ms_p90, ttft_ms_p99;
    double tpot_ms_mean, tpot_ms_p50, tpot_ms_p90, tpot_ms_p99;
    double e2e_ms_mean, e2e_ms_p50, e2e_ms_p90, e2e_ms_p99;
    double draft_ms_per_cycle, select_ms_per_cycle, verify_ms_per_cycle, host_ms_per_cycle;
    double correct_ms_per_cycle; /* the DSpark sequential correction walk (0 for the others) */
    double verify_cost_steps;   /* verify time per cycle / the paired ar's verify time per step */
    double oracle_tau;          /* mean oracle acceptance length over top-k */
    double measured_over_predicted; /* NAN without a prediction */
    db_req_stats total;         /* all requests of all repetitions summed */
} db_point_summary;

/* The axes of a point: the fields of db_point_key that tell two points of one sweep apart, in
 * the order of db_point_id, each with its column in every table (report_csv.c writes the same
 * names) and the prefix its value has in the id. This table is the one list of them: the id,
 * and `compare`'s matching of rows across two results directories (report/compare.h), are
 * built from it, so an axis added here joins both. The label, the results directory and the
 * run's provenance (machine, build, threads) are not axes. */
typedef enum { DB_AXIS_STR, DB_AXIS_INT, DB_AXIS_FLOAT, DB_AXIS_RATE, DB_AXIS_COUNT } db_axis_type;
typedef struct {
    const char *column;    /* its column in the tables ("block_size") */
    const char *id_prefix; /* before its value in db_point_id ("B") */
    db_axis_type type;     /* char[] / int / float field / double rate (in the id only when finite) /
                            * int count (in the id only when non-zero) */
    size_t offset, size;   /* of the field in db_point_key */
} db_axis;
extern const db_axis db_point_axes[];
extern const int db_point_n_axes;

/* set axis a of k from its text in a table (the column's value); -1 when it is no number where
 * the axis wants one, or too long */
int db_point_axis_set(db_point_key *k, const db_axis *a, const char *value);

/* 1 when the keys name the same point */
int db_point_key_equal(const db_point_key *a, const db_point_key *b);
/* A stable text id of the point, the same for the same key in every run (points.done and the
 * point_id column): backend|dataset|variant|B<block>|c<conc>|T<temp>|p<top_p>|k<top_k>|
 * n<max_new>|<chat_template>|think<0/1>|<acceptance_source>|<weights>|<target>|<drafter>, then
 * |r<rate> at a finite request rate (a closed loop's id is as before arrivals existed), then
 * |D<depth> at a depth > 0 (likewise);
 * control characters become '?'. */
void db_point_id(const db_point_key *k, char *buf, size_t n);
/* free a db_point_raw's arrays (the runner's, or a loaded baseline's) and set them to NULL */
void db_point_raw_free(db_point_raw *p);

#endif
