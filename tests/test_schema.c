/* tests/test_schema.c — the schema is the one description of scenario keys:
 * every row is whole, every default parses and is what the loader applies,
 * and the README's key tables and the fuzz dictionary say what it says; and
 * the README's lists of the catalogs (policy kinds, actions, framework
 * presets, plan targets, model families) are the catalogs' rows. */
#include "testutil.h"

#include "base/error.h"
#include "input/hf_config.h"
#include "input/schema.h"
#include "input/transformer.h"
#include "planner/shapes.h"

#include <string.h>

#define README OFFSIM_SCENARIOS "/../README.md"
#define FUZZ_DICT OFFSIM_SCENARIOS "/../tests/fuzz/scenario.dict"

START_TEST(test_every_row_is_whole)
{
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key((SimKeyId)id);
    ck_assert_msg(k->key != NULL && (k->expect != NULL || k->type == SIM_VALUE_CHOICE), "row %u is empty", id);
    ck_assert_msg(k->need != SIM_NEED_SOMETIMES || k->doc_need != NULL, "%s: says when it is needed", k->key);
    ck_assert_msg(k->type != SIM_VALUE_CHOICE || k->names != NULL, "%s: a choice names its choices", k->key);
    ck_assert_msg(k->group != SIM_GROUP_POLICY || k->kinds != 0, "%s: names the kinds that take it", k->key);
    ck_assert_msg(k->fallback == NULL || k->need == SIM_NEED_OPTIONAL, "%s: a required key has no default", k->key);
    /* A default is written once: as a fallback (the README shows it from
     * there) or, when derived, as words; never both. */
    ck_assert_msg(k->fallback == NULL || k->doc_default == NULL, "%s: a fallback and words for one default", k->key);
    /* Each key is found under its own group. */
    SimKeyId found = sim_schema_find(k->group, k->key, k->group == SIM_GROUP_POLICY ? (guint)g_bit_nth_lsf(k->kinds, -1) : 0);
    ck_assert_msg(found == id, "%s: found as row %u, not %u", k->key, found, id);
  }
}
END_TEST

/* A choice's words are its names, said once: where `expect` would only
 * repeat them it is left out and made from the names. */
START_TEST(test_choice_names_are_not_written_twice)
{
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key((SimKeyId)id);
    if (k->type != SIM_VALUE_CHOICE)
      continue;
    g_autofree char *names = sim_error_choices(k->names);
    ck_assert_msg(k->expect == NULL || strcmp(k->expect, names) != 0, "%s: expect repeats its names", k->key);
    ck_assert_str_eq(sim_schema_expect((SimKeyId)id), k->expect ? k->expect : names);
  }
  ck_assert_str_eq(sim_schema_expect(SIM_KEY_POLICY_KIND), "resident, offload, checkpoint or plan");
  ck_assert_str_eq(sim_schema_expect(SIM_KEY_POLICY_FRAMEWORK),
                   "none, save_on_cpu, verl, te, megatron, torchtune or deepspeed");
}
END_TEST

/* A default is scenario text and parses like a user's value. */
START_TEST(test_every_default_parses)
{
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key((SimKeyId)id);
    if (k->fallback == NULL || k->offset == SIM_SCHEMA_BY_HAND)
      continue;
    guint64 storage[4] = { 0 };
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sim_schema_parse_value((SimKeyId)id, k->fallback, storage, &error), "%s = %s: %s", k->key,
                  k->fallback, error ? error->message : "");
  }
}
END_TEST

/* The struct defaults are the schema's: a transformer at its defaults is what
 * a group giving every default explicitly loads. */
