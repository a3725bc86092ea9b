#!/usr/bin/python3
"""Writes a random unequal-layer [model] scenario for the MIP reference.

    gen.py SEED LAYERS [--bw MIN MAX] [--tensors MIN MAX] [-o FILE]

Each layer: forward 0.5-3 ms, backward 1.8-2.2 x forward, 1-4 tensors of 5-60 MB, an input of
2-40 MB, a workspace of 0-64 MiB, all written in [layer.N].  The link: 10-25 GB/s each way
(--bw), latency 8us, compute_slowdown = 0, no bidirectional cap; device memory 1 TiB, static
2 GiB.  Sizes are written in MB or MiB with three decimals, times in us with one, rates in GB/s
with two: scenario.py reads exactly what offsim reads from them.
"""

import argparse
import random
import sys


def size(rng, lo_mb, hi_mb):
    """A size of lo_mb-hi_mb MB, written in MB or in MiB, three decimals."""
    v = rng.uniform(lo_mb, hi_mb)
    if rng.random() < 0.5:
        return "%.3fMB" % v
    return "%.3fMiB" % (v / 1.048576)


def generate(seed, layers, bw=(10.0, 25.0), tensors=(1, 4)):
    rng = random.Random(seed)
    out = ["# gen.py %d %d --bw %g %g --tensors %d %d" % (seed, layers, bw[0], bw[1], tensors[0], tensors[1]),
           "[scenario]", "name = gen-%d-%d" % (seed, layers), "",
           "[device]", "memory = 1TiB", "",
           "[link]",
           "h2d_bandwidth = %.2fGB/s" % rng.uniform(*bw),
           "d2h_bandwidth = %.2fGB/s" % rng.uniform(*bw),
           "latency = 8us", "compute_slowdown = 0", "",
           "[model]", "layers = %d" % layers, "forward = 1ms", "input = 8MB", "tensors = a:10MB",
           "static = 2GiB", ""]
    for i in range(layers):
        fwd = rng.uniform(500, 3000)
        bwd = fwd * rng.uniform(1.8, 2.2)
        k = rng.randint(*tensors)
        ts = ", ".join("t%d:%s" % (j, size(rng, 5, 60)) for j in range(k))
        ws = "0" if rng.random() < 0.2 else "%.3fMiB" % rng.uniform(1, 64)
        out += ["[layer.%d]" % i, "forward = %.1fus" % fwd, "backward = %.1fus" % bwd,
                "input = %s" % size(rng, 2, 40), "tensors = %s" % ts, "workspace = %s" % ws, ""]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("seed", type=int)
    ap.add_argument("layers", type=int)
    ap.add_argument("--bw", type=float, nargs=2, default=(10.0, 25.0), metavar=("MIN", "MAX"),
                    help="GB/s range of each direction (default 10 25)")
    ap.add_argument("--tensors", type=int, nargs=2, default=(1, 4), metavar=("MIN", "MAX"))
    ap.add_argument("-o", "--output", default=None)
    a = ap.parse_args()
    text = generate(a.seed, a.layers, tuple(a.bw), tuple(a.tensors))
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
