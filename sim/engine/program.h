/* sim/engine/program.h — what the engine runs: ops on in-order streams, events
 * between streams, and the memory each op allocates and frees.
 *
 * A program is built once by a lowering (sim/lower) and may be run many
 * times, by several engines at once: a run only reads it.  Ops live in one
 * contiguous array in *issue order*, the order a host thread would enqueue
 * them; the engine breaks every tie by that index, which is what makes two
 * runs byte-identical.  Each stream is the in-order list of its ops'
 * indices, like a CUDA stream.  See docs/engine.md for the semantics.
 *
 * Op kinds:
 *   compute     `work` seconds at full rate; slowed while copies are in flight.
 *   copy        `bytes` in one direction; pinned or pageable host memory.
 *   record      marks an event as happened (instant).
 *   wait        blocks its stream until the event is recorded (instant after).
 *   host_alloc  `work` seconds of host-side pinned allocation; uses no device
 *               resource, but holds its stream.
 *   send        `work` seconds of a stage-to-stage transfer (p2p_latency +
 *               bytes / p2p_bandwidth): like host_alloc it holds its stream
 *               and uses no resource the engine shares.
 *   collective  `work` seconds of a collective (all-reduce, all-gather,
 *               reduce-scatter, all-to-all: sim/engine/collective.h prices
 *               it) on its stream; while one runs its GPU's compute is
 *               slowed by [node] collective_slowdown (NCCL's kernels take
 *               SMs).  The members of a collective that the program
 *               simulates (data-parallel replicas) meet at a barrier first
 *               (sim_program_add_barrier); members it does not simulate
 *               (tensor-parallel ranks, symmetric) need none.
 *
 * The host: every op may carry a host issue cost, its `launch` (seconds the
 * host thread of its GPU spends dispatching and launching it;
 * sim_program_set_launch, 0 unless set).  Once any op of a program has a
 * launch above 0, or blocks the host (a host_alloc or a pageable copy:
 * sim_program_host_blocks), the engine runs one host per GPU that issues
 * that GPU's ops in issue order (across all its streams): op i is issued at
 *   issue_i = max(issue_{i-1}, unblock_i) + launch_i
 * where unblock_i is the end of the latest host-blocking op issued before
 * it, and an op starts only when its stream reaches it and it is issued.
 * So nothing issued after a pageable copy or a cudaHostAlloc starts before
 * it ends, on any stream of its GPU, even with every launch 0: both calls
 * return to the thread that issues kernels only then.  A program with
 * neither launches nor blocking ops runs without a host, the loop that ran
 * before the host existed.  docs/engine.md, "The host".
 *
 * GPUs: every stream belongs to one GPU (sim_program_add_stream_on; plain
 * sim_program_add_stream is GPU 0), and so do its ops and their memory
 * actions.  Each GPU has its own compute resource, copy engines and memory
 * pools; the pools of GPU g are SIM_POOL_INDEX(g, SIM_POOL_DEVICE) and
 * SIM_POOL_INDEX(g, SIM_POOL_HOST), so a one-GPU program's pools are the
 * SimPool values themselves.  Events cross GPUs freely.
 *
 * Memory actions belong to an op and apply when it starts or when it ends; a
 * free on a record op is a free "when a later event fires".  Each action
 * carries a tag (an interned name) and a layer so that the engine can say
 * what is live at the peak.
 *
 * Invariants, kept by the builders below:
 *  - every op is in exactly one stream, its `stream`, and each stream lists
 *    its ops in issue order; every index is below SIM_NO_OP;
 *  - an op's memory actions are contiguous, the ones that apply at its start
 *    first (add them right after the op, in any order);
 *  - compute_work, copy_bytes and copies are the sums over the ops added;
 *  - every event is recorded at most its count times (once, unless it is a
 *    barrier), or sim_program_validate fails.  A
 *    wait on an event that is never recorded is not a build error: it is a
 *    stuck schedule the engine reports.
 *
 * Ownership: the program owns everything in it.  sim_program_new's result
 * is freed with sim_program_free (or g_autoptr).  Names are copied in
 * (stream names, interned labels).  What the accessors return belongs to
 * the program: sim_program_label's string lives until the program is freed
 * (labels survive a reset); the pointers of sim_program_op and
 * sim_program_event until the next op or event is added, or a reset.
 * sim_program_describe_op returns a new string for g_free; sim_phase_name
 * and sim_pool_name return static strings.  Building is single-threaded.
 *
 * Fields: SimProgram and SimStream stay visible so that the engine and the
 * plots read ops, actions and streams without a call.  Fields under
 * "read-only" may be read by anyone and written only by the builders;
 * fields under "private" belong to program.c and program_private.h (the
 * fast builders the lowering uses): read or write them nowhere else.
 */
