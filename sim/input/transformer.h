/* sim/input/transformer.h — a decoder-only transformer turned into a workload.
 *
 * Users know their model config, not their activation sizes.  This module
 * expands a config into one tensor per storage that autograd saves in each
 * layer, plus the embedding and the loss head and the static memory, with
 * forward and backward times from FLOPs and bytes.
 *
 * What a layer saves (N = batch x seq rows, e = dtype bytes, a heads of
 * head_dim d, g key/value heads, f = ffn, t = tensor parallel; tensors in
 * the sequence-parallel region are divided by t only with sp):
 *
 *   attn_norm_in      N.h.e      the layer input, saved by the first norm
 *   attn_norm_stats   N.4 (rmsnorm) or N.8 (layernorm, mean and rstd)
 *   qkv_in            N.h.e      the norm output, read by q, k and v (3 refs)
 *   q, k, v           N.a.d.e/t, N.g.d.e/t, N.g.d.e/t
 *   eager:  scores_softmax   a.s^2.b.e/t   (2 refs without dropout)
 *           attn_dropout_mask, attn_probs_dropped  a.s^2.b/t, a.s^2.b.e/t
 *   flash:  softmax_lse      N.a.4/t
 *   attn_out          N.a.d.e/t  the output projection's input
 *   attn_resid_mask   N.h        with dropout
 *   mlp_norm_in, mlp_norm_stats, mlp_in   as for attention
 *   gelu:   fc1_out (GeLU input), fc2_in (GeLU output)     N.f.e/t each
 *   swiglu: gate (SiLU input), up, silu_out, down_in       N.f.e/t each
 *   mlp_resid_mask    N.h        with dropout
 *
 * The embedding saves the token ids (N.8); the loss head the final norm's
 * input and statistics, the LM head's input, the fp32 log-softmax (read by
 * the softmax and the NLL backward) and the labels (N.8).  The logits and
 * their fp32 copy are the head's transient workspace: the step's sharpest
 * peak for large vocabularies.
 *
 * With Megatron's GPT settings (layernorm, gelu, f = 4h, eager, dropout)
 * everything but the two *_stats entries sums to Korthikanti et al.'s
 * s.b.h.(34 + 5.a.s/h) and its tensor- and sequence-parallel forms, to the
 * byte; the paper leaves the per-row norm statistics out.  Selective
 * checkpointing drops the eager attention core (scores, mask, dropped probs)
 * and rebuilds it by replaying the ops that made it: QK^T, scale, mask,
 * softmax and its cast, dropout, PV.
 *
 * The above is `ops = fused` (fused norm kernels, flash attention, a fused
 * loss: Megatron, TransformerEngine).  `ops = hf` lists what current
 * PyTorch's autograd saves (2.2 and later: mean keeps no input; Python
 * scalars are not packed) when HuggingFace transformers' modeling code runs
 * on CUDA, one entry per storage with its references in the layer, and the
 * references to memory held elsewhere as entries of their own (SimTensor's
 * parameter, shared, host; not saved bytes).  Two layouts, chosen by norm,
 * mlp and positions: llama, qwen2 and mistral (the S = b.a.s^2 scores; kv =
 * a after repeat_kv for eager and sdpa, g for flash):
 *
 *   attn_norm.in_fp32  N.h.4  hidden.to(float32): PowBackward0, MulBackward0 (2 refs)
 *   attn_norm.rsqrt    N.4    RsqrtBackward0.result, MulBackward0.other (2 refs)
 *   attn_norm.normed   N.h.e  the normalised tensor cast back, by weight * x
 *   qkv_in             N.h.e  the norm's output, by q/k/v_proj (3 refs)
 *   rope_cos, rope_sin s.d.e  leaves, 2 refs each; `shared` after layer 0
 *   eager: q, k, v     N.a.d.e    the batched matmuls' operands
 *          scores_softmax  S.4    softmax(dtype=float32).result
 *          attn_probs      S.e    its copy in e, read by PV (fp32: the same
 *                                 storage, 2 refs); with dropout instead
 *          attn_dropout_mask S, attn_probs_dropped S.e
 *          attn_out        N.a.d.e  the merged heads, by o_proj
 *   sdpa / flash: q N.a.d.e, k and v N.kv.d.e, attn_out N.a.d.e (the
 *          kernel's output, read again by o_proj: 2 refs), softmax_lse
 *          b.a.s.4 (fp32 SDPA, the memory-efficient kernel: s padded to 32),
 *          sdpa: philox_seed, philox_offset (8 B each, host); flash:
 *          rng_state (16 B).  head_dim not a multiple of 8 (16-bit): q, k,
 *          v and attn_out_padded are padded copies, attn_out a copy
 *   mlp_norm.*         as attn_norm
 *   mlp_in             N.h.e  by gate_proj and up_proj (2 refs)
 *   gate               N.f.e  the activation's input (gelu_new also
 *                             act.tanh, act.half_x, act.one_plus_tanh)
 *   act_out, up, down_in  N.f.e
 *
 * and gpt2 (LayerNorm, Conv1D, learned positions, dropout everywhere):
 *
 *   attn_norm.in N.h.e, attn_norm.mean and .rstd N.4 each (fp32 leaves)
 *   qkv_in N.h.e (c_attn's input, once), then eager as above but
 *   scores_softmax S.e (2 refs without dropout), or sdpa / flash with qkv
 *   N.3h.e (c_attn's output, viewed as q, k and v: 3 refs); attn_out;
 *   attn_resid_mask N.h; mlp_norm.*; mlp_in N.h.e; fc1_out N.f.e (and
 *   gelu_new's three); fc2_in N.f.e; mlp_resid_mask N.h.
 *
 * Parameter references: every weight its op saves (norm weights and biases,
 * the projections, lm_head).  Embedding: token_ids (gpt2: position_ids s.8
 * and embed_dropout_mask N.h); EmbeddingBackward0 keeps only the weight's
 * row count.  Head: the final norm, lm_head_in N.h.e, log_softmax N.V.4 (2
 * refs: log_softmax and nll_loss), labels N.8 ((seq + 1).8 at batch 1, the padded
 * storage), loss_total_weight 4 B.  Backward transients (ops = hf): the
 * head's two fp32 N.V.4 gradients (NllLossBackward0, LogSoftmaxBackward0),
 * the embedding's dense V.h.e table gradient (embedding_dense_backward).
 *
 * Times and transients: each layer, the embedding and the head run as ops
 * (sim/input/transformer_ops.h), each op's kernels timed by the device's
 * cost model (sim/engine/kernel.h): a layer's forward and backward seconds
 * are its ops' sums, its workspaces the most its ops hold beside the saved
 * tensors.  Causal flash attention (and SDPA) does half the score FLOPs of
 * eager.
 */