START_TEST(test_defaults_are_the_loaded_values)
{
  SimTransformer t;
  sim_transformer_defaults(&t);
  ck_assert_uint_eq(t.dtype, SIM_DTYPE_BF16);
  ck_assert_uint_eq(sim_dtype_bytes(t.dtype), 2);
  ck_assert(t.adamw && t.master_weights && !t.layernorm && !t.gelu && !t.sp && !t.hf_ops);
  ck_assert_uint_eq(t.attention, SIM_ATTENTION_FLASH);
  ck_assert_uint_eq(t.hidden_act, SIM_ACT_SILU);
  ck_assert_uint_eq(t.tp, 1);

  SimMachine m;
  sim_scenario_machine_defaults(&m);
  ck_assert_double_eq(m.device.efficiency, 0.5);
  ck_assert_double_eq(m.link.pageable_factor, 0.5);
  ck_assert_double_eq(m.link.host_alloc, 3e-3);
  ck_assert_double_eq(m.link.latency, 0);

  /* What [policy.x] kind = offload loads as, and sim_policy_new, agree field by field. */
  g_autoptr(SimScenario) s = sim_scenario_load_data(
    "[device]\nmemory = 1GiB\n[link]\nh2d_bandwidth = 1GB/s\nd2h_bandwidth = 1GB/s\n"
    "[model]\nlayers = 4\nforward = 1ms\ninput = 1MiB\ntensors = a:1MiB\n[policy.x]\nkind = offload\n",
    "defaults", NULL);
  ck_assert_ptr_nonnull(s);
  const SimPolicy *loaded = sim_scenario_policy(s, "x");
  g_autoptr(SimPolicy) made = sim_policy_new("x", SIM_POLICY_OFFLOAD);
  ck_assert(loaded->async == made->async && made->async);
  ck_assert_uint_eq(loaded->prefetch, made->prefetch);
  ck_assert_uint_eq(loaded->inflight, made->inflight);
  ck_assert_uint_eq(loaded->keep_last, made->keep_last);
  ck_assert_uint_eq(loaded->every, made->every);
  ck_assert_uint_eq(loaded->pinned, made->pinned);
  ck_assert(loaded->dedup == made->dedup && made->dedup);
  ck_assert_uint_eq(made->prefetch, 1);
  ck_assert_uint_eq(made->inflight, 2);
}
END_TEST

/* sim_policy_new's policy is valid as it is, for every kind, and the
 * schema's [policy.NAME] fallbacks are its values written as text: each
 * reads back as the model's value, and they are what the README shows. */
START_TEST(test_policy_defaults_are_the_models)
{
  for (guint kind = 0; kind < SIM_POLICY_KIND_COUNT; kind++) {
    g_autoptr(SimPolicy) p = sim_policy_new("p", (SimPolicyKind)kind);
    ck_assert_str_eq(p->name, "p");
    ck_assert_uint_eq(p->kind, kind);
    ck_assert_uint_ge(p->inflight, 1);
    ck_assert_uint_ge(p->every, 1);
    ck_assert_ptr_null(p->selected);
    ck_assert_ptr_null(p->actions);
    ck_assert_ptr_null(p->stages);
  }
  guint derived = 0;
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key((SimKeyId)id);
    if (k->group != SIM_GROUP_POLICY || k->offset == SIM_SCHEMA_BY_HAND || k->fallback == NULL)
      continue;
    SimPolicy back;
    memcpy(&back, &sim_policy_defaults, sizeof back); /* padding included, for memcmp */
    memset((char *)&back + k->offset, 0xa5, k->type == SIM_VALUE_SIZE || k->type == SIM_VALUE_COUNT64 ? 8 : 4);
    ck_assert_msg(sim_schema_parse((SimKeyId)id, k->fallback, &back, NULL), "%s: '%s'", k->key, k->fallback);
    ck_assert_msg(memcmp(&back, &sim_policy_defaults, sizeof back) == 0, "%s: '%s' is not the model's", k->key,
                  k->fallback);
    derived++;
  }
  ck_assert_uint_ge(derived, 20);
  ck_assert_str_eq(sim_schema_key(SIM_KEY_POLICY_MODE)->fallback, "async");
  ck_assert_str_eq(sim_schema_key(SIM_KEY_POLICY_CHECKPOINT_MODE)->fallback, "full");
  ck_assert_str_eq(sim_schema_key(SIM_KEY_POLICY_INFLIGHT)->fallback, "2");
  ck_assert_str_eq(sim_schema_key(SIM_KEY_POLICY_MIN_TENSOR)->fallback, "0");
  ck_assert_str_eq(sim_schema_key(SIM_KEY_POLICY_LEAVES)->fallback, "copy");
  ck_assert_str_eq(sim_schema_key(SIM_KEY_POLICY_FREE)->fallback, "copy-end");
  ck_assert_ptr_null(sim_schema_key(SIM_KEY_POLICY_KEEP_LAST)->fallback); /* follows the mode */
}
END_TEST

