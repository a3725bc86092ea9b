/* Engine semantics against hand computations (docs/engine.md). */
#include "testutil.h"

#include "engine/internal/engine_private.h" /* sim_run_live_at_peak, sim_engine_set_lazy_gpus, test-only */
#include "base/error.h"
#include "engine/invariants.h"
#include "input/scenario.h"
#include "lower/lower.h"
#include "lower/pipeline.h"

#include <math.h>
#include <string.h>

#define TOL 1e-12

static SimLink
link_of(double h2d, double d2h, double bidir, double latency)
{
  return (SimLink){ .h2d_bandwidth = h2d, .d2h_bandwidth = d2h, .bidir_bandwidth = bidir, .latency = latency,
                    .pageable_factor = 0.5, .compute_slowdown = 0, .host_alloc = 3e-3 };
}

static SimRun *
run_ok(const SimProgram *p, const SimLink *link)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimEngine) engine = sim_engine_new();
  SimEngineOptions options = { .record_ops = TRUE, .record_curve = TRUE };
  SimRun *run = sim_engine_run(engine, p, link, &options, &error);
  ck_assert_msg(run != NULL, "run failed: %s", error ? error->message : "?");
  return run;
}

/* Runs a program that must fail; returns the error (SIM_ERROR_INTERNAL). */
static GError *
run_error(const SimProgram *p, const SimLink *link)
{
  GError *error = NULL;
  g_autoptr(SimEngine) engine = sim_engine_new();
  g_autoptr(SimRun) run = sim_engine_run(engine, p, link, NULL, &error);
  ck_assert_msg(run == NULL, "the run should have failed");
  ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INTERNAL));
  return error;
}

static double
start_of(const SimRun *run, guint32 op)
{
  return g_array_index(run->op_start, double, op);
}

static double
end_of(const SimRun *run, guint32 op)
{
  return g_array_index(run->op_end, double, op);
}

START_TEST(lone_copy_takes_latency_plus_bytes_over_bandwidth)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 s = sim_program_add_stream(p, "d2h");
  guint32 op = sim_program_copy(p, s, SIM_DIR_D2H, 100000000, SIM_HOST_PINNED, 0, sim_program_intern(p, "t"));
  SimLink link = link_of(20e9, 50e9, 70e9, 10e-6);
  g_autoptr(SimRun) run = run_ok(p, &link);
  /* 10 us + 1e8 B / 5e10 B/s = 2.01 ms */
  ck_assert_close(run->step, 10e-6 + 100000000 / 50e9, TOL);
  ck_assert_close(end_of(run, op), 2.01e-3, TOL);
  ck_assert_uint_eq(run->copy_bytes[SIM_DIR_D2H], 100000000);
  ck_assert_uint_eq(run->copies[SIM_DIR_D2H], 1);
  ck_assert_uint_eq(run->copies[SIM_DIR_H2D], 0);
}
END_TEST

START_TEST(pageable_copy_runs_at_pageable_factor)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 s = sim_program_add_stream(p, "h2d");
  sim_program_copy(p, s, SIM_DIR_H2D, 100000000, SIM_HOST_PAGEABLE, 0, sim_program_intern(p, "t"));
  SimLink link = link_of(20e9, 50e9, 70e9, 0);
  link.pageable_factor = 0.25;
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(run->step, 1e8 / (20e9 * 0.25), TOL); /* 20 ms */
}
END_TEST

START_TEST(same_direction_copies_on_two_streams_run_back_to_back)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 a = sim_program_add_stream(p, "a"), b = sim_program_add_stream(p, "b");
  guint32 t = sim_program_intern(p, "t");
  guint32 first = sim_program_copy(p, a, SIM_DIR_D2H, 50000000, SIM_HOST_PINNED, 0, t);
  guint32 second = sim_program_copy(p, b, SIM_DIR_D2H, 30000000, SIM_HOST_PINNED, 1, t);
  SimLink link = link_of(10e9, 10e9, 20e9, 5e-6);
  g_autoptr(SimRun) run = run_ok(p, &link);
  /* Issue order decides: first takes 5 us + 5 ms, then second 5 us + 3 ms. */
  ck_assert_close(start_of(run, first), 0, TOL);
  ck_assert_close(end_of(run, first), 5e-6 + 5e-3, TOL);
  ck_assert_close(start_of(run, second), end_of(run, first), TOL);
  ck_assert_close(run->step, 2 * 5e-6 + 8e-3, TOL);
}
END_TEST

START_TEST(opposite_directions_share_the_bidirectional_cap)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 a = sim_program_add_stream(p, "d2h"), b = sim_program_add_stream(p, "h2d");
  guint32 t = sim_program_intern(p, "t");
  guint32 out = sim_program_copy(p, a, SIM_DIR_D2H, 300000000, SIM_HOST_PINNED, 0, t);
  guint32 in = sim_program_copy(p, b, SIM_DIR_H2D, 300000000, SIM_HOST_PINNED, 0, t);
  /* Each direction alone 50 GB/s; together capped at 60: 30 each, 10 ms. */
  SimLink link = link_of(50e9, 50e9, 60e9, 0);
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(end_of(run, out), 3e8 / 30e9, TOL);
  ck_assert_close(end_of(run, in), 3e8 / 30e9, TOL);

  /* Uneven: H2D can only use 20, so D2H gets the other 40 of the cap.
   * H2D: 2e8 B at 20 GB/s = 10 ms.  D2H: 4e8 B at 40 for 10 ms, then done. */
  g_autoptr(SimProgram) q = sim_program_new();
  a = sim_program_add_stream(q, "d2h");
  b = sim_program_add_stream(q, "h2d");
  t = sim_program_intern(q, "t");
  out = sim_program_copy(q, a, SIM_DIR_D2H, 400000000, SIM_HOST_PINNED, 0, t);
  in = sim_program_copy(q, b, SIM_DIR_H2D, 200000000, SIM_HOST_PINNED, 0, t);
  SimLink uneven = link_of(20e9, 50e9, 60e9, 0);
  g_autoptr(SimRun) run2 = run_ok(q, &uneven);
  ck_assert_close(end_of(run2, in), 10e-3, TOL);
  ck_assert_close(end_of(run2, out), 10e-3, TOL);

  /* A generous cap does not slow either: they overlap fully. */
  SimLink wide = link_of(50e9, 50e9, 100e9, 0);
  g_autoptr(SimRun) run3 = run_ok(p, &wide);
  ck_assert_close(run3->step, 3e8 / 50e9, TOL);
}
END_TEST

START_TEST(rates_change_when_the_other_direction_finishes)
{
  /* D2H 5e8 B and H2D 1e8 B at 50 GB/s each, cap 60.  Together 30 each until
   * H2D ends at 1e8/30e9 = 3.333 ms; D2H has moved 1e8 and moves the last 4e8
   * at 50 GB/s: 8 ms more. */
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 a = sim_program_add_stream(p, "d2h"), b = sim_program_add_stream(p, "h2d");
  guint32 t = sim_program_intern(p, "t");
  guint32 out = sim_program_copy(p, a, SIM_DIR_D2H, 500000000, SIM_HOST_PINNED, 0, t);
  sim_program_copy(p, b, SIM_DIR_H2D, 100000000, SIM_HOST_PINNED, 0, t);
  SimLink link = link_of(50e9, 50e9, 60e9, 0);
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(end_of(run, out), 1e8 / 30e9 + 4e8 / 50e9, 1e-15);
}
END_TEST

START_TEST(event_waits_order_work_across_streams)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute"), d = sim_program_add_stream(p, "d2h");
  guint32 ev = sim_program_add_event(p, sim_program_intern(p, "done"), 0);
  /* The d2h stream's ops are issued first but must wait for the compute. */
  sim_program_wait(p, d, ev);
  guint32 copy = sim_program_copy(p, d, SIM_DIR_D2H, 1000000, SIM_HOST_PINNED, 0, sim_program_intern(p, "t"));
  guint32 fwd = sim_program_compute(p, c, 2e-3, SIM_PHASE_FORWARD, 0, sim_program_intern(p, "forward"));
  sim_program_record(p, c, ev);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(end_of(run, fwd), 2e-3, TOL);
  ck_assert_close(start_of(run, copy), 2e-3, TOL);
  ck_assert_close(run->step, 3e-3, TOL);
}
END_TEST

