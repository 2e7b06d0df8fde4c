/* backend_profile.c — DB_PROFILE_OPS=1: where a run's device time goes, op by op.
 *
 * With the variable set, db_backend_create hands out the backend with a copy of its op table in
 * which every compute op (and upload / download) is wrapped: the wrapper calls the real op, then
 * the backend's sync, and adds the wall time to that op's total. db_backend_destroy prints the
 * totals to stderr, largest first. Syncing after each op serialises a GPU's queue, so the totals
 * are each op's own time, not the overlapped time of a normal run; on the CPU every op is
 * synchronous anyway. Ops added to backend.h later stay unwrapped (the copy keeps them working).
 * One profiled backend at a time: the table and the totals are process-wide. */
#include "backend_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    P_MATMUL, P_RMSNORM, P_ROPE, P_ATTENTION, P_SWIGLU, P_EMBED, P_ADD, P_COPY_ROWS,
    P_SCALE_SOFTCAP, P_TOPK, P_PROBS, P_DYNCONV, P_PAIR_SCORES, P_UPLOAD, P_DOWNLOAD,
    P_KV_STORE_F16, P_ATTENTION_F16, P_MARKOV_BIAS, P_SAMPLE, P_ACCEPT, P_SELECT_WALK, P_N
};
static const char *const op_names[P_N] = {
    "matmul", "rmsnorm", "rope", "attention", "swiglu", "embed", "add", "copy_rows",
    "scale_softcap", "topk", "probs", "dynconv", "pair_scores", "upload", "download",
    "kv_store_f16", "attention_f16", "markov_bias", "sample", "accept", "select_walk",
};

static const db_backend_ops *real; /* the profiled backend's own table */
static db_backend_ops wrapped;
static struct {
    double sec;
    long calls;
} tot[P_N];

static void done(db_backend *be, int op, double t0)
{
    real->sync(be);
    tot[op].sec += db_backend_seconds() - t0;
    tot[op].calls++;
}

static void p_matmul(db_backend *be, float *y, const float *x, const db_weight *w, int n, int acc)
{
    double t0 = db_backend_seconds();
    real->matmul(be, y, x, w, n, acc);
    done(be, P_MATMUL, t0);
}

static void p_rmsnorm(db_backend *be, float *y, const float *x, const float *w, int n, int d,
                      float eps)
{
    double t0 = db_backend_seconds();
    real->rmsnorm(be, y, x, w, n, d, eps);
    done(be, P_RMSNORM, t0);
}

static void p_rope(db_backend *be, float *x, const int *pos, int n, int nheads, int hd, float theta)
{
    double t0 = db_backend_seconds();
    real->rope(be, x, pos, n, nheads, hd, theta);
    done(be, P_ROPE, t0);
}

static void p_attention(db_backend *be, float *out, const float *q, const float *kc,
                        const float *vc, int cap, const db_attn_row *rows, int n, int nh, int nkv,
                        int hd, float scale)
{
    double t0 = db_backend_seconds();
    real->attention(be, out, q, kc, vc, cap, rows, n, nh, nkv, hd, scale);
    done(be, P_ATTENTION, t0);
}

static void p_swiglu(db_backend *be, float *out, const float *gate, const float *up, size_t n)
{
    double t0 = db_backend_seconds();
    real->swiglu(be, out, gate, up, n);
    done(be, P_SWIGLU, t0);
}

static void p_embed(db_backend *be, float *out, const db_weight *table, const int *ids, int n)
{
    double t0 = db_backend_seconds();
    real->embed(be, out, table, ids, n);
    done(be, P_EMBED, t0);
}

static void p_add(db_backend *be, float *y, const float *x, size_t n)
{
    double t0 = db_backend_seconds();
    real->add(be, y, x, n);
    done(be, P_ADD, t0);
}

static void p_copy_rows(db_backend *be, float *dst, int dst_stride, const int *dst_idx,
                        const float *src, int src_stride, const int *src_idx, int n, int width)
{
    double t0 = db_backend_seconds();
    real->copy_rows(be, dst, dst_stride, dst_idx, src, src_stride, src_idx, n, width);
    done(be, P_COPY_ROWS, t0);
}

static void p_scale_softcap(db_backend *be, float *x, size_t n, float mult, float cap)
{
    double t0 = db_backend_seconds();
    real->scale_softcap(be, x, n, mult, cap);
    done(be, P_SCALE_SOFTCAP, t0);
}

static int p_topk(db_backend *be, int *ids, float *vals, const float *logits, int n, int v, int k)
{
    double t0 = db_backend_seconds();
    int rc = real->topk(be, ids, vals, logits, n, v, k);
    done(be, P_TOPK, t0);
    return rc;
}

static void p_probs(db_backend *be, float *x, int n, int v, float temperature, float top_p,
                    int top_k)
{
    double t0 = db_backend_seconds();
    real->probs(be, x, n, v, temperature, top_p, top_k);
    done(be, P_PROBS, t0);
}

static void p_dynconv(db_backend *be, float *out, const float *in, const float *base,
                      const float *delta, int phase, int n_blocks, int block, int h, int k, int g)
{
    double t0 = db_backend_seconds();
    real->dynconv(be, out, in, base, delta, phase, n_blocks, block, h, k, g);
    done(be, P_DYNCONV, t0);
}

