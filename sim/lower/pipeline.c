#include "lower/pipeline.h"

#include "engine/collective.h"
#include "engine/internal/program_private.h"
#include "lower/internal/lower_private.h"

/* One slot of a stage's order: the forward or the backward of a chunk for
 * a micro-batch. */
typedef struct {
  guint chunk, mb;
  gboolean backward;
} Item;

typedef struct {
  SimProgram *p;
  const SimWorkload *w;
  const SimPolicy *policy;
  const SimParallel *par;
  const SimLink *link;
  guint chunks, M;
  guint kept;           /* replicas lowered per stage: dp, or 1 or 2 standing for all (sim_lower_pipeline_replicas) */
  guint streams;        /* per GPU: SIM_PIPELINE_STREAMS, and the comm stream when the step communicates */
  guint *bounds;        /* chunk c is layers bounds[c] .. bounds[c + 1] - 1 */
  Lower *slices;        /* per (chunk, micro-batch) of the replica being lowered */
  guint32 *arrive_fwd;  /* per (chunk, micro-batch): its input activation has arrived */
  guint32 *arrive_bwd;  /* per (chunk, micro-batch): its output's gradient has arrived */
  guint32 label_send_act, label_send_grad, label_act, label_grad, label_sent, label_optimizer;
  guint32 label_reduce, label_gather, label_barrier, label_release, label_param_gather;
  guint32 label_shard, label_grads_out, label_weights_in, label_host_step, label_expert_reduce;
  GArray **barriers;    /* per stage: its buckets' barriers (LowerDp), shared by its replicas */
  GArray **expert_barriers; /* per stage and expert-data-parallel group (stage × ep + r mod ep), ep > 1 */
  guint tp_nodes;       /* nodes the tensor-parallel group of the GPU being lowered spans */
  guint ep_nodes;       /* nodes its expert-parallel group spans */
  LowerDp dp;           /* the gradient reduction of the stage being lowered, when dp > 1 */
  LowerDp edp;          /* its expert gradients' reduction, when 1 < ep < dp */
  gboolean has_edp;
  GArray *kernel_log;   /* LowerKernelWork of the replica being lowered, when the others are left out; or NULL */
  Lower labels;         /* the labels every slice shares, interned once */
} Pipe;

/* The step's replica that lowered replica j (< kept) is: every one when
 * all are lowered; else the first, and then the last. */
static inline guint
step_replica(const SimParallel *par, guint kept, guint j)
{
  return kept == par->dp || j == 0 ? j : par->dp - 1;
}

/* The GPU a link places replica r of stage s on, without [node] one GPU a
 * node, and the nodes its collective groups span: its tensor-parallel
 * group, its expert-parallel group (the ep replicas of its block, tp ranks
 * apart: Megatron's expert order tp-ep-dp-pp, ep divides dp), its
 * expert-data-parallel group (the dp / ep replicas that hold the same
 * experts, one from each expert-parallel group, tp × ep ranks apart:
 * Megatron's get_expert_data_parallel_group in the order tp-ep-dp-pp). */
typedef struct {
  guint tp, ep, edp;
} GroupNodes;

static GroupNodes
group_nodes(const SimWorkload *w, const SimLink *link, const SimParallel *par, guint s, guint r)
{
  guint node_gpus = MAX(link->node.gpus, 1);
  guint ep = w->ep;
  GroupNodes n = { 0, 0, 0 };
  n.tp = sim_collective_nodes(sim_parallel_global_rank(par, w->tp, s, r, 0), 1, w->tp, node_gpus);
  n.ep = sim_collective_nodes(sim_parallel_global_rank(par, w->tp, s, r - r % ep, 0), w->tp, ep, node_gpus);
  if (ep > 1 && par->dp / ep > 1)
    n.edp = sim_collective_nodes(sim_parallel_global_rank(par, w->tp, s, r % ep, 0), w->tp * ep, par->dp / ep,
                                 node_gpus);
  return n;
}

static inline guint
cell(const Pipe *pp, guint chunk, guint mb)
{
  return chunk * pp->M + mb;
}

