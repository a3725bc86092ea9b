#!/usr/bin/env python3
"""Measured against predicted: ground_truth.py's JSON beside offsim's.

Each pair is a ground_truth.py result and `offsim compare --format json` on
the scenario it wrote; policies are joined by name (resident, sync, async,
checkpoint).  Prints the D2H bytes each way measured and predicted, then,
last, per workload and policy, the step time (measured median) and the peak
device memory (measured peak allocated) against the prediction, with the
error of the prediction in percent, (predicted - measured) / measured.
Exits 1 after the tables when a way's loss or gradients differ from
resident's.  Standard library only.

Usage: compare_table.py GROUND_TRUTH.json OFFSIM.json [GROUND_TRUTH.json OFFSIM.json ...]
"""
import json
import sys


def size(b):
    if b is None:
        return "n/a"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b} B"


def error(measured, predicted):
    if measured is None or predicted is None or measured == 0:
        return "n/a"
    return f"{100.0 * (predicted - measured) / measured:+.1f}%"


def workload(gt):
    c = gt["config"]
    return f"{gt['preset']} {c['batch']}x{c['seq']} {gt['dtype']}"


def rows(pairs):
    for gt, pred in pairs:
        predicted = {r["policy"]: r for r in pred["results"]}
        for name, m in gt["ways"].items():
            p = predicted.get(name)
            if p is None:
                raise SystemExit(f"compare_table.py: offsim has no policy '{name}' for {gt['preset']}")
            yield workload(gt), name, m, p


def table(header, lines):
    widths = [max(len(str(row[i])) for row in [header] + lines) for i in range(len(header))]
    out = []
    for row in [header] + lines:
        cells = [str(v).ljust(w) if i < 2 else str(v).rjust(w) for i, (v, w) in enumerate(zip(row, widths))]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    pairs = []
    for i in range(0, len(argv), 2):
        with open(argv[i]) as f, open(argv[i + 1]) as g:
            pairs.append((json.load(f), json.load(g)))
    all_rows = list(rows(pairs))

    if not all(gt["measurement"] for gt, _ in pairs):
        print("DRY RUN: the 'measured' columns come from a CPU smoke run of a tiny model (ground_truth.py "
              "--device cpu):\nthey exercise the pipeline and are NOT a measurement; peak memory is not "
              "measured on CPU.\n")
    for gt, _ in pairs:
        print(f"{workload(gt)}: {gt['device_name']}, torch {gt['torch']}, median of {gt['repeats']} steps "
              f"after {gt['warmup']} warm-up")
    print()

    transfers = [(w, n, size(m["d2h_bytes"]), size(p["d2h_bytes"]), error(m["d2h_bytes"] or None, p["d2h_bytes"]),
                  f"{m['d2h_tensors']}", f"{p['d2h_copies']}", "yes" if m["matches_resident"] else "NO")
                 for w, n, m, p in all_rows]
    print(table(("workload", "policy", "D2H meas", "D2H pred", "error", "tensors", "copies", "grads ok"),
                transfers))
    print()

    lines = [(w, n, f"{m['step_ms_median']:.2f}", f"{m['step_ms_p95']:.2f}", f"{p['step_ms']:.2f}",
              error(m["step_ms_median"], p["step_ms"]), size(m["peak_allocated_bytes"]),
              size(p["peak_device_bytes"]), error(m["peak_allocated_bytes"], p["peak_device_bytes"]))
             for w, n, m, p in all_rows]
    print(table(("workload", "policy", "meas ms", "p95 ms", "pred ms", "error", "meas peak", "pred peak", "error"),
                lines))
    bad = [f"{w} {n}" for w, n, m, _ in all_rows if not m["matches_resident"]]
    if bad:
        print(f"\nloss or gradients differ from resident: {', '.join(bad)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
