/* sweep.c — parsing, validation and enumeration of a sweep (see sweep.h).
 *
 * Values are parsed into a scratch copy of the axis and copied over only when the whole value
 * is good, so a failed db_sweep_set leaves the sweep as it was. */
#include "bench/sweep.h"
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const variants[] = {"ar", "dflash", "selector-off", "conv-off", "dflash2"};
static const char *const backends[] = {"cpu", "cuda", "hip"};
static const char *const templates[] = {"auto", "none", "chatml", "llama3"};
static const char *const outputs[] = {"md", "csv", "json"};
#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

static int in_set(const char *v, const char *const *set, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, set[i]) == 0) return 1;
    return 0;
}

int db_variant_known(const char *name) { return in_set(name, variants, COUNT(variants)); }
int db_variant_uses_drafter(const char *name)
{
    return db_variant_known(name) && strcmp(name, "ar") != 0;
}

void db_sweep_init(db_sweep *s)
{
    memset(s, 0, sizeof *s);
    strcpy(s->backend[0], "cpu");
    s->n_backend = 1;
    const char *ds[] = {"math", "code", "chat"};
    for (int i = 0; i < 3; i++) strcpy(s->dataset[i], ds[i]);
    s->n_dataset = 3;
    const int conc[] = {1, 8, 32};
    memcpy(s->concurrency, conc, sizeof conc);
    s->n_concurrency = 3;
    s->block_size[0] = 8;
    s->block_size[1] = 16;
    s->n_block_size = 2;
    for (int i = 0; i < COUNT(variants); i++) strcpy(s->variant[i], variants[i]);
    s->n_variant = COUNT(variants);
    s->temperature[0] = 0;
    s->n_temperature = 1;
    s->top_p = 1;
    s->top_k = 0;
    s->max_new_tokens = 64;
    s->max_samples = 8;
    s->seed = 0;
    s->repetitions = 1;
    s->warmup = 1;
    strcpy(s->target, "models/tiny-qwen3");
    strcpy(s->drafter, "models/tiny-qwen3-dflash2-b16");
    strcpy(s->chat_template, "auto");
    strcpy(s->output, "md");
    strcpy(s->dtype, "bf16");
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

/* ---- scalar parsing ---- */

/* the value without surrounding blanks, copied into buf */
static int trimmed(const char *v, size_t len, char *buf, size_t n)
{
    while (len && isspace((unsigned char)*v)) v++, len--;
    while (len && isspace((unsigned char)v[len - 1])) len--;
    if (len >= n) return -1;
    memcpy(buf, v, len);
    buf[len] = 0;
    return (int)len;
}

static int parse_long(const char *t, long *out)
{
    if (!*t || !(isdigit((unsigned char)*t) || *t == '-' || *t == '+')) return -1;
    errno = 0;
    char *end;
    long v = strtol(t, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_int(const char *key, const char *v, int lo, int hi, int *out, char *err,
                     size_t errlen)
{
    char t[64];
    long x;
    if (!v || trimmed(v, strlen(v), t, sizeof t) < 0 || parse_long(t, &x) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not an integer", key, v ? v : "");
    if (x < lo || x > hi)
        return db_fail(err, errlen, DB_EINPUT, "%s: %ld is out of range [%d, %d]", key, x, lo, hi);
    *out = (int)x;
    return DB_OK;
}

static int parse_float(const char *key, const char *t, float *out, char *err, size_t errlen)
{
    errno = 0;
    char *end;
    float x = strtof(t, &end);
    if (!*t || errno || *end || !isfinite(x))
        return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not a number", key, t);
    *out = x;
    return DB_OK;
}

static int parse_bool(const char *key, const char *v, int *out, char *err, size_t errlen)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    char t[16] = "";
    if (!v) {
        *out = 1;
        return DB_OK;
    }
    if (trimmed(v, strlen(v), t, sizeof t) >= 0) {
        for (char *c = t; *c; c++) *c = (char)tolower((unsigned char)*c);
        if (in_set(t, yes, COUNT(yes))) return *out = 1, DB_OK;
        if (in_set(t, no, COUNT(no))) return *out = 0, DB_OK;
    }
    return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not a boolean (true/false, 1/0)", key, v);
}

static int parse_string(const char *key, const char *v, char *dst, size_t n, char *err,
                        size_t errlen)
{
    char t[1024];
    int len = v ? trimmed(v, strlen(v), t, sizeof t) : -1;
    if (len < 0 || (size_t)len >= n)
        return db_fail(err, errlen, DB_EINPUT, "%s: value missing or longer than %zu characters",
                       key, n - 1);
    for (const char *c = t; *c; c++)
        if (iscntrl((unsigned char)*c))
            return db_fail(err, errlen, DB_EINPUT, "%s: control character in '%s'", key, t);
    strcpy(dst, t);
    return DB_OK;
}

static int parse_choice(const char *key, const char *v, const char *const *set, int nset,
                        char *dst, size_t n, char *err, size_t errlen)
{
    char t[64];
    int rc = parse_string(key, v, t, sizeof t, err, errlen);
    if (rc) return rc;
    if (!in_set(t, set, nset)) {
        char list[256] = "";
        for (int i = 0; i < nset; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", set[i]);
        return db_fail(err, errlen, DB_EINPUT, "%s: unknown value '%s' (one of: %s)", key, t, list);
    }
    if (strlen(t) >= n) return db_fail(err, errlen, DB_EINPUT, "%s: '%s' too long", key, t);
    strcpy(dst, t);
    return DB_OK;
}

/* ---- lists ---- */

/* Split v at commas; calls fn(token) for each trimmed token; empty tokens are an error. */
typedef int (*token_fn)(void *ctx, const char *key, const char *tok, char *err, size_t errlen);

static int for_each_token(const char *key, const char *v, token_fn fn, void *ctx, char *err,
                          size_t errlen)
{
    if (!v) return db_fail(err, errlen, DB_EINPUT, "%s: a value is required", key);
    const char *p = v;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        char tok[256];
        int tl = trimmed(p, len, tok, sizeof tok);
        if (tl < 0) return db_fail(err, errlen, DB_EINPUT, "%s: value too long in '%s'", key, v);
        if (tl == 0) return db_fail(err, errlen, DB_EINPUT, "%s: empty value in list '%s'", key, v);
        int rc = fn(ctx, key, tok, err, errlen);
        if (rc) return rc;
        if (!c) return DB_OK;
        p = c + 1;
    }
}

typedef struct {
    int v[DB_SWEEP_MAX];
    int n, lo, hi;
} int_list;

static int int_push(int_list *l, const char *key, long x, char *err, size_t errlen)
{
    if (x < l->lo || x > l->hi)
        return db_fail(err, errlen, DB_EINPUT, "%s: %ld is out of range [%d, %d]", key, x, l->lo,
                       l->hi);
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == x) return db_fail(err, errlen, DB_EINPUT, "%s: %ld listed twice", key, x);
    if (l->n == DB_SWEEP_MAX)
        return db_fail(err, errlen, DB_EINPUT, "%s: more than %d values", key, DB_SWEEP_MAX);
    l->v[l->n++] = (int)x;
    return DB_OK;
}

/* "n", "a-b", "a-b+s", "a-b*m" */
static int int_token(void *ctx, const char *key, const char *tok, char *err, size_t errlen)
{
    int_list *l = ctx;
    char a[64], b[64], s[64] = "1";
    char op = '+';
    const char *dash = strchr(tok + 1, '-'); /* tok[0] may be a sign, rejected by the range */
    long x, y, st;
    if (!dash) {
        if (parse_long(tok, &x) != 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not an integer or a range a-b[+s|*m]",
                           key, tok);
        return int_push(l, key, x, err, errlen);
    }
    const char *rest = dash + 1, *o = strpbrk(rest, "+*");
    if ((size_t)(dash - tok) >= sizeof a || strlen(rest) >= sizeof b) goto bad;
    memcpy(a, tok, (size_t)(dash - tok));
    a[dash - tok] = 0;
    if (o) {
        memcpy(b, rest, (size_t)(o - rest));
        b[o - rest] = 0;
        op = *o;
        snprintf(s, sizeof s, "%s", o + 1);
    } else {
        strcpy(b, rest);
    }
    if (parse_long(a, &x) || parse_long(b, &y) || parse_long(s, &st)) goto bad;
    if (x > y)
        return db_fail(err, errlen, DB_EINPUT, "%s: range '%s' runs backwards", key, tok);
    if (op == '+' && st < 1)
        return db_fail(err, errlen, DB_EINPUT, "%s: step of '%s' must be >= 1", key, tok);
    if (op == '*' && (st < 2 || x < 1))
        return db_fail(err, errlen, DB_EINPUT,
                       "%s: geometric range '%s' needs a start >= 1 and a factor >= 2", key, tok);
    for (long v = x; v <= y; v = op == '+' ? v + st : v * st) {
        int rc = int_push(l, key, v, err, errlen);
        if (rc) return rc;
    }
    return DB_OK;
bad:
    return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not an integer or a range a-b[+s|*m]", key,
                   tok);
}

static int parse_int_list(const char *key, const char *v, int lo, int hi, int *dst, int *n,
                          char *err, size_t errlen)
{
    int_list l = {.n = 0, .lo = lo, .hi = hi};
    int rc = for_each_token(key, v, int_token, &l, err, errlen);
    if (rc) return rc;
    memcpy(dst, l.v, sizeof(int) * (size_t)l.n);
    *n = l.n;
    return DB_OK;
}

typedef struct {
    float v[DB_SWEEP_MAX];
    int n;
} float_list;

static int float_token(void *ctx, const char *key, const char *tok, char *err, size_t errlen)
{
    float_list *l = ctx;
    float x = 0;
    if (parse_float(key, tok, &x, err, errlen) != 0) {
        if (strchr(tok + 1, '-'))
            return db_fail(err, errlen, DB_EINPUT,
                           "%s: '%s': ranges are not supported here, list the values (0,0.6,1)",
                           key, tok);
        return DB_EINPUT;
    }
    if (x < 0) return db_fail(err, errlen, DB_EINPUT, "%s: %g is negative", key, (double)x);
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == x) return db_fail(err, errlen, DB_EINPUT, "%s: %s listed twice", key, tok);
    if (l->n == DB_SWEEP_MAX)
        return db_fail(err, errlen, DB_EINPUT, "%s: more than %d values", key, DB_SWEEP_MAX);
    l->v[l->n++] = x;
    return DB_OK;
}

