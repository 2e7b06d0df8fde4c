/* test_runner.c — the measurement procedure (bench/runner.h) on the embedded pair: the random
 * prompt generator (per-prompt streams, lengths, range), the rotated rounds (round r starts at
 * point r mod P, from the passes' start times), warm-up kept out of the samples, a stop before
 * the next pass, multi-turn passes against a by-hand reconstruction of the second turn's prompt,
 * and greedy speculative passes == ar token for token. */
#include "bench/prompt_set.h"
#include "bench/runner.h"
#include "result/timing.h"
#include "engine/session.h"
#include "tap.h"
#include "text/prompt.h"
#include "base/util.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char err[512];
static char target_dir[1024], drafter_dir[1024];

static void random_prompts(void)
{
    db_prompt_set a, b, c;
    int ok = db_prompt_set_random(&a, "r", 5, 7, 7, 100, 3, err, sizeof err) == 0 &&
             db_prompt_set_random(&b, "r", 9, 7, 7, 100, 3, err, sizeof err) == 0 &&
             db_prompt_set_random(&c, "r", 40, 4, 16, 50, 3, err, sizeof err) == 0;
    tap_ok(ok, "random prompt sets made (%s)", ok ? "" : err);
    if (!ok) return;
    int prefix = a.ds.n == 5 && b.ds.n == 9;
    for (int j = 0; j < 5 && prefix; j++)
        prefix = a.len[j] == 7 && b.len[j] == 7 && memcmp(a.ids[j], b.ids[j], 7 * sizeof(int)) == 0;
    tap_ok(prefix, "prompt j is the same whatever the number of prompts (its own stream)");
    int differ = memcmp(a.ids[0], a.ids[1], 7 * sizeof(int)) != 0;
    tap_ok(differ, "two prompts of one set differ");
    int in_range = 1, lmin = 99, lmax = 0;
    for (int j = 0; j < c.ds.n; j++) {
        lmin = c.len[j] < lmin ? c.len[j] : lmin;
        lmax = c.len[j] > lmax ? c.len[j] : lmax;
        for (int t = 0; t < c.len[j]; t++) in_range &= c.ids[j][t] >= 0 && c.ids[j][t] < 50;
    }
    tap_ok(in_range && lmin >= 4 && lmax <= 16 && lmax > lmin, "lengths in [4, 16] (%d..%d), ids in [0, 50)", lmin, lmax);
    tap_ok(db_prompt_set_turns(&c) == 40 && db_prompt_set_max_turns(&c) == 1 && db_prompt_set_max_len(&c) == lmax,
           "a random set: one turn per prompt");
    db_prompt_set bad;
    tap_ok(db_prompt_set_random(&bad, "r", 2, 5, 4, 10, 0, err, sizeof err) == DB_EINPUT, "len_max < len refused: %s", err);
    db_prompt_set_free(&a), db_prompt_set_free(&b), db_prompt_set_free(&c);
}

static int open_session(db_session *s)
{
    db_session_opts o = {"cpu", target_dir, drafter_dir, 1, 1, NULL};
    int rc = db_session_open(s, &o, err, sizeof err);
    if (rc) tap_diag("open %s: %s", target_dir, err);
    return rc;
}

/* P points, R rounds: each round's passes start in the rotated order */
static int passes;
static int count_pass(void *user, char *e, size_t n)
{
    (void)user, (void)e, (void)n;
    passes++;
    return DB_OK;
}

