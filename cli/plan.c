/* cli/plan.c — `offsim plan`: the hybrid planner's answer for a budget. */
#include "cli.h"

#include "schema.h"

#include "error.h"
#include "plan.h"
#include "report.h"
#include "units.h"

#include <math.h>
#include <stdio.h>

/* Exit status when no plan fits the budget. */
#define EXIT_INFEASIBLE 4

JsonNode *
cli_plan_json(const PlannerPlan *p, const SimResult *r, guint64 budget)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
#define MEMBER(name) json_builder_set_member_name(b, name)
  MEMBER("step_ms");
  json_builder_add_double_value(b, r->step_ms);
  MEMBER("peak_device_bytes");
  json_builder_add_int_value(b, r->peak_device.bytes);
  MEMBER("exposed_transfer_ms");
  json_builder_add_double_value(b, r->exposed_transfer_ms);
  MEMBER("recompute_ms");
  json_builder_add_double_value(b, r->recompute_ms);
  MEMBER("actions");
  json_builder_begin_array(b);
  for (guint i = 0; i < p->policy->actions->len; i++)
    json_builder_add_string_value(b, sim_action_name(g_array_index(p->policy->actions, SimAction, i)));
  json_builder_end_array(b);
  MEMBER("prefetch");
  json_builder_add_int_value(b, p->policy->prefetch);
  MEMBER("lower_bound_ms");
  json_builder_add_double_value(b, p->lower_bound_ms);
  MEMBER("gap");
  json_builder_add_double_value(b, p->gap);
  MEMBER("verdict");
  json_builder_add_string_value(b, p->verdict);
  /* Extras. */
  MEMBER("feasible");
  json_builder_add_boolean_value(b, p->feasible);
  MEMBER("budget_bytes");
  json_builder_add_int_value(b, (gint64)budget);
  MEMBER("min_budget_bytes");
  if (p->feasible)
    json_builder_add_null_value(b);
  else
    json_builder_add_int_value(b, (gint64)p->min_budget);
  MEMBER("mode");
  json_builder_add_string_value(b, p->policy->async ? "async" : "sync");
  MEMBER("inflight");
  json_builder_add_int_value(b, p->policy->inflight);
  MEMBER("resident_step_ms");
  json_builder_add_double_value(b, p->resident->step_ms);
  MEMBER("resident_peak_device_bytes");
  json_builder_add_int_value(b, p->resident->peak_device.bytes);
  MEMBER("verdict_reason");
  json_builder_add_string_value(b, p->verdict_reason);
  MEMBER("evaluations");
  json_builder_add_int_value(b, (gint64)p->evaluations);
  MEMBER("optimal");
  json_builder_add_boolean_value(b, p->optimal);
  MEMBER("bound");
  json_builder_add_string_value(b, p->resident_bound ? "resident"
                                   : p->proven       ? "exact"
                                   : p->lagrangian   ? "lagrangian"
                                                     : "analytical");
  MEMBER("states");
  json_builder_add_int_value(b, (gint64)p->states);
  MEMBER("peak_reserved_bytes");
  json_builder_add_int_value(b, (gint64)r->peak_reserved_bytes);
  MEMBER("fits");
  json_builder_add_boolean_value(b, r->fits);
  MEMBER("layers");
  json_builder_begin_array(b);
  for (guint i = 0; i < p->notes->len; i++) {
    const PlannerLayerNote *n = &g_array_index(p->notes, PlannerLayerNote, i);
    json_builder_begin_object(b);
    MEMBER("action");
    json_builder_add_string_value(b, sim_action_name(n->action));
    MEMBER("bytes_saved");
    json_builder_add_int_value(b, (gint64)n->bytes_saved);
    MEMBER("exposed_if_offloaded_ms");
    if (isnan(n->exposed_if_offloaded_ms))
      json_builder_add_null_value(b);
    else
      json_builder_add_double_value(b, n->exposed_if_offloaded_ms);
    MEMBER("recompute_ms");
    json_builder_add_double_value(b, n->recompute_ms);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  /* A pipeline's stages, after every member a single-GPU plan has. */
  if (p->stages) {
    MEMBER("stages");
    json_builder_begin_array(b);
    for (guint k = 0; k < p->stages->len; k++) {
      const PlannerStage *st = &g_array_index(p->stages, PlannerStage, k);
      json_builder_begin_object(b);
      MEMBER("stage");
      json_builder_add_int_value(b, st->stage);
      MEMBER("layers");
      json_builder_begin_array(b);
      for (guint i = 0; i < st->layers->len; i++)
        json_builder_add_int_value(b, g_array_index(st->layers, guint, i));
      json_builder_end_array(b);
      MEMBER("peak_device_bytes");
      json_builder_add_int_value(b, st->peak_device_bytes);
      MEMBER("peak_host_bytes");
      json_builder_add_int_value(b, st->peak_host_bytes);
      MEMBER("actions");
      json_builder_begin_array(b);
      for (guint i = 0; i < st->layers->len; i++) {
        guint layer = g_array_index(st->layers, guint, i);
        json_builder_add_string_value(b, sim_action_name(g_array_index(p->policy->actions, SimAction, layer)));
      }
      json_builder_end_array(b);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
  }
#undef MEMBER
  json_builder_end_object(b);
  return json_builder_get_root(b);
}

const char *
cli_plan_bound_words(const PlannerPlan *p)
{
  if (p->resident_bound)
    return "resident bound (pipeline: not proven)";
  if (p->optimal)
    return "proven optimal (exact search)";
  if (p->proven)
    return "proven bound (exact search): no plan is faster";
  if (p->lagrangian)
    return "Lagrangian bound: not proven (past " G_STRINGIFY(PLANNER_PROVEN_LAYERS) " layers)";
  return "analytical bound: not proven";
}

void
cli_plan_format_layers(GString *out, const PlannerPlan *p)
{
  g_string_append(out, "layer  action               saved   exposed if offloaded   recompute\n");
  for (guint i = 0; i < p->notes->len; i++) {
    const PlannerLayerNote *n = &g_array_index(p->notes, PlannerLayerNote, i);
    g_autofree char *saved = sim_units_format_size(n->bytes_saved);
    g_autofree char *exposed = isnan(n->exposed_if_offloaded_ms) ? g_strdup("-")
                                                                 : g_strdup_printf("%+.2f ms", n->exposed_if_offloaded_ms);
    g_string_append_printf(out, "%5u  %-17s %9s   %20s   %6.2f ms\n", i, sim_action_name(n->action), saved, exposed,
                           n->recompute_ms);
  }
}

/* "L0-L5" for each run of consecutive layers of `layers` (guint), ", "
 * between runs; with `actions`, a run also ends where the action changes
 * and is followed by its action's name: "L0-L5 offload, L6-L7 keep". */
static void
append_runs(GString *out, const GArray *layers, const GArray *actions)
{
  for (guint i = 0; i < layers->len;) {
    guint first = g_array_index(layers, guint, i), last = first, j = i + 1;
    SimAction a = actions ? g_array_index(actions, SimAction, first) : SIM_ACTION_KEEP;
    for (; j < layers->len; j++) {
      guint next = g_array_index(layers, guint, j);
      if (next != last + 1 || (actions && g_array_index(actions, SimAction, next) != a))
        break;
      last = next;
    }
    g_string_append_printf(out, "%sL%u", i ? ", " : "", first);
    if (last != first)
      g_string_append_printf(out, "-L%u", last);
    if (actions)
      g_string_append_printf(out, " %s", sim_action_name(a));
    i = j;
  }
}

void
cli_plan_format_stages(GString *out, const PlannerPlan *p)
{
  if (p->stages == NULL)
    return;
  g_string_append(out, "stage  layers          peak dev   peak host   actions\n");
  for (guint k = 0; k < p->stages->len; k++) {
    const PlannerStage *st = &g_array_index(p->stages, PlannerStage, k);
    g_autoptr(GString) layers = g_string_new(NULL);
    append_runs(layers, st->layers, NULL);
    g_autofree char *dev = sim_units_format_size((guint64)st->peak_device_bytes);
    g_autofree char *host = sim_units_format_size((guint64)st->peak_host_bytes);
    g_string_append_printf(out, "%5u  %-12s %11s %11s   ", st->stage, layers->str, dev, host);
    append_runs(out, st->layers, p->policy->actions);
    g_string_append_c(out, '\n');
  }
  g_string_append_c(out, '\n');
}

/* `budget` is what the planner used, `asked` what --budget said (more when
 * it passed the device's memory). */
static char *
plan_table(const SimScenario *s, const PlannerPlan *p, guint64 budget, guint64 asked)
{
  GString *out = g_string_new(NULL);
  const SimResult *r = p->result;
  g_autofree char *b = sim_units_format_size(budget);
  g_autofree char *peak = sim_units_format_size((guint64)r->peak_device.bytes);
  g_autofree char *resident_peak = sim_units_format_size((guint64)p->resident->peak_device.bytes);
  g_string_append_printf(out, "%s\nplan under a budget of %s", s->name, b);
  if (asked > budget) {
    g_autofree char *a = sim_units_format_size(asked);
    g_string_append_printf(out, ", the device's memory, not --budget %s", a);
  }
  g_string_append_printf(out, " (%" G_GUINT64_FORMAT " simulations)\n\n", p->evaluations);
  if (!p->feasible) {
    g_autofree char *min = sim_units_format_size(p->min_budget);
    g_string_append_printf(out, "no plan fits %s%s: the smallest peak a plan was found to reach is %s (%" G_GUINT64_FORMAT
                           " bytes); that plan:\n\n", b, p->infeasible_proven ? " (proven by the exact search)" : "",
                           min, p->min_budget);
  }
  g_string_append_printf(out, "step        %9.2f ms   (resident %.2f ms)\n", r->step_ms, p->resident->step_ms);
  g_string_append_printf(out, "exposed     %9.2f ms\nrecompute   %9.2f ms\n", r->exposed_transfer_ms, r->recompute_ms);
  g_string_append_printf(out, "peak        %12s   (resident %s)\n", peak, resident_peak);
  g_string_append_printf(out, "lower bound %9.2f ms   gap %.2f %%   %s\n", p->lower_bound_ms, p->gap * 100,
                         cli_plan_bound_words(p));
  g_string_append_printf(out, "verdict     %s: %s\n\n", p->verdict, p->verdict_reason);
  g_autofree char *block = planner_plan_format_policy(p->policy);
  g_string_append_printf(out, "%s\n", block);
  cli_plan_format_stages(out, p);
  cli_plan_format_layers(out, p);
  return g_string_free(out, FALSE);
}

typedef struct {
  char *budget;
  char *format;
  char *framework;
} PlanOptions;

static int
plan_run(const char *path, const PlanOptions *o, GError **error)
{
  CliFormat format = CLI_FORMAT_TABLE;
  guint64 budget = 0;
  if (o->budget == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "plan: --budget SIZE is required");
    return -1;
  }
  if (!cli_parse_budget(o->budget, NULL, &budget, error))
    return -1;
  if (o->format && !cli_report_parse_format(o->format, &format, error))
    return -1;
  if (format == CLI_FORMAT_CSV) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--format: plan prints table or json");
    return -1;
  }
  /* --framework: the [policy] key's names and parser. */
  SimPolicy probe = { 0 };
  GError *cause = NULL;
  if (o->framework && !sim_schema_parse(SIM_KEY_POLICY_FRAMEWORK, o->framework, &probe, &cause)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--framework: %s", cause->message);
    g_error_free(cause);
    return -1;
  }
  g_autoptr(SimScenario) s = cli_load_scenario(path, error);
  if (s == NULL)
    return -1;
  /* No plan whose peak the device cannot hold fits, whatever the budget. */
  guint64 capacity = cli_capacity(budget, s);
  g_autoptr(PlannerPlan) p = planner_plan_framework(s, capacity, probe.framework, error);
  if (p == NULL)
    return -1;
  g_autofree char *text = NULL;
  if (format == CLI_FORMAT_JSON) {
    g_autoptr(JsonNode) node = cli_plan_json(p, p->result, capacity);
    text = cli_report_json_to_string(node);
  } else {
    text = plan_table(s, p, capacity, budget);
  }
  if (!cli_print(text, error))
    return -1;
  return p->feasible ? 0 : EXIT_INFEASIBLE;
}

