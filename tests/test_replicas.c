/* tests/test_replicas.c — identical data-parallel replicas run once
 * (sim_lower_pipeline_once_into, sim_program_set_copies): every figure,
 * per-GPU table and report the same as the run of every replica.
 *
 * Each case is evaluated both ways, by an evaluator that lowers every
 * replica (sim_evaluate_set_every_replica) and one that lowers them once,
 * and compared to the bit: the SimRun (step, sums, both peaks with their
 * pool, op phase and layer, every GPU's peaks, busy, host and
 * communication times), the SimResult (every field, the stages' table,
 * where each peak was and what was live) and the table, CSV and JSON the
 * CLI prints from them.  The cases: every bundled scenario with
 * [parallel], generated transformers over dp 2 .. 8 under every sharding,
 * activation offload and CPU offload, a mixture of experts with expert
 * groups, and the cases where the replicas must all run: copies behind
 * shared [node] links, a tensor-parallel group that crosses a node. */
#include "testutil.h"

#include "cli/report.h"
#include "lower/pipeline.h"
#include "result/evaluate.h"

#include <string.h>

static void
assert_same_peak(const SimPeak *a, const SimPeak *b, const char *what)
{
  ck_assert_msg(a->bytes == b->bytes, "%s: peak %" G_GINT64_FORMAT " B, every replica %" G_GINT64_FORMAT " B", what,
                a->bytes, b->bytes);
  ck_assert_msg(a->time == b->time, "%s: peak at %.17g s, every replica %.17g s", what, a->time, b->time);
  ck_assert_msg(a->pool == b->pool, "%s: peak in pool %u, every replica %u", what, a->pool, b->pool);
  ck_assert_msg(a->phase == b->phase && a->layer == b->layer, "%s: peak's op differs", what);
}

static void
assert_same_doubles(const GArray *a, const GArray *b, const char *what)
{
  ck_assert_msg((a == NULL) == (b == NULL), "%s: one run has it", what);
  if (a == NULL)
    return;
  ck_assert_uint_eq(a->len, b->len);
  for (guint i = 0; i < a->len; i++)
    ck_assert_msg(g_array_index(a, double, i) == g_array_index(b, double, i), "%s[%u]: %.17g, every replica %.17g",
                  what, i, g_array_index(a, double, i), g_array_index(b, double, i));
}

static void
assert_same_run(const SimRun *a, const SimRun *b, const char *what)
{
  ck_assert_msg(a->step == b->step, "%s: step %.17g, every replica %.17g", what, a->step, b->step);
  ck_assert_msg(a->compute_work == b->compute_work && a->recompute_work == b->recompute_work &&
                  a->optimizer_work == b->optimizer_work,
                "%s: compute sums differ", what);
  ck_assert_msg(a->comm_exposed == b->comm_exposed, "%s: exposed communication differs", what);
  for (int d = 0; d < SIM_DIR_COUNT; d++) {
    ck_assert_uint_eq(a->copy_bytes[d], b->copy_bytes[d]);
    ck_assert_uint_eq(a->copies[d], b->copies[d]);
  }
  for (int k = 0; k < SIM_POOL_COUNT; k++)
    assert_same_peak(&a->peak[k], &b->peak[k], what);
  ck_assert_msg((a->pools == NULL) == (b->pools == NULL), "%s: one run has per-GPU peaks", what);
  if (a->pools) {
    ck_assert_uint_eq(a->pools->len, b->pools->len);
    for (guint i = 0; i < a->pools->len; i++)
      assert_same_peak(&g_array_index(a->pools, SimPeak, i), &g_array_index(b->pools, SimPeak, i), what);
  }
  assert_same_doubles(a->busy, b->busy, "busy");
  assert_same_doubles(a->host_busy, b->host_busy, "host_busy");
  assert_same_doubles(a->host_wait, b->host_wait, "host_wait");
}

