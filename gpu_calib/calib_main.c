/* gpu_calib/calib_main.c — offsim-calib: measures the host link, copy/compute
 * overlap and GEMM throughput of one GPU and writes a profile that offsim
 * scenarios include.
 *
 * Method (REFERENCE.md, "Measuring the link"): every asynchronous measurement
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
 * it.
 *
 * Exit status: 0 ok; 1 a CUDA or cuBLAS error (file, line, call and the
 * library's message on stderr) or a profile that would not load; 2 bad
 * options; 3 no usable CUDA device.
 */
#define _GNU_SOURCE

#include "calib_fit.h"
#include "calib_kernels.h"
#include "calib_profile.h"
#include "error.h"
#include "units.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <glib.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB ((guint64)1024)
#define MIB (KIB * KIB)
#define GIB (MIB * KIB)
#define MAX_REPEATS 16
#define MAX_SIZES 32
#define MAX_LANES 3
/* Operations enqueued behind one spin kernel: few enough that enqueueing
 * never blocks on a full command queue (which would deadlock on the spin). */
#define MAX_BATCH 64
#define SPIN_TIMEOUT_NS 20000000000ull
/* Copies at least this large count for the plateau and the pageable factor. */
#define LARGE_COPY (64 * MIB)
/* cuBLAS's recommended workspace on Hopper. */
#define BLAS_WORKSPACE (32 * MIB)

/* ---- checked calls ------------------------------------------------------ */

static void
cuda_check(cudaError_t e, const char *call, const char *file, int line)
{
  if (e == cudaSuccess)
    return;
  fprintf(stderr, "offsim-calib: %s:%d: %s: %s (%s)\n", file, line, call, cudaGetErrorString(e), cudaGetErrorName(e));
  exit(1);
}
#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)

static void
cublas_check(cublasStatus_t s, const char *call, const char *file, int line)
{
  if (s == CUBLAS_STATUS_SUCCESS)
    return;
  fprintf(stderr, "offsim-calib: %s:%d: %s: %s (%s)\n", file, line, call, cublasGetStatusString(s),
          cublasGetStatusName(s));
  exit(1);
}
#define CUBLAS_CHECK(call) cublas_check((call), #call, __FILE__, __LINE__)

G_GNUC_NORETURN G_GNUC_PRINTF(2, 3) static void
die(int status, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *msg = g_strdup_vprintf(format, ap);
  va_end(ap);
  fprintf(stderr, "offsim-calib: %s\n", msg);
  exit(status);
}

/* ---- what is timed ------------------------------------------------------ */

typedef struct {
  int m, n, k;      /* C (m x n) = A (m x k) . W^T (k x n): m tokens */
  const char *name;
} GemmShape;

typedef struct {
  const char *name;
  cudaDataType_t type;
  cublasComputeType_t compute;
  size_t bytes;
  CalibFillType fill;
} GemmType;

/* Transformer shapes: Llama-3-8B projections over 8192 tokens, a square
 * reference, and a small model's MLP (Qwen2.5-0.5B at batch 2 x 512), which
 * shows how far small shapes stay from the peak. */
static const GemmShape gemm_shapes[] = {
  { 8192, 6144, 4096, "qkv" },       { 8192, 4096, 4096, "o_proj" },   { 8192, 28672, 4096, "mlp_up" },
  { 8192, 4096, 14336, "mlp_down" }, { 8192, 8192, 8192, "square" },  { 1024, 4864, 896, "small_mlp" },
};
static const int quick_shapes[] = { 0, 2, 4 };

