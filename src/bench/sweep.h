/* sweep.h — what `dflash-bench run` measures: the sweep axes, the single-valued settings, and
 * the enumeration of sweep points in a stable order.
 *
 * Axes take comma lists (parse.h, the list parser of every list-valued option); the integer
 * axes (concurrency, block_size) also take ranges: concurrency "1-32*2" = 1,2,4,8,16,32.
 * Temperature is a comma list of floats. The same key = value pairs come from command-line flags
 * (--block-size 8,16) and from
 * ini files (block_size = 8,16); "-" and "_" are interchangeable in key names. Settings apply in
 * the order given, so an ini file loaded first is overridden by later flags.
 *
 * Point order (stable, what points.done and the output tables follow): target, backend, dataset,
 * depth, temperature, concurrency, request rate, then the `ar` baseline once (block_size 1), then acceptance profile
 * (when profiles are replayed), then block size, then the drafter file (the plain entries of
 * `drafter`, for the variants not given a drafter of their own), then the drafter variants in
 * the order listed. `target` and the plain entries of `drafter` are comma lists of checkpoints
 * (the same model at several weight types, say): every target runs every point, its `ar` is
 * the baseline of its own drafter points only.
 * Replayed drafter points carry acceptance_source "replay:<profile>"; `ar` stays "measured"
 * (it accepts nothing). Synthetic weights mark every point weights = "synthetic" and, unless a
 * dataset is given, replace the dataset axis by "synthetic-<prompt_tokens>". The baseline therefore always precedes the points
 * whose speedup it defines. `ar` runs whenever anything runs (speedup needs it), listed or not,
 * unless no_baseline is set; it has no block size, so it is one point per (backend, dataset,
 * depth, temperature, concurrency, request rate), never one per block size.
 * request_rate takes a comma list of rates > 0 and "inf" (the closed loop, the default). */
#ifndef DB_SWEEP_H
#define DB_SWEEP_H

#include "base/parse.h"
#include "result/point.h"

#include <stddef.h>
#include <stdint.h>

#define DB_SWEEP_MAX DB_LIST_MAX /* values per axis */
#define DB_SWEEP_VARIANTS 12     /* >= DB_VAR_COUNT (variant.h), checked in sweep.c */
#define DB_SWEEP_MODELS 8        /* targets, and plain drafter entries, per sweep */
#ifndef DB_SWEEP_MAX_POINTS /* fuzz builds set a smaller one (meson.build) */
#define DB_SWEEP_MAX_POINTS 10000 /* points per sweep (db_sweep_validate refuses more) */
#endif

