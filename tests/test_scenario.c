/* tests/test_scenario.c — the scenario loader: includes, defaults, overrides,
 * and one test per class of bad input, each checking the pieces of the
 * one-line message (file, [group], key, what was expected). */
#include "testutil.h"

#include "base/error.h"
#include "base/units.h"
#include "input/config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#define DATA OFFSIM_TEST_DATA "/scenario"

/* Asserts that `piece` occurs in `msg`, printing the whole message if not. */
#define assert_has(msg, piece)                                                                             \
  ck_assert_msg(strstr((msg), (piece)) != NULL, "expected \"%s\" in the message: %s", (piece), (msg))

/* The minimal valid scenario, in pieces that tests recombine.  GKeyFile
 * merges a repeated group, so appending "[link]\nkey = value\n" after
 * MINIMAL adds a key to [link]. */
#define DEVICE "[device]\nmemory = 80GiB\n"
#define LINK "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"
#define MODEL "[model]\nlayers = 4\nforward = 1ms\ninput = 1MiB\ntensors = a:8MiB\n"
#define MINIMAL DEVICE LINK MODEL
/* The same with 8 layers, for layer selections. */
#define MINIMAL8 DEVICE LINK "[model]\nlayers = 8\nforward = 1ms\ninput = 1MiB\ntensors = a:8MiB\n"

/* ---- helpers -------------------------------------------------------------- */

static char *
file_error(const char *path)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(path, &error);
  ck_assert_msg(s == NULL, "%s loaded but should not have", path);
  ck_assert_msg(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT), "%s: wrong error domain or code", path);
  ck_assert_msg(strchr(error->message, '\n') == NULL, "not one line: %s", error->message);
  return g_strdup(error->message);
}

static SimScenario *
file_ok(const char *path)
{
  g_autoptr(GError) error = NULL;
  SimScenario *s = sim_scenario_load_file(path, &error);
  ck_assert_msg(s != NULL, "%s did not load: %s", path, error ? error->message : "?");
  return s;
}

/* test_scenario_error plus the one-line rule of error.h. */
static char *
text_error(const char *text)
{
  char *msg = test_scenario_error(text);
  ck_assert_msg(strchr(msg, '\n') == NULL, "not one line: %s", msg);
  return msg;
}

/* text_error of `base` with `overrides` set in it. */
static char *
override_error(const char *base, const char *overrides)
{
  g_autofree char *text = test_ini_merge(base, overrides);
  return text_error(text);
}

static char *
write_file(const char *dir, const char *name, const char *data, gssize len)
{
  char *path = g_build_filename(dir, name, NULL);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(g_file_set_contents(path, data, len, &error), "cannot write %s: %s", path,
                error ? error->message : "?");
  return path;
}

/* Writes chain-00.ini ... chain-(n-1).ini, each including the next; the last
 * holds the minimal scenario.  Returns the path of chain-00.ini. */
static char *
write_chain(const char *dir, guint n)
{
  char *first = NULL;
  for (guint i = 0; i < n; i++) {
    g_autofree char *name = g_strdup_printf("chain-%02u.ini", i);
    g_autofree char *text = i + 1 < n ? g_strdup_printf("[scenario]\ninclude = chain-%02u.ini\n", i + 1)
                                      : g_strdup(MINIMAL);
    char *path = write_file(dir, name, text, -1);
    if (i == 0)
      first = path;
    else
      g_free(path);
  }
  return first;
}

static const SimPolicy *
policy(const SimScenario *s, const char *name)
{
  const SimPolicy *p = sim_scenario_policy(s, name);
  ck_assert_msg(p != NULL, "no policy %s", name);
  return p;
}

/* Asserts p->selected against a string of '1' and '0', one per layer. */
static void
assert_selected(const SimPolicy *p, const char *expected)
{
  ck_assert_ptr_nonnull(p->selected);
  ck_assert_uint_eq(p->selected->len, strlen(expected));
  for (guint i = 0; i < p->selected->len; i++)
    ck_assert_msg(g_array_index(p->selected, gboolean, i) == (expected[i] == '1'),
                  "policy %s: layer %u selected = %d, expected %c (pattern %s)", p->name, i,
                  g_array_index(p->selected, gboolean, i), expected[i], expected);
}

/* ---- loading what is valid ------------------------------------------------ */

START_TEST(test_minimal_loads)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(MINIMAL);
  ck_assert_str_eq(s->name, "test"); /* the origin's base name without ".ini" */
  ck_assert_str_eq(s->origin, "test.ini");
  ck_assert_uint_eq(s->machine.device.memory, 85899345920ULL);
  ck_assert_double_eq(s->machine.link.h2d_bandwidth, 50e9);
  ck_assert_double_eq(s->machine.link.d2h_bandwidth, 50e9);
  ck_assert_uint_eq(sim_workload_n_layers(s->workload), 4);
  for (guint i = 0; i < 4; i++) {
    const SimLayer *l = sim_workload_layer(s->workload, i);
    ck_assert_close(l->forward, 1e-3, 1e-15);
    ck_assert_uint_eq(l->input_bytes, 1048576);
    ck_assert_uint_eq(l->tensors->len, 1);
    ck_assert_str_eq(g_array_index(l->tensors, SimTensor, 0).name, "a");
    ck_assert_uint_eq(g_array_index(l->tensors, SimTensor, 0).bytes, 8388608);
    ck_assert(g_array_index(l->tensors, SimTensor, 0).offloadable);
  }
}
END_TEST

START_TEST(test_tensor_keep_flag)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(DEVICE LINK
                                                     "[model]\nlayers = 2\nforward = 1ms\ninput = 1MiB\n"
                                                     "tensors = attn:24MiB, mask:1MiB:keep\n");
  const SimLayer *l = sim_workload_layer(s->workload, 1);
  ck_assert_uint_eq(l->tensors->len, 2);
  ck_assert_str_eq(g_array_index(l->tensors, SimTensor, 0).name, "attn");
  ck_assert_uint_eq(g_array_index(l->tensors, SimTensor, 0).bytes, 25165824);
  ck_assert(g_array_index(l->tensors, SimTensor, 0).offloadable);
  ck_assert_str_eq(g_array_index(l->tensors, SimTensor, 1).name, "mask");
  ck_assert(!g_array_index(l->tensors, SimTensor, 1).offloadable);
}
END_TEST

