/* cli/check.c — `offsim check`: what a real step measured (a Kineto trace, a
 * memory snapshot), beside what offsim predicts for the scenario said to
 * describe it.
 *
 * Only the figures the files show directly.  From a trace
 * (sim/input/kineto.h): the step time (ProfilerStep annotations), the GPU's
 * kernel time, the copies each way with the bandwidth they achieved, and
 * each layer's forward and backward kernel time where the trace has layer
 * ranges; per step when the trace has steps.  From a snapshot
 * (sim/input/snapshot.h): peak allocated and reserved bytes, the levels at
 * the dump, and the memory of each record_function range.  The prediction
 * is `offsim run SCENARIO --policy NAME`'s: the kernel time against compute
 * + recompute + optimizer (nominal work), the bandwidth against the link's
 * rate for large pinned copies, a layer's times against the workload
 * layer's nominal ones, the peaks against the run's.  --write-profile
 * writes the device profile the trace gives (sim/input/kineto_profile.h). */
#include "cli/cli.h"

#include "base/error.h"
#include "base/output.h"
#include "cli/report.h"
#include "input/kineto.h"
#include "input/kineto_profile.h"
#include "input/snapshot.h"
#include "result/evaluate.h"

#include <math.h>
#include <string.h>

/* The formats `offsim check` prints. */
#define CHECK_FORMATS (CLI_FORMATS_TABLE | CLI_FORMATS_CSV)

typedef struct {
  char *trace, *snapshot, *write_profile, *policy, *format;
} CheckOptions;

/* One row: the quantity, its measured and predicted values (NAN: none). */
typedef struct {
  char *name;
  double measured, predicted;
} Row;

static void
row_clear(gpointer data)
{
  g_free(((Row *)data)->name);
}

static void
rows_add(GArray *rows, const char *name, double measured, double predicted)
{
  Row r = { g_strdup(name), measured, predicted };
  g_array_append_val(rows, r);
}

/* The snapshot's header line: which device, how much of the run it saw. */
static void
format_snapshot_header(GString *out, const char *path, const SimSnapshot *snap)
{
  g_string_append_printf(out, "snapshot %s: device %u of %u, %u segment%s", path, snap->device, snap->devices,
                         snap->segments, snap->segments == 1 ? "" : "s");
  if (snap->has_trace && snap->untimed)
    g_string_append_printf(out, ", %u trace events without time_us", snap->events);
  else if (snap->has_trace)
    g_string_append_printf(out, ", %u trace events over %.6g s", snap->events, snap->trace_seconds);
  else
    g_string_append(out, ", no trace events: peaks are the dump's levels");
  if (snap->ranges->len)
    g_string_append_printf(out, "; %u record_function range%s\n", snap->ranges->len,
                           snap->ranges->len == 1 ? "" : "s");
  else
    g_string_append(out, "; no record_function ranges: no memory curve by phase\n");
}

static char *
format_rows(const CheckOptions *o, const SimKineto *k, const SimSnapshot *snap, const SimScenario *s,
            const SimResult *r, GArray *rows, CliFormat format)
{
  GString *out = g_string_new(NULL);
  if (format == CLI_FORMAT_CSV) {
    g_string_append(out, "quantity,measured,predicted\n");
    for (guint i = 0; i < rows->len; i++) {
      const Row *row = &g_array_index(rows, Row, i);
      sim_output_csv_field(out, row->name);
      g_string_append_c(out, ',');
      if (!isnan(row->measured))
        sim_output_number(out, row->measured);
      g_string_append_c(out, ',');
      if (!isnan(row->predicted))
        sim_output_number(out, row->predicted);
      g_string_append_c(out, '\n');
    }
    return g_string_free(out, FALSE);
  }
  if (k) {
    g_string_append_printf(out, "trace %s: %u events, %u ProfilerStep%s, %u kernels; %s", o->trace, k->events,
                           k->steps, k->steps == 1 ? "" : "s", k->kernels,
                           k->steps ? "figures per step" : "no steps: figures for the whole trace");
    if (k->layers->len)
      g_string_append_printf(out, "; %u layers (nn.Module: %s ranges)\n", k->layers->len, k->layer_class);
    else
      g_string_append(out, "; no layer ranges in trace: no per-layer times\n");
  }
  if (snap)
    format_snapshot_header(out, o->snapshot, snap);
  if (s)
    g_string_append_printf(out, "predicted: %s, policy %s\n", s->name, r->policy);
  /* The name column fits the longest name (a record_function's can be long). */
  int width = 22;
  for (guint i = 0; i < rows->len; i++)
    width = MAX(width, (int)strlen(g_array_index(rows, Row, i).name));
  g_string_append_printf(out, "\n%-*s %14s %14s\n", width, "quantity", "measured", s ? "predicted" : "");
  for (guint i = 0; i < rows->len; i++) {
    const Row *row = &g_array_index(rows, Row, i);
    g_string_append_printf(out, "%-*s ", width, row->name);
    if (isnan(row->measured))
      g_string_append_printf(out, "%14s", "-");
    else
      g_string_append_printf(out, "%14.6g", row->measured);
    if (s && !isnan(row->predicted))
      g_string_append_printf(out, " %14.6g", row->predicted);
    else if (s)
      g_string_append_printf(out, " %14s", "-");
    g_string_append_c(out, '\n');
  }
  return g_string_free(out, FALSE);
}

