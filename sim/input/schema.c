#include "input/schema.h"

#include "base/error.h"
#include "base/units.h"
#include "engine/machine.h"
#include "engine/optimizer.h"
#include "input/scenario.h"
#include "input/transformer.h"
#include "model/parallel.h"
#include "model/policy.h"

#include <math.h>
#include <string.h>

/* Choices are stored as guint: an enum field must be that size. */
G_STATIC_ASSERT(sizeof(SimPinned) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimDtype) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimPolicyKind) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimAttention) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimActivation) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimInflightUnit) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimParams) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimReload) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimFree) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimFramework) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimPipeSchedule) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimSharding) == sizeof(guint));
G_STATIC_ASSERT(sizeof(SimOptimizerKernels) == sizeof(guint));

static const char *const group_names[SIM_GROUP_COUNT] = {
  [SIM_GROUP_SCENARIO] = "scenario", [SIM_GROUP_DEVICE] = "device",         [SIM_GROUP_LINK] = "link",
  [SIM_GROUP_MODEL] = "model",       [SIM_GROUP_LAYER] = "layer.N",         [SIM_GROUP_TRANSFORMER] = "transformer",
  [SIM_GROUP_TRACE] = "trace",       [SIM_GROUP_PARALLEL] = "parallel",     [SIM_GROUP_NODE] = "node",
  [SIM_GROUP_NETWORK] = "network",   [SIM_GROUP_POLICY] = "policy.NAME",
};

static const char *const bool_names[] = { "false", "true", NULL };
static const char *const offload_modes[] = { "sync", "async", NULL };
static const char *const checkpoint_modes[] = { "full", "selective", NULL };
static const char *const pinned_names[] = { "pooled", "per-tensor", "pageable", "caching", NULL };
static const char *const start_names[] = { "group", "tensor", NULL };
/* Stored as SimLink.first_step: steady is FALSE. */
static const char *const step_names[] = { "steady", "first", NULL };
static const char *const streams_names[] = { "separate", "shared", NULL };
static const char *const inflight_unit_names[] = { "groups", "tensors", "window", NULL };
static const char *const free_names[] = { "copy-end", "next-commit", "wait", NULL };
static const char *const reload_names[] = { "prefetch", "on-demand", "on-unpack", NULL };
static const char *const scope_names[] = { "layers", "all", NULL };
static const char *const params_names[] = { "skip", "copy", "views", NULL };
static const char *const leaves_names[] = { "keep", "copy", NULL };
static const char *const grads_names[] = { "set-to-none", "kept", NULL };
static const char *const outputs_names[] = { "dropped", "held", NULL };
static const char *const norm_names[] = { "rmsnorm", "layernorm", NULL };
static const char *const mlp_names[] = { "swiglu", "gelu", NULL };
static const char *const ops_names[] = { "fused", "hf", NULL };
static const char *const optimizer_names[] = { "none", "adamw", NULL };

#define OFFLOAD_PLAN ((1u << SIM_POLICY_OFFLOAD) | (1u << SIM_POLICY_PLAN))
#define ALL_KINDS SIM_POLICY_KINDS_ALL
#define BIT(kind) (1u << (kind))

#define M(field) ((gssize)offsetof(SimMachine, field))
#define T(field) ((gssize)offsetof(SimTransformer, field))
#define P(field) ((gssize)offsetof(SimPolicy, field))
#define PAR(field) ((gssize)offsetof(SimParallel, field))
#define HAND SIM_SCHEMA_BY_HAND

#define LAYERS_MAX SIM_WORKLOAD_MAX_LAYERS

static const char layer_set_expect[] = "all, none, first:N, last:N or indices such as 0-21 or 0,2,5";
static const char stage_set_expect[] = "all, none, first:N, last:N or stage indices such as 0-1 or 0,2";
static const char tensors_expect[] = "a list such as attn:24MiB, mlp:32MiB, mask:1MiB:keep";
static const char gemm_table_expect[] =
  "measured DTYPE:MxNxK:RATE points, such as bf16:4096x4096x4096:650TFLOPS, bf16:1024x4096x4096:590TFLOPS";
static const char table_expect[] = "measured SIZE:RATE points in increasing size, such as 4KiB:1.9GB/s, 1MiB:40GB/s";

