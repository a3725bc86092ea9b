/* tests/test_pipeline.c — pipeline schedules and shared node links against
 * closed forms and hand computations.
 *
 * Uniform stages: every layer takes f forward and b backward, a stage of k
 * layers F = k f and B = k b; with no communication cost (no input bytes,
 * no latency) the published forms hold exactly:
 *
 *   GPipe, 1F1B      (M + P - 1)(F + B)
 *   interleaved      M (F + B) + (P - 1)(F + B) / V   (M a multiple of P)
 *   1F1B stage s     holds min(P - s, M) micro-batches' activations; GPipe M
 *   GPipe, sends of s (M + P - 1)(F + B) + 2 (P - 1) s   (s = λ + bytes / p2p_bandwidth <= F, B)
 *
 * 1F1B with latency has no form that short: the test derives it from the
 * schedule's max-plus recurrence, written here apart from the lowering.
 * Sends are NCCL kernels on one stream per GPU: a stage's sends go one
 * after another, in the order its slots issue them.
 */
#include "testutil.h"

#include "engine/internal/program_private.h"
#include "engine/invariants.h"
#include "lower/pipeline.h"
#include "result/evaluate.h"

#include <math.h>

/* A uniform model of `layers` layers, f = 1 ms, b = 2 ms, `saved` bytes
 * each, under [parallel] `parallel` (and anything else in `extra`). */
static SimScenario *
uniform(guint layers, const char *parallel, const char *extra)
{
  g_autofree char *text = g_strdup_printf("[device]\nmemory = 80GiB\n"
                                          "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"
                                          "[model]\nlayers = %u\nforward = 1ms\nbackward = 2ms\n"
                                          "tensors = a:100MB\ninput = 0B\n"
                                          "[parallel]\n%s\n"
                                          "[policy.resident]\nkind = resident\n%s",
                                          layers, parallel, extra ? extra : "");
  return test_scenario_from_text(text);
}

static SimResult *
evaluate(const SimScenario *s, const char *policy)
{
  g_autoptr(GError) error = NULL;
  SimResult *r = sim_evaluate(NULL, s, sim_scenario_policy(s, policy), NULL, &error);
  ck_assert_msg(r != NULL, "%s", error ? error->message : "");
  return r;
}

static const SimResultStage *
stage_of(const SimResult *r, guint s)
{
  ck_assert_ptr_nonnull(r->stages);
  ck_assert_uint_lt(s, r->stages->len);
  return &g_array_index(r->stages, SimResultStage, s);
}

START_TEST(gpipe_and_1f1b_take_m_plus_p_minus_1_slots)
{
  static const char *const schedules[] = { "gpipe", "1f1b" };
  static const guint shapes[][3] = { /* P, M, layers per stage */
    { 2, 1, 1 }, { 2, 4, 2 }, { 4, 8, 2 }, { 4, 2, 3 }, { 3, 7, 1 }, { 8, 16, 1 }, { 4, 4, 5 },
  };
  for (guint k = 0; k < G_N_ELEMENTS(schedules); k++) {
    for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
      guint P = shapes[i][0], M = shapes[i][1], L = shapes[i][2];
      g_autofree char *par = g_strdup_printf("pp = %u\nmicrobatches = %u\nschedule = %s\np2p_latency = 0", P, M,
                                             schedules[k]);
      g_autoptr(SimScenario) s = uniform(P * L, par, NULL);
      g_autoptr(SimResult) r = evaluate(s, "resident");
      double F = L * 1.0, B = L * 2.0;
      ck_assert_close(r->step_ms, (M + P - 1) * (F + B), 1e-9);
      /* Every stage computes M (F + B); the rest of the step is its bubble. */
      for (guint st = 0; st < P; st++) {
        ck_assert_close(stage_of(r, st)->busy_ms, M * (F + B), 1e-9);
        ck_assert_close(stage_of(r, st)->bubble_ms, (P - 1) * (F + B), 1e-9);
        ck_assert_uint_eq(stage_of(r, st)->layers, L);
      }
    }
  }
}
END_TEST

