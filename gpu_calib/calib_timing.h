/* gpu_calib/calib_timing.h — the timing harness: what can be enqueued, the
 * context that holds the device's streams and buffers, and the timing of
 * batches.
 *
 * A Calib owns everything the measurements run on: CALIB_MAX_LANES
 * non-blocking streams ("lanes") with a start and a stop event each, a
 * host-mapped flag that releases spin kernels, the copy buffers (device,
 * pinned and pageable, each max_copy bytes), the FMA and triad kernels'
 * buffers, a cuBLAS handle with a preallocated workspace, and the GEMM
 * operands, sized for the largest of calib_timing_gemm_shapes and of the
 * GEMM list (`list`, which the caller sets before the set-up).
 * calib_timing_setup allocates all of it, outside every timed region, and
 * calib_timing_teardown frees all of it; in between, nothing the harness
 * does allocates (cuBLAS is handed its workspace back after every
 * cublasSetStream), so that no allocation, and no synchronisation it might
 * bring, falls inside a timing.  pci_bus is borrowed: the caller keeps it
 * alive as long as the Calib.
 *
 * A CalibWork is `count` operations of one kind for one lane, at most
 * CALIB_MAX_BATCH of them: few enough that enqueueing never blocks on a full
 * command queue, which would deadlock behind a spin kernel.  Held timings
 * (docs/reference.md, "Measuring the link") put one spin kernel ahead of each
 * lane's batch and release them all once everything is enqueued; pageable
 * copies must not be held (the driver synchronises the stream before staging
 * them).  A figure is the median of `repeats` samples after one warm-up, in
 * seconds per operation.  Every CUDA and cuBLAS call is checked
 * (calib_report.h): a failure ends the program, as does a spin kernel that
 * timed out.
 */
#pragma once

#include "gpu_calib/calib_kernels.h"
#include "gpu_calib/calib_shapes.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <glib.h>

G_BEGIN_DECLS

#define CALIB_MAX_REPEATS 16
#define CALIB_MAX_LANES 3
#define CALIB_MAX_BATCH 64

/* ---- what is timed ------------------------------------------------------ */

typedef struct {
  const char *name;
  cudaDataType_t type;
  cublasComputeType_t compute;
  size_t bytes;
  CalibFillType fill;
} CalibGemmType;

/* Transformer shapes, forward layout (the square 8192^3 reference at CALIB_GEMM_SQUARE) and
 * the dtypes, bf16 first. */
#define CALIB_GEMM_SHAPES 6
#define CALIB_GEMM_SQUARE 4
#define CALIB_GEMM_TYPES 4
extern const CalibGemmShape calib_timing_gemm_shapes[CALIB_GEMM_SHAPES];
extern const CalibGemmType calib_timing_gemm_types[CALIB_GEMM_TYPES];

typedef enum {
  CALIB_WORK_NONE,
  CALIB_WORK_COPY,
  CALIB_WORK_FMA,
  CALIB_WORK_TRIAD,
  CALIB_WORK_GEMM,
  CALIB_WORK_COPY_KERNEL,
} CalibWorkKind;

/* `count` operations of one kind, for one stream.  COPY and COPY_KERNEL
 * use dst, src and bytes (COPY its dir too); GEMM its shape (whose pass
 * gives the operands' layout) and type. */
typedef struct {
  CalibWorkKind kind;
  int count;
  void *dst;
  const void *src;
  size_t bytes;
  enum cudaMemcpyKind dir;
  const CalibGemmShape *shape;
  const CalibGemmType *type;
} CalibWork;

typedef struct {
  gboolean quick;
  int device;
  int repeats;
  int sms;
  cudaStream_t lane[CALIB_MAX_LANES];
  cudaEvent_t start[CALIB_MAX_LANES], stop[CALIB_MAX_LANES];
  volatile int *flag, *timed_out; /* host-mapped */
  int *flag_dev, *timed_out_dev;
  /* Copies: device and pinned buffers of the largest size, a pageable one. */
  guint64 max_copy;
  void *dev_a, *dev_b, *pin_a, *pin_b, *pageable;
  /* Kernels. */
  float *fma_out, *tri_a, *tri_b, *tri_c;
  size_t tri_n;
  int fma_blocks, fma_threads, fma_iterations;
  const CalibGemmShape *list; /* the GEMM list; borrowed */
  guint list_n;
  cublasHandle_t blas;
  void *gemm_a, *gemm_w, *gemm_c, *blas_workspace;
  const char *pci_bus; /* lower-case sysfs name, or NULL; borrowed */
} Calib;

/* ---- set-up ------------------------------------------------------------- */

/* Allocates and fills every stream, event and buffer of `c`, whose quick
 * field is set, on the current device. */
void calib_timing_setup(Calib *c, const struct cudaDeviceProp *prop);
/* Waits for the device and frees what calib_timing_setup allocated. */
void calib_timing_teardown(Calib *c);

/* The largest A (m x k), W (n x k) and C (m x n) over
 * calib_timing_gemm_shapes and c's list, in elements. */
void calib_timing_gemm_elements(const Calib *c, size_t *a, size_t *w, size_t *out);

/* ---- timing ------------------------------------------------------------- */

/* Enqueues `count` operations of `w` on lane `lane`, untimed. */
void calib_timing_enqueue(Calib *c, int lane, const CalibWork *w, int count);

/* How a sample is launched, a mask: CALIB_TIMING_HELD, behind one spin
 * kernel per lane, released together once all is enqueued (pageable copies
 * must not be held: see above); CALIB_TIMING_NONE, each lane runs as it is
 * enqueued. */
#define CALIB_TIMING_NONE 0u
#define CALIB_TIMING_HELD (1u << 0)

/* One sample: the works of lanes 0..n-1 between their events, launched as
 * `flags` says (CALIB_TIMING_*); per-op seconds into `per_op`. */
void calib_timing_run_once(Calib *c, const CalibWork *works, int n, guint flags, double *per_op);

/* A warm-up, then c->repeats samples launched as `flags` says; per lane,
 * the median seconds per op into `median` and, when `samples` is not NULL,
 * lane 0's samples. */
void calib_timing_measure(Calib *c, const CalibWork *works, int n, guint flags, double *median, double *samples);

/* The held median seconds per op of one work alone. */
double calib_timing_measure_one(Calib *c, CalibWork w);

/* How many operations of `seconds_per_op` fill `target_seconds`: at least
 * `min_count`, at most CALIB_MAX_BATCH. */
int calib_timing_batch_for(double target_seconds, double seconds_per_op, int min_count);

G_END_DECLS
