/* results_dir.h — the results directory of a run: CSV tables appended point by point so that a
 * killed run can be resumed without losing, duplicating or half-writing a row.
 *
 * Layout of DIR (default results/<UTC YYYYmmdd-HHMMSS>[-label]/ under the current directory, or
 * the base/paths.h fallback when that is not writable):
 *   summary.csv acceptance.csv histogram.csv requests.csv   the tables (report_csv.h)
 *   summary.jsonl ... requests.jsonl   with --format-files csv,json: the same rows as JSON Lines
 *   points.done   the ids (report.h db_point_id) of the completed points, one per line
 *   meta.json     machine, build, models, command line of the latest invocation; a resumed run
 *                 keeps the previous one as meta.1.json, meta.2.json, ... when it writes its own
 *                 (the new one synced first: there is a meta.json at every moment)
 *   .lock         flock()ed by the run writing DIR, "pid N on host H" of the last one inside
 *
 * A fresh run makes DIR (with its parents) at its first completed point, not before: a run that
 * fails on bad input, while loading or during its first point leaves no directory behind; one
 * that fails later leaves the points completed so far, resumable.
 *
 * Write protocol, per point:
 *   1. every table file exists and starts with its header (created as a temporary file, then
 *      renamed into place, so a header is either whole or absent);
 *   2. the point's rows of each table are formatted in memory and appended with ONE write()
 *      on a descriptor opened with O_APPEND, then fdatasync()ed;
 *   3. only then is the point's id appended to points.done (one write(), fdatasync()): the last
 *      thing written for the point, its commit record.
 * A run stopped at any moment (SIGKILL, OOM, power loss: each step is synced before the next)
 * therefore leaves rows of at most one point that points.done does not list, possibly cut short. On resume (--resume DIR)
 * the index is read first (a last line without its newline does not count and is cut off), then
 * each table is parsed and, when it holds any row whose point_id is not in the index or a
 * record cut short, rewritten without them (temporary file + rename, so the cleanup itself is
 * crash safe). The test hook DB_FAULT_KILL=N (results_dir.c) kills the process before the N-th
 * write, sync or rename, which tests/cli_crash.sh does at every one. Points listed in the index are skipped; the others run again and append their
 * rows, so every completed point appears exactly once. */
#ifndef DB_RESULTS_DIR_H
#define DB_RESULTS_DIR_H

#include "result/point.h"
#include "result/run_meta.h"

#include <stddef.h>
#include <time.h>

typedef struct {
    char dir[1024];
    char **done; /* ids in points.done */
    int n_done, cap_done;
    int dropped_rows; /* rows of unfinished points removed by resume (for a log line) */
    int pending;      /* fresh run: DIR is made at the first append */
    char *meta_text;  /* meta.json waiting for DIR (pending) */
    int lock_fd;      /* DIR/.lock, flock()ed while this run may write DIR; -1 when none */
    int claimed;      /* fresh run: this run created DIR/points.done */
    char made[1024];  /* fresh run: the topmost directory it created ("" when none) */
    int rotate_meta;  /* resume: the previous meta.json not yet kept as meta.<k>.json */
    int done_fix;     /* points.done read with CRs, blanks, duplicates or a cut line */
    int unique;       /* fresh run in a default directory (db_results_open_default): DIR is
                       * made with an exclusive mkdir, as DIR-2, DIR-3, ... when taken, so two
                       * runs started in the same second never share one; dir holds the name */
    int jsonl;        /* set after db_results_open (run --format-files csv,json): every table also
                       * as JSON Lines beside its CSV (summary.jsonl, ...), appended with the CSV
                       * rows before points.done; resume rewrites a twin from its cleaned CSV */
} db_results;

/* "<base>/YYYYmmdd-HHMMSS[-label]" in UTC, base from db_results_base ("results" when the current
 * directory is writable), with "-2", "-3", ... when that name is taken */
int db_results_default_dir(char *buf, size_t n, const char *label, time_t now);
/* --resume DIR: DIR is a directory holding this tool's results (a meta.json or a points.done);
 * DB_EINPUT naming DIR otherwise. Reads only: called before anything is written to DIR. */
