#!/usr/bin/env python3
"""Measure one training step four ways on a real GPU: what offsim predicts.

The seed chapter's GPU experiment (Step 5 of "Activation Offload"; see
docs/reference.md, The seed chapter),
generalised.  A fixed Qwen2-style decoder in plain torch (decoder.py, the
model of offsim's [transformer] generator, random weights from a fixed seed,
nothing downloaded) runs forward and backward:

  resident    everything stays on the device;
  sync        saved-tensor hooks copy each saved reference to (pageable) host
              memory when it is saved and back when backward reads it, on the
              compute stream, as the chapter's SavedTensorTransferCounter and
              PyTorch's save_on_cpu do;
  async       verl's double-buffered group offload: at the end of each layer's
              forward its saved tensors (each storage once) go to pinned
              host memory on a D2H stream; the forward of layer i waits until
              layer i-2 is on the host; when the backward of layer j starts,
              layer j-1 is reloaded on an H2D stream, which first waits for
              that layer's D2H; the last layer stays on the device;
  checkpoint  torch.utils.checkpoint around every layer (full recompute).

Only the decoder layers' saved tensors move, as in offsim's policies: the
embedding and the loss head keep theirs.  Like the chapter's counter, the
hooks leave parameters and leaf tensors (masks, RoPE tables, norm
statistics computed without grad) on the device.  Gradients stay allocated
between steps and are zeroed in place, as offsim's static memory assumes.

For each way it records the median and P95 step time (CUDA events around
forward and backward), the peak allocated and reserved memory, D2H and H2D
bytes and tensor counts, and the loss and gradients against resident.  It
writes JSON (--out) and, with --write-scenario, the offsim scenario of the
same workload: [transformer] with the same shape, dtype, batch, seq and
attention, `include = PROFILE` (--profile), and one [policy.*] per way with
the same name:

  resident    kind = resident
  sync        kind = offload, mode = sync, dedup = false, keep_last = 0,
              pinned = pageable (the hooks copy to pageable memory)
  async       kind = offload, mode = async, dedup = true, keep_last = 1,
              prefetch = 1, inflight = 2, pinned = pooled (torch's caching
              host allocator keeps the pinned buffers after the warm-up)
  checkpoint  kind = checkpoint, mode = full

--device cpu runs the same code with synchronous stand-ins for streams, so
that the equality checks and byte counters can be tested without a GPU
(Debian's python3-torch 1.13); its timings are not a measurement.

Usage (from python/, or with PYTHONPATH=python or the package installed):
  python3 -m offsim_torch.ground_truth --preset qwen0.5b --out gt.json \\
      --write-scenario gt.ini --profile profile.ini
  /usr/bin/python3 -m offsim_torch.ground_truth --device cpu --tiny --check --out gt.json
"""
import argparse
import gc
import json
import math
import os
import sys
import time

import torch
import torch.utils.checkpoint

from offsim_torch.decoder import Decoder  # the [transformer] generator's model, as recorded
from offsim_torch.tensors import cuda_device, nbytes, storage_ptr, timed, whole_storage

PRESETS = {
    # Seconds on CPU: the smoke test of the code paths.
    "tiny": dict(hidden=128, layers=4, heads=4, kv_heads=2, ffn=352, vocab=512, batch=2, seq=64, tied=False),
    # The chapter's workload: Qwen2.5-0.5B's shape at batch 2 x 512.
    "qwen0.5b": dict(hidden=896, layers=24, heads=14, kv_heads=2, ffn=4864, vocab=151936, batch=2, seq=512,
                     tied=True),
    # Qwen2.5-1.5B's shape at batch 2 x 1024: eight times the activations.
    "qwen1.5b": dict(hidden=1536, layers=28, heads=12, kv_heads=2, ffn=8960, vocab=151936, batch=2, seq=1024,
                     tied=True),
}
WAYS = ("resident", "sync", "async", "checkpoint")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# The chapter's correctness gate.
MAX_LOSS_DIFF = 5e-3
MAX_GRAD_NORM_REL_DIFF = 1e-3


class Offloader:
    """What moves, and the counters: non-leaf, non-parameter tensors saved
    inside decoder layers 0 .. layers - keep_last - 1."""

    def __init__(self, model, keep_last):
        self.parameters = {storage_ptr(p) for p in model.parameters()}
        self.last = len(model.layers) - keep_last
        self.layer = None
        self.d2h_bytes = self.h2d_bytes = self.d2h_tensors = self.h2d_tensors = 0

    def moves(self, t):
        return (self.layer is not None and self.layer < self.last and not t.is_leaf
                and storage_ptr(t) not in self.parameters)

    def end_of_forward(self):
        pass


