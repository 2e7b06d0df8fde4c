/* run_meta.c — build, machine, model and time facts of one invocation (see run_meta.h). */
#include "config.h"
#include "base/json_build.h"
#include "result/run_meta.h"
#include "base/sha256.h"
#include "base/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

void db_rfc3339_utc(time_t t, char *buf, size_t n)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* argv as one line a shell would split back into the same words */
char *db_shell_join(int argc, char *const *argv)
{
    size_t cap = 1;
    for (int i = 0; i < argc; i++) cap += 4 * strlen(argv[i]) + 3;
    char *s = db_malloc(cap), *p = s;
    if (!s) return NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int plain = a[0] != 0;
        for (const char *c = a; *c; c++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-@%",
                        *c))
                plain = 0;
        if (i) *p++ = ' ';
        if (plain) {
            p += sprintf(p, "%s", a);
            continue;
        }
        *p++ = '\'';
        for (const char *c = a; *c; c++) {
            if (*c == '\'') p += sprintf(p, "'\\''");
            else *p++ = *c;
        }
        *p++ = '\'';
    }
    *p = 0;
    return s;
}

void db_run_meta_init(db_run_meta *m, int argc, char **argv, uint64_t seed, const char *label,
                      time_t now)
{
    memset(m, 0, sizeof *m);
    m->schema_version = DB_SCHEMA_VERSION;
    snprintf(m->tool_version, sizeof m->tool_version, "%s", DB_VERSION);
    snprintf(m->git_commit, sizeof m->git_commit, "%s", DB_GIT_COMMIT);
    snprintf(m->compiler, sizeof m->compiler, "%s", DB_COMPILER);
    snprintf(m->build_type, sizeof m->build_type, "%s", DB_BUILDTYPE);
    snprintf(m->label, sizeof m->label, "%s", label ? label : "");
    snprintf(m->kv_dtype, sizeof m->kv_dtype, "f32");
    db_rfc3339_utc(now, m->test_time, sizeof m->test_time);
    m->cpu = *db_host_cpu();
    m->seed = seed;
    m->command_line = argv ? db_shell_join(argc, argv) : NULL;
    m->out_of_memory = argv && !m->command_line;
}

void db_run_meta_set_backend(db_run_meta *m, const char *backend, const char *device,
                             const char *simd, int threads)
{
    int i = 0;
    while (i < m->n_backends && strcmp(m->backends[i].name, backend) != 0) i++;
    if (i == m->n_backends) {
        if (m->n_backends == DB_META_MAX_BACKENDS) i = DB_META_MAX_BACKENDS - 1; /* reuse last */
        else m->n_backends++;
    }
    db_backend_meta *b = &m->backends[i];
    snprintf(b->name, sizeof b->name, "%s", backend ? backend : "");
    snprintf(b->device, sizeof b->device, "%s", device ? device : "");
    snprintf(b->simd, sizeof b->simd, "%s", simd ? simd : "");
    b->threads = threads;
    m->cur = i;
}

