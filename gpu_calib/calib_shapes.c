#include "gpu_calib/calib_shapes.h"

#include "base/error.h"

#include <string.h>

const char *const calib_gemm_pass_names[CALIB_GEMM_PASSES] = { "fwd", "dgrad", "wgrad" };

static const char model_expect[] = "[NAME=]HIDDEN,FFN,HEADS,KV_HEADS,HEAD_DIM,VOCAB,TOKENS";

G_GNUC_PRINTF(3, 4)
static gboolean
bad(GError **error, const char *text, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *what = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_autofree char *quoted = sim_error_quote(text);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s, got '%s'", what, quoted);
  return FALSE;
}

/* A whole number in [1, CALIB_SHAPE_MAX_DIM], surrounding blanks allowed. */
static gboolean
parse_dim(const char *text, guint64 *value)
{
  g_autofree char *piece = g_strstrip(g_strdup(text));
  return g_ascii_string_to_unsigned(piece, 10, 1, CALIB_SHAPE_MAX_DIM, value, NULL);
}

/* ---- a model's dimensions ----------------------------------------------- */

gboolean
calib_shapes_parse_model(const char *text, CalibModelDims *dims, GError **error)
{
  g_return_val_if_fail(text != NULL && dims != NULL, FALSE);
  memset(dims, 0, sizeof *dims);
  const char *numbers = text, *eq = strchr(text, '=');
  g_strlcpy(dims->name, "model", sizeof dims->name);
  if (eq) {
    gsize len = (gsize)(eq - text);
    if (len == 0 || len >= sizeof dims->name ||
        strspn(text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len)
      return bad(error, text, "expected %s with NAME of 1 to %zu letters, digits, '.', '_' or '-'", model_expect,
                 sizeof dims->name - 1);
    memcpy(dims->name, text, len);
    dims->name[len] = '\0';
    numbers = eq + 1;
  }
  g_auto(GStrv) parts = g_strsplit(numbers, ",", -1);
  guint64 *fields[] = { &dims->hidden, &dims->ffn, &dims->heads, &dims->kv_heads, &dims->head_dim, &dims->vocab,
                        &dims->tokens };
  if (g_strv_length(parts) != G_N_ELEMENTS(fields))
    return bad(error, text, "expected %s (seven whole numbers), %u given", model_expect, g_strv_length(parts));
  static const char *const names[] = { "HIDDEN", "FFN", "HEADS", "KV_HEADS", "HEAD_DIM", "VOCAB", "TOKENS" };
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++)
    if (!parse_dim(parts[i], fields[i]))
      return bad(error, text, "expected %s: %s must be a whole number from 1 to %d", model_expect, names[i],
                 CALIB_SHAPE_MAX_DIM);
  if (dims->kv_heads > dims->heads)
    return bad(error, text, "expected %s: KV_HEADS (%" G_GUINT64_FORMAT ") at most HEADS (%" G_GUINT64_FORMAT ")",
               model_expect, dims->kv_heads, dims->heads);
  return TRUE;
}

/* ---- lists of shapes ----------------------------------------------------- */

/* Adds m x n x k to `shapes`, or counts one more use of the same shape. */
static void
add_shape(GArray *shapes, guint64 m, guint64 n, guint64 k, CalibGemmPass pass, const char *name)
{
  for (guint i = 0; i < shapes->len; i++) {
    CalibGemmShape *s = &g_array_index(shapes, CalibGemmShape, i);
    if ((guint64)s->m == m && (guint64)s->n == n && (guint64)s->k == k) {
      s->uses++;
      return;
    }
  }
  CalibGemmShape s = { .m = (int)m, .n = (int)n, .k = (int)k, .pass = pass, .uses = 1 };
  g_strlcpy(s.name, name, sizeof s.name);
  g_array_append_val(shapes, s);
}

/* The largest operand of m x n x k, in elements. */
static guint64
largest_operand(guint64 m, guint64 n, guint64 k)
{
  return MAX(MAX(m * k, n * k), m * n);
}