START_TEST(compute_is_slowed_while_a_copy_runs)
{
  /* 10 ms of compute beside a copy of 1 us latency + 5 ms of bytes, slowdown
   * 20 %: for 5.001 ms compute advances at 0.8 (4.0008 ms of work), then the
   * remaining 5.9992 ms at full rate: it ends at 11.0002 ms. */
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute"), d = sim_program_add_stream(p, "d2h");
  guint32 fwd = sim_program_compute(p, c, 10e-3, SIM_PHASE_FORWARD, 0, sim_program_intern(p, "forward"));
  guint32 copy = sim_program_copy(p, d, SIM_DIR_D2H, 5000000, SIM_HOST_PINNED, 0, sim_program_intern(p, "t"));
  SimLink link = link_of(1e9, 1e9, 2e9, 1e-6);
  link.compute_slowdown = 0.2;
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(end_of(run, copy), 5.001e-3, TOL);
  ck_assert_close(end_of(run, fwd), 5.001e-3 + (10e-3 - 0.8 * 5.001e-3), TOL);
}
END_TEST

START_TEST(two_compute_streams_share_the_device_fairly)
{
  /* 2 ms and 6 ms of work: both at half rate until the short one ends at 4 ms,
   * then the long one finishes its last 4 ms alone: 8 ms, the sum. */
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 a = sim_program_add_stream(p, "a"), b = sim_program_add_stream(p, "b");
  guint32 label = sim_program_intern(p, "forward");
  guint32 shorter = sim_program_compute(p, a, 2e-3, SIM_PHASE_FORWARD, 0, label);
  guint32 longer = sim_program_compute(p, b, 6e-3, SIM_PHASE_FORWARD, 1, label);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(end_of(run, shorter), 4e-3, TOL);
  ck_assert_close(end_of(run, longer), 8e-3, TOL);
}
END_TEST

START_TEST(host_alloc_holds_its_stream_only)
{
  /* The allocation (3 ms) holds its stream and uses no resource: `beside`,
   * issued before it on another stream, runs at once.  And cudaHostAlloc
   * returns to the thread that issues kernels only when it is done, so
   * `later`, issued after it on that other stream, waits for it with no
   * launch set (the host model runs for a blocking op): `after` and `later`
   * start at 3 ms and share the compute, ending at 5 ms. */
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute"), h = sim_program_add_stream(p, "host");
  guint32 fwd = sim_program_intern(p, "forward");
  guint32 beside = sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, 1, fwd);
  guint32 alloc = sim_program_host_alloc(p, h, 3e-3, 0, sim_program_intern(p, "cudaHostAlloc"));
  guint32 after = sim_program_compute(p, h, 1e-3, SIM_PHASE_FORWARD, 0, fwd);
  guint32 later = sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, 2, fwd);
  ck_assert(sim_program_has_host(p));
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(end_of(run, alloc), 3e-3, TOL);
  ck_assert_close(end_of(run, beside), 1e-3, TOL); /* not delayed by the allocation */
  ck_assert_close(start_of(run, after), 3e-3, TOL);
  ck_assert_close(start_of(run, later), 3e-3, TOL);
  ck_assert_close(end_of(run, later), 5e-3, TOL);
  ck_assert_close(run->step, 5e-3, TOL);
}
END_TEST

START_TEST(stuck_schedule_names_the_blocked_ops)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute");
  guint32 never = sim_program_add_event(p, sim_program_intern(p, "never"), 3);
  sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, 0, sim_program_intern(p, "forward"));
  sim_program_wait(p, c, never);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(GError) error = run_error(p, &link);
  ck_assert_ptr_nonnull(strstr(error->message, "stuck schedule"));
  ck_assert_ptr_nonnull(strstr(error->message, "event 'never' L3"));
  ck_assert_ptr_nonnull(strstr(error->message, "never recorded"));
  ck_assert_ptr_nonnull(strstr(error->message, "stream 'compute'"));

  /* A cycle: each stream waits for what the other records afterwards. */
  g_autoptr(SimProgram) q = sim_program_new();
  guint32 a = sim_program_add_stream(q, "a"), b = sim_program_add_stream(q, "b");
  guint32 e1 = sim_program_add_event(q, sim_program_intern(q, "e1"), SIM_NO_LAYER);
  guint32 e2 = sim_program_add_event(q, sim_program_intern(q, "e2"), SIM_NO_LAYER);
  sim_program_wait(q, a, e2);
  sim_program_record(q, a, e1);
  sim_program_wait(q, b, e1);
  sim_program_record(q, b, e2);
  g_autoptr(GError) cycle = run_error(q, &link);
  ck_assert_ptr_nonnull(strstr(cycle->message, "stream 'a'"));
  ck_assert_ptr_nonnull(strstr(cycle->message, "stream 'b'"));
  ck_assert_ptr_nonnull(strstr(cycle->message, "which cannot run"));
}
END_TEST

START_TEST(peak_of_three_ops_matches_hand_computation)
{
  /* static 100; op A (1 ms) allocates 50 at start, frees 20 at end;
   * copy B (d2h) allocates 30 host at start, frees 30 device at end;
   * op C (1 ms) allocates 40 at start, frees 40 + 0 at end.
   * Device: 100 -> 150 (A start) -> 130 (A end) -> 100 (B end, 1 ms later)
   *         -> 140 (C start) -> 100 (C end).  Peak 150 at 0, phase forward L0.
   * Host:   0 -> 30 (B start, t = 1 ms).  Peak 30 at 1 ms. */
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 s = sim_program_add_stream(p, "compute");
  sim_program_set_baseline(p, SIM_POOL_DEVICE, 100, "static");
  guint32 t = sim_program_intern(p, "act");
  guint32 a = sim_program_compute(p, s, 1e-3, SIM_PHASE_FORWARD, 0, sim_program_intern(p, "forward"));
  sim_program_mem(p, a, SIM_AT_START, SIM_POOL_DEVICE, 50, t, 0);
  sim_program_mem(p, a, SIM_AT_END, SIM_POOL_DEVICE, -20, t, 0);
  guint32 b = sim_program_copy(p, s, SIM_DIR_D2H, 1000000, SIM_HOST_PINNED, 0, t);
  sim_program_mem(p, b, SIM_AT_START, SIM_POOL_HOST, 30, t, 0);
  sim_program_mem(p, b, SIM_AT_END, SIM_POOL_DEVICE, -30, t, 0);
  guint32 c = sim_program_compute(p, s, 1e-3, SIM_PHASE_BACKWARD, 0, sim_program_intern(p, "backward"));
  sim_program_mem(p, c, SIM_AT_START, SIM_POOL_DEVICE, 40, sim_program_intern(p, "workspace"), 0);
  sim_program_mem(p, c, SIM_AT_END, SIM_POOL_DEVICE, -40, sim_program_intern(p, "workspace"), 0);
  sim_program_mem(p, c, SIM_AT_END, SIM_POOL_HOST, -30, t, 0);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_ok(p, &link);

  ck_assert_int_eq(run->peak[SIM_POOL_DEVICE].bytes, 150);
  ck_assert_close(run->peak[SIM_POOL_DEVICE].time, 0, TOL);
  ck_assert_uint_eq(run->peak[SIM_POOL_DEVICE].op, a);
  ck_assert_int_eq(run->peak[SIM_POOL_DEVICE].phase, SIM_PHASE_FORWARD);
  ck_assert_int_eq(run->peak[SIM_POOL_HOST].bytes, 30);
  ck_assert_close(run->peak[SIM_POOL_HOST].time, 1e-3, TOL);

  /* The curve has one point per change plus the start. */
  ck_assert_uint_eq(run->curve->len, 1 + 7);
  gint64 expect_dev[] = { 100, 150, 130, 130, 100, 140, 100, 100 };
  for (guint i = 0; i < run->curve->len; i++)
    ck_assert_int_eq(g_array_index(run->curve, SimMemPoint, i).device, expect_dev[i]);

  /* What was live at the device peak: static 100 and act L0 50. */
  g_autoptr(GArray) live = sim_run_live_at_peak(run, p, SIM_POOL_DEVICE);
  ck_assert_uint_eq(live->len, 2);
  ck_assert_str_eq(sim_program_label(p, g_array_index(live, SimLive, 0).tag), "static");
  ck_assert_int_eq(g_array_index(live, SimLive, 0).bytes, 100);
  ck_assert_str_eq(sim_program_label(p, g_array_index(live, SimLive, 1).tag), "act");
  ck_assert_int_eq(g_array_index(live, SimLive, 1).bytes, 50);
}
END_TEST

/* The two replays of what is live at a peak, the dense table and the
 * column-by-column one large models take, give the same entries on every
 * policy of a generated transformer and of explicit layers. */
