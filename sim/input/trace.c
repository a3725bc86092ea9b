#include "input/trace.h"

#include "base/error.h"
#include "base/units.h"
#include "engine/kernel.h"
#include "input/config.h"
#include "input/internal/trace_private.h"

#include <string.h>

enum { COL_LAYER, COL_OP, COL_NAME, COL_BYTES, COL_DTYPE, COL_SHAPE, COL_PARAM, COL_STORAGE, COL_STORAGE_BYTES,
       COL_SAVED, COL_LEAF, COL_HOST, COL_PHASE, COL_FLOPS, COL_MOVED, COL_NODE, COL_CALLS, COL_FORWARD_OP,
       COL_BACKWARD_OP, COL_FREED_LAYER, COL_FREED_PHASE, COL_FREED_OP, N_COLS };

static const char *const column_names[N_COLS] = {
  "layer", "op", "name", "bytes", "dtype", "shape", "is_parameter", "storage", "storage_bytes", "saved",
  "leaf", "host", "phase", "flops", "moved", "node", "calls", "forward_op", "backward_op",
  "freed_layer", "freed_phase", "freed_op",
};
#define N_REQUIRED 7 /* the first seven columns */

/* What the header says about the file's kind. */
typedef struct {
  int index[N_COLS];
  /* A `leaf` column: python/offsim_torch/recorder.py's format, which lists
   * every reference autograd packs, so parameter rows and references to
   * an earlier layer's storage become tensors of their own (held
   * elsewhere) instead of being dropped. */
  gboolean references;
  /* forward_op and backward_op columns beside the op counts: the file
   * places every op and reference (recorder.py), so a timed load builds
   * each stage's op list (trace_ops.c). */
  gboolean places;
  /* freed_layer, freed_phase and freed_op: the file lists every
   * allocation that is not a saved storage with where it was freed
   * (recorder.py with its allocation log), rows of their own, which only
   * op lists (places) can hold: without places they are dropped. */
  gboolean lifetimes;
} Header;

static void
row_clear(gpointer data)
{
  g_free(((SimTraceRow *)data)->name);
  g_free(((SimTraceRow *)data)->node);
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

/* The header line (line `line` of the file): where each known column is
 * (-1 when absent).  A column read twice is refused: which of the two
 * counts would be a guess (the last one used to win silently); columns
 * offsim does not read may repeat. */
static gboolean
parse_header(char **fields, const char *origin, guint line, Header *header, GError **error)
{
  int *index = header->index;
  for (guint i = 0; i < N_COLS; i++)
    index[i] = -1;
  for (guint f = 0; fields[f]; f++)
    for (guint c = 0; c < N_COLS; c++) {
      if (strcmp(g_strstrip(fields[f]), column_names[c]) != 0)
        continue;
      if (index[c] >= 0) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column '%s' is given twice (fields %d and %u)", origin,
                    line, column_names[c], index[c] + 1, f + 1);
        return FALSE;
      }
      index[c] = (int)f;
    }
  for (guint c = 0; c < N_REQUIRED; c++) {
    if (index[c] < 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s:%u: missing column '%s' (expected a header with layer, op, name, bytes, dtype, shape, "
                  "is_parameter)", origin, line, column_names[c]);
      return FALSE;
    }
  }
  /* The op counts are read together, and their phase tells forward from backward. */
  if ((index[COL_FLOPS] >= 0) != (index[COL_MOVED] >= 0) || (index[COL_FLOPS] >= 0 && index[COL_PHASE] < 0)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column '%s': expected flops, moved and phase together",
                origin, line, index[COL_FLOPS] < 0 ? "flops" : index[COL_MOVED] < 0 ? "moved" : "phase");
    return FALSE;
  }
  header->references = index[COL_LEAF] >= 0;
  header->places = header->references && index[COL_FLOPS] >= 0 && index[COL_FORWARD_OP] >= 0 &&
                   index[COL_BACKWARD_OP] >= 0;
  int freed = (index[COL_FREED_LAYER] >= 0) + (index[COL_FREED_PHASE] >= 0) + (index[COL_FREED_OP] >= 0);
  if (freed > 0 && (freed < 3 || index[COL_PHASE] < 0)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s:%u: column '%s': expected freed_layer, freed_phase and freed_op together, with phase", origin, line,
                index[COL_FREED_LAYER] < 0 ? "freed_layer" : index[COL_FREED_PHASE] < 0 ? "freed_phase" : "freed_op");
    return FALSE;
  }
  header->lifetimes = freed == 3;
  return TRUE;
}

