/* timing.c — throughput, spread and requests in flight of a point (timing.h). */
#include "result/timing.h"
#include "base/util.h"

#include <math.h>
#include <stdlib.h>

static const db_req_stats *req(const db_point_raw *p, int r, int i)
{
    return &p->reqs[(size_t)r * (size_t)p->n_prompts + (size_t)i];
}

static long round_tokens(const db_point_raw *p, int r)
{
    long tok = 0;
    for (int i = 0; i < p->n_prompts; i++) tok += req(p, r, i)->output_tokens;
    return tok;
}

double db_round_tok_s(const db_point_raw *p, int r)
{
    return p->wall_s[r] > 0 ? (double)round_tokens(p, r) / p->wall_s[r] : NAN;
}

double db_throughput(const db_point_raw *p)
{
    double tok = 0, s = 0;
    for (int r = 0; r < p->repetitions; r++) tok += (double)round_tokens(p, r), s += p->wall_s[r];
    return s > 0 ? tok / s : NAN;
}

double db_round_stddev(const db_point_raw *p)
{
    int R = p->repetitions;
    if (R < 2) return NAN;
    double m = 0, ss = 0;
    for (int r = 0; r < R; r++) m += db_round_tok_s(p, r);
    m /= R;
    for (int r = 0; r < R; r++) ss += (db_round_tok_s(p, r) - m) * (db_round_tok_s(p, r) - m);
    return sqrt(ss / (R - 1));
}

double db_spread(const db_point_raw *p)
{
    double t = db_throughput(p);
    return t > 0 ? db_round_stddev(p) / t : NAN;
}

/* The most requests in flight at once is reached at some admission: at admission time t of
 * request i, the requests admitted by t and not yet finished (one finishing exactly at t has
 * freed the slot i takes). Counted directly, O(N^2) a round (N = 4c requests or the prompts:
 * thousands at most), so that summarizing a point allocates nothing and cannot fail. */
void db_in_flight(const db_point_raw *p, double *mean, int *max)
{
    int N = p->n_prompts;
    double busy = 0, wall = 0;
    *max = 0;
    for (int r = 0; r < p->repetitions; r++) {
        wall += p->wall_s[r];
        for (int i = 0; i < N; i++) {
            const db_req_stats *q = req(p, r, i);
            busy += fmax(0, q->t_finished - q->t_admitted);
            int cur = 0;
            for (int j = 0; j < N; j++) {
                const db_req_stats *o = req(p, r, j);
                cur += o->t_admitted <= q->t_admitted && o->t_finished > q->t_admitted;
            }
            if (cur > *max) *max = cur;
        }
    }
    *mean = wall > 0 ? busy / wall : NAN;
}
