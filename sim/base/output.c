/* kill, waitpid, pthread_sigmask, O_CLOEXEC: POSIX, which -std=c11 hides. */
#define _POSIX_C_SOURCE 200809L

#include "base/output.h"

#include "base/error.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void
sim_output_csv_field(GString *out, const char *text)
{
  if (strpbrk(text, ",\"\r\n") == NULL) {
    g_string_append(out, text);
    return;
  }
  g_autoptr(GString) quoted = g_string_new(text);
  g_string_replace(quoted, "\"", "\"\"", 0);
  g_string_append_printf(out, "\"%s\"", quoted->str);
}

void
sim_output_number(GString *out, double value)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append(out, g_ascii_formatd(buf, sizeof buf, "%.15g", value == 0 ? 0.0 : value));
}

/* ---- temporaries, removed by the program's signal handler --------------- */

/* Slots for names, in blocks that are added and never freed, so that a
 * signal handler can walk them at any moment: a name is published (or
 * withdrawn) by one atomic store, and the lock only orders the writers. */
#define TEMP_SLOTS 64

typedef struct TempBlock {
  gpointer slots[TEMP_SLOTS]; /* char*, or NULL */
  gpointer next;              /* TempBlock*, or NULL */
} TempBlock;

static TempBlock temp_first;
static GMutex temp_lock;
static gint temp_child;

void
sim_output_temp_cleanup(void)
{
  int saved = errno;
  pid_t child = g_atomic_int_get(&temp_child);
  if (child > 0) {
    kill(child, SIGKILL);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
      ;
  }
  for (TempBlock *b = &temp_first; b; b = g_atomic_pointer_get(&b->next))
    for (guint i = 0; i < TEMP_SLOTS; i++) {
      const char *name = g_atomic_pointer_get(&b->slots[i]);
      if (name)
        unlink(name);
    }
  errno = saved;
}

static void
temp_track(char *name)
{
  g_mutex_lock(&temp_lock);
  for (TempBlock *b = &temp_first;; b = b->next) {
    for (guint i = 0; i < TEMP_SLOTS; i++)
      if (b->slots[i] == NULL) {
        g_atomic_pointer_set(&b->slots[i], name);
        g_mutex_unlock(&temp_lock);
        return;
      }
    if (b->next == NULL)
      g_atomic_pointer_set(&b->next, g_new0(TempBlock, 1));
  }
}

static void
temp_untrack(const char *name)
{
  g_mutex_lock(&temp_lock);
  for (TempBlock *b = &temp_first; b; b = b->next)
    for (guint i = 0; i < TEMP_SLOTS; i++)
      if (b->slots[i] == name)
        g_atomic_pointer_set(&b->slots[i], NULL);
  g_mutex_unlock(&temp_lock);
}

int
sim_output_temp_open(const char *path, int mode, char **temp)
{
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *base = g_path_get_basename(path);
  g_autofree char *hidden = g_strdup_printf(".%s.XXXXXX", base);
  char *name = g_build_filename(dir, hidden, NULL);
  /* Created and registered with every signal held, so that no handler
   * (the program's) sees a file that exists unregistered (in this thread);
   * which signals the program handles is its own business. */
  sigset_t block, before;
  sigfillset(&block);
  pthread_sigmask(SIG_BLOCK, &block, &before);
  int fd = g_mkstemp_full(name, O_RDWR | O_CLOEXEC, mode);
  int e = errno;
  if (fd >= 0)
    temp_track(name);
  pthread_sigmask(SIG_SETMASK, &before, NULL);
  if (fd < 0) {
    g_free(name);
    errno = e;
    return -1;
  }
  *temp = name;
  return fd;
}

void
sim_output_temp_forget(char *temp)
{
  if (temp == NULL)
    return;
  temp_untrack(temp);
  g_free(temp);
}

void
sim_output_temp_discard(char *temp)
{
  if (temp)
    g_unlink(temp);
  sim_output_temp_forget(temp);
}

void
sim_output_temp_child(GPid pid)
{
  g_atomic_int_set(&temp_child, pid > 0 ? pid : 0);
}

/* ---- atomic saves -------------------------------------------------------- */

static gboolean
write_all(int fd, const char *text, gsize length)
{
  while (length > 0) {
    gssize n = write(fd, text, length);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return FALSE;
    text += n;
    length -= (gsize)n;
  }
  return TRUE;
}

static SimOutputSink stdout_sink;
static gpointer stdout_sink_data;

void
sim_output_redirect_stdout(SimOutputSink sink, gpointer data)
{
  stdout_sink = sink;
  stdout_sink_data = data;
}

/* fd is STDOUT_FILENO for stdout: the sink, when one is set, takes it. */
static gboolean
write_out(int fd, const char *text, gsize length)
{
  if (fd != STDOUT_FILENO || stdout_sink == NULL)
    return write_all(fd, text, length);
  errno = 0;
  if (length == 0 || stdout_sink(text, length, stdout_sink_data))
    return TRUE;
  if (errno == 0)
    errno = EIO;
  return FALSE;
}

