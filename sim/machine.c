#include "machine.h"

void
sim_machine_defaults(SimMachine *m)
{
  *m = (SimMachine){
    .device = { .memory = 0, .matmul_flops = 0, .efficiency = 0.5, .hbm_bandwidth = 0 },
    .link = {
      .h2d_bandwidth = 0,
      .d2h_bandwidth = 0,
      .bidir_bandwidth = 0, /* 0 here means "the sum of both directions", resolved by the loader */
      .latency = 0,
      .pageable_factor = 0.5,
      .compute_slowdown = 0,
      .host_alloc = 3e-3, /* published cudaHostAlloc cost, REFERENCE.md */
    },
  };
}
