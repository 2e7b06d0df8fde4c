/* safetensors.c — mmap + validated header parsing of safetensors files (see safetensors.h).
 *
 * Layout: u64 little-endian header length n, n bytes of JSON
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data
 * section; offsets are relative to the data section. */
#include "model/safetensors.h"
#include "model/gguf_model.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* a header larger than this is not a checkpoint we accept (real ones are < 10 MB) */
#define MAX_HEADER (256u << 20)

/* f holds the caller's buf (db_tensors_open_mem) or, with buf NULL, the file `path` mapped */
static int map_file(db_tensor_file *f, const char *path, const void *buf, size_t size, char *err,
                    size_t errlen)
{
    static const char *short_what = "no header length";
    memset(f, 0, sizeof *f);
    f->path = db_strdup(path);
    if (!f->path) return db_fail(err, errlen, DB_ERUNTIME, "out of memory copying the path %s", path);
    if (!buf) return db_map_file(path, 8, short_what, 0, &f->map, &f->size, err, errlen);
    f->map = (void *)buf; /* read only, like the mapping */
    f->size = size;
    f->borrowed = 1;
    return db_check_min_size(path, size, 8, short_what, err, errlen);
}

/* float dtypes; I32 / I64 (index tensors such as a DSpark d2t map) and BOOL / U8 (an EAGLE-3
 * t2d mask, never read) set int_bytes instead */
static int parse_dtype(const char *s, db_dtype *out, int *int_bytes)
{
    *int_bytes = 0;
    if (strcmp(s, "BOOL") == 0 || strcmp(s, "U8") == 0) {
        *out = DB_F32;
        *int_bytes = 1;
        return 0;
    }
    if (strcmp(s, "I32") == 0 || strcmp(s, "I64") == 0) {
        *out = DB_F32; /* unused: int_bytes marks the tensor as integer */
        *int_bytes = s[1] == '3' ? 4 : 8;
        return 0;
    }
    if (strcmp(s, "F32") == 0) *out = DB_F32;
    else if (strcmp(s, "BF16") == 0) *out = DB_BF16;
    else if (strcmp(s, "F16") == 0) *out = DB_F16;
    else return -1;
    return 0;
}

/* cJSON numbers are doubles: accept only exact non-negative integers below 2^53 */
static int json_uint(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (d < 0 || d > 9007199254740992.0 || d != (double)(uint64_t)d) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int add_tensor(db_tensor_set *s, int *cap, db_tensor t)
{
    if (s->ntensors == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        db_tensor *nt = db_realloc(s->tensors, sizeof *nt * (size_t)nc);
        if (!nt) return -1;
        s->tensors = nt;
        *cap = nc;
    }
    s->tensors[s->ntensors++] = t;
    return 0;
}

typedef struct {
    uint64_t begin, end;
    const char *name;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Parse and validate file `fi`'s header, appending its tensors. `only` (may be NULL) is the
 * sharded index's weight_map: a tensor listed there for another file is an error. */
/* one header entry: dtype, shape and offsets checked against the data section (data_size
 * bytes) and, with an index, against the file the index maps the tensor to */
static int parse_entry(const db_tensor_file *f, const cJSON *e, uint64_t data_size, const cJSON *only,
                       db_tensor *t, uint64_t *ob, char *err, size_t errlen)
{
    const char *nm = e->string;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) ||
        cJSON_GetArraySize(off) != 2)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: tensor '%s': header entry lacks dtype, shape or data_offsets", f->path, nm);
    if (parse_dtype(dt->valuestring, &t->dtype, &t->int_bytes) != 0)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: tensor '%s': unsupported dtype %s (accepted: F32, BF16, F16, I32, I64, BOOL, U8)", f->path, nm,
                       dt->valuestring);
    t->ndim = cJSON_GetArraySize(sh);
    if (t->ndim > DB_TENSOR_MAX_DIMS)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s': %d dimensions (max %d)", f->path, nm,
                       t->ndim, DB_TENSOR_MAX_DIMS);
    uint64_t count = 1;
    int bad = 0;
    for (int d = 0; d < t->ndim && !bad; d++) {
        uint64_t v;
        if (json_uint(cJSON_GetArrayItem(sh, d), &v) != 0 || v > (1ull << 40)) bad = 1;
        else {
            t->shape[d] = (int64_t)v;
            if (v && count > UINT64_MAX / v) bad = 1;
            count *= v;
        }
    }
    uint64_t oe;
    if (bad || json_uint(cJSON_GetArrayItem(off, 0), ob) != 0 || json_uint(cJSON_GetArrayItem(off, 1), &oe) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s': malformed shape or offsets", f->path, nm);
    if (*ob > oe || oe > data_size)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: tensor '%s': data_offsets [%llu, %llu] outside the data section "
                       "(%llu bytes; file truncated?)",
                       f->path, nm, (unsigned long long)*ob, (unsigned long long)oe,
                       (unsigned long long)data_size);
    uint64_t esz = t->int_bytes ? (uint64_t)t->int_bytes : db_dtype_size(t->dtype);
    if (count > UINT64_MAX / esz || oe - *ob != count * esz)
        return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s': %llu bytes of data but shape needs %llu",
                       f->path, nm, (unsigned long long)(oe - *ob), (unsigned long long)(count * esz));
    if (only) {
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(only, nm);
        const char *base = strrchr(f->path, '/');
        base = base ? base + 1 : f->path;
        if (!cJSON_IsString(want) || strcmp(want->valuestring, base) != 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' is not mapped to this file by the index",
                           f->path, nm);
    }
    t->nbytes = (size_t)(oe - *ob);
    return DB_OK;
}

