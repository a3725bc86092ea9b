#include "gpu_calib/calib_profile.h"

#include "base/error.h"
#include "input/scenario.h"
#include "input/schema.h"

#include <glib/gstdio.h>

#include <math.h>
#include <string.h>

const char *const calib_dtype_names[CALIB_DTYPES] = { "bf16", "fp16", "fp32" };

CalibProfile *
calib_profile_new(void)
{
  CalibProfile *p = g_new0(CalibProfile, 1);
  SimMachine m;
  sim_scenario_machine_defaults(&m);
  p->link = m.link;
  p->notes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  p->meta = g_ptr_array_new_with_free_func(g_free);
  p->gemm_table = g_array_new(FALSE, FALSE, sizeof(CalibGemmPoint));
  return p;
}

void
calib_profile_free(CalibProfile *p)
{
  if (p == NULL)
    return;
  g_free(p->title);
  g_hash_table_unref(p->notes);
  g_ptr_array_unref(p->meta);
  g_array_unref(p->gemm_table);
  g_free(p);
}

void
calib_profile_note(CalibProfile *p, const char *group_key, const char *format, ...)
{
  g_return_if_fail(p != NULL && group_key != NULL && strchr(group_key, '.') != NULL);
  va_list ap;
  va_start(ap, format);
  g_hash_table_insert(p->notes, g_strdup(group_key), g_strdup_vprintf(format, ap));
  va_end(ap);
}

static gboolean
valid_meta_key(const CalibProfile *p, const char *key)
{
  if (*key == '\0' || strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != strlen(key))
    return FALSE;
  for (guint i = 0; i < p->meta->len; i += 2)
    if (strcmp(g_ptr_array_index(p->meta, i), key) == 0)
      return FALSE;
  return TRUE;
}

void
calib_profile_meta(CalibProfile *p, const char *key, const char *format, ...)
{
  g_return_if_fail(p != NULL && key != NULL && valid_meta_key(p, key));
  va_list ap;
  va_start(ap, format);
  char *value = g_strdup_vprintf(format, ap);
  va_end(ap);
  /* One line per key (GKeyFile has no continuation lines), and no escape
   * sequences for GKeyFile to interpret. */
  for (char *c = value; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '\\')
      *c = ' ';
  g_ptr_array_add(p->meta, g_strdup(key));
  g_ptr_array_add(p->meta, value);
}

void
calib_profile_add_point(CalibProfile *p, int dir, guint64 bytes, double bandwidth)
{
  g_return_if_fail(p != NULL && (dir == 0 || dir == 1));
  g_return_if_fail(p->link.table_points[dir] < SIM_LINK_MAX_POINTS);
  p->link.table[dir][p->link.table_points[dir]++] = (SimBandwidthPoint){ bytes, bandwidth };
}

void
calib_profile_add_gemm(CalibProfile *p, CalibDtype dtype, int m, int n, int k, double tflops)
{
  g_return_if_fail(p != NULL && dtype < CALIB_DTYPES);
  CalibGemmPoint point = { dtype, m, n, k, tflops };
  g_array_append_val(p->gemm_table, point);
}

/* ---- numbers as the scenario loader reads them ------------------------- */

char *
calib_format_number(double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE + 64];
  g_return_val_if_fail(isfinite(v), g_strdup("nan"));
  g_ascii_formatd(buf, sizeof buf, "%.12g", v);
  if (strpbrk(buf, "eE") == NULL)
    return g_strdup(buf);
  /* The loader takes no exponent: write the same twelve digits in full. */
  int decimals = fabs(v) >= 1 ? 0 : MIN(11 - (int)floor(log10(fabs(v))), 60);
  g_autofree char *format = g_strdup_printf("%%.%df", decimals);
  g_ascii_formatd(buf, sizeof buf, format, v);
  if (strchr(buf, '.')) {
    char *end = buf + strlen(buf) - 1;
    while (*end == '0')
      *end-- = '\0';
    if (*end == '.')
      *end = '\0';
  }
  return g_strdup(buf);
}

typedef struct {
  const char *name;
  double scale;
} Unit;

