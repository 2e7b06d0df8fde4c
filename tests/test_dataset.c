/* test_dataset.c — every prompt-set format parsed from the fixtures in tests/data/datasets/
 * (multi-turn included), the z-lab harness formatting, shuffle-and-take, the built-in sets, and
 * the errors: a line that is not JSON, a missing field, invalid UTF-8 (file and line named). */
#include "text/dataset.h"
#include "tap.h"
#include "test_util.h"
#include "base/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a format's name, for the messages */
static const char *format_name(db_dataset_format f)
{
    switch (f) {
    case DB_DS_GSM8K: return "gsm8k";
    case DB_DS_MATH500: return "math-500";
    case DB_DS_HUMANEVAL: return "humaneval";
    case DB_DS_MBPP: return "mbpp";
    case DB_DS_MTBENCH: return "mt-bench";
    case DB_DS_TURNS: return "turns";
    case DB_DS_TEXT: return "text";
    }
    return "?";
}

static const char MATH_SUFFIX[] = "\nPlease reason step by step, and put your final answer within \\boxed{}.";

static int load(db_dataset *ds, const char *name, int max)
{
    char rel[256], err[512];
    snprintf(rel, sizeof rel, "datasets/%s", name);
    int rc = db_dataset_load(ds, tu_data(rel), max, 0, err, sizeof err);
    if (rc) tap_diag("%s: %s", name, err);
    return rc;
}

static void expect_error(const char *name, const char *needle)
{
    db_dataset ds;
    char rel[256], err[512] = "";
    snprintf(rel, sizeof rel, "datasets/%s", name);
    int rc = db_dataset_load(&ds, tu_data(rel), 0, 0, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, needle) && strstr(err, name), "%s rejected: %s", name, err);
    db_dataset_free(&ds);
}

static void formats(void)
{
    db_dataset ds;
    if (!load(&ds, "gsm8k.jsonl", 0)) {
        tap_ok(ds.format == DB_DS_GSM8K && ds.n == 3, "gsm8k: 3 samples, blank line skipped (%s, %d)",
               format_name(ds.format), ds.n);
        char want[512];
        snprintf(want, sizeof want, "%s%s", "Lena has 3 red pens and 4 blue pens. How many pens does she have?", MATH_SUFFIX);
        tap_ok(ds.samples[0].n_turns == 1 && strcmp(ds.samples[0].turns[0], want) == 0, "gsm8k: harness math format");
        tap_ok(ds.samples[2].line == 4, "gsm8k: line numbers kept (%d)", ds.samples[2].line);
        tap_ok(strcmp(ds.name, "gsm8k") == 0, "dataset name from the file (%s)", ds.name);
        db_dataset_free(&ds);
    }
    if (!load(&ds, "math500.jsonl", 0)) {
        tap_ok(ds.format == DB_DS_MATH500 && ds.n == 2 && strncmp(ds.samples[0].turns[0], "What is $2^{10}$?\nPlease", 24) == 0,
               "math-500: problem + the math suffix");
        db_dataset_free(&ds);
    }
    if (!load(&ds, "humaneval.jsonl", 0)) {
        const char *want = "Write a solution to the following problem and make sure that it passes the tests:\n```python\n"
                           "def double(x: int) -> int:\n    \"\"\"Return twice x.\n    >>> double(2)\n    4\n    \"\"\"\n\n```";
        tap_ok(ds.format == DB_DS_HUMANEVAL && ds.n == 1 && strcmp(ds.samples[0].turns[0], want) == 0,
               "humaneval: the harness code wrapper");
        db_dataset_free(&ds);
    }
    if (!load(&ds, "mbpp.jsonl", 0)) {
        tap_ok(ds.format == DB_DS_MBPP && ds.n == 2 && strcmp(ds.samples[1].turns[0], "Write a function to add two numbers.") == 0,
               "mbpp (text): as is");
        db_dataset_free(&ds);
    }
    if (!load(&ds, "mbpp-sanitized.jsonl", 0)) {
        tap_ok(ds.format == DB_DS_MBPP && ds.n == 1 && strncmp(ds.samples[0].turns[0], "Write a function to find", 24) == 0,
               "mbpp sanitized (prompt + test_list): as is");
        db_dataset_free(&ds);
    }
    if (!load(&ds, "mtbench.jsonl", 0)) {
        tap_ok(ds.format == DB_DS_MTBENCH && ds.n == 2 && ds.samples[0].n_turns == 2 &&
                   strcmp(ds.samples[0].turns[1], "Now make it about snow.") == 0,
               "mt-bench: two turns per sample");
        db_dataset_free(&ds);
    }
    if (!load(&ds, "mtbench-h4.jsonl", 0)) {
        tap_ok(ds.format == DB_DS_MTBENCH && ds.n == 1 && ds.samples[0].n_turns == 2 &&
                   strcmp(ds.samples[0].turns[0], "Name three colors.") == 0,
               "mt-bench (Hugging Face H4 'prompt' list)");
        db_dataset_free(&ds);
    }
    if (!load(&ds, "turns.jsonl", 0)) {
        tap_ok(ds.format == DB_DS_TURNS && ds.n == 1 && strstr(ds.samples[0].turns[0], "\\boxed{}.") &&
                   !strstr(ds.samples[0].turns[0] + 30, "Please reason step by step, and put your final answer within \\boxed{}.\nPlease"),
               "harness cache {\"turns\"}: used as is");
        db_dataset_free(&ds);
    }
    if (!load(&ds, "prompts.txt", 0)) {
        tap_ok(ds.format == DB_DS_TEXT && ds.n == 2 && strcmp(ds.samples[0].turns[0], "First prompt line") == 0 &&
                   strcmp(ds.samples[1].turns[0], "Second prompt with unicode: caf\xc3\xa9") == 0 && ds.samples[1].line == 4,
               "plain text: one prompt per non-empty line, CR stripped");
        db_dataset_free(&ds);
    }
}

