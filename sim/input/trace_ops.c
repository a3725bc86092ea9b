/* sim/input/trace_ops.c — a recording's stages as op lists.
 *
 * The recorder (python/offsim_torch/recorder.py) places every row: a forward
 * row in the forward op that ran it or saved it (forward_op: one run of one
 * module, a new one at every module entry and exit), a backward row in the
 * autograd node that ran it or unpacks it (backward_op: the node's place in
 * the order nodes end).  Both are ordering keys, not dense indices.  Here
 * each stage's places become its ops, in order: forward places before
 * backward ones, each split into one op per kernel class it ran (GEMM,
 * attention, memory-bound; SimLayerOp holds one class), timed by the flat
 * model over that class's counts (products at matmul_flops × efficiency,
 * the rest at hbm_bandwidth, as sim_trace_load_timed times whole stages),
 * with as many kernels as ATen calls.  The order of classes inside one
 * place is not recorded: GEMM, attention, then memory-bound.
 *
 * A tensor exists from the first op of the forward place that saved its
 * first reference; each reference is a use by the last op of the backward
 * place that unpacks it (a node frees what it unpacked when it ends), so
 * the storage is freed when its last reference has been unpacked, as
 * PyTorch frees it.
 *
 * A file with allocation rows (recorder.py's allocation log: every block
 * that is not a saved storage, with the place that made it and the place
 * that freed it) gives the ops what they hold beside what they save.  The
 * step is a sequence of segments, one per (stage, phase) in the order they
 * run; a block lives from the first op at or after the place that made it
 * (nothing runs between two ops, so this is exact) to the last op at or
 * before the place that freed it, and in every segment between over the
 * whole phase: one span per segment.  A workspace row is its place's own;
 * a gradient is the node's grad_bytes (made as the node ends, held to the
 * end of the step); a held block lasts to the end of the backward.  Places
 * are looked up by a walk over the stage's places: O(places) per row.
 * Without allocation rows a stage's ops carry only what they save (the
 * scenario's `workspace` spans each phase, trace.h).
 */
#include "input/internal/trace_private.h"

#include "base/error.h"
#include "engine/kernel.h"

#include <string.h>

/* One op to be: a place's work of one kernel class in one phase. */
typedef struct {
  gint64 place;
  guint8 backward;
  guint8 kclass;
  const char *name; /* a row's, borrowed */
  double flops, moved;
  guint64 calls;
} Part;

/* A place's key: its phase and place (and, for a part, its class). */
static gint64
place_key(gboolean backward, gint64 place)
{
  return place * 2 + backward;
}

static gint
part_cmp(gconstpointer a, gconstpointer b)
{
  const Part *x = a, *y = b;
  if (x->backward != y->backward)
    return x->backward < y->backward ? -1 : 1; /* every forward op first */
  if (x->place != y->place)
    return x->place < y->place ? -1 : 1;
  return (gint)x->kclass - (gint)y->kclass;
}

static gboolean
same_place(const Part *a, const Part *b)
{
  return a->backward == b->backward && a->place == b->place;
}

/* The part of (phase, place, class), added when new. */
static Part *
part_of(GArray *parts, GHashTable *where, gboolean backward, gint64 place, guint8 kclass, const char *name)
{
  gint64 key = place_key(backward, place) * SIM_KERNEL_CLASSES + kclass;
  gpointer found = g_hash_table_lookup(where, &key);
  if (found)
    return &g_array_index(parts, Part, GPOINTER_TO_UINT(found) - 1);
  Part p = { .place = place, .backward = (guint8)backward, .kclass = kclass, .name = name };
  g_array_append_val(parts, p);
  gint64 *k = g_new(gint64, 1);
  *k = key;
  g_hash_table_insert(where, k, GUINT_TO_POINTER(parts->len));
  return &g_array_index(parts, Part, parts->len - 1);
}

/* Whether a place has a part of any class yet. */
static gboolean
has_place(GHashTable *where, gboolean backward, gint64 place)
{
  for (gint64 c = 0; c < SIM_KERNEL_CLASSES; c++) {
    gint64 key = place_key(backward, place) * SIM_KERNEL_CLASSES + c;
    if (g_hash_table_contains(where, &key))
      return TRUE;
  }
  return FALSE;
}

