/* sim/engine/heap_inl.h — a binary min-heap of (key, seq, value) triples.
 *
 * Internal to the engine: only engine.c includes it, for its ready streams,
 * running computes, running host_alloc, send and collective ops, the host
 * model's issue times, and the copy queues, so every function
 * is static (as libuv's heap-inl.h): nothing here has external linkage.  Order is by key,
 * then by seq, so equal keys come out in a fixed order (the engine passes
 * the op's issue index as seq): that is what makes runs byte-identical.
 *
 * Ownership: a SimHeap is a value its owner embeds; it owns one growable
 * array, released by sim_heap_free (sim_heap_clear empties it and keeps the
 * array).  Items are copied in and out; sim_heap_peek's pointer is valid
 * until the next push or pop.
 *
 * Cost: push and pop are O(log n) and never allocate once the array has
 * grown to the high-water mark, so a heap reused across runs costs no
 * allocation per event.  `ops` counts pushes and pops for the engine's work
 * counters (SimRun.heap_ops); clearing does not reset it.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  double key;
  guint32 seq;
  guint32 value;
} SimHeapItem;

typedef struct {
  SimHeapItem *items;
  guint len;
  guint cap;
  guint64 ops;
} SimHeap;

/* Items room is made for at the first push: more than the engine's heaps
 * hold for a program of three streams. */
#define SIM_HEAP_FIRST_CAPACITY 16

static inline void
sim_heap_init(SimHeap *heap)
{
  *heap = (SimHeap){ 0 };
}

/* Empties it, keeps the storage. */
static inline void
sim_heap_clear(SimHeap *heap)
{
  heap->len = 0;
}

/* Releases the storage. */
static inline void
sim_heap_free(SimHeap *heap)
{
  g_free(heap->items);
  *heap = (SimHeap){ 0 };
}

static inline void
sim_heap_grow(SimHeap *heap)
{
  heap->cap = heap->cap ? heap->cap * 2 : SIM_HEAP_FIRST_CAPACITY;
  heap->items = g_renew(SimHeapItem, heap->items, heap->cap);
}

static inline gboolean
sim_heap_less(const SimHeapItem *a, const SimHeapItem *b)
{
  return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

/* Inline: the engine pushes and pops once or twice per event, on heaps of a
 * handful of items, where a call costs as much as the sift. */
static inline void
sim_heap_push(SimHeap *heap, double key, guint32 seq, guint32 value)
{
  if (heap->len == heap->cap)
    sim_heap_grow(heap);
  SimHeapItem item = { key, seq, value };
  guint i = heap->len++;
  while (i > 0) {
    guint parent = (i - 1) / 2;
    if (!sim_heap_less(&item, &heap->items[parent]))
      break;
    heap->items[i] = heap->items[parent];
    i = parent;
  }
  heap->items[i] = item;
  heap->ops++;
}
/* The smallest item; the heap must not be empty. */
static inline const SimHeapItem *
sim_heap_peek(const SimHeap *heap)
{
  g_assert(heap->len > 0);
  return &heap->items[0];
}
static inline SimHeapItem
sim_heap_pop(SimHeap *heap)
{
  g_assert(heap->len > 0);
  SimHeapItem top = heap->items[0];
  SimHeapItem last = heap->items[--heap->len];
  guint i = 0, n = heap->len;
  for (;;) {
    guint child = 2 * i + 1;
    if (child >= n)
      break;
    if (child + 1 < n && sim_heap_less(&heap->items[child + 1], &heap->items[child]))
      child++;
    if (!sim_heap_less(&heap->items[child], &last))
      break;
    heap->items[i] = heap->items[child];
    i = child;
  }
  if (n > 0)
    heap->items[i] = last;
  heap->ops++;
  return top;
}

G_END_DECLS
