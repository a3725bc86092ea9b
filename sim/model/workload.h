/* sim/model/workload.h — what one training step does, layer by layer.
 *
 * A workload is a list of layers, each with forward and backward time, the
 * tensors it saves for backward, the input that full checkpointing keeps,
 * and the transient workspace it needs while it computes; plus the static
 * memory (parameters, gradients, optimizer state) that is live all step.
 * The scenario loader builds it from [model] and [layer.N]; later generators
 * ([transformer], [trace]) build the same structure, so policies and the
 * engine never care where it came from.
 *
 * Ownership: a SimWorkload owns its layers and their tensors.  Tensor names
 * are interned strings, shared by every workload: a sweep builds thousands of
 * workloads from the same few names, and a lowering can key on the pointer.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Sanity bound on layer counts, the range of every `layers` key and of a
 * recording's layer column: far above any real model, low enough that a
 * typo like `layers = 1000000000` is an error instead of an out-of-memory. */
#define SIM_WORKLOAD_MAX_LAYERS 1000000

/* A saved tensor: one storage and the references autograd saved to it in
 * this layer.  The last four flags are set by `ops = hf`
 * (sim/input/transformer.c) and [trace] recordings (sim/input/trace.c),
 * which list every reference autograd packs; the fused generator sets only
 * `leaf`, on its token ids and labels; other workloads leave them FALSE.
 * `parameter` and `shared` entries are references to a storage that
 * is held anyway (a weight, or a tensor an earlier layer saved: the RoPE
 * tables) and `host` entries live in host memory, so none of the three
 * takes device memory, is copied by a policy or counts in saved bytes
 * (sim_tensor_on_device); `leaf` says the tensor has no grad_fn (masks,
 * statistics, indices, RoPE tables), which a hook may treat apart. */
typedef struct {
  const char *name;     /* interned (g_intern_string): equal names are one pointer, never freed */
  guint64 bytes;        /* the storage's size */
  double recompute;     /* seconds to recompute it, when selective (a layer without ops; with ops the
                         * selective region's ops are replayed) */
  /* Flags as bits: the lowering walks every tensor of every layer per
   * candidate, and 32 bytes a tensor keep more of them in cache than 56. */
  guint refs : 20;       /* saved references to this storage (autograd packs), >= 1 */
  guint offloadable : 1; /* 0: a policy must keep it on the device */
  guint selective : 1;   /* dropped and recomputed by selective checkpointing */
  guint leaf : 1;        /* no grad_fn */
  guint parameter : 1;   /* a reference to a parameter (static memory) */
  guint shared : 1;      /* a reference to a storage an earlier layer saved, and counted */
  guint host : 1;        /* in host memory on CUDA (SDPA's philox seed and offset) */
  /* The element size, 2^elem_log2 bytes, when the workload knows it
   * (generated and recorded ones; explicit [model] layers do not): what
   * element-count filters (`min_elements`) read. */
  guint elem_known : 1;
  guint elem_log2 : 2;
  /* In a layer with ops (SimLayer.ops): the forward op that saves it (the
   * storage exists from that op's start) and the backward op that unpacks
   * its last reference (it is freed at that op's end), both indices into
   * the layer's ops.  Set by sim_layer_finish_ops from the uses. */
  guint save_op : 16;
  guint last_op : 16;
} SimTensor;

/* The most ops one layer has (SimUse's op index is 14 bits, SimTensor's
 * 16): HF's MoE loop runs each expert that takes tokens as 14 ops of its
 * own, so DeepSeek-V3's 256 experts make 3,584 of them besides its
 * attention's and router's. */
#define SIM_LAYER_MAX_OPS 4096

/* Elements of a tensor whose element size is known. */
static inline guint64
sim_tensor_elements(const SimTensor *t)
{
  return t->bytes >> t->elem_log2;
}

/* Sets the element size (1, 2, 4 or 8 bytes). */
static inline void
sim_tensor_set_elem(SimTensor *t, guint bytes)
{
  t->elem_known = 1;
  t->elem_log2 = bytes >= 8 ? 3 : bytes >= 4 ? 2 : bytes >= 2 ? 1 : 0;
}


/* Whether the tensor is a device storage of its own layer: what saved
 * bytes, the lowering's memory and a policy's copies count. */
