#include "export/chrome_trace.h"

#include "base/error.h"
#include "base/output.h"
#include "export/spans.h"

enum { DEVICE_PID = 1, HOST_PID = 2 };

/* One event with the members every kind has. */
static JsonObject *
event(JsonArray *events, const char *name, const char *ph, int pid, int tid)
{
  JsonObject *e = json_object_new();
  json_object_set_string_member(e, "name", name);
  json_object_set_string_member(e, "ph", ph);
  json_object_set_int_member(e, "pid", pid);
  json_object_set_int_member(e, "tid", tid);
  json_array_add_object_element(events, e);
  return e;
}

static JsonObject *
args_of(JsonObject *e)
{
  JsonObject *args = json_object_new();
  json_object_set_object_member(e, "args", args);
  return args;
}

/* Metadata: a name (`text`) or a sort index. */
static void
metadata(JsonArray *events, const char *what, int pid, int tid, const char *text, gint64 sort_index)
{
  JsonObject *args = args_of(event(events, what, "M", pid, tid));
  if (text)
    json_object_set_string_member(args, "name", text);
  else
    json_object_set_int_member(args, "sort_index", sort_index);
}

static void
counter(JsonArray *events, const char *name, int pid, double seconds, gint64 bytes)
{
  JsonObject *e = event(events, name, "C", pid, 0);
  json_object_set_double_member(e, "ts", seconds * 1e6);
  json_object_set_int_member(args_of(e), "bytes", bytes);
}

JsonNode *
export_chrome_trace_build(const SimResult *r, GError **error)
{
  g_autoptr(ExportSpans) spans = export_spans_new(r, error);
  if (spans == NULL)
    return NULL;
  if (r->run->curve == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "policy '%s': no memory curve", r->policy);
    return NULL;
  }
  const SimProgram *p = r->program;
  JsonArray *events = json_array_new();
  /* One GPU: the device and the host, as the trace has always had them.
   * Several: a process per GPU, pid = GPU + 1, holding that GPU's streams
   * and both of its counters, since each GPU has its own pinned memory. */
  gboolean several = p->n_gpus > 1;

  if (several) {
    for (guint g = 0; g < p->n_gpus; g++) {
      g_autofree char *name = export_spans_gpu_name(p, g);
      metadata(events, "process_name", (int)g + 1, 0, name, 0);
      metadata(events, "process_sort_index", (int)g + 1, 0, NULL, g + 1);
    }
  } else {
    g_autofree char *device = g_strdup_printf("device: %s, %s", r->policy, r->scenario);
    metadata(events, "process_name", DEVICE_PID, 0, device, 0);
    metadata(events, "process_sort_index", DEVICE_PID, 0, NULL, DEVICE_PID);
    metadata(events, "process_name", HOST_PID, 0, "host", 0);
    metadata(events, "process_sort_index", HOST_PID, 0, NULL, HOST_PID);
  }

  /* Thread ids from 1, one per lane, streams in program order: unique
   * across processes too, so that no viewer merges two GPUs' threads. */
  g_autofree guint *first_tid = g_new(guint, p->streams->len);
  guint tid = 1;
  for (guint s = 0; s < p->streams->len; s++) {
    const SimStream *stream = g_ptr_array_index(p->streams, s);
    int pid = several ? (int)stream->gpu + 1 : DEVICE_PID;
    first_tid[s] = tid;
    for (guint lane = 0; lane < g_array_index(spans->lanes, guint, s); lane++, tid++) {
      g_autofree char *name = lane ? g_strdup_printf("%s (%u)", stream->name, lane + 1) : g_strdup(stream->name);
      metadata(events, "thread_name", pid, (int)tid, name, 0);
      metadata(events, "thread_sort_index", pid, (int)tid, NULL, tid);
    }
  }

  for (guint i = 0; i < spans->spans->len; i++) {
    const ExportSpan *span = &g_array_index(spans->spans, ExportSpan, i);
    const SimOp *op = sim_program_op(p, span->op);
    const SimStream *stream = g_ptr_array_index(p->streams, span->stream);
    g_autofree char *what = export_spans_op_name(p, span->op);
    /* A pipeline runs each layer once per micro-batch: the name tells them apart. */
    gint32 mb = sim_program_op_microbatch(p, span->op);
    g_autoptr(GString) name = g_string_new(what);
    if (span->layer != SIM_NO_LAYER)
      g_string_append_printf(name, " L%d", span->layer);
    if (mb >= 0)
      g_string_append_printf(name, " mb %d", mb);
    JsonObject *e = event(events, name->str, "X", several ? (int)stream->gpu + 1 : DEVICE_PID,
                          (int)(first_tid[span->stream] + span->lane));
    json_object_set_string_member(e, "cat", export_spans_kind_name(span->kind));
    json_object_set_double_member(e, "ts", span->start * 1e6);
    json_object_set_double_member(e, "dur", (span->end - span->start) * 1e6);
    JsonObject *args = args_of(e);
    json_object_set_int_member(args, "op", span->op);
    json_object_set_string_member(args, "stream", stream->name);
    if (span->layer == SIM_NO_LAYER)
      json_object_set_null_member(args, "layer");
    else
      json_object_set_int_member(args, "layer", span->layer);
    if (sim_program_has_microbatches(p)) {
      if (mb < 0)
        json_object_set_null_member(args, "microbatch");
      else
        json_object_set_int_member(args, "microbatch", mb);
    }
    json_object_set_string_member(args, "phase", sim_phase_name(op->phase));
    json_object_set_int_member(args, "bytes", op->kind == SIM_OP_COPY ? (gint64)op->bytes : 0);
  }

  /* A point of the curve holds the levels of the GPU whose memory changed:
   * it goes to that GPU's counters only. */
  for (guint k = 0; k < r->run->curve->len; k++) {
    const SimMemPoint *pt = &g_array_index(r->run->curve, SimMemPoint, k);
    int pid = several ? (int)pt->gpu + 1 : DEVICE_PID;
    counter(events, "device memory", pid, pt->time, pt->device);
    counter(events, "host pinned memory", several ? pid : HOST_PID, pt->time, pt->host);
  }

  JsonObject *root = json_object_new();
  json_object_set_array_member(root, "traceEvents", events);
  json_object_set_string_member(root, "displayTimeUnit", "ms");
  JsonObject *other = json_object_new();
  json_object_set_string_member(other, "scenario", r->scenario);
  json_object_set_string_member(other, "policy", r->policy);
  json_object_set_double_member(other, "step_ms", r->step_ms);
  if (several)
    json_object_set_int_member(other, "gpus", p->n_gpus);
  json_object_set_object_member(root, "otherData", other);
  JsonNode *node = json_node_init_object(json_node_alloc(), root);
  json_object_unref(root);
  return node;
}

gboolean
export_chrome_trace_write(const SimResult *r, const char *option, const char *path, GError **error)
{
  g_autoptr(JsonNode) root = export_chrome_trace_build(r, error);
  if (root == NULL)
    return FALSE;
  g_autoptr(JsonGenerator) generator = json_generator_new();
  json_generator_set_root(generator, root);
  gsize length = 0;
  g_autofree char *text = json_generator_to_data(generator, &length);
  return sim_output_save(option, path, text, length, error);
}
