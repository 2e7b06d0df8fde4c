/* compare.c — rows of two results directories matched and judged (definitions: compare.h). */
#include "report/compare.h"
#include "base/csv_io.h"
#include "base/json_build.h"
#include "base/quantile.h"
#include "base/util.h"
#include "engine/variant.h"
#include "report/report.h"
#include "result/timing.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int is_ar(const db_point_key *k) { return db_variant_is_baseline(db_variant_lookup(k->variant)); }

/* the id of k with the axes outside `keep` zeroed (the key two sides share) */
static void key_id(const db_point_key *k, const int *keep, char *buf, size_t n)
{
    db_point_key x = *k;
    for (int a = 0; a < db_point_n_axes; a++)
        if (!keep[a]) memset((char *)&x + db_point_axes[a].offset, 0, db_point_axes[a].size);
    db_point_id(&x, buf, n);
}

/* a side's points by id (key_id over `keep`), sorted for bsearch */
typedef struct {
    char id[DB_POINT_ID_MAX];
    int i;
} id_ix;

static int cmp_ix(const void *a, const void *b) { return strcmp(((const id_ix *)a)->id, ((const id_ix *)b)->id); }

static id_ix *index_side(const db_results_read *r, const int *keep)
{
    id_ix *x = db_malloc(sizeof *x * (size_t)(r->n ? r->n : 1));
    for (int i = 0; x && i < r->n; i++) {
        key_id(&r->pt[i].key, keep, x[i].id, sizeof x[i].id);
        x[i].i = i;
    }
    if (x) qsort(x, (size_t)r->n, sizeof *x, cmp_ix);
    return x;
}

static int lookup(const id_ix *x, int n, const db_point_key *k, const int *keep)
{
    id_ix want;
    key_id(k, keep, want.id, sizeof want.id);
    const id_ix *hit = bsearch(&want, x, (size_t)n, sizeof *x, cmp_ix);
    return hit ? hit->i : -1;
}

/* the index of point i's `ar` baseline on its side (x: the side's index over its own axes), -1
 * when none */
static int baseline_of(const db_results_read *r, const id_ix *x, int i)
{
    db_point_key ar;
    db_point_baseline_key(&r->pt[i].key, &ar);
    return lookup(x, r->n, &ar, r->has_axis);
}

/* the bootstrap of one side's point and its baseline: clusters, draws */
typedef struct {
    db_clusters p, a; /* a.tok NULL: no baseline */
    int *idx, *rp, *ra;
} side;

static void side_free(side *s)
{
    db_clusters_free(&s->p);
    db_clusters_free(&s->a);
    free(s->idx), free(s->rp), free(s->ra);
}

static int side_init(side *s, const db_point_raw *p, const db_point_raw *ar)
{
    memset(s, 0, sizeof *s);
    if (db_clusters_init(&s->p, p)) return -1;
    if (ar) {
        db_point_raw a = *ar;
        a.n_distinct = s->p.D; /* the same prompts, grouped like the point's (report.c) */
        if (db_clusters_init(&s->a, &a)) return side_free(s), -1;
    }
    s->idx = db_malloc(sizeof(int) * (size_t)s->p.D);
    s->rp = db_malloc(sizeof(int) * (size_t)s->p.R);
    s->ra = db_malloc(sizeof(int) * (size_t)(ar ? s->a.R : 1));
    if (!s->idx || !s->rp || !s->ra) return side_free(s), -1;
    return 0;
}

/* one resample of a side: rounds drawn (shared with its baseline when they ran as many), its
 * clusters from `idx` (NULL: drawn here); T and S of the side */
static void side_draw(side *s, db_rng *g, const int *idx, double *t, double *sp)
{
    for (int j = 0; j < s->p.D; j++) s->idx[j] = idx ? idx[j] : (int)(db_rng_next(g) % (uint64_t)s->p.D);
    for (int q = 0; q < s->p.R; q++) s->rp[q] = (int)(db_rng_next(g) % (uint64_t)s->p.R);
    *t = db_clusters_rate(&s->p, s->idx, s->rp);
    *sp = NAN;
    if (!s->a.tok) return;
    for (int q = 0; q < s->a.R; q++) s->ra[q] = s->a.R == s->p.R ? s->rp[q] : (int)(db_rng_next(g) % (uint64_t)s->a.R);
    *sp = *t / db_clusters_rate(&s->a, s->idx, s->ra);
}

