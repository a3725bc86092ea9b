#include "policy.h"

SimPolicy *
sim_policy_new(const char *name, SimPolicyKind kind)
{
  SimPolicy *p = g_new0(SimPolicy, 1);
  p->name = g_strdup(name);
  p->kind = kind;
  p->async = TRUE;
  p->prefetch = 1;
  p->inflight = 2;
  p->keep_last = 1;
  p->min_tensor = 0;
  p->pinned = SIM_PINNED_POOLED;
  p->every = 1;
  p->selective = FALSE;
  p->dedup = TRUE;
  return p;
}

void
sim_policy_free(SimPolicy *p)
{
  if (p == NULL)
    return;
  g_free(p->name);
  if (p->selected)
    g_array_unref(p->selected);
  if (p->actions)
    g_array_unref(p->actions);
  g_free(p);
}

GPtrArray *
sim_policy_default_set(void)
{
  GPtrArray *set = g_ptr_array_new_with_free_func((GDestroyNotify)sim_policy_free);
  g_ptr_array_add(set, sim_policy_new("resident", SIM_POLICY_RESIDENT));
  SimPolicy *sync = sim_policy_new("offload-sync", SIM_POLICY_OFFLOAD);
  sync->async = FALSE;
  sync->keep_last = 0;
  sync->dedup = FALSE;
  g_ptr_array_add(set, sync);
  g_ptr_array_add(set, sim_policy_new("offload-async", SIM_POLICY_OFFLOAD));
  g_ptr_array_add(set, sim_policy_new("checkpoint-full", SIM_POLICY_CHECKPOINT));
  return set;
}

const char *
sim_policy_kind_name(SimPolicyKind kind)
{
  static const char *names[] = { "resident", "offload", "checkpoint", "plan" };
  return names[kind];
}

const char *
sim_action_name(SimAction action)
{
  static const char *names[] = { "keep", "offload", "recompute", "selective", "selective+offload" };
  return names[action];
}
