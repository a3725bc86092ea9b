#include "timeline.h"

#include "output.h"
#include "spans.h"

/* Half the height of a box, in rows: a gap between rows keeps lanes apart. */
#define BOX_HALF 0.38

const char *
plots_timeline_color(guint kind)
{
  static const char *colors[PLOTS_SPAN_COUNT] = {
    [PLOTS_SPAN_FORWARD] = "#4e79a7", [PLOTS_SPAN_BACKWARD] = "#59a14f", [PLOTS_SPAN_RECOMPUTE] = "#b07aa1",
    [PLOTS_SPAN_OFFLOAD] = "#f28e2b", [PLOTS_SPAN_RELOAD] = "#17becf",   [PLOTS_SPAN_ALLOC] = "#9c755f",
    [PLOTS_SPAN_WAIT] = "#e15759",    [PLOTS_SPAN_RECORD] = "#000000",
  };
  return kind < PLOTS_SPAN_COUNT ? colors[kind] : "#000000";
}

/* The border of a box: its fill, darker, so that back-to-back ops of one
 * kind (the forwards of consecutive layers) stay apart and a box too thin
 * for its fill still shows. */
static void
darker(const char *color, char out[8])
{
  guint rgb = (guint)g_ascii_strtoull(color + 1, NULL, 16);
  guint r = (rgb >> 16 & 0xff) * 7 / 10, g = (rgb >> 8 & 0xff) * 7 / 10, b = (rgb & 0xff) * 7 / 10;
  g_snprintf(out, 8, "#%02x%02x%02x", r, g, b);
}

/* A stream computes when any of its ops is a compute op. */
static gboolean *
computing_streams(const SimProgram *p)
{
  gboolean *computes = g_new0(gboolean, p->streams->len);
  for (guint i = 0; i < sim_program_n_ops(p); i++) {
    const SimOp *op = sim_program_op(p, i);
    if (op->kind == SIM_OP_COMPUTE)
      computes[op->stream] = TRUE;
  }
  return computes;
}

static gboolean
drawn(const PlotsSpan *span, const gboolean *computes)
{
  if (span->kind == PLOTS_SPAN_RECORD || span->end <= span->start)
    return FALSE;
  return span->kind != PLOTS_SPAN_WAIT || computes[span->stream];
}

/* `set ytics`: a label per row, a stream's name on its first lane and
 * "NAME (2)" on the next ones; `first_row[s]` is stream s's first row from
 * the top, of `rows`. */
static void
stream_tics(GString *c, const SimProgram *p, const PlotsSpans *spans, const guint *first_row, guint rows)
{
  g_string_append(c, "set ytics scale 0 (");
  for (guint s = 0; s < p->streams->len; s++) {
    const SimStream *stream = g_ptr_array_index(p->streams, s);
    for (guint lane = 0; lane < g_array_index(spans->lanes, guint, s); lane++) {
      g_autofree char *text = lane ? g_strdup_printf("%s (%u)", stream->name, lane + 1) : g_strdup(stream->name);
      g_autofree char *label = plots_gnuplot_quote(text);
      g_string_append_printf(c, "%s%s %u", s || lane ? ", " : "", label, rows - 1 - (first_row[s] + lane));
    }
  }
  g_string_append(c, ")\n");
}

/* One plot term per kind `present`, so the legend lists exactly what is
 * drawn. */
