/* shard.h — `run --shard K/N`: a deterministic partition of a sweep's points into N shards, so
 * that N machines (MPI ranks, Slurm array tasks) each run one and `merge` joins the results.
 *
 * Notation: a group is the points sharing (target, backend, dataset, temperature, concurrency): the `ar`
 * baseline and every variant and block size whose speedup it defines (sweep.h orders them
 * contiguously; `run` measures a group as one unit of interleaved rounds). A group is never
 * split, so a speedup never divides numbers measured on two machines.
 *
 * Cost of a point (a prediction, used only to balance shards): the capacity roofline of its
 * timed passes and warm-up (capacity.h db_roofline_wave, the cost model of --predict too):
 * W warm-ups of one wave + R rounds, a round max(pass, ceil(min_time / pass) · pass) (bench/runner.h: a
 * calibrated pass), a pass = prefill of its n requests + ceil(n/c) waves × max_new_tokens/tau
 * cycles of c requests, at context prompt + half the
 * output, tau assumed Σ_{i<B} 0.8^i (a constant conditional acceptance of 0.8; 4.2 at B = 8,
 * close to `plan`'s default profile) for drafter points and 1 for `ar`, device figures
 * --bandwidth-gbs / --gflops when given, else 100 GB/s and 1000 GFLOP/s (only ratios matter).
 *
 * Partition: groups in decreasing cost (ties: sweep order) each go to the shard with the least
 * cost so far (ties: the lowest index), the greedy longest-processing-time rule; a shard runs its
 * groups in sweep order. Every rank computes the same partition from the same sweep.
 *
 * Sweep hash: sha256 of "key=value\n" over every sweep key (sweep.h db_sweep_key order) except
 * out, output and threads (where results go, the stdout format and the cores a rank was given
 * do not change what is measured). meta.json "shard" = {index, count, sweep_hash, cost_model,
 * points: [{point_id, shard, cost_s}] over the whole sweep in order}, so `merge` knows every
 * point the sweep has even when a shard's directory is missing. */
#ifndef DB_SHARD_H
#define DB_SHARD_H

#include "bench/capacity.h"
#include "bench/sweep.h"

#include <cjson/cJSON.h>
#include <stddef.h>

typedef struct {
    int index, count; /* shard index/count, 0 <= index < count; count 0: no sharding */
} db_shard;

/* "K/N", 0 <= K < N <= 4096; DB_EINPUT otherwise */
int db_shard_parse(const char *s, db_shard *sh, char *err, size_t errlen);
/* the sweep hash above, from a sweep or from meta.json's recorded "sweep" object (the same
 * text for the same sweep); 64 hex digits */
void db_sweep_hash(const db_sweep *sw, char hex[65]);
int db_sweep_hash_json(const cJSON *rec, char hex[65], char *err, size_t errlen);

/* the end of the group starting at keys[i0]: the points sharing its target, backend, dataset,
 * temperature, concurrency and request rate */
int db_group_end(const db_point_key *keys, int n, int i0);

/* the flat device figures of a sweep that gives none */
#define DB_SHARD_FLAT_GBS 100.0
#define DB_SHARD_FLAT_GFLOPS 1000.0

/* point cost (seconds, the model above); d NULL for ar; n_prompts: an uncalibrated pass's
 * requests (bench/runner.h), every turn counted; hw the device figures, NULL for the sweep's
 * (its --device-config, else --bandwidth-gbs / --gflops or 100 GB/s and 1000 GFLOP/s: figures
 * every shard of a sweep reads alike, so they agree on the partition) */
double db_shard_point_cost(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                           const db_sweep *sw, const db_point_key *k, int n_prompts, double mean_prompt,
                           const db_hw *hw_given);
/* shard_of[n]: the shard of every point, by the partition above */
int db_shard_assign(const db_point_key *keys, int n, const double *cost, int count, int *shard_of);

/* Keep the points of shard sh in keys (order kept; *n shrinks) and return meta.json's "shard"
 * object in *meta (owned by the caller) describing the whole partition; hash: the sweep hash. */
int db_shard_apply(const db_shard *sh, const char *hash, db_point_key *keys, int *n, const double *cost,
                   cJSON **meta, char *err, size_t errlen);

/* --resume DIR of a shard: the shard meta.json records (count 0 when none) */
int db_shard_recorded(const char *dir, db_shard *sh, char *err, size_t errlen);

#endif
