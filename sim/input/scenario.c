#include "scenario.h"

#include "config.h"
#include "error.h"
#include "hf_config.h"
#include "trace.h"
#include "transformer.h"
#include "units.h"

#include <math.h>
#include <string.h>

/* ---- the schema: every group's keys, with what each expects ------------ */

typedef struct {
  const char *key;
  const char *expect; /* for "missing" and "unknown key" messages */
} KeySpec;

static const KeySpec scenario_keys[] = {
  { "name", "a scenario name" },
  { "description", "free text" },
  { NULL, NULL },
};

static const KeySpec device_keys[] = {
  { "memory", "a size such as 80GiB" },
  { "matmul_tflops", "a positive number of TFLOP/s such as 790" },
  { "efficiency", "a number in (0, 1]" },
  { "hbm_bandwidth", "a rate such as 3.35TB/s" },
  { NULL, NULL },
};

static const KeySpec link_keys[] = {
  { "h2d_bandwidth", "a rate such as 55GB/s" },
  { "d2h_bandwidth", "a rate such as 55GB/s" },
  { "bidir_bandwidth", "a rate such as 100GB/s" },
  { "latency", "a time such as 8us" },
  { "pageable_factor", "a number in (0, 1]" },
  { "compute_slowdown", "a number in [0, 1)" },
  { "host_alloc", "a time such as 3ms" },
  { "h2d_table", "measured SIZE:RATE points in increasing size, such as 4KiB:1.9GB/s, 1MiB:40GB/s" },
  { "d2h_table", "measured SIZE:RATE points in increasing size, such as 4KiB:1.9GB/s, 1MiB:40GB/s" },
  { NULL, NULL },
};

static const KeySpec model_keys[] = {
  { "layers", "a layer count such as 24" },
  { "forward", "a time such as 2ms" },
  { "backward", "a time such as 4ms" },
  { "input", "a size such as 8MiB" },
  { "tensors", "a list such as attn:24MiB, mlp:32MiB, mask:1MiB:keep" },
  { "static", "a size such as 1GiB" },
  { "workspace", "a size such as 64MiB" },
  { NULL, NULL },
};

static const KeySpec transformer_keys[] = {
  { "hf_config", "the path of a HuggingFace config.json" },
  { "hidden", "a whole number such as 896" },
  { "layers", "a layer count such as 24" },
  { "heads", "a whole number such as 14" },
  { "kv_heads", "a whole number dividing heads" },
  { "head_dim", "a whole number such as 64" },
  { "ffn", "a whole number such as 4864" },
  { "vocab", "a whole number such as 151936" },
  { "positions", "a whole number (learned position embeddings)" },
  { "batch", "a whole number such as 2" },
  { "seq", "a whole number such as 512" },
  { "dtype", "fp32, bf16 or fp16" },
  { "norm", "rmsnorm or layernorm" },
  { "mlp", "swiglu or gelu" },
  { "attention", "eager or flash" },
  { "dropout", "a probability in [0, 1)" },
  { "tied_embeddings", "true or false" },
  { "qkv_bias", "true or false" },
  { "linear_bias", "true or false" },
  { "tp", "a tensor-parallel degree such as 8" },
  { "sp", "true or false" },
  { "optimizer", "adamw or none" },
  { "master_weights", "true or false" },
  { NULL, NULL },
};

static const KeySpec trace_keys[] = {
  { "file", "the path of a CSV from gpu_calib/record_saved_tensors.py" },
  { "forward", "a time such as 2ms (per layer)" },
  { "backward", "a time such as 4ms (per layer)" },
  { "workspace", "a size such as 64MiB" },
  { "static", "a size such as 1GiB" },
  { NULL, NULL },
};

/* [layer.N] overrides the per-layer keys of [model]. */
static const KeySpec layer_keys[] = {
  { "forward", "a time such as 2ms" },
  { "backward", "a time such as 4ms" },
  { "input", "a size such as 8MiB" },
  { "tensors", "a list such as attn:24MiB, mlp:32MiB, mask:1MiB:keep" },
  { "workspace", "a size such as 64MiB" },
  { NULL, NULL },
};

