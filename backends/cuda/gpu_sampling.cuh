/* gpu_sampling.cuh — row selection and sampling: top-k, the sampling distribution (probs), sample
 * and accept on the device. Part of gpu_backend.cu's translation unit: included there, inside its
 * anonymous namespace, after the context, arena and device helpers it uses; never compiled alone. */

/* ---------------------------------------------------------------------------------------- */
/* row selection: top-k and the sampling distribution                                       */

/* the entries of an ordered scan: the position among flagged threads of this block chunk, the
 * chunk's total; wtot holds MAX_WARPS counts. Every thread of the block must call it. */
__device__ int block_rank(bool flag, int *total, int *wtot)
{
    int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize, nw = blockDim.x / warpSize;
    unsigned long long b = WARP_BALLOT(flag);
    unsigned long long below = lane ? (b & ((~0ull) >> (64 - lane))) : 0ull;
    int pre = __popcll(below);
    __syncthreads();
    if (lane == 0) wtot[wid] = __popcll(b);
    __syncthreads();
    int before = 0, all = 0;
    for (int w = 0; w < nw; w++) {
        if (w < wid) before += wtot[w];
        all += wtot[w];
    }
    *total = all;
    return before + pre;
}

/* Index of the `need`-th (1-based) element of row[0..v) with order_key == T, scanning ids in
 * order; with `emit`, the first `need` such ids go to out[0..need). */
__device__ int nth_equal(const float *row, int v, unsigned T, int need, int *out, int *wtot)
{
    __shared__ int s_last;
    if (threadIdx.x == 0) s_last = -1;
    int found = 0;
    for (int base = 0; base < v && found < need; base += blockDim.x) {
        int i = base + threadIdx.x, total;
        bool f = i < v && order_key(row[i]) == T;
        int pos = found + block_rank(f, &total, wtot);
        if (f && pos < need) {
            if (out) out[pos] = i;
            if (pos == need - 1) s_last = i;
        }
        found += total;
    }
    __syncthreads();
    return s_last;
}

/* k == 1: the largest value, ties -> smaller id (one pass) */
__global__ void k_argmax(int *ids, float *vals, const float *logits, int v)
{
    __shared__ unsigned kred[MAX_WARPS];
    __shared__ int ired[MAX_WARPS];
    const float *row = logits + (size_t)blockIdx.x * v;
    unsigned bk = 0;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < v; i += blockDim.x) {
        unsigned k = order_key(row[i]);
        if (k > bk || (k == bk && i < bi)) bk = k, bi = i;
    }
    for (int o = warpSize / 2; o > 0; o >>= 1) {
        unsigned ok = WARP_SHFL_XOR(bk, o);
        int oi = WARP_SHFL_XOR(bi, o);
        if (ok > bk || (ok == bk && oi < bi)) bk = ok, bi = oi;
    }
    int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize, nw = blockDim.x / warpSize;
    if (lane == 0) kred[wid] = bk, ired[wid] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < nw; w++)
            if (kred[w] > kred[0] || (kred[w] == kred[0] && ired[w] < ired[0])) kred[0] = kred[w], ired[0] = ired[w];
        ids[blockIdx.x] = ired[0];
        if (vals) vals[blockIdx.x] = row[ired[0]];
    }
}

/* Radix select over order keys, 8 bits a level, most significant first: the bucket walk finds
 * the exact key T of the k-th largest value. The values above T are all kept; of those equal to
 * T the smallest ids are kept (ties -> smaller id). Candidates are then ranked and written
 * sorted. */