START_TEST(live_replays_agree)
{
  static const char *const texts[] = {
    "[device]\nmemory = 80GiB\nmatmul_tflops = 100\nhbm_bandwidth = 1TB/s\n[link]\nh2d_bandwidth = 10GB/s\n"
    "d2h_bandwidth = 10GB/s\n[transformer]\nhidden = 256\nlayers = 6\nheads = 4\nffn = 512\nvocab = 1000\n"
    "batch = 1\nseq = 128\nops = hf\n",
    "[device]\nmemory = 1GiB\n[link]\nh2d_bandwidth = 1GB/s\nd2h_bandwidth = 1GB/s\n[model]\nlayers = 5\n"
    "forward = 1ms\ninput = 1MB\ntensors = a:1MB, b:2MB:refs=3, c:1MB:recompute=1ms\n",
  };
  for (guint t = 0; t < G_N_ELEMENTS(texts); t++) {
    g_autoptr(SimScenario) s = test_scenario_from_text(texts[t]);
    for (guint k = 0; k < s->policies->len; k++) {
      const SimPolicy *policy = g_ptr_array_index(s->policies, k);
      g_autoptr(SimResult) r = test_evaluate(s, policy->name);
      for (SimPool pool = 0; pool < SIM_POOL_COUNT; pool++) {
        g_autoptr(GArray) dense = sim_run_live_at_peak(r->run, r->program, pool);
        sim_engine_set_live_dense_cells(0);
        g_autoptr(GArray) sorted = sim_run_live_at_peak(r->run, r->program, pool);
        sim_engine_set_live_dense_cells(1u << 22);
        ck_assert_uint_eq(dense->len, sorted->len);
        gboolean same = dense->len == 0 || memcmp(dense->data, sorted->data, dense->len * sizeof(SimLive)) == 0;
        ck_assert_msg(same, "%s pool %d", policy->name,
                      pool);
        ck_assert(pool == SIM_POOL_HOST || dense->len > 0);
      }
    }
  }
}
END_TEST

START_TEST(negative_memory_is_reported_as_a_lowering_bug)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 s = sim_program_add_stream(p, "compute");
  guint32 a = sim_program_compute(p, s, 1e-3, SIM_PHASE_FORWARD, 2, sim_program_intern(p, "forward"));
  sim_program_mem(p, a, SIM_AT_END, SIM_POOL_DEVICE, -1, sim_program_intern(p, "x"), 2);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(GError) error = run_error(p, &link);
  ck_assert_ptr_nonnull(strstr(error->message, "went negative"));
  ck_assert_ptr_nonnull(strstr(error->message, "forward forward L2"));
}
END_TEST

START_TEST(an_event_recorded_twice_is_rejected)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 s = sim_program_add_stream(p, "compute");
  guint32 ev = sim_program_add_event(p, sim_program_intern(p, "e"), SIM_NO_LAYER);
  sim_program_record(p, s, ev);
  sim_program_record(p, s, ev);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(GError) error = run_error(p, &link);
  ck_assert_ptr_nonnull(strstr(error->message, "recorded more than 1 time:"));
}
END_TEST

/* A collective beside compute slows it by collective_slowdown while it
 * runs: 1 s of compute with 0.4 s of collective at 25 % slowdown does 0.3 s
 * of work in the first 0.4 s and the other 0.7 s alone: 1.1 s. */
START_TEST(collective_slows_concurrent_compute)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute"), m = sim_program_add_stream(p, "comm");
  guint32 f = sim_program_compute(p, c, 1.0, SIM_PHASE_FORWARD, 0, sim_program_intern(p, "f"));
  guint32 a = sim_program_collective(p, m, 0.4, 0, sim_program_intern(p, "all-reduce"));
  ck_assert_uint_ne(a, SIM_NO_OP);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  link.node.collective_slowdown = 0.25;
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(end_of(run, a), 0.4, TOL);
  ck_assert_close(end_of(run, f), 0.4 + (1.0 - 0.4 * 0.75), TOL);
  ck_assert_close(run->comm_exposed, 0.0, TOL);
}
END_TEST

/* Compute that waits for a collective: the collective's whole time is
 * exposed (0.2 s compute, 0.5 s all-reduce, 0.1 s compute: 0.8 s). */
START_TEST(collective_waited_for_is_exposed)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute"), m = sim_program_add_stream(p, "comm");
  guint32 ready = sim_program_add_event(p, sim_program_intern(p, "ready"), 0);
  guint32 done = sim_program_add_event(p, sim_program_intern(p, "reduced"), 0);
  sim_program_compute(p, c, 0.2, SIM_PHASE_FORWARD, 0, sim_program_intern(p, "f"));
  sim_program_record(p, c, ready);
  sim_program_wait(p, m, ready);
  sim_program_collective(p, m, 0.5, 0, sim_program_intern(p, "all-reduce"));
  sim_program_record(p, m, done);
  sim_program_wait(p, c, done);
  sim_program_compute(p, c, 0.1, SIM_PHASE_FORWARD, 0, sim_program_intern(p, "g"));
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  link.node.collective_slowdown = 0.5; /* nothing computes beside it */
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(run->step, 0.8, TOL);
  ck_assert_close(run->comm_exposed, 0.5, TOL);
}
END_TEST

/* Two GPUs meet at a barrier before their collective: GPU 0 arrives at
 * 0.3 s, GPU 1 at 0.6 s, and both run it from 0.6 s to 0.7 s. */
START_TEST(barrier_starts_a_collective_when_the_last_member_arrives)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 meet = sim_program_add_barrier(p, sim_program_intern(p, "bucket"), SIM_NO_LAYER, 2);
  guint32 coll[2];
  for (guint g = 0; g < 2; g++) {
    guint32 c = sim_program_add_stream_on(p, "compute", g);
    sim_program_compute(p, c, g ? 0.6 : 0.3, SIM_PHASE_BACKWARD, 0, sim_program_intern(p, "b"));
    sim_program_record(p, c, meet);
    sim_program_wait(p, c, meet);
    coll[g] = sim_program_collective(p, c, 0.1, 0, sim_program_intern(p, "all-reduce"));
  }
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_ok(p, &link);
  for (guint g = 0; g < 2; g++) {
    ck_assert_close(start_of(run, coll[g]), 0.6, TOL);
    ck_assert_close(end_of(run, coll[g]), 0.7, TOL);
  }
  ck_assert_close(run->comm_exposed, 0.1, TOL);
  /* A third record of a barrier of two is a lowering bug. */
  sim_program_record(p, sim_program_add_stream(p, "x"), meet);
  g_autoptr(GError) error = run_error(p, &link);
  ck_assert_ptr_nonnull(strstr(error->message, "recorded more than 2 times"));
}
END_TEST

/* A program with every kind of op and tie, for determinism: on GPU `gpu`,
 * every other reload pageable when `pageable`. */
static SimProgram *
busy_program_on(guint gpu, gboolean pageable)
{
  SimProgram *p = sim_program_new();
  guint32 c = sim_program_add_stream_on(p, "compute", gpu), d = sim_program_add_stream_on(p, "d2h", gpu),
          h = sim_program_add_stream_on(p, "h2d", gpu);
  guint32 t = sim_program_intern(p, "t");
  for (guint i = 0; i < 50; i++) {
    guint32 ev = sim_program_add_event(p, t, (gint32)i);
    guint32 f = sim_program_compute(p, c, 1e-3 * (1 + i % 3), SIM_PHASE_FORWARD, (gint32)i, t);
    sim_program_mem(p, f, SIM_AT_START, SIM_POOL_DEVICE, 1000 + i, t, (gint32)i);
    sim_program_record(p, c, ev);
    sim_program_wait(p, d, ev);
    guint32 out = sim_program_copy(p, d, SIM_DIR_D2H, 1000000 * (1 + i % 5), SIM_HOST_PINNED, (gint32)i, t);
    sim_program_mem(p, out, SIM_AT_START, SIM_POOL_HOST, 1000 + i, t, (gint32)i);
    sim_program_mem(p, out, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)(1000 + i), t, (gint32)i);
    guint32 on_host = sim_program_add_event(p, t, (gint32)i);
    sim_program_record(p, d, on_host);
    sim_program_wait(p, h, on_host);
    guint32 in = sim_program_copy(p, h, SIM_DIR_H2D, 1000000 * (1 + i % 4),
                                     pageable && i % 2 ? SIM_HOST_PAGEABLE : SIM_HOST_PINNED, (gint32)i, t);
    sim_program_mem(p, in, SIM_AT_START, SIM_POOL_DEVICE, 7, t, (gint32)i);
    sim_program_mem(p, in, SIM_AT_END, SIM_POOL_DEVICE, -7, t, (gint32)i);
    sim_program_mem(p, in, SIM_AT_END, SIM_POOL_HOST, -(gint64)(1000 + i), t, (gint32)i);
  }
  return p;
}

