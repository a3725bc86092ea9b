"""A model of your own for recorder.py --module: a small mixture-of-experts decoder.

Not one of the HF families offsim generates: each block is a causal
depthwise convolution (a short token mixer, as in Hyena or Mamba blocks),
causal self-attention written with plain matmuls, and a top-1 routed
mixture of two GELU experts.  The routing is computed densely (the top-1
gate scattered into a (tokens, experts) matrix, every expert run on every
token and weighted by it), so every shape is known without the data and
the model records on the meta device: torch 1.13 has no meta kernel for
nonzero, which sparse routing (tokens gathered per expert) needs.

The factory contract (recorder.py's docstring): `build(batch, seq, device,
dtype)` returns the model, whose forward(ids, labels) returns the loss; the
recorder feeds token ids of shape (batch, seq).  The layers it records as
offload groups are `blocks`, found by name.

    PYTHONPATH=python /usr/bin/python3 -m offsim_torch.recorder --module python/offsim_torch/examples/tiny_moe.py:build \
        --batch 4 --seq 128 --dtype bf16 --device meta --out tiny_moe.csv
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN, HEADS, FFN, EXPERTS, LAYERS, VOCAB, KERNEL = 128, 4, 256, 2, 4, 512, 4


class CausalConv(nn.Module):
    """Depthwise causal convolution over the sequence, then SiLU."""

    def __init__(self, hidden, kernel):
        super().__init__()
        self.conv = nn.Conv1d(hidden, hidden, kernel, groups=hidden, padding=kernel - 1)

    def forward(self, x):                       # x: (batch, seq, hidden)
        y = self.conv(x.transpose(1, 2))[..., : x.shape[1]]
        return F.silu(y.transpose(1, 2))


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(h // self.heads)
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        probs = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        return self.out(torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h))


class Expert(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class MoE(nn.Module):
    """Top-1 routing, computed densely (see the module docstring)."""

    def __init__(self, hidden, ffn, experts):
        super().__init__()
        self.router = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(Expert(hidden, ffn) for _ in range(experts))

    def forward(self, x):
        probs = torch.softmax(self.router(x), dim=-1)
        top, index = probs.topk(1, dim=-1)
        gates = torch.zeros_like(probs).scatter(-1, index, top)
        out = 0
        for e, expert in enumerate(self.experts):
            out = out + gates[..., e : e + 1] * expert(x)
        return out


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(HIDDEN)
        self.mixer = CausalConv(HIDDEN, KERNEL)
        self.attn = Attention(HIDDEN, HEADS)
        self.norm2 = nn.LayerNorm(HIDDEN)
        self.moe = MoE(HIDDEN, FFN, EXPERTS)

    def forward(self, x):
        x = x + self.attn(self.mixer(self.norm1(x)))
        return x + self.moe(self.norm2(x))


class TinyMoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids, labels):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB).float(), labels[:, 1:].reshape(-1))


def build(batch, seq, device, dtype):
    """The factory: the model on `device` in `dtype`, in train mode (batch and seq unused: any shape)."""
    return TinyMoE().to(device=device, dtype=dtype).train()
