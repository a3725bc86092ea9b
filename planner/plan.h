/* planner/plan.h — the hybrid planner: per layer keep, offload or recompute
 * (and, for generated transformers, selective recompute alone or with
 * offload), plus the copy schedule, for the least simulated step time with
 * the peak device memory within a budget.
 *
 * The simulator is in the loop: every candidate is lowered and run, so the
 * plan's figures are the engine's, not a model's.  Two bounds prune it:
 *
 *   memory  at the end of the forward pass every kept layer's tensors, every
 *           checkpointed input and the loss head are live at once, so
 *           static + those is a lower bound on any completion's peak;
 *   time    forward + backward compute, plus the recompute already chosen,
 *           is a lower bound on any completion's step.
 *
 * Search:
 *   - up to PLANNER_EXACT_LAYERS_ALL layers: depth-first branch and bound
 *     over keep / offload / recompute / recompute+offload for every
 *     schedule option; the result is the best of all 4^L plans of those
 *     options (tests enumerate them);
 *   - up to PLANNER_EXACT_LAYERS: the same over keep / offload / recompute
 *     (3^L plans, the cost of 4^8), then local search adds
 *     recompute+offload;
 *   - where the exact search proves (planner/exact.h: the planner's own
 *     schedules, layers of one op each way) both run only when the search
 *     below and the proof leave a gap: the proof needs tens of engine runs
 *     where branch and bound needs thousands, and when it closes the plan
 *     is the same optimum (a tie may pick another plan of the same step);
 *     and a whole plan goes to the engine only when the model (exact, or a
 *     relaxation never above the engine) says it may beat the best;
 *   - more layers: seeded with every fixed policy (resident, async on all
 *     and on the first N, sync, full and selective checkpointing, every-k
 *     checkpointing), then improved by local search (one layer's action at
 *     a time, first improvement) until nothing improves.  It never
 *     returns worse than a fixed policy that fits.
 *   - past PLANNER_LOCAL_LAYERS layers the local search (layers x layers
 *     evaluations) is replaced by prefix plans, "the first m layers
 *     offload / recompute / recompute+offload", m found by bisection for
 *     each schedule: O(log L) evaluations of O(L) each;
 *   - generated transformers add selective and selective+offload moves;
 *     they run op by op, where the exact search's model is close to the
 *     engine but not its arithmetic: nothing is proven there, none of the
 *     exhaustive searches above runs (4^L engine runs), and the model's
 *     plans (each exact schedule's least below the model's figure for the
 *     plan held, a beam of PLANNER_BEAM_OPS under prefetch 2) are
 *     suggestions the engine judges (docs/planner.md, "Op by op");
 *   - local search runs a move through the engine only when the exact
 *     search's model says it may pay (its change of step and peak, widened
 *     by the largest error it made on a move so far), wherever the model
 *     applies.
 *
 * Schedule options tried: async with prefetch 1 and 2 (inflight 2), async
 * with inflight 1, and sync.
 *
 * A pipeline (an active [parallel]) is planned per stage under the same
 * budget on every GPU by planner/stages.h instead: none of the searches and
 * bounds here, whose model is one GPU's step, runs then.
 *
 * The reported lower bound is analytical: compute time, raised when the
 * bytes that must leave the peak cannot all cross the link within the step
 * and the rest must be recomputed at the cheapest bytes-per-second rate (a
 * fractional relaxation).  gap = step / bound - 1.
 */
#pragma once

#include "engine/engine.h"
#include "input/scenario.h"
#include "result/result.h"

G_BEGIN_DECLS

#define PLANNER_EXACT_LAYERS 10
#define PLANNER_EXACT_LAYERS_ALL 8
/* Past this many layers no one-layer local search (layers x layers
 * evaluations): prefix plans found by bisection instead. */
#define PLANNER_LOCAL_LAYERS 256
/* Up to this many layers the exact search (planner/exact.h) proves the
 * plan: the lower bound is the least step any plan of the search space
 * can have. */
#define PLANNER_PROVEN_LAYERS 96
/* Times a plan is searched again under a smaller budget when what the
 * caching allocator reserves for it passes the budget given. */
#define PLANNER_RESERVE_ROUNDS 4
/* A plan within this of its proven bound is optimal (the model and the
 * engine agree to about 1e-15; this is their rounding, not a tolerance). */
#define PLANNER_OPTIMAL_GAP 1e-9
/* States per key the beam keeps before the exact search (planner/exact.h). */
#define PLANNER_BEAM 256
/* ... and past PLANNER_PROVEN_LAYERS on layers of one op each way (op by
 * op the suggestions of plan.c run at any size), where it is the only search: as
 * wide as PLANNER_BEAM_STATES / layers allows (a constant cost, about a
 * second on this 2-core machine, whatever the layers: 2,111 states per
 * key at 97 layers, 1,024 at 200, 204 at 1,000), never narrower than
 * PLANNER_BEAM_LARGE.  Measured with bench/plan_random.py (seeds 1 and 2,
 * slowdown 0.03, budgets 30 and 60 %): at 97 layers a width of 8 left the
 * plans 3.7 - 8.2 % above the bound, 1,024 found the proven optimum (the
 * exact search run at 97 layers) on all four. */
