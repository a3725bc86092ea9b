#include "input/scenario.h"

#include "base/error.h"
#include "base/units.h"
#include "input/config.h"
#include "input/hf_config.h"
#include "input/schema.h"
#include "input/trace.h"
#include "input/transformer.h"
#include "model/framework.h"

#include <math.h>
#include <string.h>

/* ---- errors that name the place ---------------------------------------- */

/* Every user text a message echoes goes through sim_error_quote: control
 * characters escaped, cut after SIM_ERROR_QUOTE_MAX characters.  File
 * names stay whole (cli_fail escapes them as it prints). */

/* "file: [group] key: msg". */
static gboolean
fail_text(GError **error, const SimConfigGroup *g, const SimConfigEntry *e, const char *msg)
{
  g_autofree char *group = sim_error_quote(g->name);
  if (e == NULL) { /* a value a preset set, not one the group gives */
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [%s]: %s", g->file, group, msg);
    return FALSE;
  }
  g_autofree char *key = sim_error_quote(e->key);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [%s] %s: %s", e->file, group, key, msg);
  return FALSE;
}

/* A value error rewritten as "file: [group] key: message"; the value,
 * where the cause echoes it, is quoted too. */
static gboolean
fail_at(GError **error, const SimConfigGroup *g, const SimConfigEntry *e, GError *cause)
{
  g_autofree char *msg = sim_error_quote_in(cause->message, e->value);
  g_error_free(cause);
  return fail_text(error, g, e, msg);
}

G_GNUC_PRINTF(4, 5)
static gboolean
fail(GError **error, const SimConfigGroup *g, const SimConfigEntry *e, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *msg = g_strdup_vprintf(format, ap);
  va_end(ap);
  return fail_text(error, g, e, msg);
}

/* "file: [group] key: WHAT, got 'GOT'", with GOT quoted. */
G_GNUC_PRINTF(5, 6)
static gboolean
fail_got(GError **error, const SimConfigGroup *g, const SimConfigEntry *e, const char *got, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *what = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_autofree char *quoted = sim_error_quote(got);
  g_autofree char *msg = g_strdup_printf("%s, got '%s'", what, quoted);
  return fail_text(error, g, e, msg);
}

/* Every key of `g` must be one of `group`'s, of any policy kind. */
static gboolean
check_keys(const SimConfigGroup *g, SimSchemaGroup group, GError **error)
{
  for (guint i = 0; i < g->entries->len; i++) {
    const SimConfigEntry *e = g_ptr_array_index(g->entries, i);
    if (sim_schema_find(group, e->key, SIM_SCHEMA_ANY_KIND) != SIM_KEY_COUNT)
      continue;
    g_autofree char *known = sim_schema_key_list(group, 0);
    return fail(error, g, e, "unknown key (expected one of %s)", known);
  }
  return TRUE;
}

/* `g` (NULL when the file has no such group, named `group_name`) must give key `id`. */
static gboolean
require(const char *top, const char *group_name, const SimConfigGroup *g, SimKeyId id, GError **error)
{
  const SimSchemaKey *k = sim_schema_key(id);
  if (sim_config_lookup(g, k->key))
    return TRUE;
  g_autofree char *group = sim_error_quote(group_name);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [%s] %s: missing required key (expected %s)",
              g ? g->file : top, group, k->key, sim_schema_expect(id));
  return FALSE;
}

/* ---- typed readers: absent keys leave their target untouched ---------- */

/* Key `id` of `g`, when given, parsed into `value` (storage of its type). */
static gboolean
get(const SimConfigGroup *g, SimKeyId id, gpointer value, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, sim_schema_key(id)->key);
  GError *cause = NULL;
  if (e && !sim_schema_parse_value(id, e->value, value, &cause))
    return fail_at(error, g, e, cause);
  return TRUE;
}

/* Every field-mapped key of `group` that `g` gives (for policies, those of
 * `kind`), parsed into its field of `target`, in the schema's order. */
