/* sweep.c — parsing, validation and enumeration of a sweep (see sweep.h).
 *
 * Values are parsed into a scratch copy of the axis and copied over only when the whole value
 * is good, so a failed db_sweep_set leaves the sweep as it was. */
#include "bench/sweep.h"
#include "bench/device_preset.h"
#include "base/parse.h"
#include "base/util.h"
#include "engine/variant.h"
#include "model/kv_cache.h"
#include "model/synthetic.h"
#include "text/chat_template.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const backends[] = {"cpu", "cuda", "hip"};
static const char *const templates[] = DB_NAMES_ARRAY(DB_CHAT_TEMPLATES);
static const char *const outputs[] = {"md", "csv", "json"};
static const char *const format_files[] = {"csv", "csv,json"};
static const char *const dtypes[] = DB_NAMES_ARRAY(DB_SYNTH_DTYPES);
static const char *const kv_dtypes[] = DB_NAMES_ARRAY(DB_KV_DTYPES);
#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

/* the variant names of the table (variant.h), for the list parser */
static const char *const *variant_names(void)
{
    static const char *names[DB_VAR_COUNT];
    for (int i = 0; i < DB_VAR_COUNT; i++) names[i] = db_variant_table[i].name;
    return names;
}

/* a known variant that runs the drafter */
static int drafts(const char *name)
{
    db_variant v;
    return db_variant_parse(name, &v) == 0 && db_variant_uses_drafter(v);
}

void db_sweep_init(db_sweep *s)
{
    memset(s, 0, sizeof *s);
    strcpy(s->backend[0], "cpu");
    s->n_backend = 1;
    const char *ds[] = {"math", "code", "chat"};
    for (int i = 0; i < 3; i++) strcpy(s->dataset[i], ds[i]);
    s->n_dataset = 3;
    s->n_depth = 1; /* depth 0 */
    const int conc[] = {1, 8, 32};
    memcpy(s->concurrency, conc, sizeof conc);
    s->n_concurrency = 3;
    s->request_rate[0] = INFINITY;
    s->n_request_rate = 1;
    s->block_size[0] = 8;
    s->block_size[1] = 16;
    s->n_block_size = 2;
    /* the variants marked in_default in variant.h: the baseline, DFlash 2 and the drafters it is
     * weighed against (the ablations are configs/ablations.ini) */
    s->n_variant = 0;
    for (int i = 0; i < DB_VAR_COUNT; i++)
        if (db_variant_table[i].in_default) strcpy(s->variant[s->n_variant++], db_variant_table[i].name);
    s->temperature[0] = 0;
    s->n_temperature = 1;
    s->top_p = 1;
    s->top_k = 0;
    s->max_new_tokens = 64;
    s->max_samples = 16; /* README, *Timing*: why 16 */
    s->seed = 0;
    s->repetitions = 3;
    s->max_rounds = 5;
    s->min_time = 0.5; /* README, *Timing*: why 0.5 s */
    s->warmup = 1;
    strcpy(s->target[0], "models/tiny-qwen3");
    s->n_target = 1;
    strcpy(s->drafter[0], "models/tiny-qwen3-dflash2-b16");
    s->n_drafter = 1;
    strcpy(s->variant_drafter[DB_VAR_DFLASH], "models/tiny-qwen3-dflash-b16");
    strcpy(s->variant_drafter[DB_VAR_DSPARK], "models/tiny-qwen3-dspark-b16");
    strcpy(s->variant_drafter[DB_VAR_EAGLE3], "models/tiny-qwen3-eagle3");
    strcpy(s->variant_drafter[DB_VAR_MTP], "models/tiny-qwen3-mtp");
    strcpy(s->chat_template, "auto");
    strcpy(s->output, "md");
    strcpy(s->format_files, "csv");
    strcpy(s->dtype, "bf16");
    strcpy(s->kv_dtype, "auto");
    s->prompt_tokens = 128;
}

int db_dataset_is_synthetic(const char *name, int *n)
{
    const char *p = "synthetic-";
    size_t pl = strlen(p);
    if (strncmp(name, p, pl) != 0 || !isdigit((unsigned char)name[pl])) return 0;
    char *end;
    errno = 0;
    long v = strtol(name + pl, &end, 10);
    if (errno || *end || v < 1 || v > (1 << 24)) return 0;
    if (n) *n = (int)v;
    return 1;
}

/* ---- keys: one row per key ---- */

typedef int (*key_fn)(db_sweep *s, const char *k, const char *v, char *err, size_t errlen);

static int set_backend(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return db_parse_name_list(k, v, backends, COUNT(backends), s->backend[0], sizeof s->backend[0],
                              &s->n_backend, err, errlen);
}

static int set_dataset(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    int rc = db_parse_name_list(k, v, NULL, 0, s->dataset[0], sizeof s->dataset[0], &s->n_dataset,
                                err, errlen);
    if (!rc) s->dataset_set = 1;
    return rc;
}

