#include "plots/sweep.h"

#include "base/error.h"
#include "input/schema.h"

#include <math.h>
#include <string.h>

static void
series_free(gpointer data)
{
  PlotsSweepSeries *s = data;
  g_free(s->name);
  g_array_unref(s->y);
  g_free(s);
}

PlotsSweep *
plots_sweep_new(const char *title, const char *parameter, const char *x_unit, const char *metric, const char *y_unit)
{
  PlotsSweep *s = g_new0(PlotsSweep, 1);
  s->title = g_strdup(title);
  s->parameter = g_strdup(parameter);
  s->x_unit = g_strdup(x_unit ? x_unit : "");
  s->metric = g_strdup(metric);
  s->y_unit = g_strdup(y_unit ? y_unit : "");
  s->x = g_array_new(FALSE, FALSE, sizeof(double));
  s->series = g_ptr_array_new_with_free_func(series_free);
  s->held = g_ptr_array_new_with_free_func(g_free);
  return s;
}

void
plots_sweep_free(PlotsSweep *s)
{
  if (s == NULL)
    return;
  g_free(s->title);
  g_free(s->parameter);
  g_free(s->x_unit);
  g_free(s->metric);
  g_free(s->y_unit);
  g_array_unref(s->x);
  g_ptr_array_unref(s->series);
  g_ptr_array_unref(s->held);
  g_free(s);
}

void
plots_sweep_add_series(PlotsSweep *s, const char *name, guint n, const double *y)
{
  PlotsSweepSeries *series = g_new0(PlotsSweepSeries, 1);
  series->name = g_strdup(name);
  series->y = g_array_sized_new(FALSE, FALSE, sizeof(double), n);
  g_array_append_vals(series->y, y, n);
  g_ptr_array_add(s->series, series);
}

void
plots_sweep_hold(PlotsSweep *s, const char *name, const char *value)
{
  g_ptr_array_add(s->held, g_strdup_printf("%s = %s", name, value));
}

/* "step time (ms)" or just "step time", and ", log scale" in the
 * parenthesis on a log axis. */
static char *
axis_label(const char *what, const char *unit, gboolean log)
{
  g_autofree char *text = *unit && log ? g_strdup_printf("%s (%s, log scale)", what, unit)
                          : *unit      ? g_strdup_printf("%s (%s)", what, unit)
                          : log        ? g_strdup_printf("%s (log scale)", what)
                                       : g_strdup(what);
  return plots_gnuplot_quote(text);
}

/* A range wider than this (largest over smallest, both positive) is drawn
 * on a log axis: on a linear one the points of the lower decades would sit
 * on top of each other. */
#define LOG_AXIS_RATIO 100.0

/* The range of one axis over `n` values (NaN skipped) into `commands`:
 * `set logscale` past two decades (gnuplot's autoscale then ends on whole
 * tics); otherwise from 0 when no value is negative (a time or a bandwidth
 * has no negative part to show, and gnuplot's own margin went below 0), to
 * `pad` of the span above the largest.  Negative values keep the autoscale.
 * Returns whether the axis is logarithmic. */
static gboolean
axis_range(GString *commands, const char *axis, const double *v, guint n, double pad)
{
  double lo = INFINITY, hi = -INFINITY;
  for (guint i = 0; i < n; i++)
    if (isfinite(v[i])) {
      lo = MIN(lo, v[i]);
      hi = MAX(hi, v[i]);
    }
  if (!(lo <= hi))
    return FALSE; /* nothing to draw: gnuplot's defaults */
  if (lo > 0 && hi / lo > LOG_AXIS_RATIO) {
    g_string_append_printf(commands, "set logscale %s\n", axis);
    return TRUE;
  }
  if (lo >= 0) {
    char a[G_ASCII_DTOSTR_BUF_SIZE];
    double top = hi > 0 ? hi * (1 + pad) : 1;
    g_string_append_printf(commands, "set %srange [0:%s]\n", axis, plots_gnuplot_number(a, top));
  } else {
    g_string_append_printf(commands, "set offsets %s\n",
                           strcmp(axis, "x") == 0 ? "graph 0.03, graph 0.03, 0, 0" : "0, 0, graph 0.08, graph 0.08");
  }
  return FALSE;
}

