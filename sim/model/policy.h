/* sim/model/policy.h — what a [policy.NAME] group asks for.
 *
 * A policy is a spec, not a schedule: sim_lower() turns it and a workload
 * into a program.  Every kind reduces to one SimAction per layer (keep,
 * offload, recompute, selective, or their offloading forms) plus the options that say how offloaded layers are copied:
 *
 *   resident    every layer keeps its tensors.
 *   offload     layers selected by `layers`, except the last `keep_last`,
 *               offload their tensors of at least `min_tensor` bytes;
 *               `mode` sync copies on the compute stream (PyTorch
 *               save_on_cpu), async copies on side streams (verl's double
 *               buffer) with `prefetch` and `inflight`.
 *   checkpoint  layers selected by `layers` whose index is a multiple of
 *               `every` keep only their input and recompute their forward
 *               (`mode` full), or drop and recompute only their selective
 *               tensors, the attention core (`mode` selective).
 *   plan        one action per layer from `actions`.
 *
 * `dedup`: an offload copies each saved storage once (verl keys on storage),
 * or once per saved reference (PyTorch save_on_cpu packs every reference).
 * `scope`, `params`, `leaves`: which saved tensors a hook moves at all.
 *
 * Ownership: a SimPolicy owns its name and its action array.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The catalogs below are one list each, X(ENUM, name, ...) a row (as
 * libuv's UV_ERRNO_MAP): the enum, the name arrays (sim/model/policy.c),
 * the schema's parsers and messages, --help and the tests of the README's
 * tables are all made from them, so a new row is the only list to edit.
 *
 * The policy kinds: X(ENUM suffix, name scenarios write). */
#define SIM_POLICY_KIND_MAP(X) \
  X(RESIDENT, "resident")      \
  X(OFFLOAD, "offload")        \
  X(CHECKPOINT, "checkpoint")  \
  X(PLAN, "plan")

#define SIM_POLICY_KIND_ENUM_(e, name) SIM_POLICY_##e,
typedef enum {
  SIM_POLICY_KIND_MAP(SIM_POLICY_KIND_ENUM_)
  SIM_POLICY_KIND_COUNT, /* the number of kinds: size of per-kind tables */
} SimPolicyKind;
#undef SIM_POLICY_KIND_ENUM_

/* Every kind, as a mask of 1 << SimPolicyKind. */
#define SIM_POLICY_KINDS_ALL ((1u << SIM_POLICY_KIND_COUNT) - 1)

/* The actions a layer takes: X(ENUM suffix, name `actions` writes). */
#define SIM_ACTION_MAP(X)                                                                            \
  X(KEEP, "keep")                                                                                    \
  X(OFFLOAD, "offload")                                                                              \
  X(RECOMPUTE, "recompute")                 /* full: keep the input, recompute the forward */        \
  X(RECOMPUTE_OFFLOAD, "recompute+offload") /* full recompute, its kept input offloaded (DeepSpeed    \
                                             * cpu_checkpointing) */                                 \
  X(SELECTIVE, "selective")                 /* drop the selective tensors, recompute them */         \
  X(SELECTIVE_OFFLOAD, "selective+offload") /* selective recompute, offload the rest */

#define SIM_ACTION_ENUM_(e, name) SIM_ACTION_##e,
typedef enum {
  SIM_ACTION_MAP(SIM_ACTION_ENUM_)
  SIM_ACTION_COUNT,
} SimAction;
#undef SIM_ACTION_ENUM_

/* The actions before SIM_ACTION_SELECTIVE (keep, offload, recompute,
 * recompute+offload) need nothing of the workload; the selective ones need
 * selective tensors. */
#define SIM_ACTION_N_PLAIN SIM_ACTION_SELECTIVE

typedef enum {
  SIM_PINNED_POOLED,     /* pinned buffers allocated once, outside the step */
  SIM_PINNED_PER_TENSOR, /* each offloaded tensor pays host_alloc */
  SIM_PINNED_PAGEABLE,   /* pageable host memory (.to("cpu"), save_on_cpu's default): copies at pageable_factor */
  SIM_PINNED_CACHING,    /* PyTorch's caching host allocator: pinned, each block rounded up to a power of
                          * two, reused after the first step (no host_alloc in the steady state) */
} SimPinned;

