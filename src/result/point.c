/* point.c — a point's id and its samples' memory (point.h). */
#include "result/point.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int db_point_key_equal(const db_point_key *a, const db_point_key *b)
{
    char x[DB_POINT_ID_MAX], y[DB_POINT_ID_MAX];
    db_point_id(a, x, sizeof x);
    db_point_id(b, y, sizeof y);
    return strcmp(x, y) == 0;
}

void db_point_id(const db_point_key *k, char *buf, size_t n)
{
    int w = snprintf(buf, n, "%s|%s|%s|B%d|c%d|T%g|p%g|k%d|n%d|%s|think%d|%s|%s|%s|%s", k->backend, k->dataset,
                     k->variant, k->block_size, k->concurrency, (double)k->temperature, (double)k->top_p,
                     k->top_k, k->max_new_tokens, k->chat_template, k->thinking, k->acceptance_source,
                     k->weights, k->target, k->drafter);
    if (w >= 0 && (size_t)w < n && k->request_rate > 0 && isfinite(k->request_rate))
        snprintf(buf + w, n - (size_t)w, "|r%g", k->request_rate);
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 32 || *c == 127) *c = '?';
}

void db_point_raw_free(db_point_raw *p)
{
    free(p->wall_s);
    free(p->rep_start_s);
    free(p->reqs);
    free(p->itl_s);
    p->itl_s = NULL;
    p->n_itl = p->cap_itl = 0;
    p->rep_start_s = NULL;
    p->wall_s = NULL;
    p->reqs = NULL;
}
