/* sim/machine.h — the device and the host link, as the engine sees them.
 *
 * Plain value structs, filled by the scenario loader (defaults in one place:
 * sim_machine_defaults) and read by the engine and the workload generators.
 * Rates are bytes per second, times seconds, sizes bytes.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint64 memory;       /* device capacity: `fits` is peak <= memory */
  double matmul_flops;  /* FLOP/s for generated workloads (0 = not given) */
  double efficiency;    /* fraction of matmul_flops that matmuls reach, (0, 1] */
  double hbm_bandwidth; /* B/s for memory-bound ops of generated workloads (0 = not given) */
} SimDevice;

typedef struct {
  double h2d_bandwidth;    /* pinned, large copies, host to device */
  double d2h_bandwidth;    /* pinned, large copies, device to host */
  double bidir_bandwidth;  /* both directions at once, in total */
  double latency;          /* fixed cost per copy, seconds */
  double pageable_factor;  /* bandwidth multiplier for pageable host memory, (0, 1] */
  double compute_slowdown; /* fraction compute loses while any copy is in flight, [0, 1) */
  double host_alloc;       /* seconds per pinned allocation when buffers are not pooled */
} SimLink;

typedef struct {
  SimDevice device;
  SimLink link;
} SimMachine;

/* The documented defaults of every optional [device] and [link] key. */
void sim_machine_defaults(SimMachine *machine);

G_END_DECLS
