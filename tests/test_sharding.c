/* tests/test_sharding.c — sharded static memory (sim/model/sharding.h) and
 * the optimizer step's kernels (sim/engine/optimizer.h) against figures
 * worked by hand: ZeRO's own example (Rajbhandari et al. 2020, section 5:
 * Ψ = 7.5e9 parameters on N_d = 64 GPUs, 120 GB, 31.4 GB, 16.6 GB and 1.88
 * GB per GPU), the bytes of one fused and one foreach AdamW step, their
 * launches, and a generated transformer whose per-GPU baseline shrinks
 * with sharding. */
#include "testutil.h"

#include "engine/optimizer.h"
#include "lower/pipeline.h"
#include "model/sharding.h"

/* Mixed-precision Adam as the paper counts it: 2 + 2 + K with K = 12. */
static SimParamBytes
paper_bytes(void)
{
  SimParamBytes b;
  sim_param_bytes_set(&b, 2, TRUE, TRUE, TRUE);
  return b;
}

START_TEST(test_paper_example)
{
  SimParamBytes b = paper_bytes();
  ck_assert_uint_eq(b.weight, 2);
  ck_assert_uint_eq(b.grad, 2);
  ck_assert_uint_eq(b.state, 12);
  guint64 psi = 7500000000ull;
  /* (2 + 2 + K)Ψ = 16 × 7.5e9 */
  ck_assert_uint_eq(sim_sharding_static(&b, psi, SIM_SHARDING_NONE, 64), 120000000000ull);
  /* 2Ψ + 2Ψ + KΨ/N_d = 30e9 + 12 × 117,187,500 */
  ck_assert_uint_eq(sim_sharding_static(&b, psi, SIM_SHARDING_OPTIMIZER, 64), 31406250000ull);
  /* 2Ψ + (2 + K)Ψ/N_d = 15e9 + 14 × 117,187,500 */
  ck_assert_uint_eq(sim_sharding_static(&b, psi, SIM_SHARDING_GRADIENTS, 64), 16640625000ull);
  /* (2 + 2 + K)Ψ/N_d = 16 × 117,187,500 */
  ck_assert_uint_eq(sim_sharding_static(&b, psi, SIM_SHARDING_FULL, 64), 1875000000ull);
}
END_TEST

START_TEST(test_offsim_flags)
{
  SimParamBytes b;
  /* Set-to-none: no static gradients; ZeRO-2 then divides only the state. */
  sim_param_bytes_set(&b, 2, FALSE, TRUE, TRUE);
  ck_assert_uint_eq(b.grad, 0);
  ck_assert_uint_eq(sim_sharding_static(&b, 1000, SIM_SHARDING_GRADIENTS, 8), 2000 + 12 * 125);
  /* fp32 weights are their own master: K = 8. */
  sim_param_bytes_set(&b, 4, TRUE, TRUE, TRUE);
  ck_assert_uint_eq(b.state, 8);
  ck_assert(!b.master);
  ck_assert_uint_eq(sim_sharding_static(&b, 1000, SIM_SHARDING_NONE, 1), 16000);
  /* optimizer = none, no master: weights and gradients only. */
  sim_param_bytes_set(&b, 2, TRUE, FALSE, FALSE);
  ck_assert_uint_eq(sim_sharding_static(&b, 1000, SIM_SHARDING_OPTIMIZER, 4), 4000);
  /* A shard is ceil(Ψ / N_d): 1001 over 8 ranks is 126 each. */
  ck_assert_uint_eq(sim_sharding_shard(1001, 8), 126);
  b = paper_bytes();
  ck_assert_uint_eq(sim_sharding_static(&b, 1001, SIM_SHARDING_FULL, 8), 126 * 16);
}
END_TEST

START_TEST(test_transients)
{
  SimParamBytes b = paper_bytes();
  /* What stays of a bucket of gradients after its reduce-scatter. */
  ck_assert_uint_eq(sim_sharding_grad_kept(8000, SIM_SHARDING_NONE, 8), 8000);
  ck_assert_uint_eq(sim_sharding_grad_kept(8000, SIM_SHARDING_OPTIMIZER, 8), 8000);
  ck_assert_uint_eq(sim_sharding_grad_kept(8000, SIM_SHARDING_GRADIENTS, 8), 1000);
  ck_assert_uint_eq(sim_sharding_grad_kept(8001, SIM_SHARDING_FULL, 8), 1001);
  /* The gathered weights of a layer: only under full, padded to N_d shards. */
  ck_assert_uint_eq(sim_sharding_gathered(&b, 1000, SIM_SHARDING_GRADIENTS, 8), 0);
  ck_assert_uint_eq(sim_sharding_gathered(&b, 1000, SIM_SHARDING_FULL, 8), 2000);
  ck_assert_uint_eq(sim_sharding_gathered(&b, 1001, SIM_SHARDING_FULL, 8), 126 * 8 * 2);
}
END_TEST

