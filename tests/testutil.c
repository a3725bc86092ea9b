#include "testutil.h"

#include "base/error.h"
#include "engine/invariants.h"
#include "result/evaluate.h"

#include <stdarg.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

guint
test_readme_table(const char *prefix, char ***lines)
{
  g_autofree char *readme = NULL;
  ck_assert(g_file_get_contents(OFFSIM_SCENARIOS "/../README.md", &readme, NULL, NULL));
  *lines = g_strsplit(readme, "\n", -1);
  guint at = 0;
  while ((*lines)[at] && !g_str_has_prefix((*lines)[at], prefix))
    at++;
  ck_assert_msg((*lines)[at] != NULL, "README: no table starting %s", prefix);
  return at;
}

SimScenario *
test_scenario_file_set(const char *path, ...)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimConfig) config = sim_config_load_file(path, &error);
  ck_assert_msg(config != NULL, "%s", error ? error->message : "");
  va_list ap;
  va_start(ap, path);
  for (const char *group; (group = va_arg(ap, const char *));) {
    const char *key = va_arg(ap, const char *), *value = va_arg(ap, const char *);
    sim_config_set(config, group, key, value, "test");
  }
  va_end(ap);
  SimScenario *s = sim_scenario_from_config(config, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  return s;
}

SimResult *
test_evaluate(const SimScenario *s, const char *policy)
{
  g_autoptr(GError) error = NULL;
  const SimPolicy *p = sim_scenario_policy(s, policy);
  ck_assert_msg(p != NULL, "no policy %s", policy);
  SimEvaluateOptions options = { .detail = TRUE };
  SimResult *r = sim_evaluate(NULL, s, p, &options, &error);
  ck_assert_msg(r != NULL, "evaluation failed: %s", error ? error->message : "?");
  /* Every evaluation in the tests is checked, in release builds too. */
  ck_assert_msg(sim_invariants_check(r->run, r->program, &error), "%s", error ? error->message : "");
  return r;
}

void
test_run_clear(TestRun *run)
{
  g_free(run->out);
  g_free(run->err);
}

static TestRun
offsim_va(const char *cwd, const char *first, va_list ap)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_autoptr(GError) error = NULL;
  TestRun r = { 0 };
  int wait_status = 0;

  g_ptr_array_add(argv, (char *)OFFSIM_BINARY);
  for (const char *a = first; a; a = va_arg(ap, const char *))
    g_ptr_array_add(argv, (char *)a);
  g_ptr_array_add(argv, NULL);
  gboolean ok = g_spawn_sync(cwd, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &r.out, &r.err,
                             &wait_status, &error);
  ck_assert_msg(ok, "cannot run offsim: %s", error ? error->message : "?");
  ck_assert_msg(WIFEXITED(wait_status), "offsim did not exit normally (signal?): %s", r.err);
  r.status = WEXITSTATUS(wait_status);
  return r;
}

TestRun
test_offsim(const char *first, ...)
{
  va_list ap;
  va_start(ap, first);
  TestRun r = offsim_va(NULL, first, ap);
  va_end(ap);
  return r;
}

TestRun
test_offsim_in(const char *cwd, const char *first, ...)
{
  va_list ap;
  va_start(ap, first);
  TestRun r = offsim_va(cwd, first, ap);
  va_end(ap);
  return r;
}

/* Everything under `path`, then `path`. */
static void
remove_tree(const char *path)
{
  GDir *d = g_dir_open(path, 0, NULL);
  if (d == NULL) {
    g_remove(path);
    return;
  }
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL) {
    g_autofree char *child = g_build_filename(path, name, NULL);
    remove_tree(child);
  }
  g_dir_close(d);
  g_rmdir(path);
}

/* The directories this process made, removed when it exits.  Check runs
 * each test in a forked child by default: a child inherits the parent's
 * list and exit handler, so the list names its owner and only the owner
 * removes what is on it. */
static GPtrArray *tmp_dirs;
static pid_t tmp_dirs_owner;

