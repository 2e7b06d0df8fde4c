/* test_report.c — summaries of synthetic points checked against hand-computed values; the CSV
 * tables parsed back with libcsv (one header, one row per point, quoting); the stdout formats
 * (-o csv is pure CSV, -o json parses, md is a table). */
#include "base/csv_io.h"
#include "bench/progress.h"
#include "report/report.h"
#include "report/report_csv.h"
#include "report_fixture.h"
#include "report/report_out.h"
#include "tap.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int near(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(1, fabs(b)); }

static db_req_stats req(int out, int cycles, double adm, double first, double fin)
{
    db_req_stats q;
    memset(&q, 0, sizeof q);
    q.output_tokens = out;
    q.cycles = cycles;
    q.cycle_tokens = out - 1; /* the prefill commits the first token */
    q.t_admitted = adm;
    q.t_first_token = first;
    q.t_finished = fin;
    return q;
}

/* the worked example: 2 repetitions x 2 prompts, every figure computed by hand */
static void by_hand(void)
{
    db_req_stats reqs[4] = {req(10, 4, 0, 0.1, 1.0), req(6, 3, 0, 0.2, 2.0),
                            req(10, 5, 0, 0.3, 2.0), req(6, 2, 0.5, 0.6, 4.0)};
    reqs[0].t_draft = 0.014;
    reqs[3].t_verify = 0.028;
    for (int i = 0; i < 4; i++) reqs[i].hist[1] = reqs[i].cycles; /* 14 drafting cycles */
    reqs[1].oracle_len_sum = 21;
    double wall[2] = {2.0, 4.0};
    db_point_raw p = {.key = fx_key("math", "dflash2", 4, 1), .n_prompts = 2, .repetitions = 2,
                      .wall_s = wall, .reqs = reqs, .peak_mem_mib = 10, .predicted_tok_s = 12};
    db_point_summary s;
    int rc = db_point_summarize(&p, NULL, 1, &s);
    tap_ok(rc == 0, "summarize");
    /* rounds of 16/2 = 8 and 16/4 = 4 tok/s; tokens over time 32/6 */
    tap_ok(near(s.throughput_tok_s, 32.0 / 6, 1e-12), "throughput 32 tokens / 6 s (%g)", s.throughput_tok_s);
    tap_ok(near(s.throughput_stddev, sqrt(8), 1e-12), "sample stddev sqrt(8) (%g)",
           s.throughput_stddev);
    tap_ok(s.output_tokens == 16 && s.cycles == 7 && near(s.wall_s, 3, 1e-12),
           "per-repetition tokens 16, cycles 7, wall 3 s");
    tap_ok(near(s.tau, 28.0 / 14, 1e-12), "tau = 28 cycle tokens / 14 cycles (%g)", s.tau);
    tap_ok(near(s.tokens_per_target_call, 32.0 / 18, 1e-12),
           "tokens per target call = 32 / (14 cycles + 4 prefills) (%g)", s.tokens_per_target_call);
    tap_ok(near(s.oracle_tau, 21.0 / 14, 1e-12), "oracle tau = 21 / 14");
    /* TTFT 100 200 300 100 ms -> sorted 100 100 200 300 */
    tap_ok(near(s.ttft_ms_mean, 175, 1e-9) && near(s.ttft_ms_p50, 150, 1e-9) &&
               near(s.ttft_ms_p90, 270, 1e-9) && near(s.ttft_ms_p99, 297, 1e-9),
           "TTFT mean/p50/p90/p99 = 175/150/270/297 (%g %g %g %g)", s.ttft_ms_mean, s.ttft_ms_p50,
           s.ttft_ms_p90, s.ttft_ms_p99);
    /* E2E 1000 2000 2000 3500 */
    tap_ok(near(s.e2e_ms_mean, 2125, 1e-9) && near(s.e2e_ms_p50, 2000, 1e-9) &&
               near(s.e2e_ms_p90, 3050, 1e-9) && near(s.e2e_ms_p99, 3455, 1e-9),
           "E2E mean/p50/p90/p99 = 2125/2000/3050/3455");
    /* TPOT 900/9 = 100, 1800/5 = 360, 1700/9, 3400/5 = 680 */
    tap_ok(near(s.tpot_ms_mean, (100 + 360 + 1700.0 / 9 + 680) / 4, 1e-9) &&
               near(s.tpot_ms_p50, (1700.0 / 9 + 360) / 2, 1e-9),
           "TPOT mean and median (%g %g)", s.tpot_ms_mean, s.tpot_ms_p50);
    tap_ok(near(s.draft_ms_per_cycle, 1.0, 1e-9) && near(s.verify_ms_per_cycle, 2.0, 1e-9) &&
               s.select_ms_per_cycle == 0,
           "ms per cycle: 14 ms / 14 cycles draft, 28 ms verify");
    tap_ok(isnan(s.speedup) && isnan(s.speedup_ci_lo), "no baseline: speedup absent");
    tap_ok(near(s.measured_over_predicted, 32.0 / 6 / 12, 1e-12), "measured / predicted = 5.33 / 12");
    tap_ok(s.total.output_tokens == 32 && s.total.cycles == 14, "totals kept");

    /* baseline: 4 tok/s in both rounds -> speedup 5.33 / 4 */
    db_req_stats ar_reqs[4] = {req(10, 9, 0, 0.1, 2.0), req(6, 5, 0, 0.1, 4.0), /* prefill + steps */
                               req(10, 9, 0, 0.1, 2.0), req(6, 5, 0, 0.1, 4.0)};
    double ar_wall[2] = {4.0, 4.0};
    db_point_raw ar = {.key = fx_key("math", "ar", 1, 1), .n_prompts = 2, .repetitions = 2,
                       .wall_s = ar_wall, .reqs = ar_reqs};
    rc = db_point_summarize(&p, &ar, 1, &s);
    tap_ok(rc == 0 && near(s.speedup, 32.0 / 6 / 4, 1e-12), "speedup 5.33 / 4 (%g)", s.speedup);
    tap_ok(s.speedup_ci_lo <= s.speedup_ci_hi && isfinite(s.speedup_ci_lo),
           "CI [%g, %g]", s.speedup_ci_lo, s.speedup_ci_hi);
    db_point_summary s2;
    db_point_summarize(&p, &ar, 1, &s2);
    tap_ok(s2.speedup_ci_lo == s.speedup_ci_lo && s2.speedup_ci_hi == s.speedup_ci_hi,
           "the bootstrap is reproducible for a seed");
    db_point_summary sa;
    db_point_summarize(&ar, NULL, 1, &sa);
    tap_ok(sa.speedup == 1 && sa.speedup_ci_lo == 1 && sa.speedup_ci_hi == 1 && sa.tau == 1 &&
               isnan(sa.oracle_tau),
           "ar: speedup 1 [1, 1], tau 1, no oracle");
}

