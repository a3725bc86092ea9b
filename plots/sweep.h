/* plots/sweep.h — one metric against one swept parameter, a line per policy.
 *
 * The parameter is on x, the metric on y, one line with points per policy in
 * its series colour.  Lines join the x values in the order they were added,
 * so a caller adds them sorted as it wants them read.  A missing value (NaN)
 * breaks the line instead of inventing one.  Every series has one value per
 * x value; plots_sweep_chart checks it.  The subtitle names the parameter
 * and the values the other swept keys were held at.
 *
 * plots_sweep_from_grid makes the chart of `offsim sweep --plot`: step time
 * against the first swept key, in the unit its values are written in when
 * they share one ("GB/s", "us" as "µs"), else in the unit that suits their
 * size (never raw bytes or seconds for a size, rate or time); one line per
 * policy at the points where every other swept key is at its first value
 * (NaN where this shard did not run one), those values in the subtitle; the
 * title names the scenario file swept ("sweep of scenarios/default.ini"),
 * not its [scenario] name, which may state a value the sweep changes.
 *
 * Axes: one whose values are all positive and span more than two decades
 * (largest over smallest above 100) is logarithmic, its label saying so;
 * otherwise one with no negative value starts at 0 (gnuplot's own margins
 * drew a step time axis down to -20 ms).
 *
 * Ownership: a PlotsSweep owns its strings, its x array, its series and its
 * held values (copies of what it was given) and is freed with
 * plots_sweep_free; the chart is new, the caller's to free
 * (plots_gnuplot_chart_free).  The grid is only read.
 */
#pragma once

#include "plots/gnuplot.h"
#include "sweep/grid.h"

G_BEGIN_DECLS

typedef struct {
  char *name;  /* policy */
  GArray *y;   /* double per x value; NaN = missing */
} PlotsSweepSeries;

typedef struct {
  char *title;     /* the chart's title: "sweep of FILE" from plots_sweep_from_grid */
  char *parameter; /* "link.h2d_bandwidth" */
  char *x_unit;    /* "GB/s", or "" */
  char *metric;    /* "step time" */
  char *y_unit;    /* "ms", or "" */
  GArray *x;       /* double, in x_unit */
  GPtrArray *series; /* PlotsSweepSeries* */
  GPtrArray *held;   /* char*, "group.key = value": the other swept keys, as drawn */
} PlotsSweep;

PlotsSweep *plots_sweep_new(const char *title, const char *parameter, const char *x_unit, const char *metric,
                            const char *y_unit);
void plots_sweep_free(PlotsSweep *sweep);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlotsSweep, plots_sweep_free)

/* Adds a series of `n` values (n must equal the number of x values when the
 * chart is drawn). */
void plots_sweep_add_series(PlotsSweep *sweep, const char *name, guint n, const double *y);

/* Notes that swept key `name` was held at `value` in the chart. */
void plots_sweep_hold(PlotsSweep *sweep, const char *name, const char *value);

/* Fails with SIM_ERROR_INPUT when there are no x values or a series' length
 * differs from theirs. */
PlotsChart *plots_sweep_chart(const PlotsSweep *sweep, const char *name, GError **error);

/* Step time against `grid`'s first axis (above).  Fails with
 * SIM_ERROR_INPUT, naming no option, when that key does not take numbers
 * (sizes, rates, times, plain numbers or counts). */
/* `scenario`: the file the grid sweeps, for the title. */
PlotsSweep *plots_sweep_from_grid(const SweepGrid *grid, const char *scenario, GError **error);

G_END_DECLS
