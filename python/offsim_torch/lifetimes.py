"""Every allocation's lifetime in a recorded step: the transients beside what autograd saves.

torch.profiler's memory events say how many bytes were allocated or freed
where (phase, layer, module, autograd node, ATen op), not which block a free
ends.  alloc_log.c, preloaded into the process (LD_PRELOAD), logs every
posix_memalign and free with its address while the step runs; this module
finds the profiler's events in that log (each allocation is the next
logged allocation of its size, each free the next logged free of a block
already matched), so that every allocation of the step gets the event
that freed it, or none when it outlived the step.  Any profiler event
without a partner refuses the recording (AllocLogError): nothing is
guessed.

From the lifetimes, recorder.py writes one row per allocation that is not
a saved storage (those are the pack rows already) and that a CUDA run
makes too:

  - `workspace`: per place (a forward op or an autograd node), the most
    bytes held at once by the blocks it allocated and freed itself;
  - `transient`: a block allocated in one place and freed in another (the
    hidden state between two modules, a gradient one node hands to the
    next), with where it was freed (freed_layer, freed_phase, freed_op);
  - `grad`: a parameter's gradient (.grad after the step), allocated where
    it was made and held to the end;
  - `held`: anything else alive when the step ended (the loss the caller
    keeps, outputs it holds).

Left out as the CPU's own (a CUDA run does not allocate them): what one
GEMM's ATen call allocates and frees before it returns (the bf16 matmul's
fp32 copies) and the temporaries of a stand-in's CPU decomposition of a
CUDA kernel (standins.py); what a stand-in leaves allocated stays.  A block
saved only by a reference that current PyTorch does not keep (recorder.py's
adjust codes: torch 1.13 saved mean()'s input) counts as freed where it was
made.
"""
import ctypes

GEMM_ATEN = ("aten::mm", "aten::bmm", "aten::addmm")
GEMM_FUNCTIONS = ("linear", "addmm", "matmul", "mm", "bmm")

KINDS = ("workspace", "transient", "grad", "held")


class AllocLogError(RuntimeError):
    """The allocation log and the profiler's events disagree: the lifetimes cannot be trusted."""


class _Entry(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_uint64), ("bytes", ctypes.c_int64)]


class AllocLog:
    """The preloaded alloc_log.c library, through ctypes."""

    def __init__(self, lib):
        self._lib = lib
        lib.offsim_alloc_log_start.restype = ctypes.c_int
        lib.offsim_alloc_log_count.restype = ctypes.c_size_t
        lib.offsim_alloc_log_entries.restype = ctypes.POINTER(_Entry)

    def start(self):
        if self._lib.offsim_alloc_log_start() != 0:
            raise AllocLogError("the allocation log could not map its buffer")

    def stop(self):
        self._lib.offsim_alloc_log_stop()

    def count(self):
        """Entries logged so far: a position in the log (the pack hook notes it)."""
        return self._lib.offsim_alloc_log_count()

    def entries(self):
        n = self.count()
        if n > (1 << 26):
            raise AllocLogError(f"the allocation log overflowed ({n} entries)")
        e = self._lib.offsim_alloc_log_entries()
        return [(e[i].ptr, e[i].bytes) for i in range(n)]


def loaded():
    """The allocation log when alloc_log.c is preloaded into this process, else None."""
    lib = ctypes.CDLL(None)
    if not hasattr(lib, "offsim_alloc_log_start"):
        return None
    return AllocLog(lib)


def match(entries, deltas):
    """The log position of each profiler event (deltas: +bytes or -bytes, in order).

    An allocation is the next logged allocation of its size; a free the next
    logged free of a block an earlier event matched, which must be of its
    size.  Other entries are the process's own (Python, BLAS) and skipped."""
    where = []
    live = {}  # ptr -> bytes, blocks matched to a profiler allocation
    k = 0
    for i, delta in enumerate(deltas):
        while k < len(entries):
            ptr, b = entries[k]
            if delta > 0 and b == delta:
                live[ptr] = b
                break
            if delta < 0 and b < 0 and ptr in live:
                if live.pop(ptr) != -delta:
                    raise AllocLogError(f"profiler event {i} frees {-delta} bytes; the log frees a block of "
                                        f"{live.get(ptr)} there")
                break
            k += 1
        if k == len(entries):
            raise AllocLogError(f"profiler event {i} ({delta:+d} bytes) has no partner in the allocation log")
        where.append(k)
        k += 1
    return where


