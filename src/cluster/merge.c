/* merge.c — one results directory from several of the same sweep (rules in merge.h). */
#include "cluster/merge.h"
#include "cluster/shard.h"
#include "base/csv_io.h"
#include "base/util.h"
#include "report/report_csv.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#define NT 4
static const char *const tables[NT] = {"summary.csv", "acceptance.csv", "histogram.csv", "requests.csv"};

typedef struct {
    const char *dir;
    cJSON *meta;        /* whole meta.json */
    const cJSON *sweep; /* meta.sweep */
    const cJSON *shard; /* meta.shard or NULL */
    char host[256], hash[65];
    char *done_text;    /* points.done, split in place */
    char **done;        /* its ids, sorted */
    int n_done;
    char **done_order;  /* the same in file order */
    db_csv_doc tab[NT];
} source;

typedef struct {
    const char *id;
    int src;   /* -1: a point of the partition */
    long order;
    int shard; /* its shard in the partition, -1 when unknown */
} entry;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : x->src - y->src;
}

static int cmp_order(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int has_id(char *const *sorted, int n, const char *id)
{
    return n > 0 && bsearch(&id, sorted, (size_t)n, sizeof *sorted, cmp_str) != NULL;
}

static int read_meta(source *s, char *err, size_t errlen)
{
    char path[1200], *text;
    size_t len;
    if (db_path_join(path, sizeof path, s->dir, "meta.json"))
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", s->dir);
    int rc = db_read_file(path, &text, &len, err, errlen), oom;
    if (rc == DB_ERUNTIME) return rc; /* out of memory reading it, named */
    if (rc) return db_fail(err, errlen, DB_EINPUT, "%s: no readable meta.json (not a results directory)", s->dir);
    s->meta = db_json_parse(text, strlen(text), &oom);
    free(text);
    if (oom) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory parsing it", path);
    /* a merged directory's rows carry a host column already, and its meta.json no machine:
     * merging it again would add a second host column and lose where its rows came from */
    if (cJSON_GetObjectItemCaseSensitive(s->meta, "merged_sweep_hash"))
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: a merged directory (its meta.json lists its sources): merge those directories instead", s->dir);
    s->sweep = cJSON_GetObjectItemCaseSensitive(s->meta, "sweep");
    if (!cJSON_IsObject(s->sweep)) return db_fail(err, errlen, DB_EINPUT, "%s: not valid JSON or no recorded sweep", path);
    char why[600];
    if (db_sweep_hash_json(s->sweep, s->hash, why, sizeof why)) return db_fail(err, errlen, DB_EINPUT, "%s: %s", path, why);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s->meta, "machine");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(m, "hostname");
    snprintf(s->host, sizeof s->host, "%s", cJSON_IsString(h) ? h->valuestring : "");
    s->shard = cJSON_GetObjectItemCaseSensitive(s->meta, "shard");
    if (s->shard) {
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(s->shard, "sweep_hash");
        const cJSON *pts = cJSON_GetObjectItemCaseSensitive(s->shard, "points");
        if (!cJSON_IsString(sh) || strcmp(sh->valuestring, s->hash) != 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: shard.sweep_hash does not match its recorded sweep", path);
        const cJSON *p;
        int bad = !cJSON_IsArray(pts);
        cJSON_ArrayForEach(p, pts) bad |= !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "point_id"));
        if (bad) return db_fail(err, errlen, DB_EINPUT, "%s: shard.points is not a list of point ids", path);
    }
    return DB_OK;
}

static int read_done(source *s, char *err, size_t errlen)
{
    char path[1200];
    size_t len;
    db_path_join(path, sizeof path, s->dir, "points.done");
    if (access(path, F_OK) != 0) return DB_OK; /* no point completed */
    int rc = db_read_file(path, &s->done_text, &len, err, errlen); /* out of memory: DB_ERUNTIME */
    if (rc) return rc;
    if (len && s->done_text[len - 1] != '\n')
        return db_fail(err, errlen, DB_EINPUT, "%s: torn file: last line cut short (finish it with run --resume %s)",
                       path, s->dir);
    for (size_t i = 0; i < len; i++) s->n_done += s->done_text[i] == '\n';
    s->done = db_calloc((size_t)s->n_done + 1, sizeof *s->done);
    s->done_order = db_calloc((size_t)s->n_done + 1, sizeof *s->done_order);
    if (!s->done || !s->done_order)
        return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing its %d points", path, s->n_done);
    int n = 0;
    for (char *l = s->done_text, *e; (e = strchr(l, '\n')); l = e + 1) {
        *e = 0;
        if (!*l) return db_fail(err, errlen, DB_EINPUT, "%s: torn file: an empty line", path);
        s->done[n] = s->done_order[n] = l;
        n++;
    }
    qsort(s->done, (size_t)n, sizeof *s->done, cmp_str);
    for (int i = 1; i < n; i++)
        if (!strcmp(s->done[i], s->done[i - 1]))
            return db_fail(err, errlen, DB_EINPUT, "%s: torn file: point %s listed twice", path, s->done[i]);
    return DB_OK;
}

