/* tests/test_hooks.c — what a saved-tensor hook moves and when memory
 * exists, on a hand-built workload whose every figure is computed here:
 * scope (the embedding and the head), params (parameter references copied
 * and their source kept), leaves, references held elsewhere (a storage an
 * earlier layer saved, copied again by each layer's group), pageable
 * copies, gradients allocated by backward (set-to-none), held outputs and
 * the head's backward transient.
 *
 * The workload, two layers (sizes in bytes, refs in brackets):
 *   embed   ids 10 (leaf)
 *   layer 0 act 1000, mask 100 (leaf), w 400 (parameter), rope 50 [2] (leaf)
 *   layer 1 act 1000, mask 100 (leaf), w 400 (parameter), rope 50 [2] (leaf, shared: layer 0's)
 *   head    logsm 2000 [2], labels 10 (leaf)
 * Every op 1 ms (backward 2 ms), links 1 GB/s without latency, so a copy
 * of B bytes takes B ns. */
#include "testutil.h"

#include "lower/lower.h"
#include "model/workload.h"

#include <math.h>
#include <string.h>

static const char base[] = "[device]\nmemory = 1GiB\n"
                           "[link]\nh2d_bandwidth = 1GB/s\nd2h_bandwidth = 1GB/s\nlatency = 0\npageable_factor = 0.5\n"
                           "[model]\nlayers = 2\nforward = 1ms\ninput = 1KiB\ntensors = x:1KiB\n";

static void
add(SimLayer *layer, const char *name, guint64 bytes, guint refs, gboolean leaf, gboolean parameter, gboolean shared)
{
  SimTensor *t = sim_layer_add_tensor(layer, name, bytes);
  t->refs = refs;
  t->leaf = leaf;
  t->parameter = parameter;
  t->shared = shared;
}

static void
set_times(SimLayer *layer, double forward)
{
  layer->forward = forward;
  layer->backward = 2 * forward;
}

static SimWorkload *
hooks_workload(void)
{
  SimWorkload *w = sim_workload_new("hooks", 2);
  for (guint i = 0; i < 2; i++) {
    SimLayer *l = sim_workload_layer(w, i);
    set_times(l, 1e-3);
    add(l, "act", 1000, 1, FALSE, FALSE, FALSE);
    add(l, "mask", 100, 1, TRUE, FALSE, FALSE);
    add(l, "w", 400, 1, FALSE, TRUE, FALSE);
    add(l, "rope", 50, 2, TRUE, FALSE, i > 0);
  }
  SimLayer *e = sim_workload_add_embed(w);
  set_times(e, 1e-3);
  add(e, "ids", 10, 1, TRUE, FALSE, FALSE);
  SimLayer *h = sim_workload_add_head(w);
  set_times(h, 1e-3);
  add(h, "logsm", 2000, 2, FALSE, FALSE, FALSE);
  add(h, "labels", 10, 1, TRUE, FALSE, FALSE);
  w->static_bytes = 1000000;
  return w;
}

/* A scenario of the machine above with `policies` (INI text), on the hand-built workload. */
static SimScenario *
scenario(const char *policies)
{
  g_autofree char *text = g_strconcat(base, policies, NULL);
  SimScenario *s = test_scenario_from_text(text);
  sim_workload_free(s->workload);
  s->workload = hooks_workload();
  return s;
}

static SimResult *
run(SimScenario *s, const char *policy)
{
  return test_evaluate(s, policy);
}

#define SYNC "kind = offload\nmode = sync\ndedup = false\n"

