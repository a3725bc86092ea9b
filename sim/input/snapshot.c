/* sim/input/snapshot.c — a PyTorch memory snapshot's measured figures (sim/input/snapshot.h). */
#include "input/snapshot.h"

#include "base/error.h"
#include "input/gzip.h"
#include "input/pickle.h"

#include <string.h>

/* More devices than any machine has: a device index past it is an error,
 * not an array that size. */
#define MAX_DEVICES 1024

typedef struct {
  gint64 t; /* microseconds: time_us, kept whole (a double of seconds since 1970 loses a quarter µs) */
  gint64 allocated, reserved; /* the change this event makes */
} Event;

typedef struct {
  guint segments;
  gint64 reserved, allocated; /* at the dump */
  GArray *events;             /* Event, in trace order */
  gint64 *levels;             /* allocated after each event, once replayed */
  gint64 start_allocated, peak_allocated, peak_reserved;
} Device;

static void
range_clear(gpointer data)
{
  g_free(((SimSnapshotRange *)data)->name);
}

void
sim_snapshot_free(SimSnapshot *s)
{
  if (s == NULL)
    return;
  if (s->ranges)
    g_array_unref(s->ranges);
  g_free(s);
}

/* "FILE: WHERE: expected WHAT, got TYPE" */
static gboolean
wrong(const char *path, const char *where, const char *expected, const SimPickleValue *got, GError **error)
{
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s: expected %s, got %s (not a torch.cuda.memory snapshot?)",
              path, where, expected, got ? sim_pickle_type_name(got->type) : "nothing");
  return FALSE;
}

static const SimPickleValue *
member(const char *path, const SimPickleValue *dict, const char *key, SimPickleType type, const char *where,
       GError **error)
{
  g_autofree char *at = g_strdup_printf("%s.%s", where, key);
  const SimPickleValue *v = sim_pickle_dict_get(dict, key);
  if (v == NULL || v->type != type) {
    g_autofree char *expected = g_strdup_printf("a %s", sim_pickle_type_name(type));
    wrong(path, at, expected, v, error);
    return NULL;
  }
  return v;
}

static gboolean
count(const char *path, const SimPickleValue *dict, const char *key, const char *where, gint64 *out, GError **error)
{
  const SimPickleValue *v = member(path, dict, key, SIM_PICKLE_INT, where, error);
  if (v == NULL)
    return FALSE;
  if (v->integer < 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s.%s: %" G_GINT64_FORMAT " (expected at least 0)", path,
                where, key, v->integer);
    return FALSE;
  }
  *out = v->integer;
  return TRUE;
}

static Device *
device_at(GPtrArray *devices, gint64 index)
{
  while (devices->len <= index)
    g_ptr_array_add(devices, NULL);
  Device *d = g_ptr_array_index(devices, index);
  if (d == NULL) {
    d = g_new0(Device, 1);
    d->events = g_array_new(FALSE, FALSE, sizeof(Event));
    g_ptr_array_index(devices, index) = d;
  }
  return d;
}

static void
device_free(gpointer data)
{
  Device *d = data;
  if (d == NULL)
    return;
  g_array_unref(d->events);
  g_free(d->levels);
  g_free(d);
}

static gboolean
device_index(const char *path, const SimPickleValue *dict, const char *where, gint64 *out, GError **error)
{
  if (!count(path, dict, "device", where, out, error))
    return FALSE;
  if (*out >= MAX_DEVICES) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s.device: %" G_GINT64_FORMAT " (expected below %d)", path,
                where, *out, MAX_DEVICES);
    return FALSE;
  }
  return TRUE;
}

static gboolean
read_segments(const char *path, const SimPickleValue *root, GPtrArray *devices, GError **error)
{
  const SimPickleValue *segments = member(path, root, "segments", SIM_PICKLE_LIST, "snapshot", error);
  if (segments == NULL)
    return FALSE;
  for (guint i = 0; i < segments->items->len; i++) {
    const SimPickleValue *seg = g_ptr_array_index(segments->items, i);
    g_autofree char *where = g_strdup_printf("segments[%u]", i);
    gint64 device, total, allocated;
    if (seg->type != SIM_PICKLE_DICT)
      return wrong(path, where, "a dict", seg, error);
    if (!device_index(path, seg, where, &device, error) || !count(path, seg, "total_size", where, &total, error)
        || !count(path, seg, "allocated_size", where, &allocated, error))
      return FALSE;
    if (allocated > total) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: %s: allocated_size %" G_GINT64_FORMAT " exceeds total_size %" G_GINT64_FORMAT, path, where,
                  allocated, total);
      return FALSE;
    }
    Device *d = device_at(devices, device);
    d->segments++;
    d->reserved += total;
    d->allocated += allocated;
  }
  return TRUE;
}