/* the columns that, with point_id, name one row of each table (summary.csv: point_id alone) */
static const char *const row_key[NT][3] = {{NULL}, {"position", NULL}, {"accept_length", NULL},
                                            {"prompt_index", "repetition", NULL}};

/* "point_id\x1f<key>\x1f<key>" of a record, for the duplicate check */
static char *row_name(const db_csv_record *rec, int pc, const int *kc, int nk)
{
    size_t len = strlen(rec->field[pc]) + 1;
    for (int k = 0; k < nk; k++) len += strlen(rec->field[kc[k]]) + 1;
    char *n = db_malloc(len);
    if (!n) return NULL;
    char *p = n + sprintf(n, "%s", rec->field[pc]);
    for (int k = 0; k < nk; k++) p += sprintf(p, "\x1f%s", rec->field[kc[k]]);
    return n;
}

/* every row of table t (t > 0) once: a point's rows appended twice (two runs writing the
 * directory at once) would pass into the output doubled */
static int check_rows_once(const source *s, int t, const char *path, char *err, size_t errlen)
{
    const db_csv_doc *d = &s->tab[t];
    int pc = db_csv_col(d, "point_id"), kc[3], nk = 0, rc = DB_OK;
    for (; row_key[t][nk]; nk++)
        if ((kc[nk] = db_csv_col(d, row_key[t][nk])) < 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: no %s column", path, row_key[t][nk]);
    int n = d->n - 1;
    char **names = db_calloc((size_t)n + 1, sizeof *names);
    if (!names) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory checking its %d rows", path, n);
    for (int r = 0; r < n && !rc; r++)
        if (!(names[r] = row_name(&d->rec[r + 1], pc, kc, nk)))
            rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory checking its %d rows", path, n);
    if (!rc) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int r = 1; r < n && !rc; r++)
        if (!strcmp(names[r], names[r - 1])) {
            char *sep = strchr(names[r], '\x1f');
            if (sep) *sep = 0;
            rc = db_fail(err, errlen, DB_EINPUT, "%s: torn file: a row of point %s twice (its rows written twice: run --resume %s repairs it)",
                         path, names[r], s->dir);
        }
    for (int r = 0; r < n; r++) free(names[r]);
    free(names);
    return rc;
}

/* one table of s: whole records of completed points under one header; summary.csv one row per
 * point, the other tables each row once */
