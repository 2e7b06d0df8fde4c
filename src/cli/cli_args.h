/* cli_args.h — the one option parser of every command.
 *
 * A command describes its options in a table (db_opt): long name, short flag, value placeholder,
 * help text, and for `run` the sweep key the value sets. The parser reads "--name VALUE",
 * "--name=VALUE", "-x VALUE" and flags; "-h" / "--help" print the usage generated from the table.
 * Short flags mean the same in every command:
 *   -t target   -d drafter   -v variant   -B block size   -c concurrency   -n max new tokens
 *   -T temperature   -s seed   -b backend   -o output format   -r repetitions   -p prompt
 *   -i index   -C context depth (run, check-lossless, bench, plan)   -h help
 * Diagnostics (DB_EINPUT, exit status 2): an unknown option names itself and, when it is a
 * likely typo of a known one, the option meant: "unknown option '--thinkng' (did you mean
 * --thinking?)"; a missing value, a value given to a flag, a stray argument. */
#ifndef DB_CLI_ARGS_H
#define DB_CLI_ARGS_H

#include "backend.h"
#include "model/kv_cache.h"

#include <stddef.h>
#include <stdio.h>

typedef enum {
    DB_OPT_STR,     /* const char **dst */
    DB_OPT_INT,     /* int *dst */
    DB_OPT_FLOAT,   /* float *dst */
    DB_OPT_FLAG,    /* int *dst, set to 1 */
    DB_OPT_SWEEP,   /* db_sweep *dst: db_sweep_set(dst, sweep_key, value); value NULL for a flag */
    DB_OPT_HEADING, /* no option: a heading line in the help (its help text) */
} db_opt_kind;

typedef struct {
    const char *name;      /* long name, without "--" */
    char short_flag;       /* 0: none */
    const char *value;     /* placeholder of the value in the help ("DIR", "N", "LIST"); NULL: a flag */
    const char *help;      /* NULL: a hidden option (tests' knobs), parsed but neither listed in
                            * the help nor offered as a did-you-mean */
    const char *sweep_key; /* DB_OPT_SWEEP: the sweep key (sweep.h) */
    db_opt_kind kind;
    void *dst;
} db_opt;

typedef struct {
    const char *name;    /* the command, "run" */
    const char *summary; /* what it does, for the help */
    const db_opt *opts;
    int n;
    void (*more_help)(FILE *f); /* printed after the options; NULL for none */
} db_cmd_opts;

typedef struct {
    const db_opt *opt;
    const char *value; /* NULL for a flag */
} db_opt_use;

/* Check argv[2..argc) against the table without storing anything: uses[] (capacity argc)
 * receives each option given, in order, *n of them. With -h / --help anywhere the usage is
 * printed to stdout and *help = 1. */
int db_opts_scan(const db_cmd_opts *c, int argc, char **argv, db_opt_use *uses, int *n, int *help,
                 char *err, size_t errlen);
/* store one use's value into its destination */
int db_opt_apply(const db_opt_use *u, char *err, size_t errlen);
/* scan, then apply every use in the order given */
int db_opts_parse(const db_cmd_opts *c, int argc, char **argv, int *help, char *err, size_t errlen);
void db_opts_usage(const db_cmd_opts *c, FILE *f);
/* --kv-dtype, the same in every command that builds a target: its help text, and its value
 * ("auto" or NULL, "f32", "f16") as a dtype, auto resolved for the named backend (kv_cache.h);
 * DB_EINPUT "--kv-dtype X: auto, f32 or f16" for anything else */
#define DB_KV_DTYPE_HELP                                                                           \
    "K/V cache dtype of target and drafter: " DB_KV_DTYPE_NAMES " (default auto: f16 on backends " \
    "with f16 KV ops, as cpu, cuda, hip; else f32)"
int db_opt_kv_dtype(const char *value, const char *backend, db_dtype *dtype, char *err,
                    size_t errlen);
/* the variant table (variant.h) as help text: name, checkpoint, conv, selector, meaning */
void db_variants_help(FILE *f);

#endif
