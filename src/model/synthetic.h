/* synthetic.h — synthetic weights for capacity planning: a target and a drafter of exactly the
 * shapes a config.json names, with random values generated ON THE BACKEND (the fill_random op,
 * backend.h), never read from a file and never held on the host. The cycle's cost depends on
 * shapes, hardware and acceptance profile, not on weight values, so a synthetic model times
 * like the real one; its outputs are meaningless, and every row it produces says
 * weights = synthetic.
 *
 * Seeds: every tensor has its own stream, derived from the model's weight seed and the
 * tensor's name, so adding a layer never changes another tensor:
 *   model_seed  = db_synth_mix(run_seed + db_synth_fnv1a("target" | "drafter"))
 *   tensor_seed = db_synth_mix(model_seed ^ db_synth_fnv1a(name))
 * with fnv1a the 64-bit FNV-1a hash of the bytes and mix the splitmix64 finalizer of
 * x + 0x9E3779B97F4A7C15.
 *
 * Values (uniform, db_fill_random_value): matrices mean 0, std 1/sqrt(cols) (a projection keeps
 * the scale of its input); the selector codebooks std 0.02 ("small"); the conv kernel
 * projections std 0.1/sqrt(cols); norm vectors uniform in [0.95, 1.05); conv base kernels the
 * identity (tap 0 = 1, other taps 0) plus uniform noise of std 0.01. Matrices are stored in the
 * chosen dtype (default bf16), vectors in f32 as the loaders keep them. */
#ifndef DB_SYNTHETIC_H
#define DB_SYNTHETIC_H

#include "backend.h"
#include "base/parse.h"
#include "model/safetensors.h"

#include <stddef.h>
#include <stdint.h>

/* what a loader needs to generate a synthetic model */
typedef struct {
    uint64_t seed;  /* the run's seed */
    db_dtype dtype; /* storage dtype of the matrices */
} db_synth_opts;

uint64_t db_synth_fnv1a(const char *s);
uint64_t db_synth_mix(uint64_t x);
/* the weight seed of model `role` ("target", "drafter") of a run seeded `run_seed` */
uint64_t db_synth_model_seed(uint64_t run_seed, const char *role);
uint64_t db_synth_tensor_seed(uint64_t model_seed, const char *name);

/* a matrix [rows, cols] in st->dtype / an f32 norm vector [n] / a conv base kernel [2, K, H]
 * f32, generated for tensor `name` of the synthetic set st */
int db_synth_matrix(db_weight *w, db_backend *be, const db_tensor_set *st, const char *name, int rows,
                    int cols, char *err, size_t errlen);
int db_synth_vector(float **out, db_backend *be, const db_tensor_set *st, const char *name, int n,
                    char *err, size_t errlen);
int db_synth_conv_base(float **out, db_backend *be, const db_tensor_set *st, const char *name, int k,
                       int h, char *err, size_t errlen);

/* The weight dtype names (backend.h's): the element types synthetic weights are made in
 * (DB_SYNTH_DTYPES, run and bench --dtype), and those with the quantized types a checkpoint may
 * store (DB_WEIGHT_DTYPES, plan --dtype); the one list of each parser, sweep key and help line
 * (DB_SYNTH_DTYPE_NAMES "bf16, f16, f32", DB_WEIGHT_DTYPE_NAMES; parse.h) */
#define DB_SYNTH_DTYPES(X, SEP) X("bf16") SEP() X("f16") SEP() X("f32")
#define DB_QUANT_DTYPES(X, SEP)                                                                   \
    X("q8_0") SEP() X("q4_0") SEP() X("q4_1") SEP() X("q5_0") SEP() X("q5_1") SEP() X("q2_k") SEP()  \
    X("q3_k") SEP() X("q4_k") SEP() X("q5_k") SEP() X("q6_k") SEP() X("iq4_nl") SEP() X("iq4_xs")
#define DB_WEIGHT_DTYPES(X, SEP) DB_SYNTH_DTYPES(X, SEP) SEP() DB_QUANT_DTYPES(X, SEP)
#define DB_SYNTH_DTYPE_NAMES DB_NAMES_TEXT(DB_SYNTH_DTYPES)
#define DB_WEIGHT_DTYPE_NAMES DB_NAMES_TEXT(DB_WEIGHT_DTYPES)

/* one of DB_SYNTH_DTYPES -> dtype; -1 for anything else */
int db_dtype_parse(const char *s, db_dtype *out);
/* one of DB_WEIGHT_DTYPES -> dtype; -1 for anything else */
int db_weight_dtype_parse(const char *s, db_dtype *out);

#endif
