/* planner/shapes.c — a framework's expressible plans and the best of them
 * (planner/shapes.h). */
#include "planner/shapes.h"

#include "base/error.h"
#include "planner/internal/plan_private.h"

#include <math.h>
#include <string.h>

#define TARGET_NAME_(e, name, framework) #name,
const char *const planner_target_names[] = { PLANNER_TARGET_MAP(TARGET_NAME_) NULL };
#undef TARGET_NAME_

gboolean
planner_target_lookup(const char *name, PlannerTarget *target)
{
  for (guint t = 0; t < PLANNER_TARGET_COUNT; t++)
    if (strcmp(name, planner_target_names[t]) == 0) {
      *target = (PlannerTarget)t;
      return TRUE;
    }
  return FALSE;
}

SimFramework
planner_target_framework(PlannerTarget target)
{
#define TARGET_FRAMEWORK_(e, name, framework) [PLANNER_TARGET_##e] = SIM_FRAMEWORK_##framework,
  static const SimFramework frameworks[] = { PLANNER_TARGET_MAP(TARGET_FRAMEWORK_) };
#undef TARGET_FRAMEWORK_
  g_assert(target < PLANNER_TARGET_COUNT);
  return frameworks[target];
}

/* The action with its offload taken away (verl's kept last layer). */
static SimAction
without_offload(SimAction a)
{
  switch (a) {
  case SIM_ACTION_OFFLOAD:
    return SIM_ACTION_KEEP;
  case SIM_ACTION_RECOMPUTE_OFFLOAD:
    return SIM_ACTION_RECOMPUTE;
  case SIM_ACTION_SELECTIVE_OFFLOAD:
    return SIM_ACTION_SELECTIVE;
  default:
    return a;
  }
}

void
planner_shape_actions(const PlannerShape *shape, guint n, SimAction *actions)
{
  for (guint i = 0; i < n; i++) {
    gboolean on = shape->every ? (i + 1) % shape->every == 0 : i < shape->first;
    actions[i] = on ? shape->on : shape->rest;
    if (i + shape->keep_last >= n)
      actions[i] = without_offload(actions[i]);
  }
}

static void
add(GArray *shapes, SimAction on, SimAction rest, guint first, guint every, guint keep_last)
{
  PlannerShape shape = { .on = on, .rest = rest, .first = first, .every = every, .keep_last = keep_last };
  g_array_append_val(shapes, shape);
}

/* Every layer takes `a`. */
static void
add_all(GArray *shapes, SimAction a, guint n, guint keep_last)
{
  add(shapes, a, a, n, 0, keep_last);
}

GArray *
planner_shapes_list(PlannerTarget target, guint n, gboolean selective)
{
  GArray *shapes = g_array_new(FALSE, TRUE, sizeof(PlannerShape));
  add_all(shapes, SIM_ACTION_KEEP, n, 0);
  switch (target) {
  case PLANNER_TARGET_MEGATRON:
    /* --recompute-method block --recompute-num-layers N, the others kept or
     * (--fine-grained-activation-offloading) offloaded; N = 0: offloading alone. */
    for (guint first = 1; first <= n; first++)
      add(shapes, SIM_ACTION_RECOMPUTE, SIM_ACTION_KEEP, first, 0, 0);
    for (guint first = 0; first < n; first++)
      add(shapes, SIM_ACTION_RECOMPUTE, SIM_ACTION_OFFLOAD, first, 0, 0);
    if (selective) { /* --recompute-granularity selective: every layer */
      add_all(shapes, SIM_ACTION_SELECTIVE, n, 0);
      add_all(shapes, SIM_ACTION_SELECTIVE_OFFLOAD, n, 0);
    }
    break;
  case PLANNER_TARGET_TORCHTUNE:
  case PLANNER_TARGET_DEEPSPEED:
    /* Checkpointing every layer, its inputs offloaded or not; neither
     * offloads a layer it does not checkpoint. */
    add_all(shapes, SIM_ACTION_RECOMPUTE, n, 0);
    add_all(shapes, SIM_ACTION_RECOMPUTE_OFFLOAD, n, 0);
    break;
  case PLANNER_TARGET_VERL:
    add_all(shapes, SIM_ACTION_RECOMPUTE, n, 0);
    add_all(shapes, SIM_ACTION_OFFLOAD, n, 1);
    add_all(shapes, SIM_ACTION_RECOMPUTE_OFFLOAD, n, 1);
    break;
  case PLANNER_TARGET_TE:
    /* The last layer's offload would have to finish before it starts. */
    for (guint first = 1; first < n; first++)
      add(shapes, SIM_ACTION_OFFLOAD, SIM_ACTION_KEEP, first, 0, 0);
    break;
  case PLANNER_TARGET_TORCHTITAN:
    add_all(shapes, SIM_ACTION_RECOMPUTE, n, 0);
    for (guint every = 2; every <= n; every++)
      add(shapes, SIM_ACTION_RECOMPUTE, SIM_ACTION_KEEP, 0, every, 0);
    break;
  case PLANNER_TARGET_COUNT:
    g_assert_not_reached();
  }
  return shapes;
}

gboolean
planner_shapes_match(PlannerTarget target, const SimAction *actions, guint n, PlannerShape *shape)
{
  g_autoptr(GArray) shapes = planner_shapes_list(target, n, TRUE);
  g_autofree SimAction *trial = g_new(SimAction, MAX(n, 1));
  for (guint k = 0; k < shapes->len; k++) {
    const PlannerShape *s = &g_array_index(shapes, PlannerShape, k);
    planner_shape_actions(s, n, trial);
    if (memcmp(trial, actions, sizeof(SimAction) * n) == 0) {
      *shape = *s;
      return TRUE;
    }
  }
  return FALSE;
}