static gboolean
read_fields(const SimConfigGroup *g, SimSchemaGroup group, guint kind, gpointer target, GError **error)
{
  for (guint id = 0; id < SIM_KEY_COUNT; id++) {
    const SimSchemaKey *k = sim_schema_key((SimKeyId)id);
    if (k->group != group || k->offset == SIM_SCHEMA_BY_HAND ||
        (group == SIM_GROUP_POLICY && (k->kinds & (1u << kind)) == 0))
      continue;
    if (!get(g, (SimKeyId)id, (char *)target + k->offset, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
given(const SimConfigGroup *g, SimKeyId id)
{
  return sim_config_lookup(g, sim_schema_key(id)->key) != NULL;
}

/* The entry of key `id` in `g`, or NULL. */
static const SimConfigEntry *
entry_of(const SimConfigGroup *g, SimKeyId id)
{
  return sim_config_lookup(g, sim_schema_key(id)->key);
}

static gboolean
parse_uint(const char *s, guint64 lo, guint64 hi, guint64 *out)
{
  g_autofree char *trimmed = g_strstrip(g_strdup(s));
  return g_ascii_string_to_unsigned(trimmed, 10, lo, hi, out, NULL);
}

/* "AxB" or "AxBxC": `n` whole numbers from 1 to `hi` joined by 'x' (a GEMM
 * tile, a GEMM shape). */
static gboolean
parse_dims(const char *text, guint n, guint64 hi, guint64 *out)
{
  g_auto(GStrv) parts = g_strsplit(text, "x", -1);
  if (g_strv_length(parts) != n)
    return FALSE;
  for (guint i = 0; i < n; i++)
    if (!parse_uint(parts[i], 1, hi, &out[i]))
      return FALSE;
  return TRUE;
}

/* One flag after a tensor's size: keep, recompute=TIME or refs=N. */
static gboolean
parse_tensor_flag(SimTensor *t, const char *flag, GError **error)
{
  guint64 refs;
  if (strcmp(flag, "keep") == 0) {
    t->offloadable = FALSE;
    return TRUE;
  }
  if (g_str_has_prefix(flag, "recompute=")) {
    const char *time = flag + strlen("recompute=");
    GError *cause = NULL;
    if (!sim_units_parse_time(time, &t->recompute, &cause)) {
      g_autofree char *msg = sim_error_quote_in(cause->message, time);
      g_error_free(cause);
      g_set_error_literal(error, SIM_ERROR, SIM_ERROR_INPUT, msg);
      return FALSE;
    }
    t->selective = TRUE;
    return TRUE;
  }
  if (g_str_has_prefix(flag, "refs=") && parse_uint(flag + strlen("refs="), 1, 1000, &refs)) {
    t->refs = (guint)refs;
    return TRUE;
  }
  g_autofree char *quoted = sim_error_quote(flag);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected a flag keep, recompute=TIME or refs=N (1-1000), got '%s'",
              quoted);
  return FALSE;
}

/* "attn:24MiB, mlp:32MiB, mask:1MiB:keep, scores:40MiB:recompute=0.2ms" */
static gboolean
get_tensors(const SimConfigGroup *g, SimKeyId id, GArray **out, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, sim_schema_key(id)->key);
  if (e == NULL)
    return TRUE;
  g_autoptr(GArray) tensors = g_array_new(FALSE, TRUE, sizeof(SimTensor));
  g_array_set_clear_func(tensors, sim_tensor_clear);
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  g_auto(GStrv) items = g_strsplit(e->value, ",", -1);
  guint64 total = 0;

  for (char **item = items; *item; item++) {
    g_strstrip(*item);
    if (**item == '\0') {
      if (items[1] == NULL)
        break; /* `tensors =` : the layer saves nothing */
      g_autofree char *value = sim_error_quote(e->value);
      return fail(error, g, e, "expected name:size items separated by commas, got an empty item in '%s'", value);
    }
    g_auto(GStrv) parts = g_strsplit(*item, ":", -1);
    if (g_strv_length(parts) < 2)
      return fail_got(error, g, e, *item, "expected name:size[:flag...]");
    g_strstrip(parts[0]);
    if (*parts[0] == '\0')
      return fail_got(error, g, e, *item, "a tensor needs a name");
    g_autofree char *name = sim_error_quote(parts[0]);
    SimTensor t = { .name = g_intern_string(parts[0]), .offloadable = TRUE, .refs = 1 };
    g_array_append_val(tensors, t);
    SimTensor *added = &g_array_index(tensors, SimTensor, tensors->len - 1);
    GError *cause = NULL;
    gboolean ok = sim_units_parse_size(parts[1], &added->bytes, &cause);
    for (char **flag = parts + 2; ok && *flag; flag++)
      ok = parse_tensor_flag(added, g_strstrip(*flag), &cause);
    if (!ok) {
      g_autofree char *why = sim_error_quote_in(cause->message, parts[1]);
      g_error_free(cause);
      return fail(error, g, e, "tensor '%s': %s", name, why);
    }
    if (!g_hash_table_add(seen, (gpointer)added->name))
      return fail(error, g, e, "tensor '%s' is listed twice", name);
    /* Each reference may be copied and reloaded on its own (dedup = false). */
    if (added->bytes > (SIM_UNITS_MAX_BYTES - total) / added->refs)
      return fail(error, g, e, "the tensors, each counted once per reference, add up to more than 4 EiB");
    total += added->bytes * added->refs;
  }
  *out = g_steal_pointer(&tensors);
  return TRUE;
}

/* "4KiB:1.9GB/s, 64KiB:12GB/s": a measured size -> bandwidth table. */
static gboolean
get_table(const SimConfigGroup *g, SimKeyId id, SimBandwidthPoint *points, guint *n_points, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, sim_schema_key(id)->key);
  if (e == NULL)
    return TRUE;
  g_auto(GStrv) items = g_strsplit(e->value, ",", -1);
  guint n = 0;
  for (char **item = items; *item; item++) {
    g_auto(GStrv) parts = g_strsplit(*item, ":", -1);
    GError *cause = NULL;
    if (g_strv_length(parts) != 2)
      return fail_got(error, g, e, g_strstrip(*item), "expected SIZE:RATE items");
    if (n == SIM_LINK_MAX_POINTS)
      return fail(error, g, e, "at most %d points", SIM_LINK_MAX_POINTS);
    gboolean size_ok = sim_units_parse_size(parts[0], &points[n].bytes, &cause);
    if (!size_ok || !sim_units_parse_rate(parts[1], &points[n].bandwidth, &cause)) {
      g_autofree char *msg = sim_error_quote_in(cause->message, size_ok ? parts[1] : parts[0]);
      g_error_free(cause);
      return fail(error, g, e, "point %u: %s", n + 1, msg);
    }
    if (points[n].bytes == 0 || (n > 0 && points[n].bytes <= points[n - 1].bytes))
      return fail(error, g, e, "point %u: sizes must be positive and increasing", n + 1);
    n++;
  }
  *n_points = n;
  return TRUE;
}

/* "128x256": the GEMM kernel's output tile, M rows by N columns. */
static gboolean
get_gemm_tile(const SimConfigGroup *g, SimDevice *d, GError **error)
{
  const SimConfigEntry *e = entry_of(g, SIM_KEY_DEVICE_GEMM_TILE);
  if (e == NULL)
    return TRUE;
  guint64 tile[2];
  if (!parse_dims(e->value, 2, 4096, tile))
    return fail_got(error, g, e, e->value, "expected %s, each from 1 to 4096",
                    sim_schema_key(SIM_KEY_DEVICE_GEMM_TILE)->expect);
  d->gemm_tile_m = (guint)tile[0];
  d->gemm_tile_n = (guint)tile[1];
  return TRUE;
}

/* "650TFLOPS" (a plain decimal, then the unit) -> FLOP/s. */
static gboolean
parse_tflops(const char *text, double *flops)
{
  g_autofree char *s = g_strstrip(g_strdup(text));
  if (!g_str_has_suffix(s, "TFLOPS"))
    return FALSE;
  s[strlen(s) - strlen("TFLOPS")] = '\0';
  char *end = NULL;
  gboolean plain = *s != '\0' && strspn(s, "0123456789.") == strlen(s);
  double v = plain ? g_ascii_strtod(s, &end) : NAN;
  if (!plain || *end != '\0' || !(v > 0) || v > 1e9)
    return FALSE;
  *flops = v * 1e12;
  return TRUE;
}

/* One gemm_table item, "bf16:4096x4096x4096:650TFLOPS", into `p`. */
static gboolean
parse_gemm_point(const char *item, SimGemmPoint *p)
{
  g_auto(GStrv) parts = g_strsplit(item, ":", -1);
  if (g_strv_length(parts) != 3)
    return FALSE;
  g_autofree char *dtype = g_strstrip(g_strdup(parts[0]));
  guint d;
  for (d = 0; sim_dtype_names[d] && strcmp(sim_dtype_names[d], dtype) != 0; d++)
    ;
  guint64 mnk[3];
  if (sim_dtype_names[d] == NULL || !parse_dims(parts[1], 3, G_MAXINT32, mnk))
    return FALSE;
  p->dtype = d;
  p->m = mnk[0];
  p->n = mnk[1];
  p->k = mnk[2];
  return parse_tflops(parts[2], &p->flops);
}

/* "bf16:4096x4096x4096:650TFLOPS, ...": measured GEMM throughputs. */
static gboolean
get_gemm_table(const SimConfigGroup *g, SimDevice *d, GError **error)
{
  const SimConfigEntry *e = entry_of(g, SIM_KEY_DEVICE_GEMM_TABLE);
  if (e == NULL)
    return TRUE;
  g_auto(GStrv) items = g_strsplit(e->value, ",", -1);
  guint n = 0;
  for (char **item = items; *item; item++) {
    g_strstrip(*item);
    if (n == SIM_DEVICE_MAX_GEMM_POINTS)
      return fail(error, g, e, "at most %d points", SIM_DEVICE_MAX_GEMM_POINTS);
    if (!parse_gemm_point(*item, &d->gemm_table[n]))
      return fail_got(error, g, e, *item, "point %u: expected DTYPE:MxNxK:RATE with DTYPE fp32, bf16 or fp16, "
                      "dimensions from 1 to %d and RATE such as 650TFLOPS", n + 1, G_MAXINT32);
    n++;
  }
  d->gemm_points = n;
  return TRUE;
}

/* What an index set selects from, for its messages: "layer" and "the
 * model has 24 layers", "stage" and "pp = 4". */
typedef struct {
  SimKeyId id;
  const char *item;
  const char *range;
} IndexSet;

/* "all", "none", "first:N", "last:N", or indices and ranges "0-3,7": a
 * gboolean per index below `n`.  One grammar for `layers` and `stages`. */
static gboolean
get_index_set(const SimConfigGroup *g, const IndexSet *what, guint n, GArray **out, GError **error)
{
  const SimSchemaKey *k = sim_schema_key(what->id);
  SimConfigEntry *e = sim_config_lookup(g, k->key);
  if (e == NULL)
    return TRUE;
  g_autoptr(GArray) set = g_array_sized_new(FALSE, TRUE, sizeof(gboolean), n);
  g_array_set_size(set, n);
  g_autofree char *value = g_strstrip(g_strdup(e->value));
  guint64 a, b;

  if (*value == '\0')
    return fail(error, g, e, "expected %s, got nothing", k->expect);
  if (strcmp(value, "all") == 0 || strcmp(value, "none") == 0) {
    for (guint i = 0; i < n; i++)
      g_array_index(set, gboolean, i) = value[0] == 'a';
  } else if (g_str_has_prefix(value, "first:") || g_str_has_prefix(value, "last:")) {
    gboolean first = value[0] == 'f';
    if (!parse_uint(strchr(value, ':') + 1, 0, n, &a))
      return fail_got(error, g, e, e->value, "expected %s:N with N from 0 to %u", first ? "first" : "last", n);
    for (guint i = 0; i < n; i++)
      g_array_index(set, gboolean, i) = first ? i < a : i + a >= n;
  } else {
    g_auto(GStrv) items = g_strsplit(value, ",", -1);
    for (char **item = items; *item; item++) {
      g_strstrip(*item);
      char *dash = strchr(*item, '-');
      gboolean ok;
      if (dash) {
        *dash = '\0';
        ok = parse_uint(*item, 0, G_MAXUINT32, &a) && parse_uint(dash + 1, 0, G_MAXUINT32, &b) && a <= b;
        *dash = '-';
      } else {
        ok = parse_uint(*item, 0, G_MAXUINT32, &a);
        b = a;
      }
      if (!ok)
        return fail_got(error, g, e, *item, "expected %s", k->expect);
      if (b >= n)
        return fail(error, g, e, "%s %" G_GUINT64_FORMAT " is out of range (%s, 0-%u)", what->item, b, what->range,
                    n - 1);
      for (guint64 i = a; i <= b; i++)
        g_array_index(set, gboolean, i) = TRUE;
    }
  }
  *out = g_steal_pointer(&set);
  return TRUE;
}

/* "7, 9, 9, 7": one whole number up to `hi` per item, into a new guint
 * array; what each must be beyond that is the caller's to say. */
static gboolean
get_uint_list(const SimConfigGroup *g, SimKeyId id, guint64 hi, GArray **out, GError **error)
{
  const SimSchemaKey *k = sim_schema_key(id);
  SimConfigEntry *e = sim_config_lookup(g, k->key);
  if (e == NULL)
    return TRUE;
  g_auto(GStrv) items = g_strsplit(e->value, ",", -1);
  g_autoptr(GArray) list = g_array_sized_new(FALSE, FALSE, sizeof(guint), g_strv_length(items));
  for (char **item = items; *item; item++) {
    guint64 v;
    if (!parse_uint(*item, 0, hi, &v))
      return fail_got(error, g, e, g_strstrip(*item), "expected %s", k->expect);
    guint u = (guint)v;
    g_array_append_val(list, u);
  }
  *out = g_steal_pointer(&list);
  return TRUE;
}

static gboolean
get_actions(const SimConfigGroup *g, guint n_layers, GArray **out, GError **error)
{
  const char *const *names = sim_action_names;
  SimConfigEntry *e = sim_config_lookup(g, sim_schema_key(SIM_KEY_POLICY_ACTIONS)->key);
  if (e == NULL)
    return TRUE;
  g_auto(GStrv) items = g_strsplit(e->value, ",", -1);
  guint n = g_strv_length(items);
  if (n != n_layers)
    return fail(error, g, e, "expected one action per layer (%u), got %u", n_layers, n);
  g_autoptr(GArray) actions = g_array_sized_new(FALSE, TRUE, sizeof(SimAction), n);
  for (guint i = 0; i < n; i++) {
    g_strstrip(items[i]);
    guint a;
    for (a = 0; names[a] && strcmp(names[a], items[i]) != 0; a++)
      ;
    if (names[a] == NULL)
      return fail_got(error, g, e, items[i],
                      "layer %u: expected keep, offload, recompute, selective or selective+offload", i);
    SimAction action = (SimAction)a;
    g_array_append_val(actions, action);
  }
  *out = g_steal_pointer(&actions);
  return TRUE;
}

/* ---- groups ------------------------------------------------------------- */

void
sim_scenario_machine_defaults(SimMachine *m)
{
  *m = (SimMachine){ 0 };
  sim_schema_apply_defaults(SIM_GROUP_DEVICE, m);
  sim_schema_apply_defaults(SIM_GROUP_LINK, m);
  sim_schema_apply_defaults(SIM_GROUP_NODE, m); /* one GPU: socket_of all 0 */
  sim_schema_apply_defaults(SIM_GROUP_NETWORK, m);
}

void
sim_scenario_parallel_defaults(SimParallel *par)
{
  *par = (SimParallel){ 0 };
  sim_schema_apply_defaults(SIM_GROUP_PARALLEL, par);
}

/* socket_of is a byte per GPU, and every GPU of a simulation has one. */
G_STATIC_ASSERT(SIM_NODE_MAX_GPUS >= SIM_PARALLEL_MAX_GPUS && SIM_NODE_MAX_GPUS <= 256);

/* [parallel]: its keys and what they must agree on among themselves.  What
 * they must agree on with the model waits for the workload
 * (check_parallel_layers). */
static gboolean
load_parallel(const SimConfig *c, SimParallel *par, GError **error)
{
  const SimConfigGroup *g = sim_config_group(c, "parallel");
  if (!read_fields(g, SIM_GROUP_PARALLEL, 0, par, error) ||
      !get_uint_list(g, SIM_KEY_PARALLEL_SPLIT, SIM_WORKLOAD_MAX_LAYERS, &par->split, error))
    return FALSE;
  const char *schedule = sim_pipe_schedule_names[par->schedule];
  if (par->virtual_chunks > 1 && par->schedule != SIM_PIPE_INTERLEAVED)
    return fail(error, g, entry_of(g, SIM_KEY_PARALLEL_VIRTUAL),
                "expected 1 with schedule = %s (only schedule = interleaved runs several chunks per stage), got %u",
                schedule, par->virtual_chunks);
  /* Megatron's interleaved schedule runs the micro-batches in groups of pp. */
  if (par->schedule == SIM_PIPE_INTERLEAVED && par->microbatches % par->pp != 0)
    return fail(error, g,
                given(g, SIM_KEY_PARALLEL_MICROBATCHES) ? entry_of(g, SIM_KEY_PARALLEL_MICROBATCHES)
                                                        : entry_of(g, SIM_KEY_PARALLEL_SCHEDULE),
                "expected microbatches to be a multiple of pp (%u) with schedule = interleaved, as Megatron "
                "requires, got %u", par->pp, par->microbatches);
  if (sim_parallel_gpus(par) > SIM_PARALLEL_MAX_GPUS)
    return fail(error, g,
                given(g, SIM_KEY_PARALLEL_DP) ? entry_of(g, SIM_KEY_PARALLEL_DP) : entry_of(g, SIM_KEY_PARALLEL_PP),
                "expected pp × dp to be at most %d GPUs, got %u × %u = %u", SIM_PARALLEL_MAX_GPUS, par->pp, par->dp,
                sim_parallel_gpus(par));
  /* Sharding divides among data-parallel replicas: alone there is nothing
   * to divide among. */
  if (par->sharding != SIM_SHARDING_NONE && par->dp == 1)
    return fail(error, g, entry_of(g, SIM_KEY_PARALLEL_SHARDING),
                "expected none with dp = 1 (sharding divides the static memory among data-parallel replicas), "
                "got %s", sim_sharding_names[par->sharding]);
  /* Megatron carves the expert-parallel group out of the data-parallel
   * ranks (sim/model/parallel.h: parallel_state.py l. 874-884). */
  if (par->dp % par->ep != 0)
    return fail(error, g, entry_of(g, SIM_KEY_PARALLEL_EP),
                "expected a divisor of dp (%u): Megatron takes the expert-parallel ranks from the data-parallel ones "
                "(world size tp × dp × pp divisible by tp × ep × pp, megatron/core/parallel_state.py l. 874-884), "
                "got %u", par->dp, par->ep);
  if (par->ep > 1 && par->sharding != SIM_SHARDING_NONE)
    return fail(error, g, entry_of(g, SIM_KEY_PARALLEL_SHARDING),
                "expected none with ep = %u (sharding the experts' state over the dp / ep ranks of the "
                "expert-data-parallel group is not modelled), got %s", par->ep, sim_sharding_names[par->sharding]);
  /* DeepSpeed offloads the optimizer from ZeRO-1 on; the weights only
   * when they are sharded (ZeRO-3, FSDP2's CPUOffloadPolicy), which moves
   * the optimizer state with them. */
  if (par->offload_optimizer && par->sharding == SIM_SHARDING_NONE)
    return fail(error, g, entry_of(g, SIM_KEY_PARALLEL_OFFLOAD_OPTIMIZER),
                "expected false without sharding (the optimizer is offloaded per replica shard, from "
                "sharding = optimizer on, as DeepSpeed's offload_optimizer), got true");
  if (par->offload_params && par->sharding != SIM_SHARDING_FULL)
    return fail(error, g, entry_of(g, SIM_KEY_PARALLEL_OFFLOAD_PARAMS),
                "expected false unless sharding = full (weights are offloaded as shards), got true");
  if (par->offload_params)
    par->offload_optimizer = TRUE;
  if (par->split) {
    const SimConfigEntry *e = entry_of(g, SIM_KEY_PARALLEL_SPLIT);
    guint chunks = sim_parallel_chunks(par);
    if (par->split->len != chunks)
      return fail(error, g, e, "expected one layer count per chunk, pp × virtual = %u of them, got %u", chunks,
                  par->split->len);
    for (guint i = 0; i < chunks; i++)
      if (g_array_index(par->split, guint, i) == 0)
        return fail(error, g, e, "chunk %u: expected at least 1 layer, got 0 (a stage with no layers)", i);
  }
  return TRUE;
}

/* The chunks against the model: a split adds up to its layers; an even cut
 * gives every chunk a layer, and with interleaving the same number. */
static gboolean
check_parallel_layers(const SimConfig *c, const SimParallel *par, const SimWorkload *w, GError **error)
{
  const SimConfigGroup *g = sim_config_group(c, "parallel");
  guint chunks = sim_parallel_chunks(par), n_layers = sim_workload_n_layers(w);
  /* Expert parallelism places experts: only a [transformer] has them
   * (load_transformer checks it against them). */
  if (w->ep != par->ep)
    return fail(error, g, entry_of(g, SIM_KEY_PARALLEL_EP),
                "expected 1 for a workload without experts (only a [transformer] with experts places them), got %u",
                par->ep);
  /* Sharding divides parameters' bytes: a [model]'s or a recording's
   * `static` is one size, with nothing to say what it is made of. */
  if (par->sharding != SIM_SHARDING_NONE && !sim_param_bytes_known(&w->param_bytes))
    return fail(error, g, entry_of(g, SIM_KEY_PARALLEL_SHARDING),
                "expected none for a workload whose parameters are not counted (only [transformer] counts "
                "them), got %s", sim_sharding_names[par->sharding]);
  if (par->offload_optimizer && w->param_bytes.state < 8)
    return fail(error, g,
                given(g, SIM_KEY_PARALLEL_OFFLOAD_PARAMS) ? entry_of(g, SIM_KEY_PARALLEL_OFFLOAD_PARAMS)
                                                          : entry_of(g, SIM_KEY_PARALLEL_OFFLOAD_OPTIMIZER),
                "expected false with [transformer] optimizer = none (no optimizer state to offload), got true");
  if (par->split) {
    guint64 sum = 0;
    for (guint i = 0; i < par->split->len; i++)
      sum += g_array_index(par->split, guint, i);
    if (sum != n_layers)
      return fail(error, g, entry_of(g, SIM_KEY_PARALLEL_SPLIT),
                  "expected layer counts adding up to the model's %u layers, got %" G_GUINT64_FORMAT, n_layers, sum);
    return TRUE;
  }
  /* chunks > 1 here, so pp or virtual is given, and the group with it. */
  if (n_layers < chunks)
    return fail(error, g, entry_of(g, par->virtual_chunks > 1 ? SIM_KEY_PARALLEL_VIRTUAL : SIM_KEY_PARALLEL_PP),
                "expected pp × virtual to be at most the model's %u layers (some chunk would get no layers), "
                "got %u × %u = %u", n_layers, par->pp, par->virtual_chunks, chunks);
  if (par->schedule == SIM_PIPE_INTERLEAVED && n_layers % chunks != 0)
    return fail(error, g,
                given(g, SIM_KEY_PARALLEL_VIRTUAL) ? entry_of(g, SIM_KEY_PARALLEL_VIRTUAL)
                                                   : entry_of(g, SIM_KEY_PARALLEL_SCHEDULE),
                "expected pp × virtual to divide the model's %u layers with schedule = interleaved (equal chunks, "
                "as Megatron cuts them; or give split), got %u × %u = %u", n_layers, par->pp, par->virtual_chunks,
                chunks);
  return TRUE;
}

/* [node]: gpu_sockets, one per GPU of `par`, or contiguous blocks: GPU g
 * on socket g × sockets / gpus, as a node numbers its GPUs socket by socket. */
static gboolean
load_node_sockets(const SimConfigGroup *g, const SimParallel *par, SimNode *node, GError **error)
{
  guint gpus = sim_parallel_gpus(par);
  g_autoptr(GArray) sockets = NULL;
  if (!get_uint_list(g, SIM_KEY_NODE_GPU_SOCKETS, G_MAXUINT32, &sockets, error))
    return FALSE;
  if (sockets == NULL) {
    for (guint gpu = 0; gpu < gpus; gpu++)
      node->socket_of[gpu] = (guint8)(gpu * node->sockets / gpus);
    return TRUE;
  }
  const SimConfigEntry *e = entry_of(g, SIM_KEY_NODE_GPU_SOCKETS);
  if (sockets->len != gpus)
    return fail(error, g, e, "expected one socket per GPU, pp × dp = %u of them, got %u", gpus, sockets->len);
  for (guint gpu = 0; gpu < gpus; gpu++) {
    guint socket = g_array_index(sockets, guint, gpu);
    if (socket >= node->sockets)
      return fail(error, g, e, "GPU %u: socket %u is out of range (sockets = %u, 0-%u)", gpu, socket, node->sockets,
                  node->sockets - 1);
    node->socket_of[gpu] = (guint8)socket;
  }
  return TRUE;
}

/* [node] gpus against gpus_per_switch: a PCIe switch sits inside one node,
 * so a node holds whole switches.  The message names whichever of the two
 * keys the file gives (gpus when both are). */
static gboolean
check_node_gpus(const SimConfigGroup *g, const SimNode *node, GError **error)
{
  if (node->gpus % node->gpus_per_switch == 0)
    return TRUE;
  SimKeyId key = given(g, SIM_KEY_NODE_GPUS) ? SIM_KEY_NODE_GPUS : SIM_KEY_NODE_GPUS_PER_SWITCH;
  return fail(error, g, entry_of(g, key),
              "expected gpus to be a multiple of gpus_per_switch (a switch sits inside one node), got gpus = %u "
              "and gpus_per_switch = %u", node->gpus, node->gpus_per_switch);
}

/* [device], [link], [node] and [network]; `par` says how many GPUs [node] places. */
static gboolean
load_machine(const SimConfig *c, const SimParallel *par, SimMachine *m, GError **error)
{
  const SimConfigGroup *dev = sim_config_group(c, "device");
  const SimConfigGroup *link = sim_config_group(c, "link");
  const SimConfigGroup *node = sim_config_group(c, "node");
  const SimConfigGroup *network = sim_config_group(c, "network");

  sim_scenario_machine_defaults(m);
  if (!require(c->top, "device", dev, SIM_KEY_DEVICE_MEMORY, error) ||
      !read_fields(dev, SIM_GROUP_DEVICE, 0, m, error) || !get_gemm_tile(dev, &m->device, error) ||
      !get_gemm_table(dev, &m->device, error))
    return FALSE;
  SimLink *l = &m->link;
  if (!require(c->top, "link", link, SIM_KEY_LINK_H2D_BANDWIDTH, error) ||
      !require(c->top, "link", link, SIM_KEY_LINK_D2H_BANDWIDTH, error) ||
      !read_fields(link, SIM_GROUP_LINK, 0, m, error) ||
      !get_table(link, SIM_KEY_LINK_D2H_TABLE, l->table[0], &l->table_points[0], error) ||
      !get_table(link, SIM_KEY_LINK_H2D_TABLE, l->table[1], &l->table_points[1], error))
    return FALSE;
  if (!given(link, SIM_KEY_LINK_BIDIR_BANDWIDTH))
    l->bidir_bandwidth = l->h2d_bandwidth + l->d2h_bandwidth;
  /* [scenario] step: which pinned buffers the step allocates (machine.h). */
  if (!get(sim_config_group(c, "scenario"), SIM_KEY_SCENARIO_STEP, &l->first_step, error))
    return FALSE;
  return read_fields(node, SIM_GROUP_NODE, 0, m, error) && check_node_gpus(node, &l->node, error) &&
         load_node_sockets(node, par, &l->node, error) && read_fields(network, SIM_GROUP_NETWORK, 0, m, error);
}

/* The per-layer keys shared by [model] and [layer.N], applied to one layer. */
typedef struct {
  double forward, backward;
  gboolean has_backward;
  guint64 input, workspace;
  GArray *tensors;
} LayerKeys;

/* [model] and [layer.N] rows of one per-layer key, in that order. */
typedef struct {
  SimKeyId forward, backward, input, workspace, tensors;
} LayerKeyIds;

static const LayerKeyIds model_layer_keys = { SIM_KEY_MODEL_FORWARD, SIM_KEY_MODEL_BACKWARD, SIM_KEY_MODEL_INPUT,
                                              SIM_KEY_MODEL_WORKSPACE, SIM_KEY_MODEL_TENSORS };
static const LayerKeyIds layer_layer_keys = { SIM_KEY_LAYER_FORWARD, SIM_KEY_LAYER_BACKWARD, SIM_KEY_LAYER_INPUT,
                                              SIM_KEY_LAYER_WORKSPACE, SIM_KEY_LAYER_TENSORS };

static gboolean
get_layer_keys(const SimConfigGroup *g, const LayerKeyIds *ids, LayerKeys *k, GError **error)
{
  GArray *tensors = NULL;
  if (!get(g, ids->forward, &k->forward, error) || !get(g, ids->backward, &k->backward, error) ||
      !get(g, ids->input, &k->input, error) || !get(g, ids->workspace, &k->workspace, error) ||
      !get_tensors(g, ids->tensors, &tensors, error))
    return FALSE;
  if (given(g, ids->backward))
    k->has_backward = TRUE;
  if (tensors) {
    if (k->tensors)
      g_array_unref(k->tensors);
    k->tensors = tensors;
  }
  return TRUE;
}

/* The [layer.N] group of each layer, or NULL; range-checked. */
static GPtrArray *
layer_overrides(const SimConfig *c, guint n_layers, GError **error)
{
  g_autoptr(GPtrArray) overrides = g_ptr_array_new();
  g_ptr_array_set_size(overrides, (gint)n_layers);
  for (guint i = 0; i < c->groups->len; i++) {
    const SimConfigGroup *g = g_ptr_array_index(c->groups, i);
    if (!g_str_has_prefix(g->name, "layer."))
      continue;
    guint64 index;
    g_autofree char *canonical = NULL;
    if (parse_uint(g->name + 6, 0, G_MAXUINT32, &index))
      canonical = g_strdup_printf("%" G_GUINT64_FORMAT, index);
    /* Only the plain spelling: [layer.03] beside [layer.3] would silently clash. */
    g_autofree char *group = sim_error_quote(g->name);
    if (canonical == NULL || strcmp(canonical, g->name + 6) != 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: [%s]: expected [layer.N] with N a layer index such as 0 or 17", g->file, group);
      return NULL;
    }
    if (index >= n_layers) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: [%s]: layer %" G_GUINT64_FORMAT " is out of range (the model has %u layers, 0-%u)", g->file,
                  group, index, n_layers, n_layers - 1);
      return NULL;
    }
    if (!check_keys(g, SIM_GROUP_LAYER, error))
      return NULL;
    g_ptr_array_index(overrides, index) = (gpointer)g;
  }
  return g_steal_pointer(&overrides);
}