static void rounds(db_session *s)
{
    db_prompt_set ps;
    if (db_prompt_set_random(&ps, "synthetic", 3, 12, 12, s->target.cfg.vocab, 1, err, sizeof err)) {
        tap_ok(0, "prompts: %s", err);
        return;
    }
    enum { P = 3, R = 4 };
    db_run_point pts[P];
    db_variant vs[P] = {DB_VAR_AR, DB_VAR_DFLASH2, DB_VAR_SELECTOR_OFF};
    for (int j = 0; j < P; j++)
        pts[j] = (db_run_point){.p = {.variant = vs[j], .block_size = vs[j] == DB_VAR_AR ? 1 : 4, .top_p = 1,
                                      .max_new_tokens = 6, .ignore_eos = 1},
                                .drafter = vs[j] == DB_VAR_AR ? NULL : &s->drafter, .ps = &ps, .concurrency = 2};
    db_runner r = {.be = s->be, .target = &s->target, .warmup = 2, .repetitions = R, .after_pass = count_pass,
                   .t_origin = -1};
    db_point_raw raw[P] = {{.key = {.block_size = 1}}, {.key = {.block_size = 4}}, {.key = {.block_size = 4}}};
    passes = 0;
    int rc = db_runner_group(&r, pts, raw, P, err, sizeof err);
    tap_ok(rc == 0, "a group of %d points x %d rounds ran (%s)", P, R, rc ? err : "");
    if (rc) {
        db_prompt_set_free(&ps);
        return;
    }
    tap_ok(passes == P * R, "after_pass once per timed pass, not for warm-ups (%d)", passes);
    int rotated = 1;
    for (int k = 0; k < R; k++)
        for (int j = 1; j < P; j++) {
            int prev = (j - 1 + k) % P, q = (j + k) % P;
            rotated &= raw[q].rep_start_s[k] > raw[prev].rep_start_s[k];
        }
    tap_ok(rotated, "round r runs the points starting at point r mod P");
    int keys_kept = raw[0].key.block_size == 1 && raw[1].key.block_size == 4, counts = 1;
    for (int j = 0; j < P; j++) {
        counts &= raw[j].n_prompts == 3 && raw[j].repetitions == R;
        for (int i = 0; i < R * 3; i++) counts &= raw[j].reqs[i].output_tokens == 6 && raw[j].wall_s[i / 3] > 0;
    }
    tap_ok(keys_kept && counts, "every point: R x 3 requests of 6 tokens, wall times, keys as given");
    int ar_tau = 1;
    for (int i = 0; i < R * 3; i++) ar_tau &= raw[0].reqs[i].cycles == 5 && raw[0].reqs[i].cycle_tokens == 5;
    tap_ok(ar_tau, "ar: one token per step after the prefill's");
    for (int j = 0; j < P; j++) db_point_raw_free(&raw[j]);

    static volatile sig_atomic_t stop = SIGTERM;
    r.stop = &stop;
    passes = 0;
    rc = db_runner_group(&r, pts, raw, P, err, sizeof err);
    int freed = raw[0].reqs == NULL && raw[1].wall_s == NULL && raw[2].rep_start_s == NULL;
    tap_ok(rc == DB_ESIGNAL(SIGTERM) && passes == 0 && freed, "a stop: DB_ESIGNAL before the first timed pass, nothing kept");
    db_prompt_set_free(&ps);
}

/* c = 32 over 8 prompts: 4c requests per pass (prompts reused), 32 in flight; the warm-up
 * calibrates the pass to min_time; rounds between repetitions and max_rounds */
static void in_flight(db_session *s)
{
    db_prompt_set ps;
    if (db_prompt_set_random(&ps, "synthetic", 8, 12, 12, s->target.cfg.vocab, 1, err, sizeof err)) {
        tap_ok(0, "prompts: %s", err);
        return;
    }
    db_run_point pt = {.p = {.variant = DB_VAR_AR, .block_size = 1, .top_p = 1, .max_new_tokens = 8, .ignore_eos = 1},
                       .ps = &ps, .concurrency = 32};
    db_runner r = {.be = s->be, .target = &s->target, .warmup = 1, .repetitions = 2, .max_rounds = 3,
                   .waves = DB_RUNNER_WAVES, .t_origin = -1};
    db_point_raw raw = {.key = {.concurrency = 32}};
    int rc = db_runner_group(&r, &pt, &raw, 1, err, sizeof err);
    tap_ok(rc == 0, "c32 over 8 prompts ran (%s)", rc ? err : "");
    if (!rc) {
        double mean;
        int max;
        db_in_flight(&raw, &mean, &max);
        tap_ok(raw.n_prompts == DB_RUNNER_WAVES * 32 && raw.n_distinct == 8, "%d requests per pass of %d distinct prompts",
               raw.n_prompts, raw.n_distinct);
        tap_ok(mean >= DB_IN_FLIGHT_MIN * 32 && max == 32, "mean in flight %.2f >= 0.9 c, max %d", mean, max);
        tap_ok(raw.repetitions >= 2 && raw.repetitions <= 3, "%d rounds, within [repetitions, max_rounds]", raw.repetitions);
        int same = 1; /* request q is prompt q mod 8: its prompt tokens */
        for (int q = 8; q < raw.n_prompts; q++) same &= raw.reqs[q].prompt_tokens == raw.reqs[q % 8].prompt_tokens;
        tap_ok(same, "prompts reused in order");
        double one = raw.wall_s[0];
        db_point_raw_free(&raw);
        r.min_time = 4 * one; /* the calibrated pass: a multiple of the uncalibrated one, about min_time */
        rc = db_runner_group(&r, &pt, &raw, 1, err, sizeof err);
        tap_ok(rc == 0 && raw.n_prompts > DB_RUNNER_WAVES * 32 && raw.n_prompts % (DB_RUNNER_WAVES * 32) == 0 &&
                   raw.wall_s[0] > 1.5 * one,
               "min_time %.3fs: %d requests per pass, %.3fs", r.min_time, raw.n_prompts, rc ? 0 : raw.wall_s[0]);
    }
    db_point_raw_free(&raw);
    db_prompt_set_free(&ps);
}

