"""Forward: the KV pool vLLM should report, from GPU memory, before starting it.

Estimate-based sizing (``gpu_worker.py`` ``determine_available_memory``, every release through 0.33)::

    R = ceil(T * u)      (V0 and V1 before 0.14: the float T * u)
    A = floor(R - W - P - O - G)
    N = A // B

with T the total memory CUDA reports, u the utilization (``default_utilization``:
0.90 before vLLM 0.20, 0.92 from 0.20), W weights on the rank, P the
activation peak, O the non-torch increase, G the CUDA-graph estimate (0 when
eager, before 0.20, and on Model Runner V2 before 0.29). ``A`` is
``kvlib.formulas.kv_pool_bytes`` with ``round_budget_up = budget_rounds_up(engine, version)``.

Measured sizing (0.34's extensible KV cache, ``v1/worker/extensible_kv_cache.py``): u = 1.0 and, after
warmup and CUDA-graph capture, ``A = min(R - N, T - S - N - max(1 GiB, 0.75 P')) - P'`` with N the non-KV
memory in use (W + O + G), S what was in use before vLLM's first snapshot and P' the transient kept free
(``measured_kv_cache_bytes``; ``forecast_pool`` predicts every part).

Taught in ch04_pool_paging and ch08_vllm_lab.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import formulas
from ..formulas import kv_pool_bytes
from ..spec import ModelSpec
from ..units import GiB
from .engine import V0, V1, VllmLogError, as_version, batch_defaults, budget_rounds_up, default_block_size, \
    default_utilization, group_rule, release_rules
from .layout import plan_layouts, pp_layer_split
from .tokens import Scenario, fmt2
from .window import in_flight_multiplier

__all__ = ["PoolForecast", "predict_pool", "PoolPart", "Forecast", "forecast_pool", "forward_peak_bytes",
           "sampler_peak_bytes", "measured_kv_cache_bytes"]


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
                 tp: int = 1, pp: int = 1, block_size: int | None = None, kv_cache_dtype: str = "auto",
                 max_model_len: int | None = None, enforce_eager: bool = False,
                 max_num_batched_tokens: int | None = None, async_scheduling: bool | None = None) -> PoolForecast:
    """The pool, block count and token capacity vLLM should report, from GPU memory.

    ``R = ceil(T * u)`` (the float ``T * u`` before 0.14), ``A = floor(R - W
    - P - O - G)``, ``N = A // B``. ``T`` is total memory as CUDA reports it
    (not the label), ``u`` defaults to 0.90 before vLLM 0.20 and 0.92 from
    0.20 (``version``; None = newest): this is estimate-based sizing, which
    0.34 keeps without its extensible KV cache (``forecast_pool`` models the
    measured pool). ``W`` defaults to the model's 16-bit
    weights over ``tp * pp`` ranks. ``G`` (CUDA-graph estimate) is 0 when
    eager or before 0.20; when not given from 0.20 on it is taken as 0 and
    the forecast is an upper bound. Sliding-window and chunked groups reserve
    the release's tokens in flight (``window.max_in_flight_tokens``; pass
    ``async_scheduling=False`` for an engine that schedules synchronously, as
    the CPU build does). ``P`` (the activation peak) must be given:
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
    v = as_version(version)
    assumptions = []
    if engine is None:
        engine = V0 if v is not None and v < (0, 8, 0) else V1
        assumptions.append(f"engine {engine.upper()} (from the version; pass engine= to choose)")
    if engine not in (V0, V1):
        raise VllmLogError(f"engine must be 'v0' or 'v1', got {engine!r}")
    u = default_utilization(version, extensible=False) if utilization is None else utilization
    block_size = default_block_size(version) if block_size is None else block_size
    if not 0 < u <= 1:
        raise VllmLogError(f"utilization must be in (0, 1], got {u!r}")
    if weights_bytes is None:
        weights_bytes = formulas.weight_bytes_per_gpu(spec.weight_bytes(2), tp * pp)
        assumptions.append("weights: the model's 16-bit weights split evenly over tp x pp ranks")
    if cudagraph_bytes is None:
        cudagraph_bytes = 0
        if not enforce_eager and (v is None or v >= (0, 20, 0)):
            assumptions.append("CUDA-graph estimate not given: taken as 0, so the pool is an upper bound")
    if enforce_eager or (v is not None and v < (0, 20, 0)):
        cudagraph_bytes = 0
    rounds_up = budget_rounds_up(engine, v)
    requested = math.ceil(total_gpu_memory_bytes * u) if rounds_up else total_gpu_memory_bytes * u
    available = max(0, kv_pool_bytes(total_gpu_memory_bytes, u, weights_bytes,
                                     activation_bytes + non_torch_bytes + cudagraph_bytes,
                                     round_budget_up=rounds_up))
    layouts, plan = plan_layouts(spec, engine, pp, group_rule(v), block_size=block_size, kv_cache_dtype=kv_cache_dtype,
                                 tp=tp, version=v)
    if plan is not None:        # a state hybrid's attention block grows to cover the state page (kvlib.vllm.hybrid)
        block_size = plan.block_size
    b = max(layout.bytes_per_block for layout in layouts)
    n = available // b
    groups = layouts[0].groups
    formula = "blocks" if engine == V0 else ("concurrency" if v is None or v >= (0, 20, 0) else "floor")
    f_mult = 1 if engine == V0 else in_flight_multiplier(v, pp=pp, async_scheduling=async_scheduling)
    s = Scenario(engine, formula, group_rule(v), f_mult, tuple(layouts), block_size, max_model_len,
                 max_num_batched_tokens, spec)
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
        available_gib_printed=(str(printed) if rounds_up else f"{printed:.2f}"),
        block_size=block_size, bytes_per_block=b, num_gpu_blocks=n, gpu_kv_cache_tokens=tokens,
        max_model_len=max_model_len, max_concurrency=float(fmt2(conc)) if conc is not None else None,
        assumptions=tuple(assumptions))


