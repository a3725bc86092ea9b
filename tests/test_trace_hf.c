/* tests/test_trace_hf.c — the two routes to an HF model's workload check
 * each other: `[trace]` on a recording of the real PyTorch step
 * (the CSV files of tests/data/hf, python/offsim_torch/recorder.py) and `[transformer]
 * ops = hf` on the same config.json (sim_hf_config_load, then
 * sim_transformer_build).  Per layer, for the embedding and for the head:
 * saved bytes, references, leaves, parameter, shared and host references;
 * the recording's op counts time the layers as the generator's FLOPs do;
 * and the old recordings (tests/data/trace, no `leaf` column) load as
 * before, parameters and earlier layers' storages dropped. */
#include "testutil.h"

#include "base/error.h"
#include "input/hf_config.h"
#include "input/trace.h"
#include "input/transformer.h"

#include <math.h>
#include <string.h>

#define HF_DATA OFFSIM_TEST_DATA "/hf"
#define LAYERS 2 /* every tiny config */

typedef struct {
  const char *file; /* tests/data/hf/FILE.csv */
  const char *config;
  SimDtype dtype;
  SimAttention attention;
  guint seq;        /* batch 2 in every recording */
} Recording;

/* The recordings of the CUDA kernels (`--kernels cuda`), which ops = hf
 * models; README of tests/data/hf for the others. */
static const Recording recordings[] = {
  { "qwen2-eager-bf16", "qwen2", SIM_DTYPE_BF16, SIM_ATTENTION_EAGER, 16 },
  { "qwen2-sdpa-bf16", "qwen2", SIM_DTYPE_BF16, SIM_ATTENTION_SDPA, 16 },
  { "qwen2-flash-bf16", "qwen2", SIM_DTYPE_BF16, SIM_ATTENTION_FLASH, 16 },
  { "qwen2-eager-fp32", "qwen2", SIM_DTYPE_FP32, SIM_ATTENTION_EAGER, 16 },
  { "llama-eager-bf16", "llama", SIM_DTYPE_BF16, SIM_ATTENTION_EAGER, 16 },
  { "llama-sdpa-bf16", "llama", SIM_DTYPE_BF16, SIM_ATTENTION_SDPA, 16 },
  { "llama-flash-bf16", "llama", SIM_DTYPE_BF16, SIM_ATTENTION_FLASH, 16 },
  { "llama-eager-fp32", "llama", SIM_DTYPE_FP32, SIM_ATTENTION_EAGER, 16 },
  { "gpt2-eager-bf16", "gpt2", SIM_DTYPE_BF16, SIM_ATTENTION_EAGER, 16 },
  { "gpt2-sdpa-bf16", "gpt2", SIM_DTYPE_BF16, SIM_ATTENTION_SDPA, 16 },
  { "gpt2-flash-bf16", "gpt2", SIM_DTYPE_BF16, SIM_ATTENTION_FLASH, 16 },
  { "gpt2-eager-fp32", "gpt2", SIM_DTYPE_FP32, SIM_ATTENTION_EAGER, 16 },
  /* Mixtures of experts (python/offsim_torch/moe_models.py), recorded on
   * token ids whose routing is even in every layer (4 tokens per expert),
   * as the generator routes them by default. */
  { "mixtral-b2s4-eager-bf16", "mixtral", SIM_DTYPE_BF16, SIM_ATTENTION_EAGER, 4 },
  { "qwen3_moe-b2s4-eager-bf16", "qwen3_moe", SIM_DTYPE_BF16, SIM_ATTENTION_EAGER, 4 },
  { "qwen2_moe-b2s4-eager-bf16", "qwen2_moe", SIM_DTYPE_BF16, SIM_ATTENTION_EAGER, 4 },
  /* DeepSeek-V3: latent attention, the sigmoid group-limited router, the
   * loop over every expert in fp32 (2 tokens per expert). */
  { "deepseek_v3-b2s4-eager-bf16", "deepseek_v3", SIM_DTYPE_BF16, SIM_ATTENTION_EAGER, 4 },
};

static const SimDevice device = { .memory = G_GUINT64_CONSTANT(80) << 30, .matmul_flops = 312e12, .efficiency = 0.5,
                                  .hbm_bandwidth = 2e12 };

static SimWorkload *
generated(const Recording *r, const SimDevice *dev)
{
  g_autofree char *path = g_strdup_printf("%s/configs/%s-tiny.json", HF_DATA, r->config);
  SimTransformer t;
  sim_transformer_defaults(&t);
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sim_hf_config_load(path, &t, &error), "%s", error ? error->message : "");
  t.batch = 2;
  t.seq = r->seq;
  t.dtype = r->dtype;
  t.attention = r->attention;
  t.hf_ops = TRUE;
  SimWorkload *w = sim_transformer_build(&t, dev, r->file, &error);
  ck_assert_msg(w != NULL, "%s: %s", r->file, error ? error->message : "");
  return w;
}

