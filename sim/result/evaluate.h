/* sim/result/evaluate.h — one policy on one scenario: lower, run, measure.
 *
 * The one path from a scenario and a policy to a SimResult, shared by
 * `offsim run`, `offsim compare` and the planner, so they cannot disagree.
 */
#pragma once

#include "engine.h"
#include "result.h"
#include "scenario.h"

G_BEGIN_DECLS

typedef struct {
  guint64 budget;  /* capacity for `fits`; 0 = the device's memory */
  gboolean detail; /* keep the program, op times and memory curve in the result */
  SimProgram *program; /* scratch to lower into without detail (reused, not kept); NULL = a new one */
} PlannerEvalOptions;

/* `engine` may be NULL (a temporary one is used); pass one to reuse buffers. */
SimResult *planner_evaluate(const SimScenario *scenario, const SimPolicy *policy, SimEngine *engine,
                            const PlannerEvalOptions *options, GError **error);

G_END_DECLS
