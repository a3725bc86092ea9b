#include "base/u64map.h"

#include <string.h>

static void
alloc_slots(SimU64Map *m, guint cap)
{
  m->cap = cap;
  m->len = 0;
  m->keys = g_new(guint64, cap);
  m->values = g_new(guint32, cap);
  memset(m->keys, 0xff, cap * sizeof(guint64)); /* every slot SIM_U64MAP_EMPTY */
}

void
sim_u64map_init(SimU64Map *m)
{
  alloc_slots(m, 64);
}

void
sim_u64map_clear(SimU64Map *m)
{
  g_clear_pointer(&m->keys, g_free);
  g_clear_pointer(&m->values, g_free);
  m->cap = m->len = 0;
}

void
sim_u64map_set(SimU64Map *m, guint64 key, guint32 value)
{
  g_assert(key != SIM_U64MAP_EMPTY);
  if (2 * (m->len + 1) > m->cap) {
    SimU64Map bigger;
    alloc_slots(&bigger, 2 * m->cap);
    for (guint i = 0; i < m->cap; i++)
      if (m->keys[i] != SIM_U64MAP_EMPTY) {
        guint j = sim_u64map_slot(&bigger, m->keys[i]);
        bigger.keys[j] = m->keys[i];
        bigger.values[j] = m->values[i];
        bigger.len++;
      }
    sim_u64map_clear(m);
    *m = bigger;
  }
  guint i = sim_u64map_slot(m, key);
  if (m->keys[i] == SIM_U64MAP_EMPTY) {
    m->keys[i] = key;
    m->len++;
  }
  m->values[i] = value;
}

void
sim_u64map_remove(SimU64Map *m, guint64 key)
{
  guint i = sim_u64map_slot(m, key);
  if (m->keys[i] != key)
    return;
  /* Backward-shift deletion: each key of the run after the hole that may
   * sit in it (its home is not in the cyclic range (hole, its slot]) moves
   * into it, and the hole moves on, so every key stays reachable from its
   * home without a tombstone. */
  guint mask = m->cap - 1;
  for (guint j = (i + 1) & mask; m->keys[j] != SIM_U64MAP_EMPTY; j = (j + 1) & mask) {
    guint home = sim_u64map_home(m, m->keys[j]);
    if (((j - home) & mask) >= ((j - i) & mask)) {
      m->keys[i] = m->keys[j];
      m->values[i] = m->values[j];
      i = j;
    }
  }
  m->keys[i] = SIM_U64MAP_EMPTY;
  m->len--;
}
