/* util.c — error formatting, clock, file reading, paths, allocation wrappers with fault
 * injection, RNG (see util.h). */
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
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

/* ---- allocation wrappers and the fault hook ---- */

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;     /* the site log */
    atomic_llong count;       /* allocations so far */
    long long fail_at;        /* DB_FAULT_ALLOC, 0 = never */
    int log_fd;               /* DB_FAULT_ALLOC_LOG, -1 = none */
    const char *seen[4096];   /* sites already logged (open addressing on the text) */
} fault = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, 0, 0, -1, {0}};

static void fault_init(void)
{
    const char *n = getenv("DB_FAULT_ALLOC"), *log = getenv("DB_FAULT_ALLOC_LOG");
    if (n && *n) fault.fail_at = atoll(n);
    if (log && *log) fault.log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void log_site(long long idx, const char *site)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *c = site; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    pthread_mutex_lock(&fault.lock);
    for (size_t i = 0, n = sizeof fault.seen / sizeof *fault.seen; i < n; i++) {
        const char **slot = &fault.seen[(h + i) % n];
        if (*slot && strcmp(*slot, site) == 0) break;
        if (!*slot) {
            *slot = site;
            dprintf(fault.log_fd, "%lld %s\n", idx, site);
            break;
        }
    }
    pthread_mutex_unlock(&fault.lock);
}

int db_fault_alloc_next(const char *site)
{
    pthread_once(&fault.once, fault_init);
    if (!fault.fail_at && fault.log_fd < 0) return 0; /* the common case: no counting at all */
    long long idx = atomic_fetch_add(&fault.count, 1) + 1;
    if (fault.log_fd >= 0) log_site(idx, site);
    return idx == fault.fail_at;
}

void *db_malloc_at(size_t n, const char *site)
{
    return db_fault_alloc_next(site) ? NULL : malloc(n);
}

void *db_calloc_at(size_t n, size_t size, const char *site)
{
    return db_fault_alloc_next(site) ? NULL : calloc(n, size);
}

void *db_realloc_at(void *p, size_t n, const char *site)
{
    return db_fault_alloc_next(site) ? NULL : realloc(p, n);
}

char *db_strdup_at(const char *s, const char *site)
{
    return db_fault_alloc_next(site) ? NULL : strdup(s);
}

double db_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int db_read_stream(FILE *f, const char *name, char **out, size_t *len, char *err, size_t errlen)
{
    *out = NULL;
    size_t cap = 4096, n = 0;
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
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return db_fail(err, errlen, DB_EINPUT, "%s: read error", name);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return DB_OK;
}

int db_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return db_fail(err, errlen, DB_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    int rc = db_read_stream(f, path, out, len, err, errlen);
    fclose(f);
    return rc;
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
    int fd = open(path, O_RDONLY);
    if (fd < 0) return db_fail(err, errlen, DB_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return db_fail(err, errlen, DB_EINPUT, "%s: not a regular file", path);
    }
    *size = (size_t)st.st_size;
    int rc = db_check_min_size(path, *size, min_size, short_what, err, errlen);
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
