/* csv_io.h — CSV fields out and records in, on top of libcsv (RFC 4180: comma separated, a
 * field with a comma, quote, CR/LF or outer blank is quoted and its quotes doubled; lines end
 * with "\n").
 *
 * Reading keeps track of whether each record was terminated by a newline: a record cut short at
 * the end of a file (a write interrupted by a crash) is marked incomplete, so the resume logic
 * can drop it. */
#ifndef DB_CSV_IO_H
#define DB_CSV_IO_H

#include <stddef.h>
#include <stdio.h>

/* one field, preceded by a comma unless first; quoted only when it must be. 0 or -1 (I/O) */
int db_csv_field(FILE *f, const char *s, int first);

typedef struct {
    char **field; /* NUL-terminated copies (one block with the pointers: free(field) frees all) */
    int n;
    int complete; /* ended by a newline */
} db_csv_record;

typedef struct {
    db_csv_record *rec; /* rec[0] is the header when the file has one */
    int n;
} db_csv_doc;

int db_csv_parse(const char *text, size_t len, db_csv_doc *doc, char *err, size_t errlen);
/* a missing file is DB_EINPUT */
int db_csv_read(const char *path, db_csv_doc *doc, char *err, size_t errlen);
void db_csv_doc_free(db_csv_doc *doc);
/* index of column `name` in record 0, or -1 */
int db_csv_col(const db_csv_doc *doc, const char *name);

#endif
