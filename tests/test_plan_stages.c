/* The pipeline planner (planner/stages.h): one plan per stage under one
 * budget on every GPU, checked against fresh runs of the plan it returns,
 * the fixed policies, brute force on small pipelines and the CLI. */
#include "testutil.h"

#include "planner/plan.h"
#include "planner/stages.h"
#include "result/evaluate.h"

#include <json-glib/json-glib.h>

#include <math.h>
#include <string.h>

/* The brief's pipeline: 4 stages of uniform layers, 8 micro-batches under
 * 1F1B, so that stage s holds min(4 - s, 8) micro-batches' activations. */
static const char *pipeline_text = "[device]\nmemory = 80GiB\n"
                                   "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"
                                   "[model]\nlayers = 16\nforward = 1ms\nbackward = 2ms\ntensors = a:100MB\ninput = 10MB\n"
                                   "[parallel]\npp = 4\nmicrobatches = 8\nschedule = 1f1b\n"
                                   "[policy.resident]\nkind = resident\n"
                                   "[policy.offload-all]\nkind = offload\nkeep_last = 0\n"
                                   "[policy.checkpoint-all]\nkind = checkpoint\n";

static SimResult *
evaluate_policy(const SimScenario *s, const SimPolicy *policy, guint64 budget)
{
  g_autoptr(GError) error = NULL;
  SimEvaluateOptions options = { .budget = budget };
  SimResult *r = sim_evaluate(NULL, s, policy, &options, &error);
  ck_assert_msg(r != NULL, "%s", error ? error->message : "");
  return r;
}

static guint
non_keep(const PlannerPlan *p, guint stage)
{
  const PlannerStage *st = &g_array_index(p->stages, PlannerStage, stage);
  guint n = 0;
  for (guint i = 0; i < st->layers->len; i++)
    n += g_array_index(p->policy->actions, SimAction, g_array_index(st->layers, guint, i)) != SIM_ACTION_KEEP;
  return n;
}

/* Asserts that plan `p` is no slower than each of the fixed policies
 * offload-all and checkpoint-all that fits `budget` (at `fraction` of the
 * way, for the message); returns how many fit. */
static guint
beats_fixed_policies(const SimScenario *s, const PlannerPlan *p, guint64 budget, double fraction)
{
  guint fitting = 0;
  const char *fixed[] = { "offload-all", "checkpoint-all" };
  for (guint k = 0; k < G_N_ELEMENTS(fixed); k++) {
    g_autoptr(SimResult) r = test_evaluate(s, fixed[k]);
    if ((guint64)r->peak_device.bytes > budget)
      continue;
    fitting++;
    ck_assert_msg(p->result->step_ms <= r->step_ms, "budget %.2f: plan %.3f ms loses to %s %.3f ms", fraction,
                  p->result->step_ms, fixed[k], r->step_ms);
  }
  return fitting;
}

