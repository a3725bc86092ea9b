#!/usr/bin/python3
"""A SimPy 2.3 peer of offsim's async offload step (classic API: Process,
yield hold / waitevent / request / release; Debian's python3-simpy).

Three processes, one per stream of the program sim/lower/lower.c builds:

- compute: each layer's forward (waiting first until the layer `inflight`
  before it is on the host), then after the forward pass each backward
  (waiting until its layer is reloaded, then starting the reload of the layer
  `prefetch` below);
- d2h: each offloaded layer's copies once its forward is done, then "offloaded";
- h2d: the reloads in the order the lowering issues them (the top `prefetch`
  layers at the end of the forward pass, the others when the backward
  `prefetch` above starts), each not before its layer is offloaded.

Each copy takes the direction's copy engine (a capacity-1 FIFO Resource) for
latency + bytes / bandwidth.  Recorded events are SimEvents with a flag: a
SimPy 2 signal nobody waits for is kept for one waiter only, and offsim's
events are waited by two streams (the compute and the h2d stream both wait
"offloaded"), so a wait on a recorded event goes on without yielding.

Memory goes through a ledger at op starts and ends.  offsim applies every
completion of an instant before it starts anything, and SimPy runs processes
of one instant in its own order, so the ledger takes peaks at instant
boundaries: within an instant device and host levels only fall (ends) and
then rise (starts), so the peak is the largest level an instant ends at.
Instants are merged within 1e-12 x max(1 s, t), like offsim's near ties.

    /usr/bin/python3 simpy_step.py --layers 96 --tensors 32 --repeats 5
"""

from SimPy.Simulation import (Process, Resource, SimEvent, activate, hold, initialize, now, release, request,
                              simulate, waitevent)

import scenario

NEAR_TIE = 1e-12


class Ledger:
    """Device and host bytes; peaks at the end of each instant."""

    def __init__(self, static):
        self.dev = self.peak_dev = static
        self.host = self.peak_host = 0
        self.t = 0.0
        self.limit = NEAR_TIE

    def _instant(self):
        t = now()
        if t > self.limit:  # a new instant: the previous one ended at these levels
            if self.dev > self.peak_dev:
                self.peak_dev = self.dev
            if self.host > self.peak_host:
                self.peak_host = self.host
            self.t = t
            self.limit = t + NEAR_TIE * (t if t > 1.0 else 1.0)

    def device(self, delta):
        self._instant()
        self.dev += delta

    def host_bytes(self, delta):
        self._instant()
        self.host += delta

    def close(self):
        self._instant()
        self.limit = float("inf")
        if self.dev > self.peak_dev:
            self.peak_dev = self.dev
        if self.host > self.peak_host:
            self.peak_host = self.host


class Event(SimEvent):
    """A SimEvent that stays recorded for every later waiter."""

    def __init__(self):
        SimEvent.__init__(self)
        self.recorded = False

    def record(self):
        self.recorded = True
        self.signal()


class Step:
    """The shared state of one step: events, copy engines, ledger."""

    def __init__(self, p):
        n = p.layers
        self.p = p
        self.offl = [p.offloads(i) for i in range(n)]
        self.fwd_done = [Event() if self.offl[i] else None for i in range(n)]
        self.offloaded = [Event() if self.offl[i] else None for i in range(n)]
        self.reloaded = [Event() if self.offl[i] else None for i in range(n)]
        self.trigger = [None] * n  # per layer, the event its reload waits for
        self.boundary = Event()    # the forward pass is done
        self.d2h = Resource(capacity=1, name="d2h engine")
        self.h2d = Resource(capacity=1, name="h2d engine")
        self.ledger = Ledger(p.static)
        sizes = p.sizes()
        self.copies = [(p.latency + s / p.bandwidth, s) for s in sizes]
        self.saved = sum(sizes)
        self.blocked = 0  # waits that suspended a process
        self.end = 0.0
        # The reload order of the h2d stream, and what starts each reload.
        self.reloads = []
        prefetch = p.prefetch
        if prefetch > 0:
            for pos in range(n - 1, max(n - prefetch, 0) - 1, -1):
                if self.offl[pos]:
                    self.trigger[pos] = self.boundary
                    self.reloads.append(pos)
        for i in range(n - 1, -1, -1):
            j = i if prefetch == 0 else i - prefetch
            if j >= 0 and self.offl[j] and self.trigger[j] is None:
                self.trigger[j] = Event()  # "backward due" (prefetch 0) or "backward started" of layer i
                self.reloads.append(j)
        self.started = [None] * n  # per layer i, the reload its backward start (or due) triggers
        for i in range(n):
            j = i if prefetch == 0 else i - prefetch
            if j >= 0 and self.offl[j] and self.trigger[j] is not self.boundary:
                self.started[i] = self.trigger[j]

    def done(self):
        t = now()
        if t > self.end:
            self.end = t


