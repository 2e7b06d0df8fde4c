/* backend_profile.h — per-op timing of a backend, switched on by DB_PROFILE_OPS=1
 * (backend_profile.c). db_backend_create attaches it, db_backend_destroy reports and detaches. */
#ifndef DB_BACKEND_PROFILE_H
#define DB_BACKEND_PROFILE_H

#include "backend.h"

/* wrap be's compute ops when DB_PROFILE_OPS is set (and no other backend is being profiled) */
void db_profile_attach(db_backend *be);
/* print the totals to stderr and restore be's own op table; nothing when be is not profiled */
void db_profile_report(db_backend *be);

#endif
