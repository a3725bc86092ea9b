/* tests/test_calib.c — the calibration side that runs without a GPU: the
 * α-β copy fit, the launch-overhead line, the GEMM shapes derived from a
 * model and their throughput, the profile writer (the kernel cost model's
 * keys included) and its round trip through the scenario loader, the
 * calibrated table as the engine reads it, the loader's errors on bad
 * profiles, and offsim-calib's options and behaviour on a machine without a
 * device.
 *
 * Synthetic links are built from α = 8 µs and β = 55 GB/s (H2D) or 52 GB/s
 * (D2H): every expected time is α + bytes/β, computed here, not by the code
 * under test. */
#include "testutil.h"

#include "base/error.h"
#include "base/units.h"
#include "gpu_calib/calib_fit.h"
#include "gpu_calib/calib_profile.h"
#include "gpu_calib/calib_shapes.h"
#include "input/schema.h"

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

START_TEST(line_fit_against_hand_numbers)
{
  /* Exactly on t(N) = 30 us + 4 us N. */
  const double n[] = { 125, 250, 500, 1000 }, t[] = { 530e-6, 1030e-6, 2030e-6, 4030e-6 };
  double a = 0, b = 0;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(calib_fit_line(n, t, 4, &a, &b, &error), "%s", error ? error->message : "");
  assert_rel(a, 30e-6, 1e-9);
  assert_rel(b, 4e-6, 1e-12);
  /* Off the line, by hand: mean x 2.5, mean y 5.75, Sxy 9.5, Sxx 5: slope
   * 1.9, intercept 5.75 - 1.9 x 2.5 = 1. */
  const double x[] = { 1, 2, 3, 4 }, y[] = { 3, 5, 6, 9 };
  ck_assert(calib_fit_line(x, y, 4, &a, &b, &error));
  assert_rel(b, 1.9, 1e-12);
  assert_rel(a, 1.0, 1e-12);
  /* One x, or a value that is not finite. */
  const double same[] = { 2, 2, 2 };
  ck_assert(!calib_fit_line(same, y, 3, &a, &b, &error));
  assert_has(error->message, "line fit: needs at least two distinct x, got 3 points");
  g_clear_error(&error);
  const double inf[] = { 1, INFINITY };
  ck_assert(!calib_fit_line(x, inf, 2, &a, &b, &error));
  assert_has(error->message, "line fit: point 2 (2, inf) is not finite");
}
END_TEST

/* ---- the GEMM shapes ------------------------------------------------------- */

typedef struct {
  int m, n, k;
  const char *name;
  CalibGemmPass pass;
  int uses;
} ExpectedShape;

static void
assert_shapes(GArray *shapes, const ExpectedShape *expected, guint n)
{
  ck_assert_uint_eq(shapes->len, n);
  for (guint i = 0; i < n; i++) {
    const CalibGemmShape *s = &g_array_index(shapes, CalibGemmShape, i);
    ck_assert_msg(s->m == expected[i].m && s->n == expected[i].n && s->k == expected[i].k,
                  "shape %u: %dx%dx%d, expected %dx%dx%d", i + 1, s->m, s->n, s->k, expected[i].m, expected[i].n,
                  expected[i].k);
    ck_assert_str_eq(s->name, expected[i].name);
    ck_assert_int_eq(s->pass, expected[i].pass);
    ck_assert_int_eq(s->uses, expected[i].uses);
  }
}

