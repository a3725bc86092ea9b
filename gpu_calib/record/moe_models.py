"""HuggingFace's mixture-of-experts causal LMs written again, op by op, in plain torch.

For recorder.py --module (no change to the recorder): each factory below
takes the recorder's keyword arguments (batch, seq, device, dtype) and
returns (model, step), the step feeding random token ids from a fixed seed
(routing depends on the data, so all-zero ids would send every token to
the same experts).  The attention, norms, RoPE, embedding and loss are
hf_models.py's (eager attention); the MoE block follows transformers'
modeling_mixtral.py / modeling_qwen3_moe.py / modeling_qwen2_moe.py of the
4.4x-4.5x releases, written from our reading of them (the stored copies we
could search were of later releases, which keep the experts as 3-D
parameters, `Qwen3MoeExperts`, and run the same per-expert loop: one
gate_up GEMM chunked in two instead of gate_proj and up_proj):

    router_logits = gate(x)                          # nn.Linear(hidden, experts)
    w = softmax(router_logits, dim=1, dtype=float32) # saved: result (fp32)
    w, selected = topk(w, k)                         # saved: indices (int64)
    if norm_topk_prob: w /= w.sum(-1, keepdim=True)  # in place
    w = w.to(x.dtype)
    for each expert hit (expert_mask = one_hot(selected).permute(2, 1, 0)):
        idx, top_x = torch.where(expert_mask[e])     # data-dependent sizes
        state = x[None, top_x].reshape(-1, hidden)   # gathered input, saved by the expert's linears
        out = expert(state) * w[top_x, idx, None]    # SwiGLU expert, then the routing weight
        final.index_add_(0, top_x, out.to(x.dtype))

qwen2_moe adds a shared expert (an MLP of shared_expert_intermediate_size)
scaled by sigmoid(shared_expert_gate(x)); qwen3_moe's attention normalises
each head's q and k (RMSNorm over head_dim, q_norm and k_norm) before RoPE.

Per layer the expert tensors add up to the same bytes whatever the routing
(every (token, expert) pair is gathered once), which is what
tests/test_trace_hf.c compares with offsim's balanced-routing generator;
the count of storages matches when every expert is hit (the configs here
have 4 experts, 2 per token, 32 tokens).

    /usr/bin/python3 gpu_calib/record/recorder.py --module gpu_calib/record/moe_models.py:qwen3_moe_tiny \
        --batch 2 --seq 16 --dtype bf16 --out tests/data/hf/qwen3_moe-eager-bf16.csv
"""
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import hf_models

CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "hf", "configs")

# The dense family whose attention each MoE family's is (hf_models normalises its fields).
ATTENTION_OF = {"mixtral": "mistral", "qwen2_moe": "qwen2", "qwen3_moe": "llama"}


def moe_config(cfg):
    """hf_models' normalised dense fields plus the MoE ones, from a config.json dict."""
    model_type = cfg.get("model_type")
    if model_type not in ATTENTION_OF:
        raise hf_models.ConfigError(f"config field 'model_type': {model_type!r} is not an MoE family here "
                                    f"(supported: {', '.join(ATTENTION_OF)})")
    dense = dict(cfg, model_type=ATTENTION_OF[model_type])
    dense.setdefault("intermediate_size", cfg.get("moe_intermediate_size", cfg.get("intermediate_size")))
    c = hf_models.normalise_config(dense)
    c["model_type"] = model_type
    c["num_experts"] = cfg.get("num_local_experts", cfg.get("num_experts"))
    c["top_k"] = cfg["num_experts_per_tok"]
    c["moe_intermediate_size"] = cfg.get("moe_intermediate_size", cfg.get("intermediate_size"))
    c["norm_topk_prob"] = bool(cfg.get("norm_topk_prob", model_type == "mixtral"))
    c["shared_expert_intermediate_size"] = cfg.get("shared_expert_intermediate_size", 0)
    c["decoder_sparse_step"] = cfg.get("decoder_sparse_step", 1)
    c["mlp_only_layers"] = cfg.get("mlp_only_layers", [])
    c["qk_norm"] = model_type == "qwen3_moe"
    if model_type == "qwen3_moe":
        c["qkv_bias"] = c["o_bias"] = bool(cfg.get("attention_bias", False))
    return c


class Expert(nn.Module):
    """Qwen3MoeMLP / MixtralBlockSparseTop2MLP (w1 = gate_proj, w3 = up_proj, w2 = down_proj)."""

    def __init__(self, hidden, inter, act):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)
        self.act_fn = hf_models.ACT2CLS[act]()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class SparseMoeBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        hidden = c["hidden_size"]
        self.num_experts, self.top_k, self.norm_topk_prob = c["num_experts"], c["top_k"], c["norm_topk_prob"]
        self.gate = nn.Linear(hidden, self.num_experts, bias=False)
        self.experts = nn.ModuleList(Expert(hidden, c["moe_intermediate_size"], c["hidden_act"])
                                     for _ in range(self.num_experts))
        shared = c["shared_expert_intermediate_size"]
        if shared:
            self.shared_expert = Expert(hidden, shared, c["hidden_act"])
            self.shared_expert_gate = nn.Linear(hidden, 1, bias=False)

    def forward(self, hidden_states):
        batch, seq, hidden = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        if self.norm_topk_prob:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final = torch.zeros((batch * seq, hidden), dtype=hidden_states.dtype, device=hidden_states.device)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert = self.experts[int(expert_idx)]
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current_state = hidden_states[None, top_x].reshape(-1, hidden)
            current = expert(current_state) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, current.to(hidden_states.dtype))
        if hasattr(self, "shared_expert"):
            shared = self.shared_expert(hidden_states)
            shared = torch.sigmoid(self.shared_expert_gate(hidden_states)) * shared
            final = final + shared
        # HF returns (hidden states, router_logits) and its decoder layer keeps the first (no aux loss:
        # output_router_logits false): the logits die with the block's call either way, so the block
        # returns the hidden states alone and hf_models' decoder layer runs it.
        return final.reshape(batch, seq, hidden)


