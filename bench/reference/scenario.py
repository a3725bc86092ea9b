"""A reader of the [model] scenarios the MIP reference supports, and the units it shares with gen.py.

It reads what offsim reads for an explicit-layer workload ([model] with [layer.N] overrides), the
[link] and [device] figures the engine uses, and refuses everything else with a clear error:
[transformer] and [trace] workloads, tensor flags (:keep, :recompute=, :refs=), calibrated
tables, a bidirectional cap below the sum of both directions, compute_slowdown other than 0.

Units follow sim/base/units.c exactly: a size is the whole part times the unit plus the
fraction times the unit rounded to the nearest byte (llround: half away from zero); a rate and a
time are the decimal (strtod of the digits) times the unit.
"""

import math
import os
import re

SIZE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
              "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}

_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(.*?)\s*$")


class ScenarioError(Exception):
    pass


def _split(text, what):
    m = _NUMBER.match(text)
    if not m:
        raise ScenarioError("expected %s, got '%s' (a plain decimal, no sign or exponent)" % (what, text))
    return m.group(1), m.group(2)


def parse_size(text):
    digits, unit = _split(text, "a size")
    if unit == "" and float(digits) == 0:
        return 0
    if unit not in SIZE_UNITS:
        raise ScenarioError("expected a size with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got '%s'" % text)
    whole, _, frac = digits.partition(".")
    scale = SIZE_UNITS[unit]
    fraction = float("0." + frac) if frac else 0.0
    if scale == 1 and fraction != 0:
        raise ScenarioError("a size in B is a whole number of bytes, got '%s'" % text)
    return int(whole or "0") * scale + int(math.floor(fraction * float(scale) + 0.5))


def parse_rate(text):
    digits, unit = _split(text, "a rate")
    if not unit.endswith("/s") or unit[:-2] not in SIZE_UNITS:
        raise ScenarioError("expected a rate with a unit such as GB/s or GiB/s, got '%s'" % text)
    rate = float(digits) * float(SIZE_UNITS[unit[:-2]])
    if not rate > 0:
        raise ScenarioError("expected a positive rate, got '%s'" % text)
    return rate


def parse_time(text):
    digits, unit = _split(text, "a time")
    if unit == "" and float(digits) == 0:
        return 0.0
    if unit not in TIME_UNITS:
        raise ScenarioError("expected a time with a unit (s, ms, us, ns), got '%s'" % text)
    return float(digits) * TIME_UNITS[unit]


def parse_plain(text):
    digits, unit = _split(text, "a number")
    if unit:
        raise ScenarioError("expected a plain number, got '%s'" % text)
    return float(digits)


def parse_tensors(text):
    """`name:size, ...` with no flags; an empty value is no tensor."""
    out = []
    if text.strip() == "":
        return out
    names = set()
    for item in text.split(","):
        parts = [p.strip() for p in item.split(":")]
        if len(parts) != 2:
            raise ScenarioError("tensor '%s': only name:size is supported (no :keep, :recompute=, :refs= flags)"
                                % item.strip())
        if parts[0] in names:
            raise ScenarioError("tensor name '%s' given twice" % parts[0])
        names.add(parts[0])
        out.append((parts[0], parse_size(parts[1])))
    return out


def read_keyfile(path, depth=0):
    """Groups of one file with its includes merged in (later includes win, the file over them)."""
    if depth > 64:
        raise ScenarioError("%s: includes nest deeper than 64" % path)
    groups, order, group = {}, [], None
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if line == "" or line.startswith("#"):
                continue
            if line.startswith("["):
                if not line.endswith("]"):
                    raise ScenarioError("%s:%d: bad group line" % (path, lineno))
                group = line[1:-1]
                if group in groups:
                    raise ScenarioError("%s:%d: group [%s] given twice" % (path, lineno, group))
                groups[group] = {}
                order.append(group)
                continue
            if group is None or "=" not in line:
                raise ScenarioError("%s:%d: expected key = value inside a group" % (path, lineno))
            key, _, value = line.partition("=")
            groups[group][key.strip()] = value.strip()
    merged = {}
    inc = groups.get("scenario", {}).get("include")
    if inc:
        for name in [s.strip() for s in inc.split(",") if s.strip()]:
            sub = read_keyfile(os.path.join(os.path.dirname(path), name), depth + 1)
            for g, kv in sub.items():
                merged.setdefault(g, {}).update(kv)
    for g in order:
        merged.setdefault(g, {}).update(groups[g])
    return merged


