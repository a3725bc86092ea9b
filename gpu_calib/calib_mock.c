/* gpu_calib/calib_mock.c — a stand-in CUDA runtime, cuBLAS and calibration
 * kernels, so that offsim-calib's host code runs, and is tested, on a
 * machine without a GPU.
 *
 * Linked instead of cudart, cuBLAS and calib_kernels.cu into
 * `offsim-calib-mock` (tests only).  It implements exactly the calls
 * offsim-calib's host code (OFFSIM_CALIB_HOST_SOURCES: calib_main.c,
 * calib_timing.c, calib_measure.c and the rest) makes, with the signatures
 * of the real headers, over a virtual clock per stream: an operation
 * advances its stream's clock by the time a model link and device would
 * take (below, with ±1% deterministic noise), an event records its stream's
 * clock, and elapsed time is the difference.
 * Streams do not contend, so every overlap slowdown is noise.  Device memory
 * is never touched (cudaMalloc hands out fake addresses); pinned host memory
 * is real, so that what the host writes (the spin flag) works as on a GPU.
 *
 * The model, which a test expects back from the profile: copies take
 * α + bytes/β with α = 7 µs H2D, 9 µs D2H and β = 53 GB/s H2D, 51 GB/s D2H
 * from pinned memory, 0.4 β from pageable memory; device-to-device copies
 * move 2 × bytes at 4 TB/s, the copy kernel at 0.95 of that, the triad
 * at 0.9; bf16 GEMMs reach at most 700 TFLOP/s, fp32 55 TFLOP/s; the
 * device has 132 SMs.  A kernel launch is the one cost on the host's
 * clock, the real one: calib_launch_empty busy-waits
 * MOCK_LAUNCH_HOST (2 µs) before it returns, so that the launch overhead measured on the host
 * comes back at about that.  calib_kernels_stand_in says 1: a profile
 * written over this runtime is labelled MOCK OUTPUT.
 * OFFSIM_CALIB_MOCK_DEVICES=0 makes it a machine without a device.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "gpu_calib/calib_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MOCK_ALPHA_H2D 7e-6
#define MOCK_ALPHA_D2H 9e-6
#define MOCK_BETA_H2D 53e9
#define MOCK_BETA_D2H 51e9
#define MOCK_PAGEABLE 0.4
#define MOCK_HBM 4e12
#define MOCK_COPY_KERNEL 0.95
#define MOCK_LAUNCH_HOST 2e-6

struct CUstream_st {
  double clock;
};

struct CUevent_st {
  double time;
};

struct cublasContext {
  cudaStream_t stream;
};

static struct CUstream_st default_stream;
static GHashTable *pinned; /* host pointers from cudaHostAlloc */
static guintptr next_device_address = 0x100000000;
static guint64 noise_state = 1;

static double
noisy(double seconds)
{
  noise_state = noise_state * G_GUINT64_CONSTANT(6364136223846793005) + G_GUINT64_CONSTANT(1442695040888963407);
  return seconds * (1 + 0.01 * ((double)(noise_state >> 11) / (double)(G_GUINT64_CONSTANT(1) << 52) - 1.0));
}

static struct CUstream_st *
stream_of(cudaStream_t s)
{
  return s ? s : &default_stream;
}

static void
advance(cudaStream_t s, double seconds)
{
  stream_of(s)->clock += noisy(seconds);
}

/* ---- the runtime ---------------------------------------------------------- */

const char *
cudaGetErrorString(cudaError_t error)
{
  return error == cudaSuccess ? "no error" : error == cudaErrorNoDevice ? "no CUDA-capable device is detected"
                                                                         : "mock error";
}

const char *
cudaGetErrorName(cudaError_t error)
{
  return error == cudaSuccess ? "cudaSuccess" : error == cudaErrorNoDevice ? "cudaErrorNoDevice" : "cudaErrorUnknown";
}

cudaError_t
cudaGetDeviceCount(int *count)
{
  const char *devices = g_getenv("OFFSIM_CALIB_MOCK_DEVICES");
  *count = devices ? atoi(devices) : 1;
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t
cudaSetDevice(int device)
{
  return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t
cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
  memset(prop, 0, sizeof *prop);
  g_strlcpy(prop->name, "Mock GPU (calib_mock.c, not a measurement)", sizeof prop->name);
  prop->totalGlobalMem = (size_t)141 * 1000 * 1000 * 1000;
  prop->multiProcessorCount = 132;
  prop->major = 9;
  prop->asyncEngineCount = 3;
  return cudaSuccess;
}

cudaError_t
cudaDeviceGetPCIBusId(char *bus, int len, int device)
{
  /* No such sysfs entry: the PCIe and NUMA readers take their fallbacks. */
  g_strlcpy(bus, "0000:FF:1F.7", (gsize)len);
  return cudaSuccess;
}

cudaError_t
cudaRuntimeGetVersion(int *version)
{
  *version = 13000;
  return cudaSuccess;
}

cudaError_t
cudaDriverGetVersion(int *version)
{
  *version = 13000;
  return cudaSuccess;
}

cudaError_t
cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
  *stream = g_new0(struct CUstream_st, 1);
  return cudaSuccess;
}

cudaError_t
cudaStreamDestroy(cudaStream_t stream)
{
  g_free(stream);
  return cudaSuccess;
}

cudaError_t
cudaStreamSynchronize(cudaStream_t stream)
{
  return cudaSuccess;
}

cudaError_t
cudaDeviceSynchronize(void)
{
  return cudaSuccess;
}

