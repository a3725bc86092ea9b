#include "model/parallel.h"

const char *const sim_pipe_schedule_names[] = { "gpipe", "1f1b", "interleaved", NULL };

gboolean
sim_parallel_active(const SimParallel *par)
{
  return par->pp > 1 || par->dp > 1 || par->microbatches > 1;
}

void
sim_parallel_chunk_bounds(const SimParallel *par, guint n_layers, guint *bounds)
{
  guint chunks = sim_parallel_chunks(par);
  bounds[0] = 0;
  for (guint c = 0; c < chunks; c++) {
    guint size = par->split != NULL ? g_array_index(par->split, guint, c)
                                    : n_layers / chunks + (c < n_layers % chunks ? 1 : 0);
    bounds[c + 1] = bounds[c] + size;
  }
  g_assert(bounds[chunks] == n_layers);
}

guint
sim_parallel_stage_of_layer(const SimParallel *par, guint n_layers, guint layer)
{
  guint chunks = sim_parallel_chunks(par);
  g_autofree guint *bounds = g_new(guint, chunks + 1);
  sim_parallel_chunk_bounds(par, n_layers, bounds);
  for (guint c = 0; c < chunks; c++)
    if (layer < bounds[c + 1])
      return c % par->pp;
  g_assert_not_reached();
}

guint
sim_parallel_global_rank(const SimParallel *par, guint tp, guint stage, guint replica, guint tp_rank)
{
  g_return_val_if_fail(tp >= 1 && tp_rank < tp && stage < par->pp && replica < par->dp, 0);
  /* At most SIM_PARALLEL_MAX_GPUS GPUs times tp <= 2^16: no wrap in 32 bits. */
  return tp_rank + tp * (stage * par->dp + replica);
}

void
sim_parallel_clear(SimParallel *par)
{
  if (par->split != NULL)
    g_array_unref(par->split);
  *par = (SimParallel){ 0 };
}
