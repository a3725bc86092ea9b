/* sim/engine/program.h — what the engine runs: ops on in-order streams, events
 * between streams, and the memory each op allocates and frees.
 *
 * A program is built once by a policy lowering (planner/) and may be run many
 * times.  Ops live in one contiguous array in *issue order*, the order a host
 * thread would enqueue them; the engine breaks every tie by that index, which
 * is what makes two runs byte-identical.  Each stream is the in-order list of
 * its ops' indices, like a CUDA stream.
 *
 * Op kinds:
 *   compute     `work` seconds at full rate; slowed while copies are in flight.
 *   copy        `bytes` in one direction; pinned or pageable host memory.
 *   record      marks an event as happened (instant).
 *   wait        blocks its stream until the event is recorded (instant after).
 *   host_alloc  `work` seconds of host-side pinned allocation; uses no device
 *               resource, but holds its stream.
 *
 * Memory actions belong to an op and apply when it starts or when it ends; a
 * free on a record op is a free "when a later event fires".  Each action
 * carries a tag (an interned name) and a layer so that the engine can say
 * what is live at the peak.  Actions of one op are contiguous, the ones that
 * apply at its start first: add them right after the op, in any order.
 *
 * Every event must be recorded at most once (sim_program_validate checks it);
 * a wait on an event that is never recorded is not a build error, it is a
 * stuck schedule the engine reports.
 */
#pragma once

#include "machine.h"

#include <glib.h>
#include <string.h>

G_BEGIN_DECLS

typedef enum {
  SIM_OP_COMPUTE,
  SIM_OP_COPY,
  SIM_OP_RECORD,
  SIM_OP_WAIT,
  SIM_OP_HOST_ALLOC,
} SimOpKind;

/* What an op is for, in reports and plots. */
typedef enum {
  SIM_PHASE_FORWARD,
  SIM_PHASE_BACKWARD,
  SIM_PHASE_RECOMPUTE,
  SIM_PHASE_OFFLOAD, /* device to host */
  SIM_PHASE_RELOAD,  /* host to device */
  SIM_PHASE_ALLOC,   /* pinned host allocation */
  SIM_PHASE_SYNC,    /* record and wait */
  SIM_PHASE_COUNT,
} SimPhase;

/* A memory pool; also the index of everything kept per pool (baseline,
 * levels, peaks). */
typedef enum {
  SIM_POOL_DEVICE = 0,
  SIM_POOL_HOST = 1,
  SIM_POOL_COUNT, /* the number of pools: size of per-pool arrays */
} SimPool;

/* Which sum of compute seconds a compute op adds to: the index of
 * SimProgram.compute_work.  Recompute is kept apart so that a report can
 * show what checkpointing costs. */
typedef enum {
  SIM_WORK_COMPUTE = 0,   /* forward and backward */
  SIM_WORK_RECOMPUTE = 1, /* phase SIM_PHASE_RECOMPUTE */
  SIM_WORK_COUNT,
} SimWork;

typedef enum {
  SIM_AT_START = 0,
  SIM_AT_END = 1,
} SimWhen;

/* The layer of an op, event or memory action that belongs to no layer
 * (embedding and head ops have one; syncs and the baseline do not). */
#define SIM_NO_LAYER (-1)

/* Not an op: what a builder returns when g_return_val_if_fail rejects its
 * arguments (nothing is added), and where a field names no op
 * (SimEvent.recorder of an event not recorded yet, SimPeak.op of the
 * baseline).  Never a valid index: a program holds fewer than 2^31 ops
 * (sim_program_grow_ops asserts it). */
#define SIM_NO_OP G_MAXUINT32

/* 40 bytes (the engine reads one or two per event): the fields of
 * different kinds share one union. */
typedef struct {
  union {
    double work;    /* seconds: compute, host_alloc */
    guint64 bytes;  /* copy */
    guint32 event;  /* record and wait */
  };
  guint8 kind;     /* SimOpKind */
  guint8 phase;    /* SimPhase */
  guint8 dir;      /* SimDir, copies only */
  guint8 pageable; /* copies only */
  guint32 stream;
  gint32 layer;    /* SIM_NO_LAYER when none */
  guint32 label;   /* interned name */
  guint32 mem_first, mem_count; /* its memory actions: the starts first, then the ends */
  guint32 mem_starts;           /* how many of them apply at the start */
} SimOp;
G_STATIC_ASSERT(sizeof(SimOp) == 40);

/* 16 bytes: the engine walks tens of thousands a step, and a step's program
 * is meant to stay in the core's cache.  Which op it belongs to and whether
 * it applies at the start or the end follow from its position (see SimOp). */
typedef struct {
  gint64 delta;      /* bytes: > 0 allocates, < 0 frees */
  guint32 tag : 31;  /* interned name */
  guint32 pool : 1;  /* SimPool */
  gint32 layer;
} SimMemAction;
G_STATIC_ASSERT(sizeof(SimMemAction) == 16);