static void synthetic(void)
{
    db_point_raw ar = fx_raw(fx_key("math", "ar", 1, 4), 3, 16, 1.0);
    db_point_raw same = fx_raw(fx_key("math", "dflash2", 1, 4), 3, 16, 1.0);
    db_point_raw fast = fx_raw(fx_key("math", "dflash2", 8, 4), 3, 16, 2.0);
    db_point_summary s;
    db_point_summarize(&same, &ar, 7, &s);
    tap_ok(near(s.speedup, 1, 1e-12) && near(s.speedup_ci_lo, 1, 1e-12) &&
               near(s.speedup_ci_hi, 1, 1e-12),
           "identical samples: speedup 1, CI [1, 1] (the resampling is paired)");
    db_point_summarize(&fast, &ar, 7, &s);
    tap_ok(near(s.speedup, 2, 1e-12) && near(s.speedup_ci_lo, 2, 1e-9) &&
               near(s.speedup_ci_hi, 2, 1e-9),
           "every time halved: speedup 2, CI [2, 2] (%g [%g, %g])", s.speedup, s.speedup_ci_lo,
           s.speedup_ci_hi);
    /* noise on one side: the CI brackets the estimate */
    for (int k = 0; k < 48; k++) fast.reqs[k].t_finished *= 1 + 0.3 * ((k * 37) % 11) / 10.0;
    db_point_summarize(&fast, &ar, 7, &s);
    tap_ok(s.speedup_ci_lo < s.speedup_ci_hi && s.speedup_ci_lo <= s.speedup + 1e-9 &&
               s.speedup <= s.speedup_ci_hi + 1e-9,
           "uneven requests: %g in [%g, %g]", s.speedup, s.speedup_ci_lo, s.speedup_ci_hi);

    /* acceptance rates and histogram */
    const db_req_stats *t = &s.total;
    int rates_ok = 1;
    for (int i = 1; i < 8; i++) {
        double c = (double)t->accepted[i] / (double)t->reached[i],
               v = (double)t->accepted[i] / (double)t->cycles;
        if (!(c >= 0 && c <= 1 && v >= 0 && v <= 1 && v <= c)) rates_ok = 0;
    }
    tap_ok(rates_ok, "conditional and survival rates in [0, 1], survival <= conditional");
    long hs = 0;
    for (int L = 1; L <= 8; L++) hs += t->hist[L];
    tap_ok(hs == t->cycles, "histogram counts every cycle once");
    db_point_raw_free(&ar);
    db_point_raw_free(&same);
    db_point_raw_free(&fast);
}

/* the tables of a few points, written and parsed back */
typedef struct {
    char *text;
    size_t len;
    db_csv_doc doc;
} table;

