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

#define NAME_(e, name) name,
#define FRAMEWORK_NAME_(e, name, checkpoints) #name,
const char *const sim_policy_kind_names[] = { SIM_POLICY_KIND_MAP(NAME_) NULL };
const char *const sim_action_names[] = { SIM_ACTION_MAP(NAME_) NULL };
const char *const sim_framework_names[] = { SIM_FRAMEWORK_MAP(FRAMEWORK_NAME_) NULL };
#undef NAME_
#undef FRAMEWORK_NAME_
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