/* The largest unit that keeps the number at least 1 (the smallest otherwise). */
static char *
format_scaled(double v, const Unit *units, guint n)
{
  guint i = 0;
  while (i + 1 < n && v >= units[i + 1].scale)
    i++;
  g_autofree char *number = calib_format_number(v / units[i].scale);
  return g_strconcat(number, units[i].name, NULL);
}

char *
calib_format_rate(double bytes_per_s)
{
  static const Unit units[] = { { "B/s", 1 }, { "KB/s", 1e3 }, { "MB/s", 1e6 }, { "GB/s", 1e9 }, { "TB/s", 1e12 } };
  return format_scaled(bytes_per_s, units, G_N_ELEMENTS(units));
}

char *
calib_format_time(double seconds)
{
  static const Unit units[] = { { "ns", 1e-9 }, { "us", 1e-6 }, { "ms", 1e-3 }, { "s", 1 } };
  if (seconds == 0)
    return g_strdup("0");
  return format_scaled(seconds, units, G_N_ELEMENTS(units));
}

char *
calib_format_gemm_point(const CalibGemmPoint *point)
{
  g_autofree char *rate = calib_format_number(point->tflops);
  return g_strdup_printf("%s:%dx%dx%d:%sTFLOPS", calib_dtype_names[point->dtype], point->m, point->n, point->k, rate);
}

/* ---- validation: what the loader would reject, caught before writing ---- */

G_GNUC_PRINTF(4, 5)
static gboolean
invalid(GError **error, const char *group, const char *key, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *msg = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "profile: [%s] %s: %s", group, key, msg);
  return FALSE;
}

static gboolean
check_positive(const char *group, const char *key, double v, GError **error)
{
  return (v > 0 && isfinite(v)) || invalid(error, group, key, "expected a positive, finite value, got %g", v);
}

static gboolean
check_table(const SimLink *l, int dir, GError **error)
{
  const char *key = dir == 0 ? "d2h_table" : "h2d_table";
  for (guint i = 0; i < l->table_points[dir]; i++) {
    const SimBandwidthPoint *pt = &l->table[dir][i];
    if (pt->bytes == 0 || (i > 0 && pt->bytes <= l->table[dir][i - 1].bytes))
      return invalid(error, "link", key, "point %u: sizes must be positive and increasing", i + 1);
    if (!(pt->bandwidth > 0) || !isfinite(pt->bandwidth))
      return invalid(error, "link", key, "point %u: expected a positive, finite rate, got %g", i + 1, pt->bandwidth);
  }
  return TRUE;
}

/* The kernel cost model's keys: zero is "not measured", a table item must
 * be positive and name its dtype and shape once. */
static gboolean
check_kernel_keys(const CalibProfile *p, GError **error)
{
  for (int d = 0; d < CALIB_DTYPES; d++) {
    double v = p->matmul_tflops_dtype[d];
    if (!(v >= 0) || !isfinite(v)) {
      g_autofree char *key = g_strconcat("matmul_tflops_", calib_dtype_names[d], NULL);
      return invalid(error, "device", key, "expected a positive, finite value (or 0: not written), got %g", v);
    }
  }
  if (!(p->launch_overhead >= 0 && p->launch_overhead <= 1))
    return invalid(error, "device", "launch_overhead", "expected a time in [0, 1s], got %g s", p->launch_overhead);
  for (guint i = 0; i < p->gemm_table->len; i++) {
    const CalibGemmPoint *g = &g_array_index(p->gemm_table, CalibGemmPoint, i);
    if (g->m <= 0 || g->n <= 0 || g->k <= 0 || !(g->tflops > 0) || !isfinite(g->tflops))
      return invalid(error, "device", "gemm_table", "item %u: expected positive sizes and a positive, finite rate, "
                     "got %dx%dx%d at %g TFLOPS", i + 1, g->m, g->n, g->k, g->tflops);
    for (guint j = 0; j < i; j++) {
      const CalibGemmPoint *e = &g_array_index(p->gemm_table, CalibGemmPoint, j);
      if (e->dtype == g->dtype && e->m == g->m && e->n == g->n && e->k == g->k)
        return invalid(error, "device", "gemm_table", "item %u: %s %dx%dx%d is item %u already", i + 1,
                       calib_dtype_names[g->dtype], g->m, g->n, g->k, j + 1);
    }
  }
  return TRUE;
}

