#include "engine/optimizer.h"

const char *const sim_optimizer_kernels_names[] = { "foreach", "fused", NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_optimizer_kernels_names) == SIM_OPTIMIZER_KERNELS_COUNT + 1);

/* multi_tensor_apply's limits (MultiTensorApply.cuh). */
#define CHUNK_ELEMENTS 65536
#define MAX_BLOCKS 320
static const guint max_tensors[5] = { 110, 64, 48, 36, 30 };
#define MAX_TENSORS_SCALARLIST_DEPTH1 96
/* _foreach_norm's cleanup kernel and clip_grad_norm_'s scalar tail: stack,
 * vector_norm, add eps, divide, clamp. */
#define CLIP_TAIL_LAUNCHES 6

typedef struct {
  GArray *kernels;
  guint64 params;
  guint tensors;
  guint launches;
} Step;

/* One pass of `depth` tensor lists reading `read` and writing `written`
 * bytes per parameter. */
static void
pass(Step *s, guint depth, gboolean scalarlist, guint64 read, guint64 written)
{
  SimKernel k = { .kclass = SIM_KERNEL_MEMORY, .read = read * s->params, .written = written * s->params };
  g_array_append_val(s->kernels, k);
  guint cap = scalarlist && depth == 1 ? MAX_TENSORS_SCALARLIST_DEPTH1 : max_tensors[depth - 1];
  guint64 chunks = s->params / CHUNK_ELEMENTS + s->tensors;
  guint64 by_tensors = (s->tensors + cap - 1) / cap, by_blocks = (chunks + MAX_BLOCKS - 1) / MAX_BLOCKS;
  s->launches += (guint)MAX(1, MAX(by_tensors, by_blocks));
}

guint
sim_optimizer_step_kernels(const SimOptimizerStep *step, GArray *kernels, guint64 *transient)
{
  g_return_val_if_fail(step != NULL && kernels != NULL && step->impl < SIM_OPTIMIZER_KERNELS_COUNT, 0);
  Step s = { .kernels = kernels, .params = step->params, .tensors = MAX(step->tensors, 1) };
  guint64 e = step->dtype_bytes, master = step->master && e != 4;
  guint64 p = master ? 4 : e, m = 4, v = 4; /* what the update writes; the fp32 moments */
  if (transient)
    *transient = 0;
  if (step->params == 0)
    return 0;
  if (step->clip) {
    /* _foreach_norm: each gradient once, a norm per tensor (negligible). */
    pass(&s, 1, FALSE, e, 0);
    g_array_index(kernels, SimKernel, kernels->len - 1).written = 4 * (guint64)s.tensors;
    s.launches += CLIP_TAIL_LAUNCHES;
    pass(&s, 1, FALSE, e, e); /* _foreach_mul_(grads, clip_coef_clamped) */
  }
  if (!step->adamw)
    return s.launches;
  if (step->impl == SIM_OPTIMIZER_FUSED) {
    /* The on-device step counters: a float per tensor. */
    SimKernel counters = { .kclass = SIM_KERNEL_MEMORY, .read = 4 * (guint64)s.tensors, .written = 4 * (guint64)s.tensors };
    g_array_append_val(kernels, counters);
    s.launches += (s.tensors + max_tensors[0] - 1) / max_tensors[0];
    pass(&s, master ? 5 : 4, FALSE, p + e + m + v, p + m + v + (master ? e : 0));
    return s.launches;
  }
  pass(&s, 1, FALSE, p, p);             /* _foreach_mul_(params, 1 - lr wd) */
  pass(&s, 2, FALSE, m + e, m);         /* _foreach_lerp_(exp_avgs, grads, 1 - b1) */
  pass(&s, 1, FALSE, v, v);             /* _foreach_mul_(exp_avg_sqs, b2) */
  pass(&s, 3, FALSE, v + e, v);         /* _foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - b2) */
  pass(&s, 2, FALSE, v, v);             /* exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs) */
  pass(&s, 1, TRUE, v, v);              /* _foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt) */
  pass(&s, 1, FALSE, v, v);             /* _foreach_add_(exp_avg_sq_sqrt, eps) */
  pass(&s, 3, TRUE, p + m + v, p);      /* _foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, step_size) */
  if (master)
    pass(&s, 2, FALSE, 4, e);           /* the 16-bit weights from the fp32 masters */
  if (transient)
    *transient = v * step->params;
  return s.launches;
}
