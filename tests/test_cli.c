/* The `offsim` command line, run as a user would: exit codes, the JSON
 * contract, determinism, and every bundled scenario. */
#include "testutil.h"

#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/wait.h>

static char *
write_temp(const char *name, const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = test_tmp_dir_new();
  char *path = g_build_filename(dir, name, NULL);
  ck_assert(g_file_set_contents(path, text, -1, &error));
  return path;
}

START_TEST(compare_default_prints_every_default_policy)
{
  g_auto(TestRun) r = test_offsim("compare", NULL);
  ck_assert_int_eq(r.status, 0);
  ck_assert_str_eq(r.err, "");
  const char *names[] = { "resident", "offload-sync", "offload-async", "checkpoint-full" };
  for (guint i = 0; i < G_N_ELEMENTS(names); i++)
    ck_assert_msg(strstr(r.out, names[i]) != NULL, "no %s in:\n%s", names[i], r.out);
  ck_assert_ptr_nonnull(strstr(r.out, "Qwen2.5-0.5B"));
  /* Readable at 112 columns (the table's twelve columns since the optimizer step and the
   * communication have their own). */
  g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
  for (char **line = lines; *line; line++)
    ck_assert_msg(g_utf8_strlen(*line, -1) <= 112, "line longer than 112 columns: %s", *line);
}
END_TEST

START_TEST(json_has_the_contract_fields_in_order)
{
  static const char *fields[] = { "scenario", "policy", "step_ms", "compute_ms", "recompute_ms",
                                  "exposed_transfer_ms", "saved_bytes", "peak_device_bytes", "peak_host_bytes",
                                  "d2h_bytes", "h2d_bytes", "d2h_copies", "h2d_copies", "fits" };
  g_auto(TestRun) r = test_offsim("compare", "--format", "json", NULL);
  ck_assert_int_eq(r.status, 0);
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) error = NULL;
  ck_assert_msg(json_parser_load_from_data(parser, r.out, -1, &error), "invalid JSON: %s",
                error ? error->message : "");
  JsonObject *root = json_node_get_object(json_parser_get_root(parser));
  ck_assert_str_eq(json_object_get_string_member(root, "scenario"),
                   "Qwen2.5-0.5B, batch 2x512 bf16, H100 SXM PCIe Gen5");
  JsonArray *results = json_object_get_array_member(root, "results");
  ck_assert_uint_eq(json_array_get_length(results), 4);
  for (guint i = 0; i < 4; i++) {
    JsonObject *o = json_array_get_object_element(results, i);
    g_autoptr(GList) members = json_object_get_members(o);
    GList *m = members;
    for (guint f = 0; f < G_N_ELEMENTS(fields); f++, m = m->next) {
      ck_assert_ptr_nonnull(m);
      ck_assert_str_eq(m->data, fields[f]);
    }
    /* Bytes are integers, times numbers. */
    ck_assert(json_node_get_value_type(json_object_get_member(o, "saved_bytes")) == G_TYPE_INT64);
    ck_assert(JSON_NODE_HOLDS_VALUE(json_object_get_member(o, "step_ms")));
    ck_assert(json_object_get_int_member(o, "d2h_bytes") == json_object_get_int_member(o, "h2d_bytes"));
  }
  /* resident: no copies; the offloads do copy. */
  JsonObject *resident = json_array_get_object_element(results, 0);
  ck_assert_int_eq(json_object_get_int_member(resident, "d2h_copies"), 0);
  JsonObject *sync = json_array_get_object_element(results, 1);
  ck_assert(json_object_get_int_member(sync, "d2h_copies") > 0);
}
END_TEST

