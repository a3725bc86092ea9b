/* sim/input/kineto_attribute.c — a Kineto trace's kernels attributed to GEMM ops
 * and to layers (sim/input/internal/kineto_private.h). */
#include "input/internal/kineto_private.h"

#include <string.h>

static gint
launch_compare(gconstpointer a, gconstpointer b)
{
  const SimKinetoLaunch *x = a, *y = b;
  if (x->span.thread != y->span.thread)
    return x->span.thread < y->span.thread ? -1 : 1;
  return (x->span.start > y->span.start) - (x->span.start < y->span.start);
}

/* The kernel seconds launched inside `span` (and how many kernels): the
 * launches are sorted by thread and start, so a binary search finds the
 * first. */
static double
kernels_inside(const SimKinetoEvents *ev, const SimKinetoSpan *span, guint *kernels)
{
  const GArray *l = ev->launches;
  guint lo = 0, hi = l->len;
  SimKinetoLaunch key = { *span, 0 };
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (launch_compare(&g_array_index(l, SimKinetoLaunch, mid), &key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  double seconds = 0;
  for (guint i = lo; i < l->len; i++) {
    const SimKinetoLaunch *x = &g_array_index(l, SimKinetoLaunch, i);
    if (x->span.thread != span->thread || x->span.start > span->end)
      break;
    const double *s = g_hash_table_lookup(ev->kernel_seconds, &x->correlation);
    if (s) {
      seconds += *s;
      if (kernels)
        (*kernels)++;
    }
  }
  return seconds;
}

static void
attribute_gemms(SimKineto *k, const SimKinetoEvents *ev)
{
  g_autoptr(GHashTable) index = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < ev->gemm_ops->len; i++) {
    const SimKinetoGemmOp *op = &g_array_index(ev->gemm_ops, SimKinetoGemmOp, i);
    g_autofree char *key = g_strdup_printf("%s:%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT,
                                           op->dtype, op->m, op->n, op->k);
    gpointer at;
    if (!g_hash_table_lookup_extended(index, key, NULL, &at)) {
      SimKinetoGemm g = { .m = op->m, .n = op->n, .k = op->k };
      g_strlcpy(g.dtype, op->dtype, sizeof g.dtype);
      g_array_append_val(k->gemms, g);
      at = GUINT_TO_POINTER(k->gemms->len);
      g_hash_table_insert(index, g_steal_pointer(&key), at);
    }
    SimKinetoGemm *g = &g_array_index(k->gemms, SimKinetoGemm, GPOINTER_TO_UINT(at) - 1);
    g->ops++;
    g->flops += 2.0 * (double)op->m * (double)op->n * (double)op->k * (double)op->batch;
    g->seconds += kernels_inside(ev, &op->span, &g->kernels) * 1e-6;
  }
}

/* The layer class: the most frequent module class whose name holds "Layer"
 * or "Block" (DecoderLayer, LlamaDecoderLayer, GPT2Block, BertLayer); on a
 * tie the first in name order.  NULL: none. */
static char *
layer_class(const SimKinetoEvents *ev)
{
  g_autoptr(GHashTable) counts = g_hash_table_new(g_str_hash, g_str_equal);
  const char *best = NULL;
  guint best_count = 0;
  for (guint i = 0; i < ev->modules->len; i++) {
    const char *m = g_array_index(ev->modules, SimKinetoModule, i).module;
    if (!strstr(m, "Layer") && !strstr(m, "Block"))
      continue;
    guint n = GPOINTER_TO_UINT(g_hash_table_lookup(counts, m)) + 1;
    g_hash_table_insert(counts, (gpointer)m, GUINT_TO_POINTER(n));
    if (n > best_count || (n == best_count && strcmp(m, best) < 0)) {
      best = m;
      best_count = n;
    }
  }
  return g_strdup(best);
}

static void
attribute_layers(SimKineto *k, const SimKinetoEvents *ev)
{
  k->layer_class = layer_class(ev);
  if (k->layer_class == NULL)
    return;
  /* Layers by N in order of their first range (the modules are in trace
   * order; their starts decide). */
  g_autoptr(GHashTable) by_index = g_hash_table_new(g_direct_hash, g_direct_equal);
  g_autoptr(GArray) first = g_array_new(FALSE, FALSE, sizeof(double));
  g_autoptr(GHashTable) sequence_layer = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  for (guint i = 0; i < ev->modules->len; i++) {
    const SimKinetoModule *m = &g_array_index(ev->modules, SimKinetoModule, i);
    if (strcmp(m->module, k->layer_class) != 0)
      continue;
    gpointer at;
    if (!g_hash_table_lookup_extended(by_index, GUINT_TO_POINTER(m->index + 1), NULL, &at)) {
      SimKinetoLayer layer = { .index = m->index };
      g_array_append_val(k->layers, layer);
      g_array_append_val(first, m->span.start);
      at = GUINT_TO_POINTER(k->layers->len);
      g_hash_table_insert(by_index, GUINT_TO_POINTER(m->index + 1), at);
    }
    guint li = GPOINTER_TO_UINT(at) - 1;
    SimKinetoLayer *layer = &g_array_index(k->layers, SimKinetoLayer, li);
    g_array_index(first, double, li) = MIN(g_array_index(first, double, li), m->span.start);
    layer->forward_ranges++;
    layer->forward_seconds += kernels_inside(ev, &m->span, NULL) * 1e-6;
    /* Its forward ops' sequence numbers name its backward ops. */
    for (guint j = 0; j < ev->sequence_ops->len; j++) {
      const SimKinetoSequenceOp *op = &g_array_index(ev->sequence_ops, SimKinetoSequenceOp, j);
      if (!op->backward && op->span.thread == m->span.thread && op->span.start >= m->span.start
          && op->span.end <= m->span.end)
        g_hash_table_insert(sequence_layer, g_memdup2(&op->sequence, sizeof op->sequence), GUINT_TO_POINTER(li + 1));
    }
  }
  for (guint j = 0; j < ev->sequence_ops->len; j++) {
    const SimKinetoSequenceOp *op = &g_array_index(ev->sequence_ops, SimKinetoSequenceOp, j);
    guint li = op->backward ? GPOINTER_TO_UINT(g_hash_table_lookup(sequence_layer, &op->sequence)) : 0;
    if (li == 0)
      continue;
    SimKinetoLayer *layer = &g_array_index(k->layers, SimKinetoLayer, li - 1);
    layer->backward_ops++;
    layer->backward_seconds += kernels_inside(ev, &op->span, NULL) * 1e-6;
  }
  /* In order of first start: layer 0 is the one that ran first. */
  g_autoptr(GArray) order = g_array_new(FALSE, FALSE, sizeof(SimKinetoLayer));
  g_autofree gboolean *taken = g_new0(gboolean, k->layers->len);
  for (guint n = 0; n < k->layers->len; n++) {
    guint best = G_MAXUINT;
    for (guint i = 0; i < k->layers->len; i++)
      if (!taken[i] && (best == G_MAXUINT || g_array_index(first, double, i) < g_array_index(first, double, best)))
        best = i;
    taken[best] = TRUE;
    g_array_append_val(order, g_array_index(k->layers, SimKinetoLayer, best));
  }
  g_array_set_size(k->layers, 0);
  g_array_append_vals(k->layers, order->data, order->len);
}

void
sim_kineto_attribute(SimKineto *k, SimKinetoEvents *events)
{
  g_array_sort(events->launches, launch_compare);
  attribute_gemms(k, events);
  attribute_layers(k, events);
}