static SimWorkload *
traced(const Recording *r, const SimDevice *dev)
{
  g_autofree char *path = g_strdup_printf("%s/%s.csv", HF_DATA, r->file);
  g_autoptr(GError) error = NULL;
  SimWorkload *w = dev ? sim_trace_load_timed(path, r->file, dev, &error) : sim_trace_load(path, r->file, &error);
  ck_assert_msg(w != NULL, "%s: %s", r->file, error ? error->message : "");
  return w;
}

/* What the comparison reads of a stage. */
typedef struct {
  guint64 saved;   /* sim_layer_saved_bytes */
  guint64 host;    /* bytes of host tensors */
  guint refs;      /* references to activations (device, host, shared) */
  guint leaves;    /* of which to tensors without grad_fn */
  guint shared;    /* of which to a storage an earlier stage saved */
  guint params;    /* references to parameters */
  guint storages;  /* device and host tensors */
} Figures;

static Figures
figures_of(const SimLayer *layer)
{
  Figures f = { .saved = sim_layer_saved_bytes(layer) };
  for (guint i = 0; i < layer->tensors->len; i++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, i);
    if (t->parameter) {
      f.params += t->refs;
      continue;
    }
    f.refs += t->refs;
    f.leaves += t->leaf ? t->refs : 0;
    f.shared += t->shared ? t->refs : 0;
    f.host += t->host ? t->bytes : 0;
    f.storages += !t->shared;
  }
  return f;
}

static const SimLayer *
stage(const SimWorkload *w, guint s)
{
  return s == 0 ? w->embed : s == LAYERS + 1 ? w->head : sim_workload_layer(w, s - 1);
}

static const char *const stage_names[LAYERS + 2] = { "embed", "layer 0", "layer 1", "head" };

START_TEST(recording_equals_generator_per_stage)
{
  for (guint i = 0; i < G_N_ELEMENTS(recordings); i++) {
    const Recording *r = &recordings[i];
    g_autoptr(SimWorkload) gen = generated(r, &device);
    g_autoptr(SimWorkload) rec = traced(r, NULL);
    ck_assert_uint_eq(sim_workload_n_layers(rec), LAYERS);
    ck_assert_ptr_nonnull(rec->embed);
    ck_assert_ptr_nonnull(rec->head);
    for (guint s = 0; s < LAYERS + 2; s++) {
      Figures g = figures_of(stage(gen, s)), t = figures_of(stage(rec, s));
#define SAME(field)                                                                                                \
  ck_assert_msg(g.field == t.field, "%s, %s: " #field " %" G_GUINT64_FORMAT " (ops = hf), %" G_GUINT64_FORMAT      \
                " ([trace])", r->file, stage_names[s], (guint64)g.field, (guint64)t.field)
      SAME(saved);
      SAME(host);
      SAME(refs);
      SAME(leaves);
      SAME(shared);
      SAME(storages);
#undef SAME
      /* The one torch 1.13 difference (adjust = embedding-weight-unsure): it
       * packs the embedding weights (gpt2: tokens and positions), which ops =
       * hf (current PyTorch) does not. */
      guint embeddings = s == 0 ? (strcmp(r->config, "gpt2") == 0 ? 2 : 1) : 0;
      ck_assert_msg(t.params == g.params + embeddings, "%s, %s: params %u (ops = hf), %u ([trace])", r->file,
                    stage_names[s], g.params, t.params);
      if (s >= 1 && s <= LAYERS)
        ck_assert_uint_eq(stage(gen, s)->input_bytes, stage(rec, s)->input_bytes);
    }
    ck_assert_uint_eq(sim_workload_saved_bytes(gen), sim_workload_saved_bytes(rec));
    ck_assert_uint_eq(sim_workload_saved_tensors(gen), sim_workload_saved_tensors(rec));
  }
}
END_TEST

/* The op counts, timed with HBM made free, are the recorded matmul FLOPs:
 * for eager attention they are the generator's to rounding (the same
 * products: q, k, v, o, the MLP, QK^T and PV), and backward does two
 * products per forward one.  With the fused attention stand-ins the
 * recording counts the causal pairs, s(s+1)/2 per head, where the
 * generator takes half of s^2: layers differ by that alone. */