static const SimSchemaKey keys[SIM_KEY_COUNT] = {
  [SIM_KEY_SCENARIO_NAME] = { SIM_GROUP_SCENARIO, "name", SIM_VALUE_TEXT, .offset = HAND,
                              .doc_default = "the file name without `.ini`", .expect = "a scenario name" },
  [SIM_KEY_SCENARIO_DESCRIPTION] = { SIM_GROUP_SCENARIO, "description", SIM_VALUE_TEXT, .offset = HAND,
                                     .expect = "free text" },
  /* Read and removed by the config layer (config.c) before any group is checked. */
  [SIM_KEY_SCENARIO_INCLUDE] = { SIM_GROUP_SCENARIO, "include", SIM_VALUE_LIST, .offset = HAND,
                                 .expect = "comma-separated file names" },
  /* Which step of a run the simulation is: a pinned pool or PyTorch's
   * caching host allocator allocates its buffers in the first and reuses
   * them after (sim/lower/lower.h).  Read into SimLink.first_step by
   * load_machine. */
  [SIM_KEY_SCENARIO_STEP] = { SIM_GROUP_SCENARIO, "step", SIM_VALUE_CHOICE, .offset = HAND, .names = step_names,
                              .fallback = "steady", .expect = "first or steady" },

  [SIM_KEY_DEVICE_MEMORY] = { SIM_GROUP_DEVICE, "memory", SIM_VALUE_SIZE, SIM_NEED_REQUIRED, .offset = M(device.memory),
                              .expect = "a size such as 80GiB" },
  [SIM_KEY_DEVICE_MATMUL_TFLOPS] = { SIM_GROUP_DEVICE, "matmul_tflops", SIM_VALUE_NUMBER, SIM_NEED_SOMETIMES,
                                     "for `[transformer]` and a `[trace]` timed by its op counts", M(device.matmul_flops), .lo = 0, .hi = 1e9, .scale = 1e12,
                                     .open = SIM_OPEN_LO, .expect = "a positive number of TFLOP/s such as 790" },
  [SIM_KEY_DEVICE_EFFICIENCY] = { SIM_GROUP_DEVICE, "efficiency", SIM_VALUE_NUMBER, .offset = M(device.efficiency),
                                  .lo = 0, .hi = 1, .open = SIM_OPEN_LO, .fallback = "0.5",
                                  .expect = "a number in (0, 1]" },
  [SIM_KEY_DEVICE_HBM_BANDWIDTH] = { SIM_GROUP_DEVICE, "hbm_bandwidth", SIM_VALUE_RATE, SIM_NEED_SOMETIMES,
                                     "for `[transformer]` and a `[trace]` timed by its op counts",
                                     M(device.hbm_bandwidth),
                                     .expect = "a rate such as 3.35TB/s" },
  /* The kernel time model (sim/engine/kernel.h): achievable figures, not
   * datasheet peaks; docs/reference.md, "The kernel cost model". */
  [SIM_KEY_DEVICE_MATMUL_TFLOPS_BF16] = { SIM_GROUP_DEVICE, "matmul_tflops_bf16", SIM_VALUE_NUMBER,
                                          .offset = M(device.dtype_flops[SIM_DTYPE_BF16]), .lo = 0, .hi = 1e9,
                                          .scale = 1e12, .open = SIM_OPEN_LO, .doc_default = "none",
                                          .expect = "a positive number of TFLOP/s such as 794.5" },
  [SIM_KEY_DEVICE_MATMUL_TFLOPS_FP16] = { SIM_GROUP_DEVICE, "matmul_tflops_fp16", SIM_VALUE_NUMBER,
                                          .offset = M(device.dtype_flops[SIM_DTYPE_FP16]), .lo = 0, .hi = 1e9,
                                          .scale = 1e12, .open = SIM_OPEN_LO, .doc_default = "none",
                                          .expect = "a positive number of TFLOP/s such as 794.5" },
  [SIM_KEY_DEVICE_MATMUL_TFLOPS_FP32] = { SIM_GROUP_DEVICE, "matmul_tflops_fp32", SIM_VALUE_NUMBER,
                                          .offset = M(device.dtype_flops[SIM_DTYPE_FP32]), .lo = 0, .hi = 1e9,
                                          .scale = 1e12, .open = SIM_OPEN_LO, .doc_default = "none",
                                          .expect = "a positive number of TFLOP/s such as 67" },
  [SIM_KEY_DEVICE_SM_COUNT] = { SIM_GROUP_DEVICE, "sm_count", SIM_VALUE_COUNT, .offset = M(device.sm_count), .min = 1,
                                .max = 100000, .doc_default = "none", .expect = "a whole number of SMs such as 132" },
  [SIM_KEY_DEVICE_GEMM_TILE] = { SIM_GROUP_DEVICE, "gemm_tile", SIM_VALUE_TEXT, .offset = HAND, .doc_default = "none",
                                 .expect = "an output tile MxN such as 128x256" },
  [SIM_KEY_DEVICE_ATTENTION_TFLOPS] = { SIM_GROUP_DEVICE, "attention_tflops", SIM_VALUE_NUMBER,
                                        .offset = M(device.attention_flops), .lo = 0, .hi = 1e9, .scale = 1e12,
                                        .open = SIM_OPEN_LO, .doc_default = "none",
                                        .expect = "a positive number of TFLOP/s such as 648" },
  [SIM_KEY_DEVICE_ATTENTION_BACKWARD_TFLOPS] = { SIM_GROUP_DEVICE, "attention_backward_tflops", SIM_VALUE_NUMBER,
                                                 .offset = M(device.attention_backward_flops), .lo = 0, .hi = 1e9,
                                                 .scale = 1e12, .open = SIM_OPEN_LO, .doc_default = "none",
                                                 .expect = "a positive number of TFLOP/s such as 561" },
  [SIM_KEY_DEVICE_LAUNCH_OVERHEAD] = { SIM_GROUP_DEVICE, "launch_overhead", SIM_VALUE_TIME,
                                       .offset = M(device.launch_overhead), .doc_default = "none",
                                       .expect = "a time such as 5us" },
  [SIM_KEY_DEVICE_GEMM_TABLE] = { SIM_GROUP_DEVICE, "gemm_table", SIM_VALUE_LIST, .offset = HAND,
                                  .doc_default = "none", .expect = gemm_table_expect },
  /* PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the caching
   * allocator's segments grow instead of one per large request
   * (sim/engine/allocator.h); what `peak_reserved_bytes` replays. */
  [SIM_KEY_DEVICE_EXPANDABLE_SEGMENTS] = { SIM_GROUP_DEVICE, "expandable_segments", SIM_VALUE_BOOL,
                                           .offset = M(device.expandable_segments), .fallback = "false",
                                           .expect = "true or false" },

  [SIM_KEY_LINK_H2D_BANDWIDTH] = { SIM_GROUP_LINK, "h2d_bandwidth", SIM_VALUE_RATE, SIM_NEED_REQUIRED,
                                   .offset = M(link.h2d_bandwidth), .expect = "a rate such as 55GB/s" },
  [SIM_KEY_LINK_D2H_BANDWIDTH] = { SIM_GROUP_LINK, "d2h_bandwidth", SIM_VALUE_RATE, SIM_NEED_REQUIRED,
                                   .offset = M(link.d2h_bandwidth), .expect = "a rate such as 55GB/s" },
  [SIM_KEY_LINK_BIDIR_BANDWIDTH] = { SIM_GROUP_LINK, "bidir_bandwidth", SIM_VALUE_RATE,
                                     .offset = M(link.bidir_bandwidth), .doc_default = "the sum",
                                     .expect = "a rate such as 100GB/s" },
  [SIM_KEY_LINK_LATENCY] = { SIM_GROUP_LINK, "latency", SIM_VALUE_TIME, .offset = M(link.latency), .fallback = "0", .expect = "a time such as 8us" },
  [SIM_KEY_LINK_PAGEABLE_FACTOR] = { SIM_GROUP_LINK, "pageable_factor", SIM_VALUE_NUMBER,
                                     .offset = M(link.pageable_factor), .lo = 0, .hi = 1, .open = SIM_OPEN_LO,
                                     .fallback = "0.5", .expect = "a number in (0, 1]" },
  [SIM_KEY_LINK_COMPUTE_SLOWDOWN] = { SIM_GROUP_LINK, "compute_slowdown", SIM_VALUE_NUMBER,
                                      .offset = M(link.compute_slowdown), .lo = 0, .hi = 1, .open = SIM_OPEN_HI,
                                      .fallback = "0", .expect = "a number in [0, 1)" },
  /* The published cost of one cudaHostAlloc (docs/reference.md). */
  [SIM_KEY_LINK_HOST_ALLOC] = { SIM_GROUP_LINK, "host_alloc", SIM_VALUE_TIME, .offset = M(link.host_alloc),
                                .fallback = "3ms", .expect = "a time such as 3ms" },
  [SIM_KEY_LINK_H2D_TABLE] = { SIM_GROUP_LINK, "h2d_table", SIM_VALUE_LIST, .offset = HAND, .doc_default = "none",
                               .expect = table_expect },
  [SIM_KEY_LINK_D2H_TABLE] = { SIM_GROUP_LINK, "d2h_table", SIM_VALUE_LIST, .offset = HAND, .doc_default = "none",
                               .expect = table_expect },

  [SIM_KEY_MODEL_LAYERS] = { SIM_GROUP_MODEL, "layers", SIM_VALUE_COUNT, SIM_NEED_REQUIRED, .offset = HAND, .min = 1,
                             .max = LAYERS_MAX, .expect = "a layer count such as 24" },
  [SIM_KEY_MODEL_FORWARD] = { SIM_GROUP_MODEL, "forward", SIM_VALUE_TIME, SIM_NEED_REQUIRED, .offset = HAND,
                              .expect = "a time such as 2ms" },
  [SIM_KEY_MODEL_BACKWARD] = { SIM_GROUP_MODEL, "backward", SIM_VALUE_TIME, .offset = HAND,
                               .doc_default = "2 × forward", .expect = "a time such as 4ms" },
  [SIM_KEY_MODEL_INPUT] = { SIM_GROUP_MODEL, "input", SIM_VALUE_SIZE, SIM_NEED_REQUIRED, .offset = HAND,
                            .expect = "a size such as 8MiB" },
  [SIM_KEY_MODEL_TENSORS] = { SIM_GROUP_MODEL, "tensors", SIM_VALUE_LIST, SIM_NEED_REQUIRED, .offset = HAND,
                              .expect = tensors_expect },
  [SIM_KEY_MODEL_STATIC] = { SIM_GROUP_MODEL, "static", SIM_VALUE_SIZE, .offset = HAND, .fallback = "0", .expect = "a size such as 1GiB" },
  [SIM_KEY_MODEL_WORKSPACE] = { SIM_GROUP_MODEL, "workspace", SIM_VALUE_SIZE, .offset = HAND, .fallback = "0", .expect = "a size such as 64MiB" },

  [SIM_KEY_LAYER_FORWARD] = { SIM_GROUP_LAYER, "forward", SIM_VALUE_TIME, .offset = HAND,
                              .doc_default = "[model]'s", .expect = "a time such as 2ms" },
  [SIM_KEY_LAYER_BACKWARD] = { SIM_GROUP_LAYER, "backward", SIM_VALUE_TIME, .offset = HAND,
                               .doc_default = "[model]'s", .expect = "a time such as 4ms" },
  [SIM_KEY_LAYER_INPUT] = { SIM_GROUP_LAYER, "input", SIM_VALUE_SIZE, .offset = HAND, .doc_default = "[model]'s",
                            .expect = "a size such as 8MiB" },
  [SIM_KEY_LAYER_TENSORS] = { SIM_GROUP_LAYER, "tensors", SIM_VALUE_LIST, .offset = HAND,
                              .doc_default = "[model]'s", .expect = tensors_expect },
  [SIM_KEY_LAYER_WORKSPACE] = { SIM_GROUP_LAYER, "workspace", SIM_VALUE_SIZE, .offset = HAND,
                                .doc_default = "[model]'s", .expect = "a size such as 64MiB" },

  [SIM_KEY_TRANSFORMER_HF_CONFIG] = { SIM_GROUP_TRANSFORMER, "hf_config", SIM_VALUE_PATH, .offset = HAND,
                                      .expect = "the path of a HuggingFace config.json" },
  [SIM_KEY_TRANSFORMER_HIDDEN] = { SIM_GROUP_TRANSFORMER, "hidden", SIM_VALUE_COUNT, SIM_NEED_SOMETIMES,
                                   "without `hf_config`", T(hidden), .min = 1, .max = 1 << 20,
                                   .expect = "a whole number such as 896" },
  [SIM_KEY_TRANSFORMER_LAYERS] = { SIM_GROUP_TRANSFORMER, "layers", SIM_VALUE_COUNT, SIM_NEED_SOMETIMES,
                                   "without `hf_config`", T(layers), .min = 1, .max = LAYERS_MAX,
                                   .expect = "a layer count such as 24" },
  [SIM_KEY_TRANSFORMER_HEADS] = { SIM_GROUP_TRANSFORMER, "heads", SIM_VALUE_COUNT, SIM_NEED_SOMETIMES,
                                  "without `hf_config`", T(heads), .min = 1, .max = 1 << 16,
                                  .expect = "a whole number such as 14" },
  [SIM_KEY_TRANSFORMER_KV_HEADS] = { SIM_GROUP_TRANSFORMER, "kv_heads", SIM_VALUE_COUNT, .offset = T(kv_heads),
                                     .min = 1, .max = 1 << 16, .doc_default = "`heads`",
                                     .expect = "a whole number dividing heads" },
  [SIM_KEY_TRANSFORMER_HEAD_DIM] = { SIM_GROUP_TRANSFORMER, "head_dim", SIM_VALUE_COUNT, .offset = T(head_dim),
                                     .min = 1, .max = 1 << 16, .doc_default = "`hidden / heads`",
                                     .expect = "a whole number such as 64" },
  [SIM_KEY_TRANSFORMER_FFN] = { SIM_GROUP_TRANSFORMER, "ffn", SIM_VALUE_COUNT, SIM_NEED_SOMETIMES,
                                "without `hf_config`", T(ffn), .min = 1, .max = 1 << 24,
                                .expect = "a whole number such as 4864" },
  [SIM_KEY_TRANSFORMER_VOCAB] = { SIM_GROUP_TRANSFORMER, "vocab", SIM_VALUE_COUNT64, SIM_NEED_SOMETIMES,
                                  "without `hf_config`", T(vocab), .min = 1, .max = 1 << 30,
                                  .expect = "a whole number such as 151936" },
  [SIM_KEY_TRANSFORMER_POSITIONS] = { SIM_GROUP_TRANSFORMER, "positions", SIM_VALUE_COUNT, .offset = T(max_positions),
                                      .min = 0, .max = 1 << 24, .fallback = "0",
                                      .expect = "a whole number (learned position embeddings)" },
  [SIM_KEY_TRANSFORMER_BATCH] = { SIM_GROUP_TRANSFORMER, "batch", SIM_VALUE_COUNT, SIM_NEED_REQUIRED,
                                  .offset = T(batch), .min = 1, .max = 1 << 20, .expect = "a whole number such as 2" },
  [SIM_KEY_TRANSFORMER_SEQ] = { SIM_GROUP_TRANSFORMER, "seq", SIM_VALUE_COUNT, SIM_NEED_REQUIRED, .offset = T(seq),
                                .min = 1, .max = 1 << 24, .expect = "a whole number such as 512" },
  [SIM_KEY_TRANSFORMER_DTYPE] = { SIM_GROUP_TRANSFORMER, "dtype", SIM_VALUE_CHOICE, .offset = T(dtype),
                                  .names = sim_dtype_names, .fallback = "bf16" },
  [SIM_KEY_TRANSFORMER_NORM] = { SIM_GROUP_TRANSFORMER, "norm", SIM_VALUE_CHOICE, .offset = T(layernorm),
                                 .names = norm_names, .fallback = "rmsnorm" },
  [SIM_KEY_TRANSFORMER_MLP] = { SIM_GROUP_TRANSFORMER, "mlp", SIM_VALUE_CHOICE, .offset = T(gelu), .names = mlp_names,
                                .fallback = "swiglu" },
  [SIM_KEY_TRANSFORMER_HIDDEN_ACT] = { SIM_GROUP_TRANSFORMER, "hidden_act", SIM_VALUE_CHOICE, .offset = T(hidden_act),
                                       .names = sim_activation_names, .fallback = "silu" },
  [SIM_KEY_TRANSFORMER_ATTENTION] = { SIM_GROUP_TRANSFORMER, "attention", SIM_VALUE_CHOICE, .offset = T(attention),
                                      .names = sim_attention_names,
                                      .doc_default = "`sdpa` for `ops = hf`, `flash` for `ops = fused`" },
  [SIM_KEY_TRANSFORMER_OPS] = { SIM_GROUP_TRANSFORMER, "ops", SIM_VALUE_CHOICE, .offset = T(hf_ops), .names = ops_names,
                                .fallback = "fused" },
  [SIM_KEY_TRANSFORMER_DROPOUT] = { SIM_GROUP_TRANSFORMER, "dropout", SIM_VALUE_NUMBER, .offset = T(dropout), .lo = 0,
                                    .hi = 1, .open = SIM_OPEN_HI, .fallback = "0",
                                    .expect = "a probability in [0, 1)" },
  [SIM_KEY_TRANSFORMER_TIED_EMBEDDINGS] = { SIM_GROUP_TRANSFORMER, "tied_embeddings", SIM_VALUE_BOOL,
                                            .offset = T(tied_embeddings), .fallback = "false", .expect = "true or false" },
  [SIM_KEY_TRANSFORMER_QKV_BIAS] = { SIM_GROUP_TRANSFORMER, "qkv_bias", SIM_VALUE_BOOL, .offset = T(qkv_bias),
                                     .fallback = "false", .expect = "true or false" },
  [SIM_KEY_TRANSFORMER_LINEAR_BIAS] = { SIM_GROUP_TRANSFORMER, "linear_bias", SIM_VALUE_BOOL, .offset = T(linear_bias),
                                        .fallback = "false", .expect = "true or false" },
  [SIM_KEY_TRANSFORMER_TP] = { SIM_GROUP_TRANSFORMER, "tp", SIM_VALUE_COUNT, .offset = T(tp), .min = 1, .max = 1 << 16,
                               .fallback = "1", .expect = "a tensor-parallel degree such as 8" },
  [SIM_KEY_TRANSFORMER_SP] = { SIM_GROUP_TRANSFORMER, "sp", SIM_VALUE_BOOL, .offset = T(sp), .fallback = "false", .expect = "true or false" },
  [SIM_KEY_TRANSFORMER_OPTIMIZER] = { SIM_GROUP_TRANSFORMER, "optimizer", SIM_VALUE_CHOICE, .offset = T(adamw),
                                      .names = optimizer_names, .fallback = "adamw",
                                      .expect = "adamw or none" },
  [SIM_KEY_TRANSFORMER_MASTER_WEIGHTS] = { SIM_GROUP_TRANSFORMER, "master_weights", SIM_VALUE_BOOL,
                                           .offset = T(master_weights), .fallback = "true",
                                           .expect = "true or false" },
  /* Megatron's --clip-grad and HF Trainer's max_grad_norm both default to
   * 1.0: the step clips unless told not to. */
  [SIM_KEY_TRANSFORMER_CLIP_GRAD] = { SIM_GROUP_TRANSFORMER, "clip_grad", SIM_VALUE_BOOL, .offset = T(clip_grad),
                                      .fallback = "true", .expect = "true or false" },
  /* Follows ops: PyTorch's default on CUDA under HF's code (adamw() asks
   * _default_to_fused_or_foreach with use_fused=False:
   * sim/engine/optimizer.h), Megatron's fused Adam (TE's or apex's
   * FusedAdam, megatron/core/optimizer/__init__.py) under fused kernels. */
  [SIM_KEY_TRANSFORMER_OPTIMIZER_KERNELS] = { SIM_GROUP_TRANSFORMER, "optimizer_kernels", SIM_VALUE_CHOICE,
                                              .offset = T(optimizer_kernels), .names = sim_optimizer_kernels_names,
                                              .doc_default = "`foreach` for `ops = hf`, `fused` for `ops = fused`" },
  /* Follows ops: PyTorch's zero_grad(set_to_none=True) under HF's code,
   * Megatron's contiguous gradient buffer under fused kernels. */
  [SIM_KEY_TRANSFORMER_GRADS] = { SIM_GROUP_TRANSFORMER, "grads", SIM_VALUE_CHOICE, .offset = T(grads_kept),
                                  .names = grads_names, .doc_default = "`set-to-none` for `ops = hf`, `kept` for `ops = fused`" },
  [SIM_KEY_TRANSFORMER_OUTPUTS] = { SIM_GROUP_TRANSFORMER, "outputs", SIM_VALUE_CHOICE, .offset = T(outputs_held),
                                    .names = outputs_names, .fallback = "dropped" },
  /* Mixture of experts (sim/input/transformer.h); 0 experts: dense. */
  [SIM_KEY_TRANSFORMER_EXPERTS] = { SIM_GROUP_TRANSFORMER, "experts", SIM_VALUE_COUNT, .offset = T(experts), .min = 0,
                                    .max = 1 << 16, .fallback = "0", .expect = "a whole number such as 128 (0: dense)" },
  [SIM_KEY_TRANSFORMER_TOP_K] = { SIM_GROUP_TRANSFORMER, "top_k", SIM_VALUE_COUNT, .offset = T(top_k), .min = 0,
                                  .max = 1 << 16, .fallback = "0", .expect = "a whole number such as 8, at most experts" },
  [SIM_KEY_TRANSFORMER_MOE_FFN] = { SIM_GROUP_TRANSFORMER, "moe_ffn", SIM_VALUE_COUNT, .offset = T(moe_ffn), .min = 0,
                                    .max = 1 << 24, .fallback = "0", .expect = "a whole number such as 768" },
  [SIM_KEY_TRANSFORMER_SHARED_FFN] = { SIM_GROUP_TRANSFORMER, "shared_ffn", SIM_VALUE_COUNT, .offset = T(shared_ffn),
                                       .min = 0, .max = 1 << 24, .fallback = "0",
                                       .expect = "a whole number such as 5632 (0: no shared expert)" },
  [SIM_KEY_TRANSFORMER_SHARED_GATE] = { SIM_GROUP_TRANSFORMER, "shared_gate", SIM_VALUE_BOOL, .offset = T(shared_gate),
                                        .fallback = "false", .expect = "true or false" },
  [SIM_KEY_TRANSFORMER_DENSE_LAYERS] = { SIM_GROUP_TRANSFORMER, "dense_layers", SIM_VALUE_COUNT,
                                         .offset = T(dense_layers), .min = 0, .max = LAYERS_MAX, .fallback = "0",
                                         .expect = "a layer count such as 3" },
  [SIM_KEY_TRANSFORMER_SPARSE_STEP] = { SIM_GROUP_TRANSFORMER, "sparse_step", SIM_VALUE_COUNT, .offset = T(sparse_step),
                                        .min = 1, .max = LAYERS_MAX, .fallback = "1", .expect = "a whole number such as 1" },
  [SIM_KEY_TRANSFORMER_NORM_TOPK] = { SIM_GROUP_TRANSFORMER, "norm_topk", SIM_VALUE_BOOL, .offset = T(norm_topk),
                                      .fallback = "false", .expect = "true or false" },
  [SIM_KEY_TRANSFORMER_QK_NORM] = { SIM_GROUP_TRANSFORMER, "qk_norm", SIM_VALUE_BOOL, .offset = T(qk_norm),
                                    .fallback = "false", .expect = "true or false" },
  [SIM_KEY_TRANSFORMER_EXPERT_IMBALANCE] = { SIM_GROUP_TRANSFORMER, "expert_imbalance", SIM_VALUE_NUMBER,
                                             .offset = T(expert_imbalance), .lo = 1, .hi = 1 << 16, .fallback = "1",
                                             .expect = "a number from 1 (balanced) up, at most experts / top_k" },
  [SIM_KEY_TRANSFORMER_CAPACITY_FACTOR] = { SIM_GROUP_TRANSFORMER, "capacity_factor", SIM_VALUE_NUMBER,
                                            .offset = T(capacity_factor), .lo = 0, .hi = 1 << 16, .fallback = "0",
                                            .expect = "a number such as 1.25 (0: no token dropped)" },
  /* Multi-head latent attention (DeepSeek-V3); 0 kv_lora_rank: none. */
  [SIM_KEY_TRANSFORMER_Q_LORA_RANK] = { SIM_GROUP_TRANSFORMER, "q_lora_rank", SIM_VALUE_COUNT, .offset = T(q_lora_rank),
                                        .min = 0, .max = 1 << 20, .fallback = "0",
                                        .expect = "a whole number such as 1536 (0: q projected directly)" },
  [SIM_KEY_TRANSFORMER_KV_LORA_RANK] = { SIM_GROUP_TRANSFORMER, "kv_lora_rank", SIM_VALUE_COUNT,
                                         .offset = T(kv_lora_rank), .min = 0, .max = 1 << 20, .fallback = "0",
                                         .expect = "a whole number such as 512 (0: no latent attention)" },
  [SIM_KEY_TRANSFORMER_QK_ROPE_DIM] = { SIM_GROUP_TRANSFORMER, "qk_rope_dim", SIM_VALUE_COUNT, .offset = T(qk_rope_dim),
                                        .min = 0, .max = 1 << 16, .fallback = "0",
                                        .expect = "a whole number such as 64, below head_dim" },
  [SIM_KEY_TRANSFORMER_V_HEAD_DIM] = { SIM_GROUP_TRANSFORMER, "v_head_dim", SIM_VALUE_COUNT, .offset = T(v_head_dim),
                                       .min = 0, .max = 1 << 16, .fallback = "0",
                                       .expect = "a whole number such as 128" },

  [SIM_KEY_TRACE_FILE] = { SIM_GROUP_TRACE, "file", SIM_VALUE_PATH, SIM_NEED_REQUIRED, .offset = HAND,
                           .expect = "the path of a CSV from python/offsim_torch/recorder.py" },
  [SIM_KEY_TRACE_FORWARD] = { SIM_GROUP_TRACE, "forward", SIM_VALUE_TIME, SIM_NEED_SOMETIMES,
                              "unless the file has op counts (`recorder.py`)", .offset = HAND,
                              .expect = "a time such as 2ms (per layer)" },
  [SIM_KEY_TRACE_BACKWARD] = { SIM_GROUP_TRACE, "backward", SIM_VALUE_TIME, .offset = HAND,
                               .doc_default = "2 × forward", .expect = "a time such as 4ms (per layer)" },
  [SIM_KEY_TRACE_WORKSPACE] = { SIM_GROUP_TRACE, "workspace", SIM_VALUE_SIZE, .offset = HAND, .fallback = "0", .expect = "a size such as 64MiB" },
  [SIM_KEY_TRACE_STATIC] = { SIM_GROUP_TRACE, "static", SIM_VALUE_SIZE, .offset = HAND, .fallback = "0", .expect = "a size such as 1GiB" },

  [SIM_KEY_PARALLEL_PP] = { SIM_GROUP_PARALLEL, "pp", SIM_VALUE_COUNT, .offset = PAR(pp), .min = 1,
                            .max = SIM_PARALLEL_MAX_GPUS, .fallback = "1", .expect = "a pipeline stage count such as 4" },
  [SIM_KEY_PARALLEL_MICROBATCHES] = { SIM_GROUP_PARALLEL, "microbatches", SIM_VALUE_COUNT, .offset = PAR(microbatches),
                                      .min = 1, .max = 1 << 16, .fallback = "1",
                                      .expect = "a micro-batch count such as 8" },
  [SIM_KEY_PARALLEL_SCHEDULE] = { SIM_GROUP_PARALLEL, "schedule", SIM_VALUE_CHOICE, .offset = PAR(schedule),
                                  .names = sim_pipe_schedule_names, .fallback = "1f1b" },
  /* Megatron's --num-layers-per-virtual-pipeline-stage, as a chunk count. */
  [SIM_KEY_PARALLEL_VIRTUAL] = { SIM_GROUP_PARALLEL, "virtual", SIM_VALUE_COUNT, .offset = PAR(virtual_chunks),
                                 .min = 1, .max = LAYERS_MAX, .fallback = "1",
                                 .expect = "a chunk count per stage such as 2 (above 1 only with schedule = interleaved)" },
  [SIM_KEY_PARALLEL_DP] = { SIM_GROUP_PARALLEL, "dp", SIM_VALUE_COUNT, .offset = PAR(dp), .min = 1,
                            .max = SIM_PARALLEL_MAX_GPUS, .fallback = "1", .expect = "a data-parallel degree such as 2" },
  /* Megatron's --expert-model-parallel-size: the MoE layers' experts over ep
   * of the dp replicas (sim/model/parallel.h). */
  [SIM_KEY_PARALLEL_EP] = { SIM_GROUP_PARALLEL, "ep", SIM_VALUE_COUNT, .offset = PAR(ep), .min = 1,
                            .max = SIM_PARALLEL_MAX_GPUS, .fallback = "1",
                            .expect = "an expert-parallel degree such as 8 (dividing dp and experts)" },
  /* ZeRO's stages over the dp replicas (sim/model/sharding.h). */
  [SIM_KEY_PARALLEL_SHARDING] = { SIM_GROUP_PARALLEL, "sharding", SIM_VALUE_CHOICE, .offset = PAR(sharding),
                                  .names = sim_sharding_names, .fallback = "none" },
  [SIM_KEY_PARALLEL_SPLIT] = { SIM_GROUP_PARALLEL, "split", SIM_VALUE_LIST, .offset = HAND, .doc_default = "even",
                               .expect = "one layer count per chunk, pp × virtual of them in model order, such as 7, 9, 9, 7" },
  /* NVLink 4 (H100 SXM): 900 GB/s per GPU, both directions together. */
  [SIM_KEY_PARALLEL_P2P_BANDWIDTH] = { SIM_GROUP_PARALLEL, "p2p_bandwidth", SIM_VALUE_RATE,
                                       .offset = PAR(p2p_bandwidth), .fallback = "450GB/s",
                                       .expect = "a rate such as 450GB/s" },
  [SIM_KEY_PARALLEL_P2P_LATENCY] = { SIM_GROUP_PARALLEL, "p2p_latency", SIM_VALUE_TIME, .offset = PAR(p2p_latency),
                                     .fallback = "0", .expect = "a time such as 10us" },
  /* PyTorch DDP's bucket_cap_mb = 25 (torch/nn/parallel/distributed.py: bucket_cap_mb * 1024 * 1024). */
  [SIM_KEY_PARALLEL_BUCKET] = { SIM_GROUP_PARALLEL, "bucket", SIM_VALUE_SIZE, .offset = PAR(bucket), .fallback = "25MiB",
                                .expect = "a size such as 25MiB (0: each op's gradients on their own)" },
  [SIM_KEY_PARALLEL_OFFLOAD_OPTIMIZER] = { SIM_GROUP_PARALLEL, "offload_optimizer", SIM_VALUE_BOOL,
                                           .offset = PAR(offload_optimizer), .fallback = "false",
                                           .expect = "true or false" },
  [SIM_KEY_PARALLEL_OFFLOAD_PARAMS] = { SIM_GROUP_PARALLEL, "offload_params", SIM_VALUE_BOOL,
                                        .offset = PAR(offload_params), .fallback = "false", .expect = "true or false" },

  [SIM_KEY_NODE_GPUS_PER_SWITCH] = { SIM_GROUP_NODE, "gpus_per_switch", SIM_VALUE_COUNT,
                                     .offset = M(link.node.gpus_per_switch), .min = 1, .max = SIM_NODE_MAX_GPUS,
                                     .fallback = "1", .expect = "a GPU count such as 2" },
  /* 0: every GPU has its own path to the root complex, as one GPU alone does. */
  [SIM_KEY_NODE_SWITCH_BANDWIDTH] = { SIM_GROUP_NODE, "switch_bandwidth", SIM_VALUE_RATE,
                                      .offset = M(link.node.switch_bandwidth), .zero = TRUE, .fallback = "0",
                                      .expect = "a rate such as 64GB/s, or 0 (no shared uplink)" },
  [SIM_KEY_NODE_SOCKETS] = { SIM_GROUP_NODE, "sockets", SIM_VALUE_COUNT, .offset = M(link.node.sockets), .min = 1,
                             .max = SIM_NODE_MAX_GPUS, .fallback = "1", .expect = "a socket count such as 2" },
  [SIM_KEY_NODE_HOST_MEMORY_BANDWIDTH] = { SIM_GROUP_NODE, "host_memory_bandwidth", SIM_VALUE_RATE,
                                           .offset = M(link.node.host_memory_bandwidth), .zero = TRUE,
                                           .fallback = "0", .expect = "a rate such as 200GB/s, or 0 (not limited)" },
  [SIM_KEY_NODE_GPU_SOCKETS] = { SIM_GROUP_NODE, "gpu_sockets", SIM_VALUE_LIST, .offset = HAND,
                                 .doc_default = "contiguous blocks",
                                 .expect = "one socket index per GPU, pp × dp of them, such as 0, 0, 1, 1" },
  /* The collective figures (sim/engine/collective.h) default to an 8-GPU
   * HGX H100 node (NVLink 4, NVSwitch), as the default scenario's device.
   * 8 GPUs: NVIDIA DGX H100 / HGX H100 8-GPU. */
  [SIM_KEY_NODE_GPUS] = { SIM_GROUP_NODE, "gpus", SIM_VALUE_COUNT, .offset = M(link.node.gpus), .min = 1,
                          .max = SIM_NODE_MAX_GPUS, .fallback = "8",
                          .expect = "a GPU count per node such as 8, a multiple of gpus_per_switch" },
  /* NCCL ring all-reduce bus bandwidth on 8 H100 over NVLink 4 without NVLink
   * SHARP: 370 GB/s (NVIDIA, GTC 2025 session S72583, slide "all-reduce bw",
   * as reproduced in stas00/ml-engineering network/README.md, "SHARP",
   * @744d01e; the same page measures 367.2 GB/s with nccl-tests on 8 H200,
   * NCCL_NVLS_ENABLE=0, 16 GiB). */
  [SIM_KEY_NODE_COLLECTIVE_BANDWIDTH] = { SIM_GROUP_NODE, "collective_bandwidth", SIM_VALUE_RATE,
                                          .offset = M(link.node.collective_bandwidth), .fallback = "370GB/s",
                                          .expect = "a rate such as 370GB/s (NCCL bus bandwidth per GPU)" },
  /* The time of the smallest all-reduce of a published 8 x H200 sweep:
   * 32 KiB at 0.82 GB/s algbw = 40 us (ml-engineering network/README.md,
   * "Real network throughput", all_reduce_bench.py, @744d01e). */
  [SIM_KEY_NODE_COLLECTIVE_LATENCY] = { SIM_GROUP_NODE, "collective_latency", SIM_VALUE_TIME,
                                        .offset = M(link.node.collective_latency), .fallback = "40us",
                                        .expect = "a time such as 40us" },
  /* NCCL runs one CTA per channel, each on an SM; NCCL set up 16 (NVLS)
   * channels on 8 H200 (ml-engineering network/README.md, "SHARP", @744d01e):
   * 16 of 132 SMs = 0.12.  No published ring channel count was found. */
  [SIM_KEY_NODE_COLLECTIVE_SLOWDOWN] = { SIM_GROUP_NODE, "collective_slowdown", SIM_VALUE_NUMBER,
                                         .offset = M(link.node.collective_slowdown), .lo = 0, .hi = 1,
                                         .open = SIM_OPEN_HI, .fallback = "0.12", .expect = "a number in [0, 1)" },
  /* DeepSpeed's CPU-Adam: the optimizer step of an 11.6B-parameter GPT-2
   * from 56 s (torch.optim.Adam) to 8.2 s, 1.41e9 parameters a second
   * (deepspeedai/DeepSpeed pull request #735, 2021; the CPU is not named).
   * Not a measurement of any node here: measure yours. */
  [SIM_KEY_NODE_HOST_ADAM_GPARAMS] = { SIM_GROUP_NODE, "host_adam_gparams", SIM_VALUE_NUMBER,
                                       .offset = M(link.node.host_optimizer_rate), .lo = 0, .hi = 1e6, .scale = 1e9,
                                       .open = SIM_OPEN_LO, .fallback = "1.41",
                                       .expect = "a positive number of billion parameters a second such as 1.41" },

  /* DGX H100: 8 ConnectX-7 at 400 Gb/s InfiniBand NDR, one per GPU: 50 GB/s
   * (line rate; ml-engineering network/README.md, "InfiniBand", @744d01e). */
  [SIM_KEY_NETWORK_BANDWIDTH] = { SIM_GROUP_NETWORK, "bandwidth", SIM_VALUE_RATE,
                                  .offset = M(link.network.bandwidth), .fallback = "50GB/s",
                                  .expect = "a rate such as 50GB/s (per GPU)" },
  /* No published small-message nccl-tests figure over InfiniBand NDR was
   * found; the smallest all-reduce of a published 2-node 16 x H100 run
   * (GCP a3-mega, GPUDirect-TCPXO, not InfiniBand: pessimistic), 8 B in
   * place: 123 us (lessizzmore/create-a3mega-ztan-fork,
   * ztan-NCCL-test-result @02dd8f4). */
  [SIM_KEY_NETWORK_LATENCY] = { SIM_GROUP_NETWORK, "latency", SIM_VALUE_TIME, .offset = M(link.network.latency),
                                .fallback = "123us", .expect = "a time such as 123us" },

  [SIM_KEY_POLICY_KIND] = { SIM_GROUP_POLICY, "kind", SIM_VALUE_CHOICE, SIM_NEED_REQUIRED, .offset = P(kind),
                            .names = sim_policy_kind_names, .kinds = ALL_KINDS },
  [SIM_KEY_POLICY_MODE] = { SIM_GROUP_POLICY, "mode", SIM_VALUE_CHOICE, .offset = P(async), .names = offload_modes,
                            .kinds = OFFLOAD_PLAN,
                            .expect = "sync or async (offload, plan); full or selective (checkpoint)" },
  [SIM_KEY_POLICY_CHECKPOINT_MODE] = { SIM_GROUP_POLICY, "mode", SIM_VALUE_CHOICE, .offset = P(selective),
                                       .names = checkpoint_modes, .kinds = BIT(SIM_POLICY_CHECKPOINT),
                                       .expect = "sync or async (offload, plan); full or selective (checkpoint)" },
  /* Follows the mode: verl copies each storage once, save_on_cpu every reference. */
  [SIM_KEY_POLICY_DEDUP] = { SIM_GROUP_POLICY, "dedup", SIM_VALUE_BOOL, .offset = P(dedup),
                             .doc_default = "`false` for sync, `true` for async", .kinds = OFFLOAD_PLAN,
                             .expect = "true or false" },
  [SIM_KEY_POLICY_PREFETCH] = { SIM_GROUP_POLICY, "prefetch", SIM_VALUE_COUNT, .offset = P(prefetch), .min = 0,
                                .max = G_MAXUINT32, .kinds = OFFLOAD_PLAN,
                                .expect = "a layer count such as 1" },
  [SIM_KEY_POLICY_INFLIGHT] = { SIM_GROUP_POLICY, "inflight", SIM_VALUE_COUNT, .offset = P(inflight), .min = 1,
                                .max = G_MAXUINT32, .kinds = OFFLOAD_PLAN,
                                .expect = "a group count of at least 1" },
  [SIM_KEY_POLICY_LAYERS] = { SIM_GROUP_POLICY, "layers", SIM_VALUE_LIST, .offset = HAND, .doc_default = "`all`",
                              .kinds = BIT(SIM_POLICY_OFFLOAD) | BIT(SIM_POLICY_CHECKPOINT), .expect = layer_set_expect },
  /* Follows the mode: verl keeps the last layer, save_on_cpu none. */
  [SIM_KEY_POLICY_KEEP_LAST] = { SIM_GROUP_POLICY, "keep_last", SIM_VALUE_COUNT, .offset = P(keep_last), .min = 0,
                                 .max = G_MAXUINT32, .doc_default = "`0` for sync, `1` for async",
                                 .kinds = BIT(SIM_POLICY_OFFLOAD), .expect = "a layer count such as 1" },
  [SIM_KEY_POLICY_MIN_TENSOR] = { SIM_GROUP_POLICY, "min_tensor", SIM_VALUE_SIZE, .offset = P(min_tensor),
                                  .kinds = OFFLOAD_PLAN,
                                  .expect = "a size such as 1MiB" },
  /* A preset of the keys below, as the framework's code sets them (scenario.c, framework_presets). */
  [SIM_KEY_POLICY_FRAMEWORK] = { SIM_GROUP_POLICY, "framework", SIM_VALUE_CHOICE, .offset = P(framework),
                                 .names = sim_framework_names, .kinds = OFFLOAD_PLAN },
  [SIM_KEY_POLICY_PIN_MEMORY] = { SIM_GROUP_POLICY, "pin_memory", SIM_VALUE_BOOL, .offset = HAND, .fallback = "false",
                                  .kinds = OFFLOAD_PLAN, .expect = "true or false (with framework = save_on_cpu)" },
  /* Read by hand before the preset is applied: which code the preset follows. */
  [SIM_KEY_POLICY_VERSION] = { SIM_GROUP_POLICY, "version", SIM_VALUE_CHOICE, .offset = HAND, .names = sim_version_names,
                               .fallback = "release", .kinds = OFFLOAD_PLAN,
                               .expect = "release or master (with framework = deepspeed)" },
  /* Read by hand into the preset's hooked modules (scenario.c, get_offload_modules). */
  [SIM_KEY_POLICY_OFFLOAD_MODULES] = { SIM_GROUP_POLICY, "offload_modules", SIM_VALUE_LIST, .offset = HAND,
                                       .doc_default = "`attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, moe_act`",
                                       .kinds = OFFLOAD_PLAN,
                                       .expect = "Megatron's module names, comma-separated: attn_norm, qkv_linear, "
                                                 "core_attn, attn_proj, mlp_norm, expert_fc1, moe_act (with framework = megatron)" },
  [SIM_KEY_POLICY_PINNED] = { SIM_GROUP_POLICY, "pinned", SIM_VALUE_CHOICE, .offset = P(pinned),
                              .names = pinned_names, .kinds = OFFLOAD_PLAN },
  [SIM_KEY_POLICY_SCOPE] = { SIM_GROUP_POLICY, "scope", SIM_VALUE_CHOICE, .offset = P(scope_all), .names = scope_names,
                             .kinds = BIT(SIM_POLICY_OFFLOAD) },
  [SIM_KEY_POLICY_PARAMS] = { SIM_GROUP_POLICY, "params", SIM_VALUE_CHOICE, .offset = P(params),
                              .names = params_names, .kinds = OFFLOAD_PLAN },
  [SIM_KEY_POLICY_LEAVES] = { SIM_GROUP_POLICY, "leaves", SIM_VALUE_CHOICE, .offset = P(copy_leaves),
                              .names = leaves_names, .kinds = OFFLOAD_PLAN },
  [SIM_KEY_POLICY_START] = { SIM_GROUP_POLICY, "start", SIM_VALUE_CHOICE, .offset = P(start_tensor), .names = start_names,
                             .kinds = OFFLOAD_PLAN },
  [SIM_KEY_POLICY_STREAMS] = { SIM_GROUP_POLICY, "streams", SIM_VALUE_CHOICE, .offset = P(shared_stream),
                               .names = streams_names, .kinds = OFFLOAD_PLAN },
  [SIM_KEY_POLICY_INFLIGHT_UNIT] = { SIM_GROUP_POLICY, "inflight_unit", SIM_VALUE_CHOICE, .offset = P(inflight_unit),
                                     .names = inflight_unit_names, .kinds = OFFLOAD_PLAN },
  [SIM_KEY_POLICY_FREE] = { SIM_GROUP_POLICY, "free", SIM_VALUE_CHOICE, .offset = P(free), .names = free_names,
                            .kinds = OFFLOAD_PLAN, .expect = "copy-end or next-commit" },
  [SIM_KEY_POLICY_RELOAD] = { SIM_GROUP_POLICY, "reload", SIM_VALUE_CHOICE, .offset = P(reload), .names = reload_names,
                              .kinds = OFFLOAD_PLAN },
  [SIM_KEY_POLICY_HEAD_WAIT] = { SIM_GROUP_POLICY, "head_wait", SIM_VALUE_BOOL, .offset = P(head_wait),
                                 .kinds = OFFLOAD_PLAN, .expect = "true or false" },
  [SIM_KEY_POLICY_MIN_ELEMENTS] = { SIM_GROUP_POLICY, "min_elements", SIM_VALUE_COUNT64, .offset = P(min_elements),
                                    .min = 0, .max = G_MAXUINT64 / 8, .kinds = OFFLOAD_PLAN,
                                    .expect = "an element count such as 262144" },
  [SIM_KEY_POLICY_CHECKPOINT] = { SIM_GROUP_POLICY, "checkpoint", SIM_VALUE_BOOL, .offset = P(checkpoint),
                                  .kinds = BIT(SIM_POLICY_OFFLOAD), .expect = "true or false" },
  [SIM_KEY_POLICY_EVERY] = { SIM_GROUP_POLICY, "every", SIM_VALUE_COUNT, .offset = P(every), .min = 1,
                             .max = G_MAXUINT32, .kinds = BIT(SIM_POLICY_CHECKPOINT), .expect = "a layer stride of at least 1" },
  [SIM_KEY_POLICY_OFFLOAD_INPUTS] = { SIM_GROUP_POLICY, "offload_inputs", SIM_VALUE_BOOL, .offset = P(checkpoint),
                                      .kinds = BIT(SIM_POLICY_CHECKPOINT),
                                      .expect = "true or false" },
  [SIM_KEY_POLICY_ACTIONS] = { SIM_GROUP_POLICY, "actions", SIM_VALUE_LIST, SIM_NEED_REQUIRED, .offset = HAND,
                               .kinds = BIT(SIM_POLICY_PLAN),
                               .expect = "one of keep, offload, recompute, recompute+offload, selective, selective+offload per layer" },
  /* Every kind: a stage the policy does not act on keeps everything, as resident. */
  [SIM_KEY_POLICY_STAGES] = { SIM_GROUP_POLICY, "stages", SIM_VALUE_LIST, .offset = HAND, .doc_default = "`all`",
                              .kinds = ALL_KINDS, .expect = stage_set_expect },
};

