/* export/chrome_trace.h — a detailed run as a Chrome trace-event JSON file, which
 * Perfetto (ui.perfetto.dev) and chrome://tracing open.
 *
 * Process 1 is the device: one thread per stream lane (compute, d2h, h2d;
 * a stream whose ops overlap gets one thread per lane, so slices on a thread
 * always nest), named by metadata events, and a "device memory" counter.
 * Process 2 is the host, with a "host pinned memory" counter.  Every op is
 * one complete ("X") event with ts and dur in microseconds and its op index,
 * stream, layer, phase and bytes in args; spans are those of spans.h (a wait
 * lasts while its stream was blocked, a record takes no time).  The counters
 * carry every point of the memory ledger, in order.
 *
 * Several GPUs (a pipeline): process GPU + 1 is that GPU, named after its
 * stage ("stage 1", "stage 0.1" with replicas), with the threads of its
 * streams and both of its counters ("device memory" and "host pinned
 * memory", from the curve points of that GPU only); there is no separate
 * host process, since each GPU has its own pinned pool.  Thread ids stay
 * unique across processes.  otherData gains "gpus".  One GPU's trace is
 * as it always was.
 *
 * The tree is built with JsonObject and written by JsonGenerator, so every
 * name is escaped by json-glib and nowhere else.
 *
 * Needs a detailed result (op times and the memory curve); without one both
 * calls fail with SIM_ERROR_INTERNAL.  The result is only read.  Ownership:
 * the JsonNode is new, the caller's to json_node_unref.
 */
#pragma once

#include <json-glib/json-glib.h>

#include "result/result.h"

G_BEGIN_DECLS

/* The trace of a detailed result as a JSON tree ({"traceEvents": [...]}). */
JsonNode *export_chrome_trace_build(const SimResult *result, GError **error);

/* Writes that tree to `path`, atomically; `option` ("--trace") prefixes
 * errors, as sim_output_save's does. */
gboolean export_chrome_trace_write(const SimResult *result, const char *option, const char *path, GError **error);

G_END_DECLS
