/* Generated transformer workloads against Korthikanti et al. (2022), to the
 * byte, and the behaviour of selective checkpointing and reference packing. */
#include "testutil.h"

#include "base/error.h"
#include "input/hf_config.h"
#include "input/trace.h"
#include "lower/lower.h"

#include <math.h>
#include <string.h>

/* Megatron's GPT settings: layernorm, gelu, ffn = 4h, eager attention,
 * dropout (1-byte masks), 16-bit activations. */
static SimScenario *
gpt(guint h, guint a, guint s, guint b, guint layers, guint t, gboolean sp, const char *extra)
{
  g_autofree char *text = g_strdup_printf(
    "[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n"
    "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n"
    "[transformer]\nhidden = %u\nlayers = %u\nheads = %u\nffn = %u\nvocab = 51200\nbatch = %u\nseq = %u\n"
    "dtype = fp16\nnorm = layernorm\nmlp = gelu\nattention = eager\ndropout = 0.1\ntp = %u\nsp = %s\n%s",
    h, layers, a, 4 * h, b, s, t, sp ? "true" : "false", extra ? extra : "");
  return test_scenario_from_text(text);
}

/* Per-row norm statistics are real saved tensors that the paper leaves out. */
static gboolean
is_stats(const SimTensor *t)
{
  return g_str_has_suffix(t->name, "_stats") || strcmp(t->name, "softmax_lse") == 0;
}

static guint64
layer_bytes(const SimLayer *layer, gboolean only_kept_by_selective)
{
  guint64 sum = 0;
  for (guint i = 0; i < layer->tensors->len; i++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, i);
    if (is_stats(t) || (only_kept_by_selective && t->selective))
      continue;
    sum += t->bytes;
  }
  return sum;
}

typedef struct {
  guint h, a, s, b;
} Shape;

static const Shape shapes[] = {
  { 1024, 16, 2048, 1 },   /* GPT-2 medium-like */
  { 4096, 32, 4096, 2 },   /* 7B-like */
  { 12288, 96, 2048, 1 },  /* GPT-3 175B */
  { 2560, 20, 1024, 4 },
};

START_TEST(no_parallelism_matches_34_plus_5as_over_h)
{
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    const Shape *x = &shapes[i];
    g_autoptr(SimScenario) sc = gpt(x->h, x->a, x->s, x->b, 2, 1, FALSE, NULL);
    guint64 sbh = (guint64)x->s * x->b * x->h;
    guint64 expect = 34 * sbh + 5 * (guint64)x->a * x->s * x->s * x->b;
    ck_assert_uint_eq(layer_bytes(sim_workload_layer(sc->workload, 0), FALSE), expect);
    /* LayerNorm statistics: mean and rstd in fp32, two norms. */
    guint64 stats = 0;
    const SimLayer *layer = sim_workload_layer(sc->workload, 0);
    for (guint k = 0; k < layer->tensors->len; k++)
      if (is_stats(&g_array_index(layer->tensors, SimTensor, k)))
        stats += g_array_index(layer->tensors, SimTensor, k).bytes;
    ck_assert_uint_eq(stats, 2 * 8 * (guint64)x->s * x->b);
  }
}
END_TEST

/* Every shape at t = 2, 4 and 8 (where t divides the heads), without and
 * with sequence parallelism. */
static void
check_parallel(gboolean sp)
{
  guint tps[] = { 2, 4, 8 };
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    for (guint j = 0; j < G_N_ELEMENTS(tps); j++) {
      const Shape *x = &shapes[i];
      guint64 t = tps[j];
      if (x->a % t)
        continue;
      g_autoptr(SimScenario) sc = gpt(x->h, x->a, x->s, x->b, 2, (guint)t, sp, NULL);
      const SimLayer *layer = sim_workload_layer(sc->workload, 0);
      guint64 sbh = (guint64)x->s * x->b * x->h, scores = 5 * (guint64)x->a * x->s * x->s * x->b;
      if (!sp) {
        ck_assert_uint_eq(layer_bytes(layer, FALSE), 10 * sbh + 24 * sbh / t + scores / t);
        continue;
      }
      ck_assert_uint_eq(layer_bytes(layer, FALSE), (34 * sbh + scores) / t);
      /* Selective recompute keeps 34 s.b.h / t. */
      ck_assert_uint_eq(layer_bytes(layer, TRUE), 34 * sbh / t);
      /* Full recompute keeps the layer input, sharded by sequence parallelism. */
      ck_assert_uint_eq(layer->input_bytes, 2 * sbh / t);
    }
  }
}

