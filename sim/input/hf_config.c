#include "input/hf_config.h"

#include "base/error.h"
#include "input/config.h"
#include "input/schema.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  const char *origin;
  JsonObject *root;
  GError **error;
} Reader;

/* A field's value node and its type; NULL (type G_TYPE_INVALID) when the
 * field is absent or null, which every reader treats as "use the default".
 * Objects and arrays have type G_TYPE_NONE, which no reader accepts. */
static JsonNode *
field_value(Reader *r, const char *field, GType *type)
{
  JsonNode *node = json_object_get_member(r->root, field);
  if (node == NULL || JSON_NODE_HOLDS_NULL(node)) {
    *type = G_TYPE_INVALID;
    return NULL;
  }
  *type = JSON_NODE_HOLDS_VALUE(node) ? json_node_get_value_type(node) : G_TYPE_NONE;
  return node;
}

/* "origin: field 'name': expected ..." */
static gboolean
wrong_field(Reader *r, const char *field, const char *expected)
{
  g_set_error(r->error, SIM_ERROR, SIM_ERROR_INPUT, "%s: field '%s': expected %s", r->origin, field, expected);
  return FALSE;
}

/* An integer field in [1, max], where max is the range of the [transformer]
 * key `id` it sets (one validation for both ways in); absent fields fall
 * back to `fallback` when it is not 0, and are an error otherwise. */
static gboolean
read_uint(Reader *r, const char *field, SimKeyId id, guint64 fallback, guint64 *out)
{
  guint64 max = sim_schema_key(id)->max;
  GType type;
  JsonNode *node = field_value(r, field, &type);
  if (node == NULL) {
    if (fallback) {
      *out = fallback;
      return TRUE;
    }
    g_set_error(r->error, SIM_ERROR, SIM_ERROR_INPUT, "%s: missing field '%s' (expected a positive integer)",
                r->origin, field);
    return FALSE;
  }
  if (type != G_TYPE_INT64 || json_node_get_int(node) < 1 || (guint64)json_node_get_int(node) > max) {
    g_autofree char *range = g_strdup_printf("an integer from 1 to %" G_GUINT64_FORMAT, max);
    return wrong_field(r, field, range);
  }
  *out = (guint64)json_node_get_int(node);
  return TRUE;
}

static gboolean
read_bool(Reader *r, const char *field, gboolean fallback, gboolean *out)
{
  GType type;
  JsonNode *node = field_value(r, field, &type);
  if (node == NULL) {
    *out = fallback;
    return TRUE;
  }
  if (type != G_TYPE_BOOLEAN)
    return wrong_field(r, field, "true or false");
  *out = json_node_get_boolean(node);
  return TRUE;
}

static gboolean
read_probability(Reader *r, const char *field, double fallback, double *out)
{
  GType type;
  JsonNode *node = field_value(r, field, &type);
  if (node == NULL) {
    *out = fallback;
    return TRUE;
  }
  double v = type == G_TYPE_DOUBLE ? json_node_get_double(node) : type == G_TYPE_INT64 ? (double)json_node_get_int(node) : -1;
  if (!(v >= 0 && v < 1))
    return wrong_field(r, field, "a probability in [0, 1)");
  *out = v;
  return TRUE;
}

/* The MLP activation (`field`: hidden_act, or activation_function for
 * gpt2), one of the [transformer] hidden_act key's names. */
static gboolean
read_activation(Reader *r, const char *field, const char *fallback, SimTransformer *c)
{
  GType type;
  JsonNode *node = field_value(r, field, &type);
  const char *name = node == NULL ? fallback : type == G_TYPE_STRING ? json_node_get_string(node) : NULL;
  if (name && sim_schema_parse(SIM_KEY_TRANSFORMER_HIDDEN_ACT, name, c, NULL))
    return TRUE;
  g_autofree char *expected = g_strjoinv(", ", (char **)sim_activation_names);
  g_autofree char *what = g_strdup_printf("one of %s", expected);
  return wrong_field(r, field, what);
}

/* llama's head_dim: the field, or hidden_size // num_attention_heads as
 * HuggingFace derives it (0 when heads exceed hidden, which the shared
 * check refuses). */
