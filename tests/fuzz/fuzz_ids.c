/* fuzz_ids.c — token id lists (--prompt-ids, --prompt-ids-file, check-lossless prompt files):
 * numbers separated by commas or whitespace. A list that parses holds ids in [0, 2^31). */
#include "fuzz.h"
#include "engine/session.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_str(data, size), err[512];
    int *ids = NULL, n = -1;
    if (db_parse_ids(s, &ids, &n, err, sizeof err) == 0) {
        if (n < 0) __builtin_trap();
        for (int i = 0; i < n; i++)
            if (ids[i] < 0) __builtin_trap();
    }
    free(ids);
    free(s);
    return 0;
}
