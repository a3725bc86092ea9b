/* plots/: quoting, the spans every picture and export is drawn from, the
 * gnuplot scripts, rendering through the pipe, the Chrome trace and the CSV
 * exports, through the library and through `offsim` as a user runs it.
 * Tests that need gnuplot say so and pass when it is missing; CI installs it. */
#include "testutil.h"

#include "base/error.h"
#include "base/output.h"
#include "base/units.h"
#include "export/chrome_trace.h"
#include "export/memory_csv.h"
#include "export/spans.h"
#include "plots/comparison.h"
#include "plots/figures.h"
#include "plots/gnuplot.h"
#include "plots/memory.h"
#include "plots/sweep.h"
#include "plots/timeline.h"
#include "result/evaluate.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TINY OFFSIM_SCENARIOS "/tiny.ini"

/* The contents of `path`, read into a buffer of its own: returning the one
 * g_file_get_contents() filled through `&contents` made GCC (-O3) take the
 * result for a pointer to that local (-Wdangling-pointer). */
static char *
read_text(const char *path)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *contents = NULL;
  gsize length = 0;
  ck_assert_msg(g_file_get_contents(path, &contents, &length, &error), "cannot read %s: %s", path,
                error ? error->message : "?");
  return g_strndup(contents, length);
}

static guint
count(const char *haystack, const char *needle)
{
  guint n = 0;
  for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

static gint
by_name(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in `dir` (hidden ones too), sorted, comma-separated. */
static char *
list_dir(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  ck_assert_msg(d != NULL, "no directory %s", dir);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  for (const char *name = g_dir_read_name(d); name; name = g_dir_read_name(d))
    g_ptr_array_add(names, g_strdup(name));
  g_ptr_array_sort(names, by_name);
  g_ptr_array_add(names, NULL);
  return g_strjoinv(",", (char **)names->pdata);
}

static SimResult *
tiny(const char *policy)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(TINY, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "?");
  return test_evaluate(s, policy);
}

/* A uniform model of `layers` layers with the default set of policies. */
static GPtrArray *
uniform(guint layers)
{
  g_autofree char *text = g_strdup_printf("[scenario]\nname = uniform %u\ninclude = %s\n[model]\nlayers = %u\n"
                                          "forward = 1ms\ninput = 8MiB\ntensors = attn:24MiB, mlp:32MiB\n"
                                          "static = 1GiB\nworkspace = 64MiB\n",
                                          layers, OFFSIM_SCENARIOS "/profiles/h100-sxm-pcie-gen5.ini", layers);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  GPtrArray *results = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  for (guint i = 0; i < s->policies->len; i++)
    g_ptr_array_add(results, test_evaluate(s, ((SimPolicy *)g_ptr_array_index(s->policies, i))->name));
  return results;
}

/* The README's pipeline (scenarios/pipeline-tiny.ini) with four
 * micro-batches: 4 stages of 2 layers, one 100 MB tensor a layer, kept or
 * offloaded. */
static SimScenario *
pipeline(const char *schedule)
{
  g_autofree char *text = g_strdup_printf("[scenario]\nname = pipeline\n[device]\nmemory = 80GiB\n"
                                          "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"
                                          "[model]\nlayers = 8\nforward = 1ms\nbackward = 2ms\ntensors = a:100MB\n"
                                          "input = 10MB\n[parallel]\npp = 4\nmicrobatches = 4\nschedule = %s\n"
                                          "[policy.resident]\nkind = resident\n"
                                          "[policy.offload]\nkind = offload\nmode = async\nkeep_last = 0\n",
                                          schedule);
  g_autoptr(GError) error = NULL;
  SimScenario *s = sim_scenario_load_data(text, "pipeline.ini", &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "?");
  return s;
}

static const char *const pipeline_kinds[] = { "compute", "d2h", "h2d", "p2p" };

/* The engine's device or host peak of GPU `gpu`. */
static gint64
pool_peak(const SimResult *r, guint gpu, SimPool pool)
{
  ck_assert_ptr_nonnull(r->run->pools);
  return g_array_index(r->run->pools, SimPeak, SIM_POOL_INDEX(gpu, pool)).bytes;
}

/* ---- quoting ------------------------------------------------------------ */

static const char *hostile[] = {
  "plain",
  "it's",
  "`touch BQ`",
  "$(touch DOLLAR)",
  "\"double\" and 'single'",
  "x'\nset output 'INJECTED.png",
  "'; system('touch SYSTEM'); print '",
  "''",
  "\n'\n'x",
  "under_score^caret@at{brace}\\back",
  "",
};

START_TEST(quote_doubles_quotes_and_drops_line_breaks)
{
  /* gnuplot takes '' right after an opening quote for an empty string, so
   * leading quotes travel in a double-quoted string of their own. */
  static const char *expected[] = {
    "'plain'",
    "'it''s'",
    "'`touch BQ`'",
    "'$(touch DOLLAR)'",
    "'\"double\" and ''single'''",
    "'x''set output ''INJECTED.png'",
    "\"'\" . '; system(''touch SYSTEM''); print '''",
    "\"''\"",
    "\"''\" . 'x'",
    "'under_score^caret@at{brace}\\back'",
    "''",
  };
  G_STATIC_ASSERT(G_N_ELEMENTS(expected) == G_N_ELEMENTS(hostile));
  for (guint i = 0; i < G_N_ELEMENTS(hostile); i++) {
    g_autofree char *q = plots_gnuplot_quote(hostile[i]);
    ck_assert_str_eq(q, expected[i]);
  }
  g_autofree char *null = plots_gnuplot_quote(NULL);
  ck_assert_str_eq(null, "''");
  g_autofree char *crlf = plots_gnuplot_quote("a\r\nb\tc");
  ck_assert_str_eq(crlf, "'abc'");
  g_autofree char *bad = plots_gnuplot_quote("a\xff");
  ck_assert(g_utf8_validate(bad, -1, NULL));
}
END_TEST

/* gnuplot itself reads each quoted string back as the literal text, and
 * none of them runs anything. */
START_TEST(quoted_strings_reach_gnuplot_as_literal_text)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *out = g_build_filename(dir, "printed.txt", NULL);
  g_autofree char *out_q = plots_gnuplot_quote(out);
  g_autoptr(GString) script = g_string_new(NULL);
  g_autoptr(GString) expected = g_string_new(NULL);
  /* Run from `dir`, so that anything the strings could create lands there. */
  g_autofree char *dir_q = plots_gnuplot_quote(dir);
  g_string_append_printf(script, "cd %s\nset print %s\n", dir_q, out_q);
  for (guint i = 0; i < G_N_ELEMENTS(hostile); i++) {
    g_autofree char *q = plots_gnuplot_quote(hostile[i]);
    g_string_append_printf(script, "print %s\n", q);
    /* What went in, less its line breaks. */
    g_autoptr(GString) line = g_string_new(hostile[i]);
    g_string_replace(line, "\n", "", 0);
    g_string_append_printf(expected, "%s\n", line->str);
  }
  g_string_append(script, "unset print\n");
  g_autoptr(GError) error = NULL;
  ck_assert_msg(plots_gnuplot_run(script->str, &error), "%s", error ? error->message : "");
  g_autofree char *printed = read_text(out);
  ck_assert_str_eq(printed, expected->str);
  g_autofree char *files = list_dir(dir);
  ck_assert_str_eq(files, "printed.txt");
}
END_TEST

START_TEST(file_names_are_neither_paths_nor_hidden)
{
  g_autofree char *a = plots_gnuplot_file_name("../a b/c");
  ck_assert_str_eq(a, "_._a_b_c");
  g_autofree char *b = plots_gnuplot_file_name("offload-async_2.x");
  ck_assert_str_eq(b, "offload-async_2.x");
  g_autofree char *c = plots_gnuplot_file_name("");
  ck_assert_str_eq(c, "_");
}
END_TEST

/* ---- spans -------------------------------------------------------------- */

START_TEST(spans_cover_every_op_once)
{
  g_autoptr(SimResult) r = tiny("async");
  g_autoptr(GError) error = NULL;
  g_autoptr(ExportSpans) spans = export_spans_new(r, &error);
  ck_assert_ptr_nonnull(spans);
  const SimProgram *p = r->program;
  ck_assert_uint_eq(spans->spans->len, sim_program_n_ops(p));
  ck_assert_uint_eq(spans->lanes->len, 3);
  double last_forward = 0;
  guint waits = 0;
  for (guint i = 0; i < spans->spans->len; i++) {
    const ExportSpan *s = &g_array_index(spans->spans, ExportSpan, i);
    const SimOp *op = sim_program_op(p, i);
    ck_assert_uint_eq(s->op, i);
    ck_assert_uint_eq(s->stream, op->stream);
    ck_assert(s->end >= s->start);
    double start = g_array_index(r->run->op_start, double, i), end = g_array_index(r->run->op_end, double, i);
    ck_assert(s->end == end);
    if (s->kind == EXPORT_SPAN_WAIT) {
      waits++;
      ck_assert(s->start <= start);
    } else {
      ck_assert(s->start == start);
    }
    if (op->kind == SIM_OP_COMPUTE && op->phase == SIM_PHASE_FORWARD)
      last_forward = MAX(last_forward, end);
  }
  ck_assert_uint_gt(waits, 0);
  ck_assert(spans->boundary == last_forward);
  ck_assert(spans->step == r->run->step);

  /* A wait starts where its stream's previous op ended; a stream never
   * overlaps itself, so it needs one lane. */
  for (guint st = 0; st < p->streams->len; st++) {
    const SimStream *stream = g_ptr_array_index(p->streams, st);
    ck_assert_uint_eq(g_array_index(spans->lanes, guint, st), 1);
    double previous = 0;
    for (guint k = 0; k < stream->n_ops; k++) {
      const ExportSpan *s = &g_array_index(spans->spans, ExportSpan, stream->ops[k]);
      ck_assert_uint_eq(s->lane, 0);
      ck_assert(s->start >= previous);
      if (s->kind == EXPORT_SPAN_WAIT)
        ck_assert(s->start == previous);
      previous = s->end;
    }
  }
  /* Without detail there is nothing to draw, and the error says so. */
  g_autoptr(SimScenario) s = sim_scenario_load_file(TINY, NULL);
  SimEvaluateOptions plain = { 0 };
  g_autoptr(SimResult) bare = sim_evaluate(NULL, s, sim_scenario_policy(s, "async"), &plain, NULL);
  g_autoptr(GError) no_detail = NULL;
  ck_assert_ptr_null(export_spans_new(bare, &no_detail));
  ck_assert(g_error_matches(no_detail, SIM_ERROR, SIM_ERROR_INTERNAL));
}
END_TEST

/* The engine's streams are in order, but the drawing must not depend on it:
 * a hand-made run where two compute ops overlap. */
START_TEST(overlapping_ops_take_separate_lanes)
{
  SimProgram *p = sim_program_new();
  guint32 compute = sim_program_add_stream(p, "compute");
  sim_program_add_stream(p, "d2h");
  guint32 label = sim_program_intern(p, "forward");
  const double times[][2] = { { 0, 2 }, { 1, 3 }, { 2, 4 } };
  for (guint i = 0; i < G_N_ELEMENTS(times); i++)
    sim_program_compute(p, compute, 2, SIM_PHASE_FORWARD, (gint32)i, label);
  SimRun *run = g_new0(SimRun, 1);
  run->applied = g_array_new(FALSE, FALSE, sizeof(guint32));
  run->op_start = g_array_new(FALSE, FALSE, sizeof(double));
  run->op_end = g_array_new(FALSE, FALSE, sizeof(double));
  for (guint i = 0; i < G_N_ELEMENTS(times); i++) {
    g_array_append_val(run->op_start, times[i][0]);
    g_array_append_val(run->op_end, times[i][1]);
  }
  run->curve = g_array_new(FALSE, FALSE, sizeof(SimMemPoint));
  SimMemPoint start = { 0, 0, 0, 0 };
  g_array_append_val(run->curve, start);
  run->step = 4;
  g_autoptr(SimResult) r = g_new0(SimResult, 1);
  r->scenario = g_strdup("overlap");
  r->policy = g_strdup("hand-made");
  r->step_ms = 4000;
  r->program = p;
  r->run = run;

  g_autoptr(ExportSpans) spans = export_spans_new(r, NULL);
  ck_assert_uint_eq(g_array_index(spans->lanes, guint, 0), 2);
  ck_assert_uint_eq(g_array_index(spans->lanes, guint, 1), 1);
  ck_assert_uint_eq(g_array_index(spans->spans, ExportSpan, 0).lane, 0);
  ck_assert_uint_eq(g_array_index(spans->spans, ExportSpan, 1).lane, 1);
  ck_assert_uint_eq(g_array_index(spans->spans, ExportSpan, 2).lane, 0); /* the first lane is free again at 2 */

  g_autoptr(PlotsChart) chart = plots_timeline_chart(r, "timeline", 0, NULL);
  ck_assert_ptr_nonnull(strstr(chart->commands->str, "set ytics scale 0 ('compute' 2, 'compute (2)' 1, 'd2h' 0)"));
  ck_assert_ptr_nonnull(strstr(chart->data->str, "$spans << EOD\n0 2000 2 0\n1000 3000 1 0\n2000 4000 2 0\nEOD\n"));

  g_autoptr(JsonNode) trace = export_chrome_trace_build(r, NULL);
  JsonArray *events = json_object_get_array_member(json_node_get_object(trace), "traceEvents");
  gint64 tids[3] = { 0 };
  guint names = 0;
  for (guint i = 0; i < json_array_get_length(events); i++) {
    JsonObject *e = json_array_get_object_element(events, i);
    JsonObject *args = json_object_get_object_member(e, "args");
    if (strcmp(json_object_get_string_member(e, "ph"), "X") == 0)
      tids[json_object_get_int_member(args, "op")] = json_object_get_int_member(e, "tid");
    else if (strcmp(json_object_get_string_member(e, "name"), "thread_name") == 0)
      names++;
  }
  ck_assert_uint_eq(names, 3);
  ck_assert_int_eq(tids[0], tids[2]);
  ck_assert_int_ne(tids[0], tids[1]);
}
END_TEST