START_TEST(tensor_parallel_matches_10_plus_24_over_t)
{
  check_parallel(FALSE);
}
END_TEST

START_TEST(sequence_parallel_divides_everything_by_t)
{
  check_parallel(TRUE);
}
END_TEST

START_TEST(full_recompute_keeps_2sbh)
{
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    const Shape *x = &shapes[i];
    g_autoptr(SimScenario) sc = gpt(x->h, x->a, x->s, x->b, 3, 1, FALSE,
                                    "[policy.full]\nkind = checkpoint\nmode = full\n"
                                    "[policy.resident]\nkind = resident\n");
    ck_assert_uint_eq(sim_workload_layer(sc->workload, 0)->input_bytes, 2 * (guint64)x->s * x->b * x->h);
    /* Through the engine: at the end of the forward pass full checkpointing
     * holds exactly L inputs beyond static and the embedding and head. */
    g_autoptr(SimResult) full = test_evaluate(sc, "full");
    g_autoptr(SimResult) resident = test_evaluate(sc, "resident");
    ck_assert(full->peak_device.bytes < resident->peak_device.bytes);
  }
}
END_TEST

START_TEST(saved_bytes_grow_by_one_layer_per_layer)
{
  g_autoptr(SimScenario) a = gpt(1024, 16, 2048, 1, 4, 1, FALSE, NULL);
  g_autoptr(SimScenario) b = gpt(1024, 16, 2048, 1, 5, 1, FALSE, NULL);
  g_autoptr(SimResult) ra = test_evaluate(a, "resident");
  g_autoptr(SimResult) rb = test_evaluate(b, "resident");
  ck_assert_uint_eq(rb->saved_bytes - ra->saved_bytes, sim_layer_saved_bytes(sim_workload_layer(a->workload, 0)));
  /* The whole step: layers, embedding and head. */
  ck_assert_uint_eq(ra->saved_bytes, 4 * sim_layer_saved_bytes(sim_workload_layer(a->workload, 0)) +
                                       sim_layer_saved_bytes(a->workload->embed) +
                                       sim_layer_saved_bytes(a->workload->head));
}
END_TEST

START_TEST(selective_checkpoint_recomputes_only_the_attention_core)
{
  g_autoptr(SimScenario) sc = gpt(1024, 16, 2048, 1, 4, 1, FALSE,
                                  "[policy.selective]\nkind = checkpoint\nmode = selective\n"
                                  "[policy.full]\nkind = checkpoint\n[policy.resident]\nkind = resident\n");
  g_autoptr(SimResult) sel = test_evaluate(sc, "selective");
  g_autoptr(SimResult) full = test_evaluate(sc, "full");
  g_autoptr(SimResult) res = test_evaluate(sc, "resident");
  const SimLayer *layer = sim_workload_layer(sc->workload, 0);
  double core = sim_layer_selective_recompute(layer);
  ck_assert(core > 0 && core < layer->forward);
  ck_assert_close(sel->recompute_ms, 4 * core * 1e3, 1e-9);
  ck_assert_close(full->recompute_ms, 4 * layer->forward * 1e3, 1e-9);
  ck_assert(res->peak_device.bytes > sel->peak_device.bytes);
  ck_assert(sel->peak_device.bytes > full->peak_device.bytes);
  /* Dropped: scores, mask and dropped probabilities, 5.a.s^2.b per layer. */
  guint64 dropped = 5ULL * 16 * 2048 * 2048;
  ck_assert_uint_eq(sim_layer_saved_bytes(layer) - layer_bytes(layer, TRUE) -
                      (sim_layer_saved_bytes(layer) - layer_bytes(layer, FALSE)),
                    dropped);
}
END_TEST