/* The change an action makes to (allocated, reserved), by its size. */
static gboolean
action_change(const char *path, const char *where, const char *action, gint64 size, Event *e, GError **error)
{
  static const char *const neutral[] = { "free_requested", "snapshot", "oom" };
  if (strcmp(action, "alloc") == 0)
    e->allocated = size;
  else if (strcmp(action, "free_completed") == 0)
    e->allocated = -size;
  else if (strcmp(action, "segment_alloc") == 0 || strcmp(action, "segment_map") == 0)
    e->reserved = size;
  else if (strcmp(action, "segment_free") == 0 || strcmp(action, "segment_unmap") == 0)
    e->reserved = -size;
  else {
    for (guint i = 0; i < G_N_ELEMENTS(neutral); i++)
      if (strcmp(action, neutral[i]) == 0)
        return TRUE;
    g_autofree char *quoted = sim_error_quote(action);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: %s.action: '%s' (expected alloc, free_requested, free_completed, segment_alloc, segment_free, "
                "segment_map, segment_unmap, snapshot or oom)",
                path, where, quoted);
    return FALSE;
  }
  return TRUE;
}

static gboolean
read_traces(const char *path, const SimPickleValue *root, GPtrArray *devices, gboolean *untimed, GError **error)
{
  const SimPickleValue *traces = member(path, root, "device_traces", SIM_PICKLE_LIST, "snapshot", error);
  if (traces == NULL)
    return FALSE;
  if (traces->items->len > MAX_DEVICES) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: device_traces: %u devices (expected at most %d)", path,
                traces->items->len, MAX_DEVICES);
    return FALSE;
  }
  for (guint dev = 0; dev < traces->items->len; dev++) {
    const SimPickleValue *list = g_ptr_array_index(traces->items, dev);
    g_autofree char *at = g_strdup_printf("device_traces[%u]", dev);
    if (list->type != SIM_PICKLE_LIST)
      return wrong(path, at, "a list", list, error);
    if (list->items->len == 0)
      continue;
    Device *d = device_at(devices, dev);
    for (guint i = 0; i < list->items->len; i++) {
      const SimPickleValue *ev = g_ptr_array_index(list->items, i);
      g_autofree char *where = g_strdup_printf("device_traces[%u][%u]", dev, i);
      if (ev->type != SIM_PICKLE_DICT)
        return wrong(path, where, "a dict", ev, error);
      const SimPickleValue *action = member(path, ev, "action", SIM_PICKLE_STRING, where, error);
      gint64 size, time_us = 0;
      if (action == NULL || !count(path, ev, "size", where, &size, error))
        return FALSE;
      /* PyTorch 2.0's entries have no time_us: peaks need none, ranges do. */
      if (sim_pickle_dict_get(ev, "time_us") == NULL)
        *untimed = TRUE;
      else if (!count(path, ev, "time_us", where, &time_us, error))
        return FALSE;
      Event e = { .t = time_us };
      if (!action_change(path, where, action->string, size, &e, error))
        return FALSE;
      g_array_append_val(d->events, e);
    }
  }
  return TRUE;
}

/* Works the levels back from the dump and replays them forward. */
static gboolean
replay(const char *path, guint index, Device *d, GError **error)
{
  gint64 net_allocated = 0, net_reserved = 0;
  for (guint i = 0; i < d->events->len; i++) {
    const Event *e = &g_array_index(d->events, Event, i);
    net_allocated += e->allocated;
    net_reserved += e->reserved;
  }
  gint64 allocated = d->allocated - net_allocated, reserved = d->reserved - net_reserved;
  d->start_allocated = allocated;
  d->peak_allocated = allocated;
  d->peak_reserved = reserved;
  d->levels = g_new(gint64, d->events->len + 1);
  for (guint i = 0; i <= d->events->len; i++) {
    if (allocated < 0 || reserved < 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                  "%s: device_traces[%u]: %s bytes fall below 0 before event %u when worked back from the "
                  "segments (expected the trace to end at the segments' state)",
                  path, index, allocated < 0 ? "allocated" : "reserved", i);
      return FALSE;
    }
    d->peak_allocated = MAX(d->peak_allocated, allocated);
    d->peak_reserved = MAX(d->peak_reserved, reserved);
    if (i == d->events->len)
      break;
    const Event *e = &g_array_index(d->events, Event, i);
    allocated += e->allocated;
    reserved += e->reserved;
    d->levels[i] = allocated;
  }
  return TRUE;
}

typedef struct {
  char *name;
  gint64 device, t; /* t in microseconds */
} Open;

static void
open_clear(gpointer data)
{
  g_free(((Open *)data)->name);
}

/* The range [start, end] on `d`: allocated at its start, at most and at its end. */
static void
range_measure(const Device *d, SimSnapshotRange *r, gint64 start, gint64 end)
{
  guint i = 0;
  while (i < d->events->len && g_array_index(d->events, Event, i).t <= start)
    i++;
  gint64 level = i ? d->levels[i - 1] : d->start_allocated;
  r->start_bytes = r->peak_bytes = level;
  for (; i < d->events->len && g_array_index(d->events, Event, i).t <= end; i++)
    r->peak_bytes = MAX(r->peak_bytes, d->levels[i]);
  r->end_bytes = i ? d->levels[i - 1] : d->start_allocated;
  gint64 t0 = d->events->len ? g_array_index(d->events, Event, 0).t : start;
  r->start_s = (start - t0) * 1e-6;
  r->seconds = (end - start) * 1e-6;
}

