/* report_out.h — what `dflash-bench run` prints on stdout, one point at a time as points finish:
 *   md    (default) a compact markdown table of the figures a reader needs (with `models`, two
 *         more columns: the target's name and the weight dtypes, target / drafter; with `load`,
 *         five serving columns), and under it, when closed-loop drafter rows ran below speedup
 *         1, a reading note (db_out_end);
 *   csv   exactly the rows of summary.csv with its header, nothing else (pipe it to a file); a
 *         resumed run (db_out_prior) prints the rows DIR already held first, so stdout is the
 *         whole summary.csv;
 *   json  one array of summary objects (the summary.csv columns, absent values null).
 * Nothing is printed before the first point completes: a run refused or failing before it
 * leaves stdout empty, never a lone header or '['. Logs and progress never go to stdout
 * (see progress.h). */
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
    int load;   /* md: the serving columns (a sweep with a request rate or an SLO): the asked
                 * rate, the arrival rate, requests/s, ITL p50 and goodput; set after begin */
    int started; /* the header / '[' is out */
    char *prior; /* csv, resume: summary.csv as DIR held it (header included), printed first */
    size_t prior_len;
    /* the md reading note: the drafter rows below speedup 1, their verify cost, whole cycle
     * cost (decode steps) and tau */
    int slow;
    double cost_sum, cycle_sum, tau_sum;
    char backend[16];
    double weights_bytes, llc_bytes; /* target weights, last-level cache (hwloc) */
    /* md, the combined table (db_out_end): tau, speedup and draft ms per cycle of every drafter
     * row by (dataset, block size, concurrency, temperature) */
    struct db_out_comb *comb;
    int ncomb, capcomb;
} db_out;

/* format "md", "csv" or "json"; prints nothing yet (the header goes out with the first point) */
int db_out_begin(db_out *o, FILE *f, const char *format, int models, char *err, size_t errlen);
/* csv: DIR/summary.csv as it stands (a resume, after its cleanup) is printed instead of the
 * header, so stdout ends up equal to the file; other formats and a missing file: nothing */
int db_out_prior(db_out *o, const char *dir, char *err, size_t errlen);
/* one point's row; weights_bytes: its target's weights on the device (the reading note's
 * figure: from the config's shapes for synthetic weights, not the files') */
int db_out_point(db_out *o, const db_run_meta *m, const db_point_raw *raw,
                 const db_point_summary *s, double weights_bytes, char *err, size_t errlen);
/* The end of a run that completed: closing bracket (json); md, when drafter rows ran below
 * speedup 1, a reading note under the table: their mean verify cost and whole cycle cost in
 * decode steps against their mean tau, and only the conclusions those figures support (a cycle
 * costs more than decoding its tokens would only when the cycle's steps exceed tau); whether the
 * target's weights fit in the last-level cache, and the `plan` command for a memory-bound model;
 * and when two drafter variants or more ran, the DFlash 2 write-up's combined table: per dataset,
 * block size, concurrency and temperature, each variant's tau / speedup / draft ms per cycle
 * (the first row of a cell when several targets or drafters share it). CSV and JSON get nothing. Flushes. Nothing at all when no point was printed. */
int db_out_end(db_out *o, char *err, size_t errlen);
/* A run that stops early (error, SIGINT / SIGTERM): json gets its closing bracket when the '['
 * is out, so stdout still parses; the other formats nothing. Frees what begin / prior held. */
void db_out_abort(db_out *o);

/* the axes beyond dataset, variant, block size, concurrency and temperature that vary in a sweep
 * (db_out_point_name names a point by them too) */
enum { DB_VARY_BACKEND = 1, DB_VARY_TARGET = 2, DB_VARY_DRAFTER = 4, DB_VARY_PROFILE = 8 };
/* "math dflash2 B16 c8 T0", with the backend, target ("tiny-qwen3 math ..."), drafter
 * ("drafter NAME") and acceptance profile ("profile replay:FILE") when `vary` says the sweep has
 * several, so a warning in such a sweep points at one row */
void db_out_point_name(const db_point_key *k, unsigned vary, char *b, size_t n);
/* "POINT: reason; reason" into b when the point's numbers are not to be trusted (unstable: which
 * half of the rule; major page faults); 0 when there is nothing to say */
int db_out_point_warning(const db_point_raw *raw, const db_point_summary *s, unsigned vary, char *b, size_t n);

#endif
