/* offsim — activation-offload scheduling simulator: the command-line entry. */
#include "cli/cli.h"

#include <locale.h>

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
  return cli_command_main(argc, argv);
}
