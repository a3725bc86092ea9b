#include "bench/bench.h"

#include "base/error.h"
#include "engine/engine.h"
#include "input/config.h"
#include "input/scenario.h"
#include "planner/plan.h"
#include "result/evaluate.h"
#include "sweep/grid.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
compare_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double
median(double *v, guint n)
{
  qsort(v, n, sizeof(double), compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

SimProgram *
bench_synthetic_program(guint layers)
{
  SimProgram *p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute"), d = sim_program_add_stream(p, "d2h"),
          h = sim_program_add_stream(p, "h2d");
  guint32 fwd = sim_program_intern(p, "forward"), bwd = sim_program_intern(p, "backward"),
          act = sim_program_intern(p, "act"), ev = sim_program_intern(p, "event");
  g_autofree guint32 *reloaded = g_new(guint32, layers);
  guint32 boundary = sim_program_add_event(p, ev, SIM_NO_LAYER);
  for (guint i = 0; i < layers; i++) {
    gint32 l = (gint32)i;
    gint64 bytes = 1 << 20;
    guint32 done = sim_program_add_event(p, ev, l), out = sim_program_add_event(p, ev, l);
    reloaded[i] = sim_program_add_event(p, ev, l);
    guint32 op = sim_program_compute(p, c, 1e-4 * (1 + i % 3), SIM_PHASE_FORWARD, l, fwd);
    sim_program_mem(p, op, SIM_AT_START, SIM_POOL_DEVICE, bytes, act, l);
    sim_program_record(p, c, done);
    sim_program_wait(p, d, done);
    op = sim_program_copy(p, d, SIM_DIR_D2H, (guint64)bytes, SIM_HOST_PINNED, l, act);
    sim_program_mem(p, op, SIM_AT_START, SIM_POOL_HOST, bytes, act, l);
    sim_program_mem(p, op, SIM_AT_END, SIM_POOL_DEVICE, -bytes, act, l);
    sim_program_record(p, d, out);
    /* Reloads start after the forward pass, in reverse, as offload does. */
    (void)out;
  }
  sim_program_record(p, c, boundary);
  for (guint i = layers; i-- > 0;) {
    gint32 l = (gint32)i;
    gint64 bytes = 1 << 20;
    sim_program_wait(p, h, boundary);
    guint32 op = sim_program_copy(p, h, SIM_DIR_H2D, (guint64)bytes, SIM_HOST_PINNED, l, act);
    sim_program_mem(p, op, SIM_AT_START, SIM_POOL_DEVICE, bytes, act, l);
    sim_program_mem(p, op, SIM_AT_END, SIM_POOL_HOST, -bytes, act, l);
    sim_program_record(p, h, reloaded[i]);
    sim_program_wait(p, c, reloaded[i]);
    op = sim_program_compute(p, c, 2e-4 * (1 + i % 3), SIM_PHASE_BACKWARD, l, bwd);
    sim_program_mem(p, op, SIM_AT_END, SIM_POOL_DEVICE, -bytes, act, l);
  }
  return p;
}

static const SimLink bench_link = {
  .h2d_bandwidth = 25e9, .d2h_bandwidth = 25e9, .bidir_bandwidth = 40e9, .latency = 8e-6,
  .pageable_factor = 0.5, .compute_slowdown = 0.03, .host_alloc = 3e-3,
};

static gboolean
bench_engine(const BenchOptions *o, BenchFigures *f, GError **error)
{
  /* Six events a layer: two computes, two copies with a latency each. */
  guint layers = o->quick ? 2000 : 180000;
  g_autoptr(SimProgram) p = bench_synthetic_program(layers);
  g_autoptr(SimEngine) engine = sim_engine_new();
  g_autofree double *rates = g_new(double, o->repeats);
  for (guint r = 0; r < o->repeats; r++) {
    double t0 = now_s();
    g_autoptr(SimRun) run = sim_engine_run(engine, p, &bench_link, NULL, error);
    double t1 = now_s();
    if (run == NULL)
      return FALSE;
    rates[r] = (double)run->events / (t1 - t0);
    f->engine_events = run->events;
    f->engine_heap_ops = run->heap_ops;
  }
  f->events_per_sec = median(rates, o->repeats);
  f->engine_runs = o->repeats;
  return TRUE;
}

char *
bench_scenario_text(guint layers)
{
  GString *t = g_string_new("[scenario]\nname = bench 96x32\n[device]\nmemory = 80GiB\n"
                            "[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\nlatency = 8us\n"
                            "compute_slowdown = 0.03\n[model]\nforward = 2ms\ninput = 4MiB\ntensors = ");
  for (guint i = 0; i < 32; i++)
    g_string_append_printf(t, "%st%u:%uMiB", i ? ", " : "", i, 1 + i % 8);
  g_string_append_printf(t, "\nlayers = %u\n[policy.async]\nkind = offload\n", layers);
  return g_string_free(t, FALSE);
}

/* Storage a program and its run hold: what the data structures cost per op. */
static guint64
program_bytes(const SimProgram *p, const SimRun *run)
{
  return sim_program_storage_bytes(p) + run->applied->len * sizeof(guint32);
}

/* The median of `repeats` lowered and run steps of the scenario `text`; a
 * first, untimed run grows the buffers and touches their pages.  Also its
 * ops, storage (program_bytes) and events. */
static gboolean
time_text(const char *text, guint repeats, double *median_ms, guint *ops, guint64 *bytes, guint64 *events,
          GError **error)
{
  g_autoptr(SimScenario) s = sim_scenario_load_data(text, "bench steps", error);
  if (s == NULL)
    return FALSE;
  const SimPolicy *policy = g_ptr_array_index(s->policies, 0);
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  g_autofree double *ms = g_new(double, repeats);
  for (guint r = 0; r <= repeats; r++) {
    double t0 = now_s();
    g_autoptr(SimRun) run = sim_evaluate_run(evaluator, s, policy, error);
    double t1 = now_s();
    if (run == NULL)
      return FALSE;
    if (r > 0)
      ms[r - 1] = (t1 - t0) * 1e3;
    *bytes = program_bytes(sim_evaluate_program(evaluator), run);
    *events = run->events;
  }
  *median_ms = median(ms, repeats);
  *ops = sim_program_n_ops(sim_evaluate_program(evaluator));
  return TRUE;
}

/* The 96x32 model's layers at `layers` layers, async. */
static gboolean
time_steps(guint layers, guint repeats, double *median_ms, guint *ops, guint64 *bytes, GError **error)
{
  g_autofree char *text = bench_scenario_text(layers);
  guint64 events;
  return time_text(text, repeats, median_ms, ops, bytes, &events, error);
}

static char *plan_text(guint layers);

static gboolean
bench_step(const BenchOptions *o, BenchFigures *f, GError **error)
{
  /* A step is short: ten times the repeats, so the median is steady. */
  guint64 bytes, events;
  f->step_runs = 10 * o->repeats;
  f->step_64gpu_runs = o->repeats;
  if (!time_steps(96, f->step_runs, &f->step_96x32_ms, &f->step_96x32_ops, &bytes, error))
    return FALSE;
  /* The planner's 96-layer transformer, op by op, under async offload. */
  g_autofree char *plan = plan_text(96);
  g_autofree char *text = g_strconcat(plan, "[policy.async]\nkind = offload\n", NULL);
  if (!time_text(text, f->step_runs, &f->step_96_ops_ms, &f->step_96_ops_ops, &bytes, &events, error))
    return FALSE;
  /* And on 64 GPUs: its tensor-parallel collectives in every layer, the
   * pipeline's sends, the replicas' gradient buckets and weight gathers. */
  g_autofree char *gpus = g_strconcat(plan, "[parallel]\npp = 4\ndp = 2\nmicrobatches = 8\nsharding = optimizer\n",
                                      "[policy.async]\nkind = offload\n", NULL);
  return time_text(gpus, f->step_64gpu_runs, &f->step_64gpu_ms, &f->step_64gpu_ops, &bytes, &events, error);
}

/* GPT-3 175B shapes, `layers` layers, TP 8 with SP, on an 80 GiB-class link. */
static char *
plan_text(guint layers)
{
  return g_strdup_printf(
    "[scenario]\nname = bench plan %u\n[device]\nmemory = 400GiB\nmatmul_tflops = 795\nhbm_bandwidth = 3.35TB/s\n"
    "[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\nbidir_bandwidth = 101GB/s\nlatency = 8us\n"
    "compute_slowdown = 0.03\n"
    "[transformer]\nhidden = 12288\nlayers = %u\nheads = 96\nffn = 49152\nvocab = 51200\nbatch = 1\nseq = 2048\n"
    "dtype = bf16\nnorm = layernorm\nmlp = gelu\nattention = eager\ndropout = 0.1\ntp = 8\nsp = true\n"
    "optimizer = none\nmaster_weights = false\n",
    layers, layers);
}

/* planner_plan of `s` under `budget`, `repeats` times: the median into
 * *ms, the last plan's figures into the rest (optimal may be NULL). */
static gboolean
time_planner(const SimScenario *s, guint64 budget, guint repeats, double *ms, guint64 *evaluations, double *gap,
             gboolean *optimal, GError **error)
{
  g_autofree double *runs = g_new(double, repeats);
  for (guint r = 0; r < repeats; r++) {
    double t0 = now_s();
    g_autoptr(PlannerPlan) plan = planner_plan(s, budget, error);
    double t1 = now_s();
    if (plan == NULL)
      return FALSE;
    runs[r] = (t1 - t0) * 1e3;
    *evaluations = plan->evaluations;
    *gap = plan->gap;
    if (optimal)
      *optimal = plan->optimal;
  }
  *ms = median(runs, repeats);
  return TRUE;
}

/* The plan of that model at `layers` layers under half its activations
 * above static memory, `repeats` times: the median into *ms, the last
 * plan's figures into the rest. */
static gboolean
time_plan(guint layers, guint repeats, double *ms, guint64 *evaluations, double *gap, gboolean *optimal,
          GError **error)
{
  g_autofree char *text = plan_text(layers);
  g_autoptr(SimScenario) s = sim_scenario_load_data(text, "bench plan", error);
  if (s == NULL)
    return FALSE;
  guint64 saved = sim_workload_saved_bytes(s->workload);
  guint64 budget = s->workload->static_bytes + s->workload->head->workspace_bytes + saved / 2;
  return time_planner(s, budget, repeats, ms, evaluations, gap, optimal, error);
}

/* The plan of the pipeline figure (bench.h), `f->plan_pipeline_runs`
 * times: the median and the last plan's figures into f. */
static gboolean
time_plan_pipeline(BenchFigures *f, GError **error)
{
  g_autofree char *base = bench_scenario_text(f->plan_pipeline_layers);
  g_autofree char *text = g_strdup_printf("%s[parallel]\npp = %u\nmicrobatches = %u\nschedule = 1f1b\n", base,
                                          f->plan_pipeline_pp, f->plan_pipeline_microbatches);
  g_autoptr(SimScenario) s = sim_scenario_load_data(text, "bench plan pipeline", error);
  if (s == NULL)
    return FALSE;
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  g_autoptr(SimPolicy) resident = sim_policy_new("resident", SIM_POLICY_RESIDENT);
  g_autoptr(SimRun) run = sim_evaluate_run(evaluator, s, resident, error);
  if (run == NULL)
    return FALSE;
  guint64 budget = (guint64)run->peak[SIM_POOL_DEVICE].bytes / 2;
  return time_planner(s, budget, f->plan_pipeline_runs, &f->plan_pipeline_ms, &f->plan_pipeline_evaluations,
                      &f->plan_pipeline_gap, NULL, error);
}

static gboolean
bench_plan(const BenchOptions *o, BenchFigures *f, GError **error)
{
  /* A plan of 96 layers is long: half the repeats; one of 12 is short. */
  f->plan_96_runs = MAX(1u, o->repeats / 2);
  f->plan_12_runs = 2 * o->repeats;
  f->plan_pipeline_runs = MAX(1u, o->repeats / 2);
  f->plan_pipeline_layers = o->quick ? 64 : 126;
  f->plan_pipeline_pp = o->quick ? 4 : 16;
  f->plan_pipeline_microbatches = o->quick ? 32 : 64;
  return time_plan(96, f->plan_96_runs, &f->plan_96_ms, &f->plan_96_evaluations, &f->plan_96_gap,
                   &f->plan_96_optimal, error) &&
         time_plan(12, f->plan_12_runs, &f->plan_12_ms, &f->plan_12_evaluations, &f->plan_12_gap, NULL, error) &&
         time_plan_pipeline(f, error);
}

static gboolean
bench_scale(const BenchOptions *o, BenchFigures *f, GError **error)
{
  /* 10^6 layers hold about 9 GB and take seconds a step: fewer repeats as the model grows. */
  static const guint full[] = { 100, 10000, 100000, 1000000 }, quick[] = { 100, 1000 };
  const guint *layers = o->quick ? quick : full;
  f->scale_rows = o->quick ? G_N_ELEMENTS(quick) : G_N_ELEMENTS(full);
  for (guint k = 0; k < f->scale_rows; k++) {
    f->scale_layers[k] = layers[k];
    f->scale_runs[k] = MAX(1u, k == 0 ? o->repeats : o->repeats >> (k + 1));
    if (!time_steps(layers[k], f->scale_runs[k], &f->scale_ms[k], &f->scale_ops[k], &f->scale_bytes[k], error))
      return FALSE;
  }
  return TRUE;
}

/* The gpus figure's pipeline at dp replicas: 4 stages of the 96x32 model's
 * layers, two GPUs a switch, four a socket, so that every copy's rate is
 * shared (the engine's progressive filling on every change). */
static char *
bench_pipeline_text(guint dp)
{
  g_autofree char *base = bench_scenario_text(16);
  guint gpus = 4 * dp;
  return g_strdup_printf("%s[parallel]\npp = 4\ndp = %u\nmicrobatches = 8\n"
                         "[node]\ngpus_per_switch = 2\nswitch_bandwidth = 55GB/s\nsockets = %u\n"
                         "host_memory_bandwidth = 250GB/s\n",
                         base, dp, MAX(1u, gpus / 4));
}

char *
bench_pp_text(guint pp)
{
  g_autofree char *base = bench_scenario_text(BENCH_PP_LAYERS);
  return g_strdup_printf("%s[parallel]\npp = %u\nmicrobatches = %u\n", base, pp, BENCH_PP_MICROBATCHES);
}

static gboolean
bench_gpus(const BenchOptions *o, BenchFigures *f, GError **error)
{
  static const guint full[] = { 1, 2, 4, 8, 16 }, quick[] = { 1, 2 };
  const guint *dp = o->quick ? quick : full;
  f->gpu_rows = o->quick ? G_N_ELEMENTS(quick) : G_N_ELEMENTS(full);
  f->gpu_runs = o->repeats;
  for (guint k = 0; k < f->gpu_rows; k++) {
    g_autofree char *text = bench_pipeline_text(dp[k]);
    guint64 bytes;
    if (!time_text(text, f->gpu_runs, &f->gpu_ms[k], &f->gpu_ops[k], &bytes, &f->gpu_events[k], error))
      return FALSE;
    f->gpu_count[k] = 4 * dp[k];
  }
  static const guint pp_full[] = { 2, 4, 8, 16, 32, 64 }, pp_quick[] = { 2, 4 };
  const guint *pp = o->quick ? pp_quick : pp_full;
  f->pp_rows = o->quick ? G_N_ELEMENTS(pp_quick) : G_N_ELEMENTS(pp_full);
  for (guint k = 0; k < f->pp_rows; k++) {
    g_autofree char *text = bench_pp_text(pp[k]);
    guint64 bytes;
    if (!time_text(text, f->gpu_runs, &f->pp_ms[k], &f->pp_ops[k], &bytes, &f->pp_events[k], error))
      return FALSE;
    f->pp_stages[k] = pp[k];
  }
  return TRUE;
}

/* The embedded default (Qwen2.5-0.5B, four policies) over link bandwidths
 * and batch sizes: what a design-space sweep does. */
static gboolean
bench_sweep(const BenchOptions *o, BenchFigures *f, GError **error)
{
  g_autoptr(SimConfig) config = sim_config_load_data(sim_scenario_default_text(), "(embedded default)", NULL, error);
  if (config == NULL)
    return FALSE;
  guint bandwidths = o->quick ? 5 : 100, batches = o->quick ? 2 : 4;
  guint repeats = MAX(1u, o->repeats / 2);
  g_autofree double *rates = g_new(double, repeats);
  for (guint r = 0; r < repeats; r++) {
    g_autoptr(GPtrArray) axes = g_ptr_array_new_with_free_func((GDestroyNotify)sweep_grid_axis_free);
    g_autoptr(GString) set = g_string_new("link.h2d_bandwidth=");
    for (guint i = 0; i < bandwidths; i++)
      g_string_append_printf(set, "%s%uGB/s", i ? "," : "", 10 + i);
    g_ptr_array_add(axes, sweep_grid_axis_parse(set->str, "bench sweep", error));
    g_string_assign(set, "transformer.batch=");
    for (guint i = 0; i < batches; i++)
      g_string_append_printf(set, "%s%u", i ? "," : "", 1 + i);
    g_ptr_array_add(axes, sweep_grid_axis_parse(set->str, "bench sweep", error));
    SweepGridOptions options = { .jobs = o->jobs, .shard_option = "bench sweep" };
    double t0 = now_s();
    g_autoptr(SweepGrid) grid = sweep_grid_run(config, g_steal_pointer(&axes), &options, error);
    double t1 = now_s();
    if (grid == NULL)
      return FALSE;
    f->sweep_points = grid->points->len;
    rates[r] = grid->points->len / (t1 - t0);
  }
  f->sweep_points_per_sec = median(rates, repeats);
  f->sweep_runs = repeats;
  f->sweep_jobs = o->jobs ? o->jobs : g_get_num_processors();
  return TRUE;
}

gboolean
bench_run(const BenchOptions *options, BenchFigures *f, GError **error)
{
  static const struct {
    const char *name;
    BenchFigure bit;
    gboolean (*run)(const BenchOptions *, BenchFigures *, GError **);
  } figures[] = {
    { "engine", BENCH_ENGINE, bench_engine }, { "step", BENCH_STEP, bench_step }, { "plan", BENCH_PLAN, bench_plan },
    { "sweep", BENCH_SWEEP, bench_sweep },    { "scale", BENCH_SCALE, bench_scale }, { "gpus", BENCH_GPUS, bench_gpus },
  };
  BenchOptions o = *options;
  o.repeats = MAX(1u, o.repeats);
  *f = (BenchFigures){ .repeats = o.repeats };
  gboolean known = o.only == NULL;
  for (guint i = 0; i < G_N_ELEMENTS(figures); i++) {
    if (o.only && strcmp(o.only, figures[i].name) != 0)
      continue;
    known = TRUE;
    if (!figures[i].run(&o, f, error))
      return FALSE;
    f->ran |= figures[i].bit;
  }
  if (!known) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected engine, step, plan, sweep, scale or gpus, got '%s'", o.only_option,
                o.only);
    return FALSE;
  }
  return TRUE;
}

char *
bench_cpu_model(void)
{
  g_autofree char *info = NULL;
  if (g_file_get_contents("/proc/cpuinfo", &info, NULL, NULL)) {
    g_auto(GStrv) lines = g_strsplit(info, "\n", -1);
    for (char **l = lines; *l; l++) {
      if (g_str_has_prefix(*l, "model name")) {
        const char *colon = strchr(*l, ':');
        if (colon)
          return g_strstrip(g_strdup(colon + 1));
      }
    }
  }
  return g_strdup("unknown");
}
