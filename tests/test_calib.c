/* tests/test_calib.c — the calibration side that runs without a GPU: the
 * α-β copy fit, the profile writer and its round trip through the scenario
 * loader, the calibrated table as the engine reads it, the loader's errors on
 * bad profiles, and offsim-calib's behaviour on a machine without a device.
 *
 * Synthetic links are built from α = 8 µs and β = 55 GB/s (H2D) or 52 GB/s
 * (D2H): every expected time is α + bytes/β, computed here, not by the code
 * under test. */
#include "testutil.h"

#include "calib_fit.h"
#include "calib_profile.h"
#include "error.h"
#include "units.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#define DATA OFFSIM_TEST_DATA "/calib"
#define ALPHA 8e-6
#define BETA_H2D 55e9
#define BETA_D2H 52e9
#define KIB G_GUINT64_CONSTANT(1024)
#define GIB (KIB * KIB * KIB)

#define assert_has(msg, piece)                                                                             \
  ck_assert_msg(strstr((msg), (piece)) != NULL, "expected \"%s\" in the message: %s", (piece), (msg))

/* |a - b| <= rel * |b|. */
#define assert_rel(a, b, rel) ck_assert_close((a), (b), (rel) * fabs((double)(b)))

/* ---- helpers -------------------------------------------------------------- */

/* 4 KiB, 8 KiB, ... 1 GiB: offsim-calib's full sweep, 19 sizes. */
static guint
sweep_sizes(guint64 *bytes)
{
  guint n = 0;
  for (guint64 b = 4 * KIB; b <= GIB; b *= 2)
    bytes[n++] = b;
  return n;
}

/* A deterministic uniform number in [-1, 1) (a 64-bit LCG; no libc state). */
static double
pseudo_noise(guint64 *state)
{
  *state = *state * G_GUINT64_CONSTANT(6364136223846793005) + G_GUINT64_CONSTANT(1442695040888963407);
  return (double)(*state >> 11) / (double)(G_GUINT64_CONSTANT(1) << 52) - 1.0;
}

static char *
write_file(const char *dir, const char *name, const char *text)
{
  char *path = g_build_filename(dir, name, NULL);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(g_file_set_contents(path, text, -1, &error), "cannot write %s: %s", path, error ? error->message : "?");
  return path;
}

/* A scenario in `dir` that includes `profile` (a path) and runs one small layer. */
static char *
write_including_scenario(const char *dir, const char *profile)
{
  g_autofree char *text = g_strdup_printf("[scenario]\nname = calibrated\ninclude = %s\n"
                                          "[model]\nlayers = 2\nforward = 1ms\ninput = 1MiB\ntensors = a:8MiB\n",
                                          profile);
  return write_file(dir, "scenario.ini", text);
}

/* The synthetic profile of this suite: tables from α and β, every other key
 * an awkward number that needs all its digits. */
static CalibProfile *
synthetic_profile(void)
{
  CalibProfile *p = calib_profile_new();
  p->title = g_strdup("Synthetic GPU, made by tests/test_calib.c.\nNot a measurement.");
  p->memory = G_GUINT64_CONSTANT(150754820096);
  p->matmul_tflops = 701.2345678912;
  p->hbm_bandwidth = 4.123456789e12;
  p->link.h2d_bandwidth = BETA_H2D;
  p->link.d2h_bandwidth = BETA_D2H;
  p->link.bidir_bandwidth = 101.3456789123e9;
  p->link.latency = ALPHA;
  p->link.pageable_factor = 0.4321987654;
  p->link.compute_slowdown = 0.0317654321;
  p->link.host_alloc = 3.2109876e-3;
  guint64 sizes[32];
  guint n = sweep_sizes(sizes);
  for (guint i = 0; i < n; i++) {
    double b = (double)sizes[i];
    calib_profile_add_point(p, SIM_DIR_H2D, sizes[i], b / (ALPHA + b / BETA_H2D));
    calib_profile_add_point(p, SIM_DIR_D2H, sizes[i], b / (ALPHA + b / BETA_D2H));
  }
  calib_profile_note(p, "link.latency", "the fitted alpha, both directions");
  calib_profile_meta(p, "date", "2026-01-01T00:00:00Z");
  calib_profile_meta(p, "driver", "580.00.00");
  calib_profile_meta(p, "h2d_pinned_us", "4096:8.07/8.08/8.06, 8192:8.15/8.15/8.16");
  return p;
}