/* Runs `step` and asserts its launches, kernels (all memory-bound), bytes
 * read and written, and transient. */
static void
assert_step(const SimOptimizerStep *step, guint launches, guint kernels, guint64 read, guint64 written,
            guint64 transient)
{
  g_autoptr(GArray) k = g_array_new(FALSE, FALSE, sizeof(SimKernel));
  guint64 got_transient = 1, r = 0, w = 0;
  ck_assert_uint_eq(sim_optimizer_step_kernels(step, k, &got_transient), launches);
  ck_assert_uint_eq(k->len, kernels);
  for (guint i = 0; i < k->len; i++) {
    const SimKernel *x = &g_array_index(k, SimKernel, i);
    ck_assert_int_eq(x->kclass, SIM_KERNEL_MEMORY);
    r += x->read;
    w += x->written;
  }
  ck_assert_uint_eq(r, read);
  ck_assert_uint_eq(w, written);
  ck_assert_uint_eq(got_transient, transient);
}

START_TEST(test_fused_step)
{
  /* 1e6 bf16 parameters with fp32 masters in 10 tensors: read master 4,
   * grad 2, exp_avg 4, exp_avg_sq 4; write master, both moments and the
   * bf16 copy, 4 + 4 + 4 + 2.  Plus the step counters, 4 B a tensor each
   * way.  One launch each: 10 tensors, 1e6 / 65536 + 10 = 25 chunks. */
  SimOptimizerStep step = { .params = 1000000, .tensors = 10, .dtype_bytes = 2, .adamw = TRUE, .master = TRUE,
                            .impl = SIM_OPTIMIZER_FUSED };
  assert_step(&step, 2, 2, 14000000 + 40, 14000000 + 40, 0);
  /* fp32 weights: no master, no copy: read 16, write 12. */
  step.dtype_bytes = 4;
  assert_step(&step, 2, 2, 16000000 + 40, 12000000 + 40, 0);
}
END_TEST

START_TEST(test_foreach_step)
{
  /* The same 1e6 parameters through _multi_tensor_adamw, per parameter:
   *   mul_(params)              r 4        w 4
   *   lerp_(exp_avgs, grads)    r 4 + 2    w 4
   *   mul_(exp_avg_sqs)         r 4        w 4
   *   addcmul_(v, g, g)         r 4 + 2    w 4
   *   sqrt(v)                   r 4        w 4
   *   div_(s)                   r 4        w 4
   *   add_(s)                   r 4        w 4
   *   addcdiv_(p, m, s)         r 12       w 4
   *   masters into bf16         r 4        w 2
   * = r 48, w 34, nine launches, and exp_avg_sq_sqrt (4 B a parameter)
   * as the transient. */
  SimOptimizerStep step = { .params = 1000000, .tensors = 10, .dtype_bytes = 2, .adamw = TRUE, .master = TRUE,
                            .impl = SIM_OPTIMIZER_FOREACH };
  assert_step(&step, 9, 9, 48000000, 34000000, 4000000);
  /* Clipping first: _foreach_norm reads the gradients (2 B) and writes a
   * norm per tensor; _foreach_mul_ reads and writes them; 1 + 6 + 1
   * launches (the norm's cleanup and the scalar tail). */
  step.clip = TRUE;
  assert_step(&step, 9 + 8, 11, 48000000 + 4000000, 34000000 + 40 + 2000000, 4000000);
  /* optimizer = none: clipping only. */
  step.adamw = FALSE;
  assert_step(&step, 8, 2, 4000000, 40 + 2000000, 0);
}
END_TEST

