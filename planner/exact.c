#include "planner/exact.h"

#include "engine/machine.h"
#include "lower/lower.h"

#include <math.h>
#include <string.h>

/* What one layer does under one action, read once from the lowering's own
 * fates (sim_lower_fates): the memory it allocates and frees at each op's
 * start and end, its copies, its compute. */

typedef struct {
  double d2h, h2d; /* seconds alone on the link */
  gint64 bytes;    /* device bytes a reload allocates when it starts */
  gint64 frees;    /* device bytes the offload frees when it ends (0: a mirror) */
} Copy;

typedef struct {
  gboolean useful; /* tried: the lowering runs this action as itself */
  gboolean off;    /* it copies */
  gboolean rec_op; /* a recompute op before the backward */
  double F, R, B;
  gint64 fwd_alloc; /* at the forward op's start: tensors that exist in the forward, input, workspace */
  gint64 keep;      /* held from the forward to the backward on the device */
  gint64 rec_alloc, rec_ws; /* at the recompute op's start (rebuilt tensors and workspace), workspace at its end */
  gint64 bwd_ws, bwd_free, grads; /* backward: workspace; all of the layer freed at its end; gradients made */
  guint c0, nc;                   /* its copies, in order: copies[c0 .. c0 + nc) */
  double d2h, h2d;                /* their sums */
  gint64 reload;                  /* bytes its reloads allocate */
} Act;

/* The backward of layer j from its start to the start of layer j - 1's,
 * per (a_j, a_{j-1}): the time, and the peak over base_b[j] + P_{j-1}. */
typedef struct {
  double dt;
  gint64 peak;
} Window;

enum { WIN_ASYNC, WIN_SYNC, WIN_RELAXED, WIN_KINDS };

struct PlannerExact {
  const SimLink *link;
  guint tp;         /* the workload's tensor-parallel ranks (its collectives) */
  guint n, na; /* layers, actions tried */
  double slow; /* compute_slowdown */
  Act *act;    /* [layer * na + action] */
  GArray *copies;
  gboolean head;
  double hF, hB, eF, eB;
  double opt;       /* the optimizer step after the embedding's backward, whatever the plan */
  gint64 h_saved, h_wsf, h_wsb, h_grads, held;
  gint64 base_f;    /* static + the embedding's saved tensors: the forward's floor */
  gint64 *base_b;   /* [j]: what is live besides layers <= j during layer j's backward */
  gint64 fixed;     /* the embedding's forward and backward peaks */
  double *rest;     /* [j]: sum over layers >= j of F + B, plus the head: no plan's remainder is faster */
  gint64 *minkeep;  /* [j]: sum over layers >= j of the least any action keeps */
  Window *win[WIN_KINDS]; /* [(j * (na + 1) + prev) * na + a]; prev == na: no layer below */
};

gboolean
planner_exact_supports(const SimPolicy *p)
{
  return p->framework == SIM_FRAMEWORK_NONE && p->pinned == SIM_PINNED_POOLED && !p->scope_all && !p->start_tensor &&
         !p->shared_stream && p->inflight_unit == SIM_INFLIGHT_GROUPS && p->free == SIM_FREE_COPY_END && !sim_policy_on_demand(p) &&
         !p->head_wait && p->dedup;
}

static inline gboolean
action_offloads(SimAction a)
{
  return a == SIM_ACTION_OFFLOAD || a == SIM_ACTION_SELECTIVE_OFFLOAD || a == SIM_ACTION_RECOMPUTE_OFFLOAD;
}

static inline const Act *
act_of(const PlannerExact *x, guint layer, guint a)
{
  return &x->act[layer * x->na + a];
}

static inline const Copy *
copy_of(const PlannerExact *x, const Act *a, guint c)
{
  return &g_array_index(x->copies, Copy, a->c0 + c);
}

static void
copy_add(PlannerExact *x, Act *a, guint64 bytes, gboolean frees)
{
  Copy c = { sim_link_copy_time(x->link, SIM_DIR_D2H, bytes, SIM_HOST_PINNED),
             sim_link_copy_time(x->link, SIM_DIR_H2D, bytes, SIM_HOST_PINNED),
             (gint64)bytes, frees ? (gint64)bytes : 0 };
  g_array_append_val(x->copies, c);
  a->nc++;
  a->d2h += c.d2h;
  a->h2d += c.h2d;
  a->reload += c.bytes;
}

/* Layer `layer` under `action`; `comm` its tensor-parallel collectives'
 * exposed seconds, forward and backward (sim_lower_layer_comm: the same
 * under every action, so the caller finds them once a layer). */
