#include "plots/memory.h"

#include "base/error.h"
#include "base/units.h"
#include "export/memory_csv.h"
#include "export/spans.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Draw the capacity line only when it does not squash the curves. */
#define CAPACITY_REACH 1.5

/* Layout, in pixels from the top.  DEVICE_PX is the device panel's height
 * unless its legend needs more (KEY_PX a line: several GPUs, a line each). */
enum { TITLE_PX = 70, DEVICE_PX = 380, GAP_PX = 45, HOST_PX = 150, AXIS_PX = 60, LINE_PX = 18, KEY_PX = 17 };

/* Footer lines of per-GPU peaks hold this many GPUs each, so that sixteen
 * of them do not run off the picture. */
#define PEAKS_PER_LINE 8

/* Curves (legend entries) at most: the ten series colours times five dash
 * types are all the line styles a reader can tell apart, so more GPUs than
 * that (256 at pp 8 x dp 32) are drawn in part (export_spans_pick_gpus). */
#define MAX_CURVES 50

/* The device peak of GPU `gpu`: the run's own (SimRun.pools) when it has
 * one, else the first highest point of that GPU's curve. */
static void
gpu_peak(const SimResult *r, guint gpu, gint64 *bytes, double *time_ms)
{
  const GArray *pools = r->run->pools;
  if (pools && SIM_POOL_INDEX(gpu, SIM_POOL_DEVICE) < pools->len) {
    const SimPeak *peak = &g_array_index(pools, SimPeak, SIM_POOL_INDEX(gpu, SIM_POOL_DEVICE));
    *bytes = peak->bytes;
    *time_ms = peak->time * 1e3;
    return;
  }
  *bytes = -1;
  *time_ms = 0;
  for (guint k = 0; k < r->run->curve->len; k++) {
    const SimMemPoint *pt = &g_array_index(r->run->curve, SimMemPoint, k);
    if (pt->gpu == gpu && pt->device > *bytes) {
      *bytes = pt->device;
      *time_ms = pt->time * 1e3;
    }
  }
}

/* What GPU `gpu` is called ("stage 1"): from the stream names when the
 * result kept its program. */
static char *
gpu_name(const SimResult *r, guint gpu)
{
  return r->program ? export_spans_gpu_name(r->program, gpu) : g_strdup_printf("GPU %u", gpu);
}

static void
panel(GString *c, double height, double top_px, double bottom_px)
{
  char a[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append_printf(c, "set tmargin at screen %s\nset bmargin at screen %s\n",
                         plots_gnuplot_number(a, 1 - top_px / height), plots_gnuplot_number(b, 1 - bottom_px / height));
}

/* Several GPUs: one policy draws a colour per GPU, since what its reader
 * compares is the stages (dashed past the ten series colours); several
 * policies keep the colour each has in every chart and dash their GPUs,
 * five dash types in turn. */
static guint
series_linetype(guint n_results, guint result, guint gpu)
{
  return n_results == 1 ? gpu + 1 : result + 1;
}

static guint
series_dash(guint n_results, guint gpu)
{
  return n_results == 1 ? gpu / 10 % 5 + 1 : gpu % 5 + 1;
}

/* What the axes and the layout need from every result: GiB and ms. */
typedef struct {
  guint gpus;              /* the most GPUs of a result's curve */
  guint *drawn;            /* the GPUs drawn (all, or some: export_spans_pick_gpus), in order */
  guint n_drawn;
  char *picked;            /* which, in words, when not all; else NULL */
  double device_px;        /* the device panel's height */
  double height;           /* of the picture, pixels */
  double xmax;             /* the longest step */
  double low, high;        /* the device axis: lowest level, highest peak (or the capacity, when drawn) */
  double host_high;        /* the highest host peak */
  double capacity;         /* the first result's capacity (every result has the same) */
  gboolean capacity_drawn; /* within reach of the curves (CAPACITY_REACH) */
} MemoryAxes;

/* One step curve per result, or with several GPUs per (result, drawn GPU);
 * the device panel titles them, the host panel shares its legend.  The
 * k-th drawn GPU takes the k-th style, so that all drawn keep theirs. */
static void
plot_curves(GString *c, GPtrArray *results, const MemoryAxes *axes, guint column, gboolean titled)
{
  guint gpus = axes->gpus;
  g_string_append(c, "plot ");
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    if (gpus == 1) {
      g_autofree char *title = plots_gnuplot_quote(r->policy);
      g_string_append_printf(c, "%s$memory%u using 1:%u with steps lt %u %s %s", i ? ", \\\n     " : "", i,
                             column, i + 1, titled ? "title" : "notitle", titled ? title : "");
      continue;
    }
    for (guint k = 0; k < axes->n_drawn; k++) {
      guint g = axes->drawn[k];
      g_autofree char *stage = gpu_name(r, g);
      g_autofree char *text = results->len == 1 ? g_strdup(stage) : g_strdup_printf("%s, %s", r->policy, stage);
      g_autofree char *title = plots_gnuplot_quote(text);
      g_string_append_printf(c, "%s$memory%u_%u using 1:%u with steps lt %u dt %u %s %s", i || k ? ", \\\n     " : "",
                             i, g, column, series_linetype(results->len, i, k), series_dash(results->len, k),
                             titled ? "title" : "notitle", titled ? title : "");
    }
  }
}

