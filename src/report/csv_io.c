/* csv_io.c — see csv_io.h. libcsv does the quoting and the parsing; this file decides when a
 * field needs quotes and collects parsed fields into records. */
#include "report/csv_io.h"
#include "base/util.h"

#include <csv.h>
#include <stdlib.h>
#include <string.h>

int db_csv_field(FILE *f, const char *s, int first)
{
    if (!first && fputc(',', f) == EOF) return -1;
    size_t n = strlen(s);
    int quote = n && (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t');
    if (!quote && strpbrk(s, ",\"\r\n")) quote = 1;
    if (quote) return csv_fwrite(f, s, n) == 0 ? 0 : -1;
    return fwrite(s, 1, n, f) == n ? 0 : -1;
}

typedef struct {
    db_csv_doc *doc;
    char **cur;
    int ncur, capcur;
    int oom;
} parse_ctx;

static void on_field(void *s, size_t len, void *data)
{
    parse_ctx *c = data;
    if (c->oom) return;
    if (c->ncur == c->capcur) {
        int cap = c->capcur ? 2 * c->capcur : 16;
        char **nf = db_realloc(c->cur, sizeof *nf * (size_t)cap);
        if (!nf) {
            c->oom = 1;
            return;
        }
        c->cur = nf;
        c->capcur = cap;
    }
    char *f = db_malloc(len + 1);
    if (!f) {
        c->oom = 1;
        return;
    }
    if (len) memcpy(f, s, len);
    f[len] = 0;
    c->cur[c->ncur++] = f;
}

static void on_record(int term, void *data)
{
    parse_ctx *c = data;
    if (c->oom) return;
    db_csv_doc *d = c->doc;
    if ((d->n & (d->n - 1)) == 0) { /* grow at powers of two */
        db_csv_record *nr = db_realloc(d->rec, sizeof *nr * (size_t)(d->n ? 2 * d->n : 1));
        if (!nr) {
            c->oom = 1;
            return;
        }
        d->rec = nr;
    }
    db_csv_record *r = &d->rec[d->n++];
    r->field = c->cur;
    r->n = c->ncur;
    r->complete = term != -1; /* -1: csv_fini closed a record that had no newline */
    c->cur = NULL;
    c->ncur = c->capcur = 0;
}

int db_csv_parse(const char *text, size_t len, db_csv_doc *doc, char *err, size_t errlen)
{
    memset(doc, 0, sizeof *doc);
    struct csv_parser p;
    if (csv_init(&p, CSV_STRICT) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "csv: cannot initialise the parser");
    parse_ctx c = {.doc = doc};
    size_t used = csv_parse(&p, text, len, on_field, on_record, &c);
    int bad = used != len ? csv_error(&p) : 0;
    if (!bad) csv_fini(&p, on_field, on_record, &c);
    csv_free(&p);
    for (int i = 0; i < c.ncur; i++) free(c.cur[i]);
    free(c.cur);
    if (c.oom || bad) {
        db_csv_doc_free(doc);
        if (c.oom) return db_fail(err, errlen, DB_ERUNTIME, "csv: out of memory");
        return db_fail(err, errlen, DB_EINPUT, "csv: %s", csv_strerror(bad));
    }
    return DB_OK;
}

int db_csv_read(const char *path, db_csv_doc *doc, char *err, size_t errlen)
{
    memset(doc, 0, sizeof *doc);
    char *text;
    size_t len;
    int rc = db_read_file(path, &text, &len, err, errlen);
    if (rc) return rc;
    rc = db_csv_parse(text, len, doc, err, errlen);
    free(text);
    if (rc) {
        char e[512];
        snprintf(e, sizeof e, "%s", err);
        return db_fail(err, errlen, rc, "%s: %s", path, e);
    }
    return DB_OK;
}

void db_csv_doc_free(db_csv_doc *doc)
{
    for (int i = 0; i < doc->n; i++) {
        for (int j = 0; j < doc->rec[i].n; j++) free(doc->rec[i].field[j]);
        free(doc->rec[i].field);
    }
    free(doc->rec);
    memset(doc, 0, sizeof *doc);
}

int db_csv_col(const db_csv_doc *doc, const char *name)
{
    if (!doc->n) return -1;
    for (int j = 0; j < doc->rec[0].n; j++)
        if (strcmp(doc->rec[0].field[j], name) == 0) return j;
    return -1;
}