static void
act_fill(PlannerExact *x, const SimPolicy *policy, const SimLayer *layer, SimAction action, const double *comm,
         Act *a)
{
  guint len = layer->tensors->len;
  g_autofree guint8 *fates = g_new(guint8, MAX(len, 1u));
  SimAction low = sim_lower_fates(policy, layer, action, fates, NULL);
  gboolean full = low == SIM_ACTION_RECOMPUTE || low == SIM_ACTION_RECOMPUTE_OFFLOAD;
  gboolean sel = low == SIM_ACTION_SELECTIVE || low == SIM_ACTION_SELECTIVE_OFFLOAD;
  gboolean any_selective = FALSE;
  memset(a, 0, sizeof *a);
  a->off = action_offloads(low);
  a->rec_op = full || sel;
  /* The tensor-parallel collectives the compute waits for count as its
   * time (a recompute replays the forward's). */
  a->F = layer->forward + comm[0];
  a->B = layer->backward + comm[1];
  a->R = full ? a->F : sel ? sim_layer_selective_recompute(layer) : 0;
  a->fwd_alloc = (gint64)layer->workspace_bytes + (full ? (gint64)layer->input_bytes : 0);
  a->keep = low == SIM_ACTION_RECOMPUTE ? (gint64)layer->input_bytes : 0;
  a->rec_ws = a->rec_op ? (gint64)layer->workspace_bytes : 0;
  a->rec_alloc = a->rec_ws;
  a->bwd_ws = (gint64)layer->backward_workspace_bytes;
  a->bwd_free = a->bwd_ws + (full ? (gint64)layer->input_bytes : 0);
  a->grads = (gint64)layer->grad_bytes;
  a->c0 = x->copies->len;
  if (low == SIM_ACTION_RECOMPUTE_OFFLOAD)
    copy_add(x, a, layer->input_bytes, TRUE);
  for (guint k = 0; k < len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    gint64 b = (gint64)t->bytes;
    any_selective |= t->selective;
    switch ((SimFate)fates[k]) {
    case SIM_FATE_KEEP:
      a->fwd_alloc += b;
      a->keep += b;
      break;
    case SIM_FATE_OFFLOAD:
      a->fwd_alloc += b;
      copy_add(x, a, t->bytes, TRUE);
      break;
    case SIM_FATE_MIRROR:
      copy_add(x, a, t->bytes, FALSE);
      break;
    case SIM_FATE_KEPT_COPIED: /* only under a framework's hook scope, which the exact search does not run */
      a->fwd_alloc += b;
      a->keep += b;
      a->bwd_free += b;
      copy_add(x, a, t->bytes, FALSE);
      break;
    case SIM_FATE_DROP:
      a->fwd_alloc += b;
      a->rec_alloc += b;
      break;
    case SIM_FATE_FULL:
      a->rec_alloc += b;
      break;
    case SIM_FATE_ELSEWHERE:
      continue;
    }
    a->bwd_free += b;
  }
  gboolean selective_kind = action == SIM_ACTION_SELECTIVE || action == SIM_ACTION_SELECTIVE_OFFLOAD;
  a->useful = low == action && (!selective_kind || any_selective) &&
              (action != SIM_ACTION_RECOMPUTE_OFFLOAD || layer->input_bytes > 0);
}

/* ---- time: compute at rate 1, or 1 - slow while a copy is in flight ---- */

typedef struct {
  double a, b;
} Busy;

/* When `work` seconds of compute started at `start` end, the copies in
 * flight over busy[0..n) (sorted, disjoint). */
static double
advance(double start, double work, const Busy *busy, guint n, double slow)
{
  double t = start, rem = work;
  for (guint i = 0; i < n && rem > 0; i++) {
    if (busy[i].b <= t)
      continue;
    if (busy[i].a > t) {
      if (rem <= busy[i].a - t)
        return t + rem;
      rem -= busy[i].a - t;
      t = busy[i].a;
    }
    double room = (busy[i].b - t) * (1 - slow);
    if (rem <= room)
      return t + rem / (1 - slow);
    rem -= room;
    t = busy[i].b;
  }
  return t + rem;
}

/* ---- memory: a few events, their peak ---- */

typedef struct {
  double t;
  gint64 d; /* > 0 an allocation, < 0 a free */
} MemEvent;

/* A window's or the top's memory events and busy spans, on the stack.
 * The events are a layer's copies and ops, a few tens for a dense layer;
 * a layer of many experts has hundreds of copies (one per storage), and
 * past SCRATCH_EVENTS they move to the heap. */
#define SCRATCH_EVENTS 256
typedef struct {
  MemEvent *ev; /* `own`, or the heap once more are needed */
  guint n, cap;
  Busy busy[16];
  guint nb;
  MemEvent own[SCRATCH_EVENTS]; /* not zeroed: only ev[0 .. n) is read */
} Scratch;

static void
scratch_init(Scratch *s)
{
  s->ev = s->own;
  s->cap = SCRATCH_EVENTS;
  s->n = s->nb = 0;
}

static void
scratch_clear(Scratch *s)
{
  if (s->ev != s->own)
    g_free(s->ev);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Scratch, scratch_clear)

static void
mem_at(Scratch *s, double t, gint64 d)
{
  if (d == 0)
    return;
  if (s->n == s->cap) {
    s->cap *= 2;
    s->ev = s->ev == s->own ? g_memdup2(s->own, sizeof s->own) : s->ev;
    s->ev = g_renew(MemEvent, s->ev, s->cap);
  }
  s->ev[s->n] = (MemEvent){ t, d };
  s->n++;
}

static void
busy_add(Scratch *s, double a, double b)
{
  if (b <= a)
    return;
  g_assert(s->nb < G_N_ELEMENTS(s->busy));
  guint i = s->nb++;
  while (i > 0 && s->busy[i - 1].a > a) {
    s->busy[i] = s->busy[i - 1];
    i--;
  }
  s->busy[i] = (Busy){ a, b };
}

/* The events in time order, those at one instant in the order they were
 * made: an insertion sort, stable, so the time alone decides.  They are
 * made nearly in time order (a stream's events are), so it moves few:
 * qsort's merge sort cost a seventh of a 96-layer plan. */
static void
mem_sort(Scratch *s)
{
  for (guint i = 1; i < s->n; i++) {
    MemEvent e = s->ev[i];
    guint k = i;
    while (k > 0 && s->ev[k - 1].t > e.t) {
      s->ev[k] = s->ev[k - 1];
      k--;
    }
    s->ev[k] = e;
  }
}

/* The highest level the events reach from `level`, at an allocation
 * before `until` (G_MININT64: none); at one instant, in the order they
 * were made (the order the program's ops are).  `level` itself may be no
 * level the step has (frees before time 0 still to come). */
static gint64
mem_peak(Scratch *s, gint64 level, double until)
{
  mem_sort(s);
  gint64 peak = G_MININT64;
  for (guint i = 0; i < s->n; i++) {
    level += s->ev[i].d;
    if (s->ev[i].d > 0 && s->ev[i].t < until)
      peak = MAX(peak, level);
  }
  return peak;
}

/* The recompute and backward ops of a layer from `start`; returns their end. */
static double
backward_ops(Scratch *s, const Act *a, double start, double slow)
{
  double t = start;
  if (a->rec_op) {
    mem_at(s, t, a->rec_alloc);
    t = advance(t, a->R, s->busy, s->nb, slow);
    mem_at(s, t, -a->rec_ws);
  }
  mem_at(s, t, a->bwd_ws);
  t = advance(t, a->B, s->busy, s->nb, slow);
  mem_at(s, t, -a->bwd_free);
  mem_at(s, t, a->grads);
  return t;
}

