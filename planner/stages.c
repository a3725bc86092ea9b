#include "planner/stages.h"

#include "lower/pipeline.h"
#include "planner/internal/plan_private.h"
#include "result/evaluate.h"

#include <math.h>
#include <string.h>

/* A stage's part of the plan: `a` on the first ka layers of a's order (see
 * Ctx.rank), `b` on the first kb of b's order that `a` left, keep on the
 * rest. */
typedef struct {
  SimAction a, b;
  guint ka, kb;
} Move;

/* One run's figures, owned by the cache: the step, the worst stage's peak,
 * every stage's peak. */
typedef struct {
  double step;
  gint64 worst;
  gint64 peak[];
} Eval;

/* A plan is faster than another when its step is lower by more than the
 * engine's rounding (about 1e-15 between two orders of the same sums):
 * otherwise an offload that changes nothing would be taken for the last
 * bit of a double. */
#define FASTER(a, b) ((a) < (b) * (1 - 1e-12))

/* A plan as stage moves (steps 1 and 2). */
typedef struct {
  Move *moves; /* per stage */
  guint option;
  const Eval *eval;
} Best;

/* A plan as actions. */
typedef struct {
  SimAction *actions; /* per layer */
  guint option;
  const Eval *eval;
} Plan;

typedef struct {
  const SimScenario *s;
  /* What the runs simulate: s, or in lockstep its proxy of fewer
   * micro-batches (lockstep_proxy) while the search sizes and descends. */
  const SimScenario *run_on;
  gboolean lockstep; /* lockstep_search */
  SimEvaluator *evaluator;
  SimPolicy *policy; /* scratch: kind = plan, actions rewritten per evaluation */
  guint n, pp, dp;
  guint64 budget;
  PlannerLayerCost *cost; /* per layer */
  guint *start;           /* stage st's layers are the entries start[st] .. start[st + 1] of each order */
  guint *order;           /* the layers stage by stage, each stage's in model order */
  /* Per type, each stage's layers on which it does something, in the order
   * a prefix takes them: model order for the types that copy (earlier
   * offloads have longer to hide), the most bytes freed per second of
   * recompute first for the others (model order among equals, so that on
   * equal layers every type takes a prefix in model order). */
  guint *rank[SIM_ACTION_COUNT];
  guint *count;           /* [st × SIM_ACTION_COUNT + t]: the entries of rank[t] of stage st */
  SimAction types[SIM_ACTION_COUNT];
  guint n_types;
  const PlannerOption *opts;
  guint n_opts;
  GHashTable *cache;  /* "option, actions" as a string -> Eval */
  SimAction *actions; /* scratch */
  guint64 evaluations;
  Plan least;   /* the least worst-stage peak met, for an infeasible budget */
  double floor; /* all keep's step: no plan is faster (stages.h), so a plan that reaches it is done */
  Move *trial;  /* scratch moves */
} Ctx;

static guint
stage_layers(const Ctx *c, guint st)
{
  return c->start[st + 1] - c->start[st];
}

static guint
ranked(const Ctx *c, guint st, SimAction t)
{
  return c->count[st * SIM_ACTION_COUNT + t];
}

/* Stage st's actions under move `m` into `actions`. */
static void
build_stage(const Ctx *c, guint st, const Move *m, SimAction *actions)
{
  for (guint i = c->start[st]; i < c->start[st + 1]; i++)
    actions[c->order[i]] = SIM_ACTION_KEEP;
  const guint *ra = c->rank[m->a] + c->start[st], *rb = c->rank[m->b] + c->start[st];
  for (guint i = 0; i < MIN(m->ka, ranked(c, st, m->a)); i++)
    actions[ra[i]] = m->a;
  for (guint i = 0, j = 0; i < ranked(c, st, m->b) && j < m->kb; i++)
    if (actions[rb[i]] == SIM_ACTION_KEEP) {
      actions[rb[i]] = m->b;
      j++;
    }
}

static void
build(const Ctx *c, const Move *moves, SimAction *actions)
{
  for (guint st = 0; st < c->pp; st++)
    build_stage(c, st, &moves[st], actions);
}

/* How many layers `b` can take on stage st after `a` took its ka. */
static guint
room(const Ctx *c, guint st, SimAction a, guint ka, SimAction b)
{
  Move m = { a, b, ka, G_MAXUINT };
  build_stage(c, st, &m, c->actions);
  guint n = 0;
  for (guint i = c->start[st]; i < c->start[st + 1]; i++)
    n += c->actions[c->order[i]] == b;
  return n;
}

static gboolean
fits(const Ctx *c, const Eval *e)
{
  return (guint64)e->worst <= c->budget;
}

static gboolean
stage_fits(const Ctx *c, const Eval *e, guint st)
{
  return (guint64)e->peak[st] <= c->budget;
}

static void
best_take(const Ctx *c, Best *b, const Move *moves, guint option, const Eval *e)
{
  memcpy(b->moves, moves, sizeof(Move) * c->pp);
  b->option = option;
  b->eval = e;
}

static void
plan_take(const Ctx *c, Plan *p, const SimAction *actions, guint option, const Eval *e)
{
  memcpy(p->actions, actions, sizeof(SimAction) * c->n);
  p->option = option;
  p->eval = e;
}

/* `actions` under schedule `option`, through the engine unless met before:
 * *out the run's figures (the cache's). */
