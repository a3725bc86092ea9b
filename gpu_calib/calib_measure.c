#include "gpu_calib/calib_measure.h"

#include "gpu_calib/calib_probe.h"
#include "gpu_calib/calib_report.h"

#include <math.h>
#include <string.h>

/* Copies at least this large count for the plateau and the pageable factor. */
#define LARGE_COPY (64 * MIB)

static const int quick_shapes[] = { 0, 2, 4 };

const guint64 calib_measure_alloc_sizes[] = { MIB, 16 * MIB, 256 * MIB };

/* ---- copies: the size sweeps -------------------------------------------- */

static CalibWork
copy_work(const Calib *c, int dir, gboolean pinned, gboolean second, size_t bytes, int count)
{
  void *host = pinned ? (second ? c->pin_b : c->pin_a) : c->pageable;
  void *dev = second ? c->dev_b : c->dev_a;
  return (CalibWork){
    .kind = CALIB_WORK_COPY, .count = count, .bytes = bytes,
    .dst = dir ? dev : host, .src = dir ? host : dev,
    .dir = dir ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
  };
}

void
calib_measure_sweep(Calib *c, CalibSweep *s)
{
  /* Bytes per sample: enough to swamp the events' resolution, few enough to
   * keep the whole run short.  Pageable copies are slower: less. */
  double target = (double)(s->pinned ? (c->quick ? 256 : 1024) : (c->quick ? 128 : 512)) * MIB;
  guint64 step = c->quick ? 4 : 2;
  g_autofree double *large = g_new(double, CALIB_MAX_SIZES);
  guint n_large = 0;
  s->n = 0;
  for (guint64 bytes = 4 * KIB; bytes <= c->max_copy && s->n < CALIB_MAX_SIZES; bytes *= step) {
    CalibSweepPoint *p = &s->points[s->n++];
    p->bytes = bytes;
    p->count = (int)CLAMP(ceil(target / (double)bytes), s->pinned ? 4 : 2, CALIB_MAX_BATCH);
    CalibWork w = copy_work(c, s->dir, s->pinned, FALSE, bytes, p->count);
    calib_timing_measure(c, &w, 1, s->pinned ? CALIB_TIMING_HELD : CALIB_TIMING_NONE, &p->seconds, p->samples);
    if (bytes >= LARGE_COPY)
      large[n_large++] = (double)bytes / p->seconds;
    g_autofree char *size = calib_report_size(bytes);
    g_autofree char *rate = calib_report_rate((double)bytes / p->seconds);
    calib_report_progress("  %-13s %8s: %10.2f us per copy, %s (%d copies x %d)", s->name, size, p->seconds * 1e6,
                          rate, p->count, c->repeats);
  }
  s->plateau = n_large ? calib_median(large, n_large) : (double)s->points[s->n - 1].bytes / s->points[s->n - 1].seconds;
}

CalibFit
calib_measure_fit_sweep(const CalibSweep *s)
{
  guint64 bytes[CALIB_MAX_SIZES];
  double seconds[CALIB_MAX_SIZES];
  for (guint i = 0; i < s->n; i++) {
    bytes[i] = s->points[i].bytes;
    seconds[i] = s->points[i].seconds;
  }
  CalibFit fit;
  g_autoptr(GError) error = NULL;
  if (!calib_fit_alpha_beta(bytes, seconds, s->n, &fit, &error))
    calib_report_die(1, "%s: %s", s->name, error->message);
  return fit;
}

/* ---- both directions at once --------------------------------------------- */

