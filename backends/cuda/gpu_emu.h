/* gpu_emu.h — a CPU emulation of the small part of CUDA that gpu_backend.cu uses, so the
 * backend's kernels RUN (slowly) on a machine without a GPU: compiled by g++ from gpu_emu.cc,
 * it is the `gpu-emu` backend that tests/test_gpu.c checks against the CPU backend in CI.
 *
 * Model: one block at a time; its threads are ucontext fibers on the calling OS thread,
 * switched only at barriers, so `__shared__` can be `static` (one copy, shared by the block's
 * fibers) and shared-memory atomics are plain read-modify-writes. threadIdx is set by the
 * scheduler each time it resumes a fiber.
 *   __syncthreads()          all live threads of the block meet
 *   shuffles, ballots,       all live lanes of the warp meet (twice: deposit, then read). A
 *   __syncwarp()             warp barrier with an exited lane, or a warp whose lanes wait at
 *                            different barriers, aborts: that would be a bug on a real GPU too
 * warpSize is $DB_GPU_EMU_WARP (32 by default; 64 exercises the CDNA wavefront paths);
 * DB_GPU_EMU_ORDER=reverse resumes threads last to first, which exposes many missing barriers
 * (a reader that runs before its writer sees stale data).
 * Device memory is host memory (256-byte aligned); streams are synchronous. Nothing here is
 * fast or faithful about timing: it checks indexing, barriers, reductions and results. */
#ifndef DB_GPU_EMU_H
#define DB_GPU_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <ucontext.h>

#include <vector>

extern "C" {
#include "backend.h"
}
#include "alloc.h"

/* ---- language ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 {
    unsigned x, y, z;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};

/* the warp width the kernels and the host see (cudaGetDeviceProperties sets it) */
inline int warpSize = 32;

