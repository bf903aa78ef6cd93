"""Parameter counts from a ModelSpec: dense, MoE (total and active), MLA.

Counts follow the Hugging Face module layout: embeddings, per-layer
attention projections (+ biases), MLP or experts (+ router), norms, the
final norm and an untied LM head. Multi-token-prediction modules are
counted apart, since published totals leave them out.

Taught in ch01_kv_formula (weights against KV); the attention/expert split
(``split_params``, ``mla_attention_params_per_rank``) in ch03_mla.
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


@dataclass(frozen=True)
class ParamSplit:
    """A total parameter count in three parts (MTP modules left out, as in ``count_params``)."""

    attention: int        # every layer's attention projections and the norms inside attention
    routed_experts: int   # the routed experts of the MoE layers (0 for a dense model)
    other: int            # embedding, head, layer norms, dense MLPs, shared experts, routers

    @property
    def total(self) -> int:
        return self.attention + self.routed_experts + self.other


def split_params(s) -> ParamSplit:
    """Attention, routed experts and everything else: the three parts of ``count_params(s).total``.

    Data-parallel attention copies the attention part onto every rank; expert
    parallelism spreads the routed experts. DeepSeek-V3, per layer (hidden
    ``d`` 7168, 128 heads, ``q_lora_rank`` 1536, query/key head 128 + 64,
    ``kv_lora_rank`` 512, value head 128): ``d * 1536 + 1536 + 1536 * 128 * 192``
    (query) ``+ d * 576 + 512 + 512 * 128 * 256`` (latent, its norm, the up
    projection to keys and values) ``+ 128 * 128 * d`` (output) = 187,107,328,
    times 61 layers.

    >>> from kvlib import load_model
    >>> split_params(load_model("deepseek-v3")).attention
    11413547008
    >>> split_params(load_model("llama-3.1-8b")).routed_experts
    0

    Taught in ch03_mla (data-parallel attention).
    """
    total = count_params(s).total
    attention = s.num_layers * _attention_params(s)
    routed = 0
    if s.num_experts:
        ff = s.moe_intermediate_size or _need(s, "intermediate_size")
        routed = sum(s.num_experts * _mlp_params(s, ff) for i in range(s.num_layers) if i in s.moe_layers)
    return ParamSplit(attention=attention, routed_experts=routed, other=total - attention - routed)


def mla_attention_params_per_rank(s, tp: int = 1) -> int:
    """An MLA model's attention parameters on one rank under tensor parallelism ``tp``, every layer.

    vLLM's MLA layer (``vllm/model_executor/models/deepseek_v2.py``) keeps the
    two down projections whole on every rank (``fused_qkv_a_proj``, a
    ``MergedColumnParallelLinear`` with ``disable_tp=True``, or the
    ``ReplicatedLinear`` ``kv_a_proj_with_mqa`` without a query LoRA) with
    their norms, and splits by heads the query up projection ``q_b_proj``
    (or ``q_proj``), ``kv_b_proj`` and ``o_proj``. So per layer:
    ``d (q_lora + d_c + d_R) + q_lora + d_c`` replicated, plus
    ``(q_lora h (d_nope + d_R) + d_c h (d_nope + d_v) + h d_v d) / tp``.
    With ``tp = 1`` it equals ``split_params(s).attention``.

    >>> from kvlib import load_model
    >>> v3 = load_model("deepseek-v3")
    >>> mla_attention_params_per_rank(v3, 8)           # 61 * (15,140,864 + 171,966,464 / 8)
    2234836992
    >>> mla_attention_params_per_rank(v3, 1) == split_params(v3).attention
    True

    Taught in ch03_mla (what data-parallel attention copies onto each rank).
    """
    if not s.is_mla:
        raise ParamsError("mla_attention_params_per_rank needs an MLA model (kv_lora_rank)")
    if type(tp) is not int or tp < 1 or s.num_heads % tp:
        raise ParamsError(f"tp must be a positive integer dividing the {s.num_heads} heads, got {tp!r}")
    d, h = _need(s, "hidden_size"), s.num_heads
    nope, rope, v, r, q = s.qk_nope_head_dim or 0, s.qk_rope_head_dim, s.v_head_dim or 0, s.kv_lora_rank, s.q_lora_rank
    replicated = d * (r + rope) + r + ((d * q + q) if q else 0)
    split = (q * h * (nope + rope) if q else d * h * (nope + rope)) + r * h * (nope + v) + h * v * d
    assert replicated + split == _attention_params(s)
    return s.num_layers * (replicated + split // tp)
