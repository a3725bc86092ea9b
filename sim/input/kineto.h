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
 * Nothing else is inferred: a trace without ProfilerStep annotations has
 * no step time (steps 0).  A file that is not a Chrome trace (no
 * traceEvents array) is SIM_ERROR_INPUT naming the file.
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

typedef struct {
  guint events;
  guint steps;
  double step_seconds;   /* mean over the steps, 0 without */
  guint kernels;
  double kernel_seconds; /* summed */
  SimKinetoCopies copies[SIM_KINETO_DIRECTIONS];
} SimKineto;

extern const char *const sim_kineto_direction_names[SIM_KINETO_DIRECTIONS]; /* "H2D", "D2H", "other" */

/* Reads `path` (gzip when it starts with gzip's magic) into `out`. */
gboolean sim_kineto_load(const char *path, SimKineto *out, GError **error);

G_END_DECLS
