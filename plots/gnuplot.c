#include "plots/gnuplot.h"

#include "base/error.h"
#include "base/output.h"

#include <errno.h>
#include <math.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

PlotsChart *
plots_gnuplot_chart_new(const char *name, guint width, guint height)
{
  PlotsChart *chart = g_new0(PlotsChart, 1);
  chart->name = g_strdup(name);
  chart->width = width;
  chart->height = height;
  chart->data = g_string_new(NULL);
  chart->commands = g_string_new(NULL);
  return chart;
}

void
plots_gnuplot_chart_free(PlotsChart *chart)
{
  if (chart == NULL)
    return;
  g_free(chart->name);
  g_string_free(chart->data, TRUE);
  g_string_free(chart->commands, TRUE);
  g_free(chart);
}

char *
plots_gnuplot_quote(const char *text)
{
  g_autofree char *valid = g_utf8_make_valid(text ? text : "", -1);
  /* A line break would end the command; other controls have no business in
   * a label.  They go first, so that nothing below sees them. */
  GString *clean = g_string_sized_new(strlen(valid));
  for (const char *p = valid; *p; p++)
    if ((unsigned char)*p >= 0x20 && *p != 0x7f)
      g_string_append_c(clean, *p);

  GString *out = g_string_sized_new(clean->len + 8);
  const char *p = clean->str;
  /* gnuplot reads '' right after an opening quote as an empty string, so a
   * leading run of quotes cannot be doubled: it becomes a double-quoted
   * string of quotes (nothing else is special there) joined to the rest. */
  size_t leading = strspn(p, "'");
  if (leading > 0) {
    g_string_append_printf(out, "\"%.*s\"%s", (int)leading, p, p[leading] ? " . " : "");
    p += leading;
  }
  if (*p || leading == 0) {
    /* Inside single quotes nothing is special but the quote itself. */
    g_string_append_c(out, '\'');
    for (; *p; p++) {
      if (*p == '\'')
        g_string_append_c(out, '\'');
      g_string_append_c(out, *p);
    }
    g_string_append_c(out, '\'');
  }
  g_string_free(clean, TRUE);
  return g_string_free(out, FALSE);
}

char *
plots_gnuplot_file_name(const char *text)
{
  char *name = g_strdup(text && *text ? text : "_");
  for (char *p = name; *p; p++)
    if (!g_ascii_isalnum(*p) && *p != '.' && *p != '_' && *p != '-')
      *p = '_';
  if (name[0] == '.')
    name[0] = '_';
  return name;
}

void
plots_gnuplot_data_begin(PlotsChart *chart, const char *block)
{
  g_string_append_printf(chart->data, "$%s << EOD\n", block);
}

void
plots_gnuplot_data_row(PlotsChart *chart, guint n, const double *values)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  for (guint i = 0; i < n; i++) {
    if (i)
      g_string_append_c(chart->data, ' ');
    g_string_append(chart->data, plots_gnuplot_number(buf, values[i]));
  }
  g_string_append_c(chart->data, '\n');
}

void
plots_gnuplot_data_end(PlotsChart *chart)
{
  g_string_append(chart->data, "EOD\n");
}

const char *
plots_gnuplot_number(char *buf, double value)
{
  if (isnan(value))
    return strcpy(buf, "NaN");
  return g_ascii_formatd(buf, G_ASCII_DTOSTR_BUF_SIZE, "%.10g", value == 0 ? 0.0 : value);
}

/* Tableau 10: distinct for the common forms of colour blindness. */
static const char *const series_colors[] = { "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                             "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac" };

void
plots_gnuplot_series_linetypes(GString *commands, guint n, const char *style)
{
  for (guint i = 0; i < n; i++)
    g_string_append_printf(commands, "set linetype %u lc rgb '%s' %s\n", i + 1,
                           series_colors[i % G_N_ELEMENTS(series_colors)], style);
}

static double
linear(guint channel)
{
  double c = channel / 255.0;
  return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4);
}

