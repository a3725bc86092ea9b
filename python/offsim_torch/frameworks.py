#!/usr/bin/env python3
"""Six frameworks' activation-offload handlers, written again after their code, on one model.

A second, independent description of what offsim's `framework =` presets
claim: each handler below follows the hook structure, streams, events and
waits of one framework's real code (read through the repository search tool;
our own code, not a copy), not offsim's model of it.  On a GPU the handlers
use torch.cuda streams and events, so a run measures where offsim is wrong;
on CPU the streams are synchronous stand-ins and the run checks only what is
counted: copies, bytes, host memory, filters, and that loss and gradients
equal a resident run bit for bit.

The model is hf_models.py's op-by-op HuggingFace decoder
(qwen2 / llama / mistral layouts) built from a config.json with random
weights; on CPU it runs the CUDA kernels' stand-ins (kernels = "cuda": SDPA
saves what PyTorch's CUDA kernels save), on a GPU torch's own kernels.  One
training step: embedding, decoder layers, final norm, LM head, HF's
ForCausalLMLoss, backward.  Every preset runs `--steps` steps (default 2:
one warm-up, which Megatron needs to find its groups and which fills
PyTorch's caching host allocator) and reports the last.

What each handler mirrors (file and line as docs/reference.md, "How frameworks
schedule activation offload", cites them; the
versions read here are named where they differ):

save_on_cpu   torch/autograd/graph.py, class save_on_cpu: a saved_tensors_hooks
              pair around the whole forward and loss.  pack_to_cpu copies every
              saved reference (parameters and weight views too) to host memory
              at save time on the compute stream: `tensor.cpu()` (pageable)
              unless pin_memory=True (torch.empty(pin_memory=True) + copy_,
              blocking); unpack_from_cpu `.to(device)`.  Host tensors
              (`.cpu()` of a CPU tensor) are not copied.

verl          verl/utils/activation_offload.py (read at 34ae987):
              enable_activation_offloading wraps each decoder layer's forward
              (wrap_module_forward_method; fewer than 3 layers: no offload),
              enters the hooks only inside it, and commits the layer's output
              through GroupCommitFunction.  AsyncDoubleBufferGroupOffloadHandler
              with num_offload_group = L - 1 (the last layer kept), its
              layer_window_map, tensor_push (FSDPParameterFilter: parameters
              skipped by storage pointer), bulk_offload_group on a D2H stream
              with dedup on (storage data_ptr + storage_offset, dtype) and one
              torch.empty(src.size(), pin_memory=True) per unique tensor (a
              contiguous copy of the first view saved), synchronize_on_group_
              commit_forward (d2h waits compute, compute waits d2h, group k
              freed and group k+1 issued at commit k+1; the last commit waits
              for the last offload before the loss head), on_group_commit_
              backward (reload of group k-1 on an H2D stream at the backward
              commit of group k: h2d waits compute, compute waits h2d; at
              group 0 compute waits h2d), bulk_reload_group
              (`cpu_backup.to(dev).view(shape)`).

te            transformer_engine/pytorch/cpu_offload.py, current path (read:
              the file that imports cpu_offload_v1; OffloadableLayerState,
              DefaultOffloadSynchronizer).  A context per layer (fwd_step at
              enter), a synchronization function at the layer output whose
              grad_fn prehook calls bwd_step; ONE offload stream for both
              directions.  push_tensor records an event per tensor at save;
              start_offload of layer j at the next fwd_step: each copy waits
              on its tensor's event (so it can start during layer j's
              forward on the device), pinned empty_like per tensor per step
              (retain_pinned_cpu_buffers = False); finish_offload_map: the
              forward of layer L-n+j waits for layer j's copies and frees
              them; start_reload_map: layer j reloads at bwd_step of layer
              L-1-n+j, each tensor waited on at pop; release_all_memory at
              the next bwd_step frees the reloaded group and its pinned
              buffers.  Filter (_check_if_offload): nn.Parameter, marked,
              non-device and non-contiguous tensors stay; views with their
              base's numel are offloaded as the base (_switch_to_base_
              tensors) and deduplicated by object identity.  Size filter:
              < 2^18 elements stay, as docs/reference.md reads @d0067d0 l. 459-474
              (the version read here has none; an older one, 00382b9, has
              DEFAULT_MIN_TENSOR_SIZE_TO_OFFLOAD = 2**20 elements): --te-min.
              n = num_layers = L - 1 by default (--te-layers).

megatron      megatron/core/pipeline_parallel/fine_grained_activation_offload.py
              (read at 008df8a): FineGrainedOffloadingGroupStartFunction on a
              module's input, the hooks around the module, FineGrainedOffloading
              GroupCommitFunction on its output; ChunkOffloadHandler's
              tensor_push (every non-parameter device tensor), bulk_offload_
              group on the D2H stream for tensors with >= 1024 * 1024 elements
              (min_offloaded_tensor_size, init_model_chunk_offload_handler),
              non-contiguous ones made contiguous, host buffers from the
              OffloadTensorPool (pinned, keyed by shape and dtype, reset
              every iteration), record_stream (device memory freed at copy
              end); no dedup; after the warm-up iteration the last group of
              each name stays (post_warmup_callback, should_bulk_offload);
              on_group_start_backward (the group's backward has ended) reloads
              the newest offloaded group on the H2D stream after its offload
              event; on_group_commit_backward makes compute wait for that
              group's reload; tensor_pop reloads inline what was not reloaded
              (the warm-up iteration's last groups).  Modules, as
              TransformerLayer and SelfAttention wrap them (transformer_layer.py
              l. 709-764, 818-830, 1109-1115; attention.py l. 1386-1395,
              1552-1607, 1626-1629): attn_norm (started at the layer input,
              hooks around input_layernorm, committed after the residual add),
              qkv_linear (the q, k and v projections, committed on q),
              core_attn (the attention function, from q), attn_proj (o_proj),
              mlp_norm (as attn_norm, around post_attention_layernorm): the
              dense choices of --offload-modules (--megatron-modules, all five
              by default).
              Single chunk: no pipeline parallelism, CUDA graphs, delayed
              offload, offload fraction or per-rank deltas.

torchtune     torchtune/training/_activation_offloading.py (read at 05cda5e, again at
              bd2a0fc):
              OffloadActivations around the model's forward (the loss outside,
              as the recipes compute it), NoOpManager around the output head.
              pack_tensor: every save takes a tensor id; tensors of >= 1024
              bytes that are not nn.Parameter / nn.Buffer objects go to the
              host on one side stream s1 (s1 waits s0), pinned empty_like per
              tensor; before each, s0 waits for and drops stashed tensors five
              or more ids back (max_fwd_stash_size = 5).  unpack_tensor_with_
              streams: on demand; a tensor still in the forward stash is used
              from the device (its copy was wasted), else H2D on s1 and s0
              waits s1 at once; the first backward node's hook empties the
              forward stash.  torch < 2.1 has no torch._C._current_autograd_
              node: the stash is then emptied after the first unpack of an
              offloaded tensor (exact for these models, whose first such node,
              the final RMSNorm's weight multiply, unpacks one).

torchtune-ckpt
              the same with every decoder layer checkpointed (torchtune's
              recommended mode): PyTorch >= 2.1's non-reentrant checkpoint
              saves the layer's input with save_for_backward before its
              region (torch/utils/checkpoint.py, _NoopSaveInputs), so the hook
              moves exactly the checkpoint inputs; the harness stands in
              such a checkpoint (SaveInputsCheckpoint), since torch 1.13's
              keeps its inputs in a closure no hook sees.

deepspeed     deepspeed/runtime/activation_checkpointing/checkpointing.py at the
              latest release, v0.19.5 (cf44300), with cpu_checkpointing:
              CheckpointFunction (reentrant) around every layer;
              copy_to_device(args, torch.device('cpu')) before the layer runs
              (l. 530-531: `.to('cpu')`, a blocking pageable copy), the layer
              under no_grad, the caller's input emptied (arg.data = empty,
              get_cpu_activations_for_backward l. 474-485); backward copies it
              back with t.saved_data.to(t.device) (l. 615-618, blocking,
              pageable), recomputes and back-propagates.  No input is kept.

deepspeed-master
              the same file on master (read at 02f59ea and again at edaa722,
              after #8282, in no release) with cpu_checkpointing: CheckpointFunction
              (reentrant) around every layer, forward under no_grad; the
              layer's floating-point inputs go to _ActivationOffloadEngine
              (offload_activations.py: keep_last_count = 1, min_offload_bytes
              = 0, max_fwd_stash_count = 2, pinned pool of up to 64 buffers
              keyed by shape and dtype, one side stream): the newest input stays
              on the device, older ones start D2H when a newer one arrives;
              the caller's tensor is emptied (arg.data = empty); backward
              restores on demand (kept, or still in the forward stash: no
              copy; else H2D on the side stream, compute waits), recomputes
              and back-propagates.  Everything else is recomputed.

Host memory: every pinned buffer (torch.empty(pin_memory=True), .pin_memory())
is served by PyTorch's CachingHostAllocator, which rounds each request up to
a power of two and keeps freed blocks for reuse by the same size class; the
harness accounts for that (host_peak_rounded: the rounded sizes of the live
blocks; host_reserved: the blocks the allocator holds after all steps).
Pageable memory (save_on_cpu's default) is counted at its size.  On CPU there
is no pinned memory: buffers are plain tensors, counted as the allocator would.

Counted per step: D2H and H2D copies and bytes (a copy whose source is host
memory, e.g. SDPA's philox seed and offset, is a host copy, counted apart),
copies whose source storage is a parameter's (weights saved as views by
nn.Linear are not nn.Parameter objects), skipped saved tensors by reason.
On CPU a "host" tensor is one the harness made, or a 0-dim int64 (the
SDPA stand-in's philox seed and offset, which live in host memory on CUDA).

What the CPU runs found (printed as "finding:" lines, pinned by
tests/frameworks_test.py): verl's dedup key joins SDPA's output (saved as a
transposed (batch, heads, seq, dim) view) and o_proj's input (a (tokens,
hidden) view of the same storage at the same offset); the reload rebuilds the
second with .view(shape) of the first's contiguous copy, and the o_proj
weight gradients of the offloaded layers come out wrong.  torchtune copies
weights: nn.Linear saves weight.t(), a view that is no nn.Parameter.
Megatron's gradients are within rounding of resident, not bit for bit, even
with nothing copied (its identity functions reorder gradient accumulation).

Simplified everywhere: one micro-batch, no FSDP / tensor or pipeline
parallelism, no CUDA graphs, fp8 or quantized tensors; stream waits and
events are the frameworks' own, but the harness cannot reproduce the host
thread's timing (on CPU nothing overlaps).

Usage (from python/, or with PYTHONPATH=python or the package installed):
  /usr/bin/python3 -m offsim_torch.frameworks --device cpu --check --out fw.json --write-scenario fw.ini
  python3 -m offsim_torch.frameworks --device cuda --dtype bf16 --out fw.json   # on a GPU
"""
import argparse
import collections
import contextlib
import json
import math
import os
import sys
import time
import weakref