class ComputeStream(Process):
    def run(self, st):
        p, ledger, offl = st.p, st.ledger, st.offl
        n, ws, saved, inflight = p.layers, p.workspace, st.saved, p.inflight
        for i in range(n):
            before = i - inflight
            if before >= 0 and offl[before]:
                ev = st.offloaded[before]
                if not ev.recorded:
                    st.blocked += 1
                    yield waitevent, self, ev
            ledger.device(saved + ws)
            yield hold, self, p.forward
            ledger.device(-ws)
            if offl[i]:
                st.fwd_done[i].record()
        if any(t is st.boundary for t in st.trigger):
            st.boundary.record()
        for i in range(n - 1, -1, -1):
            started = st.started[i]
            if p.prefetch == 0 and started is not None:
                started.record()  # backward due: its own reload
                started = None
            if offl[i]:
                ev = st.reloaded[i]
                if not ev.recorded:
                    st.blocked += 1
                    yield waitevent, self, ev
            if started is not None:
                started.record()
            ledger.device(ws)
            yield hold, self, p.backward
            ledger.device(-(ws + saved))
        st.done()


class D2HStream(Process):
    def run(self, st):
        ledger, engine = st.ledger, st.d2h
        for i in range(st.p.layers):
            if not st.offl[i]:
                continue
            ev = st.fwd_done[i]
            if not ev.recorded:
                st.blocked += 1
                yield waitevent, self, ev
            for dur, size in st.copies:
                yield request, self, engine
                ledger.host_bytes(size)
                yield hold, self, dur
                ledger.device(-size)
                yield release, self, engine
            st.offloaded[i].record()
        st.done()


class H2DStream(Process):
    def run(self, st):
        ledger, engine = st.ledger, st.h2d
        for j in st.reloads:
            for ev in (st.trigger[j], st.offloaded[j]):
                if not ev.recorded:
                    st.blocked += 1
                    yield waitevent, self, ev
            for dur, size in st.copies:
                yield request, self, engine
                ledger.device(size)
                yield hold, self, dur
                ledger.host_bytes(-size)
                yield release, self, engine
            st.reloaded[j].record()
        st.done()


def step(p):
    import time
    t0 = time.perf_counter()
    initialize()
    st = Step(p)
    for cls, name in ((ComputeStream, "compute"), (D2HStream, "d2h"), (H2DStream, "h2d")):
        proc = cls(name=name)
        activate(proc, proc.run(st))
    t1 = time.perf_counter()
    simulate(until=1e30)
    t2 = time.perf_counter()
    st.ledger.close()
    if st.ledger.dev != p.static or st.ledger.host != 0:
        raise RuntimeError("memory not back at baseline")
    # The program's ops, counted as offsim lowers them (heapq_step.lower emits them one by one).
    n_off = sum(st.offl)
    n_copies = 2 * n_off * p.tensors
    n_compute = 2 * p.layers
    at_boundary = sum(1 for j in st.reloads if st.trigger[j] is st.boundary)
    ops = (n_compute + n_copies
           + sum(1 for i in range(p.inflight, p.layers) if st.offl[i - p.inflight])  # inflight waits
           + 3 * n_off  # record forward done, the d2h wait for it, record offloaded
           + 4 * len(st.reloads)  # two h2d waits, record reloaded, the compute wait for it
           + (1 if at_boundary else 0) + len(st.reloads) - at_boundary)  # the records that start reloads
    return {"step_ms": st.end * 1e3, "peak_device_bytes": st.ledger.peak_dev,
            "peak_host_bytes": st.ledger.peak_host, "ops": ops,
            # SimPy commands: a hold per op that takes time, a request and a
            # release per copy, and each wait that suspended its process.
            "events": n_compute + 3 * n_copies + st.blocked,
            "build_ms": (t1 - t0) * 1e3, "run_ms": (t2 - t1) * 1e3}


if __name__ == "__main__":
    scenario.peer_main("simpy", step, __doc__.splitlines()[0])
