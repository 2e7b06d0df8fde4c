/* test_util.c — see test_util.h. */
#include "test_util.h"
#include "base/util.h"
#include "backend.h"

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

/* see test_util.h */
void *tu_rand_quant(db_rng *rng, db_dtype dt, int rows, int cols)
{
    size_t bb = db_dtype_size(dt), nblk = (size_t)rows * cols / (size_t)db_dtype_block(dt);
    unsigned char *w = malloc(nblk * bb + 1);
    for (size_t i = 0; i < nblk * bb; i++) w[i] = (unsigned char)db_rng_next(rng);
    int off[2] = {0, -1};
    if (dt == DB_Q4_K || dt == DB_Q5_K || dt == DB_Q4_1 || dt == DB_Q5_1) off[1] = 2;
    if (dt == DB_Q6_K) off[0] = 208;
    if (dt == DB_Q3_K) off[0] = 108;
    if (dt == DB_Q2_K) off[0] = 80, off[1] = 82;
    for (size_t b = 0; b < nblk; b++)
        for (int k = 0; k < 2; k++) {
            if (off[k] < 0) continue;
            float v = (float)((db_rng_uniform(rng) - 0.5) * 0.02);
            uint16_t h = db_f32_to_f16(v);
            memcpy(w + b * bb + (size_t)off[k], &h, 2);
        }
    return w;
}