static int enough(const db_point_raw *p) { return p->repetitions >= 2 && (p->n_distinct > 0 ? p->n_distinct : p->n_prompts) >= 2; }

/* the CIs of a matched row (compare.h, CI) */
static int bootstrap(db_cmp_row *row, const db_point_raw *pb, const db_point_raw *ab, const db_point_raw *pn,
                     const db_point_raw *an)
{
    row->thr_lo = row->thr_hi = row->spd_lo = row->spd_hi = NAN;
    if (!enough(pb) || !enough(pn) || (ab && !enough(ab)) || (an && !enough(an))) return 0;
    side b, n;
    if (side_init(&b, pb, ab)) return -1;
    if (side_init(&n, pn, an)) return side_free(&b), -1;
    double *thr = db_malloc(sizeof(double) * DB_BOOTSTRAP), *spd = db_malloc(sizeof(double) * DB_BOOTSTRAP);
    int rc = !thr || !spd ? -1 : 0, mt = 0, ms = 0;
    db_rng g;
    db_rng_seed(&g, DB_COMPARE_SEED);
    for (int k = 0; !rc && k < DB_BOOTSTRAP; k++) {
        double tb, sb, tn, sn;
        side_draw(&b, &g, NULL, &tb, &sb);
        side_draw(&n, &g, n.p.D == b.p.D ? b.idx : NULL, &tn, &sn);
        if (isfinite(tn / tb)) thr[mt++] = tn / tb;
        if (isfinite(sn / sb)) spd[ms++] = sn / sb;
    }
    double lo = (1 - DB_COMPARE_LEVEL) / 2;
    if (!rc && mt) row->thr_lo = db_quantile(thr, mt, lo), row->thr_hi = db_quantile(thr, mt, 1 - lo);
    if (!rc && ms && ab && an) row->spd_lo = db_quantile(spd, ms, lo), row->spd_hi = db_quantile(spd, ms, 1 - lo);
    free(thr), free(spd);
    side_free(&b), side_free(&n);
    return rc;
}

/* ratios, CIs, verdict and differences of BASE point b and NEW point n */
static int judge(db_compare *c, db_cmp_row *row, const id_ix *xb, const id_ix *xn)
{
    const db_read_point *B = &c->base->pt[row->b], *N = &c->new_->pt[row->n];
    int ib = baseline_of(c->base, xb, row->b), in = baseline_of(c->new_, xn, row->n), ar = is_ar(&B->key);
    const db_point_raw *ab = ar || ib < 0 || in < 0 ? NULL : &c->base->pt[ib].raw;
    const db_point_raw *an = ab ? &c->new_->pt[in].raw : NULL;
    row->thr = db_throughput(&N->raw) / db_throughput(&B->raw);
    row->spd = ar ? 1 : ab ? (db_throughput(&N->raw) / db_throughput(an)) / (db_throughput(&B->raw) / db_throughput(ab)) : NAN;
    if (bootstrap(row, &B->raw, ab, &N->raw, an)) return -1;
    if (ar) row->spd_lo = row->spd_hi = 1;
    double r = c->metric == DB_CMP_SPEEDUP ? row->spd : row->thr;
    double lo = c->metric == DB_CMP_SPEEDUP ? row->spd_lo : row->thr_lo;
    double hi = c->metric == DB_CMP_SPEEDUP ? row->spd_hi : row->thr_hi;
    row->significant = isfinite(lo) && isfinite(hi) ? lo > 1 || hi < 1 : -1;
    row->change = row->significant < 0 ? "unknown"
                  : row->significant && fabs(r - 1) >= c->min_change ? (r > 1 ? "faster" : "slower")
                                                                      : "same";
    row->verdict = B->stable != 1 || N->stable != 1 ? "unstable" : row->change;
    row->tau_diff = N->tau - B->tau;
    row->acc_diff = 0;
    int blk = B->key.block_size > 0 ? B->key.block_size : 1;
    for (int i = 1; i < blk; i++) {
        double d = fabs(N->accept[i] - B->accept[i]);
        if (isnan(B->accept[i]) != isnan(N->accept[i])) d = INFINITY; /* measured on one side only */
        if (d > row->acc_diff) row->acc_diff = d;
    }
    if (ar) row->acc_diff = NAN;
    return 0;
}

