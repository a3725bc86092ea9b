/* sim/engine/kernel.h — what one GPU kernel costs on a device.
 *
 * A training step is a sequence of kernels: GEMMs (the projections and
 * their dgrad and wgrad), attention kernels (flash/SDPA forward and
 * backward) and memory-bound kernels (norms, activations, softmax,
 * dropout, residual adds, casts, the loss).  A generator (sim/input)
 * describes each op of a layer as a short list of SimKernel and asks this
 * module for their time on the scenario's SimDevice; the lowering never
 * sees shapes, only the seconds, the launches and the class.
 *
 * Two time models, chosen by what the profile gives (sim_device_time_model):
 *
 *   flat    the profile has only matmul_tflops, efficiency and
 *           hbm_bandwidth (every profile before kernels were modelled):
 *           a GEMM or attention kernel takes FLOPs / (matmul_flops x
 *           efficiency), a memory-bound one bytes / hbm_bandwidth.
 *   kernel  the profile gives the achievable dense matmul throughput of
 *           the kernel's dtype and the SM count: a GEMM is cut into output
 *           tiles, the tiles run in waves over the SMs (tile and wave
 *           quantization, NVIDIA's "Matrix Multiplication Background User's
 *           Guide"), at least as long as moving its operands through HBM
 *           (which is what makes small m, n or k lose efficiency); or, when
 *           the profile carries a measured gemm_table, the table
 *           interpolated.  Attention at its own achievable throughput per
 *           direction (causal halves the FLOPs); memory-bound kernels at
 *           hbm_bandwidth.
 *
 * Launch cost is not part of a kernel's time: every kernel also costs the
 * host `launch_overhead` seconds to issue (the engine's host model), which
 * the caller counts from SimKernel lists by their length.
 *
 * Sizes are element counts and bytes as 64-bit integers; the caller
 * (sim/input/transformer_ops.c) passes sizes that sim/input/transformer.c
 * checked against 4 EiB.  Nothing here allocates.
 */
#pragma once

#include "engine/machine.h"

#include <glib.h>

G_BEGIN_DECLS

/* Element types of activations, weights and kernels. */
typedef enum {
  SIM_DTYPE_FP32,
  SIM_DTYPE_BF16,
  SIM_DTYPE_FP16,
  SIM_DTYPE_COUNT,
} SimDtype;

/* "fp32", "bf16", "fp16", indexed by SimDtype, NULL-terminated. */
extern const char *const sim_dtype_names[];
/* Bytes per element. */
guint sim_dtype_bytes(SimDtype dtype);

/* The class of a kernel: what its time is made of, and the buckets of the
 * JSON result's time per kernel class. */
typedef enum {
  SIM_KERNEL_GEMM,      /* dense matmul, possibly batched */
  SIM_KERNEL_ATTENTION, /* a fused attention kernel (flash, SDPA), forward or backward */
  SIM_KERNEL_MEMORY,    /* memory-bound: elementwise, reductions, norms, copies */
  SIM_KERNEL_CLASSES,
} SimKernelClass;

/* "gemm", "attention", "memory", indexed by SimKernelClass, NULL-terminated. */
extern const char *const sim_kernel_class_names[];

typedef struct {
  SimKernelClass kclass;
  SimDtype dtype; /* operands' type (GEMM, attention); ignored for memory */
  /* GEMM: C[m x n] = A[m x k] B[k x n], `batch` times (1 for a plain
   * GEMM; b x heads for eager attention's QK^T and PV). */
  guint64 m, n, k, batch;
  /* Attention: batch, query heads, key/value heads, query and key lengths,
   * head dim; causal; the backward kernel (dq, dk, dv) or the forward. */
  guint64 a_batch, heads, kv_heads, q_len, kv_len, head_dim;
  gboolean causal, backward;
  /* Memory-bound: bytes read and written. */
  guint64 read, written;
} SimKernel;

/* Which time model a device runs (see above). */
typedef enum {
  SIM_TIME_FLAT,
  SIM_TIME_KERNEL,
} SimTimeModel;

/* "flat", "kernel", indexed by SimTimeModel, NULL-terminated. */
extern const char *const sim_time_model_names[];

SimTimeModel sim_device_time_model(const SimDevice *device);

/* Floating-point operations of a GEMM or attention kernel (0 for memory):
 * 2 m n k batch; attention forward 4 b h q kv d (QK^T and PV), halved when
 * causal, backward 2.5 times the forward (FlashAttention-2's count: dQ, dK,
 * dV and the recomputed P). */
double sim_kernel_flops(const SimKernel *kernel);

/* Seconds `kernel` takes on `device` under its time model, launch
 * excluded.  FALSE with SIM_ERROR_INPUT naming what is missing when the
 * device cannot time it (a dtype the profile gives no throughput for, a
 * zero dimension). */
gboolean sim_kernel_time(const SimDevice *device, const SimKernel *kernel, double *seconds, GError **error);

G_END_DECLS
