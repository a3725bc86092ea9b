"""HuggingFace transformers' causal LMs written again, op by op, in plain torch.

No `transformers` package and no download: each model is built from a
config.json dict with random weights (a fixed seed), in train mode, and runs
the same tensor operations in the same order as HF's modeling code, so that
autograd saves the same tensors.  Followed (read through the repository's
search tool; our own code, not a copy):

- qwen2, llama, mistral: modeling_qwen2.py / modeling_llama.py /
  modeling_mistral.py (RMSNorm, rotate_half / apply_rotary_pos_emb,
  repeat_kv, eager_attention_forward, the MLP), integrations/
  sdpa_attention.py, integrations/flash_attention.py, loss/loss_utils.py
  (ForCausalLMLoss).
- gpt2: modeling_gpt2.py of the same generation (eager_attention_forward
  with `* scaling`, the mask from create_causal_mask, Conv1D from
  pytorch_utils.py), GPT2LMHeadModel with the head tied to wte.  Older
  releases (4.3x-4.4x) divided by a 0-dim torch.full tensor and masked with
  torch.where on the `bias` buffer instead, which saves that 0-dim divisor
  and a bool view of the buffer (WhereBackward0.condition); not modelled.
- qwen2 / llama / mistral structure as in the 4.4x-4.5x releases: the rotary
  embedding computed once in the model's forward under no_grad and passed
  to every layer; a development version of modeling_qwen2.py (read here)
  computes it inside every attention layer (`rope = "per-layer"`).

Attention implementations (`attention`):

- eager: HF's eager_attention_forward (repeat_kv; softmax in fp32 then
  .to(query dtype) for qwen2/llama/mistral; GPT-2's softmax in the
  activation dtype; functional dropout on the probabilities).
- sdpa: HF's sdpa_attention_forward as it runs when torch < 2.5 or a mask
  is given: repeat_kv, then torch's scaled_dot_product_attention with
  is_causal and no mask.  `sdpa-gqa`: the same with enable_gqa=True and no
  repeat_kv (HF's `use_gqa_in_sdpa`: torch >= 2.5 and no mask).
- flash: flash_attention_2 (flash_attn_func on (batch, seq, heads, dim)
  views, native GQA: no repeat_kv; fp16/bf16 only).

Kernels (`kernels`): "cuda" runs, where a CUDA kernel saves something else
than its CPU version, the stand-ins of standins.py (fused dropout's bool
mask, LayerNorm's fp32 statistics, SDPA's flash/efficient kernels, flash_attn);
"cpu" runs what torch on this machine runs (F.dropout, F.layer_norm,
torch's own SDPA on the CPU).  flash has no CPU kernel.

Bad input raises ConfigError naming the field and the supported values.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from offsim_torch import standins

MODEL_TYPES = ("qwen2", "llama", "mistral", "gpt2")
ACTIVATIONS = ("silu", "gelu_new", "gelu_pytorch_tanh", "gelu")
ATTENTIONS = ("eager", "sdpa", "sdpa-gqa", "flash")
KERNELS = ("cuda", "cpu")
ROPE = ("shared", "per-layer")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class ConfigError(ValueError):
    """A config field or option this module does not model."""


# ------------------------------------------------------------------ config --

def _get(cfg, field, default=None, required=False):
    if field in cfg and cfg[field] is not None:
        return cfg[field]
    if required:
        raise ConfigError(f"config field '{field}' is required for model_type '{cfg.get('model_type')}'")
    return default


def _positive_int(cfg, field, value):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"config field '{field}': expected a positive whole number, got {value!r}")
    return value


def _rate(cfg, field, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ConfigError(f"config field '{field}': expected a dropout probability in [0, 1), got {value!r}")
    return float(value)


def normalise_config(cfg):
    """The fields the models use, from a config.json dict; ConfigError on anything not modelled."""
    if not isinstance(cfg, dict):
        raise ConfigError("the config must be a JSON object (an HF config.json)")
    model_type = cfg.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ConfigError(f"config field 'model_type': {model_type!r} is not supported "
                          f"(supported: {', '.join(MODEL_TYPES)})")
    c = {"model_type": model_type}
    if model_type == "gpt2":
        act_field = "activation_function"
        c["hidden_act"] = _get(cfg, act_field, "gelu_new")
        c["hidden_size"] = _positive_int(cfg, "n_embd", _get(cfg, "n_embd", _get(cfg, "hidden_size", 768)))
        c["num_hidden_layers"] = _positive_int(cfg, "n_layer", _get(cfg, "n_layer", 12))
        c["num_attention_heads"] = _positive_int(cfg, "n_head", _get(cfg, "n_head", 12))
        c["num_key_value_heads"] = c["num_attention_heads"]
        c["intermediate_size"] = _positive_int(cfg, "n_inner", _get(cfg, "n_inner", 4 * c["hidden_size"]))
        c["vocab_size"] = _positive_int(cfg, "vocab_size", _get(cfg, "vocab_size", 50257))
        c["max_position_embeddings"] = _positive_int(cfg, "n_positions", _get(cfg, "n_positions", 1024))
        c["layer_norm_epsilon"] = float(_get(cfg, "layer_norm_epsilon", 1e-5))
        for field in ("resid_pdrop", "embd_pdrop", "attn_pdrop"):
            c[field] = _rate(cfg, field, _get(cfg, field, 0.1))
        c["scale_attn_weights"] = bool(_get(cfg, "scale_attn_weights", True))
        c["scale_attn_by_inverse_layer_idx"] = bool(_get(cfg, "scale_attn_by_inverse_layer_idx", False))
        if _get(cfg, "reorder_and_upcast_attn", False):
            raise ConfigError("config field 'reorder_and_upcast_attn': true is not modelled (supported: false)")
        if _get(cfg, "add_cross_attention", False):
            raise ConfigError("config field 'add_cross_attention': true is not modelled (supported: false)")
        c["tie_word_embeddings"] = bool(_get(cfg, "tie_word_embeddings", True))
        c["initializer_range"] = float(_get(cfg, "initializer_range", 0.02))
        if c["hidden_size"] % c["num_attention_heads"]:
            raise ConfigError("config fields 'n_embd' and 'n_head': n_embd must be a multiple of n_head")
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    else:
        act_field = "hidden_act"
        c["hidden_act"] = _get(cfg, act_field, "silu")
        for field in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
            c[field] = _positive_int(cfg, field, _get(cfg, field, required=True))
        c["num_key_value_heads"] = _positive_int(cfg, "num_key_value_heads",
                                                 _get(cfg, "num_key_value_heads", c["num_attention_heads"]))
        if c["num_attention_heads"] % c["num_key_value_heads"]:
            raise ConfigError("config fields 'num_attention_heads' and 'num_key_value_heads': the first must be a "
                              "multiple of the second")
        head_dim = cfg.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        c["head_dim"] = _positive_int(cfg, "head_dim", head_dim)
        c["rms_norm_eps"] = float(_get(cfg, "rms_norm_eps", 1e-6))
        c["attention_dropout"] = _rate(cfg, "attention_dropout", _get(cfg, "attention_dropout", 0.0))
        c["tie_word_embeddings"] = bool(_get(cfg, "tie_word_embeddings", False))
        c["initializer_range"] = float(_get(cfg, "initializer_range", 0.02))
        c["max_position_embeddings"] = _positive_int(cfg, "max_position_embeddings",
                                                     _get(cfg, "max_position_embeddings", 2048))
        rope = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
        c["rope_theta"] = float(rope.get("rope_theta", _get(cfg, "rope_theta", 10000.0)))
        if _get(cfg, "pretraining_tp", 1) != 1:
            raise ConfigError("config field 'pretraining_tp': only 1 is modelled")
        if model_type == "qwen2":
            c["qkv_bias"], c["o_bias"], c["mlp_bias"] = True, False, False
            if _get(cfg, "use_sliding_window", False):
                raise ConfigError("config field 'use_sliding_window': true is not modelled for qwen2 (supported: false)")
            c["sliding_window"] = None
        else:
            bias = bool(_get(cfg, "attention_bias", False))
            c["qkv_bias"], c["o_bias"] = bias, bias
            c["mlp_bias"] = bool(_get(cfg, "mlp_bias", False)) if model_type == "llama" else False
            c["sliding_window"] = _get(cfg, "sliding_window", None) if model_type == "mistral" else None
            if c["sliding_window"] is not None:
                _positive_int(cfg, "sliding_window", c["sliding_window"])
    if c["hidden_act"] not in ACTIVATIONS:
        raise ConfigError(f"config field '{act_field}': {c['hidden_act']!r} is not supported "
                          f"(supported: {', '.join(ACTIVATIONS)})")
    return c


def check_options(attention, kernels, dtype, rope="shared"):
    if attention not in ATTENTIONS:
        raise ConfigError(f"attention: {attention!r} is not supported (supported: {', '.join(ATTENTIONS)})")
    if kernels not in KERNELS:
        raise ConfigError(f"kernels: {kernels!r} is not supported (supported: {', '.join(KERNELS)})")
    if rope not in ROPE:
        raise ConfigError(f"rope: {rope!r} is not supported (supported: {', '.join(ROPE)})")
    if attention == "flash" and kernels == "cpu":
        raise ConfigError("attention 'flash' (flash_attention_2) has no CPU kernel: use kernels 'cuda' (its stand-in)")
    if attention == "flash" and dtype not in (torch.float16, torch.bfloat16):
        raise ConfigError("attention 'flash': flash_attn runs in fp16 or bf16 only (HF casts fp32 inputs to the "
                          "Linear weights' dtype, fp32 here, and flash_attn refuses it)")
    if attention == "sdpa-gqa" and kernels == "cpu" and not hasattr(F, "scaled_dot_product_attention"):
        raise ConfigError("attention 'sdpa-gqa' with kernels 'cpu' needs torch >= 2.5 (enable_gqa)")


# ------------------------------------------------------------ basic pieces --

def dropout(x, p, training, kernels):
    """at::dropout: the input itself when p == 0 or not training."""
    if not training or p == 0.0:
        return x
    if kernels == "cuda":
        return standins.NativeDropout.apply(x, p)
    return F.dropout(x, p, True)


class Dropout(nn.Module):
    def __init__(self, p, kernels):
        super().__init__()
        self.p, self.kernels = p, kernels

    def forward(self, x):
        return dropout(x, self.p, self.training, self.kernels)


class LayerNorm(nn.Module):
    def __init__(self, hidden, eps, kernels):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.eps, self.kernels = eps, kernels

    def forward(self, x):
        if self.kernels == "cuda":
            return standins.NativeLayerNorm.apply(x, self.weight, self.bias, self.eps)
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """Qwen2RMSNorm / LlamaRMSNorm: upcast, pow, mean, rsqrt, multiply, cast, weight *."""

    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class SiLU(nn.Module):
    def forward(self, x):
        return F.silu(x)


class GELU(nn.Module):
    def forward(self, x):
        return F.gelu(x)


class GELUTanh(nn.Module):
    """HF's PytorchGELUTanh (gelu_pytorch_tanh): the fused tanh approximation."""

    def forward(self, x):
        return F.gelu(x, approximate="tanh")


