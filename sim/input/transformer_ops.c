#include "input/transformer_ops.h"
#include "input/internal/transformer_private.h"

#include "base/error.h"
#include "engine/collective.h"
#include "engine/kernel.h"

#include <string.h>

/* Sizes here are products of the config's counts that sim_transformer_build
 * already formed and checked against 4 EiB (every one is the size of a
 * tensor it listed, or smaller), so plain 64-bit products cannot wrap. */

/* ---- the builder ------------------------------------------------------- */

typedef struct {
  SimLayer *l;
  const SimDevice *dev;
  SimDtype dt;
  GError **error;
  gboolean failed;
  /* The op being assembled: its kernels' seconds per class and count. */
  double pending[SIM_KERNEL_CLASSES];
  guint kernels;
  gboolean *saved; /* per tensor: an op saves it */
  guint8 module;   /* the SimModule of the ops being added (in()) */
} Ops;

/* The ops added from here on are module `module`'s (SimLayerOp.module). */
static void
in(Ops *o, SimModule module)
{
  o->module = (guint8)module;
}

static void
kernel(Ops *o, const SimKernel *k)
{
  double seconds = 0;
  if (o->failed)
    return;
  if (!sim_kernel_time(o->dev, k, &seconds, o->error)) {
    o->failed = TRUE;
    return;
  }
  o->pending[k->kclass] += seconds;
  o->kernels++;
}

/* C[m x n] = A[m x k] B[k x n], `batch` times. */
static void
gemm(Ops *o, guint64 m, guint64 n, guint64 k, guint64 batch)
{
  SimKernel kr = { .kclass = SIM_KERNEL_GEMM, .dtype = o->dt, .m = m, .n = n, .k = k, .batch = batch };
  kernel(o, &kr);
}

/* A linear layer's backward: the input gradient (dgrad, tokens x in) and
 * the weight gradient (wgrad, out x in over the tokens). */
static void
gemm_backward(Ops *o, guint64 tokens, guint64 in, guint64 out)
{
  gemm(o, tokens, in, out, 1);
  gemm(o, out, in, tokens, 1);
}

/* `n` memory-bound kernels moving `read` and `written` bytes in all. */
static void
memory(Ops *o, guint n, guint64 read, guint64 written)
{
  for (guint i = 0; i < n; i++) {
    SimKernel kr = { .kclass = SIM_KERNEL_MEMORY, .dtype = o->dt, .read = read / n, .written = written / n };
    kernel(o, &kr);
  }
}

static void
attention(Ops *o, guint64 b, guint64 a, guint64 kv, guint64 s, guint64 d, gboolean backward)
{
  SimKernel kr = { .kclass = SIM_KERNEL_ATTENTION, .dtype = o->dt, .a_batch = b, .heads = a, .kv_heads = kv,
                   .q_len = s, .kv_len = s, .head_dim = d, .causal = TRUE, .backward = backward };
  kernel(o, &kr);
}

/* Ends the op being assembled: its class is the one most of its time is. */
static guint
op(Ops *o, const char *name, gboolean backward)
{
  guint kclass = SIM_KERNEL_MEMORY;
  double seconds = 0;
  for (guint c = 0; c < SIM_KERNEL_CLASSES; c++) {
    seconds += o->pending[c];
    if (o->pending[c] > o->pending[kclass])
      kclass = c;
  }
  guint i = sim_layer_add_op(o->l, name, backward, kclass, seconds, o->kernels);
  g_array_index(o->l->ops, SimLayerOp, i).module = o->module;
  memset(o->pending, 0, sizeof o->pending);
  o->kernels = 0;
  return i;
}

/* The index the next op added will have. */
static guint
op_count(const Ops *o)
{
  return o->l->ops->len;
}

static gint
find(const Ops *o, const char *name)
{
  const char *interned = g_intern_string(name);
  for (guint k = 0; k < o->l->tensors->len; k++)
    if (g_array_index(o->l->tensors, SimTensor, k).name == interned)
      return (gint)k;
  return -1;
}

/* Forward op `f` saves the tensors named (those the layer lists: what a
 * config does not have is simply absent). */
static void
saves(Ops *o, guint f, const char *const *names)
{
  for (; *names; names++) {
    gint k = find(o, *names);
    if (k < 0)
      continue;
    g_array_index(o->l->tensors, SimTensor, k).save_op = f;
    o->saved[k] = TRUE;
  }
}

/* Backward op `b` unpacks one reference to each tensor named (a name twice:
 * two references), each lying in its storage as `view` (SimView). */
static void
uses_as(Ops *o, guint b, SimView view, const char *const *names)
{
  for (; *names; names++) {
    gint k = find(o, *names);
    if (k >= 0)
      sim_layer_add_use(o->l, (guint)k, b, view);
  }
}

static void
uses(Ops *o, guint b, const char *const *names)
{
  uses_as(o, b, SIM_VIEW_CONTIGUOUS, names);
}

#define SAVES(o, f, ...) saves(o, f, (const char *const[]){ __VA_ARGS__, NULL })
#define USES(o, b, ...) uses(o, b, (const char *const[]){ __VA_ARGS__, NULL })
#define USES_AS(o, b, view, ...) uses_as(o, b, view, (const char *const[]){ __VA_ARGS__, NULL })

static void
grads(Ops *o, guint b, guint64 bytes)
{
  g_array_index(o->l->ops, SimLayerOp, b).grad_bytes += bytes;
}

/* Op b's gradients are routed experts' weights (SimLayerOp.experts). */
static void
expert_grads(Ops *o, guint b, guint64 bytes)
{
  grads(o, b, bytes);
  g_array_index(o->l->ops, SimLayerOp, b).experts = TRUE;
}

static void
selective(Ops *o, guint f)
{
  g_array_index(o->l->ops, SimLayerOp, f).selective = TRUE;
}

static void
span(Ops *o, guint64 bytes, guint from, guint to)
{
  sim_layer_add_span(o->l, bytes, from, to);
}

/* Op i ends with a collective of `kind` over its tensor-parallel group, of
 * the whole buffer `bytes`, waited for `overlap` ops later (SimLayerOp).  A
 * group of one rank has none. */
static void
tp_collective(Ops *o, const TransformerShape *m, guint i, SimCollectiveKind kind, guint64 bytes, guint overlap)
{
  if (m->t <= 1)
    return;
  SimLayerOp *x = &g_array_index(o->l->ops, SimLayerOp, i);
  x->collective = (guint8)(kind + 1);
  x->overlap = (guint8)overlap;
  x->comm_bytes = bytes;
}

/* Op i ends with an all-to-all over its expert-parallel group (the
 * lowering's group for SIM_COLLECTIVE_ALL_TO_ALL) of `rows` hidden-wide
 * rows sent by each rank, exposed: the next op needs what it brings.  The
 * rows are those the hottest expert's GPU receives (dispatch) or sends back
 * (combine), routed_local: the collective ends when its busiest rank's
 * share is through (each rank is charged alike, nccl-tests' S).  A group
 * of one rank has none. */
static void
ep_all_to_all(Ops *o, const TransformerShape *m, guint i, guint64 rows)
{
  if (m->ep <= 1)
    return;
  SimLayerOp *x = &g_array_index(o->l->ops, SimLayerOp, i);
  x->collective = (guint8)(SIM_COLLECTIVE_ALL_TO_ALL + 1);
  x->overlap = 0;
  x->comm_bytes = rows * m->h * m->e;
}

/* ---- shapes ------------------------------------------------------------ */

typedef TransformerShape Shape;

/* ---- ops = hf: llama, qwen2, mistral ------------------------------------ */

/* LlamaRMSNorm: to fp32, pow, mean, add, rsqrt, mul, cast back, weight *.
 * One fp32 row block at a time besides what it saves. */
static guint
rmsnorm_forward_over(Ops *o, const Shape *m, guint64 x, const char *prefix, const char *out)
{
  memory(o, 8, x * (m->e + 4 + 4 + 4 + 4 + m->e), x * (4 + 4 + 4 + m->e + m->e));
  guint f = op(o, prefix, FALSE);
  g_autofree char *in = g_strconcat(prefix, ".in_fp32", NULL), *r = g_strconcat(prefix, ".rsqrt", NULL),
                  *w = g_strconcat(prefix, ".weight", NULL), *nd = g_strconcat(prefix, ".normed", NULL);
  saves(o, f, (const char *const[]){ in, r, w, nd, out, NULL });
  span(o, x * 4, f, f);
  return f;
}

static guint
rmsnorm_forward(Ops *o, const Shape *m, const char *prefix, const char *out)
{
  return rmsnorm_forward_over(o, m, m->n * m->h, prefix, out);
}

/* Its backward, node by node folded into one op: the weight product, the
 * cast, x * rsqrt, rsqrt, mean, pow and the fp32 upcast, with two fp32
 * blocks live at once. */
static guint
rmsnorm_backward_over(Ops *o, const Shape *m, guint64 x, guint64 width, const char *prefix)
{
  memory(o, 14, x * (4 * m->e + 6 * 4), x * (2 * m->e + 5 * 4));
  guint b = op(o, prefix, TRUE);
  g_autofree char *in = g_strconcat(prefix, ".in_fp32", NULL), *r = g_strconcat(prefix, ".rsqrt", NULL),
                  *w = g_strconcat(prefix, ".weight", NULL), *nd = g_strconcat(prefix, ".normed", NULL);
  uses(o, b, (const char *const[]){ w, nd, in, r, r, in, NULL });
  span(o, 2 * x * 4, b, b);
  grads(o, b, width * m->e);
  return b;
}

static guint
rmsnorm_backward(Ops *o, const Shape *m, const char *prefix)
{
  return rmsnorm_backward_over(o, m, m->n * m->h, m->h, prefix);
}

/* nn.LayerNorm (CUDA's native_layer_norm): one kernel each way. */
static guint
layernorm_forward(Ops *o, const Shape *m, const char *prefix, const char *out)
{
  guint64 x = m->n * m->h;
  memory(o, 1, x * m->e, x * m->e + 8 * m->n);
  guint f = op(o, prefix, FALSE);
  g_autofree char *in = g_strconcat(prefix, ".in", NULL), *w = g_strconcat(prefix, ".weight", NULL),
                  *bi = g_strconcat(prefix, ".bias", NULL), *mu = g_strconcat(prefix, ".mean", NULL),
                  *rs = g_strconcat(prefix, ".rstd", NULL);
  saves(o, f, (const char *const[]){ in, w, bi, mu, rs, out, NULL });
  return f;
}

static guint
layernorm_backward(Ops *o, const Shape *m, const char *prefix)
{
  guint64 x = m->n * m->h;
  memory(o, 2, 2 * x * m->e + 8 * m->n, x * m->e);
  guint b = op(o, prefix, TRUE);
  g_autofree char *in = g_strconcat(prefix, ".in", NULL), *w = g_strconcat(prefix, ".weight", NULL),
                  *bi = g_strconcat(prefix, ".bias", NULL), *mu = g_strconcat(prefix, ".mean", NULL),
                  *rs = g_strconcat(prefix, ".rstd", NULL);
  uses(o, b, (const char *const[]){ in, mu, rs, w, bi, NULL });
  grads(o, b, 2 * m->h * m->e);
  return b;
}

static guint
norm_forward(Ops *o, const Shape *m, const char *prefix, const char *out)
{
  return m->gpt2 ? layernorm_forward(o, m, prefix, out) : rmsnorm_forward(o, m, prefix, out);
}

static guint
norm_backward(Ops *o, const Shape *m, const char *prefix)
{
  return m->gpt2 ? layernorm_backward(o, m, prefix) : rmsnorm_backward(o, m, prefix);
}

