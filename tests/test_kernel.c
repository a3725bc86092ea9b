/* The kernel cost model (sim/engine/kernel.h) against hand derivations:
 * tiles and waves, the memory bound, the flat model, attention's FLOP
 * count, the measured table, every error path, and the bundled profiles. */
#include "testutil.h"

#include "base/error.h"
#include "engine/kernel.h"

#include <math.h>
#include <string.h>

/* An H100 SXM as the kernel model sees it: 132 SMs, 128x256 tiles, 792.1
 * TFLOPS bf16 (mamf-finder), 3.35 TB/s. */
static SimDevice
h100(void)
{
  SimDevice d = { .memory = 80ull << 30, .matmul_flops = 795e12, .efficiency = 0.5, .hbm_bandwidth = 3.35e12 };
  d.dtype_flops[SIM_DTYPE_BF16] = 792.1e12;
  d.sm_count = 132;
  d.gemm_tile_m = 128;
  d.gemm_tile_n = 256;
  d.attention_flops = 648e12;
  d.attention_backward_flops = 561e12;
  return d;
}

static SimKernel
gemm(guint64 m, guint64 n, guint64 k)
{
  return (SimKernel){ .kclass = SIM_KERNEL_GEMM, .dtype = SIM_DTYPE_BF16, .m = m, .n = n, .k = k, .batch = 1 };
}

static double
time_of(const SimDevice *d, SimKernel k)
{
  g_autoptr(GError) error = NULL;
  double s = -1;
  ck_assert_msg(sim_kernel_time(d, &k, &s, &error), "%s", error ? error->message : "?");
  return s;
}

/* The message of the error timing `k` on `d` gives. */
static char *
error_of(const SimDevice *d, SimKernel k)
{
  g_autoptr(GError) error = NULL;
  double s = -1;
  ck_assert(!sim_kernel_time(d, &k, &s, &error));
  ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
  return g_strdup(error->message);
}

#define assert_near(a, b) ck_assert_msg(fabs((a) - (b)) <= 1e-12 * fabs(b), "%.17g != %.17g", (a), (b))

START_TEST(gemm_4096_cube_is_four_waves)
{
  SimDevice d = h100();
  ck_assert_uint_eq(sim_device_time_model(&d), SIM_TIME_KERNEL);
  /* 4096/128 x 4096/256 = 32 x 16 = 512 tiles; ceil(512 / 132) = 4 waves. */
  double want = 4 * (2.0 * 128 * 256 * 4096) / (792.1e12 / 132);
  assert_near(time_of(&d, gemm(4096, 4096, 4096)), want);
}
END_TEST

START_TEST(gemm_one_tile_over_the_sms_costs_a_wave)
{
  SimDevice d = h100();
  /* 133 tiles (m = 133 x 128, one column of tiles): 2 waves, the second one tile. */
  double want = 2 * (2.0 * 128 * 256 * 4096) / (792.1e12 / 132);
  assert_near(time_of(&d, gemm(133 * 128, 256, 4096)), want);
  /* 132 tiles: one wave. */
  assert_near(time_of(&d, gemm(132 * 128, 256, 4096)), want / 2);
  /* A partial tile costs a whole one: m = 129 is two rows of tiles. */
  assert_near(time_of(&d, gemm(129, 256, 4096)), time_of(&d, gemm(256, 256, 4096)));
}
END_TEST

START_TEST(gemm_batch_multiplies_the_tiles)
{
  SimDevice d = h100();
  /* 8 x (1 x 1) tiles of 128x256, k = 128: one wave, unless memory wins. */
  SimKernel k = gemm(128, 256, 128);
  k.batch = 8;
  double compute = (2.0 * 128 * 256 * 128) / (792.1e12 / 132);
  double memory = 8.0 * (128 * 128 + 128 * 256 + 128 * 256) * 2 / 3.35e12;
  assert_near(time_of(&d, k), MAX(compute, memory));
}
END_TEST