namespace emu {

/* A fiber is created once per thread index (makecontext / setcontext) and reused by every
 * later block; every switch is _setjmp / _longjmp (no signal-mask system call, unlike
 * swapcontext). */
struct fiber {
    ucontext_t ctx;
    jmp_buf jb;
    uint3 tid;
    int started;
    int done;
    int wait;   /* 0 runnable, 1 block barrier, 2 warp barrier */
    int parity; /* which exchange buffer the next shuffle / ballot uses */
};

constexpr int MAX_THREADS = 1024;
constexpr size_t STACK = 128 * 1024;

inline uint3 tid, bid;
inline dim3 bdim, gdim;
inline fiber *fibers;    /* [MAX_THREADS], never moved (contexts point into themselves) */
inline char *stacks;     /* [MAX_THREADS * STACK], touched only as deep as a fiber goes */
inline uint64_t xchg[2][MAX_THREADS]; /* shuffle / ballot slots, double-buffered */
inline jmp_buf sched;
inline int cur;
inline void (*body)(void *);
inline void *body_arg;
inline std::vector<char> dyn_smem;
/* resume warps and lanes last to first: a read that lacks its barrier then sees the data not
 * yet written (with the usual order the writer has often run first and hides the race) */
inline int reverse;
/* a launch that could not get its fibers' memory: the next cudaGetLastError() reports it, as
 * the runtime reports a launch that failed for lack of resources */
inline int launch_failed;

[[noreturn]] inline void fail(const char *what)
{
    fprintf(stderr, "gpu-emu: %s (block %u,%u thread %d)\n", what, bid.x, bid.y, cur);
    abort();
}

inline void wait_at(int kind)
{
    fiber &f = fibers[cur];
    f.wait = kind;
    if (_setjmp(f.jb) == 0) _longjmp(sched, 1);
}

inline void fiber_main()
{
    for (;;) { /* one pass per block this thread index runs */
        body(body_arg);
        fiber &f = fibers[cur];
        f.done = 1;
        if (_setjmp(f.jb) == 0) _longjmp(sched, 1);
    }
}

inline void resume(int t)
{
    fiber &f = fibers[t];
    cur = t;
    tid = f.tid;
    if (_setjmp(sched) == 0) {
        if (!f.started) {
            f.started = 1;
            setcontext(&f.ctx);
        }
        _longjmp(f.jb, 1);
    }
}

/* Run one block, warp by warp: a warp's lanes run until each waits or is done; a warp barrier
 * every live lane reached opens at once (and the warp runs on); once every warp is stopped
 * at __syncthreads or done, the block barrier opens. Anything else is a deadlock or a
 * divergent warp-level operation, which abort. */
inline void run_block(int nthreads)
{
    for (int t = 0; t < nthreads; t++) {
        fiber &f = fibers[t];
        if (!f.started) {
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = stacks + (size_t)t * STACK;
            f.ctx.uc_stack.ss_size = STACK;
            f.ctx.uc_link = nullptr;
            makecontext(&f.ctx, fiber_main, 0);
        }
        f.done = 0;
        f.wait = 0;
        f.parity = 0;
        f.tid = uint3{(unsigned)t % bdim.x, (unsigned)t / bdim.x % bdim.y, (unsigned)t / (bdim.x * bdim.y)};
    }
    for (;;) {
        int nw = (nthreads + ::warpSize - 1) / ::warpSize;
        for (int wi = 0; wi < nw; wi++) {
            int lo = (reverse ? nw - 1 - wi : wi) * ::warpSize;
            int hi = lo + ::warpSize < nthreads ? lo + ::warpSize : nthreads;
            for (;;) {
                for (int i = lo; i < hi; i++) {
                    int t = reverse ? hi - 1 - (i - lo) : i;
                    if (!fibers[t].done && !fibers[t].wait) resume(t);
                }
                int at_warp = 0, at_block = 0, exited = 0;
                for (int t = lo; t < hi; t++) {
                    exited += fibers[t].done;
                    at_warp += !fibers[t].done && fibers[t].wait == 2;
                    at_block += !fibers[t].done && fibers[t].wait == 1;
                }
                if (!at_warp) break;
                if (exited) fail("warp-level operation with exited lanes in the warp");
                if (at_block) fail("lanes of one warp wait at different barriers (divergent shuffle / __syncthreads)");
                for (int t = lo; t < hi; t++) fibers[t].wait = 0;
            }
        }
        int live = 0;
        for (int t = 0; t < nthreads; t++) live += !fibers[t].done;
        if (!live) break;
        for (int t = 0; t < nthreads; t++)
            if (!fibers[t].done) fibers[t].wait = 0; /* all of them are at __syncthreads */
    }
}

template <typename F> void run_grid(dim3 g, dim3 b, size_t smem, F &f)
{
    if (b.x * b.y * b.z == 0 || b.x * b.y * b.z > 1024) fail("bad block size");
    if (!fibers) fibers = (fiber *)db_calloc(MAX_THREADS, sizeof(fiber));
    if (!stacks) stacks = (char *)db_malloc((size_t)MAX_THREADS * STACK);
    if (!fibers || !stacks) {
        launch_failed = 1; /* nothing of the grid runs */
        return;
    }
    gdim = g;
    bdim = b;
    dyn_smem.assign(smem ? smem : 1, 0x7f); /* poisoned: kernels must write before reading */
    body = [](void *p) { (*(F *)p)(); };
    body_arg = (void *)&f;
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++) {
                bid = uint3{x, y, z};
                run_block((int)(b.x * b.y * b.z));
            }
    body_arg = nullptr;
}

inline int linear_tid() { return (int)(tid.x + bdim.x * (tid.y + bdim.y * tid.z)); }

/* one warp barrier per shuffle: lanes deposit into this shuffle's buffer and read after the
 * barrier; the next shuffle uses the other buffer, and nobody can reach the one after that
 * before every lane has passed the next barrier, i.e. finished reading this one */
