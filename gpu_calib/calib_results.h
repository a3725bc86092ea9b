/* gpu_calib/calib_results.h — the record of one offsim-calib run, and the
 * profile assembled from it.
 *
 * CalibResults gathers what the probe found and what every measurement
 * gave; calib_results_build_profile turns it into a CalibProfile: [device]
 * and [link] values with a note above each saying where it came from, the
 * pinned copy tables, and [calibration] metadata that keeps every raw
 * sample.  The metadata's order is fixed (the profile writes it in
 * insertion order), and the same results give the same profile but for the
 * date.  Assembly lives here, not in calib_profile.c: the writer is plain C
 * that the tests link without CUDA, while the results hold a
 * cudaDeviceProp and the measurements' types.
 *
 * Over calib_mock.c's stand-ins (calib_kernels_stand_in) the title and
 * [calibration] tool say MOCK OUTPUT, never "measured".
 *
 * Ownership: a CalibResults owns the probe's strings, bidir.pcie_during
 * and the GEMM list's figures; calib_results_clear frees them (not the
 * struct).  The
 * profile returned is new and the caller's (g_autoptr(CalibProfile)).
 */
#pragma once

#include "gpu_calib/calib_fit.h"
#include "gpu_calib/calib_measure.h"
#include "gpu_calib/calib_probe.h"
#include "gpu_calib/calib_profile.h"
#include "gpu_calib/calib_timing.h"

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  CalibProbe probe;
  int cublas;
  CalibSweep sweeps[4]; /* h2d pinned, d2h pinned, h2d pageable, d2h pageable */
  CalibFit fit[2];      /* by direction: 0 D2H, 1 H2D */
  CalibBidir bidir;
  CalibGemms gemm;
  CalibOverlap overlap[CALIB_OVERLAPS]; /* bf16 GEMM, FMA kernel, triad */
  double fma_tflops;
  double d2d_seconds, triad_bandwidth, copy_kernel_bandwidth;
  guint64 d2d_bytes, copy_kernel_bytes;
  CalibGemmList list;
  CalibLaunches launches;
  double alloc[CALIB_ALLOC_SIZES], alloc_samples[CALIB_ALLOC_SIZES][CALIB_MAX_REPEATS];
} CalibResults;

/* The profile of `r`, measured on `c` (its quick, device and repeats are
 * recorded), dated now. */
CalibProfile *calib_results_build_profile(const Calib *c, const CalibResults *r);

/* Frees the strings `r` owns. */
void calib_results_clear(CalibResults *r);

G_END_DECLS