START_TEST(save_on_cpu_copies_every_reference_verl_every_storage)
{
  g_autoptr(SimScenario) sc = gpt(1024, 16, 512, 1, 4, 1, FALSE,
                                  "[policy.sync]\nkind = offload\nmode = sync\n"
                                  "[policy.sync-dedup]\nkind = offload\nmode = sync\ndedup = true\n");
  g_autoptr(SimResult) sync = test_evaluate(sc, "sync");
  g_autoptr(SimResult) dedup = test_evaluate(sc, "sync-dedup");
  guint refs = 0, tensors = 0;
  guint64 ref_bytes = 0, bytes = 0;
  for (guint i = 0; i < 4; i++) {
    const SimLayer *layer = sim_workload_layer(sc->workload, i);
    for (guint k = 0; k < layer->tensors->len; k++) {
      const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
      refs += t->refs;
      tensors++;
      ref_bytes += t->refs * t->bytes;
      bytes += t->bytes;
    }
  }
  ck_assert_uint_eq(sync->d2h_copies, refs);
  ck_assert_uint_eq(sync->d2h_bytes, ref_bytes);
  ck_assert_uint_eq(dedup->d2h_copies, tensors);
  ck_assert_uint_eq(dedup->d2h_bytes, bytes);
  ck_assert(refs > tensors); /* qkv_in is read by q, k and v */
  ck_assert_uint_eq(sync->h2d_bytes, sync->d2h_bytes);
  ck_assert_uint_eq(sync->saved_bytes, dedup->saved_bytes);
}
END_TEST

START_TEST(static_memory_follows_the_optimizer)
{
  const char *base = "[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n"
                     "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n"
                     "[transformer]\nhidden = 1024\nlayers = 2\nheads = 16\nffn = 4096\nvocab = 1000\n"
                     "batch = 1\nseq = 128\n";
  g_autofree char *adam = g_strconcat(base, "optimizer = adamw\nmaster_weights = true\n", NULL);
  g_autofree char *none = g_strconcat(base, "optimizer = none\nmaster_weights = false\n", NULL);
  g_autoptr(SimScenario) a = test_scenario_from_text(adam);
  g_autoptr(SimScenario) n = test_scenario_from_text(none);
  /* Parameters by hand: per layer 4h^2 (attention) + 3.h.ffn (SwiGLU) + 2h
   * (two RMSNorms); embedding and untied head V.h each; final norm h. */
  guint64 h = 1024, layer = 4 * h * h + 3 * h * 4096 + 2 * h, p = 2 * layer + 2 * 1000 * h + h;
  ck_assert_uint_eq(a->workload->static_bytes, p * (2 + 2 + 8 + 4));
  ck_assert_uint_eq(n->workload->static_bytes, p * (2 + 2));
}
END_TEST

START_TEST(presets_have_their_published_parameter_counts)
{
  /* HuggingFace's num_parameters() for these checkpoints. */
  struct {
    const char *config;
    guint64 parameters;
  } presets[] = {
    { "qwen2.5-0.5b.json", 494032768ULL },
    { "llama-3.1-8b.json", 8030261248ULL },
  };
  for (guint i = 0; i < G_N_ELEMENTS(presets); i++) {
    SimTransformer t;
    sim_transformer_defaults(&t);
    g_autoptr(GError) error = NULL;
    g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, "models", presets[i].config, NULL);
    ck_assert_msg(sim_hf_config_load(path, &t, &error), "%s", error ? error->message : "");
    ck_assert_uint_eq(sim_transformer_parameters(&t), presets[i].parameters);
  }
}
END_TEST

START_TEST(times_follow_flops_and_bytes)
{
  /* Forward FLOPs of a Megatron GPT layer: 24.b.s.h^2 + 4.b.s^2.h. */
  g_autoptr(SimScenario) sc = gpt(1024, 16, 2048, 1, 2, 1, FALSE, NULL);
  const SimLayer *layer = sim_workload_layer(sc->workload, 0);
  double h = 1024, s = 2048, b = 1;
  double flops = 24 * b * s * h * h + 4 * b * s * s * h;
  double mm = 312e12 * 0.5;
  /* The matmul part alone is a lower bound; the elementwise part is bounded
   * by a few dozen passes over the activations at 2 TB/s. */
  ck_assert(layer->forward > flops / mm);
  ck_assert(layer->forward < flops / mm + 64 * (34 * s * b * h + 5 * 16 * s * s * b) / 2e12);
  /* Op by op: the forward's GEMMs are exactly those FLOPs (the flat time
   * model), and the backward's twice them (each GEMM's dgrad and wgrad);
   * the rest is memory-bound. */
  ck_assert(sim_layer_has_ops(layer));
  double gemm[2] = { 0, 0 }, memory = 0;
  for (guint i = 0; i < layer->ops->len; i++) {
    const SimLayerOp *op = sim_layer_op(layer, i);
    if (op->kclass == SIM_KERNEL_GEMM)
      gemm[op->backward] += op->seconds;
    else
      memory += op->seconds;
  }
  ck_assert_close(gemm[0] * mm, flops, 1e-9 * flops);
  ck_assert_close(gemm[1], 2 * gemm[0], 1e-12 * gemm[0]);
  ck_assert_close(layer->forward + layer->backward, gemm[0] + gemm[1] + memory, 1e-12 * layer->backward);
}
END_TEST

