#include "ledger/ledger.h"

#include "base/error.h"
#include "base/units.h"
#include "input/config.h"

#include <math.h>
#include <string.h>

#define GIB 1073741824.0

LedgerChunk *
ledger_chunk_new(const char *name, gint64 bytes, gint64 reuse_delay_layers, gboolean offloadable)
{
  g_return_val_if_fail(name != NULL, NULL);
  LedgerChunk *c = g_new0(LedgerChunk, 1);
  c->name = g_strdup(name);
  c->bytes = bytes;
  c->reuse_delay_layers = reuse_delay_layers;
  c->offloadable = offloadable;
  return c;
}

void
ledger_chunk_free(LedgerChunk *chunk)
{
  if (chunk == NULL)
    return;
  g_free(chunk->name);
  g_free(chunk);
}

GPtrArray *
ledger_chunks_new(void)
{
  return g_ptr_array_new_with_free_func((GDestroyNotify)ledger_chunk_free);
}

void
ledger_summary_free(LedgerSummary *summary)
{
  if (summary == NULL)
    return;
  g_ptr_array_unref(summary->offloaded_names);
  g_ptr_array_unref(summary->kept_names);
  g_free(summary);
}

const char *
ledger_verdict_name(LedgerVerdict verdict)
{
  switch (verdict) {
  case LEDGER_ACCEPT:
    return "accept";
  case LEDGER_TUNE:
    return "tune";
  case LEDGER_REJECT:
  default:
    return "reject";
  }
}

/* CPython rounds through the shortest-exact decimal machinery (dtoa mode 3):
 * the correctly rounded decimal of the binary value, ties to even.  glibc's
 * printf is exact in the same way, so "%.*f" and back is round() to the bit;
 * x * 10^n, rint, / 10^n is not (it rounds 2.675 up and 1.0005 up). */
double
ledger_round(double x, int ndigits)
{
  g_return_val_if_fail(ndigits >= 0 && ndigits <= 20, x);
  if (!isfinite(x))
    return x;
  char format[8];
  char text[400]; /* DBL_MAX has 309 digits before the point */
  g_snprintf(format, sizeof format, "%%.%df", ndigits);
  g_ascii_formatd(text, sizeof text, format, x);
  return g_ascii_strtod(text, NULL);
}

static double
one_way_ms(gint64 bytes, double bandwidth_gibps)
{
  /* The chapter's expression, in its order, for the same rounding. */
  return (double)bytes / (bandwidth_gibps * GIB) * 1000.0;
}

static gboolean
check_bandwidth(double bandwidth_gibps, GError **error)
{
  if (bandwidth_gibps > 0 && isfinite(bandwidth_gibps))
    return TRUE;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "bandwidth_gbps must be positive, got %g GiB/s", bandwidth_gibps);
  return FALSE;
}

gboolean
ledger_round_trip_ms(gint64 offloaded_bytes, double bandwidth_gibps, double *ms, GError **error)
{
  g_return_val_if_fail(ms != NULL, FALSE);
  if (offloaded_bytes < 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "offloaded_bytes must be non-negative, got %" G_GINT64_FORMAT,
                offloaded_bytes);
    return FALSE;
  }
  if (!check_bandwidth(bandwidth_gibps, error))
    return FALSE;
  *ms = ledger_round(2 * one_way_ms(offloaded_bytes, bandwidth_gibps), 2);
  return TRUE;
}