static gboolean
parse_scope(const char *layer, const char *origin, guint line, gint64 *scope, GError **error)
{
  guint64 v;
  if (strcmp(layer, "embed") == 0) {
    *scope = SIM_TRACE_SCOPE_EMBED;
  } else if (strcmp(layer, "head") == 0) {
    *scope = SIM_TRACE_SCOPE_HEAD;
  } else if (g_ascii_string_to_unsigned(layer, 10, 0, SIM_WORKLOAD_MAX_LAYERS - 1, &v, NULL)) {
    *scope = (gint64)v;
  } else {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column 'layer': expected embed, head or an index, got '%s'",
                origin, line, layer);
    return FALSE;
  }
  return TRUE;
}

/* A place column (forward_op, backward_op): empty or a whole number. */
static gboolean
parse_place(char **fields, const int index[N_COLS], guint col, const char *origin, guint line, gint64 *out,
            GError **error)
{
  guint64 v;
  *out = SIM_TRACE_NO_PLACE;
  if (index[col] < 0 || !*fields[index[col]])
    return TRUE;
  if (!parse_count(origin, line, column_names[col], fields[index[col]], G_MAXINT32, &v, error))
    return FALSE;
  *out = (gint64)v;
  return TRUE;
}

/* A phase column's text: forward (FALSE) or backward (TRUE). */
static gboolean
parse_phase(const char *text, const char *column, const char *origin, guint line, gboolean *backward, GError **error)
{
  if (strcmp(text, "forward") != 0 && strcmp(text, "backward") != 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column '%s': expected forward or backward, got '%s'",
                origin, line, column, text);
    return FALSE;
  }
  *backward = text[0] == 'b';
  return TRUE;
}

/* An allocation row's kind from its name (SimTraceAlloc), or
 * SIM_TRACE_ALLOC_NONE for a name that is none. */
static guint8
alloc_kind(const char *name)
{
  for (guint k = SIM_TRACE_ALLOC_WORKSPACE; k < SIM_TRACE_ALLOC_KINDS; k++)
    if (strcmp(name, sim_trace_alloc_names[k]) == 0)
      return (guint8)k;
  return SIM_TRACE_ALLOC_NONE;
}

/* An allocation row (lifetimes.py): where the block was made, in its
 * phase's place column, and for a transient where it was freed.  Its
 * name becomes the place's (the module in the forward, the node in the
 * backward), as a compute row's. */
static gboolean
parse_alloc_row(char **fields, const Header *header, const char *origin, guint line, SimTraceRow *row, GError **error)
{
  const int *index = header->index;
  if (!parse_phase(fields[index[COL_PHASE]], "phase", origin, line, &row->backward, error))
    return FALSE;
  guint col = row->backward ? COL_BACKWARD_OP : COL_FORWARD_OP;
  gint64 *place = row->backward ? &row->backward_op : &row->forward_op;
  if (!parse_place(fields, index, col, origin, line, place, error))
    return FALSE;
  if (*place == SIM_TRACE_NO_PLACE) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column '%s': a %s row needs the op that allocated it",
                origin, line, column_names[col], sim_trace_alloc_names[row->alloc]);
    return FALSE;
  }
  const char *freed = fields[index[COL_FREED_LAYER]];
  gboolean transient = row->alloc == SIM_TRACE_ALLOC_TRANSIENT;
  if (transient != (*freed != '\0')) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column 'freed_layer': %s", origin, line,
                transient ? "a transient row needs where it was freed"
                          : "only a transient row is freed elsewhere (workspace, grad and held are not)");
    return FALSE;
  }
  if (transient) {
    if (!parse_scope(freed, origin, line, &row->freed_scope, error) ||
        !parse_phase(fields[index[COL_FREED_PHASE]], "freed_phase", origin, line, &row->freed_backward, error))
      return FALSE;
    guint64 v;
    if (!parse_count(origin, line, "freed_op", fields[index[COL_FREED_OP]], G_MAXINT32, &v, error))
      return FALSE;
    row->freed_op = (gint64)v;
  }
  const char *node = index[COL_NODE] >= 0 ? fields[index[COL_NODE]] : "";
  row->name = g_strdup(row->backward ? (*node ? node : "backward") : strip_layer_prefix(fields[index[COL_OP]]));
  return TRUE;
}

