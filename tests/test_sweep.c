/* tests/test_sweep.c — `offsim sweep` streams: rows formatted without a JSON
 * node are the bytes the JSON-driven formatting gave, the streamed CSV is the
 * CSV the whole sweep held in memory made (for one thread and two), rows come
 * in point order through a window that bounds the points alive at once, and
 * --out is written whole or not at all. */
#include "testutil.h"

#include "base/error.h"
#include "base/output.h"
#include "cli/report.h"
#include "sweep/grid.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TINY OFFSIM_SCENARIOS "/tiny.ini"
#define DEFAULT OFFSIM_SCENARIOS "/default.ini"

/* ---- the formatting before streaming, kept here as the reference -------- */

/* The row as cli_report_csv_row wrote it from the result's JSON object. */
static void
json_csv_row(GString *out, const char *prefix, const SimResult *r)
{
  g_autoptr(JsonNode) node = cli_report_result_json(r);
  JsonObject *object = json_node_get_object(node);
  g_autoptr(GList) members = json_object_get_members(object);
  g_string_append(out, prefix ? prefix : "");
  for (GList *m = members; m; m = m->next) {
    JsonNode *v = json_object_get_member(object, m->data);
    if (JSON_NODE_HOLDS_NULL(v)) {
      /* an empty field */
    } else if (json_node_get_value_type(v) == G_TYPE_STRING) {
      sim_output_csv_field(out, json_node_get_string(v));
    } else if (json_node_get_value_type(v) == G_TYPE_BOOLEAN) {
      g_string_append(out, json_node_get_boolean(v) ? "true" : "false");
    } else if (json_node_get_value_type(v) == G_TYPE_INT64) {
      g_string_append_printf(out, "%" G_GINT64_FORMAT, json_node_get_int(v));
    } else {
      sim_output_number(out, json_node_get_double(v));
    }
    g_string_append_c(out, m->next ? ',' : '\n');
  }
}

static void
json_csv_header(GString *out, const char *prefix, const SimResult *any)
{
  g_autoptr(JsonNode) node = cli_report_result_json(any);
  g_autoptr(GList) members = json_object_get_members(json_node_get_object(node));
  g_string_append(out, prefix ? prefix : "");
  for (GList *m = members; m; m = m->next) {
    sim_output_csv_field(out, m->data);
    g_string_append_c(out, m->next ? ',' : '\n');
  }
}

/* The whole sweep in memory, then formatted: what `offsim sweep` printed
 * before it streamed. */
static char *
in_memory_csv(const char *path, const char *const *sets, guint shard, guint shards)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimConfig) config = sim_config_load_file(path, &error);
  ck_assert_msg(config != NULL, "%s", error ? error->message : "");
  g_autoptr(GPtrArray) axes = g_ptr_array_new_with_free_func((GDestroyNotify)sweep_grid_axis_free);
  for (const char *const *s = sets; *s; s++)
    g_ptr_array_add(axes, sweep_grid_axis_parse(*s, "--set", NULL));
  SweepGridOptions options = { .jobs = 2, .shard = shard, .shards = shards, .shard_option = "--shard" };
  g_autoptr(SweepGrid) grid = sweep_grid_run(config, g_steal_pointer(&axes), &options, &error);
  ck_assert_msg(grid != NULL, "%s", error ? error->message : "");
  GString *csv = g_string_new(NULL);
  g_autoptr(GString) prefix = g_string_new(NULL);
  for (guint a = 0; a < grid->axes->len; a++) {
    sim_output_csv_field(prefix, ((SweepGridAxis *)g_ptr_array_index(grid->axes, a))->name);
    g_string_append_c(prefix, ',');
  }
  const SweepGridPoint *first = g_ptr_array_index(grid->points, 0);
  if (shard == 0)
    json_csv_header(csv, prefix->str, g_ptr_array_index(first->results, 0));
  for (guint i = 0; i < grid->points->len; i++) {
    const SweepGridPoint *point = g_ptr_array_index(grid->points, i);
    g_string_truncate(prefix, 0);
    for (guint a = 0; a < grid->axes->len; a++) {
      sim_output_csv_field(prefix, sweep_grid_value(grid, a, point->index));
      g_string_append_c(prefix, ',');
    }
    for (guint k = 0; k < point->results->len; k++)
      json_csv_row(csv, prefix->str, g_ptr_array_index(point->results, k));
  }
  return g_string_free(csv, FALSE);
}