/* `keys` as sim_schema_key hands them out: [policy.NAME]'s field-mapped keys
 * with a fixed default have no fallback text above, since their defaults
 * are the model's (sim_policy_defaults, sim/model/policy.h: one definition);
 * here that text is written from it, once.  Every other row is as above. */
static SimSchemaKey resolved[SIM_KEY_COUNT];

static void format_value(const SimSchemaKey *k, gconstpointer field, GString *out);

static gboolean
takes_policy_default(const SimSchemaKey *k)
{
  return k->group == SIM_GROUP_POLICY && k->offset != HAND && k->need != SIM_NEED_REQUIRED && k->fallback == NULL &&
         k->doc_default == NULL;
}

static void
resolve_keys(void)
{
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    resolved[id] = keys[id];
    if (!takes_policy_default(&keys[id]))
      continue;
    g_autoptr(GString) text = g_string_new(NULL);
    const char *field = (const char *)&sim_policy_defaults + keys[id].offset;
    /* A size of 0 as a user writes it, not as `offsim model` writes sizes (0B). */
    if (keys[id].type == SIM_VALUE_SIZE && *(const guint64 *)field == 0)
      g_string_append_c(text, '0');
    else
      format_value(&keys[id], field, text);
    resolved[id].fallback = g_intern_string(text->str);
  }
}

