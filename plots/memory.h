/* plots/memory.h — device and host memory over the step, as a chart (its
 * CSV: export/memory_csv.h).
 *
 * The chart has two panels on one time axis: device memory (one step curve
 * per policy, its peak marked with a dot) and host pinned memory below.  The
 * capacity, or the budget that replaces it, is a dotted line when it is
 * within reach of the curves; when it is far above them (80 GiB against
 * 8 GiB) drawing it would flatten every curve into the bottom tenth, so a
 * footer line says where it is instead.  The footer has two lines per
 * policy, in the policy's colour (darkened until it reads on white): its
 * peak, when, in which phase and layer; then what was live.  Each policy keeps the colour it has in every chart.
 *
 * Several GPUs (a pipeline): each curve point holds the levels of one GPU,
 * so each GPU gets its own device curve and its own host curve, following
 * only its points, and a dot at its own peak.  Each host curve is drawn
 * rather than their sum or the worst, because each GPU has its own pinned
 * pool (the one its offloads fill) and these are the figures the report's
 * per-stage block gives.  With one policy, a colour per GPU, titled by
 * stage ("stage 1", "stage 0.1" with replicas); with several, the policy's
 * colour, a dash type per GPU (five in turn), titled "POLICY, stage S".
 * The device panel grows with its legend, and the footer adds, per policy,
 * each GPU's device peak (eight GPUs a line).
 *
 * It needs detailed results (the memory curve); without one it fails with
 * SIM_ERROR_INTERNAL.  Results are only read.  Ownership: the chart is new,
 * the caller's to free (plots_gnuplot_chart_free).
 */
#pragma once

#include "plots/gnuplot.h"
#include "result/result.h"

G_BEGIN_DECLS

/* `results`: detailed SimResult*.  `device_memory` tells a budget from the
 * device's capacity in the labels. */
PlotsChart *plots_memory_chart(GPtrArray *results, guint64 device_memory, const char *name, GError **error);

G_END_DECLS