static const KeySpec policy_keys[] = {
  { "kind", "resident, offload, checkpoint or plan" },
  { "mode", "sync or async (offload, plan); full or selective (checkpoint)" },
  { "prefetch", "a layer count such as 1" },
  { "inflight", "a group count of at least 1" },
  { "layers", "all, none, first:N, last:N or indices such as 0-21 or 0,2,5" },
  { "keep_last", "a layer count such as 1" },
  { "min_tensor", "a size such as 1MiB" },
  { "pinned", "pooled, per-tensor or none" },
  { "every", "a layer stride of at least 1" },
  { "actions", "one of keep, offload, recompute, selective, selective+offload per layer" },
  { "dedup", "true or false" },
  { NULL, NULL },
};

/* Which policy keys each kind takes. */
static const char *const policy_kind_keys[][10] = {
  [SIM_POLICY_RESIDENT] = { NULL },
  [SIM_POLICY_OFFLOAD] = { "mode", "prefetch", "inflight", "layers", "keep_last", "min_tensor", "pinned", "dedup",
                           NULL },
  [SIM_POLICY_CHECKPOINT] = { "mode", "layers", "every", NULL },
  [SIM_POLICY_PLAN] = { "actions", "mode", "prefetch", "inflight", "min_tensor", "pinned", "dedup", NULL },
};

/* ---- errors that name the place ---------------------------------------- */

/* Rewrites a value error as "file: [group] key: message". */
static gboolean
fail_at(GError **error, const SimConfigGroup *g, const SimConfigEntry *e, GError *cause)
{
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [%s] %s: %s", e->file, g->name, e->key, cause->message);
  g_error_free(cause);
  return FALSE;
}

G_GNUC_PRINTF(4, 5)
static gboolean
fail(GError **error, const SimConfigGroup *g, const SimConfigEntry *e, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *msg = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [%s] %s: %s", e->file, g->name, e->key, msg);
  return FALSE;
}

static const KeySpec *
find_spec(const KeySpec *specs, const char *key)
{
  for (const KeySpec *s = specs; s->key; s++)
    if (strcmp(s->key, key) == 0)
      return s;
  return NULL;
}

static gboolean
check_keys(const SimConfigGroup *g, const KeySpec *specs, GError **error)
{
  for (guint i = 0; i < g->entries->len; i++) {
    const SimConfigEntry *e = g_ptr_array_index(g->entries, i);
    if (find_spec(specs, e->key))
      continue;
    g_autoptr(GString) known = g_string_new(NULL);
    for (const KeySpec *s = specs; s->key; s++)
      g_string_append_printf(known, "%s%s", known->len ? ", " : "", s->key);
    return fail(error, g, e, "unknown key (expected one of %s)", known->str);
  }
  return TRUE;
}

static gboolean
require(const char *top, const char *group_name, const SimConfigGroup *g, const KeySpec *specs, const char *key,
        GError **error)
{
  if (sim_config_lookup(g, key))
    return TRUE;
  const KeySpec *spec = find_spec(specs, key);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [%s] %s: missing required key (expected %s)",
              g ? g->file : top, group_name, key, spec->expect);
  return FALSE;
}

/* ---- typed getters: absent keys leave *out untouched -------------------- */

static gboolean
get_size(const SimConfigGroup *g, const char *key, guint64 *out, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, key);
  GError *cause = NULL;
  if (e && !sim_units_parse_size(e->value, out, &cause))
    return fail_at(error, g, e, cause);
  return TRUE;
}

static gboolean
get_time(const SimConfigGroup *g, const char *key, double *out, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, key);
  GError *cause = NULL;
  if (e && !sim_units_parse_time(e->value, out, &cause))
    return fail_at(error, g, e, cause);
  return TRUE;
}

static gboolean
get_rate(const SimConfigGroup *g, const char *key, double *out, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, key);
  GError *cause = NULL;
  if (e && !sim_units_parse_rate(e->value, out, &cause))
    return fail_at(error, g, e, cause);
  return TRUE;
}

