#include "policy.h"

SimPolicy *
sim_policy_new(const char *name, SimPolicyKind kind)
{
  SimPolicy *p = g_new0(SimPolicy, 1);
  p->name = g_strdup(name);
  p->kind = kind;
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
  if (p->stages)
    g_array_unref(p->stages);
  g_free(p);
}

const char *const sim_policy_kind_names[] = { "resident", "offload", "checkpoint", "plan", NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_policy_kind_names) == SIM_POLICY_KIND_COUNT + 1);
const char *const sim_action_names[] = { "keep", "offload", "recompute", "recompute+offload", "selective",
                                         "selective+offload", NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_action_names) == SIM_ACTION_COUNT + 1);
const char *const sim_framework_names[] = { "none", "save_on_cpu", "verl", "te", "megatron", "torchtune", "deepspeed",
                                            NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_framework_names) == SIM_FRAMEWORK_COUNT + 1);
const char *const sim_version_names[] = { "release", "master", NULL };

const char *
sim_policy_kind_name(SimPolicyKind kind)
{
  g_assert(kind < SIM_POLICY_KIND_COUNT);
  return sim_policy_kind_names[kind];
}

const char *
sim_action_name(SimAction action)
{
  g_assert(action < SIM_ACTION_COUNT);
  return sim_action_names[action];
}
