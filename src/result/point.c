/* point.c — a point's id and its samples' memory (point.h). */
#include "result/point.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
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

#define AXIS(col, prefix, type, field)                                                             \
    {col, prefix, type, offsetof(db_point_key, field), sizeof(((db_point_key *)0)->field)}
const db_axis db_point_axes[] = {
    AXIS("backend", "", DB_AXIS_STR, backend),
    AXIS("dataset", "", DB_AXIS_STR, dataset),
    AXIS("variant", "", DB_AXIS_STR, variant),
    AXIS("block_size", "B", DB_AXIS_INT, block_size),
    AXIS("concurrency", "c", DB_AXIS_INT, concurrency),
    AXIS("temperature", "T", DB_AXIS_FLOAT, temperature),
    AXIS("top_p", "p", DB_AXIS_FLOAT, top_p),
    AXIS("top_k", "k", DB_AXIS_INT, top_k),
    AXIS("max_new_tokens", "n", DB_AXIS_INT, max_new_tokens),
    AXIS("chat_template", "", DB_AXIS_STR, chat_template),
    AXIS("thinking", "think", DB_AXIS_INT, thinking),
    AXIS("acceptance_source", "", DB_AXIS_STR, acceptance_source),
    AXIS("weights", "", DB_AXIS_STR, weights),
    AXIS("target", "", DB_AXIS_STR, target),
    AXIS("drafter", "", DB_AXIS_STR, drafter),
    AXIS("request_rate", "r", DB_AXIS_RATE, request_rate),
    AXIS("depth", "D", DB_AXIS_COUNT, depth),
};
const int db_point_n_axes = (int)(sizeof db_point_axes / sizeof *db_point_axes);

void db_point_id(const db_point_key *k, char *buf, size_t n)
{
    size_t o = 0;
    if (!n) return;
    buf[0] = 0;
    for (int i = 0; i < db_point_n_axes && o < n; i++) {
        const db_axis *a = &db_point_axes[i];
        const char *f = (const char *)k + a->offset, *sep = i ? "|" : "";
        double r = a->type == DB_AXIS_RATE ? *(const double *)(const void *)f : 0;
        int iv = a->type == DB_AXIS_INT || a->type == DB_AXIS_COUNT ? *(const int *)(const void *)f : 0;
        int w = a->type == DB_AXIS_STR ? snprintf(buf + o, n - o, "%s%s%s", sep, a->id_prefix, f)
                : a->type == DB_AXIS_INT ? snprintf(buf + o, n - o, "%s%s%d", sep, a->id_prefix, iv)
                /* a count of 0 adds nothing, so ids of runs before the axis still match */
                : a->type == DB_AXIS_COUNT ? (iv ? snprintf(buf + o, n - o, "%s%s%d", sep, a->id_prefix, iv) : 0)
                : a->type == DB_AXIS_FLOAT ? snprintf(buf + o, n - o, "%s%s%g", sep, a->id_prefix, (double)*(const float *)(const void *)f)
                /* a closed loop (inf or 0) adds nothing, so ids of runs before the axis still match */
                : r > 0 && isfinite(r) ? snprintf(buf + o, n - o, "%s%s%g", sep, a->id_prefix, r)
                                       : 0;
        if (w < 0) break;
        o += (size_t)w;
    }
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 32 || *c == 127) *c = '?';
}

int db_point_axis_set(db_point_key *k, const db_axis *a, const char *value)
{
    char *f = (char *)k + a->offset, *end;
    if (a->type == DB_AXIS_STR) {
        if (strlen(value) >= a->size) return -1;
        memcpy(f, value, strlen(value) + 1);
        return 0;
    }
    errno = 0;
    if (a->type == DB_AXIS_INT || a->type == DB_AXIS_COUNT) {
        long v = strtol(value, &end, 10);
        if (!value[0] || *end || errno || v < INT_MIN || v > INT_MAX || (a->type == DB_AXIS_COUNT && v < 0)) return -1;
        *(int *)(void *)f = (int)v;
    } else if (a->type == DB_AXIS_FLOAT) {
        float v = strtof(value, &end);
        if (!value[0] || *end || errno) return -1;
        *(float *)(void *)f = v;
    } else {
        double v = strtod(value, &end); /* "inf": a closed loop */
        if (!value[0] || *end || errno || !(v >= 0)) return -1;
        *(double *)(void *)f = v;
    }
    return 0;
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
