#include "plots/figures.h"

#include "base/error.h"
#include "base/output.h"
#include "plots/comparison.h"
#include "plots/memory.h"
#include "plots/timeline.h"

#include <string.h>

/* "timeline-NAME", numbered from 2 when NAME is taken. */
static char *
unique_name(GHashTable *taken, const char *prefix, const char *policy)
{
  g_autofree char *safe = plots_gnuplot_file_name(policy);
  char *name = g_strdup_printf("%s-%s", prefix, safe);
  for (guint n = 2; g_hash_table_contains(taken, name); n++) {
    g_free(name);
    name = g_strdup_printf("%s-%s-%u", prefix, safe, n);
  }
  g_hash_table_add(taken, g_strdup(name));
  return name;
}

GPtrArray *
plots_figures_charts(GPtrArray *results, guint64 device_memory, GError **error)
{
  g_return_val_if_fail(results->len > 0, NULL);
  g_autoptr(GPtrArray) charts = g_ptr_array_new_with_free_func((GDestroyNotify)plots_gnuplot_chart_free);
  g_autoptr(GHashTable) taken = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  double xmax = 0;
  for (guint i = 0; i < results->len; i++)
    xmax = MAX(xmax, ((SimResult *)g_ptr_array_index(results, i))->step_ms);

  if (results->len > 1) {
    g_hash_table_add(taken, g_strdup("comparison"));
    g_ptr_array_add(charts, plots_comparison_chart(results, device_memory, "comparison"));
  }
  g_hash_table_add(taken, g_strdup("memory"));
  PlotsChart *memory = plots_memory_chart(results, device_memory, "memory", error);
  if (memory == NULL)
    return NULL;
  g_ptr_array_add(charts, memory);
  for (guint i = 0; i < results->len; i++) {
    const SimResult *r = g_ptr_array_index(results, i);
    g_autofree char *name = unique_name(taken, "timeline", r->policy);
    PlotsChart *timeline = plots_timeline_chart(r, name, xmax, error);
    if (timeline == NULL)
      return NULL;
    g_ptr_array_add(charts, timeline);
  }
  return g_steal_pointer(&charts);
}

static char *
describe(GPtrArray *results)
{
  if (results->len == 1)
    return g_strdup("memory and the timeline");
  return g_strdup_printf("comparison, memory and %u timelines", results->len);
}

gboolean
plots_figures_write(GPtrArray *results, const PlotsFiguresOptions *o, char **summary, GError **error)
{
  guint formats = o->formats ? o->formats : PLOTS_FORMAT_ALL;
  /* A line break in a path would be dropped by the quoting and draw elsewhere. */
  if (o->dir && strpbrk(o->dir, "\r\n")) {
    const char *option = o->render.dir_option;
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s%sa directory name with a line break is not supported",
                option ? option : "", option ? ": " : "");
    return FALSE;
  }
  g_autoptr(GPtrArray) charts = plots_figures_charts(results, o->device_memory, error);
  if (charts == NULL)
    return FALSE;
  if (o->script) {
    g_autofree char *script = plots_gnuplot_script(charts, formats, o->dir);
    if (!sim_output_save(o->script_option, o->script, script, strlen(script), error))
      return FALSE;
  }
  if (o->dir && !plots_gnuplot_render(charts, formats, o->dir, &o->render, error))
    return FALSE;
  if (summary)
    *summary = describe(results);
  return TRUE;
}