static gboolean
evaluate_actions(Ctx *c, const SimAction *actions, guint option, const Eval **out, GError **error)
{
  /* With every layer kept there is no copy: the schedules run the same
   * (shared in lockstep only, so that the thorough search's count of runs
   * stays as printed). */
  gboolean all_keep = c->lockstep;
  for (guint i = 0; i < c->n && all_keep; i++)
    all_keep = actions[i] == SIM_ACTION_KEEP;
  char *key = g_malloc(c->n + 2);
  key[0] = (char)((c->run_on == c->s ? 'A' : 'a') + (all_keep ? 0 : option));
  for (guint i = 0; i < c->n; i++)
    key[i + 1] = (char)('a' + actions[i]);
  key[c->n + 1] = '\0';
  const Eval *e = g_hash_table_lookup(c->cache, key);
  if (e != NULL) {
    g_free(key);
    *out = e;
    return TRUE;
  }
  g_autoptr(SimRun) run =
    planner_plan_run(c->evaluator, c->run_on, c->policy, actions, &c->opts[option], &c->evaluations, error);
  if (run == NULL) {
    g_free(key);
    return FALSE;
  }
  Eval *fresh = g_malloc(sizeof(Eval) + sizeof(gint64) * c->pp);
  fresh->step = run->step;
  fresh->worst = 0;
  for (guint st = 0; st < c->pp; st++) {
    gint64 peak = 0;
    /* pools is NULL on one GPU (pp = dp = 1, micro-batches only). */
    for (guint r = 0; r < c->dp; r++)
      peak = MAX(peak, run->pools ? g_array_index(run->pools, SimPeak, SIM_POOL_INDEX(st * c->dp + r, SIM_POOL_DEVICE)).bytes
                                  : run->peak[SIM_POOL_DEVICE].bytes);
    fresh->peak[st] = peak;
    fresh->worst = MAX(fresh->worst, peak);
  }
  g_hash_table_insert(c->cache, key, fresh);
  /* The least peak met is the scenario's own, never the proxy's. */
  if (c->run_on == c->s && (c->least.eval == NULL || fresh->worst < c->least.eval->worst ||
      (fresh->worst == c->least.eval->worst && fresh->step < c->least.eval->step)))
    plan_take(c, &c->least, actions, option, fresh);
  *out = fresh;
  return TRUE;
}

static gboolean
evaluate(Ctx *c, const Move *moves, guint option, const Eval **out, GError **error)
{
  build(c, moves, c->actions);
  return evaluate_actions(c, c->actions, option, out, error);
}

/* The fewest layers of stage `st` (on top of the other stages' moves in
 * c->trial, whose move `m` for st is being sized) that bring the stage
 * within the budget, between lo and hi, given that hi does (`at_hi` is
 * that run): m holds them after, *out their run.  The count bisected is
 * the second type's when there is one.  The stage's peak only falls as
 * layers are added, so log2(hi - lo) runs find the least. */
/* `moves` with stage st's replaced by `move`, into c->trial: the trial
 * every search step evaluates.  Returns the trial's move of st, which
 * fewest bisects in place. */
static Move *
trial_with(Ctx *c, const Move *moves, guint st, Move move)
{
  memcpy(c->trial, moves, sizeof(Move) * c->pp);
  c->trial[st] = move;
  return &c->trial[st];
}

static gboolean
fewest(Ctx *c, guint st, guint option, guint lo, guint hi, const Eval *at_hi, Move *m, const Eval **out,
       GError **error)
{
  guint *k = m->kb > 0 ? &m->kb : &m->ka;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    *k = mid;
    const Eval *e;
    if (!evaluate(c, c->trial, option, &e, error))
      return FALSE;
    if (stage_fits(c, e, st)) {
      hi = mid;
      at_hi = e;
    } else {
      lo = mid + 1;
    }
  }
  *k = hi;
  *out = at_hi;
  return TRUE;
}

/* Step 1: from all keep, each stage over the budget takes, in a round, its
 * move of least step that brings it within the budget (each measured with
 * the other stages as they were: a stage's memory hardly depends on them),
 * or when none does the move that lowers its peak most; until every stage
 * fits (TRUE in *feasible) or a round changes nothing.  A round is stages
 * × types × log2(layers per stage) runs. */
static gboolean
greedy(Ctx *c, guint option, Best *cur, gboolean *feasible, GError **error)
{
  memset(cur->moves, 0, sizeof(Move) * c->pp);
  cur->option = option;
  if (!evaluate(c, cur->moves, option, &cur->eval, error))
    return FALSE;
  c->floor = MIN(c->floor, cur->eval->step);
  g_autofree Move *next = g_new0(Move, c->pp);
  /* A stage that fits stays fitting unless another's change moves its
   * copies: a few rounds, whatever the budget. */
  for (guint round = 0; round < 8 && !fits(c, cur->eval); round++) {
    memcpy(next, cur->moves, sizeof(Move) * c->pp);
    gboolean changed = FALSE;
    for (guint st = 0; st < c->pp; st++) {
      if (stage_fits(c, cur->eval, st))
        continue;
      const Eval *fit = NULL;
      gint64 least = cur->eval->peak[st]; /* the lowest peak of a move that does not fit */
      for (guint k = 0; k < c->n_types; k++) {
        SimAction t = c->types[k];
        guint most = ranked(c, st, t);
        if (most == 0)
          continue;
        Move *m = trial_with(c, cur->moves, st, (Move){ t, SIM_ACTION_KEEP, most, 0 });
        const Eval *all;
        if (!evaluate(c, c->trial, option, &all, error))
          return FALSE;
        if (!stage_fits(c, all, st)) {
          if (fit == NULL && all->peak[st] < least) {
            least = all->peak[st];
            next[st] = *m;
            changed = TRUE;
          }
          continue;
        }
        const Eval *e;
        if (!fewest(c, st, option, 1, most, all, m, &e, error))
          return FALSE;
        if (fit == NULL || FASTER(e->step, fit->step)) {
          fit = e;
          next[st] = *m;
          changed = TRUE;
        }
      }
    }
    if (!changed)
      break; /* no move lowers a stage over the budget: nothing fits */
    memcpy(cur->moves, next, sizeof(Move) * c->pp);
    if (!evaluate(c, cur->moves, option, &cur->eval, error))
      return FALSE;
  }
  *feasible = fits(c, cur->eval);
  return TRUE;
}

