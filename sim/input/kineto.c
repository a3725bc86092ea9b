/* sim/input/kineto.c — a Kineto trace's measured figures (sim/input/kineto.h). */
#include "kineto.h"

#include "error.h"
#include "gzip.h"

#include <json-glib/json-glib.h>
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

gboolean
sim_kineto_load(const char *path, SimKineto *out, GError **error)
{
  *out = (SimKineto){ 0 };
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
  for (guint i = 0; i < json_array_get_length(list); i++) {
    JsonNode *node = json_array_get_element(list, i);
    if (!JSON_NODE_HOLDS_OBJECT(node))
      continue;
    JsonObject *e = json_node_get_object(node);
    out->events++;
    const char *cat = json_object_get_string_member_with_default(e, "cat", "");
    const char *name = json_object_get_string_member_with_default(e, "name", "");
    double dur = number(e, "dur") * 1e-6;
    if (strcmp(cat, "user_annotation") == 0 && g_str_has_prefix(name, "ProfilerStep#")) {
      out->steps++;
      step_total += dur;
    } else if (strcmp(cat, "kernel") == 0) {
      out->kernels++;
      out->kernel_seconds += dur;
    } else if (strcmp(cat, "gpu_memcpy") == 0) {
      JsonNode *args = json_object_get_member(e, "args");
      SimKinetoCopies *c = &out->copies[direction(name)];
      c->count++;
      c->bytes += (guint64)number(args && JSON_NODE_HOLDS_OBJECT(args) ? json_node_get_object(args) : NULL, "bytes");
      c->seconds += dur;
    }
  }
  out->step_seconds = out->steps ? step_total / out->steps : 0;
  return TRUE;
}