START_TEST(gemm_small_m_is_memory_bound)
{
  SimDevice d = h100();
  /* m = 16 (a decode-like projection), n = k = 8192: 1 x 32 tiles, one wave:
   * 2*128*256*8192 / 6.0e12 = 89.5 us of compute against
   * (16*8192 + 8192*8192 + 16*8192) * 2 B / 3.35 TB/s = 40.2 us of traffic.
   * Compute wins here (tile quantization: 16 of 128 rows used). */
  double compute = (2.0 * 128 * 256 * 8192) / (792.1e12 / 132);
  double memory = (16.0 * 8192 + 8192.0 * 8192 + 16.0 * 8192) * 2 / 3.35e12;
  ck_assert(compute > memory);
  assert_near(time_of(&d, gemm(16, 8192, 8192)), compute);
  /* k = 64: each tile's work is tiny, the 8192 x 8192 output dominates the
   * traffic: 64 x 32 = 2048 tiles, 16 waves, 16 * 2*128*256*64 / 6.0e12 =
   * 5.6 us against (8192*64*2 + 8192*8192) * 2 / 3.35e12 = 40.7 us. */
  compute = 16 * (2.0 * 128 * 256 * 64) / (792.1e12 / 132);
  memory = (8192.0 * 64 + 64.0 * 8192 + 8192.0 * 8192) * 2 / 3.35e12;
  ck_assert(memory > compute);
  assert_near(time_of(&d, gemm(8192, 8192, 64)), memory);
  /* m = 16, n = 65536, k = 4096 (a wide projection of a few rows): 256
   * tiles, 2 waves, 2 * 2*128*256*4096 / 6.0e12 = 89.5 us against the
   * 4096 x 65536 weight's traffic, (16*4096 + 4096*65536 + 16*65536) * 2 /
   * 3.35e12 = 160.9 us: memory wins. */
  compute = 2 * (2.0 * 128 * 256 * 4096) / (792.1e12 / 132);
  memory = (16.0 * 4096 + 4096.0 * 65536 + 16.0 * 65536) * 2 / 3.35e12;
  ck_assert(memory > compute);
  assert_near(time_of(&d, gemm(16, 65536, 4096)), memory);
}
END_TEST

START_TEST(flat_model_is_flops_over_matmul_times_efficiency)
{
  SimDevice d = { .matmul_flops = 312e12, .efficiency = 0.5, .hbm_bandwidth = 2e12 };
  ck_assert_uint_eq(sim_device_time_model(&d), SIM_TIME_FLAT);
  assert_near(time_of(&d, gemm(1000, 3000, 7)), 2.0 * 1000 * 3000 * 7 / (312e12 * 0.5));
  SimKernel a = { .kclass = SIM_KERNEL_ATTENTION, .dtype = SIM_DTYPE_BF16, .a_batch = 2, .heads = 8, .kv_heads = 2,
                  .q_len = 512, .kv_len = 512, .head_dim = 64, .causal = TRUE };
  assert_near(time_of(&d, a), sim_kernel_flops(&a) / (312e12 * 0.5));
  SimKernel m = { .kclass = SIM_KERNEL_MEMORY, .read = 3000, .written = 1000 };
  assert_near(time_of(&d, m), 4000 / 2e12);
  /* sm_count alone, without a matmul rate, leaves the device flat. */
  d.sm_count = 108;
  ck_assert_uint_eq(sim_device_time_model(&d), SIM_TIME_FLAT);
}
END_TEST

START_TEST(attention_flops_causal_halves_backward_is_two_and_a_half)
{
  SimKernel a = { .kclass = SIM_KERNEL_ATTENTION, .dtype = SIM_DTYPE_BF16, .a_batch = 4, .heads = 32, .kv_heads = 8,
                  .q_len = 4096, .kv_len = 4096, .head_dim = 128 };
  double full = 4.0 * 4 * 32 * 4096 * 4096 * 128;
  assert_near(sim_kernel_flops(&a), full);
  a.causal = TRUE;
  assert_near(sim_kernel_flops(&a), full / 2);
  a.backward = TRUE;
  assert_near(sim_kernel_flops(&a), full / 2 * 2.5);
  SimKernel m = { .kclass = SIM_KERNEL_MEMORY, .read = 10, .written = 10 };
  ck_assert(sim_kernel_flops(&m) == 0);
}
END_TEST

