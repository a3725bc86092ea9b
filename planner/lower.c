#include "lower.h"

#define NONE G_MAXUINT32

typedef struct {
  SimProgram *p;
  const SimWorkload *w;
  const SimPolicy *policy;
  const SimLink *link;
  GArray *actions;    /* SimAction per layer, after dropping offloads with nothing to move */
  guint32 *ev_d2h;    /* per layer: its group is on the host (async), or NONE */
  guint32 *ev_h2d;    /* per layer: its group is back on the device (async), or NONE */
  guint32 label_fwd, label_bwd, label_recompute, label_input, label_workspace, label_pin;
} Lower;

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
moves(const Lower *l, const SimTensor *t)
{
  return t->offloadable && t->bytes >= l->policy->min_tensor;
}

static gboolean
layer_moves_anything(const Lower *l, guint i)
{
  const SimLayer *layer = layer_at(l, i);
  for (guint k = 0; k < layer->tensors->len; k++)
    if (moves(l, &g_array_index(layer->tensors, SimTensor, k)))
      return TRUE;
  return FALSE;
}

static inline gboolean
is_async_offload(const Lower *l, guint i)
{
  return l->policy->async && action_at(l, i) == SIM_ACTION_OFFLOAD;
}

static guint32
tensor_label(const Lower *l, const SimTensor *t)
{
  return sim_program_intern(l->p, t->name);
}

static void
alloc_tensors(const Lower *l, guint32 op, guint i, SimWhen when, gint sign)
{
  const SimLayer *layer = layer_at(l, i);
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    sim_program_mem(l->p, op, when, SIM_POOL_DEVICE, sign * (gint64)t->bytes, tensor_label(l, t), (gint32)i);
  }
}

static void
workspace(const Lower *l, guint32 op, guint i)
{
  gint64 bytes = (gint64)layer_at(l, i)->workspace_bytes;
  sim_program_mem(l->p, op, SIM_AT_START, SIM_POOL_DEVICE, bytes, l->label_workspace, (gint32)i);
  sim_program_mem(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -bytes, l->label_workspace, (gint32)i);
}

/* The copies of layer i's moved tensors, one direction, on `stream`.  A copy
 * allocates its destination when it starts and frees its source when it
 * ends. */
static void
emit_copies(const Lower *l, guint i, SimDir dir, guint32 stream)
{
  const SimLayer *layer = layer_at(l, i);
  gboolean pageable = l->policy->pinned == SIM_PINNED_NONE;
  SimPool to = dir == SIM_DIR_D2H ? SIM_POOL_HOST : SIM_POOL_DEVICE;
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    if (!moves(l, t))
      continue;
    guint32 label = tensor_label(l, t);
    guint32 op = sim_program_copy(l->p, stream, dir, t->bytes, pageable, (gint32)i, label);
    sim_program_mem(l->p, op, SIM_AT_START, to, (gint64)t->bytes, label, (gint32)i);
    sim_program_mem(l->p, op, SIM_AT_END, (SimPool)(1 - to), -(gint64)t->bytes, label, (gint32)i);
  }
}

static void
emit_pinning(const Lower *l, guint i)
{
  if (l->policy->pinned != SIM_PINNED_PER_TENSOR)
    return;
  const SimLayer *layer = layer_at(l, i);
  for (guint k = 0; k < layer->tensors->len; k++)
    if (moves(l, &g_array_index(layer->tensors, SimTensor, k)))
      sim_program_host_alloc(l->p, PLANNER_STREAM_COMPUTE, l->link->host_alloc, (gint32)i, l->label_pin);
}

/* Async reload of layer j, started by `trigger` and never before j's own
 * offload has finished. */
static void
emit_reload(Lower *l, guint j, guint32 trigger)
{
  sim_program_wait(l->p, PLANNER_STREAM_H2D, trigger);
  sim_program_wait(l->p, PLANNER_STREAM_H2D, l->ev_d2h[j]);
  emit_copies(l, j, SIM_DIR_H2D, PLANNER_STREAM_H2D);
  l->ev_h2d[j] = sim_program_add_event(l->p, sim_program_intern(l->p, "reloaded"), (gint32)j);
  sim_program_record(l->p, PLANNER_STREAM_H2D, l->ev_h2d[j]);
}

static void
emit_forward(Lower *l, guint i)
{
  const SimLayer *layer = layer_at(l, i);
  SimProgram *p = l->p;
  guint inflight = l->policy->inflight;

  if (l->policy->async && i >= inflight && l->ev_d2h[i - inflight] != NONE)
    sim_program_wait(p, PLANNER_STREAM_COMPUTE, l->ev_d2h[i - inflight]);

  guint32 op = sim_program_compute(p, PLANNER_STREAM_COMPUTE, layer->forward, SIM_PHASE_FORWARD, (gint32)i,
                                   l->label_fwd);
  if (action_at(l, i) == SIM_ACTION_RECOMPUTE)
    sim_program_mem(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)layer->input_bytes, l->label_input, (gint32)i);
  else
    alloc_tensors(l, op, i, SIM_AT_START, +1);
  workspace(l, op, i);

  if (action_at(l, i) != SIM_ACTION_OFFLOAD)
    return;
  emit_pinning(l, i);
  if (!l->policy->async) {
    emit_copies(l, i, SIM_DIR_D2H, PLANNER_STREAM_COMPUTE);
    return;
  }
  guint32 done = sim_program_add_event(p, sim_program_intern(p, "forward done"), (gint32)i);
  sim_program_record(p, PLANNER_STREAM_COMPUTE, done);
  sim_program_wait(p, PLANNER_STREAM_D2H, done);
  emit_copies(l, i, SIM_DIR_D2H, PLANNER_STREAM_D2H);
  l->ev_d2h[i] = sim_program_add_event(p, sim_program_intern(p, "offloaded"), (gint32)i);
  sim_program_record(p, PLANNER_STREAM_D2H, l->ev_d2h[i]);
}

