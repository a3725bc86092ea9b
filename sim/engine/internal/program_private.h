/* sim/engine/internal/program_private.h — the inside of a SimProgram: its fast
 * builders, the helpers that grow its arrays, and what only tests call.
 *
 * Who may include it, and why:
 *  - sim/engine/program.c, which owns the private fields of SimProgram and
 *    SimStream (capacities, interning caches, the record bookkeeping);
 *  - sim/lower/lower.c and sim/lower/pipeline.c, which write a program per
 *    candidate a planner tries: they build through the inline forms
 *    below, so that an op or a memory action costs no call;
 *  - tests, for the functions marked test-only.
 * Anything else builds through engine/program.h: the build puts this
 * header ("engine/internal/program_private.h") on the include path of
 * offsim_engine, of offsim_lower and of the tests only
 * (offsim_engine_internal, sim/CMakeLists.txt).
 *
 * The inline builders keep every invariant of program.h: they are the
 * bodies of program.h's sim_program_compute, sim_program_copy and
 * sim_program_mem, which only call them.  A failed argument check logs
 * (g_return_val_if_fail) and adds nothing: the op builders return
 * SIM_NO_OP.  Growth doubles an array when it is full (never shrinks; the
 * program frees it), so a program reused through sim_program_reset stops
 * allocating once it has held its largest step.
 */
#pragma once

#include "engine/program.h"

#include <string.h>

G_BEGIN_DECLS

/* Room for one more op in the program and in `stream`. */
void sim_program_grow_ops(SimProgram *program, guint32 stream);
/* Room for one more memory action. */
void sim_program_grow_mem(SimProgram *program);
/* launch[] filled with zeros up to every op added (sim_program_set_launch). */
void sim_program_grow_launch(SimProgram *program);
/* Room for interning slot `slot` (sim_program_intern_slot). */
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

/* Appends an op of `kind` to the program and to its stream and returns its
 * index (SIM_NO_OP: no such stream); the caller then sets the fields of its
 * kind (work, bytes, dir, event) in place.  Written field by field into the
 * array: a lowering adds thousands of ops per program, and an op built on
 * the stack and copied in costs a failed store-to-load forward (its byte
 * fields are written narrow and read back wide), which perf showed as half
 * of the lowering's time. */
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
  op->stream = (guint16)stream;
  op->layer = layer;
  op->label = label;
  op->mem_first = p->n_mem;
  op->mem_count = 0;
  op->mem_starts = 0;
  op->gpu = (guint8)s->gpu;
  s->ops[s->n_ops++] = index;
  return index;
}

/* sim_program_compute, inline. */
static inline guint32
sim_program_compute_inline(SimProgram *p, guint32 stream, double seconds, SimPhase phase, gint32 layer,
                           guint32 label)
{
  /* Checked here, so that the inlined add_op's test folds away. */
  g_return_val_if_fail(stream < p->streams->len, SIM_NO_OP);
  g_return_val_if_fail(seconds >= 0, SIM_NO_OP);
  guint32 index = sim_program_add_op(p, SIM_OP_COMPUTE, phase, stream, layer, label);
  p->ops[index].work = seconds;
  p->compute_work[sim_phase_work(phase)] += seconds;
  return index;
}

/* sim_program_copy, inline. */
static inline guint32
sim_program_copy_inline(SimProgram *p, guint32 stream, SimDir dir, guint64 bytes, SimHostMemory host, gint32 layer,
                        guint32 label)
{
  g_return_val_if_fail(stream < p->streams->len, SIM_NO_OP);
  guint32 index = sim_program_add_op(p, SIM_OP_COPY, dir == SIM_DIR_D2H ? SIM_PHASE_OFFLOAD : SIM_PHASE_RELOAD,
                                     stream, layer, label);
  SimOp *op = &p->ops[index];
  op->dir = (guint8)dir;
  op->pageable = host == SIM_HOST_PAGEABLE;
  op->bytes = bytes;
  p->n_blocking += op->pageable; /* a pageable copy blocks the host */
  p->copy_bytes[dir] += bytes;
  p->copies[dir]++;
  return index;
}

/* sim_program_mem, inline: a lowering adds two or three actions per op. */
static inline void
sim_program_mem_inline(SimProgram *p, guint32 op, SimWhen when, SimPool pool, gint64 delta, guint32 tag,
                       gint32 layer)
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
  a->stream = o->stream;
}

/* sim_program_set_launch, inline: an eager framework gives every op a
 * launch, so the common case (each op set right after it is added) is one
 * store past the zero fill, without a call. */
static inline void
sim_program_set_launch_inline(SimProgram *p, guint32 op, double seconds)
{
  g_return_if_fail((guint64)op + 1 == p->n_ops); /* 64 bits: SIM_NO_OP + 1 is not 0 */
  g_return_if_fail(seconds >= 0);
  if (G_UNLIKELY(p->n_launch < p->n_ops)) {
    if (p->n_launch + 1 == p->n_ops && p->n_launch < p->launch_cap)
      p->launch[p->n_launch++] = 0.0;
    else
      sim_program_grow_launch(p);
  }
  /* A count, not a sum, so that setting an op back to 0 turns the host
   * model off again exactly. */
  p->n_launched += (seconds > 0) - (p->launch[op] > 0);
  p->launch[op] = seconds;
}

/* Test-only: the number of memory actions (tests compare two lowerings). */
static inline guint
sim_program_n_mem(const SimProgram *program)
{
  return program->n_mem;
}

G_END_DECLS
