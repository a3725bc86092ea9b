#include "gpu_calib/calib_timing.h"

#include "gpu_calib/calib_fit.h"
#include "gpu_calib/calib_report.h"

#include <math.h>
#include <string.h>

#define SPIN_TIMEOUT_NS 20000000000ull
/* cuBLAS's recommended workspace on Hopper. */
#define BLAS_WORKSPACE (32 * MIB)

/* Transformer shapes: Llama-3-8B projections over 8192 tokens, a square
 * reference, and a small model's MLP (Qwen2.5-0.5B at batch 2 x 512), which
 * shows how far small shapes stay from the peak. */
const CalibGemmShape calib_timing_gemm_shapes[] = {
  { 8192, 6144, 4096, "qkv", CALIB_GEMM_FORWARD, 1 },       { 8192, 4096, 4096, "o_proj", CALIB_GEMM_FORWARD, 1 },
  { 8192, 28672, 4096, "mlp_up", CALIB_GEMM_FORWARD, 1 },   { 8192, 4096, 14336, "mlp_down", CALIB_GEMM_FORWARD, 1 },
  { 8192, 8192, 8192, "square", CALIB_GEMM_FORWARD, 1 },    { 1024, 4864, 896, "small_mlp", CALIB_GEMM_FORWARD, 1 },
};

const CalibGemmType calib_timing_gemm_types[] = {
  { "bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, CALIB_FILL_BF16 },
  { "fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, CALIB_FILL_F16 },
  { "tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, CALIB_FILL_F32 },
  { "fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, CALIB_FILL_F32 },
};

/* ---- set-up ------------------------------------------------------------- */

void
calib_timing_gemm_elements(const Calib *c, size_t *a, size_t *w, size_t *out)
{
  *a = *w = *out = 0;
  for (guint i = 0; i < CALIB_GEMM_SHAPES + c->list_n; i++) {
    const CalibGemmShape *g = i < CALIB_GEMM_SHAPES ? &calib_timing_gemm_shapes[i] : &c->list[i - CALIB_GEMM_SHAPES];
    *a = MAX(*a, (size_t)g->m * g->k);
    *w = MAX(*w, (size_t)g->n * g->k);
    *out = MAX(*out, (size_t)g->m * g->n);
  }
}

/* The lanes, their events and the spin kernels' host-mapped flags. */
static void
setup_lanes(Calib *c)
{
  for (int i = 0; i < CALIB_MAX_LANES; i++) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->lane[i], cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&c->start[i]));
    CUDA_CHECK(cudaEventCreate(&c->stop[i]));
  }
  void *flags = NULL;
  CUDA_CHECK(cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped));
  c->flag = flags;
  c->timed_out = (int *)flags + 1;
  void *flags_dev = NULL;
  CUDA_CHECK(cudaHostGetDevicePointer(&flags_dev, flags, 0));
  c->flag_dev = flags_dev;
  c->timed_out_dev = (int *)flags_dev + 1;
}

static void
setup_copy_buffers(Calib *c)
{
  c->max_copy = GIB;
  CUDA_CHECK(cudaMalloc(&c->dev_a, c->max_copy));
  CUDA_CHECK(cudaMalloc(&c->dev_b, c->max_copy));
  CUDA_CHECK(cudaHostAlloc(&c->pin_a, c->max_copy, cudaHostAllocDefault));
  CUDA_CHECK(cudaHostAlloc(&c->pin_b, c->max_copy, cudaHostAllocDefault));
  c->pageable = g_malloc(c->max_copy);
  /* Touch every page now: faulting them in is not part of a copy. */
  memset(c->pageable, 1, c->max_copy);
  memset(c->pin_a, 1, c->max_copy);
  memset(c->pin_b, 2, c->max_copy);
  CUDA_CHECK(cudaMemset(c->dev_a, 3, c->max_copy));
  CUDA_CHECK(cudaMemset(c->dev_b, 4, c->max_copy));
}