START_TEST(gemm_shapes_of_a_model_by_hand)
{
  /* Qwen2.5-0.5B at batch 2 x 512: hidden 896, ffn 4864, 14 heads, 2 kv
   * heads of 64, vocab 151936, 1024 tokens.  q and o are 896 -> 896, k and
   * v 896 -> 128, gate and up 896 -> 4864, down 4864 -> 896.  Forward m =
   * tokens, n = out, k = in; dgrad m = tokens, n = in, k = out; wgrad m =
   * out, n = in, k = tokens: 24 GEMMs, 12 distinct shapes. */
  CalibModelDims d;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(calib_shapes_parse_model("qwen=896,4864,14,2,64,151936,1024", &d, &error), "%s",
                error ? error->message : "");
  ck_assert_str_eq(d.name, "qwen");
  ck_assert_uint_eq(d.kv_heads, 2);
  ck_assert_uint_eq(d.tokens, 1024);
  g_autoptr(GArray) shapes = g_array_new(FALSE, FALSE, sizeof(CalibGemmShape));
  ck_assert(calib_shapes_add_model(shapes, &d, &error));
  const ExpectedShape qwen[] = {
    { 1024, 896, 896, "qwen q.fwd", CALIB_GEMM_FORWARD, 4 },      /* q, o forward and dgrad */
    { 1024, 128, 896, "qwen k.fwd", CALIB_GEMM_FORWARD, 2 },      /* k, v */
    { 1024, 4864, 896, "qwen gate.fwd", CALIB_GEMM_FORWARD, 3 },  /* gate, up; down's dgrad */
    { 1024, 896, 4864, "qwen down.fwd", CALIB_GEMM_FORWARD, 3 },  /* down; gate's, up's dgrad */
    { 1024, 151936, 896, "qwen lm_head.fwd", CALIB_GEMM_FORWARD, 1 },
    { 1024, 896, 128, "qwen k.dgrad", CALIB_GEMM_DGRAD, 2 },
    { 1024, 896, 151936, "qwen lm_head.dgrad", CALIB_GEMM_DGRAD, 1 },
    { 896, 896, 1024, "qwen q.wgrad", CALIB_GEMM_WGRAD, 2 },
    { 128, 896, 1024, "qwen k.wgrad", CALIB_GEMM_WGRAD, 2 },
    { 4864, 896, 1024, "qwen gate.wgrad", CALIB_GEMM_WGRAD, 2 },
    { 896, 4864, 1024, "qwen down.wgrad", CALIB_GEMM_WGRAD, 1 },
    { 151936, 896, 1024, "qwen lm_head.wgrad", CALIB_GEMM_WGRAD, 1 },
  };
  assert_shapes(shapes, qwen, G_N_ELEMENTS(qwen));

  /* Llama-3.1-8B at 1 x 4096, unnamed, after it: hidden = q out = tokens
   * = 4096 makes q, o and their dgrad and wgrad one shape (6 uses); 10 new
   * shapes, none of Qwen's. */
  ck_assert(calib_shapes_parse_model("4096,14336,32,8,128,128256,4096", &d, &error));
  ck_assert_str_eq(d.name, "model");
  ck_assert(calib_shapes_add_model(shapes, &d, &error));
  const ExpectedShape llama[] = {
    { 4096, 4096, 4096, "model q.fwd", CALIB_GEMM_FORWARD, 6 },
    { 4096, 1024, 4096, "model k.fwd", CALIB_GEMM_FORWARD, 2 },
    { 4096, 14336, 4096, "model gate.fwd", CALIB_GEMM_FORWARD, 4 }, /* and down's wgrad: k = tokens = hidden */
    { 4096, 4096, 14336, "model down.fwd", CALIB_GEMM_FORWARD, 3 },
    { 4096, 128256, 4096, "model lm_head.fwd", CALIB_GEMM_FORWARD, 1 },
    { 4096, 4096, 1024, "model k.dgrad", CALIB_GEMM_DGRAD, 2 },
    { 4096, 4096, 128256, "model lm_head.dgrad", CALIB_GEMM_DGRAD, 1 },
    { 1024, 4096, 4096, "model k.wgrad", CALIB_GEMM_WGRAD, 2 },
    { 14336, 4096, 4096, "model gate.wgrad", CALIB_GEMM_WGRAD, 2 },
    { 128256, 4096, 4096, "model lm_head.wgrad", CALIB_GEMM_WGRAD, 1 },
  };
  ck_assert_uint_eq(shapes->len, 22);
  g_autoptr(GArray) tail = g_array_new(FALSE, FALSE, sizeof(CalibGemmShape));
  g_array_append_vals(tail, &g_array_index(shapes, CalibGemmShape, 12), 10);
  assert_shapes(tail, llama, G_N_ELEMENTS(llama));
  int uses = 0;
  for (guint i = 0; i < shapes->len; i++)
    uses += g_array_index(shapes, CalibGemmShape, i).uses;
  ck_assert_int_eq(uses, 48); /* 8 linears x 3 passes x 2 models */

  /* Explicit shapes: forward layout, named by the text, each once. */
  ck_assert(calib_shapes_parse_list(shapes, " 8x16x32 ,4096x4096x4096, 8x16x32", &error));
  ck_assert_uint_eq(shapes->len, 23);
  const CalibGemmShape *last = &g_array_index(shapes, CalibGemmShape, 22);
  ck_assert_str_eq(last->name, "8x16x32");
  ck_assert_int_eq(last->uses, 2);
  ck_assert_int_eq(g_array_index(shapes, CalibGemmShape, 12).uses, 7);
}
END_TEST