/* The choices `offsim model` writes read back as the same struct. */
START_TEST(test_format_reads_back)
{
  SimTransformer t, back;
  sim_transformer_defaults(&t);
  t.dtype = SIM_DTYPE_FP16;
  t.dropout = 1e-5;
  t.layernorm = TRUE;
  back = t;
  back.dtype = SIM_DTYPE_FP32;
  back.dropout = 0.5;
  back.layernorm = FALSE;
  const SimKeyId ids[] = { SIM_KEY_TRANSFORMER_DTYPE, SIM_KEY_TRANSFORMER_DROPOUT, SIM_KEY_TRANSFORMER_NORM };
  for (guint i = 0; i < G_N_ELEMENTS(ids); i++) {
    g_autoptr(GString) line = g_string_new(NULL);
    sim_schema_format(ids[i], &t, line);
    const char *value = strstr(line->str, " = ") + 3;
    g_autofree char *text = g_strndup(value, strcspn(value, "\n"));
    ck_assert_msg(sim_schema_parse(ids[i], text, &back, NULL), "%s", line->str);
  }
  ck_assert_uint_eq(back.dtype, SIM_DTYPE_FP16);
  ck_assert_double_eq(back.dropout, 1e-5);
  ck_assert(back.layernorm);
}
END_TEST

/* ---- the README's tables -------------------------------------------------- */

static gboolean
group_of_heading(const char *line, SimSchemaGroup *group)
{
  static const struct {
    const char *heading;
    SimSchemaGroup group;
  } headings[] = {
    { "### `[scenario]`", SIM_GROUP_SCENARIO }, { "### `[device]`", SIM_GROUP_DEVICE },
    { "### `[link]`", SIM_GROUP_LINK },         { "### `[model]`", SIM_GROUP_MODEL },
    { "### `[transformer]`", SIM_GROUP_TRANSFORMER }, { "### `[trace]`", SIM_GROUP_TRACE },
    { "### `[parallel]`", SIM_GROUP_PARALLEL },       { "### `[node]`", SIM_GROUP_NODE },
    { "### `[network]`", SIM_GROUP_NETWORK },
    { "### `[policy.NAME]`", SIM_GROUP_POLICY },
  };
  for (guint i = 0; i < G_N_ELEMENTS(headings); i++) {
    if (g_str_has_prefix(line, headings[i].heading)) {
      *group = headings[i].group;
      return TRUE;
    }
  }
  return FALSE;
}

/* The kinds cell of the policy table: "all" or "offload, plan". */
static guint
kinds_of(const char *cell)
{
  if (strcmp(cell, "all") == 0)
    return SIM_POLICY_KINDS_ALL;
  guint mask = 0;
  g_auto(GStrv) names = g_strsplit(cell, ",", -1);
  for (char **n = names; *n; n++)
    for (guint k = 0; sim_policy_kind_names[k]; k++)
      if (strcmp(g_strstrip(*n), sim_policy_kind_names[k]) == 0)
        mask |= 1u << k;
  return mask;
}

static const char *
need_text(const SimSchemaKey *k)
{
  return k->need == SIM_NEED_REQUIRED ? "required" : k->need == SIM_NEED_OPTIONAL ? "optional" : k->doc_need;
}

/* One row: every backticked key of the first cell is a schema row of `group`
 * whose need and default read as the row says. */
static void
check_row(SimSchemaGroup group, char **cells, gboolean *covered)
{
  const char *need = g_strstrip(cells[2]), *dflt = g_strstrip(cells[3]);
  guint kinds = group == SIM_GROUP_POLICY ? kinds_of(need) : 0;
  g_auto(GStrv) names = g_strsplit(cells[1], ",", -1);
  for (char **n = names; *n; n++) {
    char *name = g_strstrip(*n);
    ck_assert_msg(name[0] == '`' && name[strlen(name) - 1] == '`', "README: key cell '%s'", cells[1]);
    g_autofree char *key = g_strndup(name + 1, strlen(name) - 2);
    SimSchemaGroup look = group;
    SimKeyId id = SIM_KEY_COUNT;
    if (group == SIM_GROUP_POLICY) {
      for (guint k = 0; k < SIM_POLICY_KIND_COUNT && id == SIM_KEY_COUNT; k++)
        if (kinds & (1u << k))
          id = sim_schema_find(group, key, k);
    } else {
      id = sim_schema_find(look, key, 0);
    }
    ck_assert_msg(id != SIM_KEY_COUNT, "README: [%s] %s is not a key", sim_schema_group_name(group), key);
    const SimSchemaKey *k = sim_schema_key(id);
    if (group == SIM_GROUP_POLICY) {
      ck_assert_msg(kinds == k->kinds, "README: [policy] %s: kinds '%s'", key, need);
      g_autofree char *shown = sim_schema_doc_default(id);
      const char *want = k->need == SIM_NEED_REQUIRED ? "required" : shown ? shown : "";
      ck_assert_msg(strcmp(dflt, want) == 0, "README: [policy] %s: default '%s', schema '%s'", key, dflt, want);
    } else {
      ck_assert_msg(strcmp(need, need_text(k)) == 0, "README: [%s] %s: '%s', schema '%s'",
                    sim_schema_group_name(group), key, need, need_text(k));
      g_autofree char *shown = sim_schema_doc_default(id);
      const char *want = shown ? shown : "";
      ck_assert_msg(strcmp(dflt, want) == 0, "README: [%s] %s: default '%s', schema '%s'",
                    sim_schema_group_name(group), key, dflt, want);
    }
    covered[id] = TRUE;
  }
}

