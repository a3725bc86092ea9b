/* cli/command.c — `offsim COMMAND ...`: the commands by name, and how a
 * failure is reported.  The executable (cli/main.c) and the library
 * (cli/api.c, which the Python package calls) both enter here, so that a
 * command runs one code path whoever called it. */
#include "cli/cli.h"

#include "base/error.h"

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
  { "check", cli_check_main, "a torch.profiler trace's step, kernel and copy figures beside the prediction" },
};

/* The command list, for --help (stdout) and a missing command (stderr). */
static char *
usage(void)
{
  GString *out = g_string_new("usage: offsim COMMAND [SCENARIO] [OPTIONS]\n\ncommands:\n");
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++)
    g_string_append_printf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  g_string_append(out, "\nWithout SCENARIO, run and compare use the embedded default scenario.\n"
                       "`offsim COMMAND --help` shows a command's options.\n");
  return g_string_free(out, FALSE);
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
  if (cli_embed.failures) {
    /* Embedded: the caller raises it (the first: a command fails once). */
    if (cli_embed.failures->len == 0)
      g_string_append(cli_embed.failures, line);
  } else {
    fprintf(stderr, "offsim: %s\n", line);
  }
  int code = sim_error_exit_code(error);
  g_error_free(error);
  return code;
}

int
cli_command_main(int argc, char **argv)
{
  g_autofree char *text = usage();
  if (argc < 2) {
    fputs(text, stderr);
    return 2;
  }
  GError *error = NULL;
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0)
    return cli_print(text, &error) ? 0 : cli_fail(error); /* a full stdout is exit 2 */
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
