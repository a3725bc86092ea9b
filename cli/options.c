/* cli/options.c — what several commands share about their options: the
 * --budget value, parsed once so that `run`, `compare`, `plan` and `budget`
 * read and refuse it alike, and the option names that plots/ is given for
 * its messages (the library knows none). */
#include "cli.h"

#include "error.h"
#include "scenario.h"
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

guint64
cli_capacity(guint64 budget, const SimScenario *scenario)
{
  guint64 memory = scenario->machine.device.memory;
  return budget && budget < memory ? budget : memory;
}

/* sweep shows the same advice although it has no --plot-script: the
 * message is kept as users have seen it. */
const PlotsRenderNames cli_plot_names = {
  .dir_option = "--plot",
  .without_gnuplot = "--plot-script FILE writes the script to render elsewhere",
};