/* A plain decimal in [lo, hi], with lo or hi excluded as asked. */
static gboolean
get_number(const SimConfigGroup *g, const char *key, double lo, gboolean lo_open, double hi, gboolean hi_open,
           double *out, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, key);
  if (e == NULL)
    return TRUE;
  const char *s = e->value;
  char *end = NULL;
  gboolean plain = *s != '\0' && strspn(s, "0123456789.") == strlen(s) && strchr(s, '.') == strrchr(s, '.');
  double v = plain ? g_ascii_strtod(s, &end) : NAN;
  if (!plain || end == s || *end != '\0' || !isfinite(v) || (lo_open ? v <= lo : v < lo) ||
      (hi_open ? v >= hi : v > hi)) {
    return fail(error, g, e, "expected a number in %c%g, %g%c, got '%s'", lo_open ? '(' : '[', lo, hi,
                hi_open ? ')' : ']', s);
  }
  *out = v;
  return TRUE;
}

static gboolean
parse_uint(const char *s, guint64 lo, guint64 hi, guint64 *out)
{
  g_autofree char *trimmed = g_strstrip(g_strdup(s));
  return g_ascii_string_to_unsigned(trimmed, 10, lo, hi, out, NULL);
}

static gboolean
get_uint(const SimConfigGroup *g, const char *key, guint64 lo, guint64 hi, guint *out, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, key);
  guint64 v;
  if (e == NULL)
    return TRUE;
  if (!parse_uint(e->value, lo, hi, &v))
    return fail(error, g, e, "expected a whole number from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT
                ", got '%s'", lo, hi, e->value);
  *out = (guint)v;
  return TRUE;
}

/* One of `names` (NULL-terminated); *out is its index. */
static gboolean
get_enum(const SimConfigGroup *g, const char *key, const char *const *names, guint *out, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, key);
  if (e == NULL)
    return TRUE;
  g_autofree char *value = g_strstrip(g_strdup(e->value));
  g_autoptr(GString) choices = g_string_new(NULL);
  for (guint i = 0; names[i]; i++) {
    if (strcmp(names[i], value) == 0) {
      *out = i;
      return TRUE;
    }
    g_string_append_printf(choices, "%s%s", i ? ", " : "", names[i]);
  }
  return fail(error, g, e, "expected one of %s, got '%s'", choices->str, e->value);
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
    if (!sim_units_parse_time(flag + strlen("recompute="), &t->recompute, error))
      return FALSE;
    t->selective = TRUE;
    return TRUE;
  }
  if (g_str_has_prefix(flag, "refs=") && parse_uint(flag + strlen("refs="), 1, 1000, &refs)) {
    t->refs = (guint)refs;
    return TRUE;
  }
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected a flag keep, recompute=TIME or refs=N (1-1000), got '%s'",
              flag);
  return FALSE;
}

/* "attn:24MiB, mlp:32MiB, mask:1MiB:keep, scores:40MiB:recompute=0.2ms" */
static gboolean
get_tensors(const SimConfigGroup *g, const char *key, GArray **out, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, key);
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
      return fail(error, g, e, "expected name:size items separated by commas, got an empty item in '%s'",
                  e->value);
    }
    g_auto(GStrv) parts = g_strsplit(*item, ":", -1);
    if (g_strv_length(parts) < 2)
      return fail(error, g, e, "expected name:size[:flag...], got '%s'", *item);
    g_strstrip(parts[0]);
    if (*parts[0] == '\0')
      return fail(error, g, e, "a tensor needs a name, got '%s'", *item);
    SimTensor t = { .name = g_intern_string(parts[0]), .offloadable = TRUE, .refs = 1 };
    g_array_append_val(tensors, t);
    SimTensor *added = &g_array_index(tensors, SimTensor, tensors->len - 1);
    GError *cause = NULL;
    gboolean ok = sim_units_parse_size(parts[1], &added->bytes, &cause);
    for (char **flag = parts + 2; ok && *flag; flag++)
      ok = parse_tensor_flag(added, g_strstrip(*flag), &cause);
    if (!ok) {
      g_autofree char *msg = g_strdup_printf("tensor '%s': %s", parts[0], cause->message);
      g_error_free(cause);
      return fail(error, g, e, "%s", msg);
    }
    if (!g_hash_table_add(seen, (gpointer)added->name))
      return fail(error, g, e, "tensor '%s' is listed twice", parts[0]);
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
get_table(const SimConfigGroup *g, const char *key, SimBandwidthPoint *points, guint *n_points, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, key);
  if (e == NULL)
    return TRUE;
  g_auto(GStrv) items = g_strsplit(e->value, ",", -1);
  guint n = 0;
  for (char **item = items; *item; item++) {
    g_auto(GStrv) parts = g_strsplit(*item, ":", -1);
    GError *cause = NULL;
    if (g_strv_length(parts) != 2)
      return fail(error, g, e, "expected SIZE:RATE items, got '%s'", g_strstrip(*item));
    if (n == SIM_LINK_MAX_POINTS)
      return fail(error, g, e, "at most %d points", SIM_LINK_MAX_POINTS);
    if (!sim_units_parse_size(parts[0], &points[n].bytes, &cause) ||
        !sim_units_parse_rate(parts[1], &points[n].bandwidth, &cause)) {
      g_autofree char *msg = g_strdup_printf("point %u: %s", n + 1, cause->message);
      g_error_free(cause);
      return fail(error, g, e, "%s", msg);
    }
    if (points[n].bytes == 0 || (n > 0 && points[n].bytes <= points[n - 1].bytes))
      return fail(error, g, e, "point %u: sizes must be positive and increasing", n + 1);
    n++;
  }
  *n_points = n;
  return TRUE;
}