START_TEST(hf_config_reads_qwen2_llama_mistral_gpt2)
{
  SimTransformer t;
  sim_transformer_defaults(&t);
  g_autoptr(GError) error = NULL;
  const char *qwen = "{\"model_type\": \"qwen2\", \"hidden_size\": 896, \"num_hidden_layers\": 24,"
                     "\"num_attention_heads\": 14, \"num_key_value_heads\": 2, \"intermediate_size\": 4864,"
                     "\"vocab_size\": 151936, \"tie_word_embeddings\": true}";
  ck_assert(sim_hf_config_load_data(qwen, -1, "qwen.json", &t, &error));
  ck_assert_uint_eq(t.hidden, 896);
  ck_assert_uint_eq(t.kv_heads, 2);
  ck_assert_uint_eq(t.head_dim, 64);
  ck_assert(t.tied_embeddings && t.qkv_bias && !t.layernorm && !t.gelu);
  const char *gpt2 = "{\"model_type\": \"gpt2\", \"n_embd\": 768, \"n_layer\": 12, \"n_head\": 12,"
                     "\"vocab_size\": 50257, \"n_positions\": 1024, \"n_inner\": null}";
  ck_assert(sim_hf_config_load_data(gpt2, -1, "gpt2.json", &t, &error));
  ck_assert_uint_eq(t.ffn, 3072);
  ck_assert(t.layernorm && t.gelu && t.tied_embeddings && t.linear_bias);
  ck_assert_uint_eq(t.max_positions, 1024);

  const char *missing = "{\"model_type\": \"llama\", \"num_hidden_layers\": 2}";
  ck_assert(!sim_hf_config_load_data(missing, -1, "m.json", &t, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "m.json: missing field 'hidden_size'"));
  g_clear_error(&error);
  const char *unknown = "{\"model_type\": \"bert\"}";
  ck_assert(!sim_hf_config_load_data(unknown, -1, "b.json", &t, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "'bert' is not supported"));
  g_clear_error(&error);
  const char *typed = "{\"model_type\": \"mistral\", \"hidden_size\": \"4096\"}";
  ck_assert(!sim_hf_config_load_data(typed, -1, "t.json", &t, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "field 'hidden_size': expected an integer"));
  g_clear_error(&error);
  /* Each reader names the field and what it expected: range, type, probability. */
#define LLAMA_BASE "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, " \
                   "\"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 1000"
  static const struct {
    const char *json, *message;
  } bad[] = {
    { LLAMA_BASE ", \"num_key_value_heads\": 70000}", "r.json: field 'num_key_value_heads': expected an integer from 1 to 65536" },
    { LLAMA_BASE ", \"tie_word_embeddings\": 1}", "r.json: field 'tie_word_embeddings': expected true or false" },
    { LLAMA_BASE ", \"attention_dropout\": 1.0}", "r.json: field 'attention_dropout': expected a probability in [0, 1)" },
    { LLAMA_BASE ", \"attention_dropout\": [0.1]}", "r.json: field 'attention_dropout': expected a probability in [0, 1)" },
  };
#undef LLAMA_BASE
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    ck_assert(!sim_hf_config_load_data(bad[i].json, -1, "r.json", &t, &error));
    ck_assert_str_eq(error->message, bad[i].message);
    g_clear_error(&error);
  }
  ck_assert(!sim_hf_config_load_data("{", -1, "x.json", &t, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "x.json:1:1: not valid JSON"));
}
END_TEST

/* json-glib recurses per level: 100,000 '[' crashed it (exit 139).  Depth
 * is counted first, outside strings; past SIM_HF_CONFIG_MAX_DEPTH it is an
 * error naming the file and line, at or under it the file loads. */
#define GPT2_FIELDS "\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4, " \
                    "\"vocab_size\": 100, \"n_positions\": 128"
