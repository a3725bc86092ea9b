/* cli/sweep.c — `offsim sweep`: a scenario over every combination of the
 * values given with --set, on a thread pool, as CSV (and a chart). */
#include "cli/cli.h"

#include "base/error.h"
#include "base/output.h"
#include "cli/report.h"
#include "plots/sweep.h"
#include "sweep/grid.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  double started;
  gboolean tty;
} Progress;

/* A bar with the rate and the time left, on a terminal only; nothing
 * otherwise, so that logs of batch jobs stay clean. */
static void
show_progress(guint done, guint total, gpointer data)
{
  Progress *p = data;
  if (!p->tty || total == 0)
    return;
  double elapsed = (double)g_get_monotonic_time() / 1e6 - p->started;
  double rate = elapsed > 0 ? done / elapsed : 0;
  double left = rate > 0 ? (total - done) / rate : 0;
  int width = 30, filled = (int)((double)width * done / total);
  g_printerr("\r[%.*s%*s] %u/%u points, %.0f/s, %.0f s left   ", filled, "##############################", width - filled,
             "", done, total, rate, left);
  if (done == total)
    g_printerr("\n");
}

/* step time against the first swept key, one line per policy (the other
 * keys at their first value): plots/sweep.h.  `g` holds the points the
 * chart reads (Sink, below), not the whole sweep. */
static gboolean
draw(const SweepGrid *g, const char *scenario, const char *dir, GError **error)
{
  g_autoptr(PlotsSweep) sweep = plots_sweep_from_grid(g, scenario, error);
  g_autoptr(PlotsChart) chart = sweep ? plots_sweep_chart(sweep, "sweep", error) : NULL;
  if (chart == NULL) {
    g_prefix_error(error, "--plot: ");
    return FALSE;
  }
  g_autoptr(GPtrArray) charts = g_ptr_array_new();
  g_ptr_array_add(charts, chart);
  return plots_gnuplot_render(charts, PLOTS_FORMAT_ALL, dir, &cli_plot_names, error);
}

/* A chart of more x values than this is refused up front: it would keep
 * that many points' results and draw more points than a picture has
 * pixels across. */
#define SWEEP_PLOT_MAX_VALUES 10000u

/* Where the rows go, in point order (the grid's reorder window), and what
 * --plot keeps of the points: the shard's first (the chart's title) and
 * those with every key but the first at its first value, at most
 * SWEEP_PLOT_MAX_VALUES + 1 however large the sweep. */
typedef struct {
  SimOutputStream *out;
  char *header;    /* still to write before the first row (shard 0), or NULL */
  gboolean keep_going; /* rows end with an `error` field */
  guint failed;    /* points written as an error row */
  gboolean plot;
  guint first;     /* the shard's first point */
  guint64 stride;  /* points between two values of the first key */
} Sink;

static gboolean
sink_plots(const Sink *k, guint index)
{
  return k->plot && (index == k->first || index % k->stride == 0);
}

/* On a worker: the point's rows, the swept values first. */
static gboolean
format_rows(const SweepGrid *g, const SweepGridPoint *point, GString *out, gpointer data)
{
  g_autoptr(GString) prefix = g_string_new(NULL);
  for (guint a = 0; a < g->axes->len; a++) {
    sim_output_csv_field(prefix, sweep_grid_value(g, a, point->index));
    g_string_append_c(prefix, ',');
  }
  const Sink *k = data;
  for (guint r = 0; r < point->results->len; r++) {
    cli_report_csv_row(out, prefix->str, g_ptr_array_index(point->results, r));
    if (k->keep_going) { /* an empty error field before the line end */
      g_string_truncate(out, out->len - 1);
      g_string_append(out, ",\n");
    }
  }
  return sink_plots(k, point->index);
}

/* --keep-going: a point that failed is one row, its swept values, every
 * result field empty, and the error (the message exit 2 would print). */
static void
format_error_row(const SweepGrid *g, const SweepGridPoint *point, GString *out)
{
  for (guint a = 0; a < g->axes->len; a++) {
    sim_output_csv_field(out, sweep_grid_value(g, a, point->index));
    g_string_append_c(out, ',');
  }
  for (guint c = 0; c < cli_report_csv_columns(); c++)
    g_string_append_c(out, ',');
  g_autofree char *message = sim_error_printable(point->error->message);
  sim_output_csv_field(out, message);
  g_string_append_c(out, '\n');
}

