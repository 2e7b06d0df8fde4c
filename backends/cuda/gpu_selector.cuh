/* gpu_selector.cuh — the DFlash 2 selector and the DSpark head: pair scores, the Markov
 * correction, the selector walk on the device. Part of gpu_backend.cu's translation unit: included
 * there, inside its anonymous namespace, after the context, arena and device helpers it uses;
 * never compiled alone. */

/* ---------------------------------------------------------------------------------------- */
/* selector pair scores                                                                     */

template <int DP, int DS>
__global__ void k_pair_scores(float *out, const float *g, const int *prev, const int *cand, const void *pred,
                              const void *succ, int k, int r)
{
    int t = blockIdx.x;
    const float *gt = g + (size_t)t * r;
    for (int p = threadIdx.x; p < k * k; p += blockDim.x) {
        int i = p / k, j = p % k;
        size_t pi = (size_t)prev[(size_t)t * k + i] * r, sj = (size_t)cand[(size_t)t * k + j] * r;
        float s = 0.0f;
        for (int q = 0; q < r; q++) {
            float tmp = load_elem<DP>(pred, pi + q) * gt[q];
            s += tmp * load_elem<DS>(succ, sj + q);
        }
        out[((size_t)t * k + i) * k + j] = s;
    }
}

template <int DP>
void launch_pair_scores(db_backend *be, unsigned threads, float *dout, const float *g, const int *dprev,
                        const int *dcand, const db_weight *pred, const db_weight *succ, int n, int k, int r)
{
    cudaStream_t st = ctx_of(be)->stream;
    switch (succ->dtype) {
    case DB_F32: launch_kernel(k_pair_scores<DP, DB_F32>, n, threads, 0, st, dout, g, dprev, dcand, pred->data, succ->data, k, r); break;
    case DB_BF16: launch_kernel(k_pair_scores<DP, DB_BF16>, n, threads, 0, st, dout, g, dprev, dcand, pred->data, succ->data, k, r); break;
    case DB_F16: launch_kernel(k_pair_scores<DP, DB_F16>, n, threads, 0, st, dout, g, dprev, dcand, pred->data, succ->data, k, r); break;
    default: break; /* quantized: refused in gpu_pair_scores */
    }
}

/* the pair scores of n rows into device memory dout, for both dtypes of the codebooks: what
 * gpu_pair_scores returns and what gpu_select_walk walks */
static void pair_scores_device(db_backend *be, float *dout, const float *g, const int *dprev, const int *dcand,
                               const db_weight *pred, const db_weight *succ, int n, int k, int r)
{
    int warp = ctx_of(be)->warp;
    unsigned threads = k * k < 256 ? (unsigned)((k * k + warp - 1) / warp * warp) : 256u;
    switch (pred->dtype) {
    case DB_F32: launch_pair_scores<DB_F32>(be, threads, dout, g, dprev, dcand, pred, succ, n, k, r); break;
    case DB_BF16: launch_pair_scores<DB_BF16>(be, threads, dout, g, dprev, dcand, pred, succ, n, k, r); break;
    case DB_F16: launch_pair_scores<DB_F16>(be, threads, dout, g, dprev, dcand, pred, succ, n, k, r); break;
    default: break; /* quantized: refused by the callers */
    }
}

int gpu_pair_scores(db_backend *be, float *out, const float *g, const int *prev, const int *cand,
                    const db_weight *pred, const db_weight *succ, int n, int k, int r)
{
    gpu_ctx *c = ctx_of(be);
    if (pred->cols != r || succ->cols != r) {
        snprintf(be->err, sizeof be->err, "pair_scores: codebook rank mismatch");
        return -1;
    }
    if (c->failed) return -1;
    if (db_dtype_is_quant(pred->dtype) || db_dtype_is_quant(succ->dtype)) {
        /* scripts/gguf/convert.py writes them f16; the CPU backend takes quantized ones */
        latch(be, "pair_scores: %s selector codebooks are not run on the GPU (f32, bf16 or f16 only)",
              db_dtype_name(db_dtype_is_quant(pred->dtype) ? pred->dtype : succ->dtype));
        return -1;
    }
    if (n <= 0 || k <= 0) return 0;
    size_t ib = sizeof(int) * (size_t)n * k, ob = sizeof(float) * (size_t)n * k * k;
    if (arena_reserve(be, 2 * align_up(ib) + align_up(ob))) return -1;
    const int *dprev = (const int *)arena_put(be, prev, ib);
    const int *dcand = (const int *)arena_put(be, cand, ib);
    float *dout = (float *)arena_take(be, ob);
    if (!dprev || !dcand) return -1;
    pair_scores_device(be, dout, g, dprev, dcand, pred, succ, n, k, r);
    if (LAUNCH_CHECK(be, "k_pair_scores")) return -1;
    if (CUDA_CHECK(be, cudaMemcpyAsync(out, dout, ob, cudaMemcpyDeviceToHost, c->stream))) return -1;
    if (sync_results(be)) return -1;
    return c->failed ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* DSpark Markov correction                                                                 */

/* one thread per (row t, draft id i): the dot product over R in order j = 0..R-1, as the C
 * reference sums it (bitwise the same: -fmad=false) */
template <int D1, int D2>
__global__ void k_markov_bias(float *x, const int *prev, const void *w1, const void *w2, float scale,
                              int n, int vd, int r)
{
    for (int t = blockIdx.y; t < n; t += gridDim.y) {
        size_t p = (size_t)prev[t] * r;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < vd; i += gridDim.x * blockDim.x) {
            float s = 0.0f;
            for (int j = 0; j < r; j++) {
                float tmp = load_elem<D2>(w2, (size_t)i * r + j) * load_elem<D1>(w1, p + j);
                s += tmp;
            }
            x[(size_t)t * vd + i] += scale * s;
        }
    }
}

