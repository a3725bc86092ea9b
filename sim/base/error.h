/* sim/base/error.h — the one error domain of offsim.
 *
 * Every function that can fail on user input takes `GError **error` last and
 * returns FALSE/NULL.  The code says what the command line does with it:
 * SIM_ERROR_INPUT is bad input (exit 2), SIM_ERROR_TOOL a missing external
 * tool (exit 3), SIM_ERROR_INTERNAL a bug or a schedule the engine could not
 * finish (exit 1).  Messages are one line: file, group, key, what was expected.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define SIM_ERROR (sim_error_quark())

typedef enum {
  SIM_ERROR_INPUT,    /* malformed scenario, option or data file: exit 2 */
  SIM_ERROR_TOOL,     /* a missing external program such as gnuplot: exit 3 */
  SIM_ERROR_INTERNAL, /* a stuck schedule or a broken invariant: exit 1 */
} SimErrorCode;

GQuark sim_error_quark(void);

/* The process exit status for an error of this domain (1 for foreign domains). */
int sim_error_exit_code(const GError *error);

G_END_DECLS