/* The parts of one stage from its rows (indices into `rows`), sorted:
 * every compute row's counts, then an empty memory-bound part for a place
 * a saved reference names that ran no counted op (named by the reference:
 * its module, the node that unpacks it). */
static gboolean
stage_parts(const GArray *rows, const GArray *mine, const char *origin, GArray *parts, GError **error)
{
  g_autoptr(GHashTable) where = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  for (guint i = 0; i < mine->len; i++) {
    const SimTraceRow *r = &g_array_index(rows, SimTraceRow, g_array_index(mine, guint, i));
    if (!r->compute)
      continue;
    Part *p = part_of(parts, where, r->backward, r->backward ? r->backward_op : r->forward_op, r->kclass, r->name);
    p->flops += (double)r->flops;
    p->moved += (double)r->moved;
    p->calls += r->calls;
  }
  for (guint i = 0; i < mine->len; i++) {
    const SimTraceRow *r = &g_array_index(rows, SimTraceRow, g_array_index(mine, guint, i));
    if (r->compute)
      continue;
    if (r->alloc != SIM_TRACE_ALLOC_NONE)
      continue; /* laid over the ops around its places (alloc_spans) */
    gboolean no_forward = r->forward_op == SIM_TRACE_NO_PLACE;
    if (no_forward || r->backward_op == SIM_TRACE_NO_PLACE) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column '%s': a saved reference needs the %s op that %s it",
                  origin, r->line, no_forward ? "forward_op" : "backward_op", no_forward ? "forward" : "backward",
                  no_forward ? "saves" : "unpacks");
      return FALSE;
    }
    if (!has_place(where, FALSE, r->forward_op))
      part_of(parts, where, FALSE, r->forward_op, SIM_KERNEL_MEMORY, r->name);
    if (!has_place(where, TRUE, r->backward_op))
      part_of(parts, where, TRUE, r->backward_op, SIM_KERNEL_MEMORY, r->node);
  }
  g_array_sort(parts, part_cmp);
  return TRUE;
}

/* The op name of part i: its place's name, with its class when the place
 * ran kernels of several ("self_attn/gemm"). */
static char *
part_name(const GArray *parts, guint i)
{
  const Part *p = &g_array_index(parts, Part, i);
  gboolean alone = !(i > 0 && same_place(p, &g_array_index(parts, Part, i - 1))) &&
                   !(i + 1 < parts->len && same_place(p, &g_array_index(parts, Part, i + 1)));
  return alone ? g_strdup(p->name) : g_strconcat(p->name, "/", sim_kernel_class_names[p->kclass], NULL);
}

static gint
use_cmp(gconstpointer a, gconstpointer b)
{
  const SimUse *x = a, *y = b;
  return x->op != y->op ? (x->op < y->op ? -1 : 1) : (gint)x->tensor - (gint)y->tensor;
}

static const char *
stage_text(gint64 scope, char buf[32])
{
  if (scope == SIM_TRACE_SCOPE_EMBED)
    return "the embedding";
  if (scope == SIM_TRACE_SCOPE_HEAD)
    return "the head";
  g_snprintf(buf, 32, "layer %" G_GINT64_FORMAT, scope);
  return buf;
}

/* The ops of the parts; `first` and `last` map a place key to its first
 * and last op (+ 1). */
static void
add_ops(SimLayer *stage, const GArray *parts, const SimDevice *dev, GHashTable *first, GHashTable *last)
{
  sim_layer_begin_ops(stage);
  for (guint i = 0; i < parts->len; i++) {
    const Part *p = &g_array_index(parts, Part, i);
    g_autofree char *name = part_name(parts, i);
    gboolean memory = p->kclass == SIM_KERNEL_MEMORY; /* a product's bytes are not timed again */
    double seconds = sim_trace_flat_seconds(dev, memory ? 0 : p->flops, memory ? p->moved : 0);
    guint op = sim_layer_add_op(stage, name, p->backward, p->kclass, seconds, (guint)MIN(p->calls, G_MAXUINT));
    gint64 *key = g_new(gint64, 1);
    *key = place_key(p->backward, p->place);
    if (!g_hash_table_contains(first, key))
      g_hash_table_insert(first, g_memdup2(key, sizeof *key), GUINT_TO_POINTER(op + 1));
    g_hash_table_replace(last, key, GUINT_TO_POINTER(op + 1));
  }
}

