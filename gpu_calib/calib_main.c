/* gpu_calib/calib_main.c — offsim-calib: measures the host link, copy/compute
 * overlap, GEMM throughput, elementwise bandwidth and the host's cost of a
 * kernel launch of one GPU and writes a profile that offsim scenarios
 * include.
 *
 * Method (docs/reference.md, "Measuring the link"): every asynchronous measurement
 * is a batch of operations enqueued on non-blocking streams behind a spin
 * kernel that polls a host-mapped flag; the start and stop events are
 * recorded around the batch, the host sets the flag once everything is
 * enqueued, and the events give the time (nvbandwidth's trick: enqueue cost
 * stays out).  Each measurement is warmed up once, then sampled `repeats`
 * times; a figure is the median of the samples, per operation.  Pageable
 * copies cannot be held that way (the driver synchronises the stream before
 * staging them, which would wait for the spin kernel forever): they are timed
 * with events alone.  Host memory is allocated once, outside every timed
 * region, after pinning the process to the GPU's NUMA node when sysfs names
 * it.  The launch overhead is the one figure timed on the host clock:
 * back-to-back empty kernels on an idle GPU, a line fitted over four counts.
 *
 * The GEMM list (the profile's gemm_table) is the layer and LM-head GEMMs,
 * forward, dgrad and wgrad, of each --gemm-model, and the shapes of
 * --gemm-shapes (calib_shapes.h); with neither, DEFAULT_GEMM_MODEL's.
 *
 * Exit status: 0 ok; 1 a CUDA or cuBLAS error (file, line, call and the
 * library's message on stderr) or a profile that would not load; 2 bad
 * options; 3 no usable CUDA device.
 */
#include "gpu_calib/calib_measure.h"
#include "gpu_calib/calib_probe.h"
#include "gpu_calib/calib_profile.h"
#include "gpu_calib/calib_report.h"
#include "gpu_calib/calib_results.h"
#include "gpu_calib/calib_shapes.h"
#include "gpu_calib/calib_timing.h"

#include <glib.h>
#include <stdio.h>

/* Files: calib_main.c the command line and the order of the run;
 * calib_probe.c the device, driver, PCIe and NUMA node; calib_timing.c the
 * harness (streams, buffers, held batches); calib_measure.c the
 * measurements; calib_shapes.c the GEMM list; calib_results.c the profile assembled from them;
 * calib_report.c progress, fatal errors and numbers for people. */

/* The GEMM list without --gemm-model or --gemm-shapes: Llama-3.1-8B at
 * batch 1 x 4096. */
#define DEFAULT_GEMM_MODEL "llama3.1-8b=4096,14336,32,8,128,128256,4096"

#define LAUNCHES_DEFAULT 1000
#define LAUNCHES_MIN 80
#define LAUNCHES_MAX 100000

typedef struct {
  char *out; /* owned; NULL: stdout */
  gboolean quick;
  int device;
  char **gemm_models, **gemm_shapes; /* owned; NULL: none given */
  int launches;
  GArray *list; /* CalibGemmShape, owned */
} Options;

/* "offsim-calib: [WHAT: ]MESSAGE", then exit(status); the error freed
 * first, since exit runs no cleanup (LeakSanitizer). */
G_GNUC_NORETURN static void
die_error(int status, const char *what, GError **error)
{
  char message[1024];
  g_strlcpy(message, (*error)->message, sizeof message);
  g_clear_error(error);
  calib_report_die(status, "%s%s%s", what ? what : "", what ? ": " : "", message);
}

/* The GEMM list from the options' texts; exits 2 naming the option. */
static void
build_gemm_list(Options *o)
{
  o->list = g_array_new(FALSE, FALSE, sizeof(CalibGemmShape));
  const char *fallback[] = { DEFAULT_GEMM_MODEL, NULL };
  char **models = o->gemm_models || o->gemm_shapes ? o->gemm_models : (char **)fallback;
  g_autoptr(GError) error = NULL;
  for (char **m = models; m && *m; m++) {
    CalibModelDims dims;
    if (!calib_shapes_parse_model(*m, &dims, &error) || !calib_shapes_add_model(o->list, &dims, &error))
      die_error(2, "--gemm-model", &error);
  }
  for (char **s = o->gemm_shapes; s && *s; s++)
    if (!calib_shapes_parse_list(o->list, *s, &error))
      die_error(2, "--gemm-shapes", &error);
}

