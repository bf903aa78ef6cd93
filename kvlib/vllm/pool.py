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
from .engine import DEFAULT_BLOCK_SIZE, V0, V1, VllmLogError, as_version, budget_rounds_up, default_utilization, \
    group_rule
from .layout import layer_page_bytes, stage_layouts
from .tokens import Scenario, fmt2

__all__ = ["PoolForecast", "predict_pool"]


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