/* names: every axis of names has entries of the same width */
typedef struct {
    char (*v)[64];
    int n;
    size_t width;
    const char *const *set; /* allowed names, NULL = any */
    int nset;
} name_list;

static int name_token(void *ctx, const char *key, const char *tok, char *err, size_t errlen)
{
    name_list *l = ctx;
    char t[64];
    int rc = l->set ? parse_choice(key, tok, l->set, l->nset, t, l->width, err, errlen)
                    : parse_string(key, tok, t, l->width, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i], t) == 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: '%s' listed twice", key, t);
    if (l->n == DB_SWEEP_MAX)
        return db_fail(err, errlen, DB_EINPUT, "%s: more than %d values", key, DB_SWEEP_MAX);
    strcpy(l->v[l->n++], t);
    return DB_OK;
}

static int parse_name_list(const char *key, const char *v, const char *const *set, int nset,
                           char *dst, size_t width, int *n, char *err, size_t errlen)
{
    static _Thread_local char scratch[DB_SWEEP_MAX][64];
    name_list l = {scratch, 0, width, set, nset};
    int rc = for_each_token(key, v, name_token, &l, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < l.n; i++) strcpy(dst + (size_t)i * width, scratch[i]);
    *n = l.n;
    return DB_OK;
}

/* ---- keys ---- */

