/* sim/base/u64map.h — a map from 64-bit keys to 32-bit values, for hot
 * loops that look a key up per event.
 *
 * Open addressing with linear probing over two parallel arrays, at most
 * half full, keys hashed by a multiply: a lookup is a few instructions
 * with no call through a pointer, where a GHashTable's hash and equality
 * callbacks cost more than the work around them (the caching allocator's
 * replay looks up every memory action).  sim_u64map_remove takes a key
 * out (shifting the keys after it back, so no slot is a tombstone): a map
 * whose keys come and go holds only the ones present, not every key it
 * ever saw.  The arrays never shrink.  SIM_U64MAP_EMPTY marks a free slot
 * and is not a valid key.
 *
 * Ownership: a SimU64Map is a value its owner embeds (sim_u64map_init,
 * sim_u64map_clear).  Iterate with the arrays: slot i holds keys[i] and
 * values[i] when keys[i] != SIM_U64MAP_EMPTY.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define SIM_U64MAP_EMPTY G_MAXUINT64

typedef struct {
  /* read-only */
  guint64 *keys;
  guint32 *values;
  guint cap; /* a power of two, >= 2 × len */
  guint len;
} SimU64Map;

void sim_u64map_init(SimU64Map *map);
void sim_u64map_clear(SimU64Map *map); /* releases the arrays */

/* The slot `key` probes first. */
static inline guint
sim_u64map_home(const SimU64Map *m, guint64 key)
{
  return (guint)((key * G_GUINT64_CONSTANT(0x9E3779B97F4A7C15)) >> 32) & (m->cap - 1);
}

/* The slot of `key`: where it is, or the free slot it would take. */
static inline guint
sim_u64map_slot(const SimU64Map *m, guint64 key)
{
  guint i = sim_u64map_home(m, key);
  while (m->keys[i] != SIM_U64MAP_EMPTY && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  return i;
}

/* The value of `key`, or `missing` when it was never set. */
static inline guint32
sim_u64map_get(const SimU64Map *m, guint64 key, guint32 missing)
{
  guint i = sim_u64map_slot(m, key);
  return m->keys[i] == key ? m->values[i] : missing;
}

/* Sets `key` (not SIM_U64MAP_EMPTY) to `value`. */
void sim_u64map_set(SimU64Map *map, guint64 key, guint32 value);
/* Takes `key` out, if it is in: a later get returns `missing` for it. */
void sim_u64map_remove(SimU64Map *map, guint64 key);

G_END_DECLS