/* overlapping tensors (first..ntensors) would alias each other: reject */
static int check_overlap(const db_tensor_set *s, const db_tensor_file *f, int first, const unsigned char *data,
                         char *err, size_t errlen)
{
    int n = s->ntensors - first, rc = DB_OK;
    if (n < 2) return DB_OK;
    span *sp = db_malloc(sizeof *sp * (size_t)n);
    if (!sp) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory checking %d tensors for overlaps", f->path, n);
    for (int i = 0; i < n; i++) {
        const db_tensor *t = &s->tensors[first + i];
        sp[i].begin = (uint64_t)((const unsigned char *)t->data - data);
        sp[i].end = sp[i].begin + t->nbytes;
        sp[i].name = t->name;
    }
    qsort(sp, (size_t)n, sizeof *sp, span_cmp);
    /* compare with the furthest-reaching earlier tensor, not just the previous one: a
     * zero-byte tensor between two overlapping ones must not hide the overlap */
    int far = 0;
    for (int i = 1; i < n; i++) {
        if (sp[i].end > sp[i].begin && sp[i].begin < sp[far].end) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: tensors '%s' and '%s' overlap", f->path, sp[far].name,
                         sp[i].name);
            break;
        }
        if (sp[i].end > sp[far].end) far = i;
    }
    free(sp);
    return rc;
}

static int parse_file(db_tensor_set *s, int fi, int *cap, const cJSON *only, char *err, size_t errlen)
{
    db_tensor_file *f = &s->files[fi];
    const unsigned char *b = f->map;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)b[i] << (8 * i);
    if (hlen > f->size - 8)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: header length %llu runs past the end of the file (%zu bytes)",
                       f->path, (unsigned long long)hlen, f->size);
    if (hlen > MAX_HEADER || hlen < 2)
        return db_fail(err, errlen, DB_EINPUT, "%s: implausible header length %llu", f->path,
                       (unsigned long long)hlen);
    int oom;
    cJSON *root = db_json_parse((const char *)b + 8, (size_t)hlen, &oom);
    if (oom) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory parsing the header", f->path);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return db_fail(err, errlen, DB_EINPUT, "%s: header is not a JSON object", f->path);
    }
    const unsigned char *data = b + 8 + hlen;
    uint64_t data_size = f->size - 8 - hlen;
    int first = s->ntensors, rc = DB_OK;
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        if (strcmp(e->string, "__metadata__") == 0) continue;
        db_tensor t = {0};
        uint64_t ob = 0;
        if ((rc = parse_entry(f, e, data_size, only, &t, &ob, err, errlen))) break;
        t.name = db_strdup(e->string);
        t.data = data + ob;
        t.file = fi;
        if (!t.name || add_tensor(s, cap, t) != 0) {
            free(t.name);
            rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing tensor '%s'", f->path, e->string);
            break;
        }
    }
    if (rc == DB_OK) rc = check_overlap(s, f, first, data, err, errlen);
    cJSON_Delete(root);
    return rc;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const db_tensor *)a)->name, ((const db_tensor *)b)->name);
}