/* Reload copies of `a` from `start`, one after another; returns their end. */
static double
reload_copies(const PlannerExact *x, Scratch *s, const Act *a, double start)
{
  double t = start;
  for (guint c = 0; c < a->nc; c++) {
    mem_at(s, t, copy_of(x, a, c)->bytes);
    t += copy_of(x, a, c)->h2d;
  }
  busy_add(s, start, t);
  return t;
}

/* Layer j's backward window under `kind` with action a and prev below it
 * (x->na: none). */
static Window
window_make(const PlannerExact *x, int kind, guint j, guint a, guint prev)
{
  g_auto(Scratch) s;
  scratch_init(&s);
  const Act *A = act_of(x, j, a);
  const Act *P = prev < x->na ? act_of(x, j - 1, prev) : NULL;
  /* Prefetch 1 reloads layer j - 1 from the window's start.  Under
   * prefetch 2 it was issued a layer earlier and has started, copy by
   * copy, no later than that: counting it from the start, at full
   * compute rate (the backward's frees come no earlier), is a lower bound
   * on that window's memory; its time is the alpha/beta recursion's. */
  gboolean reload_below = kind != WIN_SYNC && P && P->off;
  gint64 level = A->keep + (kind == WIN_SYNC ? 0 : A->reload);
  double start = 0, end_copies = 0;
  if (kind == WIN_SYNC && A->off)
    start = reload_copies(x, &s, A, 0);
  s.nb = 0; /* sync copies run on the compute stream: no compute beside them */
  if (reload_below)
    end_copies = reload_copies(x, &s, P, 0);
  double e = backward_ops(&s, A, start, kind == WIN_RELAXED ? 0 : x->slow);
  /* The level at the window's start is one the step has. */
  double dt = kind == WIN_RELAXED ? e : MAX(e, end_copies);
  return (Window){ dt, MAX(level, mem_peak(&s, level, INFINITY)) };
}

/* ---- construction ---- */

static void
stages_read(PlannerExact *x, const SimWorkload *w, const SimPolicy *policy)
{
  const SimLayer *e = w->embed, *h = w->head;
  gint64 e_saved = 0, e_wsf = 0, e_wsb = 0;
  Act scratch;
  if (e) {
    act_fill(x, policy, e, SIM_ACTION_KEEP, (const double[2]){ 0, 0 }, &scratch);
    e_saved = scratch.keep;
    e_wsf = (gint64)e->workspace_bytes;
    e_wsb = (gint64)e->backward_workspace_bytes;
    x->eF = e->forward;
    x->eB = e->backward;
  }
  x->base_f = (gint64)w->static_bytes + e_saved;
  x->head = h != NULL;
  if (h) {
    act_fill(x, policy, h, SIM_ACTION_KEEP, (const double[2]){ 0, 0 }, &scratch);
    x->h_saved = scratch.keep;
    x->h_wsf = (gint64)h->workspace_bytes;
    x->h_wsb = (gint64)h->backward_workspace_bytes;
    x->h_grads = (gint64)h->grad_bytes;
    x->hF = h->forward;
    x->hB = h->backward;
    x->held = (gint64)w->held_bytes;
  }
  g_array_set_size(x->copies, 0); /* stages keep: no copies */
  gint64 grads = x->h_grads;
  for (guint j = x->n; j-- > 0;) {
    x->base_b[j] = x->base_f + x->held + grads;
    grads += (gint64)sim_workload_layer(w, j)->grad_bytes;
  }
  /* The embedding's forward, and its backward with every gradient made
   * (its own appear at its end); then the optimizer step, with every
   * gradient and its transient (the lowering's last op, whatever the
   * plan). */
  x->fixed = MAX(x->base_f + e_wsf, x->base_f + x->held + grads + e_wsb);
  SimLowerOptimizer opt = sim_lower_optimizer_whole(w);
  x->opt = opt.seconds;
  x->fixed = MAX(x->fixed, (gint64)w->static_bytes + x->held + grads + (e ? (gint64)e->grad_bytes : 0) +
                             (gint64)opt.transient);
}

PlannerExact *
planner_exact_new(const SimScenario *s, const SimPolicy *policy, guint n_actions)
{
  g_return_val_if_fail(planner_exact_supports(policy), NULL);
  const SimWorkload *w = s->workload;
  PlannerExact *x = g_new0(PlannerExact, 1);
  x->link = &s->machine.link;
  x->tp = s->workload->tp;
  x->n = sim_workload_n_layers(w);
  x->na = n_actions;
  x->slow = x->link->compute_slowdown;
  x->copies = g_array_new(FALSE, FALSE, sizeof(Copy));
  x->base_b = g_new0(gint64, MAX(x->n, 1u));
  stages_read(x, w, policy);
  x->act = g_new0(Act, (gsize)x->n * x->na);
  for (guint i = 0; i < x->n; i++) {
    double comm[2];
    sim_lower_layer_comm(sim_workload_layer(w, i), x->link, x->tp, w->ep, &comm[0], &comm[1]);
    for (guint a = 0; a < x->na; a++)
      act_fill(x, policy, sim_workload_layer(w, i), (SimAction)a, comm, &x->act[i * x->na + a]);
  }
  x->rest = g_new0(double, x->n + 1);
  x->minkeep = g_new0(gint64, x->n + 1);
  x->rest[x->n] = x->hF + x->hB;
  for (guint j = x->n; j-- > 0;) {
    gint64 least = G_MAXINT64;
    for (guint a = 0; a < x->na; a++)
      if (act_of(x, j, a)->useful)
        least = MIN(least, act_of(x, j, a)->keep);
    x->minkeep[j] = x->minkeep[j + 1] + least;
    x->rest[j] = x->rest[j + 1] + act_of(x, j, SIM_ACTION_KEEP)->F + act_of(x, j, SIM_ACTION_KEEP)->B;
  }
  gsize cells = (gsize)x->n * (x->na + 1) * x->na;
  for (int k = 0; k < WIN_KINDS; k++) {
    x->win[k] = g_new0(Window, MAX(cells, 1u));
    for (guint j = 0; j < x->n; j++)
      for (guint prev = 0; prev <= x->na; prev++) {
        if ((j == 0) != (prev == x->na))
          continue;
        for (guint a = 0; a < x->na; a++)
          x->win[k][(j * (x->na + 1) + prev) * x->na + a] = window_make(x, k, j, a, prev);
      }
  }
  return x;
}

