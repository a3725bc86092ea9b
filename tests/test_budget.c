/* The activation budget ledger (ledger/ledger.h) and `offsim budget`:
 * every figure of the seed chapter's (docs/reference.md) tests, its rejections in its order, the
 * CSV reader's strictness, and the command line's exit codes and JSON. */
#include "testutil.h"

#include "base/error.h"
#include "ledger/ledger.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define MiB (G_GINT64_CONSTANT(1024) * 1024)
#define CHAPTER_CSV OFFSIM_TEST_DATA "/budget/chapter42.csv"
#define BLOCKED_CSV OFFSIM_TEST_DATA "/budget/blocked.csv"

/* build_activation_fixture() of the chapter. */
static GPtrArray *
chapter_chunks(void)
{
  GPtrArray *chunks = ledger_chunks_new();
  g_ptr_array_add(chunks, ledger_chunk_new("embed", 256 * MiB, 0, TRUE));
  g_ptr_array_add(chunks, ledger_chunk_new("mid_a", 192 * MiB, 2, TRUE));
  g_ptr_array_add(chunks, ledger_chunk_new("mid_b", 160 * MiB, 3, TRUE));
  g_ptr_array_add(chunks, ledger_chunk_new("tail", 128 * MiB, 1, TRUE));
  return chunks;
}

static LedgerSummary *
summarize_ok(GPtrArray *chunks, gint64 budget, double gibps)
{
  g_autoptr(GError) error = NULL;
  LedgerSummary *s = ledger_summarize(chunks, budget, gibps, &error);
  ck_assert_msg(s != NULL, "summarize failed: %s", error ? error->message : "?");
  return s;
}

static LedgerSummary *
chapter_summary(gint64 budget, double gibps)
{
  g_autoptr(GPtrArray) chunks = chapter_chunks();
  return summarize_ok(chunks, budget, gibps);
}

static LedgerVerdict
recommend_ok(const LedgerSummary *s, double min_saved_ratio, double max_transfer_ms)
{
  g_autoptr(GError) error = NULL;
  LedgerVerdict v = LEDGER_ACCEPT;
  ck_assert_msg(ledger_recommend(s, min_saved_ratio, max_transfer_ms, &v, &error), "recommend failed: %s",
                error ? error->message : "?");
  return v;
}

static LedgerVerdict
recommend_default(const LedgerSummary *s)
{
  return recommend_ok(s, LEDGER_MIN_SAVED_RATIO, LEDGER_MAX_TRANSFER_MS);
}

/* Asserts that a GError is an input error whose message holds `expected`. */
static void
assert_input_error(const GError *error, const char *expected)
{
  ck_assert_msg(error != NULL, "no error; expected '%s'", expected);
  ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
  ck_assert_msg(strstr(error->message, expected) != NULL, "message '%s' lacks '%s'", error->message, expected);
}

static void
assert_names(GPtrArray *names, const char *const *expected, guint n)
{
  ck_assert_uint_eq(names->len, n);
  for (guint i = 0; i < n; i++)
    ck_assert_str_eq(g_ptr_array_index(names, i), expected[i]);
}

/* ---- Python's round() --------------------------------------------------- */

