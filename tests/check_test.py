"""`offsim check` on real Kineto traces (tests/data/kineto/, from HolisticTraceAnalysis) and real
memory snapshots (tests/data/snapshot/): every measured figure against the same file read here
with Python's gzip, json and pickle, independently of offsim's C; every predicted figure against
`offsim run`'s JSON for the same scenario and policy; bad inputs are one line and exit 2.

Usage: check_test.py OFFSIM_BINARY SOURCE_DIR.  Standard library only.
"""

import csv
import datetime
import gzip
import hashlib
import io
import json
import math
import os
import pickle
import re
import sys
import tempfile

from clitest import Checks

OFFSIM, SOURCE = sys.argv[1], sys.argv[2]
DATA = os.path.join(SOURCE, "tests", "data", "kineto")
SNAPSHOTS = os.path.join(SOURCE, "tests", "data", "snapshot")
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

class Plain(pickle.Unpickler):
    """Python's own pickle, refusing every class: a snapshot is plain data."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s" % (module, name))


def snapshot_expected(data):
    """The figures `offsim check --snapshot` prints (sim/input/snapshot.h), from Python's reading."""
    s = Plain(io.BytesIO(data)).load()
    devices = {}
    for seg in s["segments"]:
        d = devices.setdefault(seg["device"], {"segments": 0, "reserved": 0, "allocated": 0, "events": []})
        d["segments"] += 1
        d["reserved"] += seg["total_size"]
        d["allocated"] += seg["allocated_size"]
    change = {"alloc": (1, 0), "free_completed": (-1, 0), "segment_alloc": (0, 1), "segment_map": (0, 1),
              "segment_free": (0, -1), "segment_unmap": (0, -1), "free_requested": (0, 0)}
    for dev, trace in enumerate(s["device_traces"]):
        if trace:
            d = devices.setdefault(dev, {"segments": 0, "reserved": 0, "allocated": 0, "events": []})
            for e in trace:
                a, r = change[e["action"]]
                d["events"].append((e["time_us"], a * e["size"], r * e["size"]))
    best = None
    for dev in sorted(devices):
        d = devices[dev]
        alloc = d["allocated"] - sum(e[1] for e in d["events"])
        res = d["reserved"] - sum(e[2] for e in d["events"])
        d["start"], d["levels"], peak_a, peak_r = alloc, [], alloc, res
        for _, a, r in d["events"]:
            alloc, res = alloc + a, res + r
            assert alloc >= 0 and res >= 0
            d["levels"].append(alloc)
            peak_a, peak_r = max(peak_a, alloc), max(peak_r, res)
        d["peak_allocated"], d["peak_reserved"] = peak_a, peak_r
        if best is None or peak_a > devices[best]["peak_allocated"]:
            best = dev
    d = devices[best]
    out = {"peak_allocated_bytes": d["peak_allocated"], "peak_reserved_bytes": d["peak_reserved"],
           "allocated_at_dump_bytes": d["allocated"], "reserved_at_dump_bytes": d["reserved"]}
    opened, ranges = [], []
    for a in s.get("external_annotations", []):
        if a["stage"] == "START":
            opened.append((a["name"], a["device"], a["time_us"]))
            continue
        for j in range(len(opened) - 1, -1, -1):
            name, dev, t = opened[j]
            if name == a["name"] and dev == a["device"]:
                del opened[j]
                if dev == best:
                    ranges.append((t, name, a["time_us"]))
                break
    seen = {}
    for start, name, end in sorted(ranges, key=lambda x: x[0]):
        times = [e[0] for e in d["events"]]
        before = [i for i, t in enumerate(times) if t <= start]
        inside = [i for i, t in enumerate(times) if start < t <= end]
        level = d["levels"][before[-1]] if before else d["start"]
        seen[name] = seen.get(name, 0) + 1
        key = "range %s#%d " % (name, seen[name])
        out[key + "ms"] = (end - start) / 1e3  # microseconds
        out[key + "start_allocated_bytes"] = level
        out[key + "peak_allocated_bytes"] = max([level] + [d["levels"][i] for i in inside])
        out[key + "end_allocated_bytes"] = d["levels"][inside[-1]] if inside else level
    return out, best, len(d["events"])


