#include "model/workload.h"

#include "base/units.h"

#include <string.h>

void
sim_tensor_clear(gpointer data)
{
  SimTensor *t = data;
  t->name = NULL; /* interned: not ours to free */
}

static void
index_unref(SimOpIndex *x)
{
  if (x == NULL || !g_atomic_int_dec_and_test(&x->ref_count))
    return;
  g_free(x->free_off); /* one block: every list is in it */
  g_free(x);
}

/* Lists `n` items into buckets by key[i] < n_keys: off[0 .. n_keys] and
 * items[0 .. n) the item indices in key order (stable). */
static void
bucket(guint n, const guint16 *key, guint n_keys, guint16 *off, guint16 *items)
{
  memset(off, 0, sizeof *off * (n_keys + 1));
  for (guint i = 0; i < n; i++)
    off[key[i] + 1]++;
  for (guint k = 0; k < n_keys; k++)
    off[k + 1] += off[k];
  g_autofree guint16 *fill = g_memdup2(off, sizeof *off * n_keys);
  for (guint i = 0; i < n; i++)
    items[fill[key[i]]++] = (guint16)i;
}

static SimOpIndex *
index_new(const SimLayer *layer)
{
  guint n = layer->ops->len, t = layer->tensors->len, sp = layer->spans->len, u = layer->uses->len;
  SimOpIndex *x = g_new0(SimOpIndex, 1);
  x->ref_count = 1;
  x->n_ops = n;
  x->n_tensors = t;
  x->n_spans = sp;
  guint16 *mem = g_new0(guint16, 4 * (n + 1) + t + 2 * sp + t);
  x->free_off = mem;
  x->frees = x->free_off + n + 1;
  x->start_off = x->frees + t;
  x->starts = x->start_off + n + 1;
  x->end_off = x->starts + sp;
  x->ends = x->end_off + n + 1;
  x->use_off = x->ends + sp;
  x->first_use = x->use_off + n + 1;
  g_autofree guint16 *key = g_new(guint16, MAX(MAX(t, sp), 1u));
  for (guint k = 0; k < t; k++)
    key[k] = (guint16)g_array_index(layer->tensors, SimTensor, k).last_op;
  bucket(t, key, n, x->free_off, x->frees);
  for (guint k = 0; k < sp; k++)
    key[k] = g_array_index(layer->spans, SimSpan, k).from;
  bucket(sp, key, n, x->start_off, x->starts);
  for (guint k = 0; k < sp; k++)
    key[k] = g_array_index(layer->spans, SimSpan, k).to;
  bucket(sp, key, n, x->end_off, x->ends);
  for (guint k = 0; k < t; k++)
    x->first_use[k] = G_MAXUINT16;
  memset(x->use_off, 0, sizeof *x->use_off * (n + 1));
  for (guint i = 0; i < u; i++) {
    const SimUse *use = &g_array_index(layer->uses, SimUse, i);
    g_assert(i == 0 || use->op >= g_array_index(layer->uses, SimUse, i - 1).op); /* in op order */
    x->use_off[use->op + 1]++;
    if (x->first_use[use->tensor] == G_MAXUINT16)
      x->first_use[use->tensor] = (guint16)i;
  }
  for (guint k = 0; k < n; k++)
    x->use_off[k + 1] += x->use_off[k];
  return x;
}

static void
layer_clear(gpointer data)
{
  SimLayer *layer = data;
  g_clear_pointer(&layer->tensors, g_array_unref);
  g_clear_pointer(&layer->ops, g_array_unref);
  g_clear_pointer(&layer->spans, g_array_unref);
  g_clear_pointer(&layer->uses, g_array_unref);
  g_clear_pointer(&layer->index, index_unref);
}

static GArray *tensor_array_new(void);

static SimLayer *
stage_new(void)
{
  SimLayer *stage = g_new0(SimLayer, 1);
  stage->tensors = tensor_array_new();
  return stage;
}

static void
stage_free(SimLayer *stage)
{
  if (stage == NULL)
    return;
  layer_clear(stage);
  g_free(stage);
}