static int set_variant(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return db_parse_name_list(k, v, variant_names(), DB_VAR_COUNT, s->variant[0],
                              sizeof s->variant[0], &s->n_variant, err, errlen);
}

/* profile specs of at most 120 characters, so that "replay:<spec>" fits acceptance_source;
 * "none" alone empties the axis (no replay at all) */
static int set_profile(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    char tmp[DB_SWEEP_MAX][121];
    int n, rc = db_parse_name_list(k, v, NULL, 0, tmp[0], sizeof tmp[0], &n, err, errlen);
    if (rc) return rc;
    if (n == 1 && !strcmp(tmp[0], "none")) n = 0;
    for (int i = 0; i < n; i++) strcpy(s->profile[i], tmp[i]);
    s->n_profile = n;
    return DB_OK;
}

_Static_assert(DB_VAR_COUNT <= DB_SWEEP_VARIANTS, "db_sweep.variant_drafter is too small");

/* the last non-empty component of a path */
void db_model_name(const char *path, char *buf, size_t n)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t b = len;
    while (b > 0 && path[b - 1] != '/') b--;
    snprintf(buf, n, "%.*s", (int)(len - b), path + b);
}

/* two entries of a model list with the same name: the point ids could not tell them apart */
static int unique_names(const char *k, char (*list)[512], int n, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            char a[256], b[256];
            db_model_name(list[i], a, sizeof a);
            db_model_name(list[j], b, sizeof b);
            if (!strcmp(a, b))
                return db_fail(err, errlen, DB_EINPUT, "%s: '%s' and '%s' have the same name '%s' (the rows "
                               "name checkpoints by their last path component)", k, list[j], list[i], a);
        }
    return DB_OK;
}

/* the comma-separated parts of v, trimmed and non-empty, to fn(part) */
static int each_part(const char *k, const char *v, int (*fn)(void *, char *, char *, size_t), void *ctx,
                     char *err, size_t errlen)
{
    char part[600];
    const char *p = v ? v : "";
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (db_trim(p, len, part, sizeof part) < 0 || strlen(part) >= 512)
            return db_fail(err, errlen, DB_EINPUT, "%s: a path is too long", k);
        int rc = fn(ctx, part, err, errlen);
        if (rc) return rc;
        if (!e) return DB_OK;
        p = e + 1;
    }
}

typedef struct {
    const char *k;
    int named; /* VARIANT=DIR parts allowed (drafter) */
    char def[DB_SWEEP_MODELS][512], per[DB_SWEEP_VARIANTS][512];
    int n;
} path_list;

static int add_path(path_list *l, const char *dir, char *err, size_t errlen)
{
    if (!dir[0]) return db_fail(err, errlen, DB_EINPUT, "%s: an empty path", l->k);
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->def[i], dir)) return db_fail(err, errlen, DB_EINPUT, "%s: '%s' given twice", l->k, dir);
    if (l->n == DB_SWEEP_MODELS)
        return db_fail(err, errlen, DB_EINPUT, "%s: more than %d checkpoints", l->k, DB_SWEEP_MODELS);
    strcpy(l->def[l->n++], dir);
    return DB_OK;
}

/* a part of a model list: with `named` (drafter), NAME=DIR when what precedes its first '='
 * has no '/'; otherwise DIR */
static int model_part(void *ctx, char *part, char *err, size_t errlen)
{
    path_list *l = ctx;
    char *eq = strchr(part, '=');
    if (!l->named || !eq || memchr(part, '/', (size_t)(eq - part))) return add_path(l, part, err, errlen);
    *eq = 0;
    db_variant var;
    if (db_variant_parse(part, &var) != 0 || !db_variant_uses_drafter(var))
        return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not a drafter variant", l->k, part);
    if (!eq[1]) return db_fail(err, errlen, DB_EINPUT, "%s: %s: an empty path", l->k, part);
    if (l->per[var][0]) return db_fail(err, errlen, DB_EINPUT, "%s: two drafters for %s", l->k, part);
    strcpy(l->per[var], eq + 1);
    return DB_OK;
}

static int parse_models(path_list *l, const char *v, char *err, size_t errlen)
{
    int rc = each_part(l->k, v, model_part, l, err, errlen);
    return rc ? rc : unique_names(l->k, l->def, l->n, err, errlen);
}

static int set_target(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    path_list l = {.k = k};
    int rc = parse_models(&l, v, err, errlen);
    if (rc) return rc;
    memcpy(s->target, l.def, sizeof l.def);
    s->n_target = l.n;
    return DB_OK;
}

/* "DIR", "NAME=DIR" or a comma list of both; NAME a drafter variant. The plain DIRs are the
 * drafter axis of the variants not named. */
static int set_drafter(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    path_list l = {.k = k, .named = 1};
    int rc = parse_models(&l, v, err, errlen);
    if (rc) return rc;
    memcpy(s->drafter, l.def, sizeof l.def);
    s->n_drafter = l.n;
    memcpy(s->variant_drafter, l.per, sizeof l.per);
    return DB_OK;
}

