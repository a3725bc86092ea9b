#include "engine/collective.h"
#include "engine/optimizer.h"
#include "lower/internal/lower_private.h"
#include "engine/internal/program_private.h" /* the inline builders: a program per candidate */
#include "model/sharding.h"


/* Groups: what a policy acts on.  Layers are groups 0..n-1, the embedding
 * group n and the loss head group n + 1 (each present only when the
 * workload has it).  In the order of the step a group has a position: the
 * embedding -1, layer i i, the head n; prefetch and in-flight distances
 * count positions, so an offloaded embedding or head (scope = all) is
 * reloaded and waited for like one more layer. */




static inline guint
group_embed(const Lower *l)
{
  return l->n;
}

static inline guint
group_head(const Lower *l)
{
  return l->n + 1;
}

/* The group's layer, or NULL for a stage the workload does not have. */
static inline const SimLayer *
group_layer(const Lower *l, guint g)
{
  if (g < l->n)
    return sim_workload_layer(l->w, l->base + g);
  if (g == group_embed(l))
    return l->has_embed ? l->w->embed : NULL;
  return l->has_head ? l->w->head : NULL;
}

/* The layer index its ops carry (the workload's): SIM_NO_LAYER for the stages. */
static inline gint32
group_index(const Lower *l, guint g)
{
  return g < l->n ? (gint32)(l->base + g) : SIM_NO_LAYER;
}

static inline gint64
group_position(const Lower *l, guint g)
{
  return g < l->n ? (gint64)g : g == group_embed(l) ? -1 : (gint64)l->n;
}

/* The group at a position, or G_MAXUINT when none is there. */
static inline guint
group_at(const Lower *l, gint64 pos)
{
  guint g = pos == -1                ? group_embed(l)
            : pos == (gint64)l->n    ? group_head(l)
            : pos >= 0 && pos < (gint64)l->n ? (guint)pos
                                     : G_MAXUINT;
  return g != G_MAXUINT && group_layer(l, g) != NULL ? g : G_MAXUINT;
}

static gboolean
policy_selects(const SimPolicy *p, guint layer)
{
  return p->selected == NULL || (layer < p->selected->len && g_array_index(p->selected, gboolean, layer));
}

/* The action of each of the n layers from `base` on into actions[0..n):
 * `layers`, `every` and a plan's actions index the whole model; keep_last
 * counts from the top of the slice (each chunk of a pipeline runs its
 * backward right after its forward's last layer).  Every policy kind
 * reduces to this, so nothing below is kind-specific. */
static void
policy_actions(const SimPolicy *p, guint base, guint n, SimAction *actions)
{
  for (guint k = 0; k < n; k++) {
    guint i = base + k;
    SimAction a = SIM_ACTION_KEEP;
    switch (p->kind) {
    case SIM_POLICY_RESIDENT:
      break;
    case SIM_POLICY_OFFLOAD:
      /* checkpoint = true: every selected layer is checkpointed, the last
       * keep_last keep their inputs on the device (DeepSpeed's
       * keep_last_count, verl's last layer). */
      if (policy_selects(p, i) && k + p->keep_last < n)
        a = p->checkpoint ? SIM_ACTION_RECOMPUTE_OFFLOAD : SIM_ACTION_OFFLOAD;
      else if (policy_selects(p, i) && p->checkpoint)
        a = SIM_ACTION_RECOMPUTE;
      break;
    case SIM_POLICY_CHECKPOINT:
      if (policy_selects(p, i) && i % p->every == 0)
        a = p->selective ? SIM_ACTION_SELECTIVE
            : p->checkpoint ? SIM_ACTION_RECOMPUTE_OFFLOAD
                            : SIM_ACTION_RECOMPUTE;
      break;
    case SIM_POLICY_PLAN:
      g_assert(p->actions != NULL && i < p->actions->len);
      a = g_array_index(p->actions, SimAction, i);
      break;
    case SIM_POLICY_KIND_COUNT:
      g_assert_not_reached(); /* a count, not a kind */
    }
    actions[k] = a;
  }
}

/* The stages offload under scope = all, as every saved-tensor hook sees
 * them; otherwise they keep their tensors (the head is needed first in
 * backward, the embedding saves little). */
static SimAction
stage_action(const SimPolicy *p)
{
  return p->kind == SIM_POLICY_OFFLOAD && p->scope_all ? SIM_ACTION_OFFLOAD : SIM_ACTION_KEEP;
}

/* What keeps a policy's picks from changing anything, counted over the
 * layers of the chunks it acts on (sim_lower_policy_note). */
typedef struct {
  guint selected;   /* picked by `layers` */
  guint kept_last;  /* of those, within keep_last of their chunk's top */
  guint not_every;  /* of those, not a multiple of `every` */
  guint acted;      /* given an action other than keep */
  guint unmoved;    /* of those, with nothing to move or drop (sim_lower_fates) */
  guint in_stages;  /* layers on the stages it acts on */
  guint chunk_max;  /* layers of its largest chunk */
} Picks;

static void
count_picks(const SimWorkload *w, const SimPolicy *p, guint base, guint n, Picks *c)
{
  g_autofree SimAction *actions = g_new(SimAction, n);
  policy_actions(p, base, n, actions);
  c->in_stages += n;
  c->chunk_max = MAX(c->chunk_max, n);
  for (guint k = 0; k < n; k++) {
    guint i = base + k;
    if (!policy_selects(p, i))
      continue;
    c->selected++;
    c->kept_last += p->kind == SIM_POLICY_OFFLOAD && k + p->keep_last >= n;
    c->not_every += p->kind == SIM_POLICY_CHECKPOINT && i % p->every != 0;
    if (actions[k] == SIM_ACTION_KEEP)
      continue;
    const SimLayer *layer = sim_workload_layer(w, i);
    g_autofree guint8 *fates = g_new(guint8, MAX(layer->tensors->len, 1u));
    c->acted++;
    c->unmoved += sim_lower_fates(p, layer, actions[k], fates, NULL) == SIM_ACTION_KEEP;
  }
}

/* Whether the embedding or the head changes (scope = all). */
static gboolean
stages_act(const SimWorkload *w, const SimPolicy *p)
{
  const SimLayer *ends[] = { w->embed, w->head };
  for (guint e = 0; e < G_N_ELEMENTS(ends); e++) {
    if (ends[e] == NULL || stage_action(p) == SIM_ACTION_KEEP)
      continue;
    g_autofree guint8 *fates = g_new(guint8, MAX(ends[e]->tensors->len, 1u));
    if (sim_lower_fates(p, ends[e], stage_action(p), fates, NULL) != SIM_ACTION_KEEP)
      return TRUE;
  }
  return FALSE;
}

char *
sim_lower_policy_note(const SimWorkload *w, const SimPolicy *p, const SimParallel *par)
{
  if (p->kind == SIM_POLICY_RESIDENT || stages_act(w, p))
    return NULL;
  guint n = sim_workload_n_layers(w);
  gboolean piped = par && sim_parallel_active(par);
  guint chunks = piped ? sim_parallel_chunks(par) : 1;
  g_autofree guint *bounds = g_new(guint, chunks + 1);
  if (piped)
    sim_parallel_chunk_bounds(par, n, bounds);
  else
    bounds[0] = 0, bounds[1] = n;
  Picks c = { 0 };
  for (guint k = 0; k < chunks; k++) {
    guint stage = piped ? k % par->pp : 0;
    if (p->stages == NULL || (stage < p->stages->len && g_array_index(p->stages, gboolean, stage)))
      count_picks(w, p, bounds[k], bounds[k + 1] - bounds[k], &c);
  }
  if (c.acted > c.unmoved)
    return NULL;
  const char *does = p->kind == SIM_POLICY_CHECKPOINT ? "recomputes nothing" : "changes nothing";
  if (p->kind == SIM_POLICY_OFFLOAD)
    does = p->checkpoint ? "checkpoints and offloads nothing" : "offloads nothing";
  if (c.in_stages == 0)
    return g_strdup_printf("%s: stages selects no stage of the pipeline", does);
  if (p->kind == SIM_POLICY_PLAN && c.acted == 0)
    return g_strdup_printf("%s: every action is keep", does);
  if (c.selected == 0)
    return g_strdup_printf("%s: %s", does, p->stages ? "layers and stages do not overlap (no layer it selects runs "
                                                       "on a stage it acts on)"
                                                     : "layers selects no layer");
  if (c.kept_last == c.selected)
    return piped ? g_strdup_printf("%s: keep_last = %u counts per pipeline chunk, and its chunks have at most %u "
                                   "layer%s", does, p->keep_last, c.chunk_max, c.chunk_max == 1 ? "" : "s")
                 : g_strdup_printf("%s: keep_last = %u keeps every layer", does, p->keep_last);
  if (c.not_every == c.selected)
    return g_strdup_printf("%s: every = %u selects none of its layers", does, p->every);
  return g_strdup_printf("%s: no tensor of the layers it picks can move (min_tensor, min_elements, tensors kept "
                         "on the device)", does);
}

static inline SimAction
action_at(const Lower *l, guint g)
{
  return l->actions[g];
}

static inline gboolean
offloads(SimAction a)
{
  return a == SIM_ACTION_OFFLOAD || a == SIM_ACTION_SELECTIVE_OFFLOAD || a == SIM_ACTION_RECOMPUTE_OFFLOAD;
}

/* Full recompute: the forward keeps only the layer's input. */
static inline gboolean
recomputes(SimAction a)
{
  return a == SIM_ACTION_RECOMPUTE || a == SIM_ACTION_RECOMPUTE_OFFLOAD;
}

/* The hook's filters: size, and leaves unless leaves = copy. */
static inline gboolean
passes_filters(const SimPolicy *p, const SimTensor *t)
{
  return t->bytes >= p->min_tensor && (!t->leaf || p->copy_leaves) &&
         (p->min_elements == 0 || sim_tensor_elements(t) >= p->min_elements);
}

static inline gboolean
moves(const SimPolicy *p, const SimTensor *t)
{
  return t->offloadable && passes_filters(p, t);
}

/* A reference to memory held elsewhere that an offload copies anyway: a
 * parameter under params = copy, or a storage an earlier layer saved (each
 * group is packed on its own, so its references are copied again). */
static inline gboolean
mirrors(const SimPolicy *p, const SimTensor *t)
{
  if (t->parameter)
    return (p->params == SIM_PARAMS_COPY || (p->params == SIM_PARAMS_VIEWS && !t->leaf)) && t->bytes >= p->min_tensor &&
           (p->min_elements == 0 || sim_tensor_elements(t) >= p->min_elements);
  return t->shared && passes_filters(p, t);
}

static SimFate
fate_of(const SimPolicy *p, SimAction a, const SimTensor *t)
{
  if (!sim_tensor_on_device(t))
    return !t->host && offloads(a) && !recomputes(a) && mirrors(p, t) ? SIM_FATE_MIRROR : SIM_FATE_ELSEWHERE;
  switch (a) {
  case SIM_ACTION_RECOMPUTE:
  case SIM_ACTION_RECOMPUTE_OFFLOAD:
    return SIM_FATE_FULL;
  case SIM_ACTION_SELECTIVE:
    return t->selective ? SIM_FATE_DROP : SIM_FATE_KEEP;
  case SIM_ACTION_SELECTIVE_OFFLOAD:
    if (t->selective)
      return SIM_FATE_DROP;
    return moves(p, t) ? SIM_FATE_OFFLOAD : SIM_FATE_KEEP;
  case SIM_ACTION_OFFLOAD:
    return moves(p, t) ? SIM_FATE_OFFLOAD : SIM_FATE_KEEP;
  case SIM_ACTION_KEEP:
  default:
    return SIM_FATE_KEEP;
  }
}

