/* export/spans.h — when each op of a detailed run held its stream.
 *
 * The timeline chart, the timeline CSV and the Chrome trace all draw the
 * same thing: one span per op of the program, in issue order, so every op
 * appears exactly once.  A span is [start, end] of the op as the engine ran
 * it, except for a wait, whose span starts when its stream reached it (the
 * end of the stream's previous op, or 0): that is the time the stream was
 * blocked, which is what a reader looks for.  Records take no time.
 *
 * Streams are in order, so a stream's spans never overlap today; lanes are
 * still assigned (greedily, first free lane) so that a schedule where they do
 * overlap draws as parallel rows instead of boxes on top of each other.
 *
 * Several GPUs (a pipeline): a stage-to-stage send is its own kind, and so
 * is a wait for an event that another GPU records (a compute stream idle
 * until the neighbouring stage hands it an activation or a gradient: the
 * pipeline's bubble), told apart from a wait for the GPU's own copies.  The
 * forward/backward boundary is kept per GPU, since 1F1B interleaves the
 * two and one line across every stage would mean nothing.
 *
 * Ownership: ExportSpans borrows nothing; it copies what it needs, and the
 * caller frees it with export_spans_free.  export_spans_op_name and
 * export_spans_gpu_name return a new string (g_free); export_spans_kind_name a
 * static one.
 */
#pragma once

#include "result/result.h"

G_BEGIN_DECLS

typedef enum {
  EXPORT_SPAN_FORWARD,
  EXPORT_SPAN_BACKWARD,
  EXPORT_SPAN_RECOMPUTE,
  EXPORT_SPAN_OFFLOAD, /* a device-to-host copy */
  EXPORT_SPAN_RELOAD,  /* a host-to-device copy */
  EXPORT_SPAN_ALLOC,   /* pinned host allocation */
  EXPORT_SPAN_WAIT,
  EXPORT_SPAN_RECORD,
  /* Kinds added after the first eight, so that those keep their numbers
   * (the scripts' data carries them): SEND and PEER_WAIT only a multi-GPU
   * program has; COMM any program with collectives; OPTIMIZER every
   * lowered step. */
  EXPORT_SPAN_SEND,      /* a stage-to-stage transfer on a p2p stream */
  EXPORT_SPAN_PEER_WAIT, /* a wait for an event recorded on another GPU */
  EXPORT_SPAN_COMM,      /* a collective (all-reduce, all-gather, reduce-scatter, all-to-all) on a comm stream */
  EXPORT_SPAN_OPTIMIZER, /* the optimizer step */
  EXPORT_SPAN_COUNT,
} ExportSpanKind;

typedef struct {
  guint32 op;
  guint32 stream;
  guint32 lane;      /* within the stream, from 0 */
  guint8 kind;       /* ExportSpanKind */
  gint32 layer;      /* the op's layer, or its event's for record and wait; SIM_NO_LAYER */
  double start, end; /* seconds */
} ExportSpan;

typedef struct {
  GArray *spans;   /* ExportSpan, one per op, index = op */
  GArray *lanes;   /* guint per stream: how many lanes it needs (at least 1) */
  double boundary; /* end of the last forward op, seconds; -1 when there is none */
  double step;     /* seconds */
  /* double per GPU (program->n_gpus of them): the end of its last forward
   * compute op when its first backward compute op starts no earlier, so
   * that one line parts its forward from its backward; -1 when it has no
   * forward or its forwards and backwards interleave (1F1B). */
  GArray *boundaries;
} ExportSpans;

/* A wait of either kind: its span is the time its stream was blocked. */
static inline gboolean
export_spans_kind_waits(guint kind)
{
  return kind == EXPORT_SPAN_WAIT || kind == EXPORT_SPAN_PEER_WAIT;
}

/* Fails with SIM_ERROR_INTERNAL when `result` was evaluated without detail. */
ExportSpans *export_spans_new(const SimResult *result, GError **error);
void export_spans_free(ExportSpans *spans);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExportSpans, export_spans_free)

/* "forward", "backward", "recompute", "D2H copy", "H2D copy", "host alloc",
 * "wait", "record", "p2p send", "wait on a stage", "collective",
 * "optimizer". */
const char *export_spans_kind_name(ExportSpanKind kind);

/* What the op is, without its layer: "forward", "offload gate",
 * "reload gate", "wait offloaded", "record forward done", "cudaHostAlloc". */
char *export_spans_op_name(const SimProgram *program, guint32 op);

/* What GPU `gpu` of `program` is called in pictures: its first stream's
 * name up to the last space ("stage 1" of "stage 1 compute", "stage 0.1"
 * with replicas), or "GPU N" when that leaves nothing.  New string. */
char *export_spans_gpu_name(const SimProgram *program, guint gpu);

/* Which GPUs a picture draws of a run on `gpus` GPUs, `stages` pipeline
 * stages of gpus / stages replicas each (stage-major: GPU g is replica
 * g % dp of stage g / dp), so that it stays readable at any GPU count:
 * every GPU up to `most`; beyond, replica 0 of each stage, since the
 * replicas run the same step (the trace and the CSVs keep them all); beyond
 * that too, `most` stages spread evenly, the first and the last among them.
 * drawn[g] (gpus of them) says which; returns how many, and *note (NULL
 * when every GPU is drawn, else new) says which in words. */
guint export_spans_pick_gpus(guint gpus, guint stages, guint most, gboolean *drawn, char **note);

G_END_DECLS
