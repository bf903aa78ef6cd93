"""What depends on vLLM's engine (V0 or V1) and release: one rule each, from each release's own source.

- ``parse_version`` reads '0.8.3rc2.dev224+g49c0d11ec' as (0, 8, 3);
- ``BOUNDARIES``: the release table, 0.8 -> 0.34, each change with the vLLM file it is read from (every
  boundary was read in the released wheel of that version and of the one before it);
- ``release_rules(version, engine, runner)``: everything the forward pool and the printed figures follow in
  one release, folded from ``BOUNDARIES`` (V0 keeps its own three eras);
- ``default_utilization(version)``, ``default_block_size(version)``, ``budget_rounds_up(engine, version)``,
  ``group_rule(version)``, ``default_runner(version, ...)``, ``batch_defaults(...)``: one rule each;
- ``NEWEST_CHECKED_RELEASE``: the newest release whose source these rules were read from; a newer version gets
  its rules with an ``UncheckedReleaseWarning`` (never silently).

Taught in ch04_pool_paging and ch08_vllm_lab.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from ..errors import VllmLogError  # noqa: F401 -- raised here; kvlib.vllm.engine.VllmLogError stays importable
from ..units import GiB

__all__ = ["V0", "V1", "VllmLogError", "DEFAULT_BLOCK_SIZE", "V0_SWAP_SPACE_BYTES", "NEWEST_CHECKED_RELEASE",
           "UncheckedReleaseWarning", "Boundary", "BOUNDARIES", "parse_version", "as_version", "checked_version",
           "default_utilization", "default_block_size", "budget_rounds_up", "group_rule", "default_runner",
           "ReleaseRules", "release_rules", "batch_defaults"]

V0, V1 = "v0", "v1"
DEFAULT_BLOCK_SIZE = 16  # CacheConfig's default block through 0.33 (64 from 0.34: default_block_size)
V0_SWAP_SPACE_BYTES = 4 * GiB  # V0's default swap_space: CPU blocks = 4 GiB // bytes per block
NEWEST_CHECKED_RELEASE = "0.34.0"
_NEWEST = (0, 34, 0)


class UncheckedReleaseWarning(UserWarning):
    """A vLLM release newer than ``NEWEST_CHECKED_RELEASE``: kvlib applies that release's rules unchecked."""


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


def unchecked_release_message(version) -> str | None:
    """The one-line warning for a release past ``NEWEST_CHECKED_RELEASE``, or None when it was checked.

    >>> unchecked_release_message("0.35.1")
    "vLLM 0.35.1 is newer than 0.34.0, the newest release whose source kvlib's rules were read from: its figures follow 0.34.0's rules, unchecked"
    >>> unchecked_release_message("0.34.0") is None
    True
    """  # noqa: E501
    v = as_version(version)
    if v is None or v <= _NEWEST:
        return None
    return (f"vLLM {'.'.join(map(str, v))} is newer than {NEWEST_CHECKED_RELEASE}, the newest release whose source "
            f"kvlib's rules were read from: its figures follow {NEWEST_CHECKED_RELEASE}'s rules, unchecked")


def checked_version(version) -> tuple[int, int, int] | None:
    """``as_version``, warning (``UncheckedReleaseWarning``) when the release is newer than kvlib has read."""
    v = as_version(version)
    message = unchecked_release_message(v)
    if message is not None:
        warnings.warn(UncheckedReleaseWarning(message), stacklevel=3)
    return v


# --- the release table -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Boundary:
    """One release where V1's rules change: the fields that change, and the file of that release they are read
    from (paths under ``vllm/``; ``v1/worker/gpu/`` is Model Runner V2)."""

    version: tuple
    changes: dict
    source: str

    @property
    def release(self) -> str:
        return ".".join(map(str, self.version))


