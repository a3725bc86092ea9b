#include "model/framework.h"
#include "model/workload.h"

/* Element and byte thresholds of the frameworks' size filters. */
#define TE_MIN_ELEMENTS (1u << 18)       /* cpu_offload.py: tensors under 2^18 elements stay */
#define MEGATRON_MIN_ELEMENTS 1048576u   /* fine_grained_activation_offload.py: under 1M elements */
#define TORCHTUNE_MIN_BYTES 1024u        /* _activation_offloading.py: under 1 KiB */
#define TORCHTUNE_INFLIGHT 5u            /* waits at each save for copies 5 save-ids back */
#define UNLIMITED (1u << 30)             /* no in-flight limit */

/* PyTorch torch/autograd/graph.py save_on_cpu: the pack hook copies every
 * saved reference (parameters too) when it is saved, on the current
 * stream, to pageable memory unless pin_memory; the unpack hook copies it
 * back when backward reads it. */
static void
preset_save_on_cpu(SimPolicy *p)
{
  p->async = FALSE;
  p->start_tensor = TRUE;
  p->dedup = FALSE;
  p->keep_last = 0;
  p->scope_all = TRUE;
  p->params = SIM_PARAMS_COPY;
  p->copy_leaves = TRUE;
  p->pinned = SIM_PINNED_PAGEABLE;
  p->reload = SIM_RELOAD_ON_DEMAND;
  p->prefetch = 0;
}

/* verl utils/activation_offload.py: a group per layer committed at its
 * output, D2H on its own stream, the commit of k + 1 waits for D2H(k) and
 * frees group k (two groups in flight), H2D(k - 1) issued at the backward
 * commit of k, the last commit waits before the loss head; each storage
 * once per group, parameters skipped, the last layer kept; host buffers
 * from torch.empty(pin_memory=True), PyTorch's caching host allocator. */
static void
preset_verl(SimPolicy *p)
{
  p->async = TRUE;
  p->start_tensor = FALSE;
  p->shared_stream = FALSE;
  p->inflight_unit = SIM_INFLIGHT_GROUPS;
  p->inflight = 2;
  p->free = SIM_FREE_NEXT_COMMIT;
  p->reload = SIM_RELOAD_PREFETCH;
  p->prefetch = 1;
  p->head_wait = TRUE;
  p->dedup = TRUE;
  p->params = SIM_PARAMS_SKIP;
  p->keep_last = 1;
  p->pinned = SIM_PINNED_CACHING;
}

/* TransformerEngine pytorch/cpu_offload.py (NVIDIA/TransformerEngine@d0067d0):
 * each tensor offloaded as it is saved (push_tensor's event, l. 366-400;
 * start_offload, l. 259-312), one stream for both directions (l. 509), the
 * forward of layer L - n + j waits for layer j's copies and then frees
 * them (release_activation_forward_gpu_memory, l. 314-329, 636-637) and
 * layer j reloads at the backward of L - 1 - n + j (the window, l.
 * 602-647), at most L - 1 layers; tensors under 2^18 elements, parameters
 * and non-contiguous tensors stay (_check_if_offload, l. 454-475: in HF's
 * code q after RoPE and SDPA's output, whose storage o_proj's input shares
 * and so stays held on the device while o_proj's reference is copied);
 * whole-size views replaced by their base (dedup, l. 138-197).  Its host
 * buffers are torch.empty_like(..., pin_memory=True) each step (l.
 * 274-294, freed by release_all_memory l. 446-452): PyTorch's caching host
 * allocator, which serves a step's requests from the blocks the step
 * before freed. */
static void
preset_te(SimPolicy *p)
{
  p->async = TRUE;
  p->start_tensor = TRUE;
  p->shared_stream = TRUE;
  p->inflight_unit = SIM_INFLIGHT_WINDOW;
  p->free = SIM_FREE_WAIT;
  p->reload = SIM_RELOAD_PREFETCH;
  p->min_elements = TE_MIN_ELEMENTS;
  p->params = SIM_PARAMS_SKIP;
  p->dedup = TRUE;
  p->keep_last = 1;
  p->pinned = SIM_PINNED_CACHING;
  p->skip_strided = TRUE;
}

/* Megatron-LM's offload_modules (transformer_config.py l. 1328-1342; the
 * fused_group_mlp and GatedDeltaProduct ones have no module in offsim's
 * layers) and the modules of offsim's ops they wrap (transformer_layer.py
 * l. 709-729, 760-764, 818-830, 1109-1115: input_layernorm, committed
 * after the attention's residual add; attention.py l. 1386-1395,
 * 1552-1607, 1626-1629: get_query_key_value_tensors, core_attention,
 * linear_proj; the pre-MLP layernorm; moe/experts.py l. 928-941,
 * TEGroupedMLP.forward: expert_fc1 around grouped fc1, whose input is the
 * permuted tokens, moe_act around the activation, whose inputs are fc1's
 * output and the permuted probabilities; NVIDIA/Megatron-LM@d98e8a6). */
