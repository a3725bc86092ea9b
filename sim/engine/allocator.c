#include "allocator.h"

/* Blocks live in one array, indexed by handle; handle 0 is the search key
 * of lookups (g_tree_lower_bound compares a key with the tree's keys) and
 * never a block.  A segment is a chain of blocks by prev/next, addresses
 * contiguous; a free block is in `cached` (ordered as the allocator's
 * BlockComparatorSize: pool, stream, size, address). */

#define NONE G_MAXUINT32

enum { POOL_SMALL, POOL_LARGE };

typedef struct {
  guint64 addr, size;
  guint32 prev, next; /* neighbours in the segment, NONE at its ends */
  guint32 stream;
  guint8 pool;
  guint8 allocated;
  guint8 live; /* a block (FALSE: a recycled handle) */
} Block;

/* An expandable segment: one per pool and stream, pages mapped at its end. */
typedef struct {
  guint64 mapped; /* bytes mapped */
  guint32 last;   /* its last block */
} Expandable;

struct SimAllocator {
  GArray *blocks;   /* Block */
  GArray *recycled; /* guint32 handles to reuse */
  GTree *cached;    /* free blocks */
  GHashTable *expandable; /* (stream << 1 | pool) -> Expandable* */
  guint64 capacity; /* 0: none */
  gboolean expand;
  guint64 next_addr;
  guint64 reserved, peak_reserved, allocated, peak_allocated;
};

static Block *
block_at(const SimAllocator *a, guint32 id)
{
  return &g_array_index(a->blocks, Block, id);
}

static gint
block_cmp(gconstpointer x, gconstpointer y, gpointer data)
{
  const SimAllocator *a = data;
  const Block *p = block_at(a, GPOINTER_TO_UINT(x)), *q = block_at(a, GPOINTER_TO_UINT(y));
  if (p->pool != q->pool)
    return p->pool < q->pool ? -1 : 1;
  if (p->stream != q->stream)
    return p->stream < q->stream ? -1 : 1;
  if (p->size != q->size)
    return p->size < q->size ? -1 : 1;
  return p->addr < q->addr ? -1 : p->addr > q->addr ? 1 : 0;
}

SimAllocator *
sim_allocator_new(guint64 capacity, gboolean expandable)
{
  SimAllocator *a = g_new0(SimAllocator, 1);
  a->blocks = g_array_new(FALSE, TRUE, sizeof(Block));
  g_array_set_size(a->blocks, 1); /* the search key */
  a->recycled = g_array_new(FALSE, FALSE, sizeof(guint32));
  a->cached = g_tree_new_with_data(block_cmp, a);
  a->expandable = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  a->capacity = capacity;
  a->expand = expandable;
  a->next_addr = 0;
  return a;
}

void
sim_allocator_free(SimAllocator *a)
{
  if (a == NULL)
    return;
  g_tree_unref(a->cached);
  g_hash_table_unref(a->expandable);
  g_array_unref(a->blocks);
  g_array_unref(a->recycled);
  g_free(a);
}

guint64
sim_allocator_round(guint64 bytes)
{
  return bytes < SIM_ALLOCATOR_MIN_BLOCK ? SIM_ALLOCATOR_MIN_BLOCK
                                         : (bytes + SIM_ALLOCATOR_MIN_BLOCK - 1) / SIM_ALLOCATOR_MIN_BLOCK *
                                             SIM_ALLOCATOR_MIN_BLOCK;
}

guint64
sim_allocator_segment_size(guint64 bytes)
{
  guint64 size = sim_allocator_round(bytes);
  if (size <= SIM_ALLOCATOR_SMALL_SIZE)
    return SIM_ALLOCATOR_SMALL_BUFFER;
  if (size < SIM_ALLOCATOR_MIN_LARGE_ALLOC)
    return SIM_ALLOCATOR_LARGE_BUFFER;
  return (size + SIM_ALLOCATOR_ROUND_LARGE - 1) / SIM_ALLOCATOR_ROUND_LARGE * SIM_ALLOCATOR_ROUND_LARGE;
}

/* The page an expandable segment of `pool` maps at a time. */
static guint64
page_size(guint8 pool)
{
  return pool == POOL_SMALL ? SIM_ALLOCATOR_SMALL_BUFFER : SIM_ALLOCATOR_LARGE_BUFFER;
}

static guint32
block_new(SimAllocator *a, guint64 addr, guint64 size, guint32 stream, guint8 pool)
{
  guint32 id;
  if (a->recycled->len) {
    id = g_array_index(a->recycled, guint32, a->recycled->len - 1);
    g_array_set_size(a->recycled, a->recycled->len - 1);
  } else {
    id = a->blocks->len;
    g_array_set_size(a->blocks, id + 1);
  }
  *block_at(a, id) = (Block){ .addr = addr, .size = size, .prev = NONE, .next = NONE, .stream = stream,
                              .pool = pool, .live = TRUE };
  return id;
}

