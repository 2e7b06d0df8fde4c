/* gpu_backend.cu — the CUDA backend: every op of backend.h on the device (issue 7). The same
 * source is the HIP backend when hipcc compiles it with -DDB_GPU_HIP=1 (gpu_vendor.h maps the
 * names); the reference semantics are backends/cpu/cpu_backend.c, op for op.
 *
 * Memory: plain cudaMalloc / cudaFree (never managed memory), zero-filled on allocation; a host
 * table maps each allocation to its size so bytes_in_use / bytes_peak are exact. All work goes
 * to one non-blocking stream in call order; upload / download / results for the host (topk,
 * pair_scores) synchronise that stream.
 *
 * Index arrays arrive from the host per call (ids, positions, row maps, attention rows,
 * selector ids): each op reserves room for all of its arrays (and its small device results) in
 * one device arena, copies them there and launches. The arena grows (after a stream sync)
 * only when a call needs more than ever before, so steady state makes no cudaMalloc per call.
 * Reusing the arena across calls is safe: everything runs in stream order.
 *
 * Errors: every runtime / cuBLAS call goes through CUDA_CHECK / BLAS_CHECK, which writes
 * "file:line: call: error" into be->err and latches the failure; compute ops are void, so the
 * next sync() / download / topk / pair_scores returns -1. After every kernel launch the last
 * error is read; in builds without NDEBUG the stream is synchronised too, so a faulting kernel
 * is named at its launch site.
 *
 * Determinism: every kernel reduces in an order fixed by the row's own shape (width, key range,
 * warp size), never by the number of rows in the call, EXCEPT the cuBLAS / tiled GEMM path of
 * matmul. That path runs only when be->deterministic == 0 and n >= GPU_BLAS_MIN_ROWS; in
 * deterministic mode every matmul uses the row-dot kernel, so a row's result does not depend on
 * the batch (check-lossless relies on this).
 *
 * Precision: compiled with -fmad=false (HIP: -ffp-contract=off) so that products and sums are
 * rounded like the C reference; fused multiply-adds appear only where written (fmaf).
 *
 * Quantized weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; layouts and arithmetic in backends/quant.c):
 * matmul and embed dequantize 8 values at a time in registers with quant.c's exact f32
 * operations (dequant8), so embed equals the C reference bit for bit and a matmul differs from
 * it only in summation order. A quantized matmul always runs the row-dot kernel (lanes own
 * 8-value chunks, as for f32), in both modes: batch-invariant, and no vendor BLAS. */
#include "gpu_vendor.h"

extern "C" {
#include "backend.h"
}

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

/* ---------------------------------------------------------------------------------------- */
/* context, errors                                                                          */

constexpr int GPU_BLAS_MIN_ROWS = 16; /* rows from which matmul leaves the row-dot kernel   */
constexpr int ROWDOT_TILE = 8;        /* activation rows per pass of the row-dot kernel     */
constexpr int MAX_TOPK = 64;          /* topk: k limit                                      */
constexpr int ATT_THREADS = 128;      /* attention: threads per (row, head) block          */
constexpr int ATT_MAX_PER_LANE = 8;   /* attention: head_dim <= 8 * warpSize                */
constexpr int SELECT_THREADS = 512;   /* topk / probs: threads per row                      */
constexpr int MAX_WARPS = 32;         /* 1024 threads / 32 lanes                            */

struct alloc_entry {
    void *p;
    size_t bytes;
};

struct gpu_ctx {
    cudaStream_t stream;
    int device, warp, sms, cc_major, cc_minor;
    int failed;      /* latched: the first error message stays in be->err */
    int use_blas;    /* vendor BLAS for large non-deterministic matmuls (0: own tiled GEMM) */
#if DB_GPU_BLAS
    cublasHandle_t blas;
#endif
    char *arena;     /* index arrays and small results of one call */
    size_t arena_cap, arena_off;
    void *conv;      /* activations converted to the weight dtype (cuBLAS path) */
    size_t conv_cap;
    alloc_entry *tab; /* open addressing: device pointer -> bytes */
    size_t tab_cap, tab_n;
};

gpu_ctx *ctx_of(db_backend *be) { return (gpu_ctx *)be->ctx; }

const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

__attribute__((format(printf, 2, 3))) void latch(db_backend *be, const char *fmt, ...)
{
    gpu_ctx *c = ctx_of(be);
    if (c && c->failed) return; /* keep the first error: later ones are usually its echo */
    if (c) c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(be->err, sizeof be->err, fmt, ap);
    va_end(ap);
}

