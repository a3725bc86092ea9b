/* sim/model/parallel.h — how a step is spread over GPUs: pipeline stages,
 * micro-batches in flight, data-parallel replicas.
 *
 * A [parallel] group fills one SimParallel.  With pp = 1, microbatches = 1
 * and dp = 1 (the defaults) a scenario is the single-GPU step offsim has
 * always simulated, and its program is the one it has always lowered.
 * Otherwise the pipeline lowering (sim/lower/pipeline.c) builds one set of
 * streams per GPU (compute, d2h, h2d, p2p) and one program for all of them:
 *
 *   - the model's layers are cut into pp × virtual chunks in order (evenly,
 *     or as `split` says); chunk c runs on stage c mod pp, so with
 *     virtual = V each stage holds V chunks (Megatron's interleaving);
 *   - the embedding sits with the first chunk, the loss head with the last;
 *   - the workload describes one micro-batch: every chunk runs forward and
 *     backward once per micro-batch, in the order `schedule` gives;
 *   - activations go to the next stage and gradients to the previous one
 *     over the sender's p2p stream: p2p_latency + bytes / p2p_bandwidth;
 *   - dp replicas run the same program on their own GPUs: they share the
 *     switch and the host memory, and meet at every collective (the
 *     gradient buckets, ZeRO's and FSDP's gathers: sim/lower/pipeline.c);
 *   - with ep > 1 the MoE layers' experts are spread over groups of ep
 *     replicas (expert parallelism): each GPU is simulated as the one that
 *     holds the hottest expert (sim/input/transformer.h, SimTransformer.ep),
 *     its all-to-alls over its group, its experts' gradients reduced over
 *     the dp / ep replicas that hold the same experts.
 *
 * Expert parallelism.  Megatron-LM builds the expert grid from the same
 * world size with expert_tensor_parallel_size = tp unless told otherwise
 * (megatron/core/parallel_state.py l. 871-872 at d98e8a6) and requires the
 * world size tp × dp × pp to be divisible by etp × ep × pp (l. 874-884): with
 * etp = tp (offsim's only case, tp being 1 in MoE layers), ep divides dp,
 * and expert_data_parallel_size = dp / ep.  It also requires experts (l.
 * 1595 of megatron/core/transformer/transformer_config.py) and ep dividing
 * their number (megatron/training/arguments.py l. 1657,
 * megatron/core/transformer/moe/moe_layer.py l. 186).  In the expert order
 * (the default tp-cp-ep-dp-pp, l. 617, cp = 1) the ep ranks of a group are
 * consecutive data-parallel ranks, tp apart.  With ep > 1 Megatron's DDP
 * keeps the routed experts' gradients in buffers of their own and reduces
 * them over the expert-data-parallel group: the dp / ep replicas holding
 * the same experts (replica r's: r mod ep, r mod ep + ep, ..., tp × ep
 * ranks apart), in buckets of `bucket` bytes like the dense ones, which
 * stay over all dp (sim/lower/pipeline.c; none at ep = dp, where no other
 * replica holds them).  Both groups' reductions share the communication
 * stream.  Sharding with ep > 1 is refused (it would divide the experts'
 * state by dp instead of dp / ep).
 *
 * GPU numbering (what [node] places on switches and sockets): stage-major,
 * replicas innermost, gpu = stage × dp + replica, as Megatron orders ranks
 * with tensor parallelism 1.
 *
 * Global ranks (where a collective's group sits, sim/engine/collective.h):
 * Megatron-LM's initialize_model_parallel takes order = "tp-cp-ep-dp-pp" by
 * default (NVIDIA/Megatron-LM, megatron/core/parallel_state.py, line 617 at
 * d98e8a6; the dense layers' generator is built with ep = 1), the first
 * dimension varying fastest: "global_rank = tp_rank + dp_rank * tp_size +
 * pp_rank * tp_size * dp_size" (same file, line 292), cp being 1 here.  So
 * the tp ranks of one simulated GPU are consecutive (inside a node when tp
 * divides the node's GPUs), then the replicas, then the stages.  offsim does
 * not simulate the tp ranks of a GPU apart (they are symmetric), so
 * global rank = tp_rank + tp × gpu: a TP group is tp consecutive ranks from
 * tp × gpu, a DP group dp ranks from tp_rank + tp × dp × stage, stride tp.
 *
 * Ownership: a SimParallel owns its split array (sim_parallel_clear).
 */
