/* export/timeline_csv.h — the step as CSV: when each op held its stream.
 *
 * The CSV has one row per op in issue order, with the spans of spans.h:
 * stream,op,layer,phase,start_ms,end_ms,bytes (the stream's name says its
 * stage; bytes are a copy's, 0 for a send, whose op keeps only its time).
 *
 * It needs a detailed result (op times); without one it fails with
 * SIM_ERROR_INTERNAL.  The result is only read.
 */
#pragma once

#include "result/result.h"

G_BEGIN_DECLS

/* Writes the timeline CSV of a detailed result to `path`, atomically;
 * `option` ("--timeline") prefixes errors, as sim_output_save's does. */
gboolean export_timeline_csv_write(const SimResult *result, const char *option, const char *path, GError **error);

G_END_DECLS