static gboolean
read_head_dim(Reader *r, guint64 hidden, guint64 heads, guint64 *out)
{
  GType type;
  if (field_value(r, "head_dim", &type) == NULL) {
    *out = hidden / heads;
    return TRUE;
  }
  return read_uint(r, "head_dim", SIM_KEY_TRANSFORMER_HEAD_DIM, 0, out);
}

/* The model families offsim reads, one row each: the model_type, the
 * layout of its modeling code (which reader takes its fields, which field
 * names its messages use, which op lists sim/input/transformer_ops.c
 * builds: llama-like or gpt2), and what sets its QKV bias and its sliding
 * window.  Adding a family of an existing layout is one row here: the
 * messages, `offsim model --help` and the README check
 * (tests/test_schema.c) list the families from it. */
#define LAYOUT_LLAMA SIM_HF_LAYOUT_LLAMA
#define LAYOUT_GPT2 SIM_HF_LAYOUT_GPT2
typedef SimHfLayout Layout;

/* What each layout's modeling code is in [transformer] keys: a group
 * written by hand with ops = hf must be one of these. */
static const struct {
  gboolean layernorm, gelu, learned_positions;
} layouts[SIM_HF_LAYOUT_COUNT] = {
  [LAYOUT_LLAMA] = { FALSE, FALSE, FALSE },
  [LAYOUT_GPT2] = { TRUE, TRUE, TRUE },
};

typedef enum {
  BIAS_FIELD,  /* attention_bias, default false */
  BIAS_ALWAYS, /* q, k and v biases whatever the file says (qwen2) */
} Bias;

typedef enum {
  WINDOW_NONE,   /* no sliding window */
  WINDOW_ALWAYS, /* sliding_window, absent: 4096, null: none (mistral) */
  WINDOW_FLAG,   /* the same when use_sliding_window is true (qwen2) */
  WINDOW_FIELD,  /* sliding_window, absent or null: none (mixtral) */
} Window;

/* Where a mixture of experts' fields are (HF's configuration_*.py). */
typedef enum {
  MOE_NONE,
  MOE_QWEN,    /* num_experts, moe_intermediate_size, norm_topk_prob (default false),
                * decoder_sparse_step, mlp_only_layers; qwen2_moe's shared expert
                * (shared_expert_intermediate_size, with its sigmoid gate) */
  MOE_MIXTRAL, /* num_local_experts; intermediate_size is each expert's; always renormalised */
  MOE_DEEPSEEK, /* n_routed_experts, moe_intermediate_size, n_shared_experts (of moe_intermediate_size
                 * each, no gate), first_k_dense_replace, norm_topk_prob (default true), moe_layer_freq 1 */
} Moe;

typedef struct {
  const char *model_type;
  Layout layout;
  Bias bias;
  Window window;
  Moe moe;
  gboolean qk_norm; /* RMSNorm on each head's q and k (qwen3) */
  gboolean shared;  /* a gated shared expert (qwen2_moe) */
  gboolean mla;     /* multi-head latent attention (deepseek_v3) */
} Family;

static const Family families[] = {
  { "llama", LAYOUT_LLAMA, BIAS_FIELD, WINDOW_NONE, MOE_NONE, FALSE, FALSE, FALSE },
  { "qwen2", LAYOUT_LLAMA, BIAS_ALWAYS, WINDOW_FLAG, MOE_NONE, FALSE, FALSE, FALSE },
  { "mistral", LAYOUT_LLAMA, BIAS_FIELD, WINDOW_ALWAYS, MOE_NONE, FALSE, FALSE, FALSE },
  { "gpt2", LAYOUT_GPT2, BIAS_FIELD, WINDOW_NONE, MOE_NONE, FALSE, FALSE, FALSE },
  { "mixtral", LAYOUT_LLAMA, BIAS_FIELD, WINDOW_FIELD, MOE_MIXTRAL, FALSE, FALSE, FALSE },
  { "qwen2_moe", LAYOUT_LLAMA, BIAS_ALWAYS, WINDOW_FLAG, MOE_QWEN, FALSE, TRUE, FALSE },
  { "qwen3_moe", LAYOUT_LLAMA, BIAS_FIELD, WINDOW_FLAG, MOE_QWEN, TRUE, FALSE, FALSE },
  { "deepseek_v3", LAYOUT_LLAMA, BIAS_FIELD, WINDOW_NONE, MOE_DEEPSEEK, FALSE, FALSE, TRUE },
};

