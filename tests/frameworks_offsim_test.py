#!/usr/bin/env python3
"""offsim's framework presets against python/offsim_torch/frameworks.py's handlers, on CPU.

The harness runs each framework's handler (written after the framework's
code, not after offsim) on a 4-layer qwen2 at batch 8 x 128 in fp32 and
counts what it copies; offsim predicts the same step from the scenario the
harness writes (`framework = NAME` policies on `ops = hf`).  The recording
torch is Debian's 1.13, which packs two things current PyTorch does not
(tests/data/hf/README.md): MeanBackward's input in every RMSNorm (N x h
fp32) and, for a hook that sees the embedding, its weight (V x h).  With
those named, the bytes and copies must be equal:

  save_on_cpu  every norm (2 per layer + the final one) and the embedding weight;
  verl         the norms of the offloaded layers (L - 1: the last layer kept);
  te           the same (its window offloads L - 1 layers);
  megatron     the same: its attn_norm and mlp_norm groups hold the norms' saves;
  torchtune    every norm (2 per layer + the final one: its context covers the final norm);
  torchtune-ckpt  the final norm's (the layers' saves are inside the checkpoints);
  deepspeed    nothing: only the checkpointed layers' inputs move (release: L; master: L - 1).

The test prints every preset's figures on both sides and checks that both ran.

Usage: frameworks_offsim_test.py OFFSIM_BINARY REPO_ROOT (exit 77 without torch).
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

offsim, root = sys.argv[1], sys.argv[2]
L, N, H, V = 4, 8 * 128, 64, 256          # tests/data/hf/configs/qwen2-fw.json at batch 8 x 128
MEAN = N * H * 4                          # torch 1.13's MeanBackward input, one per RMSNorm
EMBED = V * H * 4                         # torch 1.13's EmbeddingBackward weight

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


with tempfile.TemporaryDirectory() as tmp:
    out, ini = os.path.join(tmp, "fw.json"), os.path.join(tmp, "fw.ini")
    # python/ on PYTHONPATH (tests/CMakeLists.txt), which the child inherits.
    subprocess.run(["/usr/bin/python3", "-m", "offsim_torch.frameworks", "--device", "cpu",
                    "--config", os.path.join(root, "tests", "data", "hf", "configs", "qwen2-fw.json"),
                    "--batch", "8", "--seq", "128", "--dtype", "fp32", "--te-min", "16384",
                    "--megatron-min", "65536", "--out", out, "--write-scenario", ini,
                    "--profile", os.path.join(root, "scenarios", "profiles", "h100-sxm-pcie-gen5.ini")],
                   check=True, capture_output=True)
    harness = json.load(open(out))["presets"]
    run = subprocess.run([offsim, "compare", ini, "--format", "json"], check=True, capture_output=True, text=True)
    doc = json.loads(run.stdout)
    predicted = {r["policy"]: r for r in (doc if isinstance(doc, list) else doc["results"])}

explained = {
    "save_on_cpu": ((2 * L + 1) * MEAN + EMBED, 2 * L + 1 + 1),
    "verl": (2 * (L - 1) * MEAN, 2 * (L - 1)),
    "te": (2 * (L - 1) * MEAN, 2 * (L - 1)),
    "megatron": (2 * (L - 1) * MEAN, 2 * (L - 1)),
    "torchtune": ((2 * L + 1) * MEAN, 2 * L + 1),
    "torchtune-ckpt": (MEAN, 1),
    "deepspeed": (0, 0),
    "deepspeed-master": (0, 0),
}
for name in ("save_on_cpu", "verl", "te", "megatron", "torchtune", "torchtune-ckpt", "deepspeed", "deepspeed-master"):
    h, o = harness[name], predicted[name]
    print(f"{name}: harness D2H {h['d2h_bytes']:,} B in {h['d2h_copies']}, offsim {o['d2h_bytes']:,} B in "
          f"{o['d2h_copies']} (difference {h['d2h_bytes'] - o['d2h_bytes']:+,} B, {h['d2h_copies'] - o['d2h_copies']:+})")
    check(h["loss_equal"] and o["step_ms"] > 0, f"{name}: both ran")
    if name in explained:
        extra_bytes, extra_copies = explained[name]
        check(h["d2h_bytes"] == o["d2h_bytes"] + extra_bytes and h["d2h_copies"] == o["d2h_copies"] + extra_copies,
              f"{name}: D2H equal once torch 1.13's extra saves are named ({extra_bytes:,} B, {extra_copies} copies)")
sys.exit(1 if failures else 0)