START_TEST(one_f_one_b_holds_min_p_minus_s_m_microbatches)
{
  static const guint shapes[][2] = { { 4, 8 }, { 4, 2 }, { 4, 4 }, { 3, 5 }, { 8, 3 } };
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    guint P = shapes[i][0], M = shapes[i][1];
    g_autofree char *par = g_strdup_printf("pp = %u\nmicrobatches = %u\nschedule = 1f1b", P, M);
    g_autofree char *gpar = g_strdup_printf("pp = %u\nmicrobatches = %u\nschedule = gpipe", P, M);
    g_autoptr(SimScenario) s = uniform(2 * P, par, NULL);
    g_autoptr(SimScenario) g = uniform(2 * P, gpar, NULL);
    g_autoptr(SimResult) r = evaluate(s, "resident");
    g_autoptr(SimResult) rg = evaluate(g, "resident");
    gint64 per_mb = 2 * 100000000; /* two layers of 100 MB */
    for (guint st = 0; st < P; st++) {
      ck_assert_int_eq(stage_of(r, st)->peak_device_bytes, (gint64)MIN(P - st, M) * per_mb);
      ck_assert_int_eq(stage_of(rg, st)->peak_device_bytes, (gint64)M * per_mb);
    }
    /* The step's peak is the worst stage's: stage 0. */
    ck_assert_int_eq(r->peak_device.bytes, (gint64)MIN(P, M) * per_mb);
  }
}
END_TEST

START_TEST(interleaving_divides_the_bubble_by_v)
{
  static const guint shapes[][3] = { /* P, M, V */
    { 4, 8, 2 }, { 4, 4, 2 }, { 2, 6, 3 }, { 4, 8, 4 }, { 3, 9, 2 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    guint P = shapes[i][0], M = shapes[i][1], V = shapes[i][2];
    g_autofree char *par = g_strdup_printf("pp = %u\nmicrobatches = %u\nschedule = interleaved\nvirtual = %u", P,
                                           M, V);
    g_autoptr(SimScenario) s = uniform(P * V, par, NULL); /* one layer per chunk */
    g_autoptr(SimResult) r = evaluate(s, "resident");
    double F = V * 1.0, B = V * 2.0;
    ck_assert_close(r->step_ms, M * (F + B) + (P - 1) * (F + B) / V, 1e-9);
  }
}
END_TEST

START_TEST(gpipe_latency_adds_two_p_minus_1_sends)
{
  static const guint shapes[][2] = { { 2, 3 }, { 4, 8 }, { 3, 1 } };
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    guint P = shapes[i][0], M = shapes[i][1];
    g_autofree char *par = g_strdup_printf("pp = %u\nmicrobatches = %u\nschedule = gpipe\np2p_latency = 0.5ms", P, M);
    g_autoptr(SimScenario) s = uniform(P, par, NULL);
    g_autoptr(SimResult) r = evaluate(s, "resident");
    ck_assert_close(r->step_ms, (M + P - 1) * 3.0 + 2 * (P - 1) * 0.5, 1e-9);
  }
}
END_TEST

/* 1F1B with sends of λ by the recurrence: each slot starts when its stage's
 * previous slot ended and, for a forward of stage s > 0, when stage s - 1's
 * send of that micro-batch's activation arrived, for a backward of s <
 * P - 1, when stage s + 1's send of its gradient arrived.  A slot that sends
 * (a forward below the last stage, a backward above the first) starts its
 * send when it ends and the stage's previous send is done; it arrives λ
 * later.  Orders: Megatron's 1F1B. */
