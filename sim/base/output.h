/* sim/base/output.h — what every writer of results shares: CSV fields, numbers
 * and atomic saves (the report, the sweep, the plots' exports).
 *
 * CSV follows RFC 4180 (a field holding a comma, a quote or a line break is
 * quoted, quotes doubled), numbers are locale-independent with up to 15
 * significant digits (the same bytes on every machine), and a file is
 * written whole or not at all (g_file_set_contents renames a temporary).
 * A path that cannot be written is SIM_ERROR_INPUT (exit 2), prefixed with
 * the option that named it.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

void sim_output_csv_field(GString *out, const char *text);

/* "%.15g", '.' whatever the locale, no "-0". */
void sim_output_number(GString *out, double value);

/* Writes `text` to `path` atomically; `option` ("--trace") prefixes errors. */
gboolean sim_output_save(const char *option, const char *path, const char *text, gsize length, GError **error);

G_END_DECLS
