"""Stand-ins for CUDA kernels whose saved tensors differ from their CPU versions.

Each stand-in is a torch.autograd.Function whose forward and backward are
computed with plain tensor ops (so it runs on the CPU and on the meta device)
but whose ctx.save_for_backward saves exactly what the CUDA op's autograd node
saves, in the same order, with the same dtypes, shapes and storage sharing.
Where that comes from:

- NativeDropout: aten::dropout on CUDA takes the fused path
  (at::native_dropout; `is_fused_kernel_acceptable` asks for a CUDA input and
  0 < p < 1).  derivatives.yaml: `input: native_dropout_backward(grad,
  result1, scale)`, so NativeDropoutBackward0 saves result1, the bool keep
  mask (one byte per element).  On the CPU at::dropout takes `_dropout_impl`
  (`noise = empty_like(input).bernoulli_(1 - p); noise.div_(1 - p);
  input * noise`), so MulBackward0 saves a mask of the input's dtype.
- NativeLayerNorm: derivatives.yaml `native_layer_norm`: input, weight, bias,
  result1 (mean) and result2 (rstd).  The CUDA kernel allocates mean and
  rstd in the accumulate type (`toAccumulateType(input, is_cuda=true)`: fp32
  for bf16/fp16 input), shape input.shape[:-1] + (1,); the CPU kernel of
  torch 1.13 keeps them in the input dtype (measured: bf16 for bf16 input).
- ScaledDotProductFlashAttention: torch.nn.functional.scaled_dot_product_
  attention on CUDA with bf16/fp16, no mask and head_dim <= 256 runs
  aten::_scaled_dot_product_flash_attention (after `pad_last_dim<8>`:
  q, k, v are zero-padded copies when head_dim % 8 != 0, and the output is
  sliced back).  derivatives.yaml saves query, key, value, output, logsumexp,
  cum_seq_q, cum_seq_k (undefined outside varlen: never packed),
  philox_seed, philox_offset.  The kernel works on q.transpose(1, 2), so the
  output's storage is (batch, seq, heads, dim) and the op returns it
  transposed: HF's `attn_output.transpose(1, 2).contiguous()` is then a no-op
  and o_proj saves a view of the storage the attention node saved.
  logsumexp: fp32 (batch, heads, seq).  philox_seed, philox_offset: 0-dim
  int64 tensors that PyTorch 2.1-2.4 allocates on the host when no CUDA graph
  is being captured (`at::empty({}, at::dtype(at::kLong))`); not checked on
  later versions.
- ScaledDotProductEfficientAttention: the same for fp32 on CUDA (flash takes
  only fp16/bf16): aten::_scaled_dot_product_efficient_attention saves
  query, key, value, attn_bias (undefined here), output, log_sumexp (fp32,
  (batch, heads, ceil(seq / 32) * 32): kAlignLSE = 32), philox_seed,
  philox_offset.
- FlashAttnFunc: flash_attn's flash_attn_func (HF's flash_attention_2),
  native GQA: k and v keep num_key_value_heads.  FlashAttnFunc.forward saves
  (q, k, v, out_padded, softmax_lse, rng_state): q, k, v as given
  ((batch, seq, heads, dim) views; padded copies when dim % 8 != 0),
  softmax_lse fp32 (batch, heads, seq), rng_state int64 (2,) on the device.

The dtypes, shapes and the host/device placement above are from PyTorch's and
flash-attn's sources as recalled for this file, not measured on a GPU here;
tests/data/hf/README.md says which parts are unverified.

Every stand-in names the CUDA autograd node it mirrors (`cuda_node`), the
names of its saved slots (`slots`) and which slots stay in host memory on
CUDA (`host_slots`); recorder.py reads them.  Tensors the forward needs for
the backward and the CUDA op does not save (the dropout seed of the fused
attention, which the CUDA kernel regenerates from philox seed and offset)
are kept as plain Python numbers on ctx, never as tensors, so that the
memory curve holds only what the CUDA op holds.  The attention forward and
backward run one (batch, key/value head) slice at a time, so that their
temporaries (the score matrix of one slice) stay small, as the fused
kernels' do; they are not zero, unlike the fused kernels' (recorder.py marks
stand-in ranges in the memory curve).
"""
import functools
import math

