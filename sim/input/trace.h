/* sim/input/trace.h — a workload from a recording of what autograd saved.
 *
 * python/offsim_torch/recorder.py writes one CSV row per saved reference
 * (README, `[trace]`, for the columns).  This module turns such a file into a
 * SimWorkload: rows of layer N become layer N's tensors, "embed" and "head"
 * rows the embedding and loss-head stages.  References to one storage are
 * one tensor with `refs` references, sized by the storage (storage_bytes).
 * Rows with saved = 0 and name "input" give the layer's input, what full
 * checkpointing keeps; other rows with saved = 0 are not saved.  With the
 * freed_layer, freed_phase and freed_op columns, rows with saved = 0 named
 * workspace, transient, grad or held are allocations (recorder.py's
 * allocation log), which only a timed load with places lays over the ops
 * (trace_ops.c); other loads drop them.
 *
 * Two readings, chosen by the header:
 * - without a `leaf` column (a file in the first columns only, such as
 *   tests/data/trace/'s or one written by hand): parameters are left
 *   out (static memory, not activations) and a storage already counted in
 *   an earlier layer (RoPE tables, masks shared by every layer) is dropped
 *   from the later ones;
 * - with one (recorder.py, which lists every reference autograd packs): the
 *   layers hold every reference, as `[transformer] ops = hf` lists them
 *   (sim/model/workload.h): parameter rows become `parameter` tensors, a
 *   storage an earlier layer saved first becomes a `shared` tensor with this
 *   layer's references, `host = 1` rows `host` tensors and `leaf` sets the
 *   flag; none of the first three is saved bytes (sim_tensor_on_device).
 *
 * Times: sim_trace_load leaves them at 0 (the caller sets forward and
 * backward).  A recorder.py file also has compute rows (a non-empty `flops`
 * field: one op's FLOPs and bytes moved in one layer and phase);
 * sim_trace_load_timed times every layer, the embedding and the head from
 * them as [transformer] does: FLOPs / (matmul_flops x efficiency) plus the
 * bytes of the ops without FLOPs / hbm_bandwidth, forward and backward each
 * from its own rows.
 *
 * The parser is strict: a header with at least layer, op, name, bytes,
 * dtype, shape and is_parameter; no quoted fields; every layer from 0 to the
 * largest present.  Errors are SIM_ERROR_INPUT "FILE:LINE: column: what".
 */
#pragma once

#include "engine/machine.h"
#include "model/workload.h"

G_BEGIN_DECLS

SimWorkload *sim_trace_load(const char *path, const char *name, GError **error);
SimWorkload *sim_trace_load_data(const char *data, gsize length, const char *origin, const char *name,
                                 GError **error);

/* As above, timed from the file's op counts with `device`'s matmul_flops,
 * efficiency and hbm_bandwidth (both rates must be set); an error when the
 * file has no counts or a layer has none. */
SimWorkload *sim_trace_load_timed(const char *path, const char *name, const SimDevice *device, GError **error);
SimWorkload *sim_trace_load_data_timed(const char *data, gsize length, const char *origin, const char *name,
                                       const SimDevice *device, GError **error);

G_END_DECLS