START_TEST(op_counts_time_layers_as_the_generator)
{
  SimDevice flops_only = device;
  flops_only.hbm_bandwidth = 1e300;
  for (guint i = 0; i < G_N_ELEMENTS(recordings); i++) {
    const Recording *r = &recordings[i];
    g_autoptr(SimWorkload) gen = generated(r, &flops_only);
    g_autoptr(SimWorkload) rec = traced(r, &flops_only);
    double mm = flops_only.matmul_flops * flops_only.efficiency;
    for (guint l = 0; l < LAYERS; l++) {
      const SimLayer *g = sim_workload_layer(gen, l), *t = sim_workload_layer(rec, l);
      double s = r->seq, score_pairs = 2.0 /* batch */ * 4 /* heads */ * s * s, head_dim = 16;
      /* QK^T and PV over s^2 pairs (eager) or the causal s(s+1)/2 against the generator's s^2 / 2. */
      double extra = r->attention == SIM_ATTENTION_EAGER ? 0 : 4 * score_pairs * head_dim * ((s + 1) / (2 * s) - 0.5) / mm;
      ck_assert_msg(fabs(t->forward - (g->forward + extra)) <= 1e-9 * g->forward, "%s layer %u: forward %.9g s "
                    "([trace]), %.9g s + %.9g (ops = hf)", r->file, l, t->forward, g->forward, extra);
      /* Backward: two products per forward one; a flash backward 2.5 per forward product. */
      double attn = r->attention == SIM_ATTENTION_EAGER ? 0 : 4 * score_pairs * head_dim * ((s + 1) / (2 * s)) / mm;
      double want = 2 * (t->forward - attn) + 2.5 * attn;
      ck_assert_msg(fabs(t->backward - want) <= 1e-9 * want, "%s layer %u: backward %.9g s, expected %.9g",
                    r->file, l, t->backward, want);
    }
    /* The head's LM head product: 2 x rows x hidden x vocab forward, twice that backward. */
    double lm = 2.0 * 2 * r->seq * 64 * 256 / mm;
    ck_assert_msg(fabs(rec->head->forward - lm) <= 1e-9 * lm, "%s: head forward %.9g, expected %.9g", r->file,
                  rec->head->forward, lm);
    ck_assert_msg(fabs(rec->head->backward - 2 * lm) <= 1e-9 * lm, "%s: head backward %.9g", r->file,
                  rec->head->backward);
  }
  /* With HBM's time, every op the step runs adds its bytes: slower, never faster. */
  g_autoptr(SimWorkload) flops = traced(&recordings[0], &flops_only);
  g_autoptr(SimWorkload) both = traced(&recordings[0], &device);
  for (guint l = 0; l < LAYERS; l++) {
    ck_assert(sim_workload_layer(both, l)->forward > sim_workload_layer(flops, l)->forward);
    ck_assert(sim_workload_layer(both, l)->backward > sim_workload_layer(flops, l)->backward);
  }
}
END_TEST

/* A [trace] group without `forward` takes these times on the scenario's
 * device; with it, the times given; `backward` alone, or a file without op
 * counts and no `forward`, is an error naming the key or the file. */
START_TEST(trace_group_times_from_counts_unless_given)
{
  static const char dev[] = "[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n"
                            "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n";
  g_autofree char *counted = g_strdup_printf("%s[trace]\nfile = %s/qwen2-sdpa-bf16.csv\n", dev, HF_DATA);
  g_autoptr(SimScenario) s = test_scenario_from_text(counted);
  SimDevice d = s->machine.device;
  g_autofree char *path = g_strdup_printf("%s/qwen2-sdpa-bf16.csv", HF_DATA);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimWorkload) timed = sim_trace_load_timed(path, "x", &d, &error);
  ck_assert_msg(timed != NULL, "%s", error ? error->message : "");
  for (guint l = 0; l < LAYERS; l++) {
    ck_assert_double_eq(sim_workload_layer(s->workload, l)->forward, sim_workload_layer(timed, l)->forward);
    ck_assert_double_eq(sim_workload_layer(s->workload, l)->backward, sim_workload_layer(timed, l)->backward);
    ck_assert(sim_workload_layer(s->workload, l)->forward > 0);
  }
  ck_assert_double_eq(s->workload->head->forward, timed->head->forward);
  g_autofree char *given = g_strdup_printf("%s[trace]\nfile = %s/qwen2-sdpa-bf16.csv\nforward = 3ms\n", dev, HF_DATA);
  g_autoptr(SimScenario) g = test_scenario_from_text(given);
  ck_assert_double_eq(sim_workload_layer(g->workload, 1)->forward, 3e-3);
  ck_assert_double_eq(sim_workload_layer(g->workload, 1)->backward, 6e-3);
  g_autofree char *alone = g_strdup_printf("%s[trace]\nfile = %s/qwen2-sdpa-bf16.csv\nbackward = 3ms\n", dev, HF_DATA);
  g_autofree char *why = test_scenario_error(alone);
  ck_assert_msg(strstr(why, "backward") && strstr(why, "needs `forward`"), "%s", why);
  /* Op rows: `workspace` adds a span over each phase of every layer run
   * op by op, beside the recording's own allocations. */
  g_autofree char *spans = g_strdup_printf("%s[trace]\nfile = %s/llama-eager-bf16.csv\nworkspace = 1MiB\n", dev, HF_DATA);
  g_autofree char *none = g_strdup_printf("%s[trace]\nfile = %s/llama-eager-bf16.csv\n", dev, HF_DATA);
  g_autoptr(SimScenario) sp = test_scenario_from_text(spans);
  g_autoptr(SimScenario) own = test_scenario_from_text(none);
  for (guint l = 0; l < LAYERS; l++) {
    const SimLayer *layer = sim_workload_layer(sp->workload, l), *recorded = sim_workload_layer(own->workload, l);
    ck_assert(sim_layer_has_ops(layer));
    ck_assert_uint_gt(recorded->spans->len, 0);
    ck_assert_uint_eq(layer->spans->len, recorded->spans->len + 2);
    ck_assert_uint_ge(layer->workspace_bytes, 1 << 20);
    ck_assert_uint_ge(layer->backward_workspace_bytes, 1 << 20);
  }
  g_autofree char *old = g_strdup_printf("%s[trace]\nfile = %s/trace/qwen2-tiny.csv\n", dev, OFFSIM_TEST_DATA);
  g_autofree char *no_counts = test_scenario_error(old);
  ck_assert_msg(strstr(no_counts, "qwen2-tiny.csv"), "%s", no_counts);
}
END_TEST