int db_sweep_set(db_sweep *s, const char *key_in, const char *v, char *err, size_t errlen)
{
    char key[64];
    if (!key_in || strlen(key_in) >= sizeof key)
        return db_fail(err, errlen, DB_EINPUT, "unknown sweep key '%s'", key_in ? key_in : "");
    size_t i = 0;
    for (; key_in[i]; i++) key[i] = key_in[i] == '-' ? '_' : key_in[i];
    key[i] = 0;
    const char *k = key_in; /* messages use the spelling the user wrote */

    if (!strcmp(key, "backend"))
        return parse_name_list(k, v, backends, COUNT(backends), s->backend[0], sizeof s->backend[0],
                               &s->n_backend, err, errlen);
    if (!strcmp(key, "dataset")) {
        int rc = parse_name_list(k, v, NULL, 0, s->dataset[0], sizeof s->dataset[0], &s->n_dataset,
                                 err, errlen);
        if (!rc) s->dataset_set = 1;
        return rc;
    }
    if (!strcmp(key, "acceptance_profile")) {
        /* paths: a list of its own (names up to 120 characters, so "replay:<path>" fits) */
        char tmp[DB_SWEEP_MAX][128];
        int n = 0;
        const char *p = v;
        if (!v) return db_fail(err, errlen, DB_EINPUT, "%s: a value is required", k);
        for (;;) {
            const char *c = strchr(p, ',');
            size_t len = c ? (size_t)(c - p) : strlen(p);
            char tok[512];
            int tl = trimmed(p, len, tok, sizeof tok);
            if (tl == 0) return db_fail(err, errlen, DB_EINPUT, "%s: empty value in list '%s'", k, v);
            if (tl < 0 || tl > 120)
                return db_fail(err, errlen, DB_EINPUT, "%s: '%.*s' is longer than 120 characters", k, (int)len, p);
            if (!strcmp(tok, "none") && !c && n == 0) break; /* alone: no replay at all */
            for (int i = 0; i < n; i++)
                if (!strcmp(tmp[i], tok)) return db_fail(err, errlen, DB_EINPUT, "%s: '%s' listed twice", k, tok);
            if (n == DB_SWEEP_MAX) return db_fail(err, errlen, DB_EINPUT, "%s: more than %d values", k, DB_SWEEP_MAX);
            for (const char *q = tok; *q; q++)
                if (iscntrl((unsigned char)*q)) return db_fail(err, errlen, DB_EINPUT, "%s: control character in '%s'", k, tok);
            strcpy(tmp[n++], tok);
            if (!c) break;
            p = c + 1;
        }
        memcpy(s->profile, tmp, sizeof tmp[0] * (size_t)n);
        s->n_profile = n;
        return DB_OK;
    }
    if (!strcmp(key, "dtype")) {
        static const char *const dtypes[] = {"bf16", "f16", "f32"};
        return parse_choice(k, v, dtypes, COUNT(dtypes), s->dtype, sizeof s->dtype, err, errlen);
    }
    if (!strcmp(key, "bandwidth_gbs") || !strcmp(key, "gflops")) {
        char t[64];
        float x = 0;
        if (!v || trimmed(v, strlen(v), t, sizeof t) < 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: a value is required", k);
        int rc = parse_float(k, t, &x, err, errlen);
        if (rc) return rc;
        if (!(x > 0)) return db_fail(err, errlen, DB_EINPUT, "%s: %g must be > 0", k, (double)x);
        *(!strcmp(key, "gflops") ? &s->gflops : &s->bandwidth_gbs) = x;
        return DB_OK;
    }
    if (!strcmp(key, "variant"))
        return parse_name_list(k, v, variants, COUNT(variants), s->variant[0], sizeof s->variant[0],
                               &s->n_variant, err, errlen);
    if (!strcmp(key, "concurrency"))
        return parse_int_list(k, v, 1, 1 << 20, s->concurrency, &s->n_concurrency, err, errlen);
    if (!strcmp(key, "block_size"))
        return parse_int_list(k, v, 1, DB_MAX_BLOCK, s->block_size, &s->n_block_size, err, errlen);
    if (!strcmp(key, "temperature")) {
        float_list l = {.n = 0};
        int rc = for_each_token(k, v, float_token, &l, err, errlen);
        if (rc) return rc;
        memcpy(s->temperature, l.v, sizeof(float) * (size_t)l.n);
        s->n_temperature = l.n;
        return DB_OK;
    }
    if (!strcmp(key, "top_p")) {
        char t[64];
        float x = 0;
        if (!v || trimmed(v, strlen(v), t, sizeof t) < 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: a value is required", k);
        if (strchr(t, ','))
            return db_fail(err, errlen, DB_EINPUT, "%s takes a single value, not a list", k);
        int rc = parse_float(k, t, &x, err, errlen);
        if (rc) return rc;
        if (!(x > 0 && x <= 1))
            return db_fail(err, errlen, DB_EINPUT, "%s: %g is outside (0, 1]", k, (double)x);
        s->top_p = x;
        return DB_OK;
    }
    static const struct {
        const char *name;
        size_t off;
        int lo, hi;
    } ints[] = {
        {"top_k", offsetof(db_sweep, top_k), 0, INT_MAX},
        {"max_new_tokens", offsetof(db_sweep, max_new_tokens), 1, INT_MAX},
        {"max_samples", offsetof(db_sweep, max_samples), 1, INT_MAX},
        {"repetitions", offsetof(db_sweep, repetitions), 1, 1000000},
        {"warmup", offsetof(db_sweep, warmup), 0, 1000000},
        {"threads", offsetof(db_sweep, threads), 0, 1 << 16},
        {"prompt_tokens", offsetof(db_sweep, prompt_tokens), 1, 1 << 24},
    };
    for (size_t j = 0; j < sizeof ints / sizeof *ints; j++)
        if (!strcmp(key, ints[j].name))
            return parse_int(k, v, ints[j].lo, ints[j].hi, (int *)((char *)s + ints[j].off), err,
                             errlen);
    if (!strcmp(key, "seed")) {
        char t[64], *end;
        if (!v || trimmed(v, strlen(v), t, sizeof t) <= 0 || !isdigit((unsigned char)t[0]))
            return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not an unsigned integer", k,
                           v ? v : "");
        errno = 0;
        unsigned long long x = strtoull(t, &end, 10);
        if (errno || *end)
            return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not an unsigned integer", k, t);
        s->seed = (uint64_t)x;
        return DB_OK;
    }
    static const struct {
        const char *name;
        size_t off;
    } bools[] = {
        {"thinking", offsetof(db_sweep, thinking)},
        {"no_baseline", offsetof(db_sweep, no_baseline)},
        {"deterministic", offsetof(db_sweep, deterministic)},
        {"synthetic", offsetof(db_sweep, synthetic)},
        {"predict", offsetof(db_sweep, predict)},
    };
    for (size_t j = 0; j < sizeof bools / sizeof *bools; j++)
        if (!strcmp(key, bools[j].name))
            return parse_bool(k, v, (int *)((char *)s + bools[j].off), err, errlen);
    static const struct {
        const char *name;
        size_t off, size;
    } strs[] = {
        {"target", offsetof(db_sweep, target), sizeof s->target},
        {"drafter", offsetof(db_sweep, drafter), sizeof s->drafter},
        {"target_config", offsetof(db_sweep, target_config), sizeof s->target_config},
        {"drafter_config", offsetof(db_sweep, drafter_config), sizeof s->drafter_config},
        {"out", offsetof(db_sweep, out), sizeof s->out},
        {"label", offsetof(db_sweep, label), sizeof s->label},
    };
    for (size_t j = 0; j < sizeof strs / sizeof *strs; j++)
        if (!strcmp(key, strs[j].name)) {
            char *dst = (char *)s + strs[j].off;
            if (!strcmp(key, "label") && v) /* the label goes into a directory name */
                for (const char *c = v; *c; c++)
                    if (*c == '/')
                        return db_fail(err, errlen, DB_EINPUT, "%s: '/' not allowed in '%s'", k, v);
            return parse_string(k, v, dst, strs[j].size, err, errlen);
        }
    if (!strcmp(key, "chat_template"))
        return parse_choice(k, v, templates, COUNT(templates), s->chat_template,
                            sizeof s->chat_template, err, errlen);
    if (!strcmp(key, "output"))
        return parse_choice(k, v, outputs, COUNT(outputs), s->output, sizeof s->output, err, errlen);
    return db_fail(err, errlen, DB_EINPUT, "unknown sweep key '%s'", k);
}

/* ---- ini ---- */

typedef struct {
    db_sweep *s;
    char msg[512]; /* first error; ini_parse gives its line */
} ini_ctx;

static int sweep_ini_key(void *user, const char *section, const char *name, const char *value)
{
    ini_ctx *c = user;
    char e[400];
    int rc;
    if (section[0] && strcmp(section, "sweep") != 0) {
        snprintf(e, sizeof e, "unknown section [%s] (keys go at the top or under [sweep])", section);
        rc = DB_EINPUT;
    } else {
        rc = db_sweep_set(c->s, name, value, e, sizeof e);
    }
    if (rc && !c->msg[0]) snprintf(c->msg, sizeof c->msg, "%s", e);
    return rc == 0;
}

int db_sweep_load_ini(db_sweep *s, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) return db_fail(err, errlen, DB_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    ini_ctx c = {.s = s};
    int line = ini_parse_file(f, sweep_ini_key, &c);
    fclose(f);
    if (line < 0) return db_fail(err, errlen, DB_EINPUT, "%s: cannot read", path);
    if (line > 0)
        return db_fail(err, errlen, DB_EINPUT, "%s:%d: %s", path, line,
                       c.msg[0] ? c.msg : "syntax error (expected key = value)");
    return DB_OK;
}

/* ---- validation and enumeration ---- */

int db_sweep_validate(const db_sweep *s, char *err, size_t errlen)
{
    int drafter = 0, ar = 0;
    for (int i = 0; i < s->n_variant; i++) {
        if (!db_variant_known(s->variant[i]))
            return db_fail(err, errlen, DB_EINPUT, "unknown variant '%s'", s->variant[i]);
        if (db_variant_uses_drafter(s->variant[i])) drafter = 1;
        else ar = 1;
    }
    if (!s->n_backend || !s->n_dataset || !s->n_concurrency || !s->n_temperature || !s->n_variant)
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
        if (!s->drafter[0])
            return db_fail(err, errlen, DB_EINPUT, "drafter: a drafter variant needs --drafter");
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
        s->warmup < 0 || s->threads < 0)
        return db_fail(err, errlen, DB_EINPUT,
                       "top_k >= 0, max_new_tokens >= 1, max_samples >= 1, repetitions >= 1, "
                       "warmup >= 0 and threads >= 0 are required");
    if (!s->target[0]) return db_fail(err, errlen, DB_EINPUT, "target: no target model given");
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
    return DB_OK;
}

