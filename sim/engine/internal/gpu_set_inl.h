/* sim/engine/internal/gpu_set_inl.h — a set of GPUs, one bit each.
 *
 * Internal to the engine: engine.c keeps in one the GPUs that have something
 * running (a compute op, a copy, a collective), so that a step of a run on
 * many GPUs walks those and not every GPU of the program (docs/engine.md,
 * "The loop").  Header-only and static, like heap_inl.h.
 *
 * Why bits and not a list: the step must visit GPUs in ascending order where
 * the order shows in the results (copies started at one instant apply their
 * memory actions in GPU order; the shared-link filling sums its flows in GPU
 * order), and bits walked word by word with a count of trailing zeros give
 * that order with no sort.  Cost: add and remove are one or and one and; the
 * walk (engine.c's, over `bits` directly) is O(words + members), at most
 * SIM_NODE_MAX_GPUS / 64 = 4 words.
 */
#pragma once

#include "engine/machine.h"

#include <glib.h>

G_BEGIN_DECLS

#define SIM_GPU_SET_WORDS (SIM_NODE_MAX_GPUS / 64)

typedef struct {
  guint64 bits[SIM_GPU_SET_WORDS];
} SimGpuSet;

static inline void
sim_gpu_set_add(SimGpuSet *set, guint g)
{
  set->bits[g >> 6] |= (guint64)1 << (g & 63);
}

static inline gboolean
sim_gpu_set_has(const SimGpuSet *set, guint g)
{
  return (set->bits[g >> 6] >> (g & 63)) & 1;
}

static inline void
sim_gpu_set_remove(SimGpuSet *set, guint g)
{
  set->bits[g >> 6] &= ~((guint64)1 << (g & 63));
}

G_END_DECLS
