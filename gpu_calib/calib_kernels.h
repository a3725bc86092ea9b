/* gpu_calib/calib_kernels.h — the kernels offsim-calib times, behind C calls.
 *
 * The host program is C; these launchers are the only CUDA C++ it needs.
 * Each returns the launch's cudaError_t (cudaGetLastError after the launch),
 * so the caller checks every launch like any other CUDA call.
 *
 *   spin   one thread polls a host-mapped flag until the host sets it (or a
 *          timeout passes, which it reports): it holds a stream while the
 *          host enqueues the work to time, so that enqueue cost stays out of
 *          the timing (nvbandwidth's method).
 *   fma    compute-bound: independent FMA chains in registers, no memory
 *          traffic but one store per thread; 8 FLOPs per thread per iteration.
 *   triad  memory-bound: a[i] = b[i] + s * c[i] over n floats (12 bytes per
 *          element), a grid-stride loop.
 *   copy   memory-bound: dst = src over `bytes` (a multiple of 16), 16-byte
 *          loads and stores, a grid-stride loop; reads and writes `bytes`
 *          each.
 *   empty  one thread that does nothing: what a launch costs the host.
 *   fill   deterministic small values in a buffer of floats, halves or
 *          bfloat16s, so that GEMMs run on realistic, finite data.
 *
 * calib_kernels_stand_in says whether these are the real kernels (0, from
 * calib_kernels.cu) or calib_mock.c's stand-ins (1), so that a profile
 * written over the stand-ins says it is no measurement.
 */
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CALIB_FILL_F32, CALIB_FILL_F16, CALIB_FILL_BF16 } CalibFillType;

cudaError_t calib_launch_spin(volatile int *flag, unsigned long long timeout_ns, int *timed_out, cudaStream_t stream);
cudaError_t calib_launch_fma(float *out, int blocks, int threads, int iterations, cudaStream_t stream);
cudaError_t calib_launch_triad(float *a, const float *b, const float *c, size_t n, int blocks, cudaStream_t stream);
cudaError_t calib_launch_copy(void *dst, const void *src, size_t bytes, int blocks, cudaStream_t stream);
cudaError_t calib_launch_empty(cudaStream_t stream);
cudaError_t calib_launch_fill(void *buffer, size_t elements, CalibFillType type, cudaStream_t stream);

/* FLOPs of one calib_launch_fma. */
double calib_fma_flops(int blocks, int threads, int iterations);

int calib_kernels_stand_in(void);

#ifdef __cplusplus
}
#endif
