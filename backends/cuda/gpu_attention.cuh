/* gpu_attention.cuh — attention over f32 or f16 K/V caches. Part of gpu_backend.cu's translation
 * unit: included there, inside its anonymous namespace, after the context, arena and device
 * helpers it uses; never compiled alone. */

/* ---------------------------------------------------------------------------------------- */
/* attention                                                                                */

/* K/V cache elements: f32, or f16 (--kv-dtype f16) widened exactly to f32 on load */
__device__ __forceinline__ float kv_elem(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float kv_elem(const uint16_t *p, size_t i) { return f16_to_f32(p[i]); }
/* 4 consecutive elements; p aligned to 4 elements (16 bytes f32, 8 bytes f16) */
__device__ __forceinline__ float4 kv_load4(const float *p) { return *(const float4 *)p; }
__device__ __forceinline__ float4 kv_load4(const uint16_t *p)
{
    uint2 u = *(const uint2 *)p;
    float4 f;
    f.x = f16_to_f32((uint16_t)(u.x & 0xffffu)), f.y = f16_to_f32((uint16_t)(u.x >> 16));
    f.z = f16_to_f32((uint16_t)(u.y & 0xffffu)), f.w = f16_to_f32((uint16_t)(u.y >> 16));
    return f;
}

/* The end of a (row, head): the nw warps' online-softmax states (max wm, sum wl, accumulators
 * wacc [nw][hd], in shared memory) merged in warp order into o [hd]. One function for both
 * kernels, so that their results are the same bit for bit. */
__device__ __forceinline__ void merge_warps(float *o, const float *wm, const float *wl, const float *wacc, int nw, int hd)
{
    float M = -INFINITY;
    for (int w = 0; w < nw; w++) M = fmaxf(M, wm[w]);
    float L = 0.0f;
    for (int w = 0; w < nw; w++) L += wl[w] * expf(wm[w] - M); /* idle warps: 0 * 0 */
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < nw; w++) a += wacc[w * hd + i] * expf(wm[w] - M);
        o[i] = a / L;
    }
}

/* One block per (row, head); the row's keys [key_lo, key_hi) of its slot in tiles of warpSize
 * keys, tiles dealt to the warps in turn. Lane l scores key t0 + l (dot product in index order,
 * then * scale, as the reference), the warp updates its online softmax (max m, sum l) and its
 * lanes accumulate the value rows of the tile into their head_dim slices. The warps' states
 * are merged at the end in warp order. On an H200 a decode step's attention (64 heads, 512
 * keys) was bound by latency, not bytes: 4 warps a block with their loads one behind the
 * other's adds took ~90 us a layer; 8 warps and unrolled loads keep more of them in flight.
 * Nothing depends on the number of rows in the call, nor on
 * the cache's element type (KV: float or f16 bits): an f16 cache gives the f32 kernel's result
 * on the widened values, bit for bit. `map` (NULL: block r / nh is row r) lists the rows this
 * launch takes when k_attention_multi takes the others. */
