/* device_probe.c — the roofline's device figures, measured in passes (device_probe.h).
 *
 * Notation: O x I the big weight (I = 4096; O rows make `bytes`), N = 512 rows of the flat-rate
 * matmul over a square [I, I] weight; a layer copy is the model's seven matrices carved out of
 * the big weight; the attention caches are NL layers of `cap` positions. */
#include "bench/device_probe.h"
#include "base/quantile.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- one figure's calls over passes ---- */

static int imin(int a, int b) { return a < b ? a : b; }

void db_probe_figure_pass(db_probe_figure *f, int k, int passes, double (*clock)(void))
{
    if (passes < 1) passes = 1;
    if (k >= passes) k = passes - 1;
    double share = (double)(k + 1) / passes;
    int max_calls = imin(f->max_calls, DB_PROBE_MAX_CALLS);
    int cap = imin(max_calls, (int)ceil(max_calls * share));
    int calls = (int)ceil(f->min_calls * share);
    double secs = f->min_total * share;
    if (f->n == 0 && cap > 0) f->call(f->ctx, 0); /* warm-up, untimed */
    while (f->n < cap && (f->n < calls || f->total < secs)) {
        double t0 = clock();
        f->call(f->ctx, f->n + 1);
        double t = clock() - t0;
        f->t[f->n++] = t;
        f->total += t;
    }
}

double db_probe_figure_median(const db_probe_figure *f)
{
    if (f->n == 0) return 0;
    double t[DB_PROBE_MAX_CALLS];
    memcpy(t, f->t, sizeof(double) * (size_t)f->n);
    return db_quantile(t, f->n, 0.5);
}

/* ---- the device's calls ---- */

/* One layer's seven matrices of a model's shapes ([O, K]: q, k, v, o, gate, up, down), carved
 * `ncopy` times out of the big weight; every layer call takes the next copy (one counter for
 * all row counts, so no copy comes back before ncopy calls): the weights come from memory as
 * in a forward. */
typedef struct {
    int O[7], K[7], ncopy;
    double params; /* of one copy */
    size_t bytes;  /* of one copy */
} layer_mats;

static void layer_mats_init(layer_mats *m, const db_model_config *c, db_dtype dt, size_t buf_bytes)
{
    int H = c->hidden, I = c->intermediate, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    const int O[7] = {q, kv, kv, H, I, I, H}, K[7] = {H, H, H, q, H, H, I};
    m->params = 0, m->bytes = 0;
    for (int i = 0; i < 7; i++) {
        m->O[i] = O[i], m->K[i] = K[i];
        m->params += (double)O[i] * K[i];
        m->bytes += (size_t)O[i] * db_dtype_bytes(dt, (size_t)K[i]);
    }
    m->ncopy = m->bytes ? (int)(buf_bytes / m->bytes) : 0;
}

enum { CTX = 256, NL = 16, RMAX = 16 }; /* attention: cached keys, layers of caches, query rows */
enum { F_GEMV, F_MM, F_LAYER, F_ATTN = F_LAYER + DB_HW_RATE_ROWS, F_NORM = F_ATTN + DB_HW_ATTN_ROWS, NF };

typedef struct {
    db_hw_probe *p;
    int f; /* which figure (F_*) */
} fig_ctx;

struct db_hw_probe {
    db_backend *be;
    db_dtype dt;
    int passes, done;
    int I, O, N;
    db_weight w;        /* [O, I]: the GEMV's weight; the layer copies are carved from it */
    db_weight m;        /* [I, I]: the flat-rate matmul's */
    float *x, *y;       /* [max(N, 256), widest K] in, [max(N, 256), widest O] (or [1, O]) out */
    layer_mats lm;      /* lm.ncopy >= 2, else no rate table */
    int next_copy;      /* the layer copy of the next layer call */
    int has_attn;       /* the model's attention figures are measured */
    int nh, nkv, hd, cap, hidden;
    size_t per;         /* floats of one layer's cache */
    float *kc, *vc;     /* [NL][cap][nkv * hd] */
    float *q, *out;     /* [RMAX][nh * hd] */
    float *nx;          /* [2][hidden]: rmsnorm input, weight */
    int next_layer;     /* the cache layer of the next attention call */
    db_attn_row rows[DB_HW_ATTN_ROWS][RMAX];
    size_t bytes;       /* device bytes held */
    db_probe_figure fig[NF];
    fig_ctx ctx[NF];
};

