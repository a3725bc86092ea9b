#!/usr/bin/python3
"""offsim plan against the MIP on generated scenarios of 20, 40 and 96 layers.

    compare.py [--layers 20 40 96] [--seeds 1 2 3] [--fractions 0.4 0.7] [--time-limit 20:120 40:120 96:120]
               [--offsim /tmp/offsim-ref] [--keep DIR] [--out results.md]

For each scenario (gen.py SEED LAYERS) the budgets lie a fraction of the way from the smallest
peak any plan reaches (`offsim plan --budget 1B`: min_budget_bytes, what offsim's search found)
to the resident peak (resident_peak_device_bytes).  For each budget: `offsim plan` (timed), then
mip_plan.run over every schedule with the time limit, then `offsim run` on the MIP's plan (its
step and peak must agree and fit).  Writes a markdown table with the commands to --out.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# gen, mip_plan and scenario are modules beside this script, where Python looks first.
import gen  # noqa: E402
import mip_plan  # noqa: E402
from scenario import load  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def offsim(cmd):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.time() - t0
    if p.returncode not in (0, 4):
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr))
    return json.loads(p.stdout), dt


def sched_name(ref):
    return "sync" if ref["mode"] == "sync" else "p%dk%d" % (ref["prefetch"], ref["inflight"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, nargs="+", default=[20, 40, 96])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.4, 0.7])
    ap.add_argument("--time-limit", nargs="+", default=["20:120", "40:120", "96:120"],
                    help="LAYERS:SECONDS for the MIP, all schedules together")
    ap.add_argument("--offsim", default=os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build-rel", "cli", "offsim"))
    ap.add_argument("--keep", default=None, help="write the scenarios and JSON here")
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    a = ap.parse_args()
    limits = {int(k): float(v) for k, v in (s.split(":") for s in a.time_limit)}
    work = a.keep or tempfile.mkdtemp(prefix="mip_compare_")
    os.makedirs(work, exist_ok=True)
    rows = []
    for layers in a.layers:
        for seed in a.seeds:
            path = os.path.join(work, "gen-%d-%d.ini" % (seed, layers))
            with open(path, "w") as f:
                f.write(gen.generate(seed, layers))
            sc = load(path)
            lo, _ = offsim([a.offsim, "plan", path, "--budget", "1B", "--format", "json"])
            lo_b, hi_b = lo["min_budget_bytes"], lo["resident_peak_device_bytes"]
            for frac in a.fractions:
                budget = lo_b + int(frac * (hi_b - lo_b))
                ref, ref_s = offsim([a.offsim, "plan", path, "--budget", "%dB" % budget, "--format", "json"])
                out = mip_plan.run(sc, budget, list(mip_plan.SCHEDULES), time_limit=limits.get(layers))
                cbc_s = sum(i["solve_s"] + i.get("window_s", 0.0) for i in out["per_schedule"].values())
                check = None
                if out["step_ms"] is not None:
                    name = "mip%d" % int(frac * 100)
                    with open(path, "a") as f:
                        f.write("\n" + mip_plan.policy_block(out, name))
                    check, _ = offsim([a.offsim, "run", path, "--policy", name, "--budget", "%dB" % budget,
                                       "--format", "json"])
                row = {"layers": layers, "seed": seed, "fraction": frac, "budget_bytes": budget,
                       "min_peak_bytes": lo_b, "resident_peak_bytes": hi_b,
                       "offsim_step_ms": ref["step_ms"] if ref["feasible"] else None,
                       "offsim_lower_bound_ms": ref["lower_bound_ms"], "offsim_schedule": sched_name(ref),
                       "offsim_s": ref_s, "mip_step_ms": out["step_ms"], "mip_bound_ms": out["bound_ms"],
                       "mip_status": out["status"], "mip_schedule": out["schedule"], "mip_s": out["solve_s"],
                       "cbc_s": cbc_s, "mip_peak_bytes": out["peak_device_bytes"],
                       "check_step_ms": check["step_ms"] if check else None,
                       "check_peak_bytes": check["peak_device_bytes"] if check else None,
                       "check_fits": check["fits"] if check else None,
                       "per_schedule": {s: {k: v for k, v in i.items() if k != "actions"}
                                        for s, i in out["per_schedule"].items()},
                       "mip_actions": out["actions"], "offsim_actions": ref["actions"]}
                rows.append(row)
                with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
                    json.dump(rows, f, indent=1)
                print(line(row), flush=True)
    write(a, rows, work)


def pct(a, b):
    return "%.2f" % (100.0 * (a / b - 1.0)) if a is not None and b else "-"


def line(r):
    return "| %d | %d | %.0f %% (%.3f GB) | %s | %.3f | %s | %.3f | %s | %s | %s | %s | %.1f | %.1f | %.3f |" % (
        r["layers"], r["seed"], 100 * r["fraction"], r["budget_bytes"] / 1e9,
        "%.3f" % r["offsim_step_ms"] if r["offsim_step_ms"] is not None else "none",
        r["offsim_lower_bound_ms"], "%.3f" % r["mip_step_ms"] if r["mip_step_ms"] is not None else "none",
        r["mip_bound_ms"] if r["mip_bound_ms"] is not None else float("nan"),
        "optimal" if r["mip_status"] == "optimal" else "not proven",
        pct(r["offsim_step_ms"], r["mip_step_ms"]), pct(r["offsim_step_ms"], r["mip_bound_ms"]),
        "%s / %s" % (r["offsim_schedule"], r["mip_schedule"]), r["cbc_s"], r["mip_s"], r["offsim_s"])


HEADER = ("| layers | seed | budget (of the way from min to resident peak) | offsim step ms | offsim lower bound ms "
          "| MIP best ms | MIP bound ms | MIP | offsim over MIP best % | offsim over MIP bound % "
          "| schedule offsim / MIP | CBC s | MIP s | offsim s |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def write(a, rows, work):
    ok = all(r["check_fits"] and abs(r["check_step_ms"] - r["mip_step_ms"]) <= 1e-12 * r["mip_step_ms"]
             and r["check_peak_bytes"] == r["mip_peak_bytes"] for r in rows if r["mip_step_ms"] is not None)
    cmd = "/usr/bin/python3 bench/reference/compare.py --layers %s --seeds %s --fractions %s --time-limit %s " \
          "--offsim %s" % (" ".join(map(str, a.layers)), " ".join(map(str, a.seeds)),
                           " ".join("%g" % f for f in a.fractions), " ".join(a.time_limit), a.offsim)
    with open(a.out, "w") as f:
        f.write("# offsim plan against the MIP reference\n\n")
        f.write("Produced by\n\n```sh\n%s\n```\n\n" % cmd)
        f.write("Each scenario is `bench/reference/gen.py SEED LAYERS` (in the table: seed, layers). Per budget:\n\n"
                "```sh\n/tmp/offsim-ref plan SCENARIO --budget 1B --format json   # min_budget_bytes, "
                "resident_peak_device_bytes\n/tmp/offsim-ref plan SCENARIO --budget BUDGETB --format json   "
                "# timed: offsim s\n/usr/bin/python3 bench/reference/mip_plan.py SCENARIO --budget BUDGET "
                "--time-limit S   # what compare.py calls as mip_plan.run\n/tmp/offsim-ref run SCENARIO --policy "
                "mipNN --budget BUDGETB --format json   # the MIP's plan, checked\n```\n\n")
        f.write("offsim over MIP best: how much slower offsim's plan is than the best plan the MIP found (negative: "
                "offsim's is faster); offsim over MIP bound: the most offsim's plan can be above the optimum "
                "(the bound is CBC's, proven). CBC s: seconds in CBC, all models; MIP s: wall time of "
                "mip_plan.run (model building included).\n\n")
        f.write(HEADER + "\n")
        for r in rows:
            f.write(line(r) + "\n")
        f.write("\nEvery MIP plan run by `offsim run`: step equal (1e-12), peak equal to the byte and within the "
                "budget: %s.\n" % ("yes" if ok else "NO"))
        f.write("\nRaw figures (per schedule: CBC status, bound, windows, plans): `%s`.\n"
                % os.path.basename(os.path.splitext(a.out)[0] + ".json"))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
