/* cli/bench.c — `offsim bench`: the performance figures, with the machine. */
#include "cli/cli.h"

#include "bench/bench.h"
#include "base/error.h"
#include "cli/report.h"

#include <stdio.h>

/* The formats `offsim bench` prints. */
#define BENCH_FORMATS (CLI_FORMATS_TABLE | CLI_FORMATS_JSON)

#ifndef OFFSIM_BUILD_TYPE
#define OFFSIM_BUILD_TYPE "unknown"
#endif

/* Only the figures that ran (--only), each with the runs behind its median. */
/* One row of the gpus figure in the JSON: its median, runs, events and ops. */
static void
json_gpus_row(JsonObject *o, const char *name, double ms, guint runs, guint64 events, guint ops)
{
  JsonObject *row = json_object_new();
  json_object_set_double_member(row, "ms", ms);
  json_object_set_int_member(row, "runs", runs);
  json_object_set_int_member(row, "events", (gint64)events);
  json_object_set_int_member(row, "ops", ops);
  json_object_set_object_member(o, name, row);
}

static char *
bench_json(const BenchFigures *f, const char *cpu, guint cores)
{
  g_autoptr(JsonObject) o = json_object_new();
  if (f->ran & BENCH_ENGINE) {
    json_object_set_double_member(o, "events_per_sec", f->events_per_sec);
    json_object_set_int_member(o, "engine_runs", f->engine_runs);
    json_object_set_int_member(o, "engine_events", (gint64)f->engine_events);
    json_object_set_int_member(o, "engine_heap_ops", (gint64)f->engine_heap_ops);
  }
  if (f->ran & BENCH_STEP) {
    json_object_set_double_member(o, "step_96x32_ms", f->step_96x32_ms);
    json_object_set_int_member(o, "step_96x32_ops", f->step_96x32_ops);
    json_object_set_double_member(o, "step_96_ops_ms", f->step_96_ops_ms);
    json_object_set_int_member(o, "step_96_ops_ops", f->step_96_ops_ops);
    json_object_set_int_member(o, "step_runs", f->step_runs);
    json_object_set_double_member(o, "step_64gpu_ms", f->step_64gpu_ms);
    json_object_set_int_member(o, "step_64gpu_ops", f->step_64gpu_ops);
    json_object_set_int_member(o, "step_64gpu_runs", f->step_64gpu_runs);
  }
  if (f->ran & BENCH_PLAN) {
    json_object_set_double_member(o, "plan_96_ms", f->plan_96_ms);
    json_object_set_int_member(o, "plan_96_runs", f->plan_96_runs);
    json_object_set_int_member(o, "plan_96_evaluations", (gint64)f->plan_96_evaluations);
    json_object_set_double_member(o, "plan_96_gap", f->plan_96_gap);
    json_object_set_boolean_member(o, "plan_96_optimal", f->plan_96_optimal);
    json_object_set_double_member(o, "plan_12_ms", f->plan_12_ms);
    json_object_set_int_member(o, "plan_12_runs", f->plan_12_runs);
    json_object_set_int_member(o, "plan_12_evaluations", (gint64)f->plan_12_evaluations);
    json_object_set_double_member(o, "plan_12_gap", f->plan_12_gap);
    json_object_set_double_member(o, "plan_pipeline_ms", f->plan_pipeline_ms);
    json_object_set_int_member(o, "plan_pipeline_runs", f->plan_pipeline_runs);
    json_object_set_int_member(o, "plan_pipeline_layers", f->plan_pipeline_layers);
    json_object_set_int_member(o, "plan_pipeline_pp", f->plan_pipeline_pp);
    json_object_set_int_member(o, "plan_pipeline_microbatches", f->plan_pipeline_microbatches);
    json_object_set_int_member(o, "plan_pipeline_evaluations", (gint64)f->plan_pipeline_evaluations);
    json_object_set_double_member(o, "plan_pipeline_gap", f->plan_pipeline_gap);
  }
  if (f->ran & BENCH_SWEEP) {
    json_object_set_double_member(o, "sweep_points_per_sec", f->sweep_points_per_sec);
    json_object_set_int_member(o, "sweep_runs", f->sweep_runs);
    json_object_set_int_member(o, "sweep_points", f->sweep_points);
    json_object_set_int_member(o, "sweep_jobs", f->sweep_jobs);
  }
  for (guint k = 0; k < f->scale_rows; k++) {
    g_autofree char *name = g_strdup_printf("scale_%u_layers", f->scale_layers[k]);
    JsonObject *row = json_object_new();
    json_object_set_double_member(row, "ms", f->scale_ms[k]);
    json_object_set_int_member(row, "runs", f->scale_runs[k]);
    json_object_set_int_member(row, "ops", f->scale_ops[k]);
    json_object_set_int_member(row, "bytes", (gint64)f->scale_bytes[k]);
    json_object_set_object_member(o, name, row);
  }
  for (guint k = 0; k < f->gpu_rows; k++) {
    g_autofree char *name = g_strdup_printf("gpus_%u", f->gpu_count[k]);
    json_gpus_row(o, name, f->gpu_ms[k], f->gpu_runs, f->gpu_events[k], f->gpu_ops[k]);
  }
  for (guint k = 0; k < f->pp_rows; k++) {
    g_autofree char *name = g_strdup_printf("pp_%u", f->pp_stages[k]);
    json_gpus_row(o, name, f->pp_ms[k], f->gpu_runs, f->pp_events[k], f->pp_ops[k]);
  }
  json_object_set_int_member(o, "repeats", f->repeats);
  json_object_set_string_member(o, "cpu", cpu);
  json_object_set_int_member(o, "cores", cores);
  json_object_set_string_member(o, "build_type", OFFSIM_BUILD_TYPE);
  g_autoptr(JsonNode) root = json_node_init_object(json_node_alloc(), o);
  return cli_report_json_to_string(root);
}

