/* report_out.h — what `dflash-bench run` prints on stdout, one point at a time as points finish:
 *   md    (default) a compact markdown table of the figures a reader needs (with `models`, two
 *         more columns: the target's name and the weight dtypes, target / drafter);
 *   csv   exactly the rows of summary.csv with its header, nothing else (pipe it to a file);
 *   json  one array of summary objects (the summary.csv columns, absent values null).
 * Logs and progress never go to stdout (see progress.h). */
#ifndef DB_REPORT_OUT_H
#define DB_REPORT_OUT_H

#include "result/point.h"
#include "result/run_meta.h"

#include <stddef.h>
#include <stdio.h>

typedef enum { DB_OUT_MD, DB_OUT_CSV, DB_OUT_JSON } db_out_format;

typedef struct {
    FILE *f;
    db_out_format fmt;
    int n; /* points written */
    int models; /* md: the target and dtype columns (a sweep over several checkpoints) */
    /* the md reading note: the drafter rows below speedup 1, their verify cost and tau */
    int slow;
    double cost_sum, tau_sum;
    char backend[16];
    double weights_bytes, llc_bytes; /* target weights, last-level cache (hwloc) */
} db_out;

/* format "md", "csv" or "json"; writes the table header / opening bracket */
int db_out_begin(db_out *o, FILE *f, const char *format, int models, char *err, size_t errlen);
int db_out_point(db_out *o, const db_run_meta *m, const db_point_raw *raw,
                 const db_point_summary *s, char *err, size_t errlen);
/* md: under the table, when drafter rows ran below speedup 1, a reading note: their mean
 * verify cost in decode steps against their mean tau, whether the target's weights fit in the
 * last-level cache (compute-bound here) or not, and the `plan` command for a memory-bound
 * model. CSV and JSON get nothing. Closing bracket (json); flushes */
int db_out_end(db_out *o, char *err, size_t errlen);

#endif
