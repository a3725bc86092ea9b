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
 * Which search runs is chosen by the pipeline's slices, layers ×
 * micro-batches (a run costs about that many): up to
 * PLANNER_STAGES_LOCKSTEP_SLICES the thorough search, past it the lockstep
 * search.
 *
 * The thorough search.  For each copy schedule (planner_plan_options, or a
 * framework's own):
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
 *      layers at least the fewest that fits; the best candidate taken when
 *      every stage fits and the step falls; until a round changes nothing.
 *
 * Then, from the best schedule's plan: step 2 again with two types on
 * stages of at most PLANNER_STAGES_MIX_LAYERS layers (`a` on its first j
 * layers, the fewest of `b` after them that fit), and one layer's action
 * at a time (what a prefix cannot say: a small layer kept among recomputed
 * ones) and, when that is stuck, two layers' at once on stages of at most
 * PLANNER_STAGES_PAIR_LAYERS (a swap), each round until nothing improves.
 * A stage that keeps everything and fits is left alone (anything else
 * there only adds work to it), and a plan whose step is all keep's ends
 * the search (none is faster).
 *
 * Cost, in runs of the pipeline: a round of step 1 is stages × types ×
 * log2(layers per stage); a round of step 2 types × (layers + stages); the
 * mixes types² × layers per stage × log per stage; a round of one-layer
 * moves layers × types, of two-layer moves layers per stage² × types² per
 * stage.  Each run costs the slices: quadratic in the layers, hence the
 * bound on the slices.
 *
 * The lockstep search.  A stage's peak hardly depends on the other stages'
 * actions (they reach it only through the sends' times), so one run sizes
 * every stage at once: each stage probes its own count and reads its own
 * peak.  The runs go to a proxy, the same pipeline with as many
 * micro-batches as its schedule keeps in flight on the first stage and one
 * more (1F1B: pp + 1; interleaved: (virtual + 1) × pp; GPipe, which holds
 * every micro-batch, has none), where every stage holds what it holds in
 * the step.  For each schedule: from all keep, for each type, every stage
 * over the budget finds its fewest layers of that type that fit, from a
 * guess (the layers' bytes against the stage's peak over static; past the
 * first schedule, the previous schedule's sizes and only the types the
 * plan so far takes), its neighbour, then bisection, all stages in the
 * same runs; one plan per type, each stage at that type's fewest (where
 * the type cannot fit, the next type in the order of those plans' steps);
 * the fastest that fits.  Then, from the best schedule's plan, coordinate
 * descent: each stage in turn takes each other type at its fewest, the
 * faster taken, until a round changes nothing.  The plan found then runs on
 * the scenario itself; stages over the budget there (copies that lag over
 * the longer step) are sized again in lockstep on the scenario, up to
 * PLANNER_STAGES_REPAIR_ROUNDS rounds, and if some stage still does not fit
 * the whole lockstep search runs again on the scenario itself.  No
 * one-layer moves, no two types on a stage: plans are prefixes.  Cost:
 * about 1 + 3 × types + types runs of the proxy for the first schedule,
 * 4 per further one, types × stages per round of descent, a few runs of
 * the step: 62 runs (two searches: the reserved-bytes round of plan.h)
 * for 126 layers, pp 16, 64 micro-batches, against the thorough search's
 * thousands.  The plan's figures are always a full run's.
 *
 * Bound: resident's step.  A plan's program is resident's with ops and
 * waits added (copies, host allocations, recomputes), every op's work as in
 * resident; in resident nothing is shared (no copies: compute runs at full
 * rate, and sends use no shared resource), so no op ends earlier under any
 * plan and no plan is faster.  It is not proven tight: `proven` and
 * `optimal` are FALSE, `resident_bound` TRUE.  What is not searched: more
 * than two types on a stage but through one-layer moves (none in
 * lockstep), and the exact search's model (planner/exact.h), which is one
 * GPU's step.
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
/* Pipelines of more slices (layers × micro-batches) than this are searched
 * in lockstep: each run sizes every stage at once. */
#define PLANNER_STAGES_LOCKSTEP_SLICES 256
/* Rounds of sizing again the stages a lockstep plan leaves over the budget
 * in the scenario's own run. */
#define PLANNER_STAGES_REPAIR_ROUNDS 4

/* Plans the pipeline `scenario` (sim_parallel_active) under `budget` bytes
 * on every GPU, with `framework`'s schedule for offloaded layers
 * (SIM_FRAMEWORK_NONE: planner_plan_options' schedules).  planner_plan and
 * planner_plan_framework call it for such a scenario.  The plan's `stages`
 * says, per stage, its layers and peaks; its notes are the caller's
 * (planner_plan_annotate).  NULL with `error` set on failure. */
PlannerPlan *planner_plan_stages(const SimScenario *scenario, guint64 budget, SimFramework framework,
                                 GError **error);

G_END_DECLS