/* Python's sort key (-reuse_delay_layers, -bytes_, name). */
static int
compare_candidates(gconstpointer pa, gconstpointer pb)
{
  const LedgerChunk *a = *(LedgerChunk *const *)pa;
  const LedgerChunk *b = *(LedgerChunk *const *)pb;
  if (a->reuse_delay_layers != b->reuse_delay_layers)
    return a->reuse_delay_layers > b->reuse_delay_layers ? -1 : 1;
  if (a->bytes != b->bytes)
    return a->bytes > b->bytes ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* The chapter's input checks, in its order. */
static gboolean
check_chunks(GPtrArray *chunks, gint64 *total, GError **error)
{
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < chunks->len; i++) {
    const LedgerChunk *c = g_ptr_array_index(chunks, i);
    if (!g_hash_table_add(seen, c->name)) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "chunk names must be unique: '%s' appears twice", c->name);
      return FALSE;
    }
  }
  for (guint i = 0; i < chunks->len; i++) {
    const LedgerChunk *c = g_ptr_array_index(chunks, i);
    if (c->bytes < 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "chunk bytes must be non-negative: '%s' has %" G_GINT64_FORMAT, c->name, c->bytes);
      return FALSE;
    }
  }
  for (guint i = 0; i < chunks->len; i++) {
    const LedgerChunk *c = g_ptr_array_index(chunks, i);
    if (c->reuse_delay_layers < 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "reuse_delay_layers must be non-negative: '%s' has %" G_GINT64_FORMAT, c->name,
                  c->reuse_delay_layers);
      return FALSE;
    }
  }
  guint64 sum = 0;
  for (guint i = 0; i < chunks->len; i++) {
    const LedgerChunk *c = g_ptr_array_index(chunks, i);
    if (!g_uint64_checked_add(&sum, sum, (guint64)c->bytes) || sum > (guint64)G_MAXINT64) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "the chunks' total bytes do not fit in a 64-bit integer");
      return FALSE;
    }
  }
  *total = (gint64)sum;
  return TRUE;
}

LedgerSummary *
ledger_summarize(GPtrArray *chunks, gint64 budget_bytes, double bandwidth_gibps, GError **error)
{
  g_return_val_if_fail(chunks != NULL, NULL);
  gint64 total = 0;

  if (budget_bytes <= 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "gpu_budget_bytes must be positive, got %" G_GINT64_FORMAT,
                budget_bytes);
    return NULL;
  }
  if (!check_bandwidth(bandwidth_gibps, error) || !check_chunks(chunks, &total, error))
    return NULL;

  g_autoptr(GPtrArray) candidates = g_ptr_array_new();
  for (guint i = 0; i < chunks->len; i++) {
    LedgerChunk *c = g_ptr_array_index(chunks, i);
    if (c->offloadable)
      g_ptr_array_add(candidates, c);
  }
  g_ptr_array_sort(candidates, compare_candidates);

  LedgerSummary *s = g_new0(LedgerSummary, 1);
  s->offloaded_names = g_ptr_array_new_with_free_func(g_free);
  s->kept_names = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GHashTable) offloaded = g_hash_table_new(g_str_hash, g_str_equal);
  gint64 kept = total;
  for (guint i = 0; i < candidates->len && kept > budget_bytes; i++) {
    const LedgerChunk *c = g_ptr_array_index(candidates, i);
    kept -= c->bytes;
    g_ptr_array_add(s->offloaded_names, g_strdup(c->name));
    g_hash_table_add(offloaded, c->name);
  }
  for (guint i = 0; i < chunks->len; i++) {
    const LedgerChunk *c = g_ptr_array_index(chunks, i);
    if (!g_hash_table_contains(offloaded, c->name))
      g_ptr_array_add(s->kept_names, g_strdup(c->name));
  }

  s->total_bytes = total;
  s->budget_bytes = budget_bytes;
  s->kept_bytes = kept;
  s->offloaded_bytes = total - kept;
  s->overflow_bytes = MAX(kept - budget_bytes, 0);
  s->feasible = s->overflow_bytes == 0;
  s->bandwidth_gibps = bandwidth_gibps;
  s->transfer_ms = ledger_round(s->offloaded_bytes ? one_way_ms(s->offloaded_bytes, bandwidth_gibps) : 0.0, 2);
  gboolean ok = ledger_round_trip_ms(s->offloaded_bytes, bandwidth_gibps, &s->round_trip_ms, NULL);
  g_assert(ok); /* both inputs were checked above */
  s->pressure_ratio = ledger_round((double)total / (double)budget_bytes, 3);
  s->saved_ratio = ledger_round(total ? (double)s->offloaded_bytes / (double)total : 0.0, 3);
  return s;
}

