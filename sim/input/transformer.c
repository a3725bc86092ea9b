#include "input/transformer.h"
#include "input/internal/transformer_private.h"
#include "input/transformer_ops.h"

#include "base/error.h"
#include "base/units.h"
#include "input/hf_config.h"
#include "input/schema.h"
#include "model/sharding.h"

#include <math.h>

const char *const sim_attention_names[] = { "eager", "sdpa", "flash", NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_attention_names) == SIM_ATTENTION_COUNT + 1);
const char *const sim_activation_names[] = { "silu", "gelu_new", "gelu_pytorch_tanh", "gelu", NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_activation_names) == SIM_ACT_COUNT + 1);

void
sim_transformer_defaults(SimTransformer *c)
{
  *c = (SimTransformer){ 0 };
  sim_schema_apply_defaults(SIM_GROUP_TRANSFORMER, c);
  c->ep = 1; /* [parallel] ep's default, set by the scenario (not a [transformer] key) */
  sim_transformer_follow_ops(c);
}

void
sim_transformer_follow_ops(SimTransformer *c)
{
  c->grads_kept = !c->hf_ops;
  c->optimizer_kernels = c->hf_ops ? SIM_OPTIMIZER_FOREACH : SIM_OPTIMIZER_FUSED;
  c->attention = c->hf_ops ? SIM_ATTENTION_SDPA : SIM_ATTENTION_FLASH;
}

/* Products of user sizes, with overflow folded into one flag so the build
 * can check once. */
typedef struct {
  gboolean overflow;
} Checked;

static guint64
mul(Checked *c, guint64 a, guint64 b)
{
  if (b != 0 && a > SIM_UNITS_MAX_BYTES / b) {
    c->overflow = TRUE;
    return 0;
  }
  return a * b;
}

static guint64
mul3(Checked *c, guint64 a, guint64 b, guint64 d)
{
  return mul(c, mul(c, a, b), d);
}

/* What a message calls key `id`: the caller's name for it, or the key's. */
static const char *
name_of(const char *const *names, SimKeyId id)
{
  return names && names[id] ? names[id] : sim_schema_key(id)->key;
}

/* What ops = hf models: the two layouts of HF's supported model types, on
 * one GPU, with the kernels HF would call.  Anything else is refused rather
 * than approximated. */
static gboolean
hf_validate(const SimTransformer *c, const char *const *names, GError **error)
{
#define N(id) name_of(names, SIM_KEY_TRANSFORMER_##id)
  SimHfLayout layout;
  gboolean known = sim_hf_config_layout_of(c, &layout);
  gboolean llama = known && layout == SIM_HF_LAYOUT_LLAMA, gpt2 = known && layout == SIM_HF_LAYOUT_GPT2;
  /* The families each layout stands for come from hf_config.c's table. */
  if (!known) {
    g_autofree char *dense = sim_hf_config_family_names(SIM_HF_FAMILIES_LLAMA_DENSE, FALSE);
    g_autofree char *gpt2s = sim_hf_config_family_names(SIM_HF_FAMILIES_GPT2, FALSE);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s, %s and %s: ops = hf follows the modeling code of a supported model_type, which has norm = "
                "rmsnorm, mlp = swiglu and positions = 0 (%s) or norm = layernorm, mlp = gelu and "
                "positions above 0 (%s)", N(NORM), N(MLP), N(POSITIONS), dense, gpt2s);
  } else if (!llama && (c->experts || c->qk_norm)) {
    g_autofree char *extra = sim_hf_config_family_names(SIM_HF_FAMILIES_LLAMA_EXTRA, FALSE);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: ops = hf has experts and qk_norm in the llama layout only "
                "(%s: norm = rmsnorm, mlp = swiglu)", N(EXPERTS), extra);
  }
  else if (c->tp != 1 || c->sp)
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s and %s: ops = hf follows HuggingFace's modeling code on one "
                "GPU: tp = 1 and sp = false", N(TP), N(SP));
  else if (gpt2 && (c->kv_heads != c->heads || (guint64)c->heads * c->head_dim != c->hidden))
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s and %s: gpt2 splits c_attn's output into three hidden-wide "
                "parts: kv_heads = heads and heads x head_dim = hidden", N(KV_HEADS), N(HEAD_DIM));
  else if (gpt2 && c->seq > c->max_positions)
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: gpt2 takes at most `positions` tokens (its learned position "
                "embeddings: %u), got %u", N(SEQ), c->max_positions, c->seq);
  else if (gpt2 && !c->linear_bias)
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: gpt2's Conv1D layers all have biases (expected linear_bias "
                "= true with norm = layernorm, mlp = gelu and positions)", N(LINEAR_BIAS));
  else if (c->attention == SIM_ATTENTION_FLASH && c->dtype == SIM_DTYPE_FP32)
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: flash (flash_attention_2) runs in bf16 or fp16 only (expected "
                "eager or sdpa for fp32)", N(ATTENTION));
  else if (c->attention != SIM_ATTENTION_EAGER && c->dtype != SIM_DTYPE_FP32 && c->head_dim > 256)
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: the flash kernels of attention = sdpa and flash take head_dim "
                "up to 256 (expected attention = eager)", N(HEAD_DIM));
  else if (c->attention == SIM_ATTENTION_SDPA && c->sliding_window && c->sliding_window < c->seq)
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: sdpa with the config's sliding_window (%u) shorter than %s "
                "(%u): HF passes SDPA a mask, which runs other kernels than the ones modelled (expected eager or "
                "flash)", N(ATTENTION), c->sliding_window, N(SEQ), c->seq);
  else
    return TRUE;
  return FALSE;
#undef N
}

/* Ops of an ops = hf MoE layer besides its experts' (the attention's, at
 * most 60 with eager attention and q/k norms, the router's and the shared
 * expert's): a bound, checked when the op list is built (workload.c). */
#define HF_LAYER_OTHER_OPS 96

/* The mixture-of-experts fields agree with each other: top_k from 1 to
 * experts and an expert size with experts, none of them without; an
 * imbalance no expert can exceed (it takes each token once: at most
 * experts / top_k times the mean); dense layers fewer than the layers. */
static gboolean
moe_check(const SimTransformer *c, const char *const *names, GError **error)
{
#define N(id) name_of(names, SIM_KEY_TRANSFORMER_##id)
  if (c->experts == 0) {
    if (c->top_k || c->moe_ffn || c->shared_ffn || c->dense_layers || c->sparse_step != 1 || c->norm_topk ||
        c->shared_gate || c->expert_imbalance != 1 || c->capacity_factor != 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected a number of experts above 0 with top_k, moe_ffn, "
                  "shared_ffn, shared_gate, dense_layers, sparse_step, norm_topk, expert_imbalance or "
                  "capacity_factor (0 experts: a dense model)", N(EXPERTS));
      return FALSE;
    }
    return TRUE;
  }
  if (c->top_k < 1 || c->top_k > c->experts) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected 1 to %s (%u) experts per token, got %u", N(TOP_K),
                N(EXPERTS), c->experts, c->top_k);
    return FALSE;
  }
  if (c->moe_ffn < 1) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected each expert's intermediate size (above 0) with %s",
                N(MOE_FFN), N(EXPERTS));
    return FALSE;
  }
  if (c->shared_gate && c->shared_ffn == 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: a gate needs a shared expert (expected shared_ffn above 0)",
                N(SHARED_GATE));
    return FALSE;
  }
  if (c->dense_layers >= c->layers) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected fewer than %s (%u), got %u", N(DENSE_LAYERS),
                N(LAYERS), c->layers, c->dense_layers);
    return FALSE;
  }
  if (!(c->expert_imbalance >= 1) || c->expert_imbalance * c->top_k > c->experts) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected 1 to %s / %s (%g): an expert takes a token once, so "
                "at most every token, got %g", N(EXPERT_IMBALANCE), N(EXPERTS), N(TOP_K),
                (double)c->experts / c->top_k, c->expert_imbalance);
    return FALSE;
  }
  return TRUE;
#undef N
}

/* Multi-head latent attention's fields agree: none without kv_lora_rank;
 * with it a RoPE part below head_dim, a v head dim, and as many key/value
 * heads as query heads (each head's k and v come from the shared latent). */
static gboolean
mla_check(const SimTransformer *c, const char *const *names, GError **error)
{
#define N(id) name_of(names, SIM_KEY_TRANSFORMER_##id)
  if (c->kv_lora_rank == 0) {
    if (c->q_lora_rank || c->qk_rope_dim || c->v_head_dim) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected a latent rank above 0 with q_lora_rank, "
                  "qk_rope_dim or v_head_dim (multi-head latent attention)", N(KV_LORA_RANK));
      return FALSE;
    }
    return TRUE;
  }
  if (c->qk_rope_dim < 1 || c->qk_rope_dim >= c->head_dim) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected 1 to %s - 1 (%u), got %u", N(QK_ROPE_DIM),
                N(HEAD_DIM), c->head_dim - 1, c->qk_rope_dim);
    return FALSE;
  }
  if (c->v_head_dim < 1) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected the value head dim (above 0) with %s", N(V_HEAD_DIM),
                N(KV_LORA_RANK));
    return FALSE;
  }
  if (c->kv_heads != c->heads) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected %s (%u) with %s: latent attention has no grouped "
                "key/value heads", N(KV_HEADS), N(HEADS), c->heads, N(KV_LORA_RANK));
    return FALSE;
  }
  return TRUE;