static void
assert_same_string(const char *a, const char *b, const char *what)
{
  ck_assert_msg(g_strcmp0(a, b) == 0, "%s: '%s', every replica '%s'", what, a ? a : "(null)", b ? b : "(null)");
}

static void
assert_same_result_peak(const SimResultPeak *a, const SimResultPeak *b, const char *what)
{
  ck_assert_msg(a->bytes == b->bytes && a->time_ms == b->time_ms && a->layer == b->layer, "%s: peak differs", what);
  assert_same_string(a->phase, b->phase, what);
  assert_same_string(a->where, b->where, what);
  assert_same_string(a->live, b->live, what);
}

static void
assert_same_result(const SimResult *a, const SimResult *b, const char *what)
{
  ck_assert_msg(a->step_ms == b->step_ms && a->compute_ms == b->compute_ms && a->recompute_ms == b->recompute_ms &&
                  a->exposed_transfer_ms == b->exposed_transfer_ms && a->optimizer_ms == b->optimizer_ms &&
                  a->comm_ms == b->comm_ms,
                "%s: times differ (step %.17g, every replica %.17g)", what, a->step_ms, b->step_ms);
  ck_assert_msg(a->gemm_ms == b->gemm_ms && a->attention_ms == b->attention_ms && a->memory_ms == b->memory_ms &&
                  a->host_wait_ms == b->host_wait_ms,
                "%s: kernel-class or host times differ", what);
  ck_assert_uint_eq(a->saved_bytes, b->saved_bytes);
  ck_assert_uint_eq(a->d2h_bytes, b->d2h_bytes);
  ck_assert_uint_eq(a->h2d_bytes, b->h2d_bytes);
  ck_assert_uint_eq(a->d2h_copies, b->d2h_copies);
  ck_assert_uint_eq(a->h2d_copies, b->h2d_copies);
  assert_same_result_peak(&a->peak_device, &b->peak_device, what);
  assert_same_result_peak(&a->peak_host, &b->peak_host, what);
  ck_assert_uint_eq(a->capacity_bytes, b->capacity_bytes);
  ck_assert_msg(a->peak_reserved_bytes == b->peak_reserved_bytes && a->fragmentation_bytes == b->fragmentation_bytes,
                "%s: reserved %" G_GUINT64_FORMAT " B, every replica %" G_GUINT64_FORMAT " B", what,
                a->peak_reserved_bytes, b->peak_reserved_bytes);
  ck_assert_int_eq(a->fits, b->fits);
  assert_same_string(a->time_model, b->time_model, what);
  assert_same_string(a->note, b->note, what);
  ck_assert_msg((a->stages == NULL) == (b->stages == NULL), "%s: one result has stages", what);
  if (a->stages) {
    ck_assert_uint_eq(a->stages->len, b->stages->len);
    /* Plain numbers, zero-filled (g_array_new with clear): whole records compare. */
    ck_assert_msg(memcmp(a->stages->data, b->stages->data, a->stages->len * sizeof(SimResultStage)) == 0,
                  "%s: the stages' table differs", what);
  }
}

/* The table, CSV and JSON of both, compared as text. */
static void
assert_same_reports(const SimScenario *s, GPtrArray *once, GPtrArray *every)
{
  for (int f = 0; f < CLI_FORMAT_COUNT; f++) {
    g_autofree char *a = cli_report_format(s, once, (CliFormat)f, FALSE);
    g_autofree char *b = cli_report_format(s, every, (CliFormat)f, FALSE);
    ck_assert_msg(strcmp(a, b) == 0, "%s: the report in format %d differs:\n%s\n---\n%s", s->name, f, a, b);
  }
}

/* What comparing a scenario found: policies whose replicas ran once, and
 * those that ran every replica. */
typedef struct {
  guint once, every;
} Compared;

