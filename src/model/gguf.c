/* gguf.c — mmap + validated parsing of GGUF files (see gguf.h for the layout). */
#include "model/gguf.h"
#include "base/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* longest key / tensor name accepted (llama.cpp's own limit on names is 64) */
#define MAX_NAME 256

/* ggml type ids and the dtype each maps to (-1: known to ggml, not supported here) */
static const struct {
    uint32_t id;
    const char *name;
    int dtype;
} ggml_types[] = {
    {0, "F32", DB_F32},   {1, "F16", DB_F16},   {2, "Q4_0", DB_Q4_0}, {3, "Q4_1", DB_Q4_1},
    {6, "Q5_0", DB_Q5_0}, {7, "Q5_1", DB_Q5_1}, {8, "Q8_0", DB_Q8_0}, {9, "Q8_1", -1},
    {10, "Q2_K", DB_Q2_K}, {11, "Q3_K", DB_Q3_K}, {12, "Q4_K", DB_Q4_K}, {13, "Q5_K", DB_Q5_K},
    {14, "Q6_K", DB_Q6_K}, {15, "Q8_K", -1},    {16, "IQ2_XXS", -1},  {17, "IQ2_XS", -1},
    {18, "IQ3_XXS", -1},  {19, "IQ1_S", -1},    {20, "IQ4_NL", DB_IQ4_NL}, {21, "IQ3_S", -1},
    {22, "IQ2_S", -1},    {23, "IQ4_XS", DB_IQ4_XS}, {24, "I8", -1},  {25, "I16", -1},
    {26, "I32", -1},      {27, "I64", -1},      {28, "F64", -1},      {29, "IQ1_M", -1},
    {30, "BF16", DB_BF16}, {34, "TQ1_0", -1},   {35, "TQ2_0", -1},    {39, "MXFP4", -1},
};

static const char *vtype_names[] = {"u8",  "i8",  "u16",    "i16",   "u32", "i32", "f32",
                                    "bool", "string", "array", "u64", "i64", "f64"};
static const size_t vtype_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static const char *db_gguf_type_name(uint32_t t) { return t < 13 ? vtype_names[t] : "unknown"; }

typedef struct {
    const unsigned char *p, *end;
    const char *path;
    char *err;
    size_t errlen;
} cursor;

static int need(cursor *c, uint64_t n, const char *what)
{
    if ((uint64_t)(c->end - c->p) < n)
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: truncated: %s runs past the end of the file",
                       c->path, what);
    return DB_OK;
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int rd_u32(cursor *c, uint32_t *v, const char *what)
{
    if (need(c, 4, what)) return DB_EINPUT;
    *v = (uint32_t)le(c->p, 4);
    c->p += 4;
    return DB_OK;
}

static int rd_u64(cursor *c, uint64_t *v, const char *what)
{
    if (need(c, 8, what)) return DB_EINPUT;
    *v = le(c->p, 8);
    c->p += 8;
    return DB_OK;
}

/* a string: u64 length + bytes; out a NUL-terminated copy when wanted */
static int rd_str(cursor *c, const char *what, size_t maxlen, char **out)
{
    uint64_t n;
    if (rd_u64(c, &n, what) || need(c, n, what)) return DB_EINPUT;
    if (out) {
        if (n == 0 || n > maxlen || memchr(c->p, 0, (size_t)n))
            return db_fail(c->err, c->errlen, DB_EINPUT, "%s: %s of %llu bytes (1..%zu, no NUL)",
                           c->path, what, (unsigned long long)n, maxlen);
        *out = db_malloc((size_t)n + 1);
        if (!*out) return db_fail(c->err, c->errlen, DB_ERUNTIME, "%s: out of memory reading its %s", c->path, what);
        memcpy(*out, c->p, (size_t)n);
        (*out)[n] = 0;
    }
    c->p += n;
    return DB_OK;
}

/* skip over one value of type t (elements of an array included), checking every length */
static int skip_value(cursor *c, const db_gguf_kv *kv, uint32_t t, uint64_t count)
{
    char what[MAX_NAME + 32];
    snprintf(what, sizeof what, "value of key '%s'", kv->key);
    if (t == DB_GGUF_STRING) {
        for (uint64_t i = 0; i < count; i++)
            if (rd_str(c, what, 0, NULL)) return DB_EINPUT;
        return DB_OK;
    }
    if (t >= 13 || t == DB_GGUF_ARRAY)
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: key '%s': %s value type %u", c->path,
                       kv->key, t == DB_GGUF_ARRAY ? "nested array, unsupported" : "unknown", t);
    if (count > UINT64_MAX / vtype_size[t] || need(c, count * vtype_size[t], what)) return DB_EINPUT;
    c->p += count * vtype_size[t];
    return DB_OK;
}