/* A linear layer's forward op over `rows` rows: out = in W^T (+ bias, in
 * the same kernel). */
static guint
linear_rows(Ops *o, guint64 rows, const char *name, guint64 in, guint64 out)
{
  gemm(o, rows, out, in, 1);
  return op(o, name, FALSE);
}

static guint
linear(Ops *o, const Shape *m, const char *name, guint64 in, guint64 out)
{
  return linear_rows(o, m->n, name, in, out);
}

static guint
linear_backward_rows(Ops *o, const Shape *m, guint64 rows, const char *name, const char *input, const char *weight,
                     guint64 in, guint64 out, gboolean bias)
{
  gemm_backward(o, rows, in, out);
  if (bias)
    memory(o, 1, rows * out * m->e, out * m->e);
  guint b = op(o, name, TRUE);
  uses(o, b, (const char *const[]){ input, weight, NULL });
  grads(o, b, (in * out + (bias ? out : 0)) * m->e);
  return b;
}

static guint
linear_backward(Ops *o, const Shape *m, const char *name, const char *input, const char *weight, guint64 in,
                guint64 out, gboolean bias)
{
  return linear_backward_rows(o, m, m->n, name, input, weight, in, out, bias);
}

/* Indices of the attention's ops the MLP and the backward refer to. */
typedef struct {
  guint q, k, v;    /* q/k/v projections, or gpt2's c_attn in q */
  guint rope, repeat, core_first, core_last, merge, o_proj;
} AttnF;

/* Eager attention's forward: QK^T, scale, mask, softmax (fp32 for llama),
 * the cast back, dropout, PV and the head merge; every op of it but the
 * merge is the selective region. */
static guint
eager_forward(Ops *o, const Shape *m, guint *merge_out)
{
  guint64 S = m->S, e = m->e, qd = m->n * m->a * m->dv; /* PV's output: v's head dim */
  gemm(o, m->s, m->s, m->d, m->b * m->a);
  guint qk = op(o, "qk_matmul", FALSE);
  span(o, S * e, qk, qk + 1);
  if (m->hf) {
    /* HF scales and masks in kernels of their own; the fused softmax does both. */
    memory(o, 1, S * e, S * e);
    guint scale = op(o, "attn_scale", FALSE);
    span(o, S * e, scale, scale + 1);
    memory(o, 1, S * e + (m->gpt2 ? S : S * e / m->b), S * e);
    guint mask = op(o, "attn_mask", FALSE);
    span(o, S * e, mask, mask + 1);
  }
  guint64 sm = m->softmax32 ? 4 : e;
  if (m->softmax32)
    memory(o, 1, S * e, S * 4); /* softmax(dtype=float32) converts its input first */
  memory(o, 1, S * sm, S * sm);
  guint softmax = op(o, "softmax", FALSE);
  if (m->softmax32)
    span(o, S * 4, softmax, softmax);
  SAVES(o, softmax, "scores_softmax");
  guint last = softmax;
  if (sm != e) {
    memory(o, 1, S * 4, S * e);
    last = op(o, "softmax_cast", FALSE);
    SAVES(o, last, "attn_probs");
  }
  if (m->drop) {
    memory(o, 1, S * e, S * e + S);
    last = op(o, "attn_dropout", FALSE);
    SAVES(o, last, "attn_dropout_mask", "attn_probs_dropped");
  }
  gemm(o, m->s, m->dv, m->s, m->b * m->a);
  guint pv = op(o, "pv_matmul", FALSE);
  span(o, qd * e, pv, pv + 1);
  for (guint f = qk; f <= pv; f++)
    selective(o, f);
  memory(o, 1, qd * e, qd * e);
  *merge_out = op(o, "attn_merge", FALSE);
  SAVES(o, *merge_out, "attn_out");
  return qk;
}

/* Eager attention's backward from the merge down to QK^T; d_q and d_k go
 * to *dq_op (and d_v leaves PV). */
static void
eager_backward(Ops *o, const Shape *m, guint *pv_out, guint *qk_out)
{
  guint64 S = m->S, e = m->e, qd = m->n * m->a * m->dv; /* the output's and v's: v's head dim */
  gboolean cast = m->softmax32 && e != 4;
  memory(o, 1, qd * e, qd * e);
  guint merge = op(o, "attn_merge", TRUE);
  span(o, qd * e, merge, merge + 1);
  gemm(o, m->s, m->s, m->dv, m->b * m->a);
  gemm(o, m->s, m->dv, m->s, m->b * m->a);
  guint pv = op(o, "pv_matmul", TRUE);
  *pv_out = pv;
  if (m->drop)
    USES(o, pv, "attn_probs_dropped", "v");
  else if (find(o, "attn_probs") >= 0)
    USES(o, pv, "attn_probs", "v");
  else
    USES(o, pv, "scores_softmax", "v");
  span(o, S * e, pv, pv + 1);
  guint prev = pv;
  if (m->drop) {
    memory(o, 1, S * e + S, S * e);
    prev = op(o, "attn_dropout", TRUE);
    USES(o, prev, "attn_dropout_mask");
    span(o, S * e, prev, prev + 1);
  }
  if (cast) {
    memory(o, 1, S * e, S * 4);
    prev = op(o, "softmax_cast", TRUE);
    span(o, S * 4, prev, prev + 1);
  }
  guint64 sm = cast ? 4 : e;
  memory(o, 1, 2 * S * sm, S * sm);
  guint softmax = op(o, "softmax", TRUE);
  USES(o, softmax, "scores_softmax");
  span(o, S * sm, softmax, softmax + 1);
  prev = softmax;
  if (cast) {
    memory(o, 1, S * 4, S * e);
    prev = op(o, "softmax_upcast", TRUE);
    span(o, S * e, prev, prev + 1);
  }
  if (m->gpt2) {
    memory(o, 1, S * e + S, S * e);
    prev = op(o, "attn_mask", TRUE);
    span(o, S * e, prev, prev + 1);
  }
  if (m->hf) {
    memory(o, 1, S * e, S * e);
    prev = op(o, "attn_scale", TRUE);
    span(o, S * e, prev, prev + 1);
  }
  gemm(o, m->s, m->d, m->s, m->b * m->a);
  gemm(o, m->s, m->d, m->s, m->b * m->a);
  *qk_out = op(o, "qk_matmul", TRUE);
  /* torch.matmul folds its operands to 3-D: q (RoPE's transposed output)
   * and k without repeat_kv are copied contiguous; repeat_kv's contiguous
   * k is saved as k.transpose(2, 3), a view of all of it (HF's code only). */
  USES(o, *qk_out, "q");
  USES_AS(o, *qk_out, m->hf && m->repeat ? SIM_VIEW_STRIDED : SIM_VIEW_CONTIGUOUS, "k");
}

/* Attention as one fused kernel (SDPA's flash or memory-efficient kernel,
 * flash_attention_2): q, k and v in, its output and the fp32 logsumexp
 * out; the backward keeps an fp32 dq accumulator besides dq, dk, dv. */
static guint
fused_attention_forward(Ops *o, const Shape *m)
{
  guint64 kvh = m->repeat ? m->a : m->kv;
  attention(o, m->b, m->a / m->t, kvh / m->t, m->s, m->d, FALSE);
  guint f = op(o, "attention", FALSE);
  SAVES(o, f, "attn_out_padded", "attn_out", "softmax_lse", "philox_seed", "philox_offset", "rng_state");
  if (m->padded)
    SAVES(o, f, "q", "k", "v");
  return f;
}

static guint
fused_attention_backward(Ops *o, const Shape *m)
{
  guint64 kvh = m->repeat ? m->a : m->kv;
  attention(o, m->b, m->a / m->t, kvh / m->t, m->s, m->d, TRUE);
  guint b = op(o, "attention", TRUE);
  /* How the kernel's saved references lie (HF's code on CUDA): gpt2's q, k
   * and v are thirds of c_attn's output, split and transposed; under SDPA
   * q (and k and v without repeat_kv) is RoPE's output, a (batch, heads,
   * seq, dim) view of a (batch, seq, heads, dim) storage, and so is the
   * output the kernel saves (it writes (batch, seq, heads, dim) and returns
   * it transposed); flash_attention_2 gets them transposed back,
   * contiguous, and padded copies are contiguous. */
  SimView qv = m->sdpa && !m->padded ? SIM_VIEW_STRIDED : SIM_VIEW_CONTIGUOUS;
  if (find(o, "qkv") >= 0) {
    USES_AS(o, b, SIM_VIEW_PART, "qkv", "qkv", "qkv");
  } else {
    USES_AS(o, b, qv, "q");
    USES_AS(o, b, m->repeat ? SIM_VIEW_CONTIGUOUS : qv, "k", "v");
  }
  USES_AS(o, b, m->sdpa ? SIM_VIEW_STRIDED : SIM_VIEW_CONTIGUOUS, m->padded ? "attn_out_padded" : "attn_out");
  USES(o, b, "softmax_lse", "philox_seed", "philox_offset", "rng_state");
  span(o, m->n * m->a * m->d * 4 / m->t, b, b); /* dq accumulated in fp32 */
  return b;
}

/* After projection `proj`: gpt2's residual dropout (its mask saved) and
 * the residual add; the projection's output lives until the add.  Returns
 * the add. */
static guint
residual_forward(Ops *o, const Shape *m, guint proj, const char *dropout, const char *mask, const char *add)
{
  guint64 row_h = m->n * m->h * m->e;
  gboolean drop = m->gpt2 && m->drop;
  span(o, row_h, proj, proj + 1 + drop);
  if (drop) {
    memory(o, 1, row_h, row_h + m->n * m->h);
    guint d = op(o, dropout, FALSE);
    saves(o, d, (const char *const[]){ mask, NULL });
    span(o, row_h, d, d + 1);
  }
  memory(o, 1, 2 * row_h, row_h);
  return op(o, add, FALSE);
}

/* The MLP's activation on the first projection's output: one kernel, or
 * gelu_new written out in eight (its tanh, half_x and one_plus_tanh saved;
 * its temporaries never outgrow the saved tensors still to come, which the
 * op allocates when it starts).  Returns the op, which saves what follows
 * it. */
static guint
activation_forward(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 row_f = m->n * m->f * m->e;
  gboolean gelu_new = c->hidden_act == SIM_ACT_GELU_NEW;
  memory(o, gelu_new ? 8 : 1, (gelu_new ? 8 : 1) * row_f, (gelu_new ? 8 : 1) * row_f);
  guint act = op(o, "act", FALSE);
  SAVES(o, act, "act.tanh", "act.half_x", "act.one_plus_tanh");
  return act;
}

/* ---- ops = hf: the sparse MoE block (mixtral, qwen2_moe, qwen3_moe) ------ */

/* Names of a SwiGLU expert's tensors and ops under prefix `p`. */
typedef struct {
  char *gate_proj, *gate_w, *gate, *act, *act_out, *up_proj, *up_w, *up, *act_mul, *down_in, *down_proj, *down_w;
} ExpertNames;

static ExpertNames
expert_names(const char *p)
{
  return (ExpertNames){
    g_strconcat(p, "gate_proj", NULL), g_strconcat(p, "gate_proj.weight", NULL), g_strconcat(p, "gate", NULL),
    g_strconcat(p, "act", NULL), g_strconcat(p, "act_out", NULL), g_strconcat(p, "up_proj", NULL),
    g_strconcat(p, "up_proj.weight", NULL), g_strconcat(p, "up", NULL), g_strconcat(p, "act_mul", NULL),
    g_strconcat(p, "down_in", NULL), g_strconcat(p, "down_proj", NULL), g_strconcat(p, "down_proj.weight", NULL),
  };
}

