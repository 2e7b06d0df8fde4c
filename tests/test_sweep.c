/* test_sweep.c — sweep lists and ranges (good and bad values), ini files (unknown keys named
 * with file and line), the presets, validation, the order of the enumerated points, and the
 * variant table: the sweep's variants are its rows, and README's variant table is a copy of it;
 * target and drafter lists as axes (order, names, pairing with the ar of the same target). */
#include "bench/sweep.h"
#include "engine/variant.h"
#include "report/report.h"
#include "tap.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char err[512];

static int set(db_sweep *s, const char *k, const char *v)
{
    err[0] = 0;
    return db_sweep_set(s, k, v, err, sizeof err);
}

static int ints_are(const int *v, int n, const int *want, int nw)
{
    if (n != nw) return 0;
    for (int i = 0; i < n; i++)
        if (v[i] != want[i]) return 0;
    return 1;
}

static void ranges(void)
{
    db_sweep s;
    db_sweep_init(&s);
    tap_ok(set(&s, "concurrency", "1-32*2") == 0 &&
               ints_are(s.concurrency, s.n_concurrency, (int[]){1, 2, 4, 8, 16, 32}, 6),
           "geometric range 1-32*2");
    tap_ok(set(&s, "concurrency", "1-5") == 0 &&
               ints_are(s.concurrency, s.n_concurrency, (int[]){1, 2, 3, 4, 5}, 5),
           "range 1-5, step 1");
    tap_ok(set(&s, "concurrency", "2-11+4") == 0 &&
               ints_are(s.concurrency, s.n_concurrency, (int[]){2, 6, 10}, 3),
           "range 2-11+4 stops at the last value <= 11");
    tap_ok(set(&s, "concurrency", " 1, 4-6 ,16 ") == 0 &&
               ints_are(s.concurrency, s.n_concurrency, (int[]){1, 4, 5, 6, 16}, 5),
           "values and ranges mixed, blanks ignored");
    tap_ok(set(&s, "block-size", "8,16") == 0 && set(&s, "block_size", "4-16*2") == 0 &&
               ints_are(s.block_size, s.n_block_size, (int[]){4, 8, 16}, 3),
           "block-size and block_size are the same key");

    static const char *const bad[] = {"0", "8-2", "1-8*1", "0-8*2", "2-8+0", "a", "1,,2", "",
                                      "4,4", "1-100", "1.5", "-3", "1-2-3", "8*2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = set(&s, "concurrency", bad[i]);
        tap_ok(rc == DB_EINPUT && strstr(err, "concurrency") && !strchr(err, '\n'),
               "concurrency '%s' refused: %s", bad[i], err);
    }
    tap_ok(ints_are(s.block_size, s.n_block_size, (int[]){4, 8, 16}, 3) &&
               ints_are(s.concurrency, s.n_concurrency, (int[]){1, 4, 5, 6, 16}, 5),
           "a refused value leaves the axis as it was");
    tap_ok(set(&s, "concurrency", "1-64") == 0 && s.n_concurrency == 64, "64 values fit");
    tap_ok(set(&s, "block_size", "65") == DB_EINPUT, "block size above %d refused: %s",
           DB_MAX_BLOCK, err);
}

