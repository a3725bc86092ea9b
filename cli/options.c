/* cli/options.c — what several commands share about their options: their
 * parsing (--help printed as any report is, an option given twice refused),
 * the --budget value, parsed once so that `run`, `compare`, `plan` and `budget`
 * read and refuse it alike, the capacity it gives, the checks of output
 * paths made before anything runs, the option names that plots/ is given
 * for its messages (the library knows none), and the end of every --help
 * (units and exit statuses). */
#include "cli/cli.h"

#include "base/error.h"
#include "base/output.h"
#include "base/units.h"
#include "input/scenario.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <glib/gstdio.h>
#include <unistd.h>

/* ---- parsing ------------------------------------------------------------ */

/* An option that takes one value (GLib keeps the last of several). */
static gboolean
takes_one_value(const GOptionEntry *e)
{
  switch (e->arg) {
  case G_OPTION_ARG_STRING:
  case G_OPTION_ARG_FILENAME:
  case G_OPTION_ARG_INT:
  case G_OPTION_ARG_INT64:
  case G_OPTION_ARG_DOUBLE:
    return TRUE;
  default:
    return FALSE;
  }
}

/* What a first pass over the arguments saw: every value of each option
 * (`values[i]` for entries[i]) and whether help was asked for. */
typedef struct {
  guint n;
  char ***values;
  gboolean *flags; /* where the options without a value go */
  gboolean help;
} Probe;

static void
probe_clear(Probe *p)
{
  for (guint i = 0; i < p->n; i++)
    g_strfreev(p->values[i]);
  g_free(p->values);
  g_free(p->flags);
}

/* The first pass: the same options, each collecting its values as text
 * (so GLib splits the arguments exactly as in the real parse: which word
 * is an option's value, -fjson, --format=csv), help as plain flags, other
 * words left alone.  Its only errors are GLib's own (a missing value). */
static gboolean
probe_options(const GOptionEntry *entries, int argc, char **argv, Probe *p, GError **error)
{
  p->n = 0;
  while (entries[p->n].long_name)
    p->n++;
  p->values = g_new0(char **, p->n);
  p->flags = g_new0(gboolean, p->n);
  g_autofree GOptionEntry *probe = g_new0(GOptionEntry, p->n + 3);
  for (guint i = 0; i < p->n; i++) {
    probe[i] = entries[i];
    gboolean flag = entries[i].arg == G_OPTION_ARG_NONE;
    probe[i].arg = flag ? G_OPTION_ARG_NONE : G_OPTION_ARG_FILENAME_ARRAY;
    probe[i].arg_data = flag ? (gpointer)&p->flags[i] : (gpointer)&p->values[i];
  }
  /* GLib's help options: --help and -h, --help-all and -?. */
  probe[p->n] = (GOptionEntry){ "help", 'h', 0, G_OPTION_ARG_NONE, &p->help, NULL, NULL };
  probe[p->n + 1] = (GOptionEntry){ "help-all", '?', 0, G_OPTION_ARG_NONE, &p->help, NULL, NULL };
  g_autoptr(GOptionContext) context = g_option_context_new(NULL);
  g_option_context_set_help_enabled(context, FALSE);
  g_option_context_set_ignore_unknown_options(context, TRUE);
  g_option_context_add_main_entries(context, probe, NULL);
  /* GLib removes what it parsed from the array, not the strings. */
  g_autofree char **copy = g_memdup2(argv, ((gsize)argc + 1) * sizeof *argv);
  return g_option_context_parse(context, &argc, &copy, error);
}

/* An option that takes one value, given more than once. */
static gboolean
check_given_once(const GOptionEntry *entries, const Probe *p, GError **error)
{
  for (guint i = 0; i < p->n; i++) {
    guint times = p->values[i] ? g_strv_length(p->values[i]) : 0;
    if (times < 2 || !takes_one_value(&entries[i]))
      continue;
    g_autofree char *first = sim_error_quote(p->values[i][0]);
    g_autofree char *last = sim_error_quote(p->values[i][times - 1]);
    g_autofree char *count = times == 2 ? g_strdup("twice") : g_strdup_printf("%u times", times);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--%s: given %s ('%s', then '%s'); give it once",
                entries[i].long_name, count, first, last);
    return FALSE;
  }
  return TRUE;
}

