/* shard.c — the partition of a sweep into shards (model and rules in shard.h). */
#include "cluster/shard.h"
#include "bench/device_preset.h"
#include "base/sha256.h"
#include "base/util.h"
#include "engine/variant.h"
#include "model/kv_cache.h"
#include "report/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int db_shard_parse(const char *s, db_shard *sh, char *err, size_t errlen)
{
    char *e1, *e2;
    long k = strtol(s, &e1, 10), n = e1 != s && *e1 == '/' ? strtol(e1 + 1, &e2, 10) : 0;
    if (e1 == s || *e1 != '/' || e2 == e1 + 1 || *e2 || n < 1 || n > 4096 || k < 0 || k >= n)
        return db_fail(err, errlen, DB_EINPUT, "--shard '%s': want K/N with 0 <= K < N <= 4096 (e.g. 0/4)", s);
    sh->index = (int)k;
    sh->count = (int)n;
    return DB_OK;
}

/* keys that do not change what is measured (shard.h) */
static int key_unhashed(const char *k)
{
    return !strcmp(k, "out") || !strcmp(k, "output") || !strcmp(k, "threads");
}

static void hash_line(db_sha256 *h, const char *k, const char *v)
{
    db_sha256_update(h, k, strlen(k));
    db_sha256_update(h, "=", 1);
    db_sha256_update(h, v, strlen(v));
    db_sha256_update(h, "\n", 1);
}

void db_sweep_hash(const db_sweep *sw, char hex[65])
{
    db_sha256 h;
    unsigned char d[32];
    db_sha256_init(&h);
    for (int i = 0; db_sweep_key(i); i++) {
        char v[2048];
        if (key_unhashed(db_sweep_key(i))) continue;
        db_sweep_get(sw, db_sweep_key(i), v, sizeof v);
        hash_line(&h, db_sweep_key(i), v);
    }
    db_sha256_final(&h, d);
    db_sha256_hex(d, hex);
}

int db_sweep_hash_json(const cJSON *rec, char hex[65], char *err, size_t errlen)
{
    db_sweep sw;
    db_sweep_init(&sw);
    const cJSON *e;
    cJSON_ArrayForEach(e, rec)
    {
        if (!cJSON_IsString(e)) return db_fail(err, errlen, DB_EINPUT, "sweep.%s is not a string", e->string);
        char why[512];
        if (db_sweep_set(&sw, e->string, e->valuestring, why, sizeof why))
            return db_fail(err, errlen, DB_EINPUT, "recorded sweep: %s", why);
    }
    db_sweep_hash(&sw, hex);
    return DB_OK;
}

int db_group_end(const db_point_key *keys, int n, int i0)
{
    int i = i0 + 1;
    const db_point_key *a = &keys[i0];
    while (i < n && keys[i].target_i == a->target_i && !strcmp(keys[i].backend, a->backend) && !strcmp(keys[i].dataset, a->dataset) &&
           keys[i].temperature == a->temperature && keys[i].concurrency == a->concurrency &&
           keys[i].request_rate == a->request_rate && keys[i].depth == a->depth)
        i++;
    return i;
}

double db_shard_point_cost(const db_model_config *t, const db_drafter_config *d, db_dtype dt,
                           const db_sweep *sw, const db_point_key *k, int n_prompts, double mean_prompt,
                           const db_hw *hw_given)
{
    db_dtype kv = DB_F32;
    db_kv_dtype_parse(sw->kv_dtype, sw->backend[0], &kv); /* the sweep's K/V caches: bytes attention reads */
    int draft = db_variant_uses_drafter(db_variant_lookup(k->variant)) && d;
    int B = draft ? k->block_size : 1, n = n_prompts > 0 ? n_prompts : 1;
    int N = k->concurrency < n ? k->concurrency : n;
    db_hw hw = {.bw = (sw->bandwidth_gbs > 0 ? sw->bandwidth_gbs : DB_SHARD_FLAT_GBS) * 1e9,
                .flops = (sw->gflops > 0 ? sw->gflops : DB_SHARD_FLAT_GFLOPS) * 1e9};
    char e2[700];
    if (hw_given) hw = *hw_given;
    else if (sw->device_config[0] && db_device_preset_load(sw->device_config, &hw, e2, sizeof e2)) /* checked when set */
        hw = (db_hw){.bw = DB_SHARD_FLAT_GBS * 1e9, .flops = DB_SHARD_FLAT_GFLOPS * 1e9};
    double tau = 1;
    for (int i = 1; draft && i < B; i++) tau += pow(0.8, i);
    double wave = db_roofline_wave(t, d, dt, &hw, k, N, mean_prompt, k->max_new_tokens,
                                   tau, ceil(k->max_new_tokens / tau), kv);
    double waves = ceil((double)n / N), pass = waves * wave;
    /* a warm-up is one wave; a calibrated round lasts a whole number of uncalibrated passes,
     * at least min_time (bench/runner.h) */
    double warm = wave;
    double round = sw->min_time > pass && sw->warmup > 0 ? ceil(sw->min_time / pass) * pass : pass;
    /* arrivals at a finite rate: the pass lasts its n requests' schedule at least (the queue's
     * tail past the last arrival aside) */
    if (k->request_rate > 0 && isfinite(k->request_rate)) round = fmax(pass, n / k->request_rate);
    return sw->warmup * warm + sw->repetitions * round;
}