# Field meanings (ReleaseRules below). Read from the released wheels' Python files, each boundary against the
# release before it; where the course's earlier notes or the issue that asked for this table dated a change
# differently, the source's date is the one here (docs/engine.md lists those).
BOUNDARIES = (
    Boundary((0, 8, 0), dict(
        utilization=0.90, budget_rounds_up=False, v1_graphs=False, v2_graphs=False, v1_sampler="sort",
        v2_sampler=None, flashinfer_sampler=True, group_rule="smallest", v2_default="none",
        in_flight="batched", extra_retained=False, token_formula="floor", block_size=16, pool_rule="estimate",
        batch_rule="h100-name", planning="v1/core/kv_cache_utils.py"),
        "V1 the default engine; config.py gpu_memory_utilization = 0.9; v1/worker/gpu_model_runner.py "
        "_dummy_sampler_run (top_k = vocab - 1, top_p = 0.9) -> v1/sample/ops/topk_topp_sampler.py: FlashInfer "
        "when installed, else apply_top_k_top_p's full sort; engine/arg_utils.py: max_num_seqs 1024, 8,192 "
        "batched tokens ('h100'/'h200' in the device name) else 2,048; kv_cache_utils.py: groups of the "
        "smallest layer bucket"),
    Boundary((0, 8, 5), dict(batch_rule="70GiB"),
             "engine/arg_utils.py: 1,024 sequences and 8,192 tokens on GPUs of >= 70 GiB, else 256 and 2,048"),
    Boundary((0, 9, 0), dict(batch_rule="70GiB-not-a100"),
             "engine/arg_utils.py: the >= 70 GiB defaults exclude A100s"),
    Boundary((0, 12, 0), dict(group_rule="1.25", flashinfer_sampler=False, v2_sampler="logits"),
             "v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size: group size = the largest bucket "
             "when it is < 1.25 x the smallest; v1/sample/ops/topk_topp_sampler.py: FlashInfer sampling only "
             "with VLLM_USE_FLASHINFER_SAMPLER=1; Model Runner V2 (v1/worker/gpu/model_runner.py) opt-in with "
             "VLLM_USE_V2_MODEL_RUNNER=1: its dummy sampler computes the logits only, no graph estimate"),
    Boundary((0, 14, 0), dict(budget_rounds_up=True),
             "v1/worker/utils.py request_memory: math.ceil(total_memory x gpu_memory_utilization)"),
    Boundary((0, 17, 0), dict(v1_sampler="triton"),
             "v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p: the Triton kernel (topk_topp_triton.py, "
             "logits masked in place) for >= 8 rows, no sort"),
    Boundary((0, 18, 0), dict(group_rule="1.5"),
             "v1/core/kv_cache_utils.py: the group-size threshold becomes 1.5 x the smallest bucket"),
    Boundary((0, 20, 0), dict(utilization=0.92, v1_graphs=True, token_formula="concurrency"),
             "config/cache.py gpu_memory_utilization = Field(default=0.92); envs.py "
             "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default '1': gpu_worker.py subtracts "
             "gpu_model_runner.py profile_cudagraph_memory() (Model Runner V2's returns 0); "
             "v1/core/kv_cache_utils.py: tokens printed = int(concurrency x max_model_len)"),
    Boundary((0, 24, 0), dict(v2_default="architectures"),
             "config/vllm.py use_v2_model_runner: Model Runner V2 by default for DEFAULT_V2_MODEL_RUNNER_"
             "ARCHITECTURES (LlamaForCausalLM, MistralForCausalLM, Qwen3ForCausalLM, DeepseekV2ForCausalLM, "
             "Qwen2MoeForCausalLM, GraniteMoeForCausalLM)"),
    Boundary((0, 25, 0), dict(v2_default="dense"),
             "config/vllm.py _is_default_v2_model_runner_model: every generating model that is not MoE, hybrid "
             "or attention-free (and the listed MoE architectures)"),
    Boundary((0, 26, 0), dict(in_flight="concurrent-batches"),
             "config/vllm.py max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens (2 under "
             "async scheduling, on by default on GPU); v1/kv_cache_interface.py sliding-window and chunked "
             "specs reserve for it"),
    Boundary((0, 28, 0), dict(extra_retained=True, batch_rule="160GiB"),
             "v1/kv_cache_interface.py SlidingWindowSpec: + extra_retained_tokens inside the min "
             "(max(0, num_prefill_lookahead_tokens - 1), 0 without speculative decoding); engine/arg_utils.py: "
             ">= 160 GiB GPUs (B200, B300) default to 16,384 batched tokens"),
    Boundary((0, 29, 0), dict(v2_default="all", v2_graphs=True),
             "config/vllm.py use_v2_model_runner: Model Runner V2 for every model it supports; "
             "v1/worker/gpu/model_runner.py profile_cudagraph_memory estimates graph memory, gpu_worker.py "
             "subtracts it"),
    Boundary((0, 33, 0), dict(v2_sampler="fp32", batch_rule="160GiB-not-gb10",
                              planning="v1/core/kv_cache_planning.py"),
             "v1/worker/gpu/model_runner.py _dummy_sampler_run: a second pass with "
             "SamplingParams.for_sampler_warmup() pays for the fp32 logits pipeline; engine/arg_utils.py: GB10 "
             "excluded from the >= 70 GiB tier; grouping and sizing move to v1/core/kv_cache_planning.py"),
    Boundary((0, 34, 0), dict(utilization=1.0, block_size=64, pool_rule="measured", v2_default="only"),
             "config/cache.py DEFAULT_BLOCK_SIZE = 64 and resolved_gpu_memory_utilization: 1.0 with the "
             "extensible KV cache (config/vllm.py _resolve_extensible_kv_cache: on by default on CUDA and ROCm, "
             "off with kv_cache_memory_bytes, num_gpu_blocks_override and some KV connectors); "
             "v1/worker/extensible_kv_cache.py measure_kv_cache_bytes sizes the pool after warmup and CUDA-graph "
             "capture; the V1 runner (v1/worker/gpu_model_runner.py) is gone"),
)

