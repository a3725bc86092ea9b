"""What the recorder and the two validation harnesses ask of a tensor and of a timed step.

torch 1.13 (Debian's) has `Tensor.storage()` only; torch 2 adds `untyped_storage()` and
deprecates the typed one.  These helpers pick whichever this torch has, so that every tool in
the package counts bytes and storages the same way.
"""
import time

import torch


def storage_of(t):
    """The tensor's storage, untyped where this torch has it."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def storage_ptr(t):
    """The address of the tensor's storage: the block its allocator gave it, shared by its views."""
    return storage_of(t).data_ptr()


def whole_storage(t):
    """A flat tensor over all of t's storage, in t's dtype."""
    storage = storage_of(t)
    return t.new_empty(0).set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))


def nbytes(t):
    """The tensor's own bytes (numel x element size), not its storage's."""
    return t.numel() * t.element_size()


def timed(device, run):
    """run() once; returns (its result, milliseconds): CUDA events around it on a GPU, after
    a synchronize so that earlier work is not counted, the wall clock on the CPU."""
    if device.type != "cuda":
        t0 = time.perf_counter()
        out = run()
        return out, (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = run()
    end.record()
    torch.cuda.synchronize(device)
    return out, start.elapsed_time(end)


def cuda_device(name, tool):
    """torch.device(name), after checking that a cuda device exists (SystemExit naming `tool` otherwise)."""
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"{tool}: no CUDA device (torch.cuda.is_available() is False); use --device cpu")
        torch.cuda.set_device(device)
    return device