START_TEST(pipeline_plan_fits_every_stage_and_beats_the_fixed_policies)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(pipeline_text);
  g_autoptr(SimResult) resident = test_evaluate(s, "resident");
  ck_assert_ptr_nonnull(resident->stages);
  gint64 first = g_array_index(resident->stages, SimResultStage, 0).peak_device_bytes;
  gint64 last = g_array_index(resident->stages, SimResultStage, 3).peak_device_bytes;
  /* 1F1B: stage 0 holds four micro-batches, stage 3 one. */
  ck_assert_int_eq(first, 4 * last);
  const double fractions[] = { 0.3, 0.6 };
  for (guint f = 0; f < G_N_ELEMENTS(fractions); f++) {
    guint64 budget = (guint64)last + (guint64)(fractions[f] * (double)(first - last));
    g_autoptr(GError) error = NULL;
    g_autoptr(PlannerPlan) p = planner_plan(s, budget, &error);
    ck_assert_msg(p != NULL, "%s", error ? error->message : "");
    ck_assert(p->feasible);
    ck_assert_ptr_nonnull(p->stages);
    ck_assert_uint_eq(p->stages->len, 4);

    /* A fresh run of the returned policy: every stage within the budget,
     * and the plan's figures are that run's. */
    g_autoptr(SimResult) again = evaluate_policy(s, p->policy, budget);
    ck_assert_ptr_nonnull(again->stages);
    for (guint st = 0; st < 4; st++) {
      const SimResultStage *rs = &g_array_index(again->stages, SimResultStage, st);
      const PlannerStage *ps = &g_array_index(p->stages, PlannerStage, st);
      ck_assert_msg((guint64)rs->peak_device_bytes <= budget, "budget %.2f: stage %u peaks at %" G_GINT64_FORMAT,
                    fractions[f], st, rs->peak_device_bytes);
      ck_assert_int_eq(ps->peak_device_bytes, rs->peak_device_bytes);
      ck_assert_int_eq(ps->peak_host_bytes, rs->peak_host_bytes);
      /* Even cut: stage st runs layers 4 st .. 4 st + 3. */
      ck_assert_uint_eq(ps->layers->len, 4);
      for (guint i = 0; i < 4; i++)
        ck_assert_uint_eq(g_array_index(ps->layers, guint, i), 4 * st + i);
    }
    ck_assert(again->step_ms == p->result->step_ms);
    ck_assert(again->fits);

    /* Stage 0 holds four times stage 3's activations: it needs more layers
     * out of the way, and stage 3 (within the budget under resident) none. */
    ck_assert_msg(non_keep(p, 0) > non_keep(p, 3), "budget %.2f: stage 0 acts on %u layers, stage 3 on %u",
                  fractions[f], non_keep(p, 0), non_keep(p, 3));
    ck_assert_uint_eq(non_keep(p, 3), 0);
    ck_assert_uint_gt(non_keep(p, 0), 0);

    /* The bound is resident's step, and it is one. */
    ck_assert(p->resident_bound);
    ck_assert(!p->proven && !p->optimal && !p->lagrangian);
    ck_assert(p->lower_bound_ms == resident->step_ms);
    ck_assert(p->result->step_ms >= resident->step_ms);
    ck_assert_close(p->gap, p->result->step_ms / resident->step_ms - 1, 1e-12);

    /* Never slower than a fixed policy that fits, and one does. */
    ck_assert_uint_gt(beats_fixed_policies(s, p, budget, fractions[f]), 0);
    /* Every layer has its note, and the plan is a plan of the whole model. */
    ck_assert_uint_eq(p->notes->len, 16);
    ck_assert_uint_eq(p->policy->actions->len, 16);
    ck_assert(p->evaluations > 0);
  }
}
END_TEST

START_TEST(pipeline_plan_below_one_layer_is_infeasible)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(pipeline_text);
  /* No static bytes: one layer's 100 MB tensor exists on some GPU whatever
   * the plan (an offload copies it after its forward made it). */
  guint64 budget = 50000000;
  g_autoptr(GError) error = NULL;
  g_autoptr(PlannerPlan) p = planner_plan(s, budget, &error);
  ck_assert_msg(p != NULL, "%s", error ? error->message : "");
  ck_assert(!p->feasible);
  ck_assert(!p->infeasible_proven);
  ck_assert_uint_gt(p->min_budget, budget);
  ck_assert_uint_ge(p->min_budget, 100000000);
  ck_assert_str_eq(p->verdict, "reject");
  /* The plan shown reaches that peak on its worst stage... */
  ck_assert_int_eq(p->result->peak_device.bytes, (gint64)p->min_budget);
  gint64 worst = 0;
  for (guint st = 0; st < p->stages->len; st++)
    worst = MAX(worst, g_array_index(p->stages, PlannerStage, st).peak_device_bytes);
  ck_assert_int_eq(worst, (gint64)p->min_budget);
  /* ...and under that budget a plan fits. */
  g_autoptr(PlannerPlan) q = planner_plan(s, p->min_budget, &error);
  ck_assert(q->feasible);
  ck_assert((guint64)q->result->peak_device.bytes <= p->min_budget);
}
END_TEST

/* Every keep/offload/recompute/recompute+offload vector under every
 * schedule the planner tries: the least step whose worst GPU fits. */