double
plots_gnuplot_contrast_on_white(const char *color)
{
  guint rgb = (guint)g_ascii_strtoull(color + 1, NULL, 16);
  double l = 0.2126 * linear(rgb >> 16 & 0xff) + 0.7152 * linear(rgb >> 8 & 0xff) + 0.0722 * linear(rgb & 0xff);
  return 1.05 / (l + 0.05);
}

void
plots_gnuplot_series_text_color(guint series, char out[8])
{
  guint rgb = (guint)g_ascii_strtoull(series_colors[series % G_N_ELEMENTS(series_colors)] + 1, NULL, 16);
  /* The same hue, darker in steps of 5 % until it reads as text (WCAG AA). */
  for (guint percent = 100;; percent -= 5) {
    g_snprintf(out, 8, "#%02x%02x%02x", (rgb >> 16 & 0xff) * percent / 100, (rgb >> 8 & 0xff) * percent / 100,
               (rgb & 0xff) * percent / 100);
    if (plots_gnuplot_contrast_on_white(out) >= 4.5 || percent == 0)
      return;
  }
}

void
plots_gnuplot_title(GString *commands, const char *command, const char *title, const char *subtitle)
{
  g_autofree char *first = plots_gnuplot_quote(title);
  g_autofree char *second = plots_gnuplot_quote(subtitle);
  /* The line break is ours, in the one double-quoted string of the title. */
  g_string_append_printf(commands, "%s %s . \"\\n\" . %s", command, first, second);
}

gboolean
plots_gnuplot_parse_formats(const char *text, guint *formats, GError **error)
{
  if (g_strcmp0(text, "png") == 0)
    *formats = PLOTS_FORMAT_PNG;
  else if (g_strcmp0(text, "svg") == 0)
    *formats = PLOTS_FORMAT_SVG;
  else if (g_strcmp0(text, "both") == 0)
    *formats = PLOTS_FORMAT_ALL;
  else {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "expected png, svg or both, got '%s'", text);
    return FALSE;
  }
  return TRUE;
}

const char *
plots_gnuplot_extension(PlotsFormat format)
{
  return format == PLOTS_FORMAT_SVG ? "svg" : "png";
}

static const PlotsFormat all_formats[] = { PLOTS_FORMAT_PNG, PLOTS_FORMAT_SVG };

/* `paths` holds one output per (chart, format in `formats`), charts outer. */
static char *
script_with_outputs(GPtrArray *charts, guint formats, char **paths)
{
  GString *out = g_string_new("# offsim plots: feed to gnuplot (5.2 or later), e.g. `gnuplot FILE`.\n"
                              "set encoding utf8\n");
  guint k = 0;
  for (guint c = 0; c < charts->len; c++) {
    const PlotsChart *chart = g_ptr_array_index(charts, c);
    g_string_append_printf(out, "\n# ---- %s\n", chart->name);
    g_string_append(out, chart->data->str);
    for (guint f = 0; f < G_N_ELEMENTS(all_formats); f++) {
      if (!(formats & all_formats[f]))
        continue;
      g_autofree char *output = plots_gnuplot_quote(paths[k++]);
      if (all_formats[f] == PLOTS_FORMAT_PNG)
        g_string_append_printf(out, "set terminal pngcairo size %u,%u font 'sans,10' noenhanced background rgb 'white'\n",
                               chart->width, chart->height);
      else
        g_string_append_printf(out, "set terminal svg size %u,%u font 'sans-serif,10' noenhanced background rgb 'white'\n",
                               chart->width, chart->height);
      g_string_append_printf(out, "set output %s\nreset\n%sunset output\n", output,
                             chart->commands->str);
    }
  }
  return g_string_free(out, FALSE);
}

/* DIR/NAME.EXT (NAME.EXT without a directory) per chart and format, in
 * the order script_with_outputs() takes them. */