def git_blob(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# The committed snapshots are the public files, byte for byte (tests/data/snapshot/README.md).
blobs = {"cs336_transformer_step.pickle.gz": "a80ccc7b5949516f035fe83efcfd2f51aae3308b",
         "decomfl_training.pickle.gz": "2f29ac4ec93e1bd28664620602d5db47eb85013c"}
snapshot_bytes = {}
for name, blob in blobs.items():
    path = os.path.join(SNAPSHOTS, name)
    with gzip.open(path, "rb") as f:
        data = snapshot_bytes[name] = f.read()
    check(git_blob(data) == blob, "%s: not the public file (blob %s)" % (name, git_blob(data)))
    want, device, events = snapshot_expected(data)
    status, out, err = offsim("check", "--snapshot", path, "--format", "csv")
    check(status == 0, "%s: exit %d %s" % (name, status, err))
    got = rows(out)
    check(list(got) == list(want), "%s: rows %s, Python reads %s" % (name, list(got), list(want)))
    for q, w in want.items():
        g = value(got[q]["measured"]) if q in got else None
        check(g is not None and close(g, w), "%s %s: measured %s, the snapshot says %s" % (name, q, g, w))
        check(q not in got or got[q]["predicted"] == "", "%s %s: a prediction without a scenario" % (name, q))
    # What must hold of any real step: allocated never above reserved, the peak at least the dump.
    check(want["peak_allocated_bytes"] <= want["peak_reserved_bytes"]
          and want["allocated_at_dump_bytes"] <= want["peak_allocated_bytes"], "%s: %s" % (name, want))
    status, table, err = offsim("check", "--snapshot", path)
    check(status == 0 and ("device %d of" % device) in table and ("%d trace events" % events) in table,
          "%s: table %s" % (name, table[:300]))
    check(("no record_function ranges" in table) == (not any(k.startswith("range ") for k in want)),
          "%s: what the table says of ranges: %s" % (name, table[:300]))
# The CS336 step freed its activations before the dump: the trace's peak is above the dump's level.
cs336, _, _ = snapshot_expected(snapshot_bytes["cs336_transformer_step.pickle.gz"])
check(cs336["peak_allocated_bytes"] > cs336["allocated_at_dump_bytes"], "cs336: %s" % cs336)

# The snapshot with a scenario: peaks predicted as `offsim run` predicts them; with --trace both.
snapshot = os.path.join(SNAPSHOTS, "cs336_transformer_step.pickle.gz")
status, out, err = offsim("check", "scenarios/tiny.ini", "--snapshot", snapshot, "--trace", trace, "--format", "csv")
check(status == 0, "snapshot with scenario: exit %d %s" % (status, err))
got = rows(out)
r = json.loads(offsim("run", "scenarios/tiny.ini", "--format", "json")[1])
check(close(value(got["peak_allocated_bytes"]["predicted"]), r["peak_device_bytes"])
      and close(value(got["peak_reserved_bytes"]["predicted"]), r["peak_reserved_bytes"])
      and "step_ms" in got, "snapshot predictions %s against run's %s" % (out, run[:200]))

# Bad snapshots: one line naming the file and what was expected, exit 2; truncated real files at
# many offsets, a flipped opcode, pickles of classes, and pickles of the wrong shape.
tmp = tempfile.mkdtemp(prefix="check_test.")
real = snapshot_bytes["decomfl_training.pickle.gz"]


def write(name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


bad = [(write("cut%d.pickle" % n, real[:n]), "truncated") for n in (1, 2, 11, 12, 1000, len(real) // 2, len(real) - 1)]
bad += [
    (write("global.pickle", pickle.dumps({"segments": [], "x": datetime.date(2020, 1, 1)}, protocol=2)),
     "opcode 0x63 GLOBAL is not read here"),
    (write("stack_global.pickle", pickle.dumps({"segments": [], "x": datetime.date(2020, 1, 1)}, protocol=4)),
     "opcode 0x93 STACK_GLOBAL is not read here"),
    (write("set.pickle", pickle.dumps({"segments": {1, 2}}, protocol=4)), "EMPTY_SET is not read here"),
    (write("bytes.pickle", pickle.dumps({"segments": b"x"}, protocol=3)), "SHORT_BINBYTES is not read here"),
    (write("proto0.pickle", pickle.dumps({"segments": []}, protocol=0)), "not a pickle of protocol 2 or later"),
    (write("list.pickle", pickle.dumps([1, 2], protocol=4)), "snapshot: expected a dict"),
    (write("nosegments.pickle", pickle.dumps({"device_traces": []}, protocol=4)), "snapshot.segments: expected a list, got nothing"),
    (write("notraces.pickle", pickle.dumps({"segments": []}, protocol=4)), "snapshot.device_traces: expected a list"),
    (write("badaction.pickle", pickle.dumps({"segments": [], "device_traces": [[{"action": "grow", "size": 1, "time_us": 1}]]}, protocol=4)),
     "device_traces[0][0].action: 'grow' (expected alloc"),
    (write("negative.pickle", pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "size": 1, "time_us": 1}]]}, protocol=4)),
     "allocated bytes fall below 0 before event 0"),
    (write("after.pickle", pickle.dumps({"segments": [], "device_traces": []}, protocol=4) + b"."), "1 bytes after the end"),
    (write("flipped.pickle", real.replace(b"\x94", b"R", 1)), "opcode 0x52 REDUCE is not read here"),
    (os.path.join(DATA, "alexnet_trace.json.gz"), "not a pickle of protocol 2 or later"),
    ("/nonexistent.pickle", "/nonexistent.pickle: cannot read the snapshot"),
]
for path, message in bad:
    status, out, err = offsim("check", "--snapshot", path)
    check(status == 2 and err.startswith("offsim: %s: " % path) and message in err and err.count("\n") == 1
          and out == "", "%s: %d %s" % (os.path.basename(path), status, err))
for name in os.listdir(tmp):
    os.unlink(os.path.join(tmp, name))
os.rmdir(tmp)

# Bad input: one line, exit 2.
readme = os.path.join(SOURCE, "README.md")
config = os.path.join(SOURCE, "scenarios", "models", "qwen2.5-0.5b.json")
for args, message in [
    (["check"], "offsim: check: --trace FILE or --snapshot FILE is required"),
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
checks.readme_example(open(readme).read(), "<!-- offsim-check-snapshot-output -->")
checks.finish("check_test", "offsim check reads the real traces as Python does and predicts as offsim run")