/* tests/data/trace's recordings have no leaf column: parameters and
 * storages an earlier layer saved are dropped, no flag is set, as before. */
START_TEST(old_recordings_load_as_before)
{
  static const char *const files[] = { "qwen2-tiny.csv", "qwen2-small.csv" };
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autofree char *path = g_strdup_printf("%s/trace/%s", OFFSIM_TEST_DATA, files[i]);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimWorkload) w = sim_trace_load(path, "t", &error);
    ck_assert_msg(w != NULL, "%s", error ? error->message : "");
    for (guint l = 0; l < sim_workload_n_layers(w) + 2; l++) {
      const SimLayer *layer = l == 0 ? w->embed : l == 1 ? w->head : sim_workload_layer(w, l - 2);
      if (layer == NULL)
        continue;
      for (guint k = 0; k < layer->tensors->len; k++) {
        const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
        ck_assert(!t->parameter && !t->shared && !t->host && !t->leaf);
      }
    }
    /* Untimed without counts; timed, an error naming why. */
    g_autoptr(SimWorkload) timed = sim_trace_load_timed(path, "t", &device, &error);
    ck_assert_ptr_null(timed);
    ck_assert(strstr(error->message, "no op counts") != NULL);
  }
}
END_TEST

/* The recorder's columns, by hand: a shared storage, a parameter, a host
 * tensor, a mean input not saved, and compute rows. */
START_TEST(recorder_columns_by_hand)
{
  static const char csv[] =
    "layer,op,name,bytes,dtype,shape,is_parameter,storage,storage_bytes,saved,leaf,phase,host,adjust,flops,moved\n"
    "embed,embed,leaf,400,bf16,x,1,0,400,1,1,forward,0,,,\n"
    "embed,embed,leaf,64,int64,x,0,1,64,1,1,forward,0,,,\n"
    "embed,embed,embedding,0,,,0,,,0,,forward,,,0,100\n"
    "0,layer_input,input,128,bf16,x,0,2,128,0,0,forward,0,,,\n"
    "0,rope,leaf,32,bf16,x,0,3,32,1,1,forward,0,,,\n"
    "0,norm,ToCopy,256,f32,x,0,4,256,1,0,forward,0,,,\n"
    "0,norm,ToCopy,256,f32,x,0,4,256,1,0,forward,0,,,\n"
    "0,norm,ToCopy,256,f32,x,0,4,256,0,0,forward,0,mean-input,,\n"
    "0,attn,seed,8,int64,x,0,5,8,1,1,forward,1,,,\n"
    "0,q_proj,leaf,400,bf16,x,1,6,400,1,1,forward,0,,,\n"
    "0,q_proj,leaf,400,bf16,x,1,6,400,1,1,forward,0,,,\n"
    "0,q_proj,mm,0,,,0,,,0,,forward,,,1000,50\n"
    "0,norm,mul,0,,,0,,,0,,forward,,,0,200\n"
    "0,,mm,0,,,0,,,0,,backward,,,2000,100\n"
    "0,,mul,0,,,0,,,0,,backward,,,0,300\n"
    "1,layer_input,input,128,bf16,x,0,7,128,0,0,forward,0,,,\n"
    "1,rope,leaf,32,bf16,x,0,3,32,1,1,forward,0,,,\n"
    "1,rope,leaf,32,bf16,x,0,3,32,1,1,forward,0,,,\n"
    "1,,mm,0,,,0,,,0,,forward,,,500,0\n"
    "head,lm_head,leaf,400,bf16,x,1,0,400,1,1,forward,0,,,\n";
  g_autoptr(GError) error = NULL;
  SimDevice dev = { .matmul_flops = 1000, .efficiency = 0.5, .hbm_bandwidth = 100 };
  g_autoptr(SimWorkload) w = sim_trace_load_data_timed(csv, sizeof csv - 1, "t.csv", "t", &dev, &error);
  ck_assert_msg(w != NULL, "%s", error ? error->message : "");
  const SimLayer *l0 = sim_workload_layer(w, 0), *l1 = sim_workload_layer(w, 1);
  /* Layer 0: rope (leaf), norm (2 refs), the seed (host), q_proj's weight (parameter, 2 refs). */
  ck_assert_uint_eq(l0->tensors->len, 4);
  ck_assert_uint_eq(sim_layer_saved_bytes(l0), 32 + 256);
  ck_assert_uint_eq(l0->input_bytes, 128);
  const SimTensor *norm = &g_array_index(l0->tensors, SimTensor, 1), *seed = &g_array_index(l0->tensors, SimTensor, 2),
                  *weight = &g_array_index(l0->tensors, SimTensor, 3);
  ck_assert_uint_eq(norm->refs, 2);
  ck_assert(!norm->leaf && g_array_index(l0->tensors, SimTensor, 0).leaf);
  ck_assert(seed->host && !seed->parameter);
  ck_assert(weight->parameter && weight->refs == 2 && weight->bytes == 400);
  ck_assert_str_eq(weight->name, "q_proj.param");
  /* Layer 1: the rope storage layer 0 saved, two references, held there. */
  ck_assert_uint_eq(l1->tensors->len, 1);
  const SimTensor *rope = &g_array_index(l1->tensors, SimTensor, 0);
  ck_assert(rope->shared && rope->refs == 2 && rope->leaf);
  ck_assert_uint_eq(sim_layer_saved_bytes(l1), 0);
  /* The head's tied weight is a parameter, not a shared activation. */
  const SimTensor *lm = &g_array_index(w->head->tensors, SimTensor, 0);
  ck_assert(lm->parameter && !lm->shared);
  /* Times: FLOPs / 500 FLOP/s + bytes of the ops without FLOPs / 100 B/s. */
  ck_assert_double_eq_tol(l0->forward, 1000.0 / 500 + 200.0 / 100, 1e-12);
  ck_assert_double_eq_tol(l0->backward, 2000.0 / 500 + 300.0 / 100, 1e-12);
  ck_assert_double_eq_tol(l1->forward, 1.0, 1e-12);
  ck_assert_double_eq_tol(l1->backward, 0, 1e-12);
  ck_assert_double_eq_tol(w->embed->forward, 1.0, 1e-12);
  ck_assert_double_eq_tol(w->head->forward, 0, 1e-12);
  /* Untimed, the same tensors and no times. */
  g_autoptr(SimWorkload) plain = sim_trace_load_data(csv, sizeof csv - 1, "t.csv", "t", &error);
  ck_assert_uint_eq(sim_workload_saved_bytes(plain), sim_workload_saved_bytes(w));
  ck_assert_double_eq(sim_workload_layer(plain, 0)->forward, 0);
}
END_TEST

