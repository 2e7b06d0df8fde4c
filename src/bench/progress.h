/* progress.h — progress of a sweep on stderr: a bar with the point being measured and an ETA
 * (elapsed / done * remaining) redrawn in place when stderr is a terminal; otherwise one log line
 * per finished point, so logs stay readable. Never writes to stdout. */
#ifndef DB_PROGRESS_H
#define DB_PROGRESS_H

#include <stdio.h>

typedef struct {
    FILE *f;
    int total, done;
    int tty;
    double t0;
    int drawn; /* a bar is on screen (needs clearing before other output) */
} db_progress;

/* total = points to measure in this invocation (skipped ones excluded) */
void db_progress_begin(db_progress *p, FILE *f, int total);
/* a point starts (what: "math dflash2 B16 c8"); redraws the bar on a terminal */
void db_progress_start(db_progress *p, const char *what);
/* the point finished after `seconds` */
void db_progress_done(db_progress *p, const char *what, double seconds);
/* erase the bar (before printing a log line, and at the end) */
void db_progress_clear(db_progress *p);
void db_progress_end(db_progress *p);

#endif
