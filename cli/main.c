/* offsim — activation-offload scheduling simulator: the command-line entry. */
#include "cli.h"

#include "error.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  const char *name;
  int (*main)(int argc, char **argv);
  const char *summary;
} Command;

static const Command commands[] = {
  { "run", cli_run_main, "simulate one policy: step time, exposed transfer, peak memory" },
  { "compare", cli_compare_main, "simulate every policy of a scenario side by side" },
  { "plan", cli_plan_main, "choose keep, offload or recompute per layer under a memory budget" },
  { "model", cli_model_main, "print a scenario for a HuggingFace config.json" },
  { "show", cli_show_main, "print a scenario merged, every default filled in, each value's file" },
  { "sweep", cli_sweep_main, "every combination of scenario values, in parallel, as CSV" },
  { "bench", cli_bench_main, "performance figures: engine events/s, step, plan and sweep times" },
  { "budget", cli_budget_main, "the activation budget ledger: which chunks to offload to fit" },
};

static void
usage(FILE *to)
{
  fprintf(to, "usage: offsim COMMAND [SCENARIO] [OPTIONS]\n\ncommands:\n");
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++)
    fprintf(to, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(to, "\nWithout SCENARIO, run and compare use the embedded default scenario.\n"
              "`offsim COMMAND --help` shows a command's options.\n");
}

/* One pass over every message as it is printed: control characters from a
 * file or an argument are escaped, not sent to the terminal, and an
 * over-long message nobody cut where it was made is shortened
 * (sim_error_printable).  The bytes are written as they are, UTF-8, not
 * converted to the locale's character set. */
int
cli_fail(GError *error)
{
  g_autofree char *line = sim_error_printable(error->message);
  fprintf(stderr, "offsim: %s\n", line);
  int code = sim_error_exit_code(error);
  g_error_free(error);
  return code;
}

int
main(int argc, char **argv)
{
  /* Numbers in every output use '.', and messages (GLib's too) are the same
   * untranslated English, whatever the user's locale.  Text is UTF-8, as
   * every input is: with a C LC_CTYPE GLib would print each non-ASCII
   * character of a message (a file name, "2μs", its own quotes) as '?'. */
  setlocale(LC_ALL, "C");
  if (setlocale(LC_CTYPE, "C.UTF-8") == NULL && setlocale(LC_CTYPE, "C.utf8") == NULL) {
    /* No C.UTF-8 (an old C library): the user's own, if it is UTF-8. */
    const char *user = setlocale(LC_CTYPE, "");
    if (user == NULL || !g_get_charset(NULL))
      setlocale(LC_CTYPE, "C");
  }
  cli_signals_install();
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  GError *error = NULL;
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return cli_print("", &error) ? 0 : cli_fail(error); /* flushes it: a full stdout is exit 2 */
  }
  if (strcmp(argv[1], "--version") == 0)
    return cli_print("offsim " OFFSIM_VERSION "\n", &error) ? 0 : cli_fail(error);
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++)
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].main(argc - 1, argv + 1);
  /* Bad input is one line, like every other. */
  g_autoptr(GString) names = g_string_new(NULL);
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++)
    g_string_append_printf(names, "%s%s", i ? ", " : "", commands[i].name);
  g_autofree char *command = sim_error_quote(argv[1]);
  g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "unknown command '%s' (expected one of %s; see offsim --help)",
              command, names->str);
  return cli_fail(error);
}