static GArray *
tensor_array_new(void)
{
  GArray *a = g_array_new(FALSE, TRUE, sizeof(SimTensor));
  g_array_set_clear_func(a, sim_tensor_clear);
  return a;
}

SimWorkload *
sim_workload_new(const char *name, guint n_layers)
{
  SimWorkload *w = g_new0(SimWorkload, 1);
  w->name = g_strdup(name);
  w->time_model = "given";
  w->tp = 1;
  w->ep = 1;
  w->layers = g_array_sized_new(FALSE, TRUE, sizeof(SimLayer), n_layers);
  g_array_set_clear_func(w->layers, layer_clear);
  g_array_set_size(w->layers, n_layers);
  for (guint i = 0; i < n_layers; i++)
    sim_workload_layer(w, i)->tensors = tensor_array_new();
  return w;
}

void
sim_workload_free(SimWorkload *w)
{
  if (w == NULL)
    return;
  g_free(w->name);
  g_array_unref(w->layers);
  stage_free(w->embed);
  stage_free(w->head);
  g_free(w);
}

void
sim_layer_set_tensors(SimLayer *layer, const GArray *tensors)
{
  g_array_set_size(layer->tensors, 0);
  for (guint i = 0; i < tensors->len; i++) {
    SimTensor t = g_array_index(tensors, SimTensor, i);
    g_array_append_val(layer->tensors, t);
  }
}

SimTensor *
sim_layer_add_tensor(SimLayer *layer, const char *name, guint64 bytes)
{
  SimTensor t = { .name = g_intern_string(name), .bytes = bytes, .offloadable = TRUE, .refs = 1 };
  g_array_append_val(layer->tensors, t);
  return &g_array_index(layer->tensors, SimTensor, layer->tensors->len - 1);
}

SimLayer *
sim_workload_add_embed(SimWorkload *w)
{
  g_return_val_if_fail(w->embed == NULL, w->embed);
  w->embed = stage_new();
  return w->embed;
}

SimLayer *
sim_workload_add_head(SimWorkload *w)
{
  g_return_val_if_fail(w->head == NULL, w->head);
  w->head = stage_new();
  return w->head;
}

void
sim_layer_begin_ops(SimLayer *layer)
{
  g_return_if_fail(layer->ops == NULL);
  layer->ops = g_array_new(FALSE, TRUE, sizeof(SimLayerOp));
  layer->spans = g_array_new(FALSE, TRUE, sizeof(SimSpan));
  layer->uses = g_array_new(FALSE, TRUE, sizeof(SimUse));
  layer->n_forward = 0;
}

guint
sim_layer_add_op(SimLayer *layer, const char *name, gboolean backward, guint kclass, double seconds, guint kernels)
{
  g_assert(layer->ops != NULL && layer->ops->len < SIM_LAYER_MAX_OPS);
  /* Forward ops first: the lowering runs ops[0 .. n_forward) as the forward. */
  g_assert(backward || layer->n_forward == layer->ops->len);
  SimLayerOp op = { .name = g_intern_string(name), .seconds = seconds, .kernels = kernels, .kclass = (guint8)kclass,
                    .backward = backward != FALSE };
  g_array_append_val(layer->ops, op);
  if (!backward)
    layer->n_forward++;
  return layer->ops->len - 1;
}

void
sim_layer_add_span(SimLayer *layer, guint64 bytes, guint from, guint to)
{
  /* `to` may name an op not added yet: sim_layer_finish_ops checks it. */
  g_assert(from <= to && from < layer->ops->len);
  if (bytes == 0)
    return;
  SimSpan span = { .bytes = bytes, .from = (guint16)from, .to = (guint16)to };
  g_array_append_val(layer->spans, span);
}

void
sim_layer_add_use(SimLayer *layer, guint tensor, guint op, guint view)
{
  g_assert(tensor < layer->tensors->len && op < layer->ops->len && view <= SIM_VIEW_PART);
  SimUse use = { .tensor = (guint16)tensor, .op = (guint16)op, .view = (guint16)view };
  g_array_append_val(layer->uses, use);
}

