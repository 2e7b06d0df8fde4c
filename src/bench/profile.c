/* profile.c — acceptance profiles (see profile.h). */
#include "bench/profile.h"
#include "base/csv_io.h"
#include "base/paths.h"
#include "base/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the text without comment lines ('#' first) and blank lines */
static char *strip_comments(const char *text, size_t *len)
{
    char *out = db_malloc(strlen(text) + 1);
    if (!out) return NULL;
    size_t n = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) + 1 : strlen(p);
        const char *q = p;
        while (q < p + l && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n')) q++;
        if (q < p + l && *q != '#') {
            memcpy(out + n, p, l);
            n += l;
        }
        p += l;
    }
    out[n] = 0;
    *len = n;
    return out;
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* a preset name (no '/'): NAME or NAME.csv in configs/profiles/ (base/paths.h: the current
 * directory, then the data roots); a path not found from the current directory is looked up
 * in the data roots too */
static int resolve_preset(const char *name, char *path, size_t n)
{
    char rel[600], e[256];
    if (is_file(name)) return snprintf(path, n, "%s", name) < (int)n ? 0 : -1;
    if (strchr(name, '/')) {
        db_data_path(name, path, n, e, sizeof e); /* path = name when not found */
        return strlen(path) + 1 < n ? 0 : -1;
    }
    for (int ext = 0; ext < 2; ext++) {
        snprintf(rel, sizeof rel, "configs/profiles/%.500s%s", name, ext ? ".csv" : "");
        if (db_data_path(rel, path, n, e, sizeof e) == DB_OK && is_file(path)) return 0;
    }
    return snprintf(path, n, "%s", name) < (int)n ? 0 : -1; /* the open reports it missing */
}

static int parse_num(const char *s, double *out)
{
    if (!*s) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    while (*end == ' ' || *end == '\t' || *end == '\r') end++;
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* the columns of a profile file; first = the first data record */
typedef struct {
    int pos, rate, pid, first;
} prof_cols;

/* spec = FILE, FILE#TEXT or a preset name: the parsed CSV (comments stripped), its path, and the
 * point selector TEXT ("" for none) */
static int read_doc(const char *spec, db_csv_doc *doc, char *path, size_t pathlen, char *sel, size_t sellen,
                    char *err, size_t errlen)
{
    char name[512];
    snprintf(name, sizeof name, "%s", spec);
    sel[0] = 0;
    char *hash = strrchr(name, '#');
    if (hash && !is_file(name)) { /* FILE#TEXT */
        snprintf(sel, sellen, "%s", hash + 1);
        *hash = 0;
    }
    if (resolve_preset(name, path, pathlen) != 0)
        return db_fail(err, errlen, DB_EINPUT, "acceptance profile: path too long");
    char *raw;
    int rc = db_read_file_max(path, DB_MAX_PROFILE_BYTES, &raw, NULL, err, errlen);
    if (rc) return rc;
    size_t len;
    char *text = strip_comments(raw, &len);
    free(raw);
    if (!text) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory reading it", path);
    char e[256];
    rc = db_csv_parse(text, len, doc, e, sizeof e);
    free(text);
    return rc ? db_fail(err, errlen, rc, "%s: %s", path, e) : DB_OK;
}

/* named columns, or a headerless two-column file */
static int find_columns(const db_csv_doc *doc, const char *path, prof_cols *c, char *err, size_t errlen)
{
    double x;
    *c = (prof_cols){db_csv_col(doc, "position"), db_csv_col(doc, "conditional_rate"), db_csv_col(doc, "point_id"), 1};
    if (c->pos >= 0 && c->rate >= 0) return DB_OK;
    if (doc->n > 0 && doc->rec[0].n == 2 && parse_num(doc->rec[0].field[0], &x) == 0) {
        *c = (prof_cols){0, 1, -1, 0};
        return DB_OK;
    }
    return db_fail(err, errlen, DB_EINPUT,
                   "%s: no columns 'position' and 'conditional_rate' (the acceptance.csv of "
                   "a run, or a two-column position,conditional_rate file)", path);
}

/* which point: the only one, or the one the selector names (point_id into p) */
static int choose_point(const db_csv_doc *doc, const char *path, const char *sel, const prof_cols *c,
                        db_profile *p, char *err, size_t errlen)
{
    char chosen[512] = "", other[512] = "";
    int npoints = 0;
    if (c->pid < 0)
        return sel[0] ? db_fail(err, errlen, DB_EINPUT, "%s: '#%s' selects a point, but the file has no point_id column",
                                path, sel)
                      : DB_OK;
    for (int i = c->first; i < doc->n; i++) {
        if (doc->rec[i].n <= c->pid) continue;
        const char *id = doc->rec[i].field[c->pid];
        if (sel[0] && !strstr(id, sel)) continue;
        if (!chosen[0]) {
            snprintf(chosen, sizeof chosen, "%s", id);
            npoints = 1;
        } else if (strcmp(id, chosen) != 0 && strcmp(id, other) != 0) {
            if (!other[0]) snprintf(other, sizeof other, "%s", id);
            npoints++;
        }
    }
    if (npoints == 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: no point%s%s%s", path, sel[0] ? " whose point_id contains '" : " rows",
                       sel, sel[0] ? "'" : "");
    if (npoints > 1)
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: rows of several points%s%s%s (e.g. '%s' and '%s'); pick one with "
                       "%s#TEXT, TEXT a part of exactly one point_id",
                       path, sel[0] ? " match '" : "", sel, sel[0] ? "'" : "", chosen, other, path);
    snprintf(p->point_id, sizeof p->point_id, "%s", chosen);
    return DB_OK;
}

