/* sim/lower/pipeline.h — the step of a pipeline: stages on GPUs, micro-batches
 * in flight, replicas in lockstep, all in one program.
 *
 * With [parallel] the step is no longer one forward and one backward on one
 * GPU.  The lowering cuts the layers into pp × virtual chunks (chunk c on
 * stage c mod pp, parallel.h), makes every (chunk, micro-batch) a slice of
 * the single-GPU lowering (lower_private.h) on its stage's streams, and
 * orders each stage's slices as the schedule says:
 *
 *   gpipe        every forward, then every backward, micro-batches in order;
 *   1f1b         stage s runs min(pp - s - 1, M) forwards, then alternates a
 *                forward and a backward, then the remaining backwards
 *                (Megatron's forward_backward_pipelining_without_interleaving);
 *   interleaved  the same over pp × virtual chunks, with Megatron's warm-up
 *                of 2 (pp - s - 1) + (virtual - 1) pp forwards and its order
 *                of (chunk, micro-batch) pairs.
 *
 * Each GPU has four streams: compute, d2h, h2d (the single-GPU lowering's)
 * and p2p.  A chunk's forward of micro-batch m waits until the previous
 * chunk's activation has arrived; when it ends, its stage's p2p stream
 * sends the activation on (a send op of p2p_latency + bytes / p2p_bandwidth,
 * the bytes being the next layer's input) and records its arrival.  The
 * backward sends the input's gradient back the same way.  Bubbles and waits
 * therefore come out of the run, not out of a formula.
 *
 * Every policy applies per stage (`stages` picks the stages it acts on; the
 * others keep everything) and per micro-batch: each slice offloads, reloads
 * or recomputes its own tensors on its stage's streams.  keep_last counts
 * from the top of each chunk.  A stage's device baseline is its layers'
 * static bytes (SimLayer.static_bytes), the embedding's on the first and
 * the head's on the last, plus an even share of what no layer claims; or,
 * when the workload counts its parameters (SimLayer.params), those of the
 * stage's layers under [parallel] sharding over the dp replicas
 * (sim_sharding_static: ZeRO's stages, sim/model/sharding.h);
 * gradients that are not static appear with the first micro-batch's
 * backward and, like held outputs, go with the stage's last op, its
 * optimizer step at the end of its compute stream (timed from its kernels,
 * 0 seconds when the workload does not model the step; under
 * offload_optimizer a zero-time op after the host's step).
 *
 * Replicas (dp) run the same program on their own GPUs, gpu = stage × dp +
 * replica; they differ from one replica only through the links they share.
 * So a run needs every replica only where they run otherwise
 * (sim_lower_pipeline_replicas): sim_lower_pipeline_once_into lowers the
 * first replica of each stage (and under full sharding the last) and makes
 * its GPU stand for the others (sim_program_set_copies), whose run the
 * engine then reports to the bit (docs/engine.md, "Identical replicas").
 *
 * Cost: linear in replicas × stages × micro-batches × layers per chunk ×
 * tensors; what the single-GPU lowering costs, times micro-batches × dp.
 */
#pragma once

#include "lower/lower.h"
#include "model/parallel.h"

G_BEGIN_DECLS

/* Streams per GPU, in this order from SIM_PIPELINE_STREAMS × gpu, and a
 * fifth, `comm`, when the step communicates (tp, ep or dp above 1): then from
 * (SIM_PIPELINE_STREAMS + 1) × gpu. */
enum {
  SIM_PIPELINE_STREAM_COMPUTE = 0,
  SIM_PIPELINE_STREAM_D2H = 1,
  SIM_PIPELINE_STREAM_H2D = 2,
  SIM_PIPELINE_STREAM_P2P = 3,
  SIM_PIPELINE_STREAMS = 4,
  SIM_PIPELINE_STREAM_COMM = 4,
};

/* Resets `program` and lowers the step of `workload` under `policy` spread
 * as `parallel` says (checked by the loader: every chunk has a layer, a
 * split adds up, pp × dp <= SIM_PARALLEL_MAX_GPUS). */
void sim_lower_pipeline_into(SimProgram *program, const SimWorkload *workload, const SimPolicy *policy,
                             const SimLink *link, const SimParallel *parallel);

/* How many replicas of each stage a run of the step must hold: dp when
 * they run otherwise (a collective group of one spans other nodes than the
 * first's); else 1, the first standing for every replica, or under full
 * sharding with dp > 2 two, the first for all but the last (its gathers
 * allocate at their start, and the last replica to reach a barrier starts
 * its collective earlier within the instant: docs/engine.md).  The copies
 * behind shared [node] links are sim_lower_pipeline_once_into's to judge. */
guint sim_lower_pipeline_replicas(const SimWorkload *workload, const SimLink *link, const SimParallel *parallel);

/* Lowers the step as sim_lower_pipeline_into does, but with only the
 * replicas sim_lower_pipeline_replicas names, the program's GPUs standing
 * for the others (sim_program_set_copies; the sums are the whole step's),
 * unless the step copies behind shared [node] links: then every replica.
 * Returns the replicas of each stage lowered (dp: all of them). */
guint sim_lower_pipeline_once_into(SimProgram *program, const SimWorkload *workload, const SimPolicy *policy,
                                   const SimLink *link, const SimParallel *parallel);

/* The device baseline of `stage` on each of its replicas: its static bytes
 * (see above), sharded as `parallel` says. */
guint64 sim_lower_pipeline_stage_static(const SimWorkload *workload, const SimParallel *parallel, guint stage);

G_END_DECLS