void
sim_layer_finish_ops(SimLayer *layer)
{
  guint n = layer->ops->len, nf = layer->n_forward;
  g_assert(nf > 0 && nf < n);
  g_autofree guint *uses = g_new0(guint, layer->tensors->len);
  for (guint k = 0; k < layer->tensors->len; k++) {
    SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    g_assert(t->save_op < nf);
    t->last_op = n - 1; /* no use listed: held until the backward ends */
  }
  gboolean *seen = g_new0(gboolean, layer->tensors->len);
  for (guint u = 0; u < layer->uses->len; u++) {
    const SimUse *use = &g_array_index(layer->uses, SimUse, u);
    SimTensor *t = &g_array_index(layer->tensors, SimTensor, use->tensor);
    g_assert(use->op >= nf);
    t->last_op = seen[use->tensor] ? MAX(t->last_op, use->op) : use->op;
    seen[use->tensor] = TRUE;
    uses[use->tensor]++;
  }
  g_free(seen);
  for (guint k = 0; k < layer->tensors->len; k++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    g_assert(uses[k] == MAX(t->refs, 1u)); /* a reference no op unpacks would never come back under a hook */
  }
  /* What the layer-level fields say of the ops. */
  g_autofree guint64 *held = g_new0(guint64, n);
  for (guint s = 0; s < layer->spans->len; s++) {
    const SimSpan *span = &g_array_index(layer->spans, SimSpan, s);
    g_assert(span->to < n && (span->from < nf) == (span->to < nf));
    for (guint i = span->from; i <= span->to; i++)
      held[i] += span->bytes;
  }
  g_clear_pointer(&layer->index, index_unref);
  layer->index = index_new(layer);
  layer->forward = layer->backward = 0;
  layer->workspace_bytes = layer->backward_workspace_bytes = layer->grad_bytes = 0;
  for (guint i = 0; i < n; i++) {
    const SimLayerOp *op = sim_layer_op(layer, i);
    if (i < nf) {
      layer->forward += op->seconds;
      layer->workspace_bytes = MAX(layer->workspace_bytes, held[i]);
    } else {
      layer->backward += op->seconds;
      layer->backward_workspace_bytes = MAX(layer->backward_workspace_bytes, held[i]);
    }
    layer->grad_bytes += op->grad_bytes;
  }
}

void
sim_layer_share_ops(SimLayer *layer, const SimLayer *from)
{
  g_assert(layer->ops == NULL && from->ops != NULL && layer->tensors->len == from->tensors->len);
  layer->ops = g_array_ref(from->ops);
  layer->spans = g_array_ref(from->spans);
  layer->uses = g_array_ref(from->uses);
  layer->n_forward = from->n_forward;
  g_atomic_int_inc(&from->index->ref_count);
  layer->index = from->index;
  for (guint k = 0; k < layer->tensors->len; k++) {
    SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    const SimTensor *f = &g_array_index(from->tensors, SimTensor, k);
    t->save_op = f->save_op;
    t->last_op = f->last_op;
  }
  layer->forward = from->forward;
  layer->backward = from->backward;
  layer->workspace_bytes = from->workspace_bytes;
  layer->backward_workspace_bytes = from->backward_workspace_bytes;
  layer->grad_bytes = from->grad_bytes;
}

double
sim_layer_selective_recompute(const SimLayer *layer)
{
  double sum = 0;
  if (layer->ops) {
    for (guint i = 0; i < layer->n_forward; i++)
      if (sim_layer_op(layer, i)->selective)
        sum += sim_layer_op(layer, i)->seconds;
    return sum;
  }
  for (guint i = 0; i < layer->tensors->len; i++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, i);
    if (t->selective)
      sum += t->recompute;
  }
  return sum;
}

guint64
sim_layer_saved_bytes(const SimLayer *layer)
{
  guint64 sum = 0;
  for (guint i = 0; i < layer->tensors->len; i++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, i);
    if (sim_tensor_on_device(t))
      sum += t->bytes;
  }
  return sum;
}

