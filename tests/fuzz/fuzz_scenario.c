/* Fuzz target: scenario files with their includes (sim/input/config.c,
 * sim/input/scenario.c), and through them the HF config and trace importers, then
 * every policy on what loaded.
 *
 * One input is several files: the first is top.ini, and each line
 * "#@@ NAME" starts the file NAME (letters, digits, '.', '_', '-' and '/',
 * no ".." and no leading '/').  They are written into a private temporary
 * directory, top.ini is loaded from there, and every file is removed again
 * before the next input.  A "#@@" line is a comment to GKeyFile, so seeds
 * made from real scenarios stay valid when the marker lines are mutated. */
#include "fuzz_common.h"

#include <glib/gstdio.h>
#include <string.h>

#define MARKER "\n#@@ "

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static const char *root;

static gboolean
safe_name(const char *name)
{
  if (*name == '\0' || *name == '/' || strlen(name) > 64 || strstr(name, ".."))
    return FALSE;
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum(*p) && !strchr("._-/", *p))
      return FALSE;
  return !g_str_has_suffix(name, "/") && strstr(name, "//") == NULL;
}

/* Writes one file; remembers it and any directory it made, innermost last. */
static void
write_file(GPtrArray *made, const char *name, const char *text, gsize length)
{
  g_autofree char *path = g_build_filename(root, name, NULL);
  g_autofree char *dir = g_path_get_dirname(path);
  g_autoptr(GPtrArray) dirs = g_ptr_array_new_with_free_func(g_free);
  char *d = g_strdup(dir);
  while (strcmp(d, root) != 0 && !g_file_test(d, G_FILE_TEST_EXISTS)) {
    g_ptr_array_insert(dirs, 0, d);
    d = g_path_get_dirname(d);
  }
  g_free(d);
  for (guint i = 0; i < dirs->len; i++) {
    if (g_mkdir(g_ptr_array_index(dirs, i), 0700) != 0)
      return;
    g_ptr_array_add(made, g_strdup(g_ptr_array_index(dirs, i)));
  }
  /* A file of the parent's name, or a directory of this one's, is in the
   * way: this file is simply missing. */
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR) || g_file_test(path, G_FILE_TEST_IS_DIR) ||
      !g_file_set_contents(path, text, (gssize)length, NULL))
    return;
  g_ptr_array_add(made, g_steal_pointer(&path));
}

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  root = fuzz_temp_dir();
  g_autoptr(GPtrArray) made = g_ptr_array_new_with_free_func(g_free);
  const char *text = (const char *)data, *end = text + size;
  const char *name = "top.ini";
  g_autofree char *owned = NULL;
  for (;;) {
    const char *next = g_strstr_len(text, end - text, MARKER);
    const char *stop = next ? next + 1 : end; /* the file keeps its last newline */
    if (safe_name(name))
      write_file(made, name, text, (gsize)(stop - text));
    if (next == NULL)
      break;
    const char *line = next + strlen(MARKER);
    const char *eol = memchr(line, '\n', (gsize)(end - line));
    g_free(owned);
    owned = g_strndup(line, (gsize)((eol ? eol : end) - line));
    name = owned;
    text = eol ? eol + 1 : end;
  }

  g_autofree char *top = g_build_filename(root, "top.ini", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_file(top, &error);
  fuzz_expect_input_error(error, "sim_scenario_load_file");
  if (s)
    fuzz_evaluate_all(s);

  /* Files before the directories that hold them: unlink in reverse. */
  for (guint i = made->len; i-- > 0;)
    g_remove(g_ptr_array_index(made, i));
  return 0;
}
