/* sim/input/internal/transformer_private.h — the shape of a generated transformer in
 * the units its tensor lists (transformer.c) and its op lists
 * (transformer_ops.c) both count in, derived once.
 *
 * Who may include it: transformer.c, which defines it, and
 * transformer_ops.c.  The rules that decide which tensors and which ops
 * exist (flash kernels padding head_dim, repeat_kv, the fp32 softmax) are
 * here so that the two lists cannot disagree.
 */
#pragma once

#include "input/transformer.h"

G_BEGIN_DECLS

typedef struct {
  guint64 n, e, h, f, b, s, a, kv, d, v; /* tokens, dtype bytes, hidden, ffn, batch, seq, heads, kv heads,
                                          * head_dim, vocab */
  guint64 dp;       /* head_dim as the flash kernels pad it (a multiple of 8) */
  guint64 t, sr;    /* tensor-parallel divisor; that of the sequence-parallel region */
  guint64 S;        /* score elements, b.a.s^2 / t */
  gboolean drop;    /* dropout > 0: masks */
  gboolean gpt2;    /* ops = hf, gpt2's layout (LayerNorm, Conv1D, learned positions) */
  gboolean hf, eager, sdpa, flash;
  gboolean padded;  /* ops = hf, fused kernels, 16-bit, head_dim not a multiple of 8: padded copies */
  gboolean repeat;  /* ops = hf: repeat_kv copies k and v to the query head count (eager, sdpa) */
  gboolean softmax32; /* ops = hf, eager: the softmax in fp32, then cast back (llama-likes) */
  /* Mixture of experts: routed experts, top-k, each expert's and the shared
   * experts' intermediate sizes; tokens this GPU routes in all (N.k, less
   * what a capacity drops) and the most any expert takes (from every rank
   * of its expert-parallel group).  With expert parallelism (ep): El of the
   * experts on this GPU (E / ep), routed_local the tokens they take;
   * without, El = E and routed_local = routed. */
  guint64 E, k, fe, fs, routed, hot, El, routed_local, ep;
  gboolean shared_gate, norm_topk, qk_norm;
  /* Multi-head latent attention: q's and the kv latent's ranks, the RoPE
   * part of head_dim; dv the value (and output) head dim, d without MLA. */
  gboolean mla;
  guint64 ql, kvl, dr, dv;
} TransformerShape;

/* `c`'s shape.  Its products are sizes sim_transformer_build has checked
 * against 4 EiB (or smaller): call it after the tensor lists are built. */
TransformerShape transformer_shape(const SimTransformer *c);

/* The names an ops = hf routed expert's own tensors and ops go by, under
 * "expert.<i>.": what HF's loop makes of it besides its MLP (the gather,
 * the combine; torch.where's indices, the gathered input, the output, the
 * routing weights, the weighted product).  Owned: transformer_routed_clear. */
typedef struct {
  char *prefix, *gather, *combine, *idx, *in, *out, *route, *weighted;
} TransformerRouted;

TransformerRouted transformer_routed_names(guint expert);
void transformer_routed_clear(TransformerRouted *r);

G_END_DECLS
