#include "result/result.h"
#include "result/reserved.h"

#include "base/units.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The buckets a reader cares about at a peak.  Any tag that is not one of
 * the named ones is a saved tensor: of a layer, or of the embedding or the
 * loss head (no layer). */
typedef enum {
  BUCKET_STATIC,
  BUCKET_SAVED,
  BUCKET_INPUT,
  BUCKET_WORKSPACE,
  BUCKET_STAGES,
  BUCKET_GRADS,
  BUCKET_OUTPUTS,
  N_BUCKETS,
} BucketKind;

static const char *const bucket_names[N_BUCKETS] = { "static", "saved", "input", "workspace", "embed/head saved",
                                                        "gradients", "held outputs" };

typedef struct {
  const char *name;
  gint64 bytes;
  gint32 first, last; /* layer range, SIM_NO_LAYER when none */
  guint layers;
} Bucket;

static void
bucket_add(Bucket *b, const SimLive *live)
{
  b->bytes += live->bytes;
  if (live->layer == SIM_NO_LAYER)
    return;
  if (b->first == SIM_NO_LAYER || live->layer < b->first)
    b->first = live->layer;
  if (live->layer > b->last)
    b->last = live->layer;
}

static int
compare_bucket(gconstpointer a, gconstpointer b)
{
  const Bucket *x = a, *y = b;
  if (x->bytes != y->bytes)
    return x->bytes > y->bytes ? -1 : 1;
  return strcmp(x->name, y->name);
}

typedef struct {
  const SimProgram *program;
  Bucket buckets[N_BUCKETS];
  guint8 *seen[N_BUCKETS]; /* per bucket, per layer + 1: counted already */
  gsize layers;
} Describe;

/* Layers are counted once per bucket even when several tensors share one. */
static void
describe_visit(const SimLive *l, gpointer data)
{
  Describe *d = data;
  BucketKind b = l->layer == SIM_NO_LAYER ? BUCKET_STAGES : BUCKET_SAVED;
  if (l->tag == d->program->baseline_tag)
    b = BUCKET_STATIC;
  else if (l->tag == d->program->input_tag)
    b = BUCKET_INPUT;
  else if (l->tag == d->program->workspace_tag)
    b = BUCKET_WORKSPACE;
  else if (l->tag == d->program->grads_tag)
    b = BUCKET_GRADS;
  else if (l->tag == d->program->outputs_tag)
    b = BUCKET_OUTPUTS;
  bucket_add(&d->buckets[b], l);
  if (l->layer != SIM_NO_LAYER && (gsize)l->layer < d->layers && !d->seen[b][l->layer]) {
    d->seen[b][l->layer] = 1;
    d->buckets[b].layers++;
  }
}

char *
sim_result_describe_live(const SimRun *run, const SimProgram *program, SimPool pool)
{
  Describe d = { .program = program };
  /* Layers are few: one byte each per bucket, sized by the widest layer index. */
  gint32 max_layer = -1;
  for (guint i = 0; i < run->peak[pool].applied; i++)
    max_layer = MAX(max_layer, program->mem[g_array_index(run->applied, guint32, i)].layer);
  d.layers = (gsize)(max_layer + 1);
  g_autofree guint8 *seen = g_new0(guint8, N_BUCKETS * MAX(d.layers, 1u));
  for (int b = 0; b < N_BUCKETS; b++) {
    d.buckets[b] = (Bucket){ bucket_names[b], 0, SIM_NO_LAYER, SIM_NO_LAYER, 0 };
    d.seen[b] = seen + b * MAX(d.layers, 1u);
  }
  sim_run_live_visit(run, program, pool, describe_visit, &d);
  Bucket *buckets = d.buckets;
  qsort(buckets, N_BUCKETS, sizeof(Bucket), compare_bucket);

  g_autoptr(GString) out = g_string_new(NULL);
  for (int b = 0; b < N_BUCKETS; b++) {
    if (buckets[b].bytes <= 0)
      continue;
    g_autofree char *size = sim_units_format_size((guint64)buckets[b].bytes);
    g_string_append_printf(out, "%s%s", out->len ? " + " : "", buckets[b].name);
    if (buckets[b].first == buckets[b].last && buckets[b].first != SIM_NO_LAYER)
      g_string_append_printf(out, " L%d", buckets[b].first);
    else if (buckets[b].first != SIM_NO_LAYER && (gint32)buckets[b].layers == buckets[b].last - buckets[b].first + 1)
      g_string_append_printf(out, " L%d-L%d", buckets[b].first, buckets[b].last);
    else if (buckets[b].first != SIM_NO_LAYER)
      g_string_append_printf(out, " %u of L%d-L%d", buckets[b].layers, buckets[b].first, buckets[b].last);
    g_string_append_printf(out, " %s", size);
  }
  if (out->len == 0)
    g_string_append(out, "nothing");
  return g_string_free(g_steal_pointer(&out), FALSE);
}

