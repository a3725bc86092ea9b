#include "base/units.h"

#include "base/error.h"

#include <math.h>
#include <string.h>

typedef struct {
  const char *name;
  double scale;
} Unit;

static const Unit size_units[] = {
  { "B", 1.0 },
  { "KB", 1e3 },     { "MB", 1e6 },         { "GB", 1e9 },         { "TB", 1e12 },
  { "PB", 1e15 },    { "EB", 1e18 },
  { "KiB", 1024.0 }, { "MiB", 1048576.0 }, { "GiB", 1073741824.0 }, { "TiB", 1099511627776.0 },
  /* What sim_units_format_size prints is read back: PiB and EiB too. */
  { "PiB", 1125899906842624.0 }, { "EiB", 1152921504606846976.0 },
  { NULL, 0 },
};

static const Unit time_units[] = {
  { "s", 1.0 }, { "ms", 1e-3 }, { "us", 1e-6 }, { "\xc2\xb5s", 1e-6 }, { "ns", 1e-9 }, { NULL, 0 },
};

/* The number part: digits, optionally a fraction.  No sign, no exponent, no
 * "inf" or "nan": strtod alone would take all of those.  On success *end
 * points past the number and *int_part holds the digits before the point
 * (G_MAXUINT64 when they do not fit).  `accepted` says what the caller
 * takes, for a negative number's message ("a non-negative value", or "a
 * positive rate" where 0 is refused too). */
static gboolean
scan_number(const char *text, const char *accepted, const char **end, guint64 *int_part, double *fraction,
            double *value, GError **error)
{
  const char *p = text;
  guint64 whole = 0;
  gboolean overflow = FALSE;

  while (g_ascii_isspace(*p))
    p++;
  if (*p == '-') {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected %s, got '%s'", accepted, text);
    return FALSE;
  }
  if (!g_ascii_isdigit(*p) && !(*p == '.' && g_ascii_isdigit(p[1]))) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected a number with a unit, got '%s'", text);
    return FALSE;
  }
  const char *start = p;
  for (; g_ascii_isdigit(*p); p++) {
    guint digit = (guint)(*p - '0');
    if (whole > (G_MAXUINT64 - digit) / 10)
      overflow = TRUE;
    else
      whole = whole * 10 + digit;
  }
  *fraction = 0;
  if (*p == '.') {
    const char *point = p++;
    if (!g_ascii_isdigit(*p)) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected digits after the point in '%s'", text);
      return FALSE;
    }
    while (g_ascii_isdigit(*p))
      p++;
    /* The fraction alone, so that it keeps its precision whatever the whole part. */
    g_autofree char *after = g_strndup(point, (gsize)(p - point));
    g_autofree char *frac = g_strconcat("0", after, NULL);
    *fraction = g_ascii_strtod(frac, NULL);
  }
  /* The scan above already proved the text is a plain decimal. */
  g_autofree char *digits = g_strndup(start, (gsize)(p - start));
  *value = g_ascii_strtod(digits, NULL);
  *int_part = overflow ? G_MAXUINT64 : whole;
  *end = p;
  return TRUE;
}

gboolean
sim_units_has_exponent(const char *text)
{
  const char *e = text + strcspn(text, "eE");
  if (*e == '\0' || e == text || !(g_ascii_isdigit(e[-1]) || e[-1] == '.'))
    return FALSE;
  e++;
  if (*e == '+' || *e == '-')
    e++;
  return g_ascii_isdigit(*e);
}

/* The message for a number whose unit did not match: an exponent says so. */
static void
unit_error(GError **error, const char *text, const char *expected)
{
  if (sim_units_has_exponent(text))
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "exponents are not accepted (write 1e3 as 1000), got '%s'", text);
  else
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected %s, got '%s'", expected, text);
}

/* Matches the unit after the number: the rest of the text, spaces trimmed.
 * `suffix` is "/s" for rates.  Returns NULL when it is not one of `units`. */
static const Unit *
match_unit(const Unit *units, const char *rest, const char *suffix)
{
  g_autofree char *unit = g_strstrip(g_strdup(rest));
  gsize n = strlen(unit), s = strlen(suffix);

  if (n < s || strcmp(unit + n - s, suffix) != 0)
    return NULL;
  unit[n - s] = '\0';
  for (const Unit *u = units; u->name; u++)
    if (strcmp(u->name, unit) == 0)
      return u;
  return NULL;
}

static gboolean
is_bare_zero(const char *rest, double value)
{
  while (g_ascii_isspace(*rest))
    rest++;
  return *rest == '\0' && value == 0.0;
}