/* Megatron's order of (chunk, micro-batch) for the k-th forward or
 * backward of stage s under interleaving: micro-batches go in groups of
 * pp, each group through every chunk in turn (backwards from the last
 * chunk). */
static Item
interleaved_item(const SimParallel *par, guint s, guint k, gboolean backward)
{
  guint P = par->pp, V = par->virtual_chunks;
  guint v = (k / P) % V;
  if (backward)
    v = V - 1 - v;
  return (Item){ .chunk = v * P + s, .mb = (k / (P * V)) * P + k % P, .backward = backward };
}

/* Stage s's order into items[0 .. 2 × M × virtual). */
static guint
stage_order(const SimParallel *par, guint s, Item *items)
{
  guint P = par->pp, M = par->microbatches, n = 0;
  switch (par->schedule) {
  case SIM_PIPE_GPIPE:
    for (guint m = 0; m < M; m++)
      items[n++] = (Item){ s, m, FALSE };
    for (guint m = 0; m < M; m++)
      items[n++] = (Item){ s, m, TRUE };
    break;
  case SIM_PIPE_1F1B: {
    guint warm = MIN(P - s - 1, M);
    for (guint m = 0; m < warm; m++)
      items[n++] = (Item){ s, m, FALSE };
    for (guint i = 0; i + warm < M; i++) {
      items[n++] = (Item){ s, warm + i, FALSE };
      items[n++] = (Item){ s, i, TRUE };
    }
    for (guint m = M - warm; m < M; m++)
      items[n++] = (Item){ s, m, TRUE };
    break;
  }
  case SIM_PIPE_INTERLEAVED:
  default: {
    guint total = M * par->virtual_chunks;
    guint warm = MIN((P - s - 1) * 2 + (par->virtual_chunks - 1) * P, total);
    for (guint k = 0; k < warm; k++)
      items[n++] = interleaved_item(par, s, k, FALSE);
    for (guint i = 0; i + warm < total; i++) {
      items[n++] = interleaved_item(par, s, warm + i, FALSE);
      items[n++] = interleaved_item(par, s, i, TRUE);
    }
    for (guint k = total - warm; k < total; k++)
      items[n++] = interleaved_item(par, s, k, TRUE);
    break;
  }
  }
  return n;
}

/* The parameters stage s holds and the tensors that hold them: its
 * chunks' layers (chunk c is layers bounds[c] .. bounds[c + 1] - 1), the
 * embedding on the first stage, the head on the stage of the last chunk. */
static void
stage_params(const SimWorkload *w, const SimParallel *par, const guint *bounds, guint s, guint64 *params,
             guint *tensors)
{
  guint chunks = sim_parallel_chunks(par);
  *params = 0;
  *tensors = 0;
  for (guint c = s; c < chunks; c += par->pp)
    for (guint i = bounds[c]; i < bounds[c + 1]; i++) {
      *params += sim_workload_layer(w, i)->params;
      *tensors += sim_workload_layer(w, i)->param_tensors;
    }
  if (s == 0 && w->embed) {
    *params += w->embed->params;
    *tensors += w->embed->param_tensors;
  }
  if (s == (chunks - 1) % par->pp && w->head) {
    *params += w->head->params;
    *tensors += w->head->param_tensors;
  }
}

/* What [parallel]'s CPU offload moves, as sim_sharding_offloaded's mask. */
static guint
offloads(const SimParallel *par)
{
  return (par->offload_optimizer ? SIM_SHARDING_OFFLOAD_OPTIMIZER : 0) |
         (par->offload_params ? SIM_SHARDING_OFFLOAD_WEIGHTS : 0);
}

/* The device static bytes of a GPU of stage `stage`, chunks cut at
 * `bounds`.  A workload that counts its parameters claims all its static
 * bytes by them: the stage's parameters, sharded over the replicas as
 * [parallel] says, less what CPU offload keeps in host memory. */