static double
best_of_every_plan(const SimScenario *s, guint64 budget)
{
  guint n = sim_workload_n_layers(s->workload), n_options;
  const PlannerOption *options = planner_plan_options(&n_options);
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  g_autoptr(SimPolicy) policy = sim_policy_new("enum", SIM_POLICY_PLAN);
  policy->actions = g_array_sized_new(FALSE, TRUE, sizeof(SimAction), n);
  g_array_set_size(policy->actions, n);
  policy->dedup = TRUE;
  guint total = 1;
  for (guint i = 0; i < n; i++)
    total *= SIM_ACTION_N_PLAIN;
  double best = INFINITY;
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
      ck_assert_msg(run != NULL, "%s", error ? error->message : "");
      if ((guint64)run->peak[SIM_POOL_DEVICE].bytes <= budget)
        best = MIN(best, run->step);
    }
  }
  return best * 1e3;
}

/* Unequal layers (a slow one, a cheap-to-recompute one, a big input), so
 * that which layers act matters, not only how many. */
static const char *unequal_text = "[device]\nmemory = 80GiB\n"
                                  "[link]\nh2d_bandwidth = 30GB/s\nd2h_bandwidth = 30GB/s\nlatency = 5us\n"
                                  "compute_slowdown = 0.05\n"
                                  "[model]\nlayers = 6\nforward = 1ms\ninput = 4MB\n"
                                  "tensors = attn:40MB, mlp:60MB, mask:2MB:keep\nstatic = 200MB\nworkspace = 5MB\n"
                                  "[layer.1]\nforward = 3ms\ntensors = big:150MB\n"
                                  "[layer.2]\nforward = 0.3ms\nbackward = 0.6ms\ntensors = a:80MB, b:5MB\n"
                                  "[layer.5]\ninput = 40MB\n";

/* On small pipelines the planner's plan is never faster than the best of
 * every plan that fits (it would not be one), and it is within 1 % of it:
 * it is that plan on all of these when this test was written, and at
 * 900 MB under GPipe only through one-layer moves (2 % slower without). */
START_TEST(pipeline_plan_against_every_plan_on_small_pipelines)
{
  const struct {
    const char *parallel;
    guint64 budgets[3];
  } cases[] = {
    { "[parallel]\npp = 2\nmicrobatches = 4\nschedule = 1f1b\n", { 700000000, 500000000, 300000000 } },
    { "[parallel]\npp = 3\nmicrobatches = 6\nschedule = gpipe\n", { 900000000, 600000000, 400000000 } },
  };
  for (guint k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autofree char *text = g_strconcat(unequal_text, cases[k].parallel, NULL);
    g_autoptr(SimScenario) s = test_scenario_from_text(text);
    for (guint b = 0; b < G_N_ELEMENTS(cases[k].budgets); b++) {
      guint64 budget = cases[k].budgets[b];
      double best = best_of_every_plan(s, budget);
      ck_assert(isfinite(best));
      g_autoptr(GError) error = NULL;
      /* The search against the enumeration, both of allocated bytes. */
      g_autoptr(PlannerPlan) p = planner_plan_allocated(s, budget, SIM_FRAMEWORK_NONE, &error);
      ck_assert_msg(p != NULL && p->feasible, "%s", error ? error->message : "infeasible");
      ck_assert((guint64)p->result->peak_device.bytes <= budget);
      ck_assert_msg(p->result->step_ms >= best * (1 - 1e-12), "case %u budget %" G_GUINT64_FORMAT
                    ": plan %.6f ms below the best of every plan %.6f ms", k, budget, p->result->step_ms, best);
      ck_assert_msg(p->result->step_ms <= best * 1.01, "case %u budget %" G_GUINT64_FORMAT ": plan %.6f ms, best %.6f ms",
                    k, budget, p->result->step_ms, best);
      /* A few hundred runs, not the 16,384 of the enumeration. */
      ck_assert_uint_lt(p->evaluations, 1000);
    }
  }
}
END_TEST

/* Past PLANNER_STAGES_LOCKSTEP_SLICES slices (here 48 layers x 32
 * micro-batches) the stages are sized in lockstep on a proxy of pp + 1
 * micro-batches: the plan still fits every stage in a fresh run of the
 * whole step, its figures are that run's, it beats the fixed policies that
 * fit, and it costs tens of runs, not the thorough search's thousands. */
