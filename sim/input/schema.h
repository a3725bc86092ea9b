/* sim/input/schema.h — every scenario key, once: its group, type, unit,
 * range, default and accepted names.
 *
 * This table is the contract of a scenario file.  Everything that needs to
 * know a key reads it from here:
 *
 *   - the loader (scenario.c): which keys a group accepts, how each value
 *     parses, its range, what it defaults to, and the messages for a missing,
 *     unknown or malformed key;
 *   - the defaults of the structs a scenario fills (SimMachine, SimPolicy,
 *     SimTransformer): a struct "at its defaults" is the struct read from an
 *     empty group, so a default cannot be written down twice;
 *   - `offsim model`'s INI writer, which writes every [transformer] field
 *     this table maps;
 *   - the fuzz dictionary (tests/fuzz/scenario.dict) and the README's key
 *     tables, which tests check against it (tests/test_schema.c).
 *
 * A key either maps to a field (`offset` into the group's struct, read and
 * written generically from `type`) or is read by hand (`offset` ==
 * SIM_SCHEMA_BY_HAND: tensor lists, bandwidth tables, layer sets, actions,
 * paths), in which case the loader reads it with the typed readers below.
 *
 * `fallback` is the default as a scenario would write it ("0.5", "3ms",
 * "async"), parsed by the same code as a user's value.  NULL means the key
 * has no fixed default: it is required, or its default is derived from other
 * keys (`doc_default` says how: "the sum", "2 × forward").  A [policy.NAME]
 * key's fallback is not written in the table: it is the model's default
 * (sim_policy_defaults, sim/model/policy.h), written as scenario text the
 * first time sim_schema_key is called.
 *
 * The table is static and read-only.  What allocates: the policy
 * fallbacks' text, once, kept for the process (interned); the error
 * messages, the caller's; and the functions that say they return a new
 * string.
 */
#pragma once

#include "input/config.h"

#include <stddef.h>

G_BEGIN_DECLS

/* The groups of a scenario.  LAYER is every [layer.N], POLICY every [policy.NAME]. */
typedef enum {
  SIM_GROUP_SCENARIO,
  SIM_GROUP_DEVICE,
  SIM_GROUP_LINK,
  SIM_GROUP_MODEL,
  SIM_GROUP_LAYER,
  SIM_GROUP_TRANSFORMER,
  SIM_GROUP_TRACE,
  SIM_GROUP_PARALLEL,
  SIM_GROUP_NODE,
  SIM_GROUP_NETWORK,
  SIM_GROUP_POLICY,
  SIM_GROUP_COUNT,
} SimSchemaGroup;

/* How a value is written, and what it is stored as when the key maps to a field. */
typedef enum {
  SIM_VALUE_TEXT,    /* free text, stored by hand */
  SIM_VALUE_PATH,    /* a file name, relative to the file that gives it */
  SIM_VALUE_SIZE,    /* "80GiB" -> guint64 bytes */
  SIM_VALUE_TIME,    /* "8us" -> double seconds */
  SIM_VALUE_RATE,    /* "55GB/s" -> double bytes per second, > 0 (also 0 where `zero` says) */
  SIM_VALUE_NUMBER,  /* plain decimal in [lo, hi] (ends open as `open` says) -> double, times `scale` */
  SIM_VALUE_COUNT,   /* whole number in [min, max] -> guint */
  SIM_VALUE_COUNT64, /* whole number in [min, max] -> guint64 */
  SIM_VALUE_BOOL,    /* false or true -> gboolean */
  SIM_VALUE_CHOICE,  /* one of `names` -> guint index (gboolean when there are two names) */
  SIM_VALUE_LIST,    /* a comma-separated list with its own grammar (`expect` says it), by hand */
} SimValueType;

/* Whether a key must be given. */
typedef enum {
  SIM_NEED_OPTIONAL,
  SIM_NEED_REQUIRED,
  SIM_NEED_SOMETIMES, /* required in some scenarios: `doc_need` says when */
} SimSchemaNeed;

/* Which end of a SIM_VALUE_NUMBER range is excluded. */
enum {
  SIM_OPEN_LO = 1 << 0,
  SIM_OPEN_HI = 1 << 1,
};

/* The offset sentinel of a key the loader reads by hand. */
#define SIM_SCHEMA_BY_HAND ((gssize)-1)

