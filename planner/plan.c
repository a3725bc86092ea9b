#include "planner/plan.h"

#include "base/error.h"
#include "base/units.h"
#include "ledger/ledger.h"
#include "planner/exact.h"
#include "planner/internal/plan_private.h"
#include "planner/stages.h"
#include "result/evaluate.h"

#include "lower/lower.h"
#include "model/framework.h"

#include <math.h>
#include <string.h>

typedef PlannerOption Option;

typedef PlannerLayerCost LayerCost;

typedef struct {
  double step;
  gint64 peak;
} Eval;

typedef struct {
  const SimScenario *s;
  guint n;
  guint64 budget;
  SimEvaluator *evaluator;
  SimPolicy *policy; /* scratch: kind = plan, actions rewritten per evaluation */
  LayerCost *cost;
  guint64 base_bytes; /* static + embedding and head, live at the end of the forward pass */
  double compute;     /* forward + backward of everything, seconds */
  guint n_actions;    /* SIM_ACTION_N_PLAIN, or SIM_ACTION_COUNT when the workload has selective tensors */
  guint64 evaluations;
  const Option *opts; /* the schedules tried: `options`, or a framework's own */
  guint n_opts;
  /* The exact search's model of the step (planner/exact.h), NULL where it
   * does not apply: local search runs through the engine only the moves it
   * predicts may pay (screen_passes). */
  const PlannerExact *model;
  gboolean per_op;   /* the workload runs op by op (sim_workload_has_ops): the model is not the engine */
  double miss_step;  /* the largest |engine - model| change of step seen on a move, seconds */
  gint64 miss_peak;  /* ... of peak, bytes */
} Ctx;

static gboolean
evaluate(Ctx *c, const SimAction *actions, const Option *o, Eval *out, GError **error)
{
  g_autoptr(SimRun) run = planner_plan_run(c->evaluator, c->s, c->policy, actions, o, &c->evaluations, error);
  if (run == NULL)
    return FALSE;
  out->step = run->step;
  out->peak = run->peak[SIM_POOL_DEVICE].bytes;
  return TRUE;
}

static void
layer_costs(Ctx *c)
{
  const SimWorkload *w = c->s->workload;
  gboolean any_selective = FALSE;
  c->cost = g_new0(LayerCost, c->n);
  for (guint i = 0; i < c->n; i++) {
    const SimLayer *layer = sim_workload_layer(w, i);
    any_selective |= planner_plan_layer_cost(layer, &c->cost[i]);
    /* And the tensor-parallel collectives compute waits for: at least
     * their time past what they run beside, whatever slows either. */
    double comm_f, comm_b;
    sim_lower_layer_comm(layer, &c->s->machine.link, w->tp, w->ep, &comm_f, &comm_b);
    c->compute += layer->forward + layer->backward + comm_f + comm_b;
  }
  /* The optimizer step closes every step. */
  c->compute += sim_lower_optimizer_whole(w).seconds;
  c->n_actions = any_selective ? SIM_ACTION_COUNT : SIM_ACTION_N_PLAIN;
  c->base_bytes = w->static_bytes;
  for (const SimLayer *stage = w->embed;; stage = w->head) {
    if (stage) {
      c->base_bytes += sim_layer_saved_bytes(stage);
      c->compute += stage->forward + stage->backward;
    }
    if (stage == w->head)
      break;
  }
  /* While the head runs, forward or backward, with the outputs a caller keeps. */
  if (w->head)
    c->base_bytes += MAX(w->head->workspace_bytes, w->head->backward_workspace_bytes) + w->held_bytes;
}

/* The bounds for actions[0..assigned), the rest at their cheapest. */
static void
bounds(const Ctx *c, const SimAction *actions, guint assigned, guint64 *mem, double *time)
{
  guint64 m = c->base_bytes;
  double t = c->compute;
  for (guint i = 0; i < c->n; i++) {
    const LayerCost *lc = &c->cost[i];
    if (i < assigned) {
      m += lc->keep[actions[i]];
      t += lc->redo[actions[i]];
    } else {
      guint64 least = lc->keep[SIM_ACTION_KEEP];
      for (guint a = 1; a < c->n_actions; a++)
        if (lc->useful[a])
          least = MIN(least, lc->keep[a]);
      m += least;
    }
  }
  *mem = m;
  *time = t;
}

