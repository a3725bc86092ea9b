/* cli/cli.h — the subcommands of `offsim`.
 *
 * Each takes the arguments after its name and returns the process exit
 * status: 0 ok, 1 internal error, 2 bad input, 3 missing external tool.
 * Errors are printed once, here, as "offsim: message".
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

int cli_run_main(int argc, char **argv);     /* offsim run */
int cli_compare_main(int argc, char **argv); /* offsim compare */

/* Prints the error and returns its exit status. */
int cli_fail(GError *error);

G_END_DECLS
