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

/* snprintf into err; returns `status` so callers can `return db_fail(...)`. */
int db_fail(char *err, size_t errlen, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

double db_now(void); /* monotonic seconds */

/* whole file into a NUL-terminated buffer (free()), size in *len; DB_EINPUT if unreadable */
int db_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen);
/* the same from an open stream (stdin); `name` goes into the message */
int db_read_stream(FILE *f, const char *name, char **out, size_t *len, char *err, size_t errlen);

/* join dir + "/" + name into buf; DB_EINPUT when it does not fit */
int db_path_join(char *buf, size_t n, const char *dir, const char *name);

/* splitmix64-seeded xoshiro256** generator: reproducible streams per seed */
typedef struct {
    uint64_t s[4];
} db_rng;
void db_rng_seed(db_rng *r, uint64_t seed);
uint64_t db_rng_next(db_rng *r);
double db_rng_uniform(db_rng *r); /* [0, 1) */

#endif
