/* results_dir.c — crash-safe appends and resume of a results directory (the protocol is
 * described at the top of results_dir.h). */
#include "report/results_dir.h"
#include "base/csv_io.h"
#include "report/report.h"
#include "report/report_csv.h"
#include "base/paths.h"
#include "base/util.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <unistd.h>

#define DONE_FILE "points.done"
#define LOCK_FILE ".lock"

static int exists_in(const char *dir, const char *name);

/* "NAME" for k = 1, else "NAME-k": the k-th name tried for a default directory */
static int suffixed(char *buf, size_t n, const char *name, int k)
{
    int w = k > 1 ? snprintf(buf, n, "%s-%d", name, k) : snprintf(buf, n, "%s", name);
    return w < 0 || (size_t)w >= n ? DB_EINPUT : DB_OK;
}

/* how many names a default directory tries before giving up (runs started in one second) */
enum { MAX_SUFFIX = 1000 };

int db_results_default_dir(char *buf, size_t n, const char *label, time_t now)
{
    struct tm tm;
    char ts[32], base[1024], name[1100];
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", &tm);
    if (db_results_base(base, sizeof base) != DB_OK) return DB_EINPUT;
    int w = snprintf(name, sizeof name, "%s/%s%s%s", base, ts, label && label[0] ? "-" : "", label ? label : "");
    if (w < 0 || (size_t)w >= sizeof name) return DB_EINPUT;
    /* the first name free now; the run claims it (or the next free one) with an exclusive
     * mkdir at its first point (materialize), so two runs never share one */
    struct stat st;
    int rc = DB_EINPUT;
    for (int k = 1; k <= MAX_SUFFIX; k++)
        if ((rc = suffixed(buf, n, name, k)) != DB_OK || stat(buf, &st) != 0) break;
    return rc;
}

int db_results_check_resumable(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return db_fail(err, errlen, DB_EINPUT, "--resume %s: no such results directory", dir);
    if (!exists_in(dir, "meta.json") && !exists_in(dir, DONE_FILE))
        return db_fail(err, errlen, DB_EINPUT,
                       "--resume %s holds no dflash-bench results (no meta.json or " DONE_FILE "): "
                       "start a new run with --out", dir);
    return DB_OK;
}

