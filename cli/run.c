/* cli/run.c — `offsim run` and `offsim compare`: load a scenario, evaluate
 * policies, print them, and write the pictures and exports asked for.  The
 * two differ only in which policies they take, in the JSON shape and in the
 * exports of one run (--trace, --timeline, --memory), so they share one body.
 * What goes to files is announced on stderr, so stdout stays the report. */
#include "cli/cli.h"

#include "base/error.h"
#include "base/units.h"
#include "cli/report.h"
#include "export/chrome_trace.h"
#include "export/memory_csv.h"
#include "export/timeline_csv.h"
#include "plots/figures.h"
#include "result/evaluate.h"

#include <stdio.h>

/* The formats `offsim run` prints. */
#define RUN_FORMATS (CLI_FORMATS_ALL)

typedef struct {
  char *policy;
  char *format;
  char *budget;
  char *plot;        /* --plot DIR */
  char *plot_script; /* --plot-script FILE */
  char *plot_format; /* --plot-format png|svg|both */
  char *trace;       /* run only: --trace FILE.json */
  char *timeline;    /* run only: --timeline FILE.csv */
  char *memory;      /* run only: --memory FILE.csv */
} RunOptions;

static void
run_options_clear(RunOptions *o)
{
  g_free(o->policy);
  g_free(o->format);
  g_free(o->budget);
  g_free(o->plot);
  g_free(o->plot_script);
  g_free(o->plot_format);
  g_free(o->trace);
  g_free(o->timeline);
  g_free(o->memory);
}

static gboolean
wants_detail(const RunOptions *o)
{
  return o->plot || o->plot_script || o->trace || o->timeline || o->memory;
}

/* The files of one run, then the pictures: a missing gnuplot (exit 3) must
 * not cost the user the exports that need none. */
static gboolean
write_outputs(const SimScenario *scenario, GPtrArray *results, const RunOptions *o, guint formats, GError **error)
{
  const SimResult *first = g_ptr_array_index(results, 0);
  if (o->trace && !export_chrome_trace_write(first, "--trace", o->trace, error))
    return FALSE;
  if (o->timeline && !export_timeline_csv_write(first, "--timeline", o->timeline, error))
    return FALSE;
  if (o->memory && !export_memory_csv_write(first, "--memory", o->memory, error))
    return FALSE;
  if (!o->plot && !o->plot_script)
    return TRUE;

  PlotsFiguresOptions figures = { .dir = o->plot, .script = o->plot_script, .formats = formats,
                                  .device_memory = scenario->machine.device.memory,
                                  .script_option = "--plot-script", .render = cli_plot_names };
  g_autofree char *summary = NULL;
  gboolean ok = plots_figures_write(results, &figures, &summary, error);
  /* The script goes first; only drawing it can lack gnuplot. */
  if (o->plot_script && (ok || g_error_matches(*error, SIM_ERROR, SIM_ERROR_TOOL)))
    g_printerr("plot script written to %s (render it with gnuplot)\n", o->plot_script);
  if (!ok)
    return FALSE;
  if (o->plot) {
    const char *ext = formats == PLOTS_FORMAT_PNG ? ".png" : formats == PLOTS_FORMAT_SVG ? ".svg" : ".png and .svg";
    g_printerr("plots written to %s%s: %s (%s)\n", o->plot, g_str_has_suffix(o->plot, "/") ? "" : "/", summary, ext);
  }
  return TRUE;
}

/* The options that are values, checked, in their units. */
typedef struct {
  CliFormat format;
  guint64 budget; /* 0: the device's memory (cli_capacity caps it there) */
  guint formats;  /* PlotsFormat bits */
} RunRequest;

/* Checked before the scenario is read, so that a typo costs no load, and
 * paths before anything runs. */
static gboolean
parse_request(const RunOptions *o, RunRequest *r, GError **error)
{
  *r = (RunRequest){ .format = CLI_FORMAT_TABLE, .formats = PLOTS_FORMAT_ALL };
  if (!cli_report_parse_format(o->format, RUN_FORMATS, &r->format, error))
    return FALSE;
  if (o->plot_format && !plots_gnuplot_parse_formats(o->plot_format, &r->formats, error)) {
    g_prefix_error(error, "--plot-format: ");
    return FALSE;
  }
  if (o->plot_format && !o->plot && !o->plot_script) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--plot-format: give --plot DIR or --plot-script FILE too");
    return FALSE;
  }
  if (o->budget && !cli_parse_budget(o->budget, NULL, &r->budget, error))
    return FALSE;
  /* Every output path too: a typo there must not cost the run first. */
  const char *const options[] = { "--trace", "--timeline", "--memory", "--plot-script" };
  const char *const paths[] = { o->trace, o->timeline, o->memory, o->plot_script };
  for (guint i = 0; i < G_N_ELEMENTS(options); i++)
    if (!cli_check_output_file(options[i], paths[i], error))
      return FALSE;
  return cli_check_distinct_outputs(G_N_ELEMENTS(options), options, paths, error) &&
         cli_check_output_dir("--plot", o->plot, error);
}

