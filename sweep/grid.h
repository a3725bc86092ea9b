/* sweep/grid.h — a sweep: every combination of chosen scenario values,
 * each simulated under every policy of the scenario, on a thread pool.
 *
 * The grid is the cartesian product of its axes, the first axis varying
 * slowest; point i's values are the mixed-radix digits of i.  A shard I/N
 * runs the points i with i % N == I, so that shards on different machines
 * concatenate into the whole grid.  Points are handed back in index order
 * whatever the number of threads, so the output does not depend on it.
 *
 * sweep_grid_stream runs a grid in constant memory: a window of points
 * (64 per thread unless told) is in flight at once; each worker formats its
 * point's text itself (`format`, on the worker), and the calling thread
 * hands the finished points to `write` in index order, freeing each after
 * (a reorder window: a slow point holds the window, never more than it).
 * sweep_grid_run keeps every point (bench, tests, small sweeps): its
 * memory grows with the grid.
 *
 * An axis has at least one value, and no key is swept by two axes (the
 * second would override the first while the rows name both): either is
 * one SIM_ERROR_INPUT naming the key.
 *
 * Every value is checked before anything runs (each axis value is applied
 * alone to the base scenario): a bad value is one SIM_ERROR_INPUT naming
 * it.  A combination that fails (kv_heads that does not divide a swept
 * heads, say) fails the sweep with the lowest such point's error, or,
 * with keep_going, is handed to `write` as a failed point and the sweep
 * goes on.
 *
 * Threads share the base configuration read-only; each has its own
 * SimEvaluator, reused across its points.  The grid knows no command line:
 * the caller names its options (an axis's `option`, `shard_option`).
 */
#pragma once

#include "input/scenario.h"
#include "result/result.h"

G_BEGIN_DECLS

typedef struct {
  char *option;     /* the caller's name for where the axis came from ("--set"), for messages */
  char *name;       /* "link.h2d_bandwidth" */
  char *group, *key;
  GPtrArray *values; /* char* */
} SweepGridAxis;

/* "group.key=v1,v2,..."; group may itself hold dots ("policy.async.prefetch"
 * is group "policy.async", key "prefetch").  `option` is what the caller
 * calls such a text ("--set"): messages and the values' origin name it. */
SweepGridAxis *sweep_grid_axis_parse(const char *text, const char *option, GError **error);
void sweep_grid_axis_free(SweepGridAxis *axis);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SweepGridAxis, sweep_grid_axis_free)

typedef struct {
  guint index;       /* in the whole grid */
  GPtrArray *results; /* SimResult* per policy, in scenario order */
  const GError *error; /* keep_going only: why the point failed (results NULL), else NULL */
} SweepGridPoint;

typedef struct {
  guint jobs;        /* threads; 0 = one per core */
  guint shard, shards; /* shards = 0 or 1: everything */
  const char *shard_option; /* the caller's name for shard/shards ("--shard"), for messages */
  /* A point that fails does not stop the sweep: `write` gets it in its
   * turn, point->error set, its results NULL (`format` is not called). */
  gboolean keep_going;
  /* Called from the calling thread about ten times a second while the sweep
   * runs, and once at the end. */
  void (*progress)(guint done, guint total, gpointer data);
  gpointer progress_data;
} SweepGridOptions;

typedef struct {
  GPtrArray *axes;   /* SweepGridAxis*, owned */
  guint64 size;      /* points in the whole grid */
  GPtrArray *points; /* SweepGridPoint*, those kept (sweep_grid_keep), in index order */
} SweepGrid;

void sweep_grid_free(SweepGrid *grid);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SweepGrid, sweep_grid_free)

/* Checks `axes` (taken) against `config` (not modified) and the shard of
 * `options`, as above; runs nothing.  The grid has no points yet. */
SweepGrid *sweep_grid_new(const SimConfig *config, GPtrArray *axes, const SweepGridOptions *options,
                              GError **error);

typedef struct {
  /* On a worker, once `point`'s results are in: appends its text to `out`
   * (may be NULL: no text).  Returns whether `write` needs the results; if
   * not, they are freed on the worker (point->results is then NULL). */
  gboolean (*format)(const SweepGrid *grid, const SweepGridPoint *point, GString *out, gpointer data);
  /* On the calling thread, in index order, with the text `format` made
   * (empty without one).  It may take point->results (leave NULL) or the
   * point (sweep_grid_keep).  FALSE, with `error` set, stops the sweep
   * with that error. */
  gboolean (*write)(SweepGrid *grid, SweepGridPoint *point, const GString *text, gpointer data, GError **error);
  gpointer data;
  guint window;    /* points alive at once (in flight or waiting for their turn); 0: 64 per thread */
  guint peak_held; /* out: the most points alive at once, for tests (never above the window) */
} SweepGridStream;

/* Runs this shard's points of `grid` (made by sweep_grid_new with the
 * same `config` and `options`) through `stream`.  A point that fails
 * stops the sweep after the points before it were written: its error, as
 * sweep_grid_run's.  `write`'s error stops it the same way. */
gboolean sweep_grid_stream(SweepGrid *grid, const SimConfig *config, const SweepGridOptions *options,
                             SweepGridStream *stream, GError **error);

/* Moves `point`'s results into a new point of grid->points (appended:
 * call it in index order). */
void sweep_grid_keep(SweepGrid *grid, SweepGridPoint *point);

/* Runs the sweep of `config` (not modified) over `axes` (taken), keeping
 * every point of the shard in grid->points. */
SweepGrid *sweep_grid_run(const SimConfig *config, GPtrArray *axes, const SweepGridOptions *options,
                              GError **error);

/* The value of axis `a` at grid point `index`. */
const char *sweep_grid_value(const SweepGrid *grid, guint a, guint64 index);

/* Largest grid accepted: beyond it a typo would run for days. */
#define SWEEP_GRID_MAX_POINTS 100000000ULL

G_END_DECLS