static void scalars(void)
{
    db_sweep s;
    db_sweep_init(&s);
    tap_ok(set(&s, "temperature", "0, 0.7,1") == 0 && s.n_temperature == 3 &&
               fabsf(s.temperature[1] - 0.7f) < 1e-7f,
           "temperature list");
    tap_ok(set(&s, "temperature", "-1") == DB_EINPUT && strstr(err, "negative"),
           "negative temperature: %s", err);
    tap_ok(set(&s, "temperature", "0-1") == DB_EINPUT && strstr(err, "ranges"),
           "temperature range: %s", err);
    tap_ok(set(&s, "temperature", "hot") == DB_EINPUT, "temperature 'hot': %s", err);
    tap_ok(set(&s, "top_p", "0.95") == 0 && fabsf(s.top_p - 0.95f) < 1e-7f, "top_p 0.95");
    tap_ok(set(&s, "top-p", "0") == DB_EINPUT && strstr(err, "(0, 1]"), "top_p 0: %s", err);
    tap_ok(set(&s, "top_p", "1.5") == DB_EINPUT, "top_p 1.5: %s", err);
    tap_ok(set(&s, "top_p", "0.5,0.9") == DB_EINPUT, "top_p list: %s", err);
    tap_ok(set(&s, "top_k", "20") == 0 && s.top_k == 20, "top_k 20");
    tap_ok(set(&s, "top_k", "-1") == DB_EINPUT, "top_k -1: %s", err);
    tap_ok(set(&s, "max-new-tokens", "4096") == 0 && s.max_new_tokens == 4096, "max_new_tokens");
    tap_ok(set(&s, "max_new_tokens", "0") == DB_EINPUT, "max_new_tokens 0: %s", err);
    tap_ok(set(&s, "repetitions", "0") == DB_EINPUT, "repetitions 0: %s", err);
    tap_ok(set(&s, "warmup", "0") == 0 && s.warmup == 0, "warmup 0 allowed");
    tap_ok(set(&s, "seed", "18446744073709551615") == 0 && s.seed == UINT64_MAX,
           "seed takes the full 64-bit range");
    tap_ok(set(&s, "seed", "-1") == DB_EINPUT, "negative seed: %s", err);
    tap_ok(set(&s, "variant", "dflash2,ar") == 0 && s.n_variant == 2, "variant list");
    tap_ok(set(&s, "variant", "dflash3") == DB_EINPUT && strstr(err, "dflash3") &&
               strstr(err, "selector-off"),
           "unknown variant named, choices listed: %s", err);
    tap_ok(set(&s, "backend", "tpu") == DB_EINPUT && strstr(err, "tpu"), "unknown backend: %s", err);
    tap_ok(set(&s, "backend", "cpu,cuda") == 0 && s.n_backend == 2, "backend list");
    tap_ok(set(&s, "output", "xml") == DB_EINPUT, "output xml: %s", err);
    tap_ok(set(&s, "output", "csv") == 0 && !strcmp(s.output, "csv"), "output csv");
    tap_ok(set(&s, "chat_template", "chatml") == 0 && set(&s, "chat-template", "jinja") == DB_EINPUT,
           "chat_template choices: %s", err);
    tap_ok(set(&s, "no-baseline", NULL) == 0 && s.no_baseline == 1, "bare boolean flag = true");
    tap_ok(set(&s, "thinking", "yes") == 0 && s.thinking && set(&s, "thinking", "off") == 0 &&
               !s.thinking,
           "boolean spellings");
    tap_ok(set(&s, "thinking", "maybe") == DB_EINPUT, "bad boolean: %s", err);
    tap_ok(set(&s, "label", "a/b") == DB_EINPUT, "'/' in a label refused: %s", err);
    tap_ok(set(&s, "dataset", "gsm8k,my set") == 0 && !strcmp(s.dataset[1], "my set"),
           "dataset names are free text");
    tap_ok(set(&s, "colour", "red") == DB_EINPUT && strstr(err, "colour"), "unknown key: %s", err);
    tap_ok(set(&s, "threads", "4") == 0 && s.threads == 4, "threads");
}

static int count_variant(const db_point_key *k, int n, const char *v)
{
    int c = 0;
    for (int i = 0; i < n; i++) c += !strcmp(k[i].variant, v);
    return c;
}

