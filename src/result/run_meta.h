/* run_meta.h — the description of one invocation that every result row carries (README, *Columns
 * common to every CSV file*): schema version, tool version and commit, test time, machine (CPU,
 * topology), build (compiler, type, features), backend and device, models (names, sha256 of their
 * weight files, main weight dtype), seed; and meta.json, the full form of the same with the hwloc topology and
 * the command line.
 *
 * Model hash: the sha256 of the weight file when a model has one *.safetensors file (what
 * `sha256sum model.safetensors` and the Hugging Face LFS pointer show); with several shards,
 * the sha256 of the listing "<sha256>  <name>\n" over the files in byte order of their names,
 * i.e. `LC_ALL=C sha256sum *.safetensors | sha256sum`. */
#ifndef DB_RUN_META_H
#define DB_RUN_META_H

#include "backend.h" /* db_cpu_info: the host CPU as the backend library read it */

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Bump when a column of any CSV file changes meaning, is renamed, removed or moved. */
#define DB_SCHEMA_VERSION 11
#define DB_META_MAX_BACKENDS 4
#define DB_META_MAX_MODELS 16

typedef struct {
    char name[256];   /* file name */
    char sha256[65];
    long long bytes;
} db_weight_file;

typedef struct {
    char name[256];   /* last component of the path ("tiny-qwen3"); "" when absent */
    char path[1024];
    char sha256[65];  /* see the top of this file */
    char dtype[16];   /* the weight type holding most of its matrix elements (bf16, q8_0, ...) */
    char mix[16];     /* the file's weight mix, llama.cpp style (q4_k_m; db_tensors_mix) */
    int n_files;
    db_weight_file *files; /* [n_files], malloc'd */
} db_model_meta;

typedef struct {
    char name[16], device[128], simd[32];
    int threads;
} db_backend_meta;

typedef struct {
    int schema_version;
    char tool_version[32], git_commit[48];
    char test_time[32];     /* RFC 3339 UTC, 2026-11-30T02:40:00Z */
    char label[64];
    char compiler[64], build_type[32];
    db_cpu_info cpu;        /* db_host_cpu() */
    /* backends met so far; `cur` is the one the current rows ran on */
    db_backend_meta backends[DB_META_MAX_BACKENDS];
    int n_backends, cur;
    /* every checkpoint a row ran (targets, drafters), each hashed once; rows find theirs by
     * name (the point key's target / drafter) */
    db_model_meta models[DB_META_MAX_MODELS];
    int n_models;
    uint64_t seed;
    char kv_dtype[8];       /* the K/V caches' dtype the rows ran with: f32 or f16 (auto resolved) */
    char *command_line;     /* argv joined with spaces (shell-quoted where needed), malloc'd */
    int out_of_memory;      /* init could not allocate the command line: db_run_meta_json fails */
    cJSON *sweep;           /* the sweep's keys and values (sweep.h db_sweep_get), what --resume
                             * re-reads; owned, NULL for none */
    cJSON *points;          /* per point: machine load and page faults (run's own), owned */
    cJSON *shard;           /* run --shard: the partition (cluster/shard.h), owned, NULL for none */
    cJSON *inputs;          /* run: every dataset file, target and drafter as given, with its
                             * absolute path and sha256 (what --resume checks), owned, NULL for none */
} db_run_meta;

/* build, CPU and time facts; argv may be NULL */
void db_run_meta_init(db_run_meta *m, int argc, char **argv, uint64_t seed, const char *label,
                      time_t now);
/* select (adding it when new) the backend the following rows ran on */
void db_run_meta_set_backend(db_run_meta *m, const char *backend, const char *device,
                             const char *simd, int threads);
/* name and hashes of a model directory (every *.safetensors in it) or of one file */
int db_model_meta_hash(db_model_meta *mm, const char *path, char *err, size_t errlen);
/* the checkpoint at path (a directory, a file, or with synthetic weights the config standing
 * for it), with its main weight dtype, unless a model of that path is listed already */
int db_run_meta_add_model(db_run_meta *m, const char *path, const char *dtype, const char *mix, char *err,
                          size_t errlen);
/* the listed model named name (db_model_name of its path); an empty entry when none */
const db_model_meta *db_run_meta_model(const db_run_meta *m, const char *name);
/* the meta.json document (caller cJSON_Delete()s); NULL when out of memory */
cJSON *db_run_meta_json(const db_run_meta *m);
void db_run_meta_free(db_run_meta *m);

/* the current backend entry (a blank one before set_backend) */
const db_backend_meta *db_run_meta_backend(const db_run_meta *m);
/* argv as one line a shell splits back into the same words (quoted where needed); malloc'd,
 * NULL when out of memory */
char *db_shell_join(int argc, char *const *argv);
/* t as RFC 3339 UTC "YYYY-MM-DDTHH:MM:SSZ" (buf >= 21 bytes) */
void db_rfc3339_utc(time_t t, char *buf, size_t n);

#endif
