#!/usr/bin/env python3
"""Record what autograd saves in one training step of any torch.nn.Module.

Usage from a script (the model on the CPU or on the meta device):

    from offsim_torch.recorder import Recorder
    with Recorder(model) as rec:            # layers found, or Recorder(model, layers=[...])
        loss = model(ids, labels=ids).loss
        loss.backward()
    rec.write_csv("trace.csv")             # the [trace] CSV, new columns at the end
    rec.write_json("trace.json")           # the allocated-memory curve and its peak

Inside the context every pack call of torch.autograd.graph.saved_tensors_hooks
becomes one row (autograd packs once per saved reference), and every offload
group (layer) adds a row for its input (saved = 0).  Module forward hooks say
which module and which layer run; just before the first backward (the
context patches torch.autograd.backward and torch.autograd.grad) the
autograd graph is walked and every saved tensor is unpacked once, so that
each row learns the node that saved it and the slot (`MulBackward0.other`).
On the CPU, torch.profiler.profile(profile_memory=True) records every
allocation and free of the step; zero-cost profiler markers (module, layer,
Python-level torch function, phase, backward layer boundaries through tensor
hooks on the layers' outputs) place each one, so that the peak comes with its
phase, layer, module, function, autograd node and ATen op.  The markers are
ordered, never timed, so the curve and the places are the same on every run.

Op counts: flops.py's dispatch-level counter adds, after the tensor rows, one
compute row per (layer, phase, op, ATen op) with its FLOPs, bytes moved and
calls (columns flops, moved, calls), which offsim can time layers by.  An op
is a forward op (a run of one module: forward_op) or an autograd node
(backward_op, by the order nodes end; post-hooks in the counting step); the
tensor rows carry both, the op that saved them and the node that unpacks
them, so that offsim builds each layer's op list from the file.
Memory profiling and the counter change each other's view, so record() runs
the step twice on the CPU (memory, then counts); on meta once.

Command line (python3 -m offsim_torch.recorder from python/, or anywhere with
PYTHONPATH=python or the package installed; the repository's op-by-op HF
implementations, hf_models.py):

    python3 -m offsim_torch.recorder --hf-config CONFIG --batch B --seq S --dtype fp32|bf16
                --attention eager|sdpa|sdpa-gqa|flash --device cpu|meta
                [--kernels cuda|cpu] --out trace.csv [--json trace.json]
    python3 -m offsim_torch.recorder --summary trace.csv       # per-layer table (Markdown)

A model of your own:

    python3 -m offsim_torch.recorder --module PATH.py:FACTORY --batch B --seq S --dtype fp32|bf16
                --device cpu|meta [--layers ATTR.PATH] --out trace.csv

PATH.py is a file, loaded on its own (what it imports must be importable:
installed, or on PYTHONPATH); MODULE:FACTORY names an importable module
instead (offsim_torch.moe_models:qwen3_moe_tiny, offsim_torch.decoder:tiny).
FACTORY is called as FACTORY(batch=B, seq=S, device=torch.device(D),
dtype=torch.DTYPE) (under a mode that puts tensors made without a device on
D, so a model built from nn modules lands on meta without allocating) and
returns either
  - (model, step): step(model) runs one training step (forward, loss,
    backward) at batch B and sequence S, with the user's own inputs and loss;
  - or model alone: the recorder runs loss = model(ids, labels) with ids =
    labels = torch.zeros(B, S, dtype=long) on D and calls loss.backward();
    the forward returns the loss (a 0-dim tensor, an object with .loss, or a
    tuple starting with it).
The layers (offload groups) are the longest nn.ModuleList or nn.Sequential
named layers, h, layer or blocks (model.layers, transformer.h,
encoder.layer, blocks), or --layers ATTR.PATH.  Exit 2 naming what is wrong:
no such file or module, no such factory, the factory or step raising, a bad return,
no layers found, a bad --layers path, an op without a meta kernel on meta.
python/offsim_torch/examples/tiny_moe.py is an example.

Exit status: 0; 1 an unexpected error; 2 a bad option or config field.
See tests/data/hf/README.md for the columns, the adjustments made for torch
1.13 and what is and is not measured.
"""
import argparse
import gc
import json
import os
import sys
import weakref

import torch
from torch.overrides import TorchFunctionMode

from offsim_torch import lifetimes as _lifetimes
from offsim_torch.tensors import nbytes, storage_ptr


COLUMNS = ("layer", "op", "name", "bytes", "dtype", "shape", "is_parameter", "storage", "storage_bytes", "saved",
           "leaf", "node", "slot", "module", "phase", "packed", "host", "unpack", "adjust", "flops", "moved", "calls",
           "forward_op", "backward_op", "freed_layer", "freed_phase", "freed_op")

# The columns only an allocation row (lifetimes.py: workspace, transient, grad, held) fills.
FREED = ("freed_layer", "freed_phase", "freed_op")

# The columns a compute row (flops.py's counts of one op in one place) fills; the others are empty
# or 0, so that a reader tells the two kinds of rows apart by `flops`.
COMPUTE_ONLY = ("flops", "moved", "calls")

LAYER_LISTS = ("layers", "h", "layer", "blocks")

# adjust codes (tests/data/hf/README.md): rows the recording torch packed
# that current PyTorch (2.2 and later) does not pack get saved = 0.
ADJUST_MEAN = "mean-input"          # MeanBackward saved its input up to torch 2.1 (pytorch#109935)
ADJUST_WRAPPED = "wrapped-number"   # a Python scalar as a 0-dim CPU tensor; later torch skips the pack hook
ADJUST_EMBEDDING = "embedding-weight-unsure"  # torch 1.13 saves the weight; current torch: not established


def _torch_version():
    parts = []
    for p in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


# ---------------------------------------------------------------- markers --

def _marker(name):
    """A zero-length profiler event; unlike torch.profiler.record_function it allocates nothing."""
    try:
        handle = torch.ops.profiler._record_function_enter_new(name, None)
        torch.ops.profiler._record_function_exit._RecordFunction(handle)
    except (AttributeError, RuntimeError):
        with torch.profiler.record_function(name):
            pass


# ------------------------------------------------------------ layer lists --

