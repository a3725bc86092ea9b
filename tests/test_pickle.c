/* tests/test_pickle.c — the strict pickle reader (sim/input/pickle.h): what it reads of
 * pickles Python wrote, and what it refuses, truncated and mutated real snapshots included.
 *
 * The two pickles below are Python 3's pickle.dumps, protocols 2 and 4, of
 *   d = {"a": [1, -2, 2**40, -2**63, 2**63 - 1, 1.5, True, False, None, "é", ""],
 *        "t1": (1,), "t2": (1, 2), "t3": (1, 2, 3), "t0": (), "big": 300, "neg": -300,
 *        "long": "x" * 300}
 *   d["shared"] = d["a"]            (the same list twice: a memo reference)
 * a format test written by hand, not a measurement. */
#include "testutil.h"

#include "base/error.h"
#include "input/gzip.h"
#include "input/pickle.h"

#include <stdio.h>
#include <string.h>

static const char protocol2[] =
  "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4a\xfe\xff\xff"
  "\xff\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x8a\x08\xff\xff\xff"
  "\xff\xff\xff\xff\x7f\x47\x3f\xf8\x00\x00\x00\x00\x00\x00\x88\x89\x4e\x58\x02\x00\x00\x00\xc3\xa9"
  "\x71\x03\x58\x00\x00\x00\x00\x71\x04\x65\x58\x02\x00\x00\x00\x74\x31\x71\x05\x4b\x01\x85\x71\x06"
  "\x58\x02\x00\x00\x00\x74\x32\x71\x07\x4b\x01\x4b\x02\x86\x71\x08\x58\x02\x00\x00\x00\x74\x33\x71"
  "\x09\x4b\x01\x4b\x02\x4b\x03\x87\x71\x0a\x58\x02\x00\x00\x00\x74\x30\x71\x0b\x29\x58\x03\x00\x00"
  "\x00\x62\x69\x67\x71\x0c\x4d\x2c\x01\x58\x03\x00\x00\x00\x6e\x65\x67\x71\x0d\x4a\xd4\xfe\xff\xff"
  "\x58\x04\x00\x00\x00\x6c\x6f\x6e\x67\x71\x0e\x58\x2c\x01\x00\x00\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x71\x0f\x58\x06\x00\x00\x00\x73\x68\x61\x72\x65\x64\x71\x10\x68\x02\x75\x2e";

static const char protocol4[] =
  "\x80\x04\x95\xc3\x01\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28\x4b\x01\x4a"
  "\xfe\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x8a\x08"
  "\xff\xff\xff\xff\xff\xff\xff\x7f\x47\x3f\xf8\x00\x00\x00\x00\x00\x00\x88\x89\x4e\x8c\x02\xc3\xa9"
  "\x94\x8c\x00\x94\x65\x8c\x02\x74\x31\x94\x4b\x01\x85\x94\x8c\x02\x74\x32\x94\x4b\x01\x4b\x02\x86"
  "\x94\x8c\x02\x74\x33\x94\x4b\x01\x4b\x02\x4b\x03\x87\x94\x8c\x02\x74\x30\x94\x29\x8c\x03\x62\x69"
  "\x67\x94\x4d\x2c\x01\x8c\x03\x6e\x65\x67\x94\x4a\xd4\xfe\xff\xff\x8c\x04\x6c\x6f\x6e\x67\x94\x58"
  "\x2c\x01\x00\x00\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78"
  "\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x78\x94\x8c\x06\x73\x68\x61\x72\x65"
  "\x64\x94\x68\x02\x75\x2e";

static const SimPickleValue *
item(const SimPickleValue *v, guint i)
{
  ck_assert_ptr_nonnull(v->items);
  ck_assert_uint_lt(i, v->items->len);
  return g_ptr_array_index(v->items, i);
}

