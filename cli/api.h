/* cli/api.h — the `offsim` command as a library (liboffsim.so), for the
 * Python package (python/offsim) and any other process that embeds it.
 *
 * cli_api_main runs exactly what `offsim ARGV[1] ARGV[2]...` runs, through
 * the same code (cli/command.c), but the report comes to `write` instead of
 * descriptor 1, a scenario named "-" reads `input` instead of stdin, and a
 * failure comes back in *message (the line the executable prints after
 * "offsim: ") instead of on stderr.  The return value is the executable's
 * exit status: 0 ok, 1 internal, 2 bad input, 3 a missing tool, 4 no plan
 * fits.  So a caller gets the CLI's bytes, message and exit class by
 * construction.  What goes to files (--out, --plot) and progress lines on
 * stderr are as the executable's.
 *
 * Plain C types only, so that cffi can declare it.  `write` is called with
 * the report's bytes in order, as the command writes them (a sweep's rows
 * as they are finished); returning 0 is a failed write (the command then
 * fails as on a full stdout).  NULL `write`: descriptor 1.
 *
 * One call at a time per process (stdout and the failure line are process
 * state); the Python package holds a lock.  The caller's locale is left as
 * it is: every number offsim writes is locale-independent.
 *
 * Ownership: *message (NULL on success) is the caller's: cli_api_free.
 */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*CliApiWrite)(const char *text, size_t length, void *data);

int cli_api_main(int argc, const char *const *argv, const char *input, CliApiWrite write, void *data,
                 char **message);

/* Frees what cli_api_main returned in *message. */
void cli_api_free(void *pointer);

#ifdef __cplusplus
}
#endif
