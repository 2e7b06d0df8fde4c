/* paths.c — data roots and the results base (the search order is in paths.h). */
#include "base/paths.h"
#include "base/util.h"
#include "config.h" /* DB_DATADIR_REL: the install's data directory relative to its bindir;
                     * DB_SOURCE_DIR, DB_BUILD_DIR: the source tree and build directory meson set up */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __APPLE__
#include <mach-o/dyld.h>
#endif

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* directory of the running executable, or "" when the platform cannot say */
static void exe_dir(char *buf, size_t n)
{
    buf[0] = 0;
#if defined(__linux__)
    ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    if (k <= 0) {
        buf[0] = 0;
        return;
    }
    buf[k] = 0;
#elif defined(__APPLE__)
    uint32_t sz = (uint32_t)n;
    char tmp[PATH_MAX];
    if (_NSGetExecutablePath(buf, &sz) != 0 || !realpath(buf, tmp) || snprintf(buf, n, "%s", tmp) >= (int)n) {
        buf[0] = 0;
        return;
    }
#else
    (void)n;
    return;
#endif
    char *slash = strrchr(buf, '/');
    if (slash) *slash = 0;
    else buf[0] = 0;
}

#define MAX_ROOTS 4

/* 1 when a and b name the same directory */
static int same_dir(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

/* 1 when directory dir is top or inside it */
static int within(const char *dir, const char *top)
{
    char rd[PATH_MAX], rt[PATH_MAX];
    if (!realpath(dir, rd) || !realpath(top, rt)) return 0;
    size_t n = strlen(rt);
    return strncmp(rd, rt, n) == 0 && (rd[n] == 0 || rd[n] == '/' || (n == 1 && rt[0] == '/'));
}

/* the data roots in search order; returns how many */
static int data_roots(char roots[MAX_ROOTS][PATH_MAX])
{
    int nr = 0;
    const char *env = getenv("DFLASH_BENCH_DATA");
    if (env && *env && snprintf(roots[nr], PATH_MAX, "%s", env) < PATH_MAX) nr++;
    char exe[PATH_MAX - 64], probe[PATH_MAX];
    exe_dir(exe, sizeof exe);
    int tree = 0; /* a source root above the executable was found */
    if (exe[0]) {
        const char *rel = DB_DATADIR_REL;
        if (rel[0] == '/') snprintf(roots[nr++], PATH_MAX, "%s", rel);
        else snprintf(roots[nr++], PATH_MAX, "%s/%s", exe, rel);
        /* a build tree: the nearest directory above the executable that is a source root */
        char up[PATH_MAX - 64];
        snprintf(up, sizeof up, "%s", exe);
        for (int depth = 0; depth < 4 && up[0]; depth++) {
            snprintf(probe, sizeof probe, "%s/configs/default.ini", up);
            if (exists(probe)) {
                snprintf(roots[nr++], PATH_MAX, "%s", up);
                tree = 1;
                break;
            }
            char *slash = strrchr(up, '/');
            if (!slash) break;
            *slash = 0;
        }
    }
    /* last, for an executable of the build directory (not one installed or copied elsewhere): the
     * source tree meson configured, when it is still there (and not the one found above) */
    snprintf(probe, sizeof probe, "%s/configs/default.ini", DB_SOURCE_DIR);
    if (exe[0] && within(exe, DB_BUILD_DIR) && exists(probe) &&
        !(tree && same_dir(roots[nr - 1], DB_SOURCE_DIR)))
        snprintf(roots[nr++], PATH_MAX, "%s", DB_SOURCE_DIR);
    return nr;
}

int db_data_path(const char *path, char *out, size_t n, char *err, size_t errlen)
{
    if (snprintf(out, n, "%s", path) >= (int)n) return db_fail(err, errlen, DB_EINPUT, "%s: path too long", path);
    if (exists(path)) return DB_OK;
    if (path[0] == '/') return db_fail(err, errlen, DB_EINPUT, "%s: no such file or directory", path);
    char roots[MAX_ROOTS][PATH_MAX], probe[PATH_MAX];
    int nr = data_roots(roots);
    char real[PATH_MAX];
    for (int i = 0; i < nr; i++) {
        if (db_path_join(probe, sizeof probe, roots[i], path) != 0 || !exists(probe)) continue;
        const char *p = realpath(probe, real) ? real : probe; /* bin/../share: say it plainly */
        return snprintf(out, n, "%s", p) < (int)n ? DB_OK : db_fail(err, errlen, DB_EINPUT, "%s: path too long", p);
    }
    char where[MAX_ROOTS * PATH_MAX + 64] = "";
    size_t w = 0;
    for (int i = 0; i < nr && w < sizeof where; i++)
        w += (size_t)snprintf(where + w, sizeof where - w, ", %s", roots[i]);
    return db_fail(err, errlen, DB_EINPUT,
                   "%s: not found in the current directory%s (set DFLASH_BENCH_DATA to the directory "
                   "holding models/ datasets/ configs/)",
                   path, where);
}

const char *db_data_find(const char *path, char *buf, size_t n)
{
    return path && db_data_path(path, buf, n, NULL, 0) == DB_OK ? buf : path;
}

int db_results_base(char *out, size_t n)
{
    struct stat st;
    /* ./results when it can be made (or is there to write in) */
    int here = stat("results", &st) == 0 ? access("results", W_OK | X_OK) == 0 : access(".", W_OK | X_OK) == 0;
    if (here) return snprintf(out, n, "results") < (int)n ? DB_OK : DB_EINPUT;
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int w;
    if (xdg && xdg[0] == '/') w = snprintf(out, n, "%s/dflash-bench/results", xdg);
    else if (home && home[0]) w = snprintf(out, n, "%s/.local/share/dflash-bench/results", home);
    else w = snprintf(out, n, "results"); /* nowhere better: the write check reports it */
    return w < 0 || (size_t)w >= n ? DB_EINPUT : DB_OK;
}