const char *const sim_framework_megatron_modules[] = { "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm",
                                                       "expert_fc1", "moe_act", NULL };
static const guint8 megatron_module_of[] = { SIM_MODULE_ATTN_NORM, SIM_MODULE_QKV, SIM_MODULE_CORE_ATTN,
                                             SIM_MODULE_ATTN_PROJ, SIM_MODULE_MLP_NORM, SIM_MODULE_EXPERT_FC1,
                                             SIM_MODULE_MOE_ACT };
G_STATIC_ASSERT(G_N_ELEMENTS(megatron_module_of) + 1 == G_N_ELEMENTS(sim_framework_megatron_modules));
G_STATIC_ASSERT(SIM_FRAMEWORK_MEGATRON_ALL == (1u << G_N_ELEMENTS(megatron_module_of)) - 1);

guint32
sim_framework_megatron_hooked(guint names)
{
  guint32 hooked = 0;
  for (guint i = 0; i < G_N_ELEMENTS(megatron_module_of); i++)
    if (names & (1u << i))
      hooked |= 1u << megatron_module_of[i];
  return hooked;
}

/* Megatron-LM megatron/core/pipeline_parallel/fine_grained_activation_
 * offload.py (NVIDIA/Megatron-LM@d98e8a6): a group per module of
 * offload_modules in each layer (FineGrainedOffloadingGroupStartFunction
 * on its input, l. 1439-1469; the hooks only inside the module, l.
 * 1504-1514, 835-878), committed on its output (l. 1357-1387): the D2H
 * stream waits for the compute stream and copies every reference the
 * group saved of at least min_offloaded_tensor_size = 1,048,576 elements
 * (transformer_config.py l. 1343; l. 1077-1091, 1093-1130), no dedup, the
 * device memory freed at copy end (record_stream, l. 1125), no compute
 * wait (max_inflight_offloads None, l. 1250-1260).  A non-contiguous view
 * covering at least half its storage copies the whole storage, a smaller
 * one a gathered contiguous copy (l. 887-934).  Backward: the commit's
 * backward, at the module's backward start, makes compute wait for its
 * group's reload (l. 1288-1308); the start's, at its end, reloads the
 * newest offloaded group not yet reloaded on the H2D stream after the
 * compute stream and its offload (l. 1176-1196, 1271-1287, 1332-1342).
 * The last group of each name stays (l. 609-639, 1206-1227): the last
 * layer.  Host buffers: OffloadTensorPool, torch.empty(pin_memory=True)
 * keyed by shape, reset and reused every iteration (l. 150-259, 480,
 * 551-558): the caching host allocator's blocks. */
static void
preset_megatron(SimPolicy *p)
{
  p->async = TRUE;
  p->start_tensor = FALSE;
  p->shared_stream = FALSE;
  p->inflight_unit = SIM_INFLIGHT_GROUPS;
  p->inflight = UNLIMITED;
  p->free = SIM_FREE_COPY_END;
  p->reload = SIM_RELOAD_PREFETCH;
  p->prefetch = 1;
  p->min_elements = MEGATRON_MIN_ELEMENTS;
  p->params = SIM_PARAMS_SKIP;
  p->dedup = FALSE;
  p->keep_last = 1;
  p->pinned = SIM_PINNED_CACHING;
  p->hooked = sim_framework_megatron_hooked(SIM_FRAMEWORK_MEGATRON_ALL);
  p->module_groups = TRUE;
}

/* torchtune training/_activation_offloading.py (pytorch/torchtune@bd2a0fc):
 * each saved tensor on one side stream for both directions as it is saved
 * (l. 177-194), each save waiting for the copies five save-ids back (l.
 * 165-174); no dedup; under 1 KiB, nn.Parameter objects and buffers stay
 * (l. 149-164), but views of parameters (nn.Linear saves weight.t()) are
 * copied (python/offsim_torch/frameworks.py found them).  Each host buffer is
 * torch.empty_like(activation, pin_memory=True, device="cpu") (l.
 * 182-184): the caching host allocator.  Its context wraps the model's
 * forward but the output head, under a NoOpManager (l. 409-434), and the
 * recipes compute the loss outside it: the embedding and the final norm
 * are offloaded, the LM head and the loss are not.  Reloads are per tensor
 * at unpack (l. 240-361): the copy is issued when autograd unpacks, the
 * compute stream waits for it at once, and the copy stream waits only for
 * what the hook of the node before made it wait for, the end of the node
 * before that.  With activation checkpointing (its recommended mode), a
 * non-reentrant checkpoint of PyTorch >= 2.1 saves its inputs with
 * save_for_backward before its region (torch/utils/checkpoint.py,
 * _NoopSaveInputs), which the hook offloads: only the checkpoint inputs
 * move. */
