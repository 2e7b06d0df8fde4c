/* report_out.c — stdout formats (see report_out.h). */
#include "report/report_out.h"
#include "result/timing.h"
#include "report/report.h"
#include "report/report_csv.h"
#include "base/util.h"
#include "engine/variant.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct db_out_comb {
    char dataset[96]; /* with its depth (dataset_cell) */
    int variant, block, conc;
    float temp;
    double tau, speedup, draft_ms;
};

int db_out_begin(db_out *o, FILE *f, const char *format, int models, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->f = f;
    o->models = models;
    if (!strcmp(format, "md")) o->fmt = DB_OUT_MD;
    else if (!strcmp(format, "csv")) o->fmt = DB_OUT_CSV;
    else if (!strcmp(format, "json")) o->fmt = DB_OUT_JSON;
    else return db_fail(err, errlen, DB_EINPUT, "-o must be md, csv or json, not '%s'", format);
    return DB_OK;
}

int db_out_prior(db_out *o, const char *dir, char *err, size_t errlen)
{
    char path[1200];
    if (o->fmt != DB_OUT_CSV) return DB_OK;
    if (db_path_join(path, sizeof path, dir, "summary.csv") != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", dir);
    if (access(path, F_OK) != 0) return DB_OK; /* a fresh run's directory, or no point yet */
    free(o->prior);
    o->prior = NULL;
    return db_read_file(path, &o->prior, &o->prior_len, err, errlen);
}

/* the header (csv: the resumed directory's summary.csv, header included) or '[', once, with the
 * first point: a run that never completes one leaves stdout empty */
static int start(db_out *o)
{
    if (o->started) return 0;
    o->started = 1;
    FILE *f = o->f;
    if (o->fmt == DB_OUT_MD)
        return fprintf(f, "|%s dataset | variant | B | conc | T | tok/s | speedup [95%% CI] | tau | "
                          "TTFT p50 ms | TPOT p50 ms |%s\n"
                          "|%s---|---|--:|--:|--:|--:|--:|--:|--:|--:|%s\n",
                       o->models ? " target | dtype |" : "",
                       o->load ? " rate req/s | arrived req/s | req/s | ITL p50 ms | goodput req/s |" : "",
                       o->models ? "---|---|" : "", o->load ? "--:|--:|--:|--:|--:|" : "") < 0;
    if (o->fmt == DB_OUT_CSV)
        return o->prior_len ? fwrite(o->prior, 1, o->prior_len, f) != o->prior_len
                            : db_table_header(DB_TABLE_SUMMARY, f);
    return fputs("[", f) == EOF;
}

/* "%.*f" or "-" when absent */
static const char *fx(char *b, size_t n, int prec, double v)
{
    if (isfinite(v)) snprintf(b, n, "%.*f", prec, v);
    else snprintf(b, n, "-");
    return b;
}

/* a table cell: '|' would end it */
static const char *md_cell(char *b, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 3 < n; s++) {
        if (*s == '|') b[k++] = '\\';
        b[k++] = *s;
    }
    b[k] = 0;
    return b;
}

/* a model's dtype cell: its main dtype, with the file's mix in front when that names more
 * ("q4_k_m (q5_0)": llama-quantize's Q4_K_M of narrow rows, mostly Q5_0 fallbacks) */
static const char *dtype_cell(char *b, size_t n, const db_model_meta *mm)
{
    if (mm->mix[0] && strcmp(mm->mix, mm->dtype)) snprintf(b, n, "%s (%s)", mm->mix, mm->dtype);
    else snprintf(b, n, "%s", mm->dtype);
    return b;
}

/* the target and dtype cells: "name | q8_0" (ar) or "name | q8_0 / q4_0" (target / drafter) */
static int md_models(FILE *f, const db_run_meta *m, const db_point_key *k)
{
    char nb[300], db[48] = "", tb[40], dd[40];
    const char *tdt = dtype_cell(tb, sizeof tb, db_run_meta_model(m, k->target));
    if (k->drafter[0]) snprintf(db, sizeof db, " / %s", dtype_cell(dd, sizeof dd, db_run_meta_model(m, k->drafter)));
    return fprintf(f, "| %s | %s%s ", md_cell(nb, sizeof nb, k->target), tdt, db) < 0;
}

