#include "trace.h"

#include "config.h"
#include "error.h"
#include "units.h"

#include <string.h>

enum { COL_LAYER, COL_OP, COL_NAME, COL_BYTES, COL_DTYPE, COL_SHAPE, COL_PARAM, COL_STORAGE, COL_STORAGE_BYTES,
       COL_SAVED, N_COLS };

static const char *const column_names[N_COLS] = {
  "layer", "op", "name", "bytes", "dtype", "shape", "is_parameter", "storage", "storage_bytes", "saved",
};
#define N_REQUIRED 7 /* the first seven columns */

#define SCOPE_EMBED (-1)
#define SCOPE_HEAD (-2)

typedef struct {
  gint64 scope;   /* layer index, SCOPE_EMBED or SCOPE_HEAD */
  char *name;
  guint64 bytes;
  guint64 storage; /* G_MAXUINT64 when the file has no storage column */
  gboolean saved;
  gboolean storage_sized; /* `bytes` is the storage's size (the storage_bytes column) */
  guint line;
} Row;

static void
row_clear(gpointer data)
{
  g_free(((Row *)data)->name);
}

static gboolean
parse_count(const char *origin, guint line, const char *column, const char *text, guint64 max, guint64 *out,
            GError **error)
{
  if (!g_ascii_string_to_unsigned(text, 10, 0, max, out, NULL)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column '%s': expected a whole number up to %" G_GUINT64_FORMAT
                ", got '%s'", origin, line, column, max, text);
    return FALSE;
  }
  return TRUE;
}

/* "layers.3.mlp.down_proj" -> "mlp.down_proj": the layer is said elsewhere. */
static const char *
strip_layer_prefix(const char *op)
{
  if (g_str_has_prefix(op, "layers.")) {
    const char *p = op + strlen("layers.");
    while (g_ascii_isdigit(*p))
      p++;
    if (*p == '.')
      return p + 1;
  }
  return op;
}

/* The header line: where each known column is (-1 when absent). */
static gboolean
parse_header(char **fields, const char *origin, int index[N_COLS], GError **error)
{
  for (guint i = 0; i < N_COLS; i++)
    index[i] = -1;
  for (guint f = 0; fields[f]; f++)
    for (guint c = 0; c < N_COLS; c++)
      if (strcmp(g_strstrip(fields[f]), column_names[c]) == 0)
        index[c] = (int)f;
  for (guint c = 0; c < N_REQUIRED; c++) {
    if (index[c] < 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s:1: missing column '%s' (expected a header with layer, op, name, bytes, dtype, shape, "
                  "is_parameter)", origin, column_names[c]);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
parse_scope(const char *layer, const char *origin, guint line, gint64 *scope, GError **error)
{
  guint64 v;
  if (strcmp(layer, "embed") == 0) {
    *scope = SCOPE_EMBED;
  } else if (strcmp(layer, "head") == 0) {
    *scope = SCOPE_HEAD;
  } else if (g_ascii_string_to_unsigned(layer, 10, 0, SIM_WORKLOAD_MAX_LAYERS - 1, &v, NULL)) {
    *scope = (gint64)v;
  } else {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column 'layer': expected embed, head or an index, got '%s'",
                origin, line, layer);
    return FALSE;
  }
  return TRUE;
}

/* One data line; a parameter's row is checked and dropped (static memory, not an activation). */
static gboolean
parse_row(char **fields, const int index[N_COLS], const char *origin, guint line, GArray *rows, GError **error)
{
  Row row = { .storage = G_MAXUINT64, .saved = TRUE, .storage_sized = index[COL_STORAGE_BYTES] >= 0, .line = line };
  guint64 v, bytes;
  if (!parse_scope(fields[index[COL_LAYER]], origin, line, &row.scope, error) ||
      !parse_count(origin, line, "is_parameter", fields[index[COL_PARAM]], 1, &v, error))
    return FALSE;
  gboolean parameter = v == 1;
  if (!parse_count(origin, line, "bytes", fields[index[COL_BYTES]], SIM_UNITS_MAX_BYTES, &bytes, error))
    return FALSE;
  if (index[COL_STORAGE_BYTES] >= 0 &&
      !parse_count(origin, line, "storage_bytes", fields[index[COL_STORAGE_BYTES]], SIM_UNITS_MAX_BYTES, &bytes, error))
    return FALSE;
  if (index[COL_STORAGE] >= 0 &&
      !parse_count(origin, line, "storage", fields[index[COL_STORAGE]], G_MAXUINT64 - 1, &row.storage, error))
    return FALSE;
  if (index[COL_SAVED] >= 0) {
    if (!parse_count(origin, line, "saved", fields[index[COL_SAVED]], 1, &v, error))
      return FALSE;
    row.saved = v == 1;
  }
  if (parameter)
    return TRUE;
  const char *op = fields[index[COL_OP]];
  row.name = row.saved ? g_strdup(strip_layer_prefix(op)) : g_strdup(fields[index[COL_NAME]]);
  row.bytes = bytes;
  g_array_append_val(rows, row);
  return TRUE;
}

static gboolean
parse_rows(const char *data, gsize length, const char *origin, GArray *rows, GError **error)
{
  if (memchr(data, '\0', length) || !g_utf8_validate(data, (gssize)length, NULL)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected a UTF-8 text file without NUL bytes", origin);
    return FALSE;
  }
  g_autofree char *text = g_strndup(data, length);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  int index[N_COLS];
  guint n_header = 0;

  for (guint ln = 0; lines[ln]; ln++) {
    char *line = lines[ln];
    gsize len = strlen(line);
    if (len && line[len - 1] == '\r')
      line[--len] = '\0';
    if (len == 0 && lines[ln + 1] == NULL)
      break; /* the final newline */
    if (strchr(line, '"')) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: quoted fields are not supported", origin, ln + 1);
      return FALSE;
    }
    g_auto(GStrv) fields = g_strsplit(line, ",", -1);
    guint n = g_strv_length(fields);
    if (ln == 0) {
      n_header = n;
      if (!parse_header(fields, origin, index, error))
        return FALSE;
      continue;
    }
    if (n != n_header) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: expected %u fields like the header, got %u", origin,
                  ln + 1, n_header, n);
      return FALSE;
    }
    if (!parse_row(fields, index, origin, ln + 1, rows, error))
      return FALSE;
  }
  if (n_header == 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: empty file (expected a CSV header and rows)", origin);
    return FALSE;
  }
  return TRUE;
}