START_TEST(test_include_merge)
{
  /* merged.ini includes base.ini then override.ini, then sets its own keys. */
  g_autoptr(SimScenario) s = file_ok(DATA "/merged.ini");
  ck_assert_str_eq(s->name, "merged");
  /* merged.ini's own key wins over base.ini's 50GB/s. */
  ck_assert_double_eq(s->machine.link.h2d_bandwidth, 20e9);
  /* The later include (override.ini) wins over the earlier (base.ini). */
  ck_assert_double_eq(s->machine.link.d2h_bandwidth, 30e9);
  /* Keys only in base.ini are used. */
  ck_assert_close(s->machine.link.latency, 8e-6, 1e-18);
  ck_assert_uint_eq(s->machine.device.memory, 85899345920ULL);
  ck_assert_uint_eq(sim_workload_n_layers(s->workload), 4);
  ck_assert_uint_eq(sim_workload_layer(s->workload, 0)->input_bytes, 1048576);
  ck_assert_close(sim_workload_layer(s->workload, 0)->forward, 3e-3, 1e-15);
  /* bidir_bandwidth defaults to the merged directions, 20 + 30. */
  ck_assert_double_eq(s->machine.link.bidir_bandwidth, 50e9);
}
END_TEST

START_TEST(test_include_relative_to_including_file)
{
  /* nested.ini includes sub/mid.ini, which includes ../base.ini: the latter
   * resolves against sub/, whatever the current directory is. */
  g_autoptr(SimScenario) s = file_ok(DATA "/nested.ini");
  ck_assert_close(s->machine.link.latency, 5e-6, 1e-18);
  ck_assert_double_eq(s->machine.link.h2d_bandwidth, 50e9);
  ck_assert_uint_eq(sim_workload_n_layers(s->workload), 4);
  ck_assert_str_eq(s->name, "base"); /* [scenario] name from base.ini */
}
END_TEST

START_TEST(test_include_chain_of_ten)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *first = write_chain(dir, 10);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(first, &error);
  ck_assert_msg(s != NULL, "a chain of 10 includes did not load: %s", error ? error->message : "?");
  ck_assert_uint_eq(sim_workload_n_layers(s->workload), 4);
  ck_assert_str_eq(s->name, "chain-00");
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(test_layer_override)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(MINIMAL "[layer.3]\nforward = 3ms\n");
  for (guint i = 0; i < 3; i++) {
    const SimLayer *l = sim_workload_layer(s->workload, i);
    ck_assert_close(l->forward, 1e-3, 1e-15);
    ck_assert_close(l->backward, 2e-3, 1e-15); /* 2x forward without [model] backward */
  }
  const SimLayer *l3 = sim_workload_layer(s->workload, 3);
  ck_assert_close(l3->forward, 3e-3, 1e-15);
  ck_assert_close(l3->backward, 6e-3, 1e-15); /* 2x its own forward, not the model's */
  ck_assert_uint_eq(l3->input_bytes, 1048576);
  ck_assert_uint_eq(g_array_index(l3->tensors, SimTensor, 0).bytes, 8388608);
}
END_TEST

START_TEST(test_layer_override_explicit_backward)
{
  /* With [model] backward, an overridden forward leaves backward alone. */
  g_autoptr(SimScenario) s = test_scenario_merged(MINIMAL, "[model]\nbackward = 5ms\n[layer.3]\nforward = 3ms\n"
                                                             "[layer.1]\nbackward = 7ms\n");
  ck_assert_close(sim_workload_layer(s->workload, 0)->backward, 5e-3, 1e-15);
  ck_assert_close(sim_workload_layer(s->workload, 1)->backward, 7e-3, 1e-15);
  ck_assert_close(sim_workload_layer(s->workload, 1)->forward, 1e-3, 1e-15);
  ck_assert_close(sim_workload_layer(s->workload, 3)->forward, 3e-3, 1e-15);
  ck_assert_close(sim_workload_layer(s->workload, 3)->backward, 5e-3, 1e-15);
}
END_TEST

START_TEST(test_layer_override_tensors)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(MINIMAL "[layer.2]\ntensors = b:1MiB, c:2MiB\ninput = 0\n");
  const SimLayer *l2 = sim_workload_layer(s->workload, 2);
  ck_assert_uint_eq(l2->tensors->len, 2);
  ck_assert_str_eq(g_array_index(l2->tensors, SimTensor, 1).name, "c");
  ck_assert_uint_eq(g_array_index(l2->tensors, SimTensor, 1).bytes, 2097152);
  ck_assert_uint_eq(l2->input_bytes, 0);
  for (guint i = 0; i < 4; i++) {
    if (i == 2)
      continue;
    const SimLayer *l = sim_workload_layer(s->workload, i);
    ck_assert_uint_eq(l->tensors->len, 1);
    ck_assert_str_eq(g_array_index(l->tensors, SimTensor, 0).name, "a");
    ck_assert_uint_eq(l->input_bytes, 1048576);
  }
}
END_TEST

START_TEST(test_layer_selection)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(MINIMAL8
                                                     "[policy.ranges]\nkind = offload\nlayers = 0-2,5\n"
                                                     "[policy.first]\nkind = offload\nlayers = first:3\n"
                                                     "[policy.last]\nkind = checkpoint\nlayers = last:2\n"
                                                     "[policy.list]\nkind = offload\nlayers = 7, 1 ,3\n"
                                                     "[policy.none]\nkind = offload\nlayers = none\n"
                                                     "[policy.all]\nkind = offload\nlayers = all\n"
                                                     "[policy.unset]\nkind = offload\n");
  assert_selected(policy(s, "ranges"), "11100100");
  assert_selected(policy(s, "first"), "11100000");
  assert_selected(policy(s, "last"), "00000011");
  assert_selected(policy(s, "list"), "01010001");
  assert_selected(policy(s, "none"), "00000000");
  assert_selected(policy(s, "all"), "11111111");
  ck_assert_ptr_null(policy(s, "unset")->selected); /* NULL means all */
}
END_TEST

START_TEST(test_default_policy_set)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(MINIMAL);
  static const char *const names[] = { "resident", "offload-sync", "offload-async", "checkpoint-full" };
  static const SimPolicyKind kinds[] = { SIM_POLICY_RESIDENT, SIM_POLICY_OFFLOAD, SIM_POLICY_OFFLOAD,
                                         SIM_POLICY_CHECKPOINT };
  ck_assert_uint_eq(s->policies->len, 4);
  for (guint i = 0; i < 4; i++) {
    const SimPolicy *p = g_ptr_array_index(s->policies, i);
    ck_assert_str_eq(p->name, names[i]);
    ck_assert_int_eq(p->kind, kinds[i]);
  }
  ck_assert(!policy(s, "offload-sync")->async);
  ck_assert(policy(s, "offload-async")->async);
}
END_TEST

START_TEST(test_policies_in_file_order_replace_defaults)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(MINIMAL "[policy.zeta]\nkind = resident\n"
                                                             "[policy.alpha]\nkind = checkpoint\nevery = 2\n");
  ck_assert_uint_eq(s->policies->len, 2);
  ck_assert_str_eq(((SimPolicy *)g_ptr_array_index(s->policies, 0))->name, "zeta");
  ck_assert_str_eq(((SimPolicy *)g_ptr_array_index(s->policies, 1))->name, "alpha");
  ck_assert_uint_eq(policy(s, "alpha")->every, 2);
  ck_assert_ptr_null(sim_scenario_policy(s, "resident"));
}
END_TEST