static char *
nested(guint depth, const char *open, const char *close)
{
  GString *text = g_string_new("{" GPT2_FIELDS ",\n\"extra\": ");
  for (guint i = 1; i < depth; i++)
    g_string_append(text, open);
  g_string_append(text, "0");
  for (guint i = 1; i < depth; i++)
    g_string_append(text, close);
  g_string_append(text, "}");
  return g_string_free(text, FALSE);
}

START_TEST(hf_config_nesting_is_bounded_before_parsing)
{
  SimTransformer t;
  sim_transformer_defaults(&t);
  static const guint depths[] = { 65, 1000, 100000, 1000000 };
  for (guint i = 0; i < G_N_ELEMENTS(depths); i++) {
    for (guint kind = 0; kind < 2; kind++) {
      g_autofree char *json = kind ? nested(depths[i], "{\"a\":", "}") : nested(depths[i], "[", "]");
      g_autoptr(GError) error = NULL;
      ck_assert(!sim_hf_config_load_data(json, -1, "deep.json", &t, &error));
      ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
      ck_assert_str_eq(error->message, "deep.json:2: objects and arrays nest deeper than 64 levels (a config.json "
                                       "needs a few)");
    }
  }
  /* Exactly the limit loads; brackets inside strings, escaped quotes
   * included, are not nesting. */
  g_autofree char *limit = nested(SIM_HF_CONFIG_MAX_DEPTH, "[", "]");
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sim_hf_config_load_data(limit, -1, "limit.json", &t, &error), "%s", error ? error->message : "");
  GString *quoted = g_string_new("{" GPT2_FIELDS ", \"s\": \"\\\"");
  for (guint i = 0; i < 10000; i++)
    g_string_append(quoted, "[{");
  g_string_append(quoted, "\"}");
  g_autofree char *text = g_string_free(quoted, FALSE);
  ck_assert_msg(sim_hf_config_load_data(text, -1, "quoted.json", &t, &error), "%s", error ? error->message : "");
  ck_assert_uint_eq(t.hidden, 64);
}
END_TEST

/* The parser's errors name the user's file, line and column, not json-glib's
 * "<data>"; a scenario or a profile given as a config.json says so. */
START_TEST(hf_config_parse_errors_name_the_file)
{
  SimTransformer t;
  sim_transformer_defaults(&t);
  g_autoptr(GError) error = NULL;
  ck_assert(!sim_hf_config_load_data("{\n  \"model_type\": x}", -1, "c.json", &t, &error));
  ck_assert_str_eq(error->message, "c.json:2:17: not valid JSON: unexpected identifier `x', expected value");
  g_clear_error(&error);
  ck_assert(!sim_hf_config_load_data("[device]\nmemory = 80GiB\n", -1, "h100.ini", &t, &error));
  ck_assert_ptr_null(strstr(error->message, "<data>"));
  ck_assert_ptr_nonnull(strstr(error->message, "h100.ini:1:"));
  ck_assert_ptr_nonnull(strstr(error->message, "(this looks like a scenario or profile file, not a HuggingFace "
                                               "config.json)"));
  g_clear_error(&error);
  ck_assert(!sim_hf_config_load_data("# a profile\n[device]\n", -1, "p.ini", &t, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "p.ini:1:1: not valid JSON: "));
  ck_assert_ptr_nonnull(strstr(error->message, "looks like a scenario or profile file"));
}
END_TEST

/* One validation for both ways in: what a config.json derives (head_dim
 * from n_embd / n_head) is held to the range of the [transformer] key it
 * sets, and so is a scenario's derived head_dim; every failure names the
 * config.json's field. */