/* greedy dflash2 through db_runner_pass == ar, token for token */
static void lossless(db_session *s)
{
    db_prompt_set ps;
    if (db_prompt_set_random(&ps, "random", 4, 4, 16, s->target.cfg.vocab, 7, err, sizeof err)) {
        tap_ok(0, "prompts: %s", err);
        return;
    }
    int out[2][4][24];
    db_request req[2][4];
    for (int v = 0; v < 2; v++) {
        db_gen_params p = {.variant = v ? DB_VAR_DFLASH2 : DB_VAR_AR, .block_size = v ? 8 : 1, .top_p = 1,
                           .max_new_tokens = 24};
        for (int i = 0; i < 4; i++) req[v][i] = (db_request){.prompt = ps.ids[i], .n_prompt = ps.len[i], .out = out[v][i]};
        double t0 = -1, secs = 0;
        int rc = db_runner_pass(&s->target, v ? &s->drafter : NULL, &p, 2, req[v], 4, &t0, &secs, err, sizeof err);
        tap_ok(rc == 0 && secs > 0 && t0 > 0, "%s pass over 4 prompts at concurrency 2 (%s)", v ? "dflash2" : "ar", rc ? err : "");
    }
    int same = 1;
    for (int i = 0; i < 4; i++)
        same &= req[0][i].n_out == req[1][i].n_out && memcmp(out[0][i], out[1][i], sizeof(int) * req[0][i].n_out) == 0;
    tap_ok(same, "greedy dflash2 == ar token for token");
    db_prompt_set_free(&ps);
}

/* a two-turn sample: the second turn's request carries the first answer, as rendered by hand */
static void multi_turn(db_session *s)
{
    db_tokenizer tok;
    if (db_prompt_tokenizer_load(&tok, target_dir, err, sizeof err)) {
        tap_ok(0, "tokenizer: %s", err);
        return;
    }
    db_prompt_set ps;
    int rc = db_prompt_set_dataset(&ps, "chat", 2, 0, &tok, DB_CHAT_CHATML, 0, s->target.cfg.vocab, target_dir, err,
                                   sizeof err);
    tap_ok(rc == 0 && ps.ds.n == 2 && db_prompt_set_max_turns(&ps) == 2, "chat: two samples of two turns (%s)", rc ? err : "");
    if (rc) {
        db_tokenizer_free(&tok);
        return;
    }
    db_gen_params p = {.variant = DB_VAR_AR, .block_size = 1, .top_p = 1, .max_new_tokens = 10};
    db_run_point pt = {.p = p, .ps = &ps, .concurrency = 2};
    db_runner r = {.be = s->be, .target = &s->target, .tok = &tok, .tmpl = DB_CHAT_CHATML, .warmup = 0,
                   .repetitions = 1, .t_origin = -1};
    db_point_raw raw = {0};
    rc = db_runner_group(&r, &pt, &raw, 1, err, sizeof err);
    tap_ok(rc == 0 && raw.n_prompts == 4, "one timed pass: 4 requests (2 samples x 2 turns) (%s)", rc ? err : "");
    /* by hand: sample 0's first turn, its answer decoded, the second turn rendered with it */
    int out[10], *ids2 = NULL, n2 = 0, match = 0;
    db_request q = {.prompt = ps.ids[0], .n_prompt = ps.len[0], .out = out};
    double t0 = -1;
    if (!rc && db_runner_pass(&s->target, NULL, &p, 1, &q, 1, &t0, NULL, err, sizeof err) == 0) {
        char *text;
        size_t tl;
        if (db_tokenizer_decode(&tok, out, q.n_out, 1, &text, &tl, err, sizeof err) == 0) {
            const char *answers[2] = {text, NULL};
            if (db_prompt_render(&tok, DB_CHAT_CHATML, 0, &ps.ds.samples[0], 1, answers, &ids2, &n2, err, sizeof err) == 0)
                match = raw.reqs[0].prompt_tokens == ps.len[0] && raw.reqs[2].prompt_tokens == n2 && n2 > ps.len[0] + q.n_out;
            free(text);
        }
    }
    tap_ok(match, "turn 2's prompt = the conversation with turn 1's decoded answer (%d tokens)", n2);
    free(ids2);
    db_point_raw_free(&raw);
    db_prompt_set_free(&ps);
    db_tokenizer_free(&tok);
}