int check_rt(db_backend *be, cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess) return 0;
    latch(be, "%s:%d: %s: %s (%s)", base_name(file), line, what, cudaGetErrorString(e),
          cudaGetErrorName(e));
    return -1;
}
#define CUDA_CHECK(be, call) check_rt((be), (call), #call, __FILE__, __LINE__)

#if DB_GPU_BLAS
int check_blas(db_backend *be, cublasStatus_t s, const char *what, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    latch(be, "%s:%d: %s: %s", base_name(file), line, what, cublasGetStatusString(s));
    return -1;
}
#define BLAS_CHECK(be, call) check_blas((be), (call), #call, __FILE__, __LINE__)
#endif

/* After every launch: launch errors always; in debug builds also faults inside the kernel. */
int check_launch(db_backend *be, const char *kernel, const char *file, int line)
{
    if (check_rt(be, cudaGetLastError(), kernel, file, line)) return -1;
#ifndef NDEBUG
    if (check_rt(be, cudaStreamSynchronize(ctx_of(be)->stream), kernel, file, line)) return -1;
#endif
    return 0;
}
#define LAUNCH_CHECK(be, kernel) check_launch((be), "launch " kernel, __FILE__, __LINE__)

unsigned blocks_for(size_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }

/* ---------------------------------------------------------------------------------------- */
/* allocation table                                                                         */

size_t tab_slot(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p >> 8;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 17) & (cap - 1);
}

int tab_insert(gpu_ctx *c, void *p, size_t bytes)
{
    if ((c->tab_n + 1) * 2 > c->tab_cap) {
        size_t cap = c->tab_cap ? c->tab_cap * 2 : 256;
        alloc_entry *t = (alloc_entry *)calloc(cap, sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < c->tab_cap; i++) {
            if (!c->tab[i].p) continue;
            size_t j = tab_slot(c->tab[i].p, cap);
            while (t[j].p) j = (j + 1) & (cap - 1);
            t[j] = c->tab[i];
        }
        free(c->tab);
        c->tab = t;
        c->tab_cap = cap;
    }
    size_t j = tab_slot(p, c->tab_cap);
    while (c->tab[j].p) j = (j + 1) & (c->tab_cap - 1);
    c->tab[j] = alloc_entry{p, bytes};
    c->tab_n++;
    return 0;
}

/* remove p; its size in *bytes. -1 when p was not allocated here. */
int tab_remove(gpu_ctx *c, void *p, size_t *bytes)
{
    if (!c->tab_cap) return -1;
    size_t m = c->tab_cap - 1, j = tab_slot(p, c->tab_cap);
    while (c->tab[j].p && c->tab[j].p != p) j = (j + 1) & m;
    if (!c->tab[j].p) return -1;
    *bytes = c->tab[j].bytes;
    c->tab[j] = alloc_entry{nullptr, 0};
    c->tab_n--;
    /* backward-shift deletion keeps every probe chain unbroken */
    for (size_t k = (j + 1) & m; c->tab[k].p; k = (k + 1) & m) {
        size_t home = tab_slot(c->tab[k].p, c->tab_cap);
        /* move entry k into the hole j when its home is not in (j, k] cyclically */
        int in_range = j < k ? (home > j && home <= k) : (home > j || home <= k);
        if (!in_range) {
            c->tab[j] = c->tab[k];
            c->tab[k] = alloc_entry{nullptr, 0};
            j = k;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* per-call arena for index arrays and small results                                        */

constexpr size_t ARENA_ALIGN = 256;

size_t align_up(size_t x) { return (x + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1); }

/* Room for `bytes` (the sum of align_up() of every piece) for this call; resets the arena. */
int arena_reserve(db_backend *be, size_t bytes)
{
    gpu_ctx *c = ctx_of(be);
    c->arena_off = 0;
    if (bytes <= c->arena_cap) return 0;
    size_t cap = c->arena_cap * 2 > bytes ? c->arena_cap * 2 : bytes;
    if (cap < ((size_t)1 << 20)) cap = (size_t)1 << 20;
    /* earlier calls may still read the old arena */
    if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
    if (c->arena && CUDA_CHECK(be, cudaFree(c->arena))) return -1;
    c->arena = nullptr;
    c->arena_cap = 0;
    if (CUDA_CHECK(be, cudaMalloc((void **)&c->arena, cap))) return -1;
    c->arena_cap = cap;
    return 0;
}

void *arena_take(db_backend *be, size_t bytes)
{
    gpu_ctx *c = ctx_of(be);
    void *p = c->arena + c->arena_off;
    c->arena_off += align_up(bytes);
    return p;
}

/* copy a host array into the arena (stream ordered) */
void *arena_put(db_backend *be, const void *host, size_t bytes)
{
    gpu_ctx *c = ctx_of(be);
    void *p = arena_take(be, bytes);
    if (bytes && CUDA_CHECK(be, cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, c->stream)))
        return nullptr;
    return p;
}

/* ---------------------------------------------------------------------------------------- */
/* device helpers                                                                           */

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return __uint_as_float((unsigned)h << 16); }

__device__ __forceinline__ uint16_t f32_to_bf16(float f) /* as db_f32_to_bf16 */
{
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__device__ __forceinline__ float f16_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }

template <int DT> __device__ __forceinline__ float load_elem(const void *p, size_t i)
{
    if (DT == DB_F32) return ((const float *)p)[i];
    if (DT == DB_BF16) return bf16_to_f32(((const uint16_t *)p)[i]);
    return f16_to_f32(((const uint16_t *)p)[i]);
}

/* 8 consecutive elements from a 16-byte aligned address */
template <int DT> __device__ __forceinline__ void load8_vec(const void *p, size_t i, float (&f)[8])
{
    if (DT == DB_F32) {
        const float4 *q = (const float4 *)((const float *)p + i);
        float4 a = q[0], b = q[1];
        f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
    } else {
        uint4 v = *(const uint4 *)((const uint16_t *)p + i);
        unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint16_t lo = (uint16_t)(w[j] & 0xffffu), hi = (uint16_t)(w[j] >> 16);
            f[2 * j] = DT == DB_BF16 ? bf16_to_f32(lo) : f16_to_f32(lo);
            f[2 * j + 1] = DT == DB_BF16 ? bf16_to_f32(hi) : f16_to_f32(hi);
        }
    }
}