class SyncOffload(Offloader):
    """The chapter's hook: every saved reference to host memory and back,
    synchronously, on the compute stream."""

    def __init__(self, model, device):
        super().__init__(model, keep_last=0)
        self.cuda = device.type == "cuda"

    def pack(self, t):
        if not self.moves(t):
            return ("keep", t)
        self.d2h_bytes += nbytes(t)
        self.d2h_tensors += 1
        host = t.detach().to("cpu") if self.cuda else t.detach().clone()
        return ("host", host, t.device)

    def unpack(self, packed):
        if packed[0] == "keep":
            return packed[1]
        _, host, device = packed
        self.h2d_bytes += nbytes(host)
        self.h2d_tensors += 1
        return host.to(device) if self.cuda else host.clone()

    def run_layer(self, index, layer, x, *args):
        self.layer = index
        try:
            return layer(x, *args)
        finally:
            self.layer = None


class Group:
    """One layer's offloaded storages, each once, whatever views of it were
    saved (the softmax output is saved whole by softmax and reshaped by the
    next matmul): what verl's group offload moves and offsim's dedup counts.
    Views are rebuilt from storage, offset, shape and strides on unpack, so
    that a transpose never takes its base's place."""

    def __init__(self):
        self.index = {}      # (storage, dtype) -> slot
        self.device = []     # forward: whole storages, until their D2H is issued
        self.host = []       # after the D2H: host copies
        self.reloaded = []   # after the H2D: device copies, until backward unpacks them
        self.refs = []       # references packed per slot
        self.d2h_done = None
        self.h2d_done = None
        self.reload_issued = False


class AsyncOffload(Offloader):
    """verl's AsyncDoubleBufferGroupOffloadHandler, reduced to what offsim
    models: group = layer, D2H and H2D streams, inflight and prefetch depth."""

    def __init__(self, model, device, keep_last=1, prefetch=1, inflight=2):
        super().__init__(model, keep_last)
        self.device = device
        self.cuda = device.type == "cuda"
        self.prefetch, self.inflight = prefetch, inflight
        self.layers = len(model.layers)
        self.groups = {}
        self.compute = self.d2h = self.h2d = None
        if self.cuda:
            self.compute = torch.cuda.current_stream(device)
            self.d2h = torch.cuda.Stream(device)
            self.h2d = torch.cuda.Stream(device)

    def pack(self, t):
        if not self.moves(t):
            return ("keep", t)
        g = self.groups.setdefault(self.layer, Group())
        key = (storage_ptr(t), t.dtype)
        slot = g.index.get(key)
        if slot is None:
            slot = g.index[key] = len(g.device)
            g.device.append(whole_storage(t.detach()))
            g.refs.append(0)
        g.refs[slot] += 1
        return ("group", self.layer, slot, tuple(t.shape), tuple(t.stride()), t.storage_offset())

    def unpack(self, packed):
        if packed[0] == "keep":
            return packed[1]
        _, layer, slot, shape, stride, offset = packed
        g = self.groups[layer]
        if not g.reload_issued:
            self.backward_starts(layer)  # no boundary ran first: reload now and wait
        t = g.reloaded[slot].as_strided(shape, stride, offset)
        g.refs[slot] -= 1
        if g.refs[slot] == 0:
            g.reloaded[slot] = None  # the views autograd holds keep the storage
        return t

    def before_forward(self, layer):
        g = self.groups.get(layer - self.inflight)
        if self.cuda and g is not None:
            self.compute.wait_event(g.d2h_done)

    def move(self, tensors, stream, after, to_host):
        """Copies `tensors` to pinned host memory or back to the device, on
        `stream` once `after` has been recorded; returns the copies and the
        event that marks their end (CPU: clones, no event)."""
        if not self.cuda:
            return [t.clone() for t in tensors], None
        copies = []
        with torch.cuda.stream(stream):
            stream.wait_event(after)
            for t in tensors:
                if to_host:
                    c = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                else:
                    c = torch.empty(t.shape, dtype=t.dtype, device=self.device)
                c.copy_(t, non_blocking=True)
                # The caching allocator must not hand the device block to
                # anyone else before the stream that last uses it is done.
                if to_host:
                    t.record_stream(stream)
                else:
                    c.record_stream(self.compute)
                copies.append(c)
            done = torch.cuda.Event()
            done.record(stream)
        return copies, done

    def commit(self, layer):
        """End of the layer's forward: its tensors leave on the D2H stream."""
        g = self.groups.get(layer)
        if g is None:
            return
        self.d2h_bytes += sum(nbytes(t) for t in g.device)
        self.d2h_tensors += len(g.device)
        ready = None
        if self.cuda:
            ready = torch.cuda.Event()
            ready.record(self.compute)
        g.host, g.d2h_done = self.move(g.device, self.d2h, ready, to_host=True)
        g.device = []

    def reload(self, layer):
        """The layer's tensors come back on the H2D stream, never before its
        own offload has finished."""
        g = self.groups.get(layer)
        if g is None or g.reload_issued:
            return
        g.reload_issued = True
        self.h2d_bytes += sum(nbytes(h) for h in g.host)
        self.h2d_tensors += len(g.host)
        g.reloaded, g.h2d_done = self.move(g.host, self.h2d, g.d2h_done, to_host=False)
        g.host = []

    def backward_starts(self, layer):
        """The layer's backward is next: wait for its tensors, prefetch below."""
        self.reload(layer)
        g = self.groups.get(layer)
        if self.cuda and g is not None:
            self.compute.wait_event(g.h2d_done)
        for j in range(layer - 1, max(layer - 1 - self.prefetch, -1), -1):
            self.reload(j)

    def end_of_forward(self):
        for j in range(max(self.layers - self.prefetch, 0), self.layers):
            self.reload(j)

    def run_layer(self, index, layer, x, *args):
        self.before_forward(index)
        self.layer = index
        try:
            out = layer(x, *args)
        finally:
            self.layer = None
        return GroupBoundary.apply(out, self, index)


