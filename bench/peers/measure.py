#!/usr/bin/python3
"""Side-by-side timings of the peers and offsim on the same scenario, interleaved.

For each size (layers x 32 tensors) and each round, in this order:

  A  simpy_step.py  --repeats 5 --warmup 1   median wall per step (perf_counter), under /usr/bin/time -v
  B  heapq_step.py  --repeats 5 --warmup 1   the same
  C  offsim: `run SCENARIO --policy async --format json` (process wall and peak RSS:
     start-up, parsing, lowering, the run and the report), then `compare` of the
     scenario with 1 and with K copies of the policy: (wall_K - wall_1) / (K - 1)
     is offsim's lower-and-run time per step on exactly this scenario; at 96
     layers also `bench --only step` (its own 96x32 scenario, compute_slowdown 0.03).

Ratios are taken within a round and their median over rounds is reported, with
the medians of each figure.  Nothing else heavy should run meanwhile (2 cores).

    /usr/bin/python3 measure.py --rounds 5 --out results.json > table.md
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import scenario  # beside this script, where Python looks first

PY = "/usr/bin/python3"
TENSORS = 32
# Copies of the policy in the differential compare: about 0.2 - 0.4 s of steps.
COMPARE_K = {96: 401, 1000: 51, 10000: 6}


def timed(cmd):
    """(wall seconds, peak RSS in KiB, stdout) of cmd under /usr/bin/time -v."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    rss = None
    for line in r.stderr.splitlines():
        if "Maximum resident set size" in line:
            rss = int(line.split(":")[1])
    return wall, rss, r.stdout


def params(layers):
    # keep_last = 1: offsim's async default, as in `offsim bench`'s scenario, so
    # the op counts are those of bench's step and scale rows.
    return scenario.Params(layers, TENSORS, keep_last=1)


def write_scenarios(tmp, layers, k):
    text = params(layers).ini()
    head, policy = text.split("[policy.async]\n")
    one = os.path.join(tmp, "s_%d.ini" % layers)
    many = os.path.join(tmp, "s_%d_x%d.ini" % (layers, k))
    with open(one, "w") as f:
        f.write(text)
    with open(many, "w") as f:
        f.write(head + "".join("[policy.async%d]\n" % i + policy for i in range(k)))
    return one, many


def peer(name, layers):
    cmd = [PY, os.path.join(HERE, name + "_step.py"), "--layers", str(layers), "--tensors", str(TENSORS),
           "--keep-last", "1", "--repeats", "5", "--warmup", "1"]
    wall, rss, out = timed(cmd)
    rep = json.loads(out)
    return {"step_ms": rep["step_wall_ms"], "wall_ms": rep["wall_ms"], "build_ms": rep["build_ms"],
            "run_ms": rep["run_ms"], "ops": rep["ops"], "events": rep["events"], "rss_kb": rss,
            "process_s": wall, "sim_step_ms": rep["step_ms"], "peak_device_bytes": rep["peak_device_bytes"]}


def offsim(binary, layers, one, many, k):
    wall, rss, out = timed([binary, "run", one, "--policy", "async", "--format", "json"])
    rep = json.loads(out)
    w1, rss1, _ = timed([binary, "compare", one, "--format", "json"])
    wk, rssk, _ = timed([binary, "compare", many, "--format", "json"])
    res = {"run_wall_ms": wall * 1e3, "run_rss_kb": rss, "sim_step_ms": rep["step_ms"],
           "peak_device_bytes": rep["peak_device_bytes"], "compare_1_ms": w1 * 1e3, "compare_k_ms": wk * 1e3,
           "compare_k": k, "compare_k_rss_kb": rssk, "step_ms": (wk - w1) / (k - 1) * 1e3}
    if layers == 96:
        _, _, out = timed([binary, "bench", "--only", "step", "--repeats", "5", "--format", "json"])
        b = json.loads(out)
        res["bench_step_ms"] = b["step_96x32_ms"]
        res["bench_step_ops"] = b["step_96x32_ops"]
    return res


def med(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="96,10000", help="layer counts, comma-separated (32 tensors each)")
    ap.add_argument("--offsim", default="build-rel/cli/offsim")
    ap.add_argument("--out", help="write every measurement as JSON here")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    raw = {"rounds": a.rounds, "sizes": {}}
    floor = timed([PY, "-c", "import SimPy.Simulation, heapq, json, statistics"])
    raw["python_floor_rss_kb"] = floor[1]
    with tempfile.TemporaryDirectory() as tmp:
        for layers in sizes:
            k = COMPARE_K.get(layers, 6)
            one, many = write_scenarios(tmp, layers, k)
            rounds = []
            for r in range(a.rounds):
                row = {"simpy": peer("simpy", layers), "heapq": peer("heapq", layers),
                       "offsim": offsim(a.offsim, layers, one, many, k)}
                rounds.append(row)
                print("# %d layers, round %d: simpy %.3f ms, heapq %.3f ms, offsim %.3f ms a step" % (
                    layers, r + 1, row["simpy"]["step_ms"], row["heapq"]["step_ms"], row["offsim"]["step_ms"]),
                    file=sys.stderr)
                for who in ("simpy", "heapq"):
                    if abs(row[who]["sim_step_ms"] - row["offsim"]["sim_step_ms"]) > 1e-9 * row["offsim"]["sim_step_ms"] \
                            or row[who]["peak_device_bytes"] != row["offsim"]["peak_device_bytes"]:
                        raise RuntimeError("%s disagrees with offsim at %d layers" % (who, layers))
            raw["sizes"][str(layers)] = rounds
    if a.out:
        with open(a.out, "w") as f:
            json.dump(raw, f, indent=1)
    table(raw, sys.stdout)


