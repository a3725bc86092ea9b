/* Policies on a uniform model, against formulas derived by hand.
 *
 * The model: L layers, forward f, backward 2f, one tensor of B bytes per
 * layer, both directions at bandwidth beta with latency alpha, no compute
 * slowdown.  c = alpha + B/beta is the time of one layer's copy. */
#include "testutil.h"

#include "lower/lower.h"

#include <math.h>
#include <string.h>

#define L 8
#define F 1e-3           /* seconds */
#define BETA 10e9        /* B/s */
#define ALPHA 10e-6      /* s */
#define TOL_MS 1e-9

static double
copy_s(guint64 bytes)
{
  return ALPHA + (double)bytes / BETA;
}

/* A uniform scenario with `bytes` per layer and `policies` appended, of
 * [scenario] `step` (first or steady). */
static SimScenario *
uniform_step(guint64 bytes, const char *step, const char *policies)
{
  g_autofree char *text = g_strdup_printf("[scenario]\nname = uniform\nstep = %s\n"
                                          "[device]\nmemory = 80GiB\n"
                                          "[link]\nh2d_bandwidth = 10GB/s\nd2h_bandwidth = 10GB/s\n"
                                          "latency = 10us\nhost_alloc = 2ms\npageable_factor = 0.5\n"
                                          "[model]\nlayers = %d\nforward = 1ms\nbackward = 2ms\n"
                                          "input = 1MB\nstatic = 1GB\nworkspace = 0\n"
                                          "tensors = act:%" G_GUINT64_FORMAT "B\n%s",
                                          step, L, bytes, policies);
  return test_scenario_from_text(text);
}

static SimScenario *
uniform(guint64 bytes, const char *policies)
{
  return uniform_step(bytes, "steady", policies);
}

/* The cudaHostAlloc ops of `policy`'s program. */
static guint
host_allocs(const SimScenario *s, const char *policy)
{
  g_autoptr(SimProgram) p = sim_lower(s->workload, sim_scenario_policy(s, policy), &s->machine.link);
  guint n = 0;
  for (guint i = 0; i < sim_program_n_ops(p); i++)
    n += sim_program_op(p, i)->kind == SIM_OP_HOST_ALLOC;
  return n;
}

static const char *all_policies =
  "[policy.resident]\nkind = resident\n"
  "[policy.sync]\nkind = offload\nmode = sync\n"
  "[policy.async]\nkind = offload\nmode = async\nkeep_last = 0\nprefetch = 1\ninflight = 2\n"
  "[policy.checkpoint]\nkind = checkpoint\n";

START_TEST(resident_has_no_copies_and_its_step_is_3Lf)
{
  g_autoptr(SimScenario) s = uniform(4000000, all_policies);
  g_autoptr(SimResult) r = test_evaluate(s, "resident");
  ck_assert_close(r->step_ms, 3 * L * F * 1e3, TOL_MS);
  ck_assert_close(r->compute_ms, 3 * L * F * 1e3, TOL_MS);
  ck_assert_close(r->exposed_transfer_ms, 0, TOL_MS);
  ck_assert_uint_eq(r->d2h_bytes + r->h2d_bytes, 0);
  ck_assert_uint_eq(r->d2h_copies + r->h2d_copies, 0);
  ck_assert_int_eq(r->peak_host.bytes, 0);
  /* Peak: static + every layer's tensor at the start of the last forward. */
  ck_assert_int_eq(r->peak_device.bytes, 1000000000 + L * 4000000);
  ck_assert_uint_eq(r->saved_bytes, L * 4000000);
}
END_TEST