static char *
read_text(const char *path)
{
  char *text = NULL;
  ck_assert_msg(g_file_get_contents(path, &text, NULL, NULL), "%s is missing", path);
  return text;
}

/* The names in `dir`, sorted, comma-separated ("" when empty). */
static char *
list_dir(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  for (const char *n; d && (n = g_dir_read_name(d));)
    g_ptr_array_add(names, g_strdup(n));
  g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
  g_ptr_array_add(names, NULL);
  return g_strjoinv(",", (char **)names->pdata);
}

/* ---- rows --------------------------------------------------------------- */

/* Real results and one with every awkward value: quotes, commas and line
 * breaks in strings, no peak layer, NaN, infinities, -0 and integers past
 * 2^63 (written as JSON holds them, signed). */
START_TEST(rows_are_the_bytes_of_the_json_formatting)
{
  g_autoptr(SimScenario) s = sim_scenario_load_file(TINY, NULL);
  ck_assert_ptr_nonnull(s);
  g_autoptr(GString) direct = g_string_new(NULL), reference = g_string_new(NULL);
  for (guint i = 0; i < s->policies->len; i++) {
    g_autoptr(SimResult) r = test_evaluate(s, ((SimPolicy *)g_ptr_array_index(s->policies, i))->name);
    cli_report_csv_row(direct, "1,\"a,b\",", r);
    json_csv_row(reference, "1,\"a,b\",", r);
    if (i == 0) {
      g_autoptr(GString) header = g_string_new(NULL), old = g_string_new(NULL);
      cli_report_csv_header(header, NULL);
      json_csv_header(old, NULL, r);
      ck_assert_str_eq(header->str, old->str);
    }
  }
  SimResult odd = {
    .scenario = (char *)"a \"quoted\", name\nwith a break",
    .policy = (char *)"p,q",
    .step_ms = NAN,
    .compute_ms = INFINITY,
    .recompute_ms = -INFINITY,
    .exposed_transfer_ms = -0.0,
    .saved_bytes = G_MAXUINT64,
    .d2h_bytes = 1ULL << 63,
    .h2d_bytes = 0,
    .d2h_copies = G_MAXUINT,
    .h2d_copies = 7,
    .peak_device = { .bytes = G_MININT64, .time_ms = 9.36, .phase = "backward", .layer = SIM_NO_LAYER,
                     .where = (char *)"", .live = (char *)"static 1 GiB + \"x\"" },
    .peak_host = { .bytes = 42, .time_ms = 1e-300, .phase = "", .layer = 3, .where = (char *)"L3",
                   .live = (char *)"\r" },
    .capacity_bytes = 80ULL << 30,
    .fits = TRUE,
    .time_model = "kernel",
    .gemm_ms = 1e300,
    .host_wait_ms = 0.5,
  };
  cli_report_csv_row(direct, NULL, &odd);
  json_csv_row(reference, NULL, &odd);
  odd.peak_device.layer = 0;
  odd.fits = FALSE;
  cli_report_csv_row(direct, "", &odd);
  json_csv_row(reference, "", &odd);
  ck_assert_str_eq(direct->str, reference->str);
}
END_TEST

/* ---- the streamed CSV --------------------------------------------------- */

/* Three keys on tiny.ini (12 points, 48 rows): what one thread and two
 * stream, to stdout and to --out, is what the whole sweep in memory made;
 * shards are that sweep's rows, shard 0 with the header. */