static void enumeration(void)
{
    db_sweep s;
    db_sweep_init(&s);
    db_point_key *k;
    int n;
    int rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    /* 3 datasets x 3 concurrencies x (1 ar + 5 variants x 2 block sizes) */
    tap_ok(rc == 0 && n == 99, "default sweep: 99 points (%d)", n);
    tap_ok(count_variant(k, n, "selector-off") == 0 && count_variant(k, n, "conv-off") == 0 &&
               count_variant(k, n, "eagle3") == 18 && count_variant(k, n, "mtp") == 18,
           "the ablations are not in the default sweep, EAGLE-3 and MTP are");
    tap_ok(count_variant(k, n, "ar") == 9, "ar once per dataset x concurrency, not per block size");
    tap_ok(!strcmp(k[0].variant, "ar") && k[0].block_size == 1 && !strcmp(k[0].dataset, "math") &&
               k[0].concurrency == 1,
           "first point: math ar c1 B1");
    tap_ok(!strcmp(k[1].variant, "dflash") && k[1].block_size == 8 && k[1].concurrency == 1,
           "then the variants at the first block size");
    tap_ok(!strcmp(k[3].variant, "dspark") && k[3].block_size == 8 && !strcmp(k[5].variant, "mtp") &&
               k[5].block_size == 8 && !strcmp(k[6].variant, "dflash") && k[6].block_size == 16,
           "block size outside the variant loop");
    tap_ok(!strcmp(k[11].variant, "ar") && k[11].concurrency == 8, "next concurrency starts with ar");
    tap_ok(!strcmp(k[33].dataset, "code"), "datasets outermost after backend");
    int order_ok = 1;
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].variant, "ar") ? k[i].block_size != 1 : k[i].block_size < 8) order_ok = 0;
    tap_ok(order_ok && !strcmp(k[5].acceptance_source, "measured") && !strcmp(k[5].weights, "file"),
           "keys carry block size 1 for ar and the defaults");
    free(k);

    /* ar listed last still comes first; missing ar is added unless no_baseline */
    set(&s, "variant", "dflash2,ar");
    set(&s, "dataset", "math");
    set(&s, "concurrency", "1");
    db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(n == 3 && !strcmp(k[0].variant, "ar"), "baseline precedes the drafter points");
    free(k);
    set(&s, "variant", "dflash2");
    db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(n == 3 && !strcmp(k[0].variant, "ar"), "baseline added when not listed");
    free(k);
    set(&s, "no_baseline", "1");
    db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(n == 2 && count_variant(k, n, "ar") == 0, "--no-baseline drops ar");
    free(k);
    set(&s, "variant", "ar");
    rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(rc == DB_EINPUT && k == NULL, "only ar with no_baseline: nothing to run: %s", err);
    set(&s, "no_baseline", "0");
    set(&s, "block_size", "1");
    rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(rc == 0 && n == 1, "block size 1 is fine for ar alone");
    free(k);
    set(&s, "variant", "ar,dflash");
    rc = db_sweep_validate(&s, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "block_size 1"), "block size 1 with a drafter: %s", err);
    set(&s, "block_size", "2");
    set(&s, "temperature", "0,1");
    set(&s, "backend", "cpu,cuda");
    rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(rc == 0 && n == 8 && !strcmp(k[4].backend, "cuda") && k[2].temperature == 1.0f &&
               !strcmp(k[2].variant, "ar"),
           "backend outermost, then dataset, temperature, concurrency");
    free(k);
}

/* a list of n values "0.00,0.01,..." */
static const char *temperatures(int n)
{
    static char buf[1024];
    size_t o = 0;
    for (int i = 0; i < n; i++) o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%.2f", i ? "," : "", i / 100.0);
    return buf;
}

/* at most DB_SWEEP_MAX_POINTS points: a one-line input error naming the count */
static void point_bound(void)
{
    db_sweep s;
    db_sweep_init(&s);
    db_point_key *k = NULL;
    int n = 0;
    /* 2 backends x 2 datasets x 50 temperatures x 50 concurrencies x ar = 10000 */
    set(&s, "variant", "ar");
    set(&s, "backend", "cpu,cuda");
    set(&s, "dataset", "math,code");
    set(&s, "temperature", temperatures(50));
    set(&s, "concurrency", "1-50");
    int rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(rc == 0 && n == 10000 && DB_SWEEP_MAX_POINTS == 10000, "10000 points are fine (%d)", n);
    free(k);
    set(&s, "dataset", "math,code,chat");
    rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(rc == DB_EINPUT && k == NULL && n == 0 && strstr(err, "15000 points, more than 10000") &&
               !strchr(err, '\n'),
           "15000 points refused: %s", err);
    /* a short line asking for millions: 64 datasets x 64 temperatures x 64 concurrencies x (ar +
     * 5 default drafter variants x 63 block sizes) */
    db_sweep_init(&s);
    char ds[1024];
    size_t o = 0;
    for (int i = 0; i < 64; i++) o += (size_t)snprintf(ds + o, sizeof ds - o, "%sd%d", i ? "," : "", i);
    set(&s, "dataset", ds);
    set(&s, "temperature", temperatures(64));
    set(&s, "concurrency", "1-64");
    set(&s, "block_size", "2-64");
    rc = db_sweep_validate(&s, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "the sweep has 82837504 points"), "82837504 points refused: %s", err);
}

