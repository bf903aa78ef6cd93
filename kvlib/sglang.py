"""SGLang's KV cache, rule by rule: the token pool, pages, the sliding-window split, HiCache's host pool.

SGLang (https://github.com/sgl-project/sglang) sizes its cache differently from vLLM (``kvlib.vllm``):

- **One pool of token slots.** A slot holds one token's K and V for *every* KV layer on the rank (its
  "cell", ``cell_size_bytes``); a request takes one slot per token, so a layer with a sliding window
  saves nothing unless SGLang gives the window layers a pool of their own (``swa_pool_split``).
- **The pool from two measurements.** SGLang reads the free GPU memory before the weights load
  ("Load weight begin. avail mem") and after ("Load weight end ... avail mem"), and keeps
  ``free_before x (1 - mem_fraction_static)`` free for activations and CUDA graphs::

      rest = free_after - free_before x (1 - mem_fraction_static)      (kv_budget_bytes)
      max_total_num_tokens = floor(rest / cell), rounded down to a whole page

  With ``free_after = free_before - W`` that is ``mem_fraction_static x free_before - W``: the static
  fraction covers the weights *and* the KV pool; the activations and graphs live outside it. (vLLM
  takes weights, activations and its pool all out of one ``gpu_memory_utilization`` budget.)
- **Pages of one token** by default: no last-page waste, a prefix hit on the radix tree to the token
  (``page_waste_tokens``; FlashMLA, TRT-LLM and FA4 on Blackwell force bigger pages,
  ``default_page_size``). A hit never covers the whole prompt: SGLang caps the match at the prompt
  length - 1, as vLLM does (``kvlib.prefix_cache.cache_hit_tokens(..., block_size=page_size)``;
  ``managers/schedule_batch.py`` ``_compute_max_prefix_len``).
- **HiCache** keeps a host copy of the pool ``--hicache-ratio`` times the size of the GPU's
  (``hicache_host_tokens``).

Each rule names the SGLang file it follows, read in the released wheels (``pip download sglang==X
--no-deps``; the newest read is ``RELEASE``); where a rule changed, the docstring says between which
releases. Standard library only, nothing read at import time.

Taught in ch04_pool_paging (the pool, pages, sliding-window pools) and ch05_prefix_reuse (HiCache,
token-granular hits).

>>> max_total_num_tokens("llama-3.1-8b", mem_fraction_static=0.88,       # SGLang printed 444,500
...                      free_before_load=round(78.81 * 2**30), free_after_load=round(63.72 * 2**30))
444520
"""

from __future__ import annotations

import math
import re

from .config import ConfigError, load_model
from .dtypes import dtype_bytes
from .errors import SGLangError  # noqa: F401 -- raised here; kvlib.sglang.SGLangError stays importable
from .gpus import GPU, get_gpu
from .spec import ATTENTION_KINDS, CHUNKED, FULL, SLIDING, ModelSpec, SpecError
from .units import GB

__all__ = [
    "SGLangError", "RELEASE", "DEFAULT_PAGE_SIZE", "DEFAULT_SWA_FULL_TOKENS_RATIO", "DEFAULT_HICACHE_RATIO",
    "PAGE_SIZE_BY_BACKEND", "HYBRID_SWA_MODEL_TYPES", "parse_release", "kv_element_bytes", "uses_hybrid_swa_pool",
    "cell_size_bytes", "kv_budget_bytes", "max_total_num_tokens", "allocated_kv_bytes", "swa_pool_split",
    "default_mem_fraction_static", "default_page_size", "page_waste_tokens", "hicache_host_tokens",
]

RELEASE = "0.5.23"          # the newest SGLang release read for these rules
DEFAULT_PAGE_SIZE = 1       # server_args --page-size when no backend asks for more (arg_groups/overrides.py)
DEFAULT_SWA_FULL_TOKENS_RATIO = 0.8   # --swa-full-tokens-ratio (arg_groups/fields/schedule.py)
DEFAULT_HICACHE_RATIO = 2.0           # --hicache-ratio in HiCache's cache mode (arg_groups/fields/memory.py)