#pragma once

#include "engine/kernel.h"
#include "engine/machine.h"

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SIM_OP_COMPUTE,
  SIM_OP_COPY,
  SIM_OP_RECORD,
  SIM_OP_WAIT,
  SIM_OP_HOST_ALLOC,
  SIM_OP_SEND,
  SIM_OP_COLLECTIVE,
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
  SIM_PHASE_SEND,    /* stage to stage */
  SIM_PHASE_COMM,    /* a collective among GPUs */
  SIM_PHASE_OPTIMIZER, /* the optimizer step's kernels, and copies of offloaded static state */
  SIM_PHASE_COUNT,
} SimPhase;

/* A memory pool; also the index of everything kept per pool (baseline,
 * levels, peaks). */
typedef enum {
  SIM_POOL_DEVICE = 0,
  SIM_POOL_HOST = 1,
  SIM_POOL_COUNT, /* the number of pools: size of per-pool arrays */
} SimPool;

/* The pool of kind `pool` (SimPool) on GPU `gpu`: the index of a
 * program's baselines and of a run's per-GPU peaks. */
#define SIM_POOL_INDEX(gpu, pool) (2u * (guint)(gpu) + (guint)(pool))

/* The most GPUs a program's streams run on (SIM_NODE_MAX_GPUS, machine.h),
 * and so the most pools. */
#define SIM_PROGRAM_MAX_POOLS (2 * SIM_NODE_MAX_GPUS)

/* Which sum of compute seconds a compute op adds to: the index of
 * SimProgram.compute_work.  Recompute is kept apart so that a report can
 * show what checkpointing costs. */
typedef enum {
  SIM_WORK_COMPUTE = 0,   /* forward and backward */
  SIM_WORK_RECOMPUTE = 1, /* phase SIM_PHASE_RECOMPUTE */
  SIM_WORK_OPTIMIZER = 2, /* phase SIM_PHASE_OPTIMIZER */
  SIM_WORK_COUNT,
} SimWork;

/* The sum a compute op of `phase` adds to. */
static inline SimWork
sim_phase_work(guint phase)
{
  return phase == SIM_PHASE_RECOMPUTE ? SIM_WORK_RECOMPUTE
         : phase == SIM_PHASE_OPTIMIZER ? SIM_WORK_OPTIMIZER
                                        : SIM_WORK_COMPUTE;
}

typedef enum {
  SIM_AT_START = 0,
  SIM_AT_END = 1,
} SimWhen;

/* The layer of an op, event or memory action that belongs to no layer:
 * the embedding and the head, syncs, the baseline. */
#define SIM_NO_LAYER (-1)

/* Not an op: what a builder returns when g_return_val_if_fail rejects its
 * arguments (nothing is added), and where a field names no op
 * (SimEvent.recorder of an event not recorded yet, SimPeak.op of the
 * baseline).  Never a valid index: a program holds fewer than 2^31 ops
 * (sim_program_grow_ops asserts it). */
#define SIM_NO_OP G_MAXUINT32

/* Not an event: where a builder's caller keeps "no event yet" (the
 * lowering's per-layer offload and reload events).  Never a valid index, for
 * the same reason as SIM_NO_OP. */
#define SIM_NO_EVENT G_MAXUINT32

