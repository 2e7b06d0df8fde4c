/* gpu_matmul.cuh — matmul: the batch-invariant row-dot kernels (f32 / bf16 / f16 and the quantized
 * types), the tiled GEMM and the cuBLAS path of fast mode. Part of gpu_backend.cu's translation
 * unit: included there, inside its anonymous namespace, after the context, arena and device
 * helpers it uses; never compiled alone. */

/* ---------------------------------------------------------------------------------------- */
/* matmul                                                                                   */

/* the row-dot kernels' inner step: one 8-value weight chunk ch against the tile's activation
 * rows r0 .. r0 + nr - 1, acc[r] += w . x in order with fmaf (VEC: 16-byte activation loads) */
template <bool VEC>
__device__ __forceinline__ void rowdot_chunk(float (&acc)[ROWDOT_TILE], const float (&wf)[8], const float *__restrict__ x,
                                             int r0, int nr, int I, int ch)
{
#pragma unroll
    for (int r = 0; r < ROWDOT_TILE; r++) {
        if (r < nr) {
            size_t xrow = (size_t)(r0 + r) * I;
            float xf[8];
            if (VEC) load8_vec<DB_F32>(x, xrow + (size_t)ch * 8, xf);
            else load8_scalar<DB_F32>(x, xrow + (size_t)ch * 8, xrow + I, xf);
#pragma unroll
            for (int j = 0; j < 8; j++) acc[r] = fmaf(wf[j], xf[j], acc[r]);
        }
    }
}

/* and its end of a tile: each row's lanes summed by the butterfly, written (or added) by lane 0 */
__device__ __forceinline__ void rowdot_store(const float (&acc)[ROWDOT_TILE], float *__restrict__ y, int r0, int nr,
                                             int O, int o, int lane, int accumulate)
{
#pragma unroll
    for (int r = 0; r < ROWDOT_TILE; r++) {
        if (r < nr) {
            float s = warp_sum(acc[r]);
            if (lane == 0) {
                float *yo = y + (size_t)(r0 + r) * O + o;
                *yo = accumulate ? *yo + s : s;
            }
        }
    }
}

/* y[r, o] (+)= sum_i x[r, i] w[o, i], one warp per output o. Lane l owns the 8-element chunks
 * c = l, l + warpSize, ... of the row and accumulates them in order with fmaf; the lanes are then
 * summed by a butterfly. That order depends on I and warpSize only, so a row's result never
 * depends on how many rows share the call (the deterministic path). VEC (16-byte loads) and
 * the scalar path do the same arithmetic in the same order. */
template <int DT, bool VEC>
__global__ void k_rowdot(float *__restrict__ y, const float *__restrict__ x, const void *__restrict__ w,
                         int n, int O, int I, int accumulate)
{
    int lane = threadIdx.x % warpSize, nw = blockDim.x / warpSize;
    int o = blockIdx.x * nw + threadIdx.x / warpSize;
    if (o >= O) return; /* the whole warp leaves together: no block barrier below */
    size_t wrow = (size_t)o * I;
    int nch = (I + 7) / 8;
    for (int r0 = 0; r0 < n; r0 += ROWDOT_TILE) {
        int nr = n - r0 < ROWDOT_TILE ? n - r0 : ROWDOT_TILE;
        float acc[ROWDOT_TILE];
#pragma unroll
        for (int r = 0; r < ROWDOT_TILE; r++) acc[r] = 0.0f;
#pragma unroll 4 /* several 16-byte weight loads in flight per lane */
        for (int ch = lane; ch < nch; ch += warpSize) {
            float wf[8];
            if (VEC) load8_vec<DT>(w, wrow + (size_t)ch * 8, wf);
            else load8_scalar<DT>(w, wrow + (size_t)ch * 8, wrow + I, wf);
            rowdot_chunk<VEC>(acc, wf, x, r0, nr, I, ch);
        }
        rowdot_store(acc, y, r0, nr, O, o, lane, accumulate);
    }
}

/* ---- quantized weights ---- */