gboolean
cli_parse_options(GOptionContext *context, const char *command, const GOptionEntry *entries, int *argc, char ***argv,
                  int *status)
{
  g_option_context_add_main_entries(context, entries, NULL);
  Probe probe = { 0 };
  GError *error = NULL;
  gboolean ok = probe_options(entries, *argc, *argv, &probe, &error);
  if (ok && probe.help) {
    /* GLib would print it and exit 0 whatever became of it. */
    g_autofree char *help = g_option_context_get_help(context, TRUE, NULL);
    probe_clear(&probe);
    *status = cli_print(help, &error) ? 0 : cli_fail(error);
    return FALSE;
  }
  ok = ok && g_option_context_parse(context, argc, argv, &error) && check_given_once(entries, &probe, &error);
  probe_clear(&probe);
  if (ok)
    return TRUE;
  *status = cli_fail(g_error_new(SIM_ERROR, SIM_ERROR_INPUT, "%s: %s", command, error->message));
  g_error_free(error);
  return FALSE;
}

/* ---- values and paths ---------------------------------------------------- */

gboolean
cli_parse_budget(const char *text, const char *zero_reason, guint64 *bytes, GError **error)
{
  guint64 v = 0;
  g_autoptr(GError) cause = NULL;
  /* A negative size is refused as 0 is, with what is accepted: a size
   * parser's "non-negative" would promise 0. */
  gboolean negative = text[strspn(text, " \t")] == '-';
  if (!sim_units_parse_size(text, &v, &cause) && !negative) {
    g_autofree char *why = sim_error_quote_in(cause->message, text);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--budget: %s", why);
    return FALSE;
  }
  if (negative || v == 0) {
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
  return sim_output_stdout(text, strlen(text), error);
}

CliEmbed cli_embed;

SimConfig *
cli_load_config(const char *path, GError **error)
{
  if (strcmp(path, "-") != 0)
    return sim_config_load_file(path, error);
  g_autofree char *text = NULL;
  gsize length;
  if (cli_embed.input == NULL && !sim_config_read_input("/dev/stdin", "the scenario", &text, &length, error))
    return NULL;
  return sim_config_load_data(cli_embed.input ? cli_embed.input : text, CLI_STDIN_ORIGIN, NULL, error);
}

SimScenario *
cli_load_scenario(const char *path, GError **error)
{
  g_autoptr(SimConfig) c = cli_load_config(path, error);
  return c ? sim_scenario_from_config(c, error) : NULL;
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

/* `a` and `b` name one file: the same name in one directory, or one file
 * that exists under both. */
static gboolean
same_file(const char *a, const char *b)
{
  GStatBuf sa, sb;
  if (g_stat(a, &sa) == 0 && g_stat(b, &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  g_autofree char *name_a = g_path_get_basename(a), *name_b = g_path_get_basename(b);
  g_autofree char *dir_a = g_path_get_dirname(a), *dir_b = g_path_get_dirname(b);
  return strcmp(name_a, name_b) == 0 && g_stat(dir_a, &sa) == 0 && g_stat(dir_b, &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

gboolean
cli_check_distinct_outputs(guint n, const char *const options[], const char *const paths[], GError **error)
{
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < i; j++) {
      if (paths[i] == NULL || paths[j] == NULL || !same_file(paths[i], paths[j]))
        continue;
      g_autofree char *pi = sim_error_quote(paths[i]), *pj = sim_error_quote(paths[j]);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s '%s': the same file as %s '%s'; give each output its own file",
                  options[i], pi, options[j], pj);
      return FALSE;
    }
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