# The torch-peak model of each sampler path (per logit of the dummy sampler's max_num_seqs x vocab rows, on every
# rank: the logits are gathered whole before sampling), counted from what the path holds at once:
SAMPLER_BYTES_PER_LOGIT = {
    # model-dtype logits 2 + fp32 copy 4 + logits.sort(): values 4 + int64 indices 8, and inside torch's segmented
    # sort (aten/src/ATen/native/cuda/SortStable.cu segmented_sort_pairs) an int64 index input 8 + cub's alternate
    # key/value buffers 4 + 8
    "sort": 2 + 4 + 4 + 8 + 8 + 12,
    # FlashInfer's top_k_top_p_sampling_from_logits: logits 2 + fp32 4 + masked logits 4 + probs 4
    "flashinfer": 2 + 4 + 4 + 4,
    # logits 2 + fp32 4, masked in place by the Triton kernel, softmax probs 4 + exponential noise 4
    "triton": 2 + 4 + 4 + 4,
    # V0 (vllm/model_executor/layers/sampler.py), as calibrated with the forward on bundled log 07 (0.6.4)
    "v0": 16,
    # Model Runner V2, default sampling params: the logits only, model dtype
    "logits": 2,
    # Model Runner V2 from 0.33: the logits 2 + their fp32 copy 4 (masked in place; top-5 logprobs only)
    "fp32": 2 + 4,
}


