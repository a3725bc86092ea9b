#include "engine/kernel.h"

#include "base/error.h"

#include <math.h>

const char *const sim_dtype_names[] = { "fp32", "bf16", "fp16", NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_dtype_names) == SIM_DTYPE_COUNT + 1);
const char *const sim_kernel_class_names[] = { "gemm", "attention", "memory", NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_kernel_class_names) == SIM_KERNEL_CLASSES + 1);
const char *const sim_time_model_names[] = { "flat", "kernel", NULL };

/* SimDevice keeps a rate per dtype without seeing SimDtype (machine.h is below this header). */
G_STATIC_ASSERT(G_N_ELEMENTS(((SimDevice *)NULL)->dtype_flops) == SIM_DTYPE_COUNT);

guint
sim_dtype_bytes(SimDtype dtype)
{
  static const guint bytes[SIM_DTYPE_COUNT] = { 4, 2, 2 };
  g_assert(dtype < SIM_DTYPE_COUNT);
  return bytes[dtype];
}

SimTimeModel
sim_device_time_model(const SimDevice *device)
{
  gboolean rate = device->gemm_points > 0;
  for (guint d = 0; d < SIM_DTYPE_COUNT; d++)
    rate = rate || device->dtype_flops[d] > 0;
  return device->sm_count > 0 && rate ? SIM_TIME_KERNEL : SIM_TIME_FLAT;
}

double
sim_kernel_flops(const SimKernel *kernel)
{
  switch (kernel->kclass) {
  case SIM_KERNEL_GEMM:
    return 2.0 * (double)kernel->m * (double)kernel->n * (double)kernel->k * (double)kernel->batch;
  case SIM_KERNEL_ATTENTION: {
    /* QK^T and PV, 2 q kv d each per (batch, query head); the backward's
     * five matmuls (dV, dP, dQ, dK and the recomputed S) are 2.5 times the
     * forward's two, as FlashAttention-2 and -3 count them. */
    double f = 4.0 * (double)kernel->a_batch * (double)kernel->heads * (double)kernel->q_len *
               (double)kernel->kv_len * (double)kernel->head_dim;
    return f * (kernel->causal ? 0.5 : 1.0) * (kernel->backward ? 2.5 : 1.0);
  }
  default:
    return 0;
  }
}

/* "[device] KEY: needed to time a CLASS kernel" (and what it is for). */
G_GNUC_PRINTF(3, 4)
static gboolean
missing(GError **error, const char *key, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *why = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "[device] %s: not given, needed %s", key, why);
  return FALSE;
}

static gboolean
zero_dimension(GError **error, const char *what)
{
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "a %s kernel with a dimension of 0", what);
  return FALSE;
}

static gboolean
memory_time(const SimDevice *d, double bytes, const char *what, double *seconds, GError **error)
{
  if (!(d->hbm_bandwidth > 0))
    return missing(error, "hbm_bandwidth", "to time %s", what);
  *seconds = bytes / d->hbm_bandwidth;
  return TRUE;
}

/* ---- the flat model ------------------------------------------------------ */

/* What sim/input/transformer.c has always computed: FLOPs at the reachable
 * share of one matmul rate, bytes at hbm_bandwidth. */
static gboolean
flat_time(const SimDevice *d, const SimKernel *kn, double *seconds, GError **error)
{
  if (kn->kclass == SIM_KERNEL_MEMORY)
    return memory_time(d, (double)kn->read + (double)kn->written, "a memory-bound kernel", seconds, error);
  if (!(d->matmul_flops > 0))
    return missing(error, "matmul_tflops", "to time a %s kernel", sim_kernel_class_names[kn->kclass]);
  *seconds = sim_kernel_flops(kn) / (d->matmul_flops * d->efficiency);
  return TRUE;
}

/* ---- the kernel model: GEMM ---------------------------------------------- */

static double
ceil_div(guint64 a, guint64 b)
{
  return (double)(a / b + (a % b != 0));
}

/* The measured table's throughput for a GEMM of `dtype`, or 0 when the
 * table has no point of that dtype.
 *
 * Inverse-distance weighting in (log2 m, log2 n, log2 k) with power 2: a
 * point at the asked shape gives its rate exactly; elsewhere each point
 * counts by 1 / distance^2, distance measured in doublings, so a shape
 * halfway (in log space) between two measured shapes gets their mean, and
 * the points nearest in relative size dominate.  Log space because GEMM
 * efficiency moves with the ratio of sizes (tiles per wave), not their
 * difference.  The result is a weighted mean of measured rates, so it
 * never leaves their range: a shape beyond the table (smaller or larger
 * than any measured) gets the rates of its nearest measured shapes, no
 * trend is extrapolated.  What falls off for a small shape is caught by
 * the memory bound the caller takes the maximum with. */
static double
table_flops(const SimDevice *d, SimDtype dtype, guint64 m, guint64 n, guint64 k)
{
  double sum = 0, weights = 0;
  for (guint i = 0; i < d->gemm_points; i++) {
    const SimGemmPoint *p = &d->gemm_table[i];
    if (p->dtype != dtype)
      continue;
    double dm = log2((double)m / (double)p->m), dn = log2((double)n / (double)p->n);
    double dk = log2((double)k / (double)p->k);
    double dist2 = dm * dm + dn * dn + dk * dk;
    if (dist2 == 0)
      return p->flops;
    sum += p->flops / dist2;
    weights += 1 / dist2;
  }
  return weights > 0 ? sum / weights : 0;
}

