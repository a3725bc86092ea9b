/* tests/test_schedules.c — the framework mechanisms of an offload policy,
 * each on a uniform model with its figures derived by hand here: reload on
 * demand, the shared copy stream, TransformerEngine's window, free at the
 * next commit, head_wait, start = tensor (sync and async, with the
 * in-flight limit in tensors), the caching host allocator, checkpointing
 * that offloads its inputs, min_elements; the presets and the combinations
 * a framework cannot have.
 *
 * The model: L = 4 layers, forward 1 ms, backward 2 ms, input 1 MB, tensors
 * a and b of 1 MB each; links 1 GB/s each way without latency, so a layer's
 * copy (2 MB) takes 2 ms and an input's 1 ms. */
#include "testutil.h"

#include "lower/lower.h"
#include "model/framework.h"

#include <math.h>
#include <string.h>

static const char base[] = "[device]\nmemory = 1GiB\n"
                           "[link]\nh2d_bandwidth = 1GB/s\nd2h_bandwidth = 1GB/s\nlatency = 0\n"
                           "[model]\nlayers = 4\nforward = 1ms\ninput = 1MB\ntensors = a:1MB, b:1MB\n";

static SimScenario *
scenario(const char *policies)
{
  g_autofree char *text = g_strconcat(base, policies, NULL);
  return test_scenario_from_text(text);
}

#define ASYNC "kind = offload\nmode = async\nkeep_last = 0\n"

/* On demand each layer asks for its group when its backward is due and
 * waits for all of it.  Forward 0-4 ms, D2H 1-3, 3-5, 5-7, 7-9; layer 3's
 * reload waits for its D2H: 9-11, backward 11-13; then each layer reload 2
 * ms + backward 2 ms: step = 4 + 5 + 4 x 4 = 25 ms, 13 ms exposed.  With
 * prefetch 1 every reload but the first hides under the backward above:
 * 9-11, then backward 11-19: 19 ms. */
START_TEST(on_demand_exposes_every_reload)
{
  g_autoptr(SimScenario) s = scenario("[policy.demand]\n" ASYNC "inflight = 8\nreload = on-demand\n"
                                      "[policy.prefetch]\n" ASYNC "inflight = 8\n");
  g_autoptr(SimResult) demand = test_evaluate(s, "demand");
  ck_assert_close(demand->step_ms, 25.0, 1e-9);
  ck_assert_close(demand->exposed_transfer_ms, 13.0, 1e-9);
  g_autoptr(SimResult) prefetch = test_evaluate(s, "prefetch");
  ck_assert_close(prefetch->step_ms, 19.0, 1e-9);
}
END_TEST

/* One copy stream: every reload is on the d2h stream.  In one step the
 * first reload is the top offloaded layer's, whose offload is the last, so
 * no reload can start before every offload has ended with two streams
 * either: the figures are the same (they differ once microbatches
 * interleave). */
START_TEST(shared_stream_carries_both_directions)
{
  g_autoptr(SimScenario) s = scenario("[policy.shared]\n" ASYNC "streams = shared\n[policy.separate]\n" ASYNC);
  g_autoptr(SimResult) shared = test_evaluate(s, "shared");
  g_autoptr(SimResult) separate = test_evaluate(s, "separate");
  guint h2d_on_d2h = 0, h2d = 0;
  for (guint op = 0; op < shared->program->n_ops; op++) {
    const SimOp *o = &shared->program->ops[op];
    if (o->kind == SIM_OP_COPY && o->dir == SIM_DIR_H2D) {
      h2d++;
      h2d_on_d2h += o->stream == SIM_LOWER_STREAM_D2H;
    }
  }
  ck_assert_uint_eq(h2d, 8);
  ck_assert_uint_eq(h2d_on_d2h, h2d);
  ck_assert_close(shared->step_ms, separate->step_ms, 1e-12);
  ck_assert_int_eq(shared->peak_device.bytes, separate->peak_device.bytes);
}
END_TEST

/* TransformerEngine's window with n = L - 1 = 3 layers offloaded: one group
 * in flight (the forward of layer j + 1 waits for layer j's copies) and the
 * reload distance L - 1 - n = 0.  Forward 0 0-1, D2H 1-3; forward 1 3-4,
 * D2H 4-6; forward 2 6-7, D2H 7-9; forward 3 (kept) 9-10; backward 3
 * 10-12; layer 2 due at 12: 12-14, backward 14-16; layer 1 16-18, 18-20;
 * layer 0 20-22, 22-24: 24 ms, nothing of the 12 ms of copies hidden. */
START_TEST(te_window_of_one_cannot_overlap)
{
  g_autoptr(SimScenario) s = scenario("[policy.window]\nkind = offload\nkeep_last = 1\ninflight_unit = window\n");
  g_autoptr(SimResult) r = test_evaluate(s, "window");
  ck_assert_close(r->step_ms, 24.0, 1e-9);
  ck_assert_close(r->exposed_transfer_ms, 12.0, 1e-9);
}
END_TEST

/* verl: the commit of layer k + 1 waits for D2H(k) and frees it, so with
 * no in-flight limit of its own the schedule is the double buffer's
 * (inflight = 2), and a free at copy end with no limit runs ahead. */
START_TEST(next_commit_is_the_double_buffer)
{
  g_autoptr(SimScenario) s = scenario("[policy.commit]\n" ASYNC "inflight = 8\nfree = next-commit\n"
                                      "[policy.two]\n" ASYNC "inflight = 2\n[policy.free]\n" ASYNC "inflight = 8\n");
  g_autoptr(SimResult) commit = test_evaluate(s, "commit");
  g_autoptr(SimResult) two = test_evaluate(s, "two");
  g_autoptr(SimResult) free_run = test_evaluate(s, "free");
  /* Forward 0-1, 1-2, then the commit of layer 1 waits for D2H(0) (1-3)
   * and frees layer 0: layer 2 runs 3-4, layer 3 (after D2H(1), 3-5) 5-6;
   * the last offload ends at 9 in all three, and layer 3's reload after
   * it, so each step is 19 ms.  The peaks tell them apart: two layers (4
   * MB) from 1 ms with the commit and with inflight 2; with the free at
   * copy end and no limit, layers 1-3 at 3 ms, 6 MB. */
  ck_assert_close(commit->step_ms, 19.0, 1e-9);
  ck_assert_close(two->step_ms, 19.0, 1e-9);
  ck_assert_close(free_run->step_ms, 19.0, 1e-9);
  ck_assert_int_eq(commit->peak_device.bytes, 4000000);
  ck_assert_int_eq(two->peak_device.bytes, 4000000);
  ck_assert_int_eq(free_run->peak_device.bytes, 6000000);
}
END_TEST

