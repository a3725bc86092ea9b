/* plots/sweep.h — one metric against one swept parameter, a line per policy.
 *
 * `offsim sweep` (a later issue) varies a scenario key over values and
 * collects a metric per policy; this draws the result: the parameter on x
 * (in the order given, which must be numeric), the metric on y, one line with
 * points per policy in its series colour.  A missing value (NaN: a point that
 * failed or did not fit) breaks the line instead of inventing a value.
 *
 * Ownership: a PlotsSweep owns its strings and arrays.
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