void
planner_exact_free(PlannerExact *x)
{
  if (x == NULL)
    return;
  g_free(x->act);
  g_array_unref(x->copies);
  g_free(x->base_b);
  g_free(x->rest);
  g_free(x->minkeep);
  for (int k = 0; k < WIN_KINDS; k++)
    g_free(x->win[k]);
  g_free(x);
}

gboolean
planner_exact_is_exact(const PlannerExact *x, const PlannerOption *o)
{
  (void)x;
  return !o->async || o->prefetch <= 1;
}

/* ---- the state after a layer's forward, and the step from it ---- */

/* Actions packed four to a word, the newest lowest: the top reads the last
 * four layers' actions, and the key a state is compared under holds those
 * its future reads. */
#define TAIL_NONE 0xffu
static inline guint
tail_get(guint32 tail, guint k)
{
  return (tail >> (8 * k)) & 0xffu;
}

typedef struct {
  double cost;   /* forward time so far plus the backward windows added (prefetch 2: t + alpha) */
  double cost_b; /* prefetch 2: t + beta, the time-to-go from the pending reload's end; -inf otherwise */
  double dprev;  /* when layer i - 1's copies end, from the compute stream's now; -inf when over */
  double rc;     /* when layer i's copies start, from now; -inf when it copies nothing */
  double rp;     /* when layer i - 1's copies started, from now (the top reads it) */
  gint64 P;      /* bytes kept by layers <= i */
  guint32 tail;  /* actions of layers i, i-1, i-2, i-3 (TAIL_NONE below layer 0) */
  guint32 parent;
  double f;      /* cost plus the bound on the rest: the beam keeps the least */
} State;

typedef struct {
  const PlannerExact *x;
  gboolean async;
  guint prefetch, inflight;
  guint top; /* layers at the top the final simulation covers */
  int wkind;
} Model;

static Model
model_of(const PlannerExact *x, const PlannerOption *o)
{
  Model m = { x, o->async, o->async ? MAX(o->prefetch, 1u) : 0, MAX(o->inflight, 1u), 0, WIN_SYNC };
  if (o->async) {
    m.top = MIN(2u, x->n);
    m.wkind = m.prefetch == 1 ? WIN_ASYNC : WIN_RELAXED;
  }
  return m;
}

static State
state_first(const PlannerExact *x)
{
  return (State){ x->eF + x->eB + x->opt, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, 0xffffffffu, 0, 0 };
}

/* Layer j's forward (and, below the top, its backward window) from `st`
 * with action a: the next state in *out; returns the highest level the
 * step reaches (the forward op's start, the backward window). */
static gint64
step_layer(const Model *m, const State *st, guint j, guint a, State *out)
{
  const PlannerExact *x = m->x;
  const Act *A = act_of(x, j, a);
  guint cur = tail_get(st->tail, 0), below = tail_get(st->tail, 1);
  const Act *C = cur != TAIL_NONE ? act_of(x, j - 1, cur) : NULL;
  gboolean has_cur = C && st->rc > -INFINITY;
  double d_cur = has_cur ? st->rc + C->d2h : -INFINITY;
  double end;
  gint64 pending = 0;
  if (m->async) {
    double start = MAX(0, m->inflight == 1 ? d_cur : st->dprev);
    double D = MAX(d_cur, st->dprev); /* the d2h engine is busy from `start` to D */
    if (has_cur) {
      double t = st->rc;
      for (guint c = 0; c < C->nc; c++) {
        t += copy_of(x, C, c)->d2h;
        if (t > start)
          pending += copy_of(x, C, c)->frees;
      }
    }
    Busy b = { start, D };
    end = advance(start, A->F, &b, D > start, x->slow);
    out->rc = A->off ? MAX(0, D - end) : -INFINITY;
    out->dprev = d_cur - end > 0 ? d_cur - end : -INFINITY;
    out->rp = has_cur ? st->rc - end : -INFINITY;
  } else {
    end = A->F + A->d2h;
    out->rc = out->dprev = out->rp = -INFINITY;
  }
  gint64 level = x->base_f + st->P + pending + A->fwd_alloc;
  out->cost = st->cost + end;
  out->cost_b = st->cost_b + end;
  if (j + m->top < x->n) {
    guint prev = j == 0 ? x->na : cur;
    const Window *w = &x->win[m->wkind][(j * (x->na + 1) + prev) * x->na + a];
    level = MAX(level, x->base_b[j] + st->P + w->peak);
    if (m->wkind == WIN_RELAXED) {
      /* The time-to-go from (start of j's backward, end of the pending
       * reload of j - 1) is max(s + alpha_j, h + beta_j), max-plus:
       * alpha_j = max(W_j + alpha_{j-1}, r_{j-2} + beta_{j-1}) and
       * beta_j = max(alpha_{j-1} when j - 1 reloads, r_{j-2} + beta_{j-1}). */
      double r2 = j >= 2 && below != TAIL_NONE && act_of(x, j - 2, below)->off ? act_of(x, j - 2, below)->h2d
                                                                                : -INFINITY;
      gboolean reloads = C && C->off;
      /* Its compute is slowed at least while the reload of j - 2 it
       * issues runs (the h2d engine is busy from the window's start). */
      Busy busy = { 0, r2 };
      double W = r2 > 0 ? advance(0, w->dt, &busy, 1, x->slow) : w->dt;
      double via = r2 + out->cost_b;
      double alpha = MAX(W + out->cost, via);
      out->cost_b = MAX(reloads ? out->cost : -INFINITY, via);
      out->cost = alpha;
    } else {
      out->cost += w->dt;
    }
  }
  out->P = st->P + A->keep;
  out->tail = st->tail << 8 | a;
  return level;
}

/* Reload of the layer k below the top (n - 1 - k) in the top's simulation. */
typedef struct {
  double h[4];  /* when each reload ends */
  double d[2];  /* when the top two layers' offloads end */
  double free;  /* when the h2d engine is free */
} Reloads;

