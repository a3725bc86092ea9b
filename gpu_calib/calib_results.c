#include "gpu_calib/calib_results.h"

#include "gpu_calib/calib_report.h"

/* ---- the raw numbers, as text ------------------------------------------- */

/* "4096:2.31/2.30/2.35, 16384:...": every sample, microseconds per copy. */
static char *
sweep_samples(const Calib *c, const CalibSweep *s)
{
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < s->n; i++) {
    g_string_append_printf(out, "%s%" G_GUINT64_FORMAT ":", i ? ", " : "", s->points[i].bytes);
    for (int r = 0; r < c->repeats; r++)
      g_string_append_printf(out, "%s%.6g", r ? "/" : "", s->points[i].samples[r] * 1e6);
  }
  return g_string_free(out, FALSE);
}

static char *
gemm_summary(const CalibGemms *gm, guint ti)
{
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < CALIB_GEMM_SHAPES; i++) {
    const CalibGemmShape *g = &calib_timing_gemm_shapes[i];
    if (gm->tflops[ti][i] > 0)
      g_string_append_printf(out, "%s%s %dx%dx%d: %.1f TFLOPS", out->len ? ", " : "", g->name, g->m, g->n, g->k,
                             gm->tflops[ti][i]);
  }
  return g_string_free(out, FALSE);
}

static char *
overlap_text(const CalibOverlap *o)
{
  return g_strdup_printf("alone %.4g ms, with D2H+H2D copies %.4g ms (%+.2f%%); copies meanwhile D2H %+.2f%%, "
                         "H2D %+.2f%%",
                         o->alone * 1e3, o->with_copies * 1e3, 100 * o->slowdown, 100 * o->copy_slowdown[0],
                         100 * o->copy_slowdown[1]);
}

/* "1 MiB:0.028/0.014/0.013, 16 MiB:...": every sample, milliseconds. */
static char *
alloc_samples(const Calib *c, const CalibResults *r)
{
  GString *alloc = g_string_new(NULL);
  for (int i = 0; i < CALIB_ALLOC_SIZES; i++) {
    g_autofree char *size = calib_report_size(calib_measure_alloc_sizes[i]);
    g_string_append_printf(alloc, "%s%s:", i ? ", " : "", size);
    for (int k = 0; k < c->repeats; k++)
      g_string_append_printf(alloc, "%s%.6g", k ? "/" : "", r->alloc_samples[i][k] * 1e3);
  }
  return g_string_free(alloc, FALSE);
}

/* "list bf16: llama3.1-8b q.fwd 4096x4096x4096 fwd x6: 650.1 TFLOPS, ...". */
static char *
list_summary(const CalibGemmList *list, guint li)
{
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < list->n; i++) {
    const CalibGemmShape *g = &list->shapes[i];
    g_string_append_printf(out, "%s%s %dx%dx%d %s x%d: %.1f TFLOPS", i ? ", " : "", g->name, g->m, g->n, g->k,
                           calib_gemm_pass_names[g->pass], g->uses, list->tflops[li][i]);
  }
  return g_string_free(out, FALSE);
}

/* "125:0.51, 250:1.02, ...": each count's median, milliseconds. */
static char *
launch_medians(const CalibLaunches *l)
{
  GString *out = g_string_new(NULL);
  for (int i = 0; i < CALIB_LAUNCH_COUNTS; i++)
    g_string_append_printf(out, "%s%d:%.6g", i ? ", " : "", l->counts[i], l->seconds[i] * 1e3);
  return g_string_free(out, FALSE);
}

/* ---- the best measured shape of a dtype ----------------------------------- */

typedef struct {
  double tflops;
  const CalibGemmShape *shape;
} Best;

/* The fastest shape of calib_timing_gemm_types[ti], fixed shapes and the
 * GEMM list together ({0, NULL} when none ran). */