PlotsChart *
plots_sweep_chart(const PlotsSweep *s, const char *name, GError **error)
{
  guint n = s->x->len;
  if (n == 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "sweep of %s: no values to draw", s->parameter);
    return NULL;
  }
  for (guint k = 0; k < s->series->len; k++) {
    const PlotsSweepSeries *series = g_ptr_array_index(s->series, k);
    if (series->y->len != n) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "sweep of %s: policy '%s' has %u values for %u points",
                  s->parameter, series->name, series->y->len, n);
      return NULL;
    }
  }
  g_autoptr(PlotsChart) chart = plots_gnuplot_chart_new(name, 1200, 700);
  g_autofree double *row = g_new(double, s->series->len + 1);
  plots_gnuplot_data_begin(chart, "sweep");
  for (guint i = 0; i < n; i++) {
    row[0] = g_array_index(s->x, double, i);
    for (guint k = 0; k < s->series->len; k++)
      row[k + 1] = g_array_index(((PlotsSweepSeries *)g_ptr_array_index(s->series, k))->y, double, i);
    plots_gnuplot_data_row(chart, s->series->len + 1, row);
  }
  plots_gnuplot_data_end(chart);

  GString *c = chart->commands;
  g_autoptr(GString) subtitle = g_string_new(NULL);
  g_string_printf(subtitle, "%s as %s varies", s->metric, s->parameter);
  for (guint i = 0; i < s->held->len; i++)
    g_string_append_printf(subtitle, "%s%s", i ? ", " : "; held at ", (char *)g_ptr_array_index(s->held, i));
  plots_gnuplot_title(c, "set title", s->title, subtitle->str);
  g_string_append_c(c, '\n');
  /* Every y value, row by row, for its range. */
  guint k_n = MAX(s->series->len, 1u);
  g_autofree double *ys = g_new(double, (gsize)n * k_n);
  for (guint i = 0; i < (guint)n * k_n; i++)
    ys[i] = s->series->len ? g_array_index(((PlotsSweepSeries *)g_ptr_array_index(s->series, i % k_n))->y, double,
                                           i / k_n)
                           : NAN;
  gboolean xlog = axis_range(c, "x", (const double *)(gconstpointer)s->x->data, n, 0.05);
  gboolean ylog = axis_range(c, "y", ys, n * k_n, 0.08);
  g_autofree char *xlabel = axis_label(s->parameter, s->x_unit, xlog);
  g_autofree char *ylabel = axis_label(s->metric, s->y_unit, ylog);
  g_string_append_printf(c, "set xlabel %s\nset ylabel %s\n", xlabel, ylabel);
  g_string_append(c, "set grid lc rgb '#d0d0d0'\nset key outside right top reverse Left\n");
  plots_gnuplot_series_linetypes(c, s->series->len, "lw 2 pt 7 ps 1.2");
  g_string_append(c, "plot ");
  for (guint k = 0; k < s->series->len; k++) {
    const PlotsSweepSeries *series = g_ptr_array_index(s->series, k);
    g_autofree char *key = plots_gnuplot_quote(series->name);
    g_string_append_printf(c, "%s$sweep using 1:%u with linespoints lt %u title %s", k ? ", \\\n     " : "", k + 2,
                           k + 1, key);
  }
  if (s->series->len == 0)
    g_string_append(c, "NaN notitle");
  g_string_append_c(c, '\n');
  return g_steal_pointer(&chart);
}

/* ---- from a grid -------------------------------------------------------- */

/* The schema's row for a swept group.key ("policy.async" is a policy's
 * group, "layer.3" a layer's), or SIM_KEY_COUNT. */
