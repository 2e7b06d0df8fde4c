/* parse.c — see parse.h. Lists are parsed into a scratch copy and copied out only when the
 * whole value is good, so a refused value leaves the destination as it was. */
#include "base/parse.h"
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int db_trim(const char *v, size_t len, char *buf, size_t n)
{
    while (len && isspace((unsigned char)*v)) v++, len--;
    while (len && isspace((unsigned char)v[len - 1])) len--;
    if (len >= n) return -1;
    memcpy(buf, v, len);
    buf[len] = 0;
    return (int)len;
}

static int in_set(const char *v, const char *const *set, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, set[i]) == 0) return 1;
    return 0;
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

/* ---- single values ---- */

int db_parse_int(const char *key, const char *v, int lo, int hi, int *out, char *err, size_t errlen)
{
    char t[64];
    long x;
    if (!v || db_trim(v, strlen(v), t, sizeof t) < 0 || parse_long(t, &x) != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not an integer", key, v ? v : "");
    if (x < lo || x > hi)
        return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is out of range [%d, %d]", key, t, lo, hi);
    *out = (int)x;
    return DB_OK;
}

int db_parse_u64(const char *key, const char *v, uint64_t *out, char *err, size_t errlen)
{
    char t[64], *end;
    if (!v || db_trim(v, strlen(v), t, sizeof t) <= 0 || !isdigit((unsigned char)t[0]))
        return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not an unsigned integer", key, v ? v : "");
    errno = 0;
    unsigned long long x = strtoull(t, &end, 10);
    if (errno || *end)
        return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not an unsigned integer", key, t);
    *out = (uint64_t)x;
    return DB_OK;
}

/* t already trimmed */
static int float_text(const char *key, const char *t, float *out, char *err, size_t errlen)
{
    errno = 0;
    char *end;
    float x = strtof(t, &end);
    if (!*t || errno || *end || !isfinite(x))
        return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not a number", key, t);
    *out = x;
    return DB_OK;
}

int db_parse_float(const char *key, const char *v, float *out, char *err, size_t errlen)
{
    char t[64];
    if (!v || db_trim(v, strlen(v), t, sizeof t) < 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: a value is required", key);
    if (strchr(t, ','))
        return db_fail(err, errlen, DB_EINPUT, "%s takes a single value, not a list", key);
    return float_text(key, t, out, err, errlen);
}

int db_parse_bool(const char *key, const char *v, int *out, char *err, size_t errlen)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    char t[16] = "";
    if (!v) {
        *out = 1;
        return DB_OK;
    }
    if (db_trim(v, strlen(v), t, sizeof t) >= 0) {
        for (char *c = t; *c; c++) *c = (char)tolower((unsigned char)*c);
        if (in_set(t, yes, 4)) return *out = 1, DB_OK;
        if (in_set(t, no, 4)) return *out = 0, DB_OK;
    }
    return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not a boolean (true/false, 1/0)", key, v);
}

int db_parse_string(const char *key, const char *v, char *dst, size_t n, char *err, size_t errlen)
{
    char t[1024];
    int len = v ? db_trim(v, strlen(v), t, sizeof t) : -1;
    if (len < 0 || (size_t)len >= n)
        return db_fail(err, errlen, DB_EINPUT, "%s: value missing or longer than %zu characters",
                       key, n - 1);
    for (const char *c = t; *c; c++)
        if (iscntrl((unsigned char)*c))
            return db_fail(err, errlen, DB_EINPUT, "%s: control character in '%s'", key, t);
    strcpy(dst, t);
    return DB_OK;
}

int db_name_index(const char *s, const char *const *names, int n)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

int db_parse_choice(const char *key, const char *v, const char *const *set, int nset, char *dst,
                    size_t n, char *err, size_t errlen)
{
    char t[128];
    int rc = db_parse_string(key, v, t, sizeof t, err, errlen);
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
        int tl = db_trim(p, len, tok, sizeof tok);
        if (tl < 0) return db_fail(err, errlen, DB_EINPUT, "%s: value too long in '%s'", key, v);
        if (tl == 0) return db_fail(err, errlen, DB_EINPUT, "%s: empty value in list '%s'", key, v);
        int rc = fn(ctx, key, tok, err, errlen);
        if (rc) return rc;
        if (!c) return DB_OK;
        p = c + 1;
    }
}

static int full(const char *key, int n, char *err, size_t errlen)
{
    return n == DB_LIST_MAX
               ? db_fail(err, errlen, DB_EINPUT, "%s: more than %d values", key, DB_LIST_MAX)
               : DB_OK;
}

typedef struct {
    int v[DB_LIST_MAX];
    int n, lo, hi;
} int_list;

static int int_push(int_list *l, const char *key, long x, char *err, size_t errlen)
{
    if (x < l->lo || x > l->hi)
        return db_fail(err, errlen, DB_EINPUT, "%s: %ld is out of range [%d, %d]", key, x, l->lo,
                       l->hi);
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == x) return db_fail(err, errlen, DB_EINPUT, "%s: %ld listed twice", key, x);
    if (full(key, l->n, err, errlen)) return DB_EINPUT;
    l->v[l->n++] = (int)x;
    return DB_OK;
}

/* "a-b[+s|*m]" split into its three numbers; -1 when it is not of that form */
static int split_range(const char *tok, const char *dash, long *x, long *y, long *st, char *op)
{
    char a[64], b[64], s[64] = "1";
    const char *rest = dash + 1, *o = strpbrk(rest, "+*");
    if ((size_t)(dash - tok) >= sizeof a || strlen(rest) >= sizeof b) return -1;
    memcpy(a, tok, (size_t)(dash - tok));
    a[dash - tok] = 0;
    *op = '+';
    if (o) {
        memcpy(b, rest, (size_t)(o - rest));
        b[o - rest] = 0;
        *op = *o;
        snprintf(s, sizeof s, "%s", o + 1);
    } else {
        strcpy(b, rest);
    }
    return parse_long(a, x) || parse_long(b, y) || parse_long(s, st) ? -1 : 0;
}