/* Which references to parameters an offload copies (`params`). */
typedef enum {
  SIM_PARAMS_SKIP,  /* none: most frameworks skip them by storage pointer */
  SIM_PARAMS_COPY,  /* every one (save_on_cpu packs them all) */
  SIM_PARAMS_VIEWS, /* views of a parameter, not the parameter itself (a filter on nn.Parameter misses
                     * nn.Linear's weight.t(): torchtune) */
} SimParams;

/* When an offloaded tensor's device memory is freed (`free`, async). */
typedef enum {
  SIM_FREE_COPY_END,    /* when its copy ends */
  SIM_FREE_NEXT_COMMIT, /* group k at the commit of k + 1, which first waits for its copies (verl) */
  SIM_FREE_WAIT,        /* group k when the compute stream waits for its copies before the forward `inflight`
                         * groups later (TransformerEngine's window) */
} SimFree;

/* When reloads are issued (`reload`). */
typedef enum {
  SIM_RELOAD_PREFETCH,  /* the group `prefetch` positions below each backward (async) */
  SIM_RELOAD_ON_DEMAND, /* each group (or, with ops, each reference) when its backward is due */
  SIM_RELOAD_ON_UNPACK, /* each reference as autograd unpacks it, which the host does a node ahead: the copy
                         * waits for the end of the node before the previous one that reloaded (torchtune) */
} SimReload;

/* How many offloads may be on their way at once (async). */
typedef enum {
  SIM_INFLIGHT_GROUPS,  /* the forward of group i waits until group i - inflight is on the host */
  SIM_INFLIGHT_TENSORS, /* each save waits until the copy `inflight` saves back is done (start = tensor) */
  SIM_INFLIGHT_WINDOW,  /* TransformerEngine: with n of L layers offloaded, groups = L - n */
} SimInflightUnit;

/* The frameworks a preset reproduces (`framework`); NONE: no preset.
 * X(ENUM suffix, name, offloads checkpoint inputs): the name is scenario
 * text and names the preset's function in sim/model/framework.c
 * (preset_NAME, which must exist); the third column is what
 * sim_framework_offloads_checkpoints says (verl with its checkpointing,
 * DeepSpeed's cpu_checkpointing, torchtune under a non-reentrant
 * checkpoint; the others refuse or have no such mode). */
#define SIM_FRAMEWORK_MAP(X)            \
  X(NONE, none, TRUE)                   \
  X(SAVE_ON_CPU, save_on_cpu, FALSE)    \
  X(VERL, verl, TRUE)                   \
  X(TE, te, FALSE)                      \
  X(MEGATRON, megatron, FALSE)          \
  X(TORCHTUNE, torchtune, TRUE)         \
  X(DEEPSPEED, deepspeed, TRUE)

#define SIM_FRAMEWORK_ENUM_(e, name, checkpoints) SIM_FRAMEWORK_##e,
typedef enum {
  SIM_FRAMEWORK_MAP(SIM_FRAMEWORK_ENUM_)
  SIM_FRAMEWORK_COUNT,
} SimFramework;
#undef SIM_FRAMEWORK_ENUM_

/* Which code of a framework a preset follows (`version`, DeepSpeed's only):
 * its latest release, or its main branch where that has moved on. */
typedef enum {
  SIM_VERSION_RELEASE,
  SIM_VERSION_MASTER,
} SimVersion;

