/* cli.h — the subcommands of dflash-bench. Each parses argv from index 2, returns 0 or a
 * negative DB_E* status with a one-line message in err; main() turns that into the exit code. */
#ifndef DB_CLI_H
#define DB_CLI_H

#include "text/tokenizer.h"

#include <stddef.h>

int db_cmd_generate(int argc, char **argv, char *err, size_t errlen);
int db_cmd_info(int argc, char **argv, char *err, size_t errlen);
int db_cmd_tokenize(int argc, char **argv, char *err, size_t errlen);
int db_cmd_check_lossless(int argc, char **argv, char *err, size_t errlen);
int db_cmd_run(int argc, char **argv, char *err, size_t errlen);
int db_cmd_plan(int argc, char **argv, char *err, size_t errlen);
int db_cmd_bench(int argc, char **argv, char *err, size_t errlen);
int db_cmd_merge(int argc, char **argv, char *err, size_t errlen);
int db_cmd_compare(int argc, char **argv, char *err, size_t errlen);
/* run, or under an MPI launcher one shard per rank and rank 0 merging (cli_mpi.c) */
int db_cmd_run_mpi(int argc, char **argv, char *err, size_t errlen);


#endif
