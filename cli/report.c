#include "cli/report.h"

#include "base/error.h"
#include "base/output.h"
#include "base/units.h"
#include "lower/pipeline.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define FORMAT_NAME_(e, name) #name,
static const char *const format_names[] = { CLI_FORMAT_MAP(FORMAT_NAME_) };
#undef FORMAT_NAME_

/* The names of `allowed`, "table or json", "table, csv or json"; `dflt`
 * after the first (table, the default). */
static char *
format_list(CliFormats allowed, const char *dflt)
{
  GString *names = g_string_new(NULL);
  guint n = (guint)__builtin_popcount((guint)allowed), k = 0;
  for (guint i = 0; i < CLI_FORMAT_COUNT; i++)
    if (allowed & (1u << i)) {
      g_autofree char *name = g_strconcat(format_names[i], k == 0 ? dflt : "", NULL);
      sim_error_append_choice(names, name, k++, n, "or");
    }
  return g_string_free(names, FALSE);
}

gboolean
cli_report_parse_format(const char *text, CliFormats allowed, CliFormat *format, GError **error)
{
  g_return_val_if_fail(allowed & CLI_FORMATS_TABLE, FALSE);
  *format = CLI_FORMAT_TABLE;
  if (text == NULL)
    return TRUE;
  for (guint i = 0; i < CLI_FORMAT_COUNT; i++) {
    if ((allowed & (1u << i)) && strcmp(text, format_names[i]) == 0) {
      *format = (CliFormat)i;
      return TRUE;
    }
  }
  g_autofree char *names = format_list(allowed, ""), *quoted = sim_error_quote(text);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--format: expected %s, got '%s'", names, quoted);
  return FALSE;
}

char *
cli_report_format_help(CliFormats allowed)
{
  g_autofree char *names = format_list(allowed, " (default)");
  return g_strconcat("Output: ", names, NULL);
}

/* ---- JSON --------------------------------------------------------------- */

/* The fields of one result, in docs/scenarios.md's order: JSON and CSV are
 * both written from this table, so that the two cannot drift apart. */
typedef enum {
  FIELD_STRING,  /* char*, never NULL */
  FIELD_DOUBLE,
  FIELD_INT64,
  FIELD_UINT64,  /* written as a signed 64-bit integer, as JSON holds it */
  FIELD_UINT,
  FIELD_BOOLEAN,
  FIELD_LAYER,   /* gint32, SIM_NO_LAYER written as null (an empty CSV field) */
  FIELD_TEXT,    /* char*, NULL written as null (an empty CSV field) */
} FieldType;

typedef struct {
  const char *name;
  FieldType type;
  gsize offset;
} Field;

#define FIELD(name, type, member) { name, type, offsetof(SimResult, member) }

static const Field fields[] = {
  FIELD("scenario", FIELD_STRING, scenario),
  FIELD("policy", FIELD_STRING, policy),
  FIELD("step_ms", FIELD_DOUBLE, step_ms),
  FIELD("compute_ms", FIELD_DOUBLE, compute_ms),
  FIELD("recompute_ms", FIELD_DOUBLE, recompute_ms),
  FIELD("exposed_transfer_ms", FIELD_DOUBLE, exposed_transfer_ms),
  FIELD("saved_bytes", FIELD_UINT64, saved_bytes),
  FIELD("peak_device_bytes", FIELD_INT64, peak_device.bytes),
  FIELD("peak_host_bytes", FIELD_INT64, peak_host.bytes),
  FIELD("d2h_bytes", FIELD_UINT64, d2h_bytes),
  FIELD("h2d_bytes", FIELD_UINT64, h2d_bytes),
  FIELD("d2h_copies", FIELD_UINT, d2h_copies),
  FIELD("h2d_copies", FIELD_UINT, h2d_copies),
  FIELD("fits", FIELD_BOOLEAN, fits),
  /* Extras. */
  FIELD("capacity_bytes", FIELD_UINT64, capacity_bytes),
  FIELD("peak_device_ms", FIELD_DOUBLE, peak_device.time_ms),
  FIELD("peak_device_phase", FIELD_STRING, peak_device.phase),
  FIELD("peak_device_layer", FIELD_LAYER, peak_device.layer),
  FIELD("peak_device_where", FIELD_STRING, peak_device.where),
  FIELD("peak_device_live", FIELD_STRING, peak_device.live),
  FIELD("peak_host_ms", FIELD_DOUBLE, peak_host.time_ms),
  FIELD("peak_host_live", FIELD_STRING, peak_host.live),
  FIELD("time_model", FIELD_STRING, time_model),
  FIELD("gemm_ms", FIELD_DOUBLE, gemm_ms),
  FIELD("attention_ms", FIELD_DOUBLE, attention_ms),
  FIELD("memory_ms", FIELD_DOUBLE, memory_ms),
  FIELD("host_wait_ms", FIELD_DOUBLE, host_wait_ms),
  FIELD("optimizer_ms", FIELD_DOUBLE, optimizer_ms),
  FIELD("comm_ms", FIELD_DOUBLE, comm_ms),
  FIELD("peak_reserved_bytes", FIELD_UINT64, peak_reserved_bytes),
  FIELD("fragmentation_bytes", FIELD_UINT64, fragmentation_bytes),
  FIELD("note", FIELD_TEXT, note),
};

