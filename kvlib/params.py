"""Parameter counts from a ModelSpec: dense, MoE (total and active), MLA.

Counts follow the Hugging Face module layout: embeddings, per-layer
attention projections (+ biases), MLP or experts (+ router), norms, the
final norm and an untied LM head. Multi-token-prediction modules are
counted apart, since published totals leave them out.

Taught in ch01_kv_formula (weights against KV).
"""

from __future__ import annotations

from dataclasses import dataclass

from .spec import ParamsError

# Families whose attention normalizes each query and key head (an RMSNorm weight of head_dim for q and for k,
# shared by the heads): transformers' Qwen3Attention and Gemma3Attention (q_norm, k_norm).
_QK_NORM_PER_HEAD = {"qwen3", "qwen3_moe", "gemma3", "gemma3_text"}


def _need(s, name: str):
    """The spec's ``name``, or ParamsError naming the config fields that were looked for."""
    value = getattr(s, name)
    if value is None:
        looked_for = dict(s.missing_fields).get(name, name)
        raise ParamsError(f"missing field {looked_for}: the parameter count needs it")
    return value


@dataclass(frozen=True)
class ParamCount:
    total: int
    active: int
    mtp: int
    embedding: int


def _attention_params(s) -> int:
    d, h = _need(s, "hidden_size"), s.num_heads
    if s.is_mla:
        nope, rope, v, r = s.qk_nope_head_dim or 0, s.qk_rope_head_dim, s.v_head_dim or 0, s.kv_lora_rank
        if s.q_lora_rank:
            q = d * s.q_lora_rank + s.q_lora_rank + s.q_lora_rank * h * (nope + rope)
        else:
            q = d * h * (nope + rope)
        kv = d * (r + rope) + r + r * h * (nope + v)
        return q + kv + h * v * d
    q_out, kv_out = h * s.head_dim, s.num_kv_heads * s.head_dim
    params = d * q_out + 2 * d * kv_out + q_out * d
    if s.qkv_bias:
        params += q_out + 2 * kv_out
    if s.o_bias:
        params += d
    if s.attention_sinks:
        params += h
    if s.model_type in _QK_NORM_PER_HEAD:
        params += 2 * s.head_dim
    return params


def _mlp_params(s, ff: int) -> int:
    d = _need(s, "hidden_size")
    if s.mlp_gated:
        return 3 * d * ff + ((2 * ff + d) if s.mlp_bias else 0)
    return 2 * d * ff + ((ff + d) if s.mlp_bias else 0)


def _moe_params(s, experts_used: int) -> int:
    d = _need(s, "hidden_size")
    ff = s.moe_intermediate_size or _need(s, "intermediate_size")
    router = d * s.num_experts + (s.num_experts if s.mlp_bias else 0)
    shared = s.num_shared_experts * _mlp_params(s, ff)
    if s.shared_expert_intermediate_size:
        shared += _mlp_params(s, s.shared_expert_intermediate_size) + d  # plus its gate
    return experts_used * _mlp_params(s, ff) + shared + router


def _norm_params(s) -> int:
    return _need(s, "hidden_size") * (2 if s.layernorm_bias else 1)


def _layer_params(s, index: int, experts_used: int | None) -> int:
    norms = s.norms_per_layer * _norm_params(s)
    if s.num_experts and index in s.moe_layers:
        used = s.num_experts if experts_used is None else experts_used
        mlp = _moe_params(s, used)
    else:
        mlp = _mlp_params(s, _need(s, "intermediate_size"))
    return _attention_params(s) + mlp + norms


def count_params(s) -> ParamCount:
    """Total, active and MTP parameter counts for spec ``s`` (ParamsError if a width is unknown)."""
    d, vocab = _need(s, "hidden_size"), _need(s, "vocab_size")
    embedding = vocab * d + s.learned_positions * d
    head = 0 if s.tie_word_embeddings else vocab * d
    outer = embedding + head + _norm_params(s)
    total = outer + sum(_layer_params(s, i, None) for i in range(s.num_layers))
    top_k = _need(s, "num_experts_per_tok") if s.num_experts else 0
    active = outer + sum(_layer_params(s, i, top_k) for i in range(s.num_layers))
    mtp = 0
    if s.mtp_layers:
        # DeepSeek V3's MTP module: two norms, a 2d->d projection, one decoder
        # layer like the model's last (MoE in V3) and a final norm; it shares
        # the embedding and head.
        layer = _layer_params(s, s.num_layers - 1, None)
        mtp = s.mtp_layers * (3 * _norm_params(s) + 2 * d * d + layer)
    return ParamCount(total=total, active=active, mtp=mtp, embedding=embedding)
