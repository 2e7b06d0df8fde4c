/* cpu_attention.h — the CPU backend's attention op (cpu_attention.c), apart from the backend
 * struct so that its blocking and threading can be read on their own. */
#ifndef DB_CPU_ATTENTION_H
#define DB_CPU_ATTENTION_H

#include "backend.h"
#include "cpu_kernels.h"

typedef struct {
    float *out;              /* [N, nh*hd] */
    const float *q;          /* [N, nh*hd] */
    const void *kcache;      /* [slots][cap][nkv*hd] of kv_dtype */
    const void *vcache;      /* [slots][cap][nkv*hd] of kv_dtype */
    const db_attn_row *rows; /* [N]: slot and key range of each query row */
    int n, nh, nkv, hd, cap;
    float scale;
    db_scores_kernel scores; /* the inner loops of the chosen matmul kernel's family */
    db_wsum_kernel wsum;
    db_dtype kv_dtype;       /* DB_F32 (scores, wsum) or DB_F16 (scores16, wsum16) */
    db_scores16_kernel scores16;
    db_wsum16_kernel wsum16;
    db_scores_multi_kernel scores_multi; /* several queries per call over a packed block, or NULL */
    db_wsum_multi_kernel wsum_multi;
    db_scores_heads_kernel scores_heads; /* one row's heads key by key (a decode step), or NULL */
    db_wsum_heads_kernel wsum_heads;
} db_attn_args;

/* the scratch of the calls (per-thread score rows and the task list), kept by the backend and
 * grown when a call needs more, so a forward does not allocate per layer */
typedef struct {
    void *buf;
    size_t cap; /* bytes */
} db_attn_scratch;

/* out = softmax(q k^T * scale) v for every row, on up to nthreads OpenMP threads; *need = the
 * scratch bytes it asked for. Returns 0, or -1 when that memory is not there (nothing written). */
int db_cpu_attention(const db_attn_args *a, int nthreads, db_attn_scratch *s, size_t *need);

#endif
