/* tests/test_transformer_moe.c — mixtures of experts (sim/input/transformer.h):
 * the published parameter counts of real configs against hand computations,
 * routing (balanced, an imbalance, a capacity) by hand, an ops = fused MoE
 * layer's saved bytes by hand, which layers are MoE, and every bad MoE input
 * named.  The op-by-op match with real autograd is tests/test_trace_hf.c's
 * (recordings of python/offsim_torch/moe_models.py). */
#include "testutil.h"

#include "base/error.h"
#include "input/hf_config.h"
#include "input/transformer.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static const char machine[] = "[device]\nmemory = 141GiB\nmatmul_tflops = 795\nhbm_bandwidth = 4.8TB/s\n"
                              "[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\n";

static void
load(const char *path, SimTransformer *t)
{
  sim_transformer_defaults(t);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sim_hf_config_load(path, t, &error), "%s", error ? error->message : "");
}

/* Qwen3-30B-A3B (scenarios/moe/qwen3-30b-a3b.json, its config.json): per
 * layer q 2048 x 4096, k and v 2048 x 512 each, o 4096 x 2048 = 18,874,368;
 * two RMSNorms 4,096; q_norm and k_norm 256; the router 2048 x 128 =
 * 262,144; 128 experts of 3 x 2048 x 768 = 603,979,776: 623,120,640, times
 * 48 = 29,909,790,720; the embedding and the untied LM head 151,936 x 2048
 * each and the final norm 2,048: 30,532,122,624.  Active: 8 experts,
 * 37,748,736, instead of 128: 56,889,600 per layer, 3,353,032,704.  The
 * model card (huggingface.co/Qwen/Qwen3-30B-A3B, "30.5B in total and 3.3B
 * activated"; as quoted at apxml.com/models/qwen3-30b-a3b) writes these to
 * one decimal, the active count truncated.
 *
 * Mixtral-8x7B (scenarios/moe/mixtral-8x7b.json): per layer attention
 * 2 x 4096^2 + 2 x 4096 x 1024 = 41,943,040, norms 8,192, router 32,768, 8
 * experts of 3 x 4096 x 14336 = 1,409,286,144: 1,451,270,144, times 32 =
 * 46,440,644,608; embedding and head 32,000 x 4096 each and the final norm:
 * 46,702,792,704.  Active: 2 experts, 352,321,536: 394,305,536 per layer,
 * 12,879,925,248.  Mistral AI's announcement ("Mixtral of experts",
 * mistral.ai/news/mixtral-of-experts: "46.7B total parameters but only uses
 * 12.9B parameters per token"; as quoted at golden.com/wiki/Mixtral_8x7B).
 *
 * DeepSeek-V3 (scenarios/moe/deepseek-v3.json): MLA per layer q_a 7168 x
 * 1536, its norm 1536, q_b 1536 x 128.192, kv_a 7168 x 576, its norm 512,
 * kv_b 512 x 128.256, o 128.128 x 7168: 187,107,328; two norms 14,336; the
 * first 3 layers dense (3 x 7168 x 18432 = 396,361,728): 583,483,392 each;
 * the other 58 a router 256 x 7168 = 1,835,008, 256 experts of 3 x 7168 x
 * 2048 = 44,040,192 and one shared expert of the same: 11,507,286,016 each;
 * embedding and head 129,280 x 7168 each and the final norm:
 * 671,026,404,352.  Active: 8 routed experts and the shared one,
 * 585,318,400 per MoE layer: 37,552,282,624.  The technical report
 * (DeepSeek-AI, arXiv:2412.19437, abstract: "671B total parameters with 37B
 * activated for each token"), the multi-token-prediction module (14B)
 * apart. */