static const char *write_tmp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/db-sweep-XXXXXX");
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static int same_points(const db_sweep *a, const db_sweep *b)
{
    db_point_key *ka, *kb;
    int na, nb;
    if (db_sweep_points(a, &ka, &na, err, sizeof err) || db_sweep_points(b, &kb, &nb, err, sizeof err))
        return 0;
    int same = na == nb && memcmp(ka, kb, sizeof *ka * (size_t)na) == 0;
    free(ka);
    free(kb);
    return same;
}

static void ini(void)
{
    db_sweep s, d;
    db_sweep_init(&s);
    const char *p = write_tmp("; comment\nblock-size = 4,8\n[sweep]\nconcurrency = 1-4*2\n"
                              "no_baseline = true\n");
    int rc = db_sweep_load_ini(&s, p, err, sizeof err);
    tap_ok(rc == 0 && s.n_block_size == 2 && s.block_size[0] == 4 && s.n_concurrency == 3 &&
               s.no_baseline,
           "ini keys at the top and under [sweep], both spellings (%s)", err);
    unlink(p);
    p = write_tmp("block_size = 8\n\nmax_sample = 3\n");
    rc = db_sweep_load_ini(&s, p, err, sizeof err);
    char want[128];
    snprintf(want, sizeof want, "%s:3:", p);
    tap_ok(rc == DB_EINPUT && strstr(err, want) && strstr(err, "max_sample"),
           "unknown key named with file and line: %s", err);
    unlink(p);
    p = write_tmp("concurrency = 0\n");
    rc = db_sweep_load_ini(&s, p, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, ":1:") && strstr(err, "concurrency"),
           "bad value in an ini file: %s", err);
    unlink(p);
    p = write_tmp("[model]\ntarget = x\n");
    rc = db_sweep_load_ini(&s, p, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, ":2:") && strstr(err, "[model]"), "unknown section: %s",
           err);
    unlink(p);
    p = write_tmp("just words\n");
    rc = db_sweep_load_ini(&s, p, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, ":1:"), "syntax error: %s", err);
    unlink(p);
    p = write_tmp("just words\nmax_sample = 3\n"); /* the first error is the syntax error */
    rc = db_sweep_load_ini(&s, p, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, ":1:") && strstr(err, "syntax error") && !strstr(err, "max_sample"),
           "syntax error before an unknown key: the line and message of the first: %s", err);
    unlink(p);
    p = write_tmp("max_sample = 3\njust words\n");
    rc = db_sweep_load_ini(&s, p, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, ":1:") && strstr(err, "max_sample"),
           "unknown key before a syntax error: the key's line and message: %s", err);
    unlink(p);
    rc = db_sweep_load_ini(&s, "/nonexistent/x.ini", err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "/nonexistent/x.ini"), "missing file: %s", err);

    /* presets */
    const char *root = getenv("DB_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/default.ini", root ? root : ".");
    db_sweep_init(&s);
    db_sweep_init(&d);
    s.block_size[0] = 99; /* the file must set everything the default sets */
    rc = db_sweep_load_ini(&s, path, err, sizeof err);
    tap_ok(rc == 0 && same_points(&s, &d) && s.max_samples == d.max_samples &&
               s.repetitions == d.repetitions && s.warmup == d.warmup &&
               !memcmp(s.target, d.target, sizeof s.target) && !memcmp(s.drafter, d.drafter, sizeof s.drafter) &&
               s.n_target == d.n_target && s.n_drafter == d.n_drafter &&
               !memcmp(s.variant_drafter, d.variant_drafter, sizeof s.variant_drafter),
           "configs/default.ini is the default sweep (%s)", err);
    snprintf(path, sizeof path, "%s/configs/paper-h200.ini", root ? root : ".");
    db_sweep_init(&s);
    rc = db_sweep_load_ini(&s, path, err, sizeof err);
    db_point_key *k;
    int n = 0;
    if (rc == 0) rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    /* the design's H200 grid as a capacity-planning run: per concurrency 1, 8, 32 one measured `ar`
     * point and dflash2 replayed with each of the five dataset families' profiles */
    int replayed = 0;
    for (int i = 0; rc == 0 && i < n; i++)
        replayed += strncmp(k[i].acceptance_source, "replay:", 7) == 0 && k[i].block_size == 8;
    tap_ok(rc == 0 && n == 3 * (1 + 5) && replayed == 15 && s.n_block_size == 1 &&
               s.block_size[0] == 8 && s.n_concurrency == 3 && s.temperature[0] == 1 &&
               fabsf(s.top_p - 0.95f) < 1e-7f && s.top_k == 20 && s.max_new_tokens == 4096 &&
               s.synthetic,
           "configs/paper-h200.ini: B8, c 1/8/32, T1 p0.95 k20, 4096 tokens, 5 replayed profiles on "
           "the synthetic 27B-class pair (%s)",
           err);
    if (rc == 0) free(k);
}

