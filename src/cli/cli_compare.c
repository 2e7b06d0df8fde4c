/* cli_compare.c — `dflash-bench compare BASE NEW`: two results directories row by row
 * (report/compare.h has the definitions). Exit status: 0 compared (whatever the verdicts), 1
 * with --fail-on-regression PCT when a row is significantly slower by more than PCT percent, 2
 * a directory absent, not results, or unreadable (named). */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/util.h"
#include "report/compare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void more_help(FILE *f)
{
    fprintf(f, "\nRows are matched by their point (every axis: dataset, variant, block size, concurrency, ...;\n"
               "not the label, directory, machine or build). Per row: NEW/BASE of throughput and of speedup\n"
               "with a 95%% percentile bootstrap interval (prompts and rounds resampled, fixed seed), the\n"
               "verdict faster / slower (interval excludes 1 and the change is at least --min-change),\n"
               "same, or unstable (a side's row is not stable), tau and acceptance differences, and the\n"
               "rows one side lacks (only-base / only-new).\n");
}

int db_cmd_compare(int argc, char **argv, char *err, size_t errlen)
{
    const char *metric = "throughput", *format = "md";
    float fail_pct = -1, min_change = 100 * DB_COMPARE_MIN_CHANGE;
    int help = 0, nopt = 2, npos = 0;
    const db_opt opts[] = {
        {"metric", 0, "M", "the ratio the verdicts judge: throughput (default) or speedup", NULL, DB_OPT_STR, &metric},
        {"min-change", 0, "PCT", "smallest change called faster / slower (default 5)", NULL, DB_OPT_FLOAT, &min_change},
        {"fail-on-regression", 0, "PCT", "exit 1 when a row is significantly slower by more than PCT percent", NULL,
         DB_OPT_FLOAT, &fail_pct},
        {"output", 'o', "FMT", "stdout format: md (default), csv, json", NULL, DB_OPT_STR, &format},
    };
    const db_cmd_opts cmd = {"compare",
                             "compare BASE NEW: two results directories side by side, row by row (NEW / BASE).",
                             opts, (int)(sizeof opts / sizeof *opts), more_help};
    char **o = db_malloc(sizeof *o * (size_t)argc), **pos = db_malloc(sizeof *pos * (size_t)argc);
    if (!o || !pos) {
        free(o), free(pos);
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory sorting %d arguments", argc);
    }
    o[0] = argv[0], o[1] = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            pos[npos++] = argv[i];
            continue;
        }
        o[nopt++] = argv[i];
        /* an option's value follows it unless given with '=' (the parser checks the rest) */
        int takes = 0;
        for (size_t j = 0; j < sizeof opts / sizeof *opts; j++)
            takes |= (a[1] == '-' && !strcmp(a + 2, opts[j].name)) || (a[1] == opts[j].short_flag && !a[2]);
        if (takes && i + 1 < argc) o[nopt++] = argv[++i];
    }
    int rc = db_opts_parse(&cmd, nopt, o, &help, err, errlen);
    if (!rc && !help && npos != 2)
        rc = db_fail(err, errlen, DB_EINPUT, "want BASE NEW (two results directories; got %d argument%s)", npos,
                     npos == 1 ? "" : "s");
    if (!rc && !help && strcmp(format, "md") && strcmp(format, "csv") && strcmp(format, "json"))
        rc = db_fail(err, errlen, DB_EINPUT, "-o %s: md, csv or json", format);
    if (!rc && !help && fail_pct != -1 && !(fail_pct >= 0 && fail_pct < 100))
        rc = db_fail(err, errlen, DB_EINPUT, "--fail-on-regression %g: a percentage from 0 to below 100", (double)fail_pct);
    db_results_read base = {0}, nw = {0};
    db_compare c = {0};
    if (!rc && !help) rc = db_results_read_init(&base, pos[0], err, errlen);
    if (!rc && !help) rc = db_results_read_init(&nw, pos[1], err, errlen);
    if (!rc && !help) rc = db_compare_init(&c, &base, &nw, metric, (double)min_change / 100, err, errlen);
    if (!rc && !help) rc = db_compare_print(&c, stdout, format, err, errlen);
    if (!rc && !help && fail_pct >= 0) {
        int k = db_compare_regressions(&c, (double)fail_pct);
        if (k) rc = db_fail(err, errlen, DB_ERUNTIME, "%d row%s significantly slower by more than %g%% (%s)", k,
                            k == 1 ? "" : "s", (double)fail_pct, metric);
    }
    db_compare_free(&c);
    db_results_read_free(&base);
    db_results_read_free(&nw);
    free(o), free(pos);
    return rc;
}
