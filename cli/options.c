/* cli/options.c — option values that several commands take, parsed once, so
 * that `run`, `compare`, `plan` and `budget` read and refuse them alike. */
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