static void
fill_peak(SimResultPeak *out, const SimRun *run, const SimProgram *program, SimPool pool)
{
  const SimPeak *peak = &run->peak[pool];
  out->bytes = peak->bytes;
  out->time_ms = peak->time * 1e3;
  out->phase = peak->op == SIM_NO_OP ? "static" : sim_phase_name(peak->phase);
  out->layer = peak->layer;
  /* The op: "L3" for a layer that is one op each way, "L3 softmax" for a
   * layer run op by op, "head" or "head log_softmax" for a stage. */
  const char *label = peak->op != SIM_NO_OP ? sim_program_label(program, sim_program_op(program, peak->op)->label) : "";
  gboolean generic = strcmp(label, "forward") == 0 || strcmp(label, "backward") == 0 || strcmp(label, "recompute") == 0;
  g_autofree char *what = peak->layer == SIM_NO_LAYER ? g_strdup(label)
                          : generic ? g_strdup_printf("L%d", peak->layer)
                                    : g_strdup_printf("L%d %s", peak->layer, label);
  /* Several GPUs: on which one, by the stream's name ("stage 0 compute"). */
  if (sim_program_step_gpus(program) > 1) {
    const SimStream *stream = peak->op != SIM_NO_OP ? g_ptr_array_index(program->streams, sim_program_op(program, peak->op)->stream) : NULL;
    const char *space = stream ? strrchr(stream->name, ' ') : NULL;
    g_autofree char *gpu = space ? g_strndup(stream->name, (gsize)(space - stream->name))
                                 : g_strdup_printf("GPU %u", peak->pool / SIM_POOL_COUNT);
    out->where = *what ? g_strdup_printf("%s on %s", what, gpu) : g_steal_pointer(&gpu);
  } else {
    out->where = g_steal_pointer(&what);
  }
  out->live = sim_result_describe_live(run, program, pool);
}

/* Per GPU: nominal compute and recompute seconds, copy bytes. */
typedef struct {
  double work[SIM_WORK_COUNT];
  guint64 bytes[SIM_DIR_COUNT];
} GpuSums;

static GpuSums *
gpu_sums(const SimProgram *program)
{
  GpuSums *sums = g_new0(GpuSums, program->n_gpus);
  for (guint32 i = 0; i < sim_program_n_ops(program); i++) {
    const SimOp *op = sim_program_op(program, i);
    if (op->kind == SIM_OP_COMPUTE || (op->kind == SIM_OP_HOST_ALLOC && op->phase == SIM_PHASE_OPTIMIZER))
      sums[op->gpu].work[sim_phase_work(op->phase)] += op->work; /* and an optimizer step on the host */
    else if (op->kind == SIM_OP_COPY)
      sums[op->gpu].bytes[op->dir] += op->bytes;
  }
  return sums;
}

/* The stages' figures, each the worst of its replicas, and compute and
 * recompute of the busiest GPU. */
static void
fill_stages(SimResult *r, const SimWorkload *workload, const SimParallel *par, const SimProgram *program,
            const SimRun *run)
{
  g_autofree GpuSums *sums = gpu_sums(program);
  guint chunks = sim_parallel_chunks(par);
  g_autofree guint *bounds = g_new(guint, chunks + 1);
  sim_parallel_chunk_bounds(par, sim_workload_n_layers(workload), bounds);
  r->stages = g_array_new(FALSE, TRUE, sizeof(SimResultStage));
  g_array_set_size(r->stages, par->pp);
  double busiest = -1;
  /* Every GPU of the step (the run's arrays are), its ops those of the
   * program's GPU that stands for it (program.h, sim_program_set_copies). */
  for (guint sg = 0; sg < sim_program_step_gpus(program); sg++) {
    guint s = sg / par->dp;
    const GpuSums *sum = &sums[sim_program_gpu_of(program, sg)];
    SimResultStage *st = &g_array_index(r->stages, SimResultStage, s);
    st->stage = s;
    const SimPeak *dev = run->pools ? &g_array_index(run->pools, SimPeak, SIM_POOL_INDEX(sg, SIM_POOL_DEVICE)) : &run->peak[SIM_POOL_DEVICE];
    const SimPeak *host = run->pools ? &g_array_index(run->pools, SimPeak, SIM_POOL_INDEX(sg, SIM_POOL_HOST)) : &run->peak[SIM_POOL_HOST];
    st->peak_device_bytes = MAX(st->peak_device_bytes, dev->bytes);
    st->peak_host_bytes = MAX(st->peak_host_bytes, host->bytes);
    st->d2h_bytes = MAX(st->d2h_bytes, sum->bytes[SIM_DIR_D2H]);
    st->h2d_bytes = MAX(st->h2d_bytes, sum->bytes[SIM_DIR_H2D]);
    double busy = run->busy ? g_array_index(run->busy, double, sg) : run->step;
    st->busy_ms = MAX(st->busy_ms, busy * 1e3);
    double work = sum->work[SIM_WORK_COMPUTE] + sum->work[SIM_WORK_RECOMPUTE] + sum->work[SIM_WORK_OPTIMIZER];
    if (work > busiest) {
      busiest = work;
      r->compute_ms = sum->work[SIM_WORK_COMPUTE] * 1e3;
      r->recompute_ms = sum->work[SIM_WORK_RECOMPUTE] * 1e3;
      r->optimizer_ms = sum->work[SIM_WORK_OPTIMIZER] * 1e3;
    }
  }
  for (guint c = 0; c < chunks; c++)
    g_array_index(r->stages, SimResultStage, c % par->pp).layers += bounds[c + 1] - bounds[c];
  for (guint s = 0; s < par->pp; s++) {
    SimResultStage *st = &g_array_index(r->stages, SimResultStage, s);
    st->bubble_ms = MAX(0.0, r->step_ms - st->busy_ms);
  }
}

