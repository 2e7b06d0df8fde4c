/* engine.c — the serving loop and the speculative cycle (see engine.h for the scheduling and
 * counting rules; accept.h for the acceptance rules).
 *
 * Per cycle, for the A active requests (request-major rows, B rows each):
 *   draft   one drafter call over A*B rows; top-k (ids, values) of rows 1..B-1 to the host
 *   select  the selector (selector.h): scoring of every row in one backend call, then the host
 *           walk per request (or scoring and walk in one call on the device path); or the
 *           per-row argmax / sample when the selector is off
 *   correct (dspark instead of select) the DSpark walk (dspark.h): per block position, one
 *           batched correction of every request's row by its previous pick, then the pick
 *           (on the host path: dspark's q rows are host rows)
 *   chain   (eagle3, mtp instead of draft and select) B-1 drafter steps (chain.h), one row per
 *           request each, each fed the previous step's pick; each step's top-k to the host, its
 *           pick the argmax or a draw (sampling: its filtered rows kept as q)
 *   verify  one target call over the A*B rows [anchor, d1..d(B-1)]; argmax (greedy) to the
 *           host; sampling: the filtered distributions stay on the device and the backend's
 *           `accept` op returns a and the bonus per request (the device path), or, on a backend
 *           without the sampling ops, they come to the host (the host path)
 *   commit  acceptance per request, KV truncation, then one drafter call that materializes the
 *           accepted rows' tap features as context
 * Both paths draw the same uniforms from each request's rng in the same order (accept.h), so
 * they pick the same tokens.
 * Notation: A active requests, B block, V vocabulary, k kept top-k width, sk selector top-k. */
#include "engine/engine.h"
#include "engine/accept.h"
#include "engine/engine_test.h"
#include "engine/selector.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* a drafting cycle whose per-position, recall and oracle figures wait for the request's output
 * to reach past its block (or for the request to end: positions past the end are censored) */
typedef struct {
    int base;     /* index in out[] of the token draft position 1 predicts */
    int accepted; /* a, as verified (before any cut at the request's end) */
    int *topk;    /* [(B-1)*k] drafter top-k ids per position */
} pending;

typedef struct {
    int req;   /* request index, -1 when free */
    int anchor;
    db_rng rng;
    db_rng replay_rng; /* acceptance replay draws (their own stream: sampling is unaffected) */
    pending *ring; /* [B] */
    int ring_n;
    double t_last; /* when its request's last tokens were delivered (seconds since t0) */
} slot_state;

struct db_engine {
    db_target *t;
    db_drafter *d;
    db_backend *be;
    db_gen_params p;
    int conc, B, V, k, sk, use_draft, use_conv, use_sel, use_markov, use_chain, sampling, prefill_chunk;
    int dev;                   /* sampling on the device: the backend's sample / accept ops */
    slot_state *slots;
    db_request *reqs;
    int *active, *anchors;     /* [N] */
    int *topk_ids;             /* [N*(B-1)*k] */
    float *topk_vals;          /* [N*(B-1)*k] */
    db_selector sel;           /* when the drafter has a selector */
    int *draft, *targ;         /* [N*B] */
    float *targv;              /* [N*B] greedy: the largest logit of each target row */
    long target_calls;         /* target / drafter calls so far: the step a message names */
    long drafter_calls;
    float *p_host, *q_host;    /* [N*B*V] when sampling on the host path */
    float *q_sel;              /* [N*(B-1)*sk] the selector's q_t at its candidates (device path) */
    double *u;                 /* [N*B] uniforms handed to the sample / accept ops */
    int *acc, *bonus;          /* [N] the accept op's results */
    float *residual;           /* [V] rejection sampling scratch */
    int *mk_prev, *mk_rows;    /* [N] DSpark / chain walk: previous picks, logits rows of a position */
    int *mk_ids;               /* [N*k] DSpark / chain walk: top-k draft ids of a position */
    float *mk_q;               /* [N*Vd] DSpark / chain walk, sampling on the host: the step's distributions */
    struct db_engine_test_hooks hooks; /* all zero outside the tests (engine_test.h) */
    db_row *rows;              /* [max(N*B, chunk)] */
    int *logit_rows;           /* [N*B] */
    int *ctx_slot, *ctx_pos, *ctx_src, *ctx_tok; /* [N*B] */
    float *ctx_feats;          /* device [N*B, T*Ht] */
    int *ring_mem;             /* backing of every slot's ring */
};

/* engine_test.h: copied into each engine at its creation, so the cycle reads only its own copy */
static struct db_engine_test_hooks test_hooks;

void db_engine_set_test_hooks(const struct db_engine_test_hooks *h)
{
    test_hooks = h ? *h : (struct db_engine_test_hooks){0};
}

/* the caller's site goes to the allocation wrapper, so fault injection fails each array */
#define xcalloc(n, sz, fail) xcalloc_at((n), (sz), (fail), DB_SITE)
static void *xcalloc_at(size_t n, size_t sz, int *fail, const char *site)
{
    void *p = db_calloc_at(n ? n : 1, sz, site);
    if (!p) *fail = 1;
    return p;
}

void db_engine_destroy(db_engine *e)
{
    if (!e) return;
    if (e->ctx_feats) e->be->ops->dfree(e->be, e->ctx_feats);
    db_selector_free(&e->sel);
    if (e->slots)
        for (int i = 0; i < e->conc; i++) free(e->slots[i].ring);
    void *bufs[] = {e->slots, e->active, e->anchors, e->topk_ids, e->topk_vals, e->draft,
                    e->targ, e->targv, e->p_host, e->q_host, e->q_sel, e->u, e->acc, e->bonus, e->residual,
                    e->mk_prev, e->mk_rows, e->mk_ids, e->mk_q, e->rows, e->logit_rows,
                    e->ctx_slot, e->ctx_pos, e->ctx_src, e->ctx_tok, e->ring_mem};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(e);
}