START_TEST(sync_offload_adds_exactly_2L_copies)
{
  for (guint64 bytes = 1000000; bytes <= 64000000; bytes *= 4) {
    g_autoptr(SimScenario) s = uniform(bytes, all_policies);
    g_autoptr(SimResult) resident = test_evaluate(s, "resident");
    g_autoptr(SimResult) sync = test_evaluate(s, "sync");
    ck_assert_close(sync->step_ms, resident->step_ms + 2 * L * copy_s(bytes) * 1e3, TOL_MS);
    ck_assert_close(sync->exposed_transfer_ms, 2 * L * copy_s(bytes) * 1e3, TOL_MS);
    ck_assert_uint_eq(sync->d2h_copies, L);
    ck_assert_uint_eq(sync->d2h_bytes, L * bytes);
    ck_assert_uint_eq(sync->h2d_bytes, sync->d2h_bytes);
    /* One layer's tensor at most on the device: static + B. */
    ck_assert_int_eq(sync->peak_device.bytes, 1000000000 + (gint64)bytes);
    ck_assert_int_eq(sync->peak_host.bytes, L * (gint64)bytes);
    ck_assert_uint_eq(sync->saved_bytes, resident->saved_bytes);
  }
}
END_TEST

/* Async, prefetch 1, inflight 2, nothing kept.  Derivation, with c the copy
 * time of one layer:
 *
 *  c <= f: each layer's d2h hides under the next forward; the forward pass
 *     ends at Lf and the last d2h at Lf + c.  The top layer's h2d waits for
 *     its own d2h: Lf + c .. Lf + 2c, then backward starts.  Every other h2d
 *     (c) hides under a backward (2f).  Step = 3Lf + 2c.
 *
 *  f < c <= 2f: the d2h engine is the bottleneck.  Forward i (i >= 2) waits
 *     for d2h(i - 2), so it starts at f + (i-1)c and d2h(i) runs from
 *     f + ic to f + (i+1)c.  The last d2h ends at f + Lc; the top h2d
 *     follows (c), and the backward pass (2Lf) hides every other h2d.
 *     Step = f + (L+1)c + 2Lf.
 *
 *  c > 2f: the forward is as above; in backward each h2d (c) outlasts the
 *     backward (2f) it hides under, so backward i starts when h2d(i) ends:
 *     the h2d chain runs back to back from f + Lc for L copies, and the last
 *     backward adds 2f.  Step = f + 2Lc + 2f. */
static double
async_step(double c)
{
  if (c <= F)
    return 3 * L * F + 2 * c;
  if (c <= 2 * F)
    return F + (L + 1) * c + 2 * L * F;
  return 3 * F + 2 * L * c;
}

START_TEST(async_offload_step_matches_the_derivation)
{
  /* c = 0.41 ms (< f), 1.51 ms (f < c < 2f), 3.01 ms (> 2f). */
  guint64 sizes[] = { 4000000, 15000000, 30000000 };
  for (guint k = 0; k < G_N_ELEMENTS(sizes); k++) {
    g_autoptr(SimScenario) s = uniform(sizes[k], all_policies);
    g_autoptr(SimResult) r = test_evaluate(s, "async");
    double c = copy_s(sizes[k]);
    ck_assert_close(r->step_ms, async_step(c) * 1e3, TOL_MS);
    ck_assert_uint_eq(r->d2h_copies, L);
    ck_assert_uint_eq(r->d2h_bytes, r->h2d_bytes);
  }
}
END_TEST

START_TEST(async_offload_hides_what_sync_exposes)
{
  g_autoptr(SimScenario) s = uniform(4000000, all_policies);
  g_autoptr(SimResult) sync = test_evaluate(s, "sync");
  g_autoptr(SimResult) async = test_evaluate(s, "async");
  g_autoptr(SimResult) resident = test_evaluate(s, "resident");
  ck_assert(async->step_ms < sync->step_ms);
  /* Only the top layer's round trip shows: 2c. */
  ck_assert_close(async->exposed_transfer_ms, 2 * copy_s(4000000) * 1e3, TOL_MS);
  /* At most `inflight` groups on the device in forward (plus nothing else). */
  ck_assert(async->peak_device.bytes <= 1000000000 + 2 * 4000000);
  ck_assert(async->peak_device.bytes < resident->peak_device.bytes);
}
END_TEST

