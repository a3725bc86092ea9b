/* sim/input/config.h — scenario files merged across includes, each value with the
 * file it came from.
 *
 * GKeyFile parses one file; a scenario is a chain of them.  `include` in a
 * file's [scenario] group names other files (comma-separated, relative to the
 * including file), which are loaded first, so the including file's keys win;
 * among several includes, later ones win.  Includes nest up to
 * SIM_CONFIG_MAX_DEPTH, and a file that includes itself, directly or not, is
 * an error naming the chain.
 *
 * Each file is read and merged with its includes once per load, however
 * many files include it, so any include graph loads in time linear in its
 * files.  In one file a group or a key given twice, or a `key[locale]`, is
 * an error naming both lines (GKeyFile would merge them silently); a UTF-8
 * byte-order mark is skipped; a FIFO without a writer reads as empty.
 *
 * Every value remembers its file so that an error about it can name the file
 * the user must edit, not the top-level one.  Groups and keys keep the order
 * in which they first appeared (policies run in that order).
 *
 * Ownership: SimConfig owns everything; lookups return borrowed pointers.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define SIM_CONFIG_MAX_DEPTH 64
/* No input file (scenario, config.json, trace or chunk CSV) is larger. */
#define SIM_CONFIG_MAX_FILE_BYTES (256 * 1024 * 1024)

typedef struct {
  char *key;
  char *value;
  const char *file; /* interned in the config */
} SimConfigEntry;

typedef struct {
  char *name;
  const char *file; /* where the group first appeared */
  GPtrArray *entries; /* SimConfigEntry*, in first-seen order */
  GHashTable *by_key;
} SimConfigGroup;

typedef struct {
  GPtrArray *groups; /* SimConfigGroup*, in first-seen order */
  GHashTable *by_name;
  GHashTable *files; /* interned file names */
  char *top;         /* the file (or origin) the scenario was loaded from */
} SimConfig;

SimConfig *sim_config_load_file(const char *path, GError **error);
/* `origin` names the data in messages; includes resolve against `base_dir`
 * (NULL: the current directory). */
SimConfig *sim_config_load_data(const char *data, const char *origin, const char *base_dir, GError **error);
void sim_config_free(SimConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimConfig, sim_config_free)

/* Reads a whole input file, like g_file_get_contents but refusing one over
 * SIM_CONFIG_MAX_FILE_BYTES: a path such as /dev/zero or an endless pipe is a
 * G_FILE_ERROR after reading that much, not an out-of-memory.  The
 * contents are NUL-terminated; errors are G_FILE_ERROR with strerror's text. */
gboolean sim_config_read_file(const char *path, char **contents, gsize *length, GError **error);

/* The same for a data file named on its own (a config.json, a recording, a
 * chunk list): a failure is SIM_ERROR_INPUT "PATH: cannot read: REASON", or
 * "PATH: cannot read WHAT: REASON" when `what` is not NULL. */
gboolean sim_config_read_input(const char *path, const char *what, char **contents, gsize *length, GError **error);

/* What every text input shares (scenarios, recordings, chunk lists), so
 * that they read alike.  sim_config_skip_bom: the UTF-8 byte-order mark
 * some editors write first is not part of the text; it moves `*data` past
 * one and shortens `*length`.  sim_config_blank_line: a line of nothing
 * but spaces and tabs (its line end removed), which a CSV reader skips:
 * a blank line between rows or at the end, as editors and concatenation
 * leave them, holds no row, and refusing it would only make the user
 * find it (pandas skips them too). */
void sim_config_skip_bom(const char **data, gsize *length);
gboolean sim_config_blank_line(const char *line);

/* A deep copy, for a sweep point to change without touching the original
 * (which may be shared read-only between threads). */
SimConfig *sim_config_copy(const SimConfig *config);

/* Sets group.key to value, as if `origin` had written it last. */
void sim_config_set(SimConfig *config, const char *group, const char *key, const char *value, const char *origin);

SimConfigGroup *sim_config_group(const SimConfig *config, const char *name);
SimConfigEntry *sim_config_lookup(const SimConfigGroup *group, const char *key);

G_END_DECLS