static gboolean
check_profile(const CalibProfile *p, GError **error)
{
  const SimLink *l = &p->link;
  if (p->memory == 0)
    return invalid(error, "device", "memory", "expected a positive size");
  return check_positive("device", "matmul_tflops", p->matmul_tflops, error) &&
         check_positive("device", "hbm_bandwidth", p->hbm_bandwidth, error) &&
         check_positive("link", "h2d_bandwidth", l->h2d_bandwidth, error) &&
         check_positive("link", "d2h_bandwidth", l->d2h_bandwidth, error) &&
         check_positive("link", "bidir_bandwidth", l->bidir_bandwidth, error) &&
         ((l->latency >= 0 && l->latency <= 1) ||
          invalid(error, "link", "latency", "expected a time in [0, 1s], got %g s", l->latency)) &&
         ((l->pageable_factor > 0 && l->pageable_factor <= 1) ||
          invalid(error, "link", "pageable_factor", "expected a number in (0, 1], got %g", l->pageable_factor)) &&
         ((l->compute_slowdown >= 0 && l->compute_slowdown < 1) ||
          invalid(error, "link", "compute_slowdown", "expected a number in [0, 1), got %g", l->compute_slowdown)) &&
         ((l->host_alloc >= 0 && l->host_alloc <= 3600) ||
          invalid(error, "link", "host_alloc", "expected a time in [0, 1h], got %g s", l->host_alloc)) &&
         check_table(l, 1, error) && check_table(l, 0, error) && check_kernel_keys(p, error);
}

/* ---- the text ---------------------------------------------------------- */

static void
append_comment(GString *out, const char *text)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (char **line = lines; *line; line++)
    g_string_append_printf(out, "#%s%s\n", **line ? " " : "", *line);
}

/* `key = value`, with its note above it; takes `value`. */
static void
append_key(GString *out, const CalibProfile *p, const char *group, const char *key, char *value)
{
  g_autofree char *owned = value;
  g_autofree char *id = g_strconcat(group, ".", key, NULL);
  const char *note = g_hash_table_lookup(p->notes, id);
  if (note)
    append_comment(out, note);
  g_string_append_printf(out, "%s = %s\n", key, owned);
}

/* Whether key `key` of [device] goes in as a key (or as a comment). */
static gboolean
kernel_key_active(const CalibProfile *p, const char *key)
{
  if (p->kernel_keys == CALIB_KEYS_AUTO)
    return sim_schema_find(SIM_GROUP_DEVICE, key, SIM_SCHEMA_ANY_KIND) != SIM_KEY_COUNT;
  return p->kernel_keys == CALIB_KEYS_ACTIVE;
}