START_TEST(gemm_shapes_refuse_bad_text)
{
  const struct {
    const char *text, *message;
  } models[] = {
    { "4096,14336", "expected [NAME=]HIDDEN,FFN,HEADS,KV_HEADS,HEAD_DIM,VOCAB,TOKENS (seven whole numbers), 2 given, "
                    "got '4096,14336'" },
    { "4096,14336,32,8,128,128256,abc", "TOKENS must be a whole number from 1 to 1048576, got '4096,14336,32,8,128,"
                                        "128256,abc'" },
    { "4096,0,32,8,128,128256,4096", "FFN must be a whole number from 1 to 1048576" },
    { "4096,14336,32,8,128,128256,-4", "TOKENS must be a whole number" },
    { "4096,14336,8,32,128,128256,4096", "KV_HEADS (32) at most HEADS (8)" },
    { "bad name=4096,14336,32,8,128,128256,4096", "with NAME of 1 to 23 letters, digits, '.', '_' or '-'" },
    { "=4096,14336,32,8,128,128256,4096", "with NAME of 1 to 23" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(models); i++) {
    CalibModelDims d;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(!calib_shapes_parse_model(models[i].text, &d, &error), "%s parsed", models[i].text);
    ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
    assert_has(error->message, models[i].message);
  }
  /* Dimensions that parse but make an operand too large for the buffers. */
  CalibModelDims d;
  g_autoptr(GError) error = NULL;
  ck_assert(calib_shapes_parse_model("big=65536,14336,512,8,128,1000000,1000000", &d, &error));
  g_autoptr(GArray) shapes = g_array_new(FALSE, FALSE, sizeof(CalibGemmShape));
  ck_assert(!calib_shapes_add_model(shapes, &d, &error));
  assert_has(error->message, "big: q (65536 -> 65536 over 1000000 tokens): an operand over 2^31 elements");
  ck_assert_uint_eq(shapes->len, 0);

  const struct {
    const char *text, *message;
  } lists[] = {
    { "4096x4096", "item 1: expected MxNxK, three whole numbers from 1 to 1048576 such as 4096x4096x4096, got "
                   "'4096x4096'" },
    { "8x8x8, 0x1x1", "item 2: expected MxNxK" },
    { "8x8x8,", "item 2: expected MxNxK, three whole numbers from 1 to 1048576 such as 4096x4096x4096, got ''" },
    { "8X8X8", "item 1: expected MxNxK" },
    { "1048576x1048576x1", "item 1: an operand of at most 2^31 elements, got '1048576x1048576x1'" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(lists); i++) {
    g_clear_error(&error);
    ck_assert_msg(!calib_shapes_parse_list(shapes, lists[i].text, &error), "%s parsed", lists[i].text);
    assert_has(error->message, lists[i].message);
    ck_assert_uint_eq(shapes->len, 0); /* nothing added on an error */
  }
}
END_TEST

START_TEST(gemm_throughput_from_shape_and_seconds)
{
  /* 2 x 4096^3 = 137438953472 FLOPs in 0.2 ms: 687.19476736 TFLOP/s. */
  ck_assert_double_eq(calib_gemm_flops(4096, 4096, 4096), 137438953472.0);
  assert_rel(calib_gemm_tflops(4096, 4096, 4096, 0.2e-3), 687.19476736, 1e-12);
  /* Qwen's LM head forward, 2 x 1024 x 151936 x 896 = 278803775488 FLOPs, in 1 ms. */
  assert_rel(calib_gemm_tflops(1024, 151936, 896, 1e-3), 278.803775488, 1e-12);
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

/* The synthetic profile with the kernel cost model's figures. */
static CalibProfile *
kernel_profile(CalibKeyForm form)
{
  CalibProfile *p = synthetic_profile();
  p->kernel_keys = form;
  p->matmul_tflops_dtype[CALIB_DTYPE_BF16] = 650.5;
  p->matmul_tflops_dtype[CALIB_DTYPE_FP32] = 51.25;
  p->sm_count = 132;
  p->launch_overhead = 4.2e-6;
  calib_profile_note(p, "device.launch_overhead", "host time per launch");
  calib_profile_add_gemm(p, CALIB_DTYPE_BF16, 4096, 4096, 4096, 650.5);
  calib_profile_add_gemm(p, CALIB_DTYPE_BF16, 1024, 4096, 4096, 590.123456789123);
  calib_profile_add_gemm(p, CALIB_DTYPE_FP32, 4096, 4096, 4096, 51.25);
  return p;
}

/* The text of `p` from its start to [link]. */
static char *
device_text(const CalibProfile *p)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *text = calib_profile_format(p, &error);
  ck_assert_msg(text != NULL, "%s", error ? error->message : "");
  char *link = strstr(text, "\n[link]\n");
  ck_assert_ptr_nonnull(link);
  return g_strndup(text, (gsize)(link - text) + 1);
}

#define DEVICE_HEAD                                                                                        \
  "# Synthetic GPU, made by tests/test_calib.c.\n# Not a measurement.\n[device]\nmemory = 150754820096B\n"     \
  "# [device] efficiency is not set here: it is the fraction of matmul_tflops that a whole\n"                  \
  "# model's matmuls reach (smaller and odd shapes, launch gaps), a property of the model\n"                   \
  "# and its kernels; scenarios set it (default 0.5).\n"                                                       \
  "matmul_tflops = 701.234567891\nhbm_bandwidth = 4.123456789TB/s\n"
#define GEMM_TABLE                                                                                         \
  "gemm_table = bf16:4096x4096x4096:650.5TFLOPS, bf16:1024x4096x4096:590.123456789TFLOPS, "                    \
  "fp32:4096x4096x4096:51.25TFLOPS\n"

START_TEST(gemm_table_items_are_formatted)
{
  CalibGemmPoint a = { CALIB_DTYPE_BF16, 4096, 4096, 4096, 650 };
  CalibGemmPoint b = { CALIB_DTYPE_FP16, 1024, 4096, 4096, 590.123456789123 };
  CalibGemmPoint c = { CALIB_DTYPE_FP32, 128256, 4096, 4096, 0.5 };
  g_autofree char *ta = calib_format_gemm_point(&a), *tb = calib_format_gemm_point(&b);
  g_autofree char *tc = calib_format_gemm_point(&c);
  ck_assert_str_eq(ta, "bf16:4096x4096x4096:650TFLOPS");
  ck_assert_str_eq(tb, "fp16:1024x4096x4096:590.123456789TFLOPS");
  ck_assert_str_eq(tc, "fp32:128256x4096x4096:0.5TFLOPS");
}
END_TEST

START_TEST(the_kernel_model_keys_are_written_as_keys_or_comments)
{
  /* As keys, for a loader that reads them; fp16 is 0: not written. */
  g_autoptr(CalibProfile) active = kernel_profile(CALIB_KEYS_ACTIVE);
  g_autofree char *keys = device_text(active);
  ck_assert_str_eq(keys, DEVICE_HEAD "matmul_tflops_bf16 = 650.5\nmatmul_tflops_fp32 = 51.25\nsm_count = 132\n"
                         "# host time per launch\nlaunch_overhead = 4.2us\n" GEMM_TABLE "\n");
  /* As comments, under one line that says why. */
  g_autoptr(CalibProfile) commented = kernel_profile(CALIB_KEYS_COMMENTED);
  g_autofree char *comments = device_text(commented);
  ck_assert_str_eq(comments,
                   DEVICE_HEAD "# The kernel cost model's keys (sim/engine/kernel.h) that this offsim's scenario "
                   "loader does\n# not read yet follow as comments, `# key = value`: uncomment them for an offsim "
                   "that reads\n# them (offsim-calib built with one writes them as keys).\n"
                   "# matmul_tflops_bf16 = 650.5\n# matmul_tflops_fp32 = 51.25\n# sm_count = 132\n"
                   "# host time per launch\n# launch_overhead = 4.2us\n# " GEMM_TABLE "\n");
  /* By default each key as this build's loader takes it, and the profile loads. */
  g_autoptr(CalibProfile) p = kernel_profile(CALIB_KEYS_AUTO);
  g_autofree char *text = device_text(p);
  const char *names[] = { "matmul_tflops_bf16", "matmul_tflops_fp32", "sm_count", "launch_overhead", "gemm_table" };
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    gboolean read = sim_schema_find(SIM_GROUP_DEVICE, names[i], SIM_SCHEMA_ANY_KIND) != SIM_KEY_COUNT;
    g_autofree char *line = g_strdup_printf("\n%s%s = ", read ? "" : "# ", names[i]);
    assert_has(text, line);
  }
  SimMachine m;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(calib_profile_verify(p, &m, &error), "%s", error ? error->message : "");
}
END_TEST

START_TEST(the_writer_refuses_bad_kernel_model_values)
{
  const char *messages[] = {
    "profile: [device] gemm_table: item 4: bf16 4096x4096x4096 is item 1 already",
    "profile: [device] gemm_table: item 4: expected positive sizes and a positive, finite rate, got 0x8x8 at 1",
    "profile: [device] matmul_tflops_fp16: expected a positive, finite value (or 0: not written), got -1",
    "profile: [device] launch_overhead: expected a time in [0, 1s], got 2 s",
  };
  for (guint i = 0; i < G_N_ELEMENTS(messages); i++) {
    g_autoptr(CalibProfile) p = kernel_profile(CALIB_KEYS_AUTO);
    if (i == 0)
      calib_profile_add_gemm(p, CALIB_DTYPE_BF16, 4096, 4096, 4096, 600);
    else if (i == 1)
      calib_profile_add_gemm(p, CALIB_DTYPE_BF16, 0, 8, 8, 1);
    else if (i == 2)
      p->matmul_tflops_dtype[CALIB_DTYPE_FP16] = -1;
    else
      p->launch_overhead = 2;
    g_autoptr(GError) error = NULL;
    g_autofree char *text = calib_profile_format(p, &error);
    ck_assert_ptr_null(text);
    assert_has(error->message, messages[i]);
  }
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
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1048576, SIM_HOST_PINNED), ALPHA + mib / BETA_H2D, 1e-9);
  assert_rel(sim_link_copy_time(l, SIM_DIR_D2H, GIB, SIM_HOST_PINNED), ALPHA + (double)GIB / BETA_D2H, 1e-9);
  /* Between two sizes: linear in bytes, so 1.5 MiB takes the mean of 1 and 2 MiB. */
  double t1 = ALPHA + mib / BETA_H2D, t2 = ALPHA + 2 * mib / BETA_H2D;
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1572864, SIM_HOST_PINNED), 0.5 * (t1 + t2), 1e-9);
  /* Past 1 GiB: its time plus the rest at its bandwidth. */
  double t_gib = ALPHA + (double)GIB / BETA_H2D;
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 2 * GIB, SIM_HOST_PINNED), 2 * t_gib, 1e-9);
  /* Under 4 KiB: scaled from the smallest point, floored at the latency. */
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1024, SIM_HOST_PINNED), ALPHA, 1e-9);
  /* Pageable: the part above the latency at pageable_factor. */
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1048576, SIM_HOST_PAGEABLE), ALPHA + (mib / BETA_H2D) / 0.4321987654, 1e-9);
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
    { "bad-negative-rate.ini", "h2d_table", "point 2: expected a positive rate, got" },
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
  /* The GEMM list is checked before any device is looked for. */
  g_auto(TestRun) shapes = run_calib(OFFSIM_CALIB_BINARY, NULL, "--gemm-shapes", "8x8", NULL);
  ck_assert_int_eq(shapes.status, 2);
  assert_has(shapes.err, "offsim-calib: --gemm-shapes: item 1: expected MxNxK");
}
END_TEST
#endif

