/* sim/input/gzip.c — a data file read whole, gunzipped when it is gzip (sim/input/gzip.h). */
#include "input/gzip.h"

#include "base/error.h"
#include "input/config.h"

#include <gio/gio.h>

/* gzip's two magic bytes. */
static gboolean
is_gzip(const char *data, gsize length)
{
  return length >= 2 && (guchar)data[0] == 0x1f && (guchar)data[1] == 0x8b;
}

static char *
gunzip(const char *path, const char *data, gsize length, gsize *out_length, GError **error)
{
  g_autoptr(GZlibDecompressor) z = g_zlib_decompressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP);
  g_autoptr(GByteArray) out = g_byte_array_new();
  guint8 buffer[65536];
  gsize in_pos = 0;
  for (;;) {
    gsize read = 0, written = 0;
    g_autoptr(GError) local = NULL;
    GConverterResult r = g_converter_convert(G_CONVERTER(z), data + in_pos, length - in_pos, buffer, sizeof buffer,
                                             G_CONVERTER_INPUT_AT_END, &read, &written, &local);
    if (r == G_CONVERTER_ERROR) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: not a readable gzip file: %s", path, local->message);
      return NULL;
    }
    in_pos += read;
    g_byte_array_append(out, buffer, (guint)written);
    if (out->len > SIM_CONFIG_MAX_FILE_BYTES) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: larger than %d MiB once decompressed", path,
                  SIM_CONFIG_MAX_FILE_BYTES >> 20);
      return NULL;
    }
    if (r == G_CONVERTER_FINISHED)
      break;
  }
  *out_length = out->len;
  g_byte_array_append(out, (const guint8 *)"", 1);
  return (char *)g_byte_array_free(g_steal_pointer(&out), FALSE);
}

gboolean
sim_gzip_read_input(const char *path, const char *what, char **contents, gsize *length, GError **error)
{
  g_autofree char *raw = NULL;
  gsize raw_length = 0;
  if (!sim_config_read_input(path, what, &raw, &raw_length, error))
    return FALSE;
  if (!is_gzip(raw, raw_length)) {
    *contents = g_steal_pointer(&raw);
    *length = raw_length;
    return TRUE;
  }
  *contents = gunzip(path, raw, raw_length, length, error);
  return *contents != NULL;
}
