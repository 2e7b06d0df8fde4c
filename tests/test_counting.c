/* test_counting.c — the engine's counting rules (engine.h) on a small sweep of the fixture pair,
 * with requests that end by EOS and by max_new_tokens inside a block:
 *   - recomputed independently from the per-cycle trace (anchor position, verified accepted
 *     count) and the final outputs: cycles, tokens per cycle (a + 1, cut at the request's end),
 *     the histogram, and per position drafted / reached / accepted, censored where the output
 *     has no token (position i of a cycle counts iff base + i - 1 < n_out);
 *   - the invariant: histogram tokens (sum of L * cycles at L) + one prefill token per request
 *     == output tokens, on every point (`ar` included: each decode step is a cycle of one token).
 * The EOS token is chosen as a token the greedy output holds in its middle, so EOS stops requests
 * mid-block; greedy is lossless, so every variant stops at the same place. */
#include "engine/engine.h"
#include "model/model_test.h"
#include "tap.h"
#include "test_util.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NREQ 6
#define MAXC 4096

typedef struct {
    int n;
    int req[MAXC], pos[MAXC], acc[MAXC];
} trace;

static void on_cycle(void *user, int req, int pos, const int *block, int b, int a, int bonus)
{
    (void)block, (void)b, (void)bonus;
    trace *t = user;
    if (t->n < MAXC) t->req[t->n] = req, t->pos[t->n] = pos, t->acc[t->n++] = a;
}

/* the counts the rules give for this run, from the trace and the outputs alone */
static void expected(const trace *tr, const db_request *r, int n, int B, int drafting, db_req_stats *x)
{
    memset(x, 0, sizeof *x);
    for (int q = 0; q < n; q++) {
        x->output_tokens += r[q].n_out;
        if (!drafting) { /* ar: every token after the prefill's is one decode step */
            x->cycles += r[q].n_out - 1;
            x->cycle_tokens += r[q].n_out - 1;
            x->hist[1] += r[q].n_out - 1;
        }
    }
    for (int c = 0; c < tr->n; c++) {
        const db_request *q = &r[tr->req[c]];
        int base = tr->pos[c] - q->n_prompt + 1, avail = q->n_out - base, a = tr->acc[c];
        int took = a + 1 < avail ? a + 1 : avail;
        x->cycles++;
        x->cycle_tokens += took;
        x->hist[took]++;
        for (int i = 1; i < B && i <= avail; i++) {
            x->drafted[i]++;
            x->reached[i] += i <= a + 1;
            x->accepted[i] += i <= a;
        }
    }
}