gboolean
calib_shapes_add_model(GArray *shapes, const CalibModelDims *d, GError **error)
{
  g_return_val_if_fail(shapes != NULL && d != NULL, FALSE);
  const struct {
    const char *name;
    guint64 in, out;
  } linears[] = {
    { "q", d->hidden, d->heads * d->head_dim },   { "k", d->hidden, d->kv_heads * d->head_dim },
    { "v", d->hidden, d->kv_heads * d->head_dim }, { "o", d->heads * d->head_dim, d->hidden },
    { "gate", d->hidden, d->ffn },                 { "up", d->hidden, d->ffn },
    { "down", d->ffn, d->hidden },                 { "lm_head", d->hidden, d->vocab },
  };
  for (guint i = 0; i < G_N_ELEMENTS(linears); i++) {
    guint64 in = linears[i].in, out = linears[i].out;
    /* Every pass has the same three operands, tokens x in, out x in and tokens x out. */
    if (in > CALIB_SHAPE_MAX_DIM || out > CALIB_SHAPE_MAX_DIM ||
        largest_operand(d->tokens, out, in) > CALIB_SHAPE_MAX_ELEMENTS) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: %s (%" G_GUINT64_FORMAT " -> %" G_GUINT64_FORMAT " over %" G_GUINT64_FORMAT
                  " tokens): an operand over 2^31 elements or a dimension over %d",
                  d->name, linears[i].name, in, out, d->tokens, CALIB_SHAPE_MAX_DIM);
      return FALSE;
    }
  }
  for (int pass = 0; pass < CALIB_GEMM_PASSES; pass++)
    for (guint i = 0; i < G_N_ELEMENTS(linears); i++) {
      guint64 in = linears[i].in, out = linears[i].out, t = d->tokens;
      g_autofree char *name = g_strdup_printf("%s %s.%s", d->name, linears[i].name, calib_gemm_pass_names[pass]);
      if (pass == CALIB_GEMM_FORWARD)
        add_shape(shapes, t, out, in, pass, name);
      else if (pass == CALIB_GEMM_DGRAD)
        add_shape(shapes, t, in, out, pass, name);
      else
        add_shape(shapes, out, in, t, pass, name);
    }
  return TRUE;
}

gboolean
calib_shapes_parse_list(GArray *shapes, const char *text, GError **error)
{
  g_return_val_if_fail(shapes != NULL && text != NULL, FALSE);
  g_auto(GStrv) items = g_strsplit(text, ",", -1);
  g_autoptr(GArray) parsed = g_array_new(FALSE, FALSE, sizeof(CalibGemmShape));
  g_array_append_vals(parsed, shapes->data, shapes->len);
  for (guint i = 0; items[i]; i++) {
    g_autofree char *item = g_strstrip(g_strdup(items[i]));
    g_auto(GStrv) dims = g_strsplit(item, "x", -1);
    guint64 v[3];
    if (g_strv_length(dims) != 3 || !parse_dim(dims[0], &v[0]) || !parse_dim(dims[1], &v[1]) ||
        !parse_dim(dims[2], &v[2]))
      return bad(error, item, "item %u: expected MxNxK, three whole numbers from 1 to %d such as 4096x4096x4096",
                 i + 1, CALIB_SHAPE_MAX_DIM);
    if (largest_operand(v[0], v[1], v[2]) > CALIB_SHAPE_MAX_ELEMENTS)
      return bad(error, item, "item %u: an operand of at most 2^31 elements", i + 1);
    add_shape(parsed, v[0], v[1], v[2], CALIB_GEMM_FORWARD, item);
  }
  g_array_set_size(shapes, 0);
  g_array_append_vals(shapes, parsed->data, parsed->len);
  return TRUE;
}

/* ---- throughput ------------------------------------------------------------ */

double
calib_gemm_flops(int m, int n, int k)
{
  return 2.0 * (double)m * (double)n * (double)k;
}

double
calib_gemm_tflops(int m, int n, int k, double seconds)
{
  return calib_gemm_flops(m, n, k) / seconds * 1e-12;
}