static int p_pair_scores(db_backend *be, float *out, const float *g, const int *prev,
                         const int *cand, const db_weight *pred, const db_weight *succ, int n,
                         int k, int r)
{
    double t0 = db_backend_seconds();
    int rc = real->pair_scores(be, out, g, prev, cand, pred, succ, n, k, r);
    done(be, P_PAIR_SCORES, t0);
    return rc;
}

static void p_markov_bias(db_backend *be, float *x, const int *prev, const db_weight *w1,
                          const db_weight *w2, float scale, int n)
{
    double t0 = db_backend_seconds();
    real->markov_bias(be, x, prev, w1, w2, scale, n);
    done(be, P_MARKOV_BIAS, t0);
}

static int p_upload(db_backend *be, void *dst, const void *src, size_t bytes)
{
    double t0 = db_backend_seconds();
    int rc = real->upload(be, dst, src, bytes);
    done(be, P_UPLOAD, t0);
    return rc;
}

static int p_download(db_backend *be, void *dst, const void *src, size_t bytes)
{
    double t0 = db_backend_seconds();
    int rc = real->download(be, dst, src, bytes);
    done(be, P_DOWNLOAD, t0);
    return rc;
}

static void p_kv_store_f16(db_backend *be, uint16_t *dst, const int *dst_idx, const float *src,
                           int n, int width)
{
    double t0 = db_backend_seconds();
    real->kv_store_f16(be, dst, dst_idx, src, n, width);
    done(be, P_KV_STORE_F16, t0);
}

static void p_attention_f16(db_backend *be, float *out, const float *q, const uint16_t *kc,
                            const uint16_t *vc, int cap, const db_attn_row *rows, int n, int nh,
                            int nkv, int hd, float scale)
{
    double t0 = db_backend_seconds();
    real->attention_f16(be, out, q, kc, vc, cap, rows, n, nh, nkv, hd, scale);
    done(be, P_ATTENTION_F16, t0);
}

static int p_sample(db_backend *be, int *out, const float *probs, int n, int v, const double *u)
{
    double t0 = db_backend_seconds();
    int rc = real->sample(be, out, probs, n, v, u);
    done(be, P_SAMPLE, t0);
    return rc;
}

static int p_accept(db_backend *be, int *accepted, int *bonus, float *p, const float *q,
                    const float *q_vals, const int *q_ids, int q_k, const int *draft,
                    const double *u, int nq, int block, int v)
{
    double t0 = db_backend_seconds();
    int rc = real->accept(be, accepted, bonus, p, q, q_vals, q_ids, q_k, draft, u, nq, block, v);
    done(be, P_ACCEPT, t0);
    return rc;
}

static int p_select_walk(db_backend *be, int *draft, float *q, const float *g, const int *prev,
                         const int *cand, const db_weight *pred, const db_weight *succ,
                         const float *uvals, const double *u, int nq, int steps, int k, int r,
                         float temperature, float top_p, int top_k)
{
    double t0 = db_backend_seconds();
    int rc = real->select_walk(be, draft, q, g, prev, cand, pred, succ, uvals, u, nq, steps, k, r,
                               temperature, top_p, top_k);
    done(be, P_SELECT_WALK, t0);
    return rc;
}

void db_profile_attach(db_backend *be)
{
    const char *v = getenv("DB_PROFILE_OPS");
    if (!v || !*v || !strcmp(v, "0") || real) return;
    real = be->ops;
    wrapped = *real;
    wrapped.matmul = p_matmul, wrapped.rmsnorm = p_rmsnorm, wrapped.rope = p_rope;
    wrapped.attention = p_attention, wrapped.swiglu = p_swiglu, wrapped.embed = p_embed;
    wrapped.add = p_add, wrapped.copy_rows = p_copy_rows, wrapped.scale_softcap = p_scale_softcap;
    wrapped.topk = p_topk, wrapped.probs = p_probs, wrapped.dynconv = p_dynconv;
    wrapped.markov_bias = p_markov_bias;
    wrapped.pair_scores = p_pair_scores, wrapped.upload = p_upload, wrapped.download = p_download;
    /* optional ops stay NULL where the backend has none */
    if (real->kv_store_f16) wrapped.kv_store_f16 = p_kv_store_f16;
    if (real->attention_f16) wrapped.attention_f16 = p_attention_f16;
    if (real->sample) wrapped.sample = p_sample;
    if (real->accept) wrapped.accept = p_accept;
    if (real->select_walk) wrapped.select_walk = p_select_walk;
    be->ops = &wrapped;
    memset(tot, 0, sizeof tot);
}

void db_profile_report(db_backend *be)
{
    if (!real || be->ops != &wrapped) return;
    int order[P_N];
    double all = 0;
    for (int i = 0; i < P_N; i++) order[i] = i, all += tot[i].sec;
    for (int i = 1; i < P_N; i++) /* insertion sort, largest total first */
        for (int j = i; j > 0 && tot[order[j]].sec > tot[order[j - 1]].sec; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    fprintf(stderr, "profile (DB_PROFILE_OPS, backend %s): op, calls, ms, %% of op time, us/call\n",
            real->name);
    for (int i = 0; i < P_N; i++) {
        int o = order[i];
        if (!tot[o].calls) continue;
        fprintf(stderr, "  %-14s %9ld %11.3f %6.1f%% %9.2f\n", op_names[o], tot[o].calls,
                1e3 * tot[o].sec, all > 0 ? 100.0 * tot[o].sec / all : 0.0,
                1e6 * tot[o].sec / (double)tot[o].calls);
    }
    be->ops = real;
    real = NULL;
}
