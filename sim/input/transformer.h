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
 * and recomputes it at the cost of QK^T plus the softmax and dropout traffic.
 *
 * Times: forward matmul FLOPs / ([device] matmul_flops x efficiency) plus
 * memory-bound bytes / hbm_bandwidth; backward is twice the forward.  Causal
 * flash attention does half the score FLOPs of eager.
 */
#pragma once

#include "machine.h"
#include "workload.h"

G_BEGIN_DECLS

/* Activation and weight types. */
typedef enum {
  SIM_DTYPE_FP32,
  SIM_DTYPE_BF16,
  SIM_DTYPE_FP16,
  SIM_DTYPE_COUNT,
} SimDtype;

/* "fp32", "bf16", "fp16", indexed by SimDtype, NULL-terminated. */
extern const char *const sim_dtype_names[];
/* Bytes per element. */
guint sim_dtype_bytes(SimDtype dtype);

typedef struct {
  guint hidden, layers, heads, kv_heads, head_dim, ffn;
  guint64 vocab;
  guint max_positions;     /* learned position embeddings (gpt2); 0 = none */
  guint batch, seq;
  SimDtype dtype;
  gboolean layernorm;      /* FALSE: rmsnorm */
  gboolean gelu;           /* FALSE: swiglu */
  gboolean flash;          /* FALSE: eager */
  double dropout;          /* probability; 0 = no masks */
  gboolean tied_embeddings;
  gboolean qkv_bias;
  gboolean linear_bias;    /* biases on every linear (gpt2) */
  guint tp;
  gboolean sp;
  gboolean adamw;
  gboolean master_weights;
} SimTransformer;

/* Every field at its scenario default (sim/input/schema.c); shape fields
 * zero (required). */
void sim_transformer_defaults(SimTransformer *config);

/* The one validation of a transformer, for both ways in (a [transformer]
 * group, through sim_transformer_build, and a config.json, through
 * sim_hf_config_load_data and `offsim model`), so that they accept and
 * refuse the same models: every count within the range of the
 * [transformer] key that sets it (sim/input/schema.c), derived ones such as
 * head_dim included; head_dim not 0 (heads did not divide hidden); heads
 * divisible by kv_heads and by tp, kv_heads and ffn by tp, seq by tp with
 * sp; dropout in [0, 1).  A failure is SIM_ERROR_INPUT "NAME: why", where
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

/* Appends the [transformer] group that describes `config` in full, one key
 * per line as the schema formats it, so that loading it builds the same
 * workload. */
void sim_transformer_format_ini(const SimTransformer *config, GString *out);

G_END_DECLS