/* Every policy of `s` both ways.  Returns how many ran once. */
static Compared
compare_both_ways(const SimScenario *s)
{
  g_autoptr(SimEvaluator) once = sim_evaluate_new();
  g_autoptr(SimEvaluator) every = sim_evaluate_new();
  sim_evaluate_set_every_replica(every, TRUE);
  g_autoptr(GPtrArray) results_once = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  g_autoptr(GPtrArray) results_every = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  Compared c = { 0, 0 };
  guint gpus = sim_parallel_gpus(&s->parallel);
  for (guint k = 0; k < s->policies->len; k++) {
    const SimPolicy *policy = g_ptr_array_index(s->policies, k);
    g_autofree char *what = g_strdup_printf("%s, %s", s->name, policy->name);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimRun) a = sim_evaluate_run(once, s, policy, &error);
    ck_assert_msg(a != NULL, "%s: %s", what, error ? error->message : "");
    const SimProgram *p = sim_evaluate_program(once);
    g_autoptr(SimRun) b = sim_evaluate_run(every, s, policy, &error);
    ck_assert_msg(b != NULL, "%s: %s", what, error ? error->message : "");
    const SimProgram *full = sim_evaluate_program(every);
    ck_assert_uint_eq(full->n_gpus, gpus);
    ck_assert(!full->copied);
    ck_assert_uint_eq(sim_program_step_gpus(p), gpus);
    if (p->copied) {
      ck_assert_uint_lt(p->n_gpus, gpus);
      ck_assert_uint_lt(sim_program_n_ops(p), sim_program_n_ops(full));
      ck_assert_uint_lt(a->events, b->events);
      c.once++;
    } else {
      ck_assert_uint_eq(sim_program_n_ops(p), sim_program_n_ops(full));
      c.every++;
    }
    assert_same_run(a, b, what);
    SimResult *ra = sim_evaluate(once, s, policy, NULL, &error);
    ck_assert_msg(ra != NULL, "%s: %s", what, error ? error->message : "");
    SimResult *rb = sim_evaluate(every, s, policy, NULL, &error);
    ck_assert_msg(rb != NULL, "%s: %s", what, error ? error->message : "");
    assert_same_result(ra, rb, what);
    g_ptr_array_add(results_once, ra);
    g_ptr_array_add(results_every, rb);
  }
  assert_same_reports(s, results_once, results_every);
  return c;
}

static void
add_files(GPtrArray *paths, const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  ck_assert_ptr_nonnull(d);
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL)
    if (g_str_has_suffix(name, ".ini"))
      g_ptr_array_add(paths, g_build_filename(dir, name, NULL));
}