/* up to 8 elements [i, i+8) clipped at `end`, zero beyond */
template <int DT> __device__ __forceinline__ void load8_scalar(const void *p, size_t i, size_t end, float (&f)[8])
{
#pragma unroll
    for (int j = 0; j < 8; j++) f[j] = i + j < end ? load_elem<DT>(p, i + j) : 0.0f;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = warpSize / 2; o > 0; o >>= 1) v += WARP_SHFL_XOR(v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = warpSize / 2; o > 0; o >>= 1) v = fmaxf(v, WARP_SHFL_XOR(v, o));
    return v;
}

/* Block-wide sum in a fixed order (lanes by butterfly, then warps in index order); every thread
 * gets the result. `red` holds MAX_WARPS values; the call begins and ends with a barrier. */
template <typename T> __device__ T block_sum(T v, T *red)
{
    int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize, nw = blockDim.x / warpSize;
    for (int o = warpSize / 2; o > 0; o >>= 1) v += WARP_SHFL_XOR(v, o);
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    T s = 0;
    for (int w = 0; w < nw; w++) s += red[w];
    __syncthreads();
    return s;
}

__device__ float block_max(float v, float *red)
{
    int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize, nw = blockDim.x / warpSize;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    float m = -INFINITY;
    for (int w = 0; w < nw; w++) m = fmaxf(m, red[w]);
    __syncthreads();
    return m;
}

/* A float as an unsigned key that orders like the value; -0 counts as +0 (the C reference
 * compares with ==), NaN lowest. */