static inline gboolean
travels(SimFate f)
{
  return f == SIM_FATE_OFFLOAD || f == SIM_FATE_MIRROR || f == SIM_FATE_KEPT_COPIED;
}

/* Device memory of its group while the forward runs (dropped ones only until its end). */
static inline gboolean
exists_in_forward(SimFate f)
{
  return f == SIM_FATE_KEEP || f == SIM_FATE_OFFLOAD || f == SIM_FATE_DROP || f == SIM_FATE_KEPT_COPIED;
}

/* Whether the hook sees reference `u` of `layer` (a layer with ops): its
 * module is hooked and, under skip_strided, it is contiguous. */
static inline gboolean
hook_sees(const SimPolicy *p, const SimLayer *layer, const SimUse *u)
{
  if (p->skip_strided && u->view != SIM_VIEW_CONTIGUOUS)
    return FALSE;
  return p->hooked == 0 || ((p->hooked >> sim_layer_use_module(layer, u)) & 1u) != 0;
}

/* Whether the hook sees only some of `layer`'s references (a layer with
 * ops: its uses say which). */
static inline gboolean
hook_scoped(const SimPolicy *p, const SimLayer *layer)
{
  return (p->hooked != 0 || p->skip_strided) && sim_layer_has_ops(layer);
}

/* The fate of tensor k of group g, decided once per lowering. */
static inline SimFate
tensor_fate(const Lower *l, guint g, guint k)
{
  return (SimFate)l->fates[l->first[g] + k];
}

/* An offloaded tensor is copied once (dedup), or once per saved reference. */
static inline guint
copies(gboolean dedup, const SimTensor *t)
{
  return dedup ? 1 : MAX(t->refs, 1u);
}

/* Tensor k of group g: its copies each way, decided with its fate. */
static inline guint
copies_of(const Lower *l, guint g, guint k)
{
  return l->copies[l->first[g] + k];
}

/* Each tensor's fate under action `a` into fates[] and its copies each
 * way into ncopies[] (unless NULL); FALSE when `a` offloads and nothing of
 * the group travels (an offload with nothing to move), TRUE otherwise.
 * Under a scoped hook a travelling tensor's seen references decide: none,
 * it stays (or, held elsewhere, is not copied); some, it stays held by the
 * others and the seen ones are copied (kept+copied); all, it moves. */
static gboolean
decide_fates(const SimPolicy *p, const SimLayer *layer, SimAction a, guint8 *fates, guint *ncopies)
{
  /* recompute+offload moves the input it keeps. */
  gboolean moving = a == SIM_ACTION_RECOMPUTE_OFFLOAD && layer->input_bytes > 0;
  guint len = layer->tensors->len;
  g_autofree guint *seen = NULL;
  if (offloads(a) && hook_scoped(p, layer)) {
    seen = g_new0(guint, MAX(len, 1u));
    for (guint u = 0; u < layer->uses->len; u++) {
      const SimUse *use = &g_array_index(layer->uses, SimUse, u);
      seen[use->tensor] += hook_sees(p, layer, use);
    }
  }
  for (guint k = 0; k < len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    SimFate f = fate_of(p, a, t);
    guint n = travels(f) ? copies(p->dedup, t) : 0;
    if (seen && travels(f)) {
      if (seen[k] == 0) {
        f = f == SIM_FATE_OFFLOAD ? SIM_FATE_KEEP : SIM_FATE_ELSEWHERE;
        n = 0;
      } else {
        if (seen[k] < MAX(t->refs, 1u) && f == SIM_FATE_OFFLOAD)
          f = SIM_FATE_KEPT_COPIED;
        n = p->dedup ? 1 : seen[k];
      }
    }
    fates[k] = (guint8)f;
    if (ncopies)
      ncopies[k] = n;
    moving |= travels(f);
  }
  return moving || !offloads(a);
}

SimAction
sim_lower_fates(const SimPolicy *policy, const SimLayer *layer, SimAction action, guint8 *fates, guint *ncopies)
{
  if (decide_fates(policy, layer, action, fates, ncopies))
    return action;
  SimAction a = action == SIM_ACTION_OFFLOAD           ? SIM_ACTION_KEEP
                : action == SIM_ACTION_RECOMPUTE_OFFLOAD ? SIM_ACTION_RECOMPUTE
                                                         : SIM_ACTION_SELECTIVE;
  decide_fates(policy, layer, a, fates, ncopies);
  return a;
}

static inline gboolean
is_async_offload(const Lower *l, guint g)
{
  return l->policy->async && offloads(action_at(l, g));
}

static gboolean reloads_as_group(const Lower *l, guint g);

/* An async offload that reloads as a group: what the prefetch schedule
 * moves. */
static inline gboolean
is_async_group_reload(const Lower *l, guint g)
{
  return is_async_offload(l, g) && reloads_as_group(l, g);
}

static inline guint32
tensor_label(const Lower *l, guint g, guint k)
{
  return l->labels[l->first[g] + k];
}

/* How a policy's copies treat memory, read once per group: the lowering
 * writes the program's arrays, which the compiler cannot prove do not
 * alias the policy, so per-copy reads of it would be reloads. */
typedef struct {
  SimHostMemory host;    /* pageable: copies at pageable_factor, the host blocks */
  gboolean round;        /* host blocks rounded up to a power of two (pinned = caching) */
  gboolean free_at_end;  /* an offloaded source is freed when its copy ends (free = copy-end) */
  gboolean dedup;        /* one copy per storage, not per reference */
} CopyMode;

static inline CopyMode
copy_mode(const Lower *l)
{
  const SimPolicy *p = l->policy;
  return (CopyMode){ p->pinned == SIM_PINNED_PAGEABLE ? SIM_HOST_PAGEABLE : SIM_HOST_PINNED, p->pinned == SIM_PINNED_CACHING, p->free == SIM_FREE_COPY_END,
                     p->dedup };
}

/* What the host holds for a copy of `bytes`: PyTorch's caching host
 * allocator rounds every block up to a power of two. */
static inline gint64
host_bytes(CopyMode m, guint64 bytes)
{
  if (!m.round || bytes == 0)
    return (gint64)bytes;
  guint64 b = 1;
  while (b < bytes)
    b <<= 1;
  return (gint64)b;
}

static void
workspace(const Lower *l, guint32 op, guint64 bytes, gint32 i)
{
  sim_program_mem_inline(l->p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)bytes, l->label_workspace, i);
  sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)bytes, l->label_workspace, i);
}

/* `n` copies of one tensor (or of a checkpointed input), one direction, on
 * `stream`.  A copy allocates its destination when it starts; an offloaded
 * source is freed when its last copy ends (out; a mirrored source stays,
 * and under free = next-commit the commit frees it) and each copy's host
 * buffer when it ends (in: each reload of a reference is its own device
 * tensor, freed by the backward). */
/* Inlined: it runs for every copied tensor of every candidate plan. */
G_ALWAYS_INLINE static inline void
emit_tensor_copies(SimProgram *p, CopyMode m, gint32 index, SimDir dir, guint32 stream, guint64 size, guint n,
                   guint32 label, gboolean frees_source)
{
  gint64 bytes = (gint64)size, host = host_bytes(m, size);
  for (guint c = 0; c < n; c++) {
    guint32 op = sim_program_copy_inline(p, stream, dir, size, m.host, index, label);
    if (dir == SIM_DIR_D2H) {
      sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_HOST, host, label, index);
      if (c + 1 == n && frees_source && m.free_at_end)
        sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -bytes, label, index);
    } else {
      sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, bytes, label, index);
      sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_HOST, -host, label, index);
    }
  }
}

/* Whether group g's tensors come back reference by reference when the
 * backward op that unpacks each runs (a group with ops, under a hook that
 * reloads on unpack: sync offload, reload = on-demand; or by module group,
 * Megatron) rather than with their group. */
static inline gboolean groups_by_module(const Lower *l, guint g);

static inline gboolean
reloads_on_unpack(const Lower *l, guint g)
{
  return sim_layer_has_ops(group_layer(l, g)) && (!l->policy->async || sim_policy_on_demand(l->policy) || groups_by_module(l, g));
}

/* Whether group g reloads anything as a group: its input under
 * recompute+offload, its tensors unless they come back on unpack. */
static gboolean
reloads_as_group(const Lower *l, guint g)
{
  return action_at(l, g) == SIM_ACTION_RECOMPUTE_OFFLOAD || !reloads_on_unpack(l, g);
}

/* The copies of group g's travelling tensors (and, under recompute+offload,
 * of its input), one direction, on `stream`. */
static void
emit_copies(const Lower *l, guint g, SimDir dir, guint32 stream)
{
  const SimLayer *layer = group_layer(l, g);
  const guint32 *labels = &l->labels[l->first[g]];
  const guint8 *fates = &l->fates[l->first[g]];
  gint32 index = group_index(l, g);
  CopyMode m = copy_mode(l);
  SimProgram *p = l->p;
  if (action_at(l, g) == SIM_ACTION_RECOMPUTE_OFFLOAD)
    emit_tensor_copies(p, m, index, dir, stream, layer->input_bytes, 1, l->label_input, TRUE);
  if (dir == SIM_DIR_H2D && reloads_on_unpack(l, g))
    return;
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    if (travels((SimFate)fates[k]))
      emit_tensor_copies(p, m, index, dir, stream, t->bytes, copies_of(l, g, k), labels[k],
                         fates[k] == SIM_FATE_OFFLOAD);
  }
}

/* Whether each copy to the host first allocates its pinned buffer: one
 * cudaHostAlloc ([link] host_alloc) per copy.  per-tensor pins every
 * copy's buffer in every step.  pooled and caching keep their buffers
 * across steps (a pool allocated once; PyTorch's CachingHostAllocator puts
 * a freed block on a free list and serves the next request of its
 * power-of-two size from it), so only a run's first step allocates them
 * ([scenario] step = first) and a steady step allocates nothing.  Pageable
 * memory is not pinned. */
static inline gboolean
pins_each_copy(const Lower *l)
{
  SimPinned pinned = l->policy->pinned;
  return pinned == SIM_PINNED_PER_TENSOR ||
         (l->link->first_step && (pinned == SIM_PINNED_POOLED || pinned == SIM_PINNED_CACHING));
}

/* `n` pinned allocations for group g on the compute stream: cudaHostAlloc
 * blocks the thread that issues kernels (docs/engine.md, "The host"), so
 * nothing issued after it can hide it. */
static void
emit_pins(const Lower *l, guint g, guint n)
{
  for (guint c = 0; c < n; c++)
    sim_program_host_alloc(l->p, l->s_compute, l->link->host_alloc, group_index(l, g), l->label_pin);
}

/* The pinned buffers of group g's copies to the host, before them (start =
 * group: issue_tensor_offload pins each tensor's under start = tensor). */
static void
emit_pinning(const Lower *l, guint g)
{
  if (!pins_each_copy(l))
    return;
  const SimLayer *layer = group_layer(l, g);
  if (action_at(l, g) == SIM_ACTION_RECOMPUTE_OFFLOAD)
    emit_pins(l, g, 1);
  for (guint k = 0; k < layer->tensors->len; k++)
    if (travels(tensor_fate(l, g, k)))
      emit_pins(l, g, copies_of(l, g, k));
}

/* reload = on-unpack: the host unpacks a node's saved tensors while the
 * GPU still runs the nodes before, and torchtune's hook at the end of each
 * node makes its copy stream wait for the end of the node before it that
 * reloaded (pytorch/torchtune@bd2a0fc _activation_offloading.py l.
 * 269-297, 316-357): a node's reloads wait for the end of the node before
 * the previous one that reloaded, or, for the first two, nothing.  The
 * event they wait for (SIM_NO_EVENT: none, or another schedule). */
