/* cli/model.c — `offsim model`: a HuggingFace config.json turned into a
 * complete scenario, with the tensors each layer saves listed as comments.
 *
 * Every error names the user's file: the config.json (its shape goes
 * through sim_transformer_validate, the check a [transformer] group gets,
 * in the config.json's field names), the option (--batch, --seq), or the
 * profile, which is loaded on its own with the generated [transformer]
 * keys set over it.  A scenario written with --out includes the profile by
 * its path relative to the scenario's directory; one printed to stdout, by
 * the path as given (relative to the current directory). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "cli/cli.h"

#include "base/error.h"
#include "base/output.h"
#include "base/units.h"
#include "input/hf_config.h"
#include "input/scenario.h"
#include "input/schema.h"
#include "input/transformer.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *hf_config, *ops, *dtype, *attention, *optimizer, *profile, *name, *out;
  int batch, seq;
} ModelOptions;

static void
model_options_clear(ModelOptions *o)
{
  g_free(o->hf_config);
  g_free(o->ops);
  g_free(o->dtype);
  g_free(o->attention);
  g_free(o->optimizer);
  g_free(o->profile);
  g_free(o->name);
  g_free(o->out);
}

/* `value` of `option`, when given, parsed as [transformer] key `id` into `t`. */
static gboolean
option_into(const char *option, const char *value, SimKeyId id, SimTransformer *t, GError **error)
{
  GError *cause = NULL;
  if (value == NULL || sim_schema_parse(id, value, t, &cause))
    return TRUE;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s", option, cause->message);
  g_error_free(cause);
  return FALSE;
}

/* "#   q   1.75 MiB" lines for one layer's tensors. */
static void
list_tensors(GString *out, const char *title, const SimLayer *layer)
{
  g_autofree char *total = sim_units_format_size(sim_layer_saved_bytes(layer));
  g_string_append_printf(out, "# %s: %u tensors, %s\n", title, layer->tensors->len, total);
  for (guint i = 0; i < layer->tensors->len; i++) {
    const SimTensor *t = &g_array_index(layer->tensors, SimTensor, i);
    g_autofree char *size = sim_units_format_size(t->bytes);
    g_string_append_printf(out, "#   %-20s %10s", t->name, size);
    if (t->refs > 1)
      g_string_append_printf(out, "  %u refs", t->refs);
    if (t->selective)
      g_string_append(out, "  selective");
    /* What a hook may treat apart (the lowering's fates). */
    static const char *const flag_names[] = { "leaf", "parameter", "shared", "host", "kept" };
    gboolean flags[] = { t->leaf, t->parameter, t->shared, t->host, !t->offloadable && !t->host };
    for (guint f = 0; f < G_N_ELEMENTS(flags); f++)
      if (flags[f])
        g_string_append_printf(out, "  %s", flag_names[f]);
    g_string_append_c(out, '\n');
  }
}

/* A line break in a value would end its line of the scenario and start
 * another: refused, naming the option. */
static gboolean
one_line(const char *option, const char *value, GError **error)
{
  if (value == NULL || strpbrk(value, "\r\n") == NULL)
    return TRUE;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: a line break cannot be written into a scenario", option);
  return FALSE;
}

/* The non-empty components of an absolute path. */
static GPtrArray *
components(const char *path)
{
  GPtrArray *parts = g_ptr_array_new_with_free_func(g_free);
  g_auto(GStrv) split = g_strsplit(path, G_DIR_SEPARATOR_S, -1);
  for (char **part = split; *part; part++)
    if (**part)
      g_ptr_array_add(parts, g_strdup(*part));
  return parts;
}

/* `target` relative to directory `base`, both absolute and free of
 * symbolic links and dots (so that ".." goes where it reads). */
static char *
relative_to(const char *base, const char *target)
{
  g_autoptr(GPtrArray) b = components(base), t = components(target);
  guint common = 0;
  while (common < b->len && common < t->len && strcmp(b->pdata[common], t->pdata[common]) == 0)
    common++;
  GString *rel = g_string_new(NULL);
  for (guint i = common; i < b->len; i++)
    g_string_append(rel, ".." G_DIR_SEPARATOR_S);
  for (guint i = common; i < t->len; i++)
    g_string_append_printf(rel, "%s%s", (const char *)t->pdata[i], i + 1 < t->len ? G_DIR_SEPARATOR_S : "");
  return g_string_free(rel, FALSE);
}