static void call_fig(void *vctx, int it)
{
    const fig_ctx *c = vctx;
    db_hw_probe *p = c->p;
    db_backend *be = p->be;
    (void)it;
    if (c->f == F_GEMV) {
        be->ops->matmul(be, p->y, p->x, &p->w, 1, 0);
    } else if (c->f == F_MM) {
        be->ops->matmul(be, p->y, p->x, &p->m, p->N, 0);
    } else if (c->f < F_ATTN) {
        const char *src = (const char *)p->w.data + (size_t)p->next_copy * p->lm.bytes;
        p->next_copy = (p->next_copy + 1) % p->lm.ncopy;
        for (int i = 0; i < 7; i++) {
            db_weight w = p->w;
            w.rows = p->lm.O[i], w.cols = p->lm.K[i], w.data = (void *)src;
            be->ops->matmul(be, p->y, p->x, &w, 1 << (c->f - F_LAYER), 0);
            src += (size_t)p->lm.O[i] * db_dtype_bytes(p->w.dtype, (size_t)p->lm.K[i]);
        }
    } else if (c->f < F_NORM) {
        int i = c->f - F_ATTN;
        size_t off = p->per * (size_t)p->next_layer;
        p->next_layer = (p->next_layer + 1) % NL;
        be->ops->attention(be, p->out, p->q, p->kc + off, p->vc + off, p->cap, p->rows[i], 1 << i,
                           p->nh, p->nkv, p->hd, 0.088f);
    } else {
        be->ops->rmsnorm(be, p->nx, p->nx, p->nx + p->hidden, 1, p->hidden, 1e-6f);
    }
    be->ops->sync(be);
}

static void *alloc_counted(db_hw_probe *p, size_t bytes)
{
    void *d = p->be->ops->alloc(p->be, bytes);
    if (d) p->bytes += bytes;
    return d;
}

static int alloc_attention(db_hw_probe *p, const db_model_config *c, char *err, size_t errlen)
{
    p->nh = c->n_heads, p->nkv = c->n_kv_heads, p->hd = c->head_dim, p->cap = CTX + RMAX;
    p->hidden = c->hidden;
    size_t kvw = (size_t)p->nkv * p->hd, qw = (size_t)p->nh * p->hd;
    p->per = (size_t)p->cap * kvw;
    p->kc = alloc_counted(p, sizeof(float) * p->per * NL);
    p->vc = alloc_counted(p, sizeof(float) * p->per * NL);
    p->q = alloc_counted(p, sizeof(float) * qw * RMAX);
    p->out = alloc_counted(p, sizeof(float) * qw * RMAX);
    p->nx = alloc_counted(p, sizeof(float) * (size_t)c->hidden * 2);
    if (!p->kc || !p->vc || !p->q || !p->out || !p->nx)
        return db_fail(err, errlen, DB_ERUNTIME, "cannot allocate %.0f MiB to measure attention",
                       2.0 * sizeof(float) * p->per * NL / DB_MIB);
    db_backend *be = p->be;
    if (db_fill_random(be, p->kc, p->per * NL, DB_F32, 4, 0, 1.0f, 0.0f) != 0 ||
        db_fill_random(be, p->vc, p->per * NL, DB_F32, 5, 0, 1.0f, 0.0f) != 0 ||
        db_fill_random(be, p->q, qw * RMAX, DB_F32, 6, 0, 1.0f, 0.0f) != 0 ||
        db_fill_random(be, p->nx, (size_t)c->hidden * 2, DB_F32, 7, 0, 1.0f, 1.0f) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "measuring attention: %s", be->err);
    for (int i = 0; i < DB_HW_ATTN_ROWS; i++)
        for (int r = 0; r < (1 << i); r++) p->rows[i][r] = (db_attn_row){0, 0, CTX + r + 1}; /* causal block */
    p->has_attn = 1;
    return DB_OK;
}

static void add_fig(db_hw_probe *p, int f, int min_calls, int max_calls, double min_total, double budget)
{
    p->ctx[f] = (fig_ctx){p, f};
    db_probe_figure *g = &p->fig[f];
    g->call = call_fig, g->ctx = &p->ctx[f];
    g->min_calls = (int)ceil(min_calls * budget);
    g->max_calls = imin(DB_PROBE_MAX_CALLS, (int)ceil(max_calls * budget));
    g->min_total = min_total * budget;
}

