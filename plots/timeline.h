/* plots/timeline.h — the step as a Gantt chart (its CSV: export/timeline_csv.h).
 *
 * The chart has one row per stream (compute, then the copy streams, in the
 * program's order; a stream whose ops overlap gets more rows) and one box
 * per op, coloured by what it does: forward, backward, recompute, D2H copy,
 * H2D copy, host allocation, and waits, drawn on the streams that compute
 * (there a wait is the compute stream starved by a copy; on a copy stream it
 * is only idle time).  A dashed line marks the forward/backward boundary, the
 * end of the last forward op.  The labels are the title, the axes, the
 * stream names, the legend and the boundary: none per op or per layer, so
 * the chart stays readable at any layer count.  Above MAX_BOXES (4,000)
 * drawn ops, a box per op would be far thinner than a pixel and the SVG
 * tens of MB: the chart then shows 1,000 slices of the time axis, each
 * drawn as the kind of op that kept its row busy longest (empty when the
 * row was idle half of it or more), runs of one kind joined, and a second
 * line under the axis says so.
 *
 * Several GPUs (a pipeline): the rows are every GPU's streams ("stage 0
 * compute", "stage 0 d2h", "stage 0 h2d", "stage 0 p2p", then stage 1's),
 * a thin line between one GPU's rows and the next's; rows get shorter past
 * 12 (down to 24 px) so that 64 of them stay one screen high, and the left
 * margin fits the longest name.  Sends on the p2p streams and waits for an
 * event another GPU records (a stage idle until its neighbour hands it an
 * activation or a gradient) have kinds and colours of their own; waits on
 * copy and p2p streams are not drawn.  The forward/backward line is drawn
 * per GPU, across its rows, where its forwards all end before its
 * backwards start (GPipe; 1F1B interleaves them: no line), named in the
 * legend.  The subtitle says that the figures are the busiest GPU's.
 *
 * It needs a detailed result (op times); without one it fails with
 * SIM_ERROR_INTERNAL.  The result is only read.  Ownership: the chart is
 * new, the caller's to free (plots_gnuplot_chart_free); colours are static.
 */
#pragma once

#include "plots/gnuplot.h"
#include "result/result.h"

G_BEGIN_DECLS

/* The Gantt chart of a detailed result, named `name`.  `xmax_ms` is the
 * end of the time axis (a compare shares one across its policies); 0 means
 * the result's own step. */
PlotsChart *plots_timeline_chart(const SimResult *result, const char *name, double xmax_ms, GError **error);

/* The fill colour of a span kind ("#rrggbb"). */
const char *plots_timeline_color(guint kind);

G_END_DECLS