class GroupBoundary(torch.autograd.Function):
    """Identity at a layer's output: its forward ends the layer's group, its
    backward is the moment the layer's backward starts."""

    @staticmethod
    def forward(ctx, x, handler, layer):
        ctx.handler, ctx.layer = handler, layer
        handler.commit(layer)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        ctx.handler.backward_starts(ctx.layer)
        return grad, None, None


def checkpointed(index, layer, x, *args):
    return torch.utils.checkpoint.checkpoint(layer, x, *args, use_reentrant=False)


def step(way, model, ids, labels, device):
    """One forward and backward; returns the loss and the offload handler."""
    if way == "resident":
        loss = model(ids, labels)
        loss.backward()
        return loss, None
    if way == "checkpoint":
        loss = model(ids, labels, run_layer=checkpointed)
        loss.backward()
        return loss, None
    handler = SyncOffload(model, device) if way == "sync" else AsyncOffload(model, device)
    with torch.autograd.graph.saved_tensors_hooks(handler.pack, handler.unpack):
        loss = model(ids, labels, run_layer=handler.run_layer)
        handler.end_of_forward()
        loss.backward()
    return loss, handler


def percentile(values, q):
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def grads_to_host(model):
    return [p.grad.detach().to("cpu", copy=True) for p in model.parameters()]


def compare(reference, ref_loss, model, loss):
    """Loss and gradients of this way against resident's (kept on the host
    so as not to count in later peaks; compared on the device, one
    parameter at a time)."""
    equal, max_abs, norm_sq, ref_norm_sq = True, 0.0, 0.0, 0.0
    for ref_host, p in zip(reference, model.parameters()):
        g, ref = p.grad.detach(), ref_host.to(p.device)
        equal = equal and torch.equal(g, ref)
        max_abs = max(max_abs, (g.float() - ref.float()).abs().max().item())
        norm_sq += g.float().pow(2).sum().item()
        ref_norm_sq += ref.float().pow(2).sum().item()
        del ref
    norm, ref_norm = math.sqrt(norm_sq), math.sqrt(ref_norm_sq)
    loss_diff = abs(loss - ref_loss)
    rel = abs(norm - ref_norm) / max(ref_norm, 1e-12)
    finite = math.isfinite(loss) and math.isfinite(norm)
    return {
        "loss": loss,
        "grad_norm": norm,
        "loss_abs_diff": loss_diff,
        "grad_norm_rel_diff": rel,
        "grad_max_abs_diff": max_abs,
        "grads_bitwise_equal": equal,
        "matches_resident": finite and loss_diff <= MAX_LOSS_DIFF and rel <= MAX_GRAD_NORM_REL_DIFF,
    }