/* A path key, relative to the file that gives it: a new string. */
static char *
relative_path(const SimConfigEntry *e)
{
  g_autofree char *dir = g_path_get_dirname(e->file);
  return g_path_is_absolute(e->value) ? g_strdup(e->value) : g_build_filename(dir, e->value, NULL);
}

SimTransformerDerived
sim_scenario_transformer_derive(const SimConfigGroup *g, gboolean from_hf, SimTransformer *t)
{
  gboolean heads = given(g, SIM_KEY_TRANSFORMER_HEADS), hidden = given(g, SIM_KEY_TRANSFORMER_HIDDEN);
  SimTransformerDerived d = {
    .kv_heads = !given(g, SIM_KEY_TRANSFORMER_KV_HEADS) && (!from_hf || heads),
    .head_dim = !given(g, SIM_KEY_TRANSFORMER_HEAD_DIM) && (!from_hf || hidden || heads),
    .grads = !given(g, SIM_KEY_TRANSFORMER_GRADS),
    .attention = !given(g, SIM_KEY_TRANSFORMER_ATTENTION),
    .optimizer_kernels = !given(g, SIM_KEY_TRANSFORMER_OPTIMIZER_KERNELS),
  };
  if (d.kv_heads)
    t->kv_heads = t->heads;
  if (d.head_dim)
    t->head_dim = t->hidden % t->heads == 0 ? t->hidden / t->heads : 0;
  SimTransformer follows = *t;
  sim_transformer_follow_ops(&follows);
  if (d.grads)
    t->grads_kept = follows.grads_kept;
  if (d.attention)
    t->attention = follows.attention;
  if (d.optimizer_kernels)
    t->optimizer_kernels = follows.optimizer_kernels;
  return d;
}