static void
expert_names_free(ExpertNames *x)
{
  char **all[] = { &x->gate_proj, &x->gate_w, &x->gate, &x->act, &x->act_out, &x->up_proj, &x->up_w, &x->up,
                   &x->act_mul, &x->down_in, &x->down_proj, &x->down_w };
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    g_clear_pointer(all[i], g_free);
}

/* A SwiGLU expert's forward over `t` rows of its gathered input, as HF's
 * MLP modules run it (gate_proj, SiLU, up_proj, the product, down_proj),
 * its projections in module[0] and its activation in module[1] (Megatron's
 * expert_fc1 and moe_act for a routed expert; the MLP for the shared one);
 * returns down_proj's op. */
static guint
expert_forward(Ops *o, const Shape *m, const ExpertNames *x, guint64 t, guint64 f, const SimModule module[2])
{
  guint64 e = m->e;
  guint8 outer = o->module;
  in(o, module[0]);
  guint g = linear_rows(o, t, x->gate_proj, m->h, f);
  saves(o, g, (const char *const[]){ x->gate_w, x->gate, NULL });
  in(o, module[1]);
  memory(o, 1, t * f * e, t * f * e);
  guint a = op(o, x->act, FALSE);
  saves(o, a, (const char *const[]){ x->act_out, NULL });
  in(o, module[0]);
  guint u = linear_rows(o, t, x->up_proj, m->h, f);
  saves(o, u, (const char *const[]){ x->up_w, x->up, NULL });
  in(o, module[1]);
  memory(o, 1, 2 * t * f * e, t * f * e);
  guint p = op(o, x->act_mul, FALSE);
  saves(o, p, (const char *const[]){ x->down_in, NULL });
  in(o, outer);
  guint d = linear_rows(o, t, x->down_proj, f, m->h);
  saves(o, d, (const char *const[]){ x->down_w, NULL });
  return d;
}

/* Its backward from down_proj to gate_proj (autograd's order, as the dense
 * MLP's); `in` is the expert's input.  Returns gate_proj's op. */
static guint
expert_backward(Ops *o, const Shape *m, const ExpertNames *x, const char *input, guint64 t, guint64 f,
                const SimModule module[2])
{
  guint64 e = m->e;
  guint8 outer = o->module;
  guint d = linear_backward_rows(o, m, t, x->down_proj, x->down_in, x->down_w, f, m->h, FALSE);
  span(o, t * f * e, d, d + 1);
  in(o, module[1]);
  memory(o, 2, 3 * t * f * e, 2 * t * f * e);
  guint p = op(o, x->act_mul, TRUE);
  uses(o, p, (const char *const[]){ x->act_out, x->up, NULL });
  in(o, module[0]);
  guint u = linear_backward_rows(o, m, t, x->up_proj, input, x->up_w, m->h, f, FALSE);
  span(o, t * f * e, p, u);
  span(o, t * f * e, p, u + 1);
  in(o, module[1]);
  memory(o, 1, 2 * t * f * e, t * f * e);
  guint a = op(o, x->act, TRUE);
  uses(o, a, (const char *const[]){ x->gate, NULL });
  span(o, t * m->h * e, u, a + 1);
  in(o, module[0]);
  guint g = linear_backward_rows(o, m, t, x->gate_proj, input, x->gate_w, m->h, f, FALSE);
  span(o, t * f * e, a, g);
  in(o, outer);
  return g;
}

/* The modules of a routed expert's and of the shared expert's ops. */
static const SimModule routed_modules[2] = { SIM_MODULE_EXPERT_FC1, SIM_MODULE_MOE_ACT },
                       shared_modules[2] = { SIM_MODULE_MLP, SIM_MODULE_MLP };

/* HF's loop over the experts that take tokens, after op `last`: per expert
 * its torch.where, gather, MLP, weighting by its routing weights and
 * index_add_ into the output, the weights and the product in `w`-byte
 * elements (the activations' for mixtral and qwen, fp32 for deepseek_v3).
 * Returns the last op. */
static guint
routed_experts_forward(Ops *o, const Shape *m, const SimTransformer *c, guint64 w, guint last)
{
  guint64 e = m->e, n = m->n, h = m->h, k = m->k;
  for (guint i = 0; i < m->E; i++) {
    guint64 t = sim_transformer_expert_tokens(c, i);
    if (t == 0)
      continue;
    TransformerRouted r = transformer_routed_names(i);
    /* torch.where on the expert's mask, then the gather of its rows. */
    memory(o, 2, k * n * 8 + t * 8 + t * h * e, t * 16 + t * h * e);
    guint gt = op(o, r.gather, FALSE);
    saves(o, gt, (const char *const[]){ r.idx, r.in, NULL });
    ExpertNames x = expert_names(r.prefix);
    guint d = expert_forward(o, m, &x, t, m->fe, routed_modules);
    expert_names_free(&x);
    saves(o, d, (const char *const[]){ r.out, NULL });
    /* The routing weights' rows, the product with them, index_add_. */
    memory(o, 3, t * 16 + t * w + t * h * e + t * h * w + t * 8 + t * h * w, t * w + t * h * w + t * h * w);
    last = op(o, r.combine, FALSE);
    saves(o, last, (const char *const[]){ r.route, r.weighted, NULL });
    transformer_routed_clear(&r);
  }
  return last;
}

/* Their backward, from the last expert hit to the first: index_add_'s,
 * the product's and the routing weights' index nodes, the expert's MLP, the
 * gather's scatter of its rows' gradient into N x h.  Returns the last op,
 * *first the first (or op_count when none is hit). */
static guint
routed_experts_backward(Ops *o, const Shape *m, const SimTransformer *c, guint64 w, guint *first)
{
  guint64 e = m->e, n = m->n, h = m->h, k = m->k;
  guint end = 0, have = 0;
  *first = op_count(o);
  for (guint j = (guint)m->E; j-- > 0;) {
    guint64 t = sim_transformer_expert_tokens(c, j);
    if (t == 0)
      continue;
    TransformerRouted r = transformer_routed_names(j);
    memory(o, 4, 2 * t * 8 + t * h * w + 2 * t * h * e + t * w + t * 16, 2 * t * h * e + t * w + n * k * w);
    guint cb = op(o, r.combine, TRUE);
    if (!have++)
      *first = cb;
    uses(o, cb, (const char *const[]){ r.idx, r.weighted, r.out, r.route, r.idx, r.idx, NULL });
    span(o, t * h * e, cb, cb + 1);
    ExpertNames x = expert_names(r.prefix);
    guint g = expert_backward(o, m, &x, r.in, t, m->fe, routed_modules);
    expert_names_free(&x);
    span(o, t * h * e, g, g + 1);
    /* index backward: the gathered rows' gradient scattered into N x h. */
    memory(o, 2, t * 8 + t * h * e, n * h * e);
    guint gb = op(o, r.gather, TRUE);
    uses(o, gb, (const char *const[]){ r.idx, NULL });
    end = gb;
    transformer_routed_clear(&r);
  }
  return have ? end : 0;
}

/* HF's sparse MoE block forward after the MLP norm: the router GEMM, the
 * fp32 softmax, top-k (and its renormalisation), the cast and the expert
 * mask, then per expert hit its torch.where, gather, MLP, weighting by its
 * routing weights and index_add_ into the zero-initialised output (which
 * lives to the residual add); qwen2_moe's shared expert and its gate last.
 * Returns the op whose output the residual add reads. */
static guint
hf_moe_forward(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 e = m->e, n = m->n, h = m->h, E = m->E, k = m->k;
  guint router = linear(o, m, "router", h, E);
  SAVES(o, router, "router.weight");
  span(o, n * E * e, router, router + 1); /* the logits (the block returns them) */
  memory(o, 2, n * E * e + n * E * 4, n * E * 4 + n * E * 4);
  guint sm = op(o, "router_softmax", FALSE);
  SAVES(o, sm, "router_probs");
  memory(o, 1, n * E * 4, n * k * 12);
  guint topk = op(o, "topk", FALSE);
  SAVES(o, topk, "topk_idx");
  guint last = topk;
  if (m->norm_topk) {
    memory(o, 3, 3 * n * k * 4, n * k * 4 + n * 4 + n * k * 4);
    last = op(o, "topk_norm", FALSE);
    SAVES(o, last, "topk_clone", "topk_sum");
  }
  /* The cast of the weights, the one-hot mask (experts x k x N, int64)
   * and its sum; the zeroed output. */
  memory(o, 4, n * k * 4 + n * k * 8 + E * k * n * 8, n * k * e + E * k * n * 8 + n * h * e);
  guint mask = op(o, "expert_mask", FALSE);
  guint first = mask;
  last = routed_experts_forward(o, m, c, e, mask);
  span(o, n * k * e, mask, last);      /* the routing weights, read by each expert's weighting */
  span(o, n * h * e, first, last + 1); /* the output index_add_ fills */
  if (!m->fs)
    return last;
  ExpertNames x = expert_names("shared.");
  guint d = expert_forward(o, m, &x, n, m->fs, shared_modules);
  expert_names_free(&x);
  if (!m->shared_gate)
    return d;
  span(o, n * h * e, d, d + 2);
  guint g = linear(o, m, "shared_gate", h, 1);
  SAVES(o, g, "shared_gate.weight");
  memory(o, 3, n * e + 2 * n * h * e, n * e + 2 * n * h * e);
  guint sg = op(o, "shared_mul", FALSE);
  SAVES(o, sg, "shared_sigmoid");
  SAVES(o, d, "shared_out");
  span(o, n * h * e, first, sg + 1);
  return sg;
}

/* Its backward from the output down to the router, in autograd's order:
 * the shared expert (made last), then the experts from the last hit to
 * the first, the routing's renormalisation, top-k, softmax and the
 * router GEMM.  Returns the router's op. */
static guint
hf_moe_backward(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 e = m->e, n = m->n, h = m->h, E = m->E, k = m->k;
  if (m->fs) {
    if (m->shared_gate) {
      memory(o, 3, n * e + 2 * n * h * e, n * e + n * h * e);
      guint sg = op(o, "shared_mul", TRUE);
      USES(o, sg, "shared_sigmoid", "shared_sigmoid", "shared_out");
      guint g = linear_backward(o, m, "shared_gate", "mlp_in", "shared_gate.weight", h, 1, FALSE);
      span(o, n * e, sg, g);
    }
    ExpertNames x = expert_names("shared.");
    guint g = expert_backward(o, m, &x, "mlp_in", n, m->fs, shared_modules);
    expert_names_free(&x);
    span(o, n * h * e, g, g + 1);
  }
  guint first, end = routed_experts_backward(o, m, c, e, &first);
  /* The routing weights' gradient (N x k), accumulated over the experts. */
  if (end)
    span(o, n * k * e, first, end + 1);
  if (m->norm_topk) {
    memory(o, 3, 3 * n * k * 4 + n * 4, n * k * 4);
    guint nb = op(o, "topk_norm", TRUE);
    USES(o, nb, "topk_clone", "topk_sum");
  }
  memory(o, 1, n * k * 12, n * E * 4);
  guint tk = op(o, "topk", TRUE);
  USES(o, tk, "topk_idx");
  span(o, n * E * 4, tk, tk + 1);
  memory(o, 1, 2 * n * E * 4, n * E * 4 + n * E * e);
  guint sm = op(o, "router_softmax", TRUE);
  USES(o, sm, "router_probs");
  span(o, n * E * e, sm, sm + 1);
  return linear_backward(o, m, "router", "mlp_in", "router.weight", h, E, FALSE);
}

