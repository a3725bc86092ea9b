/* sim/input/gzip.h — a data file read whole, gunzipped when it is gzip.
 *
 * torch.profiler writes its traces as .json or .json.gz, and a memory
 * snapshot compresses tenfold, so the readers of real runs (kineto.c,
 * snapshot.c) take either: a file that starts with gzip's magic bytes is
 * decompressed, whatever its name.  Both sides keep the input limit
 * (SIM_CONFIG_MAX_FILE_BYTES): a small gzip bomb is an error, not an
 * out-of-memory.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* sim_config_read_input, then gunzip when the data is gzip; the contents
 * are NUL-terminated.  Errors are SIM_ERROR_INPUT naming `path`. */
gboolean sim_gzip_read_input(const char *path, const char *what, char **contents, gsize *length, GError **error);

G_END_DECLS