def measure_way(way, model, ids, labels, device, args, reference):
    cuda = device.type == "cuda"
    samples, peaks, reserved = [], [], []
    loss = handler = None
    for i in range(args.warmup + args.repeats):
        model.zero_grad(set_to_none=False)
        loss = handler = None
        if cuda:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        (loss, handler), ms = timed(device, lambda: step(way, model, ids, labels, device))
        if i >= args.warmup:
            samples.append(ms)
            if cuda:
                peaks.append(torch.cuda.max_memory_allocated(device))
                reserved.append(torch.cuda.max_memory_reserved(device))
    loss_value = float(loss.detach().float())
    if reference is None:
        reference = (grads_to_host(model), loss_value)
    result = {
        "policy": way,
        "step_ms_median": percentile(samples, 0.5),
        "step_ms_p95": percentile(samples, 0.95),
        "step_ms": samples,
        "peak_allocated_bytes": max(peaks) if peaks else None,
        "peak_reserved_bytes": max(reserved) if reserved else None,
        "d2h_bytes": handler.d2h_bytes if handler else 0,
        "h2d_bytes": handler.h2d_bytes if handler else 0,
        "d2h_tensors": handler.d2h_tensors if handler else 0,
        "h2d_tensors": handler.h2d_tensors if handler else 0,
    }
    result.update(compare(reference[0], reference[1], model, loss_value))
    del loss, handler
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return result, reference


def scenario_text(args, cfg, dtype, scenario_path):
    """The offsim scenario of the measured workload."""
    lines = [
        "# Written by offsim_torch.ground_truth: the workload it measured, for offsim to predict.",
        "# The policies are the four ways it ran, under the same names.",
        "[scenario]",
        f"name = ground truth {args.preset}, batch {cfg['batch']}x{cfg['seq']} {dtype}, {args.attention}",
    ]
    if args.profile:
        rel = os.path.relpath(os.path.abspath(args.profile), os.path.dirname(os.path.abspath(scenario_path)))
        if "," in rel:
            raise SystemExit(f"ground_truth.py: --profile {args.profile}: a path with a comma cannot be included")
        lines.append(f"include = {rel}")
    else:
        lines.append("# no --profile given: add `include = PROFILE` (a [device] and [link]) before running offsim")
    lines += [
        "",
        "[transformer]",
        f"hidden = {cfg['hidden']}",
        f"layers = {cfg['layers']}",
        f"heads = {cfg['heads']}",
        f"kv_heads = {cfg['kv_heads']}",
        f"head_dim = {cfg['hidden'] // cfg['heads']}",
        f"ffn = {cfg['ffn']}",
        f"vocab = {cfg['vocab']}",
        f"batch = {cfg['batch']}",
        f"seq = {cfg['seq']}",
        f"dtype = {dtype}",
        "norm = rmsnorm",
        "mlp = swiglu",
        f"attention = {args.attention}",
        "dropout = 0",
        f"tied_embeddings = {'true' if cfg['tied'] else 'false'}",
        "qkv_bias = true",
        "linear_bias = false",
        "# forward and backward only: weights and gradients, no optimizer state",
        "optimizer = none",
        "master_weights = false",
        "",
        "[policy.resident]",
        "kind = resident",
        "",
        "# the chapter's hooks: every saved reference, pageable host memory",
        "[policy.sync]",
        "kind = offload",
        "mode = sync",
        "dedup = false",
        "keep_last = 0",
        "pinned = pageable",
        "",
        "# verl's double-buffered group offload",
        "[policy.async]",
        "kind = offload",
        "mode = async",
        "dedup = true",
        "keep_last = 1",
        "prefetch = 1",
        "inflight = 2",
        "pinned = pooled",
        "",
        "[policy.checkpoint]",
        "kind = checkpoint",
        "mode = full",
    ]
    return "\n".join(lines) + "\n"


