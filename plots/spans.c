#include "spans.h"

#include "error.h"

static PlotsSpanKind
kind_of(const SimOp *op)
{
  switch ((SimOpKind)op->kind) {
  case SIM_OP_COPY:
    return op->dir == SIM_DIR_D2H ? PLOTS_SPAN_OFFLOAD : PLOTS_SPAN_RELOAD;
  case SIM_OP_RECORD:
    return PLOTS_SPAN_RECORD;
  case SIM_OP_WAIT:
    return PLOTS_SPAN_WAIT;
  case SIM_OP_HOST_ALLOC:
    return PLOTS_SPAN_ALLOC;
  case SIM_OP_COMPUTE:
  default:
    if (op->phase == SIM_PHASE_BACKWARD)
      return PLOTS_SPAN_BACKWARD;
    return op->phase == SIM_PHASE_RECOMPUTE ? PLOTS_SPAN_RECOMPUTE : PLOTS_SPAN_FORWARD;
  }
}

static gint32
layer_of(const SimProgram *p, const SimOp *op)
{
  if (op->kind == SIM_OP_RECORD || op->kind == SIM_OP_WAIT)
    return g_array_index(p->events, SimEvent, op->event).layer;
  return op->layer;
}

PlotsSpans *
plots_spans_new(const SimResult *r, GError **error)
{
  if (r->program == NULL || r->run == NULL || r->run->op_start == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "policy '%s': evaluated without detail, nothing to draw",
                r->policy);
    return NULL;
  }
  const SimProgram *p = r->program;
  guint n = sim_program_n_ops(p);
  PlotsSpans *s = g_new0(PlotsSpans, 1);
  s->spans = g_array_sized_new(FALSE, TRUE, sizeof(PlotsSpan), n);
  g_array_set_size(s->spans, n);
  s->lanes = g_array_new(FALSE, TRUE, sizeof(guint));
  s->step = r->run->step;
  s->boundary = -1;

  for (guint32 i = 0; i < n; i++) {
    const SimOp *op = sim_program_op(p, i);
    PlotsSpan *span = &g_array_index(s->spans, PlotsSpan, i);
    *span = (PlotsSpan){ .op = i, .stream = op->stream, .kind = kind_of(op), .layer = layer_of(p, op),
                         .start = g_array_index(r->run->op_start, double, i),
                         .end = g_array_index(r->run->op_end, double, i) };
    if (op->phase == SIM_PHASE_FORWARD && op->kind == SIM_OP_COMPUTE)
      s->boundary = MAX(s->boundary, span->end);
  }

  /* Per stream, in stream order: a wait starts where its predecessor ended;
   * each span takes the first lane that is free by its start. */
  g_autoptr(GArray) lane_end = g_array_new(FALSE, FALSE, sizeof(double));
  for (guint st = 0; st < p->streams->len; st++) {
    const SimStream *stream = g_ptr_array_index(p->streams, st);
    double previous_end = 0;
    g_array_set_size(lane_end, 0);
    for (guint k = 0; k < stream->n_ops; k++) {
      PlotsSpan *span = &g_array_index(s->spans, PlotsSpan, stream->ops[k]);
      if (span->kind == PLOTS_SPAN_WAIT)
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
plots_spans_free(PlotsSpans *s)
{
  if (s == NULL)
    return;
  g_array_unref(s->spans);
  g_array_unref(s->lanes);
  g_free(s);
}

const char *
plots_spans_kind_name(PlotsSpanKind kind)
{
  static const char *names[PLOTS_SPAN_COUNT] = {
    [PLOTS_SPAN_FORWARD] = "forward",   [PLOTS_SPAN_BACKWARD] = "backward", [PLOTS_SPAN_RECOMPUTE] = "recompute",
    [PLOTS_SPAN_OFFLOAD] = "D2H copy",  [PLOTS_SPAN_RELOAD] = "H2D copy",   [PLOTS_SPAN_ALLOC] = "host alloc",
    [PLOTS_SPAN_WAIT] = "wait",         [PLOTS_SPAN_RECORD] = "record",
  };
  return kind < PLOTS_SPAN_COUNT ? names[kind] : "?";
}

char *
plots_spans_op_name(const SimProgram *p, guint32 index)
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
  case SIM_OP_COMPUTE:
  case SIM_OP_HOST_ALLOC:
  default:
    return g_strdup(label);
  }
}
