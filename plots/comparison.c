#include "plots/comparison.h"

#include "base/units.h"
#include "export/spans.h"
#include "plots/timeline.h"

#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Draw the capacity line only when it does not squash the dots (as the
 * memory chart does). */
#define CAPACITY_REACH 1.5

GArray *
plots_comparison_pareto(GPtrArray *results)
{
  GArray *front = g_array_sized_new(FALSE, TRUE, sizeof(gboolean), results->len);
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    gboolean dominated = FALSE;
    for (guint j = 0; j < results->len && !dominated; j++) {
      const SimResult *o = g_ptr_array_index(results, j);
      dominated = o->fits && o->step_ms <= r->step_ms && o->peak_device.bytes <= r->peak_device.bytes &&
                  (o->step_ms < r->step_ms || o->peak_device.bytes < r->peak_device.bytes);
    }
    gboolean on_front = r->fits && !dominated;
    g_array_append_val(front, on_front);
  }
  return front;
}

/* Whether the results are spread over several GPUs (every result of one
 * scenario is): then the peak is the fullest GPU's and what the busiest GPU
 * did not compute holds the pipeline's bubble as well as the transfers. */
static gboolean
several_gpus(GPtrArray *results)
{
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    if ((r->program && r->program->n_gpus > 1) || (r->stages && r->stages->len > 1))
      return TRUE;
  }
  return FALSE;
}

typedef struct {
  double memory, step; /* GiB, ms */
} Point;

static gint
by_memory(gconstpointer a, gconstpointer b)
{
  const Point *x = a, *y = b;
  if (x->memory != y->memory)
    return x->memory < y->memory ? -1 : 1;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* The capacity every result's `fits` was decided against (the device's
 * memory or a budget), in GiB, and whether its line is drawn. */
typedef struct {
  double gib;
  gboolean drawn; /* within CAPACITY_REACH of the peaks */
  gboolean any_fits;
} Capacity;

static Capacity
capacity_of(GPtrArray *results)
{
  const SimResult *first = g_ptr_array_index(results, 0);
  Capacity cap = { .gib = first->capacity_bytes / GIB };
  double high = 0;
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    high = MAX(high, r->peak_device.bytes / GIB);
    cap.any_fits |= r->fits;
  }
  cap.drawn = cap.gib > 0 && cap.gib <= high * CAPACITY_REACH;
  return cap;
}

/* $policies (memory, step per result), $front (the Pareto front of the
 * policies that fit, in order of memory, so its line does not zigzag),
 * $capacity (where the capacity line is, so that the x axis reaches it;
 * drawn as nothing) and $bars (index, compute, recompute, optimizer,
 * communication, exposed transfer). */
static void
add_data(PlotsChart *chart, GPtrArray *results, const Capacity *cap)
{
  g_autoptr(GArray) front = plots_comparison_pareto(results);
  plots_gnuplot_data_begin(chart, "policies");
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    plots_gnuplot_data_row(chart, 2, (double[]){ r->peak_device.bytes / GIB, r->step_ms });
  }
  plots_gnuplot_data_end(chart);

  g_autoptr(GArray) points = g_array_new(FALSE, FALSE, sizeof(Point));
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    Point point = { r->peak_device.bytes / GIB, r->step_ms };
    if (g_array_index(front, gboolean, i))
      g_array_append_val(points, point);
  }
  g_array_sort(points, by_memory);
  plots_gnuplot_data_begin(chart, "front");
  for (guint i = 0; i < points->len; i++) {
    const Point *point = &g_array_index(points, Point, i);
    plots_gnuplot_data_row(chart, 2, (double[]){ point->memory, point->step });
  }
  plots_gnuplot_data_end(chart);

  if (cap->drawn) {
    const SimResult *first = g_ptr_array_index(results, 0);
    plots_gnuplot_data_begin(chart, "capacity");
    plots_gnuplot_data_row(chart, 2, (double[]){ cap->gib, first->step_ms });
    plots_gnuplot_data_end(chart);
  }

  plots_gnuplot_data_begin(chart, "bars");
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    plots_gnuplot_data_row(chart, 6, (double[]){ i, r->compute_ms, r->recompute_ms, r->optimizer_ms, r->comm_ms,
                                                 r->exposed_transfer_ms });
  }
  plots_gnuplot_data_end(chart);
}

/* What the capacity is: "memory budget 9.00 GiB" or "device capacity 80.0
 * GiB" (`device_memory` tells them apart). */
