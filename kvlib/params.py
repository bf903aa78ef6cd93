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

from .errors import ParamsError
from .layer_kinds import ATTENTION_KINDS, FULL, GATED_DELTANET, MAMBA2

# Families whose attention normalizes each query and key head (an RMSNorm weight of head_dim for q and for k,
# shared by the heads): transformers' Qwen3Attention, Gemma3Attention, Qwen3NextAttention and Gemma4Attention
# (q_norm, k_norm; Gemma 4's v_norm has no weight).
_QK_NORM_PER_HEAD = {"qwen3", "qwen3_moe", "gemma3", "gemma3_text", "qwen3_next", "gemma4", "gemma4_text"}


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


def _attention_params(s, kind: str = FULL) -> int:
    """One attention layer of ``kind`` (its own geometry, ``ModelSpec.kv_geometry``), the DSA indexer apart."""
    d, h = _need(s, "hidden_size"), s.num_heads
    if s.is_mla:
        nope, rope, v, r = s.qk_nope_head_dim or 0, s.qk_rope_head_dim, s.v_head_dim or 0, s.kv_lora_rank
        if s.q_lora_rank:
            q = d * s.q_lora_rank + s.q_lora_rank + s.q_lora_rank * h * (nope + rope)
        else:
            q = d * h * (nope + rope)
        kv = d * (r + rope) + r + r * h * (nope + v)
        return q + kv + h * v * d
    kv_heads, head_dim = s.kv_geometry(kind)
    # Qwen3-Next's q_proj also yields a sigmoid gate per head (twice as wide); Gemma 4's full layers project K
    # once and use it as V too (attention_k_eq_v: no v_proj)
    q_out = h * head_dim * (2 if s.attention_output_gate else 1)
    o_in, kv_out = h * head_dim, kv_heads * head_dim
    kv_projections = 1 if s.attention_k_eq_v and kind == FULL and s.global_head_dim else 2
    params = d * q_out + kv_projections * d * kv_out + o_in * d
    if s.qkv_bias:
        params += q_out + 2 * kv_out
    if s.o_bias:
        params += d
    if s.attention_sinks:
        params += h
    if s.model_type in _QK_NORM_PER_HEAD:
        params += 2 * head_dim
    return params


def _indexer_params(s) -> int:
    """One DSA indexer (DeepSeek-V3.2, GLM-5): ``wq_b`` from the query latent to ``index_n_heads`` keys,
    ``wk`` and ``weights_proj`` from the hidden state, ``k_norm`` a LayerNorm (weight and bias)
    (vllm/models/deepseek_v32/attention.py ``DeepseekV32Indexer``)."""
    d, n, w = _need(s, "hidden_size"), _need(s, "index_n_heads"), s.index_head_dim
    return (s.q_lora_rank or d) * n * w + d * w + 2 * w + d * n


def _mamba2_params(s) -> int:
    """One Mamba2 mixer (vllm/model_executor/layers/mamba/mamba_mixer2.py ``MambaMixer2``): ``in_proj`` to
    gate, conv input (x, B, C) and dt; the depthwise conv; A, D and dt bias per head; the gated norm; ``out_proj``."""
    d, width, heads = _need(s, "hidden_size"), s.mamba_intermediate_size, s.mamba_num_heads
    conv_dim = width + 2 * s.mamba_n_groups * s.mamba_state_size
    in_out = width + conv_dim + heads
    return (d * in_out + (in_out if s.mamba_proj_bias else 0)
            + conv_dim * s.mamba_conv_kernel + (conv_dim if s.mamba_conv_bias else 0)
            + 3 * heads + width + width * d + (d if s.mamba_proj_bias else 0))


def _gdn_params(s) -> int:
    """One Gated DeltaNet mixer (Qwen3-Next; vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py):
    ``in_proj_qkvz`` and ``in_proj_ba`` from the hidden state, the conv over q, k and v (no bias), A and dt
    bias per value head, the gated norm of one value head, ``out_proj``."""
    d = _need(s, "hidden_size")
    key = s.linear_num_key_heads * s.linear_key_head_dim
    value = s.linear_num_value_heads * s.linear_value_head_dim
    return (d * (2 * key + 2 * value) + d * 2 * s.linear_num_value_heads
            + (2 * key + value) * s.linear_conv_kernel_dim + 2 * s.linear_num_value_heads
            + s.linear_value_head_dim + value * d)