START_TEST(run_prints_one_object)
{
  g_auto(TestRun) r = test_offsim("run", "--policy", "offload-async", "--format", "json", NULL);
  ck_assert_int_eq(r.status, 0);
  g_autoptr(JsonParser) parser = json_parser_new();
  ck_assert(json_parser_load_from_data(parser, r.out, -1, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(parser));
  ck_assert_str_eq(json_object_get_string_member(o, "policy"), "offload-async");
  ck_assert(json_object_get_double_member(o, "step_ms") > json_object_get_double_member(o, "compute_ms"));
}
END_TEST

START_TEST(csv_has_a_header_and_a_row_per_policy)
{
  g_auto(TestRun) r = test_offsim("compare", "--format", "csv", NULL);
  ck_assert_int_eq(r.status, 0);
  g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
  ck_assert_uint_eq(g_strv_length(lines), 1 + 4 + 1); /* header, rows, trailing empty */
  ck_assert(g_str_has_prefix(lines[0], "scenario,policy,step_ms,compute_ms,recompute_ms,exposed_transfer_ms,"));
  /* The scenario name holds commas: it is quoted. */
  ck_assert(g_str_has_prefix(lines[1], "\"Qwen2.5-0.5B, batch 2x512 bf16, H100 SXM PCIe Gen5\",resident,"));
}
END_TEST

START_TEST(output_is_byte_identical_across_runs)
{
  const char *formats[] = { "table", "csv", "json" };
  for (guint i = 0; i < G_N_ELEMENTS(formats); i++) {
    g_auto(TestRun) a = test_offsim("compare", "--format", formats[i], NULL);
    g_auto(TestRun) b = test_offsim("compare", "--format", formats[i], NULL);
    ck_assert_str_eq(a.out, b.out);
  }
}
END_TEST

START_TEST(budget_changes_fits)
{
  g_auto(TestRun) r = test_offsim("compare", "--budget", "9GiB", "--format", "csv", NULL);
  ck_assert_int_eq(r.status, 0);
  /* resident (9.96 GiB) does not fit in 9 GiB; offload-sync (8.81 GiB) does. */
  ck_assert_ptr_nonnull(strstr(r.out, ",resident,"));
  g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
  ck_assert_ptr_nonnull(strstr(lines[1], ",false,"));
  ck_assert_ptr_nonnull(strstr(lines[2], ",true,"));
}
END_TEST

/* tiny.ini on a device of `memory`: resident 1.28 GiB, async 1.17 GiB,
 * hybrid 1.23 GiB, checkpoint 1.15 GiB. */
static char *
tiny_on_device(const char *memory)
{
  g_autofree char *text = g_strdup_printf("[scenario]\ninclude = %s/tiny.ini\n[device]\nmemory = %s\n",
                                          OFFSIM_SCENARIOS, memory);
  return write_temp("small-device.ini", text);
}

/* A budget above the device's memory used to make a peak the device cannot
 * hold "fit", and the header said "fits within" even when nothing did. */
START_TEST(fits_never_passes_the_device_memory)
{
  g_autofree char *small = tiny_on_device("1.2GiB");
  g_auto(TestRun) csv = test_offsim("compare", small, "--budget", "2GiB", "--format", "csv", NULL);
  ck_assert_int_eq(csv.status, 0);
  g_auto(GStrv) lines = g_strsplit(csv.out, "\n", -1);
  /* Every row judged against the device's 1.2 GiB: fits exactly when what
   * the caching allocator reserved, replayed on that device, stayed within
   * it (a replay that runs out goes on past it); resident allocates
   * 1.28 GiB and cannot. */
  g_auto(GStrv) head = g_strsplit(lines[0], ",", -1);
  guint c_fits = 0, c_cap = 0, c_reserved = 0;
  for (guint c = 0; head[c]; c++) {
    c_fits = strcmp(head[c], "fits") == 0 ? c : c_fits;
    c_cap = strcmp(head[c], "capacity_bytes") == 0 ? c : c_cap;
    c_reserved = strcmp(head[c], "peak_reserved_bytes") == 0 ? c : c_reserved;
  }
  ck_assert(c_fits && c_cap && c_reserved);
  for (guint i = 0; i < 4; i++) {
    g_auto(GStrv) f = g_strsplit(lines[1 + i], ",", -1);
    ck_assert_str_eq(f[c_cap], "1288490189");
    gboolean within = g_ascii_strtoull(f[c_reserved], NULL, 10) <= 1288490189;
    ck_assert_msg(strcmp(f[c_fits], within ? "true" : "false") == 0, "%s", lines[1 + i]);
  }
  ck_assert(g_str_has_prefix(lines[1], "tiny uniform model,resident,") && strstr(lines[1], ",false,1288490189,"));
  /* The planned row and `offsim plan` plan for the device, not the budget. */
  g_auto(TestRun) table = test_offsim("compare", small, "--budget", "2GiB", NULL);
  ck_assert_int_eq(table.status, 0);
  ck_assert_ptr_nonnull(strstr(table.out, "; 1.20 GiB device, fits if reserved <= 1.20 GiB\n"));
  ck_assert_ptr_null(strstr(table.out, "already fits"));
  g_auto(TestRun) plan = test_offsim("plan", small, "--budget", "2GiB", "--format", "json", NULL);
  ck_assert_int_eq(plan.status, 0);
  g_autoptr(JsonParser) parser = json_parser_new();
  ck_assert(json_parser_load_from_data(parser, plan.out, -1, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(parser));
  ck_assert_int_eq(json_object_get_int_member(o, "budget_bytes"), 1288490189);
  ck_assert_int_le(json_object_get_int_member(o, "peak_device_bytes"), 1288490189);
  g_auto(TestRun) plan_table = test_offsim("plan", small, "--budget", "2GiB", NULL);
  ck_assert_ptr_nonnull(strstr(plan_table.out, "plan under a budget of 1.20 GiB, the device's memory, not --budget "
                                               "2.00 GiB ("));
  /* Nothing fits a 1 GiB device: the header states the capacity, no verdict. */
  g_autofree char *tight = tiny_on_device("1GiB");
  g_auto(TestRun) none = test_offsim("compare", tight, NULL);
  ck_assert_int_eq(none.status, 0);
  ck_assert_ptr_null(strstr(none.out, " yes\n"));
  ck_assert_ptr_nonnull(strstr(none.out, "; 1.00 GiB device, fits if reserved <= 1.00 GiB\n"));
  ck_assert_ptr_null(strstr(none.out, "fits within"));
}
END_TEST

START_TEST(bad_input_exits_2_with_one_line)
{
  g_autofree char *bad = write_temp("bad.ini", "[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 0GB/s\nd2h_bandwidth = 1GB/s\n");
  g_auto(TestRun) r = test_offsim("compare", bad, NULL);
  ck_assert_int_eq(r.status, 2);
  ck_assert_str_eq(r.out, "");
  ck_assert_ptr_nonnull(strstr(r.err, "bad.ini: [link] h2d_bandwidth: expected a positive, finite rate"));
  g_auto(GStrv) err_lines = g_strsplit(r.err, "\n", -1);
  ck_assert_uint_eq(g_strv_length(err_lines), 2); /* one line and the empty tail */

  g_auto(TestRun) missing = test_offsim("run", "/nonexistent/scenario.ini", NULL);
  ck_assert_int_eq(missing.status, 2);
  ck_assert_ptr_nonnull(strstr(missing.err, "/nonexistent/scenario.ini"));

  g_auto(TestRun) option = test_offsim("compare", "--frobnicate", NULL);
  ck_assert_int_eq(option.status, 2);
  g_auto(TestRun) format = test_offsim("compare", "--format", "xml", NULL);
  ck_assert_int_eq(format.status, 2);
  ck_assert_ptr_nonnull(strstr(format.err, "expected table, csv or json"));
  /* Every command parses --format in one place (cli_report_parse_format): a
   * format the command does not print is refused with the ones it does
   * (bench printed a table for csv before). */
  g_auto(TestRun) plan_csv = test_offsim("plan", OFFSIM_SCENARIOS "/tiny.ini", "--budget", "1GiB", "--format", "csv", NULL);
  ck_assert_int_eq(plan_csv.status, 2);
  ck_assert_ptr_nonnull(strstr(plan_csv.err, "--format: expected table or json, got 'csv'"));
  g_auto(TestRun) bench_csv = test_offsim("bench", "--format", "csv", NULL);
  ck_assert_int_eq(bench_csv.status, 2);
  ck_assert_ptr_nonnull(strstr(bench_csv.err, "--format: expected table or json, got 'csv'"));
  g_auto(TestRun) budget = test_offsim("compare", "--budget", "-3GiB", NULL);
  ck_assert_int_eq(budget.status, 2);
  g_auto(TestRun) policy = test_offsim("run", "--policy", "nope", NULL);
  ck_assert_int_eq(policy.status, 2);
  ck_assert_ptr_nonnull(strstr(policy.err, "resident, offload-sync, offload-async, checkpoint-full"));
  g_auto(TestRun) command = test_offsim("frobnicate", NULL);
  ck_assert_int_eq(command.status, 2);
  g_auto(TestRun) two = test_offsim("run", "a.ini", "b.ini", NULL);
  ck_assert_int_eq(two.status, 2);
}
END_TEST

START_TEST(every_bundled_scenario_runs)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = g_dir_open(OFFSIM_SCENARIOS, 0, &error);
  ck_assert_ptr_nonnull(dir);
  guint n = 0;
  for (const char *name = g_dir_read_name(dir); name; name = g_dir_read_name(dir)) {
    if (!g_str_has_suffix(name, ".ini"))
      continue;
    g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, name, NULL);
    g_auto(TestRun) r = test_offsim("compare", path, "--format", "json", NULL);
    ck_assert_msg(r.status == 0, "%s: exit %d: %s", name, r.status, r.err);
    n++;
  }
  ck_assert_uint_ge(n, 2);
}
END_TEST

