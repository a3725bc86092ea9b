/* Fuzz target: sizes, rates and times as people write them (sim/base/units.c).
 * Beyond not crashing, every accepted value must be inside the documented
 * range, and formatting any value must work. */
#include "base/units.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
check(gboolean ok, const char *what, const char *text)
{
  if (ok)
    return;
  fprintf(stderr, "fuzz_units: %s for '%s'\n", what, text);
  abort();
}

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autofree char *text = g_strndup((const char *)data, size);
  guint64 bytes = 0;
  double rate = 0, seconds = 0;
  g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL;

  if (sim_units_parse_size(text, &bytes, &e1)) {
    check(bytes <= SIM_UNITS_MAX_BYTES, "size beyond 4 EiB", text);
    g_free(sim_units_format_size(bytes));
  } else {
    check(e1 != NULL && e1->message[0] != '\0', "size failed without a message", text);
  }
  if (sim_units_parse_rate(text, &rate, &e2)) {
    check(rate > 0 && isfinite(rate), "rate not positive and finite", text);
    g_free(sim_units_format_rate(rate));
  } else {
    check(e2 != NULL, "rate failed without a message", text);
  }
  if (sim_units_parse_time(text, &seconds, &e3))
    check(seconds >= 0 && seconds <= 3.2e7, "time outside [0, a year]", text);
  else
    check(e3 != NULL, "time failed without a message", text);

  /* Formatting takes any value, not only parsed ones. */
  if (size >= sizeof(guint64)) {
    guint64 raw;
    double d;
    memcpy(&raw, data, sizeof raw);
    memcpy(&d, data, sizeof d);
    g_free(sim_units_format_size(raw));
    if (isfinite(d) && d > 0)
      g_free(sim_units_format_rate(d));
  }
  return 0;
}
