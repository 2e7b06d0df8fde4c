/* session.c — see session.h. */
#include "engine/session.h"
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int db_session_open_backend(db_session *s, const db_session_opts *o, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    int rc = db_threads_check("--threads", o->threads, err, errlen), ncpu = db_cpus_available();
    if (rc) return rc;
    /* more threads than CPUs: workers take turns at every barrier, and the timings measure that */
    if (ncpu > 0 && o->threads > ncpu && o->backend && !strcmp(o->backend, "cpu"))
        fprintf(stderr, "warning: --threads %d is above the %d cores (hardware threads) this process may "
                "use; timings will include threads waiting for a core\n", o->threads, ncpu);
    db_backend_opts bo = {.threads = o->threads, .deterministic = o->deterministic};
    rc = db_backend_create(o->backend, &bo, &s->be, err, errlen);
    if (rc) return rc == -2 ? DB_EINPUT : DB_ERUNTIME; /* an unknown name or a missing device, or a device that failed */
    return DB_OK;
}

int db_session_load_models(db_session *s, const db_session_opts *o, char *err, size_t errlen)
{
    double t0 = db_now();
    int rc = db_target_load_ex(&s->target, s->be, o->target, o->synthetic, err, errlen);
    if (!rc && o->drafter) {
        rc = db_drafter_load_ex(&s->drafter, s->be, o->drafter, &s->target, o->synthetic, err, errlen);
        s->has_drafter = rc == DB_OK;
    }
    if (rc) { /* the models leave; the backend stays open for the caller's other buffers */
        if (s->has_drafter) db_drafter_free(&s->drafter);
        db_target_free(&s->target);
        s->has_drafter = 0;
        return rc;
    }
    s->load_s = db_now() - t0;
    return DB_OK;
}

int db_session_open(db_session *s, const db_session_opts *o, char *err, size_t errlen)
{
    int rc = db_session_open_backend(s, o, err, errlen);
    if (rc) return rc;
    if ((rc = db_session_load_models(s, o, err, errlen))) db_session_close(s);
    return rc;
}

void db_session_close(db_session *s)
{
    if (s->has_drafter) db_drafter_free(&s->drafter);
    db_target_free(&s->target);
    db_backend_destroy(s->be);
    memset(s, 0, sizeof *s);
}

int db_session_check_ids(const db_session *s, const int *ids, int n, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->target.cfg.vocab)
            return db_fail(err, errlen, DB_EINPUT, "token id %d outside the vocabulary (%d) of %s",
                           ids[i], s->target.cfg.vocab, s->target.cfg.path);
    return DB_OK;
}

int db_parse_ids(const char *s, int **ids, int *n, char *err, size_t errlen)
{
    int cap = 16;
    *n = 0;
    *ids = db_malloc(sizeof(int) * (size_t)cap);
    if (!*ids) return db_fail(err, errlen, DB_ERUNTIME, "out of memory parsing token ids");
    const char *p = s;
    for (;;) {
        while (*p && (isspace((unsigned char)*p) || *p == ',')) p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 0x7fffffff) {
            free(*ids);
            *ids = NULL;
            return db_fail(err, errlen, DB_EINPUT, "token id list: bad entry near '%.16s'", p);
        }
        if (*n == cap) {
            cap *= 2;
            int *ni = db_realloc(*ids, sizeof(int) * (size_t)cap);
            if (!ni) {
                free(*ids);
                *ids = NULL;
                return db_fail(err, errlen, DB_ERUNTIME, "out of memory parsing token ids (%d so far)", *n);
            }
            *ids = ni;
        }
        (*ids)[(*n)++] = (int)v;
        p = end;
    }
    return DB_OK;
}
