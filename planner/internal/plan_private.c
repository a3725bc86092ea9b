/* planner/internal/plan_private.c — the definitions plan_private.h declares:
 * what the single-GPU planner (plan.c) and the pipeline planner (stages.c)
 * both use, so that neither includes the other's.  plan.c calls
 * planner_plan_stages for a pipeline (stages.h); stages.c needs nothing of
 * plan.c's. */
#include "planner/internal/plan_private.h"

#include "base/error.h"
#include "ledger/ledger.h"
#include "model/framework.h"

#include <math.h>
#include <string.h>

/* The copy schedules the planners try (plan.h). */
static const PlannerOption options[] = {
  { TRUE, 1, 2 },
  { TRUE, 2, 2 },
  { TRUE, 1, 1 },
  { FALSE, 0, 1 },
};
#define N_OPTIONS G_N_ELEMENTS(options)

const PlannerOption *
planner_plan_options(guint *n)
{
  *n = N_OPTIONS;
  return options;
}

gboolean
planner_plan_layer_cost(const SimLayer *layer, PlannerLayerCost *lc)
{
  guint64 all = 0, fixed = 0, sel = 0, sel_fixed = 0;
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    if (!sim_tensor_on_device(t))
      continue;
    all += t->bytes;
    if (!t->offloadable)
      fixed += t->bytes;
    if (t->selective)
      sel += t->bytes;
    else if (!t->offloadable)
      sel_fixed += t->bytes;
  }
  memset(lc, 0, sizeof *lc);
  lc->keep[SIM_ACTION_KEEP] = all;
  lc->keep[SIM_ACTION_OFFLOAD] = fixed;
  lc->keep[SIM_ACTION_RECOMPUTE] = layer->input_bytes;
  lc->keep[SIM_ACTION_RECOMPUTE_OFFLOAD] = 0; /* its input goes to the host */
  lc->keep[SIM_ACTION_SELECTIVE] = all - sel;
  lc->keep[SIM_ACTION_SELECTIVE_OFFLOAD] = sel_fixed;
  lc->redo[SIM_ACTION_RECOMPUTE] = lc->redo[SIM_ACTION_RECOMPUTE_OFFLOAD] = layer->forward;
  lc->redo[SIM_ACTION_SELECTIVE] = lc->redo[SIM_ACTION_SELECTIVE_OFFLOAD] = sim_layer_selective_recompute(layer);
  lc->useful[SIM_ACTION_KEEP] = lc->useful[SIM_ACTION_RECOMPUTE] = TRUE;
  lc->useful[SIM_ACTION_OFFLOAD] = fixed < all;
  lc->useful[SIM_ACTION_RECOMPUTE_OFFLOAD] = layer->input_bytes > 0;
  lc->useful[SIM_ACTION_SELECTIVE] = sel > 0;
  lc->useful[SIM_ACTION_SELECTIVE_OFFLOAD] = sel > 0 && sel_fixed < all - sel;
  return sel > 0;
}

SimPolicy *
planner_plan_policy_new(const SimPolicy *scratch, const SimAction *actions, guint n, const PlannerOption *o)
{
  SimPolicy *p = sim_policy_new("plan", SIM_POLICY_PLAN);
  p->version = scratch->version;
  sim_framework_preset(p, scratch->framework);
  p->dedup = scratch->dedup;
  p->actions = g_array_sized_new(FALSE, FALSE, sizeof(SimAction), n);
  g_array_append_vals(p->actions, actions, n);
  planner_plan_set_schedule(p, o);
  return p;
}

void
planner_plan_set_schedule(SimPolicy *p, const PlannerOption *o)
{
  p->async = o->async;
  p->prefetch = o->prefetch;
  p->inflight = o->inflight;
}

SimRun *
planner_plan_run(SimEvaluator *evaluator, const SimScenario *s, SimPolicy *scratch, const SimAction *actions,
                 const PlannerOption *o, guint64 *evaluations, GError **error)
{
  memcpy(scratch->actions->data, actions, sizeof(SimAction) * scratch->actions->len);
  planner_plan_set_schedule(scratch, o);
  (*evaluations)++;
  return sim_evaluate_run(evaluator, s, scratch, error);
}

SimPolicy *
planner_plan_scratch_new(const SimScenario *s, SimFramework framework, GError **error)
{
  g_autoptr(SimPolicy) scratch = sim_policy_new("plan", SIM_POLICY_PLAN);
  guint n = sim_workload_n_layers(s->workload);
  scratch->actions = g_array_sized_new(FALSE, TRUE, sizeof(SimAction), n);
  g_array_set_size(scratch->actions, n);
  scratch->dedup = TRUE;
  /* A framework's offloads run its own schedule: the one option tried. */
  sim_framework_preset(scratch, framework);
  if (scratch->min_elements && !sim_workload_elements_known(s->workload)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s filters by element count, and explicit [model] layers have no element type",
                sim_framework_names[framework]);
    return NULL;
  }
  return g_steal_pointer(&scratch);
}

