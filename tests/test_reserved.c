/* tests/test_reserved.c — what PyTorch's caching allocator reserves over a
 * run (sim/result/reserved.h), derived by hand on the README's tiny model,
 * and on every bundled scenario: every free matches an allocation, and
 * reserved is never below allocated. */
#include "testutil.h"

#include "input/scenario.h"
#include "planner/plan.h"
#include "result/evaluate.h"
#include "result/reserved.h"

#include "base/u64map.h"

#include <string.h>

#define MIB(n) ((gint64)(n) * 1024 * 1024)

static SimResult *
tiny(const char *extra, guint64 budget)
{
  g_autofree char *path = g_strdup_printf("%s/tiny.ini", OFFSIM_SCENARIOS);
  g_autofree char *text = NULL;
  ck_assert(g_file_get_contents(path, &text, NULL, NULL));
  /* The profile the scenario includes, by absolute path. */
  g_autofree char *abs = g_strdup_printf("include = %s/profiles/", OFFSIM_SCENARIOS);
  g_auto(GStrv) parts = g_strsplit(text, "include = profiles/", 2);
  g_autofree char *joined = g_strjoinv(abs, parts);
  g_autofree char *full = g_strconcat(joined, extra, NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(full);
  const SimPolicy *resident = g_ptr_array_index(s->policies, 0);
  ck_assert_str_eq(resident->name, "resident");
  SimEvaluateOptions options = { .budget = budget };
  g_autoptr(GError) error = NULL;
  SimResult *r = sim_evaluate(NULL, s, resident, &options, &error);
  ck_assert_msg(r != NULL, "%s", error ? error->message : "");
  return r;
}

/* tiny.ini under resident: static 1 GiB (one segment of exactly 1 GiB: a
 * large request rounds to 2 MiB); per layer attn 24 MiB and mlp 32 MiB,
 * kept, and a 64 MiB workspace freed at the layer's end.  Layer 0 reserves
 * a segment for each (24, 32, 64).  Layers 1 to 3 carve attn and mlp out
 * of the workspace segment the layer before freed (best fit; 40 and then
 * 8 MiB rests split off, more than 1 MiB) and reserve a new 64 MiB segment
 * for their own workspace, since an 8 MiB rest holds none: 1024 + 120 + 3
 * x 64 = 1336 MiB.  The backward's workspace takes layer 3's, cached.
 * Allocated peaks at 1024 + 4 x 56 + 64 = 1312 MiB: 24 MiB of
 * fragmentation, the three 8 MiB rests. */
START_TEST(tiny_by_hand)
{
  g_autoptr(SimResult) r = tiny("", 0);
  ck_assert_int_eq(r->peak_device.bytes, MIB(1312));
  ck_assert_uint_eq(r->peak_reserved_bytes, MIB(1336));
  ck_assert_uint_eq(r->fragmentation_bytes, MIB(24));
  ck_assert(r->fits);
}
END_TEST

/* `fits` judges reserved: at 1320 MiB the allocated peak (1312) fits, but
 * layer 3's workspace needs a fourth 64 MiB segment and no cached segment
 * is whole (each holds tensors beside its 8 MiB rest), so PyTorch runs
 * out of memory. */
START_TEST(fits_judges_reserved)
{
  g_autoptr(SimResult) tight = tiny("", (guint64)MIB(1320));
  ck_assert(!tight->fits);
  ck_assert_uint_eq(tight->peak_reserved_bytes, MIB(1336)); /* the replay goes on past the capacity */
  g_autoptr(SimResult) room = tiny("", (guint64)MIB(1336));
  ck_assert(room->fits);
}
END_TEST

/* expandable_segments: one segment on the compute stream that maps 20 MiB
 * pages.  Static: 52 pages (1040 MiB), a 16 MiB free tail.  Layer 0: attn
 * takes the tail and a page (rest 12), mlp the rest and a page (rest 0),
 * the workspace 4 pages (rest 16): 1160.  Layer 1 carves attn and mlp out
 * of the freed 80 MiB tail (rest 24) and its workspace maps 2 pages: 1200.
 * Layer 2: rests 40, 8, then 3 pages (rest 4): 1260.  Layer 3: rests 44,
 * 12, 3 pages: 1320 MiB, 16 below the segments of the default. */
START_TEST(expandable_by_hand)
{
  g_autoptr(SimResult) r = tiny("\n[device]\nexpandable_segments = true\n", 0);
  ck_assert_uint_eq(r->peak_reserved_bytes, MIB(1320));
  ck_assert_int_eq(r->peak_device.bytes, MIB(1312));
}
END_TEST

/* Every bundled scenario under each of its policies: each free matches an
 * allocation of its tag, and the reserved peak is at least the allocated
 * one (the replay's sizes are the run's, rounded up). */
START_TEST(bundled_scenarios_replay_cleanly)
{
  g_autoptr(GDir) dir = g_dir_open(OFFSIM_SCENARIOS, 0, NULL);
  ck_assert_ptr_nonnull(dir);
  const char *name;
  guint checked = 0;
  while ((name = g_dir_read_name(dir))) {
    if (!g_str_has_suffix(name, ".ini"))
      continue;
    g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, name, NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = sim_scenario_load_file(path, &error);
    ck_assert_msg(s != NULL, "%s: %s", name, error ? error->message : "");
    g_autoptr(SimEvaluator) ev = sim_evaluate_new();
    for (guint i = 0; i < s->policies->len; i++) {
      const SimPolicy *policy = g_ptr_array_index(s->policies, i);
      if (policy->kind == SIM_POLICY_PLAN && policy->actions == NULL)
        continue; /* a plan the planner fills */
      SimEvaluateOptions options = { .detail = TRUE };
      g_autoptr(SimResult) r = sim_evaluate(ev, s, policy, &options, &error);
      ck_assert_msg(r != NULL, "%s %s: %s", name, policy->name, error ? error->message : "");
      SimReserved reserved;
      sim_reserved_replay(r->run, r->program, 0, SIM_ALLOCATOR_NONE, &reserved);
      ck_assert_msg(reserved.unmatched == 0, "%s %s: %" G_GUINT64_FORMAT " bytes freed that nothing allocated",
                    name, policy->name, reserved.unmatched);
      ck_assert_msg(r->peak_reserved_bytes >= (guint64)r->peak_device.bytes, "%s %s: reserved %" G_GUINT64_FORMAT
                    " below allocated %" G_GINT64_FORMAT, name, policy->name, r->peak_reserved_bytes,
                    r->peak_device.bytes);
      checked++;
    }
  }
  ck_assert_uint_ge(checked, 20);
}
END_TEST

/* The planner searches allocated bytes; when the plan's reserved bytes do
 * not fit (tiny at 1,260 MiB: the allocated optimum reserves more), it
 * searches again under the budget less the excess: the plan it returns
 * fits what PyTorch would reserve, at some cost in step. */
START_TEST(plans_fit_what_is_reserved)
{
  g_autofree char *path = g_strdup_printf("%s/tiny.ini", OFFSIM_SCENARIOS);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(path, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  guint64 budget = (guint64)MIB(1260);
  g_autoptr(PlannerPlan) allocated = planner_plan_allocated(s, budget, SIM_FRAMEWORK_NONE, &error);
  ck_assert(allocated && allocated->feasible);
  ck_assert((guint64)allocated->result->peak_device.bytes <= budget);
  ck_assert_msg(!allocated->result->fits, "the allocated optimum reserves %" G_GUINT64_FORMAT " B",
                allocated->result->peak_reserved_bytes);
  g_autoptr(PlannerPlan) p = planner_plan(s, budget, &error);
  ck_assert(p && p->feasible);
  ck_assert(p->result->fits);
  ck_assert_uint_le(p->result->peak_reserved_bytes, budget);
  ck_assert(p->result->step_ms >= allocated->result->step_ms);
  ck_assert(!p->proven && !p->optimal);
  ck_assert(p->lower_bound_ms <= p->result->step_ms);
}
END_TEST

/* The replay's map of held keys takes keys out (sim_u64map_remove): a
 * run of sets and removes, keys chosen to collide (few home slots in a
 * small table, so runs wrap and shift), against a GHashTable; then the
 * map holds only what is present, and every key removed reads missing. */
START_TEST(u64map_removes_keys)
{
  SimU64Map m;
  sim_u64map_init(&m);
  g_autoptr(GHashTable) ref = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  guint32 seed = 12345;
  for (guint step = 0; step < 200000; step++) {
    seed = seed * 1103515245u + 12345u;
    guint64 key = (guint64)((seed >> 8) % 300) << 32 | ((seed >> 20) % 7); /* tag << 32 | layer, as the replay */
    if ((seed >> 4) % 3 == 0) {
      sim_u64map_remove(&m, key);
      g_hash_table_remove(ref, &key);
    } else {
      sim_u64map_set(&m, key, step);
      g_hash_table_insert(ref, g_memdup2(&key, sizeof key), GUINT_TO_POINTER(step));
    }
    if (step % 997 == 0) {
      ck_assert_uint_eq(m.len, g_hash_table_size(ref));
      for (guint t = 0; t < 300; t++)
        for (guint l = 0; l < 7; l++) {
          guint64 k = (guint64)t << 32 | l;
          gpointer v;
          gboolean in = g_hash_table_lookup_extended(ref, &k, NULL, &v);
          ck_assert_uint_eq(sim_u64map_get(&m, k, G_MAXUINT32), in ? GPOINTER_TO_UINT(v) : G_MAXUINT32);
        }
    }
  }
  guint present = 0;
  for (guint i = 0; i < m.cap; i++)
    present += m.keys[i] != SIM_U64MAP_EMPTY;
  ck_assert_uint_eq(present, g_hash_table_size(ref));
  /* Everything out: the map is empty, whatever order the keys went in. */
  for (guint t = 0; t < 300; t++)
    for (guint l = 0; l < 7; l++)
      sim_u64map_remove(&m, (guint64)t << 32 | l);
  ck_assert_uint_eq(m.len, 0);
  for (guint i = 0; i < m.cap; i++)
    ck_assert(m.keys[i] == SIM_U64MAP_EMPTY);
  sim_u64map_clear(&m);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("reserved");
  TCase *tc = tcase_create("reserved");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, tiny_by_hand);
  tcase_add_test(tc, fits_judges_reserved);
  tcase_add_test(tc, expandable_by_hand);
  tcase_add_test(tc, bundled_scenarios_replay_cleanly);
  tcase_add_test(tc, plans_fit_what_is_reserved);
  tcase_add_test(tc, u64map_removes_keys);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
