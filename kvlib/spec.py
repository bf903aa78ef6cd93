"""ModelSpec: the frozen, validated geometry of one model.

Everything here is read from a config by ``kvlib.config``; the spec itself
only holds integers and answers questions with the formulas of
``kvlib.formulas`` (the table there lists the methods that share a name
with a formula function, and how their arguments differ).

What each layer keeps, by kind (``layer_kinds``):

- ``full``, ``sliding``, ``chunked``: attention, a KV cache per token; each
  kind has its own geometry (``kv_geometry``: Gemma 4's full layers use
  ``global_head_dim`` x ``num_global_key_value_heads``);
- ``mamba2`` (Nemotron-H) and ``gated_deltanet`` (Qwen3-Next): no KV, a
  constant state per sequence (conv + SSM / recurrent state), shaped and
  typed as vLLM's ``MambaStateShapeCalculator`` / ``MambaStateDtypeCalculator``
  give them (``vllm/model_executor/layers/mamba/mamba_utils.py``, 0.32.0 and
  0.34.0 alike), split over TP by heads;
- ``none``: neither (Nemotron-H's MLP and MoE blocks, Gemma's KV-shared layers).

DeepSeek-V3.2 and GLM-5 add a lightning indexer to their MLA layers: a key
cache of its own per token, whole on every rank (``indexer_bytes_per_token``,
counted inside ``kv_bytes_per_token``).

Taught in ch01_kv_formula (geometry), ch02_gqa_tp (heads per GPU) and
ch03_mla (the latent cache).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import formulas
from .dtypes import dtype_bytes as _dtype_bytes
from .dtypes import served_dtype_bytes
from .errors import ParamsError, SpecError  # noqa: F401 -- raised here; kvlib.spec.ParamsError stays importable
# What one layer keeps (kvlib.layer_kinds), re-exported: kvlib.spec.FULL and the others stay importable.
from .layer_kinds import ATTENTION_KINDS, CHUNKED, FULL, GATED_DELTANET, LAYER_KINDS  # noqa: F401
from .layer_kinds import MAMBA2, NO_KV, SLIDING, STATE_KINDS  # noqa: F401

# The indexer of DeepSeek-V3.2 / GLM-5 keeps each key in fp8 with one fp32 scale per this many values
# (vllm/models/deepseek_v32/attention.py: quant_block_size = 128; head_dim + head_dim // 128 * 4 bytes, uint8).
INDEXER_QUANT_BLOCK = 128


_MAMBA2_FIELDS = ("mamba_num_heads", "mamba_head_dim", "mamba_intermediate_size", "mamba_n_groups",
                  "mamba_state_size", "mamba_conv_kernel")
_GDN_FIELDS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
               "linear_conv_kernel_dim")


def _divide(numerator: int, tp: int, what: str) -> int:
    """vLLM's ``divide`` (``vllm/distributed/utils.py``): an exact split over ``tp`` ranks, or SpecError."""
    if numerator % tp:
        raise SpecError(f"tp={tp} does not divide {what} ({numerator})")
    return numerator // tp


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
    # Layers with a dense MLP; None: every layer that is not an MoE layer. Nemotron-H lists its MLP blocks (its
    # Mamba2 and attention blocks have no FFN); Gemma 4 every layer (its MoE runs beside the dense MLP).
    dense_mlp_layers: tuple | None = None
    shared_expert_gate: bool = True        # Qwen's shared expert has a sigmoid gate (d weights); Nemotron-H's none
    moe_latent_size: int | None = None     # Nemotron 3 Super / Ultra: experts work in a latent this wide
    router_bias: bool = False              # Nemotron-H's router keeps a correction bias per expert
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
    attention_k_eq_v: bool = False         # Gemma 4: full-attention layers project K once and reuse it as V
    attention_output_gate: bool = False    # Qwen3-Next: q_proj also yields a gate per head (twice as wide)
    mamba_conv_bias: bool = True
    mamba_proj_bias: bool = False
    mtp_layers: int = 0
    # Per-layer geometry: full-attention layers' own head size and KV heads (Gemma 4's global_head_dim,
    # num_global_key_value_heads); None keeps the one geometry for every kind.
    global_head_dim: int | None = None
    num_global_kv_heads: int | None = None
    # Mamba2 layers (vLLM's mamba2_state_shape inputs): intermediate = heads x head dim (Nemotron-H),
    # groups, state size, conv kernel. mamba_ssm_dtype: the dtype of the temporal state (Mamba2's SSM state,
    # Gated DeltaNet's recurrent state; vLLM's mamba_ssm_cache_dtype), None for the model dtype ("auto").
    mamba_num_heads: int | None = None
    mamba_head_dim: int | None = None
    mamba_intermediate_size: int | None = None
    mamba_n_groups: int | None = None
    mamba_state_size: int | None = None
    mamba_conv_kernel: int | None = None
    mamba_ssm_dtype: str | None = None
    # Gated DeltaNet layers (Qwen3-Next's linear_* fields).
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None
    # Sparse-attention indexer (DeepSeek-V3.2, GLM-5): its key width, heads, top-k and the layers that keep one.
    index_head_dim: int | None = None
    index_n_heads: int | None = None
    index_topk: int | None = None
    indexer_layers: tuple = ()
    # Layers with a state kvlib does not model (a Mamba1 or short-conv layer read as "none"): the one line that
    # refuses every state figure, naming the config field and its value.
    unmodelled_state: str | None = None
    # The one line that refuses the parameter count of a layer kvlib cannot count (a Mamba1 mixer, Gemma 4's
    # per-layer embeddings); None when every part is counted.
    unmodelled_params: str | None = None
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
        for name in ("global_head_dim", "num_global_kv_heads", "index_head_dim", "index_n_heads", "index_topk",
                     *_MAMBA2_FIELDS, *_GDN_FIELDS):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value <= 0):
                raise SpecError(f"{name} must be a positive integer, got {value!r}")
        if self.num_global_kv_heads is not None and self.num_heads % self.num_global_kv_heads:
            raise SpecError(f"num_heads ({self.num_heads}) must be a multiple of num_global_kv_heads "
                            f"({self.num_global_kv_heads})")
        if self.indexer_layers:
            if self.index_head_dim is None or not self.is_mla:
                raise SpecError("indexer_layers needs index_head_dim and an MLA model")
            if any(type(i) is not int or not 0 <= i < self.num_layers for i in self.indexer_layers):
                raise SpecError(f"indexer_layers must list layer indices below {self.num_layers}")

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
        """Layers that keep a KV cache: the attention kinds (Mamba2, Gated DeltaNet and 'none' layers do not)."""
        return sum(kind in ATTENTION_KINDS for kind in self.layer_kinds)

    @property
    def num_state_layers(self) -> int:
        """Layers that keep a constant state per sequence (Mamba2, Gated DeltaNet)."""
        return sum(kind in STATE_KINDS for kind in self.layer_kinds)

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

    def kv_geometry(self, kind: str = FULL) -> tuple:
        """(KV heads, head size) of one attention layer of ``kind``, for the whole model (not per rank).

        Gemma 4's full-attention layers use ``global_head_dim`` and, where the
        config gives them, ``num_global_key_value_heads`` (transformers'
        ``Gemma4TextConfig`` builds that per-layer override, and vLLM's
        ``vllm/model_executor/models/gemma4.py`` sizes each layer's attention
        from it); every other model and kind has the one geometry. MLA: one
        latent of ``kv_lora_rank + qk_rope_head_dim``.

        >>> from kvlib import load_model
        >>> load_model("gemma-4-26b-a4b").kv_geometry("full"), load_model("gemma-4-26b-a4b").kv_geometry("sliding")
        ((2, 512), (8, 256))
        """
        if kind not in ATTENTION_KINDS:
            raise SpecError(f"kind {kind!r} keeps no KV cache (attention kinds: {', '.join(ATTENTION_KINDS)})")
        if self.is_mla:
            return 1, self.kv_lora_rank + self.qk_rope_head_dim
        if kind == FULL and self.global_head_dim is not None:
            return self.num_global_kv_heads or self.num_kv_heads, self.global_head_dim
        return self.num_kv_heads, self.head_dim

    def kv_heads_per_gpu(self, tp: int = 1, kind: str = FULL) -> int:
        """KV heads one rank holds under tensor parallelism ``tp``, for a layer of ``kind``.

        ``formulas.kv_heads_per_gpu(K, tp)`` (split, replicated past K), after
        checking that ``tp`` divides K or is a multiple of it (vLLM's
        ``QKVParallelLinear``); K is that kind's heads (``kv_geometry``); MLA's
        single latent is replicated on every rank. Taught in ch02_gqa_tp.

        >>> from kvlib import load_model
        >>> load_model("llama-3.1-8b").kv_heads_per_gpu(4), load_model("deepseek-v3").kv_heads_per_gpu(8)
        (2, 1)
        """
        if type(tp) is not int or tp < 1:
            raise SpecError(f"tp must be a positive integer, got {tp!r}")
        if self.is_mla:
            return 1
        k, _ = self.kv_geometry(kind)
        if k % tp and tp % k:
            name = "num_global_kv_heads" if kind == FULL and self.num_global_kv_heads else "num_kv_heads"
            raise SpecError(f"tp={tp} must divide {name}={k} or be a multiple of it")
        return formulas.kv_heads_per_gpu(k, tp)

    def layer_kv_bytes_per_token(self, kv_dtype_bytes=None, tp: int = 1, kind: str = FULL):
        """Bytes one layer of ``kind`` stores per token on one rank (0 for a layer without a KV cache).

        Attention: ``2 x kv_heads_per_gpu(tp, kind) x head size x b`` with the
        kind's geometry; MLA: the latent and RoPE key, whole on every rank. The
        indexer's keys are apart (``indexer_bytes_per_token``).
        """
        if kind not in LAYER_KINDS:
            raise SpecError(f"unknown layer kind {kind!r}")
        if kind not in ATTENTION_KINDS:
            return 0
        b = self.dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
        if self.is_mla:
            return formulas.mla_bytes_per_token(1, self.kv_lora_rank, self.qk_rope_head_dim, b)
        return formulas.kv_bytes_per_token(1, self.kv_heads_per_gpu(tp, kind), self.kv_geometry(kind)[1], b)

    def indexer_bytes_per_token(self, tp: int = 1) -> int:
        """Bytes the sparse-attention indexer keeps per token on one rank, all layers together [B].

        DeepSeek-V3.2 / GLM-5: every MLA layer that builds an indexer caches
        one key of ``index_head_dim`` values in fp8 plus one fp32 scale per
        128 values, ``index_head_dim + index_head_dim // 128 x 4`` bytes (132
        for 128), whatever the KV dtype; like the MLA latent it is whole on
        every rank (``vllm/models/deepseek_v32/attention.py``:
        ``DeepseekV32IndexerCache``, one head, ``max_tp_shards=1``, uint8).
        0 for a model without an indexer.

        >>> from kvlib import load_model
        >>> load_model("deepseek-v3.2").indexer_bytes_per_token(), load_model("deepseek-v3.2").indexer_bytes_per_token(tp=8)
        (8052, 8052)
        """
        if type(tp) is not int or tp < 1:
            raise SpecError(f"tp must be a positive integer, got {tp!r}")
        if not self.indexer_layers:
            return 0
        per_layer = self.index_head_dim + self.index_head_dim // INDEXER_QUANT_BLOCK * 4
        return len(self.indexer_layers) * per_layer

    def kv_bytes_per_token(self, kv_dtype_bytes=None, tp: int = 1):
        """Bytes per token as if every KV-holding layer kept it (no window cap), the indexer included.

        The sum of ``layer_kv_bytes_per_token`` over the layers (each kind its
        own geometry) plus ``indexer_bytes_per_token``.

        >>> from kvlib import load_model
        >>> load_model("meta-llama/Llama-3.1-8B").kv_bytes_per_token()
        131072
        >>> load_model("meta-llama/Llama-3.1-8B").kv_bytes_per_token(tp=8)
        16384
        """
        per_kind = {kind: self.layer_kv_bytes_per_token(kv_dtype_bytes, tp, kind) for kind in set(self.layer_kinds)}
        return sum(per_kind[kind] for kind in self.layer_kinds) + self.indexer_bytes_per_token(tp)

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
        """Bytes one sequence of ``context`` tokens holds, windowed layers capped, the indexer included.

        >>> from kvlib import load_model
        >>> load_model("openai/gpt-oss-20b").kv_bytes_per_sequence(131072)
        3224371200
        """
        per_kind = {kind: self.layer_kv_bytes_per_token(kv_dtype_bytes, tp, kind) for kind in set(self.layer_kinds)}
        held = sum(per_kind[kind] * self.layer_tokens_held(kind, context) for kind in self.layer_kinds)
        return held + self.indexer_bytes_per_token(tp) * context

    # --- constant state of the Mamba2 / Gated DeltaNet layers ---------------
    def _state_fields(self, kind: str) -> None:
        if self.unmodelled_state:
            raise SpecError(self.unmodelled_state)
        if kind not in STATE_KINDS:
            raise SpecError(f"kind {kind!r} keeps no state (state kinds: {', '.join(STATE_KINDS)})")
        names = _MAMBA2_FIELDS if kind == MAMBA2 else _GDN_FIELDS
        missing = [name for name in names if getattr(self, name) is None]
        if missing:
            raise SpecError(f"{kind} layers need {', '.join(missing)}: the state size is unknown")

    def state_tensor_shapes(self, kind: str, tp: int = 1) -> dict:
        """Shapes of one ``kind`` layer's state for one sequence on one rank of ``tp``.

        As vLLM's ``MambaStateShapeCalculator`` gives them
        (``vllm/model_executor/layers/mamba/mamba_utils.py``, the same in
        0.32.0 and 0.34.0; the default "SD" conv layout, no speculative tokens):

        - ``mamba2`` (``mamba2_state_shape``): groups ``n`` become ``tp`` when
          ``tp`` does not divide them (``extra_groups_for_head_shards``);
          conv ``(kernel - 1, (intermediate + 2 n state) / tp)``, ssm
          ``(heads / tp, head_dim, state)``;
        - ``gated_deltanet`` (``gated_delta_net_state_shape``): conv
          ``(kernel - 1, (2 K_heads K_dim + V_heads V_dim) / tp)``, recurrent
          ``(V_heads / tp, V_dim, K_dim)``.

        >>> from kvlib import load_model
        >>> load_model("qwen3-next-80b-a3b").state_tensor_shapes("gated_deltanet", tp=4)
        {'conv': (3, 2048), 'recurrent': (8, 128, 128)}
        """
        self._state_fields(kind)
        if type(tp) is not int or tp < 1:
            raise SpecError(f"tp must be a positive integer, got {tp!r}")
        if kind == MAMBA2:
            heads, groups = self.mamba_num_heads, self.mamba_n_groups
            # vllm/model_executor/layers/mamba/mamba_mixer2.py asserts both before any shape is made
            if heads % tp:
                raise SpecError(f"tp={tp} must divide mamba_num_heads={heads}")
            if groups % tp and groups != 1:
                raise SpecError(f"tp={tp} must divide mamba_n_groups={groups} (or the groups be 1)")
            groups += 0 if groups % tp == 0 else tp - groups
            conv_dim = self.mamba_intermediate_size + 2 * groups * self.mamba_state_size
            return {"conv": (self.mamba_conv_kernel - 1, _divide(conv_dim, tp, "the Mamba2 conv width")),
                    "ssm": (heads // tp, self.mamba_head_dim, self.mamba_state_size)}
        k_heads, v_heads = self.linear_num_key_heads, self.linear_num_value_heads
        for name, heads in (("linear_num_key_heads", k_heads), ("linear_num_value_heads", v_heads)):
            if heads % tp:   # vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py splits both by tp
                raise SpecError(f"tp={tp} must divide {name}={heads}")
        k_dim, v_dim = self.linear_key_head_dim, self.linear_value_head_dim
        conv_dim = 2 * k_heads * k_dim + v_heads * v_dim
        return {"conv": (self.linear_conv_kernel_dim - 1, _divide(conv_dim, tp, "the Gated DeltaNet conv width")),
                "recurrent": (v_heads // tp, v_dim, k_dim)}

    def state_dtype_bytes(self, kind: str) -> dict:
        """Bytes per element of each state tensor of a ``kind`` layer, vLLM's defaults.

        ``MambaStateDtypeCalculator`` with ``mamba_cache_dtype`` and
        ``mamba_ssm_cache_dtype`` left at "auto": the conv state in the model
        dtype (16-bit as served); Mamba2's SSM state in ``mamba_ssm_dtype``
        (Nemotron-H: the config's ``mamba_ssm_cache_dtype``, else float32,
        ``NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE`` in
        ``vllm/model_executor/models/config.py``), the model dtype otherwise;
        Gated DeltaNet's recurrent state in the model dtype, or Qwen3.5's
        ``mamba_ssm_dtype`` (``Qwen3_5ForConditionalGenerationConfig``).

        >>> from kvlib import load_model
        >>> load_model("nemotron-h-56b").state_dtype_bytes("mamba2")
        {'conv': 2, 'ssm': 4}
        """
        self._state_fields(kind)
        temporal = self.dtype_bytes if self.mamba_ssm_dtype is None else int(_dtype_bytes(self.mamba_ssm_dtype))
        return {"conv": self.dtype_bytes, "ssm" if kind == MAMBA2 else "recurrent": temporal}

    def layer_state_bytes(self, kind: str, tp: int = 1) -> int:
        """Bytes of state one ``kind`` layer keeps for one sequence on one rank (0 for a KV or 'none' layer).

        The sum over its tensors of elements x bytes (``state_tensor_shapes``,
        ``state_dtype_bytes``). Qwen3-Next at TP 1: conv 3 x 8,192 x 2 =
        49,152 B plus recurrent 32 x 128 x 128 x 2 = 1,048,576 B.

        >>> from kvlib import load_model
        >>> load_model("qwen3-next-80b-a3b").layer_state_bytes("gated_deltanet")
        1097728
        """
        if kind not in LAYER_KINDS:
            raise SpecError(f"unknown layer kind {kind!r}")
        if kind not in STATE_KINDS:
            return 0
        shapes, sizes = self.state_tensor_shapes(kind, tp), self.state_dtype_bytes(kind)
        return sum(math.prod(shape) * sizes[name] for name, shape in shapes.items())

    def state_bytes_per_sequence(self, tp: int = 1) -> int:
        """Bytes of constant state one sequence keeps on one rank, every state layer together [B].

        Whatever the context: a Mamba2 or Gated DeltaNet layer folds the whole
        history into its state. 0 for a model without state layers; a model
        with a layer whose state kvlib does not model is refused in one line.

        >>> from kvlib import load_model
        >>> load_model("qwen3-next-80b-a3b").state_bytes_per_sequence()    # 36 layers x 1,097,728 B
        39518208
        """
        if self.unmodelled_state:
            raise SpecError(self.unmodelled_state)
        per_kind = {kind: self.layer_state_bytes(kind, tp) for kind in set(self.layer_kinds) & set(STATE_KINDS)}
        return sum(per_kind.get(kind, 0) for kind in self.layer_kinds)

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