static inline gboolean
sim_tensor_on_device(const SimTensor *t)
{
  return !t->parameter && !t->shared && !t->host;
}

/* The part of a transformer an op belongs to: the module whose forward
 * runs it, or whose autograd nodes the backward op is; a reference belongs
 * to the module of the backward op that unpacks it (the module that saved
 * it).  What a hook scoped to modules sees (Megatron's offload_modules,
 * torchtune's output head) is decided from it.  A layer's attention block
 * is ATTN_NORM .. ATTN_RESIDUAL, its MLP block MLP_NORM .. MLP_RESIDUAL, in
 * that order. */
typedef enum {
  SIM_MODULE_NONE,          /* not known: explicit layers, recordings */
  SIM_MODULE_EMBEDDING,
  SIM_MODULE_ATTN_NORM,
  SIM_MODULE_QKV,           /* the q, k and v projections (fused: one GEMM; gpt2: c_attn) */
  SIM_MODULE_ROPE,
  SIM_MODULE_CORE_ATTN,     /* repeat_kv, the attention kernel or eager's ops, the heads' merge */
  SIM_MODULE_ATTN_PROJ,     /* the output projection */
  SIM_MODULE_ATTN_RESIDUAL, /* the residual dropout and add after attention */
  SIM_MODULE_MLP_NORM,
  SIM_MODULE_MLP,
  SIM_MODULE_EXPERT_FC1,    /* an MoE layer's expert fc1 (ops = hf: each expert's gate_proj and up_proj) */
  SIM_MODULE_MOE_ACT,       /* its activation (ops = hf: each expert's SiLU and product) */
  SIM_MODULE_MLP_RESIDUAL,
  SIM_MODULE_FINAL_NORM,
  SIM_MODULE_LM_HEAD,
  SIM_MODULE_LOSS,
  SIM_MODULE_COUNT,
} SimModule;

/* How a saved reference lies in its storage (`ops = hf`; every other
 * reference is contiguous).  A hook sees the reference, not the storage:
 * TransformerEngine leaves a non-contiguous one on the device, Megatron
 * copies the whole storage of a view covering at least half of it and a
 * gathered copy of a smaller one. */
typedef enum {
  SIM_VIEW_CONTIGUOUS,
  SIM_VIEW_STRIDED, /* non-contiguous, over its whole storage (a transposed layout: q after RoPE, SDPA's output) */
  SIM_VIEW_PART,    /* non-contiguous, over 1 / refs of its storage (gpt2's q, k, v in c_attn's output) */
} SimView;

/* Per op of a layer with ops, as ranges into lists: the tensors whose last
 * reference it unpacks (free), the spans it starts and ends, the uses it
 * unpacks (uses are in op order); per tensor its first use.  Immutable and
 * shared like the op list (sim_layer_share_ops), freed with the last
 * layer that holds it. */
typedef struct {
  gint ref_count;
  guint n_ops, n_tensors, n_spans;
  guint16 *free_off, *frees;   /* frees[free_off[op] .. free_off[op + 1]) */
  guint16 *start_off, *starts; /* span indices, by `from` */
  guint16 *end_off, *ends;     /* span indices, by `to` */
  guint16 *use_off;            /* uses[use_off[op] .. use_off[op + 1]) */
  guint16 *first_use;          /* per tensor: its first use, or G_MAXUINT16 */
} SimOpIndex;

/* One op of a layer as the GPU runs it: an autograd node's kernels in the
 * backward, a module's (or a function's) kernels in the forward.  The
 * lowering turns each into one compute op.  Its kernels are of one class
 * (sim/engine/kernel.h's SimKernelClass: the generator splits an op whose
 * kernels are not), so that time per kernel class is a sum over ops. */