static void
top_reload(const PlannerExact *x, Scratch *s, Reloads *r, guint32 tail, guint k, double issue)
{
  guint a = tail_get(tail, k);
  if (k >= x->n || a == TAIL_NONE || !act_of(x, x->n - 1 - k, a)->off)
    return;
  double start = MAX(issue, r->free);
  if (k < 2)
    start = MAX(start, r->d[k]);
  r->h[k] = r->free = reload_copies(x, s, act_of(x, x->n - 1 - k, a), start);
}

/* The top, from the state after the last layer's forward (time 0): the
 * d2h copies still running, the head both ways, the reloads at the
 * boundary and the backward of the last `top` layers.  Returns the step;
 * *peak the highest level. */
static double
step_top(const Model *m, const State *st, gint64 *peak)
{
  const PlannerExact *x = m->x;
  g_auto(Scratch) s;
  scratch_init(&s);
  gint64 level = x->base_f + st->P;
  Reloads r = { { -INFINITY, -INFINITY, -INFINITY, -INFINITY }, { -INFINITY, -INFINITY }, -INFINITY };
  double sigma[2] = { st->rc, st->rp };
  for (guint k = 0; k < 2 && m->async; k++) {
    guint a = tail_get(st->tail, k);
    if (k >= x->n || a == TAIL_NONE || sigma[k] == -INFINITY)
      continue;
    const Act *A = act_of(x, x->n - 1 - k, a);
    double t = sigma[k];
    for (guint c = 0; c < A->nc; c++) {
      level += copy_of(x, A, c)->frees;
      t += copy_of(x, A, c)->d2h;
      mem_at(&s, t, -copy_of(x, A, c)->frees);
    }
    busy_add(&s, sigma[k], t);
    r.d[k] = t;
  }
  double t = 0;
  if (x->head) {
    mem_at(&s, 0, x->h_saved + x->h_wsf);
    t = advance(0, x->hF, s.busy, s.nb, x->slow);
    mem_at(&s, t, -x->h_wsf);
    mem_at(&s, t, x->held);
  }
  for (guint k = 0; m->async && k < m->prefetch && k < 4; k++)
    top_reload(x, &s, &r, st->tail, k, t); /* the boundary, the top first */
  if (x->head) {
    mem_at(&s, t, x->h_wsb);
    t = advance(t, x->hB, s.busy, s.nb, x->slow);
    mem_at(&s, t, -x->h_saved - x->h_wsb);
    mem_at(&s, t, x->h_grads);
  }
  for (guint k = 0; k < m->top; k++) {
    double start = MAX(t, r.h[k]);
    if (k + m->prefetch < 4)
      top_reload(x, &s, &r, st->tail, k + m->prefetch, start);
    t = backward_ops(&s, act_of(x, x->n - 1 - k, tail_get(st->tail, k)), start, x->slow);
  }
  /* The first layer below the top starts its backward when its reload is back. */
  double next = m->top < x->n ? MAX(t, r.h[m->top]) : t;
  double pending = m->top + 1 < 4 ? r.h[m->top + 1] : -INFINITY;
  *peak = mem_peak(&s, level, m->wkind == WIN_RELAXED ? next : INFINITY);
  return MAX(st->cost + next, st->cost_b + pending);
}

void
planner_exact_eval(const PlannerExact *x, const PlannerOption *o, const SimAction *actions, double *step,
                   gint64 *peak)
{
  Model m = model_of(x, o);
  State st = state_first(x), next;
  gint64 high = x->fixed, top;
  for (guint j = 0; j < x->n; j++) {
    high = MAX(high, step_layer(&m, &st, j, (guint)actions[j], &next));
    st = next;
  }
  *step = step_top(&m, &st, &top);
  *peak = MAX(high, top);
}

/* ---- the dynamic program ---- */

/* How many of a state's last actions its future reads at layer j: its
 * own (the next window), the one below under prefetch 2, and any of the
 * last four layers (the top reads them). */
static guint
key_depth(const Model *m, guint j)
{
  guint depth = m->wkind == WIN_RELAXED ? 2 : 1;
  if (j + 4 >= m->x->n)
    depth = MAX(depth, j + 4 - m->x->n + 1);
  return MIN(depth, 4u);
}

/* Candidates in order of (key, cost): a least-significant-digit radix
 * sort of the cost's bits (positive doubles order as their bits do) and
 * then the key's, a byte at a time, skipping bytes all share.  Linear:
 * the dynamic program sorts every layer's candidates. */
typedef struct {
  guint64 cost; /* the bits of a non-negative double */
  guint64 p;    /* bytes kept: ties by the fewest */
  guint32 key;
  guint32 index;
} Sorted;

/* One counting pass on the byte of each item's `field` (0: cost, 1: key)
 * at `shift`; FALSE when every item has the same byte (nothing moves). */
static gboolean
radix_pass(const Sorted *a, Sorted *b, guint n, int field, guint shift)
{
  guint count[257] = { 0 };
  if (field == 0)
    for (guint i = 0; i < n; i++)
      count[(a[i].cost >> shift & 0xffu) + 1]++;
  else
    for (guint i = 0; i < n; i++)
      count[(a[i].key >> shift & 0xffu) + 1]++;
  guint first = field == 0 ? (guint)(a[0].cost >> shift & 0xffu) : a[0].key >> shift & 0xffu;
  if (count[first + 1] == n)
    return FALSE;
  for (guint d = 0; d < 256; d++)
    count[d + 1] += count[d];
  if (field == 0)
    for (guint i = 0; i < n; i++)
      b[count[a[i].cost >> shift & 0xffu]++] = a[i];
  else
    for (guint i = 0; i < n; i++)
      b[count[a[i].key >> shift & 0xffu]++] = a[i];
  return TRUE;
}

static int
sorted_p_cmp(const void *pa, const void *pb)
{
  const Sorted *a = pa, *b = pb;
  return a->p < b->p ? -1 : a->p > b->p;
}

/* By (key, cost, bytes): radix passes on the cost's bytes and the key's,
 * then each run of equal key and cost (sums of the same times in another
 * order: common without compute slowdown) by bytes. */
