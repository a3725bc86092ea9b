#include "sweep/grid.h"

#include "base/error.h"
#include "result/evaluate.h"

#include <string.h>

void
sweep_grid_axis_free(SweepGridAxis *a)
{
  if (a == NULL)
    return;
  g_free(a->name);
  g_free(a->group);
  g_free(a->key);
  g_free(a->option);
  if (a->values)
    g_ptr_array_unref(a->values);
  g_free(a);
}

SweepGridAxis *
sweep_grid_axis_parse(const char *text, const char *option, GError **error)
{
  g_return_val_if_fail(option != NULL, NULL);
  const char *eq = strchr(text, '=');
  g_autofree char *name = eq ? g_strstrip(g_strndup(text, (gsize)(eq - text))) : NULL;
  const char *dot = name ? strrchr(name, '.') : NULL;
  if (name == NULL || dot == NULL || dot == name || dot[1] == '\0') {
    g_autofree char *quoted = sim_error_quote(text);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected group.key=v1,v2,..., got '%s'", option, quoted);
    return NULL;
  }
  g_autoptr(SweepGridAxis) a = g_new0(SweepGridAxis, 1);
  a->option = g_strdup(option);
  a->group = g_strndup(name, (gsize)(dot - name));
  a->key = g_strdup(dot + 1);
  a->name = g_steal_pointer(&name);
  a->values = g_ptr_array_new_with_free_func(g_free);
  g_auto(GStrv) values = g_strsplit(eq + 1, ",", -1);
  g_autofree char *quoted = sim_error_quote(a->name);
  if (values[0] == NULL || (values[1] == NULL && *g_strstrip(values[0]) == '\0')) {
    /* `link.latency=` would be a grid of no points: a sweep that runs nothing. */
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s %s: no values (expected %s=v1,v2,...)", option, quoted, quoted);
    return NULL;
  }
  for (char **v = values; *v; v++) {
    g_strstrip(*v);
    if (**v == '\0') {
      g_autofree char *list = sim_error_quote(eq + 1);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s %s: an empty value in '%s'", option, quoted, list);
      return NULL;
    }
    g_ptr_array_add(a->values, g_strdup(*v));
  }
  return g_steal_pointer(&a);
}

static void
point_free(gpointer data)
{
  SweepGridPoint *p = data;
  if (p->results)
    g_ptr_array_unref(p->results);
  g_free(p);
}

void
sweep_grid_free(SweepGrid *g)
{
  if (g == NULL)
    return;
  g_ptr_array_unref(g->axes);
  if (g->points)
    g_ptr_array_unref(g->points);
  g_free(g);
}

const char *
sweep_grid_value(const SweepGrid *g, guint a, guint64 index)
{
  for (guint k = g->axes->len; k-- > a + 1;)
    index /= ((SweepGridAxis *)g_ptr_array_index(g->axes, k))->values->len;
  const SweepGridAxis *axis = g_ptr_array_index(g->axes, a);
  return g_ptr_array_index(axis->values, index % axis->values->len);
}

/* One sweep point: the base configuration with this point's values. */
static SimScenario *
point_scenario(const SimConfig *base, const SweepGrid *g, guint64 index, GError **error)
{
  g_autoptr(SimConfig) c = sim_config_copy(base);
  for (guint a = 0; a < g->axes->len; a++) {
    const SweepGridAxis *axis = g_ptr_array_index(g->axes, a);
    sim_scenario_config_set(c, axis->group, axis->key, sweep_grid_value(g, a, index), axis->option);
  }
  return sim_scenario_from_config(c, error);
}

/* What each worker thread keeps between its points. */
typedef struct {
  SimEvaluator *evaluator;
} Worker;

static void
worker_free(gpointer data)
{
  Worker *w = data;
  sim_evaluate_free(w->evaluator);
  g_free(w);
}

static GPrivate worker_key = G_PRIVATE_INIT(worker_free);

/* A point in the window: made and freed by the calling thread, filled by a
 * worker. */
typedef struct {
  SweepGridPoint point;
  guint64 position; /* in the shard: its slot is position % window */
  GString *text;
  GError *error;
} Job;

typedef struct {
  const SimConfig *base;
  SweepGrid *grid;
  SweepGridStream *stream;
  gint done;
  gint stop;          /* the sweep failed: points still queued are skipped */
  GMutex lock;        /* guards slots */
  GCond finished;     /* a job landed in its slot */
  Job **slots;        /* window entries; NULL until their job is finished */
  guint window;
  guint alive;        /* jobs made and not yet freed (calling thread only) */
} Shared;