typedef struct {
  const char *name;   /* interned: q_proj, softmax, attn_dropout, ... */
  double seconds;     /* its kernels on the device, launches excluded */
  guint kernels;      /* kernels it launches: the host issues each one */
  guint8 kclass;      /* SimKernelClass of its kernels */
  guint8 backward;    /* TRUE: a backward op (autograd's order); FALSE: forward (execution order) */
  guint8 selective;   /* a forward op of the selective-recompute region (QK^T, softmax, dropout, PV) */
  guint8 module;      /* SimModule */
  /* Its parameter gradients are routed experts' (grouped fc1 and fc2):
   * with expert parallelism (ep > 1) Megatron's DDP keeps them in buffers
   * of their own, reduced over the expert-data-parallel group of dp / ep
   * replicas instead of over all dp (sim/model/parallel.h). */
  guint8 experts;
  /* The parameter gradients it produces when they are not static (grads
   * = set-to-none): allocated at its end, held to the end of the step. */
  guint64 grad_bytes;
  /* A collective among the layer's tensor-parallel ranks (SimWorkload.tp;
   * an all-to-all among its expert-parallel ranks, SimWorkload.ep) that
   * follows its kernels on the communication stream: 0 none, else a
   * SimCollectiveKind (sim/engine/collective.h) + 1, over comm_bytes (the
   * whole, unsharded buffer).  The compute stream waits for it before the
   * op `overlap` ops later: 0 before the next (exposed, as Megatron's
   * forward all-reduces are), 1 after the next (the weight-gradient GEMM
   * that Megatron's asynchronous tensor-parallel communication runs beside
   * the input gradient's collective). */
  guint8 collective;
  guint8 overlap;
  guint64 comm_bytes;
  /* The parameter gradients it finishes, static or not (grad_bytes is
   * what it allocates): what data parallelism reduces, bucket by bucket,
   * as they are done. */
  guint64 reduce_bytes;
} SimLayerOp;

/* Memory an op allocates and a later op of the same phase frees: a
 * workspace (from == to), an activation no backward needs that lives until
 * its last reader is done, the gradient one backward op hands to the next.
 * Indices into the layer's ops; a recompute replays the forward ones. */
typedef struct {
  guint64 bytes;
  guint16 from, to;   /* allocated at from's start, freed at to's end; from <= to, one phase */
} SimSpan;

/* A saved reference: which tensor, the backward op that unpacks it and
 * how it lies in the tensor's storage. */
typedef struct {
  guint16 tensor;     /* index into the layer's tensors */
  guint16 op : 14;    /* a backward op, index into the layer's ops (SIM_LAYER_MAX_OPS fits) */
  guint16 view : 2;   /* SimView */
} SimUse;

typedef struct {
  double forward;           /* seconds */
  double backward;          /* seconds */
  guint64 input_bytes;      /* what full checkpointing keeps */
  guint64 workspace_bytes;  /* transient, while the forward (or its recompute) runs */
  guint64 backward_workspace_bytes; /* transient, while the backward runs (sim_layer_set_workspace: the same) */
  /* The gradients of the layer's parameters when they are not static
   * (zero_grad(set_to_none=True)): allocated as the layer's backward ends,
   * held to the end of the step, where the optimizer consumes them. */
  guint64 grad_bytes;
  /* The gradients of its parameters, static or not: what data parallelism
   * reduces (a generated transformer; 0: not known, nothing reduced). */
  guint64 reduce_bytes;
  /* Its share of the workload's static_bytes (its parameters' weights,
   * static gradients and optimizer state), when the generator knows it (a
   * generated transformer): a pipeline stage holds its layers' shares and
   * an even part of what no layer claims.  0: not known. */
  guint64 static_bytes;
  /* Its parameters (this GPU's tensor-parallel shard of them) and how many
   * tensors hold them, when the generator counts them (SimWorkload's
   * param_bytes set): what sharding divides (sim/model/sharding.h) and what
   * the optimizer step reads (the tensors set its launches).  0: not
   * counted. */
  guint64 params;
  guint param_tensors;
  GArray *tensors;          /* SimTensor, saved for backward */
  /* The layer as kernels (generated transformers): NULL for a layer that
   * is one op each way (explicit [model] layers, recordings without op
   * rows), which the fields above describe alone.  When set, ops[0 ..
   * n_forward) run the forward in order and the rest the backward in
   * autograd's order; every tensor's references are `uses` (as many as its
   * refs); spans are the memory that is not saved for backward.  forward
   * and backward are then the sums of the ops' seconds, workspace_bytes
   * and backward_workspace_bytes the largest a single op of each phase
   * holds in spans (what the planner's estimates read), grad_bytes the sum
   * of the ops'.  The three arrays are immutable once finished and may be
   * shared by several layers (g_array_ref): every layer of a generated
   * transformer has the same ops. */
  GArray *ops;              /* SimLayerOp */
  GArray *spans;            /* SimSpan */
  GArray *uses;             /* SimUse, in unpack order */
  guint n_forward;
  /* What each op does, indexed by op (sim_layer_finish_ops derives it; the
   * lowering walks it instead of every tensor and span per op). */
  SimOpIndex *index;
} SimLayer;