/* The kernel class of a compute row: a matrix product's ATen op, another
 * op with FLOPs (the recorder's fused attention stand-ins), or none. */
static guint8
compute_class(const char *aten, guint64 flops)
{
  static const char *const products[] = { "mm", "addmm", "bmm", "baddbmm", "convolution", "convolution_backward" };
  if (flops == 0)
    return SIM_KERNEL_MEMORY;
  for (guint i = 0; i < G_N_ELEMENTS(products); i++)
    if (strcmp(aten, products[i]) == 0)
      return SIM_KERNEL_GEMM;
  return SIM_KERNEL_ATTENTION;
}

/* A compute row: the layer, the phase and the two counts; with places, also
 * the place, the op's name (module or node), its kernel class and calls. */
static gboolean
parse_compute_row(char **fields, const Header *header, const char *origin, guint line, SimTraceRow *row,
                  GError **error)
{
  const int *index = header->index;
  row->compute = TRUE;
  if (!parse_phase(fields[index[COL_PHASE]], "phase", origin, line, &row->backward, error))
    return FALSE;
  /* Counts up to 2^62: a whole file's sum stays exact in a double's range and far below overflow. */
  if (!parse_count(origin, line, "flops", fields[index[COL_FLOPS]], SIM_UNITS_MAX_BYTES, &row->flops, error) ||
      !parse_count(origin, line, "moved", fields[index[COL_MOVED]], SIM_UNITS_MAX_BYTES, &row->moved, error))
    return FALSE;
  if (!header->places)
    return TRUE;
  row->kclass = compute_class(fields[index[COL_NAME]], row->flops);
  if (index[COL_CALLS] >= 0 && *fields[index[COL_CALLS]] &&
      !parse_count(origin, line, "calls", fields[index[COL_CALLS]], G_MAXUINT32, &row->calls, error))
    return FALSE;
  guint col = row->backward ? COL_BACKWARD_OP : COL_FORWARD_OP;
  if (!parse_place(fields, index, col, origin, line, row->backward ? &row->backward_op : &row->forward_op, error))
    return FALSE;
  if ((row->backward ? row->backward_op : row->forward_op) == SIM_TRACE_NO_PLACE) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: column '%s': a %s compute row needs the op it ran in",
                origin, line, column_names[col], row->backward ? "backward" : "forward");
    return FALSE;
  }
  const char *node = index[COL_NODE] >= 0 ? fields[index[COL_NODE]] : "";
  row->name = g_strdup(row->backward ? (*node ? node : "backward") : strip_layer_prefix(fields[index[COL_OP]]));
  return TRUE;
}

/* Bytes per element of a torch dtype name as the recorders write it
 * ("bfloat16", "torch.float32"); 0 for one it does not know, whose
 * element count is then unknown (min_elements refuses such workloads). */
static guint
dtype_bytes(const char *dtype)
{
  static const struct {
    const char *name;
    guint bytes;
  } table[] = { { "float32", 4 }, { "float", 4 },   { "bfloat16", 2 }, { "float16", 2 }, { "half", 2 },
                { "float64", 8 }, { "double", 8 },  { "int64", 8 },    { "long", 8 },    { "int32", 4 },
                { "int", 4 },     { "int16", 2 },   { "int8", 1 },     { "uint8", 1 },   { "bool", 1 } };
  const char *name = g_str_has_prefix(dtype, "torch.") ? dtype + strlen("torch.") : dtype;
  for (guint i = 0; i < G_N_ELEMENTS(table); i++)
    if (strcmp(name, table[i].name) == 0)
      return table[i].bytes;
  return 0;
}

