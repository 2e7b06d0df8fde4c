/* accept.c — see accept.h. */
#include "engine/accept.h"

#include <math.h>

int db_sample_index(const float *probs, int n, db_rng *rng)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) total += probs[i];
    double u = db_rng_uniform(rng) * total, c = 0.0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] <= 0.0f) continue;
        c += probs[i];
        last = i;
        if (u < c) return i;
    }
    return last; /* rounding at the top end */
}

int db_accept_greedy(const int *draft, const int *target_argmax, int block, int *bonus)
{
    int a = 0;
    while (a + 1 < block && draft[a + 1] == target_argmax[a]) a++;
    *bonus = target_argmax[a];
    return a;
}

int db_accept_sample(const int *draft, const float *p, const float *q, int block, int v,
                     db_rng *rng, float *res, int *bonus)
{
    for (int t = 1; t < block; t++) {
        const float *pt = p + (size_t)(t - 1) * v, *qt = q + (size_t)t * v;
        int d = draft[t];
        double ratio = qt[d] > 0.0f ? (double)pt[d] / qt[d] : 0.0;
        double u = db_rng_uniform(rng);
        if (u < ratio) continue;
        /* rejected: bonus ~ normalize(max(p - q, 0)) */
        double sum = 0.0;
        for (int i = 0; i < v; i++) {
            float r = pt[i] - qt[i];
            res[i] = r > 0.0f ? r : 0.0f;
            sum += res[i];
        }
        *bonus = sum > 0.0 ? db_sample_index(res, v, rng) : db_sample_index(pt, v, rng);
        return t - 1;
    }
    *bonus = db_sample_index(p + (size_t)(block - 1) * v, v, rng);
    return block - 1;
}