static const GemmType gemm_types[] = {
  { "bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, CALIB_FILL_BF16 },
  { "fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, CALIB_FILL_F16 },
  { "tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, CALIB_FILL_F32 },
  { "fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, CALIB_FILL_F32 },
};

typedef enum { WORK_NONE, WORK_COPY, WORK_FMA, WORK_TRIAD, WORK_GEMM } WorkKind;

/* `count` operations of one kind, for one stream. */
typedef struct {
  WorkKind kind;
  int count;
  void *dst;
  const void *src;
  size_t bytes;
  enum cudaMemcpyKind dir;
  const GemmShape *shape;
  const GemmType *type;
} Work;

typedef struct {
  gboolean quick;
  int device;
  int repeats;
  int sms;
  cudaStream_t lane[MAX_LANES];
  cudaEvent_t start[MAX_LANES], stop[MAX_LANES];
  volatile int *flag, *timed_out; /* host-mapped */
  int *flag_dev, *timed_out_dev;
  /* Copies: device and pinned buffers of the largest size, a pageable one. */
  guint64 max_copy;
  void *dev_a, *dev_b, *pin_a, *pin_b, *pageable;
  /* Kernels. */
  float *fma_out, *tri_a, *tri_b, *tri_c;
  size_t tri_n;
  int fma_blocks, fma_threads, fma_iterations;
  cublasHandle_t blas;
  void *gemm_a, *gemm_w, *gemm_c, *blas_workspace;
  const char *pci_bus; /* lower-case sysfs name, or NULL */
} Calib;

static void
enqueue(Calib *c, int lane, const Work *w, int count)
{
  static const float one = 1.0f, zero = 0.0f;
  cudaStream_t s = c->lane[lane];
  if (w->kind == WORK_GEMM) {
    /* cublasSetStream drops the workspace; give the preallocated one back
     * so that cuBLAS never allocates (and maybe synchronises) while a spin
     * kernel holds a stream. */
    CUBLAS_CHECK(cublasSetStream(c->blas, s));
    CUBLAS_CHECK(cublasSetWorkspace(c->blas, c->blas_workspace, BLAS_WORKSPACE));
  }
  for (int i = 0; i < count; i++) {
    switch (w->kind) {
    case WORK_COPY:
      CUDA_CHECK(cudaMemcpyAsync(w->dst, w->src, w->bytes, w->dir, s));
      break;
    case WORK_FMA:
      CUDA_CHECK(calib_launch_fma(c->fma_out, c->fma_blocks, c->fma_threads, c->fma_iterations, s));
      break;
    case WORK_TRIAD:
      CUDA_CHECK(calib_launch_triad(c->tri_a, c->tri_b, c->tri_c, c->tri_n, c->sms * 8, s));
      break;
    case WORK_GEMM: {
      const GemmShape *g = w->shape;
      const GemmType *t = w->type;
      /* Row-major Y = X W^T as PyTorch's linear calls it: column-major TN. */
      CUBLAS_CHECK(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, g->n, g->m, g->k, &one, c->gemm_w, t->type, g->k,
                                c->gemm_a, t->type, g->k, &zero, c->gemm_c, t->type, g->n, t->compute,
                                CUBLAS_GEMM_DEFAULT));
      break;
    }
    case WORK_NONE:
      break;
    }
  }
}

/* One sample: the works of lanes 0..n-1 between their events; per-op
 * seconds into `per_op`.  Held: behind one spin kernel per lane, released
 * together once all is enqueued. */
static void
run_once(Calib *c, const Work *works, int n, gboolean held, double *per_op)
{
  g_assert(n <= MAX_LANES);
  __atomic_store_n(c->flag, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(c->timed_out, 0, __ATOMIC_SEQ_CST);
  for (int i = 0; i < n; i++) {
    g_assert(works[i].count >= 1 && works[i].count <= MAX_BATCH);
    if (held)
      CUDA_CHECK(calib_launch_spin(c->flag_dev, SPIN_TIMEOUT_NS, c->timed_out_dev, c->lane[i]));
    CUDA_CHECK(cudaEventRecord(c->start[i], c->lane[i]));
    enqueue(c, i, &works[i], works[i].count);
    CUDA_CHECK(cudaEventRecord(c->stop[i], c->lane[i]));
  }
  __atomic_store_n(c->flag, 1, __ATOMIC_SEQ_CST);
  for (int i = 0; i < n; i++) {
    float ms = 0;
    CUDA_CHECK(cudaEventSynchronize(c->stop[i]));
    CUDA_CHECK(cudaEventElapsedTime(&ms, c->start[i], c->stop[i]));
    per_op[i] = (double)ms * 1e-3 / works[i].count;
  }
  if (*c->timed_out)
    die(1, "a spin kernel timed out after %.0f s: enqueueing blocked while the stream was held",
        SPIN_TIMEOUT_NS * 1e-9);
}

/* A warm-up, then c->repeats samples; per lane, the median seconds per op
 * into `median` and, when `samples` is not NULL, lane 0's samples. */
static void
measure(Calib *c, const Work *works, int n, gboolean held, double *median, double *samples)
{
  double per_op[MAX_LANES];
  double all[MAX_LANES][MAX_REPEATS];
  for (int i = 0; i < n; i++)
    enqueue(c, i, &works[i], MIN(works[i].count, 4));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (int r = 0; r < c->repeats; r++) {
    run_once(c, works, n, held, per_op);
    for (int i = 0; i < n; i++)
      all[i][r] = per_op[i];
  }
  for (int i = 0; i < n; i++)
    median[i] = calib_median(all[i], (guint)c->repeats);
  if (samples)
    memcpy(samples, all[0], sizeof(double) * (size_t)c->repeats);
}

static double
measure_one(Calib *c, Work w)
{
  double t;
  measure(c, &w, 1, TRUE, &t, NULL);
  return t;
}

static int
batch_for(double target_seconds, double seconds_per_op, int min_count)
{
  double n = ceil(target_seconds / MAX(seconds_per_op, 1e-9));
  return (int)CLAMP(n, (double)min_count, (double)MAX_BATCH);
}

static char *
size_text(guint64 bytes)
{
  if (bytes >= GIB && bytes % GIB == 0)
    return g_strdup_printf("%" G_GUINT64_FORMAT " GiB", bytes / GIB);
  if (bytes >= MIB && bytes % MIB == 0)
    return g_strdup_printf("%" G_GUINT64_FORMAT " MiB", bytes / MIB);
  return g_strdup_printf("%" G_GUINT64_FORMAT " KiB", bytes / KIB);
}

/* For people (progress, notes, metadata): three significant digits.  The
 * profile's values are written in full by calib_profile. */
static char *
rate_text(double bytes_per_s)
{
  return sim_units_format_rate(bytes_per_s);
}

static char *
time_text(double seconds)
{
  if (seconds >= 1e-3)
    return g_strdup_printf("%.3g ms", seconds * 1e3);
  if (seconds >= 1e-6)
    return g_strdup_printf("%.3g us", seconds * 1e6);
  return g_strdup_printf("%.3g ns", seconds * 1e9);
}

static void
progress(const char *format, ...) G_GNUC_PRINTF(1, 2);
static void
progress(const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  vfprintf(stderr, format, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* ---- the machine: device, PCIe and NUMA from the runtime and sysfs -------- */

static char *
read_sysfs(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return NULL;
  return g_strstrip(text);
}

/* "32.0 GT/s PCIe" -> 5. */
static int
pcie_generation(const char *speed)
{
  static const double rates[] = { 2.5, 5, 8, 16, 32, 64, 128 };
  if (speed == NULL)
    return 0;
  double gt = g_ascii_strtod(speed, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(rates); i++)
    if (fabs(gt - rates[i]) < 0.1)
      return (int)i + 1;
  return 0;
}

static char *
pcie_link(const Calib *c, const char *speed_file, const char *width_file)
{
  if (c->pci_bus == NULL)
    return g_strdup("unknown (no PCI bus id)");
  g_autofree char *dir = g_build_filename("/sys/bus/pci/devices", c->pci_bus, NULL);
  g_autofree char *speed = read_sysfs(dir, speed_file);
  g_autofree char *width = read_sysfs(dir, width_file);
  if (speed == NULL || width == NULL)
    return g_strdup("not reported (no sysfs entry)");
  int gen = pcie_generation(speed);
  return gen ? g_strdup_printf("Gen%d x%s (%s)", gen, width, speed) : g_strdup_printf("x%s (%s)", width, speed);
}

/* Pins this thread, and the threads it starts, to the CPUs of the GPU's
 * NUMA node: pinned memory is then allocated on that node.  Returns what it
 * did, for the record. */
static char *
bind_to_gpu_node(const Calib *c)
{
  if (c->pci_bus == NULL)
    return g_strdup("not set (no PCI bus id)");
  g_autofree char *dir = g_build_filename("/sys/bus/pci/devices", c->pci_bus, NULL);
  g_autofree char *node = read_sysfs(dir, "numa_node");
  g_autofree char *cpus = read_sysfs(dir, "local_cpulist");
  if (node == NULL || cpus == NULL || strcmp(node, "-1") == 0)
    return g_strdup_printf("not set (NUMA node %s)", node ? node : "unknown");
  cpu_set_t set;
  CPU_ZERO(&set);
  g_auto(GStrv) ranges = g_strsplit(cpus, ",", -1);
  for (char **r = ranges; *r; r++) {
    guint64 lo = 0, hi = 0;
    g_auto(GStrv) ends = g_strsplit(*r, "-", 2);
    if (!g_ascii_string_to_unsigned(ends[0], 10, 0, CPU_SETSIZE - 1, &lo, NULL))
      return g_strdup_printf("not set (cannot read local_cpulist '%s')", cpus);
    hi = lo;
    if (ends[1] && !g_ascii_string_to_unsigned(ends[1], 10, lo, CPU_SETSIZE - 1, &hi, NULL))
      return g_strdup_printf("not set (cannot read local_cpulist '%s')", cpus);
    for (guint64 cpu = lo; cpu <= hi; cpu++)
      CPU_SET((int)cpu, &set);
  }
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    return g_strdup_printf("not set (sched_setaffinity failed for CPUs %s)", cpus);
  return g_strdup_printf("NUMA node %s, CPUs %s", node, cpus);
}

static char *
driver_version(void)
{
  char *text = NULL;
  if (g_file_get_contents("/sys/module/nvidia/version", &text, NULL, NULL))
    return g_strstrip(text);
  int v = 0;
  CUDA_CHECK(cudaDriverGetVersion(&v));
  return g_strdup_printf("unknown (driver API %d.%d)", v / 1000, v % 1000 / 10);
}

/* ---- set-up ------------------------------------------------------------- */

static int
select_device(int wanted)
{
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    die(3, "no CUDA device: cudaGetDeviceCount: %s (%s); run offsim-calib on a machine with an NVIDIA GPU and "
           "its driver",
        e == cudaSuccess ? "no device" : cudaGetErrorString(e), e == cudaSuccess ? "count 0" : cudaGetErrorName(e));
  if (wanted < 0 || wanted >= count)
    die(2, "--device %d: this machine has %d CUDA device%s (0 to %d)", wanted, count, count == 1 ? "" : "s",
        count - 1);
  CUDA_CHECK(cudaSetDevice(wanted));
  return count;
}

static void
setup(Calib *c, const struct cudaDeviceProp *prop)
{
  c->sms = prop->multiProcessorCount;
  for (int i = 0; i < MAX_LANES; i++) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->lane[i], cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&c->start[i]));
    CUDA_CHECK(cudaEventCreate(&c->stop[i]));
  }
  void *flags = NULL;
  CUDA_CHECK(cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped));
  c->flag = flags;
  c->timed_out = (int *)flags + 1;
  void *flags_dev = NULL;
  CUDA_CHECK(cudaHostGetDevicePointer(&flags_dev, flags, 0));
  c->flag_dev = flags_dev;
  c->timed_out_dev = (int *)flags_dev + 1;

  c->max_copy = GIB;
  CUDA_CHECK(cudaMalloc(&c->dev_a, c->max_copy));
  CUDA_CHECK(cudaMalloc(&c->dev_b, c->max_copy));
  CUDA_CHECK(cudaHostAlloc(&c->pin_a, c->max_copy, cudaHostAllocDefault));
  CUDA_CHECK(cudaHostAlloc(&c->pin_b, c->max_copy, cudaHostAllocDefault));
  c->pageable = g_malloc(c->max_copy);
  /* Touch every page now: faulting them in is not part of a copy. */
  memset(c->pageable, 1, c->max_copy);
  memset(c->pin_a, 1, c->max_copy);
  memset(c->pin_b, 2, c->max_copy);
  CUDA_CHECK(cudaMemset(c->dev_a, 3, c->max_copy));
  CUDA_CHECK(cudaMemset(c->dev_b, 4, c->max_copy));

  c->tri_n = (c->quick ? 256 : 512) * MIB / sizeof(float);
  CUDA_CHECK(cudaMalloc((void **)&c->tri_a, c->tri_n * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&c->tri_b, c->tri_n * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&c->tri_c, c->tri_n * sizeof(float)));
  CUDA_CHECK(calib_launch_fill(c->tri_b, c->tri_n, CALIB_FILL_F32, c->lane[0]));
  CUDA_CHECK(calib_launch_fill(c->tri_c, c->tri_n, CALIB_FILL_F32, c->lane[0]));
  c->fma_blocks = c->sms * 8;
  c->fma_threads = 256;
  c->fma_iterations = 1 << 14;
  CUDA_CHECK(cudaMalloc((void **)&c->fma_out, (size_t)c->fma_blocks * c->fma_threads * sizeof(float)));

  size_t a = 0, w = 0, out = 0;
  for (guint i = 0; i < G_N_ELEMENTS(gemm_shapes); i++) {
    const GemmShape *g = &gemm_shapes[i];
    a = MAX(a, (size_t)g->m * g->k);
    w = MAX(w, (size_t)g->n * g->k);
    out = MAX(out, (size_t)g->m * g->n);
  }
  CUDA_CHECK(cudaMalloc(&c->gemm_a, a * 4));
  CUDA_CHECK(cudaMalloc(&c->gemm_w, w * 4));
  CUDA_CHECK(cudaMalloc(&c->gemm_c, out * 4));
  CUDA_CHECK(cudaMalloc(&c->blas_workspace, BLAS_WORKSPACE));
  CUBLAS_CHECK(cublasCreate(&c->blas));
  CUDA_CHECK(cudaDeviceSynchronize());
}

static void
teardown(Calib *c)
{
  CUDA_CHECK(cudaDeviceSynchronize());
  CUBLAS_CHECK(cublasDestroy(c->blas));
  void *device_buffers[] = { c->dev_a, c->dev_b, c->tri_a, c->tri_b, c->tri_c, c->fma_out,
                             c->gemm_a, c->gemm_w, c->gemm_c, c->blas_workspace };
  for (guint i = 0; i < G_N_ELEMENTS(device_buffers); i++)
    CUDA_CHECK(cudaFree(device_buffers[i]));
  CUDA_CHECK(cudaFreeHost(c->pin_a));
  CUDA_CHECK(cudaFreeHost(c->pin_b));
  CUDA_CHECK(cudaFreeHost((void *)c->flag));
  g_free(c->pageable);
  for (int i = 0; i < MAX_LANES; i++) {
    CUDA_CHECK(cudaEventDestroy(c->start[i]));
    CUDA_CHECK(cudaEventDestroy(c->stop[i]));
    CUDA_CHECK(cudaStreamDestroy(c->lane[i]));
  }
}

/* ---- copies: the size sweeps -------------------------------------------- */

typedef struct {
  guint64 bytes;
  int count;
  double seconds; /* median per copy */
  double samples[MAX_REPEATS];
} SweepPoint;

typedef struct {
  const char *name; /* "h2d_pinned" */
  int dir;          /* 0 = D2H, 1 = H2D, as SimLink tables */
  gboolean pinned;
  SweepPoint points[MAX_SIZES];
  guint n;
  double plateau;   /* median bandwidth of the copies >= LARGE_COPY */
} Sweep;

static Work
copy_work(const Calib *c, int dir, gboolean pinned, gboolean second, size_t bytes, int count)
{
  void *host = pinned ? (second ? c->pin_b : c->pin_a) : c->pageable;
  void *dev = second ? c->dev_b : c->dev_a;
  return (Work){
    .kind = WORK_COPY, .count = count, .bytes = bytes,
    .dst = dir ? dev : host, .src = dir ? host : dev,
    .dir = dir ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
  };
}

static void
sweep(Calib *c, Sweep *s)
{
  /* Bytes per sample: enough to swamp the events' resolution, few enough to
   * keep the whole run short.  Pageable copies are slower: less. */
  double target = (double)(s->pinned ? (c->quick ? 256 : 1024) : (c->quick ? 128 : 512)) * MIB;
  guint64 step = c->quick ? 4 : 2;
  g_autofree double *large = g_new(double, MAX_SIZES);
  guint n_large = 0;
  s->n = 0;
  for (guint64 bytes = 4 * KIB; bytes <= c->max_copy && s->n < MAX_SIZES; bytes *= step) {
    SweepPoint *p = &s->points[s->n++];
    p->bytes = bytes;
    p->count = (int)CLAMP(ceil(target / (double)bytes), s->pinned ? 4 : 2, MAX_BATCH);
    Work w = copy_work(c, s->dir, s->pinned, FALSE, bytes, p->count);
    measure(c, &w, 1, s->pinned, &p->seconds, p->samples);
    if (bytes >= LARGE_COPY)
      large[n_large++] = (double)bytes / p->seconds;
    g_autofree char *size = size_text(bytes);
    g_autofree char *rate = rate_text((double)bytes / p->seconds);
    progress("  %-13s %8s: %10.2f us per copy, %s (%d copies x %d)", s->name, size, p->seconds * 1e6, rate,
             p->count, c->repeats);
  }
  s->plateau = n_large ? calib_median(large, n_large) : (double)s->points[s->n - 1].bytes / s->points[s->n - 1].seconds;
}

static CalibFit
fit_sweep(const Sweep *s)
{
  guint64 bytes[MAX_SIZES];
  double seconds[MAX_SIZES];
  for (guint i = 0; i < s->n; i++) {
    bytes[i] = s->points[i].bytes;
    seconds[i] = s->points[i].seconds;
  }
  CalibFit fit;
  g_autoptr(GError) error = NULL;
  if (!calib_fit_alpha_beta(bytes, seconds, s->n, &fit, &error))
    die(1, "%s: %s", s->name, error->message);
  return fit;
}

/* "4096:2.31/2.30/2.35, 16384:...": every sample, microseconds per copy. */
static char *
sweep_samples(const Calib *c, const Sweep *s)
{
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < s->n; i++) {
    g_string_append_printf(out, "%s%" G_GUINT64_FORMAT ":", i ? ", " : "", s->points[i].bytes);
    for (int r = 0; r < c->repeats; r++)
      g_string_append_printf(out, "%s%.6g", r ? "/" : "", s->points[i].samples[r] * 1e6);
  }
  return g_string_free(out, FALSE);
}

/* ---- both directions at once --------------------------------------------- */

typedef struct {
  double d2h, h2d; /* bandwidth of each direction while the other ran longer */
  double copy_seconds[2]; /* per copy of `bytes`, by direction, contended */
  guint64 bytes;
  char *pcie_during;
} Bidir;

static void
bidirectional(Calib *c, Bidir *b)
{
  b->bytes = (c->quick ? 128 : 256) * MIB;
  int measured = c->quick ? 2 : 4;
  for (int dir = 0; dir < 2; dir++) {
    /* The measured direction on lane 0, the other direction on lane 1 with
     * twice as many copies, so that every measured copy is contended. */
    Work w[2] = { copy_work(c, dir, TRUE, dir == 1, b->bytes, measured),
                  copy_work(c, 1 - dir, TRUE, dir == 0, b->bytes, 2 * measured) };
    double t[2];
    measure(c, w, 2, TRUE, t, NULL);
    b->copy_seconds[dir] = t[0];
  }
  b->d2h = (double)b->bytes / b->copy_seconds[0];
  b->h2d = (double)b->bytes / b->copy_seconds[1];
  /* The link trains down when idle: read its state while copies run. */
  Work w[2] = { copy_work(c, 0, TRUE, FALSE, b->bytes, measured), copy_work(c, 1, TRUE, TRUE, b->bytes, measured) };
  for (int i = 0; i < 2; i++)
    enqueue(c, i, &w[i], measured);
  b->pcie_during = pcie_link(c, "current_link_speed", "current_link_width");
  CUDA_CHECK(cudaDeviceSynchronize());
  g_autofree char *d2h = rate_text(b->d2h), *h2d = rate_text(b->h2d);
  g_autofree char *total = rate_text(b->d2h + b->h2d);
  progress("  both directions: D2H %s + H2D %s = %s", d2h, h2d, total);
}

/* ---- GEMM throughput ------------------------------------------------------ */

typedef struct {
  double tflops[G_N_ELEMENTS(gemm_types)][G_N_ELEMENTS(gemm_shapes)]; /* 0: not run */
  double best_bf16;
  const GemmShape *best_shape;
} Gemms;

static double
gemm_flops(const GemmShape *g)
{
  return 2.0 * g->m * (double)g->n * g->k;
}

static double
time_gemm(Calib *c, const GemmShape *g, const GemmType *t)
{
  Work w = { .kind = WORK_GEMM, .count = 1, .shape = g, .type = t };
  /* One timed call sizes the batch (cuBLAS picks its kernel on the first). */
  double once[1];
  enqueue(c, 0, &w, 1);
  run_once(c, &w, 1, FALSE, once);
  w.count = batch_for(c->quick ? 0.01 : 0.025, once[0], 2);
  return measure_one(c, w);
}

static void
gemms(Calib *c, Gemms *out)
{
  memset(out, 0, sizeof *out);
  for (guint ti = 0; ti < G_N_ELEMENTS(gemm_types); ti++) {
    const GemmType *t = &gemm_types[ti];
    size_t a = 0, w = 0;
    for (guint i = 0; i < G_N_ELEMENTS(gemm_shapes); i++) {
      a = MAX(a, (size_t)gemm_shapes[i].m * gemm_shapes[i].k);
      w = MAX(w, (size_t)gemm_shapes[i].n * gemm_shapes[i].k);
    }
    CUDA_CHECK(calib_launch_fill(c->gemm_a, a, t->fill, c->lane[0]));
    CUDA_CHECK(calib_launch_fill(c->gemm_w, w, t->fill, c->lane[0]));
    CUDA_CHECK(cudaStreamSynchronize(c->lane[0]));
    guint n = c->quick ? G_N_ELEMENTS(quick_shapes) : G_N_ELEMENTS(gemm_shapes);
    for (guint k = 0; k < n; k++) {
      const GemmShape *g = &gemm_shapes[c->quick ? (guint)quick_shapes[k] : k];
      double s = time_gemm(c, g, t);
      double tflops = gemm_flops(g) / s * 1e-12;
      out->tflops[ti][g - gemm_shapes] = tflops;
      if (ti == 0 && tflops > out->best_bf16) {
        out->best_bf16 = tflops;
        out->best_shape = g;
      }
      progress("  gemm %-4s %-9s %5dx%5dx%5d: %8.1f TFLOPS", t->name, g->name, g->m, g->n, g->k, tflops);
    }
  }
}

static char *
gemm_summary(const Gemms *gm, guint ti)
{
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < G_N_ELEMENTS(gemm_shapes); i++) {
    const GemmShape *g = &gemm_shapes[i];
    if (gm->tflops[ti][i] > 0)
      g_string_append_printf(out, "%s%s %dx%dx%d: %.1f TFLOPS", out->len ? ", " : "", g->name, g->m, g->n, g->k,
                             gm->tflops[ti][i]);
  }
  return g_string_free(out, FALSE);
}

