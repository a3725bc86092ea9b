#include "testutil.h"

#include "error.h"
#include "evaluate.h"

#include <stdlib.h>

int
test_run_suite(Suite *suite)
{
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

SimScenario *
test_scenario_from_text(const char *text)
{
  g_autoptr(GError) error = NULL;
  SimScenario *s = sim_scenario_load_data(text, "test.ini", &error);
  ck_assert_msg(s != NULL, "scenario did not load: %s", error ? error->message : "?");
  return s;
}

char *
test_scenario_error(const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_data(text, "test.ini", &error);
  ck_assert_msg(s == NULL, "scenario loaded but should not have:\n%s", text);
  ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
  return g_strdup(error->message);
}

SimResult *
test_evaluate(const SimScenario *s, const char *policy)
{
  g_autoptr(GError) error = NULL;
  const SimPolicy *p = sim_scenario_policy(s, policy);
  ck_assert_msg(p != NULL, "no policy %s", policy);
  PlannerEvalOptions options = { .detail = TRUE };
  SimResult *r = planner_evaluate(s, p, NULL, &options, &error);
  ck_assert_msg(r != NULL, "evaluation failed: %s", error ? error->message : "?");
  return r;
}
