/* test_util.h — helpers shared by the C tests: fixture paths, golden JSON access, comparisons. */
#ifndef DB_TEST_UTIL_H
#define DB_TEST_UTIL_H

#include "backend.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* $DB_TEST_DATA (set by meson) + "/" + name */
const char *tu_data(const char *name);
/* parse dir/golden.json; NULL with a diagnostic when missing */
cJSON *tu_golden(const char *dir);
/* parse any JSON file; NULL with a diagnostic */
cJSON *tu_json_file(const char *path);
/* numbers of a JSON array into a malloc'd float/int array; count in *n */
float *tu_floats(const cJSON *arr, int *n);
int *tu_ints(const cJSON *arr, int *n);
/* max |a-b| / max(|b|, floor) over n values */
double tu_max_rel_err(const float *a, const float *b, size_t n, double floor);

/* rows x cols values of quantized type dt as random blocks: random bytes, the f16 scale fields
 * set to small finite values (malloc'd) */
void *tu_rand_quant(db_rng *rng, db_dtype dt, int rows, int cols);

#endif