const SimSchemaKey *
sim_schema_key(SimKeyId id)
{
  g_assert(id < SIM_KEY_COUNT);
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    resolve_keys();
    g_once_init_leave(&once, 1);
  }
  return &resolved[id];
}

const char *
sim_schema_expect(SimKeyId id)
{
  /* Made once, kept for the process: the names of a catalog's choices. */
  static const char *made[SIM_KEY_COUNT];
  static gsize once;
  if (g_once_init_enter(&once)) {
    for (guint i = 0; i < SIM_KEY_COUNT; i++)
      made[i] = keys[i].expect ? keys[i].expect : sim_error_choices(keys[i].names);
    g_once_init_leave(&once, 1);
  }
  g_assert(id < SIM_KEY_COUNT);
  return made[id];
}

const char *
sim_schema_group_name(SimSchemaGroup group)
{
  g_assert(group < SIM_GROUP_COUNT);
  return group_names[group];
}

static gboolean
applies(const SimSchemaKey *k, SimSchemaGroup group, guint kind_mask)
{
  return k->group == group && (group != SIM_GROUP_POLICY || kind_mask == 0 || (k->kinds & kind_mask) != 0);
}

SimKeyId
sim_schema_find(SimSchemaGroup group, const char *key, guint kind)
{
  guint mask = group == SIM_GROUP_POLICY && kind != SIM_SCHEMA_ANY_KIND ? 1u << kind : 0;
  for (guint id = 0; id < SIM_KEY_COUNT; id++)
    if (applies(&keys[id], group, mask) && strcmp(keys[id].key, key) == 0)
      return (SimKeyId)id;
  return SIM_KEY_COUNT;
}