typedef struct {
  SimAction *actions;
  guint option;
  Eval eval;
  gboolean found;
} Best;

static void
best_take(Best *b, const Ctx *c, const SimAction *actions, guint option, const Eval *e)
{
  memcpy(b->actions, actions, sizeof(SimAction) * c->n);
  b->option = option;
  b->eval = *e;
  b->found = TRUE;
}

/* Minimising step within the budget; `by_peak` minimises the peak instead
 * (for the smallest feasible budget). */
static gboolean
better(const Best *b, const Eval *e, gboolean by_peak)
{
  if (!b->found)
    return TRUE;
  if (by_peak)
    return e->peak < b->eval.peak || (e->peak == b->eval.peak && e->step < b->eval.step);
  return e->step < b->eval.step;
}

/* `actions` under schedule o through the engine, into `best` when it fits
 * (or, by_peak, always) and is better. */
static gboolean
consider(Ctx *c, Best *best, const SimAction *actions, guint o, gboolean by_peak, GError **error)
{
  Eval e;
  if (!evaluate(c, actions, &c->opts[o], &e, error))
    return FALSE;
  if ((by_peak || (guint64)e.peak <= c->budget) && better(best, &e, by_peak))
    best_take(best, c, actions, o, &e);
  return TRUE;
}

/* The exact search's model's step and peak of `actions` under schedule o
 * (c->model must be set). */
static Eval
model_eval(const Ctx *c, guint o, const SimAction *actions)
{
  Eval m;
  planner_exact_eval(c->model, &c->opts[o], actions, &m.step, &m.peak);
  return m;
}

/* Whether a whole plan of the exhaustive search may beat `best` under
 * schedule o: where the model is the engine's arithmetic or a relaxation
 * of it (never above it: planner/exact.h), a plan whose model step is no
 * less than the best's, or whose model peak is over the budget, cannot,
 * and the engine is spared.  On layers of one op each way that leaves the
 * engine the plans the proof could not rule out. */
static gboolean
leaf_may_pay(const Ctx *c, const Best *best, const SimAction *actions, guint o, gboolean by_peak)
{
  if (c->model == NULL || c->per_op)
    return TRUE;
  Eval m = model_eval(c, o, actions);
  if (by_peak)
    return !best->found || m.peak <= best->eval.peak;
  /* Within PLANNER_OPTIMAL_GAP a tie goes to the engine: the model agrees to rounding, not to the bit. */
  return (guint64)m.peak <= c->budget && (!best->found || m.step < best->eval.step * (1 + PLANNER_OPTIMAL_GAP));
}

typedef struct {
  Ctx *c;
  SimAction *actions;
  guint option;
  gboolean by_peak;
  Best *best;
  GError **error;
  gboolean failed;
} Dfs;

static void
dfs(Dfs *d, guint layer)
{
  Ctx *c = d->c;
  guint64 mem;
  double time;
  if (d->failed)
    return;
  bounds(c, d->actions, layer, &mem, &time);
  if (d->by_peak ? d->best->found && (gint64)mem > d->best->eval.peak
                 : mem > c->budget || (d->best->found && time >= d->best->eval.step))
    return;
  if (layer == c->n) {
    if (!leaf_may_pay(c, d->best, d->actions, d->option, d->by_peak))
      return;
    d->failed = !consider(c, d->best, d->actions, d->option, d->by_peak, d->error);
    return;
  }
  /* The exhaustive space: every plain action (4^L plans) up to
   * PLANNER_EXACT_LAYERS_ALL layers, keep / offload / recompute (3^L)
   * beyond. */
  guint n_exact = c->n <= PLANNER_EXACT_LAYERS_ALL ? SIM_ACTION_N_PLAIN : SIM_ACTION_RECOMPUTE + 1;
  for (guint a = 0; a < n_exact; a++) {
    if (!c->cost[layer].useful[a])
      continue;
    d->actions[layer] = (SimAction)a;
    dfs(d, layer + 1);
  }
}

/* Whether a move whose model figures are `trial`, from a plan whose model
 * figures are `now`, may beat the plan b holds: the model's change of step
 * and of peak, widened by the largest error the model has made on a change
 * so far, added to b's engine figures.  Where the model is the engine's
 * arithmetic (planner/exact.h) the errors stay at rounding and the screen
 * drops exactly the moves that cannot pay; where it is not (prefetch 2, a
 * workload run op by op), the errors grow as moves are run, and the last
 * sweep of a search, which changes nothing, screens with the widest. */