static int finish(db_tensor_set *s, char *err, size_t errlen)
{
    if (s->ntensors > 1) /* a header of __metadata__ alone leaves tensors NULL: no qsort(NULL) */
        qsort(s->tensors, (size_t)s->ntensors, sizeof *s->tensors, name_cmp);
    for (int i = 1; i < s->ntensors; i++)
        if (strcmp(s->tensors[i].name, s->tensors[i - 1].name) == 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' appears twice", s->dir,
                           s->tensors[i].name);
    return DB_OK;
}

static int open_one(db_tensor_set *s, const char *path, const void *buf, size_t size, char *err,
                    size_t errlen)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", path);
    s->files = db_calloc(1, sizeof *s->files);
    if (!s->files) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory opening it", path);
    s->nfiles = 1;
    int cap = 0;
    int rc = map_file(&s->files[0], path, buf, size, err, errlen);
    if (rc == DB_OK) rc = parse_file(s, 0, &cap, NULL, err, errlen);
    if (rc == DB_OK) rc = finish(s, err, errlen);
    if (rc != DB_OK) db_tensors_close(s);
    return rc;
}

int db_tensors_open_file(db_tensor_set *s, const char *path, char *err, size_t errlen)
{
    return open_one(s, path, NULL, 0, err, errlen);
}

int db_tensors_open_mem(db_tensor_set *s, const char *name, const void *buf, size_t size, char *err,
                        size_t errlen)
{
    static const char none; /* an empty input: a buffer all the same */
    return open_one(s, name, buf ? buf : &none, size, err, errlen);
}

/* shard `name` (path p) among the caller's files: as db_map_file would find it on disk */
static int map_mem(db_tensor_file *f, const char *p, const char *name, const db_tensor_mem_file *mem, int nmem,
                   char *err, size_t errlen)
{
    static const char none; /* an empty file: a buffer all the same */
    for (int i = 0; i < nmem; i++)
        if (!strcmp(mem[i].name, name)) return map_file(f, p, mem[i].buf ? mem[i].buf : &none, mem[i].size, err, errlen);
    memset(f, 0, sizeof *f);
    f->path = db_strdup(p);
    return f->path ? db_fail(err, errlen, DB_EINPUT, "%s: cannot open: %s", p, strerror(ENOENT))
                   : db_fail(err, errlen, DB_ERUNTIME, "out of memory copying the path %s", p);
}

/* the index's text txt; its shards mapped from dir, or with mem the caller's files */
static int open_index(db_tensor_set *s, const char *dir, const char *index_path, const char *txt,
                      const db_tensor_mem_file *mem, int nmem, char *err, size_t errlen)
{
    int rc = DB_OK;
    int oom;
    cJSON *root = db_json_parse(txt, strlen(txt), &oom);
    if (oom) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory parsing it", index_path);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return db_fail(err, errlen, DB_EINPUT, "%s: not JSON or no \"weight_map\" object",
                       index_path);
    }
    /* distinct shard names, each a plain file name inside dir */
    int cap = 0, fcap = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, wm)
    {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || e->valuestring[0] == '.') {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' maps to a bad file name",
                         index_path, e->string);
            break;
        }
        int seen = 0;
        for (int i = 0; i < s->nfiles && !seen; i++) {
            const char *b = strrchr(s->files[i].path, '/');
            seen = strcmp(b ? b + 1 : s->files[i].path, e->valuestring) == 0;
        }
        if (seen) continue;
        if (s->nfiles == fcap) {
            fcap = fcap ? fcap * 2 : 8;
            db_tensor_file *nf = db_realloc(s->files, sizeof *nf * (size_t)fcap);
            if (!nf) {
                rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing its shards", index_path);
                break;
            }
            s->files = nf;
        }
        char p[2048];
        if (db_path_join(p, sizeof p, dir, e->valuestring) != 0) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: path too long", index_path);
            break;
        }
        s->nfiles++;
        rc = mem ? map_mem(&s->files[s->nfiles - 1], p, e->valuestring, mem, nmem, err, errlen)
                 : map_file(&s->files[s->nfiles - 1], p, NULL, 0, err, errlen);
        if (rc) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            rc = db_fail(err, errlen, rc, "%s (shard of tensor '%s' in %s)", why, e->string, index_path);
            break;
        }
        rc = parse_file(s, s->nfiles - 1, &cap, wm, err, errlen);
        if (rc) break;
    }
    if (rc == DB_OK) {
        /* sorted now (finish sorts them anyway): a lookup per entry, not a scan */
        if (s->ntensors > 1) qsort(s->tensors, (size_t)s->ntensors, sizeof *s->tensors, name_cmp);
        cJSON_ArrayForEach(e, wm)
        {
            if (!db_tensors_find(s, e->string)) {
                rc = db_fail(err, errlen, DB_EINPUT, "%s: tensor '%s' is missing from %s",
                             index_path, e->string, e->valuestring);
                break;
            }
        }
    }
    cJSON_Delete(root);
    return rc;
}