#define FIELD_AT(r, f, type) (*(const type *)((const char *)(r) + (f)->offset))

/* Integer fields as JSON holds them; FALSE for null. */
static gboolean
field_int(const SimResult *r, const Field *f, gint64 *v)
{
  switch (f->type) {
  case FIELD_INT64:
    *v = FIELD_AT(r, f, gint64);
    return TRUE;
  case FIELD_UINT64:
    *v = (gint64)FIELD_AT(r, f, guint64);
    return TRUE;
  case FIELD_UINT:
    *v = FIELD_AT(r, f, guint);
    return TRUE;
  case FIELD_LAYER:
    *v = FIELD_AT(r, f, gint32);
    return *v != SIM_NO_LAYER;
  case FIELD_TEXT: /* NULL: null */
    return FALSE;
  default:
    g_return_val_if_reached(FALSE);
  }
}

static void
add_int(JsonBuilder *b, const char *name, gint64 v)
{
  json_builder_set_member_name(b, name);
  json_builder_add_int_value(b, v);
}

static void
add_double(JsonBuilder *b, const char *name, double v)
{
  json_builder_set_member_name(b, name);
  json_builder_add_double_value(b, v);
}

/* `stages`, after every other member: one object per pipeline stage, the
 * worst of its replicas. */
static void
add_stages(JsonBuilder *b, const GArray *stages)
{
  json_builder_set_member_name(b, "stages");
  json_builder_begin_array(b);
  for (guint i = 0; i < stages->len; i++) {
    const SimResultStage *st = &g_array_index(stages, SimResultStage, i);
    json_builder_begin_object(b);
    add_int(b, "stage", st->stage);
    add_int(b, "layers", st->layers);
    add_int(b, "peak_device_bytes", st->peak_device_bytes);
    add_int(b, "peak_host_bytes", st->peak_host_bytes);
    add_int(b, "d2h_bytes", (gint64)st->d2h_bytes);
    add_int(b, "h2d_bytes", (gint64)st->h2d_bytes);
    add_double(b, "busy_ms", st->busy_ms);
    add_double(b, "bubble_ms", st->bubble_ms);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

JsonNode *
cli_report_result_json(const SimResult *r)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  for (const Field *f = fields; f < fields + G_N_ELEMENTS(fields); f++) {
    json_builder_set_member_name(b, f->name);
    gint64 v = 0;
    if (f->type == FIELD_STRING || (f->type == FIELD_TEXT && FIELD_AT(r, f, const char *)))
      json_builder_add_string_value(b, FIELD_AT(r, f, const char *));
    else if (f->type == FIELD_DOUBLE)
      json_builder_add_double_value(b, FIELD_AT(r, f, double));
    else if (f->type == FIELD_BOOLEAN)
      json_builder_add_boolean_value(b, FIELD_AT(r, f, gboolean));
    else if (field_int(r, f, &v))
      json_builder_add_int_value(b, v);
    else
      json_builder_add_null_value(b);
  }
  if (r->stages)
    add_stages(b, r->stages);
  json_builder_end_object(b);
  return json_builder_get_root(b);
}

static void
add_string(JsonBuilder *b, const char *name, const char *v)
{
  json_builder_set_member_name(b, name);
  json_builder_add_string_value(b, v);
}

/* Strings go through json-glib's own escaper (one string node at a time);
 * numbers through %.15g, which prints every value a user typed exactly. */
static void
write_node(GString *out, JsonNode *node, guint indent)
{
  switch (json_node_get_node_type(node)) {
  case JSON_NODE_OBJECT: {
    JsonObject *object = json_node_get_object(node);
    g_autoptr(GList) members = json_object_get_members(object);
    g_string_append(out, "{");
    for (GList *m = members; m; m = m->next) {
      g_autoptr(JsonNode) key = json_node_init_string(json_node_alloc(), m->data);
      g_autofree char *quoted = json_to_string(key, FALSE);
      g_string_append_printf(out, "\n%*s%s: ", (int)(indent + 2), "", quoted);
      write_node(out, json_object_get_member(object, m->data), indent + 2);
      if (m->next)
        g_string_append_c(out, ',');
    }
    g_string_append_printf(out, "\n%*s}", (int)indent, "");
    break;
  }
  case JSON_NODE_ARRAY: {
    JsonArray *array = json_node_get_array(node);
    guint n = json_array_get_length(array);
    g_string_append(out, "[");
    for (guint i = 0; i < n; i++) {
      g_string_append_printf(out, "\n%*s", (int)(indent + 2), "");
      write_node(out, json_array_get_element(array, i), indent + 2);
      if (i + 1 < n)
        g_string_append_c(out, ',');
    }
    g_string_append_printf(out, "\n%*s]", (int)indent, "");
    break;
  }
  case JSON_NODE_VALUE:
    if (json_node_get_value_type(node) == G_TYPE_DOUBLE) {
      if (isfinite(json_node_get_double(node)))
        sim_output_number(out, json_node_get_double(node));
      else
        g_string_append(out, "null");
    } else {
      g_autofree char *text = json_to_string(node, FALSE);
      g_string_append(out, text);
    }
    break;
  case JSON_NODE_NULL:
    g_string_append(out, "null");
    break;
  }
}

char *
cli_report_json_to_string(JsonNode *node)
{
  GString *out = g_string_new(NULL);
  write_node(out, node, 0);
  g_string_append_c(out, '\n');
  return g_string_free(out, FALSE);
}

static char *
format_json(const SimScenario *s, GPtrArray *results, gboolean single)
{
  if (single) {
    g_autoptr(JsonNode) node = cli_report_result_json(g_ptr_array_index(results, 0));
    return cli_report_json_to_string(node);
  }
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  add_string(b, "scenario", s->name);
  json_builder_set_member_name(b, "results");
  json_builder_begin_array(b);
  for (guint i = 0; i < results->len; i++)
    json_builder_add_value(b, cli_report_result_json(g_ptr_array_index(results, i)));
  json_builder_end_array(b);
  json_builder_end_object(b);
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  return cli_report_json_to_string(root);
}

/* ---- CSV ---------------------------------------------------------------- */

/* CSV columns are the JSON members, in order (the same table). */
void
cli_report_csv_header(GString *out, const char *prefix)
{
  g_string_append(out, prefix ? prefix : "");
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++) {
    sim_output_csv_field(out, fields[i].name);
    g_string_append_c(out, i + 1 < G_N_ELEMENTS(fields) ? ',' : '\n');
  }
}

