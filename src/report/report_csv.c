/* report_csv.c — rows of the four tables (see report_csv.h).
 *
 * One builder per table fills a `row` (column names + formatted values); the header is the names
 * of a row built from an all-zero point, so a header and its rows cannot drift apart. */
#include "report/report_csv.h"
#include "base/csv_io.h"
#include "report/report.h"
#include "base/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const db_table_file[DB_TABLE_COUNT] = {"summary.csv", "acceptance.csv",
                                                    "histogram.csv", "requests.csv"};

const char *const db_table_jsonl_file[DB_TABLE_COUNT] = {"summary.jsonl", "acceptance.jsonl",
                                                         "histogram.jsonl", "requests.jsonl"};

#define MAX_COLS 128

typedef struct {
    int n;
    const char *name[MAX_COLS];
    int off[MAX_COLS];          /* value = arena + off */
    unsigned char num[MAX_COLS]; /* JSON number (or null when empty) */
    char arena[16384];
    int used, overflow;
} row;

static void put(row *r, const char *name, const char *val, int num)
{
    size_t len = strlen(val);
    if (r->n == MAX_COLS || (size_t)r->used + len + 1 > sizeof r->arena) {
        r->overflow = 1;
        return;
    }
    r->name[r->n] = name;
    r->off[r->n] = r->used;
    r->num[r->n++] = (unsigned char)num;
    memcpy(r->arena + r->used, val, len + 1);
    r->used += (int)len + 1;
}

static void put_str(row *r, const char *name, const char *v) { put(r, name, v ? v : "", 0); }

static void put_int(row *r, const char *name, long v)
{
    char b[32];
    snprintf(b, sizeof b, "%ld", v);
    put(r, name, b, 1);
}

/* 1 / 0, or -1 (unknown): empty */
static void put_tri(row *r, const char *name, int v) { put(r, name, v < 0 ? "" : v ? "1" : "0", 1); }

/* doubles: 10 significant digits; NAN/inf: empty */
static void put_num(row *r, const char *name, double v)
{
    char b[40] = "";
    if (isfinite(v)) snprintf(b, sizeof b, "%.10g", v);
    put(r, name, b, 1);
}

/* settings given as floats (temperature 0.95f): their shortest decimal spelling */
static void put_flt(row *r, const char *name, float v)
{
    char b[40];
    snprintf(b, sizeof b, "%g", (double)v);
    put(r, name, b, 1);
}

static double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

static void common(row *r, const db_run_meta *m, const db_point_key *k)
{
    const db_backend_meta *be = db_run_meta_backend(m);
    char id[DB_POINT_ID_MAX], seed[32];
    db_point_id(k, id, sizeof id);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)m->seed);
    put_int(r, "schema_version", m->schema_version);
    put_str(r, "point_id", id);
    put_str(r, "tool_version", m->tool_version);
    put_str(r, "git_commit", m->git_commit);
    put_str(r, "test_time", m->test_time);
    put_str(r, "label", m->label);
    put_str(r, "backend", k->backend);
    put_str(r, "device", be->device);
    put_str(r, "simd", be->simd);
    put_int(r, "threads", be->threads);
    put_str(r, "kv_dtype", m->kv_dtype);
    put_str(r, "cpu_model", m->cpu.model);
    put_int(r, "cpu_cores", m->cpu.cores);
    put_int(r, "cpu_threads", m->cpu.pus);
    put_str(r, "compiler", m->compiler);
    put_str(r, "build_type", m->build_type);
    const db_model_meta *t = db_run_meta_model(m, k->target), *d = db_run_meta_model(m, k->drafter);
    put_str(r, "target", k->target);
    put_str(r, "target_sha256", t->sha256);
    put_str(r, "target_dtype", t->dtype);
    put_str(r, "drafter", k->drafter);
    put_str(r, "drafter_sha256", d->sha256);
    put_str(r, "drafter_dtype", d->dtype);
    put_str(r, "seed", seed); /* text: a 64-bit seed does not survive a JSON double */
    put_str(r, "dataset", k->dataset);
    put_str(r, "variant", k->variant);
    put_int(r, "block_size", k->block_size);
    put_int(r, "concurrency", k->concurrency);
    /* "inf": a closed loop (JSON: the string "inf", a number otherwise) */
    if (k->request_rate > 0 && isfinite(k->request_rate)) put_num(r, "request_rate", k->request_rate);
    else put(r, "request_rate", "inf", 1);
    put_int(r, "depth", k->depth);
    put_flt(r, "temperature", k->temperature);
    put_flt(r, "top_p", k->top_p);
    put_int(r, "top_k", k->top_k);
    put_int(r, "max_new_tokens", k->max_new_tokens);
    put_str(r, "chat_template", k->chat_template);
    put_int(r, "thinking", k->thinking);
    put_str(r, "acceptance_source", k->acceptance_source);
    put_str(r, "weights", k->weights);
}

