/* gguf.h — read-only access to a GGUF file (llama.cpp's single-file model format, version 3;
 * version 2 has the same little-endian layout and is accepted too).
 *
 * Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count; metadata entries (string
 * key, u32 value type, value); tensor infos (string name, u32 n_dims, u64 ne[n_dims], u32 ggml
 * type, u64 offset); padding to `general.alignment` (default 32); the data section. A string is
 * u64 length + bytes (no NUL); an array value is u32 element type, u64 count, elements. ne[0]
 * is the innermost (contiguous) dimension: a matrix [rows, cols] has ne = {cols, rows}.
 *
 * The file is mmap'd privately (copy on write: the loader may reorder rows in place without
 * touching the file). Nothing is trusted: every length, count, offset, type, shape and the
 * alignment is checked with overflow-safe arithmetic when the file is opened, so a value or
 * tensor handed out is always safe to read in full. Errors are one line naming the file and the
 * key or tensor. */
#ifndef DB_GGUF_H
#define DB_GGUF_H

#include "backend.h"

#include <stddef.h>
#include <stdint.h>

#define DB_GGUF_MAX_DIMS 4

enum {
    DB_GGUF_U8 = 0, DB_GGUF_I8 = 1, DB_GGUF_U16 = 2, DB_GGUF_I16 = 3, DB_GGUF_U32 = 4,
    DB_GGUF_I32 = 5, DB_GGUF_F32 = 6, DB_GGUF_BOOL = 7, DB_GGUF_STRING = 8, DB_GGUF_ARRAY = 9,
    DB_GGUF_U64 = 10, DB_GGUF_I64 = 11, DB_GGUF_F64 = 12,
};

typedef struct {
    char *key;
    uint32_t type;              /* DB_GGUF_* */
    uint32_t arr_type;          /* element type of an array */
    uint64_t n;                 /* array length; 1 for a scalar */
    const unsigned char *val;   /* the value (an array's first element) inside the mapping */
} db_gguf_kv;

typedef struct {
    char *name;
    uint32_t ggml_type;
    db_dtype dtype;
    int ndim;
    int64_t ne[DB_GGUF_MAX_DIMS]; /* ne[0] innermost */
    unsigned char *data;          /* inside the (private) mapping, nbytes long */
    size_t nbytes;
} db_gguf_tensor;

typedef struct {
    char path[1024];
    unsigned char *map;
    size_t size;
    int borrowed; /* map is the caller's buffer (db_gguf_open_mem): not unmapped */
    uint32_t version;
    db_gguf_kv *kv;
    int nkv;
    db_gguf_tensor *tensors;
    int ntensors;
    uint64_t alignment;
} db_gguf;

int db_gguf_open(db_gguf *g, const char *path, char *err, size_t errlen);
/* The same for a file's bytes already in memory (buf, writable like the private mapping, stays
 * the caller's and outlives g; `name` stands for the path in messages). The fuzz harness reads
 * through it: in a heap buffer ASan sees a read one byte past the end, in a mapping only one
 * past the last page. */
int db_gguf_open_mem(db_gguf *g, const char *name, unsigned char *buf, size_t size, char *err,
                     size_t errlen);
void db_gguf_close(db_gguf *g);

const db_gguf_kv *db_gguf_find(const db_gguf *g, const char *key);
const db_gguf_tensor *db_gguf_tensor_find(const db_gguf *g, const char *name);

/* Typed getters: a missing key gives dflt (required = 0) or an error; a key of another type or
 * out of [lo, hi] is an error naming file and key. Integers accept every integer type, floats
 * F32 / F64, strings are handed out as pointer + length into the mapping (not NUL-terminated). */
int db_gguf_int(const db_gguf *g, const char *key, int required, int64_t dflt, int64_t lo,
                int64_t hi, int64_t *out, char *err, size_t errlen);
int db_gguf_float(const db_gguf *g, const char *key, int required, double dflt, double *out,
                  char *err, size_t errlen);
int db_gguf_bool(const db_gguf *g, const char *key, int required, int dflt, int *out, char *err,
                 size_t errlen);
int db_gguf_str(const db_gguf *g, const char *key, int required, const char **s, size_t *len,
                char *err, size_t errlen);
/* An array `key` of element type `elem` (DB_GGUF_STRING, or any integer type with elem = -1,
 * or DB_GGUF_BOOL); *out NULL when absent and not required. */
int db_gguf_array(const db_gguf *g, const char *key, int required, int elem,
                  const db_gguf_kv **out, char *err, size_t errlen);
/* element i of an integer or bool array (validated by db_gguf_array) */
int64_t db_gguf_arr_int(const db_gguf_kv *kv, uint64_t i);
/* walk a string array: *p starts at kv->val; each call yields one string and advances */
void db_gguf_next_str(const unsigned char **p, const char **s, size_t *len);

/* dir names a GGUF model: a file starting with the GGUF magic, or a directory without
 * config.json holding exactly one *.gguf file. 1 with the file's path in out, 0 when not,
 * negative with a message when the directory is ambiguous. */
int db_gguf_resolve(const char *dir, char *out, size_t outlen, char *err, size_t errlen);

#endif