static void
trace_rows(GArray *rows, const SimKineto *k, const SimScenario *s, const SimResult *r)
{
  /* Per step when the trace has steps: a prediction is one step's. */
  double per = k->steps ? k->steps : 1;
  rows_add(rows, "step_ms", k->steps ? k->step_seconds * 1e3 : NAN, r ? r->step_ms : NAN);
  rows_add(rows, "gpu_kernel_ms", k->kernel_seconds * 1e3 / per,
           r ? r->compute_ms + r->recompute_ms + r->optimizer_ms : NAN);
  static const char *const names[SIM_KINETO_DIRECTIONS][4] = {
    { "h2d_copies", "h2d_bytes", "h2d_ms", "h2d_gb_per_s" },
    { "d2h_copies", "d2h_bytes", "d2h_ms", "d2h_gb_per_s" },
    { "other_copies", "other_bytes", "other_ms", "other_gb_per_s" },
  };
  for (guint d = 0; d < SIM_KINETO_DIRECTIONS; d++) {
    const SimKinetoCopies *c = &k->copies[d];
    gboolean h2d = d == SIM_KINETO_H2D, d2h = d == SIM_KINETO_D2H;
    double copies = r && (h2d || d2h) ? (h2d ? r->h2d_copies : r->d2h_copies) : NAN;
    double bytes = r && (h2d || d2h) ? (double)(h2d ? r->h2d_bytes : r->d2h_bytes) : NAN;
    double rate = s && (h2d || d2h) ? (h2d ? s->machine.link.h2d_bandwidth : s->machine.link.d2h_bandwidth) / 1e9 : NAN;
    rows_add(rows, names[d][0], c->count / per, copies);
    rows_add(rows, names[d][1], (double)c->bytes / per, bytes);
    rows_add(rows, names[d][2], c->seconds * 1e3 / per, NAN);
    rows_add(rows, names[d][3], c->seconds > 0 ? (double)c->bytes / c->seconds / 1e9 : NAN, rate);
  }
  /* Per layer, the kernel time of its forward and of its backward; predicted:
   * the workload layer's nominal forward and backward, layer i for the i-th
   * to start. */
  guint n_layers = s ? sim_workload_n_layers(s->workload) : 0;
  for (guint i = 0; i < k->layers->len; i++) {
    const SimKinetoLayer *layer = &g_array_index(k->layers, SimKinetoLayer, i);
    const SimLayer *predicted = i < n_layers ? sim_workload_layer(s->workload, i) : NULL;
    g_autofree char *forward = g_strdup_printf("layer %u forward_ms", i);
    g_autofree char *backward = g_strdup_printf("layer %u backward_ms", i);
    rows_add(rows, forward, layer->forward_seconds * 1e3 / per, predicted ? predicted->forward * 1e3 : NAN);
    rows_add(rows, backward, layer->backward_ops ? layer->backward_seconds * 1e3 / per : NAN,
             predicted ? predicted->backward * 1e3 : NAN);
  }
}

/* The snapshot's peaks beside the prediction's, then its record_function
 * ranges (measured only: offsim's phases are not the program's ranges). */
static void
snapshot_rows(GArray *rows, const SimSnapshot *snap, const SimResult *r)
{
  rows_add(rows, "peak_allocated_bytes", (double)snap->peak_allocated_bytes,
           r ? (double)r->peak_device.bytes : NAN);
  rows_add(rows, "peak_reserved_bytes", (double)snap->peak_reserved_bytes,
           r ? (double)r->peak_reserved_bytes : NAN);
  rows_add(rows, "allocated_at_dump_bytes", (double)snap->allocated_bytes, NAN);
  rows_add(rows, "reserved_at_dump_bytes", (double)snap->reserved_bytes, NAN);
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < snap->ranges->len; i++) {
    const SimSnapshotRange *range = &g_array_index(snap->ranges, SimSnapshotRange, i);
    guint n = GPOINTER_TO_UINT(g_hash_table_lookup(seen, range->name)) + 1;
    g_hash_table_insert(seen, range->name, GUINT_TO_POINTER(n));
    static const char *const what[] = { "ms", "start_allocated_bytes", "peak_allocated_bytes", "end_allocated_bytes" };
    double values[] = { range->seconds * 1e3, (double)range->start_bytes, (double)range->peak_bytes,
                        (double)range->end_bytes };
    for (guint j = 0; j < G_N_ELEMENTS(what); j++) {
      g_autofree char *name = g_strdup_printf("range %s#%u %s", range->name, n, what[j]);
      rows_add(rows, name, values[j], NAN);
    }
  }
}

