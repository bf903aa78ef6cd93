"""What depends on vLLM's engine (V0 or V1) and release: one rule each.

- ``parse_version`` reads '0.8.3rc2.dev224+g49c0d11ec' as (0, 8, 3);
- ``default_utilization(version)``: ``gpu_memory_utilization``'s default;
- ``budget_rounds_up(engine, version)``: whether the memory request is
  ``ceil(T * u)`` (V1 from 0.14) or the float ``T * u``;
- ``group_rule(version)``: how V1 groups hybrid layers into KV-cache groups;
- ``DEFAULT_BLOCK_SIZE`` and V0's default swap space;
- ``release_rules(version, engine)``: the forward pool's per-release rules
  (``kvlib.vllm.pool.forecast_pool``), one ``ReleaseRules`` per era, each
  rule with the vLLM source it comes from; ``batch_defaults`` (arg_utils).

Taught in ch04_pool_paging and ch08_vllm_lab.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..units import GiB

__all__ = ["V0", "V1", "VllmLogError", "DEFAULT_BLOCK_SIZE", "V0_SWAP_SPACE_BYTES", "parse_version",
           "as_version", "default_utilization", "budget_rounds_up", "group_rule", "ReleaseRules", "release_rules",
           "batch_defaults"]

V0, V1 = "v0", "v1"
DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE, every release 0.2-0.33
V0_SWAP_SPACE_BYTES = 4 * GiB  # V0's default swap_space: CPU blocks = 4 GiB // bytes per block


class VllmLogError(ValueError):
    """A vLLM log (or a figure taken from one) cannot be used; the message says why."""


def parse_version(text) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a vLLM version string, or None when it is not one.

    Pre-release and local parts are dropped: ``0.8.3rc2.dev224+g49c0d11ec``
    reads as (0, 8, 3).

    >>> parse_version("0.8.3rc2.dev224+g49c0d11ec"), parse_version("v0.10.1.1"), parse_version("main")
    ((0, 8, 3), (0, 10, 1), None)
    """
    if isinstance(text, tuple):
        return tuple(text[:3]) + (0,) * (3 - len(text[:3])) if all(type(x) is int for x in text) else None
    if not isinstance(text, str):
        return None
    match = re.match(r"\s*v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?", text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def as_version(version) -> tuple[int, int, int] | None:
    """``parse_version`` for a version a caller passed in: None stays None, anything else must parse."""
    if version is None:
        return None
    parsed = parse_version(version)
    if parsed is None:
        raise VllmLogError(f"not a vLLM version: {version!r} (expected e.g. '0.8.5')")
    return parsed


def default_utilization(version=None) -> float:
    """vLLM's default ``gpu_memory_utilization``: 0.90 before 0.20, 0.92 from 0.20.

    ``version`` is a string such as '0.8.5' or a tuple; None means the newest
    release (0.92). The one definition of the default: ``kvlib info``, the
    planner, the drills and ``predict_pool`` take theirs from here.

    >>> default_utilization("0.19.1"), default_utilization("0.20.2"), default_utilization()
    (0.9, 0.92, 0.92)
    """
    return release_rules(version).utilization


def budget_rounds_up(engine: str = V1, version=None) -> bool:
    """Whether vLLM requests ``ceil(T * u)`` bytes (V1 from 0.14; None = newest) or the float ``T * u``.

    >>> budget_rounds_up("v1", "0.13.0"), budget_rounds_up("v1", "0.14.0"), budget_rounds_up("v0")
    (False, True, False)
    """
    return engine == V1 and release_rules(version, V1).budget_rounds_up


def group_rule(version) -> str:
    """V1's rule for the KV-cache group size of hybrid models, by release (see ``layout.kv_cache_groups``).

    'smallest' through 0.10, '1.25' in 0.11-0.14, '1.5' from 0.15 (and when unknown).
    """
    v = as_version(version)
    if v is None:
        return "1.5"
    if v < (0, 11, 0):
        return "smallest"
    if v < (0, 15, 0):
        return "1.25"
    return "1.5"


# --- the forward pool's rules, release by release -------------------------------------------------------
@dataclass(frozen=True)
class ReleaseRules:
    """What one vLLM era does when it sizes the KV pool (``forecast_pool`` reads these; so does the backward path
    through ``default_utilization`` and ``budget_rounds_up``).

    Constants marked *calibrated* were measured on the fixture logs named (tests/fixtures/vllm_mem_logs); every
    other log is held out. None depends on a model's name.
    """

    era: str
    engine: str
    runner: str                     # 'v0' worker, 'v1' GPUModelRunner, 'v2' Model Runner V2 (dense models)
    utilization: float
    budget_rounds_up: bool
    subtracts_cudagraph: bool
    # torch peak: forward pass of max_num_batched_tokens, and the dummy sampler over max_num_seqs x vocab
    peak_rule: str                  # 'sum' (V0: one execute_model call) or 'max' (V1: two calls, forward freed)
    forward_factor: float           # calibrated: x dtype x tokens x (3 I/t + 2 h)
    sampler_bytes_per_logit: int
    non_torch_tp1: int
    non_torch_tp: int               # tp >= 2
    sources: tuple = ()


_MiB = 2**20
_SAMPLER_SORT = ("vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run: SamplingMetadata(temperature=0.5, "
                 "top_p=0.9, top_k=vocab-1) -> vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p: "
                 "logits.sort(); per logit 4 B float32 logits + 4 B sorted values + 8 B int64 indices = 16 B")
_BUDGET = ("vllm/v1/worker/utils.py request_memory: math.ceil(total_memory x gpu_memory_utilization) (0.14+); "
           "gpu_worker.py determine_available_memory: available = requested - non_kv (weights + torch peak "
           "increase + non-torch increase)")

_ERAS = (
    ReleaseRules("V0 <= 0.6.4", V0, "v0", 0.90, False, False, "sum", 0.828, 16, round(0.35 * GiB), round(2.10 * GiB),
                 ("vllm/worker/worker.py determine_num_available_blocks: total x util - peak torch - non-torch",
                  "non_torch_memory printed absolute in 0.6.4 (calibrated 0.35 GiB on bundled log 07)")),
    ReleaseRules("V0 0.6.5-0.6.x", V0, "v0", 0.90, False, False, "sum", 0.828, 16, round(1.79 * GiB),
                 round(2.10 * GiB),
                 ("vllm/worker/worker.py (PR #10511): total x util - weights - non_torch - activation peak",
                  "non_torch_memory absolute, CUDA context included (calibrated 1.79 GiB on mem-log 01)")),
    ReleaseRules("V0 0.7+", V0, "v0", 0.90, False, False, "sum", 0.828, 16, round(0.07 * GiB), round(2.10 * GiB),
                 ("vllm/worker/worker.py: non-torch measured as an increase over the start snapshot",)),
    ReleaseRules("V1 0.8-0.13", V1, "v1", 0.90, False, False, "max", 1.408, 16, round(0.07 * GiB), round(2.10 * GiB),
                 (_SAMPLER_SORT, "gpu_model_runner.py profile_run: _dummy_run(max_num_tokens) then "
                  "_dummy_sampler_run(hidden_states[logit_indices]) on the last PP rank")),
    ReleaseRules("V1 0.14-0.19", V1, "v1", 0.90, True, False, "max", 1.408, 16, round(0.07 * GiB), round(2.10 * GiB),
                 (_SAMPLER_SORT, _BUDGET, "0.19: CUDA-graph estimate printed, subtracted only with "
                  "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1")),
    ReleaseRules("V1 0.20-0.26", V1, "v1", 0.92, True, True, "max", 1.408, 16, round(0.07 * GiB), round(2.10 * GiB),
                 (_SAMPLER_SORT, _BUDGET, "vllm/config/cache.py gpu_memory_utilization: float = Field(default=0.92); "
                  "gpu_worker.py subtracts profile_cudagraph_memory() (env default 1)")),
    ReleaseRules("V1 0.27+ (Model Runner V2, dense)", V1, "v2", 0.92, True, False, "max", 1.408, 2,
                 round(0.07 * GiB), round(2.10 * GiB),
                 ("vllm/v1/worker/gpu/model_runner.py _dummy_sampler_run: 'During the initial memory profiling, "
                  "the sampler may skip top_k, top_p, and logprobs' -> logits only, model dtype (2 B)",
                  "Model Runner V2 default for dense models (PR #44443); no CUDA-graph estimate is subtracted",
                  "vllm/config/cache.py gpu_memory_utilization = 0.92")),
)


def release_rules(version=None, engine: str | None = None) -> ReleaseRules:
    """The forward pool's rules for a vLLM release (None = newest; V0 before 0.8 unless ``engine`` says).

    >>> release_rules("0.19.0").era, round(release_rules("0.6.5").non_torch_tp1 / GiB, 2)
    ('V1 0.14-0.19', 1.79)
    """
    v = as_version(version)
    if engine is None:
        engine = V0 if v is not None and v < (0, 8, 0) else V1
    if engine not in (V0, V1):
        raise VllmLogError(f"engine must be 'v0' or 'v1', got {engine!r}")
    if engine == V0:
        if v is not None and v <= (0, 6, 4):
            return _ERAS[0]
        return _ERAS[1] if v is not None and v < (0, 7, 0) else _ERAS[2]
    if v is None or v >= (0, 27, 0):
        return _ERAS[6]
    if v >= (0, 20, 0):
        return _ERAS[5]
    return _ERAS[4] if v >= (0, 14, 0) else _ERAS[3]


def batch_defaults(version, engine: str, gpu_memory_bytes: int, gpu_name: str = "", usage: str = "serve",
                   max_model_len: int | None = None) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM picks when neither is set.

    V1 (``vllm/engine/arg_utils.py`` ``get_batch_defaults``): on GPUs of at
    least 70 GiB that are not A100s, 1024 sequences and 8192 tokens for
    ``vllm serve`` (16384 for the offline ``LLM`` class); otherwise 256 and
    2048 (8192 offline). V0: 256 sequences; ``max(max_model_len, 2048)``
    tokens, or 2048 with chunked prefill, which V0 turns on by itself past a
    32K context. The sequences are capped at the tokens.

    >>> batch_defaults("0.19.0", "v1", round(79.19 * GiB), "H100")
    (1024, 8192)
    >>> batch_defaults("0.6.5", "v0", round(79.22 * GiB), max_model_len=8192)
    (256, 8192)
    """
    if usage not in ("serve", "llm"):
        raise VllmLogError(f"usage must be 'serve' or 'llm', got {usage!r}")
    if engine == V0:
        mnbt = 2048 if max_model_len is None or max_model_len > 32768 else max(max_model_len, 2048)
        return min(256, mnbt), mnbt
    big = gpu_memory_bytes >= 70 * GiB and "a100" not in gpu_name.lower()
    mns, mnbt = (1024, 16384 if usage == "llm" else 8192) if big else (256, 8192 if usage == "llm" else 2048)
    return min(mns, mnbt), mnbt