static void
emit_backward(Lower *l, guint i)
{
  const SimLayer *layer = layer_at(l, i);
  SimProgram *p = l->p;
  guint prefetch = l->policy->prefetch;

  /* Without prefetch a layer asks for its own group when its backward is due. */
  if (prefetch == 0 && is_async_offload(l, i)) {
    guint32 due = sim_program_add_event(p, sim_program_intern(p, "backward due"), (gint32)i);
    sim_program_record(p, PLANNER_STREAM_COMPUTE, due);
    emit_reload(l, i, due);
  }
  if (is_async_offload(l, i))
    sim_program_wait(p, PLANNER_STREAM_COMPUTE, l->ev_h2d[i]);
  if (prefetch > 0 && i >= prefetch && is_async_offload(l, i - prefetch)) {
    guint32 started = sim_program_add_event(p, sim_program_intern(p, "backward started"), (gint32)i);
    sim_program_record(p, PLANNER_STREAM_COMPUTE, started);
    emit_reload(l, i - prefetch, started);
  }
  if (action_at(l, i) == SIM_ACTION_OFFLOAD && !l->policy->async)
    emit_copies(l, i, SIM_DIR_H2D, PLANNER_STREAM_COMPUTE);
  if (action_at(l, i) == SIM_ACTION_RECOMPUTE) {
    guint32 op = sim_program_compute(p, PLANNER_STREAM_COMPUTE, layer->forward, SIM_PHASE_RECOMPUTE, (gint32)i,
                                     l->label_recompute);
    alloc_tensors(l, op, i, SIM_AT_START, +1);
    workspace(l, op, i);
  }
  guint32 op = sim_program_compute(p, PLANNER_STREAM_COMPUTE, layer->backward, SIM_PHASE_BACKWARD, (gint32)i,
                                   l->label_bwd);
  workspace(l, op, i);
  alloc_tensors(l, op, i, SIM_AT_END, -1);
  if (action_at(l, i) == SIM_ACTION_RECOMPUTE)
    sim_program_mem(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)layer->input_bytes, l->label_input, (gint32)i);
}

void
planner_lower_into(SimProgram *p, const SimWorkload *w, const SimPolicy *policy, const SimLink *link)
{
  guint n = sim_workload_n_layers(w);
  Lower l = { .p = p, .w = w, .policy = policy, .link = link };

  sim_program_reset(p);
  sim_program_add_stream(p, "compute");
  sim_program_add_stream(p, "d2h");
  sim_program_add_stream(p, "h2d");
  sim_program_set_baseline(p, SIM_POOL_DEVICE, w->static_bytes, "static");
  l.label_fwd = sim_program_intern(p, "forward");
  l.label_bwd = sim_program_intern(p, "backward");
  l.label_recompute = sim_program_intern(p, "recompute");
  l.label_input = sim_program_intern(p, "input");
  l.label_workspace = sim_program_intern(p, "workspace");
  l.label_pin = sim_program_intern(p, "cudaHostAlloc");

  l.actions = sim_policy_actions(policy, n);
  for (guint i = 0; i < n; i++)
    if (action_at(&l, i) == SIM_ACTION_OFFLOAD && !layer_moves_anything(&l, i))
      g_array_index(l.actions, SimAction, i) = SIM_ACTION_KEEP;
  l.ev_d2h = g_new(guint32, n);
  l.ev_h2d = g_new(guint32, n);
  for (guint i = 0; i < n; i++)
    l.ev_d2h[i] = l.ev_h2d[i] = NONE;

  for (guint i = 0; i < n; i++)
    emit_forward(&l, i);

  /* The top `prefetch` layers reload as soon as the forward pass is over. */
  if (policy->async && policy->prefetch > 0) {
    guint32 boundary = NONE;
    for (guint j = n; j-- > 0 && (guint64)j + policy->prefetch >= n;) {
      if (!is_async_offload(&l, j))
        continue;
      if (boundary == NONE) {
        boundary = sim_program_add_event(p, sim_program_intern(p, "forward pass done"), SIM_NO_LAYER);
        sim_program_record(p, PLANNER_STREAM_COMPUTE, boundary);
      }
      emit_reload(&l, j, boundary);
    }
  }
  for (guint i = n; i-- > 0;)
    emit_backward(&l, i);

  g_array_unref(l.actions);
  g_free(l.ev_d2h);
  g_free(l.ev_h2d);
}

SimProgram *
planner_lower(const SimWorkload *w, const SimPolicy *policy, const SimLink *link)
{
  SimProgram *p = sim_program_new();
  planner_lower_into(p, w, policy, link);
  return p;
}
