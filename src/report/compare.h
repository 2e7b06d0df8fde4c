/* compare.h — two results directories side by side (`dflash-bench compare BASE NEW`): rows
 * matched by point, the ratio NEW / BASE of throughput and of speedup with a confidence
 * interval, a verdict per row, and the exact differences of what is deterministic.
 *
 * Notation: a side is BASE or NEW; a row of a side is one point of its summary.csv, with its
 * raw samples (results_read.h). T(x) is point x's throughput (tokens over time, result/timing.h),
 * S(x) = T(x) / T(ar of x) its speedup.
 *   key       the point's axes (result/point.h db_point_axes: every axis column, not the label,
 *             the directory or the provenance columns); an axis column that only one side has
 *             (an older schema) is left out of the key on both sides, said on stderr.
 *   ratios    thr = T(NEW) / T(BASE); spd = S(NEW) / S(BASE) (1 for `ar`).
 *   CI        95% percentile bootstrap, DB_BOOTSTRAP resamples drawn from db_rng seeded with
 *             DB_COMPARE_SEED (reproducible), of the same clusters the speedup CI resamples
 *             (report.h): the D prompt clusters with replacement, the SAME draw for the four
 *             points of a row (both sides ran the same prompts; drawn per side when their D
 *             differ), and each side's R rounds with replacement, the same draw for a point and
 *             its `ar` within a side (their rounds were interleaved) and independent draws for
 *             BASE and NEW (other runs). Unknown (NAN) below 2 rounds or 2 clusters on a side.
 *   significant  the CI of the --metric ratio excludes 1 (level 95%, two-sided).
 *   change    what the interval says alone: "faster" / "slower" when significant and the ratio
 *             is at least min_change away from 1 (a real but tiny drift between two runs is
 *             "same": asv's factor rule), else "same" ("unknown" without an interval).
 *   verdict   "unstable" when either side's row is not stable (its `stable` column 0 or empty,
 *             report.h), else the change. Rows of one side only: "only-base" / "only-new".
 *   tau_diff  tau(NEW) - tau(BASE); acceptance_max_diff the largest |difference| of the
 *             per-position conditional acceptance rates: both exactly 0 between two runs of one
 *             build at T = 0 (deterministic), so anything else is a change of the decoding.
 *   ar_shift  the median thr of the matched `ar` rows (and its range): how far the baseline
 *             itself moved. Two runs of one build on a VM differ by a machine-wide factor (a
 *             neighbour, the host's clock) that every row shares; the md footer names it when it
 *             is at least min_change, since `--metric speedup` divides it out. */
#ifndef DB_COMPARE_H
#define DB_COMPARE_H

#include "report/results_read.h"

#include <stdio.h>

#define DB_COMPARE_SEED 0x5eed
#define DB_COMPARE_LEVEL 0.95
#define DB_COMPARE_MIN_CHANGE 0.05 /* default --min-change (5%) */

typedef enum { DB_CMP_THROUGHPUT, DB_CMP_SPEEDUP } db_cmp_metric;

typedef struct {
    int b, n;           /* the point in BASE / NEW (-1: absent on that side) */
    double thr, thr_lo, thr_hi; /* T(NEW) / T(BASE) and its CI */
    double spd, spd_lo, spd_hi; /* S(NEW) / S(BASE) and its CI */
    int significant;    /* the metric's CI excludes 1; -1 unknown */
    const char *change, *verdict;
    double tau_diff, acc_diff;
} db_cmp_row;

typedef struct {
    const db_results_read *base, *new_;
    db_cmp_metric metric;
    double min_change;
    int key_axis[64];   /* [db_point_n_axes] the axis is part of the key (both sides have it) */
    int show_axis[64];  /* md: the axis names a row (the five main ones, and any that varies) */
    int n;
    db_cmp_row *rows;   /* [n] matched rows in BASE's order, then NEW's rows alone */
    int n_ar;           /* matched `ar` rows with a finite thr */
    double ar_shift, ar_shift_min, ar_shift_max; /* their median thr and range (NAN when n_ar = 0) */
} db_compare;

/* metric "throughput" or "speedup" (DB_EINPUT otherwise); min_change a fraction (0.05) */
int db_compare_init(db_compare *c, const db_results_read *base, const db_results_read *new_,
                    const char *metric, double min_change, char *err, size_t errlen);
void db_compare_free(db_compare *c);
/* format md, csv or json (DB_EINPUT otherwise); -1 (DB_ERUNTIME) on an I/O error */
int db_compare_print(const db_compare *c, FILE *f, const char *format, char *err, size_t errlen);
/* rows whose verdict is "slower" with the metric's ratio below 1 - pct/100 */
int db_compare_regressions(const db_compare *c, double pct);

#endif