__global__ void k_topk(int *ids, float *vals, const float *logits, int v, int k)
{
    __shared__ unsigned hist[256];
    __shared__ unsigned s_prefix;
    __shared__ int s_krem, s_n;
    __shared__ int cid[MAX_TOPK];
    __shared__ unsigned ckey[MAX_TOPK];
    __shared__ int wtot[MAX_WARPS];
    const float *row = logits + (size_t)blockIdx.x * v;
    unsigned prefix = 0, mask = 0;
    int krem = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < v; i += blockDim.x) {
            unsigned u = order_key(row[i]);
            if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned cum = 0;
            int d = 255;
            for (; d > 0; d--) {
                if (cum + hist[d] >= (unsigned)krem) break;
                cum += hist[d];
            }
            s_prefix = prefix | ((unsigned)d << shift);
            s_krem = krem - (int)cum;
        }
        __syncthreads();
        prefix = s_prefix;
        krem = s_krem;
        mask |= 255u << shift;
    }
    unsigned T = prefix;
    int gt = k - krem; /* elements strictly above T */
    if (threadIdx.x == 0) s_n = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < v; i += blockDim.x) {
        unsigned u = order_key(row[i]);
        if (u > T) {
            int s = atomicAdd(&s_n, 1);
            if (s < MAX_TOPK) cid[s] = i, ckey[s] = u;
        }
    }
    __syncthreads();
    nth_equal(row, v, T, krem, cid + gt, wtot);
    for (int t = threadIdx.x; t < krem; t += blockDim.x) ckey[gt + t] = T;
    __syncthreads();
    for (int t = threadIdx.x; t < k; t += blockDim.x) {
        unsigned u = ckey[t];
        int id = cid[t], rank = 0;
        for (int j = 0; j < k; j++) rank += ckey[j] > u || (ckey[j] == u && cid[j] < id);
        ids[(size_t)blockIdx.x * k + rank] = id;
        if (vals) vals[(size_t)blockIdx.x * k + rank] = row[id];
    }
}

int gpu_topk(db_backend *be, int *ids, float *vals, const float *logits, int n, int v, int k)
{
    gpu_ctx *c = ctx_of(be);
    if (k < 1 || k > v) {
        snprintf(be->err, sizeof be->err, "topk: k=%d outside 1..%d", k, v);
        return -1;
    }
    if (k > MAX_TOPK) {
        snprintf(be->err, sizeof be->err, "topk: k=%d above the " DB_GPU_NAME " backend's limit %d", k, MAX_TOPK);
        return -1;
    }
    if (c->failed) return -1;
    if (n <= 0) return 0;
    size_t nb = sizeof(int) * (size_t)n * k;
    if (arena_reserve(be, 2 * align_up(nb))) return -1;
    int *dids = (int *)arena_take(be, nb);
    float *dvals = vals ? (float *)arena_take(be, nb) : nullptr;
    if (k == 1) launch_kernel(k_argmax, n, SELECT_THREADS, 0, c->stream, dids, dvals, logits, v);
    else launch_kernel(k_topk, n, SELECT_THREADS, 0, c->stream, dids, dvals, logits, v, k);
    if (LAUNCH_CHECK(be, "k_topk")) return -1;
    if (CUDA_CHECK(be, cudaMemcpyAsync(ids, dids, nb, cudaMemcpyDeviceToHost, c->stream))) return -1;
    if (vals && CUDA_CHECK(be, cudaMemcpyAsync(vals, dvals, nb, cudaMemcpyDeviceToHost, c->stream))) return -1;
    if (sync_results(be)) return -1;
    return c->failed ? -1 : 0;
}

/* probability masses in fixed point (2^-60 units): integer sums are exact and independent of
 * the order atomics land in */
constexpr double MASS_ONE = 1152921504606846976.0; /* 2^60 */

__device__ __forceinline__ unsigned long long mass_of(float p) { return (unsigned long long)((double)p * MASS_ONE); }

/* Radix walk over the order keys of a row of probabilities, most significant byte first, with
 * per-bucket counts and fixed-point masses: the bucket where the running count (from the
 * largest value down) reaches `keep` or the running mass reaches `qp` is refined until it is
 * one exact key T. Out: T, the count / mass of the entries above T, and the count of entries
 * equal to T. Returns 0 when no bucket reaches either bound (then everything is inside). */
struct cut {
    unsigned key;
    int cnt_above, tie_cnt;
    unsigned long long mass_above;
};

