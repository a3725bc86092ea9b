/* planner/internal/plan_private.h — what the single-GPU planner (plan.c) and the
 * pipeline planner (stages.c) share, so that a plan means the same in both:
 * the schedules tried (planner_plan_options, plan.h), a layer's costs and
 * useful actions, the scratch policy every candidate is written into, the
 * policy a plan prints, its verdict and its per-layer notes.
 *
 * Defined in plan_private.c beside it, so that plan.c and stages.c each
 * include this header and neither the other's definitions.  Who may include
 * it: the planner's sources, and tests that link offsim_planner_internal.
 */
#pragma once

#include "planner/plan.h"
#include "result/evaluate.h"

G_BEGIN_DECLS

/* What one layer contributes to the end-of-forward peak, and costs, per action. */
typedef struct {
  guint64 keep[SIM_ACTION_COUNT]; /* minimum bytes live at the end of the forward pass */
  double redo[SIM_ACTION_COUNT];  /* recompute seconds */
  gboolean useful[SIM_ACTION_COUNT];
} PlannerLayerCost;

/* Fills `cost` for `layer`; TRUE when the layer has selective tensors (the
 * planner then tries selective and selective+offload). */
gboolean planner_plan_layer_cost(const SimLayer *layer, PlannerLayerCost *cost);

/* The policy every candidate is written into: kind = plan, one action per
 * layer, dedup, `framework`'s preset (SIM_FRAMEWORK_NONE: none).  NULL with
 * `error` set when the framework filters by element count and the workload
 * cannot say them. */
SimPolicy *planner_plan_scratch_new(const SimScenario *scenario, SimFramework framework, GError **error);

/* Writes `option`'s copy schedule into `policy`. */
void planner_plan_set_schedule(SimPolicy *policy, const PlannerOption *option);

/* One candidate: `actions` (one per layer of the scenario) and `option`'s
 * schedule written into `scratch`, lowered and run, counted in
 * *evaluations.  A new SimRun, or NULL with `error` set. */
SimRun *planner_plan_run(SimEvaluator *evaluator, const SimScenario *scenario, SimPolicy *scratch,
                         const SimAction *actions, const PlannerOption *option, guint64 *evaluations,
                         GError **error);

/* The plan "plan": `scratch`'s framework and dedup, `actions` (n of them)
 * under schedule `option`.  A new policy. */
SimPolicy *planner_plan_policy_new(const SimPolicy *scratch, const SimAction *actions, guint n,
                                   const PlannerOption *option);

/* plan->verdict and plan->verdict_reason from plan->result against
 * plan->resident (PLANNER_PLAN_*_INCREASE), `static_bytes` being what no
 * policy removes (the reason says how much of the activation peak went). */
void planner_plan_verdict(PlannerPlan *plan, guint64 static_bytes);

/* plan->notes, a PlannerLayerNote per layer of its policy: what the
 * choice saves, what offloading that layer alone would expose (two runs
 * per layer, counted in plan->evaluations), what recomputing it costs.
 * Replaces any notes it had.  FALSE with `error` set when a run fails. */
gboolean planner_plan_annotate(PlannerPlan *plan, const SimScenario *scenario, GError **error);

G_END_DECLS
