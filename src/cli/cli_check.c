/* cli_check.c — `dflash-bench check-lossless`: every variant the drafter can run, greedily, at
 * each block size, against `ar` on a prompt set, token for token. Runs in deterministic
 * (batch-invariant) mode, where the identity must hold exactly: the first differing token fails
 * the check (exit 1) naming variant, block size, prompt and position. Then it measures how often
 * the fast default mode (batch-shape dependent reductions) differs, and reports that share.
 * Random prompts: 4 to 16 ids each (bench/prompt_set.h), after --depth ids of context. */
#include "bench/runner.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "engine/engine_test.h"
#include "engine/session.h"
#include "base/parse.h"
#include "base/paths.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* every prompt through one engine of conc slots; outputs into out[i] */
static int run_all(db_session *s, const db_gen_params *p, int conc, const db_prompt_set *ps, int **out,
                   int *nout, char *err, size_t errlen)
{
    db_request *r = db_calloc((size_t)ps->ds.n, sizeof *r);
    if (!r) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the requests");
    for (int i = 0; i < ps->ds.n; i++) r[i] = (db_request){.prompt = ps->ids[i], .n_prompt = ps->len[i], .out = out[i]};
    double t0 = -1;
    int rc = db_runner_pass(&s->target, s->has_drafter ? &s->drafter : NULL, p, conc, r, ps->ds.n, &t0, NULL, err, errlen);
    for (int i = 0; i < ps->ds.n; i++) nout[i] = r[i].n_out;
    free(r);
    return rc;
}

/* index of the first prompt whose output differs, -1 if none; *pos = first differing position */
static int first_diff(int n, int **a, const int *na, int **b, const int *nb, int *pos)
{
    for (int i = 0; i < n; i++) {
        int m = na[i] < nb[i] ? na[i] : nb[i];
        for (int j = 0; j < m; j++)
            if (a[i][j] != b[i][j]) {
                *pos = j;
                return i;
            }
        if (na[i] != nb[i]) {
            *pos = m;
            return i;
        }
    }
    return -1;
}

typedef struct {
    const char *target_dir, *drafter_dir, *prompts_file, *backend, *blocks_text, *kv_s;
    db_dtype kv_dtype;
    int n_random, max_new, conc, threads, plant, seed, depth;
    int blocks[DB_LIST_MAX], nblocks;
    db_session s;
    db_prompt_set ps;
    int **ref, **out; /* [ps.n][max_new]: ar's output, a variant's */
    int *nref, *nout;
} check_ctx;