int db_engine_create(db_engine **out, db_target *t, db_drafter *d, const db_gen_params *p,
                     int concurrency, int max_prompt, char *err, size_t errlen)
{
    *out = NULL;
    int rc = db_variant_check(p->variant, d, err, errlen);
    if (rc) return rc;
    if (concurrency < 1) return db_fail(err, errlen, DB_EINPUT, "concurrency must be >= 1");
    if (p->max_new_tokens < 1) return db_fail(err, errlen, DB_EINPUT, "max_new_tokens must be >= 1");
    if (p->temperature < 0) return db_fail(err, errlen, DB_EINPUT, "temperature must be >= 0");
    if (!(p->top_p > 0 && p->top_p <= 1)) return db_fail(err, errlen, DB_EINPUT, "top_p must be in (0, 1]");
    if (p->top_k < 0) return db_fail(err, errlen, DB_EINPUT, "top_k must be >= 0 (0 = all)");
    int use_draft = p->variant != DB_VAR_AR;
    int B = use_draft ? p->block_size : 1;
    if (use_draft && (B < 2 || B > d->cfg.block_size || B > DB_MAX_BLOCK))
        return db_fail(err, errlen, DB_EINPUT, "block size %d outside 2..%d (the drafter's block_size, %s)",
                       B, d->cfg.block_size < DB_MAX_BLOCK ? d->cfg.block_size : DB_MAX_BLOCK, d->cfg.base.path);
    /* RoPE past the trained positions gives plausible-looking tokens of no worth (a 20k-token
     * prompt ran on the 1024-position model): refused unless the caller says the model's RoPE
     * holds there */
    int positions = max_prompt + p->max_new_tokens + B;
    if (t->cfg.max_pos > 0 && positions > t->cfg.max_pos && !p->allow_long_context)
        return db_fail(err, errlen, DB_EINPUT,
                       "a prompt of %d tokens + max_new_tokens %d + block %d = %d positions, beyond "
                       "max_position_embeddings %d of %s (--allow-long-context runs it anyway)",
                       max_prompt, p->max_new_tokens, B, positions, t->cfg.max_pos, t->cfg.path);
    if (use_draft && p->replay_rates && B - 1 > p->replay_n)
        return db_fail(err, errlen, DB_EINPUT,
                       "the acceptance profile has %d positions; block size %d needs %d", p->replay_n,
                       B, B - 1);
    db_engine *e = db_calloc(1, sizeof *e);
    if (!e) return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the engine");
    e->t = t;
    e->d = use_draft ? d : NULL;
    e->be = t->be;
    e->p = *p;
    e->hooks = test_hooks;
    e->conc = concurrency;
    e->B = B;
    e->V = t->cfg.vocab;
    e->use_draft = use_draft;
    e->use_conv = db_variant_uses_conv(p->variant);
    e->use_sel = db_variant_uses_selector(p->variant);
    e->use_markov = db_variant_uses_markov(p->variant);
    e->use_chain = db_variant_uses_chain(p->variant);
    e->sampling = p->temperature > 0;
    /* a count an earlier engine's failed point left on the backend is not this engine's */
    if (e->sampling) (void)e->be->ops->nonfinite(e->be);
    /* dspark's walk builds its q rows on the host: it stays on the host path */
    e->dev = e->be->ops->sample && e->be->ops->accept && !e->hooks.host_path &&
             !e->hooks.broken_accept && !e->use_markov;
    /* a chain drafter over a draft vocabulary other than the target's: q built on the host too */
    if (e->use_chain && e->dev && use_draft) {
        const int *m = db_drafter_d2t(d);
        for (int i = 0; m && i < d->cfg.draft_vocab; i++) e->dev &= m[i] == i;
        e->dev &= d->cfg.draft_vocab == t->cfg.vocab;
    }
    e->sk = e->use_sel ? d->cfg.selector_top_k : 0;
    int rk = p->recall_k > 0 ? p->recall_k : 16;
    e->k = rk > e->sk ? rk : e->sk;
    if (e->k > e->V) e->k = e->V;
    e->prefill_chunk = DB_PREFILL_CHUNK;
    int NB = concurrency * B, max_rows = NB > e->prefill_chunk ? NB : e->prefill_chunk;
    int cap = max_prompt + p->max_new_tokens + B + 1;
    db_target_opts to = {.slots = concurrency, .capacity = cap, .max_rows = max_rows,
                         .n_taps = use_draft ? d->cfg.n_taps : 0,
                         .tap_layers = use_draft ? d->cfg.tap_layers : NULL,
                         .kv_dtype = p->kv_dtype};
    if ((rc = db_target_alloc(t, &to, err, errlen))) goto fail;
    if (use_draft) {
        db_drafter_opts dop = {.slots = concurrency, .capacity = cap, .max_ctx_rows = max_rows,
                               .max_requests = concurrency, .max_block = B,
                               .kv_dtype = p->kv_dtype};
        if ((rc = db_drafter_alloc(d, &dop, err, errlen))) goto fail;
    }
    int f = 0, R1 = concurrency * (B > 1 ? B - 1 : 1);
    size_t V = (size_t)e->V;
    e->slots = xcalloc((size_t)concurrency, sizeof *e->slots, &f);
    e->active = xcalloc((size_t)concurrency, sizeof(int), &f);
    e->anchors = xcalloc((size_t)concurrency, sizeof(int), &f);
    e->topk_ids = xcalloc((size_t)R1 * e->k, sizeof(int), &f);
    e->topk_vals = xcalloc((size_t)R1 * e->k, sizeof(float), &f);
    e->draft = xcalloc((size_t)NB, sizeof(int), &f);
    e->targ = xcalloc((size_t)NB, sizeof(int), &f);
    e->targv = xcalloc((size_t)(NB > concurrency ? NB : concurrency), sizeof(float), &f);
    int host_rows = e->sampling && !e->dev;
    e->p_host = xcalloc(host_rows ? (size_t)NB * V : 1, sizeof(float), &f);
    e->q_host = xcalloc(host_rows ? (size_t)NB * V : 1, sizeof(float), &f);
    e->residual = xcalloc(host_rows ? V : 1, sizeof(float), &f);
    e->q_sel = xcalloc(e->sampling && e->dev ? (size_t)R1 * (e->sk > 0 ? e->sk : 1) : 1, sizeof(float), &f);
    e->u = xcalloc((size_t)NB, sizeof(double), &f);
    e->acc = xcalloc((size_t)concurrency, sizeof(int), &f);
    e->bonus = xcalloc((size_t)concurrency, sizeof(int), &f);
    if (e->use_markov || e->use_chain) {
        size_t Vd = (size_t)d->cfg.draft_vocab;
        e->mk_prev = xcalloc((size_t)concurrency, sizeof(int), &f);
        e->mk_rows = xcalloc((size_t)concurrency, sizeof(int), &f);
        e->mk_ids = xcalloc((size_t)concurrency * e->k, sizeof(int), &f);
        e->mk_q = xcalloc(e->sampling ? (size_t)concurrency * Vd : 1, sizeof(float), &f);
    }
    e->rows = xcalloc((size_t)max_rows, sizeof(db_row), &f);
    e->logit_rows = xcalloc((size_t)NB, sizeof(int), &f);
    e->ctx_slot = xcalloc((size_t)max_rows, sizeof(int), &f);
    e->ctx_pos = xcalloc((size_t)max_rows, sizeof(int), &f);
    e->ctx_src = xcalloc((size_t)max_rows, sizeof(int), &f);
    e->ctx_tok = xcalloc((size_t)max_rows, sizeof(int), &f);
    e->ring_mem = xcalloc((size_t)concurrency * B * (B > 1 ? B - 1 : 1) * e->k, sizeof(int), &f);
    for (int i = 0; !f && i < concurrency; i++) {
        e->slots[i].req = -1;
        e->slots[i].ring = xcalloc((size_t)B, sizeof(pending), &f);
        for (int j = 0; !f && j < B; j++)
            e->slots[i].ring[j].topk = e->ring_mem + ((size_t)i * B + j) * (B > 1 ? B - 1 : 1) * e->k;
    }
    if (use_draft && !f) {
        size_t w = (size_t)d->cfg.n_taps * t->cfg.hidden;
        e->ctx_feats = e->be->ops->alloc(e->be, sizeof(float) * (size_t)NB * w);
        if (!e->ctx_feats) f = 1;
    }
    if (f) {
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory sizing the engine for %d requests", concurrency);
        goto fail;
    }
    /* the selector's state whenever the drafter has one (the memory model counts it so) */
    if (use_draft && d->has_selector && (rc = db_selector_init(&e->sel, d, R1, err, errlen))) goto fail;
    *out = e;
    return DB_OK;
fail:
    db_engine_destroy(e);
    return rc;
}