gboolean
ledger_recommend(const LedgerSummary *s, double min_saved_ratio, double max_transfer_ms,
                         LedgerVerdict *verdict, GError **error)
{
  g_return_val_if_fail(s != NULL && verdict != NULL, FALSE);
  if (s->offloaded_bytes <= 0) {
    *verdict = LEDGER_REJECT;
    return TRUE;
  }
  if (min_saved_ratio < 0 || max_transfer_ms < 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "policy thresholds must be non-negative, got min_saved_ratio %g and max_transfer_ms %g",
                min_saved_ratio, max_transfer_ms);
    return FALSE;
  }
  gboolean strict = s->kept_bytes <= s->budget_bytes && s->saved_ratio >= min_saved_ratio &&
                    s->transfer_ms <= max_transfer_ms;
  gboolean relaxed = s->saved_ratio >= min_saved_ratio / 2 && s->transfer_ms <= max_transfer_ms * 2;
  if (!s->feasible)
    *verdict = LEDGER_REJECT;
  else if (strict)
    *verdict = LEDGER_ACCEPT;
  else if (relaxed)
    *verdict = LEDGER_TUNE;
  else
    *verdict = LEDGER_REJECT;
  return TRUE;
}

gboolean
ledger_compare_checkpointing(const LedgerSummary *s, gint64 checkpoint_saved_bytes,
                                     double checkpoint_extra_ms, LedgerComparison *comparison,
                                     GError **error)
{
  g_return_val_if_fail(s != NULL && comparison != NULL, FALSE);
  /* `!(x >= 0)` also refuses NaN, which Python would let through. */
  if (checkpoint_saved_bytes < 0 || !(checkpoint_extra_ms >= 0)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "checkpoint values must be non-negative, got %" G_GINT64_FORMAT " bytes and %g ms",
                checkpoint_saved_bytes, checkpoint_extra_ms);
    return FALSE;
  }
  double offload_score = (double)s->offloaded_bytes / MAX(s->transfer_ms, 1e-6);
  double checkpoint_score = (double)checkpoint_saved_bytes / MAX(checkpoint_extra_ms, 1e-6);
  comparison->prefer_offload = offload_score >= checkpoint_score;
  comparison->offload_score = ledger_round(offload_score, 3);
  comparison->checkpoint_score = ledger_round(checkpoint_score, 3);
  return TRUE;
}

/* ---- CSV ---------------------------------------------------------------- */

static const char *const csv_columns[] = { "name", "bytes", "reuse_delay_layers", "offloadable" };
#define CSV_HEADER "name,bytes,reuse_delay_layers,offloadable"

static const char *
skip_blanks(const char *p)
{
  while (*p == ' ' || *p == '\t')
    p++;
  return p;
}

/* Splits one line (no line end) into fields, RFC 4180 quoting within the
 * line.  On failure returns FALSE with *problem set. */
static gboolean
csv_split(const char *line, GPtrArray *fields, char **problem)
{
  const char *p = line;
  for (;;) {
    GString *field = g_string_new(NULL);
    p = skip_blanks(p);
    if (*p == '"') {
      for (p++;; p++) {
        if (*p == '\0') {
          g_string_free(field, TRUE);
          *problem = g_strdup("a quoted field has no closing quote (quoted fields may not span lines)");
          return FALSE;
        }
        if (*p == '"' && p[1] == '"')
          p++;
        else if (*p == '"')
          break;
        g_string_append_c(field, *p);
      }
      p = skip_blanks(p + 1);
      if (*p != ',' && *p != '\0') {
        g_string_free(field, TRUE);
        *problem = g_strdup_printf("field %u: text after the closing quote", fields->len + 1);
        return FALSE;
      }
    } else {
      const char *end = p + strcspn(p, ",");
      const char *quote = memchr(p, '"', (gsize)(end - p));
      if (quote) {
        g_string_free(field, TRUE);
        *problem = g_strdup_printf("field %u: a quote inside an unquoted field (quote the whole field and "
                                   "double the quote: \"say \"\"hi\"\"\")",
                                   fields->len + 1);
        return FALSE;
      }
      const char *last = end;
      while (last > p && (last[-1] == ' ' || last[-1] == '\t'))
        last--;
      g_string_append_len(field, p, last - p);
      p = end;
    }
    g_ptr_array_add(fields, g_string_free(field, FALSE));
    if (*p == '\0')
      return TRUE;
    p++; /* the comma */
  }
}

