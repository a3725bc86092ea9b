/* cli/show.c — `offsim show [SCENARIO]`: the scenario as the loader sees it.
 *
 * The includes merged into one file, every key of every group written out:
 * the value given (and the file that gave it, and what it overrode in the
 * other files), the schema's default, or what the loader derives from other
 * keys (bidir_bandwidth, backward, kv_heads, head_dim, keep_last, dedup,
 * the name, the shape a config.json gives).  Without [policy.*] groups the
 * default set is written out.  Each `key = value` line is followed by a
 * comment line saying where the value came from (a scenario has no
 * end-of-line comments).  The output loads as the same scenario: values
 * given are written as given, defaults as the schema writes them, derived
 * values in a text that parses back to the same number, and paths made
 * absolute so that the output may be saved anywhere.
 */
#include "cli/cli.h"

#include "base/error.h"
#include "base/units.h"
#include "input/hf_config.h"
#include "input/scenario.h"
#include "input/schema.h"
#include "input/transformer.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  GString *out;
  const SimConfig *config;
  const SimScenario *scenario;
  GHashTable *alone; /* file -> GKeyFile* of that file alone: what each value overrode */
  char *cwd;
} Show;

/* A file as the user would name it: relative to the current directory
 * when it is under it. */
static const char *
display(const Show *s, const char *file)
{
  gsize n = strlen(s->cwd);
  if (g_str_has_prefix(file, s->cwd) && file[n] == G_DIR_SEPARATOR && file[n + 1] != '\0')
    return file + n + 1;
  return file;
}

/* ---- exact text for derived numbers -------------------------------------- */

typedef struct {
  const char *name;
  double scale;
} Unit;

typedef gboolean (*ParseFn)(const char *text, double *value, GError **error);

/* `value` in the first of `units` (largest first) where it is at least 1
 * and a short decimal reads back as exactly the same double; else in the
 * last unit (scale 1), where enough digits always do. */
static char *
exact(double value, const Unit *units, guint n, ParseFn parse)
{
  char digits[400];
  for (guint u = 0; u < n; u++) {
    double x = value / units[u].scale;
    gboolean last = u + 1 == n;
    if (x < 1 && !last && value != 0)
      continue;
    for (int places = 0; places < (last ? 340 : 17); places++) {
      char format[16];
      g_snprintf(format, sizeof format, "%%.%df", places);
      g_ascii_formatd(digits, sizeof digits, format, x);
      g_autofree char *text = g_strconcat(digits, units[u].name, NULL);
      double back = -1;
      if (parse(text, &back, NULL) && back == value)
        return g_steal_pointer(&text);
    }
  }
  g_return_val_if_reached(g_strdup("0"));
}

static char *
exact_time(double seconds)
{
  static const Unit units[] = { { "ms", 1e-3 }, { "us", 1e-6 }, { "ns", 1e-9 }, { "s", 1.0 } };
  if (seconds >= 1) {
    static const Unit plain[] = { { "s", 1.0 } };
    return exact(seconds, plain, 1, sim_units_parse_time);
  }
  return exact(seconds, units, G_N_ELEMENTS(units), sim_units_parse_time);
}

static char *
exact_rate(double bytes_per_s)
{
  static const Unit units[] = { { "TB/s", 1e12 }, { "GB/s", 1e9 }, { "MB/s", 1e6 }, { "KB/s", 1e3 }, { "B/s", 1.0 } };
  return exact(bytes_per_s, units, G_N_ELEMENTS(units), sim_units_parse_rate);
}

/* ---- lines ------------------------------------------------------------------ */

static void
line(Show *s, const char *key, const char *value, const char *from)
{
  g_string_append_printf(s->out, "%s = %s\n# ^ %s\n", key, value, from);
}