typedef struct {
  char *name;
  SimPolicyKind kind;
  gboolean async;     /* offload mode */
  guint prefetch;     /* backward prefetch depth, in layers */
  guint inflight;     /* offload groups allowed on the device at once, >= 1 */
  GArray *selected;   /* gboolean per layer, from `layers`; NULL = all */
  guint keep_last;    /* last N layers never offloaded */
  guint64 min_tensor; /* smaller tensors stay on the device */
  SimPinned pinned;
  guint every;        /* checkpoint every k-th layer */
  gboolean selective; /* checkpoint mode */
  gboolean dedup;     /* offload each storage once, not once per reference */
  /* What a saved-tensor hook moves (offload kinds; see the lowering's fates):
   * the embedding and the loss head as well as the layers (every hook sees
   * them), references to parameters (save_on_cpu copies them; most
   * frameworks skip them by storage), tensors without grad_fn. */
  gboolean scope_all;   /* scope = all; FALSE: layers */
  SimParams params;     /* which parameter references a hook copies */
  gboolean copy_leaves; /* leaves = copy; FALSE: keep */
  /* How the copies are scheduled (async unless said; lower.h explains each). */
  gboolean start_tensor;   /* start = tensor: each tensor's D2H as soon as it is saved; FALSE: group */
  gboolean shared_stream;  /* streams = shared: one copy stream for both directions */
  SimInflightUnit inflight_unit;
  SimFree free;            /* when an offloaded source's device memory is freed (SimFree) */
  SimReload reload;        /* when a reload is issued (SimReload) */
  gboolean head_wait;      /* the loss head waits for every offload before it */
  guint64 min_elements;    /* smaller tensors stay (elements; 0: no filter) */
  gboolean checkpoint;     /* offload: the selected layers are checkpointed and only their inputs move;
                            * checkpoint: `offload_inputs`, the same */
  /* When a checkpointed layer's kept input (recompute+offload) leaves:
   * input_first, saved before the layer's forward (DeepSpeed releases copy
   * it with .to('cpu') before running the layer; a non-reentrant checkpoint
   * saves its inputs before its region) and copied there, the forward
   * still reading it; defer_offload, a group's copies issued after the
   * forward of the next group (DeepSpeed master keeps the newest input
   * until the next one registers). */
  gboolean input_first;
  gboolean defer_offload;
  /* Which saved references a hook sees, on layers with ops (SimLayer.ops):
   * `hooked`, bits of SimModule (sim/model/workload.h) whose references it
   * packs, 0 for all (Megatron's offload_modules; torchtune's context,
   * which leaves the output head out); `skip_strided`, non-contiguous
   * references stay on the device (TransformerEngine).  A storage some of
   * whose references stay is held on the device and its seen references
   * copied anyway (SIM_FATE_KEPT_COPIED). */
  guint32 hooked;
  gboolean skip_strided;
  /* Megatron's fine-grained offload: one group per hooked module of each
   * offloading layer, each copied when its module ends and reloaded,
   * newest first, as the backward of each module of a layer above ends. */
  gboolean module_groups;
  SimVersion version;      /* `version`: the code the preset follows */
  SimFramework framework;  /* the preset the options came from, for reports */
  GArray *actions;    /* SimAction per layer (kind = plan), else NULL */
  GArray *stages;     /* gboolean per pipeline stage, from `stages`: the stages the policy acts on (the
                       * others keep everything); NULL = all */
} SimPolicy;

/* Whether reloads are issued when their backward asks (on demand or at
 * unpack), not prefetched. */
static inline gboolean
sim_policy_on_demand(const SimPolicy *p)
{
  return p->reload != SIM_RELOAD_PREFETCH;
}

/* What follows the mode unless given: PyTorch's save_on_cpu (sync) offloads
 * every layer and packs every reference; verl (async) never offloads the
 * last layer and copies each storage once. */
#define SIM_POLICY_MODE_KEEP_LAST(async) ((async) ? 1u : 0u)
#define SIM_POLICY_MODE_DEDUP(async) ((async) ? TRUE : FALSE)

/* Every option at its default, name and kind aside: what a [policy.NAME]
 * group with only `kind` loads as (the mode is async, so keep_last and
 * dedup take async's values).  The one definition of these defaults: the
 * schema's [policy.NAME] fallbacks (sim/input/schema.c) are written from it,
 * and the README's key tables and `offsim show` print those.  Layer sets,
 * actions and stages are NULL: all layers, all stages. */
extern const SimPolicy sim_policy_defaults;

/* A new policy of `kind` called `name` (copied), every option at its
 * default (sim_policy_defaults): valid as it is, inflight and every at
 * least 1.  The caller frees it with sim_policy_free. */
SimPolicy *sim_policy_new(const char *name, SimPolicyKind kind);
void sim_policy_free(SimPolicy *policy);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimPolicy, sim_policy_free)

/* The names scenarios write, indexed by the enum, NULL-terminated, made
 * from the maps above: what the loader, the reports and the plan block read. */
extern const char *const sim_policy_kind_names[];
extern const char *const sim_action_names[];
extern const char *const sim_framework_names[];
extern const char *const sim_version_names[];

const char *sim_policy_kind_name(SimPolicyKind kind);
const char *sim_action_name(SimAction action);

G_END_DECLS