static GPtrArray *
output_paths(GPtrArray *charts, guint formats, const char *dir)
{
  GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
  for (guint c = 0; c < charts->len; c++) {
    const PlotsChart *chart = g_ptr_array_index(charts, c);
    for (guint f = 0; f < G_N_ELEMENTS(all_formats); f++) {
      if (!(formats & all_formats[f]))
        continue;
      g_autofree char *file = g_strdup_printf("%s.%s", chart->name, plots_gnuplot_extension(all_formats[f]));
      g_ptr_array_add(paths, dir ? g_build_filename(dir, file, NULL) : g_steal_pointer(&file));
    }
  }
  return paths;
}

char *
plots_gnuplot_script(GPtrArray *charts, guint formats, const char *dir)
{
  g_autoptr(GPtrArray) paths = output_paths(charts, formats, dir);
  return script_with_outputs(charts, formats, (char **)paths->pdata);
}

gboolean
plots_gnuplot_available(void)
{
  g_autofree char *path = g_find_program_in_path("gnuplot");
  return path != NULL;
}

static gpointer
drain(gpointer data)
{
  int fd = GPOINTER_TO_INT(data);
  GString *text = g_string_new(NULL);
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0)
      g_string_append_len(text, buf, n);
    else if (n == 0 || errno != EINTR)
      break;
  }
  close(fd);
  return text;
}

/* What gnuplot said, as the one line of an error: the first line of its
 * stderr that says something.  Piped a script, gnuplot prints an error as
 * "line N: what"; it may first echo the command ("gnuplot> ...") and point
 * at it with a caret line, which say nothing on their own. */
static char *
first_line(const char *text)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  const char *said = NULL;
  for (char **l = lines; *l && said == NULL; l++) {
    g_strstrip(*l);
    if (**l != '\0' && !g_str_has_prefix(*l, "gnuplot>") && strspn(*l, "^ \t") != strlen(*l))
      said = *l;
  }
  g_autofree char *valid = g_utf8_make_valid(said ? said : "", -1);
  for (char *p = valid; *p; p++) /* tabs and other controls as spaces */
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      *p = ' ';
  if (g_utf8_strlen(valid, -1) <= 300)
    return g_steal_pointer(&valid);
  g_autofree char *cut = g_utf8_substring(valid, 0, 300);
  return g_strconcat(cut, "...", NULL);
}

