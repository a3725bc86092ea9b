/* planner/grid.h — a sweep: every combination of chosen scenario values,
 * each simulated under every policy of the scenario, on a thread pool.
 *
 * The grid is the cartesian product of its axes, the first axis varying
 * slowest; point i's values are the mixed-radix digits of i.  A shard I/N
 * runs the points i with i % N == I, so that shards on different machines
 * concatenate into the whole grid.  Results land in a slot per point, so the
 * order of the output does not depend on the number of threads.
 *
 * An axis has at least one value, and no key is swept by two axes (the
 * second would override the first while the rows name both): either is
 * one SIM_ERROR_INPUT naming the key.
 *
 * Every value is checked before anything runs (each axis value is applied
 * alone to the base scenario): a bad value is one SIM_ERROR_INPUT naming
 * it.  A combination that fails (kv_heads that does not divide a swept
 * heads, say) fails the sweep with the lowest such point's error.
 *
 * Threads share the base configuration read-only; each has its own
 * SimEvaluator, reused across its points.  The grid knows no command line:
 * the caller names its options (an axis's `option`, `shard_option`).
 */
#pragma once

#include "result.h"
#include "scenario.h"

G_BEGIN_DECLS

typedef struct {
  char *option;     /* the caller's name for where the axis came from ("--set"), for messages */
  char *name;       /* "link.h2d_bandwidth" */
  char *group, *key;
  GPtrArray *values; /* char* */
} PlannerGridAxis;

/* "group.key=v1,v2,..."; group may itself hold dots ("policy.async.prefetch"
 * is group "policy.async", key "prefetch").  `option` is what the caller
 * calls such a text ("--set"): messages and the values' origin name it. */
PlannerGridAxis *planner_grid_axis_parse(const char *text, const char *option, GError **error);
void planner_grid_axis_free(PlannerGridAxis *axis);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlannerGridAxis, planner_grid_axis_free)

typedef struct {
  guint index;       /* in the whole grid */
  GPtrArray *results; /* SimResult* per policy, in scenario order */
} PlannerGridPoint;

typedef struct {
  guint jobs;        /* threads; 0 = one per core */
  guint shard, shards; /* shards = 0 or 1: everything */
  const char *shard_option; /* the caller's name for shard/shards ("--shard"), for messages */
  /* Called from the calling thread about ten times a second while the sweep
   * runs, and once at the end. */
  void (*progress)(guint done, guint total, gpointer data);
  gpointer progress_data;
} PlannerGridOptions;

typedef struct {
  GPtrArray *axes;   /* PlannerGridAxis*, owned */
  guint64 size;      /* points in the whole grid */
  GPtrArray *points; /* PlannerGridPoint*, this shard's, in index order */
} PlannerGrid;

void planner_grid_free(PlannerGrid *grid);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlannerGrid, planner_grid_free)

/* Runs the sweep of `config` (not modified) over `axes` (taken). */
PlannerGrid *planner_grid_run(const SimConfig *config, GPtrArray *axes, const PlannerGridOptions *options,
                              GError **error);

/* The value of axis `a` at grid point `index`. */
const char *planner_grid_value(const PlannerGrid *grid, guint a, guint64 index);

/* Largest grid accepted: beyond it a typo would run for days. */
#define PLANNER_GRID_MAX_POINTS 100000000ULL

G_END_DECLS