static inline guint32
unpack_trigger(Lower *l)
{
  if (l->policy->reload != SIM_RELOAD_ON_UNPACK)
    return SIM_NO_EVENT;
  l->node_pending = TRUE;
  return l->n_nodes >= 2 ? l->nodes[l->n_nodes % 2] : SIM_NO_EVENT;
}

/* What the reloads asked for by the backward op about to run wait for: at
 * unpack, unpack_trigger's; on demand, the compute stream getting here
 * (an event recorded now, of layer `index`). */
static guint32
reload_trigger(Lower *l, gint32 index)
{
  if (l->policy->reload == SIM_RELOAD_ON_UNPACK)
    return unpack_trigger(l);
  guint32 due = sim_program_add_event(l->p, l->label_due, index);
  sim_program_record(l->p, l->s_compute, due);
  return due;
}

/* After a backward op: if its reloads were issued at unpack, its end is a
 * node's (unpack_trigger). */
static void
node_done(Lower *l, gint32 index)
{
  if (!l->node_pending)
    return;
  l->node_pending = FALSE;
  guint32 done = sim_program_add_event(l->p, l->label_unpacked, index);
  sim_program_record(l->p, l->s_compute, done);
  l->nodes[l->n_nodes++ % 2] = done;
}

/* Async reload of group j, started by `trigger` (unless SIM_NO_EVENT) and
 * never before j's own offload has finished. */
static void
emit_reload(Lower *l, guint j, guint32 trigger)
{
  if (trigger != SIM_NO_EVENT)
    sim_program_wait(l->p, l->h2d_stream, trigger);
  if (l->h2d_stream != l->s_d2h) /* one stream: its order already waits */
    sim_program_wait(l->p, l->h2d_stream, l->ev_d2h[j]);
  emit_copies(l, j, SIM_DIR_H2D, l->h2d_stream);
  l->ev_h2d[j] = sim_program_add_event(l->p, l->label_reloaded, group_index(l, j));
  sim_program_record(l->p, l->h2d_stream, l->ev_h2d[j]);
}

/* The forward's memory: every kept, offloaded or dropped tensor exists
 * while the forward runs; dropped ones go at its end. */
static void
alloc_saved(const Lower *l, guint g, guint32 op)
{
  const SimLayer *layer = group_layer(l, g);
  const guint32 *labels = &l->labels[l->first[g]];
  const guint8 *fates = &l->fates[l->first[g]];
  gint32 index = group_index(l, g);
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    SimFate fate = (SimFate)fates[k];
    if (!exists_in_forward(fate))
      continue;
    sim_program_mem_inline(l->p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)t->bytes, labels[k], index);
    if (fate == SIM_FATE_DROP)
      sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)t->bytes, labels[k], index);
  }
}

/* After the group's forward: its copies to the host, on the compute stream
 * (sync) or on the d2h stream once the forward is done (async). */
static gboolean input_first(const Lower *l, guint g);

static void
emit_offload(Lower *l, guint g)
{
  if (!offloads(action_at(l, g)) || input_first(l, g))
    return;
  SimProgram *p = l->p;
  emit_pinning(l, g);
  if (!l->policy->async) {
    emit_copies(l, g, SIM_DIR_D2H, l->s_compute);
    return;
  }
  guint32 done = sim_program_add_event(p, l->label_fwd_done, group_index(l, g));
  sim_program_record(p, l->s_compute, done);
  sim_program_wait(p, l->s_d2h, done);
  emit_copies(l, g, SIM_DIR_D2H, l->s_d2h);
  l->ev_d2h[g] = sim_program_add_event(p, l->label_offloaded, group_index(l, g));
  sim_program_record(p, l->s_d2h, l->ev_d2h[g]);
}

static void emit_commit(Lower *l, guint g);

/* Async: the forward of a group waits until the group `inflight` positions
 * before it is on the host (free = wait: and frees its offloaded sources,
 * as TransformerEngine's release_activation_forward_gpu_memory does,
 * cpu_offload.py l. 314-329, 636-637). */
static void
emit_inflight_wait(Lower *l, guint g)
{
  if (!l->policy->async || l->policy->inflight_unit == SIM_INFLIGHT_TENSORS)
    return;
  guint before = group_at(l, group_position(l, g) - (gint64)l->inflight);
  if (before == G_MAXUINT || l->ev_d2h[before] == SIM_NO_EVENT)
    return;
  if (l->policy->free == SIM_FREE_WAIT)
    emit_commit(l, before); /* waits for its copies, then frees them */
  else
    sim_program_wait(l->p, l->s_compute, l->ev_d2h[before]);
}

/* Before the group's backward: its own reload when it has no prefetch (it
 * asks when its backward is due), the wait for it (async), the reload of
 * the group `prefetch` positions below (async), or its copies back on the
 * compute stream (sync). */
static void
emit_reload_for_backward(Lower *l, guint g)
{
  SimProgram *p = l->p;
  guint prefetch = l->prefetch;
  gint32 index = group_index(l, g);
  if (prefetch == 0 && is_async_group_reload(l, g)) {
    emit_reload(l, g, reload_trigger(l, index));
  }
  if (is_async_group_reload(l, g))
    sim_program_wait(p, l->s_compute, l->ev_h2d[g]);
  /* The head's target is reloaded at the boundary (emit_boundary_reloads). */
  guint below = g == group_head(l) || prefetch == 0 ? G_MAXUINT : group_at(l, group_position(l, g) - (gint64)prefetch);
  if (below != G_MAXUINT && is_async_group_reload(l, below)) {
    guint32 started = sim_program_add_event(p, l->label_started, index);
    sim_program_record(p, l->s_compute, started);
    emit_reload(l, below, started);
  }
  if (offloads(action_at(l, g)) && !l->policy->async)
    emit_copies(l, g, SIM_DIR_H2D, l->s_compute);
}

/* The device copies of tensor k of group g its backward frees at once: the
 * tensor, or its reloaded copies, or (kept+copied) both. */
static inline guint
held_copies(const Lower *l, guint g, guint k)
{
  SimFate fate = tensor_fate(l, g, k);
  return fate == SIM_FATE_KEPT_COPIED ? 1 + copies_of(l, g, k) : travels(fate) ? copies_of(l, g, k) : 1;
}

/* The backward's memory: each tensor (and each reloaded copy) freed at its end. */
static void
free_saved(Lower *l, guint g, guint32 op)
{
  const SimLayer *layer = group_layer(l, g);
  const guint32 *labels = &l->labels[l->first[g]];
  const guint8 *fates = &l->fates[l->first[g]];
  gint32 index = group_index(l, g);
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    SimFate fate = (SimFate)fates[k];
    if (fate == SIM_FATE_ELSEWHERE)
      continue;
    sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)(t->bytes * held_copies(l, g, k)),
                           labels[k], index);
  }
}

guint32
lower_dp_collective(SimProgram *p, const SimLink *link, LowerDp *dp, guint32 compute, guint32 comm, guint kind,
                    guint64 bytes, gint32 layer, guint32 label, guint32 after)
{
  guint32 ready = sim_program_add_event(p, label, layer);
  sim_program_record(p, compute, ready);
  sim_program_wait(p, comm, ready);
  if (after != SIM_NO_EVENT)
    sim_program_wait(p, comm, after);
  if (dp->next == dp->barriers->len) {
    guint32 barrier = sim_program_add_barrier(p, dp->label_barrier, layer, dp->members);
    g_array_append_val(dp->barriers, barrier);
  }
  guint32 barrier = g_array_index(dp->barriers, guint32, dp->next++);
  sim_program_record(p, comm, barrier);
  sim_program_wait(p, comm, barrier);
  double seconds = sim_collective_time(link, (SimCollectiveKind)kind, bytes, dp->ranks, dp->nodes);
  return sim_program_collective(p, comm, seconds, layer, label);
}

/* Whether `sharding` reduce-scatters the gradients (ZeRO-2, -3). */
static inline gboolean
shards_grads(guint sharding)
{
  return sharding == SIM_SHARDING_GRADIENTS || sharding == SIM_SHARDING_FULL;
}

void
lower_dp_flush(SimProgram *p, const SimLink *link, LowerDp *dp, guint32 compute, guint32 comm, gint32 layer)
{
  if (dp->pending == 0)
    return;
  guint kind = dp->sharding != SIM_SHARDING_NONE ? SIM_COLLECTIVE_REDUCE_SCATTER : SIM_COLLECTIVE_ALL_REDUCE;
  guint32 op = lower_dp_collective(p, link, dp, compute, comm, kind, dp->pending, layer, dp->label_reduce, SIM_NO_EVENT);
  if (shards_grads(dp->sharding)) {
    /* Only this rank's share of the gradients it reduced stays. */
    guint64 freed =
      dp->pending_grads - sim_sharding_grad_kept(dp->pending_grads, (SimSharding)dp->sharding, dp->ranks);
    if (freed)
      sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)freed, p->grads_tag, layer);
    dp->freed_grads += freed;
  }
  dp->done = sim_program_add_event(p, dp->label_reduce, layer);
  sim_program_record(p, comm, dp->done);
  dp->pending = dp->pending_grads = 0;
}

SimLowerOptimizer
sim_lower_optimizer_step(const SimWorkload *w, guint64 params, guint tensors)
{
  SimLowerOptimizer o = { 0, 0, 0 };
  if (!(w->optimizer_bandwidth > 0) || params == 0)
    return o;
  const SimParamBytes *b = &w->param_bytes;
  SimOptimizerStep step = { .params = params, .tensors = tensors, .dtype_bytes = b->weight,
                            .adamw = b->state >= 8, .master = b->master,
                            .clip = w->clip_grad && b->state >= 8, /* no step (optimizer = none): no clipping */
                            .impl = (SimOptimizerKernels)w->optimizer_kernels };
  g_autoptr(GArray) kernels = g_array_new(FALSE, FALSE, sizeof(SimKernel));
  o.launches = sim_optimizer_step_kernels(&step, kernels, &o.transient);
  double bytes = 0;
  for (guint i = 0; i < kernels->len; i++) {
    const SimKernel *k = &g_array_index(kernels, SimKernel, i);
    bytes += (double)k->read + (double)k->written;
  }
  o.seconds = bytes / w->optimizer_bandwidth;
  return o;
}

/* Nodes GPU 0's tensor-parallel group of `tp` ranks spans (a link built
 * without [node]: one GPU a node). */
static guint
tp_nodes(const SimLink *link, guint tp)
{
  return sim_collective_nodes(0, 1, tp, MAX(link->node.gpus, 1));
}

/* Nodes GPU 0's expert-parallel group spans: ep data-parallel ranks, tp
 * apart (Megatron's expert order tp-ep-dp-pp: sim/model/parallel.h). */
static guint
ep_nodes(const SimLink *link, guint tp, guint ep)
{
  return sim_collective_nodes(0, tp, ep, MAX(link->node.gpus, 1));
}

/* Seconds op o's collective takes: an all-to-all over the expert-parallel
 * group (ep ranks on ep_nodes nodes), any other kind over the
 * tensor-parallel one. */
static double
op_comm_time(const SimLink *link, const SimLayerOp *o, guint tp, guint tp_nodes, guint ep, guint ep_nodes)
{
  SimCollectiveKind kind = (SimCollectiveKind)(o->collective - 1);
  gboolean experts = kind == SIM_COLLECTIVE_ALL_TO_ALL;
  return sim_collective_time(link, kind, o->comm_bytes, experts ? ep : tp, experts ? ep_nodes : tp_nodes);
}

