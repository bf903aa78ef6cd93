"""Forward: the KV pool vLLM should report, from GPU memory, before starting it.

The recipe at the end of ``notes/vllm-kv-accounting.md``::

    R = ceil(T * u)      (V0 and V1 before 0.14: the float T * u)
    A = floor(R - W - P - O - G)
    N = A // B

with T the total memory CUDA reports, u the utilization (``default_utilization``:
0.90 before vLLM 0.20, 0.92 from 0.20), W weights on the rank, P the
activation peak, O the non-torch increase, G the CUDA-graph estimate (0 when
eager, and before 0.20). ``A`` is ``kvlib.formulas.kv_pool_bytes`` with
``round_budget_up = budget_rounds_up(engine, version)``.

Taught in ch04_pool_paging and ch08_vllm_lab.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import formulas
from ..formulas import kv_pool_bytes
from ..spec import ModelSpec
from ..units import GiB
from .engine import DEFAULT_BLOCK_SIZE, V0, V1, VllmLogError, as_version, batch_defaults, budget_rounds_up, \
    default_utilization, group_rule, release_rules
from .layout import layer_page_bytes, pp_layer_split, stage_layouts
from .tokens import Scenario, fmt2

__all__ = ["PoolForecast", "predict_pool", "PoolPart", "Forecast", "forecast_pool", "forward_peak_bytes"]


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
    v = as_version(version)
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
    layouts = stage_layouts(spec, engine, pp, group_rule(v), layer_page_bytes(spec, block_size, kv_cache_dtype, tp=tp))
    b = max(layout.bytes_per_block for layout in layouts)
    n = available // b
    groups = layouts[0].groups
    formula = "blocks" if engine == V0 else ("concurrency" if v is None or v >= (0, 20, 0) else "floor")
    s = Scenario(engine, formula, group_rule(v), 2 if v is None or v >= (0, 33, 0) else 1, tuple(layouts),
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
        available_gib_printed=(str(printed) if rounds_up else f"{printed:.2f}"),
        block_size=block_size, bytes_per_block=b, num_gpu_blocks=n, gpu_kv_cache_tokens=tokens,
        max_model_len=max_model_len, max_concurrency=float(fmt2(conc)) if conc is not None else None,
        assumptions=tuple(assumptions))


# --- forwards from the model alone: every part from vLLM's own rules --------------------------------------
@dataclass(frozen=True)
class PoolPart:
    """One term of ``available = requested - weights - torch peak - non-torch - CUDA graphs``."""

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
    parts: tuple                   # PoolPart: weights, torch peak, non-torch, CUDA graphs
    available_bytes: int           # may be negative: then the model does not fit
    available_low: int
    available_high: int
    block_size: int
    bytes_per_block: int
    num_gpu_blocks: int
    gpu_kv_cache_tokens: int       # blocks x block size
    weights_scheme: str

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


CUDAGRAPH_PER_LAYER = (round(0.022 * GiB), round(0.025 * GiB), round(0.034 * GiB))   # low, typical, high


def forecast_pool(model, total_gpu_memory_bytes: int, *, version=None, engine: str | None = None, tp: int = 1,
                  pp: int = 1, utilization: float | None = None, max_num_seqs: int | None = None,
                  max_num_batched_tokens: int | None = None, weights_bytes: int | None = None,
                  gpu_name: str = "", usage: str = "serve", max_model_len: int | None = None,
                  enforce_eager: bool = False, kv_cache_dtype: str = "auto", block_size: int = DEFAULT_BLOCK_SIZE,
                  config: dict | None = None, stage: int | None = None) -> Forecast:
    """vLLM's available KV memory and tokens on one rank, before it starts, part by part.

    ``available = ceil(T x u) - W - P - O - G`` (the float ``T x u`` before
    0.14), with the rules of the release (``engine.release_rules``): W the
    weights as stored (``kvlib.weights.stored_weights``; ``weights_bytes``, a
    measured figure, overrides), P the torch peak of the profiling run (the
    forward over max_num_batched_tokens and the dummy sampler over
    max_num_seqs x vocab: their sum in V0, the larger in V1, per GPU, not
    divided by tp), O the non-torch increase by tp, G the CUDA-graph estimate
    where the release subtracts it. With pipeline parallelism the stage with
    the least memory left sizes the pool (``stage`` picks one).

    Mem-log 14 (vLLM 0.19.0, H100 79.19 GiB, u 0.95, Llama 3.1 8B, PP2) printed 66.54 GiB on stage 0:

    >>> f = forecast_pool("llama-3.1-8b", round(79.19 * GiB), version="0.19.0", utilization=0.95, pp=2, stage=0,
    ...                   gpu_name="H100", max_model_len=8192)
    >>> round(f.available_bytes / GiB, 2)
    66.55
    """
    from ..config import load_model
    from ..weights import config_dict, stored_weights
    if type(total_gpu_memory_bytes) is not int or total_gpu_memory_bytes <= 0:
        raise VllmLogError(f"total_gpu_memory_bytes must be a positive integer, got {total_gpu_memory_bytes!r}")
    for name, value in (("tp", tp), ("pp", pp)):
        if type(value) is not int or value < 1:
            raise VllmLogError(f"{name} must be a positive integer, got {value!r}")
    spec = load_model(model)
    config = config if config is not None else config_dict(model)
    rules = release_rules(version, engine)
    u = rules.utilization if utilization is None else utilization
    if not 0 < u <= 1:
        raise VllmLogError(f"utilization must be in (0, 1], got {u!r}")
    mns, mnbt = batch_defaults(version, rules.engine, total_gpu_memory_bytes, gpu_name, usage, max_model_len)
    mnbt = mnbt if max_num_batched_tokens is None else max_num_batched_tokens
    mns = min(mns, mnbt) if max_num_seqs is None else max_num_seqs
    if stage is None:
        stages = [forecast_pool(spec, total_gpu_memory_bytes, version=version, engine=engine, tp=tp, pp=pp,
                                utilization=utilization, max_num_seqs=mns, max_num_batched_tokens=mnbt,
                                weights_bytes=weights_bytes, gpu_name=gpu_name, usage=usage,
                                max_model_len=max_model_len, enforce_eager=enforce_eager,
                                kv_cache_dtype=kv_cache_dtype, block_size=block_size, config=config or {}, stage=s)
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
    last = stage == pp - 1
    fwd = forward_peak_bytes(spec, mnbt, tp, rules.forward_factor)
    sampler = mns * spec.vocab_size * rules.sampler_bytes_per_logit if last else 0
    peak = fwd + sampler if rules.peak_rule == "sum" else max(fwd, sampler)
    parts.append(PoolPart("torch peak", peak, int(peak * 0.75), int(peak * 1.25),
                          f"forward {mnbt:,} tokens {fwd / GiB:.2f} GiB, sampler {mns:,} x {spec.vocab_size:,} x "
                          f"{rules.sampler_bytes_per_logit} B {sampler / GiB:.2f} GiB, {rules.peak_rule}",
                          rules.sources[0]))
    o = rules.non_torch_tp1 if tp == 1 else rules.non_torch_tp
    # the spread the fixture logs show: 0.06-0.32 GiB at tp 1, 2.10-2.13 GiB at tp >= 2
    low, high = (o // 2, o + round(0.25 * GiB)) if tp == 1 else (int(o * 0.9), int(o * 1.1))
    what = "cuBLAS/allocator" if tp == 1 else "NCCL and custom all-reduce buffers"
    parts.append(PoolPart("non-torch", o, low, high, f"tp {tp}: {what}",
                          "gpu_worker.py: non-torch increase = CUDA memory in use - torch reserved, vs the snapshot"))
    g = 0
    if rules.subtracts_cudagraph and not enforce_eager:
        layers = pp_layer_split(spec.num_layers, pp)[stage]
        lo, typ, hi = (layers * c for c in CUDAGRAPH_PER_LAYER)
        parts.append(PoolPart("CUDA graphs", typ, lo, hi, f"{layers} layers x 0.025 GiB (0.022-0.034)",
                              "gpu_model_runner.py profile_cudagraph_memory, subtracted from 0.20"))
        g = typ
    else:
        parts.append(PoolPart("CUDA graphs", 0, 0, 0, "not subtracted in this release" if not enforce_eager
                              else "eager: no graphs", "gpu_worker.py determine_available_memory"))
    available = int(requested - sum(p.bytes for p in parts))
    low = int(requested - sum(p.high for p in parts))
    high = int(requested - sum(p.low for p in parts))
    layouts = stage_layouts(spec, rules.engine, pp, group_rule(as_version(version)),
                            layer_page_bytes(spec, block_size, kv_cache_dtype, tp=tp))
    b = layouts[min(stage, len(layouts) - 1)].bytes_per_block
    n = max(0, available) // b
    return Forecast(era=rules.era, version=None if version is None else str(version), tp=tp, pp=pp, utilization=u,
                    max_num_seqs=mns, max_num_batched_tokens=mnbt, requested_bytes=math.ceil(requested),
                    parts=tuple(parts), available_bytes=available, available_low=low, available_high=high,
                    block_size=block_size, bytes_per_block=b, num_gpu_blocks=n,
                    gpu_kv_cache_tokens=n * block_size,
                    weights_scheme=scheme)