char *
sim_schema_key_list(SimSchemaGroup group, guint kind_mask)
{
  GString *list = g_string_new(NULL);
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    if (!applies(&keys[id], group, kind_mask) || id == SIM_KEY_SCENARIO_INCLUDE)
      continue;
    if (id > 0 && keys[id - 1].group == group && strcmp(keys[id - 1].key, keys[id].key) == 0 &&
        applies(&keys[id - 1], group, kind_mask))
      continue; /* a key of two rows (policy `mode`) is listed once */
    g_string_append_printf(list, "%s%s", list->len ? ", " : "", keys[id].key);
  }
  return g_string_free(list, FALSE);
}

/* A plain decimal in [lo, hi], ends open as asked: no sign, exponent or unit. */
static gboolean
parse_number(const SimSchemaKey *k, const char *s, double *out, GError **error)
{
  char *end = NULL;
  gboolean plain = *s != '\0' && strspn(s, "0123456789.") == strlen(s) && strchr(s, '.') == strrchr(s, '.');
  double v = plain ? g_ascii_strtod(s, &end) : NAN;
  gboolean lo_open = (k->open & SIM_OPEN_LO) != 0, hi_open = (k->open & SIM_OPEN_HI) != 0;
  if (!plain || end == s || *end != '\0' || !isfinite(v) || (lo_open ? v <= k->lo : v < k->lo) ||
      (hi_open ? v >= k->hi : v > k->hi)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected a number in %c%g, %g%c%s, got '%s'", lo_open ? '(' : '[',
                k->lo, k->hi, hi_open ? ')' : ']',
                sim_units_has_exponent(s) ? " written out (exponents are not accepted)" : "", s);
    return FALSE;
  }
  *out = v * (k->scale ? k->scale : 1);
  return TRUE;
}