guint64
sim_workload_saved_bytes(const SimWorkload *w)
{
  guint64 sum = 0;
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    sum += sim_layer_saved_bytes(sim_workload_layer(w, i));
  if (w->embed)
    sum += sim_layer_saved_bytes(w->embed);
  if (w->head)
    sum += sim_layer_saved_bytes(w->head);
  return sum;
}

static guint
device_tensors(const SimLayer *layer)
{
  guint n = 0;
  for (guint i = 0; layer && i < layer->tensors->len; i++)
    n += sim_tensor_on_device(&g_array_index(layer->tensors, SimTensor, i));
  return n;
}

guint
sim_workload_saved_tensors(const SimWorkload *w)
{
  guint n = device_tensors(w->embed) + device_tensors(w->head);
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    n += device_tensors(sim_workload_layer(w, i));
  return n;
}

/* *total += bytes * count unless that passes SIM_UNITS_MAX_BYTES. */
static gboolean
add_bytes(guint64 *total, guint64 bytes, guint64 count)
{
  if (count != 0 && bytes > (SIM_UNITS_MAX_BYTES - *total) / count)
    return FALSE;
  *total += bytes * count;
  return TRUE;
}

static gboolean
stage_bytes_fit(const SimLayer *stage, guint64 *total)
{
  if (stage == NULL)
    return TRUE;
  if (!add_bytes(total, stage->input_bytes, 1) || !add_bytes(total, stage->workspace_bytes, 1) ||
      !add_bytes(total, stage->backward_workspace_bytes, 1) || !add_bytes(total, stage->grad_bytes, 1))
    return FALSE;
  for (guint i = 0; i < stage->tensors->len; i++) {
    const SimTensor *t = &g_array_index(stage->tensors, SimTensor, i);
    if (!add_bytes(total, t->bytes, MAX(t->refs, 1u)))
      return FALSE;
  }
  return TRUE;
}

gboolean
sim_workload_bytes_fit(const SimWorkload *w)
{
  guint64 total = 0;
  if (!add_bytes(&total, w->static_bytes, 1) || !add_bytes(&total, w->held_bytes, 1) ||
      !add_bytes(&total, w->forward_bytes, 1) ||
      !stage_bytes_fit(w->embed, &total) ||
      !stage_bytes_fit(w->head, &total))
    return FALSE;
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    if (!stage_bytes_fit(sim_workload_layer(w, i), &total))
      return FALSE;
  return TRUE;
}

static gboolean
stage_elements_known(const SimLayer *layer)
{
  if (layer == NULL)
    return TRUE;
  for (guint k = 0; k < layer->tensors->len; k++)
    if (!g_array_index(layer->tensors, SimTensor, k).elem_known)
      return FALSE;
  return TRUE;
}

gboolean
sim_workload_elements_known(const SimWorkload *w)
{
  if (!stage_elements_known(w->embed) || !stage_elements_known(w->head))
    return FALSE;
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    if (!stage_elements_known(sim_workload_layer(w, i)))
      return FALSE;
  return TRUE;
}

guint64
sim_workload_parameters(const SimWorkload *w, guint *tensors)
{
  /* Within the loaders' 4 EiB bound on static bytes (at least a byte per
   * counted parameter) the sum cannot wrap. */
  guint64 n = (w->embed ? w->embed->params : 0) + (w->head ? w->head->params : 0);
  guint t = (w->embed ? w->embed->param_tensors : 0) + (w->head ? w->head->param_tensors : 0);
  for (guint i = 0; i < sim_workload_n_layers(w); i++) {
    n += sim_workload_layer(w, i)->params;
    t += sim_workload_layer(w, i)->param_tensors;
  }
  if (tensors)
    *tensors = t;
  return n;
}

gboolean
sim_workload_has_ops(const SimWorkload *w)
{
  if ((w->embed && w->embed->ops) || (w->head && w->head->ops))
    return TRUE;
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    if (sim_workload_layer(w, i)->ops)
      return TRUE;
  return FALSE;
}
