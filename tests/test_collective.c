/* tests/test_collective.c — what a collective costs (sim/engine/collective.h)
 * against hand derivations from nccl-tests' bus bandwidth (doc/PERFORMANCE.md:
 * all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n of the whole
 * buffer through each rank's link, all-to-all (n-1)/n of what each rank
 * sends), how many nodes a group spans, and where
 * a rank sits (sim_parallel_global_rank, Megatron-LM's tp-dp-pp order). */
#include "testutil.h"

#include "engine/collective.h"
#include "model/parallel.h"

#include <math.h>
#include <string.h>

/* A link with round collective figures: 400 GB/s and 10 us inside a node,
 * 50 GB/s and 100 us between nodes. */
static SimLink
link_fixture(void)
{
  SimLink l = { 0 };
  l.node.gpus = 8;
  l.node.gpus_per_switch = 1;
  l.node.collective_bandwidth = 400e9;
  l.node.collective_latency = 10e-6;
  l.network.bandwidth = 50e9;
  l.network.latency = 100e-6;
  return l;
}

#define MIB(n) ((guint64)(n) * 1024 * 1024)

START_TEST(test_names)
{
  ck_assert_str_eq(sim_collective_names[SIM_COLLECTIVE_ALL_REDUCE], "all-reduce");
  ck_assert_str_eq(sim_collective_names[SIM_COLLECTIVE_ALL_GATHER], "all-gather");
  ck_assert_str_eq(sim_collective_names[SIM_COLLECTIVE_REDUCE_SCATTER], "reduce-scatter");
  ck_assert_str_eq(sim_collective_names[SIM_COLLECTIVE_ALL_TO_ALL], "all-to-all");
  ck_assert_ptr_null(sim_collective_names[SIM_COLLECTIVE_COUNT]);
}
END_TEST

START_TEST(test_all_reduce_by_hand)
{
  SimLink l = link_fixture();
  /* 64 MiB = 67,108,864 B over 8 ranks in one node: 10 us + 2 × 7/8 × 67108864 / 400e9
   * = 10e-6 + 1.75 × 167.77216e-6 = 10e-6 + 293.60128e-6 = 303.60128 us. */
  double t = sim_collective_time(&l, SIM_COLLECTIVE_ALL_REDUCE, MIB(64), 8, 1);
  ck_assert_close(t, 10e-6 + 2.0 * 7 / 8 * 67108864.0 / 400e9, 1e-15);
  ck_assert_close(t, 303.60128e-6, 1e-12);
  /* 2 ranks: 2 × 1/2 = 1, the whole buffer once: 10 us + 167.77216 us. */
  ck_assert_close(sim_collective_time(&l, SIM_COLLECTIVE_ALL_REDUCE, MIB(64), 2, 1), 177.77216e-6, 1e-12);
}
END_TEST

START_TEST(test_gather_and_scatter_by_hand)
{
  SimLink l = link_fixture();
  /* Half an all-reduce's traffic: 10 us + 7/8 × 67108864 / 400e9 = 10 + 146.80064 us. */
  double ag = sim_collective_time(&l, SIM_COLLECTIVE_ALL_GATHER, MIB(64), 8, 1);
  double rs = sim_collective_time(&l, SIM_COLLECTIVE_REDUCE_SCATTER, MIB(64), 8, 1);
  ck_assert_close(ag, 10e-6 + 7.0 / 8 * 67108864.0 / 400e9, 1e-15);
  ck_assert_close(ag, 156.80064e-6, 1e-12);
  ck_assert_close(rs, ag, 0);
  /* An all-reduce is a reduce-scatter and an all-gather: the same traffic, one latency. */
  double ar = sim_collective_time(&l, SIM_COLLECTIVE_ALL_REDUCE, MIB(64), 8, 1);
  ck_assert_close(ar, ag + rs - l.node.collective_latency, 1e-15);
  /* 4 ranks: 3/4. */
  ck_assert_close(sim_collective_factor(SIM_COLLECTIVE_ALL_GATHER, 4), 0.75, 0);
  ck_assert_close(sim_collective_factor(SIM_COLLECTIVE_ALL_REDUCE, 4), 1.5, 0);
}
END_TEST