/* `path`'s directory without symbolic links: a new string, or NULL with
 * errno set. */
static char *
real_dir(const char *path)
{
  g_autofree char *dir = g_path_get_dirname(path);
  char *real = realpath(dir, NULL);
  if (real == NULL)
    return NULL;
  char *copy = g_strdup(real);
  free(real);
  return copy;
}

/* What the generated scenario's `include` says: the profile relative to
 * the directory of --out, or as given when the scenario goes to stdout
 * (relative to the current directory) or the profile's path is absolute. */
static char *
include_path(const ModelOptions *o, GError **error)
{
  if (o->out == NULL || g_path_is_absolute(o->profile))
    return g_strdup(o->profile);
  g_autofree char *out_dir = real_dir(o->out);
  if (out_dir == NULL) {
    int saved = errno;
    g_autofree char *dir = g_path_get_dirname(o->out);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--out %s: %s: %s", o->out, dir, g_strerror(saved));
    return NULL;
  }
  g_autofree char *profile_dir = real_dir(o->profile);
  if (profile_dir == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--profile %s: %s", o->profile, g_strerror(errno));
    return NULL;
  }
  g_autofree char *base = g_path_get_basename(o->profile);
  g_autofree char *profile = g_build_filename(profile_dir, base, NULL);
  return relative_to(out_dir, profile);
}

/* The generated scenario with the profile, loaded as the user's profile
 * plus what `offsim model` writes: every error about the machine names the
 * profile (its file, group and key), not the scenario being generated. */
static SimScenario *
load_with_profile(const ModelOptions *o, const SimTransformer *t, const char *name, GError **error)
{
  g_autoptr(SimConfig) c = sim_config_load_file(o->profile, error);
  if (c == NULL)
    return NULL;
  const char *origin = o->out ? o->out : "offsim model";
  sim_config_set(c, "scenario", "name", name, origin);
  g_autoptr(GString) group = g_string_new(NULL);
  sim_transformer_format_ini(t, group);
  g_auto(GStrv) lines = g_strsplit(group->str, "\n", -1);
  for (char **line = lines; *line; line++) {
    char *eq = strstr(*line, " = ");
    if (eq == NULL)
      continue; /* the group line and the last, empty one */
    *eq = '\0';
    sim_config_set(c, "transformer", *line, eq + 3, origin);
  }
  return sim_scenario_from_config(c, error);
}

/* The embedded default's device, to size the model before any scenario is
 * written (sizes do not depend on the device, only times). */
static gboolean
default_device(SimDevice *device)
{
  g_autoptr(SimScenario) s = sim_scenario_load_default(NULL);
  if (s == NULL)
    return FALSE;
  *device = s->machine.device;
  return TRUE;
}

/* --out must not be one of the files it reads: the scenario would replace
 * them. */
static gboolean
out_is_not_an_input(const ModelOptions *o, GError **error)
{
  GStatBuf out, in;
  if (o->out == NULL || g_stat(o->out, &out) != 0)
    return TRUE;
  const char *inputs[][2] = { { "--hf-config", o->hf_config }, { "--profile", o->profile } };
  for (guint i = 0; i < G_N_ELEMENTS(inputs); i++) {
    if (inputs[i][1] && g_stat(inputs[i][1], &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "--out %s: it is the file %s reads", o->out, inputs[i][0]);
      return FALSE;
    }
  }
  return TRUE;
}

/* The options and the config.json as one checked transformer, sized once:
 * every error names the option, or the config.json and its field. */
