/* sim/lower/lower.h — policy lowering: workload + policy -> stream program.
 *
 * Every policy reduces to one action per layer (keep, offload, recompute)
 * and one mechanism emits all of them, so a hybrid plan is not a special
 * case.  The program has three streams, in this order: compute, d2h, h2d.
 *
 *   keep       forward allocates the layer's saved tensors and backward
 *              frees them.
 *   recompute  forward keeps only the layer input; right before backward a
 *              recompute op (the layer's forward time) re-allocates the
 *              tensors.
 *   offload    tensors that are offloadable and at least min_tensor bytes
 *              go to the host after the forward and come back before the
 *              backward; the rest stay.
 *     sync:  copies on the compute stream, right after the forward and right
 *            before the backward (PyTorch save_on_cpu).
 *     async: verl's double-buffered group offload.  After layer i's forward
 *            the d2h stream waits on it and copies its group; each tensor's
 *            device memory is freed when its copy ends.  The forward of
 *            layer i waits until the group of layer i - inflight is out.  The
 *            h2d of layer j starts when the backward of layer j + prefetch
 *            starts (at the forward/backward boundary for the top layers)
 *            and never before layer j's own d2h is done; the backward of j
 *            waits for it.
 *   pinned = per-tensor: each offloaded tensor first pays host_alloc on the
 *            compute stream (cudaHostAlloc blocks the issuing thread and
 *            synchronises, so it cannot hide under copies).
 *   pinned = none: copies from pageable memory, at pageable_factor.
 *
 * Memory: static bytes are the device baseline; forward allocates workspace
 * at its start and frees it at its end, as do recompute and backward.
 */
#pragma once

#include "machine.h"
#include "policy.h"
#include "program.h"
#include "workload.h"

G_BEGIN_DECLS

enum {
  PLANNER_STREAM_COMPUTE = 0,
  PLANNER_STREAM_D2H = 1,
  PLANNER_STREAM_H2D = 2,
};

/* Builds a new program. */
SimProgram *planner_lower(const SimWorkload *workload, const SimPolicy *policy, const SimLink *link);

/* Lowers into `program` after sim_program_reset(), reusing its storage. */
void planner_lower_into(SimProgram *program, const SimWorkload *workload, const SimPolicy *policy,
                        const SimLink *link);

G_END_DECLS