/* The most streams a program holds: a memory action names its op's stream
 * in 11 bits (SimMemAction).  A lowering adds three to five per GPU, so
 * SIM_NODE_MAX_GPUS of them fit (sim_program_add_stream_on asserts it). */
#define SIM_PROGRAM_MAX_STREAMS (1u << 11)

/* 32 bytes (the engine reads one or two per event; a step of 10^6 layers
 * holds 75 M of them): the fields of different kinds share one union, and
 * the narrow ones are bit fields.  Layers stay below 2^20
 * (SIM_WORKLOAD_MAX_LAYERS), streams below SIM_PROGRAM_MAX_STREAMS and
 * GPUs below SIM_NODE_MAX_GPUS (256), so every value fits its width. */
typedef struct {
  union {
    double work;    /* seconds: compute, host_alloc, send, collective */
    guint64 bytes;  /* copy */
    guint32 event;  /* record and wait */
  };
  /* What the engine reads per event, whole bytes: */
  guint8 kind;          /* SimOpKind */
  guint8 gpu;           /* its stream's GPU */
  guint16 stream;
  /* What it reads seldom (peaks, copies), bit fields: */
  gint32 layer : 23;    /* SIM_NO_LAYER when none */
  guint32 phase : 4;    /* SimPhase */
  guint32 dir : 1;      /* SimDir, copies only */
  guint32 pageable : 1; /* copies only */
  guint32 label;        /* interned name */
  guint32 mem_first, mem_count; /* its memory actions: the starts first, then the ends */
  guint32 mem_starts;           /* how many of them apply at the start */
} SimOp;
G_STATIC_ASSERT(sizeof(SimOp) == 32);
G_STATIC_ASSERT(SIM_PHASE_COUNT <= 16 && SIM_DIR_COUNT <= 2 && SIM_NODE_MAX_GPUS <= 256 &&
                SIM_PROGRAM_MAX_STREAMS <= 65536); /* phase, dir, gpu, stream */

/* 16 bytes: the engine walks tens of thousands a step, and a step's program
 * is meant to stay in the core's cache.  Which op it belongs to and whether
 * it applies at the start or the end follow from its position (see SimOp).
 * It names its op's stream (the caching allocator's replay keeps a pool
 * per stream, result/reserved.c); its GPU is that stream's
 * (sim_program_mem_gpu). */
typedef struct {
  gint64 delta;        /* bytes: > 0 allocates, < 0 frees */
  guint32 tag : 31;    /* interned name */
  guint32 pool : 1;    /* SimPool */
  gint32 layer : 21;   /* layers stay below 2^20 (SIM_WORKLOAD_MAX_LAYERS) */
  guint32 stream : 11; /* its op's stream, < SIM_PROGRAM_MAX_STREAMS */
} SimMemAction;
G_STATIC_ASSERT(sizeof(SimMemAction) == 16);
G_STATIC_ASSERT(SIM_POOL_COUNT <= 2); /* `pool` is one bit */

typedef struct {
  /* read-only */
  char *name;
  guint32 *ops; /* op indices, in stream order */
  guint n_ops;
  guint gpu;    /* the GPU it runs on */
  /* private */
  guint cap;    /* of ops */
} SimStream;

typedef struct {
  guint32 label; /* interned name, for stuck-schedule reports */
  gint32 layer;
  guint32 recorder; /* the op that records it (a barrier's last), or SIM_NO_OP */
  guint32 count;    /* records it takes to happen: 1, or a barrier's members */
  guint32 records;  /* records added so far */
} SimEvent;