START_TEST(test_all_to_all_by_hand)
{
  SimLink l = link_fixture();
  /* nccl-tests' summary, "AlltoAll: (n-1)/n": each rank keeps the 1/n it
   * sends itself.  48 MiB = 50,331,648 B sent by each of 8 ranks in one
   * node: 10 us + 7/8 × 50331648 / 400e9 = 10 + 110.100480 us. */
  double t = sim_collective_time(&l, SIM_COLLECTIVE_ALL_TO_ALL, MIB(48), 8, 1);
  ck_assert_close(t, 120.10048e-6, 1e-12);
  /* 2 ranks over two nodes: the network's 100 us + 1/2 × 50331648 / 50e9
   * = 100 + 503.31648 us. */
  ck_assert_close(sim_collective_time(&l, SIM_COLLECTIVE_ALL_TO_ALL, MIB(48), 2, 2), 603.31648e-6, 1e-12);
  ck_assert_close(sim_collective_factor(SIM_COLLECTIVE_ALL_TO_ALL, 4), 0.75, 0);
}
END_TEST

START_TEST(test_one_rank_is_free)
{
  SimLink l = link_fixture();
  for (guint k = 0; k < SIM_COLLECTIVE_COUNT; k++) {
    ck_assert_close(sim_collective_time(&l, (SimCollectiveKind)k, MIB(64), 1, 1), 0, 0);
    ck_assert_close(sim_collective_time(&l, (SimCollectiveKind)k, MIB(64), 0, 0), 0, 0);
    ck_assert_close(sim_collective_factor((SimCollectiveKind)k, 1), 0, 0);
  }
  /* No bytes: the latency alone. */
  ck_assert_close(sim_collective_time(&l, SIM_COLLECTIVE_ALL_REDUCE, 0, 8, 1), 10e-6, 0);
}
END_TEST

START_TEST(test_network_across_nodes)
{
  SimLink l = link_fixture();
  /* 4 ranks on 4 nodes (a DP group of stride 8): 100 us + 2 × 3/4 × 64 MiB / 50e9
   * = 100e-6 + 1.5 × 1342.17728e-6 = 2113.26592 us. */
  double t = sim_collective_time(&l, SIM_COLLECTIVE_ALL_REDUCE, MIB(64), 4, 4);
  ck_assert_close(t, 100e-6 + 1.5 * 67108864.0 / 50e9, 1e-15);
  ck_assert_close(t, 2113.26592e-6, 1e-12);
  /* Two nodes are enough to put the network in the ring. */
  ck_assert_close(sim_collective_time(&l, SIM_COLLECTIVE_ALL_GATHER, MIB(64), 16, 2),
                  100e-6 + 15.0 / 16 * 67108864.0 / 50e9, 1e-15);
  /* One node (or nodes not counted, 0): NVLink. */
  ck_assert_close(sim_collective_time(&l, SIM_COLLECTIVE_ALL_GATHER, MIB(64), 4, 0),
                  10e-6 + 0.75 * 67108864.0 / 400e9, 1e-15);
}
END_TEST

START_TEST(test_nodes)
{
  /* tp 8 in 8-GPU nodes, from rank 0 or from a later node: one node. */
  ck_assert_uint_eq(sim_collective_nodes(0, 1, 8, 8), 1);
  ck_assert_uint_eq(sim_collective_nodes(16, 1, 8, 8), 1);
  /* dp 4 with stride 8 (tp 8): one rank on each of 4 nodes. */
  ck_assert_uint_eq(sim_collective_nodes(3, 8, 4, 8), 4);
  /* dp 4 with stride 2 (tp 2): ranks 1, 3, 5, 7, one node. */
  ck_assert_uint_eq(sim_collective_nodes(1, 2, 4, 8), 1);
  /* Not aligned: tp 8 from rank 4 straddles two nodes; tp 6 from 6: 6-11, two. */
  ck_assert_uint_eq(sim_collective_nodes(4, 1, 8, 8), 2);
  ck_assert_uint_eq(sim_collective_nodes(6, 1, 6, 8), 2);
  /* 16 consecutive ranks in 8-GPU nodes: two; in 4-GPU nodes: four. */
  ck_assert_uint_eq(sim_collective_nodes(0, 1, 16, 8), 2);
  ck_assert_uint_eq(sim_collective_nodes(0, 1, 16, 4), 4);
  /* A stride larger than a node skips nodes without counting them. */
  ck_assert_uint_eq(sim_collective_nodes(0, 24, 3, 8), 3);
  /* One GPU per node: every rank its own node. */
  ck_assert_uint_eq(sim_collective_nodes(5, 1, 7, 1), 7);
  ck_assert_uint_eq(sim_collective_nodes(0, 1, 1, 8), 1);
  ck_assert_uint_eq(sim_collective_nodes(0, 1, 0, 8), 0);
  /* Ranks past 32 bits do not wrap into a node already counted. */
  ck_assert_uint_eq(sim_collective_nodes(G_MAXUINT - 1, G_MAXUINT, 3, 8), 3);
}
END_TEST

