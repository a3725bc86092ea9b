"""The scenario both peers simulate, and the offsim scenario file that says the same.

A [model] of L identical layers of T saved tensors (tensor k: 1 + k % 8 MiB, the
shape `offsim bench` uses), under

    [policy.async]  kind = offload, mode = async, prefetch = P, inflight = W,
                    layers = all, keep_last = K, pinned = pooled

on a link with compute_slowdown = 0 and a bidir_bandwidth that never binds, so
every op's time is fixed when it starts and the step is max-plus.  Every value
is written in a unit whose decimal the peers read the same way (whole
microseconds, nanoseconds, GB/s, MiB), so offsim and the peers start from the
same doubles up to the parser's rounding.

    /usr/bin/python3 scenario.py --layers 24 --tensors 8 > s.ini
"""

import argparse
import sys

MIB = 1 << 20


class Params:
    def __init__(self, layers, tensors, forward_us=2000, backward_us=None, latency_ns=8000,
                 bandwidth_gbs=55, workspace_mib=0, static_mib=0, keep_last=0, prefetch=1,
                 inflight=2, bandwidth_mibs=None):
        self.layers = layers
        self.tensors = tensors
        self.forward_us = forward_us
        self.backward_us = 2 * forward_us if backward_us is None else backward_us
        self.latency_ns = latency_ns
        self.bandwidth_gbs = bandwidth_gbs
        self.workspace_mib = workspace_mib
        self.static_mib = static_mib
        self.keep_last = min(keep_last, layers)
        self.prefetch = prefetch
        self.inflight = max(inflight, 1)
        self.bandwidth_mibs = bandwidth_mibs  # MiB/s, instead of GB/s when given

    # The values in SI units, as the peers use them.
    @property
    def forward(self):
        return self.forward_us * 1e-6

    @property
    def backward(self):
        return self.backward_us * 1e-6

    @property
    def latency(self):
        return self.latency_ns * 1e-9

    @property
    def bandwidth(self):
        if self.bandwidth_mibs is not None:
            return float(self.bandwidth_mibs * MIB)
        return self.bandwidth_gbs * 1e9

    def rate_text(self, times=1):
        if self.bandwidth_mibs is not None:
            return "%dMiB/s" % (times * self.bandwidth_mibs)
        return "%dGB/s" % (times * self.bandwidth_gbs)

    @property
    def workspace(self):
        return self.workspace_mib * MIB

    @property
    def static(self):
        return self.static_mib * MIB

    def sizes(self):
        """Bytes of each saved tensor of a layer, in the order the layer lists them."""
        return [(1 + k % 8) * MIB for k in range(self.tensors)]

    def offloads(self, i):
        """layers = all, keep_last = K: the last K layers keep their tensors."""
        return i + self.keep_last < self.layers

    def ini(self):
        tensors = ", ".join("t%d:%dMiB" % (k, (1 + k % 8)) for k in range(self.tensors))
        return (
            "# Written by bench/peers/scenario.py; the peers simulate the same step.\n"
            "[scenario]\nname = peers %dx%d\n"
            "[device]\nmemory = 1000GiB\n"
            "[link]\nh2d_bandwidth = %s\nd2h_bandwidth = %s\nbidir_bandwidth = %s\n"
            "latency = %dns\ncompute_slowdown = 0\n"
            "[model]\nlayers = %d\nforward = %dus\nbackward = %dus\ninput = 4MiB\ntensors = %s\n"
            "static = %dMiB\nworkspace = %dMiB\n"
            "[policy.async]\nkind = offload\nmode = async\nprefetch = %d\ninflight = %d\nlayers = all\n"
            "keep_last = %d\npinned = pooled\n"
            % (self.layers, self.tensors, self.rate_text(), self.rate_text(), self.rate_text(100),
               self.latency_ns, self.layers, self.forward_us, self.backward_us, tensors, self.static_mib,
               self.workspace_mib, self.prefetch, self.inflight, self.keep_last))


def add_args(parser):
    parser.add_argument("--layers", type=int, default=96)
    parser.add_argument("--tensors", type=int, default=32)
    parser.add_argument("--forward-us", type=int, default=2000)
    parser.add_argument("--backward-us", type=int, default=None, help="default: 2 x forward")
    parser.add_argument("--latency-ns", type=int, default=8000)
    parser.add_argument("--bandwidth-gbs", type=int, default=55, help="each direction, GB/s")
    parser.add_argument("--bandwidth-mibs", type=int, default=None, help="each direction, MiB/s (instead of GB/s)")
    parser.add_argument("--workspace-mib", type=int, default=0)
    parser.add_argument("--static-mib", type=int, default=0)
    parser.add_argument("--keep-last", type=int, default=0)
    parser.add_argument("--prefetch", type=int, default=1)
    parser.add_argument("--inflight", type=int, default=2)


def from_args(a):
    return Params(a.layers, a.tensors, a.forward_us, a.backward_us, a.latency_ns, a.bandwidth_gbs,
                  a.workspace_mib, a.static_mib, a.keep_last, a.prefetch, a.inflight,
                  a.bandwidth_mibs)


def main():
    parser = argparse.ArgumentParser(description="Print the offsim scenario the peers simulate.")
    add_args(parser)
    sys.stdout.write(from_args(parser.parse_args()).ini())


if __name__ == "__main__":
    main()


def measure(name, step, params, repeats, warmup):
    """Runs `step(params)` warmup + repeats times and returns the report of the
    last run with the median wall time per step (time.perf_counter)."""
    import statistics
    import time
    walls = []
    result = None
    for r in range(warmup + repeats):
        t0 = time.perf_counter()
        result = step(params)
        t1 = time.perf_counter()
        if r >= warmup:
            walls.append(t1 - t0)
    report = {"peer": name, "layers": params.layers, "tensors": params.tensors, "keep_last": params.keep_last,
              "prefetch": params.prefetch, "inflight": params.inflight}
    report.update(result)
    report["repeats"] = repeats
    report["warmup"] = warmup
    report["wall_ms"] = [w * 1e3 for w in walls]
    median = statistics.median(walls)
    report["step_wall_ms"] = median * 1e3
    report["ops_per_sec"] = result["ops"] / median
    return report


def peer_main(name, step, doc):
    import json
    parser = argparse.ArgumentParser(description=doc)
    add_args(parser)
    parser.add_argument("--repeats", type=int, default=5, help="timed steps; the median is reported (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    a = parser.parse_args()
    report = measure(name, step, from_args(a), max(a.repeats, 1), max(a.warmup, 0))
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