/* run --depth: the context before a prompt. Text: the other samples' first turns as plain text
 * (each encoded with a blank line after it), from the next sample on, cut at the depth; then the
 * prompt as before. A later turn carries the same context. Random ids: a stream of their own,
 * the same whatever the set's size. */
static void depth_prompts(db_session *s)
{
    db_tokenizer tok;
    if (db_prompt_tokenizer_load(&tok, target_dir, err, sizeof err)) {
        tap_ok(0, "tokenizer: %s", err);
        return;
    }
    const int D = 300, V = s->target.cfg.vocab;
    db_prompt_set plain, deep;
    int rc = db_prompt_set_dataset(&plain, "chat", 3, 0, &tok, DB_CHAT_CHATML, 0, V, target_dir, err, sizeof err);
    rc = rc ? rc : db_prompt_set_dataset(&deep, "chat", 3, 0, &tok, DB_CHAT_CHATML, 0, V, target_dir, err, sizeof err);
    rc = rc ? rc : db_prompt_set_depth(&deep, D, &tok, V, 0, err, sizeof err);
    tap_ok(rc == 0 && deep.depth == D, "chat at depth %d (%s)", D, rc ? err : "");
    if (rc) {
        db_tokenizer_free(&tok);
        return;
    }
    /* the expected context of sample j, built here from the samples' texts */
    int same = 1;
    for (int j = 0; j < 3; j++) {
        int want[D], t = 0;
        for (int k = (j + 1) % 3; t < D; k = (k + 1) % 3 == j ? (j + 1) % 3 : (k + 1) % 3) {
            char text[4096];
            int *ids, n;
            snprintf(text, sizeof text, "%s\n\n", deep.ds.samples[k].turns[0]);
            if (db_tokenizer_encode(&tok, text, strlen(text), 0, &ids, &n, err, sizeof err)) break;
            for (int i = 0; i < n && t < D; i++) want[t++] = ids[i];
            free(ids);
        }
        same &= t == D && deep.len[j] == D + plain.len[j] && !memcmp(deep.ids[j], want, sizeof want) &&
                !memcmp(deep.ids[j] + D, plain.ids[j], sizeof(int) * (size_t)plain.len[j]);
    }
    tap_ok(same, "ids = the other samples' text (next first, wrapping), cut at %d, then the prompt unchanged", D);
    /* a later turn: the context, then the conversation as at depth 0 */
    db_gen_params p = {.variant = DB_VAR_AR, .block_size = 1, .top_p = 1, .max_new_tokens = 6};
    db_runner r = {.be = s->be, .target = &s->target, .tok = &tok, .tmpl = DB_CHAT_CHATML, .repetitions = 1, .t_origin = -1};
    db_run_point a = {.p = p, .ps = &plain, .concurrency = 3}, b = {.p = p, .ps = &deep, .concurrency = 3};
    db_point_raw ra = {0}, rb = {0};
    rc = db_runner_group(&r, &a, &ra, 1, err, sizeof err);
    rc = rc ? rc : db_runner_group(&r, &b, &rb, 1, err, sizeof err);
    int turns = 0, later = 0, first_min = plain.len[0];
    for (int j = 1; j < 3; j++) first_min = plain.len[j] < first_min ? plain.len[j] : first_min;
    for (int i = 0; !rc && i < rb.n_prompts; i++) {
        turns += rb.reqs[i].turn > 0;
        /* the answers differ at another context: a later turn's prompt holds the context and
         * more than a first turn */
        later += rb.reqs[i].turn > 0 && rb.reqs[i].prompt_tokens > D + first_min;
    }
    tap_ok(rc == 0 && turns > 0 && later == turns && rb.reqs[0].prompt_tokens == ra.reqs[0].prompt_tokens + D,
           "first turns %d tokens longer; %d later turns carry the context (%s)", D, turns, rc ? err : "");
    db_point_raw_free(&ra), db_point_raw_free(&rb);
    /* random ids: the prompts unchanged, the context its own stream, the same for any n */
    db_prompt_set x, y, z;
    rc = db_prompt_set_random(&x, "synthetic-8", 2, 8, 8, V, 5, err, sizeof err);
    rc = rc ? rc : db_prompt_set_random(&y, "synthetic-8", 4, 8, 8, V, 5, err, sizeof err);
    rc = rc ? rc : db_prompt_set_random(&z, "synthetic-8", 4, 8, 8, V, 5, err, sizeof err);
    rc = rc ? rc : db_prompt_set_depth(&x, 50, NULL, V, 5, err, sizeof err);
    rc = rc ? rc : db_prompt_set_depth(&y, 50, NULL, V, 5, err, sizeof err);
    int rnd = rc == 0;
    for (int j = 0; rnd && j < 2; j++)
        rnd = x.len[j] == 58 && !memcmp(x.ids[j], y.ids[j], sizeof(int) * 58) && !memcmp(x.ids[j] + 50, z.ids[j], sizeof(int) * 8);
    int differ = rnd && memcmp(x.ids[0], x.ids[1], sizeof(int) * 50) != 0;
    tap_ok(rnd && differ, "random ids: 50 of context per prompt, its own per sample, the same whatever n (%s)", rc ? err : "");
    tap_ok(db_prompt_set_depth(&x, 10, NULL, V, 5, err, sizeof err) == DB_EINPUT, "a depth set twice is refused: %s", err);
    db_prompt_set_free(&x), db_prompt_set_free(&y), db_prompt_set_free(&z);
    db_prompt_set_free(&plain), db_prompt_set_free(&deep);
    db_tokenizer_free(&tok);
}

