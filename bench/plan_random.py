#!/usr/bin/python3
"""offsim plan on random unequal models: time, proof and gap.

    bench/plan_random.py [OFFSIM] [--layers 20 40 96] [--seeds 1 2] [--slowdowns 0 0.03]

Each model: seeded random layers (forward 0.5 - 3 ms, backward 1.6 - 2.4x, 1 - 4 tensors of
5 - 60 MB, input, workspace) on a 10 - 25 GB/s link, static 1 GiB; budgets at 30 % and 60 % of
the way from static memory to resident's peak.  Prints one line per plan: step, lower bound, gap,
proven optimal or not, schedule, the exact search's states, wall seconds (one run).
"""

import json
import os
import random
import subprocess
import sys
import tempfile
import time


def model(seed, layers, slowdown):
    r = random.Random(seed)
    out = ["[device]\nmemory = 80GiB\n[link]",
           "h2d_bandwidth = %dGB/s\nd2h_bandwidth = %dGB/s\nbidir_bandwidth = 40GB/s\nlatency = 8us" % (
               r.randint(10, 25), r.randint(10, 25)),
           "compute_slowdown = %g" % slowdown,
           "[model]\nlayers = %d\nforward = 1ms\nbackward = 2ms\ninput = 1MB\ntensors = t0:1MB\nstatic = 1GiB" % layers]
    for i in range(layers):
        f = r.uniform(0.5, 3.0)
        ts = ", ".join("t%d:%dMB" % (k, r.randint(5, 60)) for k in range(r.randint(1, 4)))
        out.append("[layer.%d]\nforward = %.4fms\nbackward = %.4fms\ninput = %dMB\nworkspace = %dMB\ntensors = %s" % (
            i, f, f * r.uniform(1.6, 2.4), r.randint(2, 20), r.randint(0, 30), ts))
    return "\n".join(out) + "\n"


def arg_list(name, default, cast):
    if name in sys.argv:
        i = sys.argv.index(name) + 1
        vals = []
        while i < len(sys.argv) and not sys.argv[i].startswith("--"):
            vals.append(cast(sys.argv[i]))
            i += 1
        return vals
    return default


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    offsim = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else \
        os.path.join(os.path.dirname(here), "build-rel", "cli", "offsim")
    work = tempfile.mkdtemp(prefix="plan_random_")
    for layers in arg_list("--layers", [20, 40, 96], int):
        for seed in arg_list("--seeds", [1, 2], int):
            for slow in arg_list("--slowdowns", [0.0, 0.03], float):
                path = os.path.join(work, "m%d-%d-%g.ini" % (layers, seed, slow))
                open(path, "w").write(model(seed, layers, slow))
                res = json.loads(subprocess.run([offsim, "run", path, "--format", "json"], capture_output=True,
                                                text=True, check=True).stdout)["peak_device_bytes"]
                for frac in (0.3, 0.6):
                    budget = int(1073741824 + frac * (res - 1073741824))
                    t0 = time.perf_counter()
                    p = subprocess.run([offsim, "plan", path, "--budget", "%dB" % budget, "--format", "json"],
                                       capture_output=True, text=True)
                    dt = time.perf_counter() - t0
                    if p.returncode != 0:
                        print(layers, seed, slow, frac, "exit", p.returncode, p.stderr.strip())
                        continue
                    d = json.loads(p.stdout)
                    print("layers %d seed %d slowdown %g budget %d %%: step %.3f ms, bound %.3f ms, gap %.3f %%, %s, "
                          "%s p%d k%d, %d states, %.3f s" % (
                              layers, seed, slow, frac * 100, d["step_ms"], d["lower_bound_ms"], d["gap"] * 100,
                              "optimal" if d["optimal"] else "not proven optimal", d["mode"], d["prefetch"],
                              d["inflight"], d["states"], dt), flush=True)


if __name__ == "__main__":
    main()