class QkNormAttention(hf_models.Attention):
    """Qwen3MoeAttention: q_norm and k_norm (RMSNorm over head_dim) on the projections' per-head views."""

    def __init__(self, c, layer_idx):
        super().__init__(c, layer_idx, "eager", "cuda", "shared")
        self.q_norm = hf_models.RMSNorm(self.head_dim, c["rms_norm_eps"])
        self.k_norm = hf_models.RMSNorm(self.head_dim, c["rms_norm_eps"])

    def forward(self, hidden_states, position_embeddings, attention_mask, position_ids):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = hf_models.apply_rotary_pos_emb(query_states, key_states, cos, sin)
        dropout_p = 0.0 if not self.training else self.attention_dropout
        attn_output = hf_models.eager_attention(self, query_states, key_states, value_states, attention_mask,
                                                self.scaling, dropout_p)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output)


def is_sparse(c, layer_idx):
    """Qwen's rule (mixtral: every layer): not in mlp_only_layers and (layer + 1) % decoder_sparse_step == 0."""
    return layer_idx not in c["mlp_only_layers"] and (layer_idx + 1) % c["decoder_sparse_step"] == 0


class MoeDecoderLayer(hf_models.DecoderLayer):
    def __init__(self, c, layer_idx):
        super().__init__(c, layer_idx, "eager", "cuda", "shared")
        if c["qk_norm"]:
            self.self_attn = QkNormAttention(c, layer_idx)
        if is_sparse(c, layer_idx):
            self.mlp = SparseMoeBlock(c)


def make_model(config_name, device, dtype):
    """The causal LM of configs/CONFIG_NAME.json (eager attention) in train mode, weights from the global RNG."""
    with open(os.path.join(CONFIGS, config_name + ".json")) as f:
        cfg = json.load(f)
    c = moe_config(cfg)
    model = hf_models.DecoderForCausalLM(c, "eager", "cuda", "shared")
    model.model.layers = nn.ModuleList(MoeDecoderLayer(c, i) for i in range(c["num_hidden_layers"]))
    if c["tie_word_embeddings"]:
        model.lm_head.weight = model.model.embed_tokens.weight
    model = model.to(device)
    hf_models._init_weights(model, c["initializer_range"])
    model = model.to(dtype)
    model.train()
    return model


def token_ids(vocab, batch, seq, data_seed):
    """(batch, seq) token ids from torch.Generator seeded with data_seed."""
    gen = torch.Generator()
    gen.manual_seed(data_seed)
    return torch.randint(0, vocab, (batch, seq), generator=gen)


def expert_loads(model, ids):
    """Tokens per expert of each MoE layer when `model` runs on `ids` (no grad)."""
    loads = []

    def hook_of(block):
        def hook(router, inputs, logits):
            weights = F.softmax(logits, dim=1, dtype=torch.float)
            selected = torch.topk(weights, block.top_k, dim=-1)[1]
            loads.append(torch.bincount(selected.flatten(), minlength=block.num_experts).tolist())
        return hook

    handles = [layer.mlp.gate.register_forward_hook(hook_of(layer.mlp)) for layer in model.model.layers
               if isinstance(layer.mlp, SparseMoeBlock)]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for h in handles:
            h.remove()
    return loads


def find_balanced(config_name, batch, seq, dtype=torch.bfloat16, tries=100000):
    """The first data seed whose ids route every MoE layer's tokens evenly (weights from torch.manual_seed(0),
    as recorder.py builds them), or None."""
    torch.manual_seed(0)
    model = make_model(config_name, "cpu", dtype)
    for data_seed in range(tries):
        ids = token_ids(model.config["vocab_size"], batch, seq, data_seed)
        if all(len(set(load)) == 1 for load in expert_loads(model, ids)):
            return data_seed
    return None


# Data seeds found by find_balanced (python3 moe_models.py CONFIG BATCH SEQ) for the committed recordings:
# offsim's generator routes tokens evenly by default, and HF's routing depends on the data, so the recordings
# are made on ids whose routing is even in every MoE layer (4 tokens per expert at batch 2 x seq 4), which
# makes every expert's tensors, and so the memory curve, comparable op by op.
BALANCED = {("mixtral-tiny", 2, 4): 2390, ("qwen3_moe-tiny", 2, 4): 632, ("qwen2_moe-tiny", 2, 4): 2075}


def build(config_name, batch, seq, device, dtype):
    """(model, step) for recorder.py: the model, and one step on the balanced ids (data seed 0 elsewhere)."""
    model = make_model(config_name, device, dtype)
    ids = token_ids(model.config["vocab_size"], batch, seq, BALANCED.get((config_name, batch, seq)) or 0).to(device)

    def step(m):
        m(ids, labels=ids.clone()).loss.backward()

    return model, step


def qwen3_moe_tiny(batch, seq, device, dtype):
    return build("qwen3_moe-tiny", batch, seq, device, dtype)


def mixtral_tiny(batch, seq, device, dtype):
    return build("mixtral-tiny", batch, seq, device, dtype)


def qwen2_moe_tiny(batch, seq, device, dtype):
    return build("qwen2_moe-tiny", batch, seq, device, dtype)


if __name__ == "__main__":
    import sys
    if len(sys.argv) != 4:
        print("usage: moe_models.py CONFIG_NAME BATCH SEQ  (prints the first balanced data seed)", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(1)
    print(find_balanced(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