/* Every [link] number of `read` equals `wrote`'s to 1e-9 relative. */
static void
assert_same_link(const SimLink *read, const SimLink *wrote)
{
  assert_rel(read->h2d_bandwidth, wrote->h2d_bandwidth, 1e-9);
  assert_rel(read->d2h_bandwidth, wrote->d2h_bandwidth, 1e-9);
  assert_rel(read->bidir_bandwidth, wrote->bidir_bandwidth, 1e-9);
  assert_rel(read->latency, wrote->latency, 1e-9);
  assert_rel(read->pageable_factor, wrote->pageable_factor, 1e-9);
  assert_rel(read->compute_slowdown, wrote->compute_slowdown, 1e-9);
  assert_rel(read->host_alloc, wrote->host_alloc, 1e-9);
  for (int dir = 0; dir < 2; dir++) {
    ck_assert_uint_eq(read->table_points[dir], wrote->table_points[dir]);
    for (guint i = 0; i < wrote->table_points[dir]; i++) {
      ck_assert_uint_eq(read->table[dir][i].bytes, wrote->table[dir][i].bytes);
      assert_rel(read->table[dir][i].bandwidth, wrote->table[dir][i].bandwidth, 1e-9);
    }
  }
}

/* `p` saved as DIR/profile.ini; returns the path. */
static char *
save_profile(const CalibProfile *p, const char *dir)
{
  char *path = g_build_filename(dir, "profile.ini", NULL);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(calib_profile_save(p, path, &error), "%s", error ? error->message : "");
  return path;
}

/* Loads a profile through a scenario that includes it. */
static SimScenario *
load_through_scenario(const char *dir, const char *profile, GError **error)
{
  g_autofree char *scenario = write_including_scenario(dir, profile);
  return sim_scenario_load_file(scenario, error);
}

/* ---- the fit -------------------------------------------------------------- */

static void
assert_fit_error(const guint64 *bytes, const double *seconds, guint n, const char *piece)
{
  g_autoptr(GError) error = NULL;
  CalibFit fit;
  ck_assert(!calib_fit_alpha_beta(bytes, seconds, n, &fit, &error));
  ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
  assert_has(error->message, piece);
}

START_TEST(fit_recovers_alpha_and_beta)
{
  guint64 bytes[32];
  double seconds[32];
  guint n = sweep_sizes(bytes);
  for (guint i = 0; i < n; i++)
    seconds[i] = ALPHA + (double)bytes[i] / BETA_H2D;
  CalibFit fit;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(calib_fit_alpha_beta(bytes, seconds, n, &fit, &error), "%s", error ? error->message : "");
  assert_rel(fit.alpha, ALPHA, 1e-9);
  assert_rel(fit.beta, BETA_H2D, 1e-9);
  ck_assert(!fit.alpha_clamped);
  ck_assert_uint_eq(fit.points, n);
  ck_assert_double_le(fit.max_rel_error, 1e-9);
}
END_TEST