static SimLayer *
scope_layer(SimWorkload *w, gint64 scope)
{
  if (scope == SCOPE_EMBED)
    return w->embed ? w->embed : sim_workload_add_embed(w);
  if (scope == SCOPE_HEAD)
    return w->head ? w->head : sim_workload_add_head(w);
  return sim_workload_layer(w, (guint)scope);
}

SimWorkload *
sim_trace_load_data(const char *data, gsize length, const char *origin, const char *name, GError **error)
{
  g_autoptr(GArray) rows = g_array_new(FALSE, TRUE, sizeof(Row));
  g_array_set_clear_func(rows, row_clear);
  if (!parse_rows(data, length, origin, rows, error))
    return NULL;

  gint64 top = -1;
  for (guint i = 0; i < rows->len; i++)
    top = MAX(top, g_array_index(rows, Row, i).scope);
  if (top < 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: no rows of any layer (expected layer 0 and up)", origin);
    return NULL;
  }
  g_autoptr(SimWorkload) w = sim_workload_new(name, (guint)top + 1);
  g_autofree gboolean *present = g_new0(gboolean, top + 1);
  /* storage -> { first scope, tensor index in its layer, bytes, line } */
  g_autoptr(GHashTable) owner = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  g_autoptr(GHashTable) names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 0; i < rows->len; i++) {
    const Row *r = &g_array_index(rows, Row, i);
    if (r->scope >= 0)
      present[r->scope] = TRUE;
    SimLayer *layer = scope_layer(w, r->scope);
    if (!r->saved) {
      if (strcmp(r->name, "input") == 0 && layer->input_bytes == 0)
        layer->input_bytes = r->bytes;
      continue;
    }
    if (r->storage != G_MAXUINT64) {
      gint64 *seen = g_hash_table_lookup(owner, &r->storage);
      /* One storage has one size: two would make the result depend on which row came first. */
      if (seen && r->storage_sized && (guint64)seen[2] != r->bytes) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                    "%s:%u: column 'storage_bytes': storage %" G_GUINT64_FORMAT " has %" G_GUINT64_FORMAT
                    " bytes here but %" G_GINT64_FORMAT " at line %" G_GINT64_FORMAT, origin, r->line, r->storage,
                    r->bytes, seen[2], seen[3]);
        return NULL;
      }
      if (seen) {
        /* Another reference: counted where the storage was first saved. */
        if (seen[0] == r->scope)
          g_array_index(layer->tensors, SimTensor, seen[1]).refs++;
        continue;
      }
      gint64 *key = g_new(gint64, 1), *value = g_new(gint64, 4);
      *key = (gint64)r->storage;
      value[0] = r->scope;
      value[1] = layer->tensors->len;
      value[2] = (gint64)r->bytes;
      value[3] = r->line;
      g_hash_table_insert(owner, key, value);
    }
    /* Unique names within a layer: "mlp.down_proj", "mlp.down_proj#2". */
    g_autofree char *base = g_strdup_printf("%" G_GINT64_FORMAT ":%s", r->scope, r->name);
    guint count = GPOINTER_TO_UINT(g_hash_table_lookup(names, base)) + 1;
    g_hash_table_replace(names, g_strdup(base), GUINT_TO_POINTER(count));
    g_autofree char *tensor = count == 1 ? g_strdup(r->name) : g_strdup_printf("%s#%u", r->name, count);
    sim_layer_add_tensor(layer, tensor, r->bytes);
  }
  for (gint64 l = 0; l <= top; l++) {
    if (!present[l]) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: layer %" G_GINT64_FORMAT " has no rows (layers go from 0 to %"
                  G_GINT64_FORMAT " without gaps)", origin, l, top);
      return NULL;
    }
  }
  if (!sim_workload_bytes_fit(w)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: the inputs and saved tensors, each counted once per reference, add up to more than 4 EiB", origin);
    return NULL;
  }
  return g_steal_pointer(&w);
}

SimWorkload *
sim_trace_load(const char *path, const char *name, GError **error)
{
  g_autofree char *data = NULL;
  gsize len = 0;
  if (!sim_config_read_input(path, NULL, &data, &len, error))
    return NULL;
  return sim_trace_load_data(data, len, path, name, error);
}