static const Family *
family_of(const char *model_type)
{
  for (guint i = 0; i < G_N_ELEMENTS(families); i++)
    if (strcmp(families[i].model_type, model_type) == 0)
      return &families[i];
  return NULL;
}

gboolean
sim_hf_config_layout_of(const SimTransformer *c, SimHfLayout *layout)
{
  for (guint i = 0; i < SIM_HF_LAYOUT_COUNT; i++)
    if (layouts[i].layernorm == c->layernorm && layouts[i].gelu == c->gelu &&
        layouts[i].learned_positions == (c->max_positions > 0)) {
      *layout = (SimHfLayout)i;
      return TRUE;
    }
  return FALSE;
}

static gboolean
family_in(const Family *f, SimHfFamilies which)
{
  gboolean extra = f->moe != MOE_NONE || f->qk_norm || f->mla;
  switch (which) {
  case SIM_HF_FAMILIES_ALL:
    return TRUE;
  case SIM_HF_FAMILIES_LLAMA_DENSE:
    return f->layout == LAYOUT_LLAMA && !extra;
  case SIM_HF_FAMILIES_LLAMA_EXTRA:
    return f->layout == LAYOUT_LLAMA && extra;
  case SIM_HF_FAMILIES_GPT2:
    return f->layout == LAYOUT_GPT2;
  }
  g_assert_not_reached();
}

char *
sim_hf_config_family_names(SimHfFamilies which, gboolean or_last)
{
  guint n = 0, k = 0;
  for (guint i = 0; i < G_N_ELEMENTS(families); i++)
    n += family_in(&families[i], which);
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < G_N_ELEMENTS(families); i++) {
    if (!family_in(&families[i], which))
      continue;
    if (or_last)
      sim_error_append_choice(out, families[i].model_type, k, n, "or");
    else
      g_string_append_printf(out, "%s%s", k ? ", " : "", families[i].model_type);
    k++;
  }
  return g_string_free(out, FALSE);
}

/* A count field that may be absent or 0 (both 0), else within key `id`'s range. */
static gboolean
read_count0(Reader *r, const char *field, SimKeyId id, guint64 *out)
{
  GType type;
  JsonNode *node = field_value(r, field, &type);
  if (node == NULL || (type == G_TYPE_INT64 && json_node_get_int(node) == 0)) {
    *out = 0;
    return TRUE;
  }
  return read_uint(r, field, id, 0, out);
}

/* A mixture of experts' fields (family->moe).  Qwen's mlp_only_layers, a
 * list of layers kept dense, must be empty: offsim's layers are dense by
 * dense_layers and sparse_step only. */
