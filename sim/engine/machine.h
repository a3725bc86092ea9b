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
 * SIM_LINK_MAX_POINTS points, sorted by size, with bandwidths > 0; the
 * collective figures of SimNode and SimNetwork: bandwidths > 0, latencies
 * >= 0, 0 <= collective_slowdown < 1, 1 <= gpus <= SIM_NODE_MAX_GPUS and a
 * multiple of gpus_per_switch.
 * docs/engine.md describes how copies use them; sim/engine/collective.h how
 * a collective uses the node's and the network's figures.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The most points a measured GEMM table ([device] gemm_table) holds. */
#define SIM_DEVICE_MAX_GEMM_POINTS 128

/* One measured GEMM: C[m x n] = A[m x k] B[k x n] in `dtype` ran at `flops`
 * (2 m n k / measured seconds).  offsim-calib writes them. */
typedef struct {
  guint dtype; /* a SimDtype (kernel.h, which includes this header) */
  guint64 m, n, k;
  double flops;
} SimGemmPoint;

/* The flat time model reads matmul_flops, efficiency and hbm_bandwidth; the
 * kernel model (kernel.h) the rest, and hbm_bandwidth as the achievable
 * bandwidth.  0 is "not given" for every figure after `efficiency`. */
typedef struct {
  guint64 memory;       /* device capacity: what `fits` judges reserved bytes against (sim/result/result.h) */
  double matmul_flops;  /* FLOP/s for generated workloads (0 = not given) */
  double efficiency;    /* fraction of matmul_flops that matmuls reach, (0, 1] */
  double hbm_bandwidth; /* B/s for memory-bound ops of generated workloads (0 = not given) */
  /* Maximum achievable dense matmul FLOP/s by SimDtype: fp32 (no TF32),
   * bf16, fp16. */
  double dtype_flops[3];
  guint sm_count;
  guint gemm_tile_m, gemm_tile_n; /* the output tile of cuBLAS's kernel at large shapes */
  double attention_flops;          /* 16-bit fused attention, forward, FLOP/s */
  double attention_backward_flops; /* and backward */
  double launch_overhead;          /* host seconds to issue one kernel */
  SimGemmPoint gemm_table[SIM_DEVICE_MAX_GEMM_POINTS];
  guint gemm_points;
  /* PyTorch's caching allocator runs with expandable_segments:True
   * (sim/engine/allocator.h): what the reserved bytes are replayed under. */
  gboolean expandable_segments;
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

/* The host memory a copy reads or writes: pinned (an asynchronous DMA at
 * the link's rates) or pageable (staged through a pinned bounce buffer at
 * pageable_factor, and the host blocks until it is done). */
typedef enum {
  SIM_HOST_PINNED,
  SIM_HOST_PAGEABLE,
} SimHostMemory;

/* The most GPUs a node places on switches and sockets. */
#define SIM_NODE_MAX_GPUS 256

/* What the GPUs of one node share on their way to host memory, and how fast
 * they reach each other ([node]).
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
 * single-GPU scenario without [node] runs as it always has.
 *
 * The collective figures (sim/engine/collective.h) describe the node's
 * GPU-to-GPU fabric (NVLink and NVSwitch on an HGX board): `gpus` GPUs per
 * node, a collective among them reaching collective_bandwidth of NCCL's bus
 * bandwidth per GPU after collective_latency, and taking collective_slowdown
 * of the compute of every GPU it runs on (NCCL's kernels occupy SMs).  A PCIe
 * switch sits inside one node, so gpus is a multiple of gpus_per_switch. */
typedef struct {
  guint gpus_per_switch;        /* >= 1 */
  double switch_bandwidth;      /* B/s per direction of one uplink; 0: no shared uplink */
  guint sockets;                /* >= 1 */
  double host_memory_bandwidth; /* B/s of one socket's memory, both directions; 0: not limited */
  guint8 socket_of[SIM_NODE_MAX_GPUS]; /* per GPU: its socket, < sockets */
  guint gpus;                   /* GPUs per node, 1 .. SIM_NODE_MAX_GPUS, a multiple of gpus_per_switch */
  double collective_bandwidth;  /* B/s of bus bandwidth (nccl-tests' busbw) per GPU within a node, > 0 */
  double collective_latency;    /* seconds: the fixed cost of one collective within a node, >= 0 */
  double collective_slowdown;   /* fraction of compute a GPU loses while a collective runs on it, [0, 1) */
  double host_optimizer_rate;   /* parameters per second the node's CPUs update (CPU-Adam), shared by its ranks, > 0 */
} SimNode;

/* Between nodes ([network]): each GPU's share of its node's NICs (8 x 400
 * Gb/s InfiniBand NDR on a DGX H100: 50 GB/s per GPU) and the fixed cost of
 * a collective that leaves the node. */
typedef struct {
  double bandwidth; /* B/s per GPU between nodes, > 0 */
  double latency;   /* seconds, >= 0 */
} SimNetwork;

/* The most points one calibrated table holds. */
#define SIM_LINK_MAX_POINTS 64

typedef struct {
  double h2d_bandwidth;    /* pinned, large copies, host to device */
  double d2h_bandwidth;    /* pinned, large copies, device to host */
  double bidir_bandwidth;  /* both directions at once, in total */
  double latency;          /* fixed cost per copy, seconds */
  double pageable_factor;  /* bandwidth multiplier for pageable host memory, (0, 1] */
  double compute_slowdown; /* fraction compute loses while any copy is in flight, [0, 1) */
  double host_alloc;       /* seconds per cudaHostAlloc (one per pinned host buffer allocated) */
  /* [scenario] step = first: the step simulated is a run's first, so pinned
   * buffers that a pool or PyTorch's caching host allocator keeps across
   * steps do not exist yet and are allocated in it (sim/lower/lower.h,
   * "pinned").  FALSE: a steady step, the default. */
  gboolean first_step;
  /* Optional calibrated tables, by SimDir, sorted by size; 0 points = use
   * latency + bytes / bandwidth. */
  SimBandwidthPoint table[SIM_DIR_COUNT][SIM_LINK_MAX_POINTS];
  guint table_points[SIM_DIR_COUNT];
  SimNode node;            /* what the GPUs of one node share ([node]) */
  SimNetwork network;      /* between nodes ([network]) */
} SimLink;

typedef struct {
  SimDevice device;
  SimLink link;
} SimMachine;

/* Whether the copies of different GPUs share links ([node]
 * switch_bandwidth or host_memory_bandwidth): the engine's progressive
 * filling over them (docs/engine.md, "Shared node links"). */
static inline gboolean
sim_link_node_shared(const SimLink *link)
{
  return link->node.switch_bandwidth > 0 || link->node.host_memory_bandwidth > 0;
}

/* Seconds one copy of `bytes` takes alone on the link in direction `dir`,
 * from or to `host` memory (pinned or pageable).  Without a table: latency +
 * bytes / bandwidth.  With one: the measured time, interpolated linearly in
 * bytes between the two nearest sizes (beyond the ends, at the end point's
 * bandwidth), and never less than `latency` (the latency floor).  Pageable
 * copies take the part above the latency 1 / pageable_factor times longer. */
double sim_link_copy_time(const SimLink *link, SimDir dir, guint64 bytes, SimHostMemory host);

G_END_DECLS
