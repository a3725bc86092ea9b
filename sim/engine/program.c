#include "engine/internal/program_private.h"

#include "base/error.h"

#include <string.h>

static void
stream_free(gpointer data)
{
  SimStream *stream = data;
  g_free(stream->name);
  g_free(stream->ops);
  g_free(stream);
}

/* The capacity of an op, action or stream array when it first grows. */
#define FIRST_CAPACITY 64

/* Room for one more element; doubles the capacity when full. */
#define GROW(array, len, cap)                                      \
  do {                                                             \
    if ((len) == (cap)) {                                          \
      (cap) = (cap) ? 2 * (cap) : FIRST_CAPACITY;                  \
      (array) = g_realloc_n((array), (cap), sizeof *(array));      \
    }                                                              \
  } while (0)

/* Ops a program may hold: capacities double, so this keeps them within a
 * guint and every op's index below SIM_NO_OP. */
#define MAX_OPS (1u << 31)

/* sim_program_reset drops the address cache of sim_program_intern beyond
 * this many entries (stale addresses of freed names pile up in a sweep). */
#define LABEL_CACHE_MAX 65536

SimProgram *
sim_program_new(void)
{
  SimProgram *p = g_new0(SimProgram, 1);
  p->streams = g_ptr_array_new_with_free_func(stream_free);
  p->labels = g_ptr_array_new_with_free_func(g_free);
  p->label_ids = g_hash_table_new(g_str_hash, g_str_equal);
  p->label_cache = g_hash_table_new(g_direct_hash, g_direct_equal);
  p->events = g_array_new(FALSE, FALSE, sizeof(SimEvent));
  p->microbatch_runs = g_array_new(FALSE, FALSE, sizeof(SimMicrobatchRun));
  p->n_gpus = 1;
  p->baseline_tag = sim_program_intern(p, "static");
  p->input_tag = sim_program_intern(p, "checkpointed input");
  p->record_label = sim_program_intern(p, "record");
  p->wait_label = sim_program_intern(p, "wait");
  p->second_record = SIM_NO_OP;
  p->workspace_tag = sim_program_intern(p, "transient workspace");
  p->grads_tag = sim_program_intern(p, "gradients");
  p->outputs_tag = sim_program_intern(p, "held outputs");
  return p;
}

void
sim_program_free(SimProgram *p)
{
  if (p == NULL)
    return;
  g_free(p->ops);
  g_free(p->mem);
  g_free(p->launch);
  g_array_unref(p->events);
  g_array_unref(p->microbatch_runs);
  g_ptr_array_unref(p->streams);
  g_hash_table_unref(p->label_ids);
  g_hash_table_unref(p->label_cache);
  g_free(p->slot_names);
  g_free(p->slot_ids);
  g_ptr_array_unref(p->labels);
  g_free(p);
}

void
sim_program_reset(SimProgram *p)
{
  p->n_ops = 0;
  p->n_mem = 0;
  p->n_launch = 0;
  p->n_launched = 0;
  p->n_blocking = 0;
  g_ptr_array_set_size(p->streams, 0);
  g_array_set_size(p->events, 0);
  g_array_set_size(p->microbatch_runs, 0);
  p->second_record = SIM_NO_OP;
  memset(p->baseline, 0, sizeof p->baseline[0] * 2 * MAX(p->n_gpus, 1u));
  p->n_gpus = 1;
  memset(p->compute_work, 0, sizeof p->compute_work);
  memset(p->kernel_work, 0, sizeof p->kernel_work);
  memset(p->copy_bytes, 0, sizeof p->copy_bytes);
  memset(p->copies, 0, sizeof p->copies);
  p->copied = FALSE;
  /* Labels stay interned: a planner reuses the same names on every lowering.
   * The address cache is dropped when it grows: a sweep lowers workload after
   * workload into one program, and their freed names leave stale entries. */
  if (g_hash_table_size(p->label_cache) > LABEL_CACHE_MAX)
    g_hash_table_remove_all(p->label_cache);
}

void
sim_program_set_copies(SimProgram *p, const guint *copies)
{
  guint at = 0;
  for (guint g = 0; g < p->n_gpus; g++) {
    g_assert(copies[g] >= 1);
    p->step_gpu[g] = (guint16)at;
    at += copies[g];
    g_assert(at <= SIM_NODE_MAX_GPUS);
  }
  p->step_gpu[p->n_gpus] = (guint16)at;
  p->copied = TRUE;
}