/* the serving cells: asked rate ("inf": closed loop), measured arrival rate, requests/s, ITL
 * p50, goodput */
static int md_load(FILE *f, const db_point_raw *p, const db_point_summary *s)
{
    char rate[32], arr[32], rq[32], itl[32], good[32];
    if (p->key.request_rate > 0 && isfinite(p->key.request_rate)) snprintf(rate, sizeof rate, "%g", p->key.request_rate);
    else snprintf(rate, sizeof rate, "inf");
    return fprintf(f, " %s | %s | %s | %s | %s |", rate, fx(arr, sizeof arr, 2, s->arrival_rate),
                   fx(rq, sizeof rq, 2, s->request_throughput), fx(itl, sizeof itl, 2, s->itl_ms_p50),
                   fx(good, sizeof good, 2, s->goodput)) < 0;
}

/* the dataset, and its depth when the point has one: "math @512" (512 tokens of context before
 * each prompt) */
static const char *dataset_cell(const db_point_key *k, char *b, size_t n)
{
    if (k->depth > 0) snprintf(b, n, "%s @%d", k->dataset, k->depth);
    else snprintf(b, n, "%s", k->dataset);
    return b;
}

static int md_row(FILE *f, const db_point_raw *p, const db_point_summary *s, int load)
{
    char dsb[160];
    char tp[32], sd[32], sp[32], lo[32], hi[32], tau[32], ttft[32], tpot[32], ci[80] = "";
    const db_point_key *k = &p->key;
    int ar = db_variant_is_baseline(db_variant_lookup(k->variant));
    if (!ar && isfinite(s->speedup_ci_lo))
        snprintf(ci, sizeof ci, " [%s, %s]", fx(lo, sizeof lo, 2, s->speedup_ci_lo),
                 fx(hi, sizeof hi, 2, s->speedup_ci_hi));
    char bs[16];
    snprintf(bs, sizeof bs, ar ? "-" : "%d", k->block_size);
    /* capacity-planning rows say so in the table too: replayed acceptance, synthetic weights */
    char ds[160], var[200], vb[200];
    char dn[96];
    snprintf(ds, sizeof ds, "%s%s", dataset_cell(k, dn, sizeof dn), !strcmp(k->weights, "synthetic") ? " (synthetic weights)" : "");
    snprintf(var, sizeof var, "%s%s%s%s", k->variant, strcmp(k->acceptance_source, "measured") && k->acceptance_source[0] ? " (" : "",
             strcmp(k->acceptance_source, "measured") ? k->acceptance_source : "",
             strcmp(k->acceptance_source, "measured") && k->acceptance_source[0] ? ")" : "");
    /* a spread needs two repetitions at least; an unstable row says so next to its numbers */
    char spread[48] = "";
    if (p->repetitions >= 2) snprintf(spread, sizeof spread, " ± %s", fx(sd, sizeof sd, 1, s->throughput_stddev));
    return fprintf(f, "| %s | %s | %s | %d | %g | %s%s%s | %s%s%s | %s | %s | %s |",
                   md_cell(dsb, sizeof dsb, ds), md_cell(vb, sizeof vb, var), bs, k->concurrency,
                   (double)k->temperature,
                   fx(tp, sizeof tp, 1, s->throughput_tok_s), spread, s->stable ? "" : " (unstable)",
                   fx(sp, sizeof sp, 2, s->speedup),
                   isfinite(s->speedup) ? "x" : "", ci, fx(tau, sizeof tau, 2, s->tau),
                   fx(ttft, sizeof ttft, 2, s->ttft_ms_p50),
                   fx(tpot, sizeof tpot, 2, s->tpot_ms_p50)) < 0 ||
           (load && md_load(f, p, s)) || fputc('\n', f) == EOF;
}

/* a whole cycle (draft, select, correct, verify, host) in decode steps: the verify's cost in
 * steps scaled by the cycle's time over the verify's */