/* the end of db_tensors_open_dir: the names sorted and checked; on failure the set is closed, its
 * dir kept for messages */
static int opened(db_tensor_set *s, int rc, char *err, size_t errlen)
{
    if (rc == DB_OK) rc = finish(s, err, errlen);
    if (rc != DB_OK) {
        char keep[sizeof s->dir];
        memcpy(keep, s->dir, sizeof keep);
        db_tensors_close(s);
        memcpy(s->dir, keep, sizeof keep);
    }
    return rc;
}

/* a checkpoint directory's weights: the sharded index, else the single file */
#define ST_INDEX "model.safetensors.index.json"
#define ST_SINGLE "model.safetensors"

int db_tensors_open_dir(db_tensor_set *s, const char *dir, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    char gp[1024];
    int g = db_gguf_resolve(dir, gp, sizeof gp, err, errlen);
    if (g) return g < 0 ? g : db_gguf_open_tensors(s, gp, err, errlen);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    char p[2048];
    if (db_path_join(p, sizeof p, dir, ST_INDEX) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    int rc;
    if (access(p, F_OK) == 0) {
        char *txt;
        rc = db_read_file_max(p, DB_MAX_CONFIG_BYTES, &txt, NULL, err, errlen);
        if (rc == DB_OK) rc = open_index(s, dir, p, txt, NULL, 0, err, errlen);
        free(txt);
    } else {
        db_path_join(p, sizeof p, dir, ST_SINGLE);
        if (access(p, F_OK) != 0)
            return db_fail(err, errlen, DB_EINPUT,
                           "%s: no " ST_SINGLE " or " ST_INDEX, dir);
        s->files = db_calloc(1, sizeof *s->files);
        if (!s->files) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory opening it", dir);
        s->nfiles = 1;
        int cap = 0;
        rc = map_file(&s->files[0], p, NULL, 0, err, errlen);
        if (rc == DB_OK) rc = parse_file(s, 0, &cap, NULL, err, errlen);
    }
    return opened(s, rc, err, errlen);
}

int db_tensors_dir_has_weights(const char *dir)
{
    char p[2048], e[64];
    if (db_gguf_resolve(dir, p, sizeof p, e, sizeof e) != 0) return 1;
    static const char *const files[] = {ST_INDEX, ST_SINGLE};
    for (int i = 0; i < 2; i++)
        if (db_path_join(p, sizeof p, dir, files[i]) == 0 && access(p, F_OK) == 0) return 1;
    return 0;
}

int db_tensors_open_index_mem(db_tensor_set *s, const char *dir, const char *index_text, const db_tensor_mem_file *files,
                              int nfiles, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    char p[2048];
    if (db_path_join(p, sizeof p, dir, ST_INDEX) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    static const db_tensor_mem_file none = {"", NULL, 0}; /* no files: mem must not be NULL */
    return opened(s, open_index(s, dir, p, index_text, nfiles ? files : &none, nfiles ? nfiles : 1, err, errlen),
                  err, errlen);
}

void db_tensors_close(db_tensor_set *s)
{
    for (int i = 0; i < s->ntensors; i++) free(s->tensors[i].name);
    free(s->tensors);
    for (int i = 0; i < s->nfiles; i++) {
        if (s->files[i].map && !s->files[i].borrowed) munmap(s->files[i].map, s->files[i].size);
        free(s->files[i].path);
    }
    free(s->files);
    memset(s, 0, sizeof *s);
}

void db_tensors_open_synthetic(db_tensor_set *s, const char *label, uint64_t seed, db_dtype dtype)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", label);
    s->synthetic = 1;
    s->seed = seed;
    s->dtype = dtype;
    s->any.dtype = dtype;
    s->any.file = -1;
}

int db_tensors_check_layers(const db_tensor_set *s, const char *prefix, int n_layers, const char *cfg_path,
                            char *err, size_t errlen)
{
    size_t pl = strlen(prefix);
    for (int i = 0; i < s->ntensors; i++) {
        const char *n = s->tensors[i].name;
        char *end;
        if (strncmp(n, prefix, pl) != 0 || n[pl] < '0' || n[pl] > '9') continue;
        long layer = strtol(n + pl, &end, 10);
        if (*end == '.' && layer >= n_layers)
            return db_fail(err, errlen, DB_EINPUT, "%s: num_hidden_layers is %d, but %s holds layer %ld (%s): "
                           "the config of another model", cfg_path, n_layers, db_tensors_file_of(s, &s->tensors[i]),
                           layer, n);
    }
    return DB_OK;
}

const db_tensor *db_tensors_find(const db_tensor_set *s, const char *name)
{
    if (s->synthetic) return &s->any;
    int lo = 0, hi = s->ntensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(s->tensors[mid].name, name);
        if (c == 0) return &s->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const char *db_tensors_file_of(const db_tensor_set *s, const db_tensor *t)
{
    if (s->synthetic || t->file < 0) return "(synthetic weights)";
    return s->files[t->file].path;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *d)
{
    size_t w = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, "%s%lld", i ? "," : "", (long long)d[i]);
    if (w < n) snprintf(buf + w, n - w, "]");
}

int db_tensors_expect(const db_tensor_set *s, const char *name, int ndim, const int64_t *dims,
                      const db_tensor **out, char *err, size_t errlen)
{
    const db_tensor *t = db_tensors_find(s, name);
    *out = NULL;
    if (s->synthetic) { /* generated in the config's shape: nothing to check */
        *out = t;
        return DB_OK;
    }
    if (!t) return db_fail(err, errlen, DB_EINPUT, "%s: missing tensor '%s'", s->dir, name);
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == dims[i];
    if (!ok) {
        char want[96], got[96];
        shape_str(want, sizeof want, ndim, dims);
        shape_str(got, sizeof got, t->ndim, t->shape);
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: tensor '%s' has shape %s, config implies %s", db_tensors_file_of(s, t),
                       name, got, want);
    }
    *out = t;
    return DB_OK;
}