static double
one_f_one_b_recurrence(guint P, guint M, double F, double B, double lambda)
{
  double fwd_end[16][64], bwd_end[16][64];
  guint order_mb[16][128];
  gboolean order_bwd[16][128];
  guint len[16], pos[16] = { 0 };
  for (guint s = 0; s < P; s++) {
    guint warm = MIN(P - s - 1, M), n = 0;
    for (guint m = 0; m < warm; m++)
      order_mb[s][n] = m, order_bwd[s][n++] = FALSE;
    for (guint i = 0; i + warm < M; i++) {
      order_mb[s][n] = warm + i, order_bwd[s][n++] = FALSE;
      order_mb[s][n] = i, order_bwd[s][n++] = TRUE;
    }
    for (guint m = M - warm; m < M; m++)
      order_mb[s][n] = m, order_bwd[s][n++] = TRUE;
    len[s] = n;
    for (guint m = 0; m < M; m++)
      fwd_end[s][m] = bwd_end[s][m] = NAN;
  }
  double free_at[16] = { 0 }, send_free[16] = { 0 }, step = 0;
  double act_arrives[16][64], grad_arrives[16][64];
  /* Sweep until every slot is placed: a slot goes when what it needs is known. */
  for (gboolean progress = TRUE; progress;) {
    progress = FALSE;
    for (guint s = 0; s < P; s++) {
      while (pos[s] < len[s]) {
        guint m = order_mb[s][pos[s]];
        gboolean bwd = order_bwd[s][pos[s]];
        double ready = free_at[s];
        if (!bwd && s > 0) {
          if (isnan(fwd_end[s - 1][m]))
            break;
          ready = MAX(ready, act_arrives[s - 1][m]);
        }
        if (bwd && s + 1 < P) {
          if (isnan(bwd_end[s + 1][m]))
            break;
          ready = MAX(ready, grad_arrives[s + 1][m]);
        }
        free_at[s] = ready + (bwd ? B : F);
        (bwd ? bwd_end : fwd_end)[s][m] = free_at[s];
        if ((!bwd && s + 1 < P) || (bwd && s > 0)) {
          send_free[s] = MAX(send_free[s], free_at[s]) + lambda;
          (bwd ? grad_arrives : act_arrives)[s][m] = send_free[s];
        }
        step = MAX(step, free_at[s]);
        pos[s]++;
        progress = TRUE;
      }
    }
  }
  for (guint s = 0; s < P; s++)
    ck_assert_uint_eq(pos[s], len[s]);
  return step;
}

START_TEST(one_f_one_b_latency_follows_its_recurrence)
{
  /* By hand, P = 2, M = 3, F = 1, B = 2: 12 + 4 λ (derived in the note). */
  ck_assert_close(one_f_one_b_recurrence(2, 3, 1, 2, 0.5), 12 + 4 * 0.5, 1e-12);
  static const guint shapes[][2] = { { 2, 3 }, { 4, 8 }, { 4, 2 }, { 3, 6 }, { 8, 12 } };
  static const double lambdas[] = { 0.1, 0.5, 2.0 };
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    for (guint k = 0; k < G_N_ELEMENTS(lambdas); k++) {
      guint P = shapes[i][0], M = shapes[i][1];
      g_autofree char *par = g_strdup_printf("pp = %u\nmicrobatches = %u\nschedule = 1f1b\np2p_latency = %gms", P, M,
                                             lambdas[k]);
      g_autoptr(SimScenario) s = uniform(P, par, NULL);
      g_autoptr(SimResult) r = evaluate(s, "resident");
      ck_assert_close(r->step_ms, one_f_one_b_recurrence(P, M, 1, 2, lambdas[k]), 1e-9);
      /* Never less than without latency plus the two ends' sends. */
      ck_assert(r->step_ms >= (M + P - 1) * 3.0 + 2 * (P - 1) * lambdas[k] - 1e-9);
    }
  }
}
END_TEST