START_TEST(attention_kernel_model)
{
  SimDevice d = h100();
  SimKernel a = { .kclass = SIM_KERNEL_ATTENTION, .dtype = SIM_DTYPE_BF16, .a_batch = 4, .heads = 32, .kv_heads = 8,
                  .q_len = 4096, .kv_len = 4096, .head_dim = 128, .causal = TRUE };
  assert_near(time_of(&d, a), sim_kernel_flops(&a) / 648e12);
  a.backward = TRUE;
  assert_near(time_of(&d, a), sim_kernel_flops(&a) / 561e12);
  /* A one-token query against a long cache reads far more than it computes:
   * q and o 4*32*1*128, k and v 4*8*4096*128 elements each, 2 bytes. */
  SimKernel decode = a;
  decode.backward = decode.causal = FALSE;
  decode.q_len = 1;
  double bytes = 2.0 * (2 * 4.0 * 32 * 1 * 128 + 2 * 4.0 * 8 * 4096 * 128);
  assert_near(time_of(&d, decode), bytes / 3.35e12);
  /* fp32 attention runs at the fp32 matmul rate. */
  d.dtype_flops[SIM_DTYPE_FP32] = 67e12;
  a.dtype = SIM_DTYPE_FP32;
  assert_near(time_of(&d, a), sim_kernel_flops(&a) / 67e12);
}
END_TEST

START_TEST(memory_kernel_is_bytes_over_bandwidth)
{
  SimDevice d = h100();
  SimKernel m = { .kclass = SIM_KERNEL_MEMORY, .read = 1u << 30, .written = 1u << 29 };
  assert_near(time_of(&d, m), (double)(3u << 29) / 3.35e12);
}
END_TEST

START_TEST(table_at_a_point_and_between_points)
{
  SimDevice d = h100();
  d.gemm_table[0] = (SimGemmPoint){ SIM_DTYPE_BF16, 1024, 4096, 4096, 590e12 };
  d.gemm_table[1] = (SimGemmPoint){ SIM_DTYPE_BF16, 4096, 4096, 4096, 650e12 };
  d.gemm_points = 2;
  /* At a measured shape: its rate. */
  assert_near(time_of(&d, gemm(4096, 4096, 4096)), 2.0 * 4096 * 4096 * 4096 / 650e12);
  assert_near(time_of(&d, gemm(1024, 4096, 4096)), 2.0 * 1024 * 4096 * 4096 / 590e12);
  /* m = 2048 is one doubling from each: equal weights, the mean rate. */
  assert_near(time_of(&d, gemm(2048, 4096, 4096)), 2.0 * 2048 * 4096 * 4096 / 620e12);
  /* m = 1448 ~ 2^10.5: about 0.5 doublings from 1024 and 1.5 from 4096,
   * weights 1 / distance^2, about 4 and 4/9. */
  double dm = log2(1448.0 / 1024), dn = log2(1448.0 / 4096);
  double rate = (590e12 / (dm * dm) + 650e12 / (dn * dn)) / (1 / (dm * dm) + 1 / (dn * dn));
  assert_near(time_of(&d, gemm(1448, 4096, 4096)), 2.0 * 1448 * 4096 * 4096 / rate);
  /* No fp16 point: the fp16 GEMM falls back to the tile model, which needs its rate. */
  SimKernel h = gemm(4096, 4096, 4096);
  h.dtype = SIM_DTYPE_FP16;
  g_autofree char *msg = error_of(&d, h);
  ck_assert_msg(strstr(msg, "[device] matmul_tflops_fp16") != NULL, "%s", msg);
  d.dtype_flops[SIM_DTYPE_FP16] = 792.1e12;
  assert_near(time_of(&d, h), 4 * (2.0 * 128 * 256 * 4096) / (792.1e12 / 132));
}
END_TEST

