/* tests/test_units.c — sizes, rates and times as written in scenario files.
 *
 * Every expected value is computed by hand from the unit's definition
 * (KiB = 1024 B, KB = 1000 B, ...), never by calling the code under test. */
#include "testutil.h"

#include "base/error.h"
#include "base/units.h"

#include <math.h>
#include <string.h>

/* Asserts that `piece` occurs in `msg`, printing the whole message if not. */
#define assert_has(msg, piece)                                                                             \
  ck_assert_msg(strstr((msg), (piece)) != NULL, "expected \"%s\" in the message: %s", (piece), (msg))

static guint64
size_ok(const char *text)
{
  g_autoptr(GError) error = NULL;
  guint64 bytes = 12345; /* a sentinel that no case below expects */
  gboolean ok = sim_units_parse_size(text, &bytes, &error);
  ck_assert_msg(ok, "'%s' did not parse as a size: %s", text, error ? error->message : "?");
  ck_assert_ptr_null(error);
  return bytes;
}

static double
rate_ok(const char *text)
{
  g_autoptr(GError) error = NULL;
  double rate = -1;
  gboolean ok = sim_units_parse_rate(text, &rate, &error);
  ck_assert_msg(ok, "'%s' did not parse as a rate: %s", text, error ? error->message : "?");
  return rate;
}

static double
time_ok(const char *text)
{
  g_autoptr(GError) error = NULL;
  double t = -1;
  gboolean ok = sim_units_parse_time(text, &t, &error);
  ck_assert_msg(ok, "'%s' did not parse as a time: %s", text, error ? error->message : "?");
  return t;
}

/* The parse fails with SIM_ERROR_INPUT; returns the message. */
static char *
size_error(const char *text)
{
  g_autoptr(GError) error = NULL;
  guint64 bytes = 0;
  gboolean ok = sim_units_parse_size(text, &bytes, &error);
  ck_assert_msg(!ok, "'%s' parsed as a size (%" G_GUINT64_FORMAT ") but should not have", text, bytes);
  ck_assert_msg(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT), "'%s': wrong error domain or code", text);
  ck_assert_ptr_null(strchr(error->message, '\n'));
  return g_strdup(error->message);
}

static char *
rate_error(const char *text)
{
  g_autoptr(GError) error = NULL;
  double rate = 0;
  gboolean ok = sim_units_parse_rate(text, &rate, &error);
  ck_assert_msg(!ok, "'%s' parsed as a rate (%g) but should not have", text, rate);
  ck_assert_msg(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT), "'%s': wrong error domain or code", text);
  return g_strdup(error->message);
}

static char *
time_error(const char *text)
{
  g_autoptr(GError) error = NULL;
  double t = 0;
  gboolean ok = sim_units_parse_time(text, &t, &error);
  ck_assert_msg(!ok, "'%s' parsed as a time (%g) but should not have", text, t);
  ck_assert_msg(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT), "'%s': wrong error domain or code", text);
  return g_strdup(error->message);
}

/* ---- sizes ---------------------------------------------------------------- */

START_TEST(test_size_binary_units)
{
  ck_assert_uint_eq(size_ok("24MiB"), 25165824);                      /* 24 * 1024^2 */
  ck_assert_uint_eq(size_ok("1KiB"), 1024);
  ck_assert_uint_eq(size_ok("2GiB"), 2147483648ULL);                  /* 2 * 1024^3 */
  ck_assert_uint_eq(size_ok("1TiB"), 1099511627776ULL);               /* 1024^4 */
  ck_assert_uint_eq(size_ok("1.75MiB"), 1835008);                     /* 1792 KiB */
  ck_assert_uint_eq(size_ok("512B"), 512);
  ck_assert_uint_eq(size_ok("1PiB"), 1125899906842624ULL);            /* 1024^5 */
  ck_assert_uint_eq(size_ok("4EiB"), SIM_UNITS_MAX_BYTES);            /* 4 * 1024^6 */
  g_autofree char *five = size_error("5EiB");
  assert_has(five, "too large");
  /* What the reports print reads back (issue: PiB was printed but refused). */
  static const guint64 printed[] = { 1125899906842624ULL, 3ULL << 50, 1ULL << 61 };
  for (guint i = 0; i < G_N_ELEMENTS(printed); i++) {
    g_autofree char *text = sim_units_format_size(printed[i]);
    ck_assert_uint_eq(size_ok(text), printed[i]);
  }
}
END_TEST