/* "all", "none", "first:N", "last:N", or indices and ranges "0-3,7". */
static gboolean
get_layer_set(const SimConfigGroup *g, const char *key, guint n_layers, GArray **out, GError **error)
{
  SimConfigEntry *e = sim_config_lookup(g, key);
  if (e == NULL)
    return TRUE;
  g_autoptr(GArray) set = g_array_sized_new(FALSE, TRUE, sizeof(gboolean), n_layers);
  g_array_set_size(set, n_layers);
  g_autofree char *value = g_strstrip(g_strdup(e->value));
  guint64 a, b;

  if (*value == '\0')
    return fail(error, g, e, "expected %s, got nothing", find_spec(policy_keys, "layers")->expect);
  if (strcmp(value, "all") == 0 || strcmp(value, "none") == 0) {
    for (guint i = 0; i < n_layers; i++)
      g_array_index(set, gboolean, i) = value[0] == 'a';
  } else if (g_str_has_prefix(value, "first:") || g_str_has_prefix(value, "last:")) {
    gboolean first = value[0] == 'f';
    if (!parse_uint(strchr(value, ':') + 1, 0, n_layers, &a))
      return fail(error, g, e, "expected %s:N with N from 0 to %u, got '%s'", first ? "first" : "last", n_layers,
                  e->value);
    for (guint i = 0; i < n_layers; i++)
      g_array_index(set, gboolean, i) = first ? i < a : i + a >= n_layers;
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
        return fail(error, g, e, "expected %s, got '%s'", find_spec(policy_keys, "layers")->expect, *item);
      if (b >= n_layers)
        return fail(error, g, e, "layer %" G_GUINT64_FORMAT " is out of range (the model has %u layers, 0-%u)", b,
                    n_layers, n_layers - 1);
      for (guint64 i = a; i <= b; i++)
        g_array_index(set, gboolean, i) = TRUE;
    }
  }
  *out = g_steal_pointer(&set);
  return TRUE;
}

static gboolean
get_actions(const SimConfigGroup *g, const char *key, guint n_layers, GArray **out, GError **error)
{
  static const char *const names[] = { "keep", "offload", "recompute", "selective", "selective+offload", NULL };
  SimConfigEntry *e = sim_config_lookup(g, key);
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
      return fail(error, g, e, "layer %u: expected keep, offload, recompute, selective or selective+offload, got '%s'",
                  i, items[i]);
    SimAction action = (SimAction)a;
    g_array_append_val(actions, action);
  }
  *out = g_steal_pointer(&actions);
  return TRUE;
}

/* ---- groups ------------------------------------------------------------- */