int
cli_plan_main(int argc, char **argv)
{
  PlanOptions o = { 0 };
  GError *error = NULL;
  const GOptionEntry entries[] = {
    { "budget", 'b', 0, G_OPTION_ARG_STRING, &o.budget, "Device memory budget, a size such as 45GiB (required)",
      "SIZE" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &o.format, "Output: table (default) or json", "FORMAT" },
    { "framework", 0, 0, G_OPTION_ARG_STRING, &o.framework,
      "Offload with this framework's schedule (save_on_cpu, verl, te, megatron, torchtune, deepspeed)", "NAME" },
    G_OPTION_ENTRY_NULL,
  };
  g_set_prgname("offsim plan");
  g_autoptr(GOptionContext) ctx = g_option_context_new("SCENARIO  - choose keep, offload or recompute per layer");
  g_autofree char *summary = g_strdup_printf(
    "The verdict judges the time the plan adds to resident's step: accept up to %.1f %%,\n"
    "tune up to %.1f %% (about what full activation checkpointing costs: one more\n"
    "forward per step), reject beyond it or when nothing fits. offsim budget keeps\n"
    "its ledger's own thresholds (60 ms one way to accept, 120 ms to tune).",
    PLANNER_PLAN_ACCEPT_INCREASE * 100, PLANNER_PLAN_TUNE_INCREASE * 100);
  g_option_context_set_summary(ctx, summary);
  cli_help_describe(ctx, CLI_EXIT_NO_PLAN);
  int status = 0;
  if (!cli_parse_options(ctx, "plan", entries, &argc, &argv, &status)) {
    /* --help, or an error: printed */
  } else if (argc != 2) {
    g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "plan: expected one scenario file");
    status = cli_fail(error);
  } else {
    status = plan_run(argv[1], &o, &error);
    if (status < 0)
      status = cli_fail(error);
  }
  g_free(o.budget);
  g_free(o.format);
  g_free(o.framework);
  return status;
}