static void tables(void)
{
    db_run_meta m;
    fx_meta(&m);
    db_point_raw pts[3] = {fx_raw(fx_key("gsm8k, hard \"x\"", "ar", 1, 2), 2, 3, 1.0),
                           fx_raw(fx_key("gsm8k, hard \"x\"", "dflash2", 8, 2), 2, 3, 1.5),
                           fx_raw(fx_key("code", "conv-off", 16, 2), 2, 3, 1.2)};
    db_point_summary sum[3];
    for (int i = 0; i < 3; i++) db_point_summarize(&pts[i], i == 1 ? &pts[0] : NULL, 1, &sum[i]);
    table tb[DB_TABLE_COUNT];
    char err[256];
    for (int t = 0; t < DB_TABLE_COUNT; t++) {
        FILE *f = open_memstream(&tb[t].text, &tb[t].len);
        db_table_header((db_table)t, f);
        for (int i = 0; i < 3; i++) db_table_rows((db_table)t, &m, &pts[i], &sum[i], f);
        fclose(f);
        int rc = db_csv_parse(tb[t].text, tb[t].len, &tb[t].doc, err, sizeof err);
        const db_csv_doc *d = &tb[t].doc;
        int shape = rc == 0 && d->n > 1;
        for (int r = 0; shape && r < d->n; r++)
            shape = d->rec[r].complete && d->rec[r].n == d->rec[0].n;
        tap_ok(shape, "%s: parses with libcsv, every row as wide as the header (%d columns)",
               db_table_file[t], d->n ? d->rec[0].n : 0);
        tap_ok(d->n && !strcmp(d->rec[0].field[0], "schema_version") &&
                   !strcmp(d->rec[0].field[1], "point_id") && atoi(d->rec[1].field[0]) == DB_SCHEMA_VERSION,
               "%s: schema_version first, = %d", db_table_file[t], DB_SCHEMA_VERSION);
        int headers = 0;
        for (int r = 1; r < d->n; r++) headers += !strcmp(d->rec[r].field[0], "schema_version");
        tap_ok(headers == 0, "%s: one header line", db_table_file[t]);
    }
    const db_csv_doc *s = &tb[DB_TABLE_SUMMARY].doc;
    tap_ok(s->n == 4, "summary.csv: one row per point");
    int ds = db_csv_col(s, "dataset"), sp = db_csv_col(s, "speedup"),
        thr = db_csv_col(s, "throughput_tok_s"), mop = db_csv_col(s, "measured_over_predicted");
    tap_ok(ds > 0 && !strcmp(s->rec[1].field[ds], "gsm8k, hard \"x\"") &&
               strstr(tb[DB_TABLE_SUMMARY].text, "\"gsm8k, hard \"\"x\"\"\""),
           "a dataset name with a comma and quotes is quoted and round-trips");
    tap_ok(!strcmp(s->rec[1].field[sp], "1") && s->rec[3].field[sp][0] == 0 &&
               near(strtod(s->rec[2].field[sp], NULL), sum[1].speedup, 1e-9),
           "speedup: 1 for ar, empty without a baseline, the value otherwise");
    tap_ok(near(strtod(s->rec[2].field[thr], NULL), sum[1].throughput_tok_s, 1e-9) &&
               s->rec[2].field[mop][0] == 0,
           "numbers round-trip; absent ones are empty");
    const char *need[] = {"backend", "dataset", "variant", "block_size", "concurrency",
                          "temperature", "top_p", "top_k", "max_new_tokens", "n_prompts",
                          "repetitions", "output_tokens", "wall_s", "throughput_tok_s",
                          "throughput_stddev", "speedup", "speedup_ci_lo", "speedup_ci_hi", "tau",
                          "cycles", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99",
                          "e2e_ms_p50", "e2e_ms_p99", "draft_ms_per_cycle",
                          "select_ms_per_cycle", "correct_ms_per_cycle", "verify_ms_per_cycle", "peak_mem_mib",
                          "chat_template", "thinking", "acceptance_source", "weights",
                          "oracle_tau", "measured_over_predicted", "tool_version", "git_commit",
                          "device", "cpu_model", "cpu_cores", "cpu_threads", "simd", "compiler",
                          "target", "target_sha256", "target_dtype", "drafter", "drafter_sha256", "drafter_dtype", "seed",
                          "test_time"};
    int missing = 0;
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (db_csv_col(s, need[i]) < 0) {
            tap_diag("summary.csv lacks %s", need[i]);
            missing++;
        }
    tap_ok(!missing, "summary.csv has every required column");
    int tt = db_csv_col(s, "test_time");
    tap_ok(!strcmp(s->rec[1].field[tt], "2026-11-29T02:00:00Z"), "test_time is RFC 3339 UTC");
    int dr = db_csv_col(s, "drafter");
    tap_ok(s->rec[1].field[dr][0] == 0 && !strcmp(s->rec[2].field[dr], "tiny-qwen3-dflash2-b16"),
           "ar rows name no drafter");

    const db_csv_doc *a = &tb[DB_TABLE_ACCEPTANCE].doc;
    tap_ok(a->n == 1 + 7 + 15, "acceptance.csv: B-1 rows per drafter point, none for ar");
    int cr = db_csv_col(a, "conditional_rate"), sr = db_csv_col(a, "survival_rate"),
        r1 = db_csv_col(a, "recall_at_1"), rk = db_csv_col(a, "recall_at_k");
    int in01 = cr > 0 && sr > 0 && r1 > 0 && rk > 0;
    for (int r = 1; in01 && r < a->n; r++) {
        int cols[4] = {cr, sr, r1, rk};
        for (int c = 0; c < 4; c++) {
            const char *v = a->rec[r].field[cols[c]];
            double x = strtod(v, NULL);
            if (v[0] && !(x >= 0 && x <= 1)) in01 = 0;
        }
    }
    tap_ok(in01, "acceptance rates and recalls in [0, 1]");

    const db_csv_doc *h = &tb[DB_TABLE_HISTOGRAM].doc;
    tap_ok(h->n == 1 + 1 + 8 + 16, "histogram.csv: B rows per point (1 for ar)");
    int pid = db_csv_col(h, "point_id"), sh = db_csv_col(h, "share");
    int shares_ok = 1;
    for (int r = 1; r < h->n;) {
        double tot = 0;
        int q = r;
        while (q < h->n && !strcmp(h->rec[q].field[pid], h->rec[r].field[pid]))
            tot += strtod(h->rec[q++].field[sh], NULL);
        if (!near(tot, 1, 1e-8)) shares_ok = 0;
        r = q;
    }
    tap_ok(shares_ok, "histogram shares of each point sum to 1");
    tap_ok(!strcmp(h->rec[1].field[sh], "1"), "ar: all cycles commit one token");

    const db_csv_doc *q = &tb[DB_TABLE_REQUESTS].doc;
    tap_ok(q->n == 1 + 3 * 6, "requests.csv: one row per request and repetition");
    int pi = db_csv_col(q, "prompt_index"), rp = db_csv_col(q, "repetition"),
        ttft = db_csv_col(q, "ttft_ms");
    tap_ok(!strcmp(q->rec[5].field[pi], "1") && !strcmp(q->rec[5].field[rp], "1") &&
               near(strtod(q->rec[1].field[ttft], NULL), 50, 1e-9),
           "request rows: prompt index, repetition, TTFT 50 ms");

    for (int t = 0; t < DB_TABLE_COUNT; t++) {
        free(tb[t].text);
        db_csv_doc_free(&tb[t].doc);
    }

    /* stdout formats */
    char *text;
    size_t len;
    db_out o;
    FILE *f = open_memstream(&text, &len);
    db_out_begin(&o, f, "csv", 0, err, sizeof err);
    for (int i = 0; i < 3; i++) db_out_point(&o, &m, &pts[i], &sum[i], 0, err, sizeof err);
    db_out_end(&o, err, sizeof err);
    fclose(f);
    db_csv_doc d;
    int rc = db_csv_parse(text, len, &d, err, sizeof err);
    int pure = rc == 0 && d.n == 4 && len > 0 && text[len - 1] == '\n';
    for (int r = 0; pure && r < d.n; r++) pure = d.rec[r].complete && d.rec[r].n == d.rec[0].n;
    tap_ok(pure && !strcmp(d.rec[0].field[0], "schema_version"),
           "-o csv: a header and one row per point, nothing else");
    char *sum_text;
    size_t sum_len;
    f = open_memstream(&sum_text, &sum_len);
    db_table_header(DB_TABLE_SUMMARY, f);
    for (int i = 0; i < 3; i++) db_table_rows(DB_TABLE_SUMMARY, &m, &pts[i], &sum[i], f);
    fclose(f);
    tap_ok(sum_len == len && !memcmp(sum_text, text, len), "-o csv is byte for byte summary.csv");
    free(sum_text);
    db_csv_doc_free(&d);
    free(text);

    f = open_memstream(&text, &len);
    db_out_begin(&o, f, "json", 0, err, sizeof err);
    for (int i = 0; i < 3; i++) db_out_point(&o, &m, &pts[i], &sum[i], 0, err, sizeof err);
    db_out_end(&o, err, sizeof err);
    fclose(f);
    cJSON *j = cJSON_Parse(text);
    cJSON *j2 = cJSON_GetArrayItem(j, 2), *j1 = cJSON_GetArrayItem(j, 1);
    tap_ok(cJSON_IsArray(j) && cJSON_GetArraySize(j) == 3 &&
               cJSON_IsNull(cJSON_GetObjectItem(j2, "speedup")) &&
               cJSON_IsNumber(cJSON_GetObjectItem(j1, "speedup")) &&
               cJSON_GetObjectItem(j1, "schema_version")->valueint == DB_SCHEMA_VERSION &&
               cJSON_IsString(cJSON_GetObjectItem(j1, "seed")),
           "-o json: an array of summary objects, absent values null");
    cJSON_Delete(j);
    free(text);

    f = open_memstream(&text, &len);
    db_out_begin(&o, f, "md", 1, err, sizeof err); /* with the model columns */
    for (int i = 0; i < 3; i++) db_out_point(&o, &m, &pts[i], &sum[i], 0, err, sizeof err);
    db_out_end(&o, err, sizeof err);
    fclose(f);
    tap_ok(strstr(text, "| target | dtype | dataset |") && strstr(text, "| tiny-qwen3 | f32 | gsm8k, hard \"x\" | ar |") &&
               strstr(text, "| tiny-qwen3 | f32 / f32 | gsm8k, hard \"x\" | dflash2 | 8 |"),
           "-o md over several checkpoints: target and dtype (target / drafter) columns");
    free(text);
    f = open_memstream(&text, &len);
    db_out_begin(&o, f, "md", 0, err, sizeof err);
    for (int i = 0; i < 3; i++) db_out_point(&o, &m, &pts[i], &sum[i], 0, err, sizeof err);
    db_out_end(&o, err, sizeof err);
    fclose(f);
    int lines = 0, table_ok = 1;
    for (char *l = text; *l && *l != '\n'; l = strchr(l, '\n') + 1) { /* the table: up to the first blank line */
        lines++;
        if (l[0] != '|') table_ok = 0;
    }
    tap_ok(table_ok && lines == 5 && strstr(text, "| dflash2 | 8 |") && strstr(text, "x ["),
           "-o md: a markdown table, speedup with its CI");
    /* two drafter variants ran: the combined table under it, a cell per (dataset, B, c, T) and variant */
    const char *comb = strstr(text, "\nCombined: tau / speedup / draft ms per cycle");
    tap_ok(comb && strstr(comb, "| dataset | B | conc | T | dflash2 | conv-off |") &&
               strstr(comb, "| gsm8k, hard \"x\" | 8 | 2 | 0 | ") && strstr(comb, " / 1.50x / ") && strstr(comb, " - |"),
           "-o md with two drafter variants: the combined table (tau / speedup / draft ms; '-' where a variant did not run)");
    if (!comb) tap_diag("%s", text);
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) tap_diag("%s", l);
    free(text);
    tap_ok(db_out_begin(&o, stdout, "xml", 0, err, sizeof err) == DB_EINPUT, "unknown -o: %s", err);
    for (int i = 0; i < 3; i++) db_point_raw_free(&pts[i]);
    db_run_meta_free(&m);
}