START_TEST(test_readme_tables_match_the_schema)
{
  g_autofree char *text = NULL;
  ck_assert(g_file_get_contents(README, &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  gboolean covered[SIM_KEY_COUNT] = { FALSE };
  SimSchemaGroup group = SIM_GROUP_COUNT;
  gboolean in_table = FALSE;
  for (char **l = lines; *l; l++) {
    SimSchemaGroup g;
    if (group_of_heading(*l, &g)) {
      group = g;
      continue;
    }
    if (g_str_has_prefix(*l, "## ") || g_str_has_prefix(*l, "### "))
      group = SIM_GROUP_COUNT;
    /* A section's key table is its first; later tables (a CSV's columns) are not keys. */
    if (in_table && **l != '|')
      group = SIM_GROUP_COUNT;
    in_table = **l == '|';
    /* [layer.N]'s table sits in [model]'s section, after its paragraph. */
    if (g_str_has_prefix(*l, "`[layer.N]`"))
      group = SIM_GROUP_LAYER;
    if (group == SIM_GROUP_COUNT || !g_str_has_prefix(*l, "| `"))
      continue;
    g_auto(GStrv) cells = g_strsplit(*l, "|", -1);
    ck_assert_msg(g_strv_length(cells) >= 5, "README: row '%s' has fewer than 4 cells", *l);
    check_row(group, cells, covered);
  }
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key((SimKeyId)id);
    ck_assert_msg(covered[id], "README: [%s] %s is not in its table", sim_schema_group_name(k->group), k->key);
  }
}
END_TEST

/* ---- the README's catalogs ------------------------------------------------ */

/* The backticked words of `text`, joined by ", ". */
static char *
backticked(const char *text)
{
  GString *out = g_string_new(NULL);
  for (const char *at = strchr(text, '`'); at; at = strchr(at, '`')) {
    const char *end = strchr(at + 1, '`');
    ck_assert_msg(end != NULL, "README: unpaired ` in %s", text);
    g_string_append_printf(out, "%s%.*s", out->len ? ", " : "", (int)(end - at - 1), at + 1);
    at = end + 1;
  }
  return g_string_free(out, FALSE);
}

/* The README's row starting `prefix`, its cell `cell` (1 = the first). */
static char *
readme_cell(const char *prefix, guint cell)
{
  g_auto(GStrv) lines = NULL;
  guint at = test_readme_table(prefix, &lines);
  g_auto(GStrv) cells = g_strsplit(lines[at], "|", -1);
  ck_assert_msg(g_strv_length(cells) > cell, "README: row %s has no cell %u", prefix, cell);
  return g_strdup(g_strstrip(cells[cell]));
}

/* The first cells of the table whose header row starts `header`, joined by ", ". */
static char *
readme_first_cells(const char *header)
{
  g_auto(GStrv) lines = NULL;
  guint at = test_readme_table(header, &lines) + 2; /* past the header and |---| */
  GString *out = g_string_new(NULL);
  for (; lines[at] && g_str_has_prefix(lines[at], "| `"); at++) {
    g_auto(GStrv) cells = g_strsplit(lines[at], "|", -1);
    g_autofree char *names = backticked(cells[1]);
    g_string_append_printf(out, "%s%s", out->len ? ", " : "", names);
  }
  return g_string_free(out, FALSE);
}

/* The names of a NULL-terminated array from `first` on, joined by ", ". */
static char *
joined(const char *const *names, guint first)
{
  return g_strjoinv(", ", (char **)names + first);
}

START_TEST(test_readme_lists_the_catalogs)
{
  g_autofree char *kinds = joined(sim_policy_kind_names, 0), *actions = joined(sim_action_names, 0);
  g_autofree char *presets = joined(sim_framework_names, 1), *targets = joined(planner_target_names, 0);
  /* [policy.NAME]'s kind and actions rows, one backticked name per row of the maps. */
  g_autofree char *kind_cell = readme_cell("| `kind` |", 4), *kind_names = backticked(kind_cell);
  ck_assert_str_eq(kind_names, kinds);
  g_autofree char *action_cell = readme_cell("| `actions` |", 4), *action_names = backticked(action_cell);
  ck_assert_str_eq(action_names, actions);
  /* framework's row names every preset (before its link), the presets table has a row each. */
  g_autofree char *framework_cell = readme_cell("| `framework` | offload, plan |", 4);
  *strstr(framework_cell, " ([Framework presets]") = '\0';
  g_autofree char *framework_names = backticked(framework_cell);
  ck_assert_str_eq(framework_names, presets);
  g_autofree char *preset_rows = readme_first_cells("| `framework` | from | what it sets |");
  ck_assert_str_eq(preset_rows, presets);
  /* offsim plan's --emit table: a row per target, in the map's order. */
  g_autofree char *target_rows = readme_first_cells("| NAME | what its configuration expresses |");
  ck_assert_str_eq(target_rows, targets);
  /* [transformer] hf_config's row: hf_config.c's families, dense, gpt2, then the mixtures. */
  g_autofree char *dense = sim_hf_config_family_names(SIM_HF_FAMILIES_LLAMA_DENSE, FALSE);
  g_autofree char *gpt2 = sim_hf_config_family_names(SIM_HF_FAMILIES_GPT2, FALSE);
  g_autofree char *extra = sim_hf_config_family_names(SIM_HF_FAMILIES_LLAMA_EXTRA, FALSE);
  g_autofree char *families = g_strdup_printf("(%s, %s, and the mixtures of experts %s)", dense, gpt2, extra);
  g_autofree char *hf_cell = readme_cell("| `hf_config` |", 4);
  ck_assert_msg(strstr(hf_cell, families) != NULL, "README: [transformer] hf_config does not list %s", families);
}
END_TEST

/* The fuzz dictionary knows every key and every choice, so the fuzzer can reach them. */
START_TEST(test_fuzz_dictionary_names_every_key)
{
  g_autofree char *dict = NULL;
  ck_assert(g_file_get_contents(FUZZ_DICT, &dict, NULL, NULL));
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key((SimKeyId)id);
    g_autofree char *key = g_strdup_printf("\"%s", k->key);
    ck_assert_msg(strstr(dict, key) != NULL, "scenario.dict lacks the key %s", k->key);
    for (guint n = 0; k->type == SIM_VALUE_CHOICE && k->names[n]; n++) {
      g_autofree char *name = g_strdup_printf("\"%s\"", k->names[n]);
      ck_assert_msg(strstr(dict, name) != NULL, "scenario.dict lacks %s's choice %s", k->key, k->names[n]);
    }
  }
}
END_TEST

static Suite *
schema_suite(void)
{
  Suite *s = suite_create("schema");
  TCase *rows = tcase_create("rows");
  tcase_add_test(rows, test_every_row_is_whole);
  tcase_add_test(rows, test_choice_names_are_not_written_twice);
  tcase_add_test(rows, test_every_default_parses);
  tcase_add_test(rows, test_defaults_are_the_loaded_values);
  tcase_add_test(rows, test_policy_defaults_are_the_models);
  tcase_add_test(rows, test_format_reads_back);
  suite_add_tcase(s, rows);
  TCase *docs = tcase_create("docs");
  tcase_add_test(docs, test_readme_tables_match_the_schema);
  tcase_add_test(docs, test_fuzz_dictionary_names_every_key);
  tcase_add_test(docs, test_readme_lists_the_catalogs);
  suite_add_tcase(s, docs);
  return s;
}

int
main(void)
{
  return test_run_suite(schema_suite());
}