/* Candidate c->trial for the stage being improved: into `best` when it fits
 * and is faster. */
static void
offer(Ctx *c, Best *best, const Eval *e)
{
  if (fits(c, e) && FASTER(e->step, best->eval->step))
    best_take(c, best, c->trial, best->option, e);
}

/* Step 2 on stage `st`: every type on every prefix that fits, with `mix`
 * two types on small stages; the best into `cur` when it fits and is
 * faster.  A stage that keeps everything and fits is left alone: anything
 * else there only adds work to it. */
static gboolean
improve_stage(Ctx *c, guint st, gboolean mix, Best *cur, Best *best, GError **error)
{
  guint option = cur->option;
  const Eval *e;
  if (cur->moves[st].ka + cur->moves[st].kb == 0 && stage_fits(c, cur->eval, st))
    return TRUE;
  best_take(c, best, cur->moves, option, cur->eval);
  trial_with(c, cur->moves, st, (Move){ SIM_ACTION_KEEP, SIM_ACTION_KEEP, 0, 0 });
  if (!evaluate(c, c->trial, option, &e, error))
    return FALSE;
  offer(c, best, e);
  /* Per type the fewest layers that fit alone (G_MAXUINT: none): two types
   * where `a` alone already fits only add work. */
  guint alone[SIM_ACTION_COUNT];
  for (guint t = 0; t < SIM_ACTION_COUNT; t++)
    alone[t] = G_MAXUINT;
  for (guint k = 0; k < c->n_types; k++) {
    SimAction t = c->types[k];
    guint most = ranked(c, st, t);
    if (most == 0)
      continue;
    /* From the whole stage down, until the stage no longer fits: every
     * prefix at least as long as the fewest that does. */
    for (guint m = most; m >= 1; m--) {
      trial_with(c, cur->moves, st, (Move){ t, SIM_ACTION_KEEP, m, 0 });
      if (!evaluate(c, c->trial, option, &e, error))
        return FALSE;
      if (!stage_fits(c, e, st))
        break;
      alone[t] = m;
      offer(c, best, e);
    }
  }
  /* Two types: `a` on its first j layers, then as few `b` as fit. */
  if (mix && stage_layers(c, st) <= PLANNER_STAGES_MIX_LAYERS) {
    for (guint ia = 0; ia < c->n_types; ia++) {
      for (guint ib = 0; ib < c->n_types; ib++) {
        SimAction a = c->types[ia], b = c->types[ib];
        if (a == b)
          continue;
        for (guint j = 1; j <= ranked(c, st, a) && j < alone[a]; j++) {
          guint most = room(c, st, a, j, b);
          if (most == 0)
            continue;
          Move *m = trial_with(c, cur->moves, st, (Move){ a, b, j, most });
          const Eval *all;
          if (!evaluate(c, c->trial, option, &all, error))
            return FALSE;
          if (!stage_fits(c, all, st))
            continue;
          offer(c, best, all);
          if (!fewest(c, st, option, 1, most, all, m, &e, error))
            return FALSE;
          offer(c, best, e);
        }
      }
    }
  }
  if (best->eval != cur->eval)
    best_take(c, cur, best->moves, option, best->eval);
  return TRUE;
}

/* Step 2: stage by stage until a round improves nothing; `mix`: with two
 * types per stage. */
static gboolean
descend(Ctx *c, Best *cur, gboolean mix, GError **error)
{
  g_autofree Move *storage = g_new0(Move, c->pp);
  Best best = { storage, cur->option, cur->eval };
  /* Each taken candidate lowers the step, so this ends; the cap only
   * bounds a pathological run of tiny improvements. */
  for (guint round = 0; round < 64 && FASTER(c->floor, cur->eval->step); round++) {
    double before = cur->eval->step;
    for (guint st = 0; st < c->pp && FASTER(c->floor, cur->eval->step); st++)
      if (!improve_stage(c, st, mix, cur, &best, error))
        return FALSE;
    if (!FASTER(cur->eval->step, before))
      break;
  }
  return TRUE;
}

/* Step 3: one layer's action at a time, on the stages that do something
 * (as step 2), the best change per stage taken when it fits and lowers the
 * step, until a round changes nothing: what prefixes cannot say, such as a
 * layer kept among recomputed ones because its tensors are small.  Each
 * round is layers × types runs: the thorough search only. */
/* Whether stage st does something or must: polish leaves the others alone. */
static gboolean
stage_acts(const Ctx *c, const Plan *cur, guint st)
{
  gboolean acts = !stage_fits(c, cur->eval, st);
  for (guint i = c->start[st]; i < c->start[st + 1]; i++)
    acts |= cur->actions[c->order[i]] != SIM_ACTION_KEEP;
  return acts;
}

static SimAction
type_at(const Ctx *c, guint k)
{
  return k == 0 ? SIM_ACTION_KEEP : c->types[k - 1];
}

/* One round of polish on stage st: every change of one layer's action, or
 * with `pairs` of two layers' at once; the best that fits and is faster
 * into `cur`. */