/* [transformer]: hf_config first, then the keys, which override it. */
/* [parallel] ep against the model: experts to place, Megatron's modules
 * (HF's have no expert parallelism), and a whole number of them on each
 * GPU.  Then the model is cut for it. */
static gboolean
transformer_ep(const SimConfig *c, const SimParallel *par, SimTransformer *t, GError **error)
{
  if (par->ep == 1)
    return TRUE;
  const SimConfigGroup *g = sim_config_group(c, "parallel");
  const SimConfigEntry *e = entry_of(g, SIM_KEY_PARALLEL_EP);
  if (t->experts == 0)
    return fail(error, g, e,
                "expected 1 without [transformer] experts (a dense model has no experts to place; Megatron requires "
                "num_moe_experts, transformer_config.py l. 1595), got %u", par->ep);
  if (t->hf_ops)
    return fail(error, g, e,
                "expected 1 with [transformer] ops = hf (HuggingFace's modeling code runs every expert on every GPU: "
                "it has no expert parallelism; use ops = fused, Megatron's), got %u", par->ep);
  if (t->experts % par->ep != 0)
    return fail(error, g, e,
                "expected a divisor of [transformer] experts (%u), a whole number of experts on each GPU "
                "(megatron/core/transformer/moe/moe_layer.py l. 186), got %u", t->experts, par->ep);
  t->ep = par->ep;
  return TRUE;
}

