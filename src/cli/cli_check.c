/* cli_check.c — `dflash-bench check-lossless`: every variant the drafter can run, greedily, at
 * each block size, against `ar` on a prompt set, token for token. Runs in deterministic
 * (batch-invariant) mode, where the identity must hold exactly: the first differing token fails
 * the check (exit 1) naming variant, block size, prompt and position. Then it measures how often
 * the fast default mode (batch-shape dependent reductions) differs, and reports that share. */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "model/decode.h"
#include "engine/engine.h"
#include "engine/session.h"
#include "base/parse.h"
#include "base/paths.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n;
    int **ids;
    int *len;
} prompt_set;

static void prompts_free(prompt_set *ps)
{
    for (int i = 0; i < ps->n; i++) free(ps->ids[i]);
    free(ps->ids);
    free(ps->len);
    memset(ps, 0, sizeof *ps);
}

/* one prompt of token ids per non-empty line */
static int prompts_from_file(prompt_set *ps, const char *path, char *err, size_t errlen)
{
    char *txt;
    int rc = db_read_file(path, &txt, NULL, err, errlen);
    if (rc) return rc;
    int cap = 0, line = 0;
    for (char *save = NULL, *l = strtok_r(txt, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line++;
        int *ids, n;
        if (db_parse_ids(l, &ids, &n, err, errlen) != 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", err);
            rc = db_fail(err, errlen, DB_EINPUT, "%s:%d: %s", path, line, why);
            break;
        }
        if (n == 0) {
            free(ids);
            continue;
        }
        if (ps->n == cap) {
            cap = cap ? cap * 2 : 16;
            ps->ids = realloc(ps->ids, sizeof(int *) * (size_t)cap);
            ps->len = realloc(ps->len, sizeof(int) * (size_t)cap);
        }
        ps->ids[ps->n] = ids;
        ps->len[ps->n++] = n;
    }
    free(txt);
    if (!rc && ps->n == 0) rc = db_fail(err, errlen, DB_EINPUT, "%s: no prompts", path);
    return rc;
}

static void prompts_random(prompt_set *ps, int n, int vocab, uint64_t seed)
{
    db_rng rng;
    db_rng_seed(&rng, seed);
    ps->n = n;
    ps->ids = calloc((size_t)n, sizeof(int *));
    ps->len = calloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        ps->len[i] = 4 + (int)(db_rng_next(&rng) % 13);
        ps->ids[i] = malloc(sizeof(int) * (size_t)ps->len[i]);
        for (int j = 0; j < ps->len[i]; j++) ps->ids[i][j] = (int)(db_rng_next(&rng) % (uint64_t)vocab);
    }
}

/* run every prompt; outputs into out[i] */
static int run_all(db_session *s, const db_gen_params *p, int conc, const prompt_set *ps, int **out,
                   int *nout, char *err, size_t errlen)
{
    int maxp = 0;
    for (int i = 0; i < ps->n; i++) maxp = ps->len[i] > maxp ? ps->len[i] : maxp;
    db_engine *e;
    int rc = db_engine_create(&e, &s->target, s->has_drafter ? &s->drafter : NULL, p, conc, maxp, err, errlen);
    if (rc) return rc;
    db_request *r = calloc((size_t)ps->n, sizeof *r);
    for (int i = 0; i < ps->n; i++) r[i] = (db_request){.prompt = ps->ids[i], .n_prompt = ps->len[i], .out = out[i]};
    rc = db_engine_run(e, r, ps->n, db_now(), NULL, NULL, err, errlen);
    for (int i = 0; i < ps->n; i++) nout[i] = r[i].n_out;
    free(r);
    db_engine_destroy(e);
    return rc;
}