START_TEST(embedded_default_equals_the_bundled_file)
{
  g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, "default.ini", NULL);
  g_auto(TestRun) a = test_offsim("compare", "--format", "json", NULL);
  g_auto(TestRun) b = test_offsim("compare", path, "--format", "json", NULL);
  ck_assert_str_eq(a.out, b.out);
  /* The embedded default is the Qwen2.5-0.5B preset written out: its
   * config.json and profile give the same figures. */
  g_autofree char *preset = g_build_filename(OFFSIM_SCENARIOS, "qwen2.5-0.5b.ini", NULL);
  g_auto(TestRun) c = test_offsim("compare", preset, "--format", "json", NULL);
  ck_assert_int_eq(c.status, 0);
  ck_assert_str_eq(a.out, c.out);
}
END_TEST

START_TEST(model_prints_a_scenario_that_runs)
{
  g_autofree char *config = g_build_filename(OFFSIM_SCENARIOS, "models", "qwen2.5-0.5b.json", NULL);
  g_autofree char *preset = g_build_filename(OFFSIM_SCENARIOS, "qwen2.5-0.5b.ini", NULL);
  /* --ops fused: the preset's kernels (the default, hf, is HF's code). */
  g_auto(TestRun) m = test_offsim("model", "--hf-config", config, "--batch", "2", "--seq", "512", "--ops", "fused", NULL);
  ck_assert_int_eq(m.status, 0);
  ck_assert_ptr_nonnull(strstr(m.out, "[transformer]\nhidden = 896\n"));
  ck_assert_ptr_nonnull(strstr(m.out, "494032768 parameters"));
  /* Run it: the same figures as the preset, which reads the same config. */
  g_autofree char *path = write_temp("model.ini", m.out);
  g_auto(TestRun) a = test_offsim("compare", path, "--format", "csv", NULL);
  g_auto(TestRun) b = test_offsim("compare", preset, "--format", "csv", NULL);
  ck_assert_int_eq(a.status, 0);
  g_auto(GStrv) la = g_strsplit(a.out, "\n", -1), lb = g_strsplit(b.out, "\n", -1);
  ck_assert_uint_eq(g_strv_length(la), g_strv_length(lb));
  for (guint i = 1; la[i] && *la[i]; i++) {
    /* Drop the scenario name (the first field, quoted: it holds commas). */
    const char *ra = strstr(la[i], "\","), *rb = strstr(lb[i], "\",");
    ck_assert_ptr_nonnull(ra);
    ck_assert_str_eq(ra, rb);
  }

  g_autofree char *bad = write_temp("bert.json", "{\"model_type\": \"bert\"}");
  g_auto(TestRun) e = test_offsim("model", "--hf-config", bad, "--batch", "1", "--seq", "8", NULL);
  ck_assert_int_eq(e.status, 2);
  ck_assert_ptr_nonnull(strstr(e.err, "'bert' is not supported"));
  g_auto(TestRun) f = test_offsim("model", "--hf-config", config, "--seq", "8", NULL);
  ck_assert_int_eq(f.status, 2);
  g_auto(TestRun) g = test_offsim("model", "--hf-config", config, "--batch", "1", "--seq", "8", "--dtype", "fp8", NULL);
  ck_assert_int_eq(g.status, 2);
  ck_assert_ptr_nonnull(strstr(g.err, "--dtype: expected one of fp32, bf16, fp16"));
}
END_TEST

