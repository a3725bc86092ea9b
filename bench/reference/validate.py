#!/usr/bin/python3
"""Checks the MIP against offsim's engine on random fixed plans.

    validate.py [--scenarios 12] [--plans 30] [--seed 1] [--offsim /tmp/offsim-ref] [--keep DIR]

For each random scenario (gen.py: 4-12 layers, 1-4 tensors, link speeds from 3 to 300 GB/s so
that some transfers hide and some are exposed) and each random plan (actions and schedule drawn
at random, some draws biased towards offloading), the plan is fixed in the MIP (mip_plan.run with
fixed=...) and run by `offsim run SCENARIO --policy NAME --format json`; step and peak are
compared.  Prints every mismatch and a summary; exits 1 on any.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

# gen, mip_plan and scenario are modules beside this script, where Python looks first.
import gen  # noqa: E402
import mip_plan  # noqa: E402
from scenario import load  # noqa: E402

BW = [(3, 10), (10, 25), (25, 80), (80, 300)]


def drop_rows(*prefixes):
    """Mutation: rows whose names start with one of `prefixes` removed before each solve."""
    solve = mip_plan.Model.solve

    def patched(self, *args, **kw):
        for name in [n for n in self.prob.constraints if n.startswith(prefixes)]:
            del self.prob.constraints[name]
        return solve(self, *args, **kw)
    mip_plan.Model.solve = patched


def no_phases():
    """Mutation: at an H2D copy's start, the layers above are taken as not in their backward."""
    build = mip_plan.Model.build_memory

    def patched(self):
        build(self)
        self.moments = [(n, t, e, terms, []) for n, t, e, terms, cs in self.moments]
    mip_plan.Model.build_memory = patched


def eps0():
    mip_plan.EPS = 0.0


MUTATIONS = {
    "nomax": lambda: drop_rows("le_"),        # times only >= their predecessors (no exact max)
    "eps0": eps0,                             # a reload starting at a moment may count as not started
    "ustart": lambda: drop_rows("ut_"),       # reloads may count as not started whenever
    "wfree": lambda: drop_rows("wt_"),        # offloads may count as freed whenever
    "phases": no_phases,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", type=int, default=12)
    ap.add_argument("--plans", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--offsim", default=os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build-rel", "cli", "offsim"))
    ap.add_argument("--keep", default=None, help="write the scenarios here")
    ap.add_argument("--optimum", type=int, default=0, metavar="N",
                    help="instead: N random small scenarios (4-7 layers) and budgets, the MIP's optimum against "
                         "offsim plan's (exact up to 8 layers), and the MIP's plan run by offsim")
    ap.add_argument("--mutate", choices=sorted(MUTATIONS), default=None,
                    help="break one part of the model first: the check must then report mismatches")
    a = ap.parse_args()
    if a.mutate:
        MUTATIONS[a.mutate]()
    if a.optimum:
        return optimum(a)
    rng = random.Random(a.seed)
    work = a.keep or tempfile.mkdtemp(prefix="mip_validate_")
    os.makedirs(work, exist_ok=True)
    worst_step = worst_cbc = 0.0
    worst_peak = worst_order = 0
    checked = mismatches = violations = cbc_failures = 0
    phases = {}
    per_sched = {}
    for s in range(a.scenarios):
        layers = rng.randint(4, 12)
        bw = BW[s % len(BW)]
        seed = rng.randrange(10**6)
        text = gen.generate(seed, layers, bw)
        plans = []
        for p in range(a.plans):
            bias = rng.choice([None, None, 1, 3])  # None: uniform; 1: offload-heavy; 3: recompute+offload-heavy
            acts = []
            for i in range(layers):
                if bias is not None and rng.random() < 0.6:
                    acts.append(bias)
                else:
                    acts.append(rng.randrange(4))
            sched = rng.choice(list(mip_plan.SCHEDULES))
            plans.append((acts, sched))
        blocks = []
        for p, (acts, sched) in enumerate(plans):
            asy, pf, inf = mip_plan.SCHEDULES[sched]
            blocks.append("[policy.p%d]\nkind = plan\nmode = %s\n%sactions = %s\n" % (
                p, "async" if asy else "sync", ("prefetch = %d\ninflight = %d\n" % (pf, inf)) if asy else "",
                ", ".join(mip_plan.ACTIONS[x] for x in acts)))
        path = os.path.join(work, "v%02d.ini" % s)
        with open(path, "w") as f:
            f.write(text + "\n" + "\n".join(blocks))
        sc = load(path)
        for p, (acts, sched) in enumerate(plans):
            ref = json.loads(subprocess.run([a.offsim, "run", path, "--policy", "p%d" % p, "--format", "json"],
                                            check=True, capture_output=True, text=True).stdout)
            try:
                out = mip_plan.run(sc, 1 << 62, [sched], fixed=acts)
            except RuntimeError as e:
                print("CBC FAILURE %s p%d %s %s: %s" % (path, p, sched, ",".join(mip_plan.ACTIONS[x] for x in acts), e),
                      flush=True)
                cbc_failures += 1
                mismatches += 1
                continue
            ev = out["per_schedule"][sched]
            rel = abs(ev["step_ms"] - ref["step_ms"]) / ref["step_ms"]
            rel_cbc = abs(ev["step_ms_cbc"] - ref["step_ms"]) / ref["step_ms"]
            dpeak = abs(ev["peak_device_bytes"] - ref["peak_device_bytes"])
            dpeak_order = abs(ev["peak_engine_order_bytes"] - ref["peak_device_bytes"])
            worst_order = max(worst_order, dpeak_order)
            worst_step, worst_cbc, worst_peak = max(worst_step, rel), max(worst_cbc, rel_cbc), max(worst_peak, dpeak)
            violations += ev["violations"]
            phases[ref["peak_device_phase"]] = phases.get(ref["peak_device_phase"], 0) + 1
            checked += 1
            st = per_sched.setdefault(sched, [0, 0])
            st[0] += 1
            if rel > 1e-12 or dpeak != 0 or dpeak_order != 0 or ev["violations"] or ev["status"] != "optimal":
                mismatches += 1
                st[1] += 1
                print("MISMATCH %s p%d %s %s: offsim step %.15g peak %d (%s) | mip step %.15g peak %d (%s) viol %d" % (
                    path, p, sched, ",".join(mip_plan.ACTIONS[x] for x in acts), ref["step_ms"],
                    ref["peak_device_bytes"], ref["peak_device_where"] + " " + ref["peak_device_phase"],
                    ev["step_ms"], ev["peak_device_bytes"], ev["peak_at"], ev["violations"]), flush=True)
        print("scenario %d (%d layers, %s GB/s): %d plans, worst so far step %.3g, peak %d B" % (
            s, layers, bw, len(plans), worst_step, worst_peak), flush=True)
    print(json.dumps({"plans": checked, "scenarios": a.scenarios, "mismatches": mismatches,
                      "max_rel_step_error": worst_step, "max_rel_step_error_cbc_printed": worst_cbc,
                      "max_peak_error_bytes": worst_peak,
                      "max_peak_error_bytes_engine_order_assignment": worst_order, "implication_violations": violations,
                      "cbc_failures": cbc_failures, "offsim_peak_phases": phases,
                      "per_schedule": per_sched, "work": work}, indent=2))
    return 1 if mismatches else 0