START_TEST(pipeline_plan_in_lockstep_past_the_slices)
{
  g_autoptr(GString) text = g_string_new(pipeline_text);
  g_string_replace(text, "layers = 16", "layers = 48", 1);
  g_string_replace(text, "microbatches = 8", "microbatches = 32", 1);
  g_autoptr(SimScenario) s = test_scenario_from_text(text->str);
  ck_assert_uint_gt(48 * 32, PLANNER_STAGES_LOCKSTEP_SLICES);
  g_autoptr(SimResult) resident = test_evaluate(s, "resident");
  gint64 first = g_array_index(resident->stages, SimResultStage, 0).peak_device_bytes;
  gint64 last = g_array_index(resident->stages, SimResultStage, 3).peak_device_bytes;
  const double fractions[] = { 0.3, 0.6 };
  for (guint f = 0; f < G_N_ELEMENTS(fractions); f++) {
    guint64 budget = (guint64)last + (guint64)(fractions[f] * (double)(first - last));
    g_autoptr(GError) error = NULL;
    g_autoptr(PlannerPlan) p = planner_plan_allocated(s, budget, SIM_FRAMEWORK_NONE, &error);
    ck_assert_msg(p != NULL && p->feasible, "%s", error ? error->message : "infeasible");
    g_autoptr(SimResult) again = evaluate_policy(s, p->policy, budget);
    for (guint st = 0; st < 4; st++) {
      const SimResultStage *rs = &g_array_index(again->stages, SimResultStage, st);
      ck_assert_msg((guint64)rs->peak_device_bytes <= budget, "budget %.2f: stage %u peaks at %" G_GINT64_FORMAT,
                    fractions[f], st, rs->peak_device_bytes);
      ck_assert_int_eq(g_array_index(p->stages, PlannerStage, st).peak_device_bytes, rs->peak_device_bytes);
    }
    ck_assert(again->step_ms == p->result->step_ms);
    ck_assert_uint_gt(non_keep(p, 0), non_keep(p, 3));
    ck_assert_uint_gt(beats_fixed_policies(s, p, budget, fractions[f]), 0);
    ck_assert_uint_lt(p->evaluations, 100);
  }
}
END_TEST

/* A framework's schedule is the one tried; a single-GPU plan has no stages. */
START_TEST(pipeline_plan_with_a_framework_and_single_gpu_unchanged)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(pipeline_text);
  g_autoptr(GError) error = NULL;
  g_autoptr(PlannerPlan) p = planner_plan_framework(s, 1000000000, SIM_FRAMEWORK_VERL, &error);
  ck_assert_msg(p != NULL, "%s", error ? error->message : "");
  ck_assert(p->feasible && p->resident_bound);
  ck_assert_int_eq(p->policy->framework, SIM_FRAMEWORK_VERL);
  g_autoptr(SimResult) again = evaluate_policy(s, p->policy, 1000000000);
  for (guint st = 0; st < again->stages->len; st++)
    ck_assert(g_array_index(again->stages, SimResultStage, st).peak_device_bytes <= 1000000000);

  g_autoptr(SimScenario) one = test_scenario_from_text(
    "[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"
    "[model]\nlayers = 4\nforward = 1ms\nbackward = 2ms\ntensors = a:100MB\ninput = 10MB\n");
  g_autoptr(PlannerPlan) q = planner_plan(one, 250000000, &error);
  ck_assert_ptr_nonnull(q);
  ck_assert_ptr_null(q->stages);
  ck_assert(!q->resident_bound && q->proven);
}
END_TEST