void
calib_measure_bidirectional(Calib *c, CalibBidir *b)
{
  b->bytes = (c->quick ? 128 : 256) * MIB;
  int measured = c->quick ? 2 : 4;
  for (int dir = 0; dir < 2; dir++) {
    /* The measured direction on lane 0, the other direction on lane 1 with
     * twice as many copies, so that every measured copy is contended. */
    CalibWork w[2] = { copy_work(c, dir, TRUE, dir == 1, b->bytes, measured),
                       copy_work(c, 1 - dir, TRUE, dir == 0, b->bytes, 2 * measured) };
    double t[2];
    calib_timing_measure(c, w, 2, CALIB_TIMING_HELD, t, NULL);
    b->copy_seconds[dir] = t[0];
  }
  b->d2h = (double)b->bytes / b->copy_seconds[0];
  b->h2d = (double)b->bytes / b->copy_seconds[1];
  /* The link trains down when idle: read its state while copies run. */
  CalibWork w[2] = { copy_work(c, 0, TRUE, FALSE, b->bytes, measured),
                     copy_work(c, 1, TRUE, TRUE, b->bytes, measured) };
  for (int i = 0; i < 2; i++)
    calib_timing_enqueue(c, i, &w[i], measured);
  b->pcie_during = calib_probe_pcie_link(c->pci_bus, "current_link_speed", "current_link_width");
  CUDA_CHECK(cudaDeviceSynchronize());
  g_autofree char *d2h = calib_report_rate(b->d2h), *h2d = calib_report_rate(b->h2d);
  g_autofree char *total = calib_report_rate(b->d2h + b->h2d);
  calib_report_progress("  both directions: D2H %s + H2D %s = %s", d2h, h2d, total);
}

/* ---- device memory -------------------------------------------------------- */

double
calib_measure_device_to_device(Calib *c, guint64 *bytes)
{
  *bytes = c->quick ? 256 * MIB : GIB;
  CalibWork w = { .kind = CALIB_WORK_COPY, .count = c->quick ? 4 : 8, .dst = c->dev_b, .src = c->dev_a,
                  .bytes = *bytes, .dir = cudaMemcpyDeviceToDevice };
  return calib_timing_measure_one(c, w);
}

static CalibWork
triad_work(void)
{
  return (CalibWork){ .kind = CALIB_WORK_TRIAD, .count = 8 };
}

double
calib_measure_triad(Calib *c)
{
  return 3.0 * (double)c->tri_n * sizeof(float) / calib_timing_measure_one(c, triad_work());
}

double
calib_measure_copy_kernel(Calib *c, guint64 *bytes)
{
  *bytes = c->quick ? 256 * MIB : GIB;
  CalibWork w = { .kind = CALIB_WORK_COPY_KERNEL, .count = c->quick ? 4 : 8, .dst = c->dev_b, .src = c->dev_a,
                  .bytes = *bytes };
  return 2.0 * (double)*bytes / calib_timing_measure_one(c, w);
}

/* ---- GEMM throughput ------------------------------------------------------ */

const guint calib_measure_list_types[CALIB_LIST_TYPES] = { 0, 3 };

static double
time_gemm(Calib *c, const CalibGemmShape *g, const CalibGemmType *t)
{
  CalibWork w = { .kind = CALIB_WORK_GEMM, .count = 1, .shape = g, .type = t };
  /* One timed call sizes the batch (cuBLAS picks its kernel on the first). */
  double once[1];
  calib_timing_enqueue(c, 0, &w, 1);
  calib_timing_run_once(c, &w, 1, CALIB_TIMING_NONE, once);
  w.count = calib_timing_batch_for(c->quick ? 0.01 : 0.025, once[0], 2);
  return calib_timing_measure_one(c, w);
}

/* The operands of every shape, filled with values of type `t`. */
static void
fill_operands(Calib *c, const CalibGemmType *t)
{
  size_t a = 0, w = 0, unused = 0;
  calib_timing_gemm_elements(c, &a, &w, &unused);
  CUDA_CHECK(calib_launch_fill(c->gemm_a, a, t->fill, c->lane[0]));
  CUDA_CHECK(calib_launch_fill(c->gemm_w, w, t->fill, c->lane[0]));
  CUDA_CHECK(cudaStreamSynchronize(c->lane[0]));
}

