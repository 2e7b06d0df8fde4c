/* fuzz_results.c — the results directory as --resume reads it: points.done, the four tables
 * and meta.json, split at FUZZ_SEP in that order. After db_results_open (which drops rows of
 * unfinished points and records cut short, rewriting the tables), every point of a small sweep
 * is looked up and, when listed as done, its raw samples are rebuilt from requests.csv. */
#include "fuzz.h"
#include "bench/sweep.h"
#include "report/report.h"
#include "report/results_dir.h"

#include <stdlib.h>

static const char *const files[] = {"points.done", "summary.csv", "acceptance.csv", "histogram.csv",
                                    "requests.csv", "meta.json"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { NF = sizeof files / sizeof *files };
    fuzz_part part[NF];
    int n = fuzz_split(data, size, part, NF);
    char path[512], err[512];
    fuzz_clear();
    for (int k = 0; k < n; k++) fuzz_file(files[k], part[k].p, part[k].n, path, sizeof path);
    static db_point_key *keys;
    static int nkeys;
    if (!keys) { /* the points of the seed corpus's run (scripts/fuzz-seeds) */
        db_sweep s;
        db_sweep_init(&s);
        if (db_sweep_set(&s, "dataset", "math", err, sizeof err) ||
            db_sweep_set(&s, "variant", "ar,dflash2", err, sizeof err) ||
            db_sweep_set(&s, "concurrency", "1,2", err, sizeof err) ||
            db_sweep_set(&s, "block_size", "4,8", err, sizeof err) ||
            db_sweep_set(&s, "max_new_tokens", "8", err, sizeof err) ||
            db_sweep_set(&s, "chat_template", "chatml", err, sizeof err) ||
            db_sweep_points(&s, &keys, &nkeys, err, sizeof err))
            abort();
    }
    db_results r;
    if (db_results_open(&r, fuzz_dir(), 1, err, sizeof err) == 0) {
        for (int i = 0; i < nkeys; i++) {
            db_point_raw raw;
            if (db_results_is_done(&r, &keys[i]) && db_results_load_raw(&r, &keys[i], &raw, err, sizeof err) == 0)
                db_point_raw_free(&raw);
        }
        db_results_close(&r);
    }
    return 0;
}
