#include "result/reserved.h"

#include "base/u64map.h"
#include "engine/allocator.h"

#define NONE G_MAXUINT32

/* One allocation still held: its block, its bytes, and the allocation of
 * the same tag and layer made before it (NONE). */
typedef struct {
  guint32 block;
  guint32 below;
  guint64 bytes;
} Held;

/* A GPU's replay: its allocator, and what it holds per (tag, layer): a
 * stack per key, threaded through one array (no allocation per key); `top`
 * maps a key to the index of its latest Held, and holds only the keys
 * with something held (a key whose last allocation is freed is removed:
 * a step of 10^6 layers makes 32 M keys, a few hundred held at once). */
typedef struct {
  SimAllocator *allocator;
  GArray *held;       /* Held */
  GArray *spare;      /* guint32 indices of `held` to reuse */
  SimU64Map top;
} Gpu;

static guint64
held_key(guint32 tag, gint32 layer)
{
  return (guint64)tag << 32 | (guint32)layer;
}

static guint32
malloc_anyway(SimAllocator *a, guint64 bytes, guint32 stream, gboolean *oom)
{
  guint32 block = sim_allocator_malloc(a, bytes, stream);
  if (block != SIM_ALLOCATOR_OOM)
    return block;
  /* Out of memory: noted, and the replay goes on past the capacity. */
  *oom = TRUE;
  sim_allocator_set_capacity(a, 0);
  return sim_allocator_malloc(a, bytes, stream);
}

static void
hold(Gpu *g, guint64 key, guint32 block, guint64 bytes)
{
  Held h = { block, sim_u64map_get(&g->top, key, NONE), bytes };
  guint32 at;
  if (g->spare->len) {
    at = g_array_index(g->spare, guint32, g->spare->len - 1);
    g_array_set_size(g->spare, g->spare->len - 1);
    g_array_index(g->held, Held, at) = h;
  } else {
    at = g->held->len;
    g_array_append_val(g->held, h);
  }
  sim_u64map_set(&g->top, key, at);
}

/* Frees up to *need bytes of `key`, latest first; a block larger than
 * what is left to free is freed and its rest allocated again. */
static void
release_key(Gpu *g, guint64 key, guint64 *need, guint32 stream, gboolean *oom)
{
  guint32 at = sim_u64map_get(&g->top, key, NONE);
  if (at == NONE)
    return;
  while (*need > 0 && at != NONE) {
    Held *h = &g_array_index(g->held, Held, at);
    sim_allocator_release(g->allocator, h->block);
    if (h->bytes > *need) {
      h->bytes -= *need;
      h->block = malloc_anyway(g->allocator, h->bytes, stream, oom);
      *need = 0;
      break;
    }
    *need -= h->bytes;
    g_array_append_val(g->spare, at);
    at = h->below;
  }
  if (at == NONE)
    sim_u64map_remove(&g->top, key);
  else
    sim_u64map_set(&g->top, key, at);
}

static gint
key_cmp(gconstpointer a, gconstpointer b)
{
  guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
  return x < y ? -1 : x > y;
}

/* A free of `bytes` of (tag, layer): that key's allocations, then (none
 * left, or no layer given) the tag's of any layer, in key order.  Returns
 * what no allocation matched. */
static guint64
release(Gpu *g, guint32 tag, gint32 layer, guint64 bytes, guint32 stream, gboolean *oom)
{
  guint64 need = bytes;
  release_key(g, held_key(tag, layer), &need, stream, oom);
  if (need == 0)
    return 0;
  /* Keys sorted, so that which layer's go first does not depend on the hash table. */
  g_autoptr(GArray) keys = g_array_new(FALSE, FALSE, sizeof(guint64));
  for (guint i = 0; i < g->top.cap; i++)
    if (g->top.keys[i] != SIM_U64MAP_EMPTY && g->top.keys[i] >> 32 == tag && g->top.values[i] != NONE)
      g_array_append_val(keys, g->top.keys[i]);
  g_array_sort(keys, key_cmp);
  for (guint i = 0; i < keys->len && need > 0; i++)
    release_key(g, g_array_index(keys, guint64, i), &need, stream, oom);
  return need;
}

/* The first stream of GPU g: where the static memory was allocated. */
static guint32
first_stream(const SimProgram *p, guint g)
{
  for (guint32 s = 0; s < p->streams->len; s++)
    if (((const SimStream *)g_ptr_array_index(p->streams, s))->gpu == g)
      return s;
  return 0;
}

void
sim_reserved_replay(const SimRun *run, const SimProgram *p, guint64 capacity, guint allocator_flags,
                    SimReserved *out)
{
  *out = (SimReserved){ 0 };
  guint n_gpus = MAX(p->n_gpus, 1u);
  g_autofree Gpu *gpus = g_new0(Gpu, n_gpus);
  for (guint g = 0; g < n_gpus; g++) {
    gpus[g].allocator = sim_allocator_new(capacity, allocator_flags);
    gpus[g].held = g_array_new(FALSE, FALSE, sizeof(Held));
    gpus[g].spare = g_array_new(FALSE, FALSE, sizeof(guint32));
    sim_u64map_init(&gpus[g].top);
    guint64 base = p->baseline[SIM_POOL_INDEX(g, SIM_POOL_DEVICE)];
    if (base) {
      guint32 s = first_stream(p, g);
      hold(&gpus[g], held_key(p->baseline_tag, SIM_NO_LAYER),
           malloc_anyway(gpus[g].allocator, base, s, &out->out_of_memory), base);
    }
  }
  for (guint i = 0; i < run->applied->len; i++) {
    guint32 m = g_array_index(run->applied, guint32, i);
    const SimMemAction *a = &p->mem[m];
    if (a->pool != SIM_POOL_DEVICE || a->delta == 0)
      continue;
    Gpu *g = &gpus[sim_program_mem_gpu(p, a)];
    guint32 stream = a->stream;
    if (a->delta > 0)
      hold(g, held_key(a->tag, a->layer), malloc_anyway(g->allocator, (guint64)a->delta, stream, &out->out_of_memory),
           (guint64)a->delta);
    else
      out->unmatched += release(g, a->tag, a->layer, (guint64)-a->delta, stream, &out->out_of_memory);
  }
  for (guint g = 0; g < n_gpus; g++) {
    guint64 peak = sim_allocator_peak_reserved(gpus[g].allocator);
    if (g == 0 || peak > out->peak_reserved) {
      out->gpu = sim_program_step_gpu(p, g); /* the first of the GPUs it stands for */
      out->peak_reserved = peak;
      out->peak_allocated = sim_allocator_peak_allocated(gpus[g].allocator);
    }
    sim_u64map_clear(&gpus[g].top);
    g_array_unref(gpus[g].held);
    g_array_unref(gpus[g].spare);
    sim_allocator_free(gpus[g].allocator);
  }
}