static gboolean
polish_stage(Ctx *c, guint st, gboolean pairs, Plan *cur, SimAction *trial, SimAction *pick, GError **error)
{
  const Eval *chosen = cur->eval;
  for (guint i = c->start[st]; i < c->start[st + 1]; i++) {
    guint li = c->order[i];
    for (guint j = pairs ? i + 1 : i; j < (pairs ? c->start[st + 1] : i + 1); j++) {
      guint lj = c->order[j];
      for (guint ki = 0; ki <= c->n_types; ki++) {
        SimAction ai = type_at(c, ki);
        if (ai == cur->actions[li] || !c->cost[li].useful[ai])
          continue;
        for (guint kj = 0; kj <= (pairs ? c->n_types : 0); kj++) {
          SimAction aj = pairs ? type_at(c, kj) : cur->actions[lj];
          if (pairs && (aj == cur->actions[lj] || !c->cost[lj].useful[aj]))
            continue;
          memcpy(trial, cur->actions, sizeof(SimAction) * c->n);
          trial[li] = ai;
          if (pairs)
            trial[lj] = aj;
          const Eval *e;
          if (!evaluate_actions(c, trial, cur->option, &e, error))
            return FALSE;
          if (fits(c, e) && FASTER(e->step, chosen->step)) {
            chosen = e;
            memcpy(pick, trial, sizeof(SimAction) * c->n);
          }
        }
      }
    }
  }
  if (chosen != cur->eval)
    plan_take(c, cur, pick, cur->option, chosen);
  return TRUE;
}

/* Step 3: one layer's action at a time, on the stages that do something
 * (as step 2), the best change per stage taken when it fits and lowers the
 * step, until a round changes nothing: what prefixes cannot say, such as a
 * layer kept among recomputed ones because its tensors are small.  When
 * that is stuck, two layers' at once on stages of at most
 * PLANNER_STAGES_PAIR_LAYERS layers (a swap: one layer gives up its action
 * as another takes one, which no single change that fits can do), then one
 * at a time again.  A round is layers × types runs, pairs layers² ×
 * types² per stage: the thorough search only (stages.h). */
static gboolean
polish(Ctx *c, Plan *cur, GError **error)
{
  g_autofree SimAction *trial = g_new(SimAction, c->n), *pick = g_new(SimAction, c->n);
  gboolean pairs = FALSE;
  for (guint round = 0; round < 64 && FASTER(c->floor, cur->eval->step); round++) {
    double before = cur->eval->step;
    for (guint st = 0; st < c->pp; st++) {
      if (!stage_acts(c, cur, st) || (pairs && stage_layers(c, st) > PLANNER_STAGES_PAIR_LAYERS))
        continue;
      if (!polish_stage(c, st, pairs, cur, trial, pick, error))
        return FALSE;
    }
    if (FASTER(cur->eval->step, before))
      pairs = FALSE; /* one layer at a time again from the better plan */
    else if (!pairs)
      pairs = TRUE;
    else
      break;
  }
  return TRUE;
}

/* Whether the search runs stages in lockstep (stages.h): past
 * PLANNER_STAGES_LOCKSTEP_SLICES slices, where each of the thorough
 * search's thousands of runs costs that many slices. */
static gboolean
lockstep_search(const Ctx *c)
{
  return (guint64)c->n * c->s->parallel.microbatches > PLANNER_STAGES_LOCKSTEP_SLICES;
}

/* Lockstep sizing of type k (c->types[k]) under schedule `option`, from
 * `base` (every stage's move; the stages marked in `acting` are sized):
 * every acting stage's fewest layers of the type that bring it within the
 * budget into fewest[st × SIM_ACTION_COUNT + k] (G_MAXUINT: none does),
 * all stages searched in the same runs, each reading its own peak (a
 * stage's peak hardly depends on the others' actions: stages.h).  Each
 * stage starts from `guess` (the same layout; NULL or out of range: the
 * whole stage), then tries the count next to it, then bisects: two runs
 * when the guess is right (another schedule's size), 1 + log2(layers per
 * stage) without one. */
static gboolean
lockstep_fewest(Ctx *c, guint option, const Move *base, const gboolean *acting, guint k, const guint *guess,
                guint *fewest, GError **error)
{
  SimAction t = c->types[k];
  /* Per stage: the fewest lies in [lo, hi]; hi fits when `ok`; `phase` 0
   * probes the guess, 1 its neighbour, 2 bisects. */
  g_autofree guint *lo = g_new0(guint, c->pp), *hi = g_new0(guint, c->pp), *phase = g_new0(guint, c->pp);
  g_autofree gboolean *ok = g_new0(gboolean, c->pp);
  memcpy(c->trial, base, sizeof(Move) * c->pp);
  for (guint st = 0; st < c->pp; st++) {
    guint most = ranked(c, st, t), at = st * SIM_ACTION_COUNT + k;
    fewest[at] = G_MAXUINT;
    if (!acting[st] || most == 0)
      continue;
    lo[st] = 1;
    hi[st] = most;
    guint g = guess && guess[at] >= 1 && guess[at] <= most ? guess[at] : most;
    c->trial[st] = (Move){ t, SIM_ACTION_KEEP, g, 0 };
  }
  for (;;) {
    gboolean open = FALSE;
    for (guint st = 0; st < c->pp; st++)
      open |= hi[st] > 0 && (lo[st] < hi[st] || !ok[st]);
    if (!open)
      break;
    const Eval *e;
    if (!evaluate(c, c->trial, option, &e, error))
      return FALSE;
    for (guint st = 0; st < c->pp; st++) {
      if (hi[st] == 0 || (lo[st] == hi[st] && ok[st]))
        continue;
      guint p = c->trial[st].ka;
      gboolean fit = stage_fits(c, e, st);
      if (fit) {
        hi[st] = p;
        ok[st] = TRUE;
      } else {
        lo[st] = p + 1;
      }
      if (lo[st] > hi[st] || (!fit && p == ranked(c, st, t))) {
        lo[st] = hi[st] = 0; /* the whole stage of this type does not fit */
        continue;
      }
      guint next;
      if (lo[st] == hi[st])
        next = hi[st]; /* done, or the whole stage still to try */
      else if (phase[st] == 0)
        next = fit ? p - (p > lo[st]) : MIN(p + 1, hi[st]);
      else
        next = lo[st] + (hi[st] - lo[st]) / 2;
      phase[st] = MIN(phase[st] + 1, 2);
      c->trial[st].ka = next;
    }
  }
  for (guint st = 0; st < c->pp; st++)
    if (hi[st] > 0)
      fewest[st * SIM_ACTION_COUNT + k] = hi[st];
  return TRUE;
}

