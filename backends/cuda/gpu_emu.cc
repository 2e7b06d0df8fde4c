/* gpu_emu.cc — gpu_backend.cu compiled for the CPU through gpu_emu.h: the `gpu-emu` backend
 * (db_gpu_emu_backend_ops) that tests/test_gpu.c runs where no GPU is present, so every kernel
 * executes in CI. Not a backend for users: only the test links it. */
/* fibers switch stacks with _longjmp, which the fortified variant would refuse */
#undef _FORTIFY_SOURCE
#define DB_GPU_EMU 1
#include "gpu_backend.cu"