START_TEST(async_inflight_1_serialises_forward_and_copies)
{
  /* Forward i waits for d2h(i - 1): layer i starts at i(f + c); the forward
   * pass ends at Lf + (L-1)c and the last d2h at L(f + c).  The top h2d then
   * takes c and the rest hides under backward (c < 2f):
   * step = L(f + c) + c + 2Lf = 3Lf + (L+1)c. */
  g_autoptr(SimScenario) s =
    uniform(4000000, "[policy.one]\nkind = offload\nkeep_last = 0\ninflight = 1\nprefetch = 1\n");
  g_autoptr(SimResult) r = test_evaluate(s, "one");
  double c = copy_s(4000000);
  ck_assert_close(r->step_ms, (3 * L * F + (L + 1) * c) * 1e3, TOL_MS);
  /* One group on the device at a time in forward; in backward the current
   * group and the prefetched one. */
  ck_assert_int_eq(r->peak_device.bytes, 1000000000 + 2 * 4000000);
  ck_assert_str_eq(r->peak_device.phase, "reload");
}
END_TEST

START_TEST(async_without_prefetch_waits_for_every_reload)
{
  /* Forward as in the c <= f case (ends Lf, last d2h at Lf + c).  Each
   * backward asks for its own group when due: the top one also waits for its
   * d2h (c + c), every other one pays c.  Step = 3Lf + (L+1)c. */
  g_autoptr(SimScenario) s =
    uniform(4000000, "[policy.lazy]\nkind = offload\nkeep_last = 0\nprefetch = 0\n");
  g_autoptr(SimResult) r = test_evaluate(s, "lazy");
  double c = copy_s(4000000);
  ck_assert_close(r->step_ms, (3 * L * F + (L + 1) * c) * 1e3, TOL_MS);
}
END_TEST

START_TEST(deep_prefetch_still_reloads_every_layer_once)
{
  g_autoptr(SimScenario) s =
    uniform(4000000, "[policy.deep]\nkind = offload\nkeep_last = 0\nprefetch = 100\n");
  g_autoptr(SimResult) r = test_evaluate(s, "deep");
  ck_assert_uint_eq(r->h2d_copies, L);
  ck_assert_uint_eq(r->h2d_bytes, r->d2h_bytes);
  /* Everything reloads at the boundary: no backward ever waits after the first. */
  double c = copy_s(4000000);
  ck_assert_close(r->step_ms, (3 * L * F + 2 * c) * 1e3, TOL_MS);
}
END_TEST

START_TEST(keep_last_min_tensor_and_layers_select_what_moves)
{
  g_autofree char *text = g_strdup_printf(
    "[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 10GB/s\nd2h_bandwidth = 10GB/s\n"
    "[model]\nlayers = %d\nforward = 1ms\ninput = 1MB\ntensors = big:8MB, small:100KB, mask:2MB:keep\n"
    "[policy.last2]\nkind = offload\nkeep_last = 2\n"
    "[policy.min]\nkind = offload\nkeep_last = 0\nmin_tensor = 1MB\n"
    "[policy.some]\nkind = offload\nkeep_last = 0\nlayers = 0-2,5\n",
    L);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  g_autoptr(SimResult) last2 = test_evaluate(s, "last2");
  ck_assert_uint_eq(last2->d2h_copies, (L - 2) * 2); /* big and small, never mask */
  ck_assert_uint_eq(last2->d2h_bytes, (L - 2) * 8100000);
  g_autoptr(SimResult) min = test_evaluate(s, "min");
  ck_assert_uint_eq(min->d2h_copies, L);
  ck_assert_uint_eq(min->d2h_bytes, L * 8000000);
  g_autoptr(SimResult) some = test_evaluate(s, "some");
  ck_assert_uint_eq(some->d2h_copies, 4 * 2);
  for (const SimResult *r = last2; r; r = r == last2 ? min : r == min ? some : NULL)
    ck_assert_uint_eq(r->h2d_bytes, r->d2h_bytes);
}
END_TEST