import torch

from offsim_torch import hf_models
from offsim_torch.tensors import cuda_device, nbytes, storage_of, storage_ptr, timed

HERE = os.path.dirname(os.path.abspath(__file__))

PRESETS = ("save_on_cpu", "verl", "te", "megatron", "torchtune", "torchtune-ckpt", "deepspeed", "deepspeed-master")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DEFAULT_CONFIG = os.path.join(HERE, "..", "..", "tests", "data", "hf", "configs", "qwen2-fw.json")
# Which presets reload every byte they offload (the others reuse device copies).
RELOADS_EVERYTHING = ("save_on_cpu", "verl", "te", "megatron", "deepspeed")


def next_pow2(n):
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


# ----------------------------------------------------------------- runtime --

class _CpuStream:
    """A stream stand-in on CPU: everything runs at once, in order."""

    def __init__(self, name):
        self.name = name


class HostMemory:
    """Host buffers as PyTorch's allocators serve them.  Pinned: the
    CachingHostAllocator, each request rounded up to a power of two, freed
    blocks kept per size class and reused.  Pageable: malloc, exact size."""

    def __init__(self):
        self.live_raw = self.live_rounded = 0
        self.peak_raw = self.peak_rounded = 0
        self.reserved = 0               # pinned bytes the caching allocator holds
        self.cached = collections.Counter()  # rounded size -> free blocks
        self.pinned_allocs = self.pageable_allocs = 0

    def track(self, t, pinned):
        raw = nbytes(t)
        rounded = next_pow2(raw) if pinned else raw
        if pinned:
            self.pinned_allocs += 1
            if self.cached[rounded] > 0:
                self.cached[rounded] -= 1
            else:
                self.reserved += rounded
        else:
            self.pageable_allocs += 1
        self.live_raw += raw
        self.live_rounded += rounded
        self.peak_raw = max(self.peak_raw, self.live_raw)
        self.peak_rounded = max(self.peak_rounded, self.live_rounded)
        weakref.finalize(t, self._free, raw, rounded, pinned)

    def _free(self, raw, rounded, pinned):
        self.live_raw -= raw
        self.live_rounded -= rounded
        if pinned:
            self.cached[rounded] += 1

    def begin_step(self):
        self.peak_raw, self.peak_rounded = self.live_raw, self.live_rounded
        self.pinned_allocs = self.pageable_allocs = 0


class Traffic:
    def __init__(self):
        self.d2h_bytes = self.d2h_copies = self.h2d_bytes = self.h2d_copies = 0
        self.host_copy_bytes = self.host_copies = 0
        self.param_storage_copies = self.param_object_copies = 0
        self.skipped = collections.defaultdict(lambda: [0, 0])  # reason -> [tensors, bytes]
        self.copied = collections.defaultdict(lambda: [0, 0])   # what -> [copies, bytes], D2H only

    def as_dict(self):
        return {
            "d2h_bytes": self.d2h_bytes, "d2h_copies": self.d2h_copies,
            "h2d_bytes": self.h2d_bytes, "h2d_copies": self.h2d_copies,
            "host_copy_bytes": self.host_copy_bytes, "host_copies": self.host_copies,
            "param_storage_copies": self.param_storage_copies,
            "param_object_copies": self.param_object_copies,
            "skipped": {k: {"tensors": v[0], "bytes": v[1]} for k, v in sorted(self.skipped.items())},
            "copied": {k: {"copies": v[0], "bytes": v[1]} for k, v in sorted(self.copied.items())},
        }


class Runtime:
    """Streams, events, copies and host buffers: torch.cuda on a GPU,
    synchronous stand-ins on CPU; every copy a handler makes is counted here."""

    def __init__(self, device):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.host = HostMemory()
        self.traffic = Traffic()
        self.param_storages = set()
        self._compute = None if self.cuda else _CpuStream("compute")

    # streams and events
    def new_stream(self, name):
        return torch.cuda.Stream(self.device) if self.cuda else _CpuStream(name)

    def current_stream(self):
        return torch.cuda.current_stream(self.device) if self.cuda else self._compute

    def stream(self, s):
        return torch.cuda.stream(s) if self.cuda else contextlib.nullcontext()

    def wait_stream(self, waiter, other):
        if self.cuda:
            waiter.wait_stream(other)

    def record_event(self, stream=None):
        if not self.cuda:
            return None
        ev = torch.cuda.Event()
        ev.record(stream if stream is not None else self.current_stream())
        return ev

    def wait_event(self, stream, ev):
        if self.cuda and ev is not None:
            stream.wait_event(ev)

    def record_stream(self, t, s):
        if self.cuda:
            t.record_stream(s)

    # where tensors live
    def on_device(self, t):
        if self.cuda:
            return t.is_cuda
        if getattr(t, "_offsim_host", False):
            return False
        # The SDPA stand-in's philox seed and offset: host memory on CUDA.
        return not (t.dim() == 0 and t.dtype == torch.int64)

    def where(self, t):
        return "device" if self.on_device(t) else "host"

    # buffers
    def host_empty(self, shape, dtype, pinned):
        if self.cuda:
            h = torch.empty(tuple(shape), dtype=dtype, device="cpu", pin_memory=pinned)
        else:
            h = torch.empty(tuple(shape), dtype=dtype)
        h._offsim_host = True
        self.host.track(h, pinned)
        return h

    def device_empty(self, shape, dtype, stride=None):
        if stride is not None:
            return torch.empty_strided(tuple(shape), tuple(stride), dtype=dtype, device=self.device)
        return torch.empty(tuple(shape), dtype=dtype, device=self.device)

    def count(self, src, dst_bytes, src_where, dst_where, what=None):
        t = self.traffic
        if src_where == "device" and dst_where == "host":
            t.d2h_bytes += dst_bytes
            t.d2h_copies += 1
            if what:
                t.copied[what][0] += 1
                t.copied[what][1] += dst_bytes
        elif src_where == "host" and dst_where == "device":
            t.h2d_bytes += dst_bytes
            t.h2d_copies += 1
        elif src_where == "host" and dst_where == "host":
            t.host_copy_bytes += dst_bytes
            t.host_copies += 1
        if src_where == "device":
            if storage_ptr(src) in self.param_storages:
                t.param_storage_copies += 1
            if isinstance(src, torch.nn.Parameter):
                t.param_object_copies += 1

    def copy(self, dst, src, non_blocking=False, what=None):
        """dst.copy_(src), counted by where both live."""
        src_where, dst_where = self.where(src), self.where(dst)
        dst.copy_(src, non_blocking=non_blocking and self.cuda)
        self.count(src, nbytes(dst), src_where, dst_where, what)
        return dst

    def to_host_pageable(self, t, what=None):
        """tensor.cpu(): a pageable copy, or t itself if it is host memory."""
        if not self.on_device(t):
            return t
        h = t.to("cpu") if self.cuda else t.clone()
        h._offsim_host = True
        self.host.track(h, pinned=False)
        self.count(t, nbytes(h), "device", "host", what)
        return h

    def to_device(self, h, src_where, non_blocking=False):
        """host_tensor.to(original_device): no copy if that device was the host."""
        if src_where == "host":
            return h
        d = h.to(self.device, non_blocking=non_blocking) if self.cuda else h.clone()
        self.count(h, nbytes(d), "host", "device")
        return d

    def skip(self, reason, t):
        s = self.traffic.skipped[reason]
        s[0] += 1
        s[1] += nbytes(t)

    def begin_step(self):
        self.traffic = Traffic()
        self.host.begin_step()


def what_of(t):
    """A label for the copies' breakdown: dtype and shape."""
    return f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}"


