/* cli_mpi.c — `mpirun -np N dflash-bench run ... --out DIR`: rank r runs shard r/N of the sweep
 * (cluster/shard.h) into DIR-shards/r, and rank 0 merges the shards into DIR (cluster/merge.h)
 * once every rank finished. Without an MPI launcher (no OMPI_COMM_WORLD_SIZE / PMI_SIZE in the
 * environment) `run` is the plain command.
 *
 * Under MPI: --out is required (every rank must name the same directory; the default one has the
 * time in its name), --shard and --resume are refused (the ranks are the shards; resume a rank's
 * directory with `run --resume DIR-shards/r`, then `merge`). The ranks on one node split its cores:
 * without --threads each takes max(1, min(cores it may use, online cores / ranks on the node)).
 * A GPU backend gets one device per rank on the node: CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES =
 * the node-local rank unless already set. stdout of every rank is discarded (each holds one
 * shard's table); rank 0 says where the merged results are. The shard directories must be on a
 * file system rank 0 sees (one node, or a shared one). Exit status: a rank's own failure, else 1
 * on rank 0 when another rank failed (nothing merged). */
#include "config.h"
#include "cli/cli.h"
#include "cluster/merge.h"
#include "base/util.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if HAVE_MPI
#include <mpi.h>
#endif

static int under_launcher(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"); }

#if HAVE_MPI
/* the value of --name in argv (as "--name V" or "--name=V"); its index in *at */
static const char *opt_value(int argc, char **argv, const char *name, int *at)
{
    size_t n = strlen(name);
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], name) && i + 1 < argc) return *at = i + 1, argv[i + 1];
        if (!strncmp(argv[i], name, n) && argv[i][n] == '=') return *at = i, argv[i] + n + 1;
    }
    return NULL;
}

static int cores_for_rank(int local_size)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
    int share = (int)(online / (local_size > 0 ? local_size : 1));
    int t = mine < share ? mine : share;
    return t > 0 ? t : 1;
}

static int run_rank(int argc, char **argv, int rank, int size, int local_rank, int local_size, const char *out,
                    char *err, size_t errlen)
{
    char shard[32], dir[1100], threads[16], dev[16], *a[argc + 8];
    int n = 0, t;
    snprintf(shard, sizeof shard, "%d/%d", rank, size);
    snprintf(dir, sizeof dir, "%s-shards/%d", out, rank);
    snprintf(threads, sizeof threads, "%d", cores_for_rank(local_size));
    for (int i = 0; i < argc; i++) { /* every argument but --out's */
        if (i >= 2 && !strcmp(argv[i], "--out")) i++;
        else if (i < 2 || strncmp(argv[i], "--out=", 6)) a[n++] = argv[i];
    }
    a[n++] = "--out", a[n++] = dir, a[n++] = "--shard", a[n++] = shard;
    if (!opt_value(argc, argv, "--threads", &t)) a[n++] = "--threads", a[n++] = threads;
    a[n] = NULL;
    snprintf(dev, sizeof dev, "%d", local_rank);
    setenv("CUDA_VISIBLE_DEVICES", dev, 0);
    setenv("HIP_VISIBLE_DEVICES", dev, 0);
    if (!freopen("/dev/null", "w", stdout)) return db_fail(err, errlen, DB_ERUNTIME, "cannot discard stdout");
    return db_cmd_run(n, a, err, errlen);
}

static int merge_ranks(const char *out, int size, char *err, size_t errlen)
{
    char **dirs = db_calloc((size_t)size, sizeof *dirs);
    int n = 0, rc = DB_OK;
    for (int r = 0; dirs && r < size; r++) {
        char d[1100];
        struct stat st;
        snprintf(d, sizeof d, "%s-shards/%d", out, r);
        if (stat(d, &st) != 0) continue; /* a shard without points made none */
        if (!(dirs[n] = db_strdup(d))) {
            rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory listing the shard directory %s", d);
            break;
        }
        n++;
    }
    if (!dirs) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory listing the shard directories of %d ranks", size);
    else if (!rc && !n) rc = db_fail(err, errlen, DB_ERUNTIME, "no rank wrote a shard directory under %s-shards", out);
    db_merge_result mr;
    if (!rc) rc = db_merge(out, dirs, n, 0, &mr, err, errlen);
    if (!rc) fprintf(stderr, "merged %d points from %d ranks' shards (%s-shards/*): results in %s\n", mr.points, size, out, out);
    for (int i = 0; i < n; i++) free(dirs[i]);
    free(dirs);
    return rc;
}
#endif

int db_cmd_run_mpi(int argc, char **argv, char *err, size_t errlen)
{
    if (!under_launcher()) return db_cmd_run(argc, argv, err, errlen);
#if !HAVE_MPI
    return db_fail(err, errlen, DB_EINPUT, "started by an MPI launcher, but this binary was built without MPI "
                   "(meson setup -Dmpi=enabled; Debian: libopenmpi-dev)");
#else
    int rank, size, local_rank, local_size, at;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    const char *out = opt_value(argc, argv, "--out", &at);
    int rc = DB_OK;
    for (int i = 2; i < argc && !rc; i++)
        if (!strncmp(argv[i], "--shard", 7) || !strncmp(argv[i], "--resume", 8))
            rc = db_fail(err, errlen, DB_EINPUT, "under mpirun, %s is not taken (the ranks are the shards; see README, MPI)", argv[i]);
    if (!rc && !out)
        rc = db_fail(err, errlen, DB_EINPUT, "under mpirun, give --out DIR (the merged results; shards go to DIR-shards/RANK)");
    if (!rc) rc = run_rank(argc, argv, rank, size, local_rank, local_size, out, err, errlen);
    if (rc) { /* main prints it: say which rank */
        char own[1024];
        snprintf(own, sizeof own, "%s", err);
        db_fail(err, errlen, rc, "rank %d of %d: %s", rank, size, own);
    }
    int mine = rc ? 1 : 0, failed = 0;
    MPI_Allreduce(&mine, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (!rc && failed && rank == 0)
        rc = db_fail(err, errlen, DB_ERUNTIME, "%d of %d ranks failed; nothing merged (finish each with run --resume %s-shards/RANK, then merge)",
                     failed, size, out);
    else if (!rc && rank == 0)
        rc = merge_ranks(out, size, err, errlen);
    MPI_Finalize();
    return rc;
#endif
}
