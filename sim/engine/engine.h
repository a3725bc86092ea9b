/* sim/engine/engine.h — the fluid discrete-event engine.
 *
 * The engine runs a SimProgram against a SimLink and returns a SimRun: the
 * step time, when each op ran, the memory curve of both pools and their
 * peaks.  Semantics (DESIGN.md section 3):
 *
 *  - Streams are in order.  An op starts when it heads its stream and every
 *    event it waits on has been recorded.  Record and wait take no time.
 *  - Compute ops share the compute resource fairly: with k of them running,
 *    each advances at (1 - compute_slowdown)/k while any copy is in flight
 *    and 1/k otherwise.  A single compute stream therefore runs at rate 1 or
 *    1 - slowdown.
 *  - Each direction has one copy engine.  Ready copies queue on it in the
 *    order they became ready, ties by issue index, and run one at a time: a
 *    copy spends `latency`, then moves its bytes at the direction's bandwidth
 *    (times pageable_factor for pageable memory).  When both directions move
 *    bytes at once and their sum exceeds bidir_bandwidth, they share it
 *    max-min fairly (each gets half unless one needs less).  A copy counts as
 *    in flight, for compute slowdown, from its latency phase on.
 *  - host_alloc ops hold their stream for their time and use no resource.
 *  - Memory actions apply when their op starts or ends (a copy starts when
 *    its engine takes it, not when it is queued).  At one instant every
 *    completion is applied before any start, each in issue order.
 *
 * Cost: each step of the loop completes an op or ends a copy's latency
 * phase; the work per step is a few heap operations on heaps no larger than
 * the number of streams, so a run is O(ops · log streams) with no allocation
 * per event once the engine's buffers have grown (reuse a SimEngine).
 *
 * A schedule that cannot finish (a wait on an event never recorded, or a
 * cycle of waits) stops with SIM_ERROR_INTERNAL naming every blocked op.
 * Memory that goes negative is reported the same way: it is a lowering bug.
 */
#pragma once

#include "machine.h"
#include "program.h"

G_BEGIN_DECLS

typedef struct {
  double time;   /* seconds */
  gint64 device; /* bytes in use after the change */
  gint64 host;
} SimMemPoint;

typedef struct {
  gint64 bytes;
  double time;
  guint32 op;    /* the op whose memory action made the peak (G_MAXUINT32: baseline) */
  SimPhase phase;
  gint32 layer;
  guint32 applied; /* memory actions applied up to and including the peak's */
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

typedef struct {
  double step;           /* seconds from the first op to the last */
  double compute_work;   /* nominal seconds of forward and backward compute */
  double recompute_work; /* nominal seconds of recompute */
  guint64 copy_bytes[2]; /* per SimDir */
  guint copies[2];
  SimPeak peak[2];       /* per SimPool */
  GArray *op_start;      /* double seconds per op, or NULL */
  GArray *op_end;
  GArray *curve;         /* SimMemPoint, or NULL */
  GArray *applied;       /* guint32 memory-action indices in the order applied */
  guint64 events;        /* work counters: loop steps, heap operations */
  guint64 heap_ops;
} SimRun;

void sim_run_free(SimRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimRun, sim_run_free)

/* The same entries, unsorted, to a callback (the baseline first): no array,
 * no sort, for callers that only sum them.  Returns the largest layer seen
 * in the replay (SIM_NO_LAYER when none), before any callback. */
typedef void (*SimLiveVisit)(const SimLive *live, gpointer data);
gint32 sim_run_live_visit(const SimRun *run, const SimProgram *program, SimPool pool, SimLiveVisit visit,
                          gpointer data);

typedef struct SimEngine SimEngine;

/* An engine holds scratch buffers that grow to the largest program run on it. */
SimEngine *sim_engine_new(void);
void sim_engine_free(SimEngine *engine);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimEngine, sim_engine_free)

SimRun *sim_engine_run(SimEngine *engine, const SimProgram *program, const SimLink *link,
                       const SimEngineOptions *options, GError **error);

G_END_DECLS