START_TEST(p2p_bandwidth_times_the_boundary_bytes)
{
  /* A send is latency + bytes / bandwidth: 50 MB at 100 GB/s after
   * 0.25 ms, 0.75 ms per send, shorter than a forward. */
  g_autoptr(SimScenario) s = test_scenario_from_text(
    "[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"
    "[model]\nlayers = 2\nforward = 1ms\nbackward = 2ms\ntensors = a:100MB\ninput = 50MB\n"
    "[parallel]\npp = 2\nmicrobatches = 3\nschedule = gpipe\np2p_bandwidth = 100GB/s\np2p_latency = 0.25ms\n"
    "[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) r = evaluate(s, "resident");
  ck_assert_close(r->step_ms, (3 + 2 - 1) * 3.0 + 2 * (2 - 1) * 0.75, 1e-9);
}
END_TEST

/* Two GPUs, each one copy of `bytes` in direction `dir`, under `node`. */
static double
two_copies(guint64 bytes, SimDir dir0, SimDir dir1, const SimNode *node, gboolean pageable1)
{
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 a = sim_program_add_stream_on(p, "gpu0", 0);
  guint32 b = sim_program_add_stream_on(p, "gpu1", 1);
  guint32 label = sim_program_intern(p, "x");
  sim_program_copy(p, a, dir0, bytes, SIM_HOST_PINNED, 0, label);
  sim_program_copy(p, b, dir1, bytes, pageable1 ? SIM_HOST_PAGEABLE : SIM_HOST_PINNED, 0, label);
  SimMachine m;
  sim_scenario_machine_defaults(&m);
  m.link.h2d_bandwidth = m.link.d2h_bandwidth = 50e9;
  m.link.bidir_bandwidth = 100e9;
  m.link.latency = 0;
  m.link.pageable_factor = 0.2;
  m.link.node = *node;
  g_autoptr(SimEngine) e = sim_engine_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(SimRun) run = sim_engine_run(e, p, &m.link, NULL, &error);
  ck_assert_msg(run != NULL, "%s", error ? error->message : "");
  return run->step;
}

START_TEST(a_shared_switch_halves_each_gpu_uplink)
{
  SimNode node = { .gpus_per_switch = 2, .switch_bandwidth = 50e9, .sockets = 1 };
  /* Both D2H through one 50 GB/s uplink: 25 GB/s each, 2 s for 50 GB. */
  ck_assert_close(two_copies(50000000000ull, SIM_DIR_D2H, SIM_DIR_D2H, &node, FALSE), 2.0, 1e-12);
  /* Full duplex: one each way, each at its own 50 GB/s. */
  ck_assert_close(two_copies(50000000000ull, SIM_DIR_D2H, SIM_DIR_H2D, &node, FALSE), 1.0, 1e-12);
  /* A switch each: no sharing. */
  node.gpus_per_switch = 1;
  ck_assert_close(two_copies(50000000000ull, SIM_DIR_D2H, SIM_DIR_D2H, &node, FALSE), 1.0, 1e-12);
  /* Max-min: a pageable copy (10 GB/s alone) keeps its 10, the other gets
   * the uplink's other 40 until the pinned one's 50 GB are done (1.25 s);
   * the pageable one then has 37.5 GB left at 10 GB/s. */
  node.gpus_per_switch = 2;
  ck_assert_close(two_copies(50000000000ull, SIM_DIR_D2H, SIM_DIR_D2H, &node, TRUE), 1.25 + 37.5 / 10, 1e-12);
}
END_TEST

START_TEST(host_memory_caps_a_socket)
{
  /* Four GPUs on one socket, a switch each, each copy 50 GB/s alone; the
   * socket's memory feeds 100 GB/s in all: 25 GB/s each. */
  g_autoptr(SimProgram) p = sim_program_new();
  guint32 label = sim_program_intern(p, "x");
  for (guint g = 0; g < 4; g++) {
    guint32 s = sim_program_add_stream_on(p, "s", g);
    sim_program_copy(p, s, g % 2 ? SIM_DIR_H2D : SIM_DIR_D2H, 25000000000ull, SIM_HOST_PINNED, 0, label);
  }
  SimMachine m;
  sim_scenario_machine_defaults(&m);
  m.link.h2d_bandwidth = m.link.d2h_bandwidth = 50e9;
  m.link.bidir_bandwidth = 100e9;
  m.link.latency = 0;
  m.link.node = (SimNode){ .gpus_per_switch = 1, .sockets = 1, .host_memory_bandwidth = 100e9 };
  g_autoptr(SimEngine) e = sim_engine_new();
  g_autoptr(SimRun) run = sim_engine_run(e, p, &m.link, NULL, NULL);
  ck_assert_close(run->step, 1.0, 1e-12);
  /* Two sockets, GPUs 0-1 and 2-3: 50 GB/s each, every copy at its own. */
  m.link.node.sockets = 2;
  m.link.node.socket_of[2] = m.link.node.socket_of[3] = 1;
  g_autoptr(SimRun) two = sim_engine_run(e, p, &m.link, NULL, NULL);
  ck_assert_close(two->step, 0.5, 1e-12);
}
END_TEST

START_TEST(shared_links_that_never_bind_change_nothing)
{
  /* A single-GPU offload step with an uplink far above the link: the
   * progressive filling gives the bidirectional rule's rates (only the
   * latency phases are separate steps). */
  const char *text = "[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 40GB/s\n"
                     "bidir_bandwidth = 60GB/s\nlatency = 10us\ncompute_slowdown = 0.05\n"
                     "[model]\nlayers = 12\nforward = 2ms\nbackward = 4ms\ntensors = a:100MB, b:30MB\ninput = 10MB\n"
                     "[policy.async]\nkind = offload\nmode = async\nprefetch = 2\n";
  g_autoptr(SimScenario) plain = test_scenario_from_text(text);
  g_autofree char *with = g_strdup_printf("%s[node]\nswitch_bandwidth = 1000TB/s\n", text);
  g_autoptr(SimScenario) shared = test_scenario_from_text(with);
  g_autoptr(SimResult) a = evaluate(plain, "async");
  g_autoptr(SimResult) b = evaluate(shared, "async");
  ck_assert_close(b->step_ms, a->step_ms, 1e-9 * a->step_ms);
  ck_assert_int_eq(b->peak_device.bytes, a->peak_device.bytes);
}
END_TEST

START_TEST(replicas_alone_run_as_one)
{
  g_autoptr(SimScenario) one = uniform(8, "pp = 4\nmicrobatches = 8", NULL);
  g_autoptr(SimScenario) two = uniform(8, "pp = 4\nmicrobatches = 8\ndp = 2", NULL);
  g_autoptr(SimResult) a = evaluate(one, "resident");
  g_autoptr(SimResult) b = evaluate(two, "resident");
  ck_assert_close(b->step_ms, a->step_ms, 1e-12);
  ck_assert_int_eq(b->peak_device.bytes, a->peak_device.bytes);
}
END_TEST

START_TEST(replicas_on_one_switch_share_its_uplink)
{
  /* Offload on every stage, dp = 2: with the two replicas of a stage on one
   * switch whose uplink is one link's bandwidth, each copy gets half, and
   * the step is that of one replica whose link is half as fast. */
  const char *offload = "[policy.offload]\nkind = offload\nmode = async\nkeep_last = 0\n";
  g_autoptr(SimScenario) shared =
    uniform(8, "pp = 4\nmicrobatches = 4\ndp = 2",
            "[policy.offload]\nkind = offload\nmode = async\nkeep_last = 0\n"
            "[node]\ngpus_per_switch = 2\nswitch_bandwidth = 50GB/s\n");
  g_autofree char *half = g_strdup_printf("[device]\nmemory = 80GiB\n"
                                          "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n"
                                          "[model]\nlayers = 8\nforward = 1ms\nbackward = 2ms\n"
                                          "tensors = a:100MB\ninput = 0B\n"
                                          "[parallel]\npp = 4\nmicrobatches = 4\n"
                                          "[policy.resident]\nkind = resident\n%s", offload);
  g_autoptr(SimScenario) slow = test_scenario_from_text(half);
  g_autoptr(SimScenario) alone = uniform(8, "pp = 4\nmicrobatches = 4", offload);
  g_autoptr(SimResult) a = evaluate(shared, "offload");
  g_autoptr(SimResult) b = evaluate(slow, "offload");
  g_autoptr(SimResult) c = evaluate(alone, "offload");
  ck_assert(a->step_ms > c->step_ms + 1);
  ck_assert_close(a->step_ms, b->step_ms, 1e-9 * b->step_ms);
}
END_TEST

START_TEST(policies_apply_per_stage)
{
  g_autoptr(SimScenario) s = uniform(8, "pp = 4\nmicrobatches = 8",
                                     "[policy.first]\nkind = offload\nmode = async\nkeep_last = 0\nstages = 0\n"
                                     "[policy.all]\nkind = offload\nmode = async\nkeep_last = 0\n"
                                     "[policy.ckpt]\nkind = checkpoint\n");
  g_autoptr(SimResult) first = evaluate(s, "first");
  g_autoptr(SimResult) all = evaluate(s, "all");
  g_autoptr(SimResult) ckpt = evaluate(s, "ckpt");
  g_autoptr(SimResult) res = evaluate(s, "resident");
  /* Only stage 0 copies; every stage of `all` copies what it saves, once out and once back. */
  ck_assert_uint_gt(stage_of(first, 0)->d2h_bytes, 0);
  for (guint st = 1; st < 4; st++) {
    ck_assert_uint_eq(stage_of(first, st)->d2h_bytes, 0);
    ck_assert_int_eq(stage_of(first, st)->peak_device_bytes, stage_of(res, st)->peak_device_bytes);
  }
  for (guint st = 0; st < 4; st++) {
    ck_assert_uint_eq(stage_of(all, st)->d2h_bytes, 8ull * 2 * 100000000);
    ck_assert_uint_eq(stage_of(all, st)->h2d_bytes, stage_of(all, st)->d2h_bytes);
    ck_assert_int_eq(stage_of(all, st)->peak_host_bytes, stage_of(res, st)->peak_device_bytes);
    /* Full checkpointing recomputes every forward once per micro-batch. */
    ck_assert_close(stage_of(ckpt, st)->busy_ms, 8 * (2 + 4 + 2) * 1.0, 1e-9);
  }
  ck_assert_close(ckpt->recompute_ms, 8 * 2.0, 1e-9);
}
END_TEST

START_TEST(stage_static_bytes_add_up)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(
    "[device]\nmemory = 80GiB\nmatmul_tflops = 400\nhbm_bandwidth = 3TB/s\n"
    "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"
    "[transformer]\nhidden = 512\nlayers = 6\nheads = 8\nffn = 2048\nvocab = 32000\nbatch = 1\nseq = 256\n"
    "[parallel]\npp = 3\nmicrobatches = 3\n[policy.resident]\nkind = resident\n");
  guint64 sum = 0;
  for (guint st = 0; st < 3; st++)
    sum += sim_lower_pipeline_stage_static(s->workload, &s->parallel, st);
  ck_assert_uint_eq(sum, s->workload->static_bytes);
  /* The embedding is on stage 0, the head on stage 2; the middle holds its two layers only. */
  ck_assert_uint_eq(sim_lower_pipeline_stage_static(s->workload, &s->parallel, 1),
                    2 * sim_workload_layer(s->workload, 2)->static_bytes);
  ck_assert_uint_gt(sim_lower_pipeline_stage_static(s->workload, &s->parallel, 0),
                    sim_lower_pipeline_stage_static(s->workload, &s->parallel, 1));
}
END_TEST

