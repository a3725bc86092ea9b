/* bench/bench.h — the figures `offsim bench` reports.
 *
 * Each figure is the median of repeated runs of one fixed workload, so a
 * figure can be compared across commits on one machine; the machine and
 * the build type are reported with them.  Wall time on a shared machine is
 * noisy: callgrind instruction counts (see the README) are the repeatable
 * companion of these numbers.
 *
 *   events_per_sec        the engine alone on a synthetic program of three
 *                         streams and at least 1 M events (lowering excluded);
 *   step_96x32_ms         lower and run one step of a 96-layer model with 32
 *                         saved tensors per layer under async offload;
 *   plan_96_ms            plan a 96-layer generated transformer under a budget;
 *   plan_12_ms            the same model at 12 layers (a small model, op by op);
 *   plan_pipeline_ms      plan a pipeline: the step figure's layers (32 saved
 *                         tensors each), 126 of them on 16 stages, 64
 *                         micro-batches under 1F1B, under half the worst
 *                         GPU's resident peak (the lockstep search,
 *                         planner/stages.h); quick: 64 layers on 4 stages,
 *                         32 micro-batches;
 *   sweep_points_per_sec  sweep points (all four default policies each) per
 *                         second, on every core;
 *   scale                 the 96x32 step's model at 100, 10^4, 10^5 and 10^6
 *                         layers (100 and 1,000 with quick): time and bytes
 *                         per op, which must stay flat;
 *   gpus                  a pipeline of 4 stages (4 layers x 32 tensors each,
 *                         8 micro-batches, async offload on a node whose
 *                         switches and sockets are shared) at dp = 1 .. 16:
 *                         how a step's cost grows with the GPUs it runs;
 *                         and the same work (bench_pp_text) over pp = 2 .. 64
 *                         stages: the cost per event at pp N against pp 2.
 */
#pragma once

#include "engine/program.h"

G_BEGIN_DECLS

/* Rows of the scale figure at most. */
#define BENCH_SCALE_ROWS 4
/* Rows of the gpus figure at most, dp rows and pp rows. */
#define BENCH_GPU_ROWS 5
#define BENCH_PP_ROWS 6

/* The figures, as bits of BenchFigures.ran. */
typedef enum {
  BENCH_ENGINE = 1 << 0,
  BENCH_STEP = 1 << 1,
  BENCH_PLAN = 1 << 2,
  BENCH_SWEEP = 1 << 3,
  BENCH_SCALE = 1 << 4,
  BENCH_GPUS = 1 << 5,
} BenchFigure;

/* Each median's runs are counted beside it (`*_runs`): they differ by
 * figure, since a step is short (ten times the repeats; the 64-GPU step
 * once per repeat), the 96-layer plan and the sweep long (half), the
 * 12-layer plan short (twice) and the large scale rows longer still (fewer
 * as they grow). */
typedef struct {
  guint ran; /* BenchFigure bits: what ran (--only); the other fields are 0 */
  double events_per_sec;
  guint engine_runs;
  guint64 engine_events;  /* events in the synthetic program */
  guint64 engine_heap_ops;
  double step_96x32_ms;
  guint step_96x32_ops;
  double step_96_ops_ms;   /* a generated 96-layer transformer, op by op, lowered and run */
  guint step_96_ops_ops;
  guint step_runs;         /* behind both */
  double step_64gpu_ms;    /* the same model on 64 GPUs: tp 8 x pp 4 x dp 2, 8 micro-batches, ZeRO-1 */
  guint step_64gpu_ops;
  guint step_64gpu_runs;
  double plan_96_ms;
  guint plan_96_runs;
  guint64 plan_96_evaluations;
  double plan_96_gap;           /* the plan over its lower bound, minus 1 */
  gboolean plan_96_optimal;     /* proven optimal by the exact search */
  double plan_12_ms;
  guint plan_12_runs;
  guint64 plan_12_evaluations;
  double plan_12_gap;
  double plan_pipeline_ms;
  guint plan_pipeline_runs;
  guint plan_pipeline_layers, plan_pipeline_pp, plan_pipeline_microbatches;
  guint64 plan_pipeline_evaluations;
  double plan_pipeline_gap; /* over resident's step, the pipeline planner's bound */
  double sweep_points_per_sec;
  guint sweep_runs;
  guint sweep_points;
  guint sweep_jobs;
  /* Scaling: one async step of L layers x 32 tensors, L = 100, 10^4, 10^5
   * and 10^6 (100 and 1,000 with quick). */
  guint scale_rows;
  guint scale_layers[BENCH_SCALE_ROWS];
  double scale_ms[BENCH_SCALE_ROWS];
  guint scale_ops[BENCH_SCALE_ROWS];
  guint64 scale_bytes[BENCH_SCALE_ROWS]; /* program + run storage */
  guint scale_runs[BENCH_SCALE_ROWS];
  /* GPUs: one step of the pipeline at 4, 8, 16, 32 and 64 GPUs (4 and 8 with quick). */
  guint gpu_rows;
  guint gpu_count[BENCH_GPU_ROWS];
  double gpu_ms[BENCH_GPU_ROWS];
  guint64 gpu_events[BENCH_GPU_ROWS];
  guint gpu_ops[BENCH_GPU_ROWS];
  guint gpu_runs;
  guint pp_rows;
  guint pp_stages[BENCH_PP_ROWS];
  double pp_ms[BENCH_PP_ROWS];
  guint64 pp_events[BENCH_PP_ROWS];
  guint pp_ops[BENCH_PP_ROWS];
  guint repeats; /* --repeats, from which the runs follow */
} BenchFigures;

typedef struct {
  guint repeats;    /* runs per figure; the median is reported (>= 1) */
  guint jobs;       /* sweep threads (0 = every core) */
  gboolean quick;   /* smaller workloads, for tests */
  const char *only; /* "engine", "step", "plan", "sweep", "scale" or "gpus": that figure alone; NULL = all */
  const char *only_option; /* the caller's name for `only` ("--only"), for its message */
} BenchOptions;

gboolean bench_run(const BenchOptions *options, BenchFigures *figures, GError **error);

/* The synthetic engine program: `layers` layers of one forward, one copy
 * out, one copy back and one backward, with events between the streams and
 * memory on every op.  Exposed for tests and profiling. */
SimProgram *bench_synthetic_program(guint layers);

/* The step and scale figures' model: `layers` layers of 32 saved tensors
 * (1 to 8 MiB), 2 ms forward, one async offload policy, on PCIe Gen5. */
char *bench_scenario_text(guint layers);

/* The same work split over pp stages (the gpus figure's pp rows): the step
 * model's layers at BENCH_PP_LAYERS layers, BENCH_PP_MICROBATCHES
 * micro-batches, pp from 2 to 64 (BENCH_PP_ROWS rows, doubling; 2 and 4
 * with quick), no shared node links, so that only the GPU count changes. */
#define BENCH_PP_LAYERS 128
#define BENCH_PP_MICROBATCHES 8
char *bench_pp_text(guint pp);

/* "Intel(R) Xeon(R) ..." from /proc/cpuinfo, or "unknown". */
char *bench_cpu_model(void);

G_END_DECLS