__device__ int walk_cut(const float *row, int v, int keep, unsigned long long qp, cut *out)
{
    __shared__ unsigned hist[256];
    __shared__ unsigned long long hmass[256];
    __shared__ unsigned s_prefix;
    __shared__ int s_hit, s_cnt_above, s_tie_cnt;
    __shared__ unsigned long long s_mass_above;
    unsigned prefix = 0, mask = 0;
    int cnt_above = 0, tie_cnt = 0, hit = 1;
    unsigned long long mass_above = 0;
    for (int shift = 24; shift >= 0 && hit; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0, hmass[i] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < v; i += blockDim.x) {
            unsigned u = order_key(row[i]);
            if ((u & mask) == prefix) {
                unsigned b = (u >> shift) & 255u;
                atomicAdd(&hist[b], 1u);
                atomicAdd(&hmass[b], mass_of(row[i]));
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int d = 255, h = 0;
            for (; d >= 0; d--) {
                /* an empty bucket cannot hold the cut (matters for a bound of ~0 mass) */
                if (hist[d] > 0 && (cnt_above + (int)hist[d] >= keep || mass_above + hmass[d] >= qp)) {
                    h = 1;
                    break;
                }
                cnt_above += (int)hist[d];
                mass_above += hmass[d];
            }
            s_hit = h;
            s_prefix = prefix | ((unsigned)(h ? d : 0) << shift);
            s_cnt_above = cnt_above;
            s_mass_above = mass_above;
            s_tie_cnt = h ? (int)hist[d] : 0;
        }
        __syncthreads();
        hit = s_hit;
        prefix = s_prefix;
        cnt_above = s_cnt_above;
        mass_above = s_mass_above;
        tie_cnt = s_tie_cnt;
        mask |= 255u << shift;
        __syncthreads();
    }
    out->key = prefix;
    out->cnt_above = cnt_above;
    out->mass_above = mass_above;
    out->tie_cnt = tie_cnt;
    return hit;
}

/* In place, per row, as db_probs_host: a row with a NaN or no finite largest value becomes
 * zeros and counts in *nonfinite; else softmax(x / temperature) (sum in double); when
 * filtering, the order is (probability desc, id asc): top-k keeps the first `keep` entries,
 * whose mass is kmass; the nucleus is the shortest prefix of those whose mass reaches
 * top_p * kmass (the top-k-renormalised distribution's top_p); kept entries are renormalised
 * by their sum, the rest set to 0. Two radix walks find the two cuts (top-k, then the nucleus
 * inside it); in a tie bucket the smallest ids come first. */