#ifdef OFFSIM_CALIB_MOCK
/* "KEY = VALUE" of the kernel cost model in `text`, written as a key or
 * as a comment, whichever this build's loader takes; the value's text. */
static char *
kernel_value(const char *text, const char *key)
{
  gboolean read = sim_schema_find(SIM_GROUP_DEVICE, key, SIM_SCHEMA_ANY_KIND) != SIM_KEY_COUNT;
  g_autofree char *start = g_strdup_printf("\n%s%s = ", read ? "" : "# ", key);
  const char *at = strstr(text, start);
  ck_assert_msg(at != NULL, "no \"%s\" in the profile", start + 1);
  at += strlen(start);
  return g_strndup(at, strcspn(at, "\n"));
}

/* What calib_host_code_recovers_the_mock_link's run (--gemm-model
 * qwen2.5-0.5b, --gemm-shapes 8192x8192x8192, --launches 400) printed
 * (`err`) and wrote (`text`): Qwen2.5-0.5B's 12 shapes and one more, bf16
 * and fp32, where the mock's GEMMs run at most 700 and 55 TFLOP/s, less
 * when small. */
static void
assert_mock_kernel_model(const char *err, const char *text)
{
  assert_has(err, "the GEMM list (13 shapes) through cuBLAS:");
  assert_has(err, "\nkernel model, as written to [device]:\n  sm_count 132, launch_overhead ");
  assert_has(err, "  qwen2.5-0.5b lm_head.wgrad   wgrad    1        151936x896x1024");
  assert_has(err, "     50 launches: ");

  g_autofree char *sms = kernel_value(text, "sm_count");
  ck_assert_str_eq(sms, "132");
  g_autofree char *bf16 = kernel_value(text, "matmul_tflops_bf16"), *fp32 = kernel_value(text, "matmul_tflops_fp32");
  g_autofree char *fp16 = kernel_value(text, "matmul_tflops_fp16");
  assert_rel(g_ascii_strtod(bf16, NULL), 700, 0.02);
  assert_rel(g_ascii_strtod(fp16, NULL), 700, 0.02);
  assert_rel(g_ascii_strtod(fp32, NULL), 55, 0.02);
  /* The stand-in's launch busy-waits 2 us on the host; the machine may add. */
  g_autofree char *launch = kernel_value(text, "launch_overhead");
  double seconds = 0;
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sim_units_parse_time(launch, &seconds, &error), "%s", error ? error->message : "");
  ck_assert_msg(seconds >= 1.5e-6 && seconds < 50e-6, "launch_overhead = %s", launch);
  assert_has(text, "lower bound: eager PyTorch adds its dispatcher's cost per op on top\n");

  /* The table: 13 bf16 items, then 13 fp32, in the list's order. */
  g_autofree char *table = kernel_value(text, "gemm_table");
  g_auto(GStrv) items = g_strsplit(table, ", ", -1);
  ck_assert_uint_eq(g_strv_length(items), 26);
  ck_assert(g_str_has_prefix(items[0], "bf16:1024x896x896:"));
  ck_assert(g_str_has_prefix(items[4], "bf16:1024x151936x896:"));
  ck_assert(g_str_has_prefix(items[12], "bf16:8192x8192x8192:"));
  ck_assert(g_str_has_prefix(items[13], "fp32:1024x896x896:"));
  ck_assert(g_str_has_prefix(items[25], "fp32:8192x8192x8192:"));
  for (guint i = 0; items[i]; i++)
    ck_assert_msg(g_str_has_suffix(items[i], "TFLOPS"), "item %s", items[i]);
  /* 8192^3 in bf16: the mock's peak. */
  assert_rel(g_ascii_strtod(strrchr(items[12], ':') + 1, NULL), 700, 0.02);
  assert_has(text, "\ngemm_list_bf16 = qwen2.5-0.5b q.fwd 1024x896x896 fwd x4: ");
  assert_has(text, "\nlaunches_ms = 50:");
  assert_has(text, "\ncopy_kernel = 256 MiB at ");
}