static void
plot_kinds(GString *c, const gboolean *present)
{
  char b[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append(c, "plot ");
  gboolean first = TRUE;
  for (guint k = 0; k < PLOTS_SPAN_COUNT; k++) {
    if (!present[k])
      continue;
    g_autofree char *title = plots_gnuplot_quote(plots_spans_kind_name(k));
    char edge[8];
    darker(plots_timeline_color(k), edge);
    plots_gnuplot_number(b, BOX_HALF);
    g_string_append_printf(c,
                           "%s$spans using (($4==%u)?($1+$2)/2:NaN):3:1:2:($3-%s):($3+%s) with boxxyerror "
                           "fs solid 1.0 border lc rgb '%s' lw 0.5 lc rgb '%s' title %s",
                           first ? "" : ", \\\n     ", k, b, b, edge, plots_timeline_color(k), title);
    first = FALSE;
  }
  if (first) /* nothing ran: an empty chart still has its axes */
    g_string_append(c, "NaN notitle");
  g_string_append_c(c, '\n');
}

PlotsChart *
plots_timeline_chart(const SimResult *r, const char *name, double xmax_ms, GError **error)
{
  g_autoptr(PlotsSpans) spans = plots_spans_new(r, error);
  if (spans == NULL)
    return NULL;
  const SimProgram *p = r->program;
  g_autofree gboolean *computes = computing_streams(p);
  char a[G_ASCII_DTOSTR_BUF_SIZE];

  /* Rows from the top: each stream's lanes in order. */
  guint rows = 0;
  g_autofree guint *first_row = g_new(guint, p->streams->len);
  for (guint s = 0; s < p->streams->len; s++) {
    first_row[s] = rows;
    rows += g_array_index(spans->lanes, guint, s);
  }
  g_autoptr(PlotsChart) chart = plots_gnuplot_chart_new(name, 1400, 130 + 70 * MAX(rows, 3u));

  gboolean present[PLOTS_SPAN_COUNT] = { FALSE };
  plots_gnuplot_data_begin(chart, "spans");
  for (guint i = 0; i < spans->spans->len; i++) {
    const PlotsSpan *span = &g_array_index(spans->spans, PlotsSpan, i);
    if (!drawn(span, computes))
      continue;
    present[span->kind] = TRUE;
    double y = rows - 1.0 - (first_row[span->stream] + span->lane);
    plots_gnuplot_data_row(chart, 4, (double[]){ span->start * 1e3, span->end * 1e3, y, span->kind });
  }
  plots_gnuplot_data_end(chart);

  GString *c = chart->commands;
  g_autofree char *subtitle =
    g_strdup_printf("timeline of %s: step %.2f ms = compute %.2f + recompute %.2f + exposed transfer %.2f",
                    r->policy, r->step_ms, r->compute_ms, r->recompute_ms, r->exposed_transfer_ms);
  plots_gnuplot_title(c, "set title", r->scenario, subtitle);
  g_string_append(c, " offset 0,1\nset tmargin 6\nset bmargin 5.5\nset lmargin 12\n"
                     "set xlabel 'time since the step started (ms)'\n"
                     "set grid xtics lc rgb '#d0d0d0'\n"
                     "set key outside bottom center horizontal reverse Left samplen 2\n");
  g_string_append_printf(c, "set xrange [0:%s]\n",
                         plots_gnuplot_number(a, xmax_ms > 0 ? xmax_ms : MAX(r->step_ms, 1e-6)));
  g_string_append_printf(c, "set yrange [-0.6:%s]\n", plots_gnuplot_number(a, rows - 0.4));
  stream_tics(c, p, spans, first_row, rows);
  if (spans->boundary >= 0) {
    plots_gnuplot_number(a, spans->boundary * 1e3);
    g_string_append_printf(c, "set arrow 1 from %s, graph 0 to %s, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front\n"
                              "set label 1 'forward | backward' at %s, graph 1 center offset 0,0.7\n",
                           a, a, a);
  }

  plot_kinds(c, present);
  return g_steal_pointer(&chart);
}

gboolean
plots_timeline_write(const SimResult *r, const char *option, const char *path, GError **error)
{
  g_autoptr(PlotsSpans) spans = plots_spans_new(r, error);
  if (spans == NULL)
    return FALSE;
  const SimProgram *p = r->program;
  g_autoptr(GString) out = g_string_new("stream,op,layer,phase,start_ms,end_ms,bytes\n");
  for (guint i = 0; i < spans->spans->len; i++) {
    const PlotsSpan *span = &g_array_index(spans->spans, PlotsSpan, i);
    const SimOp *op = sim_program_op(p, span->op);
    const SimStream *stream = g_ptr_array_index(p->streams, span->stream);
    g_autofree char *what = plots_spans_op_name(p, span->op);
    sim_output_csv_field(out, stream->name);
    g_string_append_c(out, ',');
    sim_output_csv_field(out, what);
    g_string_append_c(out, ',');
    if (span->layer != SIM_NO_LAYER)
      g_string_append_printf(out, "%d", span->layer);
    g_string_append_printf(out, ",%s,", sim_phase_name(op->phase));
    sim_output_number(out, span->start * 1e3);
    g_string_append_c(out, ',');
    sim_output_number(out, span->end * 1e3);
    g_string_append_printf(out, ",%" G_GUINT64_FORMAT "\n", op->kind == SIM_OP_COPY ? op->bytes : 0);
  }
  return sim_output_save(option, path, out->str, out->len, error);
}
