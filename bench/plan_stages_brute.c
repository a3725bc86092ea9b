/* bench/plan_stages_brute.c — the pipeline planner (planner/stages.h)
 * against brute force on small pipelines: 42 budgets of seven pipelines
 * (6 and 8 layers, equal and unequal, 2 to 4 stages, GPipe, 1F1B and
 * interleaved with 2 chunks per stage, compute_slowdown 0, 0.05 and 0.2).
 *
 *   offsim-plan-stages-brute [PIPELINE]
 *
 * For each pipeline every one of the 4^L plain plans (keep, offload,
 * recompute, recompute+offload per layer) runs under every schedule the
 * planner tries; each budget's best is the least step whose worst GPU fits.
 * The budgets lie from the least worst-GPU peak of any plan to resident's,
 * at 5, 15, 30, 45, 60 and 80 % of the way.  One line per budget: the
 * planner's step, the best, the planner over the best, the planner's runs;
 * then how many budgets the planner's plan is the best on (within 1e-9) and
 * the worst excess.  A budget where the planner finds no plan though one
 * fits is printed as such and counted as missed.  A figure, not a test: tests/test_plan_stages.c keeps
 * six of these budgets as assertions.  Runs one core for about a minute. */
#include "input/scenario.h"
#include "planner/plan.h"
#include "result/evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_FRACTIONS 6
static const double fractions[N_FRACTIONS] = { 0.05, 0.15, 0.30, 0.45, 0.60, 0.80 };

static const char *equal_model = "[model]\nlayers = %u\nforward = 1ms\nbackward = 2ms\ntensors = a:100MB\n"
                                 "input = 10MB\nstatic = 100MB\n";
/* A slow layer, a cheap-to-recompute one, a big input: which layers act matters. */
static const char *unequal_model = "[model]\nlayers = %u\nforward = 1ms\ninput = 4MB\n"
                                   "tensors = attn:40MB, mlp:60MB, mask:2MB:keep\nstatic = 200MB\nworkspace = 5MB\n"
                                   "[layer.1]\nforward = 3ms\ntensors = big:150MB\n"
                                   "[layer.2]\nforward = 0.3ms\nbackward = 0.6ms\ntensors = a:80MB, b:5MB\n"
                                   "[layer.5]\ninput = 40MB\n";

typedef struct {
  guint layers;
  gboolean unequal;
  double slowdown;
  const char *parallel;
} Pipeline;

static const Pipeline pipelines[] = {
  { 8, FALSE, 0, "pp = 4\nmicrobatches = 8\nschedule = 1f1b\n" },
  { 6, TRUE, 0.05, "pp = 2\nmicrobatches = 4\nschedule = 1f1b\n" },
  { 6, TRUE, 0.05, "pp = 3\nmicrobatches = 6\nschedule = gpipe\n" },
  { 8, FALSE, 0.2, "pp = 2\nvirtual = 2\nmicrobatches = 4\nschedule = interleaved\n" },
  { 8, TRUE, 0.2, "pp = 4\nmicrobatches = 8\nschedule = 1f1b\n" },
  { 6, FALSE, 0, "pp = 3\nmicrobatches = 3\nschedule = gpipe\n" },
  { 8, TRUE, 0, "pp = 2\nvirtual = 2\nmicrobatches = 4\nschedule = interleaved\n" },
};

static char *
pipeline_text(const Pipeline *p)
{
  g_autofree char *model = g_strdup_printf(p->unequal ? unequal_model : equal_model, p->layers);
  return g_strdup_printf("[device]\nmemory = 80GiB\n"
                         "[link]\nh2d_bandwidth = 30GB/s\nd2h_bandwidth = 30GB/s\nlatency = 5us\n"
                         "compute_slowdown = %g\n%s[parallel]\n%s",
                         p->slowdown, model, p->parallel);
}

typedef struct {
  double step;
  gint64 peak;
} Point;