static guint
op_at(GHashTable *map, gboolean backward, gint64 place)
{
  gint64 key = place_key(backward, place);
  guint op = GPOINTER_TO_UINT(g_hash_table_lookup(map, &key));
  g_assert(op > 0); /* every place of a saved row has a part */
  return op - 1;
}

/* One stage while its ops are built: the place maps outlive add_ops, for
 * the allocations other stages' rows lay over it. */
typedef struct {
  SimLayer *layer;
  gint64 scope;
  GHashTable *first, *last; /* place key -> its first and last op + 1 */
  GArray *places;           /* Placed, by phase then place: the places that have ops */
} Stage;

/* A place with ops: its phase, its number and its first and last op. */
typedef struct {
  gboolean backward;
  gint64 place;
  guint first, last;
} Placed;

static void
stage_clear(Stage *st)
{
  g_clear_pointer(&st->first, g_hash_table_unref);
  g_clear_pointer(&st->last, g_hash_table_unref);
  g_clear_pointer(&st->places, g_array_unref);
}

/* The places of the stage's ops, in op order (parts are sorted so). */
static GArray *
stage_places(const GArray *parts)
{
  GArray *placed = g_array_new(FALSE, FALSE, sizeof(Placed));
  for (guint i = 0; i < parts->len; i++) {
    const Part *p = &g_array_index(parts, Part, i);
    if (i > 0 && same_place(p, &g_array_index(parts, Part, i - 1))) {
      g_array_index(placed, Placed, placed->len - 1).last = i;
      continue;
    }
    Placed x = { p->backward, p->place, i, i };
    g_array_append_val(placed, x);
  }
  return placed;
}

/* The op a block made at `place` is held from: the first op at or after
 * it in its phase (nothing runs between, so this is exact), or the
 * phase's last op when none comes after. */
static guint
op_from(const Stage *st, gboolean backward, gint64 place)
{
  guint last = 0;
  for (guint i = 0; i < st->places->len; i++) {
    const Placed *x = &g_array_index(st->places, Placed, i);
    if (x->backward != backward)
      continue;
    if (x->place >= place)
      return x->first;
    last = x->last;
  }
  return last;
}

/* The op a block freed at `place` is held to: the last op at or before it
 * in its phase.  FALSE when it was freed before any op of the phase. */
static gboolean
op_until(const Stage *st, gboolean backward, gint64 place, guint *op)
{
  gboolean found = FALSE;
  for (guint i = 0; i < st->places->len; i++) {
    const Placed *x = &g_array_index(st->places, Placed, i);
    if (x->backward == backward && x->place <= place) {
      *op = x->last;
      found = TRUE;
    }
  }
  return found;
}

/* The stage's ops from its rows, before any span or use. */
static gboolean
stage_begin(Stage *st, const GArray *rows, const GArray *mine, const char *origin, const SimDevice *dev,
            GError **error)
{
  g_autoptr(GArray) parts = g_array_new(FALSE, TRUE, sizeof(Part));
  if (!stage_parts(rows, mine, origin, parts, error))
    return FALSE;
  guint n_forward = 0;
  for (guint i = 0; i < parts->len; i++)
    n_forward += !g_array_index(parts, Part, i).backward;
  char buf[32];
  if (n_forward == 0 || n_forward == parts->len || parts->len > SIM_LAYER_MAX_OPS) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s: %s", origin, stage_text(st->scope, buf),
                parts->len > SIM_LAYER_MAX_OPS ? "more ops than a layer holds (" G_STRINGIFY(SIM_LAYER_MAX_OPS) ")"
                : n_forward == 0               ? "no forward op (rows with forward_op)"
                                               : "no backward op (rows with backward_op)");
    return FALSE;
  }
  st->first = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  st->last = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  add_ops(st->layer, parts, dev, st->first, st->last);
  st->places = stage_places(parts);
  return TRUE;
}

