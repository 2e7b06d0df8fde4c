/* session.c — see session.h. */
#include "engine/session.h"
#include "base/util.h"

#include <string.h>

int db_session_open_backend(db_session *s, const db_session_opts *o, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (o->threads < 0) return db_fail(err, errlen, DB_EINPUT, "threads must be >= 0 (0 = all cores)");
    db_backend_opts bo = {.threads = o->threads, .deterministic = o->deterministic};
    if (db_backend_create(o->backend, &bo, &s->be, err, errlen) != 0) return DB_EINPUT;
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
    if (rc) {
        db_session_close(s);
        return rc;
    }
    s->load_s = db_now() - t0;
    return DB_OK;
}

int db_session_open(db_session *s, const db_session_opts *o, char *err, size_t errlen)
{
    int rc = db_session_open_backend(s, o, err, errlen);
    return rc ? rc : db_session_load_models(s, o, err, errlen);
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