static void progress(void)
{
    char *text;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    db_progress pr;
    db_progress_begin(&pr, f, 3, 10);
    pr.t0 = db_now() - 10; /* 10 s elapsed when the first group ends */
    db_progress_start(&pr, "math c1 T0 (1 point x 3 rounds)");
    db_progress_done(&pr, "math c1 T0 (1 point x 3 rounds)", 1, 1, 0.04);
    db_progress_start(&pr, "math c8 T0 (2 points x 3 rounds)");
    db_progress_done(&pr, "math c8 T0 (2 points x 3 rounds)", 2, 9, 75);
    db_progress_end(&pr);
    fclose(f);
    tap_ok(!pr.tty && strstr(text, "[1/3 points] math c1 T0 (1 point x 3 rounds): the group took 0.0s, ETA 1m30s") &&
               strstr(text, "[3/3 points] math c8 T0 (2 points x 3 rounds): the group took 1m15s, ETA 0.0s") &&
               !strchr(text, '\r'),
           "progress without a terminal: one line per group, its own time, the ETA by predicted cost (cost 1 of 10 "
           "done in 10 s: 90 s left)");
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) tap_diag("%s", l);
    free(text);
}

/* stdout stays empty until a point completes; -o json closes its array on an early exit */
static void out_empty_and_abort(void)
{
    const char *fmts[] = {"md", "csv", "json"};
    char err[256], *text;
    size_t len;
    db_out o;
    int empty = 1;
    for (int i = 0; i < 3; i++) {
        FILE *f = open_memstream(&text, &len);
        db_out_begin(&o, f, fmts[i], 0, err, sizeof err);
        db_out_end(&o, err, sizeof err);
        fclose(f);
        empty &= len == 0;
        free(text);
        f = open_memstream(&text, &len);
        db_out_begin(&o, f, fmts[i], 0, err, sizeof err);
        db_out_abort(&o);
        fclose(f);
        empty &= len == 0;
        free(text);
    }
    tap_ok(empty, "md, csv, json: nothing on stdout before the first point (end or abort)");
    db_run_meta m;
    fx_meta(&m);
    db_point_raw p = fx_raw(fx_key("math", "ar", 1, 2), 2, 3, 1.0);
    db_point_summary s;
    db_point_summarize(&p, NULL, 1, &s);
    FILE *f = open_memstream(&text, &len);
    db_out_begin(&o, f, "json", 0, err, sizeof err);
    db_out_point(&o, &m, &p, &s, 0, err, sizeof err);
    db_out_abort(&o);
    fclose(f);
    cJSON *j = cJSON_Parse(text);
    tap_ok(cJSON_IsArray(j) && cJSON_GetArraySize(j) == 1, "-o json stopped after a point: the array is closed");
    cJSON_Delete(j);
    free(text);
    db_point_raw_free(&p);
    db_run_meta_free(&m);
}