/* Every plain plan under every schedule: its step and worst GPU's peak. */
static GArray *
every_plan(const SimScenario *s)
{
  guint n = sim_workload_n_layers(s->workload), n_options, total = 1;
  const PlannerOption *options = planner_plan_options(&n_options);
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  g_autoptr(SimPolicy) policy = sim_policy_new("enum", SIM_POLICY_PLAN);
  policy->actions = g_array_sized_new(FALSE, TRUE, sizeof(SimAction), n);
  g_array_set_size(policy->actions, n);
  policy->dedup = TRUE;
  for (guint i = 0; i < n; i++)
    total *= SIM_ACTION_N_PLAIN;
  GArray *points = g_array_sized_new(FALSE, FALSE, sizeof(Point), total * n_options);
  for (guint o = 0; o < n_options; o++) {
    policy->async = options[o].async;
    policy->prefetch = options[o].prefetch;
    policy->inflight = options[o].inflight;
    for (guint code = 0; code < total; code++) {
      guint x = code;
      for (guint i = 0; i < n; i++, x /= SIM_ACTION_N_PLAIN)
        g_array_index(policy->actions, SimAction, i) = (SimAction)(x % SIM_ACTION_N_PLAIN);
      g_autoptr(GError) error = NULL;
      g_autoptr(SimRun) run = sim_evaluate_run(evaluator, s, policy, &error);
      if (run == NULL) {
        fprintf(stderr, "offsim-plan-stages-brute: %s\n", error->message);
        exit(1);
      }
      Point pt = { run->step, run->peak[SIM_POOL_DEVICE].bytes };
      g_array_append_val(points, pt);
    }
  }
  return points;
}

int
main(int argc, char **argv)
{
  guint only = argc > 1 ? (guint)atoi(argv[1]) : 0;
  guint cases = 0, optimal = 0;
  double worst = 0;
  for (guint k = 0; k < G_N_ELEMENTS(pipelines); k++) {
    if (only && k + 1 != only)
      continue;
    g_autofree char *text = pipeline_text(&pipelines[k]);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = sim_scenario_load_data(text, "brute", &error);
    if (s == NULL) {
      fprintf(stderr, "offsim-plan-stages-brute: %s\n", error->message);
      return 2;
    }
    g_autoptr(GArray) points = every_plan(s);
    gint64 least = G_MAXINT64, resident = g_array_index(points, Point, 0).peak; /* code 0: all keep */
    for (guint i = 0; i < points->len; i++)
      least = MIN(least, g_array_index(points, Point, i).peak);
    for (guint f = 0; f < N_FRACTIONS; f++) {
      guint64 budget = (guint64)least + (guint64)((double)(resident - least) * fractions[f]);
      double best = INFINITY;
      for (guint i = 0; i < points->len; i++) {
        const Point *pt = &g_array_index(points, Point, i);
        if ((guint64)pt->peak <= budget)
          best = MIN(best, pt->step);
      }
      g_autoptr(PlannerPlan) p = planner_plan_allocated(s, budget, SIM_FRAMEWORK_NONE, &error);
      if (p == NULL) {
        fprintf(stderr, "offsim-plan-stages-brute: pipeline %u: %s\n", k + 1, error->message);
        return 1;
      }
      cases++;
      if (!p->feasible) {
        printf("pipeline %u budget %11" G_GUINT64_FORMAT "  no plan        best %9.4f ms\n", k + 1, budget, best * 1e3);
        continue;
      }
      double excess = p->result->step_ms / (best * 1e3) - 1;
      optimal += excess <= 1e-9;
      worst = MAX(worst, excess);
      printf("pipeline %u budget %11" G_GUINT64_FORMAT "  plan %9.4f ms  best %9.4f ms  %+7.3f %%  %5" G_GUINT64_FORMAT
             " runs\n",
             k + 1, budget, p->result->step_ms, best * 1e3, excess * 100, p->evaluations);
    }
  }
  printf("optimum on %u of %u budgets, worst %+.3f %%\n", optimal, cases, worst * 100);
  return 0;
}