# --- forwards from the model alone: every part from vLLM's own rules --------------------------------------
@dataclass(frozen=True)
class PoolPart:
    """One term of ``available = requested - weights - torch peak - non-torch [- sampler state] - CUDA graphs
    [- margin]``."""

    name: str
    bytes: int
    low: int
    high: int
    rule: str
    source: str


@dataclass(frozen=True)
class Forecast:
    """The KV pool vLLM should give one rank, from the model, the GPU and the release (``forecast_pool``)."""

    era: str
    version: str | None
    tp: int
    pp: int
    utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    requested_bytes: int
    parts: tuple                   # PoolPart: weights, torch peak, non-torch, CUDA graphs (and margin, measured)
    available_bytes: int           # may be negative: then the model does not fit
    available_low: int
    available_high: int
    block_size: int
    bytes_per_block: int
    num_gpu_blocks: int
    gpu_kv_cache_tokens: int       # blocks x block size
    weights_scheme: str
    runner: str = "v1"             # 'v0', 'v1' (GPUModelRunner) or 'v2' (Model Runner V2)
    pool_rule: str = "estimate"    # 'estimate' (ceil(T x u) - parts) or 'measured' (0.34's extensible cache)
    checked: str = ""              # what the release's rules were checked against besides its source

    @property
    def fits(self) -> bool:
        return self.available_bytes > 0

    def part(self, name: str) -> PoolPart:
        return next(p for p in self.parts if p.name == name)