#undef N
}

gboolean
sim_transformer_is_moe_layer(const SimTransformer *c, guint index)
{
  return c->experts > 0 && index >= c->dense_layers && (index + 1) % c->sparse_step == 0;
}

guint64
sim_transformer_expert_tokens(const SimTransformer *c, guint expert)
{
  guint64 total = (guint64)c->batch * c->seq * c->top_k, E = c->experts;
  guint64 hot = (guint64)ceil(c->expert_imbalance * (double)total / (double)E - 1e-9);
  hot = MIN(MAX(hot, (total + E - 1) / E), (guint64)c->batch * c->seq);
  guint64 tokens;
  if (expert == 0 || E == 1) {
    tokens = hot;
  } else {
    guint64 rest = total - MIN(hot, total), base = rest / (E - 1), extra = rest % (E - 1);
    tokens = base + (expert - 1 < extra ? 1 : 0);
  }
  if (c->capacity_factor > 0) {
    guint64 capacity = (guint64)ceil(c->capacity_factor * (double)total / (double)E - 1e-9);
    tokens = MIN(tokens, capacity);
  }
  return tokens;
}

/* A count field of `c` as the schema maps it. */
static guint64
count_of(const SimTransformer *c, const SimSchemaKey *k)
{
  const char *field = (const char *)c + k->offset;
  if (k->type == SIM_VALUE_COUNT64)
    return *(const guint64 *)(gconstpointer)field;
  return *(const guint *)(gconstpointer)field;
}

/* The one check of a transformer, whichever way it came in.  `shape_only`:
 * only what a config.json decides (batch, seq and tp are the caller's and
 * may not be set yet). */
static gboolean
check(const SimTransformer *c, gboolean shape_only, const char *const *names, GError **error)
{
#define N(id) name_of(names, SIM_KEY_TRANSFORMER_##id)
  /* head_dim is derived only when heads divides hidden. */
  if (c->head_dim == 0 && c->heads != 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s (%u) does not divide %s (%u); give head_dim", N(HEAD_DIM),
                N(HEADS), c->heads, N(HIDDEN), c->hidden);
    return FALSE;
  }
  /* Every count within the range of the [transformer] key that sets it, so
   * that a derived value (head_dim from a config.json) is held to the same
   * range as a written one. */
  for (SimKeyId id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key(id);
    if (k->group != SIM_GROUP_TRANSFORMER || k->offset == SIM_SCHEMA_BY_HAND ||
        (k->type != SIM_VALUE_COUNT && k->type != SIM_VALUE_COUNT64))
      continue;
    gboolean callers = id == SIM_KEY_TRANSFORMER_BATCH || id == SIM_KEY_TRANSFORMER_SEQ || id == SIM_KEY_TRANSFORMER_TP;
    if (shape_only && callers)
      continue;
    guint64 v = count_of(c, k);
    if (v < k->min || v > k->max) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: expected a whole number from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT
                  ", got %" G_GUINT64_FORMAT, name_of(names, id), k->min, k->max, v);
      return FALSE;
    }
  }
  if (c->heads % c->kv_heads != 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %u does not divide %s (%u)", N(KV_HEADS), c->kv_heads, N(HEADS),
                c->heads);
    return FALSE;
  }
  if (!(c->dropout >= 0 && c->dropout < 1)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected a probability in [0, 1)", N(DROPOUT));
    return FALSE;
  }
  if (!moe_check(c, names, error) || !mla_check(c, names, error))
    return FALSE;
  if (shape_only)
    return TRUE;
  if (c->kv_lora_rank && (c->tp != 1 || (c->hf_ops ? c->attention != SIM_ATTENTION_EAGER
                                                   : c->attention != SIM_ATTENTION_FLASH))) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: multi-head latent attention runs with tp = 1, and attention = "
                "flash under ops = fused or eager under ops = hf (HF's DeepseekV3Attention with its other kernels, "
                "and its tensor parallelism, are not modelled)", N(KV_LORA_RANK));
    return FALSE;
  }
  /* The scenario names [parallel] ep for these (scenario.c); a caller that
   * sets ep itself meets the same rules here. */
  if (c->ep > 1 && (c->experts % c->ep != 0 || c->hf_ops)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected a multiple of the expert-parallel degree (%u) with "
                "ops = fused (HF's modeling code has no expert parallelism), got %u%s", N(EXPERTS), c->ep, c->experts,
                c->hf_ops ? " with ops = hf" : "");
    return FALSE;
  }
  /* Megatron's expert tensor parallelism (expert_tensor_parallel_size, tp
   * unless told otherwise: sim/model/parallel.h) shards each expert's fc1
   * by columns and fc2 by rows over a group of its own, with that group's
   * collectives around the grouped GEMMs: shards and collectives offsim's
   * MoE layers do not have, so a tp above 1 would leave the experts whole
   * on every rank, which no framework does. */
  if (c->experts && c->tp != 1) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected 1 with %s above 0 (tensor parallelism inside MoE "
                "layers, Megatron's expert tensor parallelism, is not modelled; [parallel] ep spreads the experts "
                "instead)", N(TP), N(EXPERTS));
    return FALSE;
  }
  /* ops = hf runs each expert that takes tokens as its own ops (HF's
   * loops: the others run no autograd node): 14 ops each (the gather, five
   * GEMM and elementwise steps, the combine; as many backward), besides
   * the attention's and the router's, within a layer's op limit
   * (sim/model/workload.h). */
  guint hit = 0;
  for (guint i = 0; c->hf_ops && i < c->experts; i++)
    hit += sim_transformer_expert_tokens(c, i) > 0;
  if (14 * (guint64)hit + HF_LAYER_OTHER_OPS > SIM_LAYER_MAX_OPS) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: ops = hf runs each expert that takes tokens as ops of its "
                "own, at most %u per layer (expected ops = fused, Megatron's grouped GEMM, for %u)", N(EXPERTS),
                (SIM_LAYER_MAX_OPS - HF_LAYER_OTHER_OPS) / 14, hit);
    return FALSE;
  }
  if (c->experts && c->hf_ops && c->capacity_factor > 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected 0 with ops = hf (HuggingFace's MoE blocks drop no "
                "token; a capacity is Megatron's, ops = fused)", N(CAPACITY_FACTOR));
    return FALSE;
  }
  if (c->heads % c->tp != 0 || c->kv_heads % c->tp != 0 || c->ffn % c->tp != 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %u must divide %s (%u), %s (%u) and %s (%u)", N(TP), c->tp,
                N(HEADS), c->heads, N(KV_HEADS), c->kv_heads, N(FFN), c->ffn);
    return FALSE;
  }
  if (c->sp && c->seq % c->tp != 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: sequence parallelism needs %s (%u) to divide %s (%u)", N(SP),
                N(TP), c->tp, N(SEQ), c->seq);
    return FALSE;
  }
  if (c->hf_ops)
    return hf_validate(c, names, error);
  if (c->attention == SIM_ATTENTION_SDPA) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "attention: sdpa is HuggingFace's SDPA path, which needs ops = hf (ops = fused takes eager or flash)");
    return FALSE;
  }
  return TRUE;
#undef N
}

gboolean
sim_transformer_validate_shape(const SimTransformer *c, const char *const *names, GError **error)
{
  return check(c, TRUE, names, error);
}

/* Parameters per GPU (tensor-parallel shard) of one layer, of the
 * embedding (token and learned position tables) and of the head (its final
 * norm, and lm_head unless tied to the embedding), and the tensors that
 * hold them (the optimizer step's launches). */
typedef struct {
  guint64 layer, embed, head;
  guint layer_tensors, embed_tensors, head_tensors;
  /* An MoE layer: all its parameters, those one token uses (the router,
   * top_k experts, the shared experts, attention and norms), its tensors. */
  guint64 moe_layer, moe_active;
  guint moe_tensors;
} Parameters;