/* the md note of a drafter row below speedup 1, given its figures (speedup 0.9) */
static char *note_of(double cost, double tau, double draft_ms, double weights)
{
    db_run_meta m;
    fx_meta(&m);
    m.cpu.l3 = 32 << 20;
    db_point_raw p = fx_raw(fx_key("math", "dflash2", 8, 2), 2, 3, 1.0);
    db_point_summary s;
    db_point_summarize(&p, NULL, 1, &s);
    s.speedup = 0.9;
    s.verify_cost_steps = cost;
    s.tau = tau;
    s.verify_ms_per_cycle = 1;
    s.draft_ms_per_cycle = draft_ms;
    s.select_ms_per_cycle = s.correct_ms_per_cycle = s.host_ms_per_cycle = 0;
    char err[256], *text;
    size_t len;
    db_out o;
    FILE *f = open_memstream(&text, &len);
    db_out_begin(&o, f, "md", 0, err, sizeof err);
    db_out_point(&o, &m, &p, &s, weights, err, sizeof err);
    db_out_end(&o, err, sizeof err);
    fclose(f);
    db_point_raw_free(&p);
    db_run_meta_free(&m);
    return text;
}

/* warnings name a point by every axis that varies, and join their reasons without a dangling ';' */
static void warnings(void)
{
    db_point_raw p = fx_raw(fx_key("math", "dflash2", 8, 4), 2, 3, 1.0);
    snprintf(p.key.target, sizeof p.key.target, "tiny-q8");
    snprintf(p.key.drafter, sizeof p.key.drafter, "tiny-d2");
    snprintf(p.key.acceptance_source, sizeof p.key.acceptance_source, "replay:gsm8k.csv");
    db_point_summary s;
    db_point_summarize(&p, NULL, 1, &s);
    char b[600];
    s.mean_in_flight = p.key.concurrency; /* the fixture's requests overlap less: not this test's case */
    s.stable = 1;
    tap_ok(!db_out_point_warning(&p, &s, 0, b, sizeof b), "a stable point without faults: no warning");
    s.stable = 0;
    s.unstable_why = DB_UNSTABLE_VARIES;
    int w = db_out_point_warning(&p, &s, DB_VARY_TARGET | DB_VARY_DRAFTER | DB_VARY_PROFILE, b, sizeof b);
    tap_ok(w && !strcmp(b, "tiny-q8 math dflash2 drafter tiny-d2 profile replay:gsm8k.csv B8 c4 T0: throughput "
                           "varies by more than 10% across rounds"),
           "one reason, target, drafter and profile named, no trailing ';': %s", b);
    p.major_faults = 3;
    db_out_point_warning(&p, &s, 0, b, sizeof b);
    size_t L = strlen(b);
    tap_ok(strstr(b, "math dflash2 B8 c4 T0: throughput varies") && strstr(b, "rounds; major page faults") &&
               b[L - 1] != ';' && !strstr(b, "tiny-q8"),
           "two reasons joined by '; ', no axis named that does not vary: %s", b);
    s.stable = 1;
    p.major_faults = 0;
    s.mean_in_flight = 0.5 * p.key.concurrency;
    tap_ok(db_out_point_warning(&p, &s, 0, b, sizeof b) && strstr(b, "c4 T0: only 2.0 requests in flight"),
           "a row with too few requests in flight is named: %s", b);
    db_point_raw_free(&p);
}