static gboolean
parse_count(const SimSchemaKey *k, const char *s, guint64 *out, GError **error)
{
  g_autofree char *trimmed = g_strstrip(g_strdup(s));
  if (g_ascii_string_to_unsigned(trimmed, 10, k->min, k->max, out, NULL))
    return TRUE;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
              "expected a whole number from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT ", got '%s'", k->min, k->max,
              s);
  return FALSE;
}

static gboolean
parse_choice(const char *const *names, const char *s, guint *out, GError **error)
{
  g_autofree char *value = g_strstrip(g_strdup(s));
  for (guint i = 0; names[i]; i++) {
    if (strcmp(names[i], value) == 0) {
      *out = i;
      return TRUE;
    }
  }
  g_autofree char *choices = g_strjoinv(", ", (char **)names);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected one of %s, got '%s'", choices, s);
  return FALSE;
}

/* Writes a choice index where the field is a gboolean (two names) or an enum. */
static void
store_choice(const SimSchemaKey *k, gpointer field, guint index)
{
  if (g_strv_length((char **)k->names) == 2)
    *(gboolean *)field = index == 1;
  else
    *(guint *)field = index;
}

gboolean
sim_schema_parse_value(SimKeyId id, const char *text, gpointer field, GError **error)
{
  const SimSchemaKey *k = sim_schema_key(id);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  guint64 count;
  guint index;
  switch (k->type) {
  case SIM_VALUE_SIZE:
    return sim_units_parse_size(text, field, error);
  case SIM_VALUE_TIME:
    return sim_units_parse_time(text, field, error);
  case SIM_VALUE_RATE:
    return k->zero ? sim_units_parse_rate_or_zero(text, field, error) : sim_units_parse_rate(text, field, error);
  case SIM_VALUE_NUMBER:
    return parse_number(k, text, field, error);
  case SIM_VALUE_COUNT:
  case SIM_VALUE_COUNT64:
    if (!parse_count(k, text, &count, error))
      return FALSE;
    if (k->type == SIM_VALUE_COUNT)
      *(guint *)field = (guint)count;
    else
      *(guint64 *)field = count;
    return TRUE;
  case SIM_VALUE_BOOL:
    if (!parse_choice(bool_names, text, &index, error))
      return FALSE;
    *(gboolean *)field = index == 1;
    return TRUE;
  case SIM_VALUE_CHOICE:
    if (!parse_choice(k->names, text, &index, error))
      return FALSE;
    store_choice(k, field, index);
    return TRUE;
  case SIM_VALUE_TEXT:
  case SIM_VALUE_PATH:
  case SIM_VALUE_LIST:
    break;
  }
  g_return_val_if_reached(FALSE);
}

