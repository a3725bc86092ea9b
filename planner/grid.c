#include "grid.h"

#include "error.h"
#include "evaluate.h"

#include <string.h>

void
planner_grid_axis_free(PlannerGridAxis *a)
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

PlannerGridAxis *
planner_grid_axis_parse(const char *text, const char *option, GError **error)
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
  g_autoptr(PlannerGridAxis) a = g_new0(PlannerGridAxis, 1);
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
  PlannerGridPoint *p = data;
  if (p->results)
    g_ptr_array_unref(p->results);
  g_free(p);
}

void
planner_grid_free(PlannerGrid *g)
{
  if (g == NULL)
    return;
  g_ptr_array_unref(g->axes);
  if (g->points)
    g_ptr_array_unref(g->points);
  g_free(g);
}

const char *
planner_grid_value(const PlannerGrid *g, guint a, guint64 index)
{
  for (guint k = g->axes->len; k-- > a + 1;)
    index /= ((PlannerGridAxis *)g_ptr_array_index(g->axes, k))->values->len;
  const PlannerGridAxis *axis = g_ptr_array_index(g->axes, a);
  return g_ptr_array_index(axis->values, index % axis->values->len);
}

/* One sweep point: the base configuration with this point's values. */
static SimScenario *
point_scenario(const SimConfig *base, const PlannerGrid *g, guint64 index, GError **error)
{
  g_autoptr(SimConfig) c = sim_config_copy(base);
  for (guint a = 0; a < g->axes->len; a++) {
    const PlannerGridAxis *axis = g_ptr_array_index(g->axes, a);
    sim_config_set(c, axis->group, axis->key, planner_grid_value(g, a, index), axis->option);
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

typedef struct {
  const SimConfig *base;
  PlannerGrid *grid;
  gint done;
  GMutex lock;       /* guards the first error */
  guint64 error_index;
  GError *error;
} Shared;

static void
run_point(gpointer data, gpointer user)
{
  Shared *sh = user;
  PlannerGridPoint *point = data;
  Worker *w = g_private_get(&worker_key);
  if (w == NULL) {
    w = g_new0(Worker, 1);
    w->evaluator = sim_evaluate_new();
    g_private_set(&worker_key, w);
  }
  GError *error = NULL;
  g_autoptr(SimScenario) s = point_scenario(sh->base, sh->grid, point->index, &error);
  point->results = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  SimEvaluateOptions options = { 0 };
  for (guint i = 0; s && i < s->policies->len && !error; i++) {
    SimResult *r = sim_evaluate(w->evaluator, s, g_ptr_array_index(s->policies, i), &options, &error);
    if (r)
      g_ptr_array_add(point->results, r);
  }
  if (error) {
    g_prefix_error(&error, "sweep point %u: ", point->index);
    g_mutex_lock(&sh->lock);
    if (sh->error == NULL || point->index < sh->error_index) {
      g_clear_error(&sh->error);
      sh->error = error;
      sh->error_index = point->index;
    } else {
      g_error_free(error);
    }
    g_mutex_unlock(&sh->lock);
  }
  g_atomic_int_inc(&sh->done);
}

PlannerGrid *
planner_grid_run(const SimConfig *base, GPtrArray *axes, const PlannerGridOptions *o, GError **error)
{
  g_autoptr(PlannerGrid) g = g_new0(PlannerGrid, 1);
  g->axes = axes;
  g->size = 1;
  for (guint a = 0; a < axes->len; a++) {
    const PlannerGridAxis *axis = g_ptr_array_index(axes, a);
    g->size *= axis->values->len;
    if (g->size > PLANNER_GRID_MAX_POINTS) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: more than %llu points", axis->option, PLANNER_GRID_MAX_POINTS);
      return NULL;
    }
  }
  /* A key given twice would be set by its last axis only, while the rows
   * are labelled with both: every point mislabelled. */
  for (guint a = 0; a < axes->len; a++) {
    const PlannerGridAxis *axis = g_ptr_array_index(axes, a);
    for (guint b = 0; b < a; b++) {
      const PlannerGridAxis *first = g_ptr_array_index(axes, b);
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
    const PlannerGridAxis *axis = g_ptr_array_index(axes, a);
    for (guint v = 0; v < axis->values->len; v++) {
      g_autoptr(SimConfig) c = sim_config_copy(base);
      sim_config_set(c, axis->group, axis->key, g_ptr_array_index(axis->values, v), axis->option);
      g_autoptr(SimScenario) s = sim_scenario_from_config(c, error);
      if (s == NULL)
        return NULL;
    }
  }

  g->points = g_ptr_array_new_with_free_func(point_free);
  for (guint64 i = o->shard; i < g->size; i += shards) {
    PlannerGridPoint *p = g_new0(PlannerGridPoint, 1);
    p->index = (guint)i;
    g_ptr_array_add(g->points, p);
  }
  Shared sh = { .base = base, .grid = g };
  g_mutex_init(&sh.lock);
  guint jobs = o->jobs ? o->jobs : g_get_num_processors();
  GThreadPool *pool = g_thread_pool_new(run_point, &sh, (gint)jobs, TRUE, NULL);
  for (guint i = 0; i < g->points->len; i++)
    g_thread_pool_push(pool, g_ptr_array_index(g->points, i), NULL);
  guint total = g->points->len;
  while ((guint)g_atomic_int_get(&sh.done) < total) {
    if (o->progress)
      o->progress((guint)g_atomic_int_get(&sh.done), total, o->progress_data);
    g_usleep(100000);
  }
  g_thread_pool_free(pool, FALSE, TRUE);
  if (o->progress)
    o->progress(total, total, o->progress_data);
  g_mutex_clear(&sh.lock);
  if (sh.error) {
    g_propagate_error(error, sh.error);
    return NULL;
  }
  return g_steal_pointer(&g);
}