/* On the calling thread, in point order.  The header waits for the first
 * row, so that a sweep whose first point fails prints nothing. */
static gboolean
write_rows(SweepGrid *g, SweepGridPoint *point, const GString *text, gpointer data, GError **error)
{
  Sink *k = data;
  if (k->header) {
    g_autofree char *header = g_steal_pointer(&k->header);
    if (!sim_output_stream_write(k->out, header, strlen(header), error))
      return FALSE;
  }
  g_autoptr(GString) failed = NULL;
  if (point->error) {
    failed = g_string_new(NULL);
    format_error_row(g, point, failed);
    text = failed;
    k->failed++;
  }
  if (!sim_output_stream_write(k->out, text->str, text->len, error))
    return FALSE;
  if (point->results)
    sweep_grid_keep(g, point);
  return TRUE;
}

/* --jobs not given: one thread per core.  Not 0, which the grid would
 * read the same way: 0 threads is a mistake to refuse, not a default. */
#define SWEEP_JOBS_UNSET G_MININT

typedef struct {
  char **sets;
  int jobs;
  char *shard, *out, *plot;
  gboolean keep_going;
} SweepOptions;

static gboolean
sweep_run(const char *path, const SweepOptions *o, GError **error)
{
  if (o->sets == NULL || o->sets[0] == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "sweep: give at least one --set group.key=v1,v2,...");
    return FALSE;
  }
  /* A failed point is no point of the chart: it would leave a hole the
   * chart's lines cannot cross. */
  if (o->keep_going && o->plot) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--keep-going: not with --plot (a failed point has nothing to draw)");
    return FALSE;
  }
  SweepGridOptions options = { .jobs = o->jobs == SWEEP_JOBS_UNSET ? 0 : (guint)o->jobs, .shard_option = "--shard",
                                 .keep_going = o->keep_going };
  if (o->shard) {
    guint64 i, n;
    g_auto(GStrv) parts = g_strsplit(o->shard, "/", -1);
    if (g_strv_length(parts) != 2 || !g_ascii_string_to_unsigned(parts[0], 10, 0, 1000000, &i, NULL) ||
        !g_ascii_string_to_unsigned(parts[1], 10, 1, 1000000, &n, NULL) || i >= n) {
      g_autofree char *quoted = sim_error_quote(o->shard);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--shard: expected I/N with 0 <= I < N, got '%s'", quoted);
      return FALSE;
    }
    options.shard = (guint)i;
    options.shards = (guint)n;
  }
  g_autoptr(GPtrArray) axes = g_ptr_array_new_with_free_func((GDestroyNotify)sweep_grid_axis_free);
  for (char **s = o->sets; *s; s++) {
    SweepGridAxis *axis = sweep_grid_axis_parse(*s, "--set", error);
    if (axis == NULL)
      return FALSE;
    g_ptr_array_add(axes, axis);
  }
  guint plotted = ((SweepGridAxis *)g_ptr_array_index(axes, 0))->values->len;
  if (o->plot && plotted > SWEEP_PLOT_MAX_VALUES) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "--plot: the first --set key has %u values, a chart at most %u (sweep without --plot, or put a key "
                "with fewer values first)",
                plotted, SWEEP_PLOT_MAX_VALUES);
    return FALSE;
  }
  if (!cli_check_output_file("--out", o->out, error) || !cli_check_output_dir("--plot", o->plot, error))
    return FALSE;
  g_autoptr(SimConfig) config = cli_load_config(path, error);
  if (config == NULL)
    return FALSE;
  g_autoptr(SweepGrid) grid = sweep_grid_new(config, g_steal_pointer(&axes), &options, error);
  if (grid == NULL)
    return FALSE;

  /* Swept values first, then the result fields, one row per point and policy. */
  Sink sink = { .plot = o->plot != NULL, .keep_going = o->keep_going, .first = options.shard,
                .stride = grid->size / plotted };
  if (options.shard == 0) {
    g_autoptr(GString) prefix = g_string_new(NULL);
    for (guint a = 0; a < grid->axes->len; a++) {
      sim_output_csv_field(prefix, ((SweepGridAxis *)g_ptr_array_index(grid->axes, a))->name);
      g_string_append_c(prefix, ',');
    }
    g_autoptr(GString) header = g_string_new(NULL);
    cli_report_csv_header(header, prefix->str);
    if (o->keep_going) {
      g_string_truncate(header, header->len - 1);
      g_string_append(header, ",error\n");
    }
    sink.header = g_string_free(g_steal_pointer(&header), FALSE);
  }
  sink.out = sim_output_stream_open("--out", o->out, error);
  if (sink.out == NULL) {
    g_free(sink.header);
    return FALSE;
  }
  Progress progress = { (double)g_get_monotonic_time() / 1e6, isatty(STDERR_FILENO) };
  options.progress = show_progress;
  options.progress_data = &progress;
  SweepGridStream stream = { .format = format_rows, .write = write_rows, .data = &sink };
  gboolean ok = sweep_grid_stream(grid, config, &options, &stream, error);
  g_free(sink.header);
  /* A failed sweep leaves no --out file, not even the rows before it. */
  if (!ok) {
    sim_output_stream_abort(sink.out);
    return FALSE;
  }
  if (!sim_output_stream_commit(sink.out, error))
    return FALSE;
  if (sink.failed)
    g_printerr("offsim sweep: %u of %llu points failed; the error column of their rows says why\n", sink.failed,
               (unsigned long long)(options.shards > 1 ? (grid->size - options.shard + options.shards - 1) / options.shards
                                                       : grid->size));
  if (o->plot) {
    if (!draw(grid, path, o->plot, error))
      return FALSE;
    g_printerr("plot written to %s%ssweep (.png and .svg)\n", o->plot, g_str_has_suffix(o->plot, "/") ? "" : "/");
  }
  return TRUE;
}