int db_hw_probe_init(db_hw_probe **out, db_backend *be, db_dtype dt, size_t bytes,
                     const db_model_config *shape, int passes, double budget, char *err,
                     size_t errlen)
{
    *out = NULL;
    db_hw_probe *p = db_calloc(1, sizeof *p);
    if (!p) return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the device probe");
    if (db_dtype_is_quant(dt)) dt = DB_BF16; /* random weights are not made quantized */
    p->be = be, p->dt = dt, p->passes = passes < 1 ? 1 : passes;
    if (budget <= 0) budget = 1;
    size_t avail = db_mem_available(be);
    if (bytes == 0) {
        bytes = (size_t)512 << 20;
        if (avail && bytes > avail / 8) bytes = avail / 8;
        if (bytes < ((size_t)16 << 20)) bytes = (size_t)16 << 20;
    }
    size_t es = db_dtype_size(dt);
    p->I = 4096, p->N = 512;
    p->O = (int)(bytes / es / (size_t)p->I);
    if (p->O < 1) p->O = 1;
    if (shape) layer_mats_init(&p->lm, shape, dt, (size_t)p->O * p->I * es);
    /* x and y hold [256, widest K] and [256, widest O] of the layer too */
    size_t nx = (size_t)p->N * p->I, ny = (size_t)p->N * p->I > (size_t)p->O ? (size_t)p->N * p->I : (size_t)p->O;
    for (int i = 0; p->lm.ncopy > 0 && i < 7; i++) {
        if ((size_t)256 * p->lm.K[i] > nx) nx = (size_t)256 * p->lm.K[i];
        if ((size_t)256 * p->lm.O[i] > ny) ny = (size_t)256 * p->lm.O[i];
    }
    p->w.dtype = p->m.dtype = dt;
    p->w.rows = p->O;
    p->w.cols = p->m.rows = p->m.cols = p->I;
    p->w.data = alloc_counted(p, (size_t)p->O * p->I * es);
    p->m.data = alloc_counted(p, (size_t)p->I * p->I * es);
    p->x = alloc_counted(p, sizeof(float) * nx);
    p->y = alloc_counted(p, sizeof(float) * ny);
    int rc = DB_OK;
    if (!p->w.data || !p->m.data || !p->x || !p->y)
        rc = db_fail(err, errlen, DB_ERUNTIME, "cannot allocate %.0f MiB to measure the device",
                     (double)((size_t)p->O * p->I * es) / DB_MIB);
    if (!rc && (db_fill_random(be, p->w.data, (size_t)p->O * p->I, dt, 1, 0, 0.03f, 0.0f) != 0 ||
                db_fill_random(be, p->m.data, (size_t)p->I * p->I, dt, 2, 0, 0.03f, 0.0f) != 0 ||
                db_fill_random(be, p->x, nx, DB_F32, 3, 0, 1.0f, 0.0f) != 0))
        rc = db_fail(err, errlen, DB_ERUNTIME, "measuring the device: %s", be->err);
    if (!rc && shape && p->lm.ncopy >= 2) rc = alloc_attention(p, shape, err, errlen);
    if (rc) {
        db_hw_probe_free(p);
        return rc;
    }
    /* per stand-alone measurement: 3 to 50 calls and 0.3 s of each matmul figure, 4 to 200
     * calls and 0.1 s of attention and rmsnorm (short calls: more of them for a median) */
    add_fig(p, F_GEMV, 3, 50, 0.3, budget);
    add_fig(p, F_MM, 3, 50, 0.3, budget);
    for (int i = 0; p->lm.ncopy >= 2 && i < DB_HW_RATE_ROWS; i++) add_fig(p, F_LAYER + i, 3, 50, 0.3, budget);
    for (int i = 0; p->has_attn && i < DB_HW_ATTN_ROWS; i++) add_fig(p, F_ATTN + i, 4, 200, 0.1, budget);
    if (p->has_attn) add_fig(p, F_NORM, 4, 200, 0.1, budget);
    *out = p;
    return DB_OK;
}

int db_hw_probe_pass(db_hw_probe *p, char *err, size_t errlen)
{
    if (p->done >= p->passes) return DB_OK;
    for (int f = 0; f < NF; f++)
        if (p->fig[f].call) db_probe_figure_pass(&p->fig[f], p->done, p->passes, db_now);
    p->done++;
    if (p->be->ops->sync(p->be) != 0)
        return db_fail(err, errlen, DB_ERUNTIME, "measuring the device: %s", p->be->err);
    return DB_OK;
}

int db_hw_probe_finish(db_hw_probe *p, char *err, size_t errlen)
{
    int rc = DB_OK;
    while (!rc && p->done < p->passes) rc = db_hw_probe_pass(p, err, errlen);
    return rc;
}