void
sim_program_repeat_sums(SimProgram *p, guint32 first, guint32 end, guint times)
{
  g_assert(first <= end && end <= p->n_ops);
  for (guint t = 0; t < times; t++)
    for (guint32 i = first; i < end; i++) {
      const SimOp *op = &p->ops[i];
      /* What the builders add: a compute op's seconds, a host op's when it
       * is work on the host (sim_program_host_work; a pinned allocation,
       * phase alloc, is not), a copy's bytes. */
      if (op->kind == SIM_OP_COMPUTE || (op->kind == SIM_OP_HOST_ALLOC && op->phase != SIM_PHASE_ALLOC))
        p->compute_work[sim_phase_work(op->phase)] += op->work;
      else if (op->kind == SIM_OP_COPY) {
        p->copy_bytes[op->dir] += op->bytes;
        p->copies[op->dir]++;
      }
    }
}

void
sim_program_mark_microbatch(SimProgram *p, gint32 microbatch)
{
  GArray *runs = p->microbatch_runs;
  SimMicrobatchRun *last = runs->len ? &g_array_index(runs, SimMicrobatchRun, runs->len - 1) : NULL;
  if (last && last->first == p->n_ops) /* no op since the last mark: it is replaced */
    last->microbatch = microbatch;
  else if (last == NULL || last->microbatch != microbatch)
    g_array_append_val(runs, ((SimMicrobatchRun){ .first = p->n_ops, .microbatch = microbatch }));
}

gint32
sim_program_op_microbatch(const SimProgram *p, guint32 op)
{
  const GArray *runs = p->microbatch_runs;
  /* The last run that starts at or before `op`. */
  guint lo = 0, hi = runs->len;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (g_array_index(runs, SimMicrobatchRun, mid).first <= op)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo == 0 ? -1 : g_array_index(runs, SimMicrobatchRun, lo - 1).microbatch;
}

guint32
sim_program_intern(SimProgram *p, const char *label)
{
  gpointer id = g_hash_table_lookup(p->label_cache, label);
  if (id && strcmp(g_ptr_array_index(p->labels, GPOINTER_TO_UINT(id) - 1), label) == 0)
    return GPOINTER_TO_UINT(id) - 1;
  guint32 index;
  if (g_hash_table_lookup_extended(p->label_ids, label, NULL, &id)) {
    index = GPOINTER_TO_UINT(id);
  } else {
    /* A tag is 31 bits in a SimMemAction. */
    g_assert(p->labels->len < G_MAXINT32);
    char *copy = g_strdup(label);
    index = p->labels->len;
    g_ptr_array_add(p->labels, copy);
    g_hash_table_insert(p->label_ids, copy, GUINT_TO_POINTER(index));
  }
  g_hash_table_insert(p->label_cache, (gpointer)label, GUINT_TO_POINTER(index + 1));
  return index;
}

void
sim_program_grow_slots(SimProgram *p, guint slot)
{
  guint cap = MAX(slot + 1, 2 * p->slot_cap);
  p->slot_names = g_renew(const char *, p->slot_names, cap);
  p->slot_ids = g_renew(guint32, p->slot_ids, cap);
  for (guint i = p->slot_cap; i < cap; i++)
    p->slot_names[i] = NULL;
  p->slot_cap = cap;
}

guint32
sim_program_add_stream_on(SimProgram *p, const char *name, guint gpu)
{
  g_assert(gpu < SIM_NODE_MAX_GPUS);
  g_assert(p->streams->len < SIM_PROGRAM_MAX_STREAMS); /* a memory action's stream is 11 bits */
  SimStream *stream = g_new0(SimStream, 1);
  stream->name = g_strdup(name);
  stream->gpu = gpu;
  p->n_gpus = MAX(p->n_gpus, gpu + 1);
  g_ptr_array_add(p->streams, stream);
  return p->streams->len - 1;
}

guint32
sim_program_add_stream(SimProgram *p, const char *name)
{
  return sim_program_add_stream_on(p, name, 0);
}

guint32
sim_program_add_barrier(SimProgram *p, guint32 label, gint32 layer, guint32 count)
{
  g_assert(count >= 1);
  SimEvent event = { label, layer, SIM_NO_OP, count, 0 };
  g_array_append_val(p->events, event);
  return p->events->len - 1;
}

