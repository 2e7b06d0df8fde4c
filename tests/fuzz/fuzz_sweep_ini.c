/* fuzz_sweep_ini.c — a sweep .ini file (the files of configs/): every key = value through the sweep's
 * setters, then validation and the expansion into points. */
#include "fuzz.h"
#include "bench/sweep.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512], err[512];
    fuzz_file("sweep.ini", data, size, path, sizeof path);
    db_sweep s;
    db_sweep_init(&s);
    if (db_sweep_load_ini(&s, path, err, sizeof err) == 0) {
        db_point_key *keys = NULL;
        int n = 0;
        if (db_sweep_points(&s, &keys, &n, err, sizeof err) == 0) free(keys);
    }
    return 0;
}
