/* fuzz_dataset.c — a prompt set in every format the loader knows, parsed from the input's bytes
 * (db_dataset_parse: what db_dataset_load runs on the file's text). The first byte picks the
 * file name (hence the format the loader detects): data.jsonl, data.json, data.csv, data.txt,
 * and max_samples (0..15, shuffle-then-select); the rest is the file. A set that loads has
 * samples of >= 1 turn of well-formed UTF-8. */
#include "fuzz.h"
#include "text/dataset.h"
#include "text/utf8.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const char *const names[4] = {"data.jsonl", "data.json", "data.csv", "data.txt"};
    char err[512], *text = fuzz_str(data + 1, size - 1);
    db_dataset ds;
    if (db_dataset_parse(&ds, names[data[0] & 3], text, size - 1, (data[0] >> 2) & 15, 7, err, sizeof err) == 0) {
        for (int i = 0; i < ds.n; i++) {
            if (ds.samples[i].n_turns < 1) __builtin_trap();
            for (int t = 0; t < ds.samples[i].n_turns; t++) {
                const char *s = ds.samples[i].turns[t];
                if (db_utf8_check(s, strlen(s)) != strlen(s)) __builtin_trap();
            }
        }
        db_dataset_free(&ds);
    }
    free(text);
    return 0;
}