static Best
best_shape(const CalibResults *r, guint ti)
{
  Best b = { 0, NULL };
  for (guint i = 0; i < CALIB_GEMM_SHAPES; i++)
    if (r->gemm.tflops[ti][i] > b.tflops)
      b = (Best){ r->gemm.tflops[ti][i], &calib_timing_gemm_shapes[i] };
  for (guint li = 0; li < CALIB_LIST_TYPES; li++)
    if (calib_measure_list_types[li] == ti)
      for (guint i = 0; i < r->list.n; i++)
        if (r->list.tflops[li][i] > b.tflops)
          b = (Best){ r->list.tflops[li][i], &r->list.shapes[i] };
  return b;
}

/* calib_timing_gemm_types' index of each CalibDtype. */
static const guint dtype_type[CALIB_DTYPES] = { [CALIB_DTYPE_BF16] = 0, [CALIB_DTYPE_FP16] = 1,
                                                [CALIB_DTYPE_FP32] = 3 };

/* ---- [device] and [link], each value with its note ----------------------- */

static void
note_device(CalibProfile *p, const CalibResults *r)
{
  p->memory = r->probe.prop.totalGlobalMem;
  calib_profile_note(p, "device.memory", "total device memory (cudaDeviceProp.totalGlobalMem)");
  Best bf16 = best_shape(r, 0);
  p->matmul_tflops = bf16.tflops;
  calib_profile_note(p, "device.matmul_tflops",
                     "best bf16 GEMM through cuBLAS (cublasGemmEx, fp32 accumulate) over the transformer shapes\n"
                     "and the GEMM list: %s %dx%dx%d; every shape and dtype is in [calibration] gemm_*",
                     bf16.shape->name, bf16.shape->m, bf16.shape->n, bf16.shape->k);
  p->hbm_bandwidth = r->copy_kernel_bandwidth;
  g_autofree char *copy_size = calib_report_size(r->copy_kernel_bytes);
  g_autofree char *triad = calib_report_rate(r->triad_bandwidth);
  g_autofree char *d2d = calib_report_rate(2.0 * (double)r->d2d_bytes / r->d2d_seconds);
  calib_profile_note(p, "device.hbm_bandwidth",
                     "achievable by an elementwise kernel: a copy kernel (16-byte loads and stores) over %s,\n"
                     "bytes read + written / time; the triad kernel reached %s, a device-to-device\n"
                     "cudaMemcpyAsync %s (2 x bytes / time)",
                     copy_size, triad, d2d);
}

/* The kernel cost model's keys (sim/engine/kernel.h). */
static void
note_kernel_model(CalibProfile *p, const CalibResults *r)
{
  for (int d = 0; d < CALIB_DTYPES; d++) {
    Best b = best_shape(r, dtype_type[d]);
    p->matmul_tflops_dtype[d] = b.tflops;
    if (b.shape == NULL)
      continue;
    g_autofree char *id = g_strconcat("device.matmul_tflops_", calib_dtype_names[d], NULL);
    calib_profile_note(p, id, "%s: the best measured shape (as mamf-finder reports), %s %dx%dx%d%s",
                       calib_dtype_names[d], b.shape->name, b.shape->m, b.shape->n, b.shape->k,
                       d == CALIB_DTYPE_FP16 ? "; the GEMM list runs bf16 and fp32 only" : "");
  }
  p->sm_count = (guint)r->probe.prop.multiProcessorCount;
  calib_profile_note(p, "device.sm_count", "streaming multiprocessors (cudaDeviceProp.multiProcessorCount)");
  const CalibLaunches *l = &r->launches;
  p->launch_overhead = l->per_launch;
  calib_profile_note(p, "device.launch_overhead",
                     "host time per kernel launch: %d to %d back-to-back empty kernels on an idle GPU, host wall\n"
                     "clock to the synchronize, the slope of t(N) = a + b N over the medians; a CUDA-level\n"
                     "lower bound: eager PyTorch adds its dispatcher's cost per op on top",
                     l->counts[0], l->counts[CALIB_LAUNCH_COUNTS - 1]);
  for (guint li = 0; li < CALIB_LIST_TYPES; li++) {
    CalibDtype d = calib_measure_list_types[li] == 0 ? CALIB_DTYPE_BF16 : CALIB_DTYPE_FP32;
    for (guint i = 0; i < r->list.n; i++) {
      const CalibGemmShape *g = &r->list.shapes[i];
      calib_profile_add_gemm(p, d, g->m, g->n, g->k, r->list.tflops[li][i]);
    }
  }
  calib_profile_note(p, "device.gemm_table",
                     "the GEMM list (--gemm-model, --gemm-shapes) through cublasGemmEx in bf16 and fp32:\n"
                     "2 m n k / the median time; each m x n x k once, in the operand layout of its first use\n"
                     "([calibration] gemm_list_*)");
}