__device__ __forceinline__ unsigned order_key(float x)
{
    if (x != x) return 0u;
    if (x == 0.0f) return 0x80000000u;
    unsigned u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_value(unsigned k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

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

/* values [8j, 8j + 8) of block b, with quant.c's operations in its order (8 | 32, so the
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
    if (!be->deterministic && n >= GPU_BLAS_MIN_ROWS) {
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
#undef EMBED_Q
    }
    LAUNCH_CHECK(be, "k_embed");
}

/* rows must not overlap between dst and src (the pipeline never asks for that) */
__global__ void k_copy_rows(float *dst, int dst_stride, const int *dst_idx, const float *src, int src_stride,
                            const int *src_idx, int n, int width)
{
    for (int r = blockIdx.y; r < n; r += gridDim.y) {
        size_t d = (size_t)(dst_idx ? dst_idx[r] : r), s = (size_t)(src_idx ? src_idx[r] : r);
        float *dr = dst + d * (size_t)dst_stride;
        const float *sr = src + s * (size_t)src_stride;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < width; i += gridDim.x * blockDim.x) dr[i] = sr[i];
    }
}

void gpu_copy_rows(db_backend *be, float *dst, int dst_stride, const int *dst_idx, const float *src,
                   int src_stride, const int *src_idx, int n, int width)
{
    gpu_ctx *c = ctx_of(be);
    if (n <= 0 || width <= 0) return;
    size_t ib = sizeof(int) * (size_t)n;
    if (arena_reserve(be, (dst_idx ? align_up(ib) : 0) + (src_idx ? align_up(ib) : 0))) return;
    const int *di = dst_idx ? (const int *)arena_put(be, dst_idx, ib) : nullptr;
    const int *si = src_idx ? (const int *)arena_put(be, src_idx, ib) : nullptr;
    if ((dst_idx && !di) || (src_idx && !si)) return;
    unsigned bx = blocks_for((size_t)width, 256);
    dim3 grid(bx < 64 ? bx : 64, (unsigned)n < MAX_GRID_Y ? (unsigned)n : MAX_GRID_Y);
    launch_kernel(k_copy_rows, grid, 256, 0, c->stream, dst, dst_stride, di, src, src_stride, si, n, width);
    LAUNCH_CHECK(be, "k_copy_rows");
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
 * are merged at the end in warp order. Nothing depends on the number of rows in the call, nor on
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

/* f16 K/V caches: row dst_idx[r] of dst = row r of src [N, width], rounded to nearest even
 * (__float2half_rn, as db_f32_to_f16) */
__global__ void k_kv_store_f16(uint16_t *dst, const int *dst_idx, const float *src, int n, int width)
{
    for (int r = blockIdx.y; r < n; r += gridDim.y) {
        uint16_t *dr = dst + (size_t)dst_idx[r] * (size_t)width;
        const float *sr = src + (size_t)r * (size_t)width;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < width; i += gridDim.x * blockDim.x)
            dr[i] = __half_as_ushort(__float2half_rn(sr[i]));
    }
}

void gpu_kv_store_f16(db_backend *be, uint16_t *dst, const int *dst_idx, const float *src, int n, int width)
{
    gpu_ctx *c = ctx_of(be);
    if (n <= 0 || width <= 0) return;
    size_t ib = sizeof(int) * (size_t)n;
    if (arena_reserve(be, align_up(ib))) return;
    const int *di = (const int *)arena_put(be, dst_idx, ib);
    if (!di) return;
    unsigned bx = blocks_for((size_t)width, 256);
    dim3 grid(bx < 64 ? bx : 64, (unsigned)n < MAX_GRID_Y ? (unsigned)n : MAX_GRID_Y);
    launch_kernel(k_kv_store_f16, grid, 256, 0, c->stream, dst, di, src, n, width);
    LAUNCH_CHECK(be, "k_kv_store_f16");
}

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
    if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
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

/* In place, per row, as db_probs_host: softmax(x / temperature) (sum in double); when
 * filtering, the order is (probability desc, id asc): top-k keeps the first `keep` entries,
 * whose mass is kmass; the nucleus is the shortest prefix of those whose mass reaches
 * top_p * kmass (the top-k-renormalised distribution's top_p); kept entries are renormalised
 * by their sum, the rest set to 0. Two radix walks find the two cuts (top-k, then the nucleus
 * inside it); in a tie bucket the smallest ids come first. */
__global__ void k_probs(float *x, int v, float temperature, float top_p, int top_k)
{
    __shared__ double dred[MAX_WARPS];
    __shared__ float fred[MAX_WARPS];
    __shared__ unsigned long long qred[MAX_WARPS];
    __shared__ int wtot[MAX_WARPS];
    float *row = x + (size_t)blockIdx.x * v;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < v; i += blockDim.x) mx = fmaxf(mx, row[i]);
    mx = block_max(mx, fred);
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
    if (n <= 0 || v <= 0) return;
    launch_kernel(k_probs, n, SELECT_THREADS, 0, ctx_of(be)->stream, x, v, temperature, top_p, top_k);
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
    if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
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
    if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
    return c->failed ? -1 : 0;
}

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
    if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
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
 * (the filter's order: value descending, index ascending, by insertion sort) */
__device__ void probs_small(float *x, int n, float temperature, float top_p, int top_k)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
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
    if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
    return c->failed ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* lifetime and memory                                                                      */

int gpu_init(db_backend *be, const db_backend_opts *opts)
{
    int count = 0, dev = opts ? opts->device : 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(be->err, sizeof be->err, "no " DB_GPU_VENDOR " device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "the runtime sees 0 devices");
        (void)cudaGetLastError();
        return -1;
    }
    if (dev < 0 || dev >= count) {
        snprintf(be->err, sizeof be->err, "device %d requested, %d " DB_GPU_VENDOR " device(s) present", dev, count);
        return -1;
    }
    gpu_ctx *c = (gpu_ctx *)calloc(1, sizeof *c);
    if (!c) {
        snprintf(be->err, sizeof be->err, "out of memory");
        return -1;
    }
    c->device = dev;
    cudaDeviceProp prop;
    if (CUDA_CHECK(be, cudaSetDevice(dev)) || CUDA_CHECK(be, cudaGetDeviceProperties(&prop, dev)) ||
        CUDA_CHECK(be, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking))) {
        free(c);
        return -1;
    }
    be->ctx = c;
    c->warp = prop.warpSize;
    c->sms = prop.multiProcessorCount;
    c->cc_major = prop.major;
    c->cc_minor = prop.minor;
    if (c->warp < 1 || c->warp > 64 || 256 % c->warp != 0) {
        snprintf(be->err, sizeof be->err, "unsupported warp size %d", c->warp);
        (void)cudaStreamDestroy(c->stream);
        free(c);
        be->ctx = nullptr;
        return -1;
    }
    const char *no_blas = getenv("DB_GPU_NO_BLAS"); /* testing: the own tiled GEMM on CUDA too */
    c->use_blas = DB_GPU_BLAS && !(no_blas && *no_blas && strcmp(no_blas, "0") != 0);
#if DB_GPU_BLAS
    if (BLAS_CHECK(be, cublasCreate(&c->blas)) || BLAS_CHECK(be, cublasSetStream(c->blas, c->stream))) {
        (void)cudaStreamDestroy(c->stream);
        free(c);
        be->ctx = nullptr;
        return -1;
    }
#endif
    double gib = (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0);
#if defined(DB_GPU_HIP) && DB_GPU_HIP
    snprintf(be->device_name, sizeof be->device_name, "%.64s (%.24s, %.1f GiB, %d CUs)", prop.name, prop.gcnArchName, gib,
             c->sms);
    snprintf(be->simd, sizeof be->simd, "%.24s", prop.gcnArchName);
    char *colon = strchr(be->simd, ':'); /* "gfx90a:sramecc+:xnack-" -> "gfx90a" */
    if (colon) *colon = '\0';
#else
    snprintf(be->device_name, sizeof be->device_name, "%.80s (%.1f GiB, sm_%d%d, %d SMs)", prop.name, gib, prop.major,
             prop.minor, c->sms);
    snprintf(be->simd, sizeof be->simd, "sm_%d%d", prop.major, prop.minor);
#endif
    be->threads = 1; /* one host thread drives the device */
    be->deterministic = opts ? opts->deterministic : 0;
    be->quant_weights = 1; /* matmul and embed take the quantized types */
    return 0;
}