static Parameters
parameters_of(const SimTransformer *c)
{
  guint64 h = c->hidden, q = (guint64)c->heads * c->head_dim, kv = (guint64)c->kv_heads * c->head_dim, f = c->ffn,
          t = c->tp;
  guint64 norm = c->layernorm ? 2 * h : h;
  guint64 attn = h * (q + 2 * kv) + q * h;
  if (c->kv_lora_rank) {
    /* MLA (DeepseekV3Attention): q_a (h x q_lora) and its norm, q_b (q_lora
     * x heads.head_dim), or one h x heads.head_dim q projection; kv_a (h x
     * (kv_lora + rope)) and its norm, kv_b (kv_lora x heads.(nope + v)),
     * o (heads.v x h). */
    guint64 a = c->heads, ql = c->q_lora_rank, kl = c->kv_lora_rank, v = c->v_head_dim, d = c->head_dim;
    attn = (ql ? h * ql + ql + ql * a * d : h * a * d) + h * (kl + c->qk_rope_dim) + kl +
           kl * a * (d - c->qk_rope_dim + v) + a * v * h;
  }
  if (c->qkv_bias || c->linear_bias)
    attn += q + 2 * kv;
  if (c->linear_bias)
    attn += h;
  guint64 mlp = (c->gelu ? 2 : 3) * h * f;
  if (c->linear_bias)
    mlp += (c->gelu ? f : 2 * f) + h;
  /* Tensors: q, k, v and o (gpt2's Conv1D: one c_attn and c_proj, each
   * with its bias), the MLP's two or three projections (and their biases),
   * a weight (and a bias) per norm. */
  guint norm_tensors = c->layernorm ? 2 : 1, mlp_tensors = c->gelu ? 2 : 3;
  guint attn_tensors = c->kv_lora_rank ? (c->q_lora_rank ? 7 : 5) : c->linear_bias ? 4 : 4 + (c->qkv_bias ? 3 : 0);
  /* qwen3's q_norm and k_norm: a head_dim weight each. */
  guint64 qk = c->qk_norm ? 2 * (guint64)c->head_dim : 0;
  /* Each expert a SwiGLU (or GeLU) MLP of moe_ffn, the router a hidden x
   * experts linear, the shared experts one MLP of shared_ffn and its gate
   * a hidden x 1 linear. */
  guint64 expert = (c->gelu ? 2 : 3) * h * c->moe_ffn, router = h * c->experts;
  guint64 local = sim_transformer_local_experts(c); /* the experts this GPU holds (ep) */
  guint64 shared = (c->gelu ? 2 : 3) * h * c->shared_ffn + (c->shared_gate ? h : 0);
  guint64 moe_common = attn / t + 2 * norm + qk + router + shared;
  guint shared_tensors = c->shared_ffn ? mlp_tensors + (c->shared_gate ? 1 : 0) : 0;
  return (Parameters){
    .moe_layer = moe_common + local * expert,
    .moe_active = moe_common + c->top_k * expert,
    .moe_tensors = attn_tensors + 2 * norm_tensors + (c->qk_norm ? 2 : 0) + 1 + (guint)local * mlp_tensors + shared_tensors,
    .layer = (attn + mlp) / t + 2 * norm + qk,
    .embed = c->vocab * h / t + (guint64)c->max_positions * h,
    .head = (c->tied_embeddings ? 0 : c->vocab * h / t) + norm,
    .layer_tensors = attn_tensors + mlp_tensors * (c->linear_bias ? 2 : 1) + 2 * norm_tensors + (c->qk_norm ? 2 : 0),
    .embed_tensors = c->max_positions ? 2 : 1,
    .head_tensors = norm_tensors + (c->tied_embeddings ? 0 : 1),
  };
}

/* Layer `i`'s parameters and tensors. */
static guint64
layer_params(const SimTransformer *c, const Parameters *p, guint i)
{
  return sim_transformer_is_moe_layer(c, i) ? p->moe_layer : p->layer;
}

static guint
layer_tensors(const SimTransformer *c, const Parameters *p, guint i)
{
  return sim_transformer_is_moe_layer(c, i) ? p->moe_tensors : p->layer_tensors;
}

/* The MoE layers of `c`. */
static guint
moe_layers(const SimTransformer *c)
{
  guint n = 0;
  for (guint i = c->dense_layers; c->experts && i < c->layers; i++)
    n += sim_transformer_is_moe_layer(c, i);
  return n;
}

/* Every parameter, or (active) those one token's forward uses. */
static guint64
count_parameters(const SimTransformer *c, gboolean active)
{
  Parameters p = parameters_of(c);
  guint moe = moe_layers(c);
  guint64 per_moe = active ? p.moe_active : p.moe_layer;
  /* Within the loaders' bounds everything but the products with the layer
   * counts stays below 2^57: saturate those rather than wrap. */
  guint64 big = MAX(p.layer, per_moe);
  if (c->layers && big > (G_MAXUINT64 - p.embed - p.head) / c->layers)
    return G_MAXUINT64;
  return p.layer * (c->layers - moe) + per_moe * moe + p.embed + p.head;
}

guint64
sim_transformer_parameters(const SimTransformer *c)
{
  return count_parameters(c, FALSE);
}

guint64
sim_transformer_active_parameters(const SimTransformer *c)
{
  return count_parameters(c, TRUE);
}

/* What a shape certainly holds, from its fields alone, before anything is
 * built: a model of a million layers takes seconds and a gigabyte to build,
 * only for its sum to pass 4 EiB at the end.  Each figure is a part of what
 * sim_workload_bytes_fit adds up for the built model (its static memory, each
 * layer's input) or a product the build checks (the score matrices), so a
 * shape refused here would be refused there, and the message can say
 * which field makes it so.  Doubles: the sums only need to be compared,
 * and they pass 2^64 long before they lose that. */
static gboolean
memory_fits(const SimTransformer *c, const char *const *names, GError **error)
{
#define N(id) name_of(names, SIM_KEY_TRANSFORMER_##id)
  const double max = (double)SIM_UNITS_MAX_BYTES;
  Parameters p = parameters_of(c);
  SimParamBytes per;
  guint e = sim_dtype_bytes(c->dtype);
  sim_param_bytes_set(&per, e, c->grads_kept, c->adamw, c->master_weights);
  double per_param = (double)(per.weight + per.grad + per.state);
  double input = (double)c->batch * c->seq * c->hidden * e / (c->sp ? c->tp : 1);
  double layer = (double)MAX(p.layer, c->experts ? p.moe_layer : 0) * per_param + input, ends = (double)(p.embed + p.head) * per_param;
  double scores = (double)c->batch * c->heads * c->seq * c->seq;
  if (scores > max) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: the attention scores (%s x %s x %s^2: %.3g elements) take more "
                "than 4 EiB", N(SEQ), N(BATCH), N(HEADS), N(SEQ), scores);
    return FALSE;
  }
  /* The embedding and the head alone stay far below (vocab x hidden <= 2^50
   * parameters): the layers make a model too large. */
  if (ends + layer * c->layers > max) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %u layers of at least %.3g bytes each (%.3g parameters at %.0f "
                "bytes, and the layer's input) add up to more than 4 EiB", N(LAYERS), c->layers, layer,
                (double)MAX(p.layer, c->experts ? p.moe_layer : 0), per_param);
    return FALSE;
  }
  return TRUE;
#undef N
}

gboolean
sim_transformer_validate(const SimTransformer *c, const char *const *names, GError **error)
{
  return check(c, FALSE, names, error) && memory_fits(c, names, error);
}

/* The per-layer geometry, shared by the tensor list and the times. */
typedef struct {
  guint64 rows;     /* N = batch x seq */
  guint64 e;        /* dtype bytes */
  guint64 h, qd, kvd, f, t, sr; /* sr: divisor of the sequence-parallel region */
  guint64 scores;   /* elements of one score matrix set: batch x heads x seq^2 / t */
} Geometry;

static SimTensor *
add(SimLayer *layer, const char *name, guint64 bytes, guint refs)
{
  SimTensor *t = sim_layer_add_tensor(layer, name, bytes);
  t->refs = refs;
  return t;
}

static void
add_norm(SimLayer *layer, const SimTransformer *c, const Geometry *g, Checked *k, const char *in, const char *stats)
{
  add(layer, in, mul3(k, g->rows, g->h, g->e) / g->sr, 1);
  sim_tensor_set_elem(add(layer, stats, mul(k, g->rows, c->layernorm ? 8 : 4) / g->sr, 1), 4);
}

/* The tokens all routed experts take in an MoE layer (N.k without a
 * capacity, less what it drops): what this GPU's router sends out. */
static guint64
routed_tokens(const SimTransformer *c)
{
  guint64 sum = 0;
  for (guint i = 0; i < c->experts; i++)
    sum += sim_transformer_expert_tokens(c, i);
  return sum;
}

guint
sim_transformer_local_experts(const SimTransformer *c)
{
  return c->experts / MAX(c->ep, 1);
}

guint64
sim_transformer_local_tokens(const SimTransformer *c)
{
  guint64 sum = 0;
  for (guint i = 0; i < sim_transformer_local_experts(c); i++)
    sum += sim_transformer_expert_tokens(c, i);
  return sum * MAX(c->ep, 1);
}

/* ops = fused, an MoE layer's MLP as Megatron-core runs it with grouped
 * GEMM (megatron/core/transformer/moe: router.py, token_dispatcher.py,
 * experts.py TEGroupedMLP, NVIDIA/Megatron-LM@d98e8a6): the router's
 * input (and the shared experts'), the router's fp32 probabilities and its
 * bool routing map, the permuted tokens' sort indices (read by permute and
 * unpermute), the permuted tokens (grouped fc1's input), fc1's output and
 * the routed rows' fp32 probabilities (the weighted SwiGLU's inputs,
 * weighted_bias_swiglu_impl, experts.py l. 941-975; fc1's output 2 x
 * moe_ffn wide for SwiGLU), the activation's output (grouped fc2's input);
 * the shared experts as a dense MLP of shared_ffn (fc1's output and the
 * activation's). */
