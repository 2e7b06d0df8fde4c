/* gpu_backend.cu — the CUDA backend: every op of backend.h on the device (issue 7). The same
 * source is the HIP backend when hipcc compiles it with -DDB_GPU_HIP=1 (gpu_vendor.h maps the
 * names); the reference semantics are backends/cpu/cpu_backend.c, op for op.
 *
 * Files: this one holds the context, errors, allocation table, arena, device helpers, lifetime
 * and the ops table; the ops themselves are in gpu_matmul.cuh, gpu_elementwise.cuh,
 * gpu_attention.cuh, gpu_sampling.cuh and gpu_selector.cuh, included below as parts of this
 * one translation unit.
 *
 * Memory: plain cudaMalloc / cudaFree (never managed memory), zero-filled on allocation; a host
 * table maps each allocation to its size so bytes_in_use / bytes_peak are exact. All work goes
 * to one non-blocking stream in call order; upload / download / results for the host (topk,
 * pair_scores) synchronise that stream.
 *
 * Non-finite logits: k_probs counts the rows it finds non-finite in a device counter; every op
 * that waits for the stream to hand results to the host (sync_results) copies the counter in
 * the same wait, so the engine's nonfinite() after a sample / accept / topk / download costs
 * no synchronisation of its own.
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
 * matmul. That path runs only when be->deterministic == 0 and n >= blas_min_rows; in
 * deterministic mode every matmul uses the row-dot kernel, so a row's result does not depend on
 * the batch (check-lossless relies on this).
 *
 * Precision: compiled with -fmad=false (HIP: -ffp-contract=off) so that products and sums are
 * rounded like the C reference; fused multiply-adds appear only where written (fmaf).
 *
 * Quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K-Q6_K, IQ4_NL, IQ4_XS; layouts and arithmetic in backends/quant.c):
 * matmul and embed dequantize 8 values at a time in registers with quant.c's exact f32
 * operations (dequant8), so embed equals the C reference bit for bit and a matmul differs from
 * it only in summation order. A quantized matmul always runs the row-dot kernel (lanes own
 * 8-value chunks, as for f32), in both modes: batch-invariant, and no vendor BLAS. */
#include "gpu_vendor.h"

extern "C" {
#include "backend.h"
}
#include "alloc.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

/* ---------------------------------------------------------------------------------------- */
/* context, errors                                                                          */

/* Fast mode: rows from which matmul leaves the row-dot kernel for cuBLAS (DB_GPU_BLAS_MIN_ROWS=N
 * moves it). Measured on an H200 (scripts/gpu-check, bench-gpu-gemv): cuBLAS reads bf16 weights
 * at 0.77-0.95 of the copy bandwidth from 1 row on, the row-dot kernel at 0.4-0.6 at 1 row and
 * falling with every row it adds (0.16 at 8), so every fast-mode matmul goes to cuBLAS. */
constexpr int GPU_BLAS_MIN_ROWS = 1;
constexpr size_t STAGE_BYTES = (size_t)4 << 20; /* pinned staging ring of the index uploads */
constexpr int ROWDOT_TILE = 8;        /* activation rows per pass of the row-dot kernel     */
constexpr int MAX_TOPK = 64;          /* topk: k limit                                      */
constexpr int ATT_THREADS = 256;      /* attention: threads per (row, head) block          */
constexpr int ATT_MAX_PER_LANE = 8;   /* attention: head_dim <= 8 * warpSize                */
/* attention, several queries a block (k_attention_multi): at most this many (row, head) pairs
 * share one block's K/V loads; each keeps m, l and head_dim / warpSize accumulators per lane
 * in registers (8 pairs x 4 = 32 at head_dim 128, warp 32). A call whose tasks would not give
 * every SM a block halves it (down to 2): one request's 16-row verify at 64:8 heads is 128
 * blocks of 8 pairs. DB_GPU_ATT_PAIRS=1..8 (tuning, tests) fixes it; 1 sends every row to
 * k_attention. Not measured yet: scripts/gpu-check's verify-at-depth step sweeps it. */
constexpr int ATT_PAIRS = 8;
/* consecutive rows of one slot with one key_lo (a verify block, a prefill chunk) go to
 * k_attention_multi from this many on; a lone row (decode) stays on k_attention */