# The page size SGLang 0.5.23 runs a backend with when --page-size is left unset
# (arg_groups/overrides.py: _mla_backend_page_constraints, _fa4_page_constraint, _intel_xpu_page_constraint,
# _page_size_default; arg_groups/model_overrides/deepseek_v2.py and deepseek_v4.py for "dsa" and "dsv4").
# Hopper's default backend is fa3 (page 1); Blackwell (SM100) picks trtllm_mha for MHA/GQA models and
# trtllm_mla for DeepSeek-V3 (page 64) (arg_groups/model_override_base.py get_default_attn_backend).
PAGE_SIZE_BY_BACKEND = {
    "flashinfer": 1, "fa3": 1, "triton": 1, "torch_native": 1, "flex_attention": 1, "aiter": 1, "wave": 1,
    "flashmla": 64,         # FlashMLA only supports 64, whatever --page-size says
    "trtllm_mla": 64,       # 32 or 64 accepted; anything else becomes 64
    "cutedsl_mla": 64,      # 32 or 64
    "trtllm_mha": 64,       # 16, 32, 64 or 128
    "hpc_ops": 64,
    "fa4": 128,             # on Blackwell for non-MLA models, forced
    "intel_xpu": 128,       # 64 or 128
    "dsa": 64,              # DeepSeek-V3.2 / GLM-5: 64 x index_kpool (1 in their configs)
    "dsv4": 256,            # DeepSeek-V4
}

# Model types whose sliding-window (or chunked) layers SGLang 0.5.23 keeps in a pool of their own
# (configs/model_config.py is_hybrid_swa_model: GptOssForCausalLM, Llama4ForConditionalGeneration,
# Gemma4ForCausalLM / Gemma4ForConditionalGeneration, among architectures kvlib does not bundle).
# Gemma 2 and 3 are turned off ("Disable hybrid SWA memory ... not yet supported",
# arg_groups/model_overrides/gemma2_gemma3.py); every other windowed model keeps every layer of every token.
HYBRID_SWA_MODEL_TYPES = frozenset({"gpt_oss", "llama4", "llama4_text", "gemma4", "gemma4_text"})


# --- inputs --------------------------------------------------------------------------------------------
def _spec(model) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    try:
        return load_model(model)
    except (ConfigError, SpecError) as err:
        raise SGLangError(str(err)) from None


def _gpu(gpu) -> GPU:
    if isinstance(gpu, GPU):
        return gpu
    try:
        return get_gpu(gpu)
    except ValueError as err:
        raise SGLangError(str(err)) from None


def _positive_int(name: str, value) -> int:
    if type(value) is not int or value < 1:
        raise SGLangError(f"{name} must be a positive integer, got {value!r}")
    return value


def _fraction(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= 1):
        raise SGLangError(f"{name} must be a number in (0, 1], got {value!r}")
    return value