guint
cli_report_csv_columns(void)
{
  return G_N_ELEMENTS(fields);
}

/* Straight from the table, no JSON node: a sweep formats a row per point
 * and policy on its workers, and this is most of their output's cost. */
void
cli_report_csv_row(GString *out, const char *prefix, const SimResult *r)
{
  g_string_append(out, prefix ? prefix : "");
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++) {
    const Field *f = &fields[i];
    gint64 v = 0;
    if (f->type == FIELD_STRING || (f->type == FIELD_TEXT && FIELD_AT(r, f, const char *)))
      sim_output_csv_field(out, FIELD_AT(r, f, const char *));
    else if (f->type == FIELD_DOUBLE)
      sim_output_number(out, FIELD_AT(r, f, double));
    else if (f->type == FIELD_BOOLEAN)
      g_string_append(out, FIELD_AT(r, f, gboolean) ? "true" : "false");
    else if (field_int(r, f, &v))
      g_string_append_printf(out, "%" G_GINT64_FORMAT, v);
    /* else null: an empty field */
    g_string_append_c(out, i + 1 < G_N_ELEMENTS(fields) ? ',' : '\n');
  }
}

static char *
format_csv(GPtrArray *results)
{
  GString *out = g_string_new(NULL);
  cli_report_csv_header(out, NULL);
  for (guint i = 0; i < results->len; i++)
    cli_report_csv_row(out, NULL, g_ptr_array_index(results, i));
  return g_string_free(out, FALSE);
}

