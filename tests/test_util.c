/* test_util.c — see test_util.h. */
#include "test_util.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tu_data(const char *name)
{
    static char buf[8][1024];
    static int k;
    const char *base = getenv("DB_TEST_DATA");
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", base ? base : "tests/data", name);
    return b;
}

cJSON *tu_golden(const char *dir)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/golden.json", dir);
    return tu_json_file(p);
}

cJSON *tu_json_file(const char *p)
{
    char *s, err[512];
    if (db_read_file(p, &s, NULL, err, sizeof err) != 0) {
        printf("# %s\n", err);
        return NULL;
    }
    cJSON *j = cJSON_Parse(s);
    free(s);
    if (!j) printf("# %s is not JSON\n", p);
    return j;
}

float *tu_floats(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    float *v = malloc(sizeof(float) * (size_t)(*n > 0 ? *n : 1));
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) v[i++] = (float)e->valuedouble;
    return v;
}

int *tu_ints(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    int *v = malloc(sizeof(int) * (size_t)(*n > 0 ? *n : 1));
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) v[i++] = e->valueint;
    return v;
}

double tu_max_rel_err(const float *a, const float *b, size_t n, double floor)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(fabs((double)b[i]), floor);
        if (!(d <= m)) m = d; /* NaN propagates as failure */
    }
    return m;
}