/* ---- the scripts -------------------------------------------------------- */

START_TEST(timeline_script_has_lanes_colours_and_quoted_labels)
{
  /* tiny.ini with forwards shorter than their copies: the compute stream
   * waits for the D2H stream. */
  g_autoptr(SimScenario) starved = test_scenario_from_text("[scenario]\nname = tiny 'quoted' model_x^2\n"
                                                           "include = " TINY "\n[model]\nforward = 200us\n");
  g_autoptr(SimResult) r = test_evaluate(starved, "async");
  g_autoptr(GError) error = NULL;
  g_autoptr(PlotsChart) chart = plots_timeline_chart(r, "timeline-async", 0, &error);
  ck_assert_ptr_nonnull(chart);
  const char *c = chart->commands->str;
  ck_assert_msg(strstr(c, "set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)\n"), "lanes:\n%s", c);
  ck_assert_ptr_nonnull(strstr(c, "set title 'tiny ''quoted'' model_x^2' . \"\\n\" . 'timeline of async: step "));
  /* A box kind per legend entry, each in its own colour; async has no
   * recompute and no pinned allocations. */
  const guint drawn[] = { EXPORT_SPAN_FORWARD, EXPORT_SPAN_BACKWARD, EXPORT_SPAN_OFFLOAD, EXPORT_SPAN_RELOAD,
                          EXPORT_SPAN_WAIT };
  for (guint i = 0; i < G_N_ELEMENTS(drawn); i++) {
    g_autofree char *term = g_strdup_printf("($4==%u)", drawn[i]);
    g_autofree char *title = g_strdup_printf("lc rgb '%s' title '%s'", plots_timeline_color(drawn[i]),
                                             export_spans_kind_name(drawn[i]));
    ck_assert_msg(count(c, term) == 1, "%s not drawn once in:\n%s", term, c);
    ck_assert_msg(strstr(c, title), "%s missing in:\n%s", title, c);
  }
  ck_assert_ptr_null(strstr(c, "'recompute'"));
  ck_assert_ptr_null(strstr(c, "'host alloc'"));
  /* A colour per drawn kind, the pipeline's too: no two alike. */
  for (guint a = 0; a < EXPORT_SPAN_COUNT; a++)
    for (guint b = a + 1; b < EXPORT_SPAN_COUNT; b++)
      if (a != EXPORT_SPAN_RECORD && b != EXPORT_SPAN_RECORD)
        ck_assert_str_ne(plots_timeline_color(a), plots_timeline_color(b));

  /* The boundary is the end of the last forward op. */
  g_autoptr(ExportSpans) spans = export_spans_new(r, NULL);
  char at[G_ASCII_DTOSTR_BUF_SIZE];
  g_autofree char *arrow = g_strdup_printf("set arrow 1 from %s, graph 0", plots_gnuplot_number(at, spans->boundary * 1e3));
  ck_assert_msg(strstr(c, arrow), "%s missing in:\n%s", arrow, c);
  ck_assert_ptr_nonnull(strstr(c, "'forward | backward'"));
  ck_assert_ptr_nonnull(strstr(c, "set xlabel 'time since the step started (ms)'"));

  /* Data rows: numbers only, one per drawn span. */
  const char *data = chart->data->str;
  ck_assert(g_str_has_prefix(data, "$spans << EOD\n"));
  ck_assert(g_str_has_suffix(data, "\nEOD\n"));
  ck_assert_ptr_null(strpbrk(data + strlen("$spans << EOD\n"), "'\"`$abcdfghijklmnopqrstuvwxyz"));

  /* Checkpointing draws recompute and no copies. */
  g_autoptr(SimResult) ck = tiny("checkpoint");
  g_autoptr(PlotsChart) ck_chart = plots_timeline_chart(ck, "timeline-checkpoint", 0, &error);
  ck_assert_ptr_nonnull(strstr(ck_chart->commands->str, "title 'recompute'"));
  ck_assert_ptr_null(strstr(ck_chart->commands->str, "'D2H copy'"));
}
END_TEST

/* Labels are per chart, not per op or layer: 96 layers add none. */
START_TEST(labels_do_not_grow_with_layers)
{
  g_autoptr(GPtrArray) small = uniform(24);
  g_autoptr(GPtrArray) large = uniform(96);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) a = plots_figures_charts(small, 80ull << 30, &error);
  g_autoptr(GPtrArray) b = plots_figures_charts(large, 80ull << 30, &error);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(b);
  ck_assert_uint_eq(a->len, 2 + small->len);
  ck_assert_uint_eq(a->len, b->len);
  const char *keys[] = { "set label", "set arrow", "title '", "set xtics", "set ytics" };
  for (guint i = 0; i < a->len; i++) {
    const PlotsChart *x = g_ptr_array_index(a, i), *y = g_ptr_array_index(b, i);
    ck_assert_str_eq(x->name, y->name);
    ck_assert_uint_eq(x->width, y->width);
    ck_assert_uint_eq(x->height, y->height);
    for (guint k = 0; k < G_N_ELEMENTS(keys); k++)
      ck_assert_msg(count(x->commands->str, keys[k]) == count(y->commands->str, keys[k]), "%s: %s differs",
                    x->name, keys[k]);
    /* ...while the data does grow. */
    if (g_str_has_prefix(x->name, "timeline"))
      ck_assert_uint_gt(y->data->len, 3 * x->data->len);
  }
}
END_TEST

/* The rows of a chart's $spans block. */
static guint
span_rows(const PlotsChart *chart)
{
  const char *block = strstr(chart->data->str, "$spans << EOD\n");
  ck_assert_ptr_nonnull(block);
  const char *end = strstr(block, "\nEOD\n");
  ck_assert_ptr_nonnull(end);
  g_autofree char *rows = g_strndup(block, (gsize)(end - block));
  return count(rows, "\n");
}

/* 5,000 layers are some 40,000 ops: drawn one box each, the SVG grows with
 * them (80 MB for a transformer).  Above 4,000 the chart draws 1/1000 slices
 * of the axis, each the kind that kept its row busy most, and says so. */
/* offload-async's step at 5,000 layers, the caller's to free. */
static SimResult *
uniform_5000(void)
{
  g_autofree char *text = g_strdup_printf("[scenario]\nname = uniform 5000\ninclude = %s\n[model]\nlayers = 5000\n"
                                          "forward = 1ms\ninput = 8MiB\ntensors = attn:24MiB, mlp:32MiB\n"
                                          "static = 1GiB\nworkspace = 64MiB\n",
                                          OFFSIM_SCENARIOS "/profiles/h100-sxm-pcie-gen5.ini");
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  return test_evaluate(s, "offload-async");
}

START_TEST(large_timelines_are_drawn_aggregated)
{
  g_autoptr(SimResult) r = uniform_5000();
  ck_assert_uint_gt(sim_program_n_ops(r->program), 30000);
  g_autoptr(GError) error = NULL;
  g_autoptr(PlotsChart) chart = plots_timeline_chart(r, "timeline-offload-async", 0, &error);
  ck_assert_ptr_nonnull(chart);
  guint rows = span_rows(chart);
  ck_assert_msg(rows >= 3 && rows <= 3 * 1000, "%u boxes", rows);
  const char *c = chart->commands->str;
  g_autofree char *note = g_strdup_printf("ops drawn as %u boxes: each is the kind of op that kept its row busy most",
                                          rows);
  ck_assert_msg(strstr(c, note) != NULL, "no note in:\n%s", c);
  ck_assert_ptr_nonnull(strstr(c, "set xlabel 'time since the step started (ms)' . \"\\n\" . '"));
  /* The kinds still drawn: computing, copying both ways, waiting. */
  ck_assert_ptr_nonnull(strstr(c, "title 'forward'"));
  ck_assert_ptr_nonnull(strstr(c, "title 'backward'"));
  ck_assert_ptr_nonnull(strstr(c, "title 'D2H copy'"));
  ck_assert_ptr_nonnull(strstr(c, "title 'H2D copy'"));
  /* Boxes tile each row in order, within the step. */
  g_auto(GStrv) lines = g_strsplit(chart->data->str, "\n", -1);
  double last_end[3] = { 0, 0, 0 };
  for (char **l = lines + 1; *l && strcmp(*l, "EOD") != 0; l++) {
    double start, end, y, kind;
    ck_assert_int_eq(sscanf(*l, "%lf %lf %lf %lf", &start, &end, &y, &kind), 4);
    ck_assert(y >= 0 && y <= 2);
    ck_assert(start >= last_end[(int)y] - 1e-9 && end > start && end <= r->step_ms * (1 + 1e-9));
    last_end[(int)y] = end;
  }

  /* 96 layers are drawn op by op, without a note. */
  g_autoptr(GPtrArray) small = uniform(96);
  g_autoptr(PlotsChart) exact = plots_timeline_chart(g_ptr_array_index(small, 2), "timeline", 0, &error);
  ck_assert_ptr_null(strstr(exact->commands->str, "ops drawn as"));
  ck_assert_ptr_nonnull(strstr(exact->commands->str, "set xlabel 'time since the step started (ms)'\n"));
}
END_TEST

/* The aggregated timeline of 5,000 layers drawn by gnuplot: under 3 MB of SVG. */
START_TEST(large_timeline_svg_stays_small)
{
  g_autoptr(SimResult) r = uniform_5000();
  g_autoptr(GError) error = NULL;
  g_autoptr(PlotsChart) chart = plots_timeline_chart(r, "timeline-offload-async", 0, &error);
  ck_assert_ptr_nonnull(chart);
  g_autofree char *dir = test_tmp_dir_new();
  g_autoptr(GPtrArray) charts = g_ptr_array_new();
  g_ptr_array_add(charts, chart);
  ck_assert_msg(plots_gnuplot_render(charts, PLOTS_FORMAT_SVG, dir, NULL, &error), "%s", error ? error->message : "");
  g_autofree char *svg = g_build_filename(dir, "timeline-offload-async.svg", NULL);
  GStatBuf st;
  ck_assert_int_eq(g_stat(svg, &st), 0);
  ck_assert_msg(st.st_size < 3 * 1024 * 1024, "the SVG is %ld bytes", (long)st.st_size);
}
END_TEST

/* The capacity line is drawn when it is near the curves, named for what it
 * is (the device's memory or a --budget), and otherwise only mentioned. */
START_TEST(memory_chart_marks_capacity_or_budget)
{
  g_autoptr(SimScenario) s = sim_scenario_load_file(TINY, NULL);
  const SimPolicy *resident = sim_scenario_policy(s, "resident");
  SimEvaluateOptions far = { .detail = TRUE }, near = { .detail = TRUE, .budget = 3ull << 29 };
  g_autoptr(SimResult) a = sim_evaluate(NULL, s, resident, &far, NULL);
  g_autoptr(SimResult) b = sim_evaluate(NULL, s, resident, &near, NULL);
  ck_assert(a->peak_device.bytes * 1.5 < (double)a->capacity_bytes);
  ck_assert(b->peak_device.bytes * 1.5 > (double)b->capacity_bytes);
  g_autoptr(GPtrArray) one = g_ptr_array_new();
  g_autoptr(GError) error = NULL;

  g_ptr_array_add(one, a);
  g_autoptr(PlotsChart) device = plots_memory_chart(one, s->machine.device.memory, "memory", &error);
  ck_assert_ptr_null(strstr(device->commands->str, "set arrow 1 from"));
  ck_assert_ptr_nonnull(strstr(device->commands->str, "'device capacity 80.0 GiB, far above every peak"));

  g_ptr_array_index(one, 0) = b;
  g_autoptr(PlotsChart) budget = plots_memory_chart(one, s->machine.device.memory, "memory", &error);
  ck_assert_ptr_nonnull(strstr(budget->commands->str, "set arrow 1 from graph 0, first 1.5 to graph 1, first 1.5 nohead"));
  ck_assert_ptr_nonnull(strstr(budget->commands->str, "'memory budget 1.50 GiB: the dotted line'"));
  /* The peak is marked where the run says it was. */
  char t[G_ASCII_DTOSTR_BUF_SIZE];
  g_autofree char *peak = g_strdup_printf("$peaks << EOD\n%s ", plots_gnuplot_number(t, b->peak_device.time_ms));
  ck_assert_ptr_nonnull(strstr(budget->data->str, peak));
  g_autofree char *size = sim_units_format_size((guint64)b->peak_device.bytes);
  g_autofree char *footer = g_strdup_printf("'resident: device peak %s at %.2f ms", size, b->peak_device.time_ms);
  ck_assert_msg(strstr(budget->commands->str, footer) != NULL, "%s missing", footer);
  g_autofree char *live = g_strdup_printf("'    live at the device peak: %s'", b->peak_device.live);
  ck_assert_msg(strstr(budget->commands->str, live) != NULL, "%s missing", live);
}
END_TEST

/* A result of `peak` bytes against a capacity of `capacity` bytes. */
/* The footer's text is in each curve's colour, darkened until it reads on
 * white: the series' yellow (#edc948), pink, teal and grey are too light. */