static gboolean
screen_passes(const Ctx *c, const Best *b, const Eval *now, const Eval *trial, gboolean by_peak)
{
  gint64 peak = b->eval.peak + (trial->peak - now->peak) - c->miss_peak;
  if (by_peak)
    return peak <= b->eval.peak;
  return peak <= (gint64)c->budget && trial->step - now->step - c->miss_step < 0;
}

/* What the engine said of a move against what the model predicted. */
static void
screen_learn(Ctx *c, const Best *b, const Eval *now, const Eval *trial, const Eval *e)
{
  double step = fabs((e->step - b->eval.step) - (trial->step - now->step));
  gint64 peak = ABS((e->peak - b->eval.peak) - (trial->peak - now->peak));
  c->miss_step = MAX(c->miss_step, step);
  c->miss_peak = MAX(c->miss_peak, peak);
}

/* One layer's action at a time, first improvement, until a sweep changes
 * nothing.  Starts from `b` and improves it in place.  With a model, a
 * move runs through the engine only when the model's screen passes it:
 * at 96 layers run op by op that is about one move in fourteen. */
static gboolean
local_search(Ctx *c, Best *b, gboolean by_peak, GError **error)
{
  g_autofree SimAction *trial = g_new(SimAction, c->n);
  gboolean changed = TRUE;
  Eval now = { 0 }, predicted = { 0 };
  if (c->model)
    now = model_eval(c, b->option, b->actions);
  while (changed) {
    changed = FALSE;
    for (guint i = 0; i < c->n; i++) {
      for (guint a = 0; a < c->n_actions; a++) {
        if (a == (guint)b->actions[i] || !c->cost[i].useful[a])
          continue;
        memcpy(trial, b->actions, sizeof(SimAction) * c->n);
        trial[i] = (SimAction)a;
        guint64 mem;
        double time;
        bounds(c, trial, c->n, &mem, &time);
        if (by_peak ? (gint64)mem > b->eval.peak : mem > c->budget || time >= b->eval.step)
          continue;
        if (c->model) {
          predicted = model_eval(c, b->option, trial);
          if (!screen_passes(c, b, &now, &predicted, by_peak))
            continue;
        }
        Eval e;
        if (!evaluate(c, trial, &c->opts[b->option], &e, error))
          return FALSE;
        if (c->model)
          screen_learn(c, b, &now, &predicted, &e);
        if ((by_peak || (guint64)e.peak <= c->budget) && better(b, &e, by_peak)) {
          best_take(b, c, trial, b->option, &e);
          now = predicted;
          changed = TRUE;
        }
      }
    }
  }
  return TRUE;
}

/* Every fixed policy as a plan: the search starts from all of them. */
static GPtrArray *
seeds(const Ctx *c)
{
  GPtrArray *list = g_ptr_array_new_with_free_func(g_free);
  guint n = c->n;
  for (guint k = 0; k < c->n_actions; k++) {
    SimAction *a = g_new(SimAction, n);
    for (guint i = 0; i < n; i++)
      a[i] = (SimAction)k; /* every action, uniform */
    g_ptr_array_add(list, a);
  }
  /* Offload (or selective+offload) the first m layers, m = 1, 2, 4, ...,
   * and n - 1 (verl's keep_last = 1); checkpoint every k-th layer. */
  for (guint m = 1; m < n; m = m * 2 < n - 1 || m == n - 1 ? m * 2 : n - 1) {
    for (guint k = 0; k < (c->n_actions > SIM_ACTION_N_PLAIN ? 2u : 1u); k++) {
      SimAction *a = g_new(SimAction, n);
      for (guint i = 0; i < n; i++)
        a[i] = i < m ? (k ? SIM_ACTION_SELECTIVE_OFFLOAD : SIM_ACTION_OFFLOAD) : (k ? SIM_ACTION_SELECTIVE : SIM_ACTION_KEEP);
      g_ptr_array_add(list, a);
    }
  }
  for (guint every = 2; every <= 4 && every < n; every++) {
    SimAction *a = g_new(SimAction, n);
    for (guint i = 0; i < n; i++)
      a[i] = i % every == 0 ? SIM_ACTION_RECOMPUTE : SIM_ACTION_KEEP;
    g_ptr_array_add(list, a);
  }
  return list;
}

