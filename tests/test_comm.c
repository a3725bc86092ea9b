/* The communication of a step (issue: the rest of a real step): tensor
 * parallelism's collectives in the layers, data parallelism's gradient
 * buckets, FSDP's gathers, the optimizer step, against hand derivations
 * from the ring formula and the program's own op times. */
#include "testutil.h"

#include "base/error.h"
#include "engine/collective.h"
#include "engine/optimizer.h"
#include "lower/lower.h"
#include "lower/pipeline.h"
#include "model/sharding.h"

#include <math.h>
#include <string.h>

/* A small fused transformer on a node whose collectives cost round
 * figures: 100 GB/s of bus bandwidth, 10 us, no slowdown. */
#define BASE                                                                                              \
  "[device]\nmemory = 80GiB\nmatmul_tflops = 400\nhbm_bandwidth = 3TB/s\n"                               \
  "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"                                             \
  "[node]\ncollective_bandwidth = 100GB/s\ncollective_latency = 10us\ncollective_slowdown = 0\n"         \
  "[transformer]\nhidden = 1024\nlayers = 2\nheads = 8\nffn = 4096\nvocab = 1000\nbatch = 1\nseq = 1024\n" \
  "dtype = bf16\noptimizer = none\n"

/* BASE with `overrides` (INI text) merged in, as a scenario. */
static SimScenario *
scenario(const char *overrides)
{
  return test_scenario_merged(BASE, overrides);
}

static char *
scenario_error(const char *overrides)
{
  return test_scenario_merged_error(BASE, overrides);
}

static double
start_of(const SimResult *r, guint32 op)
{
  return g_array_index(r->run->op_start, double, op);
}

static double
end_of(const SimResult *r, guint32 op)
{
  return g_array_index(r->run->op_end, double, op);
}

static gboolean
label_is(const SimResult *r, guint32 op, const char *label)
{
  return strcmp(sim_program_label(r->program, sim_program_op(r->program, op)->label), label) == 0;
}

/* Without sp, Megatron all-reduces the attention's and the MLP's output in
 * the forward and the input gradients of qkv_proj and fc1 in the backward:
 * four per layer, each of the whole 1024 x 1024 bf16 activation, 2 MiB, at
 * 10 us + 2 (t - 1) / t x 2 MiB / 100 GB/s = 10 + 20.97152 us with t = 2.
 * The forward's are exposed: the compute stream waits for each. */