def check(result):
    """The invariants a run must satisfy; returns the failures."""
    failures = []
    ways = result["ways"]
    if sorted(ways) != sorted(WAYS):
        return [f"ways {sorted(ways)}, expected {sorted(WAYS)}"]
    for name, w in ways.items():
        if not w["matches_resident"]:
            failures.append(f"{name}: loss or gradients differ from resident (loss diff {w['loss_abs_diff']:.3g}, "
                            f"grad norm rel diff {w['grad_norm_rel_diff']:.3g})")
        moved = name in ("sync", "async")
        if moved and not (w["d2h_bytes"] == w["h2d_bytes"] > 0 and w["d2h_tensors"] == w["h2d_tensors"] > 0):
            failures.append(f"{name}: D2H {w['d2h_bytes']} B in {w['d2h_tensors']} tensors, "
                            f"H2D {w['h2d_bytes']} B in {w['h2d_tensors']}: expected equal and positive")
        if not moved and (w["d2h_bytes"] or w["h2d_bytes"]):
            failures.append(f"{name}: moved bytes but should not")
        if result["measurement"] and w["peak_allocated_bytes"] is None:
            failures.append(f"{name}: no peak memory")
    if ways["async"]["d2h_bytes"] > ways["sync"]["d2h_bytes"]:
        failures.append("async moved more than sync, which copies every reference")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="qwen0.5b")
    parser.add_argument("--tiny", action="store_true", help="the tiny preset (seconds on CPU)")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), help="default bf16 on CUDA, fp32 on CPU")
    parser.add_argument("--attention", choices=["eager", "flash"], default="eager",
                        help="eager (score matrices) or flash (torch's fused attention, torch >= 2.0)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", required=True, help="the JSON result")
    parser.add_argument("--write-scenario", metavar="FILE", help="the offsim scenario of this workload")
    parser.add_argument("--profile", metavar="FILE", help="the profile the scenario includes")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the run passes its invariants")
    args = parser.parse_args()
    if args.tiny:
        args.preset = "tiny"
    if args.warmup < 0 or args.repeats < 1:
        parser.error("--warmup must be >= 0 and --repeats >= 1")
    device = cuda_device(args.device, "ground_truth.py")
    cuda = device.type == "cuda"
    dtype_name = args.dtype or ("bf16" if cuda else "fp32")
    dtype = DTYPES[dtype_name]
    if args.attention == "flash" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        raise SystemExit(f"ground_truth.py: --attention flash needs torch >= 2.0 (this is {torch.__version__})")

    cfg = dict(PRESETS[args.preset], flash=args.attention == "flash")
    torch.manual_seed(args.seed)
    if cuda and hasattr(torch.device, "__enter__"):
        with device:  # torch >= 2.0: initialise on the GPU, seconds instead of a minute
            model = Decoder(cfg, cfg["tied"])
    else:
        model = Decoder(cfg, cfg["tied"])
    model = model.to(device=device, dtype=dtype)
    model.train()
    gen = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=gen).to(device)
    labels = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=gen).to(device)

    result = {
        "schema": "offsim-ground-truth/1",
        "preset": args.preset,
        "config": {k: v for k, v in cfg.items() if k != "flash"},
        "dtype": dtype_name,
        "attention": args.attention,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
        "measurement": cuda,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "seed": args.seed,
        "parameters": sum(p.numel() for p in model.parameters()),
        "ways": {},
    }
    reference = None
    for way in WAYS:
        started = time.perf_counter()
        result["ways"][way], reference = measure_way(way, model, ids, labels, device, args, reference)
        w = result["ways"][way]
        peak = f"{w['peak_allocated_bytes'] / 2**30:.2f} GiB" if w["peak_allocated_bytes"] is not None else "n/a"
        print(f"{args.preset} {way:10s} median {w['step_ms_median']:9.2f} ms, p95 {w['step_ms_p95']:9.2f} ms, "
              f"peak {peak}, D2H {w['d2h_bytes'] / 2**20:.1f} MiB in {w['d2h_tensors']}, "
              f"H2D {w['h2d_bytes'] / 2**20:.1f} MiB, matches resident: {w['matches_resident']} "
              f"(bitwise {w['grads_bitwise_equal']}) [{time.perf_counter() - started:.1f} s]", file=sys.stderr)

    with open(args.out, "w") as f:
        json.dump(result, f, indent=2, allow_nan=False)
        f.write("\n")
    if args.write_scenario:
        text = scenario_text(args, cfg, dtype_name, args.write_scenario)
        with open(args.write_scenario, "w") as f:
            f.write(text)
    if args.check:
        failures = check(result)
        for failure in failures:
            print(f"ground_truth.py: check failed: {failure}", file=sys.stderr)
        if failures:
            sys.exit(1)


if __name__ == "__main__":
    main()