template <int DT> struct qblock; /* values and bytes per block (backend.c's table) */
template <> struct qblock<DB_Q8_0> { static constexpr int values = 32, bytes = 34; };
template <> struct qblock<DB_Q4_0> { static constexpr int values = 32, bytes = 18; };
template <> struct qblock<DB_Q4_K> { static constexpr int values = 256, bytes = 144; };
template <> struct qblock<DB_Q5_K> { static constexpr int values = 256, bytes = 176; };
template <> struct qblock<DB_Q6_K> { static constexpr int values = 256, bytes = 210; };
template <> struct qblock<DB_Q4_1> { static constexpr int values = 32, bytes = 20; };
template <> struct qblock<DB_Q5_0> { static constexpr int values = 32, bytes = 22; };
template <> struct qblock<DB_Q5_1> { static constexpr int values = 32, bytes = 24; };
template <> struct qblock<DB_Q2_K> { static constexpr int values = 256, bytes = 84; };
template <> struct qblock<DB_Q3_K> { static constexpr int values = 256, bytes = 110; };
template <> struct qblock<DB_IQ4_NL> { static constexpr int values = 32, bytes = 18; };
template <> struct qblock<DB_IQ4_XS> { static constexpr int values = 256, bytes = 136; };

/* IQ4_NL / IQ4_XS levels (quant.h db_iq4_levels) */
__device__ __forceinline__ int iq4_level(int q)
{
    constexpr int8_t L[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    return L[q];
}

__device__ __forceinline__ float ld_f16(const uint8_t *p) { return f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

/* the 6-bit scale and min of sub-block j of a Q4_K / Q5_K block (quant.h db_scale_min_k4) */
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t *sc, int &s, int &m)
{
    if (j < 4) {
        s = sc[j] & 63;
        m = sc[j + 4] & 63;
    } else {
        s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
}

/* values [8j, 8j + 8) of block b, with quant.c's operations in its order (8 | 16, so the
 * chunk lies in one sub-block / one scale) */
template <int DT> __device__ __forceinline__ void dequant8(const uint8_t *b, int j, float (&f)[8])
{
    int v0 = 8 * j;
    if (DT == DB_Q8_0) {
        float d = ld_f16(b);
#pragma unroll
        for (int t = 0; t < 8; t++) f[t] = d * (float)(int8_t)b[2 + v0 + t];
    } else if (DT == DB_Q4_0) {
        float d = ld_f16(b);
        const uint8_t *qs = b + 2;
#pragma unroll
        for (int t = 0; t < 8; t++) f[t] = d * (float)((v0 < 16 ? qs[v0 + t] & 0xF : qs[v0 - 16 + t] >> 4) - 8);
    } else if (DT == DB_Q4_K || DT == DB_Q5_K) {
        const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + (DT == DB_Q5_K ? 48 : 16);
        int c = v0 / 64, hi = v0 % 64 >= 32, l0 = v0 % 32, sub = 2 * c + hi, sv, mv;
        scale_min_k4(sub, sc, sv, mv);
        float ds = ld_f16(b) * (float)sv, mm = ld_f16(b + 2) * (float)mv;
#pragma unroll
        for (int t = 0; t < 8; t++) {
            int l = l0 + t, q = hi ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0xF;
            if (DT == DB_Q5_K) q += (qh[l] >> sub & 1) << 4;
            f[t] = ds * (float)q - mm;
        }
    } else if (DT == DB_Q4_1 || DT == DB_Q5_0 || DT == DB_Q5_1 || DT == DB_IQ4_NL) {
        constexpr bool MIN = DT == DB_Q4_1 || DT == DB_Q5_1, FIVE = DT == DB_Q5_0 || DT == DB_Q5_1;
        float d = ld_f16(b), m = MIN ? ld_f16(b + 2) : 0.0f;
        const uint8_t *qh = b + (MIN ? 4 : 2), *qs = qh + (FIVE ? 4 : 0);
        uint32_t h = FIVE ? (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24 : 0;
#pragma unroll
        for (int t = 0; t < 8; t++) {
            int v = v0 + t, q = v < 16 ? qs[v] & 0xF : qs[v - 16] >> 4;
            if (FIVE) q |= (int)(h >> v & 1) << 4;
            if (DT == DB_IQ4_NL) f[t] = d * (float)iq4_level(q);
            else if (MIN) f[t] = d * (float)q + m;
            else f[t] = d * (float)(q - 16);
        }
    } else if (DT == DB_IQ4_XS) {
        int sub = v0 / 32, l0 = v0 % 32;
        const uint8_t *qs = b + 8 + 16 * sub;
        int ls = (b[4 + sub / 2] >> (4 * (sub % 2)) & 0xF) | ((b[2] | b[3] << 8) >> (2 * sub) & 3) << 4;
        float dj = ld_f16(b) * (float)(ls - 32);
#pragma unroll
        for (int t = 0; t < 8; t++) {
            int l = l0 + t, q = l < 16 ? qs[l] & 0xF : qs[l - 16] >> 4;
            f[t] = dj * (float)iq4_level(q);
        }
    } else if (DT == DB_Q2_K || DT == DB_Q3_K) {
        constexpr bool THREE = DT == DB_Q3_K;
        int j = v0 / 16, l0 = v0 % 16, h = j / 8, k = j % 8 / 2, off = 16 * (j % 2);
        const uint8_t *q = b + (THREE ? 32 : 16) + 32 * h + off;
        float dj, mj = 0.0f;
        if (THREE) {
            const uint8_t *sc = b + 96;
            int lo = j < 8 ? sc[(j & 4) + j % 4] & 0xF : sc[(j & 4) + j % 4] >> 4;
            dj = ld_f16(b + 108) * (float)((lo | (sc[8 + j % 4] >> (2 * (j / 4)) & 3) << 4) - 32);
        } else {
            dj = ld_f16(b + 80) * (float)(b[j] & 0xF);
            mj = ld_f16(b + 82) * (float)(b[j] >> 4);
        }
#pragma unroll
        for (int t = 0; t < 8; t++) {
            int l = l0 + t, v = q[l] >> (2 * k) & 3;
            if (THREE) f[t] = dj * (float)(v - (b[off + l] >> (4 * h + k) & 1 ? 0 : 4));
            else f[t] = dj * (float)v - mj;
        }
    } else { /* Q6_K */
        int h = v0 / 128, k = v0 % 128 / 32, l0 = v0 % 32;
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
        float ds = ld_f16(b + 208) * (float)sc[l0 / 16 + 2 * k];
#pragma unroll
        for (int t = 0; t < 8; t++) {
            int l = l0 + t, lo = k & 1 ? ql[l + 32] : ql[l];
            int q = (k < 2 ? lo & 0xF : lo >> 4) | ((qh[l] >> (2 * k) & 3) << 4);
            f[t] = ds * (float)(q - 32);
        }
    }
}

/* k_rowdot on quantized weights: weight row o is `rb` bytes of blocks; lane l owns the 8-value
 * chunks l, l + warpSize, ... (dequant8), accumulated in order with fmaf, then the butterfly:
 * the order depends on I and warpSize only. XVEC: 16-byte activation loads. */
template <int DT, bool XVEC>
__global__ void k_rowdot_quant(float *__restrict__ y, const float *__restrict__ x, const uint8_t *__restrict__ w,
                               size_t rb, int n, int O, int I, int accumulate)
{
    constexpr int BV = qblock<DT>::values, BB = qblock<DT>::bytes;
    int lane = threadIdx.x % warpSize, nw = blockDim.x / warpSize;
    int o = blockIdx.x * nw + threadIdx.x / warpSize;
    if (o >= O) return; /* the whole warp leaves together */
    const uint8_t *wrow = w + (size_t)o * rb;
    int nch = I / 8;
    for (int r0 = 0; r0 < n; r0 += ROWDOT_TILE) {
        int nr = n - r0 < ROWDOT_TILE ? n - r0 : ROWDOT_TILE;
        float acc[ROWDOT_TILE];
#pragma unroll
        for (int r = 0; r < ROWDOT_TILE; r++) acc[r] = 0.0f;
        for (int ch = lane; ch < nch; ch += warpSize) {
            float wf[8];
            dequant8<DT>(wrow + (size_t)(ch * 8 / BV) * BB, ch * 8 % BV / 8, wf);
            rowdot_chunk<XVEC>(acc, wf, x, r0, nr, I, ch);
        }
        rowdot_store(acc, y, r0, nr, O, o, lane, accumulate);
    }
}

template <int DT>
void launch_rowdot_quant(db_backend *be, float *y, const float *x, const db_weight *w, int n, int accumulate)
{
    gpu_ctx *c = ctx_of(be);
    int O = w->rows, I = w->cols;
    size_t rb = db_dtype_bytes(w->dtype, (size_t)I);
    unsigned threads = 256, per_block = threads / (unsigned)c->warp;
    const uint8_t *wd = (const uint8_t *)w->data;
    if (((uintptr_t)x & 15) == 0)
        launch_kernel(k_rowdot_quant<DT, true>, blocks_for((size_t)O, per_block), threads, 0, c->stream, y, x, wd, rb, n, O, I, accumulate);
    else
        launch_kernel(k_rowdot_quant<DT, false>, blocks_for((size_t)O, per_block), threads, 0, c->stream, y, x, wd, rb, n, O, I, accumulate);
    LAUNCH_CHECK(be, "k_rowdot_quant");
}

/* the quantized types' matmul (any n, any mode); 0 when dt is not one of them */
int matmul_quant(db_backend *be, float *y, const float *x, const db_weight *w, int n, int accumulate)
{
    switch (w->dtype) {
    case DB_Q8_0: launch_rowdot_quant<DB_Q8_0>(be, y, x, w, n, accumulate); return 1;
    case DB_Q4_0: launch_rowdot_quant<DB_Q4_0>(be, y, x, w, n, accumulate); return 1;
    case DB_Q4_K: launch_rowdot_quant<DB_Q4_K>(be, y, x, w, n, accumulate); return 1;
    case DB_Q5_K: launch_rowdot_quant<DB_Q5_K>(be, y, x, w, n, accumulate); return 1;
    case DB_Q6_K: launch_rowdot_quant<DB_Q6_K>(be, y, x, w, n, accumulate); return 1;
    case DB_Q4_1: launch_rowdot_quant<DB_Q4_1>(be, y, x, w, n, accumulate); return 1;
    case DB_Q5_0: launch_rowdot_quant<DB_Q5_0>(be, y, x, w, n, accumulate); return 1;
    case DB_Q5_1: launch_rowdot_quant<DB_Q5_1>(be, y, x, w, n, accumulate); return 1;
    case DB_Q2_K: launch_rowdot_quant<DB_Q2_K>(be, y, x, w, n, accumulate); return 1;
    case DB_Q3_K: launch_rowdot_quant<DB_Q3_K>(be, y, x, w, n, accumulate); return 1;
    case DB_IQ4_NL: launch_rowdot_quant<DB_IQ4_NL>(be, y, x, w, n, accumulate); return 1;
    case DB_IQ4_XS: launch_rowdot_quant<DB_IQ4_XS>(be, y, x, w, n, accumulate); return 1;
    default: return 0;
    }
}

/* The backend's own GEMM (HIP without a vendor BLAS, or DB_GPU_NO_BLAS=1): 64 rows x 64 outputs
 * per block of 256 threads, 4x4 per thread, k in steps of 16 through shared memory. */
constexpr int GT = 64, GK = 16;

template <int DT>
__global__ void __launch_bounds__(256) k_gemm_tiled(float *__restrict__ y, const float *__restrict__ x,
                                                    const void *__restrict__ w, int n, int O, int I,
                                                    int accumulate)
{
    __shared__ float xs[GK][GT + 1];
    __shared__ float wsm[GK][GT + 1];
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int row0 = blockIdx.y * GT, out0 = blockIdx.x * GT;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < I; k0 += GK) {
        for (int e = tid; e < GT * GK; e += 256) {
            int rr = e / GK, kk = e % GK, gk = k0 + kk;
            int gr = row0 + rr, go = out0 + rr;
            xs[kk][rr] = gr < n && gk < I ? x[(size_t)gr * I + gk] : 0.0f;
            wsm[kk][rr] = go < O && gk < I ? load_elem<DT>(w, (size_t)go * I + gk) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < GK; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = xs[kk][ty * 4 + i];
#pragma unroll
            for (int j = 0; j < 4; j++) b[j] = wsm[kk][tx * 4 + j];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int r = row0 + ty * 4 + i;
        if (r >= n) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int o = out0 + tx * 4 + j;
            if (o >= O) continue;
            float *yo = y + (size_t)r * O + o;
            *yo = accumulate ? *yo + acc[i][j] : acc[i][j];
        }
    }
}

#if DB_GPU_BLAS
/* activations to the weight's 16-bit dtype for cuBLAS (round to nearest even) */
template <int DT> __global__ void k_to_half(uint16_t *out, const float *x, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (DT == DB_BF16) out[i] = f32_to_bf16(x[i]);
    else out[i] = __half_as_ushort(__float2half_rn(x[i]));
}
#endif

template <int DT>
void launch_rowdot(db_backend *be, float *y, const float *x, const db_weight *w, int n, int accumulate)
{
    gpu_ctx *c = ctx_of(be);
    int O = w->rows, I = w->cols;
    unsigned threads = 256, per_block = threads / (unsigned)c->warp;
    bool vec = I % 8 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)w->data & 15) == 0;
    if (vec)
        launch_kernel(k_rowdot<DT, true>, blocks_for((size_t)O, per_block), threads, 0, c->stream, y, x, w->data, n, O, I, accumulate);
    else
        launch_kernel(k_rowdot<DT, false>, blocks_for((size_t)O, per_block), threads, 0, c->stream, y, x, w->data, n, O, I, accumulate);
    LAUNCH_CHECK(be, "k_rowdot");
}

