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

/* Messages echo what users wrote, and a terminal must show it as text:
 * both helpers below write each control character (C0, DEL, C1) as an
 * escape (\n, \t, \r, \x1b, \u009b) and each byte that is not UTF-8 as
 * \xNN; other UTF-8 is kept.  Lengths count characters of `text`.
 *
 * sim_error_quote: one user value (a key, a group name, a value) as it goes
 * into a message: escaped, and cut after SIM_ERROR_QUOTE_MAX characters
 * with "…", so that a 5 MB key makes a short line.  Messages quote every
 * echoed user value with it where they are made.
 *
 * sim_error_printable: a whole message as it is printed (cli_fail):
 * escaped, and past SIM_ERROR_MESSAGE_MAX characters its middle replaced
 * with "…" (the start names the place, the end says what was wrong): the
 * backstop for text nobody quoted, such as a line GKeyFile echoes.
 *
 * Both return a new string (g_free). */
#define SIM_ERROR_QUOTE_MAX 100
#define SIM_ERROR_MESSAGE_MAX 1000
char *sim_error_quote(const char *text);
char *sim_error_printable(const char *message);

/* `message` with each verbatim copy of `value` in it written as
 * sim_error_quote(value): for a caller that wraps a parser's message
 * ("got '...'") and knows the user's value the parser echoed. */
char *sim_error_quote_in(const char *message, const char *value);

/* Catalogs say their names in messages and --help as "a, b or c": name `i`
 * of `n` appended to `out` after the separator its place takes ("", ", ",
 * or `conjunction` between spaces: "or", "and"); sim_error_choices the
 * whole list of a NULL-terminated array, with "or" (a new string, g_free). */
void sim_error_append_choice(GString *out, const char *name, guint i, guint n, const char *conjunction);
char *sim_error_choices(const char *const *names);

G_END_DECLS