/* The policies to evaluate (borrowed from `scenario`): every one for
 * compare, else --policy or the scenario's first. */
static GPtrArray *
choose_policies(const SimScenario *scenario, const char *policy, gboolean compare, GError **error)
{
  g_autoptr(GPtrArray) chosen = g_ptr_array_new();
  if (compare) {
    g_ptr_array_extend(chosen, scenario->policies, NULL, NULL);
  } else if (policy) {
    const SimPolicy *p = sim_scenario_policy(scenario, policy);
    if (p == NULL) {
      g_autoptr(GString) names = g_string_new(NULL);
      for (guint i = 0; i < scenario->policies->len; i++) {
        g_autofree char *name = sim_error_quote(((SimPolicy *)g_ptr_array_index(scenario->policies, i))->name);
        g_string_append_printf(names, "%s%s", i ? ", " : "", name);
      }
      g_autofree char *quoted = sim_error_quote(policy);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--policy: no policy '%s' in %s (it has %s)", quoted,
                  scenario->origin, names->str);
      return NULL;
    }
    g_ptr_array_add(chosen, (gpointer)p);
  } else {
    g_ptr_array_add(chosen, g_ptr_array_index(scenario->policies, 0));
  }
  return g_steal_pointer(&chosen);
}

/* One SimResult per policy of `chosen`, in order. */
static GPtrArray *
evaluate_policies(const SimScenario *scenario, GPtrArray *chosen, const SimEvaluateOptions *eval, GError **error)
{
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  for (guint i = 0; i < chosen->len; i++) {
    SimResult *r = sim_evaluate(evaluator, scenario, g_ptr_array_index(chosen, i), eval, error);
    if (r == NULL)
      return NULL;
    g_ptr_array_add(results, r);
  }
  return g_steal_pointer(&results);
}

/* With a budget, compare also plans: the plan is one more row, "planned",
 * appended to `results` (the plan keeps the rest for the text below). */
static PlannerPlan *
add_plan_row(const SimScenario *scenario, guint64 budget, GPtrArray *results, GError **error)
{
  PlannerPlan *plan = planner_plan(scenario, budget, error);
  if (plan == NULL)
    return NULL;
  SimResult *row = g_steal_pointer(&plan->result);
  g_free(row->policy);
  row->policy = g_strdup("planned");
  g_ptr_array_add(results, row);
  return plan;
}

/* Under the table: the plan explained, its policy block and layer by
 * layer, or why none fits. */
static void
append_plan(GString *more, const PlannerPlan *plan)
{
  g_string_append_c(more, '\n');
  if (plan->feasible) {
    g_autofree char *block = planner_plan_format_policy(plan->policy);
    g_string_append_printf(more, "planned: %s: %s\nlower bound %.2f ms, gap %.2f %%, %s\n\n%s\n", plan->verdict,
                           plan->verdict_reason, plan->lower_bound_ms, plan->gap * 100, cli_plan_bound_words(plan), block);
  } else {
    g_autofree char *min = sim_units_format_size(plan->min_budget);
    g_string_append_printf(more, "planned: no plan fits the budget; the smallest peak a plan was found to reach is %s "
                                 "(the row shows that plan)\n\n", min);
  }
  cli_plan_format_stages(more, plan);
  cli_plan_format_layers(more, plan);
}

/* compare --budget --format json: the report's {"scenario", "results"},
 * then "plan", the object `offsim plan --format json` prints for it. */
static char *
compare_json(const SimScenario *scenario, GPtrArray *results, const PlannerPlan *plan, guint64 budget)
{
  g_autoptr(JsonArray) rows = json_array_new();
  for (guint i = 0; i < results->len; i++)
    json_array_add_element(rows, cli_report_result_json(g_ptr_array_index(results, i)));
  g_autoptr(JsonObject) root = json_object_new();
  json_object_set_string_member(root, "scenario", scenario->name);
  json_object_set_array_member(root, "results", json_array_ref(rows));
  /* The plan's result is the last row, "planned" (add_plan_row). */
  json_object_set_member(root, "plan", cli_plan_json(plan, g_ptr_array_index(results, results->len - 1), budget));
  g_autoptr(JsonNode) node = json_node_init_object(json_node_alloc(), root);
  return cli_report_json_to_string(node);
}

