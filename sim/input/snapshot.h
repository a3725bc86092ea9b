/* sim/input/snapshot.h — what a PyTorch memory snapshot of a real run
 * measured, for `offsim check --snapshot`: the pickle that
 * torch.cuda.memory._dump_snapshot writes (plain or gzip-compressed), read
 * without Python (sim/input/pickle.h).
 *
 * The snapshot is a dict:
 *   segments          what the caching allocator holds from CUDA at the dump:
 *                     each with device, total_size (reserved) and
 *                     allocated_size (its live blocks);
 *   device_traces     per device, the allocator's last events before the dump
 *                     (torch.cuda.memory._record_memory_history): action
 *                     (alloc, free_requested, free_completed, segment_alloc,
 *                     segment_free, segment_map, segment_unmap, snapshot,
 *                     oom), size, time_us;
 *   external_annotations  (optional) record_function ranges: name, stage
 *                     START or END, device, time_us.
 *
 * Allocated bytes are what `alloc` adds and `free_completed` takes away
 * (a block freed while another stream still uses it stays allocated until
 * then, as torch.cuda.memory_allocated counts it); reserved bytes are what
 * segment_alloc and segment_map add and segment_free and segment_unmap take
 * away.  The trace usually starts after the run did (the ring buffer keeps
 * the last entries; recording starts late), so the level before its first
 * event is worked back from the dump: the segments' sum minus the trace's
 * net change.  A level that falls below 0 on the way is an inconsistent
 * snapshot, an error.  Peaks are over the trace and the dump; without trace
 * events they are the dump's levels alone (has_trace FALSE).
 *
 * Ranges: each START matched with the next END of the same name and device;
 * per range the allocated bytes at its start, at its most inside it and at
 * its end.  Nothing is inferred from stack frames.
 *
 * Everything is reported for one device: the one whose allocated bytes
 * peak highest (the lowest index on a tie).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  char *name;
  double start_s, seconds; /* start from the device's first trace event */
  gint64 start_bytes, peak_bytes, end_bytes; /* allocated */
} SimSnapshotRange;

typedef struct {
  guint device, devices; /* the device reported; devices with segments or events */
  guint segments;        /* the device's, at the dump */
  gint64 reserved_bytes, allocated_bytes; /* at the dump */
  gboolean has_trace;
  gboolean untimed;      /* trace events without time_us (PyTorch 2.0): no ranges */
  guint events;          /* the device's trace events */
  double trace_seconds;  /* first to last event */
  gint64 peak_allocated_bytes, peak_reserved_bytes;
  guint annotations;     /* external_annotations entries, all devices */
  GArray *ranges;        /* SimSnapshotRange of the device, by start */
} SimSnapshot;

/* Reads `path` (gzip when it starts with gzip's magic); errors are
 * SIM_ERROR_INPUT naming the file and what was expected. */
SimSnapshot *sim_snapshot_load(const char *path, GError **error);
/* The same for the pickle's bytes (not gzip); `origin` names it in errors. */
SimSnapshot *sim_snapshot_load_data(const char *data, gsize length, const char *origin, GError **error);
void sim_snapshot_free(SimSnapshot *snapshot);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimSnapshot, sim_snapshot_free)

G_END_DECLS