static int read_table(source *s, int t, const source *first, const char **schema, char *err, size_t errlen)
{
    char path[1200];
    db_path_join(path, sizeof path, s->dir, tables[t]);
    if (access(path, F_OK) != 0) {
        if (s->n_done) return db_fail(err, errlen, DB_EINPUT, "%s: missing (points.done lists %d points)", path, s->n_done);
        return DB_OK;
    }
    db_csv_doc *d = &s->tab[t];
    int rc = db_csv_read(path, d, err, errlen);
    if (rc == DB_ERUNTIME) return rc; /* out of memory reading or parsing it, named */
    if (rc) return db_fail(err, errlen, DB_EINPUT, "%s: torn file: does not parse as CSV", path);
    if (d->n < 1 || d->rec[0].n < 2 || strcmp(d->rec[0].field[0], "schema_version") != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: no header", path);
    int pc = db_csv_col(d, "point_id");
    if (pc < 0) return db_fail(err, errlen, DB_EINPUT, "%s: no point_id column", path);
    if (first && first->tab[t].n) { /* one schema */
        const db_csv_record *a = &first->tab[t].rec[0], *b = &d->rec[0];
        int same = a->n == b->n;
        for (int i = 0; same && i < a->n; i++) same = !strcmp(a->field[i], b->field[i]);
        if (!same) return db_fail(err, errlen, DB_EINPUT, "%s: header differs from %s's (another schema)", path, first->dir);
    }
    char **ids = t == 0 ? db_calloc((size_t)d->n, sizeof *ids) : NULL;
    int nid = 0;
    if (t == 0 && !ids) rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing its %d rows", path, d->n - 1);
    for (int r = 1; r < d->n && !rc; r++) {
        const db_csv_record *rec = &d->rec[r];
        if (!rec->complete) rc = db_fail(err, errlen, DB_EINPUT, "%s: torn file: record %d cut short", path, r + 1);
        else if (rec->n != d->rec[0].n)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: torn file: record %d has %d fields, the header %d", path, r + 1,
                         rec->n, d->rec[0].n);
        else if (!has_id(s->done, s->n_done, rec->field[pc]))
            rc = db_fail(err, errlen, DB_EINPUT, "%s: record %d belongs to %s, a point points.done does not list "
                         "(an unfinished point: run --resume %s first)", path, r + 1, rec->field[pc], s->dir);
        else if (*schema && strcmp(*schema, rec->field[0]) != 0)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: schema_version %s, other rows %s", path, rec->field[0], *schema);
        if (!rc) *schema = rec->field[0];
        if (!rc && ids) ids[nid++] = rec->field[pc];
    }
    if (!rc && ids) { /* summary.csv: exactly the completed points, once each */
        qsort(ids, (size_t)nid, sizeof *ids, cmp_str);
        int same = nid == s->n_done;
        for (int i = 0; same && i < nid; i++) same = !strcmp(ids[i], s->done[i]);
        if (!same) rc = db_fail(err, errlen, DB_EINPUT, "%s: torn file: %d rows for the %d points of points.done", path, nid, s->n_done);
    }
    free(ids);
    if (!rc && t > 0) rc = check_rows_once(s, t, path, err, errlen);
    return rc;
}

/* the keys where two recorded sweeps differ, for the refusal */
static void sweep_diff(const cJSON *a, const cJSON *b, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a)
    {
        if (!strcmp(e->string, "output") || !strcmp(e->string, "threads")) continue;
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(b, e->string);
        if (f && cJSON_IsString(e) && cJSON_IsString(f) && !strcmp(e->valuestring, f->valuestring)) continue;
        if (o < n)
            o += (size_t)snprintf(buf + o, n - o, "%s%s ('%s' vs '%s')", o ? ", " : "", e->string,
                                  cJSON_IsString(e) ? e->valuestring : "?", f && cJSON_IsString(f) ? f->valuestring : "");
    }
}

/* every id and its place: the partition's points (src -1), then each source's completed ones */
static int collect(source *s, int n, entry **out, int *n_out, const cJSON **part, char *err, size_t errlen)
{
    *part = NULL;
    for (int i = 0; i < n && !*part; i++)
        if (s[i].shard) *part = cJSON_GetObjectItemCaseSensitive(s[i].shard, "points");
    int np = *part ? cJSON_GetArraySize(*part) : 0, total = np;
    for (int i = 0; i < n; i++) {
        total += s[i].n_done;
        const cJSON *p = s[i].shard ? cJSON_GetObjectItemCaseSensitive(s[i].shard, "points") : NULL;
        int same = !p || cJSON_GetArraySize(p) == np;
        for (int j = 0; p && same && j < np; j++)
            same = !strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(p, j), "point_id")->valuestring,
                           cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(*part, j), "point_id")->valuestring);
        if (!same) return db_fail(err, errlen, DB_EINPUT, "%s: meta.json lists other points for the sweep than the first shard's", s[i].dir);
    }
    entry *e = db_calloc((size_t)total + 1, sizeof *e);
    if (!e) return db_fail(err, errlen, DB_ERUNTIME, "out of memory listing the %d point ids of %d directories", total, n);
    int k = 0;
    for (int j = 0; j < np; j++, k++)
    {
        const cJSON *p = cJSON_GetArrayItem(*part, j), *sh = cJSON_GetObjectItemCaseSensitive(p, "shard");
        e[k] = (entry){cJSON_GetObjectItemCaseSensitive(p, "point_id")->valuestring, -1, j, cJSON_IsNumber(sh) ? sh->valueint : -1};
    }
    long seq = np;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < s[i].n_done; j++, k++) e[k] = (entry){s[i].done_order[j], i, seq++, -1};
    *out = e;
    *n_out = total;
    return DB_OK;
}

