/* results_read.h — a results directory read back, whole and without changing it, by a command
 * that only reads one (`compare`): the summary rows of its completed points, each with its raw
 * samples from requests.csv and its per-position acceptance from acceptance.csv.
 *
 * Completed: listed in points.done when the directory has one (a killed run's unfinished point
 * is left out, as resume would drop it); every row of a directory without it (a hand-made one).
 * Every figure used is checked: a missing file or column, a field that is no number, a request
 * row outside its point's rounds and prompts or given twice, a point missing some of its
 * request rows, or a summary throughput that is not its requests' tokens over time (a file
 * edited in part) is DB_EINPUT naming the file and the point. */
#ifndef DB_RESULTS_READ_H
#define DB_RESULTS_READ_H

#include "base/csv_io.h"
#include "result/point.h"

#include <stddef.h>

typedef struct {
    int rec;              /* its record in summary (the header is record 0) */
    db_point_key key;     /* from the axis columns the file has (the others zero) */
    db_point_raw raw;     /* wall_s and per request output_tokens, t_admitted, t_finished */
    double throughput, speedup, tau; /* summary.csv's (NAN when empty) */
    int stable;           /* 1, 0, -1 (empty: unknown) */
    double *accept;       /* [block_size] conditional_rate at position i (1..B-1; NAN unknown) */
} db_read_point;

typedef struct {
    char dir[1024];
    db_csv_doc summary;   /* summary.csv as read */
    int schema_version;
    int has_axis[64];     /* [db_point_n_axes] the file has the axis's column */
    int n;
    db_read_point *pt;    /* [n] the completed points, in file order */
} db_results_read;

/* DB_EINPUT naming DIR or the file at fault; DB_ERUNTIME out of memory. Frees what it made on
 * failure. */
int db_results_read_init(db_results_read *r, const char *dir, char *err, size_t errlen);
void db_results_read_free(db_results_read *r);
/* the value of column `name` in point i's summary row; NULL when the file has no such column */
const char *db_results_read_field(const db_results_read *r, int i, const char *name);

#endif