void
calib_measure_gemms(Calib *c, CalibGemms *out)
{
  memset(out, 0, sizeof *out);
  for (guint ti = 0; ti < CALIB_GEMM_TYPES; ti++) {
    const CalibGemmType *t = &calib_timing_gemm_types[ti];
    fill_operands(c, t);
    guint n = c->quick ? G_N_ELEMENTS(quick_shapes) : CALIB_GEMM_SHAPES;
    for (guint k = 0; k < n; k++) {
      const CalibGemmShape *g = &calib_timing_gemm_shapes[c->quick ? (guint)quick_shapes[k] : k];
      double s = time_gemm(c, g, t);
      double tflops = calib_gemm_tflops(g->m, g->n, g->k, s);
      out->tflops[ti][g - calib_timing_gemm_shapes] = tflops;
      if (ti == 0 && tflops > out->best_bf16) {
        out->best_bf16 = tflops;
        out->best_shape = g;
      }
      calib_report_progress("  gemm %-4s %-9s %5dx%5dx%5d: %8.1f TFLOPS", t->name, g->name, g->m, g->n, g->k, tflops);
    }
  }
}

void
calib_measure_gemm_list(Calib *c, CalibGemmList *out)
{
  out->shapes = c->list;
  out->n = c->list_n;
  for (guint li = 0; li < CALIB_LIST_TYPES; li++) {
    const CalibGemmType *t = &calib_timing_gemm_types[calib_measure_list_types[li]];
    out->tflops[li] = g_new0(double, MAX(out->n, 1));
    fill_operands(c, t);
    for (guint i = 0; i < out->n; i++) {
      const CalibGemmShape *g = &out->shapes[i];
      out->tflops[li][i] = calib_gemm_tflops(g->m, g->n, g->k, time_gemm(c, g, t));
      calib_report_progress("  gemm %-4s %-28s %6dx%6dx%6d %-5s x%-2d: %8.1f TFLOPS", t->name, g->name, g->m, g->n,
                            g->k, calib_gemm_pass_names[g->pass], g->uses, out->tflops[li][i]);
    }
  }
}

void
calib_measure_gemm_list_clear(CalibGemmList *list)
{
  for (guint li = 0; li < CALIB_LIST_TYPES; li++)
    g_clear_pointer(&list->tflops[li], g_free);
}

/* ---- the host's cost of a kernel launch ------------------------------------ */

/* Seconds from the first of `count` launches to the synchronize's return,
 * on an idle GPU. */
static double
time_launches(Calib *c, int count)
{
  CUDA_CHECK(cudaDeviceSynchronize());
  gint64 t0 = g_get_monotonic_time();
  for (int i = 0; i < count; i++)
    CUDA_CHECK(calib_launch_empty(c->lane[0]));
  CUDA_CHECK(cudaStreamSynchronize(c->lane[0]));
  return (double)(g_get_monotonic_time() - t0) * 1e-6;
}

void
calib_measure_launches(Calib *c, int n, CalibLaunches *out)
{
  double x[CALIB_LAUNCH_COUNTS], samples[CALIB_MAX_REPEATS];
  time_launches(c, n);
  for (int i = 0; i < CALIB_LAUNCH_COUNTS; i++) {
    out->counts[i] = n >> (CALIB_LAUNCH_COUNTS - 1 - i);
    for (int r = 0; r < c->repeats; r++)
      samples[r] = time_launches(c, out->counts[i]);
    out->seconds[i] = calib_median(samples, (guint)c->repeats);
    x[i] = out->counts[i];
    calib_report_progress("  %6d launches: %10.3f ms (median of %d)", out->counts[i], out->seconds[i] * 1e3,
                          c->repeats);
  }
  g_autoptr(GError) error = NULL;
  if (!calib_fit_line(x, out->seconds, CALIB_LAUNCH_COUNTS, &out->fixed, &out->per_launch, &error))
    calib_report_die(1, "launch overhead: %s", error->message);
  if (!(out->per_launch > 0))
    calib_report_die(1, "launch overhead: the time does not grow with the launches (%g s per launch)",
                     out->per_launch);
  g_autofree char *per = calib_report_time(out->per_launch);
  calib_report_progress("  fit: %s per launch, %+.3g us fixed", per, out->fixed * 1e6);
}

/* ---- overlap: each victim alone and with traffic both ways ----------------- */

static CalibWork
fma_work(void)
{
  return (CalibWork){ .kind = CALIB_WORK_FMA, .count = 4 };
}

