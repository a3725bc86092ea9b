/* cli/budget.c — `offsim budget`: the seed chapter's activation budget ledger (docs/reference.md)
 * on a CSV of chunks (ledger/ledger.h), as a table or JSON.
 *
 * Options are checked before the file is read, and the command line refuses
 * every negative threshold outright; only ledger_recommend keeps the
 * chapter's quirk of not looking at thresholds when nothing is offloaded. */
#include "cli/cli.h"

#include "base/error.h"
#include "base/units.h"
#include "cli/report.h"
#include "ledger/ledger.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The formats `offsim budget` prints. */
#define BUDGET_FORMATS (CLI_FORMATS_TABLE | CLI_FORMATS_JSON)

typedef struct {
  char *budget, *bandwidth, *format, *min_saved_ratio, *max_transfer, *checkpoint_saved, *checkpoint_extra;
} BudgetOptions;

static void
budget_options_clear(BudgetOptions *o)
{
  g_free(o->budget);
  g_free(o->bandwidth);
  g_free(o->format);
  g_free(o->min_saved_ratio);
  g_free(o->max_transfer);
  g_free(o->checkpoint_saved);
  g_free(o->checkpoint_extra);
}

/* The options, checked and in the ledger's units. */
typedef struct {
  gint64 budget_bytes;
  double bandwidth_gibps;
  gboolean json;
  double min_saved_ratio, max_transfer_ms;
  gboolean checkpoint;
  gint64 checkpoint_saved_bytes;
  double checkpoint_extra_ms;
} BudgetRequest;

static gboolean
parse_size_option(const char *name, const char *text, gint64 *bytes, GError **error)
{
  guint64 v = 0;
  if (!sim_units_parse_size(text, &v, error)) {
    g_prefix_error(error, "--%s: ", name);
    return FALSE;
  }
  *bytes = (gint64)v;
  return TRUE;
}

/* Milliseconds as typed: units.c multiplies by 1e-3 and we by 1e3, which can
 * leave 42.97ms at 42.970000000000006; printing to 15 digits and reading back
 * returns the decimal the user wrote, so that a threshold of 42.97ms admits a
 * transfer of 42.97 ms. */
static gboolean
parse_ms_option(const char *name, const char *text, double *ms, GError **error)
{
  double seconds = 0;
  if (!sim_units_parse_time(text, &seconds, error)) {
    g_prefix_error(error, "--%s: ", name);
    return FALSE;
  }
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  *ms = g_ascii_strtod(g_ascii_formatd(buf, sizeof buf, "%.15g", seconds * 1e3), NULL);
  return TRUE;
}

static gboolean
parse_request(const BudgetOptions *o, BudgetRequest *r, GError **error)
{
  CliFormat format;
  if (!cli_report_parse_format(o->format, BUDGET_FORMATS, &format, error))
    return FALSE;
  r->json = format == CLI_FORMAT_JSON;
  if (o->budget == NULL || o->bandwidth == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--%s is required", o->budget ? "bandwidth" : "budget");
    return FALSE;
  }
  guint64 budget = 0;
  if (!cli_parse_budget(o->budget, "the GPU budget must be positive", &budget, error))
    return FALSE;
  r->budget_bytes = (gint64)budget; /* at most 2^62: sizes are capped there */
  double rate = 0;
  if (!sim_units_parse_rate(o->bandwidth, &rate, error)) {
    g_prefix_error(error, "--bandwidth: ");
    return FALSE;
  }
  r->bandwidth_gibps = rate / 1073741824.0; /* the chapter's bandwidth_gbps is GiB/s */

  r->min_saved_ratio = LEDGER_MIN_SAVED_RATIO;
  if (o->min_saved_ratio) {
    char *end = NULL;
    r->min_saved_ratio = g_ascii_strtod(o->min_saved_ratio, &end);
    g_autofree char *quoted = sim_error_quote(o->min_saved_ratio);
    if (end == o->min_saved_ratio || *end != '\0' || !isfinite(r->min_saved_ratio)) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--min-saved-ratio: expected a number such as 0.25, got '%s'",
                  quoted);
      return FALSE;
    }
    if (r->min_saved_ratio < 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "--min-saved-ratio: policy thresholds must be non-negative, got '%s'", quoted);
      return FALSE;
    }
  }
  r->max_transfer_ms = LEDGER_MAX_TRANSFER_MS;
  if (o->max_transfer && !parse_ms_option("max-transfer", o->max_transfer, &r->max_transfer_ms, error))
    return FALSE;

  if ((o->checkpoint_saved == NULL) != (o->checkpoint_extra == NULL)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--checkpoint-saved and --checkpoint-extra go together: "
                "give both to compare offload with checkpointing");
    return FALSE;
  }
  r->checkpoint = o->checkpoint_saved != NULL;
  if (r->checkpoint && (!parse_size_option("checkpoint-saved", o->checkpoint_saved, &r->checkpoint_saved_bytes,
                                           error) ||
                        !parse_ms_option("checkpoint-extra", o->checkpoint_extra, &r->checkpoint_extra_ms, error)))
    return FALSE;
  return TRUE;
}