static guint64
stage_static(const SimWorkload *w, const SimParallel *par, const guint *bounds, guint stage)
{
  guint chunks = sim_parallel_chunks(par);
  if (sim_param_bytes_known(&w->param_bytes)) {
    guint64 params;
    guint tensors;
    stage_params(w, par, bounds, stage, &params, &tensors);
    return sim_sharding_static(&w->param_bytes, params, par->sharding, par->dp) -
           sim_sharding_offloaded(&w->param_bytes, params, par->sharding, par->dp, offloads(par));
  }
  guint64 claimed = 0, mine = 0;
  for (guint c = 0; c < chunks; c++) {
    for (guint i = bounds[c]; i < bounds[c + 1]; i++) {
      guint64 b = sim_workload_layer(w, i)->static_bytes;
      claimed += b;
      mine += c % par->pp == stage ? b : 0;
    }
  }
  guint last = (chunks - 1) % par->pp;
  if (w->embed) {
    claimed += w->embed->static_bytes;
    mine += stage == 0 ? w->embed->static_bytes : 0;
  }
  if (w->head) {
    claimed += w->head->static_bytes;
    mine += stage == last ? w->head->static_bytes : 0;
  }
  /* What no layer claims, evenly; the rest of the division on stage 0, so
   * that the stages add up to the workload. */
  guint64 rest = w->static_bytes > claimed ? w->static_bytes - claimed : 0;
  return mine + rest / par->pp + (stage == 0 ? rest % par->pp : 0);
}

guint64
sim_lower_pipeline_stage_static(const SimWorkload *w, const SimParallel *par, guint stage)
{
  g_autofree guint *bounds = g_new(guint, sim_parallel_chunks(par) + 1);
  sim_parallel_chunk_bounds(par, sim_workload_n_layers(w), bounds);
  return stage_static(w, par, bounds, stage);
}

/* The host bytes a GPU holding `params` parameters keeps all step under
 * CPU offload: what its static state keeps there, and where its gradient
 * shard lands for the CPU's step, unless its static gradients already live
 * there (offload_params with grads = kept). */
static guint64
stage_host(const SimWorkload *w, const SimParallel *par, guint64 params)
{
  if (!par->offload_optimizer)
    return 0;
  const SimParamBytes *b = &w->param_bytes;
  gboolean grads_there = par->offload_params && b->grad > 0;
  return sim_sharding_offloaded(b, params, par->sharding, par->dp, offloads(par)) +
         (grads_there ? 0 : sim_sharding_shard(params, par->dp) * b->weight);
}

static inline guint32
stream_of(const Pipe *pp, guint gpu, guint which)
{
  return pp->streams * gpu + which;
}

/* The bytes that go from chunk c - 1 to chunk c (and their gradient back):
 * the input of chunk c's first layer. */
static guint64
boundary_bytes(const Pipe *pp, guint c)
{
  return sim_workload_layer(pp->w, pp->bounds[c])->input_bytes;
}

/* On stage `gpu`'s p2p stream, once its compute stream got here: a send of
 * `bytes`, then the event `arrived`. */
static void
emit_send(Pipe *pp, guint gpu, guint64 bytes, guint32 label, guint32 arrived, gint32 layer)
{
  SimProgram *p = pp->p;
  guint32 sent = sim_program_add_event(p, pp->label_sent, layer);
  sim_program_record(p, stream_of(pp, gpu, SIM_PIPELINE_STREAM_COMPUTE), sent);
  sim_program_wait(p, stream_of(pp, gpu, SIM_PIPELINE_STREAM_P2P), sent);
  double seconds = pp->par->p2p_latency + (double)bytes / pp->par->p2p_bandwidth;
  sim_program_send(p, stream_of(pp, gpu, SIM_PIPELINE_STREAM_P2P), seconds, layer, label);
  sim_program_record(p, stream_of(pp, gpu, SIM_PIPELINE_STREAM_P2P), arrived);
}