/* What moves, by copies and bytes, under each filter. */
START_TEST(filters_decide_what_moves)
{
  g_autoptr(SimScenario) s = scenario("[policy.default]\n" SYNC "[policy.keep-leaves]\n" SYNC "leaves = keep\n"
                                      "[policy.params]\n" SYNC "params = copy\n[policy.all]\n" SYNC "scope = all\n"
                                      "[policy.dedup]\nkind = offload\nmode = sync\ndedup = true\n[policy.big]\n" SYNC "min_tensor = 101B\n");
  g_autoptr(SimResult) def = run(s, "default");
  /* Per layer act 1000 + mask 100 + rope 2 x 50 (layer 1's rope is layer
   * 0's storage, copied again by layer 1's group): 1200 in 4 copies. */
  ck_assert_uint_eq(def->d2h_bytes, 2 * 1200);
  ck_assert_uint_eq(def->d2h_copies, 2 * 4);
  ck_assert_uint_eq(def->h2d_bytes, def->d2h_bytes);
  ck_assert_uint_eq(def->saved_bytes, 2 * 1100 + 50 + 10 + 2010);
  g_autoptr(SimResult) leaves = run(s, "keep-leaves");
  ck_assert_uint_eq(leaves->d2h_bytes, 2 * 1000);
  ck_assert_uint_eq(leaves->d2h_copies, 2);
  g_autoptr(SimResult) params = run(s, "params");
  ck_assert_uint_eq(params->d2h_bytes, 2 * (1200 + 400));
  ck_assert_uint_eq(params->d2h_copies, 2 * 5);
  /* scope = all: the embedding's ids 10 and the head's log-softmax twice and labels. */
  g_autoptr(SimResult) all = run(s, "all");
  ck_assert_uint_eq(all->d2h_bytes, 2 * 1200 + 10 + 2 * 2000 + 10);
  ck_assert_uint_eq(all->d2h_copies, 2 * 4 + 1 + 2 + 1);
  g_autoptr(SimResult) dedup = run(s, "dedup");
  ck_assert_uint_eq(dedup->d2h_bytes, 2 * (1000 + 100 + 50));
  ck_assert_uint_eq(dedup->d2h_copies, 2 * 3);
  g_autoptr(SimResult) big = run(s, "big");
  ck_assert_uint_eq(big->d2h_bytes, 2 * 1000);
}
END_TEST

/* Sync copies sit on the compute stream: the step is the compute plus
 * every copy at its rate, twice as long from pageable memory. */
