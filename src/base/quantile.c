/* quantile.c — see quantile.h. */
#include "base/quantile.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double db_quantile(double *v, int n, double q)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double h = (n - 1) * q;
    int lo = (int)floor(h);
    if (lo >= n - 1) return v[n - 1];
    return v[lo] + (h - lo) * (v[lo + 1] - v[lo]);
}