const db_backend_meta *db_run_meta_backend(const db_run_meta *m)
{
    static const db_backend_meta none = {"", "", "", 0};
    return m->n_backends ? &m->backends[m->cur] : &none;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(((const db_weight_file *)a)->name, ((const db_weight_file *)b)->name);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int db_model_meta_hash(db_model_meta *mm, const char *path, char *err, size_t errlen)
{
    free(mm->files);
    memset(mm, 0, sizeof *mm);
    snprintf(mm->path, sizeof mm->path, "%s", path);
    /* name: last non-empty component */
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
    const char *base = strrchr(tmp, '/');
    snprintf(mm->name, sizeof mm->name, "%s", base ? base + 1 : tmp);

    struct stat st;
    if (stat(path, &st) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: %s", path, strerror(errno));
    char dir[1024];
    int cap = 0;
    if (S_ISREG(st.st_mode)) {
        const char *slash = strrchr(path, '/');
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == path) snprintf(dir, sizeof dir, "/");
        else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        mm->files = db_calloc(1, sizeof *mm->files);
        if (!mm->files) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing its weight file", path);
        snprintf(mm->files[0].name, sizeof mm->files[0].name, "%s", slash ? slash + 1 : path);
        mm->n_files = 1;
    } else {
        snprintf(dir, sizeof dir, "%s", path);
        DIR *d = opendir(path);
        if (!d) return db_fail(err, errlen, DB_EINPUT, "%s: %s", path, strerror(errno));
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!(ends_with(e->d_name, ".safetensors") || ends_with(e->d_name, ".gguf")) || e->d_name[0] == '.') continue;
            if (mm->n_files == cap) {
                cap = cap ? 2 * cap : 8;
                db_weight_file *nf = db_realloc(mm->files, sizeof *nf * (size_t)cap);
                if (!nf) {
                    closedir(d);
                    return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing its weight files", path);
                }
                mm->files = nf;
            }
            db_weight_file *f = &mm->files[mm->n_files++];
            memset(f, 0, sizeof *f);
            snprintf(f->name, sizeof f->name, "%s", e->d_name);
        }
        closedir(d);
        if (!mm->n_files)
            return db_fail(err, errlen, DB_EINPUT, "%s: no *.safetensors or *.gguf weight file", path);
        qsort(mm->files, (size_t)mm->n_files, sizeof *mm->files, cmp_names);
    }
    db_sha256 all;
    db_sha256_init(&all);
    for (int i = 0; i < mm->n_files; i++) {
        db_weight_file *f = &mm->files[i];
        char p[1400];
        if (db_path_join(p, sizeof p, dir, f->name) != 0)
            return db_fail(err, errlen, DB_EINPUT, "%s/%s: path too long", dir, f->name);
        int rc = db_sha256_file(p, f->sha256, err, errlen);
        if (rc) return rc;
        f->bytes = stat(p, &st) == 0 ? (long long)st.st_size : -1;
        char line[400];
        int len = snprintf(line, sizeof line, "%s  %s\n", f->sha256, f->name);
        db_sha256_update(&all, line, (size_t)len);
    }
    if (mm->n_files == 1) {
        memcpy(mm->sha256, mm->files[0].sha256, sizeof mm->sha256);
    } else {
        unsigned char dg[32];
        db_sha256_final(&all, dg);
        db_sha256_hex(dg, mm->sha256);
    }
    return DB_OK;
}

int db_run_meta_add_model(db_run_meta *m, const char *path, const char *dtype, const char *mix, char *err,
                          size_t errlen)
{
    for (int i = 0; i < m->n_models; i++)
        if (!strcmp(m->models[i].path, path)) return DB_OK;
    if (m->n_models == DB_META_MAX_MODELS) return db_fail(err, errlen, DB_EINPUT, "more than %d checkpoints", DB_META_MAX_MODELS);
    db_model_meta *mm = &m->models[m->n_models];
    int rc = db_model_meta_hash(mm, path, err, errlen);
    if (rc) {
        free(mm->files);
        memset(mm, 0, sizeof *mm);
        return rc;
    }
    snprintf(mm->dtype, sizeof mm->dtype, "%s", dtype ? dtype : "");
    snprintf(mm->mix, sizeof mm->mix, "%s", mix ? mix : mm->dtype);
    m->n_models++;
    return DB_OK;
}

const db_model_meta *db_run_meta_model(const db_run_meta *m, const char *name)
{
    static const db_model_meta none;
    for (int i = 0; name && name[0] && i < m->n_models; i++)
        if (!strcmp(m->models[i].name, name)) return &m->models[i];
    return &none;
}

void db_run_meta_free(db_run_meta *m)
{
    for (int i = 0; i < m->n_models; i++) free(m->models[i].files);
    m->n_models = 0;
    free(m->command_line);
    cJSON_Delete(m->sweep);
    cJSON_Delete(m->points);
    cJSON_Delete(m->shard);
    cJSON_Delete(m->inputs);
    m->command_line = NULL;
    m->sweep = m->points = m->shard = m->inputs = NULL;
}

/* ---- meta.json ---- */

/* Every cJSON result of the builders below goes through J() or JADD() (util.h): the first NULL
 * (out of memory) sets *oom, and db_run_meta_json returns NULL at the end rather than a
 * meta.json without some of its fields. */