int db_provenance_csv(FILE *out, const db_run_meta *m)
{
    static db_run_meta zero;
    const db_run_meta *v = m ? m : &zero;
    row *r = db_malloc(sizeof *r);
    if (!r) return -1;
    r->n = r->used = r->overflow = 0;
    put_str(r, "tool_version", v->tool_version);
    put_str(r, "git_commit", v->git_commit);
    put_str(r, "test_time", v->test_time);
    put_str(r, "cpu_model", v->cpu.model);
    put_int(r, "cpu_cores", v->cpu.cores);
    put_int(r, "cpu_threads", v->cpu.pus);
    put_str(r, "compiler", v->compiler);
    put_str(r, "build_type", v->build_type);
    int bad = r->overflow;
    for (int j = 0; !bad && j < r->n; j++)
        bad = db_csv_field(out, m ? r->arena + r->off[j] : r->name[j], 1) != 0 || fputc(',', out) == EOF;
    free(r);
    return bad ? -1 : 0;
}

static void summary_row(row *r, const db_run_meta *m, const db_point_raw *p,
                        const db_point_summary *s, int idx)
{
    (void)idx;
    common(r, m, &p->key);
    put_int(r, "n_prompts", p->n_prompts);
    put_int(r, "distinct_prompts", p->n_distinct);
    put_int(r, "repetitions", p->repetitions);
    put_int(r, "output_tokens", s->output_tokens);
    put_num(r, "wall_s", s->wall_s);
    put_num(r, "throughput_tok_s", s->throughput_tok_s);
    put_num(r, "throughput_stddev", s->throughput_stddev);
    put_num(r, "speedup", s->speedup);
    put_num(r, "speedup_ci_lo", s->speedup_ci_lo);
    put_num(r, "speedup_ci_hi", s->speedup_ci_hi);
    put_tri(r, "stable", s->stable);
    put_num(r, "mean_in_flight", s->mean_in_flight);
    put_int(r, "max_in_flight", s->max_in_flight);
    put_num(r, "other_cores", s->other_cores);
    put_tri(r, "contended", s->contended);
    put_num(r, "tau", s->tau);
    put_num(r, "tau_request_mean", s->tau_request_mean);
    put_num(r, "tau_token_weighted", s->tau_token_weighted);
    put_num(r, "draft_acceptance_rate", s->draft_acceptance_rate);
    put_num(r, "tokens_per_target_call", s->tokens_per_target_call);
    put_num(r, "oracle_tau", s->oracle_tau);
    put_int(r, "cycles", s->cycles);
    put_num(r, "arrival_rate", s->arrival_rate);
    put_num(r, "arrival_cv", s->arrival_cv);
    put_num(r, "request_throughput", s->request_throughput);
    put_num(r, "input_tok_s", s->input_tok_s);
    put_num(r, "slo_ttft_ms", p->slo_ttft_s > 0 ? 1e3 * p->slo_ttft_s : NAN);
    put_num(r, "slo_tpot_ms", p->slo_tpot_s > 0 ? 1e3 * p->slo_tpot_s : NAN);
    put_num(r, "goodput", s->goodput);
    put_num(r, "slo_attainment", s->slo_attainment);
    put_num(r, "queue_ms_mean", s->queue_ms_mean);
    put_num(r, "queue_ms_p50", s->queue_ms_p50);
    put_num(r, "queue_ms_p90", s->queue_ms_p90);
    put_num(r, "queue_ms_p99", s->queue_ms_p99);
    put_num(r, "ttft_ms_mean", s->ttft_ms_mean);
    put_num(r, "ttft_ms_p50", s->ttft_ms_p50);
    put_num(r, "ttft_ms_p90", s->ttft_ms_p90);
    put_num(r, "ttft_ms_p99", s->ttft_ms_p99);
    put_num(r, "tpot_ms_mean", s->tpot_ms_mean);
    put_num(r, "tpot_ms_p50", s->tpot_ms_p50);
    put_num(r, "tpot_ms_p90", s->tpot_ms_p90);
    put_num(r, "tpot_ms_p99", s->tpot_ms_p99);
    put_num(r, "itl_ms_mean", s->itl_ms_mean);
    put_num(r, "itl_ms_p50", s->itl_ms_p50);
    put_num(r, "itl_ms_p90", s->itl_ms_p90);
    put_num(r, "itl_ms_p99", s->itl_ms_p99);
    put_num(r, "e2e_ms_mean", s->e2e_ms_mean);
    put_num(r, "e2e_ms_p50", s->e2e_ms_p50);
    put_num(r, "e2e_ms_p90", s->e2e_ms_p90);
    put_num(r, "e2e_ms_p99", s->e2e_ms_p99);
    put_num(r, "draft_ms_per_cycle", s->draft_ms_per_cycle);
    put_num(r, "select_ms_per_cycle", s->select_ms_per_cycle);
    put_num(r, "correct_ms_per_cycle", s->correct_ms_per_cycle);
    put_num(r, "verify_ms_per_cycle", s->verify_ms_per_cycle);
    put_num(r, "verify_cost_steps", s->verify_cost_steps);
    put_num(r, "host_ms_per_cycle", s->host_ms_per_cycle);
    put_num(r, "peak_mem_mib", p->peak_mem_mib);
    put_int(r, "major_faults", p->major_faults);
    put_num(r, "predicted_tok_s", p->predicted_tok_s > 0 ? p->predicted_tok_s : NAN);
    put_num(r, "measured_over_predicted", s->measured_over_predicted);
}