void
sim_lower_layer_comm(const SimLayer *layer, const SimLink *link, guint tp, guint ep, double *forward,
                     double *backward)
{
  *forward = *backward = 0;
  if (layer == NULL || layer->ops == NULL || (tp <= 1 && ep <= 1))
    return;
  guint nodes = tp_nodes(link, tp), enodes = ep_nodes(link, tp, ep);
  for (guint i = 0; i < layer->ops->len; i++) {
    const SimLayerOp *o = sim_layer_op(layer, i);
    if (!o->collective)
      continue;
    double t = op_comm_time(link, o, tp, nodes, ep, enodes);
    for (guint k = 1; k <= o->overlap && i + k < layer->ops->len; k++)
      t -= sim_layer_op(layer, i + k)->seconds;
    *(o->backward ? backward : forward) += MAX(0.0, t);
  }
}

SimLowerOptimizer
sim_lower_optimizer_whole(const SimWorkload *w)
{
  guint tensors;
  guint64 params = sim_workload_parameters(w, &tensors);
  return sim_lower_optimizer_step(w, params, tensors);
}

guint32
lower_optimizer(SimProgram *p, const SimWorkload *w, guint32 stream, guint64 params, guint tensors, guint32 label)
{
  SimLowerOptimizer o = sim_lower_optimizer_step(w, params, tensors);
  guint32 op = sim_program_compute_inline(p, stream, o.seconds, SIM_PHASE_OPTIMIZER, SIM_NO_LAYER, label);
  if (o.transient) {
    sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)o.transient, p->workspace_tag, SIM_NO_LAYER);
    sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)o.transient, p->workspace_tag, SIM_NO_LAYER);
  }
  /* Its memory-bound kernels are optimizer_ms, not memory_ms: the kernel
   * classes split the forward, backward and recompute. */
  if (w->launch > 0 && o.launches)
    sim_program_set_launch_inline(p, op, o.launches * w->launch);
  return op;
}

void
lower_dp_add(Lower *l, gboolean experts, guint64 bytes, guint64 grads, gint32 layer)
{
  LowerDp *dp = experts && l->w->ep > 1 ? l->edp : l->dp;
  if (dp == NULL)
    return;
  dp->pending += bytes;
  dp->pending_grads += grads;
  if (dp->pending >= dp->bucket)
    lower_dp_flush(l->p, l->link, dp, l->s_compute, l->s_comm, layer);
}

/* ---- full sharding: each group's weights gathered around it --------------
 *
 * FSDP (and ZeRO-3) keeps 1/dp of every weight: a group's whole weights
 * are all-gathered into a buffer before its forward and again before its
 * backward, the next group's gather issued as this one starts (FSDP's
 * forward and backward prefetch), and the buffer freed when the group is
 * done (reshard_after_forward). */

static guint64
gathered_bytes(const Lower *l, guint g)
{
  const SimLayer *layer = group_layer(l, g);
  if (l->gathered == NULL || layer == NULL || layer->params == 0)
    return 0;
  return sim_sharding_gathered(&l->w->param_bytes, layer->params, SIM_SHARDING_FULL, l->dp->ranks);
}

/* Group g's gather, unless issued already in this phase (or nothing to
 * gather). */
static void
gather_issue(Lower *l, guint g)
{
  guint64 bytes = gathered_bytes(l, g);
  if (bytes == 0 || l->gathered[g] != SIM_NO_EVENT)
    return;
  gint32 index = group_index(l, g);
  SimProgram *p = l->p;
  /* Offloaded weights: this replica's shard comes from the host first,
   * on the h2d stream beside the activations' reloads, and is device
   * memory until the gather has used it. */
  guint32 copied = SIM_NO_EVENT;
  guint64 shard = l->dp->offload_params ? bytes / l->dp->ranks : 0;
  if (shard) {
    guint32 due = sim_program_add_event(p, l->dp->label_gather, index);
    sim_program_record(p, l->s_compute, due);
    sim_program_wait(p, l->h2d_stream, due);
    guint32 copy = sim_program_copy_inline(p, l->h2d_stream, SIM_DIR_H2D, shard, SIM_HOST_PINNED, index, l->dp->label_shard);
    p->ops[copy].phase = SIM_PHASE_OPTIMIZER; /* static state, not an activation */
    sim_program_mem_inline(p, copy, SIM_AT_START, SIM_POOL_DEVICE, (gint64)shard, p->workspace_tag, index);
    copied = sim_program_add_event(p, l->dp->label_shard, index);
    sim_program_record(p, l->h2d_stream, copied);
  }
  guint32 op = lower_dp_collective(p, l->link, l->dp, l->s_compute, l->s_comm, SIM_COLLECTIVE_ALL_GATHER, bytes,
                                   index, l->dp->label_gather, copied);
  sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)bytes, p->workspace_tag, index);
  if (shard)
    sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)shard, p->workspace_tag, index);
  l->gathered[g] = sim_program_add_event(l->p, l->dp->label_gather, index);
  sim_program_record(l->p, l->s_comm, l->gathered[g]);
}

/* Before group g runs (full sharding): its gather and the next group's
 * (`next`, or G_MAXUINT: none), then the compute stream waits for g's. */
static void
gather_before(Lower *l, guint g, guint next)
{
  if (gathered_bytes(l, g) == 0)
    return;
  gather_issue(l, g);
  if (next != G_MAXUINT)
    gather_issue(l, next);
  sim_program_wait(l->p, l->s_compute, l->gathered[g]);
}

/* After group g ran: its gathered weights are freed (a zero-time op, so
 * that whatever g emitted last keeps its own actions). */
static void
gather_after(Lower *l, guint g)
{
  guint64 bytes = gathered_bytes(l, g);
  if (bytes == 0)
    return;
  gint32 index = group_index(l, g);
  guint32 op = sim_program_compute_inline(l->p, l->s_compute, 0, SIM_PHASE_SYNC, index, l->dp->label_release);
  sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)bytes, l->p->workspace_tag, index);
}

/* Then the group's gradients exist, when they are not static (grad_bytes),
 * until the step ends; and they go to the data-parallel reduction. */
static void
alloc_grads(Lower *l, guint g, guint32 op)
{
  const SimLayer *layer = group_layer(l, g);
  gint32 index = group_index(l, g);
  if (layer->grad_bytes && l->grads_here) {
    sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, (gint64)layer->grad_bytes, l->p->grads_tag, index);
    l->grads += layer->grad_bytes;
  }
  if (l->reduces && layer->reduce_bytes)
    lower_dp_add(l, FALSE, layer->reduce_bytes, layer->grad_bytes, index);
}

/* free = next-commit (verl): group g's offloaded sources stay on the device
 * until the next group commits, which first waits for g's copies; a
 * zero-time op on the compute stream frees them.  free = wait: the same at
 * the in-flight wait for g (emit_inflight_wait). */
static void
emit_commit(Lower *l, guint g)
{
  if (g == G_MAXUINT || l->policy->free == SIM_FREE_COPY_END || l->committed[g] || l->ev_d2h[g] == SIM_NO_EVENT)
    return;
  l->committed[g] = TRUE;
  const SimLayer *layer = group_layer(l, g);
  gint32 index = group_index(l, g);
  sim_program_wait(l->p, l->s_compute, l->ev_d2h[g]);
  guint32 op = sim_program_compute_inline(l->p, l->s_compute, 0, SIM_PHASE_FORWARD, index, l->label_commit);
  if (action_at(l, g) == SIM_ACTION_RECOMPUTE_OFFLOAD && !input_first(l, g))
    sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)layer->input_bytes, l->label_input, index);
  for (guint k = 0; k < layer->tensors->len; k++)
    if (tensor_fate(l, g, k) == SIM_FATE_OFFLOAD)
      sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE,
                             -(gint64)g_array_index(layer->tensors, SimTensor, k).bytes, tensor_label(l, g, k), index);
}

/* After the forward of group g: the commit of the group before it. */
static void
emit_commit_before(Lower *l, guint g)
{
  if (l->policy->free == SIM_FREE_NEXT_COMMIT)
    emit_commit(l, group_at(l, group_position(l, g) - 1));
}

/* head_wait (verl): the loss head's forward waits until every offload is
 * done; the copies are one stream's, so the last group's event says it. */
static void
emit_head_wait(Lower *l)
{
  if (!l->policy->head_wait || !l->policy->async)
    return;
  for (guint i = l->n; i-- > 0;)
    if (l->ev_d2h[i] != SIM_NO_EVENT) {
      sim_program_wait(l->p, l->s_compute, l->ev_d2h[i]);
      return;
    }
}

/* `n` copies of `bytes` of group g go to the host as soon as they are
 * saved: on the compute stream right there (sync), or on the d2h stream
 * once what saved them is done (async); under inflight_unit = tensors the
 * save first waits until the copy `inflight` saves back is done
 * (torchtune).  The hook pins their host buffers right before. */
static void
issue_offload(Lower *l, guint g, guint64 bytes, guint n, guint32 label, gboolean frees)
{
  SimProgram *p = l->p;
  gint32 index = group_index(l, g);
  if (pins_each_copy(l))
    emit_pins(l, g, n);
  if (!l->policy->async) {
    emit_tensor_copies(p, copy_mode(l), index, SIM_DIR_D2H, l->s_compute, bytes, n, label, frees);
    return;
  }
  if (l->policy->inflight_unit == SIM_INFLIGHT_TENSORS && l->saved->len >= l->inflight)
    sim_program_wait(p, l->s_compute, g_array_index(l->saved, guint32, l->saved->len - l->inflight));
  guint32 saved = sim_program_add_event(p, l->label_saved, index);
  sim_program_record(p, l->s_compute, saved);
  sim_program_wait(p, l->s_d2h, saved);
  emit_tensor_copies(p, copy_mode(l), index, SIM_DIR_D2H, l->s_d2h, bytes, n, label, frees);
  guint32 done = sim_program_add_event(p, l->label_offloaded, index);
  sim_program_record(p, l->s_d2h, done);
  g_array_append_val(l->saved, done);
  l->ev_d2h[g] = done;
}

/* start = tensor: tensor k of group g goes to the host as soon as it is
 * saved (issue_offload). */
static void
issue_tensor_offload(Lower *l, guint g, guint k)
{
  const SimTensor *t = &g_array_index(group_layer(l, g)->tensors, SimTensor, k);
  issue_offload(l, g, t->bytes, copies_of(l, g, k), tensor_label(l, g, k), tensor_fate(l, g, k) == SIM_FATE_OFFLOAD);
}

/* input_first: group g's kept input is saved, and offloaded, before its
 * forward (DeepSpeed releases' .to('cpu') before the layer runs; a
 * non-reentrant checkpoint saves its inputs before its region). */
static inline gboolean
input_first(const Lower *l, guint g)
{
  return l->policy->input_first && action_at(l, g) == SIM_ACTION_RECOMPUTE_OFFLOAD;
}

/* Before group g's forward under input_first: a zero-time op from which
 * its input is device memory, and the input's copy to the host (the
 * forward still reads the input: its last op frees it, free_input_first). */
static void
emit_input_first(Lower *l, guint g)
{
  if (!input_first(l, g))
    return;
  gint32 index = group_index(l, g);
  guint64 bytes = group_layer(l, g)->input_bytes;
  guint32 op = sim_program_compute_inline(l->p, l->s_compute, 0, SIM_PHASE_FORWARD, index, l->label_checkpoint);
  sim_program_mem_inline(l->p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)bytes, l->label_input, index);
  issue_offload(l, g, bytes, 1, l->label_input, FALSE);
}

/* input_first: the forward's last op `op` frees the input. */
static void
free_input_first(Lower *l, guint g, guint32 op)
{
  if (input_first(l, g))
    sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)group_layer(l, g)->input_bytes,
                           l->label_input, group_index(l, g));
}

