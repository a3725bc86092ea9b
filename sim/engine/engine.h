/* sim/engine/engine.h — the fluid discrete-event engine.
 *
 * The engine runs a SimProgram against a SimLink and returns a SimRun: the
 * step time, the memory peaks of both pools and, when asked for, when each
 * op ran and the memory curve.  docs/engine.md gives the semantics in full;
 * in short:
 *
 *  - Streams are in order.  An op starts when it heads its stream; a wait
 *    also needs its event recorded.  Record and wait take no time.
 *  - Compute ops share the compute resource fairly: with k of them running,
 *    each advances at (1 - compute_slowdown)/k while any copy engine is busy
 *    and 1/k otherwise.  A single compute stream therefore runs at rate 1 or
 *    1 - slowdown.
 *  - Each direction has one copy engine.  Ready copies queue on it in the
 *    order they became ready, ties by issue index, and run one at a time: a
 *    copy spends `latency`, then moves its bytes at the direction's bandwidth
 *    (times pageable_factor for pageable memory), or with a calibrated table
 *    at the rate that makes it take the table's time.  When both directions
 *    move bytes at once and their rates exceed bidir_bandwidth, they share it
 *    max-min fairly (each gets half unless one needs less).  A copy is busy,
 *    for compute slowdown, from its latency phase on, not while queued.
 *  - host_alloc and send ops hold their stream for their time and use no
 *    resource.
 *  - The host (when some op has a launch or blocks the host, program.h): one host thread
 *    per GPU issues that GPU's ops in issue order, each `launch` after the
 *    one before, and stops after a host_alloc or a pageable copy until it
 *    ends; an op starts only once it is issued.
 *  - Several GPUs: every stream is on a GPU, and each GPU has its own
 *    compute resource, copy engines and memory pools (program.h).  A
 *    program's GPU may stand for identical copies (sim_program_set_copies):
 *    it runs once and the run reports each copy as it.  With
 *    [node] limits (SimLink.node) the copies of every GPU share their
 *    switch uplinks and socket memory max-min fairly with the per-GPU caps
 *    (progressive filling; docs/engine.md).
 *  - Memory actions apply when their op starts or ends (a copy starts when
 *    its engine takes it, not when it is queued).  At one instant every
 *    completion is applied before any start, each in issue order.
 *
 * Invariants: the same program and link give the same run, bit for bit
 * (every tie is broken by issue index); a run that returns has completed
 * every op, and every pool ends at its baseline.  A failure returns NULL
 * with SIM_ERROR_INTERNAL, never a partial run: a schedule that cannot
 * finish (a wait on an event never recorded, or a cycle of waits) names
 * every blocked op; an event recorded too often, memory below zero or not back
 * at its baseline, and in debug builds a broken invariant
 * (sim_invariants_check_engine) are lowering bugs, reported the same way.
 *
 * Ownership: sim_engine_run returns a new SimRun that the caller frees with
 * sim_run_free (or g_autoptr); it owns its arrays and does not point into
 * the program or the engine, but sim_run_live_visit must be given the
 * program that made it.  A SimEngine owns scratch buffers that grow to the
 * largest program run on it and are freed with sim_engine_free.  An engine
 * serves one run at a time (one per thread); the program and the link are
 * only read, so threads may share them.
 *
 * Cost: each step of the loop completes an op or ends a copy's latency
 * phase; the work per step is a few heap operations on heaps no larger than
 * the number of streams (on several GPUs, the GPUs the step touches and
 * their heap of deadlines, not every GPU: docs/engine.md, "The loop"), so a
 * run is O(ops · log streams), with no
 * allocation per event once the engine's buffers have grown (reuse a
 * SimEngine): a run allocates only its SimRun's arrays, up front.
 */
#pragma once

#include "engine/machine.h"
#include "engine/program.h"

G_BEGIN_DECLS

/* A point of the memory curve: the levels of the GPU whose memory changed
 * (every GPU has a point at time 0). */
typedef struct {
  double time;   /* seconds */
  gint64 device; /* bytes in use after the change */
  gint64 host;
  guint64 gpu;   /* 64 bits: no padding, so that two curves compare byte for byte */
} SimMemPoint;