int db_sweep_drafter_own(const db_sweep *s, const char *variant)
{
    db_variant v;
    if (db_variant_parse(variant, &v) != 0 || !db_variant_uses_drafter(v)) return 0;
    return s->variant_drafter[v][0] ||
           (db_variant_table[v].needs == DB_NEEDS_DFLASH2 && s->variant_drafter[DB_VAR_DFLASH2][0]);
}

const char *db_sweep_drafter(const db_sweep *s, const char *variant, int di)
{
    db_variant v;
    if (db_variant_parse(variant, &v) != 0 || !db_variant_uses_drafter(v)) return "";
    if (s->variant_drafter[v][0]) return s->variant_drafter[v];
    if (db_variant_table[v].needs == DB_NEEDS_DFLASH2 && s->variant_drafter[DB_VAR_DFLASH2][0])
        return s->variant_drafter[DB_VAR_DFLASH2];
    return di >= 0 && di < s->n_drafter ? s->drafter[di] : "";
}

static int set_concurrency(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return db_parse_int_list(k, v, 1, 1 << 20, s->concurrency, &s->n_concurrency, err, errlen);
}

/* tokens of context before the prompts: 0 (none) up to 2^24, each once */
static int set_depth(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    int tmp[DB_SWEEP_MAX], n, rc = db_parse_int_list(k, v, 0, 1 << 24, tmp, &n, err, errlen);
    for (int i = 0; i < n && !rc; i++)
        for (int j = 0; j < i && !rc; j++)
            if (tmp[j] == tmp[i]) rc = db_fail(err, errlen, DB_EINPUT, "%s: %d listed twice", k, tmp[i]);
    if (rc) return rc;
    memcpy(s->depth, tmp, sizeof(int) * (size_t)n);
    s->n_depth = n;
    return DB_OK;
}

/* rates > 0 (requests per second) and "inf" (a closed loop) */
static int set_request_rate(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    char names[DB_SWEEP_MAX][32];
    double tmp[DB_SWEEP_MAX];
    int n, rc = db_parse_name_list(k, v, NULL, 0, names[0], sizeof names[0], &n, err, errlen);
    for (int i = 0; i < n && !rc; i++) {
        float x = 0;
        if (!strcmp(names[i], "inf")) tmp[i] = INFINITY;
        else if ((rc = db_parse_float(k, names[i], &x, err, errlen)) == DB_OK && !(x > 0))
            rc = db_fail(err, errlen, DB_EINPUT, "%s: %s must be > 0 requests per second, or inf (a closed loop)", k, names[i]);
        else tmp[i] = x;
        for (int j = 0; j < i && !rc; j++)
            if (tmp[j] == tmp[i]) rc = db_fail(err, errlen, DB_EINPUT, "%s: %s listed twice", k, names[i]);
    }
    if (rc) return rc;
    memcpy(s->request_rate, tmp, sizeof(double) * (size_t)n);
    s->n_request_rate = n;
    return DB_OK;
}

static int set_block_size(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return db_parse_int_list(k, v, 1, DB_MAX_BLOCK, s->block_size, &s->n_block_size, err, errlen);
}

static int set_temperature(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return db_parse_float_list(k, v, s->temperature, &s->n_temperature, err, errlen);
}

static int set_top_p(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    float x = 0;
    int rc = db_parse_float(k, v, &x, err, errlen);
    if (rc) return rc;
    if (!(x > 0 && x <= 1))
        return db_fail(err, errlen, DB_EINPUT, "%s: %g is outside (0, 1]", k, (double)x);
    s->top_p = x;
    return DB_OK;
}

static int positive(const char *k, const char *v, double *dst, char *err, size_t errlen)
{
    float x = 0;
    int rc = db_parse_float(k, v, &x, err, errlen);
    if (rc) return rc;
    if (!(x > 0)) return db_fail(err, errlen, DB_EINPUT, "%s: %g must be > 0", k, (double)x);
    *dst = x;
    return DB_OK;
}

static int set_min_time(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    float x = 0;
    int rc = db_parse_float(k, v, &x, err, errlen);
    if (rc) return rc;
    if (!(x >= 0 && x <= 3600)) return db_fail(err, errlen, DB_EINPUT, "%s: %g is outside [0, 3600] seconds", k, (double)x);
    s->min_time = x;
    return DB_OK;
}

static int set_bandwidth(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return positive(k, v, &s->bandwidth_gbs, err, errlen);
}

static int set_gflops(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return positive(k, v, &s->gflops, err, errlen);
}

/* a preset that does not parse is refused when it is given, naming the file and its key */
static int set_device_config(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    db_hw hw;
    char e2[700];
    if (v && v[0] && db_device_preset_load(v, &hw, e2, sizeof e2))
        return db_fail(err, errlen, DB_EINPUT, "%s: %s", k, e2);
    if (v && strlen(v) >= sizeof s->device_config)
        return db_fail(err, errlen, DB_EINPUT, "%s: path longer than %zu characters", k, sizeof s->device_config - 1);
    snprintf(s->device_config, sizeof s->device_config, "%s", v ? v : "");
    return DB_OK;
}

