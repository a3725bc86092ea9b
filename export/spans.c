#include "export/spans.h"

#include "base/error.h"

#include <string.h>

/* A wait is on another GPU's account when that GPU records its event: the
 * stream idles until a neighbouring stage is done, not on its own copies. */
static gboolean
waits_on_another_gpu(const SimProgram *p, const SimOp *op)
{
  guint32 recorder = g_array_index(p->events, SimEvent, op->event).recorder;
  return recorder != SIM_NO_OP && sim_program_op(p, recorder)->gpu != op->gpu;
}

static ExportSpanKind
kind_of(const SimProgram *p, const SimOp *op)
{
  switch ((SimOpKind)op->kind) {
  case SIM_OP_COPY:
    return op->dir == SIM_DIR_D2H ? EXPORT_SPAN_OFFLOAD : EXPORT_SPAN_RELOAD;
  case SIM_OP_RECORD:
    return EXPORT_SPAN_RECORD;
  case SIM_OP_WAIT:
    return waits_on_another_gpu(p, op) ? EXPORT_SPAN_PEER_WAIT : EXPORT_SPAN_WAIT;
  case SIM_OP_HOST_ALLOC:
    return op->phase == SIM_PHASE_OPTIMIZER ? EXPORT_SPAN_OPTIMIZER : EXPORT_SPAN_ALLOC;
  case SIM_OP_SEND:
    return EXPORT_SPAN_SEND;
  case SIM_OP_COLLECTIVE:
    return EXPORT_SPAN_COMM;
  case SIM_OP_COMPUTE:
  default:
    if (op->phase == SIM_PHASE_BACKWARD)
      return EXPORT_SPAN_BACKWARD;
    if (op->phase == SIM_PHASE_OPTIMIZER)
      return EXPORT_SPAN_OPTIMIZER;
    return op->phase == SIM_PHASE_RECOMPUTE ? EXPORT_SPAN_RECOMPUTE : EXPORT_SPAN_FORWARD;
  }
}

static gint32
layer_of(const SimProgram *p, const SimOp *op)
{
  if (op->kind == SIM_OP_RECORD || op->kind == SIM_OP_WAIT)
    return g_array_index(p->events, SimEvent, op->event).layer;
  return op->layer;
}

ExportSpans *
export_spans_new(const SimResult *r, GError **error)
{
  if (r->program == NULL || r->run == NULL || r->run->op_start == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "policy '%s': evaluated without detail, nothing to draw",
                r->policy);
    return NULL;
  }
  const SimProgram *p = r->program;
  guint n = sim_program_n_ops(p);
  ExportSpans *s = g_new0(ExportSpans, 1);
  s->spans = g_array_sized_new(FALSE, TRUE, sizeof(ExportSpan), n);
  g_array_set_size(s->spans, n);
  s->lanes = g_array_new(FALSE, TRUE, sizeof(guint));
  s->step = r->run->step;
  s->boundary = -1;

  /* Per GPU: the last forward's end and the first backward's start. */
  guint gpus = MAX(p->n_gpus, 1u);
  s->boundaries = g_array_sized_new(FALSE, FALSE, sizeof(double), gpus);
  g_autofree double *first_backward = g_new(double, gpus);
  for (guint g = 0; g < gpus; g++) {
    double none = -1;
    g_array_append_val(s->boundaries, none);
    first_backward[g] = G_MAXDOUBLE;
  }
  for (guint32 i = 0; i < n; i++) {
    const SimOp *op = sim_program_op(p, i);
    ExportSpan *span = &g_array_index(s->spans, ExportSpan, i);
    *span = (ExportSpan){ .op = i, .stream = op->stream, .kind = kind_of(p, op), .layer = layer_of(p, op),
                         .start = g_array_index(r->run->op_start, double, i),
                         .end = g_array_index(r->run->op_end, double, i) };
    if (op->kind != SIM_OP_COMPUTE || op->gpu >= gpus)
      continue;
    double *last_forward = &g_array_index(s->boundaries, double, op->gpu);
    if (op->phase == SIM_PHASE_FORWARD) {
      s->boundary = MAX(s->boundary, span->end);
      *last_forward = MAX(*last_forward, span->end);
    } else if (op->phase == SIM_PHASE_BACKWARD) {
      first_backward[op->gpu] = MIN(first_backward[op->gpu], span->start);
    }
  }
  for (guint g = 0; g < gpus; g++) {
    double *last_forward = &g_array_index(s->boundaries, double, g);
    if (*last_forward > first_backward[g])
      *last_forward = -1; /* interleaved: no line parts them */
  }

  /* Per stream, in stream order: a wait starts where its predecessor ended;
   * each span takes the first lane that is free by its start. */
  g_autoptr(GArray) lane_end = g_array_new(FALSE, FALSE, sizeof(double));
  for (guint st = 0; st < p->streams->len; st++) {
    const SimStream *stream = g_ptr_array_index(p->streams, st);
    double previous_end = 0;
    g_array_set_size(lane_end, 0);
    for (guint k = 0; k < stream->n_ops; k++) {
      ExportSpan *span = &g_array_index(s->spans, ExportSpan, stream->ops[k]);
      if (export_spans_kind_waits(span->kind))
        span->start = MIN(previous_end, span->start);
      previous_end = MAX(previous_end, span->end);
      guint lane = 0;
      while (lane < lane_end->len && g_array_index(lane_end, double, lane) > span->start)
        lane++;
      if (lane == lane_end->len)
        g_array_append_val(lane_end, span->end);
      else
        g_array_index(lane_end, double, lane) = span->end;
      span->lane = lane;
    }
    guint used = MAX(lane_end->len, 1u);
    g_array_append_val(s->lanes, used);
  }
  return s;
}