START_TEST(fit_recovers_alpha_and_beta_through_noise)
{
  /* Five samples per size, each off by up to +-3%: the relative weighting
   * keeps the small copies, so alpha comes back within 1%. */
  guint64 sizes[32], bytes[160];
  double seconds[160];
  guint n_sizes = sweep_sizes(sizes), n = 0;
  guint64 state = 42;
  for (guint i = 0; i < n_sizes; i++)
    for (int r = 0; r < 5; r++) {
      bytes[n] = sizes[i];
      seconds[n++] = (ALPHA + (double)sizes[i] / BETA_H2D) * (1 + 0.03 * pseudo_noise(&state));
    }
  CalibFit fit;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(calib_fit_alpha_beta(bytes, seconds, n, &fit, &error), "%s", error ? error->message : "");
  assert_rel(fit.alpha, ALPHA, 0.01);
  assert_rel(fit.beta, BETA_H2D, 0.01);
  ck_assert_double_le(fit.max_rel_error, 0.035);
  ck_assert_double_ge(fit.rms_rel_error, 0.005);
}
END_TEST

START_TEST(fit_clamps_a_negative_alpha)
{
  /* No fixed cost, and the small copies measured 2% fast: the free fit would
   * give alpha < 0; the fit sets it to 0 and keeps beta. */
  guint64 bytes[32];
  double seconds[32];
  guint n = sweep_sizes(bytes);
  for (guint i = 0; i < n; i++)
    seconds[i] = (double)bytes[i] / BETA_H2D * (i < 4 ? 0.98 : 1.0);
  CalibFit fit;
  g_autoptr(GError) error = NULL;
  ck_assert(calib_fit_alpha_beta(bytes, seconds, n, &fit, &error));
  ck_assert(fit.alpha_clamped);
  ck_assert_double_eq(fit.alpha, 0);
  assert_rel(fit.beta, BETA_H2D, 0.01);
}
END_TEST

START_TEST(fit_rejects_degenerate_input)
{
  const guint64 one_size[] = { 4096, 4096, 4096 };
  const double times[] = { 1e-5, 1.1e-5, 0.9e-5 };
  assert_fit_error(one_size, times, 1, "at least two distinct sizes, got 1 point");
  assert_fit_error(one_size, times, 3, "at least two distinct sizes, got 3 points");
  assert_fit_error(NULL, NULL, 0, "at least two distinct sizes, got 0 points");

  const guint64 sizes[] = { 4096, 8192, 16384 };
  const double zero[] = { 1e-5, 0, 2e-5 }, negative[] = { 1e-5, 2e-5, -3e-5 }, nan[] = { NAN, 2e-5, 3e-5 };
  assert_fit_error(sizes, zero, 3, "point 2 (8192 B in 0 s): sizes and times must be positive and finite");
  assert_fit_error(sizes, negative, 3, "point 3 ");
  assert_fit_error(sizes, nan, 3, "point 1 ");
  const guint64 zero_size[] = { 0, 8192 };
  assert_fit_error(zero_size, times, 2, "point 1 (0 B");
  /* Larger copies taking less time: no positive bandwidth. */
  const double shrinking[] = { 3e-5, 2e-5, 1e-5 };
  assert_fit_error(sizes, shrinking, 3, "no positive bandwidth");
}
END_TEST

START_TEST(median_of_odd_and_even_counts)
{
  const double odd[] = { 5, 1, 9, 3, 7 }, even[] = { 4, 1, 3, 2 };
  ck_assert_double_eq(calib_median(odd, 5), 5);
  ck_assert_double_eq(calib_median(even, 4), 2.5);
  ck_assert_double_eq(calib_median(odd, 1), 5);
  ck_assert_double_eq(odd[0], 5); /* the input is not sorted in place */
}
END_TEST

/* ---- formats and the writer ----------------------------------------------- */

