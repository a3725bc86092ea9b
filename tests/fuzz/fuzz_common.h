/* tests/fuzz/fuzz_common.h — what every fuzz target does with an input that
 * loaded: run it through every policy and insist that nothing but bad input
 * can fail.
 *
 * A SIM_ERROR_INPUT is the right answer to a hostile file; anything else
 * (SIM_ERROR_INTERNAL from the engine or the lowering: a stuck schedule,
 * memory that goes negative or leaks) is a bug, and the target aborts so that
 * libFuzzer keeps the input.  ASan and UBSan catch the rest.
 */
#pragma once

#include "input/scenario.h"

/* A private temporary directory, made on first use and removed at exit
 * (empty: the targets remove their files after each input). */
const char *fuzz_temp_dir(void);

/* Aborts with the message when `error` is set and is not bad input. */
void fuzz_expect_input_error(const GError *error, const char *what);

/* A scenario around a generated or traced workload (taken over): an H100
 * and PCIe Gen5 link, the default policy set. */
SimScenario *fuzz_scenario_new(SimWorkload *workload);

/* Evaluates every policy of the scenario and a few more that reach the
 * lowering's other paths (selective checkpointing, per-tensor pinning,
 * pageable copies, plans mixing every action, no prefetch).  Fuzz-only
 * bound: workloads whose program would exceed FUZZ_MAX_WORK ops are loaded
 * but not run, so that one input cannot take seconds; hostile sizes are
 * test_hostile's job. */
#define FUZZ_MAX_WORK 20000
void fuzz_evaluate_all(const SimScenario *scenario);
