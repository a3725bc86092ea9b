/* sim/result/result.h — the figures of one policy on one scenario.
 *
 * A SimResult is what `offsim run` prints and what the planner compares:
 * the JSON fields of docs/scenarios.md (Report formats) plus where each peak happened and
 * what was live then.  It may keep the program and run it came from (for
 * plots and traces); it owns them if so.
 *
 * Definitions:
 *   compute_ms   nominal forward + backward work (at full rate);
 *   recompute_ms nominal recompute work;
 *   optimizer_ms nominal optimizer-step work (at full rate);
 *   comm_ms      seconds a collective ran while its GPU computed nothing:
 *                the communication compute waited for (the GPU that
 *                waited most);
 *   exposed_transfer_ms = step - compute - recompute - optimizer - comm:
 *                everything else the compute stream lost, to copies,
 *                waiting, the host and slowdown (at least 0);
 *   under [parallel] compute and recompute are the busiest GPU's, so that
 *                exposed also holds the pipeline's bubble (`stages` has
 *                each stage's busy and bubble time); copy bytes and counts
 *                are every GPU's;
 *   saved_bytes  the distinct tensors saved for backward (what resident
 *                keeps), whatever the policy does with them;
 *   peak_reserved_bytes  what PyTorch's caching allocator holds from CUDA
 *                at its most (sim/result/reserved.h: the run's device
 *                allocations replayed through sim/engine/allocator.h on the
 *                GPU that reserves the most);
 *   fragmentation_bytes  peak_reserved_bytes minus that allocator's peak
 *                of allocated blocks: what segments, rounding and the
 *                per-stream cache hold beyond what the tensors ever held
 *                at once;
 *   fits         every allocation of the replay fitted the capacity (device
 *                memory or --budget), cached segments released first as
 *                PyTorch does before its out-of-memory error: a judgement of
 *                reserved bytes, not allocated ones (sim_result_reserve;
 *                before it, peak device bytes <= capacity).
 */
#pragma once

#include "engine/engine.h"
#include "model/parallel.h"
#include "model/workload.h"

G_BEGIN_DECLS

typedef struct {
  gint64 bytes;
  double time_ms;
  const char *phase; /* static string */
  gint32 layer;      /* SIM_NO_LAYER when none */
  char *where;       /* "L23", or the op's name when it has no layer ("head"), or "" */
  char *live;        /* "static 7.36 GiB + saved L0-L23 1.19 GiB + workspace L23 20.0 MiB" */
} SimResultPeak;

/* One pipeline stage: the worst of its replicas (JSON `stages`). */
typedef struct {
  guint stage;
  guint layers;
  gint64 peak_device_bytes, peak_host_bytes;
  guint64 d2h_bytes, h2d_bytes;
  double busy_ms;   /* wall time its compute stream ran a compute op */
  double bubble_ms; /* step - busy: idle, waiting on a neighbour or on a copy */
} SimResultStage;

typedef struct {
  char *scenario;
  char *policy;
  double step_ms, compute_ms, recompute_ms, exposed_transfer_ms;
  double optimizer_ms, comm_ms;
  guint64 saved_bytes;
  guint64 d2h_bytes, h2d_bytes;
  guint d2h_copies, h2d_copies;
  SimResultPeak peak_device, peak_host;
  guint64 capacity_bytes;
  guint64 peak_reserved_bytes, fragmentation_bytes;
  gboolean fits;
  /* How the compute was timed (SimWorkload.time_model: given, flat,
   * kernel), a static string; nominal compute per kernel class of the ops
   * run op by op (forward, backward and recompute; 0 for layers that are
   * one op each way); the most time a GPU's compute stream sat ready but
   * waiting for its host to issue its next kernel ([device]
   * launch_overhead). */
  const char *time_model;
  double gemm_ms, attention_ms, memory_ms, host_wait_ms;
  /* Why the policy changed nothing, ran as resident would
   * (sim_lower_policy_note: "offloads nothing: keep_last = 1 counts per
   * pipeline chunk, ..."), or NULL. */
  char *note;
  GArray *stages;      /* SimResultStage per stage with [parallel], else NULL */
  SimProgram *program; /* owned, may be NULL */
  SimRun *run;         /* owned, may be NULL */
} SimResult;

/* Computes the figures from a finished run, borrowing `program` and `run`
 * for the call only; the result holds neither (sim_result_attach). */
SimResult *sim_result_new(const char *scenario, const char *policy, const SimWorkload *workload,
                          const SimProgram *program, const SimRun *run, guint64 capacity);

/* The same for a step spread as `parallel` says (NULL, or not active: one
 * GPU, no stages). */
SimResult *sim_result_new_parallel(const char *scenario, const char *policy, const SimWorkload *workload,
                                   const SimParallel *parallel, const SimProgram *program, const SimRun *run,
                                   guint64 capacity);

/* Gives `result` the program and run it was computed from, for the
 * exports that walk them (plots, traces): the result owns both from now
 * on and frees them with itself.  A result holds one pair at most. */
void sim_result_attach(SimResult *result, SimProgram *program, SimRun *run);
void sim_result_free(SimResult *result);

/* Replays the device allocations of `run` (made by `program`) through the
 * caching allocator, made with `allocator_flags` (SIM_ALLOCATOR_*), and
 * sets peak_reserved_bytes, fragmentation_bytes and fits from it. */
void sim_result_reserve(SimResult *result, const SimRun *run, const SimProgram *program, guint allocator_flags);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimResult, sim_result_free)

/* "static 7.36 GiB + saved L0-L23 1.19 GiB + workspace L23 20.0 MiB":
 * what is live at the pool's peak, grouped into static, saved tensors,
 * checkpointed inputs and workspace, largest first. */
char *sim_result_describe_live(const SimRun *run, const SimProgram *program, SimPool pool);

G_END_DECLS