/* DIR with its parents; *made gets the topmost directory this call created ("" when none) */
static int mkdir_p(const char *dir, char *made, size_t madelen)
{
    char p[1024];
    made[0] = 0;
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return ENAMETOOLONG;
    for (char *c = p + 1;; c++) {
        if (*c && *c != '/') continue;
        char was = *c;
        *c = 0;
        if (mkdir(p, 0777) == 0) {
            if (!made[0]) snprintf(made, madelen, "%s", p);
        } else if (errno != EEXIST) return errno;
        if (!was) break;
        *c = '/';
    }
    struct stat st;
    if (stat(p, &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* Test hook: DB_FAULT_KILL=N kills the process (SIGKILL) just before the N-th write, sync or
 * rename of the results directory (1-based, counted over the process; DB_FAULT_KILL_LOG=PATH
 * appends "N what" for every boundary reached), so a test can stop a run at each of them
 * (tests/cli_crash.sh). Unset: one getenv at the first boundary. */
static void boundary(const char *what)
{
    static long long at = -1, seen;
    static const char *log;
    if (at < 0) {
        const char *v = getenv("DB_FAULT_KILL");
        at = v ? atoll(v) : 0;
        log = getenv("DB_FAULT_KILL_LOG");
    }
    if (!at && !log) return;
    seen++;
    if (log) {
        char line[128];
        int fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0666), n = snprintf(line, sizeof line, "%lld %s\n", seen, what);
        if (fd >= 0) {
            if (write(fd, line, (size_t)n) != n) { /* a log line lost only shortens the test */
            }
            close(fd);
        }
    }
    if (seen == at) raise(SIGKILL);
}

/* a rename or a new file is durable only once its directory is synced (power loss); a file
 * system that cannot sync a directory (EINVAL) has nothing to sync */
static int sync_dir(const char *dir)
{
    boundary("dir fsync");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int bad = fsync(fd) != 0 && errno != EINVAL && errno != EROFS;
    int e = errno;
    close(fd);
    errno = e;
    return bad ? -1 : 0;
}

static int exists_in(const char *dir, const char *name)
{
    char p[1200];
    struct stat st;
    return db_path_join(p, sizeof p, dir, name) == 0 && stat(p, &st) == 0;
}

/* a fresh DIR that does not exist yet: its nearest existing ancestor, from `from` (DIR or one of
 * its parents) up, must be a directory in which a directory can be made (made and removed here:
 * access() says yes to root on /proc) */
static int check_creatable(const char *dir, const char *from, char *err, size_t errlen)
{
    char up[1024], probe[1100];
    snprintf(up, sizeof up, "%s", from);
    struct stat st;
    while (stat(up, &st) != 0) {
        if (errno != ENOENT)
            return db_fail(err, errlen, DB_EINPUT, "%s: cannot create: %s", dir, strerror(errno));
        char *slash = strrchr(up, '/');
        while (slash && slash > up && slash[-1] == '/') slash--; /* "a//b" */
        if (!slash) snprintf(up, sizeof up, ".");
        else if (slash == up) up[1] = 0; /* "/" */
        else *slash = 0;
    }
    if (!S_ISDIR(st.st_mode))
        return db_fail(err, errlen, DB_EINPUT, "%s: cannot create: %s is not a directory", dir, up);
    snprintf(probe, sizeof probe, "%s/.dflash-bench-probe.XXXXXX", up);
    if (!mkdtemp(probe))
        return db_fail(err, errlen, DB_EINPUT, "%s: cannot create: %s: %s", dir, up, strerror(errno));
    rmdir(probe);
    return DB_OK;
}

int db_results_check_writable(const char *dir, int resume, char *err, size_t errlen)
{
    struct stat st;
    if (!dir || !dir[0]) return db_fail(err, errlen, DB_EINPUT, "results directory: empty path");
    if (strlen(dir) >= 1000) return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    if (resume) {
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return db_fail(err, errlen, DB_EINPUT, "--resume %s: no such results directory", dir);
    } else {
        if (stat(dir, &st) != 0) return check_creatable(dir, dir, err, errlen);
        if (!S_ISDIR(st.st_mode)) return db_fail(err, errlen, DB_EINPUT, "%s: cannot create: File exists", dir);
        if (exists_in(dir, DONE_FILE) || exists_in(dir, db_table_file[DB_TABLE_SUMMARY]))
            return db_fail(err, errlen, DB_EINPUT,
                           "%s already holds results: continue them with --resume %s, or choose "
                           "another --out",
                           dir, dir);
        /* the current or the root directory would get the tables among unrelated files */
        char real[PATH_MAX], cwd[PATH_MAX];
        if (realpath(dir, real) && (!strcmp(real, "/") || (getcwd(cwd, sizeof cwd) && !strcmp(real, cwd))))
            return db_fail(err, errlen, DB_EINPUT, "--out %s is the %s directory: name a directory for the results",
                           dir, strcmp(real, "/") ? "current" : "root");
        /* any other file there could be overwritten (a table's name) or mixed up with ours */
        DIR *d = opendir(dir);
        if (!d) return db_fail(err, errlen, DB_EINPUT, "%s: cannot read: %s", dir, strerror(errno));
        const struct dirent *e;
        char first[256] = "";
        while (!first[0] && (e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) snprintf(first, sizeof first, "%s", e->d_name);
        closedir(d);
        if (first[0])
            return db_fail(err, errlen, DB_EINPUT,
                           "%s is not empty (%s) and holds no dflash-bench results: choose a new or empty --out",
                           dir, first);
    }
    char probe[1200], name[64];
    snprintf(name, sizeof name, ".write-test.%ld", (long)getpid());
    if (db_path_join(probe, sizeof probe, dir, name) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0 || write(fd, "x", 1) != 1) {
        int e = errno;
        if (fd >= 0) close(fd), unlink(probe);
        return db_fail(err, errlen, DB_EINPUT, "%s: not writable: %s", dir, strerror(e));
    }
    close(fd);
    unlink(probe);
    return DB_OK;
}

/* the whole buffer with one write() (a regular file takes it whole unless the disk is full;
 * a short write is completed, and the point stays uncommitted if anything fails) */
static int write_all(int fd, const char *buf, size_t n)
{
    boundary("write");
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* dir/name's temporary sibling (tmp) written with `n` bytes of text and synced, not yet in place */
static int write_temp(const char *dir, const char *name, const char *text, size_t n, char *tmp,
                      size_t tmplen, char *err, size_t errlen)
{
    char path[1200];
    if (db_path_join(path, sizeof path, dir, name) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s/%s: path too long", dir, name);
    snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) return db_fail(err, errlen, DB_ERUNTIME, "%s: %s", tmp, strerror(errno));
    int bad = write_all(fd, text, n) || (boundary("fsync"), fsync(fd));
    int e = errno;
    if (close(fd) != 0 && !bad) bad = 1, e = errno;
    if (bad) {
        unlink(tmp);
        return db_fail(err, errlen, DB_ERUNTIME, "%s: %s", path, strerror(e));
    }
    return DB_OK;
}

/* the synced temporary file renamed over dir/name, and the rename made durable */
static int commit_temp(const char *dir, const char *name, const char *tmp, char *err, size_t errlen)
{
    char path[1200];
    db_path_join(path, sizeof path, dir, name);
    boundary("rename");
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return db_fail(err, errlen, DB_ERUNTIME, "%s: %s", path, strerror(e));
    }
    if (sync_dir(dir) != 0) return db_fail(err, errlen, DB_ERUNTIME, "%s: syncing the directory: %s", dir, strerror(errno));
    return DB_OK;
}

/* path = dir/name, replaced atomically by `n` bytes of text (temporary file, fsync, rename,
 * directory fsync) */
static int replace_file(const char *dir, const char *name, const char *text, size_t n, char *err,
                        size_t errlen)
{
    char tmp[1300];
    int rc = write_temp(dir, name, text, n, tmp, sizeof tmp, err, errlen);
    return rc ? rc : commit_temp(dir, name, tmp, err, errlen);
}

/* header of table t as text (malloc'd) */
static char *header_text(db_table t, size_t *n)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    if (!f) return NULL;
    int bad = db_table_header(t, f);
    if (fclose(f) != 0) bad = 1;
    if (bad) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int add_done(db_results *r, const char *id)
{
    if (r->n_done == r->cap_done) {
        int cap = r->cap_done ? 2 * r->cap_done : 64;
        char **nd = db_realloc(r->done, sizeof *nd * (size_t)cap);
        if (!nd) return -1;
        r->done = nd;
        r->cap_done = cap;
    }
    if (!(r->done[r->n_done] = db_strdup(id))) return -1;
    r->n_done++;
    return 0;
}

static int id_done(const db_results *r, const char *id)
{
    for (int i = 0; i < r->n_done; i++)
        if (!strcmp(r->done[i], id)) return 1;
    return 0;
}

int db_results_is_done(const db_results *r, const db_point_key *k)
{
    char id[DB_POINT_ID_MAX];
    db_point_id(k, id, sizeof id);
    return id_done(r, id);
}

/* points.done into r->done, read only. A last line without its newline does not count; ids
 * are taken without a trailing CR or blanks (a file edited on another system), and an id listed
 * twice (two runs that wrote the directory at once) once. r->done_fix says the file is not in
 * its normal form, which repair_done() then writes. */
static int read_done(db_results *r, char *err, size_t errlen)
{
    char path[1200];
    if (db_path_join(path, sizeof path, r->dir, DONE_FILE) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", r->dir);
    struct stat st;
    if (stat(path, &st) != 0) return DB_OK; /* nothing completed yet */
    char *text;
    size_t len;
    int rc = db_read_file(path, &text, &len, err, errlen);
    if (rc) return rc;
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] != '\n') continue;
        size_t end = i;
        while (end > start && (text[end - 1] == '\r' || text[end - 1] == ' ' || text[end - 1] == '\t')) end--;
        text[end] = 0;
        if (end != i || (i == start)) r->done_fix = 1; /* CR, blanks or an empty line */
        if (end > start) {
            if (id_done(r, text + start)) r->done_fix = 1;
            else if (add_done(r, text + start) != 0) {
                free(text);
                return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing its points", path);
            }
        }
        start = i + 1;
    }
    if (start < len) r->done_fix = 1;
    free(text);
    return DB_OK;
}

/* points.done rewritten as read (one id a line, each once), when read_done found it otherwise */
static int repair_done(db_results *r, char *err, size_t errlen)
{
    if (!r->done_fix) return DB_OK;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int bad = !f;
    for (int j = 0; f && j < r->n_done; j++) bad |= fprintf(f, "%s\n", r->done[j]) < 0;
    if (f && fclose(f) != 0) bad = 1;
    int rc = bad ? db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting " DONE_FILE " (%d points)", r->n_done)
                 : replace_file(r->dir, DONE_FILE, buf, len, err, errlen);
    free(buf);
    if (!rc) r->done_fix = 0;
    return rc;
}

/* the rows of table t to drop on resume: a record cut short, a row of a point points.done does
 * not list, or a duplicate: a point's rows are appended with one write() and so lie together;
 * rows of a point seen again after another point's rows were written twice (two runs at once),
 * and the first block is the one kept. keep[i] says whether record i stays. */
static int rows_to_keep(const db_results *r, const db_csv_doc *doc, char *keep)
{
    int col = db_csv_col(doc, "point_id"), drop = 0;
    const char *prev = NULL;
    char **closed = NULL; /* ids whose block ended */
    int nclosed = 0;
    for (int i = 1; i < doc->n; i++) {
        const db_csv_record *rec = &doc->rec[i];
        keep[i] = rec->complete && col >= 0 && col < rec->n && id_done(r, rec->field[col]);
        if (keep[i] && (!prev || strcmp(prev, rec->field[col]))) {
            for (int k = 0; k < nclosed && keep[i]; k++) keep[i] = strcmp(closed[k], rec->field[col]) != 0;
            if (keep[i] && prev) {
                char **nc = db_realloc(closed, sizeof *nc * (size_t)(nclosed + 1));
                if (!nc) {
                    free(closed);
                    return -1;
                }
                (closed = nc)[nclosed++] = (char *)prev;
            }
            if (keep[i]) prev = rec->field[col];
        }
        drop += !keep[i];
    }
    free(closed);
    return drop;
}

/* resume: drop the rows rows_to_keep() rejects. With check_only the table is read and its header
 * checked, nothing written: open checks every table before it changes any. */
static int clean_table(db_results *r, db_table t, int check_only, char *err, size_t errlen)
{
    char path[1200];
    if (db_path_join(path, sizeof path, r->dir, db_table_file[t]) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", r->dir);
    size_t hlen;
    char *hdr = header_text(t, &hlen);
    if (!hdr) return db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting the header of %s", db_table_file[t]);
    struct stat st;
    if (stat(path, &st) != 0) {
        int rc = check_only ? DB_OK : replace_file(r->dir, db_table_file[t], hdr, hlen, err, errlen);
        free(hdr);
        return rc;
    }
    db_csv_doc doc, want;
    int rc = db_csv_read(path, &doc, err, errlen);
    if (rc) {
        free(hdr);
        return rc;
    }
    rc = db_csv_parse(hdr, hlen, &want, err, errlen);
    if (rc) {
        free(hdr);
        db_csv_doc_free(&doc);
        return rc;
    }
    int same = doc.n > 0 && doc.rec[0].complete && doc.rec[0].n == want.rec[0].n;
    for (int j = 0; same && j < want.rec[0].n; j++)
        same = !strcmp(doc.rec[0].field[j], want.rec[0].field[j]);
    db_csv_doc_free(&want);
    if (!same && doc.n > 0 && !(doc.n == 1 && !doc.rec[0].complete)) {
        free(hdr);
        db_csv_doc_free(&doc);
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: its header is not this version's (schema_version %d): resume it with "
                       "the dflash-bench that wrote it, or start a new --out",
                       path, DB_SCHEMA_VERSION);
    }
    char *keep = db_calloc((size_t)doc.n + 1, 1);
    int drop = keep ? rows_to_keep(r, &doc, keep) : -1;
    if (drop < 0) rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory checking its rows", path);
    if (!rc && !check_only && (drop || !same)) {
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        int bad = !f || fwrite(hdr, 1, hlen, f) != hlen;
        for (int i = 1; f && !bad && same && i < doc.n; i++) {
            const db_csv_record *rec = &doc.rec[i];
            if (!keep[i]) continue;
            for (int j = 0; j < rec->n && !bad; j++) bad = db_csv_field(f, rec->field[j], j == 0);
            if (!bad) bad = fputc('\n', f) == EOF;
        }
        if (f && fclose(f) != 0) bad = 1;
        rc = bad ? db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory rewriting it", path)
                 : replace_file(r->dir, db_table_file[t], buf, n, err, errlen);
        free(buf);
        r->dropped_rows += drop;
    }
    /* its JSON Lines twin (--format-files csv,json) holds what the CSV held: the same rows out */
    if (!rc && !check_only && drop && exists_in(r->dir, db_table_jsonl_file[t])) {
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        int bad = !f || db_table_csv_jsonl(t, &doc, keep, f) != 0;
        if (f && fclose(f) != 0) bad = 1;
        rc = bad ? db_fail(err, errlen, DB_ERUNTIME, "%s/%s: out of memory rewriting it", r->dir, db_table_jsonl_file[t])
                 : replace_file(r->dir, db_table_jsonl_file[t], buf ? buf : "", n, err, errlen);
        free(buf);
    }
    free(keep);
    free(hdr);
    db_csv_doc_free(&doc);
    return rc;
}

/* meta.json of the previous invocation copied to meta.<k>.json (temporary file + rename): the
 * caller has the new meta.json written and synced, and renames it into place after this, so
 * there is a meta.json at every moment */
static int keep_old_meta(const char *dir, char *err, size_t errlen)
{
    char from[1200], name[32];
    if (db_path_join(from, sizeof from, dir, "meta.json") != 0 || !exists_in(dir, "meta.json"))
        return DB_OK;
    for (int k = 1; k < 100000; k++) {
        snprintf(name, sizeof name, "meta.%d.json", k);
        if (exists_in(dir, name)) continue;
        char *text;
        size_t len;
        int rc = db_read_file(from, &text, &len, err, errlen);
        if (rc) return rc;
        rc = replace_file(dir, name, text, len, err, errlen);
        free(text);
        return rc;
    }
    return DB_OK;
}

/* 1 when table t of DIR has a row of point id (t read into *doc by the caller) */
static int has_row(const db_csv_doc *doc, const char *id)
{
    int c = db_csv_col(doc, "point_id");
    for (int i = 1; c >= 0 && i < doc->n; i++)
        if (doc->rec[i].complete && c < doc->rec[i].n && !strcmp(doc->rec[i].field[c], id)) return 1;
    return 0;
}

/* Points points.done lists whose summary.csv row or requests.csv rows are gone (a table edited or
 * restored from a backup): taken off r->done, so that they run again (every point has both; the
 * requests rows are the baselines of the points after it). With apply, points.done loses each
 * and then the tables its other rows, one point at a time (as db_results_forget), and a line on
 * stderr names them. */
static int drop_rowless(db_results *r, int apply, char *err, size_t errlen)
{
    db_csv_doc doc[2];
    const db_table t[2] = {DB_TABLE_SUMMARY, DB_TABLE_REQUESTS};
    int have[2] = {0, 0}, rc = DB_OK, dropped = 0;
    char first[DB_POINT_ID_MAX] = "";
    for (int k = 0; k < 2 && !rc; k++) {
        char path[1200];
        db_path_join(path, sizeof path, r->dir, db_table_file[t[k]]);
        struct stat st;
        if (stat(path, &st) != 0) continue; /* no table at all: clean_table writes its header */
        rc = db_csv_read(path, &doc[k], err, errlen);
        have[k] = rc == DB_OK;
    }
    for (int j = 0; !rc && j < r->n_done;) {
        int gone = 0;
        for (int k = 0; k < 2; k++) gone |= !have[k] || !has_row(&doc[k], r->done[j]);
        if (!gone) {
            j++;
            continue;
        }
        if (!dropped++) snprintf(first, sizeof first, "%s", r->done[j]);
        free(r->done[j]);
        memmove(r->done + j, r->done + j + 1, sizeof *r->done * (size_t)(r->n_done - j - 1));
        r->n_done--;
        if (!apply) continue;
        r->done_fix = 1;
        rc = repair_done(r, err, errlen);
        for (int tt = 0; !rc && tt < DB_TABLE_COUNT; tt++) rc = clean_table(r, (db_table)tt, 0, err, errlen);
    }
    for (int k = 0; k < 2; k++)
        if (have[k]) db_csv_doc_free(&doc[k]);
    if (!rc && apply && dropped)
        fprintf(stderr, "resume: %d point%s listed in " DONE_FILE " without %s rows (%s%s) run%s again\n", dropped,
                dropped > 1 ? "s" : "", "their summary.csv or requests.csv", first, dropped > 1 ? ", ..." : "",
                dropped > 1 ? "" : "s");
    return rc;
}

/* "pid N on host H" of the lock's holder, as it wrote them into the lock file */
static void lock_holder(int fd, char *who, size_t n)
{
    char buf[300];
    ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    buf[k > 0 ? k : 0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    snprintf(who, n, "%s", buf[0] ? buf : "a process that has not written its pid yet");
}

/* Does "pid N on host H" name a process of this host that is gone? */
static int stale_holder(const char *who)
{
    long pid;
    char host[256];
    struct utsname u;
    if (sscanf(who, "pid %ld on host %255s", &pid, host) != 2 || pid <= 0 || uname(&u) != 0 || strcmp(host, u.nodename))
        return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int db_results_lock(const char *dir, int *fd, char *err, size_t errlen)
{
    char path[1200];
    *fd = -1;
    if (db_path_join(path, sizeof path, dir, LOCK_FILE) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (f < 0 && (errno == ENOENT || errno == ENOTDIR))
        return db_fail(err, errlen, DB_EINPUT, "--resume %s: no such results directory", dir);
    if (f < 0) return db_fail(err, errlen, DB_EINPUT, "%s: cannot lock: %s", dir, strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char who[300];
        if (e == EWOULDBLOCK) {
            /* the holder writes its pid right after locking: give it a moment. Until it has,
             * the file may still name an earlier run that has ended (a directory copied, or
             * locked before): a pid on this host that no longer exists is not the holder. */
            for (int i = 0; i < 20; i++) {
                lock_holder(f, who, sizeof who);
                if (strncmp(who, "a process", 9) && !stale_holder(who)) break;
                usleep(10000);
            }
        }
        close(f);
        if (e != EWOULDBLOCK) return db_fail(err, errlen, DB_EINPUT, "%s: cannot lock: %s", dir, strerror(e));
        return db_fail(err, errlen, DB_EINPUT,
                       "%s is in use by another dflash-bench run (%s): wait for it to end, or choose another --out",
                       dir, who);
    }
    struct utsname u;
    char me[300];
    int n = snprintf(me, sizeof me, "pid %ld on host %s\n", (long)getpid(), uname(&u) == 0 ? u.nodename : "?");
    ssize_t w = 0;
    if (ftruncate(f, 0) != 0 || (w = pwrite(f, me, (size_t)n, 0)) != n) {
        int e = w >= 0 ? EIO : errno; /* a short write sets no errno */
        close(f);
        return db_fail(err, errlen, DB_ERUNTIME, "%s: %s", path, strerror(e));
    }
    *fd = f;
    return DB_OK;
}

int db_results_open_locked(db_results *r, const char *dir, int lock_fd, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->lock_fd = lock_fd;
    if (snprintf(r->dir, sizeof r->dir, "%s", dir) >= (int)sizeof r->dir) {
        db_results_close(r);
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    }
    int rc = db_results_check_writable(dir, 1, err, errlen);
    if (!rc && r->lock_fd < 0) rc = db_results_lock(dir, &r->lock_fd, err, errlen);
    /* everything read and checked before anything changes: a failing open leaves DIR as it
     * was; meta.json is rotated only when the new one is written (db_results_write_meta) */
    if (!rc) rc = read_done(r, err, errlen);
    for (int t = 0; !rc && t < DB_TABLE_COUNT; t++) rc = clean_table(r, (db_table)t, 1, err, errlen);
    /* the repairs: each leaves a consistent directory if the next one fails */
    if (!rc) rc = repair_done(r, err, errlen);
    for (int t = 0; !rc && t < DB_TABLE_COUNT; t++) rc = clean_table(r, (db_table)t, 0, err, errlen);
    if (!rc) rc = drop_rowless(r, 1, err, errlen);
    if (!rc) r->rotate_meta = 1;
    if (rc) db_results_close(r);
    return rc;
}

int db_results_check_default(const char *dir, char *err, size_t errlen)
{
    if (!dir || !dir[0]) return db_fail(err, errlen, DB_EINPUT, "results directory: empty path");
    if (strlen(dir) >= 1000) return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == parent) slash[1] = 0;
    else *slash = 0;
    return check_creatable(dir, parent, err, errlen);
}

/* a fresh run: DIR checked (a default one: its parent), made at the first append */
static int open_fresh(db_results *r, const char *dir, int unique, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->lock_fd = -1;
    if (snprintf(r->dir, sizeof r->dir, "%s", dir) >= (int)sizeof r->dir)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    int rc = unique ? db_results_check_default(dir, err, errlen) : db_results_check_writable(dir, 0, err, errlen);
    if (rc) return rc;
    r->unique = unique;
    r->pending = 1;
    return DB_OK;
}

int db_results_open(db_results *r, const char *dir, int resume, char *err, size_t errlen)
{
    return resume ? db_results_open_locked(r, dir, -1, err, errlen) : open_fresh(r, dir, 0, err, errlen);
}

int db_results_open_default(db_results *r, const char *dir, char *err, size_t errlen)
{
    return open_fresh(r, dir, 1, err, errlen);
}

/* a fresh run whose first point failed: what materialize() made goes again (files, then the
 * directories it created), so no directory without a meta.json or a point is left to resume */
static void unmaterialize(db_results *r)
{
    const char *names[] = {DONE_FILE, "meta.json", LOCK_FILE};
    char p[1200];
    for (int t = 0; t < DB_TABLE_COUNT; t++)
        if (db_path_join(p, sizeof p, r->dir, db_table_file[t]) == 0) unlink(p);
    for (int t = 0; t < DB_TABLE_COUNT; t++)
        if (db_path_join(p, sizeof p, r->dir, db_table_jsonl_file[t]) == 0) unlink(p);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (db_path_join(p, sizeof p, r->dir, names[i]) == 0) unlink(p);
    if (r->lock_fd >= 0) close(r->lock_fd);
    r->lock_fd = -1;
    if (r->made[0]) {
        /* from DIR up to the topmost directory made (rmdir refuses one that is not empty) */
        char d[1024];
        snprintf(d, sizeof d, "%s", r->dir);
        for (;;) {
            if (rmdir(d) != 0 || !strcmp(d, r->made)) break;
            char *slash = strrchr(d, '/');
            if (!slash || slash == d) break;
            *slash = 0;
        }
    }
    r->claimed = 0;
    r->pending = 1;
}

/* a fresh run's first point: DIR with its parents, the table headers and the meta.json held so
 * far. Failing here is a runtime error: DIR passed the checks before the models loaded. */
/* a default directory (r->unique): its parents, then DIR itself with an exclusive mkdir, taking
 * DIR-2, DIR-3, ... when another run made it first; r->dir becomes the name made */
static int make_unique(db_results *r)
{
    char name[1024], parent[1024];
    snprintf(name, sizeof name, "%s", r->dir);
    snprintf(parent, sizeof parent, "%s", r->dir);
    char *slash = strrchr(parent, '/');
    int e = 0;
    if (slash && slash != parent) {
        *slash = 0;
        e = mkdir_p(parent, r->made, sizeof r->made);
    }
    for (int k = 1; !e && k <= MAX_SUFFIX; k++) {
        if (suffixed(r->dir, sizeof r->dir, name, k) != DB_OK) return ENAMETOOLONG;
        if (mkdir(r->dir, 0777) == 0) {
            if (!r->made[0]) snprintf(r->made, sizeof r->made, "%s", r->dir);
            return 0;
        }
        if (errno != EEXIST) return errno;
    }
    return e ? e : EEXIST;
}

static int materialize(db_results *r, char *err, size_t errlen)
{
    char asked[1024];
    snprintf(asked, sizeof asked, "%s", r->dir);
    int e = r->unique ? make_unique(r) : mkdir_p(r->dir, r->made, sizeof r->made), rc = DB_OK;
    if (e) return db_fail(err, errlen, DB_ERUNTIME, "%s: cannot create: %s", asked, strerror(e));
    /* claim DIR: another run started with the same --out (or in the same second) would mix
     * its rows with ours */
    char done[1200];
    if (db_path_join(done, sizeof done, r->dir, DONE_FILE) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", r->dir);
    boundary("create points.done");
    int fd = open(done, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0)
        return db_fail(err, errlen, DB_ERUNTIME, "%s: %s", r->dir,
                       errno == EEXIST ? "another run has written results here since this one started; "
                                         "choose another --out"
                                       : strerror(errno));
    close(fd);
    r->claimed = 1;
    /* held until the run ends: a --resume of DIR meanwhile would run our points again */
    rc = db_results_lock(r->dir, &r->lock_fd, err, errlen);
    if (rc == DB_EINPUT) rc = DB_ERUNTIME;
    for (int t = 0; !rc && t < DB_TABLE_COUNT; t++) {
        size_t n;
        char *h = header_text((db_table)t, &n);
        rc = h ? replace_file(r->dir, db_table_file[t], h, n, err, errlen)
               : db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting the header of %s", db_table_file[t]);
        free(h);
    }
    for (int t = 0; !rc && r->jsonl && t < DB_TABLE_COUNT; t++) rc = replace_file(r->dir, db_table_jsonl_file[t], "", 0, err, errlen);
    if (!rc && r->meta_text) rc = replace_file(r->dir, "meta.json", r->meta_text, strlen(r->meta_text), err, errlen);
    if (!rc) r->pending = 0;
    return rc;
}

static int append_file(const char *dir, const char *name, int create, const char *buf, size_t n,
                       char *err, size_t errlen)
{
    char path[1200];
    if (db_path_join(path, sizeof path, dir, name) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s/%s: path too long", dir, name);
    int fd = open(path, O_WRONLY | O_APPEND | (create ? O_CREAT : 0), 0666);
    if (fd < 0) return db_fail(err, errlen, DB_ERUNTIME, "%s: %s", path, strerror(errno));
    int bad = write_all(fd, buf, n) || (boundary("fdatasync"), fdatasync(fd));
    int e = errno;
    if (close(fd) != 0 && !bad) bad = 1, e = errno;
    return bad ? db_fail(err, errlen, DB_ERUNTIME, "%s: write failed: %s", path, strerror(e))
               : DB_OK;
}

int db_results_append(db_results *r, const db_run_meta *m, const db_point_raw *raw,
                      const db_point_summary *s, char *err, size_t errlen)
{
    char id[DB_POINT_ID_MAX];
    db_point_id(&raw->key, id, sizeof id);
    if (id_done(r, id))
        return db_fail(err, errlen, DB_EINPUT, "point %s is already in %s/" DONE_FILE, id, r->dir);
    int first = r->pending, rc = first ? materialize(r, err, errlen) : DB_OK;
    for (int t = 0; t < DB_TABLE_COUNT && !rc; t++) {
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        int bad = !f || db_table_rows((db_table)t, m, raw, s, f) != 0;
        if (f && fclose(f) != 0) bad = 1;
        rc = bad ? db_fail(err, errlen, DB_ERUNTIME, "formatting the rows of %s failed", id)
             : n ? append_file(r->dir, db_table_file[t], 0, buf, n, err, errlen)
                 : DB_OK;
        free(buf);
    }
    /* the JSON Lines twins after every CSV, before the commit record: a crash in between leaves
     * the point's CSV rows unlisted, and resume rewrites each twin from its cleaned CSV */
    for (int t = 0; t < DB_TABLE_COUNT && !rc && r->jsonl; t++) {
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        int bad = !f || db_table_jsonl((db_table)t, m, raw, s, f) != 0;
        if (f && fclose(f) != 0) bad = 1;
        rc = bad ? db_fail(err, errlen, DB_ERUNTIME, "formatting the JSON rows of %s failed", id)
             : n ? append_file(r->dir, db_table_jsonl_file[t], 1, buf, n, err, errlen)
                 : DB_OK;
        free(buf);
    }
    if (!rc) {
        size_t len = strlen(id);
        id[len] = '\n';
        rc = append_file(r->dir, DONE_FILE, 1, id, len + 1, err, errlen);
        id[len] = 0;
    }
    if (rc && first && r->claimed) unmaterialize(r);
    if (rc) return rc;
    if (!rc && add_done(r, id) != 0) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory listing point %s as done", id);
    return rc;
}

int db_results_write_meta(db_results *r, const db_run_meta *m, char *err, size_t errlen)
{
    cJSON *j = db_run_meta_json(m);
    char *t = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!t) return db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting meta.json");
    size_t n = strlen(t);
    char *s = db_realloc(t, n + 2);
    if (!s) {
        free(t);
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting meta.json");
    }
    s[n] = '\n';
    s[n + 1] = 0;
    if (r->pending) { /* written with the first point */
        free(r->meta_text);
        r->meta_text = s;
        return DB_OK;
    }
    /* the new meta.json written and synced, then the previous one kept as meta.<k>.json, then
     * the new one renamed into place: a failure or a crash at any step leaves a meta.json */
    char tmp[1300];
    int rc = write_temp(r->dir, "meta.json", s, n + 1, tmp, sizeof tmp, err, errlen);
    free(s);
    if (!rc && r->rotate_meta && (rc = keep_old_meta(r->dir, err, errlen)) != 0) unlink(tmp);
    if (!rc) rc = commit_temp(r->dir, "meta.json", tmp, err, errlen);
    if (!rc) r->rotate_meta = 0;
    return rc;
}

int db_results_load_raw(const db_results *r, const db_point_key *k, db_point_raw *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->key = *k;
    char path[1200], id[DB_POINT_ID_MAX];
    db_point_id(k, id, sizeof id);
    if (db_path_join(path, sizeof path, r->dir, db_table_file[DB_TABLE_REQUESTS]) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", r->dir);
    db_csv_doc d;
    int rc = db_csv_read(path, &d, err, errlen);
    if (rc) return rc;
    enum { ID, PI, REP, PT, OT, CY, CT, WALL, TA, TF, TE, DR, SE, CO, VE, HO, OR, EOS, NCOL };
    static const char *const names[NCOL] = {
        "point_id", "prompt_index", "repetition", "prompt_tokens", "output_tokens", "cycles", "cycle_tokens",
        "rep_wall_s", "t_admitted_ms", "t_first_token_ms", "t_finished_ms", "draft_ms",
        "select_ms", "correct_ms", "verify_ms", "host_ms", "oracle_len_sum", "finished_by_eos"};
    int c[NCOL];
    for (int j = 0; j < NCOL; j++)
        if ((c[j] = db_csv_col(&d, names[j])) < 0) {
            db_csv_doc_free(&d);
            return db_fail(err, errlen, DB_EINPUT, "%s: no column %s", path, names[j]);
        }
    /* the arrival and the turn (schema 10): read when there */
    int c_arr = db_csv_col(&d, "t_arrival_ms"), c_turn = db_csv_col(&d, "turn");
    int sched = k->request_rate > 0 && isfinite(k->request_rate);
    int np = 0, nr = 0, rows = 0;
    for (int i = 1; i < d.n; i++) {
        const db_csv_record *q = &d.rec[i];
        if (!q->complete || q->n <= c[EOS] || strcmp(q->field[c[ID]], id)) continue;
        int pi = atoi(q->field[c[PI]]), rp = atoi(q->field[c[REP]]);
        if (pi < 0 || rp < 0 || pi > 1 << 24 || rp > 1 << 20) continue;
        if (pi + 1 > np) np = pi + 1;
        if (rp + 1 > nr) nr = rp + 1;
        rows++;
    }
    if (!rows) {
        db_csv_doc_free(&d);
        return db_fail(err, errlen, DB_EINPUT, "%s: no requests of point %s", path, id);
    }
    /* a written point has one row per (prompt, repetition): indices beyond that are a hostile
     * or damaged file, not a reason to allocate np * nr records */
    if ((size_t)np * (size_t)nr > (size_t)rows) {
        db_csv_doc_free(&d);
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: point %s has %d request rows but prompt_index / repetition up to %d / %d",
                       path, id, rows, np - 1, nr - 1);
    }
    out->n_prompts = np;
    out->repetitions = nr;
    out->wall_s = db_calloc((size_t)nr, sizeof *out->wall_s);
    out->reqs = db_calloc((size_t)nr * (size_t)np, sizeof *out->reqs);
    if (!out->wall_s || !out->reqs) {
        db_point_raw_free(out);
        db_csv_doc_free(&d);
        return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory loading the %d request rows of point %s", path, rows, id);
    }
    for (int i = 1; i < d.n; i++) {
        const db_csv_record *q = &d.rec[i];
        if (!q->complete || q->n <= c[EOS] || strcmp(q->field[c[ID]], id)) continue;
        int pi = atoi(q->field[c[PI]]), rp = atoi(q->field[c[REP]]);
        if (pi < 0 || rp < 0 || pi >= np || rp >= nr) continue;
        db_req_stats *s = &out->reqs[(size_t)rp * (size_t)np + (size_t)pi];
        char *const *f = q->field;
        s->prompt_tokens = atoi(f[c[PT]]);
        s->output_tokens = atoi(f[c[OT]]);
        s->cycles = atoi(f[c[CY]]);
        s->cycle_tokens = atoi(f[c[CT]]);
        s->t_admitted = strtod(f[c[TA]], NULL) * 1e-3;
        s->t_first_token = strtod(f[c[TF]], NULL) * 1e-3;
        s->t_finished = strtod(f[c[TE]], NULL) * 1e-3;
        s->t_draft = strtod(f[c[DR]], NULL) * 1e-3;
        s->t_select = strtod(f[c[SE]], NULL) * 1e-3;
        s->t_correct = strtod(f[c[CO]], NULL) * 1e-3;
        s->t_verify = strtod(f[c[VE]], NULL) * 1e-3;
        s->t_host = strtod(f[c[HO]], NULL) * 1e-3;
        s->oracle_len_sum = atol(f[c[OR]]);
        s->finished_by_eos = atoi(f[c[EOS]]);
        if (c_arr >= 0 && c_arr < q->n && sched) s->scheduled = 1, s->t_arrival = strtod(f[c_arr], NULL) * 1e-3;
        if (c_turn >= 0 && c_turn < q->n) s->turn = atoi(f[c_turn]);
        out->wall_s[rp] = strtod(f[c[WALL]], NULL);
    }
    db_csv_doc_free(&d);
    return DB_OK;
}

int db_results_forget(db_results *r, const db_point_key *keys, int n, char *err, size_t errlen)
{
    char id[DB_POINT_ID_MAX];
    int rc = DB_OK;
    /* one point at a time: its id out of the index (one rename), then its rows out of the
     * tables. A crash in between leaves the rows of that one point unlisted, which the next
     * resume drops; forgetting the whole group's ids first would leave rows of several
     * unfinished points (the "at most one" of results_dir.h broken) */
    for (int i = 0; i < n && !rc; i++) {
        db_point_id(&keys[i], id, sizeof id);
        int at = -1;
        for (int j = 0; j < r->n_done && at < 0; j++)
            if (!strcmp(r->done[j], id)) at = j;
        if (at < 0) continue;
        free(r->done[at]);
        memmove(r->done + at, r->done + at + 1, sizeof *r->done * (size_t)(r->n_done - at - 1));
        r->n_done--;
        r->done_fix = 1;
        rc = repair_done(r, err, errlen);
        for (int t = 0; !rc && t < DB_TABLE_COUNT; t++) rc = clean_table(r, (db_table)t, 0, err, errlen);
    }
    if (!rc) fprintf(stderr, "resume: a group of %d points was partly written; it runs again\n", n);
    return rc;
}

/* DIR's points.done read into r, nothing else opened or changed (count_done, listed) */
static int read_only(db_results *r, const char *dir, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->lock_fd = -1;
    if (snprintf(r->dir, sizeof r->dir, "%s", dir) >= (int)sizeof r->dir)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    return read_done(r, err, errlen);
}

int db_results_count_done(const char *dir, const db_point_key *keys, int n, int *done, char *err,
                          size_t errlen)
{
    db_results r;
    *done = 0;
    int rc = read_only(&r, dir, err, errlen);
    if (!rc) rc = drop_rowless(&r, 0, err, errlen); /* those run again: not done */
    for (int i = 0; i < n && !rc; i++) *done += db_results_is_done(&r, &keys[i]);
    db_results_close(&r);
    return rc;
}

int db_results_listed(const char *dir, int *n, char *err, size_t errlen)
{
    db_results r;
    int rc = read_only(&r, dir, err, errlen);
    *n = r.n_done;
    db_results_close(&r);
    return rc;
}

void db_results_close(db_results *r)
{
    for (int i = 0; i < r->n_done; i++) free(r->done[i]);
    free(r->done);
    r->done = NULL;
    r->n_done = r->cap_done = 0;
    free(r->meta_text);
    r->meta_text = NULL;
    if (r->lock_fd >= 0) close(r->lock_fd); /* the lock goes with its descriptor */
    r->lock_fd = -1;
}

const db_point_raw *db_results_baseline(const db_results *r, const db_point_raw *done, int n,
                                        const db_point_key *k, db_point_raw *loaded, char *err,
                                        size_t errlen)
{
    db_point_key ar;
    db_point_baseline_key(k, &ar);
    for (int i = 0; i < n; i++)
        if (db_point_key_equal(&done[i].key, &ar)) return &done[i];
    if (db_results_is_done(r, &ar) && db_results_load_raw(r, &ar, loaded, err, errlen) == 0) return loaded;
    return NULL;
}