__global__ void k_probs(float *x, int v, float temperature, float top_p, int top_k,
                        unsigned *nonfinite)
{
    __shared__ double dred[MAX_WARPS];
    __shared__ float fred[MAX_WARPS];
    __shared__ unsigned long long qred[MAX_WARPS];
    __shared__ int wtot[MAX_WARPS];
    float *row = x + (size_t)blockIdx.x * v;
    float mx = -INFINITY;
    /* a NaN counts as +Inf here (fmaxf would drop it), so one test of the max finds NaN, +Inf
     * and a row of -Inf alike */
    for (int i = threadIdx.x; i < v; i += blockDim.x)
        mx = fmaxf(mx, row[i] != row[i] ? INFINITY : row[i]);
    mx = block_max(mx, fred);
    if (!isfinite(mx)) { /* the block's max: every thread leaves here together */
        for (int i = threadIdx.x; i < v; i += blockDim.x) row[i] = 0.0f;
        if (threadIdx.x == 0) atomicAdd(nonfinite, 1u);
        return;
    }
    double sum = 0.0;
    for (int i = threadIdx.x; i < v; i += blockDim.x) {
        float e = expf((row[i] - mx) / temperature);
        row[i] = e;
        sum += e;
    }
    sum = block_sum(sum, dred);
    for (int i = threadIdx.x; i < v; i += blockDim.x) row[i] = (float)(row[i] / sum);
    if (!((top_k > 0 && top_k < v) || top_p < 1.0f)) return;
    __syncthreads();
    int keep = top_k > 0 && top_k < v ? top_k : v;
    cut c;
    unsigned long long kmass;
    if (keep < v) { /* the top-k cut by count alone */
        walk_cut(row, v, keep, ~0ull, &c);
        kmass = c.mass_above + (unsigned long long)(keep - c.cnt_above) * mass_of(key_value(c.key));
    } else {
        unsigned long long m = 0;
        for (int i = threadIdx.x; i < v; i += blockDim.x) m += mass_of(row[i]);
        kmass = block_sum(m, qred);
    }
    unsigned long long qp = top_p >= 1.0f ? kmass : (unsigned long long)((double)top_p * (double)kmass);
    int all = !walk_cut(row, v, keep, qp, &c);
    unsigned T = c.key;
    int id_cut = -1;
    if (!all) { /* how many of the tie bucket (all of probability p*) are taken, in id order */
        unsigned long long qs = mass_of(key_value(T));
        int need = keep - c.cnt_above;
        if (qs > 0) {
            unsigned long long miss = qp > c.mass_above ? qp - c.mass_above : 0;
            unsigned long long j = (miss + qs - 1) / qs;
            if (j < (unsigned long long)need) need = (int)j;
        }
        if (need > c.tie_cnt) need = c.tie_cnt;
        if (need < 1) need = 1;
        id_cut = nth_equal(row, v, T, need, nullptr, wtot);
    }
    double kept = 0.0;
    for (int i = threadIdx.x; i < v; i += blockDim.x) {
        unsigned u = order_key(row[i]);
        if (all || u > T || (u == T && i <= id_cut)) kept += row[i];
    }
    kept = block_sum(kept, dred);
    for (int i = threadIdx.x; i < v; i += blockDim.x) {
        unsigned u = order_key(row[i]);
        bool in = all || u > T || (u == T && i <= id_cut);
        row[i] = in ? (float)(row[i] / kept) : 0.0f;
    }
}

void gpu_probs(db_backend *be, float *x, int n, int v, float temperature, float top_p, int top_k)
{
    gpu_ctx *c = ctx_of(be);
    if (n <= 0 || v <= 0) return;
    launch_kernel(k_probs, n, SELECT_THREADS, 0, c->stream, x, v, temperature, top_p, top_k,
                  c->nonfinite_dev);
    c->nonfinite_stale = 1; /* the next sync_results copies the count */
    LAUNCH_CHECK(be, "k_probs");
}

/* ---------------------------------------------------------------------------------------- */
/* sampling and acceptance: db_sample_index_u, db_accept_sample_u (backends/sampling.c)       */

constexpr int MAX_SAMPLE_CHUNKS = 1024; /* sample / accept: V <= MAX_SAMPLE_CHUNKS * chunk */

/* db_sample_index_u(row, v, u) by the whole block; every thread gets the index. The chunk sums
 * run in parallel (a thread per chunk, each in index order), their prefix and the chosen
 * chunk's running sum in thread 0 (staged in shared memory): the reference's double additions
 * in its order, so the pick is its pick bit for bit. */
__device__ int block_sample(const float *row, int v, double u)
{
    __shared__ double csum[MAX_SAMPLE_CHUNKS];
    __shared__ float chunk[DB_SAMPLE_CHUNK];
    __shared__ int s_c, s_search, s_pick;
    __shared__ double s_before, s_x;
    int nch = (v + DB_SAMPLE_CHUNK - 1) / DB_SAMPLE_CHUNK;
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
        int lo = c * DB_SAMPLE_CHUNK, hi = lo + DB_SAMPLE_CHUNK < v ? lo + DB_SAMPLE_CHUNK : v;
        double s = 0.0;
        for (int i = lo; i < hi; i++) {
            float x = row[i];
            if (x > 0.0f) s += x;
        }
        csum[c] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int c = 0; c < nch; c++) total += csum[c];
        double x = u * total, before = 0.0;
        int pick_c = -1, last_c = -1;
        for (int c = 0; c < nch && pick_c < 0; c++) {
            if (csum[c] > 0.0) { /* a chunk with a positive entry */
                last_c = c;
                if (x < before + csum[c]) {
                    pick_c = c;
                    break;
                }
            }
            before += csum[c];
        }
        s_search = pick_c >= 0;
        s_c = pick_c >= 0 ? pick_c : last_c;
        s_before = before;
        s_x = x;
        s_pick = 0; /* an all-zero row */
    }
    __syncthreads();
    int c = s_c;
    if (c >= 0) {
        int lo = c * DB_SAMPLE_CHUNK, len = v - lo < DB_SAMPLE_CHUNK ? v - lo : DB_SAMPLE_CHUNK;
        for (int i = threadIdx.x; i < len; i += blockDim.x) chunk[i] = row[lo + i];
        __syncthreads();
        if (threadIdx.x == 0) {
            double s = 0.0, x = s_x, before = s_before;
            int last = lo;
            for (int i = 0; i < len; i++) {
                if (!(chunk[i] > 0.0f)) continue;
                s += chunk[i];
                last = lo + i;
                if (s_search && x < before + s) break;
            }
            s_pick = last; /* the match, or the row's last positive entry */
        }
    }
    __syncthreads();
    return s_pick;
}