START_TEST(round_is_pythons)
{
  /* Values from CPython 3: ties to even on the exact binary value. */
  static const struct {
    double x;
    int n;
    double expected;
  } cases[] = {
    { 2.675, 2, 2.67 },   /* 2.67499999... in binary */
    { 0.125, 2, 0.12 },   /* an exact tie: to even */
    { 0.375, 2, 0.38 },   /* an exact tie: to even */
    { -0.125, 2, -0.12 }, /* ties are symmetric */
    { 1.0005, 3, 1.0 },   /* 1.000499999... */
    { 0.0005, 3, 0.001 }, /* 0.000500000000000000010... */
    { 2.5, 0, 2.0 },
    { 3.5, 0, 4.0 },
    { 85.9375, 2, 85.94 },  /* the chapter's round trip, an exact tie */
    { 42.96875, 2, 42.97 }, /* the chapter's one way */
    { 1.9166666666666667, 3, 1.917 },
    { 0.4782608695652174, 3, 0.478 },
    { 1e300, 2, 1e300 },
    { 5e-324, 2, 0.0 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    double got = ledger_round(cases[i].x, cases[i].n);
    ck_assert_msg(got == cases[i].expected, "round(%.17g, %d) = %.17g, expected %.17g", cases[i].x, cases[i].n, got,
                  cases[i].expected);
  }
  ck_assert(isinf(ledger_round(INFINITY, 2)));
  ck_assert(isnan(ledger_round(NAN, 2)));
}
END_TEST

/* ---- TODO 1: the ledger ------------------------------------------------- */

START_TEST(chapter_ledger_figures)
{
  g_autoptr(LedgerSummary) s = chapter_summary(384 * MiB, 8.0);
  ck_assert_int_eq(s->total_bytes, 736 * MiB);
  ck_assert_int_eq(s->offloaded_bytes, 352 * MiB);
  ck_assert_int_eq(s->kept_bytes, 384 * MiB);
  ck_assert_int_eq(s->budget_bytes, 384 * MiB);
  static const char *const offloaded[] = { "mid_b", "mid_a" };
  static const char *const kept[] = { "embed", "tail" };
  assert_names(s->offloaded_names, offloaded, 2);
  assert_names(s->kept_names, kept, 2);
  ck_assert(s->transfer_ms > 42.0 && s->transfer_ms < 44.0);
  ck_assert(s->transfer_ms == 42.97);
  ck_assert(s->pressure_ratio == 1.917);
  ck_assert(s->saved_ratio > 0.47 && s->saved_ratio < 0.49);
  ck_assert(s->saved_ratio == 0.478);
  ck_assert(s->round_trip_ms == 85.94);
  ck_assert(s->feasible);
  ck_assert_int_eq(s->overflow_bytes, 0);
}
END_TEST

START_TEST(zero_total_gives_zero_ratios)
{
  g_autoptr(GPtrArray) none = ledger_chunks_new();
  g_autoptr(LedgerSummary) s = summarize_ok(none, 1024, 8.0);
  ck_assert_int_eq(s->total_bytes, 0);
  ck_assert(s->pressure_ratio == 0.0);
  ck_assert(s->saved_ratio == 0.0);
  ck_assert(s->transfer_ms == 0.0 && s->round_trip_ms == 0.0);
  ck_assert(s->feasible);
  ck_assert_uint_eq(s->offloaded_names->len + s->kept_names->len, 0);
}
END_TEST

START_TEST(blocked_chunk_is_infeasible)
{
  g_autoptr(GPtrArray) chunks = ledger_chunks_new();
  g_ptr_array_add(chunks, ledger_chunk_new("fixed", 512 * MiB, 0, FALSE));
  g_autoptr(LedgerSummary) s = summarize_ok(chunks, 256 * MiB, 8.0);
  ck_assert(!s->feasible);
  ck_assert_int_eq(s->overflow_bytes, 256 * MiB);
  ck_assert_int_eq(s->offloaded_bytes, 0);
  ck_assert_int_eq(s->kept_bytes, 512 * MiB);
  ck_assert(s->pressure_ratio == 2.0);
  ck_assert_int_eq(recommend_default(s), LEDGER_REJECT);
}
END_TEST

START_TEST(candidates_order_by_delay_then_bytes_then_name)
{
  g_autoptr(GPtrArray) chunks = ledger_chunks_new();
  g_ptr_array_add(chunks, ledger_chunk_new("b", 10, 1, TRUE));
  g_ptr_array_add(chunks, ledger_chunk_new("a", 10, 1, TRUE));
  g_ptr_array_add(chunks, ledger_chunk_new("pinned", 1000, 9, FALSE));
  g_ptr_array_add(chunks, ledger_chunk_new("c", 20, 1, TRUE));
  g_ptr_array_add(chunks, ledger_chunk_new("d", 5, 2, TRUE));
  g_autoptr(LedgerSummary) s = summarize_ok(chunks, 1, 1.0);
  static const char *const offloaded[] = { "d", "c", "a", "b" };
  static const char *const kept[] = { "pinned" };
  assert_names(s->offloaded_names, offloaded, 4);
  assert_names(s->kept_names, kept, 1);
  ck_assert_int_eq(s->overflow_bytes, 999);
}
END_TEST

/* As in Python, a zero-byte chunk that comes first is offloaded while the
 * rest are still over the budget; offloading stops as soon as they fit. */
START_TEST(offloading_stops_once_within_budget)
{
  g_autoptr(GPtrArray) chunks = ledger_chunks_new();
  g_ptr_array_add(chunks, ledger_chunk_new("big", 100, 0, TRUE));
  g_ptr_array_add(chunks, ledger_chunk_new("zero", 0, 5, TRUE));
  g_ptr_array_add(chunks, ledger_chunk_new("mid", 60, 1, TRUE));
  g_autoptr(LedgerSummary) s = summarize_ok(chunks, 100, 1.0);
  static const char *const offloaded[] = { "zero", "mid" };
  static const char *const kept[] = { "big" };
  assert_names(s->offloaded_names, offloaded, 2);
  assert_names(s->kept_names, kept, 1);
  ck_assert_int_eq(s->kept_bytes, 100);
  ck_assert(s->feasible);
}
END_TEST

START_TEST(invalid_metadata_is_rejected_in_the_chapters_order)
{
  static const struct {
    const char *name;
    gint64 bytes, delay;
    const char *expected;
  } cases[] = {
    { "bad", -1, 0, "chunk bytes must be non-negative: 'bad' has -1" },
    { "bad", 1, -1, "reuse_delay_layers must be non-negative: 'bad' has -1" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GPtrArray) chunks = ledger_chunks_new();
    g_ptr_array_add(chunks, ledger_chunk_new(cases[i].name, cases[i].bytes, cases[i].delay, TRUE));
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(ledger_summarize(chunks, 1, 1.0, &error));
    assert_input_error(error, cases[i].expected);
  }
  /* Duplicates are found before negative bytes, as in the chapter. */
  g_autoptr(GPtrArray) dup = ledger_chunks_new();
  g_ptr_array_add(dup, ledger_chunk_new("dup", 1, 0, TRUE));
  g_ptr_array_add(dup, ledger_chunk_new("neg", -1, 0, TRUE));
  g_ptr_array_add(dup, ledger_chunk_new("dup", 1, 1, TRUE));
  g_autoptr(GError) dup_error = NULL;
  ck_assert_ptr_null(ledger_summarize(dup, 1, 1.0, &dup_error));
  assert_input_error(dup_error, "chunk names must be unique: 'dup' appears twice");
  /* The budget is checked before the bandwidth, both before the chunks. */
  g_autoptr(GError) budget_error = NULL;
  ck_assert_ptr_null(ledger_summarize(dup, 0, 0.0, &budget_error));
  assert_input_error(budget_error, "gpu_budget_bytes must be positive, got 0");
  g_autoptr(GError) negative_budget = NULL;
  ck_assert_ptr_null(ledger_summarize(dup, -5, 1.0, &negative_budget));
  assert_input_error(negative_budget, "gpu_budget_bytes must be positive, got -5");
  const double bad_bandwidths[] = { 0.0, -1.0, NAN, INFINITY };
  for (guint i = 0; i < G_N_ELEMENTS(bad_bandwidths); i++) {
    g_autoptr(GError) error = NULL;
    ck_assert_ptr_null(ledger_summarize(dup, 1, bad_bandwidths[i], &error));
    assert_input_error(error, "bandwidth_gbps must be positive");
  }
  /* Python's integers cannot overflow; ours must refuse to. */
  g_autoptr(GPtrArray) huge = ledger_chunks_new();
  g_ptr_array_add(huge, ledger_chunk_new("a", G_MAXINT64 - 1, 0, TRUE));
  g_ptr_array_add(huge, ledger_chunk_new("b", 2, 0, TRUE));
  g_autoptr(GError) overflow = NULL;
  ck_assert_ptr_null(ledger_summarize(huge, 1, 1.0, &overflow));
  assert_input_error(overflow, "do not fit in a 64-bit integer");
}
END_TEST

/* ---- TODO 2: the round trip --------------------------------------------- */

START_TEST(round_trip_cost)
{
  g_autoptr(GError) error = NULL;
  double ms = -1;
  ck_assert(ledger_round_trip_ms(352 * MiB, 8.0, &ms, &error));
  ck_assert(ms == 85.94);
  ck_assert(ledger_round_trip_ms(0, 8.0, &ms, &error));
  ck_assert(ms == 0.0);
  ck_assert(ledger_round_trip_ms(352 * MiB, 4.0, &ms, &error));
  ck_assert(ms == 171.88);
  g_autoptr(GError) negative = NULL;
  ck_assert(!ledger_round_trip_ms(-1, 8.0, &ms, &negative));
  assert_input_error(negative, "offloaded_bytes must be non-negative, got -1");
  g_autoptr(GError) zero = NULL;
  ck_assert(!ledger_round_trip_ms(1, 0.0, &ms, &zero));
  assert_input_error(zero, "bandwidth_gbps must be positive");
}
END_TEST

/* ---- TODO 3: the verdict ------------------------------------------------ */

START_TEST(policy_accept_tune_reject)
{
  g_autoptr(LedgerSummary) fast = chapter_summary(384 * MiB, 8.0);
  g_autoptr(LedgerSummary) tuned = chapter_summary(384 * MiB, 4.0);
  g_autoptr(LedgerSummary) slow = chapter_summary(384 * MiB, 1.0);
  g_autoptr(LedgerSummary) empty = chapter_summary(1024 * MiB, 8.0);
  ck_assert_int_eq(recommend_default(fast), LEDGER_ACCEPT);
  ck_assert(tuned->transfer_ms == 85.94);
  ck_assert_int_eq(recommend_default(tuned), LEDGER_TUNE);
  ck_assert(slow->transfer_ms == 343.75);
  ck_assert_int_eq(recommend_default(slow), LEDGER_REJECT);
  ck_assert_int_eq(empty->offloaded_bytes, 0);
  ck_assert_int_eq(recommend_default(empty), LEDGER_REJECT);
  ck_assert_str_eq(ledger_verdict_name(LEDGER_ACCEPT), "accept");
  ck_assert_str_eq(ledger_verdict_name(LEDGER_TUNE), "tune");
  ck_assert_str_eq(ledger_verdict_name(LEDGER_REJECT), "reject");
}
END_TEST

/* The thresholds are inclusive and read the rounded figures (saved 0.478,
 * one way 42.97 ms); relaxed is half the ratio and twice the time. */
START_TEST(policy_threshold_boundaries)
{
  g_autoptr(LedgerSummary) s = chapter_summary(384 * MiB, 8.0);
  ck_assert_int_eq(recommend_ok(s, 0.478, 60.0), LEDGER_ACCEPT);
  ck_assert_int_eq(recommend_ok(s, 0.479, 60.0), LEDGER_TUNE);
  ck_assert_int_eq(recommend_ok(s, 0.25, 42.97), LEDGER_ACCEPT);
  ck_assert_int_eq(recommend_ok(s, 0.25, 42.96), LEDGER_TUNE);
  ck_assert_int_eq(recommend_ok(s, 0.956, 60.0), LEDGER_TUNE);
  ck_assert_int_eq(recommend_ok(s, 0.957, 60.0), LEDGER_REJECT);
  ck_assert_int_eq(recommend_ok(s, 0.25, 21.485), LEDGER_TUNE);
  ck_assert_int_eq(recommend_ok(s, 0.25, 21.48), LEDGER_REJECT);
  ck_assert_int_eq(recommend_ok(s, 0.0, 0.0), LEDGER_REJECT);
}
END_TEST

START_TEST(policy_rejects_infeasible_plans_that_offload)
{
  g_autoptr(GPtrArray) chunks = ledger_chunks_new();
  g_ptr_array_add(chunks, ledger_chunk_new("fixed", 512 * MiB, 0, FALSE));
  g_ptr_array_add(chunks, ledger_chunk_new("cold", 512 * MiB, 4, TRUE));
  g_autoptr(LedgerSummary) s = summarize_ok(chunks, 256 * MiB, 1000.0);
  ck_assert_int_eq(s->offloaded_bytes, 512 * MiB);
  ck_assert(!s->feasible);
  ck_assert_int_eq(s->overflow_bytes, 256 * MiB);
  /* saved 0.5 and 0.5 ms would accept, were the plan feasible. */
  ck_assert_int_eq(recommend_default(s), LEDGER_REJECT);
}
END_TEST

START_TEST(negative_thresholds_after_the_zero_offload_return)
{
  g_autoptr(LedgerSummary) s = chapter_summary(384 * MiB, 8.0);
  const double bad[][2] = { { -0.1, 60.0 }, { 0.25, -1.0 } };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    LedgerVerdict v = LEDGER_ACCEPT;
    ck_assert(!ledger_recommend(s, bad[i][0], bad[i][1], &v, &error));
    assert_input_error(error, "policy thresholds must be non-negative");
  }
  /* The chapter returns "reject" for nothing offloaded before it looks at
   * the thresholds, so there they pass unnoticed. */
  g_autoptr(LedgerSummary) empty = chapter_summary(1024 * MiB, 8.0);
  ck_assert_int_eq(recommend_ok(empty, -0.1, -1.0), LEDGER_REJECT);
}
END_TEST

