/* cpu_topology.c — CPU description and thread pinning (see cpu_topology.h). */
#include "config.h"
#include "cpu_topology.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#if HAVE_HWLOC
#include <hwloc.h>
#endif
#if HAVE_OPENMP
#include <omp.h>
#endif

static void cpu_model_from_proc(char *buf, size_t n)
{
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0) {
            char *c = strchr(line, ':');
            if (!c) continue;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            c[strcspn(c, "\n")] = 0;
            snprintf(buf, n, "%s", c);
            break;
        }
    }
    fclose(f);
}

#if HAVE_HWLOC
static size_t cache_size(hwloc_topology_t t, hwloc_obj_type_t type)
{
    hwloc_obj_t o = hwloc_get_obj_by_type(t, type, 0);
    return o && o->attr ? (size_t)o->attr->cache.size : 0;
}
#endif

void db_cpu_info_get(db_cpu_info *info)
{
    memset(info, 0, sizeof *info);
    cpu_model_from_proc(info->model, sizeof info->model);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    info->pus = n > 0 ? (int)n : 1;
    info->cores = info->pus;
    info->packages = 1;
    info->numa_nodes = 1;
    info->source = "sysconf";
#if HAVE_HWLOC
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) == 0) {
        if (hwloc_topology_load(t) == 0) {
            int v;
            if ((v = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE)) > 0) info->packages = v;
            if ((v = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE)) > 0) info->cores = v;
            if ((v = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU)) > 0) info->pus = v;
            if ((v = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE)) > 0) info->numa_nodes = v;
            info->l1d = cache_size(t, HWLOC_OBJ_L1CACHE);
            info->l2 = cache_size(t, HWLOC_OBJ_L2CACHE);
            info->l3 = cache_size(t, HWLOC_OBJ_L3CACHE);
            info->source = "hwloc";
        }
        hwloc_topology_destroy(t);
    }
#endif
}

void db_cpu_describe(char *buf, size_t n)
{
    db_cpu_info ci;
    db_cpu_info_get(&ci);
    snprintf(buf, n, "%s, %d cores / %d threads", ci.model, ci.cores, ci.pus);
}

int db_cpu_pin_threads(int threads)
{
    int bound = 0;
#if HAVE_HWLOC && HAVE_OPENMP
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) return 0;
    if (hwloc_topology_load(t) == 0) {
        int ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
        if (ncores > 0) {
#pragma omp parallel num_threads(threads) reduction(+ : bound)
            {
                hwloc_obj_t core =
                    hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, omp_get_thread_num() % ncores);
                if (core && hwloc_set_cpubind(t, core->cpuset, HWLOC_CPUBIND_THREAD) == 0)
                    bound = 1;
            }
        }
    }
    hwloc_topology_destroy(t);
#else
    (void)threads;
#endif
    return bound;
}
