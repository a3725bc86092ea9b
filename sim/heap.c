#include "heap.h"

static inline gboolean
item_less(const SimHeapItem *a, const SimHeapItem *b)
{
  return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

void
sim_heap_init(SimHeap *heap)
{
  *heap = (SimHeap){ 0 };
}

void
sim_heap_clear(SimHeap *heap)
{
  heap->len = 0;
}

void
sim_heap_free(SimHeap *heap)
{
  g_free(heap->items);
  *heap = (SimHeap){ 0 };
}

void
sim_heap_push(SimHeap *heap, double key, guint32 seq, guint32 value)
{
  if (heap->len == heap->cap) {
    heap->cap = heap->cap ? heap->cap * 2 : 16;
    heap->items = g_renew(SimHeapItem, heap->items, heap->cap);
  }
  SimHeapItem item = { key, seq, value };
  guint i = heap->len++;
  while (i > 0) {
    guint parent = (i - 1) / 2;
    if (!item_less(&item, &heap->items[parent]))
      break;
    heap->items[i] = heap->items[parent];
    i = parent;
  }
  heap->items[i] = item;
  heap->ops++;
}

SimHeapItem
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
    if (child + 1 < n && item_less(&heap->items[child + 1], &heap->items[child]))
      child++;
    if (!item_less(&heap->items[child], &last))
      break;
    heap->items[i] = heap->items[child];
    i = child;
  }
  if (n > 0)
    heap->items[i] = last;
  heap->ops++;
  return top;
}
