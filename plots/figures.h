/* plots/figures.h — the pictures of `offsim run` and `offsim compare`.
 *
 * One call decides which charts a set of results gets and writes them:
 * a timeline per policy (in a compare they share one time axis, so the
 * longer step looks longer), the memory chart with every policy, and, with
 * two or more policies, the comparison chart.  File names are
 * timeline-POLICY, memory and comparison, POLICY reduced to [A-Za-z0-9._-]
 * and numbered when two policies reduce to the same name.
 *
 * The script is written first and needs no gnuplot: it draws to
 * DIR/NAME.EXT when a directory is given as well, NAME.EXT otherwise.  The
 * caller names its options for the messages (PlotsRenderNames,
 * `script_option`); plots/ knows none.
 *
 * Every result must be detailed (the timelines and the memory chart need
 * op times and the memory curve); otherwise the call fails with
 * SIM_ERROR_INTERNAL and writes nothing.  Results and options are only
 * read.  Ownership: plots_figures_charts returns a new GPtrArray of
 * PlotsChart* that frees its charts (g_ptr_array_unref); `summary` is the
 * caller's to g_free.
 */
#pragma once

#include "plots/gnuplot.h"
#include "result/result.h"

G_BEGIN_DECLS

typedef struct {
  const char *dir;           /* render into DIR; NULL: do not render */
  const char *script;        /* write the script to FILE; NULL: do not */
  guint formats;             /* PlotsFormat bits; 0 = PNG and SVG */
  guint64 device_memory;     /* tells a budget from the device's capacity */
  const char *script_option; /* prefixes errors about `script` ("--plot-script"); needed with it */
  PlotsRenderNames render;   /* for errors about `dir` (its `dir_option` too) and a missing gnuplot */
} PlotsFiguresOptions;

/* The charts (PlotsChart*) for detailed results (SimResult*). */
GPtrArray *plots_figures_charts(GPtrArray *results, guint64 device_memory, GError **error);

/* Writes the script and/or renders the charts.  `summary`, when not NULL,
 * receives what was drawn: "comparison, memory and 4 timelines". */
gboolean plots_figures_write(GPtrArray *results, const PlotsFiguresOptions *options, char **summary,
                             GError **error);

G_END_DECLS
