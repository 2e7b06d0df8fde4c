/* test_tp.c — the tensor-parallel prediction (cluster/tp.h) against hand computations on the
 * 27B-class preset (configs/models/qwen3-27b-class*.json: H 5120, 52 target layers, 8 KV heads;
 * a 5-layer drafter of H 5120), NVLink preset 450 GB/s and 10 us, bf16 (2 bytes on the wire):
 *   ar step, N = 8, n = 4: 2 x 52 all-reduces of 8 x 5120 x 2 = 81920 bytes,
 *     104 x (2 x 3/4 x 81920 / 450e9 + 10e-6) = 104 x 1.02730667e-5 = 1.06839893e-3 s
 *   cycle, N = 8, B = 8 (64 rows of 655360 bytes), n = 4: (2 x 5 + 2 x 52) all-reduces,
 *     114 x (1.5 x 655360 / 450e9 + 10e-6) = 114 x 1.218453333e-5 = 1.38903680e-3 s
 * and n = 1 none; memory per GPU: weights / n, KV / min(n, 8), activations whole. */
#include "cluster/tp.h"
#include "tap.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b) + 1e-15; }

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    char err[512], tpath[1200], dpath[1200];
    const char *root = getenv("DB_SOURCE_ROOT");
    snprintf(tpath, sizeof tpath, "%s/configs/models/qwen3-27b-class.json", root ? root : ".");
    snprintf(dpath, sizeof dpath, "%s/configs/models/qwen3-27b-class-dflash2.json", root ? root : ".");
    db_model_config t;
    db_drafter_config d;
    if (db_model_config_load(&t, tpath, err, sizeof err) || db_drafter_config_load(&d, dpath, t.n_layers, err, sizeof err)) {
        printf("1..0 # SKIP %s\n", err);
        return 0;
    }
    db_link l;
    tap_ok(db_link_preset("nvlink", &l, err, sizeof err) == 0 && l.gbs == 450 && l.latency_us == 10, "nvlink preset 450 GB/s, 10 us");
    tap_ok(db_link_preset("infiniband", &l, err, sizeof err) == DB_EINPUT, "unknown link refused");
    db_link_preset("nvlink", &l, err, sizeof err);
    tap_ok(fabs(db_allreduce_s(81920, 4, &l) - 1.02730667e-5) < 1e-13,
           "one all-reduce of 81920 bytes on 4 GPUs: 1.02730667e-5 s (%.9g)", db_allreduce_s(81920, 4, &l));
    tap_ok(db_allreduce_s(1e9, 1, &l) == 0, "one GPU: no all-reduce");

    db_hw hw = {.bw = 4.8e12, .flops = 989e12};
    db_step_shape ar = {.concurrency = 8, .block = 1, .ctx = 1024, .tau = 1};
    db_step_shape cy = {.concurrency = 8, .block = 8, .ctx = 1024, .tau = 4, .use_conv = 1, .use_sel = 1};
    db_mem_need m1 = {.weights = 64e9, .kv = 8e9, .act = 1e9};
    db_tp_row r;
    db_tp_predict(&t, &d, DB_BF16, &hw, &l, 4, &ar, &cy, &m1, 141e9, &r);
    tap_ok(fabs(r.ar_comm_s - 1.06839893e-3) < 1e-11, "ar step, N 8, tp 4: all-reduce 1.06839893 ms by hand (%.9g ms)", 1e3 * r.ar_comm_s);
    tap_ok(fabs(r.cyc_comm_s - 1.38903680e-3) < 1e-11, "cycle, N 8, B 8, tp 4: all-reduce 1.38903680 ms by hand (%.9g ms)", 1e3 * r.cyc_comm_s);
    tap_ok(near(r.weights, 16e9) && near(r.kv, 2e9) && near(r.act, 1e9) && r.fits, "tp 4: weights / 4, KV / 4, activations whole, fits 141 GB");
    tap_ok(near(r.ar_tok_s, 8 / (r.ar_compute_s + r.ar_comm_s)) && near(r.cyc_tok_s, 8 * 4 / (r.cyc_compute_s + r.cyc_comm_s)),
           "tok/s = N (x tau) / (compute + all-reduce)");
    db_step_cost one;
    db_roofline_step(&t, NULL, DB_BF16, &hw, &ar, &one);
    db_tp_row r1;
    db_tp_predict(&t, &d, DB_BF16, &hw, &l, 1, &ar, &cy, &m1, 70e9, &r1);
    tap_ok(r1.ar_comm_s == 0 && r1.cyc_comm_s == 0 && near(r1.ar_compute_s, one.t) && !r1.fits,
           "tp 1: the one-GPU roofline, no all-reduce, 73 GB does not fit in 70");
    db_tp_predict(&t, &d, DB_BF16, &hw, &l, 16, &ar, &cy, &m1, 0, &r);
    tap_ok(near(r.kv, 1e9) && near(r.weights, 4e9) && r.fits, "tp 16 > 8 KV heads: KV / 8 (heads replicated), weights / 16");
    tap_ok(r.ar_compute_s < r1.ar_compute_s, "more GPUs, less compute time per step");
    return tap_done();
}