#define PLANNER_BEAM_LARGE 8
/* On a workload run op by op, the beam a relaxed schedule (prefetch 2) is
 * searched with (plan.c's suggest: nothing is proven there).  Measured
 * over 45 plans (the bundled Llama-3.1-8B, its GH200 variant, GPT-3 175B,
 * Qwen2.5-0.5B and its op-by-op step, budgets at a tenth to nine tenths
 * of the way from the least to the largest policy's peak): 32 found the
 * same plans as 64 and the whole search; 16 missed one by 0.54 %.  On
 * the bench's 96 layers the whole search costs about twice the plan. */
#define PLANNER_BEAM_OPS 32
#define PLANNER_BEAM_STATES 204800

/* A copy schedule the planner tries for offloaded layers. */
typedef struct {
  gboolean async;
  guint prefetch;
  guint inflight;
} PlannerOption;

/* The schedules tried, in order; *n receives their count. */
const PlannerOption *planner_plan_options(guint *n);

typedef struct {
  SimAction action;
  guint64 bytes_saved;          /* peak bytes this layer's action removes versus keep */
  double exposed_if_offloaded_ms; /* step change if this layer alone were offloaded */
  double recompute_ms;          /* full recompute of this layer */
} PlannerLayerNote;

/* One pipeline stage of a plan (planner/stages.h). */
typedef struct {
  guint stage;
  GArray *layers;            /* guint: its layers in model order (all its chunks' with virtual > 1) */
  gint64 peak_device_bytes;  /* the plan's run, the worst of the stage's replicas */
  gint64 peak_host_bytes;
} PlannerStage;

/* A plan is judged by the time it adds relative to resident's step, not by
 * the ledger's absolute 60 and 120 ms (`offsim budget`, whose ledger they
 * define): 5 ms is a tenth of a 50 ms step and nothing beside a 5 s one, and
 * the same plan must not change verdicts as a model grows layers.  The
 * reference is full activation checkpointing, the fallback every framework
 * offers, which fits almost any budget for one more forward pass per step:
 * with a backward twice the forward, a third of the step's compute (what
 * Korthikanti et al. 2022 measure for GPT models: 33 - 36 %).  A plan that
 * adds more than that is worse than the fallback: reject.  Up to half of it
 * it is accepted, and between the two it is worth tuning (a faster link,
 * selective recomputation), as the ledger's tune allows twice its accept.
 * The removed fraction is the budget's, not the plan's, so it is not judged. */
#define PLANNER_PLAN_TUNE_INCREASE (1.0 / 3.0)
#define PLANNER_PLAN_ACCEPT_INCREASE (PLANNER_PLAN_TUNE_INCREASE / 2)

typedef struct {
  gboolean feasible;
  SimPolicy *policy;         /* kind = plan: actions, mode, prefetch, inflight */
  SimResult *result;         /* the plan's figures (or the smallest-peak plan's, when infeasible);
                                may be stolen by the caller */
  SimResult *resident;       /* resident's figures, for the verdict */
  double lower_bound_ms;
  double gap;                /* step / lower bound - 1 */
  gboolean proven;           /* the bound is the exact search's: no plan of the space is faster */
  gboolean optimal;          /* proven, and the plan reaches it */
  gboolean lagrangian;       /* not proven: the bound is the exact search's Lagrangian relaxation (past
                                PLANNER_PROVEN_LAYERS layers) */
  guint64 states;            /* states the exact search kept */
  gboolean infeasible_proven; /* nothing fits, and the exact search (which looked everywhere) says so */
  guint64 min_budget;        /* when infeasible: the smallest peak any plan found reaches */
  const char *verdict;       /* accept | tune | reject: the step it adds to resident's, relative (below) */
  char *verdict_reason;
  GArray *notes;             /* PlannerLayerNote per layer */
  guint64 evaluations;       /* simulations run */
  /* A pipeline's plan (planner/stages.h), else NULL and FALSE: */
  GArray *stages;            /* PlannerStage per stage, of the plan's run */
  gboolean resident_bound;   /* the bound is resident's step: no plan is faster, nothing is proven */
} PlannerPlan;

void planner_plan_free(PlannerPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlannerPlan, planner_plan_free)

/* Plans `scenario` under `budget` bytes of device memory (on every GPU, for
 * a pipeline). */
PlannerPlan *planner_plan(const SimScenario *scenario, guint64 budget, GError **error);

/* The search alone: the plan whose allocated peak (what the engine's
 * programs count) fits `budget`, its result judged against `budget`.
 * planner_plan_framework searches again when the caching allocator's
 * reserved bytes do not fit. */
PlannerPlan *planner_plan_allocated(const SimScenario *scenario, guint64 budget, SimFramework framework,
                                    GError **error);

/* The same with `framework`'s schedule (sim/model/framework.h) for every
 * offloaded layer, the one schedule tried (SIM_FRAMEWORK_NONE: the
 * options above); the plan's policy says `framework = NAME`. */
PlannerPlan *planner_plan_framework(const SimScenario *scenario, guint64 budget, SimFramework framework,
                                    GError **error);

/* "[policy.plan]\nkind = plan\nactions = ...\n...": pasteable into a scenario. */
char *planner_plan_format_policy(const SimPolicy *policy);

G_END_DECLS