/* ---- overlap: each victim alone and with traffic both ways ----------------- */

typedef struct {
  const char *name;
  double alone, with_copies;  /* seconds per victim op */
  double slowdown;            /* with / alone - 1 */
  double copy_slowdown[2];    /* by direction: copies with the victim / without - 1 */
} Overlap;

static void
overlap(Calib *c, const Bidir *b, Work victim, const char *name, Overlap *o)
{
  o->name = name;
  victim.count = 1;
  double one = measure_one(c, victim);
  victim.count = batch_for(c->quick ? 0.03 : 0.06, one, 2);
  o->alone = measure_one(c, victim);
  double copy = MAX(b->copy_seconds[0], b->copy_seconds[1]);
  double victim_span = victim.count * o->alone;

  /* The victim under traffic that outlasts it. */
  int copies = batch_for(1.3 * victim_span, copy, 1);
  Work w[3] = { victim, copy_work(c, 0, TRUE, FALSE, b->bytes, copies), copy_work(c, 1, TRUE, TRUE, b->bytes, copies) };
  double t[3];
  measure(c, w, 3, TRUE, t, NULL);
  o->with_copies = t[0];
  o->slowdown = o->with_copies / o->alone - 1;

  /* The copies under a victim that outlasts them, against the same copies
   * without it. */
  copies = (int)CLAMP(floor(0.7 * MAX_BATCH * o->alone / copy), 1, c->quick ? 2 : 4);
  Work pair[2] = { copy_work(c, 0, TRUE, FALSE, b->bytes, copies), copy_work(c, 1, TRUE, TRUE, b->bytes, copies) };
  double base[2];
  measure(c, pair, 2, TRUE, base, NULL);
  w[0].count = batch_for(1.3 * copies * copy, o->alone, 1);
  w[1] = pair[0];
  w[2] = pair[1];
  measure(c, w, 3, TRUE, t, NULL);
  o->copy_slowdown[0] = t[1] / base[0] - 1;
  o->copy_slowdown[1] = t[2] / base[1] - 1;
  progress("  overlap %-9s alone %8.3f ms, with copies %8.3f ms (%+.1f%%); copies D2H %+.1f%%, H2D %+.1f%%", name,
           o->alone * 1e3, o->with_copies * 1e3, 100 * o->slowdown, 100 * o->copy_slowdown[0],
           100 * o->copy_slowdown[1]);
}

