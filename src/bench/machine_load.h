/* machine_load.h — how busy the machine was around a measurement: the 1-minute load average and
 * the runnable tasks (/proc/loadavg, /proc/stat procs_running, this process's threads
 * included), the CPU time every task spent (/proc/stat "cpu" line) against this process's own
 * (getrusage), CPU steal, and this process's major page faults.
 *
 * Between two samples a and b: other_cores = (busy CPU seconds of the machine - this process's
 * CPU seconds) / wall seconds, the cores other processes held on average; busy = user + nice +
 * system + irq + softirq ticks (idle, iowait and steal excluded; guest time is inside user). */
#ifndef DB_MACHINE_LOAD_H
#define DB_MACHINE_LOAD_H

#include "result/point.h"

#include <cjson/cJSON.h>

typedef struct {
    int ok;                 /* /proc was readable (Linux) */
    double t;               /* db_now() */
    double loadavg1;
    int procs_running;
    long long busy_ticks, steal_ticks;
    double self_cpu_s;      /* user + system time of this process */
    long majflt;            /* major page faults of this process so far */
} db_load_sample;

void db_load_sample_now(db_load_sample *s);
/* cores other processes held between a and b (NAN when unknown) */
double db_load_other_cores(const db_load_sample *a, const db_load_sample *b);
/* the cores this process may run on (its affinity mask; the online CPUs without one) */
int db_load_cpus(void);
/* CPU steal between a and b, in seconds per wall second (NAN when unknown) */
double db_load_steal(const db_load_sample *a, const db_load_sample *b);
/* {"loadavg_1m", "procs_running"} of s; NULL when out of memory */
cJSON *db_load_json(const db_load_sample *s);
/* one object per point of raw[P] appended to points (meta.json "points"): its id, the samples
 * a and b around its group, the other and steal cores between them (-1 unknown), its major
 * faults; -1 when out of memory (every cJSON result is checked) */
int db_load_add_points(cJSON *points, const db_point_raw *raw, int P, const db_load_sample *a,
                       const db_load_sample *b);

#endif