/* Bytes per parameter of each kind of static state, when the workload
 * counts its parameters (SimLayer.params); all 0 when it does not.  The
 * static bytes of an unsharded GPU are params × (weight + grad + state);
 * sim/model/sharding.h divides them among data-parallel ranks. */
typedef struct {
  guint8 weight;      /* the model's weights: the dtype's bytes, e */
  guint8 grad;        /* static gradients (grads = kept): e; 0 under set-to-none */
  guint8 state;       /* optimizer state: AdamW's moments (8), fp32 master weights (4) */
  guint8 master;      /* TRUE: the state includes fp32 master weights beside 16-bit ones */
} SimParamBytes;

/* The layers policies act on are `layers`.  A generated transformer also
 * has an embedding before them and a loss head after them: they run and
 * hold memory like layers and keep their tensors unless an offload's
 * scope = all moves them (as every saved-tensor hook would). */
typedef struct {
  char *name;
  GArray *layers;           /* SimLayer */
  SimLayer *embed;          /* NULL when not modelled */
  SimLayer *head;           /* NULL when not modelled */
  guint64 static_bytes;
  /* Bytes per parameter (all 0: parameters not counted; then static_bytes
   * is all there is). */
  SimParamBytes param_bytes;
  /* How the optimizer step runs, a SimOptimizerKernels
   * (sim/engine/optimizer.h, which the model layer does not see): fused or
   * foreach. */
  guint8 optimizer_kernels;
  guint8 clip_grad;   /* the step first clips the gradients' norm (two more passes) */
  /* Bytes per second the optimizer step's memory-bound kernels move
   * ([device] hbm_bandwidth, as every memory-bound kernel); 0: the step is
   * not modelled (parameters not counted). */
  double optimizer_bandwidth;
  /* The model's outputs the caller keeps through backward (the logits of
   * `outputs = held`): allocated by the head's forward, freed when the step
   * ends.  0 without a head. */
  guint64 held_bytes;
  /* What the model's own forward holds from the embedding to the loss
   * while the layers run (HF: eager attention's 4D causal mask, gpt2's
   * token and position embeddings kept by the forward's locals): allocated
   * by the embedding's forward, freed when the head's forward ends.  Only
   * a step (or pipeline slice) with both runs it. */
  guint64 forward_bytes;
  /* Host seconds to issue one kernel ([device] launch_overhead), for the
   * ops of layers described op by op; 0: the host is not modelled. */
  double launch;
  /* The tensor-parallel ranks the ops were cut for ([transformer] tp,
   * >= 1): the group of their collectives, all but the all-to-alls. */
  guint tp;
  /* The expert-parallel ranks ([parallel] ep, >= 1) the MoE layers were
   * cut for: the group of their all-to-alls (SIM_COLLECTIVE_ALL_TO_ALL). */
  guint ep;
  /* How the layers' times were found, for the output: "given" ([model]
   * and [layer.N] times, a recording's own), or the device's time model
   * that timed them ("flat", "kernel": a generated transformer's kernels;
   * "flat": a recording's op counts).  A static string. */
  const char *time_model;
} SimWorkload;

SimWorkload *sim_workload_new(const char *name, guint n_layers);
void sim_workload_free(SimWorkload *workload);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimWorkload, sim_workload_free)

static inline guint
sim_workload_n_layers(const SimWorkload *w)
{
  return w->layers->len;
}

static inline SimLayer *
sim_workload_layer(const SimWorkload *w, guint i)
{
  return &g_array_index(w->layers, SimLayer, i);
}

/* Sets the forward and the backward workspace to `bytes`: a layer whose
 * backward needs other transients sets backward_workspace_bytes after. */
static inline void
sim_layer_set_workspace(SimLayer *layer, guint64 bytes)
{
  layer->workspace_bytes = layer->backward_workspace_bytes = bytes;
}