/* start = tensor: layer i's forward as one op per saved tensor that
 * travels, each copy issued as soon as its tensor is saved (async: on the
 * d2h stream once the piece that saved it is done; sync: right there on
 * the compute stream).  The forward's time is shared out by the bytes each
 * piece saves (tensors are saved in the order the layer lists them); a
 * last piece, possibly of no time, carries the rest and the workspace's
 * end.  Under inflight_unit = tensors each save first waits until the copy
 * `inflight` saves back is done (torchtune). */
static void
emit_forward_by_tensor(Lower *l, guint i)
{
  const SimLayer *layer = group_layer(l, i);
  SimProgram *p = l->p;
  const guint8 *fates = &l->fates[l->first[i]];
  const guint32 *labels = &l->labels[l->first[i]];
  guint64 total = 0;
  guint pieces = 1;
  for (guint k = 0; k < layer->tensors->len; k++) {
    SimFate f = (SimFate)fates[k];
    total += exists_in_forward(f) ? g_array_index(layer->tensors, SimTensor, k).bytes : 0;
    pieces += travels(f);
  }
  guint start = 0;
  gboolean first = TRUE;
  for (guint k = 0; k <= layer->tensors->len; k++) {
    gboolean last = k == layer->tensors->len;
    if (!last && !travels((SimFate)fates[k]))
      continue;
    /* The piece that saves tensors start..k. */
    guint64 bytes = 0;
    for (guint j = start; j <= k && j < layer->tensors->len; j++)
      if (exists_in_forward((SimFate)fates[j]))
        bytes += g_array_index(layer->tensors, SimTensor, j).bytes;
    double share = total ? (double)bytes / (double)total : 1.0 / pieces;
    guint32 op = sim_program_compute_inline(p, l->s_compute, layer->forward * share, SIM_PHASE_FORWARD,
                                            group_index(l, i), l->label_fwd);
    if (first)
      sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)layer->workspace_bytes, l->label_workspace,
                             group_index(l, i));
    first = FALSE;
    /* start = tensor runs only for plain offloads: no tensor is dropped. */
    for (guint j = start; j <= k && j < layer->tensors->len; j++)
      if (exists_in_forward((SimFate)fates[j]))
        sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE,
                               (gint64)g_array_index(layer->tensors, SimTensor, j).bytes, labels[j], group_index(l, i));
    if (last) {
      sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)layer->workspace_bytes, l->label_workspace,
                             group_index(l, i));
      break;
    }
    issue_tensor_offload(l, i, k);
    start = k + 1;
  }
}

/* ---- Megatron's module groups --------------------------------------------
 *
 * Under module_groups each hooked module of an offloading layer is a group
 * of its own: the saved references the module's backward unpacks (the
 * module that saved them).  Its copies out leave after its commit op, one
 * per reference; the compute stream waits for its reload before its wait
 * op; and after the end op of each hooked module of any layer the newest
 * offloaded group not reloaded yet comes back (Megatron's LIFO of groups:
 * framework.c, megatron).  A group whose wait comes before any pop reloads
 * there, on the compute stream (tensor_pop's inline reload). */

static inline gboolean
groups_by_module(const Lower *l, guint g)
{
  SimAction a = action_at(l, g);
  return l->policy->module_groups && g < l->n && sim_layer_has_ops(group_layer(l, g)) &&
         (a == SIM_ACTION_OFFLOAD || a == SIM_ACTION_SELECTIVE_OFFLOAD);
}

/* The bytes one copy of reference `use` of `t` moves: its whole storage,
 * or, for a view over part of it, Megatron's gathered contiguous copy of
 * the view (fine_grained_activation_offload.py l. 909-923). */
static inline guint64
ref_bytes(const SimTensor *t, const SimUse *use)
{
  return use->view == SIM_VIEW_PART ? t->bytes / MAX(t->refs, 1u) : t->bytes;
}

/* The commit, wait and end ops of each module of `layer`'s op list: its
 * last forward op (a norm's group commits after its block's residual add,
 * transformer_layer.py l. 760-764, 1109-1115), its first backward op (a
 * norm's, the first of its block: the commit's backward comes before the
 * residual's) and its last backward op (its start function's backward). */
static void
module_ops(Lower *l, const SimLayer *layer)
{
  if (layer->ops == l->mod_ops)
    return;
  l->mod_ops = layer->ops;
  for (guint m = 0; m < SIM_MODULE_COUNT; m++)
    l->mod_commit[m] = l->mod_wait[m] = l->mod_end[m] = G_MAXUINT16;
  for (guint i = 0; i < layer->ops->len; i++) {
    const SimLayerOp *o = sim_layer_op(layer, i);
    if (!o->backward) {
      l->mod_commit[o->module] = (guint16)i;
      continue;
    }
    if (l->mod_wait[o->module] == G_MAXUINT16)
      l->mod_wait[o->module] = (guint16)i;
    l->mod_end[o->module] = (guint16)i;
  }
  static const struct {
    guint norm, last;
  } blocks[] = { { SIM_MODULE_ATTN_NORM, SIM_MODULE_ATTN_RESIDUAL }, { SIM_MODULE_MLP_NORM, SIM_MODULE_MLP_RESIDUAL } };
  for (guint b = 0; b < G_N_ELEMENTS(blocks); b++) {
    guint norm = blocks[b].norm;
    if (l->mod_commit[blocks[b].last] != G_MAXUINT16)
      l->mod_commit[norm] = l->mod_commit[blocks[b].last];
    for (guint m = norm; m <= blocks[b].last; m++)
      l->mod_wait[norm] = MIN(l->mod_wait[norm], l->mod_wait[m]);
  }
}

/* One copy of reference `use` of tensor k of group g, direction `dir`, on
 * `stream`: host memory while it is out; a gathered view's device
 * temporary during the copy out; the source freed after its last copy out
 * (`frees`); the reloaded copy device memory until its use ends. */
static void
emit_ref_copy(Lower *l, guint g, guint k, const SimUse *use, SimDir dir, guint32 stream, gboolean frees)
{
  SimProgram *p = l->p;
  const SimTensor *t = &g_array_index(group_layer(l, g)->tensors, SimTensor, k);
  gint32 index = group_index(l, g);
  CopyMode m = copy_mode(l);
  guint64 bytes = ref_bytes(t, use);
  guint32 label = tensor_label(l, g, k);
  guint32 op = sim_program_copy_inline(p, stream, dir, bytes, m.host, index, label);
  if (dir == SIM_DIR_H2D) {
    sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)bytes, label, index);
    sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_HOST, -host_bytes(m, bytes), label, index);
    return;
  }
  sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_HOST, host_bytes(m, bytes), label, index);
  if (use->view == SIM_VIEW_PART) { /* src_tensor.contiguous() */
    sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)bytes, l->label_workspace, index);
    sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)bytes, l->label_workspace, index);
  }
  if (frees)
    sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)t->bytes, label, index);
}

/* Whether reference `use` of group g's layer is in module m's group and
 * travels. */
static inline gboolean
in_module_group(const Lower *l, guint g, const SimLayer *layer, const SimUse *use, guint m)
{
  return sim_layer_use_module(layer, use) == m && travels(tensor_fate(l, g, use->tensor)) &&
         hook_sees(l->policy, layer, use);
}

/* Module m's group of layer g leaves after its commit op: the d2h stream
 * waits for the compute stream and copies each reference, pinned first
 * where the step pins. */
static void
emit_module_offload(Lower *l, guint g, guint m)
{
  SimProgram *p = l->p;
  const SimLayer *layer = group_layer(l, g);
  gint32 index = group_index(l, g);
  guint n = 0;
  for (guint u = 0; u < layer->uses->len; u++)
    n += in_module_group(l, g, layer, &g_array_index(layer->uses, SimUse, u), m);
  if (pins_each_copy(l))
    emit_pins(l, g, n);
  guint32 ready = sim_program_add_event(p, l->label_fwd_done, index);
  sim_program_record(p, l->s_compute, ready);
  sim_program_wait(p, l->s_d2h, ready);
  for (guint u = 0; u < layer->uses->len; u++) {
    const SimUse *use = &g_array_index(layer->uses, SimUse, u);
    if (!in_module_group(l, g, layer, use, m))
      continue;
    guint *left = &l->left[l->first[g] + use->tensor];
    gboolean frees = tensor_fate(l, g, use->tensor) == SIM_FATE_OFFLOAD && --*left == 0;
    emit_ref_copy(l, g, use->tensor, use, SIM_DIR_D2H, l->s_d2h, frees);
  }
  guint slot = g * SIM_MODULE_COUNT + m;
  l->ev_mod_d2h[slot] = l->ev_d2h[g] = sim_program_add_event(p, l->label_offloaded, index);
  sim_program_record(p, l->s_d2h, l->ev_mod_d2h[slot]);
  g_array_append_val(l->mod_stack, slot);
}

/* Module group `slot` comes back on `stream` (after `trigger`, unless
 * SIM_NO_EVENT, and its own copies out). */
static void
emit_module_reload(Lower *l, guint slot, guint32 stream, guint32 trigger)
{
  SimProgram *p = l->p;
  guint g = slot / SIM_MODULE_COUNT, m = slot % SIM_MODULE_COUNT;
  const SimLayer *layer = group_layer(l, g);
  if (trigger != SIM_NO_EVENT)
    sim_program_wait(p, stream, trigger);
  if (stream != l->s_d2h)
    sim_program_wait(p, stream, l->ev_mod_d2h[slot]);
  for (guint u = 0; u < layer->uses->len; u++) {
    const SimUse *use = &g_array_index(layer->uses, SimUse, u);
    if (in_module_group(l, g, layer, use, m))
      emit_ref_copy(l, g, use->tensor, use, SIM_DIR_H2D, stream, FALSE);
  }
  l->ev_mod_h2d[slot] = sim_program_add_event(p, l->label_reloaded, group_index(l, g));
  sim_program_record(p, stream, l->ev_mod_h2d[slot]);
}

/* After forward op f of layer g: the module groups it commits. */
static void
emit_module_commits(Lower *l, guint g, guint f)
{
  for (guint m = 0; m < SIM_MODULE_COUNT; m++)
    if (((l->policy->hooked >> m) & 1u) && l->mod_commit[m] == f)
      emit_module_offload(l, g, m);
}

/* Before backward op b of layer g: the compute stream waits for each
 * module group of g whose wait op b is (reloaded there if no pop came). */
static void
emit_module_waits(Lower *l, guint g, guint b)
{
  for (guint m = 0; m < SIM_MODULE_COUNT; m++) {
    guint slot = g * SIM_MODULE_COUNT + m;
    if (!((l->policy->hooked >> m) & 1u) || l->mod_wait[m] != b || l->ev_mod_d2h[slot] == SIM_NO_EVENT)
      continue;
    if (l->ev_mod_h2d[slot] == SIM_NO_EVENT) {
      for (guint i = 0; i < l->mod_stack->len; i++) /* reloaded inline: off the stack */
        if (g_array_index(l->mod_stack, guint, i) == slot) {
          g_array_remove_index(l->mod_stack, i);
          break;
        }
      emit_module_reload(l, slot, l->s_compute, SIM_NO_EVENT);
    } else {
      sim_program_wait(l->p, l->s_compute, l->ev_mod_h2d[slot]);
    }
  }
}

/* After backward op b of a layer with ops: for each hooked module whose
 * end op b is, the newest offloaded group not reloaded yet comes back on
 * the h2d stream, after the compute stream got here. */
static void
emit_module_pops(Lower *l, guint g, guint b)
{
  for (guint m = 0; m < SIM_MODULE_COUNT; m++) {
    if (!((l->policy->hooked >> m) & 1u) || l->mod_end[m] != b || l->mod_stack->len == 0)
      continue;
    guint slot = g_array_index(l->mod_stack, guint, l->mod_stack->len - 1);
    g_array_set_size(l->mod_stack, l->mod_stack->len - 1);
    guint32 now = sim_program_add_event(l->p, l->label_started, group_index(l, g));
    sim_program_record(l->p, l->s_compute, now);
    emit_module_reload(l, slot, l->h2d_stream, now);
  }
}