/* ---- per-position counts, recall@1 / recall@k / oracle, judged against the final committed
 * tokens: position i of a cycle counts only when out[base + i - 1] exists, i.e. the request did
 * not end (EOS, max_new_tokens) before reaching it ---- */

static void resolve_pending(db_engine *e, slot_state *s, const db_request *r, int final)
{
    int B = e->B, k = e->k, keep = 0;
    for (int c = 0; c < s->ring_n; c++) {
        pending *pd = &s->ring[c];
        if (!final && r->n_out < pd->base + B - 1) {
            /* still waiting: swap to the front so every entry keeps its own topk buffer */
            pending tmp = s->ring[keep];
            s->ring[keep++] = *pd;
            *pd = tmp;
            continue;
        }
        db_req_stats *st = (db_req_stats *)&r->st;
        int top1_ok = 1, in_topk_run = 1, run = 0, avail = r->n_out - pd->base;
        for (int i = 1; i < B && i <= avail; i++) {
            st->drafted[i]++;
            st->reached[i] += i <= pd->accepted + 1;
            st->accepted[i] += i <= pd->accepted;
            int truth = r->out[pd->base + i - 1];
            const int *ids = pd->topk + (size_t)(i - 1) * k;
            int hit1 = ids[0] == truth, hitk = 0;
            for (int j = 0; j < k && !hitk; j++) hitk = ids[j] == truth;
            if (top1_ok) {
                st->recall_n[i]++;
                st->recall1[i] += hit1;
                st->recallk[i] += hitk;
            }
            top1_ok &= hit1;
            in_topk_run &= hitk;
            run += in_topk_run;
        }
        /* a perfect top-k selector accepts the run and adds a bonus, as far as the output goes */
        st->oracle_len_sum += run + 1 < avail ? run + 1 : avail;
    }
    s->ring_n = keep;
}

/* ---- committing tokens ---- */

static int is_eos(const db_engine *e, int tok) { return db_target_is_eos(e->t, tok); }

/* Append one token; returns 1 when the request is finished (EOS or max_new_tokens). */
static int commit_token(db_engine *e, db_request *r, int req_index, int tok)
{
    if (e->hooks.plant_mismatch > 0 && e->use_draft && req_index == 0 &&
        r->n_out == e->hooks.plant_mismatch - 1)
        tok = (tok + 1) % e->V;
    r->out[r->n_out++] = tok;
    r->st.output_tokens++;
    if (!e->p.ignore_eos && is_eos(e, tok)) {
        r->st.finished_by_eos = 1;
        return 1;
    }
    return r->n_out >= e->p.max_new_tokens;
}

/* tokens delivered to the request in slot s at `now` (seconds since t0): the gap since its
 * previous delivery is one inter-token latency (db_request.itl) */
static void delivered(db_engine *e, int s, double now)
{
    slot_state *ss = &e->slots[s];
    db_request *r = &e->reqs[ss->req];
    if (r->itl && r->n_itl < r->itl_cap) r->itl[r->n_itl] = (float)(now - ss->t_last);
    r->n_itl++;
    ss->t_last = now;
}

/* ---- non-finite logits: NaN or Inf weights (or an overflow) give greedy rows whose argmax is
 * token 0 at every step (with a drafter agreeing on it, a perfect acceptance and a speedup) and
 * sampled rows of no distribution: the point stops, naming the call and the model ---- */

