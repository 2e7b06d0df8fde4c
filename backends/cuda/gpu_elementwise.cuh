/* gpu_elementwise.cuh — the small ops: rmsnorm, rope, swiglu, add, scale_softcap, embed, copy_rows
 * (and through it the f16 K/V store), dynconv. Part of gpu_backend.cu's translation unit: included
 * there, inside its anonymous namespace, after the context, arena and device helpers it uses;
 * never compiled alone. */

/* ---------------------------------------------------------------------------------------- */
/* rmsnorm, rope, swiglu, add, scale_softcap, embed, copy_rows, dynconv                     */

/* rows of up to RMS_WARP_MAX: one warp per row; wider rows: one block per row */
constexpr int RMS_WARP_MAX = 2048;

__global__ void k_rmsnorm_warp(float *y, const float *x, const float *w, int n, int d, float eps)
{
    int lane = threadIdx.x % warpSize, nw = blockDim.x / warpSize;
    int r = blockIdx.x * nw + threadIdx.x / warpSize;
    if (r >= n) return;
    const float *xr = x + (size_t)r * d;
    float *yr = y + (size_t)r * d;
    float ss = 0.0f;
    for (int i = lane; i < d; i += warpSize) ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (int i = lane; i < d; i += warpSize) yr[i] = xr[i] * inv * w[i];
}

__global__ void k_rmsnorm_block(float *y, const float *x, const float *w, int d, float eps)
{
    __shared__ float red[MAX_WARPS];
    const float *xr = x + (size_t)blockIdx.x * d;
    float *yr = y + (size_t)blockIdx.x * d;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, red);
    float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (int i = threadIdx.x; i < d; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
}

void gpu_rmsnorm(db_backend *be, float *y, const float *x, const float *w, int n, int d, float eps)
{
    gpu_ctx *c = ctx_of(be);
    if (n <= 0 || d <= 0) return;
    if (d <= RMS_WARP_MAX) {
        unsigned per_block = 256 / (unsigned)c->warp;
        launch_kernel(k_rmsnorm_warp, blocks_for((size_t)n, per_block), 256, 0, c->stream, y, x, w, n, d, eps);
    } else {
        launch_kernel(k_rmsnorm_block, n, 256, 0, c->stream, y, x, w, d, eps);
    }
    LAUNCH_CHECK(be, "k_rmsnorm");
}

/* one thread per (row, frequency): the angle in double as the reference, then every head */
__global__ void k_rope(float *x, const int *pos, int n, int nheads, int hd, float theta)
{
    int half = hd / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n * half) return;
    int r = (int)(idx / half), i = (int)(idx % half);
    double freq = pow((double)theta, -2.0 * i / (double)hd);
    double ang = (double)pos[r] * freq;
    float cs = (float)cos(ang), sn = (float)sin(ang);
    for (int h = 0; h < nheads; h++) {
        float *v = x + ((size_t)r * nheads + h) * hd;
        float a = v[i], b = v[i + half];
        v[i] = a * cs - b * sn;
        v[i + half] = b * cs + a * sn;
    }
}

void gpu_rope(db_backend *be, float *x, const int *pos, int n, int nheads, int hd, float theta)
{
    gpu_ctx *c = ctx_of(be);
    if (n <= 0 || hd < 2) return;
    if (arena_reserve(be, align_up(sizeof(int) * (size_t)n))) return;
    const int *dpos = (const int *)arena_put(be, pos, sizeof(int) * (size_t)n);
    if (!dpos) return;
    size_t total = (size_t)n * (hd / 2);
    launch_kernel(k_rope, blocks_for(total, 128), 128, 0, c->stream, x, dpos, n, nheads, hd, theta);
    LAUNCH_CHECK(be, "k_rope");
}

__global__ void k_swiglu(float *out, const float *gate, const float *up, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
}

void gpu_swiglu(db_backend *be, float *out, const float *gate, const float *up, size_t n)
{
    if (!n) return;
    launch_kernel(k_swiglu, blocks_for(n, 256), 256, 0, ctx_of(be)->stream, out, gate, up, n);
    LAUNCH_CHECK(be, "k_swiglu");
}

__global__ void k_add(float *y, const float *x, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

void gpu_add(db_backend *be, float *y, const float *x, size_t n)
{
    if (!n) return;
    launch_kernel(k_add, blocks_for(n, 256), 256, 0, ctx_of(be)->stream, y, x, n);
    LAUNCH_CHECK(be, "k_add");
}

__global__ void k_scale_softcap(float *x, size_t n, float mult, float cap)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i] * mult;
    x[i] = cap > 0.0f ? tanhf(v / cap) * cap : v;
}

