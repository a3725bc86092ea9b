/* tests/testutil.h — helpers shared by the Check suites. */
#pragma once

#include <check.h>
#include <glib.h>

#include "engine/engine.h"
#include "input/scenario.h"
#include "result/result.h"

/* Runs a suite and returns the process exit status. */
int test_run_suite(Suite *suite);

/* Loads a scenario from text; the test fails with the error if it does not load. */
SimScenario *test_scenario_from_text(const char *text);

/* Loads from text and returns the error message (the test fails if it loads). */
char *test_scenario_error(const char *text);

/* `base` with every key of `overrides` set (groups added as needed), as one
 * key file: a scenario gives a group or key once, so a test that changes a
 * key of a shared text goes through here.  A new string. */
char *test_ini_merge(const char *base, const char *overrides);

/* test_scenario_from_text and test_scenario_error of `base` with
 * `overrides` merged in (test_ini_merge): a suite's shared scenario, one
 * test's changes. */
SimScenario *test_scenario_merged(const char *base, const char *overrides);
char *test_scenario_merged_error(const char *base, const char *overrides);

/* The README's lines in *lines (the caller frees them with g_strfreev) and
 * the index of the first that starts with `prefix`, a table's header; the
 * test fails when there is none. */
guint test_readme_table(const char *prefix, char ***lines);

/* The scenario file at `path` with (group, key, value) triples set over it,
 * NULL-terminated; the test fails if it does not load. */
SimScenario *test_scenario_file_set(const char *path, ...) G_GNUC_NULL_TERMINATED;

/* Evaluates a named policy of a scenario with detail kept. */
SimResult *test_evaluate(const SimScenario *scenario, const char *policy);

/* One run of the offsim binary: exit status and what it printed. */
typedef struct {
  int status;
  char *out;
  char *err;
} TestRun;

void test_run_clear(TestRun *run);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(TestRun, test_run_clear)

/* Runs OFFSIM_BINARY with the NULL-terminated arguments, from this directory
 * or from `cwd`; the test fails if it cannot start or dies of a signal. */
TestRun test_offsim(const char *first, ...) G_GNUC_NULL_TERMINATED;
TestRun test_offsim_in(const char *cwd, const char *first, ...) G_GNUC_NULL_TERMINATED;

/* The path of `relative` (kineto/NAME, snapshot/NAME) in the directory of the real traces and
 * snapshots that the repository does not hold: $OFFSIM_REAL_DATA, else data/ in the shared/
 * directory beside the source tree (tests/data/kineto/README.md, tests/data/snapshot/README.md; tests/clitest.py's
 * real_data for the Python tests).  A new string; the file may be absent. */
char *test_real_data(const char *relative);

/* A fresh temporary directory (the test fails if none can be made), removed
 * with everything in it when the process that made it exits; and its
 * removal now. */
char *test_tmp_dir_new(void);
void test_tmp_dir_remove(const char *dir);

/* Asserts |a - b| <= tol with both values in the message. */
#define ck_assert_close(a, b, tol)                                                                         \
  do {                                                                                                     \
    double _a = (a), _b = (b), _t = (tol);                                                                 \
    ck_assert_msg(fabs(_a - _b) <= _t, "%s = %.12g, expected %s = %.12g (tolerance %g)", #a, _a, #b, _b, _t); \
  } while (0)
