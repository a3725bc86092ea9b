#include "evaluate.h"

#include "invariants.h"
#include "lower.h"

SimResult *
planner_evaluate(const SimScenario *s, const SimPolicy *policy, SimEngine *engine,
                 const PlannerEvalOptions *options, GError **error)
{
  g_autoptr(SimEngine) own = engine ? NULL : sim_engine_new();
  gboolean detail = options && options->detail;
  guint64 capacity = options && options->budget ? options->budget : s->machine.device.memory;
  SimEngineOptions engine_options = { .record_ops = detail, .record_curve = detail };

  SimProgram *scratch = options && !detail ? options->program : NULL;
  g_autoptr(SimProgram) program = scratch ? NULL : planner_lower(s->workload, policy, &s->machine.link);
  if (scratch)
    planner_lower_into(scratch, s->workload, policy, &s->machine.link);
  SimProgram *lowered = scratch ? scratch : program;
  g_autoptr(SimRun) run = sim_engine_run(engine ? engine : own, lowered, &s->machine.link, &engine_options, error);
  if (run == NULL) {
    g_prefix_error(error, "policy '%s': ", policy->name);
    return NULL;
  }
#ifndef NDEBUG
  /* A lowered step also sends back every byte it sent out. */
  if (!sim_invariants_check(run, lowered, error)) {
    g_prefix_error(error, "policy '%s': ", policy->name);
    return NULL;
  }
#endif
  if (!detail)
    return sim_result_new(s->name, policy->name, s->workload, lowered, run, capacity, FALSE);
  SimResult *r = sim_result_new(s->name, policy->name, s->workload, program, run, capacity, TRUE);
  g_steal_pointer(&program);
  g_steal_pointer(&run);
  return r;
}
