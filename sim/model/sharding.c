#include "model/sharding.h"

const char *const sim_sharding_names[] = { "none", "optimizer", "gradients", "full", NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_sharding_names) == SIM_SHARDING_COUNT + 1);

void
sim_param_bytes_set(SimParamBytes *b, guint e, gboolean grads_kept, gboolean adamw, gboolean master_weights)
{
  g_return_if_fail(e > 0 && e <= 8);
  gboolean master = master_weights && e != 4;
  *b = (SimParamBytes){
    .weight = (guint8)e,
    .grad = grads_kept ? (guint8)e : 0,
    .state = (guint8)((adamw ? 8 : 0) + (master ? 4 : 0)),
    .master = (guint8)master,
  };
}

guint64
sim_sharding_shard(guint64 params, guint dp)
{
  g_return_val_if_fail(dp >= 1, params);
  return params / dp + (params % dp != 0);
}

/* Parameters whose state of a kind this GPU holds: all of them, or its
 * shard once the sharding reaches that kind. */
static guint64
held(guint64 params, SimSharding sharding, SimSharding from, guint dp)
{
  return sharding >= from ? sim_sharding_shard(params, dp) : params;
}

guint64
sim_sharding_static(const SimParamBytes *b, guint64 params, SimSharding sharding, guint dp)
{
  g_return_val_if_fail(b != NULL && dp >= 1 && sharding < SIM_SHARDING_COUNT, 0);
  /* The loaders bound params × (weight + grad + state) by 4 EiB, and every
   * term here is at most its share of that product. */
  return held(params, sharding, SIM_SHARDING_FULL, dp) * b->weight +
         held(params, sharding, SIM_SHARDING_GRADIENTS, dp) * b->grad +
         held(params, sharding, SIM_SHARDING_OPTIMIZER, dp) * b->state;
}

guint64
sim_sharding_offloaded(const SimParamBytes *b, guint64 params, SimSharding sharding, guint dp, guint what)
{
  g_return_val_if_fail(b != NULL && dp >= 1 && sharding < SIM_SHARDING_COUNT, 0);
  guint64 moved = what & SIM_SHARDING_OFFLOAD_OPTIMIZER ? held(params, sharding, SIM_SHARDING_OPTIMIZER, dp) * b->state : 0;
  if ((what & SIM_SHARDING_OFFLOAD_WEIGHTS) && sharding == SIM_SHARDING_FULL)
    moved += sim_sharding_shard(params, dp) * (b->weight + b->grad);
  return moved;
}

guint64
sim_sharding_grad_kept(guint64 grad_bytes, SimSharding sharding, guint dp)
{
  g_return_val_if_fail(dp >= 1, grad_bytes);
  return held(grad_bytes, sharding, SIM_SHARDING_GRADIENTS, dp);
}

guint64
sim_sharding_gathered(const SimParamBytes *b, guint64 params, SimSharding sharding, guint dp)
{
  g_return_val_if_fail(b != NULL && dp >= 1, 0);
  if (sharding != SIM_SHARDING_FULL)
    return 0;
  /* The all-gather's output: every rank's padded shard. */
  return sim_sharding_shard(params, dp) * dp * b->weight;
}