def offsim_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 4):
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr))
    return json.loads(p.stdout)


def optimum(a):
    rng = random.Random(a.seed)
    work = a.keep or tempfile.mkdtemp(prefix="mip_optimum_")
    os.makedirs(work, exist_ok=True)
    worst = 0.0
    bad = 0
    rows = []
    for s in range(a.optimum):
        layers = rng.randint(4, 7)
        bw = BW[s % len(BW)]
        path = os.path.join(work, "o%02d.ini" % s)
        with open(path, "w") as f:
            f.write(gen.generate(rng.randrange(10**6), layers, bw))
        sc = load(path)
        lo = offsim_json([a.offsim, "plan", path, "--budget", "1B", "--format", "json"])
        lo_b, hi_b = lo["min_budget_bytes"], lo["resident_peak_device_bytes"]
        budget = lo_b + int(rng.random() * (hi_b - lo_b))
        ref = offsim_json([a.offsim, "plan", path, "--budget", "%dB" % budget, "--format", "json"])
        out = mip_plan.run(sc, budget, list(mip_plan.SCHEDULES))
        with open(path, "a") as f:
            f.write("\n" + mip_plan.policy_block(out, "mip"))
        check = offsim_json([a.offsim, "run", path, "--policy", "mip", "--budget", "%dB" % budget, "--format", "json"])
        rel = abs(out["step_ms"] - ref["step_ms"]) / ref["step_ms"]
        rel_run = abs(out["step_ms"] - check["step_ms"]) / check["step_ms"]
        ok = rel < 1e-12 and rel_run < 1e-12 and check["fits"] and out["status"] == "optimal" and \
            check["peak_device_bytes"] == out["peak_device_bytes"]
        worst = max(worst, rel)
        bad += not ok
        rows.append((layers, budget, ref["step_ms"], out["step_ms"], out["schedule"], out["solve_s"], ok))
        print("%s %d layers, budget %d: offsim plan %.15g (%s%s) | MIP %.15g %s %s, %.1f s; offsim runs the MIP plan: "
              "%.15g, peak %d, fits %s%s" % (
                  path, layers, budget, ref["step_ms"], ref["mode"], "" if ref["mode"] == "sync" else
                  " p%dk%d" % (ref["prefetch"], ref["inflight"]), out["step_ms"], out["schedule"], out["status"],
                  out["solve_s"], check["step_ms"], check["peak_device_bytes"], check["fits"],
                  "" if ok else "  <-- MISMATCH"), flush=True)
    print(json.dumps({"instances": a.optimum, "mismatches": bad, "max_rel_step_difference": worst,
                      "max_cbc_s": max(r[5] for r in rows), "work": work}, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