/* The rows of `curve` that belong to `gpu` (every row with one GPU), held
 * to the end of the step: time, device, host. */
static void
add_curve(PlotsChart *chart, const SimResult *r, const char *block, guint gpu, guint gpus, MemoryAxes *axes)
{
  GArray *curve = r->run->curve;
  const SimMemPoint *last = NULL;
  plots_gnuplot_data_begin(chart, block);
  for (guint k = 0; k < curve->len; k++) {
    const SimMemPoint *pt = &g_array_index(curve, SimMemPoint, k);
    if (gpus > 1 && pt->gpu != gpu)
      continue;
    plots_gnuplot_data_row(chart, 3, (double[]){ pt->time * 1e3, pt->device / GIB, pt->host / GIB });
    axes->low = MIN(axes->low, pt->device / GIB);
    last = pt;
  }
  /* Hold the last level to the end of the step. */
  if (last)
    plots_gnuplot_data_row(chart, 3, (double[]){ r->step_ms, last->device / GIB, last->host / GIB });
  plots_gnuplot_data_end(chart);
}

/* One datablock per result ($memory0, ...; with several GPUs one per result
 * and GPU, $memory0_1 ...: time, device, host, held to the end of the
 * step), then $peaks (time, device, series; one per GPU with several);
 * `axes` gets the ranges of what they hold. */
static void
add_curves(PlotsChart *chart, GPtrArray *results, MemoryAxes *axes)
{
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    for (guint k = 0; k < axes->n_drawn; k++) {
      guint g = axes->drawn[k];
      g_autofree char *block = axes->gpus == 1 ? g_strdup_printf("memory%u", i) : g_strdup_printf("memory%u_%u", i, g);
      add_curve(chart, r, block, g, axes->gpus, axes);
    }
    axes->xmax = MAX(axes->xmax, r->step_ms);
    axes->high = MAX(axes->high, r->peak_device.bytes / GIB);
    axes->host_high = MAX(axes->host_high, r->peak_host.bytes / GIB);
  }
  plots_gnuplot_data_begin(chart, "peaks");
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    if (axes->gpus == 1) {
      plots_gnuplot_data_row(chart, 3, (double[]){ r->peak_device.time_ms, r->peak_device.bytes / GIB, i + 1 });
      continue;
    }
    for (guint k = 0; k < axes->n_drawn; k++) {
      gint64 bytes;
      double time_ms;
      gpu_peak(r, axes->drawn[k], &bytes, &time_ms);
      if (bytes >= 0)
        plots_gnuplot_data_row(chart, 3,
                               (double[]){ time_ms, bytes / GIB, series_linetype(results->len, i, k) });
    }
  }
  plots_gnuplot_data_end(chart);
}

/* The device panel: every curve, the peaks and the capacity line when it
 * is drawn. */
static void
device_panel(GString *c, GPtrArray *results, const MemoryAxes *axes)
{
  char a[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE];
  double pad = MAX((axes->high - axes->low) * 0.08, 0.05);
  panel(c, axes->height, TITLE_PX, TITLE_PX + axes->device_px);
  g_string_append(c, "set ylabel 'device memory (GiB)'\nset format x ''\n");
  g_string_append_printf(c, "set yrange [%s:%s]\n", plots_gnuplot_number(a, MAX(axes->low - pad, 0)),
                         plots_gnuplot_number(b, axes->high + pad));
  /* The line has no label of its own: wherever it sat, a curve near the
   * capacity could run through it.  The footer names the line. */
  if (axes->capacity_drawn) {
    plots_gnuplot_number(a, axes->capacity);
    g_string_append_printf(c, "set arrow 1 from graph 0, first %s to graph 1, first %s nohead dt 3 lw 2 "
                              "lc rgb '#555555' front\n",
                           a, a);
  }
  plot_curves(c, results, axes, 2, TRUE);
  g_string_append(c, ", \\\n     $peaks using 1:2:3 with points lc variable pt 7 ps 1.6 notitle, \\\n"
                     "     NaN with points lc rgb '#333333' pt 7 ps 1.6 title 'peak'\n");
}

