/* cli/plan.c — `offsim plan`: the hybrid planner's answer for a budget. */
#include "cli/cli.h"

#include "input/schema.h"

#include "base/error.h"
#include "base/units.h"
#include "cli/report.h"
#include "planner/plan.h"

#include <math.h>
#include <stdio.h>

/* The formats `offsim plan` prints. */
#define PLAN_FORMATS (CLI_FORMATS_TABLE | CLI_FORMATS_JSON)

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
plan_table(const SimScenario *s, const PlannerPlan *p, guint64 budget, guint64 asked, const char *framework,
           const char *restriction)
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
  g_string_append_printf(out, "verdict     %s: %s\n", p->verdict, p->verdict_reason);
  if (framework) {
    g_autofree char *runs = planner_shapes_describe((const SimAction *)p->policy->actions->data,
                                                    p->policy->actions->len);
    g_string_append_printf(out, "framework   %s's configuration expresses %s: %s\n", framework, runs, restriction);
  }
  g_string_append_c(out, '\n');
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
  char *emit;
} PlanOptions;

/* What --framework and --emit ask for, checked before the scenario loads. */
typedef struct {
  gboolean restricted;   /* --framework TARGET: only the target's shapes */
  PlannerTarget target;  /* with `restricted`, or --emit's */
  gboolean emit;
  SimFramework schedule; /* the per-layer plan's copy schedule */
} PlanRequest;

/* The presets --framework takes that are no target (hooks in the user's
 * code, which take any layer: save_on_cpu), "a or b", with `suffix` after
 * each name; `with_targets`: the targets' names before them, "t, u or a". */
static char *
hook_names(gboolean with_targets, const char *suffix)
{
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  PlannerTarget t;
  for (guint i = 0; with_targets && i < PLANNER_TARGET_COUNT; i++)
    g_ptr_array_add(names, g_strconcat(planner_target_names[i], suffix, NULL));
  for (guint f = SIM_FRAMEWORK_NONE + 1; f < SIM_FRAMEWORK_COUNT; f++)
    if (!planner_target_lookup(sim_framework_names[f], &t))
      g_ptr_array_add(names, g_strconcat(sim_framework_names[f], suffix, NULL));
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < names->len; i++)
    sim_error_append_choice(out, g_ptr_array_index(names, i), i, names->len, "or");
  g_ptr_array_unref(names);
  return g_string_free(out, FALSE);
}

static gboolean
parse_framework(const PlanOptions *o, PlanRequest *r, GError **error)
{
  *r = (PlanRequest){ .schedule = SIM_FRAMEWORK_NONE };
  g_autofree char *targets = g_strjoinv(", ", (char **)planner_target_names);
  if (o->framework && planner_target_lookup(o->framework, &r->target)) {
    r->restricted = TRUE;
    r->schedule = planner_target_framework(r->target);
  } else if (o->framework) {
    /* A hook in the user's code (save_on_cpu) takes any layer: every per-layer plan. */
    SimPolicy probe = { 0 };
    if (!sim_schema_parse(SIM_KEY_POLICY_FRAMEWORK, o->framework, &probe, NULL) || probe.framework == SIM_FRAMEWORK_NONE) {
      g_autofree char *quoted = sim_error_quote(o->framework), *names = hook_names(TRUE, "");
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--framework: expected one of %s, got '%s'", names, quoted);
      return FALSE;
    }
    r->schedule = probe.framework;
  }
  if (o->emit == NULL)
    return TRUE;
  PlannerTarget emit;
  g_autofree char *quoted = sim_error_quote(o->emit);
  if (!planner_target_lookup(o->emit, &emit)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--emit: expected one of %s, got '%s'", targets, quoted);
    return FALSE;
  }
  if (o->framework && (!r->restricted || emit != r->target)) {
    g_autofree char *framework = sim_error_quote(o->framework);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "--emit %s: the plan is searched for --framework %s; give the same name to both, or --emit alone",
                quoted, framework);
    return FALSE;
  }
  r->emit = TRUE;
  r->target = emit;
  r->schedule = planner_target_framework(emit);
  return TRUE;
}

/* --emit without --framework: the per-layer plan, if the target can say it. */
static gboolean
match_shape(const PlannerPlan *p, PlannerTarget target, PlannerShape *shape, GError **error)
{
  const SimAction *actions = (const SimAction *)p->policy->actions->data;
  guint n = p->policy->actions->len;
  if (planner_shapes_match(target, actions, n, shape))
    return TRUE;
  g_autofree char *runs = planner_shapes_describe(actions, n);
  const char *t = planner_target_names[target];
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
              "--emit %s: %s's configuration cannot express the plan (%s); --framework %s plans only what it can "
              "express", t, t, runs, t);
  return FALSE;
}

/* What the restriction to the target's shapes costs, in words. */
static char *
restriction_words(const PlannerShapesPlan *sp)
{
  const PlannerPlan *p = sp->plan, *u = sp->unrestricted;
  if (!u->feasible)
    return g_strdup("no per-layer plan fits either");
  if (!p->feasible)
    return g_strdup_printf("none of its plans fits, the per-layer plan does (%.2f ms)", u->result->step_ms);
  double extra = p->result->step_ms - u->result->step_ms;
  if (fabs(extra) <= 1e-9 * u->result->step_ms) /* the same plan, the two runs' rounding apart */
    extra = 0;
  /* The per-layer search is exact for offsim's own schedules only: for a
   * framework's it is a local search, which a shape can beat. */
  return g_strdup_printf("%+.2f ms (%+.2f %%) against the per-layer plan with its schedule (%.2f ms%s)", extra,
                         u->result->step_ms > 0 ? extra / u->result->step_ms * 100 : 0, u->result->step_ms,
                         extra < 0 ? ", a local search's: it missed this plan" : "");
}