/* ---- groups as ops ------------------------------------------------------
 *
 * A layer (or stage) with ops (SimLayer.ops) is lowered op by op: each
 * forward op is one compute op that allocates the tensors it saves and its
 * spans when it starts and frees the spans that end with it; each backward
 * op frees, when it ends, every storage whose last reference it unpacked
 * and produces its parameter gradients.  A recompute replays the forward
 * ops (full) or the selective region's (selective), rebuilding the tensors
 * they save.  A hook that reloads on unpack (sync offload, reload =
 * on-demand) reloads each reference right before the op that unpacks it and
 * frees the copy after it; with dedup one copy per storage, from its first
 * unpack to its last.  Prefetching schedules reload the group as before and
 * free each storage after its last unpack. */

/* start = tensor: each tensor leaves as soon as it is saved (plain
 * offloads only: nothing of such a group is dropped). */
static inline gboolean
copies_by_tensor(const Lower *l, guint g)
{
  return l->policy->start_tensor && action_at(l, g) == SIM_ACTION_OFFLOAD;
}

/* Op `o` of group g's op list: its interned name (`comm`: its
 * collective's, "all-reduce attn_proj"). */
static inline guint32
op_label(Lower *l, guint g, const SimLayerOp *o, gboolean comm)
{
  const GArray *ops = group_layer(l, g)->ops;
  if (ops != l->label_ops) {
    l->op_labels = g_renew(guint32, l->op_labels, ops->len);
    l->comm_labels = g_renew(guint32, l->comm_labels, ops->len);
    /* A stage's ops carry its name: "head log_softmax", "embed embedding". */
    const char *stage = g == group_embed(l) ? "embed " : g == group_head(l) ? "head " : "";
    for (guint i = 0; i < ops->len; i++) {
      const SimLayerOp *x = &g_array_index(ops, SimLayerOp, i);
      g_autofree char *name = g_strconcat(stage, x->name, NULL);
      l->op_labels[i] = sim_program_intern(l->p, name);
      if (x->collective) {
        g_autofree char *what = g_strdup_printf("%s %s", sim_collective_names[x->collective - 1], name);
        l->comm_labels[i] = sim_program_intern(l->p, what);
      }
    }
    l->label_ops = ops;
  }
  guint i = (guint)(o - &g_array_index(ops, SimLayerOp, 0));
  return comm ? l->comm_labels[i] : l->op_labels[i];
}

static void comm_after(Lower *l, guint g, const SimLayerOp *o);

/* The collective of the op emitted last (Lower.comm_op), if any. */
static inline void
comm_issue(Lower *l)
{
  if (l->comm_op != NULL) {
    const SimLayerOp *o = l->comm_op;
    l->comm_op = NULL;
    comm_after(l, l->comm_group, o);
  }
}

/* The collective of the op emitted last, then the waits for the
 * collectives due before the next op. */
static void
comm_wait_due(Lower *l)
{
  comm_issue(l);
  guint kept = 0;
  for (guint i = 0; i < l->n_comm; i++) {
    if (l->comm[i].left == 0)
      sim_program_wait(l->p, l->s_compute, l->comm[i].done);
    else
      l->comm[kept++] = l->comm[i];
  }
  l->n_comm = kept;
}

/* The compute stream waits for every collective not waited for yet: the
 * last is enough, the communication stream runs them in order. */
static void
comm_wait_all(Lower *l)
{
  comm_issue(l);
  if (l->n_comm > 0)
    sim_program_wait(l->p, l->s_compute, l->comm[l->n_comm - 1].done);
  l->n_comm = 0;
}

/* After op `o` of group g: one op fewer before each pending wait, and o's
 * collective, if it has one, on the communication stream once o is done. */
static void
comm_after(Lower *l, guint g, const SimLayerOp *o)
{
  SimProgram *p = l->p;
  for (guint i = 0; i < l->n_comm; i++)
    l->comm[i].left--;
  if (!o->collective)
    return;
  gint32 index = group_index(l, g);
  double seconds = op_comm_time(l->link, o, l->w->tp, l->tp_nodes, l->w->ep, l->ep_nodes);
  g_assert(l->s_comm != SIM_NO_OP && l->n_comm < G_N_ELEMENTS(l->comm));
  guint32 ready = sim_program_add_event(p, l->label_comm_ready, index);
  sim_program_record(p, l->s_compute, ready);
  sim_program_wait(p, l->s_comm, ready);
  sim_program_collective(p, l->s_comm, seconds, index, op_label(l, g, o, TRUE));
  guint32 done = sim_program_add_event(p, l->label_comm_done, index);
  sim_program_record(p, l->s_comm, done);
  l->comm[l->n_comm].done = done;
  l->comm[l->n_comm].left = o->overlap;
  l->n_comm++;
}

/* Op `o` of group g as one compute op: its kernels' time, its launches on
 * the host (when the workload models launches), its class's sum; then its
 * collective. */
static guint32
emit_op(Lower *l, guint g, const SimLayerOp *o, SimPhase phase)
{
  SimProgram *p = l->p;
  if (l->n_comm > 0 || l->comm_op != NULL)
    comm_wait_due(l);
  guint32 op =
    sim_program_compute_inline(p, l->s_compute, o->seconds, phase, group_index(l, g), op_label(l, g, o, FALSE));
  if (l->w->launch > 0)
    sim_program_set_launch_inline(p, op, o->kernels * l->w->launch);
  p->kernel_work[o->kclass] += o->seconds;
  if (G_UNLIKELY(l->kernel_log != NULL))
    g_array_append_val(l->kernel_log, ((LowerKernelWork){ o->seconds, o->kclass }));
  if (o->collective || l->n_comm > 0) {
    l->comm_op = o;
    l->comm_group = g;
  }
  return op;
}

/* Which forward ops run, and which tensors they allocate. */
typedef enum {
  REPLAY_FORWARD,   /* the forward: every op; kept, offloaded and dropped tensors */
  REPLAY_FULL,      /* full recompute: every op; the tensors never kept (FULL) */
  REPLAY_SELECTIVE, /* selective recompute: the selective ops; the dropped tensors */
} Replay;

static inline gboolean
replays(const SimLayerOp *op, Replay r)
{
  return r != REPLAY_SELECTIVE || op->selective;
}

static inline gboolean
allocated_by(SimFate f, Replay r)
{
  switch (r) {
  case REPLAY_FORWARD:
    return exists_in_forward(f);
  case REPLAY_FULL:
    return f == SIM_FATE_FULL;
  case REPLAY_SELECTIVE:
  default:
    return f == SIM_FATE_DROP;
  }
}

/* The last forward op `r` replays: where what it leaves behind is freed. */
static guint
last_replayed(const SimLayer *layer, Replay r)
{
  guint last = 0;
  for (guint i = 0; i < layer->n_forward; i++)
    if (replays(sim_layer_op(layer, i), r))
      last = i;
  return last;
}

/* The spans op f starts and ends (a forward op under `r`).  A replay of the
 * selective region ends a span whose reader it does not replay with its
 * last op, `last`: walked over every span (rare: a selective recompute);
 * otherwise from the op index. */
static void
emit_op_spans(Lower *l, const SimLayer *layer, guint f, guint last, Replay r, guint32 op, gint32 index)
{
  const SimOpIndex *x = layer->index;
  for (guint i = x->start_off[f]; i < x->start_off[f + 1]; i++) {
    const SimSpan *span = &g_array_index(layer->spans, SimSpan, x->starts[i]);
    sim_program_mem_inline(l->p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)span->bytes, l->label_workspace, index);
  }
  if (r != REPLAY_SELECTIVE) {
    for (guint i = x->end_off[f]; i < x->end_off[f + 1]; i++) {
      const SimSpan *span = &g_array_index(layer->spans, SimSpan, x->ends[i]);
      sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)span->bytes, l->label_workspace, index);
    }
    return;
  }
  for (guint s = 0; s < layer->spans->len; s++) {
    const SimSpan *span = &g_array_index(layer->spans, SimSpan, s);
    if (span->to >= layer->n_forward || !replays(sim_layer_op(layer, span->from), r))
      continue;
    guint to = replays(sim_layer_op(layer, span->to), r) ? span->to : last;
    if (to == f)
      sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)span->bytes, l->label_workspace, index);
  }
}

/* The forward ops of group g under `r`, on the compute stream; returns the
 * last op emitted.  The layer's input (full recompute keeps it) is
 * allocated by the forward's first op; dropped tensors are freed by its
 * last.  Under start = tensor each travelling tensor leaves as soon as the
 * op that saves it is done. */
static guint32
emit_forward_ops(Lower *l, guint g, Replay r)
{
  const SimLayer *layer = group_layer(l, g);
  SimProgram *p = l->p;
  gint32 index = group_index(l, g);
  SimPhase phase = r == REPLAY_FORWARD ? SIM_PHASE_FORWARD : SIM_PHASE_RECOMPUTE;
  gboolean by_tensor = r == REPLAY_FORWARD && copies_by_tensor(l, g);
  gboolean by_module = r == REPLAY_FORWARD && groups_by_module(l, g);
  if (by_module)
    module_ops(l, layer);
  guint last = last_replayed(layer, r), next = 0; /* next: the first tensor not yet saved */
  guint32 op = SIM_NO_OP;
  for (guint f = 0; f < layer->n_forward; f++) {
    const SimLayerOp *o = sim_layer_op(layer, f);
    guint first = next;
    while (next < layer->tensors->len && g_array_index(layer->tensors, SimTensor, next).save_op == f)
      next++;
    if (!replays(o, r))
      continue;
    op = emit_op(l, g, o, phase);
    if (f == 0 && r == REPLAY_FORWARD && recomputes(action_at(l, g)) && !input_first(l, g))
      sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)layer->input_bytes, l->label_input, index);
    for (guint k = first; k < next; k++)
      if (allocated_by(tensor_fate(l, g, k), r))
        sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE,
                               (gint64)g_array_index(layer->tensors, SimTensor, k).bytes, tensor_label(l, g, k), index);
    emit_op_spans(l, layer, f, last, r, op, index);
    if (f == last && r == REPLAY_FORWARD)
      for (guint k = 0; k < layer->tensors->len; k++)
        if (tensor_fate(l, g, k) == SIM_FATE_DROP)
          sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE,
                                 -(gint64)g_array_index(layer->tensors, SimTensor, k).bytes, tensor_label(l, g, k),
                                 index);
    if (by_tensor)
      for (guint k = first; k < next; k++)
        if (travels(tensor_fate(l, g, k)))
          issue_tensor_offload(l, g, k);
    if (by_module)
      emit_module_commits(l, g, f);
  }
  g_assert(next == layer->tensors->len); /* tensors are listed in save order */
  comm_wait_all(l);
  return op;
}

/* Whether use u (at index `ui` of `layer`'s uses) of group g brings a
 * copy back: its tensor travels and the hook saw it; with dedup only the
 * storage's first seen reference. */
static gboolean
use_reloads(const Lower *l, guint g, const SimLayer *layer, guint ui)
{
  const SimUse *use = &g_array_index(layer->uses, SimUse, ui);
  if (!travels(tensor_fate(l, g, use->tensor)) || !hook_sees(l->policy, layer, use))
    return FALSE;
  if (!l->policy->dedup)
    return TRUE;
  for (guint v = layer->index->first_use[use->tensor]; v < ui; v++) {
    const SimUse *before = &g_array_index(layer->uses, SimUse, v);
    if (before->tensor == use->tensor && hook_sees(l->policy, layer, before))
      return FALSE; /* the storage's first seen unpack copies it */
  }
  return TRUE;
}

