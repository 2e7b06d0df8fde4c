/* test_results.c — the results directory: made at the first point (nothing before), refusal,
 * headers, appends, points.done,
 * and resume after a point was half appended (its rows are dropped and written again exactly
 * once); meta.json; reloading a baseline from requests.csv. */
#include "base/csv_io.h"
#include "report/report.h"
#include "report/report_csv.h"
#include "report_fixture.h"
#include "report/results_dir.h"
#include "tap.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[512];

/* rows of table t whose point_id is `id` (all rows when id is NULL); -1 if unreadable */
static int rows_of(const char *dir, db_table t, const char *id)
{
    char p[1200];
    db_path_join(p, sizeof p, dir, db_table_file[t]);
    db_csv_doc d;
    if (db_csv_read(p, &d, err, sizeof err)) return -1;
    int c = db_csv_col(&d, "point_id"), n = 0;
    for (int r = 1; r < d.n; r++) n += !id || (c >= 0 && !strcmp(d.rec[r].field[c], id));
    db_csv_doc_free(&d);
    return n;
}

/* every file of dir (names and contents, hidden ones but .lock aside), as one string */
static char *snapshot(const char *dir)
{
    char cmd[1200], *buf = NULL;
    size_t n = 0;
    snprintf(cmd, sizeof cmd, "cd '%s' && ls && cat -- *", dir);
    FILE *p = popen(cmd, "r"), *m = open_memstream(&buf, &n);
    int c;
    while (p && m && (c = fgetc(p)) != EOF) fputc(c, m);
    if (p) pclose(p);
    if (m) fclose(m);
    return buf;
}