/* ---- checkpointing ------------------------------------------------------ */

START_TEST(offload_vs_checkpointing)
{
  g_autoptr(LedgerSummary) s = chapter_summary(384 * MiB, 8.0);
  g_autoptr(GError) error = NULL;
  LedgerComparison better_offload, better_ckpt, tie, free_ckpt;
  ck_assert(ledger_compare_checkpointing(s, 300 * MiB, 80.0, &better_offload, &error));
  ck_assert(better_offload.prefer_offload);
  ck_assert(better_offload.offload_score == 8589684.71); /* 352 MiB / 42.97 ms, as Python rounds it */
  ck_assert(better_offload.checkpoint_score == 3932160.0);
  ck_assert(ledger_compare_checkpointing(s, 500 * MiB, 20.0, &better_ckpt, &error));
  ck_assert(!better_ckpt.prefer_offload);
  ck_assert(better_ckpt.checkpoint_score == 26214400.0);
  /* A tie prefers offload; a free checkpoint is floored at 1e-6 ms. */
  ck_assert(ledger_compare_checkpointing(s, s->offloaded_bytes, s->transfer_ms, &tie, &error));
  ck_assert(tie.prefer_offload);
  ck_assert(ledger_compare_checkpointing(s, 10, 0.0, &free_ckpt, &error));
  ck_assert(free_ckpt.checkpoint_score == 1e7);
  ck_assert(!free_ckpt.prefer_offload);

  const struct {
    gint64 saved;
    double extra;
  } bad[] = { { -1, 10.0 }, { 100, -1.0 }, { 100, NAN } };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) bad_error = NULL;
    LedgerComparison c;
    ck_assert(!ledger_compare_checkpointing(s, bad[i].saved, bad[i].extra, &c, &bad_error));
    assert_input_error(bad_error, "checkpoint values must be non-negative");
  }
}
END_TEST