gboolean
plots_gnuplot_run(const char *script, GError **error)
{
  char *argv[] = { (char *)"gnuplot", NULL };
  GPid pid;
  int in_fd = -1, err_fd = -1;
  g_autoptr(GError) spawn_error = NULL;

  if (!g_spawn_async_with_pipes(NULL, argv, NULL,
                                G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                                NULL, &pid, &in_fd, NULL, &err_fd, &spawn_error)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_TOOL, "cannot run gnuplot: %s", spawn_error->message);
    return FALSE;
  }
  /* A SIGINT or SIGTERM kills it before removing the temporaries it draws
   * into: left running, it would create them again. */
  sim_output_temp_child(pid);
  GThread *reader = g_thread_new("gnuplot-stderr", drain, GINT_TO_POINTER(err_fd));

  /* A gnuplot that dies early closes the pipe: we want EPIPE and its exit
   * status, not SIGPIPE killing us. */
  struct sigaction ignore = { .sa_handler = SIG_IGN }, old;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &old);
  size_t left = strlen(script);
  const char *p = script;
  while (left > 0) {
    ssize_t n = write(in_fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break; /* the exit status says why */
    p += n;
    left -= (size_t)n;
  }
  close(in_fd);
  sigaction(SIGPIPE, &old, NULL);

  g_autoptr(GString) messages = g_thread_join(reader);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  sim_output_temp_child(0);
  g_spawn_close_pid(pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return TRUE;
  /* gnuplot ran and failed: like a missing one, the tool's fault (exit 3). */
  g_autofree char *said = first_line(messages->str);
  if (WIFEXITED(status))
    g_set_error(error, SIM_ERROR, SIM_ERROR_TOOL, "gnuplot failed (exit %d): %s", WEXITSTATUS(status),
                *said ? said : "no message");
  else
    g_set_error(error, SIM_ERROR, SIM_ERROR_TOOL, "gnuplot died (signal %d): %s",
                WIFSIGNALED(status) ? WTERMSIG(status) : 0, *said ? said : "no message");
  return FALSE;
}

/* Removes (and unregisters) every temporary of a render still in `temps`. */
static void
discard_all(GPtrArray *temps)
{
  for (guint i = 0; i < temps->len; i++)
    sim_output_temp_discard(g_ptr_array_index(temps, i));
  g_ptr_array_set_size(temps, 0);
}

/* "--plot DIR", or "DIR" when the caller named no option. */
static char *
named_dir(const PlotsRenderNames *names, const char *dir)
{
  if (names == NULL || names->dir_option == NULL)
    return g_strdup(dir);
  return g_strdup_printf("%s %s", names->dir_option, dir);
}

/* Into an existing directory: temporaries, gnuplot, renames. */
static gboolean
render_into(GPtrArray *charts, guint formats, const char *dir, const PlotsRenderNames *names, GError **error)
{
  /* gnuplot draws to a hidden temporary beside each final file, created
   * here so that the name is ours and the directory is known writable, and
   * registered so that a SIGINT or SIGTERM removes it (sim/base/output.h). */
  g_autoptr(GPtrArray) finals = output_paths(charts, formats, dir);
  g_autoptr(GPtrArray) temps = g_ptr_array_new();
  for (guint i = 0; i < finals->len; i++) {
    char *temp = NULL;
    int fd = sim_output_temp_open(g_ptr_array_index(finals, i), 0644, &temp);
    if (fd < 0) {
      int e = errno;
      discard_all(temps);
      g_autofree char *named = named_dir(names, dir);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: cannot write there: %s", named, g_strerror(e));
      return FALSE;
    }
    close(fd);
    g_ptr_array_add(temps, temp);
  }

  g_autofree char *script = script_with_outputs(charts, formats, (char **)temps->pdata);
  if (!plots_gnuplot_run(script, error)) {
    discard_all(temps);
    return FALSE;
  }
  for (guint i = 0; i < temps->len; i++) {
    GStatBuf st;
    const char *temp = g_ptr_array_index(temps, i), *final = g_ptr_array_index(finals, i);
    if (g_stat(temp, &st) != 0 || st.st_size == 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_TOOL, "gnuplot exited 0 but wrote nothing to %s", final);
      discard_all(temps);
      return FALSE;
    }
  }
  for (guint i = 0; i < temps->len; i++) {
    char *temp = g_ptr_array_index(temps, i);
    const char *final = g_ptr_array_index(finals, i);
    if (g_rename(temp, final) != 0) {
      int e = errno;
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "cannot rename %s to %s: %s", temp, final, g_strerror(e));
      discard_all(temps);
      return FALSE;
    }
    sim_output_temp_forget(temp);
    g_ptr_array_index(temps, i) = NULL;
  }
  return TRUE;
}

gboolean
plots_gnuplot_render(GPtrArray *charts, guint formats, const char *dir, const PlotsRenderNames *names,
                     GError **error)
{
  g_return_val_if_fail(charts != NULL && dir != NULL && (formats & PLOTS_FORMAT_ALL) != 0, FALSE);
  /* A path that cannot be written is the user's to fix whether or not
   * gnuplot is installed: say so first. */
  gboolean existed = g_file_test(dir, G_FILE_TEST_IS_DIR);
  if (g_mkdir_with_parents(dir, 0777) != 0) {
    int e = errno;
    g_autofree char *named = named_dir(names, dir);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: cannot create the directory: %s", named, g_strerror(e));
    return FALSE;
  }
  gboolean ok = FALSE;
  const char *instead = names ? names->without_gnuplot : NULL;
  if (!plots_gnuplot_available())
    g_set_error(error, SIM_ERROR, SIM_ERROR_TOOL, "gnuplot is not installed (Debian: apt-get install gnuplot-nox)%s%s",
                instead ? "; " : "", instead ? instead : "");
  else
    ok = render_into(charts, formats, dir, names, error);
  /* A failed run leaves nothing behind, not even the directory it made. */
  if (!ok && !existed)
    g_rmdir(dir);
  return ok;
}
