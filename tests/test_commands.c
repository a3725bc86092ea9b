/* The commands around the reports: `offsim show` (the merged scenario, each
 * value with its file), `compare --budget --format json` (the plan with the
 * results) and every command's --help (units and exit codes), through the
 * binary as a user runs them. */
#include "testutil.h"

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
    { "model", "" },  { "budget", "" },   { "bench", "" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(commands); i++) {
    g_auto(TestRun) r = test_offsim(commands[i].command, "--help", NULL);
    const char *c = commands[i].command;
    ck_assert_msg(r.status == 0, "%s --help: exit %d: %s", c, r.status, r.err);
    const char *units[] = { "sizes  B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024)",
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

static Suite *
commands_suite(void)
{
  Suite *s = suite_create("commands");
  TCase *json = tcase_create("json");
  tcase_set_timeout(json, 120);
  tcase_add_test(json, compare_budget_json_carries_the_plan);
  suite_add_tcase(s, json);
  TCase *help = tcase_create("help");
  tcase_add_test(help, help_lists_units_and_exit_statuses);
  suite_add_tcase(s, help);
  return s;
}

int
main(void)
{
  return test_run_suite(commands_suite());
}
