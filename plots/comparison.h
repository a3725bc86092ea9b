/* plots/comparison.h — every policy of a compare on one picture.
 *
 * Left: step time against peak device memory, one dot per policy in its
 * series colour, the Pareto front (the policies that no other beats on both
 * at once) joined by a wide grey line and ringed.  Right: one stacked bar
 * per policy, compute + recompute + exposed transfer = the step time, in the
 * timeline's colours for forward, recompute and waits.  Policy names appear
 * in the legend and under the bars only, never next to a dot, so close dots
 * cannot make labels collide.
 *
 * Needs no detail: only the figures of each result, which are only read.
 * Ownership: the chart and the GArray are new and the caller's
 * (plots_gnuplot_chart_free, g_array_unref).
 */
#pragma once

#include "gnuplot.h"
#include "result.h"

G_BEGIN_DECLS

/* `results` holds SimResult* (detail not needed). */
PlotsChart *plots_comparison_chart(GPtrArray *results, const char *name);

/* One gboolean per result: TRUE when no other result has a step time and a
 * peak device memory both at most its own, one of them strictly less. */
GArray *plots_comparison_pareto(GPtrArray *results);

G_END_DECLS
