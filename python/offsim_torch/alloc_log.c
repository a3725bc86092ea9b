/* python/offsim_torch/alloc_log.c — which allocation each free of PyTorch's CPU allocator ends.
 *
 * The recorder (recorder.py) needs every allocation's lifetime: which op
 * allocated it and which op freed it, so that a recording carries the
 * transients beside what autograd saves.  torch.profiler's memory events
 * give sizes and places, not identities: a free says "-8192 bytes", not
 * which 8192-byte block.  Debian's torch 1.13 exports no addresses.  This
 * preloaded library fills the gap from below: c10's DefaultCPUAllocator
 * allocates with posix_memalign and frees with free, so interposing those
 * two logs every block the profiler reports, with its address, among the
 * process's other aligned allocations and frees.  recorder.py finds the
 * profiler's sequence in this one (each allocation the next of its size,
 * each free the next of a block it matched) and refuses the recording if
 * any event finds no partner.  (Keeping only calls made from libc10.so's
 * code is not enough: some of the profiler's blocks come from elsewhere.)
 *
 * Use: LD_PRELOAD=liboffsim_alloclog.so python3 -m offsim_torch.recorder ...; the
 * recorder calls offsim_alloc_log_start() and _stop() around the step and
 * reads the entries through ctypes.  Nothing is logged outside that window.
 *
 * Cost: one branch per posix_memalign and free while stopped; while logging,
 * a 16-byte store.  The log is an anonymous mapping,
 * touched only as it fills, so that logging never calls the allocator it
 * watches.  One thread: the recorder runs torch with one thread (the
 * profiler's order and this one must be the same order); entries are
 * claimed atomically all the same.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

/* One call: an allocation (bytes > 0) or a free (bytes == -1) of `ptr`. */
typedef struct {
  uint64_t ptr;
  int64_t bytes;
} OffsimAllocEntry;

#define LOG_CAPACITY ((size_t)1 << 26) /* 64 Mi entries, 1 GiB of address space, touched as used */

static int (*real_posix_memalign)(void **, size_t, size_t);
static void (*real_free)(void *);
static OffsimAllocEntry *entries;
static size_t count;
static int logging;

__attribute__((constructor)) static void
resolve(void)
{
  real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
}

static void
append(const void *ptr, int64_t bytes)
{
  size_t i = __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);
  if (i < LOG_CAPACITY)
    entries[i] = (OffsimAllocEntry){ (uint64_t)(uintptr_t)ptr, bytes };
}

int
posix_memalign(void **out, size_t alignment, size_t size)
{
  int rc = real_posix_memalign(out, alignment, size);
  if (logging && rc == 0)
    append(*out, (int64_t)size);
  return rc;
}

void
free(void *ptr)
{
  if (logging && ptr != NULL)
    append(ptr, -1);
  real_free(ptr);
}

/* Starts a new log.  Returns 0, or -1 when the log cannot be mapped
 * (nothing is logged then). */
int
offsim_alloc_log_start(void)
{
  if (entries == NULL) {
    void *m = mmap(NULL, LOG_CAPACITY * sizeof *entries, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
      return -1;
    entries = m;
  }
  count = 0;
  logging = 1;
  return 0;
}

void
offsim_alloc_log_stop(void)
{
  logging = 0;
}

/* Entries logged since the last start; more than LOG_CAPACITY means some
 * were lost (the reader refuses the log). */
size_t
offsim_alloc_log_count(void)
{
  return count;
}

const OffsimAllocEntry *
offsim_alloc_log_entries(void)
{
  return entries;
}
