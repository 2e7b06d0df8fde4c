/* test_compare.c — `compare` (report/compare.h) on recorded results directories.
 *
 * tests/data/results/run-1 and run-2 are two runs of one build on the embedded pair, one after the
 * other on a 2-core machine shared with compilers (at nice -19, --threads 1): `run --dataset math
 * -v ar,dflash,dflash2,dspark -B 4,8 -c 1,4 -n 24 --max-samples 4 -r 3 --max-rounds 5 --min-time
 * 0.25 --threads 1`. Their c1 rows came out stable, the c4 rows not (spread 8-14%). The
 * references are independent of the code under test: ids written by the binary that recorded
 * the directories, tau and acceptance identical between two greedy runs (the decoding is
 * deterministic), and slowdowns planted here by editing the recorded rounds. Their requests.csv
 * keeps the columns `compare` and the notebook read (ids, axes, rounds, request times): the
 * provenance repeated on every row was cut to keep tests/data under 5 MB. */
#include "base/csv_io.h"
#include "base/util.h"
#include "report/compare.h"
#include "report/report_csv.h"
#include "tap.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const files[] = {"summary.csv", "acceptance.csv", "histogram.csv", "requests.csv", "points.done", "meta.json"};

static int copy_file(const char *from, const char *to)
{
    char *t;
    size_t n;
    char err[256];
    if (db_read_file(from, &t, &n, err, sizeof err)) return -1;
    FILE *f = fopen(to, "wb");
    int bad = !f || fwrite(t, 1, n, f) != n;
    if (f && fclose(f)) bad = 1;
    free(t);
    return bad ? -1 : 0;
}

static int copy_dir(const char *from, const char *to)
{
    char a[1200], b[1200];
    if (mkdir(to, 0777)) return -1;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(a, sizeof a, "%s/%s", from, files[i]);
        snprintf(b, sizeof b, "%s/%s", to, files[i]);
        if (copy_file(a, b)) return -1;
    }
    return 0;
}

/* dir/file rewritten with column `col` times `factor` in the rows whose point_id holds `match`
 * (every row when NULL); skip_id: drop that point's rows instead */
static int edit(const char *dir, const char *file, const char *match, const char *col, double factor)
{
    char p[1200], err[256];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    db_csv_doc d;
    if (db_csv_read(p, &d, err, sizeof err)) return -1;
    int c = db_csv_col(&d, col), id = db_csv_col(&d, "point_id");
    FILE *f = fopen(p, "w");
    int bad = !f || c < 0 || id < 0;
    for (int i = 0; !bad && i < d.n; i++) {
        int hit = i > 0 && (!match || strstr(d.rec[i].field[id], match));
        for (int j = 0; j < d.rec[i].n; j++) {
            char v[64];
            const char *s = d.rec[i].field[j];
            if (hit && j == c && s[0]) snprintf(v, sizeof v, "%.10g", strtod(s, NULL) * factor), s = v;
            bad |= db_csv_field(f, s, j == 0) != 0;
        }
        fputc('\n', f);
    }
    if (f) fclose(f);
    db_csv_doc_free(&d);
    return bad ? -1 : 0;
}

/* points.done without the ids holding `match` (the point then is not completed) */
static int drop_done(const char *dir, const char *match)
{
    char p[1200], line[1100], err[256];
    snprintf(p, sizeof p, "%s/points.done", dir);
    char *t;
    size_t n;
    if (db_read_file(p, &t, &n, err, sizeof err)) return -1;
    FILE *f = fopen(p, "w");
    for (char *s = t, *e; f && (e = strchr(s, '\n')); s = e + 1) {
        snprintf(line, sizeof line, "%.*s", (int)(e - s), s);
        if (!strstr(line, match)) fprintf(f, "%s\n", line);
    }
    free(t);
    return f && !fclose(f) ? 0 : -1;
}