/* engine_test.h's nan_*_call: one NaN in the middle of the last of `rows` logits rows */
static int plant_nan(db_engine *e, float *logits, int rows, int width, char *err, size_t errlen)
{
    const float nan = NAN;
    float *at = logits + (size_t)(rows - 1) * width + width / 2; /* a device pointer, offset */
    if (rows > 0 && e->be->ops->upload(e->be, at, &nan, sizeof nan) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "%s", e->be->err);
    return DB_OK;
}

/* one target call, counted for those messages */
static int forward(db_engine *e, int m, int nl, char *err, size_t errlen)
{
    e->target_calls++;
    int rc = db_target_forward(e->t, e->rows, m, e->logit_rows, nl, err, errlen);
    if (!rc && e->hooks.nan_target_call == e->target_calls)
        rc = plant_nan(e, db_target_logits(e->t), nl, e->V, err, errlen);
    return rc;
}

static int nonfinite_fail(db_engine *e, int drafter, const char *what, char *err, size_t errlen)
{
    return db_fail(err, errlen, DB_ERUNTIME, "%s call %ld: non-finite logits (%s) from %s",
                   drafter ? "drafter" : "target", drafter ? e->drafter_calls : e->target_calls,
                   what, drafter ? e->d->cfg.base.path : e->t->cfg.path);
}

/* the largest logit of each of n rows, vals[r * stride] (a top-k's first value), on the host */
static int check_largest(db_engine *e, int drafter, const float *vals, int n, int stride, char *err,
                         size_t errlen)
{
    for (int r = 0; r < n; r++) {
        float x = vals[(size_t)r * stride];
        if (isfinite(x)) continue;
        char what[48];
        snprintf(what, sizeof what, "largest %g", (double)x);
        return nonfinite_fail(e, drafter, what, err, errlen);
    }
    return DB_OK;
}

/* Sampling: the rows of the last probs call (n rows) that had no distribution, as the backend
 * counted them; asked after the op that took that call's results to the host, so a device
 * backend has the count at hand (backend.h, nonfinite) */
static int check_probs(db_engine *e, int drafter, int n, char *err, size_t errlen)
{
    int bad = e->be->ops->nonfinite(e->be);
    if (bad < 0) return db_fail(err, errlen, DB_ERUNTIME, "%s", e->be->err);
    if (bad == 0) return DB_OK;
    char what[48];
    snprintf(what, sizeof what, "%d of %d rows", bad, n);
    return nonfinite_fail(e, drafter, what, err, errlen);
}

/* on_pick's margins: each row's top-1 minus top-2 logit, from a host copy of the n rows (a
 * tracing aid: its own allocation, outside the engine's carved buffers) */
static int trace_margins(db_engine *e, const float *logits, int n, const int *picked, char *err, size_t errlen)
{
    db_backend *be = e->be;
    float *h = db_malloc(sizeof(float) * (size_t)n * (size_t)e->V);
    if (!h) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the traced logits");
    if (be->ops->download(be, h, logits, sizeof(float) * (size_t)n * (size_t)e->V) != 0) {
        free(h);
        return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
    }
    for (int r = 0; r < n; r++) {
        const float *l = h + (size_t)r * (size_t)e->V;
        float second = -INFINITY;
        for (int v = 0; v < e->V; v++)
            if (v != picked[r] && l[v] > second) second = l[v];
        e->p.on_pick(e->p.on_cycle_user, r, picked[r], l[picked[r]] - second);
    }
    free(h);
    return DB_OK;
}

/* Greedy argmax or a sample (filtered, seeded per request) for each of n logits rows. */
static int pick_tokens(db_engine *e, float *logits, int n, const int *slot_of_row, int *out,
                       char *err, size_t errlen)
{
    db_backend *be = e->be;
    if (!e->sampling) {
        if (be->ops->topk(be, out, e->targv, logits, n, e->V, 1) != 0)
            return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
        int rc = check_largest(e, 0, e->targv, n, 1, err, errlen);
        return rc || !e->p.on_pick ? rc : trace_margins(e, logits, n, out, err, errlen);
    }
    be->ops->probs(be, logits, n, e->V, e->p.temperature, e->p.top_p, e->p.top_k);
    if (e->dev) {
        for (int i = 0; i < n; i++) e->u[i] = db_rng_uniform(&e->slots[slot_of_row[i]].rng);
        if (be->ops->sample(be, out, logits, n, e->V, e->u) != 0)
            return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
        return check_probs(e, 0, n, err, errlen);
    }
    if (be->ops->download(be, e->p_host, logits, sizeof(float) * (size_t)n * e->V) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
    int rc = check_probs(e, 0, n, err, errlen);
    for (int i = 0; i < n && !rc; i++)
        out[i] = db_sample_index(e->p_host + (size_t)i * e->V, e->V, &e->slots[slot_of_row[i]].rng);
    return rc;
}

static void finish_request(db_engine *e, int slot, double t0)
{
    slot_state *s = &e->slots[slot];
    db_request *r = &e->reqs[s->req];
    resolve_pending(e, s, r, 1);
    r->st.t_finished = db_now() - t0;
    s->req = -1;
    s->ring_n = 0;
    db_target_reset(e->t, slot);
    if (e->d) db_drafter_reset(e->d, slot);
}

/* Take request req_index into a free slot (state only; prefill_admitted runs the prompt). */
static int admit(db_engine *e, int slot, int req_index, double t0, char *err, size_t errlen)
{
    slot_state *s = &e->slots[slot];
    db_request *r = &e->reqs[req_index];
    memset(&r->st, 0, sizeof r->st);
    r->n_out = 0;
    r->st.prompt_tokens = r->n_prompt;
    r->st.t_admitted = db_now() - t0;
    r->st.scheduled = r->scheduled;
    r->st.t_arrival = r->scheduled ? r->arrival : r->st.t_admitted;
    r->n_itl = 0;
    s->req = req_index;
    s->ring_n = 0;
    db_rng_seed(&s->rng, e->p.seed * 0x9e3779b97f4a7c15ull + (uint64_t)req_index);
    db_rng_seed(&s->replay_rng, (e->p.seed ^ 0x7265706c6179ull) * 0x9e3779b97f4a7c15ull + (uint64_t)req_index);
    db_target_reset(e->t, slot);
    if (e->d) db_drafter_reset(e->d, slot);
    if (r->n_prompt < 1) return db_fail(err, errlen, DB_EINPUT, "request %d: empty prompt", req_index);
    if (r->n_prompt + e->p.max_new_tokens + e->B + 1 > db_target_capacity(e->t))
        return db_fail(err, errlen, DB_EINPUT, "request %d: prompt of %d tokens exceeds the sized maximum", req_index, r->n_prompt);
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= e->V)
            return db_fail(err, errlen, DB_EINPUT, "request %d: token %d outside the vocabulary", req_index, r->prompt[i]);
    return DB_OK;
}