static gboolean
load_moe(Reader *r, const Family *family, guint64 ffn, SimTransformer *c)
{
  guint64 experts, top_k, moe_ffn, shared = 0, step = 1, dense = 0;
  gboolean norm = TRUE;
  gboolean qwen = family->moe == MOE_QWEN, deepseek = family->moe == MOE_DEEPSEEK;
  const char *count = qwen ? "num_experts" : deepseek ? "n_routed_experts" : "num_local_experts";
  if (!read_uint(r, count, SIM_KEY_TRANSFORMER_EXPERTS, 0, &experts) ||
      !read_uint(r, "num_experts_per_tok", SIM_KEY_TRANSFORMER_TOP_K, 0, &top_k))
    return FALSE;
  moe_ffn = ffn;
  if (deepseek) {
    /* HF's DeepseekV3 layer is MoE when layer >= first_k_dense_replace and
     * layer % moe_layer_freq == 0: offsim's sparse_step counts (layer + 1),
     * the same only at 1. */
    guint64 shared_experts, freq;
    if (!read_uint(r, "moe_intermediate_size", SIM_KEY_TRANSFORMER_MOE_FFN, 0, &moe_ffn) ||
        !read_bool(r, "norm_topk_prob", TRUE, &norm) ||
        !read_count0(r, "n_shared_experts", SIM_KEY_TRANSFORMER_SHARED_FFN, &shared_experts) ||
        !read_count0(r, "first_k_dense_replace", SIM_KEY_TRANSFORMER_DENSE_LAYERS, &dense) ||
        !read_uint(r, "moe_layer_freq", SIM_KEY_TRANSFORMER_SPARSE_STEP, 1, &freq))
      return FALSE;
    if (freq != 1)
      return wrong_field(r, "moe_layer_freq", "1 (every layer past first_k_dense_replace an MoE layer)");
    shared = shared_experts * moe_ffn;
  }
  if (qwen) {
    if (!read_uint(r, "moe_intermediate_size", SIM_KEY_TRANSFORMER_MOE_FFN, 0, &moe_ffn) ||
        !read_bool(r, "norm_topk_prob", FALSE, &norm) ||
        !read_uint(r, "decoder_sparse_step", SIM_KEY_TRANSFORMER_SPARSE_STEP, 1, &step))
      return FALSE;
    if (family->shared && !read_count0(r, "shared_expert_intermediate_size", SIM_KEY_TRANSFORMER_SHARED_FFN, &shared))
      return FALSE;
    JsonNode *only = json_object_get_member(r->root, "mlp_only_layers");
    if (only && !JSON_NODE_HOLDS_NULL(only) &&
        (!JSON_NODE_HOLDS_ARRAY(only) || json_array_get_length(json_node_get_array(only)) != 0))
      return wrong_field(r, "mlp_only_layers", "an empty list (offsim places dense layers by decoder_sparse_step "
                         "only)");
  }
  c->experts = (guint)experts;
  c->top_k = (guint)top_k;
  c->moe_ffn = (guint)moe_ffn;
  c->shared_ffn = (guint)shared;
  c->shared_gate = shared > 0 && family->shared;
  c->dense_layers = (guint)dense;
  c->sparse_step = (guint)step;
  c->norm_topk = norm;
  return TRUE;
}

/* DeepSeek's multi-head latent attention: q_lora_rank (null: none),
 * kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim; q's and
 * k's head dim is qk_nope_head_dim + qk_rope_head_dim. */
static gboolean
load_mla(Reader *r, SimTransformer *c, guint64 *head_dim)
{
  guint64 q_lora, kv_lora, rope, nope, v;
  if (!read_count0(r, "q_lora_rank", SIM_KEY_TRANSFORMER_Q_LORA_RANK, &q_lora) ||
      !read_uint(r, "kv_lora_rank", SIM_KEY_TRANSFORMER_KV_LORA_RANK, 0, &kv_lora) ||
      !read_uint(r, "qk_rope_head_dim", SIM_KEY_TRANSFORMER_QK_ROPE_DIM, 0, &rope) ||
      !read_uint(r, "qk_nope_head_dim", SIM_KEY_TRANSFORMER_HEAD_DIM, 0, &nope) ||
      !read_uint(r, "v_head_dim", SIM_KEY_TRANSFORMER_V_HEAD_DIM, 0, &v))
    return FALSE;
  c->q_lora_rank = (guint)q_lora;
  c->kv_lora_rank = (guint)kv_lora;
  c->qk_rope_dim = (guint)rope;
  c->v_head_dim = (guint)v;
  *head_dim = nope + rope;
  return TRUE;
}