/* --emit: the configuration on stdout, the plan and the restriction's cost
 * in its comments and on stderr, with what the configuration leaves to the
 * user's code. */
static char *
emit_text(const SimScenario *s, const PlannerPlan *p, PlannerTarget target, const PlannerShape *shape,
          const char *restriction, guint64 budget)
{
  g_autofree char *b = sim_units_format_size(budget);
  g_autofree char *peak = sim_units_format_size(p->result->peak_reserved_bytes);
  g_autofree char *runs = planner_shapes_describe((const SimAction *)p->policy->actions->data,
                                                  p->policy->actions->len);
  g_autofree char *comment = g_strdup_printf("offsim plan for %s under %s: %s\nstep %.2f ms (resident %.2f ms), "
                                             "%s reserved at most\n%s%s",
                                             s->name, b, runs, p->result->step_ms, p->resident->step_ms, peak,
                                             restriction ? "restricted to what this configuration expresses: " : "",
                                             restriction ? restriction : "");
  g_printerr("offsim plan --emit %s: %s\n%s\n", planner_target_names[target], cli_emit_note(target), comment);
  return cli_emit_config(target, shape, p->policy->actions->len, comment);
}

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
  if (!cli_report_parse_format(o->format, PLAN_FORMATS, &format, error))
    return -1;
  PlanRequest req;
  if (!parse_framework(o, &req, error))
    return -1;
  if (req.emit && o->format) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--emit: prints the framework's configuration; not with --format");
    return -1;
  }
  g_autoptr(SimScenario) s = cli_load_scenario(path, error);
  if (s == NULL)
    return -1;
  /* No plan whose peak the device cannot hold fits, whatever the budget. */
  guint64 capacity = cli_capacity(budget, s);
  g_autoptr(PlannerShapesPlan) shaped = NULL;
  g_autoptr(PlannerPlan) own = NULL;
  if (req.restricted && (shaped = planner_shapes_plan(s, capacity, req.target, error)) == NULL)
    return -1;
  if (!req.restricted && (own = planner_plan_framework(s, capacity, req.schedule, error)) == NULL)
    return -1;
  const PlannerPlan *p = shaped ? shaped->plan : own;
  g_autofree char *restriction = shaped ? restriction_words(shaped) : NULL;
  g_autofree char *text = NULL;
  if (req.emit) {
    PlannerShape shape = shaped ? shaped->shape : (PlannerShape){ 0 };
    if (!p->feasible) { /* exit 4 with its line, printed by the caller */
      g_autofree char *min = sim_units_format_size(p->min_budget);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--emit %s: no plan fits the budget; the smallest peak found is %s",
                  planner_target_names[req.target], min);
      return EXIT_INFEASIBLE;
    }
    if (!shaped && !match_shape(p, req.target, &shape, error))
      return -1;
    text = emit_text(s, p, req.target, &shape, restriction, capacity);
  } else if (format == CLI_FORMAT_JSON) {
    g_autoptr(JsonNode) node = cli_plan_json(p, p->result, capacity);
    if (shaped) {
      JsonObject *root = json_node_get_object(node);
      g_autoptr(JsonObject) f = json_object_new();
      json_object_set_string_member(f, "name", planner_target_names[req.target]);
      g_autofree char *runs = planner_shapes_describe((const SimAction *)p->policy->actions->data,
                                                      p->policy->actions->len);
      json_object_set_string_member(f, "shape", runs);
      json_object_set_boolean_member(f, "unrestricted_feasible", shaped->unrestricted->feasible);
      json_object_set_double_member(f, "unrestricted_step_ms", shaped->unrestricted->result->step_ms);
      json_object_set_double_member(f, "restriction_ms", p->result->step_ms - shaped->unrestricted->result->step_ms);
      json_object_set_object_member(root, "framework", json_object_ref(f));
    }
    text = cli_report_json_to_string(node);
  } else {
    text = plan_table(s, p, capacity, budget, shaped ? planner_target_names[req.target] : NULL, restriction);
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
  /* The names come from the catalogs (planner/shapes.h, sim/model/policy.h). */
  g_autofree char *targets = g_strjoinv(", ", (char **)planner_target_names);
  g_autofree char *hooks = hook_names(FALSE, "'s"), *hook_list = hook_names(FALSE, "");
  g_autofree char *framework_help = g_strdup_printf(
    "Plan only what this framework's configuration expresses, with its copy schedule (%s), or any per-layer plan "
    "with %s", targets, hooks);
  g_autofree char *emit_help =
    g_strdup_printf("Print the plan as this framework's configuration (the names above but %s)", hook_list);
  g_autofree char *format_help = cli_report_format_help(PLAN_FORMATS);
  const GOptionEntry entries[] = {
    { "budget", 'b', 0, G_OPTION_ARG_STRING, &o.budget, "Device memory budget, a size such as 45GiB (required)",
      "SIZE" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &o.format, format_help, "FORMAT" },
    { "framework", 0, 0, G_OPTION_ARG_STRING, &o.framework, framework_help, "NAME" },
    { "emit", 0, 0, G_OPTION_ARG_STRING, &o.emit, emit_help, "NAME" },
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
    else if (error) /* --emit and no plan fits: its line, exit 4 */
      cli_fail(error);
  }
  g_free(o.budget);
  g_free(o.format);
  g_free(o.framework);
  g_free(o.emit);
  return status;
}
