"""The page of one layer on one rank in vLLM's KV cache: its element size and its bytes.

- element bytes ``b``: 2 for 16-bit, 1 for fp8, the model dtype for ``auto`` (``kv_element_bytes``);
  MLA's packed fp8 formats have a per-token size of their own (``MLA_PACKED_BYTES``).
- page per layer ``P_layer = bs * kvh * (k_dim + v_dim) * b``; ``kvh = kv_heads_per_gpu(K, tp)``
  (``kvlib.formulas``: ``max(1, K // tp)``); MLA: ``kvh = 1``, ``k_dim = kv_lora_rank + qk_rope_head_dim``,
  ``v_dim = 0`` (replicated on every TP rank).

``kvlib.vllm.layout`` builds blocks and stages from these pages, ``kvlib.vllm.hybrid`` one page for layers whose
pages differ. Taught in ch04_pool_paging and ch08_vllm_lab.
"""

from __future__ import annotations

from ..dtypes import dtype_bytes
from ..spec import ATTENTION_KINDS, FULL, ModelSpec, SpecError
from .engine import DEFAULT_BLOCK_SIZE, VllmLogError

__all__ = ["KV_CACHE_DTYPES", "MLA_PACKED_BYTES", "fp8_ds_mla_token_bytes", "kv_element_bytes", "layer_page_bytes"]


def fp8_ds_mla_token_bytes(latent_dim: int = 512, rope_dim: int = 64, scale_tile: int = 128) -> int:
    """Bytes one token takes in one layer in vLLM's ``fp8_ds_mla`` cache format.

    The latent is stored in fp8 (1 byte a number) with one float32 scale per
    ``scale_tile`` latent numbers, and the RoPE key stays in bf16 (2 bytes):
    ``d_c + 4 ceil(d_c / 128) + 2 d_R``. For DeepSeek's widths, 512 + 16 + 128
    = 656 B, against 576 for a plain fp8 cache and 1,152 in bf16. vLLM states
    the layout in ``vllm/v1/attention/backends/mla/flashmla_sparse.py`` (the
    FlashMLA sparse backend, DeepSeek-V3.2) and sizes the page with the fixed
    656 in ``MLAAttentionSpec.real_page_size_bytes``
    (``vllm/v1/kv_cache_interface.py``).

    >>> fp8_ds_mla_token_bytes()
    656

    Taught in ch03_mla (how vLLM stores the latent).
    """
    return latent_dim + 4 * -(-latent_dim // scale_tile) + 2 * rope_dim


# bytes per token per layer of the fixed packed layouts (vLLM sizes them with these constants)
MLA_PACKED_BYTES = {"fp8_ds_mla": fp8_ds_mla_token_bytes(), "nvfp4_ds_mla": 352}
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
                   "fp8_ds_mla", "nvfp4_ds_mla")


def kv_element_bytes(kv_cache_dtype=None, model_dtype=None) -> int:
    """Bytes one cached element takes: 2 for 16-bit, 1 for fp8, the model dtype for 'auto'.

    ``model_dtype`` is the dtype the engine runs in (the log's ``dtype=``);
    'auto' with no model dtype is 16-bit, as vLLM serves float32 checkpoints
    in 16 bits unless told otherwise.

    >>> kv_element_bytes("auto"), kv_element_bytes("fp8_e4m3"), kv_element_bytes("auto", "float32")
    (2, 1, 4)
    """
    name = "auto" if kv_cache_dtype is None else str(kv_cache_dtype).lower().removeprefix("torch.")
    if name == "auto":
        if model_dtype is None:
            return 2
        try:
            b = dtype_bytes(model_dtype)
        except ValueError:
            raise VllmLogError(f"unknown model dtype {model_dtype!r}") from None
        return int(b) if b >= 1 else 2
    if name in MLA_PACKED_BYTES:
        return 1
    try:
        b = dtype_bytes(name)       # kvlib's one dtype table
    except ValueError:
        b = None
    if b is None or b < 1:          # vLLM has no sub-byte KV-cache dtype outside the packed MLA layouts
        raise VllmLogError(f"unknown kv_cache_dtype {kv_cache_dtype!r} (known: {', '.join(KV_CACHE_DTYPES)})")
    return b


def _kv_heads_per_rank(spec: ModelSpec, tp: int, kind: str = FULL) -> int:
    """The spec's own TP rule (split, replicated past K, MLA whole), as this module's error."""
    try:
        return spec.kv_heads_per_gpu(tp, kind)
    except SpecError as exc:
        raise VllmLogError(f"tensor_parallel_size: {exc}") from None


def _one_geometry(spec: ModelSpec) -> str:
    kinds = [k for k in dict.fromkeys(spec.layer_kinds) if k in ATTENTION_KINDS]
    if len({spec.kv_geometry(k) for k in kinds}) > 1:
        raise VllmLogError(f"{spec.name}: attention layers of different geometry ("
                           + ", ".join(f"{k} {spec.kv_geometry(k)[0]} x {spec.kv_geometry(k)[1]}" for k in kinds)
                           + "): one page per kind (pass kind=, or kvlib.vllm.hybrid.page_plan)")
    return FULL


def layer_page_bytes(spec: ModelSpec, block_size: int = DEFAULT_BLOCK_SIZE, kv_cache_dtype=None, *,
                     tp: int = 1, model_dtype=None, mla_pad_256: bool = False, kind: str | None = None) -> int:
    """Bytes one layer's block takes on one rank: ``bs * kvh * (k_dim + v_dim) * b``.

    MLA stores one latent of ``kv_lora_rank + qk_rope_head_dim`` and no V
    (no factor 2), replicated on every TP rank; ``mla_pad_256`` rounds each
    token's entry up to 256 bytes as V0 did in 0.7.2-0.7.3. ``kind``: an
    attention kind whose own geometry to use (Gemma 4's full layers); None
    for the model's one geometry (refused when its kinds differ).

    >>> from kvlib import load_model
    >>> layer_page_bytes(load_model("llama-3.1-8b"))            # 16 * 8 * (128 + 128) * 2
    65536
    >>> layer_page_bytes(load_model("llama-3.1-8b"), tp=4)      # 2 KV heads per rank
    16384
    >>> layer_page_bytes(load_model("deepseek-v3"), tp=16)      # 16 * (512 + 64) * 2
    18432
    """
    if type(block_size) is not int or block_size < 1:
        raise VllmLogError(f"block_size must be a positive integer, got {block_size!r}")
    if type(tp) is not int or tp < 1:
        raise VllmLogError(f"tensor_parallel_size must be a positive integer, got {tp!r}")
    name = "auto" if kv_cache_dtype is None else str(kv_cache_dtype).lower()
    if spec.is_mla:
        if name in MLA_PACKED_BYTES:
            per_token = MLA_PACKED_BYTES[name]
        else:
            per_token = (spec.kv_lora_rank + spec.qk_rope_head_dim) * kv_element_bytes(name, model_dtype)
            if mla_pad_256:
                per_token = -(-per_token // 256) * 256
        return block_size * per_token
    if name in MLA_PACKED_BYTES:
        raise VllmLogError(f"kv_cache_dtype {name} is for MLA models only")
    b = kv_element_bytes(name, model_dtype)
    if kind is None:
        kind = _one_geometry(spec)
    elif kind not in ATTENTION_KINDS:
        raise VllmLogError(f"kind {kind!r} keeps no KV cache (attention kinds: {', '.join(ATTENTION_KINDS)})")
    return block_size * _kv_heads_per_rank(spec, tp, kind) * 2 * spec.kv_geometry(kind)[1] * b