START_TEST(test_launch_chunking)
{
  /* 1e9 parameters in 300 tensors: 15,258 + 300 chunks, 320 a launch: 49
   * launches a pass (the tensor limits, 300 / 30 at most, bind less).
   * Eight passes without masters. */
  SimOptimizerStep step = { .params = 1000000000, .tensors = 300, .dtype_bytes = 2, .adamw = TRUE,
                            .impl = SIM_OPTIMIZER_FOREACH };
  g_autoptr(GArray) k = g_array_new(FALSE, FALSE, sizeof(SimKernel));
  ck_assert_uint_eq(sim_optimizer_step_kernels(&step, k, NULL), 8 * 49);
  /* Many small tensors: 1000 tensors of 100 elements, 1001 chunks, 4
   * launches a pass by blocks; the tensor limits bind instead: the two
   * muls and add (depth 1, 110 a launch) 10 each, lerp and sqrt (depth 2,
   * 64) 16, addcmul and addcdiv (depth 3, 48) 21, div (a scalar list, 96)
   * 11. */
  g_array_set_size(k, 0);
  step.params = 100000;
  step.tensors = 1000;
  ck_assert_uint_eq(sim_optimizer_step_kernels(&step, k, NULL), 10 + 16 + 10 + 21 + 16 + 11 + 10 + 21);
}
END_TEST

#define TRANSFORMER                                                                                        \
  "[device]\nmemory = 80GiB\nmatmul_tflops = 400\nhbm_bandwidth = 3TB/s\n"                                 \
  "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"                                               \
  "[transformer]\nhidden = 256\nlayers = 4\nheads = 4\nffn = 1024\nvocab = 1000\nbatch = 1\nseq = 128\n"   \
  "dtype = bf16\ngrads = kept\n"

/* A generated transformer counts its parameters; every GPU's baseline is
 * its part of them, and the peak falls with it. */
START_TEST(test_transformer_baseline)
{
  g_autoptr(SimScenario) none = test_scenario_from_text(TRANSFORMER "[parallel]\ndp = 8\n");
  const SimWorkload *w = none->workload;
  guint64 params = sim_workload_parameters(w, NULL);
  ck_assert_uint_gt(params, 0);
  ck_assert_uint_eq(params * 16, w->static_bytes);
  ck_assert_uint_eq(sim_lower_pipeline_stage_static(w, &none->parallel, 0), w->static_bytes);
  g_autoptr(SimResult) base = test_evaluate(none, "resident");

  static const char *const names[] = { "optimizer", "gradients", "full" };
  guint64 expected[] = { params * 4 + sim_sharding_shard(params, 8) * 12,
                         params * 2 + sim_sharding_shard(params, 8) * 14, sim_sharding_shard(params, 8) * 16 };
  gint64 last = base->peak_device.bytes;
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *text = g_strdup_printf(TRANSFORMER "[parallel]\ndp = 8\nsharding = %s\n", names[i]);
    g_autoptr(SimScenario) s = test_scenario_from_text(text);
    ck_assert_uint_eq(sim_lower_pipeline_stage_static(s->workload, &s->parallel, 0), expected[i]);
    g_autoptr(SimResult) r = test_evaluate(s, "resident");
    gint64 shrunk = base->peak_device.bytes - (gint64)(w->static_bytes - expected[i]);
    if (i < 2) {
      /* The baseline is all that changes. */
      ck_assert_int_eq(r->peak_device.bytes, shrunk);
    } else {
      /* And full sharding gathers a group's weights around it, the next
       * group's already on their way: at most two groups' at once. */
      guint64 most = sim_sharding_gathered(&w->param_bytes, w->embed->params, SIM_SHARDING_FULL, 8);
      most = MAX(most, sim_sharding_gathered(&w->param_bytes, w->head->params, SIM_SHARDING_FULL, 8));
      most = MAX(most, sim_sharding_gathered(&w->param_bytes, sim_workload_layer(w, 0)->params, SIM_SHARDING_FULL, 8));
      ck_assert_int_gt(r->peak_device.bytes, shrunk);
      ck_assert_int_le(r->peak_device.bytes, shrunk + 2 * (gint64)most);
    }
    ck_assert_int_lt(r->peak_device.bytes, last);
    last = r->peak_device.bytes;
  }
}
END_TEST

static Suite *
sharding_suite(void)
{
  Suite *suite = suite_create("sharding");
  TCase *memory = tcase_create("memory");
  tcase_add_test(memory, test_paper_example);
  tcase_add_test(memory, test_offsim_flags);
  tcase_add_test(memory, test_transients);
  tcase_add_test(memory, test_transformer_baseline);
  suite_add_tcase(suite, memory);
  TCase *step = tcase_create("optimizer step");
  tcase_add_test(step, test_fused_step);
  tcase_add_test(step, test_foreach_step);
  tcase_add_test(step, test_launch_chunking);
  suite_add_tcase(suite, step);
  return suite;
}

int
main(void)
{
  return test_run_suite(sharding_suite());
}
