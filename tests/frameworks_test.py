#!/usr/bin/env python3
"""python/offsim_torch/frameworks.py on CPU: every preset's handler runs one step of
tests/data/hf/configs/qwen2-fw.json (4 layers) and moves what its framework's
code moves.  Run by ctest as `frameworks` (exit 77 without torch).

The shape is small (batch 4 x 64) so that all of it takes seconds; the size
filters are scaled with it (TE 2^14 elements instead of 2^18, Megatron 2^13
instead of 2^20) so that, as at full size, some tensors pass them and some
do not.  Checked: loss and gradients against resident (bit for bit, but for
what the handlers found: verl's dedup corrupts o_proj's gradient, Megatron's
module boundaries reorder gradient accumulation), D2H = H2D where the
framework reloads everything and the exact shortfall where it does not,
the caching host allocator's rounding and reuse, the filters, the scenario.
"""
import json
import os
import sys
import tempfile

try:
    import torch
except ImportError:
    sys.exit(77)

from offsim_torch import frameworks as fw  # noqa: E402  (python/ on PYTHONPATH: tests/CMakeLists.txt)

TE_MIN, MEGATRON_MIN = 2 ** 14, 2 ** 13
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def host_memory_unit():
    """The caching host allocator model by itself."""
    h = fw.HostMemory()
    a = torch.empty(1000, dtype=torch.uint8)      # 1000 -> 1024
    b = torch.empty(3 * 4096, dtype=torch.uint8)  # 12288 -> 16384
    h.track(a, pinned=True)
    h.track(b, pinned=True)
    expect((h.live_raw, h.live_rounded, h.reserved) == (13288, 17408, 17408), "rounding of two pinned blocks")
    del b
    expect(h.live_rounded == 1024 and h.cached[16384] == 1, "a freed block is cached")
    c = torch.empty(9000, dtype=torch.uint8)      # 9000 -> 16384: the cached block
    h.track(c, pinned=True)
    expect(h.reserved == 17408, "a cached block of the same size class is reused")
    d = torch.empty(5000, dtype=torch.uint8)
    h.track(d, pinned=False)
    expect(h.live_raw == 1000 + 9000 + 5000 and h.reserved == 17408, "pageable memory is exact and not cached")
    expect(fw.next_pow2(1) == 1 and fw.next_pow2(4097) == 8192 and fw.next_pow2(4096) == 4096, "next_pow2")
    del a, c, d