/* index of the first prompt whose output differs, -1 if none; *pos = first differing position */
static int first_diff(const prompt_set *ps, int **a, const int *na, int **b, const int *nb, int *pos)
{
    for (int i = 0; i < ps->n; i++) {
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

int db_cmd_check_lossless(int argc, char **argv, char *err, size_t errlen)
{
    const char *target_dir = NULL, *drafter_dir = NULL, *prompts_file = NULL, *backend = "cpu",
               *blocks_text = NULL;
    int n_random = 20, max_new = 48, conc = 4, threads = 0, help = 0, plant = 0, seed = 0;
    const db_opt opts[] = {
        {"target", 't', "DIR", "target checkpoint directory", NULL, DB_OPT_STR, &target_dir},
        {"drafter", 'd', "DIR", "drafter directory", NULL, DB_OPT_STR, &drafter_dir},
        {"prompt-ids-file", 0, "FILE", "one prompt of token ids per line (default: random prompts)", NULL, DB_OPT_STR, &prompts_file},
        {"random-prompts", 0, "N", "number of seeded random prompts when no file (default 20)", NULL, DB_OPT_INT, &n_random},
        {"block-size", 'B', "LIST", "block sizes, comma list (default: 4,8 and the drafter's)", NULL, DB_OPT_STR, &blocks_text},
        {"max-new-tokens", 'n', "N", "tokens per prompt (default 48)", NULL, DB_OPT_INT, &max_new},
        {"concurrency", 'c', "N", "requests batched per cycle (default 4)", NULL, DB_OPT_INT, &conc},
        {"seed", 's', "N", "seed of the random prompts (default 0)", NULL, DB_OPT_INT, &seed},
        {"backend", 'b', "NAME", "compute backend (default cpu)", NULL, DB_OPT_STR, &backend},
        {"threads", 0, "N", "CPU threads (default: all cores)", NULL, DB_OPT_INT, &threads},
        {"debug-plant-mismatch", 0, "N", "testing: corrupt the N-th token of prompt 0 in every speculative variant", NULL, DB_OPT_INT, &plant},
    };
    const db_cmd_opts cmd = {"check-lossless",
                             "Greedy output of every variant == ar, token for token (exit 1 on the first difference).",
                             opts, (int)(sizeof opts / sizeof *opts), NULL};
    int rc = db_opts_parse(&cmd, argc, argv, &help, err, errlen);
    if (rc || help) return rc;
    if (!target_dir || !drafter_dir) return db_fail(err, errlen, DB_EINPUT, "--target DIR and --drafter DIR are required");
    char tbuf[1024], dbuf[1024]; /* models/... from any directory (base/paths.h) */
    target_dir = db_data_find(target_dir, tbuf, sizeof tbuf), drafter_dir = db_data_find(drafter_dir, dbuf, sizeof dbuf);
    if (conc < 1 || max_new < 1 || n_random < 1)
        return db_fail(err, errlen, DB_EINPUT, "--concurrency, --max-new-tokens and --random-prompts must be >= 1");
    int blocks[DB_LIST_MAX], nblocks = 0;
    if (blocks_text && (rc = db_parse_int_list("--block-size", blocks_text, 2, DB_MAX_BLOCK, blocks, &nblocks, err, errlen)))
        return rc;
    db_session s;
    db_session_opts so = {backend, target_dir, drafter_dir, threads, 1, NULL};
    if ((rc = db_session_open(&s, &so, err, errlen))) return rc;
    int Bmax = s.drafter.cfg.block_size;
    if (!blocks_text) {
        int dflt[3] = {4, 8, Bmax};
        for (int i = 0; i < 3; i++)
            if (dflt[i] <= Bmax && (nblocks == 0 || blocks[nblocks - 1] < dflt[i])) blocks[nblocks++] = dflt[i];
    }
    for (int i = 0; i < nblocks && !rc; i++)
        if (blocks[i] < 2 || blocks[i] > Bmax)
            rc = db_fail(err, errlen, DB_EINPUT, "block size %d outside 2..%d (%s)", blocks[i], Bmax, s.drafter.cfg.base.path);
    prompt_set ps = {0};
    if (!rc && prompts_file) rc = prompts_from_file(&ps, prompts_file, err, errlen);
    else if (!rc) prompts_random(&ps, n_random, s.target.cfg.vocab, (uint64_t)seed);
    for (int i = 0; i < ps.n && !rc; i++) rc = db_session_check_ids(&s, ps.ids[i], ps.len[i], err, errlen);
    int **ref = calloc((size_t)ps.n, sizeof(int *)), **out = calloc((size_t)ps.n, sizeof(int *));
    int *nref = calloc((size_t)ps.n, sizeof(int)), *nout = calloc((size_t)ps.n, sizeof(int));
    for (int i = 0; i < ps.n; i++) {
        ref[i] = malloc(sizeof(int) * (size_t)max_new);
        out[i] = malloc(sizeof(int) * (size_t)max_new);
    }
    db_gen_params p = {.variant = DB_VAR_AR, .block_size = 1, .top_p = 1.0f, .max_new_tokens = max_new,
                       .debug_plant_mismatch = plant};
    for (int mode = 1; mode >= 0 && !rc; mode--) { /* 1: deterministic (the check), 0: fast */
        s.be->deterministic = mode;
        p.variant = DB_VAR_AR;
        p.block_size = 1;
        if ((rc = run_all(&s, &p, conc, &ps, ref, nref, err, errlen))) break;
        int runs = 0, differing = 0;
        for (int v = DB_VAR_DFLASH; v < DB_VAR_COUNT && !rc; v++) {
            if (db_variant_check((db_variant)v, &s.drafter, err, errlen) != 0) continue;
            for (int bi = 0; bi < nblocks && !rc; bi++) {
                p.variant = (db_variant)v;
                p.block_size = blocks[bi];
                if ((rc = run_all(&s, &p, conc, &ps, out, nout, err, errlen))) break;
                int pos, bad = first_diff(&ps, out, nout, ref, nref, &pos);
                runs++;
                if (mode == 1 && bad >= 0) {
                    rc = db_fail(err, errlen, DB_ERUNTIME,
                                 "NOT lossless: variant %s, block %d: prompt %d differs at output position %d (ar %d, %s %d)",
                                 db_variant_name((db_variant)v), blocks[bi], bad, pos,
                                 pos < nref[bad] ? ref[bad][pos] : -1, db_variant_name((db_variant)v),
                                 pos < nout[bad] ? out[bad][pos] : -1);
                } else if (mode == 1) {
                    printf("ok  %-12s B=%-3d %d prompts x %d tokens identical to ar\n",
                           db_variant_name((db_variant)v), blocks[bi], ps.n, max_new);
                } else {
                    for (int i = 0; i < ps.n; i++) {
                        int pp, one = first_diff(&(prompt_set){1, &ps.ids[i], &ps.len[i]}, &out[i], &nout[i], &ref[i], &nref[i], &pp);
                        differing += one >= 0;
                    }
                }
            }
        }
        if (!rc && mode == 0)
            printf("fast mode (batch-shape dependent reductions): %d of %d prompt runs differ from fast-mode ar (%.1f%%)\n",
                   differing, runs * ps.n, runs ? 100.0 * differing / (runs * ps.n) : 0.0);
    }
    if (!rc) printf("lossless: every variant == ar in deterministic mode\n");
    for (int i = 0; i < ps.n; i++) free(ref[i]), free(out[i]);
    free(ref), free(out), free(nref), free(nout);
    prompts_free(&ps);
    db_session_close(&s);
    return rc;
}
