/* tests/test_allocator.c — PyTorch's CUDA caching allocator (sim/engine/
 * allocator.h) on hand-made allocation sequences, each figure derived by
 * hand from c10/cuda/CUDACachingAllocator.cpp's rules: rounding to 512
 * bytes, the small and large pools, the segment sizes (2 MiB, 20 MiB,
 * rounded to 2 MiB), best fit, splitting, merging, streams, the release of
 * cached segments before an out-of-memory, expandable segments. */
#include "testutil.h"

#include "engine/allocator.h"

#define KIB(n) ((guint64)(n) * 1024)
#define MIB(n) ((guint64)(n) * 1024 * 1024)

START_TEST(rounding_and_segment_sizes)
{
  ck_assert_uint_eq(sim_allocator_round(1), 512);
  ck_assert_uint_eq(sim_allocator_round(512), 512);
  ck_assert_uint_eq(sim_allocator_round(513), 1024);
  ck_assert_uint_eq(sim_allocator_segment_size(1), MIB(2));          /* small: kSmallBuffer */
  ck_assert_uint_eq(sim_allocator_segment_size(MIB(1)), MIB(2));     /* 1 MiB is still small */
  ck_assert_uint_eq(sim_allocator_segment_size(MIB(1) + 1), MIB(20)); /* large below 10 MiB: kLargeBuffer */
  ck_assert_uint_eq(sim_allocator_segment_size(MIB(10) - 512), MIB(20));
  ck_assert_uint_eq(sim_allocator_segment_size(MIB(10)), MIB(10));   /* from 10 MiB: rounded to 2 MiB */
  ck_assert_uint_eq(sim_allocator_segment_size(MIB(11) + 1), MIB(12));
}
END_TEST

/* Small requests share a 2 MiB segment per stream; another stream gets its own. */
START_TEST(small_pool_and_streams)
{
  g_autoptr(SimAllocator) a = sim_allocator_new(0, SIM_ALLOCATOR_NONE);
  guint32 x = sim_allocator_malloc(a, 1000, 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(2));
  ck_assert_uint_eq(sim_allocator_allocated(a), 1024);
  guint32 y = sim_allocator_malloc(a, KIB(100), 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(2)); /* the first segment's rest */
  ck_assert_uint_eq(sim_allocator_allocated(a), 1024 + KIB(100));
  guint32 z = sim_allocator_malloc(a, 1000, 1);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(4)); /* stream 1 cannot use stream 0's cache */
  sim_allocator_release(a, x);
  sim_allocator_release(a, y);
  sim_allocator_release(a, z);
  ck_assert_uint_eq(sim_allocator_allocated(a), 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(4)); /* cached, not returned */
  ck_assert_uint_eq(sim_allocator_peak_allocated(a), 1024 + KIB(100) + 1024);
}
END_TEST

/* 5 MiB requests carve a 20 MiB segment: the rest splits while more than
 * 1 MiB remains; a large rest of 1 MiB or less stays with the block. */
START_TEST(large_pool_split_and_waste)
{
  g_autoptr(SimAllocator) a = sim_allocator_new(0, SIM_ALLOCATOR_NONE);
  for (guint i = 0; i < 4; i++)
    sim_allocator_malloc(a, MIB(5), 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(20)); /* 20 = 4 x 5: the fourth takes the last 5 */
  sim_allocator_malloc(a, MIB(5), 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(40));
  /* 19.5 MiB: a 20 MiB segment; the 0.5 MiB rest is not split off, the block holds 20. */
  g_autoptr(SimAllocator) b = sim_allocator_new(0, SIM_ALLOCATOR_NONE);
  sim_allocator_malloc(b, MIB(19) + KIB(512), 0);
  ck_assert_uint_eq(sim_allocator_reserved(b), MIB(20));
  ck_assert_uint_eq(sim_allocator_allocated(b), MIB(20));
}
END_TEST

/* Freed neighbours merge, and a request takes the smallest cached block
 * that fits. */
START_TEST(merge_and_best_fit)
{
  g_autoptr(SimAllocator) a = sim_allocator_new(0, SIM_ALLOCATOR_NONE);
  guint32 p = sim_allocator_malloc(a, MIB(5), 0), q = sim_allocator_malloc(a, MIB(5), 0);
  guint32 r = sim_allocator_malloc(a, MIB(5), 0);
  (void)r;
  /* The segment: p q r and a free 5 MiB tail. */
  sim_allocator_release(a, q);
  sim_allocator_release(a, p); /* p and q merge: a free 10 MiB block, and the 5 MiB tail */
  /* 4 MiB: the 5 MiB tail is the best fit, and stays whole (a 1 MiB rest is not more than 1 MiB). */
  sim_allocator_malloc(a, MIB(4), 0);
  ck_assert_uint_eq(sim_allocator_allocated(a), MIB(5) + MIB(5)); /* r, and the tail whole */
  /* 8 MiB: the merged 10 MiB block, split (2 MiB rest > 1 MiB). */
  sim_allocator_malloc(a, MIB(8), 0);
  ck_assert_uint_eq(sim_allocator_allocated(a), MIB(10) + MIB(8));
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(20));
  /* 3 MiB: nothing cached fits but the 2 MiB rest is too small: a new 20 MiB segment. */
  sim_allocator_malloc(a, MIB(3), 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(40));
}
END_TEST