def find_layers(model):
    """The offload groups: the longest nn.ModuleList named layers, h, layer or blocks.

    Returns (list path, modules); ValueError when there is none."""
    best = None
    for name, module in model.named_modules():
        if (isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)) and name.split(".")[-1] in LAYER_LISTS
                and len(module)):
            if best is None or len(module) > len(best[1]):
                best = (name, list(module))
    if best is None:
        raise ValueError("no layer list found (an nn.ModuleList or nn.Sequential named layers, h, layer or "
                         "blocks): give the layers (--layers PATH, Recorder(layers=...))")
    return best


def layers_at(model, path):
    """The modules of the list at attribute path `path` ("model.layers"); ValueError naming what is wrong."""
    obj = model
    done = []
    for part in path.split("."):
        if not part or not hasattr(obj, part):
            where = ".".join(done) or type(model).__name__
            raise ValueError(f"layers '{path}': {where} has no attribute '{part}'")
        obj = getattr(obj, part)
        done.append(part)
    if isinstance(obj, torch.nn.Module) and not isinstance(obj, (torch.nn.ModuleList, torch.nn.Sequential)):
        raise ValueError(f"layers '{path}': a {type(obj).__name__}, not a list of layers (nn.ModuleList, "
                         "nn.Sequential or a list of modules)")
    try:
        modules = list(obj)
    except TypeError:
        raise ValueError(f"layers '{path}': a {type(obj).__name__}, not a list of layers") from None
    if not modules or not all(isinstance(m, torch.nn.Module) for m in modules):
        raise ValueError(f"layers '{path}': expected a non-empty list of modules")
    return modules


class _Packed:
    """What the pack hook returns: the tensor (autograd holds it, as without hooks) and its row."""

    __slots__ = ("tensor", "row", "__weakref__")

    def __init__(self, tensor, row):
        self.tensor, self.row = tensor, row


def _storage_key(t):
    """(StorageImpl address, storage bytes) on any device, meta included.

    The address of the storage object itself rather than its data pointer:
    every meta storage has data pointer 0, but each has its own StorageImpl,
    which views and in-place ops keep."""
    if hasattr(t, "untyped_storage"):
        s = t.untyped_storage()
        return s._cdata, s.nbytes()
    s = t.storage()
    inner = getattr(s, "_storage", s)
    return inner._cdata, s.nbytes()


def _shape(t):
    return "x".join(str(n) for n in t.shape) or "scalar"


def _dtype(t):
    return str(t.dtype).replace("torch.", "")


