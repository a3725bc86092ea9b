/* sim/input/hf_config.h — a HuggingFace config.json as a transformer shape.
 *
 * Reads the model_type and the shape fields of llama, qwen2, mistral and
 * gpt2 configs (GQA, tied embeddings, QKV bias, GPT-2's learned positions
 * and biases) into a SimTransformer, leaving batch, seq, dtype and the
 * training options to the caller.  A missing or mistyped field is a
 * SIM_ERROR_INPUT naming the file and the field; an unknown model_type
 * names the ones supported.
 */
#pragma once

#include "transformer.h"

G_BEGIN_DECLS

gboolean sim_hf_config_load(const char *path, SimTransformer *config, GError **error);
gboolean sim_hf_config_load_data(const char *data, gssize length, const char *origin, SimTransformer *config,
                                 GError **error);

G_END_DECLS
