/* sim/input/scenario.h — a scenario file turned into a machine, a workload and
 * the policies to run on it.
 *
 * The loader is strict: every group and key must be known, every value must
 * parse, and a failure is one SIM_ERROR_INPUT line naming the file, the
 * group, the key and what was expected.  Which keys exist, how each parses,
 * its range and its default are the schema's (schema.h); this module reads
 * the groups in order and derives what depends on other keys (the link's
 * bidir_bandwidth, backward = 2 x forward, kv_heads and head_dim, a
 * policy's keep_last and dedup, [node]'s sockets per GPU) and checks what
 * keys of different groups must agree on ([parallel]'s chunks against the
 * model's layers, gpu_sockets and a policy's stages against pp × dp and pp).  Without [policy.*] groups the default set
 * runs: resident, offload-sync, offload-async, checkpoint-full.
 *
 * Ownership: a SimScenario owns its workload and policies.
 */
#pragma once

#include "engine/machine.h"
#include "input/config.h"
#include "input/transformer.h"
#include "model/parallel.h"
#include "model/policy.h"
#include "model/workload.h"

G_BEGIN_DECLS

/* A sanity bound, like SIM_WORKLOAD_MAX_LAYERS (model/workload.h), on what
 * [model] multiplies: layers x tensors x refs, each a copy an offload may
 * make.  A million-layer generated transformer saves about
 * 27 million; `layers = 1000000` with `tensors = a:1KiB:refs=1000` would be
 * a billion copy ops and an out-of-memory, and is an error instead. */
#define SIM_SCENARIO_MAX_REFERENCES (1u << 25)

typedef struct {
  char *name;
  char *origin;         /* the top-level file, or "(embedded default)" */
  SimMachine machine;
  SimWorkload *workload;
  GPtrArray *policies;  /* SimPolicy*, in file order */
  SimParallel parallel; /* [parallel]: pp = microbatches = dp = virtual = 1 without it */
} SimScenario;

SimScenario *sim_scenario_load_file(const char *path, GError **error);
/* Includes in `data` resolve against the current directory. */
SimScenario *sim_scenario_load_data(const char *data, const char *origin, GError **error);
/* A scenario from an already merged configuration. */
SimScenario *sim_scenario_from_config(const SimConfig *config, GError **error);

/* Which keys of a [transformer] group the loader derived rather than read. */
typedef struct {
  gboolean kv_heads, head_dim; /* follow heads and hidden (or, with hf_config, the config's) */
  gboolean grads, attention, optimizer_kernels; /* follow ops (sim_transformer_follow_ops) */
} SimTransformerDerived;

/* Sets the keys of `t` (read from group `g`, its hf_config first when
 * `from_hf`) that follow others when `g` does not give them, and says
 * which: the one derivation the loader and `offsim show` share. */
SimTransformerDerived sim_scenario_transformer_derive(const SimConfigGroup *g, gboolean from_hf, SimTransformer *t);

/* The embedded default scenario (scenarios/default.ini, compiled in). */
SimScenario *sim_scenario_load_default(GError **error);
const char *sim_scenario_default_text(void);

void sim_scenario_free(SimScenario *scenario);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimScenario, sim_scenario_free)

/* The policy called `name`, or NULL. */
const SimPolicy *sim_scenario_policy(const SimScenario *scenario, const char *name);

/* The policies a scenario without [policy.*] groups runs: resident,
 * offload-sync, offload-async, checkpoint-full.  A new array of SimPolicy,
 * the caller's. */
GPtrArray *sim_scenario_default_policies(void);

/* sim_config_set for a sweep point (`origin` as there): a key of one of
 * the default policies, in a configuration that names no [policy.*]
 * group, first writes the default policies into it, in their order, so
 * that the key changes that policy (its other keys kept) and the other
 * defaults still run.  Without that, [policy.offload-async] prefetch alone
 * would be a policy without a kind. */
void sim_scenario_config_set(SimConfig *config, const char *group, const char *key, const char *value,
                             const char *origin);

/* Every [device], [link] and [node] key at its scenario default, the rest
 * zero (memory, bandwidths and the GEMM rate have none: scenarios give
 * them); one GPU, so every socket_of is 0. */
void sim_scenario_machine_defaults(SimMachine *machine);

/* A SimParallel at its defaults, the schema's: one GPU, one micro-batch. */
void sim_scenario_parallel_defaults(SimParallel *parallel);

G_END_DECLS