typedef struct SimProgram SimProgram;
struct SimProgram {
  /* read-only */
  /* Plain arrays, not GArray: a lowering appends tens of thousands of ops
   * and actions per program and a planner lowers thousands of programs. */
  SimOp *ops;          /* issue order */
  guint n_ops;
  SimMemAction *mem;   /* grouped by op */
  guint n_mem;
  GPtrArray *streams;  /* SimStream* */
  GPtrArray *labels;   /* char*, index = interned id */
  GArray *events;      /* SimEvent, index = event id */
  guint n_gpus;        /* one past the highest GPU of a stream (1 for a program without streams) */
  /* Memory in use before the first op (static), per SIM_POOL_INDEX; only
   * the first 2 × n_gpus entries are in use. */
  guint64 baseline[SIM_PROGRAM_MAX_POOLS];
  guint32 baseline_tag;
  /* Tags reserved for what is not a saved tensor, so that reports tell them
   * apart even from a tensor a user named "input". */
  guint32 input_tag, workspace_tag;
  guint32 grads_tag;   /* gradients allocated during backward (not static) */
  guint32 outputs_tag; /* outputs a caller keeps through backward */
  /* Nominal seconds of compute ops per SimWork, summed in issue order as
   * they are added. */
  double compute_work[SIM_WORK_COUNT];
  /* Compute seconds by kernel class (SimKernelClass, kernel.h) of the ops
   * a lowering knows the class of (layers run op by op): what the JSON
   * result's time per kernel class sums.  Added by the lowering. */
  double kernel_work[SIM_KERNEL_CLASSES];
  /* Copies and their bytes per SimDir, summed as they are added. */
  guint64 copy_bytes[SIM_DIR_COUNT];
  guint copies[SIM_DIR_COUNT];
  /* The step's GPUs the program's stand for (sim_program_set_copies): GPU
   * g of the program is GPUs step_gpu[g] .. step_gpu[g + 1] - 1 of the
   * step, identical copies of it that the program does not hold (a
   * pipeline's data-parallel replicas, sim/lower/pipeline.h).  Only when
   * `copied`; otherwise every GPU is itself.  Read through
   * sim_program_step_gpus, sim_program_step_gpu, sim_program_gpu_of. */
  gboolean copied;
  guint16 step_gpu[SIM_NODE_MAX_GPUS + 1];
  /* Host issue cost per op in seconds, kept apart from SimOp so that an op
   * stays 32 bytes and a program without launches pays nothing: launch[i]
   * for i < n_launch, 0 past it (read through sim_program_launch). */
  double *launch;
  guint n_launch;
  /* Ops whose launch is above 0: the engine runs the host model when there
   * is one or a host-blocking op (sim_program_has_host). */
  guint n_launched;
  /* Host-blocking ops (sim_program_host_blocks), counted as they are added. */
  guint n_blocking;
  /* The micro-batch of each op of a pipeline, as runs in issue order
   * (SimMicrobatchRun, marked by sim_program_mark_microbatch); empty
   * outside a pipeline.  Kept apart from SimOp, as `launch` is, so that an
   * op stays 32 bytes.  Read through sim_program_op_microbatch. */
  GArray *microbatch_runs;

  /* private: see program_private.h */
  guint ops_cap, mem_cap;   /* capacities of ops and mem */
  guint launch_cap;         /* of launch */
  GHashTable *label_ids;    /* char* (content) -> id */
  GHashTable *label_cache;  /* const char* (by address) -> id + 1: see sim_program_intern */
  const char **slot_names;  /* see sim_program_intern_slot */
  guint32 *slot_ids;
  guint slot_cap;
  guint32 record_label, wait_label;
  guint32 second_record;    /* the first op that recorded an already recorded event, or SIM_NO_OP */
};

SimProgram *sim_program_new(void);
void sim_program_free(SimProgram *program);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimProgram, sim_program_free)

/* Drops every op, action, stream, event, baseline and sum but keeps the op,
 * action and event storage and the interned labels, so a planner that
 * lowers thousands of candidates does not allocate per op.  (Streams are
 * freed: each lowering adds its own again, three to five per GPU.) */
void sim_program_reset(SimProgram *program);

/* The id of `label`, interning a copy the first time.  Lowerings intern the
 * same workload strings on every run, so ids are also cached by the string's
 * address: a hit costs a pointer hash and a strcmp that confirms the content
 * (an address reused for another string just misses). */
