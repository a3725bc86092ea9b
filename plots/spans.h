/* plots/spans.h — when each op of a detailed run held its stream.
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
 * Ownership: PlotsSpans borrows nothing; it copies what it needs, and the
 * caller frees it with plots_spans_free.  plots_spans_op_name returns a new
 * string (g_free); plots_spans_kind_name a static one.
 */
#pragma once

#include "result.h"

G_BEGIN_DECLS

typedef enum {
  PLOTS_SPAN_FORWARD,
  PLOTS_SPAN_BACKWARD,
  PLOTS_SPAN_RECOMPUTE,
  PLOTS_SPAN_OFFLOAD, /* a device-to-host copy */
  PLOTS_SPAN_RELOAD,  /* a host-to-device copy */
  PLOTS_SPAN_ALLOC,   /* pinned host allocation */
  PLOTS_SPAN_WAIT,
  PLOTS_SPAN_RECORD,
  PLOTS_SPAN_COUNT,
} PlotsSpanKind;

typedef struct {
  guint32 op;
  guint32 stream;
  guint32 lane;      /* within the stream, from 0 */
  guint8 kind;       /* PlotsSpanKind */
  gint32 layer;      /* the op's layer, or its event's for record and wait; SIM_NO_LAYER */
  double start, end; /* seconds */
} PlotsSpan;

typedef struct {
  GArray *spans;   /* PlotsSpan, one per op, index = op */
  GArray *lanes;   /* guint per stream: how many lanes it needs (at least 1) */
  double boundary; /* end of the last forward op, seconds; -1 when there is none */
  double step;     /* seconds */
} PlotsSpans;

/* Fails with SIM_ERROR_INTERNAL when `result` was evaluated without detail. */
PlotsSpans *plots_spans_new(const SimResult *result, GError **error);
void plots_spans_free(PlotsSpans *spans);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlotsSpans, plots_spans_free)

/* "forward", "backward", "recompute", "D2H copy", "H2D copy", "host alloc",
 * "wait", "record". */
const char *plots_spans_kind_name(PlotsSpanKind kind);

/* What the op is, without its layer: "forward", "offload gate",
 * "reload gate", "wait offloaded", "record forward done", "cudaHostAlloc". */
char *plots_spans_op_name(const SimProgram *program, guint32 op);

G_END_DECLS