def table(raw, out):
    w = out.write
    w("| layers x 32 | simulator | ops | step, ms (median) | ops/s | own events | peak RSS | / offsim (median of rounds) |\n")
    w("|---|---|---|---|---|---|---|---|\n")
    for layers, rounds in raw["sizes"].items():
        n = len(rounds)
        ops = rounds[0]["heapq"]["ops"]
        off = [r["offsim"]["step_ms"] for r in rounds]
        for who, label in (("simpy", "SimPy 2.3"), ("heapq", "heapq loop")):
            ms = [r[who]["step_ms"] for r in rounds]
            ratio = [r[who]["step_ms"] / r["offsim"]["step_ms"] for r in rounds]
            rss = [r[who]["rss_kb"] for r in rounds]
            w("| %s | %s | %s | %s (%s - %s) | %s | %s | %s | %.0fx (%.0f - %.0f) |\n" % (
                layers, label, fmt_int(ops), fmt_ms(med(ms)), fmt_ms(min(ms)), fmt_ms(max(ms)),
                fmt_rate(ops / (med(ms) * 1e-3)), fmt_int(rounds[0][who]["events"]), fmt_mb(max(rss)),
                med(ratio), min(ratio), max(ratio)))
        rss = [r["offsim"]["compare_k_rss_kb"] for r in rounds]
        w("| %s | offsim, per step (compare x%d - x1) | %s | %s (%s - %s) | %s | | %s (x%d) | 1 |\n" % (
            layers, rounds[0]["offsim"]["compare_k"], fmt_int(ops), fmt_ms(med(off)), fmt_ms(min(off)),
            fmt_ms(max(off)), fmt_rate(ops / (med(off) * 1e-3)), fmt_mb(max(rss)), rounds[0]["offsim"]["compare_k"]))
        run = [r["offsim"]["run_wall_ms"] for r in rounds]
        rss = [r["offsim"]["run_rss_kb"] for r in rounds]
        w("| %s | `offsim run` process wall | %s | %s (%s - %s) | | | %s | |\n" % (
            layers, fmt_int(ops), fmt_ms(med(run)), fmt_ms(min(run)), fmt_ms(max(run)), fmt_mb(max(rss))))
        if "bench_step_ms" in rounds[0]["offsim"]:
            b = [r["offsim"]["bench_step_ms"] for r in rounds]
            rs = med([r["simpy"]["step_ms"] / r["offsim"]["bench_step_ms"] for r in rounds])
            rh = med([r["heapq"]["step_ms"] / r["offsim"]["bench_step_ms"] for r in rounds])
            w("| %s | `offsim bench --only step` (its scenario) | %s | %s (%s - %s) | %s | | | SimPy %.0fx, heapq %.0fx |\n" % (
                layers, fmt_int(rounds[0]["offsim"]["bench_step_ops"]), fmt_ms(med(b)), fmt_ms(min(b)),
                fmt_ms(max(b)), fmt_rate(rounds[0]["offsim"]["bench_step_ops"] / (med(b) * 1e-3)), rs, rh))
        sh = [r["simpy"]["step_ms"] / r["heapq"]["step_ms"] for r in rounds]
        w("| %s | SimPy / heapq | | | | | | %.2fx (%.2f - %.2f), %d rounds |\n" % (
            layers, med(sh), min(sh), max(sh), n))
    w("\nPython with SimPy imported and nothing run: %s peak RSS.\n" % fmt_mb(raw["python_floor_rss_kb"]))
    w("\nWhere a peer's step goes (the last timed step of each round, medians over rounds):\n\n")
    w("| layers x 32 | peer | build, ms | simulate, ms |\n|---|---|---|---|\n")
    for layers, rounds in raw["sizes"].items():
        for who, label in (("simpy", "SimPy: events, processes"), ("heapq", "heapq: lowering to op lists")):
            w("| %s | %s | %s | %s |\n" % (layers, label, fmt_ms(med([r[who]["build_ms"] for r in rounds])),
                                          fmt_ms(med([r[who]["run_ms"] for r in rounds]))))


def fmt_int(n):
    return "{:,}".format(n)


def fmt_ms(ms):
    return "%.3g" % ms if ms < 100 else "{:,.0f}".format(ms)


def fmt_rate(r):
    return "%.2f M" % (r / 1e6) if r >= 1e6 else "%.0f k" % (r / 1e3)


def fmt_mb(kb):
    return "%.1f MB" % (kb * 1024 / 1e6)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--table":  # re-print a table from saved JSON
        with open(sys.argv[2]) as f:
            table(json.load(f), sys.stdout)
    else:
        main()
