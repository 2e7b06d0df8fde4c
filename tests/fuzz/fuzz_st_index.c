/* fuzz_st_index.c — a sharded checkpoint: model.safetensors.index.json (weight_map) followed by
 * up to three shards, split at FUZZ_SEP and named model-0000K-of-00003.safetensors (the index
 * may name them, or other files, or itself). Read in memory with db_tensors_open_index_mem: what
 * db_tensors_open_dir runs on a directory with an index, the files looked up among these instead of
 * on disk. */
#include "fuzz.h"
#include "model/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink; /* the tensor bytes are read into it */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_part part[4];
    int n = fuzz_split(data, size, part, 4);
    char err[512], names[4][64];
    db_tensor_mem_file files[4];
    for (int k = 0; k < n; k++) {
        if (k) snprintf(names[k], sizeof names[k], "model-%05d-of-00003.safetensors", k);
        else snprintf(names[k], sizeof names[k], "model.safetensors.index.json");
        files[k] = (db_tensor_mem_file){names[k], part[k].p, part[k].n};
    }
    /* each file in a heap block of its own size: ASan sees a read past its end */
    for (int k = 0; k < n; k++) {
        void *b = malloc(part[k].n ? part[k].n : 1);
        if (!b) abort();
        if (part[k].n) memcpy(b, part[k].p, part[k].n);
        files[k].buf = b;
    }
    char *index = fuzz_str(part[0].p, part[0].n);
    db_tensor_set s;
    if (db_tensors_open_index_mem(&s, "ckpt", index, files, n, err, sizeof err) == 0) {
        for (int i = 0; i < s.ntensors; i++) {
            const db_tensor *t = &s.tensors[i];
            for (size_t b = 0; b < t->nbytes; b++) sink += ((const uint8_t *)t->data)[b];
            if (db_tensors_find(&s, t->name) != t || !db_tensors_file_of(&s, t)) __builtin_trap();
        }
        db_tensors_close(&s);
    }
    for (int k = 0; k < n; k++) free((void *)files[k].buf);
    free(index);
    return 0;
}