/* the baseline's own move: the median NEW/BASE throughput of the matched `ar` rows */
static void ar_shift(db_compare *c)
{
    c->ar_shift = c->ar_shift_min = c->ar_shift_max = NAN;
    double *x = db_malloc((size_t)(c->n + 1) * sizeof *x);
    if (!x) return;
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        const db_cmp_row *r = &c->rows[i];
        if (r->b >= 0 && r->n >= 0 && isfinite(r->thr) && is_ar(&c->base->pt[r->b].key)) x[k++] = r->thr;
    }
    c->n_ar = k;
    if (k) {
        c->ar_shift = db_quantile(x, k, 0.5); /* sorts x */
        c->ar_shift_min = x[0], c->ar_shift_max = x[k - 1];
    }
    free(x);
}

int db_compare_init(db_compare *c, const db_results_read *base, const db_results_read *new_,
                    const char *metric, double min_change, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->base = base, c->new_ = new_, c->min_change = min_change;
    if (!strcmp(metric, "throughput")) c->metric = DB_CMP_THROUGHPUT;
    else if (!strcmp(metric, "speedup")) c->metric = DB_CMP_SPEEDUP;
    else return db_fail(err, errlen, DB_EINPUT, "--metric %s: throughput or speedup", metric);
    if (!(min_change >= 0 && min_change < 1)) return db_fail(err, errlen, DB_EINPUT, "--min-change: 0 to below 100 (percent)");
    for (int a = 0; a < db_point_n_axes; a++) {
        c->key_axis[a] = base->has_axis[a] && new_->has_axis[a];
        if (base->has_axis[a] != new_->has_axis[a])
            fprintf(stderr, "compare: %s has no column %s: rows matched without that axis\n",
                    base->has_axis[a] ? new_->dir : base->dir, db_point_axes[a].column);
    }
    c->rows = db_calloc((size_t)(base->n + new_->n + 1), sizeof *c->rows);
    char *used = db_calloc((size_t)(new_->n + 1), 1);
    /* NEW by the shared key; each side by its own axes (baselines) */
    id_ix *xm = index_side(new_, c->key_axis), *xb = index_side(base, base->has_axis), *xn = index_side(new_, new_->has_axis);
    int rc = DB_OK;
    if (!c->rows || !used || !xm || !xb || !xn)
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory comparing %d and %d rows", base->n, new_->n);
    for (int i = 0; !rc && i < base->n; i++) {
        db_cmp_row *row = &c->rows[c->n++];
        row->b = i, row->n = -1, row->verdict = "only-base";
        int j = lookup(xm, new_->n, &base->pt[i].key, c->key_axis);
        if (j >= 0 && !used[j]) row->n = j, used[j] = 1;
        if (row->n >= 0 && judge(c, row, xb, xn)) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory in the bootstrap");
    }
    for (int j = 0; !rc && j < new_->n; j++)
        if (!used[j]) c->rows[c->n++] = (db_cmp_row){.b = -1, .n = j, .verdict = "only-new"};
    free(used), free(xm), free(xb), free(xn);
    if (!rc) ar_shift(c);
    /* md names a row by the main axes and those that vary */
    static const char *const main_axes[] = {"dataset", "variant", "block_size", "concurrency", "temperature"};
    for (int a = 0; a < db_point_n_axes; a++) {
        for (size_t m = 0; m < sizeof main_axes / sizeof *main_axes; m++)
            c->show_axis[a] |= !strcmp(db_point_axes[a].column, main_axes[m]);
        /* an axis that varies among rows of one variant (the drafter that comes with a variant
         * names no row) */
        int vcol[2] = {db_csv_col(&base->summary, "variant"), db_csv_col(&new_->summary, "variant")};
        const char *fv[64] = {0}, *fx[64] = {0};
        int nf = 0;
        for (int sd = 0; sd < 2 && !c->show_axis[a]; sd++) {
            const db_results_read *r = sd ? new_ : base;
            int col = db_csv_col(&r->summary, db_point_axes[a].column);
            for (int i = 0; col >= 0 && vcol[sd] >= 0 && i < r->n && !c->show_axis[a]; i++) {
                char *const *f = r->summary.rec[r->pt[i].rec].field;
                int k = 0;
                while (k < nf && strcmp(fv[k], f[vcol[sd]])) k++;
                if (k == nf && nf < 64) fv[nf] = f[vcol[sd]], fx[nf++] = f[col];
                else if (k < nf && strcmp(fx[k], f[col])) c->show_axis[a] = 1;
            }
        }
    }
    if (rc) db_compare_free(c);
    return rc;
}