@dataclass(frozen=True)
class ReleaseRules:
    """What one vLLM release does when it sizes the KV pool and prints it, for one model runner.

    ``forecast_pool`` reads these, and so do the backward path (``default_utilization``, ``budget_rounds_up``,
    ``group_rule``) and the sliding-window worst case (``window``). Constants marked *calibrated* were measured
    on the fixture logs named (tests/fixtures/vllm_mem_logs); none depends on a model's name.
    """

    era: str
    engine: str
    runner: str                     # 'v0' worker, 'v1' GPUModelRunner, 'v2' Model Runner V2
    utilization: float              # the default gpu_memory_utilization (0.34: with the extensible KV cache)
    budget_rounds_up: bool
    subtracts_cudagraph: bool
    # torch peak: forward pass of max_num_batched_tokens, and the dummy sampler over max_num_seqs x vocab
    peak_rule: str                  # 'sum' (V0: one execute_model call) or 'max' (V1: two calls, forward freed)
    forward_factor: float           # calibrated: x dtype x tokens x (3 I/t + 2 h)
    sampler_bytes_per_logit: int
    non_torch_tp1: int
    non_torch_tp: int               # tp >= 2
    sources: tuple = ()
    sampler: str = "sort"           # the sampler path (SAMPLER_BYTES_PER_LOGIT's key)
    group_rule: str = "1.5"
    in_flight: str = "batched"      # sliding/chunked worst case: 'batched' (F = max_num_batched_tokens) or
    extra_retained: bool = False    # 'concurrent-batches' (max_concurrent_batches x F); + extra_retained_tokens
    token_formula: str = "floor"
    block_size: int = DEFAULT_BLOCK_SIZE
    pool_rule: str = "estimate"     # 'estimate' (ceil(T x u) - parts) or 'measured' (0.34's extensible cache)
    batch_rule: str = "70GiB-not-a100"
    planning: str = "v1/core/kv_cache_utils.py"
    v2_default: str = "none"
    first: str = ""                 # the first release of this era
    checked: str = ""               # what the rules were checked against besides the source
    flashinfer_sampler: bool = False  # V1 samples with FlashInfer when it is installed (0.8-0.11)


_BUDGET = ("vllm/v1/worker/utils.py request_memory: math.ceil(total_memory x gpu_memory_utilization) (0.14+); "
           "gpu_worker.py determine_available_memory: available = requested - non_kv (weights + torch peak "
           "increase + non-torch increase)")

_V0_ERAS = (
    ReleaseRules("V0 <= 0.6.4", V0, "v0", 0.90, False, False, "sum", 0.828, 16, round(0.35 * GiB),
                 round(2.10 * GiB),
                 ("vllm/worker/worker.py determine_num_available_blocks: total x util - peak torch - non-torch",
                  "non_torch_memory printed absolute in 0.6.4 (calibrated 0.35 GiB on bundled log 07)"),
                 group_rule="smallest", checked="bundled log 07", sampler="v0"),
    ReleaseRules("V0 0.6.5-0.6.x", V0, "v0", 0.90, False, False, "sum", 0.828, 16, round(1.79 * GiB),
                 round(2.10 * GiB),
                 ("vllm/worker/worker.py (PR #10511): total x util - weights - non_torch - activation peak",
                  "non_torch_memory absolute, CUDA context included (calibrated 1.79 GiB on mem-log 01)"),
                 group_rule="smallest", checked="mem-log 01", sampler="v0"),
    ReleaseRules("V0 0.7+", V0, "v0", 0.90, False, False, "sum", 0.828, 16, round(0.07 * GiB), round(2.10 * GiB),
                 ("vllm/worker/worker.py: non-torch measured as an increase over the start snapshot",),
                 group_rule="smallest", checked="mem-logs 03, 05", sampler="v0"),
)
# What each release's figures were checked against besides its source (the shared logs, the CPU engine).
_CHECKED = {(0, 10): "mem-log 07, bundled log 20 (0.10.2)", (0, 19): "mem-logs 08, 11, 13, 14 (0.19.0)",
            (0, 27): "mem-log 16 (0.27.1)", (0, 32): "the CPU engine (0.32.0: pages, groups and tokens, not "
            "the GPU pool)"}


def _fold(v: tuple) -> tuple[dict, int]:
    """The V1 fields in force at ``v`` and the index of the boundary that set the last of them."""
    fields, last = {}, 0
    for i, b in enumerate(BOUNDARIES):
        if b.version <= v:
            fields.update(b.changes)
            last = i
    return fields, last


