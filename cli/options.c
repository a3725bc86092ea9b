/* cli/options.c — what several commands share about their options: the
 * --budget value, parsed once so that `run`, `compare`, `plan` and `budget`
 * read and refuse it alike, the option names that plots/ is given for its
 * messages (the library knows none), and the end of every --help (units
 * and exit statuses). */
#include "cli.h"

#include "error.h"
#include "units.h"

gboolean
cli_parse_budget(const char *text, const char *zero_reason, guint64 *bytes, GError **error)
{
  guint64 v = 0;
  if (!sim_units_parse_size(text, &v, error)) {
    g_prefix_error(error, "--budget: ");
    return FALSE;
  }
  if (v == 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--budget: %s, got '%s'",
                zero_reason ? zero_reason : "expected a positive size", text);
    return FALSE;
  }
  *bytes = v;
  return TRUE;
}

/* sweep shows the same advice although it has no --plot-script: the
 * message is kept as users have seen it. */
const PlotsRenderNames cli_plot_names = {
  .dir_option = "--plot",
  .without_gnuplot = "--plot-script FILE writes the script to render elsewhere",
};

void
cli_help_describe(GOptionContext *context, guint exits)
{
  /* ASCII only: --help is printed in the C locale. */
  g_autoptr(GString) text = g_string_new(
    "Units, in scenario files and options alike:\n"
    "  sizes  B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024):\n"
    "         80GiB, 1.5MiB, 4096B\n"
    "  rates  a size unit per second: 55GB/s, 12.5GiB/s\n"
    "  times  s, ms, us (microseconds), ns: 8us, 2.5ms\n"
    "  The number is a plain decimal such as 1.5 (no exponent) and needs its unit;\n"
    "  only a bare 0 may go without.\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  internal error: a bug of offsim, named in the message\n"
    "  2  bad input: the scenario, a data file, an option or an output path\n");
  if (exits & CLI_EXIT_TOOL)
    g_string_append(text, "  3  gnuplot is missing or failed (--plot)\n");
  if (exits & CLI_EXIT_NO_PLAN)
    g_string_append(text, "  4  no plan fits the budget\n");
  g_option_context_set_description(context, text->str);
}