static gboolean
read_model(const ModelOptions *o, SimTransformer *t, GError **error)
{
  if (o->hf_config == NULL || o->batch <= 0 || o->seq <= 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "model: --hf-config, --batch and --seq are required (positive)");
    return FALSE;
  }
  if (!one_line("--hf-config", o->hf_config, error) || !one_line("--profile", o->profile, error) ||
      !one_line("--name", o->name, error) || !out_is_not_an_input(o, error))
    return FALSE;
  /* The options are the [transformer] keys of the same names: one parser,
   * one set of names.  A user with an HF config most likely runs HF's code:
   * ops = hf unless --ops says otherwise, and what follows ops with it. */
  sim_transformer_defaults(t);
  if (!option_into("--ops", o->ops ? o->ops : "hf", SIM_KEY_TRANSFORMER_OPS, t, error))
    return FALSE;
  sim_transformer_follow_ops(t);
  if (!option_into("--dtype", o->dtype, SIM_KEY_TRANSFORMER_DTYPE, t, error) ||
      !option_into("--attention", o->attention, SIM_KEY_TRANSFORMER_ATTENTION, t, error) ||
      !option_into("--optimizer", o->optimizer, SIM_KEY_TRANSFORMER_OPTIMIZER, t, error))
    return FALSE;
  /* The shape goes through the check a [transformer] group gets. */
  if (!sim_hf_config_load(o->hf_config, t, error))
    return FALSE;
  t->batch = (guint)o->batch;
  t->seq = (guint)o->seq;
  t->master_weights = t->adamw;
  /* What the options set is named as the options, the rest as the
   * config.json's fields (only gpt2's layout has learned positions); every
   * such message names the config.json first. */
  const char *names[SIM_KEY_COUNT];
  sim_hf_config_field_names(t->max_positions > 0, names);
  names[SIM_KEY_TRANSFORMER_BATCH] = "--batch";
  names[SIM_KEY_TRANSFORMER_SEQ] = "--seq";
  names[SIM_KEY_TRANSFORMER_ATTENTION] = "--attention";
  names[SIM_KEY_TRANSFORMER_DTYPE] = "--dtype";
  names[SIM_KEY_TRANSFORMER_OPS] = "--ops";
  if (!sim_transformer_validate(t, names, error)) {
    g_prefix_error(error, "%s: ", o->hf_config);
    return FALSE;
  }
  SimDevice device;
  if (!default_device(&device)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "model: the embedded default scenario does not load");
    return FALSE;
  }
  g_autoptr(GError) cause = NULL;
  g_autoptr(SimWorkload) sized = sim_transformer_build(t, &device, "model", &cause);
  if (sized == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: at --batch %u --seq %u: %s", o->hf_config, t->batch, t->seq,
                cause->message);
    return FALSE;
  }
  return TRUE;
}

/* The scenario's text, without the listing. */
static gboolean
scenario_text(const ModelOptions *o, const SimTransformer *t, const char *name, GString *ini, GError **error)
{
  g_string_append_printf(ini, "# Generated by: offsim model --hf-config %s --batch %u --seq %u --dtype %s --ops %s\n",
                         o->hf_config, t->batch, t->seq, sim_dtype_names[t->dtype], t->hf_ops ? "hf" : "fused");
  g_string_append_printf(ini, "[scenario]\nname = %s\n", name);
  if (o->profile) {
    g_autofree char *include = include_path(o, error);
    if (include == NULL)
      return FALSE;
    g_string_append_printf(ini, "include = %s\n\n", include);
  } else {
    /* The embedded default's machine, so the file runs as it is. */
    const char *text = sim_scenario_default_text();
    const char *device = strstr(text, "\n[device]\n"), *model = strstr(text, "\n[transformer]\n");
    g_assert(device && model && device < model);
    g_string_append(ini, "# Device and link of the embedded default; replace them with\n"
                         "# `include = profiles/...` or a profile from offsim-calib.\n");
    g_string_append_len(ini, device, model - device);
  }
  g_string_append_c(ini, '\n');
  sim_transformer_format_ini(t, ini);
  return TRUE;
}

/* Proves the scenario loads and, without a profile, appends what it
 * generates as comments. */
