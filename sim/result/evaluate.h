/* sim/result/evaluate.h — one policy on one scenario: lower, run, measure.
 *
 * The one path from a scenario and a policy to figures.  `offsim run` and
 * `compare`, the sweep, the planner, the benchmarks and the tests all come
 * through here, so they cannot disagree on how a policy is lowered, which
 * link it runs against, or which invariants are checked:
 *
 *   sim_evaluate_run   lowers into the evaluator's scratch program and runs
 *                      it: the raw SimRun, no op times, no memory curve.  The
 *                      planner's inner loop (thousands of candidates) and the
 *                      step benchmark use it; nothing is allocated per call
 *                      once the buffers have grown.
 *   sim_evaluate       the same, turned into a SimResult (the figures every
 *                      output prints); with `detail` the result keeps its own
 *                      program, the op times and the memory curve for plots
 *                      and traces, of every data-parallel replica (without,
 *                      identical replicas run once: sim_evaluate_set_every_replica).
 *
 * In builds without NDEBUG every run is checked by sim_invariants_check
 * (every byte sent out comes back, memory never negative, ...): a failure is
 * a lowering or engine bug and comes back as SIM_ERROR_INTERNAL.
 *
 * Ownership: a SimEvaluator owns an engine and a program; it is not shared
 * between threads (the sweep keeps one per worker).
 */
#pragma once

#include "engine/engine.h"
#include "input/scenario.h"
#include "result/result.h"

G_BEGIN_DECLS

typedef struct {
  guint64 budget;  /* capacity for `fits`; 0 = the device's memory */
  gboolean detail; /* keep the program, op times and memory curve in the result */
} SimEvaluateOptions;

typedef struct SimEvaluator SimEvaluator;

SimEvaluator *sim_evaluate_new(void);
void sim_evaluate_free(SimEvaluator *evaluator);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimEvaluator, sim_evaluate_free)

/* Lowers `policy` on `scenario` into the evaluator's program and runs it.
 * Returns a new SimRun (the caller's), or NULL with `error` set; the program
 * it was run from is the evaluator's and valid until the next call. */
SimRun *sim_evaluate_run(SimEvaluator *evaluator, const SimScenario *scenario, const SimPolicy *policy,
                         GError **error);

/* Identical data-parallel replicas (sim_lower_pipeline_replicas) are
 * lowered and run once, their GPUs standing for the others: the same
 * figures, the SimRun's per-GPU arrays over every GPU of the step, in a
 * fraction of the time.  `every` TRUE lowers and runs every replica, as a
 * detailed evaluation always does (its exports walk every GPU's ops): the
 * tests compare both ways. */
void sim_evaluate_set_every_replica(SimEvaluator *evaluator, gboolean every);

/* The program of the evaluator's last sim_evaluate_run (empty before one). */
const SimProgram *sim_evaluate_program(const SimEvaluator *evaluator);

/* The figures of `policy` on `scenario`: a new SimResult, the caller's, or
 * NULL with `error` set.  `evaluator` may be NULL (a temporary one is used);
 * pass one to reuse its buffers.  `options` may be NULL (device memory as
 * the capacity, no detail). */
SimResult *sim_evaluate(SimEvaluator *evaluator, const SimScenario *scenario, const SimPolicy *policy,
                        const SimEvaluateOptions *options, GError **error);

G_END_DECLS
