#include "config.h"

#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

static void
entry_free(gpointer data)
{
  SimConfigEntry *e = data;
  g_free(e->key);
  g_free(e->value);
  g_free(e);
}

static void
group_free(gpointer data)
{
  SimConfigGroup *g = data;
  g_free(g->name);
  g_ptr_array_unref(g->entries);
  g_hash_table_unref(g->by_key);
  g_free(g);
}

static SimConfig *
config_new(const char *top)
{
  SimConfig *c = g_new0(SimConfig, 1);
  c->groups = g_ptr_array_new_with_free_func(group_free);
  c->by_name = g_hash_table_new(g_str_hash, g_str_equal);
  c->files = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  c->top = g_strdup(top);
  return c;
}

void
sim_config_free(SimConfig *c)
{
  if (c == NULL)
    return;
  g_hash_table_unref(c->by_name);
  g_ptr_array_unref(c->groups);
  g_hash_table_unref(c->files);
  g_free(c->top);
  g_free(c);
}

static const char *
intern_file(SimConfig *c, const char *file)
{
  char *found = g_hash_table_lookup(c->files, file);
  if (found)
    return found;
  char *copy = g_strdup(file);
  g_hash_table_add(c->files, copy);
  return copy;
}

SimConfigGroup *
sim_config_group(const SimConfig *c, const char *name)
{
  return g_hash_table_lookup(c->by_name, name);
}

SimConfigEntry *
sim_config_lookup(const SimConfigGroup *g, const char *key)
{
  return g ? g_hash_table_lookup(g->by_key, key) : NULL;
}

static SimConfigGroup *
config_group_ensure(SimConfig *c, const char *group, const char *file)
{
  SimConfigGroup *g = sim_config_group(c, group);
  if (g == NULL) {
    g = g_new0(SimConfigGroup, 1);
    g->name = g_strdup(group);
    g->file = file;
    g->entries = g_ptr_array_new_with_free_func(entry_free);
    g->by_key = g_hash_table_new(g_str_hash, g_str_equal);
    g_ptr_array_add(c->groups, g);
    g_hash_table_insert(c->by_name, g->name, g);
  }
  return g;
}

static void
config_set(SimConfig *c, const char *group, const char *key, const char *value, const char *file)
{
  SimConfigGroup *g = config_group_ensure(c, group, file);
  SimConfigEntry *e = sim_config_lookup(g, key);
  if (e == NULL) {
    e = g_new0(SimConfigEntry, 1);
    e->key = g_strdup(key);
    g_ptr_array_add(g->entries, e);
    g_hash_table_insert(g->by_key, e->key, e);
  }
  g_free(e->value);
  e->value = g_strdup(value);
  e->file = file;
}

static gboolean
read_failed(int fd, GError **error)
{
  int e = errno;
  if (fd >= 0)
    close(fd);
  g_set_error_literal(error, G_FILE_ERROR, g_file_error_from_errno(e), g_strerror(e));
  return FALSE;
}

gboolean
sim_config_read_file(const char *path, char **contents, gsize *length, GError **error)
{
  int fd = g_open(path, O_RDONLY, 0);
  if (fd < 0)
    return read_failed(fd, error);
  g_autoptr(GString) text = g_string_new(NULL);
  char chunk[65536];
  for (;;) {
    gssize n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return read_failed(fd, error);
    if (n == 0)
      break;
    if (text->len + (gsize)n > SIM_CONFIG_MAX_FILE_BYTES) {
      close(fd);
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "larger than %d MiB, too large for an input file",
                  SIM_CONFIG_MAX_FILE_BYTES >> 20);
      return FALSE;
    }
    g_string_append_len(text, chunk, n);
  }
  close(fd);
  *length = text->len;
  *contents = g_string_free(g_steal_pointer(&text), FALSE);
  return TRUE;
}

/* `chain` holds the canonical paths of the files being loaded, outermost
 * first: a path already on it is a cycle. */
static gboolean merge_data(SimConfig *c, const char *data, gsize len, const char *origin,
                           const char *base_dir, GPtrArray *chain, GError **error);