void db_compare_free(db_compare *c)
{
    free(c->rows);
    c->rows = NULL;
    c->n = 0;
}

int db_compare_regressions(const db_compare *c, double pct)
{
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        const db_cmp_row *r = &c->rows[i];
        double x = c->metric == DB_CMP_SPEEDUP ? r->spd : r->thr;
        k += !strcmp(r->verdict, "slower") && x < 1 - pct / 100;
    }
    return k;
}

/* ---- output ---------------------------------------------------------------------------- */

/* a row's point: the side it has */
static const db_read_point *pt_of(const db_compare *c, const db_cmp_row *r, const db_results_read **side)
{
    *side = r->b >= 0 ? c->base : c->new_;
    return &(*side)->pt[r->b >= 0 ? r->b : r->n];
}

/* "math dflash2 B8 c4 T0" from the shown axes */
static void row_name(const db_compare *c, const db_cmp_row *r, char *buf, size_t n)
{
    const db_results_read *s;
    const db_read_point *p = pt_of(c, r, &s);
    size_t o = 0;
    buf[0] = 0;
    for (int a = 0; a < db_point_n_axes && o < n; a++) {
        const char *v = c->show_axis[a] ? db_results_read_field(s, (int)(p - s->pt), db_point_axes[a].column) : NULL;
        if (v && v[0]) o += (size_t)snprintf(buf + o, n - o, "%s%s%s", o ? " " : "", db_point_axes[a].id_prefix, v);
    }
}

/* the output columns of a row: name, value, number (JSON) */
typedef struct {
    int n;
    const char *name[64];
    char val[64][96];
    unsigned char num[64];
} cols;

static void col(cols *k, const char *name, const char *v, int num)
{
    if (k->n == 64) return;
    k->name[k->n] = name;
    snprintf(k->val[k->n], sizeof k->val[k->n], "%s", v ? v : "");
    k->num[k->n++] = (unsigned char)num;
}

static void coln(cols *k, const char *name, double v)
{
    char b[40] = "";
    if (isfinite(v)) snprintf(b, sizeof b, "%.10g", v);
    else if (isinf(v)) snprintf(b, sizeof b, "%s", v > 0 ? "inf" : "-inf");
    col(k, name, b, 1);
}

static void colt(cols *k, const char *name, int v) { col(k, name, v < 0 ? "" : v ? "1" : "0", 1); }