def forward_peak_bytes(spec, tokens: int, tp: int, factor: float, dtype_bytes: int = 2) -> int:
    """The dummy forward pass's torch peak: the widest activation, the MLP, over ``tokens`` tokens.

    A dense layer holds its gate/up output (2 I/t), the activated half (I/t)
    and the residual and hidden streams (2 h) at once; a MoE layer's fused
    kernel keeps top_k copies of each token's 3 I/t intermediate plus h.
    ``factor`` (per release, calibrated) covers the allocator's and the
    compiled graph's extra buffers.
    """
    h = spec.hidden_size
    if spec.num_experts:
        width = (spec.num_experts_per_tok or 1) * (3 * (spec.moe_intermediate_size or spec.intermediate_size) // tp + h) \
            + 2 * h
    else:
        width = 3 * spec.intermediate_size // tp + 2 * h
    return int(tokens * dtype_bytes * width * factor)


# Streaming multiprocessors: the Triton top-k/top-p kernel (0.17+) keeps one fp32 vocabulary row per program,
# min(next_pow2(min(SMs, rows)), SMs) programs (vllm/v1/sample/ops/topk_topp_triton.py, cached per device).
_SMS = (("h100", 132), ("h200", 132), ("b200", 148), ("b300", 148), ("a100", 108), ("l40s", 142), ("l4", 58),
        ("a10", 72), ("4090", 128), ("3090", 82), ("t4", 40), ("mi300", 304))


def _sm_count(gpu_name: str) -> int:
    name = gpu_name.lower().replace(" ", "").replace("-", "")
    return next((n for key, n in _SMS if key in name), 132)


def sampler_peak_bytes(spec, rows: int, rules, *, sampler: str | None = None, gpu_name: str = "") -> int:
    """The dummy sampler's torch peak on one rank: ``rows`` x vocab logits at the release's bytes per logit.

    ``rows`` is ``min(max_num_seqs, max_num_batched_tokens)`` (one logit row per dummy request); the logits
    are gathered whole on every TP rank, so the figure is not divided by TP. The bytes per logit of each
    sampler path are counted from what it holds at once (``engine.SAMPLER_BYTES_PER_LOGIT``): 38 for the
    0.8-0.16 sort, 14 for FlashInfer (0.8-0.11 when installed) and for the 0.17+ Triton kernel (plus its
    per-SM row buffer), 2 for Model Runner V2's logits, 6 with 0.33's fp32 pass.

    >>> from kvlib import load_model
    >>> from kvlib.vllm.engine import release_rules
    >>> sampler_peak_bytes(load_model("llama-3.1-8b"), 1024, release_rules("0.11.0")) == 1024 * 128256 * 38
    True
    """
    from .engine import SAMPLER_BYTES_PER_LOGIT
    path = sampler or rules.sampler
    if path not in SAMPLER_BYTES_PER_LOGIT:
        raise VllmLogError(f"sampler must be one of {sorted(SAMPLER_BYTES_PER_LOGIT)}, got {path!r}")
    vocab = spec.vocab_size or 0
    if path == "triton" and rows < 8:      # below 8 rows the PyTorch sort runs instead
        path = "sort"
    per_logit = SAMPLER_BYTES_PER_LOGIT[path]
    if path == "sort" and rows < 128:
        # torch's SortStable.cu: under 128 rows segmented_sort_pairs_by_full_sort holds two int2 (index, row)
        # arrays, 16 B, and cub's alternate key/value buffers 4 + 8, in place of the 8 + 12 above; one row sorts
        # alone (segmented_sort_large_segments), with buffers of a row's size only
        per_logit += (16 + 12) - (8 + 12) if rows > 1 else -(8 + 12)
    peak = rows * vocab * per_logit
    if path in ("triton", "fp32") and rows >= 8:     # 0.33's fp32 pass masks with the same Triton kernel
        sms = _sm_count(gpu_name)
        programs = min(sms, rows)
        peak += min(1 << (programs - 1).bit_length(), sms) * vocab * 4
    return peak


CUDAGRAPH_PER_LAYER = (round(0.022 * GiB), round(0.025 * GiB), round(0.034 * GiB))   # low, typical, high
# Measured pool (0.34, vllm/v1/worker/extensible_kv_cache.py): the margin kept beyond the transient peak, and the
# memory in use before vLLM's first snapshot (the CUDA context; with TP or PP > 1 also NCCL, initialised before
# the snapshot since 0.14), calibrated on the 'Free memory on device (F/T GiB) on startup' lines of mem-logs
# 11 (TP 1: 79.19 - 78.68 = 0.51 GiB), 08, 13, 14 (TP 2, TP 4, PP 2: 1.53, 1.55, 1.43 GiB).
KV_CACHE_MARGIN_FLOOR_BYTES = 1 << 30
KV_CACHE_MARGIN_FRACTION = 0.75
IN_USE_AT_START = {1: round(0.51 * GiB), 2: round(1.5 * GiB)}     # one GPU, several


def measured_kv_cache_bytes(*, requested: int, in_use_at_start: int, total: int, non_kv: int, transient: int,
                            torch_reserve_growth: int = 0) -> int:
    """0.34's ``measure_kv_cache_bytes`` in the forecast's terms (its arguments: ``init_free_memory`` =
    ``total - in_use_at_start``, ``free_memory + committed_bytes`` = ``init_free - non_kv``)::

        min(requested - non_kv, total - in_use_at_start - non_kv - max(1 GiB, 0.75 x transient))
            - max(transient, torch_reserve_growth)

    >>> measured_kv_cache_bytes(requested=80 * GiB, in_use_at_start=GiB // 2, total=80 * GiB, non_kv=16 * GiB,
    ...                         transient=2 * GiB) / GiB      # min(64, 63.5 - 1.5) - 2
    60.0
    """
    margin = max(KV_CACHE_MARGIN_FLOOR_BYTES, int(transient * KV_CACHE_MARGIN_FRACTION))
    headroom = total - in_use_at_start - non_kv
    return max(min(requested - non_kv, headroom - margin) - max(transient, torch_reserve_growth), 0)


def _is_hybrid(spec) -> bool:
    return any(kind not in ("full", "sliding", "chunked", "none") for kind in spec.layer_kinds)


def forecast_pool(model, total_gpu_memory_bytes: int, *, version=None, engine: str | None = None, tp: int = 1,
                  pp: int = 1, utilization: float | None = None, max_num_seqs: int | None = None,
                  max_num_batched_tokens: int | None = None, weights_bytes: int | None = None,
                  gpu_name: str = "", usage: str = "serve", max_model_len: int | None = None,
                  enforce_eager: bool = False, kv_cache_dtype: str = "auto", block_size: int | None = None,
                  config: dict | None = None, stage: int | None = None, runner: str | None = None,
                  sampler: str | None = None, extensible: bool | None = None) -> Forecast:
    """vLLM's available KV memory and tokens on one rank, before it starts, part by part.

    Estimate-based sizing (every release through 0.33; 0.34 with ``extensible=False``):
    ``available = ceil(T x u) - W - P - O - G`` (the float ``T x u`` before 0.14), with the rules of the
    release (``engine.release_rules``): W the weights as stored (``kvlib.weights.stored_weights``;
    ``weights_bytes``, a measured figure, overrides), P the torch peak of the profiling run (the forward
    over max_num_batched_tokens, and the dummy sampler over max_num_seqs x vocab as the release's sampler
    allocates it, ``sampler_peak_bytes``: their sum in V0, the larger in V1, per GPU, not divided by tp), O
    the non-torch increase by tp, G the CUDA-graph estimate where the release subtracts it.

    Measured sizing (0.34's extensible KV cache, on by default on CUDA): u = 1.0 and the pool is what
    ``measure_kv_cache_bytes`` leaves after warmup and capture: ``min(R - N, T - S - N - margin) - P'`` with
    N = W + O + G, S the memory in use before vLLM's snapshot, P' the transient kept free (the profiled peak
    plus the graph estimate, ``gpu_worker.py`` ``peak_activation_memory``), margin ``max(1 GiB, 0.75 P')``.

    ``runner`` defaults to the release's choice for the model's shape (``engine.default_runner``), ``sampler``
    to the release's path ('flashinfer' where FlashInfer is installed in 0.8-0.11), ``block_size`` to the
    release's (``default_block_size``). With pipeline parallelism the stage with the least memory left sizes
    the pool (``stage`` picks one).

    Mem-log 14 (vLLM 0.19.0, H100 79.19 GiB, u 0.95, Llama 3.1 8B, PP2) printed 66.54 GiB on stage 0:

    >>> f = forecast_pool("llama-3.1-8b", round(79.19 * GiB), version="0.19.0", utilization=0.95, pp=2, stage=0,
    ...                   gpu_name="H100", max_model_len=8192)
    >>> round(f.available_bytes / GiB, 2)
    66.55
    """
    from ..config import load_model
    from ..weights import config_dict, stored_weights
    from .engine import checked_version, default_block_size, default_runner
    if type(total_gpu_memory_bytes) is not int or total_gpu_memory_bytes <= 0:
        raise VllmLogError(f"total_gpu_memory_bytes must be a positive integer, got {total_gpu_memory_bytes!r}")
    for name, value in (("tp", tp), ("pp", pp)):
        if type(value) is not int or value < 1:
            raise VllmLogError(f"{name} must be a positive integer, got {value!r}")
    spec = load_model(model)
    config = config if config is not None else config_dict(model)
    v = checked_version(version)
    if runner is None and (engine or (V0 if v is not None and v < (0, 8, 0) else V1)) == V1:
        runner = default_runner(v, num_experts=spec.num_experts, hybrid=_is_hybrid(spec),
                                architectures=(config or {}).get("architectures") or ())
    rules = release_rules(version, engine, runner if engine != V0 else None)
    measured = rules.pool_rule == "measured" and extensible is not False
    if extensible and rules.pool_rule != "measured":
        raise VllmLogError(f"extensible: vLLM {version} has no extensible KV cache (from 0.34)")
    u_default = rules.utilization if measured or rules.utilization < 1 else 0.92
    u = u_default if utilization is None else utilization
    if not 0 < u <= 1:
        raise VllmLogError(f"utilization must be in (0, 1], got {u!r}")
    bs = default_block_size(version) if block_size is None else block_size
    mns, mnbt = batch_defaults(version, rules.engine, total_gpu_memory_bytes, gpu_name, usage, max_model_len)
    mnbt = mnbt if max_num_batched_tokens is None else max_num_batched_tokens
    mns = min(mns, mnbt) if max_num_seqs is None else max_num_seqs
    if stage is None:
        stages = [forecast_pool(spec, total_gpu_memory_bytes, version=version, engine=engine, tp=tp, pp=pp,
                                utilization=utilization, max_num_seqs=mns, max_num_batched_tokens=mnbt,
                                weights_bytes=weights_bytes, gpu_name=gpu_name, usage=usage,
                                max_model_len=max_model_len, enforce_eager=enforce_eager,
                                kv_cache_dtype=kv_cache_dtype, block_size=bs, config=config or {}, stage=s,
                                runner=runner, sampler=sampler, extensible=extensible)
                  for s in range(pp)]
        return min(stages, key=lambda f: f.available_bytes)
    requested = math.ceil(total_gpu_memory_bytes * u) if rules.budget_rounds_up else total_gpu_memory_bytes * u
    parts = []
    if weights_bytes is not None:
        if type(weights_bytes) is not int or weights_bytes <= 0:
            raise VllmLogError(f"weights_bytes must be a positive integer, got {weights_bytes!r}")
        w, scheme = weights_bytes, "measured"
        parts.append(PoolPart("weights", w, w, w, "measured figure given", "--weights"))
    else:
        sw = stored_weights(spec, config or {}, tp=tp, pp=pp, stage=stage)
        w, scheme = sw.bytes_per_rank, sw.scheme
        parts.append(PoolPart("weights", w, int(w * 0.99), int(w * 1.02),
                              f"as stored ({scheme}): " + ", ".join(f"{p.name} {p.bytes / GiB:.2f}" for p in sw.parts),
                              "gpu_model_runner.py load_model: 'Model loading took' = torch memory the modules hold"))
    peak, peak_low, peak_high, peak_rule = _torch_peak(spec, rules, stage == pp - 1, mns, mnbt, tp, sampler,
                                                       gpu_name)
    o = rules.non_torch_tp1 if tp == 1 else rules.non_torch_tp
    # the spread the fixture logs show: 0.06-0.32 GiB at tp 1, 2.10-2.13 GiB at tp >= 2
    o_low, o_high = (o // 2, o + round(0.25 * GiB)) if tp == 1 else (int(o * 0.9), int(o * 1.1))
    what = "cuBLAS/allocator" if tp == 1 else "NCCL and custom all-reduce buffers"
    non_torch = PoolPart("non-torch", o, o_low, o_high, f"tp {tp}: {what}",
                         "gpu_worker.py: non-torch increase = CUDA memory in use - torch reserved, vs the snapshot")
    state = []
    if rules.runner == "v2" and stage == pp - 1 and spec.vocab_size:
        # Model Runner V2 builds its Sampler after 'Model loading took' is measured, and keeps it
        b = mns * (spec.vocab_size + -(-spec.vocab_size // 32)) * 4
        state = [PoolPart("sampler state", b, b, b, f"{mns:,} requests x ({spec.vocab_size:,} + "
                                                   f"cdiv({spec.vocab_size:,}, 32)) x 4 B",
                          "v1/worker/gpu/sample/penalties.py PenaltiesState: output_bin_counts (max_num_reqs x vocab "
                          "int32) + prompt_bin_mask (max_num_reqs x cdiv(vocab, 32) int32), built in load_model "
                          "after the weights are measured")]
    layers = pp_layer_split(spec.num_layers, pp)[stage]
    g = g_low = g_high = 0
    if rules.subtracts_cudagraph and not enforce_eager:
        g_low, g, g_high = (layers * c for c in CUDAGRAPH_PER_LAYER)
        graphs = PoolPart("CUDA graphs", g, g_low, g_high, f"{layers} layers x 0.025 GiB (0.022-0.034)",
                          ("gpu_worker.py: the captured graph pool, measured after capture"
                           if measured else "profile_cudagraph_memory() estimate, subtracted by gpu_worker.py")
                          + f" ({'Model Runner V2, 0.29+' if rules.runner == 'v2' else 'V1 runner, 0.20+'})")
    else:
        why = "eager: no graphs" if enforce_eager else (
            "Model Runner V2 before 0.29: profile_cudagraph_memory returns 0" if rules.runner == "v2"
            else "not subtracted in this release")
        graphs = PoolPart("CUDA graphs", 0, 0, 0, why, "gpu_worker.py determine_available_memory")
    if measured:
        # the transient kept free starts at peak_activation_memory = profiled peak + graph estimate
        transient, t_low, t_high = peak + g, peak_low + g_low, int((peak_high + g_high) * 1.25)
        parts.append(PoolPart("torch peak", transient, t_low, t_high,
                              f"kept free after warmup: {peak_rule} + the CUDA-graph estimate {g / GiB:.2f} GiB "
                              "(torch's reservation growth over a sizing step assumed no larger)",
                              "extensible_kv_cache.py measure_kv_cache_blocks: max(transient peak, torch reserve "
                              "growth); gpu_worker.py: reserved_headroom_bytes = peak_activation_memory"))
        parts += [non_torch, *state, graphs]
        s = IN_USE_AT_START[1 if tp * pp == 1 else 2]
        non_kv, r = w + o + g + sum(p.bytes for p in state), math.ceil(requested)
        floor = max(KV_CACHE_MARGIN_FLOOR_BYTES, int(transient * KV_CACHE_MARGIN_FRACTION))
        bound = min(r - non_kv, total_gpu_memory_bytes - s - non_kv - floor)
        margin = r - non_kv - bound          # what the device-headroom bound takes beyond the requested one
        m_low = max(0, margin - round(0.2 * GiB) - (transient - t_low))
        m_high = margin + round(0.2 * GiB) + int(KV_CACHE_MARGIN_FRACTION * (t_high - transient))
        parts.append(PoolPart("margin", margin, m_low, m_high,
                              f"max(1 GiB, 0.75 x {transient / GiB:.2f} GiB) + {s / GiB:.2f} GiB in use before "
                              "vLLM's first snapshot (CUDA context" + (", NCCL" if tp * pp > 1 else "") + ")"
                              + ("" if u == 1 else "; the requested bound binds where it leaves less"),
                              "extensible_kv_cache.py measure_kv_cache_bytes: min(requested - non-KV in use, free "
                              "+ committed - max(KV_CACHE_MARGIN_FLOOR_BYTES, 0.75 x transient))"))
    else:
        parts += [PoolPart("torch peak", peak, peak_low, peak_high, peak_rule, rules.sources[0]), non_torch, *state,
                  graphs]
    available = int(requested - sum(p.bytes for p in parts))
    low = int(requested - sum(p.high for p in parts))
    high = int(requested - sum(p.low for p in parts))
    layouts, plan = plan_layouts(spec, rules.engine, pp, rules.group_rule, block_size=bs, kv_cache_dtype=kv_cache_dtype,
                                 tp=tp, version=v)
    if plan is not None:        # a state hybrid's attention block grows to cover the state page (kvlib.vllm.hybrid)
        bs = plan.block_size
    b = layouts[min(stage, len(layouts) - 1)].bytes_per_block
    n = max(0, available) // b
    era = rules.era if measured or rules.pool_rule == "estimate" else rules.era.replace(
        "extensible KV cache", "estimate-based sizing")
    return Forecast(era=era, version=None if version is None else str(version), tp=tp, pp=pp, utilization=u,
                    max_num_seqs=mns, max_num_batched_tokens=mnbt, requested_bytes=math.ceil(requested),
                    parts=tuple(parts), available_bytes=available, available_low=low, available_high=high,
                    block_size=bs, bytes_per_block=b, num_gpu_blocks=n, gpu_kv_cache_tokens=n * bs,
                    weights_scheme=scheme, runner=rules.runner, pool_rule="measured" if measured else "estimate",
                    checked=rules.checked)


def _torch_peak(spec, rules, last_stage: bool, mns: int, mnbt: int, tp: int, sampler, gpu_name: str):
    """(bytes, low, high, rule text) of the profiling run's torch peak on one rank."""
    from .engine import SAMPLER_BYTES_PER_LOGIT
    fwd = forward_peak_bytes(spec, mnbt, tp, rules.forward_factor)
    path = sampler or rules.sampler
    samp = sampler_peak_bytes(spec, mns, rules, sampler=path, gpu_name=gpu_name) if last_stage else 0
    # V1 keeps the dummy run's hidden states (max_num_batched_tokens x hidden, model dtype) through the sampler
    hidden = mnbt * spec.hidden_size * 2 if last_stage and rules.peak_rule == "max" else 0
    peak = fwd + samp if rules.peak_rule == "sum" else max(fwd, hidden + samp)
    low, high = int(peak * 0.75), int(peak * 1.25)
    if rules.flashinfer_sampler and sampler is None and last_stage:
        # FlashInfer installed (0.8-0.11 samples with it unasked): 14 B a logit, not the sort's 38
        alt = max(fwd, hidden + sampler_peak_bytes(spec, mns, rules, sampler="flashinfer", gpu_name=gpu_name))
        low = min(low, int(alt * 0.9))
    label = "sampler" if rules.engine == V0 else f"sampler ({path})"
    text = (f"forward {mnbt:,} tokens {fwd / GiB:.2f} GiB, {label} {mns:,} x {spec.vocab_size:,} x "
            f"{SAMPLER_BYTES_PER_LOGIT[path]} B {samp / GiB:.2f} GiB" + (f" + hidden states {hidden / GiB:.2f} GiB"
                                                                           if hidden else "")
            + f", {rules.peak_rule}")
    return peak, low, high, text
