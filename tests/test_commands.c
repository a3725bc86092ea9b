/* The commands around the reports: `offsim show` (the merged scenario, each
 * value with its file), `compare --budget --format json` (the plan with the
 * results) and every command's --help (units and exit codes), through the
 * binary as a user runs them. */
#include "testutil.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#define TINY OFFSIM_SCENARIOS "/tiny.ini"

static JsonNode *
parse_json(const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) error = NULL;
  ck_assert_msg(json_parser_load_from_data(parser, text, -1, &error), "invalid JSON: %s\n%s",
                error ? error->message : "", text);
  return json_node_copy(json_parser_get_root(parser));
}

/* ---- show ---------------------------------------------------------------- */

static char *
write_text(const char *dir, const char *name, const char *text)
{
  char *path = g_build_filename(dir, name, NULL);
  ck_assert(g_file_set_contents(path, text, -1, NULL));
  return path;
}

/* Each `key = value` line is followed by the line that says where it came
 * from; nothing else but comments, blank lines and group lines. */
static void
assert_every_value_has_its_origin(const char *shown)
{
  g_auto(GStrv) lines = g_strsplit(shown, "\n", -1);
  guint values = 0;
  for (guint i = 0; lines[i]; i++) {
    const char *l = lines[i];
    if (*l == '\0' || *l == '#' || *l == '[')
      continue;
    ck_assert_msg(strstr(l, " = ") != NULL, "not a key line: '%s'", l);
    ck_assert_msg(lines[i + 1] && g_str_has_prefix(lines[i + 1], "# ^ "), "'%s' has no origin", l);
    values++;
  }
  ck_assert_uint_gt(values, 10);
}

/* The output of `offsim show` for every bundled scenario and the embedded
 * default, saved elsewhere, gives byte for byte the compare output of the
 * original, in every format. */
START_TEST(show_output_loads_as_the_same_scenario)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autoptr(GPtrArray) scenarios = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(scenarios, NULL); /* the embedded default */
  g_autoptr(GDir) d = g_dir_open(OFFSIM_SCENARIOS, 0, NULL);
  ck_assert_ptr_nonnull(d);
  for (const char *name; (name = g_dir_read_name(d));)
    if (g_str_has_suffix(name, ".ini"))
      g_ptr_array_add(scenarios, g_build_filename(OFFSIM_SCENARIOS, name, NULL));
  /* and those of the README's tables, whose policies are presets and derived keys (the
   * pipelines, whose [parallel] and [node] must survive the round trip, are in scenarios/) */
  static const char *const sub[] = { "ops/qwen2.5-0.5b-layer.ini", "ops/qwen2.5-0.5b-step.ini",
                                     "frameworks/llama-3.1-8b.ini" };
  for (guint k = 0; k < G_N_ELEMENTS(sub); k++)
    g_ptr_array_add(scenarios, g_build_filename(OFFSIM_SCENARIOS, sub[k], NULL));
  ck_assert_uint_ge(scenarios->len, 10);
  for (guint i = 0; i < scenarios->len; i++) {
    const char *original = g_ptr_array_index(scenarios, i);
    g_auto(TestRun) show = original ? test_offsim("show", original, NULL) : test_offsim("show", NULL);
    ck_assert_msg(show.status == 0, "show %s: exit %d: %s", original, show.status, show.err);
    assert_every_value_has_its_origin(show.out);
    /* One file name per scenario: the folder joins it ("frameworks-llama-3.1-8b.ini"). */
    g_autofree char *base = NULL;
    if (original) {
      g_autofree char *dirname = g_path_get_dirname(original), *folder = g_path_get_basename(dirname),
                      *file = g_path_get_basename(original);
      base = strcmp(folder, "scenarios") == 0 ? g_strdup(file) : g_strdup_printf("%s-%s", folder, file);
    } else {
      base = g_strdup("embedded.ini");
    }
    g_autofree char *shown = write_text(dir, base, show.out);
    const char *formats[] = { "table", "json", "csv" };
    for (guint f = 0; f < G_N_ELEMENTS(formats); f++) {
      g_auto(TestRun) a = original ? test_offsim("compare", original, "--format", formats[f], NULL)
                                   : test_offsim("compare", "--format", formats[f], NULL);
      g_auto(TestRun) b = test_offsim_in(dir, "compare", base, "--format", formats[f], NULL);
      ck_assert_msg(a.status == 0 && b.status == 0, "%s: exit %d and %d: %s", base, a.status, b.status, b.err);
      ck_assert_msg(strcmp(a.out, b.out) == 0, "%s, %s: compare differs once shown:\n%s\n---\n%s", base, formats[f],
                    a.out, b.out);
    }
  }
}
END_TEST