static void
parse_options(int argc, char **argv, Options *o)
{
  o->launches = LAUNCHES_DEFAULT;
  GOptionEntry entries[] = {
    { "out", 'o', 0, G_OPTION_ARG_FILENAME, &o->out, "write the profile to FILE (atomically) instead of stdout",
      "FILE" },
    { "quick", 'q', 0, G_OPTION_ARG_NONE, &o->quick, "fewer sizes, shapes and samples: under a minute", NULL },
    { "device", 'd', 0, G_OPTION_ARG_INT, &o->device, "the CUDA device to measure (default 0)", "N" },
    { "gemm-model", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->gemm_models,
      "time the GEMMs of one layer and the LM head, forward, dgrad and wgrad, of this model (repeatable; "
      "default: " DEFAULT_GEMM_MODEL " unless --gemm-shapes is given)",
      "[NAME=]HIDDEN,FFN,HEADS,KV_HEADS,HEAD_DIM,VOCAB,TOKENS" },
    { "gemm-shapes", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->gemm_shapes, "time these GEMMs too (repeatable)",
      "MxNxK,..." },
    { "launches", 0, 0, G_OPTION_ARG_INT, &o->launches,
      "launch overhead: the most back-to-back empty kernels per sample (default 1000; also N/2, N/4, N/8)", "N" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) context =
    g_option_context_new("- measure a GPU's link, overlap, GEMMs, memory bandwidth and launch cost for offsim");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  gboolean parsed = g_option_context_parse(context, &argc, &argv, &error);
  g_clear_pointer(&context, g_option_context_free);
  if (!parsed)
    die_error(2, NULL, &error);
  if (argc > 1)
    calib_report_die(2, "unexpected argument '%s'", argv[1]);
  if (o->launches < LAUNCHES_MIN || o->launches > LAUNCHES_MAX)
    calib_report_die(2, "--launches: expected a whole number from %d to %d, got %d", LAUNCHES_MIN, LAUNCHES_MAX,
                     o->launches);
  build_gemm_list(o);
}

/* ---- the run, phase by phase ------------------------------------------- */

static void
probe_machine(Calib *c, CalibResults *r)
{
  const CalibProbe *m = &r->probe;
  calib_probe_machine(&r->probe, c->device);
  c->pci_bus = m->bus;
  calib_report_progress("offsim-calib%s: %s (%d SMs, %.1f GiB), PCI %s, PCIe max %s, host %s, driver %s",
                        c->quick ? " --quick" : "", m->prop.name, m->prop.multiProcessorCount,
                        (double)m->prop.totalGlobalMem / GIB, m->bus, m->pcie_max, m->affinity, m->driver);
}

static void
measure_copies(Calib *c, CalibResults *r)
{
  calib_report_progress("copies, pinned and pageable, 4 KiB to 1 GiB:");
  const char *names[4] = { "h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable" };
  for (int i = 0; i < 4; i++) {
    r->sweeps[i] = (CalibSweep){ .name = names[i], .dir = i % 2 == 0, .pinned = i < 2 };
    calib_measure_sweep(c, &r->sweeps[i]);
  }
  r->fit[1] = calib_measure_fit_sweep(&r->sweeps[0]);
  r->fit[0] = calib_measure_fit_sweep(&r->sweeps[1]);
  for (int dir = 1; dir >= 0; dir--) {
    g_autofree char *text = calib_report_fit(&r->fit[dir]);
    calib_report_progress("  fit %s: %s", dir ? "H2D" : "D2H", text);
  }
  calib_measure_bidirectional(c, &r->bidir);
}

static void
measure_device_memory(Calib *c, CalibResults *r)
{
  calib_report_progress("device memory:");
  r->d2d_seconds = calib_measure_device_to_device(c, &r->d2d_bytes);
  r->triad_bandwidth = calib_measure_triad(c);
  r->copy_kernel_bandwidth = calib_measure_copy_kernel(c, &r->copy_kernel_bytes);
  g_autofree char *d2d = calib_report_rate(2.0 * (double)r->d2d_bytes / r->d2d_seconds);
  g_autofree char *tri = calib_report_rate(r->triad_bandwidth);
  g_autofree char *copy = calib_report_rate(r->copy_kernel_bandwidth);
  calib_report_progress("  device to device %s (read + write), triad %s, copy kernel %s", d2d, tri, copy);
}

static void
measure_overlap(Calib *c, CalibResults *r)
{
  calib_report_progress("overlap with copies both ways:");
  r->fma_tflops = calib_measure_fma(c);
  calib_measure_overlaps(c, &r->bidir, r->overlap);
}

static void
measure_host_allocs(Calib *c, CalibResults *r)
{
  calib_report_progress("pinned allocation (cudaHostAlloc):");
  for (int i = 0; i < CALIB_ALLOC_SIZES; i++) {
    r->alloc[i] = calib_measure_host_alloc(c, calib_measure_alloc_sizes[i], r->alloc_samples[i]);
    g_autofree char *size = calib_report_size(calib_measure_alloc_sizes[i]);
    calib_report_progress("  %8s: %.3f ms", size, r->alloc[i] * 1e3);
  }
}

/* Every measurement, in order, between the harness's set-up and teardown;
 * the set-up is timed with the rest. */
static void
measure_all(Calib *c, CalibResults *r, int launches)
{
  calib_timing_setup(c, &r->probe.prop);
  CUBLAS_CHECK(cublasGetVersion(c->blas, &r->cublas));
  measure_copies(c, r);
  measure_device_memory(c, r);
  calib_report_progress("kernel launches from the host (empty kernels, idle GPU):");
  calib_measure_launches(c, launches, &r->launches);
  calib_report_progress("GEMM through cuBLAS:");
  calib_measure_gemms(c, &r->gemm);
  calib_report_progress("the GEMM list (%u shapes) through cuBLAS:", c->list_n);
  calib_measure_gemm_list(c, &r->list);
  measure_overlap(c, r);
  measure_host_allocs(c, r);
  calib_timing_teardown(c);
}

/* ---- the profile out --------------------------------------------------- */

/* The written text, loaded as a scenario would include it, gives the
 * measured link back: a check of the writer on real numbers.  Then to
 * `out`, or stdout when it is NULL. */
static void
write_profile(const CalibProfile *profile, const char *out)
{
  g_autoptr(GError) error = NULL;
  SimMachine m;
  if (!calib_profile_verify(profile, &m, &error))
    die_error(1, "the profile does not load back", &error);
  if (out) {
    if (!calib_profile_save(profile, out, &error))
      die_error(1, NULL, &error);
  } else {
    g_autofree char *text = calib_profile_format(profile, &error);
    if (text == NULL)
      die_error(1, NULL, &error);
    fputs(text, stdout);
  }
}

static void
print_summary(const CalibProfile *profile, const char *out, gint64 t0)
{
  const SimLink *l = &profile->link;
  g_autofree char *h2d = calib_report_rate(l->h2d_bandwidth), *d2h = calib_report_rate(l->d2h_bandwidth);
  g_autofree char *both = calib_report_rate(l->bidir_bandwidth), *lat = calib_report_time(l->latency);
  calib_report_progress("done in %.0f s: H2D %s, D2H %s, both %s, latency %s, pageable x%.2f, compute -%.1f%% during "
                        "copies, bf16 %.0f TFLOPS%s%s",
                        (double)(g_get_monotonic_time() - t0) * 1e-6, h2d, d2h, both, lat, l->pageable_factor,
                        100 * l->compute_slowdown, profile->matmul_tflops, out ? "; profile written to " : "",
                        out ? out : "");
}

/* The kernel cost model's figures as written, last on stderr (run-on-gpu.sh
 * prints this block from the log). */
static void
print_kernel_model(const CalibProfile *p, const CalibResults *r)
{
  g_autofree char *launch = calib_report_time(p->launch_overhead), *hbm = calib_report_rate(p->hbm_bandwidth);
  calib_report_progress("kernel model, as written to [device]:");
  calib_report_progress("  sm_count %u, launch_overhead %s (host, a lower bound of eager PyTorch's), "
                        "hbm_bandwidth %s (copy kernel)",
                        p->sm_count, launch, hbm);
  calib_report_progress("  matmul_tflops (best measured shape): bf16 %.1f, fp16 %.1f, fp32 %.1f",
                        p->matmul_tflops_dtype[CALIB_DTYPE_BF16], p->matmul_tflops_dtype[CALIB_DTYPE_FP16],
                        p->matmul_tflops_dtype[CALIB_DTYPE_FP32]);
  calib_report_progress("  %-28s %-5s %4s %22s %11s %11s", "gemm_table", "pass", "uses", "m x n x k", "bf16 TFLOPS",
                        "fp32 TFLOPS");
  for (guint i = 0; i < r->list.n; i++) {
    const CalibGemmShape *g = &r->list.shapes[i];
    g_autofree char *mnk = g_strdup_printf("%dx%dx%d", g->m, g->n, g->k);
    calib_report_progress("  %-28s %-5s %4d %22s %11.1f %11.1f", g->name, calib_gemm_pass_names[g->pass], g->uses,
                          mnk, r->list.tflops[0][i], r->list.tflops[1][i]);
  }
}

/* ---- main ------------------------------------------------------------- */

int
main(int argc, char **argv)
{
  Options o = { 0 };
  parse_options(argc, argv, &o);
  g_autofree char *out = o.out;
  g_auto(GStrv) gemm_models = o.gemm_models, gemm_shapes = o.gemm_shapes;
  g_autoptr(GArray) list = o.list;

  calib_probe_select_device(o.device);
  Calib c = { .quick = o.quick, .device = o.device, .repeats = o.quick ? 3 : 7,
              .list = (const CalibGemmShape *)list->data, .list_n = list->len };
  g_autofree CalibResults *r = g_new0(CalibResults, 1);
  probe_machine(&c, r);

  gint64 t0 = g_get_monotonic_time();
  measure_all(&c, r, o.launches);

  g_autoptr(CalibProfile) profile = calib_results_build_profile(&c, r);
  write_profile(profile, out);
  print_summary(profile, out, t0);
  print_kernel_model(profile, r);
  calib_results_clear(r);
  return 0;
}