static void row_cols(const db_compare *c, const db_cmp_row *r, cols *k)
{
    const db_results_read *s;
    const db_read_point *p = pt_of(c, r, &s);
    const db_read_point *B = r->b >= 0 ? &c->base->pt[r->b] : NULL, *N = r->n >= 0 ? &c->new_->pt[r->n] : NULL;
    int both = B && N;
    k->n = 0;
    for (int a = 0; a < db_point_n_axes; a++) {
        if (!c->key_axis[a]) continue;
        const char *v = db_results_read_field(s, (int)(p - s->pt), db_point_axes[a].column);
        col(k, db_point_axes[a].column, v, db_point_axes[a].type != DB_AXIS_STR);
    }
    col(k, "verdict", r->verdict, 0);
    col(k, "change", r->change ? r->change : "", 0);
    coln(k, "throughput_base", B ? B->throughput : NAN);
    coln(k, "throughput_new", N ? N->throughput : NAN);
    coln(k, "throughput_ratio", both ? r->thr : NAN);
    coln(k, "throughput_ratio_ci_lo", both ? r->thr_lo : NAN);
    coln(k, "throughput_ratio_ci_hi", both ? r->thr_hi : NAN);
    coln(k, "speedup_base", B ? B->speedup : NAN);
    coln(k, "speedup_new", N ? N->speedup : NAN);
    coln(k, "speedup_ratio", both ? r->spd : NAN);
    coln(k, "speedup_ratio_ci_lo", both ? r->spd_lo : NAN);
    coln(k, "speedup_ratio_ci_hi", both ? r->spd_hi : NAN);
    colt(k, "significant", both ? r->significant : -1);
    colt(k, "stable_base", B ? B->stable : -1);
    colt(k, "stable_new", N ? N->stable : -1);
    coln(k, "tau_base", B ? B->tau : NAN);
    coln(k, "tau_new", N ? N->tau : NAN);
    coln(k, "tau_diff", both ? r->tau_diff : NAN);
    coln(k, "acceptance_max_diff", both ? r->acc_diff : NAN);
}

static void ratio_text(char *b, size_t n, double x, double lo, double hi)
{
    if (!isfinite(x)) snprintf(b, n, "-");
    else if (!isfinite(lo)) snprintf(b, n, "%.3f", x);
    else snprintf(b, n, "%.3f [%.3f, %.3f]", x, lo, hi);
}

static int print_md(const db_compare *c, FILE *f)
{
    char name[512], t[64], s[64], sp[64];
    int k[4] = {0}, only[2] = {0};
    fprintf(f, "| point | BASE tok/s | NEW tok/s | throughput NEW/BASE [95%% CI] | speedup BASE -> NEW | "
               "speedup NEW/BASE [95%% CI] | tau diff | accept diff | verdict |\n"
               "|---|--:|--:|--:|--:|--:|--:|--:|---|\n");
    int unstable_change = 0;
    for (int i = 0; i < c->n; i++) {
        const db_cmp_row *r = &c->rows[i];
        if (r->b < 0 || r->n < 0) {
            only[r->b < 0]++;
            continue;
        }
        const db_read_point *B = &c->base->pt[r->b], *N = &c->new_->pt[r->n];
        row_name(c, r, name, sizeof name);
        ratio_text(t, sizeof t, r->thr, r->thr_lo, r->thr_hi);
        ratio_text(s, sizeof s, r->spd, r->spd_lo, r->spd_hi);
        snprintf(sp, sizeof sp, isfinite(B->speedup) && isfinite(N->speedup) ? "%.2fx -> %.2fx" : "-", B->speedup, N->speedup);
        char ad[32] = "-";
        if (isfinite(r->acc_diff)) snprintf(ad, sizeof ad, "%.4g", r->acc_diff);
        else if (isinf(r->acc_diff)) snprintf(ad, sizeof ad, "one side");
        char v[48];
        int shown = !strcmp(r->verdict, "unstable") && strcmp(r->change, "same");
        unstable_change += shown;
        snprintf(v, sizeof v, shown ? "%s (%s?)" : "%s", r->verdict, r->change);
        fprintf(f, "| %s | %.1f | %.1f | %s | %s | %s | %+.4g | %s | %s |\n", name, B->throughput, N->throughput, t, sp, s,
                r->tau_diff, ad, v);
        k[!strcmp(r->verdict, "faster") ? 0 : !strcmp(r->verdict, "slower") ? 1 : !strcmp(r->verdict, "same") ? 2 : 3]++;
    }
    for (int side = 0; side < 2; side++) {
        if (!only[side]) continue;
        fprintf(f, "\nonly in %s (%s, %d):", side ? "NEW" : "BASE", side ? c->new_->dir : c->base->dir, only[side]);
        for (int i = 0; i < c->n; i++)
            if ((side ? c->rows[i].b < 0 : c->rows[i].n < 0)) {
                row_name(c, &c->rows[i], name, sizeof name);
                fprintf(f, " %s;", name);
            }
        fprintf(f, "\n");
    }
    if (unstable_change)
        fprintf(f, "\nunstable (faster? / slower?): a row not stable on a side whose interval alone says faster / "
                   "slower (csv / json: column change)\n");
    if (c->n_ar && fabs(c->ar_shift - 1) >= c->min_change && c->metric == DB_CMP_THROUGHPUT)
        fprintf(f, "\nthe ar baseline moved as well: its throughput NEW/BASE is a median %.3f (%.3f to %.3f over %d "
                   "rows); a change every variant shares is the machine's speed or the target's, not the drafting "
                   "(--metric speedup divides it out)\n",
                c->ar_shift, c->ar_shift_min, c->ar_shift_max, c->n_ar);
    return fprintf(f, "\n%d matched rows: %d faster, %d slower, %d same, %d unstable (verdicts on %s NEW/BASE: "
                      "95%% percentile bootstrap over prompts and rounds, significant when the interval excludes 1, "
                      "a change under %.0f%% is same; unstable: a side's row is not stable)\n",
                   k[0] + k[1] + k[2] + k[3], k[0], k[1], k[2], k[3],
                   c->metric == DB_CMP_SPEEDUP ? "speedup" : "throughput", 100 * c->min_change) < 0 ? -1 : 0;
}