/* Every framework preset, under every schedule, lowers to a pipeline the
 * engine finishes, with every invariant (copies balanced per tensor) and
 * every stage back at its baseline. */
START_TEST(framework_presets_run_in_every_schedule)
{
  static const char *const schedules[] = { "gpipe", "1f1b", "interleaved\nvirtual = 2" };
  for (guint f = 1; f < SIM_FRAMEWORK_COUNT; f++) {
    for (guint k = 0; k < G_N_ELEMENTS(schedules); k++) {
      g_autofree char *text = g_strdup_printf(
        "[device]\nmemory = 80GiB\nmatmul_tflops = 400\nhbm_bandwidth = 3TB/s\n"
        "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\nlatency = 8us\ncompute_slowdown = 0.03\n"
        "[transformer]\nhidden = 256\nlayers = 16\nheads = 4\nffn = 1024\nvocab = 1000\nbatch = 1\nseq = 128\n"
        "ops = hf\n[parallel]\npp = 4\nmicrobatches = 8\nschedule = %s\n"
        "[node]\ngpus_per_switch = 2\nswitch_bandwidth = 30GB/s\nhost_memory_bandwidth = 80GB/s\n"
        "[policy.x]\nkind = offload\nframework = %s\n",
        schedules[k], sim_framework_names[f]);
      g_autoptr(SimScenario) s = test_scenario_from_text(text);
      g_autoptr(SimResult) r = test_evaluate(s, "x");
      g_autoptr(GError) error = NULL;
      ck_assert_msg(sim_invariants_check(r->run, r->program, &error), "%s %s: %s", sim_framework_names[f],
                    schedules[k], error ? error->message : "");
      ck_assert_uint_eq(r->stages->len, 4);
    }
  }
}
END_TEST