/* HF's DeepseekV3MoE forward after the MLP norm: the router (x.float() and
 * weight.float(), the fp32 GEMM, sigmoid), the group-limited top-k under
 * no_grad (scores + correction bias, each group's top-2 sum, the group
 * mask, masked_fill, top-k: N x E fp32 temporaries), the gather of the
 * weights, their renormalisation and scaling; the fp32 output zeroed and
 * the one-hot mask (experts x N x k, int64); the experts' loop in fp32; the
 * output cast back; the shared experts on the block's input, added.
 * Returns the add. */
static guint
hf_deepseek_moe_forward(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 e = m->e, n = m->n, h = m->h, E = m->E, k = m->k;
  memory(o, 2, n * h * e + h * E * e, n * h * 4 + h * E * 4);
  guint cast = op(o, "router_cast", FALSE);
  SAVES(o, cast, "router_in", "router.weight_fp32");
  gemm(o, n, E, h, 1);
  guint router = op(o, "router", FALSE);
  span(o, n * E * 4, router, router + 1); /* the logits */
  memory(o, 1, n * E * 4, n * E * 4);
  guint sg = op(o, "router_sigmoid", FALSE);
  SAVES(o, sg, "router_scores");
  memory(o, 9, 4 * n * E * 4 + n * k * 4, 3 * n * E * 4 + n * k * 12);
  guint topk = op(o, "topk", FALSE);
  SAVES(o, topk, "topk_idx");
  span(o, 2 * n * E * 4, topk, topk);
  guint weights = topk;
  if (m->norm_topk) {
    memory(o, 3, 3 * n * k * 4, 2 * n * k * 4 + n * 4);
    weights = op(o, "topk_norm", FALSE);
    SAVES(o, weights, "topk_clone", "topk_sum");
  }
  memory(o, 1, n * k * 4, n * k * 4);
  guint scale = op(o, "topk_scale", FALSE); /* x routed_scaling_factor */
  span(o, n * k * 4, weights, scale);
  memory(o, 2, n * k * 8, n * h * 4 + E * k * n * 8);
  guint mask = op(o, "expert_mask", FALSE);
  span(o, E * k * n * 8, mask, mask); /* one_hot's result (the loop reads its views) */
  guint last = routed_experts_forward(o, m, c, 4, mask);
  span(o, n * k * 4, scale, last);     /* the routing weights, read by each expert's weighting */
  span(o, n * h * 4, mask, last + 1);  /* the fp32 output index_add_ fills */
  memory(o, 1, n * h * 4, n * h * e);
  guint back = op(o, "moe_cast", FALSE);
  ExpertNames x = expert_names("shared.");
  guint d = expert_forward(o, m, &x, n, m->fs, shared_modules);
  expert_names_free(&x);
  span(o, n * h * e, back, d + 1);
  memory(o, 1, 2 * n * h * e, n * h * e);
  guint add = op(o, "shared_add", FALSE);
  span(o, n * h * e, d, add);
  return add;
}

/* Its backward: the shared experts (made last), the cast, the experts from
 * the last hit to the first, the scaling, the renormalisation, the
 * gather's scatter into N x E, sigmoid, the fp32 GEMM (its input's and its
 * weight's gradients, fp32) and the casts back.  Returns the last op. */
static guint
hf_deepseek_moe_backward(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 e = m->e, n = m->n, h = m->h, E = m->E, k = m->k;
  ExpertNames x = expert_names("shared.");
  guint g = expert_backward(o, m, &x, "mlp_in", n, m->fs, shared_modules);
  expert_names_free(&x);
  memory(o, 1, n * h * e, n * h * 4);
  guint cast = op(o, "moe_cast", TRUE);
  guint first, end = routed_experts_backward(o, m, c, 4, &first);
  span(o, n * h * 4, cast, end ? end : cast); /* the fp32 output's gradient */
  if (end)
    span(o, n * k * 4, first, end + 1); /* the routing weights' gradient */
  memory(o, 1, n * k * 4, n * k * 4);
  guint scale = op(o, "topk_scale", TRUE);
  guint prev = scale;
  if (m->norm_topk) {
    memory(o, 3, 3 * n * k * 4 + n * 4, n * k * 4);
    prev = op(o, "topk_norm", TRUE);
    USES(o, prev, "topk_clone", "topk_sum");
  }
  span(o, n * k * 4, scale, prev + 1);
  memory(o, 2, n * k * 12 + n * E * 4, n * E * 4);
  guint gb = op(o, "topk", TRUE);
  USES(o, gb, "router_scores", "topk_idx");
  span(o, n * E * 4, gb, gb + 1);
  memory(o, 1, 2 * n * E * 4, n * E * 4);
  guint sb = op(o, "router_sigmoid", TRUE);
  USES(o, sb, "router_scores");
  span(o, n * E * 4, sb, sb + 1);
  gemm_backward(o, n, h, E);
  guint rb = op(o, "router", TRUE);
  USES(o, rb, "router_in", "router.weight_fp32");
  span(o, n * h * 4 + h * E * 4, rb, rb + 1);
  memory(o, 2, n * h * 4 + h * E * 4, n * h * e + h * E * e);
  guint cb = op(o, "router_cast", TRUE);
  grads(o, cb, h * E * e);
  span(o, n * h * e, g, cb); /* d mlp_in from the shared experts, to the router's added */
  return cb;
}

/* HF's DeepseekV3Attention's projections (multi-head latent attention):
 * q_a_proj, q_a_layernorm and q_b_proj (or q_proj), kv_a_proj_with_mqa,
 * kv_a_layernorm and kv_b_proj, then one op for what comes before the
 * attention kernel: RoPE on q's and k's rope parts (interleaved: each
 * regrouped into a copy first), k's shared rope part expanded over the
 * heads, q and k concatenated [nope, rope], v copied contiguous by the
 * PV matmul's folding; those three are what eager attention saves. */
static void
hf_mla_forward(Ops *o, const Shape *m)
{
  guint64 e = m->e, n = m->n, h = m->h, a = m->a, qk = m->d, dr = m->dr, kvd = a * (m->d - m->dr + m->dv);
  in(o, SIM_MODULE_QKV);
  guint q;
  if (m->ql) {
    guint qa = linear(o, m, "q_a_proj", h, m->ql);
    SAVES(o, qa, "q_a_proj.weight");
    span(o, n * m->ql * e, qa, qa + 1);
    rmsnorm_forward_over(o, m, n * m->ql, "q_a_norm", "q_b_in");
    q = linear(o, m, "q_b_proj", m->ql, a * qk);
    SAVES(o, q, "q_b_proj.weight");
  } else {
    q = linear(o, m, "q_proj", h, a * qk);
    SAVES(o, q, "q_proj.weight");
  }
  guint kva = linear(o, m, "kv_a_proj", h, m->kvl + dr);
  SAVES(o, kva, "kv_a_proj.weight");
  rmsnorm_forward_over(o, m, n * m->kvl, "kv_a_norm", "kv_b_in");
  guint kvb = linear(o, m, "kv_b_proj", m->kvl, kvd);
  SAVES(o, kvb, "kv_b_proj.weight");
  in(o, SIM_MODULE_ROPE);
  guint64 rot = n * (a + 1) * dr * e; /* q's and k's rope parts */
  memory(o, 12, 4 * rot + n * kvd * e + n * a * qk * e, 4 * rot + 2 * n * a * qk * e + n * a * m->dv * e);
  guint rope = op(o, "rope", FALSE);
  SAVES(o, rope, "rope_cos", "rope_sin", "q", "k", "v");
  span(o, 3 * rot, rope, rope);
  span(o, n * a * qk * e, q, rope);
  span(o, n * (m->kvl + dr) * e, kva, rope);
  span(o, n * kvd * e, kvb, rope);
}

/* Its backward from the attention kernel's d q, d k (op dq) and d v (op
 * dv): RoPE's and the concatenation's, then kv's projections and norm,
 * then q's; d qkv_in accumulated over both down-projections.  Returns the
 * last op. */
static guint
hf_mla_backward(Ops *o, const Shape *m, guint dq, guint dv)
{
  guint64 e = m->e, n = m->n, h = m->h, a = m->a, qk = m->d, dr = m->dr, kvd = a * (m->d - m->dr + m->dv);
  span(o, n * a * m->dv * e, dv, dq + 1);
  span(o, 2 * n * a * qk * e, dq, dq + 1);
  in(o, SIM_MODULE_ROPE);
  guint64 rot = n * (a + 1) * dr * e;
  memory(o, 12, 4 * rot + 2 * n * a * qk * e + n * a * m->dv * e, 4 * rot + n * kvd * e + n * a * qk * e);
  guint rb = op(o, "rope", TRUE);
  USES(o, rb, "rope_cos", "rope_sin", "rope_cos", "rope_sin");
  span(o, 3 * rot, rb, rb);
  in(o, SIM_MODULE_QKV);
  guint kvb = linear_backward(o, m, "kv_b_proj", "kv_b_in", "kv_b_proj.weight", m->kvl, kvd, FALSE);
  span(o, n * kvd * e, rb, kvb);
  guint kvn = rmsnorm_backward_over(o, m, n * m->kvl, m->kvl, "kv_a_norm");
  span(o, n * m->kvl * e, kvb, kvn);
  guint kva = linear_backward(o, m, "kv_a_proj", "qkv_in", "kv_a_proj.weight", h, m->kvl + dr, FALSE);
  span(o, n * (m->kvl + dr) * e, rb, kva); /* d compressed_kv: k's rope part, then the latent's */
  guint last;
  if (m->ql) {
    guint qb = linear_backward(o, m, "q_b_proj", "q_b_in", "q_b_proj.weight", m->ql, a * qk, FALSE);
    guint qn = rmsnorm_backward_over(o, m, n * m->ql, m->ql, "q_a_norm");
    span(o, n * m->ql * e, qb, qn);
    last = linear_backward(o, m, "q_a_proj", "qkv_in", "q_a_proj.weight", h, m->ql, FALSE);
    span(o, n * m->ql * e, qn, last);
  } else {
    last = linear_backward(o, m, "q_proj", "qkv_in", "q_proj.weight", h, a * qk, FALSE);
  }
  span(o, n * a * qk * e, rb, kva + 1); /* d q, to its projection */
  span(o, n * h * e, kva, last + 1);    /* d qkv_in, accumulated */
  return last;
}

/* An HF decoder layer.  The residual stream enters as the layer's input
 * (a span until the attention's residual add, unless the first norm saves
 * it) and leaves as the output of the MLP's add (held by that op: the
 * next layer's input). */
