/* sim/input/kineto.h — what a Kineto trace of real steps measured
 * (torch.profiler's Chrome-trace JSON, plain or gzip-compressed), for
 * `offsim check`: the figures offsim predicts that such a trace shows
 * directly.
 *
 * Read from the trace's events (cat, name, ts, dur in microseconds, args):
 *   steps     the "ProfilerStep#N" annotations (cat "user_annotation"), their
 *             count and mean duration: the step time;
 *   kernels   the GPU kernels (cat "kernel"), their count and summed
 *             duration: the GPU's busy time;
 *   copies    the GPU copies (cat "gpu_memcpy") by direction, from their
 *             name ("Memcpy HtoD ...", "Memcpy DtoH ...", others): count,
 *             args "bytes", summed duration, and the bandwidth achieved
 *             (bytes over the summed duration).
 *   device    the top-level "deviceProperties" entry of the kernels' device
 *             (name, totalGlobalMem, numSms), when the trace has one;
 *   gemms     the CPU ops aten::mm, addmm, bmm and baddbmm whose "Input Dims"
 *             the trace recorded (record_shapes=True), with the kernels
 *             launched inside them (a cuda_runtime launch on the op's thread
 *             within its time, its "correlation" the kernel's): per dtype
 *             and shape, the ops, FLOPs (2·m·n·k·batch) and kernel time;
 *   pinned    the copies from or to pinned host memory ("Pinned" in the
 *             name), by direction and size, for link rates; pageable copies
 *             add the host's own copy and are kept apart;
 *   dtod      device-to-device copies of at least 1 MiB, for HBM bandwidth;
 *   layers    the ranges of one layer module class (python_function or
 *             user_annotation events named "nn.Module: CLASS_N", CLASS the
 *             most frequent class whose name holds "Layer" or "Block"), in
 *             order of their first start: per layer the kernel time launched
 *             inside its forward ranges, and the kernel time launched inside
 *             the backward ops ("Sequence number" equal to a forward op's
 *             inside the layer, on another thread) of that layer.
 * Nothing else is inferred: a trace without ProfilerStep annotations has
 * no step time (steps 0), one without module ranges no layers.  A file
 * that is not a Chrome trace (no traceEvents array) is SIM_ERROR_INPUT
 * naming the file.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SIM_KINETO_H2D,
  SIM_KINETO_D2H,
  SIM_KINETO_OTHER, /* device to device, peer */
  SIM_KINETO_DIRECTIONS,
} SimKinetoDirection;

typedef struct {
  guint count;
  guint64 bytes;
  double seconds;
} SimKinetoCopies;

/* One GEMM shape of one dtype ("fp32", "bf16", "fp16"). */
typedef struct {
  char dtype[8];
  guint64 m, n, k;
  guint ops, kernels;
  double flops, seconds; /* summed over the ops; seconds of their kernels */
} SimKinetoGemm;

/* The pinned copies of one direction and size. */
typedef struct {
  SimKinetoDirection direction;
  guint64 size;
  guint count;
  double seconds;
} SimKinetoCopySize;

typedef struct {
  guint index;            /* N of "nn.Module: CLASS_N" */
  guint forward_ranges, backward_ops;
  double forward_seconds, backward_seconds; /* kernel time */
} SimKinetoLayer;

typedef struct {
  guint events;
  guint steps;
  double step_seconds;   /* mean over the steps, 0 without */
  guint kernels;
  double kernel_seconds; /* summed */
  SimKinetoCopies copies[SIM_KINETO_DIRECTIONS];
  /* Device properties of the kernels' device, when the trace has them. */
  gboolean has_device;
  gint64 device_id, device_memory, device_sms;
  char *device_name;
  guint gemm_ops_without_shapes; /* GEMM ops the trace recorded no Input Dims for */
  GArray *gemms;       /* SimKinetoGemm, by dtype and shape */
  SimKinetoCopies pinned[2], pageable[2]; /* H2D, D2H */
  GArray *pinned_sizes; /* SimKinetoCopySize, by direction and size */
  SimKinetoCopies dtod;  /* device-to-device copies of at least 1 MiB */
  char *layer_class;     /* CLASS of the layer ranges, or NULL: none */
  GArray *layers;        /* SimKinetoLayer, in order of first start */
} SimKineto;

extern const char *const sim_kineto_direction_names[SIM_KINETO_DIRECTIONS]; /* "H2D", "D2H", "other" */

/* Reads `path` (gzip when it starts with gzip's magic) into `out`, which
 * sim_kineto_clear frees (also after a failure). */
gboolean sim_kineto_load(const char *path, SimKineto *out, GError **error);
void sim_kineto_clear(SimKineto *k);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SimKineto, sim_kineto_clear)

G_END_DECLS
