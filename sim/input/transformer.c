#include "transformer.h"

#include "error.h"
#include "schema.h"
#include "units.h"

#include <math.h>

const char *const sim_dtype_names[] = { "fp32", "bf16", "fp16", NULL };
G_STATIC_ASSERT(G_N_ELEMENTS(sim_dtype_names) == SIM_DTYPE_COUNT + 1);

guint
sim_dtype_bytes(SimDtype dtype)
{
  static const guint bytes[SIM_DTYPE_COUNT] = { 4, 2, 2 };
  g_assert(dtype < SIM_DTYPE_COUNT);
  return bytes[dtype];
}

void
sim_transformer_defaults(SimTransformer *c)
{
  *c = (SimTransformer){ 0 };
  sim_schema_apply_defaults(SIM_GROUP_TRANSFORMER, c);
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
  if (shape_only)
    return TRUE;
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
  return TRUE;
#undef N
}

gboolean
sim_transformer_validate(const SimTransformer *c, const char *const *names, GError **error)
{
  return check(c, FALSE, names, error);
}

gboolean
sim_transformer_validate_shape(const SimTransformer *c, const char *const *names, GError **error)
{
  return check(c, TRUE, names, error);
}

guint64
sim_transformer_parameters(const SimTransformer *c)
{
  guint64 h = c->hidden, q = (guint64)c->heads * c->head_dim, kv = (guint64)c->kv_heads * c->head_dim, f = c->ffn,
          t = c->tp;
  guint64 norm = c->layernorm ? 2 * h : h;
  guint64 attn = h * (q + 2 * kv) + q * h;
  if (c->qkv_bias || c->linear_bias)
    attn += q + 2 * kv;
  if (c->linear_bias)
    attn += h;
  guint64 mlp = (c->gelu ? 2 : 3) * h * f;
  if (c->linear_bias)
    mlp += (c->gelu ? f : 2 * f) + h;
  guint64 layer = (attn + mlp) / t + 2 * norm;
  guint64 embed = c->vocab * h / t + (guint64)c->max_positions * h;
  guint64 head = (c->tied_embeddings ? 0 : c->vocab * h / t) + norm;
  /* Within the loaders' bounds everything but the product with the layer
   * count stays below 2^57: saturate that one rather than wrap. */
  if (c->layers && layer > (G_MAXUINT64 - embed - head) / c->layers)
    return G_MAXUINT64;
  return layer * c->layers + embed + head;
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
  add(layer, stats, mul(k, g->rows, c->layernorm ? 8 : 4) / g->sr, 1);
}

static void
build_layer(SimLayer *layer, const SimTransformer *c, const Geometry *g, const SimDevice *dev, Checked *k)
{
  guint64 row_h = mul3(k, g->rows, g->h, g->e) / g->sr;
  guint64 row_f = mul3(k, g->rows, g->f, g->e) / g->t;
  guint64 scores = mul(k, g->scores, g->e);
  gboolean drop = c->dropout > 0;
  double mm = dev->matmul_flops * dev->efficiency, hbm = dev->hbm_bandwidth;

  /* Attention. */
  add_norm(layer, c, g, k, "attn_norm_in", "attn_norm_stats");
  add(layer, "qkv_in", row_h, 3);
  add(layer, "q", mul3(k, g->rows, g->qd, g->e) / g->t, 1);
  add(layer, "k", mul3(k, g->rows, g->kvd, g->e) / g->t, 1);
  add(layer, "v", mul3(k, g->rows, g->kvd, g->e) / g->t, 1);
  double score_flops = 2.0 * (double)g->scores * (double)(g->qd / c->heads);
  if (c->flash) {
    add(layer, "softmax_lse", mul3(k, g->rows, c->heads, 4) / g->t, 1);
  } else {
    /* Without dropout the PV matmul reads the softmax output itself. */
    SimTensor *sm = add(layer, "scores_softmax", scores, drop ? 1 : 2);
    double core_bytes = 2.0 * (double)scores + (drop ? (double)scores + (double)g->scores * (double)(2 * g->e + 1) : 0);
    sm->selective = TRUE;
    sm->recompute = score_flops / mm + core_bytes / hbm;
    if (drop) {
      add(layer, "attn_dropout_mask", g->scores, 1)->selective = TRUE;
      add(layer, "attn_probs_dropped", scores, 1)->selective = TRUE;
    }
  }
  add(layer, "attn_out", mul3(k, g->rows, g->qd, g->e) / g->t, c->flash ? 2 : 1);
  if (drop)
    add(layer, "attn_resid_mask", mul(k, g->rows, g->h) / g->sr, 1);

  /* MLP. */
  add_norm(layer, c, g, k, "mlp_norm_in", "mlp_norm_stats");
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
    add(layer, "mlp_resid_mask", mul(k, g->rows, g->h) / g->sr, 1);

  /* Times: matmuls at the reachable rate, elementwise work at HBM speed. */
  double rows = (double)g->rows, h = (double)g->h, t = (double)g->t, e = (double)g->e;
  double flops = 2 * rows * h * (double)(g->qd + 2 * g->kvd) / t /* q, k, v */
                 + 2 * rows * (double)g->qd * h / t             /* output projection */
                 + (c->gelu ? 4 : 6) * rows * h * (double)g->f / t /* MLP */
                 + 2 * score_flops * (c->flash ? 0.5 : 1.0);      /* QK^T and PV; causal flash skips half */
  double bytes = 2 * 2 * (double)row_h                            /* two norms: read and write */
                 + 2 * 3 * (double)row_h                          /* two residual adds */
                 + (c->gelu ? 2 : 5) * (double)row_f;             /* GeLU, or SiLU and the product */
  if (!c->flash)
    bytes += 2.0 * (double)scores + (drop ? (double)g->scores * (2 * e + 1) : 0);
  if (drop)
    bytes += 2 * rows * h / (double)g->sr * (2 * e + 1);
  layer->forward = flops / mm + bytes / hbm;
  layer->backward = 2 * layer->forward;
  /* The checkpointed input is the residual stream entering the layer. */
  layer->input_bytes = row_h;
  /* Backward holds the gradients of the widest activations at once. */
  guint64 grads = MAX(mul(k, 2, row_f), c->flash ? 0 : mul(k, 2, scores));
  layer->workspace_bytes = grads + mul(k, 2, row_h);
}