LAYER_KEYS = ("forward", "backward", "input", "tensors", "workspace")
MODEL_KEYS = ("layers", "static") + LAYER_KEYS
LINK_KEYS = ("h2d_bandwidth", "d2h_bandwidth", "bidir_bandwidth", "latency", "pageable_factor",
             "compute_slowdown", "host_alloc")


def load(path):
    """The scenario as plain numbers: seconds, bytes, bytes per second."""
    g = read_keyfile(path)
    for name in g:
        if name in ("transformer", "trace"):
            raise ScenarioError("%s: [%s] workloads are not supported: only explicit [model] layers" % (path, name))
        if name not in ("scenario", "device", "link", "model", "calibration") and not name.startswith("layer.") \
                and not name.startswith("policy."):
            raise ScenarioError("%s: unknown group [%s]" % (path, name))
    if "model" not in g:
        raise ScenarioError("%s: no [model] group" % path)
    model, link, device = g["model"], g.get("link", {}), g.get("device", {})
    for k in model:
        if k not in MODEL_KEYS:
            raise ScenarioError("%s: [model] %s is not supported" % (path, k))
    for k in link:
        if k not in LINK_KEYS:
            raise ScenarioError("%s: [link] %s is not supported (calibrated tables are not modelled)" % (path, k))
    for k in ("layers", "forward", "input", "tensors"):
        if k not in model:
            raise ScenarioError("%s: [model] %s is required" % (path, k))
    if "memory" not in device:
        raise ScenarioError("%s: [device] memory is required" % path)
    for k in ("h2d_bandwidth", "d2h_bandwidth"):
        if k not in link:
            raise ScenarioError("%s: [link] %s is required" % (path, k))
    n = int(model["layers"])
    if not 1 <= n <= 100000:
        raise ScenarioError("%s: [model] layers must be 1 to 100000" % path)
    layers = []
    for i in range(n):
        over = g.get("layer.%d" % i, {})
        for k in over:
            if k not in LAYER_KEYS:
                raise ScenarioError("%s: [layer.%d] %s is not a layer key" % (path, i, k))
        val = lambda k: over.get(k, model.get(k))
        fwd = parse_time(val("forward"))
        bwd = parse_time(val("backward")) if val("backward") is not None else 2 * fwd
        layers.append({
            "forward": fwd, "backward": bwd,
            "input": parse_size(val("input")),
            "tensors": parse_tensors(val("tensors")),
            "workspace": parse_size(val("workspace")) if val("workspace") is not None else 0,
        })
    for name in g:
        if name.startswith("layer."):
            idx = name[len("layer."):]
            if not idx.isdigit() or str(int(idx)) != idx or int(idx) >= n:
                raise ScenarioError("%s: [%s] is not a layer of the model" % (path, name))
    h2d, d2h = parse_rate(link["h2d_bandwidth"]), parse_rate(link["d2h_bandwidth"])
    if "bidir_bandwidth" in link and parse_rate(link["bidir_bandwidth"]) < h2d + d2h:
        raise ScenarioError("%s: [link] bidir_bandwidth below h2d + d2h: the shared cap is not modelled" % path)
    slowdown = parse_plain(link["compute_slowdown"]) if "compute_slowdown" in link else 0.0
    if slowdown != 0:
        raise ScenarioError("%s: [link] compute_slowdown = %s: only 0 is modelled (max-plus engine)"
                            % (path, link["compute_slowdown"]))
    return {
        "path": path,
        "name": g.get("scenario", {}).get("name", os.path.basename(path)[:-4]),
        "n": n, "layers": layers,
        "static": parse_size(model["static"]) if "static" in model else 0,
        "memory": parse_size(device["memory"]),
        "h2d_bandwidth": h2d, "d2h_bandwidth": d2h,
        "latency": parse_time(link["latency"]) if "latency" in link else 0.0,
    }