static void
tmp_dirs_remove(void)
{
  if (tmp_dirs == NULL || tmp_dirs_owner != getpid())
    return;
  for (guint i = 0; i < tmp_dirs->len; i++)
    remove_tree(g_ptr_array_index(tmp_dirs, i));
  g_ptr_array_set_size(tmp_dirs, 0);
}

char *
test_tmp_dir_new(void)
{
  g_autoptr(GError) error = NULL;
  char *dir = g_dir_make_tmp("offsim-test-XXXXXX", &error);
  ck_assert_msg(dir != NULL, "no temporary directory: %s", error ? error->message : "?");
  if (tmp_dirs == NULL)
    atexit(tmp_dirs_remove);
  if (tmp_dirs == NULL || tmp_dirs_owner != getpid()) {
    /* A forked child's copy of its parent's list is the parent's to empty. */
    tmp_dirs = g_ptr_array_new_with_free_func(g_free);
    tmp_dirs_owner = getpid();
  }
  g_ptr_array_add(tmp_dirs, g_strdup(dir));
  return dir;
}

void
test_tmp_dir_remove(const char *dir)
{
  remove_tree(dir);
}

char *
test_ini_merge(const char *base, const char *overrides)
{
  g_autoptr(GKeyFile) merged = g_key_file_new();
  g_autoptr(GKeyFile) extra = g_key_file_new();
  g_autoptr(GError) error = NULL;
  ck_assert_msg(g_key_file_load_from_data(merged, base, (gsize)-1, G_KEY_FILE_NONE, &error), "base: %s",
                error ? error->message : "");
  ck_assert_msg(g_key_file_load_from_data(extra, overrides, (gsize)-1, G_KEY_FILE_NONE, &error), "overrides: %s",
                error ? error->message : "");
  g_auto(GStrv) groups = g_key_file_get_groups(extra, NULL);
  for (char **g = groups; *g; g++) {
    g_auto(GStrv) keys = g_key_file_get_keys(extra, *g, NULL, NULL);
    if (keys[0] == NULL && !g_key_file_has_group(merged, *g)) {
      /* GKeyFile makes a group by setting a key in it: an empty group stays empty. */
      g_key_file_set_value(merged, *g, "empty", "");
      g_key_file_remove_key(merged, *g, "empty", NULL);
    }
    for (char **k = keys; *k; k++) {
      g_autofree char *value = g_key_file_get_value(extra, *g, *k, NULL);
      g_key_file_set_value(merged, *g, *k, value);
    }
  }
  /* Written as the scenarios are, `key = value`, so tests can find their lines. */
  GString *out = g_string_new(NULL);
  g_auto(GStrv) all = g_key_file_get_groups(merged, NULL);
  for (char **g = all; *g; g++) {
    g_string_append_printf(out, "[%s]\n", *g);
    g_auto(GStrv) keys = g_key_file_get_keys(merged, *g, NULL, NULL);
    for (char **k = keys; *k; k++) {
      g_autofree char *value = g_key_file_get_value(merged, *g, *k, NULL);
      g_string_append_printf(out, "%s = %s\n", *k, value);
    }
  }
  return g_string_free(out, FALSE);
}

SimScenario *
test_scenario_merged(const char *base, const char *overrides)
{
  g_autofree char *text = test_ini_merge(base, overrides);
  return test_scenario_from_text(text);
}

char *
test_scenario_merged_error(const char *base, const char *overrides)
{
  g_autofree char *text = test_ini_merge(base, overrides);
  return test_scenario_error(text);
}

char *
test_real_data(const char *relative)
{
  const char *dir = g_getenv("OFFSIM_REAL_DATA");
  if (dir != NULL && *dir != '\0')
    return g_build_filename(dir, relative, NULL);
  g_autofree char *parent = g_path_get_dirname(OFFSIM_SOURCE_DIR);
  return g_build_filename(parent, "shared", "data", relative, NULL);
}