static char *
overlap_text(const Overlap *o)
{
  return g_strdup_printf("alone %.4g ms, with D2H+H2D copies %.4g ms (%+.2f%%); copies meanwhile D2H %+.2f%%, "
                         "H2D %+.2f%%",
                         o->alone * 1e3, o->with_copies * 1e3, 100 * o->slowdown, 100 * o->copy_slowdown[0],
                         100 * o->copy_slowdown[1]);
}

/* ---- the rest: device-to-device, FMA rate, pinned allocation ------------ */

static double
device_to_device(Calib *c, guint64 *bytes)
{
  *bytes = c->quick ? 256 * MIB : GIB;
  Work w = { .kind = WORK_COPY, .count = c->quick ? 4 : 8, .dst = c->dev_b, .src = c->dev_a, .bytes = *bytes,
             .dir = cudaMemcpyDeviceToDevice };
  return measure_one(c, w);
}

/* Seconds of one cudaHostAlloc of `bytes`: host clock, median of repeats;
 * the matching cudaFreeHost is outside the timing. */
static double
host_alloc(const Calib *c, guint64 bytes, double *samples)
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

/* ---- the profile ------------------------------------------------------- */

typedef struct {
  struct cudaDeviceProp prop;
  char *driver, *pcie_max, *affinity, *bus;
  int runtime, driver_api, cublas;
  Sweep sweeps[4]; /* h2d pinned, d2h pinned, h2d pageable, d2h pageable */
  CalibFit fit[2]; /* by direction: 0 D2H, 1 H2D */
  Bidir bidir;
  Gemms gemm;
  Overlap overlap[3]; /* bf16 GEMM, FMA kernel, triad */
  double fma_tflops;
  double d2d_seconds, triad_bandwidth;
  guint64 d2d_bytes;
  double alloc[3], alloc_samples[3][MAX_REPEATS];
} Results;

