"""Backward: from the available GiB a vLLM log printed to the block/token range it should report.

A printed "X GiB" available for the KV cache stands for whole bytes in
[(X - 0.005) * 2^30, (X + 0.005) * 2^30), so the block count is a *range*::

    N in [ lo // B , hi // B ]          B = bytes per block on the rank

Under pipeline parallelism each stage holds its own layers (``pp_layer_split``)
and prints its own available memory; the engine keeps the smallest stage's
block count. When the log says which rank printed which figure, each stage is
predicted from its own figure and its own block, ``N in [min_s lo_s // B_s,
min_s hi_s // B_s]`` -- as narrow as the rounding of the printed figures
allows; otherwise the smallest figure is set against every stage's block.

Bytes per block: ``kvlib.vllm.layout``; printed tokens and concurrency:
``kvlib.vllm.tokens``. Taught in ch08_vllm_lab, where vLLM's own figures are
checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from ..formulas import kv_heads_per_gpu
from ..spec import CHUNKED, NO_KV, SLIDING, ModelSpec
from ..units import format_gb_gib
from .engine import DEFAULT_BLOCK_SIZE, V0, V0_SWAP_SPACE_BYTES, V1, VllmLogError, as_version, \
    default_block_size, group_rule
from .hybrid import GPU, log_mamba_cache_mode, log_ssm_dtype_bytes, needs_plan, page_plan
from .layout import MLA_PACKED_BYTES, kv_element_bytes, layer_page_bytes, plan_layouts, pp_layer_split, stage_layouts
from .log import EngineStart, gib_window, rank_number
from .tokens import Scenario, fmt2
from .window import in_flight_multipliers

__all__ = ["LogPrediction", "predict_from_log"]


@dataclass(frozen=True)
class LogPrediction:
    """What vLLM should have printed for one engine start, given a model, and whether it did.

    Ranges are inclusive. ``agrees`` is None when the log prints nothing to
    compare (no available-memory figure, or no block/token count).
    """

    model: str
    engine: str | None
    block_size: int
    block_size_source: str          # 'log' | 'default' | 'cli' | 'cpu backend'
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
    stages: tuple = ()      # under PP, when the log says which rank printed what: one dict per stage
    path: str = "gpu"       # which backend's rules predicted it: 'gpu' (this module) or 'cpu' (kvlib.vllm.cpu)
    kv_cache_group_block_sizes: tuple | None = None  # CPU path: what 'kv cache group sizes (...)' should print
    hybrid: dict | None = None      # layers whose pages differ: vLLM's page plan (kvlib.vllm.hybrid.PagePlan.summary)


def _resolve(start: EngineStart, spec: ModelSpec, block_size, kv_cache_dtype, tp, pp, version):
    notes = []
    v = as_version(version) if version is not None else start.version_tuple
    if block_size is not None:
        bs, bs_source = block_size, "cli"
    elif start.block_size is not None:
        bs, bs_source = start.block_size, "log"
    elif v is not None:
        bs, bs_source = default_block_size(v), "default"     # 16 through 0.33, 64 from 0.34 (config/cache.py)
    else:
        bs, bs_source = DEFAULT_BLOCK_SIZE, "default"
        if start.engine != V0:      # V0 is gone before 0.34: 16 is its default in every release
            notes.append("version not printed: 16-token blocks assumed (vLLM's default through 0.33; 0.34 "
                         "takes 64)")
    if bs_source == "default" and spec.is_mla:
        notes.append(f"block size not printed: {bs} assumed; MLA backends may force 64 (FlashMLA), "
                     "128 (CUTLASS MLA) or 32 (FlashInfer MLA)")
    kv = kv_cache_dtype if kv_cache_dtype is not None else (start.kv_cache_dtype or "auto")
    tp_used = tp if tp is not None else (start.tensor_parallel_size or 1)
    pp_used = pp if pp is not None else (start.pipeline_parallel_size or 1)
    if tp is None and start.tensor_parallel_size is None and start.num_ranks_reporting > 1:
        notes.append(f"{start.num_ranks_reporting} processes printed figures but the log shows no "
                     f"tensor_parallel_size; TP=1 assumed (pass tp / --tp)")
    return bs, bs_source, kv, tp_used, pp_used, v, notes


def _scenarios(start, spec, bs, kv, tp, pp, v, max_num_batched_tokens, *, mla_pad=None, hybrid=True):
    engines = [start.engine] if start.engine in (V0, V1) else [V0, V1]
    if start.engine not in (V0, V1) and needs_plan(spec):
        engines = [V1]      # layers of different pages (state hybrids, per-layer geometry): V1 only
    model_dtype = start.dtype
    out = []
    for engine in engines:
        pad = mla_pad
        if pad is None:
            pad = engine == V0 and v is not None and (0, 7, 2) <= v < (0, 8, 0)
        page = None if needs_plan(spec) else layer_page_bytes(spec, bs, kv, tp=tp, model_dtype=model_dtype,
                                                               mla_pad_256=bool(pad))
        if engine == V0 or (start.num_gpu_blocks is not None and start.gpu_kv_cache_tokens is None):
            formulas = ["blocks"]
        elif v is not None:
            formulas = ["floor" if v < (0, 20, 0) else "concurrency"]
        elif start.combined_capacity_line:
            formulas = ["concurrency"]
        else:
            formulas = ["floor", "concurrency"]
        rules = [group_rule(v)] if v is not None else ["1.5", "1.25", "smallest"]
        mults = [1] if engine == V0 else list(in_flight_multipliers(v, pp=pp))   # window.py, by release
        seen = set()
        for rule in rules:
            if page is None:
                found, plan = plan_layouts(spec, engine, pp, rule, block_size=bs, kv_cache_dtype=kv, tp=tp,
                                           model_dtype=model_dtype, hybrid=hybrid, platform=GPU, version=v,
                                           ssm_dtype_bytes=log_ssm_dtype_bytes(start),
                                           mamba_cache_mode=log_mamba_cache_mode(start))
                layouts, block = tuple(found), plan.block_size
            else:
                layouts, block = tuple(stage_layouts(spec, engine, pp, rule, page, hybrid=hybrid)), bs
            for formula in formulas:
                for mult in mults:
                    s = Scenario(engine, formula, rule, mult, layouts, block, start.max_model_len or None,
                                  max_num_batched_tokens, spec, tp=tp)
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


def stage_windows(start: EngineStart, tp: int, pp: int) -> list | None:
    """[(lo, hi)] bytes per pipeline stage, from each stage's smallest printed figure; None when unknown.

    vLLM numbers ranks stage-major (rank = stage x tp + tp_rank), so rank r
    belongs to stage r // tp. Every stage must have printed a figure under a
    rank tag ('(VllmWorker rank=3 pid=7)'); otherwise the log cannot say
    which stage printed what and None is returned.

    >>> from kvlib.vllm import parse_log
    >>> log = "\\n".join(f"(VllmWorker rank={r} pid={r}) INFO 01-01 00:00:00 [gpu_worker.py:1] "
    ...                   f"Available KV cache memory: {x} GiB" for r, x in enumerate(["2.00", "1.50"]))
    >>> [w[0] for w in stage_windows(parse_log(log)[0], tp=1, pp=2)]     # ceil(1.995 x 2^30), ceil(1.495 x 2^30)
    [2142114939, 1605244027]
    """
    if pp <= 1:
        return None
    figures: dict = {}
    for tag, text in start.available_kv_cache_by_rank:
        rank = rank_number(tag)
        if rank is None or rank >= tp * pp:
            return None
        figures.setdefault(rank // tp, []).append(text)
    if set(figures) != set(range(pp)):
        return None
    return [gib_window(min(figures[stage], key=Fraction)) for stage in range(pp)]


def _blocks(s: Scenario, lo: int, hi: int, start: EngineStart) -> tuple[int, int]:
    return s.blocks(lo, hi, stage_windows(start, s.tp, len(s.layouts)))


def _check(s: Scenario, lo: int, hi: int, start: EngineStart) -> _Check | None:
    n_min, n_max = _blocks(s, lo, hi, start)
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


def _evaluate(start, lo, hi, scenarios):
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
    >>> from kvlib.vllm import parse_log
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
    plan = None
    if needs_plan(spec):
        plan = page_plan(spec, bs, kv, tp=tp_used, model_dtype=start.dtype, platform=GPU, version=v,
                         ssm_dtype_bytes=log_ssm_dtype_bytes(start), mamba_cache_mode=log_mamba_cache_mode(start))
        notes.extend(plan.notes)
    elem = 0 if spec.is_mla and str(kv).lower() in MLA_PACKED_BYTES else kv_element_bytes(kv, start.dtype)
    base = dict(model=spec.name, engine=start.engine, block_size=first.bs,
                block_size_source=bs_source if first.bs == bs else "hybrid alignment",
                kv_cache_dtype=str(kv), kv_element_bytes=elem,
                tensor_parallel_size=tp_used, pipeline_parallel_size=pp_used,
                page_bytes=first.layouts[0].page_bytes, bytes_per_block=b_max,
                kv_cache_groups=len(first.groups),
                scenarios=tuple(s.describe() for s in scenarios), hybrid=plan.summary() if plan else None)
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
    blocks = [_blocks(s, lo, hi, start) for s in scenarios]
    windows = stage_windows(start, tp_used, pp_used)
    if windows is not None:
        base["stages"] = tuple(
            {"stage": i, "num_layers": n, "available_kv_cache_bytes_min": w[0], "available_kv_cache_bytes_max": w[1],
             "bytes_per_block": layout.bytes_per_block, "blocks_min": w[0] // layout.bytes_per_block,
             "blocks_max": w[1] // layout.bytes_per_block}
            for i, (n, w, layout) in enumerate(zip(pp_layer_split(spec.num_layers, pp_used), windows,
                                                   scenarios[0].layouts)))
        notes.append(f"pipeline parallel: each of the {pp_used} stages predicted from its own printed figure and "
                     f"its own layers {pp_layer_split(spec.num_layers, pp_used)}; the engine keeps the smallest "
                     f"stage's block count")
    elif pp_used > 1:
        notes.append("pipeline parallel, but the log does not say which rank printed which figure: the smallest "
                     "figure is set against every stage's block, so the range covers every split")
    n_min, n_max = min(b[0] for b in blocks), max(b[1] for b in blocks)
    tok = [(s.tokens(a), s.tokens(b)) for s, (a, b) in zip(scenarios, blocks)]
    tok = [t for t in tok if t[0] is not None]
    conc = [(s.concurrency(a), s.concurrency(b)) for s, (a, b) in zip(scenarios, blocks)]
    conc = [c for c in conc if c[0] is not None]
    pred = dict(available_bytes_min=lo, available_bytes_max=hi, blocks_min=n_min, blocks_max=n_max,
                tokens_min=min(t[0] for t in tok) if tok else None,
                tokens_max=max(t[1] for t in tok) if tok else None,
                concurrency_min=float(fmt2(min(c[0] for c in conc))) if conc else None,
                concurrency_max=float(fmt2(max(c[1] for c in conc))) if conc else None,
                implied_available_bytes_min=implied[0] if implied else None,
                implied_available_bytes_max=implied[1] if implied else None)

    if start.num_gpu_blocks_computed is not None or start.num_gpu_blocks is not None:
        compared = "num_gpu_blocks"
        logged = start.num_gpu_blocks_computed or start.num_gpu_blocks
    elif start.gpu_kv_cache_tokens is not None:
        compared, logged = "gpu_kv_cache_tokens", start.gpu_kv_cache_tokens
    else:
        compared, logged = None, None
    result = _evaluate(start, lo, hi, scenarios) if compared else None
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
            result = _evaluate(start, lo, hi, scenarios)
        except (VllmLogError, ValueError, ZeroDivisionError):
            return False
        return bool(result and result[0])

    found = []   # (priority, text)
    for t in (1, 2, 4, 8, 16, 32):
        if t != ctx["tp"] and fits(tp=t):
            kvh = 1 if spec.is_mla else kv_heads_per_gpu(spec.num_kv_heads, t)
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
