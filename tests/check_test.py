"""`offsim check` on real Kineto traces (from HolisticTraceAnalysis) and real memory snapshots:
every measured figure against the same file read here with Python's gzip, json and pickle,
independently of offsim's C; every predicted figure against `offsim run`'s JSON for the same
scenario and policy; bad inputs are one line and exit 2.

The real files are not in the repository: they are read from $OFFSIM_REAL_DATA/kineto/ and
/snapshot/, else from data/ in the shared/ directory beside the checkout (clitest.real_data;
tests/data/kineto/README.md and tests/data/snapshot/README.md say what to place there).  What needs a missing one is skipped and
said; everything else (synthetic format tests, Python-written pickles, refusals, bad input) runs,
and then the test exits 77 (CTest: skipped) if it passed, as check_readme.sh does without gnuplot.

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

from clitest import Checks, real_data

OFFSIM, SOURCE = sys.argv[1], sys.argv[2]
REAL = real_data(SOURCE)
DATA = os.path.join(REAL, "kineto")
SNAPSHOTS = os.path.join(REAL, "snapshot")
checks = Checks(OFFSIM, SOURCE)
check, offsim = checks.check, checks.offsim
skipped = []


def have(what, *paths):
    """Whether every file of `paths` is there; if one is not, `what` is skipped, and said."""
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        skipped.append(what)
        print("check_test: skipped %s: %s absent" % (what, ", ".join(missing)))
    return not missing


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
    if not have("the measured figures of " + name, path):
        continue
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
    # Neither HolisticTraceAnalysis trace has nn.Module ranges: said, not guessed.
    check("no layer ranges in trace" in table and not any(q.startswith("layer ") for q in got),
          "%s: layer ranges %s" % (name, table[:300]))

# With a scenario: the prediction is `offsim run`'s, the link rates the scenario's.
trace = os.path.join(DATA, "sampled_rank-0.json.gz")
if have("the predictions against offsim run", trace):
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


# The real snapshots are the public files, byte for byte (tests/data/snapshot/README.md).
blobs = {"cs336_transformer_step.pickle.gz": "a80ccc7b5949516f035fe83efcfd2f51aae3308b",
         "decomfl_training.pickle.gz": "2f29ac4ec93e1bd28664620602d5db47eb85013c"}
snapshot_bytes = {}
for name, blob in blobs.items():
    path = os.path.join(SNAPSHOTS, name)
    if not have("the measured figures of " + name, path):
        continue
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
if "cs336_transformer_step.pickle.gz" in snapshot_bytes:
    cs336, _, _ = snapshot_expected(snapshot_bytes["cs336_transformer_step.pickle.gz"])
    check(cs336["peak_allocated_bytes"] > cs336["allocated_at_dump_bytes"], "cs336: %s" % cs336)

# The snapshot with a scenario: peaks predicted as `offsim run` predicts them; with --trace both.
snapshot = os.path.join(SNAPSHOTS, "cs336_transformer_step.pickle.gz")
if have("the snapshot with a scenario and a trace", snapshot, trace):
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
real = snapshot_bytes.get("decomfl_training.pickle.gz")
alexnet = os.path.join(DATA, "alexnet_trace.json.gz")


def write(name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


bad = []
if have("the real snapshot cut and flipped", os.path.join(SNAPSHOTS, "decomfl_training.pickle.gz")):
    bad += [(write("cut%d.pickle" % n, real[:n]), "truncated") for n in (1, 2, 11, 12, 1000, len(real) // 2, len(real) - 1)]
    bad += [(write("flipped.pickle", real.replace(b"\x94", b"R", 1)), "opcode 0x52 REDUCE is not read here")]
if have("a real trace given as a snapshot", alexnet):
    bad += [(alexnet, "not a pickle of protocol 2 or later")]
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
    ("/nonexistent.pickle", "/nonexistent.pickle: cannot read the snapshot"),
]
# PyTorch 2.0 wrote trace entries without time_us: the peaks still, by hand (a synthetic format
# test): 1 MiB allocated at the dump after +2, -2, +1 MiB, so 0 before and 2 MiB at the peak.
MiB = 1 << 20
untimed = write("untimed.pickle", pickle.dumps({
    "segments": [{"device": 0, "total_size": 4 * MiB, "allocated_size": MiB}],
    "device_traces": [[{"action": "alloc", "size": 2 * MiB}, {"action": "free_requested", "size": 2 * MiB},
                       {"action": "free_completed", "size": 2 * MiB}, {"action": "alloc", "size": MiB}]]}, protocol=4))
status, out, err = offsim("check", "--snapshot", untimed, "--format", "csv")
got = rows(out)
check(status == 0 and value(got["peak_allocated_bytes"]["measured"]) == 2 * MiB
      and value(got["peak_reserved_bytes"]["measured"]) == 4 * MiB, "untimed: %d %s %s" % (status, out, err))
check("4 trace events without time_us" in offsim("check", "--snapshot", untimed)[1], "untimed: header")
for path, message in bad:
    status, out, err = offsim("check", "--snapshot", path)
    check(status == 2 and err.startswith("offsim: %s: " % path) and message in err and err.count("\n") == 1
          and out == "", "%s: %d %s" % (os.path.basename(path), status, err))
for name in os.listdir(tmp):
    os.unlink(os.path.join(tmp, name))
os.rmdir(tmp)

def gemm_points(events):
    """Per (dtype, m, n, k): FLOPs and kernel seconds of the GEMM ops with shapes, their kernels
    found by launch time inside the op on its thread (sim/input/kineto.h), read here independently."""
    kernels = {}
    for e in events:
        if e.get("cat") == "kernel":
            c = e["args"]["correlation"]
            kernels[c] = kernels.get(c, 0) + e["dur"]
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})]
    dtypes = {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16"}
    points = {}
    for op in events:
        if op.get("cat") != "cpu_op" or op["name"] not in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"):
            continue
        dims, types = op["args"].get("Input Dims"), op["args"].get("Input type")
        if not dims:
            continue
        first = 1 if op["name"] in ("aten::addmm", "aten::baddbmm") else 0
        a, b = dims[first], dims[first + 1]
        if op["name"] in ("aten::bmm", "aten::baddbmm"):
            batch, (m, k), n = a[0], a[1:], b[2]
        else:
            batch, (m, k), n = 1, a, b[1]
        key = (dtypes[types[first]], m, n, k)
        seconds = sum(kernels.get(l["args"]["correlation"], 0) for l in launches
                      if (l["pid"], l["tid"]) == (op["pid"], op["tid"]) and op["ts"] <= l["ts"] <= op["ts"] + op["dur"]) / 1e6
        flops, secs = points.get(key, (0, 0))
        points[key] = (flops + 2 * m * n * k * batch, secs + seconds)
    return {key: flops / secs / 1e12 for key, (flops, secs) in points.items() if secs > 0}


def profile_keys(path):
    """The keys of a written profile, by group, without comments."""
    groups, group = {}, None
    for line in open(path):
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            group = groups.setdefault(line[1:-1], {})
        elif line and not line.startswith("#"):
            key, val = line.split(" = ", 1)
            group[key] = val
    return groups


def number_of(text, unit):
    check(text.endswith(unit) and "e" not in text[:-len(unit)], "%s: expected a plain number in %s" % (text, unit))
    return float(text[:-len(unit)])


# --write-profile: every key from the trace's events as Python reads them; none that is not derivable.
tmp = tempfile.mkdtemp(prefix="check_profile.")
for name in ("sampled_rank-0.json.gz", "alexnet_trace.json.gz"):
    path = os.path.join(DATA, name)
    if not have("--write-profile from " + name, path):
        continue
    out_path = os.path.join(tmp, name + ".ini")
    status, out, err = offsim("check", "--trace", path, "--write-profile", out_path)
    check(status == 0 and os.path.exists(out_path), "%s: --write-profile exit %d %s" % (name, status, err))
    with gzip.open(path, "rt") as f:
        trace_json = json.load(f)
    events = trace_json["traceEvents"]
    got = profile_keys(out_path)
    device, link = got.get("device", {}), got.get("link", {})
    props = {p["id"]: p for p in trace_json.get("deviceProperties", [])}
    kernel_device = next((e["args"]["device"] for e in events if e.get("cat") == "kernel"), 0)
    if kernel_device in props:
        check(device.get("memory") == "%dB" % props[kernel_device]["totalGlobalMem"]
              and device.get("sm_count") == str(props[kernel_device]["numSms"]), "%s: device %s" % (name, device))
    else:
        check("memory" not in device and "sm_count" not in device, "%s: memory without deviceProperties" % name)
    points = gemm_points(events)
    if points:
        table = {}
        for item in device["gemm_table"].split(", "):
            dtype, shape, rate = item.split(":")
            m, n, k = map(int, shape.split("x"))
            table[(dtype, m, n, k)] = number_of(rate, "TFLOPS")
        check(set(table) <= set(points) and len(table) == min(len(points), 128), "%s: gemm_table shapes" % name)
        for key, rate in table.items():
            check(math.isclose(rate, points[key], rel_tol=1e-5), "%s %s: %s TFLOPS, Python %s" % (name, key, rate, points[key]))
        best = max(r for (dt, *_), r in points.items() if dt == "fp32")
        check(math.isclose(float(device["matmul_tflops_fp32"]), best, rel_tol=1e-5), "%s: best %s" % (name, best))
    else:
        check("gemm_table" not in device and not any(k.startswith("matmul_tflops") for k in device),
              "%s: GEMM keys without shapes: %s" % (name, device))
    dtod = [e for e in events if e.get("cat") == "gpu_memcpy" and "DtoD" in e["name"] and e["args"]["bytes"] >= 1 << 20]
    if dtod:
        want = 2 * sum(e["args"]["bytes"] for e in dtod) / (sum(e["dur"] for e in dtod) / 1e6) / 1e9
        check(math.isclose(number_of(device["hbm_bandwidth"], "GB/s"), want, rel_tol=1e-5), "%s: hbm %s" % (name, want))
    else:
        check("hbm_bandwidth" not in device, "%s: hbm_bandwidth without DtoD copies" % name)
    for d, key in (("h2d", "HtoD (Pinned"), ("d2h", "DtoH (Device -> Pinned")):
        pinned = [e for e in events if e.get("cat") == "gpu_memcpy" and key in e["name"]]
        if pinned:
            want = sum(e["args"]["bytes"] for e in pinned) / (sum(e["dur"] for e in pinned) / 1e6) / 1e9
            check(math.isclose(number_of(link[d + "_bandwidth"], "GB/s"), want, rel_tol=1e-5), "%s: %s %s" % (name, d, want))
            sizes = sorted({e["args"]["bytes"] for e in pinned})
            check([int(p.split(":")[0][:-1]) for p in link[d + "_table"].split(", ")] == sizes[-64:], "%s: %s_table" % (name, d))
        else:
            check(d + "_bandwidth" not in link and d + "_table" not in link, "%s: %s without pinned copies" % (name, d))
    # A scenario takes it after a full profile: its keys win.
    scenario = os.path.join(tmp, "with_profile.ini")
    with open(scenario, "w") as f:
        f.write("[scenario]\ninclude = %s, %s\n[model]\nlayers = 2\nforward = 1ms\ninput = 1MiB\ntensors = a:1MiB\n"
                "static = 1GiB\n[policy.resident]\nkind = resident\n"
                % (os.path.abspath(os.path.join(SOURCE, "scenarios", "profiles", "h100-sxm-pcie-gen5.ini")), out_path))
    status, shown, err = offsim("compare", scenario)
    check(status == 0, "%s: the written profile does not load: %s" % (name, err))
    if "h2d_bandwidth" in link:
        check("H2D %.1f GB/s" % number_of(link["h2d_bandwidth"], "GB/s") in shown, "%s: %s" % (name, shown[:300]))
# What each trace lacks is said: sampled has no deviceProperties, alexnet no shapes and no pinned copies.
if have("what each written profile says it lacks", trace, alexnet):
    sampled_head = open(os.path.join(tmp, "sampled_rank-0.json.gz.ini")).read()
    alexnet_head = open(os.path.join(tmp, "alexnet_trace.json.gz.ini")).read()
    check("#   memory, sm_count: the trace has no deviceProperties" in sampled_head, sampled_head[:600])
    check("#   gemm_table, matmul_tflops_*: the GEMM ops have no recorded shapes" in alexnet_head
          and "#   h2d_bandwidth, h2d_table: no pinned host-to-device copies (16 pageable ones" in alexnet_head, alexnet_head[:900])

# Per-layer times need nn.Module ranges, which no public trace found has: a SYNTHETIC FORMAT TEST,
# not a measurement.  Two DecoderLayer ranges (with a Linear range inside, not a layer) on the
# main thread, their kernels launched inside them, and each layer's backward op on the autograd
# thread carrying the sequence number of a forward op inside the layer.
def synthetic_layer_trace():
    ev, corr = [], [0]

    def launch(tid, ts, kernel_us):
        corr[0] += 1
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": ts,
                   "dur": 1, "args": {"correlation": corr[0]}})
        ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts + 5, "dur": kernel_us,
                   "args": {"correlation": corr[0], "device": 0}})

    ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0, "dur": 1000})
    want = {}
    for layer, (fwd, bwd) in enumerate(((30, 70), (40, 90))):
        start = 100 + 200 * layer
        ev.append({"ph": "X", "cat": "python_function", "name": "nn.Module: DecoderLayer_%d" % layer, "pid": 1,
                   "tid": 1, "ts": start, "dur": 100})
        ev.append({"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_%d" % layer, "pid": 1, "tid": 1,
                   "ts": start + 10, "dur": 20})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": start + 11, "dur": 10,
                   "args": {"Sequence number": 50 + layer, "Fwd thread id": 0}})
        launch(1, start + 12, fwd - 10)
        launch(1, start + 60, 10)
        ev.append({"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 1,
                   "tid": 2, "ts": 700 - 100 * layer, "dur": 50, "args": {"Sequence number": 50 + layer}})
        launch(2, 710 - 100 * layer, bwd)
        want[layer] = (fwd / 1e3, bwd / 1e3)
    launch(1, 5, 1000)  # outside every layer
    return {"traceEvents": ev}, want


synthetic, want_layers = synthetic_layer_trace()
synthetic_path = os.path.join(tmp, "synthetic_format_test_layers.json")
with open(synthetic_path, "w") as f:
    json.dump(synthetic, f)
status, out, err = offsim("check", "tests/data/snapshot/cs336_transformer_step.ini", "--trace", synthetic_path, "--format", "csv")
got = rows(out)
check(status == 0, "synthetic layers: %d %s" % (status, err))
r = json.loads(offsim("run", "tests/data/snapshot/cs336_transformer_step.ini", "--format", "json")[1])
for layer, (fwd, bwd) in want_layers.items():
    for what, w in (("forward", fwd), ("backward", bwd)):
        q = "layer %d %s_ms" % (layer, what)
        check(q in got and close(value(got[q]["measured"]), w), "synthetic %s: %s, built %s" % (q, got.get(q), w))
        check(q in got and value(got[q]["predicted"]) > 0, "synthetic %s: no prediction %s" % (q, got.get(q)))
check(not any(q.startswith("layer 2 ") for q in got), "synthetic: a layer from the Linear ranges: %s" % list(got))
table = offsim("check", "--trace", synthetic_path)[1]
check("2 layers (nn.Module: DecoderLayer ranges)" in table, "synthetic table: %s" % table[:300])
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
    (["check", "--trace", trace, "--format", "json"], "offsim: --format: expected table or csv, got 'json'"),
    (["check", "--snapshot", snapshot, "--write-profile", "/tmp/x.ini"], "offsim: --write-profile: give the --trace"),
] + ([
    # These two read the trace before they fail.
    (["check", "scenarios/default.ini", "--trace", trace, "--policy", "x"], "offsim: --policy: no policy 'x'"),
    (["check", "--trace", trace, "--write-profile", "/nonexistent/dir/p.ini"], "offsim: --write-profile"),
] if have("the bad options that fail after reading the trace", trace) else []):
    status, out, err = offsim(*args)
    check(status == 2 and err.startswith(message) and err.count("\n") == 1 and out == "", "%s: %d %s" % (args, status, err))

# README.md's examples: the block after each marker is what its command prints.  The README names
# the real files as tests/data/kineto/NAME and tests/data/snapshot/NAME (where its text says to put
# them to run the commands as written); here they run on the files in REAL.
readme_text = open(readme).read()
named = {"tests/data/kineto/" + n: os.path.join(DATA, n) for n in ("sampled_rank-0.json.gz", "alexnet_trace.json.gz")}
named.update({"tests/data/snapshot/" + n: os.path.join(SNAPSHOTS, n) for n in blobs})
if have("README's offsim check example", trace):
    checks.readme_example(readme_text, "<!-- offsim-check-output -->", named)
if have("README's offsim check --snapshot example", snapshot):
    checks.readme_example(readme_text, "<!-- offsim-check-snapshot-output -->", named)
# The profile README shows is the file its command writes.
if have("README's offsim check --write-profile example", alexnet):
    shown = readme_text.split("<!-- offsim-check-profile-output -->\n```\n", 1)[1].split("```\n", 1)[0]
    command = readme_text.split("<!-- offsim-check-profile-output -->", 1)[0].rsplit("./build/cli/offsim ", 1)[1].split("\n", 1)[0]
    args = [named.get(a, a) for a in command.split()]
    with tempfile.TemporaryDirectory() as d:
        args[args.index("--write-profile") + 1] = os.path.join(d, "p.ini")
        status, out, err = offsim(*args)
        written = open(os.path.join(d, "p.ini")).read() if status == 0 else err
    for n, path in named.items():
        written = written.replace(path, n)
    check(written == shown, "README's profile differs from what '%s' writes: %s" % (command, written))
if skipped and not checks.failures:
    print("check_test: every check that needs no real file passed; skipped for want of the real files in %s "
          "(tests/data/kineto/README.md, tests/data/snapshot/README.md): %s" % (REAL, "; ".join(skipped)))
    sys.exit(77)
checks.finish("check_test", "offsim check reads the real traces as Python does and predicts as offsim run")