#pragma once

#include "engine/kernel.h"
#include "engine/machine.h"
#include "engine/optimizer.h"
#include "model/workload.h"

G_BEGIN_DECLS

/* How attention runs.  fused: eager (the score matrices) or flash;
 * ops = hf: HF's eager_attention_forward, its SDPA path (repeat_kv, then
 * PyTorch's flash kernel for 16-bit and the memory-efficient one for fp32,
 * as on CUDA) or flash_attention_2 (native GQA, 16-bit only). */
typedef enum {
  SIM_ATTENTION_EAGER,
  SIM_ATTENTION_SDPA,
  SIM_ATTENTION_FLASH,
  SIM_ATTENTION_COUNT,
} SimAttention;

/* "eager", "sdpa", "flash", indexed by SimAttention, NULL-terminated. */
extern const char *const sim_attention_names[];

/* The MLP activation of HF's ACT2FN, as config.json names it (hidden_act,
 * activation_function for gpt2).  Only ops = hf reads it. */
typedef enum {
  SIM_ACT_SILU,              /* SiLU: saves its input */
  SIM_ACT_GELU_NEW,          /* NewGELUActivation, the tanh formula in plain ops: four tensors */
  SIM_ACT_GELU_PYTORCH_TANH, /* F.gelu(approximate="tanh"): its input */
  SIM_ACT_GELU,              /* F.gelu: its input */
  SIM_ACT_COUNT,
} SimActivation;