class _FunctionMarks(TorchFunctionMode):
    """Marks the start and end of every Python-level torch call (linear, matmul, __mul__, ...)."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rec = self.recorder
        if rec._busy or not rec._profiling:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", None) or str(func)
        _marker("offsim::fn:" + name)
        try:
            return func(*args, **kwargs)
        finally:
            _marker("offsim::fn-end")


class Recorder:
    """Records one training step run inside the `with` block (see the module docstring).

    model: the nn.Module; layers: the offload-group modules (found when None);
    memory: profile the allocated memory (default: on the CPU, not on meta);
    flops: count each op's FLOPs and bytes (flops.py; default: when memory is
    off: the two change each other, record() runs a second step for the counts).
    A layer's input is its first tensor argument (or `hidden_states` where
    the torch passes keyword arguments to hooks).  One step per context: the
    graph is walked before the first backward only."""

    def __init__(self, model, layers=None, memory=None, flops=None, lifetimes=None):
        self.model = model
        if layers is None:
            self.layers_path, layers = find_layers(model)
        else:
            layers = list(layers)
            self.layers_path = None
        self.layers = layers
        names = {m: n for n, m in model.named_modules()}
        for layer in layers:
            if layer not in names:
                raise ValueError("a layer given is not a submodule of the model")
        if self.layers_path is None:
            first = names[layers[0]]
            self.layers_path = first.rsplit(".", 1)[0] if "." in first else ""
        self._names = names
        self._layer_index = {layer: i for i, layer in enumerate(layers)}
        self._prefix = self.layers_path.rsplit(".", 1)[0] + "." if "." in self.layers_path else ""
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        self.device = device.type
        self.memory_enabled = (device.type == "cpu") if memory is None else memory
        # The counter's Python dispatch changes the allocation events the profiler sees
        # (llama-sdpa-bf16: 2545 against 2395), so one step does not do both: record()
        # counts in a second step.
        self.flops_enabled = (not self.memory_enabled) if flops is None else flops
        if self.flops_enabled and self.memory_enabled:
            raise ValueError("memory profiling and the FLOP counter change each other: one per step (see record())")
        self._counter = None
        # Every allocation's lifetime (lifetimes.py) needs alloc_log.c preloaded; by default
        # used when it is and memory is profiled.
        log = _lifetimes.loaded() if self.memory_enabled and lifetimes is not False else None
        if lifetimes and log is None:
            raise ValueError("lifetimes need memory profiling and alloc_log.c preloaded (LD_PRELOAD: "
                             "recorder.py --alloc-log)")
        self._log = log
        self.allocations = None   # the allocation rows, when the lifetimes were recorded
        self.node_names = []      # the counting step's nodes, in the order they ended
        self.nodes_run = []       # the memory step's nodes, in the order they ran
        self.rows = []
        self.memory = None
        self._busy = False
        self._profiling = False
        self._handles = []
        self._storage_ids = {}
        self._modules = []
        self._scope = "embed"
        self._phase = "forward"
        self._walking = None
        self._walking_queue = []
        self._walked = False
        self._unpack_count = 0
        # Op places (the forward_op and backward_op columns): the forward's runs of one
        # module, counted at every module entry and exit (the same in every run of a step,
        # so that the memory step's rows and the counting step's agree); the backward's
        # nodes by the order they end in, which only the counting step learns (post-hooks
        # on the nodes would change the memory step: autograd then keeps each node's
        # incoming gradients until the hooks ran).  Nodes are known across the two steps
        # by their place in the graph walk.
        self._fop = 0
        self._walk_id = None      # the node being walked
        self._row_walk = {}       # row index -> walk id of the node that saved it
        self.node_order = {}      # walk id -> place in the backward (set by the counting step)
        self._ended = 0
        self._orig = {}
        self._params = set()
        self.static = {}

    # ---------------------------------------------------------- naming --
    def _op_name(self, module_path):
        """The `op` column: layers.<i>.<path in layer>, or the path outside the layers, or root."""
        if not module_path:
            return "root"
        lp = self.layers_path + "."
        if module_path.startswith(lp):
            return "layers." + module_path[len(lp):]
        if self._prefix and module_path.startswith(self._prefix):
            return module_path[len(self._prefix):]
        return module_path

    def _storage_id(self, t):
        """A small id per storage, stable across views and in-place ops.

        The StorageImpl address identifies a storage while it lives; a freed
        address can be reused, so an address counts as the same storage only
        while some tensor recorded with it is still alive."""
        key, storage_bytes = _storage_key(t)
        entries = self._storage_ids.setdefault(key, [])
        if entries:
            sid, refs = entries[-1]
            if any(r() is not None for r in refs):
                refs.append(weakref.ref(t))
                return sid, storage_bytes
        sid = sum(len(v) for v in self._storage_ids.values())
        entries.append((sid, [weakref.ref(t)]))
        return sid, storage_bytes

    def _row(self, t, op, module, name, saved, packed):
        sid, storage_bytes = self._storage_id(t)
        key = _storage_key(t)[0]
        return {
            "layer": self._scope, "op": op, "name": name, "bytes": nbytes(t),
            "dtype": _dtype(t), "shape": _shape(t), "is_parameter": int(key in self._params),
            "storage": sid, "storage_bytes": storage_bytes, "saved": saved, "leaf": int(t.grad_fn is None),
            "node": "", "slot": "", "module": module, "phase": self._phase, "packed": packed, "host": 0,
            "unpack": "", "adjust": "", "flops": "", "moved": "", "calls": "",
            "forward_op": self._fop, "backward_op": "", "freed_layer": "", "freed_phase": "", "freed_op": "",
            "_wrapped": _maybe_wrapped(t, self.device),
        }

    # ----------------------------------------------------------- hooks --
    def _pack(self, t):
        self._busy = True
        try:
            module = self._modules[-1] if self._modules else ""
            producer = _node_name(t.grad_fn) if t.grad_fn is not None else "leaf"
            row = self._row(t, self._op_name(module), module, producer, 1, 1)
            if self._log is not None:
                row["_block"] = (storage_ptr(t), self._log.count())
            self.rows.append(row)
            return _Packed(t, len(self.rows) - 1)
        finally:
            self._busy = False

    def _unpack(self, packed):
        row = self.rows[packed.row]
        if self._walking is not None:
            if self._walking_queue:
                name, slot, host = self._walking_queue.pop(0)
            else:
                name, slot, host = self._walking
            if not row["node"]:
                row["node"], row["slot"] = name, slot
                self._row_walk[packed.row] = self._walk_id
                if host:
                    row["host"] = 1
        elif row["unpack"] == "":
            row["unpack"] = self._unpack_count
            self._unpack_count += 1
        return packed.tensor

    def _pre_kwargs(self, module, args, kwargs):
        self._pre(module, args, kwargs)

    def _pre(self, module, args, kwargs=None):
        path = self._names[module]
        self._modules.append(path)
        self._fop += 1
        self._busy = True
        try:
            if self._profiling:
                _marker("offsim::module:" + path)
            index = self._layer_index.get(module)
            if index is not None:
                self._scope = str(index)
                if self._profiling:
                    _marker("offsim::scope:" + self._scope)
                x = next((a for a in args if isinstance(a, torch.Tensor)), None)
                if x is None and kwargs:
                    x = kwargs.get("hidden_states")
                    x = x if isinstance(x, torch.Tensor) else next(
                        (v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)
                if x is not None:
                    self.rows.append(self._row(x, "layer_input", self._names[module], "input", 0, 0))
                    if index == 0 and x.requires_grad and self._tracks_backward():
                        x.register_hook(lambda g: self._backward_scope("embed"))
        finally:
            self._busy = False

    def _post(self, module, args, out):
        if self._modules:
            self._modules.pop()
        self._fop += 1
        self._busy = True
        try:
            if self._profiling:
                _marker("offsim::module-end")
            index = self._layer_index.get(module)
            if index is not None:
                y = out if isinstance(out, torch.Tensor) else next(
                    (o for o in (out if isinstance(out, (tuple, list)) else ()) if isinstance(o, torch.Tensor)), None)
                if y is not None and y.requires_grad and self._tracks_backward():
                    scope = str(index)
                    y.register_hook(lambda g, scope=scope: self._backward_scope(scope))
                if index == len(self.layers) - 1:
                    self._scope = "head"
                    if self._profiling:
                        _marker("offsim::scope:head")
        finally:
            self._busy = False

    def _tracks_backward(self):
        """Whether backward must know its layer: for the memory curve's places or the op counts."""
        return self._profiling or self._counter is not None

    def _backward_scope(self, scope):
        """A layer's backward starts (the gradient of its output is complete) or, for
        "embed", the first layer's has ended: autograd runs the nodes of a later layer
        first (higher sequence numbers), so each layer's backward ops fall between."""
        if self._phase == "backward":
            self._scope = scope
        if self._profiling:
            _marker("offsim::scope:" + scope)

    def _where(self):
        """(scope, phase, op, module, place) of the op running, for the counter; backward runs no
        module hooks, and its place (the node) is known when the node ends (_node_ended)."""
        if self._phase == "backward":
            return self._scope, self._phase, "", "", None
        module = self._modules[-1] if self._modules else ""
        return self._scope, self._phase, self._op_name(module), module, self._fop

    def _node_ended(self, walk_id, name):
        """A post-hook: the node walked walk_id-th ended; the ops counted since the last one are its."""
        def hook(grad_inputs, grad_outputs):
            self.node_order[walk_id] = self._ended
            self.node_names.append(name)
            self._counter.node_done(self._ended, name)
            self._ended += 1
        return hook

    # ------------------------------------------------------ graph walk --
    def _walk(self, roots):
        """Unpack every saved tensor once, so that each row learns its node and slot."""
        self._busy = True
        try:
            seen = set()
            stack = [t.grad_fn for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None]
            while stack:
                node = stack.pop()
                if node is None or node in seen:
                    continue
                self._walk_id = len(seen)
                seen.add(node)
                if self._counter is not None:
                    node.register_hook(self._node_ended(self._walk_id, _node_name(node)))
                fwd = getattr(node, "_forward_cls", None)
                if fwd is not None:
                    # A custom autograd.Function (a stand-in names the CUDA node it mirrors):
                    # saved_tensors unpacks its tensors in order, one slot each.
                    name = _node_name(node)
                    slots = getattr(fwd, "slots", ())
                    host_slots = getattr(fwd, "host_slots", ())
                    try:
                        count = len(node._raw_saved_tensors)
                    except (AttributeError, RuntimeError):
                        count = 0
                    self._walking_queue = [(name, slots[i] if i < len(slots) else f"saved_tensors.{i}",
                                            (slots[i] if i < len(slots) else None) in host_slots)
                                           for i in range(count)]
                    self._walking = (name, "saved_tensors", False)
                    try:
                        node.saved_tensors
                    except RuntimeError:
                        pass
                    self._walking_queue = []
                else:
                    name = type(node).__name__
                    for attr in dir(node):
                        if attr.startswith("_saved_"):
                            self._walking = (name, attr[len("_saved_"):], False)
                            try:
                                getattr(node, attr)
                            except RuntimeError:
                                pass
                self._walking = None
                for nxt, _ in node.next_functions:
                    if nxt is not None:
                        stack.append(nxt)
        finally:
            self._walking = None
            self._busy = False

    def _patched_backward(self, orig):
        def backward(tensors, *args, **kwargs):
            roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
            if not self._walked:
                self._walk(roots)
                self._walked = True
            self._set_phase("backward")
            return orig(tensors, *args, **kwargs)
        return backward

    def _patched_grad(self, orig):
        def grad(outputs, *args, **kwargs):
            roots = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
            if not self._walked:
                self._walk(roots)
                self._walked = True
            self._set_phase("backward")
            return orig(outputs, *args, **kwargs)
        return grad

    def _set_phase(self, phase):
        self._phase = phase
        if phase == "backward":
            self._scope = "head"
        if self._profiling:
            _marker("offsim::phase:" + phase)

    # ----------------------------------------------------------- enter --
    def __enter__(self):
        model = self.model
        self._params = {_storage_key(p)[0] for p in model.parameters()}
        self.static = {
            "parameter_bytes": sum(nbytes(p) for p in {id(p): p for p in model.parameters()}.values()),
            "buffer_bytes": sum(nbytes(b) for b in model.buffers()),
        }
        for module, path in self._names.items():
            if module is model:
                continue
            try:  # torch >= 2.0 passes keyword arguments to pre-hooks that ask for them
                self._handles.append(module.register_forward_pre_hook(self._pre_kwargs, with_kwargs=True))
            except TypeError:
                self._handles.append(module.register_forward_pre_hook(self._pre))
            self._handles.append(module.register_forward_hook(self._post))
        self._orig = {"backward": torch.autograd.backward, "grad": torch.autograd.grad}
        torch.autograd.backward = self._patched_backward(self._orig["backward"])
        torch.autograd.grad = self._patched_grad(self._orig["grad"])
        self._prof = None
        if self.memory_enabled:
            # Garbage of earlier work (a previous recording's models and graphs) freed by
            # the cycle collector inside the step would be frees of unknown size in the curve.
            gc.collect()
            self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
            self._prof.__enter__()
            self._profiling = True
            _marker("offsim::phase:forward")
            _marker("offsim::scope:embed")
            if self._log is not None:
                self._log.start()
        self._fmode = _FunctionMarks(self)
        self._fmode.__enter__()
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        if self.flops_enabled:
            from offsim_torch import flops
            self._counter = flops.FlopCounter(self._where, enabled=lambda: not self._busy)
            self._counter.__enter__()
        return self

    def __exit__(self, *exc):
        if self._counter is not None:
            self._counter.node_done("", "")  # ops after the last node (none in a plain step): kept, placed nowhere
            self._counter.__exit__(*exc)
        self._hooks.__exit__(*exc)
        self._fmode.__exit__(*exc)
        if self._prof is not None:
            if self._log is not None:
                self._log.stop()
                self._grad_blocks = [(storage_ptr(p.grad), self._log.count()) for p in self.model.parameters()
                                     if p.grad is not None]
            _marker("offsim::phase:end")
            self._profiling = False
            self._prof.__exit__(*exc)
        torch.autograd.backward = self._orig["backward"]
        torch.autograd.grad = self._orig["grad"]
        for h in self._handles:
            h.remove()
        self._handles = []
        if exc[0] is None:
            self._finish()
        return False

    # ---------------------------------------------------------- finish --
    def _finish(self):
        old_torch = _torch_version() < (2, 2)
        for r in self.rows:
            wrapped = r.pop("_wrapped")
            if r["packed"] != 1:
                continue
            if old_torch and r["node"].startswith("MeanBackward") and r["slot"] == "self":
                r["saved"], r["adjust"] = 0, ADJUST_MEAN
            elif wrapped and not r["host"]:
                r["saved"], r["host"], r["adjust"] = 0, 1, ADJUST_WRAPPED
            elif old_torch and r["node"] == "EmbeddingBackward0" and r["slot"] == "weight":
                r["adjust"] = ADJUST_EMBEDDING
        if self._prof is not None:
            places = []
            self.memory = _memory_curve(self._prof, places, self.nodes_run)
            self.memory["static"] = self.static
            if self._log is not None:
                self.allocations = self._allocation_rows(places)
        for r in self.rows:
            r.pop("_block", None)

    def _allocation_rows(self, places):
        """The rows of every allocation that is not a saved storage (lifetimes.py)."""
        contexts = [tuple(self.memory["contexts"][c]) for _, _, c in self.memory["curve"]]
        deltas = [d for _, d, _ in self.memory["curve"]]
        freed, ptrs, pos = _lifetimes.lifetimes(self._log.entries(), deltas)
        packs = [r for r in self.rows if r["packed"] == 1]
        made = _lifetimes.allocations_at(pos, ptrs, deltas, [r["_block"] for r in packs])
        saved = {e for e, r in zip(made, packs) if e is not None and r["saved"] == 1}
        adjusted = {e for e, r in zip(made, packs) if e is not None and r["adjust"]} - saved
        grads = {e for e in _lifetimes.allocations_at(pos, ptrs, deltas, self._grad_blocks) if e is not None}
        rows = []
        for kind, i, j, nbytes in _lifetimes.classify(deltas, places, contexts, freed, saved, adjusted, grads):
            layer, phase, place = places[i]
            module = contexts[i][2]
            r = {c: "" for c in COLUMNS}
            r.update(layer=layer, op=self._op_name(module), name=kind, bytes=nbytes, is_parameter=0, saved=0,
                     node=contexts[i][4], module=module, phase=phase, packed=0, host=0)
            r["backward_op" if phase == "backward" else "forward_op"] = max(place, 0)
            if j is not None:
                r.update(freed_layer=places[j][0], freed_phase=places[j][1], freed_op=max(places[j][2], 0))
            rows.append(r)
        return rows

    # ----------------------------------------------------------- write --
    def compute_rows(self):
        """One row per (layer, phase, op, module, ATen op) the counter saw, in first-seen order:
        its FLOPs, bytes moved and calls; empty without the counter."""
        if self._counter is None:
            return []
        rows = []
        for (scope, phase, op, module, node, place, aten), (fl, moved, calls) in self._counter.rows.items():
            r = {c: "" for c in COLUMNS}
            r.update(layer=scope, op=op, name=aten, bytes=0, is_parameter=0, saved=0, node=node, module=module,
                     phase=phase, flops=fl, moved=moved, calls=calls)
            r["backward_op" if phase == "backward" else "forward_op"] = place
            rows.append(r)
        return rows

    def tensor_rows(self):
        """The rows of the saved references and layer inputs, each with the backward place of the node
        that saved it once a counting step has ended the nodes (node_order)."""
        rows = []
        for i, r in enumerate(self.rows):
            walk = self._row_walk.get(i)
            rows.append(dict(r, backward_op=self.node_order.get(walk, "") if walk is not None else ""))
        return rows

    def write_csv(self, path):
        with open(path, "w", newline="") as f:
            f.write(",".join(COLUMNS) + "\n")
            for r in self.tensor_rows() + self.compute_rows() + (self.allocations or []):
                f.write(",".join(str(r[c]) for c in COLUMNS) + "\n")

    def write_json(self, path, extra=None):
        doc = {"format": "offsim-record-memory/1", "torch": torch.__version__, "device": self.device,
               "threads": torch.get_num_threads()}
        doc.update(extra or {})
        if self._counter is not None and self._counter.meta_fallbacks:
            # Ops this torch has no meta kernel for, answered by flops.META_FALLBACKS (calls each).
            doc["meta_fallbacks"] = dict(sorted(self._counter.meta_fallbacks.items()))
        if self.memory is None:
            doc["memory"] = None
            doc["why"] = ("no allocations to profile on the meta device" if self.device == "meta"
                          else "memory profiling was off")
        else:
            doc.update(self.memory)
        with open(path, "w") as f:
            f.write(_json_text(doc))