static int parse_options(check_ctx *c, int argc, char **argv, int *help, char *err, size_t errlen)
{
    const db_opt opts[] = {
        {"target", 't', "DIR", "target checkpoint directory", NULL, DB_OPT_STR, &c->target_dir},
        {"drafter", 'd', "DIR", "drafter directory", NULL, DB_OPT_STR, &c->drafter_dir},
        {"prompt-ids-file", 0, "FILE", "one prompt of token ids per line (default: random prompts)", NULL, DB_OPT_STR, &c->prompts_file},
        {"random-prompts", 0, "N", "number of seeded random prompts when no file (default 20)", NULL, DB_OPT_INT, &c->n_random},
        {"block-size", 'B', "LIST", "block sizes, a list or ranges (default: 4,8 and the drafter's; EAGLE-3 / MTP: 4,8,16)", NULL, DB_OPT_STR, &c->blocks_text},
        {"max-new-tokens", 'n', "N", "tokens per prompt (default 48)", NULL, DB_OPT_INT, &c->max_new},
        {"depth", 'C', "N", "tokens of context before every prompt: the other prompts' ids (random prompts: more random ids), as run --depth (default 0)", NULL, DB_OPT_INT, &c->depth},
        {"concurrency", 'c', "N", "requests batched per cycle (default 4)", NULL, DB_OPT_INT, &c->conc},
        {"seed", 's', "N", "seed of the random prompts (default 0)", NULL, DB_OPT_INT, &c->seed},
        {"backend", 'b', "NAME", "compute backend (default cpu)", NULL, DB_OPT_STR, &c->backend},
        {"threads", 0, "N", "CPU threads (default: all cores; at most 4x them)", NULL, DB_OPT_INT, &c->threads},
        {"kv-dtype", 0, "TYPE", DB_KV_DTYPE_HELP, NULL, DB_OPT_STR, &c->kv_s},
        /* hidden (no help): corrupt the N-th token of prompt 0 in every speculative variant, for
         * tests/cli_run.sh to see the check fail (engine_test.h) */
        {"debug-plant-mismatch", 0, "N", NULL, NULL, DB_OPT_INT, &c->plant},
    };
    const db_cmd_opts cmd = {"check-lossless",
                             "Greedy output of every variant == ar, token for token (exit 1 on the first difference).",
                             opts, (int)(sizeof opts / sizeof *opts), NULL};
    int rc = db_opts_parse(&cmd, argc, argv, help, err, errlen);
    if (rc || *help) return rc;
    if ((rc = db_opt_kv_dtype(c->kv_s, c->backend, &c->kv_dtype, err, errlen))) return rc;
    db_engine_set_test_hooks(&(struct db_engine_test_hooks){.plant_mismatch = c->plant});
    if (!c->target_dir || !c->drafter_dir) return db_fail(err, errlen, DB_EINPUT, "--target DIR and --drafter DIR are required");
    if ((rc = db_threads_check("--threads", c->threads, err, errlen))) return rc;
    if (c->conc < 1 || c->max_new < 1 || c->n_random < 1 || c->depth < 0)
        return db_fail(err, errlen, DB_EINPUT, "--concurrency, --max-new-tokens and --random-prompts must be >= 1, --depth >= 0");
    if (c->blocks_text)
        return db_parse_int_list("--block-size", c->blocks_text, 2, DB_MAX_BLOCK, c->blocks, &c->nblocks, err, errlen);
    return DB_OK;
}

/* the block sizes (default 4, 8 and the drafter's), the prompts, the output buffers */
static int prepare(check_ctx *c, char *err, size_t errlen)
{
    int rc = DB_OK, Bmax = c->s.drafter.cfg.block_size;
    if (!c->blocks_text) { /* a chain drafter (EAGLE-3, MTP) has no trained block: 4, 8, 16 */
        int dflt[3] = {4, 8, DB_DEFAULT_BLOCK(&c->s.drafter.cfg)};
        for (int i = 0; i < 3; i++)
            if (dflt[i] <= Bmax && (c->nblocks == 0 || c->blocks[c->nblocks - 1] < dflt[i])) c->blocks[c->nblocks++] = dflt[i];
    }
    for (int i = 0; i < c->nblocks; i++)
        if (c->blocks[i] < 2 || c->blocks[i] > Bmax)
            return db_fail(err, errlen, DB_EINPUT, "block size %d outside 2..%d (%s)", c->blocks[i], Bmax,
                           c->s.drafter.cfg.base.path);
    if (c->prompts_file) rc = db_prompt_set_ids_file(&c->ps, c->prompts_file, err, errlen);
    else rc = db_prompt_set_random(&c->ps, "random", c->n_random, 4, 16, c->s.target.cfg.vocab, (uint64_t)c->seed, err, errlen);
    if (!rc) rc = db_prompt_set_depth(&c->ps, c->depth, NULL, c->s.target.cfg.vocab, (uint64_t)c->seed, err, errlen);
    for (int i = 0; i < c->ps.ds.n && !rc; i++) rc = db_session_check_ids(&c->s, c->ps.ids[i], c->ps.len[i], err, errlen);
    if (rc) return rc;
    int n = c->ps.ds.n;
    c->ref = db_calloc((size_t)n, sizeof(int *)), c->out = db_calloc((size_t)n, sizeof(int *));
    c->nref = db_calloc((size_t)n, sizeof(int)), c->nout = db_calloc((size_t)n, sizeof(int));
    if (!c->ref || !c->out || !c->nref || !c->nout)
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the outputs of %d prompts", n);
    for (int i = 0; i < n; i++) {
        c->ref[i] = db_malloc(sizeof(int) * (size_t)c->max_new);
        c->out[i] = db_malloc(sizeof(int) * (size_t)c->max_new);
        if (!c->ref[i] || !c->out[i])
            return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the outputs of prompt %d", i);
    }
    return DB_OK;
}