static SimProgram *
busy_program(void)
{
  return busy_program_on(0, TRUE);
}

START_TEST(two_runs_give_identical_bytes)
{
  g_autoptr(SimProgram) p = busy_program();
  SimLink link = link_of(1e9, 2e9, 2.5e9, 3e-6);
  link.compute_slowdown = 0.1;
  g_autoptr(SimRun) a = run_ok(p, &link);
  g_autoptr(SimRun) b = run_ok(p, &link);
  ck_assert(a->step == b->step);
  ck_assert_uint_eq(a->op_start->len, b->op_start->len);
  ck_assert(memcmp(a->op_start->data, b->op_start->data, a->op_start->len * sizeof(double)) == 0);
  ck_assert(memcmp(a->op_end->data, b->op_end->data, a->op_end->len * sizeof(double)) == 0);
  ck_assert_uint_eq(a->curve->len, b->curve->len);
  ck_assert(memcmp(a->curve->data, b->curve->data, a->curve->len * sizeof(SimMemPoint)) == 0);
  ck_assert_uint_eq(a->events, b->events);
}
END_TEST

START_TEST(every_op_runs_once_and_streams_stay_in_order)
{
  g_autoptr(SimProgram) p = busy_program();
  SimLink link = link_of(1e9, 2e9, 2.5e9, 3e-6);
  g_autoptr(SimRun) run = run_ok(p, &link);
  for (guint s = 0; s < p->streams->len; s++) {
    const SimStream *stream = g_ptr_array_index(p->streams, s);
    double last_end = 0;
    for (guint k = 0; k < stream->n_ops; k++) {
      guint32 op = stream->ops[k];
      ck_assert(start_of(run, op) >= last_end);
      ck_assert(end_of(run, op) >= start_of(run, op));
      last_end = end_of(run, op);
    }
  }
  /* Same-direction copies never overlap: one engine per direction. */
  for (int dir = 0; dir < 2; dir++) {
    double busy_until = 0;
    for (guint32 i = 0; i < sim_program_n_ops(p); i++) {
      const SimOp *op = sim_program_op(p, i);
      if (op->kind != SIM_OP_COPY || op->dir != dir)
        continue;
      ck_assert(start_of(run, i) >= busy_until - 1e-15);
      busy_until = end_of(run, i);
    }
  }
  /* Work counters: one event per timed op completion and one per copy's end
   * of latency; records and waits complete inline.  50 computes, 100 copies. */
  ck_assert_uint_eq(run->events, 50 + 100 + 100);
}
END_TEST

START_TEST(an_engine_is_reusable_across_programs)
{
  g_autoptr(SimEngine) engine = sim_engine_new();
  g_autoptr(SimProgram) big = busy_program();
  g_autoptr(SimProgram) small = sim_program_new();
  guint32 s = sim_program_add_stream(small, "compute");
  sim_program_compute(small, s, 1e-3, SIM_PHASE_FORWARD, 0, sim_program_intern(small, "forward"));
  SimLink link = link_of(1e9, 2e9, 2.5e9, 3e-6);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimRun) r1 = sim_engine_run(engine, big, &link, NULL, &error);
  g_autoptr(SimRun) r2 = sim_engine_run(engine, small, &link, NULL, &error);
  g_autoptr(SimRun) r3 = sim_engine_run(engine, big, &link, NULL, &error);
  ck_assert_ptr_nonnull(r1);
  ck_assert_ptr_nonnull(r3);
  ck_assert_close(r2->step, 1e-3, TOL);
  ck_assert(r1->step == r3->step);
}
END_TEST

START_TEST(a_calibrated_table_sets_copy_times)
{
  /* Measured: 1 MB in 1 ms (1 GB/s), 3 MB in 1.5 ms (2 GB/s).  Latency 0.5 ms. */
  SimLink link = link_of(5e9, 5e9, 10e9, 0.5e-3);
  link.table[SIM_DIR_H2D][0] = (SimBandwidthPoint){ 1000000, 1e9 };
  link.table[SIM_DIR_H2D][1] = (SimBandwidthPoint){ 3000000, 2e9 };
  link.table_points[SIM_DIR_H2D] = 2;
  struct {
    guint64 bytes;
    double seconds;
  } cases[] = {
    { 2000000, 1.25e-3 },  /* halfway in bytes, halfway in time */
    { 5000000, 2.5e-3 },   /* past the end: 1.5 ms + 2 MB at 2 GB/s */
    { 100000, 0.5e-3 },    /* 0.1 ms measured rate, floored at the latency */
    { 1000000, 1e-3 },     /* a measured point exactly */
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    ck_assert_close(sim_link_copy_time(&link, SIM_DIR_H2D, cases[i].bytes, SIM_HOST_PINNED), cases[i].seconds, TOL);
    g_autoptr(SimProgram) p = sim_program_new();
    guint32 s = sim_program_add_stream(p, "h2d");
    sim_program_copy(p, s, SIM_DIR_H2D, cases[i].bytes, SIM_HOST_PINNED, 0, sim_program_intern(p, "t"));
    g_autoptr(SimRun) run = run_ok(p, &link);
    ck_assert_close(run->step, cases[i].seconds, TOL);
  }
  /* The other direction has no table: latency + bytes / bandwidth. */
  ck_assert_close(sim_link_copy_time(&link, SIM_DIR_D2H, 5000000, SIM_HOST_PINNED), 0.5e-3 + 1e-3, TOL);
  /* Pageable: the part above the latency at pageable_factor (0.5). */
  ck_assert_close(sim_link_copy_time(&link, SIM_DIR_H2D, 2000000, SIM_HOST_PAGEABLE), 0.5e-3 + 2 * 0.75e-3, TOL);
}
END_TEST

/* Two things that end at the same instant in exact arithmetic end together,
 * whatever rounding does: here a compute of 1/0.75 + 1/0.75 + 0.5/0.75... ends
 * at 3.9999999999999996 beside a copy ending at 4, and the copy issued
 * first (op 8) must still take the engine before op 10.  (Found by review
 * against an independent fluid model.) */
START_TEST(near_ties_finish_in_issue_order)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 a = sim_program_add_stream(p, "s0"), b = sim_program_add_stream(p, "s1");
  guint32 t = sim_program_intern(p, "t");
  guint32 ev = sim_program_add_event(p, t, SIM_NO_LAYER);
  sim_program_compute(p, b, 0, SIM_PHASE_FORWARD, 0, t);
  sim_program_compute(p, a, 1, SIM_PHASE_FORWARD, 0, t);
  sim_program_compute(p, a, 1, SIM_PHASE_FORWARD, 0, t);
  sim_program_compute(p, a, 0.5, SIM_PHASE_FORWARD, 0, t);
  sim_program_copy(p, b, SIM_DIR_H2D, 0, SIM_HOST_PINNED, 0, t);
  sim_program_compute(p, b, 1, SIM_PHASE_FORWARD, 0, t);
  sim_program_copy(p, b, SIM_DIR_H2D, 2, SIM_HOST_PINNED, 0, t);
  sim_program_record(p, a, ev);
  guint32 first = sim_program_copy(p, b, SIM_DIR_H2D, 2, SIM_HOST_PINNED, 0, t);
  sim_program_compute(p, b, 1, SIM_PHASE_FORWARD, 0, t);
  guint32 second = sim_program_copy(p, a, SIM_DIR_H2D, 4, SIM_HOST_PAGEABLE, 0, t);
  SimLink link = link_of(1, 2, 3, 0);
  link.compute_slowdown = 0.25;
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert_close(start_of(run, first), 4.0, 1e-9);
  ck_assert_close(start_of(run, second), 6.0, 1e-9);
  ck_assert_close(run->step, 14.0, 1e-9);
}
END_TEST

/* Copies of one direction run in the order they became ready, not their
 * issue order; the invariant check must not call that an overlap. */