START_TEST(memory_footer_reads_on_white)
{
  ck_assert(plots_gnuplot_contrast_on_white("#edc948") < 2); /* the series' yellow, as it was drawn */
  ck_assert(plots_gnuplot_contrast_on_white("#000000") > 20.9);
  for (guint i = 0; i < 10; i++) {
    char color[8];
    plots_gnuplot_series_text_color(i, color);
    ck_assert_msg(plots_gnuplot_contrast_on_white(color) >= 4.5, "series %u: %s", i, color);
  }
  char blue[8];
  plots_gnuplot_series_text_color(0, blue);
  ck_assert_str_eq(blue, "#4e79a7"); /* already dark enough: unchanged */

  g_autoptr(GPtrArray) results = uniform(4);
  g_autoptr(PlotsChart) chart = plots_memory_chart(results, 80ull << 30, "memory", NULL);
  const char *c = chart->commands->str;
  ck_assert_ptr_null(strstr(c, " tc lt "));
  for (guint i = 0; i < results->len; i++) {
    char color[8];
    plots_gnuplot_series_text_color(i, color);
    g_autofree char *tc = g_strdup_printf("left tc rgb '%s'\n", color);
    ck_assert_msg(count(c, tc) >= 2, "%s missing in:\n%s", tc, c);
  }
}
END_TEST

static SimResult *
fake(const char *policy, double step_ms, double compute_ms, double recompute_ms, gint64 peak, guint64 capacity)
{
  SimResult *r = g_new0(SimResult, 1);
  r->scenario = g_strdup("fake");
  r->policy = g_strdup(policy);
  r->step_ms = step_ms;
  r->compute_ms = compute_ms;
  r->recompute_ms = recompute_ms;
  r->exposed_transfer_ms = step_ms - compute_ms - recompute_ms;
  r->peak_device.bytes = peak;
  r->capacity_bytes = capacity;
  r->fits = (guint64)peak <= capacity;
  return r;
}

/* plots_comparison_pareto gives `expected`, one per result. */
static void
assert_front(GPtrArray *results, const gboolean *expected)
{
  g_autoptr(GArray) front = plots_comparison_pareto(results);
  ck_assert_uint_eq(front->len, results->len);
  for (guint i = 0; i < results->len; i++)
    ck_assert_msg(g_array_index(front, gboolean, i) == expected[i], "policy %u", i);
}

START_TEST(comparison_marks_the_pareto_front)
{
  g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  const gint64 G = 1 << 30;
  const guint64 device = 80ull << 30;
  g_ptr_array_add(results, fake("fast", 10, 10, 0, 5 * G, device));
  g_ptr_array_add(results, fake("small", 20, 10, 2, 3 * G, device));
  g_ptr_array_add(results, fake("dominated", 25, 10, 0, 4 * G, device));
  g_ptr_array_add(results, fake("fast twin", 10, 10, 0, 5 * G, device));
  g_ptr_array_add(results, fake("slow and big", 30, 10, 0, 6 * G, device));
  assert_front(results, (const gboolean[]){ TRUE, TRUE, FALSE, TRUE, FALSE });

  g_autoptr(PlotsChart) chart = plots_comparison_chart(results, device, "comparison");
  /* The front, by memory: small (3 GiB) then the two fast ones (5 GiB). */
  ck_assert_ptr_nonnull(strstr(chart->data->str, "$front << EOD\n3 20\n5 10\n5 10\nEOD\n"));
  ck_assert_ptr_nonnull(strstr(chart->data->str, "$bars << EOD\n0 10 0 0 0 0\n1 10 2 0 0 8\n2 10 0 0 0 15\n"));
  const char *c = chart->commands->str;
  ck_assert_ptr_nonnull(strstr(c, "title 'Pareto front of what fits'"));
  ck_assert_ptr_nonnull(strstr(c, "every ::4::4 using 1:2 with points lt 5 title 'slow and big'"));
  ck_assert_ptr_nonnull(strstr(c, "set xtics scale 0 ('fast' 0, 'small' 1, 'dominated' 2, 'fast twin' 3, "
                                  "'slow and big' 4)"));
  ck_assert_ptr_nonnull(strstr(c, "title 'exposed transfer'"));
  /* 80 GiB is far right of 6 GiB: named under the axis, not drawn. */
  ck_assert_ptr_nonnull(strstr(c, "set xlabel 'peak device memory (GiB); device capacity 80.0 GiB is far right, "
                                  "not drawn'\n"));
  ck_assert_ptr_null(strstr(c, "title 'device capacity"));
  ck_assert_ptr_null(strstr(c, "set arrow 1 from"));
  ck_assert_ptr_null(strstr(chart->data->str, "$capacity"));
}
END_TEST

/* Under a budget, the line is drawn where the budget is, and only the
 * policies that fit it are on the front and ringed: "fast" (5 GiB) is the
 * quickest but does not fit 4.5 GiB, so "dominated" (4 GiB), which only
 * "fast" beat, joins the front.  With nothing that fits, there is none. */
/* Four policies under a 4.5 GiB budget (the caller's to free). */
static GPtrArray *
budget_results(void)
{
  GPtrArray *results = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  const gint64 G = 1 << 30;
  const guint64 budget = 9ull << 29;
  g_ptr_array_add(results, fake("fast", 10, 10, 0, 5 * G, budget));
  g_ptr_array_add(results, fake("small", 20, 10, 2, 3 * G, budget));
  g_ptr_array_add(results, fake("dominated", 15, 10, 0, 4 * G, budget));
  g_ptr_array_add(results, fake("slow and big", 30, 10, 0, 6 * G, budget));
  return results;
}

/* The results, each held to a budget below every peak. */
static void
budget_below_every_peak(GPtrArray *results)
{
  for (guint i = 0; i < results->len; i++) {
    SimResult *r = g_ptr_array_index(results, i);
    r->capacity_bytes = 2ull << 30;
    r->fits = FALSE;
  }
}

START_TEST(comparison_draws_the_budget_and_rings_what_fits)
{
  g_autoptr(GPtrArray) results = budget_results();
  const guint64 device = 80ull << 30;
  assert_front(results, (const gboolean[]){ FALSE, TRUE, TRUE, FALSE });

  g_autoptr(PlotsChart) chart = plots_comparison_chart(results, device, "comparison");
  ck_assert_ptr_nonnull(strstr(chart->data->str, "$front << EOD\n3 20\n4 15\nEOD\n"));
  ck_assert_ptr_nonnull(strstr(chart->data->str, "$capacity << EOD\n4.5 10\nEOD\n"));
  const char *c = chart->commands->str;
  ck_assert_ptr_nonnull(strstr(c, "set arrow 1 from first 4.5, graph 0 to first 4.5, graph 1 nohead dt 3"));
  ck_assert_ptr_nonnull(strstr(c, "title 'memory budget 4.50 GiB'"));
  ck_assert_ptr_nonnull(strstr(c, "$capacity using 1:2 with points ps 0 notitle"));
  ck_assert_uint_eq(count(c, "$front using"), 2);

  /* A budget below every peak: no front, no ring, and the legend says so. */
  budget_below_every_peak(results);
  g_autoptr(PlotsChart) none = plots_comparison_chart(results, device, "comparison");
  ck_assert_ptr_nonnull(strstr(none->commands->str, "title 'memory budget 2.00 GiB'"));
  ck_assert_ptr_nonnull(strstr(none->commands->str, "set xlabel 'peak device memory (GiB); no policy fits it'\n"));
  ck_assert_ptr_null(strstr(none->commands->str, "$front using"));
  ck_assert_ptr_nonnull(strstr(none->data->str, "$front << EOD\nEOD\n"));
}
END_TEST

/* gnuplot draws both budget charts, with a front and without one. */
START_TEST(comparison_budget_charts_render)
{
  g_autoptr(GPtrArray) results = budget_results();
  const guint64 device = 80ull << 30;
  g_autoptr(PlotsChart) chart = plots_comparison_chart(results, device, "comparison");
  budget_below_every_peak(results);
  g_autoptr(PlotsChart) none = plots_comparison_chart(results, device, "comparison");
  g_autofree char *dir = test_tmp_dir_new();
  g_autoptr(GPtrArray) charts = g_ptr_array_new();
  g_ptr_array_add(charts, chart);
  g_ptr_array_add(charts, none);
  g_autoptr(GError) error = NULL;
  PlotsChart *second = g_ptr_array_index(charts, 1);
  g_free(second->name);
  second->name = g_strdup("none");
  ck_assert_msg(plots_gnuplot_render(charts, PLOTS_FORMAT_PNG, dir, NULL, &error), "%s", error ? error->message : "");
}
END_TEST

/* Three policies over four bandwidths, one point missing (the caller's to free). */
static PlotsSweep *
tiny_sweep(void)
{
  PlotsSweep *sweep = plots_sweep_new("tiny's sweep", "link.h2d_bandwidth", "GB/s", "step time", "ms");
  const double x[] = { 16, 32, 55, 450 };
  g_array_append_vals(sweep->x, x, 4);
  plots_sweep_add_series(sweep, "resident", 4, (double[]){ 10, 10, 10, 10 });
  plots_sweep_add_series(sweep, "offload-async", 4, (double[]){ 90, 50, 30, NAN });
  plots_sweep_add_series(sweep, "offload_sync", 4, (double[]){ 120, 70, 45, 11 });
  return sweep;
}

START_TEST(sweep_draws_a_line_per_policy)
{
  g_autoptr(PlotsSweep) sweep = tiny_sweep();
  g_autoptr(GError) error = NULL;
  g_autoptr(PlotsChart) chart = plots_sweep_chart(sweep, "sweep", &error);
  ck_assert_ptr_nonnull(chart);
  ck_assert_str_eq(chart->data->str, "$sweep << EOD\n16 10 90 120\n32 10 50 70\n55 10 30 45\n450 10 NaN 11\nEOD\n");
  const char *c = chart->commands->str;
  ck_assert_uint_eq(count(c, "with linespoints"), 3);
  ck_assert_ptr_nonnull(strstr(c, "$sweep using 1:4 with linespoints lt 3 title 'offload_sync'"));
  ck_assert_ptr_nonnull(strstr(c, "set xlabel 'link.h2d_bandwidth (GB/s)'"));
  ck_assert_ptr_nonnull(strstr(c, "set ylabel 'step time (ms)'"));
  ck_assert_ptr_nonnull(strstr(c, "set title 'tiny''s sweep' . \"\\n\" . 'step time as link.h2d_bandwidth varies'"));
  /* No negative value: both axes from 0 (gnuplot's margins went to -20 ms), a little above the largest. */
  ck_assert_msg(strstr(c, "set xrange [0:472.5]\n") && strstr(c, "set yrange [0:129.6]\n") && !strstr(c, "offsets"),
                "%s", c);

  /* Past two decades an axis is logarithmic, and says so. */
  g_autoptr(PlotsSweep) wide = plots_sweep_new("wide", "link.latency", "\xc2\xb5s", "step time", "ms");
  g_array_append_vals(wide->x, (double[]){ 1, 10, 100, 1000 }, 4);
  plots_sweep_add_series(wide, "resident", 4, (double[]){ 5, 5.5, 6, 8 });
  g_autoptr(PlotsChart) log_chart = plots_sweep_chart(wide, "sweep", &error);
  const char *l = log_chart->commands->str;
  ck_assert_msg(strstr(l, "set logscale x\n") && strstr(l, "set xlabel 'link.latency (\xc2\xb5s, log scale)'") &&
                  !strstr(l, "logscale y") && strstr(l, "set yrange [0:8.64]\n"), "%s", l);

  /* A series of the wrong length is refused, not drawn short. */
  plots_sweep_add_series(sweep, "short", 3, (double[]){ 1, 2, 3 });
  g_autoptr(GError) bad = NULL;
  ck_assert_ptr_null(plots_sweep_chart(sweep, "sweep", &bad));
  ck_assert(g_error_matches(bad, SIM_ERROR, SIM_ERROR_INPUT));
  ck_assert_ptr_nonnull(strstr(bad->message, "'short' has 3 values for 4 points"));
  g_ptr_array_remove_index(sweep->series, 3);
}
END_TEST

/* gnuplot draws the sweep as a PNG. */
START_TEST(sweep_renders_png)
{
  g_autoptr(PlotsSweep) sweep = tiny_sweep();
  g_autoptr(GError) error = NULL;
  g_autoptr(PlotsChart) chart = plots_sweep_chart(sweep, "sweep", &error);
  ck_assert_ptr_nonnull(chart);
  g_autofree char *dir = test_tmp_dir_new();
  g_autoptr(GPtrArray) charts = g_ptr_array_new();
  g_ptr_array_add(charts, chart);
  ck_assert_msg(plots_gnuplot_render(charts, PLOTS_FORMAT_PNG, dir, NULL, &error), "%s",
                error ? error->message : "");
  g_autofree char *png = g_build_filename(dir, "sweep.png", NULL);
  ck_assert(g_file_test(png, G_FILE_TEST_IS_REGULAR));
}
END_TEST

/* A sweep of tiny.ini (a library grid): the x axis in the unit the values
 * are written in, the other key's value in the subtitle, the scenario's
 * name as the title, and each line the step times at those points. */