/* ---- CSV ---------------------------------------------------------------- */

#define HEADER "name,bytes,reuse_delay_layers,offloadable\n"

static GPtrArray *
parse_ok(const char *text)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *chunks = ledger_parse_csv(text, strlen(text), "t.csv", &error);
  ck_assert_msg(chunks != NULL, "did not parse: %s\n%s", error ? error->message : "?", text);
  return chunks;
}

static void
assert_same_chunks(GPtrArray *a, GPtrArray *b)
{
  ck_assert_uint_eq(a->len, b->len);
  for (guint i = 0; i < a->len; i++) {
    const LedgerChunk *x = g_ptr_array_index(a, i), *y = g_ptr_array_index(b, i);
    ck_assert_str_eq(x->name, y->name);
    ck_assert_int_eq(x->bytes, y->bytes);
    ck_assert_int_eq(x->reuse_delay_layers, y->reuse_delay_layers);
    ck_assert_int_eq(x->offloadable, y->offloadable);
  }
}

START_TEST(csv_fixture_is_the_chapters)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) loaded = ledger_load_csv(CHAPTER_CSV, &error);
  ck_assert_msg(loaded != NULL, "%s", error ? error->message : "?");
  g_autoptr(GPtrArray) expected = chapter_chunks();
  assert_same_chunks(loaded, expected);
  /* The copy users run from scenarios/ is the same file. */
  g_autofree char *ours = NULL, *theirs = NULL;
  ck_assert(g_file_get_contents(CHAPTER_CSV, &ours, NULL, NULL));
  ck_assert(g_file_get_contents(OFFSIM_SCENARIOS "/budget/chapter42.csv", &theirs, NULL, NULL));
  ck_assert_str_eq(ours, theirs);

  g_autoptr(GPtrArray) blocked = ledger_load_csv(BLOCKED_CSV, &error);
  ck_assert_ptr_nonnull(blocked);
  ck_assert_uint_eq(blocked->len, 1);
  ck_assert(!((LedgerChunk *)g_ptr_array_index(blocked, 0))->offloadable);
}
END_TEST

/* Units, CRLF, a byte-order mark, quotes, spaces around fields, a blank line,
 * booleans in any case and no final newline read as the plain fixture. */
START_TEST(csv_accepts_units_crlf_and_quotes)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) loaded = ledger_load_csv(OFFSIM_TEST_DATA "/budget/chapter42-units.csv", &error);
  ck_assert_msg(loaded != NULL, "%s", error ? error->message : "?");
  g_autoptr(GPtrArray) expected = chapter_chunks();
  assert_same_chunks(loaded, expected);

  g_autoptr(GPtrArray) quoted = parse_ok(HEADER "\"a,b\",1,0,no\n \"say \"\"hi\"\"\" ,\"2\",1,0\n");
  ck_assert_str_eq(((LedgerChunk *)g_ptr_array_index(quoted, 0))->name, "a,b");
  ck_assert_str_eq(((LedgerChunk *)g_ptr_array_index(quoted, 1))->name, "say \"hi\"");
  ck_assert_uint_eq(quoted->len, 2);
  ck_assert_int_eq(((LedgerChunk *)g_ptr_array_index(quoted, 1))->bytes, 2);
}
END_TEST

START_TEST(csv_header_only_is_no_chunks)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) chunks = ledger_load_csv(OFFSIM_TEST_DATA "/budget/header-only.csv", &error);
  ck_assert_ptr_nonnull(chunks);
  ck_assert_uint_eq(chunks->len, 0);
}
END_TEST

