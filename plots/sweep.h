/* plots/sweep.h — one metric against one swept parameter, a line per policy.
 *
 * The parameter is on x, the metric on y, one line with points per policy in
 * its series colour.  Lines join the x values in the order they were added,
 * so a caller adds them sorted as it wants them read.  A missing value (NaN)
 * breaks the line instead of inventing one.  Every series has one value per
 * x value; plots_sweep_chart checks it.
 *
 * `offsim sweep --plot` (cli/sweep.c) is the caller: step_ms against the
 * first swept key, the other keys at their first value, and NaN where its
 * shard did not run a point.
 *
 * Ownership: a PlotsSweep owns its strings, its x array and its series
 * (copies of what it was given) and is freed with plots_sweep_free; the
 * chart is new, the caller's to free (plots_gnuplot_chart_free).
 */
#pragma once

#include "gnuplot.h"

G_BEGIN_DECLS

typedef struct {
  char *name;  /* policy */
  GArray *y;   /* double per x value; NaN = missing */
} PlotsSweepSeries;

typedef struct {
  char *title;     /* usually the scenario name */
  char *parameter; /* "link.h2d_bandwidth" */
  char *x_unit;    /* "GB/s", or "" */
  char *metric;    /* "step_ms" */
  char *y_unit;    /* "ms", or "" */
  GArray *x;       /* double */
  GPtrArray *series; /* PlotsSweepSeries* */
} PlotsSweep;

PlotsSweep *plots_sweep_new(const char *title, const char *parameter, const char *x_unit, const char *metric,
                            const char *y_unit);
void plots_sweep_free(PlotsSweep *sweep);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlotsSweep, plots_sweep_free)

/* Adds a series of `n` values (n must equal the number of x values when the
 * chart is drawn). */
void plots_sweep_add_series(PlotsSweep *sweep, const char *name, guint n, const double *y);

/* Fails with SIM_ERROR_INPUT when there are no x values or a series' length
 * differs from theirs. */
PlotsChart *plots_sweep_chart(const PlotsSweep *sweep, const char *name, GError **error);

G_END_DECLS