START_TEST(compare_with_a_budget_adds_the_plan)
{
  g_autofree char *tiny = g_build_filename(OFFSIM_SCENARIOS, "tiny.ini", NULL);
  g_auto(TestRun) r = test_offsim("compare", tiny, "--budget", "1.2GiB", NULL);
  ck_assert_int_eq(r.status, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "\nplanned "));
  ck_assert_ptr_nonnull(strstr(r.out, "[policy.plan]\nkind = plan\n"));
  ck_assert_ptr_nonnull(strstr(r.out, "layer  action"));
  g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
  for (char **line = lines; *line; line++)
    ck_assert_msg(g_utf8_strlen(*line, -1) <= 112, "line longer than 112 columns: %s", *line);
  g_auto(TestRun) j = test_offsim("compare", tiny, "--budget", "1.2GiB", "--format", "json", NULL);
  ck_assert_int_eq(j.status, 0);
  ck_assert_ptr_nonnull(strstr(j.out, "\"policy\": \"planned\""));
}
END_TEST

START_TEST(sweep_is_deterministic_and_shards_concatenate)
{
  g_autofree char *tiny = g_build_filename(OFFSIM_SCENARIOS, "tiny.ini", NULL);
  const char *bw = "link.h2d_bandwidth=10GB/s,20GB/s,40GB/s", *layers = "model.forward=1ms,2ms,4ms,8ms";
  g_auto(TestRun) one = test_offsim("sweep", tiny, "--set", bw, "--set", layers, "--jobs", "1", NULL);
  g_auto(TestRun) two = test_offsim("sweep", tiny, "--set", bw, "--set", layers, "--jobs", "2", NULL);
  ck_assert_int_eq(one.status, 0);
  ck_assert_str_eq(one.out, two.out);
  /* Not a terminal: no progress bar, nothing on stderr. */
  ck_assert_str_eq(one.err, "");
  g_auto(GStrv) lines = g_strsplit(one.out, "\n", -1);
  /* A header, 3 x 4 points x 4 policies, the trailing empty string. */
  ck_assert_uint_eq(g_strv_length(lines), 1 + 48 + 1);
  ck_assert(g_str_has_prefix(lines[0], "link.h2d_bandwidth,model.forward,scenario,policy,step_ms,"));
  ck_assert(g_str_has_prefix(lines[1], "10GB/s,1ms,tiny uniform model,resident,"));
  ck_assert(g_str_has_prefix(lines[48], "40GB/s,8ms,tiny uniform model,checkpoint,"));
  /* Three shards concatenate to the same rows (the header comes with shard 0). */
  g_autoptr(GString) merged = g_string_new(NULL);
  for (int s = 0; s < 3; s++) {
    g_autofree char *shard = g_strdup_printf("%d/3", s);
    g_auto(TestRun) r = test_offsim("sweep", tiny, "--set", bw, "--set", layers, "--shard", shard, NULL);
    ck_assert_int_eq(r.status, 0);
    g_string_append(merged, r.out);
  }
  g_auto(GStrv) parts = g_strsplit(merged->str, "\n", -1);
  ck_assert_uint_eq(g_strv_length(parts), g_strv_length(lines));
  g_autoptr(GHashTable) rows = g_hash_table_new(g_str_hash, g_str_equal);
  for (char **l = lines; *l; l++)
    g_hash_table_add(rows, *l);
  for (char **l = parts; *l; l++)
    ck_assert_msg(g_hash_table_contains(rows, *l), "a shard row not in the whole sweep: %s", *l);
}
END_TEST

