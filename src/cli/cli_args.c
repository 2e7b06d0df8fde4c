/* cli_args.c — see cli_args.h. */
#include "cli/cli_args.h"
#include "base/parse.h"
#include "base/util.h"
#include "bench/sweep.h"
#include "engine/variant.h"
#include "model/kv_cache.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const db_opt help_opt = {"help", 'h', NULL, "this help", NULL, DB_OPT_FLAG, NULL};

static const db_opt *find_long(const db_cmd_opts *c, const char *name, size_t len)
{
    for (int i = 0; i < c->n; i++) {
        const db_opt *o = &c->opts[i];
        if (o->kind != DB_OPT_HEADING && strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    }
    return strlen(help_opt.name) == len && !strncmp(help_opt.name, name, len) ? &help_opt : NULL;
}

static const db_opt *find_short(const db_cmd_opts *c, char f)
{
    for (int i = 0; i < c->n; i++)
        if (c->opts[i].kind != DB_OPT_HEADING && c->opts[i].short_flag == f) return &c->opts[i];
    return f == help_opt.short_flag ? &help_opt : NULL;
}

/* "unknown option 'ARG' (did you mean --NAME?)" when name is a likely typo of a long name */
static int unknown(const db_cmd_opts *c, const char *arg, const char *name, size_t len, char *err,
                   size_t errlen)
{
    char typed[64];
    const char *names[128];
    int n = 0;
    snprintf(typed, sizeof typed, "%.*s", (int)(len < sizeof typed ? len : sizeof typed - 1), name);
    for (int i = 0; i < c->n && n < 127; i++)
        if (c->opts[i].kind != DB_OPT_HEADING && c->opts[i].help) names[n++] = c->opts[i].name;
    names[n++] = help_opt.name;
    int near = len && len < sizeof typed ? db_closest(typed, names, n) : -1;
    if (near >= 0)
        return db_fail(err, errlen, DB_EINPUT, "unknown option '%s' (did you mean --%s?)", arg,
                       names[near]);
    return db_fail(err, errlen, DB_EINPUT, "unknown option '%s' (see dflash-bench %s --help)", arg,
                   c->name);
}

/* argv[*i] as an option with its value (taking argv[*i + 1] when the option needs one) */
static int scan_one(const db_cmd_opts *c, int argc, char **argv, int *i, db_opt_use *u, char *err,
                    size_t errlen)
{
    const char *s = argv[*i], *val = NULL;
    const db_opt *o = NULL;
    if (s[0] == '-' && s[1] == '-' && s[2]) {
        const char *eq = strchr(s + 2, '=');
        size_t len = eq ? (size_t)(eq - s - 2) : strlen(s + 2);
        if (!(o = find_long(c, s + 2, len))) return unknown(c, s, s + 2, len, err, errlen);
        if (eq) val = eq + 1;
    } else if (s[0] == '-' && s[1] && s[1] != '-' && !s[2]) {
        if (!(o = find_short(c, s[1])))
            return db_fail(err, errlen, DB_EINPUT, "unknown option '%s' (see dflash-bench %s --help)",
                           s, c->name);
    } else if (s[0] == '-' && s[1] && s[1] != '-') { /* "-thinking": a long name with one dash */
        return unknown(c, s, s + 1, strlen(s + 1), err, errlen);
    } else {
        return db_fail(err, errlen, DB_EINPUT, "unexpected argument '%s'", s);
    }
    if (!o->value) {
        /* a sweep flag takes an explicit boolean (--thinking=false); a plain flag none */
        if (val && o->kind != DB_OPT_SWEEP)
            return db_fail(err, errlen, DB_EINPUT, "--%s takes no value", o->name);
    } else if (!val) {
        if (*i + 1 >= argc) return db_fail(err, errlen, DB_EINPUT, "--%s needs a value", o->name);
        val = argv[++*i];
    }
    *u = (db_opt_use){o, val};
    return DB_OK;
}

int db_opts_scan(const db_cmd_opts *c, int argc, char **argv, db_opt_use *uses, int *n, int *help,
                 char *err, size_t errlen)
{
    *n = 0;
    *help = 0;
    for (int i = 2; i < argc; i++) {
        db_opt_use u;
        int rc = scan_one(c, argc, argv, &i, &u, err, errlen);
        if (rc) return rc;
        if (u.opt == &help_opt) *help = 1;
        else uses[(*n)++] = u;
    }
    if (*help) db_opts_usage(c, stdout);
    return DB_OK;
}

int db_opt_apply(const db_opt_use *u, char *err, size_t errlen)
{
    const db_opt *o = u->opt;
    char key[80];
    snprintf(key, sizeof key, "--%s", o->name);
    switch (o->kind) {
    case DB_OPT_STR: *(const char **)o->dst = u->value; return DB_OK;
    case DB_OPT_INT: return db_parse_int(key, u->value, -INT_MAX, INT_MAX, o->dst, err, errlen);
    case DB_OPT_FLOAT: return db_parse_float(key, u->value, o->dst, err, errlen);
    case DB_OPT_FLAG: *(int *)o->dst = 1; return DB_OK;
    case DB_OPT_SWEEP: return db_sweep_set(o->dst, o->sweep_key, u->value, err, errlen);
    case DB_OPT_HEADING: break;
    }
    return db_fail(err, errlen, DB_ERUNTIME, "internal: --%s has no destination", o->name);
}

int db_opts_parse(const db_cmd_opts *c, int argc, char **argv, int *help, char *err, size_t errlen)
{
    db_opt_use *uses = db_malloc(sizeof *uses * (size_t)(argc > 0 ? argc : 1));
    if (!uses) return db_fail(err, errlen, DB_ERUNTIME, "out of memory parsing %d arguments", argc);
    int n, rc = db_opts_scan(c, argc, argv, uses, &n, help, err, errlen);
    for (int i = 0; i < n && !rc && !*help; i++) rc = db_opt_apply(&uses[i], err, errlen);
    free(uses);
    return rc;
}

/* help text from column 33, wrapped at 100 columns */
static void print_wrapped(FILE *f, const char *left, const char *text)
{
    enum { COL = 33, WIDTH = 100 };
    int pos = fprintf(f, "  %s", left);
    if (pos >= COL - 1) fprintf(f, "\n"), pos = 0;
    const char *p = text;
    while (*p) {
        const char *sp = strchr(p, ' ');
        int w = sp ? (int)(sp - p) : (int)strlen(p);
        if (pos > COL && pos + 1 + w > WIDTH) fprintf(f, "\n"), pos = 0;
        if (pos < COL) pos += fprintf(f, "%*s", COL - pos, "");
        else pos += fprintf(f, " ");
        pos += fprintf(f, "%.*s", w, p);
        p += w;
        while (*p == ' ') p++;
    }
    fprintf(f, "\n");
}

static void usage_line(FILE *f, const db_opt *o)
{
    char left[96];
    const char *v = o->value ? o->value : "";
    if (o->short_flag)
        snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_flag, o->name, *v ? " " : "", v);
    else
        snprintf(left, sizeof left, "    --%s%s%s", o->name, *v ? " " : "", v);
    print_wrapped(f, left, o->help);
}