/* ---- JSON --------------------------------------------------------------- */

static JsonArray *
names_json(GPtrArray *names)
{
  JsonArray *array = json_array_sized_new(names->len);
  for (guint i = 0; i < names->len; i++)
    json_array_add_string_element(array, g_ptr_array_index(names, i));
  return array;
}

static char *
format_json(const LedgerSummary *s, LedgerVerdict verdict, const BudgetRequest *r,
            const LedgerComparison *cmp)
{
  g_autoptr(JsonObject) o = json_object_new();
  json_object_set_int_member(o, "total_bytes", s->total_bytes);
  json_object_set_int_member(o, "kept_bytes", s->kept_bytes);
  json_object_set_int_member(o, "offloaded_bytes", s->offloaded_bytes);
  json_object_set_array_member(o, "offloaded_names", names_json(s->offloaded_names));
  json_object_set_array_member(o, "kept_names", names_json(s->kept_names));
  json_object_set_double_member(o, "transfer_ms", s->transfer_ms);
  json_object_set_double_member(o, "round_trip_ms", s->round_trip_ms);
  json_object_set_double_member(o, "pressure_ratio", s->pressure_ratio);
  json_object_set_double_member(o, "saved_ratio", s->saved_ratio);
  json_object_set_boolean_member(o, "feasible", s->feasible);
  json_object_set_int_member(o, "overflow_bytes", s->overflow_bytes);
  json_object_set_string_member(o, "verdict", ledger_verdict_name(verdict));
  /* Extras: the inputs the figures came from. */
  json_object_set_int_member(o, "budget_bytes", s->budget_bytes);
  json_object_set_double_member(o, "bandwidth_gib_per_s", s->bandwidth_gibps);
  json_object_set_double_member(o, "min_saved_ratio", r->min_saved_ratio);
  json_object_set_double_member(o, "max_transfer_ms", r->max_transfer_ms);
  if (cmp) {
    JsonObject *c = json_object_new();
    json_object_set_int_member(c, "checkpoint_saved_bytes", r->checkpoint_saved_bytes);
    json_object_set_double_member(c, "checkpoint_extra_ms", r->checkpoint_extra_ms);
    json_object_set_double_member(c, "offload_score", cmp->offload_score);
    json_object_set_double_member(c, "checkpoint_score", cmp->checkpoint_score);
    json_object_set_string_member(c, "preferred", cmp->prefer_offload ? "offload" : "checkpointing");
    json_object_set_object_member(o, "checkpoint", c);
  } else {
    json_object_set_null_member(o, "checkpoint");
  }
  g_autoptr(JsonNode) root = json_node_init_object(json_node_alloc(), o);
  return cli_report_json_to_string(root);
}

/* ---- table -------------------------------------------------------------- */

/* "saved 0.478 >= 0.25 and one way 42.97 ms <= 60 ms" against the thresholds
 * (min, max); with `failed_only`, just the ones missed. */
static char *
checks_text(const LedgerSummary *s, double min, double max, gboolean failed_only)
{
  GString *t = g_string_new(NULL);
  gboolean saved_ok = s->saved_ratio >= min, time_ok = s->transfer_ms <= max;
  if (!failed_only || !saved_ok)
    g_string_append_printf(t, "saved %.3f %s %g", s->saved_ratio, saved_ok ? ">=" : "<", min);
  if (!failed_only || !time_ok)
    g_string_append_printf(t, "%sone way %.2f ms %s %g ms", t->len ? " and " : "", s->transfer_ms,
                           time_ok ? "<=" : ">", max);
  return g_string_free(t, FALSE);
}

