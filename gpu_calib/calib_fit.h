/* gpu_calib/calib_fit.h — the per-copy cost model fitted to measured copies.
 *
 * One copy of b bytes takes t = α + b/β: a fixed cost α (driver, DMA set-up,
 * completion) and a bandwidth β.  offsim-calib measures t over a geometric
 * sweep of sizes (4 KiB to 1 GiB), where t spans five orders of magnitude, so
 * the fit minimises the *relative* error Σ((α + b/β − t)/t)²: an absolute
 * least-squares fit would ignore every small copy, and α with it.  The
 * problem is linear in (α, γ = 1/β); it is solved in closed form by weighted
 * least squares (a two-column QR, sizes scaled to the largest), so the same
 * input always gives the same bits.  A fixed cost cannot be negative: when
 * the free fit gives α < 0 (noise on small copies), α is set to 0 and γ
 * refitted alone, which is the constrained optimum of this convex problem.
 *
 * The launch overhead is fitted the same way, more simply: the wall clock
 * of N back-to-back launches and the synchronize after them is t(N) = a +
 * b N (a: the synchronize and the first launch's extra; b: one launch), an
 * ordinary least-squares line over a few N (calib_fit_line).
 *
 * Plain C, no CUDA: the simulator's tests exercise it on CPU.  Errors are
 * SIM_ERROR_INPUT (too few distinct sizes, a non-positive or non-finite time
 * or size, data that give no positive bandwidth).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  double alpha;          /* seconds per copy, >= 0 */
  double beta;           /* bytes per second, > 0 */
  gboolean alpha_clamped; /* the free fit gave alpha < 0: alpha = 0, beta refitted */
  double max_rel_error;  /* max over points of |(alpha + b/beta - t) / t| */
  double rms_rel_error;  /* root mean square of the same */
  guint points;
} CalibFit;

/* Fits t = alpha + bytes / beta to `n` measured (bytes[i], seconds[i]).
 * Needs at least two distinct sizes. */
gboolean calib_fit_alpha_beta(const guint64 *bytes, const double *seconds, guint n, CalibFit *fit, GError **error);

/* The least-squares line y = intercept + slope x through `n` points (x[i],
 * y[i]); needs at least two distinct x, every value finite.  The slope may
 * come out zero or negative: the caller decides what that means. */
gboolean calib_fit_line(const double *x, const double *y, guint n, double *intercept, double *slope, GError **error);

/* The median of `n` > 0 values (the mean of the middle two for even n); the
 * input is not modified.  Repeated timings are summarised by it: one
 * preempted sample must not move the result. */
double calib_median(const double *values, guint n);

G_END_DECLS
