/* session.h — what every model-running subcommand opens: a backend, the target, optionally a
 * drafter sharing the target's embedding and head. One place so generate, check-lossless and
 * run load and validate models the same way. */
#ifndef DB_SESSION_H
#define DB_SESSION_H

#include "backend.h"
#include "model/drafter.h"
#include "model/target.h"

typedef struct {
    db_backend *be;
    db_target target;
    db_drafter drafter;
    int has_drafter;
    double load_s;
} db_session;

typedef struct {
    const char *backend;   /* "cpu", ... */
    const char *target;    /* checkpoint directory (synthetic: its config.json, or a directory) */
    const char *drafter;   /* NULL for none */
    int threads;
    int deterministic;
    const db_synth_opts *synthetic; /* non-NULL: random weights of the configs' shapes */
} db_session_opts;

int db_session_open(db_session *s, const db_session_opts *o, char *err, size_t errlen);
/* the two halves of db_session_open: the backend alone (to ask it for memory before loading),
 * then the models onto it. A failed load frees what it loaded and leaves the backend open, so
 * a caller that holds other buffers on it frees them before db_session_close (db_session_open
 * closes the session itself). */
int db_session_open_backend(db_session *s, const db_session_opts *o, char *err, size_t errlen);
int db_session_load_models(db_session *s, const db_session_opts *o, char *err, size_t errlen);
void db_session_close(db_session *s);

/* DB_EINPUT naming the first id outside the target's vocabulary */
int db_session_check_ids(const db_session *s, const int *ids, int n, char *err, size_t errlen);

/* Parse "1,2,3" (commas and/or whitespace) into a malloc'd array of ids >= 0: a token id list
 * a user gave (on the command line or in a file); DB_EINPUT naming the bad entry. */
int db_parse_ids(const char *s, int **ids, int *n, char *err, size_t errlen);

#endif