/* Why the verdict is what it is, in the order the chapter decides it. */
static void
explain_verdict(GString *out, const LedgerSummary *s, LedgerVerdict verdict, const BudgetRequest *r)
{
  const char *name = ledger_verdict_name(verdict);
  double min = r->min_saved_ratio, max = r->max_transfer_ms;
  if (s->offloaded_bytes <= 0) {
    g_autofree char *over = sim_units_format_size((guint64)s->overflow_bytes);
    if (s->feasible)
      g_string_append_printf(out, "%s: nothing is offloaded, the chunks already fit the budget\n", name);
    else
      g_string_append_printf(out, "%s: nothing can be offloaded, and what must stay is %s over the budget\n", name,
                             over);
  } else if (!s->feasible) {
    g_autofree char *over = sim_units_format_size((guint64)s->overflow_bytes);
    g_string_append_printf(out, "%s: infeasible, what must stay is %s over the budget\n", name, over);
  } else if (verdict == LEDGER_ACCEPT) {
    g_autofree char *met = checks_text(s, min, max, FALSE);
    g_string_append_printf(out, "%s: %s\n", name, met);
  } else if (verdict == LEDGER_TUNE) {
    g_autofree char *met = checks_text(s, min / 2, max * 2, FALSE);
    g_autofree char *missed = checks_text(s, min, max, TRUE);
    g_string_append_printf(out, "%s: meets the relaxed thresholds, %s,\n%11sbut not the strict ones: %s\n", name,
                           met, "", missed);
  } else {
    g_autofree char *missed = checks_text(s, min / 2, max * 2, TRUE);
    g_string_append_printf(out, "%s: misses even the relaxed thresholds: %s\n", name, missed);
  }
}

static char *
format_table(const char *path, GPtrArray *chunks, const LedgerSummary *s, LedgerVerdict verdict,
             const BudgetRequest *r, const LedgerComparison *cmp)
{
  GString *out = g_string_new(NULL);
  g_autofree char *total = sim_units_format_size((guint64)s->total_bytes);
  g_autofree char *budget = sim_units_format_size((guint64)s->budget_bytes);
  g_autofree char *kept = sim_units_format_size((guint64)s->kept_bytes);
  g_autofree char *offloaded = sim_units_format_size((guint64)s->offloaded_bytes);
  g_autofree char *over = sim_units_format_size((guint64)s->overflow_bytes);

  g_string_append_printf(out, "activation budget: %s\n", path);
  g_string_append_printf(out, "%u chunk%s, %s in all; budget %s (pressure %.3f); link %.3g GiB/s\n\n", chunks->len,
                         chunks->len == 1 ? "" : "s", total, budget, s->pressure_ratio, s->bandwidth_gibps);

  int w = 5;
  for (guint i = 0; i < chunks->len; i++)
    w = MAX(w, (int)g_utf8_strlen(((LedgerChunk *)g_ptr_array_index(chunks, i))->name, -1));
  g_string_append_printf(out, "%-*s %10s %12s %12s  %s\n", w, "chunk", "size", "reuse delay", "offloadable", "plan");
  /* Names are unique: a table, not a search per row (100,000 chunks). */
  g_autoptr(GHashTable) offload_order = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint k = 0; k < s->offloaded_names->len; k++)
    g_hash_table_insert(offload_order, g_ptr_array_index(s->offloaded_names, k), GUINT_TO_POINTER(k + 1));
  for (guint i = 0; i < chunks->len; i++) {
    const LedgerChunk *c = g_ptr_array_index(chunks, i);
    g_autofree char *size = sim_units_format_size((guint64)c->bytes);
    guint order = GPOINTER_TO_UINT(g_hash_table_lookup(offload_order, c->name));
    g_autofree char *plan = order ? g_strdup_printf("offload #%u", order) : g_strdup("keep");
    /* Pad by characters, not bytes, so UTF-8 names keep the columns straight. */
    int pad = w - (int)g_utf8_strlen(c->name, -1);
    g_string_append_printf(out, "%s%*s %10s %12" G_GINT64_FORMAT " %12s  %s\n", c->name, pad, "", size,
                           c->reuse_delay_layers, c->offloadable ? "yes" : "no", plan);
  }

  g_string_append_printf(out, "\nkept       %s of a %s budget: %s", kept, budget, s->feasible ? "feasible" : "infeasible");
  if (!s->feasible)
    g_string_append_printf(out, ", %s over", over);
  g_string_append_printf(out, "\noffloaded  %s, saved ratio %.3f: %.2f ms one way, %.2f ms round trip\n", offloaded,
                         s->saved_ratio, s->transfer_ms, s->round_trip_ms);
  g_string_append(out, "verdict    ");
  explain_verdict(out, s, verdict, r);

  if (cmp) {
    g_autofree char *ck = sim_units_format_size((guint64)r->checkpoint_saved_bytes);
    g_string_append(out, "\noffload vs checkpointing, bytes saved per ms of extra time:\n");
    g_string_append_printf(out, "  offload        %16.3f  (%s for %.2f ms one way)\n", cmp->offload_score, offloaded,
                           s->transfer_ms);
    g_string_append_printf(out, "  checkpointing  %16.3f  (%s for %g ms of recompute)\n", cmp->checkpoint_score, ck,
                           r->checkpoint_extra_ms);
    g_string_append_printf(out, "  preferred      %s\n", cmp->prefer_offload ? "offload" : "checkpointing");
  }
  return g_string_free(out, FALSE);
}

