/* sim/engine/allocator.h — PyTorch's CUDA caching allocator, as the
 * memory it reserves.
 *
 * What a training step allocates (the engine's ledger) is not what the GPU
 * gives up: PyTorch asks CUDA for segments and carves tensors out of them,
 * caching what is freed for the next request of the same stream, so the
 * out-of-memory error comes from the reserved bytes, allocated plus what
 * the cache holds and what its rounding wastes.  This module replays a
 * sequence of allocations and frees under the rules of
 * c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch at 001074d, the
 * constants at its top, round_size, get_pool, get_allocation_size,
 * get_free_block, should_split, alloc_block, free_block and
 * release_cached_blocks):
 *
 *   - a request is rounded up to a multiple of 512 bytes (kMinBlockSize);
 *   - up to 1 MiB (kSmallSize) it comes from the small pool, above from
 *     the large pool; pools never lend to each other, and a block freed
 *     by one stream serves only that stream again;
 *   - the cached block it takes is the smallest of its pool and stream
 *     that fits (the allocator's std::set ordered by stream, size,
 *     address); among blocks of one size PyTorch takes the lowest address,
 *     offsim, whose addresses are not CUDA's, the most recently freed;
 *   - a block larger than the request is split when what remains is at
 *     least 512 bytes (small pool) or more than 1 MiB (large pool); the
 *     rest stays cached;
 *   - without a fitting block a new segment is reserved (cudaMalloc):
 *     2 MiB for a small request (kSmallBuffer), 20 MiB for a large one
 *     below 10 MiB (kLargeBuffer, kMinLargeAlloc), else the request
 *     rounded up to 2 MiB (kRoundLarge);
 *   - a freed block merges with free neighbours of its segment;
 *   - when a segment would pass the capacity, every cached segment that
 *     is whole (a free block not split) is released to CUDA and the
 *     segment is tried again (release_cached_blocks; the gentler
 *     release_available_cached_blocks acts only with max_split_size set);
 *     if it still does not fit the request is out of memory;
 *   - expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:
 *     True): one segment per pool and stream that maps pages at its end
 *     as requests need them (2 MiB pages for the small pool, 20 MiB for
 *     the large one), splitting any block whose rest is 512 bytes or more;
 *     under pressure its free pages are unmapped.
 *
 * Not modelled: max_split_size_mb and roundup_power2_divisions (off by
 * default), garbage_collection_threshold, recordStream's deferred frees
 * (a block is cached when freed), CUDA graph pools, the driver's own
 * context and kernels (reserved is what the allocator holds).  Addresses
 * are the order in which segments were reserved, not CUDA's.
 *
 * Ownership: the caller owns a SimAllocator (sim_allocator_new /
 * sim_allocator_free).  Cost per request and free: a hash lookup of its
 * size among those its pool and stream have cached (a step repeats its
 * sizes), a binary search and a bit scan when a larger block must serve,
 * no allocation once the arrays have grown.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct SimAllocator SimAllocator;

/* What sim_allocator_malloc returns for a request the capacity cannot
 * hold even with every cached segment released. */
#define SIM_ALLOCATOR_OOM G_MAXUINT32

/* The constants of CUDACachingAllocator.cpp. */
#define SIM_ALLOCATOR_MIN_BLOCK 512u
#define SIM_ALLOCATOR_SMALL_SIZE (G_GUINT64_CONSTANT(1) << 20)
#define SIM_ALLOCATOR_SMALL_BUFFER (G_GUINT64_CONSTANT(2) << 20)
#define SIM_ALLOCATOR_LARGE_BUFFER (G_GUINT64_CONSTANT(20) << 20)
#define SIM_ALLOCATOR_MIN_LARGE_ALLOC (G_GUINT64_CONSTANT(10) << 20)
#define SIM_ALLOCATOR_ROUND_LARGE (G_GUINT64_CONSTANT(2) << 20)

/* sim_allocator_new's flags, a mask: how the allocator behaves. */
#define SIM_ALLOCATOR_NONE 0u
#define SIM_ALLOCATOR_EXPANDABLE (1u << 0) /* expandable segments, as above */

/* An allocator for one GPU of `capacity` bytes (0: unlimited), with
 * `flags` (SIM_ALLOCATOR_*). */
SimAllocator *sim_allocator_new(guint64 capacity, guint flags);
void sim_allocator_free(SimAllocator *allocator);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimAllocator, sim_allocator_free)

/* Changes the capacity (0: unlimited), for a replay that goes on past an
 * out-of-memory error. */
void sim_allocator_set_capacity(SimAllocator *allocator, guint64 capacity);

/* Allocates `bytes` (> 0) for `stream`; returns the block's handle, to be
 * given back to sim_allocator_release, or SIM_ALLOCATOR_OOM. */
guint32 sim_allocator_malloc(SimAllocator *allocator, guint64 bytes, guint32 stream);

/* Frees a block sim_allocator_malloc returned (it stays cached). */
void sim_allocator_release(SimAllocator *allocator, guint32 block);

/* Bytes: reserved from CUDA now and at most; allocated (requests rounded
 * to 512) now and at most. */
guint64 sim_allocator_reserved(const SimAllocator *allocator);
guint64 sim_allocator_peak_reserved(const SimAllocator *allocator);
guint64 sim_allocator_allocated(const SimAllocator *allocator);
guint64 sim_allocator_peak_allocated(const SimAllocator *allocator);

/* The segment size a request of `bytes` reserves when nothing cached
 * fits (not expandable). */
guint64 sim_allocator_segment_size(guint64 bytes);

/* `bytes` rounded as the allocator rounds a request. */
guint64 sim_allocator_round(guint64 bytes);

G_END_DECLS