/* One data line; a parameter's row is checked and, but in a recorder.py
 * file (Header.references), dropped (static memory, not an activation). */
static gboolean
parse_row(char **fields, const Header *header, const char *origin, guint line, GArray *rows, GError **error)
{
  const int *index = header->index;
  SimTraceRow row = { .storage = G_MAXUINT64, .saved = TRUE, .storage_sized = index[COL_STORAGE_BYTES] >= 0,
                      .forward_op = SIM_TRACE_NO_PLACE, .backward_op = SIM_TRACE_NO_PLACE, .tensor = G_MAXUINT,
                      .line = line };
  guint64 v, bytes;
  if (!parse_scope(fields[index[COL_LAYER]], origin, line, &row.scope, error))
    return FALSE;
  if (index[COL_FLOPS] >= 0 && *fields[index[COL_FLOPS]]) {
    if (!parse_compute_row(fields, header, origin, line, &row, error)) {
      g_free(row.name);
      return FALSE;
    }
    g_array_append_val(rows, row);
    return TRUE;
  }
  row.alloc = header->lifetimes && index[COL_SAVED] >= 0 && strcmp(fields[index[COL_SAVED]], "0") == 0
                ? alloc_kind(fields[index[COL_NAME]]) : SIM_TRACE_ALLOC_NONE;
  if (row.alloc != SIM_TRACE_ALLOC_NONE) {
    if (!header->places)
      return TRUE;
    row.saved = FALSE;
    if (!parse_count(origin, line, "bytes", fields[index[COL_BYTES]], SIM_UNITS_MAX_BYTES, &row.bytes, error) ||
        !parse_alloc_row(fields, header, origin, line, &row, error)) {
      g_free(row.name);
      return FALSE;
    }
    g_array_append_val(rows, row);
    return TRUE;
  }
  if (!parse_count(origin, line, "is_parameter", fields[index[COL_PARAM]], 1, &v, error))
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
  if (index[COL_LEAF] >= 0) {
    if (!parse_count(origin, line, "leaf", fields[index[COL_LEAF]], 1, &v, error))
      return FALSE;
    row.leaf = v == 1;
  }
  if (index[COL_HOST] >= 0) {
    if (!parse_count(origin, line, "host", fields[index[COL_HOST]], 1, &v, error))
      return FALSE;
    row.host = v == 1;
  }
  if (header->places && (!parse_place(fields, index, COL_FORWARD_OP, origin, line, &row.forward_op, error) ||
                         !parse_place(fields, index, COL_BACKWARD_OP, origin, line, &row.backward_op, error)))
    return FALSE;
  if (parameter && !header->references)
    return TRUE;
  row.parameter = parameter;
  row.elem = dtype_bytes(fields[index[COL_DTYPE]]);
  const char *op = fields[index[COL_OP]];
  row.name = row.saved ? g_strdup(strip_layer_prefix(op)) : g_strdup(fields[index[COL_NAME]]);
  row.bytes = bytes;
  if (header->places)
    row.node = g_strdup(index[COL_NODE] >= 0 && *fields[index[COL_NODE]] ? fields[index[COL_NODE]] : "backward");
  g_array_append_val(rows, row);
  return TRUE;
}

