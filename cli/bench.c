/* cli/bench.c — `offsim bench`: the performance figures, with the machine. */
#include "cli.h"

#include "bench.h"
#include "error.h"
#include "report.h"

#include <stdio.h>

#ifndef OFFSIM_BUILD_TYPE
#define OFFSIM_BUILD_TYPE "unknown"
#endif

static char *
bench_format(const BenchFigures *f, CliFormat format)
{
  g_autofree char *cpu = bench_cpu_model();
  guint cores = g_get_num_processors();
  if (format == CLI_FORMAT_JSON) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "events_per_sec");
    json_builder_add_double_value(b, f->events_per_sec);
    json_builder_set_member_name(b, "step_96x32_ms");
    json_builder_add_double_value(b, f->step_96x32_ms);
    json_builder_set_member_name(b, "step_96_ops_ms");
    json_builder_add_double_value(b, f->step_96_ops_ms);
    json_builder_set_member_name(b, "step_64gpu_ms");
    json_builder_add_double_value(b, f->step_64gpu_ms);
    json_builder_set_member_name(b, "plan_96_ms");
    json_builder_add_double_value(b, f->plan_96_ms);
    json_builder_set_member_name(b, "sweep_points_per_sec");
    json_builder_add_double_value(b, f->sweep_points_per_sec);
    json_builder_set_member_name(b, "engine_events");
    json_builder_add_int_value(b, (gint64)f->engine_events);
    json_builder_set_member_name(b, "engine_heap_ops");
    json_builder_add_int_value(b, (gint64)f->engine_heap_ops);
    json_builder_set_member_name(b, "step_96x32_ops");
    json_builder_add_int_value(b, f->step_96x32_ops);
    json_builder_set_member_name(b, "plan_96_evaluations");
    json_builder_add_int_value(b, (gint64)f->plan_96_evaluations);
    json_builder_set_member_name(b, "plan_96_gap");
    json_builder_add_double_value(b, f->plan_96_gap);
    json_builder_set_member_name(b, "plan_96_optimal");
    json_builder_add_boolean_value(b, f->plan_96_optimal);
    json_builder_set_member_name(b, "sweep_points");
    json_builder_add_int_value(b, f->sweep_points);
    json_builder_set_member_name(b, "sweep_jobs");
    json_builder_add_int_value(b, f->sweep_jobs);
    for (guint k = 0; k < f->scale_rows; k++) {
      g_autofree char *name = g_strdup_printf("scale_%u_layers", f->scale_layers[k]);
      json_builder_set_member_name(b, name);
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "ms");
      json_builder_add_double_value(b, f->scale_ms[k]);
      json_builder_set_member_name(b, "ops");
      json_builder_add_int_value(b, f->scale_ops[k]);
      json_builder_set_member_name(b, "bytes");
      json_builder_add_int_value(b, (gint64)f->scale_bytes[k]);
      json_builder_end_object(b);
    }
    for (guint k = 0; k < f->gpu_rows; k++) {
      g_autofree char *name = g_strdup_printf("gpus_%u", f->gpu_count[k]);
      json_builder_set_member_name(b, name);
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "ms");
      json_builder_add_double_value(b, f->gpu_ms[k]);
      json_builder_set_member_name(b, "events");
      json_builder_add_int_value(b, (gint64)f->gpu_events[k]);
      json_builder_set_member_name(b, "ops");
      json_builder_add_int_value(b, f->gpu_ops[k]);
      json_builder_end_object(b);
    }
    json_builder_set_member_name(b, "repeats");
    json_builder_add_int_value(b, f->repeats);
    json_builder_set_member_name(b, "cpu");
    json_builder_add_string_value(b, cpu);
    json_builder_set_member_name(b, "cores");
    json_builder_add_int_value(b, cores);
    json_builder_set_member_name(b, "build_type");
    json_builder_add_string_value(b, OFFSIM_BUILD_TYPE);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return cli_report_json_to_string(root);
  }
  GString *out = g_string_new(NULL);
  g_string_append_printf(out, "machine: %s, %u cores; build %s; medians of %u runs\n\n"
                              "events_per_sec        %14.0f   (%" G_GUINT64_FORMAT " events, %" G_GUINT64_FORMAT
                              " heap operations)\n"
                              "step_96x32_ms         %14.3f   (%u ops, lowered and run)\n"
                              "step_96_ops_ms        %14.3f   (%u ops: a 96-layer transformer op by op)\n"
                              "step_64gpu_ms         %14.3f   (%u ops: the same on tp 8 x pp 4 x dp 2)\n"
                              "plan_96_ms            %14.1f   (%" G_GUINT64_FORMAT " simulations, gap %.3f %%%s)\n"
                              "sweep_points_per_sec  %14.0f   (%u points, %u threads)\n",
                         cpu, cores, OFFSIM_BUILD_TYPE, f->repeats, f->events_per_sec, f->engine_events,
                         f->engine_heap_ops, f->step_96x32_ms, f->step_96x32_ops, f->step_96_ops_ms,
                         f->step_96_ops_ops, f->step_64gpu_ms, f->step_64gpu_ops, f->plan_96_ms,
                         f->plan_96_evaluations, f->plan_96_gap * 100, f->plan_96_optimal ? ", optimal" : "",
                         f->sweep_points_per_sec, f->sweep_points, f->sweep_jobs);
  /* One line per model size: the time and storage per op against the smallest's. */
  double base = f->scale_ops[0] && f->scale_ms[0] > 0 ? f->scale_ms[0] / f->scale_ops[0] : 0;
  for (guint k = 0; k < f->scale_rows; k++) {
    double per_op = f->scale_ops[k] ? f->scale_ms[k] / f->scale_ops[k] : 0;
    g_string_append_printf(out, "scale %-9u layers %10u ops in %10.3f ms, %5.1f bytes/op, %.2fx the time per op\n",
                           f->scale_layers[k], f->scale_ops[k], f->scale_ms[k],
                           f->scale_ops[k] ? (double)f->scale_bytes[k] / f->scale_ops[k] : 0,
                           base > 0 ? per_op / base : 0);
  }
  /* One line per GPU count: the time per event against the fewest GPUs'. */
  double per_event0 = f->gpu_rows && f->gpu_events[0] ? f->gpu_ms[0] / f->gpu_events[0] : 0;
  for (guint k = 0; k < f->gpu_rows; k++) {
    double per_event = f->gpu_events[k] ? f->gpu_ms[k] / f->gpu_events[k] : 0;
    g_string_append_printf(out, "gpus  %-9u GPUs   %10u ops, %9" G_GUINT64_FORMAT " events in %9.3f ms, %.2fx the time per event\n",
                           f->gpu_count[k], f->gpu_ops[k], f->gpu_events[k], f->gpu_ms[k],
                           per_event0 > 0 ? per_event / per_event0 : 0);
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
  const GOptionEntry entries[] = {
    { "format", 'f', 0, G_OPTION_ARG_STRING, &format_text, "Output: table (default) or json", "FORMAT" },
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
  if (format_text && !cli_report_parse_format(format_text, &format, &error))
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
