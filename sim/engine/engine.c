#include "engine/internal/engine_private.h"

#include "base/error.h"
#include "engine/heap_inl.h"
#include "engine/internal/gpu_set_inl.h"
#include "engine/invariants.h"

#include <math.h>
#include <stdlib.h>

/* Not a stream: the end of a list of streams waiting on one event, and
 * start_ready's "no stream to go on with". */
#define NO_STREAM G_MAXUINT32

/* Run.copy_state holds two bits per direction d, COPY_BITS(d, ...):
 * COPY_ACTIVE, a copy is active on d's engine; COPY_LATENCY, it is in its
 * latency phase.  Run.signature puts the number of running computes above
 * them, at SIGNATURE_COMPUTE_SHIFT. */
#define COPY_LATENCY 1u
#define COPY_ACTIVE 2u
#define COPY_BITS(d, bits) ((bits) << (2 * (d)))
/* A collective runs on the GPU (Gpu.collectives > 0): compute is slowed. */
#define SIGNATURE_COLLECTIVE (1u << (2 * SIM_DIR_COUNT))
#define SIGNATURE_COMPUTE_SHIFT (2 * SIM_DIR_COUNT + 1)

/* Completions within NEAR_TIE × max(1 s, t) of the next instant t happen at
 * it: far below any modelled effect, far above rounding. */
#define NEAR_TIE 1e-12

/* Run.signature before the first update_rates: no real signature, so the
 * first interval computes its rates. */
#define NO_SIGNATURE G_MAXUINT

typedef struct {
  guint32 pos;         /* index of the head op in the stream's list */
  guint32 next_waiter; /* next stream blocked on the same event, or NO_STREAM */
} StreamState;

typedef struct {
  gboolean recorded;
  guint32 remaining;    /* records still to come before it happens (a barrier's members) */
  guint32 first_waiter; /* stream index, or NO_STREAM */
} EventState;

/* One copy engine per direction and GPU.  `queue` holds ready copies keyed
 * on the time they became ready, ties by issue index. */
typedef struct {
  SimHeap queue;
  guint32 active; /* op, or SIM_NO_OP */
  gboolean in_latency;
  double latency_left; /* seconds */
  double bytes_left;
  double peak_rate;    /* bandwidth this copy could use alone */
  double rate;         /* bandwidth it gets now */
} CopyEngine;

/* What each GPU runs on: its compute resource (a heap of running compute
 * ops keyed on virtual finish, on its own clock) and its copy engines. */
typedef struct {
  SimHeap compute;
  CopyEngine copy[SIM_DIR_COUNT];
  double vclock;       /* work done by each running compute op since time 0 */
  double compute_rate; /* per running compute op */
  guint signature;     /* running computes, copies and their phases: its rates change only with it */
  double busy;         /* seconds with a compute op running */
  guint collectives;   /* collective ops running on it */
  double comm_exposed; /* seconds with a collective running and no compute */
  /* The copy engines' half of the signature (COPY_BITS).  It mirrors their
   * `active` and `in_latency` and is set wherever those change (checked in
   * debug builds), so the signature costs a shift and an or. */
  guint copy_state;
  /* The lazy loop only (several GPUs, "The loop" in docs/engine.md): the
   * clocks above are brought to `since`; the engine's `deadlines` heap
   * holds when the GPU next changes on its own under `stamp` (an entry
   * with another stamp is stale; no entry: nothing runs). */
  double since;
  guint32 stamp;
} Gpu;

/* The host thread of one GPU (the host model, docs/engine.md "The host"):
 * it issues its GPU's ops, host_ops[next..end) still to go, in issue order,
 * and stops after a host-blocking op until that op ends. */
typedef struct {
  guint32 next, end;
  double clock;          /* when it finished issuing the last op it issued */
  guint32 blocking;      /* the host-blocking op it waits on, or SIM_NO_OP */
  guint32 first_parked;  /* streams whose head it has not reached yet (through next_waiter), or NO_STREAM */
  guint gated;           /* its GPU's streams held only by their head's issue (parked or in `issues`) */
  double busy;           /* seconds of launches issued */
  double wait;           /* seconds its GPU's compute was idle while `gated` > 0 */
} Host;

struct SimEngine {
  GArray *streams; /* StreamState */
  GArray *events;  /* EventState */
  SimHeap ready;   /* streams whose head op may start, keyed on that op's index */
  SimHeap timers;  /* running host_alloc, send and collective ops, keyed on real finish */
  SimHeap deadlines; /* the lazy loop: GPUs keyed on their next deadline, seq the GPU, value its stamp */
  /* The host model only (sized when a program has a host: sim_program_has_host): */
  SimHeap issues;  /* streams whose head is issued in the future, keyed on that time, seq its op */
  Host *host;      /* per GPU, n_hosts_cap of them */
  guint n_hosts_cap;
  double *issue;   /* per op: when its host issued it, INFINITY until it has */
  guint32 *host_ops; /* the ops of GPU 0, then of GPU 1, ..., each in issue order */
  guint ops_cap;   /* of issue and host_ops */
  Gpu *gpu;        /* per GPU of the program, n_gpus_cap of them initialised */
  guint n_gpus_cap;
  gint64 *level, *peak; /* per pool (SIM_POOL_INDEX) */
  SimPeak *peaks;
  guint32 *done;   /* ops completing at the current instant: at most one per stream */
  guint n_done, done_cap;
};

/* Everything a single run mutates, so helpers take one pointer.  The hot
 * arrays are copied out of their containers once per run: through a GArray
 * or a GPtrArray every access would reload the container's data pointer,
 * since the stores of the loop might alias it. */
typedef struct {
  SimEngine *e;
  const SimProgram *p;
  const SimOp *ops;
  const SimMemAction *mem;
  SimStream *const *streams;
  StreamState *stream_state;
  EventState *event_state;
  guint32 *applied;  /* run->applied, sized to every action */
  double *op_start;  /* NULL unless recording */
  double *op_end;
  GArray *curve;     /* NULL unless recording */
  const SimLink *link;
  SimRun *run;
  double now;
  Gpu *gpu;            /* e->gpu */
  guint n_gpus;
  /* With at least LAZY_GPUS GPUs (and no host model) the loop is lazy: a
   * step touches only the GPUs whose deadline it is or that an op of the
   * instant starts on, each brought from its own `since` to now when
   * touched (`dirty`: touched at this instant, so at now).  `live`: the
   * GPUs with something running, kept for shared links only, whose
   * filling lists them in walk[0..n_walk). */
  gboolean lazy;
  SimGpuSet dirty;
  SimGpuSet live;
  guint walk[SIM_NODE_MAX_GPUS];
  guint n_walk;
  guint words; /* of a SimGpuSet that the run's GPUs span */
  /* Copies of different GPUs share links ([node] limits): their rates are
   * set together (share_rates), and a latency phase is always a step of
   * its own. */
  gboolean shared;
  gboolean copies_changed; /* some GPU's copy_state changed since the last update_rates */
  guint completed;
  gint64 *level;       /* per pool (SIM_POOL_INDEX) */
  gint64 *peak;        /* peaks[pool].bytes, kept here for the per-action test */
  SimPeak *peaks;      /* per pool */
  guint n_applied;
  /* An uncalibrated copy's bandwidth alone, per [SimDir][pageable]: the link
   * is fixed for the run, so a copy start is a lookup. */
  double peak_rate[SIM_DIR_COUNT][2];
  Host *host;          /* e->host and e->issue: the host model only */
  double *issue;
  GError **error;
  gboolean failed;
} Run;

/* From how many step GPUs a run without the host model takes the lazy loop
 * (docs/engine.md, "The loop"): from 2, it costs no more than the scan
 * (callgrind, pp 2: 348 instructions per event against 349). */
#define LAZY_GPUS 2

/* for (each GPU g a step of the scan walks, in ascending order): every
 * GPU, or with `listed` (a constant where inlined) the GPUs listed in
 * walk[0..n_walk) (the lazy loop's shared-link filling).  The count is
 * read once: the loop's stores might alias it. */