SimResult *
sim_result_new(const char *scenario, const char *policy, const SimWorkload *workload, const SimProgram *program,
               const SimRun *run, guint64 capacity)
{
  return sim_result_new_parallel(scenario, policy, workload, NULL, program, run, capacity);
}

SimResult *
sim_result_new_parallel(const char *scenario, const char *policy, const SimWorkload *workload,
                        const SimParallel *parallel, const SimProgram *program, const SimRun *run, guint64 capacity)
{
  SimResult *r = g_new0(SimResult, 1);
  r->scenario = g_strdup(scenario);
  r->policy = g_strdup(policy);
  r->step_ms = run->step * 1e3;
  r->compute_ms = run->compute_work * 1e3;
  r->recompute_ms = run->recompute_work * 1e3;
  r->optimizer_ms = run->optimizer_work * 1e3;
  if (parallel && sim_parallel_active(parallel))
    fill_stages(r, workload, parallel, program, run);
  r->comm_ms = run->comm_exposed * 1e3;
  r->exposed_transfer_ms = r->step_ms - r->compute_ms - r->recompute_ms - r->optimizer_ms - r->comm_ms;
  /* The engine guarantees step >= compute + recompute + optimizer, and a
   * collective it counts as exposed ran while no compute did; what
   * rounding leaves below a femtosecond per millisecond is noise, not a
   * negative cost.  (Under [parallel] the compute is the busiest GPU's and
   * the communication the most exposed GPU's: when they are not one GPU
   * the difference may fall below zero, and means nothing is left.) */
  if (r->exposed_transfer_ms < 1e-12 * MAX(r->step_ms, 1.0))
    r->exposed_transfer_ms = 0;
  r->time_model = workload->time_model;
  r->gemm_ms = program->kernel_work[SIM_KERNEL_GEMM] * 1e3;
  r->attention_ms = program->kernel_work[SIM_KERNEL_ATTENTION] * 1e3;
  r->memory_ms = program->kernel_work[SIM_KERNEL_MEMORY] * 1e3;
  for (guint g = 0; run->host_wait && g < run->host_wait->len; g++)
    r->host_wait_ms = MAX(r->host_wait_ms, g_array_index(run->host_wait, double, g) * 1e3); /* the GPU that waited most */
  r->saved_bytes = sim_workload_saved_bytes(workload);
  r->d2h_bytes = run->copy_bytes[SIM_DIR_D2H];
  r->h2d_bytes = run->copy_bytes[SIM_DIR_H2D];
  r->d2h_copies = run->copies[SIM_DIR_D2H];
  r->h2d_copies = run->copies[SIM_DIR_H2D];
  fill_peak(&r->peak_device, run, program, SIM_POOL_DEVICE);
  fill_peak(&r->peak_host, run, program, SIM_POOL_HOST);
  r->capacity_bytes = capacity;
  r->fits = (guint64)r->peak_device.bytes <= capacity;
  return r;
}

void
sim_result_attach(SimResult *r, SimProgram *program, SimRun *run)
{
  g_return_if_fail(r->program == NULL && r->run == NULL);
  r->program = program;
  r->run = run;
}

void
sim_result_reserve(SimResult *r, const SimRun *run, const SimProgram *program, guint allocator_flags)
{
  SimReserved reserved;
  sim_reserved_replay(run, program, r->capacity_bytes, allocator_flags, &reserved);
  r->peak_reserved_bytes = reserved.peak_reserved;
  r->fragmentation_bytes = reserved.peak_reserved - MIN(reserved.peak_reserved, reserved.peak_allocated);
  r->fits = !reserved.out_of_memory;
}

void
sim_result_free(SimResult *r)
{
  if (r == NULL)
    return;
  g_free(r->scenario);
  g_free(r->policy);
  g_free(r->peak_device.live);
  g_free(r->peak_host.live);
  g_free(r->peak_device.where);
  g_free(r->peak_host.where);
  g_free(r->note);
  if (r->stages)
    g_array_unref(r->stages);
  sim_program_free(r->program);
  sim_run_free(r->run);
  g_free(r);
}