static void
fused_moe(SimLayer *layer, const SimTransformer *c, const Geometry *g, Checked *k)
{
  /* The sort indices are this GPU's routing (T rows); from expert_in on,
   * the rows its experts received (the dispatch's output, Tl rows). */
  guint64 T = routed_tokens(c), Tl = sim_transformer_local_tokens(c), w = c->gelu ? 1 : 2;
  add(layer, "mlp_in", mul3(k, g->rows, g->h, g->e), c->shared_ffn ? 2 : 1);
  sim_tensor_set_elem(add(layer, "router_probs", mul3(k, g->rows, c->experts, 4), 1), 4);
  sim_tensor_set_elem(add(layer, "routing_map", mul(k, g->rows, c->experts), 1), 1);
  sim_tensor_set_elem(add(layer, "permute_idx", mul(k, T, 8), 2), 8);
  add(layer, "expert_in", mul3(k, Tl, g->h, g->e), 1);
  add(layer, "expert_fc1_out", mul3(k, Tl, w * c->moe_ffn, g->e), 1);
  sim_tensor_set_elem(add(layer, "expert_probs", mul(k, Tl, 4), 1), 4);
  add(layer, "expert_act_out", mul3(k, Tl, c->moe_ffn, g->e), 1);
  if (c->shared_ffn) {
    add(layer, "shared_fc1_out", mul3(k, g->rows, w * c->shared_ffn, g->e), 1);
    add(layer, "shared_act_out", mul3(k, g->rows, c->shared_ffn, g->e), 1);
  }
}

/* ops = fused, multi-head latent attention as Megatron-core's
 * MLASelfAttention runs it (megatron/core/transformer/multi_latent_
 * attention.py, NVIDIA/Megatron-LM@d98e8a6): the norm's output, read by
 * the q and kv down-projections; each down-projection's output (its
 * RMSNorm's input) with the norm's statistics and output (the up-
 * projection's input); q, k and v as the flash kernel takes them, q and k
 * heads x head_dim wide (the RoPE part included), v heads x v_head_dim.
 * Without q_lora_rank one q projection reads the norm's output. */
static void
fused_mla(SimLayer *layer, const SimTransformer *c, const Geometry *g, Checked *k)
{
  guint64 a = c->heads, ql = c->q_lora_rank, kl = c->kv_lora_rank;
  add(layer, "qkv_in", mul3(k, g->rows, g->h, g->e), 2);
  if (ql) {
    add(layer, "q_down", mul3(k, g->rows, ql, g->e), 1);
    sim_tensor_set_elem(add(layer, "q_down_stats", mul(k, g->rows, 4), 1), 4);
    add(layer, "q_up_in", mul3(k, g->rows, ql, g->e), 1);
  }
  add(layer, "kv_down", mul3(k, g->rows, kl, g->e), 1);
  sim_tensor_set_elem(add(layer, "kv_down_stats", mul(k, g->rows, 4), 1), 4);
  add(layer, "kv_up_in", mul3(k, g->rows, kl, g->e), 1);
  add(layer, "q", mul3(k, g->rows, a * c->head_dim, g->e), 1);
  add(layer, "k", mul3(k, g->rows, a * c->head_dim, g->e), 1);
  add(layer, "v", mul3(k, g->rows, a * c->v_head_dim, g->e), 1);
}

/* ops = fused: one tensor per storage of a fused-kernel layer. */
static void
fused_layer(SimLayer *layer, guint index, const SimTransformer *c, const Geometry *g, Checked *k)
{
  guint64 row_h = mul3(k, g->rows, g->h, g->e) / g->sr;
  guint64 row_f = mul3(k, g->rows, g->f, g->e) / g->t;
  guint64 scores = mul(k, g->scores, g->e);
  gboolean drop = c->dropout > 0, flash = c->attention == SIM_ATTENTION_FLASH;

  /* Attention. */
  add_norm(layer, c, g, k, "attn_norm_in", "attn_norm_stats");
  guint64 out = g->qd; /* the attention output's width: heads x v_head_dim with MLA */
  if (c->kv_lora_rank) {
    fused_mla(layer, c, g, k);
    out = (guint64)c->heads * c->v_head_dim;
  } else {
    add(layer, "qkv_in", row_h, 3);
    add(layer, "q", mul3(k, g->rows, g->qd, g->e) / g->t, 1);
    add(layer, "k", mul3(k, g->rows, g->kvd, g->e) / g->t, 1);
    add(layer, "v", mul3(k, g->rows, g->kvd, g->e) / g->t, 1);
  }
  if (flash) {
    sim_tensor_set_elem(add(layer, "softmax_lse", mul3(k, g->rows, c->heads, 4) / g->t, 1), 4);
  } else {
    /* Without dropout the PV matmul reads the softmax output itself. */
    add(layer, "scores_softmax", scores, drop ? 1 : 2)->selective = TRUE;
    if (drop) {
      SimTensor *mask = add(layer, "attn_dropout_mask", g->scores, 1);
      mask->selective = TRUE;
      sim_tensor_set_elem(mask, 1);
      add(layer, "attn_probs_dropped", scores, 1)->selective = TRUE;
    }
  }
  add(layer, "attn_out", mul3(k, g->rows, out, g->e) / g->t, flash ? 2 : 1);
  if (drop)
    sim_tensor_set_elem(add(layer, "attn_resid_mask", mul(k, g->rows, g->h) / g->sr, 1), 1);

  /* MLP. */
  add_norm(layer, c, g, k, "mlp_norm_in", "mlp_norm_stats");
  if (sim_transformer_is_moe_layer(c, index)) {
    fused_moe(layer, c, g, k);
    return;
  }
  add(layer, "mlp_in", row_h, c->gelu ? 1 : 2);
  if (c->gelu) {
    add(layer, "fc1_out", row_f, 1);
    add(layer, "fc2_in", row_f, 1);
  } else {
    add(layer, "gate", row_f, 1);
    add(layer, "up", row_f, 1);
    add(layer, "silu_out", row_f, 1);
    add(layer, "down_in", row_f, 1);
  }
  if (drop)
    sim_tensor_set_elem(add(layer, "mlp_resid_mask", mul(k, g->rows, g->h) / g->sr, 1), 1);
}

/* The checkpointed input of a layer: the residual stream entering it.
 * Times and transients are the ops' (transformer_ops.c). */
static void
layer_input(SimLayer *layer, const Geometry *g, Checked *k)
{
  layer->input_bytes = mul3(k, g->rows, g->h, g->e) / g->sr;
}

/* ---- ops = hf --------------------------------------------------------------
 *
 * What current PyTorch's autograd saves (one entry per storage, its
 * references in the layer) when HuggingFace transformers' modeling code runs
 * on CUDA: the table in transformer.h, checked against the recordings of
 * tests/data/hf (tests/test_transformer_hf.c). */

enum {
  HF_LEAF = 1 << 0,   /* no grad_fn */
  HF_PARAM = 1 << 1,  /* a parameter reference */
  HF_SHARED = 1 << 2, /* saved by an earlier layer */
  HF_HOST = 1 << 3,   /* in host memory */
  HF_F32 = 1 << 4,    /* fp32 elements (else the activation dtype's) */
  HF_I64 = 1 << 5,    /* int64 elements */
  HF_BOOL = 1 << 6,   /* one-byte elements (bool masks) */
};

static SimTensor *
hf_add(SimLayer *layer, const char *name, guint64 bytes, guint refs, guint flags)
{
  SimTensor *t = add(layer, name, bytes, refs);
  t->leaf = (flags & HF_LEAF) != 0;
  t->parameter = (flags & HF_PARAM) != 0;
  t->shared = (flags & HF_SHARED) != 0;
  t->host = (flags & HF_HOST) != 0;
  if (flags & (HF_F32 | HF_I64 | HF_BOOL))
    sim_tensor_set_elem(t, flags & HF_F32 ? 4 : flags & HF_I64 ? 8 : 1);
  /* References held elsewhere are the lowering's to copy or not (its fates). */
  t->offloadable = (flags & HF_HOST) == 0;
  return t;
}