/* The plan "the first m layers take action a, the rest keep". */
static void
prefix_plan(const Ctx *c, SimAction a, guint m, SimAction *out)
{
  for (guint i = 0; i < c->n; i++)
    out[i] = i < m ? a : SIM_ACTION_KEEP;
}

/* For each plain action, the smallest m whose prefix plan fits the budget
 * (the peak falls as m grows, so bisection; by peak: m = L), evaluated
 * under schedule `o` into `b`. */
static gboolean
bisect_prefixes(Ctx *c, Best *b, guint o, gboolean by_peak, GError **error)
{
  g_autofree SimAction *trial = g_new(SimAction, c->n);
  for (guint a = SIM_ACTION_OFFLOAD; a < SIM_ACTION_N_PLAIN; a++) {
    guint lo = 1, hi = c->n;
    if (!by_peak) {
      while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        prefix_plan(c, (SimAction)a, mid, trial);
        Eval e;
        if (!evaluate(c, trial, &c->opts[o], &e, error))
          return FALSE;
        if ((guint64)e.peak <= c->budget)
          hi = mid;
        else
          lo = mid + 1;
      }
    } else {
      lo = c->n;
    }
    prefix_plan(c, (SimAction)a, lo, trial);
    if (!consider(c, b, trial, o, by_peak, error))
      return FALSE;
  }
  return TRUE;
}

/* The exhaustive space (up to PLANNER_EXACT_LAYERS layers): every plan
 * of it through the engine, pruned by the bounds. */
static gboolean
search_exhaustive(Ctx *c, Best *best, gboolean by_peak, GError **error)
{
  {
    g_autofree SimAction *actions = g_new0(SimAction, c->n);
    for (guint o = 0; o < c->n_opts; o++) {
      Dfs d = { c, actions, o, by_peak, best, error, FALSE };
      dfs(&d, 0);
      if (d.failed)
        return FALSE;
    }
    /* Selective moves, and recompute+offload past PLANNER_EXACT_LAYERS_ALL,
     * go beyond the exhaustive space: they can only improve it. */
    gboolean beyond = c->n_actions > SIM_ACTION_N_PLAIN || c->n > PLANNER_EXACT_LAYERS_ALL;
    return !best->found || !beyond || local_search(c, best, by_peak, error);
  }
}

/* Seeds, then local search (or prefix bisection past
 * PLANNER_LOCAL_LAYERS): a few engine runs per layer, no guarantee. */
static gboolean
search_heuristic(Ctx *c, Best *best, gboolean by_peak, GError **error)
{
  /* Seeds under every option; then local search from the best two. */
  g_autoptr(GPtrArray) list = seeds(c);
  g_autofree Best *per_option = g_new(Best, c->n_opts);
  g_autofree SimAction *storage = g_new0(SimAction, c->n * c->n_opts);
  for (guint o = 0; o < c->n_opts; o++) {
    per_option[o] = (Best){ storage + o * c->n, o, { 0, 0 }, FALSE };
    for (guint k = 0; k < list->len; k++) {
      const SimAction *a = g_ptr_array_index(list, k);
      guint64 mem;
      double time;
      bounds(c, a, c->n, &mem, &time);
      if (!by_peak && mem > c->budget)
        continue;
      if (!consider(c, &per_option[o], a, o, by_peak, error))
        return FALSE;
    }
  }
  /* Past PLANNER_LOCAL_LAYERS a sweep of one-layer moves costs layers x
   * layers: instead, for each schedule and plain action, the fewest first
   * layers that take it and fit, found by bisection (log L evaluations). */
  if (c->n > PLANNER_LOCAL_LAYERS) {
    for (guint o = 0; o < c->n_opts; o++)
      if (!bisect_prefixes(c, &per_option[o], o, by_peak, error))
        return FALSE;
    for (guint o = 0; o < c->n_opts; o++)
      if (per_option[o].found && better(best, &per_option[o].eval, by_peak))
        best_take(best, c, per_option[o].actions, o, &per_option[o].eval);
    return TRUE;
  }
  for (guint round = 0; round < 2; round++) {
    int pick = -1;
    for (guint o = 0; o < c->n_opts; o++)
      if (per_option[o].found && (pick < 0 || better(&per_option[pick], &per_option[o].eval, by_peak)))
        pick = (int)o;
    if (pick < 0)
      break;
    if (!local_search(c, &per_option[pick], by_peak, error))
      return FALSE;
    if (better(best, &per_option[pick].eval, by_peak))
      best_take(best, c, per_option[pick].actions, per_option[pick].option, &per_option[pick].eval);
    per_option[pick].found = FALSE; /* the next round improves the runner-up */
  }
  return TRUE;
}

