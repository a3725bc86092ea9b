#!/usr/bin/python3
"""A hand-written discrete-event peer of offsim's async offload step, on heapq.

The leanest plain DES of the schedule: a program of ops on three streams
(compute, d2h, h2d) in the order sim/lower/lower.c issues them, recorded and
waited events, and one loop over a heap of op completions.  With
compute_slowdown = 0 and a bidirectional bandwidth that never binds, an op's
duration is known when it starts (compute: its work; copy: latency +
bytes / bandwidth), so the heap only holds completions.

Semantics kept from sim/engine/engine.c (docs/engine.md):
- an op starts when it heads its stream; a wait once its event is recorded;
  records and waits take no time;
- one copy engine per direction, FIFO (with one stream per direction, as the
  lowering builds, a copy never finds its engine busy, but the queue is here);
- completions within 1e-12 x max(1 s, t) of the next instant t happen at it;
  at an instant every completion is applied first, then ops are started;
- memory actions at an op's start and end, the peak taken at allocations.

    /usr/bin/python3 heapq_step.py --layers 96 --tensors 32 --repeats 5
"""

import heapq
from collections import deque

import scenario

COMPUTE, COPY, RECORD, WAIT = 0, 1, 2, 3
C, D, H = 0, 1, 2  # streams; the copy direction of a copy op is its stream (D: D2H, H: H2D)
NEAR_TIE = 1e-12


def lower(p):
    """The program offsim lowers for the scenario: per stream, its ops in
    issue order, each (index, kind, arg, dev_start, dev_end, host_start,
    host_end); arg is a duration (compute, copy) or an event (record, wait)."""
    n, prefetch, inflight = p.layers, p.prefetch, p.inflight
    sizes = p.sizes()
    saved = sum(sizes)
    ws = p.workspace
    lat, bw = p.latency, p.bandwidth
    d2h_copies = [(lat + s / bw, s) for s in sizes]
    h2d_copies = d2h_copies  # both directions run at the same bandwidth here
    streams = ([], [], [])
    count = [0, 0]  # ops, events

    def emit(s, kind, arg, ds=0, de=0, hs=0, he=0):
        streams[s].append((count[0], kind, arg, ds, de, hs, he))
        count[0] += 1

    def event():
        count[1] += 1
        return count[1] - 1

    offl = [p.offloads(i) for i in range(n)]
    ev_d2h = [None] * n
    ev_h2d = [None] * n

    def reload(j, trigger):
        emit(H, WAIT, trigger)
        emit(H, WAIT, ev_d2h[j])
        for dur, s in h2d_copies:
            emit(H, COPY, dur, s, 0, 0, -s)  # the device copy at its start, the host buffer freed at its end
        ev_h2d[j] = event()
        emit(H, RECORD, ev_h2d[j])

    for i in range(n):
        before = i - inflight
        if before >= 0 and ev_d2h[before] is not None:
            emit(C, WAIT, ev_d2h[before])
        emit(C, COMPUTE, p.forward, saved + ws, -ws)
        if offl[i]:
            done = event()
            emit(C, RECORD, done)
            emit(D, WAIT, done)
            for dur, s in d2h_copies:
                emit(D, COPY, dur, 0, -s, s, 0)  # host buffer at its start, the source freed at its end
            ev_d2h[i] = event()
            emit(D, RECORD, ev_d2h[i])
    if prefetch > 0:
        boundary = None
        for pos in range(n - 1, max(n - prefetch, 0) - 1, -1):
            if offl[pos]:
                if boundary is None:
                    boundary = event()
                    emit(C, RECORD, boundary)
                reload(pos, boundary)
    for i in range(n - 1, -1, -1):
        if prefetch == 0 and offl[i]:
            due = event()
            emit(C, RECORD, due)
            reload(i, due)
        if offl[i]:
            emit(C, WAIT, ev_h2d[i])
        below = i - prefetch
        if prefetch > 0 and below >= 0 and offl[below]:
            started = event()
            emit(C, RECORD, started)
            reload(below, started)
        emit(C, COMPUTE, p.backward, ws, -(ws + saved))
    return streams, count[0], count[1]


