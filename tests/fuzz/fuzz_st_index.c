/* fuzz_st_index.c — a sharded checkpoint: model.safetensors.index.json (weight_map) followed by
 * up to three shards, split at FUZZ_SEP and written as model-0000K-of-00003.safetensors (the
 * index may name them, or other files, or itself). Opened with db_st_open_dir. */
#include "fuzz.h"
#include "model/safetensors.h"

#include <stdio.h>

static volatile uint64_t sink; /* the tensor bytes are read into it */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_part part[4];
    int n = fuzz_split(data, size, part, 4);
    char path[512], err[512];
    fuzz_clear();
    fuzz_file("model.safetensors.index.json", part[0].p, part[0].n, path, sizeof path);
    for (int k = 1; k < n; k++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-00003.safetensors", k);
        fuzz_file(name, part[k].p, part[k].n, path, sizeof path);
    }
    db_st_set s;
    if (db_st_open_dir(&s, fuzz_dir(), err, sizeof err) == 0) {
        for (int i = 0; i < s.ntensors; i++) {
            const db_st_tensor *t = &s.tensors[i];
            for (size_t b = 0; b < t->nbytes; b++) sink += ((const uint8_t *)t->data)[b];
            if (db_st_find(&s, t->name) != t || !db_st_file_of(&s, t)) __builtin_trap();
        }
        db_st_close(&s);
    }
    return 0;
}
