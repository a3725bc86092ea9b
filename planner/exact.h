/* planner/exact.h — the planner's exact search: a dynamic program over the
 * layers on a model of the step that is the engine's own arithmetic for the
 * programs the planner lowers.
 *
 * Why a model and not the engine: the engine runs one whole plan; a search
 * that proves optimality must compare partial plans, and two partial plans
 * that leave the streams in the same state have the same futures.  The
 * model says what that state is.  For a plan under the planner's policy
 * (pinned = pooled, scope = layers, one copy per storage, free at copy end,
 * no framework) and a schedule, layer by layer in the order of the
 * forward pass:
 *
 *   forward   layer i starts when the compute stream is free and, async,
 *             when the offload of layer i - inflight is done; it runs its
 *             forward time at rate 1, or 1 - compute_slowdown while a copy
 *             is in flight; its copies start when it ends and the d2h
 *             engine is free.  State after layer i: when the d2h engine
 *             frees (relative to the compute stream), when layer i - 1's
 *             copies end, the bytes kept so far (P).  Peaks are at op
 *             starts: P + what the layer allocates + the bytes of layer
 *             i - 1 whose copies have not ended.
 *   backward  with prefetch 1 the reload of layer i - 1 starts when the
 *             backward of layer i starts, on an idle h2d engine, its
 *             offload long done: the time from the start of layer i's
 *             backward to the start of layer i - 1's, and the peak between
 *             (over P_{i-1}), depend on the two layers' actions only.  So
 *             they are added as the forward goes up: the step is the
 *             forward's time plus these, plus the top.
 *   top       the head, the reloads at the forward/backward boundary and the
 *             backward of the last two layers, whose reloads may wait for
 *             offloads still running: simulated from the state, exactly.
 *   sync      every copy on the compute stream: all of it per layer.
 *
 * A state is dominated by another with the same action on its layer, no
 * more cost (time so far), no later d2h, no more bytes kept; every future
 * is monotone in those, so dropping dominated states keeps the optimum.
 * The d2h and h2d engines never move bytes at once in these programs (the
 * first reload waits for the last offload), so bidir_bandwidth never binds.
 *
 * Exact for async prefetch 1 (inflight 1 or 2) and sync: the model's step
 * and peak are the engine's (tests/test_exact.c checks thousands of random
 * plans; the step to 1e-9, the peak to the byte).  Prefetch 2 couples the
 * backward of layer i to reloads issued two layers up, a state that comes
 * from above: there the model is a relaxation (a lower bound): its reloads
 * of layer i - 2 cost no memory until layer i - 1's backward starts and,
 * with compute_slowdown, its backward compute runs at full rate.
 *
 * Cost: layers x states x actions, O(log states) each (a radix sort and
 * Fenwick trees), states bounded by dominance and a Lagrangian bound on the
 * rest (planner/exact.c, docs/planner.md): 0.3 - 2.1 million over the
 * four schedules on random models of 96 unequal layers; no engine call.
 */
#pragma once

#include "planner/plan.h"

G_BEGIN_DECLS

typedef struct PlannerExact PlannerExact;

/* Whether `policy` lowers as the model assumes (the planner's own
 * policy: no framework, pooled pinning, layers only, ...). */
gboolean planner_exact_supports(const SimPolicy *policy);

/* The model of `scenario` under `policy` (planner_exact_supports), for
 * the first `n_actions` actions (SIM_ACTION_N_PLAIN or SIM_ACTION_COUNT).
 * The caller's; `scenario` must outlive it. */
PlannerExact *planner_exact_new(const SimScenario *scenario, const SimPolicy *policy, guint n_actions);
void planner_exact_free(PlannerExact *exact);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlannerExact, planner_exact_free)

/* TRUE when the model's figures are the engine's for schedule `o`; FALSE
 * when they are a lower bound on them (prefetch > 1). */
gboolean planner_exact_is_exact(const PlannerExact *exact, const PlannerOption *o);

/* The model's step (seconds) and peak device bytes of `actions` (one per
 * layer, lowered as the lowering would) under `o`. */
void planner_exact_eval(const PlannerExact *exact, const PlannerOption *o, const SimAction *actions, double *step,
                        gint64 *peak);

typedef struct {
  guint64 states; /* states kept, over all layers */
} PlannerExactStats;

/* The least model step within `budget` bytes over every plan under `o`,
 * looking only below `cutoff` seconds.  Returns TRUE with the plan in
 * actions[0..layers) and its model step in *step; FALSE when every plan
 * under `o` needs cutoff or more, or none fits.
 *
 * `beam` > 0 makes it a heuristic: after each layer at most `beam` states
 * per key stay, those whose cost plus the bound on the rest is least.  It
 * proves nothing, but finds a good plan in layers x beam steps: the cutoff
 * the exact search (beam 0) then prunes with. */
gboolean planner_exact_solve(const PlannerExact *exact, const PlannerOption *o, guint64 budget, double cutoff,
                             guint beam, SimAction *actions, double *step, PlannerExactStats *stats);

/* A lower bound on the step of every plan under `o` within `budget`, in
 * time linear in the layers: the Lagrangian bound the search prunes with,
 * at its root.  For models too large to search. */
double planner_exact_bound(const PlannerExact *exact, const PlannerOption *o, guint64 budget);

G_END_DECLS