START_TEST(tp_all_reduces_follow_the_ring_formula)
{
  g_autoptr(SimScenario) s = scenario("[transformer]\ntp = 2\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) r = test_evaluate(s, "resident");
  const double each = 10e-6 + 2.0 * 1 / 2 * 2097152 / 100e9;
  guint n = 0, forward = 0;
  double exposed = 0;
  for (guint32 i = 0; i < sim_program_n_ops(r->program); i++) {
    const SimOp *op = sim_program_op(r->program, i);
    if (op->kind != SIM_OP_COLLECTIVE)
      continue;
    n++;
    ck_assert_double_eq_tol(op->work, each, 1e-15);
    const char *label = sim_program_label(r->program, op->label);
    ck_assert_msg(g_str_has_prefix(label, "all-reduce "), "%s", label);
    if (strcmp(label, "all-reduce attn_proj") == 0 || strcmp(label, "all-reduce fc2") == 0) {
      forward++;
      exposed += op->work;
      /* The next compute op starts when it ends. */
      for (guint32 j = i + 1; j < sim_program_n_ops(r->program); j++)
        if (sim_program_op(r->program, j)->kind == SIM_OP_COMPUTE &&
            sim_program_op(r->program, j)->stream == SIM_LOWER_STREAM_COMPUTE) {
          ck_assert_double_eq_tol(start_of(r, j), end_of(r, i), 1e-12);
          break;
        }
    }
  }
  ck_assert_uint_eq(n, 4 * 2);
  ck_assert_uint_eq(forward, 2 * 2);
  /* The backward's start as their dgrad ends and run beside the wgrad
   * GEMM: what outlasts it is waited for. */
  for (guint32 i = 0; i < sim_program_n_ops(r->program); i++) {
    const SimOp *op = sim_program_op(r->program, i);
    if (op->kind != SIM_OP_COLLECTIVE || op->phase != SIM_PHASE_COMM || label_is(r, i, "all-reduce attn_proj") ||
        label_is(r, i, "all-reduce fc2"))
      continue;
    guint32 j = i + 1;
    while (sim_program_op(r->program, j)->kind != SIM_OP_COMPUTE)
      j++;
    const char *wgrad = sim_program_label(r->program, sim_program_op(r->program, j)->label);
    ck_assert_msg(g_str_has_suffix(wgrad, " wgrad"), "%s", wgrad);
    ck_assert_double_eq_tol(start_of(r, i), start_of(r, j), 1e-12);
    exposed += MAX(0.0, op->work - sim_program_op(r->program, j)->work);
  }
  ck_assert_double_eq_tol(r->comm_ms, exposed * 1e3, 1e-9);
  ck_assert_double_eq_tol(r->step_ms, r->compute_ms + r->comm_ms, 1e-9);
}
END_TEST

/* With sp, an all-gather before each column-parallel GEMM and a
 * reduce-scatter after each row-parallel one, (t - 1) / t of the buffer:
 * forward 2 + 2, backward 2 all-gathers of the gradient, 2 of the saved
 * input (beside the dgrad) and 2 reduce-scatters (beside the wgrad). */
START_TEST(sp_gathers_and_scatters)
{
  g_autoptr(SimScenario) s = scenario("[transformer]\ntp = 4\nsp = true\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) r = test_evaluate(s, "resident");
  const double each = 10e-6 + 3.0 / 4 * 2097152 / 100e9;
  guint gathers = 0, scatters = 0;
  for (guint32 i = 0; i < sim_program_n_ops(r->program); i++) {
    const SimOp *op = sim_program_op(r->program, i);
    if (op->kind != SIM_OP_COLLECTIVE)
      continue;
    ck_assert_double_eq_tol(op->work, each, 1e-15);
    const char *label = sim_program_label(r->program, op->label);
    gathers += g_str_has_prefix(label, "all-gather ");
    scatters += g_str_has_prefix(label, "reduce-scatter ");
  }
  ck_assert_uint_eq(gathers, 2 * (2 + 4));
  ck_assert_uint_eq(scatters, 2 * (2 + 2));
}
END_TEST

/* A group of 16 tensor-parallel ranks spans two 8-GPU nodes: its
 * collectives run at the network's figures. */
START_TEST(tp_across_nodes_runs_at_the_network)
{
  g_autoptr(SimScenario) s =
    scenario("[transformer]\ntp = 8\n[network]\nbandwidth = 25GB/s\nlatency = 50us\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimScenario) across = scenario("[transformer]\ntp = 8\n[network]\nbandwidth = 25GB/s\nlatency = 50us\n"
                                           "[node]\ngpus = 4\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) in = test_evaluate(s, "resident");
  g_autoptr(SimResult) out = test_evaluate(across, "resident");
  for (guint32 i = 0; i < sim_program_n_ops(out->program); i++) {
    const SimOp *op = sim_program_op(out->program, i);
    if (op->kind == SIM_OP_COLLECTIVE)
      ck_assert_double_eq_tol(op->work, 50e-6 + 2.0 * 7 / 8 * 2097152 / 25e9, 1e-15);
    op = sim_program_op(in->program, i);
    if (op->kind == SIM_OP_COLLECTIVE)
      ck_assert_double_eq_tol(op->work, 10e-6 + 2.0 * 7 / 8 * 2097152 / 100e9, 1e-15);
  }
}
END_TEST

/* The gradient reductions of a data-parallel step: one per full bucket,
 * from the op that fills it, in the last micro-batch's backward; the
 * optimizer waits for the last.  Returns the reductions' ops in order. */
static GArray *
reductions(const SimResult *r, guint gpu)
{
  GArray *ops = g_array_new(FALSE, FALSE, sizeof(guint32));
  for (guint32 i = 0; i < sim_program_n_ops(r->program); i++) {
    const SimOp *op = sim_program_op(r->program, i);
    if (op->kind == SIM_OP_COLLECTIVE && op->gpu == gpu && label_is(r, i, "all-reduce gradients"))
      g_array_append_val(ops, i);
  }
  return ops;
}

/* The last backward compute op of GPU `gpu` (before the optimizer). */
static guint32
last_backward(const SimResult *r, guint gpu)
{
  guint32 last = SIM_NO_OP;
  for (guint32 i = 0; i < sim_program_n_ops(r->program); i++) {
    const SimOp *op = sim_program_op(r->program, i);
    if (op->kind == SIM_OP_COMPUTE && op->gpu == gpu && op->phase == SIM_PHASE_BACKWARD)
      last = i;
  }
  return last;
}

/* DDP's buckets overlap the backward: on a fast link each reduction ends
 * before the next bucket fills, so only the last is waited for (from the
 * backward's end to its own); on a slow one they queue on the
 * communication stream and everything after the backward's end is
 * exposed.  Both derived from the run's own times. */
START_TEST(ddp_buckets_hide_behind_the_backward_on_a_fast_link)
{
  static const char *const links[] = { "400GB/s", "1GB/s" };
  for (guint k = 0; k < 2; k++) {
    g_autofree char *text = g_strdup_printf("[transformer]\ngrads = kept\n[node]\ncollective_bandwidth = %s\n"
                                            "[parallel]\ndp = 2\nbucket = 4MiB\n[policy.resident]\nkind = resident\n",
                                            links[k]);
    g_autoptr(SimScenario) s = scenario(text);
    g_autoptr(SimResult) r = test_evaluate(s, "resident");
    g_autoptr(GArray) red = reductions(r, 0);
    ck_assert_uint_gt(red->len, 3);
    guint32 last = g_array_index(red, guint32, red->len - 1);
    double backward_end = end_of(r, last_backward(r, 0));
    /* On the fast link each reduction is over before the next bucket is
     * full: none waits for another, and what outlasts the backward is at
     * most the last two (the one the last layer fills, and the
     * embedding's).  On the slow one they queue back to back from the
     * first: the last ends at the first's start plus all their times. */
    double total = 0;
    gboolean queued = FALSE;
    for (guint b = 0; b < red->len; b++) {
      guint32 op = g_array_index(red, guint32, b);
      total += sim_program_op(r->program, op)->work;
      /* (The embedding's, ready right after the last layer's, may wait
       * for it on either link.) */
      if (b + 2 < red->len)
        queued = queued || fabs(start_of(r, g_array_index(red, guint32, b + 1)) - end_of(r, op)) < 1e-12;
    }
    ck_assert(k == 1 ? queued : !queued);
    ck_assert_double_eq_tol(r->comm_ms, (end_of(r, last) - backward_end) * 1e3, 1e-9);
    if (k == 0)
      ck_assert_double_le(r->comm_ms, (sim_program_op(r->program, last)->work +
                                       sim_program_op(r->program, g_array_index(red, guint32, red->len - 2))->work) *
                                          1e3 + 1e-9);
    else
      ck_assert_double_eq_tol(end_of(r, last), start_of(r, g_array_index(red, guint32, 0)) + total, 1e-12);
    /* The replicas met at each bucket: GPU 1's reductions run at GPU 0's times. */
    g_autoptr(GArray) other = reductions(r, 1);
    ck_assert_uint_eq(other->len, red->len);
    for (guint b = 0; b < red->len; b++)
      ck_assert_double_eq_tol(start_of(r, g_array_index(other, guint32, b)), start_of(r, g_array_index(red, guint32, b)),
                              1e-12);
  }
}
END_TEST

/* FSDP: a group's weights are all-gathered before it runs, the next
 * group's prefetched; on a fast link the gathers hide behind the layers
 * (what is exposed is less than the first gathers of each phase and the
 * last reduction), on a slow one they set the step. */
START_TEST(fsdp_gathers_hide_or_show_by_link)
{
  double exposed[2], gathers[2];
  static const char *const links[] = { "100GB/s", "500MB/s" };
  for (guint k = 0; k < 2; k++) {
    g_autofree char *text = g_strdup_printf("[transformer]\nlayers = 8\nhidden = 2048\nffn = 8192\nheads = 16\nbatch = 8\n"
                                            "[node]\ncollective_bandwidth = %s\n[parallel]\ndp = 4\nsharding = full\n"
                                            "[policy.resident]\nkind = resident\n",
                                            links[k]);
    g_autoptr(SimScenario) s = scenario(text);
    g_autoptr(SimResult) r = test_evaluate(s, "resident");
    double most = 0;
    gathers[k] = 0;
    for (guint32 i = 0; i < sim_program_n_ops(r->program); i++) {
      const SimOp *op = sim_program_op(r->program, i);
      if (op->kind == SIM_OP_COLLECTIVE && op->gpu == 0) {
        most = MAX(most, op->work);
        if (label_is(r, i, "all-gather weights"))
          gathers[k] += op->work;
      }
    }
    exposed[k] = r->comm_ms / 1e3;
    if (k == 0)
      ck_assert_double_le(exposed[k], 3 * most); /* the embedding's, the head's, the last reduce-scatter */
  }
  /* The slow link exposes most of its gathers: all but what compute hid. */
  ck_assert_double_gt(exposed[1], 0.9 * gathers[1] - 0.1 * gathers[1]);
  ck_assert_double_gt(exposed[1], 20 * exposed[0]);
}
END_TEST

/* The optimizer step closes the step: its kernels at hbm_bandwidth, after
 * every reduction, once per GPU over its shard under optimizer sharding. */
START_TEST(optimizer_step_is_its_bytes_over_hbm)
{
  g_autoptr(SimScenario) s =
    scenario("[transformer]\noptimizer = adamw\noptimizer_kernels = fused\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) r = test_evaluate(s, "resident");
  const SimWorkload *w = s->workload;
  guint tensors;
  guint64 P = sim_workload_parameters(w, &tensors);
  /* Fused AdamW with fp32 masters: reads master, grad (bf16), m, v; writes
   * master, m, v and the bf16 weight: 14 + 14 bytes per parameter. */
  SimOptimizerStep step = { .params = P, .tensors = tensors, .dtype_bytes = 2, .adamw = TRUE,
                            .master = TRUE, .impl = SIM_OPTIMIZER_FUSED };
  g_autoptr(GArray) kernels = g_array_new(FALSE, FALSE, sizeof(SimKernel));
  sim_optimizer_step_kernels(&step, kernels, NULL);
  double bytes = 0;
  for (guint i = 0; i < kernels->len; i++)
    bytes += (double)g_array_index(kernels, SimKernel, i).read + (double)g_array_index(kernels, SimKernel, i).written;
  ck_assert_double_le(fabs(bytes - 28.0 * (double)P), 16.0 * step.tensors); /* and the step counters */
  /* clip_grad (the default) first reads every bf16 gradient for its norm,
   * then reads and writes it scaled: 6 bytes per parameter more. */
  double unclipped = bytes;
  step.clip = TRUE;
  g_array_set_size(kernels, 0);
  sim_optimizer_step_kernels(&step, kernels, NULL);
  bytes = 0;
  for (guint i = 0; i < kernels->len; i++)
    bytes += (double)g_array_index(kernels, SimKernel, i).read + (double)g_array_index(kernels, SimKernel, i).written;
  ck_assert_double_le(fabs(bytes - unclipped - 6.0 * (double)P), 16.0 * step.tensors);
  ck_assert_double_eq_tol(r->optimizer_ms, bytes / 3e12 * 1e3, 1e-9);
  ck_assert_double_eq_tol(r->step_ms, r->compute_ms + r->optimizer_ms, 1e-9);

  g_autoptr(SimScenario) zero = scenario("[transformer]\noptimizer = adamw\noptimizer_kernels = fused\n[parallel]\n"
                                         "dp = 4\nsharding = optimizer\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) z = test_evaluate(zero, "resident");
  step.params = sim_sharding_shard(P, 4);
  g_array_set_size(kernels, 0);
  sim_optimizer_step_kernels(&step, kernels, NULL);
  bytes = 0;
  for (guint i = 0; i < kernels->len; i++)
    bytes += (double)g_array_index(kernels, SimKernel, i).read + (double)g_array_index(kernels, SimKernel, i).written;
  ck_assert_double_eq_tol(z->optimizer_ms, bytes / 3e12 * 1e3, 1e-9);
}
END_TEST

/* offload_optimizer (DeepSpeed's ZeRO-Offload): the optimizer state of the
 * GPU's shard lives in host memory, and after the reductions its gradient
 * shard goes out, the CPU steps (the node's host_adam_gparams shared by
 * the node's ranks) and the updated weight shard comes back.  By hand:
 * static less the shard's 12 bytes a parameter; the step's time and
 * bytes from the shard. */
START_TEST(offload_optimizer_steps_on_the_host)
{
  static const char *const text = "[transformer]\noptimizer = adamw\n[node]\nhost_adam_gparams = 2\n"
                                  "[parallel]\ndp = 4\nsharding = optimizer\n%s[policy.resident]\nkind = resident\n";
  g_autofree char *on_text = g_strdup_printf(text, "offload_optimizer = true\n");
  g_autofree char *off_text = g_strdup_printf(text, "");
  g_autoptr(SimScenario) on = scenario(on_text);
  g_autoptr(SimScenario) off = scenario(off_text);
  g_autoptr(SimResult) r = test_evaluate(on, "resident");
  guint64 P = sim_workload_parameters(on->workload, NULL), shard = sim_sharding_shard(P, 4);
  /* 12 bytes of AdamW state (fp32 master, two moments) per shard parameter moved to the host. */
  ck_assert_uint_eq(sim_lower_pipeline_stage_static(off->workload, &off->parallel, 0) -
                      sim_lower_pipeline_stage_static(on->workload, &on->parallel, 0),
                    shard * 12);
  /* 4 replicas on one 8-GPU node: 4 ranks share 2e9 parameters a second. */
  ck_assert_double_eq_tol(r->optimizer_ms, (double)shard * 4 / 2e9 * 1e3, 1e-9);
  ck_assert_uint_eq(r->d2h_bytes, 4 * shard * 2);
  ck_assert_uint_eq(r->h2d_bytes, 4 * shard * 2);
  /* The host holds the state and the landing gradient shard, and no activation (resident). */
  ck_assert_int_eq(r->peak_host.bytes, (gint64)(shard * (12 + 2)));
}
END_TEST

/* offload_params (FSDP2's CPUOffloadPolicy, sharding = full): each group's
 * weight shard comes over the host link before its gather, in the forward
 * and again in the backward: the h2d stream carries every group's shard
 * twice beside the step's own copies. */
START_TEST(offload_params_fetches_every_shard_per_gather)
{
  g_autoptr(SimScenario) s = scenario("[transformer]\noptimizer = adamw\n[parallel]\ndp = 2\nsharding = full\n"
                                      "offload_params = true\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) r = test_evaluate(s, "resident");
  const SimWorkload *w = s->workload;
  guint64 gathers = 0, P = sim_workload_parameters(w, NULL);
  gathers += 2 * sim_sharding_shard(w->embed->params, 2) + 2 * sim_sharding_shard(w->head->params, 2);
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    gathers += 2 * sim_sharding_shard(sim_workload_layer(w, i)->params, 2);
  /* Per replica: every gather's shard, then the updated shard after the step. */
  ck_assert_uint_eq(r->h2d_bytes, 2 * (gathers * 2 + sim_sharding_shard(P, 2) * 2));
  ck_assert_uint_eq(sim_lower_pipeline_stage_static(w, &s->parallel, 0), 0);
  /* Everything static is on the host: AdamW's 12 bytes, the bf16 weight and
   * the static (kept) gradient, which is also where the CPU's step reads
   * it: no landing buffer beside it. */
  ck_assert_int_eq(r->peak_host.bytes, (gint64)(sim_sharding_shard(P, 2) * (12 + 2 + 2)));
}
END_TEST

/* Bad input names the key: each override (merged into BASE) and what its
 * one-line message must hold. */
START_TEST(bad_communication_input)
{
  static const struct {
    const char *overrides, *says;
  } cases[] = {
    { "[transformer]\ntp = 3\n", "[transformer] tp" },
    { "[parallel]\nsharding = full\n", "[parallel] sharding" },
    { "[node]\ncollective_bandwidth = 0\n", "[node] collective_bandwidth" },
    { "[parallel]\ndp = 2\noffload_optimizer = true\n", "[parallel] offload_optimizer" },
    { "[parallel]\ndp = 2\nsharding = optimizer\noffload_params = true\n", "[parallel] offload_params" },
    { "[parallel]\ndp = 2\nsharding = full\noffload_optimizer = true\n", "optimizer = none" },
    { "[node]\nhost_adam_gparams = 0\n", "[node] host_adam_gparams" },
    { "[parallel]\nbucket = lots\n", "[parallel] bucket" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *message = scenario_error(cases[i].overrides);
    ck_assert_msg(strstr(message, cases[i].says) != NULL, "%s: %s", cases[i].says, message);
  }
}
END_TEST

static Suite *
comm_suite(void)
{
  Suite *s = suite_create("comm");
  TCase *tc = tcase_create("comm");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, tp_all_reduces_follow_the_ring_formula);
  tcase_add_test(tc, sp_gathers_and_scatters);
  tcase_add_test(tc, tp_across_nodes_runs_at_the_network);
  tcase_add_test(tc, ddp_buckets_hide_behind_the_backward_on_a_fast_link);
  tcase_add_test(tc, fsdp_gathers_hide_or_show_by_link);
  tcase_add_test(tc, optimizer_step_is_its_bytes_over_hbm);
  tcase_add_test(tc, offload_optimizer_steps_on_the_host);
  tcase_add_test(tc, offload_params_fetches_every_shard_per_gather);
  tcase_add_test(tc, bad_communication_input);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  return test_run_suite(comm_suite());
}