static void
hf_layer_ops(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 e = m->e, n = m->n, h = m->h, f = m->f, qd = m->a * m->d, kvd = m->kv * m->d, row_h = n * h * e;
  guint64 od = m->a * m->dv; /* the attention output's width (qd but for latent attention) */
  gboolean bias = c->qkv_bias || c->linear_bias;
  /* Forward. */
  in(o, SIM_MODULE_ATTN_NORM);
  guint norm1 = norm_forward(o, m, "attn_norm", "qkv_in");
  guint qf, kf = 0, vf = 0;
  in(o, SIM_MODULE_QKV);
  if (m->mla) {
    hf_mla_forward(o, m);
  } else if (m->gpt2) {
    qf = linear(o, m, "c_attn", h, 3 * h);
    SAVES(o, qf, "attn.c_attn.weight", "qkv");
    /* Eager reads q, k and v as views of c_attn's output; SDPA and flash
     * read "qkv" itself, or padded copies of it (their output lives until
     * the attention op). */
    if (m->eager)
      SAVES(o, qf, "q", "k", "v");
    else if (m->padded)
      span(o, n * 3 * h * e, qf, qf + 1);
  } else {
    /* qwen3's q_norm and k_norm (RMSNorm over head_dim) after each
     * projection: the normalised q and k go to RoPE. */
    guint qk = m->qk_norm ? 1 : 0;
    qf = linear(o, m, "q_proj", h, qd);
    SAVES(o, qf, "q_proj.weight");
    if (qk) {
      span(o, n * qd * e, qf, qf + 1);
      guint nq = rmsnorm_forward_over(o, m, n * qd, "q_norm", "q_norm.normed");
      span(o, n * qd * e, nq, nq + 4); /* to RoPE */
    } else {
      span(o, n * qd * e, qf, qf + 3); /* to RoPE */
    }
    kf = linear(o, m, "k_proj", h, kvd);
    SAVES(o, kf, "k_proj.weight");
    if (qk) {
      span(o, n * kvd * e, kf, kf + 1);
      guint nk = rmsnorm_forward_over(o, m, n * kvd, "k_norm", "k_norm.normed");
      span(o, n * kvd * e, nk, nk + 2);
    } else {
      span(o, n * kvd * e, kf, kf + 2);
    }
    vf = linear(o, m, "v_proj", h, kvd);
    SAVES(o, vf, "v_proj.weight");
    if (!m->repeat && !m->padded)
      SAVES(o, vf, "v");
    /* RoPE on q and k: q * cos + rotate_half(q) * sin, two of each live. */
    in(o, SIM_MODULE_ROPE);
    memory(o, 10, 3 * (qd + kvd) * n * e, 4 * (qd + kvd) * n * e);
    guint rope = op(o, "rope", FALSE);
    SAVES(o, rope, "rope_cos", "rope_sin");
    span(o, 2 * n * qd * e, rope, rope);
    if (!m->padded)
      SAVES(o, rope, "q");
    if (!m->repeat && !m->padded)
      SAVES(o, rope, "k");
    if (m->padded)
      span(o, n * (qd + 2 * kvd) * e, rope, rope + 1);
    if (m->repeat) {
      span(o, n * kvd * e, vf, rope + 1);
      span(o, n * kvd * e, rope, rope + 1);
      in(o, SIM_MODULE_CORE_ATTN); /* HF calls repeat_kv inside the attention function */
      memory(o, 2, 2 * n * kvd * e, 2 * n * qd * e);
      guint rep = op(o, "repeat_kv", FALSE);
      SAVES(o, rep, "k", "v");
    }
  }
  in(o, SIM_MODULE_CORE_ATTN);
  if (m->eager) {
    guint merge;
    eager_forward(o, m, &merge);
  } else {
    fused_attention_forward(o, m);
  }
  in(o, SIM_MODULE_ATTN_PROJ);
  guint of = linear(o, m, m->gpt2 ? "attn.c_proj" : "o_proj", od, h);
  SAVES(o, of, m->gpt2 ? "attn.c_proj.weight" : "o_proj.weight");
  in(o, SIM_MODULE_ATTN_RESIDUAL);
  guint add1 = residual_forward(o, m, of, "attn_resid_dropout", "attn_resid_mask", "attn_residual");
  if (!m->gpt2)
    span(o, row_h, norm1, add1); /* the layer's input, read again by the add */
  in(o, SIM_MODULE_MLP_NORM);
  norm_forward(o, m, "mlp_norm", "mlp_in");
  in(o, SIM_MODULE_MLP);
  guint fc2;
  /* This layer's tensors say which MLP it has. */
  gboolean moe = find(o, "router_probs") >= 0 || find(o, "router_scores") >= 0;
  if (moe && m->mla) {
    fc2 = hf_deepseek_moe_forward(o, m, c);
  } else if (moe) {
    fc2 = hf_moe_forward(o, m, c);
  } else if (m->gpt2) {
    guint fc1 = linear(o, m, "mlp.c_fc", h, f);
    SAVES(o, fc1, "mlp.c_fc.weight", "fc1_out");
    SAVES(o, activation_forward(o, m, c), "fc2_in");
    fc2 = linear(o, m, "mlp.c_proj", f, h);
    SAVES(o, fc2, "mlp.c_proj.weight");
  } else {
    guint fc1 = linear(o, m, "gate_proj", h, f);
    SAVES(o, fc1, "gate_proj.weight", "gate");
    SAVES(o, activation_forward(o, m, c), "act_out");
    guint up = linear(o, m, "up_proj", h, f);
    SAVES(o, up, "up_proj.weight", "up");
    memory(o, 1, 2 * n * f * e, n * f * e);
    guint mul = op(o, "act_mul", FALSE);
    SAVES(o, mul, "down_in");
    fc2 = linear(o, m, "down_proj", f, h);
    SAVES(o, fc2, "down_proj.weight");
  }
  in(o, SIM_MODULE_MLP_RESIDUAL);
  guint add2 = residual_forward(o, m, fc2, "mlp_resid_dropout", "mlp_resid_mask", "mlp_residual");
  if (!m->gpt2)
    span(o, row_h, add1, add2); /* the residual between the two adds */
  span(o, row_h, add2, add2);   /* the output: the next layer's input */

  /* Backward, in autograd's order.  The gradient of the residual stream
   * enters with the first op and is replaced by the one the first norm's
   * backward adds up. */
  guint g0 = 0;
  if (m->gpt2) {
    if (m->drop) {
      in(o, SIM_MODULE_MLP_RESIDUAL);
      memory(o, 1, row_h + n * h, row_h);
      g0 = op(o, "mlp_resid_dropout", TRUE);
      USES(o, g0, "mlp_resid_mask");
      span(o, row_h, g0, g0 + 1);
    }
    in(o, SIM_MODULE_MLP);
    guint b2 = linear_backward(o, m, "mlp.c_proj", "fc2_in", "mlp.c_proj.weight", f, h, TRUE);
    if (!m->drop)
      g0 = b2;
    span(o, n * f * e, b2, b2 + 1);
    guint64 reads = c->hidden_act == SIM_ACT_GELU_NEW ? 10 : 2;
    memory(o, c->hidden_act == SIM_ACT_GELU_NEW ? 9 : 1, reads * n * f * e, (reads / 2) * n * f * e);
    guint ab = op(o, "act", TRUE);
    USES(o, ab, "act.half_x", "act.one_plus_tanh", "act.tanh", "fc1_out");
    if (c->hidden_act == SIM_ACT_GELU_NEW)
      span(o, 2 * n * f * e, ab, ab);
    span(o, n * f * e, ab, ab + 1);
    guint b1 = linear_backward(o, m, "mlp.c_fc", "mlp_in", "mlp.c_fc.weight", h, f, TRUE);
    span(o, row_h, b1, b1 + 1);
  } else if (moe) {
    in(o, SIM_MODULE_MLP);
    g0 = op_count(o);
    guint r = m->mla ? hf_deepseek_moe_backward(o, m, c) : hf_moe_backward(o, m, c);
    span(o, row_h, r, r + 1);
  } else {
    in(o, SIM_MODULE_MLP);
    guint b2 = linear_backward(o, m, "down_proj", "down_in", "down_proj.weight", f, h, FALSE);
    g0 = b2;
    span(o, n * f * e, b2, b2 + 1);
    memory(o, 2, 3 * n * f * e, 2 * n * f * e);
    guint mb = op(o, "act_mul", TRUE);
    USES(o, mb, "act_out", "up");
    guint ub = linear_backward(o, m, "up_proj", "mlp_in", "up_proj.weight", h, f, FALSE);
    span(o, n * f * e, mb, ub);     /* d up */
    span(o, n * f * e, mb, ub + 1); /* d act_out, to the activation */
    memory(o, 1, 2 * n * f * e, n * f * e);
    guint ab = op(o, "act", TRUE);
    USES(o, ab, "gate", "act.tanh", "act.half_x", "act.one_plus_tanh");
    span(o, row_h, ub, ab + 1); /* d mlp_in from up_proj, accumulated */
    guint gb = linear_backward(o, m, "gate_proj", "mlp_in", "gate_proj.weight", h, f, FALSE);
    span(o, n * f * e, ab, gb);
    span(o, row_h, gb, gb + 1);
  }
  in(o, SIM_MODULE_MLP_NORM);
  guint nb2 = norm_backward(o, m, "mlp_norm");
  span(o, row_h, g0, nb2); /* the incoming stream gradient */
  if (m->gpt2 && m->drop) {
    in(o, SIM_MODULE_ATTN_RESIDUAL);
    memory(o, 1, row_h + n * h, row_h);
    guint d = op(o, "attn_resid_dropout", TRUE);
    USES(o, d, "attn_resid_mask");
    span(o, row_h, d, d + 1);
  }
  in(o, SIM_MODULE_ATTN_PROJ);
  guint ob = linear_backward(o, m, m->gpt2 ? "attn.c_proj" : "o_proj", "attn_out",
                             m->gpt2 ? "attn.c_proj.weight" : "o_proj.weight", od, h, m->gpt2);
  span(o, n * od * e, ob, ob + 1);
  guint dq, dv;
  in(o, SIM_MODULE_CORE_ATTN);
  if (m->eager) {
    guint pv, qk;
    eager_backward(o, m, &pv, &qk);
    dv = pv;
    dq = qk;
  } else {
    dq = dv = fused_attention_backward(o, m);
  }
  guint last_attn = dq;
  if (m->mla) {
    hf_mla_backward(o, m, dq, dv);
  } else if (m->gpt2) {
    /* q, k and v's gradients are concatenated back into c_attn's output. */
    span(o, n * qd * e, dv, dq);
    span(o, 2 * n * qd * e, dq, dq + 1);
    in(o, SIM_MODULE_QKV); /* the split is in the attention's projection step (Megatron's qkv_linear) */
    memory(o, 1, 3 * n * qd * e, 3 * n * qd * e);
    guint split = op(o, "qkv_split", TRUE);
    span(o, 3 * n * h * e, split, split + 1);
    guint cb = linear_backward(o, m, "c_attn", "qkv_in", "attn.c_attn.weight", h, 3 * h, TRUE);
    span(o, row_h, cb, cb + 1);
  } else {
    guint64 dkv = m->repeat ? qd : kvd;
    span(o, n * dkv * e, dv, dq + 1 + m->repeat); /* d v, to repeat_kv or v_proj */
    span(o, n * qd * e, dq, dq + 1 + m->repeat);   /* d q */
    span(o, n * dkv * e, dq, dq + 1);               /* d k */
    guint prev = last_attn;
    if (m->repeat) {
      memory(o, 2, 2 * n * qd * e, 2 * n * kvd * e);
      prev = op(o, "repeat_kv", TRUE);
      span(o, 2 * n * kvd * e, prev, prev + 2);
    }
    in(o, SIM_MODULE_ROPE);
    memory(o, 12, 4 * n * (qd + kvd) * e, 4 * n * (qd + kvd) * e);
    guint rb = op(o, "rope", TRUE);
    USES(o, rb, "rope_cos", "rope_sin", "rope_cos", "rope_sin");
    span(o, 2 * n * qd * e, rb, rb);
    guint norms = 0;
    if (m->qk_norm) {
      /* d q and d k through k_norm and q_norm (head_dim wide) first. */
      guint kb = rmsnorm_backward_over(o, m, n * kvd, m->d, "k_norm");
      rmsnorm_backward_over(o, m, n * qd, m->d, "q_norm");
      span(o, n * kvd * e, rb, kb);
      norms = 2;
    }
    span(o, n * (qd + kvd) * e, rb + norms, rb + norms + 3);
    in(o, SIM_MODULE_QKV);
    guint vb = linear_backward(o, m, "v_proj", "qkv_in", "v_proj.weight", h, kvd, bias);
    linear_backward(o, m, "k_proj", "qkv_in", "k_proj.weight", h, kvd, bias);
    guint qb = linear_backward(o, m, "q_proj", "qkv_in", "q_proj.weight", h, qd, bias);
    span(o, row_h, vb, qb + 1); /* d qkv_in, accumulated */
  }
  in(o, SIM_MODULE_ATTN_NORM);
  guint nb1 = norm_backward(o, m, "attn_norm");
  span(o, row_h, nb2, nb1);   /* the stream gradient past the MLP */
  span(o, row_h, nb1, nb1);   /* the new stream gradient: the next layer's */
}