static int set_slo_ttft(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return positive(k, v, &s->slo_ttft_ms, err, errlen);
}

static int set_slo_tpot(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return positive(k, v, &s->slo_tpot_ms, err, errlen);
}

static int set_seed(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    return db_parse_u64(k, v, &s->seed, err, errlen);
}

/* the label goes into a directory name */
static int set_label(db_sweep *s, const char *k, const char *v, char *err, size_t errlen)
{
    if (v && strchr(v, '/'))
        return db_fail(err, errlen, DB_EINPUT, "%s: '/' not allowed in '%s'", k, v);
    return db_parse_string(k, v, s->label, sizeof s->label, err, errlen);
}

typedef enum { K_FN, K_INT, K_BOOL, K_STR, K_CHOICE } key_kind;

typedef struct {
    const char *name;
    key_kind kind;
    key_fn fn;                /* K_FN */
    size_t off, size;         /* the field (K_INT, K_BOOL: an int) */
    int lo, hi;               /* K_INT */
    const char *const *set;   /* K_CHOICE */
    int nset;
} sweep_key;

#define FN(n, f) {n, K_FN, f, 0, 0, 0, 0, NULL, 0}
#define INT(n, field, lo, hi) {n, K_INT, NULL, offsetof(db_sweep, field), 0, lo, hi, NULL, 0}
#define BOOL(n, field) {n, K_BOOL, NULL, offsetof(db_sweep, field), 0, 0, 0, NULL, 0}
#define STR(n, field) {n, K_STR, NULL, offsetof(db_sweep, field), sizeof((db_sweep *)0)->field, 0, 0, NULL, 0}
#define CHOICE(n, field, set)                                                                      \
    {n, K_CHOICE, NULL, offsetof(db_sweep, field), sizeof((db_sweep *)0)->field, 0, 0, set, COUNT(set)}

static const sweep_key keys[] = {
    FN("backend", set_backend),
    FN("dataset", set_dataset),
    FN("depth", set_depth),
    FN("concurrency", set_concurrency),
    FN("request_rate", set_request_rate),
    FN("block_size", set_block_size),
    FN("variant", set_variant),
    FN("temperature", set_temperature),
    FN("acceptance_profile", set_profile),
    FN("top_p", set_top_p),
    INT("top_k", top_k, 0, INT_MAX),
    INT("max_new_tokens", max_new_tokens, 1, INT_MAX),
    INT("max_samples", max_samples, 1, INT_MAX),
    FN("seed", set_seed),
    INT("repetitions", repetitions, 1, 1000000),
    INT("max_rounds", max_rounds, 1, 1000000),
    FN("min_time", set_min_time),
    INT("warmup", warmup, 0, 1000000),
    FN("target", set_target),
    FN("drafter", set_drafter),
    CHOICE("chat_template", chat_template, templates),
    BOOL("thinking", thinking),
    BOOL("no_baseline", no_baseline),
    BOOL("deterministic", deterministic),
    BOOL("allow_long_context", allow_long_context),
    INT("threads", threads, 0, 1 << 16),
    CHOICE("kv_dtype", kv_dtype, kv_dtypes),
    STR("out", out),
    FN("label", set_label),
    CHOICE("output", output, outputs),
    CHOICE("format_files", format_files, format_files),
    BOOL("synthetic", synthetic),
    STR("target_config", target_config),
    STR("drafter_config", drafter_config),
    CHOICE("dtype", dtype, dtypes),
    INT("prompt_tokens", prompt_tokens, 1, 1 << 24),
    BOOL("predict", predict),
    FN("bandwidth_gbs", set_bandwidth),
    FN("gflops", set_gflops),
    FN("device_config", set_device_config),
    FN("slo_ttft_ms", set_slo_ttft),
    FN("slo_tpot_ms", set_slo_tpot),
};

const char *db_sweep_key(int i) { return i >= 0 && i < COUNT(keys) ? keys[i].name : NULL; }

static int set_key(db_sweep *s, const sweep_key *e, const char *k, const char *v, char *err,
                   size_t errlen)
{
    void *dst = (char *)s + e->off;
    switch (e->kind) {
    case K_FN: return e->fn(s, k, v, err, errlen);
    case K_INT: return db_parse_int(k, v, e->lo, e->hi, dst, err, errlen);
    case K_BOOL: return db_parse_bool(k, v, dst, err, errlen);
    case K_STR: return db_parse_string(k, v, dst, e->size, err, errlen);
    case K_CHOICE: return db_parse_choice(k, v, e->set, e->nset, dst, e->size, err, errlen);
    }
    return DB_EINPUT;
}