/* the stop flag of db_gen_params, checked between target calls */
static int stopped(const db_engine *e, char *err, size_t errlen)
{
    int sig = e->p.stop ? *e->p.stop : 0;
    return sig ? db_fail(err, errlen, DB_ESIGNAL(sig), "stopped by signal %d", sig) : DB_OK;
}

/* Prefill the prompts of the requests just admitted into slots[0..n), batched into target calls
 * of up to max_rows rows (a call may hold the tail of one prompt and the head of the next);
 * each request's first token comes from its last prompt row. */
static int prefill_admitted(db_engine *e, const int *slots, int n, double t0, char *err, size_t errlen)
{
    db_target *t = e->t;
    int R = t->max_rows, si = 0, off = 0, rc = DB_OK;
    while (si < n && (rc = stopped(e, err, errlen)) == DB_OK) {
        int m = 0, nl = 0;
        while (si < n && m < R) {
            db_request *r = &e->reqs[e->slots[slots[si]].req];
            int take = r->n_prompt - off < R - m ? r->n_prompt - off : R - m;
            for (int j = 0; j < take; j++) {
                e->rows[m + j] = (db_row){slots[si], off + j, r->prompt[off + j]};
                e->ctx_slot[m + j] = slots[si];
                e->ctx_pos[m + j] = off + j;
                e->ctx_tok[m + j] = r->prompt[off + j];
            }
            m += take;
            off += take;
            if (off == r->n_prompt) {
                e->logit_rows[nl] = m - 1;
                e->active[nl++] = slots[si]; /* slot of each logits row, for its rng */
                si++;
                off = 0;
            }
        }
        rc = forward(e, m, nl, err, errlen);
        if (!rc && e->d)
            rc = db_drafter_add_context(e->d, db_target_taps(t), e->ctx_tok, e->ctx_slot, e->ctx_pos, m, err, errlen);
        if (!rc && nl > 0) rc = pick_tokens(e, db_target_logits(t), nl, e->active, e->targ, err, errlen);
        for (int j = 0; j < nl && !rc; j++) {
            int slot = e->active[j];
            slot_state *s = &e->slots[slot];
            db_request *r = &e->reqs[s->req];
            r->st.t_first_token = db_now() - t0;
            s->t_last = r->st.t_first_token;
            s->anchor = e->targ[j];
            if (commit_token(e, r, s->req, e->targ[j])) finish_request(e, slot, t0);
        }
    }
    return rc;
}

/* ---- one autoregressive step for every active request ---- */

static int step_ar(db_engine *e, int na, double t0, char *err, size_t errlen)
{
    db_target *t = e->t;
    double ta = db_now();
    for (int j = 0; j < na; j++) {
        int s = e->active[j];
        e->rows[j] = (db_row){s, db_target_len(t, s), e->slots[s].anchor};
        e->logit_rows[j] = j;
    }
    int rc = forward(e, na, na, err, errlen);
    if (!rc) rc = pick_tokens(e, db_target_logits(t), na, e->active, e->targ, err, errlen);
    if (rc) return rc;
    double tb = db_now();
    for (int j = 0; j < na; j++) {
        int s = e->active[j];
        db_request *r = &e->reqs[e->slots[s].req];
        r->st.cycles++; /* a decode step is an `ar` cycle: accepted 0, one token */
        r->st.cycle_tokens++;
        r->st.hist[1]++;
        r->st.t_verify += tb - ta;
        e->slots[s].anchor = e->targ[j];
        delivered(e, s, tb - t0);
        if (commit_token(e, r, e->slots[s].req, e->targ[j])) finish_request(e, s, t0);
    }
    return DB_OK;
}

/* ---- one speculative cycle for every active request ---- */

/* The DSpark walk (dspark.h) over the drafter's rows of the last block: position t = 1..B-1 of
 * every request corrected by its pick at t-1 (the anchor for t = 1) in one batch, then picked:
 * the argmax (greedy) or a draw from the filtered corrected distribution, which is q for the
 * rejection rule (scattered from draft ids to target ids, 0 elsewhere). The top-k kept for the
 * recall / oracle counts are the corrected rows'. */
static int dspark_walk(db_engine *e, int na, char *err, size_t errlen)
{
    db_backend *be = e->be;
    db_drafter *d = e->d;
    const db_dspark_head *m = &d->markov;
    int B = e->B, Vd = m->vd, k = e->k, kd = k < Vd ? k : Vd;
    const float *logits = db_drafter_logits(d);
    float *corr = d->s.corr;
    for (int j = 0; j < na; j++) e->mk_prev[j] = e->anchors[j];
    for (int t = 1; t < B; t++) {
        for (int j = 0; j < na; j++) e->mk_rows[j] = j * (B - 1) + t - 1;
        db_dspark_correct(m, be, corr, logits, e->mk_rows, e->mk_prev, na);
        if (be->ops->topk(be, e->mk_ids, NULL, corr, na, Vd, kd) != 0)
            return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
        for (int j = 0; j < na; j++) {
            int *ids = e->topk_ids + ((size_t)j * (B - 1) + t - 1) * k;
            for (int i = 0; i < k; i++) ids[i] = i < kd ? m->d2t[e->mk_ids[(size_t)j * kd + i]] : -1;
        }
        if (e->sampling) {
            be->ops->probs(be, corr, na, Vd, e->p.temperature, e->p.top_p, e->p.top_k);
            if (be->ops->download(be, e->mk_q, corr, sizeof(float) * (size_t)na * Vd) != 0)
                return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
            int rc = check_probs(e, 1, na, err, errlen);
            if (rc) return rc;
        }
        for (int j = 0; j < na; j++) {
            int pick = e->topk_ids[((size_t)j * (B - 1) + t - 1) * k];
            if (e->sampling) {
                float *q = e->q_host + ((size_t)j * B + t) * e->V;
                memset(q, 0, sizeof(float) * (size_t)e->V);
                for (int i = 0; i < Vd; i++) q[m->d2t[i]] = e->mk_q[(size_t)j * Vd + i];
                pick = db_sample_index(q, e->V, &e->slots[e->active[j]].rng);
            }
            e->draft[j * B + t] = pick;
            e->mk_prev[j] = pick;
        }
    }
    return DB_OK;
}

