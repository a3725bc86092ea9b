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

gboolean
cli_parse_options(GOptionContext *context, const char *command, int *argc, char ***argv, GError **error)
{
  GError *local = NULL;
  if (g_option_context_parse(context, argc, argv, &local))
    return TRUE;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s", command, local->message);
  g_error_free(local);
  return FALSE;
}

int
cli_fail(GError *error)
{
  g_printerr("offsim: %s\n", error->message);
  int code = sim_error_exit_code(error);
  g_error_free(error);
  return code;
}

int
main(int argc, char **argv)
{
  /* Numbers in every output use '.', whatever the user's locale. */
  setlocale(LC_ALL, "C");
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("offsim %s\n", OFFSIM_VERSION);
    return 0;
  }
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++)
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].main(argc - 1, argv + 1);
  fprintf(stderr, "offsim: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
