"""`offsim check` on real Kineto traces (tests/data/kineto/, from HolisticTraceAnalysis): every
measured figure against the same trace read here with Python's gzip and json, independently of
offsim's C; every predicted figure against `offsim run`'s JSON for the same scenario and policy;
bad inputs are one line and exit 2.

Usage: check_test.py OFFSIM_BINARY SOURCE_DIR.  Standard library only.
"""

import csv
import gzip
import io
import json
import math
import os
import re
import sys

from clitest import Checks

OFFSIM, SOURCE = sys.argv[1], sys.argv[2]
DATA = os.path.join(SOURCE, "tests", "data", "kineto")
checks = Checks(OFFSIM, SOURCE)
check, offsim = checks.check, checks.offsim


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def expected(path):
    """The figures, per step when the trace has ProfilerSteps, from the trace itself."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    steps = [e["dur"] for e in events if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")]
    per = len(steps) or 1
    out = {"step_ms": sum(steps) / len(steps) / 1e3 if steps else None,
           "gpu_kernel_ms": sum(e["dur"] for e in events if e.get("cat") == "kernel") / 1e3 / per}
    for d, key in (("h2d", "HtoD"), ("d2h", "DtoH"), ("other", None)):
        copies = [e for e in events if e.get("cat") == "gpu_memcpy"
                  and (key in e["name"] if key else "HtoD" not in e["name"] and "DtoH" not in e["name"])]
        nbytes = sum(e["args"]["bytes"] for e in copies)
        seconds = sum(e["dur"] for e in copies) / 1e6
        out[d + "_copies"] = len(copies) / per
        out[d + "_bytes"] = nbytes / per
        out[d + "_ms"] = seconds * 1e3 / per
        out[d + "_gb_per_s"] = nbytes / seconds / 1e9 if seconds else None
    return out, len(steps)


def rows(text):
    return {r["quantity"]: r for r in csv.DictReader(io.StringIO(text))}


def value(text):
    return float(text) if text != "" else None


for name in ("sampled_rank-0.json.gz", "alexnet_trace.json.gz"):
    path = os.path.join(DATA, name)
    want, steps = expected(path)
    status, out, err = offsim("check", "--trace", path, "--format", "csv")
    check(status == 0, "%s: exit %d %s" % (name, status, err))
    got = rows(out)
    check(list(got) == list(want), "%s: rows %s" % (name, list(got)))
    for q, w in want.items():
        g = value(got[q]["measured"])
        check((g is None and w is None) or (g is not None and w is not None and close(g, w)),
              "%s %s: measured %s, the trace says %s" % (name, q, g, w))
        check(got[q]["predicted"] == "", "%s %s: a prediction without a scenario" % (name, q))
    status, table, err = offsim("check", "--trace", path)
    check(status == 0 and ("%u ProfilerStep" % steps) in table, "%s: table %s" % (name, table[:200]))

# With a scenario: the prediction is `offsim run`'s, the link rates the scenario's.
trace = os.path.join(DATA, "sampled_rank-0.json.gz")
for scenario, policy in (("scenarios/default.ini", None), ("scenarios/llama-3.1-8b.ini", "offload-async")):
    args = ["check", scenario, "--trace", trace, "--format", "csv"] + (["--policy", policy] if policy else [])
    status, out, err = offsim(*args)
    check(status == 0, "%s: exit %d %s" % (scenario, status, err))
    got = rows(out)
    status, run, err = offsim("run", scenario, "--format", "json", *(["--policy", policy] if policy else []))
    r = json.loads(run)
    predicted = {"step_ms": r["step_ms"], "gpu_kernel_ms": r["compute_ms"] + r["recompute_ms"] + r["optimizer_ms"],
                 "h2d_copies": r["h2d_copies"], "h2d_bytes": r["h2d_bytes"], "d2h_copies": r["d2h_copies"],
                 "d2h_bytes": r["d2h_bytes"]}
    for q, w in predicted.items():
        check(close(value(got[q]["predicted"]), w), "%s %s: predicted %s, run says %s" % (scenario, q, got[q]["predicted"], w))
    header = offsim("compare", scenario)[1].splitlines()[2]
    link = re.match(r"link: H2D ([\d.]+) GB/s, D2H ([\d.]+) GB/s", header)
    check(link and math.isclose(value(got["h2d_gb_per_s"]["predicted"]), float(link.group(1)), rel_tol=5e-3)
          and math.isclose(value(got["d2h_gb_per_s"]["predicted"]), float(link.group(2)), rel_tol=5e-3),
          "%s: link rates %s against '%s'" % (scenario, out, header))
    for q in ("h2d_ms", "d2h_ms", "other_copies", "other_gb_per_s"):
        check(got[q]["predicted"] == "", "%s %s: offsim predicts no such figure" % (scenario, q))

# Bad input: one line, exit 2.
readme = os.path.join(SOURCE, "README.md")
config = os.path.join(SOURCE, "scenarios", "models", "qwen2.5-0.5b.json")
for args, message in [
    (["check"], "offsim: check: --trace FILE is required"),
    (["check", "--trace", readme], "offsim: %s: not JSON" % readme),
    (["check", "--trace", config], "offsim: %s: traceEvents: missing" % config),
    (["check", "--trace", "/nonexistent.json"], "offsim: /nonexistent.json: cannot read the trace"),
    (["check", "--trace", trace, "--policy", "x"], "offsim: --policy: give the SCENARIO"),
    (["check", "scenarios/default.ini", "--trace", trace, "--policy", "x"], "offsim: --policy: no policy 'x'"),
    (["check", "--trace", trace, "--format", "json"], "offsim: --format: check prints table or csv"),
]:
    status, out, err = offsim(*args)
    check(status == 2 and err.startswith(message) and err.count("\n") == 1 and out == "", "%s: %d %s" % (args, status, err))

# README.md's example: the block after its marker is what its command prints.
checks.readme_example(open(readme).read(), "<!-- offsim-check-output -->")
checks.finish("check_test", "offsim check reads the real traces as Python does and predicts as offsim run")