/* The stage's saved references as uses, then its op index. */
static gboolean
stage_end(Stage *st, const GArray *rows, const GArray *mine, const char *origin, GError **error)
{
  SimLayer *stage = st->layer;
  char buf[32];
  if (stage->spans->len > G_MAXUINT16) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s: more allocations than a layer holds (65535 spans)", origin,
                stage_text(st->scope, buf));
    return FALSE;
  }
  g_autoptr(GArray) uses = g_array_new(FALSE, FALSE, sizeof(SimUse));
  g_autofree gboolean *placed = g_new0(gboolean, stage->tensors->len);
  for (guint i = 0; i < mine->len; i++) {
    const SimTraceRow *r = &g_array_index(rows, SimTraceRow, g_array_index(mine, guint, i));
    if (r->compute || r->alloc != SIM_TRACE_ALLOC_NONE)
      continue;
    SimTensor *t = &g_array_index(stage->tensors, SimTensor, r->tensor);
    if (!placed[r->tensor])
      t->save_op = op_at(st->first, FALSE, r->forward_op);
    placed[r->tensor] = TRUE;
    /* The recorder does not record how a reference lies in its storage:
     * every one is taken as contiguous (TE and Megatron then copy it as a
     * whole tensor). */
    SimUse use = { (guint16)r->tensor, (guint16)op_at(st->last, TRUE, r->backward_op), SIM_VIEW_CONTIGUOUS };
    g_array_append_val(uses, use);
  }
  g_array_sort(uses, use_cmp);
  for (guint u = 0; u < uses->len; u++)
    sim_layer_add_use(stage, g_array_index(uses, SimUse, u).tensor, g_array_index(uses, SimUse, u).op,
                      g_array_index(uses, SimUse, u).view);
  sim_layer_finish_ops(stage);
  return TRUE;
}

/* ---- allocations ------------------------------------------------------- */

/* The step as segments in the order they run, one per (stage, phase):
 * the forward from the embedding to the head, then the backward back.
 * 0 the embedding's forward, 1 + l layer l's, n + 1 the head's; n + 2 the
 * head's backward, n + 2 + (n - l) layer l's, 2n + 3 the embedding's. */
static guint
segment_of(gint64 scope, gboolean backward, guint n)
{
  guint f = scope == SIM_TRACE_SCOPE_EMBED ? 0 : scope == SIM_TRACE_SCOPE_HEAD ? n + 1 : (guint)scope + 1;
  return backward ? 2 * n + 3 - f : f;
}

/* The stage (its slot, as scope_slot) and phase of segment s. */
static guint
segment_slot(guint s, guint n, gboolean *backward)
{
  *backward = s > n + 1;
  return *backward ? 2 * n + 3 - s : s;
}

/* Lays one allocation row over the segments it lives through: from the
 * start of the op that made it to the end of the op that freed it (a
 * transient), of its own place (a workspace) or of the step (held); in
 * every segment between, over the whole phase.  A stage absent from the
 * workload (no embedding or head) holds nothing. */
static gboolean
alloc_spans(Stage *stages, const SimTraceRow *r, guint n, const char *origin, GError **error)
{
  gint64 place = r->backward ? r->backward_op : r->forward_op;
  if (r->alloc == SIM_TRACE_ALLOC_TRANSIENT && r->freed_scope >= (gint64)n) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s:%u: column 'freed_layer': layer %" G_GINT64_FORMAT " is not in the recording (layers 0 to %u)",
                origin, r->line, r->freed_scope, n - 1);
    return FALSE;
  }
  guint a = segment_of(r->scope, r->backward, n);
  gboolean to_end = r->alloc == SIM_TRACE_ALLOC_HELD || r->alloc == SIM_TRACE_ALLOC_GRAD; /* a forward gradient: held */
  guint z = r->alloc == SIM_TRACE_ALLOC_TRANSIENT ? segment_of(r->freed_scope, r->freed_backward, n) : to_end ? 2 * n + 3
                                                                                                            : a;
  if (z < a || (z == a && r->alloc == SIM_TRACE_ALLOC_TRANSIENT && r->freed_op < place)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column '%s': freed before it was allocated", origin,
                r->line, z < a ? "freed_layer" : "freed_op");
    return FALSE;
  }
  for (guint s = a; s <= z; s++) {
    gboolean backward;
    Stage *st = &stages[segment_slot(s, n, &backward)];
    if (st->layer == NULL)
      continue;
    guint nf = st->layer->n_forward, len = st->layer->ops->len;
    guint from = s == a ? op_from(st, backward, place) : backward ? nf : 0;
    guint to = backward ? len - 1 : nf - 1;
    if (s == z && !to_end &&
        !op_until(st, backward, r->alloc == SIM_TRACE_ALLOC_TRANSIENT ? r->freed_op : place, &to))
      continue; /* freed before any op of this segment ran */
    if (from > to)
      continue; /* made and freed between two ops: no op ran while it lived */
    sim_layer_add_span(st->layer, r->bytes, from, to);
  }
  return TRUE;
}