START_TEST(invariants_accept_copies_in_ready_order)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 x = sim_program_add_stream(p, "x"), y = sim_program_add_stream(p, "y");
  guint32 t = sim_program_intern(p, "t");
  sim_program_compute(p, x, 1e-3, SIM_PHASE_FORWARD, 0, t);
  guint32 late = sim_program_copy(p, x, SIM_DIR_D2H, 1000000, SIM_HOST_PINNED, 0, t);
  guint32 early = sim_program_copy(p, y, SIM_DIR_D2H, 1000000, SIM_HOST_PINNED, 1, t);
  /* What went out comes back, so the copy balance holds too. */
  sim_program_copy(p, x, SIM_DIR_H2D, 1000000, SIM_HOST_PINNED, 0, t);
  sim_program_copy(p, y, SIM_DIR_H2D, 1000000, SIM_HOST_PINNED, 1, t);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_ok(p, &link);
  ck_assert(start_of(run, early) < start_of(run, late));
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sim_invariants_check(run, p, &error), "%s", error ? error->message : "");
}
END_TEST

/* The host model (docs/engine.md, "The host").  A run with op times and
 * the curve, and the engine's invariants checked in every build type (the
 * issue times recomputed from the program). */
static SimRun *
run_host(const SimProgram *p, const SimLink *link)
{
  SimRun *run = run_ok(p, link);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sim_invariants_check_engine(run, p, &error), "%s", error ? error->message : "");
  return run;
}

static double
host_busy(const SimRun *run, guint gpu)
{
  ck_assert_ptr_nonnull(run->host_busy);
  return g_array_index(run->host_busy, double, gpu);
}

static double
host_wait(const SimRun *run, guint gpu)
{
  ck_assert_ptr_nonnull(run->host_wait);
  return g_array_index(run->host_wait, double, gpu);
}

/* n compute ops of `work` seconds on `stream`, each launched in `launch`;
 * returns the last. */
static guint32
launched_computes(SimProgram *p, guint32 stream, guint n, double work, double launch)
{
  guint32 op = SIM_NO_OP;
  for (guint i = 0; i < n; i++) {
    op = sim_program_compute(p, stream, work, SIM_PHASE_FORWARD, (gint32)i, sim_program_intern(p, "k"));
    sim_program_set_launch(p, op, launch);
  }
  return op;
}

/* 100 ops of 1 us, 5 us to launch each: op i is issued at 5 (i + 1) us
 * and its stream is free by then, so the GPU runs each op as it comes and
 * waits 5 us for the first and 4 us between the others. */
START_TEST(host_launch_bound_step_is_the_launches)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute");
  guint32 last = launched_computes(p, c, 100, 1e-6, 5e-6);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_host(p, &link);
  ck_assert_close(run->step, 100 * 5e-6 + 1e-6, TOL);
  ck_assert_close(start_of(run, 0), 5e-6, TOL);
  ck_assert_close(start_of(run, 50), 51 * 5e-6, TOL);
  ck_assert_close(start_of(run, last), 500e-6, TOL);
  ck_assert_close(host_busy(run, 0), 500e-6, TOL);
  ck_assert_close(host_wait(run, 0), 5e-6 + 99 * 4e-6, TOL);
  ck_assert_ptr_null(run->busy); /* one GPU: as before */
}
END_TEST

/* 10 ops of 1 ms, 5 us to launch each: the host runs ahead after the first,
 * so only the first launch shows. */
START_TEST(host_compute_bound_step_hides_the_launches)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute");
  launched_computes(p, c, 10, 1e-3, 5e-6);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_host(p, &link);
  ck_assert_close(run->step, 5e-6 + 10e-3, TOL);
  for (guint32 i = 1; i < 10; i++)
    ck_assert_close(start_of(run, i), 5e-6 + i * 1e-3, TOL);
  ck_assert_close(host_busy(run, 0), 50e-6, TOL);
  ck_assert_close(host_wait(run, 0), 5e-6, TOL);
}
END_TEST

/* C0 (compute, 1 ms), A (host_alloc 2 ms on its own stream), C1, C2 (1 ms
 * each), every launch 10 us:
 *   C0 issued 10 us, runs 10 us - 1.010 ms;
 *   A  issued 20 us, runs 20 us - 2.020 ms, and the host waits for it;
 *   C1 issued 2.020 + 0.010 = 2.030 ms, runs 2.030 - 3.030 ms;
 *   C2 issued 2.040 ms, runs 3.030 - 4.030 ms: the step.
 * (Without launches A holds only its stream: 3 ms.)  The GPU waits on its
 * host for 10 us, then from 1.010 to 2.030 ms.  Memory: C0 +100 -100, C1
 * +50 (held), C2 +70 then -120 at its end: peak 120 at 3.030 ms, by C2,
 * with C1's 50 and C2's 70 live. */
START_TEST(host_alloc_blocks_the_host)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute"), h = sim_program_add_stream(p, "host");
  guint32 ta = sim_program_intern(p, "a"), tb = sim_program_intern(p, "b");
  guint32 c0 = sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, 0, ta);
  sim_program_set_launch(p, c0, 10e-6);
  sim_program_mem(p, c0, SIM_AT_START, SIM_POOL_DEVICE, 100, ta, 0);
  sim_program_mem(p, c0, SIM_AT_END, SIM_POOL_DEVICE, -100, ta, 0);
  guint32 a = sim_program_host_alloc(p, h, 2e-3, 0, sim_program_intern(p, "cudaHostAlloc"));
  sim_program_set_launch(p, a, 10e-6);
  guint32 c1 = sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, 1, ta);
  sim_program_set_launch(p, c1, 10e-6);
  sim_program_mem(p, c1, SIM_AT_START, SIM_POOL_DEVICE, 50, ta, 1);
  guint32 c2 = sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, 2, tb);
  sim_program_set_launch(p, c2, 10e-6);
  sim_program_mem(p, c2, SIM_AT_START, SIM_POOL_DEVICE, 70, tb, 2);
  sim_program_mem(p, c2, SIM_AT_END, SIM_POOL_DEVICE, -50, ta, 1);
  sim_program_mem(p, c2, SIM_AT_END, SIM_POOL_DEVICE, -70, tb, 2);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_host(p, &link);
  ck_assert_close(start_of(run, c0), 10e-6, TOL);
  ck_assert_close(end_of(run, c0), 1.010e-3, TOL);
  ck_assert_close(start_of(run, a), 20e-6, TOL);
  ck_assert_close(end_of(run, a), 2.020e-3, TOL);
  ck_assert_close(start_of(run, c1), 2.030e-3, TOL);
  ck_assert_close(start_of(run, c2), 3.030e-3, TOL);
  ck_assert_close(run->step, 4.030e-3, TOL);
  ck_assert_close(host_busy(run, 0), 40e-6, TOL);
  ck_assert_close(host_wait(run, 0), 10e-6 + (2.030e-3 - 1.010e-3), TOL);
  const SimPeak *peak = &run->peak[SIM_POOL_DEVICE];
  ck_assert_int_eq(peak->bytes, 120);
  ck_assert_uint_eq(peak->op, c2);
  ck_assert_close(peak->time, 3.030e-3, TOL);
  g_autoptr(GArray) live = sim_run_live_at_peak(run, p, SIM_POOL_DEVICE);
  ck_assert_uint_eq(live->len, 2);
  const SimLive *first = &g_array_index(live, SimLive, 0), *second = &g_array_index(live, SimLive, 1);
  ck_assert(first->tag == tb && first->layer == 2 && first->bytes == 70);
  ck_assert(second->tag == ta && second->layer == 1 && second->bytes == 50);

  /* The same program without launches: A still blocks the host (the
   * host model runs for a blocking op), so C1 is issued when A ends at
   * 2 ms and runs 2 - 3 ms, C2 3 - 4 ms. */
  g_autoptr(SimProgram) q = sim_program_new();
  c = sim_program_add_stream(q, "compute");
  h = sim_program_add_stream(q, "host");
  sim_program_compute(q, c, 1e-3, SIM_PHASE_FORWARD, 0, ta);
  sim_program_host_alloc(q, h, 2e-3, 0, ta);
  sim_program_compute(q, c, 1e-3, SIM_PHASE_FORWARD, 1, ta);
  sim_program_compute(q, c, 1e-3, SIM_PHASE_FORWARD, 2, ta);
  g_autoptr(SimRun) plain = run_host(q, &link);
  ck_assert_close(plain->step, 4e-3, TOL);
  ck_assert(host_busy(plain, 0) == 0);
  ck_assert_close(host_wait(plain, 0), 1e-3, TOL);
}
END_TEST

