#include "base/error.h"

#include <string.h>

G_DEFINE_QUARK(offsim-error-quark, sim_error)

int
sim_error_exit_code(const GError *error)
{
  if (error == NULL || error->domain != SIM_ERROR)
    return 1;
  switch ((SimErrorCode)error->code) {
  case SIM_ERROR_INPUT:
    return 2;
  case SIM_ERROR_TOOL:
    return 3;
  case SIM_ERROR_INTERNAL:
  default:
    return 1;
  }
}

/* The character after the one at `p`; a byte that is not UTF-8 counts as one. */
static const char *
next_char(const char *p, const char *end)
{
  gunichar c = g_utf8_get_char_validated(p, (gssize)(end - p));
  return c == (gunichar)-1 || c == (gunichar)-2 ? p + 1 : g_utf8_next_char(p);
}

/* Appends the character at `p`, escaped if it is a control character or
 * not UTF-8; returns the next. */
static const char *
append_printable(GString *out, const char *p, const char *end)
{
  const char *next = next_char(p, end);
  gunichar c = next == p + 1 ? (guchar)*p : g_utf8_get_char(p);
  if (next == p + 1 && c >= 0x80)
    g_string_append_printf(out, "\\x%02x", c); /* not UTF-8 */
  else if (c == '\n')
    g_string_append(out, "\\n");
  else if (c == '\t')
    g_string_append(out, "\\t");
  else if (c == '\r')
    g_string_append(out, "\\r");
  else if (c < 0x20 || c == 0x7f)
    g_string_append_printf(out, "\\x%02x", c);
  else if (c >= 0x80 && c < 0xa0)
    g_string_append_printf(out, "\\u%04x", c);
  else
    g_string_append_len(out, p, (gssize)(next - p));
  return next;
}

/* Appends at most `chars` characters of [p, end) escaped; returns where it stopped. */
static const char *
append_escaped(GString *out, const char *p, const char *end, gsize chars)
{
  for (; p < end && chars > 0; chars--)
    p = append_printable(out, p, end);
  return p;
}

char *
sim_error_quote(const char *text)
{
  const char *end = text + strlen(text);
  GString *out = g_string_new(NULL);
  if (append_escaped(out, text, end, SIM_ERROR_QUOTE_MAX) < end)
    g_string_append(out, "…");
  return g_string_free(out, FALSE);
}

char *
sim_error_printable(const char *message)
{
  const char *end = message + strlen(message);
  gsize n = 0;
  for (const char *p = message; p < end; p = next_char(p, end))
    n++;
  GString *out = g_string_new(NULL);
  if (n <= SIM_ERROR_MESSAGE_MAX) {
    append_escaped(out, message, end, n);
    return g_string_free(out, FALSE);
  }
  /* Two thirds from the start (the place), the rest from the end (what was wrong). */
  gsize head = SIM_ERROR_MESSAGE_MAX * 2 / 3, tail = SIM_ERROR_MESSAGE_MAX - head;
  const char *rest = append_escaped(out, message, end, head);
  g_string_append(out, "…");
  for (gsize skip = n - head - tail; skip > 0; skip--)
    rest = next_char(rest, end);
  append_escaped(out, rest, end, tail);
  return g_string_free(out, FALSE);
}

char *
sim_error_quote_in(const char *message, const char *value)
{
  g_autofree char *quoted = sim_error_quote(value);
  if (*value == '\0' || strcmp(quoted, value) == 0)
    return g_strdup(message);
  g_autoptr(GString) out = g_string_new(message);
  g_string_replace(out, value, quoted, 0);
  return g_string_free(g_steal_pointer(&out), FALSE);
}

void
sim_error_append_choice(GString *out, const char *name, guint i, guint n, const char *conjunction)
{
  if (i > 0 && i + 1 < n)
    g_string_append(out, ", ");
  else if (i > 0)
    g_string_append_printf(out, " %s ", conjunction);
  g_string_append(out, name);
}

char *
sim_error_choices(const char *const *names)
{
  GString *out = g_string_new(NULL);
  guint n = g_strv_length((char **)names);
  for (guint i = 0; i < n; i++)
    sim_error_append_choice(out, names[i], i, n, "or");
  return g_string_free(out, FALSE);
}
