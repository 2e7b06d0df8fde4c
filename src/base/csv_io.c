/* csv_io.c — see csv_io.h. libcsv does the quoting and the parsing; this file decides when a
 * field needs quotes and collects parsed fields into records. */
#include "base/csv_io.h"
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

/* The fields of the record being read go into one growing buffer (bytes, each field's NUL) with
 * their offsets; a finished record becomes one block: its field pointers, then the bytes. One
 * allocation per record, not one per field. */
typedef struct {
    db_csv_doc *doc;
    char *buf;      /* the current record's field bytes */
    size_t used, cap;
    size_t *off;    /* [ncur] offset of each field in buf */
    int ncur, capcur;
    int oom;
} parse_ctx;

static void on_field(void *s, size_t len, void *data)
{
    parse_ctx *c = data;
    if (c->oom) return;
    if (c->ncur == c->capcur) {
        int cap = c->capcur ? 2 * c->capcur : 16;
        size_t *no = db_realloc(c->off, sizeof *no * (size_t)cap);
        if (!no) {
            c->oom = 1;
            return;
        }
        c->off = no;
        c->capcur = cap;
    }
    if (c->cap - c->used < len + 1) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        while (cap - c->used < len + 1) cap *= 2;
        char *nb = db_realloc(c->buf, cap);
        if (!nb) {
            c->oom = 1;
            return;
        }
        c->buf = nb;
        c->cap = cap;
    }
    if (len) memcpy(c->buf + c->used, s, len);
    c->buf[c->used + len] = 0;
    c->off[c->ncur++] = c->used;
    c->used += len + 1;
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
    char **f = NULL;
    if (c->ncur) {
        size_t ptrs = sizeof *f * (size_t)c->ncur;
        f = db_malloc(ptrs + c->used);
        if (!f) {
            c->oom = 1;
            return;
        }
        char *bytes = (char *)f + ptrs;
        memcpy(bytes, c->buf, c->used);
        for (int i = 0; i < c->ncur; i++) f[i] = bytes + c->off[i];
    }
    db_csv_record *r = &d->rec[d->n++];
    r->field = f;
    r->n = c->ncur;
    r->complete = term != -1; /* -1: csv_fini closed a record that had no newline */
    c->ncur = 0;
    c->used = 0;
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
    free(c.buf);
    free(c.off);
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
    for (int i = 0; i < doc->n; i++) free(doc->rec[i].field); /* the record's block: fields included */
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
