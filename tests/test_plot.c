/* test_plot.c — scripts/plot draws non-empty PNGs from a small results directory written by the
 * real writers (skipped when gnuplot is not installed). */
#include "report/report.h"
#include "report_fixture.h"
#include "report/results_dir.h"
#include "base/util.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    if (system("command -v gnuplot >/dev/null 2>&1") != 0)
        tap_skip_all("gnuplot not installed (SETUP_EXTRAS=1 scripts/setup)");
    char base[] = "/tmp/db-plot-XXXXXX";
    if (!mkdtemp(base)) tap_skip_all("no temporary directory");
    char err[512];
    db_results r;
    int rc = db_results_open(&r, base, 0, err, sizeof err);
    tap_ok(rc == 0, "results directory (%s)", err);
    db_run_meta m;
    fx_meta(&m);
    /* two datasets (one with a comma), ar + two variants x two block sizes, three concurrencies */
    const char *ds[] = {"math", "chat, multi-turn"};
    const char *var[] = {"dflash", "dflash2"};
    int conc[] = {1, 4, 16}, blocks[] = {4, 8};
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 3; c++) {
            db_point_raw ar = fx_raw(fx_key(ds[d], "ar", 1, conc[c]), 2, 4, 1.0 + 0.5 * c);
            db_point_summary s;
            db_point_summarize(&ar, NULL, 1, &s);
            rc |= db_results_append(&r, &m, &ar, &s, err, sizeof err);
            for (int b = 0; b < 2; b++)
                for (int v = 0; v < 2; v++) {
                    db_point_raw p = fx_raw(fx_key(ds[d], var[v], blocks[b], conc[c]), 2, 4,
                                            (1.0 + 0.5 * c) * (1.5 + v + 0.2 * b));
                    db_point_summarize(&p, &ar, 1, &s);
                    rc |= db_results_append(&r, &m, &p, &s, err, sizeof err);
                    db_point_raw_free(&p);
                }
            db_point_raw_free(&ar);
        }
    tap_ok(rc == 0, "points appended (%s)", err);
    db_results_close(&r);
    db_run_meta_free(&m);

    const char *root = getenv("DB_SOURCE_ROOT");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/scripts/plot' '%s' > '%s.log' 2>&1", root ? root : ".", base,
             base);
    rc = system(cmd);
    snprintf(cmd, sizeof cmd, "%s.log", base);
    FILE *log = fopen(cmd, "r");
    char line[512];
    while (log && fgets(line, sizeof line, log)) {
        line[strcspn(line, "\n")] = 0;
        tap_diag("%s", line);
    }
    if (log) fclose(log);
    remove(cmd);
    tap_ok(rc == 0, "scripts/plot exits 0");
    const char *kinds[] = {"throughput", "speedup", "acceptance", "histogram"};
    const char *safe[] = {"math", "chat__multi-turn"};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 4; k++) {
            char p[512];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s-%s.png", base, kinds[k], safe[d]);
            FILE *f = fopen(p, "rb");
            unsigned char sig[8] = {0};
            int is_png = f && fread(sig, 1, 8, f) == 8 && !memcmp(sig, "\x89PNG\r\n\x1a\n", 8);
            if (f) fclose(f);
            tap_ok(stat(p, &st) == 0 && st.st_size > 1000 && is_png, "%s-%s.png: a PNG of %lld bytes",
                   kinds[k], safe[d], stat(p, &st) == 0 ? (long long)st.st_size : 0LL);
        }
    snprintf(cmd, sizeof cmd, "'%s/scripts/plot' /nonexistent 2>/dev/null", root ? root : ".");
    rc = system(cmd);
    tap_ok(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "a directory without tables: exit status 2");
    if (getenv("DB_KEEP_PLOTS")) return tap_done();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0) tap_diag("could not remove %s", base);
    return tap_done();
}
