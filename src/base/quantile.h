/* quantile.h — order statistics of a sample, shared by the summaries of a point (report), the
 * device figures capacity planning measures (bench) and the commands' medians (cli). */
#ifndef DB_QUANTILE_H
#define DB_QUANTILE_H

/* q-quantile (0..1) of v[n], type 7; sorts v in place; NAN when n == 0 */
double db_quantile(double *v, int n, double q);

#endif