static void
check_values(const char *data, gsize length)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimPickle) p = sim_pickle_load_data(data, length, "python.pickle", &error);
  ck_assert_msg(p != NULL, "%s", error ? error->message : "?");
  const SimPickleValue *root = sim_pickle_root(p);
  ck_assert_int_eq(root->type, SIM_PICKLE_DICT);
  ck_assert_uint_eq(root->items->len, 2 * 9);
  const SimPickleValue *a = sim_pickle_dict_get(root, "a");
  ck_assert_ptr_nonnull(a);
  ck_assert_int_eq(a->type, SIM_PICKLE_LIST);
  ck_assert_uint_eq(a->items->len, 11);
  ck_assert_int_eq(item(a, 0)->integer, 1);
  ck_assert_int_eq(item(a, 1)->integer, -2);
  ck_assert_int_eq(item(a, 2)->integer, G_GINT64_CONSTANT(1) << 40);
  ck_assert_int_eq(item(a, 3)->integer, G_MININT64);
  ck_assert_int_eq(item(a, 4)->integer, G_MAXINT64);
  ck_assert_int_eq(item(a, 5)->type, SIM_PICKLE_FLOAT);
  ck_assert(item(a, 5)->number == 1.5);
  ck_assert(item(a, 6)->type == SIM_PICKLE_BOOL && item(a, 6)->boolean);
  ck_assert(item(a, 7)->type == SIM_PICKLE_BOOL && !item(a, 7)->boolean);
  ck_assert_int_eq(item(a, 8)->type, SIM_PICKLE_NONE);
  ck_assert_str_eq(item(a, 9)->string, "\xc3\xa9");
  ck_assert_str_eq(item(a, 10)->string, "");
  ck_assert_ptr_eq(sim_pickle_dict_get(root, "shared"), a);
  static const char *const tuples[] = { "t0", "t1", "t2", "t3" };
  for (guint n = 0; n < 4; n++) {
    const SimPickleValue *t = sim_pickle_dict_get(root, tuples[n]);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->type, SIM_PICKLE_TUPLE);
    ck_assert_uint_eq(t->items->len, n);
    for (guint i = 0; i < n; i++)
      ck_assert_int_eq(item(t, i)->integer, i + 1);
  }
  ck_assert_int_eq(sim_pickle_dict_get(root, "big")->integer, 300);
  ck_assert_int_eq(sim_pickle_dict_get(root, "neg")->integer, -300);
  const SimPickleValue *s = sim_pickle_dict_get(root, "long");
  ck_assert_uint_eq(strlen(s->string), 300);
  ck_assert_ptr_null(sim_pickle_dict_get(root, "missing"));
  ck_assert_ptr_null(sim_pickle_dict_get(a, "a")); /* not a dict */
}

START_TEST(reads_python_protocols_2_and_4)
{
  check_values(protocol2, sizeof protocol2 - 1);
  check_values(protocol4, sizeof protocol4 - 1);
}
END_TEST

/* The reader's error for `data`, which must fail as bad input naming the origin. */
static char *
error_of(const char *data, gsize length)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimPickle) p = sim_pickle_load_data(data, length, "bad.pickle", &error);
  ck_assert_msg(p == NULL, "read %" G_GSIZE_FORMAT " bytes that should fail", length);
  ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
  ck_assert_msg(g_str_has_prefix(error->message, "bad.pickle: "), "%s", error->message);
  ck_assert_ptr_null(strchr(error->message, '\n'));
  return g_strdup(error->message);
}

#define assert_error(data, piece)                                                                          \
  do {                                                                                                     \
    g_autofree char *m_ = error_of((data), sizeof(data) - 1);                                              \
    ck_assert_msg(strstr(m_, (piece)) != NULL, "expected \"%s\" in: %s", (piece), m_);                     \
  } while (0)

START_TEST(refuses_what_is_not_plain_data)
{
  assert_error("", "not a pickle of protocol 2 or later");
  assert_error("(dp0\n.", "not a pickle of protocol 2 or later"); /* protocol 0 */
  assert_error("\x80\x01N.", "protocol 1 (expected 2 to 5)");
  assert_error("\x80\x04\x8c\x08\x62\x75\x69\x6c\x74\x69\x6e\x73\x8c\x04\x65\x76\x61\x6c\x93.",
               "offset 18 (STACK_GLOBAL): opcode 0x93 STACK_GLOBAL is not read here");
  assert_error("\x80\x02\x63os\nsystem\n.", "offset 2 (GLOBAL): opcode 0x63 GLOBAL is not read here");
  assert_error("\x80\x04N", "offset 3: truncated: the file ends before STOP");
  assert_error("\x80\x04\x8c\x05" "ab", "truncated: 5 bytes of argument expected, 2 left");
  assert_error("\x80\x04\x95\xff\x00\x00\x00\x00\x00\x00\x00N.", "truncated: a frame of 255 bytes");
  assert_error("\x80\x04N\x72\xff\xff\xff\xff.", "memo index 4294967295 beyond the 1 values read");
  assert_error("\x80\x04h\x03.", "memo index 3 was never stored");
  assert_error("\x80\x04\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", "an int of 9 bytes (expected at most 8)");
  assert_error("\x80\x04\x8c\x01\xff.", "a str that is not UTF-8");
  assert_error("\x80\x04NN.", "2 values on the stack (expected 1)");
  assert_error("\x80\x04(N.", "a MARK was left open");
  assert_error("\x80\x04.", "0 values on the stack (expected 1)");
  assert_error("\x80\x04N.N", "1 bytes after the end of the pickle");
  assert_error("\x80\x04\x61.", "the stack is empty");
  assert_error("\x80\x04NK\x01" "a.", "expected a list to add to, got a None");
  assert_error("\x80\x04]NN\x73.", "expected a dict to add to, got a list");
  assert_error("\x80\x04}(K\x01" "u.", "1 values after the MARK (expected key, value pairs)");
  assert_error("\x80\x04(K\x01" "u.", "nothing below the MARK to add to");
  assert_error("\x80\x04" "e.", "no MARK before it");
  assert_error("\x80\x04N\x86.", "1 values on the stack (expected 2)");
  assert_error("\x80\x04\xff.", "byte 0xff is not a pickle opcode");
}
END_TEST

