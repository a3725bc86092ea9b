#include "gpu_calib/calib_fit.h"

#include "base/error.h"

#include <math.h>
#include <stdlib.h>

static int
compare_doubles(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double
calib_median(const double *values, guint n)
{
  g_return_val_if_fail(values != NULL && n > 0, NAN);
  g_autofree double *sorted = g_memdup2(values, n * sizeof *values);
  qsort(sorted, n, sizeof *sorted, compare_doubles);
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

static double
dot(const double *a, const double *b, guint n)
{
  double s = 0;
  for (guint i = 0; i < n; i++)
    s += a[i] * b[i];
  return s;
}

gboolean
calib_fit_alpha_beta(const guint64 *bytes, const double *seconds, guint n, CalibFit *fit, GError **error)
{
  g_return_val_if_fail(fit != NULL && (n == 0 || (bytes != NULL && seconds != NULL)), FALSE);
  guint64 largest = 0;
  gboolean distinct = FALSE;
  for (guint i = 0; i < n; i++) {
    if (bytes[i] == 0 || !(seconds[i] > 0) || !isfinite(seconds[i])) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "copy fit: point %u (%" G_GUINT64_FORMAT " B in %g s): sizes and times must be positive and finite",
                  i + 1, bytes[i], seconds[i]);
      return FALSE;
    }
    largest = MAX(largest, bytes[i]);
    distinct |= bytes[i] != bytes[0];
  }
  if (!distinct) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "copy fit: needs at least two distinct sizes, got %u point%s", n, n == 1 ? "" : "s");
    return FALSE;
  }

  /* Each point divided by its time: rows (1/t, x/t) against 1, x = b/largest. */
  g_autofree double *u = g_new(double, n);
  g_autofree double *v = g_new(double, n);
  g_autofree double *one = g_new(double, n);
  for (guint i = 0; i < n; i++) {
    u[i] = 1.0 / seconds[i];
    v[i] = ((double)bytes[i] / (double)largest) / seconds[i];
    one[i] = 1.0;
  }
  /* Modified Gram-Schmidt: u = r11 q1, v = r12 q1 + r22 q2. */
  double r11 = sqrt(dot(u, u, n));
  for (guint i = 0; i < n; i++)
    u[i] /= r11;
  double r12 = dot(u, v, n);
  for (guint i = 0; i < n; i++)
    v[i] -= r12 * u[i];
  double r22 = sqrt(dot(v, v, n));
  double alpha = 0, gamma = 0; /* gamma: seconds per `largest` bytes */
  if (r22 > 1e-12 * r11) {
    for (guint i = 0; i < n; i++)
      v[i] /= r22;
    gamma = dot(v, one, n) / r22;
    alpha = (dot(u, one, n) - r12 * gamma) / r11;
  }
  if (!(gamma > 0) || !isfinite(gamma)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "copy fit: the times do not grow with the size: no positive bandwidth fits them");
    return FALSE;
  }
  fit->alpha_clamped = alpha < 0;
  if (fit->alpha_clamped) {
    /* alpha = 0: gamma alone minimises sum((gamma x/t - 1)^2). */
    double sxx = 0, sx = 0;
    for (guint i = 0; i < n; i++) {
      double w = ((double)bytes[i] / (double)largest) / seconds[i];
      sxx += w * w;
      sx += w;
    }
    alpha = 0;
    gamma = sx / sxx;
  }
  fit->alpha = alpha;
  fit->beta = (double)largest / gamma;
  fit->points = n;
  fit->max_rel_error = 0;
  double sum_sq = 0;
  for (guint i = 0; i < n; i++) {
    double rel = (alpha + (double)bytes[i] / fit->beta - seconds[i]) / seconds[i];
    fit->max_rel_error = MAX(fit->max_rel_error, fabs(rel));
    sum_sq += rel * rel;
  }
  fit->rms_rel_error = sqrt(sum_sq / n);
  return TRUE;
}

gboolean
calib_fit_line(const double *x, const double *y, guint n, double *intercept, double *slope, GError **error)
{
  g_return_val_if_fail(intercept != NULL && slope != NULL && (n == 0 || (x != NULL && y != NULL)), FALSE);
  double mean_x = 0, mean_y = 0;
  for (guint i = 0; i < n; i++) {
    if (!isfinite(x[i]) || !isfinite(y[i])) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "line fit: point %u (%g, %g) is not finite", i + 1, x[i], y[i]);
      return FALSE;
    }
    mean_x += x[i] / n;
    mean_y += y[i] / n;
  }
  /* Centred sums: no cancellation between large x and small y. */
  double sxx = 0, sxy = 0;
  for (guint i = 0; i < n; i++) {
    sxx += (x[i] - mean_x) * (x[i] - mean_x);
    sxy += (x[i] - mean_x) * (y[i] - mean_y);
  }
  if (n < 2 || !(sxx > 0)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "line fit: needs at least two distinct x, got %u point%s", n,
                n == 1 ? "" : "s");
    return FALSE;
  }
  *slope = sxy / sxx;
  *intercept = mean_y - *slope * mean_x;
  return TRUE;
}