START_TEST(csv_rejections_name_line_and_column)
{
  static const struct {
    const char *text;
    const char *expected;
  } cases[] = {
    { "", "t.csv: empty: expected the header 'name,bytes,reuse_delay_layers,offloadable'" },
    { "\n\n", "t.csv: empty: expected the header" },
    { "bytes,name,reuse_delay_layers,offloadable\n",
      "t.csv:1: expected the header 'name,bytes,reuse_delay_layers,offloadable', got "
      "'bytes,name,reuse_delay_layers,offloadable'" },
    { "name,bytes,reuse_delay_layers\n", "t.csv:1: expected the header" },
    { "name,bytes,reuse_delay_layers,offloadable,extra\n", "t.csv:1: expected the header" },
    { "Name,Bytes,Reuse_delay_layers,Offloadable\n", "t.csv:1: expected the header" },
    { HEADER ",1,0,true\n", "t.csv:2: name: expected a non-empty name" },
    { HEADER "\"\",1,0,true\n", "t.csv:2: name: expected a non-empty name" },
    { HEADER "\"a\tb\",1,0,true\n", "t.csv:2: name: control character 0x09 in the name" },
    { HEADER "\xff\xfe,1,0,true\n", "t.csv:2: name: the name is not valid UTF-8" },
    { HEADER "dup,1,0,true\nother,1,0,true\ndup,1,1,true\n",
      "t.csv:4: name: chunk names must be unique: 'dup' is also on line 2" },
    { HEADER "a,-1,0,true\n", "t.csv:2: bytes: chunk bytes must be non-negative, got '-1'" },
    { HEADER "a,-5MiB,0,true\n", "t.csv:2: bytes: chunk bytes must be non-negative, got '-5MiB'" },
    { HEADER "a,-123456789012345678901234567890,0,true\n", "t.csv:2: bytes: chunk bytes must be non-negative" },
    { HEADER "a,123456789012345678901234567890,0,true\n",
      "t.csv:2: bytes: '123456789012345678901234567890' is too large (at most 4611686018427387904)" },
    { HEADER "a,4611686018427387905,0,true\n", "t.csv:2: bytes: '4611686018427387905' is too large" },
    { HEADER "a,1.5,0,true\n", "t.csv:2: bytes: expected a size with a unit (B, KB, MB, GB, TB, PB, EB, KiB, MiB, "
                               "GiB, TiB, PiB, EiB), got '1.5'" },
    { HEADER "a,12 apples,0,true\n", "t.csv:2: bytes: expected a size with a unit" },
    { HEADER "a,,0,true\n", "t.csv:2: bytes: expected bytes or a size such as 256MiB, got an empty field" },
    { HEADER "a,1,-1,true\n", "t.csv:2: reuse_delay_layers: reuse_delay_layers must be non-negative, got '-1'" },
    { HEADER "a,1,1.5,true\n", "t.csv:2: reuse_delay_layers: expected a whole number of layers, got '1.5'" },
    { HEADER "a,1,,true\n", "t.csv:2: reuse_delay_layers: expected a whole number of layers, got ''" },
    { HEADER "a,1,123456789012345678901234567890,true\n",
      "t.csv:2: reuse_delay_layers: '123456789012345678901234567890' is too large" },
    { HEADER "a,1,0,maybe\n", "t.csv:2: offloadable: expected true, false, yes, no, 1 or 0, got 'maybe'" },
    { HEADER "a,1,0,\n", "t.csv:2: offloadable: expected true, false, yes, no, 1 or 0, got ''" },
    { HEADER "a,1,0\n", "t.csv:2: 3 fields, expected 4 (name,bytes,reuse_delay_layers,offloadable): no "
                        "offloadable" },
    { HEADER "a\n", "t.csv:2: 1 fields, expected 4 (name,bytes,reuse_delay_layers,offloadable): no bytes" },
    { HEADER "a,1,0,true,x\n", "t.csv:2: 5 fields, expected 4 (name,bytes,reuse_delay_layers,offloadable): extra "
                               "field 'x'" },
    { HEADER "a,1,0,true,\n", "t.csv:2: 5 fields, expected 4" },
    { HEADER "\"a,1,0,true\n", "t.csv:2: a quoted field has no closing quote (quoted fields may not span lines)" },
    { HEADER "\"a\nb\",1,0,true\n", "t.csv:2: a quoted field has no closing quote" },
    { HEADER "a\"b,1,0,true\n", "t.csv:2: field 1: a quote inside an unquoted field" },
    { HEADER "\"a\"x,1,0,true\n", "t.csv:2: field 1: text after the closing quote" },
    { HEADER "\na,1,0,true\n\nb,-1,0,true\n", "t.csv:5: bytes: chunk bytes must be non-negative" },
    { HEADER "a,1,0,true\r\nb,1,x,true\r\n", "t.csv:3: reuse_delay_layers: expected a whole number of layers, got 'x'" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) chunks = ledger_parse_csv(cases[i].text, strlen(cases[i].text), "t.csv", &error);
    ck_assert_msg(chunks == NULL, "case %u parsed: %s", i, cases[i].text);
    assert_input_error(error, cases[i].expected);
    ck_assert_msg(strchr(error->message, '\n') == NULL, "case %u: more than one line: %s", i, error->message);
  }

  static const char nul[] = HEADER "a\0,1,0,true\n";
  g_autoptr(GError) nul_error = NULL;
  ck_assert_ptr_null(ledger_parse_csv(nul, sizeof nul - 1, "t.csv", &nul_error));
  assert_input_error(nul_error, "t.csv: holds a NUL byte: expected CSV text");

  g_autoptr(GError) missing = NULL;
  ck_assert_ptr_null(ledger_load_csv("/nonexistent/chunks.csv", &missing));
  assert_input_error(missing, "/nonexistent/chunks.csv: cannot read chunks: ");
}
END_TEST

/* ---- offsim budget ------------------------------------------------------ */

static void
assert_one_line_error(const TestRun *r, const char *expected)
{
  ck_assert_msg(r->status == 2, "exit %d, expected 2; stderr: %s", r->status, r->err);
  ck_assert_str_eq(r->out, "");
  ck_assert_msg(g_str_has_prefix(r->err, "offsim: "), "stderr: %s", r->err);
  ck_assert_msg(strstr(r->err, expected) != NULL, "stderr '%s' lacks '%s'", r->err, expected);
  ck_assert_msg(strchr(r->err, '\n') == r->err + strlen(r->err) - 1, "not one line: %s", r->err);
}

static JsonObject *
parse_json(JsonParser *parser, const TestRun *r)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(r->status == 0, "exit %d: %s", r->status, r->err);
  ck_assert_str_eq(r->err, "");
  ck_assert_msg(json_parser_load_from_data(parser, r->out, -1, &error), "invalid JSON: %s", r->out);
  return json_node_get_object(json_parser_get_root(parser));
}