/* the rates of the chosen point: positions 1..n, each once, rates in [0, 1] */
static int read_rates(const db_csv_doc *doc, const char *path, const prof_cols *c, db_profile *p, char *err,
                      size_t errlen)
{
    int seen[DB_MAX_BLOCK] = {0};
    for (int i = c->first; i < doc->n; i++) {
        const db_csv_record *r = &doc->rec[i];
        if (c->pid >= 0 && (r->n <= c->pid || strcmp(r->field[c->pid], p->point_id) != 0)) continue;
        if (r->n <= c->pos || r->n <= c->rate)
            return db_fail(err, errlen, DB_EINPUT, "%s: record %d has %d fields", path, i + 1, r->n);
        double pos, rate = 0.0;
        if (parse_num(r->field[c->pos], &pos) != 0 || pos != floor(pos) || pos < 1 || pos >= DB_MAX_BLOCK)
            return db_fail(err, errlen, DB_EINPUT, "%s: position '%s' is not an integer in 1..%d", path,
                           r->field[c->pos], DB_MAX_BLOCK - 1);
        if (r->field[c->rate][0] && (parse_num(r->field[c->rate], &rate) != 0 || rate < 0 || rate > 1))
            return db_fail(err, errlen, DB_EINPUT, "%s: conditional_rate '%s' of position %d is not in [0, 1]",
                           path, r->field[c->rate], (int)pos);
        int ip = (int)pos;
        if (seen[ip]++) return db_fail(err, errlen, DB_EINPUT, "%s: position %d listed twice", path, ip);
        p->rate[ip - 1] = (float)rate;
        if (ip > p->n) p->n = ip;
    }
    if (p->n == 0) return db_fail(err, errlen, DB_EINPUT, "%s: no positions", path);
    for (int i = 1; i <= p->n; i++)
        if (!seen[i]) return db_fail(err, errlen, DB_EINPUT, "%s: position %d is missing (need 1..%d)", path, i, p->n);
    return DB_OK;
}

int db_profile_load(db_profile *p, const char *spec, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (strlen(spec) >= sizeof p->spec) return db_fail(err, errlen, DB_EINPUT, "acceptance profile: path too long");
    snprintf(p->spec, sizeof p->spec, "%s", spec);
    char path[1200], sel[512];
    db_csv_doc doc;
    int rc = read_doc(spec, &doc, path, sizeof path, sel, sizeof sel, err, errlen);
    if (rc) return rc;
    prof_cols c;
    rc = find_columns(&doc, path, &c, err, errlen);
    if (!rc) rc = choose_point(&doc, path, sel, &c, p, err, errlen);
    if (!rc) rc = read_rates(&doc, path, &c, p, err, errlen);
    db_csv_doc_free(&doc);
    return rc;
}

double db_profile_tau(const db_profile *p, int block)
{
    double tau = 1.0, surv = 1.0;
    for (int i = 1; i < block && i <= p->n; i++) {
        surv *= p->rate[i - 1];
        tau += surv;
    }
    return tau;
}

void db_profile_constant(db_profile *p, double tau, int block, int n)
{
    memset(p, 0, sizeof *p);
    p->n = n < DB_MAX_BLOCK - 1 ? n : DB_MAX_BLOCK - 1;
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 60; it++) { /* tau is increasing in the rate */
        double mid = 0.5 * (lo + hi);
        for (int i = 0; i < p->n; i++) p->rate[i] = (float)mid;
        if (db_profile_tau(p, block) < tau) lo = mid;
        else hi = mid;
    }
    for (int i = 0; i < p->n; i++) p->rate[i] = (float)(0.5 * (lo + hi));
    snprintf(p->spec, sizeof p->spec, "tau=%g", tau);
}