static gboolean
parse_rows(const char *data, gsize length, const char *origin, Header *header, GArray *rows, GError **error)
{
  if (memchr(data, '\0', length) || !g_utf8_validate(data, (gssize)length, NULL)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected a UTF-8 text file without NUL bytes", origin);
    return FALSE;
  }
  sim_config_skip_bom(&data, &length);
  g_autofree char *text = g_strndup(data, length);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  guint n_header = 0;

  for (guint ln = 0; lines[ln]; ln++) {
    char *line = lines[ln];
    gsize len = strlen(line);
    if (len && line[len - 1] == '\r')
      line[--len] = '\0';
    /* Blank lines, the final newline's included, hold no row (and the
     * header is the first line that is not blank), as in a chunk list. */
    if (sim_config_blank_line(line))
      continue;
    if (strchr(line, '"')) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: quoted fields are not supported", origin, ln + 1);
      return FALSE;
    }
    g_auto(GStrv) fields = g_strsplit(line, ",", -1);
    guint n = g_strv_length(fields);
    if (n_header == 0) {
      n_header = n;
      if (!parse_header(fields, origin, ln + 1, header, error))
        return FALSE;
      continue;
    }
    if (n != n_header) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: expected %u fields like the header, got %u", origin,
                  ln + 1, n_header, n);
      return FALSE;
    }
    if (!parse_row(fields, header, origin, ln + 1, rows, error))
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
  if (scope == SIM_TRACE_SCOPE_EMBED)
    return w->embed ? w->embed : sim_workload_add_embed(w);
  if (scope == SIM_TRACE_SCOPE_HEAD)
    return w->head ? w->head : sim_workload_add_head(w);
  return sim_workload_layer(w, (guint)scope);
}

/* Op counts of one stage, summed over its compute rows, by phase (0 forward, 1 backward). */
typedef struct {
  double flops[2];  /* of the ops with a FLOP count: matrix products, attention */
  double bytes[2];  /* moved by the ops without one: memory-bound work */
  gboolean counted;
} Counts;

/* Forward and backward seconds of a stage from its counts: the flat time
 * model (sim/engine/kernel.h) over the stage's sums, products at the
 * reachable matmul rate, the rest at HBM speed (a recording has counts, not
 * kernel shapes). */
static void
time_stage(SimLayer *stage, const Counts *c, const SimDevice *dev)
{
  stage->forward = sim_trace_flat_seconds(dev, c->flops[0], c->bytes[0]);
  stage->backward = sim_trace_flat_seconds(dev, c->flops[1], c->bytes[1]);
}

/* Counts index: 0 the embedding, 1 + i layer i, top + 2 the head. */
static guint
counts_index(gint64 scope, gint64 top)
{
  return scope == SIM_TRACE_SCOPE_EMBED ? 0 : scope == SIM_TRACE_SCOPE_HEAD ? (guint)(top + 2) : (guint)(scope + 1);
}

static gboolean
apply_times(SimWorkload *w, const Counts *counts, gint64 top, const char *origin, const SimDevice *dev,
            GError **error)
{
  if (!(dev->matmul_flops > 0) || !(dev->hbm_bandwidth > 0)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [device] matmul_tflops and hbm_bandwidth: both are needed "
                "to time a recording by its op counts", origin);
    return FALSE;
  }
  for (gint64 l = 0; l <= top; l++) {
    if (!counts[l + 1].counted) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: layer %" G_GINT64_FORMAT " has no op counts (rows with "
                  "flops and moved: recorded by python/offsim_torch/recorder.py)", origin, l);
      return FALSE;
    }
    time_stage(sim_workload_layer(w, (guint)l), &counts[l + 1], dev);
  }
  if (w->embed)
    time_stage(w->embed, &counts[0], dev);
  if (w->head)
    time_stage(w->head, &counts[top + 2], dev);
  w->time_model = sim_time_model_names[SIM_TIME_FLAT];
  return TRUE;
}

/* The loader; `device` NULL: untimed (the caller sets the times). */
/* What turning rows into tensors keeps between rows. */
typedef struct {
  SimWorkload *w;
  const char *origin;
  gboolean references; /* Header.references: a recorder.py file */
  /* storage -> { first scope, tensor index in its layer, bytes, line } */
  GHashTable *owner;
  /* "scope:name" -> how many tensors of that name the scope has */
  GHashTable *names;
  /* references: "scope:storage" (":p" for a parameter) -> tensor index + 1 in that scope */
  GHashTable *here;
} Builder;

/* One compute row into its scope's counts: an op with a FLOP count is
 * compute-bound, its bytes are not timed again. */
