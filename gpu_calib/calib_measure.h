/* gpu_calib/calib_measure.h — the measurements: copy size sweeps and their
 * fit, both directions at once, device memory, GEMM throughput (fixed
 * shapes and the GEMM list), the FMA kernel's rate, copy/compute overlap,
 * pinned allocation and the host's cost of a kernel launch.
 *
 * Each measurement runs on a Calib that calib_timing_setup prepared, times
 * through the harness (calib_timing.h), prints its progress lines as it
 * goes, and fills a plain value that the caller owns; only
 * CalibBidir.pcie_during is allocated (calib_probe_pcie_link), and the
 * caller frees it with g_free, and CalibGemmList's tflops, freed with
 * calib_measure_gemm_list_clear.  A measurement may change the Calib's kernel
 * sizing (calib_measure_fma sets fma_iterations) and the contents of its
 * buffers, never its allocations.  Figures are medians of c->repeats
 * samples in seconds per operation, bandwidths are bytes per second, and
 * directions are numbered as SimLink's tables: 0 D2H, 1 H2D.  Errors end
 * the program (calib_report.h).
 */
#pragma once

#include "gpu_calib/calib_fit.h"
#include "gpu_calib/calib_timing.h"

#include <glib.h>

G_BEGIN_DECLS

#define CALIB_MAX_SIZES 32

/* ---- copies: the size sweeps -------------------------------------------- */

typedef struct {
  guint64 bytes;
  int count;
  double seconds; /* median per copy */
  double samples[CALIB_MAX_REPEATS];
} CalibSweepPoint;

typedef struct {
  const char *name; /* "h2d_pinned" */
  int dir;          /* 0 = D2H, 1 = H2D, as SimLink tables */
  gboolean pinned;
  CalibSweepPoint points[CALIB_MAX_SIZES];
  guint n;
  double plateau;   /* median bandwidth of the copies >= 64 MiB */
} CalibSweep;

/* Copies of 4 KiB to c->max_copy in the direction and memory `s` names,
 * into its points and plateau. */
void calib_measure_sweep(Calib *c, CalibSweep *s);

/* t = alpha + bytes / beta over the sweep's points; exits 1 when it fails. */
CalibFit calib_measure_fit_sweep(const CalibSweep *s);

/* ---- both directions at once --------------------------------------------- */

typedef struct {
  double d2h, h2d; /* bandwidth of each direction while the other ran longer */
  double copy_seconds[2]; /* per copy of `bytes`, by direction, contended */
  guint64 bytes;
  char *pcie_during; /* the link while copies ran; owned */
} CalibBidir;

void calib_measure_bidirectional(Calib *c, CalibBidir *b);

/* ---- device memory -------------------------------------------------------- */

/* Seconds of one device-to-device copy; its size into `bytes`. */
double calib_measure_device_to_device(Calib *c, guint64 *bytes);

/* The triad kernel's bandwidth, bytes read and written per second. */
double calib_measure_triad(Calib *c);

/* The copy kernel's bandwidth over c->dev_a into c->dev_b, bytes read and
 * written per second; the bytes copied into `bytes` (1 GiB, --quick 256
 * MiB). */
double calib_measure_copy_kernel(Calib *c, guint64 *bytes);

/* ---- GEMM throughput ------------------------------------------------------ */

typedef struct {
  double tflops[CALIB_GEMM_TYPES][CALIB_GEMM_SHAPES]; /* 0: not run */
  double best_bf16;
  const CalibGemmShape *best_shape;
} CalibGemms;

/* Every dtype at every shape (--quick: three shapes). */
void calib_measure_gemms(Calib *c, CalibGemms *out);

/* The GEMM list's dtypes, as calib_timing_gemm_types indexes them: bf16
 * and fp32 (true fp32: no TF32). */
#define CALIB_LIST_TYPES 2
extern const guint calib_measure_list_types[CALIB_LIST_TYPES];

typedef struct {
  const CalibGemmShape *shapes; /* c->list, borrowed */
  guint n;
  double *tflops[CALIB_LIST_TYPES]; /* n each, by list type; owned */
} CalibGemmList;

/* Every shape of c->list in each list type, timed as the fixed shapes
 * are. */
void calib_measure_gemm_list(Calib *c, CalibGemmList *out);
void calib_measure_gemm_list_clear(CalibGemmList *list);

/* ---- the host's cost of a kernel launch ------------------------------------ */

#define CALIB_LAUNCH_COUNTS 4

typedef struct {
  int counts[CALIB_LAUNCH_COUNTS];     /* N/8, N/4, N/2, N */
  double seconds[CALIB_LAUNCH_COUNTS]; /* median wall clock of that many launches and the synchronize */
  double per_launch, fixed;            /* t(count) = fixed + per_launch x count, least squares */
} CalibLaunches;

/* Back-to-back empty kernels on one stream of an idle GPU, host clock
 * from before the first launch to the return of the synchronize after the
 * last; c->repeats samples of each count after one warm-up of `n`; the
 * line fitted over the counts' medians.  Exits 1 when the slope is not
 * positive. */
void calib_measure_launches(Calib *c, int n, CalibLaunches *out);

/* ---- overlap: each victim alone and with traffic both ways ----------------- */

typedef struct {
  const char *name;
  double alone, with_copies;  /* seconds per victim op */
  double slowdown;            /* with / alone - 1 */
  double copy_slowdown[2];    /* by direction: copies with the victim / without - 1 */
} CalibOverlap;

#define CALIB_OVERLAPS 3

/* Sizes the FMA kernel to about 2 ms a launch (c->fma_iterations); returns
 * its TFLOP/s. */
double calib_measure_fma(Calib *c);

/* The bf16 square GEMM, the FMA kernel and the triad, in that order, each
 * alone and under the copies of `b`; after calib_measure_fma. */
void calib_measure_overlaps(Calib *c, const CalibBidir *b, CalibOverlap o[CALIB_OVERLAPS]);

/* ---- pinned allocation ---------------------------------------------------- */

#define CALIB_ALLOC_SIZES 3
extern const guint64 calib_measure_alloc_sizes[CALIB_ALLOC_SIZES];

/* Seconds of one cudaHostAlloc of `bytes`: host clock, median of repeats,
 * each sample into `samples`; the matching cudaFreeHost is outside the
 * timing. */
double calib_measure_host_alloc(const Calib *c, guint64 bytes, double *samples);

G_END_DECLS