static void key_fill(db_point_key *k, const db_sweep *s, int b, int d, int t, int c,
                     const char *variant, int block, int profile)
{
    memset(k, 0, sizeof *k);
    snprintf(k->backend, sizeof k->backend, "%s", s->backend[b]);
    if (s->synthetic && !s->dataset_set)
        snprintf(k->dataset, sizeof k->dataset, "synthetic-%d", s->prompt_tokens);
    else
        snprintf(k->dataset, sizeof k->dataset, "%s", s->dataset[d]);
    snprintf(k->variant, sizeof k->variant, "%s", variant);
    k->block_size = block;
    k->concurrency = s->concurrency[c];
    k->temperature = s->temperature[t];
    k->top_p = s->top_p;
    k->top_k = s->top_k;
    k->max_new_tokens = s->max_new_tokens;
    snprintf(k->chat_template, sizeof k->chat_template, "%s", s->chat_template);
    k->thinking = s->thinking;
    strcpy(k->acceptance_source, "measured");
    if (profile >= 0 && strcmp(s->profile[profile], "none") != 0) /* "none" in the list: measured */
        snprintf(k->acceptance_source, sizeof k->acceptance_source, "replay:%s", s->profile[profile]);
    strcpy(k->weights, s->synthetic ? "synthetic" : "file");
}