double
calib_measure_fma(Calib *c)
{
  double fma_time = calib_timing_measure_one(c, fma_work());
  c->fma_iterations = (int)CLAMP(c->fma_iterations * 2e-3 / fma_time, 1024.0, (double)(1 << 24));
  fma_time = calib_timing_measure_one(c, fma_work());
  return calib_fma_flops(c->fma_blocks, c->fma_threads, c->fma_iterations) / fma_time * 1e-12;
}

static void
overlap(Calib *c, const CalibBidir *b, CalibWork victim, const char *name, CalibOverlap *o)
{
  o->name = name;
  victim.count = 1;
  double one = calib_timing_measure_one(c, victim);
  victim.count = calib_timing_batch_for(c->quick ? 0.03 : 0.06, one, 2);
  o->alone = calib_timing_measure_one(c, victim);
  double copy = MAX(b->copy_seconds[0], b->copy_seconds[1]);
  double victim_span = victim.count * o->alone;

  /* The victim under traffic that outlasts it. */
  int copies = calib_timing_batch_for(1.3 * victim_span, copy, 1);
  CalibWork w[3] = { victim, copy_work(c, 0, TRUE, FALSE, b->bytes, copies),
                     copy_work(c, 1, TRUE, TRUE, b->bytes, copies) };
  double t[3];
  calib_timing_measure(c, w, 3, CALIB_TIMING_HELD, t, NULL);
  o->with_copies = t[0];
  o->slowdown = o->with_copies / o->alone - 1;

  /* The copies under a victim that outlasts them, against the same copies
   * without it. */
  copies = (int)CLAMP(floor(0.7 * CALIB_MAX_BATCH * o->alone / copy), 1, c->quick ? 2 : 4);
  CalibWork pair[2] = { copy_work(c, 0, TRUE, FALSE, b->bytes, copies),
                        copy_work(c, 1, TRUE, TRUE, b->bytes, copies) };
  double base[2];
  calib_timing_measure(c, pair, 2, CALIB_TIMING_HELD, base, NULL);
  w[0].count = calib_timing_batch_for(1.3 * copies * copy, o->alone, 1);
  w[1] = pair[0];
  w[2] = pair[1];
  calib_timing_measure(c, w, 3, CALIB_TIMING_HELD, t, NULL);
  o->copy_slowdown[0] = t[1] / base[0] - 1;
  o->copy_slowdown[1] = t[2] / base[1] - 1;
  calib_report_progress("  overlap %-9s alone %8.3f ms, with copies %8.3f ms (%+.1f%%); copies D2H %+.1f%%, "
                        "H2D %+.1f%%",
                        name, o->alone * 1e3, o->with_copies * 1e3, 100 * o->slowdown, 100 * o->copy_slowdown[0],
                        100 * o->copy_slowdown[1]);
}

void
calib_measure_overlaps(Calib *c, const CalibBidir *b, CalibOverlap o[CALIB_OVERLAPS])
{
  CUDA_CHECK(calib_launch_fill(c->gemm_a, (size_t)8192 * 8192, CALIB_FILL_BF16, c->lane[0]));
  CUDA_CHECK(calib_launch_fill(c->gemm_w, (size_t)8192 * 8192, CALIB_FILL_BF16, c->lane[0]));
  CalibWork gemm = { .kind = CALIB_WORK_GEMM, .shape = &calib_timing_gemm_shapes[CALIB_GEMM_SQUARE],
                     .type = &calib_timing_gemm_types[0] };
  overlap(c, b, gemm, "gemm_bf16", &o[0]);
  overlap(c, b, fma_work(), "fma", &o[1]);
  overlap(c, b, triad_work(), "triad", &o[2]);
}

/* ---- pinned allocation ---------------------------------------------------- */

double
calib_measure_host_alloc(const Calib *c, guint64 bytes, double *samples)
{
  for (int r = 0; r < c->repeats; r++) {
    void *p = NULL;
    gint64 t0 = g_get_monotonic_time();
    CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    gint64 t1 = g_get_monotonic_time();
    CUDA_CHECK(cudaFreeHost(p));
    samples[r] = (double)(t1 - t0) * 1e-6;
  }
  return calib_median(samples, (guint)c->repeats);
}