static void
slice_open(Pipe *pp, guint gpu, guint stage, guint chunk, guint mb)
{
  Lower *l = &pp->slices[cell(pp, chunk, mb)];
  *l = pp->labels;
  l->base = pp->bounds[chunk];
  l->n = pp->bounds[chunk + 1] - pp->bounds[chunk];
  l->has_embed = chunk == 0;
  l->has_head = chunk + 1 == pp->chunks;
  l->s_compute = stream_of(pp, gpu, SIM_PIPELINE_STREAM_COMPUTE);
  l->s_d2h = stream_of(pp, gpu, SIM_PIPELINE_STREAM_D2H);
  l->s_h2d = stream_of(pp, gpu, SIM_PIPELINE_STREAM_H2D);
  l->s_comm = pp->streams > SIM_PIPELINE_STREAMS ? stream_of(pp, gpu, SIM_PIPELINE_STREAM_COMM) : SIM_NO_OP;
  l->tp_nodes = pp->tp_nodes;
  l->ep_nodes = pp->ep_nodes;
  l->dp = pp->par->dp > 1 ? &pp->dp : NULL;
  l->edp = pp->has_edp ? &pp->edp : NULL;
  l->kernel_log = pp->kernel_log;
  const GArray *stages = pp->policy->stages;
  l->keeps_all = stages != NULL && (stage >= stages->len || !g_array_index(stages, gboolean, stage));
  l->grads_here = mb == 0;
  lower_slice_begin(l);
}

/* What slices leave for the end of their stage's step. */
typedef struct {
  guint64 grads, held;
} Left;

/* One item of a stage's order on `gpu`: wait for what it needs from the
 * neighbouring stage, the slice's forward or backward, send what the
 * neighbour needs.  A backward adds the gradients and held outputs it
 * leaves for the end of the step to `left`. */
static void
emit_item(Pipe *pp, guint gpu, guint stage, const Item *it, Left *left)
{
  SimProgram *p = pp->p;
  guint32 compute = stream_of(pp, gpu, SIM_PIPELINE_STREAM_COMPUTE);
  Lower *l = &pp->slices[cell(pp, it->chunk, it->mb)];
  gint32 first_layer = (gint32)pp->bounds[it->chunk];
  /* Everything the item adds, its copies and sends included, is this micro-batch's. */
  sim_program_mark_microbatch(p, (gint32)it->mb);
  if (!it->backward) {
    slice_open(pp, gpu, stage, it->chunk, it->mb);
    if (it->chunk > 0)
      sim_program_wait(p, compute, pp->arrive_fwd[cell(pp, it->chunk, it->mb)]);
    lower_slice_forward(l);
    if (it->chunk + 1 < pp->chunks)
      emit_send(pp, gpu, boundary_bytes(pp, it->chunk + 1), pp->label_send_act,
                pp->arrive_fwd[cell(pp, it->chunk + 1, it->mb)], (gint32)pp->bounds[it->chunk + 1] - 1);
    return;
  }
  if (it->chunk + 1 < pp->chunks)
    sim_program_wait(p, compute, pp->arrive_bwd[cell(pp, it->chunk, it->mb)]);
  /* The gradients are reduced as the last micro-batch finishes them (DDP's
   * no_sync and Megatron's gradient accumulation before it). */
  l->reduces = pp->par->dp > 1 && it->mb + 1 == pp->M;
  lower_slice_backward(l);
  if (it->chunk > 0)
    emit_send(pp, gpu, boundary_bytes(pp, it->chunk), pp->label_send_grad,
              pp->arrive_bwd[cell(pp, it->chunk - 1, it->mb)], first_layer);
  left->grads += l->grads;
  left->held += l->has_head && pp->w->head ? pp->w->held_bytes : 0;
  lower_slice_end(l);
}

/* A copy of `bytes` on GPU gpu's `which` stream once its compute stream
 * got here; the compute stream waits for its end. */
