/* Hostile inputs (README.md, Reliability): files written by hand, configs from the
 * internet, traces from other tools.  Each class below either works, in
 * linear time and memory, or is one clear exit-2 error; none crashes.
 * "Linear" is asserted through the engine's work counters (SimRun.events,
 * heap_ops) and the sizes of what a run builds, never through wall time.
 * Every class is tried through the library and through the binary.
 *
 * The last tests replay tests/data/regress/, the inputs that once failed,
 * through the fuzz targets' own checks (tests/fuzz/fuzz_common.c), and check
 * that unwritable output paths are clear errors that leave nothing behind. */
#include "testutil.h"

#include "base/error.h"
#include "input/config.h"
#include "ledger/ledger.h"
#include "fuzz_common.h"
#include "input/hf_config.h"
#include "engine/internal/program_private.h" /* sim_program_n_mem, test-only */
#include "base/units.h"
#include "input/trace.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#define REGRESS OFFSIM_TEST_DATA "/regress"

#define DEVICE "[device]\nmemory = 80GiB\n"
#define LINK "[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\nlatency = 8us\n"

static const char *const default_policies[] = { "resident", "offload-sync", "offload-async", "checkpoint-full" };

/* A uniform [model] of `layers` layers; `model_extra` sets keys of [model]
 * and `rest` sets keys of other groups, replacing the defaults here. */
static char *
model_text(guint layers, const char *link, const char *model_extra, const char *rest)
{
  g_autofree char *base = g_strdup_printf(DEVICE "%s[model]\nlayers = %u\nforward = 1ms\ninput = 1MiB\n"
                                                 "tensors = attn:8MiB, mlp:4MiB:refs=3, mask:64KiB:keep\n"
                                                 "workspace = 2MiB\n",
                                          link ? link : LINK, layers);
  g_autofree char *extra = g_strdup_printf("[model]\n%s%s", model_extra ? model_extra : "", rest ? rest : "");
  return test_ini_merge(base, extra);
}

/* A fresh directory for one test's files (test_tmp_dir_new), removed with
 * everything in it, folders included, when the test's g_autoptr(TempDir)
 * goes (a failed test leaves it). */
typedef char TempDir;

static void
remove_tree(const char *path)
{
  if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
    g_autoptr(GDir) d = g_dir_open(path, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d));) {
      g_autofree char *child = g_build_filename(path, name, NULL);
      remove_tree(child);
    }
  }
  g_remove(path);
}

static void
temp_dir_free(TempDir *dir)
{
  remove_tree(dir);
  g_free(dir);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TempDir, temp_dir_free)

static TempDir *
temp_dir(void)
{
  return test_tmp_dir_new();
}

static char *
write_file(const char *dir, const char *name, const char *data, gssize length)
{
  g_autoptr(GError) error = NULL;
  char *path = g_build_filename(dir, name, NULL);
  ck_assert_msg(g_file_set_contents(path, data, length, &error), "%s", error ? error->message : "");
  return path;
}

/* `offsim compare FILE [ARGS]` must exit with `status`; for 2 the message is
 * one line and holds `expect`. */
static void
assert_compare(const char *path, int status, const char *expect)
{
  g_auto(TestRun) r = test_offsim("compare", path, NULL);
  ck_assert_msg(r.status == status, "offsim compare %s: exit %d, expected %d\n%s", path, r.status, status, r.err);
  if (status == 2) {
    ck_assert_msg(strchr(r.err, '\n') == strrchr(r.err, '\n'), "more than one line: %s", r.err);
    ck_assert_msg(expect == NULL || strstr(r.err, expect), "'%s' not in: %s", expect, r.err);
  }
}

/* What offsim printed on stderr is one line holding `expect`. */
static void
assert_input_error_text(const char *err, const char *expect)
{
  ck_assert_msg(strstr(err, expect), "'%s' not in: %s", expect, err);
  ck_assert_msg(strchr(err, '\n') == strrchr(err, '\n'), "more than one line: %s", err);
}

/* Loading fails with bad input whose message holds `expect`. */
static void
assert_input_error(const GError *error, const char *expect)
{
  ck_assert_msg(error != NULL, "no error, expected one with '%s'", expect);
  ck_assert_msg(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT), "not bad input: %s", error->message);
  ck_assert_msg(strstr(error->message, expect), "'%s' not in: %s", expect, error->message);
  ck_assert_msg(strchr(error->message, '\n') == NULL, "more than one line: %s", error->message);
}

/* ---- 10,000 layers --------------------------------------------------------- */

/* 10,000 layers do 100 times the work of 100, within 5 %: events, heap
 * operations, ops, memory actions and curve points all grow linearly. */
START_TEST(layers_10000_linear)
{
  g_autofree char *small_text = model_text(100, NULL, NULL, NULL);
  g_autofree char *big_text = model_text(10000, NULL, NULL, NULL);
  g_autoptr(SimScenario) small = test_scenario_from_text(small_text);
  g_autoptr(SimScenario) big = test_scenario_from_text(big_text);
  for (guint i = 0; i < G_N_ELEMENTS(default_policies); i++) {
    g_autoptr(SimResult) a = test_evaluate(small, default_policies[i]);
    g_autoptr(SimResult) b = test_evaluate(big, default_policies[i]);
    struct {
      const char *what;
      double small, big;
    } grow[] = {
      { "events", (double)a->run->events, (double)b->run->events },
      { "heap operations", (double)a->run->heap_ops, (double)b->run->heap_ops },
      { "ops", sim_program_n_ops(a->program), sim_program_n_ops(b->program) },
      { "memory actions", sim_program_n_mem(a->program), sim_program_n_mem(b->program) },
      { "curve points", a->run->curve->len, b->run->curve->len },
    };
    for (guint g = 0; g < G_N_ELEMENTS(grow); g++) {
      double ratio = grow[g].big / grow[g].small;
      ck_assert_msg(ratio > 95 && ratio < 105, "%s: %s grow %.1fx from 100 to 10,000 layers", default_policies[i],
                    grow[g].what, ratio);
    }
  }
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *path = write_file(dir, "big.ini", big_text, -1);
  g_auto(TestRun) r = test_offsim("compare", path, NULL);
  ck_assert_int_eq(r.status, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "10000 layers"));
}
END_TEST

/* 10^4, 10^5 and 10^6 layers: every work counter per layer (events, heap
 * operations, ops, memory actions, curve points) the same within 1 % for
 * each size, so nothing in the lowering or the engine is worse than linear
 * up to the largest model a scenario accepts.  Async offload, the policy
 * with the most streams, events and waits. */
START_TEST(work_per_layer_is_flat_to_a_million_layers)
{
  double per_layer[3][5];
  const guint sizes[3] = { 10000, 100000, 1000000 };
  for (guint k = 0; k < 3; k++) {
    g_autofree char *text = model_text(sizes[k], NULL, NULL, NULL);
    g_autoptr(SimScenario) s = test_scenario_from_text(text);
    g_autoptr(SimResult) r = test_evaluate(s, "offload-async");
    double counters[5] = { (double)r->run->events, (double)r->run->heap_ops, sim_program_n_ops(r->program),
                           sim_program_n_mem(r->program), r->run->curve->len };
    for (guint c = 0; c < 5; c++)
      per_layer[k][c] = counters[c] / sizes[k];
  }
  static const char *const names[5] = { "events", "heap operations", "ops", "memory actions", "curve points" };
  for (guint k = 1; k < 3; k++)
    for (guint c = 0; c < 5; c++)
      ck_assert_msg(fabs(per_layer[k][c] / per_layer[0][c] - 1) < 0.01, "%s per layer: %.4f at %u layers, %.4f at %u",
                    names[c], per_layer[k][c], sizes[k], per_layer[0][c], sizes[0]);
}
END_TEST

/* A generated transformer of 10,000 layers loads and runs too. */
START_TEST(layers_10000_transformer)
{
  static const char text[] = DEVICE "matmul_tflops = 790\nhbm_bandwidth = 3.35TB/s\n" LINK
    "[transformer]\nhidden = 64\nlayers = 10000\nheads = 4\nffn = 256\nvocab = 1000\nbatch = 1\nseq = 16\n";
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  ck_assert_uint_eq(sim_workload_n_layers(s->workload), 10000);
  g_autoptr(SimResult) r = test_evaluate(s, "offload-async");
  /* A few events per saved reference, nothing per pair of layers. */
  ck_assert_uint_lt(r->run->events, 100 * 10000);
}
END_TEST

/* 100,000 layers of 32 tensors: past the dense live table (labels x layers
 * above 4 Mi cells), where the replay of what is live at a peak once
 * hashed structured keys into few buckets (17-19 s for this run, against
 * 0.12 s for 10,000 layers); the column-by-column replay is linear.  What
 * is checked is the work, not the time: the description of the peak names
 * every layer it holds. */
START_TEST(layers_100000_of_32_past_the_dense_table)
{
  GString *text = g_string_new(DEVICE LINK "[model]\nlayers = 100000\nforward = 1ms\ninput = 1MB\ntensors = ");
  for (guint i = 0; i < 32; i++)
    g_string_append_printf(text, "%st%u:1MB", i ? ", " : "", i);
  g_string_append(text, "\n[policy.resident]\nkind = resident\n");
  g_autofree char *data = g_string_free(text, FALSE);
  g_autoptr(SimScenario) s = test_scenario_from_text(data);
  g_autoptr(SimResult) r = test_evaluate(s, "resident");
  ck_assert_uint_gt((guint64)r->program->labels->len * 100001, 1u << 22);
  ck_assert_ptr_nonnull(strstr(r->peak_device.live, "saved L0-L99999"));
  ck_assert_int_eq(r->peak_device.bytes, (gint64)s->workload->static_bytes + 100000LL * 32 * 1000000);
}
END_TEST