/* ---- ops = fused: Megatron and TransformerEngine ------------------------ */

/* A fused norm's backward: one kernel reading its input, statistics and
 * gradient, its weight's (and bias's) gradient made. */
static guint
fused_norm_backward(Ops *o, const Shape *m, const SimTransformer *c, const char *name, const char *in,
                    const char *stats)
{
  guint64 row_h = m->n * m->h * m->e / m->sr;
  memory(o, 1, 2 * row_h + 8 * m->n / m->sr, row_h);
  guint b = op(o, name, TRUE);
  uses(o, b, (const char *const[]){ in, stats, NULL });
  grads(o, b, (c->layernorm ? 2 : 1) * m->h * m->e);
  return b;
}

/* A column-parallel linear's backward under tensor parallelism: the input
 * gradient (dgrad) as op `name`, then the weight gradient (wgrad) as its
 * own op, so that the input gradient's collective (all-reduce, or
 * reduce-scatter under sp) runs beside the wgrad GEMM as Megatron's
 * asynchronous tensor-parallel communication runs it
 * (megatron/core/tensor_parallel/layers.py,
 * LinearWithGradAccumulationAndAsyncCommunication.backward).  Returns the
 * wgrad op; *dgrad_out the dgrad's. */
static guint
column_backward(Ops *o, const Shape *m, const char *name, guint64 in, guint64 out, guint *dgrad_out)
{
  gemm(o, m->n, in, out, 1);
  guint d = op(o, name, TRUE);
  tp_collective(o, m, d, m->sr > 1 ? SIM_COLLECTIVE_REDUCE_SCATTER : SIM_COLLECTIVE_ALL_REDUCE, m->n * in * m->e, 1);
  gemm(o, out, in, m->n, 1);
  g_autofree char *wgrad = g_strconcat(name, " wgrad", NULL);
  *dgrad_out = d;
  return op(o, wgrad, TRUE);
}

/* An MoE layer's MLP under Megatron-core with grouped GEMM (the tensors:
 * transformer.c's fused_moe): the router GEMM with its fused softmax and
 * top-k, the permutation of the routed tokens, grouped fc1, the fused
 * activation, grouped fc2, the unpermutation weighted by the routing
 * probabilities, and the shared experts as a dense MLP.  A grouped GEMM
 * runs every expert's rows in one kernel, whose time the fullest expert
 * sets: `experts` GEMMs of the hottest expert's rows.  With expert
 * parallelism (ep > 1: Megatron's MoEAlltoAllTokenDispatcher,
 * token_dispatcher.py) the permuted rows go to the experts' GPUs in an
 * all-to-all after the permutation and come back in one after fc2 (the
 * backward: one after unpermute's, one after fc1's); the grouped GEMMs run
 * this GPU's E / ep experts over the rows they received (Tl), the router,
 * the permutation and the unpermutation this GPU's own T. */
static void
fused_moe_forward(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 e = m->e, n = m->n, h = m->h, E = m->E, El = m->El, T = m->routed, Tl = m->routed_local;
  guint64 w = c->gelu ? 1 : 2;
  gemm(o, n, E, h, 1);
  memory(o, 1, n * E * e, n * E * 4 + n * E);
  guint router = op(o, "router", FALSE);
  SAVES(o, router, "router_probs", "routing_map");
  memory(o, 1, n * h * e + n * E + n * E * 4, T * h * e + T * 8 + T * 4);
  guint perm = op(o, "permute", FALSE);
  SAVES(o, perm, "permute_idx", "expert_in", "expert_probs");
  ep_all_to_all(o, m, perm, Tl); /* the dispatch */
  in(o, SIM_MODULE_EXPERT_FC1);
  gemm(o, m->hot, w * m->fe, h, El);
  SAVES(o, op(o, "expert_fc1", FALSE), "expert_fc1_out");
  in(o, SIM_MODULE_MOE_ACT);
  memory(o, 1, Tl * w * m->fe * e + Tl * 4, Tl * m->fe * e);
  SAVES(o, op(o, "moe_act", FALSE), "expert_act_out");
  in(o, SIM_MODULE_MLP);
  gemm(o, m->hot, h, m->fe, El);
  guint fc2 = op(o, "expert_fc2", FALSE);
  span(o, Tl * h * e, fc2, fc2 + 1);
  ep_all_to_all(o, m, fc2, Tl); /* the combine */
  memory(o, 1, T * h * e + T * 8, n * h * e);
  guint unperm = op(o, "unpermute", FALSE);
  span(o, n * h * e, unperm, unperm + 1 + (m->fs ? 3 : 0));
  if (m->fs) {
    gemm(o, n, w * m->fs, h, 1);
    SAVES(o, op(o, "shared_fc1", FALSE), "shared_fc1_out");
    memory(o, 1, n * w * m->fs * e, n * m->fs * e);
    SAVES(o, op(o, "shared_act", FALSE), "shared_act_out");
    gemm(o, n, h, m->fs, 1);
    guint s2 = op(o, "shared_fc2", FALSE);
    span(o, n * h * e, s2, s2 + 1);
  }
}

static void
fused_moe_backward(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 e = m->e, n = m->n, h = m->h, E = m->E, El = m->El, T = m->routed, Tl = m->routed_local;
  guint64 w = c->gelu ? 1 : 2, fe = m->fe;
  if (m->fs) {
    gemm_backward(o, n, m->fs, h);
    guint s2 = op(o, "shared_fc2", TRUE);
    USES(o, s2, "shared_act_out");
    grads(o, s2, m->fs * h * e);
    span(o, n * m->fs * e, s2, s2 + 1);
    memory(o, 1, n * (w + 1) * m->fs * e, n * w * m->fs * e);
    guint sa = op(o, "shared_act", TRUE);
    USES(o, sa, "shared_fc1_out");
    span(o, n * w * m->fs * e, sa, sa + 1);
    gemm_backward(o, n, h, w * m->fs);
    guint s1 = op(o, "shared_fc1", TRUE);
    USES(o, s1, "mlp_in");
    grads(o, s1, w * m->fs * h * e);
    span(o, n * h * e, s1, op_count(o) + 5); /* d mlp_in, to the router's backward (added there) */
  }
  memory(o, 1, n * h * e + T * 8, T * h * e);
  guint up = op(o, "unpermute", TRUE);
  USES(o, up, "permute_idx");
  span(o, Tl * h * e, up, up + 1);
  ep_all_to_all(o, m, up, Tl); /* the combine's backward: the output gradient to the experts */
  /* dgrad and wgrad of every local expert: El GEMMs of the hottest expert's rows each. */
  gemm(o, m->hot, fe, h, El);
  gemm(o, fe, h, m->hot, El);
  guint f2 = op(o, "expert_fc2", TRUE);
  USES(o, f2, "expert_act_out");
  expert_grads(o, f2, El * fe * h * e);
  span(o, Tl * fe * e, f2, f2 + 1);
  in(o, SIM_MODULE_MOE_ACT);
  memory(o, 1, Tl * (w + 1) * fe * e + Tl * 4, Tl * w * fe * e + Tl * 4);
  guint act = op(o, "moe_act", TRUE);
  USES(o, act, "expert_fc1_out", "expert_probs");
  span(o, Tl * w * fe * e, act, act + 1);
  span(o, Tl * 4, act, act + 3); /* d probs, to the router */
  in(o, SIM_MODULE_EXPERT_FC1);
  gemm(o, m->hot, h, w * fe, El);
  gemm(o, w * fe, h, m->hot, El);
  guint f1 = op(o, "expert_fc1", TRUE);
  USES(o, f1, "expert_in");
  expert_grads(o, f1, El * w * fe * h * e);
  span(o, Tl * h * e, f1, f1 + 1);
  ep_all_to_all(o, m, f1, Tl); /* the dispatch's backward: the input gradient home */
  in(o, SIM_MODULE_MLP);
  memory(o, 1, T * h * e + T * 8, n * h * e);
  guint perm = op(o, "permute", TRUE);
  USES(o, perm, "permute_idx");
  span(o, n * h * e, perm, perm + 2);
  gemm_backward(o, n, h, E);
  memory(o, 1, n * E * 4 + n * E + T * 4, n * E * e);
  guint r = op(o, "router", TRUE);
  USES(o, r, "mlp_in", "router_probs", "routing_map");
  grads(o, r, h * E * e);
}

/* Multi-head latent attention's projections (the tensors: transformer.c's
 * fused_mla): q's down-projection, its RMSNorm and up-projection (or one q
 * projection), kv's down-projection (the latent and the shared RoPE key),
 * its RMSNorm and up-projection (k's no-RoPE part and v), then RoPE on q's
 * and k's last qk_rope_dim and the concatenation that gives the kernel q,
 * k and v; the backward in reverse, the q and kv down-projections' input
 * gradients added into the norm's. */
static void
mla_forward(Ops *o, const Shape *m)
{
  guint64 e = m->e, n = m->n, h = m->h, a = m->a, d = m->d, nope = m->d - m->dr;
  if (m->ql) {
    gemm(o, n, m->ql, h, 1);
    SAVES(o, op(o, "q_down", FALSE), "q_down");
    memory(o, 1, n * m->ql * e, n * m->ql * e + 4 * n);
    SAVES(o, op(o, "q_norm", FALSE), "q_down_stats", "q_up_in");
  }
  gemm(o, n, a * d, m->ql ? m->ql : h, 1);
  guint qu = op(o, m->ql ? "q_up" : "q_proj", FALSE);
  gemm(o, n, m->kvl + m->dr, h, 1);
  guint kd = op(o, "kv_down", FALSE);
  SAVES(o, kd, "kv_down");
  memory(o, 1, n * m->kvl * e, n * m->kvl * e + 4 * n);
  SAVES(o, op(o, "kv_norm", FALSE), "kv_down_stats", "kv_up_in");
  span(o, n * m->dr * e, kd, op_count(o) + 1); /* the shared RoPE key, to RoPE */
  gemm(o, n, a * (nope + m->dv), m->kvl, 1);
  guint ku = op(o, "kv_up", FALSE);
  span(o, n * a * d * e, qu, ku + 1); /* q, to RoPE */
  /* RoPE on q's and the shared key's RoPE part, k's concatenation, v's copy. */
  memory(o, 4, n * a * (d + nope + m->dv) * e + n * m->dr * e, n * a * (2 * d + m->dv) * e);
  guint rope = op(o, "rope", FALSE);
  SAVES(o, rope, "q", "k", "v");
  span(o, n * a * (nope + m->dv) * e, ku, rope);
}

/* A linear's backward (dgrad and wgrad) as op `name` over N rows, reading
 * the saved `input`; returns the op. */
static guint
fused_linear_backward(Ops *o, const Shape *m, const char *name, const char *input, guint64 in, guint64 out)
{
  gemm_backward(o, m->n, in, out);
  guint b = op(o, name, TRUE);
  uses(o, b, (const char *const[]){ input, NULL });
  grads(o, b, in * out * m->e);
  return b;
}

