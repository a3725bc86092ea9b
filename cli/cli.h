/* cli/cli.h — the subcommands of `offsim` and what they share.
 *
 * Each takes the arguments after its name and returns the process exit
 * status: 0 ok, 1 internal error, 2 bad input, 3 missing or failing external tool, 4
 * (plan only) no plan fits.  Errors are printed once, by cli_fail, as
 * "offsim: message"; stdout carries only the report.  plots/ knows no
 * option names: its messages get them from here (cli_plot_names and the
 * `option` arguments).
 *
 * Ownership: the helpers below append to the caller's GString or fill the
 * caller's variables; cli_fail takes the error and frees it.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "planner/plan.h"
#include "planner/shapes.h"
#include "plots/gnuplot.h"

G_BEGIN_DECLS

int cli_run_main(int argc, char **argv);     /* offsim run */
int cli_compare_main(int argc, char **argv); /* offsim compare */
int cli_budget_main(int argc, char **argv);  /* offsim budget */
int cli_model_main(int argc, char **argv);   /* offsim model */
int cli_plan_main(int argc, char **argv);    /* offsim plan */
int cli_bench_main(int argc, char **argv);   /* offsim bench */
int cli_sweep_main(int argc, char **argv);   /* offsim sweep */
int cli_show_main(int argc, char **argv);    /* offsim show */
int cli_check_main(int argc, char **argv);   /* offsim check */
/* `offsim ARGS...`: the command argv[1] names (cli/command.c). */
int cli_command_main(int argc, char **argv);

/* The per-layer table of a plan: action, bytes saved, exposed time if the
 * layer were offloaded, recompute time (for `plan` and `compare --budget`). */
void cli_plan_format_layers(GString *out, const PlannerPlan *plan);
/* A pipeline's plan per stage: its layers, peaks and actions, runs of
 * layers compressed ("L0-L5 offload, L6-L7 keep"), then a blank line;
 * nothing for a single-GPU plan. */
void cli_plan_format_stages(GString *out, const PlannerPlan *plan);
/* How the plan's lower bound was found, in words (static). */
const char *cli_plan_bound_words(const PlannerPlan *plan);

/* `offsim plan --emit NAME` (cli/emit.c): the plan of `shape` over `n`
 * layers as the target's configuration, `comment` (lines) as comments
 * where the format has them, and the names' source.  New string. */
char *cli_emit_config(PlannerTarget target, const PlannerShape *shape, guint n, const char *comment);
/* What the configuration leaves to the user's code, for stderr (static). */
const char *cli_emit_note(PlannerTarget target);

/* `offsim plan --format json`'s object for a plan under `budget` (actions
 * and layers included), for `plan` and `compare --budget --format json`;
 * `result` is the plan's (plan->result, or the row compare took it into).
 * A new node (json_node_unref). */
JsonNode *cli_plan_json(const PlannerPlan *plan, const SimResult *result, guint64 budget);

/* Adds `entries` to the context as its main options and parses them
 * (cli/options.c).  TRUE: the command goes on.  FALSE: it ends with
 * *status, having printed what it had to: the help for --help, -h, -? or
 * --help-all (0; through cli_print, so that a stdout that cannot be written
 * is exit 2, where GLib's own --help would exit 0), or one line of bad
 * input (2) prefixed by the command's name: GLib's errors, and an option
 * that takes one value given twice (GLib would keep the last silently:
 * "--memory: given twice ('a', then 'b'); give it once"). */
gboolean cli_parse_options(GOptionContext *context, const char *command, const GOptionEntry *entries, int *argc,
                           char ***argv, int *status);

/* --budget SIZE (cli/options.c): a size with its unit (sim_units_parse_size),
 * more than 0 B, into `bytes`.  Errors are bad input prefixed "--budget: ";
 * 0 and a negative size are refused as "--budget: ZERO_REASON, got 'TEXT'", where a NULL
 * `zero_reason` reads "expected a positive size" (`offsim budget` keeps the
 * ledger's own wording). */
gboolean cli_parse_budget(const char *text, const char *zero_reason, guint64 *bytes, GError **error);

/* The capacity `fits` (and the planner) check a peak against: the budget
 * (0: none), but never more than the device's memory, so that no peak the
 * device cannot hold is called a fit. */
guint64 cli_capacity(guint64 budget, const SimScenario *scenario);

/* Writes `text` to stdout and flushes it.  A stdout that cannot be written
 * (a full disk, a closed descriptor) is like an output path that cannot:
 * bad input, exit 2, "stdout: cannot write the report: REASON". */
gboolean cli_print(const char *text, GError **error);

/* What a process that embeds the commands (cli/api.c) gives them in place
 * of its own stdin and stderr; zero (both NULL) in the executable.  `input`
 * is the text a scenario "-" reads; `failures`, when set, takes cli_fail's
 * line instead of stderr.  Stdout is sim_output_redirect_stdout's. */
typedef struct {
  const char *input;
  GString *failures;
} CliEmbed;
extern CliEmbed cli_embed;

/* The scenario a command names: a path, or "-" for the text on stdin (or
 * cli_embed.input), named CLI_STDIN_ORIGIN in messages, its includes
 * resolved against the current directory.  The configuration alone for
 * the commands that change it first (sweep, show). */
#define CLI_STDIN_ORIGIN "(stdin)"
SimConfig *cli_load_config(const char *path, GError **error);
SimScenario *cli_load_scenario(const char *path, GError **error);

/* Output paths, checked before anything is simulated, so that a typo in
 * one costs no run (cli/options.c).  A FILE output must be a non-empty
 * path that is not a directory (nor ends in '/'), nor an existing device
 * or FIFO (it is replaced by a rename), in an existing directory this
 * process may write.  A DIR output (--plot) must be a directory, or a path
 * that can be created: its nearest existing ancestor is a directory this
 * process may write; nothing is created here.  Errors are bad input, one
 * line "OPTION 'PATH': what is wrong".  NULL `path`: nothing asked, TRUE. */
gboolean cli_check_output_file(const char *option, const char *path, GError **error);
gboolean cli_check_output_dir(const char *option, const char *path, GError **error);

/* One command's FILE outputs, `n` options and their paths (NULL: not
 * asked for): two that name one file (the same path written two ways, or
 * two links to one file) would leave only the output written last, so
 * they are bad input, "--timeline 'x': the same file as --trace 'x'; give
 * each output its own file".  Call after cli_check_output_file, whose
 * checks it relies on (each directory exists). */
gboolean cli_check_distinct_outputs(guint n, const char *const options[], const char *const paths[], GError **error);

/* What `offsim` calls the plot directory in plots/' messages, and what it
 * offers when gnuplot is missing (cli/options.c). */
extern const PlotsRenderNames cli_plot_names;

/* The end of a command's --help: the units of sizes, rates and times, and
 * the exit statuses it can return (0, 1 and 2, and the CliExits given). */
typedef enum {
  CLI_EXIT_TOOL = 1 << 0,    /* 3: gnuplot missing or failing */
  CLI_EXIT_NO_PLAN = 1 << 1, /* 4: no plan fits */
} CliExits;
void cli_help_describe(GOptionContext *context, guint exits);

/* Prints the error and returns its exit status. */
int cli_fail(GError *error);

/* Installs offsim's handlers for SIGINT, SIGTERM and SIGHUP (cli/signals.c):
 * registered temporaries removed, gnuplot killed, then the process ends as
 * the signal would have ended it. */
void cli_signals_install(void);

G_END_DECLS