void gpu_free(db_backend *be)
{
    gpu_ctx *c = ctx_of(be);
    if (!c) return;
    (void)cudaStreamSynchronize(c->stream);
#if DB_GPU_BLAS
    if (c->blas) cublasDestroy(c->blas);
#endif
    for (size_t i = 0; i < c->tab_cap; i++) /* whatever the pipeline left behind */
        if (c->tab[i].p) (void)cudaFree(c->tab[i].p);
    if (c->arena) (void)cudaFree(c->arena);
    if (c->conv) (void)cudaFree(c->conv);
    (void)cudaStreamDestroy(c->stream);
    free(c->tab);
    free(c);
    be->ctx = nullptr;
}

void *gpu_alloc(db_backend *be, size_t bytes)
{
    gpu_ctx *c = ctx_of(be);
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        /* not latched: the caller reports it and may try less; clear the runtime's last error */
        size_t free_b = 0, total_b = 0;
        (void)cudaGetLastError();
        (void)cudaMemGetInfo(&free_b, &total_b);
        snprintf(be->err, sizeof be->err, "cudaMalloc of %.1f MiB: %s (%.1f MiB free of %.1f)",
                 (double)bytes / 1048576.0, cudaGetErrorString(e), (double)free_b / 1048576.0,
                 (double)total_b / 1048576.0);
        (void)cudaGetLastError();
        return nullptr;
    }
    if (CUDA_CHECK(be, cudaMemsetAsync(p, 0, bytes ? bytes : 1, c->stream)) || tab_insert(c, p, bytes) != 0) {
        (void)cudaFree(p);
        return nullptr;
    }
    be->bytes_in_use += bytes;
    if (be->bytes_in_use > be->bytes_peak) be->bytes_peak = be->bytes_in_use;
    return p;
}

