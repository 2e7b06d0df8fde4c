/* gpu_vendor.h — the CUDA names gpu_backend.cu is written in, mapped to HIP when it is compiled
 * by hipcc with -DDB_GPU_HIP=1 (backends/hip/meson.build). Only what the backend uses is mapped.
 *
 * Warp-level code never assumes 32 lanes: kernels read `warpSize` (64 on CDNA, 32 on NVIDIA and
 * RDNA in wave32), ballots are 64-bit, and the host sizes launches from the device's warpSize.
 *
 * DB_GPU_BLAS is 1 when a vendor BLAS is linked (cuBLAS for CUDA): large non-deterministic
 * matmuls go there. HIP has none here (Debian 12 packages no hipBLAS / rocBLAS): its large
 * matmuls run the backend's own tiled GEMM kernel. */
#ifndef DB_GPU_VENDOR_H
#define DB_GPU_VENDOR_H

#if defined(DB_GPU_EMU) && DB_GPU_EMU

#include "gpu_emu.h" /* the kernels on the CPU, for tests without a GPU */

#elif defined(DB_GPU_HIP) && DB_GPU_HIP

#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#define DB_GPU_NAME "hip"
#define DB_GPU_VENDOR "HIP"
#define DB_GPU_OPS db_hip_backend_ops

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaStream_t hipStream_t
#define cudaDeviceProp hipDeviceProp_t
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaMemGetInfo hipMemGetInfo
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocHost(p, n) hipHostMalloc((p), (n), 0)
#define cudaFreeHost hipHostFree
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaGetLastError hipGetLastError
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaRuntimeGetVersion hipRuntimeGetVersion

#define WARP_SHFL_XOR(v, o) __shfl_xor((v), (o))
#define WARP_BALLOT(p) ((unsigned long long)__ballot((p)))
#define WARP_SYNC() __builtin_amdgcn_wave_barrier()

#define DB_GPU_BLAS 0

#else /* CUDA */

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define DB_GPU_NAME "cuda"
#define DB_GPU_VENDOR "CUDA"
#define DB_GPU_OPS db_cuda_backend_ops

#define WARP_SHFL_XOR(v, o) __shfl_xor_sync(0xffffffffu, (v), (o))
#define WARP_BALLOT(p) ((unsigned long long)__ballot_sync(0xffffffffu, (p)))
#define WARP_SYNC() __syncwarp()

#define DB_GPU_BLAS 1
#include <cublas_v2.h>

#endif

#if !(defined(DB_GPU_EMU) && DB_GPU_EMU)
#define DB_DYN_SHARED(type, name) extern __shared__ type name[]

/* k<<<grid, block, smem, stream>>>(args) written as a call, so that gpu_emu.h can run it */
template <typename... P, typename... A>
static inline void launch_kernel(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A... args)
{
    k<<<grid, block, smem, s>>>(args...);
}
#endif

#endif