/* the completed points in sweep order (*pts), the missing ones named in miss */
static int reconcile(source *s, entry *e, int ne, int have_part, entry *pts, int *npts, entry *mis, char *miss,
                     size_t missn, int *n_miss, char *err, size_t errlen)
{
    qsort(e, (size_t)ne, sizeof *e, cmp_entry);
    size_t mo = 0;
    *npts = *n_miss = 0;
    miss[0] = 0;
    for (int i = 0, j; i < ne; i = j) {
        for (j = i + 1; j < ne && !strcmp(e[j].id, e[i].id); j++) {
        }
        int in_part = e[i].src < 0, first = in_part ? i + 1 : i, copies = j - first;
        if (copies > 1)
            return db_fail(err, errlen, DB_EINPUT, "point %s completed in both %s and %s", e[i].id, s[e[first].src].dir,
                           s[e[first + 1].src].dir);
        if (have_part && !in_part)
            return db_fail(err, errlen, DB_EINPUT, "%s: point %s is not a point of the sweep's partition", s[e[i].src].dir, e[i].id);
        if (copies == 0) {
            mis[(*n_miss)++] = e[i];
            continue;
            continue;
        }
        pts[(*npts)++] = (entry){e[first].id, e[first].src, e[i].order, e[i].shard};
    }
    qsort(pts, (size_t)*npts, sizeof *pts, cmp_order);
    qsort(mis, (size_t)*n_miss, sizeof *mis, cmp_order);
    for (int i = 0; i < *n_miss && mo < missn; i++)
        mo += (size_t)snprintf(miss + mo, missn - mo, mis[i].shard >= 0 ? "%s%s (shard %d)" : "%s%s", i ? ", " : "",
                               mis[i].id, mis[i].shard);
    return DB_OK;
}

typedef struct {
    long order;
    int src, rec;
} row_ref;

static int cmp_row(const void *a, const void *b)
{
    const row_ref *x = a, *y = b;
    if (x->order != y->order) return x->order < y->order ? -1 : 1;
    return x->rec - y->rec;
}

/* pts sorted by id, for the row lookup */
static long order_of(const entry *by_id, int n, const char *id)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2, c = strcmp(by_id[m].id, id);
        if (!c) return by_id[m].order;
        if (c < 0) lo = m + 1;
        else hi = m - 1;
    }
    return -1;
}

static int write_record(FILE *f, const db_csv_record *r, const char *host)
{
    int bad = 0;
    for (int i = 0; i < r->n; i++) bad |= db_csv_field(f, r->field[i], i == 0);
    bad |= db_csv_field(f, host, 0);
    return bad | (fputc('\n', f) == EOF);
}

static int write_table(const char *tmp, int t, source *s, int n, const entry *pts, int npts, char *err, size_t errlen)
{
    int first = -1, nrows = 0;
    for (int i = 0; i < n; i++)
        if (s[i].tab[t].n) {
            if (first < 0) first = i;
            nrows += s[i].tab[t].n - 1;
        }
    if (first < 0) return DB_OK;
    entry *by_id = db_malloc(sizeof *by_id * (size_t)(npts + 1));
    row_ref *rows = db_malloc(sizeof *rows * (size_t)(nrows + 1));
    char path[1200];
    db_path_join(path, sizeof path, tmp, tables[t]);
    FILE *f = by_id && rows ? fopen(path, "w") : NULL;
    int rc = !by_id || !rows ? db_fail(err, errlen, DB_ERUNTIME, "out of memory ordering the %d rows of %s", nrows, tables[t])
             : f             ? DB_OK
                             : db_fail(err, errlen, DB_EINPUT, "%s: cannot write", path);
    if (!rc) {
        memcpy(by_id, pts, sizeof *by_id * (size_t)npts);
        qsort(by_id, (size_t)npts, sizeof *by_id, cmp_entry);
        int k = 0;
        for (int i = 0; i < n; i++) {
            int pc = s[i].tab[t].n ? db_csv_col(&s[i].tab[t], "point_id") : 0;
            for (int r = 1; r < s[i].tab[t].n; r++)
                rows[k++] = (row_ref){order_of(by_id, npts, s[i].tab[t].rec[r].field[pc]), i, r};
        }
        qsort(rows, (size_t)k, sizeof *rows, cmp_row);
        db_csv_record hdr = s[first].tab[t].rec[0];
        int bad = write_record(f, &hdr, "host");
        for (int r = 0; r < k; r++) bad |= write_record(f, &s[rows[r].src].tab[t].rec[rows[r].rec], s[rows[r].src].host);
        if (bad || ferror(f)) rc = db_fail(err, errlen, DB_EINPUT, "%s: write failed", path);
    }
    if (f && fclose(f) != 0 && !rc) rc = db_fail(err, errlen, DB_EINPUT, "%s: write failed", path);
    free(by_id), free(rows);
    return rc;
}

