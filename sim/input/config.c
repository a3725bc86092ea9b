#include "input/config.h"

#include "base/error.h"

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
  /* A FIFO opened for reading blocks until a writer comes, which may be
   * never: open it without waiting, then read as usual (a FIFO without a
   * writer reads as empty). */
  int fd = g_open(path, O_RDONLY | O_NONBLOCK, 0);
  if (fd < 0)
    return read_failed(fd, error);
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
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

gboolean
sim_config_read_input(const char *path, const char *what, char **contents, gsize *length, GError **error)
{
  g_autoptr(GError) local = NULL;
  if (sim_config_read_file(path, contents, length, &local))
    return TRUE;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: cannot read%s%s: %s", path, what ? " " : "", what ? what : "",
              local->message);
  return FALSE;
}

/* What one load shares across its files. */
typedef struct {
  GPtrArray *chain;  /* canonical paths of the files being loaded, outermost first: one already on it is a cycle */
  GHashTable *flats; /* canonical path -> SimConfig*: a file merged with its includes, built once per load */
} Loader;

static gboolean merge_data(SimConfig *c, const char *data, gsize len, const char *origin, const char *base_dir,
                           Loader *loader, GError **error);

/* Sets every group and value of `src` in `dst`, in src's order, as merging
 * the file `src` was built from would. */
static void
config_apply(SimConfig *dst, const SimConfig *src)
{
  /* Every file that went into src went into dst, whether or not a value of it is left. */
  GHashTableIter it;
  gpointer file;
  g_hash_table_iter_init(&it, src->files);
  while (g_hash_table_iter_next(&it, &file, NULL))
    intern_file(dst, file);
  for (guint i = 0; i < src->groups->len; i++) {
    const SimConfigGroup *g = g_ptr_array_index(src->groups, i);
    config_group_ensure(dst, g->name, intern_file(dst, g->file));
    for (guint k = 0; k < g->entries->len; k++) {
      const SimConfigEntry *e = g_ptr_array_index(g->entries, k);
      config_set(dst, g->name, e->key, e->value, intern_file(dst, e->file));
    }
  }
}

static gboolean
check_chain(const Loader *loader, const char *canonical, const char *from, GError **error)
{
  GPtrArray *chain = loader->chain;
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
  return TRUE;
}

/* The file at `path` merged with its includes: read and merged the first
 * time the load meets it, reused after, so a file included from many places
 * (a diamond, each file including the next twice) costs one read. */
static const SimConfig *
flat_file(const char *path, const char *canonical, const char *from, Loader *loader, GError **error)
{
  SimConfig *flat = g_hash_table_lookup(loader->flats, canonical);
  if (flat)
    return flat;
  g_autofree char *data = NULL;
  gsize len = 0;
  g_autoptr(GError) local = NULL;
  if (!sim_config_read_file(path, &data, &len, &local)) {
    if (from) {
      /* An include may name anything, of any length. */
      g_autofree char *quoted = sim_error_printable(path);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: [scenario] include: cannot read '%s': %s", from,
                  quoted, local->message);
    } else {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: cannot read scenario: %s", path, local->message);
    }
    return NULL;
  }
  g_autoptr(SimConfig) built = config_new(path);
  g_autofree char *dir = g_path_get_dirname(canonical);
  g_ptr_array_add(loader->chain, g_strdup(canonical));
  gboolean ok = merge_data(built, data, len, path, dir, loader, error);
  g_ptr_array_remove_index(loader->chain, loader->chain->len - 1);
  if (!ok)
    return NULL;
  flat = g_steal_pointer(&built);
  g_hash_table_insert(loader->flats, g_strdup(canonical), flat);
  return flat;
}

static gboolean
merge_file(SimConfig *c, const char *path, const char *from, Loader *loader, GError **error)
{
  g_autofree char *canonical = g_canonicalize_filename(path, NULL);
  if (!check_chain(loader, canonical, from, error))
    return FALSE;
  const SimConfig *flat = flat_file(path, canonical, from, loader, error);
  if (flat == NULL)
    return FALSE;
  config_apply(c, flat);
  return TRUE;
}

/* The first place a group or key was written in one file, for the message
 * about its second. */
typedef struct {
  guint line;
  GHashTable *keys; /* key -> line (GUINT_TO_POINTER) */
} SeenGroup;

static void
seen_group_free(gpointer data)
{
  SeenGroup *g = data;
  g_hash_table_unref(g->keys);
  g_free(g);
}

/* GKeyFile merges a group or key given twice in one file, last one winning,
 * and keeps `key[locale]` entries aside: both would be a silent typo.  One
 * pass over the lines finds them first (GKeyFile's grammar: a group line is
 * `[name]`, any other non-comment line is `key = value`). */