/* Before backward op b: the references it unpacks that a hook reloads on
 * unpack, on the compute stream (sync) or on the h2d stream when b is due
 * (reload = on-demand) or after the node before the previous one
 * (on-unpack); with dedup only a storage's first unpack copies. */
static void
emit_use_reloads(Lower *l, guint g, guint b)
{
  const SimLayer *layer = group_layer(l, g);
  SimProgram *p = l->p;
  gint32 index = group_index(l, g);
  CopyMode m = copy_mode(l);
  guint32 stream = l->policy->async ? l->h2d_stream : l->s_compute;
  const SimOpIndex *x = layer->index;
  gboolean any = FALSE;
  for (guint u = x->use_off[b]; u < x->use_off[b + 1]; u++) {
    const SimUse *use = &g_array_index(layer->uses, SimUse, u);
    if (!use_reloads(l, g, layer, u))
      continue;
    if (!any && l->policy->async) {
      guint32 due = reload_trigger(l, index);
      if (due != SIM_NO_EVENT)
        sim_program_wait(p, stream, due);
      if (stream != l->s_d2h && l->ev_d2h[g] != SIM_NO_EVENT)
        sim_program_wait(p, stream, l->ev_d2h[g]);
    }
    any = TRUE;
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, use->tensor);
    emit_tensor_copies(p, m, index, SIM_DIR_H2D, stream, t->bytes, 1, tensor_label(l, g, use->tensor), FALSE);
  }
  if (any && l->policy->async) {
    guint32 back = sim_program_add_event(p, l->label_reloaded, index);
    sim_program_record(p, stream, back);
    sim_program_wait(p, l->s_compute, back);
  }
}

/* Backward op b's memory when it ends: the storages whose last reference
 * it unpacked (each reloaded copy of a travelling one: per use without
 * dedup, else the one copy; a kept+copied one's source), its spans, its
 * gradients. */
static void
free_after_use(Lower *l, guint g, guint b, guint32 op)
{
  const SimLayer *layer = group_layer(l, g);
  const SimOpIndex *x = layer->index;
  gint32 index = group_index(l, g);
  gboolean per_use = reloads_on_unpack(l, g) && !l->policy->dedup;
  for (guint i = x->free_off[b]; i < x->free_off[b + 1]; i++) {
    guint k = x->frees[i];
    SimFate fate = tensor_fate(l, g, k);
    if (fate == SIM_FATE_ELSEWHERE || (travels(fate) && per_use && fate != SIM_FATE_KEPT_COPIED))
      continue;
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    guint n = per_use ? 1 : held_copies(l, g, k);
    sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)(t->bytes * n), tensor_label(l, g, k),
                           index);
  }
  if (!per_use)
    return;
  /* Each reference reloaded at its unpack is freed after it: what came
   * back, a gathered view's bytes in Megatron's module groups, the whole
   * storage (emit_use_reloads) under any other hook. */
  gboolean gathered = groups_by_module(l, g);
  for (guint u = x->use_off[b]; u < x->use_off[b + 1]; u++) {
    const SimUse *use = &g_array_index(layer->uses, SimUse, u);
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, use->tensor);
    if (travels(tensor_fate(l, g, use->tensor)) && hook_sees(l->policy, layer, use))
      sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)(gathered ? ref_bytes(t, use) : t->bytes),
                             tensor_label(l, g, use->tensor), index);
  }
}

/* The backward ops of group g, each after the reloads of what it unpacks;
 * returns the last.  `free_input`: the checkpointed input a recompute kept
 * is freed when the last op ends, before Megatron's module pops (which may
 * reload a layer below after it) make that op no longer the newest. */
static guint32
emit_backward_ops(Lower *l, guint g, gboolean free_input)
{
  const SimLayer *layer = group_layer(l, g);
  SimProgram *p = l->p;
  gint32 index = group_index(l, g);
  gboolean by_module = l->policy->module_groups && g < l->n;
  gboolean per_use = reloads_on_unpack(l, g) && offloads(action_at(l, g)) && !groups_by_module(l, g);
  if (by_module)
    module_ops(l, layer);
  guint32 op = SIM_NO_OP;
  for (guint b = layer->n_forward; b < layer->ops->len; b++) {
    const SimLayerOp *o = sim_layer_op(layer, b);
    comm_issue(l); /* the previous op's collective starts before these reloads */
    if (per_use)
      emit_use_reloads(l, g, b);
    if (by_module)
      emit_module_waits(l, g, b);
    op = emit_op(l, g, o, SIM_PHASE_BACKWARD);
    emit_op_spans(l, layer, b, b, REPLAY_FORWARD, op, index); /* one op's spans: either phase */
    free_after_use(l, g, b, op);
    if (o->grad_bytes && l->grads_here) {
      sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, (gint64)o->grad_bytes, p->grads_tag, index);
      l->grads += o->grad_bytes;
    }
    if (l->reduces && o->reduce_bytes)
      lower_dp_add(l, o->experts, o->reduce_bytes, o->grad_bytes, index);
    node_done(l, index);
    if (free_input && b + 1 == layer->ops->len)
      sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)layer->input_bytes, l->label_input, index);
    if (by_module)
      emit_module_pops(l, g, b);
  }
  comm_wait_all(l);
  return op;
}

/* A stage with ops, after its waits: its forward ops (the head's last
 * makes the outputs a caller holds) and its copies out, or its backward
 * ops.  Returns the last op. */
static guint32
emit_stage_ops(Lower *l, guint g, SimPhase phase)
{
  if (phase != SIM_PHASE_FORWARD)
    return emit_backward_ops(l, g, FALSE);
  guint32 op = emit_forward_ops(l, g, REPLAY_FORWARD);
  gboolean whole = l->has_embed && l->has_head && l->w->forward_bytes;
  if (g == group_embed(l) && whole)
    sim_program_mem_inline(l->p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)l->w->forward_bytes, l->label_workspace,
                           SIM_NO_LAYER);
  if (g == group_head(l) && l->w->held_bytes)
    sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, (gint64)l->w->held_bytes, l->p->outputs_tag,
                           SIM_NO_LAYER);
  if (g == group_head(l) && whole)
    sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)l->w->forward_bytes, l->label_workspace,
                           SIM_NO_LAYER);
  if (!copies_by_tensor(l, g))
    emit_offload(l, g);
  emit_commit_before(l, g);
  return op;
}

/* The embedding or the loss head: one op each way, its tensors kept, or
 * offloaded like a layer's under scope = all.  Its names are interned here,
 * after its label, in the order the lowering has always interned them. */
static guint32
emit_stage(Lower *l, guint g, const char *name, SimPhase phase)
{
  const SimLayer *stage = group_layer(l, g);
  if (stage == NULL)
    return SIM_NO_OP;
  guint32 label = sim_program_intern(l->p, name);
  gboolean forward = phase == SIM_PHASE_FORWARD;
  if (forward) {
    for (guint k = 0; k < stage->tensors->len; k++)
      l->labels[l->first[g] + k] =
        sim_program_intern_slot(l->p, l->first[g] + k, g_array_index(stage->tensors, SimTensor, k).name);
    if (g == group_head(l))
      emit_head_wait(l);
    if (offloads(action_at(l, g)))
      emit_inflight_wait(l, g);
  } else {
    emit_reload_for_backward(l, g);
  }
  if (sim_layer_has_ops(stage))
    return emit_stage_ops(l, g, phase);
  guint32 op = sim_program_compute_inline(l->p, l->s_compute, forward ? stage->forward : stage->backward,
                                          phase, SIM_NO_LAYER, label);
  workspace(l, op, forward ? stage->workspace_bytes : stage->backward_workspace_bytes, SIM_NO_LAYER);
  if (forward) {
    alloc_saved(l, g, op);
    if (g == group_head(l) && l->w->held_bytes)
      sim_program_mem_inline(l->p, op, SIM_AT_END, SIM_POOL_DEVICE, (gint64)l->w->held_bytes, l->p->outputs_tag,
                             SIM_NO_LAYER);
    emit_offload(l, g);
    emit_commit_before(l, g);
  } else {
    free_saved(l, g, op);
    alloc_grads(l, g, op);
    node_done(l, SIM_NO_LAYER);
  }
  return op;
}

/* After layer i's forward: its copies out, or under defer_offload those
 * of the layer whose copies waited for this forward (DeepSpeed master:
 * input k leaves when input k + 1 registers, after layer k + 1's forward;
 * lower_slice_forward sends the last one). */
static void
emit_offload_after(Lower *l, guint i)
{
  if (!l->policy->defer_offload) {
    emit_offload(l, i);
    return;
  }
  if (l->deferred != G_MAXUINT)
    emit_offload(l, l->deferred);
  l->deferred = offloads(action_at(l, i)) ? i : G_MAXUINT;
}

static void
emit_forward(Lower *l, guint i)
{
  const SimLayer *layer = group_layer(l, i);
  SimProgram *p = l->p;
  emit_inflight_wait(l, i);
  emit_input_first(l, i);
  if (sim_layer_has_ops(layer)) {
    free_input_first(l, i, emit_forward_ops(l, i, REPLAY_FORWARD));
    if (!copies_by_tensor(l, i) && !groups_by_module(l, i))
      emit_offload_after(l, i);
    emit_commit_before(l, i);
    return;
  }
  if (l->policy->start_tensor && action_at(l, i) == SIM_ACTION_OFFLOAD) {
    emit_forward_by_tensor(l, i);
    emit_commit_before(l, i);
    return;
  }
  guint32 op = sim_program_compute_inline(p, l->s_compute, layer->forward, SIM_PHASE_FORWARD, group_index(l, i),
                                          l->label_fwd);
  if (recomputes(action_at(l, i)) && !input_first(l, i))
    sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)layer->input_bytes, l->label_input, group_index(l, i));
  free_input_first(l, i, op);
  alloc_saved(l, i, op);
  workspace(l, op, layer->workspace_bytes, group_index(l, i));
  emit_offload_after(l, i);
  emit_commit_before(l, i);
}

/* Layer i's recompute (the forward ops again, or the selective region's)
 * and its backward ops; the checkpointed input goes with the last. */
static guint32
emit_backward_with_ops(Lower *l, guint i)
{
  SimAction a = action_at(l, i);
  if (recomputes(a))
    emit_forward_ops(l, i, REPLAY_FULL);
  else if (a == SIM_ACTION_SELECTIVE || a == SIM_ACTION_SELECTIVE_OFFLOAD)
    emit_forward_ops(l, i, REPLAY_SELECTIVE);
  return emit_backward_ops(l, i, recomputes(a));
}

static guint32
emit_backward(Lower *l, guint i)
{
  const SimLayer *layer = group_layer(l, i);
  SimProgram *p = l->p;
  SimAction a = action_at(l, i);
  emit_reload_for_backward(l, i);
  if (sim_layer_has_ops(layer))
    return emit_backward_with_ops(l, i);

  /* Full recompute reruns the forward and rebuilds every tensor; selective
   * recompute rebuilds only the dropped ones, at their own cost. */
  gboolean full = recomputes(a);
  double redo = full ? layer->forward : sim_layer_selective_recompute(layer);
  if (full || a == SIM_ACTION_SELECTIVE || a == SIM_ACTION_SELECTIVE_OFFLOAD) {
    guint32 op = sim_program_compute_inline(p, l->s_compute, redo, SIM_PHASE_RECOMPUTE, group_index(l, i),
                                            l->label_recompute);
    for (guint k = 0; k < layer->tensors->len; k++) {
      const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
      SimFate fate = tensor_fate(l, i, k);
      if (fate == SIM_FATE_FULL || fate == SIM_FATE_DROP)
        sim_program_mem_inline(p, op, SIM_AT_START, SIM_POOL_DEVICE, (gint64)t->bytes, tensor_label(l, i, k),
                               group_index(l, i));
    }
    workspace(l, op, layer->workspace_bytes, group_index(l, i));
  }

  guint32 op = sim_program_compute_inline(p, l->s_compute, layer->backward, SIM_PHASE_BACKWARD, group_index(l, i),
                                          l->label_bwd);
  workspace(l, op, layer->backward_workspace_bytes, group_index(l, i));
  free_saved(l, i, op);
  if (full)
    sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)layer->input_bytes, l->label_input, group_index(l, i));
  alloc_grads(l, i, op);
  node_done(l, group_index(l, i));
  return op;
}