template <typename KV, bool VEC>
__global__ void k_attention(float *out, const float *q, const KV *kc, const KV *vc, int cap,
                            const db_attn_row *rows, const int *map, int nh, int nkv, int hd, float scale)
{
    DB_DYN_SHARED(float, sm);
    const int ws = warpSize, lane = threadIdx.x % ws, wid = threadIdx.x / ws, nw = blockDim.x / ws;
    float *qs = sm;             /* [hd] */
    float *pw = qs + hd;        /* [nw * ws] probabilities of the tile, per warp */
    float *wm = pw + nw * ws;   /* [nw] */
    float *wl = wm + nw;        /* [nw] */
    float *wacc = wl + nw;      /* [nw * hd] */
    int r = blockIdx.x / nh, h = blockIdx.x % nh;
    if (map) r = map[r]; /* the rows k_attention_multi does not take */
    db_attn_row ar = rows[r];
    size_t kvw = (size_t)nkv * hd;
    const float *qh = q + ((size_t)r * nh + h) * hd;
    float *o = out + ((size_t)r * nh + h) * hd;
    int lo = ar.key_lo, nk = ar.key_hi - ar.key_lo;
    if (nk <= 0) {
        for (int i = threadIdx.x; i < hd; i += blockDim.x) o[i] = 0.0f;
        return;
    }
    for (int i = threadIdx.x; i < hd; i += blockDim.x) qs[i] = qh[i];
    __syncthreads();
    const KV *kb = kc + (size_t)ar.slot * cap * kvw + (size_t)(h / (nh / nkv)) * hd;
    const KV *vb = vc + (size_t)ar.slot * cap * kvw + (size_t)(h / (nh / nkv)) * hd;
    int nc = (hd + ws - 1) / ws;
    float m = -INFINITY, l = 0.0f, acc[ATT_MAX_PER_LANE];
#pragma unroll
    for (int c = 0; c < ATT_MAX_PER_LANE; c++) acc[c] = 0.0f;
    float *p_tile = pw + wid * ws;
    for (int t0 = wid * ws; t0 < nk; t0 += nw * ws) {
        int j = t0 + lane;
        float s = -INFINITY;
        if (j < nk) {
            const KV *kj = kb + (size_t)(lo + j) * kvw;
            float dot = 0.0f;
            if (VEC) {
#pragma unroll 8 /* the key row's loads in flight together: the dot chain waits on L2 otherwise */
                for (int i = 0; i < hd; i += 4) {
                    float4 kv = kv_load4(kj + i);
                    dot += qs[i] * kv.x;
                    dot += qs[i + 1] * kv.y;
                    dot += qs[i + 2] * kv.z;
                    dot += qs[i + 3] * kv.w;
                }
            } else {
                for (int i = 0; i < hd; i++) dot += qs[i] * kv_elem(kj, (size_t)i);
            }
            s = dot * scale;
        }
        float mn = fmaxf(m, warp_max(s)); /* finite: key t0 is in range */
        float corr = expf(m - mn);
        float p = j < nk ? expf(s - mn) : 0.0f;
        l = l * corr + warp_sum(p);
        m = mn;
        p_tile[lane] = p;
        WARP_SYNC();
        int cnt = nk - t0 < ws ? nk - t0 : ws;
#pragma unroll
        for (int c = 0; c < ATT_MAX_PER_LANE; c++) acc[c] *= corr;
#pragma unroll 4 /* several value rows' loads in flight; each acc[c] still adds them in t order */
        for (int t = 0; t < cnt; t++) {
            float pt = p_tile[t];
            const KV *vj = vb + (size_t)(lo + t0 + t) * kvw;
#pragma unroll
            for (int c = 0; c < ATT_MAX_PER_LANE; c++) {
                int i = lane + c * ws;
                if (c < nc && i < hd) acc[c] += pt * kv_elem(vj, (size_t)i);
            }
        }
        WARP_SYNC();
    }
    if (lane == 0) {
        wm[wid] = m;
        wl[wid] = l;
    }
#pragma unroll
    for (int c = 0; c < ATT_MAX_PER_LANE; c++) {
        int i = lane + c * ws;
        if (c < nc && i < hd) wacc[wid * hd + i] = acc[c];
    }
    __syncthreads();
    merge_warps(o, wm, wl, wacc, nw, hd);
}

/* One block of k_attention_multi: `np` (row, head) pairs of the rows r0.. (consecutive rows of
 * one slot with one key_lo), all on kv head blockIdx.y; pair k0 + p is row r0 + (k0 + p) / g,
 * query head blockIdx.y * g + (k0 + p) % g (g = nh / nkv). */
struct att_task {
    int r0, k0, np, pad;
};

/* Several queries a block: the (row, head) pairs of a task share every K and V load, and each
 * pair's result is k_attention's for that row and head, bit for bit. The block has k_attention's
 * warps, and warp w takes the same tiles of warpSize keys, t0 = w * warpSize + i * nw *
 * warpSize (keys counted from the common key_lo); per pair it keeps k_attention's state (m, l,
 * the lane's accumulators) and makes k_attention's updates in k_attention's order: lane l loads
 * key t0 + l's row once and adds q[i] * k[i] into every pair's dot in index order (then *
 * scale), the pair's online softmax step (warp max, expf, warp sum), its accumulators * corr,
 * then for each key of the tile the value row, loaded once, times the pair's probability, in key
 * order. A pair whose keys end earlier skips the tiles (and the keys of a tile) past its end,
 * as k_attention stops there; at the end the pairs are merged one after the other, each in
 * warp order with k_attention's arithmetic, through k_attention's shared buffers. A pair with
 * no keys gets zeros. NC >= head_dim / warpSize: accumulators per lane per pair (registers:
 * ATT_PAIRS x NC). */