START_TEST(streamed_csv_is_the_in_memory_csv)
{
  const char *sets[] = { "link.h2d_bandwidth=10GB/s,25GB/s,55GB/s", "link.latency=2us,20us",
                         "model.forward=1ms,2ms", NULL };
  g_autofree char *expected = in_memory_csv(TINY, sets, 0, 1);
  g_auto(GStrv) lines = g_strsplit(expected, "\n", -1);
  ck_assert_uint_eq(g_strv_length(lines), 1 + 12 * 4 + 1);
  g_autofree char *dir = test_tmp_dir_new();
  const char *jobs[] = { "1", "2" };
  for (guint j = 0; j < G_N_ELEMENTS(jobs); j++) {
    g_auto(TestRun) r = test_offsim("sweep", TINY, "--set", sets[0], "--set", sets[1], "--set", sets[2], "--jobs",
                                    jobs[j], NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_str_eq(r.out, expected);
    g_autofree char *out = g_build_filename(dir, "sweep.csv", NULL);
    g_auto(TestRun) f = test_offsim("sweep", TINY, "--set", sets[0], "--set", sets[1], "--set", sets[2], "--jobs",
                                    jobs[j], "--out", out, NULL);
    ck_assert_msg(f.status == 0, "exit %d: %s", f.status, f.err);
    ck_assert_str_eq(f.out, "");
    g_autofree char *written = read_text(out);
    ck_assert_str_eq(written, expected);
    g_autofree char *files = list_dir(dir);
    ck_assert_str_eq(files, "sweep.csv");
  }
  for (guint shard = 0; shard < 3; shard++) {
    g_autofree char *spec = g_strdup_printf("%u/3", shard);
    g_autofree char *part = in_memory_csv(TINY, sets, shard, 3);
    g_auto(TestRun) r = test_offsim("sweep", TINY, "--set", sets[0], "--set", sets[1], "--set", sets[2], "--jobs",
                                    "2", "--shard", spec, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_str_eq(r.out, part);
    ck_assert(g_str_has_prefix(r.out, "link.h2d_bandwidth,") == (shard == 0));
  }
}
END_TEST

/* ---- the window --------------------------------------------------------- */

typedef struct {
  guint written;
  guint next;       /* the index the next write must have */
  guint shards;
  guint slow_every; /* the writer sleeps on these points, letting the workers run ahead */
  guint fail_at;    /* the write that fails, or G_MAXUINT */
  gboolean had_results;
} Order;

static gboolean
format_index(const SweepGrid *g, const SweepGridPoint *point, GString *out, gpointer data)
{
  (void)g, (void)data;
  g_string_append_printf(out, "%u:%u\n", point->index, point->results->len);
  return FALSE;
}

static gboolean
write_in_order(SweepGrid *g, SweepGridPoint *point, const GString *text, gpointer data, GError **error)
{
  (void)g;
  Order *o = data;
  ck_assert_uint_eq(point->index, o->next);
  g_autofree char *expected = g_strdup_printf("%u:4\n", point->index);
  ck_assert_str_eq(text->str, expected);
  o->had_results |= point->results != NULL;
  o->next += o->shards;
  if (o->written++ == o->fail_at) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "stop here");
    return FALSE;
  }
  if (o->slow_every && point->index % o->slow_every == 0)
    g_usleep(20000);
  return TRUE;
}

static SweepGrid *
latency_grid(const SimConfig *config, guint points, const SweepGridOptions *options)
{
  g_autoptr(GString) set = g_string_new("link.latency=");
  for (guint i = 0; i < points; i++)
    g_string_append_printf(set, "%s%uus", i ? "," : "", i + 1);
  g_autoptr(GPtrArray) axes = g_ptr_array_new_with_free_func((GDestroyNotify)sweep_grid_axis_free);
  g_ptr_array_add(axes, sweep_grid_axis_parse(set->str, "--set", NULL));
  g_autoptr(GError) error = NULL;
  SweepGrid *grid = sweep_grid_new(config, g_steal_pointer(&axes), options, &error);
  ck_assert_msg(grid != NULL, "%s", error ? error->message : "");
  return grid;
}