static gboolean
merge_file(SimConfig *c, const char *path, const char *from, GPtrArray *chain, GError **error)
{
  g_autofree char *canonical = g_canonicalize_filename(path, NULL);
  for (guint i = 0; i < chain->len; i++) {
    if (strcmp(g_ptr_array_index(chain, i), canonical) == 0) {
      g_autoptr(GString) cycle = g_string_new(NULL);
      for (guint j = i; j < chain->len; j++)
        g_string_append_printf(cycle, "%s -> ", (char *)g_ptr_array_index(chain, j));
      g_string_append(cycle, canonical);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [scenario] include: include cycle: %s",
                  from, cycle->str);
      return FALSE;
    }
  }
  if (chain->len >= SIM_CONFIG_MAX_DEPTH) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: [scenario] include: includes nest deeper than %d files", from, SIM_CONFIG_MAX_DEPTH);
    return FALSE;
  }
  g_autofree char *data = NULL;
  gsize len = 0;
  g_autoptr(GError) local = NULL;
  if (!sim_config_read_file(path, &data, &len, &local)) {
    if (from)
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [scenario] include: cannot read '%s': %s", from,
                  path, local->message);
    else
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: cannot read scenario: %s", path, local->message);
    return FALSE;
  }
  g_autofree char *dir = g_path_get_dirname(canonical);
  g_ptr_array_add(chain, g_steal_pointer(&canonical));
  gboolean ok = merge_data(c, data, len, path, dir, chain, error);
  g_ptr_array_remove_index(chain, chain->len - 1);
  return ok;
}

static gboolean
merge_data(SimConfig *c, const char *data, gsize len, const char *origin, const char *base_dir,
           GPtrArray *chain, GError **error)
{
  g_autoptr(GKeyFile) kf = g_key_file_new();
  g_autoptr(GError) local = NULL;
  const char *file = intern_file(c, origin);

  if (memchr(data, '\0', len) != NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: the file contains a NUL byte; expected a text file",
                origin);
    return FALSE;
  }
  if (!g_utf8_validate(data, (gssize)len, NULL)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: the file is not valid UTF-8", origin);
    return FALSE;
  }
  if (!g_key_file_load_from_data(kf, data, len, G_KEY_FILE_NONE, &local)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: not a valid scenario file: %s", origin, local->message);
    return FALSE;
  }

  /* Includes first, so this file's keys override theirs. */
  g_autofree char *include = g_key_file_get_value(kf, "scenario", "include", NULL);
  if (include) {
    g_auto(GStrv) parts = g_strsplit(include, ",", -1);
    for (char **part = parts; *part; part++) {
      g_strstrip(*part);
      if (**part == '\0') {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                    "%s: [scenario] include: expected comma-separated file names, got '%s'", origin, include);
        return FALSE;
      }
      g_autofree char *path = g_path_is_absolute(*part) ? g_strdup(*part)
                                                        : g_build_filename(base_dir ? base_dir : ".", *part, NULL);
      if (!merge_file(c, path, origin, chain, error))
        return FALSE;
    }
  }

  g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
  for (char **g = groups; *g; g++) {
    g_auto(GStrv) keys = g_key_file_get_keys(kf, *g, NULL, NULL);
    config_group_ensure(c, *g, file); /* an empty group still counts, e.g. [policy.resident] */
    for (char **k = keys; k && *k; k++) {
      if (strcmp(*g, "scenario") == 0 && strcmp(*k, "include") == 0)
        continue;
      g_autofree char *value = g_key_file_get_value(kf, *g, *k, NULL);
      config_set(c, *g, *k, value ? value : "", file);
    }
  }
  return TRUE;
}

SimConfig *
sim_config_load_file(const char *path, GError **error)
{
  g_autoptr(SimConfig) c = config_new(path);
  g_autoptr(GPtrArray) chain = g_ptr_array_new_with_free_func(g_free);
  if (!merge_file(c, path, NULL, chain, error))
    return NULL;
  return g_steal_pointer(&c);
}

SimConfig *
sim_config_load_data(const char *data, const char *origin, const char *base_dir, GError **error)
{
  g_autoptr(SimConfig) c = config_new(origin);
  g_autoptr(GPtrArray) chain = g_ptr_array_new_with_free_func(g_free);
  if (!merge_data(c, data, strlen(data), origin, base_dir, chain, error))
    return NULL;
  return g_steal_pointer(&c);
}

SimConfig *
sim_config_copy(const SimConfig *src)
{
  SimConfig *c = config_new(src->top);
  for (guint i = 0; i < src->groups->len; i++) {
    const SimConfigGroup *g = g_ptr_array_index(src->groups, i);
    config_group_ensure(c, g->name, intern_file(c, g->file));
    for (guint k = 0; k < g->entries->len; k++) {
      const SimConfigEntry *e = g_ptr_array_index(g->entries, k);
      config_set(c, g->name, e->key, e->value, intern_file(c, e->file));
    }
  }
  return c;
}

void
sim_config_set(SimConfig *c, const char *group, const char *key, const char *value, const char *origin)
{
  config_set(c, group, key, value, intern_file(c, origin));
}
