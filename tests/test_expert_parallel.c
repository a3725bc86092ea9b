/* tests/test_expert_parallel.c — expert parallelism ([parallel] ep): each
 * GPU's static memory holds its experts only, the dispatch and combine are
 * all-to-alls on the communication stream that the compute waits for
 * (nccl-tests' all-to-all, (n-1)/n of what each rank sends), and every bad
 * ep is exit 2 naming the file, [parallel] ep and what was expected.  All
 * against hand derivations. */
#include "testutil.h"

#include "base/error.h"
#include "engine/collective.h"
#include "input/transformer.h"

#include <math.h>
#include <string.h>

/* A small MoE transformer under Megatron's modules on a node whose
 * collectives cost round figures: 100 GB/s of bus bandwidth, 10 us, no
 * slowdown.  N = 1024 tokens, h = 1024, 8 heads of 128, 8 experts, top 2,
 * moe_ffn 512, bf16, Adam with fp32 master weights. */
#define BASE                                                                                              \
  "[device]\nmemory = 80GiB\nmatmul_tflops = 400\nhbm_bandwidth = 3TB/s\n"                               \
  "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"                                             \
  "[node]\ngpus = 8\ncollective_bandwidth = 100GB/s\ncollective_latency = 10us\ncollective_slowdown = 0\n" \
  "[transformer]\nhidden = 1024\nlayers = 2\nheads = 8\nffn = 4096\nvocab = 1000\nbatch = 1\nseq = 1024\n" \
  "dtype = bf16\nexperts = 8\ntop_k = 2\nmoe_ffn = 512\n"

/* Per layer: q, k, v, o 4 x 1024^2 = 4,194,304, two RMSNorms 2,048, the
 * router 1024 x 8 = 8,192, all replicated; each expert 3 x 1024 x 512 =
 * 1,572,864, 8 / ep of them on a GPU.  Embedding and LM head 1000 x 1024
 * each and the final norm 1,024: 2,049,024.  So per GPU
 *   ep 1: 2 x (4,204,544 + 12,582,912) + 2,049,024 = 35,623,936
 *   ep 2: 2 x (4,204,544 +  6,291,456) + 2,049,024 = 23,041,024
 *   ep 8: 2 x (4,204,544 +  1,572,864) + 2,049,024 = 13,603,840
 * parameters, at 16 bytes each (bf16 weight and gradient, fp32 master, m
 * and v): the static memory. */