/* Replaces a layer's tensor list with a copy of `tensors` (SimTensor). */
void sim_layer_set_tensors(SimLayer *layer, const GArray *tensors);

/* Appends a tensor (the name is interned); returns it for further fields. */
SimTensor *sim_layer_add_tensor(SimLayer *layer, const char *name, guint64 bytes);

/* Adds an embedding or head stage (owned by the workload) and returns it. */
SimLayer *sim_workload_add_embed(SimWorkload *workload);
SimLayer *sim_workload_add_head(SimWorkload *workload);

/* Whether the layer is described op by op. */
static inline gboolean
sim_layer_has_ops(const SimLayer *layer)
{
  return layer->ops != NULL;
}

static inline const SimLayerOp *
sim_layer_op(const SimLayer *layer, guint i)
{
  return &g_array_index(layer->ops, SimLayerOp, i);
}

/* Gives the layer empty ops, spans and uses arrays to fill with
 * sim_layer_add_op, sim_layer_add_span and sim_layer_add_use, in order:
 * every forward op before the first backward op. */
void sim_layer_begin_ops(SimLayer *layer);

/* Appends an op (the name is interned); returns its index. */
guint sim_layer_add_op(SimLayer *layer, const char *name, gboolean backward, guint kclass, double seconds,
                       guint kernels);

void sim_layer_add_span(SimLayer *layer, guint64 bytes, guint from, guint to);

/* Records that backward op `op` unpacks one reference to tensor `tensor`
 * (whose save_op the caller set), lying in it as `view` (SimView): one call
 * per reference, in op order. */
void sim_layer_add_use(SimLayer *layer, guint tensor, guint op, guint view);

/* The module of the op a use unpacks in (SimModule). */
static inline guint
sim_layer_use_module(const SimLayer *layer, const SimUse *use)
{
  return sim_layer_op(layer, use->op)->module;
}

/* Checks and derives what the ops imply: every forward op before every
 * backward op, spans within one phase, each tensor's uses as many as its
 * refs (a tensor with none is freed by the last backward op), last_op from
 * the uses, and the layer's forward, backward, workspace and grad_bytes
 * from the ops.  Programming errors assert: generators build ops. */
void sim_layer_finish_ops(SimLayer *layer);

/* Makes `layer` use `from`'s ops, spans and uses (shared, by reference)
 * and its derived times; the tensors must be the same list. */
void sim_layer_share_ops(SimLayer *layer, const SimLayer *from);

/* Whether any layer, the embedding or the head is described op by op. */
gboolean sim_workload_has_ops(const SimWorkload *workload);

/* Seconds of the selective region's forward ops (with ops), else of the
 * layer's selective tensors' recompute. */
double sim_layer_selective_recompute(const SimLayer *layer);

/* Distinct device tensors saved in the step, embedding and head included. */
guint sim_workload_saved_tensors(const SimWorkload *workload);

/* Bytes a layer saves for backward: the sum of its tensors on the device. */
guint64 sim_layer_saved_bytes(const SimLayer *layer);

/* The total size of the distinct tensors saved in the step, embedding and
 * head included: what a resident run keeps, whatever a policy does with
 * them (JSON `saved_bytes`). */
guint64 sim_workload_saved_bytes(const SimWorkload *workload);

/* The most memory a run of the workload can hold at once, bounded from
 * above: static bytes plus, for every layer and stage, its input, its
 * workspace and each tensor times its references (an offload without dedup
 * copies and reloads every reference).  FALSE when that passes
 * SIM_UNITS_MAX_BYTES (4 EiB): loaders refuse such a workload, so no ledger
 * level or copy total of a run can overflow 64 bits. */
gboolean sim_workload_bytes_fit(const SimWorkload *workload);

/* Parameters of every layer, the embedding and the head (SimLayer.params):
 * 0 when the workload does not count them; *tensors (when not NULL) the
 * tensors that hold them. */
guint64 sim_workload_parameters(const SimWorkload *workload, guint *tensors);

/* Whether every tensor of the workload has its element size. */
gboolean sim_workload_elements_known(const SimWorkload *workload);

/* Clears a SimTensor (for GArray clear functions). */
void sim_tensor_clear(gpointer tensor);

G_END_DECLS