TransformerShape
transformer_shape(const SimTransformer *c)
{
  TransformerShape m = { .n = (guint64)c->batch * c->seq, .e = sim_dtype_bytes(c->dtype), .h = c->hidden,
                         .f = c->ffn, .b = c->batch, .s = c->seq, .a = c->heads, .kv = c->kv_heads,
                         .d = c->head_dim, .v = c->vocab, .dp = ((guint64)c->head_dim + 7) / 8 * 8, .t = c->tp,
                         .sr = c->sp ? c->tp : 1, .drop = c->dropout > 0, .gpt2 = c->hf_ops && c->layernorm,
                         .hf = c->hf_ops };
  m.S = (guint64)c->batch * c->heads * c->seq * c->seq / c->tp;
  m.eager = c->attention == SIM_ATTENTION_EAGER;
  m.sdpa = c->attention == SIM_ATTENTION_SDPA;
  m.flash = c->attention == SIM_ATTENTION_FLASH;
  m.padded = m.hf && !m.eager && m.d % 8 != 0 && m.e != 4;
  m.repeat = m.hf && !m.flash && m.kv < m.a;
  m.softmax32 = m.hf && !m.gpt2;
  m.E = c->experts;
  m.k = c->top_k;
  m.fe = c->moe_ffn;
  m.fs = c->shared_ffn;
  m.shared_gate = c->shared_gate;
  m.norm_topk = c->norm_topk;
  m.qk_norm = c->qk_norm;
  m.routed = c->experts ? routed_tokens(c) : 0;
  m.ep = MAX(c->ep, 1);
  m.El = sim_transformer_local_experts(c);
  m.routed_local = c->experts ? sim_transformer_local_tokens(c) : 0;
  m.hot = c->experts ? m.ep * sim_transformer_expert_tokens(c, 0) : 0;
  m.mla = c->kv_lora_rank > 0;
  m.ql = c->q_lora_rank;
  m.kvl = c->kv_lora_rank;
  m.dr = c->qk_rope_dim;
  m.dv = m.mla ? c->v_head_dim : m.d;
  return m;
}

/* The shape in the units of HF's code (g's products checked). */
typedef TransformerShape Hf;

static Hf
hf_shape(const SimTransformer *c, const Geometry *g)
{
  Hf m = transformer_shape(c);
  m.S = g->scores;
  return m;
}

typedef struct {
  const char *in, *in_fp32, *rsqrt, *normed, *mean, *rstd, *weight, *bias;
} NormNames;

#define NORM_NAMES(p)                                                                                      \
  { p ".in", p ".in_fp32", p ".rsqrt", p ".normed", p ".mean", p ".rstd", p ".weight", p ".bias" }
static const NormNames attn_norm = NORM_NAMES("attn_norm"), mlp_norm = NORM_NAMES("mlp_norm"),
                       final_norm = NORM_NAMES("final_norm"), q_norm = NORM_NAMES("q_norm"),
                       k_norm = NORM_NAMES("k_norm"), q_a_norm = NORM_NAMES("q_a_norm"),
                       kv_a_norm = NORM_NAMES("kv_a_norm");

static void hf_rmsnorm(SimLayer *l, Checked *k, guint64 rows, guint64 width, guint64 e, const NormNames *names);

/* LlamaRMSNorm: hidden.to(float32) (saved by pow and by the multiply by
 * rsqrt; in fp32 the cast is a no-op and this is the input itself), rsqrt
 * (by its own backward and by the multiply), the weight and the normalised
 * tensor cast back (weight * x); mean saves no tensor (PyTorch 2.2 and
 * later).  nn.LayerNorm, CUDA's native_layer_norm: the input, weight, bias
 * and the fp32 mean and rstd. */
static void
hf_norm(SimLayer *l, const Hf *m, Checked *k, const NormNames *names)
{
  if (m->gpt2) {
    hf_add(l, names->in, mul3(k, m->n, m->h, m->e), 1, 0);
    hf_add(l, names->weight, m->h * m->e, 1, HF_PARAM | HF_LEAF);
    hf_add(l, names->bias, m->h * m->e, 1, HF_PARAM | HF_LEAF);
    hf_add(l, names->mean, mul(k, m->n, 4), 1, HF_LEAF | HF_F32);
    hf_add(l, names->rstd, mul(k, m->n, 4), 1, HF_LEAF | HF_F32);
    return;
  }
  hf_rmsnorm(l, k, m->n, m->h, m->e, names);
}

/* An RMSNorm over `width` of `rows` rows (hf_norm; qwen3's q_norm and
 * k_norm over head_dim, rows = tokens x heads). */
static void
hf_rmsnorm(SimLayer *l, Checked *k, guint64 rows, guint64 width, guint64 e, const NormNames *names)
{
  hf_add(l, names->in_fp32, mul3(k, rows, width, 4), 2, HF_F32);
  hf_add(l, names->rsqrt, mul(k, rows, 4), 2, HF_F32);
  hf_add(l, names->weight, width * e, 1, HF_PARAM | HF_LEAF); /* saved as itself, not a view */
  hf_add(l, names->normed, mul3(k, rows, width, e), 1, 0);
}

/* The MLP activation on `input` (N x ffn): SiLU and the fused GeLUs save
 * their input; gelu_new, written out in plain ops, saves pow's input, the
 * tanh result and both operands of the last multiply (Python scalars are no
 * saved tensors). */
static void
hf_activation(SimLayer *l, const SimTransformer *c, const Hf *m, Checked *k, const char *input)
{
  guint64 row_f = mul3(k, m->n, m->f, m->e);
  hf_add(l, input, row_f, 1, 0);
  if (c->hidden_act == SIM_ACT_GELU_NEW) {
    hf_add(l, "act.tanh", row_f, 1, 0);
    hf_add(l, "act.half_x", row_f, 1, 0);
    hf_add(l, "act.one_plus_tanh", row_f, 1, 0);
  }
}

/* Eager attention: QK^T saves q and k (at the query head count, after
 * repeat_kv), the softmax saves its result (fp32 for llama-like models,
 * then cast to the activation dtype for PV; GPT-2's is in the activation
 * dtype and PV reads it itself), dropout its bool mask, PV the
 * probabilities and v, the output projection the merged heads. */
static void
hf_eager(SimLayer *l, const Hf *m, Checked *k)
{
  /* q and k at head_dim, v and the output at the value head dim (the same
   * but for latent attention). */
  guint64 row_q = mul3(k, m->n, m->a * m->d, m->e), row_v = mul3(k, m->n, m->a * m->dv, m->e);
  hf_add(l, "q", row_q, 1, 0);
  hf_add(l, "k", row_q, 1, 0);
  guint64 softmax_e = m->gpt2 ? m->e : 4;
  gboolean same = softmax_e == m->e && !m->drop; /* PV reads the softmax result itself */
  hf_add(l, "scores_softmax", mul(k, m->S, softmax_e), same ? 2 : 1, softmax_e == 4 ? HF_F32 : 0)->selective = TRUE;
  if (m->drop) {
    hf_add(l, "attn_dropout_mask", m->S, 1, HF_LEAF | HF_BOOL)->selective = TRUE;
    hf_add(l, "attn_probs_dropped", mul(k, m->S, m->e), 1, 0)->selective = TRUE;
  } else if (!same) {
    hf_add(l, "attn_probs", mul(k, m->S, m->e), 1, 0)->selective = TRUE;
  }
  hf_add(l, "v", row_v, 1, 0);
  hf_add(l, "attn_out", row_v, 1, 0);
}

/* HF's DeepseekV3Attention (multi-head latent attention): the norm's output
 * read by q_a_proj (or q_proj) and kv_a_proj_with_mqa; q_a_layernorm and
 * kv_a_layernorm as RMSNorms over the ranks, their outputs read by q_b_proj
 * and kv_b_proj; RoPE's cos and sin (qk_rope_head_dim wide) saved by the
 * q and k multiplies (both operands of q * cos being one a leaf, nothing
 * else); then eager attention on the concatenated q and k (head_dim =
 * nope + rope) and v (v_head_dim), v a contiguous copy of its view. */
static void
hf_mla(SimLayer *l, guint index, const Hf *m, Checked *k)
{
  hf_add(l, "qkv_in", mul3(k, m->n, m->h, m->e), 2, 0);
  if (m->ql) {
    hf_add(l, "q_a_proj.weight", m->h * m->ql * m->e, 1, HF_PARAM);
    hf_rmsnorm(l, k, m->n, m->ql, m->e, &q_a_norm);
    hf_add(l, "q_b_in", mul3(k, m->n, m->ql, m->e), 1, 0);
    hf_add(l, "q_b_proj.weight", m->ql * m->a * m->d * m->e, 1, HF_PARAM);
  } else {
    hf_add(l, "q_proj.weight", m->h * m->a * m->d * m->e, 1, HF_PARAM);
  }
  hf_add(l, "kv_a_proj.weight", m->h * (m->kvl + m->dr) * m->e, 1, HF_PARAM);
  hf_rmsnorm(l, k, m->n, m->kvl, m->e, &kv_a_norm);
  hf_add(l, "kv_b_in", mul3(k, m->n, m->kvl, m->e), 1, 0);
  hf_add(l, "kv_b_proj.weight", m->kvl * m->a * (m->d - m->dr + m->dv) * m->e, 1, HF_PARAM);
  guint shared = index > 0 ? HF_SHARED : 0;
  hf_add(l, "rope_cos", m->s * m->dr * m->e, 2, HF_LEAF | shared);
  hf_add(l, "rope_sin", m->s * m->dr * m->e, 2, HF_LEAF | shared);
  hf_eager(l, m, k);
}

