/* sim/base/output.h — what every writer of results shares: CSV fields, numbers
 * and atomic saves (the report, the sweep, the plots' exports).
 *
 * CSV follows RFC 4180 (a field holding a comma, a quote or a line break is
 * quoted, quotes doubled), numbers are locale-independent with up to 15
 * significant digits (the same bytes on every machine), and a file is
 * written whole or not at all: under a hidden temporary name beside it,
 * then renamed.  A path that cannot be written is SIM_ERROR_INPUT (exit 2),
 * prefixed with the option that named it.
 *
 * Temporaries are registered while they exist, so that a signal handler
 * can remove them (sim_output_temp_cleanup).  This library installs no
 * handler: which signals end the process, and how, is the program's policy
 * (cli/signals.c: SIGINT, SIGTERM and SIGHUP clean up and end offsim as
 * the signal would have).  Registration publishes each name with an atomic
 * store and takes no lock the handler needs.
 *
 * Ownership: a temporary's name (`*temp`) is the caller's from
 * sim_output_temp_open until sim_output_temp_forget or _discard frees it.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

void sim_output_csv_field(GString *out, const char *text);

/* "%.15g", '.' whatever the locale, no "-0". */
void sim_output_number(GString *out, double value);

/* Writes `text` to `path` atomically; `option` ("--trace") prefixes errors. */
gboolean sim_output_save(const char *option, const char *path, const char *text, gsize length, GError **error);

/* A file written piece by piece and still atomic: the pieces go (buffered)
 * to a registered temporary beside `path`, renamed into place by _commit;
 * _abort, a failed write or a failed commit removes it, and so does a
 * signal (above).  A NULL `path` is stdout, written as the pieces come
 * (nothing to rename; a failed write is "stdout: cannot write ...", and
 * _abort writes what it still holds: stdout cannot take back the rest).
 * _commit and _abort free the stream. */
typedef struct SimOutputStream SimOutputStream;

SimOutputStream *sim_output_stream_open(const char *option, const char *path, GError **error);
gboolean sim_output_stream_write(SimOutputStream *stream, const char *text, gsize length, GError **error);
gboolean sim_output_stream_commit(SimOutputStream *stream, GError **error);
void sim_output_stream_abort(SimOutputStream *stream);

/* Where "stdout" goes: a process that embeds the commands (cli/api.h, the
 * Python package) takes their report as bytes instead of from descriptor 1.
 * While a sink is set, everything written to stdout here (streams with a
 * NULL path, sim_output_stdout) goes to it, in order; FALSE from it is a
 * failed write (errno says why, EIO if unset).  NULL restores descriptor 1.
 * One sink per process: the caller serialises the commands it runs. */
typedef gboolean (*SimOutputSink)(const char *text, gsize length, gpointer data);
void sim_output_redirect_stdout(SimOutputSink sink, gpointer data);

/* Writes `text` to stdout (or the sink) now, stdio's buffer first; a failed
 * write is SIM_ERROR_INPUT "stdout: cannot write the report: REASON". */
gboolean sim_output_stdout(const char *text, gsize length, GError **error);

/* Creates DIR/.NAME.XXXXXX beside `path` (DIR/NAME) with `mode` (before the
 * umask), registered: returns its open descriptor and its name in `*temp`,
 * or -1 with errno set. */
int sim_output_temp_open(const char *path, int mode, char **temp);

/* Unregisters `temp` (renamed into place, or to be kept) and frees it. */
void sim_output_temp_forget(char *temp);

/* Removes the file `temp`, unregisters it and frees it. */
void sim_output_temp_discard(char *temp);

/* The process writing into registered temporaries (gnuplot), killed and
 * reaped by sim_output_temp_cleanup before it removes them; 0: none. */
void sim_output_temp_child(GPid pid);

/* Kills and reaps the registered child, then removes every registered
 * temporary.  Async-signal-safe (kill, waitpid, unlink and atomic loads;
 * errno kept): for a program's signal handler, before it ends the
 * process. */
void sim_output_temp_cleanup(void);

G_END_DECLS