class NewGELU(nn.Module):
    """HF's NewGELUActivation (gelu_new): the tanh formula in plain ops."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


ACT2CLS = {"silu": SiLU, "gelu": GELU, "gelu_pytorch_tanh": GELUTanh, "gelu_new": NewGELU}


class Output:
    """What a CausalLMOutput holds that matters here: the loss and the logits."""

    def __init__(self, loss, logits):
        self.loss, self.logits = loss, logits


def causal_lm_loss(logits, labels, vocab_size, ignore_index=-100):
    """HF's ForCausalLMLoss: upcast, shift the labels by padding, flatten, cross entropy."""
    logits = logits.float()
    labels = F.pad(labels, (0, 1), value=ignore_index)
    shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, vocab_size)
    shift_labels = shift_labels.view(-1)
    shift_labels = shift_labels.to(logits.device)
    return F.cross_entropy(logits, shift_labels, ignore_index=ignore_index, reduction="mean")


def eager_causal_mask(batch, seq, dtype, device, window=None):
    """The 4-D additive mask HF's create_causal_mask builds for eager attention (no padding)."""
    with torch.no_grad():
        i = torch.arange(seq, device=device)[:, None]
        j = torch.arange(seq, device=device)[None, :]
        allowed = j <= i
        if window is not None:
            allowed = allowed & (j > i - window)
        allowed = allowed[None, None].expand(batch, 1, seq, seq)
        zero = torch.tensor(0.0, dtype=dtype, device=device)
        return torch.where(allowed, zero, torch.finfo(dtype).min)