START_TEST(sweep_rejects_bad_values_before_running)
{
  g_autofree char *tiny = g_build_filename(OFFSIM_SCENARIOS, "tiny.ini", NULL);
  g_auto(TestRun) a = test_offsim("sweep", tiny, "--set", "link.h2d_bandwidth=10GB/s,fast", NULL);
  ck_assert_int_eq(a.status, 2);
  ck_assert_ptr_nonnull(strstr(a.err, "[link] h2d_bandwidth: expected a number with a unit, got 'fast'"));
  g_auto(TestRun) b = test_offsim("sweep", tiny, "--set", "link.bandwith=10GB/s", NULL);
  ck_assert_int_eq(b.status, 2);
  ck_assert_ptr_nonnull(strstr(b.err, "bandwith: unknown key"));
  g_auto(TestRun) c = test_offsim("sweep", tiny, "--set", "nodot=1", NULL);
  ck_assert_int_eq(c.status, 2);
  g_auto(TestRun) d = test_offsim("sweep", tiny, "--set", "link.latency=1us", "--shard", "3/3", NULL);
  ck_assert_int_eq(d.status, 2);
  g_auto(TestRun) e = test_offsim("sweep", tiny, NULL);
  ck_assert_int_eq(e.status, 2);
  ck_assert_str_eq(a.out, "");
  /* A key in two --set: the rows were labelled 1us/2us but every point ran at 3us. */
  g_auto(TestRun) twice =
    test_offsim("sweep", tiny, "--set", "link.latency=1us,2us", "--set", "link.latency=3us", NULL);
  ck_assert_int_eq(twice.status, 2);
  ck_assert_str_eq(twice.out, "");
  ck_assert_str_eq(twice.err, "offsim: --set link.latency: the key is given twice (give all its values once: "
                              "link.latency=v1,v2,...)\n");
  /* No values: a sweep of no points used to print the header and exit 0. */
  const char *empty[] = { "link.latency=", "link.latency= ", "policy.async.prefetch=" };
  for (guint i = 0; i < G_N_ELEMENTS(empty); i++) {
    g_auto(TestRun) none = test_offsim("sweep", tiny, "--set", empty[i], NULL);
    ck_assert_msg(none.status == 2, "%s: exit %d", empty[i], none.status);
    ck_assert_str_eq(none.out, "");
    ck_assert_msg(strstr(none.err, ": no values (expected ") != NULL, "%s: %s", empty[i], none.err);
  }
}
END_TEST