START_TEST(errors_name_the_key)
{
  SimDevice d = h100();
  SimKernel f = gemm(4096, 4096, 4096);
  f.dtype = SIM_DTYPE_FP32;
  g_autofree char *fp32 = error_of(&d, f);
  ck_assert_msg(strstr(fp32, "[device] matmul_tflops_fp32") != NULL, "%s", fp32);
  g_autofree char *zero = error_of(&d, gemm(0, 4096, 4096));
  ck_assert_msg(strstr(zero, "dimension of 0") != NULL, "%s", zero);
  SimKernel a = { .kclass = SIM_KERNEL_ATTENTION, .dtype = SIM_DTYPE_BF16, .a_batch = 1, .heads = 1, .kv_heads = 1,
                  .q_len = 1, .kv_len = 0, .head_dim = 64 };
  g_autofree char *zero_attn = error_of(&d, a);
  ck_assert_msg(strstr(zero_attn, "dimension of 0") != NULL, "%s", zero_attn);
  a.kv_len = 16;
  a.backward = TRUE;
  d.attention_backward_flops = 0;
  g_autofree char *bwd = error_of(&d, a);
  ck_assert_msg(strstr(bwd, "[device] attention_backward_tflops") != NULL, "%s", bwd);
  a.dtype = SIM_DTYPE_FP32;
  g_autofree char *fp32_attn = error_of(&d, a);
  ck_assert_msg(strstr(fp32_attn, "[device] matmul_tflops_fp32") != NULL, "%s", fp32_attn);
  SimKernel bad = gemm(1, 1, 1);
  bad.dtype = SIM_DTYPE_COUNT;
  g_autofree char *dtype = error_of(&d, bad);
  ck_assert_msg(strstr(dtype, "unknown dtype") != NULL, "%s", dtype);
  bad = gemm(1, 1, 1);
  bad.kclass = SIM_KERNEL_CLASSES;
  g_autofree char *kclass = error_of(&d, bad);
  ck_assert_msg(strstr(kclass, "unknown kernel class") != NULL, "%s", kclass);
  d.gemm_tile_m = 0;
  g_autofree char *tile = error_of(&d, gemm(64, 64, 64));
  ck_assert_msg(strstr(tile, "[device] gemm_tile") != NULL, "%s", tile);
  SimDevice flat = { .efficiency = 0.5 };
  g_autofree char *mm = error_of(&flat, gemm(64, 64, 64));
  ck_assert_msg(strstr(mm, "[device] matmul_tflops") != NULL, "%s", mm);
  SimKernel m = { .kclass = SIM_KERNEL_MEMORY, .read = 1 };
  g_autofree char *hbm = error_of(&flat, m);
  ck_assert_msg(strstr(hbm, "[device] hbm_bandwidth") != NULL, "%s", hbm);
}
END_TEST

static const char base[] = "[device]\nmemory = 80GiB\n"
                           "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n"
                           "[model]\nlayers = 2\nforward = 1ms\ninput = 1MiB\ntensors = a:1MiB\n";

START_TEST(scenario_reads_the_kernel_keys)
{
  g_autofree char *text = test_ini_merge(
    base, "[device]\nmatmul_tflops_bf16 = 794.5\nmatmul_tflops_fp32 = 67\nsm_count = 132\ngemm_tile = 128x256\n"
          "attention_tflops = 648\nattention_backward_tflops = 561\nlaunch_overhead = 5us\n"
          "gemm_table = bf16:4096x4096x4096:650TFLOPS, fp16:1024x4096x4096:590.5TFLOPS\n");
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  const SimDevice *d = &s->machine.device;
  ck_assert_uint_eq(sim_device_time_model(d), SIM_TIME_KERNEL);
  ck_assert(d->dtype_flops[SIM_DTYPE_BF16] == 794.5e12);
  ck_assert(d->dtype_flops[SIM_DTYPE_FP16] == 0);
  ck_assert(d->dtype_flops[SIM_DTYPE_FP32] == 67e12);
  ck_assert_uint_eq(d->sm_count, 132);
  ck_assert_uint_eq(d->gemm_tile_m, 128);
  ck_assert_uint_eq(d->gemm_tile_n, 256);
  ck_assert(d->attention_flops == 648e12 && d->attention_backward_flops == 561e12);
  assert_near(d->launch_overhead, 5e-6);
  ck_assert_uint_eq(d->gemm_points, 2);
  ck_assert_uint_eq(d->gemm_table[1].dtype, SIM_DTYPE_FP16);
  ck_assert(d->gemm_table[1].m == 1024 && d->gemm_table[1].n == 4096 && d->gemm_table[1].k == 4096);
  assert_near(d->gemm_table[1].flops, 590.5e12);
}
END_TEST

