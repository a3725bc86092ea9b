#include "engine/machine.h"

static double
table_time(const SimBandwidthPoint *t, guint n, guint64 bytes)
{
  double b = (double)bytes;
  if (bytes <= t[0].bytes)
    return b / t[0].bandwidth;
  for (guint i = 1; i < n; i++) {
    if (bytes <= t[i].bytes) {
      double t0 = (double)t[i - 1].bytes / t[i - 1].bandwidth, t1 = (double)t[i].bytes / t[i].bandwidth;
      double x = (b - (double)t[i - 1].bytes) / (double)(t[i].bytes - t[i - 1].bytes);
      return t0 + x * (t1 - t0);
    }
  }
  /* Past the largest size: its time plus the rest at its bandwidth. */
  return (double)t[n - 1].bytes / t[n - 1].bandwidth + (b - (double)t[n - 1].bytes) / t[n - 1].bandwidth;
}

double
sim_link_copy_time(const SimLink *l, SimDir dir, guint64 bytes, SimHostMemory host)
{
  double bw = dir == SIM_DIR_D2H ? l->d2h_bandwidth : l->h2d_bandwidth;
  double t = l->table_points[dir] ? MAX(l->latency, table_time(l->table[dir], l->table_points[dir], bytes))
                                  : l->latency + (double)bytes / bw;
  return host == SIM_HOST_PAGEABLE ? l->latency + (t - l->latency) / l->pageable_factor : t;
}
