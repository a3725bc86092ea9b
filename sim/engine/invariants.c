#include "engine/invariants.h"

#include "base/error.h"

#include <math.h>

/* Slack for op times, which come out of a fluid model: a femtosecond of a
 * step of 1 s or more, TIME_SLACK × max(1 s, step). */
#define TIME_SLACK 1e-15

/* Slack for the step against the compute it holds: the engine finishes an
 * op that ends within its NEAR_TIE (1e-12) × max(1 s, t) of an instant at
 * that instant, so a step may come out short of its compute by that much. */
#define WORK_SLACK 1e-12

G_GNUC_PRINTF(2, 3)
static gboolean
violation(GError **error, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *msg = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "invariant violated: %s", msg);
  return FALSE;
}

static gint
compare_start(gconstpointer a, gconstpointer b, gpointer data)
{
  const SimRun *run = data;
  double x = g_array_index(run->op_start, double, *(const guint32 *)a);
  double y = g_array_index(run->op_start, double, *(const guint32 *)b);
  if (x != y)
    return x < y ? -1 : 1;
  return *(const guint32 *)a < *(const guint32 *)b ? -1 : *(const guint32 *)a > *(const guint32 *)b;
}

static gboolean
check_ops(const SimRun *run, const SimProgram *p, GError **error)
{
  const double eps = TIME_SLACK * MAX(1.0, run->step);
  for (guint s = 0; s < p->streams->len; s++) {
    const SimStream *stream = g_ptr_array_index(p->streams, s);
    double free_at = 0;
    for (guint k = 0; k < stream->n_ops; k++) {
      guint32 op = stream->ops[k];
      double start = g_array_index(run->op_start, double, op), end = g_array_index(run->op_end, double, op);
      if (!(end >= start) || !isfinite(end) || end > run->step + eps) {
        g_autofree char *what = sim_program_describe_op(p, op);
        return violation(error, "%s ran from %.17g to %.17g s, outside the step of %.17g s", what, start, end,
                         run->step);
      }
      if (start < free_at - eps) {
        g_autofree char *what = sim_program_describe_op(p, op);
        return violation(error, "%s started at %.17g s, before the op ahead of it on its stream ended (%.17g s)",
                         what, start, free_at);
      }
      free_at = end;
    }
  }
  /* One copy engine per direction and GPU: sorted by start, each copy
   * begins after the one before it ended (they run in the order they became
   * ready, which need not be issue order). */
  for (guint e = 0; e < SIM_DIR_COUNT * p->n_gpus; e++) {
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(guint32));
    for (guint32 i = 0; i < sim_program_n_ops(p); i++) {
      const SimOp *op = sim_program_op(p, i);
      if (op->kind == SIM_OP_COPY && op->dir == e % SIM_DIR_COUNT && op->gpu == e / SIM_DIR_COUNT)
        g_array_append_val(ids, i);
    }
    g_array_sort_with_data(ids, compare_start, (gpointer)run);
    double busy_until = 0;
    for (guint k = 0; k < ids->len; k++) {
      guint32 i = g_array_index(ids, guint32, k);
      if (g_array_index(run->op_start, double, i) < busy_until - eps) {
        g_autofree char *what = sim_program_describe_op(p, i);
        return violation(error, "%s overlaps another copy of its direction", what);
      }
      busy_until = MAX(busy_until, g_array_index(run->op_end, double, i));
    }
  }
  return TRUE;
}

/* Bytes out minus bytes back per (tensor, layer): all zero at the end. */
static gboolean
check_copies(const SimProgram *p, GError **error)
{
  g_autoptr(GHashTable) balance = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  for (guint32 i = 0; i < sim_program_n_ops(p); i++) {
    const SimOp *op = sim_program_op(p, i);
    /* Activations come back; offloaded static state (phase optimizer: a
     * weight shard fetched for every gather, the optimizer step's
     * gradients out and weights in) need not. */
    if (op->kind != SIM_OP_COPY || op->phase == SIM_PHASE_OPTIMIZER)
      continue;
    gint64 key = ((gint64)op->label << 32) | (guint32)op->layer;
    gint64 *sum = g_hash_table_lookup(balance, &key);
    if (sum == NULL) {
      gint64 *k = g_new(gint64, 1);
      *k = key;
      sum = g_new0(gint64, 1);
      g_hash_table_insert(balance, k, sum);
    }
    *sum += op->dir == SIM_DIR_D2H ? (gint64)op->bytes : -(gint64)op->bytes;
  }
  GHashTableIter iter;
  gpointer key, value;
  g_hash_table_iter_init(&iter, balance);
  while (g_hash_table_iter_next(&iter, &key, &value)) {
    if (*(gint64 *)value != 0) {
      gint64 k = *(gint64 *)key;
      return violation(error, "tensor '%s' of layer %d went out with %+" G_GINT64_FORMAT " B more than came back",
                       sim_program_label(p, (guint32)(k >> 32)), (gint32)(guint32)k, *(gint64 *)value);
    }
  }
  return TRUE;
}

/* Per GPU: the curve's points of that GPU never negative, its last point
 * at the baseline, each reported peak the maximum of its points. */