/* A latent's up-projection and RMSNorm backward (rank `rank`, up to
 * `out`): the up-projection's input gradient lives to the norm, the
 * norm's to the down-projection after it. */
static void
latent_backward(Ops *o, const Shape *m, const char *up, const char *up_in, const char *norm, const char *down,
                const char *stats, guint64 rank, guint64 out)
{
  guint64 e = m->e, n = m->n;
  guint u = fused_linear_backward(o, m, up, up_in, rank, out);
  span(o, n * rank * e, u, u + 1);
  memory(o, 1, 2 * n * rank * e + 4 * n, n * rank * e);
  guint b = op(o, norm, TRUE);
  uses(o, b, (const char *const[]){ down, stats, NULL });
  grads(o, b, rank * e);
  span(o, n * rank * e, b, b + 1);
}

static void
mla_backward(Ops *o, const Shape *m, guint attention_op)
{
  guint64 e = m->e, n = m->n, h = m->h, a = m->a, d = m->d, nope = m->d - m->dr;
  span(o, n * a * (2 * d + m->dv) * e, attention_op, attention_op + 1); /* d q, d k, d v */
  memory(o, 4, n * a * (2 * d + m->dv) * e, n * a * (d + nope + m->dv) * e + n * m->dr * e);
  guint rope = op(o, "rope", TRUE);
  span(o, n * a * (nope + m->dv) * e, rope, rope + 1);
  span(o, n * a * d * e, rope, rope + 4); /* d q, to q_up (or q_proj) */
  span(o, n * m->dr * e, rope, rope + 3);
  latent_backward(o, m, "kv_up", "kv_up_in", "kv_norm", "kv_down", "kv_down_stats", m->kvl, a * (nope + m->dv));
  guint kd = fused_linear_backward(o, m, "kv_down", "qkv_in", h, m->kvl + m->dr);
  guint last;
  if (m->ql) {
    latent_backward(o, m, "q_up", "q_up_in", "q_norm", "q_down", "q_down_stats", m->ql, a * d);
    last = fused_linear_backward(o, m, "q_down", "qkv_in", h, m->ql);
  } else {
    last = fused_linear_backward(o, m, "q_proj", "qkv_in", h, a * d);
  }
  span(o, n * h * e, kd, last + 1); /* d qkv_in, accumulated */
}

/* One fused kernel per norm, activation and bias-dropout-add; the q, k and
 * v projections one GEMM; tensor-parallel GEMMs and the attention over
 * 1/t of the heads and of the MLP width.  With t > 1, Megatron's
 * collectives (megatron/core/tensor_parallel/mappings.py): without sp an
 * all-reduce after each row-parallel GEMM (attn_proj, fc2) and of each
 * column-parallel GEMM's input gradient (qkv_proj, fc1); with sp an
 * all-gather of the norm's sequence shard before each column-parallel GEMM
 * and a reduce-scatter after each row-parallel one, and in the backward
 * the all-gather of the gradient before each row-parallel GEMM, the
 * all-gather of the saved input shard for the wgrad (beside the dgrad) and
 * the reduce-scatter of the input gradient (beside the wgrad).  Every
 * buffer is the whole n x h activation. */
static void
fused_layer_ops(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 e = m->e, n = m->n, h = m->h, t = m->t, qd = m->a * m->d, kvd = m->kv * m->d, od = m->a * m->dv;
  guint64 f = m->f / t, row_h = n * h * e / m->sr, row_f = n * f * e, whole = n * h * e;
  gboolean swiglu = !c->gelu, sp = m->sr > 1, split = t > 1;
  SimCollectiveKind after_row = sp ? SIM_COLLECTIVE_REDUCE_SCATTER : SIM_COLLECTIVE_ALL_REDUCE;
  /* Forward. */
  in(o, SIM_MODULE_ATTN_NORM);
  memory(o, 1, row_h, row_h + 8 * n / m->sr);
  guint norm1 = op(o, "attn_norm", FALSE);
  SAVES(o, norm1, "attn_norm_in", "attn_norm_stats", "qkv_in");
  if (sp) {
    tp_collective(o, m, norm1, SIM_COLLECTIVE_ALL_GATHER, whole, 0);
    span(o, whole, norm1, norm1 + 1); /* the gathered input, read by the GEMM */
  }
  in(o, SIM_MODULE_QKV);
  if (m->mla) {
    mla_forward(o, m);
    in(o, SIM_MODULE_CORE_ATTN);
    attention(o, m->b, m->a, m->a, m->s, (m->d + m->dv) / 2, FALSE);
    SAVES(o, op(o, "attention", FALSE), "softmax_lse", "attn_out");
  } else {
  gemm(o, n, (qd + 2 * kvd) / t, h, 1);
  guint qkv = op(o, "qkv_proj", FALSE);
  SAVES(o, qkv, "q", "k", "v");
  in(o, SIM_MODULE_CORE_ATTN);
  if (m->eager) {
    guint merge;
    eager_forward(o, m, &merge);
  } else {
    attention(o, m->b, m->a / t, m->kv / t, m->s, m->d, FALSE);
    SAVES(o, op(o, "attention", FALSE), "softmax_lse", "attn_out");
  }
  }
  in(o, SIM_MODULE_ATTN_PROJ);
  gemm(o, n, h, od / t, 1);
  guint proj = op(o, "attn_proj", FALSE);
  tp_collective(o, m, proj, after_row, whole, 0);
  span(o, n * h * e, proj, proj + 1);
  in(o, SIM_MODULE_ATTN_RESIDUAL);
  memory(o, 1, 2 * row_h, row_h + (m->drop ? n * h / m->sr : 0));
  guint add1 = op(o, "attn_residual", FALSE);
  SAVES(o, add1, "attn_resid_mask"); /* the layer's input is the first norm's saved attn_norm_in */
  in(o, SIM_MODULE_MLP_NORM);
  memory(o, 1, row_h, row_h + 8 * n / m->sr);
  guint norm2 = op(o, "mlp_norm", FALSE);
  SAVES(o, norm2, "mlp_norm_in", "mlp_norm_stats", "mlp_in");
  if (sp) {
    tp_collective(o, m, norm2, SIM_COLLECTIVE_ALL_GATHER, whole, 0);
    span(o, whole, norm2, norm2 + 1);
  }
  gboolean moe = find(o, "router_probs") >= 0; /* this layer's tensors say which MLP it has */
  if (moe) {
    fused_moe_forward(o, m, c);
  } else {
    in(o, SIM_MODULE_MLP);
    gemm(o, n, swiglu ? 2 * f : f, h, 1);
    guint fc1 = op(o, "fc1", FALSE);
    SAVES(o, fc1, "fc1_out", "gate", "up");
    memory(o, 1, (swiglu ? 2 : 1) * row_f, (swiglu ? 2 : 1) * row_f);
    SAVES(o, op(o, "act", FALSE), "fc2_in", "silu_out", "down_in");
    gemm(o, n, h, f, 1);
    guint fc2 = op(o, "fc2", FALSE);
    tp_collective(o, m, fc2, after_row, whole, 0);
    span(o, n * h * e, fc2, fc2 + 1);
  }
  in(o, SIM_MODULE_MLP_RESIDUAL);
  memory(o, 1, 2 * row_h, row_h + (m->drop ? n * h / m->sr : 0));
  guint add2 = op(o, "mlp_residual", FALSE);
  SAVES(o, add2, "mlp_resid_mask");
  span(o, row_h, add2, add2);

  /* Backward. */
  memory(o, 1, row_h + (m->drop ? n * h / m->sr : 0), row_h);
  guint d2 = op(o, "mlp_residual", TRUE);
  USES(o, d2, "mlp_resid_mask");
  if (sp)
    tp_collective(o, m, d2, SIM_COLLECTIVE_ALL_GATHER, whole, 0); /* fc2's output gradient, whole */
  span(o, n * h * e, d2, d2 + 1);
  if (moe) {
    fused_moe_backward(o, m, c);
  } else {
    in(o, SIM_MODULE_MLP);
    gemm_backward(o, n, f, h);
    guint b2 = op(o, "fc2", TRUE);
    USES(o, b2, swiglu ? "down_in" : "fc2_in");
    grads(o, b2, f * h * e);
    span(o, row_f, b2, b2 + 1);
    memory(o, swiglu ? 2 : 1, (swiglu ? 3 : 2) * row_f, (swiglu ? 2 : 1) * row_f);
    guint ab = op(o, "act", TRUE);
    if (swiglu)
      USES(o, ab, "gate", "up", "silu_out");
    else
      USES(o, ab, "fc1_out");
    span(o, (swiglu ? 2 : 1) * row_f, ab, ab + (split ? 2 : 1)); /* read by the dgrad (and the wgrad) */
    guint b1, b1d;
    if (split) {
      if (sp) {
        tp_collective(o, m, ab, SIM_COLLECTIVE_ALL_GATHER, whole, 1); /* mlp_in again, for the wgrad */
        span(o, whole, ab, ab + 2);
      }
      b1 = column_backward(o, m, "fc1", h, swiglu ? 2 * f : f, &b1d);
    } else {
      gemm_backward(o, n, h, swiglu ? 2 * f : f);
      b1 = b1d = op(o, "fc1", TRUE);
    }
    if (swiglu)
      USES(o, b1, "mlp_in", "mlp_in");
    else
      USES(o, b1, "mlp_in");
    grads(o, b1, (swiglu ? 2 : 1) * f * h * e);
    span(o, n * h * e, b1d, b1 + 1);
  }
  in(o, SIM_MODULE_MLP_NORM);
  guint nb2 = fused_norm_backward(o, m, c, "mlp_norm", "mlp_norm_in", "mlp_norm_stats");
  span(o, row_h, d2, nb2);
  in(o, SIM_MODULE_ATTN_RESIDUAL);
  memory(o, 1, row_h + (m->drop ? n * h / m->sr : 0), row_h);
  guint d1 = op(o, "attn_residual", TRUE);
  USES(o, d1, "attn_resid_mask");
  if (sp)
    tp_collective(o, m, d1, SIM_COLLECTIVE_ALL_GATHER, whole, 0); /* attn_proj's output gradient */
  span(o, n * h * e, d1, d1 + 1);
  in(o, SIM_MODULE_ATTN_PROJ);
  gemm_backward(o, n, od / t, h);
  guint pb = op(o, "attn_proj", TRUE);
  USES(o, pb, "attn_out");
  grads(o, pb, od / t * h * e);
  span(o, n * od / t * e, pb, pb + 1);
  if (m->mla) {
    in(o, SIM_MODULE_CORE_ATTN);
    attention(o, m->b, m->a, m->a, m->s, (m->d + m->dv) / 2, TRUE);
    guint ab = op(o, "attention", TRUE);
    USES(o, ab, "q", "k", "v", "attn_out", "softmax_lse");
    span(o, n * qd * 4, ab, ab); /* dq accumulated in fp32 */
    in(o, SIM_MODULE_QKV);
    mla_backward(o, m, ab);
  } else {
  guint dq, readers = split ? 2 : 1; /* the ops that read q, k and v's gradients: dgrad (and wgrad) */
  in(o, SIM_MODULE_CORE_ATTN);
  if (m->eager) {
    guint pv;
    eager_backward(o, m, &pv, &dq);
    span(o, n * kvd / t * e, pv, dq + readers);
  } else {
    attention(o, m->b, m->a / t, m->kv / t, m->s, m->d, TRUE);
    dq = op(o, "attention", TRUE);
    USES(o, dq, "q", "k", "v", "attn_out", "softmax_lse");
    span(o, n * qd / t * 4, dq, dq);
    span(o, n * kvd / t * e, dq, dq + readers);
  }
  guint qb, qbd;
  in(o, SIM_MODULE_QKV);
  if (split) {
    span(o, n * (qd + kvd) / t * e, dq, dq + 2);
    if (sp) {
      tp_collective(o, m, dq, SIM_COLLECTIVE_ALL_GATHER, whole, 1); /* qkv_in again, for the wgrad */
      span(o, whole, dq, dq + 2);
    }
    qb = column_backward(o, m, "qkv_proj", h, (qd + 2 * kvd) / t, &qbd);
  } else {
    span(o, n * (qd + kvd) / t * e, dq, dq + 1);
    gemm_backward(o, n, h, (qd + 2 * kvd) / t);
    qb = qbd = op(o, "qkv_proj", TRUE);
  }
  USES(o, qb, "qkv_in", "qkv_in", "qkv_in");
  grads(o, qb, (qd + 2 * kvd) / t * h * e);
  span(o, n * h * e, qbd, qb + 1);
  }
  in(o, SIM_MODULE_ATTN_NORM);
  guint nb1 = fused_norm_backward(o, m, c, "attn_norm", "attn_norm_in", "attn_norm_stats");
  span(o, row_h, nb2, nb1);
  span(o, row_h, nb1, nb1);
}