START_TEST(test_keep_last_defaults)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(MINIMAL "[policy.sync]\nkind = offload\nmode = sync\n"
                                                             "[policy.async]\nkind = offload\nmode = async\n"
                                                             "[policy.unmoded]\nkind = offload\n"
                                                             "[policy.sync3]\nkind = offload\nmode = sync\nkeep_last = 3\n"
                                                             "[policy.async0]\nkind = offload\nkeep_last = 0\n");
  ck_assert(!policy(s, "sync")->async);
  ck_assert_uint_eq(policy(s, "sync")->keep_last, 0);
  ck_assert(policy(s, "async")->async);
  ck_assert_uint_eq(policy(s, "async")->keep_last, 1);
  ck_assert(policy(s, "unmoded")->async); /* mode defaults to async */
  ck_assert_uint_eq(policy(s, "unmoded")->keep_last, 1);
  ck_assert_uint_eq(policy(s, "sync3")->keep_last, 3);
  ck_assert_uint_eq(policy(s, "async0")->keep_last, 0);
}
END_TEST

START_TEST(test_policy_options)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(MINIMAL "[policy.x]\nkind = offload\nprefetch = 3\ninflight = 4\n"
                                                             "min_tensor = 2MiB\npinned = per-tensor\n"
                                                             "[policy.h]\nkind = plan\n"
                                                             "actions = keep, offload, recompute, keep\npinned = pageable\n");
  const SimPolicy *x = policy(s, "x");
  ck_assert_uint_eq(x->prefetch, 3);
  ck_assert_uint_eq(x->inflight, 4);
  ck_assert_uint_eq(x->min_tensor, 2097152);
  ck_assert_int_eq(x->pinned, SIM_PINNED_PER_TENSOR);
  const SimPolicy *h = policy(s, "h");
  ck_assert_int_eq(h->kind, SIM_POLICY_PLAN);
  ck_assert_int_eq(h->pinned, SIM_PINNED_PAGEABLE);
  ck_assert_ptr_nonnull(h->actions);
  ck_assert_uint_eq(h->actions->len, 4);
  ck_assert_int_eq(g_array_index(h->actions, SimAction, 0), SIM_ACTION_KEEP);
  ck_assert_int_eq(g_array_index(h->actions, SimAction, 1), SIM_ACTION_OFFLOAD);
  ck_assert_int_eq(g_array_index(h->actions, SimAction, 2), SIM_ACTION_RECOMPUTE);
  ck_assert_int_eq(g_array_index(h->actions, SimAction, 3), SIM_ACTION_KEEP);
}
END_TEST

START_TEST(test_bidir_default_is_sum)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(DEVICE MODEL "[link]\nh2d_bandwidth = 50GB/s\n"
                                                                  "d2h_bandwidth = 30GB/s\n");
  ck_assert_double_eq(s->machine.link.bidir_bandwidth, 80e9);
  g_autoptr(SimScenario) given = test_scenario_merged(MINIMAL, "[link]\nbidir_bandwidth = 90GB/s\n");
  ck_assert_double_eq(given->machine.link.bidir_bandwidth, 90e9);
}
END_TEST

START_TEST(test_link_and_device_keys)
{
  g_autoptr(SimScenario) s = test_scenario_merged(MINIMAL, "[device]\nmatmul_tflops = 790\nhbm_bandwidth = 3.35TB/s\n"
                                                             "[link]\nlatency = 8us\npageable_factor = 0.5\n"
                                                             "compute_slowdown = 0.03\nhost_alloc = 3ms\n");
  ck_assert_close(s->machine.device.matmul_flops, 790e12, 1);
  ck_assert_close(s->machine.device.hbm_bandwidth, 3.35e12, 1);
  ck_assert_close(s->machine.link.latency, 8e-6, 1e-18);
  ck_assert_double_eq(s->machine.link.pageable_factor, 0.5);
  ck_assert_close(s->machine.link.compute_slowdown, 0.03, 1e-15);
  ck_assert_close(s->machine.link.host_alloc, 3e-3, 1e-15);
}
END_TEST

/* [scenario] step: steady unless said (SimLink.first_step); a value that is
 * neither is a one-line input error naming the file, the group and the key. */
START_TEST(test_scenario_step)
{
  g_autoptr(SimScenario) steady = test_scenario_from_text(MINIMAL);
  ck_assert(!steady->machine.link.first_step);
  g_autoptr(SimScenario) first = test_scenario_from_text("[scenario]\nstep = first\n" MINIMAL);
  ck_assert(first->machine.link.first_step);
  g_autoptr(SimScenario) said = test_scenario_from_text("[scenario]\nstep = steady\n" MINIMAL);
  ck_assert(!said->machine.link.first_step);
  g_autofree char *msg = text_error("[scenario]\nstep = second\n" MINIMAL);
  assert_has(msg, "test.ini: [scenario] step: ");
  assert_has(msg, "steady, first");
  assert_has(msg, "'second'");
}
END_TEST

START_TEST(test_embedded_default)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_default(&error);
  ck_assert_msg(s != NULL, "the embedded default did not load: %s", error ? error->message : "?");
  ck_assert_uint_eq(sim_workload_n_layers(s->workload), 24);
  ck_assert_str_eq(s->origin, "(embedded default)");
  ck_assert_ptr_nonnull(sim_scenario_default_text());
  ck_assert_ptr_nonnull(strstr(sim_scenario_default_text(), "[transformer]"));
  ck_assert_ptr_nonnull(s->workload->head); /* generated: it has a loss head */
  ck_assert_uint_ge(s->policies->len, 1);
}
END_TEST

/* ---- bad input: groups and keys ------------------------------------------- */

START_TEST(test_unknown_group)
{
  g_autofree char *msg = text_error(MINIMAL "[bogus]\nx = 1\n");
  assert_has(msg, "test.ini: [bogus]");
  assert_has(msg, "unknown group");
  assert_has(msg, "policy.NAME"); /* what was expected */
}
END_TEST

START_TEST(test_unknown_group_empty)
{
  /* A misspelled group with no keys is still an error, e.g. [modle]. */
  g_autofree char *msg = text_error(MINIMAL "[modle]\n");
  assert_has(msg, "test.ini: [modle]");
  assert_has(msg, "unknown group");
}
END_TEST

START_TEST(test_unknown_key_link)
{
  g_autofree char *msg = override_error(MINIMAL, "[link]\nspeed = 1GB/s\n");
  assert_has(msg, "test.ini: [link] speed: ");
  assert_has(msg, "unknown key");
  assert_has(msg, "h2d_bandwidth"); /* the keys it expected */
  assert_has(msg, "host_alloc");
}
END_TEST