static int parse_kv(cursor *c, db_gguf *g)
{
    for (int i = 0; i < g->nkv; i++) {
        db_gguf_kv *kv = &g->kv[i];
        char what[48];
        snprintf(what, sizeof what, "metadata key %d", i);
        if (rd_str(c, what, MAX_NAME, &kv->key)) return DB_EINPUT;
        for (int j = 0; j < i; j++)
            if (strcmp(g->kv[j].key, kv->key) == 0)
                return db_fail(c->err, c->errlen, DB_EINPUT, "%s: metadata key '%s' appears twice",
                               c->path, kv->key);
        if (rd_u32(c, &kv->type, "a metadata value type")) return DB_EINPUT;
        kv->n = 1;
        if (kv->type == DB_GGUF_ARRAY) {
            if (rd_u32(c, &kv->arr_type, "an array type") || rd_u64(c, &kv->n, "an array length"))
                return DB_EINPUT;
            kv->val = c->p;
            if (skip_value(c, kv, kv->arr_type, kv->n)) return DB_EINPUT;
        } else {
            kv->val = c->p;
            if (skip_value(c, kv, kv->type, 1)) return DB_EINPUT;
        }
    }
    return DB_OK;
}

static int parse_tensor_info(cursor *c, db_gguf *g, db_gguf_tensor *t, int i)
{
    char what[48];
    snprintf(what, sizeof what, "tensor info %d", i);
    if (rd_str(c, what, MAX_NAME, &t->name)) return DB_EINPUT;
    uint32_t nd, type;
    if (rd_u32(c, &nd, what)) return DB_EINPUT;
    if (nd < 1 || nd > DB_GGUF_MAX_DIMS)
        return db_fail(c->err, c->errlen, DB_EINPUT, "%s: tensor '%s': %u dimensions (1..%d)",
                       g->path, t->name, nd, DB_GGUF_MAX_DIMS);
    t->ndim = (int)nd;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t v;
        if (rd_u64(c, &v, what)) return DB_EINPUT;
        if (v < 1 || v > (1ull << 40))
            return db_fail(c->err, c->errlen, DB_EINPUT, "%s: tensor '%s': dimension %d is %llu",
                           g->path, t->name, d, (unsigned long long)v);
        t->ne[d] = (int64_t)v;
    }
    for (int d = t->ndim; d < DB_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    uint64_t off;
    if (rd_u32(c, &type, what) || rd_u64(c, &off, what)) return DB_EINPUT;
    t->ggml_type = type;
    int dt = -2;
    const char *tn = "unknown";
    for (size_t k = 0; k < sizeof ggml_types / sizeof *ggml_types; k++)
        if (ggml_types[k].id == type) dt = ggml_types[k].dtype, tn = ggml_types[k].name;
    if (dt < 0)
        return db_fail(c->err, c->errlen, DB_EINPUT,
                       "%s: tensor '%s': %s type %s (%u)%s (supported: F32, F16, BF16, Q8_0, Q4_0, "
                       "Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)", g->path, t->name,
                       dt == -1 ? "unsupported" : "unknown", tn, type,
                       tn[0] == 'I' && tn[1] == 'Q' ? ", an importance-matrix type not implemented" : "");
    t->dtype = (db_dtype)dt;
    uint64_t bs = (uint64_t)db_dtype_block(t->dtype), n = (uint64_t)t->ne[0] / bs * db_dtype_size(t->dtype);
    if ((uint64_t)t->ne[0] % bs)
        return db_fail(c->err, c->errlen, DB_EINPUT,
                       "%s: tensor '%s': row of %lld values is not a multiple of the %s block (%llu)",
                       g->path, t->name, (long long)t->ne[0], tn, (unsigned long long)bs);
    for (int d = 1; d < DB_GGUF_MAX_DIMS; d++)
        if (__builtin_mul_overflow(n, (uint64_t)t->ne[d], &n))
            return db_fail(c->err, c->errlen, DB_EINPUT, "%s: tensor '%s': size overflows", g->path, t->name);
    t->nbytes = (size_t)n;
    /* offset kept in data for now; resolved against the data section in db_gguf_open */
    t->data = (unsigned char *)(uintptr_t)off;
    return DB_OK;
}