static void variants(void)
{
    db_sweep s;
    db_sweep_init(&s);
    int nd = 0, j = 0;
    for (int i = 0; i < DB_VAR_COUNT; i++) nd += db_variant_table[i].in_default;
    int same = s.n_variant == nd && !db_variant_table[DB_VAR_DFLASH2_BARE].in_default;
    for (int i = 0; same && i < DB_VAR_COUNT; i++)
        if (db_variant_table[i].in_default) same = !strcmp(s.variant[j++], db_variant_table[i].name);
    tap_ok(same, "the default sweep runs the variants marked in_default (never dflash2-bare), in table order");
    const char *root = getenv("DB_SOURCE_ROOT");
    char path[1024], *readme = NULL;
    snprintf(path, sizeof path, "%s/README.md", root ? root : ".");
    if (db_read_file(path, &readme, NULL, err, sizeof err) != 0) {
        tap_ok(0, "README.md readable: %s", err);
        return;
    }
    for (int i = 0; i < DB_VAR_COUNT; i++) {
        const db_variant_info *v = &db_variant_table[i];
        int d = db_variant_uses_drafter((db_variant)i);
        char row[512];
        snprintf(row, sizeof row, "| `%s` | %s | %s | %s | %s |", v->name, db_variant_checkpoint((db_variant)i),
                 !d ? "—" : v->conv ? "on" : "off", !d ? "—" : v->selector ? "on" : "off", v->meaning);
        tap_ok(strstr(readme, row) != NULL, "README's variant table has the row %s", row);
    }
    free(readme);
}