import torch

__all__ = [
    "NativeDropout",
    "NativeLayerNorm",
    "ScaledDotProductFlashAttention",
    "ScaledDotProductEfficientAttention",
    "FlashAttnFunc",
    "attention_reference",
    "STANDINS",
]


def _is_meta(t):
    return t.device.type == "meta"


def _mark(name):
    """A zero-length profiler event (recorder.py places the memory curve by them); allocates nothing."""
    try:
        handle = torch.ops.profiler._record_function_enter_new(name, None)
        torch.ops.profiler._record_function_exit._RecordFunction(handle)
    except (AttributeError, RuntimeError):
        pass


# Told when a stand-in's forward or backward starts and ends (flops.py's
# counter: a stand-in is one kernel, not its plain ops): objects with
# standin_enter(name, args) and standin_exit(name, args, result).
LISTENERS = []


def _marked(name):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            listeners = list(LISTENERS)
            for listener in listeners:
                listener.standin_enter(name, args)
            out = None
            try:
                with _Marked(name):
                    out = fn(*args, **kwargs)
                return out
            finally:
                for listener in listeners:
                    listener.standin_exit(name, args, out)
        return wrapper
    return deco


class _Marked:
    """Marks a stand-in's forward or backward as `offsim::standin:<name>` ... `offsim::standin-end`."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        _mark("offsim::standin:" + self.name)

    def __exit__(self, *exc):
        _mark("offsim::standin-end")
        return False


# ----------------------------------------------------------------- dropout --

class NativeDropout(torch.autograd.Function):
    """aten::native_dropout: saves the bool keep mask (result1)."""

    cuda_node = "NativeDropoutBackward0"
    slots = ("result1",)
    host_slots = ()

    @staticmethod
    @_marked("NativeDropout.forward")
    def forward(ctx, x, p):
        # The same random draws and arithmetic as the CPU path of at::dropout
        # (bernoulli_ on an empty_like, div_, multiply), so that with the same
        # generator state the output and the gradient equal F.dropout's to the
        # bit; only what is kept for backward differs.
        noise = torch.empty_like(x).bernoulli_(1 - p)
        mask = noise.bool()
        noise.div_(1 - p)
        out = x * noise
        del noise
        ctx.p = p
        ctx.save_for_backward(mask)
        return out

    @staticmethod
    @_marked("NativeDropout.backward")
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        noise = mask.to(grad.dtype).div_(1 - ctx.p)
        return grad * noise, None


# -------------------------------------------------------------- layer norm --

class NativeLayerNorm(torch.autograd.Function):
    """aten::native_layer_norm over the last dimension, CUDA statistics."""

    cuda_node = "NativeLayerNormBackward0"
    slots = ("input", "weight", "bias", "result1", "result2")
    host_slots = ()

    @staticmethod
    @_marked("NativeLayerNorm.forward")
    def forward(ctx, x, weight, bias, eps):
        xf = x.float()
        mean = xf.mean(-1, keepdim=True)
        centered = xf - mean
        var = (centered * centered).mean(-1, keepdim=True)
        rstd = torch.rsqrt(var + eps)
        y = centered * rstd
        del centered, xf
        y = y * weight.float() + bias.float()
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        return y.to(x.dtype)

    @staticmethod
    @_marked("NativeLayerNorm.backward")
    def backward(ctx, grad):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        xhat = (x.float() - mean) * rstd
        g = grad.float()
        dims = tuple(range(g.dim() - 1))
        grad_w = (g * xhat).sum(dims).to(weight.dtype)
        grad_b = g.sum(dims).to(bias.dtype)
        gw = g * weight.float()
        n = x.shape[-1]
        grad_x = rstd * (gw - gw.sum(-1, keepdim=True) / n - xhat * (gw * xhat).sum(-1, keepdim=True) / n)
        return grad_x.to(x.dtype), grad_w, grad_b, None


# --------------------------------------------------------------- attention --

def _mask_for(sq, sk, causal, window, device):
    """Additive float mask (sq, sk) for causal / sliding-window attention, or None."""
    if not causal and window is None:
        return None
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    allowed = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        allowed = allowed & (j <= i)
    if window is not None:
        allowed = allowed & (j > i - window)
    mask = torch.zeros(sq, sk, dtype=torch.float32, device=device)
    return mask.masked_fill(~allowed, float("-inf"))


def _keep(generator, shape, p, device):
    """Dropout keep mask of one slice (bool), or None without dropout."""
    if p == 0.0:
        return None
    if device.type == "meta":
        return torch.ones(shape, dtype=torch.bool, device=device)
    return torch.rand(shape, generator=generator) >= p


def _slices(q, k):
    """(batch, kv head, query heads of that group) for q (b, h, s, d), k (b, hk, s, d)."""
    b, h = q.shape[0], q.shape[1]
    hk = k.shape[1]
    rep = h // hk
    for bi in range(b):
        for g in range(hk):
            yield bi, g, slice(g * rep, (g + 1) * rep)


def _attention_forward(q, k, v, out, lse, scale, causal, window, p, seed):
    """Fills out (b, h, s, d) and lse (b, h, >= s) slice by slice, in fp32.

    q: (b, h, sq, d); k, v: (b, hk, sk, d) with h a multiple of hk (native
    GQA: the query heads of a group read the same key/value head)."""
    sq, sk = q.shape[2], k.shape[2]
    mask = _mask_for(sq, sk, causal, window, q.device)
    gen = None
    if p > 0.0 and not _is_meta(q):
        gen = torch.Generator()
        gen.manual_seed(seed)
    for bi, g, heads in _slices(q, k):
        qf = q[bi, heads].float()
        kf = k[bi, g].float()
        vf = v[bi, g].float()
        s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
        if mask is not None:
            s = s + mask
        m = torch.logsumexp(s, dim=-1, keepdim=True)
        prob = torch.exp(s - m)
        keep = _keep(gen, prob.shape, p, q.device)
        if keep is not None:
            prob = prob * keep / (1 - p)
        out[bi, heads] = torch.matmul(prob, vf).to(out.dtype)
        lse[bi, heads, :sq] = m.squeeze(-1)


def _attention_backward(grad_out, q, k, v, out, lse, scale, causal, window, p, seed):
    """Gradients of q, k, v (fp32 accumulation, cast to the inputs' dtypes)."""
    sq, sk = q.shape[2], k.shape[2]
    mask = _mask_for(sq, sk, causal, window, q.device)
    gen = None
    if p > 0.0 and not _is_meta(q):
        gen = torch.Generator()
        gen.manual_seed(seed)
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dk = torch.zeros(k.shape, dtype=torch.float32, device=k.device)
    dv = torch.zeros(v.shape, dtype=torch.float32, device=v.device)
    for bi, g, heads in _slices(q, k):
        qf = q[bi, heads].float()
        kf = k[bi, g].float()
        vf = v[bi, g].float()
        do = grad_out[bi, heads].float()
        o = out[bi, heads].float()
        s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
        if mask is not None:
            s = s + mask
        prob = torch.exp(s - lse[bi, heads, :sq].unsqueeze(-1))
        keep = _keep(gen, prob.shape, p, q.device)
        dropped = prob if keep is None else prob * keep / (1 - p)
        dv[bi, g] += torch.matmul(dropped.transpose(-1, -2), do).sum(0)
        dprob = torch.matmul(do, vf.transpose(-1, -2))
        if keep is not None:
            dprob = dprob * keep / (1 - p)
        di = (do * o).sum(-1, keepdim=True)
        ds = prob * (dprob - di)
        dq[bi, heads] = torch.matmul(ds, kf) * scale
        dk[bi, g] += torch.matmul(ds.transpose(-1, -2), qf).sum(0) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _pad8(t):
    """PyTorch's pad_last_dim<8, false> and flash-attn's padding: a zero-padded copy."""
    d = t.shape[-1]
    if d % 8 == 0:
        return t
    return torch.nn.functional.pad(t, (0, 8 - d % 8))


def _dropout_seed(p):
    """A seed for the stand-in's own dropout generator, drawn from the CPU RNG.

    The CUDA kernels draw from the CUDA generator (philox); the stand-ins keep
    the seed as a Python int on ctx, like the kernel keeps seed and offset."""
    if p == 0.0:
        return 0
    return int(torch.randint(0, 2 ** 62, (1,)).item())


class ScaledDotProductFlashAttention(torch.autograd.Function):
    """aten::_scaled_dot_product_flash_attention (SDPA on CUDA, fp16/bf16).

    q, k, v: (batch, heads, seq, dim); k and v already at the query head
    count (HF's SDPA path repeats them), or at the key/value head count when
    SDPA is asked for enable_gqa (HF with torch >= 2.5 and no mask)."""

    cuda_node = "ScaledDotProductFlashAttentionBackward0"
    slots = ("query", "key", "value", "output", "logsumexp", "philox_seed", "philox_offset")
    host_slots = ("philox_seed", "philox_offset")
    lse_align = 1
    pad_head_dim = True

    @classmethod
    def _lse(cls, b, h, s, device):
        width = -(-s // cls.lse_align) * cls.lse_align
        return torch.full((b, h, width), float("-inf"), dtype=torch.float32, device=device)

    @classmethod
    def _forward(cls, ctx, query, key, value, dropout_p, is_causal, scale, window):
        d = query.shape[-1]
        if scale is None:
            scale = 1.0 / math.sqrt(d)
        seed = _dropout_seed(dropout_p)
        q, k, v = (_pad8(query), _pad8(key), _pad8(value)) if cls.pad_head_dim else (query, key, value)
        b, h, s, dp = q.shape
        storage = torch.empty((b, s, h, dp), dtype=q.dtype, device=q.device)
        out = storage.transpose(1, 2)
        lse = cls._lse(b, h, s, q.device)
        _attention_forward(q, k, v, out, lse, scale, is_causal, window, dropout_p, seed)
        philox_seed = torch.empty((), dtype=torch.int64)
        philox_offset = torch.empty((), dtype=torch.int64)
        ctx.dropout_p, ctx.is_causal, ctx.scale, ctx.window, ctx.seed = dropout_p, is_causal, scale, window, seed
        ctx.head_dim = d
        result = out if dp == d else out[..., :d]
        ctx.save_for_backward(q, k, v, out, lse, philox_seed, philox_offset)
        return result

    @staticmethod
    @_marked("ScaledDotProductFlashAttention.forward")
    def forward(ctx, query, key, value, dropout_p=0.0, is_causal=True, scale=None, window=None):
        return ScaledDotProductFlashAttention._forward(ctx, query, key, value, dropout_p, is_causal, scale, window)

    @staticmethod
    @_marked("ScaledDotProductFlashAttention.backward")
    def backward(ctx, grad):
        q, k, v, out, lse, _seed, _offset = ctx.saved_tensors
        d = ctx.head_dim
        if grad.shape[-1] != out.shape[-1]:
            grad = torch.nn.functional.pad(grad, (0, out.shape[-1] - grad.shape[-1]))
        dq, dk, dv = _attention_backward(grad, q, k, v, out, lse, ctx.scale, ctx.is_causal, ctx.window,
                                         ctx.dropout_p, ctx.seed)
        return dq[..., :d], dk[..., :d], dv[..., :d], None, None, None, None


class ScaledDotProductEfficientAttention(ScaledDotProductFlashAttention):
    """aten::_scaled_dot_product_efficient_attention (SDPA on CUDA, fp32)."""

    cuda_node = "ScaledDotProductEfficientAttentionBackward0"
    slots = ("query", "key", "value", "output", "log_sumexp", "philox_seed", "philox_offset")
    host_slots = ("philox_seed", "philox_offset")
    lse_align = 32
    pad_head_dim = False

    @staticmethod
    @_marked("ScaledDotProductEfficientAttention.forward")
    def forward(ctx, query, key, value, dropout_p=0.0, is_causal=True, scale=None, window=None):
        return ScaledDotProductEfficientAttention._forward(ctx, query, key, value, dropout_p, is_causal, scale,
                                                           window)

    @staticmethod
    @_marked("ScaledDotProductEfficientAttention.backward")
    def backward(ctx, grad):
        return ScaledDotProductFlashAttention.backward(ctx, grad)


class FlashAttnFunc(torch.autograd.Function):
    """flash_attn.flash_attn_func: q (b, s, h, d), k and v (b, s, hk, d)."""

    cuda_node = "FlashAttnFuncBackward"
    slots = ("q", "k", "v", "out_padded", "softmax_lse", "rng_state")
    host_slots = ()

    @staticmethod
    @_marked("FlashAttnFunc.forward")
    def forward(ctx, q, k, v, dropout_p=0.0, softmax_scale=None, causal=True, window=None):
        d = q.shape[-1]
        if softmax_scale is None:
            softmax_scale = d ** -0.5
        seed = _dropout_seed(dropout_p)
        q, k, v = _pad8(q), _pad8(k), _pad8(v)
        b, s, h, dp = q.shape
        out_padded = torch.empty((b, s, h, dp), dtype=q.dtype, device=q.device)
        lse = torch.full((b, h, s), float("-inf"), dtype=torch.float32, device=q.device)
        _attention_forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), out_padded.transpose(1, 2),
                           lse, softmax_scale, causal, window, dropout_p, seed)
        rng_state = torch.empty((2,), dtype=torch.int64, device=q.device)
        ctx.dropout_p, ctx.scale, ctx.causal, ctx.window, ctx.seed, ctx.head_dim = (
            dropout_p, softmax_scale, causal, window, seed, d)
        ctx.save_for_backward(q, k, v, out_padded, lse, rng_state)
        return out_padded if dp == d else out_padded[..., :d]

    @staticmethod
    @_marked("FlashAttnFunc.backward")
    def backward(ctx, grad):
        q, k, v, out, lse, _rng = ctx.saved_tensors
        d = ctx.head_dim
        if grad.shape[-1] != out.shape[-1]:
            grad = torch.nn.functional.pad(grad, (0, out.shape[-1] - grad.shape[-1]))
        dq, dk, dv = _attention_backward(grad.transpose(1, 2), q.transpose(1, 2), k.transpose(1, 2),
                                         v.transpose(1, 2), out.transpose(1, 2), lse, ctx.scale, ctx.causal,
                                         ctx.window, ctx.dropout_p, ctx.seed)
        return (dq.transpose(1, 2)[..., :d], dk.transpose(1, 2)[..., :d], dv.transpose(1, 2)[..., :d],
                None, None, None, None)