static void
block_recycle(SimAllocator *a, guint32 id)
{
  block_at(a, id)->live = FALSE;
  g_array_append_val(a->recycled, id);
}

static void
cache(SimAllocator *a, guint32 id)
{
  g_tree_insert(a->cached, GUINT_TO_POINTER(id), NULL);
}

static void
uncache(SimAllocator *a, guint32 id)
{
  gboolean removed = g_tree_remove(a->cached, GUINT_TO_POINTER(id));
  g_assert(removed);
}

/* get_free_block: the smallest cached block of the pool and stream that
 * fits, taken out of the cache; NONE when there is none. */
static guint32
take_cached(SimAllocator *a, guint8 pool, guint32 stream, guint64 size)
{
  *block_at(a, 0) = (Block){ .addr = 0, .size = size, .stream = stream, .pool = pool };
  GTreeNode *node = g_tree_lower_bound(a->cached, GUINT_TO_POINTER(0));
  if (node == NULL)
    return NONE;
  guint32 id = GPOINTER_TO_UINT(g_tree_node_key(node));
  const Block *b = block_at(a, id);
  if (b->pool != pool || b->stream != stream)
    return NONE;
  uncache(a, id);
  return id;
}

static gboolean
fits(const SimAllocator *a, guint64 more)
{
  return a->capacity == 0 || a->reserved + more <= a->capacity;
}

static void
reserve(SimAllocator *a, guint64 bytes)
{
  a->reserved += bytes;
  a->peak_reserved = MAX(a->peak_reserved, a->reserved);
}

/* release_cached_blocks: every cached block that is a whole segment goes
 * back to CUDA; an expandable segment unmaps its free pages at its end.
 * TRUE when anything was released. */
static gboolean
release_cached(SimAllocator *a)
{
  g_autoptr(GArray) whole = g_array_new(FALSE, FALSE, sizeof(guint32));
  GTreeNode *node = g_tree_node_first(a->cached);
  for (; node; node = g_tree_node_next(node)) {
    guint32 id = GPOINTER_TO_UINT(g_tree_node_key(node));
    const Block *b = block_at(a, id);
    if (b->prev == NONE && b->next == NONE)
      g_array_append_val(whole, id);
  }
  guint64 released = 0;
  for (guint i = 0; i < whole->len; i++) {
    guint32 id = g_array_index(whole, guint32, i);
    Block *b = block_at(a, id);
    uncache(a, id);
    if (a->expand) {
      /* The segment's only block, free: every page goes. */
      Expandable *x = g_hash_table_lookup(a->expandable, GUINT_TO_POINTER(b->stream << 1 | b->pool));
      x->mapped = 0;
      x->last = NONE;
    }
    a->reserved -= b->size;
    released += b->size;
    block_recycle(a, id);
  }
  if (a->expand) {
    /* A free tail block: its pages are unmapped. */
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, a->expandable);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
      Expandable *x = value;
      if (x->last == NONE || block_at(a, x->last)->allocated)
        continue;
      guint32 id = x->last;
      Block *b = block_at(a, id);
      uncache(a, id);
      x->mapped -= b->size;
      a->reserved -= b->size;
      released += b->size;
      x->last = b->prev;
      block_at(a, b->prev)->next = NONE;
      block_recycle(a, id);
    }
  }
  return released > 0;
}

/* alloc_block, not expandable: a new segment for a request of `size`. */
static guint32
new_segment(SimAllocator *a, guint64 size, guint32 stream, guint8 pool)
{
  guint64 seg = sim_allocator_segment_size(size);
  if (!fits(a, seg) && !(release_cached(a) && fits(a, seg)))
    return NONE;
  guint32 id = block_new(a, a->next_addr, seg, stream, pool);
  a->next_addr += seg;
  reserve(a, seg);
  return id;
}

/* Expandable: maps pages at the end of the pool and stream's segment so
 * that its free tail (or a new block there) holds `size`; returns that
 * block, out of the cache. */
