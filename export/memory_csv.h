/* export/memory_csv.h — device and host memory over the step, as CSV.
 *
 * The CSV is the ledger of one result: time_ms,device_bytes,host_bytes, one
 * row per change of either pool, starting with the baseline at 0.  With
 * several GPUs it is time_ms,gpu,device_bytes,host_bytes: each row the
 * levels of the GPU (stage × dp + replica) whose memory changed, every GPU
 * with a row at 0; one GPU keeps the three columns.
 *
 * It needs a detailed result (the memory curve); without one it fails with
 * SIM_ERROR_INTERNAL.  The result is only read.
 */
#pragma once

#include "result/result.h"

G_BEGIN_DECLS

/* Writes the CSV of a detailed result to `path`, atomically; `option`
 * ("--memory") prefixes errors, as sim_output_save's does. */
gboolean export_memory_csv_write(const SimResult *result, const char *option, const char *path, GError **error);

/* TRUE when `result` is detailed (has a memory curve), else
 * SIM_ERROR_INTERNAL naming its policy.  The memory chart checks the same. */
gboolean export_memory_csv_has_curve(const SimResult *result, GError **error);

/* The GPUs of a curve (SimMemPoint): every GPU has a point at time 0, so
 * one past the highest GPU of a point. */
guint export_memory_csv_gpus(const GArray *curve);

G_END_DECLS