static double cycle_steps(const db_point_summary *s)
{
    double cyc = s->draft_ms_per_cycle + s->select_ms_per_cycle + s->correct_ms_per_cycle +
                 s->verify_ms_per_cycle + s->host_ms_per_cycle;
    return s->verify_ms_per_cycle > 0 ? s->verify_cost_steps * cyc / s->verify_ms_per_cycle : NAN;
}

int db_out_point(db_out *o, const db_run_meta *m, const db_point_raw *raw,
                 const db_point_summary *s, double weights_bytes, char *err, size_t errlen)
{
    int rc = start(o);
    if (!rc && o->fmt == DB_OUT_MD) {
        rc = o->models && md_models(o->f, m, &raw->key);
        rc = rc || md_row(o->f, raw, s, o->load);
    } else if (rc) {
        /* the header failed: no row after it */
    } else if (o->fmt == DB_OUT_CSV) {
        rc = db_table_rows(DB_TABLE_SUMMARY, m, raw, s, o->f);
    } else {
        cJSON *j = db_summary_json(m, raw, s);
        char *t = j ? cJSON_Print(j) : NULL;
        rc = !t || fprintf(o->f, "%s\n%s", o->n ? "," : "", t) < 0;
        free(t);
        cJSON_Delete(j);
    }
    o->n++;
    /* the note and the combined table read closed-loop rows: at a request rate the arrivals bound
     * the throughput */
    int closed = !(raw->key.request_rate > 0 && isfinite(raw->key.request_rate));
    db_variant v = db_variant_lookup(raw->key.variant);
    if (!rc && closed && o->fmt == DB_OUT_MD && db_variant_uses_drafter(v)) { /* a cell of the combined table */
        if (o->ncomb == o->capcomb) {
            int cap = o->capcomb ? 2 * o->capcomb : 32;
            struct db_out_comb *c = db_realloc(o->comb, sizeof *c * (size_t)cap);
            if (c) o->comb = c, o->capcomb = cap;
        }
        if (o->ncomb < o->capcomb) {
            struct db_out_comb *c = &o->comb[o->ncomb++];
            *c = (struct db_out_comb){.variant = v, .block = raw->key.block_size, .conc = raw->key.concurrency,
                                      .temp = raw->key.temperature, .tau = s->tau, .speedup = s->speedup,
                                      .draft_ms = s->draft_ms_per_cycle};
            dataset_cell(&raw->key, c->dataset, sizeof c->dataset);
        }
    }
    if (closed && !db_variant_is_baseline(v) && s->speedup < 1 &&
        isfinite(s->verify_cost_steps)) {
        o->slow++;
        o->cost_sum += s->verify_cost_steps;
        o->cycle_sum += cycle_steps(s);
        o->tau_sum += s->tau;
        snprintf(o->backend, sizeof o->backend, "%s", raw->key.backend);
        o->weights_bytes = weights_bytes;
        o->llc_bytes = (double)(m->cpu.l3 ? m->cpu.l3 : m->cpu.l2);
    }
    fflush(o->f);
    if (rc && !ferror(o->f)) /* nothing failed to write: the row could not be formatted */
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting the summary of %s %s", raw->key.dataset,
                       raw->key.variant);
    return rc ? db_fail(err, errlen, DB_ERUNTIME, "stdout: write error") : DB_OK;
}

void db_out_point_name(const db_point_key *k, unsigned vary, char *b, size_t n)
{
    int ar = db_variant_is_baseline(db_variant_lookup(k->variant)), be = vary & DB_VARY_BACKEND,
        tg = vary & DB_VARY_TARGET;
    snprintf(b, n, "%s%s%s%s%s %s", be ? k->backend : "", be ? " " : "", tg ? k->target : "", tg ? " " : "",
             k->dataset, k->variant);
    size_t len = strlen(b);
    if (!ar && (vary & DB_VARY_DRAFTER) && len < n) len += snprintf(b + len, n - len, " drafter %s", k->drafter);
    if (!ar && (vary & DB_VARY_PROFILE) && len < n) len += snprintf(b + len, n - len, " profile %s", k->acceptance_source);
    if (!ar && len < n) len += snprintf(b + len, n - len, " B%d", k->block_size);
    if (len < n) len += snprintf(b + len, n - len, " c%d", k->concurrency);
    if (len < n && k->request_rate > 0 && isfinite(k->request_rate)) len += snprintf(b + len, n - len, " %g req/s", k->request_rate);
    if (len < n && k->depth > 0) len += snprintf(b + len, n - len, " depth %d", k->depth);
    if (len < n) snprintf(b + len, n - len, " T%g", (double)k->temperature);
}