constexpr int ATT_MULTI_MIN_ROWS = 2;
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
    int blas_min_rows; /* fast mode: rows from which matmul leaves the row-dot kernel */
    int att_pairs;   /* attention: (row, head) pairs per k_attention_multi block, 1..ATT_PAIRS */
    int att_pairs_set; /* ... as DB_GPU_ATT_PAIRS said: not lowered for a small grid */
    void *att_host;  /* attention: host scratch for the launch plan (tasks, row map) */
    size_t att_host_cap;
#if DB_GPU_BLAS
    cublasHandle_t blas;
#endif
    char *arena;     /* index arrays and small results of one call */
    size_t arena_cap, arena_off;
    char *stage;     /* pinned host ring the index arrays pass through (NULL: pageable copies) */
    size_t stage_off;
    void *conv;      /* activations converted to the weight dtype (cuBLAS path) */
    size_t conv_cap;
    alloc_entry *tab; /* open addressing: device pointer -> bytes */
    size_t tab_cap, tab_n;
    unsigned *nonfinite_dev;  /* device: non-finite rows k_probs met, a running count */
    unsigned nonfinite_host;  /* its last copy */
    unsigned nonfinite_taken; /* the count nonfinite() reported up to */
    int nonfinite_stale;      /* a k_probs was queued after the last copy */
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

/* Wait for the stream, by an op whose results the host reads: the non-finite count of the
 * k_probs queued before comes back in the same wait (a 4-byte copy, no synchronisation more). */
int sync_results(db_backend *be)
{
    gpu_ctx *c = ctx_of(be);
    if (c->nonfinite_stale) {
        if (CUDA_CHECK(be, cudaMemcpyAsync(&c->nonfinite_host, c->nonfinite_dev, sizeof(unsigned),
                                           cudaMemcpyDeviceToHost, c->stream)))
            return -1;
        c->nonfinite_stale = 0;
    }
    return CUDA_CHECK(be, cudaStreamSynchronize(c->stream));
}

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
        alloc_entry *t = (alloc_entry *)db_calloc(cap, sizeof *t);
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

/* Copy a host array into the arena (stream ordered). A copy from pageable memory may wait for
 * the stream to drain before it stages the bytes, which left the device idle while the host
 * queued the next kernels, several times per layer (rope's positions, the K/V rows, the
 * attention rows). So the bytes go through a pinned ring first: the copy from there is truly
 * asynchronous. A slot is written once per lap of the ring, and before a lap starts over the
 * stream is synchronised, so no queued copy still reads a slot being rewritten. */