int db_sweep_set(db_sweep *s, const char *key_in, const char *v, char *err, size_t errlen)
{
    char key[64];
    if (!key_in || strlen(key_in) >= sizeof key)
        return db_fail(err, errlen, DB_EINPUT, "unknown sweep key '%s'", key_in ? key_in : "");
    size_t i = 0;
    for (; key_in[i]; i++) key[i] = key_in[i] == '-' ? '_' : key_in[i];
    key[i] = 0;
    if (!strcmp(key, "max_concurrency")) strcpy(key, "concurrency"); /* vLLM's name of the same axis */
    /* messages use the spelling the user wrote */
    for (int j = 0; j < COUNT(keys); j++)
        if (!strcmp(key, keys[j].name)) return set_key(s, &keys[j], key_in, v, err, errlen);
    const char *names[COUNT(keys)];
    for (int j = 0; j < COUNT(keys); j++) names[j] = keys[j].name;
    int near = db_closest(key, names, COUNT(keys));
    if (near >= 0)
        return db_fail(err, errlen, DB_EINPUT, "unknown sweep key '%s' (did you mean %s?)", key_in,
                       names[near]);
    return db_fail(err, errlen, DB_EINPUT, "unknown sweep key '%s'", key_in);
}

/* ---- ini ---- */

typedef struct {
    db_sweep *s;
    const char *text; /* the file, read whole (db_read_file_max: a regular file, capped) */
    size_t pos, len;
    int line;      /* lines read so far (inih counts one per read too) */
    int msg_line;  /* the line of msg */
    char msg[512]; /* first key error; ini_parse gives the line of the first error of any kind */
} ini_ctx;

/* fgets over the text, counting: a key error's line, to tell it from an earlier syntax error */
static char *ini_read_line(char *str, int num, void *user)
{
    ini_ctx *c = user;
    if (c->pos >= c->len || num < 2) return NULL;
    int n = 0;
    while (n < num - 1 && c->pos < c->len) {
        char ch = c->text[c->pos++];
        str[n++] = ch;
        if (ch == '\n') break;
    }
    str[n] = 0;
    c->line++;
    return str;
}

static int sweep_ini_key(void *user, const char *section, const char *name, const char *value)
{
    ini_ctx *c = user;
    char e[400];
    int rc;
    if (c->msg[0]) return 0; /* only the first error is reported: the lines after it are not applied */
    if (section[0] && strcmp(section, "sweep") != 0) {
        snprintf(e, sizeof e, "unknown section [%s] (keys go at the top or under [sweep])", section);
        rc = DB_EINPUT;
    } else {
        rc = db_sweep_set(c->s, name, value, e, sizeof e);
    }
    if (rc && !c->msg[0]) {
        snprintf(c->msg, sizeof c->msg, "%s", e);
        c->msg_line = c->line;
    }
    return rc == 0;
}

int db_sweep_load_ini(db_sweep *s, const char *path, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int rc = db_read_file_max(path, DB_MAX_CONFIG_BYTES, &text, &len, err, errlen);
    if (rc) return rc;
    if (memchr(text, 0, len)) { /* inih would stop at it and drop the rest unsaid */
        free(text);
        return db_fail(err, errlen, DB_EINPUT, "%s: a NUL byte (not a text file)", path);
    }
    ini_ctx c = {.s = s, .text = text, .len = len};
    int line = ini_parse_stream(ini_read_line, &c, sweep_ini_key, &c);
    free(text);
    if (line < 0) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory parsing it", path);
    if (line > 0) /* the first error: a key's (its message) or a syntax error before any */
        return db_fail(err, errlen, DB_EINPUT, "%s:%d: %s", path, line,
                       c.msg[0] && c.msg_line == line ? c.msg : "syntax error (expected key = value)");
    return DB_OK;
}

/* ---- validation and enumeration ---- */

/* the points db_sweep_points makes (the loops there, counted; no overflow: at most 8 targets and
 * 64 values per axis); *run_ar = the baseline runs */
static size_t count_points(const db_sweep *s, int *run_ar)
{
    int has_ar = 0, ndraft = 0;
    size_t per_block = 0; /* drafter points per (profile, block size) */
    int ndf = s->n_drafter > 1 ? s->n_drafter : 1;
    for (int v = 0; v < s->n_variant; v++) {
        if (!drafts(s->variant[v])) {
            has_ar = 1;
            continue;
        }
        ndraft++;
        /* a variant with its own drafter runs once, not per plain drafter entry */
        per_block += db_sweep_drafter_own(s, s->variant[v]) ? 1 : (size_t)ndf;
    }
    /* the baseline runs even when not listed: speedup needs it, unless --no-baseline */
    *run_ar = (has_ar || ndraft) && !s->no_baseline;
    size_t nprof = s->n_profile > 0 ? (size_t)s->n_profile : 1;
    size_t ndata = s->synthetic && !s->dataset_set ? 1 : (size_t)s->n_dataset;
    size_t per = (size_t)*run_ar + nprof * (size_t)s->n_block_size * per_block;
    return (size_t)s->n_target * (size_t)s->n_backend * ndata * (size_t)s->n_depth * (size_t)s->n_temperature *
           (size_t)s->n_concurrency * (size_t)s->n_request_rate * per;
}

