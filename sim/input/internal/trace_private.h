/* sim/input/internal/trace_private.h — what the recording's reader (trace.c) hands
 * the op-list builder (trace_ops.c); not for other modules.
 *
 * trace.c parses every line into a Row and turns the saved rows into each
 * stage's tensors, noting in each row which tensor it is a reference to.
 * When the file places its ops (the recorder's forward_op and backward_op
 * columns) and the load is timed, trace_ops.c then gives every stage an
 * op list: one forward op per run of one module, one backward op per
 * autograd node, each split by kernel class, timed by its own counts.
 */
#pragma once

#include "engine/machine.h"
#include "model/workload.h"

G_BEGIN_DECLS

#define SIM_TRACE_SCOPE_EMBED (-1)
#define SIM_TRACE_SCOPE_HEAD (-2)

/* A row's place column when empty. */
#define SIM_TRACE_NO_PLACE (-1)

/* What an allocation row is (its `name`; python/offsim_torch/lifetimes.py
 * writes them): not a row of that kind (NONE); the most a place held at
 * once of what it allocated and freed itself (WORKSPACE); a block made in
 * one place and freed in another (TRANSIENT, with the freed_* columns); a
 * parameter's gradient (GRAD, held to the end of the step); anything else
 * alive when the step ended (HELD). */
typedef enum {
  SIM_TRACE_ALLOC_NONE,
  SIM_TRACE_ALLOC_WORKSPACE,
  SIM_TRACE_ALLOC_TRANSIENT,
  SIM_TRACE_ALLOC_GRAD,
  SIM_TRACE_ALLOC_HELD,
  SIM_TRACE_ALLOC_KINDS,
} SimTraceAlloc;

static const char *const sim_trace_alloc_names[SIM_TRACE_ALLOC_KINDS] = {
  [SIM_TRACE_ALLOC_NONE] = "", [SIM_TRACE_ALLOC_WORKSPACE] = "workspace", [SIM_TRACE_ALLOC_TRANSIENT] = "transient",
  [SIM_TRACE_ALLOC_GRAD] = "grad", [SIM_TRACE_ALLOC_HELD] = "held",
};

typedef struct {
  gint64 scope;   /* layer index, SIM_TRACE_SCOPE_EMBED or SIM_TRACE_SCOPE_HEAD */
  /* A saved row: its tensor's name (the module, `layers.N.` dropped); an
   * input row: "input"; a compute row: its op's name (the module in the
   * forward, the autograd node in the backward). */
  char *name;
  guint64 bytes;
  guint64 storage; /* G_MAXUINT64 when the file has no storage column */
  gboolean saved;
  gboolean storage_sized; /* `bytes` is the storage's size (the storage_bytes column) */
  gboolean parameter;     /* kept only in a file with a leaf column; dropped otherwise */
  gboolean leaf, host;
  guint elem;     /* bytes per element from the dtype column; 0 when unknown */
  /* A compute row (a non-empty `flops` field): the op counts of one ATen
   * op in one place, not a tensor. */
  gboolean compute, backward;
  guint64 flops, moved, calls;
  guint8 kclass;  /* a compute row's SimKernelClass, from its ATen op and FLOPs */
  /* Places (the forward_op and backward_op columns, SIM_TRACE_NO_PLACE
   * when empty): the forward op that ran it or saved it, the backward op
   * (autograd node) that ran it or unpacks it. */
  gint64 forward_op, backward_op;
  char *node;     /* a saved row in a file with places: the autograd node that unpacks it */
  /* An allocation row (SimTraceAlloc, NONE for every other row): made in
   * its phase (`backward`) at its place; a transient freed at freed_op in
   * the freed phase of stage freed_scope.  `bytes` is the block's. */
  guint8 alloc;
  gboolean freed_backward;
  gint64 freed_scope, freed_op;
  guint tensor;   /* a saved row: its tensor's index in its stage (set by the loader) */
  guint line;
} SimTraceRow;

/* Seconds of a recording's counts under the flat time model (the device's
 * matmul_flops × efficiency for products, hbm_bandwidth for the bytes of
 * the ops without FLOPs): a whole stage's (trace.c) or one op's
 * (trace_ops.c). */
static inline double
sim_trace_flat_seconds(const SimDevice *dev, double flops, double bytes)
{
  return flops / (dev->matmul_flops * dev->efficiency) + bytes / dev->hbm_bandwidth;
}

/* Gives every stage of `w` (layers, embedding, head) its op list from the
 * rows of a file with places, timed by the flat model on `device`, and
 * lays its allocation rows over the ops.  FALSE with SIM_ERROR_INPUT
 * "ORIGIN:LINE: ..." for a row it cannot place (a saved reference no
 * backward op unpacks, a block freed before it was made or in a layer the
 * file does not have) or a stage without forward or backward ops. */
gboolean sim_trace_build_ops(SimWorkload *w, const GArray *rows, const char *origin, const SimDevice *device,
                             GError **error);

G_END_DECLS