/* PlannerLayerNote per layer of the plan `actions` under `o`: what the
 * choice saves, what offloading that layer alone would expose (two runs per
 * layer, written into `scratch`, counted in *evaluations), what recomputing
 * it costs.  A new array, or NULL with `error` set. */
static GArray *
notes_of(SimEvaluator *evaluator, const SimScenario *s, SimPolicy *scratch, const PlannerLayerCost *cost,
         const SimAction *actions, const PlannerOption *o, guint64 *evaluations, GError **error)
{
  guint n = sim_workload_n_layers(s->workload);
  g_autoptr(GArray) notes = g_array_sized_new(FALSE, TRUE, sizeof(PlannerLayerNote), n);
  g_autofree SimAction *trial = g_memdup2(actions, sizeof(SimAction) * n);
  guint64 slices = (guint64)n * n * s->parallel.microbatches; /* what the notes run, in slices */
  for (guint i = 0; i < n; i++) {
    PlannerLayerNote note = { .action = actions[i], .recompute_ms = cost[i].redo[SIM_ACTION_RECOMPUTE] * 1e3 };
    /* A checkpointed input can outweigh the tensors it replaces: never below 0. */
    guint64 kept = cost[i].keep[actions[i]], all = cost[i].keep[SIM_ACTION_KEEP];
    note.bytes_saved = all > kept ? all - kept : 0;
    note.exposed_if_offloaded_ms = NAN;
    /* Two evaluations per layer, each of layers × micro-batches slices:
     * past PLANNER_LOCAL_LAYERS² slices in all (PLANNER_LOCAL_LAYERS layers
     * on one GPU) that is the quadratic step, and the note is left unknown
     * (NAN, printed "-"). */
    if (cost[i].useful[SIM_ACTION_OFFLOAD] && o->async &&
        slices <= (guint64)PLANNER_LOCAL_LAYERS * PLANNER_LOCAL_LAYERS) {
      double step[2];
      for (guint k = 0; k < 2; k++) {
        trial[i] = k == 0 ? SIM_ACTION_OFFLOAD : SIM_ACTION_KEEP;
        g_autoptr(SimRun) run = planner_plan_run(evaluator, s, scratch, trial, o, evaluations, error);
        if (run == NULL)
          return NULL;
        step[k] = run->step;
      }
      trial[i] = actions[i];
      note.exposed_if_offloaded_ms = (step[0] - step[1]) * 1e3;
    }
    g_array_append_val(notes, note);
  }
  return g_steal_pointer(&notes);
}

gboolean
planner_plan_annotate(PlannerPlan *p, const SimScenario *s, GError **error)
{
  const SimPolicy *policy = p->policy;
  g_autoptr(SimPolicy) scratch = planner_plan_scratch_new(s, policy->framework, error);
  if (scratch == NULL)
    return FALSE;
  guint n = policy->actions->len;
  g_autofree PlannerLayerCost *cost = g_new0(PlannerLayerCost, MAX(n, 1));
  for (guint i = 0; i < n; i++)
    planner_plan_layer_cost(sim_workload_layer(s->workload, i), &cost[i]);
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  PlannerOption o = { policy->async, policy->prefetch, policy->inflight };
  GArray *notes = notes_of(evaluator, s, scratch, cost, (const SimAction *)policy->actions->data, &o, &p->evaluations,
                           error);
  if (notes == NULL)
    return FALSE;
  if (p->notes)
    g_array_unref(p->notes);
  p->notes = notes;
  return TRUE;
}

/* The time the plan adds, as a share of resident's step (plan.h says why). */
void
planner_plan_verdict(PlannerPlan *p, guint64 static_bytes)
{
  gint64 removed = MAX(0, p->resident->peak_device.bytes - p->result->peak_device.bytes);
  gint64 activations = MAX(p->resident->peak_device.bytes - (gint64)static_bytes, 1);
  double extra = MAX(0.0, p->result->step_ms - p->resident->step_ms);
  double increase = p->resident->step_ms > 0 ? extra / p->resident->step_ms : 0;
  LedgerVerdict v = !p->feasible || removed == 0             ? LEDGER_REJECT
                           : increase <= PLANNER_PLAN_ACCEPT_INCREASE ? LEDGER_ACCEPT
                           : increase <= PLANNER_PLAN_TUNE_INCREASE   ? LEDGER_TUNE
                                                                      : LEDGER_REJECT;
  p->verdict = ledger_verdict_name(v);
  if (!p->feasible)
    p->verdict_reason = g_strdup("no plan fits the budget");
  else if (removed == 0)
    p->verdict_reason = g_strdup("resident already fits: nothing to change");
  else
    p->verdict_reason = g_strdup_printf("+%.2f ms a step, %.1f %% of resident's, for %.3f of the activation peak",
                                        extra, increase * 100, (double)removed / (double)activations);
}