START_TEST(published_parameter_counts)
{
  static const struct {
    const char *file;
    guint64 total, active;
    double published_total, published_active, unit; /* billions, and the unit they are written to */
  } models[] = {
    { "qwen3-30b-a3b.json", G_GUINT64_CONSTANT(30532122624), G_GUINT64_CONSTANT(3353032704), 30.5, 3.3, 0.1 },
    { "mixtral-8x7b.json", G_GUINT64_CONSTANT(46702792704), G_GUINT64_CONSTANT(12879925248), 46.7, 12.9, 0.1 },
    { "deepseek-v3.json", G_GUINT64_CONSTANT(671026404352), G_GUINT64_CONSTANT(37552282624), 671, 37, 1 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(models); i++) {
    g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, "moe", models[i].file, NULL);
    SimTransformer t;
    load(path, &t);
    ck_assert_uint_eq(sim_transformer_parameters(&t), models[i].total);
    ck_assert_uint_eq(sim_transformer_active_parameters(&t), models[i].active);
    /* The published figures are these counts rounded or truncated to the unit they are written in. */
    const double counts[2] = { models[i].total / 1e9, models[i].active / 1e9 },
                 published[2] = { models[i].published_total, models[i].published_active };
    for (guint j = 0; j < 2; j++) {
      double u = models[i].unit;
      gboolean rounded = fabs(counts[j] - published[j]) <= u / 2;
      gboolean truncated = fabs(floor(counts[j] / u) * u - published[j]) < 1e-9;
      ck_assert_msg(rounded || truncated, "%s: %.4g B, published %.4g B", models[i].file, counts[j], published[j]);
    }
  }
  /* A dense model: active = total. */
  g_autofree char *llama = g_build_filename(OFFSIM_SCENARIOS, "models", "llama-3.1-8b.json", NULL);
  SimTransformer t;
  load(llama, &t);
  ck_assert_uint_eq(sim_transformer_active_parameters(&t), sim_transformer_parameters(&t));
}
END_TEST

static SimTransformer
small(guint experts, guint top_k, double imbalance, double capacity)
{
  SimTransformer t;
  sim_transformer_defaults(&t);
  t.hidden = 64;
  t.layers = 2;
  t.heads = t.kv_heads = 4;
  t.head_dim = 16;
  t.ffn = 176;
  t.vocab = 256;
  t.batch = 2;
  t.seq = 16; /* N = 32 tokens */
  t.experts = experts;
  t.top_k = top_k;
  t.moe_ffn = 32;
  t.expert_imbalance = imbalance;
  t.capacity_factor = capacity;
  return t;
}

/* `t` built on an 80 GiB device of 312 TFLOPS at half efficiency; the
 * test fails with the error if it does not build. */
static SimWorkload *
build(const SimTransformer *t)
{
  SimDevice dev = { .memory = G_GUINT64_CONSTANT(80) << 30, .matmul_flops = 312e12, .efficiency = 0.5,
                    .hbm_bandwidth = 2e12 };
  g_autoptr(GError) error = NULL;
  SimWorkload *w = sim_transformer_build(t, &dev, "moe", &error);
  ck_assert_msg(w != NULL, "%s", error ? error->message : "");
  return w;
}

/* Tokens per expert by hand: N.k = 64 over 8 experts is 8 each; an
 * imbalance of 1.5 gives the hottest ceil(12) = 12 and the other seven the
 * remaining 52, 8 8 8 7 7 7 7; a capacity factor of 1.25 caps every expert at
 * ceil(10) = 10 (the hottest drops 2); 64 over 6 experts (k = 2, 4 / 6 not
 * whole) is 11 for the hottest (ceil of 10.67) and 53 = 11 11 11 10 10 for
 * the rest. */
START_TEST(tokens_per_expert_by_hand)
{
  SimTransformer even = small(8, 2, 1, 0), hot = small(8, 2, 1.5, 0), capped = small(8, 2, 1.5, 1.25),
                 odd = small(6, 2, 1, 0);
  static const guint64 hot_want[] = { 12, 8, 8, 8, 7, 7, 7, 7 }, odd_want[] = { 11, 11, 11, 11, 10, 10 };
  for (guint i = 0; i < 8; i++) {
    ck_assert_uint_eq(sim_transformer_expert_tokens(&even, i), 8);
    ck_assert_uint_eq(sim_transformer_expert_tokens(&hot, i), hot_want[i]);
    ck_assert_uint_eq(sim_transformer_expert_tokens(&capped, i), MIN(hot_want[i], 10));
  }
  for (guint i = 0; i < 6; i++)
    ck_assert_uint_eq(sim_transformer_expert_tokens(&odd, i), odd_want[i]);
}
END_TEST