/* A slow writer lets four workers run ahead: the points alive at once (in
 * flight or waiting for their turn) never pass the window, whatever the size
 * of the sweep, and they are handed over in order, results already freed on
 * the workers. */
START_TEST(rows_come_in_order_through_a_bounded_window)
{
  g_autoptr(SimConfig) config = sim_config_load_file(TINY, NULL);
  ck_assert_ptr_nonnull(config);
  const guint windows[] = { 1, 3, 8 };
  for (guint w = 0; w < G_N_ELEMENTS(windows); w++) {
    for (guint shards = 1; shards <= 2; shards++) {
      SweepGridOptions options = { .jobs = 4, .shard = shards - 1, .shards = shards };
      g_autoptr(SweepGrid) grid = latency_grid(config, 200, &options);
      Order order = { .next = shards - 1, .shards = shards, .slow_every = 17, .fail_at = G_MAXUINT };
      SweepGridStream stream = { .format = format_index, .write = write_in_order, .data = &order,
                                   .window = windows[w] };
      g_autoptr(GError) error = NULL;
      ck_assert_msg(sweep_grid_stream(grid, config, &options, &stream, &error), "%s", error ? error->message : "");
      ck_assert_uint_eq(order.written, 200 / shards);
      ck_assert_msg(stream.peak_held <= windows[w], "%u points alive, window %u", stream.peak_held, windows[w]);
      ck_assert_uint_eq(stream.peak_held, windows[w]);
      ck_assert(!order.had_results);
      ck_assert_uint_eq(grid->points->len, 0);
    }
  }
  /* The default window is 64 points per thread, not the sweep. */
  SweepGridOptions options = { .jobs = 2 };
  g_autoptr(SweepGrid) grid = latency_grid(config, 1000, &options);
  Order order = { .shards = 1, .fail_at = G_MAXUINT };
  SweepGridStream stream = { .format = format_index, .write = write_in_order, .data = &order };
  ck_assert(sweep_grid_stream(grid, config, &options, &stream, NULL));
  ck_assert_uint_eq(order.written, 1000);
  ck_assert_uint_eq(stream.peak_held, 128);
}
END_TEST

/* A failing write stops the sweep with its error: nothing after it is
 * written, and the points in flight are dropped. */
START_TEST(a_failing_write_stops_the_sweep)
{
  g_autoptr(SimConfig) config = sim_config_load_file(TINY, NULL);
  SweepGridOptions options = { .jobs = 2 };
  g_autoptr(SweepGrid) grid = latency_grid(config, 100, &options);
  Order order = { .shards = 1, .fail_at = 10 };
  SweepGridStream stream = { .format = format_index, .write = write_in_order, .data = &order, .window = 6 };
  g_autoptr(GError) error = NULL;
  ck_assert(!sweep_grid_stream(grid, config, &options, &stream, &error));
  ck_assert_str_eq(error->message, "stop here");
  ck_assert_uint_eq(order.written, 11);
}
END_TEST

/* ---- --out -------------------------------------------------------------- */

/* Point 3 of this grid fails (kv_heads 7 does not divide heads 16, while each
 * value alone is fine): stdout has the rows before it, then exit 2; --out
 * keeps the file that was there and leaves no temporary. */