/* The llama layout's fields (llama, qwen2, mistral, and the MoE families on it). */
static gboolean
load_llama_like(Reader *r, const Family *family, SimTransformer *c)
{
  guint64 hidden, layers, heads, kv, head_dim, ffn, vocab;
  gboolean tied, bias = FALSE;
  if (!read_uint(r, "hidden_size", SIM_KEY_TRANSFORMER_HIDDEN, 0, &hidden) ||
      !read_uint(r, "num_hidden_layers", SIM_KEY_TRANSFORMER_LAYERS, 0, &layers) ||
      !read_uint(r, "num_attention_heads", SIM_KEY_TRANSFORMER_HEADS, 0, &heads) ||
      !read_uint(r, "num_key_value_heads", SIM_KEY_TRANSFORMER_KV_HEADS, heads, &kv) ||
      !read_head_dim(r, hidden, heads, &head_dim) ||
      !read_uint(r, "intermediate_size", SIM_KEY_TRANSFORMER_FFN, 0, &ffn) ||
      !read_uint(r, "vocab_size", SIM_KEY_TRANSFORMER_VOCAB, 0, &vocab) ||
      !read_bool(r, "tie_word_embeddings", FALSE, &tied))
    return FALSE;
  if (family->bias == BIAS_ALWAYS)
    bias = TRUE;
  else if (!read_bool(r, "attention_bias", FALSE, &bias))
    return FALSE;
  double dropout;
  if (!read_probability(r, "attention_dropout", 0, &dropout) || !read_activation(r, "hidden_act", "silu", c))
    return FALSE;
  /* A sliding window (mistral; qwen2 with use_sliding_window) makes HF's SDPA
   * path pass a mask.  Absent: the configs' default, 4096; null: none. */
  guint64 window = 0;
  gboolean windowed = family->window == WINDOW_ALWAYS || family->window == WINDOW_FIELD;
  if (family->window == WINDOW_FLAG && !read_bool(r, "use_sliding_window", FALSE, &windowed))
    return FALSE;
  if (windowed) {
    JsonNode *node = json_object_get_member(r->root, "sliding_window");
    if (node == NULL)
      window = family->window == WINDOW_FIELD ? 0 : 4096;
    else if (!JSON_NODE_HOLDS_NULL(node) && !read_uint(r, "sliding_window", SIM_KEY_TRANSFORMER_SEQ, 0, &window))
      return FALSE;
  }
  c->sliding_window = (guint)window;
  c->experts = c->top_k = c->moe_ffn = c->shared_ffn = c->dense_layers = 0;
  c->sparse_step = 1;
  c->shared_gate = c->norm_topk = FALSE;
  c->qk_norm = family->qk_norm;
  c->q_lora_rank = c->kv_lora_rank = c->qk_rope_dim = c->v_head_dim = 0;
  if (family->moe != MOE_NONE && !load_moe(r, family, ffn, c))
    return FALSE;
  if (family->mla && !load_mla(r, c, &head_dim))
    return FALSE;
  c->hidden = (guint)hidden;
  c->layers = (guint)layers;
  c->heads = (guint)heads;
  c->kv_heads = (guint)kv;
  c->head_dim = (guint)head_dim;
  c->ffn = (guint)ffn;
  c->vocab = vocab;
  c->tied_embeddings = tied;
  c->qkv_bias = bias;
  c->linear_bias = FALSE;
  c->max_positions = 0;
  c->layernorm = FALSE;
  c->gelu = FALSE;
  c->dropout = dropout;
  return TRUE;
}

/* The gpt2 layout's fields. */
static gboolean
load_gpt2(Reader *r, const Family *family, SimTransformer *c)
{
  (void)family;
  guint64 hidden, layers, heads, vocab, positions, inner;
  double dropout, attn, embd;
  if (!read_uint(r, "n_embd", SIM_KEY_TRANSFORMER_HIDDEN, 0, &hidden) ||
      !read_uint(r, "n_layer", SIM_KEY_TRANSFORMER_LAYERS, 0, &layers) ||
      !read_uint(r, "n_head", SIM_KEY_TRANSFORMER_HEADS, 0, &heads) ||
      !read_uint(r, "vocab_size", SIM_KEY_TRANSFORMER_VOCAB, 0, &vocab) ||
      !read_uint(r, "n_positions", SIM_KEY_TRANSFORMER_POSITIONS, 0, &positions) ||
      !read_uint(r, "n_inner", SIM_KEY_TRANSFORMER_FFN, 4 * hidden, &inner) ||
      !read_probability(r, "resid_pdrop", 0.1, &dropout) || !read_probability(r, "attn_pdrop", 0.1, &attn) ||
      !read_probability(r, "embd_pdrop", 0.1, &embd) || !read_activation(r, "activation_function", "gelu_new", c))
    return FALSE;
  /* One dropout key stands for the three: what is saved (masks or none) must not depend on which. */
  if ((attn > 0) != (dropout > 0) || (embd > 0) != (dropout > 0)) {
    g_set_error(r->error, SIM_ERROR, SIM_ERROR_INPUT, "%s: fields 'resid_pdrop', 'attn_pdrop' and 'embd_pdrop': "
                "expected all 0 or all above 0 (one [transformer] dropout stands for the three)", r->origin);
    return FALSE;
  }
  /* GPT-2 has no head_dim field: its heads split n_embd evenly. */
  if (hidden % heads != 0) {
    g_set_error(r->error, SIM_ERROR, SIM_ERROR_INPUT, "%s: field 'n_head': %" G_GUINT64_FORMAT
                " does not divide n_embd (%" G_GUINT64_FORMAT ")", r->origin, heads, hidden);
    return FALSE;
  }
  c->hidden = (guint)hidden;
  c->layers = (guint)layers;
  c->heads = c->kv_heads = (guint)heads;
  c->head_dim = (guint)(hidden / heads);
  c->ffn = (guint)inner;
  c->vocab = vocab;
  c->max_positions = (guint)positions;
  c->tied_embeddings = TRUE;
  c->qkv_bias = TRUE;
  c->linear_bias = TRUE;
  c->layernorm = TRUE;
  c->gelu = TRUE;
  c->sliding_window = 0;
  c->dropout = dropout;
  c->experts = c->top_k = c->moe_ffn = c->shared_ffn = c->dense_layers = 0;
  c->sparse_step = 1;
  c->shared_gate = c->norm_topk = c->qk_norm = FALSE;
  c->q_lora_rank = c->kv_lora_rank = c->qk_rope_dim = c->v_head_dim = 0;
  return TRUE;
}