static int print_csv(const db_compare *c, FILE *f)
{
    cols *k = db_malloc(sizeof *k);
    int bad = !k;
    for (int i = 0; !bad && i < c->n; i++) {
        row_cols(c, &c->rows[i], k);
        for (int j = 0; !i && j < k->n; j++) bad |= db_csv_field(f, k->name[j], j == 0) != 0;
        if (!i) bad |= fputc('\n', f) == EOF;
        for (int j = 0; j < k->n; j++) bad |= db_csv_field(f, k->val[j], j == 0) != 0;
        bad |= fputc('\n', f) == EOF;
    }
    free(k);
    return bad ? -1 : 0;
}

static int print_json(const db_compare *c, FILE *f)
{
    int oom0 = 0, *oom = &oom0;
    cols *k = db_malloc(sizeof *k);
    cJSON *arr = J(cJSON_CreateArray());
    for (int i = 0; k && arr && i < c->n; i++) {
        row_cols(c, &c->rows[i], k);
        cJSON *o = J(cJSON_CreateObject());
        for (int j = 0; o && j < k->n; j++) {
            char *end;
            double v = strtod(k->val[j], &end);
            JADD(o, k->name[j], !k->num[j] ? cJSON_CreateString(k->val[j])
                               : k->val[j][0] && !*end && isfinite(v) ? cJSON_CreateNumber(v)
                               : k->val[j][0] ? cJSON_CreateString(k->val[j]) /* inf */
                                              : cJSON_CreateNull());
        }
        JADD(arr, NULL, o);
    }
    char *t = !*oom && k && arr ? cJSON_Print(arr) : NULL;
    int rc = t && fprintf(f, "%s\n", t) >= 0 ? 0 : -1;
    free(t);
    free(k);
    cJSON_Delete(arr);
    return rc;
}

int db_compare_print(const db_compare *c, FILE *f, const char *format, char *err, size_t errlen)
{
    int rc;
    if (!strcmp(format, "md")) rc = print_md(c, f);
    else if (!strcmp(format, "csv")) rc = print_csv(c, f);
    else if (!strcmp(format, "json")) rc = print_json(c, f);
    else return db_fail(err, errlen, DB_EINPUT, "-o %s: md, csv or json", format);
    return rc ? db_fail(err, errlen, DB_ERUNTIME, "writing the comparison failed") : DB_OK;
}
