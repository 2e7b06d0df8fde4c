/* session.h — what every model-running subcommand opens: a backend, the target, optionally a
 * drafter sharing the target's embedding and head. One place so generate, check-lossless and
 * run load and validate models the same way. */
#ifndef DB_SESSION_H
#define DB_SESSION_H

#include "backend.h"
#include "drafter.h"
#include "target.h"

typedef struct {
    db_backend *be;
    db_target target;
    db_drafter drafter;
    int has_drafter;
    double load_s;
} db_session;

typedef struct {
    const char *backend;   /* "cpu", ... */
    const char *target;    /* checkpoint directory */
    const char *drafter;   /* NULL for none */
    int threads;
    int deterministic;
} db_session_opts;

int db_session_open(db_session *s, const db_session_opts *o, char *err, size_t errlen);
void db_session_close(db_session *s);

/* Parse "1,2,3" (commas / whitespace) into ids; each must be < vocab. */
int db_session_check_ids(const db_session *s, const int *ids, int n, char *err, size_t errlen);

#endif
