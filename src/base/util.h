/* util.h — the one error convention of the engine and small helpers.
 *
 * Every fallible function returns 0 on success or a negative DB_E* status, and writes a
 * one-line message into the caller's buffer (char *err, size_t errlen). Only main() exits. */
#ifndef DB_UTIL_H
#define DB_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
    DB_OK = 0,
    DB_EINPUT = -2,  /* bad input: file, config, flag value (CLI exit status 2) */
    DB_ERUNTIME = -1 /* failure while running (out of memory, device fault) */
};
/* stopped cleanly by signal sig (SIGINT, SIGTERM): exit status 128 + sig, as a shell reports a
 * process the signal killed */
#define DB_ESIGNAL(sig) (-(128 + (sig)))

/* snprintf into err; returns `status` so callers can `return db_fail(...)`. */
int db_fail(char *err, size_t errlen, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

double db_now(void); /* monotonic seconds */

/* hardware threads this process may run on (taskset, cpusets), 0 when unknown */
int db_cpus_available(void);
/* --threads N: 0 (all cores) or up to DB_THREADS_PER_CPU x the CPUs this process may use. More
 * only take turns at every barrier (8192 threads: 7.6 s a token) and, further up, exhaust the
 * threads' stacks (65536: a crash inside libgomp). DB_EINPUT "<what> N: ..." naming the cap. */
#define DB_THREADS_PER_CPU 4
int db_threads_check(const char *what, int threads, char *err, size_t errlen);

/* Units, one convention everywhere: amounts of memory (sizes, free memory, bytes moved per
 * step) in binary units, GiB in prose and tables, MiB in CSV columns named for it
 * (peak_mem_mib), bytes in JSON keys named *_bytes; rates in decimal units as devices are
 * quoted (GB/s = 1e9 bytes/s, GFLOP/s). */
#define DB_MIB 1048576.0
#define DB_GIB 1073741824.0

/* The most bytes read from one input, by kind (docs/limits.md). An input is read whole into
 * memory: without a cap a /dev/zero (or a runaway file) grows it until the machine runs out. */
#define DB_MAX_CONFIG_BYTES ((size_t)16 << 20)    /* config.json, --config ini, a safetensors index */
#define DB_MAX_TOKENIZER_BYTES ((size_t)256 << 20) /* tokenizer.json */
#define DB_MAX_PROFILE_BYTES ((size_t)16 << 20)   /* --acceptance-profile */
#define DB_MAX_TEXT_BYTES ((size_t)1 << 30)       /* datasets, --prompt-ids-file, tokenize's stdin */
#define DB_MAX_TABLE_BYTES ((size_t)4 << 30)      /* results tables, points.done, meta.json */

/* The one reader of every input file: the whole file into a NUL-terminated buffer (free()),
 * size in *len. Only a regular file is read: it is opened without blocking (a FIFO would wait
 * for a writer forever) and a FIFO, device (/dev/zero) or directory is refused, as is a file of
 * more than max bytes. DB_EINPUT, one line naming the file: "<path>: cannot open: <why>",
 * "<path>: is a directory, not a file", "<path>: not a regular file (a FIFO, socket or
 * device)", "<path>: more than N MiB ..."; DB_ERUNTIME when out of memory. */
int db_read_file_max(const char *path, size_t max, char **out, size_t *len, char *err, size_t errlen);
/* db_read_file_max with the results-table cap, DB_MAX_TABLE_BYTES */
int db_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen);
/* the same from an open stream (stdin), at most max bytes; `name` goes into the message */
int db_read_stream(FILE *f, const char *name, size_t max, char **out, size_t *len, char *err, size_t errlen);
/* open path for reading, refusing what db_read_file_max refuses before reading (no size cap):
 * the descriptor (O_CLOEXEC) in *fd and its size in *size; the same messages */
int db_open_regular(const char *path, int *fd, size_t *size, char *err, size_t errlen);

/* a file's bytes as they come: `path` checked to be a regular file of at least min_size bytes
 * and mapped private (writable: copy-on-write pages the caller may change, the file never does).
 * *size is set once known, *map only on success. DB_EINPUT: "<path>: cannot open: <why>",
 * "<path>: not a regular file ..." (db_open_regular's messages), "<path>: truncated: N bytes, <short_what>", "<path>: mmap
 * failed: <why>". The binary readers (safetensors, GGUF) open their files through it. */
int db_map_file(const char *path, size_t min_size, const char *short_what, int writable,
                void **map, size_t *size, char *err, size_t errlen);
/* the same size check for bytes already in memory */
int db_check_min_size(const char *path, size_t size, size_t min_size, const char *short_what,
                      char *err, size_t errlen);

/* join dir + "/" + name into buf; DB_EINPUT when it does not fit */
int db_path_join(char *buf, size_t n, const char *dir, const char *name);

/* Allocation wrappers (db_malloc, db_calloc, db_realloc, db_strdup, DB_SITE) with fault
 * injection: backends/alloc.h, shared with the backends, one counter for the process. Code that
 * allocates must handle NULL: return DB_ERUNTIME with a message naming what it was allocating. */
#include "alloc.h"

/* cJSON on the same wrappers: cJSON_InitHooks once, at startup (main, the test programs), so
 * its allocations count for fault injection as one site, "cJSON" */
void db_json_init(void);
/* cJSON_ParseWithLength that tells out of memory from bad JSON: NULL with *oom = 1 when one of
 * cJSON's allocations failed (the caller returns DB_ERUNTIME), NULL with *oom = 0 when the text
 * does not parse */
struct cJSON;
struct cJSON *db_json_parse(const char *text, size_t len, int *oom);
/* Building a cJSON document with every result checked: db_json_ok(oom, x) passes x through and
 * sets *oom when it is NULL (out of memory); db_json_add(oom, parent, key, item) attaches item
 * under key (key NULL: onto the array parent), and when it cannot (item or parent NULL) frees
 * item and sets *oom. cJSON's functions take a NULL parent harmlessly, so a builder goes on and
 * looks at *oom once, at the end: a document without some of its fields is never used. */
struct cJSON *db_json_ok(int *oom, struct cJSON *x);
void db_json_add(int *oom, struct cJSON *parent, const char *key, struct cJSON *item);

/* splitmix64-seeded xoshiro256** generator: reproducible streams per seed */
typedef struct {
    uint64_t s[4];
} db_rng;
void db_rng_seed(db_rng *r, uint64_t seed);
uint64_t db_rng_next(db_rng *r);
double db_rng_uniform(db_rng *r); /* [0, 1) */

#endif
