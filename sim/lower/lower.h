/* sim/lower/lower.h — lowering: workload + policy -> stream program.
 *
 * The only place a policy becomes a schedule.  Every policy kind reduces to
 * one SimAction per layer (resident: keep everywhere; offload: offload the
 * selected layers except the last keep_last; checkpoint: recompute or
 * selective every `every`-th selected layer; plan: its actions), and one
 * mechanism emits all six actions, so a hybrid plan is not a special case.
 * The program has three streams, in this order: compute, d2h, h2d, and a
 * fourth, comm, when tp or ep is above 1.
 *
 *   keep               forward allocates the layer's saved tensors and
 *                      backward frees them.
 *   recompute          forward keeps only the layer input; right before
 *                      backward a recompute op (the layer's forward time)
 *                      re-allocates the tensors.
 *   selective          forward allocates every tensor and frees the
 *                      selective ones at its end; right before backward a
 *                      recompute op (their recompute cost) re-allocates them.
 *   offload            tensors that are offloadable and at least min_tensor
 *                      bytes go to the host after the forward and come back
 *                      before the backward; the rest stay.
 *   selective+offload  selective recompute of the attention core, offload of
 *                      the rest.
 *
 * An offload that has nothing to move is lowered as keep (or selective):
 * no events, no waits.  How offloaded tensors travel:
 *
 *   sync:  copies on the compute stream, right after the forward and right
 *          before the backward (PyTorch save_on_cpu).
 *   async: verl's double-buffered group offload.  After layer i's forward
 *          the d2h stream waits on it and copies its group; each tensor's
 *          device memory is freed when its copy ends.  The forward of layer
 *          i waits until the group of layer i - inflight is out.  The h2d of
 *          layer j starts when the backward of layer j + prefetch starts (at
 *          the forward/backward boundary for the top layers) and never before
 *          layer j's own d2h is done; the backward of j waits for it.
 *   dedup: each saved storage copied once, or once per saved reference.
 *   start = tensor: the forward is one op per copied tensor (its time shared
 *          by the bytes each piece saves) and each copy is issued as soon
 *          as its tensor is saved; with inflight_unit = tensors each save
 *          waits for the copy `inflight` saves back.
 *   streams = shared: reloads go on the d2h stream, behind every offload.
 *   inflight_unit = window: with n of L layers offloading, inflight = L - n
 *          and prefetch = L - 1 - n (TransformerEngine).
 *   free = next-commit: sources stay until the next group's forward ends,
 *          which waits for their copies and frees them (verl).
 *   free = wait: sources stay until the forward that the in-flight limit
 *          makes wait for their copies, which frees them before it runs
 *          (TransformerEngine's window).
 *   reload = on-demand: prefetch 0, each group asks when its backward is due.
 *   reload = on-unpack: as on-demand, but a backward op's reloads wait only
 *          for the end of the op before the previous one that reloaded
 *          (torchtune: the host unpacks a node ahead of the GPU).
 *   head_wait: the head's forward waits for the last offload.
 *   recompute+offload: full recompute whose kept input travels like an
 *          offloaded tensor.  Under offload's checkpoint = true every selected
 *          layer recomputes; the last keep_last keep their inputs.
 *   input_first: a recompute+offload layer's input is device memory from a
 *          zero-time op before its forward, copied from there (sync: on the
 *          compute stream; async: as a start = tensor copy) and freed by the
 *          forward's last op (DeepSpeed releases, a non-reentrant
 *          checkpoint under torchtune).
 *   defer_offload: a layer's copies out are issued after the next layer's
 *          forward (DeepSpeed master's keep_last_count = 1).
 *   pinned = caching: host blocks rounded up to a power of two.
 *   pinned = per-tensor: each copy to the host first pays host_alloc on the
 *          compute stream (cudaHostAlloc blocks the issuing thread and
 *          synchronises, so it cannot hide under copies), on every path
 *          that copies: a group's copies after its forward, or each
 *          tensor's right before its copy under start = tensor.
 *   pinned = pooled or caching: the buffers outlive the step, so a steady
 *          step allocates none; a first step ([scenario] step = first,
 *          SimLink.first_step) pays host_alloc per copy as per-tensor does.
 *          For caching that is an upper bound: a block freed by a reload
 *          within the first step (a pipeline's earlier micro-batch) would
 *          serve a later copy of its size without a cudaHostAlloc.
 *   pinned = pageable: copies from pageable memory, at pageable_factor.
 *
 *   module_groups (Megatron): a group per hooked module of a layer with
 *          ops, copied when the module ends its forward and reloaded,
 *          newest first, when a hooked module of any layer ends its
 *          backward; the compute stream waits at the module's backward
 *          (lower.c, "Megatron's module groups"; docs/architecture.md).
 *
 * What an offload moves is decided per tensor, once (the fates in lower.c):
 * a device tensor moves when it is offloadable, at least min_tensor bytes
 * and, under leaves = keep, not a leaf; a reference to memory held
 * elsewhere is "mirrored" (copied out and back, its source stays, the
 * reloaded copy is device memory until the backward ends) when it is a
 * parameter under params = copy, or a storage an earlier layer saved (each
 * layer is packed on its own); host tensors never move.  On a layer with
 * ops a scoped hook (hooked modules, skip_strided) sees only some
 * references: a tensor none of whose references it sees stays, one some of
 * whose it sees is kept+copied.
 *
 * Layers and stages with ops (SimLayer.ops: generated transformers) are
 * lowered op by op (lower.c, "groups as ops"; docs/architecture.md).
 *
 * The embedding and the loss head are stages: one op each way, or their
 * ops.  They keep
 * their tensors unless scope = all, where they offload like layers at
 * positions -1 and n, so prefetch and in-flight distances count them (the
 * head reloads at the forward/backward boundary).  Memory: static bytes are
 * the device baseline; forward allocates workspace at its start and frees
 * it at its end, as do recompute and backward (with the backward's own
 * workspace size); gradients that are not static (grad_bytes) appear at
 * the end of each group's backward, held outputs (held_bytes) at the end of
 * the head's forward, and both are freed at the end of the step's last op.
 *
 * Cost: linear in layers x tensors x references; nothing is allocated per op
 * once the program's buffers have grown (sim_lower_into reuses them).
 */