START_TEST(scenario_refuses_bad_kernel_keys)
{
  static const struct {
    const char *overrides, *want;
  } cases[] = {
    { "[device]\ngemm_table = bf16:4096x4096:650TFLOPS\n", "test.ini: [device] gemm_table: point 1: expected DTYPE:MxNxK:RATE" },
    { "[device]\ngemm_table = bf16:1x1x1:1TFLOPS, tf32:4096x4096x4096:650TFLOPS\n", "[device] gemm_table: point 2:" },
    { "[device]\ngemm_table = bf16:0x1x1:1TFLOPS\n", "[device] gemm_table: point 1:" },
    { "[device]\ngemm_table = bf16:1x1x1:650GB/s\n", "got 'bf16:1x1x1:650GB/s'" },
    { "[device]\ngemm_table = bf16:1x1x1:-5TFLOPS\n", "[device] gemm_table: point 1:" },
    { "[device]\ngemm_tile = 128\n", "test.ini: [device] gemm_tile: expected an output tile MxN" },
    { "[device]\ngemm_tile = 0x256\n", "[device] gemm_tile:" },
    { "[device]\nsm_count = 0\n", "[device] sm_count:" },
    { "[device]\nmatmul_tflops_fp32 = 0\n", "[device] matmul_tflops_fp32:" },
    { "[device]\nlaunch_overhead = fast\n", "[device] launch_overhead:" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *text = test_ini_merge(base, cases[i].overrides);
    g_autofree char *msg = test_scenario_error(text);
    ck_assert_msg(strstr(msg, cases[i].want) != NULL, "case %u: '%s' lacks '%s'", i, msg, cases[i].want);
  }
  /* More than SIM_DEVICE_MAX_GEMM_POINTS points. */
  GString *table = g_string_new("[device]\ngemm_table = ");
  for (guint i = 0; i <= SIM_DEVICE_MAX_GEMM_POINTS; i++)
    g_string_append_printf(table, "%sbf16:%ux64x64:100TFLOPS", i ? ", " : "", i + 1);
  g_string_append_c(table, '\n');
  g_autofree char *overrides = g_string_free(table, FALSE);
  g_autofree char *text = test_ini_merge(base, overrides);
  g_autofree char *msg = test_scenario_error(text);
  ck_assert_msg(strstr(msg, "at most 128 points") != NULL, "%s", msg);
}
END_TEST

/* Every bundled profile that carries kernel figures runs the kernel model
 * and times a bf16 GEMM; the flat figures stay as they were. */
START_TEST(bundled_profiles_run_the_kernel_model)
{
  static const struct {
    const char *file;
    double matmul_tflops;
  } profiles[] = {
    { "a100-sxm4-80gb.ini", 271.2 },
    { "h100-sxm-pcie-gen5.ini", 795 },
    { "h200-pcie-gen5.ini", 795 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(profiles); i++) {
    g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, "profiles", profiles[i].file, NULL);
    g_autoptr(SimScenario) s = test_scenario_file_set(path, "model", "layers", "2", "model", "forward", "1ms", "model",
                                                      "input", "1MiB", "model", "tensors", "a:1MiB", NULL);
    const SimDevice *d = &s->machine.device;
    ck_assert_msg(sim_device_time_model(d) == SIM_TIME_KERNEL, "%s", profiles[i].file);
    ck_assert_msg(d->matmul_flops == profiles[i].matmul_tflops * 1e12, "%s", profiles[i].file);
    ck_assert(time_of(d, gemm(4096, 4096, 4096)) > 0);
  }
}
END_TEST

int
main(void)
{
  Suite *suite = suite_create("kernel");
  TCase *gemm_case = tcase_create("gemm");
  tcase_add_test(gemm_case, gemm_4096_cube_is_four_waves);
  tcase_add_test(gemm_case, gemm_one_tile_over_the_sms_costs_a_wave);
  tcase_add_test(gemm_case, gemm_batch_multiplies_the_tiles);
  tcase_add_test(gemm_case, gemm_small_m_is_memory_bound);
  tcase_add_test(gemm_case, table_at_a_point_and_between_points);
  suite_add_tcase(suite, gemm_case);
  TCase *other = tcase_create("other");
  tcase_add_test(other, flat_model_is_flops_over_matmul_times_efficiency);
  tcase_add_test(other, attention_flops_causal_halves_backward_is_two_and_a_half);
  tcase_add_test(other, attention_kernel_model);
  tcase_add_test(other, memory_kernel_is_bytes_over_bandwidth);
  tcase_add_test(other, errors_name_the_key);
  suite_add_tcase(suite, other);
  TCase *input = tcase_create("input");
  tcase_add_test(input, scenario_reads_the_kernel_keys);
  tcase_add_test(input, scenario_refuses_bad_kernel_keys);
  tcase_add_test(input, bundled_profiles_run_the_kernel_model);
  suite_add_tcase(suite, input);
  return test_run_suite(suite);
}
