#include "heap.h"

/* Items room is made for at the first push: more than the engine's heaps
 * hold for a program of three streams. */
#define FIRST_CAPACITY 16

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
  heap->cap = heap->cap ? heap->cap * 2 : FIRST_CAPACITY;
  heap->items = g_renew(SimHeapItem, heap->items, heap->cap);
}