/* ---- a 1 TiB tensor and byte arithmetic -------------------------------------- */

START_TEST(tensor_1tib_exact)
{
  g_autofree char *text = g_strdup(DEVICE LINK "[model]\nlayers = 2\nforward = 1ms\ninput = 1TiB\ntensors = a:1TiB, "
                                               "b:1TiB:refs=3\n");
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  g_autoptr(SimResult) resident = test_evaluate(s, "resident");
  ck_assert_int_eq(resident->peak_device.bytes, 4ll << 40);
  /* Sync offload copies every reference: 2 layers x (1 + 3) TiB each way. */
  g_autoptr(SimResult) sync = test_evaluate(s, "offload-sync");
  ck_assert_uint_eq(sync->d2h_bytes, 8ull << 40);
  ck_assert_uint_eq(sync->h2d_bytes, 8ull << 40);

  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *path = write_file(dir, "tib.ini", text, -1);
  g_auto(TestRun) r = test_offsim("run", path, "--policy", "offload-sync", "--format", "json", NULL);
  ck_assert_int_eq(r.status, 0);
  g_autoptr(JsonParser) parser = json_parser_new();
  ck_assert(json_parser_load_from_data(parser, r.out, -1, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(parser));
  ck_assert_int_eq(json_object_get_int_member(o, "d2h_bytes"), 8ll << 40);
}
END_TEST

/* Sums that would pass 4 EiB are refused where they are made, whatever
 * multiplies them: references, layer counts, generated shapes. */
START_TEST(byte_sums_cannot_overflow)
{
  static const struct {
    const char *text, *expect;
  } cases[] = {
    { DEVICE LINK "[model]\nlayers = 1\nforward = 1ms\ninput = 0\ntensors = a:1048576TiB:refs=5\n", "once per reference" },
    { DEVICE LINK "[model]\nlayers = 1000000\nforward = 1ms\ninput = 8TiB\ntensors = a:0\n", "4 EiB" },
    { DEVICE LINK "[model]\nlayers = 2\nforward = 1ms\ninput = 0\ntensors = a:3000000TiB\nworkspace = 3000000TiB\n",
      "4 EiB" },
    { DEVICE "matmul_tflops = 1\nhbm_bandwidth = 1TB/s\n" LINK
      "[transformer]\nhidden = 1048576\nlayers = 1000000\nheads = 65536\nhead_dim = 65536\nkv_heads = 65536\n"
      "ffn = 16777216\nvocab = 1073741824\nbatch = 1\nseq = 1\n",
      "4 EiB" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = sim_scenario_load_data(cases[i].text, "test.ini", &error);
    ck_assert_msg(s == NULL, "case %u loaded", i);
    assert_input_error(error, cases[i].expect);
  }
}
END_TEST

/* ---- 1 ns ops ------------------------------------------------------------------ */

START_TEST(ops_of_1ns)
{
  g_autofree char *ns_text = model_text(50, NULL, "backward = 1ns\n", NULL);
  g_autofree char *ms_text = model_text(50, NULL, "backward = 2ms\n", NULL);
  char *forward = strstr(ns_text, "forward = 1ms");
  memcpy(forward, "forward = 1ns", strlen("forward = 1ns"));
  g_autoptr(SimScenario) ns = test_scenario_from_text(ns_text);
  g_autoptr(SimScenario) ms = test_scenario_from_text(ms_text);
  for (guint i = 0; i < G_N_ELEMENTS(default_policies); i++) {
    g_autoptr(SimResult) a = test_evaluate(ns, default_policies[i]);
    g_autoptr(SimResult) b = test_evaluate(ms, default_policies[i]);
    /* Times scale; the work does not depend on them. */
    ck_assert_uint_eq(sim_program_n_ops(a->program), sim_program_n_ops(b->program));
    ck_assert_uint_le(a->run->events, 2 * sim_program_n_ops(a->program));
    ck_assert(a->step_ms > 0 && a->step_ms < b->step_ms);
  }
  g_autoptr(SimResult) resident = test_evaluate(ns, "resident");
  ck_assert_close(resident->compute_ms, 50 * 2e-6, 1e-12);
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *path = write_file(dir, "ns.ini", ns_text, -1);
  assert_compare(path, 0, NULL);
}
END_TEST

/* ---- zero-size tensors ---------------------------------------------------------- */

START_TEST(zero_size_tensors)
{
  static const char text[] = DEVICE LINK "[model]\nlayers = 4\nforward = 1ms\ninput = 0\ntensors = a:0, b:0B, c:0MiB:refs=7\n"
                                         "workspace = 0\nstatic = 0\n[layer.2]\ntensors =\n";
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  for (guint i = 0; i < G_N_ELEMENTS(default_policies); i++) {
    g_autoptr(SimResult) r = test_evaluate(s, default_policies[i]);
    ck_assert_int_eq(r->peak_device.bytes, 0);
    ck_assert_int_eq(r->peak_host.bytes, 0);
    ck_assert(r->fits);
  }
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *path = write_file(dir, "zero.ini", text, -1);
  assert_compare(path, 0, NULL);
  /* A model without layers is not a model. */
  g_autofree char *none = write_file(dir, "none.ini", DEVICE LINK "[model]\nlayers = 0\nforward = 1ms\ninput = 0\n"
                                                                  "tensors = a:0\n", -1);
  assert_compare(none, 2, "[model] layers: expected a whole number from 1");
}
END_TEST

/* ---- a bandwidth of 1 B/s ------------------------------------------------------- */

START_TEST(bandwidth_1_byte_per_second)
{
  static const char slow_link[] = "[link]\nh2d_bandwidth = 1B/s\nd2h_bandwidth = 1B/s\nbidir_bandwidth = 1B/s\n";
  g_autofree char *slow_text = model_text(20, slow_link, NULL, NULL);
  g_autofree char *fast_text = model_text(20, NULL, NULL, NULL);
  g_autoptr(SimScenario) slow = test_scenario_from_text(slow_text);
  g_autoptr(SimScenario) fast = test_scenario_from_text(fast_text);
  g_autoptr(SimResult) a = test_evaluate(slow, "offload-sync");
  g_autoptr(SimResult) b = test_evaluate(fast, "offload-sync");
  ck_assert_uint_eq(a->run->events, b->run->events);
  /* Sync: every byte twice over the link, on the compute stream. */
  ck_assert_close(a->step_ms, a->compute_ms + (double)(a->d2h_bytes + a->h2d_bytes) * 1e3, a->step_ms * 1e-9);
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *path = write_file(dir, "slow.ini", slow_text, -1);
  assert_compare(path, 0, NULL);
  g_autofree char *zero_text = model_text(2, "[link]\nh2d_bandwidth = 0B/s\nd2h_bandwidth = 1B/s\n", NULL, NULL);
  g_autofree char *zero = write_file(dir, "zero.ini", zero_text, -1);
  assert_compare(zero, 2, "[link] h2d_bandwidth: expected a positive, finite rate");
}
END_TEST

/* ---- an include depth of 64 ------------------------------------------------------ */

START_TEST(include_depth_64)
{
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *base = model_text(2, NULL, NULL, NULL);
  g_free(write_file(dir, "f0.ini", base, -1));
  for (guint i = 1; i <= 64; i++) {
    g_autofree char *name = g_strdup_printf("f%u.ini", i);
    g_autofree char *text = g_strdup_printf("[scenario]\ninclude = f%u.ini\nname = depth %u\n", i - 1, i);
    g_free(write_file(dir, name, text, -1));
  }
  /* f63.ini includes 63 files, 64 in the chain: the documented limit. */
  g_autofree char *deepest = g_build_filename(dir, "f63.ini", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimConfig) config = sim_config_load_file(deepest, &error);
  ck_assert_msg(config != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(g_hash_table_size(config->files), 64);
  assert_compare(deepest, 0, NULL);
  /* One more is a clear error naming the limit. */
  g_autofree char *too_deep = g_build_filename(dir, "f64.ini", NULL);
  g_autoptr(SimScenario) s = sim_scenario_load_file(too_deep, &error);
  ck_assert_ptr_null(s);
  assert_input_error(error, "includes nest deeper than 64 files");
  assert_compare(too_deep, 2, "deeper than 64");
}
END_TEST

/* An include of a FIFO nobody writes used to block in open() forever (the
 * test's timeout catches a regression): now it reads as an empty file. */
START_TEST(include_of_a_fifo_without_writer)
{
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *fifo = g_build_filename(dir, "pipe.ini", NULL);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  g_autofree char *base = model_text(2, NULL, NULL, NULL);
  g_autofree char *text = g_strdup_printf("[scenario]\ninclude = pipe.ini\n%s", strstr(base, "[device]"));
  g_autofree char *top = write_file(dir, "top.ini", text, -1);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(top, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  assert_compare(top, 0, NULL);
}
END_TEST

/* ---- a 1 MB name -------------------------------------------------------------- */

START_TEST(name_of_1mb)
{
  g_autofree char *name = g_strnfill(1 << 20, 'n');
  g_autofree char *rest = g_strdup_printf("[scenario]\nname = %s\n[policy.%s]\nkind = offload\n", name, name);
  g_autofree char *text = model_text(3, NULL, NULL, rest);
  char *tensor = strstr(text, "attn:");
  g_autoptr(GString) with_tensor = g_string_new_len(text, tensor - text);
  g_string_append_printf(with_tensor, "%s:1MiB, %s", name, tensor);
  g_autoptr(SimScenario) s = test_scenario_from_text(with_tensor->str);
  ck_assert_uint_eq(strlen(s->name), 1 << 20);
  g_autoptr(SimResult) r = test_evaluate(s, name);
  ck_assert(r->d2h_bytes > 0);

  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *path = write_file(dir, "long.ini", with_tensor->str, -1);
  g_auto(TestRun) run = test_offsim("compare", path, "--format", "json", NULL);
  ck_assert_int_eq(run.status, 0);
  g_autoptr(JsonParser) parser = json_parser_new();
  ck_assert(json_parser_load_from_data(parser, run.out, -1, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(parser));
  ck_assert_uint_eq(strlen(json_object_get_string_member(o, "scenario")), 1 << 20);
  /* The output is a few copies of the name, not one per op. */
  ck_assert_uint_lt(strlen(run.out), 16u << 20);
  /* A 1 MB unknown key is one line of error. */
  g_autofree char *bad_text = model_text(3, NULL, NULL, NULL);
  g_autofree char *bad = g_strdup_printf("%s%s = 1\n", bad_text, name);
  g_autofree char *bad_path = write_file(dir, "bad.ini", bad, -1);
  assert_compare(bad_path, 2, "unknown key");
  /* And a short one: the key is cut after SIM_ERROR_QUOTE_MAX characters. */
  g_auto(TestRun) cut = test_offsim("compare", bad_path, NULL);
  ck_assert_uint_lt(strlen(cut.err), 1000);
  assert_input_error_text(cut.err, "…: unknown key");
}
END_TEST

/* ---- messages: UTF-8, control bytes, length ----------------------------------- */

START_TEST(error_quote_escapes_and_cuts)
{
  static const struct {
    const char *text, *quoted;
  } cases[] = {
    { "plain", "plain" },
    { "2μs in “quotes”", "2μs in “quotes”" },
    { "a\x1b[31mb\x07", "a\\x1b[31mb\\x07" },
    { "tab\tline\nend\r", "tab\\tline\\nend\\r" },
    { "del\x7f c1\xc2\x9b" "2J", "del\\x7f c1\\u009b2J" },
    { "bad \xff byte", "bad \\xff byte" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *q = sim_error_quote(cases[i].text);
    ck_assert_str_eq(q, cases[i].quoted);
    g_autofree char *p = sim_error_printable(cases[i].text);
    ck_assert_str_eq(p, cases[i].quoted);
  }
  /* Cut by characters, not bytes: 100 μ stay whole, 101 are cut. */
  g_autoptr(GString) mu = g_string_new(NULL);
  for (guint i = 0; i < SIM_ERROR_QUOTE_MAX; i++)
    g_string_append(mu, "μ");
  g_autofree char *whole = sim_error_quote(mu->str);
  ck_assert_str_eq(whole, mu->str);
  g_autofree char *more = g_strconcat(mu->str, "x", NULL);
  g_autofree char *cut = sim_error_quote(more);
  g_autofree char *expect = g_strconcat(mu->str, "…", NULL);
  ck_assert_str_eq(cut, expect);
  /* A message keeps its start and its end. */
  g_autofree char *middle = g_strnfill(5 << 20, 'm');
  g_autofree char *message = g_strdup_printf("file.ini: [g] k: expected X, got '%s'; the end", middle);
  g_autofree char *printable = sim_error_printable(message);
  ck_assert_uint_le(g_utf8_strlen(printable, -1), SIM_ERROR_MESSAGE_MAX + 1);
  ck_assert(g_str_has_prefix(printable, "file.ini: [g] k: expected X, got 'mmm"));
  ck_assert(g_str_has_suffix(printable, "mmm'; the end"));
  ck_assert_ptr_nonnull(strstr(printable, "m…m"));
  /* sim_error_quote_in: the value a parser echoed, quoted in place. */
  g_autofree char *in = sim_error_quote_in(message, middle);
  g_autofree char *quoted_middle = sim_error_quote(middle);
  g_autofree char *expect_in = g_strdup_printf("file.ini: [g] k: expected X, got '%s'; the end", quoted_middle);
  ck_assert_str_eq(in, expect_in);
  g_autofree char *same = sim_error_quote_in("got ''", "");
  ck_assert_str_eq(same, "got ''");
}
END_TEST

/* main.c used setlocale(LC_ALL, "C"): every non-ASCII character of a
 * message came out as '?' (file names, "2μs", GLib's quotes), while raw
 * control bytes went to the terminal.  Under LC_ALL=C (as ctest runs it). */
START_TEST(messages_keep_utf8_and_escape_control_bytes)
{
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *micro = write_file(dir, "µ-latency.ini", DEVICE "[link]\nh2d_bandwidth = 55GB/s\n"
                                      "d2h_bandwidth = 55GB/s\nlatency = 2μs\n", -1);
  g_setenv("LC_ALL", "C", TRUE);
  g_auto(TestRun) r = test_offsim("compare", micro, NULL);
  ck_assert_int_eq(r.status, 2);
  g_autofree char *expect = g_strdup_printf("offsim: %s: [link] latency: expected a time with a unit (s, ms, us, ns), "
                                            "got '2μs'\n", micro);
  ck_assert_str_eq(r.err, expect);
  /* GLib's own quotes. */
  g_autofree char *syntax = write_file(dir, "syntax.ini", DEVICE "foo bar\n", -1);
  g_auto(TestRun) s = test_offsim("compare", syntax, NULL);
  ck_assert_int_eq(s.status, 2);
  assert_input_error_text(s.err, "not a valid scenario file: Key file contains line “foo bar” which is not");
  /* Control bytes from an argument are escaped where the line is printed. */
  g_auto(TestRun) policy = test_offsim("run", "--policy", "\x1b]0;owned\x07", NULL);
  ck_assert_int_eq(policy.status, 2);
  ck_assert_str_eq(policy.err, "offsim: --policy: no policy '\\x1b]0;owned\\x07' in (embedded default) (it has "
                               "resident, offload-sync, offload-async, checkpoint-full)\n");
  g_auto(TestRun) regress = test_offsim("compare", REGRESS "/scenario-control-bytes.ini", NULL);
  ck_assert_int_eq(regress.status, 2);
  ck_assert_ptr_null(strchr(regress.err, '\x1b'));
  ck_assert_ptr_null(strchr(regress.err, '\x07'));
  /* Numbers are still written with '.' (the golden test checks every output). */
  g_auto(TestRun) csv = test_offsim("run", "--format", "csv", NULL);
  ck_assert_ptr_nonnull(strstr(csv.out, ",12.59"));
}
END_TEST

/* ---- NUL bytes and invalid UTF-8 ------------------------------------------------ */

START_TEST(nul_bytes_and_invalid_utf8)
{
  static const struct {
    const char *name;
    const char *data;
    gsize length;
    const char *expect;
  } files[] = {
    { "nul.ini", DEVICE "\0" LINK, sizeof DEVICE LINK, "NUL byte" },
    { "utf8.ini", DEVICE "[scenario]\nname = \xff\xfe\n", sizeof DEVICE "[scenario]\nname = \xff\xfe\n" - 1,
      "not valid UTF-8" },
    { "overlong.ini", DEVICE "[scenario]\nname = \xc0\xaf\n", sizeof DEVICE "[scenario]\nname = \xc0\xaf\n" - 1,
      "not valid UTF-8" },
  };
  g_autoptr(TempDir) dir = temp_dir();
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autofree char *path = write_file(dir, files[i].name, files[i].data, (gssize)files[i].length);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = sim_scenario_load_file(path, &error);
    ck_assert_ptr_null(s);
    assert_input_error(error, files[i].expect);
    assert_compare(path, 2, files[i].expect);
    /* The same file included: the error names it, not the top file. */
    g_autofree char *top_text = g_strdup_printf("[scenario]\ninclude = %s\n", files[i].name);
    g_autofree char *top = write_file(dir, "top.ini", top_text, -1);
    assert_compare(top, 2, files[i].name);
  }

  /* The other importers, the same way. */
  static const char json_nul[] = "{\"model_type\": \"llama\"\0}";
  static const char json_utf8[] = "{\"model_type\": \"ll\xff\"}";
  SimTransformer t;
  g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL, e5 = NULL;
  ck_assert(!sim_hf_config_load_data(json_nul, sizeof json_nul - 1, "nul.json", &t, &e1));
  ck_assert(g_error_matches(e1, SIM_ERROR, SIM_ERROR_INPUT));
  ck_assert(!sim_hf_config_load_data(json_utf8, sizeof json_utf8 - 1, "utf8.json", &t, &e2));
  ck_assert(g_error_matches(e2, SIM_ERROR, SIM_ERROR_INPUT));
  static const char trace[] = "layer,op,name,bytes,dtype,shape,is_parameter\n0,a,\xff,1,f,1,0\n";
  ck_assert_ptr_null(sim_trace_load_data(trace, sizeof trace - 1, "t.csv", "t", &e3));
  assert_input_error(e3, "UTF-8");
  static const char chunks_nul[] = "name,bytes,reuse_delay_layers,offloadable\na\0,1,1,true\n";
  static const char chunks_utf8[] = "name,bytes,reuse_delay_layers,offloadable\n\xff,1,1,true\n";
  ck_assert_ptr_null(ledger_parse_csv(chunks_nul, sizeof chunks_nul - 1, "c.csv", &e4));
  assert_input_error(e4, "NUL");
  ck_assert_ptr_null(ledger_parse_csv(chunks_utf8, sizeof chunks_utf8 - 1, "c.csv", &e5));
  assert_input_error(e5, "UTF-8");

  g_autofree char *json_path = write_file(dir, "bad.json", json_utf8, sizeof json_utf8 - 1);
  g_auto(TestRun) model = test_offsim("model", "--hf-config", json_path, "--batch", "1", "--seq", "8", NULL);
  ck_assert_int_eq(model.status, 2);
  g_autofree char *csv_path = write_file(dir, "bad.csv", chunks_nul, sizeof chunks_nul - 1);
  g_auto(TestRun) budget = test_offsim("budget", csv_path, "--budget", "1GiB", "--bandwidth", "8GiB/s", NULL);
  ck_assert_int_eq(budget.status, 2);
  ck_assert_ptr_nonnull(strstr(budget.err, "NUL"));
}
END_TEST

/* ---- numbers with 30 digits -------------------------------------------------------- */

START_TEST(numbers_of_30_digits)
{
#define D30 "123456789012345678901234567890"
  /* Every kind of number a scenario holds; NULL: it works. */
  static const struct {
    const char *model, *rest, *expect;
  } cases[] = {
    { "layers = " D30 "\n", "", "[model] layers: expected a whole number" },
    { "static = " D30 "GiB\n", "", "too large" },
    { "static = 0." D30 "KiB\n", "", NULL },
    { "workspace = " D30 "B\n", "", "too large" },
    { "backward = " D30 "ns\n", "", "too large" },
    { "backward = 0.000000000000000000000000000001s\n", "", NULL },
    { "", "[link]\nlatency = " D30 "us\n", "too large" },
    { "", "[link]\nh2d_bandwidth = " D30 "GB/s\n", NULL }, /* 1.2e38 B/s is fast, not wrong */
    { "", "[link]\nd2h_bandwidth = 0." D30 "B/s\n", NULL },
    { "", "[link]\npageable_factor = 0." D30 "\n", NULL },
    { "", "[link]\ncompute_slowdown = " D30 "\n", "expected a number in [0, 1)" },
    { "", "[policy.p]\nkind = offload\nprefetch = " D30 "\n", "[policy.p] prefetch: expected a whole number" },
    { "", "[policy.p]\nkind = offload\nmin_tensor = " D30 "TiB\n", "too large" },
    { "", "[policy.p]\nkind = checkpoint\nlayers = " D30 "\n", "[policy.p] layers" },
    { "", "[layer." D30 "]\nforward = 1ms\n", "expected [layer.N]" },
    { "tensors = a:1MiB:refs=" D30 "\n", "", "refs=N" },
  };
  g_autoptr(TempDir) dir = temp_dir();
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *text = model_text(4, NULL, cases[i].model, cases[i].rest);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = sim_scenario_load_data(text, "test.ini", &error);
    g_autofree char *path = write_file(dir, "n.ini", text, -1);
    if (cases[i].expect == NULL) {
      ck_assert_msg(s != NULL, "case %u: %s", i, error ? error->message : "");
      fuzz_evaluate_all(s);
      assert_compare(path, 0, NULL);
    } else {
      ck_assert_msg(s == NULL, "case %u loaded", i);
      assert_input_error(error, cases[i].expect);
      assert_compare(path, 2, cases[i].expect);
    }
  }
  /* Generated models, config.json, traces and chunk lists. */
  static const char transformer[] = DEVICE "matmul_tflops = " D30 "\nhbm_bandwidth = 1TB/s\n" LINK
    "[transformer]\nhidden = 64\nlayers = 2\nheads = 4\nffn = 128\nvocab = 100\nbatch = 1\nseq = 8\n";
  g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL, e5 = NULL;
  ck_assert_ptr_null(sim_scenario_load_data(transformer, "t.ini", &e1));
  assert_input_error(e1, "matmul_tflops");
  static const char json[] = "{\"model_type\": \"llama\", \"hidden_size\": " D30 "}";
  SimTransformer t;
  ck_assert(!sim_hf_config_load_data(json, -1, "c.json", &t, &e2));
  assert_input_error(e2, "hidden_size");
  static const char trace[] = "layer,op,name,bytes,dtype,shape,is_parameter\n0,a,x," D30 ",f,1,0\n";
  ck_assert_ptr_null(sim_trace_load_data(trace, sizeof trace - 1, "t.csv", "t", &e3));
  assert_input_error(e3, "column 'bytes'");
  static const char chunks[] = "name,bytes,reuse_delay_layers,offloadable\na," D30 ",1,true\n";
  ck_assert_ptr_null(ledger_parse_csv(chunks, sizeof chunks - 1, "c.csv", &e4));
  assert_input_error(e4, "too large");
  static const char delay[] = "name,bytes,reuse_delay_layers,offloadable\na,1," D30 ",true\n";
  ck_assert_ptr_null(ledger_parse_csv(delay, sizeof delay - 1, "c.csv", &e5));
  assert_input_error(e5, "too large");
  g_auto(TestRun) r = test_offsim("budget", "x.csv", "--budget", D30 "GiB", "--bandwidth", "1GB/s", NULL);
  ck_assert_int_eq(r.status, 2);
  ck_assert_ptr_nonnull(strstr(r.err, "--budget"));
#undef D30
}
END_TEST

/* ---- prefetch deeper than the model ---------------------------------------------- */

static double
step_of(const char *policy_text, const char *field)
{
  g_autofree char *text = model_text(6, NULL, NULL, policy_text);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  g_autoptr(SimResult) r = test_evaluate(s, "p");
  if (strcmp(field, "d2h") == 0)
    return (double)r->d2h_bytes;
  if (strcmp(field, "recompute") == 0)
    return r->recompute_ms;
  return r->step_ms;
}

/* Depths past the model mean "all of it", exactly as the model's own size
 * does, with the largest value each key takes. */
START_TEST(prefetch_deeper_than_the_model)
{
  static const char *const same[][2] = {
    { "[policy.p]\nkind = offload\nprefetch = 4294967295\n", "[policy.p]\nkind = offload\nprefetch = 6\n" },
    { "[policy.p]\nkind = offload\ninflight = 4294967295\n", "[policy.p]\nkind = offload\ninflight = 6\n" },
    { "[policy.p]\nkind = offload\nkeep_last = 4294967295\n", "[policy.p]\nkind = resident\n" },
    { "[policy.p]\nkind = checkpoint\nevery = 4294967295\n", "[policy.p]\nkind = checkpoint\nlayers = 0\n" },
    { "[policy.p]\nkind = plan\nactions = offload, offload, offload, offload, offload, offload\nprefetch = 4294967295\n",
      "[policy.p]\nkind = plan\nactions = offload, offload, offload, offload, offload, offload\nprefetch = 6\n" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(same); i++)
    for (guint f = 0; f < 3; f++) {
      const char *field = (const char *[]){ "step", "d2h", "recompute" }[f];
      ck_assert_msg(step_of(same[i][0], field) == step_of(same[i][1], field), "case %u: %s differs", i, field);
    }
  /* Layer sets that name layers the model lacks are errors. */
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *text = model_text(6, NULL, NULL, "[policy.p]\nkind = offload\nlayers = first:7\n");
  g_autofree char *path = write_file(dir, "first.ini", text, -1);
  assert_compare(path, 2, "first:N with N from 0 to 6");
  g_autofree char *deep = model_text(6, NULL, NULL, "[policy.p]\nkind = offload\nprefetch = 4294967295\n");
  g_autofree char *deep_path = write_file(dir, "deep.ini", deep, -1);
  assert_compare(deep_path, 0, NULL);
}
END_TEST

/* ---- 100,000 budget chunks ------------------------------------------------------- */

/* The table once searched the offload order for every row: quadratic, 37 s
 * for 100,000 chunks.  There is no work counter in the command; ctest's
 * timeout is the bound, and it would be passed many times over under the
 * sanitizers if the search came back. */
START_TEST(budget_100000_chunks)
{
  g_autoptr(GString) csv = g_string_new("name,bytes,reuse_delay_layers,offloadable\n");
  for (guint i = 0; i < 100000; i++)
    g_string_append_printf(csv, "c%u,%u,%u,%s\n", i, 1000 + i, i % 50, i % 7 ? "true" : "false");
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) chunks = ledger_parse_csv(csv->str, csv->len, "big.csv", &error);
  ck_assert_ptr_nonnull(chunks);
  g_autoptr(LedgerSummary) s = ledger_summarize(chunks, 1 << 20, 8, &error);
  ck_assert_ptr_nonnull(s);
  ck_assert_uint_eq(s->kept_names->len + s->offloaded_names->len, 100000);
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *path = write_file(dir, "big.csv", csv->str, (gssize)csv->len);
  g_auto(TestRun) r = test_offsim("budget", path, "--budget", "1MiB", "--bandwidth", "8GiB/s", NULL);
  ck_assert_int_eq(r.status, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "offload #14285"));
}
END_TEST

/* ---- inputs that once failed ---------------------------------------------------- */

/* What each file of tests/data/regress must do now: load and run (expect
 * NULL) or be bad input whose message holds `expect`. */
static const struct {
  const char *file, *expect;
} regressions[] = {
  { "scenario-refs-overflow.ini", "once per reference, add up to more than 4 EiB" },
  { "scenario-transformer-overflow.ini", "more than 4 EiB" },
  { "scenario-size-fraction.ini", "too large (at most 4 EiB)" },
  { "scenario-include-dev-zero.ini", "larger than 256 MiB" },
  { "scenario-keep-last-max.ini", NULL },
  { "scenario-references-amplified.ini", "more than 33554432 saved references" },
  /* `offsim model` printed "dropout = 1e-05", which no scenario accepts. */
  { "hf-dropout-exponent.json", NULL },
  /* Two references to one 4 EiB storage passed as one tensor of 4 EiB. */
  { "trace-refs-overflow.csv", "more than 4 EiB" },
  { "scenario-include-diamond", NULL },
  /* One storage with two sizes: the result depended on which row came first. */
  { "trace-storage-two-sizes.csv", "storage 7 has 200 bytes here but 100 at line 2" },
  { "scenario-duplicate-key.ini", "duplicate-key.ini:13: [model] forward: the key is given twice (first at line 10)" },
  { "scenario-duplicate-group.ini", "duplicate-group.ini:13: [link]: the group is given twice (first at line 5)" },
  { "scenario-duplicate-policy.ini", "duplicate-policy.ini:15: [policy.a]: the group is given twice (first at line 13)" },
  { "scenario-locale-key.ini", "[policy.a] mode[de]: a key with a locale is not a scenario key" },
  { "scenario-bom.ini", NULL },
  { "scenario-control-bytes.ini", "[link] latency: expected a time with a unit (s, ms, us, ns), got "
                                  "'8\\x1b[2J\\x1b]0;owned\\x07us'" },
  /* 200 levels of '[' in a config.json: json-glib recurses per level, and
   * 100,000 of them (200 KB) crashed `offsim model` and hf_config (exit 139);
   * the depth is now counted before parsing. */
  { "hf-deep-nesting.json", "hf-deep-nesting.json:2: objects and arrays nest deeper than 64 levels" },
  /* GPT-2 with n_embd 872190 and n_head 6 (head_dim 145365): hf_config
   * accepted it, `offsim model` refused the scenario it generated. */
  { "hf-gpt2-head-dim.json", "hf-gpt2-head-dim.json: head_dim (n_embd / n_head): expected a whole number from 1 to "
                             "65536, got 145365" },
  /* A sync offload ran with prefetch and inflight given and ignored them. */
  { "scenario-sync-prefetch.ini", "[policy.sync] prefetch: mode = sync copies on the compute stream, in order: "
                                  "prefetch is an async option" },
  { "scenario-sync-inflight.ini", "[policy.save] inflight: mode = sync copies on the compute stream, in order: "
                                  "inflight is an async option" },
  /* Sizes in PiB were printed but refused when read back: every line reads now. */
  { "units-pib.txt", NULL },
  /* `version` beside a preset other than deepspeed's. */
  { "scenario-version-without-deepspeed.ini", "[policy.tt] version: chooses the code framework = deepspeed follows "
                                              "(release or master); framework = torchtune has no versions" },
  /* Megatron's attn_proj group without core_attn. */
  { "scenario-megatron-attn-proj-alone.ini", "[policy.mg] offload_modules: attn_proj needs core_attn" },
  /* gpt2's layout without its biases aborted on an assertion. */
  { "scenario-gpt2-without-bias.ini", "[transformer] linear_bias: gpt2's Conv1D layers all have biases" },
  /* A byte-order mark made the header's first column "\ufefflayer" ("missing column 'layer'"),
   * and a blank line was "expected 8 fields like the header, got 1": the chunk list's CSV
   * took both.  Both read as without them now (trace_reads_as_the_budget_csv). */
  { "trace-bom-blank-lines.csv", NULL },
  /* A column given twice: the second was read and the first ignored. */
  { "trace-duplicate-column.csv", "trace-duplicate-column.csv:1: column 'bytes' is given twice (fields 4 and 8)" },
  /* Messages that named neither file nor key (messages_name_file_and_key has the binary's). */
  { "scenario-framework-start.ini", "framework-start.ini: [policy.tune] start: framework = torchtune counts its "
                                    "copies in flight by saved tensor (inflight_unit = tensors), which needs start = "
                                    "tensor" },
  /* A mistral window of 8 tokens under seq 16: `offsim model` said only "attention: sdpa with ...". */
  { "hf-sliding-window.json", "attention: sdpa with the config's sliding_window (8) shorter than seq (16)" },
  { "scenario-p2p-zero.ini", "p2p-zero.ini: [parallel] p2p_bandwidth: expected a positive rate (0 would move "
                             "nothing), got '0'" },
  /* A million layers of a 1M-hidden model: 12 - 16 s and 1.1 GB built before "more than 4 EiB";
   * now refused from the fields, naming the one (hf_overflow_is_refused_before_building). */
  { "hf-4eib-layers.json", "layers: 1000000 layers of at least" },
  /* Runs (policies_that_do_nothing_say_so checks their notes). */
  { "scenario-policies-that-do-nothing.ini", NULL },
  /* Three chunks of 4 EiB: "the chunks' total bytes do not fit in a 64-bit integer", no file, no line. */
  { "budget-sum-overflow.csv", "budget-sum-overflow.csv:3: bytes: the chunks' bytes up to this row add up to more "
                               "than 8 EiB" },
};

static const char *
regression_expect(const char *file, gboolean *listed)
{
  for (guint i = 0; i < G_N_ELEMENTS(regressions); i++)
    if (strcmp(regressions[i].file, file) == 0) {
      *listed = TRUE;
      return regressions[i].expect;
    }
  *listed = FALSE;
  return NULL;
}

/* Loads one regression input as its parser does; NULL error: it loaded and
 * every policy ran (the fuzz targets' checks). */
static GError *
replay(const char *path, const char *file)
{
  GError *error = NULL;
  if (g_str_has_prefix(file, "scenario-")) {
    g_autofree char *top = g_file_test(path, G_FILE_TEST_IS_DIR) ? g_build_filename(path, "top.ini", NULL)
                                                                 : g_strdup(path);
    g_autoptr(SimScenario) s = sim_scenario_load_file(top, &error);
    if (s)
      fuzz_evaluate_all(s);
  } else if (g_str_has_prefix(file, "hf-")) {
    /* As `offsim model` reads it: ops = hf and what follows it, checked before it is built. */
    SimTransformer t;
    sim_transformer_defaults(&t);
    t.hf_ops = TRUE;
    sim_transformer_follow_ops(&t);
    t.batch = 2;
    t.seq = 16;
    if (sim_hf_config_load(path, &t, &error) && sim_transformer_validate(&t, NULL, &error)) {
      g_autoptr(SimScenario) s = fuzz_scenario_new(NULL);
      s->workload = sim_transformer_build(&t, &s->machine.device, "hf", &error);
      if (s->workload)
        fuzz_evaluate_all(s);
    }
  } else if (g_str_has_prefix(file, "trace-")) {
    SimWorkload *w = sim_trace_load(path, "trace", &error);
    g_autoptr(SimScenario) s = w ? fuzz_scenario_new(w) : NULL;
    if (s)
      fuzz_evaluate_all(s);
  } else if (g_str_has_prefix(file, "budget-")) {
    g_autoptr(GPtrArray) chunks = ledger_load_csv(path, &error);
    g_autoptr(LedgerSummary) summary = chunks ? ledger_summarize(chunks, 1 << 30, 8, &error) : NULL;
    ck_assert(summary == NULL || summary->kept_bytes + summary->offloaded_bytes == summary->total_bytes);
  } else if (g_str_has_prefix(file, "units-")) {
    g_autofree char *text = NULL;
    ck_assert(g_file_get_contents(path, &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **line = lines; *line; line++) {
      guint64 bytes;
      double value;
      sim_units_parse_size(*line, &bytes, NULL);
      sim_units_parse_rate(*line, &value, NULL);
      sim_units_parse_time(*line, &value, NULL);
    }
  } else {
    ck_abort_msg("%s: name it after its parser (scenario-, hf-, trace-, budget- or units-)", file);
  }
  return error;
}

/* The same input through the binary: the status its parser's command gives. */
static int
replay_binary(const char *path, const char *file)
{
  if (g_str_has_prefix(file, "scenario-")) {
    g_autofree char *top = g_file_test(path, G_FILE_TEST_IS_DIR) ? g_build_filename(path, "top.ini", NULL)
                                                                 : g_strdup(path);
    g_auto(TestRun) r = test_offsim("compare", top, NULL);
    return r.status;
  }
  if (g_str_has_prefix(file, "hf-")) {
    g_auto(TestRun) r = test_offsim("model", "--hf-config", path, "--batch", "2", "--seq", "16", NULL);
    if (r.status != 0)
      return r.status;
    /* What it printed must run. */
    g_autoptr(TempDir) dir = temp_dir();
    g_autofree char *printed = write_file(dir, "model.ini", r.out, -1);
    g_auto(TestRun) again = test_offsim("compare", printed, NULL);
    ck_assert_msg(again.status == 0, "%s: the printed scenario fails: %s", file, again.err);
    return 0;
  }
  if (g_str_has_prefix(file, "trace-")) {
    g_autoptr(TempDir) dir = temp_dir();
    g_autofree char *text = g_strdup_printf(DEVICE LINK "[trace]\nfile = %s\nforward = 1ms\n", path);
    g_autofree char *top = write_file(dir, "trace.ini", text, -1);
    g_auto(TestRun) r = test_offsim("compare", top, NULL);
    return r.status;
  }
  if (g_str_has_prefix(file, "budget-")) {
    g_auto(TestRun) r = test_offsim("budget", path, "--budget", "1GiB", "--bandwidth", "8GiB/s", NULL);
    return r.status;
  }
  return 0;
}

START_TEST(regressions_replay)
{
  g_autoptr(GDir) dir = g_dir_open(REGRESS, 0, NULL);
  ck_assert_ptr_nonnull(dir);
  guint replayed = 0;
  for (const char *file; (file = g_dir_read_name(dir));) {
    if (strcmp(file, "README.md") == 0)
      continue;
    gboolean listed;
    const char *expect = regression_expect(file, &listed);
    g_autofree char *path = g_build_filename(REGRESS, file, NULL);
    g_autoptr(GError) error = replay(path, file);
    int status = replay_binary(path, file);
    if (listed && expect == NULL) {
      ck_assert_msg(error == NULL, "%s: %s", file, error->message);
      ck_assert_msg(status == 0, "%s: offsim exits %d", file, status);
    } else if (listed) {
      ck_assert_msg(error != NULL, "%s loaded; expected '%s'", file, expect);
      assert_input_error(error, expect);
      ck_assert_msg(status == 2, "%s: offsim exits %d, expected 2", file, status);
    } else {
      /* Not in the table yet (a fresh fuzzer finding): at least no crash. */
      fuzz_expect_input_error(error, file);
      ck_assert_msg(status == 0 || status == 2, "%s: offsim exits %d", file, status);
    }
    replayed++;
  }
  ck_assert_uint_ge(replayed, G_N_ELEMENTS(regressions));
}
END_TEST

/* keep_last past the model used to wrap and offload: now it keeps every layer. */
START_TEST(regression_keep_last_keeps_everything)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(REGRESS "/scenario-keep-last-max.ini", &error);
  ck_assert_ptr_nonnull(s);
  g_autoptr(SimResult) r = test_evaluate(s, "keep-all");
  ck_assert_uint_eq(r->d2h_bytes, 0);
  ck_assert_uint_eq(r->d2h_copies, 0);
}
END_TEST

/* A recording and a chunk list read text alike (sim_config_skip_bom,
 * sim_config_blank_line): a byte-order mark and blank lines, the first
 * before the header, change nothing. */
START_TEST(trace_reads_as_the_budget_csv)
{
  static const char plain[] = "layer,op,name,bytes,dtype,shape,is_parameter,storage\n"
                              "0,input,input,8,bfloat16,4,0,1\n0,attn,mm,100,bfloat16,50,0,2\n"
                              "1,attn,mm,200,bfloat16,100,0,3\n1,mlp,mm,50,bfloat16,25,0,4\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(SimWorkload) marked = sim_trace_load(REGRESS "/trace-bom-blank-lines.csv", "t", &error);
  ck_assert_msg(marked != NULL, "%s", error ? error->message : "");
  g_autoptr(SimWorkload) w = sim_trace_load_data(plain, strlen(plain), "plain.csv", "t", &error);
  ck_assert_ptr_nonnull(w);
  ck_assert_uint_eq(sim_workload_n_layers(marked), sim_workload_n_layers(w));
  ck_assert_uint_eq(sim_workload_saved_bytes(marked), sim_workload_saved_bytes(w));
  for (guint l = 0; l < sim_workload_n_layers(w); l++) {
    ck_assert_uint_eq(sim_workload_layer(marked, l)->tensors->len, sim_workload_layer(w, l)->tensors->len);
    ck_assert_uint_eq(sim_workload_layer(marked, l)->input_bytes, sim_workload_layer(w, l)->input_bytes);
  }
  static const char chunks[] = "\xef\xbb\xbf\nname,bytes,reuse_delay_layers,offloadable\n\na,1MiB,1,yes\n \t\n";
  g_autoptr(GPtrArray) list = ledger_parse_csv(chunks, strlen(chunks), "chunks.csv", &error);
  ck_assert_msg(list != NULL && list->len == 1, "%s", error ? error->message : "");
  /* A column offsim does not read may repeat; one it reads may not. */
  static const char extra[] = "layer,op,name,bytes,dtype,shape,is_parameter,note,note\n0,a,x,10,f,1,0,p,q\n";
  g_autoptr(SimWorkload) repeated = sim_trace_load_data(extra, strlen(extra), "extra.csv", "t", &error);
  ck_assert_msg(repeated != NULL, "%s", error ? error->message : "");
}
END_TEST

/* ---- config.json: nesting, the two ways in, `offsim model`'s files ------------------ */

/* `offsim model` exits `status` (2: one line holding `expect`, and never the
 * name of the scenario being generated or json-glib's "<data>"). */
static void
assert_model(const TestRun *r, int status, const char *expect)
{
  ck_assert_msg(r->status == status, "offsim model: exit %d, expected %d: %s", r->status, status, r->err);
  if (status != 2)
    return;
  ck_assert_msg(strchr(r->err, '\n') == strrchr(r->err, '\n'), "more than one line: %s", r->err);
  ck_assert_msg(strstr(r->err, expect), "'%s' not in: %s", expect, r->err);
  ck_assert_msg(!strstr(r->err, "generated scenario") && !strstr(r->err, "<data>"), "names no user file: %s", r->err);
}

/* A scenario around `json` through [transformer] hf_config: a new path. */
static char *
hf_scenario(const char *dir, const char *json)
{
  g_autofree char *text = g_strdup_printf(DEVICE "matmul_tflops = 312\nhbm_bandwidth = 2TB/s\n" LINK
                                          "[transformer]\nhf_config = %s\nbatch = 2\nseq = 16\nops = hf\n", json);
  return write_file(dir, "hf.ini", text, -1);
}

/* 100,000 levels (200 KB) segfaulted json-glib: exit 139 through `offsim
 * model` and through hf_config.  Now any depth exits 2 naming the file. */
START_TEST(config_json_nested_100000_deep)
{
  g_autoptr(TempDir) dir = temp_dir();
  for (guint objects = 0; objects < 2; objects++) {
    GString *json = g_string_new(NULL);
    for (guint i = 0; i < 100000; i++)
      g_string_append(json, objects ? "{\"a\":" : "[");
    for (guint i = 0; i < 100000; i++)
      g_string_append_c(json, objects ? '}' : ']');
    g_autofree char *text = g_string_free(json, FALSE);
    g_autofree char *path = write_file(dir, "deep.json", text, -1);
    SimTransformer t;
    sim_transformer_defaults(&t);
    g_autoptr(GError) error = NULL;
    ck_assert(!sim_hf_config_load(path, &t, &error));
    assert_input_error(error, "deep.json:1: objects and arrays nest deeper than 64 levels");
    g_auto(TestRun) m = test_offsim("model", "--hf-config", path, "--batch", "2", "--seq", "16", NULL);
    assert_model(&m, 2, "deep.json:1: objects and arrays nest deeper than 64 levels");
    g_autofree char *scenario = hf_scenario(dir, path);
    assert_compare(scenario, 2, "deep.json:1: objects and arrays nest deeper than 64 levels");
  }
}
END_TEST

/* `offsim model` and [transformer] hf_config accept and refuse the same
 * config.json files (one validation; the scenario says ops = hf, as
 * `offsim model` writes it): every bundled model and every regression
 * input, through both, exits alike and names the same fault. */
START_TEST(hf_configs_agree_in_both_paths)
{
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
  const char *dirs[] = { REGRESS, OFFSIM_SCENARIOS "/models" };
  for (guint d = 0; d < G_N_ELEMENTS(dirs); d++) {
    g_autoptr(GDir) dir = g_dir_open(dirs[d], 0, NULL);
    ck_assert_ptr_nonnull(dir);
    for (const char *file; (file = g_dir_read_name(dir));)
      if (g_str_has_suffix(file, ".json"))
        g_ptr_array_add(files, g_build_filename(dirs[d], file, NULL));
  }
  ck_assert_uint_ge(files->len, 5);
  g_autoptr(TempDir) tmp = temp_dir();
  for (guint i = 0; i < files->len; i++) {
    const char *json = g_ptr_array_index(files, i);
    g_auto(TestRun) m = test_offsim("model", "--hf-config", json, "--batch", "2", "--seq", "16", NULL);
    g_autofree char *scenario = hf_scenario(tmp, json);
    g_auto(TestRun) c = test_offsim("compare", scenario, NULL);
    ck_assert_msg(m.status == c.status, "%s: offsim model exits %d, [transformer] hf_config %d\n%s%s", json, m.status,
                  c.status, m.err, c.err);
    if (m.status == 2) {
      /* "offsim: FILE: KEY: what" and "offsim: hf.ini: [transformer] hf_config: FILE: KEY: what";
       * or, for what the options decide or the whole shape, "offsim: FILE: --attention: what"
       * (or "field 'num_hidden_layers': what") and "offsim: hf.ini: [transformer] attention:
       * what" (or "layers: what"): the same fault after the key, an option's "--" aside. */
      const char *at = strstr(m.err, json);
      ck_assert_ptr_nonnull(at);
      at = strstr(at + strlen(json) + 1, ": ");
      ck_assert_ptr_nonnull(at);
      g_autoptr(GString) what = g_string_new(at + 2);
      g_string_replace(what, "--", "", 0);
      ck_assert_msg(strstr(c.err, what->str), "different faults:\n%s%s", m.err, c.err);
    }
  }
}
END_TEST

/* --profile is loaded (a missing one is exit 2, and a profile that cannot
 * run the model names the profile), and with --out the include is written
 * relative to the scenario's directory, so the scenario runs from anywhere;
 * printed to stdout it is relative to the current directory, as given. */
START_TEST(model_profile_is_loaded_and_included_from_the_scenario)
{
  const char *qwen = OFFSIM_SCENARIOS "/models/qwen2.5-0.5b.json";
  g_autoptr(TempDir) dir = temp_dir();
  g_auto(TestRun) missing = test_offsim("model", "--hf-config", qwen, "--batch", "2", "--seq", "16", "--profile",
                                        "/nonexistent.ini", NULL);
  assert_model(&missing, 2, "/nonexistent.ini");

  g_autofree char *profiles = g_build_filename(dir, "profiles", NULL);
  g_autofree char *out = g_build_filename(dir, "out", "deeper", NULL);
  ck_assert_int_eq(g_mkdir_with_parents(profiles, 0700), 0);
  ck_assert_int_eq(g_mkdir_with_parents(out, 0700), 0);
  g_autofree char *profile_text = NULL;
  ck_assert(g_file_get_contents(OFFSIM_SCENARIOS "/profiles/h100-sxm-pcie-gen5.ini", &profile_text, NULL, NULL));
  g_autofree char *profile = write_file(profiles, "h100.ini", profile_text, -1);
  g_auto(TestRun) written = test_offsim_in(dir, "model", "--hf-config", qwen, "--batch", "2", "--seq", "16",
                                           "--profile", "profiles/h100.ini", "--out", "out/deeper/qwen.ini", NULL);
  assert_model(&written, 0, NULL);
  ck_assert_str_eq(written.out, "");
  g_autofree char *scenario = g_build_filename(out, "qwen.ini", NULL);
  g_autofree char *text = NULL;
  ck_assert(g_file_get_contents(scenario, &text, NULL, NULL));
  ck_assert_msg(strstr(text, "\ninclude = ../../profiles/h100.ini\n"), "%s", text);
  assert_compare(scenario, 0, NULL);
  g_auto(TestRun) printed = test_offsim_in(dir, "model", "--hf-config", qwen, "--batch", "2", "--seq", "16",
                                           "--profile", "profiles/h100.ini", NULL);
  assert_model(&printed, 0, NULL);
  ck_assert_msg(strstr(printed.out, "\ninclude = profiles/h100.ini\n"), "%s", printed.out);
  g_auto(TestRun) absolute = test_offsim_in(dir, "model", "--hf-config", qwen, "--batch", "2", "--seq", "16",
                                            "--profile", profile, "--out", "out/abs.ini", NULL);
  assert_model(&absolute, 0, NULL);

  /* A profile without [link]: the profile is named, with the key. */
  const char *device = "[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n";
  g_autofree char *device_only = write_file(profiles, "device-only.ini", device, -1);
  g_auto(TestRun) partial = test_offsim("model", "--hf-config", qwen, "--batch", "2", "--seq", "16", "--profile",
                                        device_only, NULL);
  g_autofree char *expect = g_strdup_printf("%s: [link] h2d_bandwidth: missing required key", device_only);
  assert_model(&partial, 2, expect);
  /* --out where it cannot be written; a directory that does not exist. */
  g_auto(TestRun) nowhere = test_offsim_in(dir, "model", "--hf-config", qwen, "--batch", "2", "--seq", "16",
                                           "--profile", "profiles/h100.ini", "--out", "none/qwen.ini", NULL);
  assert_model(&nowhere, 2, "--out none/qwen.ini");
  g_auto(TestRun) unwritable = test_offsim_in(dir, "model", "--hf-config", qwen, "--batch", "2", "--seq", "16",
                                              "--out", "profiles", NULL);
  assert_model(&unwritable, 2, "--out profiles");
  /* --out naming a file it reads would replace it. */
  g_auto(TestRun) over = test_offsim_in(dir, "model", "--hf-config", qwen, "--batch", "2", "--seq", "16", "--profile",
                                        "profiles/h100.ini", "--out", "profiles/h100.ini", NULL);
  assert_model(&over, 2, "--out profiles/h100.ini: it is the file --profile reads");
  g_autofree char *after = NULL;
  ck_assert(g_file_get_contents(profile, &after, NULL, NULL));
  ck_assert_str_eq(after, profile_text);
}
END_TEST

/* `offsim model` names the user's file and field: a profile given as the
 * config.json, a config.json field the generated scenario would refuse,
 * an option out of range, a BOM (skipped), a line break in a value. */
START_TEST(model_errors_name_the_users_file_and_field)
{
  const char *qwen = OFFSIM_SCENARIOS "/models/qwen2.5-0.5b.json";
  const char *profile = OFFSIM_SCENARIOS "/profiles/h100-sxm-pcie-gen5.ini";
  g_auto(TestRun) ini = test_offsim("model", "--hf-config", profile, "--batch", "2", "--seq", "16", NULL);
  g_autofree char *at = g_strdup_printf("%s:1:1: not valid JSON", profile);
  assert_model(&ini, 2, at);
  ck_assert_ptr_nonnull(strstr(ini.err, "looks like a scenario or profile file"));
  g_auto(TestRun) field = test_offsim("model", "--hf-config", REGRESS "/hf-gpt2-head-dim.json", "--batch", "2", "--seq",
                                      "16", NULL);
  assert_model(&field, 2, "hf-gpt2-head-dim.json: head_dim (n_embd / n_head)");
  g_auto(TestRun) batch = test_offsim("model", "--hf-config", qwen, "--batch", "2000000", "--seq", "16", NULL);
  assert_model(&batch, 2, "--batch: expected a whole number from 1 to 1048576, got 2000000");
  g_auto(TestRun) seq = test_offsim("model", "--hf-config", qwen, "--batch", "1", "--seq", "20000000", NULL);
  assert_model(&seq, 2, "--seq: expected a whole number from 1 to 16777216, got 20000000");
  /* Too large for 4 EiB: the config.json and the options that make it so. */
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *huge = write_file(dir, "huge.json",
                                     "{\"model_type\": \"llama\", \"hidden_size\": 1048576, \"num_hidden_layers\": "
                                     "1000000, \"num_attention_heads\": 16, \"intermediate_size\": 16777216, "
                                     "\"vocab_size\": 1000000000}", -1);
  g_auto(TestRun) big = test_offsim("model", "--hf-config", huge, "--batch", "1024", "--seq", "65536", "--ops", "fused",
                                    NULL);
  g_autofree char *big_expect = g_strdup_printf("%s: field 'num_hidden_layers': 1000000 layers of at least", huge);
  assert_model(&big, 2, big_expect);
  g_autofree char *qwen_text = NULL;
  ck_assert(g_file_get_contents(qwen, &qwen_text, NULL, NULL));
  g_autofree char *bom_text = g_strconcat("\xef\xbb\xbf", qwen_text, NULL);
  g_autofree char *bom = write_file(dir, "bom.json", bom_text, -1);
  g_auto(TestRun) with_bom = test_offsim("model", "--hf-config", bom, "--batch", "2", "--seq", "16", NULL);
  assert_model(&with_bom, 0, NULL);
  g_auto(TestRun) name = test_offsim("model", "--hf-config", qwen, "--batch", "2", "--seq", "16", "--name",
                                     "x\n[device]\nmemory = 1B", NULL);
  assert_model(&name, 2, "--name: a line break cannot be written into a scenario");
}
END_TEST

/* Each message names its file and its key (or option, or line and column). */
START_TEST(messages_name_file_and_key)
{
  g_auto(TestRun) window = test_offsim("model", "--hf-config", REGRESS "/hf-sliding-window.json", "--batch", "2",
                                       "--seq", "16", NULL);
  assert_model(&window, 2, "hf-sliding-window.json: --attention: sdpa with the config's sliding_window (8) shorter "
                           "than --seq (16)");
  g_auto(TestRun) chunks = test_offsim("budget", REGRESS "/budget-sum-overflow.csv", "--budget", "1GiB", "--bandwidth",
                                       "8GiB/s", NULL);
  ck_assert_int_eq(chunks.status, 2);
  ck_assert_msg(strstr(chunks.err, "budget-sum-overflow.csv:3: bytes: "), "%s", chunks.err);
  g_auto(TestRun) start = test_offsim("compare", REGRESS "/scenario-framework-start.ini", NULL);
  ck_assert_int_eq(start.status, 2);
  ck_assert_msg(strstr(start.err, "scenario-framework-start.ini: [policy.tune] start: framework = torchtune"), "%s",
                start.err);
}
END_TEST

/* A config.json whose model passes 4 EiB is refused from its fields, before a
 * layer is built: it took 12 - 16 s and 1.1 GB (a million layers built, then
 * summed).  Through both ways in, each naming the field; and fast, with a
 * margin for a loaded machine under ASan that the build never had. */
START_TEST(hf_overflow_is_refused_before_building)
{
  const char *json = REGRESS "/hf-4eib-layers.json";
  gint64 start = g_get_monotonic_time();
  g_auto(TestRun) m = test_offsim("model", "--hf-config", json, "--batch", "1", "--seq", "16", NULL);
  assert_model(&m, 2, "hf-4eib-layers.json: field 'num_hidden_layers': 1000000 layers of at least");
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *scenario = hf_scenario(dir, json);
  assert_compare(scenario, 2, "hf.ini: [transformer] layers: 1000000 layers of at least");
  double seconds = (double)(g_get_monotonic_time() - start) / 1e6;
  ck_assert_msg(seconds < 5, "refused in %.1f s", seconds);
  /* The attention scores are named too. */
  SimTransformer t;
  sim_transformer_defaults(&t);
  t.hidden = 64, t.layers = 2, t.heads = 65536, t.kv_heads = 1, t.head_dim = 1, t.ffn = 64, t.vocab = 100;
  t.batch = 1048576, t.seq = 16777216;
  g_autoptr(GError) error = NULL;
  ck_assert(!sim_transformer_validate(&t, NULL, &error));
  assert_input_error(error, "seq: the attention scores (batch x heads x seq^2: 1.93e+25 elements) take more than "
                            "4 EiB");
}
END_TEST

/* ---- outputs: unwritable paths ---------------------------------------------------- */

/* Nothing but `expected` is left in `dir` (no temporary file). */
static void
assert_only(const char *dir, const char *const *expected)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  ck_assert_ptr_nonnull(d);
  for (const char *name; (name = g_dir_read_name(d));)
    ck_assert_msg(g_strv_contains(expected, name), "%s left in %s", name, dir);
}

/* Each file option, pointed where it cannot write, exits 2 with one line
 * naming the option and the path, and leaves no temporary file behind. */
START_TEST(unwritable_outputs_are_clear_errors)
{
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *blocker = write_file(dir, "a-file", "x", -1);
  g_autofree char *below_file = g_build_filename(blocker, "out", NULL);
  g_autofree char *taken = g_build_filename(dir, "taken", NULL);
  ck_assert_int_eq(g_mkdir(taken, 0700), 0);
  static const char *const options[] = { "--trace", "--timeline", "--memory", "--plot-script" };
  for (guint i = 0; i < G_N_ELEMENTS(options); i++) {
    /* Under a regular file (ENOTDIR even for root), and onto a directory. */
    const char *targets[] = { below_file, taken };
    for (guint t = 0; t < G_N_ELEMENTS(targets); t++) {
      g_auto(TestRun) r = test_offsim("run", "--policy", "offload-async", options[i], targets[t], NULL);
      ck_assert_msg(r.status == 2, "%s %s: exit %d: %s", options[i], targets[t], r.status, r.err);
      ck_assert_msg(strstr(r.err, options[i]) && strstr(r.err, targets[t]), "%s: unclear: %s", options[i], r.err);
      ck_assert_msg(strchr(r.err, '\n') == strrchr(r.err, '\n'), "more than one line: %s", r.err);
      assert_only(dir, (const char *const[]){ "a-file", "taken", NULL });
      assert_only(taken, (const char *const[]){ NULL });
    }
  }
  for (guint t = 0; t < 2; t++) {
    const char *target = t ? taken : below_file;
    g_auto(TestRun) r = test_offsim("sweep", OFFSIM_SCENARIOS "/tiny.ini", "--set", "link.latency=1us,2us", "--out",
                                    target, NULL);
    ck_assert_msg(r.status == 2 && strstr(r.err, "--out") && strstr(r.err, target), "sweep --out %s: exit %d: %s",
                  target, r.status, r.err);
    assert_only(dir, (const char *const[]){ "a-file", "taken", NULL });
  }
  /* The path is checked before anything runs, gnuplot or not. */
  g_auto(TestRun) plot = test_offsim("compare", "--plot", below_file, NULL);
  ck_assert_msg(plot.status == 2, "--plot under a file: exit %d: %s", plot.status, plot.err);
  ck_assert_ptr_nonnull(strstr(plot.err, "--plot"));
  ck_assert_str_eq(plot.out, "");
  assert_only(dir, (const char *const[]){ "a-file", "taken", NULL });
}
END_TEST

/* Output paths used to be tried only after the simulation ran and printed
 * its report ("Failed to rename file ?.E6QHZ3? to ??"): now each is checked
 * first, and the one line names the option, the path and what is wrong. */
START_TEST(output_paths_are_checked_before_the_run)
{
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *blocker = write_file(dir, "a-file", "x", -1);
  g_autofree char *taken = g_build_filename(dir, "taken", NULL);
  ck_assert_int_eq(g_mkdir(taken, 0700), 0);
  g_autofree char *slash = g_strconcat(taken, "/", NULL);
  g_autofree char *missing = g_build_filename(dir, "missing", "out.json", NULL);
  g_autofree char *missing_dir = g_build_filename(dir, "missing", NULL);
  g_autofree char *below_file = g_build_filename(blocker, "out", NULL);
  const struct {
    const char *path, *why;
  } files[] = {
    { "", "expected a file name, got an empty path" },
    { slash, "names a directory, expected a file name" },
    { taken, "names a directory, expected a file name" },
    { "/dev/null", "exists and is not a regular file (it would be replaced)" },
    { missing, NULL }, /* the directory '.../missing' does not exist */
    { below_file, NULL }, /* '.../a-file' is not a directory */
  };
  g_autofree char *missing_why = g_strdup_printf("the directory '%s' does not exist", missing_dir);
  g_autofree char *below_why = g_strdup_printf("'%s' is not a directory", blocker);
  static const char *const options[] = { "--trace", "--timeline", "--memory", "--plot-script" };
  for (guint i = 0; i < G_N_ELEMENTS(options); i++)
    for (guint f = 0; f < G_N_ELEMENTS(files); f++) {
      const char *why = files[f].why ? files[f].why : f == 4 ? missing_why : below_why;
      g_autofree char *expect = g_strdup_printf("offsim: %s '%s': %s\n", options[i], files[f].path, why);
      g_auto(TestRun) r = test_offsim("run", "--format", "json", options[i], files[f].path, NULL);
      ck_assert_msg(r.status == 2, "%s '%s': exit %d: %s", options[i], files[f].path, r.status, r.err);
      ck_assert_str_eq(r.err, expect);
      /* Nothing ran: no report. */
      ck_assert_msg(r.out[0] == '\0', "%s '%s': the report was printed first", options[i], files[f].path);
    }
  for (guint f = 0; f < G_N_ELEMENTS(files); f++) {
    if (files[f].path == taken)
      continue; /* the tests above: --out onto a directory */
    const char *why = files[f].why ? files[f].why : f == 4 ? missing_why : below_why;
    g_autofree char *expect = g_strdup_printf("offsim: --out '%s': %s\n", files[f].path, why);
    g_auto(TestRun) r = test_offsim("sweep", OFFSIM_SCENARIOS "/tiny.ini", "--set", "link.latency=1us", "--out",
                                    files[f].path, NULL);
    ck_assert_msg(r.status == 2, "--out '%s': exit %d: %s", files[f].path, r.status, r.err);
    ck_assert_str_eq(r.err, expect);
  }
  /* A plot directory may be missing (it is made), not a file or empty. */
  const char *plot_args[][2] = { { "", "expected a directory, got an empty path" }, { blocker, "not a directory" },
                                 { below_file, below_why } };
  for (guint p = 0; p < G_N_ELEMENTS(plot_args); p++) {
    g_autofree char *expect = g_strdup_printf("offsim: --plot '%s': %s\n", plot_args[p][0], plot_args[p][1]);
    g_auto(TestRun) r = test_offsim("compare", "--format", "csv", "--plot", plot_args[p][0], NULL);
    ck_assert_msg(r.status == 2, "--plot '%s': exit %d: %s", plot_args[p][0], r.status, r.err);
    ck_assert_str_eq(r.err, expect);
    ck_assert_str_eq(r.out, "");
    g_auto(TestRun) s = test_offsim("sweep", OFFSIM_SCENARIOS "/tiny.ini", "--set", "link.latency=1us", "--plot",
                                    plot_args[p][0], NULL);
    ck_assert_int_eq(s.status, 2);
    ck_assert_str_eq(s.err, expect);
    ck_assert_str_eq(s.out, "");
  }
  assert_only(dir, (const char *const[]){ "a-file", "taken", NULL });
  assert_only(taken, (const char *const[]){ NULL });
}
END_TEST

/* A picture whose final name is taken by a directory: the rename fails, and
 * every temporary picture is removed. */
START_TEST(plot_rename_failure_leaves_no_temporary)
{
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  if (gnuplot == NULL)
    return; /* nothing is drawn without it: exit 3, covered above */
  g_autoptr(TempDir) dir = temp_dir();
  g_autofree char *memory = g_build_filename(dir, "memory.png", NULL);
  ck_assert_int_eq(g_mkdir(memory, 0700), 0);
  g_auto(TestRun) r = test_offsim("run", "--plot", dir, "--plot-format", "png", NULL);
  ck_assert_msg(r.status == 2, "exit %d: %s", r.status, r.err);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  for (const char *name; (name = g_dir_read_name(d));)
    ck_assert_msg(name[0] != '.', "temporary %s left behind", name);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("hostile");
  TCase *tc = tcase_create("hostile");
  /* The 10,000-layer and 1 MB cases take seconds under the sanitizers. */
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, layers_10000_linear);
  tcase_add_test(tc, layers_10000_transformer);
  tcase_add_test(tc, work_per_layer_is_flat_to_a_million_layers);
  tcase_add_test(tc, layers_100000_of_32_past_the_dense_table);
  tcase_add_test(tc, tensor_1tib_exact);
  tcase_add_test(tc, byte_sums_cannot_overflow);
  tcase_add_test(tc, ops_of_1ns);
  tcase_add_test(tc, zero_size_tensors);
  tcase_add_test(tc, bandwidth_1_byte_per_second);
  tcase_add_test(tc, include_depth_64);
  tcase_add_test(tc, name_of_1mb);
  tcase_add_test(tc, error_quote_escapes_and_cuts);
  tcase_add_test(tc, messages_keep_utf8_and_escape_control_bytes);
  tcase_add_test(tc, nul_bytes_and_invalid_utf8);
  tcase_add_test(tc, numbers_of_30_digits);
  tcase_add_test(tc, include_of_a_fifo_without_writer);
  tcase_add_test(tc, prefetch_deeper_than_the_model);
  tcase_add_test(tc, budget_100000_chunks);
  tcase_add_test(tc, regressions_replay);
  tcase_add_test(tc, regression_keep_last_keeps_everything);
  tcase_add_test(tc, trace_reads_as_the_budget_csv);
  tcase_add_test(tc, messages_name_file_and_key);
  tcase_add_test(tc, hf_overflow_is_refused_before_building);
  tcase_add_test(tc, config_json_nested_100000_deep);
  tcase_add_test(tc, hf_configs_agree_in_both_paths);
  tcase_add_test(tc, model_profile_is_loaded_and_included_from_the_scenario);
  tcase_add_test(tc, model_errors_name_the_users_file_and_field);
  tcase_add_test(tc, unwritable_outputs_are_clear_errors);
  tcase_add_test(tc, output_paths_are_checked_before_the_run);
  tcase_add_test(tc, plot_rename_failure_leaves_no_temporary);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