def main():
    host_memory_unit()
    with tempfile.TemporaryDirectory() as tmp:
        out, ini = os.path.join(tmp, "fw.json"), os.path.join(tmp, "fw.ini")
        rc = fw.main(["--batch", "4", "--seq", "64", "--te-min", str(TE_MIN), "--megatron-min", str(MEGATRON_MIN),
                      "--check", "--out", out, "--write-scenario", ini])
        expect(rc == 0, f"frameworks.py --check exits 0 (got {rc})")
        with open(out) as f:
            result = json.load(f)
        with open(ini) as f:
            scenario = f.read()
    p = result["presets"]
    L = result["layers"]
    expect(L == 4, "the config has 4 layers")
    expect(sorted(p) == sorted(("resident",) + fw.PRESETS), "every preset ran")

    # Loss and gradients against resident.
    for name in fw.PRESETS:
        r = p[name]
        expect(r["loss_equal"], f"{name}: loss equal to resident")
        if name == "verl":
            expect(r["grads_differ"] == fw.verl_dedup_victims(result),
                   f"verl: exactly the offloaded layers' o_proj gradients differ (got {r['grads_differ']})")
        elif name == "megatron":
            expect(r["grad_max_rel_diff"] <= 1e-5, "megatron: gradients within rounding of resident")
        else:
            expect(r["grads_equal"], f"{name}: gradients bit for bit equal to resident")

    # What moves back.
    for name in fw.RELOADS_EVERYTHING:
        r = p[name]
        expect(r["d2h_copies"] > 0 and (r["d2h_bytes"], r["d2h_copies"]) == (r["h2d_bytes"], r["h2d_copies"]),
               f"{name}: every offloaded byte comes back")
    tt = p["torchtune"]
    stash = tt["skipped"]["reload skipped: still in the forward stash"]
    expect(tt["d2h_bytes"] - tt["h2d_bytes"] == stash["bytes"] and tt["d2h_copies"] - tt["h2d_copies"] == stash["tensors"],
           "torchtune: what is not reloaded is what was still in the forward stash")
    layer_input = 4 * 64 * 64 * 4  # batch x seq x hidden x fp32
    tc = p["torchtune-ckpt"]
    # The checkpoint inputs (L), the token ids, and the final norm's saves
    # (torch 1.13: to(float32) twice, its mean's input, rsqrt twice, the
    # normed tensor): nothing else of the layers.
    expect(tc["d2h_copies"] == L + 1 + 6 and tc["h2d_copies"] <= tc["d2h_copies"],
           f"torchtune-ckpt: the checkpoint inputs, the ids and the final norm move (got {tc['d2h_copies']})")
    ds = p["deepspeed"]
    expect((ds["d2h_copies"], ds["d2h_bytes"]) == (L, L * layer_input),
           "deepspeed (release): every layer's input goes to the host")
    expect(ds["host_peak_bytes"] == ds["host_peak_rounded"] == L * layer_input and ds["pinned_allocs"] == 0,
           "deepspeed (release): pageable host memory, every input alive at once")
    dm = p["deepspeed-master"]
    expect((dm["d2h_copies"], dm["d2h_bytes"]) == (L - 1, (L - 1) * layer_input),
           "deepspeed-master: the inputs of all layers but the last go to the host")
    expect((dm["h2d_copies"], dm["h2d_bytes"]) == (L - 2, (L - 2) * layer_input),
           "deepspeed-master: the newest offloaded input is reused from the forward stash")

    # Host memory: pageable save_on_cpu exact and all alive at the head; pinned
    # buffers rounded, and the second step served from the first step's cache.
    s = p["save_on_cpu"]
    expect(s["host_peak_bytes"] == s["host_peak_rounded"] == s["d2h_bytes"] and s["host_reserved"] == 0,
           "save_on_cpu: pageable host memory, every copy alive at once")
    for name in ("verl", "te", "torchtune"):
        r = p[name]
        expect(r["host_peak_rounded"] > r["host_peak_bytes"] > 0, f"{name}: pinned buffers rounded up")
        expect(r["host_reserved_by_step"][0] == r["host_reserved_by_step"][-1] == r["host_reserved"],
               f"{name}: the caching allocator serves the second step from the first's blocks")
    expect(p["megatron"]["host_reserved_by_step"][0] == p["megatron"]["host_reserved"],
           "megatron: the pool reuses its buffers")

    # Filters.
    for name in fw.PRESETS:
        r = p[name]
        if name != "save_on_cpu":
            expect(r["param_object_copies"] == 0, f"{name}: no nn.Parameter copied")
    expect(p["save_on_cpu"]["param_object_copies"] > 0 and p["save_on_cpu"]["param_storage_copies"] > 0,
           "save_on_cpu: parameters are copied")
    for name in ("verl", "te", "megatron", "deepspeed", "deepspeed-master"):
        expect(p[name]["param_storage_copies"] == 0, f"{name}: no copy of a parameter's storage")
    expect(p["torchtune"]["param_storage_copies"] > 0, "torchtune: weight.t() views pass its filter")
    expect(p["te"]["skipped"][f"< {TE_MIN} elements"]["tensors"] > 0, "te: small tensors stay")
    expect(p["te"]["skipped"]["non-contiguous"]["tensors"] > 0, "te: non-contiguous tensors stay")
    expect(p["megatron"]["skipped"][f"< {MEGATRON_MIN} elements"]["tensors"] > 0, "megatron: small tensors stay")
    expect(p["megatron"]["skipped"]["last group of its name"]["tensors"] > 0, "megatron: the last groups stay")
    expect(p["torchtune"]["skipped"]["< 1024 bytes"]["tensors"] > 0, "torchtune: small tensors stay")
    expect(p["verl"]["skipped"]["last layer"]["tensors"] > 0, "verl: the last layer stays")
    for name, limit in (("te", TE_MIN), ("megatron", MEGATRON_MIN)):
        for shape in p[name]["copied"]:
            numel = 1
            for d in json.loads(shape[shape.index("["):]):
                numel *= d
            expect(numel >= limit, f"{name}: copied {shape}, below {limit} elements")
    # Megatron's warm-up offloads every group and reloads the last ones inline.
    first = p["megatron"]["first_step"]
    expect(first["d2h_copies"] > p["megatron"]["d2h_copies"] and "inline reload (warm-up)" in first["skipped"],
           "megatron: the warm-up step offloads the last groups too and reloads them inline")

    # The scenario.
    expect("ops = hf" in scenario and "attention = sdpa" in scenario and "hf_config = " in scenario,
           "scenario: [transformer] with hf_config, sdpa, ops = hf")
    for name in fw.PRESETS:
        expect(f"[policy.{name}]\nkind = offload\nframework = {name.split('-')[0]}\n" in scenario,
               f"scenario: [policy.{name}]")
    expect("[policy.deepspeed-master]\nkind = offload\nframework = deepspeed\nversion = master\n" in scenario,
           "scenario: deepspeed-master follows master")
    expect(f"min_elements = {TE_MIN}" in scenario and f"min_elements = {MEGATRON_MIN}" in scenario,
           "scenario: the scaled filters")

    if failures:
        print(f"{len(failures)} failures", file=sys.stderr)
        return 1
    print("frameworks_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
