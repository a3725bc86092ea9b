#include "gpu_calib/calib_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

static __device__ unsigned long long
global_ns(void)
{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __global__ void
spin_kernel(volatile int *flag, unsigned long long timeout_ns, int *timed_out)
{
  unsigned long long start = global_ns();
  while (*flag == 0) {
    if (global_ns() - start > timeout_ns) {
      *(volatile int *)timed_out = 1;
      break;
    }
  }
}

/* Four independent chains hide the FMA latency; the store keeps the
 * compiler from removing the loop. */
static __global__ void
fma_kernel(float *out, int iterations)
{
  float a = threadIdx.x * 1e-3f, b = a + 1.0f, c = a + 2.0f, d = a + 3.0f;
  const float x = 0.999999f, y = 1e-7f;
  for (int i = 0; i < iterations; i++) {
    a = fmaf(a, x, y);
    b = fmaf(b, x, y);
    c = fmaf(c, x, y);
    d = fmaf(d, x, y);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

static __global__ void
triad_kernel(float *a, const float *b, const float *c, size_t n)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    a[i] = b[i] + 0.5f * c[i];
}

static __global__ void
copy_kernel(float4 *dst, const float4 *src, size_t n)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}

static __global__ void
empty_kernel(void)
{
}

static __device__ float
fill_value(size_t i)
{
  /* A fixed hash of the index mapped to [-0.5, 0.5). */
  unsigned int h = (unsigned int)(i * 2654435761u);
  return (float)(h >> 8) / 16777216.0f - 0.5f;
}

static __global__ void
fill_kernel(void *buffer, size_t n, int type)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v = fill_value(i);
    if (type == CALIB_FILL_F16)
      ((__half *)buffer)[i] = __float2half(v);
    else if (type == CALIB_FILL_BF16)
      ((__nv_bfloat16 *)buffer)[i] = __float2bfloat16(v);
    else
      ((float *)buffer)[i] = v;
  }
}

extern "C" cudaError_t
calib_launch_spin(volatile int *flag, unsigned long long timeout_ns, int *timed_out, cudaStream_t stream)
{
  spin_kernel<<<1, 1, 0, stream>>>(flag, timeout_ns, timed_out);
  return cudaGetLastError();
}

extern "C" cudaError_t
calib_launch_fma(float *out, int blocks, int threads, int iterations, cudaStream_t stream)
{
  fma_kernel<<<blocks, threads, 0, stream>>>(out, iterations);
  return cudaGetLastError();
}

extern "C" cudaError_t
calib_launch_triad(float *a, const float *b, const float *c, size_t n, int blocks, cudaStream_t stream)
{
  triad_kernel<<<blocks, 256, 0, stream>>>(a, b, c, n);
  return cudaGetLastError();
}

extern "C" cudaError_t
calib_launch_copy(void *dst, const void *src, size_t bytes, int blocks, cudaStream_t stream)
{
  copy_kernel<<<blocks, 256, 0, stream>>>((float4 *)dst, (const float4 *)src, bytes / sizeof(float4));
  return cudaGetLastError();
}

extern "C" cudaError_t
calib_launch_empty(cudaStream_t stream)
{
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

extern "C" cudaError_t
calib_launch_fill(void *buffer, size_t elements, CalibFillType type, cudaStream_t stream)
{
  fill_kernel<<<1024, 256, 0, stream>>>(buffer, elements, (int)type);
  return cudaGetLastError();
}

extern "C" double
calib_fma_flops(int blocks, int threads, int iterations)
{
  return 8.0 * (double)blocks * (double)threads * (double)iterations;
}

extern "C" int
calib_kernels_stand_in(void)
{
  return 0;
}