typedef struct {
  char *name;
  guint32 *ops; /* op indices, in stream order */
  guint n_ops, cap;
} SimStream;

typedef struct {
  guint32 label; /* interned name, for stuck-schedule reports */
  gint32 layer;
  guint32 recorder; /* the op that records it, or SIM_NO_OP */
} SimEvent;

typedef struct SimProgram SimProgram;
struct SimProgram {
  /* Plain arrays, not GArray: a lowering appends tens of thousands of ops
   * and actions per program and a planner lowers thousands of programs. */
  SimOp *ops;          /* issue order */
  guint n_ops, ops_cap;
  SimMemAction *mem;   /* grouped by op */
  guint n_mem, mem_cap;
  GPtrArray *streams;  /* SimStream* */
  GPtrArray *labels;   /* char*, index = interned id */
  GHashTable *label_ids;
  GHashTable *label_cache; /* const char* (by address) -> id + 1: see sim_program_intern */
  const char **slot_names; /* see sim_program_intern_slot */
  guint32 *slot_ids;
  guint slot_cap;
  GArray *events;      /* SimEvent, index = event id */
  guint64 baseline[SIM_POOL_COUNT]; /* memory in use before the first op (static) */
  guint32 baseline_tag;
  /* Tags reserved for what is not a saved tensor, so that reports tell them
   * apart even from a tensor a user named "input". */
  guint32 input_tag, workspace_tag;
  guint32 record_label, wait_label;
  guint32 second_record; /* the first op that recorded an already recorded event, or SIM_NO_OP */
  /* Nominal seconds of compute ops per SimWork, summed in issue order as
   * they are added. */
  double compute_work[SIM_WORK_COUNT];
  /* Copies and their bytes per SimDir, summed as they are added. */
  guint64 copy_bytes[SIM_DIR_COUNT];
  guint copies[SIM_DIR_COUNT];
};

SimProgram *sim_program_new(void);
void sim_program_free(SimProgram *program);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimProgram, sim_program_free)

/* Drops every op, stream, event and baseline but keeps the storage, so a
 * planner that lowers thousands of candidates does not allocate per op. */
void sim_program_reset(SimProgram *program);

/* The id of `label`, interning a copy the first time.  Lowerings intern the
 * same workload strings on every run, so ids are also cached by the string's
 * address: a hit costs a pointer hash and a strcmp that confirms the content
 * (an address reused for another string just misses). */
guint32 sim_program_intern(SimProgram *program, const char *label);

void sim_program_grow_slots(SimProgram *program, guint slot);

/* The id of an interned string (g_intern_string: one address per content,
 * never freed), remembered at position `slot`: a lowering that interns the
 * same workload's names in the same order on every run pays one pointer
 * comparison per name instead of a hash lookup.  Correct whatever was at the
 * slot before, since equal addresses of interned strings mean equal names. */
static inline guint32
sim_program_intern_slot(SimProgram *p, guint slot, const char *interned)
{
  if (slot >= p->slot_cap)
    sim_program_grow_slots(p, slot);
  if (p->slot_names[slot] != interned) {
    p->slot_ids[slot] = sim_program_intern(p, interned);
    p->slot_names[slot] = interned;
  }
  return p->slot_ids[slot];
}
guint32 sim_program_add_stream(SimProgram *program, const char *name);
guint32 sim_program_add_event(SimProgram *program, guint32 label, gint32 layer);
void sim_program_set_baseline(SimProgram *program, SimPool pool, guint64 bytes, const char *tag);

void sim_program_grow_ops(SimProgram *program, guint32 stream);

/* Appends an op of `kind` to the program and to its stream and returns its
 * index; the caller then sets the fields of its kind (work, bytes, dir,
 * event) in place.  Inline, and written field by field into the array: a
 * lowering adds thousands of ops per program, and an op built on the stack
 * and copied in costs a failed store-to-load forward (its byte fields are
 * written narrow and read back wide), which perf showed as half of the
 * lowering's time. */
static inline guint32
sim_program_add_op(SimProgram *p, SimOpKind kind, SimPhase phase, guint32 stream, gint32 layer, guint32 label)
{
  g_return_val_if_fail(stream < p->streams->len, SIM_NO_OP);
  SimStream *s = (SimStream *)g_ptr_array_index(p->streams, stream);
  if (p->n_ops == p->ops_cap || s->n_ops == s->cap)
    sim_program_grow_ops(p, stream);
  guint32 index = p->n_ops++;
  SimOp *op = &p->ops[index];
  op->bytes = 0;
  op->kind = (guint8)kind;
  op->phase = (guint8)phase;
  op->dir = 0;
  op->pageable = 0;
  op->stream = stream;
  op->layer = layer;
  op->label = label;
  op->mem_first = p->n_mem;
  op->mem_count = 0;
  op->mem_starts = 0;
  s->ops[s->n_ops++] = index;
  return index;
}