int db_sweep_validate(const db_sweep *s, char *err, size_t errlen)
{
    int drafter = 0, ar = 0;
    for (int i = 0; i < s->n_variant; i++) {
        db_variant v;
        if (db_variant_parse(s->variant[i], &v) != 0)
            return db_fail(err, errlen, DB_EINPUT, "unknown variant '%s'", s->variant[i]);
        if (db_variant_uses_drafter(v)) drafter = 1;
        else ar = 1;
    }
    if (!s->n_backend || !s->n_dataset || !s->n_concurrency || !s->n_temperature || !s->n_variant ||
        !s->n_request_rate || !s->n_depth)
        return db_fail(err, errlen, DB_EINPUT, "an axis of the sweep is empty");
    if (drafter) {
        if (!s->n_block_size)
            return db_fail(err, errlen, DB_EINPUT, "block_size: no value for the drafter variants");
        for (int i = 0; i < s->n_block_size; i++)
            if (s->block_size[i] < 2 || s->block_size[i] > DB_MAX_BLOCK)
                return db_fail(err, errlen, DB_EINPUT,
                               "block_size %d: drafter variants need 2..%d (the anchor plus at "
                               "least one drafted token)",
                               s->block_size[i], DB_MAX_BLOCK);
        for (int i = 0; i < s->n_variant; i++)
            if (drafts(s->variant[i]) && !db_sweep_drafter(s, s->variant[i], 0)[0])
                return db_fail(err, errlen, DB_EINPUT, "drafter: variant %s has no drafter (--drafter DIR or %s=DIR)",
                               s->variant[i], s->variant[i]);
    }
    for (int i = 0; i < s->n_concurrency; i++)
        if (s->concurrency[i] < 1)
            return db_fail(err, errlen, DB_EINPUT, "concurrency must be >= 1, not %d",
                           s->concurrency[i]);
    for (int i = 0; i < s->n_temperature; i++)
        if (!(s->temperature[i] >= 0))
            return db_fail(err, errlen, DB_EINPUT, "temperature must be >= 0");
    if (!(s->top_p > 0 && s->top_p <= 1))
        return db_fail(err, errlen, DB_EINPUT, "top_p %g is outside (0, 1]", (double)s->top_p);
    if (s->top_k < 0 || s->max_new_tokens < 1 || s->max_samples < 1 || s->repetitions < 1 ||
        s->warmup < 0)
        return db_fail(err, errlen, DB_EINPUT,
                       "top_k >= 0, max_new_tokens >= 1, max_samples >= 1, repetitions >= 1 and "
                       "warmup >= 0 are required");
    int rc = db_threads_check("threads", s->threads, err, errlen);
    if (rc) return rc;
    if (!s->n_target || !s->target[0][0]) return db_fail(err, errlen, DB_EINPUT, "target: no target model given");
    if (s->synthetic && (s->n_target > 1 || s->n_drafter > 1))
        return db_fail(err, errlen, DB_EINPUT, "%s: one checkpoint with --synthetic (its config gives the shapes)",
                       s->n_target > 1 ? "target" : "drafter");
    if (!s->synthetic) {
        if (s->target_config[0] || s->drafter_config[0])
            return db_fail(err, errlen, DB_EINPUT,
                           "%s: a config alone has no weights; add --synthetic for random weights "
                           "of its shapes", s->target_config[0] ? "target_config" : "drafter_config");
        if (strcmp(s->dtype, "bf16") != 0)
            return db_fail(err, errlen, DB_EINPUT,
                           "dtype %s: only synthetic weights take a dtype (checkpoints keep their own)", s->dtype);
    } else {
        for (int i = 0; s->dataset_set && i < s->n_dataset; i++)
            if (!db_dataset_is_synthetic(s->dataset[i], NULL))
                return db_fail(err, errlen, DB_EINPUT,
                               "dataset %s: synthetic weights have no tokenizer; prompts are random "
                               "ids (--prompt-tokens N, or --dataset synthetic-N)", s->dataset[i]);
    }
    if (s->n_profile > 0 && !drafter)
        return db_fail(err, errlen, DB_EINPUT, "acceptance_profile: no drafter variant to replay it");
    if (ar && !drafter && s->no_baseline)
        return db_fail(err, errlen, DB_EINPUT,
                       "nothing to run: only the 'ar' variant was asked for, with no_baseline");
    int run_ar;
    size_t np = count_points(s, &run_ar);
    if (np > DB_SWEEP_MAX_POINTS)
        return db_fail(err, errlen, DB_EINPUT,
                       "the sweep has %zu points, more than %d: shorten its lists or split it into "
                       "several runs", np, DB_SWEEP_MAX_POINTS);
    return DB_OK;
}

/* What db_sweep_points works out once, not per point: the fields every point shares, the
 * target names, and per variant whether it drafts, whether it has a drafter of its own and the
 * name of its drafter with each plain entry (the model names: with synthetic weights run.c
 * renames them after the configs that stand for them). */
