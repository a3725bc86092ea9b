/* cli/api.c — cli_api_main: a command run in-process, its stdout, stdin and
 * failure line given to the caller (cli/api.h). */
#include "cli/api.h"

#include "base/output.h"
#include "cli/cli.h"

#include <errno.h>

typedef struct {
  CliApiWrite write;
  void *data;
} Sink;

static gboolean
sink_write(const char *text, gsize length, gpointer data)
{
  Sink *sink = data;
  if (sink->write(text, length, sink->data))
    return TRUE;
  errno = EPIPE; /* the caller refused the bytes: like a reader gone away */
  return FALSE;
}

int
cli_api_main(int argc, const char *const *argv, const char *input, CliApiWrite write, void *data, char **message)
{
  g_return_val_if_fail(argc >= 1 && argv != NULL && message != NULL, 1);
  /* The commands take argv as main's, which GOption reorders in place:
   * they get a copy of the caller's array. */
  g_autofree char **args = g_new0(char *, argc + 1);
  for (int i = 0; i < argc; i++)
    args[i] = (char *)argv[i];
  g_autoptr(GString) failures = g_string_new(NULL);
  Sink sink = { write, data };
  if (write)
    sim_output_redirect_stdout(sink_write, &sink);
  cli_embed = (CliEmbed){ .input = input, .failures = failures };
  int status = cli_command_main(argc, args);
  cli_embed = (CliEmbed){ 0 };
  sim_output_redirect_stdout(NULL, NULL);
  /* The usage line of a missing command goes to stderr without a failure
   * line; every other nonzero status comes with one. */
  *message = status != 0 ? g_strdup(failures->len ? failures->str : "expected a command (see offsim --help)") : NULL;
  return status;
}

void
cli_api_free(void *pointer)
{
  g_free(pointer);
}
