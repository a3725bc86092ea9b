"""A dispatch-level FLOP and bytes counter for one training step (torch 1.13 and later).

torch 1.13 has no FlopCounterMode (it came in 2.1), so this is one written on
torch.utils._python_dispatch.TorchDispatchMode: below autograd, every ATen op
the step runs (forward and backward, CompositeImplicit ops such as matmul and
linear already decomposed into mm, addmm, bmm) passes through
__torch_dispatch__, on the CPU and on the meta device alike.

Per op:
- FLOPs, for the ops that are matrix products: mm, addmm, bmm, baddbmm
  (2.m.k.n per product, the bias add not counted), convolution and
  convolution_backward (2 FLOPs per multiply-add of the products each
  computes); every other op counts 0 (elementwise work is timed by its
  bytes, as offsim's generator does).
- bytes moved: the bytes of its tensor arguments (read) plus those of its
  results (written).  Views (a result that aliases an argument without
  writing it: view, t, transpose, expand, ..., and _unsafe_view) and
  allocations (empty*) move nothing and count 0.

A stand-in of standins.py (a fused CUDA kernel written in plain ops) counts as
the one kernel it mirrors, not as its plain ops: the ops inside it are not
counted; its bytes are its tensor arguments and results (for its backward:
the gradient, the tensors its forward saved and the gradients it returns),
and the attention stand-ins count 4.b.h.P.d FLOPs forward (QK^T and PV over
the P query/key pairs the mask allows: s(s+1)/2 per head when causal) and
2.5 times that backward (a flash backward recomputes QK^T: five products to
the forward's two).

On the meta device the counter also supplies the meta kernels torch 1.13
lacks where the result's shape needs no data (META_FALLBACKS:
convolution_backward), and names the op that has none.

The counter is told where it is by its owner (the recorder): `where()`
returns (scope, phase, op, module, place) for each op, and the counts are
summed per (scope, phase, op, module, place, aten op) in first-seen order, so
that the rows are the same on every run.  `place` is the forward op (the
recorder's run of one module) or, in backward, None: the autograd node that
runs an op is known only when the node ends (a post-hook; torch 1.13 has no
node pre-hooks), so backward ops wait in `pending` until the owner calls
`node_done(place, node)`, which gives them that node's place and name.  Ops
between two nodes (the engine adding two gradients of one tensor) go to the
node that ends next: the one the GPU runs them before.
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from offsim_torch import standins

_MATMUL = {"mm", "addmm", "bmm", "baddbmm"}
# Ops that move no data although their schema says no alias: allocations and
# _unsafe_view (a view that autograd treats as a fresh tensor).
_NO_DATA = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_unsafe_view", "lift_fresh"}


def _prod(xs):
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _tensors(obj):
    """The tensors in an argument or result (lists and tuples flattened)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _nbytes(obj):
    return sum(t.numel() * t.element_size() for t in _tensors(obj))


def _conv_flops(x_shape, w_shape, out_shape, transposed):
    """2 per multiply-add: each output element (input element when transposed) sums
    C_in/groups x kernel products."""
    per = _prod(w_shape[1:])
    return 2 * (_prod(x_shape) if transposed else _prod(out_shape)) * per


def op_flops(name, args, out):
    """FLOPs of one ATen op (the overload's packet name: mm, addmm, ...), 0 when not a product."""
    if name == "mm":
        a, b = args[0], args[1]
        return 2 * a.shape[0] * a.shape[1] * b.shape[1]
    if name == "addmm":
        a, b = args[1], args[2]
        return 2 * a.shape[0] * a.shape[1] * b.shape[1]
    if name == "bmm":
        a, b = args[0], args[1]
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if name == "baddbmm":
        a, b = args[1], args[2]
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if name in ("convolution", "_convolution"):
        x, w = args[0], args[1]
        return _conv_flops(x.shape, w.shape, out.shape, bool(args[6]))
    if name == "convolution_backward":
        grad, x, w = args[0], args[1], args[2]
        transposed, mask = bool(args[7]), args[10]
        fwd = _conv_flops(x.shape, w.shape, grad.shape, transposed)
        return fwd * (int(bool(mask[0])) + int(bool(mask[1])))
    return 0


def _aliases(func):
    """Whether a result of the op aliases an argument without writing it (a view)."""
    try:
        returns = func._schema.returns
    except AttributeError:
        return False
    return any(r.alias_info is not None and not r.alias_info.is_write for r in returns)


_WRAPPED_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def _returns_tensor(func):
    try:
        returns = func._schema.returns
    except AttributeError:
        return False
    return len(returns) == 1 and str(returns[0].type) == "Tensor"


def attention_pairs(sq, sk, causal, window):
    """Query/key pairs the mask allows (standins._mask_for's mask, bottom-right aligned)."""
    if not causal and window is None:
        return sq * sk
    total = 0
    for i in range(sq):
        hi = i + (sk - sq) if causal else sk - 1
        lo = i + (sk - sq) - window + 1 if window is not None else 0
        total += max(0, min(hi, sk - 1) - max(lo, 0) + 1)
    return total


_ATTENTION = {"ScaledDotProductFlashAttention", "ScaledDotProductEfficientAttention", "FlashAttnFunc"}


