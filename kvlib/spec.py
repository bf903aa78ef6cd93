"""ModelSpec: the frozen, validated geometry of one model.

Everything here is read from a config by ``kvlib.config``; the spec itself
only holds integers and answers questions with the formulas of
``kvlib.formulas`` (the table there lists the methods that share a name
with a formula function, and how their arguments differ).

Taught in ch01_kv_formula (geometry), ch02_gqa_tp (heads per GPU) and
ch03_mla (the latent cache).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import formulas
from .dtypes import served_dtype_bytes

# What one layer keeps in the KV cache.
FULL, SLIDING, CHUNKED, NO_KV = "full", "sliding", "chunked", "none"
LAYER_KINDS = (FULL, SLIDING, CHUNKED, NO_KV)


class SpecError(ValueError):
    """A spec field is out of range; the message names the field."""


class ParamsError(SpecError):
    """The parameter count needs a field the config did not give; the message names it."""


@dataclass(frozen=True)
class ModelSpec:
    """Geometry of a decoder-only transformer, as far as memory is concerned.

    Names follow the notation table: L = ``num_layers``, H = ``num_heads``,
    K = ``num_kv_heads``, D = ``head_dim``, d = ``hidden_size``.

    ``hidden_size``, ``vocab_size`` and ``intermediate_size`` only feed the
    parameter count: a config that names them in a way kvlib does not know
    leaves them ``None`` (``missing_fields`` says which config fields were
    looked for), every KV figure still works, and ``num_params()`` raises
    ``ParamsError`` naming the missing field.
    """

    name: str
    model_type: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int | None
    vocab_size: int | None
    intermediate_size: int | None
    layer_kinds: tuple = ()
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    # Multi-head latent attention (DeepSeek V2/V3); None for ordinary attention.
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    q_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    # Mixture of experts; 0 experts means a dense MLP.
    num_experts: int = 0
    num_experts_per_tok: int | None = 0
    moe_intermediate_size: int | None = None
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int | None = None
    moe_layers: tuple = ()
    # Details that only change the parameter count.
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_gated: bool = True
    mlp_bias: bool = False
    layernorm_bias: bool = False
    norms_per_layer: int = 2
    learned_positions: int = 0
    attention_sinks: bool = False
    mtp_layers: int = 0
    dtype: str = "bfloat16"
    max_position_embeddings: int | None = None
    source: str = ""
    notes: tuple = field(default=(), compare=False)
    # (spec field, the config fields looked for) for each parameter-count field left None.
    missing_fields: tuple = field(default=(), compare=False)

    def __post_init__(self):
        for name in ("num_layers", "num_heads", "num_kv_heads", "head_dim", "hidden_size",
                     "vocab_size", "intermediate_size"):
            value = getattr(self, name)
            if value is None and name in ("hidden_size", "vocab_size", "intermediate_size"):
                continue  # parameter count only: ParamsError when it is asked for
            if type(value) is not int or value <= 0:
                raise SpecError(f"{name} must be a positive integer, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise SpecError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if not self.layer_kinds:
            object.__setattr__(self, "layer_kinds", (FULL,) * self.num_layers)
        if len(self.layer_kinds) != self.num_layers:
            raise SpecError(f"layer_kinds has {len(self.layer_kinds)} entries for {self.num_layers} layers")
        for kind in self.layer_kinds:
            if kind not in LAYER_KINDS:
                raise SpecError(f"layer_kinds holds unknown kind {kind!r}")
        if SLIDING in self.layer_kinds and not self.sliding_window:
            raise SpecError("sliding_window must be set when some layers slide")
        if CHUNKED in self.layer_kinds and not self.attention_chunk_size:
            raise SpecError("attention_chunk_size must be set when some layers are chunked")
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise SpecError("MLA needs both kv_lora_rank and qk_rope_head_dim")

    # --- attention geometry -------------------------------------------------
    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def attention(self) -> str:
        """'mla', 'mqa' (one KV head), 'mha' (K = H) or 'gqa' (1 < K < H)."""
        if self.is_mla:
            return "mla"
        if self.num_kv_heads == 1:
            return "mqa"
        if self.num_kv_heads == self.num_heads:
            return "mha"
        return "gqa"

    @property
    def num_kv_layers(self) -> int:
        """Layers that keep a KV cache (linear-attention / Mamba layers do not)."""
        return sum(kind != NO_KV for kind in self.layer_kinds)

    @property
    def cache_heads(self) -> int:
        """Heads the cache stores per layer: K, or 1 latent for MLA."""
        return 1 if self.is_mla else self.num_kv_heads

    @property
    def cache_head_dim(self) -> int:
        """Width of one cached head: D, or latent + rope key for MLA."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element the model is served in (``dtypes.served_dtype_bytes``: 16-bit)."""
        return served_dtype_bytes(self.dtype)

    def kv_heads_per_gpu(self, tp: int = 1) -> int:
        """KV heads one rank holds under tensor parallelism ``tp``.

        ``formulas.kv_heads_per_gpu(K, tp)`` (split, replicated past K), after
        checking that ``tp`` divides K or is a multiple of it; MLA's single
        latent is replicated on every rank. Taught in ch02_gqa_tp.

        >>> from kvlib import load_model
        >>> load_model("llama-3.1-8b").kv_heads_per_gpu(4), load_model("deepseek-v3").kv_heads_per_gpu(8)
        (2, 1)
        """
        if type(tp) is not int or tp < 1:
            raise SpecError(f"tp must be a positive integer, got {tp!r}")
        if self.is_mla:
            return 1
        k = self.num_kv_heads
        if k % tp and tp % k:
            raise SpecError(f"tp={tp} must divide num_kv_heads={k} or be a multiple of it")
        return formulas.kv_heads_per_gpu(k, tp)

    def layer_kv_bytes_per_token(self, kv_dtype_bytes=None, tp: int = 1):
        """Bytes one KV-holding layer stores per token on one rank."""
        b = self.dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
        if self.is_mla:
            return formulas.mla_bytes_per_token(1, self.kv_lora_rank, self.qk_rope_head_dim, b)
        return formulas.kv_bytes_per_token(1, self.kv_heads_per_gpu(tp), self.head_dim, b)

    def kv_bytes_per_token(self, kv_dtype_bytes=None, tp: int = 1):
        """Bytes per token as if every KV-holding layer kept it (no window cap).

        >>> from kvlib import load_model
        >>> load_model("meta-llama/Llama-3.1-8B").kv_bytes_per_token()
        131072
        >>> load_model("meta-llama/Llama-3.1-8B").kv_bytes_per_token(tp=8)
        16384
        """
        return self.num_kv_layers * self.layer_kv_bytes_per_token(kv_dtype_bytes, tp)

    def layer_tokens_held(self, kind: str, context: int) -> int:
        """Tokens a layer of ``kind`` holds for a sequence of ``context`` tokens."""
        if kind == NO_KV:
            return 0
        if kind == SLIDING:
            return min(context, self.sliding_window)
        if kind == CHUNKED:
            return min(context, self.attention_chunk_size)
        return context

    def kv_bytes_per_sequence(self, context: int, kv_dtype_bytes=None, tp: int = 1):
        """Bytes one sequence of ``context`` tokens holds, windowed layers capped.

        >>> from kvlib import load_model
        >>> load_model("openai/gpt-oss-20b").kv_bytes_per_sequence(131072)
        3224371200
        """
        per_layer = self.layer_kv_bytes_per_token(kv_dtype_bytes, tp)
        return sum(per_layer * self.layer_tokens_held(kind, context) for kind in self.layer_kinds)

    # --- parameters and weights --------------------------------------------
    def num_params(self) -> int:
        """Total parameters, MTP modules excluded (see ``num_params_mtp``).

        Raises ``ParamsError`` (naming the config field) when the config left
        a width the count needs unknown."""
        from .params import count_params
        return count_params(self).total

    def num_params_active(self) -> int:
        """Parameters used per token (MoE: routed top-k plus shared experts)."""
        from .params import count_params
        return count_params(self).active

    def num_params_mtp(self) -> int:
        """Parameters of multi-token-prediction modules, reported apart."""
        from .params import count_params
        return count_params(self).mtp

    def weight_bytes(self, dtype_bytes=2) -> int:
        """Weight bytes at ``dtype_bytes`` per parameter (2 bf16, 1 fp8, 0.5 int4)."""
        return formulas.weight_bytes(self.num_params(), dtype_bytes)
