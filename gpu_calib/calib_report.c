#include "gpu_calib/calib_report.h"

#include "base/units.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- checked calls ------------------------------------------------------ */

void
calib_report_check_cuda(cudaError_t e, const char *call, const char *file, int line)
{
  if (e == cudaSuccess)
    return;
  fprintf(stderr, "offsim-calib: %s:%d: %s: %s (%s)\n", file, line, call, cudaGetErrorString(e), cudaGetErrorName(e));
  exit(1);
}

void
calib_report_check_cublas(cublasStatus_t s, const char *call, const char *file, int line)
{
  if (s == CUBLAS_STATUS_SUCCESS)
    return;
  fprintf(stderr, "offsim-calib: %s:%d: %s: %s (%s)\n", file, line, call, cublasGetStatusString(s),
          cublasGetStatusName(s));
  exit(1);
}

void
calib_report_die(int status, const char *format, ...)
{
  /* Nothing allocated: exit runs no cleanup, and LeakSanitizer would
   * count a message still held. */
  va_list ap;
  va_start(ap, format);
  fputs("offsim-calib: ", stderr);
  vfprintf(stderr, format, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(status);
}

void
calib_report_progress(const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  vfprintf(stderr, format, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* ---- numbers for people ------------------------------------------------- */

char *
calib_report_size(guint64 bytes)
{
  if (bytes >= GIB && bytes % GIB == 0)
    return g_strdup_printf("%" G_GUINT64_FORMAT " GiB", bytes / GIB);
  if (bytes >= MIB && bytes % MIB == 0)
    return g_strdup_printf("%" G_GUINT64_FORMAT " MiB", bytes / MIB);
  return g_strdup_printf("%" G_GUINT64_FORMAT " KiB", bytes / KIB);
}

char *
calib_report_rate(double bytes_per_s)
{
  return sim_units_format_rate(bytes_per_s);
}

char *
calib_report_time(double seconds)
{
  if (seconds >= 1e-3)
    return g_strdup_printf("%.3g ms", seconds * 1e3);
  if (seconds >= 1e-6)
    return g_strdup_printf("%.3g us", seconds * 1e6);
  return g_strdup_printf("%.3g ns", seconds * 1e9);
}

char *
calib_report_fit(const CalibFit *f)
{
  return g_strdup_printf("alpha %.4g us, beta %.5g GB/s, max error %.2f%%, rms %.2f%% over %u sizes%s",
                         f->alpha * 1e6, f->beta * 1e-9, 100 * f->max_rel_error, 100 * f->rms_rel_error, f->points,
                         f->alpha_clamped ? " (alpha clamped to 0)" : "");
}
