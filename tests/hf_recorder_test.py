#!/usr/bin/env python3
"""The recorder (python/offsim_torch/) on the CPU with Debian's python3-torch (exit 77 without torch).

1. The CUDA stand-ins (standins.py) give the loss and gradients of the plain
   eager version: dropout to the bit, LayerNorm and the three attention
   kernels with torch.allclose, with and without dropout, with GQA and a
   head dim that needs padding; whole models (sdpa and flash stand-ins
   against eager, GPT-2's dropout and LayerNorm stand-ins against the CPU ops).
2. A recording on the meta device equals the CPU recording row for row,
   for every family, attention and kernel set of tests/data/hf/; the one
   difference torch 1.13 has (the meta kernel of native_layer_norm keeps
   fp32 statistics for bf16 input, the CPU kernel bf16) is checked to be the
   only one.  Ops without a meta kernel in this torch are listed (a report).
3. Every command in tests/data/hf/README.md reproduces its committed CSV and
   JSON byte for byte (when this torch is the one that recorded them), and
   the README's per-layer summary is what `recorder.py --summary` prints.
4. Bad input: an unsupported model_type or activation is refused, naming
   the field and the supported values.
5. --module: every bad factory, step and --layers is exit 2 naming what is
   wrong; python/offsim_torch/examples/tiny_moe.py records on meta as on the CPU
   (LayerNorm's statistics aside), convolution_backward answered on meta.
6. The decoder of [transformer] (decoder.py) recorded by module name equals
   tests/data/trace/'s minimal-column files row for row, but for the two
   differences tests/data/trace/README.md names.

The package is imported from PYTHONPATH (CTest sets it to python/).
"""
import io
import json
import os
import re
import shlex
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "hf")

from offsim_torch import hf_models, lifetimes, recorder, standins  # noqa: E402  (after the skip)

FAILURES = []


def check(condition, what):
    if condition:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what}")
        FAILURES.append(what)


def config(name):
    with open(os.path.join(DATA, "configs", f"{name}-tiny.json")) as f:
        return json.load(f)


# ------------------------------------------------------------ 1. stand-ins --

def grads_of(fn, *inputs):
    xs = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = fn(*xs)
    g = torch.linspace(-1, 1, out.numel(), dtype=torch.float32).reshape(out.shape).to(out.dtype)
    (out.float() * g.float()).sum().backward()
    return out.detach(), [x.grad for x in xs]


def close(a, b, rtol, atol):
    return all(torch.allclose(x.float(), y.float(), rtol=rtol, atol=atol) for x, y in zip(a, b))


def test_dropout():
    x = torch.randn(2, 16, 64)
    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(3)
        ref_out, ref_g = grads_of(lambda t: F.dropout(t, 0.1, True), x.to(dtype))
        torch.manual_seed(3)
        out, g = grads_of(lambda t: standins.NativeDropout.apply(t, 0.1), x.to(dtype))
        check(torch.equal(out, ref_out) and torch.equal(g[0], ref_g[0]),
              f"NativeDropout equals F.dropout to the bit ({dtype})")
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        standins.NativeDropout.apply(x.clone().requires_grad_(True), 0.1)
    check([(t.dtype, tuple(t.shape)) for t in saved] == [(torch.bool, (2, 16, 64))],
          "NativeDropout saves one bool mask of the input's shape (native_dropout's result1)")


def test_layer_norm():
    x, w, b = torch.randn(2, 16, 64), torch.randn(64), torch.randn(64)
    ref = grads_of(lambda t, ww, bb: F.layer_norm(t, (64,), ww, bb, 1e-5), x, w, b)
    got = grads_of(lambda t, ww, bb: standins.NativeLayerNorm.apply(t, ww, bb, 1e-5), x, w, b)
    check(close([got[0]] + got[1], [ref[0]] + ref[1], 1e-5, 1e-5), "NativeLayerNorm: output and gradients (fp32)")
    # bf16: against the fp32 result on the same (bf16-rounded) inputs.  torch 1.13's own CPU kernel
    # is no reference there: it accumulates the weight and bias gradients in bf16 (0.4 off here).
    xb, wb, bb_ = x.bfloat16(), w.bfloat16(), b.bfloat16()
    ref = grads_of(lambda t, ww, bb: F.layer_norm(t, (64,), ww, bb, 1e-5), xb.float(), wb.float(), bb_.float())
    got = grads_of(lambda t, ww, bb: standins.NativeLayerNorm.apply(t, ww, bb, 1e-5), xb, wb, bb_)
    check(close([got[0]] + got[1], [ref[0]] + ref[1], 3e-2, 3e-2),
          "NativeLayerNorm: output and gradients (bf16, against fp32 on the same inputs)")
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        standins.NativeLayerNorm.apply(xb.requires_grad_(True), wb.requires_grad_(True), bb_.requires_grad_(True),
                                       1e-5)
    check([(t.dtype, tuple(t.shape)) for t in saved[3:]] == [(torch.float32, (2, 16, 1))] * 2,
          "NativeLayerNorm saves fp32 mean and rstd of shape (..., 1) for bf16 input, as the CUDA kernel")