START_TEST(bad_counts_are_named)
{
  static const struct {
    const char *csv;
    const char *piece;
  } cases[] = {
    { "layer,op,name,bytes,dtype,shape,is_parameter,flops\n", "t.csv:1: column 'moved': expected flops, moved and phase" },
    { "layer,op,name,bytes,dtype,shape,is_parameter,flops,moved\n", "t.csv:1: column 'phase'" },
    { "layer,op,name,bytes,dtype,shape,is_parameter,phase,flops,moved\n0,a,mm,0,,,0,sideways,1,1\n",
      "t.csv:2: column 'phase': expected forward or backward, got 'sideways'" },
    { "layer,op,name,bytes,dtype,shape,is_parameter,phase,flops,moved\n0,a,mm,0,,,0,forward,1x,1\n",
      "t.csv:2: column 'flops'" },
    { "layer,op,name,bytes,dtype,shape,is_parameter,phase,flops,moved\n0,a,mm,0,,,0,forward,1,\n",
      "t.csv:2: column 'moved'" },
    { "layer,op,name,bytes,dtype,shape,is_parameter,leaf,host\n0,a,b,1,f,1,0,2,0\n", "t.csv:2: column 'leaf'" },
    { "layer,op,name,bytes,dtype,shape,is_parameter,leaf,host\n0,a,b,1,f,1,0,0,x\n", "t.csv:2: column 'host'" },
    /* Timed: a layer without counts. */
    { "layer,op,name,bytes,dtype,shape,is_parameter,phase,flops,moved\n0,a,mm,0,,,0,forward,1,1\n1,a,b,1,f,1,0,forward,,\n",
      "t.csv: layer 1 has no op counts" },
  };
  SimDevice dev = { .matmul_flops = 1e12, .efficiency = 1, .hbm_bandwidth = 1e12 };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(SimWorkload) w = sim_trace_load_data_timed(cases[i].csv, strlen(cases[i].csv), "t.csv", "x", &dev,
                                                         &error);
    ck_assert_msg(w == NULL, "case %u loaded", i);
    ck_assert_msg(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT), "case %u", i);
    ck_assert_msg(strstr(error->message, cases[i].piece) != NULL, "case %u: '%s' lacks '%s'", i, error->message,
                  cases[i].piece);
  }
  /* A device without rates cannot time. */
  static const char ok[] = "layer,op,name,bytes,dtype,shape,is_parameter,phase,flops,moved\n0,a,mm,0,,,0,forward,1,1\n";
  SimDevice none = { .efficiency = 1 };
  g_autoptr(GError) error = NULL;
  ck_assert_ptr_null(sim_trace_load_data_timed(ok, sizeof ok - 1, "t.csv", "x", &none, &error));
  ck_assert(strstr(error->message, "matmul_tflops and hbm_bandwidth") != NULL);
}
END_TEST

/* Bytes of the stage's device tensors freed by each backward op that
 * frees any, in op order. */
