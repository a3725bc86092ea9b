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

#include "framework.h"
#include "lower.h"

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
  ck_assert(v->async && v->free_next_commit && v->head_wait && v->dedup && v->keep_last == 1 && v->inflight == 2 &&
            v->pinned == SIM_PINNED_CACHING && v->params == SIM_PARAMS_SKIP && v->framework == SIM_FRAMEWORK_VERL);
  ck_assert_uint_eq(v3->inflight, 3);
  ck_assert(v3->free_next_commit);
  const SimPolicy *soc = sim_scenario_policy(s, "soc"), *pin = sim_scenario_policy(s, "soc-pin");
  ck_assert(!soc->async && soc->params == SIM_PARAMS_COPY && soc->scope_all && !soc->dedup && soc->start_tensor &&
            soc->pinned == SIM_PINNED_PAGEABLE);
  ck_assert_int_eq(pin->pinned, SIM_PINNED_CACHING);
  const SimPolicy *te = sim_scenario_policy(s, "te");
  ck_assert(te->shared_stream && te->start_tensor && te->inflight_unit == SIM_INFLIGHT_WINDOW &&
            te->min_elements == 262144);
  const SimPolicy *tt = sim_scenario_policy(s, "tt");
  ck_assert(tt->on_demand && tt->inflight_unit == SIM_INFLIGHT_TENSORS && tt->inflight == 5 && tt->min_tensor == 1024);
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
  static const struct {
    const char *policy, *expect;
  } cases[] = {
    { "kind = offload\nframework = te\ncheckpoint = true\n", "checkpoint: te does not offload checkpoint inputs" },
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
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *text = g_strconcat(base, "[policy.x]\n", cases[i].policy, NULL);
    g_autofree char *why = test_scenario_error(text);
    ck_assert_msg(strstr(why, cases[i].expect) != NULL, "case %u: %s", i, why);
    ck_assert_msg(strchr(why, '\n') == NULL, "case %u: more than one line: %s", i, why);
  }
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
  tcase_add_test(c, offload_inputs_moves_the_kept_inputs);
  tcase_add_test(c, min_elements_by_element_type);
  tcase_add_test(c, presets_and_overrides);
  tcase_add_test(c, impossible_combinations_are_named);
  tcase_add_test(c, readme_framework_table_is_the_program);
  suite_add_tcase(s, c);
  return s;
}

int
main(void)
{
  return test_run_suite(schedules_suite());
}
