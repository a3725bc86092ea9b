#include "lower.h"
#include "program_private.h" /* the inline builders: a program per candidate */


/* What happens to one saved tensor of a layer. */
typedef enum {
  FATE_KEEP,    /* stays on the device from forward to backward */
  FATE_OFFLOAD, /* goes to the host and comes back */
  FATE_DROP,    /* freed after the forward, recomputed before the backward (selective) */
  FATE_FULL,    /* never kept: the whole forward is recomputed (full checkpointing) */
  FATE_ELSEWHERE, /* not a device storage of this layer (sim_tensor_on_device): no memory, never copied */
} Fate;

typedef struct {
  SimProgram *p;
  const SimWorkload *w;
  const SimPolicy *policy;
  const SimLink *link;
  GArray *actions; /* SimAction per layer, after dropping offloads with nothing to move */
  guint32 *ev_d2h; /* per layer: its group is on the host (async), or SIM_NO_EVENT */
  guint32 *ev_h2d; /* per layer: its group is back on the device (async), or SIM_NO_EVENT */
  guint32 label_fwd, label_bwd, label_recompute, label_input, label_workspace, label_pin;
  guint32 label_reloaded, label_fwd_done, label_offloaded, label_due, label_started, label_boundary;
  guint32 *labels; /* every layer tensor's interned name: labels[first[i] + k] */
  guint8 *fates;   /* every layer tensor's Fate under its layer's action, same indexing */
  guint *first;
} Lower;

static gboolean
policy_selects(const SimPolicy *p, guint layer)
{
  return p->selected == NULL || (layer < p->selected->len && g_array_index(p->selected, gboolean, layer));
}

/* The action of each layer, for a model of n_layers: a new SimAction array.
 * Every policy kind reduces to this, so nothing below is kind-specific. */
static GArray *
policy_actions(const SimPolicy *p, guint n_layers)
{
  GArray *actions = g_array_sized_new(FALSE, TRUE, sizeof(SimAction), n_layers);
  g_array_set_size(actions, n_layers);
  for (guint i = 0; i < n_layers; i++) {
    SimAction a = SIM_ACTION_KEEP;
    switch (p->kind) {
    case SIM_POLICY_RESIDENT:
      break;
    case SIM_POLICY_OFFLOAD:
      if (policy_selects(p, i) && i + p->keep_last < n_layers)
        a = SIM_ACTION_OFFLOAD;
      break;
    case SIM_POLICY_CHECKPOINT:
      if (policy_selects(p, i) && i % p->every == 0)
        a = p->selective ? SIM_ACTION_SELECTIVE : SIM_ACTION_RECOMPUTE;
      break;
    case SIM_POLICY_PLAN:
      g_assert(p->actions != NULL && p->actions->len == n_layers);
      a = g_array_index(p->actions, SimAction, i);
      break;
    }
    g_array_index(actions, SimAction, i) = a;
  }
  return actions;
}

static inline const SimLayer *
layer_at(const Lower *l, guint i)
{
  return sim_workload_layer(l->w, i);
}

static inline SimAction
action_at(const Lower *l, guint i)
{
  return g_array_index(l->actions, SimAction, i);
}

static inline gboolean
offloads(SimAction a)
{
  return a == SIM_ACTION_OFFLOAD || a == SIM_ACTION_SELECTIVE_OFFLOAD;
}

static inline gboolean
moves(const Lower *l, const SimTensor *t)
{
  return t->offloadable && t->bytes >= l->policy->min_tensor;
}

static Fate
fate_of(const Lower *l, SimAction a, const SimTensor *t)
{
  if (!sim_tensor_on_device(t))
    return FATE_ELSEWHERE;
  switch (a) {
  case SIM_ACTION_RECOMPUTE:
    return FATE_FULL;
  case SIM_ACTION_SELECTIVE:
    return t->selective ? FATE_DROP : FATE_KEEP;
  case SIM_ACTION_SELECTIVE_OFFLOAD:
    if (t->selective)
      return FATE_DROP;
    return moves(l, t) ? FATE_OFFLOAD : FATE_KEEP;
  case SIM_ACTION_OFFLOAD:
    return moves(l, t) ? FATE_OFFLOAD : FATE_KEEP;
  case SIM_ACTION_KEEP:
  default:
    return FATE_KEEP;
  }
}