static void reading_note(void)
{
    /* verify 3.71 steps, nothing else in the cycle, tau 4.00: a cycle is cheaper than its tokens */
    char *t = note_of(3.71, 4.0, 0, 1.5 * (1 << 30));
    tap_ok(strstr(t, "Reading note") && !strstr(t, "costs more than decoding") && strstr(t, "costs less") &&
               strstr(t, "(1536.0 MiB) exceed the last-level cache (32.0 MiB)"),
           "note: verify 3.71 steps, tau 4.00 is not called dearer than decoding; weights as given (1.5 GiB)");
    for (char *l = strtok(t, "\n"); l; l = strtok(NULL, "\n")) tap_diag("%s", l);
    free(t);
    /* the same verify with 1 ms of drafting per 1 ms verify: 7.42 steps a cycle > tau 4 */
    t = note_of(3.71, 4.0, 1, 1 << 20);
    tap_ok(strstr(t, "a whole cycle (draft, select, verify, host) 7.42") && strstr(t, "costs more than decoding") &&
               strstr(t, "(1.0 MiB) fit in") && strstr(t, "compute-bound"),
           "note: a cycle of 7.42 steps against tau 4 costs more; weights within the cache: compute-bound");
    free(t);
}

/* One drafting cycle of a hand-made request at B = 4 (positions 1..3), accepting a drafts and
 * committing a + 1 tokens, the request's output reaching past the block (no censoring). */
static void cycle_of(db_req_stats *q, int a)
{
    q->cycles++;
    q->cycle_tokens += a + 1;
    q->output_tokens += a + 1;
    q->hist[a + 1]++;
    for (int i = 1; i < 4; i++) {
        q->drafted[i]++;
        q->reached[i] += i <= a + 1;
        q->accepted[i] += i <= a;
    }
}

/* The acceptance definitions engines print, on three requests at B = 4 whose cycles accept
 *   A: 3, 3, 0   (3 cycles, 9 tokens: tau 3)
 *   B: 1         (1 cycle, 2 tokens: tau 2)
 *   C: 0, 0, 0, 2 (4 cycles, 6 tokens: tau 1.5)
 * By hand: pooled tau = 17 / 8 = 2.125; the mean over requests (3 + 2 + 1.5) / 3 = 2.1666...;
 * token-weighted (9*3 + 2*2 + 6*1.5) / 17 = 40 / 17. Per position, accepted 4, 3, 2 of
 * reached 8, 4, 3 (conditional 0.5, 0.75, 0.666...) and of the 8 cycles (unconditional 0.5,
 * 0.375, 0.25); drafted tokens accepted 9 / (8 x 3) = 0.375. */