char *
planner_shapes_describe(const SimAction *actions, guint n)
{
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < n;) {
    guint j = i;
    while (j + 1 < n && actions[j + 1] == actions[i])
      j++;
    g_string_append_printf(out, "%s", out->len ? ", " : "");
    if (j > i)
      g_string_append_printf(out, "L%u-L%u %s", i, j, sim_action_name(actions[i]));
    else
      g_string_append_printf(out, "L%u %s", i, sim_action_name(actions[i]));
    i = j + 1;
  }
  return g_string_free(out, FALSE);
}

void
planner_shapes_plan_free(PlannerShapesPlan *plan)
{
  if (plan == NULL)
    return;
  planner_plan_free(plan->plan);
  planner_plan_free(plan->unrestricted);
  g_free(plan);
}

/* The shape's plan, judged as planner_plan judges its own: the bound is the
 * unrestricted search's (the shapes are plans of its space, under the same
 * schedule), the verdict against resident, the notes per layer. */
static PlannerPlan *
shape_plan(const SimScenario *s, guint64 budget, SimEvaluator *evaluator, SimPolicy *scratch,
           const PlannerOption *own, const SimAction *actions, const PlannerPlan *unrestricted, guint64 *evaluations, GError **error)
{
  guint n = sim_workload_n_layers(s->workload);
  g_autoptr(PlannerPlan) p = g_new0(PlannerPlan, 1);
  p->policy = planner_plan_policy_new(scratch, actions, n, own);
  SimEvaluateOptions eval = { .budget = budget, .detail = TRUE };
  p->result = sim_evaluate(evaluator, s, p->policy, &eval, error);
  g_autoptr(SimPolicy) resident = sim_policy_new("resident", SIM_POLICY_RESIDENT);
  p->resident = p->result ? sim_evaluate(evaluator, s, resident, &eval, error) : NULL;
  if (p->resident == NULL)
    return NULL;
  p->feasible = p->result->fits;
  p->min_budget = p->feasible ? 0 : p->result->peak_reserved_bytes;
  p->proven = unrestricted->proven;
  p->lagrangian = unrestricted->lagrangian;
  p->lower_bound_ms = MIN(unrestricted->lower_bound_ms, p->result->step_ms);
  p->gap = p->lower_bound_ms > 0 ? MAX(0.0, p->result->step_ms / p->lower_bound_ms - 1) : 0;
  p->optimal = p->proven && p->feasible && p->gap <= PLANNER_OPTIMAL_GAP;
  planner_plan_verdict(p, s->workload->static_bytes);
  p->evaluations = *evaluations;
  return planner_plan_annotate(p, s, error) ? g_steal_pointer(&p) : NULL;
}

PlannerShapesPlan *
planner_shapes_plan(const SimScenario *s, guint64 budget, PlannerTarget target, GError **error)
{
  if (sim_parallel_active(&s->parallel)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "--framework %s: %s has an active [parallel], planned per stage; a framework's configuration is "
                "planned for one GPU's step only",
                planner_target_names[target], s->origin);
    return NULL;
  }
  SimFramework framework = planner_target_framework(target);
  g_autoptr(PlannerShapesPlan) out = g_new0(PlannerShapesPlan, 1);
  out->unrestricted = planner_plan_framework(s, budget, framework, error);
  if (out->unrestricted == NULL)
    return NULL;
  guint n = sim_workload_n_layers(s->workload);
  g_autofree PlannerLayerCost *cost = g_new0(PlannerLayerCost, MAX(n, 1));
  gboolean selective = FALSE;
  for (guint i = 0; i < n; i++)
    selective |= planner_plan_layer_cost(sim_workload_layer(s->workload, i), &cost[i]);
  g_autoptr(SimPolicy) scratch = planner_plan_scratch_new(s, framework, error);
  if (scratch == NULL)
    return NULL;
  PlannerOption own = { scratch->async, scratch->prefetch, scratch->inflight };
  g_autoptr(GArray) shapes = planner_shapes_list(target, n, selective);
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  SimEvaluateOptions eval = { .budget = budget };
  g_autofree SimAction *actions = g_new(SimAction, MAX(n, 1));
  guint best = G_MAXUINT, smallest = 0;
  double best_step = INFINITY;
  guint64 least_peak = G_MAXUINT64, evaluations = 0;
  for (guint k = 0; k < shapes->len; k++) {
    planner_shape_actions(&g_array_index(shapes, PlannerShape, k), n, actions);
    g_autoptr(SimPolicy) policy = planner_plan_policy_new(scratch, actions, n, &own);
    g_autoptr(SimResult) r = sim_evaluate(evaluator, s, policy, &eval, error);
    if (r == NULL)
      return NULL;
    evaluations++;
    if (r->fits && r->step_ms < best_step) {
      best = k;
      best_step = r->step_ms;
    }
    if (r->peak_reserved_bytes < least_peak) {
      smallest = k;
      least_peak = r->peak_reserved_bytes;
    }
  }
  out->shape = g_array_index(shapes, PlannerShape, best != G_MAXUINT ? best : smallest);
  planner_shape_actions(&out->shape, n, actions);
  out->plan = shape_plan(s, budget, evaluator, scratch, &own, actions, out->unrestricted, &evaluations, error);
  if (out->plan == NULL)
    return NULL;
  out->plan->evaluations += out->unrestricted->evaluations; /* both searches' simulations */
  return g_steal_pointer(&out);
}