# ------------------------------------------------------------- attention --

def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def eager_attention(module, query, key, value, attention_mask, scaling, dropout_p):
    """qwen2 / llama / mistral eager_attention_forward."""
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = dropout(attn_weights, dropout_p, module.training, module.kernels)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output.transpose(1, 2).contiguous()


def gpt2_eager_attention(module, query, key, value, attention_mask, scaling, dropout_p):
    """GPT-2's eager_attention_forward: softmax in the activation dtype, no repeat_kv."""
    attn_weights = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = F.softmax(attn_weights, dim=-1)
    attn_weights = attn_weights.type(value.dtype)
    attn_weights = dropout(attn_weights, dropout_p, module.training, module.kernels)
    attn_output = torch.matmul(attn_weights, value)
    return attn_output.transpose(1, 2)


def _torch_sdpa(query, key, value, dropout_p, scaling, is_causal, enable_gqa):
    """torch's own scaled_dot_product_attention on this machine (kernels = cpu)."""
    if hasattr(F, "scaled_dot_product_attention"):
        kwargs = {"enable_gqa": True} if enable_gqa else {}
        return F.scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=dropout_p,
                                              scale=scaling, is_causal=is_causal, **kwargs)
    # torch 1.13: the private _scaled_dot_product_attention, which scales by
    # 1/sqrt(head_dim) and has no scale argument.
    if abs(scaling - query.shape[-1] ** -0.5) > 1e-12:
        raise ConfigError("torch 1.13's SDPA has no scale argument: only scaling = head_dim ** -0.5 is modelled")
    return F._scaled_dot_product_attention(query, key, value, None, dropout_p, False, is_causal)[0]


