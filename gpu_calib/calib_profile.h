/* gpu_calib/calib_profile.h — a measured device and link, written as a
 * profile that scenarios include.
 *
 * offsim-calib fills a CalibProfile and saves it; a scenario says
 * `include = profile.ini` and the simulator reads [device] and [link] from it
 * like any hand-written profile.  The writer prints exactly the syntax the
 * scenario loader parses (sim/base/units.h): sizes in exact bytes ("4096B"),
 * rates and times in a unit that keeps the number in [1, 1000) with twelve
 * significant digits ("55.1234567891GB/s", "7.93us"), plain decimals without
 * exponents, so that write-then-load gives the same doubles to about 1e-12.
 * Tables are `SIZE:RATE` points in increasing size, the bandwidth of one copy
 * of that size, fixed cost included (SimBandwidthPoint).
 *
 * Every key may carry a note, written as comment lines above it, saying where
 * the number came from.  [calibration] holds free-form metadata (raw
 * samples, date, driver) in insertion order; the loader accepts the group
 * and reads none of it.  [device] efficiency is never written: it is a
 * property of a model's kernels, not of the device (see the comment the
 * writer puts above matmul_tflops).
 *
 * Formatting validates first: a rate that is not positive, a factor out of
 * range or a table out of order is a SIM_ERROR_INPUT naming [group] key, and
 * nothing is written.  Saving is atomic (g_file_set_contents): a reader never
 * sees half a profile.
 *
 * The kernel cost model's [device] keys (sim/engine/kernel.h):
 * matmul_tflops_bf16, _fp16 and _fp32, sm_count, launch_overhead and
 * gemm_table (`DTYPE:MxNxK:RATE` items, RATE a number and TFLOPS:
 * "bf16:4096x4096x4096:650.5TFLOPS"), after hbm_bandwidth, which both time
 * models read.  A zero or an empty table is not written.  An offsim whose
 * scenario loader does not read one of them yet would refuse the whole
 * profile, so by default (CALIB_KEYS_AUTO) each is written as a key where
 * this build's loader reads it (sim_schema_find) and as a comment, `#
 * key = value`, under one line saying so, where it does not; the other two
 * forms are for tests.
 *
 * Ownership: the profile owns its notes, metadata and GEMM table; the link
 * is a value.
 */
#pragma once

#include "engine/machine.h"

#include <glib.h>

G_BEGIN_DECLS

/* The kernel cost model's dtypes, as it names them. */
typedef enum { CALIB_DTYPE_BF16, CALIB_DTYPE_FP16, CALIB_DTYPE_FP32, CALIB_DTYPES } CalibDtype;

/* "bf16", "fp16", "fp32", indexed by CalibDtype. */
extern const char *const calib_dtype_names[CALIB_DTYPES];

/* One gemm_table item: a measured shape's throughput. */
typedef struct {
  CalibDtype dtype;
  int m, n, k;
  double tflops;
} CalibGemmPoint;

/* How the kernel cost model's keys are written (above). */
typedef enum {
  CALIB_KEYS_AUTO,      /* a key where this build's loader reads it, a comment where it does not */
  CALIB_KEYS_ACTIVE,    /* every one as a key */
  CALIB_KEYS_COMMENTED, /* every one as a comment */
} CalibKeyForm;

typedef struct {
  char *title;          /* the first comment line; NULL: none */
  /* [device] */
  guint64 memory;       /* bytes */
  double matmul_tflops; /* TFLOP/s */
  double hbm_bandwidth; /* bytes per second */
  /* [device], the kernel cost model's keys; 0 or empty: not written */
  double matmul_tflops_dtype[CALIB_DTYPES]; /* TFLOP/s, by CalibDtype */
  guint sm_count;
  double launch_overhead; /* seconds per kernel, on the host */
  GArray *gemm_table;     /* CalibGemmPoint, written in insertion order */
  CalibKeyForm kernel_keys;
  /* [link], tables included */
  SimLink link;
  GHashTable *notes;    /* "group.key" -> comment text (lines split on '\n') */
  GPtrArray *meta;      /* [calibration]: alternating key, value (owned strings) */
} CalibProfile;

/* Link fields at the simulator's defaults, no tables, device fields zero. */
CalibProfile *calib_profile_new(void);
void calib_profile_free(CalibProfile *profile);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CalibProfile, calib_profile_free)

/* A comment for "group.key" (such as "link.latency"), replacing any earlier one. */
void calib_profile_note(CalibProfile *profile, const char *group_key, const char *format, ...) G_GNUC_PRINTF(3, 4);

/* Appends `key = value` to [calibration].  Keys are letters, digits, '_' and
 * '-', each used once; control characters and backslashes in the value
 * become spaces. */
void calib_profile_meta(CalibProfile *profile, const char *key, const char *format, ...) G_GNUC_PRINTF(3, 4);

/* Appends one table point for direction `dir` (0 = D2H, 1 = H2D); the
 * order is checked when the profile is formatted. */
void calib_profile_add_point(CalibProfile *profile, int dir, guint64 bytes, double bandwidth);

/* Appends one gemm_table item; checked when the profile is formatted. */
void calib_profile_add_gemm(CalibProfile *profile, CalibDtype dtype, int m, int n, int k, double tflops);

/* "bf16:4096x4096x4096:650.5TFLOPS": one gemm_table item as written. */
char *calib_format_gemm_point(const CalibGemmPoint *point);

/* The INI text, or NULL and SIM_ERROR_INPUT when a value is out of range. */
char *calib_profile_format(const CalibProfile *profile, GError **error);

/* Formats and writes atomically. */
gboolean calib_profile_save(const CalibProfile *profile, const char *path, GError **error);

/* Writes the profile to a temporary file, loads it as a scenario that
 * includes it would, and checks that [device] and [link] come back as
 * written (tables included, to 1e-9 relative) into `machine`.  A mismatch is
 * SIM_ERROR_INTERNAL naming [group] key: a bug of the writer, not of the
 * measurement. */
gboolean calib_profile_verify(const CalibProfile *profile, SimMachine *machine, GError **error);

/* The number formats of the profile, for anyone writing the same syntax:
 * "55.1234567891GB/s", "7.93us" (0 as "0"), plain decimals ("0.03"). */
char *calib_format_rate(double bytes_per_s);
char *calib_format_time(double seconds);
char *calib_format_number(double value);

G_END_DECLS
