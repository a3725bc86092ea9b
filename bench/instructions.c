/* bench/instructions.c — fixed workloads for callgrind, which counts
 * instructions: unlike wall time, the count repeats exactly on a busy
 * machine.  bench/callgrind.sh runs this under callgrind, counting only
 * inside the measure_* functions, and divides by the events and steps.
 *
 *   offsim-instructions engine   one engine run of the synthetic program
 *   offsim-instructions step     ten 96x32 async steps, lowered and run
 *   offsim-instructions pp N     one step of the gpus figure's pp-N pipeline
 *   offsim-instructions scenario FILE
 *                                one step of FILE's first policy (with its ops
 *                                and events: the 1T configuration of issue 30)
 */
#include "bench/bench.h"
#include "engine/engine.h"
#include "result/evaluate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const SimLink link_ = {
  .h2d_bandwidth = 25e9, .d2h_bandwidth = 25e9, .bidir_bandwidth = 40e9, .latency = 8e-6,
  .pageable_factor = 0.5, .compute_slowdown = 0.03, .host_alloc = 3e-3,
};

__attribute__((noinline)) static guint64
measure_engine(SimEngine *engine, const SimProgram *p)
{
  g_autoptr(SimRun) run = sim_engine_run(engine, p, &link_, NULL, NULL);
  return run ? run->events : 0;
}

__attribute__((noinline)) static void
measure_step(SimEvaluator *evaluator, const SimScenario *s)
{
  const SimPolicy *policy = g_ptr_array_index(s->policies, 0);
  for (int i = 0; i < 10; i++) {
    g_autoptr(SimRun) run = sim_evaluate_run(evaluator, s, policy, NULL);
    g_assert(run != NULL);
  }
}

/* One lowered and run step of the pp rows' pipeline (bench_pp_text). */
__attribute__((noinline)) static guint64
measure_pp(SimEvaluator *evaluator, const SimScenario *s)
{
  const SimPolicy *policy = g_ptr_array_index(s->policies, 0);
  g_autoptr(SimRun) run = sim_evaluate_run(evaluator, s, policy, NULL);
  g_assert(run != NULL);
  return run->events;
}

int
main(int argc, char **argv)
{
  if (argc == 2 && strcmp(argv[1], "engine") == 0) {
    g_autoptr(SimProgram) p = bench_synthetic_program(180000);
    g_autoptr(SimEngine) engine = sim_engine_new();
    measure_engine(engine, p); /* grow the engine's buffers outside the count */
    printf("events %" G_GUINT64_FORMAT "\n", measure_engine(engine, p));
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "step") == 0) {
    g_autofree char *text = bench_scenario_text(96);
    g_autoptr(SimScenario) s = sim_scenario_load_data(text, "96x32", NULL);
    g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
    measure_step(evaluator, s); /* warm: buffers and labels */
    measure_step(evaluator, s);
    printf("steps 10 ops %u\n", sim_program_n_ops(sim_evaluate_program(evaluator)));
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "pp") == 0) {
    g_autofree char *text = bench_pp_text((guint)atoi(argv[2]));
    g_autoptr(SimScenario) s = sim_scenario_load_data(text, "pp", NULL);
    g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
    measure_pp(evaluator, s); /* warm: buffers and labels */
    printf("events %" G_GUINT64_FORMAT " ops %u\n", measure_pp(evaluator, s),
           sim_program_n_ops(sim_evaluate_program(evaluator)));
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "scenario") == 0) {
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = sim_scenario_load_file(argv[2], &error);
    if (s == NULL) {
      fprintf(stderr, "offsim-instructions: %s\n", error->message);
      return 2;
    }
    g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
    guint64 events = measure_pp(evaluator, s); /* one call: the count is the run's */
    printf("events %" G_GUINT64_FORMAT " ops %u\n", events, sim_program_n_ops(sim_evaluate_program(evaluator)));
    return 0;
  }
  fprintf(stderr, "usage: offsim-instructions engine|step|pp STAGES|scenario FILE\n");
  return 2;
}