START_TEST(test_size_decimal_units)
{
  ck_assert_uint_eq(size_ok("8GB"), 8000000000ULL);
  ck_assert_uint_eq(size_ok("3KB"), 3000);
  ck_assert_uint_eq(size_ok("7MB"), 7000000);
  ck_assert_uint_eq(size_ok("2TB"), 2000000000000ULL);
  ck_assert_uint_eq(size_ok("7.9GB"), 7900000000ULL);
  ck_assert_uint_eq(size_ok("1PB"), 1000000000000000ULL);
  ck_assert_uint_eq(size_ok("4EB"), 4000000000000000000ULL);
}
END_TEST

START_TEST(test_size_fractions)
{
  ck_assert_uint_eq(size_ok("1.5KiB"), 1536);
  ck_assert_uint_eq(size_ok("0.5MiB"), 524288);
  ck_assert_uint_eq(size_ok(".5KiB"), 512);
  ck_assert_uint_eq(size_ok("12.25GiB"), 13153337344ULL); /* 12 GiB + 256 MiB */
  /* A fraction of a larger unit rounds to the nearest byte... */
  ck_assert_uint_eq(size_ok("0.001KiB"), 1); /* 1.024 B */
  ck_assert_uint_eq(size_ok("0.0017KiB"), 2); /* 1.7408 B */
  /* ...a fraction of a byte is a typo: 0.5B used to become 1 B without a word. */
  g_autofree char *half = size_error("0.5B");
  assert_has(half, "a size in B is a whole number of bytes, got '0.5B'");
  g_autofree char *more = size_error("1.7B");
  assert_has(more, "whole number of bytes");
  ck_assert_uint_eq(size_ok("2.0B"), 2); /* a zero fraction is whole */
}
END_TEST

START_TEST(test_size_zero_and_spaces)
{
  ck_assert_uint_eq(size_ok("0"), 0);
  ck_assert_uint_eq(size_ok("0MiB"), 0);
  ck_assert_uint_eq(size_ok("0.0"), 0);
  ck_assert_uint_eq(size_ok(" 3 MiB "), 3145728);
  ck_assert_uint_eq(size_ok("3 MiB"), 3145728);
  ck_assert_uint_eq(size_ok("\t5KB"), 5000);
}
END_TEST

START_TEST(test_size_limit)
{
  /* 2^62 = 4 EiB = 4194304 TiB is the largest size accepted... */
  ck_assert_uint_eq(size_ok("4194304TiB"), SIM_UNITS_MAX_BYTES);
  ck_assert_uint_eq(size_ok("4611686018427387904B"), G_GUINT64_CONSTANT(4611686018427387904));
  /* ...and one unit more is not. */
  g_autofree char *tib = size_error("4194305TiB");
  assert_has(tib, "too large");
  assert_has(tib, "4194305TiB");
  g_autofree char *bytes = size_error("4611686018427387905B");
  assert_has(bytes, "too large");
}
END_TEST

START_TEST(test_size_exact_beyond_double_precision)
{
  /* Above 2^53 a double cannot hold every whole byte, yet sizes are exact:
   * the whole part is integer arithmetic and only the fraction rounds.
   * 2^53 + 1 = 9007199254740993; 8796093022208 KiB = 2^53 B, and a fraction
   * of a KiB adds its bytes exactly, rounding only below a byte. */
  ck_assert_uint_eq(size_ok("9007199254740993B"), G_GUINT64_CONSTANT(9007199254740993));
  ck_assert_uint_eq(size_ok("8796093022208.0009765625KiB"), G_GUINT64_CONSTANT(9007199254740993));
  ck_assert_uint_eq(size_ok("8796093022208.0001KiB"), G_GUINT64_CONSTANT(9007199254740992));
  ck_assert_uint_eq(size_ok("8796093022208.0009KiB"), G_GUINT64_CONSTANT(9007199254740993));
}
END_TEST

START_TEST(test_size_rejects_negative)
{
  g_autofree char *msg = size_error("-1MiB");
  assert_has(msg, "non-negative");
  assert_has(msg, "'-1MiB'");
  g_autofree char *zero = size_error("-0");
  assert_has(zero, "non-negative");
}
END_TEST

START_TEST(test_size_rejects_non_numeric)
{
  g_autofree char *msg = size_error("abc");
  assert_has(msg, "expected a number");
  assert_has(msg, "'abc'");
  g_autofree char *empty = size_error("");
  assert_has(empty, "expected a number");
  g_autofree char *unit_only = size_error("MiB");
  assert_has(unit_only, "expected a number");
}
END_TEST