def _node_name(node):
    """An autograd node's name; a stand-in's is the CUDA node it mirrors."""
    fwd = getattr(node, "_forward_cls", None)
    return getattr(fwd, "cuda_node", None) or type(node).__name__


def _maybe_wrapped(t, model_device):
    """A Python number autograd saved as a 0-dim CPU tensor (mul by a float: MulBackward0.other).

    torch 1.13 passes these to the pack hook; later versions skip them
    (saved_variable.cpp: "Avoid wrapped numbers from being leaked to the
    user").  Python has no is_wrapped_number(): a 0-dim float64/int64/
    complex128 CPU leaf that does not require grad is taken for one."""
    return (t.dim() == 0 and t.device.type == "cpu" and t.grad_fn is None and not t.requires_grad
            and t.dtype in (torch.float64, torch.int64, torch.complex128))


# ----------------------------------------------------------- memory curve --

# ATen ops that only allocate, alias or reshape: the place of an allocation is the op around them.
_PLUMBING = frozenset("aten::" + n for n in (
    "empty", "empty_strided", "empty_like", "resolve_conj", "resolve_neg", "as_strided", "view", "_reshape_alias",
    "_unsafe_view", "reshape", "t", "transpose", "expand", "detach", "alias", "unsqueeze", "squeeze", "permute",
    "select", "slice", "resize_", "lift_fresh", "zero_", "fill_", "numpy_T", "split", "narrow", "unbind"))