/* head_wait: the head's forward waits for the last offload; without it the
 * head runs while copies are in flight. */
START_TEST(head_wait_waits_for_the_offloads)
{
  static const char machine[] = "[device]\nmemory = 80GiB\nmatmul_tflops = 100\nhbm_bandwidth = 1TB/s\n"
                                "[link]\nh2d_bandwidth = 1GB/s\nd2h_bandwidth = 1GB/s\nlatency = 0\n"
                                "[transformer]\nhidden = 256\nlayers = 2\nheads = 4\nffn = 512\nvocab = 1000\n"
                                "batch = 1\nseq = 128\n";
  g_autofree char *text = g_strconcat(machine, "[policy.wait]\n" ASYNC "head_wait = true\n[policy.go]\n" ASYNC, NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  g_autoptr(SimResult) wait = test_evaluate(s, "wait");
  g_autoptr(SimResult) go = test_evaluate(s, "go");
  /* Where is the head's forward?  It starts after the last D2H ends with
   * head_wait, before it without. */
  for (guint i = 0; i < 2; i++) {
    const SimResult *r = i ? go : wait;
    double head = -1, last_d2h = -1;
    for (guint op = 0; op < r->program->n_ops; op++) {
      const SimOp *o = &r->program->ops[op];
      /* The head's first op ("head final_norm": the head runs op by op). */
      if (o->kind == SIM_OP_COMPUTE && o->phase == SIM_PHASE_FORWARD && head < 0 &&
          g_str_has_prefix(sim_program_label(r->program, o->label), "head"))
        head = g_array_index(r->run->op_start, double, op);
      if (o->kind == SIM_OP_COPY && o->dir == SIM_DIR_D2H)
        last_d2h = MAX(last_d2h, g_array_index(r->run->op_end, double, op));
    }
    if (i == 0)
      ck_assert(head >= last_d2h);
    else
      ck_assert(head < last_d2h);
  }
}
END_TEST

/* The most the device holds while forward ops run (before the last one ends). */
static gint64
forward_peak(const SimResult *r)
{
  double forward_end = 0;
  for (guint op = 0; op < r->program->n_ops; op++)
    if (r->program->ops[op].kind == SIM_OP_COMPUTE && r->program->ops[op].phase == SIM_PHASE_FORWARD)
      forward_end = MAX(forward_end, g_array_index(r->run->op_end, double, op));
  gint64 most = 0;
  for (guint i = 0; i < r->run->curve->len; i++) {
    const SimMemPoint *m = &g_array_index(r->run->curve, SimMemPoint, i);
    if (m->time < forward_end)
      most = MAX(most, m->device);
  }
  return most;
}

/* start = tensor, sync (save_on_cpu): each tensor is copied as soon as it
 * is saved, so a layer holds one tensor at a time, not two, and the step is
 * the same (every copy on the compute stream either way): 4 + 4 x 2 (out)
 * + 4 x 2 (in) + 8 = 28 ms. */
START_TEST(start_tensor_sync_moves_each_tensor_at_once)
{
  g_autoptr(SimScenario) s = scenario("[policy.tensor]\nkind = offload\nmode = sync\nstart = tensor\n"
                                      "[policy.group]\nkind = offload\nmode = sync\n");
  g_autoptr(SimResult) tensor = test_evaluate(s, "tensor");
  g_autoptr(SimResult) group = test_evaluate(s, "group");
  ck_assert_close(tensor->step_ms, 28.0, 1e-9);
  ck_assert_close(group->step_ms, 28.0, 1e-9);
  /* In the forward a layer's 2 MB are live until its copies end (group),
   * one tensor at a time (tensor); backward reloads both either way. */
  ck_assert_int_eq(forward_peak(group), 2000000);
  ck_assert_int_eq(forward_peak(tensor), 1000000);
}
END_TEST

/* start = tensor, async: layer i's forward is two pieces of 0.5 ms, a
 * saved at i + 0.5 and b at i + 1, each copied (1 ms) as soon as it is
 * saved: the copies run back to back from 0.5, the last (b3) ends at 8.5
 * instead of 9 when each group starts after its forward.  Layer 3's reload
 * follows it (8.5-10.5) and the backward runs 10.5-18.5, every other
 * reload hidden.  With torchtune's limit of one tensor in flight each save
 * waits for the copy before it, which the back-to-back copies have already
 * met by then but for the forward stretching to the copies: the figures
 * are the same, and the device never holds more than two layers' worth. */
START_TEST(start_tensor_async_and_inflight_tensors)
{
  g_autoptr(SimScenario) s = scenario("[policy.tensor]\n" ASYNC "inflight = 8\nstart = tensor\n"
                                      "[policy.limited]\n" ASYNC "start = tensor\ninflight_unit = tensors\ninflight = 1\n"
                                      "[policy.group]\n" ASYNC "inflight = 8\n");
  g_autoptr(SimResult) tensor = test_evaluate(s, "tensor");
  g_autoptr(SimResult) group = test_evaluate(s, "group");
  g_autoptr(SimResult) limited = test_evaluate(s, "limited");
  ck_assert_close(tensor->step_ms, 18.5, 1e-9);
  ck_assert_close(group->step_ms, 19.0, 1e-9);
  ck_assert_close(limited->step_ms, 18.5, 1e-9);
  ck_assert_int_eq(limited->peak_device.bytes, 4000000);
  /* What the limit changes is the forward: without it the forward ends at
   * 4 ms with the copies of b1 to b3 (5 tensors) still to go; with it each
   * save waits, so the forward never holds more than the tensor being
   * copied and the one being made. */
  ck_assert_int_eq(forward_peak(tensor), 5000000);
  ck_assert_int_eq(forward_peak(limited), 2000000);
}
END_TEST

/* The caching host allocator rounds every block up to a power of two: the
 * host peak is the sum of the rounded sizes of what is on the host at once.
 * 1 MB (10^6 B) blocks round to 2^20. */
START_TEST(caching_rounds_host_blocks)
{
  g_autoptr(SimScenario) s = scenario("[policy.caching]\nkind = offload\nmode = sync\npinned = caching\n"
                                      "[policy.pooled]\nkind = offload\nmode = sync\n");
  g_autoptr(SimResult) caching = test_evaluate(s, "caching");
  g_autoptr(SimResult) pooled = test_evaluate(s, "pooled");
  /* Sync, every layer: all 8 tensors (4 layers x 2) are on the host at the end of the forward. */
  ck_assert_int_eq(pooled->peak_host.bytes, 8 * 1000000);
  ck_assert_int_eq(caching->peak_host.bytes, 8 * 1048576);
  ck_assert_close(caching->step_ms, pooled->step_ms, 1e-12);
}
END_TEST

/* The cudaHostAlloc ops of a result's program. */
static guint
host_allocs(const SimResult *r)
{
  guint n = 0;
  for (guint op = 0; op < r->program->n_ops; op++)
    n += r->program->ops[op].kind == SIM_OP_HOST_ALLOC;
  return n;
}

/* TransformerEngine and torchtune pin each host buffer with
 * torch.empty_like(..., pin_memory=True): the caching host allocator.  A
 * steady step allocates nothing (the blocks the step before freed serve
 * it), a first step one cudaHostAlloc per copy, and every block is rounded
 * up to a power of two.  By hand, on the uniform model: te offloads layers
 * 0-2 (keep_last 1), 6 tensors of 10^6 B, all on the host when the forward
 * ends (layer 0 reloads when its own backward is due: the window of n = 3
 * of 4 layers has no slack), 6 x 2^20 B; torchtune every layer's 8, 8 x
 * 2^20 B. */
START_TEST(te_and_torchtune_pin_through_the_caching_allocator)
{
  static const struct {
    const char *framework, *extra;
    guint copies;
  } cases[] = { { "te", "min_elements = 0\n", 6 }, { "torchtune", "", 8 } };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    for (int first = 0; first < 2; first++) {
      g_autofree char *text = g_strdup_printf("[scenario]\nstep = %s\n%s[policy.p]\nkind = offload\nframework = %s\n%s",
                                              first ? "first" : "steady", base, cases[i].framework, cases[i].extra);
      g_autoptr(SimScenario) s = test_scenario_from_text(text);
      ck_assert_int_eq(sim_scenario_policy(s, "p")->pinned, SIM_PINNED_CACHING);
      g_autoptr(SimResult) r = test_evaluate(s, "p");
      ck_assert_uint_eq(r->d2h_copies, cases[i].copies);
      ck_assert_msg(host_allocs(r) == (first ? cases[i].copies : 0), "%s, %s step: %u allocations",
                    cases[i].framework, first ? "first" : "steady", host_allocs(r));
      ck_assert_int_eq(r->peak_host.bytes, (gint64)cases[i].copies * 1048576);
    }
  }
}
END_TEST

