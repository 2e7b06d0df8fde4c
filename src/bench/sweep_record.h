/* sweep_record.h — the sweep a run records in meta.json ("sweep": every key set, with its value
 * as db_sweep_get writes it) and what `run --resume DIR` does with it: rebuild that sweep, and
 * list the keys where the flags given with --resume would change it. */
#ifndef DB_SWEEP_RECORD_H
#define DB_SWEEP_RECORD_H

#include "bench/sweep.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* the keys and values of sw ("out" aside: the directory is --resume's own); NULL when out of
 * memory (a partial record would resume another sweep) */
cJSON *db_sweep_json(const db_sweep *sw);
/* the sweep DIR/meta.json records, into *sw; 1 when there is none (no meta.json, or a run of an
 * older version), DB_EINPUT for a broken record */
int db_sweep_recorded(const char *dir, db_sweep *sw, char *err, size_t errlen);
/* how many keys differ between a and b, those free on resume (output, out) aside; out gets
 * "key (recorded 'X', given 'Y'); ..." */
int db_sweep_diff(const db_sweep *a, const db_sweep *b, char *out, size_t n);

#endif