START_TEST(sweep_from_a_grid_reads_in_human_units)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimConfig) config = sim_config_load_file(TINY, &error);
  ck_assert_msg(config != NULL, "%s", error ? error->message : "");
  g_autoptr(GPtrArray) axes = g_ptr_array_new_with_free_func((GDestroyNotify)sweep_grid_axis_free);
  g_ptr_array_add(axes, sweep_grid_axis_parse("link.latency=1us,2us,4.5us", "--set", NULL));
  g_ptr_array_add(axes, sweep_grid_axis_parse("model.forward=1ms,2ms", "--set", NULL));
  SweepGridOptions options = { .jobs = 1 };
  g_autoptr(SweepGrid) grid = sweep_grid_run(config, g_steal_pointer(&axes), &options, &error);
  ck_assert_msg(grid != NULL, "%s", error ? error->message : "");
  g_autoptr(PlotsSweep) sweep = plots_sweep_from_grid(grid, TINY, &error);
  ck_assert_msg(sweep != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq(sweep->x_unit, "\xc2\xb5s");
  ck_assert_uint_eq(sweep->x->len, 3);
  ck_assert_close(g_array_index(sweep->x, double, 2), 4.5, 1e-12);
  /* The file, not the scenario's name: a name can state a value the sweep changes. */
  ck_assert_str_eq(sweep->title, "sweep of " TINY);
  ck_assert_uint_eq(sweep->held->len, 1);
  ck_assert_str_eq(g_ptr_array_index(sweep->held, 0), "model.forward = 1ms");
  ck_assert_uint_eq(sweep->series->len, 4);
  for (guint v = 0; v < 3; v++) {
    const SweepGridPoint *point = g_ptr_array_index(grid->points, v * 2); /* model.forward = 1ms */
    for (guint k = 0; k < 4; k++) {
      const PlotsSweepSeries *series = g_ptr_array_index(sweep->series, k);
      ck_assert(g_array_index(series->y, double, v) == ((SimResult *)g_ptr_array_index(point->results, k))->step_ms);
    }
  }
  g_autoptr(PlotsChart) chart = plots_sweep_chart(sweep, "sweep", &error);
  const char *c = chart->commands->str;
  ck_assert_msg(strstr(c, "set xlabel 'link.latency (\xc2\xb5s)'\n"), "%s", c);
  ck_assert_ptr_nonnull(strstr(c, "set ylabel 'step time (ms)'\n"));
  ck_assert_msg(strstr(c, "set title 'sweep of " TINY "' . \"\\n\" . 'step time as link.latency varies; held at "
                          "model.forward = 1ms'"), "%s", c);
  /* A latency sweep's x axis starts at 0, not below it. */
  ck_assert_msg(strstr(c, "set xrange [0:") && strstr(c, "set yrange [0:"), "%s", c);
  ck_assert(g_str_has_prefix(chart->data->str, "$sweep << EOD\n1 "));

  /* Values in different units: the unit that suits their size, never raw
   * bytes per second. */
  g_autoptr(GPtrArray) mixed = g_ptr_array_new_with_free_func((GDestroyNotify)sweep_grid_axis_free);
  g_ptr_array_add(mixed, sweep_grid_axis_parse("link.h2d_bandwidth=10GB/s,25.6GiB/s", "--set", NULL));
  g_autoptr(SweepGrid) grid2 = sweep_grid_run(config, g_steal_pointer(&mixed), &options, &error);
  g_autoptr(PlotsSweep) rates = plots_sweep_from_grid(grid2, TINY, &error);
  ck_assert_str_eq(rates->x_unit, "GB/s");
  ck_assert_close(g_array_index(rates->x, double, 1), 25.6 * 1.073741824, 1e-9);
  ck_assert_uint_eq(rates->held->len, 0);

  /* A key of names cannot be an axis. */
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func((GDestroyNotify)sweep_grid_axis_free);
  g_ptr_array_add(names, sweep_grid_axis_parse("policy.async.pinned=pooled,pageable", "--set", NULL));
  g_autoptr(SweepGrid) grid3 = sweep_grid_run(config, g_steal_pointer(&names), &options, &error);
  ck_assert_msg(grid3 != NULL, "%s", error ? error->message : "");
  g_autoptr(GError) bad = NULL;
  ck_assert_ptr_null(plots_sweep_from_grid(grid3, TINY, &bad));
  ck_assert(g_error_matches(bad, SIM_ERROR, SIM_ERROR_INPUT));
  ck_assert_msg(strstr(bad->message, "policy.async.pinned") && strstr(bad->message, "'pooled'"), "%s", bad->message);
}
END_TEST

/* `offsim sweep --plot` as a user runs it: the picture says µs and what
 * the other key was held at. */
START_TEST(sweep_plot_shows_units_and_held_values)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_auto(TestRun) r = test_offsim_in(dir, "sweep", TINY, "--set", "link.latency=2us,20us", "--set",
                                     "model.forward=1ms,2ms", "--jobs", "1", "--plot", "plots", NULL);
  ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
  g_autofree char *svg_path = g_build_filename(dir, "plots", "sweep.svg", NULL);
  g_autofree char *svg = read_text(svg_path);
  ck_assert_msg(strstr(svg, ">link.latency (\xc2\xb5s)<") != NULL, "no unit on the x axis");
  ck_assert_msg(strstr(svg, "held at model.forward = 1ms<") != NULL, "the held value is not shown");
  ck_assert_msg(strstr(svg, ">sweep of " TINY "<") != NULL, "no title");
}
END_TEST

/* ---- rendering ---------------------------------------------------------- */

static void
assert_png(const char *path)
{
  g_autofree char *bytes = NULL;
  gsize length = 0;
  ck_assert_msg(g_file_get_contents(path, &bytes, &length, NULL), "%s missing", path);
  ck_assert_msg(length > 8 * 1024, "%s is only %zu bytes", path, (size_t)length);
  ck_assert_msg(memcmp(bytes, "\x89PNG\r\n\x1a\n", 8) == 0, "%s has no PNG signature", path);
}

START_TEST(compare_plot_writes_every_picture)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *plots = g_build_filename(dir, "plots", NULL);
  g_auto(TestRun) r = test_offsim("compare", "--plot", plots, NULL);
  ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
  g_autofree char *said = g_strdup_printf("plots written to %s/: comparison, memory and 4 timelines (.png and .svg)\n",
                                          plots);
  ck_assert_str_eq(r.err, said);
  g_autofree char *files = list_dir(plots);
  ck_assert_str_eq(files, "comparison.png,comparison.svg,memory.png,memory.svg,"
                          "timeline-checkpoint-full.png,timeline-checkpoint-full.svg,"
                          "timeline-offload-async.png,timeline-offload-async.svg,"
                          "timeline-offload-sync.png,timeline-offload-sync.svg,"
                          "timeline-resident.png,timeline-resident.svg");
  const char *pngs[] = { "comparison", "memory", "timeline-resident", "timeline-offload-sync",
                         "timeline-offload-async", "timeline-checkpoint-full" };
  for (guint i = 0; i < G_N_ELEMENTS(pngs); i++) {
    g_autofree char *png = g_strdup_printf("%s/%s.png", plots, pngs[i]);
    assert_png(png);
    g_autofree char *svg_path = g_strdup_printf("%s/%s.svg", plots, pngs[i]);
    g_autofree char *svg = read_text(svg_path);
    ck_assert(strstr(svg, "<svg") != NULL);
  }

  /* run draws its policy's timeline and the memory chart, no comparison. */
  g_autofree char *one = g_build_filename(dir, "one", NULL);
  g_auto(TestRun) run = test_offsim("run", TINY, "--policy", "hybrid", "--plot", one, "--plot-format", "png", NULL);
  ck_assert_msg(run.status == 0, "exit %d: %s", run.status, run.err);
  g_autofree char *one_files = list_dir(one);
  ck_assert_str_eq(one_files, "memory.png,timeline-hybrid.png");
  g_autofree char *hybrid = g_build_filename(one, "timeline-hybrid.png", NULL);
  assert_png(hybrid);
}
END_TEST

START_TEST(renders_at_96_layers)
{
  g_autoptr(GPtrArray) results = uniform(96);
  g_autofree char *dir = test_tmp_dir_new();
  PlotsFiguresOptions o = { .dir = dir, .formats = PLOTS_FORMAT_PNG, .device_memory = 80ull << 30 };
  g_autoptr(GError) error = NULL;
  g_autofree char *summary = NULL;
  ck_assert_msg(plots_figures_write(results, &o, &summary, &error), "%s", error ? error->message : "");
  ck_assert_str_eq(summary, "comparison, memory and 4 timelines");
  g_autofree char *png = g_build_filename(dir, "timeline-offload-async.png", NULL);
  assert_png(png);
}
END_TEST

/* A scenario named to break out of its string runs nothing, creates no
 * file, and shows in the picture as the text it is. */
/* After `r` ran in `dir`: it succeeded, `dir` holds `listing`, and the
 * text of the SVG `svg` (a path under `dir`). */
static char *
drawn_svg(const TestRun *r, const char *dir, const char *listing, const char *svg)
{
  ck_assert_msg(r->status == 0, "exit %d: %s", r->status, r->err);
  g_autofree char *files = list_dir(dir);
  ck_assert_str_eq(files, listing);
  g_autofree char *path = g_build_filename(dir, svg, NULL);
  return read_text(path);
}

/* tiny.ini under `file` in `dir`, with `more` after its include. */
static void
tiny_in(const char *dir, const char *file, const char *more)
{
  g_autofree char *ini = g_strdup_printf("[scenario]\ninclude = %s\n%s", TINY, more);
  g_autofree char *path = g_build_filename(dir, file, NULL);
  ck_assert(g_file_set_contents(path, ini, -1, NULL));
}

START_TEST(hostile_scenario_name_is_drawn_literally)
{
  g_autofree char *dir = test_tmp_dir_new();
  const char *name = "evil `touch BQ` $(touch DOLLAR) it's \"dq\" x_1^2 @y {z} '; system('touch SYSTEM'); print '";
  g_autofree char *named = g_strdup_printf("name = %s\n", name);
  tiny_in(dir, "evil.ini", named);

  g_auto(TestRun) r = test_offsim_in(dir, "compare", "evil.ini", "--plot", "plots", "--plot-format", "svg",
                                     "--plot-script", "evil.gp", NULL);
  g_autofree char *svg = drawn_svg(&r, dir, "evil.gp,evil.ini,plots", "plots/memory.svg");
  ck_assert_msg(strstr(svg, ">evil `touch BQ` $(touch DOLLAR) it's \"dq\" x_1^2 @y {z} '; system('touch SYSTEM'); "
                            "print '<") != NULL, "the name is not in the picture as typed");
  g_autofree char *script_path = g_build_filename(dir, "evil.gp", NULL);
  g_autofree char *script = read_text(script_path);
  g_autofree char *quoted = plots_gnuplot_quote(name);
  ck_assert_uint_eq(count(script, quoted), 6); /* every chart's title, SVG only */

  /* A name with a line break can only come from code, not from a key file:
   * the break goes, the rest stays text. */
  g_autoptr(SimResult) res = tiny("async");
  g_free(res->scenario);
  res->scenario = g_strdup("x'\nset output 'INJECTED.png'\nplot sin(x)\n'");
  g_autoptr(GPtrArray) results = g_ptr_array_new();
  g_ptr_array_add(results, res);
  g_autofree char *out = g_build_filename(dir, "newline", NULL);
  PlotsFiguresOptions o = { .dir = out, .formats = PLOTS_FORMAT_SVG, .device_memory = 80ull << 30 };
  g_autoptr(GError) error = NULL;
  ck_assert_msg(plots_figures_write(results, &o, NULL, &error), "%s", error ? error->message : "");
  g_autofree char *out_files = list_dir(out);
  ck_assert_str_eq(out_files, "memory.svg,timeline-async.svg");
  g_autofree char *timeline_path = g_build_filename(out, "timeline-async.svg", NULL);
  g_autofree char *timeline = read_text(timeline_path);
  ck_assert(strstr(timeline, ">x'set output 'INJECTED.png'plot sin(x)'<") != NULL);
  g_autofree char *cwd = g_get_current_dir();
  g_autofree char *injected = g_build_filename(cwd, "INJECTED.png", NULL);
  ck_assert(!g_file_test(injected, G_FILE_TEST_EXISTS));

  /* The sweep's chart too: a policy's name in its key, the swept file's name in the title. */
  tiny_in(dir, "it's `x`.ini", "[policy.evil `touch BQ` it's $(touch D) '; system('touch S'); print ']\nkind = offload\n");
  g_auto(TestRun) sweep = test_offsim_in(dir, "sweep", "it's `x`.ini", "--set", "link.latency=1us,2us", "--jobs", "1",
                                         "--plot", "swept", NULL);
  g_autofree char *sweep_svg = drawn_svg(&sweep, dir, "evil.gp,evil.ini,it's `x`.ini,newline,plots,swept",
                                         "swept/sweep.svg");
  ck_assert_msg(strstr(sweep_svg, ">sweep of it's `x`.ini<"), "the file name is not in the title as typed");
  ck_assert_msg(strstr(sweep_svg, ">evil `touch BQ` it's $(touch D) '; system('touch S'); print '<"),
                "the policy is not in the legend as typed");
}
END_TEST

START_TEST(gnuplot_errors_come_back_and_leave_no_file)
{
  g_autoptr(GError) error = NULL;
  ck_assert(!plots_gnuplot_run("plot undefined_function_xyz(x)\n", &error));
  /* gnuplot ran and failed: the tool's fault, exit 3, not a bug of ours. */
  ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_TOOL));
  ck_assert_msg(strstr(error->message, "undefined function") != NULL, "%s", error->message);
  ck_assert_ptr_null(strchr(error->message, '\n'));

  g_autofree char *dir = test_tmp_dir_new();
  g_autoptr(PlotsChart) good = plots_gnuplot_chart_new("good", 400, 300);
  g_string_append(good->commands, "plot x\n");
  g_autoptr(PlotsChart) broken = plots_gnuplot_chart_new("broken", 400, 300);
  g_string_append(broken->commands, "plot $nothing using 1:2\n");
  g_autoptr(GPtrArray) charts = g_ptr_array_new();
  g_ptr_array_add(charts, good);
  g_ptr_array_add(charts, broken);
  g_autoptr(GError) render_error = NULL;
  ck_assert(!plots_gnuplot_render(charts, PLOTS_FORMAT_ALL, dir, NULL, &render_error));
  g_autofree char *files = list_dir(dir);
  ck_assert_str_eq(files, ""); /* not even the good chart, nor a temporary */
}
END_TEST