START_TEST(test_unknown_key_model)
{
  g_autofree char *msg = override_error(MINIMAL, "[model]\nbackwards = 2ms\n");
  assert_has(msg, "test.ini: [model] backwards: ");
  assert_has(msg, "unknown key");
  assert_has(msg, "backward,");
}
END_TEST

START_TEST(test_unknown_key_device_and_scenario)
{
  g_autofree char *dev = override_error(MINIMAL, "[device]\nmemroy = 8GiB\n");
  assert_has(dev, "test.ini: [device] memroy: ");
  assert_has(dev, "unknown key");
  g_autofree char *scn = text_error("[scenario]\ntitle = x\n" MINIMAL);
  assert_has(scn, "test.ini: [scenario] title: ");
  assert_has(scn, "unknown key");
}
END_TEST

START_TEST(test_unknown_key_policy)
{
  g_autofree char *msg = text_error(MINIMAL "[policy.x]\nkind = offload\nprefetchh = 2\n");
  assert_has(msg, "test.ini: [policy.x] prefetchh: ");
  assert_has(msg, "unknown key");
  assert_has(msg, "prefetch");
}
END_TEST

START_TEST(test_unknown_key_layer)
{
  g_autofree char *msg = text_error(MINIMAL "[layer.1]\nstatic = 1GiB\n");
  assert_has(msg, "test.ini: [layer.1] static: ");
  assert_has(msg, "unknown key");
  assert_has(msg, "forward"); /* the keys a layer takes */
}
END_TEST

START_TEST(test_bad_layer_group_name)
{
  g_autofree char *msg = text_error(MINIMAL "[layer.x]\nforward = 1ms\n");
  assert_has(msg, "test.ini: [layer.x]");
  assert_has(msg, "layer.N");
  g_autofree char *neg = text_error(MINIMAL "[layer.-1]\nforward = 1ms\n");
  assert_has(neg, "test.ini: [layer.-1]");
}
END_TEST

START_TEST(test_missing_model_keys)
{
  g_autofree char *layers = text_error(DEVICE LINK "[model]\nforward = 1ms\ninput = 1MiB\ntensors = a:8MiB\n");
  assert_has(layers, "test.ini: [model] layers: ");
  assert_has(layers, "missing required key");
  assert_has(layers, "layer count");
  g_autofree char *forward = text_error(DEVICE LINK "[model]\nlayers = 4\ninput = 1MiB\ntensors = a:8MiB\n");
  assert_has(forward, "test.ini: [model] forward: ");
  assert_has(forward, "missing required key");
  assert_has(forward, "a time");
  g_autofree char *input = text_error(DEVICE LINK "[model]\nlayers = 4\nforward = 1ms\ntensors = a:8MiB\n");
  assert_has(input, "test.ini: [model] input: ");
  assert_has(input, "missing required key");
  assert_has(input, "a size");
  g_autofree char *tensors = text_error(DEVICE LINK "[model]\nlayers = 4\nforward = 1ms\ninput = 1MiB\n");
  assert_has(tensors, "test.ini: [model] tensors: ");
  assert_has(tensors, "missing required key");
  assert_has(tensors, "attn:24MiB");
}
END_TEST

START_TEST(test_missing_model_group)
{
  g_autofree char *msg = text_error(DEVICE LINK);
  assert_has(msg, "test.ini: [model] layers: ");
  assert_has(msg, "missing required key");
}
END_TEST

START_TEST(test_missing_device_memory)
{
  g_autofree char *nogroup = text_error(LINK MODEL);
  assert_has(nogroup, "test.ini: [device] memory: ");
  assert_has(nogroup, "missing required key");
  assert_has(nogroup, "80GiB");
  g_autofree char *nokey = text_error("[device]\nmatmul_tflops = 790\n" LINK MODEL);
  assert_has(nokey, "test.ini: [device] memory: ");
  assert_has(nokey, "missing required key");
}
END_TEST

START_TEST(test_missing_link_bandwidth)
{
  g_autofree char *h2d = text_error(DEVICE MODEL "[link]\nd2h_bandwidth = 50GB/s\n");
  assert_has(h2d, "test.ini: [link] h2d_bandwidth: ");
  assert_has(h2d, "missing required key");
  assert_has(h2d, "a rate");
  g_autofree char *d2h = text_error(DEVICE MODEL "[link]\nh2d_bandwidth = 50GB/s\n");
  assert_has(d2h, "test.ini: [link] d2h_bandwidth: ");
  g_autofree char *nogroup = text_error(DEVICE MODEL);
  assert_has(nogroup, "test.ini: [link] h2d_bandwidth: ");
}
END_TEST

START_TEST(test_missing_policy_kind)
{
  g_autofree char *msg = text_error(MINIMAL "[policy.x]\nmode = sync\n");
  assert_has(msg, "test.ini: [policy.x] kind: ");
  assert_has(msg, "missing required key");
  assert_has(msg, "resident, offload, checkpoint or plan");
  g_autofree char *empty = text_error(MINIMAL "[policy.empty]\n");
  assert_has(empty, "test.ini: [policy.empty] kind: ");
}
END_TEST

START_TEST(test_plan_without_actions)
{
  g_autofree char *msg = text_error(MINIMAL "[policy.h]\nkind = plan\nprefetch = 1\n");
  assert_has(msg, "test.ini: [policy.h] actions: ");
  assert_has(msg, "missing required key");
  assert_has(msg, "keep, offload, recompute");
}
END_TEST

/* ---- bad input: values ---------------------------------------------------- */

START_TEST(test_negative_size)
{
  g_autofree char *msg = override_error(MINIMAL, "[model]\ninput = -1MiB\n");
  assert_has(msg, "test.ini: [model] input: ");
  assert_has(msg, "non-negative");
  assert_has(msg, "'-1MiB'");
  g_autofree char *tensor = override_error(MINIMAL, "[model]\ntensors = a:-8MiB\n");
  assert_has(tensor, "test.ini: [model] tensors: ");
  assert_has(tensor, "tensor 'a'");
  assert_has(tensor, "non-negative");
}
END_TEST

START_TEST(test_non_numeric_size)
{
  g_autofree char *msg = text_error("[device]\nmemory = lots\n" LINK MODEL);
  assert_has(msg, "test.ini: [device] memory: ");
  assert_has(msg, "expected a number");
  assert_has(msg, "'lots'");
}
END_TEST