/* The host panel's axes; its curves are drawn after the footer's labels,
 * which the last plot of the multiplot shows. */
static void
host_panel(GString *c, const MemoryAxes *axes)
{
  char a[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append(c, "unset arrow 1\nunset key\nset format x '%g'\n");
  panel(c, axes->height, TITLE_PX + axes->device_px + GAP_PX, TITLE_PX + axes->device_px + GAP_PX + HOST_PX);
  g_string_append(c, "set ylabel 'host pinned (GiB)'\nset xlabel 'time since the step started (ms)'\n");
  g_string_append_printf(c, "set yrange [0:%s]\n",
                         plots_gnuplot_number(a, axes->host_high > 0 ? axes->host_high * 1.1 : 1));
}

/* With several GPUs, the third and later footer lines of a result: each
 * drawn GPU's device peak, PEAKS_PER_LINE to a line. */
static void
gpu_peak_lines(GPtrArray *lines, const SimResult *r, const MemoryAxes *axes)
{
  g_autoptr(GString) line = NULL;
  for (guint k = 0; k < axes->n_drawn; k++) {
    guint g = axes->drawn[k];
    if (k % PEAKS_PER_LINE == 0) {
      if (line)
        g_ptr_array_add(lines, g_string_free(g_steal_pointer(&line), FALSE));
      line = g_string_new(k > 0 ? "      " : axes->picked ? "    device peak of each GPU drawn: "
                                                           : "    device peak of each GPU: ");
    }
    gint64 bytes;
    double time_ms;
    gpu_peak(r, g, &bytes, &time_ms);
    g_autofree char *stage = gpu_name(r, g);
    g_autofree char *size = sim_units_format_size((guint64)MAX(bytes, 0));
    g_string_append_printf(line, "%s%s %s", k % PEAKS_PER_LINE ? ", " : "", stage, size);
  }
  if (line)
    g_ptr_array_add(lines, g_string_free(g_steal_pointer(&line), FALSE));
}

/* The footer lines of result `r`: its peak (the worst GPU's), when, in
 * which phase and layer; what was live then; with several GPUs each GPU's
 * peak.  Two lines at least, the second what was live: one line would run
 * off the picture for a model with many kinds of memory. */
static GPtrArray *
footer_lines(const SimResult *r, const MemoryAxes *axes)
{
  GPtrArray *lines = g_ptr_array_new_with_free_func(g_free);
  g_autofree char *size = sim_units_format_size((guint64)r->peak_device.bytes);
  g_autofree char *host = sim_units_format_size((guint64)r->peak_host.bytes);
  const char *where = r->peak_device.where;
  g_ptr_array_add(lines, g_strdup_printf("%s: device peak %s at %.2f ms (%s%s%s), host peak %s", r->policy, size,
                                         r->peak_device.time_ms, r->peak_device.phase, *where ? " " : "", where,
                                         host));
  g_ptr_array_add(lines, g_strdup_printf("    live at the device peak: %s", r->peak_device.live));
  if (axes->gpus > 1)
    gpu_peak_lines(lines, r, axes);
  return lines;
}

/* The footer: where the capacity is, then each result's lines, in its
 * curve's colour darkened to read on white.  `device_memory` tells a budget
 * from the capacity. */
static void
footer(GString *c, GPtrArray *results, const MemoryAxes *axes, guint64 device_memory)
{
  char a[G_ASCII_DTOSTR_BUF_SIZE];
  const SimResult *first = g_ptr_array_index(results, 0);
  const char *what = first->capacity_bytes == device_memory ? "device capacity" : "memory budget";
  g_autofree char *cap_size = sim_units_format_size(first->capacity_bytes);
  double y = TITLE_PX + axes->device_px + GAP_PX + HOST_PX + AXIS_PX;
  g_autofree char *cap_text =
    axes->capacity_drawn
      ? g_strdup_printf("%s %s: the dotted line", what, cap_size)
      : g_strdup_printf("%s %s, far above every peak: not drawn, to keep the curves apart", what, cap_size);
  g_autofree char *cap_label = plots_gnuplot_quote(cap_text);
  g_string_append_printf(c, "set label 1 %s at screen 0.07, screen %s left\n", cap_label,
                         plots_gnuplot_number(a, 1 - y / axes->height));
  guint tag = 2;
  if (axes->picked) {
    y += LINE_PX;
    g_autofree char *label = plots_gnuplot_quote(axes->picked);
    g_string_append_printf(c, "set label %u %s at screen 0.07, screen %s left\n", tag++, label,
                           plots_gnuplot_number(a, 1 - y / axes->height));
  }
  for (guint i = 0; i < results->len; i++) {
    g_autoptr(GPtrArray) lines = footer_lines(g_ptr_array_index(results, i), axes);
    char text_color[8]; /* the curve's colour, dark enough to read */
    plots_gnuplot_series_text_color(i, text_color);
    for (guint k = 0; k < lines->len; k++) {
      y += LINE_PX;
      g_autofree char *label = plots_gnuplot_quote(g_ptr_array_index(lines, k));
      g_string_append_printf(c, "set label %u %s at screen 0.07, screen %s left tc rgb '%s'\n", tag++, label,
                             plots_gnuplot_number(a, 1 - y / axes->height), text_color);
    }
  }
}

PlotsChart *
plots_memory_chart(GPtrArray *results, guint64 device_memory, const char *name, GError **error)
{
  g_return_val_if_fail(results->len > 0, NULL);
  char a[G_ASCII_DTOSTR_BUF_SIZE];
  const SimResult *first = g_ptr_array_index(results, 0);

  for (guint i = 0; i < results->len; i++)
    if (!export_memory_csv_has_curve(g_ptr_array_index(results, i), error))
      return NULL;
  MemoryAxes axes = { .gpus = 1, .device_px = DEVICE_PX, .low = G_MAXDOUBLE };
  for (guint i = 0; i < results->len; i++)
    axes.gpus = MAX(axes.gpus, export_memory_csv_gpus(((SimResult *)g_ptr_array_index(results, i))->run->curve));
  g_autofree gboolean *drawn = g_new(gboolean, axes.gpus);
  g_autofree guint *drawn_gpus = g_new(guint, axes.gpus);
  g_autofree char *picked = NULL;
  export_spans_pick_gpus(axes.gpus, first->stages ? first->stages->len : 1, MAX(MAX_CURVES / results->len, 1u), drawn,
                        &picked);
  for (guint g = 0; g < axes.gpus; g++)
    if (drawn[g])
      drawn_gpus[axes.n_drawn++] = g;
  axes.drawn = drawn_gpus;
  axes.picked = picked;
  guint lines = 1 + (picked != NULL); /* the capacity's, and which GPUs are drawn */
  for (guint i = 0; i < results->len; i++) {
    g_autoptr(GPtrArray) of = footer_lines(g_ptr_array_index(results, i), &axes);
    lines += of->len;
  }
  /* A legend entry per curve and the peak's, beside the device panel. */
  if (axes.gpus > 1)
    axes.device_px = MAX((double)DEVICE_PX, KEY_PX * (results->len * axes.n_drawn + 1.0) + 30);
  axes.height = TITLE_PX + axes.device_px + GAP_PX + HOST_PX + AXIS_PX + LINE_PX * lines + 20;
  g_autoptr(PlotsChart) chart = plots_gnuplot_chart_new(name, 1400, (guint)axes.height);
  add_curves(chart, results, &axes);
  axes.capacity = first->capacity_bytes / GIB;
  axes.capacity_drawn = axes.capacity <= axes.high * CAPACITY_REACH;
  if (axes.capacity_drawn)
    axes.high = MAX(axes.high, axes.capacity);

  GString *c = chart->commands;
  plots_gnuplot_title(c, "set multiplot title", first->scenario, "device and host memory over the step");
  g_string_append(c, " font ',12'\n");
  plots_gnuplot_series_linetypes(c, results->len == 1 ? axes.n_drawn : results->len, "lw 2 pt 7 ps 1.5");
  g_string_append(c, "set lmargin at screen 0.07\nset rmargin at screen 0.80\n"
                     "set grid lc rgb '#d0d0d0'\nset key outside right top reverse Left\n");
  g_string_append_printf(c, "set xrange [0:%s]\n", plots_gnuplot_number(a, MAX(axes.xmax, 1e-6)));
  device_panel(c, results, &axes);
  host_panel(c, &axes);
  footer(c, results, &axes, device_memory);
  plot_curves(c, results, &axes, 3, FALSE);
  g_string_append(c, "\nunset multiplot\n");
  return g_steal_pointer(&chart);
}