static SimKeyId
swept_key(const SweepGridAxis *axis)
{
  SimSchemaGroup group = SIM_GROUP_COUNT;
  if (g_str_has_prefix(axis->group, "layer."))
    group = SIM_GROUP_LAYER;
  else if (g_str_has_prefix(axis->group, "policy."))
    group = SIM_GROUP_POLICY;
  for (guint g = 0; g < SIM_GROUP_COUNT && group == SIM_GROUP_COUNT; g++)
    if (g != SIM_GROUP_LAYER && g != SIM_GROUP_POLICY && strcmp(sim_schema_group_name(g), axis->group) == 0)
      group = g;
  return group == SIM_GROUP_COUNT ? SIM_KEY_COUNT : sim_schema_find(group, axis->key, SIM_SCHEMA_ANY_KIND);
}

/* A value of key `id` as a number: bytes, bytes per second, seconds, or the
 * number as written (a TFLOP/s figure stays in TFLOP/s). */
static gboolean
axis_number(SimKeyId id, const char *text, double *x)
{
  const SimSchemaKey *k = sim_schema_key(id);
  guint64 whole = 0;
  guint count = 0;
  switch (k->type) {
  case SIM_VALUE_SIZE:
  case SIM_VALUE_COUNT64:
    if (!sim_schema_parse_value(id, text, &whole, NULL))
      return FALSE;
    *x = (double)whole;
    return TRUE;
  case SIM_VALUE_COUNT:
    if (!sim_schema_parse_value(id, text, &count, NULL))
      return FALSE;
    *x = count;
    return TRUE;
  case SIM_VALUE_TIME:
  case SIM_VALUE_RATE:
    return sim_schema_parse_value(id, text, x, NULL);
  case SIM_VALUE_NUMBER:
    if (!sim_schema_parse_value(id, text, x, NULL))
      return FALSE;
    *x /= k->scale ? k->scale : 1;
    return TRUE;
  default:
    return FALSE;
  }
}

typedef struct {
  const char *name;
  double scale; /* base units (bytes, bytes/s, seconds) per unit */
} AxisUnit;

/* The unit that suits values up to `largest`, by magnitude, from `units`
 * (largest first). */
static const AxisUnit *
unit_for(const AxisUnit *units, guint n, double largest)
{
  for (guint i = 0; i + 1 < n; i++)
    if (largest >= units[i].scale)
      return &units[i];
  return &units[n - 1];
}

/* The x unit of key `id`'s values `texts` (parsed into `x`): the unit they
 * are all written in, else the one that suits their size; `*scale` is what
 * one of it is in base units.  Counts and plain numbers have none. */
static char *
axis_unit(SimKeyId id, GPtrArray *texts, const double *x, double *scale)
{
  static const AxisUnit sizes[] = { { "TiB", 1099511627776.0 }, { "GiB", 1073741824.0 }, { "MiB", 1048576.0 },
                                    { "KiB", 1024.0 },           { "B", 1.0 } };
  static const AxisUnit rates[] = { { "TB/s", 1e12 }, { "GB/s", 1e9 }, { "MB/s", 1e6 }, { "KB/s", 1e3 }, { "B/s", 1.0 } };
  static const AxisUnit times[] = { { "s", 1.0 }, { "ms", 1e-3 }, { "\xc2\xb5s", 1e-6 }, { "ns", 1e-9 } };
  SimValueType type = sim_schema_key(id)->type;
  *scale = 1;
  if (type != SIM_VALUE_SIZE && type != SIM_VALUE_RATE && type != SIM_VALUE_TIME)
    return g_strdup("");
  /* The unit after the number, when every value has the same. */
  g_autofree char *common = NULL;
  for (guint i = 0; i < texts->len; i++) {
    const char *text = g_ptr_array_index(texts, i);
    g_autofree char *unit = g_strstrip(g_strdup(text + strspn(text, " \t+0123456789.")));
    if (i == 0)
      common = g_steal_pointer(&unit);
    else if (g_strcmp0(common, unit) != 0)
      g_clear_pointer(&common, g_free);
    if (common == NULL)
      break;
  }
  g_autofree char *one = common && *common ? g_strconcat("1", common, NULL) : NULL;
  if (one && axis_number(id, one, scale) && *scale > 0)
    return g_strdup(strcmp(common, "us") == 0 ? "\xc2\xb5s" : common);
  double largest = 0;
  for (guint i = 0; i < texts->len; i++)
    largest = MAX(largest, fabs(x[i]));
  const AxisUnit *u = type == SIM_VALUE_SIZE   ? unit_for(sizes, G_N_ELEMENTS(sizes), largest)
                      : type == SIM_VALUE_RATE ? unit_for(rates, G_N_ELEMENTS(rates), largest)
                                               : unit_for(times, G_N_ELEMENTS(times), largest);
  *scale = u->scale;
  return g_strdup(u->name);
}

