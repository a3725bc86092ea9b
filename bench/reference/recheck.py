#!/usr/bin/python3
"""offsim plan, as built now, against the MIP figures compare.py recorded (results.json).

    recheck.py [--offsim build-rel/cli/offsim] [--results results.json] [--out results-exact.md]

The MIP runs for minutes per instance; offsim's planner changes more often.  This re-creates each
scenario (gen.py SEED LAYERS), runs `offsim plan` at the recorded budget (median of 3 timed
runs), and tabulates it against the MIP's best plan and CBC's proven bound: offsim's plan can be
no faster than the bound, and where CBC proved its plan optimal the two must be equal.  Exit 1
when either fails.
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
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--offsim", default=os.path.join(ROOT, "build-rel", "cli", "offsim"))
    ap.add_argument("--results", default=os.path.join(HERE, "results.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "results-exact.md"))
    a = ap.parse_args()
    rows = json.load(open(a.results))
    work = tempfile.mkdtemp(prefix="recheck_")
    lines = ["| layers | seed | budget | offsim step ms | offsim bound ms | offsim | MIP best ms | MIP bound ms "
             "| MIP | offsim over MIP best % | schedule offsim / MIP | CBC s | offsim s |", "|---" * 13 + "|"]
    bad = 0
    for r in rows:
        path = os.path.join(work, "gen-%d-%d.ini" % (r["seed"], r["layers"]))
        if not os.path.exists(path):
            subprocess.run(["/usr/bin/python3", os.path.join(HERE, "gen.py"), str(r["seed"]), str(r["layers"]), "-o",
                            path], check=True)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            p = subprocess.run([a.offsim, "plan", path, "--budget", "%dB" % r["budget_bytes"], "--format", "json"],
                               capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            sys.exit("%s: exit %d: %s" % (path, p.returncode, p.stderr.strip()))
        d = json.loads(p.stdout)
        sched = "sync" if d["mode"] == "sync" else "p%dk%d" % (d["prefetch"], d["inflight"])
        over = (d["step_ms"] / r["mip_step_ms"] - 1) * 100
        status = "optimal" if d["optimal"] else "gap %.3f %%" % (d["gap"] * 100)
        if d["step_ms"] < r["mip_bound_ms"] * (1 - 1e-9) or (r["mip_status"] == "optimal" and abs(over) > 1e-6):
            bad += 1
            status += " (DISAGREES)"
        lines.append("| %d | %d | %d %% | %.3f | %.3f | %s | %.3f | %.3f | %s | %+.3f | %s / %s | %.1f | %.3f |" % (
            r["layers"], r["seed"], round(r["fraction"] * 100), d["step_ms"], d["lower_bound_ms"], status,
            r["mip_step_ms"], r["mip_bound_ms"], r["mip_status"], over, sched, r["mip_schedule"], r["cbc_s"],
            statistics.median(times)))
        print(lines[-1], flush=True)
    with open(a.out + ".tmp", "w") as f:
        f.write("# offsim plan (the exact search) against the MIP\n\nProduced by\n\n```sh\n"
                "/usr/bin/python3 bench/reference/recheck.py --offsim %s\n```\n\n"
                "from the MIP figures in results.json (compare.py, 120 s of CBC per instance). offsim s: median of "
                "3 runs of `offsim plan --format json`, wall.\n\n" % os.path.relpath(a.offsim, ROOT))
        f.write("\n".join(lines) + "\n")
    os.replace(a.out + ".tmp", a.out)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