/* A stand-in `gnuplot` in DIR/bin running `body` (sh), for PATH=DIR/bin. */
static char *
fake_gnuplot(const char *dir, const char *body)
{
  g_autofree char *bin = g_build_filename(dir, "bin", NULL);
  ck_assert_int_eq(g_mkdir_with_parents(bin, 0755), 0);
  g_autofree char *path = g_build_filename(bin, "gnuplot", NULL);
  g_autofree char *text = g_strdup_printf("#!/bin/sh\n%s\n", body);
  ck_assert(g_file_set_contents(path, text, -1, NULL));
  ck_assert_int_eq(g_chmod(path, 0755), 0);
  return g_steal_pointer(&bin);
}

/* A gnuplot that runs and fails is a failing external tool: exit 3 (not 1,
 * which is offsim's bug), with the first line it said, the script and the
 * report still out, and no picture or temporary left. */
START_TEST(failing_gnuplot_exits_3_with_its_first_line)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *bin = fake_gnuplot(dir, "cat >/dev/null\n"
                                           "printf '\\n   gnuplot> set output\\n   ^\\n   line 3: the first complaint\\n' >&2\n"
                                           "echo 'a second line' >&2\nexit 1");
  g_autofree char *saved = g_strdup(g_getenv("PATH"));
  g_autofree char *path = g_strdup_printf("%s:%s", bin, saved);
  g_setenv("PATH", path, TRUE);
  g_auto(TestRun) r = test_offsim_in(dir, "compare", TINY, "--plot", "plots", "--plot-script", "all.gp", NULL);
  g_setenv("PATH", saved, TRUE);
  ck_assert_msg(r.status == 3, "exit %d: %s", r.status, r.err);
  ck_assert_msg(strstr(r.err, "offsim: gnuplot failed (exit 1): line 3: the first complaint\n") != NULL, "%s", r.err);
  ck_assert_ptr_null(strstr(r.err, "a second line"));
  ck_assert_ptr_nonnull(strstr(r.err, "plot script written to all.gp"));
  ck_assert_ptr_nonnull(strstr(r.out, "hybrid"));
  g_autofree char *files = list_dir(dir);
  ck_assert_str_eq(files, "all.gp,bin");
}
END_TEST

START_TEST(missing_gnuplot_exits_3_and_still_writes_the_script)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *empty = g_build_filename(dir, "empty-path", NULL);
  ck_assert_int_eq(g_mkdir(empty, 0755), 0);
  g_autofree char *saved = g_strdup(g_getenv("PATH"));
  g_setenv("PATH", empty, TRUE);
  g_auto(TestRun) r = test_offsim_in(dir, "compare", "--plot", "plots", "--plot-script", "all.gp", NULL);
  g_auto(TestRun) script_only = test_offsim_in(dir, "run", "--plot-script", "run.gp", NULL);
  g_setenv("PATH", saved, TRUE);

  ck_assert_int_eq(r.status, 3);
  ck_assert_msg(strstr(r.err, "gnuplot is not installed") != NULL, "%s", r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "offload-async")); /* the report came first */
  g_autofree char *plots = g_build_filename(dir, "plots", NULL);
  ck_assert(!g_file_test(plots, G_FILE_TEST_EXISTS)); /* not even an empty directory */
  g_autofree char *all_path = g_build_filename(dir, "all.gp", NULL);
  g_autofree char *all = read_text(all_path);
  ck_assert_ptr_nonnull(strstr(all, "$spans << EOD\n"));
  ck_assert_ptr_nonnull(strstr(all, "set output 'plots/timeline-offload-async.png'\n"));
  ck_assert_ptr_nonnull(strstr(all, "set output 'plots/comparison.svg'\n"));

  ck_assert_msg(script_only.status == 0, "%s", script_only.err);
  g_autofree char *run_path = g_build_filename(dir, "run.gp", NULL);
  g_autofree char *run = read_text(run_path);
  ck_assert_ptr_nonnull(strstr(run, "set output 'timeline-resident.png'\n"));
  ck_assert_ptr_null(strstr(run, "comparison"));
}
END_TEST

START_TEST(unwritable_paths_exit_2)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *blocker = g_build_filename(dir, "blocker", NULL);
  ck_assert(g_file_set_contents(blocker, "a file, not a directory", -1, NULL));
  g_autofree char *under = g_build_filename(blocker, "sub", NULL);
  const char *options[] = { "--plot", "--plot-script", "--trace", "--timeline", "--memory" };
  for (guint i = 0; i < G_N_ELEMENTS(options); i++) {
    g_auto(TestRun) r = test_offsim("run", options[i], under, NULL);
    ck_assert_msg(r.status == 2, "%s: exit %d: %s", options[i], r.status, r.err);
    ck_assert_msg(strstr(r.err, under) != NULL, "%s: the message does not name the path: %s", options[i], r.err);
  }
  g_auto(TestRun) format = test_offsim("compare", "--plot", dir, "--plot-format", "gif", NULL);
  ck_assert_int_eq(format.status, 2);
  ck_assert_ptr_nonnull(strstr(format.err, "expected png, svg or both"));
  g_auto(TestRun) alone = test_offsim("compare", "--plot-format", "png", NULL);
  ck_assert_int_eq(alone.status, 2);
  /* The exports of one run belong to `run`. */
  g_auto(TestRun) trace = test_offsim("compare", "--trace", "x.json", NULL);
  ck_assert_int_eq(trace.status, 2);
}
END_TEST

/* ---- temporaries on a signal --------------------------------------------- */

/* The start time of process `pid` (field 22 of /proc/PID/stat, in clock
 * ticks since boot), telling it from a later process given the same pid;
 * 0 when it is gone.  Its state (field 3) in *state. */
static guint64
process_start(pid_t pid, char *state)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
  g_autofree char *stat = NULL;
  *state = '?';
  if (!g_file_get_contents(path, &stat, NULL, NULL))
    return 0;
  const char *p = strrchr(stat, ')'); /* the command may hold spaces and parentheses */
  if (p == NULL || p[1] != ' ')
    return 0;
  *state = p[2];
  g_auto(GStrv) fields = g_strsplit(p + 2, " ", -1); /* fields[0] is field 3 */
  return g_strv_length(fields) > 19 ? g_ascii_strtoull(fields[19], NULL, 10) : 0;
}

/* Whether the process `pid` that started at `start` still runs after
 * `seconds`: it is gone as soon as it has exited, been reaped, become a
 * zombie (killed as its parent died, it waits for init to reap it, which
 * kill(pid, 0) cannot tell from a live one) or given its pid to a newer
 * process.  The deadline is generous (a loaded machine under ASan may take
 * seconds to deliver and act on the kill); the test waits for the condition
 * itself, not for a fixed time, so a fast machine is not slowed down. */
static gboolean
process_lingers(pid_t pid, guint64 start, double seconds)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)(seconds * G_USEC_PER_SEC);
  for (;;) {
    char state;
    if (kill(pid, 0) != 0 || process_start(pid, &state) != start || state == 'Z' || state == 'X')
      return FALSE;
    if (g_get_monotonic_time() > deadline)
      return TRUE;
    g_usleep(5000);
  }
}

/* Polls until `path` exists or `seconds` have passed. */
static gboolean
wait_for_file(const char *path, double seconds)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)(seconds * G_USEC_PER_SEC);
  while (!g_file_test(path, G_FILE_TEST_EXISTS))
    if (g_get_monotonic_time() > deadline)
      return FALSE;
    else
      g_usleep(5000);
  return TRUE;
}

/* `offsim compare --plot` interrupted while gnuplot runs (a stand-in that
 * says it started and sleeps): the twelve hidden temporaries it draws into
 * are removed, the stand-in is killed, and offsim dies of SIGINT as any
 * program would. */
START_TEST(sigint_during_plot_leaves_no_temporary)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *started = g_build_filename(dir, "gnuplot.pid", NULL);
  /* It sleeps far past the test's deadlines, so that only offsim's kill can end it in time. */
  g_autofree char *body = g_strdup_printf("echo $$ > '%s.new' && mv '%s.new' '%s'\nexec sleep 600", started, started,
                                          started);
  g_autofree char *bin = fake_gnuplot(dir, body);
  g_autofree char *path = g_strdup_printf("PATH=%s:%s", bin, g_getenv("PATH"));
  g_autofree char *plots = g_build_filename(dir, "plots", NULL);
  char *argv[] = { (char *)OFFSIM_BINARY, (char *)"compare", (char *)TINY, (char *)"--plot", plots, NULL };
  char *envp[] = { path, (char *)"LC_ALL=C", NULL };
  GPid pid;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(g_spawn_async(NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                              &pid, &error), "%s", error ? error->message : "");
  ck_assert_msg(wait_for_file(started, 120), "the stand-in gnuplot never started");
  g_autofree char *text = read_text(started);
  pid_t gnuplot = (pid_t)atoi(text);
  char state;
  guint64 gnuplot_start = process_start(gnuplot, &state);
  ck_assert_msg(gnuplot_start != 0, "no /proc entry for the stand-in gnuplot %d", (int)gnuplot);
  g_autofree char *during = list_dir(plots);
  ck_assert_uint_eq(count(during, ","), 11); /* 6 charts x 2 formats, all hidden */
  ck_assert_int_eq(kill(pid, SIGINT), 0);
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  g_spawn_close_pid(pid);
  /* offsim kills gnuplot before it dies; how soon that shows depends on the machine. */
  gboolean gnuplot_alive = process_lingers(gnuplot, gnuplot_start, 60);
  if (gnuplot_alive)
    kill(gnuplot, SIGKILL);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT, "offsim did not die of SIGINT (status %d)", status);
  g_autofree char *after = list_dir(plots);
  ck_assert_str_eq(after, "");
  ck_assert_msg(!gnuplot_alive, "gnuplot is still running");
}
END_TEST

/* A program's handler over the registry (the library installs none; offsim's
 * is cli/signals.c): clean up, then die of the signal. */
static void
temp_child_on_signal(int sig)
{
  sim_output_temp_cleanup();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* The registry itself, in a child process (this test binary run again,
 * see main): with a handler that calls sim_output_temp_cleanup, a
 * registered temporary goes on SIGTERM and one forgotten after its rename
 * stays; without one (the signal ignored), nothing is removed. */
static int
temp_child(const char *dir, const char *mode)
{
  if (strcmp(mode, "term") == 0)
    signal(SIGTERM, temp_child_on_signal);
  g_autofree char *kept_path = g_build_filename(dir, "kept.txt", NULL);
  g_autofree char *live_path = g_build_filename(dir, "live.txt", NULL);
  if (strcmp(mode, "ignored") == 0)
    signal(SIGINT, SIG_IGN);
  char *kept = NULL, *live = NULL;
  int a = sim_output_temp_open(kept_path, 0644, &kept), b = sim_output_temp_open(live_path, 0644, &live);
  if (a < 0 || b < 0 || write(a, "kept\n", 5) != 5 || write(b, "half", 4) != 4)
    return 10;
  close(a);
  close(b);
  if (g_rename(kept, kept_path) != 0)
    return 11;
  sim_output_temp_forget(kept);
  g_autoptr(GError) error = NULL;
  g_autofree char *saved_path = g_build_filename(dir, "saved.txt", NULL);
  if (!sim_output_save("--test", saved_path, "saved\n", 6, &error))
    return 12;
  raise(strcmp(mode, "ignored") == 0 ? SIGINT : SIGTERM);
  return 0; /* only when the signal is ignored */
}

START_TEST(signals_remove_registered_temporaries)
{
  const char *modes[] = { "term", "ignored" };
  for (guint m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autofree char *dir = test_tmp_dir_new();
    char *argv[] = { (char *)"/proc/self/exe", (char *)"--temp-child", dir, (char *)modes[m], NULL };
    int status = 0;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, &status, &error), "%s",
                  error ? error->message : "");
    g_autofree char *files = list_dir(dir);
    if (m == 0) {
      ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %d", status);
      ck_assert_str_eq(files, "kept.txt,saved.txt");
    } else {
      ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
      ck_assert_msg(g_str_has_prefix(files, ".live.txt.") && g_str_has_suffix(files, ",kept.txt,saved.txt"), "%s",
                    files);
    }
  }
}
END_TEST

/* ---- the trace ---------------------------------------------------------- */