/* `offsim ARGS` (NULL-terminated) through sh, its stdout sent to `out`
 * (/dev/null when NULL) and, with `no_gnuplot`, a PATH without gnuplot;
 * what it printed on stderr into `err`. */
static int
run_with(const char *out, gboolean no_gnuplot, const char *const *args, char **err)
{
  g_autoptr(GStrvBuilder) argv = g_strv_builder_new();
  g_strv_builder_add_many(argv, "/bin/sh", "-c", "exec \"$0\" \"$@\" > \"$OFFSIM_OUT\"", OFFSIM_BINARY, NULL);
  g_strv_builder_addv(argv, (const char **)args);
  g_auto(GStrv) cmd = g_strv_builder_end(argv);
  g_auto(GStrv) env = g_environ_setenv(g_get_environ(), "OFFSIM_OUT", out ? out : "/dev/null", TRUE);
  if (no_gnuplot)
    env = g_environ_setenv(env, "PATH", "/nonexistent", TRUE);
  int wait_status = 0;
  ck_assert(g_spawn_sync(NULL, cmd, env, G_SPAWN_DEFAULT, NULL, NULL, NULL, err, &wait_status, NULL));
  ck_assert_msg(WIFEXITED(wait_status), "offsim died of a signal: %s", *err);
  return WEXITSTATUS(wait_status);
}

/* README: 0 ok, 1 internal error (a bug), 2 bad input (or an output that
 * cannot be written, stdout too), 3 a missing external tool, 4 plan: no
 * plan fits.  A full stdout used to exit 1 (run, compare, budget, bench) or
 * 0 with the report lost (plan, sweep). */