START_TEST(per_tensor_pinning_pays_host_alloc_per_tensor)
{
  g_autoptr(SimScenario) s = uniform(4000000, "[policy.base]\nkind = offload\nmode = sync\n"
                                              "[policy.pin]\nkind = offload\nmode = sync\npinned = per-tensor\n");
  g_autoptr(SimResult) base = test_evaluate(s, "base");
  g_autoptr(SimResult) pin = test_evaluate(s, "pin");
  ck_assert_close(pin->step_ms, base->step_ms + L * 2.0, TOL_MS); /* host_alloc = 2 ms */
}
END_TEST

/* start = tensor pins each tensor right before its copy, as the group
 * path pins the group's: sync, the forward's piece (f), host_alloc (2 ms),
 * the copy (c) and an empty piece on the compute stream, so the step is
 * the sync offload's 3Lf + 2Lc plus L allocations.  Async, one per tensor
 * too; pooled buffers none. */
START_TEST(start_tensor_pays_host_alloc_per_tensor)
{
  g_autoptr(SimScenario) s =
    uniform(4000000, "[policy.sync]\nkind = offload\nmode = sync\nstart = tensor\npinned = per-tensor\n"
                     "[policy.async]\nkind = offload\nmode = async\nkeep_last = 0\nstart = tensor\npinned = per-tensor\n"
                     "[policy.pooled]\nkind = offload\nmode = async\nstart = tensor\n");
  g_autoptr(SimResult) sync = test_evaluate(s, "sync");
  ck_assert_close(sync->step_ms, (3 * L * F + 2 * L * copy_s(4000000) + L * 2e-3) * 1e3, TOL_MS);
  ck_assert_uint_eq(host_allocs(s, "sync"), L);
  ck_assert_uint_eq(host_allocs(s, "async"), L);
  ck_assert_uint_eq(host_allocs(s, "pooled"), 0);
}
END_TEST

/* [scenario] step: pooled and caching buffers are allocated in a run's
 * first step, one per copy to the host, and reused after; per-tensor pays
 * in every step; pageable memory is never pinned.  Sync offload: a steady
 * step is 3Lf + 2Lc, a first one L x 2 ms more where it allocates. */
START_TEST(first_step_pays_the_pinned_buffers_steady_does_not)
{
  static const struct {
    const char *pinned;
    gboolean first, steady; /* whether that step allocates */
  } cases[] = {
    { "pooled", TRUE, FALSE },
    { "caching", TRUE, FALSE },
    { "per-tensor", TRUE, TRUE },
    { "pageable", FALSE, FALSE },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *policy = g_strdup_printf("[policy.p]\nkind = offload\nmode = sync\npinned = %s\n", cases[i].pinned);
    double copy = cases[i].first || cases[i].steady ? copy_s(4000000) : ALPHA + 4000000 / (BETA * 0.5);
    for (int first = 0; first < 2; first++) {
      g_autoptr(SimScenario) s = uniform_step(4000000, first ? "first" : "steady", policy);
      gboolean pays = first ? cases[i].first : cases[i].steady;
      g_autoptr(SimResult) r = test_evaluate(s, "p");
      ck_assert_msg(host_allocs(s, "p") == (pays ? L : 0), "%s, %s step", cases[i].pinned, first ? "first" : "steady");
      ck_assert_close(r->step_ms, (3 * L * F + 2 * L * copy + (pays ? L * 2e-3 : 0)) * 1e3, TOL_MS);
    }
  }
}
END_TEST

START_TEST(pageable_copies_run_at_pageable_factor)
{
  g_autoptr(SimScenario) s = uniform(4000000, "[policy.pageable]\nkind = offload\nmode = sync\npinned = pageable\n");
  g_autoptr(SimResult) r = test_evaluate(s, "pageable");
  double c = ALPHA + 4000000 / (BETA * 0.5);
  ck_assert_close(r->step_ms, (3 * L * F + 2 * L * c) * 1e3, TOL_MS);
}
END_TEST