/* Every key, in the order the README's tables list them (and the order of
 * the "expected one of" lists in messages). */
typedef enum {
  SIM_KEY_SCENARIO_NAME,
  SIM_KEY_SCENARIO_DESCRIPTION,
  SIM_KEY_SCENARIO_INCLUDE,
  SIM_KEY_SCENARIO_STEP,
  SIM_KEY_DEVICE_MEMORY,
  SIM_KEY_DEVICE_MATMUL_TFLOPS,
  SIM_KEY_DEVICE_EFFICIENCY,
  SIM_KEY_DEVICE_HBM_BANDWIDTH,
  SIM_KEY_DEVICE_MATMUL_TFLOPS_BF16,
  SIM_KEY_DEVICE_MATMUL_TFLOPS_FP16,
  SIM_KEY_DEVICE_MATMUL_TFLOPS_FP32,
  SIM_KEY_DEVICE_SM_COUNT,
  SIM_KEY_DEVICE_GEMM_TILE,
  SIM_KEY_DEVICE_ATTENTION_TFLOPS,
  SIM_KEY_DEVICE_ATTENTION_BACKWARD_TFLOPS,
  SIM_KEY_DEVICE_LAUNCH_OVERHEAD,
  SIM_KEY_DEVICE_GEMM_TABLE,
  SIM_KEY_DEVICE_EXPANDABLE_SEGMENTS,
  SIM_KEY_LINK_H2D_BANDWIDTH,
  SIM_KEY_LINK_D2H_BANDWIDTH,
  SIM_KEY_LINK_BIDIR_BANDWIDTH,
  SIM_KEY_LINK_LATENCY,
  SIM_KEY_LINK_PAGEABLE_FACTOR,
  SIM_KEY_LINK_COMPUTE_SLOWDOWN,
  SIM_KEY_LINK_HOST_ALLOC,
  SIM_KEY_LINK_H2D_TABLE,
  SIM_KEY_LINK_D2H_TABLE,
  SIM_KEY_MODEL_LAYERS,
  SIM_KEY_MODEL_FORWARD,
  SIM_KEY_MODEL_BACKWARD,
  SIM_KEY_MODEL_INPUT,
  SIM_KEY_MODEL_TENSORS,
  SIM_KEY_MODEL_STATIC,
  SIM_KEY_MODEL_WORKSPACE,
  SIM_KEY_LAYER_FORWARD,
  SIM_KEY_LAYER_BACKWARD,
  SIM_KEY_LAYER_INPUT,
  SIM_KEY_LAYER_TENSORS,
  SIM_KEY_LAYER_WORKSPACE,
  SIM_KEY_TRANSFORMER_HF_CONFIG,
  SIM_KEY_TRANSFORMER_HIDDEN,
  SIM_KEY_TRANSFORMER_LAYERS,
  SIM_KEY_TRANSFORMER_HEADS,
  SIM_KEY_TRANSFORMER_KV_HEADS,
  SIM_KEY_TRANSFORMER_HEAD_DIM,
  SIM_KEY_TRANSFORMER_FFN,
  SIM_KEY_TRANSFORMER_VOCAB,
  SIM_KEY_TRANSFORMER_POSITIONS,
  SIM_KEY_TRANSFORMER_BATCH,
  SIM_KEY_TRANSFORMER_SEQ,
  SIM_KEY_TRANSFORMER_DTYPE,
  SIM_KEY_TRANSFORMER_NORM,
  SIM_KEY_TRANSFORMER_MLP,
  SIM_KEY_TRANSFORMER_HIDDEN_ACT,
  SIM_KEY_TRANSFORMER_ATTENTION,
  SIM_KEY_TRANSFORMER_OPS,
  SIM_KEY_TRANSFORMER_DROPOUT,
  SIM_KEY_TRANSFORMER_TIED_EMBEDDINGS,
  SIM_KEY_TRANSFORMER_QKV_BIAS,
  SIM_KEY_TRANSFORMER_LINEAR_BIAS,
  SIM_KEY_TRANSFORMER_TP,
  SIM_KEY_TRANSFORMER_SP,
  SIM_KEY_TRANSFORMER_OPTIMIZER,
  SIM_KEY_TRANSFORMER_MASTER_WEIGHTS,
  SIM_KEY_TRANSFORMER_CLIP_GRAD,
  SIM_KEY_TRANSFORMER_OPTIMIZER_KERNELS,
  SIM_KEY_TRANSFORMER_GRADS,
  SIM_KEY_TRANSFORMER_OUTPUTS,
  SIM_KEY_TRANSFORMER_EXPERTS,
  SIM_KEY_TRANSFORMER_TOP_K,
  SIM_KEY_TRANSFORMER_MOE_FFN,
  SIM_KEY_TRANSFORMER_SHARED_FFN,
  SIM_KEY_TRANSFORMER_SHARED_GATE,
  SIM_KEY_TRANSFORMER_DENSE_LAYERS,
  SIM_KEY_TRANSFORMER_SPARSE_STEP,
  SIM_KEY_TRANSFORMER_NORM_TOPK,
  SIM_KEY_TRANSFORMER_QK_NORM,
  SIM_KEY_TRANSFORMER_EXPERT_IMBALANCE,
  SIM_KEY_TRANSFORMER_CAPACITY_FACTOR,
  SIM_KEY_TRANSFORMER_Q_LORA_RANK,
  SIM_KEY_TRANSFORMER_KV_LORA_RANK,
  SIM_KEY_TRANSFORMER_QK_ROPE_DIM,
  SIM_KEY_TRANSFORMER_V_HEAD_DIM,
  SIM_KEY_TRACE_FILE,
  SIM_KEY_TRACE_FORWARD,
  SIM_KEY_TRACE_BACKWARD,
  SIM_KEY_TRACE_WORKSPACE,
  SIM_KEY_TRACE_STATIC,
  SIM_KEY_PARALLEL_PP,
  SIM_KEY_PARALLEL_MICROBATCHES,
  SIM_KEY_PARALLEL_SCHEDULE,
  SIM_KEY_PARALLEL_VIRTUAL,
  SIM_KEY_PARALLEL_DP,
  SIM_KEY_PARALLEL_EP,
  SIM_KEY_PARALLEL_SHARDING,
  SIM_KEY_PARALLEL_SPLIT,
  SIM_KEY_PARALLEL_P2P_BANDWIDTH,
  SIM_KEY_PARALLEL_P2P_LATENCY,
  SIM_KEY_PARALLEL_BUCKET,
  SIM_KEY_PARALLEL_OFFLOAD_OPTIMIZER,
  SIM_KEY_PARALLEL_OFFLOAD_PARAMS,
  SIM_KEY_NODE_GPUS_PER_SWITCH,
  SIM_KEY_NODE_SWITCH_BANDWIDTH,
  SIM_KEY_NODE_SOCKETS,
  SIM_KEY_NODE_HOST_MEMORY_BANDWIDTH,
  SIM_KEY_NODE_GPU_SOCKETS,
  SIM_KEY_NODE_GPUS,
  SIM_KEY_NODE_COLLECTIVE_BANDWIDTH,
  SIM_KEY_NODE_COLLECTIVE_LATENCY,
  SIM_KEY_NODE_COLLECTIVE_SLOWDOWN,
  SIM_KEY_NODE_HOST_ADAM_GPARAMS,
  SIM_KEY_NETWORK_BANDWIDTH,
  SIM_KEY_NETWORK_LATENCY,
  SIM_KEY_POLICY_KIND,
  SIM_KEY_POLICY_MODE,            /* offload and plan: sync or async */
  SIM_KEY_POLICY_CHECKPOINT_MODE, /* checkpoint: full or selective (the same key, `mode`) */
  SIM_KEY_POLICY_DEDUP,
  SIM_KEY_POLICY_PREFETCH,
  SIM_KEY_POLICY_INFLIGHT,
  SIM_KEY_POLICY_LAYERS,
  SIM_KEY_POLICY_KEEP_LAST,
  SIM_KEY_POLICY_MIN_TENSOR,
  SIM_KEY_POLICY_FRAMEWORK,
  SIM_KEY_POLICY_PIN_MEMORY,
  SIM_KEY_POLICY_VERSION,
  SIM_KEY_POLICY_OFFLOAD_MODULES,
  SIM_KEY_POLICY_PINNED,
  SIM_KEY_POLICY_SCOPE,
  SIM_KEY_POLICY_PARAMS,
  SIM_KEY_POLICY_LEAVES,
  SIM_KEY_POLICY_START,
  SIM_KEY_POLICY_STREAMS,
  SIM_KEY_POLICY_INFLIGHT_UNIT,
  SIM_KEY_POLICY_FREE,
  SIM_KEY_POLICY_RELOAD,
  SIM_KEY_POLICY_HEAD_WAIT,
  SIM_KEY_POLICY_MIN_ELEMENTS,
  SIM_KEY_POLICY_CHECKPOINT,
  SIM_KEY_POLICY_EVERY,
  SIM_KEY_POLICY_OFFLOAD_INPUTS,
  SIM_KEY_POLICY_ACTIONS,
  SIM_KEY_POLICY_STAGES,
  SIM_KEY_COUNT,
} SimKeyId;

