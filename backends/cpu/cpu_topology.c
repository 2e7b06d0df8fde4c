/* cpu_topology.c — the host CPU, read once (db_host_cpu, backend.h), the CPU backend's device
 * description and thread pinning (see cpu_topology.h). The hwloc topology is loaded once and kept
 * for the process: the description, the run metadata's lists and the pinning all use it. */
#include "config.h"
#include "cpu_topology.h"

#include <pthread.h>
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

static db_cpu_info host;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
#if HAVE_HWLOC
static hwloc_topology_t topo; /* loaded (topo_loaded) once, kept for the process */
static int topo_loaded;

static void read_lists(db_cpu_info *info)
{
    int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < nn && info->n_numa < DB_CPU_MAX_NUMA; i++) {
        hwloc_obj_t n = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
        db_cpu_numa_node *e = &info->numa[info->n_numa++];
        e->os_index = n->os_index;
        e->memory_bytes = n->attr->numanode.local_memory;
        e->pus = hwloc_bitmap_weight(n->cpuset);
    }
    static const struct {
        hwloc_obj_type_t type;
        const char *name;
    } caches[DB_CPU_MAX_CACHES] = {{HWLOC_OBJ_L1CACHE, "L1d"}, {HWLOC_OBJ_L1ICACHE, "L1i"},
                                   {HWLOC_OBJ_L2CACHE, "L2"},  {HWLOC_OBJ_L3CACHE, "L3"},
                                   {HWLOC_OBJ_L4CACHE, "L4"}};
    for (int k = 0; k < DB_CPU_MAX_CACHES; k++) {
        int cnt = hwloc_get_nbobjs_by_type(topo, caches[k].type);
        if (cnt <= 0) continue;
        hwloc_obj_t c = hwloc_get_obj_by_type(topo, caches[k].type, 0);
        db_cpu_cache *e = &info->caches[info->n_caches++];
        e->level = caches[k].name;
        e->count = cnt;
        e->bytes_each = c->attr->cache.size;
        e->line_bytes = c->attr->cache.linesize;
        e->associativity = c->attr->cache.associativity;
    }
}
#endif

static void read_host(void)
{
    db_cpu_info *info = &host;
    memset(info, 0, sizeof *info);
    cpu_model_from_proc(info->model, sizeof info->model);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    info->pus = n > 0 ? (int)n : 1;
    info->cores = info->pus;
    info->packages = 1;
    info->numa_nodes = 1;
    info->source = "sysconf";
#if HAVE_HWLOC
    if (hwloc_topology_init(&topo) == 0) {
        if (hwloc_topology_load(topo) == 0) {
            hwloc_topology_t t = topo;
            int v;
            if ((v = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE)) > 0) info->packages = v;
            if ((v = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE)) > 0) info->cores = v;
            if ((v = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU)) > 0) info->pus = v;
            if ((v = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE)) > 0) info->numa_nodes = v;
            info->l1d = cache_size(t, HWLOC_OBJ_L1CACHE);
            info->l2 = cache_size(t, HWLOC_OBJ_L2CACHE);
            info->l3 = cache_size(t, HWLOC_OBJ_L3CACHE);
            info->source = "hwloc";
            read_lists(info);
            topo_loaded = 1;
        } else {
            hwloc_topology_destroy(topo);
        }
    }
#endif
}

const db_cpu_info *db_host_cpu(void)
{
    pthread_once(&host_once, read_host);
    return &host;
}

void db_cpu_describe(char *buf, size_t n)
{
    const db_cpu_info *ci = db_host_cpu();
    snprintf(buf, n, "%s, %d cores / %d threads", ci->model, ci->cores, ci->pus);
}

int db_cpu_pin_threads(int threads)
{
    int bound = 0;
#if HAVE_HWLOC && HAVE_OPENMP
    db_host_cpu();
    if (!topo_loaded) return 0;
    hwloc_topology_t t = topo;
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
#else
    (void)threads;
#endif
    return bound;
}
