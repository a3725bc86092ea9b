/* cli/options.c — what several commands share about their options: the
 * --budget value, parsed once so that `run`, `compare`, `plan` and `budget`
 * read and refuse it alike, the capacity it gives, the checks of output
 * paths made before anything runs, the option names that plots/ is given
 * for its messages (the library knows none), and the end of every --help
 * (units and exit statuses). */
#include "cli.h"

#include "error.h"
#include "scenario.h"
#include "units.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <glib/gstdio.h>
#include <unistd.h>

gboolean
cli_parse_budget(const char *text, const char *zero_reason, guint64 *bytes, GError **error)
{
  guint64 v = 0;
  GError *cause = NULL;
  if (!sim_units_parse_size(text, &v, &cause)) {
    g_autofree char *why = sim_error_quote_in(cause->message, text);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--budget: %s", why);
    g_error_free(cause);
    return FALSE;
  }
  if (v == 0) {
    g_autofree char *quoted = sim_error_quote(text);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--budget: %s, got '%s'",
                zero_reason ? zero_reason : "expected a positive size", quoted);
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

gboolean
cli_print(const char *text, GError **error)
{
  errno = 0;
  if (fputs(text, stdout) >= 0 && fflush(stdout) == 0 && !ferror(stdout))
    return TRUE;
  int e = errno ? errno : EIO;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "stdout: cannot write the report: %s", g_strerror(e));
  return FALSE;
}

/* What keeps `dir` from holding an output named `path`, or NULL. */
static char *
dir_problem(const char *path, const char *dir)
{
  if (!g_file_test(dir, G_FILE_TEST_EXISTS))
    return g_strdup_printf("the directory '%s' does not exist", dir);
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR))
    return strcmp(dir, path) == 0 ? g_strdup("not a directory") : g_strdup_printf("'%s' is not a directory", dir);
  if (g_access(dir, W_OK | X_OK) != 0) {
    int e = errno;
    return g_strdup_printf("cannot write into '%s': %s", dir, g_strerror(e));
  }
  return NULL;
}

static char *
file_problem(const char *path)
{
  if (*path == '\0')
    return g_strdup("expected a file name, got an empty path");
  if (g_str_has_suffix(path, G_DIR_SEPARATOR_S) || g_file_test(path, G_FILE_TEST_IS_DIR))
    return g_strdup("names a directory, expected a file name");
  /* The file is written beside itself and renamed over: a device or a
   * FIFO would be replaced, not written to. */
  if (g_file_test(path, G_FILE_TEST_EXISTS) && !g_file_test(path, G_FILE_TEST_IS_REGULAR))
    return g_strdup("exists and is not a regular file (it would be replaced)");
  g_autofree char *dir = g_path_get_dirname(path);
  return dir_problem(path, dir);
}

static char *
dir_output_problem(const char *path)
{
  if (*path == '\0')
    return g_strdup("expected a directory, got an empty path");
  /* The nearest existing ancestor: the directory itself, or where it will be made. */
  g_autofree char *dir = g_strdup(path);
  while (!g_file_test(dir, G_FILE_TEST_EXISTS)) {
    char *parent = g_path_get_dirname(dir);
    gboolean top = strcmp(parent, dir) == 0;
    g_free(dir);
    dir = parent;
    if (top)
      break;
  }
  return dir_problem(path, dir);
}

/* `problem` (taken) as the one line "OPTION 'PATH': problem". */
static gboolean
output_ok(const char *option, const char *path, char *problem, GError **error)
{
  if (problem == NULL)
    return TRUE;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s '%s': %s", option, path, problem);
  g_free(problem);
  return FALSE;
}

gboolean
cli_check_output_file(const char *option, const char *path, GError **error)
{
  return path == NULL || output_ok(option, path, file_problem(path), error);
}

gboolean
cli_check_output_dir(const char *option, const char *path, GError **error)
{
  return path == NULL || output_ok(option, path, dir_output_problem(path), error);
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
    "  sizes  B, KB, MB, GB, TB, PB, EB (powers of 1000), KiB, MiB, GiB, TiB, PiB, EiB (powers of 1024):\n"
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