START_TEST(hf_config_and_transformer_group_share_one_validation)
{
  static const struct {
    const char *json, *message;
  } bad[] = {
    /* GPT-2 with n_embd 872190, n_head 6: head_dim 145365, which a
     * [transformer] group refuses; hf_config used to accept it. */
    { "{\"model_type\": \"gpt2\", \"n_embd\": 872190, \"n_layer\": 2, \"n_head\": 6, \"vocab_size\": 100, "
      "\"n_positions\": 128}",
      "g.json: head_dim (n_embd / n_head): expected a whole number from 1 to 65536, got 145365" },
    { "{\"model_type\": \"gpt2\", \"n_embd\": 100, \"n_layer\": 2, \"n_head\": 7, \"vocab_size\": 100, "
      "\"n_positions\": 128}",
      "g.json: field 'n_head': 7 does not divide n_embd (100)" },
    { "{\"model_type\": \"llama\", \"hidden_size\": 4, \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
      "\"intermediate_size\": 16, \"vocab_size\": 100}",
      "g.json: head_dim (hidden_size / num_attention_heads): field 'num_attention_heads' (8) does not divide field "
      "'hidden_size' (4); give head_dim" },
    { "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
      "\"num_key_value_heads\": 3, \"intermediate_size\": 16, \"vocab_size\": 100}",
      "g.json: field 'num_key_value_heads': 3 does not divide field 'num_attention_heads' (8)" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    SimTransformer t;
    sim_transformer_defaults(&t);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(!sim_hf_config_load_data(bad[i].json, -1, "g.json", &t, &error), "case %u loaded", i);
    ck_assert(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT));
    ck_assert_str_eq(error->message, bad[i].message);
  }
  /* The same through a scenario: hf_config names the config.json; a
   * written shape whose derived head_dim is out of range is refused too
   * (hidden = 1048576, heads = 1 used to load with head_dim 1048576). */
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *json = g_build_filename(dir, "g.json", NULL);
  ck_assert(g_file_set_contents(json, bad[0].json, -1, NULL));
  const char *machine = "[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n"
                        "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n";
  g_autofree char *hf = g_strdup_printf("%s[transformer]\nhf_config = %s\nbatch = 1\nseq = 8\n", machine, json);
  g_autofree char *msg = test_scenario_error(hf);
  ck_assert_msg(strstr(msg, "head_dim (n_embd / n_head): expected a whole number from 1 to 65536, got 145365"), "%s",
                msg);
  g_autofree char *wide = g_strdup_printf("%s[transformer]\nhidden = 1048576\nlayers = 1\nheads = 1\nffn = 1\n"
                                          "vocab = 1\nbatch = 1\nseq = 1\n", machine);
  g_autofree char *wide_msg = test_scenario_error(wide);
  ck_assert_msg(strstr(wide_msg, "[transformer] head_dim: expected a whole number from 1 to 65536, got 1048576"), "%s",
                wide_msg);
  test_tmp_dir_remove(dir);
}
END_TEST

