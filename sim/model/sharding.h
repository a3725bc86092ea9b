/* sim/model/sharding.h — static memory per GPU when data-parallel ranks
 * shard what each would otherwise hold whole (ZeRO, FSDP).
 *
 * What: a GPU of a data-parallel group of N_d ranks holds, for each
 * parameter of its layers, the weight (the model dtype, e bytes), the
 * gradient when it is static (grads = kept: e bytes) and the optimizer
 * state (K bytes: AdamW's two fp32 moments, 8, plus an fp32 master copy, 4,
 * when the weights are 16-bit and master_weights is on).  Sharding divides
 * some of these by N_d, after Rajbhandari et al. 2020 ("ZeRO: Memory
 * Optimizations Toward Training Trillion Parameter Models", section 5):
 *
 *   none        (e + g + K) Ψ                      baseline (DDP)
 *   optimizer   (e + g) Ψ + K Ψ / N_d              P_os   (ZeRO-1)
 *   gradients   e Ψ + (g + K) Ψ / N_d              P_os+g (ZeRO-2)
 *   full        (e + g + K) Ψ / N_d                P_os+g+p (ZeRO-3, FSDP)
 *
 * With e = g = 2 and K = 12 these are the paper's 16Ψ, 4Ψ + 12Ψ/N_d,
 * 2Ψ + 14Ψ/N_d and 16Ψ/N_d.  A shard is ceil(Ψ / N_d) parameters: both
 * DeepSpeed and FSDP pad the flat buffer to a multiple of N_d.
 *
 * Gradients under grads = set-to-none are not static: each layer's appear
 * when its backward ends (SimLayerOp.grad_bytes) and are held to the step's
 * end.  Under gradients and full sharding each bucket is reduce-scattered
 * as soon as it is complete and only this rank's 1/N_d of it stays: the
 * full bucket is a transient from the backward op that writes it to the
 * end of its reduce-scatter (sim_sharding_grad_kept).  Under optimizer
 * sharding the gradients stay whole until the step (ZeRO-1 all-reduces).
 *
 * Under full sharding a layer's weights exist whole only around its
 * forward and its backward: FSDP all-gathers them into an unsharded buffer
 * (prefetching the next layer's while this one runs) and frees the buffer
 * after the layer (sim_sharding_gathered).  The collectives themselves are
 * not modelled here: this module is memory arithmetic only.
 *
 * Why its own module: the pipeline lowering (sim/lower/pipeline.c: each
 * stage holds a subset of the layers), the single-GPU lowering and the
 * loader need the same arithmetic, from parameter counts the generator
 * knows (SimLayer.params); the model layer is below all three.
 *
 * Cost: constant per call.  Nothing here allocates.
 */
#pragma once

#include "model/workload.h"

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SIM_SHARDING_NONE,      /* every rank holds everything (DDP) */
  SIM_SHARDING_OPTIMIZER, /* ZeRO-1: optimizer state sharded */
  SIM_SHARDING_GRADIENTS, /* ZeRO-2: and gradients */
  SIM_SHARDING_FULL,      /* ZeRO-3 / FSDP: and weights */
  SIM_SHARDING_COUNT,
} SimSharding;

/* "none", "optimizer", "gradients", "full", indexed by SimSharding, NULL-terminated. */
extern const char *const sim_sharding_names[];

/* Sets `bytes` from offsim's [transformer] flags: weight = e; grad = e when
 * grads are kept (static), 0 under set-to-none; state = 8 with AdamW (two
 * fp32 moments) + 4 for fp32 master weights beside 16-bit ones (none when
 * the weights already are fp32: the master is the weight). */
void sim_param_bytes_set(SimParamBytes *bytes, guint dtype_bytes, gboolean grads_kept, gboolean adamw,
                         gboolean master_weights);

/* Whether the workload's parameters are counted (a generated transformer):
 * what sharding needs. */
static inline gboolean
sim_param_bytes_known(const SimParamBytes *bytes)
{
  return bytes->weight != 0;
}

/* Parameters one of `dp` ranks holds of `params`: ceil(params / dp). */
guint64 sim_sharding_shard(guint64 params, guint dp);

/* Static bytes on a GPU that holds `params` parameters (the layers of its
 * pipeline stage, embedding and head included where it runs them) under
 * `sharding` over `dp` ranks; the formulas above.  `dp` >= 1; with
 * SIM_SHARDING_NONE `params` × (weight + grad + state). */
guint64 sim_sharding_static(const SimParamBytes *bytes, guint64 params, SimSharding sharding, guint dp);

/* Of `grad_bytes` of gradients that are not static (a layer's
 * SimLayer.grad_bytes or an op's SimLayerOp.grad_bytes under set-to-none),
 * what stays on this rank once their reduce-scatter is over: all of them
 * without gradient sharding, this rank's ceil(1/dp) share with gradients or
 * full.  The lowering allocates grad_bytes where the backward writes them
 * and frees the rest where the reduce-scatter ends. */
guint64 sim_sharding_grad_kept(guint64 grad_bytes, SimSharding sharding, guint dp);

/* The transient bytes of `params` parameters gathered whole (full sharding:
 * the unsharded buffer FSDP all-gathers around a layer's forward and again
 * around its backward, padded to dp shards); 0 under any other sharding,
 * where the weights are static. */
guint64 sim_sharding_gathered(const SimParamBytes *bytes, guint64 params, SimSharding sharding, guint dp);

/* What CPU offload moves, a mask of sim_sharding_offloaded's `what`. */
#define SIM_SHARDING_OFFLOAD_OPTIMIZER (1u << 0) /* [parallel] offload_optimizer */
#define SIM_SHARDING_OFFLOAD_WEIGHTS (1u << 1)   /* [parallel] offload_params */

/* CPU offload ([parallel] offload_optimizer, offload_params): of the
 * static bytes sim_sharding_static gives for `params` parameters, those
 * that live in host memory instead.  SIM_SHARDING_OFFLOAD_OPTIMIZER: the
 * optimizer state this GPU updates (DeepSpeed's offload_optimizer: the
 * step runs on the CPU); SIM_SHARDING_OFFLOAD_WEIGHTS (full sharding
 * only): its shard of the weights and of the static gradients too
 * (FSDP2's CPUOffloadPolicy, DeepSpeed's offload_param). */
guint64 sim_sharding_offloaded(const SimParamBytes *bytes, guint64 params, SimSharding sharding, guint dp,
                               guint what);

G_END_DECLS
