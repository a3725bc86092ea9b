/* sim/engine/machine.h — the device and the host link, as the engine sees them.
 *
 * Plain value structs, with no pointers: copy them freely, nothing to free.
 * The scenario loader fills them (the defaults are the schema's:
 * sim_scenario_machine_defaults in sim/input); the engine reads the link and
 * the workload generators read the device.  Rates are bytes per second,
 * times seconds, sizes bytes.
 *
 * Invariants the loader guarantees and the engine relies on (it asserts the
 * first two): bandwidths > 0; 0 <= compute_slowdown < 1; 0 <
 * pageable_factor <= 1; a calibrated table holds at most
 * SIM_LINK_MAX_POINTS points, sorted by size, with bandwidths > 0.
 * docs/engine.md describes how copies use them.
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

/* A measured size -> bandwidth point (offsim-calib writes them). */
typedef struct {
  guint64 bytes;
  double bandwidth; /* bytes / measured time of one copy of this size, fixed cost included */
} SimBandwidthPoint;

/* A copy's direction; also the index of everything the link and the
 * engine keep per direction (bandwidths, tables, copy engines). */
typedef enum {
  SIM_DIR_D2H = 0,
  SIM_DIR_H2D = 1,
  SIM_DIR_COUNT, /* the number of directions: size of per-direction arrays */
} SimDir;

/* The most GPUs a node places on switches and sockets. */
#define SIM_NODE_MAX_GPUS 256

/* What the GPUs of one node share on their way to host memory ([node]).
 * GPU g sits behind switch g / gpus_per_switch and on socket socket_of[g].
 * Every host copy in flight takes its share of each link it crosses, max-min
 * fairly with the per-GPU limits (docs/engine.md):
 *
 *   switch uplink   PCIe is full duplex: the D2H copies of a switch's GPUs
 *                   share switch_bandwidth, and so do its H2D copies;
 *   socket memory   every host copy of the socket's GPUs, both directions
 *                   together (DRAM reads and writes share one bandwidth).
 *
 * A bandwidth of 0 is "not shared" (no such limit), the default, so a
 * single-GPU scenario without [node] runs as it always has. */
typedef struct {
  guint gpus_per_switch;        /* >= 1 */
  double switch_bandwidth;      /* B/s per direction of one uplink; 0: no shared uplink */
  guint sockets;                /* >= 1 */
  double host_memory_bandwidth; /* B/s of one socket's memory, both directions; 0: not limited */
  guint8 socket_of[SIM_NODE_MAX_GPUS]; /* per GPU: its socket, < sockets */
} SimNode;

/* The most points one calibrated table holds. */
#define SIM_LINK_MAX_POINTS 64

typedef struct {
  double h2d_bandwidth;    /* pinned, large copies, host to device */
  double d2h_bandwidth;    /* pinned, large copies, device to host */
  double bidir_bandwidth;  /* both directions at once, in total */
  double latency;          /* fixed cost per copy, seconds */
  double pageable_factor;  /* bandwidth multiplier for pageable host memory, (0, 1] */
  double compute_slowdown; /* fraction compute loses while any copy is in flight, [0, 1) */
  double host_alloc;       /* seconds per pinned allocation when buffers are not pooled */
  /* Optional calibrated tables, by SimDir, sorted by size; 0 points = use
   * latency + bytes / bandwidth. */
  SimBandwidthPoint table[SIM_DIR_COUNT][SIM_LINK_MAX_POINTS];
  guint table_points[SIM_DIR_COUNT];
  SimNode node;            /* what the GPUs of one node share ([node]) */
} SimLink;

typedef struct {
  SimDevice device;
  SimLink link;
} SimMachine;

/* Seconds one copy of `bytes` takes alone on the link in direction `dir`,
 * pageable or pinned.  Without a table: latency +
 * bytes / bandwidth.  With one: the measured time, interpolated linearly in
 * bytes between the two nearest sizes (beyond the ends, at the end point's
 * bandwidth), and never less than `latency` (the latency floor).  Pageable
 * copies take the part above the latency 1 / pageable_factor times longer. */
double sim_link_copy_time(const SimLink *link, SimDir dir, guint64 bytes, gboolean pageable);

G_END_DECLS
