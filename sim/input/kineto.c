/* sim/input/kineto.c — a Kineto trace's measured figures (sim/input/kineto.h). */
#include "input/kineto.h"

#include "base/error.h"
#include "input/gzip.h"
#include "input/internal/kineto_private.h"

#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

const char *const sim_kineto_direction_names[SIM_KINETO_DIRECTIONS] = { "H2D", "D2H", "other" };

static SimKinetoDirection
direction(const char *name)
{
  if (strstr(name, "HtoD"))
    return SIM_KINETO_H2D;
  if (strstr(name, "DtoH"))
    return SIM_KINETO_D2H;
  return SIM_KINETO_OTHER;
}

/* A number member, or 0 (Kineto writes dur and bytes as integers or doubles). */
static double
number(JsonObject *o, const char *member)
{
  JsonNode *n = o ? json_object_get_member(o, member) : NULL;
  return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) != G_TYPE_STRING ? json_node_get_double(n) : 0;
}

static JsonObject *
object_member(JsonObject *o, const char *member)
{
  JsonNode *n = o ? json_object_get_member(o, member) : NULL;
  return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

static JsonArray *
array_member(JsonObject *o, const char *member)
{
  JsonNode *n = o ? json_object_get_member(o, member) : NULL;
  return n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

/* pid and tid folded into one key: Kineto writes each as a number or a
 * string ("stream 7"). */
static gint64
thread_of(JsonObject *e)
{
  gint64 key = 0;
  static const char *const members[] = { "pid", "tid" };
  for (guint i = 0; i < 2; i++) {
    JsonNode *n = json_object_get_member(e, members[i]);
    gint64 v = 0;
    if (n && JSON_NODE_HOLDS_VALUE(n))
      v = json_node_get_value_type(n) == G_TYPE_STRING ? g_str_hash(json_node_get_string(n))
                                                        : (gint64)json_node_get_double(n);
    key = key * 1000003 + v;
  }
  return key;
}

static SimKinetoSpan
span_of(JsonObject *e)
{
  double ts = number(e, "ts");
  return (SimKinetoSpan){ thread_of(e), ts, ts + number(e, "dur") };
}

/* PyTorch's dtype names in "Input type" as offsim's; NULL: none offsim times. */
static const char *
dtype_of(const char *type)
{
  if (strcmp(type, "float") == 0)
    return "fp32";
  if (strcmp(type, "c10::BFloat16") == 0)
    return "bf16";
  if (strcmp(type, "c10::Half") == 0)
    return "fp16";
  return NULL;
}

/* The dims of input `i` (a list of whole numbers), at most 3 of them. */
static guint
dims_of(JsonArray *all, guint i, guint64 dims[3])
{
  JsonNode *n = all && i < json_array_get_length(all) ? json_array_get_element(all, i) : NULL;
  JsonArray *a = n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
  guint len = a ? json_array_get_length(a) : 0;
  if (len == 0 || len > 3)
    return 0;
  for (guint j = 0; j < len; j++) {
    JsonNode *d = json_array_get_element(a, j);
    if (!JSON_NODE_HOLDS_VALUE(d) || json_node_get_value_type(d) == G_TYPE_STRING || json_node_get_double(d) < 1)
      return 0;
    dims[j] = (guint64)json_node_get_double(d);
  }
  return len;
}

/* An aten::mm, addmm, bmm or baddbmm with consistent "Input Dims" and a
 * dtype offsim times: its shape; FALSE otherwise. */
static gboolean
gemm_shape(const char *name, JsonObject *args, SimKinetoGemmOp *op)
{
  gboolean batched = strcmp(name, "aten::bmm") == 0 || strcmp(name, "aten::baddbmm") == 0;
  guint first = strcmp(name, "aten::addmm") == 0 || strcmp(name, "aten::baddbmm") == 0; /* the bias/input first */
  JsonArray *dims = array_member(args, "Input Dims"), *types = array_member(args, "Input type");
  guint64 a[3], b[3];
  guint want = batched ? 3 : 2;
  if (dims_of(dims, first, a) != want || dims_of(dims, first + 1, b) != want)
    return FALSE;
  JsonNode *t = types && first < json_array_get_length(types) ? json_array_get_element(types, first) : NULL;
  const char *dtype = t && JSON_NODE_HOLDS_VALUE(t) && json_node_get_value_type(t) == G_TYPE_STRING
                        ? dtype_of(json_node_get_string(t)) : NULL;
  if (dtype == NULL)
    return FALSE;
  guint o = batched;
  if (a[o + 1] != b[o] || (batched && a[0] != b[0]))
    return FALSE;
  op->batch = batched ? a[0] : 1;
  op->m = a[o];
  op->k = a[o + 1];
  op->n = b[o + 1];
  g_strlcpy(op->dtype, dtype, sizeof op->dtype);
  return TRUE;
}

static gboolean
is_gemm(const char *name)
{
  return strcmp(name, "aten::mm") == 0 || strcmp(name, "aten::addmm") == 0 || strcmp(name, "aten::bmm") == 0
         || strcmp(name, "aten::baddbmm") == 0;
}

/* "nn.Module: CLASS_N": CLASS and N; FALSE for any other name. */
static gboolean
module_of(const char *name, SimKinetoModule *m)
{
  if (!g_str_has_prefix(name, "nn.Module: "))
    return FALSE;
  const char *cls = name + strlen("nn.Module: ");
  const char *us = strrchr(cls, '_');
  if (us == NULL || us == cls || us[1] == '\0' || strlen(us + 1) > 6)
    return FALSE;
  for (const char *c = us + 1; *c; c++)
    if (!g_ascii_isdigit(*c))
      return FALSE;
  m->module = g_strndup(cls, us - cls);
  m->index = (guint)atoi(us + 1);
  return TRUE;
}

static void
module_clear(gpointer data)
{
  g_free(((SimKinetoModule *)data)->module);
}

/* The entry of "deviceProperties" whose id is `device`. */
static void
read_device(JsonObject *root, gint64 device, SimKineto *out)
{
  JsonArray *props = array_member(root, "deviceProperties");
  for (guint i = 0; props && i < json_array_get_length(props); i++) {
    JsonNode *n = json_array_get_element(props, i);
    JsonObject *p = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
    if (p == NULL || (gint64)number(p, "id") != device || number(p, "totalGlobalMem") <= 0)
      continue;
    out->has_device = TRUE;
    out->device_id = device;
    out->device_memory = (gint64)number(p, "totalGlobalMem");
    out->device_sms = (gint64)number(p, "numSms");
    out->device_name = g_strdup(json_object_get_string_member_with_default(p, "name", ""));
    return;
  }
}

static void
add_pinned_size(SimKineto *out, SimKinetoDirection d, guint64 size, double seconds)
{
  for (guint i = 0; i < out->pinned_sizes->len; i++) {
    SimKinetoCopySize *c = &g_array_index(out->pinned_sizes, SimKinetoCopySize, i);
    if (c->direction == d && c->size == size) {
      c->count++;
      c->seconds += seconds;
      return;
    }
  }
  SimKinetoCopySize c = { d, size, 1, seconds };
  g_array_append_val(out->pinned_sizes, c);
}

static gint
copy_size_compare(gconstpointer a, gconstpointer b)
{
  const SimKinetoCopySize *x = a, *y = b;
  if (x->direction != y->direction)
    return x->direction < y->direction ? -1 : 1;
  return (x->size > y->size) - (x->size < y->size);
}

/* One copy event: by direction, pinned or pageable by size, DtoD for HBM. */
static void
read_copy(SimKineto *out, const char *name, double bytes, double dur)
{
  SimKinetoDirection d = direction(name);
  SimKinetoCopies *c = &out->copies[d];
  c->count++;
  c->bytes += (guint64)bytes;
  c->seconds += dur;
  if (d != SIM_KINETO_OTHER) {
    gboolean pinned = strstr(name, "Pinned") != NULL;
    SimKinetoCopies *p = pinned ? &out->pinned[d] : strstr(name, "Pageable") ? &out->pageable[d] : NULL;
    if (p) {
      p->count++;
      p->bytes += (guint64)bytes;
      p->seconds += dur;
    }
    if (pinned && dur > 0 && bytes > 0)
      add_pinned_size(out, d, (guint64)bytes, dur);
  } else if (strstr(name, "DtoD") && bytes >= 1 << 20) {
    out->dtod.count++;
    out->dtod.bytes += (guint64)bytes;
    out->dtod.seconds += dur;
  }
}

void
sim_kineto_clear(SimKineto *k)
{
  g_clear_pointer(&k->device_name, g_free);
  g_clear_pointer(&k->gemms, g_array_unref);
  g_clear_pointer(&k->pinned_sizes, g_array_unref);
  g_clear_pointer(&k->layer_class, g_free);
  g_clear_pointer(&k->layers, g_array_unref);
}

gboolean
sim_kineto_load(const char *path, SimKineto *out, GError **error)
{
  *out = (SimKineto){ 0 };
  out->gemms = g_array_new(FALSE, FALSE, sizeof(SimKinetoGemm));
  out->pinned_sizes = g_array_new(FALSE, FALSE, sizeof(SimKinetoCopySize));
  out->layers = g_array_new(FALSE, FALSE, sizeof(SimKinetoLayer));
  g_autofree char *text = NULL;
  gsize length = 0;
  if (!sim_gzip_read_input(path, "the trace", &text, &length, error))
    return FALSE;
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) local = NULL;
  if (!json_parser_load_from_data(parser, text, (gssize)length, &local)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: not JSON: %s", path, local->message);
    return FALSE;
  }
  JsonNode *root = json_parser_get_root(parser);
  JsonNode *events = root && JSON_NODE_HOLDS_OBJECT(root)
                       ? json_object_get_member(json_node_get_object(root), "traceEvents") : NULL;
  if (events == NULL || !JSON_NODE_HOLDS_ARRAY(events)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: traceEvents: missing (expected a Kineto trace: torch.profiler's export_chrome_trace)", path);
    return FALSE;
  }
  JsonArray *list = json_node_get_array(events);
  double step_total = 0;
  gint64 kernel_device = -1;
  SimKinetoEvents ev = {
    .kernel_seconds = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free),
    .launches = g_array_new(FALSE, FALSE, sizeof(SimKinetoLaunch)),
    .gemm_ops = g_array_new(FALSE, FALSE, sizeof(SimKinetoGemmOp)),
    .sequence_ops = g_array_new(FALSE, FALSE, sizeof(SimKinetoSequenceOp)),
    .modules = g_array_new(FALSE, FALSE, sizeof(SimKinetoModule)),
  };
  g_array_set_clear_func(ev.modules, module_clear);
  for (guint i = 0; i < json_array_get_length(list); i++) {
    JsonNode *node = json_array_get_element(list, i);
    if (!JSON_NODE_HOLDS_OBJECT(node))
      continue;
    JsonObject *e = json_node_get_object(node);
    out->events++;
    const char *cat = json_object_get_string_member_with_default(e, "cat", "");
    const char *name = json_object_get_string_member_with_default(e, "name", "");
    double dur = number(e, "dur") * 1e-6;
    JsonObject *args = object_member(e, "args");
    SimKinetoModule module;
    if (strcmp(cat, "user_annotation") == 0 && g_str_has_prefix(name, "ProfilerStep#")) {
      out->steps++;
      step_total += dur;
    } else if (strcmp(cat, "kernel") == 0) {
      out->kernels++;
      out->kernel_seconds += dur;
      if (kernel_device < 0 && args && json_object_has_member(args, "device"))
        kernel_device = (gint64)number(args, "device");
      gint64 correlation = (gint64)number(args, "correlation");
      double *sum = g_hash_table_lookup(ev.kernel_seconds, &correlation);
      if (sum == NULL)
        g_hash_table_insert(ev.kernel_seconds, g_memdup2(&correlation, sizeof correlation), sum = g_new0(double, 1));
      *sum += number(e, "dur");
    } else if (strcmp(cat, "gpu_memcpy") == 0) {
      read_copy(out, name, number(args, "bytes"), dur);
    } else if (strcmp(cat, "cuda_runtime") == 0 && args && json_object_has_member(args, "correlation")) {
      SimKinetoLaunch l = { span_of(e), (gint64)number(args, "correlation") };
      g_array_append_val(ev.launches, l);
    } else if (strcmp(cat, "cpu_op") == 0) {
      SimKinetoGemmOp op = { .span = span_of(e) };
      if (is_gemm(name) && gemm_shape(name, args, &op))
        g_array_append_val(ev.gemm_ops, op);
      else if (is_gemm(name))
        out->gemm_ops_without_shapes++;
      if (args && json_object_has_member(args, "Sequence number")) {
        SimKinetoSequenceOp q = { span_of(e), (gint64)number(args, "Sequence number"),
                                  g_str_has_prefix(name, "autograd::engine::evaluate_function: ") };
        g_array_append_val(ev.sequence_ops, q);
      }
    } else if ((strcmp(cat, "python_function") == 0 || strcmp(cat, "user_annotation") == 0)
               && module_of(name, &module)) {
      module.span = span_of(e);
      g_array_append_val(ev.modules, module);
    }
  }
  out->step_seconds = out->steps ? step_total / out->steps : 0;
  read_device(json_node_get_object(root), kernel_device < 0 ? 0 : kernel_device, out);
  g_array_sort(out->pinned_sizes, copy_size_compare);
  sim_kineto_attribute(out, &ev);
  g_hash_table_unref(ev.kernel_seconds);
  g_array_unref(ev.launches);
  g_array_unref(ev.gemm_ops);
  g_array_unref(ev.sequence_ops);
  g_array_unref(ev.modules);
  return TRUE;
}