static gboolean
check_run(const char *path, const CheckOptions *o, GError **error)
{
  CliFormat format = CLI_FORMAT_TABLE;
  if (o->trace == NULL && o->snapshot == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "check: --trace FILE or --snapshot FILE is required (a torch.profiler trace, a "
                "torch.cuda.memory snapshot)");
    return FALSE;
  }
  if (!cli_report_parse_format(o->format, CHECK_FORMATS, &format, error))
    return FALSE;
  if (o->write_profile && o->trace == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--write-profile: give the --trace to derive the profile from");
    return FALSE;
  }
  if (o->policy && path == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--policy: give the SCENARIO to predict it");
    return FALSE;
  }
  g_auto(SimKineto) k = { 0 };
  if (o->trace && !sim_kineto_load(o->trace, &k, error))
    return FALSE;
  g_autoptr(SimSnapshot) snap = o->snapshot ? sim_snapshot_load(o->snapshot, error) : NULL;
  if (o->snapshot && snap == NULL)
    return FALSE;
  g_autoptr(SimScenario) s = path ? cli_load_scenario(path, error) : NULL;
  if (path && s == NULL)
    return FALSE;
  g_autoptr(SimResult) r = NULL;
  if (s) {
    const SimPolicy *p = o->policy ? sim_scenario_policy(s, o->policy) : g_ptr_array_index(s->policies, 0);
    if (p == NULL) {
      g_autofree char *quoted = sim_error_quote(o->policy);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--policy: no policy '%s' in %s", quoted, s->origin);
      return FALSE;
    }
    g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
    SimEvaluateOptions eval = { .budget = s->machine.device.memory };
    if ((r = sim_evaluate(evaluator, s, p, &eval, error)) == NULL)
      return FALSE;
  }
  g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(Row));
  g_array_set_clear_func(rows, row_clear);
  if (o->trace)
    trace_rows(rows, &k, s, r);
  if (snap)
    snapshot_rows(rows, snap, r);
  if (o->write_profile) {
    g_autofree char *profile = sim_kineto_profile_format(&k, o->trace);
    if (!sim_output_save("--write-profile", o->write_profile, profile, strlen(profile), error))
      return FALSE;
  }
  g_autofree char *text = format_rows(o, o->trace ? &k : NULL, snap, s, r, rows, format);
  return cli_print(text, error);
}

int
cli_check_main(int argc, char **argv)
{
  CheckOptions o = { 0 };
  GError *error = NULL;
  g_autofree char *format_help = cli_report_format_help(CHECK_FORMATS);
  const GOptionEntry entries[] = {
    { "trace", 't', 0, G_OPTION_ARG_FILENAME, &o.trace, "A torch.profiler (Kineto) trace, .json or .json.gz",
      "FILE" },
    { "snapshot", 'm', 0, G_OPTION_ARG_FILENAME, &o.snapshot,
      "A PyTorch memory snapshot (torch.cuda.memory._dump_snapshot), .pickle or .pickle.gz", "FILE" },
    { "write-profile", 'w', 0, G_OPTION_ARG_FILENAME, &o.write_profile,
      "Write the device profile the trace's kernels and copies give (INI, only the keys it measures)", "FILE" },
    { "policy", 'p', 0, G_OPTION_ARG_STRING, &o.policy, "The policy the trace ran (default: the scenario's first)",
      "NAME" },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &o.format, format_help, "FORMAT" },
    G_OPTION_ENTRY_NULL,
  };
  g_set_prgname("offsim check");
  g_autoptr(GOptionContext) ctx = g_option_context_new("[SCENARIO]  - a real step's trace beside the prediction");
  cli_help_describe(ctx, 0);
  int status = 0;
  if (!cli_parse_options(ctx, "check", entries, &argc, &argv, &status)) {
    /* --help, or an error: printed */
  } else if (argc > 2) {
    g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "check: expected at most one scenario file, got '%s' and '%s'",
                argv[1], argv[2]);
    status = cli_fail(error);
  } else if (!check_run(argc == 2 ? argv[1] : NULL, &o, &error)) {
    status = cli_fail(error);
  }
  g_free(o.trace);
  g_free(o.snapshot);
  g_free(o.write_profile);
  g_free(o.policy);
  g_free(o.format);
  return status;
}