static GArray *
free_sequence(const SimLayer *layer)
{
  GArray *seq = g_array_new(FALSE, FALSE, sizeof(guint64));
  for (guint i = layer->n_forward; i < layer->ops->len; i++) {
    guint64 freed = 0;
    for (guint k = 0; k < layer->tensors->len; k++) {
      const SimTensor *t = &g_array_index(layer->tensors, SimTensor, k);
      if (sim_tensor_on_device(t) && t->last_op == i)
        freed += t->bytes;
    }
    if (freed)
      g_array_append_val(seq, freed);
  }
  return seq;
}

/* A recording's op list frees each saved storage at the autograd node that
 * unpacks its last reference.  The generator (ops = hf), checked op by op
 * against the recorded allocation curves (test_hf_memory), frees them in
 * the same order at its coarser ops (a norm is one op there, four nodes
 * here): the recording's frees, taken in order, fall into consecutive
 * groups that are the generator's frees. */
START_TEST(recorded_ops_free_as_the_generator)
{
  for (guint i = 0; i < G_N_ELEMENTS(recordings); i++) {
    const Recording *r = &recordings[i];
    g_autoptr(SimWorkload) gen = generated(r, &device);
    g_autoptr(SimWorkload) rec = traced(r, &device);
    for (guint s = 0; s < LAYERS + 2; s++) {
      ck_assert_msg(sim_layer_has_ops(stage(rec, s)), "%s, %s: no op list", r->file, stage_names[s]);
      g_autoptr(GArray) g = free_sequence(stage(gen, s));
      g_autoptr(GArray) t = free_sequence(stage(rec, s));
      guint k = 0;
      for (guint j = 0; j < g->len; j++) {
        guint64 want = g_array_index(g, guint64, j), sum = 0;
        while (sum < want && k < t->len)
          sum += g_array_index(t, guint64, k++);
        ck_assert_msg(sum == want, "%s, %s: the generator's free %u is %" G_GUINT64_FORMAT " bytes, the recording's "
                      "frees up to its op %u add up to %" G_GUINT64_FORMAT, r->file, stage_names[s], j, want, k, sum);
      }
      ck_assert_msg(k == t->len, "%s, %s: the recording frees more", r->file, stage_names[s]);
    }
  }
}
END_TEST

/* The recording as ops: forward ops in module order, backward ops named
 * by their autograd nodes, each of one kernel class; their seconds add up
 * to the stage's times from the same counts without places, and their
 * kernels to the ATen calls. */
START_TEST(recorded_ops_time_and_name)
{
  g_autofree char *path = g_strdup_printf("%s/llama-eager-bf16.csv", HF_DATA);
  g_autofree char *data = NULL;
  gsize len = 0;
  ck_assert(g_file_get_contents(path, &data, &len, NULL));
  g_autoptr(GError) error = NULL;
  g_autoptr(SimWorkload) ops = sim_trace_load_data_timed(data, len, "t.csv", "t", &device, &error);
  ck_assert_msg(ops != NULL, "%s", error ? error->message : "");
  /* The same file without its places: one op each way, as before. */
  char *col = strstr(data, "forward_op");
  ck_assert_ptr_nonnull(col);
  col[0] = 'F';
  g_autoptr(SimWorkload) flat = sim_trace_load_data_timed(data, len, "t.csv", "t", &device, &error);
  ck_assert_msg(flat != NULL, "%s", error ? error->message : "");
  ck_assert(!sim_workload_has_ops(flat));
  for (guint s = 0; s < LAYERS + 2; s++) {
    const SimLayer *o = stage(ops, s), *f = stage(flat, s);
    ck_assert_msg(fabs(o->forward - f->forward) <= 1e-12 * f->forward, "%s forward", stage_names[s]);
    ck_assert_msg(fabs(o->backward - f->backward) <= 1e-12 * f->backward, "%s backward", stage_names[s]);
  }
  const SimLayer *l1 = sim_workload_layer(ops, 1);
  static const char *const forward[] = { "input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                                         "self_attn.v_proj", "self_attn/gemm", "self_attn/memory",
                                         "self_attn.o_proj", "layers.1", "post_attention_layernorm",
                                         "mlp.gate_proj", "mlp.act_fn", "mlp.up_proj", "mlp", "mlp.down_proj",
                                         "layers.1" };
  ck_assert_uint_eq(l1->n_forward, G_N_ELEMENTS(forward));
  guint kernels = 0;
  for (guint i = 0; i < l1->n_forward; i++) {
    ck_assert_str_eq(sim_layer_op(l1, i)->name, forward[i]);
    kernels += sim_layer_op(l1, i)->kernels;
  }
  ck_assert_uint_eq(sim_layer_op(l1, 1)->kclass, SIM_KERNEL_GEMM);
  ck_assert_uint_eq(sim_layer_op(l1, 5)->kclass, SIM_KERNEL_MEMORY);
  /* The forward's ATen calls in the recording: the norms' 8 each, q, k, v, the attention's 21 (2 bmm;
   * RoPE's 5 mul, 2 neg, 2 cat, 2 add; the mask's add, 4 clones, 2 casts, the softmax), o_proj, two
   * residual adds, gate, silu, up, mul, down. */
  ck_assert_uint_eq(kernels, 8 + 3 + 21 + 1 + 1 + 8 + 5 + 1);
  /* The softmax output is freed by SoftmaxBackward0; the MLP's by then. */
  gboolean softmax = FALSE;
  for (guint i = l1->n_forward; i < l1->ops->len; i++)
    softmax = softmax || strcmp(sim_layer_op(l1, i)->name, "SoftmaxBackward0") == 0;
  ck_assert(softmax);
  /* The host issues one kernel per ATen call at the device's launch cost. */
  SimDevice launching = device;
  launching.launch_overhead = 5e-6;
  col[0] = 'f'; /* the places back */
  g_autoptr(SimWorkload) launched = sim_trace_load_data_timed(data, len, "t.csv", "t", &launching, &error);
  ck_assert_msg(launched != NULL, "%s", error ? error->message : "");
  ck_assert_double_eq(launched->launch, 5e-6);
}
END_TEST