void db_hw_probe_result(const db_hw_probe *p, db_hw *hw)
{
    memset(hw, 0, sizeof *hw);
    size_t es = db_dtype_size(p->dt);
    double t = db_probe_figure_median(&p->fig[F_GEMV]);
    if (t > 0) hw->bw = (double)p->O * p->I * es / t;
    t = db_probe_figure_median(&p->fig[F_MM]);
    if (t > 0) hw->flops = 2.0 * p->N * p->I * (double)p->I / t;
    for (int i = 0; i < DB_HW_RATE_ROWS; i++)
        if ((t = db_probe_figure_median(&p->fig[F_LAYER + i])) > 0) hw->rate[i] = 2.0 * (1 << i) * p->lm.params / t;
    for (int i = 0; i < DB_HW_ATTN_ROWS; i++) {
        double keys = CTX + ((1 << i) + 1) / 2.0;
        if ((t = db_probe_figure_median(&p->fig[F_ATTN + i])) > 0)
            hw->attn_rate[i] = 4.0 * (1 << i) * p->nh * (double)p->hd * keys / t;
    }
    hw->op_s = db_probe_figure_median(&p->fig[F_NORM]);
    if (!(hw->attn_rate[0] > 0 && hw->op_s > 0)) memset(hw->attn_rate, 0, sizeof hw->attn_rate), hw->op_s = 0;
    const char *plural = p->done == 1 ? "" : "es"; /* "pass" / "passes" */
    snprintf(hw->bw_source, sizeof hw->bw_source,
             "measured: GEMV, 1 row x [%d, %d] %s weights (%.0f MiB read once), median of %d calls over %d pass%s",
             p->O, p->I, db_dtype_name(p->dt), (double)p->O * p->I * es / DB_MIB, p->fig[F_GEMV].n, p->done, plural);
    snprintf(hw->flops_source, sizeof hw->flops_source,
             "measured: matmul, %d rows x [%d, %d] %s weights, median of %d calls over %d pass%s",
             p->N, p->I, p->I, db_dtype_name(p->dt), p->fig[F_MM].n, p->done, plural);
}

size_t db_hw_probe_bytes(const db_hw_probe *p) { return p ? p->bytes : 0; }

void db_hw_probe_free(db_hw_probe *p)
{
    if (!p) return;
    db_weight_free(p->be, &p->w);
    db_weight_free(p->be, &p->m);
    float *bufs[] = {p->x, p->y, p->kc, p->vc, p->q, p->out, p->nx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) p->be->ops->dfree(p->be, bufs[i]);
    free(p);
}

void db_hw_apply_given(db_hw *hw, double bw_gbs, double gflops)
{
    if (bw_gbs > 0 || gflops > 0) { /* this device's attention and op figures are not the given one's */
        memset(hw->attn_rate, 0, sizeof hw->attn_rate);
        hw->op_s = 0;
    }
    if (bw_gbs > 0) {
        hw->bw = bw_gbs * 1e9;
        snprintf(hw->bw_source, sizeof hw->bw_source, "given: --bandwidth-gbs %g", bw_gbs);
    }
    if (gflops > 0) {
        hw->flops = gflops * 1e9;
        memset(hw->rate, 0, sizeof hw->rate); /* a given rate holds at every row count */
        snprintf(hw->flops_source, sizeof hw->flops_source, "given: --gflops %g", gflops);
    }
}

/* ---- one stand-alone measurement (capacity.h) ---- */

int db_hw_measure(db_backend *be, db_dtype dt, size_t bytes, const db_model_config *shape,
                  db_hw *hw, char *err, size_t errlen)
{
    memset(hw, 0, sizeof *hw);
    db_hw_probe *p;
    int rc = db_hw_probe_init(&p, be, dt, bytes, shape, DB_PROBE_PASSES, 1, err, errlen);
    if (rc) return rc;
    rc = db_hw_probe_finish(p, err, errlen);
    if (!rc) db_hw_probe_result(p, hw);
    db_hw_probe_free(p);
    return rc;
}

int db_hw_figures(db_backend *be, db_dtype dt, double bw_gbs, double gflops,
                  const db_model_config *shape, db_hw *hw, char *err, size_t errlen)
{
    memset(hw, 0, sizeof *hw);
    int rc = bw_gbs > 0 && gflops > 0 ? DB_OK : db_hw_measure(be, dt, 0, shape, hw, err, errlen);
    if (!rc) db_hw_apply_given(hw, bw_gbs, gflops);
    return rc;
}