/* The triad's and FMA kernel's buffers, the GEMM operands and cuBLAS. */
static void
setup_kernels(Calib *c)
{
  c->tri_n = (c->quick ? 256 : 512) * MIB / sizeof(float);
  CUDA_CHECK(cudaMalloc((void **)&c->tri_a, c->tri_n * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&c->tri_b, c->tri_n * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&c->tri_c, c->tri_n * sizeof(float)));
  CUDA_CHECK(calib_launch_fill(c->tri_b, c->tri_n, CALIB_FILL_F32, c->lane[0]));
  CUDA_CHECK(calib_launch_fill(c->tri_c, c->tri_n, CALIB_FILL_F32, c->lane[0]));
  c->fma_blocks = c->sms * 8;
  c->fma_threads = 256;
  c->fma_iterations = 1 << 14;
  CUDA_CHECK(cudaMalloc((void **)&c->fma_out, (size_t)c->fma_blocks * c->fma_threads * sizeof(float)));

  size_t a = 0, w = 0, out = 0;
  calib_timing_gemm_elements(c, &a, &w, &out);
  CUDA_CHECK(cudaMalloc(&c->gemm_a, a * 4));
  CUDA_CHECK(cudaMalloc(&c->gemm_w, w * 4));
  CUDA_CHECK(cudaMalloc(&c->gemm_c, out * 4));
  CUDA_CHECK(cudaMalloc(&c->blas_workspace, BLAS_WORKSPACE));
  CUBLAS_CHECK(cublasCreate(&c->blas));
}

void
calib_timing_setup(Calib *c, const struct cudaDeviceProp *prop)
{
  c->sms = prop->multiProcessorCount;
  setup_lanes(c);
  setup_copy_buffers(c);
  setup_kernels(c);
  CUDA_CHECK(cudaDeviceSynchronize());
}

void
calib_timing_teardown(Calib *c)
{
  CUDA_CHECK(cudaDeviceSynchronize());
  CUBLAS_CHECK(cublasDestroy(c->blas));
  void *device_buffers[] = { c->dev_a, c->dev_b, c->tri_a, c->tri_b, c->tri_c, c->fma_out,
                             c->gemm_a, c->gemm_w, c->gemm_c, c->blas_workspace };
  for (guint i = 0; i < G_N_ELEMENTS(device_buffers); i++)
    CUDA_CHECK(cudaFree(device_buffers[i]));
  CUDA_CHECK(cudaFreeHost(c->pin_a));
  CUDA_CHECK(cudaFreeHost(c->pin_b));
  CUDA_CHECK(cudaFreeHost((void *)c->flag));
  g_free(c->pageable);
  for (int i = 0; i < CALIB_MAX_LANES; i++) {
    CUDA_CHECK(cudaEventDestroy(c->start[i]));
    CUDA_CHECK(cudaEventDestroy(c->stop[i]));
    CUDA_CHECK(cudaStreamDestroy(c->lane[i]));
  }
}

/* ---- timing ------------------------------------------------------------- */

/* Row-major C (m x n) as PyTorch's linear and its backward call cuBLAS,
 * which is column-major: C^T (n x m) = op(B)^T op(A)^T.  gemm_a holds the
 * m x k operand, gemm_w the n x k one.
 *   forward  C = X W^T, X m x k, W n x k:            TN, ld k and k
 *   dgrad    C = G W,   G m x k, W k x n:            NN, ld n and k
 *   wgrad    C = G^T X, G k x m, X k x n:            NT, ld n and m */
static void
enqueue_gemm(Calib *c, const CalibWork *w)
{
  static const float one = 1.0f, zero = 0.0f;
  const CalibGemmShape *g = w->shape;
  const CalibGemmType *t = w->type;
  cublasOperation_t op_w = CUBLAS_OP_N, op_a = CUBLAS_OP_N;
  int ld_w = g->n, ld_a = g->k;
  if (g->pass == CALIB_GEMM_FORWARD) {
    op_w = CUBLAS_OP_T;
    ld_w = g->k;
  } else if (g->pass == CALIB_GEMM_WGRAD) {
    op_a = CUBLAS_OP_T;
    ld_a = g->m;
  }
  CUBLAS_CHECK(cublasGemmEx(c->blas, op_w, op_a, g->n, g->m, g->k, &one, c->gemm_w, t->type, ld_w, c->gemm_a,
                            t->type, ld_a, &zero, c->gemm_c, t->type, g->n, t->compute, CUBLAS_GEMM_DEFAULT));
}