/* Checkpointing that offloads its inputs moves exactly the kept inputs
 * (4 x 1 MB each way) and lowers the checkpoint peak by them. */
START_TEST(offload_inputs_moves_the_kept_inputs)
{
  g_autoptr(SimScenario) s = scenario("[policy.ckpt]\nkind = checkpoint\n[policy.ckpt-off]\nkind = checkpoint\n"
                                      "offload_inputs = true\n[policy.verl-ckpt]\n" ASYNC "checkpoint = true\n");
  g_autoptr(SimResult) ckpt = test_evaluate(s, "ckpt");
  g_autoptr(SimResult) off = test_evaluate(s, "ckpt-off");
  ck_assert_uint_eq(off->d2h_bytes, 4 * 1000000);
  ck_assert_uint_eq(off->h2d_bytes, 4 * 1000000);
  ck_assert_uint_eq(off->d2h_copies, 4);
  ck_assert_uint_eq(ckpt->d2h_bytes, 0);
  /* Full checkpointing peaks in the top layer's recompute and backward:
   * the four inputs (4 MB) plus that layer's tensors (2 MB).  With the
   * inputs offloaded (async, prefetch 1) only the top layer's input and
   * the one below it, reloaded when the top layer's backward starts, are
   * back: 2 MB of inputs, the two below lower on the host. */
  ck_assert_int_eq(ckpt->peak_device.bytes, 4000000 + 2000000);
  ck_assert_int_eq(off->peak_device.bytes, 2000000 + 2000000);
  g_autoptr(SimResult) verl = test_evaluate(s, "verl-ckpt");
  ck_assert_uint_eq(verl->d2h_bytes, 4 * 1000000);
}
END_TEST

/* The start of each copy of `dir` in a result's run, in issue order. */
static GArray *
copy_starts(const SimResult *r, SimDir dir)
{
  GArray *starts = g_array_new(FALSE, FALSE, sizeof(double));
  for (guint op = 0; op < r->program->n_ops; op++)
    if (r->program->ops[op].kind == SIM_OP_COPY && r->program->ops[op].dir == dir)
      g_array_append_val(starts, g_array_index(r->run->op_start, double, op));
  return starts;
}

/* A run's step, exposed and recompute milliseconds, copies out and device peak. */
static void
assert_step(const SimResult *r, double step_ms, double exposed_ms, double recompute_ms, guint copies, gint64 peak)
{
  ck_assert_close(r->step_ms, step_ms, 1e-9);
  ck_assert_close(r->exposed_transfer_ms, exposed_ms, 1e-9);
  ck_assert_close(r->recompute_ms, recompute_ms, 1e-9);
  ck_assert_uint_eq(r->d2h_copies, copies);
  ck_assert_int_eq(r->peak_device.bytes, peak);
}

/* DeepSpeed's cpu_checkpointing, each version as its code runs it, on the
 * uniform model (pageable copies at half the link: 1 MB in 2 ms).
 *
 * release: every layer's input goes to pageable memory on the compute
 * stream before the layer runs and comes back, blocking, before its
 * recompute: a layer's forward is 2 + 1 ms (12 ms), its backward 2 + 1 + 2
 * ms (20 ms): 32 ms, 16 of them copies.  The forward holds one input; the
 * backward the reloaded input and the recomputed a and b: 3 MB.
 *
 * master: layers 0-2 offload their inputs (the last one is kept, and still
 * recomputed), each only after the next layer's forward (input k
 * leaves when input k + 1 registers): pinned copies of 1 ms at 2, 3
 * and 4 ms on the one side stream.  Layer 3 recomputes 4-5 and runs its
 * backward 5-7; each layer below asks for its input when its backward is
 * due (7, 11, 15: 1 ms each, after the copies out), recomputes 1 ms and
 * runs 2: 7 + 3 x 4 = 19 ms, 3 exposed.  Peak at 4 ms, layer 3's recompute:
 * inputs 2 (its copy 4-5) and 3 and layer 3's a and b, 4 MB. */
