#include "workload.h"

void
sim_tensor_clear(gpointer data)
{
  SimTensor *t = data;
  g_clear_pointer(&t->name, g_free);
}

static void
layer_clear(gpointer data)
{
  SimLayer *layer = data;
  g_clear_pointer(&layer->tensors, g_array_unref);
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
  g_free(w);
}

void
sim_layer_set_tensors(SimLayer *layer, const GArray *tensors)
{
  g_array_set_size(layer->tensors, 0);
  for (guint i = 0; i < tensors->len; i++) {
    SimTensor t = g_array_index(tensors, SimTensor, i);
    t.name = g_strdup(t.name);
    g_array_append_val(layer->tensors, t);
  }
}

guint64
sim_layer_saved_bytes(const SimLayer *layer)
{
  guint64 sum = 0;
  for (guint i = 0; i < layer->tensors->len; i++)
    sum += g_array_index(layer->tensors, SimTensor, i).bytes;
  return sum;
}

guint64
sim_workload_saved_bytes(const SimWorkload *w)
{
  guint64 sum = 0;
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    sum += sim_layer_saved_bytes(sim_workload_layer(w, i));
  return sum;
}
