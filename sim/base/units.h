/* sim/base/units.h — sizes, rates and times as people write them in scenario files.
 *
 * Sizes take B, KB, MB, GB, TB, PB, EB (powers of 1000) and KiB, MiB, GiB, TiB, PiB, EiB (powers
 * of 1024); rates take the same per second ("55GB/s", "12.5GiB/s"); times take
 * s, ms, us (or µs) and ns.  A number needs its unit: "8" is rejected because a
 * reader cannot tell 8 bytes from 8 MiB.  Bare "0" is allowed, since zero is
 * zero in every unit.
 *
 * The number is decimal digits with an optional fraction: "12", "12.5",
 * ".5", "007" (leading zeros are digits like any other).  No sign, no
 * exponent ("1e3" is refused with a message saying so), no "inf" or "nan".
 * Spaces around the value and between number and unit are allowed
 * ("12 MB").  Unit names are case-sensitive.
 *
 * Sizes are exact: "24MiB" is 25165824 and "1.5KiB" is 1536; a fraction of
 * a larger unit that does not land on a whole byte is rounded to the nearest
 * byte, and a fraction of "B" ("0.5B") is an error.  Anything
 * beyond 2^62 bytes is rejected rather than wrapped, so later sums of user
 * sizes cannot overflow a gint64 for any realistic count of tensors.
 *
 * On failure the functions set SIM_ERROR_INPUT with a message that says what
 * was expected; callers prefix file, group and key.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The largest size accepted: 4 EiB, far above any machine, well below G_MAXINT64. */
#define SIM_UNITS_MAX_BYTES (G_GUINT64_CONSTANT(1) << 62)

gboolean sim_units_parse_size(const char *text, guint64 *bytes, GError **error);

/* Whether `text` holds a number written with an exponent ("1e3", "2.5E-4"),
 * for messages that refuse one. */
gboolean sim_units_has_exponent(const char *text);
/* Bytes per second; must be > 0 (a zero rate would make every copy infinite). */
gboolean sim_units_parse_rate(const char *text, double *bytes_per_s, GError **error);
/* The same, or 0 ("0", "0GB/s"): for a shared limit whose 0 means there is
 * none, so nothing divides by it. */
gboolean sim_units_parse_rate_or_zero(const char *text, double *bytes_per_s, GError **error);
/* Seconds, >= 0. */
gboolean sim_units_parse_time(const char *text, double *seconds, GError **error);

/* "24.0 MiB", "1.50 GiB", "512 B": binary units, three significant digits. */
char *sim_units_format_size(guint64 bytes);
/* "55.0 GB/s": decimal units, as link vendors quote them. */
char *sim_units_format_rate(double bytes_per_s);

G_END_DECLS