__global__ void k_sample(int *out, const float *probs, const double *u, int v)
{
    int pick = block_sample(probs + (size_t)blockIdx.x * v, v, u[blockIdx.x]);
    if (threadIdx.x == 0) out[blockIdx.x] = pick;
}

/* One block per request: the ratio tests in thread 0, then at a rejection the residual
 * max(p - q, 0) formed in place in p's row (only when it has a positive entry; else the row
 * stays p, which the reference then draws from), then block_sample of that row. */
__global__ void k_accept(int *acc, int *bonus, float *p, const float *q, const float *qv, const int *qi,
                         int qk, const int *draft, const double *u, int block, int v)
{
    __shared__ int ired[MAX_WARPS];
    __shared__ int s_t, s_any;
    int j = blockIdx.x;
    float *pj = p + (size_t)j * block * v;
    const int *dj = draft + (size_t)j * block;
    const double *uj = u + (size_t)j * block;
    size_t qrow0 = (size_t)j * (block - 1);
    if (threadIdx.x == 0) {
        int t = 1;
        for (; t < block; t++) {
            size_t qr = qrow0 + t - 1;
            int d = dj[t];
            float qd = 0.0f;
            if (!qi) qd = q[qr * v + d];
            else
                for (int c = 0; c < qk; c++)
                    if (qi[qr * qk + c] == d) {
                        qd = qv[qr * qk + c];
                        break;
                    }
            double ratio = qd > 0.0f ? (double)pj[(size_t)(t - 1) * v + d] / qd : 0.0;
            if (!(uj[t - 1] < ratio)) break;
        }
        s_t = t;
    }
    __syncthreads();
    int t = s_t;
    float *row = pj + (size_t)(t < block ? t - 1 : block - 1) * v;
    if (t < block) {
        size_t qr = qrow0 + t - 1;
        int cnt = 0;
        if (!qi) {
            const float *qt = q + qr * v;
            for (int i = threadIdx.x; i < v; i += blockDim.x) cnt += row[i] - qt[i] > 0.0f;
            cnt = block_sum(cnt, ired);
            if (threadIdx.x == 0) s_any = cnt > 0;
            __syncthreads();
            if (s_any)
                for (int i = threadIdx.x; i < v; i += blockDim.x) {
                    float r = row[i] - qt[i];
                    row[i] = r > 0.0f ? r : 0.0f;
                }
        } else { /* positive entries off the candidates, plus candidates with p > q */
            for (int i = threadIdx.x; i < v; i += blockDim.x) cnt += row[i] > 0.0f;
            cnt = block_sum(cnt, ired);
            if (threadIdx.x == 0) {
                int any = 0;
                for (int c = 0; c < qk; c++) {
                    float pc = row[qi[qr * qk + c]];
                    cnt -= pc > 0.0f;
                    any |= pc - qv[qr * qk + c] > 0.0f;
                }
                s_any = any || cnt > 0;
                if (s_any)
                    for (int c = 0; c < qk; c++) {
                        int id = qi[qr * qk + c];
                        float r = row[id] - qv[qr * qk + c];
                        row[id] = r > 0.0f ? r : 0.0f;
                    }
            }
        }
        __syncthreads();
    }
    int pick = block_sample(row, v, uj[t < block ? t : block - 1]);
    if (threadIdx.x == 0) {
        acc[j] = t - 1;
        bonus[j] = pick;
    }
}