static gint
by_text(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "FILE", then what the value overrode: "(overrides 'V' in F, ...)". */
static char *
given_from(const Show *s, const SimConfigGroup *g, const SimConfigEntry *e)
{
  GString *from = g_string_new(display(s, e->file));
  g_autoptr(GPtrArray) others = g_ptr_array_new_with_free_func(g_free);
  GHashTableIter it;
  gpointer file, kf;
  g_hash_table_iter_init(&it, s->alone);
  while (g_hash_table_iter_next(&it, &file, &kf)) {
    if (strcmp(file, e->file) == 0)
      continue;
    g_autofree char *value = g_key_file_get_value(kf, g->name, e->key, NULL);
    if (value)
      g_ptr_array_add(others, g_strdup_printf("'%s' in %s", value, display(s, file)));
  }
  g_ptr_array_sort(others, by_text);
  for (guint i = 0; i < others->len; i++)
    g_string_append_printf(from, "%s%s", i ? ", " : " (overrides ", (char *)g_ptr_array_index(others, i));
  if (others->len)
    g_string_append_c(from, ')');
  return g_string_free(from, FALSE);
}

/* Key `key` as given in `g`: TRUE when it is. */
static gboolean
given_line(Show *s, const SimConfigGroup *g, const char *key)
{
  const SimConfigEntry *e = sim_config_lookup(g, key);
  if (e == NULL)
    return FALSE;
  g_autofree char *from = given_from(s, g, e);
  line(s, key, e->value, from);
  return TRUE;
}

/* A path key as the loader resolves it (relative to the file that gives
 * it), made absolute. */
static char *
absolute_path(const SimConfigEntry *e)
{
  g_autofree char *dir = g_path_get_dirname(e->file);
  g_autofree char *path = g_path_is_absolute(e->value) ? g_strdup(e->value) : g_build_filename(dir, e->value, NULL);
  return g_canonicalize_filename(path, NULL);
}

static void
path_line(Show *s, const SimConfigGroup *g, const SimConfigEntry *e)
{
  g_autofree char *path = absolute_path(e);
  g_autofree char *from = given_from(s, g, e);
  g_autofree char *where = g_strdup_printf("%s, as '%s' relative to it", from, e->value);
  line(s, e->key, path, where);
}

/* "(derived: 2 × forward)" from the schema's words (backquotes dropped). */
static char *
derived(SimKeyId id)
{
  g_autoptr(GString) how = g_string_new(sim_schema_key(id)->doc_default);
  g_string_replace(how, "`", "", 0);
  return g_strdup_printf("(derived: %s)", how->str);
}

/* A field-mapped key not given: its value in `target` as the schema writes
 * it, from `from`. */
static void
field_line(Show *s, SimKeyId id, gconstpointer target, const char *from)
{
  GString *out = s->out;
  sim_schema_format(id, target, out);
  g_string_append_printf(out, "# ^ %s\n", from);
}

/* ---- groups ------------------------------------------------------------------- */

static void
show_scenario(Show *s)
{
  const SimConfigGroup *g = sim_config_group(s->config, "scenario");
  g_string_append(s->out, "[scenario]\n");
  if (!given_line(s, g, "name"))
    line(s, "name", s->scenario->name, "(derived: the file name without its extension)");
  given_line(s, g, "description");
  if (!given_line(s, g, "step"))
    line(s, "step", sim_schema_key(SIM_KEY_SCENARIO_STEP)->fallback, "(default)");
}

/* [device], [link], [parallel] and [node]: given, default, or
 * (bidir_bandwidth) the sum.  split and gpu_sockets, not given, are left
 * out: the loader's even cut and contiguous blocks are what their absence
 * loads as. */
static void
show_fields(Show *s, const SimConfigGroup *g, SimSchemaGroup group)
{
  g_string_append_printf(s->out, "\n[%s]\n", g->name);
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key(id);
    if (k->group != group || given_line(s, g, k->key))
      continue;
    if (id == SIM_KEY_LINK_BIDIR_BANDWIDTH) {
      g_autofree char *sum = exact_rate(s->scenario->machine.link.bidir_bandwidth);
      line(s, k->key, sum, "(derived: h2d_bandwidth + d2h_bandwidth)");
    } else if (k->fallback) {
      line(s, k->key, k->fallback, "(default)");
    }
  }
}

/* Twice the time `text` (a [model] or [trace] forward). */
static char *
twice(const char *text)
{
  double forward = 0;
  gboolean ok = sim_units_parse_time(text, &forward, NULL);
  g_assert(ok); /* the scenario loaded */
  return exact_time(2 * forward);
}