static const db_cmp_row *find(const db_compare *c, const char *variant, int B, int conc)
{
    for (int i = 0; i < c->n; i++) {
        const db_cmp_row *r = &c->rows[i];
        const db_results_read *s = r->b >= 0 ? c->base : c->new_;
        const db_point_key *k = &s->pt[r->b >= 0 ? r->b : r->n].key;
        if (!strcmp(k->variant, variant) && k->block_size == B && k->concurrency == conc) return r;
    }
    return NULL;
}

int main(void)
{
    char err[1024] = "", a[1200], b[1200], tmp[] = "/tmp/db-compare-XXXXXX";
    snprintf(a, sizeof a, "%s", tu_data("results/run-1"));
    snprintf(b, sizeof b, "%s", tu_data("results/run-2"));
    if (!mkdtemp(tmp)) tap_skip_all("no temporary directory");
    db_results_read ra, rb;
    int rc = db_results_read_init(&ra, a, err, sizeof err);
    if (!tap_ok(rc == 0, "run-1 read (%s)", err) || !tap_ok(db_results_read_init(&rb, b, err, sizeof err) == 0, "run-2 read (%s)", err))
        return tap_done();

    /* the axis table rebuilds the ids the recording binary wrote */
    int same_id = 0;
    for (int i = 0; i < ra.n; i++) {
        char id[DB_POINT_ID_MAX];
        db_point_id(&ra.pt[i].key, id, sizeof id);
        same_id += !strcmp(id, db_results_read_field(&ra, i, "point_id"));
    }
    tap_ok(ra.n >= 10 && same_id == ra.n, "db_point_id from db_point_axes == the recorded point_id (%d of %d rows)", same_id, ra.n);

    /* two runs of one build: same for >= 90% of the rows stable on both sides; tau and the
     * acceptance rates identical (greedy decoding is deterministic) */
    db_compare c;
    rc = db_compare_init(&c, &ra, &rb, "throughput", DB_COMPARE_MIN_CHANGE, err, sizeof err);
    tap_ok(rc == 0 && c.n == ra.n, "compare run-1 run-2: %d rows (%s)", c.n, err);
    int stable = 0, same = 0, exact = 0, matched = 0;
    for (int i = 0; !rc && i < c.n; i++) {
        const db_cmp_row *r = &c.rows[i];
        matched += r->b >= 0 && r->n >= 0;
        exact += r->b >= 0 && r->n >= 0 && r->tau_diff == 0 && !(r->acc_diff > 0);
        if (strcmp(r->verdict, "unstable") && r->b >= 0 && r->n >= 0) stable++, same += !strcmp(r->verdict, "same");
    }
    int calm = 0;
    for (int i = 0; !rc && i < c.n; i++) calm += c.rows[i].b >= 0 && c.rows[i].n >= 0 && !strcmp(c.rows[i].change, "same");
    tap_diag("%d of %d matched rows stable on both sides, %d of them same; %d of %d rows' intervals say same", stable,
             matched, same, calm, matched);
    if (stable) tap_ok(same * 10 >= stable * 9, "same build: %d of %d stable rows same", same, stable);
    else printf("ok %d - same build: stable rows same # SKIP no row stable on both sides in the recording\n", ++tap_n);
    tap_ok(matched == ra.n, "same build: every row matched (%d of %d)", matched, ra.n);
    tap_ok(exact == matched, "same build: tau and per-position acceptance identical in %d of %d rows", exact, matched);
    db_compare_free(&c);

    /* a 20% slowdown planted in every dflash2 row: its rounds take 1.25x as long */
    char slow[1300];
    snprintf(slow, sizeof slow, "%s/slow", tmp);
    int ok = copy_dir(a, slow) == 0 && edit(slow, "requests.csv", "|dflash2|", "rep_wall_s", 1.25) == 0 &&
             edit(slow, "summary.csv", "|dflash2|", "throughput_tok_s", 1 / 1.25) == 0 &&
             edit(slow, "summary.csv", "|dflash2|", "speedup", 1 / 1.25) == 0;
    db_results_read rs;
    rc = ok ? db_results_read_init(&rs, slow, err, sizeof err) : -1;
    tap_ok(rc == 0, "planted directory read (%s)", err);
    if (rc == 0) {
        for (int m = 0; m < 2; m++) {
            const char *metric = m ? "speedup" : "throughput";
            rc = db_compare_init(&c, &ra, &rs, metric, DB_COMPARE_MIN_CHANGE, err, sizeof err);
            int slower = 0, dstable = 0, others_same = 0, others = 0, ratio_ok = 1;
            for (int i = 0; !rc && i < c.n; i++) {
                const db_cmp_row *r = &c.rows[i];
                const db_point_key *k = &ra.pt[r->b].key;
                int planted = !strcmp(k->variant, "dflash2");
                int st = ra.pt[r->b].stable == 1;
                if (planted) {
                    ratio_ok &= fabs((m ? r->spd : r->thr) - 0.8) < 1e-6 && (!st || (m ? r->spd_hi : r->thr_hi) < 1);
                    dstable += st, slower += st && !strcmp(r->verdict, "slower");
                } else if (st && (m == 0 || strcmp(k->variant, "ar"))) {
                    /* unchanged rows: ratio exactly 1 */
                    others++, others_same += !strcmp(r->verdict, "same") && fabs(m ? r->spd - 1 : r->thr - 1) < 1e-9;
                }
            }
            tap_ok(rc == 0 && ratio_ok, "planted 20%% slowdown, %s: every dflash2 row at ratio 0.8, a stable one's CI below 1", metric);
            tap_ok(dstable > 0 && slower == dstable, "planted, %s: %d of %d stable dflash2 rows slower", metric, slower, dstable);
            tap_ok(others > 0 && others_same == others, "planted, %s: %d of %d untouched stable rows same at ratio 1", metric,
                   others_same, others);
            tap_ok(db_compare_regressions(&c, 15) == slower && db_compare_regressions(&c, 25) == 0,
                   "planted, %s: --fail-on-regression 15 counts them, 25 none", metric);
            db_compare_free(&c);
        }
        db_results_read_free(&rs);
    }

    /* the machine 20% slower for every row, `ar` included (a neighbour, the host's clock): the
     * footer names the baseline's move, and the speedups, which divide it out, stay the same */
    char host[1300];
    snprintf(host, sizeof host, "%s/host", tmp);
    ok = copy_dir(a, host) == 0 && edit(host, "requests.csv", NULL, "rep_wall_s", 1.25) == 0 &&
         edit(host, "summary.csv", NULL, "throughput_tok_s", 1 / 1.25) == 0;
    rc = ok ? db_results_read_init(&rs, host, err, sizeof err) : -1;
    tap_ok(rc == 0, "machine-wide slowdown directory read (%s)", err);
    if (rc == 0) {
        for (int m = 0; m < 2; m++) {
            rc = db_compare_init(&c, &ra, &rs, m ? "speedup" : "throughput", DB_COMPARE_MIN_CHANGE, err, sizeof err);
            int stable = 0, same = 0;
            for (int i = 0; !rc && i < c.n; i++) {
                const db_cmp_row *r = &c.rows[i];
                if (r->b < 0 || r->n < 0 || ra.pt[r->b].stable != 1) continue;
                stable++, same += !strcmp(r->verdict, "same") && fabs(r->spd - 1) < 1e-6;
            }
            char *md = NULL;
            size_t mdn = 0;
            FILE *mf = rc ? NULL : open_memstream(&md, &mdn);
            int printed = mf && db_compare_print(&c, mf, "md", err, sizeof err) == 0;
            if (mf) fclose(mf);
            int says = printed && md && strstr(md, "the ar baseline moved as well: its throughput NEW/BASE is a median 0.800") != NULL;
            if (m == 0) {
                tap_ok(rc == 0 && c.n_ar > 0 && fabs(c.ar_shift - 0.8) < 1e-6 && fabs(c.ar_shift_max - 0.8) < 1e-6,
                       "machine-wide: the ar rows' median NEW/BASE %.4f over %d rows (0.8 planted)", c.ar_shift, c.n_ar);
                tap_ok(says, "machine-wide, throughput: the md footer names the baseline's move");
            } else {
                tap_ok(stable > 0 && same == stable, "machine-wide, speedup: %d of %d stable rows same at ratio 1", same, stable);
                tap_ok(printed && !says, "machine-wide, speedup: no baseline footer (the metric divides it out)");
            }
            free(md);
            if (!rc) db_compare_free(&c);
        }
        db_results_read_free(&rs);
    }

    /* one side only: dflash B8 c4 not completed in NEW (points.done), dspark B4 c1 in BASE */
    char one[1300], two[1300];
    snprintf(one, sizeof one, "%s/one", tmp);
    snprintf(two, sizeof two, "%s/two", tmp);
    db_results_read r1, r2;
    ok = copy_dir(a, one) == 0 && drop_done(one, "|dspark|B4|c1|") == 0 && copy_dir(b, two) == 0 &&
         drop_done(two, "|dflash|B8|c4|") == 0 && db_results_read_init(&r1, one, err, sizeof err) == 0;
    if (ok && db_results_read_init(&r2, two, err, sizeof err) != 0) ok = 0, db_results_read_free(&r1);
    tap_ok(ok, "one-sided directories read (%s)", err);
    if (ok) {
        rc = db_compare_init(&c, &r1, &r2, "throughput", DB_COMPARE_MIN_CHANGE, err, sizeof err);
        const db_cmp_row *x = rc ? NULL : find(&c, "dflash", 8, 4), *y = rc ? NULL : find(&c, "dspark", 4, 1);
        int ones = 0;
        for (int i = 0; !rc && i < c.n; i++) ones += c.rows[i].b < 0 || c.rows[i].n < 0;
        tap_ok(x && !strcmp(x->verdict, "only-base") && x->n < 0, "a point NEW lacks: only-base");
        tap_ok(y && !strcmp(y->verdict, "only-new") && y->b < 0, "a point BASE lacks: only-new");
        tap_ok(ones == 2 && c.n == r1.n + 1, "the others matched (%d rows, %d one-sided)", c.n, ones);
        /* csv: one line per row and the header */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        int prc = db_compare_print(&c, f, "csv", err, sizeof err);
        fclose(f);
        int lines = 0;
        for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
        tap_ok(prc == 0 && lines == c.n + 1 && strstr(buf, "only-base") && strstr(buf, "only-new"),
               "csv: %d lines for %d rows, the one-sided rows among them", lines, c.n);
        free(buf);
        db_compare_free(&c);
        db_results_read_free(&r1);
        db_results_read_free(&r2);
    }

    /* bad directories: absent, not results, a summary edited without its requests */
    db_results_read rx;
    char absent[1300], lie[1300];
    snprintf(absent, sizeof absent, "%s/absent", tmp);
    rc = db_results_read_init(&rx, absent, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, absent), "absent directory: DB_EINPUT naming it (%s)", err);
    rc = db_results_read_init(&rx, tmp, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "summary.csv"), "no results: DB_EINPUT (%s)", err);
    snprintf(lie, sizeof lie, "%s/lie", tmp);
    ok = copy_dir(a, lie) == 0 && edit(lie, "summary.csv", "|dspark|B8|c4|", "throughput_tok_s", 1.1) == 0;
    rc = ok ? db_results_read_init(&rx, lie, err, sizeof err) : -1;
    tap_ok(rc == DB_EINPUT && strstr(err, "dspark|B8|c4") && strstr(err, "throughput_tok_s"),
           "a summary throughput that is not its requests': DB_EINPUT naming the point (%s)", err);
    snprintf(lie, sizeof lie, "%s/cut", tmp);
    ok = copy_dir(a, lie) == 0 && edit(lie, "requests.csv", "|ar|B1|c4|", "prompt_index", 0) == 0;
    rc = ok ? db_results_read_init(&rx, lie, err, sizeof err) : -1;
    tap_ok(rc == DB_EINPUT && strstr(err, "requests.csv") && strstr(err, "|ar|B1|c4|"),
           "request rows given twice: DB_EINPUT naming the file and point (%s)", err);

    db_results_read_free(&ra);
    db_results_read_free(&rb);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) tap_diag("could not remove %s", tmp);
    return tap_done();
}