static Job *
job_new(Shared *sh, guint64 position, guint64 index)
{
  Job *job = g_new0(Job, 1);
  job->point.index = (guint)index;
  job->position = position;
  job->text = g_string_new(NULL);
  sh->alive++;
  sh->stream->peak_held = MAX(sh->stream->peak_held, sh->alive);
  return job;
}

static void
job_free(Shared *sh, Job *job)
{
  if (job->point.results)
    g_ptr_array_unref(job->point.results);
  g_string_free(job->text, TRUE);
  g_clear_error(&job->error);
  g_free(job);
  sh->alive--;
}

static void
run_point(gpointer data, gpointer user)
{
  Shared *sh = user;
  Job *job = data;
  SweepGridPoint *point = &job->point;
  if (!g_atomic_int_get(&sh->stop)) {
    Worker *w = g_private_get(&worker_key);
    if (w == NULL) {
      w = g_new0(Worker, 1);
      w->evaluator = sim_evaluate_new();
      g_private_set(&worker_key, w);
    }
    g_autoptr(SimScenario) s = point_scenario(sh->base, sh->grid, point->index, &job->error);
    point->results = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
    SimEvaluateOptions options = { 0 };
    for (guint i = 0; s && i < s->policies->len && !job->error; i++) {
      SimResult *r = sim_evaluate(w->evaluator, s, g_ptr_array_index(s->policies, i), &options, &job->error);
      if (r)
        g_ptr_array_add(point->results, r);
    }
    if (job->error) {
      g_prefix_error(&job->error, "sweep point %u: ", point->index);
      /* The policies before the failing one are not the point's figures. */
      g_clear_pointer(&point->results, g_ptr_array_unref);
    }
    /* Formatted and freed here, in parallel: the calling thread only copies
     * bytes out, so that it does not become the sweep's serial part. */
    else if (sh->stream->format && !sh->stream->format(sh->grid, point, job->text, sh->stream->data))
      g_clear_pointer(&point->results, g_ptr_array_unref);
  }
  g_mutex_lock(&sh->lock);
  sh->slots[job->position % sh->window] = job;
  g_cond_signal(&sh->finished);
  g_mutex_unlock(&sh->lock);
  g_atomic_int_inc(&sh->done);
}

SweepGrid *
sweep_grid_new(const SimConfig *base, GPtrArray *axes, const SweepGridOptions *o, GError **error)
{
  g_autoptr(SweepGrid) g = g_new0(SweepGrid, 1);
  g->axes = axes;
  g->size = 1;
  for (guint a = 0; a < axes->len; a++) {
    const SweepGridAxis *axis = g_ptr_array_index(axes, a);
    g->size *= axis->values->len;
    if (g->size > SWEEP_GRID_MAX_POINTS) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: more than %llu points", axis->option, SWEEP_GRID_MAX_POINTS);
      return NULL;
    }
  }
  /* A key given twice would be set by its last axis only, while the rows
   * are labelled with both: every point mislabelled. */
  for (guint a = 0; a < axes->len; a++) {
    const SweepGridAxis *axis = g_ptr_array_index(axes, a);
    for (guint b = 0; b < a; b++) {
      const SweepGridAxis *first = g_ptr_array_index(axes, b);
      if (strcmp(first->group, axis->group) == 0 && strcmp(first->key, axis->key) == 0) {
        g_autofree char *name = sim_error_quote(axis->name);
        g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                    "%s %s: the key is given twice (give all its values once: %s=v1,v2,...)", axis->option, name, name);
        return NULL;
      }
    }
  }
  guint shards = MAX(o->shards, 1u);
  if (o->shard >= shards) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: expected I/N with I < N, got %u/%u", o->shard_option, o->shard,
                shards);
    return NULL;
  }
  /* Every value alone first: a typo fails now, naming itself. */
  for (guint a = 0; a < axes->len; a++) {
    const SweepGridAxis *axis = g_ptr_array_index(axes, a);
    for (guint v = 0; v < axis->values->len; v++) {
      g_autoptr(SimConfig) c = sim_config_copy(base);
      sim_scenario_config_set(c, axis->group, axis->key, g_ptr_array_index(axis->values, v), axis->option);
      g_autoptr(SimScenario) s = sim_scenario_from_config(c, error);
      if (s == NULL)
        return NULL;
    }
  }
  g->points = g_ptr_array_new_with_free_func(point_free);
  return g_steal_pointer(&g);
}