/* the arrival schedule: seeded, sorted, its n-th arrival at n / rate, Poisson-shaped gaps */
static void arrivals(void)
{
    enum { N = 400 };
    static double t[N], u[N], v[N];
    db_runner_arrivals(8, N, 5, t);
    db_runner_arrivals(8, N, 5, u);
    db_runner_arrivals(8, N, 6, v);
    int sorted = t[0] > 0;
    for (int i = 1; i < N; i++) sorted &= t[i] >= t[i - 1];
    tap_ok(sorted && fabs(t[N - 1] - N / 8.0) < 1e-9, "400 arrivals at 8/s: sorted, the last at 50 s (%.9g)", t[N - 1]);
    tap_ok(!memcmp(t, u, sizeof t) && memcmp(t, v, sizeof t), "the same seed, the same schedule; another seed, another");
    double sum = 0, sq = 0;
    for (int i = 1; i < N; i++) sum += t[i] - t[i - 1], sq += (t[i] - t[i - 1]) * (t[i] - t[i - 1]);
    double mean = sum / (N - 1), cv = sqrt((sq - (N - 1) * mean * mean) / (N - 2)) / mean;
    tap_ok(fabs(1 / mean - 8) < 0.8 && cv > 0.85 && cv < 1.15, "measured rate %.3f/s, gaps' CV %.3f (Poisson: 1)", 1 / mean, cv);
    tap_ok(db_runner_closed(INFINITY) && db_runner_closed(0) && db_runner_closed(NAN) && !db_runner_closed(0.5),
           "inf, 0 and NaN are a closed loop; 0.5 is a rate");
    tap_ok(db_runner_rate_requests(8, 4, 4, 0.5) == 104 && db_runner_rate_requests(8, 4, INFINITY, 0.5) == 16 &&
               db_runner_rate_requests(8, 64, 4, 0.5) == 256 && db_runner_rate_requests(3, 2, 1000, 0.5) == 501,
           "arrivals per pass: max(4c, D, 100, rate x min_time) rounded up to D (%d %d %d %d)",
           db_runner_rate_requests(8, 4, 4, 0.5), db_runner_rate_requests(8, 4, INFINITY, 0.5),
           db_runner_rate_requests(8, 64, 4, 0.5), db_runner_rate_requests(3, 2, 1000, 0.5));
}