/* A pageable copy of 1 MB at 1 GB/s x 0.5 (2 ms) blocks the host; a pinned
 * one (1 ms) does not.  Launches 10 us:
 *   pageable: copy issued 10 us, ends 2.010 ms; the compute after it is
 *             issued 2.020 ms and ends 3.020 ms;
 *   pinned:   copy issued 10 us, ends 1.010 ms; the compute is issued
 *             20 us and ends 1.020 ms. */
START_TEST(host_pageable_copy_blocks_the_host)
{
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  for (int pageable = 0; pageable < 2; pageable++) {
    g_autoptr(SimProgram) p = sim_program_new();
    guint32 c = sim_program_add_stream(p, "compute"), h = sim_program_add_stream(p, "h2d");
    guint32 t = sim_program_intern(p, "t");
    guint32 copy = sim_program_copy(p, h, SIM_DIR_H2D, 1000000, pageable ? SIM_HOST_PAGEABLE : SIM_HOST_PINNED, 0, t);
    sim_program_set_launch(p, copy, 10e-6);
    guint32 op = sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, 0, t);
    sim_program_set_launch(p, op, 10e-6);
    g_autoptr(SimRun) run = run_host(p, &link);
    ck_assert_close(start_of(run, copy), 10e-6, TOL);
    ck_assert_close(end_of(run, copy), pageable ? 2.010e-3 : 1.010e-3, TOL);
    ck_assert_close(start_of(run, op), pageable ? 2.020e-3 : 20e-6, TOL);
    ck_assert_close(run->step, pageable ? 3.020e-3 : 1.020e-3, TOL);
    ck_assert_close(host_wait(run, 0), pageable ? 2.020e-3 : 20e-6, TOL);
  }
}
END_TEST

/* A sync offload's pageable copy stalls kernel issue with no launch set
 * (cudaMemcpy from pageable memory returns to the host only once it is
 * done): C0 (1 ms) saves a tensor, the D2H stream waits for C0 and copies
 * 1 MB pageable at 1 GB/s x 0.5 = 2 ms, and C1 (1 ms) is issued after the
 * copy.  The copy runs 1 - 3 ms; C1, on another stream, cannot start
 * before 3 ms: step 4 ms.  Pinned, the copy (1 - 2 ms) blocks nothing and
 * C1 runs 1 - 2 ms beside it: step 2 ms, without a host. */
START_TEST(host_pageable_copy_stalls_issue_without_launches)
{
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  for (int pageable = 0; pageable < 2; pageable++) {
    g_autoptr(SimProgram) p = sim_program_new();
    guint32 c = sim_program_add_stream(p, "compute"), d = sim_program_add_stream(p, "d2h");
    guint32 t = sim_program_intern(p, "t");
    guint32 saved = sim_program_add_event(p, t, 0);
    sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, 0, t);
    sim_program_record(p, c, saved);
    sim_program_wait(p, d, saved);
    guint32 copy = sim_program_copy(p, d, SIM_DIR_D2H, 1000000, pageable ? SIM_HOST_PAGEABLE : SIM_HOST_PINNED, 0, t);
    guint32 c1 = sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, 1, t);
    ck_assert(sim_program_has_host(p) == (pageable != 0));
    g_autoptr(SimRun) run = run_host(p, &link);
    ck_assert_close(start_of(run, copy), 1e-3, TOL);
    ck_assert_close(end_of(run, copy), pageable ? 3e-3 : 2e-3, TOL);
    ck_assert_close(start_of(run, c1), pageable ? 3e-3 : 1e-3, TOL);
    ck_assert_close(run->step, pageable ? 4e-3 : 2e-3, TOL);
    if (pageable)
      ck_assert_close(host_wait(run, 0), 2e-3, TOL); /* compute idle 1 - 3 ms behind the copy */
    else
      ck_assert_ptr_null(run->host_wait);
  }
}
END_TEST

/* A synchronisation (docs/engine.md): a host_alloc of 0 s after a wait on
 * the event of C (1 ms, launch 5 us: it runs 5 us - 1.005 ms) holds the
 * host until C ends, so D (launch 5 us) is issued at 1.010 ms, not at
 * 10 us. */
START_TEST(host_sync_by_a_zero_host_alloc)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute"), h = sim_program_add_stream(p, "sync");
  guint32 t = sim_program_intern(p, "t");
  guint32 ev = sim_program_add_event(p, t, SIM_NO_LAYER);
  launched_computes(p, c, 1, 1e-3, 5e-6);
  sim_program_record(p, c, ev);
  sim_program_wait(p, h, ev);
  sim_program_host_alloc(p, h, 0, SIM_NO_LAYER, t);
  guint32 d = launched_computes(p, c, 1, 1e-3, 5e-6);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_host(p, &link);
  ck_assert_close(start_of(run, d), 1.010e-3, TOL);
  ck_assert_close(run->step, 2.010e-3, TOL);
}
END_TEST

/* Two GPUs, their ops interleaved in issue order, each with its own host:
 * GPU 0 first allocates 1 ms of pinned memory (launch 5 us), which blocks
 * only its own host, then 100 ops of 1 us launched in 5 us each: the last
 * is issued 1.005 + 0.500 ms and ends 1.506 ms.  GPU 1's 100 ops of 2 us,
 * 3 us each to launch, are issued as if alone: the last at 300 us, ending
 * 302 us.  One host for both would have issued every op after the
 * allocation. */
START_TEST(host_each_gpu_has_its_own_host)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 h0 = sim_program_add_stream_on(p, "host", 0), c0 = sim_program_add_stream_on(p, "compute", 0),
          c1 = sim_program_add_stream_on(p, "compute", 1);
  guint32 t = sim_program_intern(p, "t");
  guint32 alloc = sim_program_host_alloc(p, h0, 1e-3, 0, t);
  sim_program_set_launch(p, alloc, 5e-6);
  guint32 last0 = SIM_NO_OP, last1 = SIM_NO_OP;
  for (guint i = 0; i < 100; i++) {
    last0 = launched_computes(p, c0, 1, 1e-6, 5e-6);
    last1 = launched_computes(p, c1, 1, 2e-6, 3e-6);
  }
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_host(p, &link);
  ck_assert_close(end_of(run, alloc), 1.005e-3, TOL);
  ck_assert_close(start_of(run, last0), 1.505e-3, TOL);
  ck_assert_close(end_of(run, last1), 302e-6, TOL);
  ck_assert_close(start_of(run, 2), 3e-6, TOL); /* GPU 1's first op */
  ck_assert_close(run->step, 1.506e-3, TOL);
  ck_assert_close(host_busy(run, 0), 505e-6, TOL);
  ck_assert_close(host_busy(run, 1), 300e-6, TOL);
  ck_assert_close(host_wait(run, 1), 3e-6 + 99 * 1e-6, TOL);
}
END_TEST

/* Two runs are the same bytes: step, events, op times, curve, peaks and the
 * log of applied memory actions. */
static void
assert_same_run(const SimRun *a, const SimRun *b)
{
  ck_assert(a->step == b->step);
  ck_assert_uint_eq(a->events, b->events);
  ck_assert(memcmp(a->peak, b->peak, sizeof a->peak) == 0);
  GArray *arrays[][2] = { { a->op_start, b->op_start }, { a->op_end, b->op_end }, { a->curve, b->curve },
                          { a->applied, b->applied }, { a->pools, b->pools }, { a->busy, b->busy } };
  for (guint k = 0; k < G_N_ELEMENTS(arrays); k++) {
    if (arrays[k][0] == NULL) {
      ck_assert_ptr_null(arrays[k][1]);
      continue;
    }
    ck_assert_uint_eq(arrays[k][0]->len, arrays[k][1]->len);
    ck_assert(memcmp(arrays[k][0]->data, arrays[k][1]->data,
                     arrays[k][0]->len * g_array_get_element_size(arrays[k][0])) == 0);
  }
}

/* Whether two times are the same but for rounding: within the engine's
 * near tie (1e-12 x max(1 s, t)). */
static gboolean
same_time(double a, double b)
{
  return fabs(a - b) <= 1e-12 * MAX(1.0, MAX(fabs(a), fabs(b)));
}

static void
assert_same_times(const GArray *a, const GArray *b)
{
  ck_assert_uint_eq(a->len, b->len);
  for (guint i = 0; i < a->len; i++)
    ck_assert_msg(same_time(g_array_index(a, double, i), g_array_index(b, double, i)), "time %u: %.17g and %.17g",
                  i, g_array_index(a, double, i), g_array_index(b, double, i));
}