void
sim_hf_config_field_names(gboolean gpt2, const char *names[SIM_KEY_COUNT])
{
  for (guint i = 0; i < SIM_KEY_COUNT; i++)
    names[i] = NULL;
  if (gpt2) {
    names[SIM_KEY_TRANSFORMER_HIDDEN] = "field 'n_embd'";
    names[SIM_KEY_TRANSFORMER_LAYERS] = "field 'n_layer'";
    names[SIM_KEY_TRANSFORMER_HEADS] = "field 'n_head'";
    names[SIM_KEY_TRANSFORMER_POSITIONS] = "field 'n_positions'";
    names[SIM_KEY_TRANSFORMER_DROPOUT] = "field 'resid_pdrop'";
  } else {
    names[SIM_KEY_TRANSFORMER_HIDDEN] = "field 'hidden_size'";
    names[SIM_KEY_TRANSFORMER_LAYERS] = "field 'num_hidden_layers'";
    names[SIM_KEY_TRANSFORMER_HEADS] = "field 'num_attention_heads'";
    names[SIM_KEY_TRANSFORMER_FFN] = "field 'intermediate_size'";
    names[SIM_KEY_TRANSFORMER_DROPOUT] = "field 'attention_dropout'";
  }
  names[SIM_KEY_TRANSFORMER_VOCAB] = "field 'vocab_size'";
}

/* What the shared check (sim_transformer_validate_shape) calls each key:
 * the field of this file that sets it, or how it was derived. */
static void
field_names(Reader *r, gboolean gpt2, const char *names[SIM_KEY_COUNT])
{
  GType type;
  sim_hf_config_field_names(gpt2, names);
  if (gpt2) {
    names[SIM_KEY_TRANSFORMER_KV_HEADS] = "field 'n_head'";
    names[SIM_KEY_TRANSFORMER_HEAD_DIM] = "head_dim (n_embd / n_head)";
    names[SIM_KEY_TRANSFORMER_FFN] = field_value(r, "n_inner", &type) ? "field 'n_inner'" : "n_inner (4 x n_embd)";
  } else {
    names[SIM_KEY_TRANSFORMER_KV_HEADS] = field_value(r, "num_key_value_heads", &type) ? "field 'num_key_value_heads'"
                                                                                        : "field 'num_attention_heads'";
    names[SIM_KEY_TRANSFORMER_HEAD_DIM] =
      field_value(r, "head_dim", &type) ? "field 'head_dim'" : "head_dim (hidden_size / num_attention_heads)";
    names[SIM_KEY_TRANSFORMER_EXPERTS] = field_value(r, "num_local_experts", &type)  ? "field 'num_local_experts'"
                                         : field_value(r, "n_routed_experts", &type) ? "field 'n_routed_experts'"
                                                                                     : "field 'num_experts'";
    names[SIM_KEY_TRANSFORMER_DENSE_LAYERS] = "field 'first_k_dense_replace'";
    names[SIM_KEY_TRANSFORMER_Q_LORA_RANK] = "field 'q_lora_rank'";
    names[SIM_KEY_TRANSFORMER_KV_LORA_RANK] = "field 'kv_lora_rank'";
    names[SIM_KEY_TRANSFORMER_QK_ROPE_DIM] = "field 'qk_rope_head_dim'";
    names[SIM_KEY_TRANSFORMER_V_HEAD_DIM] = "field 'v_head_dim'";
    if (field_value(r, "kv_lora_rank", &type))
      names[SIM_KEY_TRANSFORMER_HEAD_DIM] = "head_dim (qk_nope_head_dim + qk_rope_head_dim)";
    names[SIM_KEY_TRANSFORMER_TOP_K] = "field 'num_experts_per_tok'";
    names[SIM_KEY_TRANSFORMER_MOE_FFN] = field_value(r, "moe_intermediate_size", &type)
                                           ? "field 'moe_intermediate_size'" : "field 'intermediate_size'";
    names[SIM_KEY_TRANSFORMER_SHARED_FFN] = "field 'shared_expert_intermediate_size'";
    names[SIM_KEY_TRANSFORMER_SPARSE_STEP] = "field 'decoder_sparse_step'";
  }
}