static void
count_row(Counts *counts, const SimTraceRow *r, gint64 top)
{
  Counts *c = &counts[counts_index(r->scope, top)];
  c->counted = TRUE;
  if (r->flops)
    c->flops[r->backward] += (double)r->flops;
  else
    c->bytes[r->backward] += (double)r->moved;
}

/* Whether a saved row is a new tensor of its layer (FALSE: another
 * reference to one it has, counted here); *shared says it refers to a
 * storage an earlier scope saved first; r->tensor which tensor of the
 * layer it is a reference to (in a recorder.py file).  A storage of two
 * sizes is an error. */
static gboolean
storage_row(Builder *b, SimLayer *layer, SimTraceRow *r, gboolean *is_new, gboolean *shared, GError **error)
{
  *is_new = TRUE;
  *shared = FALSE;
  r->tensor = layer->tensors->len;
  if (r->storage == G_MAXUINT64)
    return TRUE;
  gint64 *seen = g_hash_table_lookup(b->owner, &r->storage);
  /* One storage has one size: two would make the result depend on which row came first. */
  if (seen && r->storage_sized && (guint64)seen[2] != r->bytes) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s:%u: column 'storage_bytes': storage %" G_GUINT64_FORMAT " has %" G_GUINT64_FORMAT
                " bytes here but %" G_GINT64_FORMAT " at line %" G_GINT64_FORMAT, b->origin, r->line, r->storage,
                r->bytes, seen[2], seen[3]);
    return FALSE;
  }
  if (b->references) {
    /* Every reference counts in the scope that packs it; a storage an
     * earlier scope saved first is held there (shared), a parameter is
     * static memory: neither is saved here again. */
    g_autofree char *key = g_strdup_printf("%" G_GINT64_FORMAT ":%" G_GUINT64_FORMAT "%s", r->scope, r->storage,
                                           r->parameter ? ":p" : "");
    guint index = GPOINTER_TO_UINT(g_hash_table_lookup(b->here, key));
    if (index) {
      r->tensor = index - 1;
      g_array_index(layer->tensors, SimTensor, index - 1).refs++;
      *is_new = FALSE;
      return TRUE;
    }
    g_hash_table_insert(b->here, g_steal_pointer(&key), GUINT_TO_POINTER(layer->tensors->len + 1));
    *shared = seen && seen[0] != r->scope && !r->parameter;
  } else if (seen) {
    /* Another reference: counted where the storage was first saved. */
    if (seen[0] == r->scope)
      g_array_index(layer->tensors, SimTensor, seen[1]).refs++;
    *is_new = FALSE;
    return TRUE;
  }
  if (!seen) {
    gint64 *key = g_new(gint64, 1), *value = g_new(gint64, 4);
    *key = (gint64)r->storage;
    value[0] = r->scope;
    value[1] = layer->tensors->len;
    value[2] = (gint64)r->bytes;
    value[3] = r->line;
    g_hash_table_insert(b->owner, key, value);
  }
  return TRUE;
}

/* A new tensor of `layer` from a saved row, under a name unique in the
 * layer ("mlp.down_proj", "mlp.down_proj#2"; a parameter's is its module's
 * with ".param"). */
static void
add_tensor(Builder *b, SimLayer *layer, const SimTraceRow *r, gboolean shared)
{
  g_autofree char *base_name = r->parameter ? g_strconcat(r->name, ".param", NULL) : g_strdup(r->name);
  g_autofree char *base = g_strdup_printf("%" G_GINT64_FORMAT ":%s", r->scope, base_name);
  guint count = GPOINTER_TO_UINT(g_hash_table_lookup(b->names, base)) + 1;
  g_hash_table_replace(b->names, g_strdup(base), GUINT_TO_POINTER(count));
  g_autofree char *tensor = count == 1 ? g_strdup(base_name) : g_strdup_printf("%s#%u", base_name, count);
  SimTensor *t = sim_layer_add_tensor(layer, tensor, r->bytes);
  t->parameter = r->parameter;
  t->shared = shared;
  t->host = r->host && !r->parameter;
  t->leaf = r->leaf;
  if (r->elem)
    sim_tensor_set_elem(t, r->elem);
}

