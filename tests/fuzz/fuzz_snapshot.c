/* Fuzz target: a PyTorch memory snapshot's pickle (sim/input/pickle.c), then
 * what offsim check reads of it (sim/input/snapshot.c). */
#include "input/snapshot.h"

#include "fuzz_common.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimSnapshot) s = sim_snapshot_load_data((const char *)data, size, "fuzz.pickle", &error);
  fuzz_expect_input_error(error, "sim_snapshot_load_data");
  if (s == NULL)
    return 0;
  /* What it read holds together: the peaks are at least the dump's levels, ranges nonnegative. */
  if (s->has_trace && (s->peak_allocated_bytes < s->allocated_bytes || s->peak_reserved_bytes < s->reserved_bytes))
    abort();
  for (guint i = 0; i < s->ranges->len; i++) {
    const SimSnapshotRange *r = &g_array_index(s->ranges, SimSnapshotRange, i);
    if (r->start_bytes < 0 || r->peak_bytes < r->start_bytes || r->peak_bytes < r->end_bytes)
      abort();
  }
  return 0;
}
