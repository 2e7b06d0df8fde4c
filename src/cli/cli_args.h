/* cli_args.h — table-driven long-option parsing shared by the subcommands.
 *
 * Each option is "--name VALUE", "--name=VALUE" or a flag "--name"; an optional one-letter
 * alias ("-n"). Unknown options and bad values are DB_EINPUT with a message naming them. */
#ifndef DB_CLI_ARGS_H
#define DB_CLI_ARGS_H

#include <stddef.h>

typedef enum { DB_ARG_STR, DB_ARG_INT, DB_ARG_FLOAT, DB_ARG_FLAG } db_arg_kind;

typedef struct {
    const char *name;   /* without the leading "--" */
    char alias;         /* 0 for none */
    db_arg_kind kind;
    void *dst;          /* const char **, int *, float *, int * */
    const char *help;
} db_arg;

/* Parse argv[first..argc). Positional arguments are refused. */
int db_args_parse(const db_arg *spec, int nspec, int argc, char **argv, int first, char *err,
                  size_t errlen);
void db_args_usage(const db_arg *spec, int nspec, const char *cmd, const char *summary);

#endif