static guint32
grow_segment(SimAllocator *a, guint64 size, guint32 stream, guint8 pool)
{
  gpointer key = GUINT_TO_POINTER(stream << 1 | pool);
  Expandable *x = g_hash_table_lookup(a->expandable, key);
  if (x == NULL) {
    x = g_new0(Expandable, 1);
    x->last = NONE;
    g_hash_table_insert(a->expandable, key, x);
  }
  gboolean tail_free = x->last != NONE && !block_at(a, x->last)->allocated;
  guint64 have = tail_free ? block_at(a, x->last)->size : 0;
  guint64 page = page_size(pool), more = (size - have + page - 1) / page * page;
  if (!fits(a, more)) {
    if (!release_cached(a))
      return NONE;
    /* Releasing may have unmapped this very tail: look again. */
    tail_free = x->last != NONE && !block_at(a, x->last)->allocated;
    have = tail_free ? block_at(a, x->last)->size : 0;
    more = (size - have + page - 1) / page * page;
    if (!fits(a, more))
      return NONE;
  }
  reserve(a, more);
  guint32 id;
  if (tail_free) {
    id = x->last;
    uncache(a, id);
    block_at(a, id)->size += more;
  } else {
    /* Each expandable segment has its own address range: the pool and
     * stream in the high bits, so segments never touch. */
    guint64 base = (guint64)(stream << 1 | pool) << 40;
    id = block_new(a, base + x->mapped, more, stream, pool);
    block_at(a, id)->prev = x->last;
    if (x->last != NONE)
      block_at(a, x->last)->next = id;
    x->last = id;
  }
  x->mapped += more;
  return id;
}

/* An expandable segment whose last block was `from` now ends with `to`
 * (b: a block of its pool and stream). */
static void
last_moves(SimAllocator *a, const Block *b, guint32 from, guint32 to)
{
  if (!a->expand)
    return;
  Expandable *x = g_hash_table_lookup(a->expandable, GUINT_TO_POINTER(b->stream << 1 | b->pool));
  if (x && x->last == from)
    x->last = to;
}

/* should_split */
static gboolean
should_split(const SimAllocator *a, const Block *b, guint64 size)
{
  guint64 remaining = b->size - size;
  if (b->pool == POOL_SMALL || a->expand)
    return remaining >= SIM_ALLOCATOR_MIN_BLOCK;
  return remaining > SIM_ALLOCATOR_SMALL_SIZE;
}

/* The tail of block `id` past `size` becomes a cached block of its own. */
static void
split(SimAllocator *a, guint32 id, guint64 size)
{
  Block *b = block_at(a, id);
  guint32 rest = block_new(a, b->addr + size, b->size - size, b->stream, b->pool);
  b = block_at(a, id); /* the array may have moved */
  Block *r = block_at(a, rest);
  r->prev = id;
  r->next = b->next;
  if (b->next != NONE)
    block_at(a, b->next)->prev = rest;
  b->next = rest;
  b->size = size;
  last_moves(a, b, id, rest);
  cache(a, rest);
}

guint32
sim_allocator_malloc(SimAllocator *a, guint64 bytes, guint32 stream)
{
  g_return_val_if_fail(bytes > 0 && stream < (1u << 23), SIM_ALLOCATOR_OOM);
  guint64 size = sim_allocator_round(bytes);
  guint8 pool = size <= SIM_ALLOCATOR_SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
  guint32 id = take_cached(a, pool, stream, size);
  if (id == NONE)
    id = a->expand ? grow_segment(a, size, stream, pool) : new_segment(a, size, stream, pool);
  if (id == NONE)
    return SIM_ALLOCATOR_OOM;
  if (should_split(a, block_at(a, id), size))
    split(a, id, size);
  Block *b = block_at(a, id);
  b->allocated = TRUE;
  a->allocated += b->size;
  a->peak_allocated = MAX(a->peak_allocated, a->allocated);
  return id;
}

/* free_block's try_merge_blocks: `other` (a neighbour of `id`), when free,
 * joins it. */
static void
merge(SimAllocator *a, guint32 id, guint32 other)
{
  if (other == NONE || block_at(a, other)->allocated)
    return;
  uncache(a, other);
  Block *b = block_at(a, id), *o = block_at(a, other);
  if (o->next == id) { /* o before b */
    b->addr = o->addr;
    b->prev = o->prev;
    if (o->prev != NONE)
      block_at(a, o->prev)->next = id;
  } else { /* o after b */
    b->next = o->next;
    if (o->next != NONE)
      block_at(a, o->next)->prev = id;
  }
  b->size += o->size;
  last_moves(a, b, other, id);
  block_recycle(a, other);
}

void
sim_allocator_release(SimAllocator *a, guint32 id)
{
  g_return_if_fail(id > 0 && id < a->blocks->len);
  Block *b = block_at(a, id);
  g_return_if_fail(b->live && b->allocated);
  b->allocated = FALSE;
  a->allocated -= b->size;
  merge(a, id, block_at(a, id)->prev);
  merge(a, id, block_at(a, id)->next);
  cache(a, id);
}

guint64
sim_allocator_reserved(const SimAllocator *a)
{
  return a->reserved;
}

guint64
sim_allocator_peak_reserved(const SimAllocator *a)
{
  return a->peak_reserved;
}

guint64
sim_allocator_allocated(const SimAllocator *a)
{
  return a->allocated;
}

guint64
sim_allocator_peak_allocated(const SimAllocator *a)
{
  return a->peak_allocated;
}
