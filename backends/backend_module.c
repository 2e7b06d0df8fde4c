/* backend_module.c — the backend registry: the CPU backend linked into the binary, each GPU
 * backend a shared module (dflash-bench-cuda.so, dflash-bench-hip.so) opened with dlopen() the
 * first time a command asks for it (ggml-style). A CPU run, --version and --help never load
 * libcudart / libcublas (hundreds of MB mapped and relocated at every start when they were
 * linked in), nor libamdhip64.
 *
 * A module holds its backend's object alone; the few helpers it calls (the allocation wrappers
 * with their one fault-injection counter, the dtype table) resolve to the executable's own,
 * which exports its db_* symbols for that (backends/module-host.dynlist). Where a module is
 * looked for, in order (the first folder holding the file is the one used):
 *   $DB_BACKEND_DIR                      (set: tests, or a module kept elsewhere)
 *   the executable's folder               (the build tree: build/dflash-bench beside the modules)
 *   <executable's folder>/DB_MODULEDIR_REL (installed: bin/../lib/<arch>/dflash-bench)
 * No absolute path is compiled in, so an installed tree works wherever it is moved to. */
#include "config.h"
#include "backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const db_backend_ops db_cpu_backend_ops;

const char *const db_backend_names[] = {
    "cpu",
#if HAVE_CUDA
    "cuda",
#endif
#if HAVE_HIP
    "hip",
#endif
    NULL,
};

typedef struct {
    const char *name;          /* the backend's name (-b NAME) */
    const char *file;          /* the module's file name */
    const char *symbol;        /* its db_backend_ops table */
    int tried;                 /* loaded, or failed to: either way not tried again */
    const db_backend_ops *ops; /* the table, NULL when the load failed (err says why) */
    char err[512];
} gpu_module;

static gpu_module modules[] = {
#if HAVE_CUDA
    {.name = "cuda", .file = "dflash-bench-cuda.so", .symbol = "db_cuda_backend_ops"},
#endif
#if HAVE_HIP
    {.name = "hip", .file = "dflash-bench-hip.so", .symbol = "db_hip_backend_ops"},
#endif
    {.name = NULL}, /* (a sentinel: a build without GPU backends has no other entry) */
};
static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;

/* snprintf for paths and messages, which may be cut short (a message longer than its buffer is
 * still one line; a path cut short is never opened: see find_module) */
__attribute__((format(printf, 3, 4))) static int fmt(char *dst, size_t n, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int k = vsnprintf(dst, n, f, ap);
    va_end(ap);
    return k;
}

/* the folder of the running executable into dir (no trailing '/'); 0, or -1 when unknown */
static int exe_folder(char *dir, size_t n)
{
    ssize_t k = readlink("/proc/self/exe", dir, n - 1);
    if (k <= 0 || (size_t)k >= n - 1) return -1;
    dir[k] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash) return -1;
    if (slash == dir)
        slash[1] = '\0'; /* the executable in / */
    else
        *slash = '\0';
    return 0;
}

/* m's path: the first folder of the search order holding m->file; 0, or -1 with m->err set */
static int find_module(gpu_module *m, char *path, size_t n)
{
    char dirs[3][PATH_MAX], exe[PATH_MAX];
    int nd = 0;
    const char *env = getenv("DB_BACKEND_DIR");
    if (env && env[0]) fmt(dirs[nd++], PATH_MAX, "%s", env);
    if (exe_folder(exe, sizeof exe) == 0) {
        fmt(dirs[nd++], PATH_MAX, "%s", exe);
        if (DB_MODULEDIR_REL[0] != '/') /* (absolute: a libdir or bindir given outside the prefix) */
            fmt(dirs[nd++], PATH_MAX, "%s/%s", strcmp(exe, "/") ? exe : "", DB_MODULEDIR_REL);
    }
    if (DB_MODULEDIR_REL[0] == '/') fmt(dirs[nd++], PATH_MAX, "%s", DB_MODULEDIR_REL);
    for (int i = 0; i < nd; i++) {
        if (fmt(path, n, "%s/%s", dirs[i], m->file) >= (int)n) continue;
        if (access(path, F_OK) == 0) return 0;
    }
    int len = fmt(m->err, sizeof m->err, "backend %s: its module %s is not in", m->name, m->file);
    for (int i = 0; i < nd && len > 0 && (size_t)len < sizeof m->err; i++)
        len += fmt(m->err + len, sizeof m->err - (size_t)len, "%s %s", i ? "," : "", dirs[i]);
    if (!nd) fmt(m->err, sizeof m->err, "backend %s: cannot find its module %s (no $DB_BACKEND_DIR, "
                      "and the executable's folder is unknown)", m->name, m->file);
    return -1;
}

/* dlopen m (RTLD_NOW: a library or host symbol missing fails here, not at the first call) */
static void load_module(gpu_module *m)
{
    char path[PATH_MAX];
    m->tried = 1;
    if (find_module(m, path, sizeof path) != 0) return;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        fmt(m->err, sizeof m->err, "backend %s: cannot load %s: %s", m->name, path,
                 e ? e : "dlopen failed");
        return;
    }
    const int *abi = dlsym(h, DB_BACKEND_ABI_SYMBOL);
    const db_backend_ops *ops = dlsym(h, m->symbol);
    if (!abi || *abi != DB_BACKEND_ABI || !ops) {
        fmt(m->err, sizeof m->err, "backend %s: %s is not a module of this build (%s)", m->name,
                 path, !abi || !ops ? "symbols missing" : "another backend.h: rebuild it");
        dlclose(h);
        return;
    }
    m->ops = ops; /* the handle stays open for the process: the ops live in it */
}

const db_backend_ops *db_backend_load(const char *name, char *err, size_t errlen)
{
    if (!name) name = "(none)";
    if (strcmp(name, db_cpu_backend_ops.name) == 0) return &db_cpu_backend_ops;
    for (gpu_module *m = modules; m->name; m++) {
        if (strcmp(m->name, name) != 0) continue;
        pthread_mutex_lock(&modules_lock);
        if (!m->tried) load_module(m);
        pthread_mutex_unlock(&modules_lock);
        if (!m->ops && err && errlen) fmt(err, errlen, "%s", m->err);
        return m->ops;
    }
    if (err && errlen)
        fmt(err, errlen, "backend '%s' is not compiled into this binary (see --version)", name);
    return NULL;
}

const db_backend_ops *db_backend_find(const char *name) { return db_backend_load(name, NULL, 0); }