START_TEST(static_bytes_per_gpu_by_hand)
{
  static const struct {
    const char *parallel;
    guint64 params;
  } cases[] = {
    { "[parallel]\ndp = 8\n", 35623936 },
    { "[parallel]\ndp = 8\nep = 2\n", 23041024 },
    { "[parallel]\ndp = 8\nep = 8\n", 13603840 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(SimScenario) s = test_scenario_merged(BASE, cases[i].parallel);
    ck_assert_uint_eq(s->workload->static_bytes, cases[i].params * 16);
  }
}
END_TEST

/* Balanced routing: each GPU routes N.k = 2048 rows and, with ep = 2, its
 * 4 experts take 2 x 4 x 256 = 2048 rows from the two ranks.  Each
 * all-to-all sends 2048 x 1024 x 2 B = 4 MiB from each rank: 10 us + 1/2 x
 * 4194304 / 100e9 s = 10 + 20.97152 us.  Four per MoE layer (the dispatch
 * and the combine, and their backward), two layers, two GPUs; each is
 * exposed: the op after it starts when it ends, so the step's exposed
 * communication holds a GPU's eight at least. */
START_TEST(all_to_all_on_the_comm_stream)
{
  g_autoptr(SimScenario) s = test_scenario_merged(BASE, "[parallel]\ndp = 2\nep = 2\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) r = test_evaluate(s, "resident");
  const double each = 10e-6 + 1.0 / 2 * 4194304 / 100e9;
  ck_assert_double_eq_tol(each, sim_collective_time(&s->machine.link, SIM_COLLECTIVE_ALL_TO_ALL, 4194304, 2, 1), 1e-18);
  guint n = 0, forward = 0;
  for (guint32 i = 0; i < sim_program_n_ops(r->program); i++) {
    const SimOp *op = sim_program_op(r->program, i);
    const char *label = sim_program_label(r->program, op->label);
    if (op->kind != SIM_OP_COLLECTIVE || !g_str_has_prefix(label, "all-to-all "))
      continue;
    n++;
    forward += strcmp(label, "all-to-all permute") == 0 || strcmp(label, "all-to-all expert_fc2") == 0;
    ck_assert_double_eq_tol(op->work, each, 1e-15);
    ck_assert_int_eq(op->phase, SIM_PHASE_COMM);
    double end = g_array_index(r->run->op_end, double, i);
    for (guint32 j = i + 1; j < sim_program_n_ops(r->program); j++)
      if (sim_program_op(r->program, j)->kind == SIM_OP_COMPUTE) {
        ck_assert_double_ge(g_array_index(r->run->op_start, double, j), end - 1e-12);
        break;
      }
  }
  ck_assert_uint_eq(n, 4 * 2 * 2);
  ck_assert_uint_eq(forward, 2 * 2 * 2);
  ck_assert_double_ge(r->comm_ms, 8 * each * 1e3 - 1e-9);
  /* Without expert parallelism there is none. */
  g_autoptr(SimScenario) one = test_scenario_merged(BASE, "[parallel]\ndp = 2\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) r1 = test_evaluate(one, "resident");
  for (guint32 i = 0; i < sim_program_n_ops(r1->program); i++)
    ck_assert(!g_str_has_prefix(sim_program_label(r1->program, sim_program_op(r1->program, i)->label), "all-to-all"));
}
END_TEST

/* Across nodes (2 GPUs a node, ep = 4 over replicas 0-3: two nodes) the
 * all-to-all runs at the network's figures: 100 us + 3/4 x 4 MiB / 25 GB/s
 * = 100 + 125.82912 us. */
START_TEST(all_to_all_across_nodes)
{
  g_autoptr(SimScenario) s = test_scenario_merged(BASE, "[node]\ngpus = 2\n[network]\nbandwidth = 25GB/s\nlatency = 100us\n"
                                      "[parallel]\ndp = 4\nep = 4\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) r = test_evaluate(s, "resident");
  guint n = 0;
  for (guint32 i = 0; i < sim_program_n_ops(r->program); i++) {
    const SimOp *op = sim_program_op(r->program, i);
    if (op->kind != SIM_OP_COLLECTIVE ||
        !g_str_has_prefix(sim_program_label(r->program, op->label), "all-to-all "))
      continue;
    n++;
    ck_assert_double_eq_tol(op->work, 100e-6 + 3.0 / 4 * 4194304 / 25e9, 1e-15);
  }
  ck_assert_uint_eq(n, 4 * 2 * 4);
}
END_TEST

/* The gradients' reduction, by hand (one bucket each: bucket = 1 GiB).
 * Per GPU the dense gradients are 2 x 4,204,544 + 2,049,024 = 10,458,112
 * parameters, 20,916,224 bytes in bf16, all-reduced over the 8 replicas:
 * 10 us + 2 x 7/8 x 20916224 / 100e9 s = 376.03392 us.  The routed
 * experts' are 2 layers x 8 / ep experts x 1,572,864 x 2 bytes:
 *   ep 1: 50,331,648 bytes, in the same buffers (Megatron's expert weights
 *         are `allreduce` only without expert parallelism): one all-reduce
 *         of 71,247,872 bytes over 8, 10 + 1246.83776 us;
 *   ep 2: 25,165,824 bytes over the 4 replicas holding the same experts,
 *         10 + 2 x 3/4 x 25165824 / 100e9 = 10 + 377.48736 us;
 *   ep 4: 12,582,912 bytes over 2, 10 + 125.82912 us;
 *   ep 8: no other replica holds them: none.
 * Every replica runs one of each. */
START_TEST(expert_gradients_reduced_over_their_group)
{
  static const struct {
    const char *parallel;
    double dense, experts; /* seconds of each reduction; experts 0: none */
  } cases[] = {
    { "[parallel]\ndp = 8\nbucket = 1GiB\n", 10e-6 + 2 * 7.0 / 8 * 71247872 / 100e9, 0 },
    { "[parallel]\ndp = 8\nep = 2\nbucket = 1GiB\n", 10e-6 + 2 * 7.0 / 8 * 20916224 / 100e9,
      10e-6 + 2 * 3.0 / 4 * 25165824 / 100e9 },
    { "[parallel]\ndp = 8\nep = 4\nbucket = 1GiB\n", 10e-6 + 2 * 7.0 / 8 * 20916224 / 100e9,
      10e-6 + 2 * 1.0 / 2 * 12582912 / 100e9 },
    { "[parallel]\ndp = 8\nep = 8\nbucket = 1GiB\n", 10e-6 + 2 * 7.0 / 8 * 20916224 / 100e9, 0 },
    /* 2 GPUs a node, dp 4, ep 2: replicas {0, 2} and {1, 3} hold the same
     * experts, on two nodes each: 100 us + 2 x 1/2 x 25165824 / 25e9. */
    { "[node]\ngpus = 2\n[network]\nbandwidth = 25GB/s\nlatency = 100us\n[parallel]\ndp = 4\nep = 2\nbucket = 1GiB\n",
      100e-6 + 2 * 3.0 / 4 * 20916224 / 25e9, 100e-6 + 2 * 1.0 / 2 * 25165824 / 25e9 },
  };
  static const guint replicas[] = { 8, 8, 8, 8, 4 };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *parallel = g_strconcat(cases[i].parallel, "[policy.resident]\nkind = resident\n", NULL);
    g_autoptr(SimScenario) s = test_scenario_merged(BASE, parallel);
    g_autoptr(SimResult) r = test_evaluate(s, "resident");
    guint dense = 0, experts = 0;
    for (guint32 k = 0; k < sim_program_n_ops(r->program); k++) {
      const SimOp *op = sim_program_op(r->program, k);
      const char *label = sim_program_label(r->program, op->label);
      if (op->kind != SIM_OP_COLLECTIVE)
        continue;
      if (strcmp(label, "all-reduce gradients") == 0) {
        dense++;
        ck_assert_msg(fabs(op->work - cases[i].dense) < 1e-12, "case %u: %.9g s, want %.9g", i, op->work,
                      cases[i].dense);
      } else if (strcmp(label, "all-reduce expert gradients") == 0) {
        experts++;
        ck_assert_msg(fabs(op->work - cases[i].experts) < 1e-12, "case %u: %.9g s, want %.9g", i, op->work,
                      cases[i].experts);
      }
    }
    ck_assert_uint_eq(dense, replicas[i]);
    ck_assert_uint_eq(experts, cases[i].experts > 0 ? replicas[i] : 0);
  }
}
END_TEST

/* Every bad ep names the file, [parallel] ep (or the key it meets) and
 * what was expected. */
START_TEST(bad_ep_is_named)
{
  static const struct {
    const char *overrides, *message;
  } cases[] = {
    { "[parallel]\ndp = 2\nep = 4\n", "[parallel] ep: expected a divisor of dp (2): Megatron takes the expert-parallel "
                                      "ranks from the data-parallel ones" },
    { "[parallel]\ndp = 4\nep = 4\n[transformer]\nexperts = 6\n",
      "[parallel] ep: expected a divisor of [transformer] experts (6), a whole number of experts on each GPU" },
    { "[parallel]\ndp = 2\nep = 2\n[transformer]\nops = hf\n",
      "[parallel] ep: expected 1 with [transformer] ops = hf (HuggingFace's modeling code runs every expert on every "
      "GPU: it has no expert parallelism" },
    { "[parallel]\ndp = 2\nep = 2\n[transformer]\nexperts = 0\ntop_k = 0\nmoe_ffn = 0\n",
      "[parallel] ep: expected 1 without [transformer] experts" },
    { "[parallel]\ndp = 2\nep = 2\nsharding = optimizer\n", "[parallel] sharding: expected none with ep = 2" },
    { "[parallel]\nep = 0\n", "[parallel] ep: " },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *msg = test_scenario_merged_error(BASE, cases[i].overrides);
    g_autofree char *want = g_strconcat("test.ini: ", cases[i].message, NULL);
    ck_assert_msg(strstr(msg, want) != NULL, "case %u: %s", i, msg);
  }
  /* A [model] has no experts to place. */
  g_autofree char *model = test_scenario_error("[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 50GB/s\n"
                                               "d2h_bandwidth = 50GB/s\n[model]\nlayers = 2\nforward = 1ms\n"
                                               "input = 1MiB\ntensors = x:1MiB\n[parallel]\ndp = 2\nep = 2\n");
  ck_assert_msg(strstr(model, "test.ini: [parallel] ep: expected 1 for a workload without experts") != NULL, "%s",
                model);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("expert_parallel");
  TCase *tc = tcase_create("ep");
  tcase_add_test(tc, static_bytes_per_gpu_by_hand);
  tcase_add_test(tc, all_to_all_on_the_comm_stream);
  tcase_add_test(tc, all_to_all_across_nodes);
  tcase_add_test(tc, expert_gradients_reduced_over_their_group);
  tcase_add_test(tc, bad_ep_is_named);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