static const guint64 alloc_sizes[3] = { MIB, 16 * MIB, 256 * MIB };

static char *
fit_text(const CalibFit *f)
{
  return g_strdup_printf("alpha %.4g us, beta %.5g GB/s, max error %.2f%%, rms %.2f%% over %u sizes%s",
                         f->alpha * 1e6, f->beta * 1e-9, 100 * f->max_rel_error, 100 * f->rms_rel_error, f->points,
                         f->alpha_clamped ? " (alpha clamped to 0)" : "");
}

static CalibProfile *
build_profile(const Calib *c, const Results *r)
{
  g_autoptr(CalibProfile) p = calib_profile_new();
  g_autoptr(GDateTime) now = g_date_time_new_now_utc();
  g_autofree char *date = g_date_time_format_iso8601(now);
  const Sweep *h2d = &r->sweeps[0], *d2h = &r->sweeps[1], *h2d_page = &r->sweeps[2], *d2h_page = &r->sweeps[3];
  p->title = g_strdup_printf("%s, measured by offsim-calib%s on %s (driver %s); PCIe %s.\n"
                             "Include it from a scenario: [scenario] include = THIS_FILE.",
                             r->prop.name, c->quick ? " --quick" : "", date, r->driver, r->bidir.pcie_during);

  p->memory = r->prop.totalGlobalMem;
  calib_profile_note(p, "device.memory", "total device memory (cudaDeviceProp.totalGlobalMem)");
  p->matmul_tflops = r->gemm.best_bf16;
  calib_profile_note(p, "device.matmul_tflops",
                     "best bf16 GEMM through cuBLAS (cublasGemmEx, fp32 accumulate) at transformer shapes: %s "
                     "%dx%dx%d;\nevery shape and dtype is in [calibration] gemm_*",
                     r->gemm.best_shape->name, r->gemm.best_shape->m, r->gemm.best_shape->n, r->gemm.best_shape->k);
  p->hbm_bandwidth = 2.0 * (double)r->d2d_bytes / r->d2d_seconds;
  g_autofree char *triad = rate_text(r->triad_bandwidth);
  g_autofree char *d2d_size = size_text(r->d2d_bytes);
  calib_profile_note(p, "device.hbm_bandwidth",
                     "device-to-device cudaMemcpyAsync of %s: 2 x bytes / time (every byte is read and written);\n"
                     "the memory-bound triad kernel reached %s",
                     d2d_size, triad);

  SimLink *l = &p->link;
  l->h2d_bandwidth = r->fit[1].beta;
  l->d2h_bandwidth = r->fit[0].beta;
  g_autofree char *h2d_plateau = rate_text(h2d->plateau), *d2h_plateau = rate_text(d2h->plateau);
  calib_profile_note(p, "link.h2d_bandwidth",
                     "beta of the fit t = alpha + bytes / beta over pinned H2D copies, 4 KiB to 1 GiB, weighted by\n"
                     "relative error (max %.2f%%); the large-copy plateau (median over copies >= 64 MiB) is %s",
                     100 * r->fit[1].max_rel_error, h2d_plateau);
  calib_profile_note(p, "link.d2h_bandwidth", "the same for pinned D2H copies (max error %.2f%%); plateau %s",
                     100 * r->fit[0].max_rel_error, d2h_plateau);
  l->bidir_bandwidth = r->bidir.d2h + r->bidir.h2d;
  g_autofree char *bd = rate_text(r->bidir.d2h), *bh = rate_text(r->bidir.h2d);
  g_autofree char *bidir_size = size_text(r->bidir.bytes);
  calib_profile_note(p, "link.bidir_bandwidth",
                     "both directions at once on two streams, in total: D2H %s while a longer H2D ran,\n"
                     "plus H2D %s while a longer D2H ran (%s pinned copies)",
                     bd, bh, bidir_size);
  l->latency = 0.5 * (r->fit[0].alpha + r->fit[1].alpha);
  g_autofree char *ah = time_text(r->fit[1].alpha), *ad = time_text(r->fit[0].alpha);
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
  g_autofree char *a1 = time_text(r->alloc[0]), *a256 = time_text(r->alloc[2]);
  calib_profile_note(p, "link.host_alloc", "median cudaHostAlloc of 16 MiB; 1 MiB took %s, 256 MiB %s", a1, a256);
  for (int dir = 0; dir < 2; dir++) {
    const Sweep *s = dir ? h2d : d2h;
    for (guint i = 0; i < s->n; i++)
      calib_profile_add_point(p, dir, s->points[i].bytes, (double)s->points[i].bytes / s->points[i].seconds);
  }
  calib_profile_note(p, "link.h2d_table",
                     "pinned copies, one point per size: bytes / median time of one copy, fixed cost included");
  calib_profile_note(p, "link.d2h_table", "the same for pinned D2H copies");

  calib_profile_meta(p, "tool", "offsim-calib%s", c->quick ? " --quick" : "");
  calib_profile_meta(p, "date", "%s", date);
  calib_profile_meta(p, "device", "%s", r->prop.name);
  calib_profile_meta(p, "device_index", "%d", c->device);
  calib_profile_meta(p, "compute_capability", "%d.%d", r->prop.major, r->prop.minor);
  calib_profile_meta(p, "multiprocessors", "%d", r->prop.multiProcessorCount);
  calib_profile_meta(p, "memory_bytes", "%zu", r->prop.totalGlobalMem);
  calib_profile_meta(p, "copy_engines", "%d", r->prop.asyncEngineCount);
  calib_profile_meta(p, "pci_bus", "%s", r->bus);
  calib_profile_meta(p, "pcie_during_copies", "%s", r->bidir.pcie_during);
  calib_profile_meta(p, "pcie_max", "%s", r->pcie_max);
  calib_profile_meta(p, "host_affinity", "%s", r->affinity);
  calib_profile_meta(p, "driver", "%s", r->driver);
  calib_profile_meta(p, "cuda_driver_api", "%d.%d", r->driver_api / 1000, r->driver_api % 1000 / 10);
  calib_profile_meta(p, "cuda_runtime", "%d.%d", r->runtime / 1000, r->runtime % 1000 / 10);
  calib_profile_meta(p, "cublas", "%d", r->cublas);
  calib_profile_meta(p, "method",
                     "events around batches of async copies or kernels on non-blocking streams, held behind a "
                     "spin kernel until enqueued (pageable copies: events only); one warm-up, then the median of "
                     "%d samples, per operation",
                     c->repeats);
  g_autofree char *fit_h2d = fit_text(&r->fit[1]), *fit_d2h = fit_text(&r->fit[0]);
  calib_profile_meta(p, "h2d_fit", "%s", fit_h2d);
  calib_profile_meta(p, "d2h_fit", "%s", fit_d2h);
  for (int i = 0; i < 4; i++) {
    g_autofree char *key = g_strdup_printf("%s_us", r->sweeps[i].name);
    g_autofree char *samples = sweep_samples(c, &r->sweeps[i]);
    calib_profile_meta(p, key, "%s", samples);
  }
  g_autofree char *hp = rate_text(h2d_page->plateau), *dp = rate_text(d2h_page->plateau);
  calib_profile_meta(p, "plateau", "pinned H2D %s, D2H %s; pageable H2D %s, D2H %s", h2d_plateau, d2h_plateau, hp, dp);
  calib_profile_meta(p, "bidirectional", "D2H %s + H2D %s, %s copies", bd, bh, bidir_size);
  g_autofree char *d2d = rate_text((double)r->d2d_bytes / r->d2d_seconds);
  g_autofree char *hbm = rate_text(p->hbm_bandwidth);
  calib_profile_meta(p, "device_to_device", "%s copies at %s one way (%s counting read and write); triad %s",
                     d2d_size, d2d, hbm, triad);
  for (guint ti = 0; ti < G_N_ELEMENTS(gemm_types); ti++) {
    g_autofree char *key = g_strdup_printf("gemm_%s", gemm_types[ti].name);
    g_autofree char *summary = gemm_summary(&r->gemm, ti);
    calib_profile_meta(p, key, "%s", summary);
  }
  calib_profile_meta(p, "fma_tflops", "%.2f (fp32 FMA kernel, no tensor cores)", r->fma_tflops);
  for (int i = 0; i < 3; i++) {
    g_autofree char *key = g_strdup_printf("overlap_%s", r->overlap[i].name);
    g_autofree char *text = overlap_text(&r->overlap[i]);
    calib_profile_meta(p, key, "%s", text);
  }
  GString *alloc = g_string_new(NULL);
  for (int i = 0; i < 3; i++) {
    g_autofree char *size = size_text(alloc_sizes[i]);
    g_string_append_printf(alloc, "%s%s:", i ? ", " : "", size);
    for (int k = 0; k < c->repeats; k++)
      g_string_append_printf(alloc, "%s%.6g", k ? "/" : "", r->alloc_samples[i][k] * 1e3);
  }
  calib_profile_meta(p, "host_alloc_ms", "%s", alloc->str);
  g_string_free(alloc, TRUE);
  return g_steal_pointer(&p);
}