#define FOR_EACH_GPU_LISTED(r, n_gpus, listed, g)                                                      \
  for (guint g##_i = 0, g##_n = (listed) ? (r)->n_walk : (n_gpus), g;                                  \
       g##_i < g##_n && (g = (listed) ? (r)->walk[g##_i] : g##_i, TRUE); g##_i++)
#define FOR_EACH_GPU(r, n_gpus, g) FOR_EACH_GPU_LISTED(r, n_gpus, FALSE, g)

/* for (each GPU g of the set `set` of a run's GPUs, in ascending order),
 * over a copy of each word taken as the walk reaches it.  Only the words
 * the run's GPUs span (Run.words): one up to 64 GPUs. */
#define FOR_EACH_GPU_IN(r, set, g)                                                                     \
  for (guint g##_w = 0; g##_w < (r)->words; g##_w++)                                                   \
    for (guint64 g##_bits = (set).bits[g##_w], g; g##_bits != 0 &&                                     \
         (g = g##_w * 64 + (guint)__builtin_ctzll(g##_bits), TRUE); g##_bits &= g##_bits - 1)

static void gpu_sync(Run *r, Gpu *gpu);

/* Something is about to change on GPU g at this instant: the lazy loop
 * brings its clocks to now first (once an instant) and settles it after
 * the instant.  The scan advances every GPU at every step and needs
 * nothing: the test costs it less than a call (bench/callgrind.sh). */
static inline void
gpu_touch(Run *r, guint g)
{
  if (r->lazy && !sim_gpu_set_has(&r->dirty, g)) {
    gpu_sync(r, &r->gpu[g]);
    sim_gpu_set_add(&r->dirty, g);
    if (r->shared)
      sim_gpu_set_add(&r->live, g);
  }
}

/* Test-only (sim_engine_set_host_model): run the host model even when no
 * op has a launch or blocks the host. */
static gboolean force_host;

void
sim_engine_set_host_model(gboolean force)
{
  force_host = force;
}

/* Test-only (sim_engine_set_lazy_gpus): LAZY_GPUS unless set. */
static guint lazy_gpus = LAZY_GPUS;

void
sim_engine_set_lazy_gpus(guint gpus)
{
  lazy_gpus = gpus ? gpus : LAZY_GPUS;
}

SimEngine *
sim_engine_new(void)
{
  SimEngine *e = g_new0(SimEngine, 1);
  e->streams = g_array_new(FALSE, FALSE, sizeof(StreamState));
  e->events = g_array_new(FALSE, FALSE, sizeof(EventState));
  sim_heap_init(&e->ready);
  sim_heap_init(&e->timers);
  sim_heap_init(&e->deadlines);
  sim_heap_init(&e->issues);
  return e;
}

void
sim_engine_free(SimEngine *e)
{
  if (e == NULL)
    return;
  g_array_unref(e->streams);
  g_array_unref(e->events);
  g_free(e->done);
  sim_heap_free(&e->ready);
  sim_heap_free(&e->timers);
  sim_heap_free(&e->deadlines);
  sim_heap_free(&e->issues);
  g_free(e->host);
  g_free(e->issue);
  g_free(e->host_ops);
  for (guint g = 0; g < e->n_gpus_cap; g++) {
    sim_heap_free(&e->gpu[g].compute);
    for (int d = 0; d < SIM_DIR_COUNT; d++)
      sim_heap_free(&e->gpu[g].copy[d].queue);
  }
  g_free(e->gpu);
  g_free(e->level);
  g_free(e->peak);
  g_free(e->peaks);
  g_free(e);
}

void
sim_run_free(SimRun *run)
{
  if (run == NULL)
    return;
  if (run->op_start)
    g_array_unref(run->op_start);
  if (run->op_end)
    g_array_unref(run->op_end);
  if (run->curve)
    g_array_unref(run->curve);
  if (run->pools)
    g_array_unref(run->pools);
  if (run->busy)
    g_array_unref(run->busy);
  if (run->host_busy)
    g_array_unref(run->host_busy);
  if (run->host_wait)
    g_array_unref(run->host_wait);
  g_array_unref(run->applied);
  g_free(run);
}

static inline guint32
stream_head(Run *r, guint32 s)
{
  const SimStream *stream = r->streams[s];
  guint32 pos = r->stream_state[s].pos;
  return pos < stream->n_ops ? stream->ops[pos] : SIM_NO_OP;
}

static void
push_ready(Run *r, guint32 s)
{
  guint32 head = stream_head(r, s);
  if (head != SIM_NO_OP)
    sim_heap_push(&r->e->ready, 0.0, head, s);
}

/* Cold paths of apply_memory, out of line so that its loop stays small. */
G_GNUC_NO_INLINE static void
memory_negative(Run *r, guint32 op_index, guint pool)
{
  if (r->failed)
    return;
  g_autofree char *what = sim_program_describe_op(r->p, op_index);
  g_set_error(r->error, SIM_ERROR, SIM_ERROR_INTERNAL,
              "%s memory went negative (%" G_GINT64_FORMAT " B) at %s: a lowering frees what it never allocated",
              sim_pool_name(pool % SIM_POOL_COUNT), r->level[pool], what);
  r->failed = TRUE;
}

/* A point of the GPU whose memory changed. */
G_GNUC_NO_INLINE static void
memory_curve(Run *r, guint gpu)
{
  SimMemPoint point = { r->now, r->level[SIM_POOL_INDEX(gpu, SIM_POOL_DEVICE)],
                        r->level[SIM_POOL_INDEX(gpu, SIM_POOL_HOST)], gpu };
  g_array_append_val(r->curve, point);
}

/* Applies actions [first, last) of op_index: the engine's innermost loop,
 * run once per action (two or three per op).  A new peak can only come from
 * an allocation and a negative level only from a free, so each action makes
 * one test besides the log append. */
static inline void
apply_memory(Run *r, guint32 op_index, guint32 first, guint32 last)
{
  const SimMemAction *mem = r->mem;
  guint32 *applied = r->applied;
  guint n = r->n_applied;
  for (guint32 m = first; m < last; m++) {
    const SimMemAction *a = &mem[m];
    guint gpu = r->ops[op_index].gpu; /* an op's actions are on its GPU (loaded only for an op with actions) */
    guint pool = SIM_POOL_INDEX(gpu, a->pool);
    gint64 level = r->level[pool] + a->delta;
    r->level[pool] = level;
    applied[n++] = m;
    if (a->delta > 0) {
      if (level > r->peak[pool]) {
        const SimOp *op = &r->ops[op_index];
        r->peak[pool] = level;
        r->peaks[pool] = (SimPeak){ .bytes = level, .time = r->now, .op = op_index, .phase = op->phase,
                                    .layer = op->layer, .applied = n, .pool = pool };
      }
    } else if (G_UNLIKELY(level < 0)) {
      memory_negative(r, op_index, pool);
    }
    if (G_UNLIKELY(r->curve != NULL))
      memory_curve(r, gpu);
  }
  r->n_applied = n;
}

static inline void
mark_start(Run *r, guint32 op_index)
{
  const SimOp *op = &r->ops[op_index];
  if (G_UNLIKELY(r->op_start != NULL))
    r->op_start[op_index] = r->now;
  apply_memory(r, op_index, op->mem_first, op->mem_first + op->mem_starts);
}

/* The host of GPU g issues what it can: on through its ops until one
 * blocks it, each issued `launch` after the one before.  Then every stream
 * parked on it is offered again (start_op parks it anew, or sets a timer,
 * if its head is still not issued).  Each op is issued once: O(ops) a run. */
static void
host_issue(Run *r, guint g)
{
  Host *h = &r->host[g];
  const guint32 *host_ops = r->e->host_ops;
  while (h->blocking == SIM_NO_OP && h->next < h->end) {
    guint32 i = host_ops[h->next++];
    double launch = sim_program_launch(r->p, i);
    h->clock += launch;
    h->busy += launch;
    r->issue[i] = h->clock;
    if (sim_program_host_blocks(&r->ops[i]))
      h->blocking = i;
  }
  for (guint32 s = h->first_parked; s != NO_STREAM;) {
    guint32 next = r->stream_state[s].next_waiter;
    r->stream_state[s].next_waiter = NO_STREAM;
    h->gated--;
    push_ready(r, s);
    s = next;
  }
  h->first_parked = NO_STREAM;
}

/* An op finished: free what it frees, advance its stream past it; under
 * the host model (`host`, a constant where inlined) a host-blocking op
 * lets its host go on from now. */
static inline void
complete_op(Run *r, guint32 op_index, gboolean host)
{
  const SimOp *op = &r->ops[op_index];
  if (G_UNLIKELY(r->op_end != NULL))
    r->op_end[op_index] = r->now;
  apply_memory(r, op_index, op->mem_first + op->mem_starts, op->mem_first + op->mem_count);
  r->completed++;
  r->stream_state[op->stream].pos++;
  if (host && r->host[op->gpu].blocking == op_index) {
    Host *h = &r->host[op->gpu];
    h->blocking = SIM_NO_OP;
    h->clock = MAX(h->clock, r->now);
    host_issue(r, op->gpu);
  }
}

/* A timed op finished: its stream may start its next op. */
static void
finish_op(Run *r, guint32 op_index)
{
  complete_op(r, op_index, FALSE);
  push_ready(r, r->ops[op_index].stream);
}

static void
finish_op_host(Run *r, guint32 op_index)
{
  complete_op(r, op_index, TRUE);
  push_ready(r, r->ops[op_index].stream);
}

/* Under the host model: whether op_index, the head of stream s and
 * otherwise free to start, has been issued (within a near tie of now, like
 * every other instant).  If not, s waits for it: on a timer at its issue
 * time when the host has issued it, else parked on its host until the
 * host gets that far. */
static inline gboolean
issued(Run *r, SimEngine *e, guint32 s, guint32 op_index)
{
  double t = r->issue[op_index];
  if (t <= r->now + NEAR_TIE * MAX(1.0, r->now))
    return TRUE;
  Host *h = &r->host[r->ops[op_index].gpu];
  h->gated++;
  if (t == INFINITY) {
    r->stream_state[s].next_waiter = h->first_parked;
    h->first_parked = s;
  } else {
    sim_heap_push(&e->issues, t, op_index, s);
  }
  return FALSE;
}

static void
record_event(Run *r, guint32 event)
{
  EventState *ev = &r->event_state[event];
  if (--ev->remaining > 0)
    return; /* a barrier some member has not reached */
  ev->recorded = TRUE;
  for (guint32 s = ev->first_waiter; s != NO_STREAM;) {
    guint32 next = r->stream_state[s].next_waiter;
    r->stream_state[s].next_waiter = NO_STREAM;
    push_ready(r, s);
    s = next;
  }
  ev->first_waiter = NO_STREAM;
}

/* The copy engine of direction d takes op_index now.  Inline: a copy start
 * is the commonest thing the engine does. */
static inline __attribute__((always_inline)) void
start_copy(Run *r, Gpu *gpu, int d, guint32 op_index)
{
  CopyEngine *c = &gpu->copy[d];
  const SimOp *op = &r->ops[op_index];
  gpu_touch(r, op->gpu);
  c->active = op_index;
  c->in_latency = TRUE;
  gpu->copy_state |= COPY_BITS(d, COPY_ACTIVE | COPY_LATENCY);
  r->copies_changed = TRUE;
  c->latency_left = r->link->latency;
  c->bytes_left = (double)op->bytes;
  if (r->link->table_points[d] == 0) {
    c->peak_rate = r->peak_rate[d][op->pageable];
  } else {
    /* A calibrated copy: the latency phase, then the bytes at the rate
     * that makes the whole copy take its measured time when alone. */
    double t = sim_link_copy_time(r->link, d, op->bytes, op->pageable ? SIM_HOST_PAGEABLE : SIM_HOST_PINNED);
    double move = t - r->link->latency;
    c->peak_rate = d == SIM_DIR_D2H ? r->link->d2h_bandwidth : r->link->h2d_bandwidth;
    if (move > 0 && op->bytes > 0)
      c->peak_rate = (double)op->bytes / move;
    else
      c->bytes_left = 0; /* under the latency floor: the fixed cost is all of it */
  }
  mark_start(r, op_index);
}

/* Starts op_index, the head of stream s, if it can start: a wait on an
 * event not recorded yet joins the event's waiters instead.  Returns TRUE
 * when the op also completed (a record, or a wait whose event was
 * recorded), so that its stream can go on at once.  Always inlined into
 * start_ready's loop, with the engine passed in: either way less, callgrind
 * counts 1-2 % more instructions per event. */
static inline __attribute__((always_inline)) gboolean
start_op(Run *r, SimEngine *e, guint32 s, guint32 op_index, gboolean host)
{
  const SimOp *op = &r->ops[op_index];
  /* A wait is held by its event first, so that a stream held by the host
   * (Host.gated) is one that could run but for the host. */
  if (host && op->kind != SIM_OP_WAIT && !issued(r, e, s, op_index))
    return FALSE;
  switch ((SimOpKind)op->kind) {
  case SIM_OP_WAIT: {
    EventState *ev = &r->event_state[op->event];
    if (!ev->recorded) {
      r->stream_state[s].next_waiter = ev->first_waiter;
      ev->first_waiter = s;
      return FALSE;
    }
    if (host && !issued(r, e, s, op_index))
      return FALSE;
    mark_start(r, op_index);
    complete_op(r, op_index, host);
    return TRUE;
  }
  case SIM_OP_RECORD:
    mark_start(r, op_index);
    record_event(r, op->event);
    complete_op(r, op_index, host);
    return TRUE;
  case SIM_OP_COMPUTE: {
    Gpu *gpu = &r->gpu[op->gpu];
    gpu_touch(r, op->gpu);
    mark_start(r, op_index);
    sim_heap_push(&gpu->compute, gpu->vclock + op->work, op_index, op_index);
    return FALSE;
  }
  case SIM_OP_COLLECTIVE:
    gpu_touch(r, op->gpu);
    r->gpu[op->gpu].collectives++;
    /* otherwise a timed op like a send */
    G_GNUC_FALLTHROUGH;
  case SIM_OP_HOST_ALLOC:
  case SIM_OP_SEND:
    mark_start(r, op_index);
    sim_heap_push(&e->timers, r->now + op->work, op_index, op_index);
    return FALSE;
  case SIM_OP_COPY: {
    /* Started for its stream; the engine takes it when it is free.  An
     * idle engine with nothing queued takes it at once: ops start in issue
     * order at an instant, so no earlier copy can still come. */
    Gpu *gpu = &r->gpu[op->gpu];
    CopyEngine *c = &gpu->copy[op->dir];
    if (c->active == SIM_NO_OP && c->queue.len == 0)
      start_copy(r, gpu, op->dir, op_index);
    else
      sim_heap_push(&c->queue, r->now, op_index, op_index);
    return FALSE;
  }
  }
  return FALSE;
}

/* Starts every op that can start now, lowest issue index first: stream s
 * from its head op_index first (s = NO_STREAM: none), then every stream in
 * the ready heap.  Record and wait complete on the spot and may make other
 * streams ready.  Inlined into start_ready and start_ready_host, so that
 * the run without a host pays nothing for it. */
static inline __attribute__((always_inline)) void
start_ready_with(Run *r, guint32 s, guint32 op_index, gboolean host)
{
  SimEngine *e = r->e;
  for (;;) {
    if (s == NO_STREAM) {
      if (e->ready.len == 0)
        return;
      SimHeapItem item = sim_heap_pop(&e->ready);
      s = item.value;
      op_index = item.seq;
    }
    /* The stream goes on at once after an instant op unless a ready
     * stream's head was issued earlier: the same order as through the
     * heap, without the round trip. */
    while (start_op(r, e, s, op_index, host)) {
      op_index = stream_head(r, s);
      if (op_index == SIM_NO_OP)
        break;
      if (e->ready.len > 0 && sim_heap_peek(&e->ready)->seq < op_index) {
        sim_heap_push(&e->ready, 0.0, op_index, s);
        break;
      }
    }
    s = NO_STREAM;
  }
}

static void
start_ready(Run *r, guint32 s, guint32 op_index)
{
  start_ready_with(r, s, op_index, FALSE);
}

static void
start_ready_host(Run *r, guint32 s, guint32 op_index)
{
  start_ready_with(r, s, op_index, TRUE);
}

/* The bidirectional cap of one GPU's link: only while both directions move
 * bytes and need more than the cap together do they share it, max-min
 * fairly (each gets half unless one needs less). */
static void
share_bidir(Run *r, Gpu *gpu)
{
  CopyEngine *c = gpu->copy;
  gboolean moving[SIM_DIR_COUNT];
  for (int d = 0; d < SIM_DIR_COUNT; d++) {
    moving[d] = c[d].active != SIM_NO_OP && !c[d].in_latency;
    c[d].rate = c[d].peak_rate;
  }
  double cap = r->link->bidir_bandwidth;
  if (moving[SIM_DIR_D2H] && moving[SIM_DIR_H2D] && c[SIM_DIR_D2H].peak_rate + c[SIM_DIR_H2D].peak_rate > cap) {
    SimDir small = c[SIM_DIR_D2H].peak_rate <= c[SIM_DIR_H2D].peak_rate ? SIM_DIR_D2H : SIM_DIR_H2D;
    SimDir other = small == SIM_DIR_D2H ? SIM_DIR_H2D : SIM_DIR_D2H;
    c[small].rate = MIN(c[small].peak_rate, cap / 2);
    c[other].rate = cap - c[small].rate;
  }
}

/* The most links one copy crosses: its GPU's link (both directions), its
 * switch's uplink in its direction, its socket's memory. */
#define FLOW_LINKS 3

/* Rates of every copy that moves bytes, on every GPU, when links are shared
 * ([node]): max-min fair by progressive filling.  All unfrozen copies rise
 * at one level; the next level is the least of each unfrozen copy's peak
 * rate and each link's (capacity - frozen rates) / unfrozen copies; copies
 * at their peak and the copies of a link that fills freeze there.  With one
 * GPU and no node limit it gives share_bidir's rates.  Cost: O((copies +
 * links)^2) in the worst case, per change of the set of moving copies: a
 * handful of copies and links in a node of 8 GPUs. */
static void
share_rates(Run *r, gboolean listed)
{
  const SimNode *node = &r->link->node;
  guint n_switch = (r->n_gpus + node->gpus_per_switch - 1) / node->gpus_per_switch;
  /* Links: per GPU its bidirectional cap, per switch and direction its
   * uplink, per socket its memory. */
  guint n_links = r->n_gpus + 2 * n_switch + node->sockets;
  double cap[3 * SIM_NODE_MAX_GPUS + SIM_NODE_MAX_GPUS];
  double frozen_sum[3 * SIM_NODE_MAX_GPUS + SIM_NODE_MAX_GPUS];
  guint unfrozen[3 * SIM_NODE_MAX_GPUS + SIM_NODE_MAX_GPUS];
  CopyEngine *flow[2 * SIM_NODE_MAX_GPUS];
  guint links[2 * SIM_NODE_MAX_GPUS][FLOW_LINKS];
  gboolean done[2 * SIM_NODE_MAX_GPUS];
  for (guint k = 0; k < n_links; k++) {
    frozen_sum[k] = 0;
    unfrozen[k] = 0;
    cap[k] = k < r->n_gpus                  ? r->link->bidir_bandwidth
             : k < r->n_gpus + 2 * n_switch ? (node->switch_bandwidth > 0 ? node->switch_bandwidth : INFINITY)
             : node->host_memory_bandwidth > 0 ? node->host_memory_bandwidth
                                               : INFINITY;
  }
  guint n = 0;
  /* Listed: the live GPUs, the only ones with copies; in GPU order, as the
   * sums need. */
  FOR_EACH_GPU_LISTED(r, r->n_gpus, listed, g) {
    for (int d = 0; d < SIM_DIR_COUNT; d++) {
      CopyEngine *c = &r->gpu[g].copy[d];
      c->rate = c->peak_rate;
      if (c->active == SIM_NO_OP || c->in_latency)
        continue;
      flow[n] = c;
      done[n] = FALSE;
      links[n][0] = g;
      links[n][1] = r->n_gpus + 2 * (g / node->gpus_per_switch) + (guint)d;
      links[n][2] = r->n_gpus + 2 * n_switch + node->socket_of[g];
      for (int k = 0; k < FLOW_LINKS; k++)
        unfrozen[links[n][k]]++;
      n++;
    }
  }
  for (guint left = n; left > 0;) {
    double level = INFINITY;
    for (guint f = 0; f < n; f++)
      if (!done[f])
        level = MIN(level, flow[f]->peak_rate);
    for (guint k = 0; k < n_links; k++)
      if (unfrozen[k] > 0)
        level = MIN(level, (cap[k] - frozen_sum[k]) / unfrozen[k]);
    level = MAX(level, 0.0);
    /* Which links fill at this level, decided before any copy freezes. */
    gboolean fills[3 * SIM_NODE_MAX_GPUS + SIM_NODE_MAX_GPUS];
    for (guint k = 0; k < n_links; k++)
      fills[k] = unfrozen[k] > 0 && (cap[k] - frozen_sum[k]) / unfrozen[k] <= level;
    for (guint f = 0; f < n; f++) {
      if (done[f])
        continue;
      gboolean freeze = flow[f]->peak_rate <= level;
      for (int k = 0; k < FLOW_LINKS; k++)
        freeze |= fills[links[f][k]];
      if (!freeze)
        continue;
      flow[f]->rate = MIN(flow[f]->peak_rate, level);
      done[f] = TRUE;
      left--;
      for (int k = 0; k < FLOW_LINKS; k++) {
        frozen_sum[links[f][k]] += flow[f]->rate;
        unfrozen[links[f][k]]--;
      }
    }
  }
}

/* GPU gpu's rates for the interval that starts now, if its signature
 * changed: its compute rate, and without shared links its copies'. */
static inline __attribute__((always_inline)) void
gpu_rates(Run *r, Gpu *gpu)
{
  guint signature = gpu->compute.len << SIGNATURE_COMPUTE_SHIFT | gpu->copy_state |
                    (gpu->collectives ? SIGNATURE_COLLECTIVE : 0u);
  if (signature == gpu->signature)
    return;
  gpu->signature = signature;
  guint k = gpu->compute.len;
  double base = gpu->copy_state != 0 ? 1.0 - r->link->compute_slowdown : 1.0;
  if (gpu->collectives)
    base *= 1.0 - r->link->node.collective_slowdown;
  /* One compute stream is the common case: no division, same value. */
  gpu->compute_rate = k == 1 ? base : k ? base / k : 0.0;
  if (!r->shared)
    share_bidir(r, gpu);
}

static inline __attribute__((always_inline)) void
update_gpu_rates(Run *r, Gpu *gpu)
{
#ifndef NDEBUG
  for (int d = 0; d < SIM_DIR_COUNT; d++)
    g_assert((gpu->copy_state & COPY_BITS(d, COPY_ACTIVE | COPY_LATENCY)) ==
             (gpu->copy[d].active == SIM_NO_OP
                ? 0u
                : COPY_BITS(d, COPY_ACTIVE | (gpu->copy[d].in_latency ? COPY_LATENCY : 0u))));
#endif
  gpu_rates(r, gpu);
}

/* Rates for the interval that starts now.  A GPU's compute rate depends
 * only on how many of its computes run and whether its copy engines are
 * busy; copy rates on which copies move bytes.  Each is recomputed only
 * when that changes (the GPU's signature; for shared links any GPU's). */
static inline __attribute__((always_inline)) void
update_rates(Run *r, guint n_gpus)
{
  gboolean copies = r->copies_changed;
  r->copies_changed = FALSE;
  FOR_EACH_GPU(r, n_gpus, g)
    update_gpu_rates(r, &r->gpu[g]);
  if (r->shared && copies)
    share_rates(r, FALSE);
}

/* GPU gpu's idle engines take their earliest-ready queued copy. */
static inline __attribute__((always_inline)) void
start_gpu_copies(Run *r, Gpu *gpu)
{
  for (int d = 0; d < SIM_DIR_COUNT; d++) {
    CopyEngine *c = &gpu->copy[d];
    if (c->active == SIM_NO_OP && c->queue.len > 0)
      start_copy(r, gpu, d, sim_heap_pop(&c->queue).value);
  }
}

/* Idle engines take the earliest-ready queued copy, the first function of
 * a step.  Every function of the loop takes the GPU count as an argument
 * and is inlined into run_loop, which sim_engine_run calls with a constant
 * 1 for one GPU: the loops over GPUs fold away (callgrind,
 * bench/callgrind.sh: 390 instructions per event with the loops, 348
 * without; 328 before the engine had GPUs). */
static inline __attribute__((always_inline)) void
start_copies(Run *r, guint n_gpus)
{
  FOR_EACH_GPU(r, n_gpus, g)
    start_gpu_copies(r, &r->gpu[g]);
}

/* Time when a copy engine next changes state (end of latency or of bytes),
 * from its state at time t0. */
static double
copy_deadline(const Run *r, double t0, const CopyEngine *c, const CopyEngine *other)
{
  if (c->active == SIM_NO_OP)
    return INFINITY;
  if (c->in_latency) {
    /* The end of the latency changes nobody's rate while the other
     * direction is idle (with a copy there, both may end up sharing the
     * cap) and no link is shared with other GPUs: then the copy runs on to
     * its end without a step of its own.  If the other direction starts a
     * copy first, that is a step anyway, and the phases are settled there. */
    if (other->active == SIM_NO_OP && !r->shared)
      return t0 + c->latency_left + c->bytes_left / c->peak_rate;
    return t0 + c->latency_left;
  }
  return t0 + c->bytes_left / c->rate;
}

static void
blocked_report(Run *r)
{
  g_autoptr(GString) msg = g_string_new("stuck schedule: no op can start; blocked:");
  for (guint32 s = 0; s < r->p->streams->len; s++) {
    guint32 head = stream_head(r, s);
    if (head == SIM_NO_OP)
      continue;
    const SimOp *op = sim_program_op(r->p, head);
    g_autofree char *what = sim_program_describe_op(r->p, head);
    g_string_append_printf(msg, " %s", what);
    if (op->kind == SIM_OP_WAIT) {
      /* The program was validated: its one recorder, if any. */
      guint32 recorder = sim_program_event(r->p, op->event)->recorder;
      if (recorder == SIM_NO_OP) {
        g_string_append(msg, " (the event is never recorded);");
      } else {
        g_autofree char *by = sim_program_describe_op(r->p, recorder);
        g_string_append_printf(msg, " (recorded only by %s, which cannot run);", by);
      }
    } else if (r->host && r->issue[head] == INFINITY && r->host[op->gpu].blocking != SIM_NO_OP) {
      g_autofree char *by = sim_program_describe_op(r->p, r->host[op->gpu].blocking);
      g_string_append_printf(msg, " (not issued: its host waits for %s, which cannot run);", by);
    } else {
      g_string_append(msg, ";");
    }
  }
  g_set_error_literal(r->error, SIM_ERROR, SIM_ERROR_INTERNAL, msg->str);
}

static void
reset_engine(SimEngine *e, const SimProgram *p)
{
  g_array_set_size(e->streams, p->streams->len);
  for (guint s = 0; s < p->streams->len; s++)
    g_array_index(e->streams, StreamState, s) = (StreamState){ 0, NO_STREAM };
  g_array_set_size(e->events, sim_program_n_events(p));
  for (guint ev = 0; ev < sim_program_n_events(p); ev++)
    g_array_index(e->events, EventState, ev) =
      (EventState){ FALSE, sim_program_event(p, ev)->count, NO_STREAM };
  /* A stream runs one op at a time, so at most one op per stream ends at
   * an instant. */
  if (e->done_cap < p->streams->len) {
    e->done_cap = p->streams->len;
    e->done = g_renew(guint32, e->done, e->done_cap);
  }
  if (e->n_gpus_cap < p->n_gpus) {
    e->gpu = g_renew(Gpu, e->gpu, p->n_gpus);
    for (guint g = e->n_gpus_cap; g < p->n_gpus; g++) {
      sim_heap_init(&e->gpu[g].compute);
      for (int d = 0; d < SIM_DIR_COUNT; d++)
        sim_heap_init(&e->gpu[g].copy[d].queue);
    }
    e->n_gpus_cap = p->n_gpus;
    e->level = g_renew(gint64, e->level, 2 * p->n_gpus);
    e->peak = g_renew(gint64, e->peak, 2 * p->n_gpus);
    e->peaks = g_renew(SimPeak, e->peaks, 2 * p->n_gpus);
  }
  sim_heap_clear(&e->ready);
  sim_heap_clear(&e->timers);
  sim_heap_clear(&e->deadlines);
  sim_heap_clear(&e->issues);
  for (guint g = 0; g < p->n_gpus; g++) {
    Gpu *gpu = &e->gpu[g];
    sim_heap_clear(&gpu->compute);
    for (int d = 0; d < SIM_DIR_COUNT; d++) {
      sim_heap_clear(&gpu->copy[d].queue);
      gpu->copy[d].active = SIM_NO_OP;
      gpu->copy[d].rate = 0;
    }
    gpu->vclock = 0;
    gpu->busy = 0;
    gpu->collectives = 0;
    gpu->comm_exposed = 0;
    gpu->compute_rate = 0;
    gpu->copy_state = 0;
    gpu->signature = NO_SIGNATURE;
    gpu->since = 0;
    gpu->stamp = 0;
  }
}

static guint64
heap_ops(const SimEngine *e)
{
  guint64 ops = e->ready.ops + e->timers.ops + e->deadlines.ops + e->issues.ops;
  for (guint g = 0; g < e->n_gpus_cap; g++)
    ops += e->gpu[g].compute.ops + e->gpu[g].copy[SIM_DIR_D2H].queue.ops + e->gpu[g].copy[SIM_DIR_H2D].queue.ops;
  return ops;
}

static int
compare_u32(gconstpointer a, gconstpointer b)
{
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return x < y ? -1 : x > y;
}

/* A new run of p: its arrays sized for p (op times and the curve only when
 * asked for) and the sums the program kept as it was built. */
static SimRun *
run_new(const SimProgram *p, const SimEngineOptions *options)
{
  guint n_ops = sim_program_n_ops(p);
  SimRun *run = g_new0(SimRun, 1);
  run->applied = g_array_sized_new(FALSE, FALSE, sizeof(guint32), p->n_mem);
  g_array_set_size(run->applied, p->n_mem);
  if (options && options->record_ops) {
    run->op_start = g_array_sized_new(FALSE, TRUE, sizeof(double), n_ops);
    run->op_end = g_array_sized_new(FALSE, TRUE, sizeof(double), n_ops);
    g_array_set_size(run->op_start, n_ops);
    g_array_set_size(run->op_end, n_ops);
  }
  if (options && options->record_curve)
    run->curve = g_array_sized_new(FALSE, FALSE, sizeof(SimMemPoint), p->n_mem + 1);
  run->compute_work = p->compute_work[SIM_WORK_COMPUTE];
  run->recompute_work = p->compute_work[SIM_WORK_RECOMPUTE];
  run->optimizer_work = p->compute_work[SIM_WORK_OPTIMIZER];
  for (int d = 0; d < SIM_DIR_COUNT; d++) {
    run->copy_bytes[d] = p->copy_bytes[d];
    run->copies[d] = p->copies[d];
  }
  return run;
}

/* The hosts at time 0 (the host model): each GPU's ops listed in issue
 * order by a counting sort (O(ops + GPUs)), none issued, and each host
 * issuing up to its first blocking op. */
static void
host_begin(Run *r)
{
  SimEngine *e = r->e;
  const SimProgram *p = r->p;
  guint n_ops = sim_program_n_ops(p);
  if (e->ops_cap < n_ops) {
    e->ops_cap = MAX(n_ops, 2 * e->ops_cap);
    e->issue = g_renew(double, e->issue, e->ops_cap);
    e->host_ops = g_renew(guint32, e->host_ops, e->ops_cap);
  }
  if (e->n_hosts_cap < p->n_gpus) {
    e->host = g_renew(Host, e->host, p->n_gpus);
    e->n_hosts_cap = p->n_gpus;
  }
  for (guint g = 0; g < p->n_gpus; g++)
    e->host[g] = (Host){ .blocking = SIM_NO_OP, .first_parked = NO_STREAM };
  for (guint32 i = 0; i < n_ops; i++) {
    e->issue[i] = INFINITY;
    e->host[r->ops[i].gpu].end++;
  }
  for (guint g = 1; g < p->n_gpus; g++)
    e->host[g].end += e->host[g - 1].end;
  for (guint g = 0; g < p->n_gpus; g++)
    e->host[g].next = g ? e->host[g - 1].end : 0;
  /* `next` doubles as the fill position, then is set back. */
  for (guint32 i = 0; i < n_ops; i++)
    e->host_ops[e->host[r->ops[i].gpu].next++] = i;
  for (guint g = 0; g < p->n_gpus; g++)
    e->host[g].next = g ? e->host[g - 1].end : 0;
  r->host = e->host;
  r->issue = e->issue;
  for (guint g = 0; g < p->n_gpus; g++)
    host_issue(r, g);
}

/* The state of a run at time 0: levels at the baseline, every stream's head
 * offered, and whatever can start at once started. */
static void
run_begin(Run *r, SimEngine *e, const SimProgram *p, const SimLink *link, SimRun *run, gboolean host,
          gboolean lazy, GError **error)
{
  reset_engine(e, p);
  *r = (Run){ .e = e, .p = p, .ops = p->ops, .mem = p->mem, .streams = (SimStream *const *)p->streams->pdata,
              .stream_state = (StreamState *)(void *)e->streams->data,
              .event_state = (EventState *)(void *)e->events->data, .applied = (guint32 *)(void *)run->applied->data,
              .op_start = run->op_start ? (double *)(void *)run->op_start->data : NULL,
              .op_end = run->op_end ? (double *)(void *)run->op_end->data : NULL, .curve = run->curve,
              .link = link, .run = run, .error = error, .gpu = e->gpu, .n_gpus = p->n_gpus,
              .shared = sim_link_node_shared(link),
              .level = e->level, .peak = e->peak, .peaks = e->peaks, .lazy = lazy,
              .words = (p->n_gpus + 63) / 64 };
  for (int d = 0; d < SIM_DIR_COUNT; d++) {
    double bw = d == SIM_DIR_D2H ? link->d2h_bandwidth : link->h2d_bandwidth;
    r->peak_rate[d][0] = bw;
    r->peak_rate[d][1] = bw * link->pageable_factor;
  }
  for (guint pool = 0; pool < 2 * p->n_gpus; pool++) {
    r->level[pool] = r->peak[pool] = (gint64)p->baseline[pool];
    r->peaks[pool] = (SimPeak){ .bytes = r->level[pool], .op = SIM_NO_OP, .phase = SIM_PHASE_SYNC,
                                .layer = SIM_NO_LAYER, .pool = pool };
  }
  if (run->curve) {
    for (guint g = 0; g < p->n_gpus; g++) {
      SimMemPoint point = { 0.0, r->level[SIM_POOL_INDEX(g, SIM_POOL_DEVICE)],
                            r->level[SIM_POOL_INDEX(g, SIM_POOL_HOST)], g };
      g_array_append_val(run->curve, point);
    }
  }
  if (host)
    host_begin(r);
  for (guint32 s = 0; s < p->streams->len; s++)
    push_ready(r, s);
  if (host)
    start_ready_host(r, NO_STREAM, 0);
  else
    start_ready(r, NO_STREAM, 0);
}

/* Nothing runs: no compute, no host_alloc or send, every copy engine idle,
 * and (the host model) no op waits for an issue time to come. */
static inline __attribute__((always_inline)) gboolean
run_idle(const Run *r, guint n_gpus, gboolean host)
{
  if (r->e->timers.len != 0 || (host && r->e->issues.len != 0))
    return FALSE;
  FOR_EACH_GPU(r, n_gpus, g) {
    const Gpu *gpu = &r->gpu[g];
    if (gpu->compute.len != 0 || gpu->copy[SIM_DIR_D2H].active != SIM_NO_OP ||
        gpu->copy[SIM_DIR_H2D].active != SIM_NO_OP)
      return FALSE;
  }
  return TRUE;
}

/* The next instant anything changes. */
typedef struct {
  double next;      /* seconds */
  double dt;        /* next - now */
  double hair;      /* what ends within this of next ends at next */
} Instant;

/* When GPU g's next compute op ends, from its clock at time t0, or INFINITY. */
static inline double
compute_deadline(const Gpu *gpu, double t0)
{
  return gpu->compute.len ? t0 + (sim_heap_peek(&gpu->compute)->key - gpu->vclock) / gpu->compute_rate : INFINITY;
}

/* Both copy engines' next change, from their state at t0. */
static inline double
copies_deadline(const Run *r, const Gpu *gpu, double t0)
{
  const CopyEngine *c = gpu->copy;
  /* Each in a variable: MIN evaluates its arguments twice. */
  double d2h = copy_deadline(r, t0, &c[SIM_DIR_D2H], &c[SIM_DIR_H2D]);
  double h2d = copy_deadline(r, t0, &c[SIM_DIR_H2D], &c[SIM_DIR_D2H]);
  return MIN(d2h, h2d);
}

/* When GPU gpu next changes on its own, from its state at t0. */
static inline double
gpu_deadline(const Run *r, const Gpu *gpu, double t0)
{
  double compute = compute_deadline(gpu, t0), copies = copies_deadline(r, gpu, t0);
  return MIN(compute, copies);
}

static inline __attribute__((always_inline)) Instant
next_instant(const Run *r, guint n_gpus, gboolean host)
{
  const SimEngine *e = r->e;
  Instant in;
  double next = e->timers.len ? sim_heap_peek(&e->timers)->key : INFINITY;
  if (host && e->issues.len)
    next = MIN(next, sim_heap_peek(&e->issues)->key);
  FOR_EACH_GPU(r, n_gpus, g) {
    double t = gpu_deadline(r, &r->gpu[g], r->now);
    next = MIN(next, t);
  }
  in.next = next;
  g_assert(isfinite(in.next) && in.next >= r->now);
  in.dt = in.next - r->now;
  /* Whatever ends within a hair of `next` ends at `next`: near-ties that
   * rounding would order by chance form one instant, finished in issue
   * order. */
  in.hair = NEAR_TIE * MAX(1.0, in.next);
  return in;
}

/* Advances GPU gpu's compute clock from t0 to the instant (in->dt after
 * t0) and collects the ops that end there into e->done. */
static inline __attribute__((always_inline)) void
advance_gpu_compute(Run *r, Gpu *gpu, const Instant *in, double t0)
{
  SimEngine *e = r->e;
  if (gpu->compute.len == 0) {
    if (gpu->collectives)
      gpu->comm_exposed += in->dt;
    return;
  }
  gpu->busy += in->dt;
  if (compute_deadline(gpu, t0) <= in->next + in->hair)
    gpu->vclock = sim_heap_peek(&gpu->compute)->key;
  else
    gpu->vclock += gpu->compute_rate * in->dt;
  while (gpu->compute.len && sim_heap_peek(&gpu->compute)->key <= gpu->vclock + in->hair)
    e->done[e->n_done++] = sim_heap_pop(&gpu->compute).value;
}

/* The timers that end at the instant join e->done. */
static inline __attribute__((always_inline)) void
advance_timers(Run *r, const Instant *in)
{
  SimEngine *e = r->e;
  while (e->timers.len && sim_heap_peek(&e->timers)->key <= in->next + in->hair) {
    guint32 op = sim_heap_pop(&e->timers).value;
    /* A collective ends here (only timers run them), off the path of
     * every compute and copy. */
    if (r->ops[op].kind == SIM_OP_COLLECTIVE) {
      gpu_touch(r, r->ops[op].gpu);
      r->gpu[r->ops[op].gpu].collectives--;
    }
    e->done[e->n_done++] = op;
  }
}

/* Advances every GPU's compute clock and the timers to the instant and
 * collects the ops that end there into e->done (emptied first). */
static inline __attribute__((always_inline)) void
advance_compute(Run *r, const Instant *in, guint n_gpus)
{
  r->e->n_done = 0;
  r->run->gpu_advances += n_gpus;
  FOR_EACH_GPU(r, n_gpus, g)
    advance_gpu_compute(r, &r->gpu[g], in, r->now);
  advance_timers(r, in);
}

/* The latency phase of direction d's copy ends. */
static inline void
copy_latency_end(Run *r, Gpu *gpu, int d)
{
  CopyEngine *c = &gpu->copy[d];
  c->latency_left = 0.0;
  c->in_latency = FALSE;
  gpu->copy_state &= ~COPY_BITS(d, COPY_LATENCY);
  r->copies_changed = TRUE;
  /* Alone on the link (see copy_deadline).  No need to force a rate
   * update: the phase is part of the signature, and where a new copy
   * takes over the engine at once, its latency phase uses no rate. */
  c->rate = c->peak_rate;
  r->run->events++;
}

/* Advances the active copy of direction d by in->dt: through the end of its
 * latency, and (merged: alone on the link, see copy_deadline) on through its
 * bytes.  `at`: its deadline is this instant.  A copy that ends joins
 * e->done. */
static inline void
advance_copy(Run *r, Gpu *gpu, int d, const Instant *in, gboolean at, gboolean merged)
{
  CopyEngine *c = &gpu->copy[d];
  double moving_for = in->dt;
  if (c->in_latency) {
    /* A copy whose deadline this is ends its latency (and, merged, the
     * whole copy) now, whatever rounding left of latency_left - dt. */
    if (at && !merged) {
      c->latency_left = 0.0;
    } else if (c->latency_left > in->dt && !at) {
      c->latency_left -= in->dt;
      return;
    }
    /* The latency ended inside this step; the rest of it moved bytes. */
    moving_for = MAX(0.0, in->dt - c->latency_left);
    copy_latency_end(r, gpu, d);
    /* A copy with no bytes ends with its latency, not a step later. */
    if (!merged && c->bytes_left > 0.0)
      return;
  }
  c->bytes_left = at ? 0.0 : c->bytes_left - c->rate * moving_for;
  if (c->bytes_left <= 0.0) {
    r->e->done[r->e->n_done++] = c->active;
    c->active = SIM_NO_OP;
    gpu->copy_state &= ~COPY_BITS(d, COPY_ACTIVE | COPY_LATENCY);
    r->copies_changed = TRUE;
  }
}

/* Whether direction d's copy in its latency phase runs on through its
 * bytes in one step (alone on the link: copy_deadline). */
static inline gboolean
copy_merged(const Run *r, const CopyEngine *c, int d)
{
  return !r->shared && c[d].in_latency && c[1 - d].active == SIM_NO_OP;
}

/* Advances GPU gpu's copies from t0 to the instant (in->dt after t0). */
static inline __attribute__((always_inline)) void
advance_gpu_copies(Run *r, Gpu *gpu, const Instant *in, double t0)
{
  const CopyEngine *c = gpu->copy;
  if (gpu->copy_state == 0)
    return;
  /* Decided on the state the deadlines were computed from, before either
   * engine advances. */
  double t[SIM_DIR_COUNT] = { copy_deadline(r, t0, &c[SIM_DIR_D2H], &c[SIM_DIR_H2D]),
                              copy_deadline(r, t0, &c[SIM_DIR_H2D], &c[SIM_DIR_D2H]) };
  gboolean merge[SIM_DIR_COUNT] = { copy_merged(r, c, SIM_DIR_D2H), copy_merged(r, c, SIM_DIR_H2D) };
  for (int d = 0; d < SIM_DIR_COUNT; d++)
    if (c[d].active != SIM_NO_OP)
      advance_copy(r, gpu, d, in, t[d] <= in->next + in->hair, merge[d]);
}

static inline __attribute__((always_inline)) void
advance_copies(Run *r, const Instant *in, guint n_gpus)
{
  FOR_EACH_GPU(r, n_gpus, g)
    advance_gpu_copies(r, &r->gpu[g], in, r->now);
}

/* The host model's part of a step, before the instant's completions: each
 * GPU's wait on its host over the step (its compute idle while a stream is
 * held by the host), then the streams whose head's issue time has come are
 * offered again. */
static inline __attribute__((always_inline)) void
advance_hosts(Run *r, const Instant *in, guint n_gpus)
{
  SimEngine *e = r->e;
  for (guint g = 0; g < n_gpus; g++)
    if (r->host[g].gated && r->gpu[g].compute.len == 0)
      r->host[g].wait += in->dt;
  while (e->issues.len && sim_heap_peek(&e->issues)->key <= in->next + in->hair) {
    SimHeapItem item = sim_heap_pop(&e->issues);
    r->host[r->ops[item.seq].gpu].gated--;
    r->run->events++;
    push_ready(r, item.value);
  }
}

/* The instant's completions in issue order, then whatever can start. */
static inline __attribute__((always_inline)) void
finish_instant(Run *r, gboolean host)
{
  SimEngine *e = r->e;
  r->run->events += e->n_done;
  /* Under the host model the ready heap may already hold streams (an issue
   * time came, a host went on), so the shortcut would start out of order. */
  if (e->n_done == 1 && !(host && e->ready.len)) {
    /* The commonest step: one op ends and only its stream can go on, so it
     * goes on at once, without a trip through the ready heap. */
    guint32 s = r->ops[e->done[0]].stream;
    complete_op(r, e->done[0], host);
    guint32 head = stream_head(r, s);
    if (host && e->ready.len) {
      /* Its host went on and offered a stream. */
      if (head != SIM_NO_OP)
        sim_heap_push(&e->ready, 0.0, head, s);
      start_ready_host(r, NO_STREAM, 0);
    } else if (host) {
      start_ready_host(r, head == SIM_NO_OP ? NO_STREAM : s, head);
    } else {
      start_ready(r, head == SIM_NO_OP ? NO_STREAM : s, head);
    }
    return;
  }
  if (e->n_done > 1)
    qsort(e->done, e->n_done, sizeof(guint32), compare_u32);
  for (guint i = 0; i < e->n_done; i++) {
    if (host)
      finish_op_host(r, e->done[i]);
    else
      finish_op(r, e->done[i]);
  }
  if (host)
    start_ready_host(r, NO_STREAM, 0);
  else
    start_ready(r, NO_STREAM, 0);
}

/* Whether peak a is worse than b: more bytes, or as many reached earlier,
 * or at the same time on a lower pool (GPU). */
static gboolean
peak_worse(const SimPeak *a, const SimPeak *b)
{
  if (a->bytes != b->bytes)
    return a->bytes > b->bytes;
  if (a->time != b->time)
    return a->time < b->time;
  return a->pool < b->pool;
}

/* The end of a run that completed every op: every pool back at its
 * baseline, the peaks handed over (each kind's worst GPU, and per GPU when
 * there are several), and in debug builds the engine's invariants. */
static gboolean
run_end(Run *r, GError **error)
{
  SimRun *run = r->run;
  const SimProgram *p = r->p;
  g_array_set_size(run->applied, r->n_applied);
  run->step = r->now;
  for (guint pool = 0; pool < 2 * p->n_gpus; pool++) {
    if (r->level[pool] != (gint64)p->baseline[pool]) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INTERNAL,
                  "%s memory of GPU %u ends at %" G_GINT64_FORMAT " B, not at its baseline %" G_GUINT64_FORMAT
                  " B: a lowering leaks or double-frees",
                  sim_pool_name(pool % SIM_POOL_COUNT), pool / SIM_POOL_COUNT, r->level[pool], p->baseline[pool]);
      return FALSE;
    }
  }
  /* A program whose GPUs stand for several of the step's (program.h,
   * sim_program_set_copies) reports every step GPU: each copy's figures
   * are its GPU's, its peaks name its own pool (the op and the actions
   * applied stay its GPU's, in this program).  The copies of a GPU follow
   * it, so the worst peak (ties to the lowest pool) is the first copy's. */
  guint step_gpus = sim_program_step_gpus(p);
  for (int kind = 0; kind < SIM_POOL_COUNT; kind++) {
    run->peak[kind] = r->peaks[kind];
    for (guint g = 1; g < p->n_gpus; g++)
      if (peak_worse(&r->peaks[SIM_POOL_INDEX(g, kind)], &run->peak[kind]))
        run->peak[kind] = r->peaks[SIM_POOL_INDEX(g, kind)];
    run->peak[kind].pool = SIM_POOL_INDEX(sim_program_step_gpu(p, run->peak[kind].pool / SIM_POOL_COUNT), kind);
  }
  for (guint g = 0; g < p->n_gpus; g++)
    run->comm_exposed = MAX(run->comm_exposed, r->gpu[g].comm_exposed);
  if (step_gpus > 1) {
    run->pools = g_array_sized_new(FALSE, FALSE, sizeof(SimPeak), 2 * step_gpus);
    run->busy = g_array_sized_new(FALSE, FALSE, sizeof(double), step_gpus);
    for (guint sg = 0; sg < step_gpus; sg++) {
      guint g = sim_program_gpu_of(p, sg);
      for (int kind = 0; kind < SIM_POOL_COUNT; kind++) {
        SimPeak peak = r->peaks[SIM_POOL_INDEX(g, kind)];
        peak.pool = SIM_POOL_INDEX(sg, kind);
        g_array_append_val(run->pools, peak);
      }
      g_array_append_val(run->busy, r->gpu[g].busy);
    }
  }
  if (r->host) {
    run->host_busy = g_array_sized_new(FALSE, FALSE, sizeof(double), step_gpus);
    run->host_wait = g_array_sized_new(FALSE, FALSE, sizeof(double), step_gpus);
    for (guint sg = 0; sg < step_gpus; sg++) {
      guint g = sim_program_gpu_of(p, sg);
      g_array_append_val(run->host_busy, r->host[g].busy);
      g_array_append_val(run->host_wait, r->host[g].wait);
    }
  }
#ifndef NDEBUG
  /* Debug builds check every run, with what it recorded (tests check every
   * detailed run in release builds too). */
  if (!sim_invariants_check_engine(run, p, error))
    return FALSE;
#endif
  return TRUE;
}

/* The event loop, until every op completed (TRUE) or the run failed or is
 * stuck (FALSE, with the error set). */
static inline __attribute__((always_inline)) gboolean
run_loop(Run *r, guint n_gpus, gboolean host)
{
  for (;;) {
    start_copies(r, n_gpus);
    if (r->failed)
      return FALSE;
    if (run_idle(r, n_gpus, host)) {
      if (r->completed == sim_program_n_ops(r->p))
        return TRUE;
      blocked_report(r);
      return FALSE;
    }
    update_rates(r, n_gpus);
    Instant in = next_instant(r, n_gpus, host);
    if (host)
      advance_hosts(r, &in, n_gpus);
    advance_compute(r, &in, n_gpus);
    advance_copies(r, &in, n_gpus);
    r->now = in.next;
    finish_instant(r, host);
  }
}

/* The lazy loop: direction d's copy of GPU gpu, dt seconds on, at an
 * instant that is not its deadline: it moves on but does not end (a
 * rounding that would end it leaves it at 0, to end a step later at the
 * same time). */
static void
copy_sync(Run *r, Gpu *gpu, int d, double dt, gboolean merged)
{
  CopyEngine *c = &gpu->copy[d];
  if (c->in_latency) {
    if (c->latency_left > dt || !merged) {
      c->latency_left = MAX(0.0, c->latency_left - dt);
      return;
    }
    dt -= c->latency_left;
    copy_latency_end(r, gpu, d);
  }
  c->bytes_left = MAX(0.0, c->bytes_left - c->rate * dt);
}

/* The lazy loop: GPU gpu's clocks from gpu->since to now, when something
 * is about to change on it.  Nothing of it ends here: its deadline is
 * past this instant (its hair included), or it would be due. */
static void
gpu_sync(Run *r, Gpu *gpu)
{
  double dt = r->now - gpu->since;
  gpu->since = r->now;
  if (dt <= 0.0)
    return;
  r->run->gpu_advances++;
  if (gpu->compute.len) {
    gpu->busy += dt;
    gpu->vclock += gpu->compute_rate * dt;
  } else if (gpu->collectives) {
    gpu->comm_exposed += dt;
  }
  const CopyEngine *c = gpu->copy;
  gboolean merge[SIM_DIR_COUNT] = { copy_merged(r, c, SIM_DIR_D2H), copy_merged(r, c, SIM_DIR_H2D) };
  for (int d = 0; d < SIM_DIR_COUNT; d++)
    if (c[d].active != SIM_NO_OP)
      copy_sync(r, gpu, d, dt, merge[d]);
}

/* The lazy loop: GPU g's next deadline, from its state now, into the heap
 * under a new stamp (its older entry, if any, goes stale; none when
 * nothing runs on it). */
static void
gpu_schedule(Run *r, guint g)
{
  Gpu *gpu = &r->gpu[g];
  double t = gpu_deadline(r, gpu, gpu->since);
  gpu->stamp++;
  if (isfinite(t))
    sim_heap_push(&r->e->deadlines, t, g, gpu->stamp);
}

/* Whether a deadline heap entry is an older one of its GPU's. */
static inline gboolean
deadline_stale(const Run *r, const SimHeapItem *item)
{
  return item->value != r->gpu[item->seq].stamp;
}

/* The lazy loop's end of an instant, for the GPUs touched there, in GPU
 * order like the scan: idle engines take their queued copies, then the
 * rates and each GPU's next deadline.  With shared links a change of
 * copies changes every moving copy's rate: each live GPU comes to now
 * first, and the filling runs over them in GPU order. */
static void
lazy_settle(Run *r)
{
  if (!r->shared) {
    /* Each GPU's rates are its own: one walk. */
    FOR_EACH_GPU_IN(r, r->dirty, g) {
      start_gpu_copies(r, &r->gpu[g]);
      update_gpu_rates(r, &r->gpu[g]);
      gpu_schedule(r, g);
    }
    r->copies_changed = FALSE;
    r->dirty = (SimGpuSet){ { 0 } };
    return;
  }
  FOR_EACH_GPU_IN(r, r->dirty, g)
    start_gpu_copies(r, &r->gpu[g]);
  gboolean copies = r->copies_changed;
  r->copies_changed = FALSE;
  if (copies) {
    r->n_walk = 0;
    FOR_EACH_GPU_IN(r, r->live, g) {
      const Gpu *gpu = &r->gpu[g];
      if (gpu->compute.len == 0 && gpu->copy_state == 0 && gpu->collectives == 0) {
        sim_gpu_set_remove(&r->live, g);
        continue;
      }
      gpu_touch(r, g);
      r->walk[r->n_walk++] = g;
    }
  }
  FOR_EACH_GPU_IN(r, r->dirty, g)
    update_gpu_rates(r, &r->gpu[g]);
  if (copies)
    share_rates(r, TRUE);
  FOR_EACH_GPU_IN(r, r->dirty, g)
    gpu_schedule(r, g);
  r->dirty = (SimGpuSet){ { 0 } };
}

/* The lazy loop's next instant: the earliest timer or GPU deadline (stale
 * heap entries dropped first, so an entry left is a GPU's own), or
 * INFINITY when nothing runs. */
static double
lazy_next(Run *r)
{
  SimEngine *e = r->e;
  while (e->deadlines.len && deadline_stale(r, sim_heap_peek(&e->deadlines)))
    sim_heap_pop(&e->deadlines);
  double next = e->timers.len ? sim_heap_peek(&e->timers)->key : INFINITY;
  return e->deadlines.len ? MIN(next, sim_heap_peek(&e->deadlines)->key) : next;
}

/* The lazy loop's advance to the instant: the GPUs whose deadline it is
 * (within its hair), each from its own `since`, then the timers. */
static void
lazy_advance(Run *r, const Instant *in)
{
  SimEngine *e = r->e;
  SimGpuSet due = { { 0 } };
  while (e->deadlines.len && sim_heap_peek(&e->deadlines)->key <= in->next + in->hair) {
    SimHeapItem item = sim_heap_pop(&e->deadlines);
    if (!deadline_stale(r, &item))
      sim_gpu_set_add(&due, item.seq); /* rescheduled after the instant: it is touched */
  }
  e->n_done = 0;
  FOR_EACH_GPU_IN(r, due, g) {
    Gpu *gpu = &r->gpu[g];
    Instant at = { .next = in->next, .dt = in->next - gpu->since, .hair = in->hair };
    r->run->gpu_advances++;
    advance_gpu_compute(r, gpu, &at, gpu->since);
    advance_gpu_copies(r, gpu, &at, gpu->since);
    gpu->since = in->next;
    sim_gpu_set_add(&r->dirty, g);
  }
  r->now = in->next;
  advance_timers(r, in);
}

/* The loop on several GPUs without the host model: a step costs
 * O(touched GPUs · log GPUs), not O(GPUs) (docs/engine.md, "The loop"). */
G_GNUC_NO_INLINE static gboolean
run_loop_lazy(Run *r)
{
  for (;;) {
    lazy_settle(r);
    if (r->failed)
      return FALSE;
    double next = lazy_next(r);
    if (next == INFINITY) {
      if (r->completed == sim_program_n_ops(r->p))
        return TRUE;
      blocked_report(r);
      return FALSE;
    }
    g_assert(next >= r->now);
    Instant in = { .next = next, .dt = next - r->now, .hair = NEAR_TIE * MAX(1.0, next) };
    lazy_advance(r, &in);
    finish_instant(r, FALSE);
  }
}

/* The loop under the host model, out of line: inlined into sim_engine_run
 * as a third form it made the function large enough that gcc stopped
 * inlining copy_deadline and finish_instant and allocated registers
 * differently, 4 % more instructions per event in runs without a host. */
G_GNUC_NO_INLINE static gboolean
run_loop_host(Run *r, guint n_gpus)
{
  return run_loop(r, n_gpus, TRUE);
}

SimRun *
sim_engine_run(SimEngine *e, const SimProgram *p, const SimLink *link, const SimEngineOptions *options,
               GError **error)
{
  g_return_val_if_fail(e != NULL && p != NULL && link != NULL, NULL);
  g_return_val_if_fail(link->compute_slowdown >= 0 && link->compute_slowdown < 1, NULL);
  g_return_val_if_fail(link->node.collective_slowdown >= 0 && link->node.collective_slowdown < 1, NULL);
  g_return_val_if_fail(link->h2d_bandwidth > 0 && link->d2h_bandwidth > 0 && link->bidir_bandwidth > 0, NULL);

  if (!sim_program_validate(p, error))
    return NULL;

  g_autoptr(SimRun) run = run_new(p, options);
  guint64 heap_ops_before = heap_ops(e);
  Run r;
  /* The host model only where some op has a launch or blocks the host:
   * every other program runs the loop it always ran, instruction for
   * instruction. */
  gboolean host = sim_program_has_host(p) || force_host;
  /* A program whose GPUs stand for several of the step's (sim_program_set_copies) runs the loop the
   * whole step's program would: a GPU's arithmetic in the lazy loop does not depend on the others. */
  guint step_gpus = sim_program_step_gpus(p);
  run_begin(&r, e, p, link, run, host, step_gpus > 1 && step_gpus >= lazy_gpus && !host, error);
  gboolean completed = host              ? run_loop_host(&r, p->n_gpus)
                       : r.lazy         ? run_loop_lazy(&r)
                       : p->n_gpus == 1 ? run_loop(&r, 1, FALSE)
                                        : run_loop(&r, p->n_gpus, FALSE);
  if (!completed)
    return NULL;
  run->heap_ops = heap_ops(e) - heap_ops_before;
  if (!run_end(&r, error))
    return NULL;
  return g_steal_pointer(&run);
}

static int
compare_live(gconstpointer a, gconstpointer b)
{
  const SimLive *x = a, *y = b;
  if (x->bytes != y->bytes)
    return x->bytes > y->bytes ? -1 : 1;
  if (x->tag != y->tag)
    return x->tag < y->tag ? -1 : 1;
  return x->layer < y->layer ? -1 : x->layer > y->layer;
}

static void
live_append(const SimLive *live, gpointer data)
{
  g_array_append_val((GArray *)data, *live);
}

GArray *
sim_run_live_at_peak(const SimRun *run, const SimProgram *p, SimPool pool)
{
  GArray *live = g_array_new(FALSE, FALSE, sizeof(SimLive));
  sim_run_live_visit(run, p, pool, live_append, live);
  /* Sorted, so that no replay order shows. */
  g_array_sort(live, compare_live);
  return live;
}

/* The live table has one column per layer, SIM_NO_LAYER first (column 0). */
static inline gsize
live_column(gint32 layer)
{
  return (gsize)(layer - SIM_NO_LAYER);
}

/* The dense live table's most cells: 4 Mi sums, 32 MiB.  Past it (very many
 * layers and names) the sums are made column by column (live_sorted). */
#define LIVE_DENSE_MAX_CELLS (1u << 22)
static gsize live_dense_max_cells = LIVE_DENSE_MAX_CELLS; /* tests lower it: sim_engine_set_live_dense_cells */

void
sim_engine_set_live_dense_cells(gsize cells)
{
  live_dense_max_cells = cells;
}

/* Sums the first n applied actions of `pool` per (tag, layer) in a dense
 * table of `columns` layers: labels and layers are few, and a sweep asks
 * this for every point, so no hashing per action. */
static void
live_dense(const SimProgram *p, const guint32 *applied, guint n, guint pool, gsize columns, SimLiveVisit visit,
           gpointer data)
{
  gsize cells = (gsize)p->labels->len * columns;
  g_autofree gint64 *bytes = g_new0(gint64, cells);
  for (guint i = 0; i < n; i++) {
    const SimMemAction *a = &p->mem[applied[i]];
    if (SIM_POOL_INDEX(sim_program_mem_gpu(p, a), a->pool) == pool)
      bytes[(gsize)a->tag * columns + live_column(a->layer)] += a->delta;
  }
  for (gsize cell = 0; cell < cells; cell++) {
    if (bytes[cell] > 0) {
      SimLive entry = { (guint32)(cell / columns), (gint32)(cell % columns) + SIM_NO_LAYER, bytes[cell] };
      visit(&entry, data);
    }
  }
}

/* The same sums without the dense table: the pool's actions ordered by
 * layer column with a counting sort, then each column's tags summed in one
 * tag-indexed row that only the tags it touched are reset in.  Linear in
 * actions + layers + labels, whatever the model (a hash keyed on
 * tag << 32 | column folded to tag ^ column under g_int64_hash, so a model
 * of 100,000 layers put 3 M keys in 91,000 buckets). */
static void
live_sorted(const SimProgram *p, const guint32 *applied, guint n, guint pool, gsize columns, SimLiveVisit visit,
            gpointer data)
{
  g_autofree guint *start = g_new0(guint, columns + 1);
  guint m = 0;
  for (guint i = 0; i < n; i++) {
    const SimMemAction *a = &p->mem[applied[i]];
    if (SIM_POOL_INDEX(sim_program_mem_gpu(p, a), a->pool) == pool) {
      start[live_column(a->layer) + 1]++;
      m++;
    }
  }
  for (gsize c = 0; c < columns; c++)
    start[c + 1] += start[c];
  g_autofree guint32 *order = g_new(guint32, MAX(m, 1u));
  g_autofree guint *fill = g_memdup2(start, sizeof(guint) * (columns + 1));
  for (guint i = 0; i < n; i++) {
    const SimMemAction *a = &p->mem[applied[i]];
    if (SIM_POOL_INDEX(sim_program_mem_gpu(p, a), a->pool) == pool)
      order[fill[live_column(a->layer)]++] = applied[i];
  }
  g_autofree gint64 *row = g_new0(gint64, p->labels->len);
  g_autofree guint8 *seen = g_new0(guint8, p->labels->len);
  g_autofree guint32 *touched = g_new(guint32, MAX(p->labels->len, 1u));
  for (gsize c = 0; c < columns; c++) {
    guint k = 0;
    for (guint i = start[c]; i < start[c + 1]; i++) {
      const SimMemAction *a = &p->mem[order[i]];
      if (!seen[a->tag]) {
        seen[a->tag] = 1;
        touched[k++] = a->tag;
      }
      row[a->tag] += a->delta;
    }
    for (guint t = 0; t < k; t++) {
      guint32 tag = touched[t];
      if (row[tag] > 0) {
        SimLive entry = { tag, (gint32)c + SIM_NO_LAYER, row[tag] };
        visit(&entry, data);
      }
      row[tag] = 0;
      seen[tag] = 0;
    }
  }
}

gint32
sim_run_live_visit_peak(const SimRun *run, const SimProgram *p, const SimPeak *peak, SimLiveVisit visit,
                        gpointer data)
{
  guint n = peak->applied;
  /* A step GPU's pool, read from the program GPU that stands for it. */
  guint pool = SIM_POOL_INDEX(sim_program_gpu_of(p, peak->pool / SIM_POOL_COUNT), peak->pool % SIM_POOL_COUNT);
  const guint32 *applied = (const guint32 *)(void *)run->applied->data;

  if (p->baseline[pool] > 0) {
    SimLive base = { p->baseline_tag, SIM_NO_LAYER, (gint64)p->baseline[pool] };
    visit(&base, data);
  }
  gint32 max_layer = SIM_NO_LAYER;
  for (guint i = 0; i < n; i++)
    max_layer = MAX(max_layer, p->mem[applied[i]].layer);
  gsize columns = live_column(max_layer) + 1;
  if ((gsize)p->labels->len * columns <= live_dense_max_cells)
    live_dense(p, applied, n, pool, columns, visit, data);
  else
    live_sorted(p, applied, n, pool, columns, visit, data);
  return max_layer;
}

gint32
sim_run_live_visit(const SimRun *run, const SimProgram *p, SimPool pool, SimLiveVisit visit, gpointer data)
{
  return sim_run_live_visit_peak(run, p, &run->peak[pool], visit, data);
}