def _mixer_params(s, index: int) -> int:
    """Layer ``index``'s token mixer: attention of its kind (and an indexer), Mamba2, Gated DeltaNet, or none
    (Nemotron-H's MLP and MoE blocks)."""
    kind = s.layer_kinds[index]
    if kind in ATTENTION_KINDS:
        return _attention_params(s, kind) + (_indexer_params(s) if index in s.indexer_layers else 0)
    if kind == MAMBA2:
        return _mamba2_params(s)
    if kind == GATED_DELTANET:
        return _gdn_params(s)
    return 0


def _mlp_params(s, ff: int, width: int | None = None) -> int:
    d = _need(s, "hidden_size") if width is None else width
    if s.mlp_gated:
        return 3 * d * ff + ((2 * ff + d) if s.mlp_bias else 0)
    return 2 * d * ff + ((ff + d) if s.mlp_bias else 0)


def _moe_params(s, experts_used: int) -> int:
    d = _need(s, "hidden_size")
    ff = s.moe_intermediate_size or _need(s, "intermediate_size")
    router = d * s.num_experts + (s.num_experts if s.mlp_bias or s.router_bias else 0)
    shared = s.num_shared_experts * _mlp_params(s, ff)
    if s.shared_expert_intermediate_size:
        # Qwen's shared expert has a one-output sigmoid gate; Nemotron-H's has none
        shared += _mlp_params(s, s.shared_expert_intermediate_size) + (d if s.shared_expert_gate else 0)
    if s.moe_latent_size:
        # Nemotron 3 Super / Ultra: the routed experts work in a latent, projected to and from it once
        latent = s.moe_latent_size
        return experts_used * _mlp_params(s, ff, latent) + 2 * d * latent + shared + router
    return experts_used * _mlp_params(s, ff) + shared + router


def _norm_params(s) -> int:
    return _need(s, "hidden_size") * (2 if s.layernorm_bias else 1)


def _layer_params(s, index: int, experts_used: int | None) -> int:
    norms = s.norms_per_layer * _norm_params(s)
    moe = bool(s.num_experts) and index in s.moe_layers
    dense = index in s.dense_mlp_layers if s.dense_mlp_layers is not None else not moe
    ffn = 0
    if moe:
        ffn += _moe_params(s, s.num_experts if experts_used is None else experts_used)
    if dense:
        ffn += _mlp_params(s, _need(s, "intermediate_size"))
    return _mixer_params(s, index) + ffn + norms


def count_params(s) -> ParamCount:
    """Total, active and MTP parameter counts for spec ``s`` (ParamsError if a width is unknown)."""
    if s.unmodelled_params:
        raise ParamsError(s.unmodelled_params)
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
        # the embedding and head. Nemotron-H's: an attention block and an MoE block (mtp_layers_block_type).
        if s.model_type == "nemotron_h" and s.num_experts:
            layer = _attention_params(s) + _moe_params(s, s.num_experts) + 2 * _norm_params(s)
        else:
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
    attention = sum(_attention_params(s, kind) + (_indexer_params(s) if i in s.indexer_layers else 0)
                    for i, kind in enumerate(s.layer_kinds) if kind in ATTENTION_KINDS)
    routed = 0
    if s.num_experts:
        ff = s.moe_intermediate_size or _need(s, "intermediate_size")
        routed = sum(s.num_experts * _mlp_params(s, ff, s.moe_latent_size) for i in range(s.num_layers)
                     if i in s.moe_layers)
    return ParamSplit(attention=attention, routed_experts=routed, other=total - attention - routed)


def routed_expert_params(s) -> tuple:
    """``(MoE layers, parameters of one routed expert in one of them)``; ``(0, 0)`` for a dense model.

    Mixtral 8x7B: 32 MoE layers, each expert a gated MLP of ``3 d ff`` =
    3 x 4,096 x 14,336 = 176,160,768 parameters:

    >>> from kvlib import load_model
    >>> routed_expert_params(load_model("mixtral-8x7b")), routed_expert_params(load_model("llama-3.1-8b"))
    ((32, 176160768), (0, 0))

    ``split_params(s).routed_experts`` is their product with the expert count.
    """
    if not s.num_experts:
        return 0, 0
    ff = s.moe_intermediate_size or _need(s, "intermediate_size")
    layers = sum(1 for i in range(s.num_layers) if i in s.moe_layers)
    return layers, _mlp_params(s, ff, s.moe_latent_size)


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
