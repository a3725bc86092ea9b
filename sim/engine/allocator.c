#include "engine/allocator.h"

#include "base/u64map.h"

/* Blocks live in one array, indexed by handle (0 is never one).  A
 * segment is a chain of blocks by prev/next, addresses contiguous.  The
 * free blocks of each pool and stream are listed by size (SizeList below),
 * threaded through the blocks themselves, so that caching a block
 * allocates nothing: a replay makes thousands of requests per step. */

#define NONE G_MAXUINT32

enum { POOL_SMALL, POOL_LARGE };

typedef struct {
  guint64 addr, size;
  guint32 prev, next; /* neighbours in the segment, NONE at its ends */
  guint32 left, right; /* free: the blocks of its size, pool and stream before and after it */
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
  GPtrArray *sets;  /* per stream × 2 + pool: a FreeSet */
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

/* The free blocks of one pool and stream: every size that was ever free,
 * sorted, each with the list of its free blocks (most recently freed
 * first, linked by Block.left and right); a bitmap of the sizes with at
 * least one; and a map from a size to its index (sim/base/u64map.h).  Sizes stay once seen (a
 * step repeats its sizes), so caching a block is a hash lookup and taking
 * one a lookup (the same size) or a binary search and a bit scan (the next
 * larger); only a size never seen before moves the arrays. */
typedef struct {
  guint64 size;
  guint32 head;
  guint32 count;
} SizeList;

typedef struct {
  GArray *sizes;  /* SizeList */
  GArray *bits;   /* guint64 words: bit i set when sizes[i] has a block */
  SimU64Map index; /* size -> its index in `sizes` */
} FreeSet;

static void
free_set_free(gpointer data)
{
  FreeSet *f = data;
  g_array_unref(f->sizes);
  g_array_unref(f->bits);
  sim_u64map_clear(&f->index);
  g_free(f);
}

/* The index of `size` in f->sizes, or G_MAXUINT when it was never free. */
static guint
index_get(const FreeSet *f, guint64 size)
{
  return sim_u64map_get(&f->index, size, G_MAXUINT);
}

static FreeSet *
free_set(SimAllocator *a, guint32 stream, guint8 pool)
{
  guint i = stream * 2u + pool;
  while (a->sets->len <= i) {
    FreeSet *f = g_new0(FreeSet, 1);
    sim_u64map_init(&f->index);
    f->sizes = g_array_new(FALSE, FALSE, sizeof(SizeList));
    f->bits = g_array_new(FALSE, TRUE, sizeof(guint64));
    g_ptr_array_add(a->sets, f);
  }
  return g_ptr_array_index(a->sets, i);
}

/* The index of the first size >= `size` (f->sizes->len: none). */
static guint
size_at(const FreeSet *f, guint64 size)
{
  guint lo = 0, hi = f->sizes->len;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (g_array_index(f->sizes, SizeList, mid).size < size)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void
bit_set(FreeSet *f, guint i, gboolean on)
{
  guint64 *w = &g_array_index(f->bits, guint64, i / 64);
  *w = on ? *w | (G_GUINT64_CONSTANT(1) << (i % 64)) : *w & ~(G_GUINT64_CONSTANT(1) << (i % 64));
}

/* The first size at or after index i with a free block (f->sizes->len: none). */
static guint
next_nonempty(const FreeSet *f, guint i)
{
  guint n = f->sizes->len;
  for (guint w = i / 64; w * 64 < n; w++) {
    guint64 word = g_array_index(f->bits, guint64, w);
    if (w == i / 64)
      word &= ~G_GUINT64_CONSTANT(0) << (i % 64);
    if (word)
      return MIN(n, w * 64 + (guint)__builtin_ctzll(word));
  }
  return n;
}

/* The index of `size` in f->sizes, added (empty) when new. */
static guint
size_index(FreeSet *f, guint64 size)
{
  guint known = index_get(f, size);
  if (known != G_MAXUINT)
    return known;
  guint i = size_at(f, size);
  SizeList fresh = { size, NONE, 0 };
  g_array_insert_val(f->sizes, i, fresh);
  /* The sizes from i on move up by one: their bits and indices with them. */
  g_array_set_size(f->bits, (f->sizes->len + 63) / 64);
  for (guint k = f->sizes->len - 1; k > i; k--) {
    const SizeList *l = &g_array_index(f->sizes, SizeList, k);
    bit_set(f, k, l->count > 0);
    sim_u64map_set(&f->index, l->size, k);
  }
  bit_set(f, i, FALSE);
  sim_u64map_set(&f->index, size, i);
  return i;
}

SimAllocator *
sim_allocator_new(guint64 capacity, guint flags)
{
  SimAllocator *a = g_new0(SimAllocator, 1);
  a->blocks = g_array_new(FALSE, TRUE, sizeof(Block));
  g_array_set_size(a->blocks, 1); /* handle 0: none */
  a->recycled = g_array_new(FALSE, FALSE, sizeof(guint32));
  a->sets = g_ptr_array_new_with_free_func(free_set_free);
  a->expandable = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  a->capacity = capacity;
  a->expand = (flags & SIM_ALLOCATOR_EXPANDABLE) != 0;
  a->next_addr = 0;
  return a;
}

void
sim_allocator_free(SimAllocator *a)
{
  if (a == NULL)
    return;
  g_hash_table_unref(a->expandable);
  g_ptr_array_unref(a->sets);
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
  *block_at(a, id) = (Block){ .addr = addr, .size = size, .prev = NONE, .next = NONE, .left = NONE, .right = NONE,
                              .stream = stream, .pool = pool, .live = TRUE };
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
  Block *b = block_at(a, id);
  FreeSet *f = free_set(a, b->stream, b->pool);
  guint i = size_index(f, b->size);
  SizeList *l = &g_array_index(f->sizes, SizeList, i);
  b->left = NONE;
  b->right = l->head;
  if (l->head != NONE)
    block_at(a, l->head)->left = id;
  l->head = id;
  if (l->count++ == 0)
    bit_set(f, i, TRUE);
}

static void
uncache(SimAllocator *a, guint32 id)
{
  Block *b = block_at(a, id);
  FreeSet *f = free_set(a, b->stream, b->pool);
  guint i = index_get(f, b->size);
  g_assert(i < f->sizes->len && g_array_index(f->sizes, SizeList, i).size == b->size);
  SizeList *l = &g_array_index(f->sizes, SizeList, i);
  if (b->left != NONE)
    block_at(a, b->left)->right = b->right;
  else
    l->head = b->right;
  if (b->right != NONE)
    block_at(a, b->right)->left = b->left;
  if (--l->count == 0)
    bit_set(f, i, FALSE);
}

/* get_free_block: the smallest cached block of the pool and stream that
 * fits, taken out of the cache; NONE when there is none. */
static guint32
take_cached(SimAllocator *a, guint8 pool, guint32 stream, guint64 size)
{
  FreeSet *f = free_set(a, stream, pool);
  guint i = index_get(f, size); /* the same size, the common case */
  if (i == G_MAXUINT || g_array_index(f->sizes, SizeList, i).count == 0)
    i = next_nonempty(f, size_at(f, size));
  if (i == f->sizes->len)
    return NONE;
  guint32 id = g_array_index(f->sizes, SizeList, i).head;
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
  /* Every free block is cached: the whole ones are the free blocks
   * without neighbours, in handle order (the order does not change what
   * is released). */
  g_autoptr(GArray) whole = g_array_new(FALSE, FALSE, sizeof(guint32));
  for (guint32 id = 1; id < a->blocks->len; id++) {
    const Block *b = block_at(a, id);
    if (b->live && !b->allocated && b->prev == NONE && b->next == NONE)
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

void
sim_allocator_set_capacity(SimAllocator *a, guint64 capacity)
{
  a->capacity = capacity;
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
