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

/* Units, one convention everywhere: amounts of memory (sizes, free memory, bytes moved per
 * step) in binary units, GiB in prose and tables, MiB in CSV columns named for it
 * (peak_mem_mib), bytes in JSON keys named *_bytes; rates in decimal units as devices are
 * quoted (GB/s = 1e9 bytes/s, GFLOP/s). */
#define DB_MIB 1048576.0
#define DB_GIB 1073741824.0

/* whole file into a NUL-terminated buffer (free()), size in *len; DB_EINPUT if unreadable */
int db_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen);
/* the same from an open stream (stdin); `name` goes into the message */
int db_read_stream(FILE *f, const char *name, char **out, size_t *len, char *err, size_t errlen);

/* a file's bytes as they come: `path` checked to be a regular file of at least min_size bytes
 * and mapped private (writable: copy-on-write pages the caller may change, the file never does).
 * *size is set once known, *map only on success. DB_EINPUT: "<path>: cannot open: <why>",
 * "<path>: not a regular file", "<path>: truncated: N bytes, <short_what>", "<path>: mmap
 * failed: <why>". The binary readers (safetensors, GGUF) open their files through it. */
int db_map_file(const char *path, size_t min_size, const char *short_what, int writable,
                void **map, size_t *size, char *err, size_t errlen);
/* the same size check for bytes already in memory */
int db_check_min_size(const char *path, size_t size, size_t min_size, const char *short_what,
                      char *err, size_t errlen);

/* join dir + "/" + name into buf; DB_EINPUT when it does not fit */
int db_path_join(char *buf, size_t n, const char *dir, const char *name);

/* Allocation wrappers: malloc / calloc / realloc / strdup of the engine and the CLI. They behave
 * as the libc functions (calloc and realloc refuse a size that overflows), with one addition
 * for fault-injection tests (tests/fault_inject.sh):
 *   DB_FAULT_ALLOC=N         the N-th allocation through these (1-based, counted over the
 *                            process) returns NULL; every other one succeeds
 *   DB_FAULT_ALLOC_LOG=PATH  the first allocation at each call site appends "N file:line" to
 *                            PATH, so a test can fail every site once
 * Code that allocates must handle NULL: return DB_ERUNTIME with a message naming what it was
 * allocating. The site is the caller's file:line (the macros below). */
void *db_malloc_at(size_t n, const char *site);
void *db_calloc_at(size_t n, size_t size, const char *site);
void *db_realloc_at(void *p, size_t n, const char *site);
char *db_strdup_at(const char *s, const char *site);
/* 1 when the next allocation is the one DB_FAULT_ALLOC fails (counts it): for allocators that
 * do not go through the wrappers (a backend's tensor memory, posix_memalign) */
int db_fault_alloc_next(const char *site);
#define DB_STR2(x) #x
#define DB_STR(x) DB_STR2(x)
#define DB_SITE __FILE__ ":" DB_STR(__LINE__)
#define db_malloc(n) db_malloc_at((n), DB_SITE)
#define db_calloc(n, size) db_calloc_at((n), (size), DB_SITE)
#define db_realloc(p, n) db_realloc_at((p), (n), DB_SITE)
#define db_strdup(s) db_strdup_at((s), DB_SITE)

/* splitmix64-seeded xoshiro256** generator: reproducible streams per seed */
typedef struct {
    uint64_t s[4];
} db_rng;
void db_rng_seed(db_rng *r, uint64_t seed);
uint64_t db_rng_next(db_rng *r);
double db_rng_uniform(db_rng *r); /* [0, 1) */

#endif