/* idx = draft position i (1..B-1); counts are totals over all requests and repetitions */
static void acceptance_row(row *r, const db_run_meta *m, const db_point_raw *p,
                           const db_point_summary *s, int i)
{
    const db_req_stats *t = &s->total;
    common(r, m, &p->key);
    put_int(r, "position", i);
    put_int(r, "drafted", t->drafted[i]);
    put_int(r, "reached", t->reached[i]);
    put_int(r, "accepted", t->accepted[i]);
    put_num(r, "conditional_rate", s->cond_rate[i]);
    put_num(r, "unconditional_rate", s->uncond_rate[i]);
    /* drafted[i] = cycles whose request reached position i (censored at the request's end) */
    put_num(r, "survival_rate", ratio((double)t->accepted[i], (double)t->drafted[i]));
    put_int(r, "recall_n", t->recall_n[i]);
    put_num(r, "recall_at_1", ratio((double)t->recall1[i], (double)t->recall_n[i]));
    put_num(r, "recall_at_k", ratio((double)t->recallk[i], (double)t->recall_n[i]));
}

static int block_of(const db_point_raw *p)
{
    int b = p->key.block_size;
    return b < 1 ? 1 : b > DB_MAX_BLOCK ? DB_MAX_BLOCK : b;
}

/* cycles that committed L tokens (`ar`: every decode step at L = 1) */
static void histogram_row(row *r, const db_run_meta *m, const db_point_raw *p,
                          const db_point_summary *s, int L)
{
    long sum = 0;
    for (int l = 1; l <= block_of(p); l++) sum += s->total.hist[l];
    common(r, m, &p->key);
    put_int(r, "accept_length", L);
    put_int(r, "cycles", s->total.hist[L]);
    put_num(r, "share", ratio((double)s->total.hist[L], (double)sum));
}