typedef struct {
  gint64 bytes;
  double time;
  guint32 op;    /* the op whose memory action made the peak (SIM_NO_OP: the baseline) */
  SimPhase phase;
  gint32 layer;
  guint32 applied; /* memory actions applied up to and including the peak's */
  guint pool;      /* where: a SIM_POOL_INDEX (GPU × pool kind) */
} SimPeak;

/* What is live at a peak: one entry per (tag, layer) with bytes > 0. */
typedef struct {
  guint32 tag;
  gint32 layer;
  gint64 bytes;
} SimLive;

typedef struct {
  gboolean record_ops;   /* fill op_start / op_end */
  gboolean record_curve; /* fill curve */
} SimEngineOptions;

/* A run's results, filled by sim_engine_run.  sim_run_free frees the
 * arrays: `applied` must be a GArray, the others a GArray or NULL. */
typedef struct {
  double step;           /* seconds from the first op to the last */
  double compute_work;   /* nominal seconds of forward and backward compute */
  double recompute_work; /* nominal seconds of recompute */
  double optimizer_work; /* nominal seconds of the optimizer step */
  guint64 copy_bytes[2]; /* per SimDir */
  guint copies[2];
  SimPeak peak[2];       /* per SimPool: the worst GPU's (the first to reach the most, then the lowest) */
  /* Per-GPU arrays are per GPU of the step (sim_program_step_gpus): a
   * program's GPU that stands for several (sim_program_set_copies) gives
   * each of them its figures, and a peak's `pool` is the step's, its op
   * and `applied` the program's (sim_run_live_visit_peak reads them so). */
  GArray *pools;         /* SimPeak per SIM_POOL_INDEX when the step runs on several GPUs, else NULL */
  GArray *busy;          /* double seconds per GPU while a compute op of it ran (several GPUs), else NULL */
  /* The host model (some op has a launch, program.h), else NULL; double
   * seconds per GPU.  host_busy: the launches its host issued (the
   * launch-bound floor of the step).  host_wait: how long its compute was
   * idle while one of its streams had an op that could start but for its
   * issue: the GPU waiting on its host (for launches, or behind a
   * host-blocking op). */
  GArray *host_busy;
  GArray *host_wait;
  /* Seconds a collective ran while its GPU had no compute running: the
   * communication the compute waited for, on the GPU that waited most. */
  double comm_exposed;
  GArray *op_start;      /* double seconds per op, or NULL */
  GArray *op_end;
  GArray *curve;         /* SimMemPoint, or NULL */
  GArray *applied;       /* guint32 memory-action indices in the order applied */
  guint64 events;        /* work counters: loop steps, heap operations, */
  guint64 heap_ops;
  guint64 gpu_advances;  /* and GPUs brought to an instant (the scan: every GPU at every step) */
} SimRun;

void sim_run_free(SimRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimRun, sim_run_free)

/* Replays the applied memory actions up to the peak of `pool` (on the GPU
 * of run->peak[pool]) and passes
 * what was live then to `visit`, one entry per (tag, layer) with bytes > 0:
 * the baseline first (under the program's baseline tag), the rest in no
 * particular order.  No array, no sort, for callers that only sum them.
 * `program` is the one that made `run`.  Returns the largest layer seen in
 * the replay (SIM_NO_LAYER when none). */
typedef void (*SimLiveVisit)(const SimLive *live, gpointer data);
gint32 sim_run_live_visit(const SimRun *run, const SimProgram *program, SimPool pool, SimLiveVisit visit,
                          gpointer data);

/* The same at a given peak of the run: one of run->peak or run->pools. */
gint32 sim_run_live_visit_peak(const SimRun *run, const SimProgram *program, const SimPeak *peak,
                               SimLiveVisit visit, gpointer data);

typedef struct SimEngine SimEngine;

/* An engine holds scratch buffers that grow to the largest program run on
 * it; reuse one to run many programs. */
SimEngine *sim_engine_new(void);
void sim_engine_free(SimEngine *engine);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimEngine, sim_engine_free)

/* Runs `program` against `link`; `options` may be NULL (record nothing but
 * the peaks).  Returns a new SimRun, or NULL with `error` set. */
SimRun *sim_engine_run(SimEngine *engine, const SimProgram *program, const SimLink *link,
                       const SimEngineOptions *options, GError **error);

G_END_DECLS