def attention_reference(q, k, v, scale, causal=True, window=None, keep=None, p=0.0):
    """Plain-op attention with autograd, for the tests: q (b, h, s, d), k/v (b, hk, s, d).

    `keep`, when given, is the (b, h, s, s) bool mask of kept probabilities."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    mask = _mask_for(q.shape[2], k.shape[2], causal, window, q.device)
    if mask is not None:
        s = s + mask
    prob = torch.softmax(s, dim=-1)
    if keep is not None:
        prob = prob * keep / (1 - p)
    return torch.matmul(prob, v.float()).to(q.dtype)


def keep_masks(seed, shape, p, rep):
    """The keep masks a stand-in draws for q of `shape` (b, h, s, s), in its slice order."""
    b, h, sq, sk = shape
    hk = h // rep
    gen = torch.Generator()
    gen.manual_seed(seed)
    keep = torch.empty(shape, dtype=torch.bool)
    for bi in range(b):
        for g in range(hk):
            keep[bi, g * rep:(g + 1) * rep] = torch.rand((rep, sq, sk), generator=gen) >= p
    return keep


STANDINS = {cls.__name__: cls for cls in (NativeDropout, NativeLayerNorm, ScaledDotProductFlashAttention,
                                          ScaledDotProductEfficientAttention, FlashAttnFunc)}