/* The chain drafters' walk (eagle3, mtp; chain.h): steps t = 1..B-1, one drafter call over one
 * row per request each, fed the anchor (t = 1) or the pick at t-1. Each step's top-k comes to the
 * host (ids through d2t); the pick is the argmax, or a draw from the step's filtered
 * distribution, which stays q for the rejection rule: copied to row j*(B-1)+t-1 of the
 * drafter's logits on the device path, scattered into q_host rows on the host path. */
static int chain_walk(db_engine *e, int na, char *err, size_t errlen)
{
    db_backend *be = e->be;
    db_drafter *d = e->d;
    const int *d2t = db_drafter_d2t(d);
    int B = e->B, Vd = d->cfg.draft_vocab, k = e->k, kd = k < Vd ? k : Vd, rc;
    float *rows = db_drafter_step_logits(d);
    for (int j = 0; j < na; j++) e->mk_prev[j] = e->draft[j * B] = e->anchors[j];
    for (int t = 1; t < B; t++) {
        if ((rc = db_drafter_chain_step(d, e->active, e->mk_prev, na, t, err, errlen))) return rc;
        e->drafter_calls++;
        if (e->hooks.nan_drafter_call == e->drafter_calls && (rc = plant_nan(e, rows, na, Vd, err, errlen))) return rc;
        if (be->ops->topk(be, e->mk_ids, e->topk_vals, rows, na, Vd, kd) != 0)
            return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
        if ((rc = check_largest(e, 1, e->topk_vals, na, kd, err, errlen))) return rc;
        for (int j = 0; j < na; j++) {
            int *ids = e->topk_ids + ((size_t)j * (B - 1) + t - 1) * k, *src = e->mk_ids + (size_t)j * kd;
            for (int i = 0; i < k; i++) ids[i] = i < kd ? (d2t ? d2t[src[i]] : src[i]) : -1;
            e->mk_rows[j] = j * (B - 1) + t - 1;
            e->draft[j * B + t] = ids[0];
        }
        if (e->sampling) {
            be->ops->probs(be, rows, na, Vd, e->p.temperature, e->p.top_p, e->p.top_k);
            if (e->dev) { /* Vd == V, identity map: q stays on the device */
                for (int j = 0; j < na; j++) e->u[j] = db_rng_uniform(&e->slots[e->active[j]].rng);
                if (be->ops->sample(be, e->targ, rows, na, Vd, e->u) != 0)
                    return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
                be->ops->copy_rows(be, db_drafter_logits(d), Vd, e->mk_rows, rows, Vd, NULL, na, Vd);
                for (int j = 0; j < na; j++) e->draft[j * B + t] = e->targ[j];
            } else {
                if (be->ops->download(be, e->mk_q, rows, sizeof(float) * (size_t)na * Vd) != 0)
                    return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
                for (int j = 0; j < na; j++) {
                    float *q = e->q_host + ((size_t)j * B + t) * e->V;
                    memset(q, 0, sizeof(float) * (size_t)e->V);
                    for (int i = 0; i < Vd; i++) q[d2t ? d2t[i] : i] = e->mk_q[(size_t)j * Vd + i];
                    e->draft[j * B + t] = db_sample_index(q, e->V, &e->slots[e->active[j]].rng);
                }
            }
            if ((rc = check_probs(e, 1, na, err, errlen))) return rc;
        }
        for (int j = 0; j < na; j++) e->mk_prev[j] = e->draft[j * B + t];
    }
    return DB_OK;
}