/* Stage st's move of type k at its fewest (none: FALSE). */
static gboolean
lockstep_move(const Ctx *c, const guint *fewest, guint st, guint k, Move *m)
{
  guint f = fewest[st * SIM_ACTION_COUNT + k];
  if (f == G_MAXUINT)
    return FALSE;
  *m = (Move){ c->types[k], SIM_ACTION_KEEP, f, 0 };
  return TRUE;
}

/* Each acting stage's fewest layers of each type by the layers' costs
 * (PlannerLayerCost): the stage's run `e` peaks at its static bytes plus
 * what its micro-batches in flight keep, so a layer the type takes lowers
 * the peak by its bytes freed times the stage's peak over static, per byte
 * its layers keep.  A first guess for lockstep_fewest, which checks it. */
static void
lockstep_guess(const Ctx *c, const Eval *e, const gboolean *acting, guint *guess)
{
  for (guint st = 0; st < c->pp; st++) {
    guint64 kept = 0;
    for (guint i = c->start[st]; i < c->start[st + 1]; i++)
      kept += c->cost[c->order[i]].keep[SIM_ACTION_KEEP];
    guint64 base = sim_lower_pipeline_stage_static(c->s->workload, &c->s->parallel, st);
    guint64 peak = (guint64)e->peak[st];
    double per_byte = kept > 0 && peak > base ? (double)(peak - base) / (double)kept : 0;
    for (guint k = 0; k < c->n_types; k++) {
      SimAction t = c->types[k];
      guint at = st * SIM_ACTION_COUNT + k, n = 0;
      double over = (double)e->peak[st] - (double)c->budget;
      guess[at] = G_MAXUINT;
      if (!acting[st] || per_byte <= 0)
        continue;
      for (const guint *r = c->rank[t] + c->start[st]; n < ranked(c, st, t) && over > 0; n++, r++) {
        const PlannerLayerCost *lc = &c->cost[*r];
        over -= per_byte * (double)(lc->keep[SIM_ACTION_KEEP] - MIN(lc->keep[t], lc->keep[SIM_ACTION_KEEP]));
      }
      guess[at] = MAX(n, 1u);
    }
  }
}

/* The lockstep search under schedule `option` (stages.h): from all keep,
 * the stages over the budget sized per type in lockstep, then one plan per
 * type, each acting stage taking that type at its fewest (or, where it
 * cannot fit, the type that fits there in the order of the plans' steps);
 * the fastest that fits into `cur`, the sizes into `fewest`, each from
 * `guess` (lockstep_fewest; NULL: none).  Rounds while a stage is still
 * over the budget with the others' moves applied. */
static gboolean
lockstep_plan(Ctx *c, guint option, guint types, Best *cur, const guint *guess, guint *fewest, gboolean *feasible,
              GError **error)
{
  memset(cur->moves, 0, sizeof(Move) * c->pp);
  cur->option = option;
  if (!evaluate(c, cur->moves, option, &cur->eval, error))
    return FALSE;
  c->floor = MIN(c->floor, cur->eval->step);
  g_autofree gboolean *acting = g_new0(gboolean, c->pp);
  g_autofree Move *plan = g_new0(Move, c->pp);
  g_autofree guint *last = g_new(guint, (gsize)c->pp * SIM_ACTION_COUNT);
  for (guint st = 0; st < c->pp; st++)
    acting[st] = !stage_fits(c, cur->eval, st);
  if (guess == NULL) {
    lockstep_guess(c, cur->eval, acting, last);
    guess = last;
  }
  for (guint round = 0; round < 4 && !fits(c, cur->eval); round++) {
    for (guint k = 0; k < c->n_types; k++) {
      if (types & (1u << k)) {
        if (!lockstep_fewest(c, option, cur->moves, acting, k, guess, fewest, error))
          return FALSE;
      } else {
        for (guint st = 0; st < c->pp; st++)
          fewest[st * SIM_ACTION_COUNT + k] = G_MAXUINT; /* not sized: not taken */
      }
    }
    /* The next round (a stage pushed over by its neighbours) starts from these. */
    memcpy(last, fewest, sizeof(guint) * c->pp * SIM_ACTION_COUNT);
    guess = last;
    /* One plan per type; its step orders the types for the stages where it cannot fit. */
    double step[SIM_ACTION_COUNT];
    guint by_step[SIM_ACTION_COUNT];
    for (guint k = 0; k < c->n_types; k++) {
      step[k] = INFINITY;
      by_step[k] = k;
      if (!(types & (1u << k)))
        continue;
      memcpy(plan, cur->moves, sizeof(Move) * c->pp);
      for (guint st = 0; st < c->pp; st++)
        if (acting[st])
          lockstep_move(c, fewest, st, k, &plan[st]);
      const Eval *e;
      if (!evaluate(c, plan, option, &e, error))
        return FALSE;
      step[k] = fits(c, e) ? e->step : INFINITY;
      for (guint j = k; j > 0 && step[by_step[j]] < step[by_step[j - 1]]; j--) {
        guint x = by_step[j];
        by_step[j] = by_step[j - 1];
        by_step[j - 1] = x;
      }
    }
    memcpy(plan, cur->moves, sizeof(Move) * c->pp);
    for (guint st = 0; st < c->pp; st++)
      for (guint j = 0; acting[st] && j < c->n_types; j++)
        if (lockstep_move(c, fewest, st, by_step[j], &plan[st]))
          break;
    memcpy(cur->moves, plan, sizeof(Move) * c->pp);
    if (!evaluate(c, cur->moves, option, &cur->eval, error))
      return FALSE;
    /* A stage pushed over the budget by its neighbours' copies is sized again. */
    gboolean again = FALSE;
    for (guint st = 0; st < c->pp; st++) {
      acting[st] = !stage_fits(c, cur->eval, st);
      again |= acting[st];
    }
    if (!again)
      break;
  }
  *feasible = fits(c, cur->eval);
  return TRUE;
}

