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

/* What a writer is given: the shape over `n` layers, and whether it
 * recomputes and offloads. */
typedef struct {
  const PlannerShape *shape;
  guint n;
  gboolean recompute, offload;
} Emit;

/* A target's configuration: the source its names are read from, what it
 * leaves to the user's code, whether the format has comments (`#`), and the
 * writer.  One per row of PLANNER_TARGET_MAP, NAME_emitter. */
typedef struct {
  const char *source;
  const char *note;
  gboolean comments;
  void (*write)(GString *out, const Emit *e);
} Emitter;

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
write_megatron(GString *out, const Emit *e)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
  if (e->shape->on == SIM_ACTION_SELECTIVE || e->shape->on == SIM_ACTION_SELECTIVE_OFFLOAD) {
    /* offsim's selective recompute is the attention core, Megatron's default module. */
    g_ptr_array_add(args, g_strdup("--recompute-granularity selective"));
    g_ptr_array_add(args, g_strdup("--recompute-modules core_attn"));
  } else if (e->shape->on == SIM_ACTION_RECOMPUTE && e->shape->first > 0) {
    g_ptr_array_add(args, g_strdup("--recompute-granularity full"));
    g_ptr_array_add(args, g_strdup("--recompute-method block"));
    g_ptr_array_add(args, g_strdup_printf("--recompute-num-layers %u", e->shape->first));
  }
  if (is_offload(e->shape->rest) || is_offload(e->shape->on)) {
    g_ptr_array_add(args, g_strdup("--fine-grained-activation-offloading"));
    g_autofree char *modules = g_strjoinv(" ", (char **)sim_framework_megatron_modules);
    g_ptr_array_add(args, g_strdup_printf("--offload-modules %s", modules));
  }
  for (guint i = 0; i < args->len; i++)
    g_string_append_printf(out, "%s%s\n", (char *)g_ptr_array_index(args, i), i + 1 < args->len ? " \\" : "");
}

static const Emitter megatron_emitter = {
  .source = "NVIDIA/Megatron-LM@d98e8a64ddf3 megatron/core/transformer/transformer_config.py",
  .note = "Megatron-LM flags; block recompute counts layers per pipeline stage",
  .comments = TRUE,
  .write = write_megatron,
};

static void
write_torchtune(GString *out, const Emit *e)
{
  g_string_append_printf(out, "enable_activation_checkpointing: %s\nenable_activation_offloading: %s\n",
                         yes(e->recompute), yes(e->offload));
}

static const Emitter torchtune_emitter = {
  .source = "pytorch/torchtune@bd2a0fc7c314 recipes/configs",
  .note = "torchtune recipe keys",
  .comments = TRUE,
  .write = write_torchtune,
};

static void
write_verl(GString *out, const Emit *e)
{
  g_string_append_printf(out, "actor_rollout_ref:\n  model:\n    enable_gradient_checkpointing: %s\n"
                              "    enable_activation_offload: %s\n", yes(e->recompute), yes(e->offload));
}

static const Emitter verl_emitter = {
  .source = "volcengine/verl@b178a3cd56f5 verl/trainer/config/model/hf_model.yaml",
  .note = "verl trainer config (the actor's model; the critic's is critic.model)",
  .comments = TRUE,
  .write = write_verl,
};

static void
write_te(GString *out, const Emit *e)
{
  g_string_append_printf(out, "cpu_offload_context, sync_function = get_cpu_offload_context(\n"
                              "    enabled=%s,\n    num_layers=%u,\n    model_layers=%u,\n)\n",
                         e->offload ? "True" : "False", e->offload ? e->shape->first : 0, e->n);
}

static const Emitter te_emitter = {
  .source = "NVIDIA/TransformerEngine@d0067d0da6cb transformer_engine/pytorch/cpu_offload.py",
  .note = "TransformerEngine: enter cpu_offload_context around each of the model_layers layers "
          "and call sync_function on each output",
  .comments = TRUE,
  .write = write_te,
};

static void
write_deepspeed(GString *out, const Emit *e)
{
  g_string_append_printf(out, "{\n  \"activation_checkpointing\": {\n    \"partition_activations\": false,\n"
                              "    \"cpu_checkpointing\": %s,\n    \"contiguous_memory_optimization\": false,\n"
                              "    \"number_checkpoints\": %u,\n    \"synchronize_checkpoint_boundary\": false,\n"
                              "    \"profile\": false\n  }\n}\n", yes(e->offload), e->recompute ? e->n : 0);
}

/* JSON has no comments: the plan is said on stderr. */
static const Emitter deepspeed_emitter = {
  .source = "microsoft/DeepSpeed@38327e07f6cd deepspeed/runtime/activation_checkpointing/config.py",
  .note = "DeepSpeed config; it checkpoints the layers the model's code wraps in "
          "deepspeed.checkpointing.checkpoint: wrap every layer (none when number_checkpoints "
          "is 0)",
  .comments = FALSE,
  .write = write_deepspeed,
};

static void
write_torchtitan(GString *out, const Emit *e)
{
  if (e->shape->every)
    g_string_append_printf(out, "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"%u\"\n",
                           e->shape->every);
  else
    g_string_append_printf(out, "[activation_checkpoint]\nmode = \"%s\"\n", e->recompute ? "full" : "none");
}

static const Emitter torchtitan_emitter = {
  .source = "pytorch/torchtitan@238fa9953e4a torchtitan/config/job_config.py",
  .note = "torchtitan job config table",
  .comments = TRUE,
  .write = write_torchtitan,
};

static const Emitter *
emitter_of(PlannerTarget target)
{
#define EMITTER_(e, name, framework) [PLANNER_TARGET_##e] = &name##_emitter,
  static const Emitter *const emitters[] = { PLANNER_TARGET_MAP(EMITTER_) };
#undef EMITTER_
  g_assert(target < PLANNER_TARGET_COUNT);
  return emitters[target];
}

char *
cli_emit_config(PlannerTarget target, const PlannerShape *shape, guint n, const char *comment)
{
  const Emitter *w = emitter_of(target);
  GString *out = g_string_new(NULL);
  if (w->comments) {
    g_autofree char *cited = g_strdup_printf("%s\nnames from %s", comment, w->source);
    append_comment(out, "#", cited);
  }
  Emit e = { .shape = shape, .n = n, .recompute = is_recompute(shape->on),
             .offload = is_offload(shape->on) || is_offload(shape->rest) };
  w->write(out, &e);
  return g_string_free(out, FALSE);
}

const char *
cli_emit_note(PlannerTarget target)
{
  return emitter_of(target)->note;
}