static void
assert_same_peak(const SimPeak *a, const SimPeak *b)
{
  ck_assert_int_eq(a->bytes, b->bytes);
  ck_assert(same_time(a->time, b->time));
  ck_assert_uint_eq(a->op, b->op);
  ck_assert_uint_eq(a->applied, b->applied);
  ck_assert_uint_eq(a->pool, b->pool);
  ck_assert_int_eq(a->layer, b->layer);
}

/* Two runs are the same but for the rounding of their times: step, events,
 * peaks, op times, curve, the log of applied memory actions, per-GPU peaks
 * and busy times, exposed communication.  Everything but the times must be
 * equal (the same ops in the same order at the same instants). */
static void
assert_same_run_but_rounding(const SimRun *a, const SimRun *b)
{
  ck_assert(same_time(a->step, b->step));
  ck_assert_uint_eq(a->events, b->events);
  for (int k = 0; k < SIM_POOL_COUNT; k++)
    assert_same_peak(&a->peak[k], &b->peak[k]);
  assert_same_times(a->op_start, b->op_start);
  assert_same_times(a->op_end, b->op_end);
  ck_assert_uint_eq(a->curve->len, b->curve->len);
  for (guint i = 0; i < a->curve->len; i++) {
    const SimMemPoint *x = &g_array_index(a->curve, SimMemPoint, i), *y = &g_array_index(b->curve, SimMemPoint, i);
    ck_assert(x->device == y->device && x->host == y->host && x->gpu == y->gpu && same_time(x->time, y->time));
  }
  ck_assert_uint_eq(a->applied->len, b->applied->len);
  ck_assert(memcmp(a->applied->data, b->applied->data, a->applied->len * sizeof(guint32)) == 0);
  ck_assert_uint_eq(a->pools->len, b->pools->len);
  for (guint i = 0; i < a->pools->len; i++)
    assert_same_peak(&g_array_index(a->pools, SimPeak, i), &g_array_index(b->pools, SimPeak, i));
  assert_same_times(a->busy, b->busy);
  ck_assert(same_time(a->comm_exposed, b->comm_exposed));
}

/* Lowers every policy of scenario `s` and runs it twice, op times and curve
 * recorded: the lazy loop (from 2 GPUs on) and the scan over every GPU at
 * every step, which must agree but for rounding (the lazy loop advances a
 * GPU over several steps at once).  Returns the program's GPUs. */
static guint
assert_lazy_is_the_scan(const SimScenario *s)
{
  guint n_gpus = 0;
  for (guint k = 0; k < s->policies->len; k++) {
    const SimPolicy *policy = g_ptr_array_index(s->policies, k);
    g_autoptr(SimProgram) p = sim_program_new();
    if (sim_parallel_active(&s->parallel))
      sim_lower_pipeline_into(p, s->workload, policy, &s->machine.link, &s->parallel);
    else
      sim_lower_into(p, s->workload, policy, &s->machine.link);
    SimEngineOptions options = { .record_ops = TRUE, .record_curve = TRUE };
    g_autoptr(SimEngine) engine = sim_engine_new();
    g_autoptr(GError) error = NULL;
    sim_engine_set_lazy_gpus(G_MAXUINT);
    g_autoptr(SimRun) scan = sim_engine_run(engine, p, &s->machine.link, &options, &error);
    sim_engine_set_lazy_gpus(0);
    g_autoptr(SimRun) lazy = sim_engine_run(engine, p, &s->machine.link, &options, &error);
    ck_assert_msg(scan != NULL && lazy != NULL, "%s, %s: %s", s->name, policy->name, error ? error->message : "");
    n_gpus = p->n_gpus;
    if (n_gpus > 1)
      assert_same_run_but_rounding(scan, lazy);
    else
      assert_same_run(scan, lazy); /* one GPU: the same loop */
  }
  return n_gpus;
}

/* The lazy loop (docs/engine.md, "The loop") gives the scan's run but for
 * the rounding of its times: every bundled scenario with several GPUs
 * (pipelines, shared node links, data-parallel collectives, expert
 * all-to-alls) and a long pipeline whose GPUs are idle most of the time,
 * behind shared switches and sockets. */
START_TEST(lazy_loop_gives_the_scan_run)
{
  const char *files[] = { "llama-3.1-8b-pp4.ini", "llama-3.1-8b-dp8.ini", "pipeline-tiny.ini",
                          "gpt3-175b-tp8-sp.ini", "moe/qwen3-30b-a3b-ep8.ini" };
  guint multi = 0;
  for (guint k = 0; k < G_N_ELEMENTS(files); k++) {
    g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, files[k], NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = sim_scenario_load_file(path, &error);
    ck_assert_msg(s != NULL, "%s: %s", path, error ? error->message : "");
    multi += assert_lazy_is_the_scan(s) > 1;
  }
  ck_assert_uint_ge(multi, 3);
  /* 16 stages of 2 micro-batches: at most a few GPUs busy at a time. */
  static const char pipeline[] = "[scenario]\nname = idle stages\n[device]\nmemory = 80GiB\n"
                                 "[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\nlatency = 8us\n"
                                 "compute_slowdown = 0.03\n[model]\nforward = 2ms\ninput = 4MiB\n"
                                 "tensors = a:3MiB, b:5MiB, c:1MiB\nlayers = 32\n"
                                 "[policy.async]\nkind = offload\n[policy.resident]\nkind = resident\n"
                                 "[parallel]\npp = 16\nmicrobatches = 2\n"
                                 "[node]\ngpus = 16\ngpus_per_switch = 2\nswitch_bandwidth = 40GB/s\nsockets = 4\n"
                                 "host_memory_bandwidth = 100GB/s\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_data(pipeline, "idle stages", &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(assert_lazy_is_the_scan(s), 16);
}
END_TEST

/* The lazy loop's work per step does not grow with the GPUs: the same
 * layers and micro-batches over 2 and 32 stages bring about as many GPUs
 * to an instant per step (the GPUs an op ends or starts on), where the
 * scan brings every GPU at every step. */
START_TEST(lazy_loop_work_per_step_does_not_grow_with_gpus)
{
  double per_step[2];
  const guint stages[2] = { 2, 32 };
  for (guint k = 0; k < 2; k++) {
    g_autofree char *text = g_strdup_printf(
      "[scenario]\nname = stages\n[device]\nmemory = 80GiB\n"
      "[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\nlatency = 8us\ncompute_slowdown = 0.03\n"
      "[model]\nforward = 2ms\ninput = 4MiB\ntensors = a:3MiB, b:5MiB, c:1MiB\nlayers = 64\n"
      "[policy.async]\nkind = offload\n[parallel]\npp = %u\nmicrobatches = 64\n", stages[k]);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = sim_scenario_load_data(text, "stages", &error);
    ck_assert_msg(s != NULL, "%s", error ? error->message : "");
    g_autoptr(SimProgram) p = sim_program_new();
    sim_lower_pipeline_into(p, s->workload, g_ptr_array_index(s->policies, 0), &s->machine.link, &s->parallel);
    g_autoptr(SimEngine) engine = sim_engine_new();
    g_autoptr(SimRun) lazy = sim_engine_run(engine, p, &s->machine.link, NULL, &error);
    sim_engine_set_lazy_gpus(G_MAXUINT);
    g_autoptr(SimRun) scan = sim_engine_run(engine, p, &s->machine.link, NULL, &error);
    sim_engine_set_lazy_gpus(0);
    ck_assert(lazy != NULL && scan != NULL);
    ck_assert_uint_eq(lazy->events, scan->events);
    per_step[k] = (double)lazy->gpu_advances / (double)lazy->events;
    /* The scan: every GPU at every step (steps <= events). */
    ck_assert_uint_ge(scan->gpu_advances, (guint64)stages[k] * (scan->events / 4));
    ck_assert_msg(per_step[k] < 2.0, "pp %u: %.3f GPUs a step", stages[k], per_step[k]);
  }
  ck_assert_msg(per_step[1] < 1.3 * per_step[0], "%.3f against %.3f", per_step[1], per_step[0]);
}
END_TEST

/* With every launch 0 the host issues each op at time 0 and never holds
 * one: the host model's loop gives the very run of the loop without it.
 * And a launch set back to 0 turns the model off again. */