/* ---- table -------------------------------------------------------------- */

/* The per-stage block of a pipeline: one row per policy and stage. */
static void
format_stages(GString *out, GPtrArray *results, int w)
{
  const SimResult *first = g_ptr_array_index(results, 0);
  if (first->stages == NULL)
    return;
  g_string_append_printf(out, "\nper stage (the worst replica):\n%-*s %5s %6s %11s %10s %9s %9s %9s %9s\n", w,
                         "policy", "stage", "layers", "peak dev", "peak host", "D2H", "H2D", "busy ms", "bubble ms");
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    for (guint k = 0; r->stages && k < r->stages->len; k++) {
      const SimResultStage *st = &g_array_index(r->stages, SimResultStage, k);
      g_autofree char *pd = sim_units_format_size((guint64)st->peak_device_bytes);
      g_autofree char *ph = sim_units_format_size((guint64)st->peak_host_bytes);
      g_autofree char *d = sim_units_format_size(st->d2h_bytes);
      g_autofree char *h = sim_units_format_size(st->h2d_bytes);
      const char *name = k == 0 ? r->policy : "";
      int pad = w - (int)g_utf8_strlen(name, -1);
      g_string_append_printf(out, "%s%*s %5u %6u %11s %10s %9s %9s %9.2f %9.2f\n", name, pad, "", st->stage,
                             st->layers, pd, ph, d, h, st->busy_ms, st->bubble_ms);
    }
  }
}

/* The notes of the policies that changed nothing, under the table (a
 * column would pass the table's width): "  POLICY: NOTE", words wrapped so
 * that a line stays within NOTE_COLUMNS, continued four spaces in. */
#define NOTE_COLUMNS 100

static void
format_notes(GString *out, GPtrArray *results)
{
  gboolean any = FALSE;
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    if (r->note == NULL)
      continue;
    if (!any)
      g_string_append(out, "\nnotes (these policies ran as resident):\n");
    any = TRUE;
    g_autofree char *text = g_strdup_printf("%s: %s", r->policy, r->note);
    g_auto(GStrv) words = g_strsplit(text, " ", -1);
    glong column = 2;
    g_string_append(out, "  ");
    for (char **word = words; *word; word++) {
      glong len = g_utf8_strlen(*word, -1);
      if (word != words && column + 1 + len > NOTE_COLUMNS) {
        g_string_append(out, "\n    ");
        column = 4;
      } else if (word != words) {
        g_string_append_c(out, ' ');
        column++;
      }
      g_string_append(out, *word);
      column += len;
    }
    g_string_append_c(out, '\n');
  }
}