/* A figure's runs, as its line says them. */
static char *
runs_words(guint runs)
{
  return runs == 1 ? g_strdup("1 run") : g_strdup_printf("median of %u runs", runs);
}

/* A row of the gpus figure: `ms` for `events`, and the time per event
 * against the first row's (ms0 for events0). */
static void
text_gpus_row(GString *out, const char *label, guint ops, guint64 events, double ms, double ms0, guint64 events0,
              guint runs)
{
  double per_event0 = events0 ? ms0 / events0 : 0, per_event = events ? ms / events : 0;
  g_autofree char *words = runs_words(runs);
  g_string_append_printf(out, "gpus  %s GPUs   %10u ops, %9" G_GUINT64_FORMAT " events in %9.3f ms, %.2fx the time per event (%s)\n",
                         label, ops, events, ms, per_event0 > 0 ? per_event / per_event0 : 0, words);
}

static char *
bench_format(const BenchFigures *f, CliFormat format)
{
  g_autofree char *cpu = bench_cpu_model();
  guint cores = g_get_num_processors();
  if (format == CLI_FORMAT_JSON)
    return bench_json(f, cpu, cores);
  /* The runs differ by figure (bench.h): each line says its own. */
  GString *out = g_string_new(NULL);
  g_string_append_printf(out, "machine: %s, %u cores; build %s; --repeats %u, each figure the median of the runs "
                              "it names\n\n", cpu, cores, OFFSIM_BUILD_TYPE, f->repeats);
  if (f->ran & BENCH_ENGINE) {
    g_autofree char *runs = runs_words(f->engine_runs);
    g_string_append_printf(out, "events_per_sec        %14.0f   (%s; %" G_GUINT64_FORMAT " events, %" G_GUINT64_FORMAT
                                " heap operations)\n", f->events_per_sec, runs, f->engine_events, f->engine_heap_ops);
  }
  if (f->ran & BENCH_STEP) {
    g_autofree char *runs = runs_words(f->step_runs), *gpu_runs = runs_words(f->step_64gpu_runs);
    g_string_append_printf(out, "step_96x32_ms         %14.3f   (%s; %u ops, lowered and run)\n"
                                "step_96_ops_ms        %14.3f   (%s; %u ops: a 96-layer transformer op by op)\n"
                                "step_64gpu_ms         %14.3f   (%s; %u ops: the same on tp 8 x pp 4 x dp 2)\n",
                           f->step_96x32_ms, runs, f->step_96x32_ops, f->step_96_ops_ms, runs, f->step_96_ops_ops,
                           f->step_64gpu_ms, gpu_runs, f->step_64gpu_ops);
  }
  if (f->ran & BENCH_PLAN) {
    g_autofree char *runs = runs_words(f->plan_96_runs);
    g_string_append_printf(out, "plan_96_ms            %14.1f   (%s; %" G_GUINT64_FORMAT " simulations, gap %.3f %%%s)\n",
                           f->plan_96_ms, runs, f->plan_96_evaluations, f->plan_96_gap * 100,
                           f->plan_96_optimal ? ", optimal" : "");
    g_autofree char *small = runs_words(f->plan_12_runs);
    g_string_append_printf(out, "plan_12_ms            %14.1f   (%s; %" G_GUINT64_FORMAT " simulations, gap %.3f %%)\n",
                           f->plan_12_ms, small, f->plan_12_evaluations, f->plan_12_gap * 100);
    g_autofree char *pipe = runs_words(f->plan_pipeline_runs);
    g_string_append_printf(out,
                           "plan_pipeline_ms      %14.1f   (%s; %u layers, pp %u, %u micro-batches; %" G_GUINT64_FORMAT
                           " simulations, %.3f %% over resident)\n",
                           f->plan_pipeline_ms, pipe, f->plan_pipeline_layers, f->plan_pipeline_pp,
                           f->plan_pipeline_microbatches, f->plan_pipeline_evaluations, f->plan_pipeline_gap * 100);
  }
  if (f->ran & BENCH_SWEEP) {
    g_autofree char *runs = runs_words(f->sweep_runs);
    g_string_append_printf(out, "sweep_points_per_sec  %14.0f   (%s; %u points, %u threads)\n", f->sweep_points_per_sec,
                           runs, f->sweep_points, f->sweep_jobs);
  }
  /* One line per model size: the time and storage per op against the smallest's. */
  double base = f->scale_rows && f->scale_ops[0] && f->scale_ms[0] > 0 ? f->scale_ms[0] / f->scale_ops[0] : 0;
  for (guint k = 0; k < f->scale_rows; k++) {
    double per_op = f->scale_ops[k] ? f->scale_ms[k] / f->scale_ops[k] : 0;
    g_autofree char *runs = runs_words(f->scale_runs[k]);
    g_string_append_printf(out, "scale %-9u layers %10u ops in %10.3f ms, %5.1f bytes/op, %.2fx the time per op (%s)\n",
                           f->scale_layers[k], f->scale_ops[k], f->scale_ms[k],
                           f->scale_ops[k] ? (double)f->scale_bytes[k] / f->scale_ops[k] : 0,
                           base > 0 ? per_op / base : 0, runs);
  }
  /* One line per GPU count (dp rows), then per stage count of the same
   * work (pp rows): the time per event against the first row's. */
  for (guint k = 0; k < f->gpu_rows; k++) {
    g_autofree char *label = g_strdup_printf("%-9u", f->gpu_count[k]);
    text_gpus_row(out, label, f->gpu_ops[k], f->gpu_events[k], f->gpu_ms[k], f->gpu_ms[0], f->gpu_events[0], f->gpu_runs);
  }
  for (guint k = 0; k < f->pp_rows; k++) {
    g_autofree char *label = g_strdup_printf("pp %-6u", f->pp_stages[k]);
    text_gpus_row(out, label, f->pp_ops[k], f->pp_events[k], f->pp_ms[k], f->pp_ms[0], f->pp_events[0], f->gpu_runs);
  }
  return g_string_free(out, FALSE);
}