START_TEST(host_launch_zero_runs_as_before)
{
  SimLink link = link_of(1e9, 2e9, 2.5e9, 3e-6);
  link.compute_slowdown = 0.1;
  /* No pageable copy: under the host model it would block the host. */
  SimProgram *programs[] = { busy_program_on(0, FALSE), busy_program_on(1, FALSE), NULL };
  /* Two GPUs: GPU 0's program and GPU 1's, one after the other. */
  g_autoptr(SimProgram) two = busy_program_on(1, FALSE);
  guint32 c = sim_program_add_stream_on(two, "compute", 0);
  guint32 t = sim_program_intern(two, "t");
  for (guint i = 0; i < 20; i++) {
    guint32 op = sim_program_compute(two, c, 1e-4 * (1 + i % 3), SIM_PHASE_FORWARD, (gint32)i, t);
    sim_program_set_launch(two, op, i % 2 ? 0.0 : 1e-6);
    sim_program_set_launch(two, op, 0.0);
  }
  ck_assert(!sim_program_has_host(two));
  programs[2] = two;
  /* The host model runs the scan over every GPU: so does the plain run. */
  sim_engine_set_lazy_gpus(G_MAXUINT);
  for (guint k = 0; k < G_N_ELEMENTS(programs); k++) {
    g_autoptr(SimRun) plain = run_ok(programs[k], &link);
    sim_engine_set_host_model(TRUE);
    g_autoptr(SimRun) hosted = run_ok(programs[k], &link);
    sim_engine_set_host_model(FALSE);
    ck_assert_ptr_null(plain->host_busy);
    ck_assert_ptr_nonnull(hosted->host_busy);
    assert_same_run(plain, hosted);
    for (guint g = 0; g < programs[k]->n_gpus; g++) {
      ck_assert(host_busy(hosted, g) == 0);
      ck_assert(host_wait(hosted, g) == 0);
    }
  }
  sim_engine_set_lazy_gpus(0);
  sim_program_free(programs[0]);
  sim_program_free(programs[1]);
}
END_TEST

/* An op the host cannot issue, because it waits on a host-blocking op that
 * can never run, makes a stuck schedule that says so. */
START_TEST(host_stuck_behind_a_blocking_op_is_reported)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute"), h = sim_program_add_stream(p, "host");
  guint32 t = sim_program_intern(p, "t");
  guint32 ev = sim_program_add_event(p, t, SIM_NO_LAYER);
  sim_program_wait(p, h, ev);
  sim_program_host_alloc(p, h, 1e-3, 0, sim_program_intern(p, "cudaHostAlloc"));
  launched_computes(p, c, 1, 1e-3, 5e-6);
  sim_program_record(p, c, ev);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(GError) error = run_error(p, &link);
  ck_assert_ptr_nonnull(strstr(error->message, "stuck schedule"));
  ck_assert_ptr_nonnull(strstr(error->message, "not issued: its host waits for"));
  ck_assert_ptr_nonnull(strstr(error->message, "cudaHostAlloc"));
}
END_TEST

/* The invariants catch an op that started before its issue and a step
 * shorter than a host's launches. */
START_TEST(host_invariants_catch_early_starts)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 c = sim_program_add_stream(p, "compute");
  launched_computes(p, c, 10, 1e-6, 5e-6);
  SimLink link = link_of(1e9, 1e9, 2e9, 0);
  g_autoptr(SimRun) run = run_host(p, &link);
  g_autoptr(GError) early = NULL;
  g_array_index(run->op_start, double, 3) = 10e-6; /* issued at 20 us */
  ck_assert(!sim_invariants_check_engine(run, p, &early));
  ck_assert_ptr_nonnull(strstr(early->message, "before its host issued it"));
  g_autoptr(GError) floor = NULL;
  g_array_index(run->op_start, double, 3) = 20e-6;
  run->step = 40e-6;
  ck_assert(!sim_invariants_check_engine(run, p, &floor));
  ck_assert_ptr_nonnull(strstr(floor->message, "launches of GPU 0"));
}
END_TEST

/* The engine's work counters grow linearly with the program: a regression
 * to anything quadratic shows here, whatever the machine's speed. */
START_TEST(work_grows_linearly_with_the_program)
{
  guint64 events[2], heap[2];
  guint sizes[2] = { 200, 20000 };
  for (int k = 0; k < 2; k++) {
    g_autoptr(SimProgram) p = sim_program_new();
    guint32 c = sim_program_add_stream(p, "compute"), d = sim_program_add_stream(p, "d2h"),
            h = sim_program_add_stream(p, "h2d");
    guint32 t = sim_program_intern(p, "t");
    for (guint i = 0; i < sizes[k]; i++) {
      guint32 ev = sim_program_add_event(p, t, (gint32)i), back = sim_program_add_event(p, t, (gint32)i);
      sim_program_compute(p, c, 1e-3, SIM_PHASE_FORWARD, (gint32)i, t);
      sim_program_record(p, c, ev);
      sim_program_wait(p, d, ev);
      sim_program_copy(p, d, SIM_DIR_D2H, 3000000, SIM_HOST_PINNED, (gint32)i, t);
      sim_program_record(p, d, back);
      sim_program_wait(p, h, back);
      sim_program_copy(p, h, SIM_DIR_H2D, 1000000, SIM_HOST_PINNED, (gint32)i, t);
    }
    SimLink link = link_of(1e9, 1e9, 1.5e9, 1e-5);
    g_autoptr(SimEngine) engine = sim_engine_new();
    g_autoptr(SimRun) run = sim_engine_run(engine, p, &link, NULL, NULL);
    ck_assert_ptr_nonnull(run);
    events[k] = run->events;
    heap[k] = run->heap_ops;
  }
  double e = (double)events[1] / events[0], hp = (double)heap[1] / heap[0];
  ck_assert_msg(e > 99 && e < 101, "events grew %.2fx for 100x the program", e);
  ck_assert_msg(hp > 99 && hp < 101, "heap operations grew %.2fx for 100x the program", hp);
}
END_TEST

static Suite *
engine_suite(void)
{
  Suite *s = suite_create("engine");
  TCase *tc = tcase_create("semantics");
  /* Whole models and recordings under ASan on a loaded machine: not Check's 4 s. */
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, lone_copy_takes_latency_plus_bytes_over_bandwidth);
  tcase_add_test(tc, pageable_copy_runs_at_pageable_factor);
  tcase_add_test(tc, same_direction_copies_on_two_streams_run_back_to_back);
  tcase_add_test(tc, opposite_directions_share_the_bidirectional_cap);
  tcase_add_test(tc, rates_change_when_the_other_direction_finishes);
  tcase_add_test(tc, event_waits_order_work_across_streams);
  tcase_add_test(tc, compute_is_slowed_while_a_copy_runs);
  tcase_add_test(tc, two_compute_streams_share_the_device_fairly);
  tcase_add_test(tc, host_alloc_holds_its_stream_only);
  tcase_add_test(tc, stuck_schedule_names_the_blocked_ops);
  tcase_add_test(tc, peak_of_three_ops_matches_hand_computation);
  tcase_add_test(tc, negative_memory_is_reported_as_a_lowering_bug);
  tcase_add_test(tc, live_replays_agree);
  tcase_add_test(tc, an_event_recorded_twice_is_rejected);
  tcase_add_test(tc, collective_slows_concurrent_compute);
  tcase_add_test(tc, collective_waited_for_is_exposed);
  tcase_add_test(tc, barrier_starts_a_collective_when_the_last_member_arrives);
  tcase_add_test(tc, two_runs_give_identical_bytes);
  tcase_add_test(tc, every_op_runs_once_and_streams_stay_in_order);
  tcase_add_test(tc, an_engine_is_reusable_across_programs);
  tcase_add_test(tc, a_calibrated_table_sets_copy_times);
  tcase_add_test(tc, work_grows_linearly_with_the_program);
  tcase_add_test(tc, near_ties_finish_in_issue_order);
  tcase_add_test(tc, invariants_accept_copies_in_ready_order);
  tcase_add_test(tc, host_launch_bound_step_is_the_launches);
  tcase_add_test(tc, host_compute_bound_step_hides_the_launches);
  tcase_add_test(tc, host_alloc_blocks_the_host);
  tcase_add_test(tc, host_pageable_copy_blocks_the_host);
  tcase_add_test(tc, host_pageable_copy_stalls_issue_without_launches);
  tcase_add_test(tc, host_sync_by_a_zero_host_alloc);
  tcase_add_test(tc, host_each_gpu_has_its_own_host);
  tcase_add_test(tc, host_launch_zero_runs_as_before);
  tcase_add_test(tc, lazy_loop_gives_the_scan_run);
  tcase_add_test(tc, lazy_loop_work_per_step_does_not_grow_with_gpus);
  tcase_add_test(tc, host_stuck_behind_a_blocking_op_is_reported);
  tcase_add_test(tc, host_invariants_catch_early_starts);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  return test_run_suite(engine_suite());
}