static void
note_link_bandwidths(CalibProfile *p, const CalibResults *r)
{
  SimLink *l = &p->link;
  l->h2d_bandwidth = r->fit[1].beta;
  l->d2h_bandwidth = r->fit[0].beta;
  g_autofree char *h2d_plateau = calib_report_rate(r->sweeps[0].plateau);
  g_autofree char *d2h_plateau = calib_report_rate(r->sweeps[1].plateau);
  calib_profile_note(p, "link.h2d_bandwidth",
                     "beta of the fit t = alpha + bytes / beta over pinned H2D copies, 4 KiB to 1 GiB, weighted by\n"
                     "relative error (max %.2f%%); the large-copy plateau (median over copies >= 64 MiB) is %s",
                     100 * r->fit[1].max_rel_error, h2d_plateau);
  calib_profile_note(p, "link.d2h_bandwidth", "the same for pinned D2H copies (max error %.2f%%); plateau %s",
                     100 * r->fit[0].max_rel_error, d2h_plateau);
  l->bidir_bandwidth = r->bidir.d2h + r->bidir.h2d;
  g_autofree char *bd = calib_report_rate(r->bidir.d2h), *bh = calib_report_rate(r->bidir.h2d);
  g_autofree char *bidir_size = calib_report_size(r->bidir.bytes);
  calib_profile_note(p, "link.bidir_bandwidth",
                     "both directions at once on two streams, in total: D2H %s while a longer H2D ran,\n"
                     "plus H2D %s while a longer D2H ran (%s pinned copies)",
                     bd, bh, bidir_size);
}

static void
note_link_costs(CalibProfile *p, const CalibResults *r)
{
  SimLink *l = &p->link;
  const CalibSweep *h2d = &r->sweeps[0], *d2h = &r->sweeps[1], *h2d_page = &r->sweeps[2], *d2h_page = &r->sweeps[3];
  l->latency = 0.5 * (r->fit[0].alpha + r->fit[1].alpha);
  g_autofree char *ah = calib_report_time(r->fit[1].alpha), *ad = calib_report_time(r->fit[0].alpha);
  calib_profile_note(p, "link.latency",
                     "mean of the fitted alpha of H2D (%s) and D2H (%s): the fixed cost of one copy among\n"
                     "back-to-back asynchronous copies on one stream",
                     ah, ad);
  double factor_h2d = h2d_page->plateau / h2d->plateau, factor_d2h = d2h_page->plateau / d2h->plateau;
  l->pageable_factor = CLAMP(0.5 * (factor_h2d + factor_d2h), 1e-6, 1.0);
  calib_profile_note(p, "link.pageable_factor",
                     "pageable / pinned bandwidth of large copies (>= 64 MiB): H2D %.3f, D2H %.3f; their mean",
                     factor_h2d, factor_d2h);
  l->compute_slowdown = CLAMP(r->overlap[0].slowdown, 0.0, 0.99);
  calib_profile_note(p, "link.compute_slowdown",
                     "slowdown of the compute-bound victim, a bf16 8192^3 cuBLAS GEMM, while D2H and H2D copies\n"
                     "run (%+.2f%%, clamped to [0, 0.99]); a pure FMA kernel lost %+.2f%%, the memory-bound triad\n"
                     "%+.2f%% ([calibration] overlap_*)",
                     100 * r->overlap[0].slowdown, 100 * r->overlap[1].slowdown, 100 * r->overlap[2].slowdown);
  l->host_alloc = r->alloc[1];
  g_autofree char *a1 = calib_report_time(r->alloc[0]), *a256 = calib_report_time(r->alloc[2]);
  calib_profile_note(p, "link.host_alloc", "median cudaHostAlloc of 16 MiB; 1 MiB took %s, 256 MiB %s", a1, a256);
}