static gboolean
load_machine(const SimConfig *c, SimMachine *m, GError **error)
{
  const SimConfigGroup *dev = sim_config_group(c, "device");
  const SimConfigGroup *link = sim_config_group(c, "link");
  double tflops = 0;

  sim_machine_defaults(m);
  if (!require(c->top, "device", dev, device_keys, "memory", error) || !get_size(dev, "memory", &m->device.memory, error) ||
      !get_number(dev, "matmul_tflops", 0, TRUE, 1e9, FALSE, &tflops, error) ||
      !get_number(dev, "efficiency", 0, TRUE, 1, FALSE, &m->device.efficiency, error) ||
      !get_rate(dev, "hbm_bandwidth", &m->device.hbm_bandwidth, error))
    return FALSE;
  m->device.matmul_flops = tflops * 1e12;

  SimLink *l = &m->link;
  if (!require(c->top, "link", link, link_keys, "h2d_bandwidth", error) ||
      !require(c->top, "link", link, link_keys, "d2h_bandwidth", error) ||
      !get_rate(link, "h2d_bandwidth", &l->h2d_bandwidth, error) ||
      !get_rate(link, "d2h_bandwidth", &l->d2h_bandwidth, error) ||
      !get_rate(link, "bidir_bandwidth", &l->bidir_bandwidth, error) ||
      !get_time(link, "latency", &l->latency, error) ||
      !get_number(link, "pageable_factor", 0, TRUE, 1, FALSE, &l->pageable_factor, error) ||
      !get_number(link, "compute_slowdown", 0, FALSE, 1, TRUE, &l->compute_slowdown, error) ||
      !get_time(link, "host_alloc", &l->host_alloc, error) ||
      !get_table(link, "d2h_table", l->table[0], &l->table_points[0], error) ||
      !get_table(link, "h2d_table", l->table[1], &l->table_points[1], error))
    return FALSE;
  if (l->bidir_bandwidth == 0)
    l->bidir_bandwidth = l->h2d_bandwidth + l->d2h_bandwidth;
  return TRUE;
}

/* The per-layer keys shared by [model] and [layer.N], applied to one layer. */
typedef struct {
  double forward, backward;
  gboolean has_backward;
  guint64 input, workspace;
  GArray *tensors;
} LayerKeys;

static gboolean
get_layer_keys(const SimConfigGroup *g, LayerKeys *k, GError **error)
{
  GArray *tensors = NULL;
  if (!get_time(g, "forward", &k->forward, error) || !get_time(g, "backward", &k->backward, error) ||
      !get_size(g, "input", &k->input, error) || !get_size(g, "workspace", &k->workspace, error) ||
      !get_tensors(g, "tensors", &tensors, error))
    return FALSE;
  if (sim_config_lookup(g, "backward"))
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
    if (canonical == NULL || strcmp(canonical, g->name + 6) != 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: [%s]: expected [layer.N] with N a layer index such as 0 or 17", g->file, g->name);
      return NULL;
    }
    if (index >= n_layers) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: [%s]: layer %" G_GUINT64_FORMAT " is out of range (the model has %u layers, 0-%u)", g->file,
                  g->name, index, n_layers, n_layers - 1);
      return NULL;
    }
    if (!check_keys(g, layer_keys, error))
      return NULL;
    g_ptr_array_index(overrides, index) = (gpointer)g;
  }
  return g_steal_pointer(&overrides);
}

static gboolean
get_bool(const SimConfigGroup *g, const char *key, gboolean *out, GError **error)
{
  static const char *const names[] = { "false", "true", NULL };
  guint v = *out ? 1 : 0;
  if (!get_enum(g, key, names, &v, error))
    return FALSE;
  *out = v == 1;
  return TRUE;
}