static void shuffle(void)
{
    db_dataset a, b, all;
    if (load(&all, "gsm8k.jsonl", 0)) return;
    if (!load(&a, "gsm8k.jsonl", 2) && !load(&b, "gsm8k.jsonl", 2)) {
        int same = a.n == 2 && b.n == 2;
        for (int i = 0; same && i < 2; i++) same = strcmp(a.samples[i].turns[0], b.samples[i].turns[0]) == 0;
        tap_ok(same, "--max-samples 2: two samples, the same ones every time");
        tap_ok(a.samples[0].line != a.samples[1].line, "the two are different lines");
        db_dataset_free(&a);
        db_dataset_free(&b);
    }
    if (!load(&a, "gsm8k.jsonl", 100)) {
        int sum = 0;
        for (int i = 0; i < a.n; i++) sum += a.samples[i].line;
        tap_ok(a.n == 3 && sum == 1 + 2 + 4, "max samples above the size keeps every sample");
        db_dataset_free(&a);
    }
    db_dataset_free(&all);
}

static void builtins(void)
{
    const char *root = getenv("DB_SOURCE_ROOT");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", root ? root : "."); /* the data root: datasets/ in it */
    setenv("DFLASH_BENCH_DATA", dir, 1);
    const db_dataset_format want[] = {DB_DS_GSM8K, DB_DS_MATH500, DB_DS_HUMANEVAL, DB_DS_MBPP, DB_DS_MTBENCH};
    for (int i = 0; db_dataset_builtins[i]; i++) {
        db_dataset ds;
        char err[512];
        int rc = db_dataset_load(&ds, db_dataset_builtins[i], 0, 0, err, sizeof err);
        int ok = rc == 0 && ds.n >= 64 && ds.format == want[i] && strcmp(ds.name, db_dataset_builtins[i]) == 0;
        for (int k = 0; ok && k < ds.n; k++) ok = ds.samples[k].n_turns == (want[i] == DB_DS_MTBENCH ? 2 : 1);
        tap_ok(ok, "built-in '%s': %d samples, format %s%s%s", db_dataset_builtins[i], rc ? 0 : ds.n,
               rc ? "?" : format_name(ds.format), rc ? ": " : "", rc ? err : "");
        if (!rc) db_dataset_free(&ds);
    }
    db_dataset ds;
    char err[512] = "";
    int rc = db_dataset_load(&ds, "no-such-set", 0, 0, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "not a built-in name"), "unknown name: %s", err);
    /* the other data roots (paths.h) still hold the source tree's datasets/: the set found there
     * is the file of the source tree, the same samples as that file loaded by its path */
    char path[1024], file[1100], got[PATH_MAX], file_real[PATH_MAX];
    snprintf(file, sizeof file, "%s/datasets/math.jsonl", dir);
    db_dataset direct;
    int rc_direct = db_dataset_load(&direct, file, 0, 0, err, sizeof err);
    setenv("DFLASH_BENCH_DATA", "/nonexistent-dir", 1);
    rc = db_dataset_resolve("math", path, sizeof path, err, sizeof err);
    int same_file = rc == 0 && realpath(path, got) && realpath(file, file_real) && strcmp(got, file_real) == 0;
    rc = rc ? rc : db_dataset_load(&ds, "math", 0, 0, err, sizeof err);
    unsetenv("DFLASH_BENCH_DATA");
    int same = rc == 0 && rc_direct == 0 && ds.n == direct.n;
    for (int k = 0; same && k < ds.n; k++) same = strcmp(ds.samples[k].turns[0], direct.samples[k].turns[0]) == 0;
    tap_ok(same_file && same, "a wrong DFLASH_BENCH_DATA falls back to the other places: %s, %d samples as %s (%s)",
           rc ? "-" : path, rc ? 0 : ds.n, file, rc ? err : "found");
    if (rc == 0) db_dataset_free(&ds);
    if (rc_direct == 0) db_dataset_free(&direct);
}