guint32
sim_program_add_event(SimProgram *p, guint32 label, gint32 layer)
{
  return sim_program_add_barrier(p, label, layer, 1);
}

void
sim_program_set_baseline(SimProgram *p, guint pool, guint64 bytes, const char *tag)
{
  g_assert(pool < SIM_PROGRAM_MAX_POOLS);
  p->baseline[pool] = bytes;
  p->baseline_tag = sim_program_intern(p, tag);
}

void
sim_program_grow_ops(SimProgram *p, guint32 stream)
{
  g_assert(p->n_ops < MAX_OPS);
  GROW(p->ops, p->n_ops, p->ops_cap);
  SimStream *s = g_ptr_array_index(p->streams, stream);
  GROW(s->ops, s->n_ops, s->cap);
}

static guint32
add_sync(SimProgram *p, SimOpKind kind, guint32 stream, guint32 event)
{
  g_return_val_if_fail(stream < p->streams->len, SIM_NO_OP);
  g_return_val_if_fail(event < p->events->len, SIM_NO_OP);
  guint32 index = sim_program_add_op(p, kind, SIM_PHASE_SYNC, stream, SIM_NO_LAYER,
                                     kind == SIM_OP_RECORD ? p->record_label : p->wait_label);
  p->ops[index].event = event;
  if (kind == SIM_OP_RECORD) {
    SimEvent *ev = &g_array_index(p->events, SimEvent, event);
    if (ev->records < ev->count)
      ev->recorder = index;
    else if (p->second_record == SIM_NO_OP)
      p->second_record = index;
    ev->records++;
  }
  return index;
}

guint32
sim_program_record(SimProgram *p, guint32 stream, guint32 event)
{
  return add_sync(p, SIM_OP_RECORD, stream, event);
}

guint32
sim_program_wait(SimProgram *p, guint32 stream, guint32 event)
{
  return add_sync(p, SIM_OP_WAIT, stream, event);
}

guint32
sim_program_compute(SimProgram *p, guint32 stream, double seconds, SimPhase phase, gint32 layer, guint32 label)
{
  return sim_program_compute_inline(p, stream, seconds, phase, layer, label);
}

guint32
sim_program_copy(SimProgram *p, guint32 stream, SimDir dir, guint64 bytes, SimHostMemory host, gint32 layer,
                 guint32 label)
{
  return sim_program_copy_inline(p, stream, dir, bytes, host, layer, label);
}

void
sim_program_mem(SimProgram *p, guint32 op, SimWhen when, SimPool pool, gint64 delta, guint32 tag, gint32 layer)
{
  sim_program_mem_inline(p, op, when, pool, delta, tag, layer);
}

/* An op that only holds its stream for `seconds` (host_alloc, send). */
static guint32
add_timed(SimProgram *p, SimOpKind kind, SimPhase phase, guint32 stream, double seconds, gint32 layer, guint32 label)
{
  g_return_val_if_fail(stream < p->streams->len, SIM_NO_OP);
  g_return_val_if_fail(seconds >= 0, SIM_NO_OP);
  guint32 index = sim_program_add_op(p, kind, phase, stream, layer, label);
  p->ops[index].work = seconds;
  return index;
}

/* An op of the host thread's own (a cudaHostAlloc, an optimizer step on
 * the CPU): it blocks the host until it ends. */
static guint32
add_host(SimProgram *p, SimPhase phase, guint32 stream, double seconds, gint32 layer, guint32 label)
{
  guint32 index = add_timed(p, SIM_OP_HOST_ALLOC, phase, stream, seconds, layer, label);
  p->n_blocking += index != SIM_NO_OP;
  return index;
}

guint32
sim_program_host_alloc(SimProgram *p, guint32 stream, double seconds, gint32 layer, guint32 label)
{
  return add_host(p, SIM_PHASE_ALLOC, stream, seconds, layer, label);
}

guint32
sim_program_send(SimProgram *p, guint32 stream, double seconds, gint32 layer, guint32 label)
{
  return add_timed(p, SIM_OP_SEND, SIM_PHASE_SEND, stream, seconds, layer, label);
}

guint32
sim_program_host_work(SimProgram *p, guint32 stream, double seconds, SimPhase phase, gint32 layer, guint32 label)
{
  guint32 index = add_host(p, phase, stream, seconds, layer, label);
  if (index != SIM_NO_OP)
    p->compute_work[sim_phase_work(phase)] += seconds;
  return index;
}

