/* cli_merge.c — `dflash-bench merge OUT DIR...`: one results directory from the shards of a sweep
 * (cluster/merge.h has the checks and the output). Arguments that do not start with '-' are the
 * directories, OUT first; the rest are options. Exit status: 0 merged, 1 points missing (named;
 * --allow-partial merges anyway), 2 bad input (other sweeps, another schema, torn files, a point
 * twice), nothing written unless 0. */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cluster/merge.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>

int db_cmd_merge(int argc, char **argv, char *err, size_t errlen)
{
    int allow_partial = 0, help = 0, nopt = 2, npos = 0;
    const db_opt opts[] = {
        {"allow-partial", 0, NULL, "merge even when points of the sweep are missing (named on stderr)", NULL, DB_OPT_FLAG, &allow_partial},
    };
    const db_cmd_opts cmd = {"merge",
                             "merge OUT DIR...: join the results directories of one sweep's shards (run --shard K/N,\n"
                             "MPI ranks, Slurm array tasks) into OUT; every row gets the column host.",
                             opts, (int)(sizeof opts / sizeof *opts), NULL};
    char **o = db_malloc(sizeof *o * (size_t)argc), **pos = db_malloc(sizeof *pos * (size_t)argc);
    if (!o || !pos) {
        free(o), free(pos);
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory sorting %d arguments", argc);
    }
    o[0] = argv[0], o[1] = argv[1];
    for (int i = 2; i < argc; i++) {
        if (argv[i][0] == '-') o[nopt++] = argv[i];
        else pos[npos++] = argv[i];
    }
    int rc = db_opts_parse(&cmd, nopt, o, &help, err, errlen);
    if (!rc && !help && npos < 2)
        rc = db_fail(err, errlen, DB_EINPUT, "want OUT DIR... (the merged directory, then one or more results "
                     "directories; got %d argument%s)", npos, npos == 1 ? "" : "s");
    db_merge_result r;
    if (!rc && !help) rc = db_merge(pos[0], pos + 1, npos - 1, allow_partial, &r, err, errlen);
    if (!rc && !help)
        fprintf(stderr, "merged %d points from %d directories into %s%s\n", r.points, r.sources, pos[0],
                r.missing ? " (partial)" : "");
    free(o), free(pos);
    return rc;
}