/* Op by op the exhaustive space costs its 3^L or 4^L engine runs (354,299
 * and 31 s for 8 layers of the bench's model) and proves nothing the
 * engine cannot see otherwise: the heuristic and the model's suggestions
 * instead. */
static gboolean
search(Ctx *c, Best *best, gboolean by_peak, GError **error)
{
  return c->n <= PLANNER_EXACT_LAYERS && !c->per_op ? search_exhaustive(c, best, by_peak, error)
                                                    : search_heuristic(c, best, by_peak, error);
}

/* Compute, raised when the bytes that must leave the peak cannot all cross
 * the link in the step: what the link cannot carry is recomputed at the best
 * bytes-per-second any layer offers (fractional, so a lower bound). */
static double
lower_bound(const Ctx *c)
{
  guint64 peak_all = c->base_bytes;
  double best_rate = 0; /* bytes removed per second of recompute */
  for (guint i = 0; i < c->n; i++) {
    const LayerCost *lc = &c->cost[i];
    peak_all += lc->keep[SIM_ACTION_KEEP];
    for (guint a = SIM_ACTION_RECOMPUTE; a < c->n_actions; a++) {
      if (!lc->useful[a] || lc->keep[a] >= lc->keep[SIM_ACTION_KEEP])
        continue;
      if (lc->redo[a] <= 0)
        return c->compute; /* bytes that go for free: no bound above the compute */
      best_rate = MAX(best_rate, (double)(lc->keep[SIM_ACTION_KEEP] - lc->keep[a]) / lc->redo[a]);
    }
  }
  double C = c->compute;
  if (peak_all <= c->budget || best_rate <= 0)
    return C;
  double R = (double)(peak_all - c->budget), beta = c->s->machine.link.d2h_bandwidth;
  /* step >= C + (R - beta.step) / rate  =>  step >= (C + R/rate) / (1 + beta/rate) */
  return MAX(C, (C + R / best_rate) / (1 + beta / best_rate));
}

void
planner_plan_free(PlannerPlan *p)
{
  if (p == NULL)
    return;
  sim_policy_free(p->policy);
  sim_result_free(p->result);
  sim_result_free(p->resident);
  g_free(p->verdict_reason);
  if (p->notes)
    g_array_unref(p->notes);
  if (p->stages)
    g_array_unref(p->stages); /* its clear function frees each stage's layers */
  g_free(p);
}

char *
planner_plan_format_policy(const SimPolicy *policy)
{
  GString *out = g_string_new(NULL);
  g_string_append_printf(out, "[policy.%s]\nkind = plan\n", policy->name);
  if (policy->framework != SIM_FRAMEWORK_NONE)
    g_string_append_printf(out, "framework = %s\n", sim_framework_names[policy->framework]);
  g_string_append_printf(out, "mode = %s\n", policy->async ? "async" : "sync");
  if (policy->async)
    g_string_append_printf(out, "prefetch = %u\ninflight = %u\n", policy->prefetch, policy->inflight);
  g_string_append_printf(out, "dedup = %s\nactions = ", policy->dedup ? "true" : "false");
  for (guint i = 0; i < policy->actions->len; i++)
    g_string_append_printf(out, "%s%s", i ? ", " : "", sim_action_name(g_array_index(policy->actions, SimAction, i)));
  g_string_append_c(out, '\n');
  return g_string_free(out, FALSE);
}

/* A beam of `width` states per key under the first schedule (async,
 * prefetch 1, two in flight: the one most plans end up with), below the
 * plan `best` holds; its plan, run through the engine, taken when better. */