template <typename KV, bool VEC, int NC>
__global__ void k_attention_multi(float *out, const float *q, const KV *kc, const KV *vc, int cap,
                                  const db_attn_row *rows, const att_task *tasks, int nh, int nkv, int hd,
                                  float scale)
{
    DB_DYN_SHARED(float, sm);
    const int ws = warpSize, lane = threadIdx.x % ws, wid = threadIdx.x / ws, nw = blockDim.x / ws;
    float *qs = sm;                     /* [ATT_PAIRS][hd] the pairs' queries */
    float *pw = qs + ATT_PAIRS * hd;    /* [nw][ATT_PAIRS][ws] probabilities of the tile */
    float *wm = pw + nw * ATT_PAIRS * ws; /* [nw] the merge, one pair at a time */
    float *wl = wm + nw;                /* [nw] */
    float *wacc = wl + nw;              /* [nw * hd] */
    const att_task tk = tasks[blockIdx.x];
    const int g = nh / nkv, kvh = blockIdx.y, np = tk.np;
    const db_attn_row first = rows[tk.r0];
    const int lo = first.key_lo;
    size_t kvw = (size_t)nkv * hd;
    int nkp[ATT_PAIRS], nkmax = 0;
#pragma unroll
    for (int p = 0; p < ATT_PAIRS; p++) {
        nkp[p] = 0;
        if (p < np) {
            nkp[p] = rows[tk.r0 + (tk.k0 + p) / g].key_hi - lo;
            nkmax = nkp[p] > nkmax ? nkp[p] : nkmax;
        }
    }
    for (int x = threadIdx.x; x < np * hd; x += blockDim.x) {
        int k = tk.k0 + x / hd, r = tk.r0 + k / g, h = kvh * g + k % g;
        qs[x] = q[((size_t)r * nh + h) * hd + x % hd];
    }
    __syncthreads();
    const KV *kb = kc + (size_t)first.slot * cap * kvw + (size_t)kvh * hd;
    const KV *vb = vc + (size_t)first.slot * cap * kvw + (size_t)kvh * hd;
    const int nc = (hd + ws - 1) / ws;
    float m[ATT_PAIRS], l[ATT_PAIRS], acc[ATT_PAIRS][NC];
#pragma unroll
    for (int p = 0; p < ATT_PAIRS; p++) {
        m[p] = -INFINITY, l[p] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++) acc[p][c] = 0.0f;
    }
    float *p_tile = pw + wid * ATT_PAIRS * ws; /* [ATT_PAIRS][ws] of this warp */
    for (int t0 = wid * ws; t0 < nkmax; t0 += nw * ws) {
        int j = t0 + lane;
        float dot[ATT_PAIRS];
#pragma unroll
        for (int p = 0; p < ATT_PAIRS; p++) dot[p] = 0.0f;
        if (j < nkmax) {
            const KV *kj = kb + (size_t)(lo + j) * kvw;
            if (VEC) {
#pragma unroll 4
                for (int i = 0; i < hd; i += 4) {
                    float4 kv = kv_load4(kj + i);
#pragma unroll
                    for (int p = 0; p < ATT_PAIRS; p++) {
                        if (p < np) {
                            const float *qp = qs + p * hd + i;
                            dot[p] += qp[0] * kv.x;
                            dot[p] += qp[1] * kv.y;
                            dot[p] += qp[2] * kv.z;
                            dot[p] += qp[3] * kv.w;
                        }
                    }
                }
            } else {
                for (int i = 0; i < hd; i++) {
                    float kv = kv_elem(kj, (size_t)i);
#pragma unroll
                    for (int p = 0; p < ATT_PAIRS; p++)
                        if (p < np) dot[p] += qs[p * hd + i] * kv;
                }
            }
        }
#pragma unroll
        for (int p = 0; p < ATT_PAIRS; p++) {
            if (p < np && t0 < nkp[p]) { /* the same for every lane: the shuffles stay converged */
                bool in = j < nkp[p];
                float s = in ? dot[p] * scale : -INFINITY;
                float mn = fmaxf(m[p], warp_max(s)); /* finite: key t0 is in range */
                float corr = expf(m[p] - mn);
                float pr = in ? expf(s - mn) : 0.0f;
                l[p] = l[p] * corr + warp_sum(pr);
                m[p] = mn;
                p_tile[p * ws + lane] = pr;
#pragma unroll
                for (int c = 0; c < NC; c++) acc[p][c] *= corr;
            }
        }
        WARP_SYNC();
        int cnt = nkmax - t0 < ws ? nkmax - t0 : ws;
#pragma unroll 2
        for (int t = 0; t < cnt; t++) {
            const KV *vj = vb + (size_t)(lo + t0 + t) * kvw;
            float vv[NC];
#pragma unroll
            for (int c = 0; c < NC; c++) {
                int i = lane + c * ws;
                vv[c] = c < nc && i < hd ? kv_elem(vj, (size_t)i) : 0.0f;
            }
#pragma unroll
            for (int p = 0; p < ATT_PAIRS; p++) {
                if (p < np && t0 + t < nkp[p]) { /* key t0 + t is one of the pair's */
                    float pt = p_tile[p * ws + t];
#pragma unroll
                    for (int c = 0; c < NC; c++) {
                        int i = lane + c * ws;
                        if (c < nc && i < hd) acc[p][c] += pt * vv[c];
                    }
                }
            }
        }
        WARP_SYNC();
    }
