/* sim/engine/invariants.h — what must hold after every simulation.
 *
 * The engine's results are only as trustworthy as these checks
 * (docs/engine.md, "Invariants").  On a finished run:
 *
 *   - the step is at least the compute and recompute work;
 *   - under the host model (some op has a launch, program.h): the step is
 *     at least each GPU's launches, and with op times recorded no op
 *     started before its host issued it (recomputed from the program and
 *     the recorded ends of host-blocking ops);
 *   - with op times recorded: every op has end >= start and a finite end
 *     within the step; each stream ran its ops in order, one after another;
 *     copies of one direction never overlapped (one copy engine each);
 *   - with the memory curve recorded: memory was never negative, it ends at
 *     the baseline, and each reported peak equals the curve's maximum;
 *   - sim_invariants_check only: every tensor copied out came back, bytes
 *     per (tensor, layer) equal in both directions.
 *
 * A violation returns FALSE with SIM_ERROR_INTERNAL naming the op or
 * tensor: a bug report, not a silent wrong number.  Nothing is allocated
 * that outlives the call; the run and the program are only read.  Debug
 * builds (no NDEBUG) run the engine's checks at the end of every
 * sim_engine_run and the full ones after every evaluation (sim/result/
 * evaluate), with whatever the run recorded; the tests run the full checks
 * after every detailed evaluation in every build.
 * Cost: O(ops + memory curve), plus sorting each direction's copies by
 * start and one hash table for the copy balance.
 */
#pragma once

#include "engine/engine.h"

G_BEGIN_DECLS

gboolean sim_invariants_check(const SimRun *run, const SimProgram *program, GError **error);

/* The same without the copy balance, which holds for a training step (what
 * a lowering builds) but not for any program: the engine's own check. */
gboolean sim_invariants_check_engine(const SimRun *run, const SimProgram *program, GError **error);

G_END_DECLS