START_TEST(numbers_are_written_as_the_loader_reads_them)
{
  const struct {
    double value;
    const char *rate, *time;
  } cases[] = {
    { 55e9, "55GB/s", "55000000000s" },
    { 8e-6, "0.000008B/s", "8us" },
    { 1.23456789012345e9, "1.23456789012GB/s", "1234567890.12s" },
    { 999.5, "999.5B/s", "999.5s" },
    { 3.2e-3, "0.0032B/s", "3.2ms" },
    { 2.5e-10, "0.00000000025B/s", "0.25ns" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *rate = calib_format_rate(cases[i].value);
    g_autofree char *time = calib_format_time(cases[i].value);
    ck_assert_str_eq(rate, cases[i].rate);
    ck_assert_str_eq(time, cases[i].time);
  }
  g_autofree char *zero = calib_format_time(0);
  ck_assert_str_eq(zero, "0");
  /* Plain decimals, never an exponent, which the loader refuses. */
  const struct {
    double value;
    const char *text;
  } numbers[] = { { 0.03, "0.03" }, { 1e-5, "0.00001" }, { 1.5e-7, "0.00000015" }, { 701.25, "701.25" },
                  { 2e12, "2000000000000" } };
  for (guint i = 0; i < G_N_ELEMENTS(numbers); i++) {
    g_autofree char *text = calib_format_number(numbers[i].value);
    ck_assert_str_eq(text, numbers[i].text);
  }
  /* And the loader's parsers give them back. */
  g_autoptr(GError) error = NULL;
  double rate = 0, seconds = 0;
  g_autofree char *r = calib_format_rate(12.3456789012345e9);
  g_autofree char *t = calib_format_time(7.93456789012345e-6);
  ck_assert(sim_units_parse_rate(r, &rate, &error));
  ck_assert(sim_units_parse_time(t, &seconds, &error));
  assert_rel(rate, 12.3456789012345e9, 1e-11);
  assert_rel(seconds, 7.93456789012345e-6, 1e-11);
}
END_TEST

START_TEST(the_writer_output_is_pinned_by_a_fixture)
{
  g_autoptr(CalibProfile) p = synthetic_profile();
  g_autoptr(GError) error = NULL;
  g_autofree char *text = calib_profile_format(p, &error);
  ck_assert_msg(text != NULL, "%s", error ? error->message : "");
  g_autofree char *expected = NULL;
  ck_assert(g_file_get_contents(DATA "/example.ini", &expected, NULL, NULL));
  ck_assert_msg(strcmp(text, expected) == 0, "the writer's output differs from example.ini:\n%s", text);
  assert_has(text, "# Synthetic GPU, made by tests/test_calib.c.\n# Not a measurement.\n[device]\n");
  assert_has(text, "# the fitted alpha, both directions\nlatency = 8us\n");
  assert_has(text, "h2d_table = 4096B:");
  assert_has(text, ", 1073741824B:");
  assert_has(text, "\n[calibration]\ndate = 2026-01-01T00:00:00Z\ndriver = 580.00.00\n");
  ck_assert_ptr_null(strstr(text, "efficiency ="));
}
END_TEST

START_TEST(metadata_stays_on_one_line)
{
  /* A device name with a newline or a backslash cannot break the file. */
  g_autoptr(CalibProfile) p = synthetic_profile();
  calib_profile_meta(p, "odd-name_2", "line\nbreak\\escape\tend");
  g_autoptr(GError) error = NULL;
  g_autofree char *text = calib_profile_format(p, &error);
  ck_assert_msg(text != NULL, "%s", error ? error->message : "");
  assert_has(text, "\nodd-name_2 = line break escape end\n");
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = save_profile(p, dir);
  g_autoptr(SimScenario) s = load_through_scenario(dir, path, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(the_writer_refuses_values_the_loader_would_reject)
{
  struct {
    const char *message;
    CalibProfile *p;
  } bad[6];
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++)
    bad[i].p = synthetic_profile();
  bad[0].p->link.pageable_factor = 1.5;
  bad[0].message = "profile: [link] pageable_factor: expected a number in (0, 1], got 1.5";
  bad[1].p->link.compute_slowdown = 1;
  bad[1].message = "profile: [link] compute_slowdown: expected a number in [0, 1), got 1";
  bad[2].p->link.table[SIM_DIR_D2H][3].bytes = 1;
  bad[2].message = "profile: [link] d2h_table: point 4: sizes must be positive and increasing";
  bad[3].p->link.table[SIM_DIR_H2D][0].bandwidth = -2;
  bad[3].message = "profile: [link] h2d_table: point 1: expected a positive, finite rate, got -2";
  bad[4].p->link.latency = -1e-6;
  bad[4].message = "profile: [link] latency: expected a time in [0, 1s]";
  bad[5].p->matmul_tflops = NAN;
  bad[5].message = "profile: [device] matmul_tflops: expected a positive, finite value";
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    g_autofree char *text = calib_profile_format(bad[i].p, &error);
    ck_assert_ptr_null(text);
    ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
    assert_has(error->message, bad[i].message);
    /* Nothing is written, and an older file stays as it was. */
    g_autofree char *dir = test_tmp_dir_new();
    g_autofree char *path = write_file(dir, "profile.ini", "old\n");
    g_clear_error(&error);
    ck_assert(!calib_profile_save(bad[i].p, path, &error));
    g_autofree char *still = NULL;
    ck_assert(g_file_get_contents(path, &still, NULL, NULL));
    ck_assert_str_eq(still, "old\n");
    test_tmp_dir_remove(dir);
    calib_profile_free(bad[i].p);
  }
}
END_TEST

/* ---- the round trip through the scenario loader --------------------------- */

START_TEST(a_profile_survives_the_round_trip)
{
  g_autoptr(CalibProfile) p = synthetic_profile();
  g_autofree char *dir = test_tmp_dir_new();
  g_free(save_profile(p, dir)); /* included by name below */
  g_autoptr(GError) error = NULL;

  /* Included by its name relative to the scenario, as users write it. */
  g_autoptr(SimScenario) s = load_through_scenario(dir, "profile.ini", &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(s->machine.device.memory, p->memory);
  assert_rel(s->machine.device.matmul_flops, p->matmul_tflops * 1e12, 1e-9);
  assert_rel(s->machine.device.hbm_bandwidth, p->hbm_bandwidth, 1e-9);
  ck_assert_double_eq(s->machine.device.efficiency, 0.5); /* left to scenarios */
  assert_same_link(&s->machine.link, &p->link);

  /* The program's own check agrees. */
  SimMachine m;
  ck_assert_msg(calib_profile_verify(p, &m, &error), "%s", error ? error->message : "");
  assert_same_link(&m.link, &p->link);
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(a_scenario_overrides_the_profile)
{
  /* The including file's keys win, tables stay. */
  g_autoptr(CalibProfile) p = synthetic_profile();
  g_autofree char *dir = test_tmp_dir_new();
  g_free(save_profile(p, dir)); /* included by name below */
  g_autoptr(GError) error = NULL;
  g_autofree char *scenario = write_file(dir, "override.ini",
                                         "[scenario]\ninclude = profile.ini\n[link]\nlatency = 5us\n"
                                         "[model]\nlayers = 1\nforward = 1ms\ninput = 1MiB\ntensors = a:1MiB\n");
  g_autoptr(SimScenario) s = sim_scenario_load_file(scenario, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  assert_rel(s->machine.link.latency, 5e-6, 1e-12);
  ck_assert_uint_eq(s->machine.link.table_points[SIM_DIR_H2D], 19);
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(the_loaded_table_interpolates_copy_times)
{
  g_autoptr(CalibProfile) p = synthetic_profile();
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = save_profile(p, dir);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = load_through_scenario(dir, path, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  const SimLink *l = &s->machine.link;
  const double mib = 1048576.0;

  /* At a measured size: the measured time, alpha + bytes / beta. */
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1048576, FALSE), ALPHA + mib / BETA_H2D, 1e-9);
  assert_rel(sim_link_copy_time(l, SIM_DIR_D2H, GIB, FALSE), ALPHA + (double)GIB / BETA_D2H, 1e-9);
  /* Between two sizes: linear in bytes, so 1.5 MiB takes the mean of 1 and 2 MiB. */
  double t1 = ALPHA + mib / BETA_H2D, t2 = ALPHA + 2 * mib / BETA_H2D;
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1572864, FALSE), 0.5 * (t1 + t2), 1e-9);
  /* Past 1 GiB: its time plus the rest at its bandwidth. */
  double t_gib = ALPHA + (double)GIB / BETA_H2D;
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 2 * GIB, FALSE), 2 * t_gib, 1e-9);
  /* Under 4 KiB: scaled from the smallest point, floored at the latency. */
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1024, FALSE), ALPHA, 1e-9);
  /* Pageable: the part above the latency at pageable_factor. */
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1048576, TRUE), ALPHA + (mib / BETA_H2D) / 0.4321987654, 1e-9);
  test_tmp_dir_remove(dir);
}
END_TEST