gboolean
sim_schema_parse(SimKeyId id, const char *text, gpointer target, GError **error)
{
  const SimSchemaKey *k = sim_schema_key(id);
  g_return_val_if_fail(k->offset != SIM_SCHEMA_BY_HAND, FALSE);
  return sim_schema_parse_value(id, text, (char *)target + k->offset, error);
}

char *
sim_schema_doc_default(SimKeyId id)
{
  const SimSchemaKey *k = sim_schema_key(id);
  if (k->fallback)
    return g_strdup_printf("`%s`", k->fallback);
  return g_strdup(k->doc_default);
}

void
sim_schema_apply_defaults(SimSchemaGroup group, gpointer target)
{
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key((SimKeyId)id);
    if (!applies(k, group, 0) || k->fallback == NULL || k->offset == SIM_SCHEMA_BY_HAND)
      continue;
    g_autoptr(GError) error = NULL;
    if (!sim_schema_parse((SimKeyId)id, k->fallback, target, &error))
      g_error("schema: [%s] %s: default '%s' does not parse: %s", group_names[group], k->key, k->fallback,
              error->message);
  }
}

/* The shortest plain decimal that reads back as the same double: "%g"
 * would write 1e-05, which the loader refuses. */
static void
format_number(double v, GString *out)
{
  char text[400], format[16];
  for (int digits = 1; digits < 340; digits++) {
    g_snprintf(format, sizeof format, "%%.%df", digits);
    if (g_ascii_strtod(g_ascii_formatd(text, sizeof text, format, v), NULL) == v)
      break;
  }
  g_string_append(out, text);
}