/* ar and dflash2 at 100 requests/s, at most 2 in flight: one schedule for both, nobody admitted
 * before arriving, the pass no shorter than its schedule, one inter-token latency per cycle */
static void scheduled(db_session *s)
{
    db_prompt_set ps;
    if (db_prompt_set_random(&ps, "synthetic", 3, 12, 12, s->target.cfg.vocab, 1, err, sizeof err)) {
        tap_ok(0, "prompts: %s", err);
        return;
    }
    db_run_point pts[2];
    for (int j = 0; j < 2; j++)
        pts[j] = (db_run_point){.p = {.variant = j ? DB_VAR_DFLASH2 : DB_VAR_AR, .block_size = j ? 4 : 1, .top_p = 1,
                                      .max_new_tokens = 4, .ignore_eos = 1, .seed = 3},
                                .drafter = j ? &s->drafter : NULL, .ps = &ps, .concurrency = 2, .request_rate = 100};
    db_runner r = {.be = s->be, .target = &s->target, .warmup = 0, .repetitions = 1, .waves = DB_RUNNER_WAVES,
                   .t_origin = -1};
    db_point_raw raw[2] = {{.key = {.block_size = 1}}, {.key = {.block_size = 4}}};
    int rc = db_runner_group(&r, pts, raw, 2, err, sizeof err);
    tap_ok(rc == 0 && raw[0].n_prompts == 102 && raw[1].n_prompts == 102, "102 arrivals per pass (%s)", rc ? err : "");
    if (rc) {
        db_prompt_set_free(&ps);
        return;
    }
    int same = 1, waited = 1, inflight = 1;
    long cycles[2] = {0, 0};
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 102; i++) {
            const db_req_stats *q = &raw[j].reqs[i];
            same &= q->scheduled && q->t_arrival == raw[0].reqs[i].t_arrival;
            waited &= q->t_admitted >= q->t_arrival && q->t_first_token >= q->t_admitted;
            cycles[j] += q->cycles;
        }
    for (int j = 0; j < 2; j++) {
        double mean;
        int max;
        db_in_flight(&raw[j], &mean, &max);
        inflight &= max <= 2 && raw[j].wall_s[0] >= raw[j].reqs[101].t_arrival;
    }
    tap_ok(same, "ar and dflash2: the same arrival times");
    tap_ok(waited, "no request admitted before it arrived");
    tap_ok(inflight, "at most 2 in flight; each pass lasts past its last arrival (%.3f s, %.3f s)", raw[0].wall_s[0],
           raw[1].wall_s[0]);
    tap_ok(raw[0].n_itl == (size_t)cycles[0] && raw[1].n_itl == (size_t)cycles[1] && cycles[0] == 3 * 102,
           "one inter-token latency per cycle: ar %zu of %ld, dflash2 %zu of %ld", raw[0].n_itl, cycles[0], raw[1].n_itl,
           cycles[1]);
    double t_last = raw[0].reqs[101].t_arrival - raw[0].reqs[0].t_arrival;
    tap_ok(fabs(101 / t_last - 100) < 10, "measured arrival rate %.2f/s of 100", 101 / t_last);
    for (int j = 0; j < 2; j++) db_point_raw_free(&raw[j]);
    db_prompt_set_free(&ps);
}

int main(void)
{
    const char *root = getenv("DB_SOURCE_ROOT");
    snprintf(target_dir, sizeof target_dir, "%s/models/tiny-qwen3", root ? root : ".");
    snprintf(drafter_dir, sizeof drafter_dir, "%s/models/tiny-qwen3-dflash2-b16", root ? root : ".");
    random_prompts();
    arrivals();
    db_session s;
    if (open_session(&s) == 0) {
        rounds(&s);
        in_flight(&s);
        lossless(&s);
        multi_turn(&s);
        depth_prompts(&s);
        scheduled(&s);
        db_session_close(&s);
    } else {
        tap_ok(0, "the embedded pair opens");
    }
    return tap_done();
}
