/* sim/result/reserved.h — what PyTorch's caching allocator reserves over a
 * run: the run's device memory actions, in the order the engine applied
 * them, replayed through sim/engine/allocator.h, one allocator per GPU.
 *
 * A positive action is one allocation (a tensor, a reload buffer, a
 * workspace), made on its op's stream: a reload buffer a copy stream
 * allocates is cached for that stream and cannot serve the compute
 * stream, as in verl, Megatron, torchtune and DeepSpeed, which allocate
 * reload buffers under their side stream.  A negative action frees the
 * allocations of its tag and layer, latest first (a free of several, the
 * gradients' at the end of the step, frees them all; a free without a
 * layer takes its tag's from any layer).  The static memory (parameters,
 * gradients, optimizer state) is one allocation made before the step on
 * the GPU's first stream.  What no action describes apart (the pieces of
 * a workspace, a kernel's own scratch) is one block, so reserved is a
 * lower bound on PyTorch's where a lowering merges allocations.
 *
 * The replay runs after the engine, once per result (the planners, which
 * run thousands of programs, judge allocated bytes and replay only the
 * plan they return).  Cost: a map lookup and an allocator request or free
 * per action; about 45 % of a sweep point on the default scenario (perf),
 * where the engine itself is fast.
 */
#pragma once

#include "engine/allocator.h"
#include "engine/engine.h"
#include "engine/program.h"

G_BEGIN_DECLS

typedef struct {
  /* The GPU that reserved the most at its peak, and that peak. */
  guint gpu;
  guint64 peak_reserved;
  /* Its allocator's peak of allocated bytes (requests rounded to 512
   * bytes, blocks that keep an unsplit rest counted whole). */
  guint64 peak_allocated;
  /* Some GPU's request did not fit `capacity` even after the cached
   * segments were released: PyTorch's out-of-memory error.  The replay
   * goes on as if the capacity were larger, so the peaks still mean
   * something. */
  gboolean out_of_memory;
  /* Bytes freed that no allocation of the same tag matched (0 for every
   * lowering offsim has: tests/test_reserved.c checks each bundled
   * scenario). */
  guint64 unmatched;
} SimReserved;

/* Replays `run` (made by `program`) under a device of `capacity` bytes per
 * GPU (0: unlimited), each GPU's allocator made with `allocator_flags`
 * (SIM_ALLOCATOR_*, sim/engine/allocator.h), into *out. */
void sim_reserved_replay(const SimRun *run, const SimProgram *program, guint64 capacity, guint allocator_flags,
                         SimReserved *out);

G_END_DECLS
