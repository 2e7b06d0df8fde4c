/* synthetic.c — synthetic weights generated on the backend (see synthetic.h). */
#include "model/synthetic.h"
#include "base/util.h"

#include <math.h>
#include <string.h>

uint64_t db_synth_fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t db_synth_mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t db_synth_model_seed(uint64_t run_seed, const char *role)
{
    return db_synth_mix(run_seed + db_synth_fnv1a(role));
}

uint64_t db_synth_tensor_seed(uint64_t model_seed, const char *name)
{
    return db_synth_mix(model_seed ^ db_synth_fnv1a(name));
}

/* s, one of names[0..n), as the dtype backend.h names so */
static int dtype_named(const char *s, const char *const *names, int n, db_dtype *out)
{
    if (db_name_index(s, names, n) < 0) return -1;
    for (int t = 0; t < DB_NUM_DTYPES; t++)
        if (strcmp(s, db_dtype_name((db_dtype)t)) == 0) {
            *out = (db_dtype)t;
            return 0;
        }
    return -1;
}

int db_dtype_parse(const char *s, db_dtype *out)
{
    static const char *const names[] = DB_NAMES_ARRAY(DB_SYNTH_DTYPES);
    return dtype_named(s, names, (int)(sizeof names / sizeof *names), out);
}

int db_weight_dtype_parse(const char *s, db_dtype *out)
{
    static const char *const names[] = DB_NAMES_ARRAY(DB_WEIGHT_DTYPES);
    return dtype_named(s, names, (int)(sizeof names / sizeof *names), out);
}

/* uniform on [mean - scale, mean + scale): std = scale / sqrt(3) */
static float scale_for_std(double std) { return (float)(std * sqrt(3.0)); }

int db_synth_matrix(db_weight *w, db_backend *be, const db_tensor_set *st, const char *name, int rows,
                    int cols, char *err, size_t errlen)
{
    size_t n = (size_t)rows * (size_t)cols;
    double std = 1.0 / sqrt((double)cols);
    if (strstr(name, "codebook")) std = 0.02;
    else if (strstr(name, "kernel_projection")) std = 0.1 / sqrt((double)cols);
    w->dtype = st->dtype;
    w->rows = rows;
    w->cols = cols;
    /* a fault-injection site (util.h): a model that fails to load mid-way, after the backend
     * holds other buffers (plan's device probe) */
    w->data = db_fault_alloc_next(DB_SITE) ? NULL : be->ops->alloc(be, n * db_dtype_size(st->dtype));
    if (!w->data)
        return db_fail(err, errlen, DB_ERUNTIME, "cannot allocate synthetic tensor '%s' (%.1f MiB)",
                       name, (double)n * db_dtype_size(st->dtype) / 1048576.0);
    if (db_fill_random(be, w->data, n, st->dtype, db_synth_tensor_seed(st->seed, name), 0,
                       scale_for_std(std), 0.0f) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "synthetic tensor '%s': %s", name, be->err);
    return DB_OK;
}

int db_synth_vector(float **out, db_backend *be, const db_tensor_set *st, const char *name, int n,
                    char *err, size_t errlen)
{
    *out = be->ops->alloc(be, (size_t)n * sizeof(float));
    if (!*out) return db_fail(err, errlen, DB_ERUNTIME, "cannot allocate synthetic tensor '%s'", name);
    if (db_fill_random(be, *out, (size_t)n, DB_F32, db_synth_tensor_seed(st->seed, name), 0, 0.05f,
                       1.0f) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "synthetic tensor '%s': %s", name, be->err);
    return DB_OK;
}

int db_synth_conv_base(float **out, db_backend *be, const db_tensor_set *st, const char *name, int k,
                       int h, char *err, size_t errlen)
{
    size_t n = (size_t)2 * k * h;
    uint64_t seed = db_synth_tensor_seed(st->seed, name);
    float noise = scale_for_std(0.01);
    *out = be->ops->alloc(be, n * sizeof(float));
    if (!*out) return db_fail(err, errlen, DB_ERUNTIME, "cannot allocate synthetic tensor '%s'", name);
    /* [2][K][H]: noise everywhere, then tap 0 of both phases re-drawn around 1 (same stream) */
    int rc = db_fill_random(be, *out, n, DB_F32, seed, 0, noise, 0.0f);
    for (int p = 0; p < 2 && rc == 0; p++) {
        size_t off = (size_t)p * k * h;
        rc = db_fill_random(be, *out + off, (size_t)h, DB_F32, seed, off, noise, 1.0f);
    }
    if (rc) return db_fail(err, errlen, DB_ERUNTIME, "synthetic tensor '%s': %s", name, be->err);
    return DB_OK;
}