typedef struct {
  SimSchemaGroup group;
  const char *key;
  SimValueType type;
  SimSchemaNeed need;
  const char *doc_need;        /* SIM_NEED_SOMETIMES: when, as the README says it ("for `[transformer]`") */
  gssize offset;               /* into the group's struct, or SIM_SCHEMA_BY_HAND */
  double lo, hi, scale;        /* SIM_VALUE_NUMBER; scale 0 means 1 */
  guint8 open;                 /* SIM_OPEN_LO | SIM_OPEN_HI */
  gboolean zero;               /* SIM_VALUE_RATE: 0 is a value too, a shared limit that is not there */
  guint64 min, max;            /* SIM_VALUE_COUNT, SIM_VALUE_COUNT64 */
  const char *const *names;    /* SIM_VALUE_CHOICE: NULL-terminated, index = stored value */
  const char *fallback;        /* the default as scenario text; NULL: required or derived */
  const char *doc_default;     /* a derived default as the README says it ("the sum"); NULL with a fallback or none */
  guint kinds;                 /* SIM_GROUP_POLICY: the kinds that take it, 1 << SimPolicyKind */
  const char *expect;          /* what a value looks like, for messages: "a size such as 80GiB"; NULL for a
                                * choice that is a catalog's names (sim_schema_expect says them) */
} SimSchemaKey;

