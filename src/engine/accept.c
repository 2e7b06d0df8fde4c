/* accept.c — see accept.h. */
#include "engine/accept.h"


int db_sample_index(const float *probs, int n, db_rng *rng)
{
    return db_sample_index_u(probs, n, db_rng_uniform(rng));
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
    double u[DB_MAX_BLOCK];
    db_accept_uniforms(rng, block, u);
    int a = db_accept_sample_u(draft, p, q + v, NULL, 0, block, v, u, res, bonus);
    db_accept_consume(rng, block, a);
    return a;
}

void db_accept_uniforms(const db_rng *rng, int block, double *u)
{
    db_rng peek = *rng;
    for (int i = 0; i < block; i++) u[i] = db_rng_uniform(&peek);
}

void db_accept_consume(db_rng *rng, int block, int accepted)
{
    int used = accepted + 2 < block ? accepted + 2 : block;
    for (int i = 0; i < used; i++) (void)db_rng_uniform(rng);
}