guint32 sim_program_intern(SimProgram *program, const char *label);

/* Each returns the new index; a stream's name is copied.  A stream is on
 * GPU 0, or on `gpu` (< SIM_NODE_MAX_GPUS). */
guint32 sim_program_add_stream(SimProgram *program, const char *name);
guint32 sim_program_add_stream_on(SimProgram *program, const char *name, guint gpu);
guint32 sim_program_add_event(SimProgram *program, guint32 label, gint32 layer);
/* An event that happens when `count` (>= 1) record ops have run: a barrier.
 * Each member records it and then waits on it, so none goes on before the
 * last has arrived.  With count 1 it is sim_program_add_event. */
guint32 sim_program_add_barrier(SimProgram *program, guint32 label, gint32 layer, guint32 count);
/* The baseline of pool `pool`, a SIM_POOL_INDEX (a SimPool on GPU 0). */
void sim_program_set_baseline(SimProgram *program, guint pool, guint64 bytes, const char *tag);

/* Makes GPU g of the program stand for copies[g] GPUs of the step (each
 * >= 1, n_gpus entries, adding up to at most SIM_NODE_MAX_GPUS), numbered
 * in order: GPU 0's first, then GPU 1's.  The caller vouches that every
 * copy would run exactly as its GPU does; the engine then runs the
 * program's GPUs and reports every step GPU (engine.h), and the sums
 * (compute_work, copy_bytes, copies) are the caller's to make the step's
 * (sim_program_repeat_sums).  A reset drops the copies. */
void sim_program_set_copies(SimProgram *program, const guint *copies);

/* Adds the sums of ops [first, end) (compute_work, copy_bytes, copies)
 * `times` more times, in issue order, as if those ops had been added again
 * `times` times: the floating-point sums of a step whose copies the
 * program leaves out, to the bit. */
void sim_program_repeat_sums(SimProgram *program, guint32 first, guint32 end, guint times);

/* The GPUs of the step: n_gpus, or what the copies add up to. */
static inline guint
sim_program_step_gpus(const SimProgram *program)
{
  return program->copied ? program->step_gpu[program->n_gpus] : program->n_gpus;
}

/* The first step GPU that program GPU `gpu` stands for. */
static inline guint
sim_program_step_gpu(const SimProgram *program, guint gpu)
{
  return program->copied ? program->step_gpu[gpu] : gpu;
}

/* The program GPU that stands for step GPU `step_gpu`
 * (< sim_program_step_gpus). */