cudaError_t
cudaEventCreate(cudaEvent_t *event)
{
  *event = g_new0(struct CUevent_st, 1);
  return cudaSuccess;
}

cudaError_t
cudaEventDestroy(cudaEvent_t event)
{
  g_free(event);
  return cudaSuccess;
}

cudaError_t
cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
  event->time = stream_of(stream)->clock;
  return cudaSuccess;
}

cudaError_t
cudaEventSynchronize(cudaEvent_t event)
{
  return cudaSuccess;
}

cudaError_t
cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
  *ms = (float)((end->time - start->time) * 1e3);
  return cudaSuccess;
}

cudaError_t
cudaHostAlloc(void **host, size_t size, unsigned int flags)
{
  if (pinned == NULL)
    pinned = g_hash_table_new(g_direct_hash, g_direct_equal);
  *host = g_malloc(size);
  g_hash_table_add(pinned, *host);
  return cudaSuccess;
}

cudaError_t
cudaFreeHost(void *host)
{
  if (!g_hash_table_remove(pinned, host))
    return cudaErrorInvalidValue;
  g_free(host);
  return cudaSuccess;
}

cudaError_t
cudaHostGetDevicePointer(void **device, void *host, unsigned int flags)
{
  *device = host; /* unified addressing */
  return cudaSuccess;
}

cudaError_t
cudaMalloc(void **device, size_t size)
{
  *device = (void *)next_device_address;
  next_device_address += (size + 0xfffff) & ~(guintptr)0xfffff;
  return cudaSuccess;
}

cudaError_t
cudaFree(void *device)
{
  return cudaSuccess;
}

cudaError_t
cudaMemset(void *device, int value, size_t count)
{
  return cudaSuccess;
}

cudaError_t
cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
  double b = (double)count;
  switch (kind) {
  case cudaMemcpyHostToDevice:
    advance(stream, MOCK_ALPHA_H2D + b / (MOCK_BETA_H2D * (g_hash_table_contains(pinned, src) ? 1 : MOCK_PAGEABLE)));
    return cudaSuccess;
  case cudaMemcpyDeviceToHost:
    advance(stream, MOCK_ALPHA_D2H + b / (MOCK_BETA_D2H * (g_hash_table_contains(pinned, dst) ? 1 : MOCK_PAGEABLE)));
    return cudaSuccess;
  case cudaMemcpyDeviceToDevice:
    advance(stream, 2 * b / MOCK_HBM);
    return cudaSuccess;
  default:
    return cudaErrorInvalidMemcpyDirection;
  }
}

/* ---- cuBLAS ----------------------------------------------------------------- */

const char *
cublasGetStatusString(cublasStatus_t status)
{
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "mock failure";
}

const char *
cublasGetStatusName(cublasStatus_t status)
{
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INTERNAL_ERROR";
}

cublasStatus_t
cublasCreate_v2(cublasHandle_t *handle)
{
  *handle = g_new0(struct cublasContext, 1);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasDestroy_v2(cublasHandle_t handle)
{
  g_free(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasGetVersion_v2(cublasHandle_t handle, int *version)
{
  *version = 130000;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes)
{
  return workspace && bytes ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t
cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
             const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb,
             const void *beta, void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
             cublasGemmAlgo_t algo)
{
  if (lda < (transa == CUBLAS_OP_N ? m : k) || ldb < (transb == CUBLAS_OP_N ? k : n) || ldc < m)
    return CUBLAS_STATUS_INVALID_VALUE;
  double peak = Atype == CUDA_R_32F ? (computeType == CUBLAS_COMPUTE_32F_FAST_TF32 ? 350e12 : 55e12) : 700e12;
  double flops = 2.0 * m * (double)n * k;
  /* Small shapes stay far from the peak. */
  double efficiency = MIN(1.0, flops / 1e12);
  advance(handle->stream, flops / (peak * MAX(efficiency, 0.05)));
  return CUBLAS_STATUS_SUCCESS;
}

/* ---- the kernels ------------------------------------------------------------ */

cudaError_t
calib_launch_spin(volatile int *flag, unsigned long long timeout_ns, int *timed_out, cudaStream_t stream)
{
  return cudaSuccess;
}

cudaError_t
calib_launch_fma(float *out, int blocks, int threads, int iterations, cudaStream_t stream)
{
  advance(stream, calib_fma_flops(blocks, threads, iterations) / 60e12);
  return cudaSuccess;
}

cudaError_t
calib_launch_triad(float *a, const float *b, const float *c, size_t n, int blocks, cudaStream_t stream)
{
  advance(stream, 12.0 * (double)n / (0.9 * MOCK_HBM));
  return cudaSuccess;
}

cudaError_t
calib_launch_copy(void *dst, const void *src, size_t bytes, int blocks, cudaStream_t stream)
{
  advance(stream, 2.0 * (double)bytes / (MOCK_COPY_KERNEL * MOCK_HBM));
  return cudaSuccess;
}

static double
host_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

cudaError_t
calib_launch_empty(cudaStream_t stream)
{
  double until = host_seconds() + MOCK_LAUNCH_HOST;
  while (host_seconds() < until)
    ;
  advance(stream, 1e-6);
  return cudaSuccess;
}

cudaError_t
calib_launch_fill(void *buffer, size_t elements, CalibFillType type, cudaStream_t stream)
{
  return cudaSuccess;
}

double
calib_fma_flops(int blocks, int threads, int iterations)
{
  return 8.0 * (double)blocks * (double)threads * (double)iterations;
}

int
calib_kernels_stand_in(void)
{
  return 1;
}