/* PyTorch's SDPA flash (16-bit) or memory-efficient (fp32) kernel, or
 * flash_attention_2: q, k, v as given, the output (whose storage the output
 * projection reads again), fp32 logsumexp, and the dropout state: philox
 * seed and offset on the host (SDPA) or an int64 (2,) rng_state (flash-attn).
 * The flash kernels zero-pad head_dim to a multiple of 8: q, k, v and the
 * output are then padded copies, and the output projection reads a copy
 * without the padding. */
static void
hf_fused_attention(SimLayer *l, const SimTransformer *c, const Hf *m, Checked *k)
{
  gboolean sdpa = m->sdpa, padded = m->padded;
  guint64 d = padded ? m->dp : m->d;
  /* SDPA gets k and v after repeat_kv; flash_attention_2 at their own head count. */
  guint64 kv = m->repeat ? m->a : m->kv;
  guint64 row_q = mul3(k, m->n, m->a * d, m->e), row_kv = mul3(k, m->n, kv * d, m->e);
  if (m->gpt2 && !padded) {
    /* Views of c_attn's output, one storage. */
    hf_add(l, "qkv", mul3(k, m->n, 3 * m->h, m->e), 3, 0);
  } else {
    hf_add(l, "q", row_q, 1, 0);
    hf_add(l, "k", row_kv, 1, 0);
    hf_add(l, "v", row_kv, 1, 0);
  }
  hf_add(l, padded ? "attn_out_padded" : "attn_out", row_q, padded ? 1 : 2, 0);
  /* The memory-efficient kernel (fp32) pads logsumexp's last dimension to 32. */
  guint64 lse_s = sdpa && m->e == 4 ? (m->s + 31) / 32 * 32 : m->s;
  hf_add(l, "softmax_lse", mul(k, mul3(k, m->b, m->a, lse_s), 4), 1, HF_LEAF | HF_F32);
  if (sdpa) {
    hf_add(l, "philox_seed", 8, 1, HF_LEAF | HF_HOST | HF_I64);
    hf_add(l, "philox_offset", 8, 1, HF_LEAF | HF_HOST | HF_I64);
  } else {
    hf_add(l, "rng_state", 16, 1, HF_LEAF | HF_I64);
  }
  if (padded)
    hf_add(l, "attn_out", mul3(k, m->n, m->a * m->d, m->e), 1, 0);
}

/* A SwiGLU expert of `tokens` rows and width `f`, its names under `p`
 * (routed experts "expert.<i>.", the shared one "shared."): what its
 * gate_proj, SiLU, up_proj, product and down_proj save. */
static void
hf_expert(SimLayer *l, const Hf *m, Checked *k, const char *p, guint64 tokens, guint64 f)
{
  guint64 row_f = mul3(k, tokens, f, m->e);
  g_autofree char *gw = g_strconcat(p, "gate_proj.weight", NULL), *g = g_strconcat(p, "gate", NULL),
                  *a = g_strconcat(p, "act_out", NULL), *uw = g_strconcat(p, "up_proj.weight", NULL),
                  *u = g_strconcat(p, "up", NULL), *d = g_strconcat(p, "down_in", NULL),
                  *dw = g_strconcat(p, "down_proj.weight", NULL);
  hf_add(l, gw, m->h * f * m->e, 1, HF_PARAM);
  hf_add(l, g, row_f, 1, 0);
  hf_add(l, uw, m->h * f * m->e, 1, HF_PARAM);
  hf_add(l, a, row_f, 1, 0);
  hf_add(l, u, row_f, 1, 0);
  hf_add(l, d, row_f, 1, 0);
  hf_add(l, dw, f * m->h * m->e, 1, HF_PARAM);
}

/* Per expert that takes tokens (HF's loops skip the others): torch.where's
 * (2, t) int64 result, one storage read by the gather, the routing
 * weights' index (twice) and index_add_; the gathered input (gate_proj and
 * up_proj); the expert's MLP; its output and its routing weights (the
 * product); the product (index_add_'s source).  The weights and the
 * product are in the routing weights' dtype, `w` bytes: the activations'
 * (mixtral, qwen) or fp32 (deepseek_v3). */
static void
hf_routed_experts(SimLayer *l, const SimTransformer *c, const Hf *m, Checked *k, guint64 w)
{
  guint flags = w == 4 ? HF_F32 : 0;
  for (guint i = 0; i < m->E; i++) {
    guint64 t = sim_transformer_expert_tokens(c, i);
    if (t == 0)
      continue;
    TransformerRouted r = transformer_routed_names(i);
    hf_add(l, r.idx, mul(k, t, 16), 4, HF_LEAF | HF_I64);
    hf_add(l, r.in, mul3(k, t, m->h, m->e), 2, 0);
    hf_expert(l, m, k, r.prefix, t, m->fe);
    hf_add(l, r.out, mul3(k, t, m->h, m->e), 1, 0);
    hf_add(l, r.route, mul(k, t, w), 1, flags);
    hf_add(l, r.weighted, mul3(k, t, m->h, w), 1, flags);
    transformer_routed_clear(&r);
  }
}

TransformerRouted
transformer_routed_names(guint expert)
{
  char *p = g_strdup_printf("expert.%u.", expert);
  return (TransformerRouted){ .prefix = p, .gather = g_strconcat(p, "gather", NULL),
                              .combine = g_strconcat(p, "combine", NULL), .idx = g_strconcat(p, "idx", NULL),
                              .in = g_strconcat(p, "in", NULL), .out = g_strconcat(p, "out", NULL),
                              .route = g_strconcat(p, "route", NULL), .weighted = g_strconcat(p, "weighted", NULL) };
}

void
transformer_routed_clear(TransformerRouted *r)
{
  char **all[] = { &r->prefix, &r->gather, &r->combine, &r->idx, &r->in, &r->out, &r->route, &r->weighted };
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    g_clear_pointer(all[i], g_free);
}

/* HF's sparse MoE block (modeling_mixtral.py, modeling_qwen2_moe.py,
 * modeling_qwen3_moe.py; recorded in tests/data/hf): the router's input
 * and weight, softmax(dtype=float32)'s result, topk's indices, with
 * norm_topk_prob the in-place division's operands (a clone autograd takes
 * of the top-k values, and their sum), then per expert that takes tokens
 * (HF loops over the experts hit): torch.where's (2, t) int64 result, one
 * storage read by the gather, the routing weights' index (twice) and
 * index_add_; the gathered input (gate_proj and up_proj); the expert's
 * MLP; its output and the routing weight slice (the product); the product
 * (index_add_'s source).  qwen2_moe's shared expert reads the block's input
 * with its gate, whose sigmoid's result is saved by itself and by the
 * product with the shared output. */
static void
hf_moe(SimLayer *l, const SimTransformer *c, const Hf *m, Checked *k)
{
  guint64 row_h = mul3(k, m->n, m->h, m->e);
  hf_add(l, "mlp_in", row_h, 1 + (m->fs ? 2 : 0) + (m->shared_gate ? 1 : 0), 0);
  hf_add(l, "router.weight", m->h * m->E * m->e, 1, HF_PARAM);
  hf_add(l, "router_probs", mul3(k, m->n, m->E, 4), 1, HF_F32);
  hf_add(l, "topk_idx", mul3(k, m->n, m->k, 8), 1, HF_LEAF | HF_I64);
  if (m->norm_topk) {
    hf_add(l, "topk_clone", mul3(k, m->n, m->k, 4), 1, HF_F32);
    hf_add(l, "topk_sum", mul(k, m->n, 4), 1, HF_F32);
  }
  hf_routed_experts(l, c, m, k, m->e);
  if (m->fs) {
    hf_expert(l, m, k, "shared.", m->n, m->fs);
    if (m->shared_gate) {
      hf_add(l, "shared_gate.weight", m->h * m->e, 1, HF_PARAM);
      hf_add(l, "shared_sigmoid", mul(k, m->n, m->e), 2, 0);
      hf_add(l, "shared_out", row_h, 1, 0);
    }
  }
}

/* HF's DeepseekV3MoE (offsim's only family with latent attention and
 * experts): the router's fp32 copies of its input and of its weight (F.
 * linear on x.float() and weight.float()), sigmoid's result (read by its
 * backward and by the gather of the top-k weights), the top-k indices, with
 * norm_topk_prob the in-place division's operands (a clone of the weights,
 * their sum + 1e-20); per expert that takes tokens (the loop's experts
 * without any run nothing) torch.where's (2, t) result, the gathered rows,
 * the expert's MLP, its output and its fp32 weights (the product), the
 * fp32 product (index_add_'s source: the output accumulates in the
 * weights' dtype); the shared experts read the block's input. */
static void
hf_deepseek_moe(SimLayer *l, const SimTransformer *c, const Hf *m, Checked *k)
{
  if (m->fs)
    hf_add(l, "mlp_in", mul3(k, m->n, m->h, m->e), 2, 0);
  hf_add(l, "router_in", mul3(k, m->n, m->h, 4), 1, HF_F32);
  hf_add(l, "router.weight_fp32", m->h * m->E * 4, 1, HF_F32);
  hf_add(l, "router_scores", mul3(k, m->n, m->E, 4), 2, HF_F32);
  hf_add(l, "topk_idx", mul3(k, m->n, m->k, 8), 1, HF_LEAF | HF_I64);
  if (m->norm_topk) {
    hf_add(l, "topk_clone", mul3(k, m->n, m->k, 4), 1, HF_F32);
    hf_add(l, "topk_sum", mul(k, m->n, 4), 1, HF_F32);
  }
  hf_routed_experts(l, c, m, k, 4);
  if (m->fs)
    hf_expert(l, m, k, "shared.", m->n, m->fs);
}