START_TEST(deepspeed_release_and_master)
{
  g_autoptr(SimScenario) s = scenario("[policy.release]\nkind = offload\nframework = deepspeed\n"
                                      "[policy.master]\nkind = offload\nframework = deepspeed\nversion = master\n");
  const SimPolicy *rel = sim_scenario_policy(s, "release"), *mas = sim_scenario_policy(s, "master");
  ck_assert(!rel->async && rel->input_first && rel->pinned == SIM_PINNED_PAGEABLE && rel->keep_last == 0);
  ck_assert(mas->async && mas->defer_offload && mas->shared_stream && mas->pinned == SIM_PINNED_CACHING &&
            mas->keep_last == 1);
  g_autoptr(SimResult) release = test_evaluate(s, "release");
  assert_step(release, 32.0, 16.0, 4.0, 4, 3000000);
  /* Each input leaves before its layer's forward: at 0, 3, 6 and 9 ms. */
  g_autoptr(GArray) out = copy_starts(release, SIM_DIR_D2H);
  ck_assert_uint_eq(out->len, 4);
  for (guint i = 0; i < 4; i++)
    ck_assert_close(g_array_index(out, double, i) * 1e3, 3.0 * i, 1e-9);

  g_autoptr(SimResult) master = test_evaluate(s, "master");
  assert_step(master, 19.0, 3.0, 4.0, 3, 4000000);
  ck_assert_close(master->peak_device.time_ms, 4.0, 1e-9);
  g_autoptr(GArray) later = copy_starts(master, SIM_DIR_D2H);
  ck_assert_uint_eq(later->len, 3);
  for (guint i = 0; i < 3; i++)
    ck_assert_close(g_array_index(later, double, i) * 1e3, 2.0 + i, 1e-9);
}
END_TEST

/* A generated transformer of 4 layers whose residual stream is 2^20 bf16
 * elements (batch 1 x seq 4096 x hidden 256, 2 MiB), so that every N x h
 * tensor passes Megatron's 1,048,576-element filter and the statistics
 * (N x 4 B, 4096 elements) do not. */
static const char megatron_machine[] = "[device]\nmemory = 80GiB\nmatmul_tflops = 100\nhbm_bandwidth = 1TB/s\n"
                                       "[link]\nh2d_bandwidth = 10GB/s\nd2h_bandwidth = 10GB/s\n"
                                       "[transformer]\nhidden = 256\nlayers = 4\nheads = 4\nffn = 1024\n"
                                       "vocab = 1000\nbatch = 1\nseq = 4096\n";

/* The (layer, label) of each copy of `dir`, in issue order: "L2 attn_out". */
static GPtrArray *
copy_names(const SimResult *r, SimDir dir)
{
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  for (guint op = 0; op < r->program->n_ops; op++) {
    const SimOp *o = &r->program->ops[op];
    if (o->kind == SIM_OP_COPY && o->dir == dir)
      g_ptr_array_add(names, g_strdup_printf("L%d %s", o->layer, sim_program_label(r->program, o->label)));
  }
  return names;
}

/* A layer offloaded by module below layers that recompute: the recomputed
 * layers push no module groups, so the backward of the top one pops layer
 * 0's (Megatron reloads them there), after its last op; its checkpointed
 * input is still freed with that op.  (The lowering once added the free
 * after the reloads, to an op no longer the newest: a leak the invariants
 * caught, and `offsim plan --framework megatron` failed on it.) */