/* json-glib's parser recurses once per nesting level, so a file of 100,000
 * '[' overflows the stack: count the depth first, over the bytes, outside
 * strings (honouring backslash escapes).  Unbalanced brackets are left to
 * the parser to report. */
static gboolean
check_depth(const char *data, gsize length, const char *origin, GError **error)
{
  guint depth = 0, line = 1;
  gboolean in_string = FALSE;
  for (gsize i = 0; i < length; i++) {
    char ch = data[i];
    if (ch == '\n')
      line++;
    if (in_string) {
      if (ch == '\\')
        i++; /* the escaped byte cannot end the string (a newline there is the parser's error) */
      else if (ch == '"')
        in_string = FALSE;
    } else if (ch == '"') {
      in_string = TRUE;
    } else if (ch == '[' || ch == '{') {
      if (++depth > SIM_HF_CONFIG_MAX_DEPTH) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                    "%s:%u: objects and arrays nest deeper than %d levels (a config.json needs a few)", origin, line,
                    SIM_HF_CONFIG_MAX_DEPTH);
        return FALSE;
      }
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      depth--;
    }
  }
  return TRUE;
}

/* json-glib says "<data>:LINE:COL: Parse error: WHAT": the user's file
 * instead of its internal name, and a hint when the file is not JSON at all
 * but a scenario or a profile (which start with '#' or '['). */
static void
not_json(const char *data, gsize length, const char *origin, const GError *cause, GError **error)
{
  unsigned line = 0, column = 0;
  int used = 0;
  const char *what = cause->message;
  if (sscanf(what, "<data>:%u:%u: %n", &line, &column, &used) == 2 && used > 0) {
    what += used;
    if (g_str_has_prefix(what, "Parse error: "))
      what += strlen("Parse error: ");
  }
  gsize i = 0;
  while (i < length && g_ascii_isspace(data[i]))
    i++;
  gboolean ini = i < length && (data[i] == '#' || data[i] == ';' ||
                                (data[i] == '[' && i + 1 < length && g_ascii_isalpha(data[i + 1])));
  const char *hint = ini ? " (this looks like a scenario or profile file, not a HuggingFace config.json)" : "";
  if (line > 0)
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u:%u: not valid JSON: %s%s", origin, line, column, what, hint);
  else
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: not valid JSON: %s%s", origin, what, hint);
}