START_TEST(test_unknown_unit)
{
  g_autofree char *msg = override_error(MINIMAL, "[model]\nworkspace = 64XB\n");
  assert_has(msg, "test.ini: [model] workspace: ");
  assert_has(msg, "expected a size with a unit");
  assert_has(msg, "'64XB'");
  g_autofree char *time = override_error(MINIMAL, "[link]\nlatency = 8 minutes\n");
  assert_has(time, "test.ini: [link] latency: ");
  assert_has(time, "expected a time with a unit");
  g_autofree char *bare = override_error(MINIMAL, "[model]\nstatic = 8\n");
  assert_has(bare, "test.ini: [model] static: ");
  assert_has(bare, "with a unit");
}
END_TEST

START_TEST(test_zero_bandwidth)
{
  g_autofree char *msg = text_error(DEVICE MODEL "[link]\nh2d_bandwidth = 0GB/s\nd2h_bandwidth = 50GB/s\n");
  assert_has(msg, "test.ini: [link] h2d_bandwidth: ");
  assert_has(msg, "positive");
  assert_has(msg, "'0GB/s'");
  g_autofree char *bidir = override_error(MINIMAL, "[link]\nbidir_bandwidth = 0GB/s\n");
  assert_has(bidir, "test.ini: [link] bidir_bandwidth: ");
  assert_has(bidir, "positive");
}
END_TEST

START_TEST(test_bad_numbers)
{
  g_autofree char *pf = override_error(MINIMAL, "[link]\npageable_factor = 1.5\n");
  assert_has(pf, "test.ini: [link] pageable_factor: ");
  assert_has(pf, "(0, 1]");
  assert_has(pf, "'1.5'");
  g_autofree char *zero = override_error(MINIMAL, "[link]\npageable_factor = 0\n");
  assert_has(zero, "[link] pageable_factor: ");
  g_autofree char *cs = override_error(MINIMAL, "[link]\ncompute_slowdown = 1\n");
  assert_has(cs, "test.ini: [link] compute_slowdown: ");
  assert_has(cs, "[0, 1)");
  g_autofree char *tf = override_error(MINIMAL, "[device]\nmatmul_tflops = -5\n");
  assert_has(tf, "test.ini: [device] matmul_tflops: ");
  g_autofree char *nan = override_error(MINIMAL, "[device]\nmatmul_tflops = nan\n");
  assert_has(nan, "test.ini: [device] matmul_tflops: ");
}
END_TEST

START_TEST(test_bad_layer_count)
{
  g_autofree char *zero = text_error(DEVICE LINK "[model]\nlayers = 0\nforward = 1ms\ninput = 1MiB\ntensors = a:1MiB\n");
  assert_has(zero, "test.ini: [model] layers: ");
  assert_has(zero, "'0'");
  g_autofree char *huge = text_error(DEVICE LINK "[model]\nlayers = 1000000000\nforward = 1ms\ninput = 1MiB\n"
                                                 "tensors = a:1MiB\n");
  assert_has(huge, "test.ini: [model] layers: ");
  assert_has(huge, "1000000");
  g_autofree char *word = text_error(DEVICE LINK "[model]\nlayers = four\nforward = 1ms\ninput = 1MiB\n"
                                                 "tensors = a:1MiB\n");
  assert_has(word, "'four'");
}
END_TEST

START_TEST(test_unknown_policy_kind)
{
  g_autofree char *msg = text_error(MINIMAL "[policy.x]\nkind = magic\n");
  assert_has(msg, "test.ini: [policy.x] kind: ");
  assert_has(msg, "resident, offload, checkpoint, plan");
  assert_has(msg, "'magic'");
}
END_TEST

START_TEST(test_unknown_option_value)
{
  g_autofree char *mode = text_error(MINIMAL "[policy.x]\nkind = offload\nmode = turbo\n");
  assert_has(mode, "test.ini: [policy.x] mode: ");
  assert_has(mode, "sync, async");
  assert_has(mode, "'turbo'");
  g_autofree char *pinned = text_error(MINIMAL "[policy.x]\nkind = offload\npinned = maybe\n");
  assert_has(pinned, "test.ini: [policy.x] pinned: ");
  assert_has(pinned, "pooled, per-tensor, pageable");
  assert_has(pinned, "'maybe'");
  g_autofree char *prefetch = text_error(MINIMAL "[policy.x]\nkind = offload\nprefetch = -1\n");
  assert_has(prefetch, "test.ini: [policy.x] prefetch: ");
  assert_has(prefetch, "'-1'");
  g_autofree char *inflight = text_error(MINIMAL "[policy.x]\nkind = offload\ninflight = 0\n");
  assert_has(inflight, "test.ini: [policy.x] inflight: ");
  assert_has(inflight, "from 1");
  g_autofree char *every = text_error(MINIMAL "[policy.x]\nkind = checkpoint\nevery = 0\n");
  assert_has(every, "test.ini: [policy.x] every: ");
}
END_TEST

START_TEST(test_option_of_another_kind)
{
  g_autofree char *every = text_error(MINIMAL "[policy.x]\nkind = offload\nevery = 2\n");
  assert_has(every, "test.ini: [policy.x] every: ");
  assert_has(every, "not an option of kind = offload");
  assert_has(every, "keep_last"); /* lists what offload takes */
  g_autofree char *mode = text_error(MINIMAL "[policy.r]\nkind = resident\nmode = sync\n");
  assert_has(mode, "test.ini: [policy.r] mode: ");
  assert_has(mode, "not an option of kind = resident");
  assert_has(mode, "(its options: stages)"); /* every kind's, and resident's only */
  g_autofree char *actions = text_error(MINIMAL "[policy.c]\nkind = checkpoint\nactions = keep,keep,keep,keep\n");
  assert_has(actions, "test.ini: [policy.c] actions: ");
  assert_has(actions, "not an option of kind = checkpoint");
  g_autofree char *keep_last = text_error(MINIMAL "[policy.h]\nkind = plan\nactions = keep,keep,keep,keep\n"
                                                  "keep_last = 1\n");
  assert_has(keep_last, "test.ini: [policy.h] keep_last: ");
  assert_has(keep_last, "not an option of kind = plan");
}
END_TEST

START_TEST(test_layer_index_out_of_range)
{
  g_autofree char *msg = text_error(MINIMAL "[layer.4]\nforward = 2ms\n");
  assert_has(msg, "test.ini: [layer.4]");
  assert_has(msg, "out of range");
  assert_has(msg, "4 layers");
  assert_has(msg, "0-3");
  g_autofree char *huge = text_error(MINIMAL "[layer.99999999999]\nforward = 2ms\n");
  assert_has(huge, "test.ini: [layer.99999999999]");
}
END_TEST