static int same_counts(const db_req_stats *a, const db_req_stats *b, char *why, size_t n)
{
    if (a->cycles != b->cycles || a->cycle_tokens != b->cycle_tokens || a->output_tokens != b->output_tokens) {
        snprintf(why, n, "cycles %d/%d, cycle tokens %d/%d, output %d/%d", a->cycles, b->cycles,
                 a->cycle_tokens, b->cycle_tokens, a->output_tokens, b->output_tokens);
        return 0;
    }
    for (int i = 0; i < DB_MAX_BLOCK; i++)
        if (a->drafted[i] != b->drafted[i] || a->reached[i] != b->reached[i] || a->accepted[i] != b->accepted[i] ||
            a->hist[i] != b->hist[i]) {
            snprintf(why, n, "index %d: drafted %ld/%ld reached %ld/%ld accepted %ld/%ld hist %ld/%ld", i,
                     a->drafted[i], b->drafted[i], a->reached[i], b->reached[i], a->accepted[i],
                     b->accepted[i], a->hist[i], b->hist[i]);
            return 0;
        }
    return 1;
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    char err[512];
    db_backend *be;
    db_backend_opts bo = {.threads = 1, .deterministic = 1};
    db_target t;
    db_drafter d;
    if (db_backend_create("cpu", &bo, &be, err, sizeof err) ||
        db_target_load(&t, be, tu_data("qwen3-f32-tied"), err, sizeof err) ||
        db_drafter_load(&d, be, tu_data("dflash2-f32"), &t, err, sizeof err)) {
        tap_ok(0, "load the fixture pair: %s", err);
        return tap_done();
    }
    int prompts[NREQ][8], lens[NREQ], *out = malloc(sizeof(int) * NREQ * 64);
    db_rng rng;
    db_rng_seed(&rng, 5);
    for (int q = 0; q < NREQ; q++) {
        lens[q] = 3 + q % 4;
        for (int j = 0; j < lens[q]; j++) prompts[q][j] = (int)(db_rng_next(&rng) % (uint64_t)t.cfg.vocab);
    }
    db_request r[NREQ];
    trace *tr = calloc(1, sizeof *tr);
    /* EOS: the token in the middle of request 0's greedy output */
    db_gen_params p0 = {.variant = DB_VAR_AR, .block_size = 1, .top_p = 1, .max_new_tokens = 24, .ignore_eos = 1};
    db_engine *e = NULL;
    for (int q = 0; q < NREQ; q++) r[q] = (db_request){.prompt = prompts[q], .n_prompt = lens[q], .out = out + 64 * q};
    int rc = db_engine_create(&e, &t, NULL, &p0, 2, 8, err, sizeof err);
    if (!rc) rc = db_engine_run(e, r, NREQ, db_now(), NULL, NULL, err, sizeof err);
    db_engine_destroy(e);
    if (rc || r[0].n_out < 24) {
        tap_ok(0, "greedy run to choose an EOS: %s", err);
        return tap_done();
    }
    t.cfg.eos[0] = r[0].out[9];
    t.cfg.n_eos = 1;
    tap_diag("EOS for this test: token %d", t.cfg.eos[0]);

    const db_variant vars[3] = {DB_VAR_AR, DB_VAR_SELECTOR_OFF, DB_VAR_DFLASH2};
    const int blocks[2] = {4, 8}, lengths[3] = {5, 13, 24};
    int points = 0, bad = 0, by_eos = 0, capped = 0;
    for (int vi = 0; vi < 3; vi++)
        for (int bi = 0; bi < (vars[vi] == DB_VAR_AR ? 1 : 2); bi++)
            for (int li = 0; li < 3; li++) {
                int B = vars[vi] == DB_VAR_AR ? 1 : blocks[bi], max_new = lengths[li];
                memset(tr, 0, sizeof *tr);
                db_gen_params p = {.variant = vars[vi], .block_size = B, .top_p = 1, .max_new_tokens = max_new,
                                   .on_cycle = on_cycle, .on_cycle_user = tr};
                for (int q = 0; q < NREQ; q++)
                    r[q] = (db_request){.prompt = prompts[q], .n_prompt = lens[q], .out = out + 64 * q};
                rc = db_engine_create(&e, &t, &d, &p, 3, 8, err, sizeof err);
                if (!rc) rc = db_engine_run(e, r, NREQ, db_now(), NULL, NULL, err, sizeof err);
                db_engine_destroy(e);
                db_req_stats got, want;
                memset(&got, 0, sizeof got);
                for (int q = 0; q < NREQ && !rc; q++) {
                    db_req_stats_add(&got, &r[q].st);
                    by_eos += r[q].st.finished_by_eos && r[q].n_out < max_new;
                    capped += !r[q].st.finished_by_eos && r[q].n_out == max_new;
                }
                expected(tr, r, NREQ, B, vars[vi] != DB_VAR_AR, &want);
                long hist_tokens = 0;
                for (int L = 1; L <= DB_MAX_BLOCK; L++) hist_tokens += L * got.hist[L];
                char why[256] = "";
                int ok = !rc && same_counts(&got, &want, why, sizeof why) &&
                         hist_tokens + NREQ == got.output_tokens;
                if (!ok) tap_diag("%s B=%d n=%d: %s%s (histogram tokens %ld + %d prefills, output %d)",
                                  db_variant_name(vars[vi]), B, max_new, rc ? err : "", why, hist_tokens, NREQ,
                                  got.output_tokens);
                bad += !ok;
                points++;
            }
    tap_ok(bad == 0 && by_eos > 0 && capped > 0,
           "%d points (%d requests ended by EOS, %d by max_new_tokens): counts == the rules recomputed from the "
           "trace, histogram tokens + prefill tokens == output tokens on every point (%d differ)",
           points, by_eos, capped, bad);
    free(tr);
    free(out);
    db_drafter_free(&d);
    db_target_free(&t);
    db_backend_destroy(be);
    return tap_done();
}