static gboolean
check_memory(const SimRun *run, const SimProgram *p, GError **error)
{
  g_autofree gint64 *top = g_new(gint64, 2 * p->n_gpus);
  g_autofree gint64 *last = g_new(gint64, 2 * p->n_gpus);
  for (guint pool = 0; pool < 2 * p->n_gpus; pool++)
    top[pool] = last[pool] = (gint64)p->baseline[pool];
  for (guint i = 0; i < run->curve->len; i++) {
    const SimMemPoint *pt = &g_array_index(run->curve, SimMemPoint, i);
    if (pt->device < 0 || pt->host < 0)
      return violation(error, "memory negative at %.17g s (device %" G_GINT64_FORMAT ", host %" G_GINT64_FORMAT ")",
                       pt->time, pt->device, pt->host);
    guint d = SIM_POOL_INDEX(pt->gpu, SIM_POOL_DEVICE), h = SIM_POOL_INDEX(pt->gpu, SIM_POOL_HOST);
    top[d] = MAX(top[d], pt->device);
    top[h] = MAX(top[h], pt->host);
    last[d] = pt->device;
    last[h] = pt->host;
  }
  for (guint pool = 0; pool < 2 * p->n_gpus; pool++) {
    if (last[pool] != (gint64)p->baseline[pool])
      return violation(error, "%s memory of GPU %u ends at %" G_GINT64_FORMAT " B, not at the baseline",
                       sim_pool_name(pool % SIM_POOL_COUNT), pool / SIM_POOL_COUNT, last[pool]);
    guint step_pool = SIM_POOL_INDEX(sim_program_step_gpu(p, pool / SIM_POOL_COUNT), pool % SIM_POOL_COUNT);
    const SimPeak *peak = run->pools ? &g_array_index(run->pools, SimPeak, step_pool) : &run->peak[pool];
    if (peak->bytes != top[pool])
      return violation(error, "the reported %s peak of GPU %u, %" G_GINT64_FORMAT " B, is not the curve's maximum %"
                       G_GINT64_FORMAT " B", sim_pool_name(pool % SIM_POOL_COUNT), pool / SIM_POOL_COUNT,
                       peak->bytes, top[pool]);
  }
  return TRUE;
}

/* The most nominal compute seconds one GPU holds: no step can be shorter. */
static double
busiest_gpu_work(const SimRun *run, const SimProgram *p)
{
  if (p->n_gpus == 1 && !p->copied) /* a copied program's sums are its step's: several GPUs' */
    return run->compute_work + run->recompute_work + run->optimizer_work;
  g_autofree double *work = g_new0(double, p->n_gpus);
  double most = 0;
  for (guint32 i = 0; i < sim_program_n_ops(p); i++) {
    const SimOp *op = sim_program_op(p, i);
    if (op->kind == SIM_OP_COMPUTE) {
      work[op->gpu] += op->work;
      most = MAX(most, work[op->gpu]);
    }
  }
  return most;
}

/* The host model (program.h): the step holds every GPU's launches (the
 * launch-bound floor), and with op times recorded no op started before its
 * issue, recomputed here from the program and the recorded ends,
 * issue_i = max(issue_{i-1}, end of the latest host-blocking op before i)
 * + launch_i per GPU, rather than taken from the engine.  Slack: a near
 * tie (WORK_SLACK), since the engine starts an op whose issue falls within
 * one of an instant at that instant.  O(ops + GPUs). */
static gboolean
check_host(const SimRun *run, const SimProgram *p, GError **error)
{
  const double eps = WORK_SLACK * MAX(1.0, run->step);
  g_autofree double *launches = g_new0(double, p->n_gpus);
  g_autofree double *clock = g_new0(double, p->n_gpus);
  g_autofree double *unblock = g_new0(double, p->n_gpus);
  for (guint32 i = 0; i < sim_program_n_ops(p); i++) {
    const SimOp *op = sim_program_op(p, i);
    launches[op->gpu] += sim_program_launch(p, i);
    if (run->op_start == NULL)
      continue;
    clock[op->gpu] = MAX(clock[op->gpu], unblock[op->gpu]) + sim_program_launch(p, i);
    if (g_array_index(run->op_start, double, i) < clock[op->gpu] - eps) {
      g_autofree char *what = sim_program_describe_op(p, i);
      return violation(error, "%s started at %.17g s, before its host issued it (%.17g s)", what,
                       g_array_index(run->op_start, double, i), clock[op->gpu]);
    }
    if (sim_program_host_blocks(op))
      unblock[op->gpu] = g_array_index(run->op_end, double, i);
  }
  for (guint g = 0; g < p->n_gpus; g++)
    if (run->step + eps < launches[g])
      return violation(error, "step %.17g s is shorter than the launches of GPU %u's host (%.17g s)", run->step,
                       g, launches[g]);
  return TRUE;
}

gboolean
sim_invariants_check_engine(const SimRun *run, const SimProgram *p, GError **error)
{
  double work = busiest_gpu_work(run, p);
  if (run->step + WORK_SLACK * MAX(1.0, run->step) < work)
    return violation(error, "step %.17g s is shorter than the compute a GPU holds (%.17g s)", run->step, work);
  if (sim_program_has_host(p) && !check_host(run, p, error))
    return FALSE;
  if (run->op_start && !check_ops(run, p, error))
    return FALSE;
  if (run->curve && !check_memory(run, p, error))
    return FALSE;
  return TRUE;
}

gboolean
sim_invariants_check(const SimRun *run, const SimProgram *p, GError **error)
{
  return sim_invariants_check_engine(run, p, error) && check_copies(p, error);
}