int db_out_point_warning(const db_point_raw *raw, const db_point_summary *s, unsigned vary, char *b, size_t n)
{
    char unstable[600], flight[200] = "";
    db_unstable_text(s->stable == 0 ? s->unstable_why : 0, unstable, sizeof unstable);
    /* a closed-loop row labelled c must have had c in flight (the runner sizes its passes for
     * that); at a request rate the arrivals decide, c is only the cap */
    int closed = !(raw->key.request_rate > 0 && isfinite(raw->key.request_rate));
    if (closed && s->mean_in_flight < DB_IN_FLIGHT_MIN * raw->key.concurrency)
        snprintf(flight, sizeof flight, "only %.1f requests in flight on average (max %d), below %.0f%% of its concurrency",
                 s->mean_in_flight, s->max_in_flight, 100 * DB_IN_FLIGHT_MIN);
    const char *why[3] = {unstable, raw->major_faults > 0 ? "major page faults in the timed passes (weights read from disk)" : "",
                          flight};
    int k = 0;
    db_out_point_name(&raw->key, vary, b, n);
    size_t len = strlen(b);
    for (int i = 0; i < 3 && len < n; i++)
        if (why[i][0]) len += snprintf(b + len, n - len, "%s%s", k++ ? "; " : ": ", why[i]);
    return k > 0;
}

/* the md reading note: what the slow rows' own figures say, nothing they do not */
static int note(db_out *o)
{
    double cost = o->cost_sum / o->slow, cycle = o->cycle_sum / o->slow, tau = o->tau_sum / o->slow;
    int fits = o->llc_bytes > 0 && o->weights_bytes <= o->llc_bytes;
    char why[400];
    if (isfinite(cycle) && cycle > tau)
        snprintf(why, sizeof why, "a cycle costs more than decoding its tokens would%s",
                 cost > tau ? " (the verify alone does)" : ", though the verify alone does not: drafting and "
                                                          "host work tip it");
    else
        snprintf(why, sizeof why, "by these figures a cycle costs less than decoding its tokens would, so the loss "
                                  "lies outside the cycles (prefill, scheduling) or in timing noise: check the "
                                  "rows' stability");
    int rc = fprintf(o->f,
                     "\nReading note (%s): %d drafter row%s ran below speedup 1. There one verify cost %.2f decode "
                     "steps on average and a whole cycle (draft, select, verify, host) %.2f, while a cycle committed "
                     "%.2f tokens (tau): %s.",
                     o->backend, o->slow, o->slow > 1 ? "s" : "", cost, cycle, tau, why) < 0;
    if (o->llc_bytes > 0 && o->weights_bytes > 0)
        rc |= fprintf(o->f, " The target's weights (%.1f MiB) %s the last-level cache (%.1f MiB)%s", o->weights_bytes / DB_MIB,
                      fits ? "fit in" : "exceed", o->llc_bytes / DB_MIB,
                      !fits ? "." : cost >= 2 ? ", so a step here is likely compute-bound: a verify of B rows costs "
                                                "several steps, not one." : ".") < 0;
    if (fits)
        rc |= fputs(" Speculative decoding pays where a step is memory-bound; `dflash-bench plan --target-config "
                    "configs/models/qwen3-8b.json --drafter-config configs/models/qwen3-8b-dflash2.json` predicts such "
                    "a model on this machine.", o->f) == EOF;
    return rc | (fputs("\n", o->f) == EOF);
}