/* [model] and [trace]: given, default, or backward = 2 × forward. */
static void
show_workload(Show *s, const SimConfigGroup *g, SimSchemaGroup group)
{
  g_string_append_printf(s->out, "\n[%s]\n", g->name);
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key(id);
    const SimConfigEntry *e = sim_config_lookup(g, k->key);
    if (k->group != group)
      continue;
    if (e && k->type == SIM_VALUE_PATH) {
      path_line(s, g, e);
    } else if (given_line(s, g, k->key)) {
      continue;
    } else if (id == SIM_KEY_MODEL_BACKWARD || id == SIM_KEY_TRACE_BACKWARD) {
      g_autofree char *backward = twice(sim_config_lookup(g, "forward")->value);
      g_autofree char *how = derived((SimKeyId)id);
      line(s, k->key, backward, how);
    } else if (k->fallback) {
      line(s, k->key, k->fallback, "(default)");
    }
  }
}

/* [layer.N]: given, else [model]'s (backward: twice this layer's forward
 * when neither group gives one, as the loader has it). */
static void
show_layer(Show *s, const SimConfigGroup *g)
{
  const SimConfigGroup *model = sim_config_group(s->config, "model");
  g_string_append_printf(s->out, "\n[%s]\n", g->name);
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key(id);
    if (k->group != SIM_GROUP_LAYER || given_line(s, g, k->key))
      continue;
    const SimConfigEntry *from_model = sim_config_lookup(model, k->key);
    if (id == SIM_KEY_LAYER_BACKWARD && from_model == NULL) {
      const SimConfigEntry *forward = sim_config_lookup(g, "forward");
      g_autofree char *backward = twice((forward ? forward : sim_config_lookup(model, "forward"))->value);
      line(s, k->key, backward, "(derived: 2 × this layer's forward)");
    } else if (from_model) {
      line(s, k->key, from_model->value, "(default: [model]'s)");
    } else {
      SimKeyId of_model = sim_schema_find(SIM_GROUP_MODEL, k->key, 0);
      if (of_model != SIM_KEY_COUNT && sim_schema_key(of_model)->fallback)
        line(s, k->key, sim_schema_key(of_model)->fallback, "(default: [model]'s)");
    }
  }
}

/* The transformer as the loader builds it: defaults, the config.json, the
 * keys given, then what follows other keys (the loader's own derivation). */
static SimTransformerDerived
resolve_transformer(const SimConfigGroup *g, SimTransformer *t)
{
  sim_transformer_defaults(t);
  const SimConfigEntry *hf = sim_config_lookup(g, "hf_config");
  if (hf) {
    g_autofree char *path = absolute_path(hf);
    gboolean ok = sim_hf_config_load(path, t, NULL);
    g_assert(ok); /* the scenario loaded */
  }
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key(id);
    const SimConfigEntry *e = sim_config_lookup(g, k->key);
    if (k->group == SIM_GROUP_TRANSFORMER && k->offset != SIM_SCHEMA_BY_HAND && e)
      sim_schema_parse((SimKeyId)id, e->value, t, NULL);
  }
  return sim_scenario_transformer_derive(g, hf != NULL, t);
}

/* [transformer]: given, from the config.json, derived, or default. */
static void
show_transformer(Show *s, const SimConfigGroup *g)
{
  SimTransformer t, plain;
  SimTransformerDerived derived_keys = resolve_transformer(g, &t);
  sim_transformer_defaults(&plain);
  const SimConfigEntry *hf = sim_config_lookup(g, "hf_config");
  g_autofree char *hf_path = hf ? absolute_path(hf) : NULL;
  g_autofree char *from_hf = hf ? g_strdup_printf("(derived: hf_config %s)", display(s, hf_path)) : NULL;
  g_string_append(s->out, "\n[transformer]\n");
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key(id);
    if (k->group != SIM_GROUP_TRANSFORMER)
      continue;
    if (id == SIM_KEY_TRANSFORMER_HF_CONFIG) {
      if (hf)
        path_line(s, g, hf);
      continue;
    }
    if (given_line(s, g, k->key))
      continue;
    g_autofree char *mine = NULL;
    if ((id == SIM_KEY_TRANSFORMER_KV_HEADS && derived_keys.kv_heads) ||
        (id == SIM_KEY_TRANSFORMER_HEAD_DIM && derived_keys.head_dim) ||
        (id == SIM_KEY_TRANSFORMER_GRADS && derived_keys.grads) ||
        (id == SIM_KEY_TRANSFORMER_ATTENTION && derived_keys.attention) ||
        (id == SIM_KEY_TRANSFORMER_OPTIMIZER_KERNELS && derived_keys.optimizer_kernels)) {
      mine = derived((SimKeyId)id);
    } else if (hf) {
      /* What the config.json changed, or gave where there is no default. */
      g_autoptr(GString) a = g_string_new(NULL), b = g_string_new(NULL);
      sim_schema_format((SimKeyId)id, &t, a);
      sim_schema_format((SimKeyId)id, &plain, b);
      mine = g_strdup(strcmp(a->str, b->str) != 0 || k->fallback == NULL ? from_hf : "(default)");
    } else {
      mine = g_strdup("(default)");
    }
    if (strcmp(mine, "(default)") == 0 && k->fallback)
      line(s, k->key, k->fallback, mine); /* as the schema writes it */
    else
      field_line(s, (SimKeyId)id, &t, mine);
  }
}

