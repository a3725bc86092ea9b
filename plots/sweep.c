#include "sweep.h"

#include "error.h"

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

/* "step_ms (ms)" or just "step_ms". */
static char *
axis_label(const char *what, const char *unit)
{
  g_autofree char *text = *unit ? g_strdup_printf("%s (%s)", what, unit) : g_strdup(what);
  return plots_gnuplot_quote(text);
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
  g_autofree char *subtitle = g_strdup_printf("%s as %s varies", s->metric, s->parameter);
  g_autofree char *xlabel = axis_label(s->parameter, s->x_unit);
  g_autofree char *ylabel = axis_label(s->metric, s->y_unit);
  plots_gnuplot_title(c, "set title", s->title, subtitle);
  g_string_append_printf(c, "\nset xlabel %s\nset ylabel %s\n", xlabel, ylabel);
  g_string_append(c, "set grid lc rgb '#d0d0d0'\nset key outside right top reverse Left\nset offsets graph 0.03, graph 0.03, "
                     "graph 0.08, graph 0.08\n");
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