int db_sweep_points(const db_sweep *s, db_point_key **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    int rc = db_sweep_validate(s, err, errlen);
    if (rc) return rc;
    int has_ar = 0, ndraft = 0;
    for (int v = 0; v < s->n_variant; v++) {
        if (db_variant_uses_drafter(s->variant[v])) ndraft++;
        else has_ar = 1;
    }
    /* the baseline runs even when not listed: speedup needs it, unless --no-baseline */
    int run_ar = (has_ar || ndraft) && !s->no_baseline;
    int nprof = s->n_profile > 0 ? s->n_profile : 1;
    int ndata = s->synthetic && !s->dataset_set ? 1 : s->n_dataset;
    size_t per = (size_t)run_ar + (size_t)nprof * (size_t)ndraft * (size_t)s->n_block_size;
    size_t total = (size_t)s->n_backend * (size_t)ndata * (size_t)s->n_temperature *
                   (size_t)s->n_concurrency * per;
    db_point_key *k = calloc(total ? total : 1, sizeof *k);
    if (!k) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for %zu sweep points", total);
    size_t m = 0;
    for (int b = 0; b < s->n_backend; b++)
        for (int d = 0; d < ndata; d++)
            for (int t = 0; t < s->n_temperature; t++)
                for (int c = 0; c < s->n_concurrency; c++) {
                    if (run_ar) key_fill(&k[m++], s, b, d, t, c, "ar", 1, -1);
                    for (int pr = 0; pr < nprof; pr++)
                        for (int bs = 0; bs < s->n_block_size && ndraft; bs++)
                            for (int v = 0; v < s->n_variant; v++)
                                if (db_variant_uses_drafter(s->variant[v]))
                                    key_fill(&k[m++], s, b, d, t, c, s->variant[v], s->block_size[bs],
                                             s->n_profile > 0 ? pr : -1);
                }
    *out = k;
    *n = (int)m;
    return DB_OK;
}