/* Key `id`'s row.  Never NULL for id < SIM_KEY_COUNT. */
const SimSchemaKey *sim_schema_key(SimKeyId id);

/* What key `id`'s value looks like, for messages: its `expect`, or a
 * choice's names as "a, b or c" (made from the catalog, so a new preset or
 * kind is said without a second list). */
const char *sim_schema_expect(SimKeyId id);

/* The group's name as written in a file: "device", "layer.N", "policy.NAME". */
const char *sim_schema_group_name(SimSchemaGroup group);

/* sim_schema_find's `kind` for a key of any policy kind. */
#define SIM_SCHEMA_ANY_KIND G_MAXUINT

/* The key called `key` in `group` that applies to policy `kind` (ignored
 * outside SIM_GROUP_POLICY; SIM_SCHEMA_ANY_KIND for any), or SIM_KEY_COUNT
 * when there is none. */
SimKeyId sim_schema_find(SimSchemaGroup group, const char *key, guint kind);

/* "a, b, c": the group's keys in table order, each once (`mode` is two
 * rows); restricted to policy `kind` when `kind_mask` is not 0.  Owned by
 * the caller. */
char *sim_schema_key_list(SimSchemaGroup group, guint kind_mask);

/* Parses `text` as key `id`'s value into `value`, which points at storage
 * of the key's type (guint64 for a size, double for a time, ...).  FALSE
 * with a message in `error`, the value's fault only. */
gboolean sim_schema_parse_value(SimKeyId id, const char *text, gpointer value, GError **error);

/* Parses `text` as key `id`'s value into `target` + the key's offset.
 * FALSE with a message in `error` (the value's fault only: the caller adds
 * the file, group and key). */
gboolean sim_schema_parse(SimKeyId id, const char *text, gpointer target, GError **error);

/* The default as the README's table shows it: "`FALLBACK`", or the derived
 * default's words, or NULL when there is none.  A new string, the caller's. */
char *sim_schema_doc_default(SimKeyId id);

/* Sets every field-mapped key of `group` that has a fallback to it in
 * `target` (for policies, the keys of every kind: a policy struct is whole
 * whatever its kind). */
void sim_schema_apply_defaults(SimSchemaGroup group, gpointer target);

/* Appends "key = value\n" for field-mapped key `id` as read from `target`,
 * in a form sim_schema_parse reads back as the same value. */
void sim_schema_format(SimKeyId id, gconstpointer target, GString *out);

G_END_DECLS
