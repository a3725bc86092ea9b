#include "plots/timeline.h"

#include "export/spans.h"

/* Half the height of a box, in rows: a gap between rows keeps lanes apart. */
#define BOX_HALF 0.38

/* Above this many boxes the chart draws slices of time instead: a
 * 5,000-layer transformer is some 190,000 ops, an 80 MB SVG of boxes far
 * narrower than a pixel.  Every bundled scenario stays below. */
#define MAX_BOXES 4000
/* The slices of the time axis then: about a pixel each. */
#define SLICES 1000

const char *
plots_timeline_color(guint kind)
{
  static const char *colors[EXPORT_SPAN_COUNT] = {
    [EXPORT_SPAN_FORWARD] = "#4e79a7", [EXPORT_SPAN_BACKWARD] = "#59a14f", [EXPORT_SPAN_RECOMPUTE] = "#b07aa1",
    [EXPORT_SPAN_OFFLOAD] = "#f28e2b", [EXPORT_SPAN_RELOAD] = "#17becf",   [EXPORT_SPAN_ALLOC] = "#9c755f",
    [EXPORT_SPAN_WAIT] = "#e15759",    [EXPORT_SPAN_RECORD] = "#000000",   [EXPORT_SPAN_SEND] = "#edc948",
    [EXPORT_SPAN_PEER_WAIT] = "#ff9da7", [EXPORT_SPAN_COMM] = "#76b7b2",
    [EXPORT_SPAN_OPTIMIZER] = "#bab0ac",
  };
  return kind < EXPORT_SPAN_COUNT ? colors[kind] : "#000000";
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

/* Rows are 70 px high up to this many; a pipeline's 4 streams per GPU
 * would make a picture thousands of pixels high, so beyond it the rows
 * share this many pixels, down to ROW_MIN_PX, where a label still reads. */
#define ROWS_FULL 12
#define ROW_PX 70
#define ROW_MIN_PX 24
/* Rows drawn at most (64 stay one screen high at ROW_MIN_PX): a larger
 * pipeline draws some of its GPUs (export_spans_pick_gpus), not a picture of
 * tens of thousands of pixels that viewers refuse (pp 8 x dp 32 made one
 * 24,706 pixels high). */
#define MAX_ROWS 64

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

/* What the chart draws of the program: which streams compute, which are
 * drawn (their GPU is), and each drawn stream's first row from the top. */
typedef struct {
  gboolean *computes;
  gboolean *shown;
  guint *first_row;
  guint rows;
} Rows;

static gboolean
drawn(const ExportSpan *span, const Rows *rows)
{
  const gboolean *computes = rows->computes;
  if (!rows->shown[span->stream] || span->kind == EXPORT_SPAN_RECORD || span->end <= span->start)
    return FALSE;
  /* A wait on a copy or p2p stream is only that stream idle. */
  return !export_spans_kind_waits(span->kind) || computes[span->stream];
}

/* The label of a stream's row: its name on its first lane, "NAME (2)" on
 * the next ones. */
static char *
row_label(const SimStream *stream, guint lane)
{
  return lane ? g_strdup_printf("%s (%u)", stream->name, lane + 1) : g_strdup(stream->name);
}

/* `set ytics`: a label per drawn row. */
static void
stream_tics(GString *c, const SimProgram *p, const ExportSpans *spans, const Rows *r)
{
  g_string_append(c, "set ytics scale 0 (");
  gboolean first = TRUE;
  for (guint s = 0; s < p->streams->len; s++) {
    const SimStream *stream = g_ptr_array_index(p->streams, s);
    for (guint lane = 0; r->shown[s] && lane < g_array_index(spans->lanes, guint, s); lane++) {
      g_autofree char *text = row_label(stream, lane);
      g_autofree char *label = plots_gnuplot_quote(text);
      g_string_append_printf(c, "%s%s %u", first ? "" : ", ", label, r->rows - 1 - (r->first_row[s] + lane));
      first = FALSE;
    }
  }
  g_string_append(c, ")\n");
}

/* The left margin, in characters: the longest row label and a gap, and at
 * least the 12 that "compute" has always had ("stage 12.3 compute" needs
 * more). */
static guint
left_margin(const SimProgram *p, const ExportSpans *spans, const Rows *r)
{
  guint longest = 0;
  for (guint s = 0; s < p->streams->len; s++) {
    const SimStream *stream = g_ptr_array_index(p->streams, s);
    for (guint lane = 0; r->shown[s] && lane < g_array_index(spans->lanes, guint, s); lane++) {
      g_autofree char *text = row_label(stream, lane);
      longest = MAX(longest, (guint)g_utf8_strlen(text, -1));
    }
  }
  return MAX(12u, longest + 2);
}

/* Several GPUs: a thin line between the rows of one GPU and the next, so
 * that a stage's four rows read as one group. */
static void
gpu_separators(GString *c, const SimProgram *p, const Rows *r)
{
  char a[G_ASCII_DTOSTR_BUF_SIZE];
  const SimStream *above = NULL; /* the drawn stream above */
  for (guint s = 0; s < p->streams->len; s++) {
    const SimStream *stream = g_ptr_array_index(p->streams, s);
    if (!r->shown[s])
      continue;
    gboolean apart = above && stream->gpu != above->gpu;
    above = stream;
    if (!apart)
      continue;
    plots_gnuplot_number(a, r->rows - 0.5 - r->first_row[s]);
    g_string_append_printf(c, "set arrow from graph 0, first %s to graph 1, first %s nohead lw 1 lc rgb '#aaaaaa' "
                              "back\n", a, a);
  }
}

/* Several GPUs: the forward/backward line of each GPU whose forwards all end
 * before its backwards start (GPipe), across that GPU's rows only; 1F1B
 * interleaves them and gets none.  Returns whether any was drawn, for the
 * legend. */
static gboolean
gpu_boundaries(GString *c, const SimProgram *p, const ExportSpans *spans, const Rows *r)
{
  char x[G_ASCII_DTOSTR_BUF_SIZE], top[G_ASCII_DTOSTR_BUF_SIZE], bottom[G_ASCII_DTOSTR_BUF_SIZE];
  gboolean any = FALSE;
  for (guint g = 0; g < spans->boundaries->len; g++) {
    double at = g_array_index(spans->boundaries, double, g);
    if (at < 0)
      continue;
    guint low = G_MAXUINT, high = 0; /* the GPU's rows, from the top */
    for (guint s = 0; s < p->streams->len; s++) {
      const SimStream *stream = g_ptr_array_index(p->streams, s);
      if (stream->gpu != g || !r->shown[s])
        continue;
      low = MIN(low, r->first_row[s]);
      high = MAX(high, r->first_row[s] + g_array_index(spans->lanes, guint, s) - 1);
    }
    if (low > high)
      continue;
    plots_gnuplot_number(x, at * 1e3);
    plots_gnuplot_number(top, r->rows - 0.5 - low);
    plots_gnuplot_number(bottom, r->rows - 1.5 - high);
    g_string_append_printf(c, "set arrow from %s, first %s to %s, first %s nohead dt 2 lw 2 lc rgb '#333333' front\n",
                           x, top, x, bottom);
    any = TRUE;
  }
  return any;
}

/* One plot term per kind `present`, so the legend lists exactly what is
 * drawn; `extra`, when not NULL, is one more term (a legend entry). */
static void
plot_kinds(GString *c, const gboolean *present, const char *extra)
{
  char b[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append(c, "plot ");
  gboolean first = TRUE;
  for (guint k = 0; k < EXPORT_SPAN_COUNT; k++) {
    if (!present[k])
      continue;
    g_autofree char *title = plots_gnuplot_quote(export_spans_kind_name(k));
    char edge[8];
    darker(plots_timeline_color(k), edge);
    plots_gnuplot_number(b, BOX_HALF);
    g_string_append_printf(c,
                           "%s$spans using (($4==%u)?($1+$2)/2:NaN):3:1:2:($3-%s):($3+%s) with boxxyerror "
                           "fs solid 1.0 border lc rgb '%s' lw 0.5 lc rgb '%s' title %s",
                           first ? "" : ", \\\n     ", k, b, b, edge, plots_timeline_color(k), title);
    first = FALSE;
  }
  if (extra) {
    g_string_append_printf(c, "%s%s", first ? "" : ", \\\n     ", extra);
    first = FALSE;
  }
  if (first) /* nothing ran: an empty chart still has its axes */
    g_string_append(c, "NaN notitle");
  g_string_append_c(c, '\n');
}

/* The row of a span, from the bottom (the chart's y). */
static double
span_y(const ExportSpan *span, const Rows *r)
{
  return r->rows - 1.0 - (r->first_row[span->stream] + span->lane);
}

/* Every drawn span as a box: start, end (ms), y, kind. */
static void
add_boxes(PlotsChart *chart, const ExportSpans *spans, const Rows *r, gboolean *present)
{
  plots_gnuplot_data_begin(chart, "spans");
  for (guint i = 0; i < spans->spans->len; i++) {
    const ExportSpan *span = &g_array_index(spans->spans, ExportSpan, i);
    if (!drawn(span, r))
      continue;
    present[span->kind] = TRUE;
    plots_gnuplot_data_row(chart, 4, (double[]){ span->start * 1e3, span->end * 1e3, span_y(span, r), span->kind });
  }
  plots_gnuplot_data_end(chart);
}

/* Too many boxes to draw: the axis cut into SLICES slices of `width` ms,
 * each row's slice drawn as the kind of span that kept the row busy longest
 * in it when the row was busy for at least half of it, empty otherwise, and
 * runs of slices of one kind joined into one box.  That is what a picture of
 * every box shows at a pixel per slice.  Returns the boxes drawn. */
static guint
add_slices(PlotsChart *chart, const ExportSpans *spans, const Rows *r, double width, gboolean *present)
{
  guint rows = r->rows;
  g_autofree double *busy = g_new0(double, (gsize)rows * SLICES * EXPORT_SPAN_COUNT);
  for (guint i = 0; i < spans->spans->len; i++) {
    const ExportSpan *span = &g_array_index(spans->spans, ExportSpan, i);
    if (!drawn(span, r))
      continue;
    guint row = r->first_row[span->stream] + span->lane;
    double start = span->start * 1e3, end = span->end * 1e3;
    for (guint k = (guint)MIN(start / width, SLICES - 1.0); k < SLICES && k * width < end; k++)
      busy[((gsize)row * SLICES + k) * EXPORT_SPAN_COUNT + span->kind] +=
        MIN(end, (k + 1) * width) - MAX(start, k * width);
  }
  guint boxes = 0;
  plots_gnuplot_data_begin(chart, "spans");
  for (guint row = 0; row < rows; row++) {
    int open = -1; /* the kind of the box being extended, from slice `from` */
    guint from = 0;
    for (guint k = 0; k <= SLICES; k++) {
      int kind = -1;
      if (k < SLICES) {
        const double *b = &busy[((gsize)row * SLICES + k) * EXPORT_SPAN_COUNT];
        double total = 0;
        for (guint t = 0; t < EXPORT_SPAN_COUNT; t++) {
          total += b[t];
          if (kind < 0 ? b[t] > 0 : b[t] > b[kind])
            kind = (int)t;
        }
        if (total < width / 2)
          kind = -1;
      }
      if (kind == open)
        continue;
      if (open >= 0) {
        present[open] = TRUE;
        plots_gnuplot_data_row(chart, 4, (double[]){ from * width, k * width, rows - 1.0 - row, open });
        boxes++;
      }
      open = kind;
      from = k;
    }
  }
  plots_gnuplot_data_end(chart);
  return boxes;
}

PlotsChart *
plots_timeline_chart(const SimResult *r, const char *name, double xmax_ms, GError **error)
{
  g_autoptr(ExportSpans) spans = export_spans_new(r, error);
  if (spans == NULL)
    return NULL;
  const SimProgram *p = r->program;
  g_autofree gboolean *computes = computing_streams(p);
  char a[G_ASCII_DTOSTR_BUF_SIZE];
  double xmax = xmax_ms > 0 ? xmax_ms : MAX(r->step_ms, 1e-6);

  /* The GPUs drawn: as many as MAX_ROWS rows hold (each GPU has the same streams). */
  g_autofree gboolean *gpu_drawn = g_new(gboolean, p->n_gpus);
  g_autofree char *picked = NULL;
  guint per_gpu = MAX(p->streams->len / MAX(p->n_gpus, 1u), 1u);
  export_spans_pick_gpus(p->n_gpus, r->stages ? r->stages->len : 1, MAX(MAX_ROWS / per_gpu, 1u), gpu_drawn, &picked);
  /* Rows from the top: each drawn stream's lanes in order. */
  g_autofree gboolean *shown = g_new(gboolean, p->streams->len);
  g_autofree guint *first_row = g_new(guint, p->streams->len);
  Rows rows_of = { .computes = computes, .shown = shown, .first_row = first_row };
  for (guint s = 0; s < p->streams->len; s++) {
    shown[s] = gpu_drawn[((const SimStream *)g_ptr_array_index(p->streams, s))->gpu];
    first_row[s] = rows_of.rows;
    rows_of.rows += shown[s] ? g_array_index(spans->lanes, guint, s) : 0;
  }
  guint rows = rows_of.rows;
  guint row_px = rows <= ROWS_FULL ? ROW_PX : MAX(ROW_PX * ROWS_FULL / rows, (guint)ROW_MIN_PX);
  g_autoptr(PlotsChart) chart = plots_gnuplot_chart_new(name, 1400, 130 + row_px * MAX(rows, 3u));
  gboolean several = p->n_gpus > 1;

  guint n_drawn = 0;
  for (guint i = 0; i < spans->spans->len; i++)
    n_drawn += drawn(&g_array_index(spans->spans, ExportSpan, i), &rows_of);
  gboolean present[EXPORT_SPAN_COUNT] = { FALSE };
  g_autofree char *note = NULL;
  if (n_drawn <= MAX_BOXES) {
    add_boxes(chart, spans, &rows_of, present);
  } else {
    double width = xmax / SLICES;
    guint boxes = add_slices(chart, spans, &rows_of, width, present);
    note = g_strdup_printf("%u ops drawn as %u boxes: each is the kind of op that kept its row busy most of a "
                           "%.3g ms slice (1/%u of the axis), blank where the row was idle half of it or more",
                           n_drawn, boxes, width, SLICES);
  }
  if (picked) { /* under the axis too, before the slicing's note */
    char *both = note ? g_strdup_printf("%s; %s", picked, note) : g_strdup(picked);
    g_free(note);
    note = both;
  }

  GString *c = chart->commands;
  /* Under [parallel] the figures are the busiest GPU's, and what it did not
   * compute is the bubble as much as the transfers. */
  g_autofree char *subtitle =
    several ? g_strdup_printf("timeline of %s on %u GPUs: step %.2f ms = compute %.2f + recompute %.2f + optimizer "
                              "%.2f + communication %.2f + exposed transfer and bubble %.2f (the busiest GPU)",
                              r->policy, p->n_gpus, r->step_ms, r->compute_ms, r->recompute_ms, r->optimizer_ms,
                              r->comm_ms, r->exposed_transfer_ms)
            : g_strdup_printf("timeline of %s: step %.2f ms = compute %.2f + recompute %.2f + optimizer %.2f + "
                              "communication %.2f + exposed transfer %.2f",
                              r->policy, r->step_ms, r->compute_ms, r->recompute_ms, r->optimizer_ms, r->comm_ms,
                              r->exposed_transfer_ms);
  plots_gnuplot_title(c, "set title", r->scenario, subtitle);
  /* Several GPUs add kinds (sends, waits on a stage) and the boundary's
   * entry: the legend may take two lines. */
  g_string_append_printf(c, " offset 0,1\nset tmargin 6\nset bmargin %s\nset lmargin %u\n",
                         several ? (note ? "7.5" : "6.5") : (note ? "6.5" : "5.5"), left_margin(p, spans, &rows_of));
  if (note) {
    plots_gnuplot_title(c, "set xlabel", "time since the step started (ms)", note);
    g_string_append_c(c, '\n');
  } else {
    g_string_append(c, "set xlabel 'time since the step started (ms)'\n");
  }
  g_string_append(c, "set grid xtics lc rgb '#d0d0d0'\n"
                     "set key outside bottom center horizontal reverse Left samplen 2\n");
  g_string_append_printf(c, "set xrange [0:%s]\n", plots_gnuplot_number(a, xmax));
  g_string_append_printf(c, "set yrange [-0.6:%s]\n", plots_gnuplot_number(a, rows - 0.4));
  stream_tics(c, p, spans, &rows_of);
  const char *boundary_key = NULL;
  if (several) {
    gpu_separators(c, p, &rows_of);
    if (gpu_boundaries(c, p, spans, &rows_of))
      boundary_key = "NaN with lines dt 2 lw 2 lc rgb '#333333' title 'forward | backward'";
  } else if (g_array_index(spans->boundaries, double, 0) >= 0) {
    plots_gnuplot_number(a, spans->boundary * 1e3);
    g_string_append_printf(c, "set arrow 1 from %s, graph 0 to %s, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front\n"
                              "set label 1 'forward | backward' at %s, graph 1 center offset 0,0.7\n",
                           a, a, a);
  }

  plot_kinds(c, present, boundary_key);
  return g_steal_pointer(&chart);
}