/* ops = fused, an MoE layer at N = 32, h = 64, bf16, 8 experts, top 2,
 * moe_ffn 32, SwiGLU, by hand: its MLP saves mlp_in 32.64.2 = 4096,
 * router_probs 32.8.4 = 1024, routing_map 32.8 = 256, and per routed row
 * permute_idx 8, expert_in 64.2 = 128, expert_fc1_out 2.32.2 = 128,
 * expert_probs 4 (fp32, the weighted SwiGLU's), expert_act_out 32.2 = 64:
 * 332.  Balanced, T = N.k = 64 rows: 26,624.  With an imbalance of 1.5 and a
 * capacity factor of 1.25 the hottest expert keeps 10 of its 12 tokens:
 * T = 62.  The attention and norms are the dense layer's, whose MLP saves
 * mlp_in 4096 and gate, up, silu_out, down_in 32.176.2 = 11,264 each. */
START_TEST(fused_layer_bytes_by_hand)
{
  SimTransformer dense = small(0, 0, 1, 0);
  dense.moe_ffn = 0;
  SimTransformer moe = small(8, 2, 1, 0), dropped = small(8, 2, 1.5, 1.25);
  g_autoptr(SimWorkload) d = build(&dense);
  g_autoptr(SimWorkload) m = build(&moe);
  g_autoptr(SimWorkload) x = build(&dropped);
  guint64 attention = sim_layer_saved_bytes(sim_workload_layer(d, 0)) - (4096 + 4 * 11264);
  ck_assert_uint_eq(sim_layer_saved_bytes(sim_workload_layer(m, 0)), attention + 26624);
  ck_assert_uint_eq(sim_layer_saved_bytes(sim_workload_layer(x, 0)), attention + 4096 + 1024 + 256 + 62 * 332);
}
END_TEST

/* Expert parallelism, ep = 2, on the GPU holding the hottest expert: with
 * the imbalance of 1.5 above its experts 0-3 take 12 + 8 + 8 + 8 = 36 rows
 * from each of the two ranks, 72; the sort indices stay this GPU's own 64
 * routed rows.  The MLP saves mlp_in 4096, router_probs 1024, routing_map
 * 256, permute_idx 64.8 = 512 and 72 x 324 (expert_in, expert_fc1_out,
 * expert_probs, expert_act_out a row) = 23,328: 29,216 instead of ep = 1's
 * 4096 + 1024 + 256 + 64 x 332 = 26,624.  Balanced, 2 x 4 x 8 = 64 rows:
 * the same as without ep.  Its parameters: 4 experts of 3 x 64 x 32 per
 * MoE layer instead of 8, the router (8 x 64) whole. */
START_TEST(expert_parallel_layer_by_hand)
{
  SimTransformer hot = small(8, 2, 1.5, 0), even = small(8, 2, 1, 0), one = small(8, 2, 1.5, 0);
  hot.ep = even.ep = 2;
  ck_assert_uint_eq(sim_transformer_local_experts(&hot), 4);
  ck_assert_uint_eq(sim_transformer_local_tokens(&hot), 72);
  ck_assert_uint_eq(sim_transformer_local_tokens(&even), 64);
  ck_assert_uint_eq(sim_transformer_local_tokens(&one), 64);
  g_autoptr(SimWorkload) h = build(&hot);
  g_autoptr(SimWorkload) o = build(&one);
  ck_assert_uint_eq(h->ep, 2);
  ck_assert_uint_eq(sim_layer_saved_bytes(sim_workload_layer(h, 0)) - sim_layer_saved_bytes(sim_workload_layer(o, 0)),
                    29216 - 26624);
  guint64 attn = 16384 + 128, ends = 2 * 256 * 64 + 64;
  ck_assert_uint_eq(sim_transformer_parameters(&hot), 2 * (attn + 512 + 4 * 6144) + ends);
  ck_assert_uint_eq(sim_transformer_parameters(&one), 2 * (attn + 512 + 8 * 6144) + ends);
  /* A caller of the API meets [parallel] ep's rules too: 3 does not divide 8. */
  SimTransformer three = small(8, 2, 1, 0);
  three.ep = 3;
  g_autoptr(GError) error = NULL;
  ck_assert(!sim_transformer_validate(&three, NULL, &error));
  ck_assert_msg(strstr(error->message, "experts: expected a multiple of the expert-parallel degree (3)") != NULL, "%s",
                error->message);
}
END_TEST