/* Each returns the new op's index, or SIM_NO_OP (adding nothing) when its
 * arguments are wrong: a stream or event that does not exist, negative
 * seconds. */
static inline guint32
sim_program_compute(SimProgram *p, guint32 stream, double seconds, SimPhase phase, gint32 layer, guint32 label)
{
  /* Checked here, so that the inlined add_op's test folds away. */
  g_return_val_if_fail(stream < p->streams->len, SIM_NO_OP);
  g_return_val_if_fail(seconds >= 0, SIM_NO_OP);
  guint32 index = sim_program_add_op(p, SIM_OP_COMPUTE, phase, stream, layer, label);
  p->ops[index].work = seconds;
  p->compute_work[phase == SIM_PHASE_RECOMPUTE ? SIM_WORK_RECOMPUTE : SIM_WORK_COMPUTE] += seconds;
  return index;
}

static inline guint32
sim_program_copy(SimProgram *p, guint32 stream, SimDir dir, guint64 bytes, gboolean pageable, gint32 layer,
                 guint32 label)
{
  g_return_val_if_fail(stream < p->streams->len, SIM_NO_OP);
  guint32 index = sim_program_add_op(p, SIM_OP_COPY, dir == SIM_DIR_D2H ? SIM_PHASE_OFFLOAD : SIM_PHASE_RELOAD,
                                     stream, layer, label);
  SimOp *op = &p->ops[index];
  op->dir = (guint8)dir;
  op->pageable = pageable ? 1 : 0;
  op->bytes = bytes;
  p->copy_bytes[dir] += bytes;
  p->copies[dir]++;
  return index;
}
guint32 sim_program_record(SimProgram *program, guint32 stream, guint32 event);
guint32 sim_program_wait(SimProgram *program, guint32 stream, guint32 event);
guint32 sim_program_host_alloc(SimProgram *program, guint32 stream, double seconds, gint32 layer,
                               guint32 label);

void sim_program_grow_mem(SimProgram *program);

/* Adds a memory action to `op`, which must be the newest op (not
 * SIM_NO_OP: an op that was never added gets no actions).  Inline: a
 * lowering adds two or three per op. */
static inline void
sim_program_mem(SimProgram *p, guint32 op, SimWhen when, SimPool pool, gint64 delta, guint32 tag, gint32 layer)
{
  g_return_if_fail((guint64)op + 1 == p->n_ops); /* 64 bits: SIM_NO_OP + 1 is not 0 */
  if (p->n_mem == p->mem_cap)
    sim_program_grow_mem(p);
  /* The op is the newest, so its actions end at n_mem. */
  SimOp *o = &p->ops[op];
  SimMemAction *a = &p->mem[p->n_mem++];
  if (when == SIM_AT_START) {
    if (G_UNLIKELY(o->mem_starts < o->mem_count)) {
      /* Keep the starts ahead of the ends so the engine walks each once. */
      a = &p->mem[o->mem_first + o->mem_starts];
      memmove(a + 1, a, (o->mem_count - o->mem_starts) * sizeof(SimMemAction));
    }
    o->mem_starts++;
  }
  o->mem_count++;
  /* Field by field, like sim_program_add_op. */
  a->delta = delta;
  a->tag = tag;
  a->pool = pool;
  a->layer = layer;
}

static inline const SimOp *
sim_program_op(const SimProgram *program, guint32 index)
{
  return &program->ops[index];
}

static inline guint
sim_program_n_mem(const SimProgram *program)
{
  return program->n_mem;
}

static inline const char *
sim_program_label(const SimProgram *program, guint32 label)
{
  return g_ptr_array_index(program->labels, label);
}

static inline const SimEvent *
sim_program_event(const SimProgram *program, guint32 event)
{
  return &g_array_index(program->events, SimEvent, event);
}

static inline guint
sim_program_n_events(const SimProgram *program)
{
  return program->events->len;
}

static inline guint
sim_program_n_ops(const SimProgram *program)
{
  return program->n_ops;
}

/* Checks the build contract: every event recorded at most once (indices of
 * streams, events and ops are checked as the program is built).  O(1): the
 * builders note a second record as it happens.  A failure is a bug in the
 * lowering: SIM_ERROR_INTERNAL naming both ops. */
gboolean sim_program_validate(const SimProgram *program, GError **error);

/* "op 12 'backward mlp L3' on stream 'compute'": one op named for messages. */
char *sim_program_describe_op(const SimProgram *program, guint32 op);
/* "event 'd2h-done' L3" */
char *sim_program_describe_event(const SimProgram *program, guint32 event);

/* Static names for messages: "forward", "backward", … ("?" past
 * SIM_PHASE_COUNT); "device" or "host" ("?" past SIM_POOL_COUNT). */
const char *sim_phase_name(SimPhase phase);
const char *sim_pool_name(SimPool pool);

G_END_DECLS