static cJSON *model_json(int *oom, const db_model_meta *mm)
{
    if (!mm->path[0]) return J(cJSON_CreateNull());
    cJSON *o = J(cJSON_CreateObject());
    J(cJSON_AddStringToObject(o, "name", mm->name));
    J(cJSON_AddStringToObject(o, "path", mm->path));
    J(cJSON_AddStringToObject(o, "sha256", mm->sha256));
    J(cJSON_AddStringToObject(o, "dtype", mm->dtype));
    J(cJSON_AddStringToObject(o, "mix", mm->mix));
    cJSON *fs = J(cJSON_AddArrayToObject(o, "files"));
    for (int i = 0; i < mm->n_files; i++) {
        cJSON *f = J(cJSON_CreateObject());
        J(cJSON_AddStringToObject(f, "name", mm->files[i].name));
        J(cJSON_AddStringToObject(f, "sha256", mm->files[i].sha256));
        J(cJSON_AddNumberToObject(f, "bytes", (double)mm->files[i].bytes));
        JADD(fs, NULL, f);
    }
    return o;
}

/* what the compiler was told, as far as its predefined macros show it (meson does not put the
 * command line into config.h) */
static cJSON *build_flags_json(int *oom)
{
    cJSON *o = J(cJSON_CreateObject());
#ifdef __OPTIMIZE__
    J(cJSON_AddBoolToObject(o, "optimize", 1));
#else
    J(cJSON_AddBoolToObject(o, "optimize", 0));
#endif
#ifdef NDEBUG
    J(cJSON_AddBoolToObject(o, "ndebug", 1));
#else
    J(cJSON_AddBoolToObject(o, "ndebug", 0));
#endif
#if defined(__SANITIZE_ADDRESS__)
    J(cJSON_AddBoolToObject(o, "address_sanitizer", 1));
#else
    J(cJSON_AddBoolToObject(o, "address_sanitizer", 0));
#endif
    cJSON *isa = J(cJSON_AddArrayToObject(o, "baseline_isa"));
    (void)isa; /* empty on a baseline x86-64 / generic build */
#ifdef __SSE4_2__
    JADD(isa, NULL, cJSON_CreateString("sse4.2"));
#endif
#ifdef __AVX2__
    JADD(isa, NULL, cJSON_CreateString("avx2"));
#endif
#ifdef __AVX512F__
    JADD(isa, NULL, cJSON_CreateString("avx512f"));
#endif
#ifdef __ARM_NEON
    JADD(isa, NULL, cJSON_CreateString("neon"));
#endif
    J(cJSON_AddStringToObject(o, "c_standard", __STDC_VERSION__ == 201112L ? "c11" : "other"));
    return o;
}

static cJSON *topology_json(int *oom, const db_cpu_info *ci)
{
    cJSON *o = J(cJSON_CreateObject());
    J(cJSON_AddStringToObject(o, "model", ci->model));
    J(cJSON_AddNumberToObject(o, "packages", ci->packages));
    J(cJSON_AddNumberToObject(o, "cores", ci->cores));
    J(cJSON_AddNumberToObject(o, "pus", ci->pus));
    J(cJSON_AddNumberToObject(o, "numa_nodes", ci->numa_nodes));
    J(cJSON_AddNumberToObject(o, "l1d_bytes", (double)ci->l1d));
    J(cJSON_AddNumberToObject(o, "l2_bytes", (double)ci->l2));
    J(cJSON_AddNumberToObject(o, "l3_bytes", (double)ci->l3));
    J(cJSON_AddStringToObject(o, "source", ci->source));
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) J(cJSON_AddNumberToObject(o, "memory_bytes", (double)pages * (double)psz));
    if (!strcmp(ci->source ? ci->source : "", "hwloc")) { /* the lists hwloc read */
        cJSON *numa = J(cJSON_AddArrayToObject(o, "numa"));
        for (int i = 0; i < ci->n_numa; i++) {
            const db_cpu_numa_node *n = &ci->numa[i];
            cJSON *e = J(cJSON_CreateObject());
            J(cJSON_AddNumberToObject(e, "os_index", n->os_index));
            J(cJSON_AddNumberToObject(e, "memory_bytes", (double)n->memory_bytes));
            J(cJSON_AddNumberToObject(e, "pus", n->pus));
            JADD(numa, NULL, e);
        }
        cJSON *cs = J(cJSON_AddArrayToObject(o, "caches"));
        for (int k = 0; k < ci->n_caches; k++) {
            const db_cpu_cache *c = &ci->caches[k];
            cJSON *e = J(cJSON_CreateObject());
            J(cJSON_AddStringToObject(e, "level", c->level));
            J(cJSON_AddNumberToObject(e, "count", c->count));
            J(cJSON_AddNumberToObject(e, "bytes_each", (double)c->bytes_each));
            J(cJSON_AddNumberToObject(e, "line_bytes", c->line_bytes));
            J(cJSON_AddNumberToObject(e, "associativity", c->associativity));
            JADD(cs, NULL, e);
        }
    }
    return o;
}

