/* cli_run_resume.c — run's checks of a results directory it resumes (cli_run_resume.h). */
#include "cli/cli_run_resume.h"

#include "base/sha256.h"
#include "base/util.h"
#include "bench/sweep_record.h"
#include "report/results_dir.h"
#include "text/dataset.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int db_run_resume_begin(const char *dir, int *lock_fd, db_sweep *rec, int *have_rec, char *err,
                        size_t errlen)
{
    *have_rec = 0;
    /* before the lock, which creates DIR/.lock: a directory of something else is left as it is */
    int rc = db_results_check_resumable(dir, err, errlen), listed = 0;
    if (!rc) rc = db_results_lock(dir, lock_fd, err, errlen);
    if (!rc) rc = db_sweep_recorded(dir, rec, err, errlen);
    *have_rec = rc == 0;
    if (rc == 1 && (rc = db_results_listed(dir, &listed, err, errlen)) == DB_OK && listed > 0)
        /* the sweep of those points is unknown: the flags given (or the defaults) would run
         * other points into the same tables */
        return db_fail(err, errlen, DB_EINPUT,
                       "--resume %s: meta.json is missing or records no sweep, but points.done lists %d point%s: "
                       "restore its meta.json (meta.N.json are earlier invocations'), or start a new --out",
                       dir, listed, listed > 1 ? "s" : "");
    if (rc == DB_OK && !*have_rec)
        fprintf(stderr, "warning: %s/meta.json records no sweep (an older run): resuming with the flags given\n", dir);
    return rc;
}

int db_run_resume_shard(const char *shard_arg, const char *resume, db_shard *shard, char *err,
                        size_t errlen)
{
    db_shard rec = {0, 0};
    int rc = shard_arg ? db_shard_parse(shard_arg, shard, err, errlen) : DB_OK;
    if (!rc && resume) rc = db_shard_recorded(resume, &rec, err, errlen);
    if (!rc && shard_arg && resume && (rec.index != shard->index || rec.count != shard->count))
        return db_fail(err, errlen, DB_EINPUT, "--resume %s: --shard %s differs from the recorded shard %d/%d",
                       resume, shard_arg, rec.index, rec.count);
    if (!shard_arg) *shard = rec;
    return rc;
}

/* one input of the sweep into meta.json's inputs: kind, as given, absolute path, sha256 */
static int add_input(cJSON *in, const char *kind, const char *spec, const char *path, const char *sha)
{
    char abs[PATH_MAX];
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(in, o)) {
        cJSON_Delete(o);
        return -1;
    }
    return !cJSON_AddStringToObject(o, "kind", kind) || !cJSON_AddStringToObject(o, "given", spec) ||
                   !cJSON_AddStringToObject(o, "path", realpath(path, abs) ? abs : path) ||
                   !cJSON_AddStringToObject(o, "sha256", sha)
               ? -1
               : 0;
}

int db_run_inputs_record(db_run_meta *m, const db_sweep *sw, char *err, size_t errlen)
{
    cJSON *in = cJSON_CreateArray();
    int rc = in ? DB_OK : db_fail(err, errlen, DB_ERUNTIME, "out of memory for meta.json's inputs");
    for (int i = 0; i < sw->n_dataset && !rc; i++) {
        char path[1024], sha[65];
        if (!strncmp(sw->dataset[i], "synthetic-", 10)) continue; /* made from the seed */
        rc = db_dataset_resolve(sw->dataset[i], path, sizeof path, err, errlen);
        if (!rc) rc = db_sha256_file(path, sha, err, errlen);
        if (!rc && add_input(in, "dataset", sw->dataset[i], path, sha))
            rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for meta.json's inputs");
    }
    for (int i = 0; i < m->n_models && !rc; i++) {
        const db_model_meta *mm = &m->models[i];
        if (add_input(in, "checkpoint", mm->path, mm->path, mm->sha256))
            rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for meta.json's inputs");
    }
    if (rc) cJSON_Delete(in);
    else m->inputs = in;
    return rc;
}

int db_run_inputs_check(const db_run_meta *m, const char *dir, int allow_changed, char *err,
                        size_t errlen)
{
    char path[1200], *text = NULL;
    size_t len;
    if (db_path_join(path, sizeof path, dir, "meta.json") != 0 || access(path, F_OK) != 0) return DB_OK;
    int rc = db_read_file(path, &text, &len, err, errlen), oom = 0;
    if (rc) return rc;
    cJSON *j = db_json_parse(text, strlen(text), &oom), *rec = cJSON_GetObjectItemCaseSensitive(j, "inputs"), *e, *f;
    free(text);
    if (oom) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory parsing it", path);
    cJSON_ArrayForEach(e, rec)
    {
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(e, "kind"), *given = cJSON_GetObjectItemCaseSensitive(e, "given"),
                    *sha = cJSON_GetObjectItemCaseSensitive(e, "sha256");
        if (!cJSON_IsString(kind) || !cJSON_IsString(given) || !cJSON_IsString(sha)) continue;
        cJSON_ArrayForEach(f, m->inputs)
        {
            const char *k2 = cJSON_GetObjectItemCaseSensitive(f, "kind")->valuestring,
                       *g2 = cJSON_GetObjectItemCaseSensitive(f, "given")->valuestring,
                       *s2 = cJSON_GetObjectItemCaseSensitive(f, "sha256")->valuestring;
            if (strcmp(k2, kind->valuestring) || strcmp(g2, given->valuestring) || !strcmp(s2, sha->valuestring)) continue;
            if (allow_changed) {
                fprintf(stderr, "warning: the %s %s changed since the run began (--allow-changed-inputs)\n", k2, g2);
                continue;
            }
            rc = db_fail(err, errlen, DB_EINPUT,
                         "--resume %s: the %s %s (%s) changed since the run began (sha256 %.12s..., recorded %.12s...): "
                         "restore it, resume with --allow-changed-inputs, or start a new --out",
                         dir, k2, g2, cJSON_GetObjectItemCaseSensitive(f, "path")->valuestring, s2, sha->valuestring);
            break;
        }
        if (rc) break;
    }
    cJSON_Delete(j);
    return rc;
}