def decoder_layers(model):
    return list(model.model.layers)


def patch_forward(module, make):
    """Replace module.forward by make(original), as verl's
    wrap_module_forward_method does; returns the undo."""
    original = module.forward
    module.forward = make(original)
    return lambda: module.__dict__.pop("forward", None)


# ------------------------------------------------------------ save_on_cpu --

class SaveOnCpu:
    """torch.autograd.graph.save_on_cpu around the forward and the loss."""
    name = "save_on_cpu"

    def __init__(self, rt, model, pin_memory=False):
        self.rt, self.pin_memory = rt, pin_memory

    def pack(self, t):
        rt = self.rt
        if not self.pin_memory:
            return (rt.where(t), rt.to_host_pageable(t, what_of(t)))
        # The pinned branch: empty(pin_memory=cuda available) + a blocking copy_.
        packed = rt.host_empty(t.size(), t.dtype, pinned=rt.cuda)
        rt.copy(packed, t, what=what_of(t))
        return (rt.where(t), packed)

    def unpack(self, packed):
        where, h = packed
        return self.rt.to_device(h, where, non_blocking=self.pin_memory)

    def model_context(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    loss_context = model_context

    def install(self, model):
        return []

    def begin_step(self):
        pass


# ------------------------------------------------------------------- verl --

class VerlCommit(torch.autograd.Function):
    """verl's GroupCommitFunction: identity; forward commits the group,
    backward is the group's backward commit."""

    @staticmethod
    def forward(ctx, tensor, handler):
        handler.on_group_commit_forward()
        ctx.handler = handler
        return tensor

    @staticmethod
    def backward(ctx, grad):
        ctx.handler.on_group_commit_backward()
        return grad, None


class Verl:
    """AsyncDoubleBufferGroupOffloadHandler with enable_activation_offloading's
    wiring: num_offload_group = L - 1, num_model_group = L."""
    name = "verl"

    def __init__(self, rt, model):
        self.rt = rt
        self.layers = decoder_layers(model)
        n_model = len(self.layers)
        self.enabled = n_model >= 3  # "not necessary to enable async activation offloading"
        self.num_offload_group = n_model - 1
        self.num_layers = n_model
        self.param_storage = set()
        # The load-balancing window of the handler's __init__.
        self.layer_window_map = {}
        constant = 0
        for i in range(self.num_offload_group):
            self.layer_window_map[i] = (self.num_layers // self.num_offload_group) * (i + 1) - 1
            if i < self.num_layers % self.num_offload_group:
                self.layer_window_map[i] += i + 1
                constant = i + 1
            else:
                self.layer_window_map[i] += constant
        self.d2h = rt.new_stream("d2h")
        self.h2d = rt.new_stream("h2d")
        self.reset()

    def reset(self):
        self.current_group, self.tensor_count_current_group = 0, 0
        self.tensor_tag_to_state = {}
        self.tensor_tag_to_buf = {}
        self.offloaded_group_count = 0
        self.group_offload_mapping = {}

    def begin_step(self):
        pass  # the handler's state returns to its start at the end of each backward

    # the hooks
    def tensor_push(self, tensor):
        if storage_ptr(tensor) in self.param_storage:  # FSDPParameterFilter
            self.rt.skip("parameter storage", tensor)
            return tensor
        tag = (self.current_group, self.tensor_count_current_group)
        self.tensor_count_current_group += 1
        self.tensor_tag_to_state[tag] = tensor
        if self.current_group < self.num_offload_group:
            self.tensor_tag_to_buf[tag] = tensor
        else:
            self.rt.skip("last layer", tensor)
        return tag

    def tensor_pop(self, tag):
        if isinstance(tag, torch.Tensor):
            return tag
        tensor = self.tensor_tag_to_state.pop(tag)
        self.tensor_tag_to_buf.pop(tag, None)
        assert isinstance(tensor, torch.Tensor), f"group {tag[0]} was not reloaded"
        return tensor

    # offload and reload
    def offload(self, src):
        """SynchronizedGroupOffloadHandler.offload: a pinned buffer of the
        saved view's size, non-blocking copy."""
        rt = self.rt
        cpu_backup = rt.host_empty(src.size(), src.dtype, pinned=True)
        rt.copy(cpu_backup, src, non_blocking=True, what=what_of(src))
        return (rt.where(src), cpu_backup)

    def bulk_offload_group(self, group):
        rt = self.rt
        mapping = {}
        with rt.stream(self.d2h):
            for tag, state in self.tensor_tag_to_state.items():
                if tag[0] == group:
                    assert isinstance(state, torch.Tensor)
                    # _get_unique_tensor_key: storage data_ptr + storage_offset (elements), dtype
                    key = (storage_ptr(state) + state.storage_offset(), state.dtype)
                    if key not in mapping:
                        mapping[key] = state
                    else:
                        rt.skip("dedup (same pointer+offset, dtype)", state)
                    self.tensor_tag_to_state[tag] = (key, state.shape)
            for key, tensor in mapping.items():
                mapping[key] = self.offload(tensor)
            self.group_offload_mapping[group] = mapping

    def synchronize_on_group_commit_forward(self, current_group):
        rt = self.rt
        if current_group == 0:
            rt.wait_stream(self.d2h, rt.current_stream())
            self.bulk_offload_group(current_group)
        if self.layer_window_map[self.offloaded_group_count] == current_group:
            rt.wait_stream(self.d2h, rt.current_stream())
            rt.wait_stream(rt.current_stream(), self.d2h)  # compute waits for D2H(k - 1)
            for tag in self.tensor_tag_to_buf:
                if tag[0] == self.offloaded_group_count:
                    self.tensor_tag_to_buf[tag] = None      # group k - 1 freed
            if self.offloaded_group_count < self.num_offload_group - 1:
                self.bulk_offload_group(self.offloaded_group_count + 1)
            self.offloaded_group_count += 1

    def on_group_commit_forward(self):
        self.synchronize_on_group_commit_forward(self.current_group)
        self.current_group += 1
        self.tensor_count_current_group = 0

    def bulk_reload_group(self, group):
        rt = self.rt
        with torch.no_grad(), rt.stream(self.h2d):
            mapping = self.group_offload_mapping.pop(group)
            for key, (where, cpu_backup) in mapping.items():
                mapping[key] = rt.to_device(cpu_backup, where, non_blocking=True)
            for tag, state in self.tensor_tag_to_state.items():
                if tag[0] == group and not isinstance(state, torch.Tensor):
                    key, shape = state
                    self.tensor_tag_to_state[tag] = mapping[key].view(shape)

    def on_group_commit_backward(self):
        rt = self.rt
        self.current_group -= 1
        assert self.current_group >= 0
        if self.layer_window_map[self.offloaded_group_count - 1] == self.current_group:
            rt.wait_stream(self.h2d, rt.current_stream())
            rt.wait_stream(rt.current_stream(), self.h2d)
            self.bulk_reload_group(self.offloaded_group_count - 1)
            self.offloaded_group_count -= 1 if self.offloaded_group_count > 1 else 0
        if self.current_group == 0:
            rt.wait_stream(rt.current_stream(), self.h2d)
            self.offloaded_group_count = 0

    # wiring
    def install(self, model):
        if not self.enabled:
            return []
        handler = self

        def make(original):
            def wrapped(*args, **kwargs):
                # pre_forward: the hooks on, the parameter filter refreshed
                handler.param_storage = {storage_ptr(p) for p in model.parameters()}
                with torch.autograd.graph.saved_tensors_hooks(handler.tensor_push, handler.tensor_pop):
                    out = original(*args, **kwargs)
                return VerlCommit.apply(out, handler)
            return wrapped
        return [patch_forward(layer, make) for layer in self.layers]

    def model_context(self):
        return contextlib.nullcontext()

    loss_context = model_context


# --------------------------------------------------------------------- te --

class TensorGroup:
    def __init__(self):
        self.tensor_list, self.events, self.aux = [], [], None


class TeLayerState:
    """OffloadableLayerState: one layer's tensors before offload, on the host,
    and after reload."""

    def __init__(self, te):
        self.te, self.rt = te, te.rt
        self.fwd = TensorGroup()
        self.cpu = TensorGroup()
        self.bwd = TensorGroup()
        self.aux = {}
        self.state = "not_offloaded"

    def _check_if_offload(self, t):
        rt = self.rt
        if isinstance(t, torch.nn.Parameter):
            rt.skip("nn.Parameter", t)
            return False
        if not rt.on_device(t):
            rt.skip("host tensor", t)
            return False
        if not t.is_contiguous():
            rt.skip("non-contiguous", t)
            return False
        if t.numel() < self.te.min_elements:
            rt.skip(f"< {self.te.min_elements} elements", t)
            return False
        return True

    def push_tensor(self, t):
        assert self.state == "not_offloaded"
        if self._check_if_offload(t):
            self.fwd.tensor_list.append(t)
            self.fwd.events.append(self.rt.record_event())  # ready to offload from here
            return len(self.fwd.tensor_list) - 1
        return t

    def pop_tensor(self, tag):
        if isinstance(tag, torch.Tensor):
            return tag
        if self.state == "not_offloaded":
            return self.fwd.tensor_list[tag]
        assert self.state == "reload_started"
        self.rt.wait_event(self.rt.current_stream(), self.bwd.events[tag])
        return self.bwd.tensor_list[tag]

    @staticmethod
    def _process_before_offload(group):
        """_switch_to_base_tensors (a view with its base's numel: the base)
        and _deduplicate_tensors (object identity)."""
        aux = {"views": [], "original_tensor_ids": []}
        for i, t in enumerate(group.tensor_list):
            if t._base is not None and t._base.numel() == t.numel():
                aux["views"].append((t.shape, t.stride(), t.storage_offset()))
                group.tensor_list[i] = t._base
            else:
                aux["views"].append(None)
        index, tensors, events = {}, [], []
        for i, t in enumerate(group.tensor_list):
            if id(t) not in index:
                index[id(t)] = len(tensors)
                tensors.append(t)
                events.append(group.events[i])
            aux["original_tensor_ids"].append(index[id(t)])
        group.tensor_list, group.events = tensors, events
        return group, aux

    def start_offload(self):
        rt, te = self.rt, self.te
        assert self.state == "not_offloaded"
        self.state = "offload_started"
        self.fwd, self.aux = self._process_before_offload(self.fwd)
        for i, t in enumerate(self.fwd.tensor_list):
            rt.wait_event(te.stream, self.fwd.events[i])
            with rt.stream(te.stream):
                host = rt.host_empty(t.shape, t.dtype, pinned=True)  # per tensor, per step
                self.cpu.tensor_list.append(host)
                rt.copy(host, t, non_blocking=True, what=what_of(t))
        self.finish_offload_event = rt.record_event(te.stream)

    def release_activation_forward_gpu_memory(self):
        assert self.state == "offload_started"
        self.state = "offload_finished"
        self.rt.wait_event(self.rt.current_stream(), self.finish_offload_event)
        self.fwd = TensorGroup()

    def start_reload(self):
        rt, te = self.rt, self.te
        assert self.state == "offload_finished"
        self.state = "reload_started"
        self.bwd = TensorGroup()
        for host in self.cpu.tensor_list:
            dev = rt.device_empty(host.shape, host.dtype)  # allocated on the compute stream
            rt.wait_stream(te.stream, rt.current_stream())
            with rt.stream(te.stream):
                rt.copy(dev, host, non_blocking=True)
            self.bwd.events.append(rt.record_event(te.stream))
            self.bwd.tensor_list.append(dev)
        # _restore_tensor_duplicates, then _switch_to_views
        ids = self.aux["original_tensor_ids"]
        self.bwd.tensor_list = [self.bwd.tensor_list[j] for j in ids]
        self.bwd.events = [self.bwd.events[j] for j in ids]
        for i, view in enumerate(self.aux["views"]):
            if view is not None:
                self.bwd.tensor_list[i] = self.bwd.tensor_list[i].as_strided(*view)

    def release_all_memory(self):
        self.fwd, self.cpu, self.bwd = TensorGroup(), TensorGroup(), TensorGroup()
        self.state = "not_offloaded"


class TransformerEngine:
    """DefaultOffloadSynchronizer with get_cpu_offload_context(num_layers=n,
    model_layers=L): one stream; layer j's copies must end before the forward
    of layer L-n+j, its reload starts at the backward of layer L-1-n+j."""
    name = "te"

    def __init__(self, rt, model, num_offloaded=None, min_elements=2 ** 18):
        self.rt = rt
        self.layers = decoder_layers(model)
        L = len(self.layers)
        n = L - 1 if num_offloaded is None else num_offloaded
        assert 0 <= n <= L - 1, "Cannot offload all layers: the last layer is not offloaded"
        self.num_layers, self.n, self.min_elements = L, n, min_elements
        self.stream = rt.new_stream("offload")  # both directions
        self.states = {i: TeLayerState(self) for i in range(L)}
        self.offload_layer_map = {i: i < n for i in range(L)}
        self.finish_offload_map = collections.defaultdict(list)
        self.start_reload_map = collections.defaultdict(list)
        for j in range(n):
            self.finish_offload_map[L - n + j].append(j)
            self.start_reload_map[L - 1 - n + j].append(j)
        self.num_of_fwds = None
        self.previous_bwd_layer_id = None
        self.current_layer_id = None

    def begin_step(self):
        pass

    def fwd_step(self):
        if self.num_of_fwds in (None, self.num_layers - 1):
            for s in self.states.values():
                s.release_all_memory()
            self.num_of_fwds = 0
        else:
            self.num_of_fwds += 1
        self.current_layer_id = self.num_of_fwds
        if self.offload_layer_map.get(self.current_layer_id - 1, False):
            self.states[self.current_layer_id - 1].start_offload()
        for j in self.finish_offload_map[self.current_layer_id]:
            self.states[j].release_activation_forward_gpu_memory()
        return self.current_layer_id

    def bwd_step(self, layer):
        if self.previous_bwd_layer_id is not None:
            self.states[self.previous_bwd_layer_id].release_all_memory()
        self.previous_bwd_layer_id = layer
        self.current_layer_id = layer
        for j in self.start_reload_map[layer]:
            self.states[j].start_reload()

    def finish_part_of_bwd(self):
        if self.previous_bwd_layer_id is not None:
            self.states[self.previous_bwd_layer_id].release_all_memory()
        self.previous_bwd_layer_id = None

    def push_tensor(self, t):
        return self.states[self.num_of_fwds].push_tensor(t)

    def pop_tensor(self, tag):
        return self.states[self.current_layer_id].pop_tensor(tag)

    def install(self, model):
        te = self

        def make(original):
            def wrapped(*args, **kwargs):
                layer = te.fwd_step()  # the context's __enter__
                with torch.autograd.graph.saved_tensors_hooks(te.push_tensor, te.pop_tensor):
                    out = original(*args, **kwargs)

                def hook(_):
                    torch.autograd.Variable._execution_engine.queue_callback(te.finish_part_of_bwd)
                    te.bwd_step(layer)
                out.grad_fn.register_prehook(hook)  # the synchronization function
                return out
            return wrapped
        return [patch_forward(layer, make) for layer in self.layers]

    def model_context(self):
        return contextlib.nullcontext()

    loss_context = model_context


# --------------------------------------------------------------- megatron --

class OffloadTensorPool:
    """Megatron's pinned host pool: per (shape, dtype), reused; reset marks
    every buffer free."""

    def __init__(self, rt):
        self.rt, self.pools = rt, {}

    def allocate(self, shape, dtype):
        pool = self.pools.setdefault((tuple(shape), dtype), {"free": collections.deque(), "all": []})
        if pool["free"]:
            return pool["free"].popleft()
        t = self.rt.host_empty(shape, dtype, pinned=True)
        pool["all"].append(t)
        return t

    def free(self, t):
        self.pools[(tuple(t.shape), t.dtype)]["free"].append(t)

    def reset(self):
        for pool in self.pools.values():
            pool["free"] = collections.deque(pool["all"])


class MegatronGroup:
    def __init__(self, name):
        self.name = name
        self.tensors = {}
        self.offload_event = self.reload_event = None
        self.offload = True
        self.total_offload_bytes = 0


class MegatronStart(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, handler, name):
        ctx.handler = handler
        handler.on_group_start_forward(name)
        return tensor

    @staticmethod
    def backward(ctx, grad):
        ctx.handler.on_group_start_backward()
        return grad, None, None


class MegatronCommit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, handler, name):
        handler.on_group_commit_forward(name)
        ctx.handler, ctx.name = handler, name
        return tensor

    @staticmethod
    def backward(ctx, grad):
        ctx.handler.on_group_commit_backward(ctx.name)
        return grad, None, None


class Megatron:
    """PipelineOffloadManager and one ChunkOffloadHandler (no pipeline
    parallelism): module groups, D2H and H2D streams, a pinned pool."""
    name = "megatron"
    MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm")
    # ChunkOffloadHandler.BASE_OFFLOAD_MIN_COVERAGE (l. 887-892)
    BASE_OFFLOAD_MIN_COVERAGE = 0.5

    def __init__(self, rt, model, modules=MODULES, min_elements=1024 * 1024):
        self.rt, self.modules, self.min_elements = rt, tuple(modules), min_elements
        self.layers = decoder_layers(model)
        self.d2h = rt.new_stream("d2h")
        self.h2d = rt.new_stream("h2d")
        self.pool = OffloadTensorPool(rt)
        self.is_warmup = True
        self.offload_groups = []
        self.steps = 0
        self.reset_chunk()

    def reset_chunk(self):
        self.index = 0                 # _offloaded_group_index
        self.groups_to_offload = []
        self.groups_to_reload = []
        self.reloading = []
        self.count = 0

    def begin_step(self):
        """PipelineOffloadManager.reset at each iteration: the pool freed, and
        after the warm-up iteration post_warmup_callback."""
        self.pool.reset()
        if self.steps == 1 and self.is_warmup:
            self.post_warmup_callback()
        self.steps += 1
        self.reset_chunk()

    def post_warmup_callback(self):
        self.is_warmup = False
        names = []
        for g in self.offload_groups:
            if g.name not in names:
                names.append(g.name)
        margin = len(names)  # get_max_deduplicated_groups
        last = {}
        for g in self.offload_groups:
            last[g.name] = g
        for g in last.values():  # the last group of each name stays on the device
            if margin > 0:
                g.offload = False
                margin -= 1

    def find(self, groups, name, start=0):
        return next((g for g in groups[start:] if g.name == name), None)

    # forward
    def on_group_start_forward(self, name):
        self.index += 1
        if self.is_warmup:
            self.offload_groups.append(MegatronGroup(name))
        else:
            for g in self.offload_groups[self.index - 1:]:
                if g.name == name:
                    break
                self.index += 1
        self.count = 0
        self.groups_to_offload.append(self.offload_groups[self.index - 1])

    def can_manage(self, t):
        return not isinstance(t, torch.nn.Parameter) and self.rt.on_device(t)

    def tensor_push(self, t):
        if not self.can_manage(t):
            self.rt.skip("nn.Parameter" if isinstance(t, torch.nn.Parameter) else "host tensor", t)
            return t
        tag = (self.index, self.count)
        self.count += 1
        self.offload_groups[self.index - 1].tensors[tag] = t
        return tag

    def tensor_pop(self, tag):
        if isinstance(tag, torch.Tensor):
            return tag
        t = self.offload_groups[tag[0] - 1].tensors.pop(tag)
        if isinstance(t, tuple):  # never reloaded: inline, on the compute stream
            self.rt.traffic.skipped["inline reload (warm-up)"][0] += 1
            t = self.reload(t)
        return t

    def needs_offload(self, t):
        if not self.can_manage(t):
            return False
        if t.numel() < self.min_elements:
            self.rt.skip(f"< {self.min_elements} elements", t)
            return False
        return True

    def offload(self, src):
        """ChunkOffloadHandler.offload (l. 895-934): a non-contiguous view over
        at least half its storage goes as the whole flat storage (and comes
        back as_strided), a smaller one as a gathered contiguous copy."""
        rt = self.rt
        view_meta = None
        if not src.is_contiguous():
            storage = storage_of(src)
            nbytes_storage = storage.nbytes()
            element = src.element_size()
            if nbytes_storage % element == 0 and src.numel() * element >= self.BASE_OFFLOAD_MIN_COVERAGE * nbytes_storage:
                view_meta = (src.size(), src.stride(), src.storage_offset())
                src = torch.empty(0, dtype=src.dtype, device=src.device).set_(storage)
                rt.traffic.skipped["view offloaded as its whole storage"][0] += 1
            else:
                src = src.contiguous()
                rt.traffic.skipped["view gathered into a contiguous copy"][0] += 1
        host = self.pool.allocate(src.shape, src.dtype)
        rt.copy(host, src, non_blocking=True, what=what_of(src))
        return (rt.where(src), host, view_meta)

    def reload(self, state):
        rt = self.rt
        where, host, view_meta = state
        dev = rt.device_empty(host.size(), host.dtype)
        rt.copy(dev, host, non_blocking=True)
        self.pool.free(host)
        if view_meta is not None:
            dev = dev.as_strided(*view_meta)
        return dev

    def should_bulk_offload(self, name):
        g = self.find(self.groups_to_offload, name)
        if self.is_warmup:
            return True
        if not g.offload:
            return False
        if self.find(self.offload_groups, name, self.index) is None:
            return False  # the last group of this name is about to be used
        return True

    def bulk_offload_group(self, g):
        rt = self.rt
        with rt.stream(self.d2h):
            for tag, t in list(g.tensors.items()):
                if self.needs_offload(t):
                    state = self.offload(t)
                    if self.is_warmup:
                        g.total_offload_bytes += nbytes(t)
                    rt.record_stream(t, self.d2h)  # freed when the copy ends
                    g.tensors[tag] = state
            g.offload_event = rt.record_event(self.d2h)

    def on_group_commit_forward(self, name):
        rt = self.rt
        rt.wait_stream(self.d2h, rt.current_stream())
        g = self.find(self.groups_to_offload, name)
        if self.should_bulk_offload(name):
            self.groups_to_reload.append(g)
            self.bulk_offload_group(g)
        else:
            for t in g.tensors.values():
                rt.skip("last group of its name", t)
        self.groups_to_offload.remove(g)

    # backward
    def bulk_reload_group(self):
        rt = self.rt
        g = self.groups_to_reload[-1]
        with rt.stream(self.h2d):
            rt.wait_event(self.h2d, g.offload_event)  # never before its own D2H
            for tag, state in list(g.tensors.items()):
                if isinstance(state, tuple):
                    g.tensors[tag] = self.reload(state)
            g.reload_event = rt.record_event(self.h2d)
        self.groups_to_reload.pop()
        self.reloading.append(g)

    def on_group_start_backward(self):
        rt = self.rt
        rt.wait_stream(self.h2d, rt.current_stream())
        if self.groups_to_reload:
            self.bulk_reload_group()

    def on_group_commit_backward(self, name):
        for g in self.reloading:
            if g.name == name:
                self.rt.wait_event(self.rt.current_stream(), g.reload_event)
                self.reloading.remove(g)
                break

    # wiring: FineGrainedActivationOffloadingInterface around each module
    def _start(self, name, first):
        return MegatronStart.apply(first, self, name) if name in self.modules else first

    def _hooks(self, name):
        if name not in self.modules:
            return contextlib.nullcontext()
        return torch.autograd.graph.saved_tensors_hooks(self.tensor_push, self.tensor_pop)

    def _commit(self, name, out):
        """fine_grained_offloading_group_offload: on a tuple, its first tensor (l. 1404-1413)."""
        if name not in self.modules:
            return out
        if isinstance(out, tuple):
            return (MegatronCommit.apply(out[0], self, name),) + out[1:]
        return MegatronCommit.apply(out, self, name)

    def _group(self, name, first, call):
        first = self._start(name, first)
        with self._hooks(name):
            out = call(first)
        return self._commit(name, out)

    def _layer_forward(self, layer):
        """TransformerLayer's forward as Megatron wraps it (transformer_layer.py
        l. 709-729, 760-764, 818-830, 1109-1115; attention.py l. 1386-1395):
        each norm's group starts at the block's input, its hooks around the
        norm only, committed after the block's residual add (the residual is
        the group's start output and is released then); the qkv_linear
        group around the three projections, committed on the query."""
        attn = layer.self_attn

        def attention(h, position_embeddings, attention_mask, position_ids):
            input_shape = h.shape[:-1]
            hidden_shape = (*input_shape, -1, attn.head_dim)
            q, k, v = self._group("qkv_linear", h, lambda x: (attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)))
            q, k, v = (t.view(hidden_shape).transpose(1, 2) for t in (q, k, v))
            cos, sin = position_embeddings if position_embeddings is not None else attn.rotary_emb(h, position_ids)
            q, k = hf_models.apply_rotary_pos_emb(q, k, cos, sin)
            interface = {"eager": hf_models.eager_attention, "sdpa": hf_models.sdpa_attention,
                         "sdpa-gqa": hf_models.sdpa_attention, "flash": hf_models.flash_attention}[attn.attention]
            out = interface(attn, q, k, v, attention_mask, attn.scaling, 0.0 if not attn.training else
                            attn.attention_dropout)
            out = out.reshape(*input_shape, -1).contiguous()
            return attn.o_proj(out)

        def forward(hidden_states, attention_mask=None, position_ids=None, position_embeddings=None):
            hidden_states = self._start("attn_norm", hidden_states)
            residual = hidden_states
            with self._hooks("attn_norm"):
                h = layer.input_layernorm(hidden_states)
            h = attention(h, position_embeddings, attention_mask, position_ids)
            hidden_states = self._commit("attn_norm", residual + h)
            hidden_states = self._start("mlp_norm", hidden_states)
            residual = hidden_states
            with self._hooks("mlp_norm"):
                h = layer.post_attention_layernorm(hidden_states)
            return self._commit("mlp_norm", residual + layer.mlp(h))
        return forward

    def install(self, model):
        undo = []
        for layer in self.layers:
            undo.append(patch_forward(layer, lambda original, layer=layer: self._layer_forward(layer)))
            if "attn_proj" in self.modules:
                undo.append(patch_forward(layer.self_attn.o_proj, lambda original: (
                    lambda x, *args, **kwargs: self._group("attn_proj", x, lambda y: original(y, *args, **kwargs)))))
        if "core_attn" in self.modules:
            # The attention function is looked up by name at each call.
            for fname in ("sdpa_attention", "eager_attention"):
                original = getattr(hf_models, fname)

                def wrapped(module, query, *args, original=original):
                    return self._group("core_attn", query, lambda q: original(module, q, *args))
                setattr(hf_models, fname, wrapped)
                undo.append(lambda fname=fname, original=original: setattr(hf_models, fname, original))
        return undo

    def model_context(self):
        return contextlib.nullcontext()

    loss_context = model_context


