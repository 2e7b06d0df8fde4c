/* cpu_topology.h — what the CPU is (model, cores, caches, NUMA), via hwloc when built with it
 * and /proc + sysconf otherwise, and optional pinning of OpenMP threads to cores. */
#ifndef DB_CPU_TOPOLOGY_H
#define DB_CPU_TOPOLOGY_H

#include <stddef.h>

typedef struct {
    char model[128];
    int packages, cores, pus, numa_nodes;
    size_t l1d, l2, l3; /* bytes, 0 when unknown */
    const char *source; /* "hwloc" or "sysconf" */
} db_cpu_info;

void db_cpu_info_get(db_cpu_info *info);
/* "<model>, <cores> cores / <pus> threads" */
void db_cpu_describe(char *buf, size_t n);
/* Bind OpenMP thread i to core i (hwloc); no-op without hwloc. Returns threads bound. */
int db_cpu_pin_threads(int threads);

#endif