def sdpa_attention(module, query, key, value, attention_mask, scaling, dropout_p):
    """HF's sdpa_attention_forward."""
    enable_gqa = module.attention == "sdpa-gqa"
    if hasattr(module, "num_key_value_groups") and not enable_gqa:
        key = repeat_kv(key, module.num_key_value_groups)
        value = repeat_kv(value, module.num_key_value_groups)
    if attention_mask is not None:
        raise ConfigError("sdpa with a mask (padding, or a sliding window shorter than the sequence) is not "
                          "modelled: CUDA takes neither flash nor, for bf16, the kernels the stand-ins mirror")
    is_causal = query.shape[2] > 1 and attention_mask is None and module.is_causal
    if module.kernels == "cuda":
        fused = (standins.ScaledDotProductFlashAttention if query.dtype in (torch.float16, torch.bfloat16)
                 else standins.ScaledDotProductEfficientAttention)
        out = fused.apply(query, key, value, dropout_p, is_causal, scaling, None)
    else:
        out = _torch_sdpa(query, key, value, dropout_p, scaling, is_causal, enable_gqa)
    return out.transpose(1, 2).contiguous()


def flash_attention(module, query, key, value, attention_mask, scaling, dropout_p):
    """HF's flash_attention_forward (flash_attention_2): (b, s, h, d) views, native GQA."""
    query = query.transpose(1, 2)
    key = key.transpose(1, 2)
    value = value.transpose(1, 2)
    window = module.sliding_window if module.sliding_window is not None and module.sliding_window < query.shape[1] \
        else None
    return standins.FlashAttnFunc.apply(query, key, value, dropout_p, scaling, module.is_causal, window)