static gboolean
beam(Ctx *c, const PlannerExact *x, Best *best, guint width, SimAction *actions, guint64 *states, GError **error)
{
  PlannerExactStats stats = { 0 };
  double step, cutoff = best->found ? best->eval.step : INFINITY;
  gboolean found = planner_exact_solve(x, &c->opts[0], c->budget, cutoff, width, actions, &step, &stats);
  *states += stats.states;
  return !found || consider(c, best, actions, 0, FALSE, error);
}

/* Every schedule's exact search (planner/exact.c) below the plan `best`
 * holds, after a beam that brings that plan close to the best (so the
 * search prunes against it): a plan it finds is run through the engine
 * and taken when it is better.  *bound receives the least step any plan
 * can have: under an exact schedule the least the search found (or, when
 * it found none below, the plan's own step), under a relaxed one the
 * relaxation's least.  When nothing fits, the search looks everywhere (it
 * may find what local search missed). */
static gboolean
prove(Ctx *c, Best *best, double *bound, guint64 *states, GError **error)
{
  const PlannerExact *x = c->model;
  g_autofree SimAction *actions = g_new(SimAction, c->n);
  if (!beam(c, x, best, PLANNER_BEAM, actions, states, error))
    return FALSE;
  double least = INFINITY, step;
  for (guint o = 0; o < c->n_opts; o++) {
    double cutoff = best->found ? best->eval.step * (1 + PLANNER_OPTIMAL_GAP) : INFINITY;
    PlannerExactStats stats = { 0 };
    gboolean found = planner_exact_solve(x, &c->opts[o], c->budget, cutoff, 0, actions, &step, &stats);
    *states += stats.states;
    least = MIN(least, found ? step : cutoff); /* not found: nothing of this schedule below the plan */
    if (found && !consider(c, best, actions, o, FALSE, error))
      return FALSE;
  }
  *bound = isfinite(least) ? least : NAN;
  return TRUE;
}

/* On a workload run op by op the model is close to the engine, not its
 * arithmetic (a layer is many ops, not one each way): it proves nothing
 * there, and its best plans are suggestions, each judged by the engine.
 * Its step sits below the engine's by about the same on every plan
 * (7.2 - 7.3 ms of about 1 s on the bench's 96 layers), so below the
 * engine's step the search would find nearly every plan: it looks below
 * the model's own figure for the plan held, widened by the largest error
 * the model has made on a move (screen_learn).  An exact schedule is
 * searched whole (tens of milliseconds at 96 layers); a relaxed one, whose
 * plans are the relaxation's best, as a beam of PLANNER_BEAM_OPS.  When a
 * suggestion was better, local search goes on from it. */
static gboolean
suggest(Ctx *c, Best *best, guint64 *states, GError **error)
{
  const PlannerExact *x = c->model;
  g_autofree SimAction *actions = g_new(SimAction, c->n);
  double searched = best->found ? best->eval.step : INFINITY, step;
  for (guint o = 0; o < c->n_opts; o++) {
    guint width = planner_exact_is_exact(x, &c->opts[o]) ? 0 : PLANNER_BEAM_OPS;
    double cutoff = best->found ? model_eval(c, best->option, best->actions).step + c->miss_step : INFINITY;
    PlannerExactStats stats = { 0 };
    gboolean found = planner_exact_solve(x, &c->opts[o], c->budget, cutoff, width, actions, &step, &stats);
    *states += stats.states;
    if (found && !consider(c, best, actions, o, FALSE, error))
      return FALSE;
  }
  return !best->found || best->eval.step >= searched || local_search(c, best, FALSE, error);
}

/* Past PLANNER_PROVEN_LAYERS: a beam of PLANNER_BEAM_STATES / layers
 * states per key (at least PLANNER_BEAM_LARGE) may improve the plan, and
 * *bound receives the Lagrangian bound of every schedule (the least):
 * linear in the layers, proving nothing but how far the plan may be. */
static gboolean
improve(Ctx *c, Best *best, double *bound, guint64 *states, GError **error)
{
  const PlannerExact *x = c->model;
  g_autofree SimAction *actions = g_new(SimAction, c->n);
  if (!beam(c, x, best, MAX(PLANNER_BEAM_LARGE, PLANNER_BEAM_STATES / c->n), actions, states, error))
    return FALSE;
  double least = INFINITY;
  for (guint o = 0; o < c->n_opts; o++)
    least = MIN(least, planner_exact_bound(x, &c->opts[o], c->budget));
  *bound = isfinite(least) ? least : NAN;
  return TRUE;
}