static void
radix_sort(GArray *items, GArray *tmp, guint key_bytes)
{
  guint n = items->len;
  if (n == 0)
    return;
  g_array_set_size(tmp, n);
  Sorted *a = (Sorted *)items->data, *b = (Sorted *)tmp->data;
  for (guint pass = 0; pass < 8 + key_bytes; pass++) {
    if (!radix_pass(a, b, n, pass < 8 ? 0 : 1, 8 * (pass < 8 ? pass : pass - 8)))
      continue;
    Sorted *t = a;
    a = b;
    b = t;
  }
  if (a != (Sorted *)items->data)
    memcpy(items->data, a, n * sizeof(Sorted));
  Sorted *v = (Sorted *)items->data;
  for (guint i = 0, j; i < n; i = j) {
    for (j = i + 1; j < n && v[j].key == v[i].key && v[j].cost == v[i].cost; j++)
      ;
    if (j - i > 1)
      qsort(v + i, j - i, sizeof(Sorted), sorted_p_cmp);
  }
}

static inline guint64
cost_bits(double cost)
{
  guint64 bits;
  g_assert(cost >= 0);
  memcpy(&bits, &cost, sizeof bits);
  return bits;
}

static inline gboolean
dominates(const State *k, const State *c)
{
  return k->P <= c->P && k->dprev <= c->dprev && k->cost_b <= c->cost_b;
}

/* A Fenwick tree of minima over ranks 1..n: the least value at a rank <= r. */
typedef struct {
  double *v;
  guint n;
} MinTree;

static void
mintree_reset(MinTree *t, GArray *store, guint n)
{
  g_array_set_size(store, n + 1);
  t->v = (double *)store->data;
  t->n = n;
  for (guint i = 0; i <= n; i++)
    t->v[i] = INFINITY;
}

static void
mintree_put(MinTree *t, guint r, double value)
{
  for (; r <= t->n; r += r & -r)
    t->v[r] = MIN(t->v[r], value);
}

static double
mintree_least(const MinTree *t, guint r)
{
  double least = INFINITY;
  for (; r > 0; r -= r & -r)
    least = MIN(least, t->v[r]);
  return least;
}

/* Non-negative byte counts in order: a radix sort, a byte at a time,
 * skipping bytes all share. */
static void
p_sort(gint64 *v, guint n, GArray *tmp)
{
  g_array_set_size(tmp, n);
  gint64 *a = v, *b = (gint64 *)tmp->data;
  for (guint pass = 0; pass < 8; pass++) {
    guint count[257] = { 0 };
    for (guint i = 0; i < n; i++)
      count[((guint64)a[i] >> (8 * pass) & 0xffu) + 1]++;
    if (n == 0 || count[((guint64)a[0] >> (8 * pass) & 0xffu) + 1] == n)
      continue;
    for (guint d = 0; d < 256; d++)
      count[d + 1] += count[d];
    for (guint i = 0; i < n; i++)
      b[count[(guint64)a[i] >> (8 * pass) & 0xffu]++] = a[i];
    gint64 *t = a;
    a = b;
    b = t;
  }
  if (a != v)
    memcpy(v, a, n * sizeof(gint64));
}

/* How many of the sorted distinct values[0..n) are <= p: the rank of p
 * when it is one of them (1-based), 0 when all are above. */