static int draft_and_select(db_engine *e, int na, double *t_draft, double *t_select,
                            double *t_correct, char *err, size_t errlen)
{
    db_backend *be = e->be;
    db_drafter *d = e->d;
    int B = e->B, k = e->k, R1 = na * (B - 1);
    double ta = db_now();
    if (e->use_chain) { /* every step is drafting: no select, no correct */
        int rc = chain_walk(e, na, err, errlen);
        *t_draft = db_now() - ta;
        *t_select = *t_correct = 0;
        return rc;
    }
    int rc = db_drafter_block(d, e->active, e->anchors, na, B, e->use_conv, err, errlen);
    if (rc) return rc;
    e->drafter_calls++;
    float *logits = db_drafter_logits(d);
    if (e->hooks.nan_drafter_call == e->drafter_calls &&
        (rc = plant_nan(e, logits, R1, e->use_markov ? d->markov.vd : e->V, err, errlen)))
        return rc;
    if (e->use_markov) {
        double tb = db_now();
        for (int j = 0; j < na; j++) e->draft[j * B] = e->anchors[j];
        rc = dspark_walk(e, na, err, errlen);
        *t_draft = tb - ta;
        *t_select = 0;
        *t_correct = db_now() - tb;
        return rc;
    }
    if (be->ops->topk(be, e->topk_ids, e->topk_vals, logits, R1, e->V, k) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
    /* the top values are here anyway: the selector's walk, which never runs probs on these
     * rows, is covered too */
    if ((rc = check_largest(e, 1, e->topk_vals, R1, k, err, errlen))) return rc;
    double tb = db_now();
    for (int j = 0; j < na; j++) e->draft[j * B] = e->anchors[j];
    if (e->use_sel && e->dev && be->ops->select_walk) { /* scores and walk on the device */
        for (int row = 0; row < R1 && e->sampling; row++)
            e->u[row] = db_rng_uniform(&e->slots[e->active[row / (B - 1)]].rng);
        rc = db_selector_score_walk(&e->sel, e->anchors, e->topk_ids, e->topk_vals, k, na, B,
                                    e->p.temperature, e->p.top_p, e->p.top_k, e->u,
                                    e->sampling ? e->q_sel : NULL, e->targ, err, errlen);
        if (rc) return rc;
        for (int row = 0; row < R1; row++) e->draft[(row / (B - 1)) * B + row % (B - 1) + 1] = e->targ[row];
    } else if (e->use_sel) {
        rc = db_selector_score(&e->sel, e->anchors, e->topk_ids, k, na, B, err, errlen);
        for (int j = 0; j < na && !rc; j++)
            rc = db_selector_walk(&e->sel, j, B, e->topk_vals, k, e->p.temperature, e->p.top_p,
                                  e->p.top_k, &e->slots[e->active[j]].rng,
                                  e->dev ? NULL : e->q_host + (size_t)j * B * e->V, e->V,
                                  e->sampling && e->dev ? e->q_sel + (size_t)j * (B - 1) * e->sk : NULL,
                                  e->draft + j * B, err, errlen);
        if (rc) return rc;
    } else if (!e->sampling) {
        for (int row = 0; row < R1; row++)
            e->draft[(row / (B - 1)) * B + row % (B - 1) + 1] = e->topk_ids[(size_t)row * k];
    } else {
        be->ops->probs(be, logits, R1, e->V, e->p.temperature, e->p.top_p, e->p.top_k);
        if (e->dev) { /* q stays on the device (the drafter's logits rows), for the accept op */
            for (int row = 0; row < R1; row++) e->u[row] = db_rng_uniform(&e->slots[e->active[row / (B - 1)]].rng);
            if (be->ops->sample(be, e->targ, logits, R1, e->V, e->u) != 0)
                return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
            for (int row = 0; row < R1; row++) e->draft[(row / (B - 1)) * B + row % (B - 1) + 1] = e->targ[row];
        }
        for (int row = 0; row < R1 && !e->dev; row++) {
            int j = row / (B - 1), t = row % (B - 1) + 1;
            float *q = e->q_host + ((size_t)j * B + t) * e->V;
            if (be->ops->download(be, q, logits + (size_t)row * e->V, sizeof(float) * (size_t)e->V) != 0)
                return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
            e->draft[j * B + t] = db_sample_index(q, e->V, &e->slots[e->active[j]].rng);
        }
        if ((rc = check_probs(e, 1, R1, err, errlen))) return rc;
    }
    *t_draft = tb - ta;
    *t_select = db_now() - tb;
    return DB_OK;
}

/* Acceptance replay for request j of the batch: position i is accepted with the profile's
 * conditional rate once positions < i were; the bonus is the target's argmax at the stop row
 * (when sampling, of the filtered distribution: the topk op on the device path, else from the
 * downloaded rows; ties to the smaller id either way). */
static int replay_accept(db_engine *e, int j, slot_state *ss, int *bonus)
{
    int B = e->B, a = 0;
    while (a < B - 1 && db_rng_uniform(&ss->replay_rng) < (double)e->p.replay_rates[a]) a++;
    if (!e->sampling || e->dev) {
        *bonus = e->targ[j * B + a];
    } else {
        const float *p = e->p_host + ((size_t)j * B + a) * e->V;
        int best = 0;
        for (int v = 1; v < e->V; v++)
            if (p[v] > p[best]) best = v;
        *bonus = best;
    }
    return a;
}

static int cycle(db_engine *e, int na, double t0, char *err, size_t errlen)
{
    db_target *t = e->t;
    db_backend *be = e->be;
    int B = e->B, NB = na * B;
    for (int j = 0; j < na; j++) e->anchors[j] = e->slots[e->active[j]].anchor;
    double t_draft = 0, t_select = 0, t_correct = 0;
    int rc = draft_and_select(e, na, &t_draft, &t_select, &t_correct, err, errlen);
    if (rc) return rc;
    /* verify: one target call over every request's block */
    double tv = db_now();
    for (int j = 0; j < na; j++) {
        int s = e->active[j], base = db_target_len(t, s);
        for (int i = 0; i < B; i++) {
            e->rows[j * B + i] = (db_row){s, base + i, e->draft[j * B + i]};
            e->logit_rows[j * B + i] = j * B + i;
        }
    }
    rc = forward(e, NB, NB, err, errlen);
    if (rc) return rc;
    float *logits = db_target_logits(t);
    if (!e->sampling) {
        if (be->ops->topk(be, e->targ, e->targv, logits, NB, e->V, 1) != 0)
            return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
        if ((rc = check_largest(e, 0, e->targv, NB, 1, err, errlen))) return rc;
    } else {
        be->ops->probs(be, logits, NB, e->V, e->p.temperature, e->p.top_p, e->p.top_k);
        if (e->dev && e->p.replay_rates) { /* only the argmax of each row is needed */
            if (be->ops->topk(be, e->targ, NULL, logits, NB, e->V, 1) != 0)
                return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
        } else if (e->dev) { /* a and the bonus per request, decided on the device */
            for (int j = 0; j < na; j++) db_accept_uniforms(&e->slots[e->active[j]].rng, B, e->u + (size_t)j * B);
            int rs = e->use_sel
                         ? be->ops->accept(be, e->acc, e->bonus, logits, NULL, e->q_sel, e->sel.cand_ids, e->sk,
                                           e->draft, e->u, na, B, e->V)
                         : be->ops->accept(be, e->acc, e->bonus, logits, db_drafter_logits(e->d), NULL, NULL, 0,
                                           e->draft, e->u, na, B, e->V);
            if (rs != 0) return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
        } else if (be->ops->download(be, e->p_host, logits, sizeof(float) * (size_t)NB * e->V) != 0) {
            return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
        }
        if ((rc = check_probs(e, 0, NB, err, errlen))) return rc;
    }
    double tc = db_now();
    /* commit */
    int nctx = 0, req_of[na];
    for (int j = 0; j < na; j++) {
        int s = e->active[j];
        slot_state *ss = &e->slots[s];
        req_of[j] = ss->req;
        db_request *r = &e->reqs[ss->req];
        int P0 = db_target_len(t, s) - B, bonus, a;
        if (e->p.replay_rates)
            a = replay_accept(e, j, ss, &bonus);
        else if (!e->sampling)
            a = db_accept_greedy(e->draft + j * B, e->targ + j * B, B, &bonus);
        else if (e->dev) {
            a = e->acc[j], bonus = e->bonus[j];
            db_accept_consume(&ss->rng, B, a);
        } else if (e->hooks.broken_accept) /* the wrong rule: every draft, bonus ~ p[B-1] */
            a = B - 1, bonus = db_sample_index(e->p_host + ((size_t)j * B + B - 1) * e->V, e->V, &ss->rng);
        else
            a = db_accept_sample(e->draft + j * B, e->p_host + (size_t)j * B * e->V,
                                 e->q_host + (size_t)j * B * e->V, B, e->V, &ss->rng, e->residual,
                                 &bonus);
        if (e->p.on_cycle) e->p.on_cycle(e->p.on_cycle_user, ss->req, P0, e->draft + j * B, B, a, bonus);
        delivered(e, s, tc - t0); /* the accepted run and the bonus at once: one delivery */
        pending *pd = &ss->ring[ss->ring_n++];
        pd->base = r->n_out;
        pd->accepted = a;
        memcpy(pd->topk, e->topk_ids + (size_t)j * (B - 1) * e->k, sizeof(int) * (size_t)(B - 1) * e->k);
        int done = 0;
        for (int i = 1; i <= a && !done; i++) done = commit_token(e, r, ss->req, e->draft[j * B + i]);
        if (!done) done = commit_token(e, r, ss->req, bonus);
        /* the cycle counts the tokens it committed: a + 1, fewer when the request ended in it */
        int n = r->n_out - pd->base;
        r->st.cycles++;
        r->st.cycle_tokens += n;
        r->st.hist[n]++;
        resolve_pending(e, ss, r, 0);
        db_target_truncate(t, s, P0 + a + 1);
        if (done) {
            finish_request(e, s, t0);
            continue;
        }
        ss->anchor = r->out[r->n_out - 1];
        for (int i = 0; i <= a; i++) {
            e->ctx_slot[nctx] = s;
            e->ctx_pos[nctx] = P0 + i;
            e->ctx_tok[nctx] = e->draft[j * B + i];
            e->ctx_src[nctx++] = j * B + i;
        }
    }
    double td = db_now();
    if (nctx > 0) {
        int w = e->d->cfg.n_taps * t->cfg.hidden;
        be->ops->copy_rows(be, e->ctx_feats, w, NULL, db_target_taps(t), w, e->ctx_src, nctx, w);
        rc = db_drafter_add_context(e->d, e->ctx_feats, e->ctx_tok, e->ctx_slot, e->ctx_pos, nctx, err, errlen);
        if (rc) return rc;
    }
    double te = db_now();
    for (int j = 0; j < na; j++) { /* every request of the batch lived through the whole cycle */
        db_request *r = &e->reqs[req_of[j]];
        r->st.t_draft += t_draft + (te - td);
        r->st.t_select += t_select;
        r->st.t_correct += t_correct;
        r->st.t_verify += tc - tv;
        r->st.t_host += td - tc;
    }
    return DB_OK;
}

int db_engine_run(db_engine *e, db_request *reqs, int n, double t0, db_progress_fn progress,
                  void *user, char *err, size_t errlen)
{
    e->reqs = reqs;
    int next = 0, done = 0, rc = DB_OK;
    int *admitted = db_malloc(sizeof(int) * (size_t)e->conc), *before = db_malloc(sizeof(int) * (size_t)e->conc);
    if (!admitted || !before) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the slot lists of %d requests", e->conc);
    for (int s = 0; s < e->conc; s++) e->slots[s].req = -1;
    while (rc == DB_OK) {
        /* fill free slots with the requests that have arrived; a request finished by its
         * prefill frees its slot again */
        for (;;) {
            int na = 0;
            double now = db_now() - t0;
            for (int s = 0; s < e->conc && next < n && rc == DB_OK; s++)
                if (e->slots[s].req < 0) {
                    if (reqs[next].scheduled && reqs[next].arrival > now) break; /* not yet */
                    rc = admit(e, s, next++, t0, err, errlen);
                    admitted[na++] = s;
                }
            if (rc || na == 0) break;
            rc = prefill_admitted(e, admitted, na, t0, err, errlen);
            for (int j = 0; j < na && !rc; j++)
                if (e->slots[admitted[j]].req < 0 && progress) progress(user, ++done, n);
        }
        if (rc) break;
        int na = 0;
        for (int s = 0; s < e->conc; s++)
            if (e->slots[s].req >= 0) e->active[na++] = s;
        if ((na == 0 && next >= n) || (rc = stopped(e, err, errlen))) break;
        if (na == 0) { /* idle until the next arrival, in short sleeps: a stop ends the wait */
            double wait = reqs[next].arrival - (db_now() - t0);
            if (wait > 0.01) wait = 0.01;
            if (wait > 0) nanosleep(&(struct timespec){0, (long)(wait * 1e9)}, NULL);
            continue;
        }
        for (int j = 0; j < na; j++) before[j] = e->slots[e->active[j]].req;
        rc = e->use_draft ? cycle(e, na, t0, err, errlen) : step_ar(e, na, t0, err, errlen);
        for (int j = 0; j < na && rc == DB_OK; j++)
            if (e->slots[e->active[j]].req != before[j] && progress) progress(user, ++done, n);
    }
    /* a fault latched by the last calls (no checked call came after them) */
    if (rc == DB_OK && e->be->ops->sync(e->be) != 0) rc = db_fail(err, errlen, DB_ERUNTIME, "%s", e->be->err);
    free(admitted);
    free(before);
    return rc;
}