static gboolean
check_lines(const char *data, gsize len, const char *origin, GError **error)
{
  g_autoptr(GHashTable) groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, seen_group_free);
  SeenGroup *group = NULL;
  g_autofree char *name = NULL;
  guint line = 0;
  for (const char *p = data, *end = data + len; p < end; line++) {
    const char *nl = memchr(p, '\n', (gsize)(end - p));
    g_autofree char *text = g_strstrip(g_strndup(p, (gsize)((nl ? nl : end) - p)));
    p = nl ? nl + 1 : end;
    if (*text == '\0' || *text == '#')
      continue;
    if (*text == '[') {
      char *close = strrchr(text, ']');
      if (close == NULL)
        continue; /* GKeyFile says what is wrong with it */
      g_free(name);
      name = g_strndup(text + 1, (gsize)(close - text - 1));
      SeenGroup *first = g_hash_table_lookup(groups, name);
      if (first) {
        g_autofree char *quoted = sim_error_quote(name);
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: [%s]: the group is given twice (first at line %u)",
                    origin, line + 1, quoted, first->line + 1);
        return FALSE;
      }
      group = g_new0(SeenGroup, 1);
      group->line = line;
      group->keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
      g_hash_table_insert(groups, g_strdup(name), group);
      continue;
    }
    char *eq = strchr(text, '=');
    if (eq == NULL || group == NULL)
      continue;
    *eq = '\0';
    g_strchomp(text);
    gpointer first = NULL;
    gboolean locale = strchr(text, '[') != NULL;
    if (locale || g_hash_table_lookup_extended(group->keys, text, NULL, &first)) {
      g_autofree char *group_name = sim_error_quote(name), *key = sim_error_quote(text);
      if (locale)
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                    "%s:%u: [%s] %s: a key with a locale is not a scenario key (expected a plain key)", origin,
                    line + 1, group_name, key);
      else
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s:%u: [%s] %s: the key is given twice (first at line %u)",
                    origin, line + 1, group_name, key, GPOINTER_TO_UINT(first) + 1);
      return FALSE;
    }
    g_hash_table_insert(group->keys, g_strdup(text), GUINT_TO_POINTER(line));
  }
  return TRUE;
}

void
sim_config_skip_bom(const char **data, gsize *length)
{
  if (*length >= 3 && memcmp(*data, "\xef\xbb\xbf", 3) == 0) {
    *data += 3;
    *length -= 3;
  }
}

gboolean
sim_config_blank_line(const char *line)
{
  return line[strspn(line, " \t")] == '\0';
}

static gboolean
merge_data(SimConfig *c, const char *data, gsize len, const char *origin, const char *base_dir, Loader *loader,
           GError **error)
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
  sim_config_skip_bom(&data, &len);
  if (!check_lines(data, len, origin, error))
    return FALSE;
  if (!g_key_file_load_from_data(kf, data, len, G_KEY_FILE_NONE, &local)) {
    /* GKeyFile echoes the whole bad line, however long, controls and all. */
    g_autofree char *why = sim_error_printable(local->message);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: not a valid scenario file: %s", origin, why);
    return FALSE;
  }

  /* Includes first, so this file's keys override theirs. */
  g_autofree char *include = g_key_file_get_value(kf, "scenario", "include", NULL);
  if (include) {
    g_auto(GStrv) parts = g_strsplit(include, ",", -1);
    for (char **part = parts; *part; part++) {
      g_strstrip(*part);
      if (**part == '\0') {
        g_autofree char *quoted = sim_error_quote(include);
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                    "%s: [scenario] include: expected comma-separated file names, got '%s'", origin, quoted);
        return FALSE;
      }
      g_autofree char *path = g_path_is_absolute(*part) ? g_strdup(*part)
                                                        : g_build_filename(base_dir ? base_dir : ".", *part, NULL);
      if (!merge_file(c, path, origin, loader, error))
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

static void
loader_init(Loader *loader)
{
  loader->chain = g_ptr_array_new_with_free_func(g_free);
  loader->flats = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)sim_config_free);
}

static void
loader_clear(Loader *loader)
{
  g_ptr_array_unref(loader->chain);
  g_hash_table_unref(loader->flats);
}

SimConfig *
sim_config_load_file(const char *path, GError **error)
{
  g_autoptr(SimConfig) c = config_new(path);
  Loader loader;
  loader_init(&loader);
  gboolean ok = merge_file(c, path, NULL, &loader, error);
  loader_clear(&loader);
  return ok ? g_steal_pointer(&c) : NULL;
}

SimConfig *
sim_config_load_data(const char *data, const char *origin, const char *base_dir, GError **error)
{
  g_autoptr(SimConfig) c = config_new(origin);
  Loader loader;
  loader_init(&loader);
  gboolean ok = merge_data(c, data, strlen(data), origin, base_dir, &loader, error);
  loader_clear(&loader);
  return ok ? g_steal_pointer(&c) : NULL;
}

SimConfig *
sim_config_copy(const SimConfig *src)
{
  SimConfig *c = config_new(src->top);
  config_apply(c, src);
  return c;
}

void
sim_config_set(SimConfig *c, const char *group, const char *key, const char *value, const char *origin)
{
  config_set(c, group, key, value, intern_file(c, origin));
}