template <typename T> T shfl_xor(T v, int o)
{
    static_assert(sizeof(T) <= 8, "shuffle of a wide type");
    int t = linear_tid(), lane = t % ::warpSize, w0 = t - lane, src = w0 + (lane ^ o);
    int p = fibers[t].parity;
    fibers[t].parity ^= 1;
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    xchg[p][t] = u;
    wait_at(2);
    if (src >= (int)(bdim.x * bdim.y * bdim.z)) fail("shuffle source outside the block");
    T r;
    u = xchg[p][src];
    memcpy(&r, &u, sizeof r);
    return r;
}

inline unsigned long long ballot(int pred)
{
    int t = linear_tid(), lane = t % ::warpSize, w0 = t - lane, n = (int)(bdim.x * bdim.y * bdim.z);
    int p = fibers[t].parity;
    fibers[t].parity ^= 1;
    xchg[p][t] = pred != 0;
    wait_at(2);
    unsigned long long b = 0;
    for (int l = 0; l < ::warpSize && w0 + l < n; l++)
        if (xchg[p][w0 + l]) b |= 1ull << l;
    return b;
}

} /* namespace emu */

#define threadIdx emu::tid
#define blockIdx emu::bid
#define blockDim emu::bdim
#define gridDim emu::gdim
#define __syncthreads() emu::wait_at(1)
#define WARP_SHFL_XOR(v, o) emu::shfl_xor((v), (o))
#define WARP_BALLOT(p) emu::ballot((p))
#define WARP_SYNC() emu::wait_at(2)
#define DB_DYN_SHARED(type, name) type *name = (type *)emu::dyn_smem.data()

template <typename T> inline T atomicAdd(T *p, T v)
{
    T old = *p;
    *p = old + v;
    return old;
}

inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

struct __half {
    uint16_t bits;
};
inline __half __ushort_as_half(uint16_t u) { return __half{u}; }
inline uint16_t __half_as_ushort(__half h) { return h.bits; }
inline float __half2float(__half h) { return db_f16_to_f32(h.bits); }
inline __half __float2half_rn(float f) { return __half{db_f32_to_f16(f)}; }

/* ---- runtime ---- */
typedef enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1 } cudaError_t;
typedef struct emu_stream *cudaStream_t;
enum { cudaStreamNonBlocking = 1 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int multiProcessorCount, warpSize, major, minor;
};

inline cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int)
{
    memset(p, 0, sizeof *p);
    const char *w = getenv("DB_GPU_EMU_WARP");
    warpSize = w && atoi(w) == 64 ? 64 : 32;
    const char *o = getenv("DB_GPU_EMU_ORDER");
    emu::reverse = o && strcmp(o, "reverse") == 0;
    snprintf(p->name, sizeof p->name, "CPU emulation (warp %d)", warpSize);
    p->totalGlobalMem = (size_t)1 << 30;
    p->multiProcessorCount = 4;
    p->warpSize = warpSize;
    p->major = 0;
    p->minor = 0;
    return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, int)
{
    *s = (cudaStream_t)(uintptr_t)1;
    return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}
inline cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
inline cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t)
{
    memset(p, v, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t)
{
    memmove(d, s, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t)
{
    *f = (size_t)1 << 29;
    *t = (size_t)1 << 30;
    return cudaSuccess;
}
inline cudaError_t cudaGetLastError()
{
    cudaError_t e = emu::launch_failed ? cudaErrorMemoryAllocation : cudaSuccess;
    emu::launch_failed = 0;
    return e;
}
inline const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaSuccess ? "no error" : e == cudaErrorMemoryAllocation ? "out of memory" : "emulated error";
}
inline const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmu"; }

template <typename... P, typename... A>
void launch_kernel(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t, A... args)
{
    auto run = [&]() { k(args...); };
    emu::run_grid(grid, block, smem, run);
}

#define DB_GPU_NAME "gpu-emu"
#define DB_GPU_VENDOR "emulated GPU"
#define DB_GPU_OPS db_gpu_emu_backend_ops
#define DB_GPU_BLAS 0

#endif