def _bytes(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SGLangError(f"{name} must be a whole number of bytes >= 0, got {value!r}")
    return value


def parse_release(text) -> tuple:
    """An SGLang release as a comparable tuple: '0.5.8.post1' -> (0, 5, 8, 1); 'rc' sorts before the release.

    >>> parse_release("0.5.8.post1"), parse_release("0.4.3"), parse_release("v0.5.3rc0") < parse_release("0.5.3")
    ((0, 5, 8, 1), (0, 4, 3, 0), True)
    """
    match = re.fullmatch(r"\s*v?(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\.post(\d{1,3})|rc(\d{1,3}))?\s*", str(text))
    if not match:
        raise SGLangError(f"release must be an SGLang version such as '0.5.8.post1', got {text!r}")
    major, minor, patch, post, rc = match.groups()
    return int(major), int(minor), int(patch), int(post) if post else (-1 if rc is not None else 0)


def kv_element_bytes(model, kv_cache_dtype: str = "auto") -> int:
    """Bytes per stored K or V number: the model's 16-bit dtype for ``'auto'``, else ``--kv-cache-dtype``.

    fp8 (``fp8_e4m3``, ``fp8_e5m2``) is 1 byte. The fp4 and mxfp8 caches add scale buffers SGLang
    sizes per backend (``model_executor/pool_configurator.py``); kvlib refuses them rather than guess.

    >>> kv_element_bytes("llama-3.1-8b"), kv_element_bytes("llama-3.1-8b", "fp8_e4m3")
    (2, 1)
    """
    if kv_cache_dtype == "auto":
        return _spec(model).dtype_bytes
    name = str(kv_cache_dtype).lower()
    if "fp4" in name or "mxfp8" in name:
        raise SGLangError(f"kv_cache_dtype {kv_cache_dtype!r}: SGLang adds scale buffers to an fp4 or mxfp8 "
                          "cache that kvlib does not model")
    try:
        size = dtype_bytes(name)
    except ValueError as err:
        raise SGLangError(f"kv_cache_dtype: {err}") from None
    if size not in (1, 2, 4):
        raise SGLangError(f"kv_cache_dtype {kv_cache_dtype!r} is not a cache dtype SGLang offers")
    return int(size)


# --- the cell: one token slot on one rank ----------------------------------------------------------------
def uses_hybrid_swa_pool(model, *, disable_hybrid_swa_memory: bool = False) -> bool:
    """Whether SGLang keeps this model's window layers in a pool of their own (``HYBRID_SWA_MODEL_TYPES``).

    gpt-oss, Llama 4 and Gemma 4 do (their sliding or chunked layers); Gemma 2 and 3, Mistral's and
    Phi-3's windows do not: every layer keeps every token. ``--disable-hybrid-swa-memory`` turns it off.

    >>> uses_hybrid_swa_pool("gpt-oss-20b"), uses_hybrid_swa_pool("gemma-2-9b"), uses_hybrid_swa_pool("mistral-7b")
    (True, False, False)
    """
    spec = _spec(model)
    windowed = any(kind in (SLIDING, CHUNKED) for kind in spec.layer_kinds)
    return windowed and spec.model_type in HYBRID_SWA_MODEL_TYPES and not disable_hybrid_swa_memory


def _check_state(spec: ModelSpec) -> None:
    if spec.num_state_layers:
        raise SGLangError(f"{spec.name}: SGLang splits the budget between its Mamba/linear-attention state pool "
                          "and the KV pool (--mamba-full-memory-ratio); kvlib does not model that split")


def _layer_bytes(spec: ModelSpec, kind: str, b: int, tp: int) -> int:
    try:
        return spec.layer_kv_bytes_per_token(b, tp, kind)
    except SpecError as err:
        raise SGLangError(str(err)) from None


def cell_size_bytes(model, *, tp: int = 1, kv_cache_dtype: str = "auto") -> int:
    """Bytes one token slot takes on one rank: every KV layer's K and V, ``cell_size`` [B].

    MHA/GQA: ``max(1, K // t) x (D + D_v) x L x b``; MLA: ``(d_c + d_R) x L x b``, the same on every
    rank; DeepSeek-V3.2 / GLM-5 add their indexer key, ``index_head_dim + index_head_dim // 128 x 4``
    bytes per layer that builds one, in uint8. Every attention layer counts, windowed or not (a slot
    holds the token for all of them); a model SGLang gives a sliding-window pool (``uses_hybrid_swa_pool``)
    is sized by ``swa_pool_split`` instead, and a Mamba / linear-attention hybrid is refused.

    ``model_executor/pool_configurator.py`` ``DefaultPoolConfigurator._compute_cell_size`` (0.5.23);
    the same product in ``model_runner.py`` ``profile_max_num_token`` since 0.4.1 at least.

    Llama 3.1 8B at TP 4: 2 KV heads x (128 + 128) x 32 layers x 2 bytes; DeepSeek-V3 at TP 8:
    (512 + 64) x 61 x 2:

    >>> cell_size_bytes("llama-3.1-8b", tp=4), cell_size_bytes("deepseek-v3", tp=8)
    (32768, 70272)
    """
    spec = _spec(model)
    if uses_hybrid_swa_pool(spec):
        raise SGLangError(f"{spec.name}: SGLang keeps its window layers in a pool of their own; "
                          "size it with swa_pool_split")
    return _one_pool_cell(spec, tp, kv_cache_dtype)


def _one_pool_cell(spec: ModelSpec, tp: int, kv_cache_dtype: str) -> int:
    """Every attention layer's bytes per token on one rank, windowed or not, plus the indexer."""
    _positive_int("tp", tp)
    _check_state(spec)
    b = kv_element_bytes(spec, kv_cache_dtype)
    per_kind = {kind: _layer_bytes(spec, kind, b, tp) for kind in set(spec.layer_kinds) & set(ATTENTION_KINDS)}
    return sum(per_kind.get(kind, 0) for kind in spec.layer_kinds) + spec.indexer_bytes_per_token(tp)


# --- the budget and the pool ----------------------------------------------------------------------------
def kv_budget_bytes(free_before_load: int, free_after_load: int, mem_fraction_static: float) -> int:
    """Bytes SGLang leaves for the KV pool [B]:
    ``floor(free_after_load - free_before_load x (1 - mem_fraction_static))``.

    ``free_before_load`` is the GPU memory free before the weights load, ``free_after_load`` after (both
    on the rank with the least, under TP), ``mem_fraction_static`` is ``--mem-fraction-static``: the
    rest of ``free_before_load`` stays free for activations and CUDA graphs. ``model_runner.py``
    ``profile_max_num_token`` (0.4.1 to 0.5.8.post1: ``rest_memory = available_gpu_memory -
    total_gpu_memory * (1 - mem_fraction_static)``);
    ``mem_cache/kv_cache_configurator.py`` ``_profile_available_bytes`` in 0.5.23, which also takes out a
    multimodal model's post-sizing reservation (0 for a text model). Negative when the weights do not fit.

    H100, Llama 3.1 8B, mem_fraction_static 0.88 (SGLang's docs build of 2024-12-26): 78.81 GiB free
    before the load, 63.72 after:

    >>> round(kv_budget_bytes(round(78.81 * 2**30), round(63.72 * 2**30), 0.88) / 2**30, 4)   # 63.72 - 9.4572
    54.2628
    """
    _bytes("free_before_load", free_before_load)
    _bytes("free_after_load", free_after_load)
    _fraction("mem_fraction_static", mem_fraction_static)
    return math.floor(free_after_load - free_before_load * (1 - mem_fraction_static))


def _page_floor(tokens: int, page_size: int) -> int:
    return tokens // page_size * page_size


def max_total_num_tokens(model, gpu=None, *, mem_fraction_static: float, tp: int = 1, kv_cache_dtype: str = "auto",
                         page_size: int = DEFAULT_PAGE_SIZE,
                         swa_full_tokens_ratio: float = DEFAULT_SWA_FULL_TOKENS_RATIO,
                         disable_hybrid_swa_memory: bool = False, free_before_load: int | None = None,
                         free_after_load: int | None = None, weight_bytes: int | None = None) -> int:
    """The tokens SGLang's pool holds on one rank, as its scheduler prints ``max_total_num_tokens`` [tokens].

    ``floor(kv_budget_bytes(free_before_load, free_after_load, mem_fraction_static) / cell_size_bytes)``,
    rounded down to a whole page
    (``pool_configurator.py`` ``DefaultPoolConfigurator.calculate_pool_sizes``, 0.5.23;
    ``model_runner.py`` ``init_memory_pool`` in 0.4.6 to 0.5.8.post1; 0.4.3.post4 had no pages).
    For a model with a sliding-window pool it is the full-attention pool's tokens (``swa_pool_split``).

    ``free_before_load`` (bytes) defaults to the memory CUDA reports as total for ``gpu``
    (``kvlib.gpus``): a real start has a few hundred MiB less free (the CUDA context, NCCL; 78.81 of
    79.18 GiB on an H100), so the default is the upper bound. ``free_after_load`` defaults
    to ``free_before_load`` less ``weight_bytes``, which defaults to the weights on one rank as stored
    (``kvlib.weights.stored_weights``; SGLang's "mem usage" at load runs about 0.1 GiB above it).
    A log's two "avail mem" figures give both exactly (``kvlib.sglang_log``). ``mem_fraction_static``
    must be given: the server prints it; ``default_mem_fraction_static`` gives SGLang's default.

    Llama 3.1 8B on an H100 at mem_fraction_static 0.88 from the GPU table alone (0.88 x 79.18 GiB less 14.99 GiB of
    weights, over 128 KiB a token), then from the two figures of SGLang's docs build of 2024-12-26, which
    printed 444,500 (the two-decimal GiB figures leave a window of +-46 tokens, ``kvlib.sglang_log``):

    >>> max_total_num_tokens("llama-3.1-8b", "h100", mem_fraction_static=0.88)
    448017
    >>> max_total_num_tokens("llama-3.1-8b", mem_fraction_static=0.88,
    ...                      free_before_load=round(78.81 * 2**30), free_after_load=round(63.72 * 2**30))
    444520
    """
    spec = _spec(model)
    _positive_int("tp", tp)
    _positive_int("page_size", page_size)
    _fraction("mem_fraction_static", mem_fraction_static)
    if free_before_load is None:
        if gpu is None:
            raise SGLangError("give a gpu or free_before_load (the 'Load weight begin. avail mem' figure, in bytes)")
        free_before_load = _gpu(gpu).cuda_memory_bytes
    _bytes("free_before_load", free_before_load)
    if free_after_load is None:
        if weight_bytes is None:
            from .weights import stored_weights
            try:
                weight_bytes = stored_weights(spec, tp=tp).bytes_per_rank
            except (ConfigError, SpecError) as err:
                raise SGLangError(f"{spec.name}: weights unknown ({err}); pass weight_bytes or free_after_load") \
                    from None
        free_after_load = free_before_load - _bytes("weight_bytes", weight_bytes)
    budget = kv_budget_bytes(free_before_load, max(free_after_load, 0), mem_fraction_static)
    if budget <= 0:
        raise SGLangError(f"no KV pool: the weights leave {budget / 2**30:.2f} GiB under mem_fraction_static="
                          f"{mem_fraction_static} (SGLang: 'Not enough memory. Please try to increase "
                          "--mem-fraction-static.')")
    if uses_hybrid_swa_pool(spec, disable_hybrid_swa_memory=disable_hybrid_swa_memory):
        return swa_pool_split(spec, budget, tp=tp, swa_full_tokens_ratio=swa_full_tokens_ratio,
                              page_size=page_size, kv_cache_dtype=kv_cache_dtype)[0]
    tokens = _page_floor(budget // _one_pool_cell(spec, tp, kv_cache_dtype), page_size)
    if tokens <= 0:
        raise SGLangError("no KV pool: the budget holds no whole page (SGLang: 'Not enough memory')")
    return tokens


def allocated_kv_bytes(model, num_tokens: int, *, tp: int = 1, page_size: int = DEFAULT_PAGE_SIZE,
                       kv_cache_dtype: str = "auto") -> dict:
    """Bytes of the pool's buffers on one rank, as "KV Cache is allocated" prints them [B].

    The buffers hold ``num_tokens + page_size`` rows (slot 0, a whole page under paging, is the padding
    slot): MHA/GQA one K and one V buffer per layer, ``{'k': ..., 'v': ...}``, each
    ``(T + page) x max(1, K // t) x D x b x L``; MLA one latent buffer per layer, ``{'kv': ...}``,
    ``(T + page) x (d_c + d_R) x b x L``. ``mem_cache/memory_pool.py`` ``MHATokenToKVPool`` /
    ``MLATokenToKVPool._create_buffers`` (``size + page_size``; ``size + 1`` before pages, 0.4.3.post4);
    the log divides by 2^30 and prints two decimals, "GB".

    Llama 3.1 8B on one GPU with SGLang's docs build's 444,500 tokens (the log of 2025-01-23 printed
    "K size: 27.13 GB"):

    >>> round(allocated_kv_bytes("llama-3.1-8b", 444500)["k"] / 2**30, 2)
    27.13
    """
    spec = _spec(model)
    _positive_int("num_tokens", num_tokens)
    _positive_int("page_size", page_size)
    rows = num_tokens + page_size
    cell = cell_size_bytes(spec, tp=tp, kv_cache_dtype=kv_cache_dtype)
    if spec.is_mla:
        return {"kv": rows * (cell - spec.indexer_bytes_per_token(tp))}
    return {"k": rows * cell // 2, "v": rows * cell // 2}


# --- the sliding-window split --------------------------------------------------------------------------
def swa_pool_split(model, budget_bytes: int, *, tp: int = 1,
                   swa_full_tokens_ratio: float = DEFAULT_SWA_FULL_TOKENS_RATIO,
                   page_size: int = DEFAULT_PAGE_SIZE, kv_cache_dtype: str = "auto") -> tuple:
    """(full-attention pool tokens, sliding-window pool tokens) SGLang makes of a KV budget [tokens].

    A model with a window pool (``uses_hybrid_swa_pool``) keeps its full-attention layers and its
    window layers in two pools of token slots, the window pool ``ratio`` = ``--swa-full-tokens-ratio``
    (default 0.8, in (0, 1]) times the full one, whatever the layer counts::

        full = floor(budget / (L_full x full_layer_bytes + ratio x L_window x window_layer_bytes)), to a page
        swa  = floor(full x ratio), to a page

    ``full_layer_bytes`` and ``window_layer_bytes`` are one layer's bytes per token of each kind on the
    rank (Gemma 4's differ). SGLang refuses a window pool that cannot hold one request's window plus a page.
    ``model_executor/pool_configurator.py`` ``HybridSWAPoolConfigurator`` (0.5.23); through 0.5.8.post1
    ``model_runner_kv_cache_mixin.py`` ``set_num_tokens_hybrid_swa`` solved the same two equations from
    a per-layer token count (``full = tokens x L / (ratio x L_window + L_full)``), equal for models whose two
    kinds of layers have the same geometry (gpt-oss) up to a token of rounding.

    gpt-oss-20b (12 full and 12 window layers of 8 KV heads x 64, 2,048 B per layer-token) with 10 GiB:
    full = floor(10 x 2^30 / (12 x 2,048 + 0.8 x 12 x 2,048)) = floor(242,725.9), swa = floor(0.8 full):

    >>> swa_pool_split("gpt-oss-20b", 10 * 2**30)
    (242725, 194180)
    """
    spec = _spec(model)
    _positive_int("tp", tp)
    _positive_int("page_size", page_size)
    _fraction("swa_full_tokens_ratio", swa_full_tokens_ratio)
    _bytes("budget_bytes", budget_bytes)
    _check_state(spec)
    if not uses_hybrid_swa_pool(spec):
        raise SGLangError(f"{spec.name}: SGLang keeps no sliding-window pool for this model (every layer holds "
                          "every token); size it with max_total_num_tokens")
    b = kv_element_bytes(spec, kv_cache_dtype)
    full_layers = sum(kind == FULL for kind in spec.layer_kinds)
    window_layers = sum(kind in (SLIDING, CHUNKED) for kind in spec.layer_kinds)
    window_kind = SLIDING if SLIDING in spec.layer_kinds else CHUNKED
    full_cell = full_layers * _layer_bytes(spec, FULL, b, tp) if full_layers else 0
    window_cell = window_layers * _layer_bytes(spec, window_kind, b, tp)
    if not full_layers:     # every layer windowed: one pool, no ratio (HybridSWAPoolConfigurator, all-SWA)
        swa = _page_floor(budget_bytes // window_cell, page_size)
        return 0, swa
    full = _page_floor(int(budget_bytes // (full_cell + swa_full_tokens_ratio * window_cell)), page_size)
    swa = _page_floor(int(full * swa_full_tokens_ratio), page_size)
    window = spec.sliding_window if window_kind == SLIDING else spec.attention_chunk_size
    if window + page_size >= swa:
        raise SGLangError(f"the window pool ({swa} tokens) cannot hold one request: the window ({window}) plus a "
                          f"page ({page_size}); raise swa_full_tokens_ratio or the budget")
    return full, swa


# --- the default --mem-fraction-static ------------------------------------------------------------------
_TP_TABLE = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))

# (below this many MiB, chunked_prefill_size, decode graph max batch at TP < 4, at TP >= 4)
_GPU_CLASSES_0_5_6 = ((20 * 1024, 2048, 8, 8), (35 * 1024, 2048, 24, 80), (60 * 1024, 4096, 32, 160),
                      (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512), (math.inf, 16384, 512, 512))
_GPU_CLASSES_0_5_23 = ((20 * 1024, 2048, 8, 8), (35 * 1024, 4096, 48, 160), (60 * 1024, 4096, 32, 160),
                       (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512), (math.inf, 16384, 512, 512))


def _prefill_graph_sizes(max_tokens: int) -> list:
    """The token counts SGLang 0.5.23 captures prefill graphs at (``arg_groups/cuda_graph_hook.py``
    ``generate_prefill_cuda_graph_batch_sizes``)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


def _vision_factor(vision) -> float:
    """``adjust_mem_fraction_for_vlm``: 0.95 x a factor that falls 10 % per doubling of the ViT's
    ``layers x hidden^2`` over ViT-L/14's (24 x 1024^2), kept within [0.8, 1.05]."""
    if not (isinstance(vision, tuple) and len(vision) == 2 and all(type(v) is int and v > 0 for v in vision)):
        raise SGLangError(f"vision must be (num_hidden_layers, hidden_size) of the vision tower, got {vision!r}")
    layers, hidden = vision
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def default_mem_fraction_static(gpu_memory_mib, *, tp: int = 1, pp: int = 1, release: str = RELEASE,
                                mla: bool = False, vision: tuple | None = None) -> float:
    """SGLang's default ``--mem-fraction-static``, by release, from the GPU's memory and the parallelism.

    ``gpu_memory_mib`` is what ``nvidia-smi --query-gpu=memory.total`` (ROCm: ``rocminfo``) reports, in
    MiB (H100 80GB: 81,559; it is more than the total CUDA reports to torch). For a text model with CUDA
    graphs on, no speculative decoding and no data-parallel attention; ``vision`` = (layers, hidden size)
    of a multimodal model's vision tower applies SGLang's reduction for it. Three rules, each read in
    the releases named (others are refused rather than guessed):

    - **0.4.1 to 0.4.3.post4** (``server_args.py``): by TP alone, 0.88 at TP 1, 0.87 at 2, 0.85 at
      4 to 7, 0.81 at 8 to 15, 0.79 from 16.
    - **0.5.6 to 0.5.8.post1** (``server_args.py`` ``_handle_gpu_memory_settings``): it reserves, in
      MiB, ``512 + 1.5 max(C, 2048) + 2 graph_bs + 1024 t p / 8``, at least 10 GiB on a GPU above
      60 GiB, and the fraction is ``round((gpu_memory_mib - reserve) / gpu_memory_mib, 3)``. The prefill
      chunk ``C`` and the decode graphs' largest batch ``graph_bs`` come from the GPU's memory class
      (under 20, 35, 60, 90, 160 GiB, above).
    - **0.5.22 and 0.5.23** (``arg_groups/memory_hook.py``): the same, with the classes retuned
      (20-35 GiB: C 4096, graph_bs 48 / 160) and the prefill graphs reserved too: 8 MiB per captured
      size (``_prefill_graph_sizes``, up to C) for MHA/GQA, a flat 1.5 GiB for MLA.

    H100 80GB at TP 1 in 0.5.23: 512 + 12,288 + 128 + 512 + 58 x 8 = 13,904 MiB, (81,559 - 13,904) /
    81,559 = 0.8295:

    >>> default_mem_fraction_static(81559), default_mem_fraction_static(81559, release="0.5.8.post1")
    (0.83, 0.835)
    >>> default_mem_fraction_static(81559, tp=4, release="0.4.3.post4")
    0.85
    """
    _positive_int("tp", tp)
    _positive_int("pp", pp)
    if isinstance(gpu_memory_mib, bool) or not isinstance(gpu_memory_mib, (int, float)) or gpu_memory_mib <= 0:
        raise SGLangError(f"gpu_memory_mib must be a positive number of MiB, got {gpu_memory_mib!r}")
    r = parse_release(release)
    if parse_release("0.4.1") <= r <= parse_release("0.4.3.post4"):
        if vision is not None:
            raise SGLangError(f"release {release!r}: SGLang had no reduction for a vision tower before 0.5 "
                              "(adjust_mem_fraction_for_vlm); leave vision out")
        return next(f for min_tp, f in _TP_TABLE if tp >= min_tp)
    if parse_release("0.5.6") <= r <= parse_release("0.5.8.post1"):
        classes, prefill_graphs = _GPU_CLASSES_0_5_6, False
    elif parse_release("0.5.22") <= r <= parse_release("0.5.23"):
        classes, prefill_graphs = _GPU_CLASSES_0_5_23, True
    else:
        raise SGLangError(f"release {release!r}: kvlib has SGLang's default mem_fraction_static for 0.4.1-0.4.3.post4, "
                          "0.5.6-0.5.8.post1 and 0.5.22-0.5.23; pass the value the server printed")
    _, chunk, graph_small_tp, graph_large_tp = next(c for c in classes if gpu_memory_mib < c[0])
    graph_bs = graph_small_tp if tp < 4 else graph_large_tp
    reserve = 512 + max(chunk, 2048) * 1.5 + tp * pp / 8 * 1024 + graph_bs * 2
    if prefill_graphs:
        reserve += 1.5 * 1024 if mla else len(_prefill_graph_sizes(min(chunk, 8192) if mla else chunk)) * 8
    if gpu_memory_mib > 60 * 1024:
        reserve = max(reserve, 10 * 1024)
    fraction = round((gpu_memory_mib - reserve) / gpu_memory_mib, 3)
    return fraction * _vision_factor(vision) if vision is not None else fraction


# --- pages -------------------------------------------------------------------------------------------------
def default_page_size(attention_backend: str | None = None) -> int:
    """Tokens per page SGLang 0.5.23 runs ``attention_backend`` with when ``--page-size`` is left unset.

    1 for the usual backends (FlashInfer, FA3, Triton, AITER): SGLang allocates and matches prefixes token
    by token. FlashMLA, TRT-LLM (MLA and MHA), CuTe-DSL MLA, HPC-Ops and DeepSeek's DSA run with 64; FA4 on
    Blackwell and Intel XPU with 128; DeepSeek-V4 with 256 (``PAGE_SIZE_BY_BACKEND``). ``None``: no backend
    forcing a size (``DEFAULT_PAGE_SIZE``).

    >>> default_page_size(), default_page_size("fa3"), default_page_size("flashmla")
    (1, 1, 64)
    """
    if attention_backend is None:
        return DEFAULT_PAGE_SIZE
    key = str(attention_backend).strip().lower()
    if key not in PAGE_SIZE_BY_BACKEND:
        raise SGLangError(f"unknown attention_backend {attention_backend!r} "
                          f"(known: {', '.join(sorted(PAGE_SIZE_BY_BACKEND))})")
    return PAGE_SIZE_BY_BACKEND[key]


def page_waste_tokens(seq_lens, page_size: int = DEFAULT_PAGE_SIZE) -> int:
    """Token slots the sequences' last pages leave empty: ``sum(ceil(T / page) x page - T)`` [tokens].

    SGLang fills a request's last page before it takes a new one (``mem_cache/allocator`` paged
    ``alloc_extend`` / ``alloc_decode``), so each sequence wastes ``-T mod page`` slots: none at
    SGLang's default page of one token, up to 63 a sequence at FlashMLA's 64. ``seq_lens`` is one length
    or an iterable of them. (``kvlib.block_waste_tokens`` is the expected waste of uniform lengths.)

    Sequences of 100, 1,000 and 4,097 tokens: 28 + 24 + 63 slots at 64-token pages:

    >>> page_waste_tokens([100, 1000, 4097]), page_waste_tokens([100, 1000, 4097], page_size=64)
    (0, 115)
    """
    _positive_int("page_size", page_size)
    lengths = [seq_lens] if isinstance(seq_lens, int) and not isinstance(seq_lens, bool) else seq_lens
    try:
        lengths = list(lengths)
    except TypeError:
        raise SGLangError(f"seq_lens must be a token count or an iterable of them, got {seq_lens!r}") from None
    for length in lengths:
        if type(length) is not int or length < 0:
            raise SGLangError(f"seq_lens must hold token counts >= 0, got {length!r}")
    return sum(-length % page_size for length in lengths)


# --- HiCache -------------------------------------------------------------------------------------------------
def hicache_host_tokens(device_tokens: int, *, hicache_ratio: float = DEFAULT_HICACHE_RATIO, hicache_size: int = 0,
                        cell_bytes: int | None = None, page_size: int = DEFAULT_PAGE_SIZE) -> int:
    """Token slots of HiCache's host (CPU) pool, the second tier under the GPU pool [tokens].

    ``--hicache-size`` (GB, decimal) wins when above 0: ``floor(size x 10^9 / cell)``; else
    ``floor(device_tokens x --hicache-ratio)`` (default 2.0 in cache mode). Then a padding page is
    added, in whole pages: ``(tokens // page + 1) x page``. The host cell is the device's
    (``cell_bytes``, needed only with ``hicache_size``), so host bytes = tokens x cell.
    ``mem_cache/pool_host/base.py`` ``HostKVCache.__init__`` (0.5.23; ``memory_pool_host.py`` in
    0.5.8.post1, the same rule).

    Llama 3.1 8B's 444,500-token pool on an H100, ratio 2; then 100 GB at 131,072 B a token:

    >>> hicache_host_tokens(444500), hicache_host_tokens(444500, hicache_size=100, cell_bytes=131072)
    (889001, 762940)
    """
    _positive_int("device_tokens", device_tokens)
    _positive_int("page_size", page_size)
    if isinstance(hicache_size, bool) or not isinstance(hicache_size, int) or hicache_size < 0:
        raise SGLangError(f"hicache_size must be whole GB >= 0, got {hicache_size!r}")
    if hicache_size > 0:
        _positive_int("cell_bytes", cell_bytes)
        tokens = int(hicache_size * GB // cell_bytes)
    else:
        if isinstance(hicache_ratio, bool) or not isinstance(hicache_ratio, (int, float)) or hicache_ratio <= 0:
            raise SGLangError(f"hicache_ratio must be a positive number, got {hicache_ratio!r}")
        tokens = int(device_tokens * hicache_ratio)
    return (tokens // page_size + 1) * page_size