/* Allocation rows by hand: one layer, forward ops at places 1 and 3 (ops
 * 0, 1), backward nodes 5 and 6 (ops 2, 3).  A transient made at 1 and
 * freed at 3 spans ops 0-1; a workspace at 3 is op 1's; a block made
 * between ops (place 2: held from op 1) and freed by node 5 spans op 1 in
 * the forward and op 2 in the backward; a gradient made by node 6 is op
 * 3's; a block held from node 5 spans ops 2-3.  So op 1 holds 100 + 50 +
 * 30, op 2 30 + 7, and the gradients are 64 bytes. */
static const char alloc_head[] = "layer,op,name,bytes,dtype,shape,is_parameter,storage,storage_bytes,saved,leaf,node,"
                                 "phase,flops,moved,calls,forward_op,backward_op,freed_layer,freed_phase,freed_op\n";
static const char alloc_ops[] = "0,a,Mul,8,f32,2,0,0,8,1,0,MulBackward0,forward,,,,1,5,,,\n"
                                "0,a,mul,0,,,0,,,0,,,forward,0,8,1,1,,,,\n"
                                "0,b,add,0,,,0,,,0,,,forward,0,8,1,3,,,,\n"
                                "0,,mul,0,,,0,,,0,,MulBackward0,backward,0,8,1,,5,,,\n"
                                "0,,add,0,,,0,,,0,,AddBackward0,backward,0,8,1,,6,,,\n";

START_TEST(allocation_rows_by_hand)
{
  static const char rows[] = "0,a,transient,100,,,0,,,0,,,forward,,,,1,,0,forward,3\n"
                             "0,b,workspace,50,,,0,,,0,,,forward,,,,3,,,,\n"
                             "0,a,transient,30,,,0,,,0,,,forward,,,,2,,0,backward,5\n"
                             "0,,grad,64,,,0,,,0,,AddBackward0,backward,,,,,6,,,\n"
                             "0,,held,7,,,0,,,0,,,backward,,,,,5,,,\n";
  g_autofree char *csv = g_strconcat(alloc_head, alloc_ops, rows, NULL);
  SimDevice dev = { .matmul_flops = 1e12, .efficiency = 1, .hbm_bandwidth = 1e12 };
  g_autoptr(GError) error = NULL;
  g_autoptr(SimWorkload) w = sim_trace_load_data_timed(csv, strlen(csv), "t.csv", "x", &dev, &error);
  ck_assert_msg(w != NULL, "%s", error ? error->message : "");
  const SimLayer *l = sim_workload_layer(w, 0);
  ck_assert_uint_eq(l->ops->len, 4);
  ck_assert_uint_eq(l->n_forward, 2);
  ck_assert_uint_eq(l->spans->len, 5);
  ck_assert_uint_eq(l->workspace_bytes, 100 + 50 + 30);
  ck_assert_uint_eq(l->backward_workspace_bytes, 30 + 7);
  ck_assert_uint_eq(l->grad_bytes, 64);
  ck_assert_uint_eq(sim_layer_op(l, 3)->grad_bytes, 64);
  /* The same file without places (forward_op renamed): one op each way, the allocation rows dropped. */
  char *col = strstr(csv, "forward_op");
  col[0] = 'F';
  g_autoptr(SimWorkload) flat = sim_trace_load_data_timed(csv, strlen(csv), "t.csv", "x", &dev, &error);
  ck_assert_msg(flat != NULL, "%s", error ? error->message : "");
  ck_assert(!sim_workload_has_ops(flat));
  ck_assert_uint_eq(sim_workload_layer(flat, 0)->workspace_bytes, 0);
}
END_TEST