/* The written text, loaded as a scenario would include it, gives the
 * measured link back: a check of the writer on real numbers. */
static void
verify(const CalibProfile *p)
{
  g_autoptr(GError) error = NULL;
  SimMachine m;
  if (!calib_profile_verify(p, &m, &error))
    die(1, "the profile does not load back: %s", error->message);
}

/* ---- main ------------------------------------------------------------- */

int
main(int argc, char **argv)
{
  g_autofree char *out = NULL;
  gboolean quick = FALSE;
  int device = 0;
  GOptionEntry entries[] = {
    { "out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "write the profile to FILE (atomically) instead of stdout", "FILE" },
    { "quick", 'q', 0, G_OPTION_ARG_NONE, &quick, "fewer sizes, shapes and samples: under a minute", NULL },
    { "device", 'd', 0, G_OPTION_ARG_INT, &device, "the CUDA device to measure (default 0)", "N" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) context = g_option_context_new("- measure a GPU's link, overlap and GEMMs for offsim");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error))
    die(2, "%s", error->message);
  if (argc > 1)
    die(2, "unexpected argument '%s'", argv[1]);

  select_device(device);
  Calib c = { .quick = quick, .device = device, .repeats = quick ? 3 : 7 };
  g_autofree Results *r = g_new0(Results, 1);
  CUDA_CHECK(cudaGetDeviceProperties(&r->prop, device));
  char bus[32] = "";
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  r->bus = g_ascii_strdown(bus, -1);
  c.pci_bus = r->bus;
  r->affinity = bind_to_gpu_node(&c);
  r->driver = driver_version();
  r->pcie_max = pcie_link(&c, "max_link_speed", "max_link_width");
  CUDA_CHECK(cudaRuntimeGetVersion(&r->runtime));
  CUDA_CHECK(cudaDriverGetVersion(&r->driver_api));
  progress("offsim-calib%s: %s (%d SMs, %.1f GiB), PCI %s, PCIe max %s, host %s, driver %s", quick ? " --quick" : "",
           r->prop.name, r->prop.multiProcessorCount, (double)r->prop.totalGlobalMem / GIB, r->bus, r->pcie_max,
           r->affinity, r->driver);

  gint64 t0 = g_get_monotonic_time();
  setup(&c, &r->prop);
  CUBLAS_CHECK(cublasGetVersion(c.blas, &r->cublas));

  progress("copies, pinned and pageable, 4 KiB to 1 GiB:");
  const char *names[4] = { "h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable" };
  for (int i = 0; i < 4; i++) {
    r->sweeps[i] = (Sweep){ .name = names[i], .dir = i % 2 == 0, .pinned = i < 2 };
    sweep(&c, &r->sweeps[i]);
  }
  r->fit[1] = fit_sweep(&r->sweeps[0]);
  r->fit[0] = fit_sweep(&r->sweeps[1]);
  for (int dir = 1; dir >= 0; dir--) {
    g_autofree char *text = fit_text(&r->fit[dir]);
    progress("  fit %s: %s", dir ? "H2D" : "D2H", text);
  }
  bidirectional(&c, &r->bidir);

  progress("device memory:");
  r->d2d_seconds = device_to_device(&c, &r->d2d_bytes);
  Work triad = { .kind = WORK_TRIAD, .count = 8 };
  r->triad_bandwidth = 3.0 * (double)c.tri_n * sizeof(float) / measure_one(&c, triad);
  g_autofree char *d2d = rate_text(2.0 * (double)r->d2d_bytes / r->d2d_seconds);
  g_autofree char *tri = rate_text(r->triad_bandwidth);
  progress("  device to device %s (read + write), triad %s", d2d, tri);

  progress("GEMM through cuBLAS:");
  gemms(&c, &r->gemm);

  progress("overlap with copies both ways:");
  /* Size the FMA kernel to about 2 ms a launch. */
  Work fma = { .kind = WORK_FMA, .count = 4 };
  double fma_time = measure_one(&c, fma);
  c.fma_iterations = (int)CLAMP(c.fma_iterations * 2e-3 / fma_time, 1024.0, (double)(1 << 24));
  fma_time = measure_one(&c, fma);
  r->fma_tflops = calib_fma_flops(c.fma_blocks, c.fma_threads, c.fma_iterations) / fma_time * 1e-12;
  CUDA_CHECK(calib_launch_fill(c.gemm_a, (size_t)8192 * 8192, CALIB_FILL_BF16, c.lane[0]));
  CUDA_CHECK(calib_launch_fill(c.gemm_w, (size_t)8192 * 8192, CALIB_FILL_BF16, c.lane[0]));
  Work gemm = { .kind = WORK_GEMM, .shape = &gemm_shapes[4], .type = &gemm_types[0] };
  overlap(&c, &r->bidir, gemm, "gemm_bf16", &r->overlap[0]);
  overlap(&c, &r->bidir, fma, "fma", &r->overlap[1]);
  overlap(&c, &r->bidir, triad, "triad", &r->overlap[2]);

  progress("pinned allocation (cudaHostAlloc):");
  for (int i = 0; i < 3; i++) {
    r->alloc[i] = host_alloc(&c, alloc_sizes[i], r->alloc_samples[i]);
    g_autofree char *size = size_text(alloc_sizes[i]);
    progress("  %8s: %.3f ms", size, r->alloc[i] * 1e3);
  }
  teardown(&c);

  g_autoptr(CalibProfile) profile = build_profile(&c, r);
  verify(profile);
  if (out) {
    if (!calib_profile_save(profile, out, &error))
      die(1, "%s", error->message);
  } else {
    g_autofree char *text = calib_profile_format(profile, &error);
    if (text == NULL)
      die(1, "%s", error->message);
    fputs(text, stdout);
  }
  const SimLink *l = &profile->link;
  g_autofree char *h2d = rate_text(l->h2d_bandwidth), *d2h_rate = rate_text(l->d2h_bandwidth);
  g_autofree char *both = rate_text(l->bidir_bandwidth), *lat = time_text(l->latency);
  progress("done in %.0f s: H2D %s, D2H %s, both %s, latency %s, pageable x%.2f, compute -%.1f%% during copies, "
           "bf16 %.0f TFLOPS%s%s",
           (double)(g_get_monotonic_time() - t0) * 1e-6, h2d, d2h_rate, both, lat, l->pageable_factor,
           100 * l->compute_slowdown, profile->matmul_tflops, out ? "; profile written to " : "", out ? out : "");
  g_free(r->bus);
  g_free(r->affinity);
  g_free(r->driver);
  g_free(r->pcie_max);
  g_free(r->bidir.pcie_during);
  return 0;
}