def lifetimes(entries, deltas):
    """Per profiler event: the event that frees the block it allocates (an index), None for a free
    or a block alive at the end.  Also returns each event's block address."""
    pos = match(entries, deltas)
    freed = [None] * len(deltas)
    ptrs = [entries[p][0] for p in pos]
    open_at = {}  # ptr -> allocating event
    for i, delta in enumerate(deltas):
        if delta > 0:
            open_at[ptrs[i]] = i
        else:
            freed[open_at.pop(ptrs[i])] = i
    return freed, ptrs, pos


def allocations_at(pos, ptrs, deltas, wanted):
    """The allocating event of each (ptr, log position) in `wanted`: the block at ptr live at that
    position, or None (a block allocated before the step, a parameter's)."""
    by_ptr = {}
    for i, delta in enumerate(deltas):
        by_ptr.setdefault(ptrs[i], []).append(i)
    out = []
    for ptr, logpos in wanted:
        best = None
        for i in by_ptr.get(ptr, ()):
            if pos[i] >= logpos:
                break
            best = i if deltas[i] > 0 else None
        out.append(best)
    return out


def classify(deltas, places, contexts, freed, saved, adjusted, grads):
    """The rows to write: (kind, allocating event, freeing event or None, bytes), in event order.

    places: per event its (layer, phase, place); contexts: per event the
    profiler context (phase, layer, module, function, node, aten, standin);
    saved: allocating events of saved storages (left out); adjusted: of
    storages only an adjusted reference saved (freed where made); grads: of
    the parameters' gradients.  A workspace row's events are its place's
    first allocation and its freeing event is None."""
    n = len(deltas)
    call = [0] * n  # runs of events in one context: one ATen call, as far as the profiler tells
    for i in range(1, n):
        call[i] = call[i - 1] + (contexts[i][:5] != contexts[i - 1][:5])
    gemm_call = set()
    for i in range(n):
        c = contexts[i]
        if c[5] in GEMM_ATEN or c[3] in GEMM_FUNCTIONS:
            gemm_call.add(call[i])
    standin = [0] * n  # runs of events inside one stand-in, 0 outside any
    run = 0
    for i in range(n):
        if contexts[i][6]:
            if i == 0 or contexts[i - 1][6] != contexts[i][6]:
                run += 1
            standin[i] = run
    last_of_place = {}
    for i in range(n):
        last_of_place[places[i]] = i

    def cpu_only(i, j):
        return (call[i] == call[j] and call[i] in gemm_call) or (standin[i] and standin[i] == standin[j])

    rows = []
    high, cur, first = {}, {}, {}
    ends = {}  # freeing event -> [(place, bytes)] of workspace blocks
    for i in range(n):
        for key, b in ends.pop(i, ()):
            cur[key] -= b
        if deltas[i] <= 0 or i in saved:
            continue
        j = freed[i]
        if i in adjusted:
            j = last_of_place[places[i]]
        if j is None:
            rows.append(("grad" if i in grads else "held", i, None, deltas[i]))
        elif places[j] != places[i]:
            rows.append(("transient", i, j, deltas[i]))
        elif not cpu_only(i, j):
            key = places[i]
            first.setdefault(key, i)
            cur[key] = cur.get(key, 0) + deltas[i]
            high[key] = max(high.get(key, 0), cur[key])
            ends.setdefault(j if j > i else j + 1, []).append((key, deltas[i]))
    rows += [("workspace", first[key], None, b) for key, b in high.items()]
    rows.sort(key=lambda r: (r[1], KINDS.index(r[0])))
    return rows
