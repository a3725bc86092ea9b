/* sim/lower/internal/lower_private.h — the pieces of the lowering that the pipeline
 * lowering (pipeline.c) assembles per chunk and micro-batch.
 *
 * Who may include it: lower.c, which defines them, and pipeline.c.  A
 * Lower is one slice of a step (a run of layers, with the embedding and the
 * head when they sit there) on one GPU's streams: lower_slice_begin decides
 * its actions, fates and schedule, lower_slice_forward emits its forward
 * (and the copies out), lower_slice_backward its backward (the reloads and
 * the frees), lower_slice_end frees what begin allocated.  sim_lower_into
 * is one slice, the whole step, on three streams (four with comm); the
 * pipeline lowering makes one per chunk and micro-batch, each on its
 * stage's streams.
 */
#pragma once

#include "lower/lower.h"

G_BEGIN_DECLS

/* Data parallelism on one GPU (pipeline.c owns it; dp > 1).  Every
 * collective among the stage's replicas meets the others at a barrier
 * first (the stage's k-th collective, in the order each replica emits
 * them: the same order, the replicas being one program).  The gradients
 * the last micro-batch's backward finishes fill buckets of `bucket` bytes,
 * and each full bucket is reduced on the communication stream while the
 * backward goes on (DDP's and Megatron's overlapped reduction): all-reduced,
 * or reduce-scattered when `sharding` shards them; what is left when the
 * stage's backward ends goes last.  Under full sharding (FSDP) each
 * group's weights are all-gathered before it runs, one group ahead, and
 * its gradients reduce-scattered when its backward ends. */
typedef struct {
  guint64 bucket;
  guint64 pending;   /* finished gradient bytes not in a reduction yet */
  guint64 pending_grads; /* of them, allocated (set-to-none) gradient bytes */
  guint64 freed_grads;   /* gradient bytes freed by reduce-scatters (ZeRO-2, -3) so far */
  guint ranks, nodes; /* the data-parallel group */
  guint members;     /* of its ranks, those the program holds (a barrier's count): the others are copies */
  guint sharding;    /* SimSharding */
  gboolean offload_params; /* full sharding: each group's weight shard comes from the host before its gather */
  GArray *barriers;  /* guint32: the stage's k-th collective's barrier, shared by its replicas */
  guint next;        /* this replica's next collective, an index into barriers */
  guint32 done;      /* the last reduction's done event, or SIM_NO_EVENT */
  guint32 label_reduce, label_gather, label_barrier, label_release, label_shard;
} LowerDp;

/* One addition to SimProgram.kernel_work (Lower.kernel_log). */
typedef struct {
  double seconds;
  guint kclass;
} LowerKernelWork;

