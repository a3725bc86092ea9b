/* Fuzz target: a device and link profile, as offsim-calib writes them
 * (gpu_calib/calib_profile.c) and scenarios include them: [device], [link]
 * with its measured size -> bandwidth tables, [calibration].  The input is
 * the profile; a fixed scenario includes it, with tensors from 4 KiB to
 * 1 GiB so that copies land before, between and past the table's points,
 * and every policy runs on what loaded. */
#include "fuzz_common.h"

#include <glib/gstdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static const char top_text[] = "[scenario]\ninclude = profile.ini\n"
                               "[model]\nlayers = 4\nforward = 50us\ninput = 1MiB\n"
                               "tensors = a:4KiB, b:64KiB:refs=2, c:8MiB, d:1GiB, e:3000B\n";

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autofree char *top = g_build_filename(fuzz_temp_dir(), "top.ini", NULL);
  g_autofree char *profile = g_build_filename(fuzz_temp_dir(), "profile.ini", NULL);
  if (!g_file_set_contents(top, top_text, -1, NULL) ||
      !g_file_set_contents(profile, (const char *)data, (gssize)size, NULL))
    abort();
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(top, &error);
  fuzz_expect_input_error(error, "sim_scenario_load_file");
  if (s)
    fuzz_evaluate_all(s);
  g_remove(profile);
  g_remove(top);
  return 0;
}