typedef struct {
    uint64_t begin, end;
    const char *name;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* offsets: aligned, inside the data section, no two tensors overlapping, names unique */
static int place_tensors(db_gguf *g, size_t data_off, char *err, size_t errlen)
{
    uint64_t data_size = g->size - data_off;
    span *sp = db_malloc(sizeof *sp * (size_t)(g->ntensors ? g->ntensors : 1));
    if (!sp) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory checking the offsets of %d tensors", g->path, g->ntensors);
    int rc = DB_OK;
    for (int i = 0; i < g->ntensors && !rc; i++) {
        db_gguf_tensor *t = &g->tensors[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (off % g->alignment)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s': offset %llu not a multiple of the alignment %llu",
                         g->path, t->name, (unsigned long long)off, (unsigned long long)g->alignment);
        else if (off > data_size || t->nbytes > data_size - off)
            rc = db_fail(err, errlen, DB_EINPUT,
                         "%s: tensor '%s': data [%llu, +%zu) outside the data section (%llu bytes; file truncated?)",
                         g->path, t->name, (unsigned long long)off, t->nbytes, (unsigned long long)data_size);
        if (rc) break; /* never form a pointer from an offset that failed the checks */
        t->data = g->map + data_off + off;
        sp[i] = (span){off, off + t->nbytes, t->name};
    }
    if (!rc) qsort(sp, (size_t)g->ntensors, sizeof *sp, span_cmp);
    for (int i = 1; i < g->ntensors && !rc; i++)
        if (sp[i].begin < sp[i - 1].end)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: tensors '%s' and '%s' overlap", g->path,
                         sp[i - 1].name, sp[i].name);
    for (int i = 0; i < g->ntensors && !rc; i++)
        for (int j = i + 1; j < g->ntensors && !rc; j++)
            if (strcmp(g->tensors[i].name, g->tensors[j].name) == 0)
                rc = db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' appears twice", g->path,
                             g->tensors[i].name);
    free(sp);
    return rc;
}

/* g holds the caller's buf (db_gguf_open_mem) or, with buf NULL, the file `path` mapped
 * (private and writable: copy on write, the file never changes) */
static int map_file(db_gguf *g, const char *path, unsigned char *buf, size_t size, char *err,
                    size_t errlen)
{
    static const char *short_what = "no GGUF header";
    if (!buf) {
        void *m = NULL;
        int rc = db_map_file(path, 24, short_what, 1, &m, &g->size, err, errlen);
        g->map = m;
        return rc;
    }
    g->map = buf;
    g->size = size;
    g->borrowed = 1;
    return db_check_min_size(path, size, 24, short_what, err, errlen);
}

static int open_gguf(db_gguf *g, const char *path, unsigned char *buf, size_t size, char *err,
                     size_t errlen)
{
    memset(g, 0, sizeof *g);
    snprintf(g->path, sizeof g->path, "%s", path);
    int rc = map_file(g, path, buf, size, err, errlen);
    if (rc) return rc;
    cursor c = {g->map, g->map + g->size, g->path, err, errlen};
    uint64_t nt = 0, nkv = 0;
    if (memcmp(g->map, "GGUF", 4) != 0) {
        rc = db_fail(err, errlen, DB_EINPUT, "%s: not a GGUF file (no GGUF magic)", path);
        goto fail;
    }
    c.p += 4;
    rd_u32(&c, &g->version, "version");
    if (g->version != 2 && g->version != 3) {
        rc = db_fail(err, errlen, DB_EINPUT, "%s: GGUF version %u (2 and 3 are read)", path, g->version);
        goto fail;
    }
    rd_u64(&c, &nt, "tensor count");
    rd_u64(&c, &nkv, "metadata count");
    /* every entry takes at least 13 (metadata) or 29 (tensor info) bytes: bounds the counts
     * before anything is allocated from them */
    if (nkv > g->size / 13 || nt > g->size / 29) {
        rc = db_fail(err, errlen, DB_EINPUT, "%s: %llu tensors / %llu metadata entries cannot fit in %zu bytes",
                     path, (unsigned long long)nt, (unsigned long long)nkv, g->size);
        goto fail;
    }
    g->nkv = (int)nkv;
    g->ntensors = (int)nt;
    g->kv = db_calloc(nkv ? nkv : 1, sizeof *g->kv);
    g->tensors = db_calloc(nt ? nt : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) {
        rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing its metadata and tensors", g->path);
        goto fail;
    }
    if ((rc = parse_kv(&c, g))) goto fail;
    int64_t align;
    if ((rc = db_gguf_int(g, "general.alignment", 0, 32, 1, 1 << 24, &align, err, errlen))) goto fail;
    if (align & (align - 1)) {
        rc = db_fail(err, errlen, DB_EINPUT, "%s: general.alignment %lld is not a power of two", path, (long long)align);
        goto fail;
    }
    g->alignment = (uint64_t)align;
    for (int i = 0; i < g->ntensors; i++)
        if ((rc = parse_tensor_info(&c, g, &g->tensors[i], i))) goto fail;
    size_t hdr = (size_t)(c.p - g->map), data_off = (hdr + (size_t)align - 1) / (size_t)align * (size_t)align;
    if (data_off > g->size) {
        if (g->ntensors) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: truncated: data section starts past the end of the file", path);
            goto fail;
        }
        data_off = g->size;
    }
    if ((rc = place_tensors(g, data_off, err, errlen))) goto fail;
    return DB_OK;
