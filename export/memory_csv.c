#include "export/memory_csv.h"

#include "base/error.h"
#include "base/output.h"

gboolean
export_memory_csv_has_curve(const SimResult *r, GError **error)
{
  if (r->run && r->run->curve)
    return TRUE;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "policy '%s': evaluated without detail, no memory curve",
              r->policy);
  return FALSE;
}

guint
export_memory_csv_gpus(const GArray *curve)
{
  guint64 most = 0;
  for (guint k = 0; k < curve->len; k++)
    most = MAX(most, g_array_index(curve, SimMemPoint, k).gpu);
  return (guint)most + 1;
}

gboolean
export_memory_csv_write(const SimResult *r, const char *option, const char *path, GError **error)
{
  if (!export_memory_csv_has_curve(r, error))
    return FALSE;
  /* A column for the GPU only when there are several: one GPU's file keeps
   * the three columns it has always had. */
  gboolean several = export_memory_csv_gpus(r->run->curve) > 1;
  g_autoptr(GString) out = g_string_new(several ? "time_ms,gpu,device_bytes,host_bytes\n"
                                                : "time_ms,device_bytes,host_bytes\n");
  for (guint k = 0; k < r->run->curve->len; k++) {
    const SimMemPoint *pt = &g_array_index(r->run->curve, SimMemPoint, k);
    sim_output_number(out, pt->time * 1e3);
    if (several)
      g_string_append_printf(out, ",%" G_GUINT64_FORMAT, pt->gpu);
    g_string_append_printf(out, ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT "\n", pt->device, pt->host);
  }
  return sim_output_save(option, path, out->str, out->len, error);
}