/* Everything after option parsing; errors come back in `error`. */
static gboolean
run_scenario(const char *path, const RunOptions *o, gboolean compare, GError **error)
{
  RunRequest req;
  if (!parse_request(o, &req, error))
    return FALSE;
  g_autoptr(SimScenario) scenario = path ? cli_load_scenario(path, error) : sim_scenario_load_default(error);
  if (scenario == NULL)
    return FALSE;
  g_autoptr(GPtrArray) chosen = choose_policies(scenario, o->policy, compare, error);
  if (chosen == NULL)
    return FALSE;
  /* A budget above the device's memory cannot make a larger peak fit. */
  guint64 capacity = cli_capacity(req.budget, scenario);
  SimEvaluateOptions eval = { .budget = capacity, .detail = wants_detail(o) };
  g_autoptr(GPtrArray) results = evaluate_policies(scenario, chosen, &eval, error);
  if (results == NULL)
    return FALSE;
  g_autoptr(PlannerPlan) plan = NULL;
  if (compare && req.budget && (plan = add_plan_row(scenario, capacity, results, error)) == NULL)
    return FALSE;

  g_autofree char *text = plan && req.format == CLI_FORMAT_JSON
                            ? compare_json(scenario, results, plan, capacity)
                            : cli_report_format(scenario, results, req.format, !compare);
  g_autoptr(GString) report = g_string_new(text);
  if (plan && req.format == CLI_FORMAT_TABLE)
    append_plan(report, plan);
  if (!cli_print(report->str, error))
    return FALSE;
  return write_outputs(scenario, results, o, req.formats, error);
}

static int
run_common(int argc, char **argv, gboolean compare)
{
  RunOptions o = { 0 };
  GError *error = NULL;
  /* run's own options, then those compare shares (compare takes the
   * common ones only, from RUN_ONLY_OPTIONS on). */
  enum { RUN_ONLY_OPTIONS = 4 };
  g_autofree char *format_help = cli_report_format_help(RUN_FORMATS);
  const GOptionEntry entries[] = {
    { "policy", 'p', 0, G_OPTION_ARG_STRING, &o.policy, "Policy to run (default: the scenario's first)", "NAME" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &o.trace, "Write a Chrome/Perfetto trace of the step to FILE.json", "FILE" },
    { "timeline", 0, 0, G_OPTION_ARG_FILENAME, &o.timeline, "Write every op's start and end to FILE.csv", "FILE" },
    { "memory", 0, 0, G_OPTION_ARG_FILENAME, &o.memory, "Write the device and host memory curve to FILE.csv", "FILE" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &o.format, format_help, "FORMAT" },
    { "budget", 'b', 0, G_OPTION_ARG_STRING, &o.budget, "Memory budget for `fits`, a size such as 45GiB (default: the "
      "device's memory); compare also plans for it", "SIZE" },
    { "plot", 0, 0, G_OPTION_ARG_FILENAME, &o.plot, "Draw timeline, memory (and comparison) charts into DIR", "DIR" },
    { "plot-script", 0, 0, G_OPTION_ARG_FILENAME, &o.plot_script,
      "Write the gnuplot script, data inline, to FILE (no gnuplot needed)", "FILE" },
    { "plot-format", 0, 0, G_OPTION_ARG_STRING, &o.plot_format, "Pictures as png, svg or both (default)", "FORMAT" },
    G_OPTION_ENTRY_NULL,
  };
  g_set_prgname(compare ? "offsim compare" : "offsim run");
  g_autoptr(GOptionContext) ctx = g_option_context_new(compare ? "[SCENARIO]  - compare every policy"
                                                               : "[SCENARIO]  - simulate one policy");
  g_option_context_set_summary(ctx, compare ? "SCENARIO is an INI file; without it the embedded default runs.\n"
                                              "With --budget the plan's verdict is offsim plan's (offsim plan --help)."
                                            : "SCENARIO is an INI file; without it the embedded default runs.");
  cli_help_describe(ctx, CLI_EXIT_TOOL);

  int status = 0;
  if (!cli_parse_options(ctx, compare ? "compare" : "run", compare ? entries + RUN_ONLY_OPTIONS : entries, &argc, &argv,
                         &status)) {
    /* --help, or an error: printed */
  } else if (argc > 2) {
    g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "expected at most one scenario file, got '%s' and '%s'",
                argv[1], argv[2]);
    status = cli_fail(error);
  } else if (!run_scenario(argc == 2 ? argv[1] : NULL, &o, compare, &error)) {
    status = cli_fail(error);
  }
  run_options_clear(&o);
  return status;
}

int
cli_run_main(int argc, char **argv)
{
  return run_common(argc, argv, FALSE);
}

int
cli_compare_main(int argc, char **argv)
{
  return run_common(argc, argv, TRUE);
}