gboolean
sim_output_stdout(const char *text, gsize length, GError **error)
{
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout) && write_out(STDOUT_FILENO, text, length))
    return TRUE;
  int e = errno ? errno : EIO;
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "stdout: cannot write the report: %s", g_strerror(e));
  return FALSE;
}

static gboolean
save_failed(GError **error, const char *option, const char *path, const char *what, int e)
{
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s %s: %s: %s", option, path, what, g_strerror(e));
  return FALSE;
}

struct SimOutputStream {
  char *option, *path; /* path NULL: stdout */
  char *temp;          /* registered; NULL for stdout */
  int fd;
  GString *buffer;
};

/* Pieces are gathered up to this size before a write(2). */
#define STREAM_BUFFER (64 * 1024)

SimOutputStream *
sim_output_stream_open(const char *option, const char *path, GError **error)
{
  SimOutputStream *s = g_new0(SimOutputStream, 1);
  s->option = g_strdup(option);
  s->buffer = g_string_sized_new(STREAM_BUFFER);
  if (path == NULL) {
    /* Whatever stdio still holds goes first, to keep the order. */
    fflush(stdout);
    s->fd = STDOUT_FILENO;
    return s;
  }
  s->path = g_strdup(path);
  if (*path == '\0' || g_str_has_suffix(path, G_DIR_SEPARATOR_S) || g_file_test(path, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s %s: expected the name of a file, not of a directory", option,
                path);
    sim_output_stream_abort(s);
    return NULL;
  }
  s->fd = sim_output_temp_open(path, 0666, &s->temp);
  if (s->fd < 0) {
    save_failed(error, option, path, "cannot create a file there", errno);
    sim_output_stream_abort(s);
    return NULL;
  }
  return s;
}

static gboolean
stream_failed(SimOutputStream *s, GError **error, const char *what, int e)
{
  if (s->path)
    save_failed(error, s->option, s->path, what, e);
  else
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "stdout: cannot write the report: %s", g_strerror(e));
  return FALSE;
}

static gboolean
stream_flush(SimOutputStream *s, GError **error)
{
  gboolean ok = write_out(s->fd, s->buffer->str, s->buffer->len);
  int e = errno;
  /* Emptied even on failure, so that nothing is written twice. */
  g_string_truncate(s->buffer, 0);
  return ok || stream_failed(s, error, "cannot write", e);
}

gboolean
sim_output_stream_write(SimOutputStream *s, const char *text, gsize length, GError **error)
{
  if (s->buffer->len + length > STREAM_BUFFER && !stream_flush(s, error))
    return FALSE;
  if (length >= STREAM_BUFFER)
    return write_out(s->fd, text, length) || stream_failed(s, error, "cannot write", errno);
  g_string_append_len(s->buffer, text, (gssize)length);
  return TRUE;
}

gboolean
sim_output_stream_commit(SimOutputStream *s, GError **error)
{
  gboolean ok = stream_flush(s, error);
  if (ok && s->path) {
    /* As g_file_set_contents: a file replaced is flushed first, so that a
     * crash leaves the old contents or the new, never an empty file. */
    if (g_file_test(s->path, G_FILE_TEST_EXISTS) && fsync(s->fd) != 0)
      ok = stream_failed(s, error, "cannot write", errno);
    int fd = s->fd;
    s->fd = -1;
    if (close(fd) != 0 && ok)
      ok = stream_failed(s, error, "cannot write", errno);
    if (ok && g_rename(s->temp, s->path) != 0)
      ok = stream_failed(s, error, "cannot replace it", errno);
    if (ok)
      g_clear_pointer(&s->temp, sim_output_temp_forget);
  }
  sim_output_stream_abort(s);
  return ok;
}

void
sim_output_stream_abort(SimOutputStream *s)
{
  if (s == NULL)
    return;
  /* What stdout was given cannot be taken back: it all goes, in order, so
   * that a failure shows after the last row before it. */
  if (s->path == NULL)
    (void)write_out(s->fd, s->buffer->str, s->buffer->len);
  if (s->path && s->fd >= 0)
    close(s->fd);
  sim_output_temp_discard(s->temp);
  g_string_free(s->buffer, TRUE);
  g_free(s->option);
  g_free(s->path);
  g_free(s);
}

gboolean
sim_output_save(const char *option, const char *path, const char *text, gsize length, GError **error)
{
  SimOutputStream *s = sim_output_stream_open(option, path, error);
  if (s == NULL)
    return FALSE;
  if (!sim_output_stream_write(s, text, length, error)) {
    sim_output_stream_abort(s);
    return FALSE;
  }
  return sim_output_stream_commit(s, error);
}