static void
add_tables(CalibProfile *p, const CalibResults *r)
{
  for (int dir = 0; dir < 2; dir++) {
    const CalibSweep *s = dir ? &r->sweeps[0] : &r->sweeps[1];
    for (guint i = 0; i < s->n; i++)
      calib_profile_add_point(p, dir, s->points[i].bytes, (double)s->points[i].bytes / s->points[i].seconds);
  }
  calib_profile_note(p, "link.h2d_table",
                     "pinned copies, one point per size: bytes / median time of one copy, fixed cost included");
  calib_profile_note(p, "link.d2h_table", "the same for pinned D2H copies");
}

/* ---- [calibration], in order ---------------------------------------------- */

static void
meta_run(CalibProfile *p, const Calib *c, const CalibResults *r, const char *date)
{
  const CalibProbe *m = &r->probe;
  calib_profile_meta(p, "tool", "offsim-calib%s%s", c->quick ? " --quick" : "",
                     calib_kernels_stand_in() ? " (MOCK OUTPUT: calib_mock.c's stand-in runtime, not a measurement)" : "");
  calib_profile_meta(p, "date", "%s", date);
  calib_profile_meta(p, "device", "%s", m->prop.name);
  calib_profile_meta(p, "device_index", "%d", c->device);
  calib_profile_meta(p, "compute_capability", "%d.%d", m->prop.major, m->prop.minor);
  calib_profile_meta(p, "multiprocessors", "%d", m->prop.multiProcessorCount);
  calib_profile_meta(p, "memory_bytes", "%zu", m->prop.totalGlobalMem);
  calib_profile_meta(p, "copy_engines", "%d", m->prop.asyncEngineCount);
  calib_profile_meta(p, "pci_bus", "%s", m->bus);
  calib_profile_meta(p, "pcie_during_copies", "%s", r->bidir.pcie_during);
  calib_profile_meta(p, "pcie_max", "%s", m->pcie_max);
  calib_profile_meta(p, "host_affinity", "%s", m->affinity);
  calib_profile_meta(p, "driver", "%s", m->driver);
  calib_profile_meta(p, "cuda_driver_api", "%d.%d", m->driver_api / 1000, m->driver_api % 1000 / 10);
  calib_profile_meta(p, "cuda_runtime", "%d.%d", m->runtime / 1000, m->runtime % 1000 / 10);
  calib_profile_meta(p, "cublas", "%d", r->cublas);
  calib_profile_meta(p, "method",
                     "events around batches of async copies or kernels on non-blocking streams, held behind a "
                     "spin kernel until enqueued (pageable copies: events only); one warm-up, then the median of "
                     "%d samples, per operation",
                     c->repeats);
}

static void
meta_copies(CalibProfile *p, const Calib *c, const CalibResults *r)
{
  g_autofree char *fit_h2d = calib_report_fit(&r->fit[1]), *fit_d2h = calib_report_fit(&r->fit[0]);
  calib_profile_meta(p, "h2d_fit", "%s", fit_h2d);
  calib_profile_meta(p, "d2h_fit", "%s", fit_d2h);
  for (int i = 0; i < 4; i++) {
    g_autofree char *key = g_strdup_printf("%s_us", r->sweeps[i].name);
    g_autofree char *samples = sweep_samples(c, &r->sweeps[i]);
    calib_profile_meta(p, key, "%s", samples);
  }
  g_autofree char *h2d_plateau = calib_report_rate(r->sweeps[0].plateau);
  g_autofree char *d2h_plateau = calib_report_rate(r->sweeps[1].plateau);
  g_autofree char *hp = calib_report_rate(r->sweeps[2].plateau), *dp = calib_report_rate(r->sweeps[3].plateau);
  calib_profile_meta(p, "plateau", "pinned H2D %s, D2H %s; pageable H2D %s, D2H %s", h2d_plateau, d2h_plateau, hp, dp);
  g_autofree char *bd = calib_report_rate(r->bidir.d2h), *bh = calib_report_rate(r->bidir.h2d);
  g_autofree char *bidir_size = calib_report_size(r->bidir.bytes);
  calib_profile_meta(p, "bidirectional", "D2H %s + H2D %s, %s copies", bd, bh, bidir_size);
}