/* The fate of tensor k of layer i, decided once per lowering. */
static inline Fate
tensor_fate(const Lower *l, guint i, guint k)
{
  return (Fate)l->fates[l->first[i] + k];
}

/* An offloaded tensor is copied once, or once per saved reference. */
static inline guint
copies_of(const Lower *l, const SimTensor *t)
{
  return l->policy->dedup ? 1 : MAX(t->refs, 1u);
}

/* Whether action `a` sends any of the layer's tensors to the host. */
static gboolean
layer_moves_anything(const Lower *l, const SimLayer *layer, SimAction a)
{
  for (guint k = 0; k < layer->tensors->len; k++)
    if (fate_of(l, a, &g_array_index(layer->tensors, SimTensor, k)) == FATE_OFFLOAD)
      return TRUE;
  return FALSE;
}

static inline gboolean
is_async_offload(const Lower *l, guint i)
{
  return l->policy->async && offloads(action_at(l, i));
}

static inline guint32
tensor_label(const Lower *l, guint i, guint k)
{
  return l->labels[l->first[i] + k];
}

static void
workspace(const Lower *l, guint32 op, const SimLayer *layer, gint32 i)
{
  gint64 bytes = (gint64)layer->workspace_bytes;
  sim_program_mem_inline(l->p, op, SIM_AT_START, SIM_POOL_DEVICE, bytes, l->label_workspace, i);
  sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -bytes, l->label_workspace, i);
}

/* The copies of layer i's offloaded tensors, one direction, on `stream`.
 * A copy allocates its destination when it starts; the source is freed when
 * the tensor's last copy ends (out) or when each copy ends (in: each reload
 * of a reference is its own device tensor, freed by the backward). */
static void
emit_copies(const Lower *l, guint i, SimDir dir, guint32 stream)
{
  const SimLayer *layer = layer_at(l, i);
  gboolean pageable = l->policy->pinned == SIM_PINNED_NONE;
  const guint32 *labels = &l->labels[l->first[i]];
  const guint8 *fates = &l->fates[l->first[i]];
  SimProgram *p = l->p;
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    if (fates[k] != FATE_OFFLOAD)
      continue;
    guint n = copies_of(l, t);
    gint64 bytes = (gint64)t->bytes;
    for (guint c = 0; c < n; c++) {
      guint32 op = sim_program_copy_inline(p, stream, dir, t->bytes, pageable, (gint32)i, labels[k]);
      if (dir == SIM_DIR_D2H) {
        sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_HOST, bytes, labels[k], (gint32)i);
        if (c + 1 == n)
          sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -bytes, labels[k], (gint32)i);
      } else {
        sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, bytes, labels[k], (gint32)i);
        sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_HOST, -bytes, labels[k], (gint32)i);
      }
    }
  }
}

static void
emit_pinning(const Lower *l, guint i)
{
  if (l->policy->pinned != SIM_PINNED_PER_TENSOR)
    return;
  const SimLayer *layer = layer_at(l, i);
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    if (tensor_fate(l, i, k) != FATE_OFFLOAD)
      continue;
    for (guint c = 0; c < copies_of(l, t); c++)
      sim_program_host_alloc(l->p, SIM_LOWER_STREAM_COMPUTE, l->link->host_alloc, (gint32)i, l->label_pin);
  }
}

/* Async reload of layer j, started by `trigger` and never before j's own
 * offload has finished. */