/* A parameter's gradient: allocated as the op that made it ends, held to
 * the end of the step (SimLayerOp.grad_bytes, counted only where
 * gradients are not static), and reduced under data parallelism. */
static void
alloc_grad(Stage *st, const SimTraceRow *r)
{
  if (st->layer == NULL)
    return;
  guint at;
  if (!op_until(st, TRUE, r->backward_op, &at))
    at = op_from(st, TRUE, r->backward_op);
  SimLayerOp *op = &g_array_index(st->layer->ops, SimLayerOp, at);
  op->grad_bytes += r->bytes;
  op->reduce_bytes += r->bytes;
}

/* Index of a scope's row list: 0 the embedding, 1 + l layer l, n + 1 the head. */
static guint
scope_slot(gint64 scope, guint n_layers)
{
  return scope == SIM_TRACE_SCOPE_EMBED ? 0 : scope == SIM_TRACE_SCOPE_HEAD ? n_layers + 1 : (guint)scope + 1;
}

gboolean
sim_trace_build_ops(SimWorkload *w, const GArray *rows, const char *origin, const SimDevice *device,
                    GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  guint n = sim_workload_n_layers(w);
  g_autoptr(GPtrArray) mine = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  for (guint s = 0; s < n + 2; s++)
    g_ptr_array_add(mine, g_array_new(FALSE, FALSE, sizeof(guint)));
  for (guint i = 0; i < rows->len; i++) {
    const SimTraceRow *r = &g_array_index(rows, SimTraceRow, i);
    if (r->compute || r->saved)
      g_array_append_val(g_ptr_array_index(mine, scope_slot(r->scope, n)), i);
  }
  g_autofree Stage *stages = g_new0(Stage, n + 2);
  for (guint s = 0; s < n + 2; s++) {
    stages[s].scope = s == 0 ? SIM_TRACE_SCOPE_EMBED : s == n + 1 ? SIM_TRACE_SCOPE_HEAD : (gint64)s - 1;
    stages[s].layer = s == 0 ? w->embed : s == n + 1 ? w->head : sim_workload_layer(w, s - 1);
  }
  gboolean ok = TRUE;
  for (guint s = 0; ok && s < n + 2; s++)
    ok = stages[s].layer == NULL || stage_begin(&stages[s], rows, g_ptr_array_index(mine, s), origin, device, error);
  for (guint i = 0; ok && i < rows->len; i++) {
    const SimTraceRow *r = &g_array_index(rows, SimTraceRow, i);
    if (r->alloc == SIM_TRACE_ALLOC_GRAD && r->backward)
      alloc_grad(&stages[scope_slot(r->scope, n)], r);
    else if (r->alloc != SIM_TRACE_ALLOC_NONE)
      ok = alloc_spans(stages, r, n, origin, error);
  }
  for (guint s = 0; ok && s < n + 2; s++)
    ok = stages[s].layer == NULL || stage_end(&stages[s], rows, g_ptr_array_index(mine, s), origin, error);
  for (guint s = 0; s < n + 2; s++)
    stage_clear(&stages[s]);
  if (ok)
    w->launch = device->launch_overhead;
  return ok;
}