START_TEST(sync_and_pageable_times)
{
  g_autoptr(SimScenario) s = scenario("[policy.pinned]\n" SYNC "scope = all\n[policy.pageable]\n" SYNC
                                      "scope = all\npinned = pageable\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) resident = run(s, "resident");
  ck_assert_close(resident->step_ms, 4 * 3.0, 1e-9);
  g_autoptr(SimResult) pinned = run(s, "pinned");
  double bytes = 2 * 1200 + 10 + 2 * 2000 + 10; /* each way */
  ck_assert_close(pinned->step_ms, 12.0 + 2 * bytes * 1e-6, 1e-9);
  g_autoptr(SimResult) pageable = run(s, "pageable");
  ck_assert_close(pageable->step_ms, 12.0 + 2 * bytes * 1e-6 / 0.5, 1e-9);
}
END_TEST

/* A mirrored parameter keeps its source (static memory) and its reloaded
 * copy is device memory while the layer's backward runs; an offloaded
 * tensor's source is freed. */
START_TEST(mirrored_parameters_keep_their_source)
{
  g_autoptr(SimScenario) s = scenario("[policy.layer0]\n" SYNC "layers = 0\n[policy.layer0-params]\n" SYNC
                                      "layers = 0\nparams = copy\nleaves = keep\n");
  g_autoptr(SimResult) plain = run(s, "layer0");
  g_autoptr(SimResult) params = run(s, "layer0-params");
  /* leaves = keep: layer 0 moves act and w; the head's backward peak
   * (everything saved but layer 0's act, mask and rope: layer 0 keeps mask
   * and rope under leaves = keep) is the same either way, since w never
   * left, and the host peak is act + w. */
  ck_assert_uint_eq(params->d2h_bytes, 1000 + 400);
  ck_assert_uint_eq(params->peak_host.bytes, 1400);
  ck_assert_uint_eq(plain->peak_host.bytes, 1000 + 100 + 100);
  gint64 all_saved = 1000000 + 10 + 2 * 1100 + 50 + 2010;
  ck_assert_int_eq(params->peak_device.bytes, all_saved - 1000);
  ck_assert_int_eq(plain->peak_device.bytes, all_saved - 1000 - 100 - 50);
  ck_assert_str_eq(params->peak_device.phase, "forward");
}
END_TEST

/* The head is needed first in backward: under scope = all, async, it is
 * reloaded at the boundary, and the embedding by layer 0's backward
 * (prefetch 1): both ways counted, the run consistent (test_evaluate checks
 * the invariants). */
START_TEST(async_scope_all_reloads_every_group)
{
  g_autoptr(SimScenario) s = scenario("[policy.async]\nkind = offload\nscope = all\nkeep_last = 0\n"
                                      "[policy.no-prefetch]\nkind = offload\nscope = all\nkeep_last = 0\nprefetch = 0\n");
  for (guint i = 0; i < 2; i++) {
    g_autoptr(SimResult) r = run(s, i ? "no-prefetch" : "async");
    ck_assert_uint_eq(r->d2h_bytes, 2 * 1150 + 10 + 2010);
    ck_assert_uint_eq(r->h2d_bytes, r->d2h_bytes);
    /* Every H2D copy of the embedding's ids starts after layer 0's backward began. */
    const SimProgram *p = r->program;
    double layer0_start = -1, ids_start = -1;
    for (guint op = 0; op < p->n_ops; op++) {
      const SimOp *o = &p->ops[op];
      const char *label = sim_program_label(p, o->label);
      if (o->kind == SIM_OP_COMPUTE && o->phase == SIM_PHASE_BACKWARD && o->layer == 0)
        layer0_start = g_array_index(r->run->op_start, double, op);
      if (o->kind == SIM_OP_COPY && o->dir == SIM_DIR_H2D && strcmp(label, "ids") == 0)
        ids_start = g_array_index(r->run->op_start, double, op);
    }
    ck_assert(layer0_start >= 0 && ids_start >= 0);
    if (i == 0)
      ck_assert(ids_start >= layer0_start && ids_start < layer0_start + 2e-3);
    else
      ck_assert(ids_start >= layer0_start + 2e-3); /* asked for when the embedding's backward is due */
  }
}
END_TEST

/* Set-to-none gradients: none at the head's backward, each group's after
 * its backward, all at the end of the step; held outputs from the head's
 * forward on; the head's backward transient. */
START_TEST(gradients_outputs_and_the_head_transient)
{
  g_autoptr(SimScenario) s = scenario("[policy.resident]\nkind = resident\n");
  SimWorkload *w = s->workload;
  gint64 saved = 10 + 1150 + 1100 + 2010; /* layer 1's rope is layer 0's */
  w->head->workspace_bytes = 3000;
  w->head->backward_workspace_bytes = 8000;
  {
    g_autoptr(SimResult) r = run(s, "resident");
    ck_assert_int_eq(r->peak_device.bytes, 1000000 + saved + 8000);
    ck_assert_str_eq(r->peak_device.phase, "backward");
    ck_assert_str_eq(r->peak_device.where, "head");
  }
  /* Outputs held: there through the head's backward. */
  w->held_bytes = 500;
  {
    g_autoptr(SimResult) r = run(s, "resident");
    ck_assert_int_eq(r->peak_device.bytes, 1000000 + saved + 8000 + 500);
  }
  /* Gradients larger than everything saved: the peak is at the end of the
   * embedding's backward, when every group's exist. */
  w->held_bytes = 0;
  sim_workload_layer(w, 0)->grad_bytes = sim_workload_layer(w, 1)->grad_bytes = 10000;
  w->head->grad_bytes = 300;
  w->embed->grad_bytes = 200;
  {
    g_autoptr(SimResult) r = run(s, "resident");
    ck_assert_int_eq(r->peak_device.bytes, 1000000 + 2 * 10000 + 300 + 200);
    ck_assert_str_eq(r->peak_device.where, "embed");
    /* and nothing is left when the step ends */
    const GArray *curve = r->run->curve;
    ck_assert(curve != NULL && curve->len > 0);
    ck_assert_int_eq(g_array_index(curve, SimMemPoint, curve->len - 1).device, 1000000);
  }
}
END_TEST

static Suite *
hooks_suite(void)
{
  Suite *s = suite_create("hooks");
  TCase *c = tcase_create("hooks");
  /* Whole models and recordings under ASan on a loaded machine: not Check's 4 s. */
  tcase_set_timeout(c, 120);
  tcase_add_test(c, filters_decide_what_moves);
  tcase_add_test(c, sync_and_pageable_times);
  tcase_add_test(c, mirrored_parameters_keep_their_source);
  tcase_add_test(c, async_scope_all_reloads_every_group);
  tcase_add_test(c, gradients_outputs_and_the_head_transient);
  suite_add_tcase(s, c);
  return s;
}

int
main(void)
{
  return test_run_suite(hooks_suite());
}