static guint
p_rank(const gint64 *values, guint n, gint64 p)
{
  guint lo = 0, hi = n;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (values[mid] <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

typedef struct {
  GArray *sorted, *tmp, *ps, *ptmp, *t1, *t2, *rest;
} FrontScratch;

#define REST_SCAN 64

/* The states of `cand` no other state dominates, into `front`.  Within a
 * key, by cost: a state goes unless one kept before it (no dearer) has no
 * more bytes, no later d2h and no later pending reload.  Its copies' start
 * is max(0, dprev) (the forward of the next layer waited for the copies
 * before), so dprev says the d2h state; a Fenwick tree over the bytes
 * holds the least dprev of kept states with no pending reload (every
 * state under prefetch 1 and sync), another the least pending reload of
 * kept states whose d2h is idle, and the few with both are a list.
  At the
 * last layer every state is kept: the top reads more of it. */
static void
front_keep(const Model *m, guint j, GArray *cand, GArray *front, FrontScratch *fs)
{
  guint depth = key_depth(m, j);
  guint32 mask = depth >= 4 ? 0xffffffffu : (1u << (8 * depth)) - 1;
  g_array_set_size(front, 0);
  if (j + 1 == m->x->n) {
    g_array_append_vals(front, cand->data, cand->len);
    return;
  }
  GArray *sorted = fs->sorted;
  g_array_set_size(sorted, cand->len);
  for (guint i = 0; i < cand->len; i++) {
    const State *c = &g_array_index(cand, State, i);
    g_array_index(sorted, Sorted, i) = (Sorted){ cost_bits(c->cost), (guint64)c->P, c->tail & mask, i };
  }
  radix_sort(sorted, fs->tmp, depth);
  for (guint i = 0; i < sorted->len;) {
    guint32 key = g_array_index(sorted, Sorted, i).key;
    guint end = i;
    while (end < sorted->len && g_array_index(sorted, Sorted, end).key == key)
      end++;
    /* The group's distinct byte counts, for the trees' ranks. */
    g_array_set_size(fs->ps, end - i);
    gint64 *ps = (gint64 *)fs->ps->data;
    for (guint k = i; k < end; k++)
      ps[k - i] = g_array_index(cand, State, g_array_index(sorted, Sorted, k).index).P;
    p_sort(ps, end - i, fs->ptmp);
    guint np = 0;
    for (guint k = 0; k < end - i; k++)
      if (np == 0 || ps[np - 1] != ps[k])
        ps[np++] = ps[k];
    MinTree by_dprev, by_pending;
    mintree_reset(&by_dprev, fs->t1, np);
    mintree_reset(&by_pending, fs->t2, np);
    g_array_set_size(fs->rest, 0);
    for (; i < end; i++) {
      const State *c = &g_array_index(cand, State, g_array_index(sorted, Sorted, i).index);
      guint r = p_rank(ps, np, c->P);
      gboolean dominated = mintree_least(&by_dprev, r) <= c->dprev || mintree_least(&by_pending, r) <= c->cost_b;
      /* The list is scanned from its newest, at most REST_SCAN of it: a
       * dominated state kept costs states, never the optimum. */
      for (guint k = fs->rest->len, seen = 0; k-- > 0 && seen < REST_SCAN && !dominated; seen++)
        dominated = dominates(&g_array_index(front, State, g_array_index(fs->rest, guint32, k)), c);
      if (dominated)
        continue;
      if (c->cost_b == -INFINITY)
        mintree_put(&by_dprev, r, c->dprev);
      if (c->dprev == -INFINITY)
        mintree_put(&by_pending, r, c->cost_b);
      if (c->cost_b > -INFINITY && c->dprev > -INFINITY) {
        guint32 at = front->len;
        g_array_append_val(fs->rest, at);
      }
      g_array_append_val(front, *c);
    }
  }
}

/* ---- a bound on what the layers above must add ---- */

/* What layer g's action adds to the step over its forward and backward,
 * at least, given the action below it (x->na: none): its backward window's
 * time less the backward (under prefetch 1: its recompute and the reload
 * of the layer below it, exactly; sync: also its copies, both ways),
 * under one group in flight the wait of its forward for the copies below,
 * under two what its copies cost the forward (they run inside it, beside
 * the next layer's forward alone);
 * at the top, the recompute alone. */
static double
extra_of(const Model *m, guint g, guint a, guint prev)
{
  const PlannerExact *x = m->x;
  const Act *A = act_of(x, g, a);
  double extra = A->R;
  if (g + m->top < x->n) {
    extra = x->win[m->wkind][(g * (x->na + 1) + prev) * x->na + a].dt - A->B;
    if (m->wkind == WIN_RELAXED && prev < x->na && act_of(x, g - 1, prev)->off && g + 1 < x->n) {
      /* Prefetch 2: the reload of g - 1 is hidden by the backward of g
       * and g + 1 at most, and the stalls at two adjacent layers are at
       * least what it is not: half of that to each layer below. */
      double W_up = 0;
      for (guint b = 0; b < x->na; b++)
        if (act_of(x, g + 1, b)->useful)
          W_up = MAX(W_up, act_of(x, g + 1, b)->R + act_of(x, g + 1, b)->B);
      extra += 0.5 * MAX(0, act_of(x, g - 1, prev)->h2d - (A->R + A->B) - W_up);
    }
  }
  if (!m->async)
    extra += A->d2h;
  else if (m->inflight == 1 && prev < x->na)
    extra += act_of(x, g - 1, prev)->d2h;
  else if (m->inflight == 2 && g + 3 <= x->n) {
    /* Its copies end before the forward of g + 2 starts: meanwhile the
     * compute runs the forward of g + 1 at 1 - slow, or waits. */
    double F_next = act_of(x, g + 1, SIM_ACTION_KEEP)->F;
    extra += MAX(x->slow * A->d2h, A->d2h - F_next);
  }
  return MAX(0, extra);
}

/* A Lagrangian bound on the rest of the step: with a price lambda per byte
 * kept, H_g(prev, lambda) = the least over the actions of layers >= g of
 * their extra time plus lambda times their bytes kept, by a dynamic
 * program from the top (layer pairs exactly: the windows).  Every plan of
 * those layers that keeps at most `cap` bytes adds at least
 * H - lambda cap, for every lambda >= 0: the bound takes the best of a
 * geometric grid. */
#define LAGRANGE_POINTS 16

typedef struct {
  double lambda[LAGRANGE_POINTS]; /* seconds per byte, the first 0 */
  double *h;                      /* [((g * (na + 1)) + prev) * LAGRANGE_POINTS + k], g up to n */
  gint64 head;                    /* what the head's forward adds on top of the bytes kept */
} Bound;

static void
bound_build(const Model *m, Bound *bd)
{
  const PlannerExact *x = m->x;
  guint n = x->n, na = x->na;
  /* The grid spans the prices the layers offer: extra time per byte saved. */
  double lo = INFINITY, hi = 0;
  for (guint g = 0; g < n; g++) {
    gint64 all = act_of(x, g, SIM_ACTION_KEEP)->keep;
    for (guint a = 0; a < na; a++) {
      const Act *A = act_of(x, g, a);
      double e = extra_of(m, g, a, g ? SIM_ACTION_KEEP : na);
      if (!A->useful || A->keep >= all || e <= 0)
        continue;
      double r = e / (double)(all - A->keep);
      lo = MIN(lo, r);
      hi = MAX(hi, r);
    }
  }
  bd->lambda[0] = 0;
  for (guint k = 1; k < LAGRANGE_POINTS; k++)
    bd->lambda[k] = hi > 0 ? lo * 0.5 * pow(4 * hi / lo, (double)(k - 1) / (LAGRANGE_POINTS - 2)) : 0;
  bd->h = g_new0(double, (gsize)(n + 1) * (na + 1) * LAGRANGE_POINTS);
  for (guint g = n; g-- > 0;)
    for (guint prev = 0; prev <= na; prev++) {
      if ((g == 0) != (prev == na))
        continue;
      double *h = &bd->h[((gsize)g * (na + 1) + prev) * LAGRANGE_POINTS];
      for (guint k = 0; k < LAGRANGE_POINTS; k++)
        h[k] = INFINITY;
      for (guint a = 0; a < na; a++) {
        const Act *A = act_of(x, g, a);
        if (!A->useful)
          continue;
        double e = extra_of(m, g, a, prev);
        const double *up = &bd->h[((gsize)(g + 1) * (na + 1) + a) * LAGRANGE_POINTS];
        for (guint k = 0; k < LAGRANGE_POINTS; k++)
          h[k] = MIN(h[k], e + bd->lambda[k] * (double)A->keep + (g + 1 < n ? up[k] : 0));
      }
    }
  bd->head = x->head ? x->h_saved + x->h_wsf : 0;
}

/* At least what layers >= g (the one below acting `prev`) add when they
 * may keep `cap` bytes. */
static double
bound_rest(const Bound *bd, const PlannerExact *x, guint g, guint prev, double cap)
{
  if (g >= x->n)
    return 0;
  const double *h = &bd->h[((gsize)g * (x->na + 1) + prev) * LAGRANGE_POINTS];
  double best = 0;
  for (guint k = 0; k < LAGRANGE_POINTS; k++)
    best = MAX(best, h[k] - bd->lambda[k] * cap);
  return best;
}

/* The beam: at most `beam` states per key, those of least f. */
static gint
f_cmp(gconstpointer pa, gconstpointer pb, gpointer data)
{
  const State *a = pa, *b = pb;
  guint32 mask = GPOINTER_TO_UINT(data);
  if ((a->tail & mask) != (b->tail & mask))
    return (a->tail & mask) < (b->tail & mask) ? -1 : 1;
  return a->f < b->f ? -1 : a->f > b->f;
}

static void
front_narrow(const Model *m, guint j, GArray *front, guint beam)
{
  guint depth = key_depth(m, j);
  guint32 mask = depth >= 4 ? 0xffffffffu : (1u << (8 * depth)) - 1;
  g_qsort_with_data(front->data, (gint)front->len, sizeof(State), f_cmp, GUINT_TO_POINTER(mask));
  guint kept = 0;
  for (guint i = 0, run = 0; i < front->len; i++) {
    const State *st = &g_array_index(front, State, i);
    run = i > 0 && (st->tail & mask) == (g_array_index(front, State, i - 1).tail & mask) ? run + 1 : 0;
    if (run < beam)
      g_array_index(front, State, kept++) = *st;
  }
  g_array_set_size(front, kept);
}

/* What a plan is read back from: each kept state's parent and action. */
typedef struct {
  guint32 parent;
  guint32 a;
} Back;

gboolean
planner_exact_solve(const PlannerExact *x, const PlannerOption *o, guint64 budget, double cutoff, guint beam,
                    SimAction *actions, double *step, PlannerExactStats *stats)
{
  Model m = model_of(x, o);
  PlannerExactStats local = { 0 };
  if (stats == NULL)
    stats = &local;
  if (x->fixed > (gint64)budget)
    return FALSE;
  guint n = x->n;
  /* Per layer only what the plan is read back from (8 bytes a state);
   * whole states for the layer being built and the one before. */
  g_autoptr(GPtrArray) backs = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  g_autoptr(GArray) cand = g_array_new(FALSE, FALSE, sizeof(State));
  g_autoptr(GArray) prev = g_array_new(FALSE, FALSE, sizeof(State));
  g_autoptr(GArray) front = g_array_new(FALSE, FALSE, sizeof(State));
  g_autoptr(GArray) sorted = g_array_new(FALSE, FALSE, sizeof(Sorted));
  g_autoptr(GArray) ps = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_autoptr(GArray) t1 = g_array_new(FALSE, FALSE, sizeof(double));
  g_autoptr(GArray) t2 = g_array_new(FALSE, FALSE, sizeof(double));
  g_autoptr(GArray) rest = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autoptr(GArray) tmp = g_array_new(FALSE, FALSE, sizeof(Sorted));
  g_autoptr(GArray) ptmp = g_array_new(FALSE, FALSE, sizeof(gint64));
  FrontScratch fs = { sorted, tmp, ps, ptmp, t1, t2, rest };
  State first = state_first(x);
  g_array_append_val(prev, first);
  double top_b = 0; /* backward of the top layers processed so far: in no window yet */
  Bound bound;
  bound_build(&m, &bound);
  gboolean alive = TRUE;
  for (guint j = 0; j < n && alive; j++) {
    if (j + m.top >= n)
      top_b += act_of(x, j, SIM_ACTION_KEEP)->B;
    /* Room for every successor, written in place: appending one at a time
     * was a sixth of a 96-layer plan. */
    g_array_set_size(cand, prev->len * x->na);
    State *out = (State *)cand->data;
    guint kept = 0;
    for (guint i = 0; i < prev->len; i++) {
      const State *st = &g_array_index(prev, State, i);
      for (guint a = 0; a < x->na; a++) {
        if (!act_of(x, j, a)->useful)
          continue;
        State *next = &out[kept];
        gint64 level = step_layer(&m, st, j, a, next);
        if (level > (gint64)budget || x->base_f + next->P + x->minkeep[j + 1] > (gint64)budget)
          continue;
        double cap = (double)budget - (double)(x->base_f + next->P + bound.head);
        next->f = next->cost + x->rest[j + 1] + top_b + bound_rest(&bound, x, j + 1, a, cap);
        if (next->f >= cutoff)
          continue;
        next->parent = i;
        kept++;
      }
    }
    g_array_set_size(cand, kept);
    front_keep(&m, j, cand, front, &fs);
    if (beam && j + 1 < n)
      front_narrow(&m, j, front, beam);
    stats->states += front->len;
    GArray *back = g_array_sized_new(FALSE, FALSE, sizeof(Back), front->len);
    for (guint i = 0; i < front->len; i++) {
      const State *st = &g_array_index(front, State, i);
      Back b = { st->parent, tail_get(st->tail, 0) };
      g_array_append_val(back, b);
    }
    g_ptr_array_add(backs, back);
    alive = front->len > 0;
    GArray *t = prev;
    prev = front;
    front = t;
  }
  g_free(bound.h);
  if (!alive)
    return FALSE;
  double best = cutoff;
  gint64 best_at = -1;
  for (guint i = 0; i < prev->len; i++) {
    gint64 peak;
    double v = step_top(&m, &g_array_index(prev, State, i), &peak);
    if (peak <= (gint64)budget && v < best) {
      best = v;
      best_at = i;
    }
  }
  if (best_at < 0)
    return FALSE;
  guint32 at = (guint32)best_at;
  for (guint j = n; j-- > 0;) {
    const Back *b = &g_array_index((GArray *)g_ptr_array_index(backs, j), Back, at);
    actions[j] = (SimAction)b->a;
    at = b->parent;
  }
  *step = best;
  return TRUE;
}

double
planner_exact_bound(const PlannerExact *x, const PlannerOption *o, guint64 budget)
{
  Model m = model_of(x, o);
  Bound bound;
  bound_build(&m, &bound);
  State first = state_first(x);
  double cap = (double)budget - (double)(x->base_f + bound.head);
  double least = first.cost + x->rest[0] + bound_rest(&bound, x, 0, x->na, cap);
  g_free(bound.h);
  return least;
}