gboolean
sim_units_parse_size(const char *text, guint64 *bytes, GError **error)
{
  const char *rest;
  guint64 whole;
  double value, fraction;

  g_return_val_if_fail(text != NULL && bytes != NULL, FALSE);
  if (!scan_number(text, "a non-negative value", &rest, &whole, &fraction, &value, error))
    return FALSE;
  if (is_bare_zero(rest, value)) {
    *bytes = 0;
    return TRUE;
  }
  const Unit *unit = match_unit(size_units, rest, "");
  if (unit == NULL) {
    unit_error(error, text, "a size with a unit (B, KB, MB, GB, TB, PB, EB, KiB, MiB, GiB, TiB, PiB, EiB)");
    return FALSE;
  }
  /* Whole part exactly in integers; the fraction rounds to the nearest byte. */
  guint64 scale = (guint64)unit->scale;
  /* Past the first test the sum is at most 2^62 + scale: it cannot wrap. */
  if (whole == G_MAXUINT64 || whole > SIM_UNITS_MAX_BYTES / scale || value * unit->scale > (double)SIM_UNITS_MAX_BYTES ||
      whole * scale + (guint64)llround(fraction * unit->scale) > SIM_UNITS_MAX_BYTES) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "size '%s' is too large (at most 4 EiB)", text);
    return FALSE;
  }
  /* A byte does not divide: 0.5B is a typo, not half a byte (larger units
   * round their fraction to the nearest byte). */
  if (scale == 1 && fraction != 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "a size in B is a whole number of bytes, got '%s'", text);
    return FALSE;
  }
  *bytes = whole * scale + (guint64)llround(fraction * unit->scale);
  return TRUE;
}

/* A rate; with `zero`, also 0 (bare, or with a rate unit). */
static gboolean
parse_rate(const char *text, gboolean zero, double *bytes_per_s, GError **error)
{
  const char *rest;
  guint64 whole;
  double value, fraction;

  g_return_val_if_fail(text != NULL && bytes_per_s != NULL, FALSE);
  if (!scan_number(text, zero ? "a non-negative value" : "a positive rate", &rest, &whole, &fraction, &value, error))
    return FALSE;
  if (is_bare_zero(rest, value)) {
    if (zero) {
      *bytes_per_s = 0;
      return TRUE;
    }
    /* A bare 0 needs no unit, but this rate cannot be 0: say that, not that a unit is missing. */
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected a positive rate (0 would move nothing), got '%s'", text);
    return FALSE;
  }
  const Unit *unit = match_unit(size_units, rest, "/s");
  if (unit == NULL) {
    unit_error(error, text,
               zero ? "a rate with a unit such as GB/s or GiB/s, or 0" : "a rate with a unit such as GB/s or GiB/s");
    return FALSE;
  }
  double rate = value * unit->scale;
  if (zero && rate == 0) {
    *bytes_per_s = 0;
    return TRUE;
  }
  if (!(rate > 0) || !isfinite(rate)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected a positive, finite rate, got '%s'", text);
    return FALSE;
  }
  *bytes_per_s = rate;
  return TRUE;
}

gboolean
sim_units_parse_rate(const char *text, double *bytes_per_s, GError **error)
{
  return parse_rate(text, FALSE, bytes_per_s, error);
}

gboolean
sim_units_parse_rate_or_zero(const char *text, double *bytes_per_s, GError **error)
{
  return parse_rate(text, TRUE, bytes_per_s, error);
}

gboolean
sim_units_parse_time(const char *text, double *seconds, GError **error)
{
  const char *rest;
  guint64 whole;
  double value, fraction;

  g_return_val_if_fail(text != NULL && seconds != NULL, FALSE);
  if (!scan_number(text, "a non-negative value", &rest, &whole, &fraction, &value, error))
    return FALSE;
  if (is_bare_zero(rest, value)) {
    *seconds = 0;
    return TRUE;
  }
  const Unit *unit = match_unit(time_units, rest, "");
  if (unit == NULL) {
    unit_error(error, text, "a time with a unit (s, ms, us, ns)");
    return FALSE;
  }
  double t = value * unit->scale;
  /* A year of simulated time is far beyond any training step. */
  if (!isfinite(t) || t > 3.2e7) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "time '%s' is too large (at most a year)", text);
    return FALSE;
  }
  *seconds = t;
  return TRUE;
}

/* Up to three significant digits (at most `max_decimals` after the point),
 * choosing the unit after rounding so that 1048575 B prints as "1.00 MiB",
 * not "1024 KiB". */
static char *
format_scaled(double v, double step, int max_decimals, const char *const *names, guint n_names)
{
  guint i = 0;
  for (;;) {
    int decimals = MIN(max_decimals, v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2);
    double rounded = round(v * pow(10, decimals)) / pow(10, decimals);
    if (rounded >= step && i + 1 < n_names) {
      v /= step;
      i++;
      continue;
    }
    return g_strdup_printf("%.*f %s", decimals, v, names[i]);
  }
}

char *
sim_units_format_size(guint64 bytes)
{
  static const char *const names[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  if (bytes < 1024)
    return g_strdup_printf("%" G_GUINT64_FORMAT " B", bytes);
  return format_scaled((double)bytes / 1024.0, 1024.0, 2, names + 1, G_N_ELEMENTS(names) - 1);
}

char *
sim_units_format_rate(double bytes_per_s)
{
  static const char *const names[] = { "B/s", "KB/s", "MB/s", "GB/s", "TB/s" };
  return format_scaled(bytes_per_s, 1000.0, 1, names, G_N_ELEMENTS(names));
}
