/* sim/model/framework.h — what each framework's offload code does, as
 * policy options.
 *
 * A preset is the set of options (sim/model/policy.h) under which offsim's
 * one lowering schedules copies the way a framework's handler does: when a
 * copy starts (at save or after the layer), which stream it takes, what the
 * compute stream waits for, when device memory is freed, how many copies
 * may be in flight, whether reload is prefetched or on demand, what is
 * filtered out and how host memory is allocated.  The values are read from
 * each framework's code (docs/reference.md and README, "Framework
 * presets", give the version, file and lines); a [policy.NAME] group with
 * `framework = NAME` starts from them and every key it gives beside
 * overrides one.  A preset is a row of SIM_FRAMEWORK_MAP (sim/model/
 * policy.h) and its function preset_NAME in framework.c.  What a
 * framework does that no option expresses is listed in the README beside
 * its preset.
 */
#pragma once

#include "model/policy.h"

G_BEGIN_DECLS

/* Sets every option `framework` decides on `policy` (an offload policy at
 * its defaults, its `version` set: the code the preset follows);
 * SIM_FRAMEWORK_NONE changes nothing. */
void sim_framework_preset(SimPolicy *policy, SimFramework framework);

/* Megatron's offload_modules names (a dense layer's and an MoE layer's), NULL-terminated, and
 * the SimModule bits of those whose bits are set in `names` (bit i: name
 * i); SIM_FRAMEWORK_MEGATRON_ALL the bits of every name. */
extern const char *const sim_framework_megatron_modules[];
guint32 sim_framework_megatron_hooked(guint names);
#define SIM_FRAMEWORK_MEGATRON_ALL 0x7fu

/* Whether the framework offloads checkpoint inputs at all: the third column
 * of SIM_FRAMEWORK_MAP (sim/model/policy.h). */
gboolean sim_framework_offloads_checkpoints(SimFramework framework);

G_END_DECLS