/* ---- the command -------------------------------------------------------- */

static gboolean
run_budget(const char *path, const BudgetOptions *o, GError **error)
{
  BudgetRequest r = { 0 };
  LedgerVerdict verdict = LEDGER_REJECT;
  LedgerComparison cmp = { 0 };

  if (!parse_request(o, &r, error))
    return FALSE;
  g_autoptr(GPtrArray) chunks = ledger_load_csv(path, error);
  if (chunks == NULL)
    return FALSE;
  g_autoptr(LedgerSummary) s = ledger_summarize(chunks, r.budget_bytes, r.bandwidth_gibps, error);
  if (s == NULL || !ledger_recommend(s, r.min_saved_ratio, r.max_transfer_ms, &verdict, error))
    return FALSE;
  if (r.checkpoint &&
      !ledger_compare_checkpointing(s, r.checkpoint_saved_bytes, r.checkpoint_extra_ms, &cmp, error))
    return FALSE;

  const LedgerComparison *c = r.checkpoint ? &cmp : NULL;
  g_autofree char *text = r.json ? format_json(s, verdict, &r, c) : format_table(path, chunks, s, verdict, &r, c);
  return cli_print(text, error);
}

int
cli_budget_main(int argc, char **argv)
{
  BudgetOptions o = { 0 };
  GError *error = NULL;
  g_autofree char *format_help = cli_report_format_help(BUDGET_FORMATS);
  const GOptionEntry entries[] = {
    { "budget", 'b', 0, G_OPTION_ARG_STRING, &o.budget, "Device memory for activations, a size such as 384MiB "
      "(required)", "SIZE" },
    { "bandwidth", 'w', 0, G_OPTION_ARG_STRING, &o.bandwidth, "Link bandwidth, a rate (required); the chapter's 8.0 "
      "is 8GiB/s", "RATE" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &o.format, format_help, "FORMAT" },
    { "min-saved-ratio", 0, 0, G_OPTION_ARG_STRING, &o.min_saved_ratio, "Accept from this saved ratio (0.25); "
      "tune from half of it", "RATIO" },
    { "max-transfer", 0, 0, G_OPTION_ARG_STRING, &o.max_transfer, "Accept up to this one-way time (60ms); tune up "
      "to twice it", "TIME" },
    { "checkpoint-saved", 0, 0, G_OPTION_ARG_STRING, &o.checkpoint_saved, "Compare with checkpointing that saves "
      "SIZE...", "SIZE" },
    { "checkpoint-extra", 0, 0, G_OPTION_ARG_STRING, &o.checkpoint_extra, "...for TIME of recompute", "TIME" },
    G_OPTION_ENTRY_NULL,
  };
  g_set_prgname("offsim budget");
  g_autoptr(GOptionContext) ctx = g_option_context_new("CHUNKS.csv  - which activations to offload to fit a budget");
  g_option_context_set_summary(ctx, "CHUNKS.csv has the header name,bytes,reuse_delay_layers,offloadable.\n"
                                    "The coldest offloadable chunks (longest reuse delay, then largest, then by "
                                    "name)\nare offloaded until the rest fit --budget.");
  cli_help_describe(ctx, 0);

  int status = 0;
  if (!cli_parse_options(ctx, "budget", entries, &argc, &argv, &status)) {
    /* --help, or an error: printed */
  } else if (argc != 2) {
    g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "budget: expected one CHUNKS.csv file, got %d arguments",
                argc - 1);
    status = cli_fail(error);
  } else if (!run_budget(argv[1], &o, &error)) {
    status = cli_fail(error);
  }
  budget_options_clear(&o);
  return status;
}