START_TEST(test_size_rejects_unknown_unit)
{
  g_autofree char *msg = size_error("8XB");
  assert_has(msg, "expected a size with a unit");
  assert_has(msg, "MiB"); /* the message lists the units */
  assert_has(msg, "'8XB'");
  /* Units are case-sensitive: "mb" is not a unit. */
  g_autofree char *lower = size_error("8mb");
  assert_has(lower, "'8mb'");
  /* Sizes take no rate or time unit. */
  g_autofree char *rate = size_error("8GB/s");
  assert_has(rate, "expected a size with a unit");
  /* Trailing junk after a valid unit. */
  g_autofree char *junk = size_error("8MiB x");
  assert_has(junk, "expected a size with a unit");
}
END_TEST

START_TEST(test_size_rejects_missing_unit)
{
  g_autofree char *msg = size_error("8");
  assert_has(msg, "expected a size with a unit");
  assert_has(msg, "'8'");
  g_autofree char *frac = size_error("0.5");
  assert_has(frac, "expected a size with a unit");
}
END_TEST

START_TEST(test_size_rejects_huge_numbers)
{
  g_autofree char *msg = size_error("100000000000000000000000000000GB");
  assert_has(msg, "too large");
  assert_has(msg, "100000000000000000000000000000GB");
  /* 30 digits of bytes overflow even a guint64. */
  g_autofree char *bytes = size_error("999999999999999999999999999999B");
  assert_has(bytes, "too large");
  /* Fits in a guint64 but is far beyond 4 EiB once scaled. */
  g_autofree char *scaled = size_error("20000000TiB");
  assert_has(scaled, "too large");
}
END_TEST

START_TEST(test_size_rejects_inf_nan_exponent)
{
  g_autofree char *inf = size_error("inf");
  assert_has(inf, "expected a number");
  g_autofree char *infunit = size_error("infMiB");
  assert_has(infunit, "expected a number");
  g_autofree char *nan = size_error("nan");
  assert_has(nan, "expected a number");
  g_autofree char *hex = size_error("0x10MiB");
  assert_has(hex, "'0x10MiB'");
  /* No exponents, and the message says so. */
  g_autofree char *exp = size_error("1e3MB");
  assert_has(exp, "exponents are not accepted");
  assert_has(exp, "'1e3MB'");
  g_autofree char *exp_only = size_error("1e-3");
  assert_has(exp_only, "exponents are not accepted");
  /* No sign: "+12MB" was accepted without being documented. */
  g_autofree char *plus = size_error("+12MB");
  assert_has(plus, "expected a number with a unit, got '+12MB'");
  /* What is accepted, exactly as documented. */
  ck_assert_uint_eq(size_ok("12 MB"), 12000000);
  ck_assert_uint_eq(size_ok(".5MB"), 500000);
  ck_assert_uint_eq(size_ok("00"), 0);
  ck_assert_uint_eq(size_ok("007KiB"), 7168);
}
END_TEST

START_TEST(test_size_rejects_bare_point)
{
  g_autofree char *msg = size_error("1.MiB");
  assert_has(msg, "digits after the point");
  assert_has(msg, "'1.MiB'");
  g_autofree char *two = size_error("1.5.5MiB");
  assert_has(two, "'1.5.5MiB'");
}
END_TEST

/* ---- rates ---------------------------------------------------------------- */

START_TEST(test_rate_units)
{
  ck_assert_double_eq(rate_ok("55GB/s"), 55e9);
  ck_assert_double_eq(rate_ok("12.5GiB/s"), 13421772800.0); /* 12.5 * 1024^3 */
  ck_assert_double_eq(rate_ok("3.35TB/s"), 3.35e12);
  ck_assert_double_eq(rate_ok("100MB/s"), 1e8);
  ck_assert_double_eq(rate_ok("1KiB/s"), 1024.0);
  ck_assert_double_eq(rate_ok("1B/s"), 1.0);
  ck_assert_double_eq(rate_ok(" 50 GB/s "), 50e9);
}
END_TEST

START_TEST(test_rate_rejects_zero)
{
  g_autofree char *msg = rate_error("0GB/s");
  assert_has(msg, "positive");
  assert_has(msg, "'0GB/s'");
  g_autofree char *point = rate_error("0.0MB/s");
  assert_has(point, "positive");
  /* Bare 0 is a zero size or time, never a rate: the message says 0 is the
   * fault, not a missing unit (a bare 0 needs none). */
  g_autofree char *bare = rate_error("0");
  ck_assert_str_eq(bare, "expected a positive rate (0 would move nothing), got '0'");
  g_autofree char *negative = rate_error("-5GB/s");
  ck_assert_str_eq(negative, "expected a positive rate, got '-5GB/s'");
}
END_TEST