def attention_cases():
    # (batch, heads, kv heads, seq, head dim, dtype, rtol/atol)
    return [(2, 4, 2, 16, 16, torch.float32, 1e-5), (1, 6, 2, 9, 12, torch.float32, 1e-5),
            (2, 4, 4, 16, 16, torch.bfloat16, 3e-2)]


def test_attention(p):
    for b, h, hk, s, d, dtype, tol in attention_cases():
        gen = torch.Generator()
        gen.manual_seed(b * 100 + h + s)
        q = torch.randn(b, h, s, d, generator=gen).to(dtype)
        k = torch.randn(b, hk, s, d, generator=gen).to(dtype)
        v = torch.randn(b, hk, s, d, generator=gen).to(dtype)
        scale = d ** -0.5
        keep = None
        if p > 0:
            torch.manual_seed(11)
            seed = int(torch.randint(0, 2 ** 62, (1,)).item())
            keep = standins.keep_masks(seed, (b, h, s, s), p, h // hk)
        ref = grads_of(lambda qq, kk, vv: standins.attention_reference(qq, kk, vv, scale, True, None, keep, p), q, k, v)
        tag = f"b{b} h{h}/{hk} s{s} d{d} {str(dtype)[6:]} p{p}"

        torch.manual_seed(11)
        got = grads_of(lambda qq, kk, vv: standins.FlashAttnFunc.apply(
            qq.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2), p, scale, True, None).transpose(1, 2), q, k, v)
        check(close([got[0]] + got[1], [ref[0]] + ref[1], tol, tol), f"FlashAttnFunc (native GQA) = eager, {tag}")
        for fused in (standins.ScaledDotProductFlashAttention, standins.ScaledDotProductEfficientAttention):
            torch.manual_seed(11)
            got = grads_of(lambda qq, kk, vv: fused.apply(qq, kk, vv, p, True, scale, None), q, k, v)
            check(close([got[0]] + got[1], [ref[0]] + ref[1], tol, tol), f"{fused.__name__} = eager, {tag}")


def test_window_and_activations():
    gen = torch.Generator()
    gen.manual_seed(7)
    q, k, v = (torch.randn(1, 4, 16, 16, generator=gen), torch.randn(1, 2, 16, 16, generator=gen),
               torch.randn(1, 2, 16, 16, generator=gen))
    ref = grads_of(lambda qq, kk, vv: standins.attention_reference(qq, kk, vv, 0.25, True, 5), q, k, v)
    got = grads_of(lambda qq, kk, vv: standins.FlashAttnFunc.apply(
        qq.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2), 0.0, 0.25, True, 5).transpose(1, 2), q, k, v)
    check(close([got[0]] + got[1], [ref[0]] + ref[1], 1e-5, 1e-5), "FlashAttnFunc with a sliding window of 5 = eager")
    cfg = dict(config("mistral"), sliding_window=8)
    check(same_step(run_model(cfg, "flash", "cuda", torch.bfloat16), run_model(cfg, "eager", "cpu", torch.bfloat16),
                    3e-2, 3e-2), "mistral, sliding window 8 < seq 16: flash (stand-in) = eager within bf16 rounding")
    check(same_step(run_model(config("mistral"), "sdpa", "cuda", torch.float32),
                    run_model(config("mistral"), "eager", "cpu", torch.float32), 1e-5, 1e-6),
          "mistral: sdpa (efficient-attention stand-in, fp32): loss and gradients = eager")
    for act, node in (("gelu_pytorch_tanh", "GeluBackward0"), ("gelu", "GeluBackward0"), ("silu", "SiluBackward0"),
                      ("gelu_new", "TanhBackward0")):
        rec = recorder.record_hf(dict(config("llama"), hidden_act=act), 1, 8, memory=False)
        nodes = {(r["op"], r["node"]) for r in rec.rows}
        check(("layers.0.mlp.act_fn", node) in nodes, f"hidden_act {act}: the MLP activation saves through {node}")