typedef struct {
    db_point_key base;
    char target[DB_SWEEP_MODELS][sizeof((db_point_key *)0)->target];
    unsigned char drafts[DB_SWEEP_MAX], own[DB_SWEEP_MAX];
    char drafter[DB_SWEEP_MAX][DB_SWEEP_MODELS][sizeof((db_point_key *)0)->drafter]; /* [variant][entry] */
} point_parts;

static void parts_init(point_parts *p, const db_sweep *s, int ndf)
{
    db_point_key *b = &p->base;
    memset(b, 0, sizeof *b);
    if (s->synthetic && !s->dataset_set) snprintf(b->dataset, sizeof b->dataset, "synthetic-%d", s->prompt_tokens);
    b->top_p = s->top_p;
    b->top_k = s->top_k;
    b->max_new_tokens = s->max_new_tokens;
    snprintf(b->chat_template, sizeof b->chat_template, "%s", s->chat_template);
    b->thinking = s->thinking;
    strcpy(b->acceptance_source, "measured");
    strcpy(b->weights, s->synthetic ? "synthetic" : "file");
    for (int ti = 0; ti < s->n_target; ti++) db_model_name(s->target[ti], p->target[ti], sizeof p->target[ti]);
    for (int v = 0; v < s->n_variant; v++) {
        p->drafts[v] = (unsigned char)drafts(s->variant[v]);
        p->own[v] = (unsigned char)db_sweep_drafter_own(s, s->variant[v]);
        for (int di = 0; p->drafts[v] && di < ndf; di++)
            db_model_name(db_sweep_drafter(s, s->variant[v], di), p->drafter[v][di], sizeof p->drafter[v][di]);
    }
}

/* point k: the shared fields, then the loop's values; drafter "" (ar) or that of the variant
 * with plain entry di */
static void key_fill(db_point_key *k, const point_parts *p, const db_sweep *s, int ti, int b, int d, int dp,
                     int t, int c, int q, const char *variant, int block, const char *source, const char *drafter, int di)
{
    *k = p->base;
    strcpy(k->backend, s->backend[b]); /* fields as wide as the sweep's: no truncation */
    if (!k->dataset[0]) strcpy(k->dataset, s->dataset[d]);
    strcpy(k->variant, variant);
    k->block_size = block;
    k->concurrency = s->concurrency[c];
    k->request_rate = s->request_rate[q];
    k->depth = s->depth[dp];
    k->temperature = s->temperature[t];
    if (source) strcpy(k->acceptance_source, source);
    strcpy(k->target, p->target[ti]);
    strcpy(k->drafter, drafter);
    k->target_i = ti;
    k->drafter_i = di;
}

_Static_assert(sizeof((db_point_key *)0)->backend == sizeof((db_sweep *)0)->backend[0] &&
                   sizeof((db_point_key *)0)->dataset == sizeof((db_sweep *)0)->dataset[0] &&
                   sizeof((db_point_key *)0)->variant == sizeof((db_sweep *)0)->variant[0],
               "db_point_key fields narrower than the sweep's");

int db_sweep_points(const db_sweep *s, db_point_key **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    int rc = db_sweep_validate(s, err, errlen);
    if (rc) return rc;
    int run_ar, ndraft = 0;
    for (int v = 0; v < s->n_variant; v++) ndraft += drafts(s->variant[v]);
    size_t total = count_points(s, &run_ar);
    int nprof = s->n_profile > 0 ? s->n_profile : 1;
    int ndata = s->synthetic && !s->dataset_set ? 1 : s->n_dataset;
    int ndf = s->n_drafter > 1 ? s->n_drafter : 1;
    point_parts *p = db_malloc(sizeof *p);
    db_point_key *k = db_malloc((total ? total : 1) * sizeof *k);
    if (!k || !p) {
        free(p);
        free(k);
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory for %zu sweep points", total);
    }
    parts_init(p, s, ndf);
    size_t m = 0;
    for (int ti = 0; ti < s->n_target; ti++)
        for (int b = 0; b < s->n_backend; b++)
            for (int dd = 0; dd < ndata * s->n_depth; dd++)
                for (int t = 0, d = dd / s->n_depth, dp = dd % s->n_depth; t < s->n_temperature; t++)
                    for (int cq = 0; cq < s->n_concurrency * s->n_request_rate; cq++) {
                        int c = cq / s->n_request_rate, q = cq % s->n_request_rate;
                        if (run_ar) key_fill(&k[m++], p, s, ti, b, d, dp, t, c, q, db_variant_name(DB_VAR_AR), 1, NULL, "", 0);
                        for (int pr = 0; pr < nprof; pr++) {
                            /* "none" in the list: measured */
                            char source[sizeof k->acceptance_source];
                            int replay = s->n_profile > 0 && strcmp(s->profile[pr], "none") != 0;
                            if (replay) snprintf(source, sizeof source, "replay:%s", s->profile[pr]);
                            for (int bs = 0; bs < s->n_block_size && ndraft; bs++)
                                for (int di = 0; di < ndf; di++)
                                    for (int v = 0; v < s->n_variant; v++) {
                                        /* a variant with its own drafter runs once, not per entry */
                                        if (!p->drafts[v] || (di > 0 && p->own[v])) continue;
                                        key_fill(&k[m++], p, s, ti, b, d, dp, t, c, q, s->variant[v], s->block_size[bs],
                                                 replay ? source : NULL, p->drafter[v][di], di);
                                    }
                        }
                    }
    free(p);
    *out = k;
    *n = (int)m;
    return DB_OK;
}