/* What the loader fills in, and where each value came from: the file (and
 * what it overrode in the files it includes), (default) or (derived). */
START_TEST(show_names_each_value_s_origin)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *sub = g_build_filename(dir, "profiles", NULL);
  ck_assert_int_eq(g_mkdir(sub, 0755), 0);
  g_autofree char *profile = write_text(sub, "gpu.ini", "[device]\nmemory = 24GiB\n[link]\nh2d_bandwidth = 25GB/s\n"
                                                       "d2h_bandwidth = 12.5GB/s\nlatency = 3us\n");
  g_autofree char *scenario = write_text(dir, "mine.ini",
                                         "[scenario]\ninclude = profiles/gpu.ini\n[link]\nlatency = 0.7us\n"
                                         "[model]\nlayers = 3\nforward = 0.3ms\ninput = 1MiB\ntensors = a:2MiB\n"
                                         "[layer.2]\nforward = 0.7ms\n");
  g_auto(TestRun) r = test_offsim_in(dir, "show", "mine.ini", NULL);
  ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
  const char *expected[] = {
    "# Files: profiles/gpu.ini, mine.ini\n",
    "[scenario]\nname = mine\n# ^ (derived: the file name without its extension)\n",
    "[device]\nmemory = 24GiB\n# ^ profiles/gpu.ini\nefficiency = 0.5\n# ^ (default)\n",
    "h2d_bandwidth = 25GB/s\n# ^ profiles/gpu.ini\n",
    "bidir_bandwidth = 37.5GB/s\n# ^ (derived: h2d_bandwidth + d2h_bandwidth)\n",
    "latency = 0.7us\n# ^ mine.ini (overrides '3us' in profiles/gpu.ini)\n",
    "host_alloc = 3ms\n# ^ (default)\n",
    "backward = 600us\n# ^ (derived: 2 × forward)\n",
    "[layer.2]\nforward = 0.7ms\n# ^ mine.ini\nbackward = 1.4ms\n# ^ (derived: 2 × this layer's forward)\n"
    "input = 1MiB\n# ^ (default: [model]'s)\n",
    "[policy.offload-sync]\nkind = offload\n# ^ (the default set: the scenario has no [policy.*] group)\n"
    "mode = sync\n",
  };
  for (guint i = 0; i < G_N_ELEMENTS(expected); i++)
    ck_assert_msg(strstr(r.out, expected[i]) != NULL, "missing:\n%s\nin:\n%s", expected[i], r.out);
  ck_assert_ptr_null(strstr(r.out, "include ="));
  ck_assert_ptr_null(strstr(r.out, dir)); /* files named as from here */

  /* Loaded back from elsewhere, it is the same scenario. */
  g_autofree char *elsewhere = test_tmp_dir_new();
  g_autofree char *copy = write_text(elsewhere, "mine.ini", r.out);
  g_auto(TestRun) a = test_offsim_in(dir, "compare", "mine.ini", "--budget", "30MiB", NULL);
  g_auto(TestRun) b = test_offsim_in(elsewhere, "compare", "mine.ini", "--budget", "30MiB", NULL);
  ck_assert_int_eq(a.status, 0);
  ck_assert_str_eq(a.out, b.out);

  /* The embedded default, and a scenario that does not load. */
  g_auto(TestRun) embedded = test_offsim("show", NULL);
  ck_assert_int_eq(embedded.status, 0);
  ck_assert(g_str_has_prefix(embedded.out, "# offsim show (embedded default): "));
  ck_assert_ptr_nonnull(strstr(embedded.out, "memory = 80GiB\n# ^ (embedded default)\n"));
  g_auto(TestRun) missing = test_offsim_in(dir, "show", "nothing.ini", NULL);
  ck_assert_int_eq(missing.status, 2);
  ck_assert_ptr_nonnull(strstr(missing.err, "nothing.ini"));
}
END_TEST