#pragma unroll
    for (int p = 0; p < ATT_PAIRS; p++) {
        if (p >= np) continue; /* np is the block's: every thread skips together */
        int k = tk.k0 + p, r = tk.r0 + k / g, h = kvh * g + k % g;
        float *o = out + ((size_t)r * nh + h) * hd;
        if (nkp[p] <= 0) {
            for (int i = threadIdx.x; i < hd; i += blockDim.x) o[i] = 0.0f;
            continue;
        }
        if (lane == 0) {
            wm[wid] = m[p];
            wl[wid] = l[p];
        }
#pragma unroll
        for (int c = 0; c < NC; c++) {
            int i = lane + c * ws;
            if (c < nc && i < hd) wacc[wid * hd + i] = acc[p][c];
        }
        __syncthreads();
        merge_warps(o, wm, wl, wacc, nw, hd);
        __syncthreads(); /* the next pair rewrites wm, wl, wacc */
    }
}

template <typename KV, bool VEC>
void launch_attention_multi(gpu_ctx *c, int nc, unsigned ntasks, int threads, size_t smem, float *out, const float *q,
                            const KV *kcache, const KV *vcache, int cap, const db_attn_row *drows,
                            const att_task *dtasks, int nh, int nkv, int hd, float scale)
{
    dim3 grid(ntasks, (unsigned)nkv);
    if (nc <= 2)
        launch_kernel(k_attention_multi<KV, VEC, 2>, grid, threads, smem, c->stream, out, q, kcache, vcache, cap, drows,
                      dtasks, nh, nkv, hd, scale);
    else if (nc <= 4)
        launch_kernel(k_attention_multi<KV, VEC, 4>, grid, threads, smem, c->stream, out, q, kcache, vcache, cap, drows,
                      dtasks, nh, nkv, hd, scale);
    else
        launch_kernel(k_attention_multi<KV, VEC, ATT_MAX_PER_LANE>, grid, threads, smem, c->stream, out, q, kcache,
                      vcache, cap, drows, dtasks, nh, nkv, hd, scale);
}

