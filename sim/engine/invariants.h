/* sim/engine/invariants.h — what must hold after every simulation.
 *
 * The engine's results are only as trustworthy as these checks.  After a
 * run that recorded op times and the memory curve:
 *
 *   - every op ran exactly once: it has a start and an end, end >= start;
 *   - each stream ran its ops in order, one after another;
 *   - copies of one direction never overlapped (one copy engine each);
 *   - memory was never negative and ends at the static baseline;
 *   - every tensor copied out came back: bytes per (tensor, layer) equal
 *     in both directions;
 *   - the step is at least the compute and recompute work;
 *   - the reported peak equals the maximum of the ledger curve.
 *
 * A violation is SIM_ERROR_INTERNAL naming the op or tensor: a bug report,
 * not a silent wrong number.  Debug builds (no NDEBUG) run the engine's
 * checks at the end of every sim_engine_run and the full ones after every
 * sim_evaluate, with whatever the run recorded (op times and the curve
 * only when asked for); the tests run the full checks after every detailed
 * evaluation in every build.
 * Cost: O(ops + memory actions), one hash table for the copy balance.
 */
#pragma once

#include "engine.h"

G_BEGIN_DECLS

gboolean sim_invariants_check(const SimRun *run, const SimProgram *program, GError **error);

/* The same without the copy balance, which holds for a training step (what
 * a lowering builds) but not for any program: the engine's own check. */
gboolean sim_invariants_check_engine(const SimRun *run, const SimProgram *program, GError **error);

G_END_DECLS