START_TEST(trace_has_every_op_once_and_the_ledger)
{
  g_autoptr(SimResult) r = tiny("async");
  g_free(r->scenario);
  r->scenario = g_strdup("quote \" backslash \\ newline \n tab \t control \x01 end");
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = g_build_filename(dir, "trace.json", NULL);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(export_chrome_trace_write(r, "--trace", path, &error), "%s", error ? error->message : "");

  g_autoptr(JsonParser) parser = json_parser_new();
  ck_assert_msg(json_parser_load_from_file(parser, path, &error), "invalid JSON: %s", error ? error->message : "");
  JsonObject *root = json_node_get_object(json_parser_get_root(parser));
  ck_assert_str_eq(json_object_get_string_member(json_object_get_object_member(root, "otherData"), "scenario"),
                   r->scenario);
  JsonArray *events = json_object_get_array_member(root, "traceEvents");
  g_autoptr(ExportSpans) spans = export_spans_new(r, NULL);
  guint n_ops = sim_program_n_ops(r->program);
  g_autofree guint *seen = g_new0(guint, n_ops);
  g_autoptr(GHashTable) threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  g_autoptr(GHashTable) processes = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  guint device_points = 0, host_points = 0;

  for (guint i = 0; i < json_array_get_length(events); i++) {
    JsonObject *e = json_array_get_object_element(events, i);
    const char *ph = json_object_get_string_member(e, "ph");
    gint64 pid = json_object_get_int_member(e, "pid");
    JsonObject *args = json_object_get_object_member(e, "args");
    if (strcmp(ph, "M") == 0) {
      const char *what = json_object_get_string_member(e, "name");
      if (strcmp(what, "thread_name") == 0)
        g_hash_table_insert(threads, GINT_TO_POINTER(json_object_get_int_member(e, "tid")),
                            g_strdup(json_object_get_string_member(args, "name")));
      else if (strcmp(what, "process_name") == 0)
        g_hash_table_insert(processes, GINT_TO_POINTER(pid), g_strdup(json_object_get_string_member(args, "name")));
    } else if (strcmp(ph, "X") == 0) {
      gint64 op = json_object_get_int_member(args, "op");
      ck_assert(op >= 0 && op < n_ops);
      seen[op]++;
      const ExportSpan *s = &g_array_index(spans->spans, ExportSpan, op);
      ck_assert_close(json_object_get_double_member(e, "ts"), s->start * 1e6, 1e-6);
      ck_assert_close(json_object_get_double_member(e, "dur"), (s->end - s->start) * 1e6, 1e-6);
      ck_assert_int_eq(pid, 1);
      const SimOp *sim_op = sim_program_op(r->program, (guint32)op);
      ck_assert_int_eq(json_object_get_int_member(args, "bytes"), sim_op->kind == SIM_OP_COPY ? (gint64)sim_op->bytes : 0);
      ck_assert_str_eq(json_object_get_string_member(args, "phase"), sim_phase_name(sim_op->phase));
      const SimStream *stream = g_ptr_array_index(r->program->streams, sim_op->stream);
      ck_assert_str_eq(json_object_get_string_member(args, "stream"), stream->name);
      const char *thread = g_hash_table_lookup(threads, GINT_TO_POINTER(json_object_get_int_member(e, "tid")));
      ck_assert_msg(thread && strcmp(thread, stream->name) == 0, "op %" G_GINT64_FORMAT " on the wrong thread", op);
      if (sim_op->kind == SIM_OP_COMPUTE || sim_op->kind == SIM_OP_COPY) {
        JsonNode *layer = json_object_get_member(args, "layer"); /* null: no layer (the optimizer step) */
        ck_assert_int_eq(JSON_NODE_HOLDS_NULL(layer) ? SIM_NO_LAYER : json_node_get_int(layer), sim_op->layer);
      }
    } else if (strcmp(ph, "C") == 0) {
      const SimMemPoint *pt;
      gint64 bytes = json_object_get_int_member(args, "bytes");
      if (strcmp(json_object_get_string_member(e, "name"), "device memory") == 0) {
        ck_assert_uint_lt(device_points, r->run->curve->len);
        pt = &g_array_index(r->run->curve, SimMemPoint, device_points++);
        ck_assert_int_eq(bytes, pt->device);
        ck_assert_int_eq(pid, 1);
      } else {
        ck_assert_str_eq(json_object_get_string_member(e, "name"), "host pinned memory");
        ck_assert_uint_lt(host_points, r->run->curve->len);
        pt = &g_array_index(r->run->curve, SimMemPoint, host_points++);
        ck_assert_int_eq(bytes, pt->host);
        ck_assert_int_eq(pid, 2);
      }
      ck_assert_close(json_object_get_double_member(e, "ts"), pt->time * 1e6, 1e-6);
    } else {
      ck_abort_msg("unexpected event phase %s", ph);
    }
  }
  for (guint i = 0; i < n_ops; i++)
    ck_assert_msg(seen[i] == 1, "op %u appears %u times", i, seen[i]);
  ck_assert_uint_eq(device_points, r->run->curve->len);
  ck_assert_uint_eq(host_points, r->run->curve->len);
  ck_assert_uint_eq(g_hash_table_size(threads), 3);
  ck_assert_str_eq(g_hash_table_lookup(processes, GINT_TO_POINTER(2)), "host");
  ck_assert(g_str_has_prefix(g_hash_table_lookup(processes, GINT_TO_POINTER(1)), "device: async, quote \""));
}
END_TEST

/* ---- the CSVs ----------------------------------------------------------- */

START_TEST(csvs_agree_with_the_json_result)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_auto(TestRun) r = test_offsim_in(dir, "run", TINY, "--policy", "async", "--format", "json", "--timeline",
                                     "timeline.csv", "--memory", "memory.csv", "--trace", "trace.json", NULL);
  ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
  g_autoptr(JsonParser) parser = json_parser_new();
  ck_assert(json_parser_load_from_data(parser, r.out, -1, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(parser));
  double step_ms = json_object_get_double_member(o, "step_ms");
  gint64 peak_device = json_object_get_int_member(o, "peak_device_bytes");
  gint64 peak_host = json_object_get_int_member(o, "peak_host_bytes");
  ck_assert(peak_host > 0);

  g_autofree char *timeline_path = g_build_filename(dir, "timeline.csv", NULL);
  g_autofree char *timeline = read_text(timeline_path);
  g_auto(GStrv) rows = g_strsplit(timeline, "\n", -1);
  ck_assert_str_eq(rows[0], "stream,op,layer,phase,start_ms,end_ms,bytes");
  double last_end = 0, first_start = G_MAXDOUBLE;
  guint64 d2h = 0;
  guint n = 0;
  for (char **row = rows + 1; *row && **row; row++, n++) {
    g_auto(GStrv) f = g_strsplit(*row, ",", -1);
    ck_assert_uint_eq(g_strv_length(f), 7);
    double start = g_ascii_strtod(f[4], NULL), end = g_ascii_strtod(f[5], NULL);
    ck_assert(end >= start);
    first_start = MIN(first_start, start);
    last_end = MAX(last_end, end);
    if (strcmp(f[0], "d2h") == 0 && strcmp(f[3], "offload") == 0)
      d2h += g_ascii_strtoull(f[6], NULL, 10);
  }
  ck_assert_uint_gt(n, 10);
  ck_assert(first_start == 0);
  ck_assert_close(last_end, step_ms, 1e-9 * step_ms);
  ck_assert_int_eq((gint64)d2h, json_object_get_int_member(o, "d2h_bytes"));

  g_autofree char *memory_path = g_build_filename(dir, "memory.csv", NULL);
  g_autofree char *memory = read_text(memory_path);
  g_auto(GStrv) points = g_strsplit(memory, "\n", -1);
  ck_assert_str_eq(points[0], "time_ms,device_bytes,host_bytes");
  gint64 max_device = 0, max_host = 0;
  double previous = 0;
  for (char **row = points + 1; *row && **row; row++) {
    g_auto(GStrv) f = g_strsplit(*row, ",", -1);
    ck_assert_uint_eq(g_strv_length(f), 3);
    double t = g_ascii_strtod(f[0], NULL);
    ck_assert(t >= previous);
    previous = t;
    max_device = MAX(max_device, g_ascii_strtoll(f[1], NULL, 10));
    max_host = MAX(max_host, g_ascii_strtoll(f[2], NULL, 10));
  }
  ck_assert_int_eq(max_device, peak_device);
  ck_assert_int_eq(max_host, peak_host);
  ck_assert(previous <= step_ms);

  /* The trace is valid JSON too, and its counter peaks the same. */
  g_autofree char *trace_path = g_build_filename(dir, "trace.json", NULL);
  g_autoptr(JsonParser) trace = json_parser_new();
  ck_assert(json_parser_load_from_file(trace, trace_path, NULL));
}
END_TEST

/* ---- several GPUs ------------------------------------------------------- */

/* A row per stream of every stage, labelled by name, in program order; a
 * line between stages; sends and waits on another stage of their own kind;
 * the forward/backward line only on the stage whose forwards all come
 * first. */