static int write_text(const char *tmp, const char *name, const char *text, char *err, size_t errlen)
{
    char path[1200];
    db_path_join(path, sizeof path, tmp, name);
    FILE *f = fopen(path, "w");
    int bad = !f || fputs(text, f) == EOF;
    if (f) bad |= fclose(f) != 0;
    return bad ? db_fail(err, errlen, DB_EINPUT, "%s: cannot write", path) : DB_OK;
}

/* every cJSON result checked (util.h): out of memory fails the merge rather than leaving a
 * field out of meta.json */
static int write_meta(const char *tmp, source *s, int n, int npts, const entry *mis, int n_miss, char *err,
                      size_t errlen)
{
    int oom = 0;
    cJSON *m = db_json_ok(&oom, cJSON_CreateObject());
    db_json_ok(&oom, cJSON_AddStringToObject(m, "merged_sweep_hash", s[0].hash));
    db_json_add(&oom, m, "sweep", cJSON_Duplicate(s[0].sweep, 1));
    db_json_ok(&oom, cJSON_AddNumberToObject(m, "points_merged", npts));
    cJSON *missing = db_json_ok(&oom, cJSON_AddArrayToObject(m, "missing_points"));
    for (int i = 0; i < n_miss && !oom; i++) db_json_add(&oom, missing, NULL, cJSON_CreateString(mis[i].id));
    cJSON *srcs = db_json_ok(&oom, cJSON_AddArrayToObject(m, "sources"));
    for (int i = 0; i < n && !oom; i++) {
        cJSON *o = cJSON_CreateObject();
        db_json_add(&oom, srcs, NULL, o);
        if (oom) break;
        char abs[PATH_MAX];
        db_json_ok(&oom, cJSON_AddStringToObject(o, "dir", realpath(s[i].dir, abs) ? abs : s[i].dir));
        db_json_ok(&oom, cJSON_AddStringToObject(o, "host", s[i].host));
        if (s[i].shard)
            db_json_ok(&oom, cJSON_AddNumberToObject(o, "shard", cJSON_GetObjectItemCaseSensitive(s[i].shard, "index")->valuedouble));
        db_json_ok(&oom, cJSON_AddNumberToObject(o, "points", s[i].n_done));
        db_json_add(&oom, o, "meta", cJSON_Duplicate(s[i].meta, 1));
    }
    char *text = oom ? NULL : cJSON_Print(m);
    int rc = text ? write_text(tmp, "meta.json", text, err, errlen)
                  : db_fail(err, errlen, DB_ERUNTIME, "out of memory building the merged meta.json");
    free(text);
    cJSON_Delete(m);
    return rc;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1200];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && db_path_join(p, sizeof p, dir, e->d_name) == 0) unlink(p);
    if (d) closedir(d);
    rmdir(dir);
}

/* OUT: absent, or an empty directory */
static int check_out(const char *out, char *err, size_t errlen)
{
    struct stat st;
    if (stat(out, &st) != 0) return DB_OK;
    DIR *d = S_ISDIR(st.st_mode) ? opendir(out) : NULL;
    int used = !d;
    struct dirent *e;
    while (d && (e = readdir(d))) used |= strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return used ? db_fail(err, errlen, DB_EINPUT, "%s: exists and is not an empty directory", out) : DB_OK;
}

/* the sweep asked for JSON Lines twins (run --format-files csv,json): each merged table's rows
 * as JSON Lines too, converted from the merged CSV (report_csv.h) */
static int write_jsonl(const char *tmp, const source *s, char *err, size_t errlen)
{
    const cJSON *ff = cJSON_GetObjectItemCaseSensitive(s[0].sweep, "format_files");
    if (!cJSON_IsString(ff) || strcmp(ff->valuestring, "csv,json")) return DB_OK;
    int rc = DB_OK;
    for (int t = 0; t < NT && !rc; t++) {
        char path[1200], jpath[1200];
        db_path_join(path, sizeof path, tmp, tables[t]);
        db_path_join(jpath, sizeof jpath, tmp, db_table_jsonl_file[t]);
        db_csv_doc d = {0};
        struct stat st;
        if (stat(path, &st) == 0 && (rc = db_csv_read(path, &d, err, errlen))) break;
        FILE *f = fopen(jpath, "w");
        int bad = !f || db_table_csv_jsonl((db_table)t, &d, NULL, f) != 0;
        if (f && fclose(f) != 0) bad = 1;
        db_csv_doc_free(&d);
        if (bad) rc = db_fail(err, errlen, DB_EINPUT, "%s: write failed", jpath);
    }
    return rc;
}