START_TEST(test_policy_layers_out_of_range)
{
  g_autofree char *msg = text_error(MINIMAL "[policy.x]\nkind = offload\nlayers = 0-7\n");
  assert_has(msg, "test.ini: [policy.x] layers: ");
  assert_has(msg, "layer 7 is out of range");
  assert_has(msg, "0-3");
  g_autofree char *single = text_error(MINIMAL "[policy.x]\nkind = checkpoint\nlayers = 1,4\n");
  assert_has(single, "test.ini: [policy.x] layers: ");
  assert_has(single, "layer 4 is out of range");
  g_autofree char *first = text_error(MINIMAL "[policy.x]\nkind = offload\nlayers = first:5\n");
  assert_has(first, "test.ini: [policy.x] layers: ");
  assert_has(first, "first:N");
  assert_has(first, "'first:5'");
  g_autofree char *last = text_error(MINIMAL "[policy.x]\nkind = offload\nlayers = last:9\n");
  assert_has(last, "last:N");
}
END_TEST

START_TEST(test_policy_layers_malformed)
{
  g_autofree char *backwards = text_error(MINIMAL "[policy.x]\nkind = offload\nlayers = 3-1\n");
  assert_has(backwards, "test.ini: [policy.x] layers: ");
  assert_has(backwards, "'3-1'");
  g_autofree char *word = text_error(MINIMAL "[policy.x]\nkind = offload\nlayers = some\n");
  assert_has(word, "test.ini: [policy.x] layers: ");
  assert_has(word, "first:N");
  g_autofree char *empty_item = text_error(MINIMAL "[policy.x]\nkind = offload\nlayers = 0,,2\n");
  assert_has(empty_item, "test.ini: [policy.x] layers: ");
}
END_TEST

START_TEST(test_plan_wrong_action_count)
{
  g_autofree char *few = text_error(MINIMAL "[policy.h]\nkind = plan\nactions = keep, offload\n");
  assert_has(few, "test.ini: [policy.h] actions: ");
  assert_has(few, "one action per layer (4)");
  assert_has(few, "got 2");
  g_autofree char *many = text_error(MINIMAL "[policy.h]\nkind = plan\nactions = keep,keep,keep,keep,keep\n");
  assert_has(many, "one action per layer (4)");
  assert_has(many, "got 5");
  g_autofree char *bad = text_error(MINIMAL "[policy.h]\nkind = plan\nactions = keep, offload, swap, keep\n");
  assert_has(bad, "test.ini: [policy.h] actions: ");
  assert_has(bad, "layer 2");
  assert_has(bad, "'swap'");
}
END_TEST

START_TEST(test_duplicate_tensor_names)
{
  g_autofree char *msg = override_error(MINIMAL, "[model]\ntensors = a:8MiB, b:1MiB, a:4MiB\n");
  assert_has(msg, "test.ini: [model] tensors: ");
  assert_has(msg, "'a'");
  assert_has(msg, "twice");
  g_autofree char *layer = text_error(MINIMAL "[layer.2]\ntensors = q:1MiB, q:1MiB\n");
  assert_has(layer, "test.ini: [layer.2] tensors: ");
  assert_has(layer, "'q'");
}
END_TEST

START_TEST(test_malformed_tensors)
{
  g_autofree char *nosize = override_error(MINIMAL, "[model]\ntensors = a\n");
  assert_has(nosize, "test.ini: [model] tensors: ");
  assert_has(nosize, "name:size");
  g_autofree char *flag = override_error(MINIMAL, "[model]\ntensors = a:1MiB:pin\n");
  assert_has(flag, "keep, recompute=TIME or refs=N");
  assert_has(flag, "'pin'");
  g_autofree char *refs = override_error(MINIMAL, "[model]\ntensors = a:1MiB:refs=0\n");
  assert_has(refs, "'refs=0'");
  g_autofree char *cost = override_error(MINIMAL, "[model]\ntensors = a:1MiB:recompute=fast\n");
  assert_has(cost, "tensor 'a': expected a number with a unit, got 'fast'");
  g_autofree char *noname = override_error(MINIMAL, "[model]\ntensors = :1MiB\n");
  assert_has(noname, "needs a name");
  g_autofree char *empty = override_error(MINIMAL, "[model]\ntensors = a:1MiB,,b:1MiB\n");
  assert_has(empty, "empty item");
}
END_TEST

/* What a message echoes of a file is quoted: control bytes escaped (an ESC
 * used to reach the terminal raw), long text cut with "…" (a 5 MB key used
 * to make a 5 MB line), UTF-8 kept. */
START_TEST(test_messages_quote_what_they_echo)
{
  g_autofree char *esc = text_error(DEVICE LINK "latency = 1\x1b]0;owned\x07us\n" MODEL);
  assert_has(esc, "test.ini: [link] latency: expected a time with a unit (s, ms, us, ns), got '1\\x1b]0;owned\\x07us'");
  g_autofree char *key = text_error(DEVICE "me\x1b]0;owned\x07mory = 1\n" LINK MODEL);
  assert_has(key, "test.ini: not a valid scenario file: Invalid key name: me\\x1b]0;owned\\x07mory");
  g_autofree char *c1 = text_error(DEVICE LINK "latency = 1\xc2\x9b" "2Jus\n" MODEL);
  assert_has(c1, "got '1\\u009b2Jus'");
  g_autofree char *long_key = g_strnfill(5 << 20, 'k');
  g_autofree char *text = g_strdup_printf(DEVICE LINK "%s = 1\n" MODEL, long_key);
  g_autofree char *cut = text_error(text);
  g_autofree char *head = g_strnfill(SIM_ERROR_QUOTE_MAX, 'k');
  g_autofree char *expect = g_strdup_printf("test.ini: [link] %s…: unknown key", head);
  assert_has(cut, expect);
  ck_assert_uint_lt(strlen(cut), 2000);
  /* A value a parser echoes, a tensor's name and size, a policy's layers, a group. */
  g_autofree char *long_value = g_strnfill(1 << 20, '9');
  const char *const overrides[] = { "[link]\nlatency = %sxs\n", "[model]\ntensors = %s:1MiB:bad\n",
                                    "[model]\ntensors = a:%s\n", "[policy.p]\nkind = offload\nlayers = 1-%sx\n",
                                    "[policy.%s]\n" };
  for (guint i = 0; i < G_N_ELEMENTS(overrides); i++) {
    g_autofree char *o = g_strdup_printf(overrides[i], long_value);
    g_autofree char *msg = override_error(MINIMAL, o);
    ck_assert_msg(strlen(msg) < 2000, "case %u: %zu bytes: %.200s", i, strlen(msg), msg);
    assert_has(msg, "…");
  }
  g_autofree char *micro = override_error(MINIMAL, "[link]\nlatency = 2μs\n");
  assert_has(micro, "got '2μs'");
  /* The same in a group given twice, a locale key and a key file GKeyFile refuses. */
  g_autofree char *twice = text_error(MINIMAL "[policy.\x1b[2J]\nkind = resident\n[policy.\x1b[2J]\n");
  assert_has(twice, "[policy.\\x1b[2J]: the group is given twice");
  g_autofree char *bad_line = g_strdup_printf(MINIMAL "%s\x1b\n", long_value);
  g_autofree char *syntax = text_error(bad_line);
  assert_has(syntax, "not a valid scenario file: ");
  assert_has(syntax, "…");
  ck_assert_uint_lt(strlen(syntax), 2000);
  ck_assert_ptr_null(strchr(syntax, '\x1b'));
}
END_TEST