/* ---- compare --budget --format json ------------------------------------- */

/* The plan comes with the results, as `offsim plan --format json` prints it
 * for the same budget: its actions, one per layer, and its layers. */
START_TEST(compare_budget_json_carries_the_plan)
{
  const char *budgets[] = { "1.2GiB", "1GiB" }; /* a plan that fits, and none */
  for (guint b = 0; b < G_N_ELEMENTS(budgets); b++) {
    g_auto(TestRun) compare = test_offsim("compare", TINY, "--budget", budgets[b], "--format", "json", NULL);
    g_auto(TestRun) plan = test_offsim("plan", TINY, "--budget", budgets[b], "--format", "json", NULL);
    ck_assert_msg(compare.status == 0, "exit %d: %s", compare.status, compare.err);
    ck_assert_int_eq(plan.status, b == 0 ? 0 : 4);
    g_autoptr(JsonNode) root = parse_json(compare.out);
    g_autoptr(JsonNode) alone = parse_json(plan.out);
    JsonObject *o = json_node_get_object(root);
    g_autoptr(GList) members = json_object_get_members(o);
    ck_assert_uint_eq(g_list_length(members), 3);
    ck_assert_str_eq(g_list_nth_data(members, 0), "scenario");
    ck_assert_str_eq(g_list_nth_data(members, 1), "results");
    ck_assert_str_eq(g_list_nth_data(members, 2), "plan");
    JsonNode *in_compare = json_object_get_member(o, "plan");
    ck_assert_msg(json_node_equal(in_compare, alone), "compare's plan differs from plan's:\n%s\n%s", compare.out,
                  plan.out);
    JsonObject *p = json_node_get_object(in_compare);
    ck_assert_uint_eq(json_array_get_length(json_object_get_array_member(p, "actions")), 4);
    ck_assert_uint_eq(json_array_get_length(json_object_get_array_member(p, "layers")), 4);
    /* ...and the row "planned" is that plan's result. */
    JsonArray *results = json_object_get_array_member(o, "results");
    JsonObject *planned = json_array_get_object_element(results, json_array_get_length(results) - 1);
    ck_assert_str_eq(json_object_get_string_member(planned, "policy"), "planned");
    ck_assert(json_object_get_double_member(planned, "step_ms") == json_object_get_double_member(p, "step_ms"));
    ck_assert_int_eq(json_object_get_int_member(planned, "peak_device_bytes"),
                     json_object_get_int_member(p, "peak_device_bytes"));
  }
  /* Without a budget there is no plan, and the shape is the report's. */
  g_auto(TestRun) plain = test_offsim("compare", TINY, "--format", "json", NULL);
  g_autoptr(JsonNode) root = parse_json(plain.out);
  ck_assert(!json_object_has_member(json_node_get_object(root), "plan"));
}
END_TEST

/* ---- --help -------------------------------------------------------------- */

/* Every command's --help says which units sizes, rates and times take, and
 * which exit statuses it returns. */