/* "silu", "gelu_new", "gelu_pytorch_tanh", "gelu", NULL-terminated. */
extern const char *const sim_activation_names[];

typedef struct {
  guint hidden, layers, heads, kv_heads, head_dim, ffn;
  guint64 vocab;
  guint max_positions;     /* learned position embeddings (gpt2); 0 = none */
  guint batch, seq;
  SimDtype dtype;
  gboolean layernorm;      /* FALSE: rmsnorm */
  gboolean gelu;           /* FALSE: swiglu */
  SimAttention attention;
  gboolean hf_ops;         /* ops = hf (what HF's code saves and runs); FALSE: fused */
  SimActivation hidden_act;
  guint sliding_window;    /* from hf_config (mistral, qwen2), read by ops = hf; 0: none */
  double dropout;          /* probability; 0 = no masks */
  gboolean tied_embeddings;
  gboolean qkv_bias;
  gboolean linear_bias;    /* biases on every linear (gpt2) */
  guint tp;
  gboolean sp;
  gboolean adamw;
  gboolean master_weights;
  gboolean clip_grad;      /* the gradients' norm clipped before the step (clip_grad_norm_) */
  SimOptimizerKernels optimizer_kernels; /* how the optimizer step runs (sim/engine/optimizer.h) */
  /* The memory timeline of a real step. */
  gboolean grads_kept;     /* grads = kept: gradients static all step; FALSE: set-to-none, each
                            * allocated when backward reaches its parameters */
  gboolean outputs_held;   /* outputs = held: the caller keeps the logits through backward */
  /* Mixture of experts (experts = 0: every MLP dense).  A layer is an MoE
   * layer when it is at least dense_layers deep (DeepSeek's
   * first_k_dense_replace) and (index + 1) is a multiple of sparse_step
   * (Qwen's decoder_sparse_step); the others keep the dense `ffn` MLP. */
  guint experts;           /* routed experts per MoE layer */
  guint top_k;             /* experts each token is routed to */
  guint moe_ffn;           /* each routed expert's intermediate size */
  guint shared_ffn;        /* the shared experts' intermediate size in all (0: none) */
  gboolean shared_gate;    /* qwen2_moe: the shared expert's output scaled by sigmoid(x W), W hidden x 1 */
  guint dense_layers;      /* the first layers with a dense MLP */
  guint sparse_step;       /* every sparse_step-th layer is an MoE layer (1: all) */
  gboolean norm_topk;      /* the top-k routing weights renormalised to sum to 1 (a division HF saves) */
  gboolean qk_norm;        /* qwen3: an RMSNorm over head_dim on each head's q and k before RoPE */
  double expert_imbalance; /* the hottest expert's tokens over the mean, >= 1 */
  double capacity_factor;  /* ops = fused: an expert takes at most ceil(factor x mean) tokens, the rest
                            * dropped; 0: none dropped */
  /* DeepSeek's multi-head latent attention (kv_lora_rank > 0; ops = fused
   * with flash, or ops = hf with eager, where it also makes the MoE layers
   * DeepseekV3MoE's: offsim's only family with it): q through a rank-q_lora_rank bottleneck (0: one projection), k
   * and v from a rank-kv_lora_rank latent plus a shared RoPE key of
   * qk_rope_dim; head_dim is q's and k's per head (qk_nope_head_dim +
   * qk_rope_head_dim), v_head_dim v's and the output's. */
  guint q_lora_rank, kv_lora_rank, qk_rope_dim, v_head_dim;
  /* Expert parallelism ([parallel] ep, not a [transformer] key: the
   * scenario copies it here): each MoE layer's routed experts spread over
   * ep GPUs, experts / ep on each, as Megatron-core's MoELayer places them
   * (megatron/core/transformer/moe/moe_layer.py l. 186-188 at d98e8a6).
   * This GPU is the one holding the hottest expert (expert 0) and the next
   * experts / ep - 1: its static memory counts those experts only (the
   * router, the shared experts and attention replicated), its grouped GEMMs
   * take the tokens every rank of its group routes to them (each rank
   * routes alike: ep x sim_transformer_expert_tokens), and the dispatch
   * before them and the combine after are all-to-alls over the ep ranks.
   * 1 (or 0): no expert parallelism. */
  guint ep;
} SimTransformer;

