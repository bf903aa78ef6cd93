"""Predict the KV-cache figures vLLM prints: backwards from a log, forwards from GPU memory.

Backwards (``predict_from_log``): a printed "X GiB" available for the KV
cache stands for whole bytes in [(X - 0.005) * 2^30, (X + 0.005) * 2^30), so
the block count is a *range*::

    N in [ lo // B , hi // B ]          B = bytes per block on the rank

Forwards (``predict_pool``): the recipe at the end of
``notes/vllm-kv-accounting.md``::

    R = ceil(T * u)      (V0 and V1 before 0.14: the float T * u)
    A = floor(R - W - P - O - G)
    N = A // B

with T the total memory CUDA reports, u the utilization (0.90 before vLLM
0.20, 0.92 from 0.20), W weights on the rank, P the activation peak, O the
non-torch increase, G the CUDA-graph estimate (0 when eager, and before 0.20).

Bytes per block:

- page per layer ``P_layer = bs * kvh * (k_dim + v_dim) * b``; ``kvh =
  max(1, K // tp)``; MLA: ``kvh = 1``, ``k_dim = kv_lora_rank +
  qk_rope_head_dim``, ``v_dim = 0`` (replicated on every TP rank);
  ``b`` = 2 for 16-bit, 1 for fp8, the model dtype for ``auto``.
- uniform models: ``B = (KV layers on the PP stage) * P_layer``.
- V1 hybrids (sliding window + full, equal pages): ``B = group_size *
  P_layer``, with layers bucketed by kind and group_size the smallest
  bucket, or the largest when largest < 1.5 x smallest (1.25 in 0.11-0.14;
  always the smallest through 0.10). Each bucket makes ceil(n / group_size)
  groups. V0 sizes every attention layer as full attention.

Tokens vLLM prints: V0 (and the max-seq-len error) ``N * bs``; V1 before 0.20
``(N // groups) * bs``; from 0.20 ``int(N / bpr * max_model_len)`` with
``bpr`` the blocks one request needs (``ceil(max_model_len / bs)`` per full
group). Concurrency: V0 ``N * bs / max_model_len``; V1 ``N / bpr``.

Taught in chapter 04 (the pool), where vLLM's own figures are checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal

from .dtypes import dtype_bytes
from .spec import CHUNKED, FULL, NO_KV, SLIDING, ModelSpec, SpecError
from .units import GiB, format_gb_gib
from .vllm_log import V0, V1, EngineStart, VllmLogError, parse_version

__all__ = [
    "DEFAULT_BLOCK_SIZE", "default_utilization", "kv_element_bytes", "layer_page_bytes",
    "pp_layer_split", "kv_cache_groups", "bytes_per_block", "LogPrediction", "predict_from_log",
    "PoolForecast", "predict_pool",
]

DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE, every release 0.2-0.33
V0_SWAP_SPACE_BYTES = 4 * GiB  # V0's default swap_space: CPU blocks = 4 GiB // bytes per block
_16BIT = {"auto16", "bf16", "bfloat16", "fp16", "float16", "half"}
_FP8 = {"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "int8"}
_MLA_PACKED = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}  # bytes per token per layer, fixed layouts
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
                   "fp8_ds_mla", "nvfp4_ds_mla")


def _version(version):
    if version is None:
        return None
    parsed = parse_version(version)
    if parsed is None:
        raise VllmLogError(f"not a vLLM version: {version!r} (expected e.g. '0.8.5')")
    return parsed


def default_utilization(version=None) -> float:
    """vLLM's default ``gpu_memory_utilization``: 0.90 before 0.20, 0.92 from 0.20.

    ``version`` is a string such as '0.8.5' or a tuple; None means the newest
    release (0.92).

    >>> default_utilization("0.19.1"), default_utilization("0.20.2"), default_utilization()
    (0.9, 0.92, 0.92)
    """
    v = _version(version)
    return 0.90 if v is not None and v < (0, 20, 0) else 0.92


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
    if name in _16BIT:
        return 2
    if name in _FP8:
        return 1
    if name in ("float32", "fp32"):
        return 4
    if name in _MLA_PACKED:
        return 1
    raise VllmLogError(f"unknown kv_cache_dtype {kv_cache_dtype!r} (known: {', '.join(KV_CACHE_DTYPES)})")


def _kv_heads_per_rank(spec: ModelSpec, tp: int) -> int:
    """The spec's own TP rule (split, replicated past K, MLA whole), as this module's error."""
    try:
        return spec.kv_heads_per_gpu(tp)
    except SpecError as exc:
        raise VllmLogError(f"tensor_parallel_size: {exc}") from None


def layer_page_bytes(spec: ModelSpec, block_size: int = DEFAULT_BLOCK_SIZE, kv_cache_dtype=None, *,
                     tp: int = 1, model_dtype=None, mla_pad_256: bool = False) -> int:
    """Bytes one layer's block takes on one rank: ``bs * kvh * (k_dim + v_dim) * b``.

    MLA stores one latent of ``kv_lora_rank + qk_rope_head_dim`` and no V
    (no factor 2), replicated on every TP rank; ``mla_pad_256`` rounds each
    token's entry up to 256 bytes as V0 did in 0.7.2-0.7.3.

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
        if name in _MLA_PACKED:
            per_token = _MLA_PACKED[name]
        else:
            per_token = (spec.kv_lora_rank + spec.qk_rope_head_dim) * kv_element_bytes(name, model_dtype)
            if mla_pad_256:
                per_token = -(-per_token // 256) * 256
        return block_size * per_token
    if name in _MLA_PACKED:
        raise VllmLogError(f"kv_cache_dtype {name} is for MLA models only")
    b = kv_element_bytes(name, model_dtype)
    return block_size * _kv_heads_per_rank(spec, tp) * 2 * spec.head_dim * b


def pp_layer_split(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage, as vLLM's ``get_pp_indices`` splits them.

    Each stage gets ``L // pp``; the remainder goes one each to the stages
    before the last, counting back from the second-to-last.

    >>> pp_layer_split(61, 2), pp_layer_split(32, 4), pp_layer_split(10, 4)
    ([31, 30], [8, 8, 8, 8], [2, 3, 3, 2])
    """
    if type(pp) is not int or pp < 1:
        raise VllmLogError(f"pipeline_parallel_size must be a positive integer, got {pp!r}")
    if pp > num_layers:
        raise VllmLogError(f"pipeline_parallel_size={pp} exceeds the {num_layers} layers")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


_THRESHOLD = {"1.5": 1.5, "1.25": 1.25}


def kv_cache_groups(kinds, rule: str = "1.5") -> tuple[int, tuple]:
    """(group_size, kind of each group) for one rank's KV layers under V1's grouping.

    One kind: one group of all layers. Several kinds with equal pages: layers
    are bucketed by kind; ``group_size`` is the smallest bucket, or the
    largest if largest < threshold x smallest (``rule`` '1.5' from 0.15,
    '1.25' in 0.11-0.14, 'smallest' through 0.10); each bucket makes
    ceil(n / group_size) groups.

    >>> kv_cache_groups(["sliding", "full"] * 18)          # gpt-oss-120b: 18 + 18
    (18, ('full', 'sliding'))
    >>> kv_cache_groups(["sliding"] * 5 + ["full"])       # Gemma 3 pattern 5:1
    (1, ('full', 'sliding', 'sliding', 'sliding', 'sliding', 'sliding'))
    """
    counts: dict = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        raise VllmLogError("no layer keeps a KV cache")
    if len(counts) == 1:
        (kind, n), = counts.items()
        return n, (kind,)
    smallest, largest = min(counts.values()), max(counts.values())
    if rule == "smallest" or largest >= _THRESHOLD[rule] * smallest:
        size = smallest
    else:
        size = largest
    groups = tuple(kind for kind in sorted(counts) for _ in range(-(-counts[kind] // size)))
    return size, groups


@dataclass(frozen=True)
class _Layout:
    page_bytes: int
    group_size: int
    groups: tuple

    @property
    def bytes_per_block(self) -> int:
        return self.group_size * self.page_bytes


def _stage_kinds(spec: ModelSpec, pp: int) -> list[tuple]:
    kinds, out, start = spec.layer_kinds, [], 0
    for n in pp_layer_split(spec.num_layers, pp):
        out.append(tuple(kinds[start:start + n]))
        start += n
    return out


def _layouts(spec: ModelSpec, engine: str, pp: int, rule: str, page: int, hybrid: bool = True) -> list:
    layouts = []
    for kinds in _stage_kinds(spec, pp):
        kv = [k for k in kinds if k != NO_KV]
        if not kv:
            raise VllmLogError(f"pipeline stage without a KV-cache layer (pp={pp}); not modelled")
        if engine == V1 and NO_KV in spec.layer_kinds:
            raise VllmLogError(f"{spec.name}: Mamba / linear-attention hybrids (block-size alignment to the "
                               f"state page) are not modelled")
        if engine == V0 or not hybrid:
            layouts.append(_Layout(page, len(kv), (FULL,)))
        else:
            size, groups = kv_cache_groups(kv, rule)
            layouts.append(_Layout(page, size, groups))
    if pp > 1 and len({layout.groups for layout in layouts}) > 1:
        raise VllmLogError("pipeline stages with different KV-cache groups are not modelled")
    return layouts


def bytes_per_block(spec: ModelSpec, block_size: int = DEFAULT_BLOCK_SIZE, kv_cache_dtype=None, *,
                    tp: int = 1, pp: int = 1, engine: str = V1, version=None) -> int:
    """Bytes one block takes on the busiest rank (the largest over PP stages).

    >>> from kvlib import load_model
    >>> bytes_per_block(load_model("llama-3.1-8b"))               # 32 layers * 65,536 B
    2097152
    >>> bytes_per_block(load_model("deepseek-v3"))                # 61 * 16 * 576 * 2
    1124352
    """
    page = layer_page_bytes(spec, block_size, kv_cache_dtype, tp=tp)
    return max(layout.bytes_per_block for layout in _layouts(spec, engine, pp, _group_rule(_version(version)), page))


def _group_rule(version) -> str:
    if version is None:
        return "1.5"
    if version < (0, 11, 0):
        return "smallest"
    if version < (0, 15, 0):
        return "1.25"
    return "1.5"


def _blocks_per_request(groups, spec: ModelSpec, bs: int, mml: int, f_tokens) -> int | None:
    total = 0
    for kind in groups:
        if kind == FULL:
            total += -(-mml // bs)
        elif kind == SLIDING:
            if f_tokens is None:
                return None
            total += -(-min(spec.sliding_window - 1 + f_tokens, mml) // bs) + 1
        elif kind == CHUNKED:
            if f_tokens is None:
                return None
            total += -(-min(spec.attention_chunk_size + f_tokens, mml) // bs)
    return total


def _fmt2(x: float) -> Decimal:
    return Decimal(f"{x:.2f}")


@dataclass(frozen=True)
class _Scenario:
    engine: str
    token_formula: str      # 'blocks' (N*bs), 'floor' ((N//g)*bs), 'concurrency' (int(c*mml))
    group_rule: str
    f_multiplier: int
    layouts: tuple
    bs: int
    mml: int | None
    f_tokens: int | None
    spec: ModelSpec = field(compare=False, repr=False)

    @property
    def b_max(self) -> int:
        return max(layout.bytes_per_block for layout in self.layouts)

    @property
    def b_min(self) -> int:
        return min(layout.bytes_per_block for layout in self.layouts)

    @property
    def groups(self) -> tuple:
        return self.layouts[0].groups

    def blocks(self, lo: int, hi: int) -> tuple[int, int]:
        return lo // self.b_max, hi // self.b_min

    def bpr(self) -> int | None:
        if self.mml is None:
            return None
        f = None if self.f_tokens is None else self.f_tokens * self.f_multiplier
        return _blocks_per_request(self.groups, self.spec, self.bs, self.mml, f)

    def tokens(self, n: int) -> int | None:
        if self.token_formula == "blocks":
            return n * self.bs
        if self.token_formula == "floor":
            return (n // len(self.groups)) * self.bs
        bpr = self.bpr()
        if bpr is None or bpr <= 0:
            return None
        return int(n / bpr * self.mml)

    def concurrency(self, n: int) -> float | None:
        if self.mml is None:
            return None
        if self.token_formula == "blocks":
            return n * self.bs / self.mml
        bpr = self.bpr()
        return None if bpr is None or bpr <= 0 else n / bpr

    def blocks_for_tokens(self, tokens: int) -> tuple[int, int] | None:
        """All N whose printed token figure is ``tokens`` (tokens(N) is non-decreasing)."""
        if self.tokens(0) is None:
            return None

        def first_at_least(target):
            lo, hi = 0, 1
            while self.tokens(hi) < target:
                lo, hi = hi, hi * 2
                if hi > 1 << 80:
                    return None
            while lo < hi:
                mid = (lo + hi) // 2
                if self.tokens(mid) < target:
                    lo = mid + 1
                else:
                    hi = mid
            return lo

        a = first_at_least(tokens)
        if a is None or self.tokens(a) != tokens:
            return None
        b = first_at_least(tokens + 1)
        return a, (b - 1 if b is not None else a)

    def describe(self) -> str:
        formula = {"blocks": "tokens = N x bs", "floor": "tokens = (N // groups) x bs",
                   "concurrency": "tokens = int(N / blocks_per_request x max_model_len)"}[self.token_formula]
        text = f"{self.engine.upper()}, {formula}"
        if len(self.groups) > 1:
            text += f", {len(self.groups)} KV-cache groups of {self.layouts[0].group_size} layers"
        return text


@dataclass(frozen=True)
class LogPrediction:
    """What vLLM should have printed for one engine start, given a model, and whether it did.

    Ranges are inclusive. ``agrees`` is None when the log prints nothing to
    compare (no available-memory figure, or no block/token count).
    """

    model: str
    engine: str | None
    block_size: int
    block_size_source: str          # 'log' | 'default' | 'cli'
    kv_cache_dtype: str
    kv_element_bytes: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    page_bytes: int
    bytes_per_block: int
    kv_cache_groups: int
    available_bytes_min: int | None
    available_bytes_max: int | None
    blocks_min: int | None
    blocks_max: int | None
    tokens_min: int | None
    tokens_max: int | None
    concurrency_min: float | None
    concurrency_max: float | None
    compared: str | None            # 'num_gpu_blocks' | 'gpu_kv_cache_tokens' | None
    logged: int | None
    agrees: bool | None
    error_blocks: int | None        # 0 inside the range, else signed distance to the nearest end
    error_tokens: int | None
    implied_available_bytes_min: int | None
    implied_available_bytes_max: int | None
    reason: str
    cause: str | None
    alternatives: tuple = ()
    scenarios: tuple = ()
    notes: tuple = ()
    derived_blocks_min: int | None = None   # blocks whose printed token figure is the logged one
    derived_blocks_max: int | None = None
    num_cpu_blocks_default_swap: int | None = None  # V0: 4 GiB swap space // bytes per block


def _resolve(start: EngineStart, spec: ModelSpec, block_size, kv_cache_dtype, tp, pp, version):
    notes = []
    if block_size is not None:
        bs, bs_source = block_size, "cli"
    elif start.block_size is not None:
        bs, bs_source = start.block_size, "log"
    else:
        bs, bs_source = DEFAULT_BLOCK_SIZE, "default"
        if spec.is_mla:
            notes.append("block size not printed: 16 assumed; MLA backends may force 64 (FlashMLA), "
                         "128 (CUTLASS MLA) or 32 (FlashInfer MLA)")
    kv = kv_cache_dtype if kv_cache_dtype is not None else (start.kv_cache_dtype or "auto")
    tp_used = tp if tp is not None else (start.tensor_parallel_size or 1)
    pp_used = pp if pp is not None else (start.pipeline_parallel_size or 1)
    if tp is None and start.tensor_parallel_size is None and start.num_ranks_reporting > 1:
        notes.append(f"{start.num_ranks_reporting} processes printed figures but the log shows no "
                     f"tensor_parallel_size; TP=1 assumed (pass tp / --tp)")
    v = _version(version) if version is not None else start.version_tuple
    return bs, bs_source, kv, tp_used, pp_used, v, notes


def _scenarios(start, spec, bs, kv, tp, pp, v, max_num_batched_tokens, *, mla_pad=None, hybrid=True):
    engines = [start.engine] if start.engine in (V0, V1) else [V0, V1]
    model_dtype = start.dtype
    out = []
    for engine in engines:
        pad = mla_pad
        if pad is None:
            pad = engine == V0 and v is not None and (0, 7, 2) <= v < (0, 8, 0)
        page = layer_page_bytes(spec, bs, kv, tp=tp, model_dtype=model_dtype, mla_pad_256=bool(pad))
        if engine == V0 or (start.num_gpu_blocks is not None and start.gpu_kv_cache_tokens is None):
            formulas = ["blocks"]
        elif v is not None:
            formulas = ["floor" if v < (0, 20, 0) else "concurrency"]
        elif start.combined_capacity_line:
            formulas = ["concurrency"]
        else:
            formulas = ["floor", "concurrency"]
        rules = [_group_rule(v)] if v is not None else ["1.5", "1.25", "smallest"]
        if v is None:
            mults = [1, 2]
        else:
            mults = [1] if v <= (0, 20, 99) else [2] if v >= (0, 33, 0) else [1, 2]
        seen = set()
        for rule in rules:
            layouts = tuple(_layouts(spec, engine, pp, rule, page, hybrid=hybrid))
            for formula in formulas:
                for mult in mults:
                    s = _Scenario(engine, formula, rule, mult, layouts, bs, start.max_model_len or None,
                                  max_num_batched_tokens, spec)
                    matters = _needs_f(layouts) and max_num_batched_tokens and start.max_model_len
                    key = (engine, formula, layouts, mult if matters else 0)
                    if key not in seen:
                        seen.add(key)
                        out.append(s)
    return out


def _needs_f(layouts) -> bool:
    return any(kind in (SLIDING, CHUNKED) for layout in layouts for kind in layout.groups)


@dataclass
class _Check:
    inside: bool
    error_blocks: int | None
    error_tokens: int | None


def _check(s: _Scenario, lo: int, hi: int, start: EngineStart) -> _Check | None:
    n_min, n_max = s.blocks(lo, hi)
    logged_blocks = start.num_gpu_blocks_computed or start.num_gpu_blocks
    if logged_blocks is not None:
        err = 0 if n_min <= logged_blocks <= n_max else (
            logged_blocks - n_max if logged_blocks > n_max else logged_blocks - n_min)
        return _Check(err == 0, err, None)
    tokens = start.gpu_kv_cache_tokens
    if tokens is None:
        return None
    t_min, t_max = s.tokens(n_min), s.tokens(n_max)
    if t_min is None:
        return None
    err_t = 0 if t_min <= tokens <= t_max else (tokens - t_max if tokens > t_max else tokens - t_min)
    span = s.blocks_for_tokens(tokens)
    err_b = None
    if span is not None:
        a, b = span
        err_b = 0 if (a <= n_max and b >= n_min) else (a - n_max if a > n_max else b - n_min)
    return _Check(err_t == 0, err_b, err_t)


def _evaluate(start, spec, lo, hi, scenarios):
    checks = [(s, _check(s, lo, hi, start)) for s in scenarios]
    checks = [(s, c) for s, c in checks if c is not None]
    if not checks:
        return None
    inside = [s for s, c in checks if c.inside]
    best = min(checks, key=lambda sc: (not sc[1].inside, abs(sc[1].error_blocks)
                                       if sc[1].error_blocks is not None else abs(sc[1].error_tokens)))
    return bool(inside), best[1], inside


def predict_from_log(start: EngineStart, spec: ModelSpec, *, block_size: int | None = None,
                     kv_cache_dtype: str | None = None, tp: int | None = None, pp: int | None = None,
                     version=None, max_num_batched_tokens: int | None = None) -> LogPrediction:
    """Predict the block/token range vLLM reports from the printed available GiB, and compare.

    Settings come from the arguments, else from the log (block size, kv
    dtype, TP, PP, version), else from vLLM's defaults (block size 16, 'auto'
    = the model's 16-bit dtype, TP = PP = 1). When the version is unknown the
    prediction spans every formula the line formats allow. Raises
    ``VllmLogError`` for settings that cannot apply to the model.

    Log 07's first run: 3.81 GiB printed, Llama 3.1 8B, 2 MiB per block, so
    N in [ceil(3.805 * 2^30) // 2^21, (ceil(3.815 * 2^30) - 1) // 2^21]:

    >>> from kvlib import load_model
    >>> from kvlib.vllm_log import parse_log
    >>> start = parse_log("Memory profiling results: total_gpu_memory=23.58GiB kv_cache_size=3.81GiB "
    ...                   "gpu_memory_utilization=0.90\\n# GPU blocks: 1952, # CPU blocks: 2048")[0]
    >>> p = predict_from_log(start, load_model("llama-3.1-8b"))
    >>> p.blocks_min, p.blocks_max, p.agrees
    (1948, 1953, True)
    """
    if not isinstance(start, EngineStart):
        raise VllmLogError(f"predict_from_log takes an EngineStart, not {type(start).__name__}")
    if not isinstance(spec, ModelSpec):
        raise VllmLogError(f"predict_from_log takes a ModelSpec, not {type(spec).__name__}")
    if max_num_batched_tokens is not None and (type(max_num_batched_tokens) is not int
                                               or max_num_batched_tokens < 1):
        raise VllmLogError(f"max_num_batched_tokens must be a positive integer, got {max_num_batched_tokens!r}")
    bs, bs_source, kv, tp_used, pp_used, v, notes = _resolve(start, spec, block_size, kv_cache_dtype,
                                                             tp, pp, version)
    scenarios = _scenarios(start, spec, bs, kv, tp_used, pp_used, v, max_num_batched_tokens)
    if start.engine is None:
        notes.append("engine not identified from the log: V0 and V1 formulas both allowed")
    if len({s.token_formula for s in scenarios}) > 1:
        notes.append("version not printed: the token figure may follow the pre-0.20 or the 0.20+ formula; "
                     "both allowed (pass version / --vllm-version)")
    if start.max_model_len is None and any(s.token_formula == "concurrency" for s in scenarios):
        notes.append("max_model_len not printed: no 0.20+ token or concurrency prediction")
    first = scenarios[0]
    b_max = max(s.b_max for s in scenarios)
    elem = 0 if spec.is_mla and str(kv).lower() in _MLA_PACKED else kv_element_bytes(kv, start.dtype)
    base = dict(model=spec.name, engine=start.engine, block_size=bs, block_size_source=bs_source,
                kv_cache_dtype=str(kv), kv_element_bytes=elem,
                tensor_parallel_size=tp_used, pipeline_parallel_size=pp_used,
                page_bytes=first.layouts[0].page_bytes, bytes_per_block=b_max,
                kv_cache_groups=len(first.groups),
                scenarios=tuple(s.describe() for s in scenarios))
    if start.num_gpu_blocks is None and start.gpu_kv_cache_tokens is not None:
        spans = [sp for sp in (s.blocks_for_tokens(start.gpu_kv_cache_tokens) for s in scenarios) if sp]
        if spans:
            base["derived_blocks_min"] = min(a for a, _ in spans)
            base["derived_blocks_max"] = max(b for _, b in spans)
    if start.engine == V0:
        base["num_cpu_blocks_default_swap"] = V0_SWAP_SPACE_BYTES // first.b_max

    implied = _implied_pool(start, scenarios)
    window = start.available_kv_cache_window()
    if window is None:
        reason = "the log prints no available-KV-memory figure, so there is nothing to predict from"
        if implied:
            reason += (f"; the logged count implies a pool of {format_gb_gib(implied[0])} to "
                       f"{format_gb_gib(implied[1])} per rank")
        return LogPrediction(**base, available_bytes_min=None, available_bytes_max=None,
                             blocks_min=None, blocks_max=None, tokens_min=None, tokens_max=None,
                             concurrency_min=None, concurrency_max=None, compared=None, logged=None,
                             agrees=None, error_blocks=None, error_tokens=None,
                             implied_available_bytes_min=implied[0] if implied else None,
                             implied_available_bytes_max=implied[1] if implied else None,
                             reason=reason, cause=None, notes=tuple(notes))
    lo, hi = window
    blocks = [s.blocks(lo, hi) for s in scenarios]
    n_min, n_max = min(b[0] for b in blocks), max(b[1] for b in blocks)
    tok = [(s.tokens(a), s.tokens(b)) for s, (a, b) in zip(scenarios, blocks)]
    tok = [t for t in tok if t[0] is not None]
    conc = [(s.concurrency(a), s.concurrency(b)) for s, (a, b) in zip(scenarios, blocks)]
    conc = [c for c in conc if c[0] is not None]
    pred = dict(available_bytes_min=lo, available_bytes_max=hi, blocks_min=n_min, blocks_max=n_max,
                tokens_min=min(t[0] for t in tok) if tok else None,
                tokens_max=max(t[1] for t in tok) if tok else None,
                concurrency_min=float(_fmt2(min(c[0] for c in conc))) if conc else None,
                concurrency_max=float(_fmt2(max(c[1] for c in conc))) if conc else None,
                implied_available_bytes_min=implied[0] if implied else None,
                implied_available_bytes_max=implied[1] if implied else None)

    if start.num_gpu_blocks_computed is not None or start.num_gpu_blocks is not None:
        compared = "num_gpu_blocks"
        logged = start.num_gpu_blocks_computed or start.num_gpu_blocks
    elif start.gpu_kv_cache_tokens is not None:
        compared, logged = "gpu_kv_cache_tokens", start.gpu_kv_cache_tokens
    else:
        compared, logged = None, None
    result = _evaluate(start, spec, lo, hi, scenarios) if compared else None
    window_text = (f"{start.available_kv_cache_text} GiB printed = {lo:,} to {hi:,} B "
                   f"({format_gb_gib(lo)} to {format_gb_gib(hi)})")
    if result is None:
        reason = (f"nothing to compare: the log prints no block count or token capacity for this start; "
                  f"from {window_text} vLLM would report {n_min:,} to {n_max:,} blocks")
        return LogPrediction(**base, **pred, compared=None, logged=None, agrees=None, error_blocks=None,
                             error_tokens=None, reason=reason, cause=None, notes=tuple(notes))
    agrees, best, _ = result
    unit = "blocks" if compared == "num_gpu_blocks" else "tokens"
    lo_pred = n_min if unit == "blocks" else pred["tokens_min"]
    hi_pred = n_max if unit == "blocks" else pred["tokens_max"]
    cause, alternatives = None, ()
    if agrees:
        reason = (f"agrees: logged {logged:,} {unit} lies in the predicted {lo_pred:,} to {hi_pred:,} "
                  f"from {window_text} at {b_max:,} B per block")
        conc_issue = _concurrency_mismatch(start, pred)
        if conc_issue:
            agrees, cause = False, conc_issue
            reason = f"does not agree: {conc_issue}"
    else:
        cause, alternatives = _explain(start, spec, lo, hi, best, dict(
            block_size=bs, bs_source=bs_source, kv=kv, tp=tp_used, pp=pp_used, v=v,
            f=max_num_batched_tokens, tp_given=tp is not None or start.tensor_parallel_size is not None,
            kv_given=kv_cache_dtype is not None or start.kv_cache_dtype not in (None, "auto"),
            b_max=b_max, n_min=n_min, n_max=n_max, logged=logged, unit=unit, scenarios=scenarios))
        reason = (f"does not agree: logged {logged:,} {unit}, predicted {lo_pred:,} to {hi_pred:,} "
                  f"from {window_text} at {b_max:,} B per block; likely cause: {cause}")
    return LogPrediction(**base, **pred, compared=compared, logged=logged, agrees=agrees,
                         error_blocks=best.error_blocks, error_tokens=best.error_tokens,
                         reason=reason, cause=cause, alternatives=alternatives, notes=tuple(notes))


def _concurrency_mismatch(start: EngineStart, pred) -> str | None:
    if start.max_concurrency_text is None or pred["concurrency_min"] is None:
        return None
    printed = Decimal(start.max_concurrency_text)
    lo, hi = Decimal(f"{pred['concurrency_min']:.2f}"), Decimal(f"{pred['concurrency_max']:.2f}")
    if lo <= printed <= hi:
        return None
    return (f"the count fits but the printed concurrency {printed}x lies outside the predicted "
            f"{lo}x to {hi}x: a different max_model_len or KV-cache grouping than assumed")


def _implied_pool(start: EngineStart, scenarios) -> tuple[int, int] | None:
    """Bytes the logged count implies: [N_lo * B, (N_hi + 1) * B - 1] over the scenarios."""
    spans = []
    for s in scenarios:
        if start.num_gpu_blocks is not None:
            n = start.num_gpu_blocks_computed or start.num_gpu_blocks
            span = (n, n)
        elif start.gpu_kv_cache_tokens is not None:
            span = s.blocks_for_tokens(start.gpu_kv_cache_tokens)
        else:
            span = None
        if span is not None:
            spans.append((span[0] * s.b_min, (span[1] + 1) * s.b_max - 1))
    if not spans:
        return None
    return min(a for a, _ in spans), max(b for _, b in spans)


def _explain(start, spec, lo, hi, best: _Check, ctx) -> tuple[str, tuple]:
    """The likeliest reason a log disagrees, plus other settings that would also fit."""
    n_mid = (ctx["n_min"] + ctx["n_max"]) / 2
    if best.error_blocks is not None:
        miss = abs(best.error_blocks)
    else:
        miss = -(-abs(best.error_tokens) // ctx["block_size"])
    if miss <= max(2, 0.005 * n_mid):
        return (f"the log's GiB figure rounded: the count lies {miss} block(s) outside the +/-0.005 GiB window, "
                f"so the pool was not sized from exactly the printed figure (a float rounded for printing, "
                f"memory reserved after the line, or num_gpu_blocks_override)"), ()

    def fits(**change) -> bool:
        params = dict(bs=ctx["block_size"], kv=ctx["kv"], tp=ctx["tp"], pp=ctx["pp"], mla_pad=None, hybrid=True)
        params.update(change)
        try:
            scenarios = _scenarios(start, spec, params["bs"], params["kv"], params["tp"], params["pp"], ctx["v"],
                                   ctx["f"], mla_pad=params["mla_pad"], hybrid=params["hybrid"])
            result = _evaluate(start, spec, lo, hi, scenarios)
        except (VllmLogError, ValueError, ZeroDivisionError):
            return False
        return bool(result and result[0])

    found = []   # (priority, text)
    for t in (1, 2, 4, 8, 16, 32):
        if t != ctx["tp"] and fits(tp=t):
            kvh = 1 if spec.is_mla else max(1, spec.num_kv_heads // t)
            found.append((0 if not ctx["tp_given"] else 3,
                          f"TP not accounted: with tensor_parallel_size={t} ({kvh} KV head(s) per rank) "
                          f"the logged count fits (pass --tp {t})"))
            break
    for p in (2, 4, 8):
        if p != ctx["pp"] and fits(pp=p):
            found.append((1, f"PP not accounted: with pipeline_parallel_size={p} (layers per stage "
                             f"{pp_layer_split(spec.num_layers, p)}) the logged count fits (pass --pp {p})"))
            break
    kv_options = ["fp8", "auto"] if spec.is_mla is False else ["fp8", "auto", "fp8_ds_mla"]
    for name in kv_options:
        if name != str(ctx["kv"]).lower() and fits(kv=name):
            found.append((1 if not ctx["kv_given"] else 3,
                          f"a different KV dtype: with kv_cache_dtype={name} the logged count fits "
                          f"(pass --kv-dtype {name})"))
            break
    if spec.is_mla:
        for pad in (True, False):
            if fits(mla_pad=pad):
                found.append((2, f"V0's 256-byte MLA entry padding {'applied' if pad else 'not applied'} "
                                 f"(576 -> 640 elements in 16-bit) makes the count fit"))
                break
    if start.engine != V0 and len(set(spec.layer_kinds) - {NO_KV}) > 1 and fits(hybrid=False):
        found.append((2, "the hybrid KV-cache manager disabled (sliding-window layers sized as full "
                         "attention) makes the count fit"))
    if ctx["bs_source"] != "log":
        for b in (8, 32, 64, 128, 256, 16):
            if b != ctx["block_size"] and fits(bs=b):
                found.append((2 if spec.is_mla else 4,
                              f"a different block size: with block_size={b} the logged count fits "
                              f"(pass --block-size {b})"))
                break
    found.sort(key=lambda pt: pt[0])
    primary = [text for prio, text in found if prio < 4]
    if primary:
        return primary[0], tuple(primary[1:]) + tuple(t for p, t in found if p >= 4)
    # Wrong model or dtype: how many bytes per block would the logged count imply?
    mid_bytes = (lo + hi) / 2
    if ctx["unit"] == "blocks":
        n_logged = ctx["logged"]
    else:
        spans = [s.blocks_for_tokens(ctx["logged"]) for s in ctx["scenarios"]]
        spans = [sp for sp in spans if sp is not None]
        n_logged = spans[0][0] if spans else None
    if n_logged:
        implied = mid_bytes / n_logged
        detail = (f"the logged {ctx['logged']:,} {ctx['unit']} imply about {implied:,.0f} B per block, "
                  f"{implied / ctx['b_max']:.2f}x the {ctx['b_max']:,} B this model gives")
    elif best.error_tokens is not None:
        detail = f"the prediction misses by {best.error_tokens:,} tokens"
    else:
        detail = "the logged count is zero"
    named = f"; the log's engine config names {start.model!r}" if start.model else ""
    text = (f"wrong model or dtype: {detail} at block size {ctx['block_size']} "
            f"({spec.name}, kv_cache_dtype={ctx['kv']}){named}")
    return text, tuple(t for _, t in found)


# --- forward ----------------------------------------------------------------------
@dataclass(frozen=True)
class PoolForecast:
    """The KV pool a user should expect before starting vLLM (one rank)."""

    version: str | None
    engine: str
    utilization: float
    total_gpu_memory_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    available_bytes: int
    available_gib_printed: str
    block_size: int
    bytes_per_block: int
    num_gpu_blocks: int
    gpu_kv_cache_tokens: int | None
    max_model_len: int | None
    max_concurrency: float | None
    assumptions: tuple = ()


def predict_pool(spec: ModelSpec, total_gpu_memory_bytes: int, *, activation_bytes: int,
                 weights_bytes: int | None = None, non_torch_bytes: int = 0, cudagraph_bytes: int | None = None,
                 version=None, engine: str | None = None, utilization: float | None = None,
                 tp: int = 1, pp: int = 1, block_size: int = DEFAULT_BLOCK_SIZE, kv_cache_dtype: str = "auto",
                 max_model_len: int | None = None, enforce_eager: bool = False,
                 max_num_batched_tokens: int | None = None) -> PoolForecast:
    """The pool, block count and token capacity vLLM should report, from GPU memory.

    ``R = ceil(T * u)`` (the float ``T * u`` before 0.14), ``A = floor(R - W
    - P - O - G)``, ``N = A // B``. ``T`` is total memory as CUDA reports it
    (not the label), ``u`` defaults to 0.90 before vLLM 0.20 and 0.92 from
    0.20 (``version``; None = newest). ``W`` defaults to the model's 16-bit
    weights over ``tp * pp`` ranks. ``G`` (CUDA-graph estimate) is 0 when
    eager or before 0.20; when not given from 0.20 on it is taken as 0 and
    the forecast is an upper bound. ``P`` (the activation peak) must be given:
    it depends on max_num_batched_tokens and max_num_seqs, not on the config.

    Log 12 forwards (V0, 79.19 GiB, u 0.90, weights 12.55 GiB, non-torch
    0.16 GiB, activation 2.38 GiB, Llama 2 7B at 8 MiB per block): A is
    56.18 GiB, 56.18 x 128 blocks per GiB = 7191.

    >>> from kvlib import load_model, GiB
    >>> f = predict_pool(load_model("llama-2-7b"), round(79.19 * GiB), version="0.8.1", engine="v0",
    ...                  weights_bytes=round(12.55 * GiB), non_torch_bytes=round(0.16 * GiB),
    ...                  activation_bytes=round(2.38 * GiB))
    >>> f.available_gib_printed, f.num_gpu_blocks
    ('56.18', 7191)
    """
    for name, value in (("total_gpu_memory_bytes", total_gpu_memory_bytes), ("activation_bytes", activation_bytes),
                        ("non_torch_bytes", non_torch_bytes)):
        if type(value) is not int or value < 0:
            raise VllmLogError(f"{name} must be a non-negative integer number of bytes, got {value!r}")
    v = _version(version)
    assumptions = []
    if engine is None:
        engine = V0 if v is not None and v < (0, 8, 0) else V1
        assumptions.append(f"engine {engine.upper()} (from the version; pass engine= to choose)")
    if engine not in (V0, V1):
        raise VllmLogError(f"engine must be 'v0' or 'v1', got {engine!r}")
    u = default_utilization(version) if utilization is None else utilization
    if not 0 < u <= 1:
        raise VllmLogError(f"utilization must be in (0, 1], got {u!r}")
    if weights_bytes is None:
        weights_bytes = -(-spec.weight_bytes(2) // (tp * pp))
        assumptions.append("weights: the model's 16-bit weights split evenly over tp x pp ranks")
    if cudagraph_bytes is None:
        cudagraph_bytes = 0
        if not enforce_eager and (v is None or v >= (0, 20, 0)):
            assumptions.append("CUDA-graph estimate not given: taken as 0, so the pool is an upper bound")
    if enforce_eager or (v is not None and v < (0, 20, 0)):
        cudagraph_bytes = 0
    if engine == V0 or (v is not None and v < (0, 14, 0)):
        requested = total_gpu_memory_bytes * u                      # float, as V0 / 0.10 did
    else:
        requested = math.ceil(total_gpu_memory_bytes * u)
    available = max(0, math.floor(requested - weights_bytes - activation_bytes - non_torch_bytes - cudagraph_bytes))
    layouts = _layouts(spec, engine, pp, _group_rule(v), layer_page_bytes(spec, block_size, kv_cache_dtype, tp=tp))
    b = max(layout.bytes_per_block for layout in layouts)
    n = available // b
    groups = layouts[0].groups
    formula = "blocks" if engine == V0 else ("concurrency" if v is None or v >= (0, 20, 0) else "floor")
    s = _Scenario(engine, formula, _group_rule(v), 2 if v is None or v >= (0, 33, 0) else 1, tuple(layouts),
                  block_size, max_model_len, max_num_batched_tokens, spec)
    tokens = s.tokens(n) if (formula != "concurrency" or max_model_len) else None
    conc = s.concurrency(n)
    if len(groups) > 1 and formula == "floor":
        assumptions.append(f"{len(groups)} KV-cache groups share the pool")
    printed = round(available / GiB, 2)
    return PoolForecast(
        version=version if isinstance(version, str) or version is None else ".".join(map(str, version)),
        engine=engine, utilization=u, total_gpu_memory_bytes=total_gpu_memory_bytes,
        requested_bytes=math.ceil(requested), weights_bytes=weights_bytes, activation_bytes=activation_bytes,
        non_torch_bytes=non_torch_bytes, cudagraph_bytes=cudagraph_bytes, available_bytes=available,
        available_gib_printed=(f"{printed:.2f}" if engine == V0 or (v is not None and v < (0, 14, 0))
                               else str(printed)),
        block_size=block_size, bytes_per_block=b, num_gpu_blocks=n, gpu_kv_cache_tokens=tokens,
        max_model_len=max_model_len, max_concurrency=float(_fmt2(conc)) if conc is not None else None,
        assumptions=tuple(assumptions))