static char *
capacity_name(GPtrArray *results, guint64 device_memory)
{
  const SimResult *first = g_ptr_array_index(results, 0);
  g_autofree char *size = sim_units_format_size(first->capacity_bytes);
  return g_strdup_printf("%s %s", first->capacity_bytes == device_memory ? "device capacity" : "memory budget", size);
}

/* The rows of the trade-off's legend, for the bottom margin: its entries in
 * as many columns (up to 3) as gnuplot fits beside each other, since it
 * makes every column as wide as the widest entry.  Estimated low, so that
 * the margin is never short of rows. */
typedef struct {
  guint columns, rows;
} Legend;

static const char front_title[] = "Pareto front of what fits";

static Legend
legend_of(GPtrArray *results, guint64 device_memory, const Capacity *cap)
{
  g_autofree char *name = capacity_name(results, device_memory);
  guint entries = results->len + (cap->any_fits ? 1 : 0) + (cap->drawn ? 1 : 0);
  guint longest = cap->any_fits ? (guint)strlen(front_title) : 0;
  if (cap->drawn)
    longest = MAX(longest, (guint)g_utf8_strlen(name, -1));
  for (guint i = 0; i < results->len; i++)
    longest = MAX(longest, (guint)g_utf8_strlen(((SimResult *)g_ptr_array_index(results, i))->policy, -1));
  /* About 58 characters across the panel, with the sample and a gap each
   * (gnuplot puts three entries of 15 characters in a row, two of 25). */
  Legend l = { .columns = CLAMP(58 / (longest + 4), 1u, 3u) };
  l.rows = (entries + l.columns - 1) / l.columns;
  return l;
}

/* Left: the trade-off; the capacity line (named in the legend, or under the
 * axis when it is not drawn), and the Pareto front of the policies that fit
 * under the dots, ringed. */
static void
tradeoff_panel(GString *c, GPtrArray *results, guint64 device_memory, const Capacity *cap)
{
  char a[G_ASCII_DTOSTR_BUF_SIZE];
  g_autofree char *name = capacity_name(results, device_memory);
  g_autofree char *axis = g_strdup_printf("peak device memory%s (GiB)%s%s%s%s",
                                          several_gpus(results) ? " of the fullest GPU" : "", cap->drawn ? "" : "; ",
                                          cap->drawn ? "" : name, cap->drawn ? "" : " is far right, not drawn",
                                          cap->any_fits ? "" : "; no policy fits it");
  g_autofree char *xlabel = plots_gnuplot_quote(axis);
  g_string_append_printf(c, "set title 'step time against peak device memory (lower left is better)'\n"
                            "set xlabel %s\nset ylabel 'step time (ms)'\n"
                            "set grid lc rgb '#d0d0d0'\nset offsets graph 0.1, graph 0.1, graph 0.12, graph 0.12\n"
                            "set key outside below center horizontal reverse Left samplen 1.5 maxcols 3\n",
                         xlabel);
  g_autoptr(GPtrArray) terms = g_ptr_array_new_with_free_func(g_free);
  if (cap->drawn) {
    plots_gnuplot_number(a, cap->gib);
    g_string_append_printf(c, "set arrow 1 from first %s, graph 0 to first %s, graph 1 nohead dt 3 lw 2 "
                              "lc rgb '#555555' back\n", a, a);
    g_autofree char *title = plots_gnuplot_quote(name);
    g_ptr_array_add(terms, g_strdup_printf("NaN with lines dt 3 lw 2 lc rgb '#555555' title %s", title));
    g_ptr_array_add(terms, g_strdup("$capacity using 1:2 with points ps 0 notitle"));
  }
  if (cap->any_fits) {
    g_ptr_array_add(terms, g_strdup_printf("$front using 1:2 with lines lw 10 lc rgb '#d9d9d9' title '%s'",
                                           front_title));
    g_ptr_array_add(terms, g_strdup("$front using 1:2 with points pt 6 ps 3.5 lw 1.5 lc rgb '#333333' notitle"));
  }
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    g_autofree char *policy = plots_gnuplot_quote(r->policy);
    g_ptr_array_add(terms, g_strdup_printf("$policies every ::%u::%u using 1:2 with points lt %u title %s", i, i,
                                           i + 1, policy));
  }
  g_ptr_array_add(terms, NULL);
  g_autofree char *plot = g_strjoinv(", \\\n     ", (char **)terms->pdata);
  g_string_append_printf(c, "plot %s\n%s", plot, cap->drawn ? "unset arrow 1\n" : "");
}