static PlannerPlan *search_allocated(const SimScenario *s, guint64 budget, SimFramework framework, GError **error);

/* The plan's result and resident's judged against `budget`. */
static gboolean
judge_against(PlannerPlan *p, const SimScenario *s, guint64 budget, GError **error)
{
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  SimEvaluateOptions eval = { .budget = budget, .detail = TRUE };
  g_autoptr(SimResult) result = sim_evaluate(evaluator, s, p->policy, &eval, error);
  g_autoptr(SimPolicy) resident = sim_policy_new("resident", SIM_POLICY_RESIDENT);
  g_autoptr(SimResult) kept = result ? sim_evaluate(evaluator, s, resident, &eval, error) : NULL;
  if (kept == NULL)
    return FALSE;
  sim_result_free(p->result);
  sim_result_free(p->resident);
  p->result = g_steal_pointer(&result);
  p->resident = g_steal_pointer(&kept);
  return TRUE;
}

PlannerPlan *
planner_plan_framework(const SimScenario *s, guint64 budget, SimFramework framework, GError **error)
{
  /* The searches judge allocated bytes, PyTorch's out-of-memory error
   * reserved ones (sim/result/reserved.h).  A plan whose reserved peak
   * passes the budget is searched again under the budget less the excess,
   * up to PLANNER_RESERVE_ROUNDS times, and judged against the budget
   * given.  Such a plan proves nothing (the exact search's space is the
   * allocated one); its bound stays the first search's, a relaxation (a
   * plan that reserves within the budget allocates within it).  A plan
   * that still does not fit says so (fits NO). */
  g_autoptr(PlannerPlan) best = search_allocated(s, budget, framework, error);
  if (best == NULL)
    return NULL;
  double bound_ms = best->lower_bound_ms;
  guint64 search = budget, evaluations = best->evaluations, states = best->states;
  for (guint round = 0; round < PLANNER_RESERVE_ROUNDS && best->feasible && !best->result->fits; round++) {
    guint64 over = best->result->peak_reserved_bytes - MIN(best->result->peak_reserved_bytes, budget);
    if (over == 0 || over >= search)
      break;
    search -= over;
    g_autoptr(PlannerPlan) p = search_allocated(s, search, framework, error);
    if (p == NULL || (p->feasible && !judge_against(p, s, budget, error)))
      return NULL;
    evaluations += p->evaluations;
    states += p->states;
    if (!p->feasible)
      break; /* the last plan that fits the allocated budget stays */
    p->proven = p->optimal = p->lagrangian = p->infeasible_proven = FALSE;
    p->lower_bound_ms = MIN(bound_ms, p->result->step_ms);
    p->gap = p->lower_bound_ms > 0 ? MAX(0.0, p->result->step_ms / p->lower_bound_ms - 1) : 0;
    planner_plan_free(best);
    best = g_steal_pointer(&p);
  }
  best->evaluations = evaluations;
  best->states = states;
  /* The notes once, for the plan kept (two runs a layer). */
  return planner_plan_annotate(best, s, error) ? g_steal_pointer(&best) : NULL;
}

PlannerPlan *
planner_plan(const SimScenario *s, guint64 budget, GError **error)
{
  return planner_plan_framework(s, budget, SIM_FRAMEWORK_NONE, error);
}

PlannerPlan *
planner_plan_allocated(const SimScenario *s, guint64 budget, SimFramework framework, GError **error)
{
  g_autoptr(PlannerPlan) p = search_allocated(s, budget, framework, error);
  return p && planner_plan_annotate(p, s, error) ? g_steal_pointer(&p) : NULL;
}