/* An optional sign and digits: the plain integers of the chapter. */
static gboolean
is_integer(const char *text)
{
  const char *p = text + (*text == '+' || *text == '-');
  return *p != '\0' && strspn(p, "0123456789") == strlen(p);
}

/* A plain integer in [0, max]; `what` names it in the chapter's words when it
 * is negative.  Digits beyond 64 bits are too large or negative, not wrapped. */
static gboolean
csv_integer(const char *text, const char *what, gint64 max, gint64 *value, char **problem)
{
  gint64 v = 0;
  gboolean in_range = g_ascii_string_to_signed(text, 10, G_MININT64, G_MAXINT64, &v, NULL);
  if (text[0] == '-' && (!in_range || v < 0)) {
    *problem = g_strdup_printf("%s must be non-negative, got '%s'", what, text);
    return FALSE;
  }
  if (!in_range || v > max) {
    *problem = g_strdup_printf("'%s' is too large (at most %" G_GINT64_FORMAT ")", text, max);
    return FALSE;
  }
  *value = v;
  return TRUE;
}

/* Plain bytes as in the chapter, or a size with a unit as in the rest of offsim. */
static gboolean
csv_bytes(const char *text, gint64 *bytes, char **problem)
{
  if (is_integer(text))
    return csv_integer(text, "chunk bytes", (gint64)SIM_UNITS_MAX_BYTES, bytes, problem);
  if (text[0] == '-') {
    *problem = g_strdup_printf("chunk bytes must be non-negative, got '%s'", text);
    return FALSE;
  }
  if (text[0] == '\0') {
    *problem = g_strdup("expected bytes or a size such as 256MiB, got an empty field");
    return FALSE;
  }
  g_autoptr(GError) local = NULL;
  guint64 size = 0;
  if (!sim_units_parse_size(text, &size, &local)) {
    *problem = g_strdup(local->message);
    return FALSE;
  }
  *bytes = (gint64)size;
  return TRUE;
}

static gboolean
csv_delay(const char *text, gint64 *delay, char **problem)
{
  if (is_integer(text))
    return csv_integer(text, "reuse_delay_layers", G_MAXINT64, delay, problem);
  *problem = g_strdup_printf("expected a whole number of layers, got '%s'", text);
  return FALSE;
}

static gboolean
csv_bool(const char *text, gboolean *value, char **problem)
{
  static const char *const yes[] = { "true", "yes", "1" };
  static const char *const no[] = { "false", "no", "0" };
  for (guint i = 0; i < G_N_ELEMENTS(yes); i++) {
    if (g_ascii_strcasecmp(text, yes[i]) == 0 || g_ascii_strcasecmp(text, no[i]) == 0) {
      *value = g_ascii_strcasecmp(text, yes[i]) == 0;
      return TRUE;
    }
  }
  *problem = g_strdup_printf("expected true, false, yes, no, 1 or 0, got '%s'", text);
  return FALSE;
}

static gboolean
csv_name(const char *text, GHashTable *seen, char **problem)
{
  if (*text == '\0') {
    *problem = g_strdup("expected a non-empty name");
    return FALSE;
  }
  if (!g_utf8_validate(text, -1, NULL)) {
    *problem = g_strdup("the name is not valid UTF-8");
    return FALSE;
  }
  for (const char *p = text; *p; p++) {
    if ((guchar)*p < 0x20 || *p == 0x7f) {
      *problem = g_strdup_printf("control character 0x%02x in the name", (guchar)*p);
      return FALSE;
    }
  }
  gpointer first = g_hash_table_lookup(seen, text);
  if (first) {
    *problem = g_strdup_printf("chunk names must be unique: '%s' is also on line %u", text, GPOINTER_TO_UINT(first));
    return FALSE;
  }
  return TRUE;
}

/* One data row into a chunk; `column` names the field a problem is in, NULL
 * for the row as a whole. */
