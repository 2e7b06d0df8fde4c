/* profile.h — acceptance profiles for replay (capacity planning).
 *
 * A profile is the conditional acceptance rate of each draft position i = 1..n (the chance that
 * position i is accepted once positions < i were). `run --acceptance-profile SPEC` makes the
 * verify step accept with these rates instead of comparing tokens (engine.h, replay_rates), so
 * a synthetic model (or any model) is timed at a chosen acceptance profile while every kernel
 * of the cycle still runs at full size.
 *
 * SPEC is a CSV file, optionally followed by "#TEXT":
 *   - the acceptance.csv of a `run` results directory (columns point_id, position,
 *     conditional_rate among others): the rows of ONE point are used. A file holding several
 *     points needs "#TEXT", TEXT being part of exactly one point_id
 *     (e.g. acceptance.csv#dflash2|B16|c1); otherwise it is an error listing them. An empty
 *     conditional_rate (a position never reached) counts as 0;
 *   - a two-column file `position,conditional_rate` (header optional).
 * A name without '/' that is not a file is a preset: NAME or NAME.csv in configs/profiles/, found
 * as base/paths.h says (current directory, $DFLASH_BENCH_DATA, the install, the source tree;
 * configs/profiles/README.md).
 * Lines starting with '#' are comments (the presets in configs/profiles/ say there where their
 * numbers come from). Positions must be 1..n, each once; rates in [0, 1]. */
#ifndef DB_PROFILE_H
#define DB_PROFILE_H

#include "engine/stats.h"
#include "result/point.h"

#include <stddef.h>

typedef struct {
    char spec[512];            /* as given */
    float rate[DB_MAX_BLOCK];  /* conditional rate of position i at rate[i - 1] */
    int n;                     /* positions */
    char point_id[DB_POINT_ID_MAX]; /* the acceptance.csv point used; "" for a two-column file */
} db_profile;

int db_profile_load(db_profile *p, const char *spec, char *err, size_t errlen);
/* expected acceptance length (tokens per cycle, bonus included) at block size B:
 * 1 + sum_{i=1}^{min(B-1, n)} prod_{j<=i} rate_j */
double db_profile_tau(const db_profile *p, int block);
/* n positions of one constant rate whose expected tau at block size B is tau (1 <= tau <= B) */
void db_profile_constant(db_profile *p, double tau, int block, int n);

#endif
