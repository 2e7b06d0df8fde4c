/* sampling.c — the host reference of the sampling ops (backend.h: db_sample_index_u,
 * db_accept_sample_u, db_select_walk_u): drawing an index from a probability row, the lossless
 * rejection-sampling acceptance of one speculative block, and the DFlash 2 selector walk. The
 * engine's host path and the CPU backend's `sample` / `accept` / `select_walk` ops run these;
 * the GPU kernels reproduce them (same double sums in the same order: bit for bit, except the
 * walk's softmax, whose expf a GPU rounds within 2 ulp of the host's), so a cycle's tokens do
 * not depend on where it was decided.
 *
 * Notation: n / V entries per row, C = DB_SAMPLE_CHUNK, B block, u uniforms in [0, 1). */
#include "backend.h"

int db_sample_index_u(const float *probs, int n, double u)
{
    /* the chunk sums, and their prefix, in order */
    double total = 0.0;
    for (int lo = 0; lo < n; lo += DB_SAMPLE_CHUNK) {
        int hi = lo + DB_SAMPLE_CHUNK < n ? lo + DB_SAMPLE_CHUNK : n;
        double s = 0.0;
        for (int i = lo; i < hi; i++)
            if (probs[i] > 0.0f) s += probs[i];
        total += s;
    }
    double x = u * total, before = 0.0;
    int last = 0;
    for (int lo = 0; lo < n; lo += DB_SAMPLE_CHUNK) {
        int hi = lo + DB_SAMPLE_CHUNK < n ? lo + DB_SAMPLE_CHUNK : n;
        double s = 0.0;
        for (int i = lo; i < hi; i++) {
            if (!(probs[i] > 0.0f)) continue;
            s += probs[i];
            last = i;
            if (x < before + s) return i;
        }
        before += s;
    }
    return last; /* rounding at the top end (or an all-zero row: 0) */
}

/* q of draft row t-1 at id i: dense row, or the sparse list (ids distinct; 0 elsewhere) */
static float q_at(const float *q, const int *q_ids, int q_k, int row, int v, int i)
{
    if (!q_ids) return q[(size_t)row * v + i];
    for (int c = 0; c < q_k; c++)
        if (q_ids[(size_t)row * q_k + c] == i) return q[(size_t)row * q_k + c];
    return 0.0f;
}

int db_accept_sample_u(const int *draft, const float *p, const float *q, const int *q_ids,
                       int q_k, int block, int v, const double *u, float *res, int *bonus)
{
    for (int t = 1; t < block; t++) {
        const float *pt = p + (size_t)(t - 1) * v;
        int d = draft[t];
        float qd = q_at(q, q_ids, q_k, t - 1, v, d);
        double ratio = qd > 0.0f ? (double)pt[d] / qd : 0.0;
        if (u[t - 1] < ratio) continue;
        /* rejected: bonus ~ normalize(max(p - q, 0)), or ~ p when that is all zero */
        int any = 0;
        for (int i = 0; i < v; i++) {
            float r = pt[i] - (q_ids ? 0.0f : q[(size_t)(t - 1) * v + i]);
            res[i] = r > 0.0f ? r : 0.0f;
        }
        if (q_ids)
            for (int c = 0; c < q_k; c++) {
                int i = q_ids[(size_t)(t - 1) * q_k + c];
                float r = pt[i] - q[(size_t)(t - 1) * q_k + c];
                res[i] = r > 0.0f ? r : 0.0f;
            }
        for (int i = 0; i < v && !any; i++) any = res[i] > 0.0f;
        *bonus = db_sample_index_u(any ? res : pt, v, u[t]);
        return t - 1;
    }
    *bonus = db_sample_index_u(p + (size_t)(block - 1) * v, v, u[block - 1]);
    return block - 1;
}

int db_select_walk_u(const float *uvals, const float *pairs, const int *cand, int steps, int k,
                     float temperature, float top_p, int top_k, const double *u, float *scores,
                     float *q, int *draft)
{
    int ip = 0;
    for (int st = 0; st < steps; st++) {
        const int *cs = cand + (size_t)st * k;
        const float *pair = pairs + ((size_t)st * k + ip) * k;
        for (int c = 0; c < k; c++) scores[c] = uvals[(size_t)st * k + c] + pair[c];
        int pick = 0;
        if (temperature <= 0) {
            for (int c = 1; c < k; c++)
                if (scores[c] > scores[pick] || (scores[c] == scores[pick] && cs[c] < cs[pick])) pick = c;
        } else {
            /* non-finite scores give all zeros (db_probs_host's 1): pick 0, q 0, so the
             * rejection rule draws from the target alone */
            if (db_probs_host(scores, k, temperature, top_p, top_k) < 0) return -1;
            pick = db_sample_index_u(scores, k, u[st]);
            if (q)
                for (int c = 0; c < k; c++) q[(size_t)st * k + c] = scores[c];
        }
        draft[st] = cs[pick];
        ip = pick;
    }
    return 0;
}