# -------------------------------------------------------------- torchtune --

class SaveInputsCheckpoint(torch.autograd.Function):
    """What a non-reentrant torch.utils.checkpoint of PyTorch >= 2.1 hands
    the saved-tensor hooks around it: its inputs, through save_for_backward
    (_NoopSaveInputs), before its region, whose own saves its inner hooks
    keep and recompute.  Here the region runs under no_grad and is
    recomputed in backward, after the inputs are unpacked.  torch 1.13's
    non-reentrant checkpoint holds its inputs in a closure instead, which no
    hook sees: on 1.13 the outer hook would move nothing."""

    @staticmethod
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        ctx.save_for_backward(*args)
        with torch.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = list(ctx.saved_tensors)  # unpacked: the hook reloads them
        return recompute_backward(ctx.run_function, inputs, grads)[1:]


class Torchtune:
    """OffloadActivations(use_pin_memory=True, use_streams=True,
    max_fwd_stash_size=5, min_offload_size=1024); with checkpoint, every
    decoder layer under a non-reentrant activation checkpoint, as torchtune's
    recipes wrap them (training/_activation_checkpointing.py)."""

    def __init__(self, rt, model, max_fwd_stash_size=5, min_offload_size=1024, checkpoint=False):
        self.name = "torchtune-ckpt" if checkpoint else "torchtune"
        self.checkpoint, self.layers = checkpoint, decoder_layers(model)
        self.rt = rt
        self.max_fwd_stash_size, self.min_bytes = max_fwd_stash_size, min_offload_size
        self.s1 = rt.new_stream("s1")  # one side stream, both directions
        self.node_api = hasattr(torch._C, "_current_autograd_node") and hasattr(torch._C, "_current_graph_task_id")
        self.tracker = {}
        self.tensor_id = 0
        self.is_first_forward_call = True
        self.is_first_backward_call = True
        self.fwd_stash = {}       # id -> (activation, event)
        self.bwd_tensor_stash = {}
        self.bwd_ev_stash = {}
        self.curr_graph_id = None
        self.curr_autograd_node = None
        self.head = model.lm_head

    def begin_step(self):
        pass

    def pack(self, activation):
        rt = self.rt
        if self.is_first_forward_call:
            assert not self.tracker, "backward pass should have cleared tracker of all tensors"
            self.is_first_forward_call = False
            self.is_first_backward_call = True
        self.tensor_id += 1
        tid = self.tensor_id
        is_buffer = hasattr(torch.nn, "Buffer") and isinstance(activation, torch.nn.Buffer)
        if nbytes(activation) >= self.min_bytes and not isinstance(activation, torch.nn.Parameter) \
                and not is_buffer:
            s0 = rt.current_stream()
            for i in list(self.fwd_stash):
                if i <= tid - self.max_fwd_stash_size:
                    _, ev = self.fwd_stash[i]
                    rt.wait_event(s0, ev)
                    del self.fwd_stash[i]
                else:
                    break
            rt.wait_stream(self.s1, s0)
            with rt.stream(self.s1):
                cpu = rt.host_empty(activation.shape, activation.dtype, pinned=True)
                rt.copy(cpu, activation, non_blocking=True, what=what_of(activation))
                self.tracker[tid] = (cpu, True, rt.where(activation))
            self.fwd_stash[tid] = (activation, rt.record_event(self.s1))
        else:
            reason = "nn.Parameter" if isinstance(activation, torch.nn.Parameter) else \
                ("nn.Buffer" if is_buffer else f"< {self.min_bytes} bytes")
            rt.skip(reason, activation)
            self.tracker[tid] = (activation, False, None)
        return tid

    def unpack(self, tid):
        rt = self.rt
        if self.is_first_backward_call:
            if self.node_api:
                self.curr_graph_id = torch._C._current_graph_task_id()

                def wait_and_del_remaining_references():
                    for i in list(self.bwd_tensor_stash):
                        rt.wait_event(self.s1, self.bwd_ev_stash.get(i))
                        del self.bwd_tensor_stash[i]
                torch.autograd.Variable._execution_engine.queue_callback(wait_and_del_remaining_references)
            self.is_first_backward_call = False
            self.is_first_forward_call = True
        maybe_gpu, modified, where = self.tracker[tid]
        if modified:
            s0 = rt.current_stream()
            prev_node_ids = []
            node = None
            if self.node_api:
                graph_id = torch._C._current_graph_task_id()
                node = torch._C._current_autograd_node()
                if graph_id == self.curr_graph_id and self.curr_autograd_node != node:
                    self.curr_autograd_node = node
                    prev_node_ids = list(self.bwd_tensor_stash)
            brought_back = True
            if tid in self.fwd_stash:
                maybe_gpu = self.fwd_stash[tid][0]  # still on the device: the copy was wasted
                brought_back = False
                rt.traffic.skipped["reload skipped: still in the forward stash"][0] += 1
                rt.traffic.skipped["reload skipped: still in the forward stash"][1] += nbytes(maybe_gpu)
            else:
                with rt.stream(self.s1):
                    maybe_gpu = rt.to_device(maybe_gpu, where, non_blocking=True)
                rt.wait_stream(s0, self.s1)  # compute waits at once
                self.bwd_tensor_stash[tid] = maybe_gpu

            def hook(outputs, inputs):
                if brought_back and tid in self.bwd_tensor_stash:
                    unpacked = self.bwd_tensor_stash[tid]
                    if any(o is not None and storage_ptr(o) == storage_ptr(unpacked) for o in outputs):
                        rt.record_stream(unpacked, s0)
                        del self.bwd_tensor_stash[tid]
                    else:
                        self.bwd_ev_stash[tid] = rt.record_event(s0)
                for i in list(self.fwd_stash):  # backward has begun: the forward stash goes
                    rt.wait_event(s0, self.fwd_stash[i][1])
                    del self.fwd_stash[i]
                for i in prev_node_ids:
                    rt.wait_event(self.s1, self.bwd_ev_stash.get(i))
                    self.bwd_tensor_stash.pop(i, None)
                return outputs

            if node is not None:
                node.register_hook(hook)
            else:
                # torch < 2.1: no current node; the first offloaded unpack's
                # node is taken to end before the next unpack.
                self.fwd_stash.clear()
                self.bwd_tensor_stash.clear()
        del self.tracker[tid]
        return maybe_gpu

    def install(self, model):
        def make(original):
            def wrapped(*args, **kwargs):
                # NoOpManager: the output head's saved tensors stay where they are
                with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                    return original(*args, **kwargs)
            return wrapped
        undo = [patch_forward(self.head, make)]
        if self.checkpoint:
            def checkpointed(original):
                def wrapped(hidden_states, *args, **kwargs):
                    return SaveInputsCheckpoint.apply(lambda x: original(x, *args, **kwargs), hidden_states)
                return wrapped
            undo += [patch_forward(layer, checkpointed) for layer in self.layers]
        return undo

    def model_context(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def loss_context(self):
        return contextlib.nullcontext()  # the recipes compute the loss outside


# -------------------------------------------------------------- deepspeed --

class DeepSpeedEngine:
    """_ActivationOffloadEngine as _get_cpu_offload_engine makes it:
    keep_last_count = 1, min_offload_bytes = 0 (the other defaults: pinned,
    a side stream, max_fwd_stash_count = 2, a pool of 64 buffers)."""

    def __init__(self, rt, keep_last_count=1, min_offload_bytes=0, max_fwd_stash_count=2, max_pool=64):
        self.rt = rt
        self.keep_last_count, self.min_bytes = keep_last_count, min_offload_bytes
        self.max_fwd_stash_count, self.max_pool = max_fwd_stash_count, max_pool
        self.s1 = rt.new_stream("s1")
        self.pool = {}
        self.pool_count = 0
        self.pending = []
        self.reset()

    def reset(self):
        self.next_id = 0
        self.tracker, self.fwd_stash, self.keep_last = {}, {}, {}

    def _should_skip(self, t):
        rt = self.rt
        reason = None
        if not rt.on_device(t):
            reason = "host tensor"
        elif nbytes(t) < self.min_bytes:
            reason = "small"
        elif isinstance(t, torch.nn.Parameter):
            reason = "nn.Parameter"
        elif t.numel() > 1 and 0 in t.stride():
            reason = "stride-0 view"
        if reason:
            rt.skip(reason, t)
        return reason is not None

    def _pool_buffer(self, key, t):
        if self.pool_count < self.max_pool:
            self.pool.setdefault(key, []).append(t)
            self.pool_count += 1

    def _reap_pending(self):
        pending, self.pending = self.pending, []
        for key, t, ev in pending:
            if ev is None or ev.query():
                self._pool_buffer(key, t)
            else:
                self.pending.append((key, t, ev))

    def _empty_cpu_like(self, t):
        self._reap_pending()
        key = (tuple(t.size()), t.dtype)
        if self.pool.get(key):
            self.pool_count -= 1
            return self.pool[key].pop(), key
        return self.rt.host_empty(t.size(), t.dtype, pinned=True), key

    def _start_offload(self, tid, t, reap_id):
        rt = self.rt
        for i in list(self.fwd_stash):  # _reap_forward_stash
            if i <= reap_id - self.max_fwd_stash_count:
                self.fwd_stash.pop(i)
        rt.wait_stream(self.s1, rt.current_stream())
        with rt.stream(self.s1):
            cpu, key = self._empty_cpu_like(t)
            rt.copy(cpu, t.detach(), non_blocking=True, what=what_of(t))
        self.tracker[tid] = (cpu, rt.where(t), t.size(), t.stride(), key)
        rt.record_stream(t, self.s1)
        if self.max_fwd_stash_count > 0:
            self.fwd_stash[tid] = (t, rt.record_event(self.s1))

    def offload_input(self, t):
        if self._should_skip(t):
            return None
        self.next_id += 1
        tid = self.next_id
        self.keep_last[tid] = t
        while len(self.keep_last) > self.keep_last_count:  # _flush_keep_last
            oldest = next(iter(self.keep_last))
            self._start_offload(oldest, self.keep_last.pop(oldest), reap_id=tid)
        return tid

    def restore_input(self, tid):
        rt = self.rt
        kept = self.keep_last.pop(tid, None)
        if kept is not None:
            rt.traffic.skipped["kept on the device (keep_last_count)"][0] += 1
            rt.traffic.skipped["kept on the device (keep_last_count)"][1] += nbytes(kept)
            return kept
        if tid in self.fwd_stash:
            t, ev = self.fwd_stash.pop(tid)
            rt.wait_event(rt.current_stream(), ev)
            cpu, *_, key = self.tracker.pop(tid)
            self._pool_buffer(key, cpu)
            rt.traffic.skipped["reload skipped: still in the forward stash"][0] += 1
            rt.traffic.skipped["reload skipped: still in the forward stash"][1] += nbytes(t)
            return t
        cpu, where, shape, stride, key = self.tracker.pop(tid)
        with rt.stream(self.s1):
            dev = rt.device_empty(shape, cpu.dtype, stride)
            rt.copy(dev, cpu, non_blocking=True)
        ev = rt.record_event(self.s1)
        rt.wait_event(rt.current_stream(), ev)
        rt.record_stream(dev, rt.current_stream())
        self.pending.append((key, cpu, ev))
        return dev


def recompute_backward(run_function, inputs, grads):
    """CheckpointFunction.backward once the inputs are back: recompute the
    layer on detached inputs and back-propagate; the inputs' gradients."""
    detached = [x.detach().requires_grad_(x.requires_grad) if torch.is_tensor(x) else x for x in inputs]
    with torch.enable_grad():
        outputs = run_function(*detached)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    pairs = [(o, g) for o, g in zip(outputs, grads) if o.requires_grad]
    torch.autograd.backward([p[0] for p in pairs], [p[1] for p in pairs])
    return (None, None) + tuple(x.grad if torch.is_tensor(x) else None for x in detached)


class DeepSpeedReleaseCheckpoint(torch.autograd.Function):
    """CheckpointFunction with CPU_CHECKPOINT as every release runs it
    (v0.19.5 checkpointing.py l. 530-555, 615-630)."""

    @staticmethod
    def forward(ctx, run_function, rt, *args):
        ctx.run_function, ctx.rt = run_function, rt
        # copy_to_device(args, cpu, is_activation_to_checkpoint): .to('cpu') of
        # every floating-point input, before the layer runs.
        saved = [rt.to_host_pageable(a, what_of(a)) if torch.is_tensor(a) and a.is_floating_point() else None
                 for a in args]
        with torch.no_grad():
            outputs = run_function(*args)
        # get_cpu_activations_for_backward: the device input is emptied.
        ctx.where = [rt.where(a) if h is not None else None for a, h in zip(args, saved)]
        for a, h in zip(args, saved):
            if h is not None:
                a.data = torch.empty([], device=a.device, dtype=a.dtype).data
        ctx.saved, ctx.args = saved, args
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        rt, inputs = ctx.rt, []
        for a, h, where in zip(ctx.args, ctx.saved, ctx.where):
            if h is not None:
                a.data = rt.to_device(h, where).data  # t.saved_data.to(t.device): blocking, pageable
            inputs.append(a)
        ctx.saved = ctx.args = None
        return recompute_backward(ctx.run_function, inputs, grads)


class DeepSpeedCheckpoint(torch.autograd.Function):
    """CheckpointFunction with CPU_CHECKPOINT and the offload engine (master)."""

    @staticmethod
    def forward(ctx, run_function, engine, *args):
        ctx.run_function, ctx.engine = run_function, engine
        with torch.no_grad():
            outputs = run_function(*args)
        # get_offloaded_activations_for_backward
        tokens, to_empty = {}, []
        for arg in args:
            if not (torch.is_tensor(arg) and arg.is_floating_point()):  # is_activation_to_checkpoint
                continue
            if id(arg) not in tokens:
                tokens[id(arg)] = engine.offload_input(arg.detach())
            token = tokens[id(arg)]
            if token is not None:
                arg.ds_offload_id = token
                to_empty.append(arg)
        for arg in to_empty:
            arg.data = torch.empty([], device=arg.device, dtype=arg.dtype).data
        ctx.saved = args
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        inputs = []
        for t in ctx.saved:  # restore_offloaded_activations
            token = getattr(t, "ds_offload_id", None) if torch.is_tensor(t) else None
            if token is not None:
                t.data = ctx.engine.restore_input(token).data
                t.ds_offload_id = None
            inputs.append(t)
        ctx.saved = None
        return recompute_backward(ctx.run_function, inputs, grads)


class DeepSpeed:
    """deepspeed.checkpointing with cpu_checkpointing = true around every
    layer: the release's blocking copies, or master's engine."""

    def __init__(self, rt, model, master=False):
        self.rt, self.master = rt, master
        self.name = "deepspeed-master" if master else "deepspeed"
        self.layers = decoder_layers(model)
        self.engine = DeepSpeedEngine(rt) if master else None

    def begin_step(self):
        if self.engine:
            self.engine.reset()

    def install(self, model):
        engine, rt = self.engine, self.rt

        def make(original):
            def wrapped(hidden_states, *args, **kwargs):
                run = lambda x: original(x, *args, **kwargs)  # noqa: E731
                if engine is None:
                    return DeepSpeedReleaseCheckpoint.apply(run, rt, hidden_states)
                return DeepSpeedCheckpoint.apply(run, engine, hidden_states)
            return wrapped
        return [patch_forward(layer, make) for layer in self.layers]

    def model_context(self):
        return contextlib.nullcontext()

    loss_context = model_context


# -------------------------------------------------------------------- run --

def make_handler(name, rt, model, args):
    if name == "save_on_cpu":
        return SaveOnCpu(rt, model, pin_memory=args.pin_memory)
    if name == "verl":
        return Verl(rt, model)
    if name == "te":
        return TransformerEngine(rt, model, args.te_layers, args.te_min)
    if name == "megatron":
        return Megatron(rt, model, args.megatron_modules.split(","), args.megatron_min)
    if name in ("torchtune", "torchtune-ckpt"):
        return Torchtune(rt, model, checkpoint=name == "torchtune-ckpt")
    if name in ("deepspeed", "deepspeed-master"):
        return DeepSpeed(rt, model, master=name == "deepspeed-master")
    raise ValueError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})")