static void
build_embed(SimLayer *stage, const SimTransformer *c, const Geometry *g, const SimDevice *dev, Checked *k)
{
  add(stage, "token_ids", mul(k, g->rows, 8), 1)->offloadable = FALSE;
  /* A gather: read and write one row of h per token. */
  stage->forward = 2.0 * (double)g->rows * (double)g->h * (double)g->e / dev->hbm_bandwidth;
  stage->backward = 2 * stage->forward;
  (void)c;
}

static void
build_head(SimLayer *stage, const SimTransformer *c, const Geometry *g, const SimDevice *dev, Checked *k)
{
  guint64 logits = mul(k, g->rows, c->vocab) / g->t;
  guint64 upcast = g->e == 4 ? 0 : mul(k, logits, 4); /* .float() is a no-op in fp32 */
  add_norm(stage, c, g, k, "final_norm_in", "final_norm_stats");
  add(stage, "lm_head_in", mul3(k, g->rows, g->h, g->e), 1);
  /* log_softmax saves its output and nll_loss reads it again, with the labels. */
  add(stage, "log_softmax", mul(k, logits, 4), 2);
  add(stage, "labels", mul(k, g->rows, 8), 1)->offloadable = FALSE;
  /* Transient: the logits and their fp32 copy exist together while the loss
   * is computed, and their gradients in backward: the step's sharpest peak. */
  stage->workspace_bytes = mul(k, logits, g->e) + upcast;
  double flops = 2.0 * (double)g->rows * (double)g->h * (double)c->vocab / (double)g->t;
  double bytes = 4.0 * (double)g->rows * (double)g->h * (double)g->e /* norm */
                 + (double)logits * (double)g->e                     /* logits written */
                 + (double)upcast * 1.5                              /* read bf16, write fp32 */
                 + 2.0 * (double)mul(k, logits, 4);                  /* log_softmax */
  stage->forward = flops / (dev->matmul_flops * dev->efficiency) + bytes / dev->hbm_bandwidth;
  stage->backward = 2 * stage->forward;
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
  for (guint i = 0; i < c->layers; i++)
    build_layer(sim_workload_layer(w, i), c, &g, dev, &k);
  build_embed(sim_workload_add_embed(w), c, &g, dev, &k);
  build_head(sim_workload_add_head(w), c, &g, dev, &k);

  guint64 p = sim_transformer_parameters(c);
  guint e = sim_dtype_bytes(c->dtype);
  guint64 per_param = 2 * e + (c->adamw ? 8 : 0) + (c->master_weights && e != 4 ? 4 : 0);
  w->static_bytes = mul(&k, p, per_param);
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
}