static void
hf_layer(SimLayer *l, guint index, const SimTransformer *c, const Geometry *g, Checked *k)
{
  Hf m = hf_shape(c, g);
  guint64 row_h = mul3(k, m.n, m.h, m.e), qd = m.a * m.d, kvd = m.kv * m.d;
  hf_norm(l, &m, k, &attn_norm);
  if (m.mla) {
    hf_mla(l, index, &m, k);
  } else if (m.gpt2) {
    hf_add(l, "qkv_in", row_h, 1, 0);
    hf_add(l, "attn.c_attn.weight", m.h * 3 * m.h * m.e, 1, HF_PARAM | HF_LEAF);
  } else {
    hf_add(l, "qkv_in", row_h, 3, 0);
    hf_add(l, "q_proj.weight", m.h * qd * m.e, 1, HF_PARAM);
    hf_add(l, "k_proj.weight", m.h * kvd * m.e, 1, HF_PARAM);
    hf_add(l, "v_proj.weight", m.h * kvd * m.e, 1, HF_PARAM);
    if (c->qk_norm) {
      hf_rmsnorm(l, k, mul(k, m.n, m.a), m.d, m.e, &q_norm);
      hf_rmsnorm(l, k, mul(k, m.n, m.kv), m.d, m.e, &k_norm);
    }
    /* RoPE: cos and sin (1, seq, head_dim), computed once in the model's
     * forward and saved by the q and k multiplies of every layer. */
    guint shared = index > 0 ? HF_SHARED : 0;
    hf_add(l, "rope_cos", m.s * m.d * m.e, 2, HF_LEAF | shared);
    hf_add(l, "rope_sin", m.s * m.d * m.e, 2, HF_LEAF | shared);
  }
  if (m.mla)
    ; /* hf_mla's eager attention */
  else if (c->attention == SIM_ATTENTION_EAGER)
    hf_eager(l, &m, k);
  else
    hf_fused_attention(l, c, &m, k);
  hf_add(l, m.gpt2 ? "attn.c_proj.weight" : "o_proj.weight", m.a * m.dv * m.h * m.e, 1,
         m.gpt2 ? HF_PARAM | HF_LEAF : HF_PARAM);
  if (m.gpt2 && m.drop)
    hf_add(l, "attn_resid_mask", mul(k, m.n, m.h), 1, HF_LEAF | HF_BOOL);

  hf_norm(l, &m, k, &mlp_norm);
  guint64 row_f = mul3(k, m.n, m.f, m.e);
  if (m.gpt2) {
    hf_add(l, "mlp_in", row_h, 1, 0);
    hf_add(l, "mlp.c_fc.weight", m.h * m.f * m.e, 1, HF_PARAM | HF_LEAF);
    hf_activation(l, c, &m, k, "fc1_out");
    hf_add(l, "fc2_in", row_f, 1, 0);
    hf_add(l, "mlp.c_proj.weight", m.f * m.h * m.e, 1, HF_PARAM | HF_LEAF);
    if (m.drop)
      hf_add(l, "mlp_resid_mask", mul(k, m.n, m.h), 1, HF_LEAF | HF_BOOL);
    return;
  }
  if (sim_transformer_is_moe_layer(c, index)) {
    if (m.mla)
      hf_deepseek_moe(l, c, &m, k);
    else
      hf_moe(l, c, &m, k);
    return;
  }
  hf_add(l, "mlp_in", row_h, 2, 0);
  hf_add(l, "gate_proj.weight", m.h * m.f * m.e, 1, HF_PARAM);
  hf_activation(l, c, &m, k, "gate");
  hf_add(l, "up_proj.weight", m.h * m.f * m.e, 1, HF_PARAM);
  hf_add(l, "act_out", row_f, 1, 0);
  hf_add(l, "up", row_f, 1, 0);
  hf_add(l, "down_in", row_f, 1, 0);
  hf_add(l, "down_proj.weight", m.f * m.h * m.e, 1, HF_PARAM);
}

/* The token ids; GPT-2 adds its position ids (1 x seq) and the embedding
 * dropout's mask.  EmbeddingBackward0 keeps the weight's row count, not the
 * weight (PyTorch 2.x; torch 1.13 packed it). */
static void
hf_embed(SimLayer *stage, const SimTransformer *c, const Geometry *g, Checked *k)
{
  Hf m = hf_shape(c, g);
  hf_add(stage, "token_ids", mul(k, m.n, 8), 1, HF_LEAF | HF_I64);
  if (m.gpt2) {
    hf_add(stage, "position_ids", m.s * 8, 1, HF_LEAF | HF_I64);
    if (m.drop)
      hf_add(stage, "embed_dropout_mask", mul(k, m.n, m.h), 1, HF_LEAF | HF_BOOL);
  }
}

/* The final norm, the LM head's input and weight, and HF's ForCausalLMLoss:
 * logits.float(), labels padded and shifted (so N rows, not N - batch),
 * cross entropy: log_softmax's fp32 result saved by itself and by nll_loss,
 * the labels and nll_loss's total weight (an fp32 scalar). */
static void
hf_head(SimLayer *stage, const SimTransformer *c, const Geometry *g, Checked *k)
{
  Hf m = hf_shape(c, g);
  hf_norm(stage, &m, k, &final_norm);
  hf_add(stage, "lm_head_in", mul3(k, m.n, m.h, m.e), 1, 0);
  hf_add(stage, "lm_head.weight", mul3(k, c->vocab, m.h, m.e), 1, HF_PARAM);
  hf_add(stage, "log_softmax", mul3(k, m.n, c->vocab, 4), 2, HF_F32);
  /* The shifted labels, labels padded by one then sliced [..., 1:] and made
   * contiguous: a copy of N, except at batch 1, where the slice already is
   * contiguous and keeps the padded storage, seq + 1 ids. */
  hf_add(stage, "labels", m.b == 1 ? (m.s + 1) * 8 : mul(k, m.n, 8), 1, HF_LEAF | HF_I64);
  hf_add(stage, "loss_total_weight", 4, 1, HF_LEAF | HF_F32);
}

/* ---- both ------------------------------------------------------------------ */

/* The embedding's and the head's saved tensors; their times and
 * transients are their ops' (transformer_ops.c). */
static void
build_embed(SimLayer *stage, const SimTransformer *c, const Geometry *g, Checked *k)
{
  if (c->hf_ops) {
    hf_embed(stage, c, g, k);
    return;
  }
  SimTensor *ids = add(stage, "token_ids", mul(k, g->rows, 8), 1);
  ids->leaf = TRUE;
  sim_tensor_set_elem(ids, 8);
}

static void
build_head(SimLayer *stage, const SimTransformer *c, const Geometry *g, Checked *k)
{
  if (c->hf_ops) {
    hf_head(stage, c, g, k);
    return;
  }
  guint64 logits = mul(k, g->rows, c->vocab) / g->t;
  add_norm(stage, c, g, k, "final_norm_in", "final_norm_stats");
  add(stage, "lm_head_in", mul3(k, g->rows, g->h, g->e), 1);
  /* log_softmax saves its output and nll_loss reads it again, with the labels. */
  sim_tensor_set_elem(add(stage, "log_softmax", mul(k, logits, 4), 2), 4);
  SimTensor *labels = add(stage, "labels", mul(k, g->rows, 8), 1);
  labels->leaf = TRUE;
  sim_tensor_set_elem(labels, 8);
}

/* Every tensor not marked otherwise holds elements of the activation dtype. */
static void
default_elements_of(SimLayer *layer, guint e)
{
  for (guint k = 0; k < layer->tensors->len; k++) {
    SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
    if (!t->elem_known)
      sim_tensor_set_elem(t, e);
  }
}

static void
default_elements(SimWorkload *w, guint e)
{
  default_elements_of(w->embed, e);
  default_elements_of(w->head, e);
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    default_elements_of(sim_workload_layer(w, i), e);
}

/* Each group's gradients (what data parallelism reduces) and, under
 * set-to-none, what its backward allocates when it reaches them.  A tied
 * lm_head's gradient is the embedding's, first written by the head's
 * backward. */
static void
set_grads(SimWorkload *w, const SimTransformer *c, guint e)
{
  Parameters p = parameters_of(c);
  guint64 tied = c->tied_embeddings ? c->vocab * c->hidden / c->tp : 0;
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    sim_workload_layer(w, i)->reduce_bytes = layer_params(c, &p, i) * e;
  w->head->reduce_bytes = (p.head + tied) * e;
  w->embed->reduce_bytes = (p.embed - tied) * e;
  if (c->grads_kept)
    return;
  for (guint i = 0; i < sim_workload_n_layers(w); i++)
    sim_workload_layer(w, i)->grad_bytes = layer_params(c, &p, i) * e;
  w->head->grad_bytes = w->head->reduce_bytes;
  w->embed->grad_bytes = w->embed->reduce_bytes;
}