/* Every label the lowering uses, interned once per program. */
void
lower_labels(Lower *l)
{
  SimProgram *p = l->p;
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
  l->label_saved = sim_program_intern(p, "saved");
  l->label_commit = sim_program_intern(p, "commit");
  l->label_checkpoint = sim_program_intern(p, "checkpoint");
  l->label_unpacked = sim_program_intern(p, "unpacked");
  l->label_comm_ready = sim_program_intern(p, "ready to communicate");
  l->label_comm_done = sim_program_intern(p, "communicated");
}

/* Where each group's tensors sit in labels[] and fates[], and each layer
 * tensor's name interned by pointer against the previous lowering's
 * (tensor names are interned strings). */
static void
slice_tensors(Lower *l)
{
  SimProgram *p = l->p;
  l->first = g_new(guint, l->n_groups + 1);
  l->first[0] = 0;
  for (guint g = 0; g < l->n_groups; g++) {
    const SimLayer *layer = group_layer(l, g);
    l->first[g + 1] = l->first[g] + (layer ? layer->tensors->len : 0);
  }
  l->labels = g_new(guint32, MAX(l->first[l->n_groups], 1u));
  for (guint i = 0; i < l->n; i++) {
    const SimLayer *layer = group_layer(l, i);
    for (guint k = 0; k < layer->tensors->len; k++)
      l->labels[l->first[i] + k] =
        sim_program_intern_slot(p, l->first[i] + k, g_array_index(layer->tensors, SimTensor, k).name);
  }
}

/* The reload distance and the in-flight limit the copies run under.
 * reload = on-demand asks for each group when its backward is due.
 * TransformerEngine's window, with n of L layers offloading: the forward of
 * layer L - n + j waits for layer j's copies (L - n groups in flight) and
 * layer j reloads when the backward of L - 1 - n + j starts. */
static void
derive_schedule(Lower *l)
{
  const SimPolicy *p = l->policy;
  l->prefetch = sim_policy_on_demand(p) ? 0 : p->prefetch;
  l->inflight = MAX(p->inflight, 1u);
  l->h2d_stream = p->shared_stream ? l->s_d2h : l->s_h2d;
  if (p->inflight_unit != SIM_INFLIGHT_WINDOW)
    return;
  guint n_off = 0;
  for (guint i = 0; i < l->n; i++)
    n_off += offloads(l->actions[i]);
  l->inflight = MAX(l->n - n_off, 1u);
  l->prefetch = sim_policy_on_demand(p) || n_off >= l->n ? 0 : l->n - 1 - n_off;
}

/* Each group's action and each tensor's fate, decided once.  An offload
 * with nothing to move is no offload: no events, no waits. */
static void
decide(Lower *l)
{
  l->actions = g_new(SimAction, l->n_groups);
  if (l->keeps_all) {
    for (guint g = 0; g < l->n_groups; g++)
      l->actions[g] = SIM_ACTION_KEEP;
  } else {
    policy_actions(l->policy, l->base, l->n, l->actions);
    l->actions[group_embed(l)] = l->actions[group_head(l)] = stage_action(l->policy);
  }
  guint tensors = MAX(l->first[l->n_groups], 1u);
  l->fates = g_new(guint8, tensors);
  l->copies = g_new(guint, tensors);
  for (guint g = 0; g < l->n_groups; g++) {
    const SimLayer *layer = group_layer(l, g);
    if (layer != NULL)
      l->actions[g] =
        sim_lower_fates(l->policy, layer, l->actions[g], &l->fates[l->first[g]], &l->copies[l->first[g]]);
  }
  if (l->policy->module_groups) {
    l->left = g_memdup2(l->copies, sizeof(guint) * tensors);
    l->ev_mod_d2h = g_new(guint32, l->n_groups * SIM_MODULE_COUNT);
    l->ev_mod_h2d = g_new(guint32, l->n_groups * SIM_MODULE_COUNT);
    for (guint i = 0; i < l->n_groups * SIM_MODULE_COUNT; i++)
      l->ev_mod_d2h[i] = l->ev_mod_h2d[i] = SIM_NO_EVENT;
    l->mod_stack = g_array_new(FALSE, FALSE, sizeof(guint));
  }
  l->ev_d2h = g_new(guint32, l->n_groups);
  l->ev_h2d = g_new(guint32, l->n_groups);
  l->committed = g_new0(gboolean, l->n_groups);
  for (guint g = 0; g < l->n_groups; g++)
    l->ev_d2h[g] = l->ev_h2d[g] = SIM_NO_EVENT;
  derive_schedule(l);
}

/* The groups within `prefetch` positions of the top (the head included)
 * reload as soon as the forward pass is over, the top first. */
static void
emit_boundary_reloads(Lower *l)
{
  if (!l->policy->async || l->prefetch == 0)
    return;
  guint32 boundary = SIM_NO_EVENT;
  for (gint64 pos = l->n; pos >= -1 && pos + (gint64)l->prefetch >= (gint64)l->n; pos--) {
    guint g = group_at(l, pos);
    if (g == G_MAXUINT || !is_async_group_reload(l, g))
      continue;
    if (boundary == SIM_NO_EVENT) {
      boundary = sim_program_add_event(l->p, l->label_boundary, SIM_NO_LAYER);
      sim_program_record(l->p, l->s_compute, boundary);
    }
    emit_reload(l, g, boundary);
  }
}

void
lower_slice_begin(Lower *l)
{
  l->n_groups = l->n + 2;
  l->saved = g_array_new(FALSE, FALSE, sizeof(guint32));
  l->deferred = G_MAXUINT;
  l->n_nodes = 0;
  l->node_pending = FALSE;
  l->grads = 0;
  l->gathered = l->dp && l->dp->sharding == SIM_SHARDING_FULL ? g_new(guint32, l->n_groups) : NULL;
  slice_tensors(l);
  decide(l);
}

/* The groups of the slice in the order a phase runs them: the
 * embedding, the layers, the head forward; the reverse backward. */
static guint
phase_group(const Lower *l, guint k, gboolean backward)
{
  guint order = backward ? l->n + 1 - k : k; /* 0: the embedding, 1..n the layers, n + 1 the head */
  return order == 0 ? group_embed(l) : order == l->n + 1 ? group_head(l) : order - 1;
}

/* Full sharding: no group's weights gathered yet in this phase. */
static void
gather_reset(Lower *l)
{
  if (l->gathered)
    for (guint g = 0; g < l->n_groups; g++)
      l->gathered[g] = SIM_NO_EVENT;
}

/* Every group of the slice in its phase's order, each between its
 * weights' gather and their release (full sharding); in the backward
 * FSDP reduce-scatters each group's gradients when it ends. */
static void
emit_groups(Lower *l, gboolean backward)
{
  SimPhase phase = backward ? SIM_PHASE_BACKWARD : SIM_PHASE_FORWARD;
  gather_reset(l);
  for (guint k = 0; k < l->n + 2; k++) {
    guint g = phase_group(l, k, backward);
    gather_before(l, g, k + 1 < l->n + 2 ? phase_group(l, k + 1, backward) : G_MAXUINT);
    if (g == group_embed(l))
      emit_stage(l, g, "embed", phase);
    else if (g == group_head(l))
      emit_stage(l, g, "head", phase);
    else if (backward)
      emit_backward(l, g);
    else
      emit_forward(l, g);
    gather_after(l, g);
    if (backward && l->reduces && l->dp->sharding == SIM_SHARDING_FULL)
      lower_dp_flush(l->p, l->link, l->dp, l->s_compute, l->s_comm, group_index(l, g));
  }
}

void
lower_slice_forward(Lower *l)
{
  emit_groups(l, FALSE);
  /* defer_offload: the last deferred group leaves when the forward pass ends. */
  if (l->deferred != G_MAXUINT)
    emit_offload(l, l->deferred);
  l->deferred = G_MAXUINT;
  /* free = next-commit: what no later group committed is freed when the forward pass ends. */
  for (guint g = 0; g < l->n_groups; g++)
    emit_commit(l, g);
}

void
lower_slice_backward(Lower *l)
{
  emit_boundary_reloads(l);
  emit_groups(l, TRUE);
}

void
lower_slice_end(Lower *l)
{
  g_free(l->actions);
  g_free(l->committed);
  g_array_unref(l->saved);
  g_free(l->ev_d2h);
  g_free(l->ev_h2d);
  g_free(l->labels);
  g_free(l->fates);
  g_free(l->copies);
  g_free(l->first);
  g_clear_pointer(&l->left, g_free);
  g_clear_pointer(&l->ev_mod_d2h, g_free);
  g_clear_pointer(&l->ev_mod_h2d, g_free);
  g_clear_pointer(&l->mod_stack, g_array_unref);
  l->mod_ops = NULL;
  g_clear_pointer(&l->op_labels, g_free);
  g_clear_pointer(&l->comm_labels, g_free);
  g_clear_pointer(&l->gathered, g_free);
  l->label_ops = NULL;
}

void
sim_lower_into(SimProgram *p, const SimWorkload *w, const SimPolicy *policy, const SimLink *link)
{
  guint n = sim_workload_n_layers(w);
  Lower l = { .p = p, .w = w, .policy = policy, .link = link, .n = n, .has_embed = TRUE, .has_head = TRUE,
              .s_compute = SIM_LOWER_STREAM_COMPUTE, .s_d2h = SIM_LOWER_STREAM_D2H, .s_h2d = SIM_LOWER_STREAM_H2D,
              .s_comm = SIM_NO_OP, .grads_here = TRUE };
  sim_program_reset(p);
  sim_program_add_stream(p, "compute");
  sim_program_add_stream(p, "d2h");
  sim_program_add_stream(p, "h2d");
  if (w->tp > 1 || w->ep > 1) {
    l.s_comm = sim_program_add_stream(p, "comm");
    l.tp_nodes = tp_nodes(link, w->tp);
    l.ep_nodes = ep_nodes(link, w->tp, w->ep);
  }
  /* One GPU: nothing is sharded (the loader refuses sharding with dp = 1). */
  sim_program_set_baseline(p, SIM_POOL_DEVICE, w->static_bytes, "static");
  lower_labels(&l);
  lower_slice_begin(&l);
  lower_slice_forward(&l);
  lower_slice_backward(&l);
  /* The optimizer step consumes the gradients and the caller drops its
   * outputs when the step ends: at the end of the step's op. */
  guint tensors;
  guint64 params = sim_workload_parameters(w, &tensors);
  guint32 last = lower_optimizer(p, w, l.s_compute, params, tensors, sim_program_intern(p, "optimizer"));
  if (l.grads)
    sim_program_mem_inline(p, last, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)l.grads, p->grads_tag, SIM_NO_LAYER);
  if (w->held_bytes && w->head)
    sim_program_mem_inline(p, last, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)w->held_bytes, p->outputs_tag, SIM_NO_LAYER);
  lower_slice_end(&l);
}

SimProgram *
sim_lower(const SimWorkload *w, const SimPolicy *policy, const SimLink *link)
{
  SimProgram *p = sim_program_new();
  sim_lower_into(p, w, policy, link);
  return p;
}