static void
emit_host_copy(Pipe *pp, guint gpu, guint which, SimDir dir, guint64 bytes, guint32 label)
{
  SimProgram *p = pp->p;
  guint32 compute = stream_of(pp, gpu, SIM_PIPELINE_STREAM_COMPUTE), stream = stream_of(pp, gpu, which);
  guint32 due = sim_program_add_event(p, label, SIM_NO_LAYER);
  sim_program_record(p, compute, due);
  sim_program_wait(p, stream, due);
  guint32 copy = sim_program_copy_inline(p, stream, dir, bytes, SIM_HOST_PINNED, SIM_NO_LAYER, label);
  p->ops[copy].phase = SIM_PHASE_OPTIMIZER; /* static state, not an activation */
  guint32 done = sim_program_add_event(p, label, SIM_NO_LAYER);
  sim_program_record(p, stream, done);
  sim_program_wait(p, compute, done);
}

/* The optimizer step on the host (offload_optimizer: DeepSpeed's
 * ZeRO-Offload, FSDP2's CPUOffloadPolicy) of a GPU that updates `params`
 * parameters: its gradient shard out over the host link, the CPU's step
 * (its node's host_adam_gparams shared by the node's ranks, all stepping at
 * once; the training thread runs it, so nothing is issued meanwhile), the
 * updated weight shard back.  Returns a zero-time op after it all, for the
 * step's frees. */
static guint32
emit_host_step(Pipe *pp, guint gpu, guint64 params)
{
  SimProgram *p = pp->p;
  guint64 bytes = params * pp->w->param_bytes.weight;
  guint32 compute = stream_of(pp, gpu, SIM_PIPELINE_STREAM_COMPUTE);
  emit_host_copy(pp, gpu, SIM_PIPELINE_STREAM_D2H, SIM_DIR_D2H, bytes, pp->label_grads_out);
  guint ranks = MIN(MAX(pp->link->node.gpus, 1u), pp->w->tp * sim_parallel_gpus(pp->par));
  sim_program_host_work(p, compute, (double)params * ranks / pp->link->node.host_optimizer_rate, SIM_PHASE_OPTIMIZER,
                        SIM_NO_LAYER, pp->label_host_step);
  emit_host_copy(pp, gpu, SIM_PIPELINE_STREAM_H2D, SIM_DIR_H2D, bytes, pp->label_weights_in);
  return sim_program_compute_inline(p, compute, 0, SIM_PHASE_OPTIMIZER, SIM_NO_LAYER, pp->label_optimizer);
}