int db_results_check_resumable(const char *dir, char *err, size_t errlen);
/* Before any model loads, creating nothing: a fresh run needs DIR absent or an empty directory
 * (not the current or the root directory), and its nearest existing ancestor writable (a directory made there and removed at
 * once proves it); resume needs DIR to exist and be writable. DB_EINPUT naming DIR. */
int db_results_check_writable(const char *dir, int resume, char *err, size_t errlen);
/* fresh: check as above, DIR waits for the first append (a first append that fails removes
 * what it made); resume: the lock, then points.done and every table read and checked before
 * anything changes, then points.done repaired (CRs, blanks, ids listed twice) and the tables
 * cleaned (rows of unfinished points, records cut short, a point's rows written twice) */
int db_results_open(db_results *r, const char *dir, int resume, char *err, size_t errlen);
/* A default directory (no --out): only its parent must be creatable now, since DIR itself is
 * claimed at the first append (an exclusive mkdir, DIR-2, DIR-3, ... when taken). Another run of
 * the same second may have made DIR meanwhile, or be probing it: neither is this run's concern. */
int db_results_check_default(const char *dir, char *err, size_t errlen);
/* as db_results_open for a fresh run, with r->unique set and the check above */
int db_results_open_default(db_results *r, const char *dir, char *err, size_t errlen);
/* DIR/.lock taken (flock, exclusive, not waiting) into *fd, with "pid N on host H" written in
 * it; DB_EINPUT naming the holder's pid and host when another process holds it. Every run that
 * writes DIR holds it: a fresh run from its first point, a resume from before it reads DIR. */
int db_results_lock(const char *dir, int *fd, char *err, size_t errlen);
/* resume with the lock already taken by db_results_lock (-1: take it here); the descriptor is
 * the db_results' from then on, closed by db_results_close (also when this fails) */
int db_results_open_locked(db_results *r, const char *dir, int lock_fd, char *err, size_t errlen);
/* 1 when points.done lists the point */
int db_results_is_done(const db_results *r, const db_point_key *k);
/* append the point's rows to the four tables, then record it in points.done */
int db_results_append(db_results *r, const db_run_meta *m, const db_point_raw *raw,
                      const db_point_summary *s, char *err, size_t errlen);
/* write meta.json (temporary file + rename; held until the first append of a fresh run); may be
 * called again as backends are added */
int db_results_write_meta(db_results *r, const db_run_meta *m, char *err, size_t errlen);
/* Rebuild the raw samples of a completed point from requests.csv (the `ar` baseline of points
 * still to run, on resume): key, n_prompts, repetitions, wall_s and per request the token
 * counts, cycles, time stamps, time split and finished_by_eos. Per-position acceptance counts
 * are not in requests.csv and stay zero. Free with db_point_raw_free(). */
int db_results_load_raw(const db_results *r, const db_point_key *k, db_point_raw *out, char *err,
                        size_t errlen);
/* the `ar` baseline of point k: one of done[n] (this invocation's points), else loaded from the
 * directory into *loaded (free with db_point_raw_free); NULL when there is none */
const db_point_raw *db_results_baseline(const db_results *r, const db_point_raw *done, int n,
                                        const db_point_key *k, db_point_raw *loaded, char *err,
                                        size_t errlen);
/* resume: remove keys[n] from points.done and their rows from the tables (a group written only
 * in part runs again as a whole), one point at a time, so that a crash leaves the rows of at most
 * one unlisted point */
int db_results_forget(db_results *r, const db_point_key *keys, int n, char *err, size_t errlen);
/* how many of keys[n] DIR's points.done lists, reading and changing nothing else (a resume
 * with nothing left to do writes nothing) */
int db_results_count_done(const char *dir, const db_point_key *keys, int n, int *done, char *err,
                          size_t errlen);
/* how many distinct points DIR's points.done lists (0 without one), changing nothing */
int db_results_listed(const char *dir, int *n, char *err, size_t errlen);
void db_results_close(db_results *r);

#endif