START_TEST(a_failed_sweep_leaves_no_partial_out)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *out = g_build_filename(dir, "sweep.csv", NULL);
  ck_assert(g_file_set_contents(out, "old\n", -1, NULL));
  const char *jobs[] = { "1", "2" };
  for (guint j = 0; j < G_N_ELEMENTS(jobs); j++) {
    g_auto(TestRun) f = test_offsim("sweep", DEFAULT, "--set", "transformer.heads=14,16", "--set",
                                    "transformer.kv_heads=2,7", "--jobs", jobs[j], "--out", out, NULL);
    ck_assert_msg(f.status == 2, "exit %d: %s", f.status, f.err);
    ck_assert_msg(strstr(f.err, "sweep point 3:") && strstr(f.err, "does not divide"), "%s", f.err);
    g_autofree char *kept = read_text(out);
    ck_assert_str_eq(kept, "old\n");
    g_autofree char *files = list_dir(dir);
    ck_assert_str_eq(files, "sweep.csv");

    g_auto(TestRun) r = test_offsim("sweep", DEFAULT, "--set", "transformer.heads=14,16", "--set",
                                    "transformer.kv_heads=2,7", "--jobs", jobs[j], NULL);
    ck_assert_int_eq(r.status, 2);
    g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
    ck_assert_uint_eq(g_strv_length(lines), 1 + 3 * 4 + 1);
    ck_assert(g_str_has_prefix(lines[12], "16,2,"));
  }
}
END_TEST

/* --keep-going: point 1 of heads 16,14 x kv_heads 2,7 fails (7 does not
 * divide 16).  Its row holds its swept values, every result field empty and
 * the message the sweep stops with without --keep-going; the other rows are
 * the rows of the sweeps that hold those values, each with an empty error
 * field; the sweep goes on past it and exits 0.  --out gets the same bytes. */
static char *
without_error_field(const char *csv)
{
  g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
  for (char **l = lines; *l; l++)
    if (**l) {
      char *comma = strrchr(*l, ',');
      ck_assert_ptr_nonnull(comma);
      *comma = '\0';
    }
  return g_strjoinv("\n", lines);
}

START_TEST(keep_going_writes_a_failed_point_as_a_row)
{
  g_auto(TestRun) stopped = test_offsim("sweep", DEFAULT, "--set", "transformer.heads=16,14", "--set",
                                        "transformer.kv_heads=2,7", NULL);
  ck_assert_int_eq(stopped.status, 2);
  g_auto(TestRun) first = test_offsim("sweep", DEFAULT, "--set", "transformer.heads=16", "--set",
                                      "transformer.kv_heads=2", NULL);
  g_auto(TestRun) rest = test_offsim("sweep", DEFAULT, "--set", "transformer.heads=14", "--set",
                                     "transformer.kv_heads=2,7", NULL);
  ck_assert_int_eq(first.status, 0);
  ck_assert_int_eq(rest.status, 0);
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *out = g_build_filename(dir, "sweep.csv", NULL);
  const char *jobs[] = { "1", "2" };
  for (guint j = 0; j < G_N_ELEMENTS(jobs); j++) {
    g_auto(TestRun) r = test_offsim("sweep", DEFAULT, "--set", "transformer.heads=16,14", "--set",
                                    "transformer.kv_heads=2,7", "--jobs", jobs[j], "--keep-going", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "1 of 4 points failed"), "%s", r.err);
    /* Header and point 0, point 1's row, then points 2 and 3. */
    const char *failed = strstr(r.out, "\n16,7,");
    ck_assert_ptr_nonnull(failed);
    const char *after = strchr(failed + 1, '\n') + 1;
    g_autofree char *head = g_strndup(r.out, (gsize)(failed + 1 - r.out));
    g_autofree char *row = g_strndup(failed + 1, (gsize)(after - failed - 1));
    g_autofree char *head_plain = without_error_field(head);
    g_autofree char *tail_plain = without_error_field(after);
    ck_assert_str_eq(head_plain, first.out);
    const char *rest_rows = strchr(rest.out, '\n') + 1; /* without its header */
    ck_assert_str_eq(tail_plain, rest_rows);
    g_autofree char *header = g_strndup(head, (gsize)(strchr(head, '\n') + 1 - head));
    ck_assert(g_str_has_suffix(header, ",note,error\n"));
    g_autoptr(GString) expected = g_string_new("16,7,");
    for (guint c = 0; c < cli_report_csv_columns(); c++)
      g_string_append_c(expected, ',');
    g_autofree char *message = g_strndup(stopped.err + strlen("offsim: "), strlen(stopped.err) - strlen("offsim: ") - 1);
    sim_output_csv_field(expected, message);
    g_string_append_c(expected, '\n');
    ck_assert_str_eq(row, expected->str);

    g_auto(TestRun) o = test_offsim("sweep", DEFAULT, "--set", "transformer.heads=16,14", "--set",
                                    "transformer.kv_heads=2,7", "--jobs", jobs[j], "--keep-going", "--out", out, NULL);
    ck_assert_int_eq(o.status, 0);
    g_autofree char *written = read_text(out);
    ck_assert_str_eq(written, r.out);
  }
  g_auto(TestRun) plot = test_offsim("sweep", DEFAULT, "--set", "transformer.heads=16,14", "--keep-going", "--plot",
                                     dir, NULL);
  ck_assert_int_eq(plot.status, 2);
  ck_assert_str_eq(plot.err, "offsim: --keep-going: not with --plot (a failed point has nothing to draw)\n");
}
END_TEST