/* --drafter per variant: resolution, errors, and the recorded text of every key read back */
static void drafters(void)
{
    db_sweep s;
    db_sweep_init(&s);
    tap_ok(!strcmp(db_sweep_drafter(&s, "dflash", 0), "models/tiny-qwen3-dflash-b16") &&
               !strcmp(db_sweep_drafter(&s, "dflash2", 0), "models/tiny-qwen3-dflash2-b16") &&
               !strcmp(db_sweep_drafter(&s, "conv-off", 0), "models/tiny-qwen3-dflash2-b16") &&
               !db_sweep_drafter(&s, "ar", 0)[0],
           "default: dflash on the v1 checkpoint, the DFlash 2 variants on the v2 one, ar none");
    set(&s, "drafter", "dflash=A,dflash2=B");
    tap_ok(!strcmp(db_sweep_drafter(&s, "dflash", 0), "A") && !strcmp(db_sweep_drafter(&s, "dflash2", 0), "B") &&
               !strcmp(db_sweep_drafter(&s, "selector-off", 0), "B") &&
               !strcmp(db_sweep_drafter(&s, "dflash2-bare", 0), "B"),
           "dflash=A,dflash2=B: dflash2 covers the DFlash 2 ablations");
    set(&s, "drafter", "some/dir,conv-off=C");
    tap_ok(!strcmp(db_sweep_drafter(&s, "dflash", 0), "some/dir") && !strcmp(db_sweep_drafter(&s, "conv-off", 0), "C") &&
               !strcmp(db_sweep_drafter(&s, "dflash2", 0), "some/dir"),
           "DIR,conv-off=C: C for conv-off, DIR for the rest");
    set(&s, "drafter", "b/a=c");
    tap_ok(!strcmp(db_sweep_drafter(&s, "dflash2", 0), "b/a=c"), "a path with '=' after a '/' is a path");
    int rc = db_sweep_set(&s, "drafter", "dflsh=A", err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "dflsh") && !strcmp(db_sweep_drafter(&s, "dflash2", 0), "b/a=c"),
           "unknown variant refused, nothing changed: %s", err);
    rc = db_sweep_set(&s, "drafter", "ar=A", err, sizeof err);
    tap_ok(rc == DB_EINPUT, "ar has no drafter: %s", err);
    rc = db_sweep_set(&s, "drafter", "x/A,y/B,dflash=C", err, sizeof err);
    tap_ok(rc == 0 && s.n_drafter == 2 && !strcmp(db_sweep_drafter(&s, "dflash2", 1), "y/B") &&
               !strcmp(db_sweep_drafter(&s, "dflash", 1), "C") && db_sweep_drafter_own(&s, "dflash") &&
               !db_sweep_drafter_own(&s, "dflash2"),
           "two unnamed drafters: an axis of the variants without their own (%s)", err);
    rc = db_sweep_set(&s, "drafter", "x/A,y/A", err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "same name") && s.n_drafter == 2, "two drafters of one name refused: %s", err);
    rc = db_sweep_set(&s, "target", "m/t.gguf,n/t.gguf", err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "same name") && s.n_target == 1, "two targets of one name refused: %s", err);
    rc = db_sweep_set(&s, "target", "m/a,m/a", err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "twice"), "a target given twice refused: %s", err);

    /* every key's recorded text sets a fresh sweep to the same recorded text */
    db_sweep a, b;
    db_sweep_init(&a);
    set(&a, "drafter", "x,dflash=y");
    set(&a, "temperature", "0,0.7,1.3");
    set(&a, "top_p", "0.95");
    set(&a, "concurrency", "1-8*2");
    set(&a, "dataset", "math,chat");
    set(&a, "seed", "18446744073709551615");
    set(&a, "label", "a b");
    set(&a, "bandwidth_gbs", "123.4");
    set(&a, "request_rate", "0.3,inf,7");
    set(&a, "slo_tpot_ms", "2.5");
    db_sweep_init(&b);
    int same = 1;
    for (int i = 0; db_sweep_key(i); i++) {
        char v[2048];
        if (db_sweep_get(&a, db_sweep_key(i), v, sizeof v) == 0 && db_sweep_set(&b, db_sweep_key(i), v, err, sizeof err))
            same = 0;
    }
    for (int i = 0; db_sweep_key(i); i++) {
        char x[2048], y[2048];
        db_sweep_get(&a, db_sweep_key(i), x, sizeof x);
        db_sweep_get(&b, db_sweep_key(i), y, sizeof y);
        if (strcmp(x, y)) same = 0, tap_diag("%s: '%s' vs '%s'", db_sweep_key(i), x, y);
    }
    tap_ok(same && a.temperature[1] == b.temperature[1] && a.top_p == b.top_p && a.seed == b.seed &&
               a.n_concurrency == 4 && b.n_concurrency == 4 && b.n_request_rate == 3 &&
               b.request_rate[0] == a.request_rate[0] && isinf(b.request_rate[1]) && b.slo_tpot_ms == 2.5,
           "db_sweep_get text read back by db_sweep_set gives the same sweep");
}

/* target and drafter lists: target outermost, the drafter axis inside the block size, a variant
 * with its own drafter once, every drafter point's baseline the ar of its own target */
