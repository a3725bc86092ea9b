#include "export/timeline_csv.h"

#include "base/output.h"
#include "export/spans.h"

gboolean
export_timeline_csv_write(const SimResult *r, const char *option, const char *path, GError **error)
{
  g_autoptr(ExportSpans) spans = export_spans_new(r, error);
  if (spans == NULL)
    return FALSE;
  const SimProgram *p = r->program;
  /* A pipeline runs each layer once per micro-batch: its rows say which. */
  gboolean mbs = sim_program_has_microbatches(p);
  g_autoptr(GString) out = g_string_new(mbs ? "stream,op,layer,microbatch,phase,start_ms,end_ms,bytes\n"
                                            : "stream,op,layer,phase,start_ms,end_ms,bytes\n");
  for (guint i = 0; i < spans->spans->len; i++) {
    const ExportSpan *span = &g_array_index(spans->spans, ExportSpan, i);
    const SimOp *op = sim_program_op(p, span->op);
    const SimStream *stream = g_ptr_array_index(p->streams, span->stream);
    g_autofree char *what = export_spans_op_name(p, span->op);
    sim_output_csv_field(out, stream->name);
    g_string_append_c(out, ',');
    sim_output_csv_field(out, what);
    g_string_append_c(out, ',');
    if (span->layer != SIM_NO_LAYER)
      g_string_append_printf(out, "%d", span->layer);
    gint32 mb = mbs ? sim_program_op_microbatch(p, span->op) : -1;
    if (mbs)
      g_string_append_c(out, ',');
    if (mb >= 0)
      g_string_append_printf(out, "%d", mb);
    g_string_append_printf(out, ",%s,", sim_phase_name(op->phase));
    sim_output_number(out, span->start * 1e3);
    g_string_append_c(out, ',');
    sim_output_number(out, span->end * 1e3);
    g_string_append_printf(out, ",%" G_GUINT64_FORMAT "\n", op->kind == SIM_OP_COPY ? op->bytes : 0);
  }
  return sim_output_save(option, path, out->str, out->len, error);
}
