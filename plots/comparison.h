/* plots/comparison.h — every policy of a compare on one picture.
 *
 * Left: step time against peak device memory, one dot per policy in its
 * series colour; the capacity the results' `fits` was decided against (the
 * device's memory or a --budget) as a dotted vertical line named in the
 * legend (when it is far right of every dot, drawing it would squash them:
 * the axis label names it instead); and the Pareto front of the policies that fit
 * (those that no other policy that fits beats on both at once) joined by a
 * wide grey line and ringed: a policy that does not fit is never ringed,
 * and with none that fits there is no front.  Right: one stacked bar
 * per policy, compute + recompute + exposed transfer = the step time, in the
 * timeline's colours for forward, recompute and waits.  Policy names appear
 * in the legend and under the bars only, never next to a dot, so close dots
 * cannot make labels collide.
 *
 * Several GPUs (a pipeline): the peak on x is the fullest GPU's, and the
 * bars' third part, everything the busiest GPU did not compute, is named
 * "exposed transfer and bubble", since it holds the time that GPU waited
 * for its neighbours as well as for its copies.
 *
 * Needs no detail: only the figures of each result, which are only read.
 * Ownership: the chart and the GArray are new and the caller's
 * (plots_gnuplot_chart_free, g_array_unref).
 */
#pragma once

#include "plots/gnuplot.h"
#include "result/result.h"

G_BEGIN_DECLS

/* `results` holds SimResult* (detail not needed), all with the same
 * capacity; `device_memory` tells the device's memory from a budget. */
PlotsChart *plots_comparison_chart(GPtrArray *results, guint64 device_memory, const char *name);

/* One gboolean per result: TRUE when it fits and no other result that fits
 * has a step time and a peak device memory both at most its own, one of
 * them strictly less. */
GArray *plots_comparison_pareto(GPtrArray *results);

G_END_DECLS