void
sweep_grid_keep(SweepGrid *g, SweepGridPoint *point)
{
  SweepGridPoint *p = g_new0(SweepGridPoint, 1);
  p->index = point->index;
  p->results = g_steal_pointer(&point->results);
  g_ptr_array_add(g->points, p);
}

gboolean
sweep_grid_stream(SweepGrid *g, const SimConfig *base, const SweepGridOptions *o, SweepGridStream *stream,
                    GError **error)
{
  guint shards = MAX(o->shards, 1u);
  guint64 total = g->size > o->shard ? (g->size - o->shard + shards - 1) / shards : 0;
  guint jobs = o->jobs ? o->jobs : g_get_num_processors();
  Shared sh = { .base = base, .grid = g, .stream = stream };
  sh.window = stream->window ? stream->window : 64 * jobs;
  sh.slots = g_new0(Job *, sh.window);
  stream->peak_held = 0;
  g_mutex_init(&sh.lock);
  g_cond_init(&sh.finished);
  GThreadPool *pool = g_thread_pool_new(run_point, &sh, (gint)jobs, TRUE, NULL);
  GError *failure = NULL;
  guint64 pushed = 0, written = 0;
  gint64 shown = g_get_monotonic_time();
  while (written < total && failure == NULL) {
    /* Keep the window full: never more than `window` points alive, however
     * far the workers could run ahead of a slow point. */
    for (; pushed < total && pushed < written + sh.window; pushed++)
      g_thread_pool_push(pool, job_new(&sh, pushed, o->shard + pushed * shards), NULL);
    Job **slot = &sh.slots[written % sh.window];
    g_mutex_lock(&sh.lock);
    gint64 deadline = shown + G_TIME_SPAN_SECOND / 10;
    while (*slot == NULL && g_cond_wait_until(&sh.finished, &sh.lock, deadline))
      ;
    Job *job = g_steal_pointer(slot);
    g_mutex_unlock(&sh.lock);
    if (g_get_monotonic_time() >= deadline) {
      if (o->progress)
        o->progress((guint)g_atomic_int_get(&sh.done), (guint)total, o->progress_data);
      shown = g_get_monotonic_time();
    }
    if (job == NULL)
      continue;
    job->point.error = o->keep_going ? job->error : NULL;
    if (job->error && !o->keep_going)
      failure = g_steal_pointer(&job->error);
    else if (stream->write && !stream->write(g, &job->point, job->text, stream->data, &failure) && failure == NULL)
      g_set_error(&failure, SIM_ERROR, SIM_ERROR_INPUT, "sweep point %u: not written", job->point.index);
    job_free(&sh, job);
    written++;
  }
  /* On failure the points still queued skip their work; every job, run or
   * skipped, ends in its slot and is freed here. */
  if (failure)
    g_atomic_int_set(&sh.stop, 1);
  g_thread_pool_free(pool, FALSE, TRUE);
  for (guint i = 0; i < sh.window; i++)
    if (sh.slots[i])
      job_free(&sh, sh.slots[i]);
  g_free(sh.slots);
  g_cond_clear(&sh.finished);
  g_mutex_clear(&sh.lock);
  if (o->progress && failure == NULL)
    o->progress((guint)total, (guint)total, o->progress_data);
  if (failure) {
    g_propagate_error(error, failure);
    return FALSE;
  }
  return TRUE;
}

static gboolean
keep_point(SweepGrid *g, SweepGridPoint *point, const GString *text, gpointer data, GError **error)
{
  (void)text, (void)data, (void)error;
  if (point->results) /* a failed point (keep_going) has none to keep */
    sweep_grid_keep(g, point);
  return TRUE;
}

SweepGrid *
sweep_grid_run(const SimConfig *base, GPtrArray *axes, const SweepGridOptions *o, GError **error)
{
  g_autoptr(SweepGrid) g = sweep_grid_new(base, axes, o, error);
  SweepGridStream stream = { .write = keep_point };
  if (g == NULL || !sweep_grid_stream(g, base, o, &stream, error))
    return NULL;
  return g_steal_pointer(&g);
}