/* `field`'s value as scenario text, which sim_schema_parse reads back. */
static void
format_value(const SimSchemaKey *k, gconstpointer field, GString *out)
{
  switch (k->type) {
  case SIM_VALUE_SIZE:
    g_string_append_printf(out, "%" G_GUINT64_FORMAT "B", *(const guint64 *)field);
    break;
  case SIM_VALUE_NUMBER:
    format_number(*(const double *)field / (k->scale ? k->scale : 1), out);
    break;
  case SIM_VALUE_COUNT:
    g_string_append_printf(out, "%u", *(const guint *)field);
    break;
  case SIM_VALUE_COUNT64:
    g_string_append_printf(out, "%" G_GUINT64_FORMAT, *(const guint64 *)field);
    break;
  case SIM_VALUE_BOOL:
    g_string_append(out, *(const gboolean *)field ? "true" : "false");
    break;
  case SIM_VALUE_CHOICE:
    if (g_strv_length((char **)k->names) == 2)
      g_string_append(out, k->names[*(const gboolean *)field ? 1 : 0]);
    else
      g_string_append(out, k->names[*(const guint *)field]);
    break;
  default:
    /* Times and rates have no exact text form yet; nothing writes them. */
    g_return_if_reached();
  }
}

void
sim_schema_format(SimKeyId id, gconstpointer target, GString *out)
{
  const SimSchemaKey *k = sim_schema_key(id);
  g_return_if_fail(k->offset != SIM_SCHEMA_BY_HAND);
  g_string_append_printf(out, "%s = ", k->key);
  format_value(k, (const char *)target + k->offset, out);
  g_string_append_c(out, '\n');
}
