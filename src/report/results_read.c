/* results_read.c — a results directory read back for `compare` (results_read.h). */
#include "report/results_read.h"
#include "base/util.h"
#include "report/report_csv.h"
#include "result/run_meta.h"
#include "result/timing.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* strict numbers: the whole field, finite; "" is NAN where `empty_ok` */
static int num(const char *s, int empty_ok, double *v)
{
    char *end;
    if (!s[0]) {
        *v = NAN;
        return empty_ok ? 0 : -1;
    }
    errno = 0;
    *v = strtod(s, &end);
    return *end || errno || !isfinite(*v) ? -1 : 0;
}

static int inum(const char *s, long lo, long hi, long *v)
{
    char *end;
    errno = 0;
    *v = strtol(s, &end, 10);
    return !s[0] || *end || errno || *v < lo || *v > hi ? -1 : 0;
}

const char *db_results_read_field(const db_results_read *r, int i, const char *name)
{
    int c = db_csv_col(&r->summary, name);
    const db_csv_record *q = &r->summary.rec[r->pt[i].rec];
    return c < 0 || c >= q->n ? NULL : q->field[c];
}

/* ids listed in DIR/points.done, sorted (strcmp) for bsearch; *n = -1 when there is no file */
static int read_done(const char *dir, char ***ids, int *n, char **text, char *err, size_t errlen)
{
    char path[1200];
    struct stat st;
    *ids = NULL, *n = -1, *text = NULL;
    if (db_path_join(path, sizeof path, dir, "points.done") != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    if (stat(path, &st) != 0) return DB_OK;
    size_t len;
    int rc = db_read_file(path, text, &len, err, errlen);
    if (rc) return rc;
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += (*text)[i] == '\n';
    *ids = db_malloc(sizeof **ids * (size_t)(lines + 1));
    if (!*ids) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory", path);
    *n = 0;
    /* a last line without its newline was cut by a crash: not a completed point */
    for (size_t s = 0, i = 0; i < len; i++)
        if ((*text)[i] == '\n') {
            size_t e = i;
            while (e > s && ((*text)[e - 1] == '\r' || (*text)[e - 1] == ' ')) e--;
            (*text)[e] = 0;
            if (e > s) (*ids)[(*n)++] = *text + s;
            s = i + 1;
        }
    return DB_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the points sorted by point_id, for finding a request row's point */
typedef struct {
    const char *id;
    int i;
} id_ix;

static int cmp_ix(const void *a, const void *b) { return strcmp(((const id_ix *)a)->id, ((const id_ix *)b)->id); }

void db_results_read_free(db_results_read *r)
{
    for (int i = 0; i < r->n; i++) {
        db_point_raw_free(&r->pt[i].raw);
        free(r->pt[i].accept);
    }
    free(r->pt);
    r->pt = NULL;
    r->n = 0;
    db_csv_doc_free(&r->summary);
}

/* summary.csv: the completed points' keys and figures */
static int read_summary(db_results_read *r, char **done, int n_done, char *err, size_t errlen)
{
    char path[1200];
    db_path_join(path, sizeof path, r->dir, db_table_file[DB_TABLE_SUMMARY]);
    int rc = db_csv_read(path, &r->summary, err, errlen);
    if (rc == DB_EINPUT && access(path, F_OK) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s holds no dflash-bench results (no %s)", r->dir,
                       db_table_file[DB_TABLE_SUMMARY]);
    if (rc) return rc;
    const db_csv_doc *d = &r->summary;
    static const char *const need[] = {"schema_version", "point_id", "n_prompts", "distinct_prompts",
                                       "repetitions", "throughput_tok_s", "speedup", "stable", "tau"};
    int c[9];
    for (int j = 0; j < 9; j++)
        if ((c[j] = d->n ? db_csv_col(d, need[j]) : -1) < 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: no column %s (not a dflash-bench summary.csv)", path, need[j]);
    for (int a = 0; a < db_point_n_axes; a++) r->has_axis[a] = db_csv_col(d, db_point_axes[a].column) >= 0;
    r->pt = db_calloc((size_t)(d->n > 1 ? d->n - 1 : 1), sizeof *r->pt);
    if (!r->pt) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory", path);
    r->schema_version = -1;
    for (int i = 1; i < d->n; i++) {
        const db_csv_record *q = &d->rec[i];
        if (!q->complete || q->n != d->rec[0].n) {
            if (!q->complete && i == d->n - 1) continue; /* a crash cut it: its point is not done */
            return db_fail(err, errlen, DB_EINPUT, "%s: record %d has %d fields, the header %d", path, i + 1, q->n, d->rec[0].n);
        }
        const char *id = q->field[c[1]];
        if (n_done >= 0 && !bsearch(&id, done, (size_t)n_done, sizeof *done, cmp_str)) continue;
        db_read_point *p = &r->pt[r->n];
        long sv, np, nd, rp;
        double st;
        if (inum(q->field[c[0]], 1, INT_MAX, &sv) || inum(q->field[c[2]], 1, 1 << 24, &np) ||
            inum(q->field[c[3]], 0, np, &nd) || inum(q->field[c[4]], 1, 1 << 20, &rp) ||
            num(q->field[c[5]], 0, &p->throughput) || num(q->field[c[6]], 1, &p->speedup) ||
            num(q->field[c[8]], 1, &p->tau) || num(q->field[c[7]], 1, &st) || (isfinite(st) && st != 0 && st != 1))
            return db_fail(err, errlen, DB_EINPUT, "%s: point %s: a malformed number among schema_version, "
                           "n_prompts, distinct_prompts, repetitions, throughput_tok_s, speedup, stable, tau", path, id);
        if (sv > DB_SCHEMA_VERSION)
            return db_fail(err, errlen, DB_EINPUT, "%s: schema_version %ld is newer than this dflash-bench reads "
                           "(%d): compare with the version that wrote it", path, sv, DB_SCHEMA_VERSION);
        if (r->schema_version < 0) r->schema_version = (int)sv;
        p->stable = isfinite(st) ? (int)st : -1;
        for (int a = 0; a < db_point_n_axes; a++) {
            int col = db_csv_col(d, db_point_axes[a].column);
            if (col >= 0 && db_point_axis_set(&p->key, &db_point_axes[a], q->field[col]) != 0)
                return db_fail(err, errlen, DB_EINPUT, "%s: point %s: %s '%s' is not a valid value", path, id,
                               db_point_axes[a].column, q->field[col]);
        }
        for (int k = 0; k < r->n; k++)
            if (!strcmp(d->rec[r->pt[k].rec].field[c[1]], id))
                return db_fail(err, errlen, DB_EINPUT, "%s: point %s has two rows", path, id);
        p->rec = i;
        p->raw.n_prompts = (int)np;
        p->raw.n_distinct = (int)nd;
        p->raw.repetitions = (int)rp;
        r->n++;
    }
    return DB_OK;
}

/* requests.csv: each point's rounds and requests, every one present exactly once */
static int read_requests(db_results_read *r, char *err, size_t errlen)
{
    char path[1200];
    db_path_join(path, sizeof path, r->dir, db_table_file[DB_TABLE_REQUESTS]);
    db_csv_doc d;
    int rc = db_csv_read(path, &d, err, errlen);
    if (rc) return rc;
    enum { ID, PI, REP, OT, WALL, TA, TE, NCOL };
    static const char *const names[NCOL] = {"point_id", "prompt_index", "repetition", "output_tokens",
                                            "rep_wall_s", "t_admitted_ms", "t_finished_ms"};
    int c[NCOL], pid = db_csv_col(&r->summary, "point_id");
    for (int j = 0; j < NCOL; j++)
        if ((c[j] = d.n ? db_csv_col(&d, names[j]) : -1) < 0) {
            db_csv_doc_free(&d);
            return db_fail(err, errlen, DB_EINPUT, "%s: no column %s", path, names[j]);
        }
    id_ix *ix = db_malloc(sizeof *ix * (size_t)(r->n ? r->n : 1));
    unsigned char **seen = db_calloc((size_t)(r->n ? r->n : 1), sizeof *seen);
    rc = !ix || !seen ? db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory", path) : DB_OK;
    for (int i = 0; !rc && i < r->n; i++) {
        db_point_raw *p = &r->pt[i].raw;
        size_t k = (size_t)p->repetitions * (size_t)p->n_prompts;
        ix[i] = (id_ix){r->summary.rec[r->pt[i].rec].field[pid], i};
        p->wall_s = db_calloc((size_t)p->repetitions, sizeof *p->wall_s);
        p->reqs = db_calloc(k, sizeof *p->reqs);
        seen[i] = db_calloc(k, 1);
        if (!p->wall_s || !p->reqs || !seen[i]) rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory", path);
    }
    if (!rc) qsort(ix, (size_t)r->n, sizeof *ix, cmp_ix);
    for (int i = 1; !rc && i < d.n; i++) {
        const db_csv_record *q = &d.rec[i];
        if (!q->complete || q->n != d.rec[0].n) continue; /* a record cut short: its point is not done */
        id_ix key = {q->field[c[ID]], 0}, *hit = bsearch(&key, ix, (size_t)r->n, sizeof *ix, cmp_ix);
        if (!hit) continue; /* a point not completed */
        db_point_raw *p = &r->pt[hit->i].raw;
        long pi, rp, ot;
        double wall, ta, te;
        if (inum(q->field[c[PI]], 0, p->n_prompts - 1, &pi) || inum(q->field[c[REP]], 0, p->repetitions - 1, &rp)) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: record %d: prompt_index %s / repetition %s outside point %s's "
                         "%d prompts and %d rounds (summary.csv)", path, i + 1, q->field[c[PI]], q->field[c[REP]],
                         key.id, p->n_prompts, p->repetitions);
            break;
        }
        size_t at = (size_t)rp * (size_t)p->n_prompts + (size_t)pi;
        if (inum(q->field[c[OT]], 0, INT_MAX, &ot) || num(q->field[c[WALL]], 0, &wall) || !(wall > 0) ||
            num(q->field[c[TA]], 0, &ta) || num(q->field[c[TE]], 0, &te)) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: record %d (point %s): output_tokens, rep_wall_s, "
                         "t_admitted_ms or t_finished_ms is no valid number", path, i + 1, key.id);
            break;
        }
        if (seen[hit->i][at]++) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: point %s: request %ld of round %ld given twice", path,
                         key.id, pi, rp);
            break;
        }
        if (p->wall_s[rp] > 0 && p->wall_s[rp] != wall) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: point %s: round %ld has two rep_wall_s (%g, %g)", path,
                         key.id, rp, p->wall_s[rp], wall);
            break;
        }
        p->wall_s[rp] = wall;
        p->reqs[at].output_tokens = (int)ot;
        p->reqs[at].t_admitted = ta * 1e-3;
        p->reqs[at].t_finished = te * 1e-3;
    }
    for (int i = 0; !rc && i < r->n; i++) {
        const db_point_raw *p = &r->pt[i].raw;
        size_t k = (size_t)p->repetitions * (size_t)p->n_prompts, have = 0;
        for (size_t j = 0; j < k; j++) have += seen[i][j] != 0;
        const char *id = r->summary.rec[r->pt[i].rec].field[pid];
        if (have != k) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: point %s has %zu of its %zu request rows (%d rounds x %d)",
                         path, id, have, k, p->repetitions, p->n_prompts);
            break;
        }
        /* the summary is the requests' tokens over time (result/timing.h): anything else is a
         * file edited in part */
        double t = db_throughput(p), s = r->pt[i].throughput;
        if (!(fabs(t - s) <= 1e-6 * fabs(s) + 1e-9))
            rc = db_fail(err, errlen, DB_EINPUT, "%s: point %s: throughput_tok_s %.10g is not its requests' "
                         "tokens over time in %s (%.10g)", r->dir, id, s, db_table_file[DB_TABLE_REQUESTS], t);
    }
    for (int i = 0; seen && i < r->n; i++) free(seen[i]);
    free(seen);
    free(ix);
    db_csv_doc_free(&d);
    return rc;
}