/* dense_layers and sparse_step choose the MoE layers; the parameters
 * follow. */
START_TEST(which_layers_are_moe)
{
  SimTransformer t = small(8, 2, 1, 0);
  t.layers = 6;
  t.dense_layers = 1;
  t.sparse_step = 2; /* layers 1, 3, 5; 1 is past dense_layers */
  static const gboolean want[] = { FALSE, TRUE, FALSE, TRUE, FALSE, TRUE };
  for (guint i = 0; i < 6; i++)
    ck_assert_int_eq(sim_transformer_is_moe_layer(&t, i), want[i]);
  /* Per layer: attention 4 x 64^2 = 16,384 and two norms 128; dense MLP
   * 3 x 64 x 176 = 33,792; MoE: router 512 and 8 experts of 3 x 64 x 32. */
  guint64 attn = 16384 + 128, dense = attn + 33792, moe = attn + 512 + 8 * 6144, ends = 2 * 256 * 64 + 64;
  ck_assert_uint_eq(sim_transformer_parameters(&t), 3 * dense + 3 * moe + ends);
  ck_assert_uint_eq(sim_transformer_active_parameters(&t), 3 * dense + 3 * (attn + 512 + 2 * 6144) + ends);
}
END_TEST

/* Every inconsistent MoE field is exit 2 naming the file, the group or
 * field, and what was expected. */