/* "n", "a-b", "a-b+s", "a-b*m" */
static int int_token(void *ctx, const char *key, const char *tok, char *err, size_t errlen)
{
    int_list *l = ctx;
    const char *dash = strchr(tok + 1, '-'); /* tok[0] may be a sign, rejected by the range */
    long x, y, st;
    char op;
    if (dash ? split_range(tok, dash, &x, &y, &st, &op) : parse_long(tok, &x))
        return db_fail(err, errlen, DB_EINPUT, "%s: '%s' is not an integer or a range a-b[+s|*m]",
                       key, tok);
    if (!dash) return int_push(l, key, x, err, errlen);
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
}

int db_parse_int_list(const char *key, const char *v, int lo, int hi, int *dst, int *n, char *err,
                      size_t errlen)
{
    int_list l = {.n = 0, .lo = lo, .hi = hi};
    int rc = for_each_token(key, v, int_token, &l, err, errlen);
    if (rc) return rc;
    memcpy(dst, l.v, sizeof(int) * (size_t)l.n);
    *n = l.n;
    return DB_OK;
}

typedef struct {
    float v[DB_LIST_MAX];
    int n;
} float_list;

static int float_token(void *ctx, const char *key, const char *tok, char *err, size_t errlen)
{
    float_list *l = ctx;
    float x = 0;
    if (float_text(key, tok, &x, err, errlen) != 0) {
        if (strchr(tok + 1, '-'))
            return db_fail(err, errlen, DB_EINPUT,
                           "%s: '%s': ranges are not supported here, list the values (0,0.6,1)",
                           key, tok);
        return DB_EINPUT;
    }
    if (x < 0) return db_fail(err, errlen, DB_EINPUT, "%s: %g is negative", key, (double)x);
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == x) return db_fail(err, errlen, DB_EINPUT, "%s: %s listed twice", key, tok);
    if (full(key, l->n, err, errlen)) return DB_EINPUT;
    l->v[l->n++] = x;
    return DB_OK;
}

int db_parse_float_list(const char *key, const char *v, float *dst, int *n, char *err,
                        size_t errlen)
{
    float_list l = {.n = 0};
    int rc = for_each_token(key, v, float_token, &l, err, errlen);
    if (rc) return rc;
    memcpy(dst, l.v, sizeof(float) * (size_t)l.n);
    *n = l.n;
    return DB_OK;
}

typedef struct {
    char v[DB_LIST_MAX][128];
    int n;
    size_t width;
    const char *const *set; /* allowed names, NULL = any */
    int nset;
} name_list;

static int name_token(void *ctx, const char *key, const char *tok, char *err, size_t errlen)
{
    name_list *l = ctx;
    char t[128];
    int rc = l->set ? db_parse_choice(key, tok, l->set, l->nset, t, l->width, err, errlen)
                    : db_parse_string(key, tok, t, l->width, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i], t) == 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: '%s' listed twice", key, t);
    if (full(key, l->n, err, errlen)) return DB_EINPUT;
    strcpy(l->v[l->n++], t);
    return DB_OK;
}

int db_parse_name_list(const char *key, const char *v, const char *const *set, int nset, char *dst,
                       size_t width, int *n, char *err, size_t errlen)
{
    static _Thread_local name_list l; /* 8 KiB: off the stack */
    if (width > sizeof l.v[0])
        return db_fail(err, errlen, DB_ERUNTIME, "%s: internal: names wider than %zu", key,
                       sizeof l.v[0]);
    l.n = 0;
    l.width = width;
    l.set = set;
    l.nset = nset;
    int rc = for_each_token(key, v, name_token, &l, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < l.n; i++) strcpy(dst + (size_t)i * width, l.v[i]);
    *n = l.n;
    return DB_OK;
}

/* ---- typos ---- */

/* optimal string alignment distance, or any value >= cut when it is not below cut (the search
 * stops when two rows in a row hold nothing below cut: a later cell comes from one of them plus
 * an edit); names longer than 63 characters are never close */
static int edit_distance(const char *a, const char *b, int cut)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 1 << 20;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    int prev_min = 0; /* row 0 starts at 0 */
    for (size_t i = 1; i <= la; i++) {
        int row_min = d[i][0];
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int x = d[i - 1][j] + 1, y = d[i][j - 1] + 1, z = d[i - 1][j - 1] + cost;
            int m = x < y ? x : y;
            m = m < z ? m : z;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < m)
                m = d[i - 2][j - 2] + 1;
            d[i][j] = m;
            if (m < row_min) row_min = m;
        }
        if (row_min >= cut && prev_min >= cut) return cut;
        prev_min = row_min;
    }
    return d[la][lb];
}

int db_closest(const char *s, const char *const *names, int n)
{
    /* close enough: at most 2 edits and at most a third of s, so only d < bd counts */
    size_t ls = strlen(s);
    int best = -1, bd = ls / 3 < 2 ? (int)(ls / 3) + 1 : 3;
    for (int i = 0; i < n; i++) {
        /* the distance is at least the length difference: skip names that cannot beat bd (a
         * long unknown key no longer costs a full table per name) */
        size_t ln = strlen(names[i]);
        if ((ln > ls ? ln - ls : ls - ln) >= (size_t)bd) continue;
        int d = edit_distance(s, names[i], bd);
        if (d < bd) best = i, bd = d;
    }
    return best;
}