START_TEST(exit_codes_as_documented)
{
  g_autofree char *tiny = g_build_filename(OFFSIM_SCENARIOS, "tiny.ini", NULL);
  g_autofree char *chunks = g_build_filename(OFFSIM_SCENARIOS, "budget", "chapter42.csv", NULL);
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *plots = g_build_filename(dir, "plots", NULL);
  const struct {
    int status;
    const char *out; /* stdout */
    gboolean no_gnuplot;
    const char *args[10];
  } cases[] = {
    { 0, NULL, FALSE, { "run", tiny } },
    { 0, NULL, FALSE, { "compare", tiny, "--budget", "1.2GiB" } },
    { 0, NULL, FALSE, { "plan", tiny, "--budget", "1.2GiB" } },
    { 4, NULL, FALSE, { "plan", tiny, "--budget", "1MiB" } },
    { 0, NULL, FALSE, { "sweep", tiny, "--set", "link.latency=1us,2us" } },
    { 0, NULL, FALSE, { "budget", chunks, "--budget", "384MiB", "--bandwidth", "8GiB/s" } },
    { 0, NULL, FALSE, { "--version" } },
    { 2, NULL, FALSE, { "run", tiny, "--frobnicate" } },
    { 2, NULL, FALSE, { "plan", tiny, "--budget", "lots" } },
    { 2, NULL, FALSE, { "sweep", tiny, "--set", "link.latency=fast" } },
    { 2, NULL, FALSE, { "budget", tiny, "--budget", "1GiB", "--bandwidth", "8GiB/s" } },
    { 2, NULL, FALSE, { "bench", "--only", "everything" } },
    { 2, NULL, FALSE, { "frobnicate" } },
    { 3, NULL, TRUE, { "compare", tiny, "--plot", plots } },
    { 3, NULL, TRUE, { "sweep", tiny, "--set", "link.latency=1us,2us", "--plot", plots } },
    { 2, "/dev/full", FALSE, { "run", tiny } },
    { 2, "/dev/full", FALSE, { "compare", tiny, "--format", "json" } },
    { 2, "/dev/full", FALSE, { "plan", tiny, "--budget", "1.2GiB" } },
    { 2, "/dev/full", FALSE, { "plan", tiny, "--budget", "1MiB" } },
    { 2, "/dev/full", FALSE, { "sweep", tiny, "--set", "link.latency=1us,2us" } },
    { 2, "/dev/full", FALSE, { "budget", chunks, "--budget", "384MiB", "--bandwidth", "8GiB/s" } },
    { 2, "/dev/full", FALSE, { "--version" } },
    { 2, "/dev/full", FALSE, { "show", tiny } },
    { 2, "/dev/full", FALSE, { "model", "--hf-config", OFFSIM_SCENARIOS "/models/qwen2.5-0.5b.json", "--batch", "1",
                                "--seq", "8" } },
    /* GLib's own --help printed and exited 0 whatever became of it. */
    { 2, "/dev/full", FALSE, { "--help" } },
    { 2, "/dev/full", FALSE, { "run", "--help" } },
    { 2, "/dev/full", FALSE, { "compare", "-h" } },
    { 2, "/dev/full", FALSE, { "plan", "--help-all" } },
    { 2, "/dev/full", FALSE, { "model", "-?" } },
    { 2, "/dev/full", FALSE, { "show", "--help" } },
    { 2, "/dev/full", FALSE, { "sweep", "--help" } },
    { 2, "/dev/full", FALSE, { "bench", "--help" } },
    { 2, "/dev/full", FALSE, { "budget", "--help" } },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    if (cases[i].out && !g_file_test(cases[i].out, G_FILE_TEST_EXISTS))
      continue;
    g_autofree char *err = NULL;
    int status = run_with(cases[i].out, cases[i].no_gnuplot, cases[i].args, &err);
    g_autofree char *line = g_strjoinv(" ", (char **)cases[i].args);
    ck_assert_msg(status == cases[i].status, "offsim %s%s: exit %d, expected %d: %s", line,
                  cases[i].out ? " > /dev/full" : "", status, cases[i].status, err);
    if (status != 0 && status != 4)
      ck_assert_msg(g_str_has_prefix(err, "offsim: ") && strchr(err, '\n') == strrchr(err, '\n'),
                    "offsim %s: not one line: %s", line, err);
    if (cases[i].out)
      ck_assert_str_eq(err, "offsim: stdout: cannot write the report: No space left on device\n");
  }
  /* Drawing without gnuplot made no directory. */
  ck_assert(!g_file_test(plots, G_FILE_TEST_EXISTS));
}
END_TEST

/* An option of one value given twice kept the last silently, and two
 * outputs on one path kept the one written last; `sweep --jobs 0` ran on
 * every core against its own message.  Each is refused before anything
 * runs, and --help is still help. */