static inline guint
sim_program_gpu_of(const SimProgram *program, guint step_gpu)
{
  if (!program->copied)
    return step_gpu;
  guint lo = 0, hi = program->n_gpus; /* the last g with step_gpu[g] <= step_gpu */
  while (hi - lo > 1) {
    guint mid = lo + (hi - lo) / 2;
    if (program->step_gpu[mid] <= step_gpu)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* The ops added from now on belong to micro-batch `microbatch` of a
 * pipeline (-1: to none, such as the optimizer step), until the next mark.
 * A pipeline's exports tell apart eight "forward, layer 0" of one stage by
 * it. */
typedef struct {
  guint32 first;     /* the first op of the run */
  gint32 microbatch; /* -1: none */
} SimMicrobatchRun;
void sim_program_mark_microbatch(SimProgram *program, gint32 microbatch);

/* Op `op`'s micro-batch, or -1 (none, or a program that marks none). */
gint32 sim_program_op_microbatch(const SimProgram *program, guint32 op);

/* Whether the program marks micro-batches (a pipeline's). */
static inline gboolean
sim_program_has_microbatches(const SimProgram *program)
{
  return program->microbatch_runs->len > 0;
}

/* Each appends one op to `stream` and returns its index, or SIM_NO_OP
 * (adding nothing) when its arguments are wrong: a stream or event that
 * does not exist, negative seconds.  Out of line; the lowering uses the
 * inline forms of program_private.h. */
guint32 sim_program_compute(SimProgram *program, guint32 stream, double seconds, SimPhase phase, gint32 layer,
                            guint32 label);
/* The bytes a program's arrays hold (ops, memory actions, streams' op
 * lists, at their capacities): what its storage costs (offsim bench). */
guint64 sim_program_storage_bytes(const SimProgram *program);

guint32 sim_program_copy(SimProgram *program, guint32 stream, SimDir dir, guint64 bytes, SimHostMemory host,
                         gint32 layer, guint32 label);
guint32 sim_program_record(SimProgram *program, guint32 stream, guint32 event);
guint32 sim_program_wait(SimProgram *program, guint32 stream, guint32 event);
guint32 sim_program_host_alloc(SimProgram *program, guint32 stream, double seconds, gint32 layer,
                               guint32 label);
guint32 sim_program_send(SimProgram *program, guint32 stream, double seconds, gint32 layer, guint32 label);
guint32 sim_program_collective(SimProgram *program, guint32 stream, double seconds, gint32 layer, guint32 label);
/* `seconds` of work on the host thread itself (an optimizer step on the
 * CPU): a host_alloc-kind op of phase `phase` (it holds its stream and
 * blocks the host), whose seconds add to compute_work[sim_phase_work]. */
guint32 sim_program_host_work(SimProgram *program, guint32 stream, double seconds, SimPhase phase, gint32 layer,
                              guint32 label);

/* Adds a memory action to `op`, which must be the newest op (not
 * SIM_NO_OP: an op that was never added gets no actions). */
void sim_program_mem(SimProgram *program, guint32 op, SimWhen when, SimPool pool, gint64 delta, guint32 tag,
                     gint32 layer);

/* Sets the host issue cost of `op`, which must be the newest op, to
 * `seconds` (>= 0; setting it again replaces it).  Any launch above 0 turns
 * the host model on for the whole program (so does a host-blocking op) (see "The host" above).  Records
 * and waits are issued too and may carry one, though eager frameworks
 * issue them for next to nothing. */
void sim_program_set_launch(SimProgram *program, guint32 op, double seconds);

static inline const SimOp *
sim_program_op(const SimProgram *program, guint32 index)
{
  return &program->ops[index];
}

/* The GPU of memory action `a`: its stream's. */
static inline guint
sim_program_mem_gpu(const SimProgram *program, const SimMemAction *a)
{
  return ((const SimStream *)g_ptr_array_index(program->streams, a->stream))->gpu;
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

/* The host issue cost of op `index`, seconds (0 unless set). */
static inline double
sim_program_launch(const SimProgram *program, guint32 index)
{
  return index < program->n_launch ? program->launch[index] : 0.0;
}

/* Whether the engine runs the host model: some op has a launch above 0 or
 * blocks the host. */
static inline gboolean
sim_program_has_host(const SimProgram *program)
{
  return program->n_launched > 0 || program->n_blocking > 0;
}

/* Whether `op` blocks its host until it ends (under the host model): a
 * cudaHostAlloc, or a copy from pageable memory (effectively synchronous). */
static inline gboolean
sim_program_host_blocks(const SimOp *op)
{
  return op->kind == SIM_OP_HOST_ALLOC || (op->kind == SIM_OP_COPY && op->pageable);
}

/* Checks the build contract: every event recorded at most its count times
 * (indices of streams, events and ops are checked as the program is built).
 * O(1): the builders note a record too many as it happens.  A failure is a bug in the
 * lowering: SIM_ERROR_INTERNAL naming both ops. */
gboolean sim_program_validate(const SimProgram *program, GError **error);

/* "op 12 'backward mlp L3' on stream 'compute'": one op named for
 * messages, a new string. */
char *sim_program_describe_op(const SimProgram *program, guint32 op);

/* Static names for messages: "forward", "backward", … ("?" past
 * SIM_PHASE_COUNT); "device" or "host" ("?" past SIM_POOL_COUNT). */
const char *sim_phase_name(SimPhase phase);
const char *sim_pool_name(SimPool pool);

G_END_DECLS