static void
preset_torchtune(SimPolicy *p)
{
  p->async = TRUE;
  p->start_tensor = TRUE;
  p->shared_stream = TRUE;
  p->inflight_unit = SIM_INFLIGHT_TENSORS;
  p->inflight = TORCHTUNE_INFLIGHT;
  p->reload = SIM_RELOAD_ON_UNPACK;
  p->prefetch = 0;
  p->min_tensor = TORCHTUNE_MIN_BYTES;
  p->params = SIM_PARAMS_VIEWS; /* it skips nn.Parameter objects, not nn.Linear's weight.t() */
  p->dedup = FALSE;
  p->keep_last = 0;
  p->pinned = SIM_PINNED_CACHING;
  p->scope_all = TRUE;
  p->hooked = ((1u << SIM_MODULE_COUNT) - 1) & ~((1u << SIM_MODULE_LM_HEAD) | (1u << SIM_MODULE_LOSS));
  p->input_first = TRUE;
}

/* DeepSpeed runtime/activation_checkpointing/checkpointing.py with
 * cpu_checkpointing: every layer checkpointed, only its input moved to the
 * host, reloaded on demand by the recompute.
 *
 * release (deepspeedai/DeepSpeed v0.19.5, cf44300, the latest release):
 * CheckpointFunction.forward copies the input with copy_to_device(args,
 * torch.device('cpu')) before running the layer (l. 530-531, 544;
 * runtime/utils.py l. 164-177: item.to(device)), a blocking copy into
 * pageable memory on the compute stream, and empties the device input
 * after the layer (get_cpu_activations_for_backward, l. 474-485, 553-555);
 * backward copies it back with t.saved_data.to(t.device) (l. 615-618),
 * blocking and pageable again.  No layer is kept.
 *
 * master (edaa722, after #8282 of August 2026, in no release):
 * _ActivationOffloadEngine (offload_activations.py) registers the input
 * after the layer's forward (checkpointing.py l. 628, 638; l. 519-550)
 * and keeps the newest keep_last_count = 1 on the device (l. 210-230,
 * checkpointing.py l. 510), so input k leaves when input k + 1 registers,
 * after layer k + 1's forward; one side stream s1 carries both directions
 * (l. 102, 186-193, 267-276), with no compute wait on the copies out
 * (record_stream, l. 202-207); the reload is issued by the recompute and
 * the compute stream waits for it (l. 272-276); host buffers come from a
 * pool of tensor.pin_memory() blocks (l. 168-181): the caching host
 * allocator's, reused. */
static void
preset_deepspeed(SimPolicy *p)
{
  p->checkpoint = TRUE;
  p->reload = SIM_RELOAD_ON_DEMAND;
  p->prefetch = 0;
  p->dedup = TRUE;
  if (p->version == SIM_VERSION_RELEASE) {
    p->async = FALSE;
    p->input_first = TRUE;
    p->keep_last = 0;
    p->pinned = SIM_PINNED_PAGEABLE;
    return;
  }
  p->async = TRUE;
  p->defer_offload = TRUE;
  p->shared_stream = TRUE;
  p->inflight = UNLIMITED;
  p->keep_last = 1; /* the last layer's input stays (keep_last_count) */
  p->pinned = SIM_PINNED_CACHING;
}

/* SIM_FRAMEWORK_NONE: the options stay as given. */
static void
preset_none(SimPolicy *p)
{
  (void)p;
}

void
sim_framework_preset(SimPolicy *p, SimFramework f)
{
#define PRESET_(e, name, checkpoints) [SIM_FRAMEWORK_##e] = preset_##name,
  static void (*const presets[])(SimPolicy *) = { SIM_FRAMEWORK_MAP(PRESET_) };
#undef PRESET_
  g_assert(f < SIM_FRAMEWORK_COUNT);
  p->framework = f;
  presets[f](p);
}

gboolean
sim_framework_offloads_checkpoints(SimFramework f)
{
#define CHECKPOINTS_(e, name, checkpoints) [SIM_FRAMEWORK_##e] = checkpoints,
  static const gboolean checkpoints[] = { SIM_FRAMEWORK_MAP(CHECKPOINTS_) };
#undef CHECKPOINTS_
  g_assert(f < SIM_FRAMEWORK_COUNT);
  return checkpoints[f];
}