START_TEST(test_value_error_in_layer_group)
{
  g_autofree char *msg = text_error(MINIMAL "[layer.2]\nforward = fast\n");
  assert_has(msg, "test.ini: [layer.2] forward: ");
  assert_has(msg, "'fast'");
}
END_TEST

START_TEST(test_policy_layers_empty)
{
  /* An empty `layers =` is none of the documented forms (all, none, first:N,
   * last:N, indices); it must not silently select no layer. */
  g_autofree char *msg = text_error(MINIMAL "[policy.x]\nkind = offload\nlayers =\n");
  assert_has(msg, "test.ini: [policy.x] layers: ");
}
END_TEST

START_TEST(test_policy_without_name)
{
  g_autofree char *msg = text_error(MINIMAL "[policy.]\nkind = resident\n");
  assert_has(msg, "test.ini: [policy.]");
  assert_has(msg, "policy.NAME");
}
END_TEST

START_TEST(test_memory_beyond_limit)
{
  /* One layer's tensors: 4 EiB + 1 B. */
  g_autofree char *tensors = text_error(DEVICE LINK "[model]\nlayers = 1\nforward = 1ms\ninput = 0\n"
                                                    "tensors = a:4194304TiB, b:1B\n");
  assert_has(tensors, "test.ini: [model] tensors: ");
  assert_has(tensors, "4 EiB");
  /* 5000 layers of 1000 TiB: 5.5e18 B, beyond 2^62 = 4.6e18 B. */
  g_autofree char *model = text_error(DEVICE LINK "[model]\nlayers = 5000\nforward = 1ms\ninput = 0\n"
                                                  "tensors = a:1000TiB\n");
  assert_has(model, "test.ini: [model] tensors: ");
  assert_has(model, "4 EiB");
}
END_TEST

/* ---- bad input: files and includes --------------------------------------- */

START_TEST(test_error_names_included_file)
{
  /* The negative size is in bad-child.ini, included by bad-parent.ini: the
   * message names the file the user has to edit. */
  g_autofree char *msg = file_error(DATA "/bad-parent.ini");
  assert_has(msg, "bad-child.ini: [model] input: ");
  assert_has(msg, "non-negative");
  ck_assert_ptr_null(strstr(msg, "bad-parent.ini"));
}
END_TEST

START_TEST(test_missing_include)
{
  const char *path = DATA "/include-missing.ini";
  g_autofree char *msg = file_error(path);
  /* It names the including file first, then the missing one. */
  ck_assert_msg(g_str_has_prefix(msg, path), "expected the message to start with %s: %s", path, msg);
  assert_has(msg, "[scenario] include: ");
  assert_has(msg, "does-not-exist.ini");
}
END_TEST

START_TEST(test_missing_top_file)
{
  const char *path = DATA "/no-such-scenario.ini";
  g_autofree char *msg = file_error(path);
  assert_has(msg, path);
}
END_TEST

START_TEST(test_missing_include_from_data)
{
  g_autofree char *msg = text_error("[scenario]\ninclude = /nonexistent-offsim-dir/x.ini\n" MINIMAL);
  assert_has(msg, "test.ini: [scenario] include: ");
  assert_has(msg, "/nonexistent-offsim-dir/x.ini");
}
END_TEST

START_TEST(test_include_empty_item)
{
  /* The empty first item is reported before any file is read. */
  g_autofree char *msg = text_error("[scenario]\ninclude = , /nonexistent-offsim-dir/b.ini\n" MINIMAL);
  assert_has(msg, "test.ini: [scenario] include: ");
  assert_has(msg, "comma-separated");
}
END_TEST

START_TEST(test_include_cycle)
{
  g_autofree char *msg = file_error(DATA "/cycle-a.ini");
  assert_has(msg, "[scenario] include: ");
  assert_has(msg, "cycle");
  assert_has(msg, "cycle-a.ini");
  assert_has(msg, "cycle-b.ini");
}
END_TEST