/* idx = r*N + i */
static void request_row(row *r, const db_run_meta *m, const db_point_raw *p,
                        const db_point_summary *s, int idx)
{
    (void)s;
    const db_req_stats *q = &p->reqs[idx];
    int n = p->n_prompts > 0 ? p->n_prompts : 1;
    common(r, m, &p->key);
    put_int(r, "prompt_index", idx % n);
    put_int(r, "repetition", idx / n);
    put_int(r, "turn", q->turn);
    /* when it was admitted, on the invocation's clock: the interleaving of ar and the variants */
    put_num(r, "start_s", p->rep_start_s ? p->rep_start_s[idx / n] + q->t_admitted : NAN);
    put_int(r, "prompt_tokens", q->prompt_tokens);
    put_int(r, "output_tokens", q->output_tokens);
    put_int(r, "cycles", q->cycles);
    put_int(r, "cycle_tokens", q->cycle_tokens);
    put_num(r, "tau", db_req_stats_tau(q));
    put_num(r, "rep_wall_s", p->wall_s[idx / n]);
    put_num(r, "t_arrival_ms", 1e3 * db_req_stats_arrival(q));
    put_num(r, "t_admitted_ms", 1e3 * q->t_admitted);
    put_num(r, "t_first_token_ms", 1e3 * q->t_first_token);
    put_num(r, "t_finished_ms", 1e3 * q->t_finished);
    put_num(r, "queue_ms", 1e3 * (q->t_admitted - db_req_stats_arrival(q)));
    put_num(r, "ttft_ms", q->output_tokens >= 1 ? 1e3 * (q->t_first_token - db_req_stats_arrival(q)) : NAN);
    put_num(r, "tpot_ms", q->output_tokens >= 2 ? 1e3 * (q->t_finished - q->t_first_token) /
                                                      (q->output_tokens - 1)
                                                : NAN);
    put_num(r, "e2e_ms", q->output_tokens >= 1 ? 1e3 * (q->t_finished - db_req_stats_arrival(q)) : NAN);
    put_num(r, "draft_ms", 1e3 * q->t_draft);
    put_num(r, "select_ms", 1e3 * q->t_select);
    put_num(r, "correct_ms", 1e3 * q->t_correct);
    put_num(r, "verify_ms", 1e3 * q->t_verify);
    put_num(r, "host_ms", 1e3 * q->t_host);
    put_int(r, "oracle_len_sum", q->oracle_len_sum);
    put_int(r, "finished_by_eos", q->finished_by_eos);
}

typedef void (*builder)(row *, const db_run_meta *, const db_point_raw *, const db_point_summary *,
                        int);
static const builder builders[DB_TABLE_COUNT] = {summary_row, acceptance_row, histogram_row,
                                                 request_row};

/* the index range of table t's rows for point p */
static void row_range(db_table t, const db_point_raw *p, int *lo, int *hi)
{
    switch (t) {
    case DB_TABLE_SUMMARY: *lo = 0, *hi = 1; break;
    case DB_TABLE_ACCEPTANCE: *lo = 1, *hi = block_of(p); break;
    case DB_TABLE_HISTOGRAM: *lo = 1, *hi = block_of(p) + 1; break;
    default: *lo = 0, *hi = p->repetitions * p->n_prompts; break;
    }
}