static gboolean
load_transformer(const SimConfig *c, const SimMachine *m, const SimParallel *par, const char *name,
                 SimWorkload **out, GError **error)
{
  static const SimKeyId shape[] = { SIM_KEY_TRANSFORMER_HIDDEN, SIM_KEY_TRANSFORMER_LAYERS, SIM_KEY_TRANSFORMER_HEADS,
                                    SIM_KEY_TRANSFORMER_FFN, SIM_KEY_TRANSFORMER_VOCAB };
  const SimConfigGroup *g = sim_config_group(c, "transformer");
  SimTransformer t;
  sim_transformer_defaults(&t);

  SimConfigEntry *hf = sim_config_lookup(g, sim_schema_key(SIM_KEY_TRANSFORMER_HF_CONFIG)->key);
  if (hf) {
    g_autofree char *path = relative_path(hf);
    GError *cause = NULL;
    if (!sim_hf_config_load(path, &t, &cause))
      return fail_at(error, g, hf, cause);
  } else {
    for (guint i = 0; i < G_N_ELEMENTS(shape); i++)
      if (!require(c->top, "transformer", g, shape[i], error))
        return FALSE;
  }
  if (!require(c->top, "transformer", g, SIM_KEY_TRANSFORMER_BATCH, error) ||
      !require(c->top, "transformer", g, SIM_KEY_TRANSFORMER_SEQ, error) ||
      !read_fields(g, SIM_GROUP_TRANSFORMER, 0, &t, error))
    return FALSE;
  sim_scenario_transformer_derive(g, hf != NULL, &t);
  if (!transformer_ep(c, par, &t, error))
    return FALSE;
  /* head_dim 0 (heads does not divide hidden) and every range are
   * sim_transformer_validate's, which the build calls: one check for this
   * group and for `offsim model`. */

  g_autoptr(GError) cause = NULL;
  *out = sim_transformer_build(&t, &m->device, name, &cause);
  if (*out == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [transformer] %s", g->file, cause->message);
    return FALSE;
  }
  return TRUE;
}

/* [trace] workspace: transient bytes while each phase runs; a layer run
 * op by op holds them from its phase's first op to its last. */
static void
trace_workspace(SimLayer *layer, guint64 workspace)
{
  if (!sim_layer_has_ops(layer)) {
    sim_layer_set_workspace(layer, workspace);
    return;
  }
  if (workspace == 0)
    return;
  sim_layer_add_span(layer, workspace, 0, layer->n_forward - 1);
  sim_layer_add_span(layer, workspace, layer->n_forward, layer->ops->len - 1);
  sim_layer_finish_ops(layer);
}

/* [trace]: a recording of what autograd saved, timed by `forward` (and
 * `backward`) when given, else from the recording's op counts on the
 * machine's device, as [transformer] times a generated layer. */
static gboolean
load_trace(const SimConfig *c, const SimMachine *m, const char *name, SimWorkload **out, GError **error)
{
  const SimConfigGroup *g = sim_config_group(c, "trace");
  double forward = 0, backward = 0;
  guint64 workspace = 0, static_bytes = 0;
  if (!require(c->top, "trace", g, SIM_KEY_TRACE_FILE, error) || !get(g, SIM_KEY_TRACE_FORWARD, &forward, error) ||
      !get(g, SIM_KEY_TRACE_BACKWARD, &backward, error) || !get(g, SIM_KEY_TRACE_WORKSPACE, &workspace, error) ||
      !get(g, SIM_KEY_TRACE_STATIC, &static_bytes, error))
    return FALSE;
  gboolean timed = given(g, SIM_KEY_TRACE_FORWARD);
  if (!timed && given(g, SIM_KEY_TRACE_BACKWARD)) {
    const SimConfigEntry *e = sim_config_lookup(g, sim_schema_key(SIM_KEY_TRACE_BACKWARD)->key);
    return fail(error, g, e, "needs `forward` beside it (without both, the recording's op counts time every layer)");
  }
  SimConfigEntry *file = sim_config_lookup(g, sim_schema_key(SIM_KEY_TRACE_FILE)->key);
  g_autofree char *path = relative_path(file);
  GError *cause = NULL;
  g_autoptr(SimWorkload) w = timed ? sim_trace_load(path, name, &cause)
                                   : sim_trace_load_timed(path, name, &m->device, &cause);
  if (w == NULL)
    return fail_at(error, g, file, cause);
  if (!given(g, SIM_KEY_TRACE_BACKWARD))
    backward = 2 * forward;
  for (guint i = 0; i < sim_workload_n_layers(w); i++) {
    SimLayer *layer = sim_workload_layer(w, i);
    if (timed) {
      layer->forward = forward;
      layer->backward = backward;
    }
    trace_workspace(layer, workspace);
  }
  w->static_bytes = static_bytes;
  *out = g_steal_pointer(&w);
  return TRUE;
}