/* db_dataset_parse on a file's text is what db_dataset_load gives for the file: the same samples
 * (shuffled alike), name and format, or the same message */
static void parse_in_memory(const char *name, int max)
{
    char rel[256], e1[512] = "", e2[512] = "", e3[512];
    snprintf(rel, sizeof rel, "datasets/%s", name);
    const char *path = tu_data(rel);
    char *text = NULL;
    size_t len = 0;
    if (db_read_file(path, &text, &len, e3, sizeof e3) != 0) {
        tap_ok(0, "%s readable: %s", name, e3);
        return;
    }
    db_dataset a, b;
    int r1 = db_dataset_load(&a, path, max, 5, e1, sizeof e1);
    int r2 = db_dataset_parse(&b, path, text, len, max, 5, e2, sizeof e2);
    int same = r1 == r2 && !strcmp(e1, e2);
    if (!r1 && same) {
        same = a.n == b.n && a.format == b.format && !strcmp(a.name, b.name) && !strcmp(a.path, b.path);
        for (int i = 0; same && i < a.n; i++) {
            same = a.samples[i].n_turns == b.samples[i].n_turns && a.samples[i].line == b.samples[i].line;
            for (int t = 0; same && t < a.samples[i].n_turns; t++)
                same = !strcmp(a.samples[i].turns[t], b.samples[i].turns[t]);
        }
    }
    if (!r1) db_dataset_free(&a);
    if (!r2) db_dataset_free(&b);
    free(text);
    tap_ok(same, "%s (max %d) parsed in memory: what the loader gives (%s)", name, max, r1 ? e1 : "loads");
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    formats();
    shuffle();
    builtins();
    expect_error("bad-json.jsonl", ":3: not a JSON object");
    expect_error("missing-field.jsonl", ":2: missing field 'question'");
    expect_error("bad-utf8.jsonl", ":2: invalid UTF-8 in 'question'");
    expect_error("no-field.jsonl", ":1: no prompt field");
    expect_error("empty-turns.jsonl", ":1: needs a non-empty list");
    parse_in_memory("gsm8k.jsonl", 0);
    parse_in_memory("mtbench.jsonl", 2);
    parse_in_memory("prompts.txt", 0);
    parse_in_memory("bad-utf8.jsonl", 0);
    db_dataset ds;
    char err[256];
    tap_ok(db_dataset_load(&ds, tu_data("datasets/gsm8k.jsonl"), -1, 0, err, sizeof err) == DB_EINPUT,
           "negative max samples is bad input");
    return tap_done();
}