/* The lockstep search's descent: each stage in turn takes every other
 * type at its fewest (from lockstep_plan's sizes), each a run of the
 * pipeline, the faster that fits taken; until a round changes nothing.
 * (More layers than the fewest only add work to a stage once its copies
 * hide, and the plan's sizes are each type's fewest.) */
static gboolean
lockstep_descend(Ctx *c, Best *cur, const guint *fewest, GError **error)
{
  for (guint round = 0; round < 8 && FASTER(c->floor, cur->eval->step); round++) {
    double before = cur->eval->step;
    for (guint st = 0; st < c->pp; st++) {
      SimAction now = cur->moves[st].a;
      if (cur->moves[st].ka == 0)
        continue;
      for (guint k = 0; k < c->n_types; k++) {
        Move m;
        if (c->types[k] == now || !lockstep_move(c, fewest, st, k, &m))
          continue;
        trial_with(c, cur->moves, st, m);
        const Eval *e;
        if (!evaluate(c, c->trial, cur->option, &e, error))
          return FALSE;
        if (fits(c, e) && FASTER(e->step, cur->eval->step))
          best_take(c, cur, c->trial, cur->option, e);
      }
    }
    if (!FASTER(cur->eval->step, before))
      break;
  }
  return TRUE;
}

/* The proxy of `s` the lockstep search runs on: the same pipeline with
 * fewer micro-batches, as many as its schedule keeps in flight on the
 * first stage and one more (1F1B: pp + 1; interleaved: the least multiple
 * of pp above its warm-up, (virtual + 1) × pp), so that every stage holds
 * what it holds in the step, at a fraction of the run.  GPipe holds every
 * micro-batch: no proxy.  FALSE when the proxy would not be smaller. */
static gboolean
lockstep_proxy(const SimScenario *s, SimScenario *proxy)
{
  const SimParallel *par = &s->parallel;
  guint m = par->schedule == SIM_PIPE_1F1B          ? par->pp + 1
            : par->schedule == SIM_PIPE_INTERLEAVED ? (par->virtual_chunks + 1) * par->pp
                                                    : par->microbatches;
  if (m >= par->microbatches)
    return FALSE;
  *proxy = *s;
  proxy->parallel.microbatches = m;
  return TRUE;
}

/* The stages of `b`'s plan over the budget in the scenario's own run
 * (the proxy's sizes can fall short when copies lag over a longer step),
 * sized again in lockstep with their own type (keep: the first type),
 * until every stage fits or PLANNER_STAGES_REPAIR_ROUNDS rounds pass. */
static gboolean
lockstep_repair(Ctx *c, Best *b, GError **error)
{
  g_autofree gboolean *acting = g_new0(gboolean, c->pp);
  g_autofree guint *fewest = g_new(guint, (gsize)c->pp * SIM_ACTION_COUNT);
  for (guint round = 0; round < PLANNER_STAGES_REPAIR_ROUNDS && !fits(c, b->eval); round++) {
    for (guint k = 0; k < c->n_types; k++) {
      gboolean any = FALSE;
      for (guint st = 0; st < c->pp; st++) {
        const Move *m = &b->moves[st];
        acting[st] = !stage_fits(c, b->eval, st) && (m->ka == 0 ? k == 0 : m->a == c->types[k]);
        any |= acting[st];
      }
      if (!any)
        continue;
      if (!lockstep_fewest(c, b->option, b->moves, acting, k, NULL, fewest, error))
        return FALSE;
      for (guint st = 0; st < c->pp; st++)
        if (acting[st])
          lockstep_move(c, fewest, st, k, &b->moves[st]);
    }
    if (!evaluate(c, b->moves, b->option, &b->eval, error))
      return FALSE;
  }
  return TRUE;
}

/* The lockstep search under every schedule (on c->run_on) into `best`,
 * the sizes of each schedule into fewest[option × pp × SIM_ACTION_COUNT
 * ...]; then the descent from the fastest. */