def _era_name(i: int, runner: str) -> str:
    first = BOUNDARIES[i].version
    if i + 1 < len(BOUNDARIES):
        nxt = BOUNDARIES[i + 1].version
        if nxt[2]:
            last = f"{nxt[0]}.{nxt[1]}.{nxt[2] - 1}"
        else:
            last = f"{nxt[0]}.{nxt[1] - 1}" + (".x" if first[2] and first[1] == nxt[1] - 1 else "")
        first_text = ".".join(map(str, first)) if first[2] or nxt[2] else f"{first[0]}.{first[1]}"
        span = first_text if first_text == last else f"{first_text}-{last}"
    else:
        span = f"{first[0]}.{first[1]}"
    if BOUNDARIES[i].changes.get("pool_rule") == "measured":
        return f"V1 {span} (Model Runner V2, extensible KV cache)"
    return f"V1 {span}" + (" (Model Runner V2)" if runner == "v2" else "")


def default_runner(version=None, *, num_experts: int = 0, hybrid: bool = False, architectures=()) -> str:
    """'v1' (GPUModelRunner) or 'v2' (Model Runner V2): which runner vLLM picks by default for a model.

    From ``config/vllm.py`` ``use_v2_model_runner`` of each release: opt-in before 0.24; 0.24 by
    architecture (Llama, Mistral, Qwen3 dense, DeepSeek-V2/V3, Qwen2-MoE, Granite-MoE); 0.25-0.28 every
    model that is not MoE or hybrid (and those MoE architectures); every model from 0.29; the only runner
    from 0.34.

    >>> default_runner("0.24.0"), default_runner("0.25.0"), default_runner("0.25.0", num_experts=128)
    ('v1', 'v2', 'v1')
    >>> default_runner("0.29.0", num_experts=128), default_runner("0.24.0", architectures=["LlamaForCausalLM"])
    ('v2', 'v2')
    """
    v = checked_version(version)
    if v is not None and v < (0, 8, 0):
        return "v1"
    rule = _fold(_at(v))[0]["v2_default"]
    listed = {"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}
    if rule in ("all", "only"):
        return "v2"
    if rule == "architectures":
        return "v2" if set(architectures) & (listed | {"LlamaForCausalLM", "MistralForCausalLM",
                                                       "Qwen3ForCausalLM"}) else "v1"
    if rule == "dense":
        return "v2" if (not num_experts and not hybrid) or set(architectures) & listed else "v1"
    return "v1"


def release_rules(version=None, engine: str | None = None, runner: str | None = None) -> ReleaseRules:
    """The rules of a vLLM release (None = the newest read, ``NEWEST_CHECKED_RELEASE``) for one runner.

    ``engine`` defaults to V0 before 0.8; ``runner`` to Model Runner V2 where the release makes it the
    default for a dense model (``default_runner`` picks by the model's shape). A release newer than
    ``NEWEST_CHECKED_RELEASE`` gets that release's rules with an ``UncheckedReleaseWarning``.

    >>> release_rules("0.19.0").era, round(release_rules("0.6.5").non_torch_tp1 / GiB, 2)
    ('V1 0.18-0.19', 1.79)
    >>> r = release_rules("0.11.0"); r.group_rule, r.sampler, r.sampler_bytes_per_logit
    ('smallest', 'sort', 38)
    >>> r = release_rules("0.34.0"); r.block_size, r.utilization, r.pool_rule, r.runner
    (64, 1.0, 'measured', 'v2')
    """
    v = checked_version(version)
    if engine is None:
        engine = V0 if v is not None and v < (0, 8, 0) else V1
    if engine not in (V0, V1):
        raise VllmLogError(f"engine must be 'v0' or 'v1', got {engine!r}")
    if engine == V0:
        if v is not None and v <= (0, 6, 4):
            return _V0_ERAS[0]
        return _V0_ERAS[1] if v is not None and v < (0, 7, 0) else _V0_ERAS[2]
    at = v if v is not None and v >= (0, 8, 0) else (_NEWEST if v is None else (0, 8, 0))
    at = min(at, _NEWEST)
    f, i = _fold(at)
    if runner is None:
        runner = default_runner(at)
    if runner not in ("v1", "v2"):
        raise VllmLogError(f"runner must be 'v1' or 'v2', got {runner!r}")
    if runner == "v1" and f["v2_default"] == "only":
        raise VllmLogError(f"vLLM {'.'.join(map(str, at))} has no V1 model runner (Model Runner V2 only)")
    if runner == "v2" and f["v2_sampler"] is None:
        raise VllmLogError(f"vLLM {'.'.join(map(str, at))} has no Model Runner V2 (from 0.12)")
    sampler = f["v1_sampler"] if runner == "v1" else f["v2_sampler"]
    graphs = f["v1_graphs"] if runner == "v1" else f["v2_graphs"]
    first = BOUNDARIES[i]
    sources = (_sampler_source(runner, sampler), _BUDGET, *(b.source for b in BOUNDARIES[:i + 1]))
    checked = _CHECKED.get(at[:2], "its source only" + (" (no 0.34 engine or GPU run)" if at >= _NEWEST else ""))
    return ReleaseRules(
        _era_name(i, runner), V1, runner, f["utilization"], f["budget_rounds_up"], graphs, "max", 1.408,
        SAMPLER_BYTES_PER_LOGIT[sampler], round(0.07 * GiB), round(2.10 * GiB), sources, sampler=sampler,
        group_rule=f["group_rule"], in_flight=f["in_flight"], extra_retained=f["extra_retained"],
        token_formula=f["token_formula"], block_size=f["block_size"], pool_rule=f["pool_rule"],
        batch_rule=f["batch_rule"], planning=f["planning"], v2_default=f["v2_default"], first=first.release,
        checked=checked, flashinfer_sampler=runner == "v1" and f["flashinfer_sampler"])


def _sampler_source(runner: str, sampler: str) -> str:
    if runner == "v2":
        return ("vllm/v1/worker/gpu/model_runner.py _dummy_sampler_run: the sampler over max_num_seqs rows, "
                + ("logits only (model dtype)" if sampler == "logits" else
                   "then SamplingParams.for_sampler_warmup(): an fp32 copy of the logits, masked in place"))
    what = {"sort": "logits.to(float32), then apply_top_k_top_p sorts them (values, int64 indices, torch's "
                    "segmented-sort buffers)",
            "triton": "logits.to(float32) masked in place by the Triton top-k/top-p kernel, softmax, noise"}
    return ("vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run(top_k = vocab - 1, top_p = 0.9) -> "
            "vllm/v1/sample/ops/topk_topp_sampler.py: " + what[sampler])


def default_utilization(version=None, *, extensible: bool | None = None) -> float:
    """vLLM's default ``gpu_memory_utilization``: 0.90 before 0.20, 0.92 from 0.20, 1.0 in 0.34.

    ``version`` is a string such as '0.8.5' or a tuple; None means the newest release read (0.34). From
    0.34 the default depends on the sizing mode (``CacheConfig.resolved_gpu_memory_utilization``): 1.0 with
    the extensible KV cache (the default on CUDA and ROCm), ``DEFAULT_GPU_MEMORY_UTILIZATION`` = 0.92 without
    it (``extensible=False``: ``--kv-cache-memory``, other platforms, some connectors). The one definition of
    the default: ``kvlib info``, the planner, the drills and ``predict_pool`` take theirs from here.

    >>> default_utilization("0.19.1"), default_utilization("0.20.2"), default_utilization()
    (0.9, 0.92, 1.0)
    >>> default_utilization("0.34.0", extensible=False)
    0.92
    """
    u = release_rules(version).utilization
    if u == 1.0 and extensible is False:
        return 0.92
    return u


def default_block_size(version=None) -> int:
    """``CacheConfig.DEFAULT_BLOCK_SIZE`` of a release: 16 tokens through 0.33, 64 from 0.34 (None = newest).

    Attention backends may still pick another (FlashMLA 64, CUTLASS MLA 128: ``Platform.
    update_block_size_for_backend``), and hybrid models align it to their state page.

    >>> default_block_size("0.33.0"), default_block_size("0.34.0"), default_block_size()
    (16, 64, 64)
    """
    v = checked_version(version)
    if v is not None and v < (0, 8, 0):
        return DEFAULT_BLOCK_SIZE
    return _fold(min(v, _NEWEST) if v is not None else _NEWEST)[0]["block_size"]


def budget_rounds_up(engine: str = V1, version=None) -> bool:
    """Whether vLLM requests ``ceil(T * u)`` bytes (V1 from 0.14; None = newest) or the float ``T * u``.

    >>> budget_rounds_up("v1", "0.13.0"), budget_rounds_up("v1", "0.14.0"), budget_rounds_up("v0")
    (False, True, False)
    """
    return engine == V1 and release_rules(version, V1).budget_rounds_up


def group_rule(version) -> str:
    """V1's rule for the KV-cache group size of hybrid models, by release (see ``layout.kv_cache_groups``).

    ``_get_kv_cache_groups_uniform_page_size``: 'smallest' through 0.11, '1.25' in 0.12-0.17, '1.5' from
    0.18 (and when unknown).

    >>> group_rule("0.11.0"), group_rule("0.12.0"), group_rule("0.17.1"), group_rule("0.18.0")
    ('smallest', '1.25', '1.25', '1.5')
    """
    v = checked_version(version)
    if v is None:
        return "1.5"
    if v < (0, 8, 0):
        return "smallest"
    return _fold(min(v, _NEWEST))[0]["group_rule"]


def batch_defaults(version, engine: str, gpu_memory_bytes: int, gpu_name: str = "", usage: str = "serve",
                   max_model_len: int | None = None) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM picks when neither is set.

    V1 (``vllm/engine/arg_utils.py`` ``get_batch_defaults``): on GPUs of at least 70 GiB that are not A100s
    (0.9+; 0.8.5 any GPU of 70 GiB; 0.8.0-0.8.4 H100/H200 by name, 1,024 sequences everywhere), 1024 sequences
    and 8192 tokens for ``vllm serve`` (16384 for the offline ``LLM`` class); otherwise 256 and 2048 (8192
    offline). From 0.28 GPUs of at least 160 GiB (B200, B300) take 16,384 tokens for both. V0: 256
    sequences; ``max(max_model_len, 2048)`` tokens, or 2048 with chunked prefill, which V0 turns on by itself
    past a 32K context. The sequences are capped at the tokens.

    >>> batch_defaults("0.19.0", "v1", round(79.19 * GiB), "H100")
    (1024, 8192)
    >>> batch_defaults("0.6.5", "v0", round(79.22 * GiB), max_model_len=8192)
    (256, 8192)
    >>> batch_defaults("0.28.0", "v1", round(178.4 * GiB), "B200"), batch_defaults("0.27.0", "v1", round(178.4 * GiB))
    ((1024, 16384), (1024, 8192))
    """
    if usage not in ("serve", "llm"):
        raise VllmLogError(f"usage must be 'serve' or 'llm', got {usage!r}")
    if engine == V0:
        mnbt = 2048 if max_model_len is None or max_model_len > 32768 else max(max_model_len, 2048)
        return min(256, mnbt), mnbt
    v = checked_version(version)
    rule = _fold(_at(v))[0]["batch_rule"]
    name = gpu_name.lower()
    if rule == "h100-name":       # 0.8.0-0.8.4: 1,024 sequences on every GPU, the larger batch by name
        big = "h100" in name or "h200" in name
        mnbt = (16384 if usage == "llm" else 8192) if big else (8192 if usage == "llm" else 2048)
        return min(1024, mnbt), mnbt
    if rule.startswith("160GiB") and gpu_memory_bytes >= 160 * GiB:
        return 1024, 16384
    big = gpu_memory_bytes >= 70 * GiB and (rule == "70GiB" or "a100" not in name) \
        and not (rule.endswith("not-gb10") and "gb10" in name.replace(" ", ""))
    mns, mnbt = (1024, 16384 if usage == "llm" else 8192) if big else (256, 8192 if usage == "llm" else 2048)
    return min(mns, mnbt), mnbt


def _at(version) -> tuple:
    v = as_version(version)
    return _NEWEST if v is None else min(max(v, (0, 8, 0)), _NEWEST)