static gboolean
load_workload(const SimConfig *c, const char *name, SimWorkload **out, GError **error)
{
  static const SimKeyId required[] = { SIM_KEY_MODEL_LAYERS, SIM_KEY_MODEL_FORWARD, SIM_KEY_MODEL_INPUT,
                                       SIM_KEY_MODEL_TENSORS };
  const SimConfigGroup *model = sim_config_group(c, "model");
  guint n_layers = 0;
  guint64 static_bytes = 0;
  LayerKeys defaults = { 0 };

  for (guint i = 0; i < G_N_ELEMENTS(required); i++)
    if (!require(c->top, "model", model, required[i], error))
      return FALSE;
  if (!get(model, SIM_KEY_MODEL_LAYERS, &n_layers, error) || !get(model, SIM_KEY_MODEL_STATIC, &static_bytes, error))
    return FALSE;
  gboolean ok = get_layer_keys(model, &model_layer_keys, &defaults, error);
  g_autoptr(GArray) default_tensors = defaults.tensors; /* owns it from here on */
  if (!ok)
    return FALSE;
  g_autoptr(GPtrArray) overrides = layer_overrides(c, n_layers, error);
  if (overrides == NULL)
    return FALSE;

  g_autoptr(SimWorkload) w = sim_workload_new(name, n_layers);
  w->static_bytes = static_bytes;
  guint64 total = static_bytes, references = 0;
  for (guint i = 0; i < n_layers; i++) {
    LayerKeys k = defaults;
    k.tensors = g_array_ref(default_tensors);
    const SimConfigGroup *g = g_ptr_array_index(overrides, i);
    ok = g == NULL || get_layer_keys(g, &layer_layer_keys, &k, error);
    g_autoptr(GArray) tensors = k.tensors;
    if (!ok)
      return FALSE;
    for (guint t = 0; t < tensors->len; t++)
      references += g_array_index(tensors, SimTensor, t).refs;
    if (references > SIM_SCENARIO_MAX_REFERENCES) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: [model] tensors: layers x tensors x refs comes to more than %u saved references, far "
                  "beyond any real model", model->file, SIM_SCENARIO_MAX_REFERENCES);
      return FALSE;
    }
    SimLayer *layer = sim_workload_layer(w, i);
    layer->forward = k.forward;
    layer->backward = k.has_backward ? k.backward : 2 * k.forward;
    layer->input_bytes = k.input;
    sim_layer_set_workspace(layer, k.workspace);
    sim_layer_set_tensors(layer, tensors);
    guint64 layer_bytes = sim_layer_saved_bytes(layer) + layer->input_bytes + layer->workspace_bytes;
    if (layer_bytes > SIM_UNITS_MAX_BYTES - total) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: [model] tensors: the model's memory adds up to more than 4 EiB", model->file);
      return FALSE;
    }
    total += layer_bytes;
  }
  *out = g_steal_pointer(&w);
  return TRUE;
}

/* What depends on the mode unless given (sim/model/policy.h). */
static void
derive_mode_defaults(const SimConfigGroup *g, SimPolicy *p)
{
  if (!given(g, SIM_KEY_POLICY_KEEP_LAST))
    p->keep_last = SIM_POLICY_MODE_KEEP_LAST(p->async);
  if (!given(g, SIM_KEY_POLICY_DEDUP))
    p->dedup = SIM_POLICY_MODE_DEDUP(p->async);
}

/* Keys of other kinds are errors: a typo'd policy must not silently run as something else. */
static gboolean
check_kind_keys(const SimConfigGroup *g, SimPolicyKind kind, GError **error)
{
  for (guint i = 0; i < g->entries->len; i++) {
    const SimConfigEntry *e = g_ptr_array_index(g->entries, i);
    SimKeyId id = sim_schema_find(SIM_GROUP_POLICY, e->key, kind);
    if (id == SIM_KEY_POLICY_KIND || id != SIM_KEY_COUNT)
      continue;
    guint mask = 1u << kind;
    g_autofree char *all = sim_schema_key_list(SIM_GROUP_POLICY, mask);
    /* `kind` itself is every kind's: not listed among the options. */
    const char *known = g_str_has_prefix(all, "kind, ") ? all + strlen("kind, ") : strcmp(all, "kind") == 0 ? "" : all;
    return fail(error, g, e, "not an option of kind = %s (its options: %s)", sim_policy_kind_name(kind),
                *known ? known : "none");
  }
  return TRUE;
}

/* Whether every layer of `w` is described op by op, its ops tagged with their modules. */
static gboolean
workload_has_layer_ops(const SimWorkload *w)
{
  for (guint i = 0; i < sim_workload_n_layers(w); i++) {
    const SimLayer *layer = sim_workload_layer(w, i);
    if (!sim_layer_has_ops(layer))
      return FALSE;
    /* A recording's ops know their autograd nodes, not the transformer's
     * modules (SIM_MODULE_NONE). */
    gboolean known = FALSE;
    for (guint k = 0; k < layer->ops->len && !known; k++)
      known = sim_layer_op(layer, k)->module != SIM_MODULE_NONE;
    if (!known)
      return FALSE;
  }
  return sim_workload_n_layers(w) > 0;
}

/* Option combinations no schedule has, each one line naming the key and
 * why; `w` is the workload the policy runs on. */
