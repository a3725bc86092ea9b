/* sim/engine/internal/engine_private.h — what the engine offers tests only.
 *
 * Who may include it: tests (tests/test_engine.c).  The library keeps the
 * definitions in engine.c; nothing in the simulator calls them, since
 * reports go through sim_run_live_visit (engine.h), which needs no array
 * and no sort.
 */
#pragma once

#include "engine/engine.h"

G_BEGIN_DECLS

/* Test-only.  Replays the applied memory actions up to the peak of `pool`
 * and returns what was live then: a new GArray of SimLive (free with
 * g_array_unref), largest first, ties by tag then layer, including the
 * baseline under the program's baseline tag.  `program` is the one that
 * made `run`. */
GArray *sim_run_live_at_peak(const SimRun *run, const SimProgram *program, SimPool pool);

/* Test-only.  The most cells of the dense live table (default 4 Mi): 0
 * makes every replay take the column-by-column path that large models take. */
void sim_engine_set_live_dense_cells(gsize cells);

/* Test-only.  TRUE runs the host model (docs/engine.md, "The host") even
 * for programs without a launch, so that tests can compare it with the
 * loop without a host; FALSE (the default) goes back. */
void sim_engine_set_host_model(gboolean force);

/* Test-only.  From how many GPUs a run without the host model takes the
 * lazy loop, which touches at a step only the GPUs something happens on
 * (docs/engine.md, "The loop"); 0 goes back to the default (LAZY_GPUS, 2:
 * every run whose program stands for several GPUs of the step).  G_MAXUINT makes every run scan every GPU at every
 * step, so that tests can compare the two loops. */
void sim_engine_set_lazy_gpus(guint gpus);

G_END_DECLS