START_TEST(pipeline_timeline_has_a_row_per_stream_of_every_stage)
{
  g_autoptr(SimScenario) s = pipeline("1f1b");
  g_autoptr(SimResult) r = test_evaluate(s, "offload");
  ck_assert_uint_eq(r->program->n_gpus, 4);
  g_autoptr(GError) error = NULL;
  g_autoptr(PlotsChart) chart = plots_timeline_chart(r, "timeline-offload", 0, &error);
  ck_assert_msg(chart != NULL, "%s", error ? error->message : "?");
  const char *c = chart->commands->str;

  g_autoptr(GString) tics = g_string_new("set ytics scale 0 (");
  for (guint stage = 0; stage < 4; stage++)
    for (guint k = 0; k < 4; k++)
      g_string_append_printf(tics, "%s'stage %u %s' %u", stage || k ? ", " : "", stage, pipeline_kinds[k],
                             15 - (4 * stage + k));
  g_string_append(tics, ")\n");
  ck_assert_msg(strstr(c, tics->str), "%s missing in:\n%s", tics->str, c);
  ck_assert_msg(strstr(c, "set lmargin 17\n"), "'stage 0 compute' does not fit the margin:\n%s", c);
  /* Sixteen rows of 70 px would be 1,250 px high: they are shorter, not
   * thinner than a label. */
  ck_assert_uint_lt(chart->height, 130 + 70 * 16);
  ck_assert_uint_ge(chart->height, 130 + 24 * 16);
  ck_assert_uint_eq(count(c, "nohead lw 1 lc rgb '#aaaaaa'"), 3);
  ck_assert_ptr_nonnull(strstr(c, " on 4 GPUs: step "));
  ck_assert_ptr_nonnull(strstr(c, "exposed transfer and bubble"));

  /* Stage 0 runs its four forwards before any backward (1F1B's warm-up is
   * pp - 1 = 3 of 4 micro-batches); the others interleave them. */
  ck_assert_ptr_null(strstr(c, "set arrow 1 from"));
  ck_assert_uint_eq(count(c, "nohead dt 2 lw 2"), 1);
  g_autoptr(ExportSpans) spans = export_spans_new(r, NULL);
  char x[G_ASCII_DTOSTR_BUF_SIZE];
  plots_gnuplot_number(x, g_array_index(spans->boundaries, double, 0) * 1e3);
  g_autofree char *stage0 = g_strdup_printf("set arrow from %s, first 15.5 to %s, first 11.5 nohead dt 2", x, x);
  ck_assert_msg(strstr(c, stage0), "%s missing in:\n%s", stage0, c);
  for (guint g = 1; g < 4; g++)
    ck_assert(g_array_index(spans->boundaries, double, g) < 0);
  ck_assert_ptr_nonnull(strstr(c, "title 'forward | backward'"));

  /* Every box sits on a row of its kind: sends on p2p rows only, copies on
   * their own, and no wait drawn off the compute rows. */
  const char *kind_terms[] = { "title 'p2p send'", "title 'wait on a stage'", "title 'wait'" };
  for (guint i = 0; i < G_N_ELEMENTS(kind_terms); i++)
    ck_assert_msg(strstr(c, kind_terms[i]), "%s missing in:\n%s", kind_terms[i], c);
  guint per_row[16][EXPORT_SPAN_COUNT] = { { 0 } };
  g_auto(GStrv) rows = g_strsplit(chart->data->str, "\n", -1);
  ck_assert_str_eq(rows[0], "$spans << EOD");
  for (char **row = rows + 1; *row && strcmp(*row, "EOD") != 0; row++) {
    double v[4];
    ck_assert_int_eq(sscanf(*row, "%lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3]), 4);
    ck_assert(v[2] >= 0 && v[2] <= 15 && v[3] >= 0 && v[3] < EXPORT_SPAN_COUNT);
    per_row[15 - (guint)v[2]][(guint)v[3]]++;
  }
  for (guint stage = 0; stage < 4; stage++) {
    const guint *compute = per_row[4 * stage], *d2h = per_row[4 * stage + 1], *h2d = per_row[4 * stage + 2],
                *p2p = per_row[4 * stage + 3];
    ck_assert_uint_eq(compute[EXPORT_SPAN_FORWARD], 4 * 2);  /* 4 micro-batches × 2 layers */
    ck_assert_uint_eq(compute[EXPORT_SPAN_BACKWARD], 4 * 2); /* the optimizer step takes no time */
    ck_assert_uint_eq(compute[EXPORT_SPAN_SEND] + compute[EXPORT_SPAN_OFFLOAD], 0);
    ck_assert_uint_eq(d2h[EXPORT_SPAN_OFFLOAD], 4 * 2);
    ck_assert_uint_eq(h2d[EXPORT_SPAN_RELOAD], 4 * 2);
    /* One send per micro-batch each way, the last stage's activations and
     * the first stage's gradients excepted. */
    ck_assert_uint_eq(p2p[EXPORT_SPAN_SEND], stage == 0 || stage == 3 ? 4u : 8u);
    guint on_p2p = 0, on_copies = 0;
    for (guint k = 0; k < EXPORT_SPAN_COUNT; k++) {
      on_p2p += k == EXPORT_SPAN_SEND ? 0 : p2p[k];
      on_copies += (k == EXPORT_SPAN_OFFLOAD ? 0 : d2h[k]) + (k == EXPORT_SPAN_RELOAD ? 0 : h2d[k]);
    }
    ck_assert_uint_eq(on_p2p, 0);
    ck_assert_uint_eq(on_copies, 0);
    /* Every stage but the first starts by waiting for an activation. */
    if (stage > 0)
      ck_assert_uint_gt(compute[EXPORT_SPAN_PEER_WAIT], 0);
  }
  /* A wait on a stage is one another GPU ends: its event's recorder is on
   * a neighbour's p2p stream. */
  guint peer_waits = 0;
  for (guint i = 0; i < spans->spans->len; i++) {
    const ExportSpan *span = &g_array_index(spans->spans, ExportSpan, i);
    const SimOp *op = sim_program_op(r->program, span->op);
    if (op->kind == SIM_OP_SEND)
      ck_assert_uint_eq(span->kind, EXPORT_SPAN_SEND);
    if (span->kind != EXPORT_SPAN_PEER_WAIT)
      continue;
    peer_waits++;
    const SimOp *recorder = sim_program_op(r->program, sim_program_event(r->program, op->event)->recorder);
    ck_assert_uint_ne(recorder->gpu, op->gpu);
    ck_assert_uint_eq(recorder->gpu + 1 == op->gpu || op->gpu + 1 == recorder->gpu, TRUE);
    const SimStream *from = g_ptr_array_index(r->program->streams, recorder->stream);
    ck_assert(g_str_has_suffix(from->name, " p2p"));
  }
  ck_assert_uint_gt(peer_waits, 0);

  /* GPipe: every stage's forwards come first, a line each across its rows. */
  g_autoptr(SimScenario) gpipe = pipeline("gpipe");
  g_autoptr(SimResult) g = test_evaluate(gpipe, "resident");
  g_autoptr(PlotsChart) g_chart = plots_timeline_chart(g, "timeline-resident", 0, NULL);
  ck_assert_uint_eq(count(g_chart->commands->str, "nohead dt 2 lw 2"), 4);
  g_auto(GStrv) lines = g_strsplit(g_chart->commands->str, "\n", -1);
  for (guint stage = 0; stage < 4; stage++) {
    g_autofree char *top = g_strdup_printf(", first %u.5 to ", 15 - 4 * stage);
    g_autofree char *bottom = g_strdup_printf(", first %g nohead dt 2 ", 11.5 - 4.0 * stage);
    guint over = 0;
    for (char **l = lines; *l; l++)
      over += strstr(*l, top) && strstr(*l, bottom);
    ck_assert_msg(over == 1, "no line over stage %u's rows alone", stage);
  }
  /* Resident copies nothing: its compute waits are all on a stage. */
  ck_assert_ptr_null(strstr(g_chart->commands->str, "title 'wait'"));
  ck_assert_ptr_nonnull(strstr(g_chart->commands->str, "title 'wait on a stage'"));
}
END_TEST

/* A process per GPU, named by stage, with that GPU's streams as threads,
 * its ops, and counters that follow its own memory to its own peaks. */
START_TEST(pipeline_trace_has_a_process_per_gpu)
{
  g_autoptr(SimScenario) s = pipeline("1f1b");
  g_autoptr(SimResult) r = test_evaluate(s, "offload");
  const SimProgram *p = r->program;
  /* The stages' peaks differ, so a counter that followed another GPU's
   * points, or every GPU's, would not reach its own. */
  ck_assert_int_gt(pool_peak(r, 0, SIM_POOL_DEVICE), pool_peak(r, 3, SIM_POOL_DEVICE));
  ck_assert_int_gt(pool_peak(r, 0, SIM_POOL_HOST), pool_peak(r, 3, SIM_POOL_HOST));
  g_autoptr(JsonNode) trace = export_chrome_trace_build(r, NULL);
  JsonObject *root = json_node_get_object(trace);
  ck_assert_int_eq(json_object_get_int_member(json_object_get_object_member(root, "otherData"), "gpus"), 4);
  JsonArray *events = json_object_get_array_member(root, "traceEvents");

  char *process[5] = { NULL }; /* by pid, from 1 */
  g_autoptr(GHashTable) thread_pid = g_hash_table_new(g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) thread_name = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  gint64 device_max[4] = { 0 }, host_max[4] = { 0 };
  guint points[4] = { 0 }, slices = 0;
  for (guint i = 0; i < json_array_get_length(events); i++) {
    JsonObject *e = json_array_get_object_element(events, i);
    const char *ph = json_object_get_string_member(e, "ph"), *name = json_object_get_string_member(e, "name");
    gint64 pid = json_object_get_int_member(e, "pid"), tid = json_object_get_int_member(e, "tid");
    JsonObject *args = json_object_get_object_member(e, "args");
    ck_assert_msg(pid >= 1 && pid <= 4, "pid %" G_GINT64_FORMAT, pid);
    if (strcmp(ph, "M") == 0 && strcmp(name, "process_name") == 0) {
      ck_assert_ptr_null(process[pid]);
      process[pid] = g_strdup(json_object_get_string_member(args, "name"));
    } else if (strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0) {
      ck_assert(!g_hash_table_contains(thread_pid, GINT_TO_POINTER(tid))); /* unique across processes */
      g_hash_table_insert(thread_pid, GINT_TO_POINTER(tid), GINT_TO_POINTER(pid));
      g_hash_table_insert(thread_name, GINT_TO_POINTER(tid), g_strdup(json_object_get_string_member(args, "name")));
    } else if (strcmp(ph, "X") == 0) {
      const SimOp *op = sim_program_op(p, (guint32)json_object_get_int_member(args, "op"));
      const SimStream *stream = g_ptr_array_index(p->streams, op->stream);
      ck_assert_int_eq(pid, op->gpu + 1);
      ck_assert_int_eq(GPOINTER_TO_INT(g_hash_table_lookup(thread_pid, GINT_TO_POINTER(tid))), pid);
      ck_assert_str_eq(g_hash_table_lookup(thread_name, GINT_TO_POINTER(tid)), stream->name);
      if (op->kind == SIM_OP_SEND)
        ck_assert_str_eq(json_object_get_string_member(e, "cat"), "p2p send");
      slices++;
    } else if (strcmp(ph, "C") == 0) {
      gint64 bytes = json_object_get_int_member(args, "bytes");
      if (strcmp(name, "device memory") == 0) {
        device_max[pid - 1] = MAX(device_max[pid - 1], bytes);
        points[pid - 1]++;
      } else {
        ck_assert_str_eq(name, "host pinned memory");
        host_max[pid - 1] = MAX(host_max[pid - 1], bytes);
      }
    }
  }
  ck_assert_uint_eq(slices, sim_program_n_ops(p));
  ck_assert_uint_eq(g_hash_table_size(thread_pid), 16);
  for (guint g = 0; g < 4; g++) {
    g_autofree char *stage = g_strdup_printf("stage %u", g);
    ck_assert_str_eq(process[g + 1], stage);
    /* Its threads are its four streams, and only they. */
    guint threads = 0;
    GHashTableIter it;
    gpointer tid, pid;
    g_hash_table_iter_init(&it, thread_pid);
    while (g_hash_table_iter_next(&it, &tid, &pid)) {
      if (GPOINTER_TO_INT(pid) != (int)g + 1)
        continue;
      const char *name = g_hash_table_lookup(thread_name, tid);
      ck_assert_msg(g_str_has_prefix(name, stage) && name[strlen(stage)] == ' ', "%s in process %u", name, g + 1);
      threads++;
    }
    ck_assert_uint_eq(threads, 4);
    ck_assert_int_eq(device_max[g], pool_peak(r, g, SIM_POOL_DEVICE));
    ck_assert_int_eq(host_max[g], pool_peak(r, g, SIM_POOL_HOST));
    guint own = 0;
    for (guint k = 0; k < r->run->curve->len; k++)
      own += g_array_index(r->run->curve, SimMemPoint, k).gpu == g;
    ck_assert_uint_eq(points[g], own);
  }
  for (guint i = 0; i < G_N_ELEMENTS(process); i++)
    g_free(process[i]);
}
END_TEST

/* time_ms,gpu,device_bytes,host_bytes: every GPU from 0, its maxima its
 * peaks; the chart draws each GPU's own curve and peak. */
START_TEST(pipeline_memory_follows_each_gpu)
{
  g_autoptr(SimScenario) s = pipeline("1f1b");
  g_autoptr(SimResult) r = test_evaluate(s, "offload");
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = g_build_filename(dir, "memory.csv", NULL);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(export_memory_csv_write(r, "--memory", path, &error), "%s", error ? error->message : "");
  g_autofree char *text = read_text(path);
  g_auto(GStrv) rows = g_strsplit(text, "\n", -1);
  ck_assert_str_eq(rows[0], "time_ms,gpu,device_bytes,host_bytes");
  gint64 device_max[4], host_max[4];
  gboolean seen[4] = { FALSE };
  double previous = 0;
  guint n = 0;
  for (char **row = rows + 1; *row && **row; row++, n++) {
    g_auto(GStrv) f = g_strsplit(*row, ",", -1);
    ck_assert_uint_eq(g_strv_length(f), 4);
    double t = g_ascii_strtod(f[0], NULL);
    guint g = (guint)g_ascii_strtoull(f[1], NULL, 10);
    ck_assert_uint_lt(g, 4);
    ck_assert(t >= previous);
    previous = t;
    gint64 device = g_ascii_strtoll(f[2], NULL, 10), host = g_ascii_strtoll(f[3], NULL, 10);
    if (!seen[g]) {
      ck_assert(t == 0); /* each GPU's first row is its baseline */
      device_max[g] = device;
      host_max[g] = host;
      seen[g] = TRUE;
    }
    device_max[g] = MAX(device_max[g], device);
    host_max[g] = MAX(host_max[g], host);
  }
  ck_assert_uint_eq(n, r->run->curve->len);
  for (guint g = 0; g < 4; g++) {
    ck_assert(seen[g]);
    ck_assert_int_eq(device_max[g], pool_peak(r, g, SIM_POOL_DEVICE));
    ck_assert_int_eq(host_max[g], pool_peak(r, g, SIM_POOL_HOST));
  }
  ck_assert_int_lt(device_max[3], device_max[0]); /* not every GPU the worst one */

  /* The chart: a block per GPU holding only its points (and the hold to
   * the end of the step), a curve titled by stage, a dot at each peak. */
  g_autoptr(GPtrArray) one = g_ptr_array_new();
  g_ptr_array_add(one, r);
  g_autoptr(PlotsChart) chart = plots_memory_chart(one, s->machine.device.memory, "memory", &error);
  ck_assert_ptr_nonnull(chart);
  const char *c = chart->commands->str, *data = chart->data->str;
  ck_assert_ptr_null(strstr(data, "$memory0 <<"));
  for (guint g = 0; g < 4; g++) {
    g_autofree char *block = g_strdup_printf("$memory0_%u << EOD\n", g);
    const char *at = strstr(data, block);
    ck_assert_msg(at != NULL, "%s missing", block);
    guint lines = 0;
    for (const char *q = at + strlen(block); !g_str_has_prefix(q, "EOD\n"); q = strchr(q, '\n') + 1)
      lines++;
    guint own = 0;
    for (guint k = 0; k < r->run->curve->len; k++)
      own += g_array_index(r->run->curve, SimMemPoint, k).gpu == g;
    ck_assert_uint_eq(lines, own + 1);
    g_autofree char *curve = g_strdup_printf("$memory0_%u using 1:2 with steps lt %u dt 1 title 'stage %u'", g, g + 1, g);
    ck_assert_msg(strstr(c, curve), "%s missing in:\n%s", curve, c);
    g_autofree char *host = g_strdup_printf("$memory0_%u using 1:3 with steps lt %u dt 1 notitle", g, g + 1);
    ck_assert_msg(strstr(c, host), "%s missing in:\n%s", host, c);
    const SimPeak *peak = &g_array_index(r->run->pools, SimPeak, SIM_POOL_INDEX(g, SIM_POOL_DEVICE));
    char t[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE];
    g_autofree char *dot = g_strdup_printf("\n%s %s %u\n", plots_gnuplot_number(t, peak->time * 1e3),
                                           plots_gnuplot_number(b, peak->bytes / (1024.0 * 1024.0 * 1024.0)), g + 1);
    ck_assert_msg(strstr(strstr(data, "$peaks << EOD"), dot), "peak of GPU %u missing", g);
  }
  g_autofree char *size0 = sim_units_format_size((guint64)device_max[0]);
  g_autofree char *peaks = g_strdup_printf("'    device peak of each GPU: stage 0 %s, stage 1 ", size0);
  ck_assert_msg(strstr(c, peaks), "%s missing in:\n%s", peaks, c);

  /* Two policies: each its colour, a dash per GPU. */
  g_autoptr(SimResult) resident = test_evaluate(s, "resident");
  g_autoptr(GPtrArray) two = g_ptr_array_new();
  g_ptr_array_add(two, resident);
  g_ptr_array_add(two, r);
  g_autoptr(PlotsChart) both = plots_memory_chart(two, s->machine.device.memory, "memory", NULL);
  ck_assert_ptr_nonnull(strstr(both->commands->str, "$memory1_2 using 1:2 with steps lt 2 dt 3 title 'offload, stage 2'"));
  ck_assert_ptr_nonnull(strstr(both->commands->str, "$memory0_3 using 1:2 with steps lt 1 dt 4 title 'resident, stage 3'"));

  /* The comparison says whose peak and what the third bar holds. */
  g_autoptr(PlotsChart) cmp = plots_comparison_chart(two, s->machine.device.memory, "comparison");
  ck_assert_ptr_nonnull(strstr(cmp->commands->str, "'peak device memory of the fullest GPU (GiB)"));
  ck_assert_ptr_nonnull(strstr(cmp->commands->str, "title 'exposed transfer and bubble'"));
  g_autoptr(GPtrArray) single = uniform(2);
  g_autoptr(PlotsChart) single_cmp = plots_comparison_chart(single, 80ull << 30, "comparison");
  ck_assert_ptr_null(strstr(single_cmp->commands->str, "fullest"));
  ck_assert_ptr_nonnull(strstr(single_cmp->commands->str, "title 'exposed transfer', "));
}
END_TEST

/* The README's pipeline, as a user runs it: every picture drawn, every
 * export written, the sends in the timeline CSV. */
START_TEST(pipeline_scenario_draws_and_exports)
{
  g_autofree char *dir = test_tmp_dir_new();
  const char *ini = OFFSIM_SCENARIOS "/pipeline-tiny.ini";
  g_auto(TestRun) run = test_offsim_in(dir, "run", ini, "--policy", "offload", "--timeline", "timeline.csv",
                                       "--memory", "memory.csv", "--trace", "trace.json", NULL);
  ck_assert_msg(run.status == 0, "exit %d: %s", run.status, run.err);
  g_autofree char *timeline_path = g_build_filename(dir, "timeline.csv", NULL);
  g_autofree char *timeline = read_text(timeline_path);
  ck_assert_uint_eq(count(timeline, "\nstage 3 p2p,send gradient,"), 8);
  ck_assert_uint_eq(count(timeline, "\nstage 0 p2p,send activation,"), 8);
  ck_assert_uint_eq(count(timeline, ",send,"), 3 * 2 * 8);
  g_autofree char *memory_path = g_build_filename(dir, "memory.csv", NULL);
  g_autofree char *memory = read_text(memory_path);
  ck_assert(g_str_has_prefix(memory, "time_ms,gpu,device_bytes,host_bytes\n0,0,0,0\n"));

  g_autofree char *plots = g_build_filename(dir, "plots", NULL);
  g_auto(TestRun) r = test_offsim("compare", ini, "--plot", plots, "--plot-format", "png", NULL);
  ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
  g_autofree char *files = list_dir(plots);
  ck_assert_str_eq(files, "comparison.png,memory.png,timeline-checkpoint.png,timeline-offload.png,timeline-resident.png");
  const char *pngs[] = { "comparison", "memory", "timeline-offload", "timeline-resident" };
  for (guint i = 0; i < G_N_ELEMENTS(pngs); i++) {
    g_autofree char *png = g_strdup_printf("%s/%s.png", plots, pngs[i]);
    assert_png(png);
  }
}
END_TEST

/* A pipeline runs each layer once per micro-batch: the timeline CSV's
 * `microbatch` column and the trace's `microbatch` arg (and slice name) tell
 * the eight "forward, layer 0" of stage 0 apart; ops at the step's end (the
 * optimizer, a replica's reductions) belong to none.  A single GPU's
 * exports keep their columns. */
START_TEST(pipeline_exports_name_the_microbatch)
{
  g_autofree char *dir = test_tmp_dir_new();
  const char *ini = OFFSIM_SCENARIOS "/pipeline-tiny.ini";
  g_auto(TestRun) run = test_offsim_in(dir, "run", ini, "--policy", "offload", "--timeline", "timeline.csv",
                                       "--trace", "trace.json", NULL);
  ck_assert_msg(run.status == 0, "exit %d: %s", run.status, run.err);
  g_autofree char *timeline_path = g_build_filename(dir, "timeline.csv", NULL);
  g_autofree char *timeline = read_text(timeline_path);
  ck_assert(g_str_has_prefix(timeline, "stream,op,layer,microbatch,phase,start_ms,end_ms,bytes\n"));
  for (guint mb = 0; mb < 8; mb++) {
    g_autofree char *forward = g_strdup_printf("\nstage 0 compute,forward,0,%u,forward,", mb);
    g_autofree char *backward = g_strdup_printf("\nstage 3 compute,backward,7,%u,backward,", mb);
    ck_assert_msg(count(timeline, forward) == 1 && count(timeline, backward) == 1, "micro-batch %u", mb);
  }
  ck_assert_uint_eq(count(timeline, "\nstage 0 compute,forward,0,"), 8);
  g_autofree char *trace_path = g_build_filename(dir, "trace.json", NULL);
  g_autofree char *trace = read_text(trace_path);
  ck_assert_uint_eq(count(trace, "\"name\":\"forward L0 mb "), 8);
  ck_assert_ptr_nonnull(strstr(trace, "\"name\":\"forward L0 mb 7\""));
  ck_assert_ptr_nonnull(strstr(trace, "\"microbatch\":7"));

  g_auto(TestRun) one = test_offsim_in(dir, "run", TINY, "--timeline", "one.csv", "--trace", "one.json", NULL);
  ck_assert_msg(one.status == 0, "%s", one.err);
  g_autofree char *one_path = g_build_filename(dir, "one.csv", NULL);
  g_autofree char *one_csv = read_text(one_path);
  ck_assert(g_str_has_prefix(one_csv, "stream,op,layer,phase,start_ms,end_ms,bytes\n"));
  g_autofree char *one_json_path = g_build_filename(dir, "one.json", NULL);
  g_autofree char *one_json = read_text(one_json_path);
  ck_assert_ptr_null(strstr(one_json, "microbatch"));

  /* Through the library: every op of an item is its micro-batch's, the optimizer's none. */
  g_autoptr(SimScenario) s = pipeline("1f1b");
  g_autoptr(SimResult) r = test_evaluate(s, "offload");
  const SimProgram *p = r->program;
  ck_assert(sim_program_has_microbatches(p));
  guint counted[4] = { 0 };
  for (guint32 i = 0; i < p->n_ops; i++) {
    const SimOp *op = sim_program_op(p, i);
    gint32 mb = sim_program_op_microbatch(p, i);
    ck_assert_int_lt(mb, 4);
    if (op->kind == SIM_OP_COMPUTE && op->phase == SIM_PHASE_FORWARD && op->layer == 0) {
      ck_assert_int_ge(mb, 0);
      counted[mb]++;
    }
  }
  for (guint mb = 0; mb < 4; mb++)
    ck_assert_uint_eq(counted[mb], 1);
}
END_TEST

/* Which GPUs a picture draws: all up to the limit, then replica 0 of each
 * stage, then that many stages spread evenly, the first and the last. */
START_TEST(pictures_pick_their_gpus)
{
  gboolean drawn[256];
  char *note = NULL;
  ck_assert_uint_eq(export_spans_pick_gpus(8, 4, 16, drawn, &note), 8);
  ck_assert_ptr_null(note);
  for (guint g = 0; g < 8; g++)
    ck_assert(drawn[g]);
  ck_assert_uint_eq(export_spans_pick_gpus(256, 8, 16, drawn, &note), 8);
  ck_assert_str_eq(note, "replica 0 of each of the 8 stages drawn, of 256 GPUs (dp = 32: the replicas of a stage "
                         "run the same step)");
  g_clear_pointer(&note, g_free);
  for (guint g = 0; g < 256; g++)
    ck_assert_msg(drawn[g] == (g % 32 == 0), "GPU %u", g);
  ck_assert_uint_eq(export_spans_pick_gpus(256, 256, 4, drawn, &note), 4);
  ck_assert_str_eq(note, "4 of the 256 stages drawn (0, 85, 170, 255)");
  g_clear_pointer(&note, g_free);
  ck_assert_uint_eq(export_spans_pick_gpus(128, 64, 3, drawn, &note), 3);
  ck_assert_str_eq(note, "3 of the 64 stages drawn (0, 31, 63), replica 0 of each");
  ck_assert(drawn[0] && drawn[62] && drawn[126] && !drawn[1]);
  g_free(note);
}
END_TEST

/* pp 8 x dp 32: the timeline was 1400 x 24,706 pixels (viewers refuse it)
 * and the memory chart had 256 legend entries.  Replica 0 of each stage is
 * drawn, and each picture says so. */
START_TEST(pictures_stay_readable_at_256_gpus)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(
    "[scenario]\nname = big\n[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 10GB/s\nd2h_bandwidth = 10GB/s\n"
    "[model]\nlayers = 16\nforward = 1ms\ninput = 8MiB\ntensors = a:40MiB\n"
    "[parallel]\npp = 8\ndp = 32\nmicrobatches = 8\n[policy.offload]\nkind = offload\nkeep_last = 0\n");
  g_autoptr(SimResult) r = test_evaluate(s, "offload");
  g_autoptr(GError) error = NULL;
  g_autoptr(PlotsChart) timeline = plots_timeline_chart(r, "timeline", 0, &error);
  ck_assert_msg(timeline != NULL, "%s", error ? error->message : "");
  ck_assert_uint_le(timeline->height, 2200);
  const char *t = timeline->commands->str;
  ck_assert_msg(strstr(t, "'stage 7.0 compute'") && !strstr(t, "'stage 7.1 compute'") &&
                  strstr(t, "replica 0 of each of the 8 stages drawn, of 256 GPUs"), "%s", t);
  GPtrArray *results = g_ptr_array_new();
  g_ptr_array_add(results, r);
  g_autoptr(PlotsChart) memory = plots_memory_chart(results, s->machine.device.memory, "memory", &error);
  g_ptr_array_unref(results);
  ck_assert_msg(memory != NULL, "%s", error ? error->message : "");
  const char *m = memory->commands->str;
  ck_assert_uint_eq(count(m, "with steps lt"), 2 * 8); /* device and host curve of each GPU drawn */
  ck_assert_uint_le(memory->height, 1200);
  ck_assert_msg(strstr(m, "replica 0 of each of the 8 stages drawn") && strstr(m, "device peak of each GPU drawn: "),
                "%s", m);
}
END_TEST

/* The trade-off panel's legend sat on its axis label when no bar name was
 * slanted (the pipeline's): a line between them. */
START_TEST(comparison_legend_clears_the_axis_label)
{
  g_autoptr(SimScenario) s = pipeline("1f1b");
  g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  g_ptr_array_add(results, test_evaluate(s, "resident"));
  g_ptr_array_add(results, test_evaluate(s, "offload"));
  g_autoptr(PlotsChart) chart = plots_comparison_chart(results, s->machine.device.memory, "comparison");
  /* Two legend rows (the front and two policies, two a row), the tick labels, the axis label and a gap. */
  ck_assert_msg(strstr(chart->commands->str, "set bmargin 6\n"), "%s", chart->commands->str);
}
END_TEST

/* What needs a real gnuplot, a suite of its own (test_plots --gnuplot,
 * CTest's test_plots_gnuplot): skipped, not passed, where none is
 * installed. */
static Suite *
gnuplot_suite(void)
{
  Suite *s = suite_create("plots_gnuplot");
  TCase *real = tcase_create("gnuplot");
  tcase_set_timeout(real, 240);
  tcase_add_test(real, quoted_strings_reach_gnuplot_as_literal_text);
  tcase_add_test(real, compare_plot_writes_every_picture);
  tcase_add_test(real, renders_at_96_layers);
  tcase_add_test(real, sweep_plot_shows_units_and_held_values);
  tcase_add_test(real, hostile_scenario_name_is_drawn_literally);
  tcase_add_test(real, gnuplot_errors_come_back_and_leave_no_file);
  tcase_add_test(real, large_timeline_svg_stays_small);
  tcase_add_test(real, comparison_budget_charts_render);
  tcase_add_test(real, sweep_renders_png);
  suite_add_tcase(s, real);
  return s;
}

static Suite *
plots_suite(void)
{
  Suite *s = suite_create("plots");
  TCase *quote = tcase_create("quote");
  tcase_add_test(quote, quote_doubles_quotes_and_drops_line_breaks);
  tcase_add_test(quote, file_names_are_neither_paths_nor_hidden);
  suite_add_tcase(s, quote);

  TCase *scripts = tcase_create("scripts");
  tcase_set_timeout(scripts, 60);
  tcase_add_test(scripts, spans_cover_every_op_once);
  tcase_add_test(scripts, overlapping_ops_take_separate_lanes);
  tcase_add_test(scripts, timeline_script_has_lanes_colours_and_quoted_labels);
  tcase_add_test(scripts, labels_do_not_grow_with_layers);
  tcase_add_test(scripts, large_timelines_are_drawn_aggregated);
  tcase_add_test(scripts, memory_chart_marks_capacity_or_budget);
  tcase_add_test(scripts, memory_footer_reads_on_white);
  tcase_add_test(scripts, comparison_marks_the_pareto_front);
  tcase_add_test(scripts, comparison_draws_the_budget_and_rings_what_fits);
  tcase_add_test(scripts, sweep_draws_a_line_per_policy);
  tcase_add_test(scripts, sweep_from_a_grid_reads_in_human_units);
  suite_add_tcase(s, scripts);

  TCase *render = tcase_create("render");
  tcase_set_timeout(render, 240);
  tcase_add_test(render, missing_gnuplot_exits_3_and_still_writes_the_script);
  tcase_add_test(render, failing_gnuplot_exits_3_with_its_first_line);
  tcase_add_test(render, unwritable_paths_exit_2);
  tcase_add_test(render, sigint_during_plot_leaves_no_temporary);
  tcase_add_test(render, signals_remove_registered_temporaries);
  suite_add_tcase(s, render);

  TCase *exports = tcase_create("exports");
  tcase_set_timeout(exports, 60);
  tcase_add_test(exports, trace_has_every_op_once_and_the_ledger);
  tcase_add_test(exports, csvs_agree_with_the_json_result);
  suite_add_tcase(s, exports);

  TCase *gpus = tcase_create("gpus");
  tcase_set_timeout(gpus, 120);
  tcase_add_test(gpus, pipeline_timeline_has_a_row_per_stream_of_every_stage);
  tcase_add_test(gpus, pipeline_trace_has_a_process_per_gpu);
  tcase_add_test(gpus, pipeline_memory_follows_each_gpu);
  tcase_add_test(gpus, pipeline_scenario_draws_and_exports);
  tcase_add_test(gpus, pipeline_exports_name_the_microbatch);
  tcase_add_test(gpus, pictures_pick_their_gpus);
  tcase_add_test(gpus, pictures_stay_readable_at_256_gpus);
  tcase_add_test(gpus, comparison_legend_clears_the_axis_label);
  suite_add_tcase(s, gpus);
  return s;
}

int
main(int argc, char **argv)
{
  if (argc == 4 && strcmp(argv[1], "--temp-child") == 0)
    return temp_child(argv[2], argv[3]);
  if (argc == 2 && strcmp(argv[1], "--gnuplot") == 0) {
    if (!plots_gnuplot_available()) {
      printf("test_plots --gnuplot: skipped: gnuplot is not on PATH\n");
      return 77; /* CTest's skip */
    }
    return test_run_suite(gnuplot_suite());
  }
  return test_run_suite(plots_suite());
}