static gboolean
check_schedule(const SimConfigGroup *g, const SimPolicy *p, const SimWorkload *w, GError **error)
{
  const char *fw = sim_framework_names[p->framework];
  const SimConfigEntry *e;
  gboolean pin = FALSE;
  if ((e = entry_of(g, SIM_KEY_POLICY_PIN_MEMORY)) && get(g, SIM_KEY_POLICY_PIN_MEMORY, &pin, NULL) && pin &&
      p->framework != SIM_FRAMEWORK_SAVE_ON_CPU)
    return fail(error, g, e, "is save_on_cpu's argument (framework = save_on_cpu); otherwise set pinned");
  /* Like pin_memory, a version other than the default is deepspeed's alone
   * (`offsim show` writes the default out for every policy). */
  if ((e = entry_of(g, SIM_KEY_POLICY_VERSION)) && p->version != SIM_VERSION_RELEASE &&
      p->framework != SIM_FRAMEWORK_DEEPSPEED)
    return fail(error, g, e, "chooses the code framework = deepspeed follows (release or master); framework = %s "
                "has no versions", fw);
  if (p->checkpoint && !sim_framework_offloads_checkpoints(p->framework)) {
    /* The presets that do, from SIM_FRAMEWORK_MAP's column. */
    const char *those[SIM_FRAMEWORK_COUNT];
    guint n = 0;
    for (guint f = SIM_FRAMEWORK_NONE + 1; f < SIM_FRAMEWORK_COUNT; f++)
      if (sim_framework_offloads_checkpoints((SimFramework)f))
        those[n++] = sim_framework_names[f];
    g_autoptr(GString) names = g_string_new(NULL);
    for (guint i = 0; i < n; i++)
      sim_error_append_choice(names, those[i], i, n, "and");
    return fail(error, g, entry_of(g, SIM_KEY_POLICY_CHECKPOINT), "%s does not offload checkpoint inputs (%s do)", fw,
                names->str);
  }
  if (!p->checkpoint && p->framework == SIM_FRAMEWORK_DEEPSPEED)
    return fail(error, g, entry_of(g, SIM_KEY_POLICY_CHECKPOINT),
                "deepspeed moves only the inputs of checkpointed layers (checkpoint = true)");
  if (p->free == SIM_FREE_WAIT && p->inflight_unit == SIM_INFLIGHT_TENSORS)
    return fail(error, g, entry_of(g, SIM_KEY_POLICY_FREE) ? entry_of(g, SIM_KEY_POLICY_FREE)
                                                           : entry_of(g, SIM_KEY_POLICY_INFLIGHT_UNIT),
                "wait frees a group when the forward waits for its copies, which inflight_unit = tensors does "
                "tensor by tensor: use groups or window");
  if (p->inflight_unit == SIM_INFLIGHT_TENSORS && !p->start_tensor) {
    if ((e = entry_of(g, SIM_KEY_POLICY_INFLIGHT_UNIT)))
      return fail(error, g, e, "tensors counts saves, which needs start = tensor");
    /* The preset counts tensors (torchtune): the key given against it is start. */
    return fail(error, g, entry_of(g, SIM_KEY_POLICY_START),
                "framework = %s counts its copies in flight by saved tensor (inflight_unit = tensors), which needs "
                "start = tensor", fw);
  }
  if (sim_policy_on_demand(p) && p->prefetch > 0 && (e = entry_of(g, SIM_KEY_POLICY_PREFETCH)))
    return fail(error, g, e, "reload = on-demand issues each reload when its backward needs it: no prefetch");
  if (!p->async) {
    /* The async options away from their defaults. */
    const struct {
      SimKeyId id;
      gboolean set;
    } async_only[] = { { SIM_KEY_POLICY_STREAMS, p->shared_stream },
                       { SIM_KEY_POLICY_FREE, p->free != SIM_FREE_COPY_END },
                       { SIM_KEY_POLICY_HEAD_WAIT, p->head_wait },
                       { SIM_KEY_POLICY_INFLIGHT_UNIT, p->inflight_unit != SIM_INFLIGHT_GROUPS } };
    for (guint i = 0; i < G_N_ELEMENTS(async_only); i++)
      if (async_only[i].set)
        return fail(error, g, entry_of(g, async_only[i].id) ? entry_of(g, async_only[i].id)
                                                             : entry_of(g, SIM_KEY_POLICY_MODE),
                    "mode = sync copies on the compute stream, in order: %s is an async option",
                    sim_schema_key(async_only[i].id)->key);
    /* And the schedule's own keys, given away from what the policy has
     * without them (its preset's, or the defaults, which `offsim show`
     * writes out): a sync offload has no copies in flight to count and
     * nothing to prefetch. */
    g_autoptr(SimPolicy) plain = sim_policy_new(p->name, p->kind);
    plain->version = p->version;
    sim_framework_preset(plain, p->framework);
    const struct {
      SimKeyId id;
      gboolean set;
    } schedule_keys[] = { { SIM_KEY_POLICY_PREFETCH, p->prefetch != plain->prefetch },
                          { SIM_KEY_POLICY_INFLIGHT, p->inflight != plain->inflight } };
    for (guint i = 0; i < G_N_ELEMENTS(schedule_keys); i++)
      if (schedule_keys[i].set && (e = entry_of(g, schedule_keys[i].id)))
        return fail(error, g, e, "mode = sync copies on the compute stream, in order: %s is an async option",
                    sim_schema_key(schedule_keys[i].id)->key);
  }
  if (p->module_groups) {
    /* Megatron's groups follow its own schedule (framework.c): a key of the
     * layer-group schedule given away from the preset's value has nothing
     * to act on (`offsim show` writes the preset's values out). */
    g_autoptr(SimPolicy) plain = sim_policy_new(p->name, p->kind);
    sim_framework_preset(plain, p->framework);
    const struct {
      SimKeyId id;
      gboolean set;
    } group_schedule[] = { { SIM_KEY_POLICY_MODE, p->async != plain->async },
                           { SIM_KEY_POLICY_PREFETCH, p->prefetch != plain->prefetch },
                           { SIM_KEY_POLICY_INFLIGHT, p->inflight != plain->inflight },
                           { SIM_KEY_POLICY_START, p->start_tensor != plain->start_tensor },
                           { SIM_KEY_POLICY_INFLIGHT_UNIT, p->inflight_unit != plain->inflight_unit },
                           { SIM_KEY_POLICY_FREE, p->free != plain->free },
                           { SIM_KEY_POLICY_RELOAD, p->reload != plain->reload },
                           { SIM_KEY_POLICY_HEAD_WAIT, p->head_wait != plain->head_wait } };
    for (guint i = 0; i < G_N_ELEMENTS(group_schedule); i++)
      if (group_schedule[i].set && (e = entry_of(g, group_schedule[i].id)))
        return fail(error, g, e, "megatron copies each module's group when the module ends and reloads it as a "
                    "module of the layer above ends its backward: %s has no say there",
                    sim_schema_key(group_schedule[i].id)->key);
  }
  if (p->module_groups && p->dedup)
    return fail(error, g, entry_of(g, SIM_KEY_POLICY_DEDUP),
                "megatron copies every saved reference of its groups (no storage table): dedup = true has no "
                "schedule there");
  if (p->min_elements && w && !sim_workload_elements_known(w)) {
    if ((e = entry_of(g, SIM_KEY_POLICY_MIN_ELEMENTS)))
      return fail(error, g, e, "counts elements, and explicit [model] layers have no element type (use min_tensor)");
    return fail(error, g, entry_of(g, SIM_KEY_POLICY_FRAMEWORK),
                "%s keeps tensors of fewer than %" G_GUINT64_FORMAT " elements (min_elements), and explicit [model] "
                "layers have no element type (set min_elements = 0, or use a [transformer] or a recorded [trace])",
                fw, (guint64)p->min_elements);
  }
  if (p->module_groups && w && !workload_has_layer_ops(w))
    return fail(error, g, entry_of(g, SIM_KEY_POLICY_OFFLOAD_MODULES) ? entry_of(g, SIM_KEY_POLICY_OFFLOAD_MODULES)
                                                                      : entry_of(g, SIM_KEY_POLICY_FRAMEWORK),
                "megatron offloads by module, which needs layers described op by op ([transformer]), not "
                "explicit [model] layers or a recording");
  return TRUE;
}

/* `offload_modules` (framework = megatron): the modules whose saved
 * tensors Megatron offloads, as TransformerConfig checks them
 * (megatron/core/transformer/transformer_config.py l. 2127-2153: a
 * non-empty list of its names, attn_proj only with core_attn). */
static gboolean
get_offload_modules(const SimConfigGroup *g, SimPolicy *p, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, sim_schema_key(SIM_KEY_POLICY_OFFLOAD_MODULES)->key);
  if (e == NULL)
    return TRUE;
  if (p->framework != SIM_FRAMEWORK_MEGATRON)
    return fail(error, g, e, "is Megatron's option (framework = megatron)");
  static const char *const unmodelled[] = { "fused_group_mlp", "gdp_qkv", NULL };
  g_auto(GStrv) items = g_strsplit(e->value, ",", -1);
  guint names = 0;
  for (guint i = 0; items[i]; i++) {
    g_strstrip(items[i]);
    if (*items[i] == '\0' && items[1] == NULL)
      break;
    if (g_strv_contains(unmodelled, items[i]))
      return fail(error, g, e, "%s offloads TransformerEngine's fused grouped MLP (use_transformer_engine_op_fuser) "
                  "or a GatedDeltaProduct mixer, which offsim's layers do not have (expected expert_fc1 and "
                  "moe_act for an MoE layer's experts)", items[i]);
    guint k;
    for (k = 0; sim_framework_megatron_modules[k] && strcmp(sim_framework_megatron_modules[k], items[i]) != 0; k++)
      ;
    if (sim_framework_megatron_modules[k] == NULL)
      return fail_got(error, g, e, items[i], "expected %s", sim_schema_key(SIM_KEY_POLICY_OFFLOAD_MODULES)->expect);
    names |= 1u << k;
  }
  if (names == 0)
    return fail(error, g, e, "Megatron offloads at least one module (an empty list is refused)");
  if ((names & (1u << 3)) && !(names & (1u << 2)))
    return fail(error, g, e, "attn_proj needs core_attn: attn_proj's input is core_attn's output, which "
                "core_attn's backward needs too (Megatron refuses attn_proj alone)");
  p->hooked = sim_framework_megatron_hooked(names);
  return TRUE;
}

/* `framework = NAME`: the preset first, then every key given beside it. */
static gboolean
apply_framework(const SimConfigGroup *g, SimPolicy *p, GError **error)
{
  guint framework = SIM_FRAMEWORK_NONE, version = SIM_VERSION_RELEASE;
  gboolean pin = FALSE;
  if (!get(g, SIM_KEY_POLICY_FRAMEWORK, &framework, error) || !get(g, SIM_KEY_POLICY_PIN_MEMORY, &pin, error) ||
      !get(g, SIM_KEY_POLICY_VERSION, &version, error))
    return FALSE;
  p->version = (SimVersion)version;
  sim_framework_preset(p, (SimFramework)framework);
  if (!get_offload_modules(g, p, error))
    return FALSE;
  /* save_on_cpu(pin_memory=True): torch.empty(pin_memory=True) per tensor, the caching host allocator. */
  if (pin)
    p->pinned = SIM_PINNED_CACHING;
  return TRUE;
}

/* `w` is the workload, NULL for the default set (any model, any pipeline). */
static gboolean
load_policy(const SimConfigGroup *g, guint n_layers, guint n_stages, const SimWorkload *w, SimPolicy **out,
            GError **error)
{
  const char *name = g->name + strlen("policy.");
  guint kind = 0;

  if (*name == '\0') {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [%s]: expected [policy.NAME] with a name", g->file, g->name);
    return FALSE;
  }
  if (!check_keys(g, SIM_GROUP_POLICY, error) || !require(NULL, g->name, g, SIM_KEY_POLICY_KIND, error) ||
      !get(g, SIM_KEY_POLICY_KIND, &kind, error) || !check_kind_keys(g, (SimPolicyKind)kind, error))
    return FALSE;
  if (kind == SIM_POLICY_PLAN && !require(NULL, g->name, g, SIM_KEY_POLICY_ACTIONS, error))
    return FALSE;

  g_autofree char *model = g_strdup_printf("the model has %u layers", n_layers);
  g_autofree char *pipeline = g_strdup_printf("pp = %u", n_stages);
  const IndexSet layers = { SIM_KEY_POLICY_LAYERS, "layer", model };
  const IndexSet stages = { SIM_KEY_POLICY_STAGES, "stage", pipeline };
  g_autoptr(SimPolicy) p = sim_policy_new(name, (SimPolicyKind)kind);
  if (!apply_framework(g, p, error) || !read_fields(g, SIM_GROUP_POLICY, kind, p, error) ||
      !get_index_set(g, &layers, n_layers, &p->selected, error) ||
      !get_index_set(g, &stages, n_stages, &p->stages, error) || !get_actions(g, n_layers, &p->actions, error))
    return FALSE;
  /* A preset decides what the mode would. */
  if (p->framework == SIM_FRAMEWORK_NONE)
    derive_mode_defaults(g, p);
  if (!check_schedule(g, p, w, error))
    return FALSE;
  /* Beyond the model it means every layer; clamped, layer + keep_last cannot wrap. */
  p->keep_last = MIN(p->keep_last, n_layers);
  *out = g_steal_pointer(&p);
  return TRUE;
}