SimWorkload *
sim_transformer_build(const SimTransformer *c, const SimDevice *dev, const char *name, GError **error)
{
  if (!sim_transformer_validate(c, NULL, error))
    return NULL;
  if (!(dev->matmul_flops > 0) || !(dev->hbm_bandwidth > 0)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "[device] matmul_tflops and hbm_bandwidth: both are needed to time a generated transformer");
    return NULL;
  }
  Checked k = { FALSE };
  Geometry g = {
    .rows = mul(&k, c->batch, c->seq),
    .e = sim_dtype_bytes(c->dtype),
    .h = c->hidden,
    .qd = (guint64)c->heads * c->head_dim,
    .kvd = (guint64)c->kv_heads * c->head_dim,
    .f = c->ffn,
    .t = c->tp,
    .sr = c->sp ? c->tp : 1,
  };
  g.scores = mul(&k, mul3(&k, c->batch, c->heads, c->seq), c->seq) / c->tp;

  g_autoptr(SimWorkload) w = sim_workload_new(name, c->layers);
  for (guint i = 0; i < c->layers; i++) {
    SimLayer *layer = sim_workload_layer(w, i);
    if (c->hf_ops)
      hf_layer(layer, i, c, &g, &k);
    else
      fused_layer(layer, i, c, &g, &k);
    layer_input(layer, &g, &k);
  }
  build_embed(sim_workload_add_embed(w), c, &g, &k);
  build_head(sim_workload_add_head(w), c, &g, &k);
  /* The largest transients, which the ops' spans hold: the logits and their
   * fp32 copy (N x V x (e + 4)), HF's two fp32 N x V loss gradients, the
   * embedding's dense table gradient, checked here since spans are not
   * (transformer_ops.c multiplies unchecked below these). */
  guint64 logits = mul(&k, g.rows, c->vocab);
  (void)mul3(&k, logits, 2, 4 + g.e);
  (void)mul3(&k, c->vocab, g.h, g.e);
  default_elements(w, (guint)g.e);

  guint64 p = sim_transformer_parameters(c);
  guint e = sim_dtype_bytes(c->dtype);
  /* Weights, then gradients (static when kept), AdamW's two fp32 moments,
   * fp32 master weights beside 16-bit ones (sim/model/sharding.h), counted
   * per parameter so that data-parallel sharding can divide them. */
  sim_param_bytes_set(&w->param_bytes, e, c->grads_kept, c->adamw, c->master_weights);
  w->optimizer_kernels = (guint8)c->optimizer_kernels;
  w->clip_grad = c->clip_grad != FALSE;
  w->optimizer_bandwidth = dev->hbm_bandwidth;
  guint64 per_param = w->param_bytes.weight + w->param_bytes.grad + w->param_bytes.state;
  w->static_bytes = mul(&k, p, per_param);
  /* Each layer's share, for pipeline stages (a tied embedding's weights
   * count with the embedding only). */
  Parameters parts = parameters_of(c);
  for (guint i = 0; i < c->layers; i++) {
    SimLayer *layer = sim_workload_layer(w, i);
    layer->static_bytes = mul(&k, layer_params(c, &parts, i), per_param);
    layer->params = layer_params(c, &parts, i);
    layer->param_tensors = layer_tensors(c, &parts, i);
  }
  w->embed->static_bytes = mul(&k, parts.embed, per_param);
  w->embed->params = parts.embed;
  w->embed->param_tensors = parts.embed_tensors;
  w->head->static_bytes = mul(&k, parts.head, per_param);
  w->head->params = parts.head;
  w->head->param_tensors = parts.head_tensors;
  set_grads(w, c, e);
  if (!k.overflow && !sim_transformer_ops_attach(w, c, dev, error))
    return NULL;
  w->launch = dev->launch_overhead;
  w->tp = c->tp;
  w->ep = MAX(c->ep, 1);
  w->time_model = sim_time_model_names[sim_device_time_model(dev)];
  /* HF's forward keeps eager attention's 4D causal mask (batch x 1 x seq x
   * seq, the dtype's minimum where masked) and gpt2's token and position
   * embeddings (its locals) until the loss. */
  if (c->hf_ops) {
    guint64 mask = c->attention == SIM_ATTENTION_EAGER ? mul3(&k, c->batch, c->seq, c->seq) * g.e : 0;
    guint64 embeds = c->layernorm ? mul3(&k, g.rows, g.h, g.e) + mul3(&k, c->seq, g.h, g.e) : 0;
    w->forward_bytes = mask + embeds;
  }
  /* The logits of the output object, in the activation dtype. */
  w->held_bytes = c->outputs_held ? mul3(&k, g.rows, c->vocab, g.e) / g.t : 0;
  if (k.overflow || !sim_workload_bytes_fit(w)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "the model's memory adds up to more than 4 EiB");
    return NULL;
  }
  return g_steal_pointer(&w);
}

void
sim_transformer_format_ini(const SimTransformer *c, GString *out)
{
  /* The order `offsim model` has always written; positions only when the
   * model has learned position embeddings. */
  static const SimKeyId order[] = {
    SIM_KEY_TRANSFORMER_HIDDEN, SIM_KEY_TRANSFORMER_LAYERS, SIM_KEY_TRANSFORMER_HEADS,
    SIM_KEY_TRANSFORMER_KV_HEADS, SIM_KEY_TRANSFORMER_HEAD_DIM, SIM_KEY_TRANSFORMER_FFN,
    SIM_KEY_TRANSFORMER_VOCAB, SIM_KEY_TRANSFORMER_POSITIONS, SIM_KEY_TRANSFORMER_NORM,
    SIM_KEY_TRANSFORMER_MLP, SIM_KEY_TRANSFORMER_TIED_EMBEDDINGS, SIM_KEY_TRANSFORMER_QKV_BIAS,
    SIM_KEY_TRANSFORMER_LINEAR_BIAS, SIM_KEY_TRANSFORMER_BATCH, SIM_KEY_TRANSFORMER_SEQ,
    SIM_KEY_TRANSFORMER_DTYPE, SIM_KEY_TRANSFORMER_ATTENTION, SIM_KEY_TRANSFORMER_DROPOUT,
    SIM_KEY_TRANSFORMER_TP, SIM_KEY_TRANSFORMER_SP, SIM_KEY_TRANSFORMER_OPTIMIZER,
    SIM_KEY_TRANSFORMER_MASTER_WEIGHTS,
  };
  g_string_append(out, "[transformer]\n");
  for (guint i = 0; i < G_N_ELEMENTS(order); i++)
    if (order[i] != SIM_KEY_TRANSFORMER_POSITIONS || c->max_positions)
      sim_schema_format(order[i], c, out);
  /* Latent attention's keys only with it. */
  if (c->kv_lora_rank) {
    sim_schema_format(SIM_KEY_TRANSFORMER_Q_LORA_RANK, c, out);
    sim_schema_format(SIM_KEY_TRANSFORMER_KV_LORA_RANK, c, out);
    sim_schema_format(SIM_KEY_TRANSFORMER_QK_ROPE_DIM, c, out);
    sim_schema_format(SIM_KEY_TRANSFORMER_V_HEAD_DIM, c, out);
  }
  /* A mixture of experts' keys only with experts: dense files stay as they were. */
  if (c->qk_norm)
    sim_schema_format(SIM_KEY_TRANSFORMER_QK_NORM, c, out);
  if (c->experts) {
    static const SimKeyId moe[] = {
      SIM_KEY_TRANSFORMER_EXPERTS, SIM_KEY_TRANSFORMER_TOP_K, SIM_KEY_TRANSFORMER_MOE_FFN,
      SIM_KEY_TRANSFORMER_SHARED_FFN, SIM_KEY_TRANSFORMER_SHARED_GATE, SIM_KEY_TRANSFORMER_DENSE_LAYERS,
      SIM_KEY_TRANSFORMER_SPARSE_STEP, SIM_KEY_TRANSFORMER_NORM_TOPK, SIM_KEY_TRANSFORMER_EXPERT_IMBALANCE,
      SIM_KEY_TRANSFORMER_CAPACITY_FACTOR,
    };
    for (guint i = 0; i < G_N_ELEMENTS(moe); i++)
      sim_schema_format(moe[i], c, out);
  }
  /* What only ops = hf reads, only with it: ops = fused files stay as they were. */
  if (c->hf_ops) {
    sim_schema_format(SIM_KEY_TRANSFORMER_OPS, c, out);
    sim_schema_format(SIM_KEY_TRANSFORMER_HIDDEN_ACT, c, out);
    sim_schema_format(SIM_KEY_TRANSFORMER_GRADS, c, out);
    sim_schema_format(SIM_KEY_TRANSFORMER_OUTPUTS, c, out);
  }
}
