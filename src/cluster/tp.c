/* tp.c — the tensor-parallel prediction (model in tp.h). */
#include "cluster/tp.h"
#include "base/util.h"

#include <stdio.h>
#include <string.h>

int db_link_preset(const char *name, db_link *l, char *err, size_t errlen)
{
    /* README *Capacity planning* gives the sources: NVLink 4 (H100 / H200 SXM) 900 GB/s per GPU
     * both directions together; PCIe 5.0 x16 ~64 GB/s per direction; latencies are assumptions */
    if (!strcmp(name, "nvlink")) *l = (db_link){"nvlink", 450, 10};
    else if (!strcmp(name, "pcie")) *l = (db_link){"pcie", 64, 25};
    else return db_fail(err, errlen, DB_EINPUT, "--link '%s': nvlink or pcie (or --link-gbs / --link-latency-us)", name);
    return DB_OK;
}

double db_allreduce_s(double bytes, int n, const db_link *l)
{
    if (n <= 1) return 0;
    return 2.0 * (n - 1) / n * bytes / (l->gbs * 1e9) + l->latency_us * 1e-6;
}

void db_tp_predict(const db_model_config *t, const db_drafter_config *d, db_dtype dt, const db_hw *hw,
                   const db_link *l, int n, const db_step_shape *ar, const db_step_shape *cy,
                   const db_mem_need *mem1, double gpu_mem, db_tp_row *out)
{
    double e = dt == DB_F32 ? 4 : 2;
    int kv_split = n < t->n_kv_heads ? n : t->n_kv_heads;
    memset(out, 0, sizeof *out);
    out->tp = n;
    out->concurrency = ar->concurrency;
    out->weights = mem1->weights / n;
    out->kv = mem1->kv / (kv_split > 0 ? kv_split : 1);
    out->act = mem1->act;
    out->fits = gpu_mem <= 0 || out->weights + out->kv + out->act <= gpu_mem;
    db_hw split = *hw; /* each GPU: 1/n of every kernel's bytes and FLOPs */
    split.bw *= n;
    split.flops *= n;
    for (int i = 0; i < DB_HW_RATE_ROWS; i++) split.rate[i] *= n; /* the same rows, 1/n of each matrix */
    for (int i = 0; i < DB_HW_ATTN_ROWS; i++) split.attn_rate[i] *= n; /* 1/n of the heads */
    db_step_cost c;
    db_roofline_step(t, NULL, dt, &split, ar, &c);
    out->ar_compute_s = c.t;
    out->ar_comm_s = 2.0 * t->n_layers * db_allreduce_s(ar->concurrency * (double)t->hidden * e, n, l);
    out->ar_tok_s = ar->concurrency / (out->ar_compute_s + out->ar_comm_s);
    if (!d || !cy) return;
    db_roofline_step(t, d, dt, &split, cy, &c);
    double rows = (double)cy->concurrency * cy->block;
    out->cyc_compute_s = c.t;
    out->cyc_comm_s = 2.0 * d->base.n_layers * db_allreduce_s(rows * d->base.hidden * e, n, l) +
                      2.0 * t->n_layers * db_allreduce_s(rows * t->hidden * e, n, l);
    out->cyc_tok_s = cy->concurrency * cy->tau / (out->cyc_compute_s + out->cyc_comm_s);
}