/* [transformer]: hf_config first, then the keys, which override it. */
static gboolean
load_transformer(const SimConfig *c, const SimMachine *m, const char *name, SimWorkload **out, GError **error)
{
  static const char *const dtypes[] = { "fp32", "bf16", "fp16", NULL };
  static const guint dtype_bytes[] = { 4, 2, 2 };
  static const char *const norms[] = { "rmsnorm", "layernorm", NULL };
  static const char *const mlps[] = { "swiglu", "gelu", NULL };
  static const char *const attentions[] = { "eager", "flash", NULL };
  static const char *const optimizers[] = { "none", "adamw", NULL };
  const SimConfigGroup *g = sim_config_group(c, "transformer");
  SimTransformer t;
  sim_transformer_defaults(&t);

  SimConfigEntry *hf = sim_config_lookup(g, "hf_config");
  if (hf) {
    g_autofree char *dir = g_path_get_dirname(hf->file);
    g_autofree char *path = g_path_is_absolute(hf->value) ? g_strdup(hf->value)
                                                          : g_build_filename(dir, hf->value, NULL);
    GError *cause = NULL;
    if (!sim_hf_config_load(path, &t, &cause))
      return fail_at(error, g, hf, cause);
  } else {
    const char *shape[] = { "hidden", "layers", "heads", "ffn", "vocab" };
    for (guint i = 0; i < G_N_ELEMENTS(shape); i++)
      if (!require(c->top, "transformer", g, transformer_keys, shape[i], error))
        return FALSE;
  }
  if (!require(c->top, "transformer", g, transformer_keys, "batch", error) ||
      !require(c->top, "transformer", g, transformer_keys, "seq", error))
    return FALSE;

  guint dtype = 1, norm = t.layernorm, mlp = t.gelu, attention = t.flash, optimizer = 1, vocab = (guint)t.vocab;
  if (!get_uint(g, "hidden", 1, 1 << 20, &t.hidden, error) ||
      !get_uint(g, "layers", 1, SIM_SCENARIO_MAX_LAYERS, &t.layers, error) ||
      !get_uint(g, "heads", 1, 1 << 16, &t.heads, error) || !get_uint(g, "ffn", 1, 1 << 24, &t.ffn, error) ||
      !get_uint(g, "vocab", 1, 1 << 30, &vocab, error) || !get_uint(g, "positions", 0, 1 << 24, &t.max_positions, error) ||
      !get_uint(g, "batch", 1, 1 << 20, &t.batch, error) || !get_uint(g, "seq", 1, 1 << 24, &t.seq, error) ||
      !get_uint(g, "tp", 1, 1 << 16, &t.tp, error) || !get_enum(g, "dtype", dtypes, &dtype, error) ||
      !get_enum(g, "norm", norms, &norm, error) || !get_enum(g, "mlp", mlps, &mlp, error) ||
      !get_enum(g, "attention", attentions, &attention, error) ||
      !get_enum(g, "optimizer", optimizers, &optimizer, error) ||
      !get_number(g, "dropout", 0, FALSE, 1, TRUE, &t.dropout, error) ||
      !get_bool(g, "tied_embeddings", &t.tied_embeddings, error) || !get_bool(g, "qkv_bias", &t.qkv_bias, error) ||
      !get_bool(g, "linear_bias", &t.linear_bias, error) || !get_bool(g, "sp", &t.sp, error) ||
      !get_bool(g, "master_weights", &t.master_weights, error))
    return FALSE;
  t.vocab = vocab;
  /* kv_heads and head_dim follow heads and hidden unless given. */
  if (!hf || sim_config_lookup(g, "heads"))
    t.kv_heads = t.heads;
  if (!hf || sim_config_lookup(g, "hidden") || sim_config_lookup(g, "heads"))
    t.head_dim = t.hidden % t.heads == 0 ? t.hidden / t.heads : 0;
  if (!get_uint(g, "kv_heads", 1, 1 << 16, &t.kv_heads, error) ||
      !get_uint(g, "head_dim", 1, 1 << 16, &t.head_dim, error))
    return FALSE;
  if (t.head_dim == 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: [transformer] head_dim: heads (%u) does not divide hidden (%u); give head_dim", g->file, t.heads,
                t.hidden);
    return FALSE;
  }
  t.dtype = dtypes[dtype];
  t.dtype_bytes = dtype_bytes[dtype];
  t.layernorm = norm == 1;
  t.gelu = mlp == 1;
  t.flash = attention == 1;
  t.adamw = optimizer == 1;

  g_autoptr(GError) cause = NULL;
  *out = sim_transformer_build(&t, &m->device, name, &cause);
  if (*out == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [transformer] %s", g->file, cause->message);
    return FALSE;
  }
  return TRUE;
}