static int write_out(const char *out, source *s, int n, const entry *pts, int npts, const entry *mis, int n_miss,
                     char *err, size_t errlen)
{
    char tmp[1200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", out) >= (int)sizeof tmp || !mkdtemp(tmp))
        return db_fail(err, errlen, DB_EINPUT, "%s: cannot make a directory beside it: %s", out, strerror(errno));
    int rc = DB_OK;
    for (int t = 0; t < NT && !rc; t++) rc = write_table(tmp, t, s, n, pts, npts, err, errlen);
    if (!rc) rc = write_jsonl(tmp, s, err, errlen);
    size_t len = 1;
    for (int i = 0; i < npts; i++) len += strlen(pts[i].id) + 1;
    char *done = db_malloc(len), *p = done;
    if (!rc && !done) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting points.done (%d points)", npts);
    for (int i = 0; i < npts && !rc; i++) p += sprintf(p, "%s\n", pts[i].id);
    if (done) *p = 0;
    if (!rc) rc = write_text(tmp, "points.done", done, err, errlen);
    free(done);
    if (!rc) rc = write_meta(tmp, s, n, npts, mis, n_miss, err, errlen);
    if (!rc && chmod(tmp, 0777 & ~(mode_t)0022) != 0) rc = db_fail(err, errlen, DB_EINPUT, "%s: chmod failed", tmp);
    if (!rc && rename(tmp, out) != 0) rc = db_fail(err, errlen, DB_EINPUT, "%s: cannot rename into place: %s", out, strerror(errno));
    if (rc) remove_tree(tmp);
    return rc;
}

int db_merge(const char *out, char *const *dirs, int n, int allow_partial, db_merge_result *res, char *err,
             size_t errlen)
{
    source *s = db_calloc((size_t)n, sizeof *s);
    entry *e = NULL, *pts = NULL, *mis = NULL;
    const cJSON *part;
    const char *schema[NT] = {0};
    char miss[1600];
    int rc = s ? check_out(out, err, errlen) : db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating %d sources", n),
        ne = 0, npts = 0, n_miss = 0;
    for (int i = 0; i < n && !rc; i++) {
        s[i].dir = dirs[i];
        rc = read_meta(&s[i], err, errlen);
        if (!rc && strcmp(s[i].hash, s[0].hash) != 0) {
            char diff[800];
            sweep_diff(s[0].sweep, s[i].sweep, diff, sizeof diff);
            rc = db_fail(err, errlen, DB_EINPUT, "%s: another sweep than %s (%s)", dirs[i], dirs[0], diff);
        }
        if (!rc) rc = read_done(&s[i], err, errlen);
        for (int t = 0; t < NT && !rc; t++) rc = read_table(&s[i], t, i ? &s[0] : NULL, &schema[t], err, errlen);
    }
    if (!rc) rc = collect(s, n, &e, &ne, &part, err, errlen);
    if (!rc && (!(pts = db_malloc(sizeof *pts * (size_t)(ne + 1))) || !(mis = db_malloc(sizeof *mis * (size_t)(ne + 1)))))
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory sorting %d point ids", ne);
    if (!rc) rc = reconcile(s, e, ne, part != NULL, pts, &npts, mis, miss, sizeof miss, &n_miss, err, errlen);
    if (!rc && n_miss && !allow_partial)
        rc = db_fail(err, errlen, DB_ERUNTIME, "%d point%s of the sweep missing (no directory completed %s): %s; "
                     "add their shard's directory, or --allow-partial", n_miss, n_miss > 1 ? "s" : "",
                     n_miss > 1 ? "them" : "it", miss);
    if (!rc) rc = write_out(out, s, n, pts, npts, mis, n_miss, err, errlen);
    if (!rc && res) *res = (db_merge_result){npts, n_miss, n};
    if (!rc && n_miss) fprintf(stderr, "warning: merge: %d points missing: %s\n", n_miss, miss);
    for (int i = 0; s && i < n; i++) {
        cJSON_Delete(s[i].meta);
        free(s[i].done_text), free(s[i].done), free(s[i].done_order);
        for (int t = 0; t < NT; t++) db_csv_doc_free(&s[i].tab[t]);
    }
    free(s), free(e), free(pts), free(mis);
    return rc;
}