START_TEST(checkpoint_recomputes_the_forwards_and_lowers_the_peak)
{
  g_autoptr(SimScenario) s = uniform(4000000, all_policies);
  g_autoptr(SimResult) resident = test_evaluate(s, "resident");
  g_autoptr(SimResult) ckpt = test_evaluate(s, "checkpoint");
  ck_assert_close(ckpt->recompute_ms, L * F * 1e3, TOL_MS);
  ck_assert_close(ckpt->step_ms, 4 * L * F * 1e3, TOL_MS);
  ck_assert_close(ckpt->exposed_transfer_ms, 0, TOL_MS);
  ck_assert(ckpt->peak_device.bytes < resident->peak_device.bytes);
  /* Peak: static + every input (1 MB each) + one recomputed layer (4 MB). */
  ck_assert_int_eq(ckpt->peak_device.bytes, 1000000000 + L * 1000000 + 4000000);
  ck_assert_str_eq(ckpt->peak_device.phase, "recompute");
  ck_assert_uint_eq(ckpt->d2h_copies + ckpt->h2d_copies, 0);
}
END_TEST

START_TEST(checkpoint_every_k_recomputes_every_kth_layer)
{
  g_autoptr(SimScenario) s = uniform(4000000, "[policy.every3]\nkind = checkpoint\nevery = 3\n");
  g_autoptr(SimResult) r = test_evaluate(s, "every3");
  /* Layers 0, 3, 6 of 8. */
  ck_assert_close(r->recompute_ms, 3 * F * 1e3, TOL_MS);
}
END_TEST

START_TEST(plan_mixes_actions_per_layer)
{
  g_autoptr(SimScenario) s = uniform(
    4000000, "[policy.hybrid]\nkind = plan\n"
             "actions = recompute, offload, offload, keep, recompute, offload, keep, keep\nprefetch = 1\n");
  g_autoptr(SimResult) r = test_evaluate(s, "hybrid");
  ck_assert_close(r->recompute_ms, 2 * F * 1e3, TOL_MS);
  ck_assert_uint_eq(r->d2h_copies, 3);
  ck_assert_uint_eq(r->h2d_bytes, r->d2h_bytes);
  /* Copies of 0.41 ms hide under 1 ms forwards and 2 ms backwards; no top
   * layer is offloaded, so nothing is exposed. */
  ck_assert_close(r->exposed_transfer_ms, 0, TOL_MS);
}
END_TEST

/* Field by field: a SimOp has padding, and its union is set only as far
 * as its kind uses it (4 bytes for an event), so a memcmp over ops reads
 * bytes nobody wrote (valgrind: "depends on uninitialised value"). */
static void
assert_same_ops(const SimProgram *a, const SimProgram *b)
{
  ck_assert_uint_eq(sim_program_n_ops(a), sim_program_n_ops(b));
  for (guint i = 0; i < sim_program_n_ops(a); i++) {
    const SimOp *x = &a->ops[i], *y = &b->ops[i];
    ck_assert_msg(x->kind == y->kind && x->phase == y->phase && x->dir == y->dir && x->pageable == y->pageable &&
                    x->stream == y->stream && x->layer == y->layer && x->label == y->label &&
                    x->mem_first == y->mem_first && x->mem_count == y->mem_count && x->mem_starts == y->mem_starts &&
                    x->gpu == y->gpu,
                  "op %u differs", i);
    switch ((SimOpKind)x->kind) {
    case SIM_OP_COMPUTE:
    case SIM_OP_HOST_ALLOC:
    case SIM_OP_SEND:
    case SIM_OP_COLLECTIVE:
      ck_assert_msg(x->work == y->work, "op %u: work %g, %g", i, x->work, y->work);
      break;
    case SIM_OP_COPY:
      ck_assert_msg(x->bytes == y->bytes, "op %u: bytes differ", i);
      break;
    case SIM_OP_RECORD:
    case SIM_OP_WAIT:
      ck_assert_msg(x->event == y->event, "op %u: event %u, %u", i, x->event, y->event);
      break;
    }
  }
}