template <int DT>
void launch_gemm_tiled(db_backend *be, float *y, const float *x, const db_weight *w, int n, int accumulate)
{
    gpu_ctx *c = ctx_of(be);
    dim3 grid(blocks_for((size_t)w->rows, GT), blocks_for((size_t)n, GT));
    launch_kernel(k_gemm_tiled<DT>, grid, 256, 0, c->stream, y, x, w->data, n, w->rows, w->cols, accumulate);
    LAUNCH_CHECK(be, "k_gemm_tiled");
}

#if DB_GPU_BLAS
/* y[N,O] = x[N,I] W^T. Row-major y is column-major y^T [O x N]; W [O,I] row-major is column-major
 * W^T [I x O]: y^T = (W^T)^T x^T, i.e. gemm(T, N, m=O, n=N, k=I). bf16 / f16 weights stay as
 * stored; the activations are converted to that dtype, the products accumulate in f32 into an
 * f32 output. */
int matmul_blas(db_backend *be, float *y, const float *x, const db_weight *w, int n, int accumulate)
{
    gpu_ctx *c = ctx_of(be);
    int O = w->rows, I = w->cols;
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    if (w->dtype == DB_F32)
        return BLAS_CHECK(be, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, O, n, I, &alpha, w->data,
                                           CUDA_R_32F, I, x, CUDA_R_32F, I, &beta, y, CUDA_R_32F, O,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    size_t elems = (size_t)n * I, bytes = elems * sizeof(uint16_t);
    if (bytes > c->conv_cap) {
        if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
        if (c->conv && CUDA_CHECK(be, cudaFree(c->conv))) return -1;
        c->conv = nullptr;
        c->conv_cap = 0;
        size_t cap = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes;
        if (CUDA_CHECK(be, cudaMalloc(&c->conv, cap))) return -1;
        c->conv_cap = cap;
    }
    cudaDataType_t t = w->dtype == DB_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    if (w->dtype == DB_BF16)
        launch_kernel(k_to_half<DB_BF16>, blocks_for(elems, 256), 256, 0, c->stream, (uint16_t *)c->conv, x, elems);
    else
        launch_kernel(k_to_half<DB_F16>, blocks_for(elems, 256), 256, 0, c->stream, (uint16_t *)c->conv, x, elems);
    if (LAUNCH_CHECK(be, "k_to_half")) return -1;
    return BLAS_CHECK(be, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, O, n, I, &alpha, w->data, t, I,
                                       c->conv, t, I, &beta, y, CUDA_R_32F, O, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
}
#endif

void gpu_matmul(db_backend *be, float *y, const float *x, const db_weight *w, int n, int accumulate)
{
    gpu_ctx *c = ctx_of(be);
    if (n <= 0 || w->rows <= 0) return;
    if (matmul_quant(be, y, x, w, n, accumulate)) return;
    if (!be->deterministic && n >= c->blas_min_rows) {
#if DB_GPU_BLAS
        if (c->use_blas) {
            matmul_blas(be, y, x, w, n, accumulate);
            return;
        }
#endif
        switch (w->dtype) {
        case DB_F32: launch_gemm_tiled<DB_F32>(be, y, x, w, n, accumulate); break;
        case DB_BF16: launch_gemm_tiled<DB_BF16>(be, y, x, w, n, accumulate); break;
        case DB_F16: launch_gemm_tiled<DB_F16>(be, y, x, w, n, accumulate); break;
        default: break; /* quantized: matmul_quant above */
        }
        return;
    }
    (void)c;
    switch (w->dtype) {
    case DB_F32: launch_rowdot<DB_F32>(be, y, x, w, n, accumulate); break;
    case DB_BF16: launch_rowdot<DB_BF16>(be, y, x, w, n, accumulate); break;
    case DB_F16: launch_rowdot<DB_F16>(be, y, x, w, n, accumulate); break;
    default: break; /* quantized: matmul_quant above */
    }
}