static LedgerChunk *
csv_row(GPtrArray *fields, GHashTable *seen, const char **column, char **problem)
{
  gint64 bytes = 0, delay = 0;
  gboolean offloadable = TRUE;
  const char *const *f = (const char *const *)fields->pdata;

  *column = NULL;
  if (fields->len != G_N_ELEMENTS(csv_columns)) {
    if (fields->len < G_N_ELEMENTS(csv_columns))
      *problem = g_strdup_printf("%u fields, expected 4 (" CSV_HEADER "): no %s", fields->len,
                                 csv_columns[fields->len]);
    else
      *problem = g_strdup_printf("%u fields, expected 4 (" CSV_HEADER "): extra field '%s'", fields->len, f[4]);
    return NULL;
  }
  *column = csv_columns[0];
  if (!csv_name(f[0], seen, problem))
    return NULL;
  *column = csv_columns[1];
  if (!csv_bytes(f[1], &bytes, problem))
    return NULL;
  *column = csv_columns[2];
  if (!csv_delay(f[2], &delay, problem))
    return NULL;
  *column = csv_columns[3];
  if (!csv_bool(f[3], &offloadable, problem))
    return NULL;
  return ledger_chunk_new(f[0], bytes, delay, offloadable);
}

static gboolean
csv_header_ok(GPtrArray *fields)
{
  if (fields->len != G_N_ELEMENTS(csv_columns))
    return FALSE;
  for (guint i = 0; i < fields->len; i++)
    if (strcmp(g_ptr_array_index(fields, i), csv_columns[i]) != 0)
      return FALSE;
  return TRUE;
}

GPtrArray *
ledger_parse_csv(const char *text, gsize length, const char *origin, GError **error)
{
  g_return_val_if_fail(text != NULL && origin != NULL, NULL);
  if (memchr(text, '\0', length)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: holds a NUL byte: expected CSV text", origin);
    return NULL;
  }
  sim_config_skip_bom(&text, &length);
  g_autofree char *copy = g_strndup(text, length);
  char *p = copy;

  g_autoptr(GPtrArray) chunks = ledger_chunks_new();
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal); /* name -> first line */
  gboolean have_header = FALSE;
  guint64 total = 0;
  for (guint line_no = 1; *p; line_no++) {
    char *line = p;
    char *nl = strchr(p, '\n');
    p = nl ? nl + 1 : p + strlen(p);
    if (nl)
      *nl = '\0';
    gsize n = strlen(line);
    if (n > 0 && line[n - 1] == '\r')
      line[n - 1] = '\0';
    if (sim_config_blank_line(line))
      continue;

    g_autoptr(GPtrArray) fields = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *problem = NULL;
    const char *column = NULL;
    if (!csv_split(line, fields, &problem)) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: %s", origin, line_no, problem);
      return NULL;
    }
    if (!have_header) {
      if (!csv_header_ok(fields)) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: expected the header '" CSV_HEADER "', got '%s'",
                    origin, line_no, line);
        return NULL;
      }
      have_header = TRUE;
      continue;
    }
    LedgerChunk *c = csv_row(fields, seen, &column, &problem);
    if (c == NULL) {
      if (column)
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: %s: %s", origin, line_no, column, problem);
      else
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: %s", origin, line_no, problem);
      return NULL;
    }
    /* The ledger sums the bytes in 64 bits (check_chunks): a sum past it is
     * named here, at the row that takes it over, where the file is known. */
    if (!g_uint64_checked_add(&total, total, (guint64)c->bytes) || total > (guint64)G_MAXINT64) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: bytes: the chunks' bytes up to this row add up to more "
                  "than 8 EiB (a 64-bit integer, the ledger's total)", origin, line_no);
      ledger_chunk_free(c);
      return NULL;
    }
    g_ptr_array_add(chunks, c);
    g_hash_table_insert(seen, c->name, GUINT_TO_POINTER(line_no));
  }
  if (!have_header) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: empty: expected the header '" CSV_HEADER "'", origin);
    return NULL;
  }
  return g_steal_pointer(&chunks);
}

GPtrArray *
ledger_load_csv(const char *path, GError **error)
{
  g_autofree char *data = NULL;
  gsize length = 0;
  if (!sim_config_read_input(path, "chunks", &data, &length, error))
    return NULL;
  return ledger_parse_csv(data, length, path, error);
}