START_TEST(the_program_has_three_named_streams)
{
  g_autoptr(SimScenario) s = uniform(4000000, all_policies);
  const SimPolicy *p = sim_scenario_policy(s, "async");
  g_autoptr(SimProgram) program = sim_lower(s->workload, p, &s->machine.link);
  ck_assert_uint_eq(program->streams->len, 3);
  ck_assert_str_eq(((SimStream *)g_ptr_array_index(program->streams, SIM_LOWER_STREAM_COMPUTE))->name, "compute");
  ck_assert_str_eq(((SimStream *)g_ptr_array_index(program->streams, SIM_LOWER_STREAM_D2H))->name, "d2h");
  ck_assert_str_eq(((SimStream *)g_ptr_array_index(program->streams, SIM_LOWER_STREAM_H2D))->name, "h2d");
  /* Lowering into a reused program gives the same ops. */
  g_autoptr(SimProgram) again = sim_program_new();
  sim_lower_into(again, s->workload, sim_scenario_policy(s, "resident"), &s->machine.link);
  sim_lower_into(again, s->workload, p, &s->machine.link);
  ck_assert_uint_eq(sim_program_n_ops(again), sim_program_n_ops(program));
  assert_same_ops(again, program);
}
END_TEST

START_TEST(default_scenario_policies_keep_their_invariants)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_default(&error);
  ck_assert_ptr_nonnull(s);
  g_autoptr(SimResult) resident = test_evaluate(s, "resident");
  for (guint i = 0; i < s->policies->len; i++) {
    const SimPolicy *p = g_ptr_array_index(s->policies, i);
    g_autoptr(SimResult) r = test_evaluate(s, p->name);
    ck_assert_uint_eq(r->d2h_bytes, r->h2d_bytes);
    ck_assert_uint_eq(r->saved_bytes, resident->saved_bytes);
    ck_assert(r->step_ms >= r->compute_ms + r->recompute_ms - 1e-9);
    ck_assert(r->peak_device.bytes <= resident->peak_device.bytes);
  }
}
END_TEST

static Suite *
policies_suite(void)
{
  Suite *s = suite_create("policies");
  TCase *tc = tcase_create("uniform");
  tcase_add_test(tc, resident_has_no_copies_and_its_step_is_3Lf);
  tcase_add_test(tc, sync_offload_adds_exactly_2L_copies);
  tcase_add_test(tc, async_offload_step_matches_the_derivation);
  tcase_add_test(tc, async_offload_hides_what_sync_exposes);
  tcase_add_test(tc, async_inflight_1_serialises_forward_and_copies);
  tcase_add_test(tc, async_without_prefetch_waits_for_every_reload);
  tcase_add_test(tc, deep_prefetch_still_reloads_every_layer_once);
  tcase_add_test(tc, keep_last_min_tensor_and_layers_select_what_moves);
  tcase_add_test(tc, per_tensor_pinning_pays_host_alloc_per_tensor);
  tcase_add_test(tc, start_tensor_pays_host_alloc_per_tensor);
  tcase_add_test(tc, first_step_pays_the_pinned_buffers_steady_does_not);
  tcase_add_test(tc, pageable_copies_run_at_pageable_factor);
  tcase_add_test(tc, checkpoint_recomputes_the_forwards_and_lowers_the_peak);
  tcase_add_test(tc, checkpoint_every_k_recomputes_every_kth_layer);
  tcase_add_test(tc, plan_mixes_actions_per_layer);
  tcase_add_test(tc, the_program_has_three_named_streams);
  tcase_add_test(tc, default_scenario_policies_keep_their_invariants);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  return test_run_suite(policies_suite());
}