static int same_cell(const struct db_out_comb *a, const struct db_out_comb *b)
{
    return !strcmp(a->dataset, b->dataset) && a->block == b->block && a->conc == b->conc && a->temp == b->temp;
}

/* the combined table: a row per cell in the order the cells first ran, a column per drafter
 * variant: the write-up's order (MTP | EAGLE-3 | DFlash | DSpark | DFlash 2), then the others in
 * variant.h's */
static int combined(db_out *o)
{
    int used[DB_VAR_COUNT] = {0}, nv = 0, rc = 0, order[DB_VAR_COUNT], no = 0;
    static const db_variant first[] = {DB_VAR_MTP, DB_VAR_EAGLE3, DB_VAR_DFLASH, DB_VAR_DSPARK, DB_VAR_DFLASH2};
    for (int i = 0; i < o->ncomb; i++)
        if (!used[o->comb[i].variant]++) nv++;
    if (nv < 2) return 0;
    for (size_t i = 0; i < sizeof first / sizeof *first; i++)
        if (used[first[i]]) order[no++] = first[i];
    for (int v = 0; v < DB_VAR_COUNT; v++) {
        int listed = 0;
        for (size_t i = 0; i < sizeof first / sizeof *first; i++) listed |= (int)first[i] == v;
        if (used[v] && !listed) order[no++] = v;
    }
    rc |= fputs("\nCombined: tau / speedup / draft ms per cycle (the chain drafters' draft time grows with B)\n\n"
                "| dataset | B | conc | T |", o->f) == EOF;
    for (int i = 0; i < no; i++) rc |= fprintf(o->f, " %s |", db_variant_name((db_variant)order[i])) < 0;
    rc |= fputs("\n|---|--:|--:|--:|", o->f) == EOF;
    for (int v = 0; v < nv; v++) rc |= fputs("--:|", o->f) == EOF;
    for (int i = 0; i < o->ncomb; i++) {
        const struct db_out_comb *r = &o->comb[i];
        int first = 1;
        for (int j = 0; j < i && first; j++) first = !same_cell(&o->comb[j], r);
        if (!first) continue;
        char ds[160];
        rc |= fprintf(o->f, "\n| %s | %d | %d | %g |", md_cell(ds, sizeof ds, r->dataset), r->block, r->conc,
                      (double)r->temp) < 0;
        for (int oi = 0; oi < no; oi++) {
            int v = order[oi];
            const struct db_out_comb *c = NULL;
            for (int j = i; j < o->ncomb && !c; j++)
                if (o->comb[j].variant == v && same_cell(&o->comb[j], r)) c = &o->comb[j];
            char t[32], sp[32], dm[32];
            if (c) rc |= fprintf(o->f, " %s / %sx / %s |", fx(t, sizeof t, 2, c->tau), fx(sp, sizeof sp, 2, c->speedup),
                                 fx(dm, sizeof dm, 2, c->draft_ms)) < 0;
            else rc |= fputs(" - |", o->f) == EOF;
        }
    }
    return rc | (fputs("\n", o->f) == EOF);
}

int db_out_end(db_out *o, char *err, size_t errlen)
{
    int rc = 0;
    if (o->started && o->fmt == DB_OUT_JSON) rc = fputs("\n]\n", o->f) == EOF;
    if (o->started && o->fmt == DB_OUT_MD && o->slow) rc |= note(o);
    if (o->started && o->fmt == DB_OUT_MD) rc |= combined(o);
    free(o->comb);
    o->comb = NULL;
    o->ncomb = o->capcomb = 0;
    if (fflush(o->f) != 0) rc = 1;
    free(o->prior);
    o->prior = NULL;
    return rc ? db_fail(err, errlen, DB_ERUNTIME, "stdout: write error") : DB_OK;
}

void db_out_abort(db_out *o)
{
    if (o->f && o->started && o->fmt == DB_OUT_JSON) fputs("\n]\n", o->f);
    if (o->f) fflush(o->f);
    o->started = 0;
    free(o->prior);
    o->prior = NULL;
    free(o->comb);
    o->comb = NULL;
    o->ncomb = o->capcomb = 0;
}
