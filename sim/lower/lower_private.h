/* sim/lower/lower_private.h — the pieces of the lowering that the pipeline
 * lowering (pipeline.c) assembles per chunk and micro-batch.
 *
 * Who may include it: lower.c, which defines them, and pipeline.c.  A
 * Lower is one slice of a step (a run of layers, with the embedding and the
 * head when they sit there) on one GPU's streams: lower_slice_begin decides
 * its actions, fates and schedule, lower_slice_forward emits its forward
 * (and the copies out), lower_slice_backward its backward (the reloads and
 * the frees), lower_slice_end frees what begin allocated.  sim_lower_into
 * is one slice, the whole step, on three streams; the pipeline lowering
 * makes one per chunk and micro-batch, each on its stage's streams.
 */
#pragma once

#include "lower.h"

G_BEGIN_DECLS

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
  guint *first;
  guint64 grads;   /* gradients allocated so far, freed when the step ends */
  /* The schedule, derived once from the policy (a window sets both). */
  guint prefetch;  /* 0: each group reloads when its backward is due */
  guint inflight;  /* groups, or tensors with SIM_INFLIGHT_TENSORS */
  guint32 h2d_stream; /* SIM_LOWER_STREAM_H2D, or the d2h stream when streams = shared */
  GArray *saved;   /* guint32 per copied tensor, in save order: its D2H is done (start = tensor) */
  gboolean *committed; /* per group: its offloaded sources are freed (free = next-commit) */
  guint32 label_saved, label_commit;
  /* The interned names of the last op list lowered (layers share one:
   * interning once per list, not per op, is a fifth of a lowering). */
  const GArray *label_ops;
  guint32 *op_labels;
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
 * top down, the embedding.  Returns its last op (SIM_NO_OP: none). */
guint32 lower_slice_backward(Lower *l);

/* Frees what lower_slice_begin allocated. */
void lower_slice_end(Lower *l);

G_END_DECLS