int
cli_sweep_main(int argc, char **argv)
{
  SweepOptions o = { .jobs = SWEEP_JOBS_UNSET };
  GError *error = NULL;
  const GOptionEntry entries[] = {
    { "set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &o.sets, "A key and its values, in the key's units: group.key=v1,v2,... "
      "(repeatable)",
      "G.K=V,..." },
    { "jobs", 'j', 0, G_OPTION_ARG_INT, &o.jobs, "Threads (default: every core)", "N" },
    { "shard", 0, 0, G_OPTION_ARG_STRING, &o.shard, "Run every N-th point from I (0-based), for batch systems", "I/N" },
    { "out", 'o', 0, G_OPTION_ARG_FILENAME, &o.out, "Write the CSV to FILE (atomically) instead of stdout", "FILE" },
    { "keep-going", 0, 0, G_OPTION_ARG_NONE, &o.keep_going, "A point that fails is a row with an `error` column "
      "(the last), not the end of the sweep", NULL },
    { "plot", 0, 0, G_OPTION_ARG_FILENAME, &o.plot, "Draw step time against the first --set key into DIR (others "
      "at their first value)", "DIR" },
    G_OPTION_ENTRY_NULL,
  };
  g_set_prgname("offsim sweep");
  g_autoptr(GOptionContext) ctx = g_option_context_new("SCENARIO  - every combination of --set values, as CSV");
  cli_help_describe(ctx, CLI_EXIT_TOOL);
  int status = 0;
  if (!cli_parse_options(ctx, "sweep", entries, &argc, &argv, &status)) {
    /* --help, or an error: printed */
  } else if (argc != 2) {
    g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "sweep: expected one scenario file");
    status = cli_fail(error);
  } else if (o.jobs != SWEEP_JOBS_UNSET && (o.jobs < 1 || o.jobs > 1024)) {
    g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "--jobs: expected 1 to 1024 threads (without it, one per core), "
                "got %d", o.jobs);
    status = cli_fail(error);
  } else if (!sweep_run(argv[1], &o, &error)) {
    status = cli_fail(error);
  }
  g_strfreev(o.sets);
  g_free(o.shard);
  g_free(o.out);
  g_free(o.plot);
  return status;
}