/* ---- the recorded sweep (meta.json, --resume) ---- */

static void put_names(const char *base, size_t width, int n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o < len; i++) o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? "," : "", base + (size_t)i * width);
}

static void put_ints(const int *v, int n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o < len; i++) o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? "," : "", v[i]);
}

/* the value of a list or special key (K_FN); 1 when unset */
static int get_fn(const db_sweep *s, const char *k, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    if (!strcmp(k, "backend")) put_names(s->backend[0], sizeof s->backend[0], s->n_backend, buf, n);
    else if (!strcmp(k, "dataset")) {
        if (!s->dataset_set) return 1; /* the default depends on --synthetic */
        put_names(s->dataset[0], sizeof s->dataset[0], s->n_dataset, buf, n);
    } else if (!strcmp(k, "variant")) put_names(s->variant[0], sizeof s->variant[0], s->n_variant, buf, n);
    else if (!strcmp(k, "acceptance_profile")) {
        if (!s->n_profile) snprintf(buf, n, "none");
        else put_names(s->profile[0], sizeof s->profile[0], s->n_profile, buf, n);
    } else if (!strcmp(k, "concurrency")) put_ints(s->concurrency, s->n_concurrency, buf, n);
    else if (!strcmp(k, "block_size")) put_ints(s->block_size, s->n_block_size, buf, n);
    else if (!strcmp(k, "depth")) {
        if (s->n_depth == 1 && s->depth[0] == 0) return 1; /* unset: meta.json of runs before the axis */
        put_ints(s->depth, s->n_depth, buf, n);
    }
    else if (!strcmp(k, "temperature"))
        for (int i = 0; i < s->n_temperature && o < n; i++)
            o += (size_t)snprintf(buf + o, n - o, "%s%.9g", i ? "," : "", (double)s->temperature[i]);
    else if (!strcmp(k, "top_p")) snprintf(buf, n, "%.9g", (double)s->top_p);
    else if (!strcmp(k, "seed")) snprintf(buf, n, "%llu", (unsigned long long)s->seed);
    else if (!strcmp(k, "label")) snprintf(buf, n, "%s", s->label);
    else if (!strcmp(k, "target")) put_names(s->target[0], sizeof s->target[0], s->n_target, buf, n);
    else if (!strcmp(k, "drafter")) {
        put_names(s->drafter[0], sizeof s->drafter[0], s->n_drafter, buf, n);
        o = strlen(buf);
        for (int i = 0; i < DB_VAR_COUNT && o < n; i++)
            if (s->variant_drafter[i][0])
                o += (size_t)snprintf(buf + o, n - o, "%s%s=%s", o ? "," : "", db_variant_table[i].name, s->variant_drafter[i]);
    }
    else if (!strcmp(k, "min_time")) snprintf(buf, n, "%.9g", s->min_time);
    else if (!strcmp(k, "device_config")) snprintf(buf, n, "%s", s->device_config);
    else if (!strcmp(k, "request_rate"))
        for (int i = 0; i < s->n_request_rate && o < n; i++)
            o += isfinite(s->request_rate[i]) ? (size_t)snprintf(buf + o, n - o, "%s%.9g", i ? "," : "", s->request_rate[i])
                                              : (size_t)snprintf(buf + o, n - o, "%sinf", i ? "," : "");
    else if (!strcmp(k, "bandwidth_gbs") || !strcmp(k, "gflops") || !strcmp(k, "slo_ttft_ms") || !strcmp(k, "slo_tpot_ms")) {
        double x = !strcmp(k, "bandwidth_gbs") ? s->bandwidth_gbs
                   : !strcmp(k, "gflops")      ? s->gflops
                   : !strcmp(k, "slo_ttft_ms") ? s->slo_ttft_ms
                                               : s->slo_tpot_ms;
        if (!(x > 0)) return 1;
        snprintf(buf, n, "%.9g", x);
    }
    return buf[0] ? 0 : 1;
}

int db_sweep_get(const db_sweep *s, const char *key, char *buf, size_t n)
{
    buf[0] = 0;
    for (int j = 0; j < COUNT(keys); j++) {
        const sweep_key *e = &keys[j];
        if (strcmp(key, e->name) != 0) continue;
        const char *src = (const char *)s + e->off;
        switch (e->kind) {
        case K_FN: return get_fn(s, key, buf, n);
        case K_INT: snprintf(buf, n, "%d", *(const int *)src); return 0;
        case K_BOOL: snprintf(buf, n, "%s", *(const int *)src ? "true" : "false"); return 0;
        case K_STR:
        case K_CHOICE: snprintf(buf, n, "%s", src); return buf[0] ? 0 : 1;
        }
    }
    return 1;
}
