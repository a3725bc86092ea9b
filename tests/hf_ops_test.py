#!/usr/bin/python3
"""offsim's per-op memory timeline against real autograd, layer by layer.

For every recording of tests/data/hf (one training step of HF-style models,
torch 1.13 on the CPU, python/offsim_torch/recorder.py), the most memory held
while each (phase, layer) runs, in the recording and in offsim's resident run
of the same step (`offsim run --memory --timeline`, ops = hf), above the
parameters.  From the recording, what only this torch or only the CPU holds
is taken out, each found in the curve itself:

  - torch 1.13 saves mean()'s input (the pow output of every RMSNorm) until
    MeanBackward1 runs; current PyTorch frees it at once: from its allocation
    (function `pow`, forward) to its free (MeanBackward1);
  - the CPU's bf16 matmuls allocate temporaries (an fp32 copy of an
    operand, a result buffer) and free them before the aten call returns;
    cuBLAS does not;
  - inside a stand-in for a CUDA kernel (gpt2's LayerNorm, fused dropout,
    SDPA's kernels: python/offsim_torch/standins.py) the points are its CPU
    decomposition's temporaries, not the kernel's: left out; what the
    stand-in leaves allocated shows at the points after it.

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
# layer's peak from -4.0 % to +5.5 % (gpt2's backward: its gelu_new's
# nodes are one op), the loss head's from -6.0 % to +2.7 % (gpt2 at vocab
# 32, where the head's peak is the final LayerNorm's gradients; at vocab 256
# within 0.2 %).
LAYER_OFF = 0.06
HEAD_OFF = 0.07
# The recording read back as a [trace], with its allocation rows (recorder.py's lifetimes):
# measured at this commit, every layer's and the head's peak from -4.0 % to +5.5 % (offsim
# holds what an op makes from its start, beside the temporaries it frees before making it).
# The embedding is printed, not checked: offsim allocates a parameter's gradient as its node
# ends (the table's gradient is missing from EmbeddingBackward0's own peak: -10 to -13 %), and
# holds a saved storage from the op that saves it (in fp32 the embedding's output is layer 0's
# norm input: -71 % of the embedding's small forward).
TRACE_OFF = 0.06

RECORDINGS = [
    # name, config, dtype, attention[, seq (16 without)]
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
    # Mixtures of experts (python/offsim_torch/moe_models.py) at seq 4, where their routing is even.  Their
    # layers are checked; their loss head's backward is not: at batch 2 x seq 4 offsim's head holds
    # 16,440 bytes (two fp32 tokens x vocab buffers) less than the recording, and so does a dense
    # llama-tiny recorded at seq 4 (-17.4 %, recorder.py --hf-config llama-tiny.json --batch 2 --seq 4
    # --attention eager), so it is the head's model at this size, not the experts'.
    ("mixtral-b2s4-eager-bf16", "mixtral-tiny", "bf16", "eager", 4),
    ("qwen3_moe-b2s4-eager-bf16", "qwen3_moe-tiny", "bf16", "eager", 4),
    ("qwen2_moe-b2s4-eager-bf16", "qwen2_moe-tiny", "bf16", "eager", 4),
    # DeepSeek-V3: multi-head latent attention, the sigmoid group-limited router, HF's loop over every
    # expert in fp32.
    ("deepseek_v3-b2s4-eager-bf16", "deepseek_v3-tiny", "bf16", "eager", 4),
]

MACHINE = ("[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n"
           "[link]\nh2d_bandwidth = 25GB/s\nd2h_bandwidth = 25GB/s\n")

GEMMS = ("aten::mm", "aten::bmm", "aten::addmm")
GEMM_FUNCTIONS = ("linear", "addmm", "matmul", "mm", "bmm")


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
    # A CPU GEMM's own temporaries: what one aten call (a run of points in
    # one context) allocates and frees again before it returns.
    def call(point):  # the aten call a point is in: its phase, layer, module, function and node
        return tuple(ctx[curve[point][2]][:5])

    def gemm(point):
        c = ctx[curve[point][2]]
        return c[5] in GEMMS or c[3] in GEMM_FUNCTIONS
    i = 0
    while i < len(curve):
        j = i
        while j + 1 < len(curve) and call(j + 1) == call(i):
            j += 1
        if any(gemm(k) for k in range(i, j + 1)):
            live = []  # (point, bytes) allocated in the call, not yet freed
            for k in range(i, j + 1):
                delta = curve[k][1]
                if delta > 0:
                    live.append((k, delta))
                else:
                    for m in range(len(live) - 1, -1, -1):
                        if live[m][1] == -delta:
                            start = live.pop(m)[0]
                            for q in range(start, k):
                                out[q] += -delta
                            break
        i = j + 1
    most = collections.OrderedDict()
    for i, (total, delta, c) in enumerate(curve):
        if ctx[c][6]:
            continue  # inside a stand-in for a CUDA kernel: its CPU temporaries are not the kernel's
        key = (ctx[c][0], ctx[c][1])
        most[key] = max(most.get(key, 0), total - out[i])
    return most


def simulated(offsim, hf, tmp, cfg, dtype, attention, seq=16):
    return run_points(offsim, tmp, MACHINE + "[transformer]\nhf_config = %s\nbatch = 2\nseq = %d\ndtype = %s\n"
                      "attention = %s\nops = hf\noptimizer = none\nmaster_weights = false\noutputs = dropped\n"
                      "[policy.resident]\nkind = resident\n" % (os.path.join(hf, "configs", cfg + ".json"), seq,
                                                                   dtype, attention))


def run_points(offsim, tmp, ini_text, base=None):
    """(phase, layer) -> the most device bytes above `base` while a compute op of it runs (None: the
    program's first point, the parameters)."""
    ini = os.path.join(tmp, "s.ini")
    with open(ini, "w") as f:
        f.write(ini_text)
    mem, tl = os.path.join(tmp, "m.csv"), os.path.join(tmp, "t.csv")
    subprocess.run([offsim, "run", ini, "--memory", mem, "--timeline", tl, "--format", "json"], check=True,
                   stdout=subprocess.DEVNULL)
    points = [(float(r["time_ms"]), int(r["device_bytes"])) for r in csv.DictReader(open(mem))]
    base = points[0][1] if base is None else base
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


def replayed(offsim, hf, tmp, name):
    """The recording itself read as a [trace] (its op lists, saved tensors and allocation rows)."""
    return run_points(offsim, tmp, MACHINE + "[trace]\nfile = %s\n[policy.resident]\nkind = resident\n"
                      % os.path.join(hf, name + ".csv"), base=0)  # no parameters: static = 0


# What compare does with a stage: check it against the bound, print it unchecked, or leave it out.
CHECK, SHOW, SKIP = "check", "show", "skip"


def compare(label, rec, sim, layer_off, head_off, embed=CHECK, head=CHECK):
    """Prints each (phase, layer)'s peak against the recording's; returns the failures."""
    failures = 0
    print(label)
    for key, want in rec.items():
        phase, layer = key
        how = embed if layer == "embed" else head if layer == "head" else CHECK
        if how == SKIP:
            continue
        got = sim.get(key, 0)
        off = (got - want) / want
        bound = head_off if layer == "head" else layer_off
        bad = abs(off) > bound and how == CHECK
        failures += bad
        print("  %-8s %-5s recorded %9d offsim %9d %+6.1f %%%s%s" % (phase, layer, want, got, 100 * off,
                                                                   "  FAIL" if bad else "",
                                                                   "  (not checked)" if how == SHOW else ""))
    return failures


def main():
    offsim, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    hf = os.path.join(root, "tests", "data", "hf")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg, dtype, attention, *seq in RECORDINGS:
            rec = recorded(hf, name)
            # The generator's head at seq 4 is not checked (see RECORDINGS); the recording's own is.
            # The generator's embedding builds the mask and RoPE tables, which it does not model (README);
            # its head at seq 4 is not checked (see RECORDINGS); a recording's own embedding is shown, not
            # checked (TRACE_OFF).
            if cfg is not None:
                failures += compare(name + " (ops = hf)", rec,
                                    simulated(offsim, hf, tmp, cfg, dtype, attention, *seq),
                                    LAYER_OFF, HEAD_OFF, embed=SKIP, head=SKIP if seq else CHECK)
            failures += compare(name + " (the recording as [trace])", rec, replayed(offsim, hf, tmp, name),
                                TRACE_OFF, TRACE_OFF, embed=SHOW)
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