static void acceptance_definitions(void)
{
    db_req_stats q[3];
    memset(q, 0, sizeof q);
    int acc[3][4] = {{3, 3, 0, -1}, {1, -1}, {0, 0, 0, 2}};
    for (int r = 0; r < 3; r++) {
        q[r].output_tokens = 1; /* the prefill's */
        for (int c = 0; c < 4 && acc[r][c] >= 0; c++) cycle_of(&q[r], acc[r][c]);
        q[r].t_first_token = 0.01, q[r].t_finished = 0.1;
    }
    double wall = 1;
    db_point_raw p = {.key = fx_key("math", "dflash2", 4, 1), .n_prompts = 3, .repetitions = 1, .wall_s = &wall, .reqs = q};
    db_point_summary s;
    tap_ok(db_point_summarize(&p, NULL, 1, &s) == 0, "summarize the hand-made requests");
    tap_ok(near(s.tau, 2.125, 1e-12), "tau pooled over cycles: 17 tokens / 8 cycles = 2.125 (%g)", s.tau);
    tap_ok(near(s.tau_request_mean, 6.5 / 3, 1e-12), "tau per request, averaged: (3 + 2 + 1.5) / 3 (%g)", s.tau_request_mean);
    tap_ok(near(s.tau_token_weighted, 40.0 / 17, 1e-12), "tau weighted by the requests' tokens: 40 / 17 (%g)",
           s.tau_token_weighted);
    tap_ok(near(s.cond_rate[1], 0.5, 1e-12) && near(s.cond_rate[2], 0.75, 1e-12) && near(s.cond_rate[3], 2.0 / 3, 1e-12),
           "conditional: accepted / reached = 4/8, 3/4, 2/3");
    tap_ok(near(s.uncond_rate[1], 0.5, 1e-12) && near(s.uncond_rate[2], 0.375, 1e-12) && near(s.uncond_rate[3], 0.25, 1e-12),
           "unconditional: accepted / drafting cycles = 4/8, 3/8, 2/8");
    tap_ok(near(s.draft_acceptance_rate, 0.375, 1e-12) && isnan(s.uncond_rate[4]) && isnan(s.cond_rate[0]),
           "draft acceptance rate 9 accepted / 24 drafted; no rate outside positions 1..B-1");
    /* the same numbers in the tables */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    db_run_meta m;
    memset(&m, 0, sizeof m);
    db_table_header(DB_TABLE_ACCEPTANCE, f);
    db_table_rows(DB_TABLE_ACCEPTANCE, &m, &p, &s, f);
    db_table_header(DB_TABLE_SUMMARY, f);
    db_table_rows(DB_TABLE_SUMMARY, &m, &p, &s, f);
    fclose(f);
    tap_ok(buf && strstr(buf, ",conditional_rate,unconditional_rate,survival_rate,") && strstr(buf, ",2,8,4,3,0.75,0.375,0.375,") &&
               strstr(buf, ",tau,tau_request_mean,tau_token_weighted,draft_acceptance_rate,") &&
               strstr(buf, ",2.125,2.166666667,2.352941176,0.375,"),
           "acceptance.csv: position 2's conditional and unconditional rates; summary.csv: the three tau");
    free(buf);
    /* ar: every definition is 1, no per-position rate */
    db_req_stats a[2];
    memset(a, 0, sizeof a);
    a[0].output_tokens = 5, a[0].cycles = a[0].cycle_tokens = 4, a[1].output_tokens = 2, a[1].cycles = a[1].cycle_tokens = 1;
    db_point_raw pa = {.key = fx_key("math", "ar", 1, 1), .n_prompts = 2, .repetitions = 1, .wall_s = &wall, .reqs = a};
    db_point_summarize(&pa, NULL, 1, &s);
    tap_ok(s.tau == 1 && s.tau_request_mean == 1 && s.tau_token_weighted == 1 && isnan(s.draft_acceptance_rate),
           "ar: the three tau are 1, no draft acceptance");
}

/* serving figures by hand: 2 rounds of 3 requests arriving at 0, 0.5 and 1.5 s (gaps 0.5, 1.0),
 * the third waiting 0.2 s for a slot; 10, 4 and 1 output tokens of 10, 20 and 30 prompt
 * tokens; TTFT from the arrival 0.1, 0.1, 0.3 s; TPOT 0.1, 0.1 s, none; rounds of 2 s */