static void model_axes(void)
{
    db_sweep s;
    db_sweep_init(&s);
    set(&s, "dataset", "math");
    set(&s, "concurrency", "1");
    set(&s, "block_size", "8");
    set(&s, "variant", "ar,dflash,dflash2");
    set(&s, "target", "m/t-bf16,m/t-q8_0.gguf,m/t-q4_k.gguf");
    int rc = set(&s, "drafter", "m/d-q8_0.gguf,m/d-q4_k.gguf,dflash=m/v1");
    db_point_key *k = NULL;
    int n = 0;
    if (!rc) rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    /* per target: ar, dflash once (its own drafter), dflash2 per drafter entry */
    tap_ok(rc == 0 && n == 3 * 4, "3 targets x (ar + dflash + 2 x dflash2): %d points (%s)", n, err);
    int order = 1, paired = 1;
    const char *want_t[] = {"t-bf16", "t-q8_0.gguf", "t-q4_k.gguf"};
    const char *want_d[] = {"", "v1", "d-q8_0.gguf", "d-q4_k.gguf"};
    for (int i = 0; rc == 0 && i < n; i++) {
        order &= k[i].target_i == i / 4 && !strcmp(k[i].target, want_t[i / 4]) && !strcmp(k[i].drafter, want_d[i % 4]);
        db_point_key ar;
        db_point_baseline_key(&k[i], &ar);
        paired &= db_point_key_equal(&ar, &k[i - i % 4]);
        for (int j = 0; j < n; j++) /* ids tell every point apart */
            if (j != i && db_point_key_equal(&k[i], &k[j])) paired = 0;
    }
    tap_ok(rc == 0 && order, "order: target, then ar, dflash on its own drafter, dflash2 per drafter entry");
    tap_ok(rc == 0 && paired, "each point's baseline is the ar of its own target; ids are distinct");
    char buf[4096];
    db_sweep_get(&s, "target", buf, sizeof buf);
    tap_ok(!strcmp(buf, "m/t-bf16,m/t-q8_0.gguf,m/t-q4_k.gguf"), "target recorded as its list: %s", buf);
    free(k);
    set(&s, "synthetic", "true");
    rc = db_sweep_validate(&s, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "one checkpoint"), "synthetic weights take one target: %s", err);
}

/* serving-style load: request_rate "4,16,inf" (rates > 0 and the closed loop), max_concurrency
 * another name of concurrency, the SLO keys; the rate inside concurrency in the point order, ar
 * once per (concurrency, rate), the rate in a finite point's id and not in a closed loop's */
static void load_axes(void)
{
    db_sweep s;
    db_sweep_init(&s);
    tap_ok(s.n_request_rate == 1 && isinf(s.request_rate[0]), "default request rate: inf (a closed loop)");
    tap_ok(set(&s, "request_rate", "4, 16,inf") == 0 && s.n_request_rate == 3 && s.request_rate[0] == 4 &&
               s.request_rate[1] == 16 && isinf(s.request_rate[2]),
           "request_rate 4,16,inf (%s)", err);
    const char *bad[] = {"0", "-2", "fast", "4,4", "inf,inf", "1e40", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = set(&s, "request-rate", bad[i]);
        tap_ok(rc == DB_EINPUT && s.n_request_rate == 3, "request-rate '%s' refused, the axis kept: %s", bad[i], err);
    }
    char v[256];
    tap_ok(db_sweep_get(&s, "request_rate", v, sizeof v) == 0 && !strcmp(v, "4,16,inf"), "recorded as '%s'", v);
    tap_ok(set(&s, "max-concurrency", "2,6") == 0 && s.n_concurrency == 2 && s.concurrency[1] == 6,
           "max-concurrency sets the concurrency axis (%s)", err);
    tap_ok(db_sweep_get(&s, "slo_ttft_ms", v, sizeof v) == 1 && set(&s, "slo_ttft_ms", "250") == 0 &&
               set(&s, "slo-tpot-ms", "12.5") == 0 && s.slo_ttft_ms == 250 && s.slo_tpot_ms == 12.5 &&
               set(&s, "slo_tpot_ms", "0") == DB_EINPUT,
           "SLOs unset by default, > 0 when set: %s", err);
    set(&s, "variant", "ar,dflash2");
    set(&s, "block_size", "8");
    set(&s, "dataset", "math");
    db_point_key *k;
    int n, rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(rc == 0 && n == 2 * 3 * 2, "2 concurrencies x 3 rates x (ar + dflash2) = 12 points (%d)", n);
    if (rc) return;
    int order = 1;
    for (int i = 0; i < n; i++) {
        int cq = i / 2;
        order &= k[i].concurrency == (cq / 3 ? 6 : 2) && k[i].request_rate == s.request_rate[cq % 3] &&
                 !strcmp(k[i].variant, i % 2 ? "dflash2" : "ar");
    }
    tap_ok(order, "order: concurrency, then rate, then ar and the variants");
    char id[DB_POINT_ID_MAX], id2[DB_POINT_ID_MAX];
    db_point_id(&k[0], id, sizeof id);
    db_point_id(&k[4], id2, sizeof id2);
    tap_ok(strstr(id, "|c2|") && !strcmp(id + strlen(id) - 3, "|r4") && !strstr(id2, "|r"),
           "a finite rate ends the id (%s); a closed loop's id has none (%s)", id, id2);
    db_point_key ar;
    db_point_baseline_key(&k[1], &ar);
    tap_ok(ar.request_rate == 4 && db_point_key_equal(&ar, &k[0]), "a variant's baseline: the ar at its own rate");
    free(k);
}