static void
meta_device(CalibProfile *p, const Calib *c, const CalibResults *r)
{
  g_autofree char *d2d_size = calib_report_size(r->d2d_bytes);
  g_autofree char *d2d = calib_report_rate((double)r->d2d_bytes / r->d2d_seconds);
  g_autofree char *hbm = calib_report_rate(p->hbm_bandwidth);
  g_autofree char *triad = calib_report_rate(r->triad_bandwidth);
  calib_profile_meta(p, "device_to_device", "%s copies at %s one way (%s counting read and write); triad %s",
                     d2d_size, d2d, hbm, triad);
  for (guint ti = 0; ti < CALIB_GEMM_TYPES; ti++) {
    g_autofree char *key = g_strdup_printf("gemm_%s", calib_timing_gemm_types[ti].name);
    g_autofree char *summary = gemm_summary(&r->gemm, ti);
    calib_profile_meta(p, key, "%s", summary);
  }
  for (guint li = 0; li < CALIB_LIST_TYPES; li++) {
    g_autofree char *key = g_strdup_printf("gemm_list_%s", calib_timing_gemm_types[calib_measure_list_types[li]].name);
    g_autofree char *summary = list_summary(&r->list, li);
    calib_profile_meta(p, key, "%s", summary);
  }
  g_autofree char *copy_size = calib_report_size(r->copy_kernel_bytes);
  g_autofree char *copy = calib_report_rate(r->copy_kernel_bandwidth);
  calib_profile_meta(p, "copy_kernel", "%s at %s (read + write)", copy_size, copy);
  g_autofree char *medians = launch_medians(&r->launches);
  calib_profile_meta(p, "launches_ms", "%s; fit %.6g us + %.6g us per launch", medians, r->launches.fixed * 1e6,
                     r->launches.per_launch * 1e6);
  calib_profile_meta(p, "fma_tflops", "%.2f (fp32 FMA kernel, no tensor cores)", r->fma_tflops);
  for (int i = 0; i < CALIB_OVERLAPS; i++) {
    g_autofree char *key = g_strdup_printf("overlap_%s", r->overlap[i].name);
    g_autofree char *text = overlap_text(&r->overlap[i]);
    calib_profile_meta(p, key, "%s", text);
  }
  g_autofree char *alloc = alloc_samples(c, r);
  calib_profile_meta(p, "host_alloc_ms", "%s", alloc);
}

/* ---- the whole profile ---------------------------------------------------- */

CalibProfile *
calib_results_build_profile(const Calib *c, const CalibResults *r)
{
  g_autoptr(CalibProfile) p = calib_profile_new();
  g_autoptr(GDateTime) now = g_date_time_new_now_utc();
  g_autofree char *date = g_date_time_format_iso8601(now);
  if (calib_kernels_stand_in())
    p->title = g_strdup_printf("%s: MOCK OUTPUT of offsim-calib%s over calib_mock.c's stand-in CUDA runtime on %s,\n"
                               "not a measurement of any GPU: for tests only.",
                               r->probe.prop.name, c->quick ? " --quick" : "", date);
  else
    p->title = g_strdup_printf("%s, measured by offsim-calib%s on %s (driver %s); PCIe %s.\n"
                               "Include it from a scenario: [scenario] include = THIS_FILE.",
                               r->probe.prop.name, c->quick ? " --quick" : "", date, r->probe.driver,
                               r->bidir.pcie_during);
  note_device(p, r);
  note_kernel_model(p, r);
  note_link_bandwidths(p, r);
  note_link_costs(p, r);
  add_tables(p, r);
  meta_run(p, c, r, date);
  meta_copies(p, c, r);
  meta_device(p, c, r);
  return g_steal_pointer(&p);
}

void
calib_results_clear(CalibResults *r)
{
  calib_probe_clear(&r->probe);
  g_free(r->bidir.pcie_during);
  calib_measure_gemm_list_clear(&r->list);
}