template <int D1>
void launch_markov_bias(db_backend *be, dim3 grid, float *x, const int *dprev, const db_weight *w1,
                        const db_weight *w2, float scale, int n)
{
    cudaStream_t st = ctx_of(be)->stream;
    int vd = w2->rows, r = w2->cols;
    switch (w2->dtype) {
    case DB_F32: launch_kernel(k_markov_bias<D1, DB_F32>, grid, 256, 0, st, x, dprev, w1->data, w2->data, scale, n, vd, r); break;
    case DB_BF16: launch_kernel(k_markov_bias<D1, DB_BF16>, grid, 256, 0, st, x, dprev, w1->data, w2->data, scale, n, vd, r); break;
    case DB_F16: launch_kernel(k_markov_bias<D1, DB_F16>, grid, 256, 0, st, x, dprev, w1->data, w2->data, scale, n, vd, r); break;
    default: break; /* quantized: refused in gpu_markov_bias */
    }
}

void gpu_markov_bias(db_backend *be, float *x, const int *prev, const db_weight *w1, const db_weight *w2,
                     float scale, int n)
{
    if (n <= 0 || w2->rows <= 0) return;
    if (w1->cols != w2->cols) {
        latch(be, "markov_bias: rank mismatch (%d vs %d)", w1->cols, w2->cols);
        return;
    }
    if (db_dtype_is_quant(w1->dtype) || db_dtype_is_quant(w2->dtype)) {
        latch(be, "markov_bias: %s Markov head weights are not run on the GPU (f32, bf16 or f16 only)",
              db_dtype_name(db_dtype_is_quant(w1->dtype) ? w1->dtype : w2->dtype));
        return;
    }
    size_t ib = sizeof(int) * (size_t)n;
    if (arena_reserve(be, align_up(ib))) return;
    const int *dprev = (const int *)arena_put(be, prev, ib);
    if (!dprev) return;
    unsigned bx = blocks_for((size_t)w2->rows, 256);
    dim3 grid(bx < 1024 ? bx : 1024, (unsigned)n < MAX_GRID_Y ? (unsigned)n : MAX_GRID_Y);
    switch (w1->dtype) {
    case DB_F32: launch_markov_bias<DB_F32>(be, grid, x, dprev, w1, w2, scale, n); break;
    case DB_BF16: launch_markov_bias<DB_BF16>(be, grid, x, dprev, w1, w2, scale, n); break;
    case DB_F16: launch_markov_bias<DB_F16>(be, grid, x, dprev, w1, w2, scale, n); break;
    default: break;
    }
    LAUNCH_CHECK(be, "k_markov_bias");
}

/* ---------------------------------------------------------------------------------------- */
/* selector walk: db_select_walk_u (backends/sampling.c) over pair scores kept on the device   */

/* db_probs_host on k <= MAX_TOPK scores, by one thread: the same operations in the same order
 * (the filter's order: value descending, index ascending, by insertion sort); non-finite scores
 * give zeros, as there */
__device__ void probs_small(float *x, int n, float temperature, float top_p, int top_k)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        float xi = x[i] != x[i] ? INFINITY : x[i]; /* a NaN counts as +Inf: one test below */
        if (xi > mx) mx = xi;
    }
    if (!isfinite(mx)) {
        for (int i = 0; i < n; i++) x[i] = 0.0f;
        return;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf((x[i] - mx) / temperature);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] = (float)(x[i] / sum);
    if (!((top_k > 0 && top_k < n) || top_p < 1.0f)) return;
    float bv[MAX_TOPK];
    int bi[MAX_TOPK];
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && (bv[j - 1] < x[i] || (bv[j - 1] == x[i] && bi[j - 1] > i))) {
            bv[j] = bv[j - 1];
            bi[j] = bi[j - 1];
            j--;
        }
        bv[j] = x[i];
        bi[j] = i;
    }
    int keep = top_k > 0 && top_k < n ? top_k : n, kp = 0;
    double kmass = 0.0, cum = 0.0;
    for (int j = 0; j < keep; j++) kmass += bv[j];
    while (kp < keep) {
        cum += bv[kp];
        kp++;
        if (cum >= top_p * kmass) break;
    }
    double kept = 0.0;
    for (int j = 0; j < kp; j++) kept += bv[j];
    for (int j = kp; j < n; j++) x[bi[j]] = 0.0f;
    for (int j = 0; j < kp; j++) x[bi[j]] = (float)(bv[j] / kept);
}