int sample_check(db_backend *be, const char *op, int v)
{
    if (ctx_of(be)->failed) return -1;
    if (v < 1 || v > MAX_SAMPLE_CHUNKS * DB_SAMPLE_CHUNK) {
        snprintf(be->err, sizeof be->err, "%s: vocabulary %d outside 1..%d", op, v, MAX_SAMPLE_CHUNKS * DB_SAMPLE_CHUNK);
        return -1;
    }
    return 0;
}

int gpu_sample(db_backend *be, int *out, const float *probs, int n, int v, const double *u)
{
    gpu_ctx *c = ctx_of(be);
    if (sample_check(be, "sample", v)) return -1;
    if (n <= 0) return 0;
    size_t ub = sizeof(double) * (size_t)n, ob = sizeof(int) * (size_t)n;
    if (arena_reserve(be, align_up(ub) + align_up(ob))) return -1;
    const double *du = (const double *)arena_put(be, u, ub);
    int *dout = (int *)arena_take(be, ob);
    if (!du) return -1;
    launch_kernel(k_sample, n, SELECT_THREADS, 0, c->stream, dout, probs, du, v);
    if (LAUNCH_CHECK(be, "k_sample")) return -1;
    if (CUDA_CHECK(be, cudaMemcpyAsync(out, dout, ob, cudaMemcpyDeviceToHost, c->stream))) return -1;
    if (sync_results(be)) return -1;
    return c->failed ? -1 : 0;
}

int gpu_accept(db_backend *be, int *accepted, int *bonus, float *p, const float *q, const float *q_vals,
               const int *q_ids, int q_k, const int *draft, const double *u, int nq, int block, int v)
{
    gpu_ctx *c = ctx_of(be);
    if (sample_check(be, "accept", v)) return -1;
    if (block < 1 || (!q_ids && !q) || (q_ids && (!q_vals || q_k < 1))) {
        snprintf(be->err, sizeof be->err, "accept: block %d, no draft distributions", block);
        return -1;
    }
    if (nq <= 0) return 0;
    size_t nb = (size_t)nq * block, db = sizeof(int) * nb, ub = sizeof(double) * nb;
    size_t nqk = q_ids ? (size_t)nq * (block - 1) * q_k : 0, ob = sizeof(int) * (size_t)nq;
    if (arena_reserve(be, align_up(db) + align_up(ub) + 2 * align_up(sizeof(float) * nqk) + 2 * align_up(ob)))
        return -1;
    const int *dd = (const int *)arena_put(be, draft, db);
    const double *du = (const double *)arena_put(be, u, ub);
    const float *dqv = q_ids ? (const float *)arena_put(be, q_vals, sizeof(float) * nqk) : nullptr;
    const int *dqi = q_ids ? (const int *)arena_put(be, q_ids, sizeof(int) * nqk) : nullptr;
    int *dacc = (int *)arena_take(be, ob), *dbonus = (int *)arena_take(be, ob);
    if (!dd || !du || (q_ids && (!dqv || !dqi))) return -1;
    launch_kernel(k_accept, nq, SELECT_THREADS, 0, c->stream, dacc, dbonus, p, q, dqv, dqi, q_k, dd, du, block, v);
    if (LAUNCH_CHECK(be, "k_accept")) return -1;
    if (CUDA_CHECK(be, cudaMemcpyAsync(accepted, dacc, ob, cudaMemcpyDeviceToHost, c->stream))) return -1;
    if (CUDA_CHECK(be, cudaMemcpyAsync(bonus, dbonus, ob, cudaMemcpyDeviceToHost, c->stream))) return -1;
    if (sync_results(be)) return -1;
    return c->failed ? -1 : 0;
}