START_TEST(megatron_offload_below_recompute)
{
  g_autofree char *text = g_strconcat(megatron_machine,
                                      "[policy.mixed]\nkind = plan\nframework = megatron\n"
                                      "actions = offload, recompute, recompute, recompute\n"
                                      "[policy.alone]\nkind = plan\nframework = megatron\n"
                                      "actions = offload, keep, keep, keep\n", NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  g_autoptr(SimResult) mixed = test_evaluate(s, "mixed");
  g_autoptr(SimResult) alone = test_evaluate(s, "alone");
  ck_assert_uint_eq(mixed->d2h_bytes, alone->d2h_bytes);
  ck_assert_uint_eq(mixed->h2d_bytes, alone->h2d_bytes);
  ck_assert(mixed->recompute_ms > 0);
  ck_assert_int_lt(mixed->peak_device.bytes, alone->peak_device.bytes);
}
END_TEST

/* Megatron's fine-grained offload moves the saved references of the
 * modules in offload_modules, one group per module of each layer, and
 * never the MLP's (fc1, act, fc2).  By hand, on ops = fused (Megatron's own
 * layer) with every dense module: layers 0-2 offload (the last group of
 * each name stays), each 10 references of 2 MiB: attn_norm's input (1),
 * qkv_in (3: q, k and v's projections), core_attn's q, k, v and attn_out
 * (4; the log-sum-exp is under 1M elements), attn_proj's attn_out (1, a
 * second copy of the same storage: no dedup) and mlp_norm's input (1): 30
 * copies, 60 MiB.  Reloads are Megatron's LIFO: layer 3's backward ends
 * mlp_norm, attn_proj, core_attn, qkv_linear and attn_norm in turn, each
 * end reloading the newest group of layer 2 not reloaded yet, which were
 * committed qkv, core_attn, attn_proj, attn_norm (after the attention's
 * residual add), mlp_norm: mlp_norm, attn_norm, attn_proj, core_attn, qkv.
 * With core_attn alone attn_out is still read by attn_proj, which saved it
 * outside the hooks: it is copied (1 of its 2 references) and stays. */
START_TEST(megatron_groups_by_module)
{
  g_autofree char *text =
    g_strconcat(megatron_machine, "[policy.mg]\nkind = offload\nframework = megatron\n"
                "[policy.core]\nkind = offload\nframework = megatron\noffload_modules = core_attn\n", NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  const guint64 row = 2 * 1048576;
  g_autoptr(SimResult) mg = test_evaluate(s, "mg");
  ck_assert_uint_eq(mg->d2h_copies, 30);
  ck_assert_uint_eq(mg->d2h_bytes, 30 * row);
  ck_assert_uint_eq(mg->h2d_bytes, 30 * row);
  g_autoptr(GPtrArray) out = copy_names(mg, SIM_DIR_D2H);
  static const char *const layer0[] = { "L0 qkv_in",    "L0 qkv_in", "L0 qkv_in", "L0 q",           "L0 k",
                                        "L0 v",         "L0 attn_out", "L0 attn_out", "L0 attn_norm_in",
                                        "L0 mlp_norm_in" };
  for (guint i = 0; i < G_N_ELEMENTS(layer0); i++)
    ck_assert_str_eq(g_ptr_array_index(out, i), layer0[i]);
  g_autoptr(GPtrArray) back = copy_names(mg, SIM_DIR_H2D);
  static const char *const layer2[] = { "L2 mlp_norm_in", "L2 attn_norm_in", "L2 attn_out", "L2 q",      "L2 k",
                                        "L2 v",           "L2 attn_out",     "L2 qkv_in",   "L2 qkv_in", "L2 qkv_in" };
  for (guint i = 0; i < G_N_ELEMENTS(layer2); i++)
    ck_assert_str_eq(g_ptr_array_index(back, i), layer2[i]);
  for (guint i = 0; i < out->len; i++)
    ck_assert_msg(!strstr(g_ptr_array_index(out, i), "gate") && !strstr(g_ptr_array_index(out, i), "mlp_in") &&
                    !strstr(g_ptr_array_index(out, i), "down_in"),
                  "an MLP tensor moved: %s", (const char *)g_ptr_array_index(out, i));

  g_autoptr(SimResult) core = test_evaluate(s, "core");
  ck_assert_uint_eq(core->d2h_copies, 3 * 4);
  ck_assert_uint_eq(core->d2h_bytes, 3 * 4 * row);
  /* attn_out stays on the device beside its copy: the peak of `core` is
   * above that of the same moves without it. */
  guint8 fates[64];
  guint ncopies[64];
  const SimLayer *l0 = sim_workload_layer(s->workload, 0);
  g_assert(l0->tensors->len <= G_N_ELEMENTS(fates));
  sim_lower_fates(sim_scenario_policy(s, "core"), l0, SIM_ACTION_OFFLOAD, fates, ncopies);
  for (guint k = 0; k < l0->tensors->len; k++) {
    const char *name = g_array_index(l0->tensors, SimTensor, k).name;
    SimFate want = strcmp(name, "attn_out") == 0                                               ? SIM_FATE_KEPT_COPIED
                   : strcmp(name, "q") == 0 || strcmp(name, "k") == 0 || strcmp(name, "v") == 0 ? SIM_FATE_OFFLOAD
                                                                                                : SIM_FATE_KEEP;
    ck_assert_msg(fates[k] == want, "%s: fate %u", name, fates[k]);
    ck_assert_uint_eq(ncopies[k], want == SIM_FATE_KEEP ? 0 : 1);
  }
}
END_TEST

/* Megatron's view rule on HF's GPT-2 under SDPA: q, k and v are thirds of
 * c_attn's output (N x 3h), each a view over less than half of it, so each
 * is a gathered copy of its third (2 MiB) with a device temporary of that
 * size; SDPA's output is a transposed view of all of its storage, copied
 * whole.  Per offloaded layer (0-2): 3 x 2 MiB of qkv and 2 MiB of
 * attn_out in core_attn's group. */
START_TEST(megatron_views_whole_and_gathered)
{
  g_autofree char *text = g_strconcat(megatron_machine, "ops = hf\nattention = sdpa\nnorm = layernorm\nmlp = gelu\n"
                                      "positions = 4096\nlinear_bias = true\n[policy.mg]\nkind = offload\nframework = megatron\n"
                                      "offload_modules = core_attn\n", NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  g_autoptr(SimResult) r = test_evaluate(s, "mg");
  guint64 qkv = 0, out = 0;
  guint n_qkv = 0;
  for (guint op = 0; op < r->program->n_ops; op++) {
    const SimOp *o = &r->program->ops[op];
    if (o->kind != SIM_OP_COPY || o->dir != SIM_DIR_D2H)
      continue;
    const char *name = sim_program_label(r->program, o->label);
    if (strcmp(name, "qkv") == 0) {
      qkv += o->bytes;
      n_qkv++;
      ck_assert_uint_eq(o->bytes, 2 * 1048576);
      /* the gather's temporary: device memory during the copy */
      const SimMemAction *a = &r->program->mem[o->mem_first];
      ck_assert(o->mem_starts == 2 && a[1].pool == SIM_POOL_DEVICE && a[1].delta == 2 * 1048576);
    } else if (strcmp(name, "attn_out") == 0) {
      out += o->bytes;
    }
  }
  ck_assert_uint_eq(n_qkv, 3 * 3);
  ck_assert_uint_eq(qkv, 3 * 3 * 2 * 1048576);
  ck_assert_uint_eq(out, 3 * 2 * 1048576);
}
END_TEST

/* A policy text and the words its one-line refusal must hold. */
typedef struct {
  const char *policy, *expect;
} Refusal;

/* Each case's policy after `prelude` (a scenario up to its policy's
 * [policy.x] line) is refused in one line holding its words. */
static void
assert_refusals(const char *prelude, const Refusal *cases, guint n)
{
  for (guint i = 0; i < n; i++) {
    g_autofree char *text = g_strconcat(prelude, cases[i].policy, NULL);
    g_autofree char *why = test_scenario_error(text);
    ck_assert_msg(strstr(why, cases[i].expect) != NULL, "case %u: %s", i, why);
    ck_assert_msg(strchr(why, '\n') == NULL, "case %u: more than one line: %s", i, why);
  }
}

/* Megatron's module list as TransformerConfig checks it, and what its
 * groups cannot have: one line each, naming the key. */
START_TEST(megatron_refuses_what_it_cannot_run)
{
  static const Refusal cases[] = {
    { "offload_modules = attn_proj\n", "offload_modules: attn_proj needs core_attn" },
    { "offload_modules = core_attn, fused_group_mlp\n",
      "offload_modules: fused_group_mlp offloads TransformerEngine's fused grouped MLP" },
    { "offload_modules = core_attention\n", "offload_modules: expected Megatron's module names" },
    { "offload_modules = \n", "offload_modules: Megatron offloads at least one module" },
    { "dedup = true\n", "dedup: megatron copies every saved reference" },
    { "prefetch = 2\n", "prefetch: megatron copies each module's group when the module ends" },
    { "reload = on-demand\n", "reload: megatron copies each module's group" },
    { "mode = sync\n", "mode: megatron copies each module's group" },
  };
  g_autofree char *prelude = g_strconcat(megatron_machine, "[policy.x]\nkind = offload\nframework = megatron\n", NULL);
  assert_refusals(prelude, cases, G_N_ELEMENTS(cases));
  /* The preset's own values, as `offsim show` writes them, load. */
  g_autofree char *shown = g_strconcat(megatron_machine, "[policy.x]\nkind = offload\nframework = megatron\n"
                                       "mode = async\nprefetch = 1\nreload = prefetch\ndedup = false\n", NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(shown);
  ck_assert(sim_scenario_policy(s, "x")->module_groups);
}
END_TEST

/* reload = on-unpack (torchtune): a node's reloads wait only for the end
 * of the node before the previous one that reloaded.  Each layer is one
 * node: layer 3's reload (nothing to wait for but its own copy out) 9-11,
 * backward 11-13; layer 2's (nothing either) 11-13 on the h2d stream,
 * backward 13-15; layer 1's after layer 3's end, 13-15, backward 15-17;
 * layer 0's after layer 2's, 15-17, backward 17-19: 19 ms (7 not computing)
 * as a prefetch of one layer, against on-demand's 25. */
START_TEST(on_unpack_waits_for_the_node_before_the_previous)
{
  g_autoptr(SimScenario) s = scenario("[policy.unpack]\n" ASYNC "inflight = 8\nreload = on-unpack\n");
  g_autoptr(SimResult) r = test_evaluate(s, "unpack");
  ck_assert_close(r->step_ms, 19.0, 1e-9);
  ck_assert_close(r->exposed_transfer_ms, 7.0, 1e-9);
  g_autoptr(GArray) back = copy_starts(r, SIM_DIR_H2D);
  static const double starts[] = { 9, 9, 11, 11, 13, 13, 15, 15 }; /* a and b of layers 3 to 0 */
  ck_assert_uint_eq(back->len, G_N_ELEMENTS(starts));
  for (guint i = 0; i < back->len; i += 2)
    ck_assert_close(g_array_index(back, double, i) * 1e3, starts[i], 1e-9);
}
END_TEST

/* torchtune with activation checkpointing: a non-reentrant checkpoint
 * saves its inputs first, so the hook moves exactly the checkpoint inputs,
 * each as its layer starts (1 ms each on the one side stream: 0-1, ..., 3-4,
 * under the forward's 0-4), and nothing else.  Backward, at unpack: layer
 * 3's input 4-5 (behind the copies out), its recompute 5-6 and backward
 * 6-8; layer 2's 5-6, 8-9, 9-11; layer 1's after layer 3's end, 8-9, then
 * 11-12, 12-14; layer 0's after layer 2's, 11-12, then 14-15, 15-17: 17
 * ms, 1 exposed.  Peak in layer 3's backward: its input and a and b, and
 * layer 2's input back, 4 MB. */
START_TEST(torchtune_moves_the_checkpoint_inputs)
{
  g_autoptr(SimScenario) s = scenario("[policy.tt]\nkind = offload\nframework = torchtune\ncheckpoint = true\n");
  g_autoptr(SimResult) r = test_evaluate(s, "tt");
  assert_step(r, 17.0, 1.0, 4.0, 4, 4000000);
  ck_assert_uint_eq(r->d2h_bytes, 4 * 1000000);
  g_autoptr(GArray) out = copy_starts(r, SIM_DIR_D2H);
  for (guint i = 0; i < out->len; i++)
    ck_assert_close(g_array_index(out, double, i) * 1e3, (double)i, 1e-9);
}
END_TEST

/* torchtune's context wraps the model but its output head, and the loss is
 * computed outside it: on a generated transformer its copies include the
 * embedding's token ids and the final norm's tensors, never the LM head's
 * input, the log-softmax or the labels. */
START_TEST(torchtune_leaves_the_output_head)
{
  g_autofree char *text = g_strconcat(megatron_machine, "ops = hf\n[policy.tt]\nkind = offload\nframework = torchtune\n",
                                      NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  g_autoptr(SimResult) r = test_evaluate(s, "tt");
  g_autoptr(GPtrArray) out = copy_names(r, SIM_DIR_D2H);
  gboolean ids = FALSE, norm = FALSE;
  for (guint i = 0; i < out->len; i++) {
    const char *name = g_ptr_array_index(out, i);
    ids |= strcmp(name, "L-1 token_ids") == 0;
    norm |= strcmp(name, "L-1 final_norm.in_fp32") == 0;
    ck_assert_msg(!strstr(name, "lm_head") && !strstr(name, "log_softmax") && !strstr(name, "labels"),
                  "the output head's %s moved", name);
  }
  ck_assert(ids && norm);
}
END_TEST

/* The most device memory held while the run is before `ms`. */
static gint64
device_before(const SimResult *r, double ms)
{
  gint64 most = 0;
  for (guint i = 0; i < r->run->curve->len; i++) {
    const SimMemPoint *m = &g_array_index(r->run->curve, SimMemPoint, i);
    if (m->time * 1e3 < ms - 1e-9)
      most = MAX(most, m->device);
  }
  return most;
}

/* free = wait (TransformerEngine's release_activation_forward_gpu_memory):
 * a layer's copied tensors stay until the forward that waits for them.
 * Three 1 MB tensors a layer, each copied (0.1 ms at 10 GB/s) as it is
 * saved, at a third, two thirds and the end of a 1 ms forward; the window
 * of one layer makes layer 1 wait for layer 0's last copy (1.0-1.1 ms).
 * Freed at copy end, layer 0 holds at most two (a's copy ends at 0.43 ms,
 * before c is made at 0.67); freed at the wait, all three until 1.1 ms. */
START_TEST(te_frees_after_the_window_wait)
{
  static const char text[] = "[device]\nmemory = 1GiB\n[link]\nh2d_bandwidth = 10GB/s\nd2h_bandwidth = 10GB/s\n"
                             "latency = 0\n[model]\nlayers = 4\nforward = 1ms\ninput = 1MB\n"
                             "tensors = a:1MB, b:1MB, c:1MB\n"
                             "[policy.wait]\nkind = offload\nkeep_last = 1\nstart = tensor\ninflight_unit = window\n"
                             "free = wait\n"
                             "[policy.end]\nkind = offload\nkeep_last = 1\nstart = tensor\ninflight_unit = window\n";
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  g_autoptr(SimResult) wait = test_evaluate(s, "wait");
  g_autoptr(SimResult) end = test_evaluate(s, "end");
  ck_assert_int_eq(device_before(wait, 1.0), 3000000);
  ck_assert_int_eq(device_before(end, 1.0), 2000000);
  ck_assert_close(wait->step_ms, end->step_ms, 1e-12); /* the window waits for the copies either way */
  g_autofree char *why = test_scenario_error("[device]\nmemory = 1GiB\n[link]\nh2d_bandwidth = 1GB/s\n"
                                             "d2h_bandwidth = 1GB/s\n[model]\nlayers = 2\nforward = 1ms\n"
                                             "input = 1MB\ntensors = a:1MB\n[policy.x]\nkind = offload\n"
                                             "start = tensor\ninflight_unit = tensors\nfree = wait\n");
  ck_assert_msg(strstr(why, "free: wait frees a group when the forward waits"), "%s", why);
}
END_TEST

/* How HF's code on CUDA lays out what it saves (SimUse.view), and
 * TransformerEngine leaving the non-contiguous references on the device.
 * Llama-like with grouped-query attention (4 heads, 2 key/value heads)
 * under SDPA: q, RoPE's output, is a transposed view (STRIDED); k and v
 * are repeat_kv's contiguous copies; SDPA saves its output as a transposed
 * view, o_proj a contiguous view of the same storage.  So TE keeps q, moves
 * k and v, and copies attn_out (o_proj's reference) while SDPA's reference
 * holds it on the device (kept+copied).  Under flash_attention_2 every
 * reference is contiguous. */
START_TEST(te_leaves_non_contiguous_references)
{
  for (guint flash = 0; flash < 2; flash++) {
    g_autofree char *text =
      g_strdup_printf("%sops = hf\nkv_heads = 2\nattention = %s\n[policy.te]\nkind = offload\nframework = te\n",
                      megatron_machine, flash ? "flash" : "sdpa");
    g_autoptr(SimScenario) s = test_scenario_from_text(text);
    const SimLayer *l0 = sim_workload_layer(s->workload, 0);
    for (guint u = 0; u < l0->uses->len; u++) {
      const SimUse *use = &g_array_index(l0->uses, SimUse, u);
      const char *name = g_array_index(l0->tensors, SimTensor, use->tensor).name;
      const char *op = sim_layer_op(l0, use->op)->name;
      gboolean strided = !flash && (strcmp(name, "q") == 0 || (strcmp(name, "attn_out") == 0 && strcmp(op, "attention") == 0));
      ck_assert_msg(use->view == (strided ? SIM_VIEW_STRIDED : SIM_VIEW_CONTIGUOUS), "%s by %s: view %u", name, op,
                    use->view);
    }
    guint8 fates[64];
    guint ncopies[64];
    g_assert(l0->tensors->len <= G_N_ELEMENTS(fates));
    sim_lower_fates(sim_scenario_policy(s, "te"), l0, SIM_ACTION_OFFLOAD, fates, ncopies);
    for (guint k = 0; k < l0->tensors->len; k++) {
      const char *name = g_array_index(l0->tensors, SimTensor, k).name;
      if (strcmp(name, "q") == 0)
        ck_assert_int_eq(fates[k], flash ? SIM_FATE_OFFLOAD : SIM_FATE_KEEP);
      else if (strcmp(name, "attn_out") == 0)
        ck_assert_int_eq(fates[k], flash ? SIM_FATE_OFFLOAD : SIM_FATE_KEPT_COPIED);
      else if (strcmp(name, "k") == 0 || strcmp(name, "v") == 0)
        ck_assert_int_eq(fates[k], SIM_FATE_OFFLOAD);
      if (fates[k] == SIM_FATE_OFFLOAD || fates[k] == SIM_FATE_KEPT_COPIED)
        ck_assert_uint_eq(ncopies[k], 1); /* dedup */
    }
  }
}
END_TEST

/* min_elements counts elements by each tensor's element type: on a
 * generated transformer in bf16, 2^18 elements is 512 KiB. */
START_TEST(min_elements_by_element_type)
{
  static const char machine[] = "[device]\nmemory = 80GiB\nmatmul_tflops = 100\nhbm_bandwidth = 1TB/s\n"
                                "[link]\nh2d_bandwidth = 10GB/s\nd2h_bandwidth = 10GB/s\n"
                                "[transformer]\nhidden = 256\nlayers = 2\nheads = 4\nffn = 1024\nvocab = 1000\n"
                                "batch = 1\nseq = 512\nattention = eager\n";
  g_autofree char *text = g_strconcat(machine, "[policy.el]\n" ASYNC "min_elements = 262144\n"
                                      "[policy.bytes]\n" ASYNC "min_tensor = 512KiB\n", NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  g_autoptr(SimResult) el = test_evaluate(s, "el");
  /* By hand: per layer, tensors of at least 2^18 elements. bf16 N x f =
   * 512 x 1024 = 2^19 elements (gate, up, silu_out, down_in); N x h = 2^17
   * (no); scores 4 x 512^2 = 2^20 elements in bf16 (2 MiB). */
  guint64 want = 0;
  for (guint i = 0; i < 2; i++) {
    const SimLayer *layer = sim_workload_layer(s->workload, i);
    for (guint k = 0; k < layer->tensors->len; k++) {
      const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
      ck_assert(t->elem_known);
      if (sim_tensor_elements(t) >= 262144)
        want += t->bytes; /* dedup: once per storage */
    }
  }
  ck_assert_uint_eq(el->d2h_bytes, want);
  ck_assert_uint_eq(want, 2 * (4 * 1048576 + 2097152));
  /* Explicit layers have no element type: refused, naming the key. */
  g_autofree char *why = test_scenario_error("[device]\nmemory = 1GiB\n[link]\nh2d_bandwidth = 1GB/s\n"
                                             "d2h_bandwidth = 1GB/s\n[model]\nlayers = 2\nforward = 1ms\ninput = 1MB\n"
                                             "tensors = a:1MB\n[policy.x]\nkind = offload\nmin_elements = 10\n");
  ck_assert_msg(strstr(why, "min_elements") && strstr(why, "element type"), "%s", why);
}
END_TEST

/* The presets set what their code does; a key beside one overrides it. */
START_TEST(presets_and_overrides)
{
  static const char machine[] = "[device]\nmemory = 80GiB\nmatmul_tflops = 100\nhbm_bandwidth = 1TB/s\n"
                                "[link]\nh2d_bandwidth = 10GB/s\nd2h_bandwidth = 10GB/s\n"
                                "[transformer]\nhidden = 256\nlayers = 4\nheads = 4\nffn = 1024\nvocab = 1000\n"
                                "batch = 1\nseq = 512\nops = hf\n";
  g_autofree char *text = g_strconcat(machine, "[policy.verl]\nkind = offload\nframework = verl\n"
                                      "[policy.verl3]\nkind = offload\nframework = verl\ninflight = 3\n"
                                      "[policy.soc]\nkind = offload\nframework = save_on_cpu\n"
                                      "[policy.soc-pin]\nkind = offload\nframework = save_on_cpu\npin_memory = true\n"
                                      "[policy.te]\nkind = offload\nframework = te\n"
                                      "[policy.tt]\nkind = offload\nframework = torchtune\n"
                                      "[policy.ds]\nkind = offload\nframework = deepspeed\n"
                                      "[policy.mg]\nkind = offload\nframework = megatron\n", NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  const SimPolicy *v = sim_scenario_policy(s, "verl"), *v3 = sim_scenario_policy(s, "verl3");
  ck_assert(v->async && v->free == SIM_FREE_NEXT_COMMIT && v->head_wait && v->dedup && v->keep_last == 1 && v->inflight == 2 &&
            v->pinned == SIM_PINNED_CACHING && v->params == SIM_PARAMS_SKIP && v->framework == SIM_FRAMEWORK_VERL);
  ck_assert_uint_eq(v3->inflight, 3);
  ck_assert(v3->free == SIM_FREE_NEXT_COMMIT);
  const SimPolicy *soc = sim_scenario_policy(s, "soc"), *pin = sim_scenario_policy(s, "soc-pin");
  ck_assert(!soc->async && soc->params == SIM_PARAMS_COPY && soc->scope_all && !soc->dedup && soc->start_tensor &&
            soc->pinned == SIM_PINNED_PAGEABLE);
  ck_assert_int_eq(pin->pinned, SIM_PINNED_CACHING);
  const SimPolicy *te = sim_scenario_policy(s, "te");
  ck_assert(te->shared_stream && te->start_tensor && te->inflight_unit == SIM_INFLIGHT_WINDOW &&
            te->min_elements == 262144);
  const SimPolicy *tt = sim_scenario_policy(s, "tt");
  ck_assert(tt->reload == SIM_RELOAD_ON_UNPACK && tt->inflight_unit == SIM_INFLIGHT_TENSORS && tt->inflight == 5 && tt->min_tensor == 1024);
  ck_assert(sim_scenario_policy(s, "ds")->checkpoint);
  /* Every preset runs, its invariants hold (test_evaluate checks them). */
  static const char *const names[] = { "verl", "verl3", "soc", "soc-pin", "te", "tt", "ds", "mg" };
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autoptr(SimResult) r = test_evaluate(s, names[i]);
    ck_assert(r->step_ms > 0);
  }
}
END_TEST

/* What a framework cannot have, one line naming the key. */
START_TEST(impossible_combinations_are_named)
{
  static const Refusal cases[] = {
    { "kind = offload\nframework = te\ncheckpoint = true\n", "checkpoint: te does not offload checkpoint inputs (verl, torchtune and deepspeed do)" },
    { "kind = offload\nframework = deepspeed\ncheckpoint = false\n", "checkpoint: deepspeed moves only" },
    { "kind = offload\nframework = verl\npin_memory = true\n", "pin_memory: is save_on_cpu's argument" },
    { "kind = offload\ninflight_unit = tensors\n", "inflight_unit: tensors counts saves" },
    { "kind = offload\nreload = on-demand\nprefetch = 2\n", "prefetch: reload = on-demand" },
    { "kind = offload\nmode = sync\nstreams = shared\n", "streams: mode = sync copies on the compute stream" },
    { "kind = offload\nframework = megatron\n", "framework: megatron keeps tensors of fewer than 1048576 elements" },
    { "kind = offload\nframework = megatron\nmin_elements = 10\n", "min_elements: counts elements" },
    /* The preset counts tensors; the key given against it is start. */
    { "kind = offload\nframework = torchtune\nstart = group\n", "start: framework = torchtune counts its copies" },
    { "kind = offload\nframework = flax\n", "framework" },
    { "kind = offload\nframework = verl\nversion = master\n", "version: chooses the code framework = deepspeed follows" },
    { "kind = offload\nversion = master\n", "version: chooses the code framework = deepspeed follows" },
    { "kind = offload\nframework = verl\noffload_modules = core_attn\n", "offload_modules: is Megatron's option" },
  };
  g_autofree char *prelude = g_strconcat(base, "[policy.x]\n", NULL);
  assert_refusals(prelude, cases, G_N_ELEMENTS(cases));
}
END_TEST

/* The README's table of every preset on one Llama-3.1-8B step is what the
 * program gives, cell by cell. */
START_TEST(readme_framework_table_is_the_program)
{
  g_auto(GStrv) lines = NULL;
  guint at = test_readme_table("| Llama-3.1-8B step |", &lines);
  g_autoptr(SimScenario) s = test_scenario_file_set(OFFSIM_SCENARIOS "/frameworks/llama-3.1-8b.ini", NULL);
  guint rows = 0;
  for (guint row = at + 2; lines[row] && lines[row][0] == '|'; row++, rows++) {
    g_auto(GStrv) cells = g_strsplit(lines[row], "|", -1);
    g_autofree char *name = g_strstrip(g_strdup(cells[1]));
    name[strlen(name) - 1] = '\0'; /* `name` */
    g_autoptr(SimResult) r = test_evaluate(s, name + 1);
    const double gib = 1073741824.0;
    g_autofree char *want = g_strdup_printf("%.1f|%.1f|%.2f|%.2f|%.2f|%u", r->step_ms, r->exposed_transfer_ms,
                                            (double)r->peak_device.bytes / gib, (double)r->peak_host.bytes / gib,
                                            (double)r->d2h_bytes / gib, r->d2h_copies);
    g_autofree char *got = g_strdup_printf("%s|%s|%s|%s|%s|%s", g_strstrip(cells[2]), g_strstrip(cells[3]),
                                           g_strstrip(cells[4]), g_strstrip(cells[5]), g_strstrip(cells[6]),
                                           g_strstrip(cells[7]));
    ck_assert_msg(strcmp(want, got) == 0, "README, %s: %s, the program %s", name + 1, got, want);
  }
  ck_assert_uint_eq(rows, s->policies->len);
}
END_TEST

static Suite *
schedules_suite(void)
{
  Suite *s = suite_create("schedules");
  TCase *c = tcase_create("schedules");
  /* Whole models and recordings under ASan on a loaded machine: not Check's 4 s. */
  tcase_set_timeout(c, 120);
  tcase_add_test(c, on_demand_exposes_every_reload);
  tcase_add_test(c, shared_stream_carries_both_directions);
  tcase_add_test(c, te_window_of_one_cannot_overlap);
  tcase_add_test(c, next_commit_is_the_double_buffer);
  tcase_add_test(c, head_wait_waits_for_the_offloads);
  tcase_add_test(c, start_tensor_sync_moves_each_tensor_at_once);
  tcase_add_test(c, start_tensor_async_and_inflight_tensors);
  tcase_add_test(c, caching_rounds_host_blocks);
  tcase_add_test(c, te_and_torchtune_pin_through_the_caching_allocator);
  tcase_add_test(c, offload_inputs_moves_the_kept_inputs);
  tcase_add_test(c, deepspeed_release_and_master);
  tcase_add_test(c, megatron_groups_by_module);
  tcase_add_test(c, megatron_views_whole_and_gathered);
  tcase_add_test(c, megatron_refuses_what_it_cannot_run);
  tcase_add_test(c, on_unpack_waits_for_the_node_before_the_previous);
  tcase_add_test(c, torchtune_moves_the_checkpoint_inputs);
  tcase_add_test(c, torchtune_leaves_the_output_head);
  tcase_add_test(c, te_frees_after_the_window_wait);
  tcase_add_test(c, te_leaves_non_contiguous_references);
  tcase_add_test(c, min_elements_by_element_type);
  tcase_add_test(c, presets_and_overrides);
  tcase_add_test(c, impossible_combinations_are_named);
  tcase_add_test(c, readme_framework_table_is_the_program);
  tcase_add_test(c, megatron_offload_below_recompute);
  suite_add_tcase(s, c);
  return s;
}

int
main(void)
{
  return test_run_suite(schedules_suite());
}