/* A [policy.NAME] group (NULL for the default set) and its loaded policy:
 * every key of its kind, given, default or (keep_last, dedup) derived. */
static void
show_policy(Show *s, const SimConfigGroup *g, const SimPolicy *p)
{
  g_string_append_printf(s->out, "\n[policy.%s]\n", p->name);
  guint mask = 1u << p->kind;
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key(id);
    if (k->group != SIM_GROUP_POLICY || (k->kinds & mask) == 0 || given_line(s, g, k->key))
      continue;
    if (g == NULL) {
      if (k->offset != SIM_SCHEMA_BY_HAND)
        field_line(s, (SimKeyId)id, p, "(the default set: the scenario has no [policy.*] group)");
    } else if (p->framework != SIM_FRAMEWORK_NONE && k->offset != SIM_SCHEMA_BY_HAND) {
      /* A preset decides every field it is not overridden in: its value, as loaded. */
      g_autofree char *from = g_strdup_printf("(preset: framework = %s)", sim_framework_names[p->framework]);
      field_line(s, (SimKeyId)id, p, from);
    } else if (id == SIM_KEY_POLICY_LAYERS) {
      line(s, k->key, "all", "(default)");
    } else if (k->fallback) {
      line(s, k->key, k->fallback, "(default)");
    } else if (k->offset != SIM_SCHEMA_BY_HAND) {
      g_autofree char *how = derived((SimKeyId)id);
      field_line(s, (SimKeyId)id, p, how);
    }
  }
}

/* [calibration] (and any group read by nothing): as given. */
static void
show_verbatim(Show *s, const SimConfigGroup *g)
{
  g_string_append_printf(s->out, "\n[%s]\n", g->name);
  for (guint i = 0; i < g->entries->len; i++)
    given_line(s, g, ((SimConfigEntry *)g_ptr_array_index(g->entries, i))->key);
}

/* ---- the whole ------------------------------------------------------------------ */

/* Every file of the load, each alone, for what its values were overridden
 * by; the files in the order their values first appear. */
static GPtrArray *
read_files(Show *s, const char *text)
{
  GPtrArray *order = g_ptr_array_new();
  GHashTableIter it;
  gpointer file;
  g_hash_table_iter_init(&it, s->config->files);
  while (g_hash_table_iter_next(&it, &file, NULL)) {
    g_autofree char *data = NULL;
    gsize length = 0;
    if (text && strcmp(file, s->config->top) == 0)
      data = g_strdup(text);
    else if (!sim_config_read_file(file, &data, &length, NULL))
      continue;
    GKeyFile *kf = g_key_file_new();
    const char *start = g_str_has_prefix(data, "\xef\xbb\xbf") ? data + 3 : data;
    if (g_key_file_load_from_data(kf, start, (gsize)-1, G_KEY_FILE_NONE, NULL))
      g_hash_table_insert(s->alone, file, kf);
    else
      g_key_file_unref(kf);
  }
  for (guint i = 0; i < s->config->groups->len; i++) {
    const SimConfigGroup *g = g_ptr_array_index(s->config->groups, i);
    for (guint k = 0; k < g->entries->len; k++) {
      const char *f = ((SimConfigEntry *)g_ptr_array_index(g->entries, k))->file;
      if (!g_ptr_array_find(order, f, NULL))
        g_ptr_array_add(order, (gpointer)f);
    }
  }
  /* Then those whose every value was overridden, by name. */
  g_autoptr(GPtrArray) rest = g_ptr_array_new();
  g_hash_table_iter_init(&it, s->config->files);
  while (g_hash_table_iter_next(&it, &file, NULL))
    if (!g_ptr_array_find(order, file, NULL))
      g_ptr_array_add(rest, file);
  g_ptr_array_sort(rest, by_text);
  g_ptr_array_extend(order, rest, NULL, NULL);
  return order;
}