/* acceptance.csv: conditional_rate by position */
static int read_acceptance(db_results_read *r, char *err, size_t errlen)
{
    char path[1200];
    db_path_join(path, sizeof path, r->dir, db_table_file[DB_TABLE_ACCEPTANCE]);
    db_csv_doc d;
    int rc = db_csv_read(path, &d, err, errlen);
    if (rc) return rc;
    int cid = d.n ? db_csv_col(&d, "point_id") : -1, cpos = d.n ? db_csv_col(&d, "position") : -1,
        crate = d.n ? db_csv_col(&d, "conditional_rate") : -1, pid = db_csv_col(&r->summary, "point_id");
    if (cid < 0 || cpos < 0 || crate < 0) rc = db_fail(err, errlen, DB_EINPUT, "%s: no column point_id, position or conditional_rate", path);
    for (int i = 0; !rc && i < r->n; i++) {
        int B = r->pt[i].key.block_size > 0 ? r->pt[i].key.block_size : 1;
        if (!(r->pt[i].accept = db_malloc(sizeof(double) * (size_t)B))) rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory", path);
        for (int k = 0; !rc && k < B; k++) r->pt[i].accept[k] = NAN;
    }
    for (int j = 1; !rc && j < d.n; j++) {
        const db_csv_record *q = &d.rec[j];
        if (!q->complete || q->n != d.rec[0].n) continue;
        for (int i = 0; i < r->n; i++) {
            if (strcmp(q->field[cid], r->summary.rec[r->pt[i].rec].field[pid])) continue;
            long pos;
            double v;
            int B = r->pt[i].key.block_size > 0 ? r->pt[i].key.block_size : 1;
            if (inum(q->field[cpos], 1, B - 1, &pos) || num(q->field[crate], 1, &v)) {
                rc = db_fail(err, errlen, DB_EINPUT, "%s: record %d (point %s): position %s or conditional_rate %s "
                             "invalid for block size %d", path, j + 1, q->field[cid], q->field[cpos], q->field[crate], B);
                break;
            }
            r->pt[i].accept[pos] = v;
            break;
        }
    }
    db_csv_doc_free(&d);
    return rc;
}

int db_results_read_init(db_results_read *r, const char *dir, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    struct stat st;
    if (db_point_n_axes > (int)(sizeof r->has_axis / sizeof *r->has_axis))
        return db_fail(err, errlen, DB_ERUNTIME, "internal: %d axes", db_point_n_axes);
    if (snprintf(r->dir, sizeof r->dir, "%s", dir) >= (int)sizeof r->dir)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return db_fail(err, errlen, DB_EINPUT, "%s: no such results directory", dir);
    char **done, *text;
    int n_done;
    int rc = read_done(dir, &done, &n_done, &text, err, errlen);
    if (!rc && n_done > 0) qsort(done, (size_t)n_done, sizeof *done, cmp_str);
    if (!rc) rc = read_summary(r, done, n_done, err, errlen);
    free(done);
    free(text);
    if (!rc) rc = read_requests(r, err, errlen);
    if (!rc) rc = read_acceptance(r, err, errlen);
    if (rc) db_results_read_free(r);
    return rc;
}