static gboolean
check_scenario(const ModelOptions *o, const SimTransformer *t, const char *name, GString *ini, GError **error)
{
  if (o->profile) {
    /* The profile must load, and run this model. */
    g_autoptr(SimScenario) s = load_with_profile(o, t, name, error);
    return s != NULL;
  }
  /* Everything the text depends on was checked: a failure is a bug. */
  g_autoptr(GError) cause = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_data(ini->str, "generated scenario", &cause);
  if (s == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "model: the scenario it wrote does not load: %s", cause->message);
    return FALSE;
  }
  const SimWorkload *w = s->workload;
  g_autofree char *saved = sim_units_format_size(sim_workload_saved_bytes(w));
  g_autofree char *stat = sim_units_format_size(w->static_bytes);
  g_string_append_printf(ini, "\n# What one step saves: %s in %u tensors; static memory %s (%" G_GUINT64_FORMAT
                         " parameters", saved, sim_workload_saved_tensors(w), stat, sim_transformer_parameters(t));
  /* A mixture of experts: what a token uses, and the MoE layer's tensors
   * beside the dense ones (dense_layers, sparse_step). */
  if (t->experts)
    g_string_append_printf(ini, ", %" G_GUINT64_FORMAT " active per token", sim_transformer_active_parameters(t));
  g_string_append(ini, ").\n");
  guint moe = 0;
  while (moe < t->layers && !sim_transformer_is_moe_layer(t, moe))
    moe++;
  list_tensors(ini, t->experts && moe > 0 ? "each dense layer" : "each layer", sim_workload_layer(w, 0));
  if (t->experts && moe > 0 && moe < t->layers)
    list_tensors(ini, "each MoE layer", sim_workload_layer(w, moe));
  list_tensors(ini, "embedding", w->embed);
  list_tensors(ini, "loss head", w->head);
  return TRUE;
}

static gboolean
model_generate(const ModelOptions *o, GError **error)
{
  SimTransformer t;
  if (!read_model(o, &t, error))
    return FALSE;
  g_autofree char *base = g_path_get_basename(o->hf_config);
  const char *dtype = sim_dtype_names[t.dtype];
  g_autofree char *name = o->name ? g_strdup(o->name)
                                  : g_strdup_printf("%s, batch %ux%u %s", base, t.batch, t.seq, dtype);
  g_autoptr(GString) ini = g_string_new(NULL);
  if (!scenario_text(o, &t, name, ini, error) || !check_scenario(o, &t, name, ini, error))
    return FALSE;
  if (o->out)
    return sim_output_save("--out", o->out, ini->str, ini->len, error);
  return cli_print(ini->str, error);
}

int
cli_model_main(int argc, char **argv)
{
  ModelOptions o = { 0 };
  GError *error = NULL;
  g_autofree char *families = sim_hf_config_family_names(SIM_HF_FAMILIES_ALL, FALSE);
  g_autofree char *hf_help = g_strdup_printf("HuggingFace config.json (%s)", families);
  const GOptionEntry entries[] = {
    { "hf-config", 0, 0, G_OPTION_ARG_FILENAME, &o.hf_config, hf_help, "FILE" },
    { "batch", 0, 0, G_OPTION_ARG_INT, &o.batch, "Micro-batch size", "B" },
    { "seq", 0, 0, G_OPTION_ARG_INT, &o.seq, "Sequence length", "S" },
    { "dtype", 0, 0, G_OPTION_ARG_STRING, &o.dtype, "fp32, bf16 (default) or fp16", "DTYPE" },
    { "ops", 0, 0, G_OPTION_ARG_STRING, &o.ops,
      "hf (default: HuggingFace's modeling code, op by op) or fused (Megatron/TransformerEngine kernels)", "OPS" },
    { "attention", 0, 0, G_OPTION_ARG_STRING, &o.attention,
      "eager, sdpa (default with --ops hf) or flash (default with --ops fused)", "KIND" },
    { "optimizer", 0, 0, G_OPTION_ARG_STRING, &o.optimizer, "adamw (default) or none", "KIND" },
    { "profile", 0, 0, G_OPTION_ARG_FILENAME, &o.profile,
      "Include this device and link profile (its path relative to --out's directory, or as given)", "FILE" },
    { "name", 0, 0, G_OPTION_ARG_STRING, &o.name, "Scenario name", "NAME" },
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &o.out,
      "Write the scenario to FILE (atomically), with --profile's path relative to FILE's directory", "FILE" },
    G_OPTION_ENTRY_NULL,
  };
  g_set_prgname("offsim model");
  g_autoptr(GOptionContext) ctx = g_option_context_new("- print a scenario for a HuggingFace model");
  cli_help_describe(ctx, 0);
  int status = 0;
  if (!cli_parse_options(ctx, "model", entries, &argc, &argv, &status)) {
    /* --help, or an error: printed */
  } else if (argc > 1) {
    g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "model: unexpected argument '%s'", argv[1]);
    status = cli_fail(error);
  } else if (!model_generate(&o, &error)) {
    status = error ? cli_fail(error) : 1;
  }
  model_options_clear(&o);
  return status;
}
