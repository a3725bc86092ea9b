/* cli/emit.c — `offsim plan --emit NAME`: a plan of NAME's shapes
 * (planner/shapes.h) written as NAME's own configuration.
 *
 * The option names are the frameworks' own, read from their source at the
 * commits below; tests/emit_test.py checks every name written against the
 * lists tests/data/frameworks/extract_options.py extracted there:
 *
 *   megatron    NVIDIA/Megatron-LM d98e8a64ddf3, megatron/core/transformer/
 *               transformer_config.py (recompute_granularity, recompute_method,
 *               recompute_num_layers, recompute_modules,
 *               fine_grained_activation_offloading, offload_modules), which
 *               megatron/training/argument_utils.py turns into --dashed flags
 *   torchtune   pytorch/torchtune bd2a0fc7c314, the recipes/configs YAML files and
 *               recipes/full_finetune_distributed.py (offloading needs
 *               enable_activation_checkpointing)
 *   verl        volcengine/verl b178a3cd56f5, verl/trainer/config/
 *               model/hf_model.yaml under actor_rollout_ref.model
 *   te          NVIDIA/TransformerEngine d0067d0da6cb, transformer_engine/
 *               pytorch/cpu_offload.py get_cpu_offload_context (layers
 *               0 .. num_layers - 1 offload: DefaultOffloadSynchronizer)
 *   deepspeed   microsoft/DeepSpeed 38327e07f6cd, deepspeed/runtime/
 *               activation_checkpointing/config.py (ACT_CHKPT_*)
 *   torchtitan  pytorch/torchtitan 238fa9953e4a, torchtitan/config/
 *               job_config.py ActivationCheckpoint and torchtitan/distributed/
 *               activation_checkpoint.py _apply_layer_sac (every k-th block,
 *               counted from 1), the last commit with the TOML table
 *
 * Comments (where the format has them) say what offsim planned; what the
 * configuration leaves to the user's code goes to stderr (cli_emit_note). */
#include "cli/cli.h"

#include "model/framework.h"

static const char *const sources[PLANNER_TARGET_COUNT] = {
  [PLANNER_TARGET_MEGATRON] = "NVIDIA/Megatron-LM@d98e8a64ddf3 megatron/core/transformer/transformer_config.py",
  [PLANNER_TARGET_TORCHTUNE] = "pytorch/torchtune@bd2a0fc7c314 recipes/configs",
  [PLANNER_TARGET_VERL] = "volcengine/verl@b178a3cd56f5 verl/trainer/config/model/hf_model.yaml",
  [PLANNER_TARGET_TE] = "NVIDIA/TransformerEngine@d0067d0da6cb transformer_engine/pytorch/cpu_offload.py",
  [PLANNER_TARGET_DEEPSPEED] = "microsoft/DeepSpeed@38327e07f6cd deepspeed/runtime/activation_checkpointing/config.py",
  [PLANNER_TARGET_TORCHTITAN] = "pytorch/torchtitan@238fa9953e4a torchtitan/config/job_config.py",
};

static gboolean
is_offload(SimAction a)
{
  return a == SIM_ACTION_OFFLOAD || a == SIM_ACTION_RECOMPUTE_OFFLOAD || a == SIM_ACTION_SELECTIVE_OFFLOAD;
}

static gboolean
is_recompute(SimAction a)
{
  return a == SIM_ACTION_RECOMPUTE || a == SIM_ACTION_RECOMPUTE_OFFLOAD;
}

static const char *
yes(gboolean b)
{
  return b ? "true" : "false";
}

/* `comment` as lines starting with `mark`. */
static void
append_comment(GString *out, const char *mark, const char *comment)
{
  g_auto(GStrv) lines = g_strsplit(comment, "\n", -1);
  for (char **l = lines; *l; l++)
    if (**l)
      g_string_append_printf(out, "%s %s\n", mark, *l);
}