def _memory_curve(prof, places=None, nodes=None):
    """The allocated-memory curve from the profiler's events, placed by the markers.

    places, a list, receives per curve point its (layer, phase, place): the
    forward_op or backward_op the recorder's rows use (module entries and
    exits counted, autograd nodes counted as they start); nodes, a list,
    the autograd nodes in the order they ran."""
    events = prof.profiler.kineto_results.events()
    phase, scope, node, aten, standin = "other", "embed", "", "", ""
    fop, bop = 0, 0
    modules, fns = [], []
    node_module = {}  # autograd sequence number -> the module that ran the op in forward
    contexts, index = [], {}
    curve = []
    total = 0
    for e in events:
        name = e.name()
        if name == "[memory]":
            if not str(e.device_type()).endswith("CPU"):
                continue
            delta = int(e.nbytes())
            total += delta
            ctx = (phase, scope, modules[-1] if modules else "", fns[-1] if fns else "",
                   node if phase == "backward" else "", aten, standin)
            ci = index.setdefault(ctx, len(contexts))
            if ci == len(contexts):
                contexts.append(ctx)
            curve.append((total, delta, ci))
            if places is not None:
                places.append((scope, phase, bop - 1 if phase == "backward" else fop))
        elif name.startswith("offsim::"):
            kind, _, value = name[len("offsim::"):].partition(":")
            if kind == "phase":
                phase, node = value, ""
                modules, fns = [], []
                if value == "backward":
                    scope = "head"
            elif kind == "scope":
                scope = value
            elif kind == "module":
                modules.append(value)
                fop += 1
            elif kind == "module-end":
                fop += 1
                if modules:
                    modules.pop()
            elif kind == "fn":
                fns.append(value)
            elif kind == "fn-end":
                if fns:
                    fns.pop()
            elif kind == "standin":
                standin = value
            elif kind == "standin-end":
                standin = ""
        elif name.startswith("autograd::engine::evaluate_function: "):
            node = name[len("autograd::engine::evaluate_function: "):]
            bop += 1
            if nodes is not None:
                nodes.append(node)
            module_of_node = node_module.get(e.sequence_nr(), "") if e.sequence_nr() >= 0 else ""
            modules = [module_of_node] if module_of_node else []
        elif name.startswith("aten::"):
            if name not in _PLUMBING:
                aten = name
            if phase == "forward" and e.sequence_nr() >= 0 and modules:
                node_module.setdefault(e.sequence_nr(), modules[-1])

    def place(i):
        total_i, _, ci = curve[i]
        p, s, m, f, n, a, st = contexts[ci]
        return {"bytes": total_i, "event": i, "phase": p, "layer": s, "module": m, "function": f, "node": n,
                "aten": a, "standin": st}

    def peak_in(phase_name):
        best = None
        for i, (tot, _, ci) in enumerate(curve):
            if phase_name is None or contexts[ci][0] == phase_name:
                if best is None or tot > curve[best][0]:
                    best = i
        return place(best) if best is not None else None

    end_of_forward = 0
    for tot, _, ci in curve:
        if contexts[ci][0] == "forward":
            end_of_forward = tot
    return {
        "baseline": "bytes allocated before the context are not seen: the curve starts at 0",
        "events": len(curve),
        "peak": peak_in(None),
        "forward_peak": peak_in("forward"),
        "backward_peak": peak_in("backward"),
        "end_of_forward": end_of_forward,
        "final": total,
        "contexts_columns": ["phase", "layer", "module", "function", "node", "aten", "standin"],
        "contexts": [list(c) for c in contexts],
        "curve_columns": ["total", "delta", "context"],
        "curve": [list(c) for c in curve],
    }