/* ---- the embedding and the loss head ------------------------------------ */

/* A gather (and gpt2's learned positions and dropout); its backward
 * materialises the whole table's gradient, vocab x hidden, before it
 * reaches the parameter (embedding_dense_backward). */
static void
embed_ops(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 row_h = m->n * m->h * m->e / m->sr, table = m->v * m->h * m->e / m->t;
  in(o, SIM_MODULE_EMBEDDING);
  memory(o, m->gpt2 ? 2 + m->drop : 1, m->n * 8 + 2 * row_h, row_h + (m->drop ? m->n * m->h : 0));
  guint f = op(o, "embedding", FALSE);
  SAVES(o, f, "token_ids", "position_ids", "embed_dropout_mask");
  span(o, row_h, f, f); /* its output: the first layer's input */
  memory(o, 2, m->n * 8 + row_h, 2 * table);
  guint b = op(o, "embedding", TRUE);
  USES(o, b, "token_ids", "position_ids", "embed_dropout_mask");
  if (m->hf)
    span(o, table, b, b);
  (void)c;
}

/* The final norm, the LM head, HF's ForCausalLMLoss (logits.float(),
 * log_softmax, nll_loss) or the fused loss; backward from NLL down.  The
 * logits live to the end of the forward (the outputs object), their fp32
 * copy until the loss is computed. */
static void
head_ops(Ops *o, const Shape *m, const SimTransformer *c)
{
  guint64 e = m->e, n = m->n, row_h = n * m->h * e, logits = n * m->v / m->t, up = e == 4 ? 0 : logits * 4;
  guint norm;
  in(o, SIM_MODULE_FINAL_NORM);
  if (m->hf) {
    norm = norm_forward(o, m, "final_norm", "lm_head_in");
  } else {
    memory(o, 1, row_h / m->sr, row_h / m->sr + 8 * n / m->sr);
    norm = op(o, "final_norm", FALSE);
    SAVES(o, norm, "final_norm_in", "final_norm_stats", "lm_head_in");
  }
  span(o, row_h / m->sr, norm, norm); /* the last layer's output */
  in(o, SIM_MODULE_LM_HEAD);
  gemm(o, n, m->v / m->t, m->h, 1);
  guint lm = op(o, "lm_head", FALSE);
  SAVES(o, lm, "lm_head.weight");
  in(o, SIM_MODULE_LOSS);
  if (!m->hf) {
    /* The fused loss (Megatron's vocab-parallel cross entropy): the fp32
     * softmax it saves is also where its backward writes the gradient. */
    memory(o, 3, logits * e + 2 * logits * 4, logits * 4 + n * 4);
    guint loss = op(o, "loss", FALSE);
    SAVES(o, loss, "log_softmax", "labels");
    span(o, logits * e, lm, loss);
    span(o, up, loss, loss);
    memory(o, 2, 2 * logits * 4, logits * e);
    guint lb0 = op(o, "loss", TRUE);
    USES(o, lb0, "log_softmax", "log_softmax", "labels");
    in(o, SIM_MODULE_LM_HEAD);
    gemm_backward(o, n, m->h, m->v / m->t);
    guint lb = op(o, "lm_head", TRUE);
    USES(o, lb, "lm_head_in");
    span(o, logits * e, lb0, lb);
    span(o, row_h, lb, lb + 1);
    in(o, SIM_MODULE_FINAL_NORM);
    memory(o, 1, 2 * row_h / m->sr, row_h / m->sr);
    guint nb = op(o, "final_norm", TRUE);
    USES(o, nb, "final_norm_in", "final_norm_stats");
    span(o, row_h / m->sr, nb, nb);
    return;
  }
  guint cast = lm;
  if (up) {
    memory(o, 1, logits * e, up);
    cast = op(o, "logits_float", FALSE);
  }
  memory(o, 2, 2 * (up ? up : logits * e), logits * 4);
  guint ls = op(o, "log_softmax", FALSE);
  SAVES(o, ls, "log_softmax");
  memory(o, 2, logits * 4 / m->v + n * 8, 8);
  guint nll = op(o, "nll_loss", FALSE);
  SAVES(o, nll, "labels", "loss_total_weight");
  span(o, logits * e, lm, nll);
  if (up)
    span(o, up, cast, nll);

  memory(o, 2, n * 8, logits * 4);
  guint nb = op(o, "nll_loss", TRUE);
  USES(o, nb, "log_softmax", "labels", "loss_total_weight");
  memory(o, 1, 2 * logits * 4, logits * 4);
  guint lsb = op(o, "log_softmax", TRUE);
  USES(o, lsb, "log_softmax");
  span(o, logits * 4, nb, lsb);
  guint prev = lsb;
  if (up) {
    memory(o, 1, logits * 4, logits * e);
    prev = op(o, "logits_float", TRUE);
    span(o, logits * 4, lsb, prev);
  }
  in(o, SIM_MODULE_LM_HEAD);
  gemm_backward(o, n, m->h, m->v / m->t);
  guint lb = op(o, "lm_head", TRUE);
  USES(o, lb, "lm_head_in", "lm_head.weight");
  span(o, logits * e, prev, lb); /* d logits: log_softmax's own output in fp32 */
  span(o, row_h, lb, lb + 1);
  in(o, SIM_MODULE_FINAL_NORM);
  guint nb2 = norm_backward(o, m, "final_norm");
  span(o, row_h, nb2, nb2); /* the stream gradient, to the last layer */
  (void)c;
}

/* ---- attaching ---------------------------------------------------------- */

/* Orders `layer`'s tensors by the op that saves them (stable: within one
 * op, as listed), so that a forward walks them once; returns the order. */
static guint *
save_order(const SimLayer *layer)
{
  guint len = layer->tensors->len;
  guint *order = g_new(guint, MAX(len, 1u));
  guint k = 0;
  for (guint f = 0; f < layer->n_forward; f++)
    for (guint i = 0; i < len; i++)
      if (g_array_index(layer->tensors, SimTensor, i).save_op == f)
        order[k++] = i;
  g_assert(k == len);
  return order;
}

static void
permute(SimLayer *layer, const guint *order)
{
  guint len = layer->tensors->len;
  g_autoptr(GArray) old = g_array_copy(layer->tensors);
  g_array_set_clear_func(old, NULL); /* the names are interned: nothing to clear */
  for (guint k = 0; k < len; k++)
    g_array_index(layer->tensors, SimTensor, k) = g_array_index(old, SimTensor, order[k]);
}

typedef void (*Builder)(Ops *o, const Shape *m, const SimTransformer *c);

/* Builds `layer`'s ops with `build`, its tensors in save order. */
static gboolean
attach(SimLayer *layer, Builder build, const Shape *m, const SimTransformer *c, const SimDevice *dev,
       GError **error)
{
  g_autofree gboolean *saved = g_new0(gboolean, MAX(layer->tensors->len, 1u));
  Ops o = { .l = layer, .dev = dev, .dt = c->dtype, .error = error, .saved = saved };
  guint64 want = layer->reduce_bytes; /* what sim_transformer_build counted from the parameters */
  sim_layer_begin_ops(layer);
  build(&o, m, c);
  if (o.failed)
    return FALSE;
  /* Gradients: each op's weights, and what the op lists do not name
   * (biases of ops = fused, gpt2's position table) with the last backward
   * op; allocated there unless they are static (grads = kept). */
  guint64 got = 0;
  for (guint i = 0; i < layer->ops->len; i++)
    got += g_array_index(layer->ops, SimLayerOp, i).grad_bytes;
  g_assert(got <= want);
  g_array_index(layer->ops, SimLayerOp, layer->ops->len - 1).grad_bytes += want - got;
  for (guint i = 0; i < layer->ops->len; i++) {
    SimLayerOp *op = &g_array_index(layer->ops, SimLayerOp, i);
    op->reduce_bytes = op->grad_bytes;
    if (c->grads_kept)
      op->grad_bytes = 0;
  }
  for (guint k = 0; k < layer->tensors->len; k++)
    g_assert(saved[k]); /* every tensor the layer lists is saved by one of its ops */
  g_autofree guint *order = save_order(layer);
  g_autofree guint *where = g_new(guint, MAX(layer->tensors->len, 1u));
  for (guint k = 0; k < layer->tensors->len; k++)
    where[order[k]] = k;
  permute(layer, order);
  for (guint u = 0; u < layer->uses->len; u++) {
    SimUse *use = &g_array_index(layer->uses, SimUse, u);
    use->tensor = (guint16)where[use->tensor];
  }
  sim_layer_finish_ops(layer);
  return TRUE;
}

gboolean
sim_transformer_ops_attach(SimWorkload *w, const SimTransformer *c, const SimDevice *dev, GError **error)
{
  Shape m = transformer_shape(c);
  Builder layer = c->hf_ops ? hf_layer_ops : fused_layer_ops;
  guint n = sim_workload_n_layers(w);
  /* Layers of one kind (dense, or MoE) list the same tensors in the same
   * order (the first's RoPE tables are its own, later ones' shared): one
   * op list for each kind, built on its first layer. */
  SimLayer *firsts[2] = { NULL, NULL };
  g_autoptr(GArray) dense_names = g_array_new(FALSE, FALSE, sizeof(const char *));
  g_autoptr(GArray) moe_names = g_array_new(FALSE, FALSE, sizeof(const char *));
  GArray *names[2] = { dense_names, moe_names };
  for (guint i = 0; i < n; i++) {
    SimLayer *l = sim_workload_layer(w, i);
    guint kind = sim_transformer_is_moe_layer(c, i);
    SimLayer *first = firsts[kind];
    if (first == NULL) {
      if (!attach(l, layer, &m, c, dev, error))
        return FALSE;
      firsts[kind] = l;
      /* The order attach gave it, by name. */
      for (guint k = 0; k < l->tensors->len; k++)
        g_array_append_val(names[kind], g_array_index(l->tensors, SimTensor, k).name);
      continue;
    }
    g_autofree guint *order = g_new(guint, MAX(l->tensors->len, 1u));
    for (guint k = 0; k < l->tensors->len; k++) {
      const char *name = g_array_index(names[kind], const char *, k);
      guint j = 0;
      while (g_array_index(l->tensors, SimTensor, j).name != name)
        j++;
      order[k] = j;
    }
    permute(l, order);
    sim_layer_share_ops(l, first);
  }
  return attach(w->embed, embed_ops, &m, c, dev, error) && attach(w->head, head_ops, &m, c, dev, error);
}
