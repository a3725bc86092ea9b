/* sim/engine/collective.h — what one collective (all-reduce, all-gather,
 * reduce-scatter, all-to-all) among a group of GPUs costs, and how many nodes the group
 * spans.
 *
 * Tensor parallelism all-reduces (or, with sequence parallelism,
 * all-gathers and reduce-scatters) activations inside every layer; data
 * parallelism all-reduces the gradients once a step.  The engine's
 * collective op and the lowering that emits it need two numbers from the
 * machine: how long one collective takes, and which fabric it crosses.  This
 * module gives both, as pure functions of the SimLink's figures: no state,
 * nothing to free.
 *
 * The cost model is NCCL's ring, as nccl-tests defines bus bandwidth
 * (NVIDIA/nccl-tests, doc/PERFORMANCE.md, "Bus Bandwidth"): with n ranks
 * each of link bandwidth B and S the size of the whole buffer, an all-reduce
 * moves 2(n-1)/n S through every rank's link, so it takes at best
 * t = S/B × 2(n-1)/n; a reduce-scatter or an all-gather does half of that
 * work, t = S/B × (n-1)/n (S the whole array, recvcount × n or sendcount × n
 * elements); an all-to-all, where each rank sends S in all (count × n
 * elements, a 1/n share to each rank, itself included), moves (n-1)/n S
 * through its link too: the summary of the same page lists "AlltoAll:
 * (n-1)/n".  nccl-tests reports busbw = algbw × that factor precisely so
 * that the figure does not depend on n and compares with the hardware's; so
 * a measured busbw is the B of this formula, and the profiles' figures are
 * busbw measurements.  Here
 *
 *   time = latency + factor(kind, n) × bytes / bandwidth
 *
 * with [node] collective_latency and collective_bandwidth when the group
 * sits inside one node, and [network] latency and bandwidth when it spans
 * several: a ring through every rank crosses the network at least once, and
 * its slowest link sets the pace.  What this leaves out, on purpose: NCCL's
 * tree and NVLS (NVLink SHARP) algorithms, which beat the ring on large
 * all-reduces (a measured 480 against 367 GB/s busbw on 8 H200), the
 * protocol switch at small sizes (a single latency stands for it), and a
 * hierarchical cross-node all-reduce, which runs its intra-node part at
 * NVLink speed (so a group spanning nodes is charged the network for all of
 * it: pessimistic when a node holds several of its ranks).
 *
 * Placement.  Ranks are numbered as Megatron-LM numbers them (tensor
 * parallel innermost, sim_parallel_global_rank in sim/model/parallel.h), and
 * a node holds the consecutive ranks node × gpus .. node × gpus + gpus - 1;
 * a group is first_rank, first_rank + stride, ... (a TP group: stride 1; a
 * DP group: stride tp).  sim_collective_nodes counts the nodes it touches.
 *
 * The cost of a call: O(1) for the time, O(ranks) for the nodes.
 */
#pragma once

#include "engine/machine.h"

G_BEGIN_DECLS

typedef enum {
  SIM_COLLECTIVE_ALL_REDUCE,
  SIM_COLLECTIVE_ALL_GATHER,
  SIM_COLLECTIVE_REDUCE_SCATTER,
  SIM_COLLECTIVE_ALL_TO_ALL, /* expert parallelism's token dispatch and combine: over the EP group */
  SIM_COLLECTIVE_COUNT,
} SimCollectiveKind;

/* "all-reduce", "all-gather", "reduce-scatter", "all-to-all", NULL: indexed by the kind. */
extern const char *const sim_collective_names[];

/* How many distinct nodes a group of `ranks` global ranks first_rank,
 * first_rank + stride, ... spans with gpus_per_node GPUs per node (rank r on
 * node r / gpus_per_node).  0 ranks span 0 nodes; stride and gpus_per_node
 * are at least 1. */
guint sim_collective_nodes(guint first_rank, guint stride, guint ranks, guint gpus_per_node);

/* The factor of `bytes` / bandwidth one collective of `kind` over `ranks`
 * ranks moves through each rank's link: 2(n-1)/n for an all-reduce, (n-1)/n
 * for an all-gather, a reduce-scatter or an all-to-all (nccl-tests' busbw
 * factors); 0 for one rank. */
double sim_collective_factor(SimCollectiveKind kind, guint ranks);

/* Seconds one collective over `ranks` ranks takes, `bytes` being the whole
 * (unsharded) buffer, for an all-to-all what each rank sends in all:
 * latency + sim_collective_factor × bytes / bandwidth,
 * within one node (nodes <= 1) at link->node.collective_latency and
 * collective_bandwidth, across nodes at link->network's latency and
 * bandwidth.  1 rank (or 0): 0 seconds, no latency either (nothing is
 * launched). */
double sim_collective_time(const SimLink *link, SimCollectiveKind kind, guint64 bytes, guint ranks, guint nodes);

G_END_DECLS