def _json_text(doc):
    """JSON with one curve point or context per line: small diffs, byte-for-byte reproducible."""
    lines = ["{"]
    keys = list(doc)
    for k_i, key in enumerate(keys):
        value = doc[key]
        end = "," if k_i < len(keys) - 1 else ""
        if key in ("curve", "contexts") and isinstance(value, list):
            lines.append(f"  {json.dumps(key)}: [")
            for i, item in enumerate(value):
                lines.append("    " + json.dumps(item, separators=(",", ":")) + ("," if i < len(value) - 1 else ""))
            lines.append("  ]" + end)
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- summary --

def read_csv(path):
    with open(path) as f:
        header = f.readline().rstrip("\n").split(",")
        return [dict(zip(header, line.rstrip("\n").split(","))) for line in f if line.strip()]


def summarise(rows):
    """Per scope: unique storage bytes (counted in the first scope that saved it), reference
    bytes (views, and storages), references, leaves and parameter references."""
    order, table, owner = [], {}, {}
    for r in rows:
        scope = r["layer"]
        if scope not in table:
            order.append(scope)
            table[scope] = {"unique": 0, "ref_bytes": 0, "ref_storage_bytes": 0, "refs": 0, "leaves": 0,
                            "params": 0, "host_refs": 0}
        if r["saved"] != "1":
            continue
        t = table[scope]
        if r["is_parameter"] == "1":
            t["params"] += 1
            continue
        if r.get("host") == "1":
            t["host_refs"] += 1
        t["refs"] += 1
        t["ref_bytes"] += int(r["bytes"])
        t["ref_storage_bytes"] += int(r["storage_bytes"])
        if r.get("leaf") == "1":
            t["leaves"] += 1
        if r["storage"] not in owner:
            owner[r["storage"]] = scope
            t["unique"] += int(r["storage_bytes"])
    return order, table


def summary_markdown(path, memory=None):
    order, table = summarise(read_csv(path))
    out = [f"`{os.path.basename(path)}`", "",
           "| layer | unique bytes | reference bytes (views) | reference bytes (storages) | refs | leaves | params |",
           "|---|---|---|---|---|---|---|"]
    tot = {k: 0 for k in ("unique", "ref_bytes", "ref_storage_bytes", "refs", "leaves", "params")}
    for scope in order:
        t = table[scope]
        out.append(f"| {scope} | {t['unique']} | {t['ref_bytes']} | {t['ref_storage_bytes']} | {t['refs']} | "
                   f"{t['leaves']} | {t['params']} |")
        for k in tot:
            tot[k] += t[k]
    out.append(f"| all | {tot['unique']} | {tot['ref_bytes']} | {tot['ref_storage_bytes']} | {tot['refs']} | "
               f"{tot['leaves']} | {tot['params']} |")
    if memory and memory.get("peak"):
        p = memory["peak"]
        where = ", ".join(f"{k} {p[k]}" for k in ("phase", "layer", "module", "function", "node", "aten")
                          if p.get(k))
        out += ["", f"Peak {p['bytes']} bytes above the start of the step ({where}); end of forward "
                    f"{memory['end_of_forward']}, forward peak {memory['forward_peak']['bytes']}."]
    return "\n".join(out)


# ------------------------------------------------------------------- main --