void db_tensors_mix(const db_tensor_set *s, char *out, size_t n)
{
    /* llama.cpp's file types 0..32 (llama.h llama_ftype); NULL: retired numbers */
    static const char *const ftype[] = {
        "f32",     "f16",     "q4_0",   "q4_1",   NULL,    NULL,    NULL,    "q8_0",  "q5_0",
        "q5_1",    "q2_k",    "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m",
        "q6_k",    "iq2_xxs", "iq2_xs", "q2_k_s", "iq3_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s",
        "iq3_m",   "iq2_s",   "iq2_m",  "iq4_xs", "iq1_m",  "bf16"};
    int ft = s->file_type - 1;
    if (!s->synthetic && ft >= 0 && ft < (int)(sizeof ftype / sizeof *ftype) && ftype[ft]) {
        snprintf(out, n, "%s", ftype[ft]);
        return;
    }
    db_dtype m = db_tensors_main_dtype(s);
    int has[DB_NUM_DTYPES] = {0};
    for (int i = 0; i < s->ntensors; i++)
        if (s->tensors[i].ndim >= 2 && (unsigned)s->tensors[i].dtype < DB_NUM_DTYPES) has[s->tensors[i].dtype] = 1;
    const char *sfx = "";
    if (!s->synthetic && (m == DB_Q4_K || m == DB_Q5_K)) sfx = has[DB_Q6_K] ? "_m" : "_s";
    if (!s->synthetic && m == DB_Q3_K) sfx = has[DB_Q5_K] ? "_l" : has[DB_Q4_K] ? "_m" : "_s";
    snprintf(out, n, "%s%s", db_dtype_name(m), sfx);
}

db_dtype db_tensors_main_dtype(const db_tensor_set *s)
{
    if (s->synthetic) return s->dtype;
    double n[DB_NUM_DTYPES] = {0};
    for (int i = 0; i < s->ntensors; i++) {
        const db_tensor *t = &s->tensors[i];
        double e = 1;
        for (int d = 0; d < t->ndim; d++) e *= (double)t->shape[d];
        if (t->ndim >= 2 && (unsigned)t->dtype < DB_NUM_DTYPES) n[t->dtype] += e;
    }
    int best = DB_F32;
    for (int d = 0; d < DB_NUM_DTYPES; d++)
        if (n[d] > n[best]) best = d;
    return (db_dtype)best;
}