START_TEST(test_include_self)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = write_file(dir, "self.ini", "[scenario]\ninclude = self.ini\n" MINIMAL, -1);
  g_autofree char *msg = file_error(path);
  assert_has(msg, "self.ini: [scenario] include: ");
  assert_has(msg, "cycle");
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(test_include_diamond_is_not_a_cycle)
{
  /* top includes left and right, both include base: base is loaded twice,
   * but never while it is itself being loaded, so this is no cycle. */
  g_autofree char *dir = test_tmp_dir_new();
  g_free(write_file(dir, "base.ini", MINIMAL, -1));
  g_free(write_file(dir, "left.ini", "[scenario]\ninclude = base.ini\n", -1));
  g_free(write_file(dir, "right.ini", "[scenario]\ninclude = base.ini\n", -1));
  g_autofree char *top = write_file(dir, "top.ini", "[scenario]\ninclude = left.ini, right.ini\n", -1);
  g_autoptr(SimScenario) s = file_ok(top);
  ck_assert_uint_eq(sim_workload_n_layers(s->workload), 4);
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(test_include_depth_limit)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *first = write_chain(dir, 70);
  g_autofree char *msg = file_error(first);
  assert_has(msg, "[scenario] include: ");
  assert_has(msg, "deeper than");
  g_autofree char *limit = g_strdup_printf("%d", SIM_CONFIG_MAX_DEPTH);
  assert_has(msg, limit);
  assert_has(msg, "chain-"); /* names the file whose include went too deep */
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(test_include_depth_boundary)
{
  /* A chain of SIM_CONFIG_MAX_DEPTH files loads; one file more does not. */
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *first = write_chain(dir, SIM_CONFIG_MAX_DEPTH);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(first, &error);
  ck_assert_msg(s != NULL, "a chain of %d files did not load: %s", SIM_CONFIG_MAX_DEPTH,
                error ? error->message : "?");
  test_tmp_dir_remove(dir);

  g_autofree char *dir2 = test_tmp_dir_new();
  g_autofree char *first2 = write_chain(dir2, SIM_CONFIG_MAX_DEPTH + 1);
  g_autofree char *msg = file_error(first2);
  assert_has(msg, "deeper than");
  test_tmp_dir_remove(dir2);
}
END_TEST

START_TEST(test_nul_byte)
{
  static const char data[] = "[device]\nmemory = 80\0GiB\n";
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = write_file(dir, "nul.ini", data, sizeof data - 1);
  g_autofree char *msg = file_error(path);
  assert_has(msg, path);
  assert_has(msg, "NUL");
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(test_invalid_utf8)
{
  static const char data[] = "[scenario]\nname = caf\xe9\n" MINIMAL;
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = write_file(dir, "latin1.ini", data, sizeof data - 1);
  g_autofree char *msg = file_error(path);
  assert_has(msg, path);
  assert_has(msg, "UTF-8");
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(test_invalid_utf8_in_include)
{
  static const char data[] = "[link]\nlatency = 8\xff" "us\n";
  g_autofree char *dir = test_tmp_dir_new();
  g_free(write_file(dir, "bad.ini", data, sizeof data - 1));
  g_autofree char *top = write_file(dir, "top.ini", "[scenario]\ninclude = bad.ini\n" MINIMAL, -1);
  g_autofree char *msg = file_error(top);
  assert_has(msg, "bad.ini: ");
  assert_has(msg, "UTF-8");
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(test_not_a_key_file)
{
  g_autofree char *msg = text_error("this is not an ini file\n");
  assert_has(msg, "test.ini: ");
  assert_has(msg, "not a valid scenario file");
}
END_TEST

START_TEST(test_link_tables)
{
  g_autoptr(SimScenario) s = test_scenario_merged(MINIMAL, "[link]\nh2d_table = 4KiB:1GB/s, 1MiB:20GB/s, 1GiB:50GB/s\n"
                                                     "[calibration]\ndate = 2026-11-29\ndriver = 580.1\n");
  ck_assert_uint_eq(s->machine.link.table_points[1], 3);
  ck_assert_uint_eq(s->machine.link.table_points[0], 0);
  ck_assert_uint_eq(s->machine.link.table[1][1].bytes, 1048576);
  ck_assert_close(s->machine.link.table[1][2].bandwidth, 50e9, 1);
  g_autofree char *order = override_error(MINIMAL, "[link]\nd2h_table = 1MiB:1GB/s, 4KiB:1GB/s\n");
  assert_has(order, "test.ini: [link] d2h_table: point 2: sizes must be positive and increasing");
  g_autofree char *bad = override_error(MINIMAL, "[link]\nd2h_table = 1MiB\n");
  assert_has(bad, "expected SIZE:RATE items");
  g_autofree char *rate = override_error(MINIMAL, "[link]\nd2h_table = 1MiB:0GB/s\n");
  assert_has(rate, "point 1: expected a positive, finite rate");
}
END_TEST

static Suite *
scenario_suite(void)
{
  Suite *suite = suite_create("scenario");

  TCase *valid = tcase_create("valid");
  tcase_add_test(valid, test_minimal_loads);
  tcase_add_test(valid, test_link_tables);
  tcase_add_test(valid, test_tensor_keep_flag);
  tcase_add_test(valid, test_include_merge);
  tcase_add_test(valid, test_include_relative_to_including_file);
  tcase_add_test(valid, test_include_chain_of_ten);
  tcase_add_test(valid, test_include_diamond_is_not_a_cycle);
  tcase_add_test(valid, test_layer_override);
  tcase_add_test(valid, test_layer_override_explicit_backward);
  tcase_add_test(valid, test_layer_override_tensors);
  tcase_add_test(valid, test_layer_selection);
  tcase_add_test(valid, test_default_policy_set);
  tcase_add_test(valid, test_policies_in_file_order_replace_defaults);
  tcase_add_test(valid, test_keep_last_defaults);
  tcase_add_test(valid, test_policy_options);
  tcase_add_test(valid, test_bidir_default_is_sum);
  tcase_add_test(valid, test_link_and_device_keys);
  tcase_add_test(valid, test_scenario_step);
  tcase_add_test(valid, test_embedded_default);
  suite_add_tcase(suite, valid);

  TCase *keys = tcase_create("groups and keys");
  tcase_add_test(keys, test_unknown_group);
  tcase_add_test(keys, test_unknown_group_empty);
  tcase_add_test(keys, test_unknown_key_link);
  tcase_add_test(keys, test_unknown_key_model);
  tcase_add_test(keys, test_unknown_key_device_and_scenario);
  tcase_add_test(keys, test_unknown_key_policy);
  tcase_add_test(keys, test_unknown_key_layer);
  tcase_add_test(keys, test_bad_layer_group_name);
  tcase_add_test(keys, test_missing_model_keys);
  tcase_add_test(keys, test_missing_model_group);
  tcase_add_test(keys, test_missing_device_memory);
  tcase_add_test(keys, test_missing_link_bandwidth);
  tcase_add_test(keys, test_missing_policy_kind);
  tcase_add_test(keys, test_plan_without_actions);
  suite_add_tcase(suite, keys);

  TCase *values = tcase_create("values");
  tcase_add_test(values, test_negative_size);
  tcase_add_test(values, test_non_numeric_size);
  tcase_add_test(values, test_unknown_unit);
  tcase_add_test(values, test_zero_bandwidth);
  tcase_add_test(values, test_bad_numbers);
  tcase_add_test(values, test_bad_layer_count);
  tcase_add_test(values, test_unknown_policy_kind);
  tcase_add_test(values, test_unknown_option_value);
  tcase_add_test(values, test_option_of_another_kind);
  tcase_add_test(values, test_layer_index_out_of_range);
  tcase_add_test(values, test_policy_layers_out_of_range);
  tcase_add_test(values, test_policy_layers_malformed);
  tcase_add_test(values, test_plan_wrong_action_count);
  tcase_add_test(values, test_duplicate_tensor_names);
  tcase_add_test(values, test_malformed_tensors);
  tcase_add_test(values, test_value_error_in_layer_group);
  tcase_add_test(values, test_messages_quote_what_they_echo);
  tcase_add_test(values, test_policy_layers_empty);
  tcase_add_test(values, test_policy_without_name);
  tcase_add_test(values, test_memory_beyond_limit);
  suite_add_tcase(suite, values);

  TCase *files = tcase_create("files");
  tcase_add_test(files, test_error_names_included_file);
  tcase_add_test(files, test_missing_include);
  tcase_add_test(files, test_missing_top_file);
  tcase_add_test(files, test_missing_include_from_data);
  tcase_add_test(files, test_include_empty_item);
  tcase_add_test(files, test_include_cycle);
  tcase_add_test(files, test_include_self);
  tcase_add_test(files, test_include_depth_limit);
  tcase_add_test(files, test_include_depth_boundary);
  tcase_add_test(files, test_nul_byte);
  tcase_add_test(files, test_invalid_utf8);
  tcase_add_test(files, test_invalid_utf8_in_include);
  tcase_add_test(files, test_not_a_key_file);
  suite_add_tcase(suite, files);
  return suite;
}

int
main(void)
{
  return test_run_suite(scenario_suite());
}
