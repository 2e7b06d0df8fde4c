/* tp.h — tensor-parallel capacity planning (`plan --tp 1,2,4,8`): a prediction of what n GPUs
 * sharing one target / drafter pair by tensor parallelism need and deliver. Nothing here runs on
 * several devices (docs/tensor-parallel.md designs the execution this models).
 *
 * Notation: n GPUs, N requests, B block size, L_t / L_d target / drafter layers, H_t / H_d their
 * hidden sizes, e bytes per activation element on the wire (the weights' dtype, as serving
 * engines all-reduce in bf16 / f16; 4 for f32), nkv the target's KV heads.
 *
 * Per GPU memory: weights / n (every matrix split by heads or by the intermediate / vocabulary
 * dimension; norm vectors, < 0.01%, counted split too), KV / min(n, nkv) (KV heads split; past
 * nkv GPUs a head is replicated), activations as on one GPU (the residual stream is replicated
 * after each all-reduce: an upper bound). A row fits when their sum is at most the GPU memory.
 *
 * Per GPU time: every kernel of the one-GPU roofline (capacity.h) does 1/n of the bytes and the
 * FLOPs, i.e. the one-GPU step at n × bandwidth and n × matmul rate, plus the all-reduces. A
 * layer has two (after attention's o_proj and after the MLP's down_proj, the row-parallel
 * matrices); one all-reduce of S bytes on a ring of n GPUs costs
 *     t_ar(S) = 2(n−1)/n × S / link bandwidth + link latency        (0 for n = 1)
 *   ar step  2 L_t all-reduces of S = N × H_t × e
 *   cycle    2 L_d all-reduces of N × B × H_d × e (draft) + 2 L_t of N × B × H_t × e (verify)
 * The vocabulary-parallel head gathers only each GPU's top-k candidates and the context
 * materialization's projections are column-split: neither is counted. Overlap of the
 * all-reduces with compute is not assumed.
 *   tok/s = N / (t_step / n-split + comm) for ar, N × tau / (t_cycle + comm) for the cycle. */
#ifndef DB_TP_H
#define DB_TP_H

#include "bench/capacity.h"

typedef struct {
    char name[16];
    double gbs;        /* per direction, GB/s */
    double latency_us; /* per all-reduce */
} db_link;

/* "nvlink" or "pcie" (README, *Capacity planning*: figures and sources); DB_EINPUT otherwise */
int db_link_preset(const char *name, db_link *l, char *err, size_t errlen);
/* one ring all-reduce of `bytes` over n GPUs, seconds (the formula above) */
double db_allreduce_s(double bytes, int n, const db_link *l);

typedef struct {
    int tp, concurrency;
    double weights, kv, act; /* bytes per GPU */
    int fits;                /* weights + kv + act <= gpu_mem (1 when gpu_mem is 0: unknown) */
    double ar_compute_s, ar_comm_s, ar_tok_s;
    double cyc_compute_s, cyc_comm_s, cyc_tok_s; /* 0 without a drafter */
} db_tp_row;

/* one (n, concurrency) row: ar (and, with d, the cycle of shape cy) from the one-GPU memory
 * need mem1; gpu_mem in bytes, 0 for unknown */
void db_tp_predict(const db_model_config *t, const db_drafter_config *d, db_dtype dt, const db_hw *hw,
                   const db_link *l, int n, const db_step_shape *ar, const db_step_shape *cy,
                   const db_mem_need *mem1, double gpu_mem, db_tp_row *out);

#endif