#pragma once

#include "model/sharding.h"

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SIM_PIPE_GPIPE,       /* every forward, then every backward */
  SIM_PIPE_1F1B,        /* warm-up forwards, then one forward one backward, then the cool-down backwards */
  SIM_PIPE_INTERLEAVED, /* 1F1B over `virtual` chunks per stage (Megatron's interleaved schedule) */
  SIM_PIPE_COUNT,
} SimPipeSchedule;

/* The most GPUs one simulation runs: pp × dp. */
#define SIM_PARALLEL_MAX_GPUS 256

typedef struct {
  guint pp;                 /* pipeline stages, >= 1 */
  guint microbatches;       /* micro-batches per step, >= 1 */
  SimPipeSchedule schedule;
  guint virtual_chunks;     /* model chunks per stage (`virtual`), >= 1; > 1 only with interleaved */
  guint dp;                 /* data-parallel replicas, >= 1 */
  guint ep;                 /* expert-parallel ranks among them (a divisor of dp), >= 1 */
  SimSharding sharding;     /* what the dp replicas shard (sharding.h); none with dp = 1 */
  GArray *split;            /* guint layers per chunk (pp × virtual entries, in model order), or NULL: even */
  double p2p_bandwidth;     /* bytes per second between neighbouring stages */
  double p2p_latency;       /* seconds per send */
  guint64 bucket;           /* bytes of gradients per data-parallel reduction (`bucket`) */
  gboolean offload_optimizer; /* the optimizer state in host memory, the step on the CPU */
  gboolean offload_params;    /* and the weights' and gradients' shards (full sharding) */
} SimParallel;

/* The schedule names scenarios write, indexed by the enum, NULL-terminated. */
extern const char *const sim_pipe_schedule_names[];

/* Whether the step takes the pipeline lowering: pp, dp or microbatches > 1
 * (microbatches alone is still one GPU: sim_parallel_gpus is then 1). */
gboolean sim_parallel_active(const SimParallel *parallel);

static inline guint
sim_parallel_gpus(const SimParallel *parallel)
{
  return parallel->pp * parallel->dp;
}

static inline guint
sim_parallel_chunks(const SimParallel *parallel)
{
  return parallel->pp * parallel->virtual_chunks;
}

/* The first layer of each chunk and one past the last: bounds[0 .. chunks]
 * (bounds[0] = 0, bounds[chunks] = n_layers), from `split` or evenly (the
 * first n_layers mod chunks chunks one layer more).  `bounds` holds chunks + 1. */
void sim_parallel_chunk_bounds(const SimParallel *parallel, guint n_layers, guint *bounds);

/* The stage a layer runs on. */
guint sim_parallel_stage_of_layer(const SimParallel *parallel, guint n_layers, guint layer);

/* The global rank of tensor-parallel rank `tp_rank` (< tp) of the GPU that
 * runs `stage` (< pp) for `replica` (< dp), in Megatron-LM's default order
 * (tp, then dp, then pp; above): tp_rank + tp × (stage × dp + replica).  `tp`
 * is [transformer] tp, >= 1. */
guint sim_parallel_global_rank(const SimParallel *parallel, guint tp, guint stage, guint replica, guint tp_rank);

/* Frees the split and zeroes the struct. */
void sim_parallel_clear(SimParallel *parallel);

G_END_DECLS
