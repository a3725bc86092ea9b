/* gpu_calib/calib_report.h — what offsim-calib says to people, and how it
 * stops.
 *
 * The module owns the program's voice on stderr: progress lines (one call,
 * one line), fatal errors (`offsim-calib: ` and the message, then exit with
 * the status given), and the checked CUDA and cuBLAS calls, which report the
 * file, the line, the call and the library's message and exit 1 when a call
 * fails.  A caller of CUDA_CHECK or CUBLAS_CHECK therefore never sees a
 * failure: past the check, the call succeeded.  The exit statuses are those
 * calib_main.c documents (1 a CUDA or cuBLAS error or a profile that would
 * not load, 2 bad options, 3 no usable device).
 *
 * It also rounds numbers for reading, to three significant digits: sizes
 * ("16 MiB"), rates ("53.0 GB/s"), times ("7 us") and a copy fit.  These go
 * into progress lines, notes and [calibration] metadata, never into the
 * profile's values, which calib_profile writes in full.  Every text function
 * returns a newly allocated string that the caller frees with g_free.
 */
#pragma once

#include "gpu_calib/calib_fit.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <glib.h>

G_BEGIN_DECLS

#define KIB ((guint64)1024)
#define MIB (KIB * KIB)
#define GIB (MIB * KIB)

/* Return when the call succeeded; otherwise report it and exit 1. */
void calib_report_check_cuda(cudaError_t e, const char *call, const char *file, int line);
void calib_report_check_cublas(cublasStatus_t s, const char *call, const char *file, int line);
#define CUDA_CHECK(call) calib_report_check_cuda((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) calib_report_check_cublas((call), #call, __FILE__, __LINE__)

/* "offsim-calib: MESSAGE" on stderr, then exit(status). */
G_GNUC_NORETURN void calib_report_die(int status, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* One line on stderr. */
void calib_report_progress(const char *format, ...) G_GNUC_PRINTF(1, 2);

/* "1 GiB", "16 MiB", "4 KiB": the largest unit that divides the size. */
char *calib_report_size(guint64 bytes);
/* Three significant digits: "53.0 GB/s" (sim_units_format_rate). */
char *calib_report_rate(double bytes_per_s);
/* Three significant digits in ms, us or ns. */
char *calib_report_time(double seconds);
/* "alpha 7 us, beta 53 GB/s, max error 0.50%, rms ... over N sizes". */
char *calib_report_fit(const CalibFit *fit);

G_END_DECLS