def _parse(argv):
    from offsim_torch import hf_models
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hf-config", help="an HF config.json")
    p.add_argument("--module", metavar="PATH.py:FACTORY", help="a model of your own: see the module docstring")
    p.add_argument("--layers", metavar="ATTR.PATH",
                   help="the layer list (offload groups), as an attribute path of the model: model.layers")
    p.add_argument("--batch", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--dtype", default="fp32", choices=sorted(hf_models.DTYPES))
    p.add_argument("--attention", default="eager", choices=hf_models.ATTENTIONS)
    p.add_argument("--kernels", default="cuda", choices=hf_models.KERNELS,
                   help="cuda: stand-ins saving what the CUDA kernels save (default); cpu: this torch's CPU ops")
    p.add_argument("--rope", default="shared", choices=hf_models.ROPE)
    p.add_argument("--device", default="cpu", choices=("cpu", "meta"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (1: reproducible curves)")
    p.add_argument("--hold-outputs", action="store_true", help="keep the output (logits) alive through backward")
    p.add_argument("--out", help="the trace CSV")
    p.add_argument("--json", help="the memory JSON (default: --out with .json)")
    p.add_argument("--summary", metavar="CSV", help="print the per-layer summary of a recorded CSV and exit")
    p.add_argument("--alloc-log", metavar="SO", default=os.environ.get(ALLOC_LOG_ENV) or DEFAULT_ALLOC_LOG,
                   help="the allocation log library to preload (default: $%s, else %s)" % (ALLOC_LOG_ENV,
                                                                                           DEFAULT_ALLOC_LOG))
    p.add_argument("--no-lifetimes", action="store_true",
                   help="record without the allocation log: no workspace, transient, grad or held rows")
    return p.parse_args(argv)


# Where CMake builds the allocation log (python/CMakeLists.txt: offsim_alloclog), from the
# repository root, and the variable that names another.
ALLOC_LOG_ENV = "OFFSIM_ALLOC_LOG"
DEFAULT_ALLOC_LOG = os.path.join("build", "python", "liboffsim_alloclog.so")


def _preloaded(args, may_exec):
    """None when the allocation log is loaded or not wanted; else, after re-running this command
    with the log preloaded (exec: no return; only from the command line, may_exec), an error
    message (exit 2) when it cannot be."""
    if args.no_lifetimes or args.device == "meta" or _lifetimes.loaded() is not None:
        return None
    path = os.path.abspath(args.alloc_log)
    if not os.path.isfile(path):
        return (f"the allocation log {args.alloc_log} does not exist: build it (cmake --build build --target "
                f"offsim_alloclog), name it (--alloc-log, ${ALLOC_LOG_ENV}) or record without lifetimes "
                "(--no-lifetimes)")
    if not may_exec:
        return f"the allocation log is not preloaded: run with LD_PRELOAD={path} or --no-lifetimes"
    env = dict(os.environ)
    env["LD_PRELOAD"] = path + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env["OFFSIM_ALLOC_LOG_EXEC"] = "1"
    if os.environ.get("OFFSIM_ALLOC_LOG_EXEC"):
        return f"the allocation log {path} was preloaded but did not load"
    # Run as `python3 -m offsim_torch.recorder`, sys.argv[0] is this file, which cannot run
    # alone (its imports are the package's): the module again, by name.
    os.execve(sys.executable, [sys.executable, "-m", __spec__.name] + sys.argv[1:], env)


def _rows_text(rec):
    return [",".join(str(r[c]) for c in COLUMNS) for r in rec.rows]


def record(build, step, layers=None, memory=None, flops=True, lifetimes=None):
    """Records one step: build() returns a fresh model, step(model) runs forward, loss and backward.

    layers: None (found), an attribute path ("model.layers") or a function of the model returning
    the layer modules.  With memory profiled (the CPU's default) the FLOP and bytes counts come
    from a second step with a fresh model (the counter would change the memory curve); its saved
    tensors must be the first step's (a warning otherwise).  Returns the Recorder."""
    def pick(model):
        if layers is None:
            return None
        if callable(layers):
            return list(layers(model))
        return layers_at(model, layers)

    model = build()
    rec = Recorder(model, layers=pick(model), memory=memory, flops=None, lifetimes=lifetimes)
    with rec:
        step(model)
    if flops and rec._counter is None:
        del model
        again = build()
        counted = Recorder(again, layers=pick(again), memory=False, flops=True)
        with counted:
            step(again)
        if _rows_text(counted) != _rows_text(rec):
            print("recorder.py: warning: the step saved other tensors when run again (is it random?); the FLOP "
                  "counts are from the second run", file=sys.stderr)
        rec._counter = counted._counter
        rec.node_order = counted.node_order  # the same graph walked in the same order
        rec.node_names = counted.node_names
        if rec.allocations is not None and len(rec.nodes_run) != len(rec.node_names):
            # The allocation rows place backward blocks by the memory step's nodes, the other
            # rows by the counting step's: one numbering only if both ran the same nodes.
            raise _lifetimes.AllocLogError(f"the memory step ran {len(rec.nodes_run)} autograd nodes, the counting "
                                           f"step {len(rec.node_names)}: the places of the allocations would not be "
                                           "the other rows'")
    return rec


def record_hf(config, batch, seq, dtype="fp32", attention="eager", kernels="cuda", device="cpu", seed=0,
              rope="shared", hold_outputs=False, memory=None, flops=True, lifetimes=None):
    """One training step of hf_models' model for `config` under a Recorder; returns the Recorder."""
    from offsim_torch import hf_models
    if isinstance(dtype, str):
        dtype = hf_models.DTYPES[dtype]

    state = {}

    def build():
        model = hf_models.build_model(config, attention, kernels, dtype, device, seed, rope)
        state["batch"] = hf_models.make_batch(config, batch, seq, device, seed)  # outside the recording
        return model

    def step(model):
        ids, labels = state["batch"]  # kept by state: freed after the recording, as allocated before it
        torch.manual_seed(seed + 2)
        out = model(ids, labels=labels)
        loss = out.loss
        if not hold_outputs:
            del out
        loss.backward()
        del loss
        if hold_outputs:
            del out

    return record(build, step, memory=memory, flops=flops, lifetimes=lifetimes)


# ------------------------------------------------------ --module factories --

class ModuleError(Exception):
    """A --module option that does not give a model (exit 2): the message names what is wrong."""


def load_factory(spec):
    """`path.py:factory` (a file) or `module.name:factory` (an importable module) -> the factory."""
    import importlib
    import importlib.util
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ModuleError(f"--module '{spec}': expected PATH.py:FACTORY or MODULE:FACTORY")
    if not path.endswith(".py"):
        try:
            module = importlib.import_module(path)
        except ImportError as e:
            raise ModuleError(f"--module '{spec}': no module '{path}' ({e}); a file is named PATH.py") from e
        except Exception as e:  # the user's module: any error in it is theirs to see
            raise ModuleError(f"--module '{spec}': importing {path} raised {type(e).__name__}: {e}") from e
        mod_name = module.__name__
    else:
        if not os.path.isfile(path):
            raise ModuleError(f"--module '{spec}': no file '{path}'")
        mod_name = "offsim_user_" + "".join(ch if ch.isalnum() else "_" for ch in os.path.basename(path)[:-3])
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        if module_spec is None:
            raise ModuleError(f"--module '{spec}': '{path}' is not a Python file")
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:  # the user's file: any error in it is theirs to see
            raise ModuleError(f"--module '{spec}': importing {path} raised {type(e).__name__}: {e}") from e
    factory = getattr(module, name, None)
    if factory is None:
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == mod_name)
        raise ModuleError(f"--module '{spec}': {path} has no '{name}' (its functions and classes: "
                          f"{', '.join(names) or 'none'})")
    if not callable(factory):
        raise ModuleError(f"--module '{spec}': '{name}' is a {type(factory).__name__}, not a function")
    return factory


def _loss_of(out):
    """The loss a model's forward returned: a tensor, an object with .loss, or a tuple's first."""
    if isinstance(out, torch.Tensor):
        loss = out
    elif getattr(out, "loss", None) is not None:
        loss = out.loss
    elif isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        loss = out[0]
    else:
        raise ModuleError(f"the model's forward(ids, labels) returned a {type(out).__name__}, not a loss "
                          "(a tensor, an object with .loss or a tuple starting with it)")
    if loss.dim() != 0:
        raise ModuleError(f"the model's forward(ids, labels) returned a tensor of shape {tuple(loss.shape)}, not a "
                          "scalar loss")
    return loss


def module_step(factory, spec, batch, seq, dtype, device, seed=0):
    """build() and step(model) for record() from a factory (the contract: recorder.py's docstring)."""
    from offsim_torch import hf_models
    import inspect
    try:
        inspect.signature(factory).bind(batch=batch, seq=seq, device=device, dtype=dtype)
    except TypeError as e:
        raise ModuleError(f"--module '{spec}': the factory must take keyword arguments batch, seq, device and dtype "
                          f"(or **kwargs): {e}") from None
    except ValueError:
        pass  # a builtin without a signature: call it and see
    steps = {}

    def build():
        torch.manual_seed(seed)
        try:
            with hf_models._DeviceMode(device):
                made = factory(batch=batch, seq=seq, device=torch.device(device), dtype=dtype)
        except ModuleError:
            raise
        except Exception as e:  # the user's code: report it, whatever it is
            raise ModuleError(f"--module '{spec}': the factory raised {type(e).__name__}: {e}") from e
        if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module) and callable(made[1]):
            model, steps["step"] = made
        elif isinstance(made, torch.nn.Module):
            model, steps["step"] = made, None
        else:
            raise ModuleError(f"--module '{spec}': the factory returned a {type(made).__name__}; expected an "
                              "nn.Module or (nn.Module, step)")
        return model

    def step(model):
        torch.manual_seed(seed + 2)
        user_step = steps["step"]
        try:
            if user_step is not None:
                user_step(model)
                return
            ids = torch.zeros(batch, seq, dtype=torch.long, device=device)
            loss = _loss_of(model(ids, ids))
            loss.backward()
        except (ModuleError, NotImplementedError):
            raise
        except Exception as e:  # the user's step
            raise ModuleError(f"--module '{spec}': the step raised {type(e).__name__}: {e}") from e

    return build, step


def main(argv=None):
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.summary:
        memory = None
        js = os.path.splitext(args.summary)[0] + ".json"
        if os.path.exists(js):
            with open(js) as f:
                memory = json.load(f)
        print(summary_markdown(args.summary, memory))
        return 0
    from offsim_torch import hf_models
    why = _preloaded(args, argv is None)
    if why is not None:
        print(f"recorder.py: {why}", file=sys.stderr)
        return 2
    if args.module is not None:
        return main_module(args)
    missing = [o for o in ("hf_config", "batch", "seq", "out") if getattr(args, o) is None]
    if missing:
        print("recorder.py: missing " + ", ".join("--" + m.replace("_", "-") for m in missing), file=sys.stderr)
        return 2
    if args.batch <= 0 or args.seq <= 0:
        print("recorder.py: --batch and --seq must be positive", file=sys.stderr)
        return 2
    try:
        with open(args.hf_config) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        print(f"recorder.py: --hf-config {args.hf_config}: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)

    def run():
        try:
            return record_hf(config, args.batch, args.seq, args.dtype, args.attention, args.kernels, args.device,
                             args.seed, args.rope, args.hold_outputs, lifetimes=False if args.no_lifetimes else None)
        except hf_models.ConfigError as e:
            raise _BadInput(f"{args.hf_config}: {e}") from e

    return _record_and_write(args, run, {"config": os.path.basename(args.hf_config), "batch": args.batch,
                                         "seq": args.seq, "dtype": args.dtype, "attention": args.attention,
                                         "kernels": args.kernels, "rope": args.rope, "device": args.device,
                                         "seed": args.seed, "hold_outputs": args.hold_outputs})


class _BadInput(Exception):
    """An input error found while recording: exit 2 with this message."""


def _record_and_write(args, run, command):
    """run() -> the Recorder; writes --out and --json; exit 2 for bad input and missing meta kernels."""
    try:
        rec = run()
    except _BadInput as e:
        print(f"recorder.py: {e}", file=sys.stderr)
        return 2
    except NotImplementedError as e:
        if args.device != "meta":
            raise
        print(f"recorder.py: {_no_meta_kernel(e)}; nothing was written (record on the CPU at a small shape "
              "instead)", file=sys.stderr)
        return 2
    rec.write_csv(args.out)
    js = args.json or os.path.splitext(args.out)[0] + ".json"
    rec.write_json(js, {"command": command})
    allocations = "" if rec.allocations is None else f", {len(rec.allocations)} allocations"
    print(f"{args.out}: {len(rec.rows)} rows, {len(rec.compute_rows())} op counts{allocations}; {js}", file=sys.stderr)
    return 0


def _no_meta_kernel(e):
    """The message for a step that failed on meta for want of a kernel, naming the op."""
    from offsim_torch import flops
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    if isinstance(e, flops.NoMetaKernel):
        return first
    return f"an op has no meta kernel in torch {torch.__version__}: {first}"


def main_module(args):
    """--module PATH.py:FACTORY: the user's model, recorded like --hf-config's."""
    from offsim_torch import hf_models
    if args.hf_config is not None:
        print("recorder.py: --module and --hf-config: give one", file=sys.stderr)
        return 2
    missing = [o for o in ("batch", "seq", "out") if getattr(args, o) is None]
    if missing:
        print("recorder.py: --module needs " + ", ".join("--" + m for m in missing), file=sys.stderr)
        return 2
    if args.batch <= 0 or args.seq <= 0:
        print("recorder.py: --batch and --seq must be positive", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)

    def run():
        try:
            factory = load_factory(args.module)
            build, step = module_step(factory, args.module, args.batch, args.seq, hf_models.DTYPES[args.dtype],
                                      args.device, args.seed)
            return record(build, step, layers=args.layers, lifetimes=False if args.no_lifetimes else None)
        except ModuleError as e:
            raise _BadInput(str(e)) from e
        except ValueError as e:  # the layers: none found, a bad --layers path
            raise _BadInput(f"--module '{args.module}': {e}") from e

    return _record_and_write(args, run, {"module": os.path.basename(args.module), "layers": args.layers,
                                         "batch": args.batch, "seq": args.seq, "dtype": args.dtype,
                                         "device": args.device, "seed": args.seed})


if __name__ == "__main__":
    sys.exit(main())