void db_opts_usage(const db_cmd_opts *c, FILE *f)
{
    fprintf(f, "usage: dflash-bench %s [options]\n\n%s\n", c->name, c->summary);
    if (c->n == 0 || c->opts[0].kind != DB_OPT_HEADING) fprintf(f, "\noptions:\n");
    for (int i = 0; i < c->n; i++) {
        if (c->opts[i].kind == DB_OPT_HEADING) fprintf(f, "\n%s:\n", c->opts[i].help);
        else if (c->opts[i].help) usage_line(f, &c->opts[i]);
    }
    usage_line(f, &help_opt);
    if (c->more_help) c->more_help(f);
}

void db_variants_help(FILE *f)
{
    fprintf(f, "\nvariants:\n  %-13s %-14s %-5s %-9s %s\n", "name", "checkpoint", "conv", "selector",
            "meaning");
    for (int i = 0; i < DB_VAR_COUNT; i++) {
        const db_variant_info *v = &db_variant_table[i];
        int d = db_variant_uses_drafter((db_variant)i);
        fprintf(f, "  %-13s %-14s %-5s %-9s %s\n", v->name, db_variant_checkpoint((db_variant)i),
                !d ? "-" : v->conv ? "on" : "off", !d ? "-" : v->selector ? "on" : "off", v->meaning);
    }
}

int db_opt_kv_dtype(const char *value, const char *backend, db_dtype *dtype, char *err,
                    size_t errlen)
{
    if (db_kv_dtype_parse(value ? value : "auto", backend, dtype) != 0)
        return db_fail(err, errlen, DB_EINPUT, "--kv-dtype %s: one of " DB_KV_DTYPE_NAMES, value);
    return DB_OK;
}
