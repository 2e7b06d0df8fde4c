/* alloc.c — the allocation wrappers and the fault-injection counter (see alloc.h). */
#include "alloc.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