typedef struct {
    int i0, i1;
    double cost;
} group;

static int by_cost(const void *a, const void *b)
{
    const group *x = a, *y = b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    return x->i0 - y->i0;
}

int db_shard_assign(const db_point_key *keys, int n, const double *cost, int count, int *shard_of)
{
    group *g = db_malloc(sizeof *g * (size_t)(n > 0 ? n : 1));
    double *load = db_calloc((size_t)count, sizeof *load);
    if (!g || !load) {
        free(g), free(load);
        return DB_ERUNTIME;
    }
    int ng = 0;
    for (int i0 = 0, i1; i0 < n; i0 = i1) {
        i1 = db_group_end(keys, n, i0);
        g[ng] = (group){i0, i1, 0};
        for (int i = i0; i < i1; i++) g[ng].cost += cost[i];
        ng++;
    }
    qsort(g, (size_t)ng, sizeof *g, by_cost);
    for (int j = 0; j < ng; j++) {
        int best = 0;
        for (int s = 1; s < count; s++)
            if (load[s] < load[best]) best = s;
        load[best] += g[j].cost;
        for (int i = g[j].i0; i < g[j].i1; i++) shard_of[i] = best;
    }
    free(g), free(load);
    return DB_OK;
}

int db_shard_apply(const db_shard *sh, const char *hash, db_point_key *keys, int *n, const double *cost,
                   cJSON **meta, char *err, size_t errlen)
{
    int *of = db_malloc(sizeof *of * (size_t)(*n > 0 ? *n : 1));
    cJSON *o = cJSON_CreateObject(), *pts = NULL;
    if (o && cJSON_AddNumberToObject(o, "index", sh->index) && cJSON_AddNumberToObject(o, "count", sh->count) &&
        cJSON_AddStringToObject(o, "sweep_hash", hash) &&
        cJSON_AddStringToObject(o, "cost_model", "roofline seconds of the point's passes, tau assumed sum 0.8^i (README, Sharded sweeps)"))
        pts = cJSON_AddArrayToObject(o, "points");
    int rc = of && pts ? db_shard_assign(keys, *n, cost, sh->count, of) : DB_ERUNTIME;
    for (int i = 0; i < *n && !rc; i++) {
        char id[DB_POINT_ID_MAX];
        db_point_id(&keys[i], id, sizeof id);
        cJSON *p = cJSON_CreateObject();
        if (!p || !cJSON_AddItemToArray(pts, p) || !cJSON_AddStringToObject(p, "point_id", id) ||
            !cJSON_AddNumberToObject(p, "shard", of[i]) || !cJSON_AddNumberToObject(p, "cost_s", cost[i]))
            rc = DB_ERUNTIME;
    }
    int m = 0;
    for (int i = 0; i < *n && !rc; i++)
        if (of[i] == sh->index) keys[m++] = keys[i];
    if (!rc) *n = m;
    free(of);
    if (rc) {
        cJSON_Delete(o);
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory partitioning %d points into %d shards", *n, sh->count);
    }
    *meta = o;
    return DB_OK;
}

int db_shard_recorded(const char *dir, db_shard *sh, char *err, size_t errlen)
{
    char path[1200], *text = NULL;
    size_t len;
    sh->index = sh->count = 0;
    if (db_path_join(path, sizeof path, dir, "meta.json") != 0 || access(path, F_OK) != 0) return DB_OK;
    int rc = db_read_file(path, &text, &len, err, errlen);
    if (rc) return rc;
    int oom;
    cJSON *j = db_json_parse(text, strlen(text), &oom), *s = cJSON_GetObjectItemCaseSensitive(j, "shard");
    free(text);
    if (oom) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory parsing it", path);
    if (s) {
        cJSON *k = cJSON_GetObjectItemCaseSensitive(s, "index"), *c = cJSON_GetObjectItemCaseSensitive(s, "count");
        if (!cJSON_IsNumber(k) || !cJSON_IsNumber(c) || c->valueint < 1 || k->valueint < 0 || k->valueint >= c->valueint)
            rc = db_fail(err, errlen, DB_EINPUT, "%s: shard: index / count missing or out of range", path);
        else
            sh->index = k->valueint, sh->count = c->valueint;
    }
    cJSON_Delete(j);
    return rc;
}