fail:
    db_gguf_close(g);
    return rc;
}

int db_gguf_open(db_gguf *g, const char *path, char *err, size_t errlen)
{
    return open_gguf(g, path, NULL, 0, err, errlen);
}

int db_gguf_open_mem(db_gguf *g, const char *name, unsigned char *buf, size_t size, char *err,
                     size_t errlen)
{
    static unsigned char none; /* an empty input: a buffer all the same */
    return open_gguf(g, name, buf ? buf : &none, size, err, errlen);
}

void db_gguf_close(db_gguf *g)
{
    for (int i = 0; g->kv && i < g->nkv; i++) free(g->kv[i].key);
    for (int i = 0; g->tensors && i < g->ntensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    if (g->map && !g->borrowed) munmap(g->map, g->size);
    char keep[sizeof g->path];
    memcpy(keep, g->path, sizeof keep);
    memset(g, 0, sizeof *g);
    memcpy(g->path, keep, sizeof keep);
}

const db_gguf_kv *db_gguf_find(const db_gguf *g, const char *key)
{
    for (int i = 0; i < g->nkv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

const db_gguf_tensor *db_gguf_tensor_find(const db_gguf *g, const char *name)
{
    for (int i = 0; i < g->ntensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

static int is_int_type(uint32_t t)
{
    return t <= DB_GGUF_I32 || t == DB_GGUF_U64 || t == DB_GGUF_I64;
}

/* an integer value of type t at p (is_int_type(t) or bool) */
static int64_t int_at(const unsigned char *p, uint32_t t)
{
    switch (t) {
    case DB_GGUF_U8: case DB_GGUF_BOOL: return p[0];
    case DB_GGUF_I8: return (int8_t)p[0];
    case DB_GGUF_U16: return (int64_t)le(p, 2);
    case DB_GGUF_I16: return (int16_t)le(p, 2);
    case DB_GGUF_U32: return (int64_t)le(p, 4);
    case DB_GGUF_I32: return (int32_t)le(p, 4);
    case DB_GGUF_U64: { uint64_t v = le(p, 8); return v > INT64_MAX ? INT64_MAX : (int64_t)v; }
    default: return (int64_t)le(p, 8);
    }
}

static int lookup(const db_gguf *g, const char *key, int required, const db_gguf_kv **kv,
                  char *err, size_t errlen)
{
    *kv = db_gguf_find(g, key);
    if (!*kv && required) return db_fail(err, errlen, DB_EINPUT, "%s: missing metadata key '%s'", g->path, key);
    return DB_OK;
}

static int wrong_type(const db_gguf *g, const db_gguf_kv *kv, const char *want, char *err, size_t errlen)
{
    return db_fail(err, errlen, DB_EINPUT, "%s: metadata key '%s' is %s%s%s, expected %s", g->path,
                   kv->key, kv->type == DB_GGUF_ARRAY ? "an array of " : "",
                   db_gguf_type_name(kv->type == DB_GGUF_ARRAY ? kv->arr_type : kv->type),
                   kv->type == DB_GGUF_ARRAY ? "" : "", want);
}

int db_gguf_int(const db_gguf *g, const char *key, int required, int64_t dflt, int64_t lo,
                int64_t hi, int64_t *out, char *err, size_t errlen)
{
    const db_gguf_kv *kv;
    int rc = lookup(g, key, required, &kv, err, errlen);
    if (rc || !kv) return *out = dflt, rc;
    if (!is_int_type(kv->type)) return wrong_type(g, kv, "an integer", err, errlen);
    int64_t v = int_at(kv->val, kv->type);
    if (v < lo || v > hi)
        return db_fail(err, errlen, DB_EINPUT, "%s: metadata key '%s' is %lld, outside [%lld, %lld]",
                       g->path, key, (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return DB_OK;
}

int db_gguf_float(const db_gguf *g, const char *key, int required, double dflt, double *out,
                  char *err, size_t errlen)
{
    const db_gguf_kv *kv;
    int rc = lookup(g, key, required, &kv, err, errlen);
    if (rc || !kv) return *out = dflt, rc;
    if (kv->type == DB_GGUF_F32) {
        uint32_t u = (uint32_t)le(kv->val, 4);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
    } else if (kv->type == DB_GGUF_F64) {
        uint64_t u = le(kv->val, 8);
        memcpy(out, &u, 8);
    } else {
        return wrong_type(g, kv, "a float", err, errlen);
    }
    if (!(*out == *out) || *out > 1e300 || *out < -1e300)
        return db_fail(err, errlen, DB_EINPUT, "%s: metadata key '%s' is not a finite number", g->path, key);
    return DB_OK;
}

int db_gguf_bool(const db_gguf *g, const char *key, int required, int dflt, int *out, char *err,
                 size_t errlen)
{
    const db_gguf_kv *kv;
    int rc = lookup(g, key, required, &kv, err, errlen);
    if (rc || !kv) return *out = dflt, rc;
    if (kv->type != DB_GGUF_BOOL) return wrong_type(g, kv, "a bool", err, errlen);
    if (kv->val[0] > 1)
        return db_fail(err, errlen, DB_EINPUT, "%s: metadata key '%s': bool byte %u", g->path, key, kv->val[0]);
    *out = kv->val[0];
    return DB_OK;
}

int db_gguf_str(const db_gguf *g, const char *key, int required, const char **s, size_t *len,
                char *err, size_t errlen)
{
    const db_gguf_kv *kv;
    int rc = lookup(g, key, required, &kv, err, errlen);
    *s = NULL;
    *len = 0;
    if (rc || !kv) return rc;
    if (kv->type != DB_GGUF_STRING) return wrong_type(g, kv, "a string", err, errlen);
    *len = (size_t)le(kv->val, 8);
    *s = (const char *)kv->val + 8;
    return DB_OK;
}

int db_gguf_array(const db_gguf *g, const char *key, int required, int elem,
                  const db_gguf_kv **out, char *err, size_t errlen)
{
    const db_gguf_kv *kv;
    int rc = lookup(g, key, required, &kv, err, errlen);
    *out = NULL;
    if (rc || !kv) return rc;
    const char *want = elem == DB_GGUF_STRING ? "an array of strings"
                       : elem == DB_GGUF_BOOL ? "an array of bools" : "an array of integers";
    if (kv->type != DB_GGUF_ARRAY) return wrong_type(g, kv, want, err, errlen);
    int ok = elem < 0 ? is_int_type(kv->arr_type) : kv->arr_type == (uint32_t)elem;
    if (!ok) return wrong_type(g, kv, want, err, errlen);
    *out = kv;
    return DB_OK;
}

int64_t db_gguf_arr_int(const db_gguf_kv *kv, uint64_t i)
{
    return int_at(kv->val + i * vtype_size[kv->arr_type], kv->arr_type);
}

void db_gguf_next_str(const unsigned char **p, const char **s, size_t *len)
{
    *len = (size_t)le(*p, 8);
    *s = (const char *)*p + 8;
    *p += 8 + *len;
}

static int has_magic(const char *path)
{
    char m[4];
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO put there since the stat: no wait */
    if (fd < 0) return 0;
    ssize_t n = read(fd, m, 4);
    close(fd);
    return n == 4 && memcmp(m, "GGUF", 4) == 0;
}

int db_gguf_resolve(const char *dir, char *out, size_t outlen, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) return 0;
    if (S_ISREG(sb.st_mode)) {
        size_t n = strlen(dir);
        int named = n > 5 && strcmp(dir + n - 5, ".gguf") == 0;
        if (!named && !has_magic(dir)) return 0;
        if (n >= outlen) return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
        memcpy(out, dir, n + 1);
        return 1;
    }
    if (!S_ISDIR(sb.st_mode)) return 0;
    char p[2048];
    if (db_path_join(p, sizeof p, dir, "config.json") == 0 && access(p, F_OK) == 0) return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n <= 5 || strcmp(e->d_name + n - 5, ".gguf") != 0) continue;
        if (found++) {
            closedir(d);
            return db_fail(err, errlen, DB_EINPUT, "%s: several .gguf files and no config.json: name the file", dir);
        }
        if (db_path_join(out, outlen, dir, e->d_name) != 0) {
            closedir(d);
            return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
        }
    }
    closedir(d);
    return found;
}
