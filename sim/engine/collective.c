#include "engine/collective.h"

const char *const sim_collective_names[] = { "all-reduce", "all-gather", "reduce-scatter", "all-to-all", NULL };

guint
sim_collective_nodes(guint first_rank, guint stride, guint ranks, guint gpus_per_node)
{
  g_return_val_if_fail(stride >= 1 && gpus_per_node >= 1, 0);
  /* The ranks ascend, so their nodes do too: count the changes.  In 64 bits,
   * so that a large stride cannot wrap past a node already counted. */
  guint nodes = 0;
  guint64 last = G_MAXUINT64;
  for (guint i = 0; i < ranks; i++) {
    guint64 node = ((guint64)first_rank + (guint64)i * stride) / gpus_per_node;
    if (node != last) {
      nodes++;
      last = node;
    }
  }
  return nodes;
}

double
sim_collective_factor(SimCollectiveKind kind, guint ranks)
{
  g_return_val_if_fail(kind < SIM_COLLECTIVE_COUNT, 0);
  if (ranks <= 1)
    return 0;
  double n = ranks, share = (n - 1) / n;
  /* An all-reduce is a reduce-scatter followed by an all-gather; an
   * all-to-all keeps the 1/n it sends itself. */
  return kind == SIM_COLLECTIVE_ALL_REDUCE ? 2 * share : share;
}

double
sim_collective_time(const SimLink *link, SimCollectiveKind kind, guint64 bytes, guint ranks, guint nodes)
{
  g_return_val_if_fail(link != NULL && kind < SIM_COLLECTIVE_COUNT, 0);
  if (ranks <= 1)
    return 0;
  gboolean across = nodes > 1;
  double bandwidth = across ? link->network.bandwidth : link->node.collective_bandwidth;
  double latency = across ? link->network.latency : link->node.collective_latency;
  g_assert(bandwidth > 0);
  return latency + sim_collective_factor(kind, ranks) * (double)bytes / bandwidth;
}