# ------------------------------------------------- qwen2 / llama / mistral --

class RotaryEmbedding(nn.Module):
    """The default RoPE: cos and sin of (1, seq, head_dim) in the activations' dtype, no grad."""

    def __init__(self, head_dim, theta):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta

    @torch.no_grad()
    def forward(self, x, position_ids):
        d = self.head_dim
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.int64, device=x.device).float() / d))
        inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class Attention(nn.Module):
    def __init__(self, c, layer_idx, attention, kernels, rope):
        super().__init__()
        self.layer_idx, self.attention, self.kernels = layer_idx, attention, kernels
        self.head_dim = c["head_dim"]
        self.num_key_value_groups = c["num_attention_heads"] // c["num_key_value_heads"]
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout = c["attention_dropout"]
        self.is_causal = True
        self.sliding_window = c["sliding_window"]
        hidden, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=c["qkv_bias"])
        self.k_proj = nn.Linear(hidden, kv * self.head_dim, bias=c["qkv_bias"])
        self.v_proj = nn.Linear(hidden, kv * self.head_dim, bias=c["qkv_bias"])
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=c["o_bias"])
        if rope == "per-layer":
            self.rotary_emb = RotaryEmbedding(self.head_dim, c["rope_theta"])

    def forward(self, hidden_states, position_embeddings, attention_mask, position_ids):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        if position_embeddings is None:
            cos, sin = self.rotary_emb(hidden_states, position_ids)
        else:
            cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        dropout_p = 0.0 if not self.training else self.attention_dropout
        interface = {"eager": eager_attention, "sdpa": sdpa_attention, "sdpa-gqa": sdpa_attention,
                     "flash": flash_attention}[self.attention]
        attn_output = interface(self, query_states, key_states, value_states, attention_mask, self.scaling,
                                dropout_p)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        hidden, inter, bias = c["hidden_size"], c["intermediate_size"], c["mlp_bias"]
        self.gate_proj = nn.Linear(hidden, inter, bias=bias)
        self.up_proj = nn.Linear(hidden, inter, bias=bias)
        self.down_proj = nn.Linear(inter, hidden, bias=bias)
        self.act_fn = ACT2CLS[c["hidden_act"]]()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c, layer_idx, attention, kernels, rope):
        super().__init__()
        self.self_attn = Attention(c, layer_idx, attention, kernels, rope)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings, attention_mask, position_ids)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states


class DecoderModel(nn.Module):
    def __init__(self, c, attention, kernels, rope):
        super().__init__()
        self.c, self.attention, self.rope = c, attention, rope
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(c, i, attention, kernels, rope)
                                    for i in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.rotary_emb = RotaryEmbedding(c["head_dim"], c["rope_theta"])

    def forward(self, input_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        batch, seq = input_ids.shape
        cache_position = torch.arange(0, seq, device=inputs_embeds.device)
        position_ids = cache_position.unsqueeze(0)
        window = self.c["sliding_window"]
        window = window if window is not None and window < seq else None
        if self.attention == "eager":
            mask = eager_causal_mask(batch, seq, inputs_embeds.dtype, inputs_embeds.device, window)
        elif window is not None and self.attention != "flash":
            mask = eager_causal_mask(batch, seq, torch.bool, inputs_embeds.device, window)
        else:
            mask = None
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids) if self.rope == "shared" else None
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states, attention_mask=mask, position_ids=position_ids,
                                          position_embeddings=position_embeddings)
        return self.norm(hidden_states)


