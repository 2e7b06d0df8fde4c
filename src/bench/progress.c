/* progress.c — see progress.h. */
#include "bench/progress.h"
#include "base/util.h"

#include <unistd.h>

static void fmt_dur(char *b, size_t n, double s)
{
    if (s >= 0 && s < 9.95) { /* a short group's time is not "0s" */
        snprintf(b, n, "%.1fs", s);
        return;
    }
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(b, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(b, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(b, n, "%lds", t);
}

/* elapsed x (what is left / what is done), by predicted cost when known, else by points */
static void eta(const db_progress *p, char *b, size_t n)
{
    int by_cost = p->cost_total > 0 && p->cost_done > 0;
    if (!p->done || (p->cost_total > 0 && !by_cost)) {
        snprintf(b, n, "?");
        return;
    }
    double left = by_cost ? (p->cost_total - p->cost_done) / p->cost_done : (double)(p->total - p->done) / p->done;
    fmt_dur(b, n, (db_now() - p->t0) * (left > 0 ? left : 0));
}

void db_progress_begin(db_progress *p, FILE *f, int total, double cost)
{
    p->f = f;
    p->total = total;
    p->done = 0;
    p->cost_total = cost;
    p->cost_done = 0;
    p->tty = isatty(fileno(f));
    p->t0 = db_now();
    p->drawn = 0;
}

void db_progress_clear(db_progress *p)
{
    if (p->tty && p->drawn) fputs("\r\033[K", p->f);
    p->drawn = 0;
    fflush(p->f);
}

void db_progress_start(db_progress *p, const char *what)
{
    if (!p->tty) return;
    enum { W = 24 };
    char bar[W + 1], e[32];
    int fill = p->total ? p->done * W / p->total : 0;
    for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '.';
    bar[W] = 0;
    eta(p, e, sizeof e);
    fprintf(p->f, "\r\033[K[%s] %d/%d %s  ETA %s", bar, p->done, p->total, what, e);
    p->drawn = 1;
    fflush(p->f);
}

void db_progress_done(db_progress *p, const char *what, int points, double cost, double seconds)
{
    p->done += points;
    p->cost_done += cost;
    if (p->tty) return; /* the next start() redraws */
    char e[32], d[32];
    eta(p, e, sizeof e);
    fmt_dur(d, sizeof d, seconds);
    fprintf(p->f, "[%d/%d points] %s: the group took %s, ETA %s\n", p->done, p->total, what, d, e);
    fflush(p->f);
}

void db_progress_end(db_progress *p)
{
    db_progress_clear(p);
    if (p->tty && p->total) {
        char d[32];
        fmt_dur(d, sizeof d, db_now() - p->t0);
        fprintf(p->f, "%d/%d points in %s\n", p->done, p->total, d);
    }
}