/* SIGTERM in the middle of a long sweep to --out: no file, no temporary. */
START_TEST(a_signal_leaves_no_partial_out)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *out = g_build_filename(dir, "sweep.csv", NULL);
  /* 90,000 points, minutes of work; two keys, as one argument may not pass 128 KiB. */
  g_autoptr(GString) latency = g_string_new("link.latency="), bandwidth = g_string_new("link.h2d_bandwidth=");
  for (guint i = 0; i < 300; i++) {
    g_string_append_printf(latency, "%s%uns", i ? "," : "", i + 1);
    g_string_append_printf(bandwidth, "%s%uGB/s", i ? "," : "", i + 1);
  }
  char *argv[] = { (char *)OFFSIM_BINARY, (char *)"sweep", (char *)TINY, (char *)"--set", latency->str,
                   (char *)"--set", bandwidth->str, (char *)"--jobs", (char *)"1", (char *)"--out", out, NULL };
  GPid pid = 0;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(g_spawn_async(NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &error), "%s",
                error ? error->message : "");
  /* Wait until rows are being written into the temporary. */
  gboolean seen = FALSE;
  for (guint tries = 0; tries < 1000 && !seen; tries++) {
    g_usleep(10000);
    g_autofree char *files = list_dir(dir);
    seen = g_str_has_prefix(files, ".sweep.csv.");
  }
  ck_assert_msg(seen, "no temporary appeared");
  kill(pid, SIGTERM);
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  g_spawn_close_pid(pid);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %d", status);
  g_autofree char *files = list_dir(dir);
  ck_assert_str_eq(files, "");
}
END_TEST

/* --plot keeps a point per value of the first key: beyond the stated limit it
 * is refused before anything runs. */
START_TEST(plot_beyond_its_limit_is_refused_up_front)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autoptr(GString) set = g_string_new("link.latency=");
  for (guint i = 0; i < 10001; i++)
    g_string_append_printf(set, "%s%uns", i ? "," : "", i + 1);
  g_auto(TestRun) r = test_offsim_in(dir, "sweep", TINY, "--set", set->str, "--plot", "plots", NULL);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "--plot: the first --set key has 10001 values, a chart at most 10000"), "%s", r.err);
  ck_assert_str_eq(r.out, "");
}
END_TEST

/* A scenario without [policy.*] groups runs the default policies, and users
 * sweep their keys: `--set policy.offload-async.prefetch=0,1` was "[policy.offload-async]
 * kind: missing required key".  The sweep writes the defaults out first: the key
 * changes that policy, its other keys kept (prefetch 1 is the default's own run),
 * and the other three run as before. */
