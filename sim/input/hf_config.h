/* sim/input/hf_config.h — a HuggingFace config.json as a transformer shape.
 *
 * Reads the model_type and the shape fields of llama, qwen2, mistral and
 * gpt2 configs and of the mixtures of experts mixtral, qwen2_moe,
 * qwen3_moe and deepseek_v3 (GQA, tied embeddings, QKV bias, GPT-2's
 * learned positions and biases; experts, shared experts, dense layers,
 * q/k norms, DeepSeek's latent attention; one row per family in hf_config.c's table, each naming its
 * layout, whose op lists sim/input/transformer_ops.c builds) into a SimTransformer, leaving batch, seq, dtype and the
 * training options to the caller.  A missing or mistyped field is a
 * SIM_ERROR_INPUT naming the file and the field; an unknown model_type
 * names the ones supported.  Integer fields take the range of the
 * [transformer] key they set (sim/input/schema.c), so a config.json and a
 * scenario that spell the same model accept the same values; the shape
 * read then goes through sim_transformer_validate_shape, the check a
 * [transformer] group gets, with this file's field names in its messages.
 *
 * Nesting: json-glib's parser recurses once per level of objects and
 * arrays, so objects and arrays nested more than SIM_HF_CONFIG_MAX_DEPTH
 * deep are refused, naming the file and the line, before it parses (a
 * config.json nests two or three levels).  Parse errors name the file,
 * line and column.
 *
 * Cache: a sweep loads the same config.json for every point, so
 * sim_hf_config_load keeps each parsed shape in a process-wide table keyed
 * by path, guarded by a mutex (sweep workers load concurrently), and reuses
 * it while the file's size and modification time are unchanged.  The table
 * lives until the process exits (a few hundred bytes per distinct path);
 * sim_hf_config_load_data parses without it.
 */
#pragma once

#include "input/schema.h"
#include "input/transformer.h"

G_BEGIN_DECLS

#define SIM_HF_CONFIG_MAX_DEPTH 64


gboolean sim_hf_config_load(const char *path, SimTransformer *config, GError **error);

/* The layouts of HF's modeling code offsim follows (ops = hf): llama's
 * (RMSNorm, SwiGLU, RoPE, GQA) and gpt2's (LayerNorm, GeLU, learned
 * positions, Conv1D with biases). */
typedef enum {
  SIM_HF_LAYOUT_LLAMA,
  SIM_HF_LAYOUT_GPT2,
  SIM_HF_LAYOUT_COUNT,
} SimHfLayout;

/* The layout whose norm, MLP and positions `config` has; FALSE if none. */
gboolean sim_hf_config_layout_of(const SimTransformer *config, SimHfLayout *layout);

/* Which families a list names. */
typedef enum {
  SIM_HF_FAMILIES_ALL,
  SIM_HF_FAMILIES_LLAMA_DENSE, /* the llama layout's without experts, q/k norms or latent attention */
  SIM_HF_FAMILIES_LLAMA_EXTRA, /* the llama layout's with one of them */
  SIM_HF_FAMILIES_GPT2,
} SimHfFamilies;

/* The model_types of `which`, in the table's order, for messages and
 * --help: "a, b, c", or with `or_last` "a, b or c".  A new string. */
char *sim_hf_config_family_names(SimHfFamilies which, gboolean or_last);

/* How messages name the keys a config.json of the gpt2 layout (`gpt2`) or
 * of the llama one sets in the same field whatever the file holds
 * ("field 'num_hidden_layers'"); NULL for the others (those derived when a
 * field is absent, and the caller's). */
void sim_hf_config_field_names(gboolean gpt2, const char *names[SIM_KEY_COUNT]);
gboolean sim_hf_config_load_data(const char *data, gssize length, const char *origin, SimTransformer *config,
                                 GError **error);

G_END_DECLS
