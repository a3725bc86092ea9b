#include "result/evaluate.h"

#include "lower/pipeline.h"

#include "engine/allocator.h"
#include "engine/invariants.h"
#include "lower/lower.h"

struct SimEvaluator {
  SimEngine *engine;
  SimProgram *program; /* scratch: every run without detail lowers into it */
  gboolean every_replica; /* lower every data-parallel replica, even where one stands for them */
};

SimEvaluator *
sim_evaluate_new(void)
{
  SimEvaluator *ev = g_new0(SimEvaluator, 1);
  ev->engine = sim_engine_new();
  ev->program = sim_program_new();
  return ev;
}

void
sim_evaluate_free(SimEvaluator *ev)
{
  if (ev == NULL)
    return;
  sim_engine_free(ev->engine);
  sim_program_free(ev->program);
  g_free(ev);
}

/* Lowers into `program` (reset first) and runs it: the one place both paths meet.
 * Identical replicas are lowered once unless `every_replica`. */
static SimRun *
lower_and_run(SimEngine *engine, SimProgram *program, const SimScenario *s, const SimPolicy *policy,
              const SimEngineOptions *options, gboolean every_replica, GError **error)
{
  if (sim_parallel_active(&s->parallel) && every_replica)
    sim_lower_pipeline_into(program, s->workload, policy, &s->machine.link, &s->parallel);
  else if (sim_parallel_active(&s->parallel))
    sim_lower_pipeline_once_into(program, s->workload, policy, &s->machine.link, &s->parallel);
  else
    sim_lower_into(program, s->workload, policy, &s->machine.link);
  g_autoptr(SimRun) run = sim_engine_run(engine, program, &s->machine.link, options, error);
  if (run == NULL) {
    g_prefix_error(error, "policy '%s': ", policy->name);
    return NULL;
  }
#ifndef NDEBUG
  /* A lowered step also sends back every byte it sent out. */
  if (!sim_invariants_check(run, program, error)) {
    g_prefix_error(error, "policy '%s': ", policy->name);
    return NULL;
  }
#endif
  return g_steal_pointer(&run);
}

SimRun *
sim_evaluate_run(SimEvaluator *ev, const SimScenario *s, const SimPolicy *policy, GError **error)
{
  g_return_val_if_fail(ev != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  return lower_and_run(ev->engine, ev->program, s, policy, NULL, ev->every_replica, error);
}

void
sim_evaluate_set_every_replica(SimEvaluator *ev, gboolean every)
{
  g_return_if_fail(ev != NULL);
  ev->every_replica = every;
}

const SimProgram *
sim_evaluate_program(const SimEvaluator *ev)
{
  return ev->program;
}

SimResult *
sim_evaluate(SimEvaluator *ev, const SimScenario *s, const SimPolicy *policy, const SimEvaluateOptions *options,
             GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_autoptr(SimEvaluator) own = ev ? NULL : sim_evaluate_new();
  SimEvaluator *use = ev ? ev : own;
  gboolean detail = options && options->detail;
  guint64 capacity = options && options->budget ? options->budget : s->machine.device.memory;
  SimEngineOptions engine_options = { .record_ops = detail, .record_curve = detail };

  /* With detail the result keeps its program, so it gets one of its own. */
  g_autoptr(SimProgram) kept = detail ? sim_program_new() : NULL;
  SimProgram *program = detail ? kept : use->program;
  /* The exports of a detailed run walk every GPU's ops: all replicas. */
  SimRun *run = lower_and_run(use->engine, program, s, policy, &engine_options, detail || use->every_replica, error);
  if (run == NULL)
    return NULL;
  guint allocator = s->machine.device.expandable_segments ? SIM_ALLOCATOR_EXPANDABLE : SIM_ALLOCATOR_NONE;
  SimResult *r;
  r = sim_result_new_parallel(s->name, policy->name, s->workload, &s->parallel, program, run, capacity);
  sim_result_reserve(r, run, program, allocator);
  if (detail)
    sim_result_attach(r, g_steal_pointer(&kept), run);
  else
    sim_run_free(run);
  /* A policy that moved and recomputed nothing says why (only then: the
   * reason walks every layer's tensors). */
  if (r->d2h_copies == 0 && r->recompute_ms == 0)
    r->note = sim_lower_policy_note(s->workload, policy, &s->parallel);
  return r;
}