/* The step time of every policy at the grid point `index`, or NaN where
 * this shard has no such point; `sweep` gets the series when it has none. */
static void
add_point(PlotsSweep *sweep, const SweepGrid *grid, guint64 index, guint v, guint n)
{
  const SweepGridPoint *point = NULL;
  for (guint i = 0; i < grid->points->len && point == NULL; i++)
    if (((SweepGridPoint *)g_ptr_array_index(grid->points, i))->index == index)
      point = g_ptr_array_index(grid->points, i);
  for (guint k = 0; point && k < point->results->len; k++) {
    const SimResult *r = g_ptr_array_index(point->results, k);
    if (sweep->series->len <= k) {
      g_autofree double *missing = g_new(double, n);
      for (guint i = 0; i < n; i++)
        missing[i] = NAN;
      plots_sweep_add_series(sweep, r->policy, n, missing);
    }
    g_array_index(((PlotsSweepSeries *)g_ptr_array_index(sweep->series, k))->y, double, v) = r->step_ms;
  }
}

PlotsSweep *
plots_sweep_from_grid(const SweepGrid *grid, const char *scenario, GError **error)
{
  const SweepGridAxis *axis = g_ptr_array_index(grid->axes, 0);
  SimKeyId id = swept_key(axis);
  guint n = axis->values->len;
  g_autofree double *x = g_new(double, n);
  for (guint v = 0; v < n; v++) {
    const char *text = g_ptr_array_index(axis->values, v);
    if (id == SIM_KEY_COUNT || !axis_number(id, text, &x[v])) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "the first swept key (%s) must take numbers (sizes, rates, times or counts) to be drawn, got '%s'",
                  axis->name, text);
      return NULL;
    }
  }
  double scale = 1;
  g_autofree char *unit = axis_unit(id, axis->values, x, &scale);
  /* The title is the file swept, not the scenario's name, which often
   * states values ("batch 2x512", "PCIe Gen5") that the sweep varies or
   * holds elsewhere: the subtitle says what was held. */
  g_autofree char *title = g_strdup_printf("sweep of %s", scenario);
  g_autoptr(PlotsSweep) sweep = plots_sweep_new(title, axis->name, unit, "step time", "ms");
  for (guint v = 0; v < n; v++) {
    double value = x[v] / scale;
    g_array_append_val(sweep->x, value);
  }
  for (guint a = 1; a < grid->axes->len; a++) {
    const SweepGridAxis *other = g_ptr_array_index(grid->axes, a);
    plots_sweep_hold(sweep, other->name, g_ptr_array_index(other->values, 0));
  }
  /* Point v * stride has this value and every other key at its first. */
  guint64 stride = grid->size / n;
  for (guint v = 0; v < n; v++)
    add_point(sweep, grid, v * stride, v, n);
  return g_steal_pointer(&sweep);
}