class DecoderForCausalLM(nn.Module):
    """Qwen2ForCausalLM / LlamaForCausalLM / MistralForCausalLM."""

    def __init__(self, c, attention, kernels, rope):
        super().__init__()
        self.config = c
        self.model = DecoderModel(c, attention, kernels, rope)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, labels=None):
        hidden_states = self.model(input_ids)
        slice_indices = slice(0, None)  # logits_to_keep = 0
        logits = self.lm_head(hidden_states[:, slice_indices, :])
        loss = None
        if labels is not None:
            loss = causal_lm_loss(logits, labels, self.config["vocab_size"])
        return Output(loss, logits)


# -------------------------------------------------------------------- gpt2 --

class Conv1D(nn.Module):
    """transformers.pytorch_utils.Conv1D: addmm(bias, x.view(-1, nx), weight (nx, nf))."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, c, layer_idx, attention, kernels):
        super().__init__()
        self.attention, self.kernels, self.layer_idx = attention, kernels, layer_idx
        self.embed_dim = c["hidden_size"]
        self.num_heads = c["num_attention_heads"]
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scaling = 1.0
        if c["scale_attn_weights"]:
            self.scaling = self.head_dim ** -0.5
        if c["scale_attn_by_inverse_layer_idx"]:
            self.scaling /= float(layer_idx + 1)
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = Dropout(c["attn_pdrop"], kernels)
        self.resid_dropout = Dropout(c["resid_pdrop"], kernels)
        self.is_causal = True
        self.sliding_window = None

    def forward(self, hidden_states, attention_mask):
        query_states, key_states, value_states = self.c_attn(hidden_states).split(self.split_size, dim=2)
        shape_kv = (*key_states.shape[:-1], -1, self.head_dim)
        key_states = key_states.view(shape_kv).transpose(1, 2)
        value_states = value_states.view(shape_kv).transpose(1, 2)
        shape_q = (*query_states.shape[:-1], -1, self.head_dim)
        query_states = query_states.view(shape_q).transpose(1, 2)
        interface = {"eager": gpt2_eager_attention, "sdpa": sdpa_attention, "sdpa-gqa": sdpa_attention,
                     "flash": flash_attention}[self.attention]
        attn_output = interface(self, query_states, key_states, value_states, attention_mask, self.scaling,
                                self.attn_dropout.p if self.training else 0.0)
        attn_output = attn_output.reshape(*attn_output.shape[:-2], -1).contiguous()
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return attn_output


class GPT2MLP(nn.Module):
    def __init__(self, c, kernels):
        super().__init__()
        self.c_fc = Conv1D(c["intermediate_size"], c["hidden_size"])
        self.c_proj = Conv1D(c["hidden_size"], c["intermediate_size"])
        self.act = ACT2CLS[c["hidden_act"]]()
        self.dropout = Dropout(c["resid_pdrop"], kernels)

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, c, layer_idx, attention, kernels):
        super().__init__()
        self.ln_1 = LayerNorm(c["hidden_size"], c["layer_norm_epsilon"], kernels)
        self.attn = GPT2Attention(c, layer_idx, attention, kernels)
        self.ln_2 = LayerNorm(c["hidden_size"], c["layer_norm_epsilon"], kernels)
        self.mlp = GPT2MLP(c, kernels)

    def forward(self, hidden_states, attention_mask=None):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output = self.attn(hidden_states, attention_mask)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states


class GPT2Model(nn.Module):
    def __init__(self, c, attention, kernels):
        super().__init__()
        self.attention = attention
        self.wte = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.wpe = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])
        self.drop = Dropout(c["embd_pdrop"], kernels)
        self.h = nn.ModuleList(GPT2Block(c, i, attention, kernels) for i in range(c["num_hidden_layers"]))
        self.ln_f = LayerNorm(c["hidden_size"], c["layer_norm_epsilon"], kernels)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        batch = input_ids.shape[0]
        inputs_embeds = self.wte(input_ids)
        position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device) + 0
        position_ids = position_ids.unsqueeze(0)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds.to(inputs_embeds.device)
        mask = None
        if self.attention == "eager":
            mask = eager_causal_mask(batch, input_shape[-1], inputs_embeds.dtype, inputs_embeds.device)
        hidden_states = self.drop(hidden_states)
        output_shape = (-1,) + input_shape[1:] + (hidden_states.size(-1),)
        for block in self.h:
            hidden_states = block(hidden_states, mask)
        hidden_states = self.ln_f(hidden_states)
        return hidden_states.view(output_shape)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, c, attention, kernels):
        super().__init__()
        self.config = c
        self.transformer = GPT2Model(c, attention, kernels)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, input_ids, labels=None):
        hidden_states = self.transformer(input_ids)
        slice_indices = slice(0, None)  # logits_to_keep = 0
        logits = self.lm_head(hidden_states[:, slice_indices, :])
        loss = None
        if labels is not None:
            loss = causal_lm_loss(logits, labels, self.config["vocab_size"])
        return Output(loss, logits)


# ------------------------------------------------------------------- build --

def _init_weights(model, std):
    """HF's _init_weights: normal(0, initializer_range) weights, zero biases, unit norms."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, Conv1D, nn.Embedding)):
                module.weight.normal_(mean=0.0, std=std)
                if getattr(module, "bias", None) is not None:
                    module.bias.zero_()
            elif isinstance(module, (RMSNorm, LayerNorm)):
                module.weight.fill_(1.0)
                if getattr(module, "bias", None) is not None:
                    module.bias.zero_()