/* [trace]: a recording of what autograd saved, timed by the keys. */
static gboolean
load_trace(const SimConfig *c, const char *name, SimWorkload **out, GError **error)
{
  const SimConfigGroup *g = sim_config_group(c, "trace");
  double forward = 0, backward = 0;
  guint64 workspace = 0, static_bytes = 0;
  if (!require(c->top, "trace", g, trace_keys, "file", error) ||
      !require(c->top, "trace", g, trace_keys, "forward", error) || !get_time(g, "forward", &forward, error) ||
      !get_time(g, "backward", &backward, error) || !get_size(g, "workspace", &workspace, error) ||
      !get_size(g, "static", &static_bytes, error))
    return FALSE;
  SimConfigEntry *file = sim_config_lookup(g, "file");
  g_autofree char *dir = g_path_get_dirname(file->file);
  g_autofree char *path = g_path_is_absolute(file->value) ? g_strdup(file->value)
                                                          : g_build_filename(dir, file->value, NULL);
  GError *cause = NULL;
  g_autoptr(SimWorkload) w = sim_trace_load(path, name, &cause);
  if (w == NULL)
    return fail_at(error, g, file, cause);
  if (!sim_config_lookup(g, "backward"))
    backward = 2 * forward;
  for (guint i = 0; i < sim_workload_n_layers(w); i++) {
    SimLayer *layer = sim_workload_layer(w, i);
    layer->forward = forward;
    layer->backward = backward;
    layer->workspace_bytes = workspace;
  }
  w->static_bytes = static_bytes;
  *out = g_steal_pointer(&w);
  return TRUE;
}