def run_model(cfg, attention, kernels, dtype):
    model = hf_models.build_model(cfg, attention, kernels, dtype, seed=0)
    ids, labels = hf_models.make_batch(cfg, 2, 16)
    torch.manual_seed(5)
    out = model(ids, labels=labels)
    out.loss.backward()
    return out.loss.detach(), {n: p.grad for n, p in model.named_parameters()}


def same_step(a, b, rtol, atol):
    (la, ga), (lb, gb) = a, b
    return (torch.allclose(la, lb, rtol=rtol, atol=atol) and ga.keys() == gb.keys()
            and all(torch.allclose(ga[n].float(), gb[n].float(), rtol=rtol, atol=atol) for n in ga))


def test_models():
    for family in ("qwen2", "llama", "gpt2"):
        cfg = config(family)
        if family == "gpt2":  # the fused attention kernels draw their own dropout: compare without
            cfg = dict(cfg, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
        eager = run_model(cfg, "eager", "cpu", torch.float32)
        check(same_step(run_model(cfg, "sdpa", "cuda", torch.float32), eager, 1e-5, 1e-6),
              f"{family}: sdpa (efficient-attention stand-in, fp32): loss and gradients = eager")
        if family != "gpt2":
            check(same_step(run_model(cfg, "sdpa-gqa", "cuda", torch.float32), eager, 1e-5, 1e-6),
                  f"{family}: sdpa-gqa (stand-in, fp32): loss and gradients = eager")
        eager_bf16 = run_model(cfg, "eager", "cpu", torch.bfloat16)
        for attention in ("sdpa", "flash"):
            check(same_step(run_model(cfg, attention, "cuda", torch.bfloat16), eager_bf16, 3e-2, 3e-2),
                  f"{family}: {attention} (stand-in, bf16): loss and gradients = eager within bf16 rounding")
    cfg = dict(config("gpt2"), attn_pdrop=0.0)
    check(same_step(run_model(cfg, "eager", "cuda", torch.float32), run_model(cfg, "eager", "cpu", torch.float32),
                    1e-5, 1e-6),
          "gpt2: dropout and LayerNorm stand-ins (resid and embedding dropout on): loss and gradients = CPU ops")


# --------------------------------------------------------------- 2. meta --

def read_commands():
    """The recorder commands of tests/data/hf/README.md, as argument lists."""
    with open(os.path.join(DATA, "README.md")) as f:
        text = f.read()
    block = re.search(r"<!-- commands:begin -->\s*```sh\n(.*?)```\s*<!-- commands:end -->", text, re.S)
    commands = []
    for line in block.group(1).splitlines():
        if line.strip():
            words = shlex.split(line)
            assert words[:4] == ["PYTHONPATH=python", "/usr/bin/python3", "-m", "offsim_torch.recorder"], line
            commands.append(words[4:])
    return commands, text


def option(args, name):
    return args[args.index(name) + 1] if name in args else None


def rows_of(rec):
    """The tensor rows, then the op counts (compute rows)."""
    return [",".join(str(r[c]) for c in recorder.COLUMNS) for r in rec.tensor_rows() + rec.compute_rows()]


def test_meta(commands):
    seen_kernels = set()
    for args in commands:
        cfg_path = option(args, "--hf-config")
        if cfg_path is None:
            continue  # --module (moe_models.py): torch.where's nonzero has no meta kernel in torch 1.13
        with open(os.path.join(ROOT, cfg_path)) as f:
            cfg = json.load(f)
        kw = dict(batch=int(option(args, "--batch")), seq=int(option(args, "--seq")),
                  dtype=option(args, "--dtype"), attention=option(args, "--attention"),
                  kernels=option(args, "--kernels") or "cuda")
        tag = os.path.basename(option(args, "--out"))
        cpu = rows_of(recorder.record_hf(cfg, device="cpu", memory=False, **kw))
        try:
            meta = rows_of(recorder.record_hf(cfg, device="meta", **kw))
        except NotImplementedError as e:
            check(False, f"{tag}: an op has no meta kernel: {str(e).splitlines()[0]}")
            continue
        seen_kernels.add(kw["kernels"])
        diff = [(a, b) for a, b in zip(cpu, meta) if a != b]
        if len(cpu) != len(meta):
            check(False, f"{tag}: meta has {len(meta)} rows, cpu {len(cpu)}")
            continue
        # The LayerNorm statistics' rows, and the op counts whose bytes include them.
        ln_stats = all((",NativeLayerNormBackward0,result" in a and ",bfloat16," in a and ",float32," in b)
                       or (a.split(",")[19] != "" and a.split(",")[:19] == b.split(",")[:19]) for a, b in diff)
        if diff and ln_stats and kw["kernels"] == "cpu":
            check(True, f"{tag}: meta = cpu row for row, except {len(diff)} LayerNorm statistics "
                        "(torch 1.13's meta kernel: fp32, its CPU kernel: bf16)")
        else:
            check(not diff, f"{tag}: the meta recording equals the CPU recording row for row ({len(cpu)} rows)")


def test_meta_probe():
    """Report which common ops have no meta kernel in this torch (not a failure)."""
    m = lambda *s: torch.zeros(*s, device="meta")  # noqa: E731
    idx = lambda *s: torch.zeros(*s, dtype=torch.long, device="meta")  # noqa: E731
    probes = {
        "nonzero": lambda: torch.nonzero(m(4, 4)), "masked_select": lambda: torch.masked_select(m(4), m(4) > 0),
        "unique": lambda: torch.unique(m(4)), "multinomial": lambda: torch.multinomial(m(4), 2),
        "histc": lambda: torch.histc(m(10)), "bincount": lambda: torch.bincount(idx(3)),
        "repeat_interleave (no output_size)": lambda: torch.repeat_interleave(m(4, 2), 2, dim=0),
        "native_dropout": lambda: torch.native_dropout(m(4, 4), 0.1, True),
        "native_layer_norm": lambda: F.layer_norm(m(2, 4), (4,)),
        "embedding_dense_backward": lambda: torch.ops.aten.embedding_dense_backward(m(2, 4), idx(2), 10, -1, False),
        "_log_softmax_backward_data": lambda: torch.ops.aten._log_softmax_backward_data(m(2, 4), m(2, 4), 1,
                                                                                         torch.float32),
        "topk": lambda: torch.topk(m(10), 3), "scatter_add": lambda: m(5).scatter_add(0, idx(2), m(2)),
        "index_put (accumulate)": lambda: m(5).index_put_((idx(2),), m(2), accumulate=True),
        "_ctc_loss": lambda: F.ctc_loss(m(5, 2, 4), idx(2, 3), [5, 5], [3, 3]),
        "convolution_backward (answered by flops.META_FALLBACKS)": lambda: torch.ops.aten.convolution_backward(
            m(1, 2, 4), m(1, 2, 4), m(2, 1, 1), [2], [1], [0], [1], False, [0], 2, [True, True, True]),
    }
    missing = []
    for name, fn in probes.items():
        try:
            fn()
        except (NotImplementedError, RuntimeError):
            missing.append(name)
    print(f"info no meta kernel in torch {torch.__version__}: {', '.join(missing) or 'none'} "
          f"(of {len(probes)} probed; the models' own ops all have one)")


# ------------------------------------------------------ 3. reproduction --

def test_reproduce(commands, readme):
    with open(os.path.join(DATA, option(commands[0], "--out").split("/")[-1].replace(".csv", ".json"))) as f:
        recorded_torch = json.load(f)["torch"]
    if recorded_torch != torch.__version__:
        print(f"skip byte-for-byte reproduction: recorded with torch {recorded_torch}, this is {torch.__version__}")
        return
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            blocks = []
            for args in commands:
                out = option(args, "--out")
                mine = os.path.join(tmp, os.path.basename(out))
                argv = list(args)
                argv[argv.index("--out") + 1] = mine
                with redirect_stderr(io.StringIO()):
                    rc = recorder.main(argv)
                for ext in (".csv", ".json"):
                    committed = os.path.join(ROOT, out[: -len(".csv")] + ext)
                    with open(committed, "rb") as a, open(mine[: -len(".csv")] + ext, "rb") as b:
                        same = a.read() == b.read()
                    check(rc == 0 and same, f"{os.path.basename(committed)} reproduced byte for byte by its command")
                buf = io.StringIO()
                with redirect_stdout(buf):
                    recorder.main(["--summary", os.path.join(ROOT, out)])
                blocks.append(buf.getvalue().rstrip("\n"))
        summary = re.search(r"<!-- summary:begin -->\n(.*?)\n<!-- summary:end -->", readme, re.S)
        check(summary is not None and summary.group(1).strip() == "\n\n".join(blocks).strip(),
              "tests/data/hf/README.md's summary is what recorder.py --summary prints for every file")
    finally:
        os.chdir(cwd)


# ------------------------------------------------------- 5. --module --

EXAMPLE = os.path.join(ROOT, "python", "offsim_torch", "examples", "tiny_moe.py")

BAD_MODULE = """
import torch, torch.nn as nn
class Indexed(nn.Module):
    def __init__(self):
        super().__init__(); self.layers = nn.ModuleList([nn.Linear(8, 8)]); self.emb = nn.Embedding(10, 8)
    def forward(self, ids, labels):
        x = self.layers[0](self.emb(ids))
        return x[x > 0].sum()
class Flat(nn.Module):
    def __init__(self):
        super().__init__(); self.stack = nn.ModuleList([nn.Linear(8, 8)]); self.emb = nn.Embedding(10, 8)
    def forward(self, ids, labels):
        return self.stack[0](self.emb(ids)).sum()
def indexed(batch, seq, device, dtype): return Indexed()
def flat(batch, seq, device, dtype): return Flat()
def raises(batch, seq, device, dtype): raise RuntimeError("out of ideas")
def narrow(batch): return Flat()
def number(batch, seq, device, dtype): return 3
def vector(batch, seq, device, dtype):
    m = Flat()
    m.forward = lambda ids, labels: m.stack[0](m.emb(ids))
    return m
def stepped(batch, seq, device, dtype):
    m = Flat()
    def step(model):
        model(torch.zeros(batch, seq, dtype=torch.long, device=device), None).backward()
    return m, step
"""


def run_recorder(argv):
    err = io.StringIO()
    with redirect_stderr(err):
        rc = recorder.main(argv)
    return rc, err.getvalue()


def test_module():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.csv")
        bad = os.path.join(tmp, "bad.py")
        with open(bad, "w") as f:
            f.write(BAD_MODULE)
        base = ["--batch", "2", "--seq", "4", "--out", out]
        cases = [
            (["--module", os.path.join(tmp, "nope.py") + ":build"], "no file"),
            (["--module", bad], "expected PATH.py:FACTORY or MODULE:FACTORY"),
            (["--module", "offsim_torch.nope:build"], "no module 'offsim_torch.nope'"),
            (["--module", bad + ":missing"], "has no 'missing'"),
            (["--module", bad + ":raises"], "the factory raised RuntimeError: out of ideas"),
            (["--module", bad + ":narrow"], "must take keyword arguments batch, seq, device and dtype"),
            (["--module", bad + ":number"], "the factory returned a int"),
            (["--module", bad + ":vector", "--layers", "stack"], "not a scalar loss"),
            (["--module", bad + ":flat"], "no layer list found"),
            (["--module", bad + ":flat", "--layers", "stack.x"], "layers 'stack.x': stack has no attribute 'x'"),
            (["--module", bad + ":flat", "--layers", "emb"], "not a list of layers"),
            (["--module", bad + ":indexed", "--device", "meta"], "aten.index.Tensor has no meta kernel"),
        ]
        for argv, piece in cases:
            rc, err = run_recorder(argv + base)
            check(rc == 2 and piece in err and not os.path.exists(out),
                  f"--module {' '.join(argv[1:])}: exit 2 naming it ({piece}); got {rc}: {err.strip()}")
        rc, err = run_recorder(["--module", bad + ":stepped", "--layers", "stack", "--device", "meta"] + base)
        check(rc == 0 and os.path.exists(out), f"--module with (model, step) and --layers records: {err.strip()}")
        # The example on meta and on the CPU: the same rows but LayerNorm's statistics.
        recs = {}
        for device in ("meta", "cpu"):
            path = os.path.join(tmp, f"moe-{device}.csv")
            rc, err = run_recorder(["--module", EXAMPLE + ":build", "--batch", "2", "--seq", "16", "--dtype", "bf16",
                                    "--device", device, "--out", path])
            check(rc == 0, f"tiny_moe.py records on {device}: {err.strip()}")
            recs[device] = recorder.read_csv(path)
        # The allocation rows (lifetimes.py) need the memory curve: the CPU's only.
        alloc = [r for r in recs["cpu"] if r["saved"] == "0" and r["name"] in lifetimes.KINDS]
        check(alloc and not [r for r in recs["meta"] if r["saved"] == "0" and r["name"] in lifetimes.KINDS],
              f"tiny_moe.py: the CPU recording lists its allocations ({len(alloc)} rows), meta none")
        meta, cpu = recs["meta"], [r for r in recs["cpu"] if r not in alloc]
        diff = [(a, b) for a, b in zip(cpu, meta) if a != b]
        only_ln = all(a["slot"] in ("result1", "result2") and a["node"] == "NativeLayerNormBackward0"
                      or (a["flops"] != "" and a["flops"] == b["flops"]) for a, b in diff)
        check(len(cpu) == len(meta) and only_ln and diff,
              f"tiny_moe.py: meta = cpu row for row ({len(cpu)} rows) but {len(diff)} LayerNorm rows and counts")
        convs = [r for r in meta if r["name"] == "convolution_backward"]
        check(convs and all(int(r["flops"]) > 0 for r in convs),
              "tiny_moe.py on meta: convolution_backward (no meta kernel in 1.13) answered and counted")
        with open(os.path.join(tmp, "moe-meta.json")) as f:
            doc = json.load(f)
        check("aten.convolution_backward.default" in doc.get("meta_fallbacks", {}),
              "the meta JSON lists the calls answered by the fallback")


# --------------------------------------------------------- 4. bad input --

def test_bad_input():
    for bad, field in ((dict(config("llama"), model_type="falcon"), "model_type"),
                       (dict(config("llama"), hidden_act="relu"), "hidden_act"),
                       (dict(config("gpt2"), activation_function="swish"), "activation_function")):
        try:
            hf_models.build_model(bad)
            check(False, f"refuses an unsupported {field}")
        except hf_models.ConfigError as e:
            check(f"'{field}'" in str(e) and "supported" in str(e), f"refuses an unsupported {field}: {e}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "c.json")
        with open(path, "w") as f:
            json.dump(dict(config("qwen2"), model_type="bert"), f)
        err = io.StringIO()
        with redirect_stderr(err):
            rc = recorder.main(["--hf-config", path, "--batch", "1", "--seq", "4", "--out",
                                os.path.join(tmp, "t.csv")])
        check(rc == 2 and "model_type" in err.getvalue() and not os.path.exists(os.path.join(tmp, "t.csv")),
              "recorder.py exits 2 on an unsupported model_type and writes nothing")


# ------------------------------------------- 6. the minimal columns --

MINIMAL = ("layer", "op", "name", "bytes", "dtype", "shape", "is_parameter", "storage", "storage_bytes", "saved")


def test_minimal_columns():
    """decoder.py's shapes recorded by the one recorder, cut to tests/data/trace/'s columns."""
    import csv
    for shape, seq in (("tiny", 128), ("small", 256)):
        with open(os.path.join(ROOT, "tests", "data", "trace", f"qwen2-{shape}.csv"), newline="") as f:
            reader = csv.DictReader(f)
            check(tuple(reader.fieldnames) == MINIMAL, f"qwen2-{shape}.csv has the ten minimal columns only")
            committed = list(reader)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "t.csv")
            rc, err = run_recorder(["--module", f"offsim_torch.decoder:{shape}", "--batch", "2", "--seq", str(seq),
                                    "--dtype", "fp32", "--no-lifetimes", "--out", out])
            check(rc == 0, f"offsim_torch.decoder:{shape} records by module name: {err.strip()}")
            tensors = [r for r in recorder.read_csv(out) if r["flops"] == ""]
        wrapped = functional = 0
        same = len(tensors) == len(committed)
        for new, old in zip(tensors, committed):
            cut = {c: new[c] for c in MINIMAL}
            if new["adjust"] == "wrapped-number" and cut["saved"] == "0" and old["saved"] == "1":
                cut["saved"], wrapped = "1", wrapped + 1
            if cut["op"] == "root" and old["op"] == "functional":
                cut["op"], functional = "functional", functional + 1
            same = same and cut == old
        check(same and wrapped > 0 and functional > 0,
              f"qwen2-{shape}.csv = the recorder's {len(tensors)} tensor rows in ten columns, but {wrapped} "
              f"wrapped-number rows (saved 0) and {functional} rows outside any module (op root)")


def main():
    torch.set_num_threads(1)
    start = time.time()
    test_dropout()
    test_layer_norm()
    test_attention(0.0)
    test_attention(0.2)
    test_models()
    test_window_and_activations()
    commands, readme = read_commands()
    test_meta(commands)
    test_meta_probe()
    test_reproduce(commands, readme)
    test_bad_input()
    test_module()
    test_minimal_columns()
    print(f"{len(FAILURES)} failed, {time.time() - start:.1f} s")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
