/* safetensors.h — read-only access to a Hugging Face checkpoint's tensors.
 *
 * A checkpoint directory holds `model.safetensors`, or shards named by
 * `model.safetensors.index.json` ({"weight_map": {tensor: file}}). Files are mmap'd; nothing
 * is trusted: header length, JSON, dtype, shape, data_offsets (inside the file, matching the
 * shape's byte count, not overlapping another tensor) are all checked when the set is opened,
 * so a tensor handed out is always safe to read in full.
 *
 * The set itself (db_tensor_set, its db_tensor entries, db_tensors_find / _expect / _close) is
 * the model code's view of any checkpoint: safetensors files (here), a GGUF file (gguf_model.h,
 * which db_tensors_open_dir also opens) or synthetic weights (synthetic.h). */
#ifndef DB_SAFETENSORS_H
#define DB_SAFETENSORS_H

#include "backend.h"

#include <stddef.h>
#include <stdint.h>

#define DB_TENSOR_MAX_DIMS 4

typedef struct {
    char *name;
    db_dtype dtype;
    int int_bytes;    /* 4 / 8 for an I32 / I64 tensor (dtype then means nothing), else 0 */
    int ndim;
    int64_t shape[DB_TENSOR_MAX_DIMS];
    const void *data; /* inside the mapping, nbytes long */
    size_t nbytes;
    int file;         /* index into db_tensor_set.files */
} db_tensor;

typedef struct {
    char *path;
    void *map;
    size_t size;
    int borrowed; /* map is the caller's buffer (db_tensors_open_mem): not unmapped */
} db_tensor_file;

typedef struct {
    char dir[1024];
    db_tensor_file *files;
    int nfiles;
    db_tensor *tensors; /* sorted by name */
    int ntensors;
    /* Synthetic set (capacity planning, see synthetic.h): no file; every name is present,
     * db_tensors_find / db_tensors_expect hand out the placeholder `any` (no data), and the
     * loaders (db_load_matrix, db_load_vector, the drafter's conv loader) generate the tensor on
     * the backend from `seed` and the tensor's name instead of reading it. */
    int synthetic;
    uint64_t seed;         /* weight seed of the model (tensor seeds derive from it + name) */
    db_dtype dtype;        /* storage dtype of the generated matrices */
    db_tensor any;
    int file_type;         /* a GGUF's general.file_type + 1 (llama.cpp's mix number), 0: none */
} db_tensor_set;

/* Open every safetensors file of a checkpoint directory. */
int db_tensors_open_dir(db_tensor_set *s, const char *dir, char *err, size_t errlen);
/* 1 when db_tensors_open_dir(dir) finds weights to read (a GGUF, model.safetensors or its index),
 * whether or not they open; 0 when there are none (a config-only directory) */
int db_tensors_dir_has_weights(const char *dir);
/* Open one file (tests, tools). */
int db_tensors_open_file(db_tensor_set *s, const char *path, char *err, size_t errlen);
/* The same for a file's bytes already in memory (buf stays the caller's and outlives the set;
 * `name` stands for the path in messages). The fuzz harness reads through it: in a heap buffer
 * ASan sees a read one byte past the end, in a mapping only one past the last page. */
int db_tensors_open_mem(db_tensor_set *s, const char *name, const void *buf, size_t size, char *err,
                        size_t errlen);
/* A file of a checkpoint held in memory: its plain file name and bytes. */
typedef struct {
    const char *name;
    const void *buf;
    size_t size;
} db_tensor_mem_file;
/* db_tensors_open_dir's reading of a sharded checkpoint, on the index's text in memory (index_text:
 * model.safetensors.index.json, NUL-terminated; `dir` stands for the directory in messages):
 * the shards it names are looked up among files[0..nfiles) (bytes the caller keeps while the
 * set is open; a name not there fails as a missing file does). The fuzz harness reads through
 * it. */
int db_tensors_open_index_mem(db_tensor_set *s, const char *dir, const char *index_text, const db_tensor_mem_file *files,
                              int nfiles, char *err, size_t errlen);
void db_tensors_close(db_tensor_set *s);
/* A synthetic set named `label` (the config file it stands for) with weight seed `seed`. */
void db_tensors_open_synthetic(db_tensor_set *s, const char *label, uint64_t seed, db_dtype dtype);

const db_tensor *db_tensors_find(const db_tensor_set *s, const char *name);
/* the dtype holding most elements of the set's matrices (tensors of 2 dims or more; ties to the
 * lower dtype number), what the rows call the checkpoint's dtype; a synthetic set's own dtype */
db_dtype db_tensors_main_dtype(const db_tensor_set *s);
/* The name of the set's weight mix, llama.cpp style ("q4_k_m", "q8_0", "bf16"): a GGUF's
 * general.file_type when it names one (llama-quantize writes it: a Q4_K_M file of narrow rows
 * holds mostly Q5_0 fallbacks, which no count tells apart); otherwise from the tensor type
 * counts: the main dtype, and for Q4_K / Q5_K "_m" when Q6_K matrices are mixed in, else "_s",
 * for Q3_K "_l" with Q5_K, "_m" with Q4_K, else "_s". out gets at most n - 1 characters. */
void db_tensors_mix(const db_tensor_set *s, char *out, size_t n);
const char *db_tensors_file_of(const db_tensor_set *s, const db_tensor *t);

/* Every tensor named <prefix><N>.… has N < n_layers: a checkpoint with more layers than its
 * config says would otherwise run as a truncated model, silently. DB_EINPUT naming the config,
 * its layer count and the first tensor beyond it. */
int db_tensors_check_layers(const db_tensor_set *s, const char *prefix, int n_layers, const char *cfg_path,
                            char *err, size_t errlen);

/* Find `name` and check its shape is exactly dims[0..ndim). The message names file, tensor,
 * expected and found shapes. */
int db_tensors_expect(const db_tensor_set *s, const char *name, int ndim, const int64_t *dims,
                      const db_tensor **out, char *err, size_t errlen);

#endif