void gpu_scale_softcap(db_backend *be, float *x, size_t n, float mult, float cap)
{
    if (!n) return;
    launch_kernel(k_scale_softcap, blocks_for(n, 256), 256, 0, ctx_of(be)->stream, x, n, mult, cap);
    LAUNCH_CHECK(be, "k_scale_softcap");
}

/* grid.y walks the rows (grid.y is capped at 65535; rows beyond go round again) */
constexpr unsigned MAX_GRID_Y = 65535;

template <int DT> __global__ void k_embed(float *out, const void *table, const int *ids, int n, int d)
{
    for (int r = blockIdx.y; r < n; r += gridDim.y) {
        size_t row = (size_t)ids[r] * d;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < d; c += gridDim.x * blockDim.x)
            out[(size_t)r * d + c] = load_elem<DT>(table, row + c);
    }
}

/* rows of a quantized table: one thread per 8-value chunk (dequant8), bit for bit quant.c's */
template <int DT> __global__ void k_embed_quant(float *out, const uint8_t *table, size_t rb, const int *ids, int n, int d)
{
    constexpr int BV = qblock<DT>::values, BB = qblock<DT>::bytes;
    for (int r = blockIdx.y; r < n; r += gridDim.y) {
        const uint8_t *row = table + (size_t)ids[r] * rb;
        for (int ch = blockIdx.x * blockDim.x + threadIdx.x; ch < d / 8; ch += gridDim.x * blockDim.x) {
            float f[8];
            dequant8<DT>(row + (size_t)(ch * 8 / BV) * BB, ch * 8 % BV / 8, f);
#pragma unroll
            for (int t = 0; t < 8; t++) out[(size_t)r * d + (size_t)ch * 8 + t] = f[t];
        }
    }
}

void gpu_embed(db_backend *be, float *out, const db_weight *table, const int *ids, int n)
{
    gpu_ctx *c = ctx_of(be);
    if (n <= 0) return;
    if (arena_reserve(be, align_up(sizeof(int) * (size_t)n))) return;
    const int *dids = (const int *)arena_put(be, ids, sizeof(int) * (size_t)n);
    if (!dids) return;
    int d = table->cols;
    size_t rb = db_dtype_bytes(table->dtype, (size_t)d);
    dim3 grid(blocks_for((size_t)d, 256) < 64 ? blocks_for((size_t)d, 256) : 64,
              (unsigned)n < MAX_GRID_Y ? (unsigned)n : MAX_GRID_Y);
    switch (table->dtype) {
    case DB_F32: launch_kernel(k_embed<DB_F32>, grid, 256, 0, c->stream, out, table->data, dids, n, d); break;
    case DB_BF16: launch_kernel(k_embed<DB_BF16>, grid, 256, 0, c->stream, out, table->data, dids, n, d); break;
    case DB_F16: launch_kernel(k_embed<DB_F16>, grid, 256, 0, c->stream, out, table->data, dids, n, d); break;
#define EMBED_Q(T) launch_kernel(k_embed_quant<T>, grid, 256, 0, c->stream, out, (const uint8_t *)table->data, rb, dids, n, d)
    case DB_Q8_0: EMBED_Q(DB_Q8_0); break;
    case DB_Q4_0: EMBED_Q(DB_Q4_0); break;
    case DB_Q4_K: EMBED_Q(DB_Q4_K); break;
    case DB_Q5_K: EMBED_Q(DB_Q5_K); break;
    case DB_Q6_K: EMBED_Q(DB_Q6_K); break;
    case DB_Q4_1: EMBED_Q(DB_Q4_1); break;
    case DB_Q5_0: EMBED_Q(DB_Q5_0); break;
    case DB_Q5_1: EMBED_Q(DB_Q5_1); break;
    case DB_Q2_K: EMBED_Q(DB_Q2_K); break;
    case DB_Q3_K: EMBED_Q(DB_Q3_K); break;
    case DB_IQ4_NL: EMBED_Q(DB_IQ4_NL); break;
    case DB_IQ4_XS: EMBED_Q(DB_IQ4_XS); break;
#undef EMBED_Q
    }
    LAUNCH_CHECK(be, "k_embed");
}

/* a row element stored as f32, or as f16 bits rounded to nearest even (__float2half_rn, as
 * db_f32_to_f16): the f16 K/V caches' store is this copy into f16 rows */
__device__ __forceinline__ void store_elem(float *d, float x) { *d = x; }
__device__ __forceinline__ void store_elem(uint16_t *d, float x) { *d = __half_as_ushort(__float2half_rn(x)); }

