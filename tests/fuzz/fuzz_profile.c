/* fuzz_profile.c — an acceptance profile CSV (a two-column position,conditional_rate file or a
 * run's acceptance.csv). The first line of the input is the "#TEXT" point selector when it
 * starts with '#'; the rest is the file. A profile that loads has rates in [0, 1]. */
#include "fuzz.h"
#include "bench/profile.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512], spec[600], err[512];
    size_t skip = 0;
    const char *sel = "";
    char selbuf[200] = "";
    if (size && data[0] == '#') {
        const uint8_t *nl = memchr(data, '\n', size);
        skip = nl ? (size_t)(nl - data) + 1 : size;
        snprintf(selbuf, sizeof selbuf, "%.*s", (int)(skip - (nl ? 1 : 0)), (const char *)data);
        sel = selbuf;
    }
    fuzz_file("profile.csv", data + skip, size - skip, path, sizeof path);
    snprintf(spec, sizeof spec, "%s%s", path, sel);
    db_profile p;
    if (db_profile_load(&p, spec, err, sizeof err) == 0) {
        if (p.n < 1 || p.n > DB_MAX_BLOCK) __builtin_trap();
        for (int i = 0; i < p.n; i++)
            if (!(p.rate[i] >= 0 && p.rate[i] <= 1)) __builtin_trap();
        double tau = db_profile_tau(&p, 16);
        if (!(tau >= 1 && tau <= 16)) __builtin_trap();
    }
    return 0;
}