cJSON *db_run_meta_json(const db_run_meta *m)
{
    if (m->out_of_memory) return NULL;
    int oom_flag = 0, *oom = &oom_flag;
    cJSON *r = J(cJSON_CreateObject());
    J(cJSON_AddNumberToObject(r, "schema_version", m->schema_version));
    cJSON *tool = J(cJSON_AddObjectToObject(r, "tool"));
    J(cJSON_AddStringToObject(tool, "name", "dflash-bench"));
    J(cJSON_AddStringToObject(tool, "version", m->tool_version));
    J(cJSON_AddStringToObject(tool, "git_commit", m->git_commit));
    J(cJSON_AddStringToObject(r, "test_time", m->test_time));
    J(cJSON_AddStringToObject(r, "label", m->label));
    J(cJSON_AddStringToObject(r, "command_line", m->command_line ? m->command_line : ""));
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)m->seed);
    J(cJSON_AddStringToObject(r, "seed", seed)); /* a string: JSON numbers lose 64-bit precision */
    J(cJSON_AddStringToObject(r, "kv_dtype", m->kv_dtype));

    cJSON *bld = J(cJSON_AddObjectToObject(r, "build"));
    J(cJSON_AddStringToObject(bld, "compiler", m->compiler));
    J(cJSON_AddStringToObject(bld, "build_type", m->build_type));
    JADD(bld, "flags", build_flags_json(oom));
    cJSON *f = J(cJSON_AddObjectToObject(bld, "features"));
    J(cJSON_AddBoolToObject(f, "openmp", HAVE_OPENMP));
    J(cJSON_AddBoolToObject(f, "openblas", HAVE_OPENBLAS));
    J(cJSON_AddBoolToObject(f, "hwloc", HAVE_HWLOC));
    J(cJSON_AddBoolToObject(f, "cuda", HAVE_CUDA));
    J(cJSON_AddBoolToObject(f, "hip", HAVE_HIP));
    J(cJSON_AddBoolToObject(f, "x86_simd", HAVE_X86_SIMD));
    J(cJSON_AddBoolToObject(f, "neon", HAVE_NEON));

    cJSON *mach = J(cJSON_AddObjectToObject(r, "machine"));
    struct utsname u;
    if (uname(&u) == 0) {
        J(cJSON_AddStringToObject(mach, "hostname", u.nodename));
        J(cJSON_AddStringToObject(mach, "os", u.sysname));
        J(cJSON_AddStringToObject(mach, "kernel", u.release));
        J(cJSON_AddStringToObject(mach, "arch", u.machine));
    }
    JADD(mach, "cpu", topology_json(oom, &m->cpu));

    cJSON *bes = J(cJSON_AddArrayToObject(r, "backends"));
    for (int i = 0; i < m->n_backends; i++) {
        cJSON *e = J(cJSON_CreateObject());
        J(cJSON_AddStringToObject(e, "name", m->backends[i].name));
        J(cJSON_AddStringToObject(e, "device", m->backends[i].device));
        J(cJSON_AddStringToObject(e, "simd", m->backends[i].simd));
        J(cJSON_AddNumberToObject(e, "threads", m->backends[i].threads));
        JADD(bes, NULL, e);
    }
    cJSON *models = J(cJSON_AddArrayToObject(r, "models"));
    for (int i = 0; i < m->n_models; i++) JADD(models, NULL, model_json(oom, &m->models[i]));
    if (m->sweep) JADD(r, "sweep", cJSON_Duplicate(m->sweep, 1));
    if (m->points) JADD(r, "points", cJSON_Duplicate(m->points, 1));
    if (m->shard) JADD(r, "shard", cJSON_Duplicate(m->shard, 1));
    if (m->inputs) JADD(r, "inputs", cJSON_Duplicate(m->inputs, 1));
    if (oom_flag) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}