int
cli_bench_main(int argc, char **argv)
{
  g_autofree char *format_text = NULL;
  g_autofree char *only = NULL;
  int repeats = 7, jobs = 0;
  gboolean quick = FALSE;
  GError *error = NULL;
  g_autofree char *format_help = cli_report_format_help(BENCH_FORMATS);
  const GOptionEntry entries[] = {
    { "format", 'f', 0, G_OPTION_ARG_STRING, &format_text, format_help, "FORMAT" },
    { "repeats", 'r', 0, G_OPTION_ARG_INT, &repeats, "Runs per figure; the median is reported (default 7)", "N" },
    { "jobs", 'j', 0, G_OPTION_ARG_INT, &jobs, "Sweep threads (default: every core)", "N" },
    { "quick", 0, 0, G_OPTION_ARG_NONE, &quick, "Small workloads (for a smoke test)", NULL },
    { "only", 0, 0, G_OPTION_ARG_STRING, &only, "One figure: engine, step, plan, sweep, scale or gpus (for profilers)", "NAME" },
    G_OPTION_ENTRY_NULL,
  };
  g_set_prgname("offsim bench");
  g_autoptr(GOptionContext) ctx = g_option_context_new("- performance figures");
  cli_help_describe(ctx, 0);
  CliFormat format = CLI_FORMAT_TABLE;
  int status;
  if (!cli_parse_options(ctx, "bench", entries, &argc, &argv, &status))
    return status;
  if (!cli_report_parse_format(format_text, BENCH_FORMATS, &format, &error))
    return cli_fail(error);
  if (repeats < 1 || repeats > 1000 || jobs < 0 || jobs > 1024) {
    g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "bench: --repeats from 1 to 1000, --jobs from 0 to 1024");
    return cli_fail(error);
  }
  BenchOptions o = { .repeats = (guint)repeats, .jobs = (guint)jobs, .quick = quick, .only = only,
                    .only_option = "--only" };
  BenchFigures f;
  if (!bench_run(&o, &f, &error))
    return cli_fail(error);
  g_autofree char *text = bench_format(&f, format);
  return cli_print(text, &error) ? 0 : cli_fail(error);
}
