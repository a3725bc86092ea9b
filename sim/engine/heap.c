#include "heap.h"

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
sim_heap_grow(SimHeap *heap)
{
  heap->cap = heap->cap ? heap->cap * 2 : 16;
  heap->items = g_renew(SimHeapItem, heap->items, heap->cap);
}
