/* sim/input/trace_ops.c — a recording's stages as op lists.
 *
 * The recorder (gpu_calib/record/recorder.py) places every row: a forward
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
 * PyTorch frees it.  What a recording does not say: the transients each op
 * allocates beside what it saves (incoming gradients, outputs, upcasts:
 * they are in the recorder's JSON curve, not the CSV) and gradients of
 * parameters; a stage's ops carry none (the scenario's `workspace` spans
 * each phase, trace.h).
 */
#include "trace_private.h"

#include "error.h"
#include "kernel.h"

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

static gboolean
stage_ops(SimLayer *stage, gint64 scope, const GArray *rows, const GArray *mine, const char *origin,
          const SimDevice *dev, GError **error)
{
  g_autoptr(GArray) parts = g_array_new(FALSE, TRUE, sizeof(Part));
  if (!stage_parts(rows, mine, origin, parts, error))
    return FALSE;
  guint n_forward = 0;
  for (guint i = 0; i < parts->len; i++)
    n_forward += !g_array_index(parts, Part, i).backward;
  char buf[32];
  if (n_forward == 0 || n_forward == parts->len || parts->len > SIM_LAYER_MAX_OPS) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s: %s", origin, stage_text(scope, buf),
                parts->len > SIM_LAYER_MAX_OPS ? "more ops than a layer holds (2048)"
                : n_forward == 0               ? "no forward op (rows with forward_op)"
                                               : "no backward op (rows with backward_op)");
    return FALSE;
  }
  g_autoptr(GHashTable) first = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  g_autoptr(GHashTable) last = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  add_ops(stage, parts, dev, first, last);
  g_autoptr(GArray) uses = g_array_new(FALSE, FALSE, sizeof(SimUse));
  g_autofree gboolean *placed = g_new0(gboolean, stage->tensors->len);
  for (guint i = 0; i < mine->len; i++) {
    const SimTraceRow *r = &g_array_index(rows, SimTraceRow, g_array_index(mine, guint, i));
    if (r->compute)
      continue;
    SimTensor *t = &g_array_index(stage->tensors, SimTensor, r->tensor);
    if (!placed[r->tensor])
      t->save_op = op_at(first, FALSE, r->forward_op);
    placed[r->tensor] = TRUE;
    /* The recorder does not record how a reference lies in its storage:
     * every one is taken as contiguous (TE and Megatron then copy it as a
     * whole tensor). */
    SimUse use = { (guint16)r->tensor, (guint16)op_at(last, TRUE, r->backward_op), SIM_VIEW_CONTIGUOUS };
    g_array_append_val(uses, use);
  }
  g_array_sort(uses, use_cmp);
  for (guint u = 0; u < uses->len; u++)
    sim_layer_add_use(stage, g_array_index(uses, SimUse, u).tensor, g_array_index(uses, SimUse, u).op,
                      g_array_index(uses, SimUse, u).view);
  sim_layer_finish_ops(stage);
  return TRUE;
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
  if (w->embed && !stage_ops(w->embed, SIM_TRACE_SCOPE_EMBED, rows, g_ptr_array_index(mine, 0), origin, device, error))
    return FALSE;
  for (guint l = 0; l < n; l++)
    if (!stage_ops(sim_workload_layer(w, l), l, rows, g_ptr_array_index(mine, l + 1), origin, device, error))
      return FALSE;
  if (w->head && !stage_ops(w->head, SIM_TRACE_SCOPE_HEAD, rows, g_ptr_array_index(mine, n + 1), origin, device,
                            error))
    return FALSE;
  w->launch = device->launch_overhead;
  return TRUE;
}
