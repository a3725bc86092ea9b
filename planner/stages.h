/* planner/stages.h — the pipeline planner: one plan for every stage of a
 * pipeline, under one budget.
 *
 * With an active [parallel] the step runs on pp × dp GPUs of the same
 * hardware, and each holds its stage's layers for as many micro-batches as
 * the schedule keeps in flight there (under 1F1B stage s holds
 * min(pp - s, microbatches), so the first stage holds the most).  A plan
 * fits when every stage's peak device bytes (its worst replica's) is within
 * the budget.  The plan is one kind = plan policy, an action per model
 * layer, and one copy schedule: it differs by stage through the layers each
 * stage runs (sim_parallel_chunk_bounds), as a per-stage mix must
 * (sim/lower/pipeline.h).
 *
 * Search, every candidate run as a whole pipeline through sim_evaluate_run
 * (and cached by schedule and actions, so a plan met twice runs once).
 * A type takes a stage's layers in its own order: model order for the
 * types that copy (offload, selective+offload: an earlier layer's copies
 * have longer to hide), the most bytes freed per second of recompute first
 * for the others, model order among equals (so that on equal layers every
 * type takes a prefix in model order, the first chunk's layers first).
 * For each copy schedule (planner_plan_options, or a framework's own):
 *
 *   1. from all keep, while some stage is over the budget: for each such
 *      stage and each action type (offload, recompute, recompute+offload,
 *      and selective, selective+offload when the workload has selective
 *      tensors), the fewest of its layers that bring the stage within the
 *      budget, by bisection; each stage takes the type of least step
 *      (measured with the other stages as they were: a stage's memory
 *      hardly depends on them), or, when none fits, the one that lowers
 *      its peak most; the stages' moves are applied together and the
 *      round repeats until every stage fits or none changes (nothing
 *      fits);
 *   2. coordinate descent, stage by stage: every type on every count of
 *      layers at least the fewest that fits (past PLANNER_LOCAL_LAYERS
 *      layers the fewest, then more while the step falls); the best
 *      candidate taken when every stage fits and the step falls; until a
 *      round changes nothing.
 *
 * Then, from the best schedule's plan: step 2 again with two types on
 * stages of at most PLANNER_STAGES_MIX_LAYERS layers (`a` on its first j
 * layers, the fewest of `b` after them that fit), and up to
 * PLANNER_LOCAL_LAYERS layers one layer's action at a time (what a prefix
 * cannot say: a small layer kept among recomputed ones) and, when that is
 * stuck, two layers' at once on stages of at most PLANNER_STAGES_PAIR_LAYERS
 * (a swap), each round until nothing improves.  A stage that keeps everything and fits is left alone
 * (anything else there only adds work to it), and a plan whose step is all
 * keep's ends the search (none is faster).
 *
 * Cost, in runs of the pipeline: a round of step 1 is stages × types ×
 * log2(layers per stage); a round of step 2 types × (layers + stages),
 * types × stages × log past PLANNER_LOCAL_LAYERS; the mixes types² ×
 * layers per stage × log per stage; a round of one-layer moves layers ×
 * types, of two-layer moves layers per stage² × types² per stage.
 *
 * Bound: resident's step.  A plan's program is resident's with ops and
 * waits added (copies, host allocations, recomputes), every op's work as in
 * resident; in resident nothing is shared (no copies: compute runs at full
 * rate, and sends use no shared resource), so no op ends earlier under any
 * plan and no plan is faster.  It is not proven tight: `proven` and
 * `optimal` are FALSE, `resident_bound` TRUE.  What is not searched: more
 * than two types on a stage but through one-layer moves, and the exact
 * search's model (planner/exact.h), which is one GPU's step.
 */
#pragma once

#include "planner/plan.h"

G_BEGIN_DECLS

/* Stages of at most this many layers also try two types (quadratic in the
 * stage's layers, times log). */
#define PLANNER_STAGES_MIX_LAYERS 16
/* ... and, when one-layer moves are stuck, changes of two layers at once
 * (quadratic in the stage's layers, times types²). */
#define PLANNER_STAGES_PAIR_LAYERS 8

/* Plans the pipeline `scenario` (sim_parallel_active) under `budget` bytes
 * on every GPU, with `framework`'s schedule for offloaded layers
 * (SIM_FRAMEWORK_NONE: planner_plan_options' schedules).  planner_plan and
 * planner_plan_framework call it for such a scenario.  The plan's `stages`
 * says, per stage, its layers and peaks; its notes are the caller's
 * (planner_plan_annotate).  NULL with `error` set on failure. */
PlannerPlan *planner_plan_stages(const SimScenario *scenario, guint64 budget, SimFramework framework,
                                 GError **error);

G_END_DECLS