static gboolean
lockstep_all(Ctx *c, Best *cur, Best *best, guint *fewest, GError **error)
{
  best->eval = NULL;
  for (guint o = 0; o < c->n_opts && (best->eval == NULL || FASTER(c->floor, best->eval->step)); o++) {
    gboolean feasible;
    /* Each schedule's sizes start from the previous one's (they seldom
     * differ by more than a layer), and past the first only the types the
     * plan so far takes are sized. */
    const guint *guess = o > 0 ? fewest + (gsize)(o - 1) * c->pp * SIM_ACTION_COUNT : NULL;
    guint types = G_MAXUINT;
    if (best->eval != NULL) {
      types = 0;
      for (guint st = 0; st < c->pp; st++)
        for (guint k = 0; k < c->n_types; k++)
          if (best->moves[st].ka > 0 && best->moves[st].a == c->types[k])
            types |= 1u << k;
    }
    if (!lockstep_plan(c, o, types, cur, guess, fewest + (gsize)o * c->pp * SIM_ACTION_COUNT, &feasible, error))
      return FALSE;
    if (feasible && (best->eval == NULL || FASTER(cur->eval->step, best->eval->step)))
      best_take(c, best, cur->moves, o, cur->eval);
  }
  return best->eval == NULL ||
         lockstep_descend(c, best, fewest + (gsize)best->option * c->pp * SIM_ACTION_COUNT, error);
}

/* The lockstep search (stages.h): on the proxy when there is one, then
 * the plan found run on the scenario itself and repaired where a stage
 * does not fit there; when that fails, the search again on the scenario
 * itself. */
static gboolean
lockstep(Ctx *c, Best *cur, Best *best, guint *fewest, GError **error)
{
  SimScenario proxy;
  if (lockstep_proxy(c->s, &proxy)) {
    c->run_on = &proxy;
    gboolean ok = lockstep_all(c, cur, best, fewest, error);
    c->run_on = c->s;
    if (!ok)
      return FALSE;
    if (best->eval != NULL) {
      if (!evaluate(c, best->moves, best->option, &best->eval, error) || !lockstep_repair(c, best, error))
        return FALSE;
      if (fits(c, best->eval))
        return TRUE;
    }
  }
  c->floor = INFINITY;
  return lockstep_all(c, cur, best, fewest, error);
}

static void
stage_clear(gpointer data)
{
  PlannerStage *st = data;
  g_array_unref(st->layers);
}

/* The plan's stages: layers and the peaks of its run. */
static GArray *
stages_of(const Ctx *c, const SimResult *r)
{
  GArray *stages = g_array_sized_new(FALSE, TRUE, sizeof(PlannerStage), c->pp);
  g_array_set_clear_func(stages, stage_clear);
  for (guint st = 0; st < c->pp; st++) {
    const SimResultStage *rs = &g_array_index(r->stages, SimResultStage, st);
    PlannerStage ps = { st, g_array_sized_new(FALSE, FALSE, sizeof(guint), stage_layers(c, st)),
                        rs->peak_device_bytes, rs->peak_host_bytes };
    g_array_append_vals(ps.layers, c->order + c->start[st], stage_layers(c, st));
    g_array_append_val(stages, ps);
  }
  return stages;
}

/* What no policy removes on the GPU where resident peaks: its stage's
 * static bytes, for the verdict's activation peak. */
static guint64
resident_static(const SimScenario *s, const SimResult *resident)
{
  guint worst = 0;
  for (guint st = 0; st < resident->stages->len; st++)
    if (g_array_index(resident->stages, SimResultStage, st).peak_device_bytes >
        g_array_index(resident->stages, SimResultStage, worst).peak_device_bytes)
      worst = st;
  return sim_lower_pipeline_stage_static(s->workload, &s->parallel, worst);
}

/* Bytes a type frees on a layer per second of recompute, for its order. */
static double
yield(const PlannerLayerCost *cost, SimAction t)
{
  guint64 all = cost->keep[SIM_ACTION_KEEP], kept = cost->keep[t];
  double freed = all > kept ? (double)(all - kept) : 0;
  return cost->redo[t] > 0 ? freed / cost->redo[t] : freed > 0 ? INFINITY : 0;
}

typedef struct {
  const PlannerLayerCost *cost;
  SimAction t;
} RankBy;

/* Most bytes per second first; g_qsort_with_data is stable, so model order
 * among equals. */
static gint
rank_cmp(gconstpointer a, gconstpointer b, gpointer data)
{
  const RankBy *by = data;
  double ya = yield(&by->cost[*(const guint *)a], by->t), yb = yield(&by->cost[*(const guint *)b], by->t);
  return ya > yb ? -1 : ya < yb ? 1 : 0;
}