/* Every byte after PROTO: read, or refused by name; never a crash (under ASan, never a leak). */
START_TEST(every_opcode_is_read_or_refused)
{
  for (guint op = 0; op < 256; op++) {
    char data[] = { (char)0x80, 4, (char)op, '.', 0 };
    g_autoptr(GError) error = NULL;
    g_autoptr(SimPickle) p = sim_pickle_load_data(data, 4, "op.pickle", &error);
    ck_assert_msg(p != NULL || g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT), "opcode 0x%02x", op);
  }
}
END_TEST

/* A list that holds itself through the memo reads (Python's does too) and frees once. */
START_TEST(a_cycle_through_the_memo_is_harmless)
{
  static const char data[] = "\x80\x04]\x94h\x00\x61.";
  g_autoptr(GError) error = NULL;
  g_autoptr(SimPickle) p = sim_pickle_load_data(data, sizeof data - 1, "cycle.pickle", &error);
  ck_assert_msg(p != NULL, "%s", error ? error->message : "?");
  const SimPickleValue *root = sim_pickle_root(p);
  ck_assert_ptr_eq(item(root, 0), root);
}
END_TEST

/* A real snapshot (snapshot/cs336_transformer_step.pickle.gz of the real data, not in the
 * repository: tests/data/snapshot/README.md) read whole, then cut at many lengths and with bytes
 * changed: each reads or fails as bad input, never crashes.  Skipped, and said, without it. */
START_TEST(real_snapshot_truncated_and_mutated)
{
  g_autofree char *data = NULL;
  gsize length = 0;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = test_real_data("snapshot/cs336_transformer_step.pickle.gz");
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    printf("test_pickle: real_snapshot_truncated_and_mutated skipped: %s absent (tests/data/snapshot/README.md)\n",
           path);
    fflush(stdout);
    return;
  }
  ck_assert(sim_gzip_read_input(path, NULL, &data, &length, &error));
  {
    g_autoptr(SimPickle) whole = sim_pickle_load_data(data, length, "real.pickle", &error);
    ck_assert_msg(whole != NULL, "%s", error ? error->message : "?");
    ck_assert_ptr_nonnull(sim_pickle_dict_get(sim_pickle_root(whole), "segments"));
  }
  for (gsize cut = 0; cut < length; cut += cut < 4096 ? 1 : 997) {
    g_autofree char *m = error_of(data, cut);
    ck_assert_msg(strstr(m, "truncated") || strstr(m, "not a pickle") || strstr(m, "values on the stack")
                    || strstr(m, "MARK was left open"), "cut at %" G_GSIZE_FORMAT ": %s", cut, m);
  }
  GRand *rand = g_rand_new_with_seed(31);
  for (guint i = 0; i < 300; i++) {
    g_autofree char *copy = g_memdup2(data, length);
    for (guint j = 0; j < 1 + i % 4; j++)
      copy[g_rand_int_range(rand, 0, (gint32)length)] = (char)g_rand_int_range(rand, 0, 256);
    g_autoptr(GError) e = NULL;
    g_autoptr(SimPickle) p = sim_pickle_load_data(copy, length, "mutated.pickle", &e);
    ck_assert_msg(p != NULL || (g_error_matches(e, SIM_ERROR, SIM_ERROR_INPUT)
                                && g_str_has_prefix(e->message, "mutated.pickle: pickle offset ")),
                  "mutation %u: %s", i, e ? e->message : "?");
  }
  g_rand_free(rand);
}
END_TEST

static Suite *
pickle_suite(void)
{
  Suite *suite = suite_create("pickle");
  TCase *tc = tcase_create("pickle");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, reads_python_protocols_2_and_4);
  tcase_add_test(tc, refuses_what_is_not_plain_data);
  tcase_add_test(tc, every_opcode_is_read_or_refused);
  tcase_add_test(tc, a_cycle_through_the_memo_is_harmless);
  tcase_add_test(tc, real_snapshot_truncated_and_mutated);
  suite_add_tcase(suite, tc);
  return suite;
}

int
main(void)
{
  return test_run_suite(pickle_suite());
}