/* One GEMM: the larger of its compute and its HBM traffic (a roofline).
 * Compute, from the table when it has the dtype, else by tiles and waves:
 * the output is cut into tm x tn tiles, one per SM at a time, so the GEMM
 * runs ceil(tiles / SMs) waves, each as long as one tile's 2 tm tn k FLOPs
 * at one SM's share of the achievable rate.  A partial tile costs a whole
 * one (tile quantization), a partial wave a whole one (wave quantization):
 * NVIDIA's "Matrix Multiplication Background User's Guide".  Traffic: A, B
 * and C once each, per batch.  A small m, n or k does little work per byte
 * (a GEMV-like projection, a short sequence), so there the traffic wins. */
static gboolean
gemm_time(const SimDevice *d, const SimKernel *kn, double *seconds, GError **error)
{
  double rate = table_flops(d, kn->dtype, kn->m, kn->n, kn->k), compute;
  if (rate > 0) {
    compute = sim_kernel_flops(kn) / rate;
  } else {
    g_autofree char *key = g_strdup_printf("matmul_tflops_%s", sim_dtype_names[kn->dtype]);
    rate = d->dtype_flops[kn->dtype];
    if (!(rate > 0))
      return missing(error, key, "to time a %s GEMM (or gemm_table points of %s)", sim_dtype_names[kn->dtype],
                     sim_dtype_names[kn->dtype]);
    if (d->gemm_tile_m == 0 || d->gemm_tile_n == 0)
      return missing(error, "gemm_tile", "to cut a GEMM into tiles");
    guint64 tm = d->gemm_tile_m, tn = d->gemm_tile_n;
    double tiles = (double)kn->batch * ceil_div(kn->m, tm) * ceil_div(kn->n, tn);
    double waves = ceil(tiles / d->sm_count);
    compute = waves * (2.0 * (double)tm * (double)tn * (double)kn->k) / (rate / d->sm_count);
  }
  double elems = ((double)kn->m * (double)kn->k + (double)kn->k * (double)kn->n + (double)kn->m * (double)kn->n) *
                 (double)kn->batch;
  double memory;
  if (!memory_time(d, elems * sim_dtype_bytes(kn->dtype), "the traffic of a GEMM", &memory, error))
    return FALSE;
  *seconds = MAX(compute, memory);
  return TRUE;
}

/* ---- the kernel model: attention ------------------------------------------ */

/* A fused attention kernel: its FLOPs at the kernel's achievable rate, at
 * least its HBM traffic.  16-bit runs a flash kernel (attention_tflops,
 * attention_backward_tflops: FlashAttention-2/-3's measured throughput);
 * fp32 runs PyTorch's memory-efficient kernel, for which no measured
 * figure is published, so it is taken at the fp32 matmul rate
 * (matmul_tflops_fp32), its two (forward) or five (backward) matmuls
 * being what it spends its time on.  Traffic: the forward reads q, k, v
 * and writes o; the backward reads q, k, v, o and dO and writes dq, dk,
 * dv (the softmax statistics are a row each, left out). */
static gboolean
attention_time(const SimDevice *d, const SimKernel *kn, double *seconds, GError **error)
{
  double rate;
  if (kn->dtype == SIM_DTYPE_FP32) {
    rate = d->dtype_flops[SIM_DTYPE_FP32];
    if (!(rate > 0))
      return missing(error, "matmul_tflops_fp32", "to time an fp32 attention kernel");
  } else {
    rate = kn->backward ? d->attention_backward_flops : d->attention_flops;
    if (!(rate > 0))
      return missing(error, kn->backward ? "attention_backward_tflops" : "attention_tflops",
                     "to time a 16-bit attention %s kernel", kn->backward ? "backward" : "forward");
  }
  double q = (double)kn->a_batch * (double)kn->heads * (double)kn->q_len * (double)kn->head_dim;
  double kv = (double)kn->a_batch * (double)kn->kv_heads * (double)kn->kv_len * (double)kn->head_dim;
  /* q and o, k and v; the backward adds dO and dq, dk and dv. */
  double elems = (kn->backward ? 4 : 2) * (q + kv);
  double memory;
  if (!memory_time(d, elems * sim_dtype_bytes(kn->dtype), "the traffic of an attention kernel", &memory, error))
    return FALSE;
  *seconds = MAX(sim_kernel_flops(kn) / rate, memory);
  return TRUE;
}

gboolean
sim_kernel_time(const SimDevice *device, const SimKernel *kernel, double *seconds, GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  if (kernel->kclass >= SIM_KERNEL_CLASSES) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "unknown kernel class %u", (guint)kernel->kclass);
    return FALSE;
  }
  if (kernel->kclass != SIM_KERNEL_MEMORY && kernel->dtype >= SIM_DTYPE_COUNT) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "unknown dtype %u", (guint)kernel->dtype);
    return FALSE;
  }
  if (kernel->kclass == SIM_KERNEL_GEMM && (kernel->m == 0 || kernel->n == 0 || kernel->k == 0 || kernel->batch == 0))
    return zero_dimension(error, "GEMM");
  if (kernel->kclass == SIM_KERNEL_ATTENTION &&
      (kernel->a_batch == 0 || kernel->heads == 0 || kernel->kv_heads == 0 || kernel->q_len == 0 ||
       kernel->kv_len == 0 || kernel->head_dim == 0))
    return zero_dimension(error, "attention");
  if (sim_device_time_model(device) == SIM_TIME_FLAT)
    return flat_time(device, kernel, seconds, error);
  switch (kernel->kclass) {
  case SIM_KERNEL_GEMM:
    return gemm_time(device, kernel, seconds, error);
  case SIM_KERNEL_ATTENTION:
    return attention_time(device, kernel, seconds, error);
  default:
    return memory_time(device, (double)kernel->read + (double)kernel->written, "a memory-bound kernel", seconds,
                       error);
  }
}