static gboolean
load_workload(const SimConfig *c, const char *name, SimWorkload **out, GError **error)
{
  const SimConfigGroup *model = sim_config_group(c, "model");
  guint n_layers = 0;
  guint64 static_bytes = 0;
  LayerKeys defaults = { 0 };

  if (!require(c->top, "model", model, model_keys, "layers", error) ||
      !require(c->top, "model", model, model_keys, "forward", error) ||
      !require(c->top, "model", model, model_keys, "input", error) ||
      !require(c->top, "model", model, model_keys, "tensors", error) ||
      !get_uint(model, "layers", 1, SIM_SCENARIO_MAX_LAYERS, &n_layers, error) ||
      !get_size(model, "static", &static_bytes, error))
    return FALSE;
  gboolean ok = get_layer_keys(model, &defaults, error);
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
    ok = g == NULL || get_layer_keys(g, &k, error);
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
    layer->workspace_bytes = k.workspace;
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

static gboolean
load_policy(const SimConfigGroup *g, guint n_layers, SimPolicy **out, GError **error)
{
  static const char *const kinds[] = { "resident", "offload", "checkpoint", "plan", NULL };
  static const char *const modes[] = { "sync", "async", NULL };
  static const char *const checkpoint_modes[] = { "full", "selective", NULL };
  static const char *const booleans[] = { "false", "true", NULL };
  static const char *const pinned[] = { "pooled", "per-tensor", "none", NULL };
  const char *name = g->name + strlen("policy.");
  guint kind = 0, mode = 1, pin = SIM_PINNED_POOLED, checkpoint_mode = 0, dedup = 2;

  if (*name == '\0') {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [%s]: expected [policy.NAME] with a name", g->file, g->name);
    return FALSE;
  }
  if (!check_keys(g, policy_keys, error) || !require(NULL, g->name, g, policy_keys, "kind", error) ||
      !get_enum(g, "kind", kinds, &kind, error))
    return FALSE;
  /* Keys of other kinds are errors: a typo'd policy must not silently run as something else. */
  for (guint i = 0; i < g->entries->len; i++) {
    const SimConfigEntry *e = g_ptr_array_index(g->entries, i);
    if (strcmp(e->key, "kind") == 0 || g_strv_contains((const char *const *)policy_kind_keys[kind], e->key))
      continue;
    g_autofree char *known = g_strjoinv(", ", (char **)policy_kind_keys[kind]);
    return fail(error, g, e, "not an option of kind = %s (its options: %s)", kinds[kind],
                *known ? known : "none");
  }
  if (kind == SIM_POLICY_PLAN && !require(NULL, g->name, g, policy_keys, "actions", error))
    return FALSE;

  g_autoptr(SimPolicy) p = sim_policy_new(name, (SimPolicyKind)kind);
  if (kind == SIM_POLICY_CHECKPOINT) {
    if (!get_enum(g, "mode", checkpoint_modes, &checkpoint_mode, error))
      return FALSE;
  } else if (!get_enum(g, "mode", modes, &mode, error)) {
    return FALSE;
  }
  if (!get_enum(g, "pinned", pinned, &pin, error) || !get_enum(g, "dedup", booleans, &dedup, error) ||
      !get_uint(g, "prefetch", 0, G_MAXUINT32, &p->prefetch, error) ||
      !get_uint(g, "inflight", 1, G_MAXUINT32, &p->inflight, error) ||
      !get_uint(g, "every", 1, G_MAXUINT32, &p->every, error) ||
      !get_size(g, "min_tensor", &p->min_tensor, error) ||
      !get_layer_set(g, "layers", n_layers, &p->selected, error) ||
      !get_actions(g, "actions", n_layers, &p->actions, error))
    return FALSE;
  p->async = mode == 1;
  p->selective = checkpoint_mode == 1;
  p->pinned = (SimPinned)pin;
  /* PyTorch's save_on_cpu offloads every layer and packs every reference;
   * verl never offloads the last layer and copies each storage once. */
  p->keep_last = p->async ? 1 : 0;
  p->dedup = dedup == 2 ? p->async : dedup == 1;
  if (!get_uint(g, "keep_last", 0, G_MAXUINT32, &p->keep_last, error))
    return FALSE;
  /* Beyond the model it means every layer; clamped, layer + keep_last cannot wrap. */
  p->keep_last = MIN(p->keep_last, n_layers);
  *out = g_steal_pointer(&p);
  return TRUE;
}

static gboolean
check_groups(const SimConfig *c, GError **error)
{
  for (guint i = 0; i < c->groups->len; i++) {
    const SimConfigGroup *g = g_ptr_array_index(c->groups, i);
    const KeySpec *specs = NULL;
    if (strcmp(g->name, "scenario") == 0)
      specs = scenario_keys;
    else if (strcmp(g->name, "device") == 0)
      specs = device_keys;
    else if (strcmp(g->name, "link") == 0)
      specs = link_keys;
    else if (strcmp(g->name, "model") == 0)
      specs = model_keys;
    else if (strcmp(g->name, "transformer") == 0)
      specs = transformer_keys;
    else if (strcmp(g->name, "trace") == 0)
      specs = trace_keys;
    else if (g_str_has_prefix(g->name, "layer.") || g_str_has_prefix(g->name, "policy."))
      continue; /* checked where they are loaded */
    else if (strcmp(g->name, "calibration") == 0)
      continue; /* offsim-calib's metadata and raw samples: kept for people, not read */
    else {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: [%s]: unknown group (expected scenario, device, link, model, transformer, trace, layer.N, policy.NAME or calibration)",
                  g->file, g->name);
      return FALSE;
    }
    if (!check_keys(g, specs, error))
      return FALSE;
  }
  return TRUE;
}

SimScenario *
sim_scenario_from_config(const SimConfig *c, GError **error)
{
  g_autoptr(SimScenario) s = g_new0(SimScenario, 1);
  s->origin = g_strdup(c->top);
  s->policies = g_ptr_array_new_with_free_func((GDestroyNotify)sim_policy_free);

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
  if (!load_machine(c, &s->machine, error))
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
  gboolean loaded = transformer ? load_transformer(c, &s->machine, s->name, &s->workload, error)
                    : trace     ? load_trace(c, s->name, &s->workload, error)
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
  for (guint i = 0; i < c->groups->len; i++) {
    const SimConfigGroup *g = g_ptr_array_index(c->groups, i);
    SimPolicy *p = NULL;
    if (!g_str_has_prefix(g->name, "policy."))
      continue;
    if (!load_policy(g, sim_workload_n_layers(s->workload), &p, error))
      return NULL;
    g_ptr_array_add(s->policies, p);
  }
  if (s->policies->len == 0) {
    g_ptr_array_unref(s->policies);
    s->policies = sim_policy_default_set();
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
