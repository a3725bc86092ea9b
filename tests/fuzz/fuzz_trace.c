/* Fuzz target: a recording of saved tensors (sim/input/trace.c), then every policy
 * on the workload it describes. */
#include "input/trace.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  SimWorkload *w = sim_trace_load_data((const char *)data, size, "fuzz.csv", "fuzz", &error);
  fuzz_expect_input_error(error, "sim_trace_load_data");
  if (w == NULL)
    return 0;
  for (guint i = 0; i < sim_workload_n_layers(w); i++) {
    sim_workload_layer(w, i)->forward = 1e-3;
    sim_workload_layer(w, i)->backward = 2e-3;
  }
  g_autoptr(SimScenario) s = fuzz_scenario_new(w);
  fuzz_evaluate_all(s);
  return 0;
}