class NoMetaKernel(NotImplementedError):
    """An op of the step has no meta kernel and no META_FALLBACKS entry; the message names it."""


def _convolution_backward_meta(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                               output_padding, groups, output_mask):
    """aten::convolution_backward on meta (torch 1.13 sends meta tensors to the
    convolution_backward_overrideable stub, which raises): the gradients have
    the shapes, dtypes and layouts of input, weight and the bias."""
    grad_input = torch.empty_like(input) if output_mask[0] else None
    grad_weight = torch.empty_like(weight) if output_mask[1] else None
    grad_bias = (torch.empty(bias_sizes, dtype=grad_output.dtype, device=grad_output.device)
                 if output_mask[2] and bias_sizes is not None else None)
    return grad_input, grad_weight, grad_bias


# Meta kernels torch 1.13 lacks for ops whose result shapes need no data; the
# counter runs them when the op raises on meta tensors.  Ops whose shapes do
# depend on the data (nonzero, masked_select, unique, ...) have none: the
# step fails naming the op (record on the CPU at a small shape instead).
META_FALLBACKS = {"convolution_backward": _convolution_backward_meta}


class FlopCounter(TorchDispatchMode):
    """Counts FLOPs and bytes per op; `where` says (scope, phase, op, module, place) for each."""

    def __init__(self, where, enabled=lambda: True):
        super().__init__()
        self.where = where
        self.enabled = enabled
        self.rows = {}        # (scope, phase, op, module, node, place, aten) -> [flops, moved, calls]
        self.pending = []     # backward ops of the node running: (scope, phase, aten, flops, moved)
        self._standin = 0     # depth inside stand-ins: their plain ops are not counted
        self.meta_fallbacks = {}  # op -> calls answered by META_FALLBACKS
        self.missing_meta = []    # ops with no meta kernel and no fallback (the step then fails)

    def add(self, aten, flops, moved):
        if flops == 0 and moved == 0:
            return
        scope, phase, op, module, place = self.where()
        if place is None:
            self.pending.append((scope, phase, aten, flops, moved))
            return
        self._sum((scope, phase, op, module, "", place, aten), flops, moved)

    def node_done(self, place, node):
        """The autograd node `node` (its name) ended as the place-th of the backward: the ops
        waiting are its."""
        for scope, phase, aten, flops, moved in self.pending:
            self._sum((scope, phase, "", "", node, place, aten), flops, moved)
        self.pending = []

    def _sum(self, key, flops, moved):
        row = self.rows.get(key)
        if row is None:
            self.rows[key] = [flops, moved, 1]
        else:
            row[0] += flops
            row[1] += moved
            row[2] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except NotImplementedError:
            name = func.overloadpacket.__name__
            if not any(t.device.type == "meta" for t in _tensors(args)):
                raise
            fallback = META_FALLBACKS.get(name)
            if fallback is None:
                self.missing_meta.append(str(func))
                raise NoMetaKernel(f"{func} has no meta kernel in torch {torch.__version__}") from None
            self.meta_fallbacks[str(func)] = self.meta_fallbacks.get(str(func), 0) + 1
            out = fallback(*args, **kwargs)
        if isinstance(out, (bool, int, float, complex)) and _returns_tensor(func):
            # torch 1.13 hands a wrapped number (a Python scalar autograd saved as a
            # 0-dim tensor, detached in backward) to Python as a number, and then wants
            # a Tensor back: give it the 0-dim tensor a wrapped number is.
            out = torch.tensor(out, dtype=_WRAPPED_DTYPES[type(out)])
        if self._standin or not self.enabled():
            return out
        name = func.overloadpacket.__name__
        if name in _NO_DATA or _aliases(func):
            return out
        flops = op_flops(name, args, out)
        self.add(name, flops, _nbytes(args) + _nbytes(kwargs) + _nbytes(out))
        return out

    # ------------------------------------------------- stand-ins (standins.py) --
    def standin_enter(self, name, args):
        self._standin += 1

    def standin_exit(self, name, args, out):
        self._standin -= 1
        if self._standin or not self.enabled():
            return
        cls, _, which = name.partition(".")
        ctx = args[0]
        flops = 0
        if which == "forward":
            moved = _nbytes(args[1:]) + _nbytes(out)
            if cls in _ATTENTION:
                q, k = args[1], args[2]
                if cls == "FlashAttnFunc":  # (batch, seq, heads, dim)
                    b, sq, h, d = q.shape
                    sk = k.shape[1]
                    causal = ctx.causal
                else:                       # (batch, heads, seq, dim)
                    b, h, sq, d = q.shape
                    sk = k.shape[2]
                    causal = ctx.is_causal
                flops = 4 * b * h * attention_pairs(sq, sk, causal, ctx.window) * d
            # What the backward will read besides its gradient.
            ctx.offsim_flops = flops
            ctx.offsim_saved_bytes = _nbytes(getattr(ctx, "to_save", None) or ())
        else:
            moved = _nbytes(args[1:]) + getattr(ctx, "offsim_saved_bytes", 0) + _nbytes(out)
            flops = getattr(ctx, "offsim_flops", 0) * 5 // 2 if cls in _ATTENTION else 0
        self.add(cls + "." + which, flops, moved)

    def __enter__(self):
        standins.LISTENERS.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            standins.LISTENERS.remove(self)