static void
emit_reload(Lower *l, guint j, guint32 trigger)
{
  sim_program_wait(l->p, SIM_LOWER_STREAM_H2D, trigger);
  sim_program_wait(l->p, SIM_LOWER_STREAM_H2D, l->ev_d2h[j]);
  emit_copies(l, j, SIM_DIR_H2D, SIM_LOWER_STREAM_H2D);
  l->ev_h2d[j] = sim_program_add_event(l->p, l->label_reloaded, (gint32)j);
  sim_program_record(l->p, SIM_LOWER_STREAM_H2D, l->ev_h2d[j]);
}

/* The embedding or the loss head: it keeps its tensors. */
static void
emit_stage(Lower *l, const SimLayer *stage, const char *name, SimPhase phase)
{
  if (stage == NULL)
    return;
  guint32 label = sim_program_intern(l->p, name);
  gboolean forward = phase == SIM_PHASE_FORWARD;
  guint32 op = sim_program_compute_inline(l->p, SIM_LOWER_STREAM_COMPUTE, forward ? stage->forward : stage->backward,
                                          phase, SIM_NO_LAYER, label);
  workspace(l, op, stage, SIM_NO_LAYER);
  for (guint k = 0; k < stage->tensors->len; k++) {
    const SimTensor *t = &g_array_index(stage->tensors, SimTensor, k);
    if (!sim_tensor_on_device(t))
      continue;
    sim_program_mem_inline(l->p, op, forward ? SIM_AT_START : SIM_AT_END, SIM_POOL_DEVICE,
                           forward ? (gint64)t->bytes : -(gint64)t->bytes, sim_program_intern(l->p, t->name),
                           SIM_NO_LAYER);
  }
}

static void
emit_forward(Lower *l, guint i)
{
  const SimLayer *layer = layer_at(l, i);
  SimProgram *p = l->p;
  guint inflight = l->policy->inflight;
  SimAction a = action_at(l, i);

  if (l->policy->async && i >= inflight && l->ev_d2h[i - inflight] != SIM_NO_EVENT)
    sim_program_wait(p, SIM_LOWER_STREAM_COMPUTE, l->ev_d2h[i - inflight]);

  guint32 op = sim_program_compute_inline(p, SIM_LOWER_STREAM_COMPUTE, layer->forward, SIM_PHASE_FORWARD, (gint32)i,
                                          l->label_fwd);
  if (a == SIM_ACTION_RECOMPUTE)
    sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)layer->input_bytes, l->label_input, (gint32)i);
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    Fate fate = tensor_fate(l, i, k);
    if (fate == FATE_FULL || fate == FATE_ELSEWHERE)
      continue;
    /* Every tensor exists while the forward runs; dropped ones go at its end. */
    sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)t->bytes, tensor_label(l, i, k), (gint32)i);
    if (fate == FATE_DROP)
      sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)t->bytes, tensor_label(l, i, k), (gint32)i);
  }
  workspace(l, op, layer, (gint32)i);

  if (!offloads(a))
    return;
  emit_pinning(l, i);
  if (!l->policy->async) {
    emit_copies(l, i, SIM_DIR_D2H, SIM_LOWER_STREAM_COMPUTE);
    return;
  }
  guint32 done = sim_program_add_event(p, l->label_fwd_done, (gint32)i);
  sim_program_record(p, SIM_LOWER_STREAM_COMPUTE, done);
  sim_program_wait(p, SIM_LOWER_STREAM_D2H, done);
  emit_copies(l, i, SIM_DIR_D2H, SIM_LOWER_STREAM_D2H);
  l->ev_d2h[i] = sim_program_add_event(p, l->label_offloaded, (gint32)i);
  sim_program_record(p, SIM_LOWER_STREAM_D2H, l->ev_d2h[i]);
}