/* Every layer from 0 to `top` has rows, and the bytes fit 64 bits. */
static gboolean
check_workload(const SimWorkload *w, const gboolean *present, gint64 top, const char *origin, GError **error)
{
  for (gint64 l = 0; l <= top; l++) {
    if (!present[l]) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: layer %" G_GINT64_FORMAT " has no rows (layers go from 0 to %"
                  G_GINT64_FORMAT " without gaps)", origin, l, top);
      return FALSE;
    }
  }
  if (!sim_workload_bytes_fit(w)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: the inputs and saved tensors, each counted once per reference, add up to more than 4 EiB", origin);
    return FALSE;
  }
  return TRUE;
}

static SimWorkload *
trace_load(const char *data, gsize length, const char *origin, const char *name, const SimDevice *device,
           GError **error)
{
  g_autoptr(GArray) rows = g_array_new(FALSE, TRUE, sizeof(SimTraceRow));
  g_array_set_clear_func(rows, row_clear);
  Header header;
  if (!parse_rows(data, length, origin, &header, rows, error))
    return NULL;

  gint64 top = -1;
  gboolean counted = FALSE;
  for (guint i = 0; i < rows->len; i++) {
    top = MAX(top, g_array_index(rows, SimTraceRow, i).scope);
    counted = counted || g_array_index(rows, SimTraceRow, i).compute;
  }
  if (top < 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: no rows of any layer (expected layer 0 and up)", origin);
    return NULL;
  }
  if (device && !counted) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: no op counts (columns flops and moved, as "
                "python/offsim_torch/recorder.py writes them): give [trace] forward (and backward) instead", origin);
    return NULL;
  }
  g_autoptr(SimWorkload) w = sim_workload_new(name, (guint)top + 1);
  g_autofree gboolean *present = g_new0(gboolean, top + 1);
  g_autofree Counts *counts = g_new0(Counts, top + 3);
  g_autoptr(GHashTable) owner = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  g_autoptr(GHashTable) names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) here = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  Builder b = { w, origin, header.references, owner, names, here };

  for (guint i = 0; i < rows->len; i++) {
    SimTraceRow *r = &g_array_index(rows, SimTraceRow, i);
    if (r->scope >= 0)
      present[r->scope] = TRUE;
    if (r->compute) {
      count_row(counts, r, top);
      continue;
    }
    SimLayer *layer = scope_layer(w, r->scope);
    if (!r->saved) {
      if (strcmp(r->name, "input") == 0 && layer->input_bytes == 0)
        layer->input_bytes = r->bytes;
      continue;
    }
    gboolean is_new, shared;
    if (!storage_row(&b, layer, r, &is_new, &shared, error))
      return NULL;
    if (is_new)
      add_tensor(&b, layer, r, shared);
  }
  if (!check_workload(w, present, top, origin, error))
    return NULL;
  if (device && !apply_times(w, counts, top, origin, device, error))
    return NULL;
  if (device && header.places && !sim_trace_build_ops(w, rows, origin, device, error))
    return NULL;
  return g_steal_pointer(&w);
}

SimWorkload *
sim_trace_load_data(const char *data, gsize length, const char *origin, const char *name, GError **error)
{
  return trace_load(data, length, origin, name, NULL, error);
}

SimWorkload *
sim_trace_load_data_timed(const char *data, gsize length, const char *origin, const char *name,
                          const SimDevice *device, GError **error)
{
  return trace_load(data, length, origin, name, device, error);
}

SimWorkload *
sim_trace_load(const char *path, const char *name, GError **error)
{
  g_autofree char *data = NULL;
  gsize len = 0;
  if (!sim_config_read_input(path, NULL, &data, &len, error))
    return NULL;
  return trace_load(data, len, path, name, NULL, error);
}

SimWorkload *
sim_trace_load_timed(const char *path, const char *name, const SimDevice *device, GError **error)
{
  g_autofree char *data = NULL;
  gsize len = 0;
  if (!sim_config_read_input(path, NULL, &data, &len, error))
    return NULL;
  return trace_load(data, len, path, name, device, error);
}
