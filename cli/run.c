/* cli/run.c — `offsim run` and `offsim compare`: load a scenario, evaluate
 * policies, print them.  The two differ only in which policies they take and
 * in the JSON shape, so they share one body. */
#include "cli.h"

#include "error.h"
#include "evaluate.h"
#include "report.h"
#include "units.h"

#include <stdio.h>

typedef struct {
  char *policy;
  char *format;
  char *budget;
} RunOptions;

static void
run_options_clear(RunOptions *o)
{
  g_free(o->policy);
  g_free(o->format);
  g_free(o->budget);
}

/* Everything after option parsing; errors come back in `error`. */
static gboolean
run_scenario(const char *path, const RunOptions *o, gboolean compare, GError **error)
{
  CliFormat format = CLI_FORMAT_TABLE;
  guint64 budget = 0;

  if (o->format && !cli_report_parse_format(o->format, &format, error))
    return FALSE;
  if (o->budget) {
    if (!sim_units_parse_size(o->budget, &budget, error)) {
      g_prefix_error(error, "--budget: ");
      return FALSE;
    }
    if (budget == 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--budget: expected a positive size, got '%s'", o->budget);
      return FALSE;
    }
  }
  g_autoptr(SimScenario) scenario = path ? sim_scenario_load_file(path, error) : sim_scenario_load_default(error);
  if (scenario == NULL)
    return FALSE;

  g_autoptr(GPtrArray) chosen = g_ptr_array_new();
  if (compare) {
    g_ptr_array_extend(chosen, scenario->policies, NULL, NULL);
  } else if (o->policy) {
    const SimPolicy *p = sim_scenario_policy(scenario, o->policy);
    if (p == NULL) {
      g_autoptr(GString) names = g_string_new(NULL);
      for (guint i = 0; i < scenario->policies->len; i++)
        g_string_append_printf(names, "%s%s", i ? ", " : "",
                               ((SimPolicy *)g_ptr_array_index(scenario->policies, i))->name);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--policy: no policy '%s' in %s (it has %s)", o->policy,
                  scenario->origin, names->str);
      return FALSE;
    }
    g_ptr_array_add(chosen, (gpointer)p);
  } else {
    g_ptr_array_add(chosen, g_ptr_array_index(scenario->policies, 0));
  }

  g_autoptr(SimEngine) engine = sim_engine_new();
  g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  PlannerEvalOptions eval = { .budget = budget };
  for (guint i = 0; i < chosen->len; i++) {
    SimResult *r = planner_evaluate(scenario, g_ptr_array_index(chosen, i), engine, &eval, error);
    if (r == NULL)
      return FALSE;
    g_ptr_array_add(results, r);
  }
  g_autofree char *text = cli_report_format(scenario, results, format, !compare);
  fputs(text, stdout);
  if (fflush(stdout) != 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "cannot write the output");
    return FALSE;
  }
  return TRUE;
}

static int
run_common(int argc, char **argv, gboolean compare)
{
  RunOptions o = { 0 };
  GError *error = NULL;
  const GOptionEntry run_entries[] = {
    { "policy", 'p', 0, G_OPTION_ARG_STRING, &o.policy, "Policy to run (default: the scenario's first)", "NAME" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &o.format, "Output: table (default), csv or json", "FORMAT" },
    { "budget", 'b', 0, G_OPTION_ARG_STRING, &o.budget, "Memory budget for `fits` (default: device memory)", "SIZE" },
    { NULL },
  };
  /* compare takes the same options but --policy. */
  const GOptionEntry *entries = compare ? run_entries + 1 : run_entries;
  g_set_prgname(compare ? "offsim compare" : "offsim run");
  g_autoptr(GOptionContext) ctx = g_option_context_new(compare ? "[SCENARIO]  - compare every policy"
                                                               : "[SCENARIO]  - simulate one policy");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_summary(ctx, "SCENARIO is an INI file; without it the embedded default runs.");

  int status = 0;
  if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
    g_prefix_error(&error, "%s: ", compare ? "compare" : "run");
    error->domain = SIM_ERROR;
    error->code = SIM_ERROR_INPUT;
    status = cli_fail(error);
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