typedef struct {
    /* axes */
    char backend[DB_SWEEP_MAX][16];
    int n_backend;
    char dataset[DB_SWEEP_MAX][64];
    int n_dataset;
    int depth[DB_SWEEP_MAX];       /* tokens of context before every prompt (prompt_set.h
                                    * db_prompt_set_depth); default 0 */
    int n_depth;
    int concurrency[DB_SWEEP_MAX]; /* key `max_concurrency` is another name of it */
    int n_concurrency;
    double request_rate[DB_SWEEP_MAX]; /* requests per second; INFINITY = closed loop ("inf") */
    int n_request_rate;
    int block_size[DB_SWEEP_MAX];
    int n_block_size;
    char variant[DB_SWEEP_MAX][16];
    int n_variant;
    float temperature[DB_SWEEP_MAX];
    int n_temperature;
    /* single values */
    float top_p;            /* (0, 1] */
    int top_k;              /* 0 = all */
    int max_new_tokens;
    int max_samples;        /* prompts per dataset */
    uint64_t seed;
    int repetitions;        /* timed rounds of every point, at least (runner.h) */
    int max_rounds;         /* at most; rounds past `repetitions` run while a point's
                             * throughput spread is above DB_SPREAD_MAX (result/timing.h) */
    double min_time;        /* seconds a round lasts at least (its requests per pass
                             * calibrated by the warm-up); 0 = no calibration */
    int warmup;             /* untimed warm-up runs before the first repetition */
    char target[DB_SWEEP_MODELS][512]; /* target checkpoints (an axis) */
    int n_target;
    char drafter[DB_SWEEP_MODELS][512]; /* drafters of every drafter variant not named below
                                         * (an axis); n_drafter 0 = none */
    int n_drafter;
    /* drafter of one variant, by variant.h index ("" = the one above): the key
     * `drafter = DIR,dflash=DIR1,dflash2=DIR2` sets drafter to DIR and these; dflash2=DIR also
     * covers the DFlash 2 ablations (selector-off, conv-off, dflash2-bare) not named themselves.
     * Default: dflash on models/tiny-qwen3-dflash-b16 (DFlash 1), the others on
     * models/tiny-qwen3-dflash2-b16. */
    char variant_drafter[DB_SWEEP_VARIANTS][512];
    char out[512];          /* results directory; "" = results/<UTC time>[-label] */
    char label[64];
    char chat_template[16]; /* none, chatml, llama3 */
    int thinking, no_baseline, deterministic;
    int allow_long_context; /* past max_position_embeddings (db_gen_params.allow_long_context) */
    char output[8];         /* stdout format: md, csv, json */
    char format_files[16];  /* the tables' files: csv, or csv,json (JSON Lines beside each CSV) */
    int threads;            /* 0 = all cores */
    char kv_dtype[8];       /* K/V caches of target and drafter: auto (default), f32 or f16 */
    /* capacity planning (capacity.h, synthetic.h, profile.h) */
    int synthetic;          /* random weights of the configs' shapes, generated on the backend */
    char target_config[512], drafter_config[512]; /* config.json files (synthetic); "" = the
                                                      config.json of target / drafter */
    char dtype[8];          /* storage dtype of synthetic weights: bf16 (default), f16, f32 */
    int prompt_tokens;      /* length of synthetic prompts (dataset synthetic-<N>), default 128 */
    int dataset_set;        /* the dataset axis was given (not the default) */
    /* acceptance profiles to replay (an axis; empty = measured acceptance): each entry a
     * profile spec of profile.h (at most 120 characters), or "none" for a measured point
     * among replayed ones; "none" alone empties the axis */
    char profile[DB_SWEEP_MAX][128];
    int n_profile;
    double slo_ttft_ms, slo_tpot_ms; /* goodput's service-level objectives; 0 = none */
    int predict;            /* roofline prediction in every row (predicted_tok_s) */
    double bandwidth_gbs, gflops; /* device figures for the prediction; 0 = measure */
    char device_config[512]; /* a device preset (bench/device_preset.h) for the prediction and
                              * --shard's cost model instead of those; "" = none */
} db_sweep;

/* the default sweep (configs/default.ini spells out the same values) */
void db_sweep_init(db_sweep *s);
/* Set one key. Boolean keys (thinking, no_baseline, deterministic) accept value NULL as "true"
 * (a bare --no-baseline flag) and 0/1/true/false/yes/no/on/off. A list replaces the whole axis.
 * Unknown key or bad value: DB_EINPUT, nothing changed. */
int db_sweep_set(db_sweep *s, const char *key, const char *value, char *err, size_t errlen);
/* every key = value of an ini file (top level or a [sweep] section) through db_sweep_set;
 * the first error is reported as "path:line: message" */
int db_sweep_load_ini(db_sweep *s, const char *path, char *err, size_t errlen);
/* checks across keys (block size < 2 with a drafter variant, nothing to run, more than
 * DB_SWEEP_MAX_POINTS points, ...) */
int db_sweep_validate(const db_sweep *s, char *err, size_t errlen);
/* the points in the order above (validates first); *out is malloc'd, free() it */
int db_sweep_points(const db_sweep *s, db_point_key **out, int *n, char *err, size_t errlen);

/* the drafter checkpoint variant runs with plain drafter entry di (the rules above); "" for
 * none or `ar` */
const char *db_sweep_drafter(const db_sweep *s, const char *variant, int di);
/* the variant has a drafter of its own (VARIANT=DIR, or dflash2=DIR for an ablation): the
 * plain drafter entries are not an axis of its points */
int db_sweep_drafter_own(const db_sweep *s, const char *variant);
/* the last non-empty component of path ("models/tiny-qwen3/" -> "tiny-qwen3") into buf */
void db_model_name(const char *path, char *buf, size_t n);

/* "synthetic-<N>" (N >= 1 prompt tokens): the dataset of N random token ids per prompt; *n = N */
int db_dataset_is_synthetic(const char *name, int *n);

/* The value of key (underscore spelling) as text that db_sweep_set takes back to the same
 * value: lists comma-joined, numbers exact ("%.9g" for floats). 1, with buf "", when the key is
 * unset (an empty string, no dataset given, no device figure or SLO given), 0 otherwise. What
 * meta.json records as the run's sweep, and what --resume compares. */
int db_sweep_get(const db_sweep *s, const char *key, char *buf, size_t n);

/* the i-th key name (underscore spelling), NULL past the last: the keys a `run` flag or an ini
 * line may set */
const char *db_sweep_key(int i);

#endif