/* db_sample_index_u for n <= DB_SAMPLE_CHUNK entries (one chunk: the running sum) */
__device__ int sample_small(const float *p, int n, double u)
{
    double total = 0.0;
    for (int i = 0; i < n; i++)
        if (p[i] > 0.0f) total += p[i];
    double x = u * total, s = 0.0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (!(p[i] > 0.0f)) continue;
        s += p[i];
        last = i;
        if (x < 0.0 + s) return i;
    }
    return last;
}

/* one thread per request walks its `steps` rows (each pick depends on the one before) */
__global__ void k_select_walk(int *draft, float *q, const float *pairs, const int *cand, const float *uvals,
                              const double *u, int nq, int steps, int k, float temperature, float top_p, int top_k)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nq) return;
    float sc[MAX_TOPK];
    int ip = 0;
    for (int st = 0; st < steps; st++) {
        size_t row = (size_t)j * steps + st;
        const int *cs = cand + row * k;
        const float *pair = pairs + (row * k + ip) * k;
        for (int c = 0; c < k; c++) sc[c] = uvals[row * k + c] + pair[c];
        int pick = 0;
        if (temperature <= 0) {
            for (int c = 1; c < k; c++)
                if (sc[c] > sc[pick] || (sc[c] == sc[pick] && cs[c] < cs[pick])) pick = c;
        } else {
            probs_small(sc, k, temperature, top_p, top_k);
            pick = sample_small(sc, k, u[row]);
            for (int c = 0; c < k; c++) q[row * k + c] = sc[c];
        }
        draft[row] = cs[pick];
        ip = pick;
    }
}

int gpu_select_walk(db_backend *be, int *draft, float *q, const float *g, const int *prev, const int *cand,
                    const db_weight *pred, const db_weight *succ, const float *uvals, const double *u, int nq,
                    int steps, int k, int r, float temperature, float top_p, int top_k)
{
    gpu_ctx *c = ctx_of(be);
    if (pred->cols != r || succ->cols != r) {
        snprintf(be->err, sizeof be->err, "select_walk: codebook rank mismatch");
        return -1;
    }
    if (k < 1 || k > MAX_TOPK) {
        snprintf(be->err, sizeof be->err, "select_walk: k=%d outside 1..%d", k, MAX_TOPK);
        return -1;
    }
    if (c->failed) return -1;
    if (db_dtype_is_quant(pred->dtype) || db_dtype_is_quant(succ->dtype)) {
        latch(be, "select_walk: %s selector codebooks are not run on the GPU (f32, bf16 or f16 only)",
              db_dtype_name(db_dtype_is_quant(pred->dtype) ? pred->dtype : succ->dtype));
        return -1;
    }
    int n = nq * steps;
    if (n <= 0) return 0;
    int sampled = temperature > 0;
    size_t ib = sizeof(int) * (size_t)n * k, pb = sizeof(float) * (size_t)n * k * k, ub = sizeof(double) * (size_t)n;
    size_t db = sizeof(int) * (size_t)n;
    if (arena_reserve(be, 3 * align_up(ib) + align_up(pb) + align_up(ub) + align_up(db) + align_up(ib))) return -1;
    const int *dprev = (const int *)arena_put(be, prev, ib);
    const int *dcand = (const int *)arena_put(be, cand, ib);
    const float *duv = (const float *)arena_put(be, uvals, ib);
    const double *du = sampled ? (const double *)arena_put(be, u, ub) : nullptr;
    float *dpairs = (float *)arena_take(be, pb);
    int *ddraft = (int *)arena_take(be, db);
    float *dq = (float *)arena_take(be, ib);
    if (!dprev || !dcand || !duv || (sampled && !du)) return -1;
    pair_scores_device(be, dpairs, g, dprev, dcand, pred, succ, n, k, r);
    if (LAUNCH_CHECK(be, "k_pair_scores")) return -1;
    unsigned wt = (unsigned)c->warp;
    launch_kernel(k_select_walk, blocks_for((size_t)nq, wt), wt, 0, c->stream, ddraft, dq, dpairs, dcand, duv, du, nq,
                  steps, k, temperature, top_p, top_k);
    if (LAUNCH_CHECK(be, "k_select_walk")) return -1;
    if (CUDA_CHECK(be, cudaMemcpyAsync(draft, ddraft, db, cudaMemcpyDeviceToHost, c->stream))) return -1;
    if (sampled && q && CUDA_CHECK(be, cudaMemcpyAsync(q, dq, ib, cudaMemcpyDeviceToHost, c->stream))) return -1;
    if (sync_results(be)) return -1;
    return c->failed ? -1 : 0;
}