/* The kernel cost model's keys that have a value, after hbm_bandwidth. */
static void
append_kernel_keys(GString *out, const CalibProfile *p)
{
  struct {
    char key[32];
    char *value;
  } keys[CALIB_DTYPES + 3];
  guint n = 0;
  for (int d = 0; d < CALIB_DTYPES; d++)
    if (p->matmul_tflops_dtype[d] > 0) {
      g_snprintf(keys[n].key, sizeof keys[n].key, "matmul_tflops_%s", calib_dtype_names[d]);
      keys[n++].value = calib_format_number(p->matmul_tflops_dtype[d]);
    }
  if (p->sm_count) {
    g_strlcpy(keys[n].key, "sm_count", sizeof keys[n].key);
    keys[n++].value = g_strdup_printf("%u", p->sm_count);
  }
  if (p->launch_overhead > 0) {
    g_strlcpy(keys[n].key, "launch_overhead", sizeof keys[n].key);
    keys[n++].value = calib_format_time(p->launch_overhead);
  }
  if (p->gemm_table->len) {
    GString *items = g_string_new(NULL);
    for (guint i = 0; i < p->gemm_table->len; i++) {
      g_autofree char *item = calib_format_gemm_point(&g_array_index(p->gemm_table, CalibGemmPoint, i));
      g_string_append_printf(items, "%s%s", i ? ", " : "", item);
    }
    g_strlcpy(keys[n].key, "gemm_table", sizeof keys[n].key);
    keys[n++].value = g_string_free(items, FALSE);
  }
  gboolean said = FALSE;
  for (guint i = 0; i < n; i++) {
    if (kernel_key_active(p, keys[i].key)) {
      append_key(out, p, "device", keys[i].key, keys[i].value);
      continue;
    }
    if (!said)
      append_comment(out, "The kernel cost model's keys (sim/engine/kernel.h) that this offsim's scenario loader does\n"
                          "not read yet follow as comments, `# key = value`: uncomment them for an offsim that reads\n"
                          "them (offsim-calib built with one writes them as keys).");
    said = TRUE;
    g_autofree char *line = g_strdup_printf("%s = %s", keys[i].key, keys[i].value);
    g_autofree char *id = g_strconcat("device.", keys[i].key, NULL);
    const char *note = g_hash_table_lookup(p->notes, id);
    if (note)
      append_comment(out, note);
    append_comment(out, line);
    g_free(keys[i].value);
  }
}

static char *
format_table(const SimLink *l, int dir)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < l->table_points[dir]; i++) {
    g_autofree char *rate = calib_format_rate(l->table[dir][i].bandwidth);
    g_string_append_printf(s, "%s%" G_GUINT64_FORMAT "B:%s", i ? ", " : "", l->table[dir][i].bytes, rate);
  }
  return g_string_free(s, FALSE);
}

char *
calib_profile_format(const CalibProfile *p, GError **error)
{
  g_return_val_if_fail(p != NULL, NULL);
  if (!check_profile(p, error))
    return NULL;
  const SimLink *l = &p->link;
  g_autoptr(GString) out = g_string_new(NULL);
  if (p->title)
    append_comment(out, p->title);

  g_string_append(out, "[device]\n");
  append_key(out, p, "device", "memory", g_strdup_printf("%" G_GUINT64_FORMAT "B", p->memory));
  append_comment(out, "[device] efficiency is not set here: it is the fraction of matmul_tflops that a whole\n"
                      "model's matmuls reach (smaller and odd shapes, launch gaps), a property of the model\n"
                      "and its kernels; scenarios set it (default 0.5).");
  append_key(out, p, "device", "matmul_tflops", calib_format_number(p->matmul_tflops));
  append_key(out, p, "device", "hbm_bandwidth", calib_format_rate(p->hbm_bandwidth));
  append_kernel_keys(out, p);

  g_string_append(out, "\n[link]\n");
  append_key(out, p, "link", "h2d_bandwidth", calib_format_rate(l->h2d_bandwidth));
  append_key(out, p, "link", "d2h_bandwidth", calib_format_rate(l->d2h_bandwidth));
  append_key(out, p, "link", "bidir_bandwidth", calib_format_rate(l->bidir_bandwidth));
  append_key(out, p, "link", "latency", calib_format_time(l->latency));
  append_key(out, p, "link", "pageable_factor", calib_format_number(l->pageable_factor));
  append_key(out, p, "link", "compute_slowdown", calib_format_number(l->compute_slowdown));
  append_key(out, p, "link", "host_alloc", calib_format_time(l->host_alloc));
  if (l->table_points[1])
    append_key(out, p, "link", "h2d_table", format_table(l, 1));
  if (l->table_points[0])
    append_key(out, p, "link", "d2h_table", format_table(l, 0));

  if (p->meta->len) {
    g_string_append(out, "\n[calibration]\n");
    for (guint i = 0; i < p->meta->len; i += 2)
      g_string_append_printf(out, "%s = %s\n", (const char *)g_ptr_array_index(p->meta, i),
                             (const char *)g_ptr_array_index(p->meta, i + 1));
  }
  return g_string_free(g_steal_pointer(&out), FALSE);
}