/* A policy that leaves every layer as resident does says why on its row:
 * offload-async on one-layer chunks keeps them all (keep_last counts per
 * chunk), layers and stages that do not overlap, every past the layers.
 * One that changes something has no note; neither has resident. */
START_TEST(policies_that_do_nothing_say_so)
{
  const char *path = OFFSIM_TEST_DATA "/regress/scenario-policies-that-do-nothing.ini";
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(path, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  static const struct {
    const char *policy, *note;
  } cases[] = {
    { "resident", NULL },
    { "offload-async", "offloads nothing: keep_last = 1 counts per pipeline chunk, and its chunks have at most 1 "
                       "layer" },
    { "apart", "offloads nothing: layers and stages do not overlap (no layer it selects runs on a stage it acts on)" },
    { "sparse", "recomputes nothing: every = 8 selects none of its layers" },
    { "first", NULL },
  };
  g_autoptr(SimResult) resident = test_evaluate(s, "resident");
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(SimResult) r = test_evaluate(s, cases[i].policy);
    ck_assert_msg(g_strcmp0(r->note, cases[i].note) == 0, "%s: %s", cases[i].policy, r->note);
    if (cases[i].note)
      ck_assert_double_eq(r->step_ms, resident->step_ms);
  }
  /* One GPU: keep_last as deep as the model, tensors too small, a plan of keeps. */
  g_autoptr(SimScenario) one = test_scenario_from_text(
    "[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 10GB/s\nd2h_bandwidth = 10GB/s\n[model]\nlayers = 2\n"
    "forward = 1ms\ninput = 8MiB\ntensors = a:40MiB\n[policy.deep]\nkind = offload\nkeep_last = 2\n"
    "[policy.small]\nkind = offload\nmin_tensor = 1GiB\n[policy.plan]\nkind = plan\nactions = keep, keep\n");
  static const struct {
    const char *policy, *note;
  } single[] = {
    { "deep", "offloads nothing: keep_last = 2 keeps every layer" },
    { "small", "offloads nothing: no tensor of the layers it picks can move (min_tensor, min_elements, tensors kept "
               "on the device)" },
    { "plan", "changes nothing: every action is keep" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(single); i++) {
    g_autoptr(SimResult) r = test_evaluate(one, single[i].policy);
    ck_assert_msg(g_strcmp0(r->note, single[i].note) == 0, "%s: %s", single[i].policy, r->note);
  }
  /* The row says so in every format: the CSV's and JSON's `note`, lines under the table. */
  g_auto(TestRun) csv = test_offsim("compare", path, "--format", "csv", NULL);
  ck_assert_msg(strstr(csv.out, ",fragmentation_bytes,note\n") != NULL, "%s", csv.out);
  ck_assert_ptr_nonnull(strstr(csv.out, ",offloads nothing: layers and stages do not overlap"));
  g_auto(TestRun) table = test_offsim("compare", path, NULL);
  ck_assert_ptr_nonnull(strstr(table.out, "\nnotes (these policies ran as resident):\n  offload-async: offloads "
                                          "nothing: keep_last = 1"));
  g_auto(GStrv) lines = g_strsplit(table.out, "\n", -1);
  for (char **line = lines; *line; line++)
    ck_assert_msg(g_utf8_strlen(*line, -1) <= 112, "longer than 112 columns: %s", *line);
}
END_TEST

int
main(void)
{
  Suite *suite = suite_create("pipeline");
  TCase *tc = tcase_create("closed forms");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, gpipe_and_1f1b_take_m_plus_p_minus_1_slots);
  tcase_add_test(tc, one_f_one_b_holds_min_p_minus_s_m_microbatches);
  tcase_add_test(tc, interleaving_divides_the_bubble_by_v);
  tcase_add_test(tc, gpipe_latency_adds_two_p_minus_1_sends);
  tcase_add_test(tc, one_f_one_b_latency_follows_its_recurrence);
  tcase_add_test(tc, p2p_bandwidth_times_the_boundary_bytes);
  suite_add_tcase(suite, tc);
  TCase *node = tcase_create("node links");
  tcase_add_test(node, a_shared_switch_halves_each_gpu_uplink);
  tcase_add_test(node, host_memory_caps_a_socket);
  tcase_add_test(node, shared_links_that_never_bind_change_nothing);
  tcase_add_test(node, replicas_alone_run_as_one);
  tcase_add_test(node, replicas_on_one_switch_share_its_uplink);
  suite_add_tcase(suite, node);
  TCase *pol = tcase_create("policies");
  tcase_add_test(pol, policies_apply_per_stage);
  tcase_add_test(pol, stage_static_bytes_add_up);
  tcase_add_test(pol, framework_presets_run_in_every_schedule);
  tcase_add_test(pol, policies_that_do_nothing_say_so);
  suite_add_tcase(suite, pol);
  return test_run_suite(suite);
}