static void
megatron(GString *out, const PlannerShape *shape)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
  if (shape->on == SIM_ACTION_SELECTIVE || shape->on == SIM_ACTION_SELECTIVE_OFFLOAD) {
    /* offsim's selective recompute is the attention core, Megatron's default module. */
    g_ptr_array_add(args, g_strdup("--recompute-granularity selective"));
    g_ptr_array_add(args, g_strdup("--recompute-modules core_attn"));
  } else if (shape->on == SIM_ACTION_RECOMPUTE && shape->first > 0) {
    g_ptr_array_add(args, g_strdup("--recompute-granularity full"));
    g_ptr_array_add(args, g_strdup("--recompute-method block"));
    g_ptr_array_add(args, g_strdup_printf("--recompute-num-layers %u", shape->first));
  }
  if (is_offload(shape->rest) || is_offload(shape->on)) {
    g_ptr_array_add(args, g_strdup("--fine-grained-activation-offloading"));
    g_autofree char *modules = g_strjoinv(" ", (char **)sim_framework_megatron_modules);
    g_ptr_array_add(args, g_strdup_printf("--offload-modules %s", modules));
  }
  for (guint i = 0; i < args->len; i++)
    g_string_append_printf(out, "%s%s\n", (char *)g_ptr_array_index(args, i), i + 1 < args->len ? " \\" : "");
}

char *
cli_emit_config(PlannerTarget target, const PlannerShape *shape, guint n, const char *comment)
{
  GString *out = g_string_new(NULL);
  g_autofree char *cited = g_strdup_printf("%s\nnames from %s", comment, sources[target]);
  gboolean recompute = is_recompute(shape->on), offload = is_offload(shape->on) || is_offload(shape->rest);
  switch (target) {
  case PLANNER_TARGET_MEGATRON:
    append_comment(out, "#", cited);
    megatron(out, shape);
    break;
  case PLANNER_TARGET_TORCHTUNE:
    append_comment(out, "#", cited);
    g_string_append_printf(out, "enable_activation_checkpointing: %s\nenable_activation_offloading: %s\n",
                           yes(recompute), yes(offload));
    break;
  case PLANNER_TARGET_VERL:
    append_comment(out, "#", cited);
    g_string_append_printf(out, "actor_rollout_ref:\n  model:\n    enable_gradient_checkpointing: %s\n"
                                "    enable_activation_offload: %s\n", yes(recompute), yes(offload));
    break;
  case PLANNER_TARGET_TE:
    append_comment(out, "#", cited);
    g_string_append_printf(out, "cpu_offload_context, sync_function = get_cpu_offload_context(\n"
                                "    enabled=%s,\n    num_layers=%u,\n    model_layers=%u,\n)\n",
                           offload ? "True" : "False", offload ? shape->first : 0, n);
    break;
  case PLANNER_TARGET_DEEPSPEED:
    /* JSON has no comments: the plan is said on stderr. */
    g_string_append_printf(out, "{\n  \"activation_checkpointing\": {\n    \"partition_activations\": false,\n"
                                "    \"cpu_checkpointing\": %s,\n    \"contiguous_memory_optimization\": false,\n"
                                "    \"number_checkpoints\": %u,\n    \"synchronize_checkpoint_boundary\": false,\n"
                                "    \"profile\": false\n  }\n}\n", yes(offload), recompute ? n : 0);
    break;
  case PLANNER_TARGET_TORCHTITAN:
    append_comment(out, "#", cited);
    if (shape->every)
      g_string_append_printf(out, "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"%u\"\n",
                             shape->every);
    else
      g_string_append_printf(out, "[activation_checkpoint]\nmode = \"%s\"\n", recompute ? "full" : "none");
    break;
  case PLANNER_TARGET_COUNT:
    g_assert_not_reached();
  }
  return g_string_free(out, FALSE);
}

const char *
cli_emit_note(PlannerTarget target)
{
  static const char *const notes[PLANNER_TARGET_COUNT] = {
    [PLANNER_TARGET_MEGATRON] = "Megatron-LM flags; block recompute counts layers per pipeline stage",
    [PLANNER_TARGET_TORCHTUNE] = "torchtune recipe keys",
    [PLANNER_TARGET_VERL] = "verl trainer config (the actor's model; the critic's is critic.model)",
    [PLANNER_TARGET_TE] = "TransformerEngine: enter cpu_offload_context around each of the model_layers layers "
                          "and call sync_function on each output",
    [PLANNER_TARGET_DEEPSPEED] = "DeepSpeed config; it checkpoints the layers the model's code wraps in "
                                 "deepspeed.checkpointing.checkpoint: wrap every layer (none when number_checkpoints "
                                 "is 0)",
    [PLANNER_TARGET_TORCHTITAN] = "torchtitan job config table",
  };
  return notes[target];
}