typedef struct {
  SimProgram *p;
  const SimWorkload *w;
  const SimPolicy *policy;
  const SimLink *link;
  /* The slice of the step this lowering emits: layers base .. base + n - 1
   * of the workload, with the embedding and the head when they sit here
   * (the whole step: base 0, every layer, both). */
  guint base;
  guint n;         /* layers */
  gboolean has_embed, has_head;
  guint32 s_compute, s_d2h, s_h2d; /* its GPU's streams */
  guint32 s_comm;  /* its GPU's communication stream (collectives), when the step has one */
  guint tp_nodes;  /* nodes its tensor-parallel group spans */
  guint ep_nodes;  /* nodes its expert-parallel group spans */
  LowerDp *dp;     /* its GPU's data parallelism, or NULL (dp = 1) */
  /* Its expert-data-parallel group (ep > 1: the dp / ep replicas holding
   * its experts, which reduce the routed experts' gradients, SimLayerOp.
   * experts), or NULL: ep = 1 (they go with the rest, to dp) or ep = dp
   * (no other replica holds them: nothing to reduce). */
  LowerDp *edp;
  gboolean reduces; /* its backward feeds dp's gradient reduction (the last micro-batch) */
  guint32 *gathered; /* full sharding: per group, its weights' gather in this phase, or SIM_NO_EVENT */
  gboolean keeps_all;  /* the policy does not act here (`stages`): every group keeps */
  gboolean grads_here; /* the backward allocates the gradients (the first micro-batch) */
  guint n_groups;  /* n + 2: the stage slots exist even when the stages do not */
  SimAction *actions; /* per group, after dropping offloads with nothing to move */
  guint32 *ev_d2h; /* per group: it is on the host (async), or SIM_NO_EVENT */
  guint32 *ev_h2d; /* per group: it is back on the device (async), or SIM_NO_EVENT */
  guint32 label_fwd, label_bwd, label_recompute, label_input, label_workspace, label_pin;
  guint32 label_reloaded, label_fwd_done, label_offloaded, label_due, label_started, label_boundary;
  guint32 *labels; /* every group tensor's interned name: labels[first[g] + k] */
  guint8 *fates;   /* every group tensor's Fate under its group's action, same indexing */
  guint *copies;   /* every group tensor's copies each way (sim_lower_fates), same indexing */
  guint *first;
  guint64 grads;   /* gradients allocated so far, freed when the step ends */
  /* The schedule, derived once from the policy (a window sets both). */
  guint prefetch;  /* 0: each group reloads when its backward is due */
  guint inflight;  /* groups, or tensors with SIM_INFLIGHT_TENSORS */
  guint32 h2d_stream; /* SIM_LOWER_STREAM_H2D, or the d2h stream when streams = shared */
  GArray *saved;   /* guint32 per copied tensor, in save order: its D2H is done (start = tensor) */
  gboolean *committed; /* per group: its offloaded sources are freed (free = next-commit) */
  guint32 label_saved, label_commit, label_checkpoint, label_unpacked;
  guint deferred;  /* defer_offload: the group whose copies out wait for the next group's forward, or G_MAXUINT */
  /* reload = on-unpack: the ends of the last two backward ops that
   * reloaded (nodes[n_nodes % 2] the older), and whether the op emitted
   * next is one (its reloads are issued). */
  guint32 nodes[2];
  guint n_nodes;
  gboolean node_pending;
  /* module_groups (Megatron): per group and SimModule (g * SIM_MODULE_COUNT
   * + m) its offload's and its reload's events, or SIM_NO_EVENT; the
   * groups offloaded and not reloaded yet, newest last; per group tensor
   * its copies out still to issue (the last frees it). */
  guint32 *ev_mod_d2h, *ev_mod_h2d;
  GArray *mod_stack;
  guint *left;
  /* The op list whose module ops were found last, and per SimModule its
   * commit, wait and end ops (G_MAXUINT16: none): lower.c, module_ops. */
  const GArray *mod_ops;
  guint16 mod_commit[SIM_MODULE_COUNT], mod_wait[SIM_MODULE_COUNT], mod_end[SIM_MODULE_COUNT];
  /* The interned names of the last op list lowered (layers share one:
   * interning once per list, not per op, is a fifth of a lowering). */
  const GArray *label_ops;
  guint32 *op_labels;
  guint32 *comm_labels; /* per op of label_ops: its collective's ("all-reduce attn_proj") */
  guint32 label_comm_ready, label_comm_done;
  /* Where the kernel-class seconds emitted go, as they are added to the
   * program's kernel_work (LowerKernelWork, in order), or NULL: the
   * pipeline adds them again for the replicas it leaves out. */
  GArray *kernel_log;
  /* Tensor-parallel collectives the compute stream has not waited for:
   * each's done event and the ops still to emit before the wait
   * (SimLayerOp.overlap). */
  struct {
    guint32 done;
    guint left;
  } comm[4];
  guint n_comm;
  /* The op (of group comm_group) whose collective is issued when the next
   * op is emitted, once the caller has given it its memory actions (an
   * op's actions must follow it directly); or NULL. */
  const SimLayerOp *comm_op;
  guint comm_group;
} Lower;

/* Interns the labels every slice uses (once per program). */
void lower_labels(Lower *l);

/* Decides the slice's actions and tensor fates and allocates its per-group
 * state; l's program, workload, policy, link, base, n, has_embed, has_head,
 * streams, keeps_all and grads_here must be set, and the labels
 * interned. */
void lower_slice_begin(Lower *l);

/* Emits the slice's forward: the embedding, the layers, the head, the
 * copies out and (free = next-commit) the commits. */
void lower_slice_forward(Lower *l);

/* Emits the slice's backward: the reloads, the head, the layers from the
 * top down, the embedding. */
void lower_slice_backward(Lower *l);

/* Data parallelism: `bytes` more finished gradients on l's GPU (`grads`
 * of them allocated, set-to-none), reduced once they fill a bucket
 * (lower_dp_flush): over l->dp, or when they are routed experts'
 * (`experts`) under expert parallelism over l->edp, in buckets of their
 * own (Megatron's DDP: dense and expert-parallel parameters in separate
 * buffers), or not at all when the experts' group is one replica. */
void lower_dp_add(Lower *l, gboolean experts, guint64 bytes, guint64 grads, gint32 layer);

/* On stream `comm` once stream `compute` got here (and event `after`
 * happened, unless SIM_NO_EVENT): a barrier with the other replicas, then
 * a collective of `kind` over `bytes` labelled `label`.  Returns the collective op, the newest: the caller may give it
 * memory actions, then records what waits on it. */
guint32 lower_dp_collective(SimProgram *p, const SimLink *link, LowerDp *dp, guint32 compute, guint32 comm,
                            guint kind, guint64 bytes, gint32 layer, guint32 label, guint32 after);

/* Reduces what `dp` holds, if anything (lower_dp_collective), freeing
 * what a gradient-sharding reduce-scatter does not keep of the allocated
 * gradients when it ends. */
void lower_dp_flush(SimProgram *p, const SimLink *link, LowerDp *dp, guint32 compute, guint32 comm, gint32 layer);

/* The optimizer step of a GPU that updates `params` parameters held in
 * `tensors` tensors (its shard), on `stream`: one compute op of phase
 * optimizer timed from its kernels (sim/engine/optimizer.h) at the
 * workload's optimizer_bandwidth, with its launches and its transient.
 * Returns the op (a 0-second one when the workload does not model the
 * step), for the caller to free the step's gradients at its end. */
guint32 lower_optimizer(SimProgram *p, const SimWorkload *w, guint32 stream, guint64 params, guint tensors,
                        guint32 label);

/* Frees what lower_slice_begin allocated. */
void lower_slice_end(Lower *l);

G_END_DECLS