static void
emit_backward(Lower *l, guint i)
{
  const SimLayer *layer = layer_at(l, i);
  SimProgram *p = l->p;
  guint prefetch = l->policy->prefetch;
  SimAction a = action_at(l, i);

  /* Without prefetch a layer asks for its own group when its backward is due. */
  if (prefetch == 0 && is_async_offload(l, i)) {
    guint32 due = sim_program_add_event(p, l->label_due, (gint32)i);
    sim_program_record(p, SIM_LOWER_STREAM_COMPUTE, due);
    emit_reload(l, i, due);
  }
  if (is_async_offload(l, i))
    sim_program_wait(p, SIM_LOWER_STREAM_COMPUTE, l->ev_h2d[i]);
  if (prefetch > 0 && i >= prefetch && is_async_offload(l, i - prefetch)) {
    guint32 started = sim_program_add_event(p, l->label_started, (gint32)i);
    sim_program_record(p, SIM_LOWER_STREAM_COMPUTE, started);
    emit_reload(l, i - prefetch, started);
  }
  if (offloads(a) && !l->policy->async)
    emit_copies(l, i, SIM_DIR_H2D, SIM_LOWER_STREAM_COMPUTE);

  /* Full recompute reruns the forward and rebuilds every tensor; selective
   * recompute rebuilds only the dropped ones, at their own cost. */
  gboolean full = a == SIM_ACTION_RECOMPUTE;
  double redo = full ? layer->forward : sim_layer_selective_recompute(layer);
  if (full || a == SIM_ACTION_SELECTIVE || a == SIM_ACTION_SELECTIVE_OFFLOAD) {
    guint32 op = sim_program_compute_inline(p, SIM_LOWER_STREAM_COMPUTE, redo, SIM_PHASE_RECOMPUTE, (gint32)i,
                                            l->label_recompute);
    for (guint k = 0; k < layer->tensors->len; k++) {
      const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
      Fate fate = tensor_fate(l, i, k);
      if (fate == FATE_FULL || fate == FATE_DROP)
        sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)t->bytes, tensor_label(l, i, k),
                               (gint32)i);
    }
    workspace(l, op, layer, (gint32)i);
  }

  guint32 op = sim_program_compute_inline(p, SIM_LOWER_STREAM_COMPUTE, layer->backward, SIM_PHASE_BACKWARD, (gint32)i,
                                          l->label_bwd);
  workspace(l, op, layer, (gint32)i);
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    Fate fate = tensor_fate(l, i, k);
    if (fate == FATE_ELSEWHERE)
      continue;
    guint n = fate == FATE_OFFLOAD ? copies_of(l, t) : 1;
    sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)(t->bytes * n), tensor_label(l, i, k),
                           (gint32)i);
  }
  if (full)
    sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)layer->input_bytes, l->label_input, (gint32)i);
}

/* The program's streams, baseline and every label the lowering uses,
 * interned once per lowering: each tensor's name by pointer against the
 * previous lowering's (tensor names are interned strings). */
static void
begin_program(Lower *l)
{
  SimProgram *p = l->p;
  guint n = sim_workload_n_layers(l->w);
  sim_program_reset(p);
  sim_program_add_stream(p, "compute");
  sim_program_add_stream(p, "d2h");
  sim_program_add_stream(p, "h2d");
  sim_program_set_baseline(p, SIM_POOL_DEVICE, l->w->static_bytes, "static");
  l->label_fwd = sim_program_intern(p, "forward");
  l->label_bwd = sim_program_intern(p, "backward");
  l->label_recompute = sim_program_intern(p, "recompute");
  l->label_input = p->input_tag;
  l->label_workspace = p->workspace_tag;
  l->label_pin = sim_program_intern(p, "cudaHostAlloc");
  l->label_reloaded = sim_program_intern(p, "reloaded");
  l->label_fwd_done = sim_program_intern(p, "forward done");
  l->label_offloaded = sim_program_intern(p, "offloaded");
  l->label_due = sim_program_intern(p, "backward due");
  l->label_started = sim_program_intern(p, "backward started");
  l->label_boundary = sim_program_intern(p, "forward pass done");
  l->first = g_new(guint, n + 1);
  l->first[0] = 0;
  for (guint i = 0; i < n; i++)
    l->first[i + 1] = l->first[i] + layer_at(l, i)->tensors->len;
  l->labels = g_new(guint32, MAX(l->first[n], 1u));
  for (guint i = 0; i < n; i++) {
    const SimLayer *layer = layer_at(l, i);
    for (guint k = 0; k < layer->tensors->len; k++)
      l->labels[l->first[i] + k] =
        sim_program_intern_slot(p, l->first[i] + k, g_array_index(layer->tensors, SimTensor, k).name);
  }
}

