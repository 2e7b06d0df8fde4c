/* alloc.h — the allocation wrappers of the backends and of the engine (src/base/util.h
 * includes this header): malloc / calloc / realloc / strdup with fault injection, one counter
 * for the whole process. They behave as the libc functions (calloc and realloc refuse a size
 * that overflows), with one addition for fault-injection tests (tests/fault_inject.sh):
 *   DB_FAULT_ALLOC=N         the N-th allocation through these (1-based, counted over the
 *                            process) returns NULL; every other one succeeds
 *   DB_FAULT_ALLOC_LOG=PATH  the first allocation at each call site appends "N file:line" to
 *                            PATH, so a test can fail every site once
 * Code that allocates must handle NULL: the engine returns DB_ERUNTIME with a message naming
 * what it was allocating, a backend its error (a message in be->err, or a latched fault that
 * the next sync() reports). The site is the caller's file:line (the macros below).
 *
 * The backends library is built with backends/ alone on its include path, so this header and
 * alloc.c live here, below the engine, which links the same counter. */
#ifndef DB_ALLOC_H
#define DB_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *db_malloc_at(size_t n, const char *site);
void *db_calloc_at(size_t n, size_t size, const char *site);
void *db_realloc_at(void *p, size_t n, const char *site);
char *db_strdup_at(const char *s, const char *site);
/* 1 when the next allocation is the one DB_FAULT_ALLOC fails (counts it): for allocators that
 * do not go through the wrappers (a backend's tensor memory, posix_memalign) */
int db_fault_alloc_next(const char *site);

#ifdef __cplusplus
}
#endif

#define DB_STR2(x) #x
#define DB_STR(x) DB_STR2(x)
#define DB_SITE __FILE__ ":" DB_STR(__LINE__)
#define db_malloc(n) db_malloc_at((n), DB_SITE)
#define db_calloc(n, size) db_calloc_at((n), (size), DB_SITE)
#define db_realloc(p, n) db_realloc_at((p), (n), DB_SITE)
#define db_strdup(s) db_strdup_at((s), DB_SITE)

#endif