/* The groups a scenario may have, by name; layer.N and policy.NAME are checked where they are loaded. */
static gboolean
check_groups(const SimConfig *c, GError **error)
{
  static const SimSchemaGroup plain[] = { SIM_GROUP_SCENARIO, SIM_GROUP_DEVICE,      SIM_GROUP_LINK,
                                          SIM_GROUP_MODEL,    SIM_GROUP_TRANSFORMER, SIM_GROUP_TRACE,
                                          SIM_GROUP_PARALLEL, SIM_GROUP_NODE,        SIM_GROUP_NETWORK };
  for (guint i = 0; i < c->groups->len; i++) {
    const SimConfigGroup *g = g_ptr_array_index(c->groups, i);
    guint j;
    for (j = 0; j < G_N_ELEMENTS(plain) && strcmp(g->name, sim_schema_group_name(plain[j])) != 0; j++)
      ;
    if (j < G_N_ELEMENTS(plain)) {
      if (!check_keys(g, plain[j], error))
        return FALSE;
      continue;
    }
    if (g_str_has_prefix(g->name, "layer.") || g_str_has_prefix(g->name, "policy."))
      continue;
    if (strcmp(g->name, "calibration") == 0)
      continue; /* offsim-calib's metadata and raw samples: kept for people, not read */
    g_autofree char *group = sim_error_quote(g->name);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: [%s]: unknown group (expected scenario, device, link, model, transformer, trace, parallel, node, network, "
                "layer.N, policy.NAME or calibration)",
                g->file, group);
    return FALSE;
  }
  return TRUE;
}

/* Every [policy.NAME] of `c`, in file order, appended to `policies`. */
static gboolean
load_policies(const SimConfig *c, guint n_layers, guint n_stages, const SimWorkload *w, GPtrArray *policies,
              GError **error)
{
  for (guint i = 0; i < c->groups->len; i++) {
    const SimConfigGroup *g = g_ptr_array_index(c->groups, i);
    SimPolicy *p = NULL;
    if (!g_str_has_prefix(g->name, "policy."))
      continue;
    if (!load_policy(g, n_layers, n_stages, w, &p, error))
      return FALSE;
    g_ptr_array_add(policies, p);
  }
  return TRUE;
}

/* The policies of a scenario that names none, written as a scenario would
 * write them so that their defaults are the schema's.  Parsed once per
 * process (the sweep loads a scenario per point) and never freed. */
static const SimConfig *
default_policies(void)
{
  static const char text[] = "[policy.resident]\nkind = resident\n"
                             "[policy.offload-sync]\nkind = offload\nmode = sync\n"
                             "[policy.offload-async]\nkind = offload\n"
                             "[policy.checkpoint-full]\nkind = checkpoint\n";
  static gsize parsed = 0;
  if (g_once_init_enter(&parsed)) {
    SimConfig *c = sim_config_load_data(text, "(default policies)", NULL, NULL);
    g_assert(c != NULL);
    g_once_init_leave(&parsed, (gsize)c);
  }
  return (const SimConfig *)parsed;
}

GPtrArray *
sim_scenario_default_policies(void)
{
  GPtrArray *set = g_ptr_array_new_with_free_func((GDestroyNotify)sim_policy_free);
  /* None of them names layers or stages, so they hold for any model and pipeline. */
  gboolean ok = load_policies(default_policies(), G_MAXUINT, G_MAXUINT, NULL, set, NULL);
  g_assert(ok);
  return set;
}

static gboolean
names_policies(const SimConfig *c)
{
  for (guint i = 0; i < c->groups->len; i++)
    if (g_str_has_prefix(((const SimConfigGroup *)g_ptr_array_index(c->groups, i))->name, "policy."))
      return TRUE;
  return FALSE;
}

void
sim_scenario_config_set(SimConfig *c, const char *group, const char *key, const char *value, const char *origin)
{
  const SimConfig *defaults = default_policies();
  if (sim_config_group(defaults, group) && !names_policies(c))
    for (guint i = 0; i < defaults->groups->len; i++) {
      const SimConfigGroup *g = g_ptr_array_index(defaults->groups, i);
      for (guint k = 0; k < g->entries->len; k++) {
        const SimConfigEntry *e = g_ptr_array_index(g->entries, k);
        sim_config_set(c, g->name, e->key, e->value, e->file);
      }
    }
  sim_config_set(c, group, key, value, origin);
}

SimScenario *
sim_scenario_from_config(const SimConfig *c, GError **error)
{
  g_autoptr(SimScenario) s = g_new0(SimScenario, 1);
  s->origin = g_strdup(c->top);
  s->policies = g_ptr_array_new_with_free_func((GDestroyNotify)sim_policy_free);
  sim_scenario_parallel_defaults(&s->parallel);

  if (!check_groups(c, error))
    return NULL;
  SimConfigEntry *name = sim_config_lookup(sim_config_group(c, "scenario"), "name");
  if (name) {
    s->name = g_strstrip(g_strdup(name->value));
  } else {
    g_autofree char *base = g_path_get_basename(c->top);
    char *dot = strrchr(base, '.');
    if (dot && dot != base)
      *dot = '\0';
    s->name = g_steal_pointer(&base);
  }
  if (!load_parallel(c, &s->parallel, error) || !load_machine(c, &s->parallel, &s->machine, error))
    return NULL;
  /* One workload source: [model], [transformer] or [trace]. */
  const SimConfigGroup *transformer = sim_config_group(c, "transformer");
  const SimConfigGroup *trace = sim_config_group(c, "trace");
  const SimConfigGroup *model = sim_config_group(c, "model");
  const SimConfigGroup *second = transformer && (trace || model) ? (trace ? trace : model) : trace && model ? model : NULL;
  if (second) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: [%s]: a scenario has one of [model], [transformer] or [trace], not both", second->file,
                second->name);
    return NULL;
  }
  gboolean loaded = transformer ? load_transformer(c, &s->machine, &s->parallel, s->name, &s->workload, error)
                    : trace     ? load_trace(c, &s->machine, s->name, &s->workload, error)
                                : load_workload(c, s->name, &s->workload, error);
  if (!loaded)
    return NULL;
  if (!sim_workload_bytes_fit(s->workload)) {
    const SimConfigGroup *source = transformer ? transformer : trace ? trace : model;
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: [%s]: the model's memory (static, inputs, workspace and every saved reference) adds up to more "
                "than 4 EiB", source->file, source->name);
    return NULL;
  }
  guint n_layers = sim_workload_n_layers(s->workload);
  if (!check_parallel_layers(c, &s->parallel, s->workload, error) ||
      !load_policies(c, n_layers, s->parallel.pp, s->workload, s->policies, error))
    return NULL;
  if (s->policies->len == 0) {
    g_ptr_array_unref(s->policies);
    s->policies = sim_scenario_default_policies();
  }
  return g_steal_pointer(&s);
}

SimScenario *
sim_scenario_load_file(const char *path, GError **error)
{
  g_autoptr(SimConfig) c = sim_config_load_file(path, error);
  return c ? sim_scenario_from_config(c, error) : NULL;
}

SimScenario *
sim_scenario_load_data(const char *data, const char *origin, GError **error)
{
  g_autoptr(SimConfig) c = sim_config_load_data(data, origin, NULL, error);
  return c ? sim_scenario_from_config(c, error) : NULL;
}

SimScenario *
sim_scenario_load_default(GError **error)
{
  return sim_scenario_load_data(sim_scenario_default_text(), "(embedded default)", error);
}

void
sim_scenario_free(SimScenario *s)
{
  if (s == NULL)
    return;
  g_free(s->name);
  g_free(s->origin);
  sim_workload_free(s->workload);
  if (s->policies)
    g_ptr_array_unref(s->policies);
  sim_parallel_clear(&s->parallel);
  g_free(s);
}

const SimPolicy *
sim_scenario_policy(const SimScenario *s, const char *name)
{
  for (guint i = 0; i < s->policies->len; i++) {
    const SimPolicy *p = g_ptr_array_index(s->policies, i);
    if (strcmp(p->name, name) == 0)
      return p;
  }
  return NULL;
}