#pragma once

#include "engine/machine.h"
#include "engine/program.h"
#include "model/parallel.h"
#include "model/policy.h"
#include "model/workload.h"

G_BEGIN_DECLS

enum {
  SIM_LOWER_STREAM_COMPUTE = 0,
  SIM_LOWER_STREAM_D2H = 1,
  SIM_LOWER_STREAM_H2D = 2,
  SIM_LOWER_STREAM_COMM = 3, /* only when the workload's ops have collectives (SimWorkload.tp or ep > 1) */
};

/* One GPU's optimizer step (sim/engine/optimizer.h) over `params`
 * parameters in `tensors` tensors of workload `w`: its kernels' seconds at
 * the workload's optimizer_bandwidth, the launches they take, the transient
 * it allocates.  All 0 when the workload does not model the step. */
typedef struct {
  double seconds;
  guint64 transient;
  guint launches;
} SimLowerOptimizer;

SimLowerOptimizer sim_lower_optimizer_step(const SimWorkload *w, guint64 params, guint tensors);
/* The step over every parameter: one GPU's whole model. */
SimLowerOptimizer sim_lower_optimizer_whole(const SimWorkload *w);

/* The seconds of layer `layer`'s collectives (a workload cut for `tp`
 * tensor-parallel and `ep` expert-parallel ranks, on GPU 0's groups: the
 * all-to-alls over ep, the others over tp) that its compute waits for, in
 * the forward and in the backward, when nothing else slows them: each
 * collective's time past the ops it runs beside (SimLayerOp.overlap).  What
 * the planner's estimates add to the layer's compute; 0 without ops or
 * with tp = ep = 1. */
void sim_lower_layer_comm(const SimLayer *layer, const SimLink *link, guint tp, guint ep, double *forward,
                          double *backward);

/* What happens to one saved tensor of a group under its action. */
typedef enum {
  SIM_FATE_KEEP,    /* stays on the device from forward to backward */
  SIM_FATE_OFFLOAD, /* goes to the host and comes back */
  SIM_FATE_DROP,    /* freed after the forward, recomputed before the backward (selective) */
  SIM_FATE_FULL,    /* never kept: the whole forward is recomputed (full checkpointing) */
  SIM_FATE_ELSEWHERE, /* not a device storage of this group (sim_tensor_on_device): no memory, never copied */
  SIM_FATE_MIRROR,  /* a reference to memory held elsewhere that the hook copies anyway (a parameter under
                     * params = copy, a storage an earlier layer saved): copied out and back, its source
                     * stays; the reloaded copy is device memory of this group until its backward ends */
  SIM_FATE_KEPT_COPIED, /* a storage of this group some of whose references the hook sees and copies while
                         * another, which it does not see, holds it on the device (SimPolicy.hooked,
                         * skip_strided): kept as KEEP, and the seen references travel as MIRROR's */
} SimFate;

/* Each of `layer`'s tensors' SimFate under `action` and `policy`, into
 * fates[0 .. tensors->len), and, when `copies` is not NULL, how many copies
 * of each travel each way (0 for what does not travel; one per storage
 * with dedup, else one per reference the hook sees).  Returns the action
 * the lowering runs: an offload with nothing to move is keep (recompute,
 * selective), and its fates are those.  The one place fates are decided
 * (the planner's exact search reads them too). */
SimAction sim_lower_fates(const SimPolicy *policy, const SimLayer *layer, SimAction action, guint8 *fates,
                          guint *copies);

/* Why `policy` leaves every layer as resident does, on `workload` cut as
 * `parallel` says (NULL or inactive: one GPU), in words: its `layers` and
 * `stages` select no layer together, keep_last keeps every layer of each
 * chunk (it counts per pipeline chunk), `every` or a plan's actions pick
 * none, or none of the tensors it picks can move.  NULL when it changes
 * some layer (and for resident, whose job that is).  A new string. */
char *sim_lower_policy_note(const SimWorkload *workload, const SimPolicy *policy, const SimParallel *parallel);

/* A new program, the caller's. */
SimProgram *sim_lower(const SimWorkload *workload, const SimPolicy *policy, const SimLink *link);

/* Resets `program` and lowers into it, reusing its storage. */
void sim_lower_into(SimProgram *program, const SimWorkload *workload, const SimPolicy *policy,
                        const SimLink *link);

G_END_DECLS
