/* sweep_record.c — the sweep as meta.json records it, read back by --resume (see sweep_record.h). */
#include "bench/sweep_record.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* keys that do not change what a resumed run measures (the stdout format; the directory is
 * --resume's own) */
static int key_free_on_resume(const char *k) { return !strcmp(k, "output") || !strcmp(k, "out"); }

/* --resume DIR: the sweep recorded in DIR/meta.json ("sweep": key -> value); 1 when there is
 * none (a run of an older version, or no meta.json) */
int db_sweep_recorded(const char *dir, db_sweep *sw, char *err, size_t errlen)
{
    char path[1200], *text = NULL;
    size_t len;
    if (db_path_join(path, sizeof path, dir, "meta.json") != 0 || access(path, F_OK) != 0) return 1;
    int rc = db_read_file(path, &text, &len, err, errlen);
    if (rc) return rc;
    int oom;
    cJSON *j = db_json_parse(text, strlen(text), &oom), *rec = cJSON_GetObjectItemCaseSensitive(j, "sweep"), *e;
    free(text);
    if (oom) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory parsing it", path);
    if (!cJSON_IsObject(rec)) {
        cJSON_Delete(j);
        return j ? 1 : db_fail(err, errlen, DB_EINPUT, "%s: not valid JSON", path);
    }
    db_sweep_init(sw);
    cJSON_ArrayForEach(e, rec)
    {
        if (!rc && !cJSON_IsString(e)) rc = db_fail(err, errlen, DB_EINPUT, "%s: sweep.%s is not a string", path, e->string);
        char why[512];
        if (!rc && db_sweep_set(sw, e->string, e->valuestring, why, sizeof why))
            rc = db_fail(err, errlen, DB_EINPUT, "%s: recorded sweep: %s", path, why);
    }
    cJSON_Delete(j);
    return rc;
}

/* the keys where a and b differ ("key: recorded X, given Y; ..."), those free on resume aside */
int db_sweep_diff(const db_sweep *a, const db_sweep *b, char *out, size_t n)
{
    size_t o = 0;
    int nd = 0;
    out[0] = 0;
    for (int i = 0; db_sweep_key(i); i++) {
        const char *k = db_sweep_key(i);
        char x[2048], y[2048];
        db_sweep_get(a, k, x, sizeof x);
        db_sweep_get(b, k, y, sizeof y);
        if (key_free_on_resume(k) || !strcmp(x, y)) continue;
        if (o < n)
            o += (size_t)snprintf(out + o, n - o, "%s%s (recorded '%s', given '%s')", nd ? "; " : "", k, x, y);
        nd++;
    }
    return nd;
}

/* the sweep as meta.json records it, for --resume */
cJSON *db_sweep_json(const db_sweep *sw)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && db_sweep_key(i); i++) {
        char v[2048];
        if (strcmp(db_sweep_key(i), "out") != 0 && db_sweep_get(sw, db_sweep_key(i), v, sizeof v) == 0 &&
            !cJSON_AddStringToObject(o, db_sweep_key(i), v)) {
            cJSON_Delete(o); /* out of memory: a partial record would resume another sweep */
            return NULL;
        }
    }
    return o;
}