/* every variant the drafter runs, at every block size, against ar: deterministic mode (1) fails
 * on the first difference, fast mode (0) counts the prompt runs that differ */
static int compare(check_ctx *c, int mode, char *err, size_t errlen)
{
    const db_prompt_set *ps = &c->ps;
    int np = ps->ds.n;
    db_gen_params p = {.variant = DB_VAR_AR, .block_size = 1, .top_p = 1.0f, .max_new_tokens = c->max_new,
                       .kv_dtype = c->kv_dtype};
    c->s.be->deterministic = mode;
    int rc = run_all(&c->s, &p, c->conc, ps, c->ref, c->nref, err, errlen), runs = 0, differing = 0;
    for (int v = 0; v < DB_VAR_COUNT && !rc; v++) {
        const char *name = db_variant_name((db_variant)v);
        if (!db_variant_uses_drafter((db_variant)v) || db_variant_check((db_variant)v, &c->s.drafter, err, errlen) != 0)
            continue;
        for (int bi = 0; bi < c->nblocks && !rc; bi++) {
            p.variant = (db_variant)v;
            p.block_size = c->blocks[bi];
            if ((rc = run_all(&c->s, &p, c->conc, ps, c->out, c->nout, err, errlen))) break;
            int pos, bad = first_diff(np, c->out, c->nout, c->ref, c->nref, &pos);
            runs++;
            if (mode == 1 && bad >= 0)
                rc = db_fail(err, errlen, DB_ERUNTIME,
                             "NOT lossless: variant %s, block %d: prompt %d differs at output position %d (ar %d, %s %d)",
                             name, c->blocks[bi], bad, pos, pos < c->nref[bad] ? c->ref[bad][pos] : -1, name,
                             pos < c->nout[bad] ? c->out[bad][pos] : -1);
            else if (mode == 1)
                printf("ok  %-12s B=%-3d %d prompts x %d tokens identical to ar\n", name, c->blocks[bi], np, c->max_new);
            for (int i = 0; i < np && mode == 0; i++) {
                int pp;
                differing += first_diff(1, &c->out[i], &c->nout[i], &c->ref[i], &c->nref[i], &pp) >= 0;
            }
        }
    }
    if (!rc && mode == 0)
        printf("fast mode (batch-shape dependent reductions): %d of %d prompt runs differ from fast-mode ar (%.1f%%)\n",
               differing, runs * np, runs ? 100.0 * differing / (runs * np) : 0.0);
    return rc;
}

int db_cmd_check_lossless(int argc, char **argv, char *err, size_t errlen)
{
    check_ctx c = {.backend = "cpu", .n_random = 20, .max_new = 48, .conc = 4};
    int help = 0, rc = parse_options(&c, argc, argv, &help, err, errlen);
    if (rc || help) return rc;
    char tbuf[1024], dbuf[1024]; /* models/... from any directory (base/paths.h) */
    db_session_opts so = {c.backend, db_data_find(c.target_dir, tbuf, sizeof tbuf),
                          db_data_find(c.drafter_dir, dbuf, sizeof dbuf), c.threads, 1, NULL};
    if ((rc = db_session_open(&c.s, &so, err, errlen))) return rc;
    rc = prepare(&c, err, errlen);
    for (int mode = 1; mode >= 0 && !rc; mode--) rc = compare(&c, mode, err, errlen); /* 1: the check, 0: fast */
    if (!rc) printf("lossless: every variant == ar in deterministic mode\n");
    for (int i = 0; i < c.ps.ds.n && c.ref && c.out; i++) free(c.ref[i]), free(c.out[i]);
    free(c.ref), free(c.out), free(c.nref), free(c.nout);
    db_prompt_set_free(&c.ps);
    db_session_close(&c.s);
    return rc;
}
