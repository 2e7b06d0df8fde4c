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

/* One block per (row, head); the row's keys [key_lo, key_hi) of its slot in tiles of warpSize
 * keys, tiles dealt to the warps in turn. Lane l scores key t0 + l (dot product in index order,
 * then * scale, as the reference), the warp updates its online softmax (max m, sum l) and its
 * lanes accumulate the value rows of the tile into their head_dim slices. The warps' states
 * are merged at the end in warp order. On an H200 a decode step's attention (64 heads, 512
 * keys) was bound by latency, not bytes: 4 warps a block with their loads one behind the
 * other's adds took ~90 us a layer; 8 warps and unrolled loads keep more of them in flight.
 * Nothing depends on the number of rows in the call, nor on
 * the cache's element type (KV: float or f16 bits): an f16 cache gives the f32 kernel's result
 * on the widened values, bit for bit. */
template <typename KV, bool VEC>
__global__ void k_attention(float *out, const float *q, const KV *kc, const KV *vc, int cap,
                            const db_attn_row *rows, int nh, int nkv, int hd, float scale)
{
    DB_DYN_SHARED(float, sm);
    const int ws = warpSize, lane = threadIdx.x % ws, wid = threadIdx.x / ws, nw = blockDim.x / ws;
    float *qs = sm;             /* [hd] */
    float *pw = qs + hd;        /* [nw * ws] probabilities of the tile, per warp */
    float *wm = pw + nw * ws;   /* [nw] */
    float *wl = wm + nw;        /* [nw] */
    float *wacc = wl + nw;      /* [nw * hd] */
    int r = blockIdx.x / nh, h = blockIdx.x % nh;
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
    size_t rb = sizeof(db_attn_row) * (size_t)n;
    if (arena_reserve(be, align_up(rb))) return;
    const db_attn_row *drows = (const db_attn_row *)arena_put(be, rows, rb);
    if (!drows) return;
    int threads = ATT_THREADS < c->warp ? c->warp : ATT_THREADS, nw = threads / c->warp;
    size_t smem = sizeof(float) * ((size_t)hd + (size_t)nw * c->warp + 2 * (size_t)nw + (size_t)nw * hd);
    bool vec = hd % 4 == 0 && ((uintptr_t)kcache % (4 * sizeof(KV))) == 0 &&
               ((uintptr_t)vcache % (4 * sizeof(KV))) == 0;
    unsigned grid = (unsigned)n * (unsigned)nh;
    if (vec)
        launch_kernel(k_attention<KV, true>, grid, threads, smem, c->stream, out, q, kcache, vcache, cap, drows, nh, nkv, hd, scale);
    else
        launch_kernel(k_attention<KV, false>, grid, threads, smem, c->stream, out, q, kcache, vcache, cap, drows, nh, nkv, hd, scale);
    LAUNCH_CHECK(be, "k_attention");
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