START_TEST(bad_moe_input_is_named)
{
  static const struct {
    const char *keys, *message;
  } cases[] = {
    { "experts = 4\ntop_k = 5\nmoe_ffn = 32\n", "[transformer] top_k: expected 1 to experts (4) experts per token, got 5" },
    { "experts = 4\nmoe_ffn = 32\n", "[transformer] top_k: expected 1 to experts (4) experts per token, got 0" },
    { "experts = 4\ntop_k = 2\n", "[transformer] moe_ffn: expected each expert's intermediate size" },
    { "top_k = 2\n", "[transformer] experts: expected a number of experts above 0 with top_k" },
    { "experts = 4\ntop_k = 2\nmoe_ffn = 32\nexpert_imbalance = 3\n",
      "[transformer] expert_imbalance: expected 1 to experts / top_k (2)" },
    { "experts = 4\ntop_k = 2\nmoe_ffn = 32\nexpert_imbalance = 0.5\n", "[transformer] expert_imbalance" },
    { "experts = 4\ntop_k = 2\nmoe_ffn = 32\ndense_layers = 2\n", "[transformer] dense_layers: expected fewer than layers (2), got 2" },
    { "experts = 4\ntop_k = 2\nmoe_ffn = 32\ntp = 2\n", "[transformer] tp: expected 1 with experts above 0" },
    { "experts = 4\ntop_k = 2\nmoe_ffn = 32\nops = hf\ncapacity_factor = 1.25\n",
      "[transformer] capacity_factor: expected 0 with ops = hf" },
    /* 320 choices over 300 experts hit each: 14 ops each are past a layer's 4,096. */
    { "experts = 300\ntop_k = 10\nmoe_ffn = 32\nops = hf\n",
      "[transformer] experts: ops = hf runs each expert that takes tokens as ops of its own, at most 285 per layer "
      "(expected ops = fused, Megatron's grouped GEMM, for 300)" },
    { "experts = 4\ntop_k = 2\nmoe_ffn = 32\nshared_gate = true\n", "[transformer] shared_gate: a gate needs a shared expert" },
    { "v_head_dim = 16\n", "[transformer] kv_lora_rank: expected a latent rank above 0 with q_lora_rank" },
    { "kv_lora_rank = 16\nqk_rope_dim = 16\nv_head_dim = 16\n", "[transformer] qk_rope_dim: expected 1 to head_dim - 1 (15), got 16" },
    { "kv_lora_rank = 16\nqk_rope_dim = 8\n", "[transformer] v_head_dim: expected the value head dim" },
    { "kv_lora_rank = 16\nqk_rope_dim = 8\nv_head_dim = 16\nkv_heads = 2\n", "[transformer] kv_heads: expected heads (4) with kv_lora_rank" },
    { "kv_lora_rank = 16\nqk_rope_dim = 8\nv_head_dim = 16\nops = hf\nattention = sdpa\n",
      "[transformer] kv_lora_rank: multi-head latent attention runs with tp = 1, and attention = flash under ops = "
      "fused or eager under ops = hf" },
    { "kv_lora_rank = 16\nqk_rope_dim = 8\nv_head_dim = 16\nattention = eager\n",
      "[transformer] kv_lora_rank: multi-head latent attention runs with tp = 1, and attention = flash under ops = "
      "fused or eager under ops = hf" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *text = g_strdup_printf("%s[transformer]\nhidden = 64\nlayers = 2\nheads = 4\nffn = 176\n"
                                            "vocab = 256\nbatch = 2\nseq = 16\n%s", machine, cases[i].keys);
    g_autofree char *msg = test_scenario_error(text);
    ck_assert_msg(strstr(msg, cases[i].message) != NULL, "case %u: %s", i, msg);
  }
  /* A config.json: the field names. */
  static const struct {
    const char *json, *message;
  } files[] = {
    { "\"num_local_experts\": 2, \"num_experts_per_tok\": 3",
      "m.json: field 'num_experts_per_tok': expected 1 to field 'num_local_experts' (2) experts per token, got 3" },
    { "\"num_local_experts\": 8", "m.json: missing field 'num_experts_per_tok' (expected a positive integer)" },
    { "\"num_experts_per_tok\": 2", "m.json: missing field 'num_local_experts' (expected a positive integer)" },
    { "\"num_local_experts\": 0, \"num_experts_per_tok\": 2", "m.json: field 'num_local_experts': expected an integer from 1" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autofree char *json = g_strdup_printf("{\"model_type\": \"mixtral\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                                            "\"num_attention_heads\": 4, \"intermediate_size\": 48, \"vocab_size\": 256, "
                                            "%s}", files[i].json);
    SimTransformer t;
    sim_transformer_defaults(&t);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(!sim_hf_config_load_data(json, -1, "m.json", &t, &error), "file %u loaded", i);
    ck_assert_msg(strstr(error->message, files[i].message) != NULL, "file %u: %s", i, error->message);
  }
  static const char qwen[] = "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                             "\"num_attention_heads\": 4, \"intermediate_size\": 48, \"vocab_size\": 256, "
                             "\"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, "
                             "\"mlp_only_layers\": [1]}";
  SimTransformer t;
  sim_transformer_defaults(&t);
  g_autoptr(GError) error = NULL;
  ck_assert(!sim_hf_config_load_data(qwen, -1, "q.json", &t, &error));
  ck_assert_msg(strstr(error->message, "q.json: field 'mlp_only_layers': expected an empty list"), "%s", error->message);
  /* DeepSeek's layer rule is layer % moe_layer_freq == 0 past first_k_dense_replace: only 1 is offsim's. */
  g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, "moe", "deepseek-v3.json", NULL);
  g_autofree char *deepseek = NULL;
  ck_assert(g_file_get_contents(path, &deepseek, NULL, NULL));
  g_autoptr(GString) freq = g_string_new(deepseek);
  g_string_replace(freq, "\"moe_layer_freq\": 1", "\"moe_layer_freq\": 2", 1);
  g_clear_error(&error);
  ck_assert(!sim_hf_config_load_data(freq->str, -1, "d.json", &t, &error));
  ck_assert_msg(strstr(error->message, "d.json: field 'moe_layer_freq': expected 1"), "%s", error->message);
  g_autoptr(GString) rope = g_string_new(deepseek);
  g_string_replace(rope, "\"qk_rope_head_dim\": 64", "\"qk_rope_head_dim\": 0", 1);
  g_clear_error(&error);
  ck_assert(!sim_hf_config_load_data(rope->str, -1, "d.json", &t, &error));
  ck_assert_msg(strstr(error->message, "d.json: field 'qk_rope_head_dim': expected an integer from 1"), "%s",
                error->message);
}
END_TEST

/* `offsim model` on an MoE config writes the MoE keys, and the scenario it
 * writes loads back to the same workload; a dense config's text is as
 * before (no MoE key). */
/* `offsim compare SCENARIO` from the repository root in a child without
 * leak detection: past 2,048 interned names (some 3,000 ops and tensors
 * for 128 experts) GLib drops its first quark array on purpose (gquark.c:
 * "This leaks the old quarks array", for lock-free lookups), which
 * LeakSanitizer reports, allocated in GLib's constructor.  The in-process
 * tests build smaller MoE workloads under leak detection. */
static TestRun
compare_without_leak_detection(const char *scenario)
{
  g_autofree char *saved = g_strdup(g_getenv("ASAN_OPTIONS"));
  g_autofree char *options = g_strconcat(saved ? saved : "", saved ? ":" : "", "detect_leaks=0", NULL);
  g_setenv("ASAN_OPTIONS", options, TRUE);
  TestRun run = test_offsim_in(OFFSIM_SCENARIOS "/..", "compare", scenario, NULL);
  if (saved)
    g_setenv("ASAN_OPTIONS", saved, TRUE);
  else
    g_unsetenv("ASAN_OPTIONS");
  return run;
}

/* ops = hf builds what HF's loops run: only the experts that take tokens
 * are ops, so 200 experts at 64 choices (32 tokens, top 2) build 64 of
 * them, and the tiny DeepSeek-V3 its 8 (2 tokens each), 14 ops each; the
 * real DeepSeek-V3 (256 experts, all hit at 1,024 tokens: 58 MoE layers of
 * 3,584 expert ops) runs under HF's code with eager attention. */
START_TEST(hf_runs_the_experts_hit)
{
  g_autofree char *text = g_strdup_printf("%s[transformer]\nhidden = 64\nlayers = 2\nheads = 4\nffn = 176\n"
                                          "vocab = 256\nbatch = 2\nseq = 16\nexperts = 200\ntop_k = 2\n"
                                          "moe_ffn = 32\nops = hf\nattention = eager\n", machine);
  g_autoptr(SimScenario) s = test_scenario_from_text(text);
  guint gathers = 0;
  const SimLayer *l = sim_workload_layer(s->workload, 0);
  for (guint i = 0; i < l->ops->len; i++)
    gathers += g_str_has_suffix(sim_layer_op(l, i)->name, ".gather");
  ck_assert_uint_eq(gathers, 2 * 64); /* forward and backward */
  g_autofree char *tiny = g_strdup_printf("%s[transformer]\nhf_config = %s/../tests/data/hf/configs/deepseek_v3-tiny.json\n"
                                          "batch = 2\nseq = 4\nops = hf\nattention = eager\n", machine,
                                          OFFSIM_SCENARIOS);
  g_autoptr(SimScenario) d = test_scenario_from_text(tiny);
  const SimLayer *moe = sim_workload_layer(d->workload, 1);
  guint experts = 0;
  for (guint i = 0; i < moe->ops->len; i++)
    experts += g_str_has_prefix(sim_layer_op(moe, i)->name, "expert.");
  ck_assert_uint_eq(experts, 8 * 14);
  g_autofree char *dir = g_dir_make_tmp("moe-XXXXXX", NULL);
  g_autofree char *ini = g_build_filename(dir, "ds.ini", NULL);
  g_autofree char *full = g_strdup_printf("%s[transformer]\nhf_config = %s/moe/deepseek-v3.json\nbatch = 1\n"
                                          "seq = 1024\nops = hf\nattention = eager\n[policy.r]\nkind = resident\n",
                                          machine, OFFSIM_SCENARIOS);
  ck_assert(g_file_set_contents(ini, full, -1, NULL));
  g_auto(TestRun) run = compare_without_leak_detection(ini);
  g_unlink(ini);
  g_rmdir(dir);
  ck_assert_msg(run.status == 0, "status %d: %s", run.status, run.err);
  ck_assert(strstr(run.out, "61 layers") != NULL);
}
END_TEST

START_TEST(model_writes_moe_keys)
{
  g_autofree char *path = g_build_filename(OFFSIM_SCENARIOS, "moe", "mixtral-8x7b.json", NULL);
  g_auto(TestRun) run = test_offsim("model", "--hf-config", path, "--batch", "1", "--seq", "512", "--ops", "fused", NULL);
  ck_assert_int_eq(run.status, 0);
  ck_assert_msg(strstr(run.out, "\nexperts = 8\ntop_k = 2\nmoe_ffn = 14336\n") != NULL, "%s", run.out);
  ck_assert(strstr(run.out, "46702792704 parameters, 12879925248 active per token") != NULL);
  g_autoptr(SimScenario) s = test_scenario_from_text(run.out);
  ck_assert_uint_eq(sim_workload_n_layers(s->workload), 32);
  g_autofree char *llama = g_build_filename(OFFSIM_SCENARIOS, "models", "llama-3.1-8b.json", NULL);
  g_auto(TestRun) dense = test_offsim("model", "--hf-config", llama, "--batch", "1", "--seq", "512", NULL);
  ck_assert_int_eq(dense.status, 0);
  ck_assert(strstr(dense.out, "experts") == NULL);
}
END_TEST

/* Megatron's MoE modules (framework = megatron, offload_modules): at
 * batch 1 x 4096, h = 256, 8 experts, top 2, moe_ffn 256, ops = fused, 4
 * layers, T = 8192 routed rows.  expert_fc1 copies the permuted tokens,
 * 8192 x 256 x 2 = 4 MiB a layer (2M elements, above Megatron's 1,048,576);
 * moe_act fc1's output, 8192 x 512 x 2 = 8 MiB (its fp32 probabilities,
 * 8192 elements, stay); the last layer's groups stay (keep_last): 3
 * layers copied. */
START_TEST(megatron_offloads_moe_modules)
{
  static const struct {
    const char *modules;
    guint64 per_layer;
  } cases[] = {
    { "expert_fc1", 8192 * 256 * 2 },
    { "moe_act", 8192 * 512 * 2 },
    { "expert_fc1, moe_act", 8192 * 256 * 2 + 8192 * 512 * 2 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *text = g_strdup_printf("%s[transformer]\nhidden = 256\nlayers = 4\nheads = 4\nffn = 1024\n"
                                            "vocab = 1024\nbatch = 1\nseq = 4096\nexperts = 8\ntop_k = 2\n"
                                            "moe_ffn = 256\n[policy.m]\nkind = offload\nframework = megatron\n"
                                            "offload_modules = %s\n", machine, cases[i].modules);
    g_autoptr(SimScenario) sc = test_scenario_from_text(text);
    g_autoptr(SimResult) r = test_evaluate(sc, "m");
    ck_assert_msg(r->d2h_bytes == 3 * cases[i].per_layer, "%s: %" G_GUINT64_FORMAT, cases[i].modules, r->d2h_bytes);
    ck_assert_uint_eq(r->h2d_bytes, r->d2h_bytes);
  }
}
END_TEST

/* README's Qwen3-30B-A3B table (after its marker) is what `offsim compare`
 * prints for the bundled scenario, from the repository root. */
START_TEST(readme_moe_table_is_the_program_s)
{
  g_autofree char *readme = NULL;
  ck_assert(g_file_get_contents(OFFSIM_SCENARIOS "/../README.md", &readme, NULL, NULL));
  const char *at = strstr(readme, "<!-- moe-compare -->\n```\n");
  ck_assert_ptr_nonnull(at);
  at += strlen("<!-- moe-compare -->\n```\n");
  const char *end = strstr(at, "```");
  ck_assert_ptr_nonnull(end);
  g_autofree char *shown = g_strndup(at, (gsize)(end - at));
  /* 128 experts: past GLib's 2,048 quarks (compare_without_leak_detection). */
  g_auto(TestRun) run = compare_without_leak_detection("scenarios/moe/qwen3-30b-a3b.ini");
  ck_assert_msg(run.status == 0, "status %d: %s", run.status, run.err);
  ck_assert_msg(strstr(run.out, shown) != NULL, "README shows:\n%s\nthe program prints:\n%s", shown, run.out);
}
END_TEST

/* ops = fused, multi-head latent attention by hand at N = 32 (batch 2 x
 * 16), h = 64, 4 heads of head_dim 24 (16 + RoPE 8), v_head_dim 16,
 * q_lora_rank 32, kv_lora_rank 16, bf16, flash, dense MLP: the attention
 * saves attn_norm_in 32.64.2 = 4096 and its stats 128, qkv_in 4096,
 * q_down 32.32.2 = 2048, its stats 128, q_up_in 2048, kv_down 32.16.2 =
 * 1024, its stats 128, kv_up_in 1024, q and k 32.4.24.2 = 6144 each, v
 * 32.4.16.2 = 4096, softmax_lse 32.4.4 = 512, attn_out 32.64.2 = 4096:
 * 35,712. */
START_TEST(mla_layer_bytes_by_hand)
{
  SimTransformer t = small(0, 0, 1, 0);
  t.moe_ffn = 0;
  t.head_dim = 24;
  t.q_lora_rank = 32;
  t.kv_lora_rank = 16;
  t.qk_rope_dim = 8;
  t.v_head_dim = 16;
  g_autoptr(SimWorkload) w = build(&t);
  /* The MLP: mlp_norm_in 4096, its stats 128, mlp_in 4096, four of 32.176.2 = 11,264. */
  ck_assert_uint_eq(sim_layer_saved_bytes(sim_workload_layer(w, 0)), 35712 + 4096 + 128 + 4096 + 4 * 11264);
  /* Parameters: q_a 64.32 + 32, q_b 32.96, kv_a 64.24 + 16, kv_b 16.4.32, o 64.64; norms 128; MLP 33,792. */
  guint64 layer = 2048 + 32 + 3072 + 1536 + 16 + 2048 + 4096 + 128 + 33792;
  ck_assert_uint_eq(sim_transformer_parameters(&t), 2 * layer + 2 * 256 * 64 + 64);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("transformer_moe");
  TCase *tc = tcase_create("moe");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, published_parameter_counts);
  tcase_add_test(tc, tokens_per_expert_by_hand);
  tcase_add_test(tc, fused_layer_bytes_by_hand);
  tcase_add_test(tc, expert_parallel_layer_by_hand);
  tcase_add_test(tc, which_layers_are_moe);
  tcase_add_test(tc, bad_moe_input_is_named);
  tcase_add_test(tc, hf_runs_the_experts_hit);
  tcase_add_test(tc, model_writes_moe_keys);
  tcase_add_test(tc, megatron_offloads_moe_modules);
  tcase_add_test(tc, readme_moe_table_is_the_program_s);
  tcase_add_test(tc, mla_layer_bytes_by_hand);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