/* f32 rows whose widths, strides and bases are multiples of 4 floats move as float4: 16-byte
 * loads and stores of the same values (a long copy runs near the device's copy bandwidth, which
 * `bench` measures through this op) */
__device__ __forceinline__ void store_elem(float4 *d, float4 x) { *d = x; }

/* rows must not overlap between dst and src (the pipeline never asks for that); S: float, or
 * float4 with D float4 (strides and width then in float4s) */
template <typename D, typename S = float>
__global__ void k_copy_rows(D *dst, int dst_stride, const int *dst_idx, const S *src, int src_stride,
                            const int *src_idx, int n, int width)
{
    for (int r = blockIdx.y; r < n; r += gridDim.y) {
        size_t d = (size_t)(dst_idx ? dst_idx[r] : r), s = (size_t)(src_idx ? src_idx[r] : r);
        D *dr = dst + d * (size_t)dst_stride;
        const S *sr = src + s * (size_t)src_stride;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < width; i += gridDim.x * blockDim.x)
            store_elem(dr + i, sr[i]);
    }
}

template <typename D>
void launch_copy_rows(db_backend *be, D *dst, int dst_stride, const int *dst_idx, const float *src,
                      int src_stride, const int *src_idx, int n, int width)
{
    gpu_ctx *c = ctx_of(be);
    if (n <= 0 || width <= 0) return;
    size_t ib = sizeof(int) * (size_t)n;
    if (arena_reserve(be, (dst_idx ? align_up(ib) : 0) + (src_idx ? align_up(ib) : 0))) return;
    const int *di = dst_idx ? (const int *)arena_put(be, dst_idx, ib) : nullptr;
    const int *si = src_idx ? (const int *)arena_put(be, src_idx, ib) : nullptr;
    if ((dst_idx && !di) || (src_idx && !si)) return;
    bool vec4 = sizeof(D) == sizeof(float) && (width | dst_stride | src_stride) % 4 == 0 &&
                (((uintptr_t)dst | (uintptr_t)src) & 15) == 0;
    unsigned bx = blocks_for((size_t)(vec4 ? width / 4 : width), 256);
    dim3 grid(bx < 64 ? bx : 64, (unsigned)n < MAX_GRID_Y ? (unsigned)n : MAX_GRID_Y);
    if (vec4)
        launch_kernel(k_copy_rows<float4, float4>, grid, 256, 0, c->stream, (float4 *)(void *)dst, dst_stride / 4, di,
                      (const float4 *)src, src_stride / 4, si, n, width / 4);
    else
        launch_kernel(k_copy_rows<D>, grid, 256, 0, c->stream, dst, dst_stride, di, src, src_stride, si, n, width);
    LAUNCH_CHECK(be, "k_copy_rows");
}

void gpu_copy_rows(db_backend *be, float *dst, int dst_stride, const int *dst_idx, const float *src,
                   int src_stride, const int *src_idx, int n, int width)
{
    launch_copy_rows(be, dst, dst_stride, dst_idx, src, src_stride, src_idx, n, width);
}

/* f16 K/V caches: row dst_idx[r] of dst (rows `width` apart) = row r of src [N, width], in f16 */
void gpu_kv_store_f16(db_backend *be, uint16_t *dst, const int *dst_idx, const float *src, int n, int width)
{
    launch_copy_rows(be, dst, width, dst_idx, src, width, nullptr, n, width);
}

__global__ void k_dynconv(float *out, const float *in, const float *base, const float *delta, int phase,
                          int block, int h, int k, int g, size_t total)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    size_t row = idx / h;
    int c = (int)(idx % h), t = (int)(row % block), gs = h / g;
    const float *d = delta + row * ((size_t)2 * k * g) + (size_t)phase * k * g;
    float acc = 0.0f;
    for (int j = 0; j < k && j <= t; j++)
        acc += (base[(size_t)j * h + c] + d[(size_t)j * g + c / gs]) * in[(row - (size_t)j) * h + c];
    out[idx] = acc;
}

void gpu_dynconv(db_backend *be, float *out, const float *in, const float *base, const float *delta, int phase,
                 int n_blocks, int block, int h, int k, int g)
{
    size_t total = (size_t)n_blocks * block * h;
    if (!total || g <= 0) return;
    launch_kernel(k_dynconv, blocks_for(total, 256), 256, 0, ctx_of(be)->stream, out, in, base, delta, phase, block, h, k, g,
                                                                      total);
    LAUNCH_CHECK(be, "k_dynconv");
}