/* A shared limit's rate ([node]): 0, bare or with a unit, is "no limit";
 * anything else reads as a rate does. */
START_TEST(test_rate_or_zero)
{
  const char *zeros[] = { "0", " 0 ", "0GB/s", "0.0MB/s", "0 GiB/s" };
  for (guint i = 0; i < G_N_ELEMENTS(zeros); i++) {
    double rate = -1;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sim_units_parse_rate_or_zero(zeros[i], &rate, &error), "'%s': %s", zeros[i],
                  error ? error->message : "?");
    ck_assert_double_eq(rate, 0);
  }
  double rate = 0;
  ck_assert(sim_units_parse_rate_or_zero("64GB/s", &rate, NULL));
  ck_assert_double_eq(rate, 64e9);
  const char *bad[] = { "-1GB/s", "64", "64GB", "1e9B/s", "infGB/s" };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    ck_assert_msg(!sim_units_parse_rate_or_zero(bad[i], &rate, &error), "'%s' parsed", bad[i]);
    ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
  }
}
END_TEST

START_TEST(test_rate_rejects_bad_units)
{
  g_autofree char *size = rate_error("55GB");
  assert_has(size, "expected a rate");
  assert_has(size, "GB/s");
  assert_has(size, "'55GB'");
  g_autofree char *bare = rate_error("55");
  assert_has(bare, "expected a rate");
  g_autofree char *unit = rate_error("55XB/s");
  assert_has(unit, "'55XB/s'");
  g_autofree char *per_ms = rate_error("55GB/ms");
  assert_has(per_ms, "expected a rate");
}
END_TEST

START_TEST(test_rate_rejects_bad_numbers)
{
  g_autofree char *neg = rate_error("-1GB/s");
  assert_has(neg, "expected a positive rate"); /* 0 is refused too: not "non-negative" */
  g_autofree char *inf = rate_error("infGB/s");
  assert_has(inf, "expected a number");
  g_autofree char *nan = rate_error("nanGB/s");
  assert_has(nan, "expected a number");
  g_autofree char *exp = rate_error("1e9B/s");
  assert_has(exp, "exponents are not accepted");
}
END_TEST

/* ---- times ---------------------------------------------------------------- */

START_TEST(test_time_units)
{
  ck_assert_close(time_ok("8us"), 8e-6, 1e-20);
  ck_assert_close(time_ok("2ms"), 2e-3, 1e-18);
  ck_assert_close(time_ok("3ns"), 3e-9, 1e-23);
  ck_assert_close(time_ok("1.5s"), 1.5, 0);
  ck_assert_close(time_ok("130us"), 130e-6, 1e-19);
  ck_assert_close(time_ok(" 4 ms "), 4e-3, 1e-18);
}
END_TEST

START_TEST(test_time_micro_sign)
{
  /* U+00B5 MICRO SIGN, as UTF-8. */
  ck_assert_close(time_ok("5\xc2\xb5s"), 5e-6, 1e-20);
  ck_assert_close(time_ok("5µs"), 5e-6, 1e-20);
  ck_assert_double_eq(time_ok("5µs"), time_ok("5us"));
}
END_TEST

START_TEST(test_time_zero)
{
  ck_assert_double_eq(time_ok("0"), 0.0);
  ck_assert_double_eq(time_ok("0ms"), 0.0);
}
END_TEST

START_TEST(test_time_rejections)
{
  g_autofree char *neg = time_error("-1ms");
  assert_has(neg, "non-negative");
  g_autofree char *bare = time_error("8");
  assert_has(bare, "expected a time with a unit");
  assert_has(bare, "'8'");
  g_autofree char *unit = time_error("8min");
  assert_has(unit, "expected a time with a unit");
  g_autofree char *word = time_error("soon");
  assert_has(word, "expected a number");
  g_autofree char *inf = time_error("inf");
  assert_has(inf, "expected a number");
  g_autofree char *exp = time_error("1e3s");
  assert_has(exp, "'1e3s'");
  g_autofree char *huge = time_error("100000000s"); /* over three years */
  assert_has(huge, "too large");
}
END_TEST

/* ---- formatting ----------------------------------------------------------- */

static void
assert_size_format(guint64 bytes, const char *expected)
{
  g_autofree char *s = sim_units_format_size(bytes);
  ck_assert_msg(strcmp(s, expected) == 0, "format_size(%" G_GUINT64_FORMAT ") = \"%s\", expected \"%s\"", bytes, s,
                expected);
}