/* Every stage of the j-th replica lowered (step_replica). */
static void
emit_replica(Pipe *pp, guint j, Item *items)
{
  SimProgram *p = pp->p;
  const SimParallel *par = pp->par;
  guint r = step_replica(par, pp->kept, j);
  for (guint k = 0; k < pp->chunks * pp->M; k++) {
    pp->arrive_fwd[k] = sim_program_add_event(p, pp->label_act, (gint32)pp->bounds[k / pp->M]);
    pp->arrive_bwd[k] = sim_program_add_event(p, pp->label_grad, (gint32)pp->bounds[k / pp->M + 1] - 1);
  }
  for (guint s = 0; s < par->pp; s++) {
    guint gpu = s * pp->kept + j;
    guint n = stage_order(par, s, items);
    Left left = { 0, 0 };
    guint32 compute = stream_of(pp, gpu, SIM_PIPELINE_STREAM_COMPUTE);
    pp->dp = (LowerDp){ .bucket = par->bucket, .ranks = par->dp, .sharding = par->sharding,
                        .members = pp->kept, .barriers = pp->barriers[s], .done = SIM_NO_EVENT,
                        .label_reduce = pp->label_reduce,
                        .label_gather = pp->label_gather, .label_barrier = pp->label_barrier,
                        .label_release = pp->label_release, .label_shard = pp->label_shard,
                        .offload_params = par->offload_params };
    guint node_gpus = MAX(pp->link->node.gpus, 1); /* a link built without [node]: one GPU a node */
    pp->dp.nodes = sim_collective_nodes(sim_parallel_global_rank(par, pp->w->tp, s, 0, 0), pp->w->tp, par->dp, node_gpus);
    GroupNodes nodes = group_nodes(pp->w, pp->link, par, s, r);
    pp->tp_nodes = nodes.tp;
    pp->ep_nodes = nodes.ep;
    guint ep = pp->w->ep;
    /* Its expert-data-parallel group (group_nodes).  Megatron's DDP reduces the experts' gradients there,
     * in buckets of their own (dense_params and expert_parallel_params,
     * megatron/core/distributed/distributed_data_parallel.py; an expert
     * weight is `allreduce` False when expert_model_parallel_size > 1,
     * megatron/core/extensions/transformer_engine.py), on the same
     * communication stream here.  With ep = dp the group is one replica:
     * nothing to reduce. */
    pp->has_edp = ep > 1 && par->dp / ep > 1;
    if (pp->has_edp) {
      pp->edp = pp->dp;
      pp->edp.ranks = par->dp / ep;
      pp->edp.nodes = nodes.edp;
      pp->edp.members = 0; /* the replicas lowered that hold r's experts */
      for (guint k = 0; k < pp->kept; k++)
        pp->edp.members += step_replica(par, pp->kept, k) % ep == r % ep;
      pp->edp.barriers = pp->expert_barriers[s * ep + r % ep];
      pp->edp.label_reduce = pp->label_expert_reduce;
    }
    for (guint k = 0; k < n; k++)
      emit_item(pp, gpu, s, &items[k], &left);
    sim_program_mark_microbatch(p, -1); /* the step's end is no micro-batch's */
    if (par->dp > 1) {
      /* The last bucket, and the optimizer waits for every reduction. */
      guint32 comm = stream_of(pp, gpu, SIM_PIPELINE_STREAM_COMM);
      lower_dp_flush(p, pp->link, &pp->dp, compute, comm, SIM_NO_LAYER);
      if (pp->has_edp)
        lower_dp_flush(p, pp->link, &pp->edp, compute, comm, SIM_NO_LAYER);
      if (pp->dp.done != SIM_NO_EVENT)
        sim_program_wait(p, compute, pp->dp.done);
      if (pp->has_edp && pp->edp.done != SIM_NO_EVENT)
        sim_program_wait(p, compute, pp->edp.done);
    }
    /* The optimizer step consumes the gradients and the outputs are
     * dropped when the stage's step ends. */
    guint64 params;
    guint tensors;
    stage_params(pp->w, pp->par, pp->bounds, s, &params, &tensors);
    guint64 mine = par->sharding != SIM_SHARDING_NONE ? sim_sharding_shard(params, par->dp) : params;
    guint32 op = par->offload_optimizer ? emit_host_step(pp, gpu, mine)
                                        : lower_optimizer(p, pp->w, compute, mine, tensors, pp->label_optimizer);
    guint64 grads = left.grads - pp->dp.freed_grads; /* what reduce-scatters did not free */
    if (grads)
      sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)grads, p->grads_tag, SIM_NO_LAYER);
    if (left.held)
      sim_program_mem_inline(p, op, SIM_AT_END, SIM_POOL_DEVICE, -(gint64)left.held, p->outputs_tag, SIM_NO_LAYER);
    /* ZeRO-1 and -2 (Megatron's distributed optimizer): each replica
     * updated its shard; the updated weights are all-gathered before the
     * next step (exposed: Megatron's overlap_param_gather is off by
     * default).  Full sharding gathers them layer by layer instead. */
    if (par->sharding == SIM_SHARDING_OPTIMIZER || par->sharding == SIM_SHARDING_GRADIENTS) {
      guint32 comm = stream_of(pp, gpu, SIM_PIPELINE_STREAM_COMM);
      lower_dp_collective(p, pp->link, &pp->dp, compute, comm, SIM_COLLECTIVE_ALL_GATHER,
                          params * pp->w->param_bytes.weight, SIM_NO_LAYER, pp->label_param_gather, SIM_NO_EVENT);
      guint32 done = sim_program_add_event(p, pp->label_param_gather, SIM_NO_LAYER);
      sim_program_record(p, comm, done);
      sim_program_wait(p, compute, done);
    }
  }
}