static gint
compare_paths(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every .ini of scenarios/ and of its folders (but profiles/, which
 * scenarios include), the ones with [parallel]. */
START_TEST(bundled_scenarios_run_once_as_every_replica)
{
  g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
  add_files(paths, OFFSIM_SCENARIOS);
  g_autoptr(GDir) top = g_dir_open(OFFSIM_SCENARIOS, 0, NULL);
  const char *name;
  while ((name = g_dir_read_name(top)) != NULL) {
    g_autofree char *sub = g_build_filename(OFFSIM_SCENARIOS, name, NULL);
    if (g_file_test(sub, G_FILE_TEST_IS_DIR) && strcmp(name, "profiles") != 0)
      add_files(paths, sub);
  }
  g_ptr_array_sort(paths, compare_paths);
  guint parallel = 0, data_parallel = 0;
  Compared all = { 0, 0 };
  for (guint i = 0; i < paths->len; i++) {
    const char *path = g_ptr_array_index(paths, i);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = sim_scenario_load_file(path, &error);
    ck_assert_msg(s != NULL, "%s: %s", path, error ? error->message : "");
    if (!sim_parallel_active(&s->parallel))
      continue;
    parallel++;
    data_parallel += s->parallel.dp > 1;
    Compared c = compare_both_ways(s);
    /* Without replicas there is nothing to leave out. */
    if (s->parallel.dp == 1)
      ck_assert_uint_eq(c.once, 0);
    all.once += c.once;
    all.every += c.every;
  }
  /* llama-3.1-8b-dp8, -pp4, pipeline-tiny, qwen3-30b-a3b-ep8 at least. */
  ck_assert_uint_ge(parallel, 4);
  ck_assert_uint_ge(data_parallel, 3);
  /* resident and checkpoint of dp8 and pp4 copy nothing behind their
   * shared switches; ep8 has no [node] limit: once.  Their offload
   * policies copy behind the shared switches: every replica. */
  ck_assert_uint_ge(all.once, 5);
  ck_assert_uint_ge(all.every, 2);
}
END_TEST

#define TRANSFORMER                                                                                        \
  "[scenario]\nname = generated\n"                                                                         \
  "[device]\nmemory = 80GiB\nmatmul_tflops = 400\nhbm_bandwidth = 3TB/s\n"                                 \
  "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\ncompute_slowdown = 0.05\n"                      \
  "[transformer]\nhidden = 256\nlayers = 4\nheads = 4\nffn = 1024\nvocab = 1000\nbatch = 1\nseq = 128\n"   \
  "dtype = bf16\noptimizer = adamw\n"                                                                      \
  "[policy.resident]\nkind = resident\n[policy.checkpoint]\nkind = checkpoint\n"                           \
  "[policy.async]\nkind = offload\n[policy.sync]\nkind = offload\nmode = sync\n"                       \
  "[policy.selective]\nkind = checkpoint\nmode = selective\n"

/* dp 2 .. 8 under every sharding, on one stage and on two, with
 * activation offload among the policies, CPU offload of the optimizer and
 * of the weights, small buckets and launches (the host model): every
 * replica run once where that is exact, and always the same figures. */
START_TEST(generated_replicas_run_once)
{
  static const char *const shardings[] = { "none", "optimizer", "gradients", "full" };
  static const char *const extras[] = {
    "",
    "[parallel]\noffload_optimizer = true\n",
    "[parallel]\nbucket = 1MiB\n[device]\nlaunch_overhead = 5us\n",
  };
  guint once = 0, every = 0;
  for (guint dp = 2; dp <= 8; dp++)
    for (guint k = 0; k < G_N_ELEMENTS(shardings); k++)
      for (guint pp = 1; pp <= 2; pp++)
        for (guint e = 0; e < G_N_ELEMENTS(extras); e++) {
          /* Every case once on one stage; the extras on two stages at some widths only. */
          if (pp == 2 && (dp % 3 != 0 || e > 0))
            continue;
          if (e == 1 && k == 0) /* CPU offload moves a replica's shard: sharding from optimizer on */
            continue;
          g_autofree char *over = g_strdup_printf("[parallel]\ndp = %u\npp = %u\nmicrobatches = %u\nsharding = %s\n",
                                                  dp, pp, 2 * pp, shardings[k]);
          g_autofree char *merged = test_ini_merge(over, extras[e]);
          g_autoptr(SimScenario) s = test_scenario_merged(TRANSFORMER, merged);
          guint kept = sim_lower_pipeline_replicas(s->workload, &s->machine.link, &s->parallel);
          /* Full sharding keeps the first and the last replica. */
          ck_assert_uint_eq(kept, k == 3 ? MIN(dp, 2u) : 1u);
          Compared c = compare_both_ways(s);
          ck_assert_uint_eq(c.every, kept == dp ? s->policies->len : 0);
          once += c.once;
          every += c.every;
        }
  ck_assert_uint_gt(once, 100);
  /* dp 2 under full sharding: nothing to leave out. */
  ck_assert_uint_gt(every, 0);
  /* Full sharding where it shows: the peak is the gather of layer 1's
   * weights on stage 0.0 ("comm L1 all-gather weights"), which starts at
   * the instant a forward op does.  The first replica's gather starts
   * after that op, the last replica's before it: the first replica
   * lowered alone named the forward op instead (tried). */
  g_autoptr(SimScenario) fsdp = test_scenario_merged(
    TRANSFORMER, "[transformer]\nhidden = 1024\nlayers = 2\nheads = 8\nffn = 4096\nvocab = 32000\n"
                 "[parallel]\ndp = 4\nsharding = full\n");
  ck_assert_uint_eq(compare_both_ways(fsdp).once, fsdp->policies->len);
  /* Offloaded weights under full sharding: each gather's shard comes from the host. */
  g_autoptr(SimScenario) s = test_scenario_merged(TRANSFORMER, "[parallel]\ndp = 4\nsharding = full\n"
                                                               "offload_params = true\noffload_optimizer = true\n");
  ck_assert_uint_eq(compare_both_ways(s).once, s->policies->len);
}
END_TEST

/* A mixture of experts (test_expert_parallel.c's) over expert groups: the
 * expert-data-parallel barriers count the replicas of their group that
 * run. */
#define MOE                                                                                               \
  "[scenario]\nname = moe\n"                                                                              \
  "[device]\nmemory = 80GiB\nmatmul_tflops = 400\nhbm_bandwidth = 3TB/s\n"                               \
  "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"                                             \
  "[node]\ngpus = 8\ncollective_bandwidth = 100GB/s\ncollective_latency = 10us\ncollective_slowdown = 0.1\n" \
  "[transformer]\nhidden = 1024\nlayers = 2\nheads = 8\nffn = 4096\nvocab = 1000\nbatch = 1\nseq = 1024\n" \
  "dtype = bf16\nexperts = 8\ntop_k = 2\nmoe_ffn = 512\n"                                                 \
  "[policy.resident]\nkind = resident\n[policy.async]\nkind = offload\n"

START_TEST(expert_groups_run_once)
{
  static const char *const parallels[] = {
    "[parallel]\ndp = 8\nep = 2\nbucket = 4MiB\n",
    "[parallel]\ndp = 8\nep = 4\n",
    "[parallel]\ndp = 8\nep = 8\n",
    "[parallel]\ndp = 4\nep = 2\nbucket = 1MiB\n[device]\nlaunch_overhead = 5us\n",
    "[parallel]\ndp = 4\nep = 2\npp = 2\nmicrobatches = 4\n",
    /* 2 GPUs a node: every replica's groups span as many nodes. */
    "[node]\ngpus = 2\n[network]\nbandwidth = 25GB/s\nlatency = 100us\n[parallel]\ndp = 4\nep = 2\n",
  };
  for (guint i = 0; i < G_N_ELEMENTS(parallels); i++) {
    g_autoptr(SimScenario) s = test_scenario_merged(MOE, parallels[i]);
    ck_assert_uint_lt(sim_lower_pipeline_replicas(s->workload, &s->machine.link, &s->parallel), s->parallel.dp);
    Compared c = compare_both_ways(s);
    ck_assert_uint_eq(c.once, s->policies->len);
  }
}
END_TEST

/* Where the replicas run otherwise, every one is lowered. */
START_TEST(replicas_that_differ_all_run)
{
  /* Copies behind shared switches and sockets: the offload policies fall
   * back, resident and checkpoint (no copy) still run once. */
  g_autoptr(SimScenario) shared = test_scenario_merged(
    TRANSFORMER, "[parallel]\ndp = 4\n[node]\ngpus = 4\ngpus_per_switch = 2\nswitch_bandwidth = 30GB/s\n"
                 "sockets = 2\nhost_memory_bandwidth = 80GB/s\n");
  ck_assert_uint_eq(sim_lower_pipeline_replicas(shared->workload, &shared->machine.link, &shared->parallel), 1);
  Compared c = compare_both_ways(shared);
  ck_assert_uint_eq(c.every, 2); /* async, sync */
  ck_assert_uint_eq(c.once, shared->policies->len - 2);
  g_autoptr(SimEvaluator) ev = sim_evaluate_new();
  const SimPolicy *async = sim_scenario_policy(shared, "async");
  ck_assert_ptr_nonnull(async);
  g_autoptr(SimRun) run = sim_evaluate_run(ev, shared, async, NULL);
  ck_assert_ptr_nonnull(run);
  ck_assert(!sim_evaluate_program(ev)->copied);
  ck_assert_uint_eq(sim_evaluate_program(ev)->n_gpus, 4);
  ck_assert_uint_gt(run->copies[SIM_DIR_D2H], 0);
  /* CPU offload copies the optimizer's shards behind a shared switch: every policy falls back. */
  g_autoptr(SimScenario) host = test_scenario_merged(
    TRANSFORMER, "[parallel]\ndp = 4\nsharding = optimizer\noffload_optimizer = true\n[node]\ngpus = 4\ngpus_per_switch = 2\n"
                 "switch_bandwidth = 30GB/s\n");
  ck_assert_uint_eq(compare_both_ways(host).once, 0);
  /* tp 2 on nodes of 3 GPUs: replica 1's group (ranks 2, 3) crosses a node, replica 0's does not. */
  g_autoptr(SimScenario) tp = test_scenario_merged(
    TRANSFORMER, "[transformer]\ntp = 2\n[parallel]\ndp = 3\n[node]\ngpus = 3\n[network]\nbandwidth = 20GB/s\n");
  ck_assert_uint_eq(sim_lower_pipeline_replicas(tp->workload, &tp->machine.link, &tp->parallel), 3);
  ck_assert_uint_eq(compare_both_ways(tp).once, 0);
  /* tp 2 on nodes of 4: every group inside one. */
  g_autoptr(SimScenario) tp4 = test_scenario_merged(
    TRANSFORMER, "[transformer]\ntp = 2\n[parallel]\ndp = 4\n[node]\ngpus = 4\n[network]\nbandwidth = 20GB/s\n");
  ck_assert_uint_eq(sim_lower_pipeline_replicas(tp4->workload, &tp4->machine.link, &tp4->parallel), 1);
  ck_assert_uint_eq(compare_both_ways(tp4).once, tp4->policies->len);
}
END_TEST

/* A copied program maps its GPUs to the step's, and a detailed
 * evaluation, whose exports walk every GPU, runs every replica. */
START_TEST(copies_map_gpus_and_detail_runs_every_replica)
{
  g_autoptr(SimProgram) p = sim_program_new();
  for (guint g = 0; g < 4; g++)
    sim_program_add_stream_on(p, "s", g);
  ck_assert_uint_eq(sim_program_step_gpus(p), 4);
  ck_assert_uint_eq(sim_program_gpu_of(p, 3), 3);
  const guint copies[] = { 7, 1, 7, 1 };
  sim_program_set_copies(p, copies);
  ck_assert_uint_eq(sim_program_step_gpus(p), 16);
  const guint first[] = { 0, 7, 8, 15 };
  for (guint g = 0; g < 4; g++)
    ck_assert_uint_eq(sim_program_step_gpu(p, g), first[g]);
  const guint of[16] = { 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2, 2, 3 };
  for (guint sg = 0; sg < 16; sg++)
    ck_assert_uint_eq(sim_program_gpu_of(p, sg), of[sg]);
  sim_program_reset(p);
  ck_assert(!p->copied);

  g_autoptr(SimScenario) s = test_scenario_merged(TRANSFORMER, "[parallel]\ndp = 4\n");
  g_autoptr(SimResult) r = test_evaluate(s, "async");
  ck_assert_ptr_nonnull(r->program);
  ck_assert(!r->program->copied);
  ck_assert_uint_eq(r->program->n_gpus, 4);
}
END_TEST

static Suite *
replicas_suite(void)
{
  Suite *s = suite_create("replicas");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, bundled_scenarios_run_once_as_every_replica);
  tcase_add_test(tc, generated_replicas_run_once);
  tcase_add_test(tc, expert_groups_run_once);
  tcase_add_test(tc, replicas_that_differ_all_run);
  tcase_add_test(tc, copies_map_gpus_and_detail_runs_every_replica);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  return test_run_suite(replicas_suite());
}
