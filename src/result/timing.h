/* timing.h — the one definition of a point's throughput and of what its timed phase held in
 * flight, from its raw samples (README, *Timing*). Both the runner (whether to run another
 * round) and the reporters (the columns) use these, so they cannot disagree.
 *
 * Notation: R rounds, N requests per round (turns included); request (r, i) is
 * raw->reqs[r*N + i], tok_ri its committed tokens, e2e_ri = t_finished - t_admitted; wall_r the
 * seconds of round r's timed pass.
 *   round rate     x_r = sum_i tok_ri / wall_r
 *   throughput     sum_r sum_i tok_ri / sum_r wall_r   (pooled: tokens over time; the mean of
 *                  the x_r would weigh a fast round as much as a slow one lasting 10x longer)
 *   spread         sample stddev of the x_r / throughput; NAN below 2 rounds (unknown)
 *   mean in flight sum_r sum_i e2e_ri / sum_r wall_r  (the time-weighted number of admitted,
 *                  unfinished requests; closed-loop, so c while the slots are full)
 *   max in flight  the most requests admitted and not yet finished at one instant */
#ifndef DB_TIMING_H
#define DB_TIMING_H

#include "result/point.h"

/* above this spread a point's throughput is unstable (pyperf's 10% rule), and the runner runs
 * another round while rounds are left */
#define DB_SPREAD_MAX 0.10

/* a closed-loop row labelled concurrency c whose mean in flight is below this fraction of c is
 * flagged (at a request rate the arrivals decide what is in flight) */
#define DB_IN_FLIGHT_MIN 0.9

double db_round_tok_s(const db_point_raw *p, int r);
double db_throughput(const db_point_raw *p);
/* sample stddev of the round rates; NAN below 2 rounds */
double db_round_stddev(const db_point_raw *p);
double db_spread(const db_point_raw *p);
/* mean and max requests in flight over the point's rounds (NAN / 0 without requests) */
void db_in_flight(const db_point_raw *p, double *mean, int *max);

#endif