/* Past the capacity, whole cached segments go back to CUDA and the
 * segment is tried again; with nothing to release, out of memory. */
START_TEST(release_before_out_of_memory)
{
  g_autoptr(SimAllocator) a = sim_allocator_new(MIB(40), SIM_ALLOCATOR_NONE);
  guint32 x = sim_allocator_malloc(a, MIB(15), 0), y = sim_allocator_malloc(a, MIB(15), 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(32)); /* two segments of 15 rounded to 2 MiB: 16 */
  sim_allocator_release(a, x);
  sim_allocator_release(a, y);
  /* 20 MiB fits no cached 16 MiB block; 32 + 20 > 40: both cached segments are released first. */
  guint32 z = sim_allocator_malloc(a, MIB(20), 0);
  ck_assert_uint_ne(z, SIM_ALLOCATOR_OOM);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(20));
  ck_assert_uint_eq(sim_allocator_peak_reserved(a), MIB(32));
  /* 20 allocated + 22 > 40, nothing cached: out of memory, and nothing changed. */
  ck_assert_uint_eq(sim_allocator_malloc(a, MIB(22), 0), SIM_ALLOCATOR_OOM);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(20));
  /* Fragmentation: 30 MiB allocated of 40 would fit, but a split segment is never released. */
  g_autoptr(SimAllocator) f = sim_allocator_new(MIB(40), SIM_ALLOCATOR_NONE);
  guint32 s[4];
  for (guint i = 0; i < 4; i++)
    s[i] = sim_allocator_malloc(f, MIB(5), 0); /* one 20 MiB segment */
  sim_allocator_release(f, s[0]);
  sim_allocator_release(f, s[2]);             /* 10 MiB free, in two pieces */
  ck_assert_uint_eq(sim_allocator_malloc(f, MIB(22), 0), SIM_ALLOCATOR_OOM); /* 20 + 22 > 40 */
  ck_assert_uint_ne(sim_allocator_malloc(f, MIB(20), 0), SIM_ALLOCATOR_OOM); /* 20 + 20 = 40 */
}
END_TEST

/* Expandable segments map pages (2 MiB small, 20 MiB large) at the end of
 * one segment per pool and stream, and split any rest of 512 bytes. */
START_TEST(expandable_segments)
{
  g_autoptr(SimAllocator) a = sim_allocator_new(0, SIM_ALLOCATOR_EXPANDABLE);
  sim_allocator_malloc(a, 1000, 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(2));
  sim_allocator_malloc(a, MIB(5), 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(22)); /* a 20 MiB page; 15 MiB rest split off */
  /* 18 MiB: the free 15 MiB tail and one more 20 MiB page; 17 MiB rest. */
  sim_allocator_malloc(a, MIB(18), 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(42));
  ck_assert_uint_eq(sim_allocator_allocated(a), 1024 + MIB(5) + MIB(18));
  /* 19.5 MiB: the 17 MiB tail and a page; the rest (17.5 MiB) splits, as any rest of 512 B would. */
  sim_allocator_malloc(a, MIB(19) + KIB(512), 0);
  ck_assert_uint_eq(sim_allocator_reserved(a), MIB(62));
  ck_assert_uint_eq(sim_allocator_allocated(a), 1024 + MIB(5) + MIB(18) + MIB(19) + KIB(512));
  /* Under pressure the free pages at a segment's end are unmapped. */
  g_autoptr(SimAllocator) b = sim_allocator_new(MIB(42), SIM_ALLOCATOR_EXPANDABLE);
  guint32 x = sim_allocator_malloc(b, MIB(5), 0);
  sim_allocator_malloc(b, MIB(5), 1);              /* stream 1: its own segment, 20 MiB */
  sim_allocator_release(b, x);                     /* stream 0's segment is free: 20 MiB cached */
  ck_assert_uint_eq(sim_allocator_reserved(b), MIB(40));
  ck_assert_uint_ne(sim_allocator_malloc(b, MIB(15), 1), SIM_ALLOCATOR_OOM); /* stream 1's tail holds 15 */
  ck_assert_uint_ne(sim_allocator_malloc(b, MIB(10), 1), SIM_ALLOCATOR_OOM); /* a page: 60 > 42, stream 0's unmapped */
  ck_assert_uint_eq(sim_allocator_reserved(b), MIB(40));
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("allocator");
  TCase *tc = tcase_create("allocator");
  tcase_add_test(tc, rounding_and_segment_sizes);
  tcase_add_test(tc, small_pool_and_streams);
  tcase_add_test(tc, large_pool_split_and_waste);
  tcase_add_test(tc, merge_and_best_fit);
  tcase_add_test(tc, release_before_out_of_memory);
  tcase_add_test(tc, expandable_segments);
  suite_add_tcase(s, tc);
  return test_run_suite(s);
}
