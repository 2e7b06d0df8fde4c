/* cpu_topology.h — the CPU backend's use of the host CPU reading (db_host_cpu in backend.h:
 * model, cores, caches, NUMA, via hwloc when built with it and /proc + sysconf otherwise): its
 * device name, and optional pinning of OpenMP threads to cores. */
#ifndef DB_CPU_TOPOLOGY_H
#define DB_CPU_TOPOLOGY_H

#include "backend.h"

#include <stddef.h>

/* "<model>, <cores> cores / <pus> threads" */
void db_cpu_describe(char *buf, size_t n);
/* Bind OpenMP thread i to core i (hwloc); no-op without hwloc. Returns threads bound. */
int db_cpu_pin_threads(int threads);

#endif