/* Each layer's action and each tensor's fate, decided once.  An offload with
 * nothing to move is no offload: no events, no waits. */
static void
decide(Lower *l)
{
  guint n = sim_workload_n_layers(l->w);
  l->actions = policy_actions(l->policy, n);
  for (guint i = 0; i < n; i++) {
    SimAction *a = &g_array_index(l->actions, SimAction, i);
    if (offloads(*a) && !layer_moves_anything(l, layer_at(l, i), *a))
      *a = *a == SIM_ACTION_OFFLOAD ? SIM_ACTION_KEEP : SIM_ACTION_SELECTIVE;
  }
  l->fates = g_new(guint8, MAX(l->first[n], 1u));
  for (guint i = 0; i < n; i++) {
    const SimLayer *layer = layer_at(l, i);
    for (guint k = 0; k < layer->tensors->len; k++)
      l->fates[l->first[i] + k] = (guint8)fate_of(l, action_at(l, i), &g_array_index(layer->tensors, SimTensor, k));
  }
  l->ev_d2h = g_new(guint32, n);
  l->ev_h2d = g_new(guint32, n);
  for (guint i = 0; i < n; i++)
    l->ev_d2h[i] = l->ev_h2d[i] = SIM_NO_EVENT;
}

/* The top `prefetch` layers reload as soon as the forward pass is over. */
static void
emit_boundary_reloads(Lower *l)
{
  guint n = sim_workload_n_layers(l->w);
  if (!l->policy->async || l->policy->prefetch == 0)
    return;
  guint32 boundary = SIM_NO_EVENT;
  for (guint j = n; j-- > 0 && (guint64)j + l->policy->prefetch >= n;) {
    if (!is_async_offload(l, j))
      continue;
    if (boundary == SIM_NO_EVENT) {
      boundary = sim_program_add_event(l->p, l->label_boundary, SIM_NO_LAYER);
      sim_program_record(l->p, SIM_LOWER_STREAM_COMPUTE, boundary);
    }
    emit_reload(l, j, boundary);
  }
}

void
sim_lower_into(SimProgram *p, const SimWorkload *w, const SimPolicy *policy, const SimLink *link)
{
  guint n = sim_workload_n_layers(w);
  Lower l = { .p = p, .w = w, .policy = policy, .link = link };

  begin_program(&l);
  decide(&l);
  emit_stage(&l, w->embed, "embed", SIM_PHASE_FORWARD);
  for (guint i = 0; i < n; i++)
    emit_forward(&l, i);
  emit_stage(&l, w->head, "head", SIM_PHASE_FORWARD);
  emit_boundary_reloads(&l);
  emit_stage(&l, w->head, "head", SIM_PHASE_BACKWARD);
  for (guint i = n; i-- > 0;)
    emit_backward(&l, i);
  emit_stage(&l, w->embed, "embed", SIM_PHASE_BACKWARD);

  g_array_unref(l.actions);
  g_free(l.ev_d2h);
  g_free(l.ev_h2d);
  g_free(l.labels);
  g_free(l.fates);
  g_free(l.first);
}

SimProgram *
sim_lower(const SimWorkload *w, const SimPolicy *policy, const SimLink *link)
{
  SimProgram *p = sim_program_new();
  sim_lower_into(p, w, policy, link);
  return p;
}
