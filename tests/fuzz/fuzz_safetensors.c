/* fuzz_safetensors.c — one model.safetensors file: header length, JSON header, dtypes, shapes,
 * data_offsets, parsed from the input's bytes in memory (db_tensors_open_mem: the parser of
 * db_tensors_open_file without the file). Every tensor the open set hands out is read in full (ASan
 * catches a tensor that reaches one byte past the input) and looked up by name with its own
 * shape. */
#include "fuzz.h"
#include "model/safetensors.h"

static volatile uint64_t sink; /* the tensor bytes are read into it */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    db_tensor_set s;
    if (db_tensors_open_mem(&s, "model.safetensors", data, size, err, sizeof err) == 0) {
        for (int i = 0; i < s.ntensors; i++) {
            const db_tensor *t = &s.tensors[i];
            for (size_t b = 0; b < t->nbytes; b++) sink += ((const uint8_t *)t->data)[b];
            const db_tensor *got;
            if (db_tensors_find(&s, t->name) != t ||
                db_tensors_expect(&s, t->name, t->ndim, t->shape, &got, err, sizeof err) != 0 || got != t)
                __builtin_trap(); /* a tensor of the set must be found with its own shape */
        }
        db_tensors_close(&s);
    }
    return 0;
}
