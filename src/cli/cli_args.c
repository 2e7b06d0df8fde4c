/* cli_args.c — see cli_args.h. */
#include "cli/cli_args.h"
#include "base/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_value(const db_arg *a, const char *v, char *err, size_t errlen)
{
    char *end;
    switch (a->kind) {
    case DB_ARG_STR: *(const char **)a->dst = v; return DB_OK;
    case DB_ARG_INT: {
        errno = 0;
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < -2147483647L || x > 2147483647L)
            return db_fail(err, errlen, DB_EINPUT, "--%s: '%s' is not an integer", a->name, v);
        *(int *)a->dst = (int)x;
        return DB_OK;
    }
    case DB_ARG_FLOAT: {
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x))
            return db_fail(err, errlen, DB_EINPUT, "--%s: '%s' is not a number", a->name, v);
        *(float *)a->dst = (float)x;
        return DB_OK;
    }
    case DB_ARG_FLAG: *(int *)a->dst = 1; return DB_OK;
    }
    return DB_EINPUT;
}

int db_args_parse(const db_arg *spec, int nspec, int argc, char **argv, int first, char *err,
                  size_t errlen)
{
    for (int i = first; i < argc; i++) {
        const char *s = argv[i];
        const db_arg *a = NULL;
        const char *val = NULL;
        if (s[0] == '-' && s[1] == '-' && s[2]) {
            const char *eq = strchr(s + 2, '=');
            size_t len = eq ? (size_t)(eq - s - 2) : strlen(s + 2);
            for (int j = 0; j < nspec && !a; j++)
                if (strlen(spec[j].name) == len && strncmp(spec[j].name, s + 2, len) == 0) a = &spec[j];
            if (eq) val = eq + 1;
        } else if (s[0] == '-' && s[1] && !s[2]) {
            for (int j = 0; j < nspec && !a; j++)
                if (spec[j].alias == s[1]) a = &spec[j];
        } else {
            return db_fail(err, errlen, DB_EINPUT, "unexpected argument '%s'", s);
        }
        if (!a) return db_fail(err, errlen, DB_EINPUT, "unknown option '%s' (see --help)", s);
        if (a->kind == DB_ARG_FLAG) {
            if (val) return db_fail(err, errlen, DB_EINPUT, "--%s takes no value", a->name);
        } else if (!val) {
            if (i + 1 >= argc) return db_fail(err, errlen, DB_EINPUT, "--%s needs a value", a->name);
            val = argv[++i];
        }
        int rc = set_value(a, val ? val : "", err, errlen);
        if (rc) return rc;
    }
    return DB_OK;
}

void db_args_usage(const db_arg *spec, int nspec, const char *cmd, const char *summary)
{
    printf("usage: dflash-bench %s [options]\n\n%s\n\noptions:\n", cmd, summary);
    for (int i = 0; i < nspec; i++) {
        char left[64];
        const char *meta = spec[i].kind == DB_ARG_FLAG ? "" : spec[i].kind == DB_ARG_STR ? " S"
                           : spec[i].kind == DB_ARG_INT ? " N" : " X";
        if (spec[i].alias)
            snprintf(left, sizeof left, "-%c, --%s%s", spec[i].alias, spec[i].name, meta);
        else
            snprintf(left, sizeof left, "    --%s%s", spec[i].name, meta);
        printf("  %-30s %s\n", left, spec[i].help);
    }
}