/* Bad allocation rows name line, column and what was expected. */
START_TEST(bad_allocation_rows_are_named)
{
  static const struct {
    const char *rows;
    const char *piece;
  } cases[] = {
    { "0,a,transient,100,,,0,,,0,,,forward,,,,1,,,,\n", "t.csv:7: column 'freed_layer': a transient row needs where" },
    { "0,b,workspace,50,,,0,,,0,,,forward,,,,3,,0,forward,3\n", "t.csv:7: column 'freed_layer': only a transient row" },
    { "0,a,transient,100,,,0,,,0,,,forward,,,,1,,0,sideways,3\n",
      "t.csv:7: column 'freed_phase': expected forward or backward, got 'sideways'" },
    { "0,,transient,5,,,0,,,0,,,backward,,,,,6,0,forward,1\n", "t.csv:7: column 'freed_layer': freed before it was" },
    { "0,,transient,5,,,0,,,0,,,backward,,,,,6,0,backward,5\n", "t.csv:7: column 'freed_op': freed before it was" },
    { "0,a,transient,100,,,0,,,0,,,forward,,,,,,0,forward,3\n",
      "t.csv:7: column 'forward_op': a transient row needs the op that allocated it" },
    { "0,,grad,100,,,0,,,0,,,backward,,,,,x,,,\n", "t.csv:7: column 'backward_op': expected a whole number" },
    { "0,a,transient,100,,,0,,,0,,,forward,,,,1,,7,forward,3\n", "t.csv:7: column 'freed_layer': layer 7 is not in the recording (layers 0 to 0)" },
  };
  SimDevice dev = { .matmul_flops = 1e12, .efficiency = 1, .hbm_bandwidth = 1e12 };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *csv = g_strconcat(alloc_head, alloc_ops, cases[i].rows, NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimWorkload) w = sim_trace_load_data_timed(csv, strlen(csv), "t.csv", "x", &dev, &error);
    ck_assert_msg(w == NULL, "case %u loaded", i);
    ck_assert_msg(strstr(error->message, cases[i].piece) != NULL, "case %u: '%s' lacks '%s'", i, error->message,
                  cases[i].piece);
  }
  static const char partial[] = "layer,op,name,bytes,dtype,shape,is_parameter,saved,leaf,phase,flops,moved,"
                                "forward_op,backward_op,freed_layer\n0,a,mul,0,,,0,0,,forward,0,8,1,,\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(SimWorkload) w = sim_trace_load_data_timed(partial, strlen(partial), "t.csv", "x", &dev, &error);
  ck_assert(w == NULL);
  ck_assert_msg(strstr(error->message, "t.csv:1: column 'freed_phase': expected freed_layer, freed_phase and "
                                       "freed_op together"), "%s", error->message);
}
END_TEST

/* A file with places: a saved reference without the op that unpacks it,
 * or a compute row without its op, is an error naming line and column. */
START_TEST(bad_places_are_named)
{
  static const char head[] = "layer,op,name,bytes,dtype,shape,is_parameter,storage,storage_bytes,saved,leaf,node,"
                             "phase,flops,moved,calls,forward_op,backward_op\n";
  static const struct {
    const char *rows;
    const char *piece;
  } cases[] = {
    { "0,a,Mul,8,f32,2,0,0,8,1,0,MulBackward0,forward,,,,1,\n0,a,mul,0,,,0,,,0,,,forward,0,8,1,1,\n"
      "0,,mul,0,,,0,,,0,,MulBackward0,backward,0,8,1,,2\n",
      "t.csv:2: column 'backward_op': a saved reference needs the backward op that unpacks it" },
    { "0,a,mul,0,,,0,,,0,,,forward,0,8,1,,\n", "t.csv:2: column 'forward_op': a forward compute row needs" },
    { "0,a,mul,0,,,0,,,0,,,forward,0,8,1,1,\n0,,mul,0,,,0,,,0,,X,backward,0,8,1,,x\n", "t.csv:3: column 'backward_op'" },
    { "0,a,mul,0,,,0,,,0,,,forward,0,8,1,1,\n", "t.csv: layer 0: no backward op" },
  };
  SimDevice dev = { .matmul_flops = 1e12, .efficiency = 1, .hbm_bandwidth = 1e12 };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *csv = g_strconcat(head, cases[i].rows, NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(SimWorkload) w = sim_trace_load_data_timed(csv, strlen(csv), "t.csv", "x", &dev, &error);
    ck_assert_msg(w == NULL, "case %u loaded", i);
    ck_assert_msg(strstr(error->message, cases[i].piece) != NULL, "case %u: '%s' lacks '%s'", i, error->message,
                  cases[i].piece);
  }
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("trace_hf");
  TCase *tc = tcase_create("hf");
  /* Whole models and recordings under ASan on a loaded machine: not Check's 4 s. */
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, recording_equals_generator_per_stage);
  tcase_add_test(tc, op_counts_time_layers_as_the_generator);
  tcase_add_test(tc, old_recordings_load_as_before);
  tcase_add_test(tc, trace_group_times_from_counts_unless_given);
  tcase_add_test(tc, recorder_columns_by_hand);
  tcase_add_test(tc, bad_counts_are_named);
  tcase_add_test(tc, recorded_ops_free_as_the_generator);
  tcase_add_test(tc, recorded_ops_time_and_name);
  tcase_add_test(tc, bad_places_are_named);
  tcase_add_test(tc, allocation_rows_by_hand);
  tcase_add_test(tc, bad_allocation_rows_are_named);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