/* ---- bad profiles, as users would meet them -------------------------------- */

START_TEST(bad_profiles_name_file_group_and_key)
{
  const struct {
    const char *file, *key, *what;
  } cases[] = {
    { "bad-truncated-point.ini", "h2d_table", "expected SIZE:RATE items, got '1073741824B'" },
    { "bad-decreasing-sizes.ini", "d2h_table", "point 3: sizes must be positive and increasing" },
    { "bad-negative-rate.ini", "h2d_table", "point 2: expected a non-negative value" },
    { "bad-unknown-key.ini", "h2d_tabel", "unknown key (expected one of h2d_bandwidth" },
  };
  g_autofree char *dir = test_tmp_dir_new();
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *profile = g_build_filename(DATA, cases[i].file, NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = load_through_scenario(dir, profile, &error);
    ck_assert_msg(s == NULL, "%s loaded", cases[i].file);
    ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
    ck_assert_ptr_null(strchr(error->message, '\n'));
    /* The file the user must edit is the profile, not the scenario. */
    g_autofree char *where = g_strdup_printf("%s: [link] %s: ", profile, cases[i].key);
    assert_has(error->message, where);
    assert_has(error->message, cases[i].what);

    /* The command line: exit status 2, the same line. */
    g_autofree char *scenario = g_build_filename(dir, "scenario.ini", NULL);
    g_auto(TestRun) r = test_offsim("compare", scenario, NULL);
    ck_assert_int_eq(r.status, 2);
    assert_has(r.err, where);
  }
  test_tmp_dir_remove(dir);
}
END_TEST