/* The step on pp->kept replicas of each stage (dp: every one; else the
 * others are copies of the first, or with two kept of the first but the
 * last, sim_lower_pipeline_replicas). */
static void
lower_pipeline(SimProgram *p, const SimWorkload *w, const SimPolicy *policy, const SimLink *link,
               const SimParallel *par, guint kept)
{
  guint chunks = sim_parallel_chunks(par), M = par->microbatches, gpus = par->pp * kept;
  g_assert(sim_parallel_gpus(par) <= SIM_PARALLEL_MAX_GPUS && sim_parallel_gpus(par) <= SIM_NODE_MAX_GPUS);
  Pipe pp = { .p = p, .w = w, .policy = policy, .par = par, .link = link, .chunks = chunks, .M = M, .kept = kept };
  pp.streams = SIM_PIPELINE_STREAMS + (w->tp > 1 || w->ep > 1 || par->dp > 1);
  pp.bounds = g_new(guint, chunks + 1);
  sim_parallel_chunk_bounds(par, sim_workload_n_layers(w), pp.bounds);
  pp.slices = g_new0(Lower, chunks * M);
  pp.arrive_fwd = g_new(guint32, chunks * M);
  pp.arrive_bwd = g_new(guint32, chunks * M);
  g_autofree Item *items = g_new(Item, 2 * M * par->virtual_chunks);

  sim_program_reset(p);
  static const char *const kinds[SIM_PIPELINE_STREAMS + 1] = { "compute", "d2h", "h2d", "p2p", "comm" };
  for (guint g = 0; g < gpus; g++) {
    guint stage = g / kept, replica = step_replica(par, kept, g % kept);
    for (guint k = 0; k < pp.streams; k++) {
      g_autofree char *name = par->dp > 1 ? g_strdup_printf("stage %u.%u %s", stage, replica, kinds[k])
                                          : g_strdup_printf("stage %u %s", stage, kinds[k]);
      sim_program_add_stream_on(p, name, g);
    }
    guint64 params;
    guint tensors;
    stage_params(w, par, pp.bounds, stage, &params, &tensors);
    sim_program_set_baseline(p, SIM_POOL_INDEX(g, SIM_POOL_HOST), stage_host(w, par, params), "static");
    sim_program_set_baseline(p, SIM_POOL_INDEX(g, SIM_POOL_DEVICE), stage_static(w, par, pp.bounds, stage), "static");
  }
  pp.labels = (Lower){ .p = p, .w = w, .policy = policy, .link = link };
  lower_labels(&pp.labels);
  pp.label_send_act = sim_program_intern(p, "activation");
  pp.label_send_grad = sim_program_intern(p, "gradient");
  pp.label_act = sim_program_intern(p, "activation arrived");
  pp.label_grad = sim_program_intern(p, "gradient arrived");
  pp.label_sent = sim_program_intern(p, "ready to send");
  pp.label_optimizer = sim_program_intern(p, "optimizer");
  pp.label_reduce = sim_program_intern(p, par->sharding == SIM_SHARDING_NONE ? "all-reduce gradients"
                                                                             : "reduce-scatter gradients");
  pp.label_gather = sim_program_intern(p, "all-gather weights");
  pp.label_param_gather = sim_program_intern(p, "all-gather updated weights");
  pp.label_release = sim_program_intern(p, "free gathered weights");
  pp.label_shard = sim_program_intern(p, "weight shard");
  pp.label_grads_out = sim_program_intern(p, "gradient shard");
  pp.label_weights_in = sim_program_intern(p, "updated weight shard");
  pp.label_host_step = sim_program_intern(p, "optimizer on the host");
  pp.label_barrier = sim_program_intern(p, "replicas ready");
  pp.label_expert_reduce = sim_program_intern(p, "all-reduce expert gradients");
  guint groups = par->pp * w->ep;
  pp.barriers = g_new(GArray *, par->pp);
  pp.expert_barriers = g_new(GArray *, groups);
  for (guint s = 0; s < par->pp; s++)
    pp.barriers[s] = g_array_new(FALSE, FALSE, sizeof(guint32));
  for (guint k = 0; k < groups; k++)
    pp.expert_barriers[k] = g_array_new(FALSE, FALSE, sizeof(guint32));
  /* The replicas left out add their sums as the first's, to the bit:
   * its ops' (sim_program_repeat_sums) and its kernel classes'. */
  g_autoptr(GArray) kernel_log = kept < par->dp ? g_array_new(FALSE, FALSE, sizeof(LowerKernelWork)) : NULL;
  guint32 first_op = p->n_ops, first_end = p->n_ops;
  for (guint j = 0; j < kept; j++) {
    pp.kernel_log = j == 0 ? kernel_log : NULL;
    emit_replica(&pp, j, items);
    if (j == 0)
      first_end = p->n_ops;
  }
  if (kept < par->dp) {
    guint copies[SIM_NODE_MAX_GPUS];
    for (guint g = 0; g < gpus; g++)
      copies[g] = g % kept == 0 ? par->dp - (kept - 1) : 1;
    sim_program_set_copies(p, copies);
    sim_program_repeat_sums(p, first_op, first_end, par->dp - kept);
    for (guint t = 0; t < par->dp - kept; t++)
      for (guint k = 0; k < kernel_log->len; k++) {
        const LowerKernelWork *kw = &g_array_index(kernel_log, LowerKernelWork, k);
        p->kernel_work[kw->kclass] += kw->seconds;
      }
  }
  for (guint s = 0; s < par->pp; s++)
    g_array_unref(pp.barriers[s]);
  for (guint k = 0; k < groups; k++)
    g_array_unref(pp.expert_barriers[k]);
  g_free(pp.barriers);
  g_free(pp.expert_barriers);

  g_free(pp.bounds);
  g_free(pp.slices);
  g_free(pp.arrive_fwd);
  g_free(pp.arrive_bwd);
}