def one_step(model, ids, labels, handler):
    """Forward (the model, then HF's loss), backward; the loss."""
    model.zero_grad(set_to_none=True)
    model_ctx = handler.model_context() if handler else contextlib.nullcontext()
    loss_ctx = handler.loss_context() if handler else contextlib.nullcontext()
    with model_ctx:
        hidden = model.model(ids)
        logits = model.lm_head(hidden)
    with loss_ctx:
        loss = hf_models.causal_lm_loss(logits, labels, model.config["vocab_size"])
    del hidden, logits  # outputs = dropped
    loss.backward()
    return loss.detach()


def run_preset(name, model, ids, labels, rt, args, reference):
    handler = make_handler(name, rt, model, args) if name != "resident" else None
    undo = handler.install(model) if handler else []
    cuda = rt.cuda
    steps = []
    try:
        for _ in range(args.steps):
            rt.begin_step()
            if handler:
                handler.begin_step()
            if cuda:
                torch.cuda.synchronize(rt.device)
                torch.cuda.reset_peak_memory_stats(rt.device)
            loss, ms = timed(rt.device, lambda: one_step(model, ids, labels, handler))
            steps.append({"ms": ms, "traffic": rt.traffic.as_dict(),
                          "peak_allocated_bytes": torch.cuda.max_memory_allocated(rt.device) if cuda else None,
                          "host_peak_bytes": rt.host.peak_raw, "host_peak_rounded": rt.host.peak_rounded,
                          "pinned_allocs": rt.host.pinned_allocs, "pageable_allocs": rt.host.pageable_allocs,
                          "host_reserved": rt.host.reserved})
    finally:
        for u in undo:
            u()
    grads = [p.grad.detach().clone() if p.grad is not None else None for p in model.parameters()]
    result = dict(steps[-1]["traffic"])
    result.update({
        "preset": name,
        "step_ms": [s["ms"] for s in steps],
        "peak_allocated_bytes": steps[-1]["peak_allocated_bytes"],
        "host_peak_bytes": steps[-1]["host_peak_bytes"],
        "host_peak_rounded": steps[-1]["host_peak_rounded"],
        "host_reserved": rt.host.reserved,
        "host_reserved_by_step": [s["host_reserved"] for s in steps],
        "pinned_allocs": steps[-1]["pinned_allocs"],
        "pageable_allocs": steps[-1]["pageable_allocs"],
        "first_step": steps[0]["traffic"] if len(steps) > 1 else None,
        "loss": float(loss.float()),
    })
    if reference is not None:
        ref_loss, ref_grads = reference
        result["loss_equal"] = bool(torch.equal(loss, ref_loss))
        differ, worst, rel = [], 0.0, 0.0
        for (pname, _), g, r in zip(model.named_parameters(), grads, ref_grads):
            if (g is None) != (r is None):
                differ.append(pname)
                continue
            if g is not None and not torch.equal(g, r):
                differ.append(pname)
                d = (g.float() - r.float()).abs().max().item()
                worst = max(worst, d)
                rel = max(rel, d / max(r.float().abs().max().item(), 1e-30))
        result["grads_equal"] = not differ
        result["grads_differ"] = differ
        result["grad_max_abs_diff"] = worst
        result["grad_max_rel_diff"] = rel
    return result, (loss, grads)