START_TEST(transformer_bad_input_is_named)
{
  const char *base = "[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n"
                     "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n";
  struct {
    const char *group;
    const char *piece;
  } cases[] = {
    { "[transformer]\nhidden = 64\nlayers = 2\nheads = 4\nffn = 256\nvocab = 10\nbatch = 1\n", "[transformer] seq: missing" },
    { "[transformer]\nhidden = 64\nlayers = 2\nheads = 4\nffn = 256\nvocab = 10\nbatch = 1\nseq = 8\nkv_heads = 3\n",
      "kv_heads: 3 does not divide heads" },
    { "[transformer]\nhidden = 64\nlayers = 2\nheads = 4\nffn = 256\nvocab = 10\nbatch = 1\nseq = 8\ntp = 3\n", "tp: 3 must divide" },
    { "[transformer]\nhidden = 64\nlayers = 2\nheads = 4\nffn = 256\nvocab = 10\nbatch = 1\nseq = 8\ndtype = fp8\n",
      "[transformer] dtype: expected one of fp32, bf16, fp16" },
    { "[transformer]\nhidden = 66\nlayers = 2\nheads = 4\nffn = 256\nvocab = 10\nbatch = 1\nseq = 8\n",
      "head_dim: heads (4) does not divide hidden (66)" },
    { "[transformer]\nhf_config = nope.json\nbatch = 1\nseq = 8\n", "[transformer] hf_config: ./nope.json: cannot read" },
    { "[transformer]\nhidden = 64\nlayers = 2\nheads = 4\nffn = 256\nvocab = 10\nbatch = 1\nseq = 8\n"
      "[model]\nlayers = 1\nforward = 1ms\ninput = 0\ntensors =\n",
      "a scenario has one of [model], [transformer] or [trace], not both" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *text = g_strconcat(base, cases[i].group, NULL);
    g_autofree char *msg = test_scenario_error(text);
    ck_assert_msg(strstr(msg, cases[i].piece) != NULL, "expected '%s' in: %s", cases[i].piece, msg);
  }
  /* Generated workloads need the device's throughput. */
  g_autofree char *msg = test_scenario_error(
    "[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n"
    "[transformer]\nhidden = 64\nlayers = 2\nheads = 4\nffn = 256\nvocab = 10\nbatch = 1\nseq = 8\n");
  ck_assert_ptr_nonnull(strstr(msg, "matmul_tflops and hbm_bandwidth"));
}
END_TEST

/* ---- against PyTorch recordings ------------------------------------------- */

typedef struct {
  const char *csv;
  guint hidden, layers, heads, kv_heads, ffn, vocab, batch, seq;
} Recording;

static const Recording recordings[] = {
  { "qwen2-tiny.csv", 256, 2, 4, 2, 704, 1000, 2, 128 },
  { "qwen2-small.csv", 512, 4, 8, 2, 1408, 4096, 2, 256 },
};

static SimScenario *
recorded(const Recording *r)
{
  g_autofree char *text = g_strdup_printf(
    "[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n"
    "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n"
    "[trace]\nfile = %s/trace/%s\nforward = 1ms\n",
    OFFSIM_TEST_DATA, r->csv);
  return test_scenario_from_text(text);
}

static SimScenario *
generated(const Recording *r)
{
  /* The recorder's model: fp32, eager attention, q/k/v biases, untied head. */
  g_autofree char *text = g_strdup_printf(
    "[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n"
    "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n"
    "[transformer]\nhidden = %u\nlayers = %u\nheads = %u\nkv_heads = %u\nffn = %u\nvocab = %u\n"
    "batch = %u\nseq = %u\ndtype = fp32\nattention = eager\nqkv_bias = true\n",
    r->hidden, r->layers, r->heads, r->kv_heads, r->ffn, r->vocab, r->batch, r->seq);
  return test_scenario_from_text(text);
}

static void
assert_within(guint64 generated_bytes, guint64 recorded_bytes, double tolerance, const char *what, guint layer)
{
  double ratio = (double)generated_bytes / (double)recorded_bytes;
  ck_assert_msg(fabs(ratio - 1) <= tolerance, "%s %u: generated %" G_GUINT64_FORMAT " B, recorded %" G_GUINT64_FORMAT
                " B (ratio %.4f)", what, layer, generated_bytes, recorded_bytes, ratio);
}

START_TEST(generator_matches_pytorch_recordings_within_5_percent)
{
  for (guint i = 0; i < G_N_ELEMENTS(recordings); i++) {
    g_autoptr(SimScenario) rec = recorded(&recordings[i]);
    g_autoptr(SimScenario) gen = generated(&recordings[i]);
    ck_assert_uint_eq(sim_workload_n_layers(rec->workload), recordings[i].layers);
    for (guint l = 0; l < recordings[i].layers; l++) {
      const SimLayer *a = sim_workload_layer(gen->workload, l), *b = sim_workload_layer(rec->workload, l);
      assert_within(sim_layer_saved_bytes(a), sim_layer_saved_bytes(b), 0.05, "layer", l);
      /* What full checkpointing keeps is exactly the layer input. */
      ck_assert_uint_eq(a->input_bytes, b->input_bytes);
    }
    assert_within(sim_layer_saved_bytes(gen->workload->head), sim_layer_saved_bytes(rec->workload->head), 0.05,
                  "head", 0);
    assert_within(sim_layer_saved_bytes(gen->workload->embed), sim_layer_saved_bytes(rec->workload->embed), 0.05,
                  "embed", 0);
  }
}
END_TEST

START_TEST(recordings_count_references_and_storages)
{
  g_autoptr(SimScenario) rec = recorded(&recordings[0]);
  g_autoptr(SimScenario) gen = generated(&recordings[0]);
  /* References: the generator's refs per layer equal the recorded packs of
   * the same tensors (qkv_in 3, mlp_in 2, the softmax output 2). */
  for (guint l = 0; l < 2; l++) {
    const SimLayer *layer = sim_workload_layer(rec->workload, l);
    guint max_refs = 0, refs = 0;
    for (guint k = 0; k < layer->tensors->len; k++) {
      max_refs = MAX(max_refs, g_array_index(layer->tensors, SimTensor, k).refs);
      refs += g_array_index(layer->tensors, SimTensor, k).refs;
    }
    ck_assert_uint_eq(max_refs, 3);
    const SimLayer *g = sim_workload_layer(gen->workload, l);
    guint gen_refs = 0;
    for (guint k = 0; k < g->tensors->len; k++)
      gen_refs += g_array_index(g->tensors, SimTensor, k).refs;
    /* Layer 0 also saves the RoPE tables (cos and sin, two packs each),
     * shared with every later layer and counted once, there. */
    ck_assert_uint_eq(refs, gen_refs + (l == 0 ? 4 + 1 : 1)); /* + the softmax scale scalar */
  }
  ck_assert_uint_eq(rec->workload->head->tensors->len, gen->workload->head->tensors->len + 1); /* + loss weight */
}
END_TEST

START_TEST(trace_errors_name_file_line_and_column)
{
  struct {
    const char *csv;
    const char *piece;
  } cases[] = {
    { "layer,op,name,bytes,dtype,shape\n", "t.csv:1: missing column 'is_parameter'" },
    { "layer,op,name,bytes,dtype,shape,is_parameter\n0,a,b,12x,f,1,0\n", "t.csv:2: column 'bytes'" },
    { "layer,op,name,bytes,dtype,shape,is_parameter\nfoo,a,b,1,f,1,0\n", "t.csv:2: column 'layer'" },
    { "layer,op,name,bytes,dtype,shape,is_parameter\n0,a,b,1,f,1\n", "t.csv:2: expected 7 fields" },
    { "layer,op,name,bytes,dtype,shape,is_parameter\n0,\"a\",b,1,f,1,0\n", "t.csv:2: quoted fields" },
    { "layer,op,name,bytes,dtype,shape,is_parameter\n1,a,b,1,f,1,0\n", "t.csv: layer 0 has no rows" },
    { "layer,op,name,bytes,dtype,shape,is_parameter\nhead,a,b,1,f,1,0\n", "no rows of any layer" },
    { "", "t.csv: empty file" },
    { "layer,op,name,bytes,dtype,shape,is_parameter\n0,a,b,1,f,1,2\n", "t.csv:2: column 'is_parameter'" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(SimWorkload) w = sim_trace_load_data(cases[i].csv, strlen(cases[i].csv), "t.csv", "x", &error);
    ck_assert_msg(w == NULL, "case %u loaded", i);
    ck_assert_msg(strstr(error->message, cases[i].piece) != NULL, "expected '%s' in: %s", cases[i].piece,
                  error->message);
  }
  /* Without a storage column every row is its own tensor; CRLF is fine. */
  const char *plain = "layer,op,name,bytes,dtype,shape,is_parameter\r\n0,a,b,10,f,1,0\r\n0,a,b,20,f,1,0\r\n"
                      "0,w,leaf,99,f,1,1\r\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(SimWorkload) w = sim_trace_load_data(plain, strlen(plain), "p.csv", "x", &error);
  ck_assert_ptr_nonnull(w);
  ck_assert_uint_eq(sim_layer_saved_bytes(sim_workload_layer(w, 0)), 30); /* the parameter is static */
  ck_assert_uint_eq(sim_workload_layer(w, 0)->tensors->len, 2);
}
END_TEST

static Suite *
transformer_suite(void)
{
  Suite *s = suite_create("transformer");
  TCase *tc = tcase_create("korthikanti");
  tcase_add_test(tc, no_parallelism_matches_34_plus_5as_over_h);
  tcase_add_test(tc, tensor_parallel_matches_10_plus_24_over_t);
  tcase_add_test(tc, sequence_parallel_divides_everything_by_t);
  tcase_add_test(tc, full_recompute_keeps_2sbh);
  tcase_add_test(tc, saved_bytes_grow_by_one_layer_per_layer);
  tcase_add_test(tc, selective_checkpoint_recomputes_only_the_attention_core);
  tcase_add_test(tc, save_on_cpu_copies_every_reference_verl_every_storage);
  tcase_add_test(tc, static_memory_follows_the_optimizer);
  tcase_add_test(tc, times_follow_flops_and_bytes);
  tcase_add_test(tc, presets_have_their_published_parameter_counts);
  tcase_add_test(tc, hf_config_reads_qwen2_llama_mistral_gpt2);
  tcase_add_test(tc, hf_config_nesting_is_bounded_before_parsing);
  tcase_add_test(tc, hf_config_parse_errors_name_the_file);
  tcase_add_test(tc, hf_config_and_transformer_group_share_one_validation);
  tcase_add_test(tc, transformer_bad_input_is_named);
  tcase_add_test(tc, generator_matches_pytorch_recordings_within_5_percent);
  tcase_add_test(tc, recordings_count_references_and_storages);
  tcase_add_test(tc, trace_errors_name_file_line_and_column);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  return test_run_suite(transformer_suite());
}