void
sim_lower_pipeline_into(SimProgram *p, const SimWorkload *w, const SimPolicy *policy, const SimLink *link,
                        const SimParallel *par)
{
  lower_pipeline(p, w, policy, link, par, par->dp);
}

guint
sim_lower_pipeline_replicas(const SimWorkload *w, const SimLink *link, const SimParallel *par)
{
  if (par->dp <= 1)
    return par->dp;
  /* A replica whose collectives span other nodes than the first's runs
   * otherwise (tp not dividing a node, an expert group across one). */
  for (guint s = 0; s < par->pp; s++) {
    GroupNodes first = group_nodes(w, link, par, s, 0);
    for (guint r = 1; r < par->dp; r++) {
      GroupNodes n = group_nodes(w, link, par, s, r);
      if (n.tp != first.tp || n.ep != first.ep || n.edp != first.edp)
        return par->dp;
    }
  }
  /* The replicas of a stage arrive at each barrier at one instant; the
   * engine lets the last one through at once and the others once
   * everything else due then has started (the last record is the last
   * replica's, issued after theirs).  So the last replica starts the
   * collective earlier within that instant than the others.  Only an op
   * that starts with memory actions can tell: full sharding's gathers
   * allocate their buffer at their start.  Then the first and the last
   * replica are lowered, the first standing for all but the last. */
  if (par->sharding == SIM_SHARDING_FULL)
    return par->dp > 2 ? 2 : par->dp;
  return 1;
}

guint
sim_lower_pipeline_once_into(SimProgram *p, const SimWorkload *w, const SimPolicy *policy, const SimLink *link,
                             const SimParallel *par)
{
  guint kept = sim_lower_pipeline_replicas(w, link, par);
  lower_pipeline(p, w, policy, link, par, kept);
  /* Behind [node] limits the replicas' copies share switch uplinks and
   * socket memory: a replica alone would copy faster.  A step without a
   * copy never uses them. */
  if (kept < par->dp && sim_link_node_shared(link) && p->copies[SIM_DIR_D2H] + p->copies[SIM_DIR_H2D] > 0) {
    kept = par->dp;
    lower_pipeline(p, w, policy, link, par, kept);
  }
  return kept;
}
