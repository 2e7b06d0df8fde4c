/* fuzz_sweep_values.c — the value parsers of the sweep keys (lists "1,2,4", ranges, numbers,
 * booleans, names) as the command line and the .ini reach them. The input is lines
 * "key=value" (a line without '=' is a bare flag, value NULL), applied in order; then
 * validation and the expansion into points (at most DB_SWEEP_MAX_POINTS, 256 in fuzz builds:
 * meson.build says why). */
#include "fuzz.h"
#include "bench/sweep.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_str(data, size), err[512];
    db_sweep s;
    db_sweep_init(&s);
    int lines = 0;
    for (char *line = text, *next; line && lines < 64; line = next, lines++) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *eq = strchr(line, '=');
        if (eq) *eq = 0;
        db_sweep_set(&s, line, eq ? eq + 1 : NULL, err, sizeof err);
    }
    db_point_key *keys = NULL;
    int n = 0;
    if (db_sweep_points(&s, &keys, &n, err, sizeof err) == 0) free(keys);
    free(text);
    return 0;
}
