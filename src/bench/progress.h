/* progress.h — progress of a sweep on stderr: a bar with the group being measured and an ETA
 * redrawn in place when stderr is a terminal; otherwise one log line per finished group, so logs
 * stay readable. The ETA weighs what is left by the sweep's predicted cost (the point-cost model
 * of cluster/shard.h, db_shard_point_cost): elapsed / cost done x cost left, so a cheap first
 * group does not stretch the estimate over dearer ones, nor a dear one the reverse. Never writes
 * to stdout. */
#ifndef DB_PROGRESS_H
#define DB_PROGRESS_H

#include <stdio.h>

typedef struct {
    FILE *f;
    int total, done;          /* points */
    double cost_total, cost_done; /* predicted cost (any unit: only ratios are used) */
    int tty;
    double t0;
    int drawn; /* a bar is on screen (needs clearing before other output) */
} db_progress;

/* total = points to measure in this invocation (skipped ones excluded), cost = their predicted
 * cost (<= 0: unknown, the ETA counts points instead) */
void db_progress_begin(db_progress *p, FILE *f, int total, double cost);
/* a group starts (what: "math c8 T0: 3 points x 3 rounds"); redraws the bar on a terminal */
void db_progress_start(db_progress *p, const char *what);
/* the group of `points` points and predicted `cost` finished after `seconds` (the group's
 * wall time, all its points and rounds together) */
void db_progress_done(db_progress *p, const char *what, int points, double cost, double seconds);
/* erase the bar: before any other line on stderr (a warning, an error), and at the end */
void db_progress_clear(db_progress *p);
void db_progress_end(db_progress *p);

#endif
