#include "workload.h"

#include "units.h"

void
sim_tensor_clear(gpointer data)
{
  SimTensor *t = data;
  t->name = NULL; /* interned: not ours to free */
}

static void
layer_clear(gpointer data)
{
  SimLayer *layer = data;
  g_clear_pointer(&layer->tensors, g_array_unref);
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

double
sim_layer_selective_recompute(const SimLayer *layer)
{
  double sum = 0;
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