void
export_spans_free(ExportSpans *s)
{
  if (s == NULL)
    return;
  g_array_unref(s->spans);
  g_array_unref(s->lanes);
  g_array_unref(s->boundaries);
  g_free(s);
}

const char *
export_spans_kind_name(ExportSpanKind kind)
{
  static const char *names[EXPORT_SPAN_COUNT] = {
    [EXPORT_SPAN_FORWARD] = "forward",   [EXPORT_SPAN_BACKWARD] = "backward", [EXPORT_SPAN_RECOMPUTE] = "recompute",
    [EXPORT_SPAN_OFFLOAD] = "D2H copy",  [EXPORT_SPAN_RELOAD] = "H2D copy",   [EXPORT_SPAN_ALLOC] = "host alloc",
    [EXPORT_SPAN_WAIT] = "wait",         [EXPORT_SPAN_RECORD] = "record",     [EXPORT_SPAN_SEND] = "p2p send",
    [EXPORT_SPAN_PEER_WAIT] = "wait on a stage", [EXPORT_SPAN_COMM] = "collective",
    [EXPORT_SPAN_OPTIMIZER] = "optimizer",
  };
  return kind < EXPORT_SPAN_COUNT ? names[kind] : "?";
}

char *
export_spans_op_name(const SimProgram *p, guint32 index)
{
  const SimOp *op = sim_program_op(p, index);
  const char *label = sim_program_label(p, op->label);
  switch ((SimOpKind)op->kind) {
  case SIM_OP_COPY:
    return g_strdup_printf("%s %s", op->dir == SIM_DIR_D2H ? "offload" : "reload", label);
  case SIM_OP_RECORD:
  case SIM_OP_WAIT: {
    const SimEvent *event = &g_array_index(p->events, SimEvent, op->event);
    return g_strdup_printf("%s %s", label, sim_program_label(p, event->label));
  }
  case SIM_OP_SEND: /* "send activation", "send gradient" */
    return g_strdup_printf("send %s", label);
  case SIM_OP_COMPUTE:
  case SIM_OP_HOST_ALLOC:
  case SIM_OP_COLLECTIVE: /* "all-reduce attn_proj", "all-reduce gradients" */
  default:
    return g_strdup(label);
  }
}

char *
export_spans_gpu_name(const SimProgram *p, guint gpu)
{
  for (guint s = 0; s < p->streams->len; s++) {
    const SimStream *stream = g_ptr_array_index(p->streams, s);
    if (stream->gpu != gpu)
      continue;
    const char *space = strrchr(stream->name, ' ');
    if (space && space > stream->name)
      return g_strndup(stream->name, (gsize)(space - stream->name));
    break;
  }
  return g_strdup_printf("GPU %u", gpu);
}

guint
export_spans_pick_gpus(guint gpus, guint stages, guint most, gboolean *drawn, char **note)
{
  stages = CLAMP(stages, 1u, MAX(gpus, 1u));
  guint dp = MAX(gpus / stages, 1u);
  most = MAX(most, 1u);
  *note = NULL;
  for (guint g = 0; g < gpus; g++)
    drawn[g] = gpus <= most;
  if (gpus <= most)
    return gpus;
  if (stages <= most) {
    for (guint s = 0; s < stages; s++)
      drawn[s * dp] = TRUE;
    *note = g_strdup_printf("replica 0 of each of the %u stages drawn, of %u GPUs (dp = %u: the replicas of a stage "
                            "run the same step)", stages, gpus, dp);
    return stages;
  }
  /* `most` stages: the first, the last and evenly between (most >= 2 here,
   * since stages > most >= 1 and a single stage is never cut). */
  g_autoptr(GString) which = g_string_new(NULL);
  guint picked = 0;
  for (guint k = 0; k < most; k++) {
    guint s = most == 1 ? 0 : (guint)((guint64)k * (stages - 1) / (most - 1));
    if (drawn[s * dp])
      continue;
    drawn[s * dp] = TRUE;
    g_string_append_printf(which, "%s%u", picked ? ", " : "", s);
    picked++;
  }
  *note = g_strdup_printf("%u of the %u stages drawn (%s)%s", picked, stages, which->str,
                          dp > 1 ? ", replica 0 of each" : "");
  return picked;
}