void gpu_dfree(db_backend *be, void *p)
{
    gpu_ctx *c = ctx_of(be);
    if (!p) return;
    size_t bytes = 0;
    if (tab_remove(c, p, &bytes) != 0) {
        latch(be, "dfree: %p was not allocated by this backend", p);
        return;
    }
    be->bytes_in_use -= bytes;
    CUDA_CHECK(be, cudaStreamSynchronize(c->stream)); /* pending work may still use it */
    CUDA_CHECK(be, cudaFree(p));
}

int gpu_upload(db_backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *c = ctx_of(be);
    if (!bytes) return c->failed ? -1 : 0;
    if (CUDA_CHECK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream))) return -1;
    if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
    return c->failed ? -1 : 0;
}

int gpu_download(db_backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *c = ctx_of(be);
    if (!bytes) return c->failed ? -1 : 0;
    if (CUDA_CHECK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream))) return -1;
    if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
    return c->failed ? -1 : 0;
}

int gpu_sync(db_backend *be)
{
    gpu_ctx *c = ctx_of(be);
    if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return -1;
    return c->failed ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* synthetic weights, free memory (optional ops)                                            */

/* db_fill_random_value (backend.h) on the device, bit for bit: integer mixing, an exact
 * product in double, one rounding to float, then round to nearest even into the dtype */
__global__ void k_fill_random(void *dst, size_t n, int dt, uint64_t seed, uint64_t offset, float scale, float mean)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + (offset + i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z = z ^ (z >> 31);
        float r = (float)((int32_t)(z >> 40) - 8388608) * 0x1p-23f;
        float v = (float)((double)mean + (double)scale * (double)r);
        if (dt == DB_F32) ((float *)dst)[i] = v;
        else if (dt == DB_BF16) ((uint16_t *)dst)[i] = f32_to_bf16(v);
        else ((uint16_t *)dst)[i] = __half_as_ushort(__float2half_rn(v));
    }
}

void gpu_fill_random(db_backend *be, void *dst, size_t n, db_dtype dt, uint64_t seed, uint64_t offset, float scale,
                     float mean)
{
    gpu_ctx *c = ctx_of(be);
    if (!n) return;
    size_t blocks = blocks_for(n, 256), cap = (size_t)c->sms * 32;
    launch_kernel(k_fill_random, (unsigned)(blocks < cap ? blocks : cap), 256, 0, c->stream, dst, n, (int)dt, seed, offset,
                                                                                 scale, mean);
    LAUNCH_CHECK(be, "k_fill_random");
}

size_t gpu_mem_available(db_backend *be)
{
    (void)be;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return free_b;
}

} /* namespace */

#if !defined(__HIP_DEVICE_COMPILE__) /* hip-clang would put this constant on the device too */
extern "C" const db_backend_ops DB_GPU_OPS = {
    .name = DB_GPU_NAME,
    .init = gpu_init,
    .free = gpu_free,
    .alloc = gpu_alloc,
    .dfree = gpu_dfree,
    .upload = gpu_upload,
    .download = gpu_download,
    .sync = gpu_sync,
    .matmul = gpu_matmul,
    .rmsnorm = gpu_rmsnorm,
    .rope = gpu_rope,
    .attention = gpu_attention,
    .swiglu = gpu_swiglu,
    .embed = gpu_embed,
    .add = gpu_add,
    .copy_rows = gpu_copy_rows,
    .scale_softcap = gpu_scale_softcap,
    .topk = gpu_topk,
    .probs = gpu_probs,
    .dynconv = gpu_dynconv,
    .pair_scores = gpu_pair_scores,
    .markov_bias = gpu_markov_bias,
    .fill_random = gpu_fill_random,
    .kv_store_f16 = gpu_kv_store_f16,
    .attention_f16 = gpu_attention_f16,
    .sample = gpu_sample,
    .accept = gpu_accept,
    .select_walk = gpu_select_walk,
    .mem_available = gpu_mem_available,
};
#endif