START_TEST(cli_table_at_8_4_and_1_gib_per_s)
{
  static const struct {
    const char *bandwidth, *verdict, *times;
  } cases[] = {
    { "8GiB/s", "verdict    accept: saved 0.478 >= 0.25 and one way 42.97 ms <= 60 ms\n",
      "42.97 ms one way, 85.94 ms round trip" },
    { "4GiB/s", "verdict    tune: meets the relaxed thresholds, saved 0.478 >= 0.125 and one way 85.94 ms <= 120 "
                "ms,\n           but not the strict ones: one way 85.94 ms > 60 ms\n",
      "85.94 ms one way, 171.88 ms round trip" },
    { "1GiB/s", "verdict    reject: misses even the relaxed thresholds: one way 343.75 ms > 120 ms\n",
      "343.75 ms one way, 687.50 ms round trip" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_auto(TestRun) r = test_offsim("budget", CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", cases[i].bandwidth,
                                    NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_str_eq(r.err, "");
    ck_assert_msg(strstr(r.out, cases[i].verdict) != NULL, "no '%s' in:\n%s", cases[i].verdict, r.out);
    ck_assert_msg(strstr(r.out, cases[i].times) != NULL, "no '%s' in:\n%s", cases[i].times, r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "4 chunks, 736 MiB in all; budget 384 MiB (pressure 1.917)"));
    ck_assert_ptr_nonnull(strstr(r.out, "mid_a    192 MiB            2          yes  offload #2\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "mid_b    160 MiB            3          yes  offload #1\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "embed    256 MiB            0          yes  keep\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "kept       384 MiB of a 384 MiB budget: feasible\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "offloaded  352 MiB, saved ratio 0.478: "));
    g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
    for (char **line = lines; *line; line++)
      ck_assert_msg(g_utf8_strlen(*line, -1) <= 100, "line longer than 100 columns: %s", *line);
  }
}
END_TEST

START_TEST(cli_json_fields_in_order)
{
  static const char *const fields[] = { "total_bytes", "kept_bytes", "offloaded_bytes", "offloaded_names",
                                        "kept_names", "transfer_ms", "round_trip_ms", "pressure_ratio",
                                        "saved_ratio", "feasible", "overflow_bytes", "verdict",
                                        /* extras */
                                        "budget_bytes", "bandwidth_gib_per_s", "min_saved_ratio",
                                        "max_transfer_ms", "checkpoint" };
  g_auto(TestRun) r = test_offsim("budget", CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--format",
                                  "json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new();
  JsonObject *o = parse_json(parser, &r);
  g_autoptr(GList) members = json_object_get_members(o);
  ck_assert_uint_eq(g_list_length(members), G_N_ELEMENTS(fields));
  GList *m = members;
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++, m = m->next)
    ck_assert_str_eq(m->data, fields[i]);
  ck_assert_int_eq(json_object_get_int_member(o, "total_bytes"), 736 * MiB);
  ck_assert_int_eq(json_object_get_int_member(o, "kept_bytes"), 384 * MiB);
  ck_assert_int_eq(json_object_get_int_member(o, "offloaded_bytes"), 352 * MiB);
  ck_assert(json_node_get_value_type(json_object_get_member(o, "total_bytes")) == G_TYPE_INT64);
  JsonArray *offloaded = json_object_get_array_member(o, "offloaded_names");
  ck_assert_uint_eq(json_array_get_length(offloaded), 2);
  ck_assert_str_eq(json_array_get_string_element(offloaded, 0), "mid_b");
  ck_assert_str_eq(json_array_get_string_element(offloaded, 1), "mid_a");
  JsonArray *kept = json_object_get_array_member(o, "kept_names");
  ck_assert_str_eq(json_array_get_string_element(kept, 0), "embed");
  ck_assert_str_eq(json_array_get_string_element(kept, 1), "tail");
  ck_assert(json_object_get_boolean_member(o, "feasible"));
  ck_assert_int_eq(json_object_get_int_member(o, "overflow_bytes"), 0);
  ck_assert_str_eq(json_object_get_string_member(o, "verdict"), "accept");
  ck_assert(JSON_NODE_HOLDS_NULL(json_object_get_member(o, "checkpoint")));
  /* Numbers as the chapter rounds them, written with %.15g. */
  const char *text[] = { "\n  \"transfer_ms\": 42.97,\n", "\n  \"round_trip_ms\": 85.94,\n",
                         "\n  \"pressure_ratio\": 1.917,\n", "\n  \"saved_ratio\": 0.478,\n",
                         "\n  \"bandwidth_gib_per_s\": 8,\n", "\n  \"max_transfer_ms\": 60,\n" };
  for (guint i = 0; i < G_N_ELEMENTS(text); i++)
    ck_assert_msg(strstr(r.out, text[i]) != NULL, "no '%s' in:\n%s", text[i], r.out);
}
END_TEST

static char *
verdict_of(const char *csv, const char *budget, const char *bandwidth, const char *extra_option,
           const char *extra_value)
{
  g_auto(TestRun) r = test_offsim("budget", csv, "--budget", budget, "--bandwidth", bandwidth, "--format", "json",
                                  extra_option, extra_value, NULL);
  g_autoptr(JsonParser) parser = json_parser_new();
  return g_strdup(json_object_get_string_member(parse_json(parser, &r), "verdict"));
}

START_TEST(cli_verdicts)
{
  const struct {
    const char *csv, *budget, *bandwidth, *option, *value, *verdict;
  } cases[] = {
    { CHAPTER_CSV, "384MiB", "8GiB/s", NULL, NULL, "accept" },
    { CHAPTER_CSV, "384MiB", "4GiB/s", NULL, NULL, "tune" },
    { CHAPTER_CSV, "384MiB", "1GiB/s", NULL, NULL, "reject" },
    { CHAPTER_CSV, "1GiB", "8GiB/s", NULL, NULL, "reject" },
    { CHAPTER_CSV, "384MiB", "8GiB/s", "--min-saved-ratio", "0.5", "tune" },
    { CHAPTER_CSV, "384MiB", "8GiB/s", "--min-saved-ratio", "0.478", "accept" },
    { CHAPTER_CSV, "384MiB", "8GiB/s", "--min-saved-ratio", "1", "reject" },
    /* A threshold typed as 42.97ms admits a transfer of 42.97 ms. */
    { CHAPTER_CSV, "384MiB", "8GiB/s", "--max-transfer", "42.97ms", "accept" },
    { CHAPTER_CSV, "384MiB", "8GiB/s", "--max-transfer", "42.96ms", "tune" },
    { CHAPTER_CSV, "384MiB", "4GiB/s", "--max-transfer", "0.1s", "accept" },
    { BLOCKED_CSV, "256MiB", "8GiB/s", NULL, NULL, "reject" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *v = verdict_of(cases[i].csv, cases[i].budget, cases[i].bandwidth, cases[i].option,
                                    cases[i].value);
    ck_assert_msg(strcmp(v, cases[i].verdict) == 0, "case %u: %s, expected %s", i, v, cases[i].verdict);
  }
}
END_TEST

START_TEST(cli_blocked_and_empty)
{
  g_auto(TestRun) r = test_offsim("budget", BLOCKED_CSV, "--budget", "256MiB", "--bandwidth", "8GiB/s", "--format",
                                  "json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new();
  JsonObject *o = parse_json(parser, &r);
  ck_assert(!json_object_get_boolean_member(o, "feasible"));
  ck_assert_int_eq(json_object_get_int_member(o, "overflow_bytes"), 256 * MiB);
  ck_assert_int_eq(json_object_get_int_member(o, "offloaded_bytes"), 0);
  ck_assert_uint_eq(json_array_get_length(json_object_get_array_member(o, "offloaded_names")), 0);

  g_auto(TestRun) table = test_offsim("budget", BLOCKED_CSV, "--budget", "256MiB", "--bandwidth", "8GiB/s", NULL);
  ck_assert_int_eq(table.status, 0);
  ck_assert_ptr_nonnull(strstr(table.out, "1 chunk, 512 MiB in all; budget 256 MiB (pressure 2.000)"));
  ck_assert_ptr_nonnull(strstr(table.out, "fixed    512 MiB            0           no  keep\n"));
  ck_assert_ptr_nonnull(strstr(table.out, "kept       512 MiB of a 256 MiB budget: infeasible, 256 MiB over\n"));
  ck_assert_ptr_nonnull(
      strstr(table.out, "verdict    reject: nothing can be offloaded, and what must stay is 256 MiB over the budget\n"));

  g_auto(TestRun) fits = test_offsim("budget", CHAPTER_CSV, "--budget", "1GiB", "--bandwidth", "8GiB/s", NULL);
  ck_assert_int_eq(fits.status, 0);
  ck_assert_ptr_nonnull(strstr(fits.out, "verdict    reject: nothing is offloaded, the chunks already fit the budget\n"));
  ck_assert_ptr_nonnull(strstr(fits.out, "(pressure 0.719)"));

  g_auto(TestRun) none = test_offsim("budget", OFFSIM_TEST_DATA "/budget/header-only.csv", "--budget", "1MiB",
                                     "--bandwidth", "8GiB/s", "--format", "json", NULL);
  g_autoptr(JsonParser) none_parser = json_parser_new();
  JsonObject *n = parse_json(none_parser, &none);
  ck_assert_int_eq(json_object_get_int_member(n, "total_bytes"), 0);
  ck_assert(json_object_get_double_member(n, "pressure_ratio") == 0.0);
  ck_assert(json_object_get_double_member(n, "saved_ratio") == 0.0);
  ck_assert_str_eq(json_object_get_string_member(n, "verdict"), "reject");
}
END_TEST

START_TEST(cli_checkpoint_comparisons)
{
  const struct {
    const char *saved, *extra, *preferred;
    double offload_score, checkpoint_score;
  } cases[] = {
    { "300MiB", "80ms", "offload", 8589684.71, 3932160.0 },
    { "500MiB", "20ms", "checkpointing", 8589684.71, 26214400.0 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_auto(TestRun) r = test_offsim("budget", CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--format",
                                    "json", "--checkpoint-saved", cases[i].saved, "--checkpoint-extra",
                                    cases[i].extra, NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *c = json_object_get_object_member(parse_json(parser, &r), "checkpoint");
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(json_object_get_string_member(c, "preferred"), cases[i].preferred);
    ck_assert(json_object_get_double_member(c, "offload_score") == cases[i].offload_score);
    ck_assert(json_object_get_double_member(c, "checkpoint_score") == cases[i].checkpoint_score);
  }
  g_auto(TestRun) table = test_offsim("budget", CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s",
                                      "--checkpoint-saved", "500MiB", "--checkpoint-extra", "20ms", NULL);
  ck_assert_int_eq(table.status, 0);
  ck_assert_ptr_nonnull(strstr(table.out, "  offload             8589684.710  (352 MiB for 42.97 ms one way)\n"));
  ck_assert_ptr_nonnull(strstr(table.out, "  checkpointing      26214400.000  (500 MiB for 20 ms of recompute)\n"));
  ck_assert_ptr_nonnull(strstr(table.out, "  preferred      checkpointing\n"));
}
END_TEST

START_TEST(cli_bad_input_exits_2_with_one_line)
{
  const char *neg = OFFSIM_TEST_DATA "/budget/negative-bytes.csv";
  const struct {
    const char *args[12];
    const char *expected;
  } cases[] = {
    { { neg, "--budget", "1MiB", "--bandwidth", "8GiB/s" },
      "negative-bytes.csv:3: bytes: chunk bytes must be non-negative, got '-1'" },
    { { OFFSIM_TEST_DATA "/budget/negative-delay.csv", "--budget", "1MiB", "--bandwidth", "8GiB/s" },
      "negative-delay.csv:2: reuse_delay_layers: reuse_delay_layers must be non-negative, got '-1'" },
    { { OFFSIM_TEST_DATA "/budget/duplicate.csv", "--budget", "1MiB", "--bandwidth", "8GiB/s" },
      "duplicate.csv:4: name: chunk names must be unique: 'dup' is also on line 2" },
    { { CHAPTER_CSV, "--budget", "0", "--bandwidth", "8GiB/s" }, "--budget: the GPU budget must be positive, got '0'" },
    { { CHAPTER_CSV, "--budget", "-1GiB", "--bandwidth", "8GiB/s" },
      "--budget: the GPU budget must be positive, got '-1GiB'" },
    { { CHAPTER_CSV, "--budget", "384", "--bandwidth", "8GiB/s" }, "--budget: expected a size with a unit" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "0GiB/s" },
      "--bandwidth: expected a positive, finite rate, got '0GiB/s'" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "-8GiB/s" }, "--bandwidth: expected a positive rate, got" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "0" },
      "--bandwidth: expected a positive rate (0 would move nothing), got '0'" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8" },
      "--bandwidth: expected a rate with a unit such as GB/s or GiB/s, got '8'" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--min-saved-ratio", "-0.1" },
      "--min-saved-ratio: policy thresholds must be non-negative, got '-0.1'" },
    /* Refused up front even where the ledger would return before looking. */
    { { CHAPTER_CSV, "--budget", "1GiB", "--bandwidth", "8GiB/s", "--min-saved-ratio", "-0.1" },
      "--min-saved-ratio: policy thresholds must be non-negative" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--min-saved-ratio", "half" },
      "--min-saved-ratio: expected a number such as 0.25, got 'half'" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--max-transfer", "-1ms" },
      "--max-transfer: expected a non-negative value, got '-1ms'" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--max-transfer", "60" },
      "--max-transfer: expected a time with a unit" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--checkpoint-saved", "-1MiB",
        "--checkpoint-extra", "10ms" },
      "--checkpoint-saved: expected a non-negative value, got '-1MiB'" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--checkpoint-saved", "100MiB",
        "--checkpoint-extra", "-1ms" },
      "--checkpoint-extra: expected a non-negative value, got '-1ms'" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--checkpoint-saved", "100MiB" },
      "--checkpoint-saved and --checkpoint-extra go together" },
    { { CHAPTER_CSV, "--bandwidth", "8GiB/s" }, "--budget is required" },
    { { CHAPTER_CSV, "--budget", "384MiB" }, "--bandwidth is required" },
    { { CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s", "--format", "csv" },
      "--format: expected table or json, got 'csv'" },
    { { "--budget", "384MiB", "--bandwidth", "8GiB/s" }, "budget: expected one CHUNKS.csv file, got 0 arguments" },
    { { CHAPTER_CSV, CHAPTER_CSV, "--budget", "384MiB", "--bandwidth", "8GiB/s" },
      "budget: expected one CHUNKS.csv file, got 2 arguments" },
    { { "/nonexistent/chunks.csv", "--budget", "384MiB", "--bandwidth", "8GiB/s" },
      "/nonexistent/chunks.csv: cannot read chunks: " },
    { { CHAPTER_CSV, "--frobnicate" }, "budget: Unknown option --frobnicate" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    const char *const *a = cases[i].args;
    g_auto(TestRun) r = test_offsim("budget", a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], NULL);
    assert_one_line_error(&r, cases[i].expected);
  }
}
END_TEST

/* The README's example runs from the repository root and shows this output. */
START_TEST(readme_example_matches)
{
  g_autofree char *readme = NULL;
  ck_assert(g_file_get_contents(OFFSIM_SCENARIOS "/../README.md", &readme, NULL, NULL));
  const char *marker = strstr(readme, "<!-- offsim-budget-output -->");
  ck_assert_msg(marker != NULL, "README.md has no <!-- offsim-budget-output --> block");
  const char *start = strstr(marker, "```\n");
  ck_assert_ptr_nonnull(start);
  start += 4;
  const char *end = strstr(start, "```\n");
  ck_assert_ptr_nonnull(end);
  g_autofree char *shown = g_strndup(start, (gsize)(end - start));
  g_auto(TestRun) r = test_offsim_in(OFFSIM_SCENARIOS "/..", "budget", "scenarios/budget/chapter42.csv", "--budget",
                                     "384MiB", "--bandwidth", "8GiB/s", NULL);
  ck_assert_int_eq(r.status, 0);
  ck_assert_str_eq(shown, r.out);
  ck_assert_ptr_nonnull(strstr(readme, "offsim budget scenarios/budget/chapter42.csv --budget 384MiB --bandwidth "
                                       "8GiB/s\n"));
}
END_TEST

static Suite *
budget_suite(void)
{
  Suite *s = suite_create("budget");
  TCase *ledger = tcase_create("ledger");
  tcase_add_test(ledger, round_is_pythons);
  tcase_add_test(ledger, chapter_ledger_figures);
  tcase_add_test(ledger, zero_total_gives_zero_ratios);
  tcase_add_test(ledger, blocked_chunk_is_infeasible);
  tcase_add_test(ledger, candidates_order_by_delay_then_bytes_then_name);
  tcase_add_test(ledger, offloading_stops_once_within_budget);
  tcase_add_test(ledger, invalid_metadata_is_rejected_in_the_chapters_order);
  tcase_add_test(ledger, round_trip_cost);
  tcase_add_test(ledger, policy_accept_tune_reject);
  tcase_add_test(ledger, policy_threshold_boundaries);
  tcase_add_test(ledger, policy_rejects_infeasible_plans_that_offload);
  tcase_add_test(ledger, negative_thresholds_after_the_zero_offload_return);
  tcase_add_test(ledger, offload_vs_checkpointing);
  suite_add_tcase(s, ledger);

  TCase *csv = tcase_create("csv");
  tcase_add_test(csv, csv_fixture_is_the_chapters);
  tcase_add_test(csv, csv_accepts_units_crlf_and_quotes);
  tcase_add_test(csv, csv_header_only_is_no_chunks);
  tcase_add_test(csv, csv_rejections_name_line_and_column);
  suite_add_tcase(s, csv);

  TCase *cli = tcase_create("cli");
  tcase_set_timeout(cli, 120);
  tcase_add_test(cli, cli_table_at_8_4_and_1_gib_per_s);
  tcase_add_test(cli, cli_json_fields_in_order);
  tcase_add_test(cli, cli_verdicts);
  tcase_add_test(cli, cli_blocked_and_empty);
  tcase_add_test(cli, cli_checkpoint_comparisons);
  tcase_add_test(cli, cli_bad_input_exits_2_with_one_line);
  tcase_add_test(cli, readme_example_matches);
  suite_add_tcase(s, cli);
  return s;
}

int
main(void)
{
  return test_run_suite(budget_suite());
}
