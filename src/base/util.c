/* util.c — error formatting, clock, file reading, paths, RNG (see util.h); the allocation
 * wrappers with fault injection are backends/alloc.c. */
#include "base/util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int db_fail(char *err, size_t errlen, int status, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* cJSON allocations that failed in this thread: a parse that returned NULL while the count grew
 * ran out of memory */
static _Thread_local unsigned long json_failures;

static void *json_malloc(size_t n)
{
    void *p = db_malloc_at(n, "cJSON");
    if (!p) json_failures++;
    return p;
}

void db_json_init(void)
{
    cJSON_Hooks h = {json_malloc, free};
    cJSON_InitHooks(&h);
}

cJSON *db_json_parse(const char *text, size_t len, int *oom)
{
    unsigned long before = json_failures;
    cJSON *j = cJSON_ParseWithLength(text, len);
    *oom = !j && json_failures != before;
    return j;
}

cJSON *db_json_ok(int *oom, cJSON *x)
{
    if (!x) *oom = 1;
    return x;
}

void db_json_add(int *oom, cJSON *parent, const char *key, cJSON *item)
{
    if (item && (key ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item))) return;
    cJSON_Delete(item);
    *oom = 1;
}

int db_cpus_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 0;
}

int db_threads_check(const char *what, int threads, char *err, size_t errlen)
{
    if (threads < 0) return db_fail(err, errlen, DB_EINPUT, "%s %d: must be >= 0 (0 = all cores)", what, threads);
    int ncpu = db_cpus_available(), cap = DB_THREADS_PER_CPU * (ncpu > 0 ? ncpu : 1);
    if (threads > cap)
        return db_fail(err, errlen, DB_EINPUT, "%s %d: at most %d (%d x the %d CPUs this process may use)", what,
                       threads, cap, DB_THREADS_PER_CPU, ncpu > 0 ? ncpu : 1);
    return DB_OK;
}

double db_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* the stream's bytes until EOF, at most max of them, in a buffer of at first cap bytes */
static int read_all(FILE *f, const char *name, size_t max, size_t cap, char **out, size_t *len, char *err,
                    size_t errlen)
{
    *out = NULL;
    size_t n = 0;
    if (cap < 4096) cap = 4096;
    char *buf = db_malloc(cap);
    for (;;) {
        if (buf && n + 1 >= cap) {
            char *nb = db_realloc(buf, cap * 2);
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
        }
        if (!buf) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory reading it", name);
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n > max) { /* a file that grew past its fstat size, or a stream */
            free(buf);
            return db_fail(err, errlen, DB_EINPUT, "%s: more than %zu MiB, the most this kind of input may have "
                           "(docs/limits.md)", name, max >> 20);
        }
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return db_fail(err, errlen, DB_EINPUT, "%s: read error: %s", name, strerror(errno));
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return DB_OK;
}

int db_read_stream(FILE *f, const char *name, size_t max, char **out, size_t *len, char *err, size_t errlen)
{
    return read_all(f, name, max, 4096, out, len, err, errlen);
}

int db_open_regular(const char *path, int *fd, size_t *size, char *err, size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO does not wait for a writer, so it can be refused; on a regular
     * file the flag changes nothing */
    int d = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (d < 0) return db_fail(err, errlen, DB_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(d, &st) != 0) {
        int e = errno;
        close(d);
        return db_fail(err, errlen, DB_EINPUT, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(d);
        return S_ISDIR(st.st_mode) ? db_fail(err, errlen, DB_EINPUT, "%s: is a directory, not a file", path)
                                   : db_fail(err, errlen, DB_EINPUT, "%s: not a regular file (a FIFO, socket or device)", path);
    }
    *fd = d;
    *size = (size_t)st.st_size;
    return DB_OK;
}

int db_read_file_max(const char *path, size_t max, char **out, size_t *len, char *err, size_t errlen)
{
    *out = NULL;
    int fd;
    size_t size;
    int rc = db_open_regular(path, &fd, &size, err, errlen);
    if (rc) return rc;
    if (size > max) {
        close(fd);
        return db_fail(err, errlen, DB_EINPUT, "%s: %zu bytes, more than %zu MiB, the most this kind of input may "
                       "have (docs/limits.md)", path, size, max >> 20);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return db_fail(err, errlen, DB_ERUNTIME, "%s: cannot read: %s", path, strerror(errno));
    }
    rc = read_all(f, path, max, size + 1, out, len, err, errlen);
    fclose(f);
    return rc;
}

int db_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    return db_read_file_max(path, DB_MAX_TABLE_BYTES, out, len, err, errlen);
}

int db_check_min_size(const char *path, size_t size, size_t min_size, const char *short_what,
                      char *err, size_t errlen)
{
    return size < min_size ? db_fail(err, errlen, DB_EINPUT, "%s: truncated: %zu bytes, %s", path,
                                     size, short_what)
                           : DB_OK;
}

int db_map_file(const char *path, size_t min_size, const char *short_what, int writable,
                void **map, size_t *size, char *err, size_t errlen)
{
    int fd, rc = db_open_regular(path, &fd, size, err, errlen);
    if (rc) return rc;
    rc = db_check_min_size(path, *size, min_size, short_what, err, errlen);
    if (rc) {
        close(fd);
        return rc;
    }
    void *m = mmap(NULL, *size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return db_fail(err, errlen, DB_EINPUT, "%s: mmap failed: %s", path, strerror(errno));
    *map = m;
    return DB_OK;
}

int db_path_join(char *buf, size_t n, const char *dir, const char *name)
{
    int w = snprintf(buf, n, "%s/%s", dir, name);
    return w < 0 || (size_t)w >= n ? DB_EINPUT : DB_OK;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void db_rng_seed(db_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t db_rng_next(db_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double db_rng_uniform(db_rng *r) { return (double)(db_rng_next(r) >> 11) * 0x1.0p-53; }
