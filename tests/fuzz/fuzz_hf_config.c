/* Fuzz target: a HuggingFace config.json (sim/input/hf_config.c), the transformer
 * it describes (sim/input/transformer.c), the [transformer] group `offsim model`
 * prints for it, which must load back, and every policy on the result. */
#include "input/hf_config.h"

#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  SimTransformer t;
  sim_transformer_defaults(&t);
  if (!sim_hf_config_load_data((const char *)data, (gssize)size, "fuzz.json", &t, &error)) {
    fuzz_expect_input_error(error, "sim_hf_config_load_data");
    return 0;
  }
  t.batch = 2;
  t.seq = 16;
  /* Fuzz-only bound: building a million layers takes seconds; 4096 still
   * reaches every product that could pass 64 bits. */
  if (t.layers > 4096)
    t.layers = 4096;
  g_autoptr(SimScenario) s = fuzz_scenario_new(NULL);
  s->workload = sim_transformer_build(&t, &s->machine.device, "fuzz", &error);
  fuzz_expect_input_error(error, "sim_transformer_build");
  if (s->workload == NULL)
    return 0;

  /* What `offsim model` prints must load back as the same model. */
  g_autoptr(GString) ini = g_string_new("[device]\nmemory = 80GiB\nmatmul_tflops = 790\nhbm_bandwidth = 3.35TB/s\n"
                                        "[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\n");
  sim_transformer_format_ini(&t, ini);
  g_autoptr(GError) reload_error = NULL;
  g_autoptr(SimScenario) again = sim_scenario_load_data(ini->str, "model.ini", &reload_error);
  if (again == NULL || sim_workload_n_layers(again->workload) != t.layers ||
      sim_workload_saved_bytes(again->workload) != sim_workload_saved_bytes(s->workload)) {
    fprintf(stderr, "fuzz_hf_config: the printed scenario does not load back: %s\n%s",
            reload_error ? reload_error->message : "a different model", ini->str);
    abort();
  }
  fuzz_evaluate_all(s);
  return 0;
}