guint32
sim_program_collective(SimProgram *p, guint32 stream, double seconds, gint32 layer, guint32 label)
{
  return add_timed(p, SIM_OP_COLLECTIVE, SIM_PHASE_COMM, stream, seconds, layer, label);
}

void
sim_program_set_launch(SimProgram *p, guint32 op, double seconds)
{
  sim_program_set_launch_inline(p, op, seconds);
}

void
sim_program_grow_launch(SimProgram *p)
{
  if (p->launch_cap < p->n_ops) {
    p->launch_cap = MAX(p->n_ops, 2 * p->launch_cap);
    p->launch = g_renew(double, p->launch, p->launch_cap);
  }
  for (guint i = p->n_launch; i < p->n_ops; i++)
    p->launch[i] = 0.0;
  p->n_launch = p->n_ops;
}

void
sim_program_grow_mem(SimProgram *p)
{
  GROW(p->mem, p->n_mem, p->mem_cap);
}

gboolean
sim_program_validate(const SimProgram *p, GError **error)
{
  if (p->second_record == SIM_NO_OP)
    return TRUE;
  guint32 event = sim_program_op(p, p->second_record)->event;
  g_autofree char *first = sim_program_describe_op(p, sim_program_event(p, event)->recorder);
  g_autofree char *second = sim_program_describe_op(p, p->second_record);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL, "event %u is recorded more than %u time%s: by %s and by %s", event,
              sim_program_event(p, event)->count, sim_program_event(p, event)->count == 1 ? "" : "s", first, second);
  return FALSE;
}

const char *
sim_phase_name(SimPhase phase)
{
  static const char *names[SIM_PHASE_COUNT] = {
    [SIM_PHASE_FORWARD] = "forward", [SIM_PHASE_BACKWARD] = "backward",
    [SIM_PHASE_RECOMPUTE] = "recompute", [SIM_PHASE_OFFLOAD] = "offload",
    [SIM_PHASE_RELOAD] = "reload", [SIM_PHASE_ALLOC] = "host-alloc", [SIM_PHASE_SYNC] = "sync",
    [SIM_PHASE_SEND] = "send", [SIM_PHASE_COMM] = "comm", [SIM_PHASE_OPTIMIZER] = "optimizer",
  };
  return phase < SIM_PHASE_COUNT ? names[phase] : "?";
}

const char *
sim_pool_name(SimPool pool)
{
  static const char *names[SIM_POOL_COUNT] = { [SIM_POOL_DEVICE] = "device", [SIM_POOL_HOST] = "host" };
  return pool < SIM_POOL_COUNT ? names[pool] : "?";
}

/* "event 'd2h-done' L3" */
static char *
describe_event(const SimProgram *p, guint32 index)
{
  const SimEvent *event = sim_program_event(p, index);
  if (event->layer == SIM_NO_LAYER)
    return g_strdup_printf("event '%s'", sim_program_label(p, event->label));
  return g_strdup_printf("event '%s' L%d", sim_program_label(p, event->label), event->layer);
}

char *
sim_program_describe_op(const SimProgram *p, guint32 index)
{
  const SimOp *op = sim_program_op(p, index);
  const SimStream *stream = g_ptr_array_index(p->streams, op->stream);
  g_autofree char *layer = op->layer == SIM_NO_LAYER ? g_strdup("") : g_strdup_printf(" L%d", op->layer);
  if (op->kind == SIM_OP_RECORD || op->kind == SIM_OP_WAIT) {
    g_autofree char *event = describe_event(p, op->event);
    return g_strdup_printf("op %u '%s %s' on stream '%s'", index, sim_program_label(p, op->label),
                           event, stream->name);
  }
  return g_strdup_printf("op %u '%s %s%s' on stream '%s'", index, sim_phase_name(op->phase),
                         sim_program_label(p, op->label), layer, stream->name);
}

guint64
sim_program_storage_bytes(const SimProgram *p)
{
  guint64 bytes = (guint64)p->ops_cap * sizeof(SimOp) + (guint64)p->mem_cap * sizeof(SimMemAction);
  for (guint s = 0; s < p->streams->len; s++)
    bytes += ((SimStream *)g_ptr_array_index(p->streams, s))->cap * sizeof(guint32);
  return bytes;
}