/* The mock's model (gpu_calib/calib_mock.c): alpha 7 us H2D and 9 us D2H,
 * beta 53 and 51 GB/s, pageable at 0.4, 4 TB/s device memory, 700 TFLOP/s
 * bf16, 1% noise. */
START_TEST(calib_host_code_recovers_the_mock_link)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *out = g_build_filename(dir, "profile.ini", NULL);
  g_auto(TestRun) r =
    run_calib(OFFSIM_CALIB_MOCK, NULL, "--quick", "--out", out, "--gemm-model", "qwen2.5-0.5b=896,4864,14,2,64,151936,1024",
              "--gemm-shapes", "8192x8192x8192", "--launches", "400", NULL);
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
  assert_rel(sim_link_copy_time(l, SIM_DIR_H2D, 1048576, SIM_HOST_PINNED), alpha + mib / beta, 0.02);
  const SimDevice *d = &s->machine.device;
  ck_assert_uint_eq(d->memory, G_GUINT64_CONSTANT(141000000000));
  /* The copy kernel, at 0.95 of the mock's 4 TB/s. */
  assert_rel(d->hbm_bandwidth, 3.8e12, 0.02);
  assert_rel(d->matmul_flops, 700e12, 0.02);

  g_autofree char *text = NULL;
  ck_assert(g_file_get_contents(out, &text, NULL, NULL));
  /* Labelled as the stand-in's output, never as a measurement. */
  assert_has(text, "# Mock GPU (calib_mock.c, not a measurement): MOCK OUTPUT of offsim-calib --quick over "
                   "calib_mock.c's stand-in CUDA runtime on ");
  ck_assert_ptr_null(strstr(text, "measured by"));
  assert_has(text, "\n[calibration]\ntool = offsim-calib --quick (MOCK OUTPUT: calib_mock.c's stand-in runtime, "
                   "not a measurement)\n");
  assert_has(text, "\nh2d_pinned_us = 4096:");
  assert_has(text, "\npcie_max = not reported (no sysfs entry)\n");
  assert_has(text, "\ngemm_bf16 = qkv 8192x6144x4096: ");
  assert_mock_kernel_model(r.err, text);
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(calib_rejects_bad_gemm_and_launch_options)
{
  const struct {
    const char *option, *value, *message;
  } cases[] = {
    { "--gemm-model", "4096,14336,32", "offsim-calib: --gemm-model: expected [NAME=]HIDDEN,FFN,HEADS,KV_HEADS,"
                                       "HEAD_DIM,VOCAB,TOKENS (seven whole numbers), 3 given, got '4096,14336,32'\n" },
    { "--gemm-model", "l=4096,14336,32,64,128,128256,4096", "offsim-calib: --gemm-model: expected [NAME=]HIDDEN,"
                                                            "FFN,HEADS,KV_HEADS,HEAD_DIM,VOCAB,TOKENS: KV_HEADS (64) "
                                                            "at most HEADS (32), got 'l=4096,14336,32,64,128,128256,"
                                                            "4096'\n" },
    { "--gemm-shapes", "4096x4096x4096,4096x0x1", "offsim-calib: --gemm-shapes: item 2: expected MxNxK, three "
                                                  "whole numbers from 1 to 1048576 such as 4096x4096x4096, got "
                                                  "'4096x0x1'\n" },
    { "--launches", "10", "offsim-calib: --launches: expected a whole number from 80 to 100000, got 10\n" },
    { "--launches", "many", "offsim-calib: Cannot parse integer value" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_auto(TestRun) r = run_calib(OFFSIM_CALIB_MOCK, NULL, "--quick", cases[i].option, cases[i].value, NULL);
    ck_assert_msg(r.status == 2, "%s %s: exit %d: %s", cases[i].option, cases[i].value, r.status, r.err);
    assert_has(r.err, cases[i].message);
    ck_assert_str_eq(r.out, "");
  }
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
  tcase_add_test(fit, line_fit_against_hand_numbers);
  suite_add_tcase(s, fit);

  TCase *shapes = tcase_create("shapes");
  tcase_add_test(shapes, gemm_shapes_of_a_model_by_hand);
  tcase_add_test(shapes, gemm_shapes_refuse_bad_text);
  tcase_add_test(shapes, gemm_throughput_from_shape_and_seconds);
  suite_add_tcase(s, shapes);

  TCase *profile = tcase_create("profile");
  tcase_add_test(profile, numbers_are_written_as_the_loader_reads_them);
  tcase_add_test(profile, the_writer_output_is_pinned_by_a_fixture);
  tcase_add_test(profile, gemm_table_items_are_formatted);
  tcase_add_test(profile, the_kernel_model_keys_are_written_as_keys_or_comments);
  tcase_add_test(profile, the_writer_refuses_bad_kernel_model_values);
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
  tcase_add_test(program, calib_rejects_bad_gemm_and_launch_options);
#endif
  suite_add_tcase(s, program);
  return s;
}

int
main(void)
{
  return test_run_suite(calib_suite());
}
