#include "model/policy.h"

/* Async offload, verl's: prefetch 1, two groups in flight, the last layer
 * kept, each storage copied once; every other option as PyTorch's hooks
 * behave unless a framework says otherwise. */
#define DEFAULT_ASYNC TRUE
const SimPolicy sim_policy_defaults = {
  .async = DEFAULT_ASYNC,
  .prefetch = 1,
  .inflight = 2,
  .keep_last = SIM_POLICY_MODE_KEEP_LAST(DEFAULT_ASYNC),
  .min_tensor = 0,
  .pinned = SIM_PINNED_POOLED,
  .every = 1,
  .selective = FALSE,
  .dedup = SIM_POLICY_MODE_DEDUP(DEFAULT_ASYNC),
  .scope_all = FALSE,
  .params = SIM_PARAMS_SKIP,
  .copy_leaves = TRUE,
  .start_tensor = FALSE,
  .shared_stream = FALSE,
  .inflight_unit = SIM_INFLIGHT_GROUPS,
  .free = SIM_FREE_COPY_END,
  .reload = SIM_RELOAD_PREFETCH,
  .head_wait = FALSE,
  .min_elements = 0,
  .checkpoint = FALSE,
  .version = SIM_VERSION_RELEASE,
  .framework = SIM_FRAMEWORK_NONE,
};

SimPolicy *
sim_policy_new(const char *name, SimPolicyKind kind)
{
  g_return_val_if_fail(kind < SIM_POLICY_KIND_COUNT, NULL);
  SimPolicy *p = g_new(SimPolicy, 1);
  *p = sim_policy_defaults;
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