/* Right: where the step goes, a stacked bar per policy named under it
 * (`slant`ed when the names would touch). */
static void
bars_panel(GString *c, GPtrArray *results, gboolean slant)
{
  const char *exposed = several_gpus(results) ? "exposed transfer and bubble" : "exposed transfer";
  char a[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append(c, "set title 'where the step time goes'\nunset xlabel\nset ylabel 'time (ms)'\n"
                     "set offsets 0, 0, graph 0.1, 0\nunset grid\nset grid ytics lc rgb '#d0d0d0'\nset yrange [0:*]\n");
  g_string_append_printf(c, "set xrange [-0.6:%s]\n", plots_gnuplot_number(a, results->len - 0.4));
  if (slant)
    g_string_append(c, "set xtics rotate by 25 right\n");
  g_string_append(c, "set xtics scale 0 (");
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    g_autofree char *label = plots_gnuplot_quote(r->policy);
    g_string_append_printf(c, "%s%s %u", i ? ", " : "", label, i);
  }
  g_string_append(c, ")\n");
  /* One stacked segment per column of $bars after the index: column c
   * from the sum of the columns before it to that sum plus its own. */
  const struct {
    guint kind;
    const char *title;
  } segments[] = { { EXPORT_SPAN_FORWARD, "compute" },    { EXPORT_SPAN_RECOMPUTE, "recompute" },
                   { EXPORT_SPAN_OPTIMIZER, "optimizer" }, { EXPORT_SPAN_COMM, "communication" },
                   { EXPORT_SPAN_WAIT, exposed } };
  g_autoptr(GString) below = g_string_new("0");
  g_string_append(c, "plot ");
  for (guint k = 0; k < G_N_ELEMENTS(segments); k++) {
    guint col = k + 2;
    g_autofree char *title = plots_gnuplot_quote(segments[k].title);
    g_string_append_printf(c,
                           "%s$bars using 1:(%s+$%u/2):($1-0.3):($1+0.3):(%s):(%s+$%u) with boxxyerror fs solid 1.0 "
                           "noborder lc rgb '%s' title %s",
                           k ? ", \\\n     " : "", below->str, col, below->str, below->str, col,
                           plots_timeline_color(segments[k].kind), title);
    g_string_append_printf(below, "+$%u", col);
  }
  g_string_append_printf(c,
                         ", \\\n     $bars using 1:(%s):(sprintf('%%.1f ms', %s)) with labels offset 0,0.8 notitle\n"
                         "unset multiplot\n",
                         below->str, below->str);
}

PlotsChart *
plots_comparison_chart(GPtrArray *results, guint64 device_memory, const char *name)
{
  g_return_val_if_fail(results->len > 0, NULL);
  const SimResult *first = g_ptr_array_index(results, 0);
  g_autoptr(PlotsChart) chart = plots_gnuplot_chart_new(name, 1400, 680);
  Capacity cap = capacity_of(results);
  add_data(chart, results, &cap);
  guint longest = 0;
  for (guint i = 0; i < results->len; i++)
    longest = MAX(longest, (guint)g_utf8_strlen(((SimResult *)g_ptr_array_index(results, i))->policy, -1));

  GString *c = chart->commands;
  plots_gnuplot_title(c, "set multiplot layout 1,2 title", first->scenario, "every policy compared");
  g_string_append(c, " font ',12'\n");
  plots_gnuplot_series_linetypes(c, results->len, "lw 2 pt 7 ps 2");

  /* Both panels keep the same bottom margin, what the fuller needs.  The
   * left: tick labels, the axis label, a line's gap (gnuplot sets a key
   * below right under the axis label: without it the two overlapped), then
   * the legend, three entries a row.  The right: its tick labels (slanted,
   * when long or many names would touch), then its legend. */
  gboolean slant = results->len * MAX(longest, 1u) > 48;
  Legend legend = legend_of(results, device_memory, &cap);
  guint bottom = MAX(4 + legend.rows, 3 + legend.rows + (slant ? (guint)(longest * 0.2 + 0.5) : 0));
  g_string_append_printf(c, "set bmargin %u\n", bottom);
  tradeoff_panel(c, results, device_memory, &cap);
  bars_panel(c, results, slant);
  return g_steal_pointer(&chart);
}