def scenario_text(args, out_path):
    """The offsim scenario of this workload: one policy per preset."""
    base = os.path.dirname(os.path.abspath(out_path))
    rel_config = os.path.relpath(os.path.abspath(args.config), base)
    lines = [
        "# Written by offsim_torch.frameworks: the workload its handlers ran, for offsim to predict.",
        "# One policy per framework preset, under the preset's name.",
        "[scenario]",
        f"name = frameworks harness: {os.path.basename(args.config)}, batch {args.batch}x{args.seq} {args.dtype}, sdpa",
    ]
    if args.profile:
        lines.append(f"include = {os.path.relpath(os.path.abspath(args.profile), base)}")
    lines += [
        "",
        "[transformer]",
        f"hf_config = {rel_config}",
        f"batch = {args.batch}",
        f"seq = {args.seq}",
        f"dtype = {args.dtype}",
        "attention = sdpa",
        "ops = hf",
        "",
        "[policy.resident]",
        "kind = resident",
    ]
    for name in args.presets:
        lines += ["", f"[policy.{name}]", "kind = offload", f"framework = {name.split('-')[0]}"]
        if name == "deepspeed-master":
            lines.append("version = master")
        if name == "torchtune-ckpt":
            lines.append("checkpoint = true")
        if name == "save_on_cpu" and args.pin_memory:
            lines.append("pin_memory = true")
        if name == "te" and args.te_layers is not None:
            lines.append(f"# the harness ran num_layers = {args.te_layers}")
        if name == "te" and args.te_min != 2 ** 18:
            lines.append(f"min_elements = {args.te_min}")
        if name == "megatron" and args.megatron_min != 1024 * 1024:
            lines.append(f"min_elements = {args.megatron_min}")
    return "\n".join(lines) + "\n"


