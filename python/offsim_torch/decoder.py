"""The Qwen2-style decoder of offsim's [transformer] generator, in plain torch (no downloads).

The model mirrors what the generator assumes: RMSNorm as a fused
autograd.Function that saves its input and the fp32 reciprocal RMS (as Apex,
TransformerEngine and Liger kernels do), q/k/v projections with bias, RoPE,
grouped-query attention without materialising repeated key/value heads,
eager softmax attention in the activation dtype (or, with "flash" in the
config, torch's fused scaled_dot_product_attention), SwiGLU, a tied or
untied LM head and a cross-entropy loss.

Two tools use it: ground_truth.py measures its training step four ways on a
GPU, and the recorder records what autograd saves in it through the factories
below (tests/data/trace/README.md):

  python3 -m offsim_torch.recorder --module offsim_torch.decoder:tiny \\
      --batch 2 --seq 128 --dtype fp32 --out qwen2-tiny.csv

It is not hf_models.py's qwen2, which follows HuggingFace's modeling code op
by op (RMSNorm unfused, key and value heads repeated) for `ops = hf`; this
one is `ops = fused`.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# The shapes tests/data/trace/ recorded (batch 2 x seq 128 and 2 x 256).
RECORDED = {
    # hidden, layers, heads, kv_heads, ffn, vocab, batch, seq
    "tiny": dict(hidden=256, layers=2, heads=4, kv_heads=2, ffn=704, vocab=1000, batch=2, seq=128),
    "small": dict(hidden=512, layers=4, heads=8, kv_heads=2, ffn=1408, vocab=4096, batch=2, seq=256),
}


class RMSNormFn(torch.autograd.Function):
    """Saves the input and the fp32 reciprocal RMS, like fused kernels."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return (x.float() * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        xf = x.float()
        normed = xf * rstd
        grad_w = (grad.float() * normed).sum(dim=tuple(range(grad.dim() - 1))).to(weight.dtype)
        gn = grad.float() * weight.float()
        dot = (gn * normed).mean(-1, keepdim=True)
        grad_x = (rstd * (gn - normed * dot)).to(x.dtype)
        return grad_x, grad_w, None


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        return RMSNormFn.apply(x, self.weight, self.eps)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, flash=False):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.flash = flash
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x, cos, sin, causal):
        b, s, _ = x.shape
        g, rep, d = self.kv_heads, self.heads // self.kv_heads, self.head_dim
        q = self.q_proj(x).view(b, s, g, rep, d).permute(0, 2, 3, 1, 4)  # b g rep s d
        k = self.k_proj(x).view(b, s, g, d).permute(0, 2, 1, 3)          # b g s d
        v = self.v_proj(x).view(b, s, g, d).permute(0, 2, 1, 3)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.flash:
            return self.o_proj(self.fused(q, k, v))
        # Grouped-query attention: the query heads of a group go into the row
        # dimension, so key and value heads are never repeated in memory.
        q = q.reshape(b, g, rep * s, d)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d)) + causal
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v)                                       # b g rep*s d
        out = out.view(b, g, rep, s, d).permute(0, 3, 1, 2, 4).reshape(b, s, self.heads * d)
        return self.o_proj(out)

    def fused(self, q, k, v):
        """Causal attention in one fused kernel (torch >= 2.0, FlashAttention
        on recent GPUs): it saves q, k, v, the output and the softmax
        statistics instead of the score matrices.  Key and value heads are
        repeated for the kernel, so it saves them heads / kv_heads times."""
        b, g, rep, s, d = q.shape
        heads = g * rep
        k = k[:, :, None].expand(b, g, rep, s, d).reshape(b, heads, s, d)
        v = v[:, :, None].expand(b, g, rep, s, d).reshape(b, heads, s, d)
        out = F.scaled_dot_product_attention(q.reshape(b, heads, s, d), k, v, is_causal=True)
        return out.view(b, g, rep, s, d).permute(0, 3, 1, 2, 4).reshape(b, s, heads * d)


class MLP(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden"])
        self.self_attn = Attention(cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg.get("flash", False))
        self.post_attention_layernorm = RMSNorm(cfg["hidden"])
        self.mlp = MLP(cfg["hidden"], cfg["ffn"])

    def forward(self, x, cos, sin, causal):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, causal)
        return h + self.mlp(self.post_attention_layernorm(h))


class Decoder(nn.Module):
    def __init__(self, cfg, tied):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab"], cfg["hidden"])
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg["layers"]))
        self.norm = RMSNorm(cfg["hidden"])
        self.lm_head = None if tied else nn.Linear(cfg["hidden"], cfg["vocab"], bias=False)
        d = cfg["hidden"] // cfg["heads"]
        pos = torch.arange(cfg["seq"], dtype=torch.float32)
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        angles = torch.cat([torch.outer(pos, inv)] * 2, dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        causal = torch.full((cfg["seq"], cfg["seq"]), float("-inf")).triu(1)
        rep = cfg["heads"] // cfg["kv_heads"]
        self.register_buffer("causal", causal.repeat(rep, 1), persistent=False)

    def forward(self, ids, labels, run_layer=None):
        """The loss of one batch.  `run_layer(index, layer, x, cos, sin,
        causal)`, when given, runs each decoder layer instead of a plain call
        (checkpointing, offload hooks)."""
        x = self.embed_tokens(ids)
        for index, layer in enumerate(self.layers):
            if run_layer is None:
                x = layer(x, self.cos, self.sin, self.causal)
            else:
                x = run_layer(index, layer, x, self.cos, self.sin, self.causal)
        h = self.norm(x)
        weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(h, weight)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))


def _factory(preset):
    """A recorder --module factory for one RECORDED shape at the batch and sequence asked."""
    def build(batch, seq, device, dtype):
        cfg = dict(RECORDED[preset], batch=batch, seq=seq)
        model = Decoder(cfg, tied=False).to(dtype)
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(0, cfg["vocab"], (batch, seq), generator=gen).to(device)
        labels = torch.randint(0, cfg["vocab"], (batch, seq), generator=gen).to(device)

        def step(m):
            m(ids, labels).backward()
        return model, step
    build.__name__ = preset
    build.__doc__ = f"The {preset} decoder (RECORDED['{preset}']), untied, for the recorder's --module."
    return build


tiny = _factory("tiny")
small = _factory("small")
