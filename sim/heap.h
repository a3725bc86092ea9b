/* sim/heap.h — a binary min-heap of (key, seq, value) triples.
 *
 * The engine keeps its pending completions and ready queues here.  Order is by
 * key, then by seq, so equal keys come out in a fixed order (the engine passes
 * the op's issue index as seq): that is what makes runs byte-identical.
 *
 * Storage is one growable array; push and pop are O(log n) and never allocate
 * once the array has grown to the high-water mark, so a heap reused across
 * runs (sim_heap_clear) costs no allocation per event.  `ops` counts pushes and
 * pops for the engine's work counters.
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

void sim_heap_init(SimHeap *heap);
void sim_heap_clear(SimHeap *heap); /* empties it, keeps the storage */
void sim_heap_free(SimHeap *heap);  /* releases the storage */
void sim_heap_push(SimHeap *heap, double key, guint32 seq, guint32 value);
/* The smallest item; the heap must not be empty. */
static inline const SimHeapItem *
sim_heap_peek(const SimHeap *heap)
{
  g_assert(heap->len > 0);
  return &heap->items[0];
}
SimHeapItem sim_heap_pop(SimHeap *heap);

G_END_DECLS