static void
show_groups(Show *s)
{
  gboolean policies = FALSE;
  guint policy = 0;
  show_scenario(s);
  for (guint i = 0; i < s->config->groups->len; i++) {
    const SimConfigGroup *g = g_ptr_array_index(s->config->groups, i);
    if (strcmp(g->name, "device") == 0)
      show_fields(s, g, SIM_GROUP_DEVICE);
    else if (strcmp(g->name, "link") == 0)
      show_fields(s, g, SIM_GROUP_LINK);
    else if (strcmp(g->name, "parallel") == 0)
      show_fields(s, g, SIM_GROUP_PARALLEL);
    else if (strcmp(g->name, "node") == 0)
      show_fields(s, g, SIM_GROUP_NODE);
    else if (strcmp(g->name, "network") == 0)
      show_fields(s, g, SIM_GROUP_NETWORK);
    else if (strcmp(g->name, "model") == 0)
      show_workload(s, g, SIM_GROUP_MODEL);
    else if (strcmp(g->name, "trace") == 0)
      show_workload(s, g, SIM_GROUP_TRACE);
    else if (strcmp(g->name, "transformer") == 0)
      show_transformer(s, g);
    else if (g_str_has_prefix(g->name, "layer."))
      show_layer(s, g);
    else if (g_str_has_prefix(g->name, "policy.")) {
      show_policy(s, g, g_ptr_array_index(s->scenario->policies, policy++));
      policies = TRUE;
    } else if (strcmp(g->name, "scenario") != 0)
      show_verbatim(s, g);
  }
  for (guint i = 0; !policies && i < s->scenario->policies->len; i++)
    show_policy(s, NULL, g_ptr_array_index(s->scenario->policies, i));
}

static gboolean
show_run(const char *path, GError **error)
{
  const char *text = path ? NULL : sim_scenario_default_text();
  g_autoptr(SimConfig) config = path ? cli_load_config(path, error)
                                     : sim_config_load_data(text, "(embedded default)", NULL, error);
  if (config == NULL)
    return FALSE;
  g_autoptr(SimScenario) scenario = sim_scenario_from_config(config, error);
  if (scenario == NULL)
    return FALSE;
  Show s = { .out = g_string_new(NULL), .config = config, .scenario = scenario, .cwd = g_get_current_dir(),
             .alone = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_key_file_unref) };
  g_autoptr(GPtrArray) files = read_files(&s, text);
  g_string_append_printf(s.out, "# offsim show %s: the scenario merged from its files, every default filled in.\n"
                                "# Under each key, where its value came from: the file that gave it (and what it\n"
                                "# overrode), (default), or (derived: how). This loads as the same scenario.\n"
                                "# Files:",
                         path ? path : "(embedded default)");
  for (guint i = 0; i < files->len; i++)
    g_string_append_printf(s.out, "%s %s", i ? "," : "", display(&s, g_ptr_array_index(files, i)));
  g_string_append(s.out, "\n\n");
  show_groups(&s);
  gboolean written = cli_print(s.out->str, error);
  g_string_free(s.out, TRUE);
  g_hash_table_unref(s.alone);
  g_free(s.cwd);
  return written;
}

int
cli_show_main(int argc, char **argv)
{
  GError *error = NULL;
  g_set_prgname("offsim show");
  /* No options: --help only. */
  g_autoptr(GOptionContext) ctx = g_option_context_new("[SCENARIO]  - the merged scenario, each value with its file");
  g_option_context_set_summary(ctx, "Prints SCENARIO (without it, the embedded default) with its includes merged and\n"
                                    "every default filled in; under each key, the file its value came from, or\n"
                                    "(default), or (derived: how). The output loads as the same scenario.");
  cli_help_describe(ctx, 0);
  static const GOptionEntry none[] = { G_OPTION_ENTRY_NULL };
  int status;
  if (!cli_parse_options(ctx, "show", none, &argc, &argv, &status))
    return status;
  if (argc > 2) {
    g_set_error(&error, SIM_ERROR, SIM_ERROR_INPUT, "show: expected at most one scenario file, got '%s' and '%s'",
                argv[1], argv[2]);
    return cli_fail(error);
  }
  if (!show_run(argc == 2 ? argv[1] : NULL, &error))
    return cli_fail(error);
  return 0;
}