START_TEST(options_given_once_and_outputs_apart)
{
  g_autofree char *tiny = g_build_filename(OFFSIM_SCENARIOS, "tiny.ini", NULL);
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *x = g_build_filename(dir, "x", NULL);
  g_autofree char *x_again = g_build_filename(dir, ".", "x", NULL);
  g_autofree char *y = g_build_filename(dir, "y", NULL);
  g_autofree char *m = g_strdup_printf("--memory=%s", y);
  const struct {
    const char *args[10];
    const char *expect;
  } cases[] = {
    { { "run", tiny, "--trace", x, "--timeline", x }, "the same file as --trace" },
    { { "run", tiny, "--memory", x, "--plot-script", x_again }, "--plot-script '" },
    { { "run", tiny, "--memory", x, "--memory", y }, "offsim: run: --memory: given twice ('" },
    { { "run", tiny, m, "--memory", x, "--memory", x }, "--memory: given 3 times" },
    { { "run", tiny, "-f", "json", "--format=csv" }, "--format: given twice ('json', then 'csv'); give it once" },
    { { "compare", tiny, "--budget", "1GiB", "-b", "2GiB" }, "--budget: given twice" },
    { { "plan", tiny, "--budget", "1GiB", "--budget", "1GiB" }, "--budget: given twice" },
    { { "sweep", tiny, "--set", "link.latency=1us", "--jobs", "1", "-j", "2" }, "--jobs: given twice" },
    { { "sweep", tiny, "--set", "link.latency=1us", "--jobs", "0" }, "--jobs: expected 1 to 1024 threads" },
    { { "budget", tiny, "--budget", "1GiB", "--budget", "2GiB", "--bandwidth", "8GiB/s" }, "--budget: given twice" },
    { { "model", "--batch", "1", "--batch", "2" }, "--batch: given twice ('1', then '2')" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *err = NULL;
    int status = run_with(NULL, FALSE, cases[i].args, &err);
    g_autofree char *line = g_strjoinv(" ", (char **)cases[i].args);
    ck_assert_msg(status == 2 && strstr(err, cases[i].expect) && strchr(err, '\n') == strrchr(err, '\n'),
                  "offsim %s: exit %d: %s", line, status, err);
  }
  ck_assert(!g_file_test(x, G_FILE_TEST_EXISTS) && !g_file_test(y, G_FILE_TEST_EXISTS));
  /* Repeatable options stay repeatable; help beside a value is help. */
  g_auto(TestRun) sets = test_offsim("sweep", tiny, "--set", "link.latency=1us", "--set", "link.h2d_bandwidth=10GB/s", NULL);
  ck_assert_msg(sets.status == 0, "%s", sets.err);
  g_auto(TestRun) help = test_offsim("run", "--format", "json", "--help", NULL);
  ck_assert_int_eq(help.status, 0);
  ck_assert_ptr_nonnull(strstr(help.out, "--timeline=FILE"));
}
END_TEST

static Suite *
cli_suite(void)
{
  Suite *s = suite_create("cli");
  TCase *tc = tcase_create("offsim");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, compare_default_prints_every_default_policy);
  tcase_add_test(tc, json_has_the_contract_fields_in_order);
  tcase_add_test(tc, run_prints_one_object);
  tcase_add_test(tc, csv_has_a_header_and_a_row_per_policy);
  tcase_add_test(tc, output_is_byte_identical_across_runs);
  tcase_add_test(tc, budget_changes_fits);
  tcase_add_test(tc, fits_never_passes_the_device_memory);
  tcase_add_test(tc, bad_input_exits_2_with_one_line);
  tcase_add_test(tc, every_bundled_scenario_runs);
  tcase_add_test(tc, embedded_default_equals_the_bundled_file);
  tcase_add_test(tc, model_prints_a_scenario_that_runs);
  tcase_add_test(tc, compare_with_a_budget_adds_the_plan);
  tcase_add_test(tc, sweep_is_deterministic_and_shards_concatenate);
  tcase_add_test(tc, sweep_rejects_bad_values_before_running);
  tcase_add_test(tc, exit_codes_as_documented);
  tcase_add_test(tc, options_given_once_and_outputs_apart);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  return test_run_suite(cli_suite());
}