/* planner_plan_allocated without the notes. */
static PlannerPlan *
search_allocated(const SimScenario *s, guint64 budget, SimFramework framework, GError **error)
{
  /* A pipeline is planned per stage: the exact search below models one GPU. */
  if (sim_parallel_active(&s->parallel))
    return planner_plan_stages(s, budget, framework, error);
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  guint n = sim_workload_n_layers(s->workload);
  g_autoptr(SimPolicy) scratch = planner_plan_scratch_new(s, framework, error);
  if (scratch == NULL)
    return NULL;
  Option own = { scratch->async, scratch->prefetch, scratch->inflight };
  Ctx c = { .s = s, .n = n, .budget = budget, .evaluator = evaluator, .policy = scratch };
  c.opts = planner_plan_options(&c.n_opts);
  if (framework != SIM_FRAMEWORK_NONE) {
    c.opts = &own;
    c.n_opts = 1;
  }
  layer_costs(&c);
  g_autofree LayerCost *costs = c.cost; /* freed with the plan's context */
  (void)costs;
  g_autofree SimAction *best_actions = g_new0(SimAction, n);
  Best best = { best_actions, 0, { 0, 0 }, FALSE };

  g_autoptr(PlannerPlan) p = g_new0(PlannerPlan, 1);
  /* The exact search covers the planner's own schedules, not a framework's;
   * it bounds the engine's step only on layers that are one op each way. */
  gboolean exact = framework == SIM_FRAMEWORK_NONE && planner_exact_supports(scratch);
  g_autoptr(PlannerExact) model = exact ? planner_exact_new(s, scratch, c.n_actions) : NULL;
  c.model = model;
  gboolean per_op = c.per_op = sim_workload_has_ops(s->workload);
  /* Where the proof can close, a small model takes the heuristic and the
   * proof (tens of engine runs) before the exhaustive search (tens of
   * thousands): the exhaustive one runs only when the proof leaves a gap
   * (a relaxed schedule's bound below the plan), so its answer is the
   * same optimum. */
  gboolean proof_first = exact && !per_op && n <= PLANNER_EXACT_LAYERS;
  if (!(proof_first ? search_heuristic(&c, &best, FALSE, error) : search(&c, &best, FALSE, error)))
    return NULL;
  /* The proof: the exact search under every schedule, below the plan found. */
  double bound = NAN, relaxed = NAN;
  if (exact) {
    if (per_op ? !suggest(&c, &best, &p->states, error)
        : n <= PLANNER_PROVEN_LAYERS ? !prove(&c, &best, &bound, &p->states, error)
                                     : !improve(&c, &best, &relaxed, &p->states, error))
      return NULL;
  }
  gboolean closed = best.found ? !isnan(bound) && best.eval.step <= bound * (1 + PLANNER_OPTIMAL_GAP) : !isnan(bound);
  if (proof_first && !closed && !search_exhaustive(&c, &best, FALSE, error))
    return NULL;
  p->feasible = best.found;
  p->infeasible_proven = !best.found && exact && n <= PLANNER_PROVEN_LAYERS;
  if (!best.found) {
    /* Nothing fits: find the plan with the smallest peak instead. */
    if (!search(&c, &best, TRUE, error))
      return NULL;
    p->min_budget = (guint64)best.eval.peak;
  }
  p->policy = planner_plan_policy_new(scratch, best.actions, n, &c.opts[best.option]);
  SimEvaluateOptions eval = { .budget = budget, .detail = TRUE };
  p->result = sim_evaluate(evaluator, s, p->policy, &eval, error);
  g_autoptr(SimPolicy) resident = sim_policy_new("resident", SIM_POLICY_RESIDENT);
  p->resident = p->result ? sim_evaluate(evaluator, s, resident, &eval, error) : NULL;
  if (p->result == NULL || p->resident == NULL)
    return NULL;
  /* The exact search models a layer as one op each way: on a workload run
   * op by op (a generated transformer) its least step is a search, not a
   * bound on the engine's (sim_workload_has_ops). */
  p->proven = !isnan(bound) && !per_op;
  if (per_op)
    p->infeasible_proven = FALSE;
  p->lagrangian = !p->proven && !isnan(relaxed);
  p->lower_bound_ms = MAX(lower_bound(&c), p->proven ? bound : p->lagrangian ? relaxed : 0) * 1e3;
  if (p->proven && p->feasible)
    p->lower_bound_ms = MIN(p->lower_bound_ms, p->result->step_ms); /* rounding: never above the plan */
  p->gap = p->lower_bound_ms > 0 ? MAX(0.0, p->result->step_ms / p->lower_bound_ms - 1) : 0;
  p->optimal = p->proven && p->feasible && p->gap <= PLANNER_OPTIMAL_GAP;
  planner_plan_verdict(p, s->workload->static_bytes);
  p->evaluations = c.evaluations;
  return g_steal_pointer(&p);
}