START_TEST(a_default_policy_key_sweeps)
{
  static const char text[] = "[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 10GB/s\nd2h_bandwidth = 10GB/s\n"
                             "[model]\nlayers = 6\nforward = 1ms\ninput = 8MiB\ntensors = a:40MiB, b:20MiB\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(SimConfig) config = sim_config_load_data(text, "defaults.ini", NULL, &error);
  ck_assert_ptr_nonnull(config);
  g_autoptr(SimScenario) plain = sim_scenario_from_config(config, &error);
  ck_assert_ptr_nonnull(plain);
  g_autoptr(GPtrArray) axes = g_ptr_array_new_with_free_func((GDestroyNotify)sweep_grid_axis_free);
  g_ptr_array_add(axes, sweep_grid_axis_parse("policy.offload-async.prefetch=0,1", "--set", &error));
  SweepGridOptions options = { .jobs = 1, .shard_option = "--shard" };
  g_autoptr(SweepGrid) grid = sweep_grid_run(config, g_steal_pointer(&axes), &options, &error);
  ck_assert_msg(grid != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(grid->points->len, 2);
  g_autoptr(GPtrArray) defaults = sim_scenario_default_policies();
  double async_ms[2];
  for (guint i = 0; i < 2; i++) {
    GPtrArray *results = ((SweepGridPoint *)g_ptr_array_index(grid->points, i))->results;
    ck_assert_uint_eq(results->len, defaults->len);
    for (guint k = 0; k < results->len; k++) {
      const SimResult *r = g_ptr_array_index(results, k);
      const SimPolicy *policy = g_ptr_array_index(defaults, k);
      ck_assert_str_eq(r->policy, policy->name);
      g_autoptr(SimResult) alone = test_evaluate(plain, policy->name);
      if (strcmp(policy->name, "offload-async") == 0)
        async_ms[i] = r->step_ms;
      else
        ck_assert_double_eq(r->step_ms, alone->step_ms);
      if (i == 1)
        ck_assert_double_eq(r->step_ms, alone->step_ms); /* prefetch 1: the default's own */
    }
  }
  ck_assert_double_gt(async_ms[0], async_ms[1]); /* prefetch 0 waits for each reload */
  /* A key the default policy cannot take is refused naming it. */
  g_autoptr(GPtrArray) bad = g_ptr_array_new_with_free_func((GDestroyNotify)sweep_grid_axis_free);
  g_ptr_array_add(bad, sweep_grid_axis_parse("policy.offload-sync.prefetch=2", "--set", &error));
  g_autoptr(SweepGrid) none = sweep_grid_new(config, g_steal_pointer(&bad), &options, &error);
  ck_assert_ptr_null(none);
  ck_assert_msg(strstr(error->message, "--set: [policy.offload-sync] prefetch: mode = sync"), "%s", error->message);
}
END_TEST

static Suite *
sweep_suite(void)
{
  Suite *s = suite_create("sweep");
  TCase *rows = tcase_create("rows");
  tcase_set_timeout(rows, 60); /* a few sweeps through the binary under ASan */
  tcase_add_test(rows, rows_are_the_bytes_of_the_json_formatting);
  tcase_add_test(rows, streamed_csv_is_the_in_memory_csv);
  tcase_add_test(rows, a_default_policy_key_sweeps);
  suite_add_tcase(s, rows);
  TCase *window = tcase_create("window");
  tcase_set_timeout(window, 60);
  tcase_add_test(window, rows_come_in_order_through_a_bounded_window);
  tcase_add_test(window, a_failing_write_stops_the_sweep);
  suite_add_tcase(s, window);
  TCase *out = tcase_create("out");
  tcase_set_timeout(out, 60);
  tcase_add_test(out, a_failed_sweep_leaves_no_partial_out);
  tcase_add_test(out, keep_going_writes_a_failed_point_as_a_row);
  tcase_add_test(out, a_signal_leaves_no_partial_out);
  tcase_add_test(out, plot_beyond_its_limit_is_refused_up_front);
  suite_add_tcase(s, out);
  return s;
}

int
main(void)
{
  return test_run_suite(sweep_suite());
}