def simulate(streams, n_events, static):
    pos = [0, 0, 0]
    lens = [len(s) for s in streams]
    recorded = bytearray(n_events)
    waiters = [None] * n_events
    # The copy engines, indexed by direction; a copy's direction is D or H, the
    # stream the lowering puts it on.  queue[d]: (stream, op) waiting, FIFO.
    busy = [False, False, False]
    queue = (None, deque(), deque())
    heap = []
    push, pop = heapq.heappush, heapq.heappop
    dev = peak_dev = static
    host = peak_host = 0
    now = 0.0
    pushes = 0

    def advance(ready):
        """Starts what the streams in `ready` can start at `now`."""
        nonlocal dev, peak_dev, host, peak_host, pushes
        while ready:
            s = ready.pop()
            ops, k, end = streams[s], pos[s], lens[s]
            while k < end:
                op = ops[k]
                kind = op[1]
                if kind == RECORD:
                    e = op[2]
                    recorded[e] = 1
                    w = waiters[e]
                    if w is not None:
                        ready.extend(w)
                        waiters[e] = None
                    k += 1
                elif kind == WAIT:
                    e = op[2]
                    if recorded[e]:
                        k += 1
                        continue
                    w = waiters[e]
                    if w is None:
                        waiters[e] = [s]
                    else:
                        w.append(s)
                    break
                elif kind == COPY and busy[s]:
                    queue[s].append((s, op))  # it holds its stream while queued
                    break
                else:  # a compute or a copy that its idle engine takes
                    if kind == COPY:
                        busy[s] = True
                    ds, hs = op[3], op[5]
                    if ds:
                        dev += ds
                        if dev > peak_dev:
                            peak_dev = dev
                    if hs:
                        host += hs
                        if host > peak_host:
                            peak_host = host
                    push(heap, (now + op[2], op[0], s, op))
                    pushes += 1
                    break
            pos[s] = k

    advance([C, D, H])
    while heap:
        t, _, s, op = pop(heap)
        now = t
        batch = [(op[0], s, op)]
        limit = t + NEAR_TIE * (t if t > 1.0 else 1.0)
        while heap and heap[0][0] <= limit:
            _, idx, s2, op2 = pop(heap)
            batch.append((idx, s2, op2))
        if len(batch) > 1:
            batch.sort(key=lambda b: b[0])
        ready = []
        for _, s, op in batch:
            dev += op[4]
            host += op[6]
            pos[s] += 1
            ready.append(s)
        for _, d, op in batch:
            if op[1] == COPY:
                q = queue[d]
                if q:  # the direction's next queued copy starts now
                    s2, nxt = q.popleft()
                    ds, hs = nxt[3], nxt[5]
                    dev += ds
                    if dev > peak_dev:
                        peak_dev = dev
                    host += hs
                    if host > peak_host:
                        peak_host = host
                    push(heap, (now + nxt[2], nxt[0], s2, nxt))
                    pushes += 1
                else:
                    busy[d] = False
        advance(ready)
    stuck = [s for s in (C, D, H) if pos[s] < lens[s]]
    if stuck:
        raise RuntimeError("stuck schedule: streams %s blocked" % stuck)
    if dev != static or host != 0:
        raise RuntimeError("memory not back at baseline: device %d, host %d" % (dev - static, host))
    return now, peak_dev, peak_host, pushes


def step(p):
    import time
    t0 = time.perf_counter()
    streams, n_ops, n_events = lower(p)
    t1 = time.perf_counter()
    end, peak_dev, peak_host, pushes = simulate(streams, n_events, p.static)
    t2 = time.perf_counter()
    return {"step_ms": end * 1e3, "peak_device_bytes": peak_dev, "peak_host_bytes": peak_host, "ops": n_ops,
            "events": pushes, "build_ms": (t1 - t0) * 1e3, "run_ms": (t2 - t1) * 1e3}


if __name__ == "__main__":
    scenario.peer_main("heapq", step, __doc__.splitlines()[0])
