/* sim/engine/optimizer.h — one AdamW step as the GPU runs it: memory-bound
 * passes over a GPU's (shard of the) parameters.
 *
 * What: the optimizer step reads and writes every parameter, gradient and
 * moment once or several times and does next to no arithmetic per byte,
 * so its time is its bytes over hbm_bandwidth (sim_kernel_time's memory
 * class) plus a launch per kernel.  Two implementations, as
 * [transformer] optimizer_kernels names them:
 *
 *   fused    one pass per tensor list, like torch._fused_adamw_ (fused=True)
 *            and apex's FusedAdam: read the parameter (the fp32 master when
 *            there is one, else the model's dtype), the gradient, exp_avg
 *            and exp_avg_sq; write the parameter and both moments back,
 *            and the 16-bit copy of the weight in the same pass when there
 *            are master weights (apex's depth-5 list).  torch's fused path
 *            first bumps the on-device step counters (_foreach_add_).
 *   foreach  PyTorch's default on CUDA (torch/optim/adamw.py: adamw() calls
 *            _default_to_fused_or_foreach(params, differentiable,
 *            use_fused=False), torch/optim/optimizer.py, which picks foreach
 *            when every parameter is a CUDA tensor): _multi_tensor_adamw,
 *            one pass per torch._foreach_* call, each reading and writing
 *            whole tensor lists.  With weight decay, no amsgrad, maximize or
 *            capturable (the step counters stay on the CPU: no GPU kernel):
 *              _foreach_mul_(params, 1 - lr wd)             r p     w p
 *              _foreach_lerp_(exp_avgs, grads, 1 - b1)      r m g   w m
 *              _foreach_mul_(exp_avg_sqs, b2)               r v     w v
 *              _foreach_addcmul_(exp_avg_sqs, g, g, 1 - b2) r v g   w v
 *              exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs) r v     w s
 *              _foreach_div_(s, bias_correction2_sqrt)      r s     w s
 *              _foreach_add_(s, eps)                        r s     w s
 *              _foreach_addcdiv_(params, exp_avgs, s, step) r p m s w p
 *            (addcmul passes the gradient list twice: one thread loads the
 *            same address twice, which the cache serves, so it counts once).
 *            exp_avg_sq_sqrt is a new list as large as the moments: the
 *            step's transient (the foreach docstring's "~ sizeof(params)
 *            more peak memory").  torch's AdamW has no master weights; with
 *            them (AMP wrappers, Megatron) a ninth pass copies the fp32
 *            masters into the 16-bit weights (r 4, w e).
 *
 * Moments are fp32 (4 bytes each), as offsim's static memory counts them;
 * gradients are in the model's dtype.  Gradient clipping
 * (torch.nn.utils.clip_grad_norm_) adds two passes before the step:
 * _foreach_norm over the gradients (reads each once, writes a norm per
 * tensor) and _foreach_mul_(grads, clip_coef_clamped), which always runs:
 * the coefficient is clamped to 1 instead of tested, to avoid a host sync.
 *
 * Launches.  Every foreach and fused op goes through multi_tensor_apply
 * (aten/src/ATen/native/cuda/MultiTensorApply.cuh): tensors are cut into
 * chunks of kChunkSize = 65536 elements and a kernel is launched whenever
 * its metadata is full: depth_to_max_blocks = 320 chunks, or
 * depth_to_max_tensors[depth - 1] = {110, 64, 48, 36, 30} tensors (96 for
 * depth 1 with a scalar list), depth being the lists the op passes.  A
 * pass over T tensors of P elements therefore takes at least max(ceil(T /
 * max_tensors), ceil(chunks / 320)) launches, with chunks estimated as P /
 * 65536 + T (each tensor's partial last chunk); this module counts that
 * bound, for one dtype group.  _foreach_norm adds its cleanup kernel and
 * the scalar tail of clip_grad_norm_ (stack, vector_norm, add, div,
 * clamp): 6 launches.
 *
 * Ownership: the caller owns the GArray it passes; nothing else allocates.
 */
#pragma once

#include "engine/kernel.h"

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SIM_OPTIMIZER_FOREACH, /* torch's _multi_tensor_adamw (the default on CUDA) */
  SIM_OPTIMIZER_FUSED,   /* one pass: torch fused=True, apex FusedAdam */
  SIM_OPTIMIZER_KERNELS_COUNT,
} SimOptimizerKernels;

/* "foreach", "fused", indexed by SimOptimizerKernels, NULL-terminated. */
extern const char *const sim_optimizer_kernels_names[];

/* One GPU's optimizer step. */
typedef struct {
  guint64 params;          /* parameters this GPU updates: its shard under optimizer sharding */
  guint tensors;           /* the tensors that hold them (launch counting); 0 counts as 1 */
  guint dtype_bytes;       /* e: the model's weights and gradients */
  gboolean adamw;          /* FALSE (optimizer = none): no step kernels, clipping only */
  gboolean master;         /* fp32 master weights beside e-byte weights (e != 4) */
  gboolean clip;           /* gradient-norm clipping before the step */
  SimOptimizerKernels impl;
} SimOptimizerStep;

/* Appends the step's kernels (SimKernel, SIM_KERNEL_MEMORY, one per pass,
 * its bytes over all of the pass's launches) to `kernels` in the order
 * they run, clipping first.  Returns the kernels the host launches for
 * them (see above); `transient`, when not NULL, receives the most device
 * memory the step allocates beyond its inputs (foreach's exp_avg_sq_sqrt).
 * Products stay below 2^64 for params below 2^58. */
guint sim_optimizer_step_kernels(const SimOptimizerStep *step, GArray *kernels, guint64 *transient);

G_END_DECLS