def build_model(config, attention="eager", kernels="cuda", dtype=torch.float32, device="cpu", seed=0,
                rope="shared"):
    """A causal LM in train mode from an HF config dict, with random weights from `seed`."""
    c = normalise_config(config)
    check_options(attention, kernels, dtype, rope)
    if c["model_type"] == "gpt2" and attention == "sdpa-gqa":
        raise ConfigError("attention 'sdpa-gqa' is for grouped-query models; gpt2 has none")
    torch.manual_seed(seed)
    with _DeviceMode(device):
        if c["model_type"] == "gpt2":
            model = GPT2LMHeadModel(c, attention, kernels)
        else:
            model = DecoderForCausalLM(c, attention, kernels, rope)
    model = model.to(device)
    _init_weights(model, c["initializer_range"])
    model = model.to(dtype)
    model.train()
    return model


_FACTORIES = (torch.empty, torch.zeros, torch.ones, torch.full, torch.arange, torch.rand, torch.randn,
              torch.tensor, torch.empty_strided)


class _DeviceMode(torch.overrides.TorchFunctionMode):
    """Factory functions without a device make their tensors on `device`: a
    model built under it on meta allocates nothing (torch.device as a context
    manager does this from torch 2.0; 1.13 has only the mode)."""

    def __init__(self, device):
        super().__init__()
        self.device = torch.device(device)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _FACTORIES and kwargs.get("device") is None:
            kwargs["device"] = self.device
        return func(*args, **kwargs)


def make_batch(config, batch, seq, device="cpu", seed=0):
    """input_ids and labels (= input_ids, as HF's causal LM training passes them)."""
    c = normalise_config(config)
    if seq > c["max_position_embeddings"] and c["model_type"] == "gpt2":
        raise ConfigError(f"seq {seq} is longer than config field 'n_positions' ({c['max_position_embeddings']})")
    gen = torch.Generator()
    gen.manual_seed(seed + 1)
    ids = torch.randint(0, c["vocab_size"], (batch, seq), generator=gen)
    ids = ids.to(device)
    return ids, ids.clone()