void
calib_timing_enqueue(Calib *c, int lane, const CalibWork *w, int count)
{
  cudaStream_t s = c->lane[lane];
  if (w->kind == CALIB_WORK_GEMM) {
    /* cublasSetStream drops the workspace; give the preallocated one back
     * so that cuBLAS never allocates (and maybe synchronises) while a spin
     * kernel holds a stream. */
    CUBLAS_CHECK(cublasSetStream(c->blas, s));
    CUBLAS_CHECK(cublasSetWorkspace(c->blas, c->blas_workspace, BLAS_WORKSPACE));
  }
  for (int i = 0; i < count; i++) {
    switch (w->kind) {
    case CALIB_WORK_COPY:
      CUDA_CHECK(cudaMemcpyAsync(w->dst, w->src, w->bytes, w->dir, s));
      break;
    case CALIB_WORK_FMA:
      CUDA_CHECK(calib_launch_fma(c->fma_out, c->fma_blocks, c->fma_threads, c->fma_iterations, s));
      break;
    case CALIB_WORK_TRIAD:
      CUDA_CHECK(calib_launch_triad(c->tri_a, c->tri_b, c->tri_c, c->tri_n, c->sms * 8, s));
      break;
    case CALIB_WORK_GEMM:
      enqueue_gemm(c, w);
      break;
    case CALIB_WORK_COPY_KERNEL:
      CUDA_CHECK(calib_launch_copy(w->dst, w->src, w->bytes, c->sms * 8, s));
      break;
    case CALIB_WORK_NONE:
      break;
    }
  }
}

void
calib_timing_run_once(Calib *c, const CalibWork *works, int n, guint flags, double *per_op)
{
  g_assert(n <= CALIB_MAX_LANES);
  __atomic_store_n(c->flag, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(c->timed_out, 0, __ATOMIC_SEQ_CST);
  for (int i = 0; i < n; i++) {
    g_assert(works[i].count >= 1 && works[i].count <= CALIB_MAX_BATCH);
    if (flags & CALIB_TIMING_HELD)
      CUDA_CHECK(calib_launch_spin(c->flag_dev, SPIN_TIMEOUT_NS, c->timed_out_dev, c->lane[i]));
    CUDA_CHECK(cudaEventRecord(c->start[i], c->lane[i]));
    calib_timing_enqueue(c, i, &works[i], works[i].count);
    CUDA_CHECK(cudaEventRecord(c->stop[i], c->lane[i]));
  }
  __atomic_store_n(c->flag, 1, __ATOMIC_SEQ_CST);
  for (int i = 0; i < n; i++) {
    float ms = 0;
    CUDA_CHECK(cudaEventSynchronize(c->stop[i]));
    CUDA_CHECK(cudaEventElapsedTime(&ms, c->start[i], c->stop[i]));
    per_op[i] = (double)ms * 1e-3 / works[i].count;
  }
  if (*c->timed_out)
    calib_report_die(1, "a spin kernel timed out after %.0f s: enqueueing blocked while the stream was held",
                     SPIN_TIMEOUT_NS * 1e-9);
}

void
calib_timing_measure(Calib *c, const CalibWork *works, int n, guint flags, double *median, double *samples)
{
  double per_op[CALIB_MAX_LANES];
  double all[CALIB_MAX_LANES][CALIB_MAX_REPEATS];
  for (int i = 0; i < n; i++)
    calib_timing_enqueue(c, i, &works[i], MIN(works[i].count, 4));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (int r = 0; r < c->repeats; r++) {
    calib_timing_run_once(c, works, n, flags, per_op);
    for (int i = 0; i < n; i++)
      all[i][r] = per_op[i];
  }
  for (int i = 0; i < n; i++)
    median[i] = calib_median(all[i], (guint)c->repeats);
  if (samples)
    memcpy(samples, all[0], sizeof(double) * (size_t)c->repeats);
}

double
calib_timing_measure_one(Calib *c, CalibWork w)
{
  double t;
  calib_timing_measure(c, &w, 1, CALIB_TIMING_HELD, &t, NULL);
  return t;
}

int
calib_timing_batch_for(double target_seconds, double seconds_per_op, int min_count)
{
  double n = ceil(target_seconds / MAX(seconds_per_op, 1e-9));
  return (int)CLAMP(n, (double)min_count, (double)CALIB_MAX_BATCH);
}
