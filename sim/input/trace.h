/* sim/input/trace.h — a workload from a recording of what autograd saved.
 *
 * gpu_calib/record_saved_tensors.py writes one CSV row per saved reference
 * (see its header for the columns).  This module turns such a file into a
 * SimWorkload: rows of layer N become layer N's tensors, "embed" and "head"
 * rows the embedding and loss-head stages.  Parameters are left out (they
 * are static memory, not activations).  References to one storage are one
 * tensor with `refs` references, sized by the storage (storage_bytes); a
 * storage already counted in an earlier layer (RoPE tables, masks shared by
 * every layer) is not counted again.  Rows with saved = 0 and name "input"
 * give the layer's input, what full checkpointing keeps.
 *
 * Times are not in a recording: the caller sets forward and backward.
 *
 * The parser is strict: a header with at least layer, op, name, bytes,
 * dtype, shape and is_parameter; no quoted fields; every layer from 0 to the
 * largest present.  Errors are SIM_ERROR_INPUT "FILE:LINE: column: what".
 */
#pragma once

#include "workload.h"

G_BEGIN_DECLS

SimWorkload *sim_trace_load(const char *path, const char *name, GError **error);
SimWorkload *sim_trace_load_data(const char *data, gsize length, const char *origin, const char *name,
                                 GError **error);

G_END_DECLS