START_TEST(help_lists_units_and_exit_statuses)
{
  static const struct {
    const char *command;
    const char *extra; /* the statuses beyond 0, 1 and 2 */
  } commands[] = {
    { "run", "3" },   { "compare", "3" }, { "plan", "4" },  { "sweep", "3" },
    { "model", "" },  { "budget", "" },   { "bench", "" },  { "show", "" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++) {
    g_auto(TestRun) r = test_offsim(commands[i].command, "--help", NULL);
    const char *c = commands[i].command;
    ck_assert_msg(r.status == 0, "%s --help: exit %d: %s", c, r.status, r.err);
    const char *units[] = { "sizes  B, KB, MB, GB, TB, PB, EB (powers of 1000), KiB, MiB, GiB, TiB, PiB, EiB (powers of 1024)",
                            "rates  a size unit per second: 55GB/s", "times  s, ms, us (microseconds), ns",
                            "only a bare 0 may go without" };
    for (guint u = 0; u < G_N_ELEMENTS(units); u++)
      ck_assert_msg(strstr(r.out, units[u]) != NULL, "%s --help lacks '%s':\n%s", c, units[u], r.out);
    const char *exits = strstr(r.out, "Exit status:\n");
    ck_assert_msg(exits != NULL, "%s --help lists no exit status:\n%s", c, r.out);
    ck_assert_ptr_nonnull(strstr(exits, "\n  0  success\n"));
    ck_assert_ptr_nonnull(strstr(exits, "\n  1  internal error"));
    ck_assert_ptr_nonnull(strstr(exits, "\n  2  bad input"));
    ck_assert_msg((strstr(exits, "\n  3  ") != NULL) == (strchr(commands[i].extra, '3') != NULL), "%s: status 3", c);
    ck_assert_msg((strstr(exits, "\n  4  ") != NULL) == (strchr(commands[i].extra, '4') != NULL), "%s: status 4", c);
  }
}
END_TEST

/* `bench --only plan` printed every other figure as zeros under a header
 * claiming "medians of 7 runs", which no figure but some were. */
START_TEST(bench_prints_only_what_ran_with_its_runs)
{
  /* --repeats 2: the plan figure runs half of it, one plan (seconds under ASan). */
  g_auto(TestRun) plan = test_offsim("bench", "--only", "plan", "--quick", "--repeats", "2", NULL);
  ck_assert_msg(plan.status == 0, "%s", plan.err);
  ck_assert_msg(strstr(plan.out, "plan_96_ms ") && strstr(plan.out, "(1 run;") &&
                  strstr(plan.out, "--repeats 2, each figure the median of the runs it names"), "%s", plan.out);
  const char *others[] = { "events_per_sec", "step_96x32_ms", "step_64gpu_ms", "sweep_points", "scale ", "gpus ",
                           "medians of" };
  for (guint i = 0; i < G_N_ELEMENTS(others); i++)
    ck_assert_msg(strstr(plan.out, others[i]) == NULL, "'%s' in:\n%s", others[i], plan.out);
  g_auto(TestRun) json = test_offsim("bench", "--only", "scale", "--quick", "--repeats", "4", "--format", "json", NULL);
  ck_assert_msg(json.status == 0, "%s", json.err);
  g_autoptr(JsonParser) parser = json_parser_new();
  ck_assert(json_parser_load_from_data(parser, json.out, -1, NULL));
  JsonObject *root = json_node_get_object(json_parser_get_root(parser));
  ck_assert(!json_object_has_member(root, "events_per_sec") && !json_object_has_member(root, "plan_96_ms"));
  /* 100 layers: --repeats runs; 1,000: 4 >> 2. */
  ck_assert_int_eq(json_object_get_int_member(json_object_get_object_member(root, "scale_100_layers"), "runs"), 4);
  ck_assert_int_eq(json_object_get_int_member(json_object_get_object_member(root, "scale_1000_layers"), "runs"), 1);
}
END_TEST

static Suite *
commands_suite(void)
{
  Suite *s = suite_create("commands");
  TCase *show = tcase_create("show");
  tcase_set_timeout(show, 240);
  tcase_add_test(show, show_output_loads_as_the_same_scenario);
  tcase_add_test(show, show_names_each_value_s_origin);
  suite_add_tcase(s, show);
  TCase *json = tcase_create("json");
  tcase_set_timeout(json, 120);
  tcase_add_test(json, compare_budget_json_carries_the_plan);
  suite_add_tcase(s, json);
  TCase *help = tcase_create("help");
  tcase_add_test(help, help_lists_units_and_exit_statuses);
  suite_add_tcase(s, help);
  TCase *bench = tcase_create("bench");
  tcase_set_timeout(bench, 120);
  tcase_add_test(bench, bench_prints_only_what_ran_with_its_runs);
  suite_add_tcase(s, bench);
  return s;
}

int
main(void)
{
  return test_run_suite(commands_suite());
}
