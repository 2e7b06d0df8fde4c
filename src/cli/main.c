/* main.c — dflash-bench entry point: subcommand dispatch, --version, --help. The only place
 * that exits: status 0 on success, 2 on bad input (flag, file, config), 1 on runtime failure. */
#include "config.h"
#include "backend.h"
#include "cli/cli.h"
#include "base/parse.h"
#include "base/util.h"
#include "bench/machine_load.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void print_version(void)
{
    printf("dflash-bench %s (commit %s, %s, %s)\nbackends:", DB_VERSION, DB_GIT_COMMIT,
           DB_COMPILER, DB_BUILDTYPE);
    for (int i = 0; db_backend_names[i]; i++) printf(" %s", db_backend_names[i]); /* (built, not loaded) */
    printf("\nfeatures: openmp=%d openblas=%d hwloc=%d mpi=%d\n", HAVE_OPENMP, HAVE_OPENBLAS, HAVE_HWLOC, HAVE_MPI);
}

/* the commands; the help lists them in this order */
static const struct {
    const char *name;
    int (*fn)(int, char **, char *, size_t);
    const char *summary;
} cmds[] = {
    {"generate", db_cmd_generate, "decode one prompt and print the token ids"},
    {"run", db_cmd_run_mpi, "the benchmark sweep (default: configs/default.ini) -> CSV + table"},
    {"merge", db_cmd_merge, "join the results directories of a sharded sweep (run --shard, MPI, Slurm)"},
    {"compare", db_cmd_compare, "two results directories row by row: NEW/BASE ratios, CIs, verdicts"},
    {"check-lossless", db_cmd_check_lossless, "every variant's greedy output == ar, token for token"},
    {"plan", db_cmd_plan, "capacity planning: roofline vs a synthetic run, from config.json shapes"},
    {"bench", db_cmd_bench, "forward time vs rows and context, against copy bandwidth and FMA peak"},
    {"tokenize", db_cmd_tokenize, "text to token ids (or ids to text) with a tokenizer.json"},
    {"info", db_cmd_info, "compiled backends, devices and CPU topology"},
};

static void print_help(void)
{
    printf("usage: dflash-bench <command> [options]\n\n"
           "DFlash 2 speculative-decoding benchmark.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        printf("  %-16s %s\n", cmds[i].name, cmds[i].summary);
    printf("\n  dflash-bench <command> --help   options of a command\n"
           "  dflash-bench --version          version, commit and compiled backends\n");
}

#if defined(__linux__) && HAVE_OPENMP
/* The command will run the compute kernels, whose OpenMP wait policy is chosen below: run,
 * generate, check-lossless, plan, bench, unless it only prints its help. The others (--version,
 * --help, info, tokenize, merge, a command's --help, an unknown command) never reach a parallel
 * region, so they skip the 50 ms load sample and leave the OpenMP environment as it is. */
static int runs_kernels(int argc, char **argv)
{
    static const char *const compute[] = {"generate", "run", "check-lossless", "plan", "bench"};
    int known = 0;
    for (size_t i = 0; argc >= 2 && i < sizeof compute / sizeof *compute; i++)
        known |= strcmp(argv[1], compute[i]) == 0;
    if (known && argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) known = 0;
    return known;
}
#endif

int main(int argc, char **argv)
{
#if defined(__linux__) && (HAVE_OPENMP || HAVE_OPENBLAS)
    /* Both libraries read their environment before main(), hence set it and re-execute once
     * (execv returns only on failure: carry on as we are). Only when a value has to change: the
     * second start finds it set (and a user's own values are kept), so it never loops. */
    int reexec = 0;
#if HAVE_OPENMP
    /* libgomp's default (spin ~300k iterations at every barrier) collapses throughput as soon as
     * a core is shared: a sweep point took 37 s on a loaded 2-core machine, 3.2 s with passive
     * waits, 7.3 s with a 10k spin. On a quiet machine passive waits cost 6x on the tiny model
     * (ar 539 vs 3291 tok/s) while a 10k spin matches the default (3207). With other processes
     * holding 1.6-1.8 of 2 cores, `ar` c1 at 2 threads read 37-40 tok/s with the 10k spin, 26-100
     * active, 316-1582 passive (1005-1065 at 1 thread). So: other processes busy when the
     * tool starts (more than half a core over 50 ms, /proc/stat) -> passive waits; else the short
     * spin. Rows measured under contention say so either way (`contended`). The user's own
     * OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept. (50 ms: /proc/stat counts in 10 ms ticks per
     * CPU, so a shorter window misjudges by a core or more; see runs_kernels for who samples.) */
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT") && runs_kernels(argc, argv)) {
        db_load_sample a, b;
        db_load_sample_now(&a);
        nanosleep(&(struct timespec){0, 50000000}, NULL);
        db_load_sample_now(&b);
        int busy = db_load_other_cores(&a, &b) > 0.5;
        if ((busy ? setenv("OMP_WAIT_POLICY", "passive", 1) : setenv("GOMP_SPINCOUNT", "10000", 1)) == 0) reexec = 1;
    }
#endif
#if HAVE_OPENBLAS
    /* The tool never runs on OpenBLAS's own thread pool (the CPU backend calls it from its
     * OpenMP threads, one thread each), yet the library starts the pool when it loads. Under
     * `ulimit -v` a pool worker loops on its failing buffer allocation and OpenBLAS's exit
     * handler waits for it forever; one thread means no pool at all. Always 1: a user's value
     * would only start threads that nothing uses. */
    const char *ob = getenv("OPENBLAS_NUM_THREADS");
    if ((!ob || strcmp(ob, "1") != 0) && setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0) reexec = 1;
#endif
    if (reexec) execv("/proc/self/exe", argv);
#endif
    /* a results file reaching RLIMIT_FSIZE: write() fails with EFBIG and the error names the
     * file, instead of SIGXFSZ ending the process without a word (--resume carries on) */
    signal(SIGXFSZ, SIG_IGN);
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    if (argc < 2) {
        print_help();
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        print_version();
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_help();
        return 0;
    }
    char err[1024] = "";
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        if (strcmp(cmd, cmds[i].name) != 0) continue;
        int rc = cmds[i].fn(argc, argv, err, sizeof err);
        /* what the command printed must have reached stdout (a full disk, /dev/full) */
        errno = 0;
        if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout)))
            rc = db_fail(err, sizeof err, DB_ERUNTIME, "cannot write standard output%s%s",
                         errno ? ": " : "", errno ? strerror(errno) : "");
        if (rc == 0) return 0;
        fprintf(stderr, "dflash-bench %s: %s\n", cmd, err[0] ? err : "failed");
        return rc == DB_EINPUT ? 2 : rc <= DB_ESIGNAL(0) ? -rc : 1;
    }
    const char *names[sizeof cmds / sizeof *cmds];
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) names[i] = cmds[i].name;
    int near = db_closest(cmd, names, (int)(sizeof cmds / sizeof *cmds));
    if (near >= 0)
        fprintf(stderr, "dflash-bench: unknown command '%s' (did you mean %s?)\n", cmd, names[near]);
    else
        fprintf(stderr, "dflash-bench: unknown command '%s' (see --help)\n", cmd);
    return 2;
}