/* the depth axis: 0 by default and unset in the record; a list of counts >= 0; inside the
 * dataset in the point order, ar once per depth; |D<depth> ends the id of a point at a depth and
 * a depth-0 id is as before the axis; a variant's baseline is the ar at its own depth */
static void depth_axis(void)
{
    db_sweep s;
    db_sweep_init(&s);
    char v[256];
    tap_ok(s.n_depth == 1 && s.depth[0] == 0 && db_sweep_get(&s, "depth", v, sizeof v) == 1,
           "default depth: 0, unset in meta.json (runs before the axis resume)");
    const char *bad[] = {"-1", "x", "512,512", "", "99999999"};
    set(&s, "depth", "0,512");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = set(&s, "depth", bad[i]);
        tap_ok(rc == DB_EINPUT && s.n_depth == 2, "depth '%s' refused, the axis kept: %s", bad[i], err);
    }
    tap_ok(db_sweep_get(&s, "depth", v, sizeof v) == 0 && !strcmp(v, "0,512"), "recorded as '%s'", v);
    set(&s, "variant", "ar,dflash2");
    set(&s, "block_size", "8");
    set(&s, "dataset", "math,code");
    set(&s, "concurrency", "1,4");
    db_point_key *k;
    int n, rc = db_sweep_points(&s, &k, &n, err, sizeof err);
    tap_ok(rc == 0 && n == 2 * 2 * 2 * 2, "2 datasets x 2 depths x 2 concurrencies x (ar + dflash2) = 16 points (%d)", n);
    if (rc) return;
    int order = 1;
    for (int i = 0; i < n; i++)
        order &= !strcmp(k[i].dataset, i < 8 ? "math" : "code") && k[i].depth == (i % 8 < 4 ? 0 : 512) &&
                 k[i].concurrency == (i % 4 < 2 ? 1 : 4) && !strcmp(k[i].variant, i % 2 ? "dflash2" : "ar");
    tap_ok(order, "order: dataset, then depth, then concurrency, then ar and the variants");
    char id[DB_POINT_ID_MAX], id2[DB_POINT_ID_MAX];
    db_point_id(&k[4], id, sizeof id);
    db_point_id(&k[0], id2, sizeof id2);
    tap_ok(!strcmp(id + strlen(id) - 5, "|D512") && !strstr(id2, "|D"), "a depth ends the id (%s); depth 0 adds none (%s)",
           id, id2);
    db_point_key ar, back = k[5];
    db_point_baseline_key(&k[5], &ar);
    tap_ok(ar.depth == 512 && db_point_key_equal(&ar, &k[4]) && !db_point_key_equal(&ar, &k[0]),
           "a variant's baseline: the ar at its own depth");
    const db_axis *ax = NULL;
    for (int a = 0; a < db_point_n_axes; a++)
        if (!strcmp(db_point_axes[a].column, "depth")) ax = &db_point_axes[a];
    back.depth = 0;
    tap_ok(ax && db_point_axis_set(&back, ax, "512") == 0 && db_point_key_equal(&back, &k[5]) &&
               db_point_axis_set(&back, ax, "-3") == -1,
           "the depth column reads back into the key; a negative depth is refused");
    free(k);
}

int main(void)
{
    ranges();
    scalars();
    enumeration();
    point_bound();
    ini();
    variants();
    drafters();
    model_axes();
    load_axes();
    depth_axis();
    return tap_done();
}