START_TEST(pipeline_plan_cli_text_and_json)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = g_build_filename(dir, "pipeline.ini", NULL);
  ck_assert(g_file_set_contents(path, pipeline_text, -1, NULL));
  g_auto(TestRun) text = test_offsim("plan", path, "--budget", "1000MB", NULL);
  ck_assert_int_eq(text.status, 0);
  ck_assert_ptr_nonnull(strstr(text.out, "resident bound (pipeline: not proven)"));
  ck_assert_ptr_null(strstr(text.out, "proven optimal"));
  ck_assert_ptr_null(strstr(text.out, "proven bound"));
  ck_assert_ptr_nonnull(strstr(text.out, "\nstage  layers "));
  ck_assert_ptr_nonnull(strstr(text.out, "\n    3  L12-L15 "));
  ck_assert_ptr_nonnull(strstr(text.out, "L12-L15 keep\n"));

  g_auto(TestRun) json = test_offsim("plan", path, "--budget", "1000MB", "--format", "json", NULL);
  ck_assert_int_eq(json.status, 0);
  g_autoptr(JsonParser) parser = json_parser_new();
  ck_assert(json_parser_load_from_data(parser, json.out, -1, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(parser));
  /* Every member of a single-GPU plan, in its order, then `stages`. */
  static const char *members[] = { "step_ms", "peak_device_bytes", "exposed_transfer_ms", "recompute_ms", "actions",
                                   "prefetch", "lower_bound_ms", "gap", "verdict", "feasible", "budget_bytes",
                                   "min_budget_bytes", "mode", "inflight", "resident_step_ms",
                                   "resident_peak_device_bytes", "verdict_reason", "evaluations", "optimal", "bound",
                                   "states", "peak_reserved_bytes", "fits", "layers", "stages" };
  g_autoptr(GList) names = json_object_get_members(o);
  ck_assert_uint_eq(g_list_length(names), G_N_ELEMENTS(members));
  GList *m = names;
  for (guint i = 0; i < G_N_ELEMENTS(members); i++, m = m->next)
    ck_assert_str_eq(m->data, members[i]);
  ck_assert_str_eq(json_object_get_string_member(o, "bound"), "resident");
  ck_assert(!json_object_get_boolean_member(o, "optimal"));
  ck_assert(json_object_get_double_member(o, "lower_bound_ms") == json_object_get_double_member(o, "resident_step_ms"));
  JsonArray *stages = json_object_get_array_member(o, "stages");
  ck_assert_uint_eq(json_array_get_length(stages), 4);
  static const char *stage_members[] = { "stage", "layers", "peak_device_bytes", "peak_host_bytes", "actions" };
  JsonArray *actions = json_object_get_array_member(o, "actions");
  for (guint st = 0; st < 4; st++) {
    JsonObject *so = json_array_get_object_element(stages, st);
    g_autoptr(GList) keys = json_object_get_members(so);
    GList *k = keys;
    for (guint i = 0; i < G_N_ELEMENTS(stage_members); i++, k = k->next)
      ck_assert_str_eq(k->data, stage_members[i]);
    ck_assert_int_eq(json_object_get_int_member(so, "stage"), st);
    ck_assert(json_object_get_int_member(so, "peak_device_bytes") <= 1000000000);
    JsonArray *layers = json_object_get_array_member(so, "layers");
    JsonArray *stage_actions = json_object_get_array_member(so, "actions");
    ck_assert_uint_eq(json_array_get_length(layers), 4);
    ck_assert_uint_eq(json_array_get_length(stage_actions), 4);
    for (guint i = 0; i < 4; i++) {
      gint64 layer = json_array_get_int_element(layers, i);
      ck_assert_int_eq(layer, 4 * st + i);
      ck_assert_str_eq(json_array_get_string_element(stage_actions, i),
                       json_array_get_string_element(actions, (guint)layer));
    }
  }

  /* compare --budget plans the pipeline the same way and says so. */
  g_auto(TestRun) compare = test_offsim("compare", path, "--budget", "1000MB", NULL);
  ck_assert_int_eq(compare.status, 0);
  ck_assert_ptr_nonnull(strstr(compare.out, "resident bound (pipeline: not proven)"));
  ck_assert_ptr_nonnull(strstr(compare.out, "\nstage  layers "));

  g_auto(TestRun) tight = test_offsim("plan", path, "--budget", "50MB", NULL);
  ck_assert_int_eq(tight.status, 4);
  ck_assert_ptr_nonnull(strstr(tight.out, "no plan fits"));
  ck_assert_ptr_null(strstr(tight.out, "proven by the exact search"));
}
END_TEST

static Suite *
plan_stages_suite(void)
{
  Suite *s = suite_create("plan_stages");
  TCase *tc = tcase_create("pipeline");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, pipeline_plan_fits_every_stage_and_beats_the_fixed_policies);
  tcase_add_test(tc, pipeline_plan_below_one_layer_is_infeasible);
  tcase_add_test(tc, pipeline_plan_against_every_plan_on_small_pipelines);
  tcase_add_test(tc, pipeline_plan_in_lockstep_past_the_slices);
  tcase_add_test(tc, pipeline_plan_with_a_framework_and_single_gpu_unchanged);
  tcase_add_test(tc, pipeline_plan_cli_text_and_json);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  return test_run_suite(plan_stages_suite());
}