PlannerPlan *
planner_plan_stages(const SimScenario *s, guint64 budget, SimFramework framework, GError **error)
{
  g_return_val_if_fail(sim_parallel_active(&s->parallel), NULL);
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  g_autoptr(SimPolicy) scratch = planner_plan_scratch_new(s, framework, error);
  if (scratch == NULL)
    return NULL;
  guint n = sim_workload_n_layers(s->workload), pp = s->parallel.pp, chunks = sim_parallel_chunks(&s->parallel);
  PlannerOption own = { scratch->async, scratch->prefetch, scratch->inflight };
  Ctx c = { .s = s, .run_on = s, .evaluator = evaluator, .policy = scratch, .n = n, .pp = pp, .dp = s->parallel.dp,
            .budget = budget };
  if (framework != SIM_FRAMEWORK_NONE) {
    c.opts = &own;
    c.n_opts = 1;
  } else {
    c.opts = planner_plan_options(&c.n_opts);
  }
  g_autofree PlannerLayerCost *cost = c.cost = g_new0(PlannerLayerCost, n);
  gboolean any_selective = FALSE;
  for (guint i = 0; i < n; i++)
    any_selective |= planner_plan_layer_cost(sim_workload_layer(s->workload, i), &cost[i]);
  /* The same moves as the single-GPU planner: the plain ones, and the
   * selective ones when some layer has selective tensors. */
  const SimAction plain[] = { SIM_ACTION_OFFLOAD, SIM_ACTION_RECOMPUTE, SIM_ACTION_RECOMPUTE_OFFLOAD,
                              SIM_ACTION_SELECTIVE, SIM_ACTION_SELECTIVE_OFFLOAD };
  c.n_types = any_selective ? 5 : 3;
  memcpy(c.types, plain, sizeof(SimAction) * c.n_types);

  /* Each stage's layers in model order: chunk st, st + pp, ... */
  g_autofree guint *bounds = g_new(guint, chunks + 1);
  sim_parallel_chunk_bounds(&s->parallel, n, bounds);
  g_autofree guint *order = c.order = g_new(guint, n);
  g_autofree guint *start = c.start = g_new0(guint, pp + 1);
  guint at = 0;
  for (guint st = 0; st < pp; st++) {
    start[st] = at;
    for (guint ch = st; ch < chunks; ch += pp)
      for (guint l = bounds[ch]; l < bounds[ch + 1]; l++)
        order[at++] = l;
  }
  start[pp] = at;
  g_assert(at == n);
  /* Each type's order per stage, over the layers it does something on. */
  g_autofree guint *count = c.count = g_new0(guint, pp * SIM_ACTION_COUNT);
  g_autofree guint *ranks = g_new(guint, (gsize)n * SIM_ACTION_COUNT);
  for (guint t = 0; t < SIM_ACTION_COUNT; t++) {
    c.rank[t] = ranks + (gsize)t * n;
    gboolean copies = t == SIM_ACTION_OFFLOAD || t == SIM_ACTION_SELECTIVE_OFFLOAD;
    for (guint st = 0; st < pp; st++) {
      guint *r = c.rank[t] + start[st], k = 0;
      for (guint i = start[st]; i < start[st + 1]; i++)
        if (t != SIM_ACTION_KEEP && cost[order[i]].useful[t])
          r[k++] = order[i];
      count[st * SIM_ACTION_COUNT + t] = k;
      RankBy by = { cost, (SimAction)t };
      if (!copies && k > 1)
        g_qsort_with_data(r, (gint)k, sizeof(guint), rank_cmp, &by);
    }
  }

  g_autoptr(GHashTable) cache = c.cache = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_autofree SimAction *actions = c.actions = g_new0(SimAction, n);
  g_autofree Move *trial = c.trial = g_new0(Move, pp);
  g_autofree SimAction *least_actions = c.least.actions = g_new0(SimAction, n);
  g_autofree Move *cur_moves = g_new0(Move, pp), *best_moves = g_new0(Move, pp);
  g_autofree SimAction *chosen = g_new0(SimAction, n); /* the plan's actions */
  Best cur = { cur_moves, 0, NULL }, best = { best_moves, 0, NULL };

  c.floor = INFINITY;
  gboolean search_lockstep = c.lockstep = lockstep_search(&c);
  g_autofree guint *fewest = g_new(guint, (gsize)c.n_opts * pp * SIM_ACTION_COUNT);
  for (gsize i = 0; i < (gsize)c.n_opts * pp * SIM_ACTION_COUNT; i++)
    fewest[i] = G_MAXUINT; /* no size known */
  if (search_lockstep && !lockstep(&c, &cur, &best, fewest, error))
    return NULL;
  /* A schedule whose plan reaches all keep's step leaves nothing to find. */
  for (guint o = 0; !search_lockstep && o < c.n_opts && (best.eval == NULL || FASTER(c.floor, best.eval->step)); o++) {
    gboolean feasible;
    if (!greedy(&c, o, &cur, &feasible, error))
      return NULL;
    if (!feasible)
      continue;
    if (!descend(&c, &cur, FALSE, error))
      return NULL;
    if (best.eval == NULL || FASTER(cur.eval->step, best.eval->step))
      best_take(&c, &best, cur.moves, o, cur.eval);
  }
  /* Two types per stage cost the most: from the best schedule's plan only. */
  if (!search_lockstep && best.eval != NULL && !descend(&c, &best, TRUE, error))
    return NULL;

  g_autoptr(PlannerPlan) p = g_new0(PlannerPlan, 1);
  p->feasible = best.eval != NULL;
  guint option;
  if (p->feasible) {
    build(&c, best.moves, chosen);
    option = best.option;
    Plan polished = { chosen, option, best.eval };
    if (!search_lockstep && !polish(&c, &polished, error))
      return NULL;
  } else {
    /* Nothing fits: the plan of the least worst-stage peak met. */
    memcpy(chosen, c.least.actions, sizeof(SimAction) * n);
    option = c.least.option;
    p->min_budget = (guint64)c.least.eval->worst;
  }
  p->policy = planner_plan_policy_new(scratch, chosen, n, &c.opts[option]);
  SimEvaluateOptions eval = { .budget = budget, .detail = TRUE };
  p->result = sim_evaluate(evaluator, s, p->policy, &eval, error);
  g_autoptr(SimPolicy) resident = sim_policy_new("resident", SIM_POLICY_RESIDENT);
  p->resident = p->result ? sim_evaluate(evaluator, s, resident, &eval, error) : NULL;
  if (p->result == NULL || p->resident == NULL)
    return NULL;
  p->stages = stages_of(&c, p->result);
  /* The bound (stages.h): no plan is faster than resident, none proven. */
  p->resident_bound = TRUE;
  p->lower_bound_ms = p->resident->step_ms;
  p->gap = p->lower_bound_ms > 0 ? MAX(0.0, p->result->step_ms / p->lower_bound_ms - 1) : 0;
  planner_plan_verdict(p, resident_static(s, p->resident));
  p->evaluations = c.evaluations;
  return g_steal_pointer(&p);
}
