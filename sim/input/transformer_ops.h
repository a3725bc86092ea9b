/* sim/input/transformer_ops.h — a generated transformer's layers as the GPU
 * runs them: one op per kernel (or per short run of kernels of one class),
 * each with its time from the device's kernel cost model, the saved tensors
 * it creates, the memory it holds that nothing saves, and in the backward,
 * in autograd's order, the references each op unpacks and the gradients it
 * makes.
 *
 * Private to sim/input: sim_transformer_build lists each layer's saved
 * tensors (transformer.c) and then calls this module, which assigns every
 * tensor to the forward op that saves it and every saved reference to the
 * backward op that unpacks it, by name, and adds the spans of memory no
 * tensor describes (an op's output until its reader is done, an incoming
 * gradient until the op that consumes it, a kernel's workspace).  The op
 * lists, their spans and their order are checked against real autograd in
 * tests/test_hf_memory.c (recordings of tests/data/hf) and written out in
 * docs/reference.md.
 *
 * What an op list says, per layout (ops = hf: llama, qwen2, mistral (and
 * the MoE blocks of mixtral, qwen2_moe, qwen3_moe and deepseek_v3: the
 * router, then each expert's ops as HF's loop runs them; deepseek_v3's
 * latent attention's projections, norms and RoPE before eager attention) and
 * gpt2 as HF's modeling code runs them; ops = fused: Megatron and
 * TransformerEngine's fused kernels):
 *
 *   forward   the norm, the projections, RoPE, repeat_kv, the attention
 *             (one fused kernel, or eager's QK^T, scale, mask, softmax,
 *             cast, dropout, PV and the head merge), the output projection,
 *             the residual add, the MLP norm, its projections and
 *             activation, the second residual add;
 *   backward  the same modules from the top, each GEMM's dgrad and wgrad in
 *             one op, eager attention node by node.
 *
 * The embedding (a gather; its backward the dense table gradient) and the
 * loss head (final norm, LM head, the fp32 upcast, log-softmax, NLL) are op
 * lists of their own.
 */
#pragma once

#include "input/transformer.h"

G_BEGIN_DECLS

/* Gives every layer, the embedding and the head of `w` (built by
 * sim_transformer_build from `c`) its ops, timed on `device`.  FALSE with
 * SIM_ERROR_INPUT when the device cannot time a kernel (its message names
 * the profile key). */
gboolean sim_transformer_ops_attach(SimWorkload *w, const SimTransformer *c, const SimDevice *device,
                                    GError **error);

G_END_DECLS