static void serving_by_hand(void)
{
    db_req_stats q[6];
    memset(q, 0, sizeof q);
    const double arr[3] = {0, 0.5, 1.5}, adm[3] = {0, 0.5, 1.7}, first[3] = {0.1, 0.6, 1.8}, fin[3] = {1.0, 0.9, 2.0};
    const int out[3] = {10, 4, 1};
    for (int i = 0; i < 6; i++) {
        int j = i % 3;
        q[i] = (db_req_stats){.prompt_tokens = 10 * (j + 1), .output_tokens = out[j], .cycles = out[j] - 1,
                              .cycle_tokens = out[j] - 1, .t_arrival = arr[j], .t_admitted = adm[j],
                              .t_first_token = first[j], .t_finished = fin[j], .scheduled = 1};
    }
    double wall[2] = {2, 2};
    float itl[4] = {0.01f, 0.02f, 0.03f, 0.04f};
    db_point_raw p = {.key = fx_key("math", "ar", 1, 2), .n_prompts = 3, .repetitions = 2, .wall_s = wall, .reqs = q,
                      .itl_s = itl, .n_itl = 4, .slo_ttft_s = 0.2, .slo_tpot_s = 0.15};
    p.key.request_rate = 1.25;
    db_point_summary s;
    tap_ok(db_point_summarize(&p, NULL, 1, &s) == 0, "summarize a scheduled point");
    tap_ok(near(s.arrival_rate, 4.0 / 3, 1e-12), "arrival rate: 4 gaps in 3 s (%g)", s.arrival_rate);
    tap_ok(near(s.arrival_cv, sqrt(0.25 / 3) / 0.75, 1e-9), "arrival gaps 0.5, 1, 0.5, 1: CV %g", s.arrival_cv);
    tap_ok(near(s.request_throughput, 1.5, 1e-12) && near(s.input_tok_s, 30, 1e-12),
           "6 requests and 120 prompt tokens in 4 s: 1.5 req/s, 30 tok/s");
    tap_ok(near(s.ttft_ms_mean, 500.0 / 3, 1e-9) && near(s.ttft_ms_p50, 100, 1e-9) && near(s.ttft_ms_p99, 300, 1e-9),
           "TTFT from the arrival: 100, 100, 300 ms (mean %g, p50 %g, p99 %g)", s.ttft_ms_mean, s.ttft_ms_p50, s.ttft_ms_p99);
    tap_ok(near(s.queue_ms_mean, 200.0 / 3, 1e-9) && near(s.queue_ms_p50, 0, 1e-9) && near(s.queue_ms_p90, 200, 1e-9),
           "queue 0, 0, 200 ms (mean %g, p90 %g)", s.queue_ms_mean, s.queue_ms_p90);
    tap_ok(near(s.e2e_ms_mean, 1900.0 / 3, 1e-9) && near(s.tpot_ms_mean, 100, 1e-9),
           "E2E from the arrival 1000, 400, 500 ms; TPOT 100 ms");
    tap_ok(near(s.itl_ms_mean, 25, 1e-5) && near(s.itl_ms_p50, 25, 1e-5) && near(s.itl_ms_p90, 37, 1e-5) &&
               near(s.itl_ms_p99, 39.7, 1e-5),
           "ITL 10, 20, 30, 40 ms: mean 25, p50 25, p90 37, p99 39.7 (%g %g %g)", s.itl_ms_p50, s.itl_ms_p90, s.itl_ms_p99);
    tap_ok(near(s.goodput, 1.0, 1e-12) && near(s.slo_attainment, 4.0 / 6, 1e-12),
           "TTFT <= 200 ms and TPOT <= 150 ms: 4 of 6 requests, goodput 1 req/s (%g)", s.goodput);
    p.slo_ttft_s = 0, p.slo_tpot_s = 0.05;
    db_point_summarize(&p, NULL, 1, &s);
    tap_ok(near(s.slo_attainment, 2.0 / 6, 1e-12), "TPOT <= 50 ms alone: the one-token requests (2 of 6)");
    p.slo_tpot_s = 0;
    db_point_summarize(&p, NULL, 1, &s);
    tap_ok(isnan(s.goodput) && isnan(s.slo_attainment), "no SLO: no goodput");
    for (int i = 0; i < 6; i++) q[i].scheduled = 0;
    db_point_summarize(&p, NULL, 1, &s);
    tap_ok(near(s.queue_ms_mean, 0, 1e-12) && near(s.ttft_ms_p50, 100, 1e-9) && near(s.arrival_rate, 4 / 3.4, 1e-9),
           "closed loop: a request arrives at its admission (no queue; admissions 0, 0.5, 1.7)");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    db_run_meta m;
    memset(&m, 0, sizeof m);
    db_table_rows(DB_TABLE_REQUESTS, &m, &p, &s, f);
    cJSON *j = db_summary_json(&m, &p, &s);
    fclose(f);
    cJSON *rate = cJSON_GetObjectItem(j, "request_rate");
    tap_ok(buf && strstr(buf, ",1.25,") && rate && cJSON_IsNumber(rate) && rate->valuedouble == 1.25,
           "request_rate 1.25 in the rows and the JSON");
    cJSON_Delete(j);
    free(buf);
    db_out o;
    char err[256];
    buf = NULL, len = 0;
    f = open_memstream(&buf, &len);
    db_out_begin(&o, f, "md", 0, err, sizeof err);
    o.load = 1;
    db_out_point(&o, &m, &p, &s, 0, err, sizeof err);
    db_out_end(&o, err, sizeof err);
    fclose(f);
    tap_ok(buf && strstr(buf, "| rate req/s | arrived req/s | req/s | ITL p50 ms | goodput req/s |") &&
               strstr(buf, "| 1.25 | 1.18 | 1.50 | 25.00 | - |\n"),
           "md with the serving columns: asked and arrived rates, req/s, ITL p50, goodput");
    free(buf);
    p.key.request_rate = INFINITY;
    j = db_summary_json(&m, &p, &s);
    rate = cJSON_GetObjectItem(j, "request_rate");
    tap_ok(rate && cJSON_IsString(rate) && !strcmp(rate->valuestring, "inf"), "a closed loop's rate: \"inf\" in JSON");
    cJSON_Delete(j);
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    progress();
    out_empty_and_abort();
    reading_note();
    warnings();
    by_hand();
    acceptance_definitions();
    serving_by_hand();
    synthetic();
    tables();
    return tap_done();
}