gboolean
sim_hf_config_load_data(const char *data, gssize length, const char *origin, SimTransformer *c, GError **error)
{
  gsize len = length < 0 ? strlen(data) : (gsize)length;
  if (!check_depth(data, len, origin, error))
    return FALSE;
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) local = NULL;
  if (!json_parser_load_from_data(parser, data, (gssize)len, &local)) {
    not_json(data, len, origin, local, error);
    return FALSE;
  }
  JsonNode *root = json_parser_get_root(parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected a JSON object", origin);
    return FALSE;
  }
  Reader r = { origin, json_node_get_object(root), error };
  JsonNode *type_node = json_object_get_member(r.root, "model_type");
  const char *type = type_node && JSON_NODE_HOLDS_VALUE(type_node) && json_node_get_value_type(type_node) == G_TYPE_STRING
                       ? json_node_get_string(type_node)
                       : NULL;
  if (type == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: missing field 'model_type' (expected a string)", origin);
    return FALSE;
  }
  const Family *family = family_of(type);
  if (family == NULL) {
    g_autofree char *expected = sim_hf_config_family_names(SIM_HF_FAMILIES_ALL, TRUE);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: field 'model_type': '%s' is not supported (expected %s)",
                origin, type, expected);
    return FALSE;
  }
  /* Each layout's reader of its fields. */
  static gboolean (*const readers[])(Reader *, const Family *, SimTransformer *) = {
    [LAYOUT_LLAMA] = load_llama_like,
    [LAYOUT_GPT2] = load_gpt2,
  };
  gboolean gpt2 = family->layout == LAYOUT_GPT2;
  SimTransformer shape = *c;
  if (!readers[family->layout](&r, family, &shape))
    return FALSE;
  /* The check a [transformer] group gets, in this file's words. */
  const char *names[SIM_KEY_COUNT];
  field_names(&r, gpt2, names);
  g_autoptr(GError) invalid = NULL;
  if (!sim_transformer_validate_shape(&shape, names, &invalid)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s", origin, invalid->message);
    return FALSE;
  }
  *c = shape;
  return TRUE;
}

/* The fields a config.json decides; everything else is the caller's. */
static void
apply_shape(SimTransformer *c, const SimTransformer *shape)
{
  c->hidden = shape->hidden;
  c->layers = shape->layers;
  c->heads = shape->heads;
  c->kv_heads = shape->kv_heads;
  c->head_dim = shape->head_dim;
  c->ffn = shape->ffn;
  c->vocab = shape->vocab;
  c->max_positions = shape->max_positions;
  c->layernorm = shape->layernorm;
  c->gelu = shape->gelu;
  c->hidden_act = shape->hidden_act;
  c->sliding_window = shape->sliding_window;
  c->dropout = shape->dropout;
  c->tied_embeddings = shape->tied_embeddings;
  c->qkv_bias = shape->qkv_bias;
  c->linear_bias = shape->linear_bias;
  c->experts = shape->experts;
  c->top_k = shape->top_k;
  c->moe_ffn = shape->moe_ffn;
  c->shared_ffn = shape->shared_ffn;
  c->shared_gate = shape->shared_gate;
  c->dense_layers = shape->dense_layers;
  c->sparse_step = shape->sparse_step;
  c->norm_topk = shape->norm_topk;
  c->qk_norm = shape->qk_norm;
  c->q_lora_rank = shape->q_lora_rank;
  c->kv_lora_rank = shape->kv_lora_rank;
  c->qk_rope_dim = shape->qk_rope_dim;
  c->v_head_dim = shape->v_head_dim;
}

/* A sweep loads the same config.json for every point: parsed shapes are
 * cached by path, and reused while the file's size and time are unchanged. */
typedef struct {
  gint64 mtime;
  goffset size;
  SimTransformer shape;
} CacheEntry;

static GMutex cache_lock;
static GHashTable *cache; /* path -> CacheEntry */

gboolean
sim_hf_config_load(const char *path, SimTransformer *c, GError **error)
{
  GStatBuf st;
  gboolean have_stat = g_stat(path, &st) == 0 && S_ISREG(st.st_mode);
  if (have_stat) {
    g_mutex_lock(&cache_lock);
    CacheEntry *hit = cache ? g_hash_table_lookup(cache, path) : NULL;
    gboolean fresh = hit && hit->mtime == (gint64)st.st_mtime && hit->size == (goffset)st.st_size;
    if (fresh)
      apply_shape(c, &hit->shape);
    g_mutex_unlock(&cache_lock);
    if (fresh)
      return TRUE;
  }
  g_autofree char *data = NULL;
  gsize len = 0;
  if (!sim_config_read_input(path, NULL, &data, &len, error))
    return FALSE;
  SimTransformer shape = *c;
  if (!sim_hf_config_load_data(data, (gssize)len, path, &shape, error))
    return FALSE;
  apply_shape(c, &shape);
  if (have_stat) {
    CacheEntry *entry = g_new(CacheEntry, 1);
    *entry = (CacheEntry){ (gint64)st.st_mtime, (goffset)st.st_size, shape };
    g_mutex_lock(&cache_lock);
    if (cache == NULL)
      cache = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_hash_table_replace(cache, g_strdup(path), entry);
    g_mutex_unlock(&cache_lock);
  }
  return TRUE;
}