START_TEST(test_global_rank)
{
  SimParallel par = { .pp = 2, .dp = 4, .microbatches = 1, .virtual_chunks = 1 };
  /* tp 1: the simulated GPU's own number, stage × dp + replica. */
  ck_assert_uint_eq(sim_parallel_global_rank(&par, 1, 0, 0, 0), 0);
  ck_assert_uint_eq(sim_parallel_global_rank(&par, 1, 1, 2, 0), 6);
  /* tp 8: Megatron's tp_rank + dp_rank × tp + pp_rank × tp × dp. */
  ck_assert_uint_eq(sim_parallel_global_rank(&par, 8, 0, 0, 0), 0);
  ck_assert_uint_eq(sim_parallel_global_rank(&par, 8, 0, 0, 7), 7);
  ck_assert_uint_eq(sim_parallel_global_rank(&par, 8, 0, 1, 0), 8);
  ck_assert_uint_eq(sim_parallel_global_rank(&par, 8, 1, 0, 0), 32);
  ck_assert_uint_eq(sim_parallel_global_rank(&par, 8, 1, 3, 5), 5 + 3 * 8 + 1 * 8 * 4);
  /* The last rank is world size - 1. */
  ck_assert_uint_eq(sim_parallel_global_rank(&par, 8, 1, 3, 7), 2 * 4 * 8 - 1);
  /* Placed: a TP group of 8 (stride 1) fills one 8-GPU node; the DP group
   * of stage 1, tp rank 5 is 4 ranks of stride 8, one per node. */
  guint tp_first = sim_parallel_global_rank(&par, 8, 1, 2, 0);
  ck_assert_uint_eq(sim_collective_nodes(tp_first, 1, 8, 8), 1);
  guint dp_first = sim_parallel_global_rank(&par, 8, 1, 0, 5);
  ck_assert_uint_eq(sim_parallel_global_rank(&par, 8, 1, 1, 5) - dp_first, 8);
  ck_assert_uint_eq(sim_collective_nodes(dp_first, 8, 4, 8), 4);
  /* tp 2: the 4 replicas of a stage share one 8-GPU node. */
  ck_assert_uint_eq(sim_collective_nodes(sim_parallel_global_rank(&par, 2, 1, 0, 1), 2, 4, 8), 1);
}
END_TEST

/* Every bundled profile gives its node's collective figures and a [network]
 * group: a profile that forgot them would fall back to the schema's H100. */
START_TEST(test_profiles_give_collectives)
{
  static const char *const profiles[] = { "a100-sxm4-80gb.ini", "gh200-nvlink-c2c.ini", "h100-sxm-pcie-gen5.ini",
                                          "h200-pcie-gen5.ini", "rtx4090-pcie-gen4.ini" };
  static const char *const keys[] = { "gpus", "collective_bandwidth", "collective_latency", "collective_slowdown" };
  for (guint i = 0; i < G_N_ELEMENTS(profiles); i++) {
    g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, "profiles", profiles[i], NULL);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    ck_assert_msg(g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, NULL), "%s does not load", path);
    for (guint k = 0; k < G_N_ELEMENTS(keys); k++)
      ck_assert_msg(g_key_file_has_key(kf, "node", keys[k], NULL), "%s: no [node] %s", profiles[i], keys[k]);
    ck_assert_msg(g_key_file_has_key(kf, "network", "bandwidth", NULL), "%s: no [network] bandwidth", profiles[i]);
    ck_assert_msg(g_key_file_has_key(kf, "network", "latency", NULL), "%s: no [network] latency", profiles[i]);
  }
}
END_TEST

static Suite *
collective_suite(void)
{
  Suite *s = suite_create("collective");
  TCase *cost = tcase_create("cost");
  tcase_add_test(cost, test_names);
  tcase_add_test(cost, test_all_reduce_by_hand);
  tcase_add_test(cost, test_gather_and_scatter_by_hand);
  tcase_add_test(cost, test_all_to_all_by_hand);
  tcase_add_test(cost, test_one_rank_is_free);
  tcase_add_test(cost, test_network_across_nodes);
  suite_add_tcase(s, cost);
  TCase *place = tcase_create("placement");
  tcase_add_test(place, test_nodes);
  tcase_add_test(place, test_global_rank);
  tcase_add_test(place, test_profiles_give_collectives);
  suite_add_tcase(s, place);
  return s;
}

int
main(void)
{
  return test_run_suite(collective_suite());
}