/* ---- offsim-calib without a GPU -------------------------------------------- */

#if defined(OFFSIM_CALIB_BINARY) || defined(OFFSIM_CALIB_MOCK)
#include <sys/wait.h>

/* Runs `binary` with the NULL-terminated arguments; `env` (NAME=VALUE or
 * NULL) is added to the environment. */
static TestRun
run_calib(const char *binary, const char *env, const char *first, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, (char *)binary);
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a; a = va_arg(ap, const char *))
    g_ptr_array_add(argv, (char *)a);
  va_end(ap);
  g_ptr_array_add(argv, NULL);
  g_auto(GStrv) envp = g_get_environ();
  if (env) {
    g_auto(GStrv) kv = g_strsplit(env, "=", 2);
    envp = g_environ_setenv(envp, kv[0], kv[1], TRUE);
  }
  TestRun r = { 0 };
  int wait_status = 0;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(g_spawn_sync(NULL, (char **)argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, &r.out, &r.err,
                             &wait_status, &error),
                "cannot run %s: %s", binary, error ? error->message : "?");
  ck_assert_msg(WIFEXITED(wait_status), "%s died: %s", binary, r.err);
  r.status = WEXITSTATUS(wait_status);
  return r;
}
#endif

#ifdef OFFSIM_CALIB_BINARY
START_TEST(calib_without_a_device_says_so)
{
  /* On a machine with a GPU this is a real --quick run whose profile must
   * load; without one, a clear error and status 3. */
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *out = g_build_filename(dir, "profile.ini", NULL);
  g_auto(TestRun) r = run_calib(OFFSIM_CALIB_BINARY, NULL, "--quick", "--out", out, NULL);
  if (r.status == 0) {
    g_autoptr(GError) error = NULL;
    g_autoptr(SimScenario) s = load_through_scenario(dir, out, &error);
    ck_assert_msg(s != NULL, "%s", error ? error->message : "");
    ck_assert_double_gt(s->machine.link.h2d_bandwidth, 0);
    ck_assert_uint_gt(s->machine.link.table_points[SIM_DIR_H2D], 1);
  } else {
    ck_assert_msg(r.status == 3, "exit %d, expected 3 (no device): %s", r.status, r.err);
    assert_has(r.err, "offsim-calib: no CUDA device: cudaGetDeviceCount: ");
    ck_assert(!g_file_test(out, G_FILE_TEST_EXISTS));
  }
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(calib_rejects_bad_options)
{
  g_auto(TestRun) r = run_calib(OFFSIM_CALIB_BINARY, NULL, "--quick", "--frobnicate", NULL);
  ck_assert_int_eq(r.status, 2);
  assert_has(r.err, "offsim-calib: Unknown option --frobnicate");
  g_auto(TestRun) extra = run_calib(OFFSIM_CALIB_BINARY, NULL, "profile.ini", NULL);
  ck_assert_int_eq(extra.status, 2);
  assert_has(extra.err, "unexpected argument 'profile.ini'");
}
END_TEST
#endif

#ifdef OFFSIM_CALIB_MOCK
/* The mock's model (gpu_calib/calib_mock.c): alpha 7 us H2D and 9 us D2H,
 * beta 53 and 51 GB/s, pageable at 0.4, 4 TB/s device memory, 700 TFLOP/s
 * bf16, 1% noise. */
START_TEST(calib_host_code_recovers_the_mock_link)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *out = g_build_filename(dir, "profile.ini", NULL);
  g_auto(TestRun) r = run_calib(OFFSIM_CALIB_MOCK, NULL, "--quick", "--out", out, NULL);
  ck_assert_msg(r.status == 0, "offsim-calib-mock --quick exited %d: %s", r.status, r.err);
  assert_has(r.err, "profile written to ");
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = load_through_scenario(dir, out, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  const SimLink *l = &s->machine.link;
  assert_rel(l->latency, 8e-6, 0.05);
  assert_rel(l->h2d_bandwidth, 53e9, 0.02);
  assert_rel(l->d2h_bandwidth, 51e9, 0.02);
  assert_rel(l->bidir_bandwidth, 104e9, 0.03);
  assert_rel(l->pageable_factor, 0.4, 0.03);
  ck_assert_double_ge(l->compute_slowdown, 0);
  ck_assert_double_lt(l->compute_slowdown, 0.03);
  ck_assert_double_gt(l->host_alloc, 0);
  /* --quick: 4 KiB to 1 GiB by factors of 4. */
  for (int dir_ = 0; dir_ < 2; dir_++) {
    ck_assert_uint_eq(l->table_points[dir_], 10);
    ck_assert_uint_eq(l->table[dir_][0].bytes, 4096);
    ck_assert_uint_eq(l->table[dir_][9].bytes, GIB);
  }
  double alpha = 7e-6, beta = 53e9, mib = 1048576.0;
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1048576, FALSE), alpha + mib / beta, 0.02);
  const SimDevice *d = &s->machine.device;
  ck_assert_uint_eq(d->memory, G_GUINT64_CONSTANT(141000000000));
  assert_rel(d->hbm_bandwidth, 4e12, 0.02);
  assert_rel(d->matmul_flops, 700e12, 0.02);

  g_autofree char *text = NULL;
  ck_assert(g_file_get_contents(out, &text, NULL, NULL));
  assert_has(text, "# Mock GPU (calib_mock.c, not a measurement), measured by offsim-calib --quick on ");
  assert_has(text, "\n[calibration]\ntool = offsim-calib --quick\n");
  assert_has(text, "\nh2d_pinned_us = 4096:");
  assert_has(text, "\npcie_max = not reported (no sysfs entry)\n");
  assert_has(text, "\ngemm_bf16 = qkv 8192x6144x4096: ");
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(calib_full_run_prints_the_profile)
{
  /* Without --out the profile goes to stdout; the full sweep has 19 sizes. */
  g_auto(TestRun) r = run_calib(OFFSIM_CALIB_MOCK, NULL, NULL);
  ck_assert_msg(r.status == 0, "offsim-calib-mock exited %d: %s", r.status, r.err);
  assert_has(r.out, "\n[link]\n");
  assert_has(r.out, ", 1073741824B:");
  assert_has(r.out, "\ngemm_fp32 = qkv 8192x6144x4096: ");
  assert_has(r.out, "small_mlp 1024x4864x896: ");
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = write_file(dir, "profile.ini", r.out);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = load_through_scenario(dir, path, &error);
  ck_assert_msg(s != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(s->machine.link.table_points[SIM_DIR_D2H], 19);
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(calib_mock_without_a_device_or_with_a_wrong_one)
{
  g_auto(TestRun) none = run_calib(OFFSIM_CALIB_MOCK, "OFFSIM_CALIB_MOCK_DEVICES=0", "--quick", NULL);
  ck_assert_int_eq(none.status, 3);
  ck_assert_str_eq(none.err, "offsim-calib: no CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected "
                             "(cudaErrorNoDevice); run offsim-calib on a machine with an NVIDIA GPU and its driver\n");
  ck_assert_str_eq(none.out, "");
  g_auto(TestRun) wrong = run_calib(OFFSIM_CALIB_MOCK, NULL, "--device", "1", NULL);
  ck_assert_int_eq(wrong.status, 2);
  assert_has(wrong.err, "offsim-calib: --device 1: this machine has 1 CUDA device (0 to 0)");
}
END_TEST
#endif

static Suite *
calib_suite(void)
{
  Suite *s = suite_create("calib");
  TCase *fit = tcase_create("fit");
  tcase_add_test(fit, fit_recovers_alpha_and_beta);
  tcase_add_test(fit, fit_recovers_alpha_and_beta_through_noise);
  tcase_add_test(fit, fit_clamps_a_negative_alpha);
  tcase_add_test(fit, fit_rejects_degenerate_input);
  tcase_add_test(fit, median_of_odd_and_even_counts);
  suite_add_tcase(s, fit);

  TCase *profile = tcase_create("profile");
  tcase_add_test(profile, numbers_are_written_as_the_loader_reads_them);
  tcase_add_test(profile, the_writer_output_is_pinned_by_a_fixture);
  tcase_add_test(profile, metadata_stays_on_one_line);
  tcase_add_test(profile, the_writer_refuses_values_the_loader_would_reject);
  tcase_add_test(profile, a_profile_survives_the_round_trip);
  tcase_add_test(profile, a_scenario_overrides_the_profile);
  tcase_add_test(profile, the_loaded_table_interpolates_copy_times);
  tcase_add_test(profile, bad_profiles_name_file_group_and_key);
  suite_add_tcase(s, profile);

  TCase *program = tcase_create("offsim-calib");
  tcase_set_timeout(program, 120);
#ifdef OFFSIM_CALIB_BINARY
  tcase_add_test(program, calib_without_a_device_says_so);
  tcase_add_test(program, calib_rejects_bad_options);
#endif
#ifdef OFFSIM_CALIB_MOCK
  tcase_add_test(program, calib_host_code_recovers_the_mock_link);
  tcase_add_test(program, calib_full_run_prints_the_profile);
  tcase_add_test(program, calib_mock_without_a_device_or_with_a_wrong_one);
#endif
  suite_add_tcase(s, program);
  return s;
}

int
main(void)
{
  return test_run_suite(calib_suite());
}
