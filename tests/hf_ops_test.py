#!/usr/bin/python3
"""offsim's per-op memory timeline against real autograd, layer by layer.

For every recording of tests/data/hf (one training step of HF-style models,
torch 1.13 on the CPU, gpu_calib/record/recorder.py), the most memory held
while each (phase, layer) runs, in the recording and in offsim's resident run
of the same step (`offsim run --memory --timeline`, ops = hf), above the
parameters.  From the recording, what only this torch or only the CPU holds
is taken out, each found in the curve itself:

  - torch 1.13 saves mean()'s input (the pow output of every RMSNorm) until
    MeanBackward1 runs; current PyTorch frees it at once: from its allocation
    (function `pow`, forward) to its free (MeanBackward1);
  - the CPU's bf16 matmuls allocate a temporary and free it in the same aten
    call (the next point of the curve); cuBLAS does not.

offsim counts the token ids (an input, outside the recording's curve) and no
loss scalars.  The check: every layer's forward and backward peak within
LAYER_OFF of the recording's, the head's and the step's within HEAD_OFF.  The
measured table is printed (README, "What offsim counts").

Usage: hf_ops_test.py OFFSIM REPO_ROOT
"""
import collections
import csv
import json
import os
import subprocess
import sys
import tempfile

# Measured residuals of the per-op model (this commit, printed below): a
# layer's peak within 9 % (gpt2's first layer's forward, -8.9 %: what its
# embedding stage leaves live is not modelled), the loss head's within 13 %
# (gpt2 at vocab 32, where the head's peak is the final LayerNorm's
# gradients, not the logits; at vocab 256 within 0.2 %).
LAYER_OFF = 0.09
HEAD_OFF = 0.13

RECORDINGS = [
    # name, config, dtype, attention
    ("qwen2-eager-bf16", "qwen2-tiny", "bf16", "eager"),
    ("qwen2-sdpa-bf16", "qwen2-tiny", "bf16", "sdpa"),
    ("qwen2-flash-bf16", "qwen2-tiny", "bf16", "flash"),
    ("qwen2-eager-fp32", "qwen2-tiny", "fp32", "eager"),
    ("llama-eager-bf16", "llama-tiny", "bf16", "eager"),
    ("llama-sdpa-bf16", "llama-tiny", "bf16", "sdpa"),
    ("llama-flash-bf16", "llama-tiny", "bf16", "flash"),
    ("llama-eager-fp32", "llama-tiny", "fp32", "eager"),
    ("gpt2-eager-bf16", "gpt2-tiny", "bf16", "eager"),
    ("gpt2-sdpa-bf16", "gpt2-tiny", "bf16", "sdpa"),
    ("gpt2-flash-bf16", "gpt2-tiny", "bf16", "flash"),
    ("gpt2-eager-fp32", "gpt2-tiny", "fp32", "eager"),
    ("llama-smallvocab-eager-bf16", "llama-smallvocab", "bf16", "eager"),
    ("llama-smallvocab-eager-fp32", "llama-smallvocab", "fp32", "eager"),
    ("gpt2-smallvocab-eager-bf16", "gpt2-smallvocab", "bf16", "eager"),
    ("gpt2-smallvocab-eager-fp32", "gpt2-smallvocab", "fp32", "eager"),
]

MACHINE = ("[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n"
           "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n")

GEMMS = ("aten::mm", "aten::bmm", "aten::addmm")


def recorded(hf, name):
    """(phase, layer) -> most bytes held, torch-1.13 and CPU-only memory out."""
    d = json.load(open(os.path.join(hf, name + ".json")))
    ctx, curve = d["contexts"], d["curve"]
    rows = list(csv.DictReader(open(os.path.join(hf, name + ".csv"))))
    means = {int(r["storage_bytes"]) for r in rows if r["adjust"] == "mean-input"}
    out = [0] * len(curve)
    allocs = []  # pow outputs: (point, bytes, layer)
    for i, (_, delta, c) in enumerate(curve):
        phase, layer, _, function, node, _, _ = ctx[c]
        if phase == "forward" and function == "pow" and delta > 0 and delta in means:
            allocs.append((i, delta, layer))
        if phase == "backward" and node == "MeanBackward1" and delta < 0:
            for j in range(len(allocs) - 1, -1, -1):
                if allocs[j][2] == layer and allocs[j][1] == -delta:
                    start = allocs.pop(j)[0]
                    for k in range(start, i):
                        out[k] += -delta
                    break
    most = collections.OrderedDict()
    for i, (total, delta, c) in enumerate(curve):
        nxt = curve[i + 1] if i + 1 < len(curve) else None
        if nxt and delta > 0 and nxt[1] == -delta and nxt[2] == c and ctx[c][5] in GEMMS:
            continue  # a CPU GEMM's own temporary
        key = (ctx[c][0], ctx[c][1])
        most[key] = max(most.get(key, 0), total - out[i])
    return most


def simulated(offsim, hf, tmp, cfg, dtype, attention):
    ini = os.path.join(tmp, "s.ini")
    with open(ini, "w") as f:
        f.write(MACHINE + "[transformer]\nhf_config = %s\nbatch = 2\nseq = 16\ndtype = %s\nattention = %s\n"
                "ops = hf\noptimizer = none\nmaster_weights = false\noutputs = dropped\n"
                "[policy.resident]\nkind = resident\n" % (os.path.join(hf, "configs", cfg + ".json"), dtype, attention))
    mem, tl = os.path.join(tmp, "m.csv"), os.path.join(tmp, "t.csv")
    subprocess.run([offsim, "run", ini, "--memory", mem, "--timeline", tl, "--format", "json"], check=True,
                   stdout=subprocess.DEVNULL)
    points = [(float(r["time_ms"]), int(r["device_bytes"])) for r in csv.DictReader(open(mem))]
    base = points[0][1]  # the parameters: the program's baseline
    most = collections.OrderedDict()
    for r in csv.DictReader(open(tl)):
        if r["stream"] != "compute":
            continue
        s, e = float(r["start_ms"]), float(r["end_ms"])
        layer = r["layer"] or r["op"].split(" ")[0]
        inside = [v for t, v in points if s <= t < e] or [v for t, v in points if t <= s][-1:]
        key = (r["phase"], layer)
        most[key] = max(most.get(key, 0), max(inside) - base)
    return most


def main():
    offsim, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    hf = os.path.join(root, "tests", "data", "hf")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg, dtype, attention in RECORDINGS:
            rec = recorded(hf, name)
            sim = simulated(offsim, hf, tmp, cfg, dtype, attention)
            print(name)
            for key, want in rec.items():
                phase, layer = key
                if layer == "embed":
                    continue  # the mask and RoPE tables are built there: not modelled (README)
                got = sim.get(key, 0)
                off = (got - want) / want
                bound = HEAD_OFF if layer == "head" else LAYER_OFF
                bad = abs(off) > bound
                failures += bad
                print("  %-8s %-5s recorded %9d offsim %9d %+6.1f %%%s" % (phase, layer, want, got, 100 * off,
                                                                         "  FAIL" if bad else ""))
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