gboolean
calib_profile_save(const CalibProfile *p, const char *path, GError **error)
{
  g_autofree char *text = calib_profile_format(p, error);
  if (text == NULL)
    return FALSE;
  g_autoptr(GError) cause = NULL;
  if (!g_file_set_contents(path, text, -1, &cause)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s", path, cause->message);
    return FALSE;
  }
  return TRUE;
}

/* ---- the round trip ----------------------------------------------------- */

static gboolean
same(double wrote, double read)
{
  return fabs(wrote - read) <= 1e-9 * MAX(fabs(wrote), fabs(read));
}

static gboolean
mismatch(GError **error, const char *group, const char *key, double wrote, double read)
{
  g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "profile round trip: [%s] %s: wrote %.17g, read %.17g", group,
              key, wrote, read);
  return FALSE;
}

static gboolean
compare_link(const SimLink *w, const SimLink *r, GError **error)
{
  const struct {
    const char *key;
    double wrote, read;
  } fields[] = {
    { "h2d_bandwidth", w->h2d_bandwidth, r->h2d_bandwidth },
    { "d2h_bandwidth", w->d2h_bandwidth, r->d2h_bandwidth },
    { "bidir_bandwidth", w->bidir_bandwidth, r->bidir_bandwidth },
    { "latency", w->latency, r->latency },
    { "pageable_factor", w->pageable_factor, r->pageable_factor },
    { "compute_slowdown", w->compute_slowdown, r->compute_slowdown },
    { "host_alloc", w->host_alloc, r->host_alloc },
  };
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++)
    if (!same(fields[i].wrote, fields[i].read))
      return mismatch(error, "link", fields[i].key, fields[i].wrote, fields[i].read);
  for (int dir = 0; dir < 2; dir++) {
    const char *key = dir ? "h2d_table" : "d2h_table";
    if (w->table_points[dir] != r->table_points[dir])
      return mismatch(error, "link", key, w->table_points[dir], r->table_points[dir]);
    for (guint i = 0; i < w->table_points[dir]; i++) {
      if (w->table[dir][i].bytes != r->table[dir][i].bytes)
        return mismatch(error, "link", key, (double)w->table[dir][i].bytes, (double)r->table[dir][i].bytes);
      if (!same(w->table[dir][i].bandwidth, r->table[dir][i].bandwidth))
        return mismatch(error, "link", key, w->table[dir][i].bandwidth, r->table[dir][i].bandwidth);
    }
  }
  return TRUE;
}

gboolean
calib_profile_verify(const CalibProfile *p, SimMachine *machine, GError **error)
{
  g_autofree char *text = calib_profile_format(p, error);
  if (text == NULL)
    return FALSE;
  g_autoptr(GError) cause = NULL;
  g_autofree char *path = NULL;
  int fd = g_file_open_tmp("offsim-profile-XXXXXX.ini", &path, &cause);
  if (fd < 0 || !g_close(fd, &cause) || !g_file_set_contents(path, text, -1, &cause)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "profile round trip: %s", cause->message);
    if (path)
      g_unlink(path);
    return FALSE;
  }
  /* Temporary names have no commas, which `include` would split on. */
  g_autofree char *scenario = g_strdup_printf("[scenario]\ninclude = %s\n"
                                              "[model]\nlayers = 1\nforward = 1ms\ninput = 1MiB\ntensors = a:1MiB\n",
                                              path);
  g_autoptr(SimScenario) s = sim_scenario_load_data(scenario, "(profile round trip)", error);
  g_unlink(path);
  if (s == NULL)
    return FALSE;
  *machine = s->machine;
  const SimDevice *d = &machine->device;
  if (d->memory != p->memory)
    return mismatch(error, "device", "memory", (double)p->memory, (double)d->memory);
  if (!same(p->matmul_tflops * 1e12, d->matmul_flops))
    return mismatch(error, "device", "matmul_tflops", p->matmul_tflops * 1e12, d->matmul_flops);
  if (!same(p->hbm_bandwidth, d->hbm_bandwidth))
    return mismatch(error, "device", "hbm_bandwidth", p->hbm_bandwidth, d->hbm_bandwidth);
  return compare_link(&p->link, &machine->link, error);
}