/* Every field at its scenario default (sim/input/schema.c); shape fields
 * zero (required). */
void sim_transformer_defaults(SimTransformer *config);

/* Sets what follows `ops` unless a scenario gives it: `grads` is
 * set-to-none under ops = hf (PyTorch's zero_grad default since 2.0) and
 * kept under ops = fused (Megatron's contiguous gradient buffer);
 * `attention` is sdpa under ops = hf (transformers' default
 * attn_implementation) and flash under ops = fused. */
void sim_transformer_follow_ops(SimTransformer *config);

/* The one validation of a transformer, for both ways in (a [transformer]
 * group, through sim_transformer_build, and a config.json, through
 * sim_hf_config_load_data and `offsim model`), so that they accept and
 * refuse the same models: every count within the range of the
 * [transformer] key that sets it (sim/input/schema.c), derived ones such as
 * head_dim included; head_dim not 0 (heads did not divide hidden); heads
 * divisible by kv_heads and by tp, kv_heads and ffn by tp, seq by tp with
 * sp; dropout in [0, 1); with ops = hf, a layout and kernels HF has (no
 * sdpa with a sliding window shorter than seq: HF passes a mask), without
 * ops = hf no sdpa.  A failure is SIM_ERROR_INPUT "NAME: why", where
 * NAME is names[key] (an array of SIM_KEY_COUNT entries indexed by
 * SimKeyId, such as a config.json's field names) or, where that is NULL or
 * `names` is, the [transformer] key.  The products are checked where they
 * are formed, by sim_transformer_build. */
gboolean sim_transformer_validate(const SimTransformer *config, const char *const *names, GError **error);

/* The same restricted to what a config.json decides: batch, seq, tp and sp
 * are the caller's and may not be set yet. */
gboolean sim_transformer_validate_shape(const SimTransformer *config, const char *const *names, GError **error);

/* Builds the workload.  `device` gives matmul_flops, efficiency and
 * hbm_bandwidth, which must be set (> 0). */
SimWorkload *sim_transformer_build(const SimTransformer *config, const SimDevice *device, const char *name,
                                   GError **error);

/* Parameters per GPU (tensor-parallel shard), for static memory; G_MAXUINT64
 * when the count passes 64 bits. */
guint64 sim_transformer_parameters(const SimTransformer *config);

/* Whether layer `index` (from 0) of `config` is an MoE layer: experts,
 * past dense_layers, and (index + 1) a multiple of sparse_step. */
gboolean sim_transformer_is_moe_layer(const SimTransformer *config, guint index);

/* The tokens routed expert `expert` of an MoE layer takes: the hottest
 * (expert 0) expert_imbalance times the mean N.k/E, rounded up, the others
 * the rest spread evenly (the first ones one more where it does not
 * divide), each at most the capacity ceil(capacity_factor.N.k/E) when one
 * is set.  Balanced routing (expert_imbalance = 1) gives every expert N.k/E
 * where E divides N.k. */
guint64 sim_transformer_expert_tokens(const SimTransformer *config, guint expert);

/* The routed experts of an MoE layer on this GPU: experts / ep. */
guint sim_transformer_local_experts(const SimTransformer *config);

/* The tokens this GPU's routed experts take in an MoE layer (ep = 1: every
 * expert's, N.k less what a capacity drops): the sum over its local experts
 * 0 .. experts / ep - 1 of ep x sim_transformer_expert_tokens, since each of
 * the ep ranks of its group sends it the tokens it routes to them. */
guint64 sim_transformer_local_tokens(const SimTransformer *config);

/* The parameters one token's forward uses (all but the experts it is not
 * routed to: top_k of each MoE layer's experts); the same as
 * sim_transformer_parameters for a dense model. */
guint64 sim_transformer_active_parameters(const SimTransformer *config);

/* Appends the [transformer] group that describes `config` in full, one key
 * per line as the schema formats it, so that loading it builds the same
 * workload. */
void sim_transformer_format_ini(const SimTransformer *config, GString *out);

G_END_DECLS
