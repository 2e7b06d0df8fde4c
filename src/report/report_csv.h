/* report_csv.h — the four tidy tables of a results directory, as CSV rows and JSON objects.
 *
 * Every table starts with the same columns: schema_version, point_id, the run metadata, the
 * point key (DB_COMMON_COLUMNS below); then its own. One header line per file; docs/csv-columns.md
 * defines every column. Numbers are written with up to 10 significant digits; a value that does
 * not exist (a speedup without baseline, a rate over zero cycles) is an empty field (JSON null).
 *
 *   summary.csv     one row per point
 *   acceptance.csv  one row per point and draft position 1..B-1 (none for `ar`)
 *   histogram.csv   one row per point and acceptance length 1..B
 *   requests.csv    one row per request and repetition: the raw samples */
#ifndef DB_REPORT_CSV_H
#define DB_REPORT_CSV_H

#include "result/point.h"
#include "result/run_meta.h"
#include "base/csv_io.h"

#include <cjson/cJSON.h>
#include <stdio.h>

typedef enum {
    DB_TABLE_SUMMARY,
    DB_TABLE_ACCEPTANCE,
    DB_TABLE_HISTOGRAM,
    DB_TABLE_REQUESTS,
    DB_TABLE_COUNT
} db_table;

/* "summary.csv", "acceptance.csv", "histogram.csv", "requests.csv" */
extern const char *const db_table_file[DB_TABLE_COUNT];

/* the header line of table t (with "\n"); 0 or -1 on an I/O error */
int db_table_header(db_table t, FILE *out);
/* all rows of table t for one point; 0 or -1 on an I/O error or out of memory */
int db_table_rows(db_table t, const db_run_meta *m, const db_point_raw *raw,
                  const db_point_summary *s, FILE *out);
/* JSON Lines beside the CSV (run --format-files csv,json): "summary.jsonl", ... */
extern const char *const db_table_jsonl_file[DB_TABLE_COUNT];
/* table t's rows of one point as JSON Lines: one object a line, the CSV's columns as keys in
 * its order, numbers as numbers, an empty field as null; 0 or -1 (I/O, out of memory) */
int db_table_jsonl(db_table t, const db_run_meta *m, const db_point_raw *raw,
                   const db_point_summary *s, FILE *out);
/* the records of a CSV file of table t (doc, record 0 its header) as the same JSON Lines; keep[i]
 * (NULL: all) picks records; a column the table does not have (merge's host) is a string */
int db_table_csv_jsonl(db_table t, const db_csv_doc *doc, const char *keep, FILE *out);
/* For the CSV of the commands outside a results directory (bench, plan): the provenance columns
 * run's tables carry, spelled and formatted as there: tool_version, git_commit, test_time,
 * cpu_model, cpu_cores, cpu_threads, compiler, build_type. m NULL: their names. Each field
 * is followed by a comma (they lead a row). 0 or -1 on an I/O error. */
int db_provenance_csv(FILE *out, const db_run_meta *m);
/* the summary row as one JSON object (numbers as numbers, absent values as null); NULL when out
 * of memory */
cJSON *db_summary_json(const db_run_meta *m, const db_point_raw *raw, const db_point_summary *s);

#endif