static int write_row(FILE *f, const row *r, int header)
{
    if (r->overflow) return -1;
    for (int j = 0; j < r->n; j++)
        if (db_csv_field(f, header ? r->name[j] : r->arena + r->off[j], j == 0) != 0) return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

int db_table_header(db_table t, FILE *out)
{
    static db_run_meta m;           /* all zero: only the names matter */
    static db_req_stats req;
    static double wall;
    db_point_raw p = {.n_prompts = 1, .repetitions = 1, .wall_s = &wall, .reqs = &req};
    db_point_summary s;
    memset(&s, 0, sizeof s);
    row *r = db_malloc(sizeof *r); /* put() fills what it uses: no need to clear 16 KB */
    if (!r) return -1;
    r->n = r->used = r->overflow = 0;
    builders[t](r, &m, &p, &s, t == DB_TABLE_ACCEPTANCE || t == DB_TABLE_HISTOGRAM);
    int rc = write_row(out, r, 1);
    free(r);
    return rc;
}

int db_table_rows(db_table t, const db_run_meta *m, const db_point_raw *raw,
                  const db_point_summary *s, FILE *out)
{
    int lo, hi, rc = 0;
    row *r = db_malloc(sizeof *r);
    if (!r) return -1;
    row_range(t, raw, &lo, &hi);
    for (int i = lo; i < hi && rc == 0; i++) {
        r->n = r->used = r->overflow = 0;
        builders[t](r, m, raw, s, i);
        rc = write_row(out, r, 0);
    }
    free(r);
    return rc;
}

cJSON *db_summary_json(const db_run_meta *m, const db_point_raw *raw, const db_point_summary *s)
{
    row *r = db_malloc(sizeof *r);
    if (!r) return NULL;
    r->n = r->used = r->overflow = 0;
    summary_row(r, m, raw, s, 0);
    cJSON *o = cJSON_CreateObject();
    for (int j = 0; o && j < r->n; j++) {
        const char *v = r->arena + r->off[j];
        char *end;
        double d = strtod(v, &end);
        cJSON *x = !r->num[j] || (v[0] && (*end || !isfinite(d))) ? cJSON_CreateString(v) /* "inf" */
                   : v[0]                                         ? cJSON_CreateNumber(d)
                                                                  : cJSON_CreateNull();
        if (!x || !cJSON_AddItemToObject(o, r->name[j], x)) { /* out of memory: no partial row */
            cJSON_Delete(x);
            cJSON_Delete(o);
            o = NULL;
        }
    }
    free(r);
    return o;
}

/* one JSON line from names / values / number flags; -1 out of memory or I/O */
static int json_line(FILE *out, int n, const char *const *name, const char *const *val, const unsigned char *num)
{
    cJSON *o = cJSON_CreateObject();
    for (int j = 0; o && j < n; j++) {
        char *end;
        double v = strtod(val[j], &end);
        cJSON *x = !num[j] ? cJSON_CreateString(val[j])
                   : val[j][0] && !*end && isfinite(v) ? cJSON_CreateNumber(v) /* the CSV's digits, parsed */
                   : val[j][0] ? cJSON_CreateString(val[j]) /* "inf" (JSON has no infinity) */
                               : cJSON_CreateNull();
        if (!x || !cJSON_AddItemToObject(o, name[j], x)) {
            cJSON_Delete(x);
            cJSON_Delete(o);
            o = NULL;
        }
    }
    char *t = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    int rc = t && fputs(t, out) >= 0 && fputc('\n', out) != EOF ? 0 : -1;
    free(t);
    return rc;
}

int db_table_jsonl(db_table t, const db_run_meta *m, const db_point_raw *raw,
                   const db_point_summary *s, FILE *out)
{
    int lo, hi, rc = 0;
    row *r = db_malloc(sizeof *r);
    if (!r) return -1;
    row_range(t, raw, &lo, &hi);
    for (int i = lo; i < hi && rc == 0; i++) {
        r->n = r->used = r->overflow = 0;
        builders[t](r, m, raw, s, i);
        const char *val[MAX_COLS];
        for (int j = 0; j < r->n; j++) val[j] = r->arena + r->off[j];
        rc = r->overflow ? -1 : json_line(out, r->n, r->name, val, r->num);
    }
    free(r);
    return rc;
}

int db_table_csv_jsonl(db_table t, const db_csv_doc *doc, const char *keep, FILE *out)
{
    if (doc->n < 1) return 0;
    /* which columns are numbers: the row builder's flags, by name */
    static db_run_meta m;
    static db_req_stats req;
    static double wall;
    db_point_raw p = {.n_prompts = 1, .repetitions = 1, .wall_s = &wall, .reqs = &req};
    db_point_summary s;
    memset(&s, 0, sizeof s);
    row *r = db_malloc(sizeof *r);
    const db_csv_record *h = &doc->rec[0];
    unsigned char *num = db_calloc((size_t)h->n + 1, 1);
    const char **val = db_calloc((size_t)h->n + 1, sizeof *val);
    int rc = r && num && val ? 0 : -1;
    if (!rc) {
        r->n = r->used = r->overflow = 0;
        builders[t](r, &m, &p, &s, t == DB_TABLE_ACCEPTANCE || t == DB_TABLE_HISTOGRAM);
        for (int j = 0; j < h->n; j++)
            for (int k = 0; k < r->n; k++)
                if (!strcmp(h->field[j], r->name[k])) num[j] = r->num[k];
    }
    for (int i = 1; !rc && i < doc->n; i++) {
        const db_csv_record *q = &doc->rec[i];
        if ((keep && !keep[i]) || !q->complete || q->n != h->n) continue;
        for (int j = 0; j < h->n; j++) val[j] = q->field[j];
        rc = json_line(out, h->n, (const char *const *)h->field, val, num);
    }
    free(r), free(num), free(val);
    return rc;
}