static void
assert_rate_format(double rate, const char *expected)
{
  g_autofree char *s = sim_units_format_rate(rate);
  ck_assert_msg(strcmp(s, expected) == 0, "format_rate(%g) = \"%s\", expected \"%s\"", rate, s, expected);
}

START_TEST(test_format_size)
{
  assert_size_format(0, "0 B");
  assert_size_format(512, "512 B");
  assert_size_format(1023, "1023 B");
  assert_size_format(1024, "1.00 KiB");
  assert_size_format(1536, "1.50 KiB");
  assert_size_format(25165824, "24.0 MiB");
  assert_size_format(104857600, "100 MiB");
  assert_size_format(1610612736ULL, "1.50 GiB");
  assert_size_format(85899345920ULL, "80.0 GiB");
  assert_size_format(1099511627776ULL, "1.00 TiB");
  assert_size_format(SIM_UNITS_MAX_BYTES, "4.00 EiB");
}
END_TEST

START_TEST(test_format_size_unit_boundaries)
{
  /* Three significant digits even where rounding carries into the next unit:
   * 1048575 B is 1023.999 KiB, which is 1.00 MiB, not "1024 KiB"; 10239 B is
   * 9.999 KiB, which is 10.0 KiB, not "10.00 KiB". */
  assert_size_format(1048575, "1.00 MiB");
  assert_size_format(10239, "10.0 KiB");
}
END_TEST

START_TEST(test_format_rate)
{
  assert_rate_format(55e9, "55.0 GB/s");
  assert_rate_format(101e9, "101 GB/s");
  assert_rate_format(12.5e9, "12.5 GB/s");
  assert_rate_format(13421772800.0, "13.4 GB/s");
  assert_rate_format(500, "500 B/s");
  assert_rate_format(1.5e6, "1.5 MB/s");
  assert_rate_format(2e12, "2.0 TB/s");
}
END_TEST

START_TEST(test_roundtrip_default_sizes)
{
  /* What the tool prints for a parsed size is what the user wrote. */
  g_autofree char *a = sim_units_format_size(size_ok("24MiB"));
  ck_assert_str_eq(a, "24.0 MiB");
  g_autofree char *b = sim_units_format_size(size_ok("1.75MiB"));
  ck_assert_str_eq(b, "1.75 MiB");
  g_autofree char *c = sim_units_format_rate(rate_ok("55GB/s"));
  ck_assert_str_eq(c, "55.0 GB/s");
}
END_TEST

static Suite *
units_suite(void)
{
  Suite *suite = suite_create("units");
  TCase *size = tcase_create("size");
  tcase_add_test(size, test_size_binary_units);
  tcase_add_test(size, test_size_decimal_units);
  tcase_add_test(size, test_size_fractions);
  tcase_add_test(size, test_size_zero_and_spaces);
  tcase_add_test(size, test_size_limit);
  tcase_add_test(size, test_size_exact_beyond_double_precision);
  tcase_add_test(size, test_size_rejects_negative);
  tcase_add_test(size, test_size_rejects_non_numeric);
  tcase_add_test(size, test_size_rejects_unknown_unit);
  tcase_add_test(size, test_size_rejects_missing_unit);
  tcase_add_test(size, test_size_rejects_huge_numbers);
  tcase_add_test(size, test_size_rejects_inf_nan_exponent);
  tcase_add_test(size, test_size_rejects_bare_point);
  suite_add_tcase(suite, size);

  TCase *rate = tcase_create("rate");
  tcase_add_test(rate, test_rate_units);
  tcase_add_test(rate, test_rate_rejects_zero);
  tcase_add_test(rate, test_rate_or_zero);
  tcase_add_test(rate, test_rate_rejects_bad_units);
  tcase_add_test(rate, test_rate_rejects_bad_numbers);
  suite_add_tcase(suite, rate);

  TCase *time = tcase_create("time");
  tcase_add_test(time, test_time_units);
  tcase_add_test(time, test_time_micro_sign);
  tcase_add_test(time, test_time_zero);
  tcase_add_test(time, test_time_rejections);
  suite_add_tcase(suite, time);

  TCase *format = tcase_create("format");
  tcase_add_test(format, test_format_size);
  tcase_add_test(format, test_format_size_unit_boundaries);
  tcase_add_test(format, test_format_rate);
  tcase_add_test(format, test_roundtrip_default_sizes);
  suite_add_tcase(suite, format);
  return suite;
}

int
main(void)
{
  return test_run_suite(units_suite());
}