static void append_raw(const char *dir, const char *name, const char *text, size_t n)
{
    char p[1200];
    db_path_join(p, sizeof p, dir, name);
    int fd = open(p, O_WRONLY | O_APPEND);
    if (fd < 0 || write(fd, text, n) != (ssize_t)n) tap_diag("cannot append to %s", p);
    if (fd >= 0) close(fd);
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    char base[] = "/tmp/db-results-XXXXXX";
    if (!mkdtemp(base)) tap_skip_all("no temporary directory");
    char dir[256], file[300], sub[400];
    snprintf(dir, sizeof dir, "%s/a/b/run", base);

    /* default name */
    char def[128];
    db_results_default_dir(def, sizeof def, "h200", (time_t)1795917600);
    tap_ok(!strcmp(def, "results/20261129-020000-h200"), "default directory name: %s", def);
    db_results_default_dir(def, sizeof def, "", (time_t)1795917600);
    tap_ok(!strcmp(def, "results/20261129-020000"), "default without a label: %s", def);

    /* early checks: nothing is created before the models load */
    tap_ok(db_results_check_writable(dir, 0, err, sizeof err) == 0, "a creatable path passes (%s)",
           err);
    struct stat st;
    char parent[300];
    snprintf(parent, sizeof parent, "%s/a", base);
    tap_ok(stat(parent, &st) != 0 && stat(dir, &st) != 0, "the check created nothing");
    snprintf(file, sizeof file, "%s/plain-file", base);
    FILE *pf = fopen(file, "w");
    fclose(pf);
    snprintf(sub, sizeof sub, "%s/sub", file);
    int rc = db_results_check_writable(sub, 0, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, sub), "under a plain file: DB_EINPUT naming it: %s", err);
    rc = db_results_check_writable("/proc/db-results-test", 0, err, sizeof err);
    tap_ok(rc == DB_EINPUT, "unwritable location: DB_EINPUT: %s", err);
    /* --out: a directory with other files, the current and the root directory are refused */
    rc = db_results_check_writable(base, 0, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "not empty") && strstr(err, "plain-file"),
           "a non-empty directory without results: DB_EINPUT naming a file in it: %s", err);
    rc = db_results_check_writable(".", 0, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "current directory"), "--out .: DB_EINPUT: %s", err);
    rc = db_results_check_writable("/", 0, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "root directory"), "--out /: DB_EINPUT: %s", err);
    snprintf(sub, sizeof sub, "%s/empty", base);
    mkdir(sub, 0777);
    rc = db_results_check_writable(sub, 0, err, sizeof err);
    tap_ok(rc == 0, "an empty directory passes (%s)", err);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/never", base);
    rc = db_results_check_writable(sub, 1, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "--resume"), "resume of a missing directory: %s", err);

    /* a fresh run: two points complete */
    db_run_meta m;
    fx_meta(&m);
    db_results r;
    rc = db_results_open(&r, dir, 0, err, sizeof err);
    tap_ok(rc == 0, "open fresh (%s)", err);
    tap_ok(db_results_write_meta(&r, &m, err, sizeof err) == 0, "meta.json held");
    tap_ok(stat(parent, &st) != 0, "a fresh run's directory waits for its first point");
    db_results_close(&r); /* a run that fails before its first point leaves nothing */
    tap_ok(stat(parent, &st) != 0, "closed without a point: nothing on disk");
    rc = db_results_open(&r, dir, 0, err, sizeof err);
    db_results_write_meta(&r, &m, err, sizeof err);
    db_results other; /* a second run given the same fresh --out before either has a point */
    int orc = db_results_open(&other, dir, 0, err, sizeof err);

    db_point_raw p[3] = {fx_raw(fx_key("math", "ar", 1, 2), 2, 4, 1.0),
                         fx_raw(fx_key("math", "dflash2", 8, 2), 2, 4, 2.0),
                         fx_raw(fx_key("math", "dflash2", 16, 2), 2, 4, 2.5)};
    db_point_summary s[3];
    char id[3][DB_POINT_ID_MAX];
    for (int i = 0; i < 3; i++) {
        db_point_summarize(&p[i], i ? &p[0] : NULL, 1, &s[i]);
        db_point_id(&p[i].key, id[i], sizeof id[i]);
    }
    rc = db_results_append(&r, &m, &p[0], &s[0], err, sizeof err);
    int first_ok = rc == 0 && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    for (int t = 0; t < DB_TABLE_COUNT; t++) first_ok &= rows_of(dir, (db_table)t, NULL) == rows_of(dir, (db_table)t, id[0]);
    char meta0[1200];
    db_path_join(meta0, sizeof meta0, dir, "meta.json");
    tap_ok(first_ok && rows_of(dir, DB_TABLE_SUMMARY, NULL) == 1 && stat(meta0, &st) == 0,
           "the first point makes the directory with parents: headers, its rows, meta.json (%s)", err);
    orc |= db_results_append(&other, &m, &p[1], &s[1], err, sizeof err) != DB_ERUNTIME;
    tap_ok(orc == 0 && strstr(err, "another run") && rows_of(dir, DB_TABLE_SUMMARY, NULL) == 1,
           "the first point claims the directory: a second run's point is refused: %s", err);
    db_results_close(&other);
    rc |= db_results_append(&r, &m, &p[1], &s[1], err, sizeof err);
    tap_ok(rc == 0 && db_results_is_done(&r, &p[0].key) && db_results_is_done(&r, &p[1].key) &&
               !db_results_is_done(&r, &p[2].key),
           "two points appended and recorded (%s)", err);
    tap_ok(db_results_append(&r, &m, &p[1], &s[1], err, sizeof err) == DB_EINPUT,
           "a point is never appended twice: %s", err);
    tap_ok(rows_of(dir, DB_TABLE_SUMMARY, NULL) == 2 && rows_of(dir, DB_TABLE_REQUESTS, id[1]) == 8 &&
               rows_of(dir, DB_TABLE_ACCEPTANCE, id[1]) == 7,
           "rows on disk");
    db_results_close(&r);
    rc = db_results_check_writable(dir, 0, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "--resume"), "a fresh run refuses a used directory: %s",
           err);

    /* the run is killed while appending point 3: every table got its rows (one a record cut
     * short), points.done did not; and a half-written line in points.done */
    for (int t = 0; t < DB_TABLE_COUNT; t++) {
        char *buf;
        size_t n;
        FILE *f = open_memstream(&buf, &n);
        db_table_rows((db_table)t, &m, &p[2], &s[2], f);
        fclose(f);
        if (t == DB_TABLE_REQUESTS) append_raw(dir, db_table_file[t], buf, n - 40); /* cut */
        else append_raw(dir, db_table_file[t], buf, n);
        free(buf);
    }
    append_raw(dir, "points.done", "cpu|math|dflash2|B16", 20);
    tap_ok(rows_of(dir, DB_TABLE_SUMMARY, id[2]) == 1 && rows_of(dir, DB_TABLE_HISTOGRAM, id[2]) == 16,
           "the killed point's rows are on disk");

    rc = db_results_open(&r, dir, 1, err, sizeof err);
    tap_ok(rc == 0 && r.n_done == 2, "resume reads two completed points (%s)", err);
    char meta1[1200], meta_now[1200];
    db_path_join(meta1, sizeof meta1, dir, "meta.1.json");
    db_path_join(meta_now, sizeof meta_now, dir, "meta.json");
    tap_ok(stat(meta_now, &st) == 0 && stat(meta1, &st) != 0,
           "resume keeps meta.json in place until it writes the new one");
    {
        int fd2;
        char mine[64];
        snprintf(mine, sizeof mine, "pid %ld on host ", (long)getpid());
        db_results twice;
        int lrc = db_results_lock(dir, &fd2, err, sizeof err);
        tap_ok(lrc == DB_EINPUT && strstr(err, "in use") && strstr(err, mine),
               "a second lock of a directory being resumed: DB_EINPUT naming the holder: %s", err);
        lrc = db_results_open(&twice, dir, 1, err, sizeof err);
        tap_ok(lrc == DB_EINPUT && strstr(err, mine), "a second resume of it is refused: %s", err);
    }
    tap_ok(r.dropped_rows == 1 + 15 + 16 + 8, "resume dropped the unfinished rows (%d)",
           r.dropped_rows);
    int clean = 1;
    for (int t = 0; t < DB_TABLE_COUNT; t++) clean &= rows_of(dir, (db_table)t, id[2]) == 0;
    tap_ok(clean && rows_of(dir, DB_TABLE_SUMMARY, NULL) == 2 &&
               rows_of(dir, DB_TABLE_REQUESTS, id[0]) == 8,
           "tables hold exactly the completed points again");
    char done_path[1200], *done;
    size_t dlen;
    db_path_join(done_path, sizeof done_path, dir, "points.done");
    db_read_file(done_path, &done, &dlen, err, sizeof err);
    tap_ok(dlen > 0 && done[dlen - 1] == '\n' && !strstr(done, "B16"),
           "the half line in points.done is cut off");
    free(done);
    tap_ok(db_results_is_done(&r, &p[0].key) && !db_results_is_done(&r, &p[2].key),
           "resume skips done points, reruns the rest");

    /* the baseline of the points still to run, from requests.csv */
    db_point_raw back;
    rc = db_results_load_raw(&r, &p[0].key, &back, err, sizeof err);
    db_point_summary sb, s2;
    if (rc == 0) db_point_summarize(&back, NULL, 1, &sb);
    tap_ok(rc == 0 && back.n_prompts == 4 && back.repetitions == 2 &&
               fabs(sb.throughput_tok_s - s[0].throughput_tok_s) < 1e-6 * s[0].throughput_tok_s &&
               fabs(sb.ttft_ms_p50 - s[0].ttft_ms_p50) < 1e-6,
           "ar reloaded from requests.csv summarises the same (%s)", err);
    db_point_summarize(&p[2], &back, 1, &s2);
    tap_ok(fabs(s2.speedup - s[2].speedup) < 1e-6 * s[2].speedup &&
               fabs(s2.speedup_ci_lo - s[2].speedup_ci_lo) < 1e-6,
           "and gives the same speedup and CI as the original baseline");
    db_point_raw_free(&back);
    rc = db_results_load_raw(&r, &p[2].key, &back, err, sizeof err);
    tap_ok(rc == DB_EINPUT, "an unfinished point cannot be reloaded: %s", err);

    rc = db_results_append(&r, &m, &p[2], &s[2], err, sizeof err);
    int once = rc == 0;
    int want[DB_TABLE_COUNT] = {1, 15, 16, 8};
    for (int t = 0; t < DB_TABLE_COUNT; t++) once &= rows_of(dir, (db_table)t, id[2]) == want[t];
    tap_ok(once, "the rerun point appears exactly once in every table");
    tap_ok(db_results_write_meta(&r, &m, err, sizeof err) == 0 && stat(meta_now, &st) == 0,
           "the resume writes its meta.json (%s)", err);
    db_results_close(&r);

    /* meta.json, and its rotation on resume */
    char meta[1200], *mj;
    db_path_join(meta, sizeof meta, dir, "meta.1.json");
    tap_ok(stat(meta, &st) == 0, "resume kept the previous meta.json as meta.1.json");
    db_path_join(meta, sizeof meta, dir, "meta.json");
    db_results_open(&r, dir, 1, err, sizeof err);
    db_results_write_meta(&r, &m, err, sizeof err);
    db_results_close(&r);
    db_read_file(meta, &mj, &dlen, err, sizeof err);
    cJSON *j = cJSON_Parse(mj);
    cJSON *cpu = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "machine"), "cpu");
    tap_ok(j && cJSON_GetObjectItem(j, "schema_version") && cpu &&
               cJSON_GetObjectItem(cpu, "cores") && cJSON_GetObjectItem(cpu, "model") &&
               cJSON_GetObjectItem(cJSON_GetObjectItem(j, "build"), "features") &&
               cJSON_GetArraySize(cJSON_GetObjectItem(j, "backends")) == 1 &&
               !strcmp(cJSON_GetObjectItem(j, "test_time")->valuestring, "2026-11-29T02:00:00Z"),
           "meta.json: machine, build, backends, time");
    cJSON_Delete(j);
    free(mj);
    tap_ok(rows_of(dir, DB_TABLE_SUMMARY, NULL) == 3, "a second resume changes nothing");

    /* a table of another schema is not silently rewritten */
    char sp[1200];
    db_path_join(sp, sizeof sp, dir, "histogram.csv");
    FILE *hf = fopen(sp, "w");
    fputs("schema_version,something_else\n", hf);
    fclose(hf);
    /* ... and refused before anything changes: the unfinished rows, the cut line in points.done
     * and meta.json stay as they were */
    append_raw(dir, "points.done", "cpu|math|dflash2|B16", 20);
    {
        char *buf;
        size_t n;
        FILE *f = open_memstream(&buf, &n);
        db_table_rows(DB_TABLE_SUMMARY, &m, &p[2], &s[2], f);
        fclose(f);
        append_raw(dir, db_table_file[DB_TABLE_SUMMARY], buf, n);
        free(buf);
    }
    char *before = snapshot(dir);
    rc = db_results_open(&r, dir, 1, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "histogram.csv"), "foreign header refused: %s", err);
    char *after = snapshot(dir);
    tap_ok(before && after && !strcmp(before, after) && stat(meta_now, &st) == 0,
           "a failing resume leaves the directory exactly as it was, meta.json in place");
    free(before);
    free(after);

    /* two runs that wrote the directory at once (before the lock): points.done lists a point
     * twice, in CRLF lines with trailing blanks, and the tables hold its rows twice */
    unlink(sp); /* a missing table gets its header back */
    int cnt[DB_TABLE_COUNT][3];
    for (int t = 0; t < DB_TABLE_COUNT; t++)
        for (int i = 0; i < 3; i++) cnt[t][i] = t == DB_TABLE_HISTOGRAM ? 0 : rows_of(dir, (db_table)t, id[i]);
    {
        FILE *df = fopen(done_path, "w");
        fprintf(df, "%s\r\n%s  \n%s\r\n%s\n", id[0], id[1], id[0], id[2]);
        fclose(df);
        for (int t = 0; t < DB_TABLE_COUNT; t++) {
            char *buf;
            size_t n;
            FILE *f = open_memstream(&buf, &n);
            db_table_rows((db_table)t, &m, &p[0], &s[0], f);
            fclose(f);
            append_raw(dir, db_table_file[t], buf, n);
            free(buf);
        }
    }
    tap_ok(rows_of(dir, DB_TABLE_SUMMARY, id[0]) == 2 && rows_of(dir, DB_TABLE_REQUESTS, id[0]) == 16,
           "a point's rows written twice");
    rc = db_results_open(&r, dir, 1, err, sizeof err);
    int fixed = rc == 0 && r.n_done == 3;
    for (int t = 0; t < DB_TABLE_COUNT; t++)
        for (int i = 0; i < 3; i++) fixed &= rows_of(dir, (db_table)t, id[i]) == cnt[t][i];
    tap_ok(fixed, "resume keeps one copy of each point in every table (%s)", err);
    db_read_file(done_path, &done, &dlen, err, sizeof err);
    int lines = 0;
    for (size_t i = 0; i < dlen; i++) lines += done[i] == '\n';
    tap_ok(lines == 3 && !memchr(done, '\r', dlen) && !strstr(done, " \n"),
           "points.done read through CRLF and blanks, each point once again");
    free(done);
    db_results_close(&r);

    /* a summary row deleted while points.done still lists its point: the point runs again
     * (count_done does not count it; resume takes it off points.done and drops its other rows) */
    {
        char sum_path[1200], *text = NULL;
        size_t len;
        db_path_join(sum_path, sizeof sum_path, dir, db_table_file[DB_TABLE_SUMMARY]);
        if (db_read_file(sum_path, &text, &len, err, sizeof err) != 0 || !text) {
            tap_diag("%s", err);
            return 1;
        }
        FILE *sf = fopen(sum_path, "w");
        for (char *l = text, *e; sf && (e = strchr(l, '\n')); l = e + 1) {
            *e = 0;
            int keep = !strstr(l, id[1]);
            *e = '\n';
            if (keep) fwrite(l, 1, (size_t)(e - l) + 1, sf);
        }
        if (sf) fclose(sf);
        free(text);
        db_point_key keys[3] = {p[0].key, p[1].key, p[2].key};
        int cnt_done = -1;
        rc = db_results_count_done(dir, keys, 3, &cnt_done, err, sizeof err);
        tap_ok(rc == 0 && cnt_done == 2, "a listed point without its summary row is not counted done (%d)", cnt_done);
        rc = db_results_open(&r, dir, 1, err, sizeof err);
        tap_ok(rc == 0 && r.n_done == 2 && !db_results_is_done(&r, &p[1].key) && db_results_is_done(&r, &p[2].key) &&
                   rows_of(dir, DB_TABLE_REQUESTS, id[1]) == 0 && rows_of(dir, DB_TABLE_REQUESTS, id[2]) == 8,
               "resume takes it off points.done and drops its other rows: it runs again (%s)", err);
        rc = db_results_append(&r, &m, &p[1], &s[1], err, sizeof err);
        tap_ok(rc == 0 && rows_of(dir, DB_TABLE_SUMMARY, id[1]) == 1, "and is written once more (%s)", err);
        db_results_close(&r);
    }

    /* a fresh run whose first point cannot be written leaves nothing behind */
    {
        char fresh[400], top[400];
        snprintf(top, sizeof top, "%s/x", base);
        snprintf(fresh, sizeof fresh, "%s/x/y/run", base);
        rc = db_results_open(&r, fresh, 0, err, sizeof err);
        db_results_write_meta(&r, &m, err, sizeof err);
        struct rlimit old, tiny = {1, 1};
        getrlimit(RLIMIT_FSIZE, &old);
        tiny.rlim_max = old.rlim_max;
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &tiny);
        rc = db_results_append(&r, &m, &p[0], &s[0], err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &old);
        tap_ok(rc == DB_ERUNTIME && stat(top, &st) != 0,
               "a first point that fails to write leaves no directory (%s)", err);
        db_results_close(&r);
    }

    /* a default directory (no --out): a run of the same second makes DIR and probes it between
     * this run's check and its first point; this run passes and takes DIR-2 */
    {
        char def_dir[400], def2[420], f[500];
        snprintf(def_dir, sizeof def_dir, "%s/default/20261205-121532", base);
        tap_ok(db_results_check_default(def_dir, err, sizeof err) == 0,
               "a default directory's parent is creatable (%s)", err);
        rc = db_results_open_default(&r, def_dir, err, sizeof err);
        db_results_write_meta(&r, &m, err, sizeof err);
        snprintf(f, sizeof f, "%s/default", base);
        mkdir(f, 0777);
        mkdir(def_dir, 0777); /* the other run's first point, and its write probe */
        const char *theirs[] = {"points.done", ".write-test.1"};
        for (int i = 0; i < 2; i++) {
            snprintf(f, sizeof f, "%s/%s", def_dir, theirs[i]);
            FILE *t = fopen(f, "w");
            if (t) fclose(t);
        }
        tap_ok(rc == 0 && db_results_check_default(def_dir, err, sizeof err) == 0,
               "a default directory another run made meanwhile is no reason to refuse (%s)", err);
        rc = db_results_append(&r, &m, &p[0], &s[0], err, sizeof err);
        snprintf(def2, sizeof def2, "%s-2", def_dir);
        tap_ok(rc == 0 && !strcmp(r.dir, def2) && rows_of(def2, DB_TABLE_SUMMARY, NULL) == 1 &&
                   rows_of(def_dir, DB_TABLE_SUMMARY, NULL) < 0,
               "its first point takes %s, the other run's directory is left alone (%s)", r.dir, err);
        db_results_close(&r);
        snprintf(f, sizeof f, "%s/file", base);
        FILE *t = fopen(f, "w");
        if (t) fclose(t);
        snprintf(def_dir, sizeof def_dir, "%s/file/20261205-121532", base);
        tap_ok(db_results_check_default(def_dir, err, sizeof err) == DB_EINPUT && strstr(err, "not a directory"),
               "a default directory under a file: DB_EINPUT: %s", err);
    }

    for (int i = 0; i < 3; i++) db_point_raw_free(&p[i]);
    db_run_meta_free(&m);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0) tap_diag("could not remove %s", base);
    return tap_done();
}