void *arena_put(db_backend *be, const void *host, size_t bytes)
{
    gpu_ctx *c = ctx_of(be);
    void *p = arena_take(be, bytes);
    if (!bytes) return p;
    const void *src = host;
    if (c->stage && bytes <= STAGE_BYTES) {
        if (c->stage_off + bytes > STAGE_BYTES) {
            if (CUDA_CHECK(be, cudaStreamSynchronize(c->stream))) return nullptr;
            c->stage_off = 0;
        }
        memcpy(c->stage + c->stage_off, host, bytes);
        src = c->stage + c->stage_off;
        c->stage_off += (bytes + 63) & ~(size_t)63;
    }
    if (CUDA_CHECK(be, cudaMemcpyAsync(p, src, bytes, cudaMemcpyHostToDevice, c->stream))) return nullptr;
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

/* the ops, one concern a file; each is a part of this translation unit (the helpers above, one
 * anonymous namespace), so nvcc, hipcc and the emulation still compile one source */
#include "gpu_matmul.cuh"
#include "gpu_elementwise.cuh"
#include "gpu_attention.cuh"
#include "gpu_sampling.cuh"
#include "gpu_selector.cuh"

/* ---------------------------------------------------------------------------------------- */
/* lifetime and memory                                                                      */

/* a context whose init failed after its stream was made (be->err says why) */
int init_fail(db_backend *be, gpu_ctx *c)
{
    if (c->nonfinite_dev) (void)cudaFree(c->nonfinite_dev);
    (void)cudaStreamDestroy(c->stream);
    free(c);
    be->ctx = nullptr;
    return -1;
}

int gpu_init(db_backend *be, const db_backend_opts *opts)
{
    int count = 0, dev = opts ? opts->device : 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(be->err, sizeof be->err, "no " DB_GPU_VENDOR " device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "the runtime sees 0 devices");
        (void)cudaGetLastError();
        return -2;
    }
    if (dev < 0 || dev >= count) {
        snprintf(be->err, sizeof be->err, "device %d requested, %d " DB_GPU_VENDOR " device(s) present", dev, count);
        return -2;
    }
    gpu_ctx *c = (gpu_ctx *)db_calloc(1, sizeof *c);
    if (!c) {
        snprintf(be->err, sizeof be->err, "out of memory allocating the " DB_GPU_VENDOR " backend context");
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
        return init_fail(be, c);
    }
    /* outside the allocation table: bytes_in_use counts the pipeline's buffers only */
    if (CUDA_CHECK(be, cudaMalloc((void **)&c->nonfinite_dev, sizeof(unsigned))) ||
        CUDA_CHECK(be, cudaMemsetAsync(c->nonfinite_dev, 0, sizeof(unsigned), c->stream)))
        return init_fail(be, c);
    const char *no_blas = getenv("DB_GPU_NO_BLAS"); /* testing: the own tiled GEMM on CUDA too */
    c->use_blas = DB_GPU_BLAS && !(no_blas && *no_blas && strcmp(no_blas, "0") != 0);
    /* tuning and tests: where fast mode hands matmuls to the GEMM (1 .. 4096 rows) */
    const char *min_rows = getenv("DB_GPU_BLAS_MIN_ROWS");
    c->blas_min_rows = min_rows && atoi(min_rows) >= 1 && atoi(min_rows) <= 4096 ? atoi(min_rows) : GPU_BLAS_MIN_ROWS;
    const char *att_pairs = getenv("DB_GPU_ATT_PAIRS");
    c->att_pairs_set = att_pairs && atoi(att_pairs) >= 1 && atoi(att_pairs) <= ATT_PAIRS;
    c->att_pairs = c->att_pairs_set ? atoi(att_pairs) : ATT_PAIRS;
#if DB_GPU_BLAS
    if (BLAS_CHECK(be, cublasCreate(&c->blas)) ||
        BLAS_CHECK(be, cublasSetStream(c->blas, c->stream)))
        return init_fail(be, c);
#endif
    /* DB_GPU_PAGEABLE_UPLOADS=1 (measurements): index arrays copied from pageable memory */
    const char *pageable = getenv("DB_GPU_PAGEABLE_UPLOADS");
    if (!(pageable && *pageable && strcmp(pageable, "0") != 0) &&
        cudaMallocHost((void **)&c->stage, STAGE_BYTES) != cudaSuccess) {
        c->stage = nullptr; /* pinned memory refused: pageable copies still work */
        (void)cudaGetLastError();
    }
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
    if (c->stage) (void)cudaFreeHost(c->stage);
    if (c->nonfinite_dev) (void)cudaFree(c->nonfinite_dev);
    (void)cudaStreamDestroy(c->stream);
    free(c->tab);
    free(c->att_host);
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
    if (sync_results(be)) return -1;
    return c->failed ? -1 : 0;
}

int gpu_sync(db_backend *be)
{
    gpu_ctx *c = ctx_of(be);
    if (sync_results(be)) return -1;
    return c->failed ? -1 : 0;
}

/* the count since the last call; a wait of its own only when no op read it back since the
 * last k_probs (the engine always asks after one that did) */
int gpu_nonfinite(db_backend *be)
{
    gpu_ctx *c = ctx_of(be);
    if (c->nonfinite_stale && sync_results(be)) return -1;
    if (c->failed) return -1;
    int n = (int)(c->nonfinite_host - c->nonfinite_taken);
    c->nonfinite_taken = c->nonfinite_host;
    return n;
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

#if !defined(__HIP_DEVICE_COMPILE__) /* hip-clang would put these constants on the device too */
#if !(defined(DB_GPU_EMU) && DB_GPU_EMU)
/* the module's layout of backend.h, checked by the loader (backends/backend_module.c) */
extern "C" const int db_backend_module_abi = DB_BACKEND_ABI;
#endif
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
    .nonfinite = gpu_nonfinite,
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