static gboolean
read_annotations(const char *path, const SimPickleValue *root, SimSnapshot *s, const Device *d, GError **error)
{
  const SimPickleValue *list = sim_pickle_dict_get(root, "external_annotations");
  if (list == NULL)
    return TRUE;
  if (list->type != SIM_PICKLE_LIST)
    return wrong(path, "external_annotations", "a list", list, error);
  s->annotations = list->items->len;
  g_autoptr(GArray) open = g_array_new(FALSE, FALSE, sizeof(Open));
  g_array_set_clear_func(open, open_clear);
  for (guint i = 0; i < list->items->len; i++) {
    const SimPickleValue *a = g_ptr_array_index(list->items, i);
    g_autofree char *where = g_strdup_printf("external_annotations[%u]", i);
    if (a->type != SIM_PICKLE_DICT)
      return wrong(path, where, "a dict", a, error);
    const SimPickleValue *name = member(path, a, "name", SIM_PICKLE_STRING, where, error);
    const SimPickleValue *stage = name ? member(path, a, "stage", SIM_PICKLE_STRING, where, error) : NULL;
    gint64 device, time_us;
    if (stage == NULL || !device_index(path, a, where, &device, error)
        || !count(path, a, "time_us", where, &time_us, error))
      return FALSE;
    gboolean start = strcmp(stage->string, "START") == 0;
    if (!start && strcmp(stage->string, "END") != 0) {
      g_autofree char *quoted = sim_error_quote(stage->string);
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: %s.stage: '%s' (expected START or END)", path, where,
                  quoted);
      return FALSE;
    }
    if (start) {
      Open o = { g_strdup(name->string), device, time_us };
      g_array_append_val(open, o);
      continue;
    }
    /* The latest START of the same name and device: ranges of one name nest. */
    for (guint j = open->len; j-- > 0;) {
      Open *o = &g_array_index(open, Open, j);
      if (o->device != device || strcmp(o->name, name->string) != 0)
        continue;
      if (device == s->device && d) {
        SimSnapshotRange r = { .name = g_steal_pointer(&o->name) };
        range_measure(d, &r, o->t, time_us);
        g_array_append_val(s->ranges, r);
      }
      g_array_remove_index(open, j);
      break;
    }
  }
  return TRUE;
}

static gint
range_compare(gconstpointer a, gconstpointer b)
{
  double x = ((const SimSnapshotRange *)a)->start_s, y = ((const SimSnapshotRange *)b)->start_s;
  return (x > y) - (x < y);
}

SimSnapshot *
sim_snapshot_load(const char *path, GError **error)
{
  g_autofree char *data = NULL;
  gsize length = 0;
  if (!sim_gzip_read_input(path, "the snapshot", &data, &length, error))
    return NULL;
  return sim_snapshot_load_data(data, length, path, error);
}

SimSnapshot *
sim_snapshot_load_data(const char *data, gsize length, const char *path, GError **error)
{
  g_autoptr(SimPickle) pickle = sim_pickle_load_data(data, length, path, error);
  if (pickle == NULL)
    return NULL;
  const SimPickleValue *root = sim_pickle_root(pickle);
  if (root->type != SIM_PICKLE_DICT) {
    wrong(path, "snapshot", "a dict (torch.cuda.memory._dump_snapshot's)", root, error);
    return NULL;
  }
  g_autoptr(GPtrArray) devices = g_ptr_array_new_with_free_func(device_free);
  g_autoptr(SimSnapshot) s = g_new0(SimSnapshot, 1);
  if (!read_segments(path, root, devices, error) || !read_traces(path, root, devices, &s->untimed, error))
    return NULL;
  s->ranges = g_array_new(FALSE, FALSE, sizeof(SimSnapshotRange));
  g_array_set_clear_func(s->ranges, range_clear);
  const Device *chosen = NULL;
  for (guint i = 0; i < devices->len; i++) {
    Device *d = g_ptr_array_index(devices, i);
    if (d == NULL)
      continue;
    if (!replay(path, i, d, error))
      return NULL;
    s->devices++;
    if (chosen == NULL || d->peak_allocated > chosen->peak_allocated) {
      chosen = d;
      s->device = i;
    }
  }
  if (chosen) {
    s->segments = chosen->segments;
    s->reserved_bytes = chosen->reserved;
    s->allocated_bytes = chosen->allocated;
    s->events = chosen->events->len;
    s->has_trace = s->events > 0;
    s->trace_seconds = s->events && !s->untimed ? (g_array_index(chosen->events, Event, s->events - 1).t
                                     - g_array_index(chosen->events, Event, 0).t) * 1e-6 : 0;
    s->peak_allocated_bytes = chosen->peak_allocated;
    s->peak_reserved_bytes = chosen->peak_reserved;
  }
  if (!read_annotations(path, root, s, s->untimed ? NULL : chosen, error))
    return NULL;
  g_array_sort(s->ranges, range_compare);
  return g_steal_pointer(&s);
}