static char *
format_table(const SimScenario *s, GPtrArray *results)
{
  GString *out = g_string_new(NULL);
  const SimLink *link = &s->machine.link;
  g_autofree char *saved = sim_units_format_size(sim_workload_saved_bytes(s->workload));
  g_autofree char *stat = sim_units_format_size(s->workload->static_bytes);
  g_autofree char *mem = sim_units_format_size(s->machine.device.memory);
  g_autofree char *h2d = sim_units_format_rate(link->h2d_bandwidth);
  g_autofree char *d2h = sim_units_format_rate(link->d2h_bandwidth);
  g_autofree char *bidir = sim_units_format_rate(link->bidir_bandwidth);
  const SimResult *first = g_ptr_array_index(results, 0);
  g_autofree char *cap = sim_units_format_size(first->capacity_bytes);

  g_string_append_printf(out, "%s\n", s->name);
  /* The capacity `fits` used, not a verdict: each row says whether it fits. */
  g_string_append_printf(out, "%u layers, %s saved for backward, %s static", sim_workload_n_layers(s->workload), saved,
                         stat);
  /* Pipelined or sharded, each GPU holds its part: the most a stage holds. */
  if ((s->parallel.pp > 1 || s->parallel.sharding != SIM_SHARDING_NONE) && s->workload->static_bytes > 0) {
    guint64 most = 0;
    for (guint stage = 0; stage < s->parallel.pp; stage++)
      most = MAX(most, sim_lower_pipeline_stage_static(s->workload, &s->parallel, stage));
    g_autofree char *per_gpu = sim_units_format_size(most);
    g_string_append_printf(out, " (%s on the GPU that holds most", per_gpu);
    if (s->parallel.sharding != SIM_SHARDING_NONE)
      g_string_append_printf(out, ", sharding = %s over dp = %u", sim_sharding_names[s->parallel.sharding],
                             s->parallel.dp);
    g_string_append_c(out, ')');
  }
  /* `fits` judges what PyTorch's caching allocator reserves (sim/result/reserved.h). */
  g_string_append_printf(out, "; %s device, fits if reserved <= %s\n", mem, cap);
  g_string_append_printf(out, "link: H2D %s, D2H %s, both %s, %.3g us per copy", h2d, d2h, bidir, link->latency * 1e6);
  if (link->compute_slowdown > 0)
    g_string_append_printf(out, ", compute -%.3g%% during copies", link->compute_slowdown * 100);
  g_string_append(out, "\n\n");

  int w = 14;
  for (guint i = 0; i < results->len; i++)
    w = MAX(w, (int)g_utf8_strlen(((SimResult *)g_ptr_array_index(results, i))->policy, -1));
  g_string_append_printf(out, "%-*s %9s %8s %7s %7s %7s %8s %9s %9s %9s %9s %4s\n", w, "policy", "step ms", "compute",
                         "recomp", "optim", "comm", "exposed", "peak dev", "peak host", "D2H", "H2D", "fits");
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    g_autofree char *pd = sim_units_format_size((guint64)r->peak_device.bytes);
    g_autofree char *ph = sim_units_format_size((guint64)r->peak_host.bytes);
    g_autofree char *d = sim_units_format_size(r->d2h_bytes);
    g_autofree char *h = sim_units_format_size(r->h2d_bytes);
    /* Pad by characters, not bytes, so UTF-8 names keep the columns straight. */
    int pad = w - (int)g_utf8_strlen(r->policy, -1);
    g_string_append_printf(out, "%s%*s %9.2f %8.2f %7.2f %7.2f %7.2f %8.2f %9s %9s %9s %9s %4s\n", r->policy, pad,
                           "", r->step_ms, r->compute_ms, r->recompute_ms, r->optimizer_ms, r->comm_ms,
                           r->exposed_transfer_ms, pd, ph, d, h, r->fits ? "yes" : "NO");
  }
  format_stages(out, results, w);
  format_notes(out, results);
  g_string_append(out, "\npeak device memory, when and what was live:\n");
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    g_autofree char *pd = sim_units_format_size((guint64)r->peak_device.bytes);
    g_autofree char *rs = sim_units_format_size(r->peak_reserved_bytes);
    const char *where = r->peak_device.where;
    g_string_append_printf(out, "  %s: %s at %.2f ms (%s%s%s), %s reserved at most\n    %s\n", r->policy, pd,
                           r->peak_device.time_ms, r->peak_device.phase, *where ? " " : "", where, rs,
                           r->peak_device.live);
  }
  return g_string_free(out, FALSE);
}

char *
cli_report_format(const SimScenario *s, GPtrArray *results, CliFormat format, gboolean single)
{
  g_return_val_if_fail(results->len > 0, NULL);
  switch (format) {
  case CLI_FORMAT_JSON:
    return format_json(s, results, single);
  case CLI_FORMAT_CSV:
    return format_csv(results);
  case CLI_FORMAT_TABLE:
  default:
    return format_table(s, results);
  }
}