def table(result):
    rows = [("preset", "D2H bytes", "D2H", "H2D bytes", "H2D", "host peak", "host peak (2^k)",
             "host reserved", "loss=", "grads=")]
    for r in result["presets"].values():
        rows.append((r["preset"], f"{r['d2h_bytes']:,}", str(r["d2h_copies"]), f"{r['h2d_bytes']:,}",
                     str(r["h2d_copies"]), f"{r['host_peak_bytes']:,}", f"{r['host_peak_rounded']:,}",
                     f"{r['host_reserved']:,}", str(r.get("loss_equal", "-")), str(r.get("grads_equal", "-"))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for k, row in enumerate(rows):
        out.append("| " + " | ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))) + " |")
        if k == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def skipped_lines(result):
    out = []
    for r in result["presets"].values():
        if r["preset"] == "resident":
            continue
        parts = [f"{k}: {v['tensors']} ({v['bytes']:,} B)" for k, v in r["skipped"].items()]
        out.append(f"{r['preset']}: kept or not copied: " + ("; ".join(parts) if parts else "nothing")
                   + f"; copies of parameter storage: {r['param_storage_copies']}"
                   + f" (nn.Parameter objects: {r['param_object_copies']}); host copies: {r['host_copies']}"
                   + f" ({r['host_copy_bytes']:,} B)")
    return out


def verl_dedup_victims(result):
    """The parameters whose gradient verl's dedup is expected to corrupt: the
    o_proj weights of the offloaded layers (0 .. L-2).  SDPA saves its output
    as a (batch, heads, seq, dim) transposed view of a (batch, seq, heads,
    dim) storage, o_proj saves a (tokens, hidden) view of the same storage at
    the same offset: one key, and bulk_reload_group rebuilds the second with
    .view(shape) of the first's contiguous copy, in the wrong element order."""
    return [f"model.layers.{i}.self_attn.o_proj.weight" for i in range(result["layers"] - 1)]


def check(result):
    """The invariants every run must satisfy, and what the handlers found
    about the frameworks (not failures); returns (failures, findings)."""
    failures, findings = [], []
    p = result["presets"]
    for name, r in p.items():
        if name == "resident":
            continue
        if not r["loss_equal"]:
            failures.append(f"{name}: the loss differs from resident")
        if not r["grads_equal"]:
            if name == "verl" and r["grads_differ"] == verl_dedup_victims(result):
                findings.append(f"verl: gradients of {', '.join(r['grads_differ'])} differ from resident "
                                f"(max abs {r['grad_max_abs_diff']:.3g}): the dedup key (pointer + offset, dtype) "
                                "joins SDPA's output and o_proj's input, reloaded with the wrong layout")
            elif name == "megatron" and r["grad_max_rel_diff"] <= 1e-5:
                findings.append(f"megatron: gradients equal to resident within {r['grad_max_rel_diff']:.2g} "
                                "relative, not bit for bit (the group start/commit identity functions change "
                                "autograd's accumulation order; measured with nothing copied too)")
            else:
                failures.append(f"{name}: gradients differ from resident in {len(r['grads_differ'])} parameters "
                                f"(max abs {r['grad_max_abs_diff']:.3g})")
        if r["d2h_copies"] == 0:
            failures.append(f"{name}: copied nothing")
        if name in RELOADS_EVERYTHING and (r["d2h_bytes"], r["d2h_copies"]) != (r["h2d_bytes"], r["h2d_copies"]):
            failures.append(f"{name}: D2H {r['d2h_bytes']} B in {r['d2h_copies']}, H2D {r['h2d_bytes']} B in "
                            f"{r['h2d_copies']}: a framework that reloads everything")
        if name != "save_on_cpu" and r["param_object_copies"]:
            failures.append(f"{name}: copied an nn.Parameter")
        if name == "torchtune" and r["param_storage_copies"]:
            findings.append(f"torchtune: {r['param_storage_copies']} copies of weights: nn.Linear saves weight.t(), "
                            "a view that is no nn.Parameter, and its 1 KiB filter lets it through")
    return failures, findings


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="an HF config.json (qwen2, llama, mistral)")
    parser.add_argument("--batch", type=int, default=66)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--dtype", choices=sorted(DTYPES), help="default fp32 on CPU, bf16 on CUDA")
    parser.add_argument("--presets", default=",".join(PRESETS), help="comma-separated, from: " + ", ".join(PRESETS))
    parser.add_argument("--steps", type=int, default=2, help="steps per preset, the last reported (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pin-memory", action="store_true", help="save_on_cpu(pin_memory=True)")
    parser.add_argument("--te-layers", type=int, help="TE num_layers (default L - 1)")
    parser.add_argument("--te-min", type=int, default=2 ** 18, help="TE: tensors below this many elements stay")
    parser.add_argument("--megatron-modules", default=",".join(Megatron.MODULES))
    parser.add_argument("--megatron-min", type=int, default=1024 * 1024,
                        help="Megatron min_offloaded_tensor_size, elements")
    parser.add_argument("--out", help="the JSON result")
    parser.add_argument("--write-scenario", metavar="FILE", help="the offsim scenario of this workload")
    parser.add_argument("--profile", metavar="FILE", help="a profile the scenario includes")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the invariants hold")
    args = parser.parse_args(argv)
    args.presets = [p for p in args.presets.split(",") if p]
    for p in args.presets:
        if p not in PRESETS:
            parser.error(f"--presets: unknown preset {p!r} (known: {', '.join(PRESETS)})")
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    device = cuda_device(args.device, "frameworks.py")
    cuda = device.type == "cuda"
    args.dtype = args.dtype or ("bf16" if cuda else "fp32")
    dtype = DTYPES[args.dtype]
    with open(args.config) as f:
        config = json.load(f)
    # CPU: the CUDA kernels' stand-ins, so that autograd saves what CUDA saves.
    kernels = "cpu" if cuda else "cuda"
    model = hf_models.build_model(config, attention="sdpa", kernels=kernels, dtype=dtype, device=device,
                                  seed=args.seed)
    ids, labels = hf_models.make_batch(config, args.batch, args.seq, device=device, seed=args.seed)
    result = {
        "schema": "offsim-frameworks/1",
        "config": os.path.relpath(os.path.abspath(args.config)),
        "batch": args.batch, "seq": args.seq, "dtype": args.dtype, "attention": "sdpa", "kernels": kernels,
        "device": str(device), "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
        "measurement": cuda, "torch": torch.__version__, "steps": args.steps,
        "layers": len(decoder_layers(model)),
        "command": " ".join([os.path.basename(sys.argv[0])] + (argv if argv is not None else sys.argv[1:])),
        "presets": {},
    }
    reference = None
    for name in ["resident"] + args.presets:
        rt = Runtime(device)
        rt.param_storages = {storage_ptr(p) for p in model.parameters()}
        started = time.perf_counter()
        r, ref = run_preset(name, model, ids, labels, rt, args, reference)
        if reference is None:
            reference = ref
        result["presets"][name] = r
        print(f"frameworks.py: {name} done [{time.perf_counter() - started:.1f} s]", file=sys.stderr)
        del rt
    print(table(result))
    for line in skipped_lines(result):
        print(line)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    if args.write_scenario:
        with open(args.write_scenario, "w") as f:
            f.write(scenario_text(args, args.write_scenario))
    failures, findings = check(result)
    for finding in findings:
        print(f"frameworks.py: finding: {finding}")
    if args.check:
        for failure in failures:
            print(f"frameworks.py: check failed: {failure}", file=sys.stderr)
        if failures:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
