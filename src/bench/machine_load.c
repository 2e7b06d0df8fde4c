/* machine_load.c — see machine_load.h. */
#include "bench/machine_load.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

void db_load_sample_now(db_load_sample *s)
{
    memset(s, 0, sizeof *s);
    s->t = db_now();
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        s->self_cpu_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                        (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
        s->majflt = ru.ru_majflt;
    }
    FILE *f = fopen("/proc/loadavg", "r");
    int good = f && fscanf(f, "%lf", &s->loadavg1) == 1;
    if (f) fclose(f);
    f = fopen("/proc/stat", "r");
    char line[512];
    int have_cpu = 0, have_run = 0;
    while (f && fgets(line, sizeof line, f)) {
        long long u, n, sy, id, io, irq, sirq, st;
        if (!have_cpu && sscanf(line, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &u, &n, &sy, &id, &io, &irq,
                                &sirq, &st) == 8) {
            s->busy_ticks = u + n + sy + irq + sirq;
            s->steal_ticks = st;
            have_cpu = 1;
        }
        if (sscanf(line, "procs_running %d", &s->procs_running) == 1) have_run = 1;
    }
    if (f) fclose(f);
    s->ok = good && have_cpu && have_run;
}

double db_load_other_cores(const db_load_sample *a, const db_load_sample *b)
{
    long hz = sysconf(_SC_CLK_TCK);
    double dt = b->t - a->t;
    if (!a->ok || !b->ok || hz <= 0 || dt <= 0) return NAN;
    double busy = (double)(b->busy_ticks - a->busy_ticks) / (double)hz;
    return fmax(0, busy - (b->self_cpu_s - a->self_cpu_s)) / dt;
}

int db_load_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 0;
}

double db_load_steal(const db_load_sample *a, const db_load_sample *b)
{
    long hz = sysconf(_SC_CLK_TCK);
    double dt = b->t - a->t;
    if (!a->ok || !b->ok || hz <= 0 || dt <= 0) return NAN;
    return (double)(b->steal_ticks - a->steal_ticks) / (double)hz / dt;
}

cJSON *db_load_json(const db_load_sample *s)
{
    cJSON *o = cJSON_CreateObject();
    if (o && s->ok &&
        (!cJSON_AddNumberToObject(o, "loadavg_1m", s->loadavg1) ||
         !cJSON_AddNumberToObject(o, "procs_running", s->procs_running))) {
        cJSON_Delete(o); /* out of memory: NULL rather than an object without its fields */
        return NULL;
    }
    return o;
}

int db_load_add_points(cJSON *points, const db_point_raw *raw, int P, const db_load_sample *a,
                       const db_load_sample *b)
{
    double other = db_load_other_cores(a, b), steal = db_load_steal(a, b);
    for (int j = 0; j < P; j++) {
        char id[DB_POINT_ID_MAX];
        db_point_id(&raw[j].key, id, sizeof id);
        cJSON *o = cJSON_CreateObject(), *sa = db_load_json(a), *sb = db_load_json(b);
        int ok = o && sa && sb && cJSON_AddStringToObject(o, "point_id", id);
        if (ok) ok = cJSON_AddItemToObject(o, "start", sa), sa = NULL;
        if (ok) ok = cJSON_AddItemToObject(o, "end", sb), sb = NULL;
        ok = ok && cJSON_AddNumberToObject(o, "other_cores", isfinite(other) ? other : -1) &&
             cJSON_AddNumberToObject(o, "steal_cores", isfinite(steal) ? steal : -1) &&
             cJSON_AddNumberToObject(o, "major_faults", (double)raw[j].major_faults);
        if (ok) ok = cJSON_AddItemToArray(points, o), o = ok ? NULL : o;
        cJSON_Delete(o), cJSON_Delete(sa), cJSON_Delete(sb);
        if (!ok) return -1;
    }
    return 0;
}
