#include "output.h"

#include "error.h"

#include <string.h>

void
sim_output_csv_field(GString *out, const char *text)
{
  if (strpbrk(text, ",\"\r\n") == NULL) {
    g_string_append(out, text);
    return;
  }
  g_autoptr(GString) quoted = g_string_new(text);
  g_string_replace(quoted, "\"", "\"\"", 0);
  g_string_append_printf(out, "\"%s\"", quoted->str);
}

void
sim_output_number(GString *out, double value)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append(out, g_ascii_formatd(buf, sizeof buf, "%.15g", value == 0 ? 0.0 : value));
}

gboolean
sim_output_save(const char *option, const char *path, const char *text, gsize length, GError **error)
{
  g_autoptr(GError) local = NULL;
  if (!g_file_set_contents(path, text, (gssize)length, &local)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s %s: %s", option, path, local->message);
    return FALSE;
  }
  return TRUE;
}