template <typename KV>
void launch_attention(db_backend *be, float *out, const float *q, const KV *kcache, const KV *vcache, int cap,
                      const db_attn_row *rows, int n, int nh, int nkv, int hd, float scale)
{
    gpu_ctx *c = ctx_of(be);
    if (n <= 0 || nh <= 0) return;
    if (hd > ATT_MAX_PER_LANE * c->warp || nkv <= 0 || nh % nkv != 0) {
        latch(be, "attention: head_dim %d / heads %d:%d unsupported (head_dim <= %d, heads a multiple of kv heads)",
              hd, nh, nkv, ATT_MAX_PER_LANE * c->warp);
        return;
    }
    /* The plan: runs of >= ATT_MULTI_MIN_ROWS consecutive rows with one slot and one key_lo go
     * to k_attention_multi, their (row, head) pairs row-major in tasks of up to att_pairs pairs
     * (rows of similar length together: a causal verify block's rows differ by one key); the
     * other rows to k_attention, through a row map when there are both. */
    const int g = nh / nkv;
    int pairs = c->att_pairs, nsingle = 0;
    unsigned ntasks = 0;
    int *map = nullptr;
    att_task *tasks = nullptr;
    if (pairs > 1 && n >= ATT_MULTI_MIN_ROWS) {
        size_t need = sizeof(att_task) * (size_t)n * g + sizeof(int) * (size_t)n;
        if (need > c->att_host_cap) {
            void *p = db_malloc(need);
            if (!p) {
                latch(be, "attention: out of host memory (%zu bytes)", need);
                return;
            }
            free(c->att_host);
            c->att_host = p;
            c->att_host_cap = need;
        }
        tasks = (att_task *)c->att_host;
        map = (int *)(tasks + (size_t)n * g);
        /* the runs' lengths first (in map), to size the tasks: fewer pairs a block while the
         * grid would leave SMs without a block */
        int nruns = 0;
        for (int r0 = 0, r1; r0 < n; r0 = r1) {
            for (r1 = r0 + 1; r1 < n && rows[r1].slot == rows[r0].slot && rows[r1].key_lo == rows[r0].key_lo; r1++) {}
            if (r1 - r0 >= ATT_MULTI_MIN_ROWS) map[nruns++] = r1 - r0;
        }
        while (!c->att_pairs_set && pairs > 2) {
            long blocks = 0;
            for (int i = 0; i < nruns; i++) blocks += ((long)map[i] * g + pairs - 1) / pairs * nkv;
            if (blocks >= c->sms) break;
            pairs /= 2;
        }
        for (int r0 = 0, r1; r0 < n; r0 = r1) {
            for (r1 = r0 + 1; r1 < n && rows[r1].slot == rows[r0].slot && rows[r1].key_lo == rows[r0].key_lo; r1++) {}
            if (r1 - r0 < ATT_MULTI_MIN_ROWS) {
                for (int r = r0; r < r1; r++) map[nsingle++] = r;
                continue;
            }
            int total = (r1 - r0) * g;
            for (int k0 = 0; k0 < total; k0 += pairs)
                tasks[ntasks++] = att_task{r0, k0, total - k0 < pairs ? total - k0 : pairs, 0};
        }
    } else {
        nsingle = n;
    }
    size_t rb = sizeof(db_attn_row) * (size_t)n, tb = sizeof(att_task) * ntasks,
           mb = ntasks ? sizeof(int) * (size_t)nsingle : 0;
    if (arena_reserve(be, align_up(rb) + align_up(tb) + align_up(mb))) return;
    const db_attn_row *drows = (const db_attn_row *)arena_put(be, rows, rb);
    if (!drows) return;
    const att_task *dtasks = nullptr;
    const int *dmap = nullptr;
    if (ntasks && !(dtasks = (const att_task *)arena_put(be, tasks, tb))) return;
    if (ntasks && nsingle && !(dmap = (const int *)arena_put(be, map, mb))) return;
    int threads = ATT_THREADS < c->warp ? c->warp : ATT_THREADS, nw = threads / c->warp;
    size_t smem = sizeof(float) * ((size_t)hd + (size_t)nw * c->warp + 2 * (size_t)nw + (size_t)nw * hd);
    bool vec = hd % 4 == 0 && ((uintptr_t)kcache % (4 * sizeof(KV))) == 0 &&
               ((uintptr_t)vcache % (4 * sizeof(KV))) == 0;
    if (nsingle) {
        unsigned grid = (unsigned)nsingle * (unsigned)nh;
        if (vec)
            launch_kernel(k_attention<KV, true>, grid, threads, smem, c->stream, out, q, kcache, vcache, cap, drows, dmap,
                          nh, nkv, hd, scale);
        else
            launch_kernel(k_attention<KV, false>, grid, threads, smem, c->stream, out, q, kcache, vcache, cap, drows, dmap,
                          nh, nkv, hd, scale);
        if (LAUNCH_CHECK(be, "k_attention")) return;
    }
    if (ntasks) {
        size_t msmem = sizeof(float) * ((size_t)ATT_PAIRS * hd + (size_t)nw * ATT_PAIRS * c->warp + 2 * (size_t)nw +
                                        (size_t)nw * hd);
        int nc = (hd + c->warp - 1) / c->warp;
        if (vec)
            launch_attention_multi<KV, true>(c, nc, ntasks, threads, msmem, out, q, kcache, vcache, cap, drows, dtasks, nh,
                                             nkv, hd, scale);
        else
            launch_attention_multi<KV, false>(c, nc, ntasks, threads, msmem, out, q, kcache, vcache, cap, drows, dtasks,
                                              nh, nkv, hd, scale);
        LAUNCH_CHECK(be, "k_attention_multi");
    }
}

void gpu_attention(db_backend *be, float *out, const float *q, const float *kcache, const float *vcache, int cap,
                   const db_attn_row *rows, int n, int nh, int nkv, int hd, float scale)
{
    launch_attention(be, out, q, kcache, vcache, cap, rows, n, nh, nkv, hd, scale);
}

void gpu_attention_f16(db_backend *be, float *out, const float *q, const uint16_t *kcache, const uint16_t *vcache,
                       int cap, const db_attn_row *rows, int n, int nh, int nkv, int hd, float scale)
{
    launch_attention(be, out, q, kcache, vcache, cap, rows, n, nh, nkv, hd, scale);
}
